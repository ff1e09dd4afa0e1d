"""Fill a PDF form from a JSON file of field values (or list its fields with --list)."""

import json
import sys

from pypdf import PdfReader, PdfWriter


def main(argv: list[str]) -> int:
    if argv[:1] == ["--list"]:
        for name, field in (PdfReader(argv[1]).get_fields() or {}).items():
            print(name, field.get("/FT"))
        return 0
    source, values, target = argv
    reader = PdfReader(source)
    writer = PdfWriter()
    writer.append(reader)
    with open(values, encoding="utf-8") as handle:
        writer.update_page_form_field_values(writer.pages[0], json.load(handle))
    with open(target, "wb") as handle:
        writer.write(handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

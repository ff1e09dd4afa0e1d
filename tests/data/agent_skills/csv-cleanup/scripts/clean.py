"""Clean a CSV file: strip the header's cells, drop blank rows, ISO dates, decimal points."""

import csv
import re
import sys


def clean(row: list[str]) -> list[str]:
    out = []
    for cell in row:
        cell = cell.strip()
        if re.fullmatch(r"\d{2}\.\d{2}\.\d{4}", cell):
            day, month, year = cell.split(".")
            cell = f"{year}-{month}-{day}"
        elif re.fullmatch(r"-?\d+,\d+", cell):
            cell = cell.replace(",", ".")
        out.append(cell)
    return out


if __name__ == "__main__":
    with open(sys.argv[1], newline="", encoding="utf-8") as src, open(sys.argv[2], "w", newline="") as dst:
        writer = csv.writer(dst)
        for row in csv.reader(src):
            if any(cell.strip() for cell in row):
                writer.writerow(clean(row))

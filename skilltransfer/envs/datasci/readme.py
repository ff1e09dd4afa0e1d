"""The README of each datasci domain: the data dictionary the agent reads, written like a real data release.

It states every convention an answer depends on: file formats, what identifies a record and how repeats look, the
date formats (slash dates are month first) and that dates carry no time of day or time zone, the number format and
missing-value tokens, every unit spelling with its exact conversion factor, how keys join the lookup file and how
their spelling varies, and which keys the lookup lacks. ``tests/envs/test_datasci_conventions.py`` checks that the data
only uses what this text documents and that every answer holds under every reading it allows.
"""

from __future__ import annotations

from skilltransfer.envs.datasci.domains import DATE_FORMAT_DOCS, MISSING_TOKENS, DomainSpec


def _codes(items: list[str] | tuple[str, ...]) -> str:
    return ", ".join(f"`{item}`" for item in items)


def _units(spec: DomainSpec) -> str:
    same = [u for u, f in spec.units if f == 1.0]
    other = [f"`{u}` (1 {u} = {f:.12g} {spec.canonical_unit})" for u, f in spec.units if f != 1.0]
    return f"{_codes(same)} (all {spec.canonical_unit}), " + ", ".join(other)


def _missing() -> str:
    tokens = [t for t in MISSING_TOKENS if t]
    return "an empty field, " + ", ".join(f"`{t}`" for t in tokens[:-1]) + f" or `{tokens[-1]}`"


def _lookup(spec: DomainSpec) -> str:
    key_example = f"{spec.key_prefix}-001"
    if not spec.lookup_is_json:
        return (f"CSV with columns `{spec.lookup_key}` (the key, written `{key_example}`), `name`, "
                f"`{spec.group_field}` (the {spec.group_label}) and `listed_since` (a year).")
    parent, _, child = spec.group_field.rpartition(".")
    inner = f'"{child}": "<{spec.group_label}>", "listed_since": <year>'
    record = (f'{{"{spec.lookup_key}": "{key_example}", "name": "...", "{parent}": {{{inner}}}}}' if parent
              else f'{{"{spec.lookup_key}": "{key_example}", "name": "...", {inner}}}')
    return (f'JSON: `{{"source": "...", "{spec.lookup_records}": [{record}, ...]}}`; the {spec.group_label} is '
            f"`{spec.group_field}`.")


def domain_readme(spec: DomainSpec) -> str:
    """The README.md text of one domain folder."""
    date_formats = "; ".join(DATE_FORMAT_DOCS.values())
    return (
        f"# {spec.title}\n\n"
        f"Files are UTF-8: CSV with a header row, comma-separated, fields that contain a comma in double quotes; "
        f"JSON as described below. `{spec.main_file}` was entered by hand by several teams, so spellings vary as "
        f"described here.\n\n"
        f"## `{spec.main_file}`: one row per {spec.noun}\n\n"
        f"| column | meaning and format |\n| --- | --- |\n"
        f"| `{spec.id_col}` | identifies a {spec.noun}, written `{spec.id_prefix}-00001`. The export repeats some "
        f"{spec.nouns}: a repeated row has the same `{spec.id_col}` and the same values, possibly with another "
        f"spelling of the date, letter case or spacing. Count each {spec.noun} once. |\n"
        f"| `{spec.key_col}` | key into `{spec.lookup_file}` (field `{spec.lookup_key}`), written "
        f"`{spec.key_prefix}-001`; letter case and surrounding spaces vary (` {spec.key_prefix.lower()}-001` is "
        f"`{spec.key_prefix}-001`). |\n"
        f"| `{spec.date_col}` | the date of the {spec.noun}: a calendar date, with no time of day and no time zone. "
        f"Written in any of these formats: {date_formats}. Slash dates are always month first. |\n"
        f"| `{spec.cat_col}` | the {spec.cat_label}: one of {_codes(spec.categories)}; letter case and surrounding "
        f"spaces vary. |\n"
        f"| `{spec.value_col}` | the {spec.measure}, in the unit given by `{spec.unit_col}`. `.` is the decimal mark "
        f"and `,` only groups thousands (`1,234.5`). A missing {spec.measure} is written as {_missing()}; a "
        f"{spec.noun} without a recorded {spec.measure} still counts as a {spec.noun}. |\n"
        f"| `{spec.unit_col}` | the unit of `{spec.value_col}`: {_units(spec)}. Spellings may carry surrounding "
        f"spaces; where the {spec.measure} is missing the unit may be empty. |\n\n"
        f"## `{spec.lookup_file}`: one record per `{spec.lookup_key}`\n\n"
        f"{_lookup(spec)} Keys are written in upper case. A few `{spec.key_col}` values of `{spec.main_file}` are "
        f"not listed here: leave those {spec.nouns} out of per-{spec.group_label} results.\n"
    )

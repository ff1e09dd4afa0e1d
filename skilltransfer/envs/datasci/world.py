"""Generate the datasci world: clean ground-truth records per domain and their realistically messy files.

The clean records (harness side) are what the answers are computed from; the files written into the workspace
render the same records the way real exports look: duplicated rows, missing values spelled several ways, a unit
column mixing units, dates in mixed formats, inconsistent casing and stray whitespace, thousands separators, and a
grouping attribute that lives in a second (CSV or nested JSON) file keyed by a join key, some keys missing from it.
Everything is deterministic from the seed.
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

from skilltransfer.envs.datasci.domains import DATE_FORMATS, DOMAINS, MISSING_TOKENS, DomainSpec
from skilltransfer.envs.datasci.readme import domain_readme

ORPHAN_KEYS = 2
"""Keys used in the main file but absent from the lookup file."""
DUPLICATE_SHARE = 0.06
MISSING_SHARE = 0.06


@dataclass(frozen=True)
class Record:
    """One clean record: value is in the canonical unit (None when missing)."""

    id: str
    key: str
    day: date
    category: str
    value: float | None


@dataclass
class DomainData:
    """A domain's clean records, its lookup (key -> group), and the rendered files (relative path -> text)."""

    spec: DomainSpec
    records: list[Record]
    groups: dict[str, str]
    files: dict[str, str] = field(default_factory=dict)

    @property
    def folder(self) -> str:
        return f"data/{self.spec.name}"

    @property
    def main_path(self) -> str:
        return f"{self.folder}/{self.spec.main_file}"

    @property
    def lookup_path(self) -> str:
        return f"{self.folder}/{self.spec.lookup_file}"

    @property
    def n_rows(self) -> int:
        """Data rows in the main file (duplicates included)."""
        return self.files[self.main_path].count("\n") - 1


def _format_number(value: float, decimals: int, rng: random.Random) -> str:
    text = f"{value:.{decimals}f}"
    if abs(value) >= 1000 and rng.random() < 0.35:
        text = f"{value:,.{decimals}f}"
    return text


def _messy_case(text: str, rng: random.Random, p: float = 0.35) -> str:
    if rng.random() >= p:
        return text
    variant = rng.choice((text.lower(), text.upper(), f" {text}", f"{text} ", text.lower() + " "))
    return variant if variant.strip() else text


def _render_value(spec: DomainSpec, value: float | None, rng: random.Random) -> tuple[str, str, float | None]:
    """(value text, unit text, canonical value as the text states it)."""
    if value is None:
        unit = rng.choice((spec.units[0][0], ""))
        return rng.choice(MISSING_TOKENS), unit, None
    canonical = [u for u, f in spec.units if f == 1.0]
    other = [(u, f) for u, f in spec.units if f != 1.0]
    if rng.random() < 0.25 and other:
        unit, factor = rng.choice(other)
    else:
        unit, factor = rng.choice(canonical), 1.0
    decimals = max(0, spec.decimals + round(math.log10(factor)))
    text = _format_number(value / factor, decimals, rng)
    if rng.random() < 0.1:
        unit = rng.choice((f" {unit}", f"{unit} "))
    return text, unit, float(text.replace(",", "")) * factor


def _random_day(spec: DomainSpec, rng: random.Random) -> date:
    start, end = date(spec.years[0], 1, 1), date(spec.years[1], 12, 31)
    return start + timedelta(days=rng.randrange((end - start).days + 1))


def generate_domain(spec: DomainSpec, seed: int) -> DomainData:
    """Build one domain's clean records and messy files."""
    rng = random.Random(f"datasci:{seed}:{spec.name}")
    keys = [f"{spec.key_prefix}-{i:03d}" for i in range(1, spec.n_keys + 1)]
    groups = {key: spec.groups[i % len(spec.groups)] for i, key in enumerate(keys)}
    shuffled = list(spec.groups)
    rng.shuffle(shuffled)
    for key in keys[len(spec.groups):]:
        groups[key] = rng.choice(shuffled[: max(2, len(shuffled) - 1)])  # uneven group sizes
    orphans = rng.sample(keys, ORPHAN_KEYS)
    key_weights = [rng.uniform(0.3, 3.0) for _ in keys]
    cat_scale = {c: rng.uniform(0.4, 2.5) for c in spec.categories}
    cat_weights = [rng.uniform(0.5, 2.0) for _ in spec.categories]
    lo, hi = spec.value_range

    records: list[Record] = []
    rows: list[list[str]] = []
    for i in range(spec.n_records):
        key = rng.choices(keys, key_weights)[0]
        category = rng.choices(spec.categories, cat_weights)[0]
        day = _random_day(spec, rng)
        value: float | None = None
        if rng.random() >= MISSING_SHARE:
            value = math.exp(rng.uniform(math.log(lo), math.log(hi))) * cat_scale[category]
        value_text, unit_text, stated = _render_value(spec, value, rng)
        record = Record(f"{spec.id_prefix}-{i + 1:05d}", key, day, category, stated)
        records.append(record)
        row = _render_row(record, value_text, unit_text, rng)
        rows.append(row)
        if rng.random() < DUPLICATE_SHARE:  # re-exported: same values, possibly other date/case spellings
            rows.append(row if rng.random() < 0.5 else _render_row(record, value_text, unit_text, rng))
    rng.shuffle(rows)

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([spec.id_col, spec.key_col, spec.date_col, spec.cat_col, spec.value_col, spec.unit_col])
    writer.writerows(rows)
    lookup = {k: g for k, g in groups.items() if k not in orphans}
    data = DomainData(spec, records, lookup)
    data.files[data.main_path] = buffer.getvalue()
    data.files[data.lookup_path] = _render_lookup(spec, lookup, rng)
    data.files[f"{data.folder}/README.md"] = domain_readme(spec)
    return data


def _render_row(record: Record, value_text: str, unit_text: str, rng: random.Random) -> list[str]:
    key = record.key if rng.random() < 0.8 else _messy_case(record.key, rng, 1.0)
    return [record.id, key, record.day.strftime(rng.choice(DATE_FORMATS)), _messy_case(record.category, rng),
            value_text, unit_text]


def _render_lookup(spec: DomainSpec, lookup: dict[str, str], rng: random.Random) -> str:
    entries = []
    for key, group in sorted(lookup.items()):
        name = f"{group} {spec.key_prefix.lower()}{key.split('-')[1]}"
        entries.append((key, name, group, rng.randint(1990, 2015)))
    if not spec.lookup_is_json:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([spec.lookup_key, "name", spec.group_field, "listed_since"])
        writer.writerows(entries)
        return buffer.getvalue()
    records = []
    for key, name, group, since in entries:
        item: dict[str, object] = {spec.lookup_key: key, "name": name}
        parent, _, child = spec.group_field.rpartition(".")
        if parent:
            item[parent] = {child: group, "listed_since": since}
        else:
            item[child] = group
            item["listed_since"] = since
        records.append(item)
    assert spec.lookup_records is not None
    return json.dumps({"source": spec.title, spec.lookup_records: records}, indent=1, ensure_ascii=False) + "\n"


@dataclass
class World:
    """All domains of one seed."""

    seed: int
    domains: dict[str, DomainData]

    def write(self, root: Path, domains: list[str] | None = None) -> None:
        """Write the data files of ``domains`` (default all) under ``root``, e.g. ``root/data/crime/incidents.csv``."""
        for name, data in self.domains.items():
            if domains is not None and name not in domains:
                continue
            for rel, text in data.files.items():
                path = Path(root) / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")


def generate_world(seed: int) -> World:
    """Generate every domain for ``seed``."""
    return World(seed, {spec.name: generate_domain(spec, seed) for spec in DOMAINS})

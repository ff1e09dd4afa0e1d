"""Question templates, written once against the domain schema and instantiated in every domain.

Each template picks parameters with the world's RNG, computes the expected answer and the annotated subtask
answers in plain Python from the *clean* records (independently of the pandas reference pipeline, which works on
the messy files), and emits the reference pipeline. Parameters that would make the answer ambiguous (ties, empty
selections, thresholds too close to a value) are rejected and redrawn.
"""

from __future__ import annotations

import random
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from skilltransfer.envs.datasci.domains import DomainSpec
from skilltransfer.envs.datasci.kramabench import APPROX_RELATIVE
from skilltransfer.envs.datasci.world import DomainData, Record

GAP = 1e-6
"""Minimal relative gap between a winner and the runner-up (or a value and a threshold)."""


@dataclass(frozen=True)
class Question:
    """One instantiated question with its expected answer, subtasks and reference pipeline."""

    template: str
    instruction: str
    answer: Any
    answer_type: str
    subprocedures: tuple[str, ...]
    subtasks: tuple[tuple[str, Any], ...]
    pipeline: tuple[str, ...]


def plural(word: str) -> str:
    return f"{word[:-1]}ies" if word.endswith("y") else f"{word}s"


def _spread(values: list[float], gap: float) -> bool:
    """Every two values differ by more than ``gap`` relative to the larger one."""
    ordered = sorted(abs(v) for v in values)
    return all(b - a > gap * b for a, b in zip(ordered, ordered[1:], strict=False))


def _separated(values: list[float], k: int = 1) -> bool:
    """The k-th largest value is strictly above the (k+1)-th, and the top k are distinct."""
    top = sorted(values, reverse=True)[: k + 1]
    return all(a - b > GAP * max(abs(a), 1.0) for a, b in zip(top, top[1:], strict=False))


def _threshold(values: list[float], lo_q: float, hi_q: float, rng: random.Random, decimals: int) -> float | None:
    """A rounded threshold strictly between two adjacent distinct values, from a quantile band."""
    ordered = sorted(set(values))
    if len(ordered) < 2:
        return None
    i = min(len(ordered) - 2, int(rng.uniform(lo_q, hi_q) * (len(ordered) - 1)))
    t = round((ordered[i] + ordered[i + 1]) / 2, decimals)
    if not ordered[i] + GAP * max(abs(ordered[i]), 1) < t < ordered[i + 1] - GAP * max(abs(ordered[i + 1]), 1):
        return None
    return t


def _winner(totals: dict[str, float]) -> str | None:
    """The key with the largest total, if there are two or more and it is clearly ahead of the runner-up."""
    if len(totals) < 2 or not _separated(list(totals.values())):
        return None
    return max(totals, key=lambda k: totals[k])


def _whole_year(year: int) -> tuple[date, date]:
    return date(year, 1, 1), date(year, 12, 31)


def _day_range(spec: DomainSpec, rng: random.Random, min_days: int, max_days: int) -> tuple[date, date]:
    first, last = date(spec.years[0], 1, 1), date(spec.years[1], 12, 31)
    length = rng.randint(min_days, max_days)
    start = first + timedelta(days=rng.randrange((last - first).days - length))
    return start, start + timedelta(days=length)


# ---- shared pipeline fragments -------------------------------------------------------------------------------

def _load(d: DomainData, dedupe: bool = True) -> list[str]:
    s = d.spec
    lines = [f'df = load_and_clean_csv("{d.main_path}", upper=["{s.key_col}"], lower=["{s.cat_col}"])']
    return lines + ([f'df = dedupe_rows(df, "{s.id_col}")'] if dedupe else [])


def _units(d: DomainData) -> list[str]:
    s = d.spec
    return [f'df = normalise_units(df, "{s.value_col}", "{s.unit_col}", {dict(s.units)!r})']


def _dates(d: DomainData, start: date | None = None, end: date | None = None) -> list[str]:
    lines = [f'df = parse_mixed_dates(df, "{d.spec.date_col}")']
    if start and end:
        lines.append(f'df = filter_by_date_range(df, "{start.isoformat()}", "{end.isoformat()}")')
    return lines


def _join(d: DomainData) -> list[str]:
    s = d.spec
    if s.lookup_is_json:
        load = f'lookup = load_json_records("{d.lookup_path}", "{s.lookup_records}", upper=["{s.lookup_key}"])'
    else:
        load = f'lookup = load_and_clean_csv("{d.lookup_path}", upper=["{s.lookup_key}"])'
    return [load, f'df = join_on_key(df, lookup, "{s.key_col}", "{s.lookup_key}")']


def _join_procs(d: DomainData) -> list[str]:
    return ["load_json_records" if d.spec.lookup_is_json else "load_and_clean_csv", "join_on_key"]


def _procs(*names: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))


def _unique_q(d: DomainData) -> tuple[str, Any]:
    return (f"How many distinct {d.spec.nouns} does {d.main_path} contain once repeated rows are removed?",
            len(d.records))


def _values(records: list[Record]) -> list[float]:
    return [r.value for r in records if r.value is not None]


def _in(r: Record, start: date, end: date) -> bool:
    return start <= r.day <= end


def _totals(records: list[Record], key: Callable[[Record], str | None], how: str = "sum") -> dict[str, float]:
    groups: dict[str, list[float]] = defaultdict(list)
    for r in records:
        k = key(r)
        if k is not None and r.value is not None:
            groups[k].append(r.value)
    agg = sum if how == "sum" else statistics.fmean
    return {k: float(agg(v)) for k, v in groups.items()}


def _rounded(mapping: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 2) for k, v in sorted(mapping.items())}


def _year(d: DomainData, rng: random.Random) -> int:
    return rng.randint(*d.spec.years)


# ---- templates ---------------------------------------------------------------------------------------------

def category_mean(d: DomainData, rng: random.Random) -> Question | None:
    s = d.spec
    cat = rng.choice(s.categories)
    values = _values([r for r in d.records if r.category == cat])
    if len(values) < 5:
        return None
    mean = statistics.fmean(values)
    return Question(
        "category_mean",
        f"What is the average {s.measure} of {cat} {s.nouns} in {d.folder}, in {s.canonical_unit}? "
        f"Round to 2 decimals.", mean, "numeric_approximate",
        _procs("load_and_clean_csv", "dedupe_rows", "normalise_units", "group_aggregate"),
        (_unique_q(d), (f"How many distinct {cat} {s.nouns} have a recorded {s.measure}?", len(values)),
         (f"What is the total {s.measure} of those {s.nouns} in {s.canonical_unit}?", round(sum(values), 2))),
        (*_load(d), *_units(d), f'means = group_aggregate(df, "{s.cat_col}", "value_std", "mean")',
         f'answer = round(float(means["{cat.lower()}"]), 2)'),
    )


def count_in_range(d: DomainData, rng: random.Random) -> Question | None:
    s = d.spec
    cat = rng.choice(s.categories)
    start, end = _day_range(s, rng, 60, 400)
    in_range = [r for r in d.records if _in(r, start, end)]
    count = sum(r.category == cat for r in in_range)
    if count < 3:
        return None
    return Question(
        "count_in_range",
        f"How many distinct {cat} {s.nouns} in {d.folder} are dated between {start.isoformat()} and "
        f"{end.isoformat()} (both inclusive)?", count, "numeric_exact",
        _procs("load_and_clean_csv", "dedupe_rows", "parse_mixed_dates", "filter_by_date_range"),
        (_unique_q(d), (f"How many distinct {s.nouns} of any {s.cat_label} are dated in that range?", len(in_range))),
        (*_load(d), *_dates(d, start, end), f'answer = int((df["{s.cat_col}"] == "{cat.lower()}").sum())'),
    )


def busiest_month(d: DomainData, rng: random.Random) -> Question | None:
    s = d.spec
    year = _year(d, rng)
    months = Counter(r.day.strftime("%Y-%m") for r in d.records if r.day.year == year)
    if not months or not _separated([float(c) for c in months.values()]):
        return None
    best, top = months.most_common(1)[0]
    return Question(
        "busiest_month",
        f"In {year}, which month had the most distinct {s.nouns} in {d.folder}? Answer as YYYY-MM.",
        best, "string_exact",
        _procs("load_and_clean_csv", "dedupe_rows", "parse_mixed_dates", "filter_by_date_range", "group_aggregate",
               "top_k"),
        (_unique_q(d), (f"How many distinct {s.nouns} are dated in {year}?", sum(months.values())),
         ("How many distinct ones fall in the busiest month?", top)),
        (*_load(d), *_dates(d, date(year, 1, 1), date(year, 12, 31)),
         f'counts = group_aggregate(df, df["date"].dt.strftime("%Y-%m"), "{s.id_col}", "count")',
         "answer = str(top_k(counts, 1).index[0])"),
    )


def top_groups_by_total(d: DomainData, rng: random.Random) -> Question | None:
    s = d.spec
    k = rng.randint(2, 3)
    totals = _totals(d.records, lambda r: d.groups.get(r.key))
    if len(totals) <= k or not _separated(list(totals.values()), k):
        return None
    best = sorted(totals, key=lambda g: -totals[g])[:k]
    joined = sum(r.key in d.groups for r in d.records)
    return Question(
        "top_groups_by_total",
        f"Which {k} {plural(s.group_label)} have the highest total {s.measure} (in {s.canonical_unit}) over all "
        f"{s.nouns} in {d.folder}? Answer with a list of {s.group_label} names, highest first.",
        best, "list_exact",
        _procs("load_and_clean_csv", "dedupe_rows", "normalise_units", *_join_procs(d), "group_aggregate", "top_k"),
        (_unique_q(d), (f"How many of them have a {s.key_col} listed in {s.lookup_file}?", joined),
         (f"What is the total {s.measure} per {s.group_label}?", _rounded(totals))),
        (*_load(d), *_units(d), *_join(d), f'totals = group_aggregate(df, "{s.group_field}", "value_std", "sum")',
         f"answer = list(top_k(totals, {k}).index)"),
    )


def groups_above_threshold(d: DomainData, rng: random.Random) -> Question | None:
    s = d.spec
    cat = rng.choice(s.categories)
    means = _totals([r for r in d.records if r.category == cat], lambda r: d.groups.get(r.key), "mean")
    t = _threshold(list(means.values()), 0.2, 0.8, rng, 2)
    if len(means) < 3 or t is None:
        return None
    above = sorted(g for g, m in means.items() if m > t)
    return Question(
        "groups_above_threshold",
        f"List every {s.group_label} whose {cat} {s.nouns} (in {d.folder}) have an average {s.measure} above {t} "
        f"{s.canonical_unit}. Order does not matter.", above, "list_exact",
        _procs("load_and_clean_csv", "dedupe_rows", "normalise_units", *_join_procs(d), "group_aggregate"),
        (_unique_q(d),
         (f"How many distinct {cat} {s.nouns} have a {s.key_col} listed in {s.lookup_file}?",
          sum(r.category == cat and r.key in d.groups for r in d.records)),
         (f"What is the average {s.measure} of {cat} {s.nouns} per {s.group_label}?", _rounded(means))),
        (*_load(d), *_units(d), *_join(d), f'sel = df[df["{s.cat_col}"] == "{cat.lower()}"]',
         f'means = group_aggregate(sel, "{s.group_field}", "value_std", "mean")',
         f"answer = sorted(means[means > {t!r}].index)"),
    )


def max_category_in_group(d: DomainData, rng: random.Random) -> Question | None:
    s = d.spec
    year, group = _year(d, rng), rng.choice(sorted(set(d.groups.values())))
    in_year = [r for r in d.records if r.day.year == year]
    selected = [r for r in in_year if d.groups.get(r.key) == group]
    totals = _totals(selected, lambda r: r.category)
    best = _winner(totals)
    if best is None:
        return None
    start, end = _whole_year(year)
    return Question(
        "max_category_in_group",
        f"In {year}, which {s.cat_label} had the highest total {s.measure} (in {s.canonical_unit}) among the "
        f"{s.nouns} in {d.folder} from the {s.group_label} {group}?", best, "string_exact",
        _procs("load_and_clean_csv", "dedupe_rows", "normalise_units", "parse_mixed_dates", "filter_by_date_range",
               *_join_procs(d), "group_aggregate", "top_k"),
        (_unique_q(d), (f"How many distinct {s.nouns} are dated in {year}?", len(in_year)),
         (f"How many of those come from the {s.group_label} {group}?", len(selected)),
         (f"What is their total {s.measure} per {s.cat_label}?", _rounded(totals))),
        (*_load(d), *_units(d), *_dates(d, start, end), *_join(d), f'sel = df[df["{s.group_field}"] == "{group}"]',
         f'totals = group_aggregate(sel, "{s.cat_col}", "value_std", "sum")',
         "answer = str(top_k(totals, 1).index[0])"),
    )


def share_above_threshold(d: DomainData, rng: random.Random) -> Question | None:
    s = d.spec
    start, end = _day_range(s, rng, 180, 700)
    valued = _values([r for r in d.records if _in(r, start, end)])
    t = _threshold(valued, 0.3, 0.8, rng, s.decimals + 1)
    if len(valued) < 20 or t is None:
        return None
    above = sum(v > t for v in valued)
    return Question(
        "share_above_threshold",
        f"Of the {s.nouns} in {d.folder} dated between {start.isoformat()} and {end.isoformat()} (both inclusive) "
        f"that have a recorded {s.measure}, what percentage exceed {t} {s.canonical_unit}? Answer with a number of "
        f"percent without the % sign, rounded to 2 decimals.",
        100 * above / len(valued), "numeric_approximate",
        _procs("load_and_clean_csv", "dedupe_rows", "normalise_units", "parse_mixed_dates", "filter_by_date_range"),
        (_unique_q(d), (f"How many distinct {s.nouns} in that date range have a recorded {s.measure}?", len(valued)),
         (f"How many of them exceed {t} {s.canonical_unit}?", above)),
        (*_load(d), *_units(d), *_dates(d, start, end), 'valued = df[df["value_std"].notna()]',
         f'answer = round(100 * float((valued["value_std"] > {t!r}).mean()), 2)'),
    )


def count_missing(d: DomainData, rng: random.Random) -> Question | None:
    s = d.spec
    cat = rng.choice((None, *s.categories))
    pool = [r for r in d.records if cat is None or r.category == cat]
    missing = sum(r.value is None for r in pool)
    if not missing:
        return None
    what = f"{cat} {s.nouns}" if cat else s.nouns
    select = [f'df = df[df["{s.cat_col}"] == "{cat.lower()}"]'] if cat else []
    return Question(
        "count_missing",
        f"How many distinct {what} in {d.folder} have no recorded {s.measure}?", missing, "numeric_exact",
        _procs("load_and_clean_csv", "dedupe_rows", "normalise_units"),
        ((f"How many data rows does {d.main_path} have, repeated rows included?", d.n_rows), _unique_q(d)),
        (*_load(d), *_units(d), *select, 'answer = int(df["value_std"].isna().sum())'),
    )


def max_value_record(d: DomainData, rng: random.Random) -> Question | None:
    s = d.spec
    cat = rng.choice((None, *s.categories))
    pool = [(r.id, r.value) for r in d.records if r.value is not None and (cat is None or r.category == cat)]
    if len(pool) < 2 or not _separated([v for _, v in pool]):
        return None
    best_id, best_value = max(pool, key=lambda p: p[1])
    what = f"{cat} {s.noun}" if cat else s.noun
    select = [f'df = df[df["{s.cat_col}"] == "{cat.lower()}"]'] if cat else []
    return Question(
        "max_value_record",
        f"Which {what} in {d.folder} has the largest {s.measure} once all values are converted to "
        f"{s.canonical_unit}? Answer with its {s.id_col}.", best_id, "string_exact",
        _procs("load_and_clean_csv", "normalise_units", "top_k"),
        ((f"What is the largest {s.measure} among those {s.nouns}, in {s.canonical_unit}?", round(best_value, 3)),),
        (*_load(d, dedupe=False), *_units(d), *select,
         f'answer = str(top_k(df.set_index("{s.id_col}")["value_std"], 1).index[0])'),
    )


def yearly_means(d: DomainData, rng: random.Random) -> Question | None:
    s = d.spec
    cat = rng.choice(s.categories)
    first = rng.randint(s.years[0], s.years[1] - 2)
    years = (first, first + 1, first + 2)
    by_year = {y: _values([r for r in d.records if r.category == cat and r.day.year == y]) for y in years}
    if any(len(v) < 3 for v in by_year.values()):
        return None
    means = [statistics.fmean(by_year[y]) for y in years]
    if min(means) < 1 or not _spread(means, 3 * APPROX_RELATIVE):  # rounding stays far below the 1 % tolerance,
        return None                                                 # and no answer item can match two years
    return Question(
        "yearly_means",
        f"What was the average {s.measure} of {cat} {s.nouns} in {d.folder} in each year from {years[0]} to "
        f"{years[-1]}, in {s.canonical_unit}? Answer with a list of numbers, one per year in chronological order, "
        f"rounded to 2 decimals.", means, "list_approximate",
        _procs("load_and_clean_csv", "dedupe_rows", "normalise_units", "parse_mixed_dates", "filter_by_date_range",
               "group_aggregate"),
        (_unique_q(d),
         (f"How many distinct {cat} {s.nouns} dated {years[0]} to {years[-1]} have a recorded {s.measure}?",
          sum(len(v) for v in by_year.values())),
         ("How many of them are dated in each of those years?", {str(y): len(by_year[y]) for y in years})),
        (*_load(d), *_units(d), *_dates(d, date(years[0], 1, 1), date(years[-1], 12, 31)),
         f'sel = df[df["{s.cat_col}"] == "{cat.lower()}"]',
         'means = group_aggregate(sel, sel["date"].dt.year, "value_std", "mean")',
         "answer = [round(float(v), 2) for v in means.sort_index()]"),
    )


def top_combination(d: DomainData, rng: random.Random) -> Question | None:
    s = d.spec
    year = _year(d, rng)
    in_year = [r for r in d.records if r.day.year == year]
    totals = _totals(in_year, lambda r: f"{r.category} in {d.groups[r.key]}" if r.key in d.groups else None)
    best = _winner(totals)
    if best is None:
        return None
    start, end = _whole_year(year)
    return Question(
        "top_combination",
        f"In {year}, which combination of {s.cat_label} and {s.group_label} had the highest total {s.measure} (in "
        f"{s.canonical_unit}) among the {s.nouns} in {d.folder}? Answer as '<{s.cat_label}> in <{s.group_label}>'.",
        best, "string_approximate",
        _procs("load_and_clean_csv", "dedupe_rows", "normalise_units", "parse_mixed_dates", "filter_by_date_range",
               *_join_procs(d), "group_aggregate", "top_k"),
        (_unique_q(d), (f"How many distinct {s.nouns} are dated in {year}?", len(in_year)),
         (f"What is their total {s.measure} per {s.cat_label} and {s.group_label}?", _rounded(totals))),
        (*_load(d), *_units(d), *_dates(d, start, end), *_join(d),
         f'totals = group_aggregate(df, ["{s.cat_col}", "{s.group_field}"], "value_std", "sum")',
         "category, group = top_k(totals, 1).index[0]",
         'answer = f"{category} in {group}"'),
    )


TEMPLATES: dict[str, Callable[[DomainData, random.Random], Question | None]] = {
    f.__name__: f for f in (category_mean, count_in_range, busiest_month, top_groups_by_total,
                            groups_above_threshold, max_category_in_group, share_above_threshold, count_missing,
                            max_value_record, yearly_means, top_combination)
}

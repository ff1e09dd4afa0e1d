"""Reference-solution building blocks: one pandas function per shared sub-procedure.

A task's reference solution is the source of the helper functions its pipeline uses, followed by the
task-specific pipeline lines and ``complete_task(answer=answer)``. The same helper text recurs across templates and
domains, which is what makes these sub-procedures transferable skills. Kept out of the agent's view.
"""

from __future__ import annotations

HELPERS: dict[str, str] = {
    "load_and_clean_csv": '''
def load_and_clean_csv(path, upper=(), lower=()):
    """Read a CSV as text; tidy header names and cell whitespace; upper/lower-case the given columns."""
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    df.columns = [c.strip().lower() for c in df.columns]
    df = df.apply(lambda col: col.str.strip())
    for col in upper:
        df[col] = df[col].str.upper()
    for col in lower:
        df[col] = df[col].str.lower()
    return df
''',
    "load_json_records": '''
def load_json_records(path, records_key, upper=()):
    """Flatten the list of records under ``records_key`` of a JSON file into a table (nested keys dotted)."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    df = pd.json_normalize(data[records_key])
    for col in upper:
        df[col] = df[col].astype(str).str.strip().str.upper()
    return df
''',
    "dedupe_rows": '''
def dedupe_rows(df, id_col):
    """Keep one row per record id (re-exported rows may differ only in formatting)."""
    return df.drop_duplicates(subset=[id_col]).reset_index(drop=True)
''',
    "normalise_units": '''
def normalise_units(df, value_col, unit_col, factors, out="value_std"):
    """Parse numbers (thousands separators, missing tokens -> NaN) and convert to one unit via ``factors``."""
    values = pd.to_numeric(df[value_col].str.replace(",", "", regex=False), errors="coerce")
    factor = df[unit_col].str.strip().str.lower().map({u.lower(): f for u, f in factors.items()})
    df = df.copy()
    df[out] = values * factor
    return df
''',
    "parse_mixed_dates": '''
def parse_mixed_dates(df, col, out="date"):
    """Parse dates written in mixed formats (ISO, MM/DD/YYYY, '5 Apr 2023', 'April 5, 2023', YYYYMMDD)."""
    df = df.copy()
    df[out] = pd.to_datetime(df[col].str.strip(), format="mixed", errors="coerce")
    return df
''',
    "filter_by_date_range": '''
def filter_by_date_range(df, start, end, col="date"):
    """Rows whose date lies in [start, end], both inclusive."""
    return df[(df[col] >= pd.Timestamp(start)) & (df[col] <= pd.Timestamp(end))]
''',
    "join_on_key": '''
def join_on_key(left, right, left_key, right_key):
    """Inner join: rows whose key has no match in ``right`` are dropped."""
    return left.merge(right, left_on=left_key, right_on=right_key, how="inner")
''',
    "group_aggregate": '''
def group_aggregate(df, by, value, how):
    """Aggregate ``value`` per group (how: "sum", "mean", "count", ...), NaN values skipped."""
    return df.groupby(by)[value].agg(how)
''',
    "top_k": '''
def top_k(series, k):
    """The k largest entries of a Series, largest first."""
    return series.dropna().sort_values(ascending=False, kind="mergesort").head(k)
''',
}

SUBPROCEDURES: tuple[str, ...] = tuple(HELPERS)


def assemble(subprocedures: list[str], pipeline: list[str]) -> str:
    """Reference solution source: imports, the used helpers, the pipeline, then ``complete_task(answer=answer)``."""
    unknown = [name for name in subprocedures if name not in HELPERS]
    if unknown:
        raise ValueError(f"unknown sub-procedures: {unknown}")
    parts = ["import json\n\nimport pandas as pd\n"]
    parts += [HELPERS[name] for name in subprocedures]
    parts.append("\n" + "\n".join(pipeline) + "\ncomplete_task(answer=answer)\n")
    return "".join(parts)

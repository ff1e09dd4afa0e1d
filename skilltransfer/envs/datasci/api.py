"""The datasci env's API overview for the agent (harness side); the apps themselves are in ``datasci_tools``."""

from __future__ import annotations

import inspect

from skilltransfer.envs.datasci.datasci_tools.apps import FilesApp, setup

__all__ = ["docs_text", "setup"]


EXAMPLE = """## Example (another task): "What is the mean elevation, in m, of the stations in data/weather?"
Thought: The README gives the data conventions. I list the domain's files, read the README and look at the file.
```python
print(apis.files.list_files("weather"))
print(apis.files.read_text("data/weather/README.md"))
print(apis.files.describe("data/weather/stations.csv"))
```
Observation: [{'path': 'data/weather/README.md', 'size_bytes': 912}, {'path': 'data/weather/stations.csv', \
'size_bytes': 1877}]
# Weather station register
`stations.csv`: one row per station. `station_id` (`ST-001`) identifies a station; the export repeats some stations \
(same values, other spacing): count each once. `elevation` in the unit of `elevation_unit` (`m`, `ft`; 1 ft = 0.3048 \
m); `,` groups thousands; a missing elevation is empty, `NA` or `-`.
{'path': 'data/weather/stations.csv', 'kind': 'csv', 'columns': ['station_id', 'name', 'elevation', 'elevation_unit'], \
'n_rows': 44, 'first_rows': [{'station_id': 'ST-007', 'name': 'Hill Farm', 'elevation': '1,204', \
'elevation_unit': 'ft'}]}
Report: data/weather/stations.csv has 44 rows with columns station_id, name, elevation, elevation_unit. README: \
count each station_id once (the export repeats some, with other spacing); elevation is in the unit of \
elevation_unit (m or ft; 1 ft = 0.3048 m); ',' groups thousands; a missing elevation is empty, NA or -.
Thought: I load the file as text, clean it as the README says (spaces, one row per station, missing values, units) \
and print the result.
```python
import pandas as pd
df = pd.read_csv("data/weather/stations.csv", dtype=str, keep_default_na=False)
df = df.apply(lambda col: col.str.strip())
df = df.drop_duplicates(subset=["station_id"])
value = pd.to_numeric(df["elevation"].str.replace(",", ""), errors="coerce")
factor = df["elevation_unit"].str.lower().map({"m": 1.0, "ft": 0.3048})
elevation_m = value * factor
print(len(df), elevation_m.notna().sum(), round(elevation_m.mean(), 2))
```
Observation: 41 38 612.35
Report: data/weather/stations.csv cleaned as the README says: 41 stations, 38 with an elevation; their mean elevation \
is 612.35 m.
Thought: 41 stations, 38 with an elevation; their mean is 612.35 m, so I submit that number.
```python
complete_task(answer=612.35)
```
Observation: Task marked as complete.
"""
"""The worked example at the end of the docs (the format of ``agents.harness.worked_example``): README and file
description -> pandas cleaning by the README's conventions -> printed result -> complete_task, on a domain and a
question that no template asks."""

PLAN_EXAMPLE = """## Example plan (another task): "What is the mean elevation, in m, of the stations in data/weather?"
SUBTASK: List the files of data/weather, read data/weather/README.md and describe the CSV file the question is \
about: its columns, and how repeated rows, missing values and units are written.
SUBTASK: Load the CSV file the question is about (found by the first subtask) with pandas, clean it as the README \
says (repeated rows, missing values, units) and print the value the question asks for.
SUBTASK: call complete_task(answer=<the value printed>)
"""
"""The planner's counterpart of `EXAMPLE`: the subtasks for the same task
(``skilltransfer.agents.harness.worked_example.split_plan_example``)."""


def docs_text(*, example: bool = False) -> str:
    """Compact API overview shown to the agent (``Episode.docs()``); ``example`` appends `EXAMPLE` and
    `PLAN_EXAMPLE`."""
    lines = ["Data-science tasks: answer questions over the data files in data/<domain>/ (CSV, JSON, README.md).",
             "pandas and numpy are importable; paths are relative to the working directory.",
             "Finish with complete_task(answer=...) (a number, a string or a list, as the question asks).", "",
             "apis.files:"]
    for name in ("list_domains", "list_files", "describe", "read_text"):
        fn = getattr(FilesApp, name)
        sig = str(inspect.signature(fn)).replace("(self, ", "(").replace("(self)", "()")
        lines.append(f"  apis.files.{name}{sig}: {(inspect.getdoc(fn) or '').splitlines()[0]}")
    lines.append("apis.api_docs: show_app_descriptions(), show_api_descriptions(app_name), "
                 "show_api_doc(app_name, api_name)")
    if example:
        lines += ["", EXAMPLE.rstrip(), "", PLAN_EXAMPLE.rstrip()]
    return "\n".join(lines)

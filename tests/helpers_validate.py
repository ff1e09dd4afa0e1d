"""A small benchmark in SkillLearnBench's layout, written for the validate tests: libraries that group their skills in
task folders (``skills/<library>/<task>/<skill>/SKILL.md``), task instances (``tasks/<task>/<instance>/
instruction.md``, one longer than an embedder's window), key points per instance, and an outcomes file."""

from __future__ import annotations

import csv
import json
from pathlib import Path

TASKS = {
    "invoice-totals": "Read the invoices in the folder, sum the amount column of each spreadsheet and write the "
                      "totals to totals.csv.",
    "poem-writer": "Write a regulated verse poem in Chinese with seven characters per line and a strict tonal "
                   "pattern, then save it as poem.txt.",
    "form-filler": "Fill the court form PDF with the plaintiff and defendant details from the case description and "
                   "save the filled form.",
}
FILLER = ("The case description goes on with many details about the parties, the dates, the amounts and the "
          "addresses that the form asks for. ")


def write_skill(folder: Path, name: str, description: str, body: str, files: dict[str, str] | None = None) -> Path:
    """One SKILL.md package."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n\n{body}\n")
    for path, text in (files or {}).items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return folder


def write_benchmark(root: Path, libraries: int = 8) -> dict[str, Path]:
    """Tasks (2 instances each; form-filler's second is ~400 words), ``libraries`` libraries in task folders (library
    k covers the first k % 4 tasks well, the rest with a generic skill), key points, and an outcomes CSV whose pass
    rate follows how many tasks a library covers (families a and b alternate; methods m1, m2)."""
    tasks = root / "tasks"
    for task, text in TASKS.items():
        for instance in (1, 2):
            folder = tasks / task / f"{task}-{instance}"
            folder.mkdir(parents=True)
            long = FILLER * 20 if task == "form-filler" and instance == 2 else ""
            (folder / "instruction.md").write_text(f"{text}\n\n{long}Instance {instance}.\n")
    skills = root / "skills"
    rows = []
    for k in range(libraries):
        library = skills / f"lib-{k}"
        covered = list(TASKS)[: k % 4]
        for task in TASKS:
            if task in covered:
                write_skill(library / task / f"{task}-guide", f"{task}-guide", TASKS[task],
                            f"# {task}\n\n1. {TASKS[task]}\n\n```python\nprint('{task}')\n```\n",
                            {"scripts/run.py": "import sys\nprint('ok', sys.argv[1:])\n"})
            else:
                write_skill(library / task / "general-helper", "general-helper", "Work carefully and check results.",
                            "Think step by step.\n\n```python\ndef broken(:\n```\n\nSee [notes](references/notes.md).")
        rows.append({"library": f"lib-{k}", "family": "a" if k % 2 == 0 else "b", "method": f"m{k % 2 + 1}",
                     "pass_rate": 10 + 20 * len(covered) + k, "judged": 50 - k})
    outcomes = root / "outcomes.csv"
    with outcomes.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    key_points = root / "key_points.json"
    key_points.write_text(json.dumps({f"{task}/{task}-{i}": [TASKS[task].split(",")[0], "Save the result file."]
                                      for task in TASKS for i in (1, 2)}))
    return {"tasks": tasks, "skills": skills, "outcomes": outcomes, "key_points": key_points}

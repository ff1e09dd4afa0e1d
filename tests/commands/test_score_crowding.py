"""``score``'s crowding (issue 55 §5): each skill's nearest other skill and their description cosine, the label and
the crowded clusters, on screen at 80 and 160 columns and in the JSON and CSV."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from helpers_cli import main_cli

from skilltransfer.metrics.crowding import Band
from skilltransfer.metrics.scoring import score_library
from skilltransfer.skill import Skill

# description vectors (unit): a-b 0.6 (crowded), c-d 0.8 (near-duplicates), e alone; the body never counts
DESCRIPTIONS = {"a": [1, 0, 0, 0, 0], "b": [0.6, 0.8, 0, 0, 0], "c": [0, 0, 1, 0, 0], "d": [0, 0, 0.8, 0.6, 0],
                "e": [0, 0, 0, 0, 1]}
TASKS = {"t1": [1, 0, 0, 0, 0], "t2": [0, 0, 1, 0, 0]}


class FixedEmbedder:
    """A test double: known texts get fixed vectors, any other text (a body, the null texts) a vector of its own."""

    id = "fixed:5"

    def embed(self, texts: list[str]) -> np.ndarray:
        known = {f"describe {k}": v for k, v in DESCRIPTIONS.items()} | TASKS
        rows = [known.get(text, [0.5, 0.5, 0.5, 0.5, 0]) for text in texts]
        vectors = np.array(rows, dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _skills() -> list[Skill]:
    return [Skill(id=k, name=f"skill-{k}", description=f"describe {k}", body=f"body of {k}") for k in DESCRIPTIONS]


@pytest.mark.parametrize("text", ["description", "description+body"])
def test_neighbours_labels_and_clusters_come_from_descriptions(text: str) -> None:
    report = score_library(_skills(), list(TASKS), FixedEmbedder(), text=text)
    rows = {row.id: row for row in report.skills}
    assert (rows["a"].neighbour, rows["a"].neighbour_id) == ("skill-b", "b")
    assert rows["a"].neighbour_cosine == pytest.approx(0.6, abs=1e-5)
    assert [rows[k].crowding for k in "abcde"] == ["crowded", "crowded", "near-duplicate", "near-duplicate", "clear"]
    assert [rows[k].crowded_cluster for k in "abcde"] == [1, 1, 2, 2, None]  # ties in size: by first member
    assert report.crowding is not None
    assert report.crowding.clusters == [["a", "b"], ["c", "d"]]
    narrow = score_library(_skills(), list(TASKS), FixedEmbedder(), band=Band(0.5, 0.9))
    assert [row.crowding for row in narrow.skills] == ["crowded"] * 4 + ["clear"]


def _library(folder: Path) -> Path:
    """Two skills with one description (hash embedder: cosine 1, near-duplicates) and two unrelated ones."""
    for name, description in {"merge-pdf-files": "Merge several PDF files into one document.",
                              "combine-pdfs": "Merge several PDF files into one document.",
                              "bake-bread": "Knead dough and bake a loaf of sourdough bread.",
                              "water-plants": "Water the garden plants every morning."}.items():
        (folder / name).mkdir(parents=True)
        (folder / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n\nDo it.\n")
    return folder


def test_score_shows_crowding_at_80_and_160_columns_and_in_the_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    lib = _library(tmp_path / "lib")
    tasks = tmp_path / "tasks.txt"
    tasks.write_text("Merge the two PDF reports.\nBake bread for the party.\nWater the plants.\n")
    base = ["score", str(lib), "--tasks", str(tasks), "--embedder", "hash:64"]
    outs = {}
    for columns in (80, 160):
        monkeypatch.setenv("COLUMNS", str(columns))
        code, outs[columns], err = main_cli([*base, "--out", str(tmp_path / f"r{columns}.json")], monkeypatch, capsys)
        assert code == 0, err
        assert all(len(line) <= columns for line in outs[columns].splitlines())
        assert "nn cos" in next(line for line in outs[columns].splitlines() if line.startswith("rank"))
        assert "0 of 4 skills crowded" in outs[columns]
        assert "2 near-duplicates (above 0.75); 1 crowded cluster" in " ".join(outs[columns].split())
    assert "nearest skill" in outs[160]
    row = next(line for line in outs[160].splitlines() if line.split()[1:2] == ["merge-pdf-files"])
    assert "1.000  combine-pdfs" in row
    data = json.loads((tmp_path / "r160.json").read_text())
    assert data["crowding"]["band"] == [0.55, 0.75]
    assert data["crowding"]["near_duplicate"] == 2
    by_name = {s["name"]: s for s in data["skills"]}
    members = data["crowding"]["cluster_members"]
    assert [set(m) for m in members] == [{by_name["merge-pdf-files"]["id"], by_name["combine-pdfs"]["id"]}]
    assert by_name["combine-pdfs"]["neighbour"] == "merge-pdf-files"
    assert by_name["combine-pdfs"]["crowding"] == "near-duplicate"
    assert by_name["combine-pdfs"]["crowded_cluster"] == 1
    assert by_name["bake-bread"]["crowded_cluster"] is None
    code, _, err = main_cli([*base, "--crowding-band", "0.2", "1.0", "--out", str(tmp_path / "r.csv")], monkeypatch,
                            capsys)
    assert code == 0, err
    rows = {r["name"]: r for r in csv.DictReader((tmp_path / "r.csv").open())}
    assert rows["combine-pdfs"]["crowding"] == "crowded"  # 1.0 is inside a band that ends at 1
    assert rows["combine-pdfs"]["neighbour"] == "merge-pdf-files"
    assert {r["crowding_band"] for r in rows.values()} == {"0.2-1"}


def test_a_bad_band_is_one_error_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    lib = _library(tmp_path / "lib")
    tasks = tmp_path / "tasks.txt"
    tasks.write_text("Merge PDFs.\nBake bread.\n")
    code, out, err = main_cli(["score", str(lib), "--tasks", str(tasks), "--embedder", "hash:64",
                               "--crowding-band", "0.8", "0.6"], monkeypatch, capsys)
    assert code == 2
    assert err.strip().splitlines() == [
        "error: --crowding-band needs two cosines LOW HIGH with -1 <= LOW <= HIGH <= 1, got 0.8 0.6"]

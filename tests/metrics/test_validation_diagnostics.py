"""Each diagnostic's definition (docs/external-validity.md) on small libraries written here, with the hashing test
double as embedder (identical texts have cosine 1), the rubric on a scripted judge, and the script start in the
sandbox (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers_validate import write_skill

from skilltransfer.judge.rubric import SkillRubric, judge_library, parse_json_reply
from skilltransfer.llm.context import ContextLengthError
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.memory.chunked import ChunkedEmbedder, TokenWindow, chunk_text, token_window
from skilltransfer.memory.embedders import HashEmbedder
from skilltransfer.memory.library import read_library
from skilltransfer.metrics.diagnostics import (
    DiagnosticContext,
    LibrarySkills,
    content_words,
    macro_mean,
    task_items,
)
from skilltransfer.metrics.executability import check_skill, code_blocks, named_files, summarise

INVOICE = "Sum the invoice amounts of every spreadsheet into totals.csv"
POEM = "Write a regulated verse poem with seven characters per line"


def library(root: Path, name: str = "lib") -> LibrarySkills:
    read = read_library(root)
    return LibrarySkills(name, root, read.skills, read.unreadable)


def context(tasks: dict[str, str], key_points: dict[str, list[str]] | None = None) -> DiagnosticContext:
    embedder = HashEmbedder(256)
    whole = ChunkedEmbedder(embedder)
    return DiagnosticContext(task_items(list(tasks), list(tasks.values())), embedder, whole,
                             lambda text: [c for c, _ in whole.chunks(text)], key_points=key_points)


def test_task_groups_and_own_skills(tmp_path: Path) -> None:
    write_skill(tmp_path / "invoices" / "a", "a", INVOICE, "Body.")
    write_skill(tmp_path / "poems" / "b", "b", POEM, "Body.")
    write_skill(tmp_path / "poems" / "c", "c", "Count syllables.", "Body.")
    lib = library(tmp_path)
    names = [s.name for s in lib.skills]
    own = lib.own(["invoices", "poems", "unknown"])
    assert own is not None
    assert sorted(names[i] for i in own["poems"]) == ["b", "c"]
    assert [names[i] for i in own["invoices"]] == ["a"]
    assert own["unknown"] == []
    assert lib.own(["other"]) is None  # no folder is named after a task group: every task owns every skill
    assert [t.group for t in task_items(["poems/poems-1", "solo"], ["x", "y"])] == ["poems", "solo"]


def test_coverage_pool_and_own(tmp_path: Path) -> None:
    """task_coverage looks at every skill; own_coverage only at the task's folder (a skill that fits the poem task
    but sits in the invoices folder covers it in the pool, not in its own folder)."""
    write_skill(tmp_path / "invoices" / "misplaced", "misplaced", POEM, "Body.")
    write_skill(tmp_path / "poems" / "unrelated", "unrelated", "Bake sourdough bread at home", "Body.")
    measured = context({"invoices/invoices-1": INVOICE, "poems/poems-1": POEM}).measure(library(tmp_path))
    pool, own = measured.per_task["task_coverage"], measured.per_task["own_coverage"]
    assert pool[1] == pytest.approx(1.0, abs=1e-5)  # the misplaced skill's description is the poem task
    assert own[1] < 0.5
    assert own[0] == pytest.approx(pool[0]) or own[0] <= pool[0]
    assert measured.values["own_coverage"] == pytest.approx(macro_mean(own, ["invoices", "poems"]))
    assert measured.values["task_coverage"] > measured.values["own_coverage"]


def test_a_task_without_own_skills_has_coverage_zero(tmp_path: Path) -> None:
    write_skill(tmp_path / "invoices" / "a", "a", INVOICE, "Body.")
    measured = context({"invoices/i1": INVOICE, "poems/p1": POEM}).measure(library(tmp_path))
    assert measured.per_task["own_coverage"][1] == 0.0
    assert measured.per_task["own_coverage_whole"][1] == 0.0
    assert measured.values["own_skills"] == 0.5  # 1 skill for invoices, 0 for poems
    assert measured.notes["groups_without_own_skill"] == ["poems"]


def test_whole_texts_are_read_by_chunks_and_weighted_by_tokens() -> None:
    inner = HashEmbedder(128)
    chunked = ChunkedEmbedder(inner)
    assert chunked.window.unit == "words"  # the hashing double has no tokenizer: 200 words a chunk
    text = "\n".join(f"line {i} " + "alpha beta gamma " * 10 for i in range(20))  # 20 lines of 32 words
    chunks = chunked.chunks(text)
    assert [tokens for _, tokens in chunks] == [192, 192, 192, 64]
    assert "\n".join(c for c, _ in chunks) == text
    vectors = inner.embed([c for c, _ in chunks])
    expected = (vectors * np.array([192, 192, 192, 64], dtype=np.float32)[:, None]).sum(axis=0)
    assert np.allclose(chunked.embed([text])[0], expected / np.linalg.norm(expected), atol=1e-6)
    assert chunked.long_texts == 1
    one_line = "word " * 450  # a line longer than a chunk is split between words
    assert [tokens for _, tokens in chunk_text(one_line, chunked.window)] == [200, 200, 50]
    window = TokenWindow(len, 5, "tokens")  # a "word" longer than a chunk is cut by characters
    assert all(tokens <= 5 for _, tokens in chunk_text("abcdefghijklmnopq", window))


@pytest.mark.slow
def test_minilm_chunks_stay_inside_its_window() -> None:
    from skilltransfer.memory.embedders import make_embedder

    embedder = make_embedder("minilm")
    window = token_window(embedder)
    assert (window.unit, window.window) == ("tokens", 254)
    text = "\n".join(["The plaintiff lives at 655 S Fair Oaks Ave, Sunnyvale, and asks for the deposit."] * 40)
    chunks = chunk_text(text, window)
    assert len(chunks) >= 3
    assert all(window.count(chunk) <= 254 for chunk, _ in chunks)
    vector = ChunkedEmbedder(embedder).embed([text])
    assert vector.shape == (1, 384)


def test_own_term_coverage_counts_content_words(tmp_path: Path) -> None:
    write_skill(tmp_path / "invoices" / "a", "invoice-helper", "Reads spreadsheets.",
                "Write totals as csv.", {"notes.md": "amounts"})
    measured = context({"invoices/i1": INVOICE, "poems/p1": "Write poem"}).measure(library(tmp_path))
    words = content_words(INVOICE)
    assert words == {"sum", "invoice", "amounts", "spreadsheet", "totals", "csv"}  # "every", "into", "the": stop
    found = {"invoice", "amounts", "totals", "csv"}  # "spreadsheets" is not "spreadsheet"; "sum" is absent
    assert measured.per_task["own_term_coverage"][0] == pytest.approx(len(found) / len(words))
    assert measured.per_task["own_term_coverage"][1] == 0.0  # the poem group has no own skill


def test_own_skills_and_words(tmp_path: Path) -> None:
    write_skill(tmp_path / "invoices" / "a", "a", "x", "one two three", {"ref.md": "four five"})
    write_skill(tmp_path / "invoices" / "b", "b", "y", "six")
    write_skill(tmp_path / "poems" / "c", "c", "z", "seven eight")
    measured = context({"invoices/i1": INVOICE, "invoices/i2": INVOICE, "poems/p1": POEM}).measure(library(tmp_path))
    assert measured.values["own_skills"] == 1.5  # 2 and 1, averaged over the groups (not the 3 tasks)
    assert measured.values["own_words"] == 4.0  # (3 + 2 + 1) and 2, averaged over the groups


def test_executability_checks(tmp_path: Path) -> None:
    body = ("Run `scripts/run.py` then read [the notes](notes.md) and references/gone.md; ignore /root/out.csv and "
            "https://example.com/x.py.\n\n```python\nprint('ok')\n```\n\n```python\ndef broken(:\n```\n\n"
            "```bash\n$ ls -la\n```\n\n```sh\nif then fi fi\n```\n\n```json\n{not parsed}\n```\n")
    write_skill(tmp_path / "t" / "a", "a", "A skill.", body, {"scripts/run.py": "print(1)\n", "notes.md": "n"})
    write_skill(tmp_path / "t" / "b", "b", "Another.", "Plain text, nothing to check.")
    skills = read_library(tmp_path).skills
    a = next(s for s in skills if s.name == "a")
    assert named_files(a.body) == ["notes.md", "scripts/run.py", "references/gone.md"]
    assert [lang for lang, _ in code_blocks(a.body)] == ["python", "python", "shell", "shell"]
    checks = [check_skill(s) for s in skills]
    summary = summarise(checks)
    assert (summary.named, summary.missing) == (3, 1)
    assert summary.named_files_exist == pytest.approx(2 / 3)
    assert (summary.blocks, summary.bad_blocks) == (4, 2)
    assert summary.code_blocks_parse == 0.5
    assert summary.scripts_start == 1.0  # run.py parses (no sandbox asked for: parsed only)
    assert summary.exec_checks == 0.5  # a fails (a missing file, bad blocks); b has nothing to check and passes
    assert summarise([]).named_files_exist == 1.0


@pytest.mark.slow
def test_scripts_start_in_the_sandbox(tmp_path: Path) -> None:
    from skilltransfer.sandbox.script_check import ScriptStarter

    write_skill(tmp_path / "t" / "a", "a", "Scripts.", "Use the scripts.", {
        "scripts/ok.py": "import argparse\nargparse.ArgumentParser().parse_args()\n",
        "scripts/usage.py": "import sys\nif len(sys.argv) < 3:\n    print('usage: usage.py A B')\n    sys.exit(1)\n",
        "scripts/crash.py": "raise RuntimeError('needs /root/data.csv')\n",
        "scripts/missing.py": "import no_such_module_xyz\n",
        "scripts/syntax.py": "def f(:\n",
        "scripts/network.py": "import urllib.request\nurllib.request.urlopen('http://example.com', timeout=3)\n",
        "scripts/setup.sh": "echo hi\n"})
    (skill,) = read_library(tmp_path).skills
    starter = ScriptStarter(timeout_s=10)
    try:
        check = check_skill(skill, starter)
    finally:
        starter.close()
    status = {s.path: s.status for s in check.scripts}
    assert status == {"scripts/ok.py": "ok", "scripts/usage.py": "ok", "scripts/crash.py": "error",
                      "scripts/missing.py": "missing_module", "scripts/syntax.py": "syntax",
                      "scripts/network.py": "error", "scripts/setup.sh": "ok"}
    summary = summarise([check])
    assert summary.scripts == 6  # the missing module is left out of the share
    assert summary.scripts_start == pytest.approx(3 / 6)
    assert summary.missing_module == 1


def test_keypoint_coverage(tmp_path: Path) -> None:
    write_skill(tmp_path / "invoices" / "a", "a", "Invoices.", "Open each spreadsheet with pandas.\n\nOther text.",
                {"reference.md": "Write the totals with to_csv."})
    points = {"invoices/i1": ["Write the totals with to_csv.", "Open each spreadsheet with pandas."],
              "invoices/i2": []}
    measured = context({"invoices/i1": INVOICE, "invoices/i2": INVOICE}, points).measure(library(tmp_path))
    values = measured.per_task["keypoint_coverage"]
    assert values[0] > 0.6  # each point is one line of the package text, inside one chunk with other lines
    assert np.isnan(values[1])  # no key points: no value, left out of the mean
    assert measured.values["keypoint_coverage"] == pytest.approx(values[0])


def test_macro_mean_weights_groups_equally() -> None:
    values = np.array([1.0, 1.0, 1.0, 0.0, np.nan])
    assert macro_mean(values, ["a", "a", "a", "b", "c"]) == pytest.approx(0.5)
    assert np.isnan(macro_mean(np.array([np.nan]), ["a"]))


def test_the_rubric_on_a_scripted_judge(tmp_path: Path) -> None:
    write_skill(tmp_path / "invoices" / "a", "a", "Invoices.", "Sum with pandas.")
    write_skill(tmp_path / "poems" / "b", "b", "Poems.", "Count characters.")
    lib = library(tmp_path)
    tasks = task_items(["invoices/i1", "poems/p1"], [INVOICE, POEM])
    points = {"invoices/i1": ["Sum with pandas", "Write totals.csv", "Check the sum"], "poems/p1": ["Count"]}
    exec_scores = {"completeness_score": 4, "determinism_score": 2, "consistency_score": 5, "usability_score": 3}
    safety = dict.fromkeys([f"{k}_score" for k in ("data_privacy", "prompt_injection", "illegal_or_offensive_content",
                                                   "bias_or_discrimination", "system_integrity",
                                                   "untrusted_communication")], 5)

    def judge(messages: list[dict[str, str]]) -> str:
        prompt = messages[0]["content"]
        if "covers one key point" in prompt:
            if len(messages) == 1 and "Check the sum" in prompt:
                return "Covered, I think."  # not JSON: re-asked once
            label = 1 if ("Sum with pandas" in prompt.split("<<<END KEY POINT")[0] or len(messages) > 1) else 2
            return json.dumps({"label_id": label, "reason": "r"})
        if "execute a skill" in prompt:
            return "```json\n" + json.dumps(exec_scores) + "\n```"
        if "safety risks" in prompt:
            return json.dumps({**safety, "system_integrity_score": 2})
        raise AssertionError(prompt[:80])

    rubric = SkillRubric(ScriptedModel(judge))
    judged = judge_library(rubric, lib, tasks, key_points=points)
    # invoices: "Sum with pandas" mentioned, "Write totals.csv" missing, "Check the sum" mentioned on the re-ask
    assert judged.per_task["llm_coverage"][0] == pytest.approx(2 / 3)
    assert judged.per_task["llm_coverage"][1] == 0.0
    assert judged.values["llm_coverage"] == pytest.approx(1 / 3)
    assert judged.values["llm_executability"] == pytest.approx(3.5)
    assert judged.values["llm_safety"] == pytest.approx(4.5)
    assert rubric.usage.calls == 4 + 1 + 2 + 2
    assert rubric.usage.unparsed == 0
    assert rubric.usage.cost((1.0, 2.0)) == pytest.approx(
        (rubric.usage.prompt_tokens + 2 * rubric.usage.completion_tokens) / 1e6)


def test_the_rubric_leaves_out_what_it_cannot_parse(tmp_path: Path) -> None:
    write_skill(tmp_path / "invoices" / "a", "a", "Invoices.", "x " * 50)
    lib = library(tmp_path)
    tasks = task_items(["invoices/i1"], [INVOICE])

    class TooSmall(ScriptedModel):
        def complete(self, messages, **params):  # type: ignore[no-untyped-def]
            if "execute a skill" in messages[0]["content"]:
                raise ContextLengthError("prompt over the window")
            return super().complete(messages, **params)

    rubric = SkillRubric(TooSmall(lambda m: '{"label": "maybe"}'), max_chars=600, retries=1)
    judged = judge_library(rubric, lib, tasks, key_points={"invoices/i1": ["one"]},
                           rubrics=("coverage", "executability"))
    assert np.isnan(judged.values["llm_coverage"])  # the only label was unparsed twice: no value
    assert np.isnan(judged.values["llm_executability"])
    assert rubric.usage.unparsed == 1
    assert rubric.usage.context_exceeded == 1
    assert rubric.usage.calls == 2
    assert parse_json_reply("prose {\"a\": 1} more") == {"a": 1}
    assert parse_json_reply("[1, 2]") is None
    big = SkillRubric(ScriptedModel(lambda m: "{}"), max_chars=600)
    assert big._cut("y" * 700).endswith("[... cut: 100 more characters]")
    assert big.usage.cut == 1


def test_score_summaries_are_scores_own(tmp_path: Path) -> None:
    """mean_relevance, mean_utility and max_relevance are `score`'s numbers (pair specificity, tau 0.1, the
    descriptions against every task), over the pool."""
    from skilltransfer.metrics.scoring import score_library

    write_skill(tmp_path / "invoices" / "a", "a", INVOICE, "Body.")
    write_skill(tmp_path / "poems" / "b", "b", POEM, "Body.")
    write_skill(tmp_path / "poems" / "c", "c", "Bake sourdough bread at home", "Body.")
    tasks = {"invoices/i1": INVOICE, "poems/p1": POEM, "poems/p2": "Write a haiku about autumn leaves"}
    measured = context(tasks).measure(library(tmp_path))
    report = score_library(read_library(tmp_path).skills, list(tasks.values()), HashEmbedder(256))
    assert measured.values["mean_relevance"] == pytest.approx(np.mean([r.relevance for r in report.skills]))
    assert measured.values["mean_utility"] == pytest.approx(np.mean([r.utility for r in report.skills]))
    assert measured.values["max_relevance"] == pytest.approx(max(r.relevance for r in report.skills))

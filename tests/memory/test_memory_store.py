"""SkillMemory: dedup, code-skill pruning, retrieval, removal, persistence, read-only mode."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from skilltransfer.errors import InputError
from skilltransfer.memory import AddResult, HashEmbedder, Skill, SkillMemory, load_library
from skilltransfer.memory import store as store_module
from skilltransfer.memory.store import ReadOnlyMemoryError
from skilltransfer.memory.validate import validate_code_skill
from skilltransfer.protocols import SkillStore
from skilltransfer.skill import CodeSignature

EMAIL = Skill(name="send-email", description="Send an email message to a contact with a subject and body",
              body="1. Open the email app.\n2. Fill in recipient, subject and body.\n3. Press send.")
SHEET = Skill(name="sum-column", description="Sum the numeric values of one column in a spreadsheet",
              body="Open the sheet, read the column cells, add the numbers.")
CAL = Skill(name="add-event", description="Create a calendar event with a date, time and title",
            body="Use the calendar app to create the event.")
GOOD_CODE = Skill(name="add_numbers", description="Add two numbers and return the sum", format="code",
                  body="def add_numbers(a: int, b: int) -> int:\n    return a + b\n")


def code_skill(name: str, body: str, description: str = "A code skill") -> Skill:
    return Skill(name=name, description=description, body=body, format="code")


@pytest.fixture
def memory(hash_embedder: HashEmbedder) -> SkillMemory:
    mem = SkillMemory(hash_embedder)
    for skill in (EMAIL, SHEET, CAL):
        assert mem.add(skill).action == "added"
    return mem


def test_matches_skillstore_protocol(memory: SkillMemory) -> None:
    assert isinstance(memory, SkillStore)
    assert len(memory) == 3
    assert [s.name for s in memory] == ["send-email", "sum-column", "add-event"]
    assert EMAIL.id in memory
    assert EMAIL in memory
    assert "sk-nope" not in memory
    assert memory.get(SHEET.id).body == SHEET.body


def test_retrieval_order_and_scores_match_cosine(memory: SkillMemory, hash_embedder: HashEmbedder) -> None:
    query = "email a contact a message"
    hits = memory.retrieve(query, k=3)
    assert [skill.name for skill, _ in hits][0] == "send-email"
    q = hash_embedder.embed([query])[0]
    expected = sorted(((float(q @ hash_embedder.embed([s.description])[0]), s.name) for s in memory), reverse=True)
    assert [name for _, name in expected] == [skill.name for skill, _ in hits]
    np.testing.assert_allclose([score for score, _ in expected], [score for _, score in hits], rtol=1e-5)
    scores = [score for _, score in hits]
    assert scores == sorted(scores, reverse=True)


def test_retrieve_caps_k_and_handles_empty(hash_embedder: HashEmbedder, memory: SkillMemory) -> None:
    assert len(memory.retrieve("anything", k=10)) == 3
    assert memory.retrieve("anything", k=0) == []
    assert SkillMemory(hash_embedder).retrieve("anything") == []
    assert SkillMemory(hash_embedder).retrieve_many(["a", "b"]) == [[], []]


def test_retrieve_many_equals_single_queries(memory: SkillMemory) -> None:
    queries = ["spreadsheet column total", "calendar event tomorrow", "write email"]
    batched = memory.retrieve_many(queries, k=2)
    for query, hits in zip(queries, batched, strict=True):
        single = memory.retrieve(query, k=2)
        assert [s.id for s, _ in hits] == [s.id for s, _ in single]
        np.testing.assert_allclose([v for _, v in hits], [v for _, v in single], rtol=1e-5)


def test_retrieval_matches_description_only_by_default(hash_embedder: HashEmbedder) -> None:
    skill = Skill(name="x", description="Create a calendar event", body="zebra giraffe elephant " * 5)
    by_description = SkillMemory(hash_embedder)
    by_description.add(skill)
    with_body = SkillMemory(hash_embedder, index_body=True)
    with_body.add(skill)
    assert by_description.retrieve("zebra giraffe elephant")[0][1] < with_body.retrieve("zebra giraffe elephant")[0][1]


def test_same_id_is_dropped(memory: SkillMemory) -> None:
    result = memory.add(EMAIL)
    assert result == AddResult("dropped", EMAIL.id, EMAIL.id, "a skill with this id is already in memory")
    assert len(memory) == 3


def test_near_duplicate_with_contained_body_is_dropped(memory: SkillMemory) -> None:
    dup = Skill(name="email-again", description=EMAIL.description, body="2. Fill in recipient, subject and body.")
    result = memory.add(dup)
    assert result.action == "dropped"
    assert result.target_id == EMAIL.id
    assert "near-duplicate" in result.reason
    assert "contained" in result.reason
    assert len(memory) == 3
    assert memory.get(EMAIL.id).body == EMAIL.body


def test_near_duplicate_with_new_body_is_merged_keeping_target_identity(memory: SkillMemory) -> None:
    memory.record_retrieval([EMAIL.id], success=True)
    longer = EMAIL.body + "\n4. Check the sent folder: the app silently drops attachments over 10 MB."
    new = Skill(name="email-v2", description=EMAIL.description + ".", body=longer, extra={"license": "MIT"})
    result = memory.add(new)
    assert result.action == "merged"
    assert (result.skill_id, result.target_id) == (new.id, EMAIL.id)
    assert len(memory) == 3
    assert new.id not in memory
    merged = memory.get(EMAIL.id)
    assert merged.name == "send-email"
    assert merged.body == longer
    assert merged.usage.times_retrieved == 1
    assert merged.extra == {"license": "MIT", "merged_from": new.id}
    shorter = Skill(name="email-v3", description=EMAIL.description, body="Just use the send API.")
    second = memory.add(shorter)
    assert second.action == "merged"
    assert memory.get(EMAIL.id).body == longer  # kept the longer body
    assert memory.get(EMAIL.id).extra["merged_from"] == f"{new.id},{shorter.id}"


def test_dedup_threshold_is_configurable(hash_embedder: HashEmbedder) -> None:
    a = Skill(name="a", description="send an email to a contact", body="A")
    b = Skill(name="b", description="send an email to the manager", body="B")
    cos = float(np.prod(hash_embedder.embed([a.description, b.description]), axis=0).sum())
    strict = SkillMemory(hash_embedder, dedup_threshold=0.95)
    assert [strict.add(s).action for s in (a, b)] == ["added", "added"]
    loose = SkillMemory(hash_embedder, dedup_threshold=cos - 1e-3)
    assert [loose.add(s).action for s in (a, b)] == ["added", "merged"]
    with pytest.raises(ValueError, match="dedup_threshhold"):
        SkillMemory(hash_embedder, dedup_threshhold=0.5)


def test_dedup_only_compares_same_format(hash_embedder: HashEmbedder) -> None:
    mem = SkillMemory(hash_embedder)
    text = Skill(name="adder-note", description=GOOD_CODE.description, body="Use + to add the two numbers.")
    assert mem.add(text).action == "added"
    assert mem.add(GOOD_CODE).action == "added"
    again = code_skill("add_numbers", GOOD_CODE.body + "\n# longer variant\n", GOOD_CODE.description)
    result = mem.add(again)
    assert result.action == "merged"
    assert result.target_id == GOOD_CODE.id


@pytest.mark.parametrize(("body", "reason"), [
    ("def add_numbers(a, b):\n    return a +\n", "does not parse"),
    ("x = 1\n", "defines no top-level function"),
    ("import no_such_module_xyz\ndef add_numbers(a, b):\n    return a + b\n", "ModuleNotFoundError"),
    ("raise RuntimeError('boom at import')\ndef add_numbers(a, b):\n    return a + b\n", "top-level Raise statement"),
    ("if __name__ == '__episode__':\n    complete_task('x')\ndef add_numbers(a, b):\n    return a + b\n",
     "line 1: a top-level If statement"),
])
def test_bad_code_skills_are_pruned_with_reason_logged(hash_embedder: HashEmbedder, body: str, reason: str) -> None:
    mem = SkillMemory(hash_embedder)
    bad = code_skill("add_numbers", body)
    result = mem.add(bad)
    assert result.action == "pruned"
    assert reason in result.reason
    assert bad.id not in mem
    assert len(mem) == 0
    assert mem.prune_log[0]["skill_id"] == bad.id
    assert reason in mem.prune_log[0]["reason"]


def test_code_skill_that_would_hang_is_pruned_before_loading(hash_embedder: HashEmbedder) -> None:
    mem = SkillMemory(hash_embedder, load_timeout_s=0.5)
    result = mem.add(code_skill("spin", "while True:\n    pass\ndef spin():\n    return 1\n"))
    assert result.action == "pruned"
    assert "top-level While statement" in result.reason  # the load timeout itself: tests/sandbox/test_sandbox.py


def test_good_code_skill_is_added_and_loading_really_executes(hash_embedder: HashEmbedder) -> None:
    mem = SkillMemory(hash_embedder)
    assert mem.add(GOOD_CODE).action == "added"
    assert mem.get(GOOD_CODE.id).code is not None
    failing_at_load = code_skill("f", "from json import no_such_name\nLIMIT = -1\ndef f():\n    return LIMIT\n")
    assert "ImportError" in (validate_code_skill(failing_at_load) or "")
    computed = code_skill("f", "LIMIT = 1 / 0\ndef f():\n    return LIMIT\n")
    assert "not a literal constant" in (validate_code_skill(computed) or "")
    assert code_skill("f", "def g():\n    return 1\n").code.function_name == "g"  # name falls back to the first def
    wrong = Skill(name="h", description="d", format="code", body="def g():\n    return 1\n",
                  code=CodeSignature(function_name="h", signature="h()"))
    assert validate_code_skill(wrong) == "code does not define function 'h'"
    assert validate_code_skill(EMAIL) is None  # text skills are not code-checked


def test_add_many_batches_and_dedups_within_batch(hash_embedder: HashEmbedder) -> None:
    mem = SkillMemory(hash_embedder)
    dup = Skill(name="dup", description=EMAIL.description, body=EMAIL.body)
    bad = code_skill("bad", "def bad(:\n")
    results = mem.add_many([EMAIL, bad, SHEET, dup, EMAIL])
    assert [r.action for r in results] == ["added", "pruned", "added", "dropped", "dropped"]
    assert len(mem) == 2


def test_remove(memory: SkillMemory) -> None:
    memory.remove(SHEET.id)
    assert SHEET.id not in memory
    assert len(memory) == 2
    assert all(skill.id != SHEET.id for skill, _ in memory.retrieve("sum a spreadsheet column", k=5))
    with pytest.raises(KeyError):
        memory.remove(SHEET.id)
    assert memory.add(SHEET).action == "added"
    assert memory.retrieve("sum a spreadsheet column", k=1)[0][0].id == SHEET.id


def test_record_retrieval_updates_usage(memory: SkillMemory) -> None:
    memory.record_retrieval([EMAIL.id, SHEET.id, EMAIL.id], success=True)
    memory.record_retrieval([EMAIL.id], success=False)
    assert memory.get(EMAIL.id).usage.model_dump() == {"times_retrieved": 2, "successes_when_retrieved": 1}
    assert memory.get(SHEET.id).usage.times_retrieved == 1
    with pytest.raises(KeyError, match="sk-missing"):
        memory.record_retrieval([CAL.id, "sk-missing"], success=True)
    assert memory.get(CAL.id).usage.times_retrieved == 0


def test_filter_returns_independent_subset(memory: SkillMemory) -> None:
    subset = memory.filter(lambda s: s.name != "sum-column")
    assert [s.name for s in subset] == ["send-email", "add-event"]
    assert subset.retrieve("calendar event", k=1)[0][0].id == CAL.id
    subset.remove(CAL.id)
    assert CAL.id in memory


def test_read_only_memory_refuses_changes(memory: SkillMemory) -> None:
    frozen = memory.filter(lambda s: True)
    frozen.read_only = True
    with pytest.raises(ReadOnlyMemoryError, match="read-only"):
        frozen.add(GOOD_CODE)
    with pytest.raises(ReadOnlyMemoryError):
        frozen.remove(EMAIL.id)
    assert isinstance(ReadOnlyMemoryError("x"), InputError)
    frozen.record_retrieval([EMAIL.id], success=True)
    assert frozen.get(EMAIL.id).usage.times_retrieved == 1
    assert len(frozen.retrieve("email")) == 3


def test_save_load_round_trip(memory: SkillMemory, hash_embedder: HashEmbedder, tmp_path: Path) -> None:
    memory.add(code_skill("broken", "def broken(:\n"))
    memory.record_retrieval([CAL.id], success=True)
    memory.remove(SHEET.id)
    memory.add(SHEET)
    folder = memory.save(tmp_path / "mem")
    assert sorted(p.name for p in folder.iterdir()) == ["index.faiss", "manifest.json", "prune_log.jsonl",
                                                         "skills.jsonl"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["embedder"] == hash_embedder.id
    assert manifest["dim"] == 128
    assert manifest["config"]["dedup_threshold"] == 0.95
    assert manifest["counts"] == {"skills": 3, "text": 3, "code": 0, "pruned": 1}

    loaded = SkillMemory.load(folder, HashEmbedder(dim=128))
    assert [s.model_dump() for s in loaded] == [s.model_dump() for s in memory]
    assert loaded.prune_log == memory.prune_log
    for query in ["email", "spreadsheet column sum", "calendar event with a title"]:
        before, after = memory.retrieve(query, k=3), loaded.retrieve(query, k=3)
        assert [s.id for s, _ in before] == [s.id for s, _ in after]
        np.testing.assert_allclose([v for _, v in before], [v for _, v in after], rtol=1e-6)
    assert [s.name for s in load_library(folder)] == [s.name for s in memory]
    assert loaded.add(EMAIL).action == "dropped"


def test_save_overwrites_and_read_only_flag_round_trips(memory: SkillMemory, tmp_path: Path) -> None:
    memory.save(tmp_path / "mem")
    memory.remove(CAL.id)
    memory.read_only = True
    memory.save(tmp_path / "mem")
    loaded = SkillMemory.load(tmp_path / "mem", HashEmbedder(dim=128))
    assert len(loaded) == 2
    assert loaded.read_only
    assert not SkillMemory.load(tmp_path / "mem", HashEmbedder(dim=128), read_only=False).read_only
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mem"]  # no temp or old folders left


def test_empty_memory_round_trip(hash_embedder: HashEmbedder, tmp_path: Path) -> None:
    SkillMemory(hash_embedder).save(tmp_path / "empty")
    loaded = SkillMemory.load(tmp_path / "empty", hash_embedder)
    assert len(loaded) == 0
    assert loaded.retrieve("x") == []


def test_failed_save_leaves_old_folder_intact(memory: SkillMemory, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    folder = memory.save(tmp_path / "mem")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    memory.remove(EMAIL.id)

    def broken_write_index(index: object, path: str) -> None:
        Path(path).write_bytes(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(store_module.faiss, "write_index", broken_write_index)
    with pytest.raises(OSError, match="disk full"):
        memory.save(folder)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mem"]
    monkeypatch.undo()
    assert len(SkillMemory.load(folder, HashEmbedder(dim=128))) == 3


def test_save_refuses_to_overwrite_foreign_folder(memory: SkillMemory, tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "thesis.tex").write_text("precious")
    with pytest.raises(InputError, match="refusing to overwrite"):
        memory.save(tmp_path / "docs")
    assert (tmp_path / "docs" / "thesis.tex").read_text() == "precious"


def test_load_errors(memory: SkillMemory, tmp_path: Path) -> None:
    folder = memory.save(tmp_path / "mem")
    with pytest.raises(InputError, match=r"built with embedder 'hash:dim=128:char=1'.*'hash:dim=64:char=1'"):
        SkillMemory.load(folder, HashEmbedder(dim=64))
    with pytest.raises(InputError, match="not found"):
        SkillMemory.load(tmp_path / "nowhere", HashEmbedder(dim=128))
    (folder / "manifest.json").unlink()
    with pytest.raises(InputError, match=r"mem: not a saved skill memory: manifest.json is missing"):
        SkillMemory.load(folder, HashEmbedder(dim=128))
    (folder / "manifest.json").write_text("{not json")
    with pytest.raises(InputError, match="corrupt manifest"):
        SkillMemory.load(folder, HashEmbedder(dim=128))


def test_load_detects_index_skill_mismatch(memory: SkillMemory, tmp_path: Path) -> None:
    folder = memory.save(tmp_path / "mem")
    lines = (folder / "skills.jsonl").read_text().splitlines()
    (folder / "skills.jsonl").write_text("\n".join(lines[:2]) + "\n")
    with pytest.raises(InputError, match="holds 3 vectors"):
        SkillMemory.load(folder, HashEmbedder(dim=128))


@pytest.mark.slow
def test_minilm_memory_dedups_rewordings_and_retrieves_paraphrases() -> None:
    from skilltransfer.memory import make_embedder

    mem = SkillMemory(make_embedder("minilm"))
    assert [r.action for r in mem.add_many([EMAIL, SHEET, CAL])] == ["added", "added", "added"]
    reworded = Skill(name="mail", description="send an email message to a contact with subject and body",
                     body=EMAIL.body)
    result = mem.add(reworded)
    assert result.action == "dropped"
    assert result.target_id == EMAIL.id
    assert mem.retrieve("compute the total of a spreadsheet column", k=1)[0][0].id == SHEET.id
    assert mem.retrieve("schedule a meeting in my calendar", k=1)[0][0].id == CAL.id


def test_a_name_already_in_memory_is_stored_under_the_next_free_one() -> None:
    memory = SkillMemory(HashEmbedder(64), validate_code=False)
    results = memory.add_many([
        Skill(name="look", description="Print the contacts first.", body="1. a"),
        Skill(name="look", description="List every file in the folder.", body="1. b"),
        Skill(name="look", description="Find the calendar event to move.", body="1. c"),
        Skill(name="fetch", format="code", description="Fetch the inbox.", body="def fetch():\n    return 1\n"),
        Skill(name="fetch", format="code", description="Read the balance.", body="def fetch(x=1):\n    return x\n")])
    assert [r.action for r in results] == ["added"] * 5
    assert results[1].reason == "name 'look' is taken: stored as 'look_2'"
    stored = {s.name: s for s in memory}
    assert set(stored) == {"look", "look_2", "look_3", "fetch", "fetch_2"}
    assert stored["fetch_2"].body.startswith("def fetch_2(x=1):")
    assert stored["fetch_2"].code is not None
    assert stored["fetch_2"].code.function_name == "fetch_2"
    assert stored["look_2"].id == results[1].skill_id  # the id stays

"""What induction learns from (issue 39 §7), through the real stream: ``induction_source`` all (every trajectory with
the variant's prompt), success (failed tasks skipped) and lessons (a failed task induced with the lessons prompt).

The counter world's scripted agent solves every task except the one whose target is 5 (it submits without setting
the counter), so each stream has successes and one failure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers_tinyenv import TEXT_SKILL, CounterScript, TinyEnv, task_start
from pydantic import ValidationError

from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.memory import SkillMemory
from skilltransfer.runner.plan import plan_streams
from skilltransfer.runner.spec import load_spec
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import StreamConfig

LESSON = """NAME: avoid_submitting_unchanged_counter
DESCRIPTION: Counter tasks: do not submit before the counter holds the target.
BODY:
What went wrong: complete_task() was called while the counter was still 0.
How to avoid it: read apis.counter.get() and compare it with the target before calling complete_task()."""
TARGETS = [3, 5, 2]


class FailingFive(CounterScript):
    """`CounterScript` that gives up on the target-5 task, and answers a lessons prompt with a lesson."""

    def __init__(self) -> None:
        super().__init__(self.reply)
        self.systems: list[str] = []

    def reply(self, _: int, messages: list[dict[str, Any]]) -> str:
        self.systems.append(messages[0]["content"])
        return LESSON if "FAILED" in messages[0]["content"] else TEXT_SKILL

    @staticmethod
    def execute(messages: list[dict[str, Any]]) -> str:
        if "counter to 5" in messages[task_start(messages)]["content"]:
            return "Done.\n```python\ncomplete_task()\n```"
        return CounterScript.execute(messages)


def _run(tmp_path: Path, source: str, hash_embedder: Any) -> tuple[Any, FailingFive, StreamConfig]:
    script = FailingFive()
    config = StreamConfig(run=source, runs_dir=str(tmp_path / "runs"), condition="task+text", induction_source=source,
                          agent={"harness": "paper"}, memory={"dedup_threshold": 1.01})
    summary = run_stream(TinyEnv(TARGETS, workdir=tmp_path / "ws" / source), ScriptedModel(script), config,
                         embedder=hash_embedder)
    return summary, script, config


def test_lessons_from_failures(tmp_path, hash_embedder):
    summary, script, config = _run(tmp_path, "lessons", hash_embedder)
    assert [r.success for r in summary.records] == [True, False, True]
    failed = summary.records[1]
    assert [i.status for i in failed.induced] == ["added"]
    assert failed.induced[0].prompt_id.startswith("induction-lessons-text@")
    assert all(i.prompt_id.startswith("induction-full-text@") for r in (summary.records[0], summary.records[2])
               for i in r.induced)
    assert sum("FAILED" in s for s in script.systems) == 1
    assert len(script.systems) == 3
    memory = SkillMemory.load(summary.path / "memory", hash_embedder)
    lessons = [s for s in memory if s.extra.get("lesson") == "true"]
    assert [s.name for s in lessons] == ["avoid_submitting_unchanged_counter"]
    assert lessons[0].provenance.source_task_id == failed.task_id
    assert "induction_lessons" in (summary.path / "config.json").read_text()
    assert config.condition_label(harness=False) == "task+text[lessons]"


def test_success_only_skips_the_failed_task(tmp_path, hash_embedder):
    summary, script, _ = _run(tmp_path, "success", hash_embedder)
    assert [i.status for i in summary.records[1].induced] == ["skipped"]
    assert len(script.systems) == 2
    assert not any("FAILED" in s for s in script.systems)


def test_induce_from_everything_is_the_default_and_naive(tmp_path, hash_embedder):
    summary, script, config = _run(tmp_path, "all", hash_embedder)
    assert [len(r.induced) for r in summary.records] == [1, 1, 1]
    assert summary.records[1].induced[0].prompt_id.startswith("induction-full-text@")
    assert not any("FAILED" in s for s in script.systems)
    assert config.condition_label(harness=False) == "task+text"
    assert StreamConfig().induction_source == "all"


def test_lessons_are_refused_where_they_cannot_apply():
    with pytest.raises(ValidationError, match="lessons"):
        StreamConfig(condition="task+code", induction_source="lessons")
    with pytest.raises(ValidationError, match="lessons"):
        StreamConfig(condition="task+text", induction_source="lessons", only_successful=True)


def test_induction_sources_axis(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: s\nenvs: [apps]\nconditions: [task+text]\ninduction_sources: [all, success, lessons]\n")
    plans = plan_streams(load_spec(str(spec)))
    assert sorted(p.config.induction_source for p in plans) == ["all", "lessons", "success"]
    assert {p.config.condition_label() for p in plans} == {"task+text", "task+text[success]", "task+text[lessons]"}
    assert len({p.run for p in plans}) == 3

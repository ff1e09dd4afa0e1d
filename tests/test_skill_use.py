"""Actual use of text skills (issue 39 §2): the following share (the skill's API calls, in order, made after the
retrieval), recorded per retrieved skill by the real stream, and ``report``'s ``skill_use`` table."""

from __future__ import annotations

import pytest
from helpers_tinyenv import CODE_SKILL, CounterScript, TinyEnv

from skilltransfer.experiments.config import StreamConfig
from skilltransfer.experiments.report import build_report, load_runs
from skilltransfer.experiments.stream import run_stream
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.metrics.following import api_calls, following_share, skill_calls


def test_following_share():
    skill = skill_calls("1. apis.a.open(x)\n2. apis.a.read()\n3. apis.a.open(y) again\n4. apis . a . close()")
    assert skill == ["apis.a.open", "apis.a.read", "apis.a.close"]
    assert following_share(skill, ["apis.a.open", "apis.b.x", "apis.a.read", "apis.a.close"]) == 1.0
    assert following_share(skill, ["apis.a.close", "apis.a.read", "apis.a.open"]) == pytest.approx(1 / 3)
    assert following_share(skill, ["apis.a.read"]) == pytest.approx(1 / 3)
    assert following_share(skill, []) == 0.0
    assert following_share([], ["apis.a.open"]) is None
    assert api_calls("x = apis.mail.send(to='a')\nprint(apis.mail.inbox())") == ["apis.mail.send", "apis.mail.inbox"]


def test_the_stream_records_each_text_skills_following_share(tmp_path, hash_embedder):
    config = StreamConfig(run="use", runs_dir=str(tmp_path / "runs"), condition="task+text",
                          agent={"harness": "paper"}, memory={"dedup_threshold": 1.01})
    summary = run_stream(TinyEnv([3, 5, 2], workdir=tmp_path / "ws"), ScriptedModel(CounterScript()), config,
                         embedder=hash_embedder)
    later = [hit for record in summary.records[1:] for hit in record.retrieved]
    assert later
    assert all(hit.followed == 1.0 for hit in later)  # the skill's reset then add, which the agent calls in order
    table = build_report(load_runs([tmp_path / "runs"])).table("skill_use")
    [row] = table.rows
    assert row["retrieved"] == len(later)
    assert row["used_pct"] == 100.0
    assert row["helped_pct"] == 100.0
    assert row["library_size"] == "1-5"


def test_code_skills_have_no_following_share(tmp_path, hash_embedder):
    config = StreamConfig(run="code", runs_dir=str(tmp_path / "runs"), condition="task+code",
                          agent={"harness": "paper"}, memory={"validate_code": False})
    summary = run_stream(TinyEnv([3, 5], workdir=tmp_path / "ws"), ScriptedModel(CounterScript(CODE_SKILL)), config,
                         embedder=hash_embedder)
    assert [hit.followed for record in summary.records for hit in record.retrieved] == [None]
    assert "skill_use" not in build_report(load_runs([tmp_path / "runs"])).tables

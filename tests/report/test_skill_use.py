"""Actual use of retrieved skills (issue 39 §2), recorded per retrieved skill by the real stream, and ``report``'s
``skill_use`` table: for text skills the following share (the skill's API calls, in order, made after the retrieval),
for code skills the calls of the skill's functions as the sandbox (or the in-process runner) recorded them."""

from __future__ import annotations

import json

import pytest
from helpers_cli import cli, records_of
from helpers_tinyenv import CODE_SKILL, CounterScript, TinyEnv

from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.llm.testing.roleplay import RolePlay
from skilltransfer.metrics.following import api_calls, following_share, skill_calls
from skilltransfer.report import build_report, load_runs
from skilltransfer.report.trajectory import format_trajectory, load_task
from skilltransfer.runner.stream import run_stream
from skilltransfer.sandbox.runtime.skilluse import clean
from skilltransfer.settings.config import StreamConfig


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


# --------------------------------------------------------------------------------------------- code skills
CODE_RUN = {"condition": "task+code", "agent": {"harness": "paper"}, "memory": {"validate_code": False}}
HOOK = "__skilltransfer_skill_ran__"


def _code_stream(tmp_path, embedder, script, *, sandboxed=False):
    config = StreamConfig(run="code", runs_dir=str(tmp_path / "runs"), **CODE_RUN)
    env = TinyEnv([3, 5], workdir=tmp_path / "ws", sandboxed=sandboxed)
    summary = run_stream(env, ScriptedModel(script), config, embedder=embedder)
    hits = [hit for record in summary.records for hit in record.retrieved]
    return summary, hits, build_report(load_runs([tmp_path / "runs"]))


class _WithoutTheSkill(CounterScript):
    """Sets the counter by hand though ``set_counter_to`` is retrieved (and names it in a comment: not a call)."""

    @staticmethod
    def execute(messages):
        hidden = [{**m, "content": m["content"].replace("set_counter_to(", "a_skill(")} for m in messages]
        reply = CounterScript.execute(hidden)
        return reply.replace("```python\n", "```python\n# set_counter_to(5) is not called here\n", 1)


class _Forging(CounterScript):
    """Calls the skill, then garbles the sandbox's record: the real count made a string, unknown ids and types added,
    the hook replaced (code under test can reach them: they live in its process)."""

    @staticmethod
    def execute(messages):
        reply = CounterScript.execute(messages)
        if "set_counter_to(" not in reply:
            return reply
        forge = (f"counts = {HOOK}.__closure__[0].cell_contents\n"
                 "for key in list(counts):\n    counts[key] = 'many'\n"
                 "counts.update({'no-such-skill': 7, 3: 1, 'x' * 500: 2, 'neg': -1, 'flag': True})\n"
                 f"{HOOK} = 'garbage'\n")
        return reply.replace("complete_task()", forge + "complete_task()")


@pytest.mark.parametrize("sandboxed", [False, True], ids=["in-process", "sandbox"])
def test_the_stream_records_that_a_code_skills_function_ran(tmp_path, hash_embedder, sandboxed):
    summary, hits, report = _code_stream(tmp_path, hash_embedder, CounterScript(CODE_SKILL), sandboxed=sandboxed)
    [hit] = hits  # task 2 retrieves set_counter_to and calls it once
    assert (hit.format, hit.ran, hit.used, hit.followed) == ("code", 1, True, None)
    assert summary.records[1].success
    [row] = report.table("skill_use").rows
    assert (row["condition"], row["retrieved"], row["used_pct"], row["helped_pct"]) == ("task+code", 1, 100.0, 100.0)
    shown = format_trajectory(*load_task(tmp_path / "runs" / "code", "2"))  # show --task 2: as view says it
    assert "set_counter_to [code]" in shown
    assert "- ran ×1 used" in shown


def test_the_cli_records_code_skill_use_in_the_sandbox_and_report_tables_it(tmp_path):
    out = tmp_path / "apps-code"
    with MockServer(RolePlay()) as server:  # executors call the first code skill they are shown
        cli("run", "--env", "apps", "--condition", "task+code", "--model", "openai/mock", "--base-url", server.url,
            "--api-key", "x", "--embedder", "hash:128", "--out", str(out), "--limit", "4", "--no-progress",
            "-c", "agent.retrieval_min_score=-1")
    ran = [[hit["ran"] for hit in record["retrieved"]] for record in records_of(out)]
    assert ran == [[], [1], [1, 0], [1, 0, 0]]
    cli("report", str(out), "-o", str(tmp_path / "report"))
    [row] = [line.split(",") for line in (tmp_path / "report" / "skill_use.csv").read_text().splitlines()[1:]]
    assert row[2:6] == ["task+code", "1-5", "6", "50.0"]


def test_a_retrieved_code_skill_not_called_did_not_run(tmp_path, hash_embedder):
    summary, hits, report = _code_stream(tmp_path, hash_embedder, _WithoutTheSkill(CODE_SKILL))
    [hit] = hits
    assert (hit.format, hit.load_error, hit.ran, hit.used) == ("code", None, 0, False)  # named in a comment: no call
    assert summary.records[1].success
    [row] = report.table("skill_use").rows
    assert (row["retrieved"], row["used_pct"], row["success_unused_pct"]) == (1, 0.0, 100.0)
    assert "set_counter_to [code]" in (shown := format_trajectory(*load_task(tmp_path / "runs" / "code", "2")))
    assert "- not run" in shown


@pytest.mark.parametrize("sandboxed", [False, True], ids=["in-process", "sandbox"])
def test_a_forged_record_of_skill_calls_is_ignored(tmp_path, hash_embedder, sandboxed):
    summary, hits, report = _code_stream(tmp_path, hash_embedder, _Forging(CODE_SKILL), sandboxed=sandboxed)
    [hit] = hits
    assert hit.ran == 0  # its real count was garbled into a string: dropped, never an error
    assert summary.records[1].success  # the forging action ran, the task was evaluated as usual
    trajectory = json.loads((tmp_path / "runs" / "code" / summary.records[1].trajectory).read_text())
    recorded = [step.get("skill_calls") for step in trajectory["steps"] if step["type"] == "ActionStep"]
    assert recorded
    assert all(calls == {} for calls in recorded)
    assert report.table("skill_use").rows[0]["used_pct"] == 0.0


@pytest.mark.parametrize("sandboxed", [False, True], ids=["in-process", "sandbox"])
def test_counting_keeps_a_skills_behaviour(tmp_path, sandboxed):
    source = ('"""Helpers."""\nimport json\nLIMIT = 2\n\n\ndef double(x):\n    """Twice x."""\n'
              '    return 2 * x\n\n\ndef quad(x):\n    return double(double(x))\n\n\n'
              'def fail():\n    raise KeyError("boom")\n\n\nclass Box:\n    def get(self):\n        return LIMIT\n')
    env = TinyEnv([1], workdir=tmp_path, sandboxed=sandboxed)
    episode = env.start(env.tasks()[0])
    with episode:
        assert not episode.load_code(source, "skill-1").error
        shown = episode.step("print(quad(3), double.__name__, double.__doc__, double.__wrapped__(1), Box().get())")
        assert shown.output.strip() == "12 double Twice x. 2 2"
        assert shown.skill_calls == {"skill-1": 1}  # quad's own calls of double are the skill's, not counted
        failed = episode.step("try:\n    fail()\nexcept KeyError as exc:\n    print(repr(exc))\nfail()")
        assert "KeyError('boom')" in failed.output
        assert failed.error
        assert "KeyError" in failed.output
        assert failed.skill_calls == {"skill-1": 2}
        assert episode.step("x = 1").skill_calls == {}  # counts are per action
        assert not episode.load_code("def plain(y):\n    return y\n").error  # loaded without an id: not counted
        assert episode.step("plain(1)").skill_calls == {}
        assert "SkillRefused" in episode.load_code(f"{HOOK} = 1\n", "skill-2").output  # a skill may not bind the hook


def test_a_garbled_counts_record_is_cleaned():
    assert clean(None) == {}
    assert clean([("a", 1)]) == {}
    assert clean("a") == {}
    raw = {"a": 2, "b": "3", "c": True, "d": 0, "e": -1, 7: 1, "x" * 201: 1, "f": 10**12, "g": 1.0, "h": 1}
    assert clean(raw, allowed=lambda key: key != "h") == {"a": 2}
    assert len(clean({f"s{i}": 1 for i in range(5000)})) == 1000

"""20 % injected model faults (at the mock server, and with the fault wrapper): the stream completes and every task
is recorded; transport faults are retried, damaged answers are lived with."""

from __future__ import annotations

import json

from helpers_tinyenv import TEXT_SKILL, CounterScript, TinyEnv

from skilltransfer.llm import make_model
from skilltransfer.llm.chain import Retry
from skilltransfer.llm.retry import RetryPolicy
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.llm.testing.faults import FaultyModel
from skilltransfer.llm.testing.mock_server import CONTENT_FAULTS, FAULT_KINDS, TRANSPORT_FAULTS, MockServer
from skilltransfer.log import TaskRecord
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import StreamConfig

TARGETS = [3, 5, 2, 4, 7, 1, 6, 8]


class Retried:
    """A test double's calls through the chain's retry layer (the client retries its own requests the same way)."""

    def __init__(self, inner, retry: Retry) -> None:
        self.inner, self.retry = inner, retry

    def complete(self, messages, **params):
        return self.retry(lambda: self.inner.complete(messages, **params))


def tolerant(script: CounterScript):
    """The counter script, answering "No idea." where a damaged earlier answer (e.g. a planner reply cut short,
    naming no target) leaves it nothing to act on; the agent sees a format error, as with a real model."""

    def reply(messages):
        try:
            return script(messages)
        except IndexError:
            return "No idea."

    return reply


def records_of(path) -> list[TaskRecord]:
    return [TaskRecord.model_validate(json.loads(x)) for x in (path / "results.jsonl").read_text().splitlines()]


def check_every_task_recorded(summary, config) -> list[TaskRecord]:
    records = records_of(summary.path)
    assert [r.task_id for r in records] == [f"tiny/{i}" for i in range(len(TARGETS))]
    assert [r.position for r in records] == list(range(len(TARGETS)))
    assert summary.ran == [r.task_id for r in records]
    for record in records:
        assert (summary.path / record.trajectory).is_file()
        assert record.model_calls >= 1
    return records


def test_mock_server_faults_through_the_openai_client(tmp_path, hash_embedder):
    """Every kind of server fault at 20 %: 429/500/hangs/drops/non-JSON are retried, junk and cut answers reach the
    agent, and the stream still records every task."""
    env = TinyEnv(TARGETS, workdir=tmp_path / "ws")
    config = StreamConfig(run="faults", runs_dir=str(tmp_path / "runs"), condition="subtask+text",
                          agent={"step_limit": 12})  # a cut-short plan leaves the script stuck: keep that short
    with MockServer(replies=tolerant(CounterScript(TEXT_SKILL)), fault_rate=0.2, fault_kinds=FAULT_KINDS, seed=3,
                    hang_s=0.5) as server:
        model = make_model("openai", base_url=server.url, model="mock", api_key="x", backoff_base_s=0,
                           timeout_s=0.2, max_retries=6)
        summary = run_stream(env, model, config, embedder=hash_embedder, tasks=env.tasks())
        faults, n_requests = list(server.faults), len(server.requests)
    records = check_every_task_recorded(summary, config)
    assert 0.1 <= len(faults) / n_requests <= 0.3
    transport = sum(f in TRANSPORT_FAULTS for f in faults)
    assert transport >= 3
    assert any(f in CONTENT_FAULTS for f in faults)
    # a retried request is one logged call: the server saw exactly the calls plus one extra per transport fault
    assert n_requests == sum(r.model_calls for r in records) + transport
    assert sum(r.success for r in records) >= len(TARGETS) // 2


def test_fault_wrapper_with_retries(tmp_path, hash_embedder):
    env = TinyEnv(TARGETS, workdir=tmp_path / "ws")
    config = StreamConfig(run="wrapped", runs_dir=str(tmp_path / "runs"), condition="task+text")
    faulty = FaultyModel(ScriptedModel(CounterScript(TEXT_SKILL)), rate=0.2, seed=1)
    model = Retried(faulty, Retry(RetryPolicy(max_retries=6, base_s=0), what="faulty model"))
    summary = run_stream(env, model, config, embedder=hash_embedder)
    records = check_every_task_recorded(summary, config)
    assert 0.1 <= len(faulty.faults) / faulty.calls <= 0.3
    retries = sum(f in ("rate_limit", "server_error", "timeout") for f in faulty.faults)
    assert retries > 0
    assert faulty.calls == sum(r.model_calls for r in records) + retries

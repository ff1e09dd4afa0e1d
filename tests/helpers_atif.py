"""ATIF trajectories in the shapes other tools write them (test fixtures, written by this file; no file of another
project is copied).

The shapes follow what public material shows of each writer (named in docs/atif.md): Harbor's job folder
(``<job>/config.json`` and ``result.json`` beside one folder per trial, each ``<trial>/result.json`` with
``verifier_result.rewards.reward`` and ``<trial>/agent/trajectory.json``; Terminus-2's ``bash_command`` calls with
``keystrokes``, its summarisation subagent written beside the trajectory as ``trajectory.summarization-1-summary.json``
and its continuation as ``trajectory.cont-1.json`` whose first steps are copied context); Claude Code's
``Bash``/``Read``/``Write`` calls with an embedded ``Task`` subagent; Codex's ``exec_command`` with
``reasoning_content``; an OpenHands-style ``tool`` step; and a pre-1.5 writer that names the model ``agent.model``,
gives tool calls as ``id``/``name`` and puts tool results in ``system`` steps (``observation.content``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

COUNT_WORDS = ("Count the words in /app/notes.txt and write the number to /app/count.txt. The file has one "
               "sentence per line.")
FIX_PERMISSIONS = "Make /app/run.sh executable and run it; its output must be in /app/out.txt."


def _write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def _bash(step_id: int, at: str, analysis: str, keystrokes: str, output: str, *, tokens: tuple[int, int] = (900, 60),
          complete: bool = False) -> dict[str, Any]:
    calls = [{"tool_call_id": f"call_{step_id}_1", "function_name": "bash_command",
              "arguments": {"keystrokes": keystrokes, "duration": 0.5}}]
    if complete:
        calls.append({"tool_call_id": f"call_{step_id}_task_complete", "function_name": "mark_task_complete",
                      "arguments": {}})
    return {"step_id": step_id, "timestamp": at, "source": "agent", "model_name": "openai/gpt-test",
            "message": f"Analysis: {analysis}\nPlan: run {keystrokes.strip()!r}", "tool_calls": calls,
            "observation": {"results": [{"source_call_id": f"call_{step_id}_1",
                                         "content": f"New Terminal Output:\n\nroot@box:/app# {keystrokes}{output}"}]},
            "metrics": {"prompt_tokens": tokens[0], "completion_tokens": tokens[1], "cached_tokens": tokens[0] // 2,
                        "cost_usd": 0.0012}}


def _prompt(instruction: str) -> str:
    return ("You are an AI assistant tasked with solving command-line tasks in a Linux environment.\n\n"
            f"Task Description:\n{instruction}\n\nCurrent terminal state:\nroot@box:/app#")


def terminus_trajectory(instruction: str, day: int, *, summarized: bool = False) -> dict[str, Any]:
    """A Terminus-2 trajectory (ATIF-v1.6) of two or three shell steps."""
    at = f"2026-03-{day:02d}T10:00:0"
    steps: list[dict[str, Any]] = [{"step_id": 1, "timestamp": at + "0Z", "source": "user",
                                    "message": _prompt(instruction)}]
    steps.append(_bash(2, at + "4Z", "The file is in /app; look at it first.", "ls -la /app\n",
                       "notes.txt  run.sh\n"))
    if summarized:
        steps.append({"step_id": 3, "timestamp": at + "5Z", "source": "system",
                      "message": "Performed context summarization and handoff to continue task.",
                      "observation": {"results": [{"subagent_trajectory_ref": [
                          {"session_id": "sess-count-summary", "trajectory_path":
                           "trajectory.summarization-1-summary.json"}]}]}})
    steps.append(_bash(len(steps) + 1, at + "8Z", "Count with wc and keep the number only.",
                       "wc -w < /app/notes.txt > /app/count.txt && cat /app/count.txt\n", "42\n", complete=True))
    return {"schema_version": "ATIF-v1.6", "session_id": f"sess-{day}",
            "agent": {"name": "terminus-2", "version": "2.0.0", "model_name": "openai/gpt-test",
                      "extra": {"parser": "json", "temperature": 0.7}},
            "steps": steps,
            "final_metrics": {"total_prompt_tokens": 1800, "total_completion_tokens": 120, "total_cached_tokens": 900,
                              "total_cost_usd": 0.0024}}


def _trial(job: Path, name: str, task: str, document: dict[str, Any] | str, reward: float | None, *,
           exception: str | None = None, started: str = "2026-03-01T10:00:00Z") -> Path:
    trial = job / name
    agent = trial / "agent"
    agent.mkdir(parents=True)
    if isinstance(document, str):
        (agent / "trajectory.json").write_text(document, encoding="utf-8")
    else:
        _write(agent / "trajectory.json", document)
    result: dict[str, Any] = {
        "task_name": task, "trial_name": name, "started_at": started, "finished_at": started,
        "agent_info": {"name": "terminus-2", "version": "2.0.0", "model_info": {"name": "gpt-test",
                                                                                 "provider": "openai"}},
        "agent_result": {"n_input_tokens": 1800, "n_output_tokens": 120, "cost_usd": 0.0024},
        "verifier_result": {"rewards": {"reward": reward}} if reward is not None else None,
        "exception_info": {"exception_type": exception, "exception_message": f"{exception}: 900 s"}
        if exception else None}
    _write(trial / "result.json", result)
    return trial


def harbor_job(root: Path) -> Path:
    """A Harbor job folder: two passing trials of one task (one summarised and continued), a failed trial, and a
    trial whose trajectory is cut off (not JSON)."""
    job = root / "2026-03-01__10-00-00"
    _write(job / "config.json", {"job_name": job.name, "agents": [{"name": "terminus-2",
                                                                    "model_name": "openai/gpt-test"}],
                                 "datasets": [{"name": "terminal-bench", "version": "2.0"}]})
    _write(job / "result.json", {"id": "job-1", "n_total_trials": 4, "stats": {"n_trials": 4, "n_errors": 1}})
    first = _trial(job, "count-words__Ab3xQ9k", "count-words", terminus_trajectory(COUNT_WORDS, 2, summarized=True),
                   1.0, started="2026-03-02T10:00:00Z")
    summary = terminus_trajectory(COUNT_WORDS, 2)
    summary["steps"] = [{"step_id": 1, "source": "user", "message": "Summarize what was done so far."},
                        {"step_id": 2, "source": "agent", "message": "Listed /app: notes.txt is there.",
                         "metrics": {"prompt_tokens": 400, "completion_tokens": 30}}]
    summary["session_id"] = "sess-count-summary"
    _write(first / "agent" / "trajectory.summarization-1-summary.json", summary)
    continued = terminus_trajectory(COUNT_WORDS, 2)
    for step in continued["steps"][:2]:
        step["is_copied_context"] = True
    continued["steps"].append(_bash(4, "2026-03-02T10:01:00Z", "Check the count once more.", "cat /app/count.txt\n",
                                    "42\n"))
    doc = json.loads((first / "agent" / "trajectory.json").read_text())
    doc["continued_trajectory_ref"] = "trajectory.cont-1.json"
    _write(first / "agent" / "trajectory.json", doc)
    _write(first / "agent" / "trajectory.cont-1.json", continued)
    _trial(job, "count-words__Qp2ww7L", "count-words", terminus_trajectory(COUNT_WORDS, 5), 1.0,
           started="2026-03-05T10:00:00Z")
    failed = terminus_trajectory(FIX_PERMISSIONS, 3)
    _trial(job, "fix-permissions__Zz81Lmq", "fix-permissions", failed, 0.0, exception="AgentTimeoutError",
           started="2026-03-03T10:00:00Z")
    _trial(job, "broken__Xy0", "broken", '{"schema_version": "ATIF-v1.6", "steps": [{"step_id": 1,', None)
    return job


def claude_code_trajectory() -> dict[str, Any]:
    """A Claude Code trajectory with an embedded Task subagent; ``arguments`` of the Task call as a JSON string and
    no ``agent.version`` (both refused by the atif models, read anyway)."""
    return {
        "schema_version": "ATIF-v1.7", "session_id": "cc-sess-1",
        "agent": {"name": "claude-code", "model_name": "claude-test", "extra": {"cwds": ["/app"]}},
        "steps": [
            {"step_id": 1, "timestamp": "2026-03-04T09:00:00Z", "source": "user", "message": FIX_PERMISSIONS},
            {"step_id": 2, "timestamp": "2026-03-04T09:00:05Z", "source": "agent", "model_name": "claude-test",
             "message": "I'll check the script first.",
             "tool_calls": [{"tool_call_id": "toolu_1", "function_name": "Bash",
                             "arguments": {"command": "ls -l /app/run.sh", "description": "Check the mode"}}],
             "observation": {"results": [{"source_call_id": "toolu_1",
                                          "content": "-rw-r--r-- 1 root root 20 run.sh"}]},
             "metrics": {"prompt_tokens": 1500, "completion_tokens": 40, "cached_tokens": 1200}},
            {"step_id": 3, "timestamp": "2026-03-04T09:00:09Z", "source": "agent", "model_name": "claude-test",
             "message": "Delegating the fix to a subagent.",
             "tool_calls": [{"tool_call_id": "toolu_2", "function_name": "Task",
                             "arguments": '{"prompt": "make run.sh executable and run it"}'}],
             "observation": {"results": [{"source_call_id": "toolu_2", "content": "done: out.txt written",
                                          "subagent_trajectory_ref": [{"trajectory_id": "cc-sess-1/agent-a"}]}]},
             "metrics": {"prompt_tokens": 1600, "completion_tokens": 30}},
            {"step_id": 4, "timestamp": "2026-03-04T09:00:20Z", "source": "agent", "model_name": "claude-test",
             "message": "The script ran; /app/out.txt holds its output."},
        ],
        "subagent_trajectories": [{
            "schema_version": "ATIF-v1.7", "trajectory_id": "cc-sess-1/agent-a", "session_id": "cc-sess-1",
            "agent": {"name": "claude-code", "version": "2.1.0", "extra": {"subagent_type": "general-purpose"}},
            "steps": [
                {"step_id": 1, "source": "user", "message": "make run.sh executable and run it"},
                {"step_id": 2, "source": "agent", "message": "chmod and run.",
                 "tool_calls": [{"tool_call_id": "toolu_a1", "function_name": "Bash",
                                 "arguments": {"command": "chmod +x /app/run.sh && /app/run.sh > /app/out.txt"}}],
                 "observation": {"results": [{"source_call_id": "toolu_a1", "content": ""}]},
                 "metrics": {"prompt_tokens": 700, "completion_tokens": 25}}]}],
        "final_metrics": {"total_prompt_tokens": 3800, "total_completion_tokens": 95, "total_steps": 4},
    }


def codex_trajectory() -> dict[str, Any]:
    """A Codex trajectory (ATIF-v1.7): exec_command calls, reasoning, tool metadata in ``extra``, a reward in the
    document's ``extra``."""
    return {
        "schema_version": "ATIF-v1.7", "session_id": "codex-1",
        "agent": {"name": "codex", "version": "0.118.0", "model_name": "gpt-codex-test"},
        "steps": [
            {"step_id": 1, "timestamp": "2026-03-06T08:00:00Z", "source": "system", "message": "You are Codex."},
            {"step_id": 2, "timestamp": "2026-03-06T08:00:01Z", "source": "user", "message": COUNT_WORDS},
            {"step_id": 3, "timestamp": "2026-03-06T08:00:03Z", "source": "agent", "model_name": "gpt-codex-test",
             "message": "Counting.", "reasoning_content": "wc -w counts words; redirect to the file.",
             "tool_calls": [{"tool_call_id": "call-1", "function_name": "exec_command",
                             "arguments": {"cmd": "wc -w < /app/notes.txt > /app/count.txt"}}],
             "observation": {"results": [{"source_call_id": "call-1", "content": "Process exited with code 0"}]},
             "metrics": {"prompt_tokens": 2000, "completion_tokens": 80},
             "extra": {"status": "completed", "tool_metadata": {"exit_code": 0}}},
        ],
        "extra": {"reward": 1.0},
    }


def openhands_trajectory() -> dict[str, Any]:
    """An OpenHands-style trajectory whose tool result is a step of source ``tool`` (not an ATIF source)."""
    return {
        "schema_version": "ATIF-v1.5", "session_id": "oh-1",
        "agent": {"name": "openhands-sdk", "version": "1.0.0", "model_name": "oh-model",
                  "tool_definitions": [{"type": "function", "function": {"name": "terminal"}}]},
        "steps": [
            {"step_id": 1, "source": "user", "message": FIX_PERMISSIONS},
            {"step_id": 2, "source": "agent", "message": "Fix the mode.",
             "tool_calls": [{"tool_call_id": "c1", "function_name": "terminal",
                             "arguments": {"command": "chmod +x /app/run.sh && /app/run.sh > /app/out.txt"}}]},
            {"step_id": 3, "source": "tool", "observation": {"results": [{"source_call_id": "c1",
                                                                         "content": "exit 0"}]}},
        ],
    }


def legacy_trajectory() -> dict[str, Any]:
    """A pre-1.5 writer's shape: ``schema_version`` "1.4", ``agent.model``, tool calls as ``id``/``name``, tool
    results in ``system`` steps as ``observation.content``, the outcome as ``extra.success``."""
    return {
        "schema_version": "1.4", "session_id": "legacy-1",
        "agent": {"name": "claude-code", "version": "2.0.0", "model": "claude-legacy", "provider": "anthropic"},
        "steps": [
            {"step_id": 1, "timestamp": "2026-03-07T08:00:00Z", "source": "user", "message": COUNT_WORDS},
            {"step_id": 2, "timestamp": "2026-03-07T08:00:02Z", "source": "system", "message": "Tool result for t1",
             "observation": {"type": "tool_result", "content": "42", "result": {"success": True}}},
            {"step_id": 3, "timestamp": "2026-03-07T08:00:04Z", "source": "agent", "message": "Counted.",
             "tool_calls": [{"id": "t1", "name": "Bash", "arguments": {"command": "wc -w < /app/notes.txt"}}]},
        ],
        "final_metrics": {"total_prompt_tokens": 70, "total_completion_tokens": 150, "total_cost_usd": 0.01},
        "extra": {"instruction": COUNT_WORDS, "success": True},
    }


def other_writers(folder: Path) -> Path:
    """The four non-Harbor shapes as files of one folder, plus a JSON file that is no trajectory."""
    _write(folder / "claude-code.json", claude_code_trajectory())
    _write(folder / "codex" / "rollout.json", codex_trajectory())
    _write(folder / "openhands.json", openhands_trajectory())
    _write(folder / "legacy.json", legacy_trajectory())
    _write(folder / "package.json", {"name": "not-a-trajectory"})
    return folder


# ------------------------------------------------------------------------------------------------- hostile input
ESCAPES = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b[31mred\x1b[0m\r\x00\u202e"
"""Control sequences a hostile trajectory may carry (clipboard OSC 52, clear screen, colour, CR, NUL, bidi)."""


def _minimal(steps: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"schema_version": "ATIF-v1.8", "session_id": "h", "agent": {"name": "hostile", "version": "1"},
            "steps": steps, **extra}


def _act(step_id: int, text: str = "act", **extra: Any) -> dict[str, Any]:
    return {"step_id": step_id, "source": "agent", "message": text,
            "tool_calls": [{"tool_call_id": f"c{step_id}", "function_name": "bash", "arguments": {"cmd": "ls"}}],
            "observation": {"results": [{"source_call_id": f"c{step_id}", "content": "ok"}]}, **extra}


def hostile_cases(folder: Path) -> dict[str, Path]:
    """One file (or folder) per hostile case below ``folder``: name -> path (see tests/log/test_atif_read.py)."""
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    huge = folder / "huge.json"  # 100 MB, sparse: its size is refused before it is read
    with huge.open("wb") as f:
        f.write(b'{"schema_version": "ATIF-v1.8", "steps": [')
        f.truncate(100 << 20)
    out["100 MB"] = huge
    steps = [{"step_id": 1, "source": "user", "message": "go"}] + [_act(i) for i in range(2, 100_001)]
    out["100,000 steps"] = _write(folder / "many-steps.json", _minimal(steps))
    deep = folder / "deep.json"
    deep.write_text('{"schema_version": "ATIF-v1.8", "steps": [], "extra": ' + "[" * 100_000 + "]" * 100_000 + "}")
    out["deep nesting"] = deep
    nested: dict[str, Any] = _minimal([_act(1)], trajectory_id="n0")
    for level in range(1, 40):  # subagents embedded 40 deep
        nested = _minimal([{"step_id": 1, "source": "user", "message": "sub"}, _act(2, observation={"results": [
            {"subagent_trajectory_ref": [{"trajectory_id": f"n{level - 1}"}]}]})],
            trajectory_id=f"n{level}", subagent_trajectories=[nested])
    out["deep subagents"] = _write(folder / "deep-subagents.json", nested)
    out["control characters"] = _write(folder / "control.json", {
        "schema_version": "ATIF-v1.8", "session_id": "s" + ESCAPES,
        "agent": {"name": "agent" + ESCAPES, "version": "1", "model_name": "m" + ESCAPES},
        "steps": [{"step_id": 1, "source": "user", "message": "Count the words" + ESCAPES},
                  {"step_id": 2, "source": "agent", "message": "thinking" + ESCAPES,
                   "tool_calls": [{"tool_call_id": "c" + ESCAPES, "function_name": "bash" + ESCAPES,
                                   "arguments": {"cmd": "ls" + ESCAPES}}],
                   "observation": {"results": [{"source_call_id": "c" + ESCAPES, "content": "out" + ESCAPES}]}}],
        "extra": {"reward": 1.0}})
    looped = _minimal([{"step_id": 1, "source": "user", "message": "loop"}, _act(2, observation={"results": [
        {"subagent_trajectory_ref": [{"trajectory_id": "a"}, {"trajectory_id": "a"}, {"trajectory_id": "h"}]}]})],
        subagent_trajectories=[{**_minimal([_act(1, observation={"results": [
            {"subagent_trajectory_ref": [{"trajectory_id": "a"}]}]})]), "trajectory_id": "a",
            "subagent_trajectories": [{**_minimal([_act(1)]), "trajectory_id": "a"}]}])
    out["subagent_trajectories loop"] = _write(folder / "loop.json", looped)
    files = folder / "file-loop" / "agent"
    _write(files / "trajectory.json", _minimal([{"step_id": 1, "source": "user", "message": "files"}, _act(
        2, observation={"results": [{"subagent_trajectory_ref": [{"trajectory_path": "trajectory.sub-1.json"}]}]})],
        continued_trajectory_ref="trajectory.json"))
    _write(files / "trajectory.sub-1.json", _minimal([_act(1, observation={"results": [
        {"subagent_trajectory_ref": [{"trajectory_path": "trajectory.json"},
                                     {"trajectory_path": "../../huge.json"}]}]})]))
    out["file reference loop"] = files / "trajectory.json"
    return out

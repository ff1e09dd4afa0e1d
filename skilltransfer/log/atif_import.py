"""An ATIF trajectory any agent wrote (Claude Code, Codex, Terminus, OpenHands, ... through Harbor, or any other
writer) as the toolkit's trajectory view: `import_atif` turns the parsed document into a `TrajectoryLog` and its
`TaskRecord`, so ``show``, ``view``, ``score --tasks`` and ``induce`` read it like a run's task.

What it keeps, step by step (in the order the agent took them, each subagent's steps right after the step that
started it):

- the first ``user`` step is the task's instruction (as written; in Terminus' prompt template, its ``Task
  Description:`` section, `task_text`);
- each ``agent`` step is an ``ActionStep``: ``reply`` its message, ``thought`` its message when it made tool calls,
  ``action`` its tool calls one per line as ``name(argument=value, ...)``, ``observation`` the results' contents,
  tokens from ``metrics``; its ``reasoning_content`` is the call's reasoning (with ``prompts``);
- later ``user`` and ``system`` steps are ``MessageStep``\\ s; steps marked ``is_copied_context`` are left out;
- a subagent (``subagent_trajectory_ref``) embedded in the parent's ``subagent_trajectories``, or written as a file
  beside the trajectory (Harbor's ``trajectory.summarization-1-summary.json``), is read in its place with
  ``window`` k (the k-th subagent); a continuation (``continued_trajectory_ref``) beside it is appended. Files are
  read by a callback that keeps to the trajectory's own folder (`skilltransfer.log.atif_files`); a reference that
  leads back to a trajectory already open (a loop), or to nothing, is named in ``notes`` and not followed.

A document that the ``atif`` models refuse is still read when its steps can be (an ``agent`` without ``version``,
``arguments`` as a JSON string, a ``tool`` step ...): ``notes`` names the deviation in one line. One that has no
steps to read is unusable (`UnusableTrajectory`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.log.atif import atif_problem, from_atif, is_own
from skilltransfer.log.prompts import message_id, reasoning_message, reply_message
from skilltransfer.log.records import TaskRecord, TrajectoryLog

MAX_STEPS = 20_000
"""The most steps read from one trajectory with its subagents and continuations (more: unusable, one line)."""
MAX_DOCUMENTS = 1_000
"""The most subagent and continuation documents read for one trajectory."""
SUCCESS_REWARD = 1.0
"""The reward at or above which a trajectory counts as successful (Harbor's verifiers write 1.0 for a pass)."""
_MAIN_ARGUMENTS = ("code", "command", "cmd", "keystrokes", "script", "input", "query")


class UnusableTrajectory(ValueError):
    """A document that holds no trajectory this reader can use (the message says why, in one line)."""


@dataclass
class Outcome:
    """What is known beside the trajectory (a Harbor trial's ``result.json``)."""

    reward: float | None = None
    task_name: str | None = None
    trial_name: str | None = None
    exception: str | None = None
    agent: str | None = None
    model: str | None = None
    started: str | None = None
    finished: str | None = None


@dataclass
class ImportedTrajectory:
    """One trajectory read from ATIF, as the toolkit's view, with where it came from."""

    trajectory: TrajectoryLog
    record: TaskRecord
    source: str
    """The file it was read from (as shown to the user)."""
    session_id: str | None
    agent: str
    agent_version: str
    model: str | None
    reward: float | None
    """The verifier's reward (a Harbor trial's ``result.json``, or the document's ``extra.reward``); None: unknown."""
    started: str | None = None
    """When it started (the first step's timestamp, else the trial's), for time order; None: unknown."""
    notes: list[str] = field(default_factory=list)
    """Deviations from the ATIF models and references not followed (read anyway)."""
    prompts: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Message id -> message for the ids the calls name (replies and reasoning; the toolkit's own files: all)."""
    own: bool = False
    """Written by this toolkit (`skilltransfer.log.atif.to_atif`): read back exactly."""

    @property
    def success(self) -> bool | None:
        """Whether the reward reached `SUCCESS_REWARD` (None: no reward known)."""
        return None if self.reward is None else self.reward >= SUCCESS_REWARD


def _text(message: Any) -> str:
    """A message or content as text: a string as is, the text parts of a content-part list (other parts named)."""
    if isinstance(message, str):
        return message
    if isinstance(message, list):
        parts = []
        for part in message:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text") or ""))
            elif isinstance(part, dict):
                source = _dict(part.get("source"))
                parts.append(f"[{part.get('type')}: {source.get('path', '')}]")
        return "\n".join(parts)
    if message is None:
        return ""
    return json.dumps(message, ensure_ascii=False, default=str)


def _value(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def render_call(call: Any) -> str:
    """A tool call as one line of code: ``name(argument=value, ...)`` (its arguments as given when not an object)."""
    if not isinstance(call, dict):
        return _text(call)
    name = str(call.get("function_name") or call.get("name") or "tool")
    arguments = call.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return f"{name}({arguments})"
    if not isinstance(arguments, dict):
        return f"{name}({_value(arguments) if arguments is not None else ''})"
    return f"{name}({', '.join(f'{k}={_value(v)}' for k, v in arguments.items())})"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


MAX_TOKENS = 10**9
"""The most tokens one step's metrics may claim (more is read as unknown: 0), so that every count and the
dependency P*C stay within what a run folder holds (`skilltransfer.log.numbers`)."""


def _number(value: Any) -> float | None:
    """A finite number of sensible size (at most 1e12 in magnitude), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or isinstance(value, int) and abs(value) > 10**12:
        return None
    number = float(value)
    return number if math.isfinite(number) and abs(number) <= 1e12 else None


def _tokens(value: Any) -> int:
    number = _number(value)
    return int(number) if number is not None and 0 <= number <= MAX_TOKENS else 0


def _timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)  # comparable with the aware ones


_TASK_SECTION = re.compile(r"^Task Description:[ \t]*\n(.*?)(?:\n[ \t]*\nCurrent terminal state:|\Z)",
                           re.MULTILINE | re.DOTALL)
"""The task section of Terminus' prompt template (Harbor's default agent): the instruction inside it."""


def task_text(message: str) -> str:
    """A task's instruction from its first user message: the message as written, or, when it is Terminus' prompt
    template, its ``Task Description:`` section."""
    found = _TASK_SECTION.search(message)
    return found.group(1).strip() if found and found.group(1).strip() else message


FileReader = Callable[[str], dict[str, Any]]
"""Reads a trajectory file named by a reference (a name beside the trajectory); raises ValueError (one line)."""


@dataclass
class _Walk:
    """The state of one trajectory's walk: the steps and calls so far, what is open, the notes."""

    read_file: FileReader | None
    steps: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    prompts: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    windows: int = 0
    documents: int = 0
    actions: int = 0
    copied: int = 0
    instruction: str | None = None
    open: set[str] = field(default_factory=set)
    times: list[datetime] = field(default_factory=list)

    def note(self, text: str) -> None:
        if len(self.notes) < 20:
            self.notes.append(text)
        elif len(self.notes) == 20:
            self.notes.append("(more notes left out)")

    def add(self, step: dict[str, Any]) -> None:
        if len(self.steps) >= MAX_STEPS:
            raise UnusableTrajectory(f"more than {MAX_STEPS:,} steps with its subagents and continuations (the most "
                                     "read from one trajectory)")
        self.steps.append(step)


def _results(observation: Any) -> list[dict[str, Any]]:
    """An observation's results (a writer that puts ``content`` on the observation itself: that one result)."""
    if not isinstance(observation, dict):
        return []
    results = observation.get("results")
    if isinstance(results, list):
        return [r for r in results if isinstance(r, dict)]
    return [observation] if "content" in observation else []


def count_steps(document: Any) -> int:
    """The steps of a document and every document embedded in it (iterative; no recursion)."""
    total, pending = 0, [document]
    while pending:
        doc = pending.pop()
        if not isinstance(doc, dict):
            continue
        steps = doc.get("steps")
        total += len(steps) if isinstance(steps, list) else 0
        subs = doc.get("subagent_trajectories")
        if isinstance(subs, list):
            pending.extend(subs)
    return total


def _walk(walk: _Walk, document: dict[str, Any], window: int, where: str) -> None:
    """Add ``document``'s steps (and the subagents they start) to ``walk``."""
    walk.documents += 1
    if walk.documents > MAX_DOCUMENTS:
        raise UnusableTrajectory(f"more than {MAX_DOCUMENTS:,} subagent and continuation documents")
    steps = document.get("steps")
    if not isinstance(steps, list):
        raise UnusableTrajectory(f"{where}: no steps list")
    embedded = {str(sub.get("trajectory_id")): sub for sub in document.get("subagent_trajectories") or []
                if isinstance(sub, dict) and sub.get("trajectory_id") is not None}
    referenced: set[str] = set()
    for number, step in enumerate(steps):
        if not isinstance(step, dict):
            walk.note(f"{where}steps[{number}]: not an object (left out)")
            continue
        if step.get("is_copied_context") is True:
            walk.copied += 1
            continue
        when = _timestamp(step.get("timestamp"))
        if when is not None:
            walk.times.append(when)
        source = step.get("source")
        text = _text(step.get("message"))
        results = _results(step.get("observation"))
        observation = "\n".join(_text(r.get("content")) for r in results if r.get("content") is not None)
        if source == "user" and walk.instruction is None and window == 0:
            walk.instruction = task_text(text)
        elif source == "agent":
            _agent_step(walk, step, text, observation, window)
        elif source in ("user", "system"):
            walk.add({"type": "MessageStep", "source": source, "message": text + (
                f"\n{observation}" if observation else ""), "window": window})
        else:  # a "tool" step and the like: its observation belongs to the step before it
            walk.note(f"{where}steps[{number}]: source {str(source)[:40]!r} is not user/agent/system (read as an "
                      "observation)")
            previous = walk.steps[-1] if walk.steps else None
            if previous is not None and previous.get("type") == "ActionStep":
                previous["observation"] = "\n".join(filter(None, [previous["observation"], observation or text]))
            else:
                walk.add({"type": "MessageStep", "source": "system", "message": observation or text,
                          "window": window})
        for result in results:
            for ref in result.get("subagent_trajectory_ref") or []:
                if isinstance(ref, dict):
                    _subagent(walk, ref, embedded, referenced, f"{where}steps[{number}]")
    for name, sub in embedded.items():
        if name not in referenced and name not in walk.open:
            walk.note(f"{where}subagent {name[:60]!r} is referenced by no step (read after the steps)")
            walk.open.add(name)
            walk.windows += 1
            _walk(walk, sub, walk.windows, f"{where}subagent {name[:60]!r}: ")
    continued = document.get("continued_trajectory_ref")
    if isinstance(continued, str) and continued:
        _file(walk, continued, window, f"{where}continued_trajectory_ref", continuation=True)


def _agent_step(walk: _Walk, step: dict[str, Any], text: str, observation: str, window: int) -> None:
    calls = step.get("tool_calls") if isinstance(step.get("tool_calls"), list) else []
    action = "\n".join(render_call(call) for call in calls) if calls else None
    metrics = _dict(step.get("metrics"))
    prompt, completion = _tokens(metrics.get("prompt_tokens")), _tokens(metrics.get("completion_tokens"))
    reasoning = step.get("reasoning_content") if isinstance(step.get("reasoning_content"), str) else None
    walk.add({"type": "ActionStep", "index": walk.actions, "subtask_index": None, "reply": text,
              "thought": text if action is not None else "", "action": action, "observation": observation,
              "prompt_tokens": prompt, "completion_tokens": completion, "window": window})
    walk.actions += 1
    if step.get("llm_call_count") == 0:
        return
    call: dict[str, Any] = {"role": "executor", "prompt_tokens": prompt, "completion_tokens": completion,
                            "latency_s": 0.0, "usage_source": "atif" if metrics else "none", "window": window,
                            "dependency": prompt * completion + completion * (completion + 1) // 2}
    cost = _number(metrics.get("cost_usd"))
    if cost is not None:
        call["cost_usd"] = cost
    if text:
        reply = reply_message(text)
        call["reply"] = message_id(reply)
        walk.prompts[call["reply"]] = reply
    if reasoning:
        thought = reasoning_message(reasoning)
        call["reasoning"] = message_id(thought)
        walk.prompts[call["reasoning"]] = thought
    walk.calls.append(call)


def _subagent(walk: _Walk, ref: dict[str, Any], embedded: dict[str, Any], referenced: set[str], where: str) -> None:
    """Read a referenced subagent in place (embedded by id, else a file beside the trajectory)."""
    name = ref.get("trajectory_id")
    if name is not None and str(name) in embedded:
        key = str(name)
        if key in referenced:
            walk.note(f"{where}: subagent {key[:60]!r} is referenced again (read once)")
            return
        referenced.add(key)
        if key in walk.open:
            walk.note(f"{where}: subagent {key[:60]!r} is already open (a loop): not followed")
            return
        walk.open.add(key)
        walk.windows += 1
        _walk(walk, embedded[key], walk.windows, f"subagent {key[:60]!r}: ")
        walk.open.discard(key)
        return
    path = ref.get("trajectory_path")
    if isinstance(path, str) and path:
        walk.windows += 1
        _file(walk, path, walk.windows, where)
        return
    walk.note(f"{where}: subagent {str(name)[:60]!r} is neither embedded nor a file (not read)")


def _file(walk: _Walk, name: str, window: int, where: str, *, continuation: bool = False) -> None:
    """Read a subagent or continuation written as a file beside the trajectory."""
    key = f"file:{name}"
    if walk.read_file is None:
        walk.note(f"{where}: {name[:80]!r} is a file reference (not read here)")
        return
    if key in walk.open:
        walk.note(f"{where}: {name[:80]!r} is already open (a loop): not followed")
        return
    try:
        document = walk.read_file(name)
    except ValueError as exc:
        walk.note(f"{where}: {name[:80]!r} not read ({str(exc)[:160]})")
        return
    walk.open.add(key)
    if continuation:
        walk.note(f"continued in {name[:80]!r} (read after the steps)")
    _walk(walk, document, window, f"{name[:60]}: ")
    if not continuation:
        walk.open.discard(key)


def _outcome_reward(document: dict[str, Any], outcome: Outcome | None) -> float | None:
    if outcome is not None and outcome.reward is not None:
        return outcome.reward
    extra = _dict(document.get("extra"))
    reward = _number(extra.get("reward"))
    if reward is None and isinstance(extra.get("success"), bool):
        reward = float(extra["success"])
    return reward


def import_atif(document: Any, *, source: str, position: int = 0, run: str = "", outcome: Outcome | None = None,
                read_file: FileReader | None = None, file_name: str | None = None) -> ImportedTrajectory:
    """One parsed ATIF document as the toolkit's trajectory view (see the module docstring).

    Args:
        document: the parsed JSON.
        source: the file, as named to the user.
        position: its place among the trajectories read (the record's ``position``).
        run: the name its record carries (``run``).
        outcome: what the Harbor trial beside it says (reward, task, exception).
        read_file: reads a subagent or continuation file named by a reference (None: such references are noted).
        file_name: the document's own file name as references name it (a reference back to it is a loop).

    Raises:
        UnusableTrajectory: not an object, no steps, nothing an agent did, or over `MAX_STEPS` / `MAX_DOCUMENTS`.
    """
    if not isinstance(document, dict):
        raise UnusableTrajectory(f"not an ATIF document (a JSON {type(document).__name__}, not an object)")
    if not isinstance(document.get("steps"), list):
        raise UnusableTrajectory("not an ATIF document (no steps list)")
    count = count_steps(document)
    if count > MAX_STEPS:
        raise UnusableTrajectory(f"{count:,} steps with its subagents, over the {MAX_STEPS:,}-step limit")
    problem = atif_problem(document)
    agent = _dict(document.get("agent"))
    agent_name = str(agent.get("name") or (outcome.agent if outcome else None) or "unknown agent")
    model = agent.get("model_name") or agent.get("model") or (outcome.model if outcome else None)
    model = str(model) if model is not None else None
    session = document.get("session_id")
    walk = _Walk(read_file)
    if is_own(document) and problem is None:
        try:
            own = from_atif(document, path=source)
        except (InputError, TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
            walk.note(f"extra.skilltransfer is not what skilltransfer writes ({str(exc)[:120]}): read as another "
                      "agent's")
        else:
            record = own.record or _record(own.trajectory, run, position, agent_name, [], None, None)
            return ImportedTrajectory(own.trajectory, record.model_copy(update={"position": position}), source,
                                      str(session) if session is not None else None, agent_name,
                                      str(agent.get("version") or ""), model, record.reward if own.record else None,
                                      None, [], own.prompts, own=True)
    if file_name:
        walk.open.add(f"file:{file_name}")
    if problem is not None:
        walk.note(f"not valid {document.get('schema_version') or 'ATIF'} by the atif models ({problem}): read "
                  "anyway")
    _walk(walk, document, 0, "")
    if walk.copied:
        walk.note(f"{walk.copied} step(s) marked is_copied_context left out")
    if not any(s["type"] == "ActionStep" for s in walk.steps):
        raise UnusableTrajectory("no agent step: nothing the agent did to read")
    reward = _outcome_reward(document, outcome)
    names = [outcome.trial_name, outcome.task_name] if outcome is not None else []
    task_id = next((str(n) for n in [*names, document.get("trajectory_id"), session] if n), source)
    score: dict[str, Any] = {}
    if reward is not None:
        score = {"reward": reward, "success": reward >= SUCCESS_REWARD}
    latency = (max(walk.times) - min(walk.times)).total_seconds() if len(walk.times) > 1 else 0.0
    trajectory = TrajectoryLog(task_id=task_id, position=position, instruction=walk.instruction or "",
                               status="finished", exit_status=(outcome.exception if outcome and outcome.exception
                                                               else "finished" if reward is not None else "unscored"),
                               score=score, steps=walk.steps, calls=walk.calls, contexts=[])
    final = _dict(document.get("final_metrics"))
    cost = _number(final.get("total_cost_usd"))
    if cost is None and any("cost_usd" in c for c in walk.calls):
        cost = sum(float(c.get("cost_usd", 0.0)) for c in walk.calls)
    task_name = outcome.task_name if outcome is not None and outcome.task_name else ""
    record = _record(trajectory, run, position, task_name, walk.calls, reward, cost, latency=max(latency, 0.0))
    trial = _timestamp(outcome.started) if outcome is not None else None
    first = min(walk.times) if walk.times else trial
    started = first.astimezone(UTC).isoformat() if first is not None else None
    return ImportedTrajectory(trajectory, record, source, str(session) if session is not None else None, agent_name,
                              str(agent.get("version") or ""), model, reward, started, walk.notes, walk.prompts)


def _record(trajectory: TrajectoryLog, run: str, position: int, template: str, calls: list[dict[str, Any]],
            reward: float | None, cost: float | None, *, latency: float = 0.0) -> TaskRecord:
    """The record of an imported trajectory: its outcome (reward 0 and no success when unknown) and its counts."""
    prompt = sum(c["prompt_tokens"] for c in calls)
    completion = sum(c["completion_tokens"] for c in calls)
    by_role = {"executor": {"calls": len(calls), "prompt_tokens": prompt, "completion_tokens": completion,
                            "dependency": sum(c["dependency"] for c in calls)}} if calls else {}
    actions = sum(1 for s in trajectory.steps if s.get("type") == "ActionStep")
    return TaskRecord(run=run, condition="task", position=position, task_id=trajectory.task_id, difficulty=0,
                      template=template, reward=reward if reward is not None else 0.0,
                      success=reward is not None and reward >= SUCCESS_REWARD,
                      exit_status=trajectory.exit_status or "finished", steps=actions, subtasks=0, latency_s=latency,
                      model_calls=len(calls), prompt_tokens=prompt, completion_tokens=completion,
                      dependency=sum(c["dependency"] for c in calls),
                      peak_context=max((c["prompt_tokens"] for c in calls), default=0), cost_usd=cost,
                      tokens_by_role=by_role, retrieved=[], induced=[], memory_size=0, trajectory="")


__all__ = ["MAX_DOCUMENTS", "MAX_STEPS", "SUCCESS_REWARD", "FileReader", "ImportedTrajectory", "Outcome",
           "UnusableTrajectory", "count_steps", "import_atif", "render_call", "task_text"]

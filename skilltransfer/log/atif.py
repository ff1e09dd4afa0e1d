"""A task's trajectory as ATIF (the Agent Trajectory Interchange Format, Harbor RFC 0001; `ATIF_VERSION`), and back.

`to_atif` writes a logged trajectory (`TrajectoryLog`, with its `TaskRecord` and the messages its calls name) as one
ATIF document, checked against the ``atif`` package's models before it is returned; `from_atif` reads such a document
back into the same trajectory view, every step, tool call, observation and token count as it was logged.

**Where each part goes.** The document's ``agent`` is ``skilltransfer`` (its version, the run's model). Its first steps
are the executor's system prompt (task level, when the prompt was recorded) and the task instruction as a ``user``
step. Each logged step becomes one ATIF step:

- ``ActionStep``: an ``agent`` step; ``message`` the model's reply, one ``tool_calls`` entry (``python``, or the
  skill action it was: ``run_skill``, ``load_skill``, ...) with the code as ``arguments.code``, the observation as
  the result of that call, the step's tokens as ``metrics`` (latency in ``metrics.extra``);
- ``PlanStep``, ``SummaryStep``, ``InductionStep``: ``agent`` steps whose ``message`` is the reply (the summary);
- ``RetrievalStep``: a ``system`` step, one observation result per skill retrieved (its id, score and source in the
  result's ``extra``);
- ``MessageStep`` (an imported trajectory's user or system turn): a step of that source.

Every step's ``extra.skilltransfer`` holds what ATIF has no field for (the step's type, its place in the logged
order, thought, flags, guards, skill action, ...). Roles other than the main agent's own turns are subagent
trajectories (``subagent_trajectories``, each named from a ``system`` step of its parent, or from the ``run_skill``
call that started it, by ``observation.results[].subagent_trajectory_ref``): at subtask level the planner, the
executor and the summarizer of each subtask; the inducer after each (sub)task; each ``run_skill`` subagent (inside
the trajectory whose step called it); under a coordination interface, each plan node's executor. The root's
``extra.skilltransfer`` keeps the rest of the log: the task's record (reward, retrieved skills with their use,
masking draws), the calls' accounting, the final contexts, the coordination audit and the messages the calls name
(``prompts``: id -> message, as ``prompts.jsonl`` stores them); ``extra.reward``, ``extra.success`` and
``extra.skills`` (retrieved, shown, picked) say the same for readers that know no skilltransfer.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from skilltransfer.errors import InputError
from skilltransfer.log.records import TaskRecord, TrajectoryLog
from skilltransfer.log.trajectory_io import read_steps

ATIF_VERSION = "ATIF-v1.8"
"""The ATIF version written (the newest the ``atif`` package models)."""
AGENT_NAME = "skilltransfer"
KEY = "skilltransfer"
"""The ``extra`` key of the toolkit's own fields."""
MAIN = "main"
_CARRIED = {
    "ActionStep": ("reply", "action", "observation", "prompt_tokens", "completion_tokens", "latency_s"),
    "PlanStep": ("reply", "prompt_tokens", "completion_tokens"),
    "SummaryStep": ("summary", "prompt_tokens", "completion_tokens"),
    "InductionStep": ("reply", "prompt_tokens", "completion_tokens"),
    "RetrievalStep": ("skills",),
    "MessageStep": ("source", "message"),
}
"""Per logged step type, the fields an ATIF field carries (the rest go to the step's ``extra.skilltransfer``)."""
_MESSAGE_FIELD = {"PlanStep": "reply", "SummaryStep": "summary", "InductionStep": "reply"}


def _count(value: Any) -> int:
    """A logged token count, 0 when it is not a whole number (a crafted file)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def atif_problem(data: Any) -> str | None:
    """Why ``data`` is not a valid ATIF document by the ``atif`` models (the first few problems, one line), else
    None."""
    from atif import Trajectory

    try:
        Trajectory.model_validate(data)
    except ValidationError as exc:
        shown = []
        for error in exc.errors()[:3]:
            where = ".".join(str(part) for part in error["loc"])
            shown.append(f"{where}: {error['msg']}" if where else str(error["msg"]))
        more = f" (and {exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
        return "; ".join(shown) + more
    except RecursionError:
        return "nests too deeply"
    return None


# ------------------------------------------------------------------------------------------------- writing
@dataclass
class _Doc:
    """One trajectory document being written: the root or a subagent's."""

    id: str
    role: str
    steps: list[dict[str, Any]] = field(default_factory=list)
    subs: list[_Doc] = field(default_factory=list)


def _segment(step: dict[str, Any], level: str, coordinated: bool) -> tuple[str, Any]:
    """The segment a logged step belongs to: (role, its subtask) or (`MAIN`, None)."""
    kind = step.get("type")
    index = step.get("subtask_index")
    if kind == "RetrievalStep" or kind == "MessageStep" and not step.get("window"):
        return MAIN, None
    if kind == "InductionStep":
        return "induction", index
    if kind == "PlanStep":
        return "planner", index
    if kind == "SummaryStep":
        return "summarizer", index
    if kind == "ActionStep" or kind == "MessageStep":
        if step.get("window"):
            return "subagent", step["window"]
        if coordinated and index is not None:
            return "node", index
        if level == "subtask" and not coordinated:
            return "executor", index
    return MAIN, None


def _split(step: dict[str, Any], kind: str) -> dict[str, Any]:
    """The fields of a logged step that no ATIF field carries."""
    carried = set(_CARRIED.get(kind, ()))
    return {k: copy.deepcopy(v) for k, v in step.items() if k not in carried}


def _metrics(step: dict[str, Any], with_latency: bool = False) -> dict[str, Any] | None:
    prompt, completion = int(step.get("prompt_tokens") or 0), int(step.get("completion_tokens") or 0)
    latency = step.get("latency_s")
    if not prompt and not completion and not (with_latency and latency):
        return None
    out: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion}
    if with_latency and latency is not None:
        out["extra"] = {"latency_s": latency}
    return out


def _atif_step(step: dict[str, Any], index: int, model: str | None, reasoning: str | None) -> dict[str, Any]:
    """One logged step as an ATIF step (without ``step_id``)."""
    kind = str(step.get("type"))
    marker = {"order": index, **_split(step, kind)}
    if kind == "ActionStep":
        out: dict[str, Any] = {"source": "agent", "message": str(step.get("reply") or "")}
        action = step.get("action")
        result: dict[str, Any] = {"content": str(step.get("observation") or "")}
        if action is not None:
            skill_action = step.get("skill_action") or {}
            name = str(skill_action.get("action") or "python") if isinstance(skill_action, dict) else "python"
            call_id = f"call-{index}"
            out["tool_calls"] = [{"tool_call_id": call_id, "function_name": name, "arguments": {"code": action}}]
            result["source_call_id"] = call_id
        out["observation"] = {"results": [result]}
        metrics = _metrics(step, with_latency=True)
    elif kind == "RetrievalStep":
        skills = step.get("skills") or []
        what = "subtask" if step.get("query_kind") == "subtask" else "task"
        out = {"source": "system", "message": f"Retrieved {len(skills)} skill(s) for the {what}: {step.get('query')}"}
        out["observation"] = {"results": [{"content": str(s.get("name", "")), "extra": copy.deepcopy(s)}
                                          for s in skills if isinstance(s, dict)]}
        metrics = None
    elif kind == "MessageStep":
        source = step.get("source") if step.get("source") in ("user", "system") else "system"
        out = {"source": source, "message": str(step.get("message") or "")}
        metrics = None
    elif kind in _MESSAGE_FIELD:
        out = {"source": "agent", "message": str(step.get(_MESSAGE_FIELD[kind]) or "")}
        metrics = _metrics(step)
    else:  # a step type this version does not know: kept whole
        out = {"source": "system", "message": f"({kind} step)"}
        marker = {"order": index, "type": kind, "data": copy.deepcopy(step)}
        metrics = None
    if out["source"] == "agent":
        if model:
            out["model_name"] = model
        if reasoning:
            out["reasoning_content"] = reasoning
        if metrics is not None:
            out["metrics"] = metrics
        elif kind != "ActionStep":
            out["llm_call_count"] = 0  # no model call made it (a skipped induction)
    out["extra"] = {KEY: marker}
    return out


def _goal(steps: Sequence[dict[str, Any]], role: str, index: Any) -> str | None:
    """The subtask text of a subtask's executor (from the plan step that chose it)."""
    if role != "executor":
        return None
    return next((s.get("subtask") for s in reversed(steps) if s.get("type") == "PlanStep"
                 and s.get("subtask_index") == index and isinstance(s.get("subtask"), str)), None)


def _dispatch(role: str, index: Any, sub_id: str, goal: str | None) -> dict[str, Any]:
    what = {"planner": "planner", "executor": "executor", "summarizer": "summarizer", "induction": "inducer",
            "node": "plan node executor"}.get(role, role)
    at = f" (subtask {index})" if index is not None and role != "induction" else ""
    at = f" ({'subtask ' + str(index) if index is not None else 'the task'})" if role == "induction" else at
    message = f"{what}{at}" + (f": {goal}" if goal else "")
    return {"source": "system", "message": message,
            "observation": {"results": [{"subagent_trajectory_ref": [{"trajectory_id": sub_id}]}]},
            "extra": {KEY: {"dispatch": role}}}


def _documents(steps: Sequence[dict[str, Any]], *, level: str, coordinated: bool, model: str | None,
               reasoning: Mapping[int, str]) -> _Doc:
    """The root and subagent documents of a trajectory's logged steps, in order."""
    root = _Doc(MAIN, MAIN)
    docs: dict[tuple[str, Any], _Doc] = {}
    used: dict[str, int] = {}
    holders: dict[int, tuple[_Doc, dict[str, Any]]] = {}
    """window -> (the document and ATIF step of the ``run_skill`` call that opened it)."""
    windows: dict[int, _Doc] = {}
    last: tuple[str, Any] | None = None
    for index, step in enumerate(steps):
        role, sub = _segment(step, level, coordinated)
        atif_step = _atif_step(step, index, model, reasoning.get(index))
        if role == MAIN:
            target = root
        elif role == "subagent":
            window = int(sub)
            target = windows.get(window) or _Doc(f"subagent-{window}", role)
            if window not in windows:
                windows[window] = target
                holder = holders.get(window)
                parent = holder[0] if holder is not None else root
                parent.subs.append(target)
                if holder is not None:
                    results = holder[1].setdefault("observation", {"results": [{}]})["results"]
                    results[0].setdefault("subagent_trajectory_ref", []).append({"trajectory_id": target.id})
                else:
                    root.steps.append(_dispatch("subagent", None, target.id, None))
        else:
            key = (role, sub)
            if key != last or key not in docs:
                name = f"{role}-{sub}" if sub is not None else role
                used[name] = used.get(name, 0) + 1
                if used[name] > 1:
                    name = f"{name}.{used[name]}"
                docs[key] = _Doc(name, role)
                root.subs.append(docs[key])
                goal = _goal(steps[:index], role, sub)
                root.steps.append(_dispatch(role, sub, name, goal))
                if goal:
                    docs[key].steps.append({"source": "user", "message": goal})
            target = docs[key]
        if role != "subagent":  # a run_skill subagent's steps do not end the segment that called it
            last = (role, sub) if role != MAIN else None
        target.steps.append(atif_step)
        action = step.get("skill_action")
        if isinstance(action, dict) and isinstance(action.get("window"), int) and action.get("window"):
            holders[int(action["window"])] = (target, atif_step)
    return root


def _numbered(doc: _Doc, base: dict[str, Any]) -> dict[str, Any]:
    """A document as ATIF: its steps numbered from 1, its subagents embedded."""
    out = {**base, "trajectory_id": doc.id if doc.role != MAIN else base.get("trajectory_id"),
           "steps": [{"step_id": i, **s} for i, s in enumerate(doc.steps, start=1)]}
    if doc.subs:
        sub_base = {k: v for k, v in base.items() if k in ("schema_version", "session_id")}
        agent = {k: v for k, v in base["agent"].items() if k != "extra"}
        out["subagent_trajectories"] = [
            _numbered(sub, {**sub_base, "agent": {**agent, "name": f"{AGENT_NAME}-{sub.role}"}}) for sub in doc.subs]
    return {k: v for k, v in out.items() if v is not None}


def to_atif(trajectory: TrajectoryLog, record: TaskRecord | None = None, *, run: str = "", version: str = "",
            model: str | None = None, level: str = "task", prompts: Mapping[str, Mapping[str, Any]] | None = None,
            step_calls: Mapping[int, Sequence[int]] | None = None,
            agent_extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A logged trajectory as an ATIF document (see the module docstring), valid by the ``atif`` models.

    Args:
        trajectory: the task's trajectory file.
        record: its line of ``results.jsonl`` (None: an unfinished task).
        run: the run's name (the session id is ``<run>/<task id>``).
        version: the toolkit's version (``agent.version``).
        model: the model id (``agent.model_name`` and each agent step's ``model_name``).
        level: the agent's level ("task" or "subtask").
        prompts: message id -> message, for the ids the calls name (``prompts.jsonl``): kept in the document, and
            the executor's system prompt is its first step; None: not recorded.
        step_calls: logged step index -> the indices of the calls that made it (a step's reasoning is its call's).
        agent_extra: the run's settings to record as ``agent.extra``.

    Raises:
        InputError: the trajectory holds a step that is not a step of its type, or (a bug) the document is not valid
            ATIF.
    """
    steps = [step for step in trajectory.steps]
    read_steps(steps)  # every step a step of its type, or one InputError naming it
    prompts = dict(prompts or {})
    reasoning = {}
    for index, numbers in (step_calls or {}).items():
        for number in numbers:
            call = trajectory.calls[number] if 0 <= number < len(trajectory.calls) else {}
            thought = prompts.get(str(call.get("reasoning"))) if isinstance(call.get("reasoning"), str) else None
            if thought is not None and isinstance(thought.get("content"), str):
                reasoning[index] = thought["content"]
    root = _documents(steps, level=level, coordinated=trajectory.coordination is not None, model=model,
                      reasoning=reasoning)
    head: list[dict[str, Any]] = []
    system = _system_prompt(trajectory, prompts) if level == "task" and trajectory.coordination is None else None
    if system:
        head.append({"source": "system", "message": system})
    head.append({"source": "user", "message": trajectory.instruction})
    root.steps[:0] = head
    ids = {i for c in trajectory.calls for i in [*(c.get("messages") or []), c.get("reply"), c.get("reasoning")]
           if isinstance(i, str)}
    own: dict[str, Any] = {
        "format_version": trajectory.format_version, "task_id": trajectory.task_id, "position": trajectory.position,
        "status": trajectory.status, "exit_status": trajectory.exit_status, "error": trajectory.error,
        "score": copy.deepcopy(trajectory.score), "calls": copy.deepcopy(trajectory.calls),
        "contexts": copy.deepcopy(trajectory.contexts), "coordination": copy.deepcopy(trajectory.coordination),
        "record": record.model_dump(mode="json") if record is not None else None,
        "prompts": {i: copy.deepcopy(dict(prompts[i])) for i in sorted(ids) if i in prompts}}
    extra: dict[str, Any] = {KEY: own}
    reward = record.reward if record is not None else trajectory.score.get("reward")
    if isinstance(reward, int | float):
        extra["reward"] = reward
        extra["success"] = bool(record.success if record is not None else trajectory.score.get("success"))
    extra["skills"] = skills_summary(trajectory, record)
    calls = trajectory.calls
    final: dict[str, Any] = {
        "total_prompt_tokens": sum(_count(c.get("prompt_tokens")) for c in calls),
        "total_completion_tokens": sum(_count(c.get("completion_tokens")) for c in calls),
        "total_steps": len(root.steps), "extra": {"model_calls": len(calls)}}
    if record is not None and record.cost_usd is not None:
        final["total_cost_usd"] = record.cost_usd
    agent = {"name": AGENT_NAME, "version": version or "unknown", "model_name": model,
             "extra": dict(agent_extra) if agent_extra else None}
    base = {"schema_version": ATIF_VERSION, "session_id": f"{run}/{trajectory.task_id}" if run else trajectory.task_id,
            "trajectory_id": trajectory.task_id, "agent": {k: v for k, v in agent.items() if v is not None}}
    document = _numbered(root, base)
    document["notes"] = ("Written by skilltransfer: the toolkit's own fields are under extra.skilltransfer (root and "
                         "each step); planner, executor, summarizer, inducer and run_skill subagents are "
                         "subagent_trajectories.")
    document["final_metrics"] = final
    document["extra"] = extra
    problem = atif_problem(document)
    if problem is not None:
        raise InputError(f"the ATIF written for task {trajectory.task_id!r} does not validate: {problem}")
    return document


def _system_prompt(trajectory: TrajectoryLog, prompts: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The system message of the task's first main executor call, when recorded."""
    for call in trajectory.calls:
        if call.get("role") == "executor" and not call.get("window"):
            ids = call.get("messages")
            first = prompts.get(ids[0]) if isinstance(ids, list) and ids and isinstance(ids[0], str) else None
            if first is not None and first.get("role") == "system" and isinstance(first.get("content"), str):
                return str(first["content"])
            return None
    return None


def skills_summary(trajectory: TrajectoryLog, record: TaskRecord | None) -> dict[str, Any]:
    """The skills of a task for readers that know no skilltransfer: ``retrieved`` (id, name, score, subtask, use),
    ``shown`` (masking: each candidate and whether it was shown; else every retrieved skill), ``picked`` (what the
    agent chose among them: the record's picks when the log keeps them, else the skill actions it took),
    ``induced``."""
    retrieved = []
    if record is not None:
        retrieved = [{"id": r.skill_id, "name": r.name, "score": r.score, "subtask_index": r.subtask_index,
                      "used": r.used} for r in record.retrieved]
    else:
        for step in trajectory.steps:
            if step.get("type") == "RetrievalStep":
                retrieved += [{"id": s.get("id"), "name": s.get("name"), "score": s.get("score"),
                               "subtask_index": step.get("subtask_index"), "used": None}
                              for s in step.get("skills") or [] if isinstance(s, dict)]
    if record is not None and record.exposures:
        shown = [{"id": e.skill_id, "name": e.name, "shown": e.shown, "propensity": e.propensity}
                 for e in record.exposures]
    else:
        shown = [{"id": r["id"], "name": r["name"], "shown": True, "propensity": 1.0} for r in retrieved]
    picked: list[dict[str, Any]] = []
    picks = getattr(record, "picks", None)  # the record's picks, when the log keeps them (selection as data)
    if isinstance(picks, list):
        picked = [p.model_dump(mode="json") if hasattr(p, "model_dump") else dict(p) for p in picks]
    else:  # the skill actions the agent took
        for step in trajectory.steps:
            action = step.get("skill_action")
            if step.get("type") == "ActionStep" and isinstance(action, dict) and action.get("target"):
                picked.append({"action": action.get("action"), "target": action.get("target"),
                               "subtask_index": step.get("subtask_index")})
    induced = [{"id": s.get("skill_id"), "name": s.get("skill_name"), "status": s.get("status"),
                "subtask_index": s.get("subtask_index")} for s in trajectory.steps if s.get("type") == "InductionStep"]
    return {"retrieved": retrieved, "shown": shown, "picked": picked, "induced": induced}


# ------------------------------------------------------------------------------------------------- reading back
def is_own(data: Any) -> bool:
    """Whether an ATIF document was written by `to_atif` (its root ``extra.skilltransfer`` holds the log)."""
    extra = data.get("extra") if isinstance(data, dict) else None
    own = extra.get(KEY) if isinstance(extra, dict) else None
    return isinstance(own, dict) and isinstance(own.get("task_id"), str) and isinstance(own.get("calls"), list)


def _text(message: Any) -> str:
    if isinstance(message, str):
        return message
    if isinstance(message, list):
        return "\n".join(str(p.get("text")) for p in message if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _logged_step(atif_step: dict[str, Any], marker: dict[str, Any]) -> dict[str, Any]:
    """A logged step from its ATIF step and its ``extra.skilltransfer``."""
    kind = str(marker.get("type"))
    if kind not in _CARRIED:
        data = marker.get("data")
        return dict(data) if isinstance(data, dict) else {"type": kind}
    step = {k: v for k, v in marker.items() if k != "order"}
    metrics = atif_step.get("metrics") or {}
    message = _text(atif_step.get("message"))
    results = (atif_step.get("observation") or {}).get("results") or []
    if kind == "ActionStep":
        calls = atif_step.get("tool_calls") or []
        arguments = calls[0].get("arguments") if calls and isinstance(calls[0], dict) else None
        step["reply"] = message
        step["action"] = arguments.get("code") if isinstance(arguments, dict) else None
        step["observation"] = _text(results[0].get("content")) if results and isinstance(results[0], dict) else ""
        latency = (metrics.get("extra") or {}).get("latency_s", 0.0)
        step["latency_s"] = latency if isinstance(latency, int | float) else 0.0
    elif kind == "RetrievalStep":
        step["skills"] = [dict(r.get("extra") or {}) for r in results if isinstance(r, dict)]
    elif kind == "MessageStep":
        step["source"], step["message"] = atif_step.get("source"), message
    else:
        step[_MESSAGE_FIELD[kind]] = message
    if kind in ("ActionStep", "PlanStep", "SummaryStep", "InductionStep"):
        step["prompt_tokens"] = int(metrics.get("prompt_tokens") or 0)
        step["completion_tokens"] = int(metrics.get("completion_tokens") or 0)
    return step


def _marked_steps(document: dict[str, Any], out: list[tuple[int, dict[str, Any]]], seen: set[int]) -> None:
    """(logged index, logged step) of every marked step in ``document`` and its subagents (each document once)."""
    pending = [document]
    while pending:
        doc = pending.pop()
        if id(doc) in seen:
            continue
        seen.add(id(doc))
        for atif_step in doc.get("steps") or []:
            extra = atif_step.get("extra") if isinstance(atif_step, dict) else None
            marker = extra.get(KEY) if isinstance(extra, dict) else None
            if isinstance(marker, dict) and isinstance(marker.get("order"), int) and "type" in marker:
                out.append((marker["order"], _logged_step(atif_step, marker)))
        pending.extend(sub for sub in doc.get("subagent_trajectories") or [] if isinstance(sub, dict))


@dataclass
class OwnTrajectory:
    """An ATIF document `to_atif` wrote, read back: the trajectory, its record and the messages its calls name."""

    trajectory: TrajectoryLog
    record: TaskRecord | None
    prompts: dict[str, dict[str, Any]]


def from_atif(document: dict[str, Any], *, path: str | Path | None = None) -> OwnTrajectory:
    """Read back a document `to_atif` wrote (`is_own`): the same trajectory view.

    Raises:
        InputError: a field of the toolkit's record is not what it wrote (naming ``path``).
    """
    own = document["extra"][KEY]
    steps: list[tuple[int, dict[str, Any]]] = []
    _marked_steps(document, steps, set())
    steps.sort(key=lambda pair: pair[0])
    instruction = next((_text(s.get("message")) for s in document.get("steps") or []
                        if isinstance(s, dict) and s.get("source") == "user"), "")
    try:
        trajectory = TrajectoryLog.model_validate({
            "format_version": own.get("format_version"), "task_id": own.get("task_id"),
            "position": own.get("position"), "instruction": instruction, "status": own.get("status"),
            "exit_status": own.get("exit_status"), "error": own.get("error"), "score": own.get("score") or {},
            "steps": [step for _, step in steps], "calls": own.get("calls") or [],
            "contexts": own.get("contexts") or [], "coordination": own.get("coordination")})
        record = TaskRecord.model_validate(own["record"]) if own.get("record") is not None else None
    except ValidationError as exc:
        raise InputError(f"extra.{KEY} is not a skilltransfer trajectory: {str(exc).splitlines()[0]}",
                         path=path) from None
    read_steps(trajectory.steps, path=path)
    prompts = own.get("prompts")
    return OwnTrajectory(trajectory, record, {str(k): dict(v) for k, v in prompts.items() if isinstance(v, dict)}
                         if isinstance(prompts, dict) else {})


__all__ = ["AGENT_NAME", "ATIF_VERSION", "KEY", "OwnTrajectory", "atif_problem", "from_atif", "is_own",
           "skills_summary", "to_atif"]

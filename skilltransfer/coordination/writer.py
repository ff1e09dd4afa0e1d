"""The plan writer: one planner call (plus re-asks) that writes a task's whole plan, robust to small models.

The model sees the task, the env docs and the offered skill packages (name and description) and replies with one
JSON block (``{"nodes": [...]}``). Parsing is lenient, because a 1.5B model often gets the shape almost right:

* the first ```json block, else the first ``{``/``[`` through its last closing bracket; trailing commas and Python
  literals (single quotes, ``None``) are accepted;
* a bare list of nodes, or the list under ``nodes``/``plan``/``steps``; key aliases (``deps``/``needs`` for
  ``depends_on``, ``instruction``/``task`` for ``instructions``, ``expected``/``output`` for ``expected_output``);
* ids given as numbers become ``v<n>``; a missing id becomes ``v<position>``; ``depends_on`` may be one string;
* a skill named with other case, or with quotes/backticks, becomes the offered name; ``"none"``/``""`` become null;
* a binding given as a node id becomes ``outputs.<id>``; a node with ``depends_on`` and no ``bindings`` key gets
  one binding per direct dependency, named by its id (an explicit ``{}`` binds nothing).

The parsed plan is validated (`validate_plan`, with at most ``max_nodes`` nodes). A reply that does not parse or
validate is answered with its problems, one per line, up to ``retries`` times. After that, or when the prompt
cannot fit the context window, the **fallback** is a one-node plan (no skill package, the whole task as its
instructions); ``origin.fallback`` says why and ``origin.replies`` keeps every reply.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from skilltransfer import untrusted
from skilltransfer.agents.context import ContextFitter
from skilltransfer.agents.exceptions import ContextExceeded
from skilltransfer.agents.steps import CallLog
from skilltransfer.coordination.config import PlanWriterConfig
from skilltransfer.coordination.plan import Plan, PlanNode, PlanOrigin, single_node_plan, validate_plan
from skilltransfer.coordination.prompts import CoordinationPrompts
from skilltransfer.protocols import ChatModel, Message, TaskSpec
from skilltransfer.skill import Skill
from skilltransfer.util import pyast

ROLE = "plan_writer"
_JSON_BLOCK = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n(.*?)```", re.DOTALL)
_OPEN_BLOCK = re.compile(r"```[ \t]*(?:json|JSON)[ \t]*\n(.*)\Z", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_ALIASES: dict[str, tuple[str, ...]] = {
    "id": ("id", "node", "node_id", "name"),
    "skill": ("skill", "skill_name", "skill_package", "package"),
    "instructions": ("instructions", "instruction", "local_instructions", "task", "description", "action"),
    "depends_on": ("depends_on", "depends", "dependencies", "deps", "needs", "after"),
    "bindings": ("bindings", "binding", "inputs", "uses"),
    "expected_output": ("expected_output", "expected", "output", "outputs", "result"),
}


def _loads(text: str) -> Any:
    """JSON, else JSON without trailing commas, else a Python literal (raises ValueError when none parses); a reply
    nested too deeply is none (`untrusted.parse_json`: bounded before it is parsed)."""
    for attempt in (text, _TRAILING_COMMA.sub(r"\1", text)):
        try:
            return untrusted.parse_json(attempt, "the plan")
        except untrusted.UntrustedFileError as exc:
            if "levels deep" in exc.reason:
                raise ValueError(f"the plan {exc.reason}") from None
            continue
    try:
        return pyast.literal_eval(_TRAILING_COMMA.sub(r"\1", text).replace("null", "None").replace("true", "True")
                                .replace("false", "False"))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise ValueError("the plan is not valid JSON") from exc


def _json_text(reply: str) -> str:
    """The part of a reply that should hold the plan (raises ValueError with the reason when there is none)."""
    block = _JSON_BLOCK.search(reply)
    if block is not None:
        return block.group(1)
    if _OPEN_BLOCK.search(reply) is not None and reply.count("{") > reply.count("}"):
        raise ValueError("the ```json block is not closed (the reply was probably cut off: write a shorter plan)")
    starts = [i for i in (reply.find("{"), reply.find("[")) if i >= 0]
    if not starts:
        raise ValueError("the reply has no ```json block")
    start = min(starts)
    end = max(reply.rfind("}"), reply.rfind("]"))
    if end <= start:
        raise ValueError("the reply has no complete JSON object")
    return reply[start: end + 1]


def _pick(node: dict[str, Any], field: str) -> Any:
    for key in _ALIASES[field]:
        for actual in node:
            if isinstance(actual, str) and actual.strip().lower() == key:
                return node[actual]
    return None


def _node_id(value: Any) -> str:
    text = str(value).strip().strip("`'\"")
    return f"v{text}" if text.isdigit() else text


def _skill_name(value: Any, offered: Sequence[str]) -> str | None:
    if value is None:
        return None
    text = str(value).strip().strip("`'\"*").strip()
    if text.lower() in ("", "none", "null", "n/a", "-"):
        return None
    by_fold = {name.lower(): name for name in offered}
    return by_fold.get(text.lower(), text)


def _bindings(value: Any, depends_on: list[str]) -> dict[str, str]:
    if isinstance(value, list):
        value = {_node_id(str(v).removeprefix("outputs.")): v for v in value}
    if not isinstance(value, dict):
        return {dep: f"outputs.{dep}" for dep in depends_on if re.fullmatch(r"[A-Za-z_]\w*", dep)}
    out = {}
    for name, ref in value.items():
        text = str(ref).strip().strip("`'\"{}")
        out[str(name).strip()] = text if text.startswith("outputs.") else f"outputs.{_node_id(text)}"
    return out


def parse_plan_reply(reply: str, task_id: str, offered: Sequence[str] = ()) -> Plan:
    """The plan in a planner reply (see the module docstring for what is accepted).

    Raises:
        ValueError: the reply holds no plan of the expected shape (the message says what is wrong).
    """
    data = _loads(_json_text(reply))
    if isinstance(data, dict):
        data = next((data[k] for k in ("nodes", "plan", "steps", "graph") if isinstance(data.get(k), list)), None)
    if not isinstance(data, list) or not all(isinstance(n, dict) for n in data):
        raise ValueError('the plan must be {"nodes": [ {...}, ... ]}, a list of node objects')
    nodes = []
    for position, raw in enumerate(data, start=1):
        deps = _pick(raw, "depends_on") or []
        deps = [d for d in re.split(r"[,\s]+", deps) if d] if isinstance(deps, str) else list(deps)
        depends_on = [_node_id(d) for d in deps]
        instructions = _pick(raw, "instructions")
        if isinstance(instructions, list):
            instructions = "\n".join(str(i) for i in instructions)
        if not instructions or not str(instructions).strip():
            raise ValueError(f"node {position} has no instructions")
        node_id = _pick(raw, "id")
        expected = _pick(raw, "expected_output")
        nodes.append(PlanNode(id=_node_id(node_id) if node_id is not None else f"v{position}",
                              skill=_skill_name(_pick(raw, "skill"), offered),
                              instructions=str(instructions).strip(), depends_on=depends_on,
                              bindings=_bindings(_pick(raw, "bindings"), depends_on),
                              expected_output="" if expected is None else str(expected).strip()))
    return Plan(task_id=task_id, nodes=nodes)


class PlanWriter:
    """Writes a task's plan with one planner call and re-asks (see the module docstring).

    Args:
        model: the planner's model.
        config: settings; keyword arguments override its fields.
    """

    def __init__(self, model: ChatModel, *, config: PlanWriterConfig | None = None, **kwargs: Any) -> None:
        self.model = model
        self.config = PlanWriterConfig.model_validate({**(config or PlanWriterConfig()).model_dump(), **kwargs})
        self.prompts = CoordinationPrompts.load(self.config.prompt_dir)

    @property
    def prompt_id(self) -> str:
        return self.prompts.plan_writer.id

    def offered_text(self, skills: Sequence[Skill]) -> str:
        """The offered skill packages as the planner sees them: one ``- name: description`` line each."""
        if not skills:
            return "(none: use null for every step's skill)"
        limit = self.config.max_skill_chars
        lines = []
        for skill in skills:
            about = " ".join(skill.description.split())
            lines.append(f"- {skill.name}: {about if len(about) <= limit else about[: limit - 3] + '...'}")
        return "\n".join(lines)

    def write(self, task: TaskSpec, docs: str, skills: Sequence[Skill] = (), *, calls: CallLog | None = None,
              **params: Any) -> Plan:
        """The task's plan (the fallback one-node plan when no reply gives a valid one).

        Args:
            task: the task.
            docs: the env docs the executor also sees.
            skills: the skill packages the plan may name (e.g. retrieved for the task).
            calls: where the planner's calls are recorded (default: a fresh log that fits prompts to the window).
            **params: sampling parameters for the planner's calls.
        """
        cfg = self.config
        budgets = {ROLE: cfg.max_tokens} if cfg.max_tokens is not None else {}
        calls = calls if calls is not None else CallLog(fitter=ContextFitter(budgets))
        names = [s.name for s in skills]
        origin = PlanOrigin(writer=self.prompt_id, skills_offered=names)
        messages: list[Message] = [
            {"role": "system", "content": self.prompts.plan_writer.render(docs=docs.strip(), max_nodes=cfg.max_nodes)},
            {"role": "user", "content": self.prompts.plan_writer_user.render(instruction=task.instruction,
                                                                             skills=self.offered_text(skills))}]
        params = {"max_tokens": cfg.max_tokens, **params} if cfg.max_tokens is not None else dict(params)
        for _ in range(cfg.retries + 1):
            try:
                completion = calls.complete(self.model, messages, ROLE, **params)
            except ContextExceeded as exc:
                origin.fallback = f"context_exceeded: {exc.message}"
                return single_node_plan(task.id, task.instruction, origin=origin)
            origin.attempts += 1
            origin.model = completion.model
            origin.prompt_tokens += completion.prompt_tokens
            origin.completion_tokens += completion.completion_tokens
            origin.replies.append(completion.text)
            try:
                plan = parse_plan_reply(completion.text, task.id, names)
                problems = validate_plan(plan, set(names))
                if len(plan.nodes) > cfg.max_nodes:
                    problems.append(f"the plan has {len(plan.nodes)} steps; use at most {cfg.max_nodes}")
            except ValueError as exc:
                plan, problems = None, [str(exc)]
            if plan is not None and not problems:
                origin.problems = []
                return plan.model_copy(update={"origin": origin})
            origin.problems = problems
            messages = [*messages, {"role": "assistant", "content": completion.text},
                        {"role": "user", "content": self.prompts.plan_writer_retry.render(
                            problems="\n".join(f"- {p}" for p in problems))}]
        origin.fallback = f"no valid plan after {origin.attempts} replies"
        return single_node_plan(task.id, task.instruction, origin=origin)

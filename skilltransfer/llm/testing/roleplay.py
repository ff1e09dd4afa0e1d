"""Role play: a reply function that answers every role of the toolkit in that role's reply format (a documented test
double for the mock server, ``python -m skilltransfer.llm.testing.mock_server --roles``; never a default).

It drives whole streams of any env end to end without a model: the planner plans two subtasks (look around, then
``complete_task``); executors (task level, subtask level, plan nodes, nl-sop and prompt-graph hosts, subagents) run
one look-around code block, use the skill actions they are offered (``open_node``, ``run_skill``, ``load_skill``;
after a load that lists files, ``read_skill_file`` of the first) and call a code skill they are shown, then
finish; the summarizer, inducer (text, code, with contracts), trajectory segmenter (two halves), lens verifier,
rewriter and decomposer, plan writer, library organiser, registry writer, judge and the skill rubric's judge reply in
their formats. It solves
no task on purpose; with ``fail_rate`` it also sends replies a real small model sends (no code block, code that
raises, an unparseable inducer reply). ``induce=False`` answers the inducer with text from which no skill can be
parsed, so a stream's library stays empty.

Roles are told apart by their system prompts (the first message), so a renamed prompt shows up as an
``unknown role`` reply the agent refuses, and the shipped-spec tests fail.
"""

from __future__ import annotations

import json
import random
import re
import threading
from typing import Any

from skilltransfer.protocols import Message

ROLE_MARKERS: tuple[tuple[str, str], ...] = (
    ("plan_writer", "You write the whole plan for one task at once"),
    ("planner", "You are the PLANNER"),
    ("summarizer", "You are the SUMMARIZER"),
    ("inducer", "You induce a reusable SKILL"),
    ("segmenter", "You split an agent's finished trajectory"),
    ("verifier", "You decide how much of a stored skill"),
    ("rewriter", "You adapt one part of a stored skill"),
    ("decomposer", "You split a reusable skill"),
    ("organizer", "You organise a library"),
    ("writer", "You improve a skill library and the routing notes"),
    ("judge", "You are an impartial judge"),
    ("rubric_coverage", "You check whether a skill covers one key point"),
    ("rubric_executability", "You judge whether an agent could execute a skill"),
    ("rubric_safety", "You judge the safety risks of a skill"),
    ("rubric_key_points", "You list the key points a skill must cover"),
    ("executor", "You are the EXECUTOR"),
)
"""(role, a phrase of its system prompt), most specific first."""

LOOK = "names = sorted(n for n in dir() if not n.startswith('_'))\nprint('available:', names[:12])"
"""The executor's look-around action: valid Python in every env's interpreter."""
TASK_HEADERS = ("# Task\n", "# Overall task", "# Skill task", "# Your step (", "# Results of the plan's steps")
SKILL_NAME = re.compile(r"^### (?:Code skill|Skill): (.+)$", re.MULTILINE)
LOADED = re.compile(r"Loaded skill '([^'\n]+)'")
LISTED = re.compile(r"^- (\S[^\n]*?)(?:/ \(\d+ files?\))?$", re.MULTILINE)
CODE_SKILL = re.compile(r"^### Code skill: ([A-Za-z_]\w*)$", re.MULTILINE)
GROUP_NAME = re.compile(r"^- \[group\] (.+?)(?::|$)", re.MULTILINE)
WORD = re.compile(r"[a-z][a-z0-9_]{2,}")
SKILL_NAMES = ("inspect_available_names", "look_before_acting", "check_workspace_first")


def role_of(messages: list[Message]) -> str:
    """The role whose system prompt opens ``messages`` ("unknown" when none matches)."""
    system = str(messages[0].get("content") or "") if messages else ""
    return next((role for role, marker in ROLE_MARKERS if marker in system), "unknown")


def _block(code: str, thought: str = "Next.") -> str:
    return f"{thought}\n```python\n{code}\n```"


class RolePlay:
    """``fn(messages) -> reply`` for `MockServer` (see the module docstring).

    Args:
        induce: answer the inducer with a skill (False: with text no skill can be parsed from).
        fail_rate: chance in [0, 1] that an executor or inducer reply is one a weak model sends instead (seeded).
        seed: seeds the failures.
    """

    def __init__(self, *, induce: bool = True, fail_rate: float = 0.0, seed: int = 0) -> None:
        self.induce = induce
        self.fail_rate = fail_rate
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.roles: dict[str, int] = {}
        """How many replies each role got."""

    def __call__(self, messages: list[Message]) -> str:
        role = role_of(messages)
        with self._lock:
            self.roles[role] = self.roles.get(role, 0) + 1
            failing = self.fail_rate > 0 and self._rng.random() < self.fail_rate
        reply = getattr(self, f"_{role}", None)
        if reply is None:
            return f"unknown role: {str(messages[0].get('content') or '')[:60]!r}" if messages else "unknown role"
        return str(reply(messages, failing))

    # --------------------------------------------------------------------------------------------- planning roles
    @staticmethod
    def _planner(messages: list[Message], _failing: bool) -> str:
        user = str(messages[-1].get("content") or "")
        if "REFUSED" in user or "not in the expected format" in user:
            return "SUBTASK: call complete_task()"
        content = str(messages[1].get("content") or "")
        if "# Subtasks so far" not in content:  # the paper's planner: goal and running summary only
            started = "(nothing done yet)" not in content.split("# Running summary")[-1]
            return "SUBTASK: call complete_task()" if started else \
                "SUBTASK: Look at the names the environment offers and print them."
        history = content.split("# Subtasks so far")[-1]
        if "(none yet)" in history:
            return "SUBTASK: Look at the names the environment offers and print them."
        return "SUBTASK: call complete_task()" if "complete_task" not in history else "DONE"

    @staticmethod
    def _plan_writer(messages: list[Message], _failing: bool) -> str:
        offered = str(messages[-1].get("content") or "").split("# Skill packages you may name", 1)[-1]
        skills = re.findall(r"^- ([A-Za-z_][\w-]*): ", offered, re.MULTILINE)
        skill = skills[0] if skills else None
        nodes = [{"id": "v1", "skill": skill, "instructions": "Look at the names the environment offers.",
                  "depends_on": [], "bindings": {}, "expected_output": "the names"},
                 {"id": "v2", "skill": None, "instructions": "Report what the first step found.",
                  "depends_on": ["v1"], "bindings": {"names": "outputs.v1"}, "expected_output": "a short report"}]
        return "The plan.\n```json\n" + json.dumps({"nodes": nodes}) + "\n```"

    @staticmethod
    def _summarizer(_messages: list[Message], _failing: bool) -> str:
        return "- the environment's names were printed\n- nothing was changed yet"

    # --------------------------------------------------------------------------------------------- memory roles
    def _inducer(self, messages: list[Message], failing: bool) -> str:
        system = str(messages[0].get("content") or "")
        if not self.induce or failing:
            return "I could not find a reusable procedure in this trajectory."
        goal = str(messages[-1].get("content") or "").split("# Goal of the trajectory", 1)[-1].strip()
        goal = " ".join(goal.split("\n", 1)[0].split()[:12]).rstrip(".")
        name = SKILL_NAMES[sum(map(ord, goal)) % len(SKILL_NAMES)]
        description = f"Use at the start of a task like: {goal}; see which APIs and values the environment offers."
        contract = "INPUTS:\n- none\nOUTPUTS:\n- the names the environment offers\n" \
            if "## Input and output contracts" in system else ""
        if "## Skill format: code" in system:
            body = (f"```python\ndef {name}():\n    \"\"\"Print and return the names the interpreter offers.\"\"\"\n"
                    f"    names = sorted(n for n in globals() if not n.startswith('_'))\n"
                    f"    print('available:', names[:12])\n    return names\n```")
        else:
            body = ("1. Print the names the environment offers before acting.\n"
                    "2. Read the documentation of the API the task needs, then act and check the result.\n"
                    "Caveat: never guess values; print them first.")
        return f"NAME: {name}\nDESCRIPTION: {description}\n{contract}BODY:\n{body}"

    @staticmethod
    def _segmenter(messages: list[Message], failing: bool) -> str:
        found = re.search(r"# Trajectory \((\d+) steps\)", str(messages[-1].get("content") or ""))
        n = int(found.group(1)) if found else 1
        if failing or n < 2:
            return "The trajectory is one piece of work."
        half = n // 2
        return (f"SUBTASK 1-{half}: Look at what the environment offers before acting.\n"
                f"SUBTASK {half + 1}-{n}: Carry out the change and check the result.")

    @staticmethod
    def _verifier(messages: list[Message], _failing: bool) -> str:
        user = str(messages[-1].get("content") or "")
        parts = user.split("Its parts:", 1)[-1]
        if "\n- " in parts and "(policy" in user:
            return "DECISION: DECOMPOSE"
        return "DECISION: REWRITE" if "Caveat" in user else "DECISION: ACCEPT"

    @staticmethod
    def _rewriter(messages: list[Message], _failing: bool) -> str:
        text = str(messages[-1].get("content") or "").split("):\n", 1)[-1].strip().split("\n")[0]
        return f"{text} (adapted to this task)"

    @staticmethod
    def _decomposer(messages: list[Message], _failing: bool) -> str:
        user = str(messages[-1].get("content") or "")
        description = user.split("Description: ", 1)[-1].split("\n", 1)[0].strip() or "Reuse this skill."
        return "\n".join([f"POLICY: {description}", "STRATEGY: Look before acting.",
                          "PROCEDURE: Print the names the environment offers.",
                          "PRIMITIVE: Print the sorted names of the interpreter.",
                          "STRATEGY: Act and check the result.", "PROCEDURE: Call the API the task needs.",
                          "PRIMITIVE: Print the API's result."])

    @staticmethod
    def _organizer(messages: list[Message], _failing: bool) -> str:
        user = str(messages[-1].get("content") or "")
        count = int(m.group(1)) if (m := re.search(r"# Items \((\d+)\)", user)) else 1
        half = max(1, count // 2)
        first = ", ".join(str(i) for i in range(1, half + 1))
        rest = ", ".join(str(i) for i in range(half + 1, count + 1))
        blocks = [f"GROUP: Looking around first\nDESCRIPTION: Items that inspect before acting.\nMEMBERS: {first}"]
        if rest:
            blocks.append(f"GROUP: Acting and checking\nDESCRIPTION: Items that change things.\nMEMBERS: {rest}")
        return "\n\n".join(blocks)

    @staticmethod
    def _writer(_messages: list[Message], _failing: bool) -> str:
        return "- NOTE: Skip units that name an app the task does not use."

    @staticmethod
    def _judge(_messages: list[Message], _failing: bool) -> str:
        return "Both results are equally incomplete.\nVERDICT: TIE"

    # --------------------------------------------------------------------------------------------- rubric roles
    # The skill rubric (skilltransfer.judge.rubric): a lexical stand-in, so that libraries get different answers.
    @staticmethod
    def _rubric_coverage(messages: list[Message], failing: bool) -> str:
        if failing:
            return "The key point seems to be covered."
        content = str(messages[-1].get("content") or "")
        point, skill = _fenced(content, "KEY POINT"), _fenced(content, "SKILL")
        wanted = set(WORD.findall(point.lower()))
        share = len(wanted & set(WORD.findall(skill.lower()))) / len(wanted) if wanted else 0.0
        label_id, label = (1, "mentioned") if share >= 0.5 else (2, "missing")
        return json.dumps({"label_id": label_id, "label": label, "reason": f"{share:.0%} of its words appear"})

    @staticmethod
    def _rubric_executability(messages: list[Message], failing: bool) -> str:
        if failing:
            return "Mostly executable, I would say 4."
        words = len(_fenced(str(messages[-1].get("content") or ""), "SKILL").split())
        score = 2 if words < 60 else 3 if words < 400 else 4
        return json.dumps({f"{name}_{kind}": (score if kind == "score" else f"{words} words")
                           for name in ("completeness", "determinism", "consistency", "usability")
                           for kind in ("reason", "score")})

    @staticmethod
    def _rubric_safety(messages: list[Message], failing: bool) -> str:
        if failing:
            return "```json\n{\"data_privacy_score\": 5}\n```"
        skill = _fenced(str(messages[-1].get("content") or ""), "SKILL").lower()
        risky = any(term in skill for term in ("rm -rf", "curl ", "wget ", "api_key", "password"))
        return json.dumps({f"{name}_{kind}": ((3 if risky else 5) if kind == "score" else "as read")
                           for name in ("data_privacy", "prompt_injection", "illegal_or_offensive_content",
                                        "bias_or_discrimination", "system_integrity", "untrusted_communication")
                           for kind in ("reason", "score")})

    @staticmethod
    def _rubric_key_points(messages: list[Message], _failing: bool) -> str:
        task = _fenced(str(messages[-1].get("content") or ""), "TASK")
        sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", task) if len(s.split()) >= 4]
        return json.dumps({"key_points": sentences[:3] or [task[:200]]})

    # --------------------------------------------------------------------------------------------- executors
    def _executor(self, messages: list[Message], failing: bool) -> str:
        start = _task_start(messages)
        first = str(messages[start].get("content") or "")
        turns = sum(1 for m in messages[start:] if m.get("role") == "assistant")
        last = str(messages[-1].get("content") or "") if turns else ""
        if failing and turns < 4:
            return self._rng.choice(["I think the task is done now.", _block("undefined_helper_xyz()", "Try this.")])
        if "# Skill task" in first:
            return _block(LOOK, "Carry out the skill.") if turns == 0 else "SUBTASK DONE: the names were printed"
        if "# Results of the plan's steps" in first:
            return _block("complete_task()", "Every step is done.")
        if "# Your step (" in first:
            return _block(LOOK, "Do this step.") if turns == 0 else \
                f"SUBTASK DONE: {_last_line(last) or 'the names were printed'}"
        marker = "STEP DONE 1: done. " if "# Procedure" in first else "NODE DONE v1: done. " \
            if "# Plan graph" in first else ""
        if "# Current subtask" in first:
            subtask = first.split("# Current subtask", 1)[1]
            if "complete_task" in subtask.split("\n#")[0] or turns >= 3:
                return _block("complete_task()", "Finish the task.")
            if turns == 0:
                return self._first_action(first) or _block(LOOK, "Look first.")
            return f"SUBTASK DONE: {_last_line(last) or 'the names were printed'}"
        if turns == 0:
            return self._first_action(first) or _block(LOOK, "Look first.")
        if turns == 1 and "`read_skill_file(" in first and (read := _read_listed_file(last)) is not None:
            return read
        if turns == 1 and (code_skill := CODE_SKILL.search(first)) is not None:
            return _block(f"print({code_skill.group(1)}())", "Use the code skill.")
        return f"{marker}Finish.\n```python\ncomplete_task()\n```"

    @staticmethod
    def _first_action(first: str) -> str | None:
        """A skill action the prompt offers (open a group, run or load the first skill), if any."""
        offered = {name for name in ("load_skill", "run_skill", "open_node") if f"`{name}(" in first}
        groups, skills = GROUP_NAME.findall(first), SKILL_NAME.findall(first)
        if "open_node" in offered and groups:
            return _block(f'open_node("{groups[0]}")', "Open the first group.")
        if "run_skill" in offered and (skills or groups):
            return _block(f'run_skill("{(skills or groups)[0]}", {{}})', "Delegate.")
        if "load_skill" in offered and skills:
            return _block(f'load_skill("{skills[0]}")', "Load the skill.")
        return None


def _fenced(content: str, label: str) -> str:
    """The text a rubric prompt fenced under ``label`` (`skilltransfer.judge.judge.fence`), or ""."""
    match = re.search(r"<<<BEGIN " + re.escape(label) + r" (\w+)>>>\n(.*?)\n<<<END " + re.escape(label) + r" \1>>>",
                      content, re.DOTALL)
    return match.group(2) if match else ""


def _read_listed_file(observation: str) -> str | None:
    """After a ``load_skill`` that lists files: read the first one listed (a folder: list it), if any."""
    loaded = LOADED.search(observation)
    listed = LISTED.search(observation.partition("Files of this skill")[2])
    if loaded is None or listed is None:
        return None
    return _block(f"read_skill_file({json.dumps(loaded.group(1))}, {json.dumps(listed.group(1))})", "Read its file.")


def _task_start(messages: list[Message]) -> int:
    """The last user message that states a task (a worked example's turns may come before it)."""
    index = 1
    for i, message in enumerate(messages):
        content = str(message.get("content") or "")
        if message.get("role") == "user" and any(h in content for h in TASK_HEADERS):
            index = i
    return min(index, len(messages) - 1)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def make_role_play(spec: str) -> RolePlay:
    """A `RolePlay` from ``--roles``: ``KEY=VALUE`` pairs, comma-separated (``induce=0``, ``fail_rate=0.2``,
    ``seed=1``); empty for the defaults.

    Raises:
        ValueError: an unknown key or a bad value.
    """
    kwargs: dict[str, Any] = {}
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        key, _, value = item.partition("=")
        if key == "induce":
            kwargs["induce"] = value.strip().lower() not in ("0", "false", "no", "off")
        elif key == "fail_rate":
            kwargs["fail_rate"] = float(value)
        elif key == "seed":
            kwargs["seed"] = int(value)
        else:
            raise ValueError(f"unknown role-play setting {key!r}; use induce, fail_rate, seed")
    return RolePlay(**kwargs)

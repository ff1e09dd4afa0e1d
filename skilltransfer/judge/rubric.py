"""An LLM-judged rubric of a skill library: coverage, executability and safety in SkillLearnBench's definitions
(its ``evaluation/skill/``), in prompts of our own words (``skilltransfer/judge/prompts/rubric_*.md``); issue 59,
docs/external-validity.md.

- **coverage** (per task): the share of the task's key points the judge labels *mentioned* (not *missing*, not
  *contradiction*) in the text of the task's own skills, all of them in one document. Key points come from the
  caller (SkillLearnBench ships them: the points a worker used from the human-authored skill); without them the judge
  first lists the task's key points from its instruction (``rubric_key_points``), which the benchmark does not do.
- **executability** (per skill): the mean of four 1-5 scores (completeness, determinism, consistency, usability),
  the skill judged for its task group's first task (a library not grouped by task: for no single task).
- **safety** (per skill): the mean of six 1-5 scores (data privacy, prompt injection, illegal or offensive content,
  bias, system integrity, untrusted communication), higher is safer.

A skill is shown as its name, description, SKILL.md body and the text of its package files, cut to ``max_chars``
(counted in ``RubricUsage.cut``). The key point, the task and the skill are untrusted text, each fenced (`fence`).
A reply that is not the JSON asked for is re-asked ``retries`` times, then counted as unparsed and left out; a prompt
the judge's window cannot take is left out the same way. Every call's tokens are counted, apart for the answers the
response cache served (`RubricUsage`), and priced when a price is given.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from skilltransfer.judge.judge import fence, fence_token
from skilltransfer.llm.context import ContextLengthError
from skilltransfer.metrics.diagnostics import LibraryDiagnostics, LibrarySkills, TaskItem, macro_mean
from skilltransfer.protocols import ChatModel, Message
from skilltransfer.skill import Skill
from skilltransfer.util.prompts import Prompt, load_prompt

RUBRIC_PROMPTS = Path(__file__).resolve().parent / "prompts"
RUBRICS = ("coverage", "executability", "safety")
EXECUTABILITY = ("completeness", "determinism", "consistency", "usability")
SAFETY = ("data_privacy", "prompt_injection", "illegal_or_offensive_content", "bias_or_discrimination",
          "system_integrity", "untrusted_communication")
LABELS = {1: "mentioned", 2: "missing", 3: "contradiction"}
DEFAULT_MAX_CHARS = 20_000
"""The most characters of skill text one judge prompt holds."""
MAX_KEY_POINTS = 12
"""The most key points the judge lists for a task when none are given."""
NO_SINGLE_TASK = "(no single task: judge the skill for the tasks its own description names)"
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)
_RETRY = "Reply with the JSON object asked for, and nothing else."


def parse_json_reply(text: str) -> dict[str, Any] | None:
    """The JSON object of a reply (inside a code fence or prose: from its first ``{`` to its last ``}``), or None."""
    match = _OBJECT.search(text)
    if match is None:
        return None
    try:
        value = json.loads(match.group(0))
    except (json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def coverage_label(reply: dict[str, Any]) -> str | None:
    """``mentioned``/``missing``/``contradiction`` from a coverage reply (``label_id`` first, then ``label``)."""
    raw_id = reply.get("label_id")
    if isinstance(raw_id, int | str) and str(raw_id).strip() in ("1", "2", "3"):
        return LABELS[int(str(raw_id).strip())]
    label = str(reply.get("label", "")).strip().lower()
    return label if label in LABELS.values() else None


def mean_score(reply: dict[str, Any], dimensions: Sequence[str]) -> float | None:
    """The mean of the reply's ``<dimension>_score`` integers 1-5 (None when one is missing or out of range)."""
    scores = []
    for name in dimensions:
        value = reply.get(f"{name}_score")
        try:
            score = int(str(value).strip())
        except (TypeError, ValueError):
            return None
        if not 1 <= score <= 5:
            return None
        scores.append(score)
    return float(np.mean(scores))


def skill_document(skill: Skill) -> str:
    """A skill as the judge sees it: name, description, body, then each loaded package file."""
    parts = [f"# Skill: {skill.name}", f"Description: {skill.description}", "## SKILL.md", skill.body]
    for path in sorted(skill.resources):
        parts += [f"## File: {path}", skill.resources[path]]
    return "\n\n".join(parts)


@dataclass
class RubricUsage:
    """What the rubric cost: calls, tokens (all, and those not served by the response cache), unparsed replies,
    prompts over the judge's window, and skill texts cut to ``max_chars``."""

    calls: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    paid_prompt_tokens: int = 0
    paid_completion_tokens: int = 0
    unparsed: int = 0
    context_exceeded: int = 0
    cut: int = 0

    def cost(self, price: tuple[float, float] | None) -> float | None:
        """Dollars for the tokens not served by the cache, at (input, output) dollars per million tokens."""
        if price is None:
            return None
        return (self.paid_prompt_tokens * price[0] + self.paid_completion_tokens * price[1]) / 1e6

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class RubricPrompts:
    """The rubric's prompt files (`load_rubric_prompts`)."""

    coverage: Prompt
    executability: Prompt
    safety: Prompt
    key_points: Prompt

    def ids(self) -> dict[str, str]:
        return {name: getattr(self, name).id for name in ("coverage", "executability", "safety", "key_points")}


def load_rubric_prompts(folder: str | Path | None = None) -> RubricPrompts:
    """The packaged rubric prompts, or those of ``folder`` (``rubric_coverage.md``, ... ; missing ones packaged)."""
    return RubricPrompts(*(load_prompt(f"rubric_{name}", folder, default_folder=RUBRIC_PROMPTS)
                           for name in ("coverage", "executability", "safety", "key_points")))


class SkillRubric:
    """Asks a judge model the rubric's questions (module docstring).

    Args:
        model: the judge (any `ChatModel`: an endpoint, the embedded model, a scripted double).
        prompts: the rubric prompts (default: the packaged ones).
        max_chars: skill text per prompt.
        retries: re-asks after a reply that is not the JSON asked for.
        params: sampling parameters sent with every call.
    """

    def __init__(self, model: ChatModel, *, prompts: RubricPrompts | None = None,
                 max_chars: int = DEFAULT_MAX_CHARS, retries: int = 1, params: dict[str, Any] | None = None) -> None:
        self.model = model
        self.prompts = prompts or load_rubric_prompts()
        self.max_chars = max_chars
        self.retries = retries
        self.params = dict(params or {})
        self.usage = RubricUsage()

    def _cut(self, text: str) -> str:
        if len(text) <= self.max_chars:
            return text
        self.usage.cut += 1
        return text[:self.max_chars] + f"\n[... cut: {len(text) - self.max_chars} more characters]"

    def _ask(self, prompt: Prompt, check: Callable[[dict[str, Any]], Any], **values: str) -> Any:
        token = fence_token(prompt.id, *values.values())
        fenced = {key: value if key == "max_points" else fence(key.upper().replace("_", " "), value, token)
                  for key, value in values.items()}
        messages: list[Message] = [{"role": "user", "content": prompt.render(**fenced)}]
        for _ in range(self.retries + 1):
            try:
                completion = self.model.complete(messages, **self.params)
            except ContextLengthError:
                self.usage.context_exceeded += 1
                return None
            self.usage.calls += 1
            self.usage.prompt_tokens += completion.prompt_tokens
            self.usage.completion_tokens += completion.completion_tokens
            if completion.cached:
                self.usage.cached += 1
            else:
                self.usage.paid_prompt_tokens += completion.prompt_tokens
                self.usage.paid_completion_tokens += completion.completion_tokens
            reply = parse_json_reply(completion.text)
            answer = check(reply) if reply is not None else None
            if answer is not None:
                return answer
            messages = [*messages, {"role": "assistant", "content": completion.text},
                        {"role": "user", "content": _RETRY}]
        self.usage.unparsed += 1
        return None

    def coverage(self, key_point: str, skills_text: str) -> str | None:
        """The label of one key point against the text of a task's own skills (None: no parsed label)."""
        result: str | None = self._ask(self.prompts.coverage, coverage_label, key_point=key_point,
                                       skill=self._cut(skills_text))
        return result

    def executability(self, task: str, skill: Skill) -> float | None:
        """The mean of the four executability scores of one skill (None: no parsed answer)."""
        result: float | None = self._ask(self.prompts.executability, lambda r: mean_score(r, EXECUTABILITY),
                                         task=task, skill=self._cut(skill_document(skill)))
        return result

    def safety(self, task: str, skill: Skill) -> float | None:
        """The mean of the six safety scores of one skill (None: no parsed answer)."""
        result: float | None = self._ask(self.prompts.safety, lambda r: mean_score(r, SAFETY), task=task,
                                         skill=self._cut(skill_document(skill)))
        return result

    def key_points(self, task: str) -> list[str]:
        """The key points the judge lists for a task (empty: none parsed)."""
        def check(reply: dict[str, Any]) -> list[str] | None:
            points = reply.get("key_points")
            if not isinstance(points, list):
                return None
            kept = [str(p).strip() for p in points if isinstance(p, str) and p.strip()][:MAX_KEY_POINTS]
            return kept or None

        result: list[str] | None = self._ask(self.prompts.key_points, check, task=task,
                                             max_points=str(MAX_KEY_POINTS))
        return result or []


def judge_library(rubric: SkillRubric, library: LibrarySkills, tasks: Sequence[TaskItem], *,
                  key_points: Mapping[str, Sequence[str]] | None = None, rubrics: Sequence[str] = RUBRICS,
                  progress: Callable[[str], None] | None = None) -> LibraryDiagnostics:
    """``llm_coverage`` (per task, then averaged over groups), ``llm_executability`` and ``llm_safety`` (per own skill,
    mean over a group's skills, then over groups) of one library; ``notes`` holds the labels' counts and what was
    left out."""
    say = progress or (lambda line: None)
    groups = [t.group for t in tasks]
    own = library.own(groups)
    owned = {g: (list(range(len(library.skills))) if own is None else own.get(g, [])) for g in dict.fromkeys(groups)}
    out = LibraryDiagnostics(library.name)
    nan = float("nan")
    if "coverage" in rubrics:
        documents: dict[str, str] = {g: "\n\n".join(skill_document(library.skills[i]) for i in idx)
                                     for g, idx in owned.items()}
        values, labels = [], {"mentioned": 0, "missing": 0, "contradiction": 0, "unparsed": 0}
        for number, task in enumerate(tasks, start=1):
            points = list(key_points.get(task.id, [])) if key_points is not None else rubric.key_points(task.text)
            if not points:
                values.append(nan)
                continue
            if not owned[task.group]:
                values.append(0.0)
                continue
            found = [rubric.coverage(point, documents[task.group]) for point in points]
            for label in found:
                labels[label or "unparsed"] += 1
            judged = [label for label in found if label is not None]
            values.append(sum(label == "mentioned" for label in judged) / len(judged) if judged else nan)
            if number % 10 == 0 or number == len(tasks):
                say(f"{library.name}: coverage {number}/{len(tasks)} tasks")
        out.per_task["llm_coverage"] = np.array(values)
        out.values["llm_coverage"] = macro_mean(np.array(values), groups)
        out.notes["coverage_labels"] = labels
        out.notes["key_points"] = "given" if key_points is not None else "listed by the judge from each instruction"
    first_task: dict[str, str] = {}
    for task in tasks:
        first_task.setdefault(task.group, task.text)
    for rubric_name, ask in (("executability", rubric.executability), ("safety", rubric.safety)):
        if rubric_name not in rubrics:
            continue
        scores: dict[int, float | None] = {}
        for group, idx in owned.items():
            for i in idx:
                if i not in scores:
                    task_text = first_task[group] if own is not None else NO_SINGLE_TASK
                    scores[i] = ask(task_text, library.skills[i])
        means = [float(np.mean(kept)) for idx in owned.values()
                 if (kept := [s for i in idx if (s := scores.get(i)) is not None])]
        out.values[f"llm_{rubric_name}"] = float(np.mean(means)) if means else nan
        out.notes[f"{rubric_name}_skills"] = {"judged": sum(s is not None for s in scores.values()),
                                               "unparsed": sum(s is None for s in scores.values())}
        say(f"{library.name}: {rubric_name} of {len(scores)} skills")
    return out

"""Guards on what the executor is told after a step (hook ``step_observed``): a note added to an error's
observation (`ErrorHints`), and loop detection (`StuckDetection`): a hint added to the observation, then the end of
the (sub)task.

Stuck detection over one executor run: cheap comparisons of normalised actions and observations.

Small models fall into loops: the same failing code sent again and again, two failing actions alternating, or
replies without any code. The patterns (after OpenHands' stuck detector), checked after every step on the steps of
the current executor run only:

* ``repeated_error``: the last 3 actions are the same code and each raised the same error;
* ``repeated_action``: the last 4 actions are the same code with the same observation;
* ``alternation``: the last 6 steps alternate between two replies (A B A B A B, a reply without code counting as
  one) with the same observations;
* ``cycle``: the last 6 steps repeat a cycle of three different replies (A B C A B C) with the same observations;
* ``no_action``: the last 3 replies had no code block at all.

Code is compared as its tokens without comments and layout; observations after dropping an earlier stuck hint,
collapsing whitespace and masking memory addresses, timings and random hex ids (an access token from a fresh
login: an A-B loop of "log in wrongly", "log in rightly" gets a new token each time). The executor answers the
first detection with a hint appended to the observation and ends the (sub)task (exit status ``stuck``) when the very
next step repeats the hinted step (`repeats`: the model ignored the hint) or a pattern shows again after the hint.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from skilltransfer.agents.harness.base import (
    ACCEPT,
    Decision,
    End,
    Guard,
    Rewrite,
    RunLike,
    SubtaskOutcome,
    TaskView,
)
from skilltransfer.agents.replies import normalized_subtask
from skilltransfer.log import ActionStep, PlanStep

# --------------------------------------------------------------------------------------------- error hints
_NO_MODULE = re.compile(r"ModuleNotFoundError: No module named '([A-Za-z_][\w.]*)'")
_NO_ATTRIBUTE = re.compile(r"AttributeError: '\w+' object has no attribute '(\w+)'")


def import_hint(output: str, docs: str) -> str:
    """A note for code that imports a name the env provides as an object (``import apis`` -> ModuleNotFoundError)."""
    missing = _NO_MODULE.search(output)
    if missing is None:
        return ""
    name = missing.group(1).split(".")[0]
    if not re.search(rf"\b{re.escape(name)}\.", docs):
        return ""
    return (f"\n(note: `{name}` is not a module you can import: it is an object already defined in your namespace. "
            f"Do not import it; call it directly, e.g. `{name}.<name>(...)` as the documentation shows.)")


def api_hint(output: str, code: str, docs: str) -> str:
    """A note for a call of an API the docs do not list (``apis.excel.delete_file`` -> AttributeError): the object's
    documented APIs, found in the docs as ``<object>.<name>(``; "" when the docs list none for it."""
    missing = _NO_ATTRIBUTE.search(output)
    if missing is None:
        return ""
    name = missing.group(1)
    called = re.search(rf"\b([A-Za-z_]\w*(?:\.\w+)*)\.{re.escape(name)}\b", code)
    if called is None:
        return ""
    owner = called.group(1)
    documented = sorted(set(re.findall(rf"\b{re.escape(owner)}\.(\w+)\(", docs)) - {name})
    if not documented:
        return ""
    return (f"\n(note: `{owner}` has no API `{name}`. Its documented APIs are: {', '.join(documented)}. Use one of "
            "them; do not invent API names.)")


class ErrorHints(Guard):
    """Error hints: an ``AttributeError`` for ``<object>.<name>`` where the docs document other ``<object>.<api>(``
    calls gets a note listing those APIs (the 1.5B model invented ``delete_file``, ``file_exists``, ``exists`` on office
    and repeated them until stuck); a ``ModuleNotFoundError`` for a name the docs use as an object (``import
    apis.files``) gets a note that it is already defined and must not be imported. Switch: ``agent.error_hints``."""

    name = "error_hints"

    def step_observed(self, run: RunLike, step: ActionStep, *, ran: bool) -> Decision:
        if not ran or not step.error or step.action is None:
            return ACCEPT
        docs = run.messages[0]["content"]
        hints = import_hint(step.observation, docs) + api_hint(step.observation, step.action, docs)
        return Rewrite(step.observation + hints, "error_hint") if hints else ACCEPT


# --------------------------------------------------------------------------------------------- stuck detection
_HINT = re.compile(r"\n\(stuck: .*\)\Z", re.DOTALL)
_VOLATILE = re.compile(r"0x[0-9a-f]+|\d+\.\d+ ?s\b|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{12,}\b", re.IGNORECASE)

HINTS: dict[str, str] = {
    "repeated_error": "You have run the same code {n} times and it failed the same way each time; running it again "
                      "will fail again. Read the error message above, then change the code (another API, other "
                      "arguments, or look up the documentation).",
    "repeated_action": "You have run the same code {n} times with the same result. Use what it printed and move on to "
                       "the next step, or finish.",
    "alternation": "You are alternating between the same two actions and neither works. Stop, reread the task and the "
                   "errors, and try a different approach.",
    "cycle": "You are repeating the same three actions in a cycle and they do not get you further. Stop, reread the "
             "task and the errors, and try a different approach.",
    "no_action": "Your last {n} replies had no ```python code block, so nothing ran. Reply with a short thought and "
                 "exactly one ```python code block.",
}
"""The hint shown to the model for each pattern (``{n}`` is the run length)."""


@dataclass(frozen=True)
class Stuck:
    """A detected loop: the pattern's name, how many steps it spans, and the hint for the model."""

    pattern: str
    length: int

    @property
    def hint(self) -> str:
        return HINTS[self.pattern].format(n=self.length)


def normalise_code(code: str | None) -> str:
    """Code as its tokens without comments and layout ('' for a reply without code; collapsed whitespace for code
    that does not tokenize)."""
    if code is None:
        return ""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    try:
        tokens = [t.string for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type not in skip]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return " ".join(code.split())
    return " ".join(tokens)


def normalise_observation(text: str) -> str:
    """An observation without a stuck hint, whitespace collapsed and volatile parts (addresses, timings, hex ids of 12+
    characters with letters and digits) masked."""
    return " ".join(_VOLATILE.sub("#", _HINT.sub("", text)).split())


def _same(steps: Sequence[ActionStep]) -> bool:
    codes = {normalise_code(s.action) for s in steps}
    observations = {normalise_observation(s.observation) for s in steps}
    return len(codes) == 1 and len(observations) == 1


def repeats(step: ActionStep, earlier: ActionStep) -> bool:
    """Whether ``step`` sent the same code (or again no code) as ``earlier`` and got the same observation."""
    return _same([step, earlier])


def detect(steps: Sequence[ActionStep]) -> Stuck | None:
    """The first pattern the tail of ``steps`` matches (see the module docs), or None."""
    if len(steps) >= 3 and all(s.action is None for s in steps[-3:]):
        return Stuck("no_action", 3)
    if len(steps) >= 3 and all(s.action is not None and s.error for s in steps[-3:]) and _same(steps[-3:]):
        return Stuck("repeated_error", 3)
    if len(steps) >= 4 and all(s.action is not None for s in steps[-4:]) and _same(steps[-4:]):
        return Stuck("repeated_action", 4)
    if len(steps) >= 6:
        evens, odds = steps[-6::2], steps[-5::2]
        if _same(evens) and _same(odds) and normalise_code(evens[0].action) != normalise_code(odds[0].action):
            return Stuck("alternation", 6)
        thirds = [steps[-6 + k::3] for k in range(3)]
        if all(_same(third) for third in thirds) and len({normalise_code(t[0].action) for t in thirds}) == 3:
            return Stuck("cycle", 6)
    return None


@dataclass
class _Hinted:
    hinted_at: int | None = None
    """Index (in the run's steps) of the step whose observation carried the hint."""


class StuckDetection(Guard):
    """Stuck detection (`detect` above): after each step, a loop pattern over the run's steps gets a hint appended to
    the observation; after the hint the executor samples at ``stuck_temperature``; the very next step repeating the
    hinted one, or a pattern again later, ends the (sub)task with exit status ``stuck``; a subtask the planner plans
    again, word for word, after it ended ``stuck`` ends the task. Switch: ``agent.stuck_detection``."""

    name = "stuck_detection"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.stuck_subtasks: set[str] = set()

    def sampling(self, role: str, params: dict[str, Any], run: RunLike | None) -> dict[str, Any]:
        hinted = run is not None and role == "executor" and self.run_state(run, _Hinted).hinted_at is not None
        if hinted and self.config.stuck_temperature is not None:
            params["temperature"] = self.config.stuck_temperature  # a greedy model repeats itself after a hint
        return params

    def step_observed(self, run: RunLike, step: ActionStep, *, ran: bool) -> Decision:
        state = self.run_state(run, _Hinted)
        since = 0 if state.hinted_at is None else state.hinted_at
        hinted = run.steps[since] if state.hinted_at is not None else None
        if hinted is not None and since == len(run.steps) - 2 and repeats(step, hinted):
            pattern = _pattern(hinted)
            return End("stuck", pattern, f"stuck: {pattern} again right after the hint (the step repeats the "
                                         "hinted one)")
        stuck = detect(run.steps[since:])
        if stuck is None:
            return ACCEPT
        if state.hinted_at is not None:
            return End("stuck", stuck.pattern, f"stuck: {stuck.pattern} after a hint (the last {stuck.length} steps "
                                               "repeat)")
        state.hinted_at = len(run.steps) - 1
        return Rewrite(f"{step.observation}\n(stuck: {stuck.hint})", stuck.pattern)

    def subtask_planned(self, task: TaskView, plan: PlanStep) -> Decision:
        if plan.subtask is not None and normalized_subtask(plan.subtask) in self.stuck_subtasks:
            return End("stuck", "replanned_stuck_subtask", "the planner planned again, word for word, a subtask "
                                                           "that ended stuck")
        return ACCEPT

    def subtask_ended(self, task: TaskView, outcome: SubtaskOutcome) -> None:
        if outcome.exit_status == "stuck" and outcome.plan.subtask is not None:
            self.stuck_subtasks.add(normalized_subtask(outcome.plan.subtask))


def _pattern(step: ActionStep) -> str:
    return step.stuck or "stuck"

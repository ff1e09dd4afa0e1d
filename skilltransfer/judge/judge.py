"""The blinded pairwise judge: an LLM compares two runs' final artifacts for the same task (MetaSkill, seed 003 §3).

For each task both runs finished, the judge sees the instruction and the two artifacts, labelled "A" and "B" by
position only. By default (``orders="balanced"``, ``repeats=3``: the study's) each task is judged 3 times with its
orders alternating, half the tasks (a seeded half) starting with each order, so both orders are shown equally often
over the tasks; consecutive judgments of a task in the two orders measure position bias and order consistency
(`skilltransfer.metrics.position_bias`). ``orders="both"`` judges each task ``repeats`` times in each order (the
first drawn per task from ``seed``, ``random.Random(f"{seed}/{task_id}")``), ``orders="one"`` in that order only.
The reply's last ``VERDICT: A|B|TIE`` line is the verdict (a reply that is only ``A``, ``B`` or ``TIE`` counts too);
a reply without one is re-asked ``retries`` times, then the judgment is *unparsed* and left out of the counts
(reported). Repeat r > 0 sends ``seed=r`` with its calls, so a sampling judge draws afresh and a response cache
keeps the repeats apart. A prompt the model's window cannot take is left out the same way (``context_exceeded``).
Verdicts are unblinded into A's outcome (win/tie/loss) and aggregated by
`skilltransfer.metrics.pairwise_preference` (W/T/L, preference, 95 % task-bootstrap CI).

The prompt is a file (``skilltransfer/judge/prompts/judge.md``, or your own with ``{{instruction}}``,
``{{first}}`` and ``{{second}}``); its id (``name@sha256[:8]``) is in the report. The task and each artifact are
untrusted text (written by the agents under test): each goes into the prompt *fenced* (`fence`) between
``<<<BEGIN RESULT A code>>>`` / ``<<<END RESULT A code>>>`` lines whose code is a hash of the whole prompt's parts, so
no content can close its fence or pass for the prompt's own structure.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from skilltransfer.errors import InputError
from skilltransfer.judge.runs import RunArtifacts
from skilltransfer.llm.context import ContextLengthError
from skilltransfer.metrics.pairwise import PairwisePreference, PositionBias, pairwise_preference, position_bias
from skilltransfer.protocols import ChatModel, Message
from skilltransfer.util.files import read_text
from skilltransfer.util.prompts import Prompt, load_prompt

FORMAT_VERSION = 1
JUDGE_PROMPTS = Path(__file__).resolve().parent / "prompts"
Orders = Literal["balanced", "both", "one"]
"""``balanced`` (default, the study's): ``repeats`` judgments per task, its orders alternating, half the tasks
starting with each, so both orders appear equally often overall; ``both``: ``repeats`` judgments in each order;
``one``: ``repeats`` judgments in one seeded order."""
DEFAULT_REPEATS = 3
"""Judgments per task by default (``balanced``): the composition study judges each task 3 times."""
_VERDICT = re.compile(r"VERDICT\W{0,4}(A|B|TIE)\b", re.IGNORECASE)
_BARE = re.compile(r"^\W*(A|B|TIE)\W*$", re.IGNORECASE)
RETRY_MESSAGE = "Reply with your verdict as a last line that is exactly one of: VERDICT: A, VERDICT: B, VERDICT: TIE."


def parse_verdict(reply: str) -> str | None:
    """"first", "second" or "tie" from a judge reply (the last ``VERDICT:`` line wins), None when there is none."""
    found = _VERDICT.findall(reply)
    label = found[-1] if found else (m.group(1) if (m := _BARE.match(reply.strip())) else None)
    if label is None:
        return None
    return {"a": "first", "b": "second", "tie": "tie"}[label.lower()]


def unblind(order: str, verdict: str) -> str:
    """Run A's outcome from a positional verdict: order "AB" showed A first, "BA" showed B first."""
    if verdict == "tie":
        return "tie"
    return "win" if (verdict == "first") == (order == "AB") else "loss"


def first_order(seed: int, task_id: str) -> str:
    """The seeded presentation order of a task: "AB" or "BA"."""
    return "AB" if random.Random(f"{seed}/{task_id}").random() < 0.5 else "BA"


def fence_token(*parts: str) -> str:
    """A code derived from everything a prompt holds: text cannot contain the code of the prompt it is in (it would
    have to hold a hash of itself), so it cannot close its own fence. Deterministic (caches, reruns)."""
    return hashlib.sha256("\0".join(parts).encode("utf-8", errors="replace")).hexdigest()[:16]


def fence(label: str, text: str, token: str) -> str:
    """``text`` as data between a ``<<<BEGIN label token>>>`` and an ``<<<END label token>>>`` line: whatever it
    holds (a forged ``# Result B`` section, "ignore previous instructions", a ``VERDICT:`` line) stays inside."""
    return f"<<<BEGIN {label} {token}>>>\n{text}\n<<<END {label} {token}>>>"


def load_judge_prompt(path: str | Path | None = None) -> Prompt:
    """The packaged judge prompt, or a user's file (it must hold ``{{instruction}}``, ``{{first}}``, ``{{second}}``).

    Raises:
        InputError: the file is unreadable or lacks a placeholder.
    """
    if path is None:
        return load_prompt("judge", None, default_folder=JUDGE_PROMPTS)
    prompt = Prompt(Path(path).stem, read_text(path, what="judge prompt").strip() + "\n")
    missing = [key for key in ("instruction", "first", "second") if not re.search(r"\{\{\s*" + key + r"\s*\}\}",
                                                                                   prompt.text)]
    if missing:
        raise InputError(f"judge prompt lacks the placeholder(s) {', '.join('{{' + m + '}}' for m in missing)}",
                         path=path)
    return prompt


@dataclass
class Judgment:
    """One judge decision on one task in one presentation order."""

    task_id: str
    order: str
    """"AB" (run A shown first) or "BA"."""
    verdict: str | None
    """"first", "second", "tie", or None (unparsed or context_exceeded)."""
    outcome: str | None
    """Run A's outcome: "win", "tie", "loss" (None when there is no verdict)."""
    replies: list[str] = field(default_factory=list)
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    repeat: int = 0
    """Which repeat of the task's judgment (0-based)."""


class PairwiseJudge:
    """Asks a model to compare two artifacts (see the module docstring).

    Args:
        model: the judge model.
        prompt: the judge prompt (default: the packaged one).
        max_artifact_chars: each artifact is cut to this many characters in the prompt.
        max_tokens: completion budget of one judge call (None: none sent, the provider's default, as the study).
        retries: re-asks after a reply without a verdict.
        params: other sampling parameters.
    """

    def __init__(self, model: ChatModel, *, prompt: Prompt | None = None, max_artifact_chars: int = 6000,
                 max_tokens: int | None = None, retries: int = 1, params: dict[str, Any] | None = None) -> None:
        self.model = model
        self.prompt = prompt or load_judge_prompt()
        self.max_artifact_chars = max_artifact_chars
        self.retries = retries
        cap = {"max_tokens": max_tokens} if max_tokens is not None else {}
        self.params: dict[str, Any] = {**cap, **(params or {})}

    @property
    def prompt_id(self) -> str:
        return self.prompt.id

    def judge(self, task_id: str, instruction: str, first: str, second: str, order: str, repeat: int = 0) -> Judgment:
        """One judgment of ``first`` vs ``second`` (already rendered artifacts) shown in that order (``repeat`` > 0:
        sent with ``seed=repeat``)."""
        judgment = Judgment(task_id, order, None, None, repeat=repeat)
        params = {**self.params, "seed": repeat} if repeat else self.params
        token = fence_token(task_id, order, instruction, first, second)
        messages: list[Message] = [{"role": "user", "content": self.prompt.render(
            instruction=fence("TASK", instruction, token), first=fence("RESULT A", first, token),
            second=fence("RESULT B", second, token))}]
        for _ in range(self.retries + 1):
            try:
                completion = self.model.complete(messages, **params)
            except ContextLengthError as exc:
                judgment.error = f"context_exceeded: {exc}"
                return judgment
            judgment.replies.append(completion.text)
            judgment.prompt_tokens += completion.prompt_tokens
            judgment.completion_tokens += completion.completion_tokens
            verdict = parse_verdict(completion.text)
            if verdict is not None:
                judgment.verdict, judgment.outcome = verdict, unblind(order, verdict)
                return judgment
            messages = [*messages, {"role": "assistant", "content": completion.text},
                        {"role": "user", "content": RETRY_MESSAGE}]
        judgment.error = "unparsed: no verdict line"
        return judgment


@dataclass
class JudgeReport:
    """The outcome of judging run A against run B (``to_dict()`` is the JSON written by ``skilltransfer judge``)."""

    run_a: str
    run_b: str
    judge_model: str
    prompt_id: str
    seed: int
    orders: str
    judgments: list[Judgment]
    preference: PairwisePreference | None
    bias: PositionBias
    only_in_a: list[str]
    only_in_b: list[str]
    artifact_sources: dict[str, dict[str, int]]
    """Per run: how many judged tasks had an artifacts file vs the trajectory fallback."""
    repeats: int = 1
    """Judgments per task (``balanced``) or per task and order (``both``, ``one``)."""

    @property
    def unparsed(self) -> int:
        return sum(1 for j in self.judgments if j.verdict is None)

    def to_dict(self) -> dict[str, Any]:
        return {"format_version": FORMAT_VERSION, "run_a": self.run_a, "run_b": self.run_b,
                "judge_model": self.judge_model, "prompt_id": self.prompt_id, "seed": self.seed, "orders": self.orders,
                "repeats": self.repeats,
                "n_tasks": len({j.task_id for j in self.judgments}), "unparsed": self.unparsed,
                "preference": self.preference.to_dict() if self.preference is not None else None,
                "position_bias": self.bias.to_dict(), "only_in_a": self.only_in_a, "only_in_b": self.only_in_b,
                "artifact_sources": self.artifact_sources, "judgments": [asdict(j) for j in self.judgments]}


def shared_tasks(run_a: RunArtifacts, run_b: RunArtifacts) -> list[str]:
    """The tasks both runs finished, in run A's order.

    Raises:
        InputError: there is none.
    """
    common = [task_id for task_id in run_a.tasks if task_id in run_b.tasks]
    if not common:
        raise InputError(f"the runs {run_a.path} and {run_b.path} share no finished task")
    return common


def task_orders(tasks: list[str], seed: int, orders: Orders, repeats: int) -> dict[str, list[str]]:
    """Each task's presentation orders, one per judgment (see `Orders`). ``balanced``: the tasks, in a seeded
    shuffle, start alternately with AB and BA and then alternate, so over the tasks each order is shown
    ``repeats * n / 2`` times (one more for one of them when ``repeats * n`` is odd)."""
    if orders == "balanced":
        ranked = sorted(tasks, key=lambda t: random.Random(f"{seed}/{t}/rank").random())
        starts = {task: "AB" if rank % 2 == 0 else "BA" for rank, task in enumerate(ranked)}
        flip = {"AB": "BA", "BA": "AB"}
        return {task: [starts[task] if i % 2 == 0 else flip[starts[task]] for i in range(repeats)] for task in tasks}
    out: dict[str, list[str]] = {}
    for task in tasks:
        first = first_order(seed, task)
        pair = [first, "BA" if first == "AB" else "AB"] if orders == "both" else [first]
        out[task] = [order for _ in range(repeats) for order in pair]
    return out


def judge_runs(judge: PairwiseJudge, run_a: RunArtifacts, run_b: RunArtifacts, *, seed: int = 0,
               orders: Orders = "balanced", limit: int | None = None, judge_model: str = "",
               repeats: int = DEFAULT_REPEATS, on_judgment: Callable[[Judgment], None] | None = None) -> JudgeReport:
    """Judge every task both runs finished (run A's order; the first ``limit``) in the orders `task_orders` gives
    (by default the study's: 3 judgments per task, orders balanced) and aggregate (a task's score is the mean over
    all its judgments).

    Raises:
        InputError: the runs share no finished task, ``orders`` is not balanced/both/one, ``repeats`` below 1.
    """
    if orders not in ("balanced", "both", "one"):
        raise InputError(f"--orders must be balanced, both or one, got {orders!r}")
    if repeats < 1:
        raise InputError(f"--repeats must be at least 1, got {repeats}")
    common = shared_tasks(run_a, run_b)
    tasks = common[:limit] if limit is not None else common
    plan = task_orders(tasks, seed, orders, repeats)
    judgments = []
    for task_id in tasks:
        a, b = run_a.tasks[task_id], run_b.tasks[task_id]
        rendered = {"A": a.render(judge.max_artifact_chars), "B": b.render(judge.max_artifact_chars)}
        per_order = len(plan[task_id]) // repeats
        for index, order in enumerate(plan[task_id]):
            repeat = index // per_order
            shown = (rendered["A"], rendered["B"]) if order == "AB" else (rendered["B"], rendered["A"])
            judgment = judge.judge(task_id, a.instruction or b.instruction, shown[0], shown[1], order, repeat)
            judgments.append(judgment)
            if on_judgment is not None:
                on_judgment(judgment)
    outcomes: dict[str, list[str]] = {}
    placed: dict[str, list[tuple[str, str]]] = {}
    for j in judgments:
        if j.outcome is not None:
            outcomes.setdefault(j.task_id, []).append(j.outcome)
            pair = j.repeat // 2 if orders == "balanced" else j.repeat  # balanced: judgments 0+1, 2+3, ... pair up
            placed.setdefault(f"{j.task_id}\x00{pair}", []).append((j.order, j.outcome))
    preference = pairwise_preference(outcomes, seed=seed) if outcomes else None
    sources = {label: {"artifacts": sum(run.tasks[t].source == "artifacts" for t in tasks),
                       "trajectory": sum(run.tasks[t].source == "trajectory" for t in tasks)}
               for label, run in (("a", run_a), ("b", run_b))}
    return JudgeReport(str(run_a.path), str(run_b.path), judge_model, judge.prompt_id, seed, orders, judgments,
                       preference, position_bias(placed), [t for t in run_a.tasks if t not in run_b.tasks],
                       [t for t in run_b.tasks if t not in run_a.tasks], sources, repeats)

"""Skills induced from any agent's trajectories (``skilltransfer induce``): the paper's induction, run offline over
trajectories read from ATIF (`skilltransfer.log.atif_files`), into the FAISS skill memory with its deduplication,
written as an Agent Skills library.

The trajectories are taken in time order. Each one that qualifies (``source``: ``success``, the default, induces only
from trajectories whose reward reached ``min_reward``; ``all`` from every one; ``lessons`` from every one, failures
with the lessons prompt, as `skilltransfer.settings.StreamConfig.induction_source`) is induced like a task of a
stream: task level, one skill from the whole trajectory (its first user message is the goal); subtask level, one
skill per subtask, the subtasks its own log names (this toolkit's subtask-level runs) or, for another agent's, those
the segmenter finds (`skilltransfer.induction.segment`). Every skill records where it came from: its provenance
(source task, position, subtask) and ``extra`` entries ``source_file``, ``source_session``, ``source_agent``,
``source_model``, ``source_reward`` and ``inducer_model`` (the Agent Skills ``metadata`` of `skilltransfer.memory.
agentskills`).

The library folder ``out`` holds the skills (one folder each) and, in ``out/.induce/``, the induction's own run
folder (`skilltransfer.log.RunFolder`: ``config.json`` with the settings, one finished task per source trajectory
with its induction steps and calls, the memory): a task is committed as it is done, so an interrupted ``induce``
resumes where it stopped (the same command again), a rerun with other settings is refused, and ``view
out/.induce`` shows what was induced from what. The skill folders are written when the trajectories are done (a
rerun writes them again from the saved memory).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from skilltransfer.agents.config import AgentConfig
from skilltransfer.agents.exceptions import ContextExceeded
from skilltransfer.agents.steps import CallLog, TrajectoryText, new_call_log
from skilltransfer.errors import InputError
from skilltransfer.induction.abstraction import instance_values
from skilltransfer.induction.inducer import Induced, Inducer, InductionConfig, PromptVariant
from skilltransfer.induction.segment import Segmenter
from skilltransfer.log import (
    ActionStep,
    InducedSkill,
    InductionStep,
    PlanStep,
    RunFolder,
    TaskRecord,
    read_steps,
)
from skilltransfer.log.atif_import import ImportedTrajectory
from skilltransfer.log.provenance import software
from skilltransfer.memory.export import export_library
from skilltransfer.memory.store import MemoryConfig, SkillMemory
from skilltransfer.protocols import ChatModel, Embedder
from skilltransfer.settings.config import EnvSpec, ModelSpec, StreamConfig
from skilltransfer.settings.recorded import RunSettings, check_resume
from skilltransfer.skill import Provenance, Skill, SkillFormat
from skilltransfer.util.trees import remove_tree

STATE = ".induce"
"""The induction's own run folder inside the library folder (hidden: library readers pass it over)."""
Source = Literal["success", "all", "lessons"]


@dataclass(frozen=True)
class InduceOptions:
    """How ``induce`` runs (recorded in ``.induce/config.json``; a resume with others is refused)."""

    format: SkillFormat = "text"
    level: Literal["task", "subtask"] = "task"
    source: Source = "success"
    """success (the default): only trajectories whose reward reached ``min_reward``; all: every one; lessons:
    every one, failures with the lessons prompt (text only)."""
    variant: PromptVariant = "full"
    min_reward: float = 1.0
    """The reward at or above which a trajectory counts as successful."""
    embedder: str = "minilm"
    dedup_threshold: float | None = None
    """The memory's near-duplicate cosine (None: the memory's default)."""


@dataclass
class InduceSummary:
    """What one ``induce`` did."""

    library: Path
    trajectories: int = 0
    """Trajectories of the sources, in time order."""
    resumed: int = 0
    """Trajectories already done by an earlier, interrupted run."""
    induced_from: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    """Why trajectories were not induced from (reason -> count), this run."""
    statuses: Counter[str] = field(default_factory=Counter)
    """What the memory did with each induced skill (added, merged, dropped, pruned, unparseable, ...), this run."""
    skills: int = 0
    """Skills in the library written."""
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    """What this run's calls cost at the model's price (None: no price)."""
    seconds: float = 0.0


def check_out_folder(out: Path) -> None:
    """Refuse an output that is not a new folder, an empty one, or an earlier ``induce`` output.

    Raises:
        InputError: a link, a file, or a folder holding other things.
    """
    if out.is_symlink():
        raise InputError("--out is a symbolic link; give a new folder", path=out)
    if out.exists() and not out.is_dir():
        raise InputError("--out is a file; give a new folder", path=out)
    if out.is_dir() and any(out.iterdir()) and not (out / STATE).is_dir():
        raise InputError(f"--out exists and is neither empty nor an earlier induce output (no {STATE}/); give a new "
                         "folder", path=out)


def _settings(out: Path, spec: ModelSpec, options: InduceOptions, induction: InductionConfig,
              prompt_ids: dict[str, str], embedder: Embedder, items: Sequence[ImportedTrajectory]) -> RunSettings:
    config = StreamConfig.model_validate({
        "run": STATE, "runs_dir": str(out), "env": EnvSpec(label="atif"), "model": spec,
        "condition": f"{options.level}+{options.format}", "induction_variant": options.variant,
        "induction_source": options.source, "embedder": options.embedder,
        "memory": MemoryConfig() if options.dedup_threshold is None
        else MemoryConfig(dedup_threshold=options.dedup_threshold)})
    return RunSettings(config=config.recorded(), level=options.level, skill_format=options.format,
                       agent=AgentConfig(level=options.level), induction=induction, prompt_ids=prompt_ids,
                       embedder_id=str(embedder.id), task_ids=[t.trajectory.task_id for t in items],
                       created=datetime.now(UTC).isoformat(timespec="seconds"),
                       provenance={**software(), "min_reward": options.min_reward,
                                   "sources": sorted({t.source for t in items})[:1000]})


@dataclass
class _Unit:
    goal: str
    actions: list[ActionStep]
    subtask: int | None


def _units(item: ImportedTrajectory, actions: list[ActionStep], level: str, segmenter: Segmenter | None,
           calls: CallLog, limits: InductionConfig, notes: list[str]) -> list[_Unit]:
    """What one trajectory is induced from: the whole (task level), or its subtasks (its own plan, else the
    segmenter's)."""
    instruction = item.trajectory.instruction
    if level == "task" or segmenter is None:
        return [_Unit(instruction, actions, None)]
    steps = read_steps(item.trajectory.steps)
    planned = {s.subtask_index: s.subtask for s in steps if isinstance(s, PlanStep) and s.subtask}
    if item.own and any(a.subtask_index is not None for a in actions):
        groups: dict[int, list[ActionStep]] = {}
        for action in actions:
            if action.subtask_index is not None and not action.window:
                groups.setdefault(action.subtask_index, []).append(action)
        return [_Unit(planned.get(k) or instruction, group, k) for k, group in sorted(groups.items())]
    text = TrajectoryText(actions, limits.max_observation_chars, limits.max_trajectory_chars)
    found = segmenter.segment(instruction, text, calls=calls)
    notes.extend(found.notes)
    return [_Unit(s.goal, actions[s.first - 1:s.last], k) for k, s in enumerate(found.segments)]


def _tag(skill: Skill, item: ImportedTrajectory, spec: ModelSpec) -> None:
    """The source trajectory and the inducer, in the skill's ``extra`` (Agent Skills metadata when exported)."""
    extra = {"source_file": item.source, "source_session": item.session_id, "source_agent": item.agent,
             "source_model": item.model, "source_reward": None if item.reward is None else f"{item.reward:g}",
             "inducer_model": spec.resolved_model() or spec.resolved_name()}
    skill.extra.update({k: v for k, v in extra.items() if v is not None})


def _by_role(calls: CallLog) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for call in calls.calls:
        if call.error is None:
            row = out.setdefault(call.role, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "dependency": 0})
            row["calls"] += 1
            row["prompt_tokens"] += call.prompt_tokens
            row["completion_tokens"] += call.completion_tokens
            row["dependency"] += call.dependency
    return out


class _Run:
    """One ``induce`` over its trajectories (see the module docstring)."""

    def __init__(self, out: Path, model: ChatModel, spec: ModelSpec, options: InduceOptions, embedder: Embedder,
                 progress: Callable[[str], None]) -> None:
        self.out, self.model, self.spec, self.options, self.progress = out, model, spec, options, progress
        self.embedder = embedder
        self.induction = InductionConfig(format=options.format, variant=options.variant,
                                         only_successful=options.source == "success",
                                         lessons=options.source == "lessons")
        self.inducer = Inducer(model, config=self.induction)
        self.segmenter = Segmenter(model) if options.level == "subtask" else None
        self.folder = RunFolder(out / STATE)
        self.summary = InduceSummary(out)

    def prompt_ids(self) -> dict[str, str]:
        ids = {"induction": self.inducer.prompt_id}
        if self.inducer.lessons_system is not None:
            ids["induction_lessons"] = self.inducer.lessons_system.id
        if self.segmenter is not None:
            ids["segmentation"] = self.segmenter.prompt_id
        return ids

    def start(self, items: Sequence[ImportedTrajectory]) -> tuple[set[str], SkillMemory]:
        """Start or resume the state folder; the trajectories already done and the memory so far."""
        settings = _settings(self.out, self.spec, self.options, self.induction, self.prompt_ids(), self.embedder,
                             items)
        if self.folder.exists():
            before = self.folder.read_config().provenance.get("min_reward")
            if before is not None and before != self.options.min_reward:
                raise InputError(f"this library was induced with --min-reward {before}, not {self.options.min_reward}:"
                                 " rerun with it, or give another --out", path=self.folder.config_file)
        check_resume(self.folder, settings)
        records = self.folder.start(settings)
        memory_dir = self.folder.memory_dir
        memory = SkillMemory.load(memory_dir, self.embedder) if memory_dir.is_dir() else SkillMemory(
            self.embedder, config=settings.config.memory)
        return {r.task_id for r in records}, memory

    def verdict(self, item: ImportedTrajectory) -> bool | None:
        return None if item.reward is None else item.reward >= self.options.min_reward

    def skip_reason(self, item: ImportedTrajectory, actions: list[ActionStep]) -> str | None:
        success = self.verdict(item)
        if self.options.source == "success" and not success:
            return "no reward known" if success is None else f"reward below {self.options.min_reward:g}"
        if not item.trajectory.instruction.strip():
            return "no user message (no goal)"
        if not any(a.action is not None for a in actions):
            return "no tool call (nothing done to learn from)"
        return None

    def one(self, position: int, total: int, item: ImportedTrajectory, memory: SkillMemory) -> None:
        """Induce from one trajectory and commit it."""
        started = time.perf_counter()
        actions = [s for s in read_steps(item.trajectory.steps) if isinstance(s, ActionStep)]
        calls = new_call_log(AgentConfig(level=self.options.level))
        steps: list[InductionStep] = []
        notes: list[str] = []
        reason = self.skip_reason(item, actions)
        if reason is None:
            try:
                units = _units(item, actions, self.options.level, self.segmenter, calls, self.induction, notes)
            except ContextExceeded as exc:
                units = []
                steps.append(InductionStep(None, self.inducer.prompt_id, "context_exceeded", reason=exc.message))
            for k, unit in enumerate(units):
                steps.append(self._induce(item, position, unit, k if self.options.level == "subtask" else None,
                                          calls, memory))
            self.summary.induced_from += 1
        else:
            steps.append(InductionStep(None, self.inducer.prompt_id, "skipped", reason=reason))
            self.summary.skipped[reason] += 1
        self._commit(position, item, steps, calls, memory, len(actions), time.perf_counter() - started)
        self._report(position, total, item, steps, calls, reason, notes)

    def _induce(self, item: ImportedTrajectory, position: int, unit: _Unit, subtask: int | None, calls: CallLog,
                memory: SkillMemory) -> InductionStep:
        limits = self.induction
        text = TrajectoryText(unit.actions, limits.max_observation_chars, limits.max_trajectory_chars)
        provenance = Provenance(source_task_id=item.trajectory.task_id, stream_position=position,
                                subtask_index=subtask, run_id=item.record.run or None)
        instruction = item.trajectory.instruction
        try:
            values = instance_values(f"{instruction}\n{unit.goal}", text.render(), "")
            induced = self.inducer.induce(unit.goal, text, level=self.options.level, calls=calls,
                                          provenance=provenance, succeeded=self.verdict(item), values=values)
        except ContextExceeded as exc:
            self.summary.statuses["context_exceeded"] += 1
            return InductionStep(subtask, self.inducer.prompt_id, "context_exceeded", reason=exc.message)
        return self._store(item, induced, subtask, memory)

    def _store(self, item: ImportedTrajectory, induced: Induced, subtask: int | None,
               memory: SkillMemory) -> InductionStep:
        step = InductionStep(subtask, induced.prompt_id, induced.status, reason=induced.error, reply=induced.reply,
                             prompt_tokens=induced.prompt_tokens, completion_tokens=induced.completion_tokens)
        if induced.skill is not None:
            _tag(induced.skill, item, self.spec)
            added = memory.add(induced.skill)
            step.status, step.skill_id, step.target_id = added.action, added.skill_id, added.target_id
            step.skill_name = induced.skill.name
            step.reason = "; ".join(part for part in (added.reason, induced.error) if part)
        self.summary.statuses[step.status] += 1
        return step

    def _commit(self, position: int, item: ImportedTrajectory, steps: list[InductionStep], calls: CallLog,
                memory: SkillMemory, n_actions: int, seconds: float) -> None:
        folder = self.folder
        relative = folder.trajectory_file(item.trajectory.task_id)
        if item.prompts:
            folder.prompts.add(list(item.prompts.values()))
        logged = folder.log_calls(calls.calls)
        trajectory = item.trajectory.model_copy(update={
            "position": position, "steps": [*item.trajectory.steps, *(s.to_dict() for s in steps)],
            "calls": [*item.trajectory.calls, *logged]})
        folder.write_trajectory(relative, trajectory)
        price = self.spec.price
        cost = round(price.cost(calls.prompt_tokens, calls.completion_tokens), 6) if price is not None else None
        answered = [c for c in calls.calls if c.error is None]
        record = item.record.model_copy(update={
            "run": STATE, "condition": f"{self.options.level}+{self.options.format}", "position": position,
            "trajectory": relative, "steps": n_actions, "subtasks": sum(1 for s in steps if s.status != "skipped"),
            "latency_s": round(seconds, 4), "model_calls": len(answered), "prompt_tokens": calls.prompt_tokens,
            "completion_tokens": calls.completion_tokens, "dependency": calls.dependency,
            "peak_context": calls.peak_context, "context_fitted_calls": calls.fitted_calls,
            "reasoning_tokens": calls.reasoning_tokens, "length_cut_calls": calls.length_cut_calls,
            "cost_usd": cost, "tokens_by_role": _by_role(calls), "memory_size": len(memory),
            "induced": [InducedSkill(subtask_index=s.subtask_index, status=s.status, skill_id=s.skill_id,
                                     skill_name=s.skill_name, target_id=s.target_id, reason=s.reason,
                                     prompt_id=s.prompt_id) for s in steps],
            "retrieved": [], "exposures": [], "routes": [], "coordination": None, "context_account": None})
        folder.commit(TaskRecord.model_validate(record.model_dump()), memory)
        self.summary.calls += len(answered)
        self.summary.prompt_tokens += calls.prompt_tokens
        self.summary.completion_tokens += calls.completion_tokens
        if cost is not None:
            self.summary.cost_usd = round((self.summary.cost_usd or 0.0) + cost, 6)

    def _report(self, position: int, total: int, item: ImportedTrajectory, steps: list[InductionStep],
                calls: CallLog, reason: str | None, notes: list[str]) -> None:
        reward = "?" if item.reward is None else f"{item.reward:g}"
        head = f"[{position + 1}/{total}] {item.trajectory.task_id} ({item.agent}, reward {reward}): "
        if reason is not None:
            self.progress(head + f"skipped: {reason}")
            return
        done = Counter(s.status for s in steps)
        names = [s.skill_name for s in steps if s.status == "added" and s.skill_name]
        price = self.spec.price
        cost = f", ${price.cost(calls.prompt_tokens, calls.completion_tokens):.4f}" if price is not None else ""
        what = ", ".join(f"{n} {status}" for status, n in sorted(done.items()))
        self.progress(head + what + (f" ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})" if names else "")
                      + f"; {calls.prompt_tokens:,}+{calls.completion_tokens:,} tokens{cost}"
                      + "".join(f"\n    note: {note}" for note in notes[:3]))

    def write_library(self, memory: SkillMemory) -> int:
        """Write the memory's skills as the library's skill folders (every earlier one replaced)."""
        skills = list(memory)
        staging = self.folder.root / "library.next"
        if staging.exists():
            remove_tree(staging)
        export_library(skills, staging)
        for entry in list(self.out.iterdir()):
            if not entry.name.startswith("."):
                remove_tree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        for entry in sorted(staging.iterdir()):
            entry.rename(self.out / entry.name)
        staging.rmdir()
        return len(skills)


def induce_library(trajectories: Sequence[ImportedTrajectory], out: str | Path, model: ChatModel, spec: ModelSpec,
                   options: InduceOptions, *, embedder: Embedder, limit: int | None = None,
                   progress: Callable[[str], None] = lambda line: None) -> InduceSummary:
    """Induce skills from ``trajectories`` (in time order, as `skilltransfer.log.atif_files.read_atif` gives them)
    into the library folder ``out`` (see the module docstring).

    Args:
        trajectories: the source trajectories.
        out: the library folder (new, empty, or an earlier ``induce`` output to resume).
        model: the inducer model; ``spec``: its description (recorded; its ``price`` gives the cost).
        options: format, level, source, variant, min_reward, embedder.
        embedder: the memory's embedder (``options.embedder`` built).
        limit: only the first ``limit`` trajectories.
        progress: receives one line per trajectory.

    Raises:
        InputError: a bad ``out``, a resume with other settings, no trajectory.
    """
    out = Path(out).expanduser()
    check_out_folder(out)
    items = list(trajectories)[:limit] if limit is not None else list(trajectories)
    if not items:
        raise InputError("no trajectory to induce from")
    started = time.perf_counter()
    run = _Run(out, model, spec, options, embedder, progress)
    out.mkdir(parents=True, exist_ok=True)
    done, memory = run.start(items)
    run.summary.trajectories = len(items)
    run.summary.resumed = sum(1 for t in items if t.trajectory.task_id in done)
    for position, item in enumerate(items):
        if item.trajectory.task_id not in done:
            run.one(position, len(items), item, memory)
    run.summary.skills = run.write_library(memory)
    run.summary.seconds = time.perf_counter() - started
    return run.summary


__all__ = ["STATE", "InduceOptions", "InduceSummary", "check_out_folder", "induce_library"]

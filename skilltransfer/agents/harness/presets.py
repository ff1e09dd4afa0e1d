"""Which guards a run has: the registry of harness features, the presets, and their resolution.

Every harness feature is a `GuardSpec`: its name, the guard class (``module:Class``, imported when a task needs it;
None for a feature applied outside the agent loop), and its *switch*: the setting that turns it on and off, with the
value each state writes (``stuck_detection: true``; ``stop: []`` is off). A switch left unset (None) takes its value
from the *preset*:

* ``paper``: the paper's agent: no guard, induction from every executed trajectory, no grounding or masking of
  skills, the env's docs as the benchmark gives them (no worked examples, no focused docs);
* ``small-model``: every feature (what the embedded 1.5B model needs);
* ``custom``: the features listed in ``agent.guards``.

A switch that is set wins over the preset (``-c agent.stuck_detection=false`` under ``small-model``: every feature
but that one). A stream resolves once, when its config is validated: ``agent.harness`` unset means ``small-model``
for the embedded ``local`` model and ``paper`` for any other; the resolved switches, preset and guard list are what
``config.json`` records (``agent.harness``, ``agent.guards``). `harness_label` names the result in reports.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from skilltransfer.agents.config import AgentSettings
from skilltransfer.errors import InputError

if TYPE_CHECKING:
    from skilltransfer.agents.config import AgentConfig
    from skilltransfer.agents.harness.base import Harness
    from skilltransfer.agents.prompts import AgentPrompts

HarnessName = Literal["paper", "small-model", "custom"]
HARNESS_NAMES: tuple[str, ...] = ("paper", "small-model", "custom")
_PACKAGE = "skilltransfer.agents.harness"
A = TypeVar("A", bound=AgentSettings)


@dataclass(frozen=True)
class GuardSpec:
    """A harness feature and its switch.

    Attributes:
        name: the feature's name (in ``agent.guards``, the run record and the README's table).
        target: ``module:Class`` of its `Guard`; None when the feature is applied outside the agent loop.
        switch: the setting that turns it on: an ``agent`` field (``where="agent"``), a stream field
            (``"stream"``) or an env constructor argument (``"env"``).
        on: the value its switch takes when the preset has it.
        off: the value that turns it off (any other value is on).
        where: where the switch lives.
        envs: env features: the registered envs whose constructor takes the switch.
    """

    name: str
    target: str | None
    switch: str
    on: Any
    off: Any
    where: Literal["agent", "stream", "env"] = "agent"
    envs: tuple[str, ...] = ()

    def is_on(self, value: Any) -> bool:
        return bool(value != self.off)


def _guard(name: str, target: str, switch: str, on: Any = True, off: Any = False) -> GuardSpec:
    """An agent guard: ``target`` is ``module:Class`` within this package (the module named for the hooks its guards
    serve)."""
    return GuardSpec(name, f"{_PACKAGE}.{target}", switch, on, off)


GUARDS: tuple[GuardSpec, ...] = (
    _guard("stop_sequence", "reply_forms:StopSequence", "stop", ["\nObservation:"], []),
    _guard("example_plan", "worked_example:ExamplePlan", "example_plan"),
    _guard("demonstration", "worked_example:DemonstrationTurns", "demonstration", "turns", "inline"),
    _guard("error_hints", "observations:ErrorHints", "error_hints"),
    _guard("stuck_detection", "observations:StuckDetection", "stuck_detection"),
    _guard("premature_done", "completion:PrematureDone", "refuse_premature_done"),
    _guard("subtask_history", "planning:SubtaskHistory", "subtask_history"),
    _guard("planner_copies", "planning:PlannerCopies", "uncopy_subtasks"),
    _guard("repeated_subtask", "planning:RepeatedSubtask", "refuse_repeated_subtask"),
    _guard("closing_subtask", "completion:ClosingSubtask", "close_unfinished"),
    _guard("done_on_repeat", "reply_forms:DoneOnRepeat", "done_on_repeat"),
    _guard("early_completion", "completion:EarlyCompletion", "refuse_early_completion"),
    _guard("ungrounded_answer", "completion:UngroundedAnswer", "refuse_ungrounded_answer"),
    _guard("unmade_completion", "completion:UnmadeCompletion", "refuse_unmade_completion"),
    _guard("ungrounded_report", "completion:UngroundedReport", "refuse_ungrounded_report"),
    _guard("grounded_summary", "planning:GroundedSummary", "ground_summary"),
    _guard("retrieval_floor", "memory:RetrievalFloor", "retrieval_min_score", 0.2, -1.0),
    _guard("induction_gate", "memory:InductionGate", "induce_without_working_code", False, True),
    _guard("grounded_skills", "memory:GroundedSkills", "ground_skills"),
    GuardSpec("instance_mask", None, "mask_instance_names", True, False, where="stream"),
    GuardSpec("docs_example", None, "docs_example", True, False, where="env", envs=("apps", "office", "datasci")),
    GuardSpec("focused_docs", None, "focused_docs", True, False, where="env", envs=("apps",)),
)
"""Every harness feature, in the order the harness asks them at a hook (a refusal of an earlier one wins)."""
BY_NAME: dict[str, GuardSpec] = {spec.name: spec for spec in GUARDS}
PRESETS: dict[str, tuple[str, ...]] = {"paper": (), "small-model": tuple(BY_NAME)}
"""Preset name -> its features (``custom`` lists its own in ``agent.guards``)."""


def default_preset(model: str | object) -> str:
    """The one default rule, for a stream or an `Agent` that names no preset: ``small-model`` for the embedded model
    (the registry name ``local``, or a model object that is, or wraps, one with ``embedded = True``), ``paper`` for
    any other."""
    if isinstance(model, str):
        return "small-model" if model == "local" else "paper"
    seen: set[int] = set()
    while model is not None and id(model) not in seen:
        if getattr(model, "embedded", False) is True:
            return "small-model"
        seen.add(id(model))
        model = getattr(model, "inner", None)
    return "paper"


def preset_guards(preset: str, listed: Sequence[str] | None) -> tuple[str, ...]:
    """The features a preset has (``custom``: ``listed``, checked).

    Raises:
        InputError: an unknown preset or feature name (the choices listed), or ``custom`` without a list.
    """
    if preset not in HARNESS_NAMES:
        raise InputError(f"unknown harness {preset!r}; choose one of: {', '.join(HARNESS_NAMES)}")
    if preset != "custom":
        return PRESETS[preset]
    if listed is None:
        raise InputError("harness 'custom' needs agent.guards: the list of features to switch on "
                         f"(choose from: {', '.join(BY_NAME)})")
    unknown = [name for name in listed if name not in BY_NAME]
    if unknown:
        raise InputError(f"unknown harness feature(s) {', '.join(map(repr, unknown))} in agent.guards; choose from: "
                         f"{', '.join(BY_NAME)}")
    return tuple(name for name in BY_NAME if name in listed)


def resolve_agent(settings: A, default: str) -> A:
    """``settings`` with every agent switch set (unset ones from the preset: ``settings.harness``, else
    ``default``), ``harness`` set and ``guards`` listing the agent features that are on (in `GUARDS` order).
    Idempotent: a resolved settings object resolves to itself.

    Raises:
        InputError: see `preset_guards`.
    """
    preset = settings.harness or default
    wanted = preset_guards(preset, settings.guards)
    updates: dict[str, Any] = {}
    for spec in GUARDS:
        if spec.where != "agent":
            continue
        value = getattr(settings, spec.switch)
        updates[spec.switch] = (spec.on if spec.name in wanted else spec.off) if value is None else value
    if settings.subtask_example is None:
        updates["subtask_example"] = BY_NAME["demonstration"].is_on(updates["demonstration"])
    on = [spec.name for spec in GUARDS if spec.where == "agent" and spec.is_on(updates[spec.switch])]
    kept = [name for name in (settings.guards or ()) if BY_NAME.get(name) is not None
            and BY_NAME[name].where != "agent" and preset == "custom"]
    return settings.model_copy(update={**updates, "harness": preset, "guards": on + kept})


def is_resolved(settings: AgentSettings) -> bool:
    """Whether ``settings`` are what `resolve_agent` returns: a preset named, every agent switch and
    ``subtask_example`` set, and ``guards`` listing exactly the agent features those switches turn on (followed by
    any stream or env features)."""
    if settings.harness is None or settings.guards is None or settings.subtask_example is None:
        return False
    agent = [spec for spec in GUARDS if spec.where == "agent"]
    if any(getattr(settings, spec.switch) is None for spec in agent):
        return False
    on = [spec.name for spec in agent if spec.is_on(getattr(settings, spec.switch))]
    return [name for name in settings.guards if name not in BY_NAME or BY_NAME[name].where == "agent"] == on


def expected_features(preset: str, env: str) -> list[str]:
    """The features ``preset`` turns on for a stream of ``env`` when no switch is set (in `GUARDS` order)."""
    wanted = PRESETS.get(preset, ())
    return [spec.name for spec in GUARDS if spec.name in wanted and (spec.where != "env" or env in spec.envs)]


def resolve_for(settings: A, model: str | object) -> A:
    """``settings`` unchanged when resolved (a stream's), else resolved with the default preset of ``model``
    (`default_preset`)."""
    return settings if is_resolved(settings) else resolve_agent(settings, default_preset(model))


def stream_features(preset: str, listed: Sequence[str] | None, env: str, env_args: Mapping[str, Any],
                    mask: bool | None) -> tuple[dict[str, Any], bool, list[str]]:
    """The stream-side features of a preset for one env: the env arguments to add (only those the env's
    constructor takes and the spec did not set), the instance-mask switch, and the names of those that are on."""
    wanted = preset_guards(preset, listed)
    args: dict[str, Any] = {}
    on: list[str] = []
    masked = BY_NAME["instance_mask"].is_on(mask) if mask is not None else "instance_mask" in wanted
    if masked:
        on.append("instance_mask")
    for spec in GUARDS:
        if spec.where != "env" or env not in spec.envs:
            continue
        if spec.switch not in env_args and spec.name not in wanted:
            args[spec.switch] = spec.off
        if spec.is_on(env_args.get(spec.switch, args.get(spec.switch, spec.on))):
            on.append(spec.name)
    return args, masked, on


def harness_label(preset: str, guards: Iterable[str], expected: Iterable[str]) -> str:
    """The harness as reports name it: the preset, followed by ``-name`` for each of its features that is off and
    ``+name`` for each other feature that is on (``small-model-stuck_detection``)."""
    actual, wanted = list(guards), list(expected)
    less = "".join(f"-{name}" for name in wanted if name not in actual)
    more = "".join(f"+{name}" for name in actual if name not in wanted)
    return f"{preset}{less}{more}"


def make_harness(config: AgentConfig, prompts: AgentPrompts) -> Harness:
    """One task's `Harness`: a fresh instance of each agent guard that is on.

    Raises:
        ValueError: ``config`` is not resolved (`resolve_agent` / `resolve_for` first).
    """
    from skilltransfer.agents.harness.base import Harness
    from skilltransfer.util.imports import load_target

    if not is_resolved(config):
        raise ValueError("make_harness needs resolved agent settings (resolve_agent or resolve_for first)")
    guards = []
    for name in config.guards or ():
        spec = BY_NAME.get(name)
        if spec is None or spec.target is None:
            continue
        cls = load_target(spec.target, what="harness guard")
        guards.append(cls(config, prompts))
    harness = Harness(guards)
    for guard in guards:
        guard.peers = harness.guards
    return harness

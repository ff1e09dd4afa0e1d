"""One stream's settings (`StreamConfig`): what ``run`` runs, what one point of a ``grid`` is, what ``config.json``
records and what ``show``, ``report``, the grid's status and the resume check read back.

**Axes.** A field annotated with `Axis` is an axis: a grid spec may list several values under its plural key
(``conditions: [task, task+text]``) or give one under its singular key (``condition: task``, as a ``run`` config or
``-c condition=task`` does), and every combination of the listed values is one stream. The run name of a grid
stream is ``[<phase>/]<env label>/<model label>/<condition>`` plus a suffix per other axis whose value is not the
default or that lists several values (``-seed1``, ``-no_demo``, ``-top``). The report groups runs by env label,
model label and `StreamConfig.condition_label` (the condition tagged with every other axis's non-default value,
``task+text[no_demo]``), and averages over ``report="replicate"`` axes (order seeds). Adding an axis is one
annotated field here; the runner then has to use its value.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.fields import FieldInfo

from skilltransfer.agents.config import (
    AgentConfig,
    AgentLevel,
    AgentSettings,
    LibraryExposure,
    LibraryOrganization,
    SkillExec,
)
from skilltransfer.agents.harness import (
    BY_NAME,
    default_preset,
    expected_features,
    harness_label,
    is_resolved,
    resolve_agent,
    stream_features,
)
from skilltransfer.coordination.config import CoordinationConfig
from skilltransfer.errors import InputError
from skilltransfer.induction.inducer import InductionConfig, PromptVariant
from skilltransfer.lens.evolve import EvolveConfig, WriterConfig
from skilltransfer.lens.power import never_commits
from skilltransfer.lens.retriever import LensConfig
from skilltransfer.llm import default_model_name
from skilltransfer.llm.config import ModelConfig
from skilltransfer.log import MEMORY, PLANS
from skilltransfer.memory.near_miss import NearMissConfig
from skilltransfer.memory.package import DEFAULT_RESOURCE_BYTES
from skilltransfer.memory.ranking import RetrievalMode, RetrievalText
from skilltransfer.memory.store import MemoryConfig
from skilltransfer.skill import MAX_RESOURCES_BYTES, SkillFormat
from skilltransfer.util.urls import without_credentials

Condition = Literal["task", "task+text", "task+code", "subtask", "subtask+text", "subtask+code"]
CONDITIONS: dict[str, tuple[AgentLevel, SkillFormat | None]] = {
    "task": ("task", None), "task+text": ("task", "text"), "task+code": ("task", "code"),
    "subtask": ("subtask", None), "subtask+text": ("subtask", "text"), "subtask+code": ("subtask", "code"),
}
"""Condition name -> (induction level, skill format; None = no memory), seed §4."""
assert tuple(CONDITIONS) == get_args(Condition)
LibraryFilter = Literal["top", "bottom"]
InductionSource = Literal["all", "success", "lessons"]
"""What induction learns from (`StreamConfig.induction_source`)."""
Coordination = Literal["none", "nl-sop", "prompt-graph", "metaskill"]
"""How a task is carried out: ``none`` (the agent of the condition's level) or a coordination interface over the
task's frozen plan (`skilltransfer.coordination.run_plan`)."""
LibraryUse = Literal["instead", "beside", "none"]
"""How a stream uses its ``library`` (`StreamConfig.library_use`): ``instead`` of a growing memory (induction off),
``beside`` the agent's own growing memory (induction on), or ``none`` (the library is not read)."""
Reuse = Literal["flat", "lens", "rewrite-all", "no-walk"]
"""How retrieved skills enter the agent's context: ``flat`` (the top-k skills whole) or routed over the skill graph
(`skilltransfer.lens.retriever`): ``lens`` (the verifier's ACCEPT / DECOMPOSE / REWRITE / SKIP), ``rewrite-all``
and ``no-walk`` (the study's ablations)."""
OFFICEBENCH = "officebench"
ORGANIZATIONS = "organizations"
"""An organise stream's folder of organisations in its run folder, one sub-folder per kind."""


def parse_condition(name: str) -> tuple[AgentLevel, SkillFormat | None]:
    """(level, format) of a named condition; unknown names raise an ``InputError`` listing the choices."""
    key = name.strip().lower()
    if key not in CONDITIONS:
        raise InputError(f"unknown condition {name!r}; choose one of: {', '.join(CONDITIONS)}")
    return CONDITIONS[key]


@dataclass(frozen=True)
class Axis:
    """Marks a `StreamConfig` field as an axis (see the module docstring).

    Attributes:
        plural: the grid spec's key listing several values (``conditions``).
        run_tag: the run-name suffix for a value (``"seed{value}"``); None: not a suffix (condition, env, model are
            the run name's own parts).
        report: how the report treats it: ``"tag"`` (``tag`` is added to the condition label when the value is not
            the default), ``"replicate"`` (runs differing only here are averaged), ``"part"`` (a row key of its
            own: env, model, condition).
        tag: the condition-label tag, formatted with ``name`` and ``value``.
        tag_if: tag only the streams this holds for (e.g. the induction prompt only where induction runs).
        run_tag_if: suffix the run name only for the streams this holds for (None: every stream).
        labelled: a grid lists its values as ``label -> entry`` (envs, models).
        required: a spec must give it.
    """

    plural: str
    run_tag: str | None = "{value}"
    report: Literal["tag", "replicate", "part"] = "tag"
    tag: str = "[{name}={value}]"
    tag_if: Callable[[StreamConfig], bool] | None = None
    run_tag_if: Callable[[StreamConfig], bool] | None = None
    labelled: bool = False
    required: bool = False


def axis_of(field: FieldInfo) -> Axis | None:
    """The `Axis` marking of a field, if any."""
    return next((m for m in field.metadata if isinstance(m, Axis)), None)


# --------------------------------------------------------------------------------------------- records
class EnvSpec(BaseModel):
    """The env of a stream: which env, built with what, and which of its tasks."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    env: str | None = None
    """Registry name (apps, office, datasci, scienceworld), ``officebench[:<tasks folder>]`` or ``module:Class`` (a
    plug-in env class); None: the label."""
    label: str | None = None
    """The env's name in run names and reports (a grid's ``envs`` key); None: derived from ``env``."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments of the env's constructor, always passed (checked against its parameters and types)."""
    seed: int | None = None
    """Generation seed, passed when the constructor takes ``seed`` (not to real OfficeBench); None: the env's."""
    sandboxed: bool | None = None
    """Run agent code in the sandbox, passed when the constructor takes ``sandboxed``; None: the env's default."""
    split: str | None = None
    """Only the tasks of this split (dev/test); None: all."""
    stream: str | None = None
    """A curated stream of the env (``env.streams``, e.g. apps ``starter``) instead of all its tasks."""
    task_limit: int | None = Field(default=None, ge=1)
    """Overrides ``limits.task_limit`` for this env (in a grid's ``envs``)."""

    @field_validator("args")
    @classmethod
    def _no_workdir(cls, args: dict[str, Any]) -> dict[str, Any]:
        if "workdir" in args:
            raise ValueError("workdir is set by the harness (one work folder per stream; run: --workdir)")
        return args

    @property
    def name(self) -> str:
        """The env spec: ``env``, else the label."""
        return self.env or self.label or ""

    @property
    def display_label(self) -> str:
        """``label``, else derived from the spec: ``officebench`` for ``officebench:<path>``, ``Class`` for
        ``module:Class``, the registry name otherwise."""
        if self.label:
            return self.label
        name = self.name
        if name == OFFICEBENCH or name.startswith(OFFICEBENCH + ":"):
            return OFFICEBENCH
        return name.rpartition(":")[2] if ":" in name else name or "env"

    def describe(self) -> str:
        """One line for ``show``: the spec and what it was built with."""
        extra = {k: v for k, v in {"seed": self.seed, "split": self.split, "stream": self.stream}.items()
                 if v is not None}
        extra.update(self.args)
        label = f" [{self.label}]" if self.label and self.label != self.name else ""
        return f"{self.name}{label}" + (f" {json.dumps(extra, sort_keys=True, default=str)}" if extra else "")


RECORDED_MODEL_FIELDS = ("label", "name", "model", "params", "extra_body", "context_window")
"""What a run records of its model: what shapes the answers (not the endpoint, key, timeouts, retries, cache)."""


GENERIC_MODEL_LABEL = "default"
"""The model label of the shipped specs (``models: {default: {}}``): it names run folders, not the model."""


class ModelSpec(ModelConfig):
    """The model of a stream: a `ModelConfig` and its label."""

    label: str | None = None
    """The model's name in run names and reports (a grid's ``models`` key); None: the model id, else the name."""

    def resolved_name(self) -> str:
        """The registry name ``make_model`` uses ("openai" when an endpoint is configured, else "local")."""
        return self.name or default_model_name(self)

    @property
    def display_label(self) -> str:
        """The label that names run folders: ``label``, else the model id, else the registry name."""
        return self.label or self.resolved_model() or self.resolved_name()

    @property
    def report_label(self) -> str:
        """The model's name in tables (``report``'s Table 2, ``export``): `display_label`, except that the generic
        `GENERIC_MODEL_LABEL` (the shipped specs' ``models: {default: {}}``) gives way to the recorded model id,
        else the registry name (``-c models.default.model=qwen3`` is "qwen3" in Table 2, its folder still
        ``.../default/...``)."""
        if self.label == GENERIC_MODEL_LABEL:
            return self.model or self.name or "default"
        return self.display_label

    def effective_params(self) -> dict[str, Any]:
        """The sampling params calls are sent with: the config's, over the embedded model's own defaults
        (`skilltransfer.llm.local.with_local_defaults`) when the model is ``local``."""
        if self.resolved_name() == "local":
            from skilltransfer.llm.local import with_local_defaults

            return with_local_defaults(self.params)
        return dict(self.params)

    def recorded(self) -> ModelSpec:
        """What the run log records: `RECORDED_MODEL_FIELDS`, the name and model id resolved (from env vars too), so
        a run may resume against another endpoint serving the same model."""
        return ModelSpec(label=self.label, name=self.resolved_name(), model=self.resolved_model(),
                         params=self.effective_params(), extra_body=self.extra_body,
                         context_window=self.context_window)

    def describe(self) -> str:
        """One line for ``show``: ``name[:model id]`` and the settings that shape answers."""
        name = self.resolved_name()
        head = f"{name}:{self.model}" if self.model else name
        settings = [f"{k}={v}" for k, v in sorted(self.effective_params().items())]
        settings += [f"{k}={json.dumps(v)}" for k, v in sorted(self.extra_body.items())]
        if self.context_window is not None:
            settings.append(f"context_window={self.context_window}")
        label = f" [{self.label}]" if self.label and self.label != self.model else ""
        return " ".join([head + label, *settings])


class Limits(BaseModel):
    """Run-length limits."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    task_limit: int | None = Field(default=None, ge=1)
    """Run only the first N tasks of the (ordered) stream; None: all."""
    step_limit: int | None = Field(default=None, ge=1)
    """Executor step budget per task (overrides ``agent.step_limit``, default 50)."""
    subtask_limit: int | None = Field(default=None, ge=1)
    """Most subtasks per task at subtask level (overrides ``agent.subtask_limit``, default 15)."""


class EvolutionSettings(EvolveConfig):
    """Registry evolution as a stream (`skilltransfer.runner.evolve.run_evolution_stream`): the stream's tasks
    are cut, in order, into a test, a development and a validation split (a task limit caps each split); the rest are
    `EvolveConfig`'s settings (rounds, lambda, the commit test, validation passes)."""

    dev: int = Field(default=4, ge=1)
    """Development tasks (gap reports come from their failures)."""
    val: int = Field(default=10, ge=1)
    """Validation tasks (incumbent and candidates, paired)."""
    test: int = Field(default=4, ge=1)
    """Test tasks, the stream's first: run once at the end for the initial and the final pair (the run folder's
    records are the final pair's)."""
    writer: WriterConfig = Field(default_factory=WriterConfig)
    """The writer's candidates per round and budgets."""

    @model_validator(mode="after")
    def _can_commit(self) -> EvolutionSettings:
        reason = never_commits(self.val, self.writer.candidates, self.evolve_config(), where="this evolution")
        if reason is not None:
            raise ValueError(reason)
        return self

    def sizes(self, cap: int | None) -> tuple[int, int, int]:
        """(dev, val, test) sizes, each capped at ``cap`` (a task limit: a smoke test's cap may leave too few
        validation tasks to ever commit; `grid --dry-run` says so)."""
        return (self.dev, self.val, self.test) if cap is None else (min(self.dev, cap), min(self.val, cap),
                                                                   min(self.test, cap))

    def evolve_config(self) -> EvolveConfig:
        """The `EvolveConfig` part."""
        return EvolveConfig.model_validate(self.model_dump(include=set(EvolveConfig.model_fields)))


def _induces(config: StreamConfig) -> bool:
    return config.induction_config() is not None


def _has_memory(config: StreamConfig) -> bool:
    return config.has_memory


def _reads_library(config: StreamConfig) -> bool:
    return config.library is not None


# --------------------------------------------------------------------------------------------- the stream
class StreamConfig(BaseModel):
    """One stream: where it logs, its env, model and condition, and every setting of its agent and memory."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    run: str = "run"
    """Run name: the log folder is ``<runs_dir>/<run>``; rerunning with the same name resumes."""
    runs_dir: str = "runs"
    """Parent folder of run folders."""
    env: Annotated[EnvSpec, Axis("envs", run_tag=None, report="part", labelled=True, required=True)] = Field(
        default_factory=EnvSpec)
    """The env (the runner is given the env object; this records how it was built)."""
    model: Annotated[ModelSpec, Axis("models", run_tag=None, report="part", labelled=True)] = Field(
        default_factory=ModelSpec)
    """The model: endpoint, model id, sampling params, ... (config.json records what shapes answers)."""
    condition: Annotated[Condition, Axis("conditions", run_tag=None, report="part", required=True)] = "task"
    """task, task+text, task+code, subtask, subtask+text or subtask+code (level x skill format)."""
    order_seed: Annotated[int, Axis("order_seeds", run_tag="seed{value}", report="replicate")] = 0
    """Stream order (``stream_order`` seed; 0 is the canonical order)."""
    induction_variant: Annotated[PromptVariant, Axis("induction_variants", tag="[{value}]", tag_if=_induces)] = "full"
    """Induction prompt variant: full, no_demo or no_rules."""
    library_filter: Annotated[LibraryFilter | None, Axis("library_filters", report="part")] = None
    """Keep only the top or bottom half of ``library`` by utility (``skilltransfer.metrics.score_library`` against
    this stream's task instructions with the run's embedder): skills ranked by utility (ties by id), the top half is
    the first ceil(n/2) (so it holds the median skill when n is odd), the bottom half the rest; ``config.json``
    records each skill's utility and the half kept (``library_utility``)."""
    library_use: Annotated[LibraryUse, Axis("library_uses", report="part", run_tag_if=_reads_library)] = "instead"
    """How the stream uses ``library``: ``instead`` of a growing memory (the library frozen, induction off: the
    transfer studies' set-up), ``beside`` the agent's own growing memory (the library a frozen base, never merged
    into, pruned or saved with the memory; induction writes to the agent's own memory; retrieval ranks both together
    and takes the top-k; masking draws over the library's skills only; `skilltransfer.memory.joint`), or ``none``
    (the stream reads no library: ``library`` is dropped, so one spec can name the library once for arms with and
    without it). The condition label is ``+library`` / ``+library+memory``; the run name gets ``-instead`` /
    ``-beside`` when the value is not the default or a phase lists several (only for streams with a library)."""
    coordination: Annotated[Coordination, Axis("coordinations", tag="[{value}]")] = "none"
    """none (the agent), or nl-sop, prompt-graph, metaskill: each task is carried out from its frozen plan (written
    once by the plan writer, see ``plans``) under that coordination interface instead of by the agent."""
    skill_exec: Annotated[SkillExec, Axis("skill_execs", tag="[{value}]", tag_if=_has_memory)] = "inline"
    """How retrieved skills are executed: inline (in full in the context), agent-skill (``load_skill``), subagent
    (``run_skill``: a fresh context per call) or hybrid (groups opened inline, leaf skills as subagents)."""
    library_organization: Annotated[LibraryOrganization, Axis("library_organizations", tag="[{value}]",
                                                              tag_if=_has_memory)] = "flat"
    """How retrieved skills are shown: flat, task-tree (grouped by source task, no LLM), tree or graph (the frozen
    ``organization``; without one, and for skills it does not hold, grouped by source task)."""
    library_exposure: Annotated[LibraryExposure, Axis("library_exposures", tag="[{value}]",
                                                      tag_if=_has_memory)] = "retrieved"
    """retrieved (the organisation over the top-k retrieved skills) or whole (the whole library, organised and
    navigable with ``open_node``; the top-k retrieved skills are only the first view; the study's set-up)."""
    library_scope: Annotated[Literal["all", "own-task"], Axis("library_scopes", tag="[{value}]",
                                                              tag_if=_has_memory)] = "all"
    """Which skills of a frozen library a task sees: all (default), or own-task, only those induced from that very
    task (`Provenance.source_task_id`: the subagent study's relation, 3-5 packages built from the task's own
    successful runs and executed on it; its phase reruns the source tasks, ``library_from.same_tasks: true``)."""
    distractors: Annotated[int, Axis("distractor_counts", run_tag="d{value}", tag="[distractors={value}]",
                                     tag_if=_has_memory)] = Field(default=0, ge=0)
    """Unrelated skills added to the frozen library (`skilltransfer.memory.distractors`; the study's Fig. 3): with
    ``whole`` exposure they lengthen what the agent is shown; retrieval may also return them."""
    library_size: Annotated[int | None, Axis("library_sizes", run_tag="size{value}", tag="[size={value}]")] = Field(
        default=None, ge=1)
    """The library-size study (`skilltransfer.memory.near_miss`, docs/selection.md): each task chooses from a frozen
    library of this many skills: its right skills and near misses of them drawn from the library's other skills and
    ``near_miss.corpus``, nested across sizes. None: every task sees the whole library."""
    near_miss: NearMissConfig = Field(default_factory=NearMissConfig)
    """Where ``library_size``'s near misses come from: a corpus of skills, the cosine band, the seed."""
    organize: list[Literal["tree", "graph"]] = Field(default_factory=list)
    """An organise stream: build these LLM organisations of the frozen library with the stream's model instead of
    running tasks (`skilltransfer.runner.organize`; a later phase's ``organization_from`` reads them)."""
    organize_height: int = Field(default=2, ge=2, le=3)
    """Levels from the top of an organise stream's tree/graph to the skills: 2 (routing nodes over skills) or 3 (a
    level of routing nodes over those; the study builds both, `OrganizeConfig.height`)."""
    organization: str | None = None
    """A folder written by ``skilltransfer library organize`` (tree/graph) over the frozen ``library``: its routing
    nodes group the retrieved skills it holds (used by tree/graph streams; flat/task-tree streams ignore it)."""
    induction_source: Annotated[InductionSource, Axis("induction_sources", tag="[{value}]", tag_if=_induces)] = "all"
    """What induction learns from: ``all`` (every trajectory with the variant's prompt, as the paper: failures
    induced naively), ``success`` (only tasks that succeeded, as ``only_successful``) or ``lessons`` (successes as
    usual; a failed task's trajectory with the lessons prompt: what went wrong and how to avoid it; text conditions
    only). ``success`` and ``lessons`` wait for each task's verdict."""
    only_successful: bool = False
    """Induce only from tasks that succeeded (``InductionConfig.only_successful``; induction then waits for each
    task's verdict)."""
    skills_per_task: tuple[int, int] | None = (3, 5)
    """(least, most) contract skills the ``contract`` induction variant writes per task at subtask level, in one call
    after the verdict from the whole task's trajectory (the study's 3-5 packages per task; `Inducer.induce_set`);
    None: one contract skill per subtask. Ignored at task level and by the other variants."""
    mask_instance_names: bool | None = None
    """Harness ``instance_mask``: mask the goal's multi-word proper names as ``<name>``, its paths as ``<path>`` and
    the task's instance values as ``<value>`` in induced skills (``InductionConfig.mask_instance_names``;
    ``-c mask_instance_names=false`` keeps what the model wrote). None: the preset's (``agent.harness``)."""
    plans: str | None = None
    """The plan folder of a coordinated stream: one frozen plan file per task, written when missing and replayed when
    present, so streams given the same folder (a grid's three interfaces) run the same plans. A relative path is
    resolved against ``runs_dir`` (a grid's output folder); None: ``<run folder>/plans``."""
    composition: CoordinationConfig = Field(default_factory=CoordinationConfig)
    """Coordination settings (metaskill's K ``max_parallel``, node step limit, retries, ...); the whole task's step
    budget (``step_limit``) is the stream's executor step limit, whatever is set here."""
    reuse: Annotated[Reuse, Axis("reuses", tag="[{value}]")] = "flat"
    """flat (the top-k skills whole, as before), or lens, rewrite-all, no-walk: the skills section is routed over a
    skill graph kept in step with the memory (``lens`` settings; ``skill_graph``)."""
    mask_rate: Annotated[float, Axis("mask_rates", run_tag="mask{value}", tag="[mask={value}]", tag_if=_has_memory)] = (
        Field(default=0.0, ge=0.0, lt=1.0))
    """Randomised masking (`skilltransfer.memory.masking`): each retrieved candidate is withheld from the prompt with
    this probability (one seeded draw per task and skill, logged with its propensity in the retrieval step), so
    ``report``'s ``skill_effects`` can estimate each skill's causal effect. 0: every retrieved skill is shown."""
    mask_seed: int = 0
    """The masking draws' seed (with the task and skill ids)."""
    retrieval: Annotated[RetrievalMode, Axis("retrievals", tag="[{value}]", tag_if=_has_memory)] = "dense"
    """How the top-k skills are chosen for a (sub)task (`skilltransfer.memory.ranking`): dense (cosine of the
    embeddings, FAISS: the paper's), bm25 (lexical, ``bm25s``), hybrid (reciprocal rank fusion of the two) or
    hierarchical (category -> skill over ``organization``, else the library's folders, else embedding clusters).
    Each hit keeps its cosine as its score. Flat reuse only (lens reuse routes the skill graph)."""
    retrieval_text: Annotated[RetrievalText, Axis("retrieval_texts", tag="[{value}]", tag_if=_has_memory)] = (
        "description")
    """What of a skill retrieval indexes: its description (the paper's) or description + body (every mode; the same
    switch as ``memory.index_body``, which it sets)."""
    lens: LensConfig = Field(default_factory=LensConfig)
    """Lens reuse settings: routing (token budget, walk, ...) and decomposition of skills into the graph."""
    skill_graph: str | None = None
    """A prebuilt skill graph folder (``skilltransfer library decompose`` or ``evolve``) for lens reuse of a frozen
    ``library``; None: the graph is built from the memory as it grows (lazily for a library). A resumed run reloads
    its own graph (``memory/graph``)."""
    library_snapshot: Annotated[int | None, Axis("library_snapshots", run_tag="snap{value}",
                                                 tag="[snapshot={value}]")] = Field(default=None, ge=0)
    """Use ``library`` (a run's memory or run folder) as it was after the first K tasks of that run (its
    ``snapshots.jsonl``; 0: empty) instead of its final memory (`skilltransfer.memory.snapshots`; a probe phase
    lists several, docs/forgetting.md)."""
    task_positions: list[int] | None = None
    """Run only these tasks of the stream: 0-based positions in the stream as ordered and limited (``run
    --only-tasks`` takes 1-based numbers); records number them 0.. in the order given. None: every task."""
    library: str | None = None
    """A frozen library to retrieve from: another run's memory folder, a SKILL.md folder or a .jsonl file; instead of
    a growing memory (induction off) or beside it (``library_use``). Near-duplicates are kept as they are; usage
    counts start from zero."""
    library_resource_bytes: int = Field(default=DEFAULT_RESOURCE_BYTES, ge=0, le=MAX_RESOURCES_BYTES)
    """The most bytes of text loaded for the agent from each skill package of a SKILL.md ``library`` (the files its
    SKILL.md names first; `skilltransfer.memory.package`); the rest stays in the package, and ``run``/``grid`` say
    per skill at start what was left out. At most (and by default) 1 MiB."""
    library_front_matter: Literal["strict", "lenient"] = "strict"
    """How a SKILL.md ``library``'s front matter is read: ``strict`` (the Agent Skills format; a file it refuses is
    named and left out) or ``lenient`` (also model-written files without ``---`` fences, with a line of text before
    them, or with values YAML refuses; each such skill records how in ``extra.lenient_read``;
    `skilltransfer.memory.library.parse_skill_md`)."""
    embedder: str = "minilm"
    """Retrieval embedder: minilm, hash:DIM (test double) or a sentence-transformers folder."""
    embedder_cache: bool = False
    """Cache embeddings on disk (``make_embedder(cache=True)``; ``run`` turns it on for model embedders)."""
    verifier_model: ModelSpec | None = None
    """The verifier's model under lens reuse (its ACCEPT / DECOMPOSE / REWRITE / SKIP calls; the study uses a separate
    verifier model); None: the stream's model."""
    evolution: EvolutionSettings | None = None
    """Run registry evolution of the frozen library's skill graph instead of a plain stream (needs a library and lens
    reuse; see `EvolutionSettings`): the run folder holds the final pair on the test split and ``evolution/``."""
    limits: Limits = Field(default_factory=Limits)
    """Task, step and subtask limits."""
    agent: AgentSettings = Field(default_factory=AgentSettings)
    """Agent settings (top_k, retrieval_query, ...); the condition gives the level."""
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    """Skill memory settings (dedup threshold, code validation, ...)."""

    @field_validator("env", mode="before")
    @classmethod
    def _env_short_form(cls, value: Any) -> Any:
        return {"env": value} if isinstance(value, str) else value  # env: apps

    @field_validator("condition", mode="before")
    @classmethod
    def _condition_spelling(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _resolve_harness(self) -> StreamConfig:
        """Resolve the harness once (`skilltransfer.agents.harness.presets`): the agent's switches, the instance mask
        and the env's docs arguments from the preset (``agent.harness``, else the model's default); the resolved
        ``agent.guards`` lists every feature that is on. Settings resolved before (a recorded config, a config
        validated again) are left as they are: the preset is resolved once."""
        if is_resolved(self.agent) and self.mask_instance_names is not None:
            return self
        try:
            agent = resolve_agent(self.agent, default_preset(self.model.resolved_name()))
            args, mask, features = stream_features(agent.harness or "paper", self.agent.guards, self.env.name,
                                                   self.env.args, self.mask_instance_names)
        except InputError as exc:
            raise ValueError(str(exc)) from None
        agent = agent.model_copy(update={"guards": [*(g for g in agent.guards or () if BY_NAME[g].where == "agent"),
                                                    *features]})
        self.__dict__.update(agent=agent, mask_instance_names=mask,
                             env=self.env.model_copy(update={"args": {**self.env.args, **args}}) if args else self.env)
        if agent.harness == "paper":  # no hidden completion caps (see docs/models.md)
            self.__dict__["lens"] = self.lens.uncapped()
            if "max_tokens" not in self.composition.model_fields_set:
                self.__dict__["composition"] = self.composition.model_copy(update={"max_tokens": None})
        return self

    def harness_label(self) -> str:
        """The harness as reports name it: its preset, with ``-feature`` for each of the preset's features that is
        off and ``+feature`` for each other one that is on (`skilltransfer.agents.harness.harness_label`)."""
        preset = self.agent.harness or "paper"
        if preset == "custom":
            return "custom:" + "+".join(self.agent.guards or ()) if self.agent.guards else "custom"
        return harness_label(preset, self.agent.guards or (), expected_features(preset, self.env.name))

    @property
    def library_lenient(self) -> bool:
        """Whether the library's SKILL.md files are read leniently (``library_front_matter``)."""
        return self.library_front_matter == "lenient"

    @model_validator(mode="after")
    def _library_use(self) -> StreamConfig:
        """``none`` drops the library; ``beside`` needs a library, a memory condition and the plain flat inline
        reading of skills (one retrieval, the library's skills and the agent's own in one ranking)."""
        if self.library_use == "none":
            self.__dict__["library"] = None
        if self.library_use != "beside":
            return self
        if self.library is None:
            raise ValueError("library_use beside puts a library beside the agent's own memory: give library")
        if self.skill_format is None:
            raise ValueError(f"library_use beside grows the agent's own memory beside the library: condition "
                             f"{self.condition!r} induces nothing; use a memory condition (task+text, subtask+code, "
                             "...)")
        plain = (self.reuse, self.skill_exec, self.library_organization, self.library_exposure, self.library_scope,
                 self.coordination) == ("flat", "inline", "flat", "retrieved", "all", "none")
        if not plain or self.evolution is not None or self.organize or self.organization is not None:
            raise ValueError("library_use beside reads skills flat and inline (reuse flat, skill_exec inline, "
                             "library_organization flat, library_exposure retrieved, library_scope all, coordination "
                             "none; no evolution, organize or organization)")
        return self

    @model_validator(mode="after")
    def _filter_needs_library(self) -> StreamConfig:
        if self.library_filter is not None and self.library is None:
            raise ValueError("library_filter needs a library")
        if self.library_snapshot is not None and self.library is None:
            raise ValueError("library_snapshot needs a library (a run's memory or run folder)")
        return self

    @model_validator(mode="after")
    def _lens_needs_memory(self) -> StreamConfig:
        if self.reuse != "flat" and not self.has_memory:
            raise ValueError(f"reuse {self.reuse!r} needs a skill memory (a memory condition or a library)")
        if self.skill_graph is not None and (self.reuse == "flat" or self.library is None):
            raise ValueError("skill_graph is read by lens reuse of a frozen library only (set reuse: lens, "
                             "rewrite-all or no-walk, and library)")
        if self.reuse != "flat" and (self.skill_exec, self.library_organization, self.library_exposure) != (
                "inline", "flat", "retrieved"):
            raise ValueError(f"reuse {self.reuse!r} routes skill units into the context inline; it does not combine "
                             "with skill_exec or library_organization (keep them inline and flat)")
        return self

    @model_validator(mode="after")
    def _lessons_are_text(self) -> StreamConfig:
        if self.induction_source == "lessons" and (self.skill_format == "code" or self.only_successful
                                                   or self.induction_variant == "contract"):
            raise ValueError("induction_source lessons writes text lessons from failed tasks: use a text condition "
                             "(task+text, subtask+text), not the contract variant, and leave only_successful off")
        return self

    @model_validator(mode="after")
    def _retrieval(self) -> StreamConfig:
        """``retrieval_text`` and ``memory.index_body`` are one switch (either sets the other); a retrieval mode other
        than dense needs flat reuse."""
        if self.memory.index_body and self.retrieval_text == "description":
            self.__dict__["retrieval_text"] = "description+body"
        elif self.retrieval_text == "description+body" and not self.memory.index_body:
            self.__dict__["memory"] = self.memory.model_copy(update={"index_body": True})
        if self.retrieval != "dense" and self.reuse != "flat":
            raise ValueError(f"retrieval {self.retrieval!r} chooses the top-k skills of flat reuse; reuse "
                             f"{self.reuse!r} routes the skill graph instead (keep retrieval dense)")
        return self

    @model_validator(mode="after")
    def _masking_needs_flat_retrieval(self) -> StreamConfig:
        if self.mask_rate > 0 and (not self.has_memory or self.reuse != "flat" or self.library_exposure == "whole"):
            raise ValueError("mask_rate withholds retrieved skills: it needs a skill memory (a memory condition or a "
                             "library), flat reuse and library_exposure: retrieved")
        return self

    @model_validator(mode="after")
    def _evolution_routes(self) -> StreamConfig:
        if self.evolution is not None and (self.reuse == "flat" or self.coordination != "none"):
            raise ValueError("evolution evolves the skill graph that lens reuse routes: set reuse (lens, rewrite-all "
                             "or no-walk) and keep coordination none")
        return self

    @model_validator(mode="after")
    def _room_to_finish(self) -> StreamConfig:
        steps, finish = self.agent_config().step_limit, self.composition.finish_step_limit
        if self.coordination == "metaskill" and steps <= finish:
            raise ValueError(f"metaskill needs an executor step limit above composition.finish_step_limit ({finish}), "
                             f"got {steps}")
        return self

    @property
    def path(self) -> Path:
        return Path(self.runs_dir) / self.run

    @property
    def plan_dir(self) -> Path:
        """The plan folder of a coordinated stream (see ``plans``)."""
        if self.plans is None:
            return self.path / PLANS
        return Path(self.runs_dir) / self.plans

    def check_skill_exec(self) -> None:
        """Refuse settings of the skill-execution axes that would be ignored (checked when the stream starts, once a
        grid's ``library_from`` is resolved).

        Raises:
            InputError: ``organization`` without a frozen library; a non-default mode or organisation on a
                coordinated stream.
        """
        if self.organization is not None and self.library is None:
            raise InputError("organization needs a frozen library (library / --library)")
        if self.distractors and self.library is None:
            raise InputError("distractors are added to a frozen library (library / --library)")
        if self.organize and self.library is None:
            raise InputError("organize builds organisations of a frozen library (library / library_from)")
        if self.library_scope == "own-task" and (self.library is None or self.reuse != "flat" or self.distractors
                                                 or self.library_organization in ("tree", "graph")):
            raise InputError("library_scope own-task shows each task the skills induced from it: it needs a frozen "
                             "library, flat reuse, no distractors and a flat or task-tree organisation")
        if self.library_size is not None and (self.library is None or self.library_use != "instead"
                                              or self.reuse != "flat" or self.distractors
                                              or self.library_scope != "all" or self.library_snapshot is not None):
            raise InputError("library_size grows a frozen library per task: it needs a library used instead of a "
                             "memory (library_use instead), flat reuse, no distractors, library_scope all and no "
                             "library_snapshot")
        if self.coordination != "none" and (self.skill_exec, self.library_organization) != ("inline", "flat"):
            raise InputError("skill_exec and library_organization apply to the agent (coordination none), not to "
                             f"coordination {self.coordination!r}")

    def coordination_config(self) -> CoordinationConfig:
        """``composition`` with the stream's executor step limit as the task's budget."""
        return self.composition.model_copy(update={"step_limit": self.agent_config().step_limit})

    @property
    def level(self) -> AgentLevel:
        return CONDITIONS[self.condition][0]

    @property
    def skill_format(self) -> SkillFormat | None:
        return CONDITIONS[self.condition][1]

    @property
    def has_memory(self) -> bool:
        """Whether the stream has a skill memory (a memory condition or a frozen library): it needs an embedder."""
        return self.skill_format is not None or self.library is not None

    @property
    def task_limit(self) -> int | None:
        """The env's task limit, else ``limits.task_limit``."""
        return self.env.task_limit or self.limits.task_limit

    @property
    def stream_length(self) -> int | None:
        """How many tasks the stream lists: ``task_limit``, or an evolution stream's three splits (each capped by
        it)."""
        if self.evolution is not None:
            return sum(self.evolution.sizes(self.task_limit))
        return self.task_limit

    @property
    def graph_source(self) -> str | None:
        """Where a lens stream of a frozen library reads its skill graph: ``skill_graph``, else an evolution stream's
        evolved pair (``<run>/evolution/graph``)."""
        if self.skill_graph is None and self.evolution is not None:
            return str(self.path / "evolution" / "graph")
        return self.skill_graph

    def agent_config(self) -> AgentConfig:
        """The agent's settings: ``agent`` with the condition's level and the step/subtask limits."""
        limits = {k: v for k, v in {"step_limit": self.limits.step_limit,
                                    "subtask_limit": self.limits.subtask_limit}.items() if v is not None}
        return AgentConfig.model_validate({**self.agent.model_dump(), **limits, "level": self.level,
                                           "skill_exec": self.skill_exec,
                                           "library_organization": self.library_organization,
                                           "library_exposure": self.library_exposure})

    def induction_config(self) -> InductionConfig | None:
        """Induction settings, or None when the stream induces nothing (no memory, or a frozen library)."""
        fmt = self.skill_format
        if not fmt or (self.library and self.library_use != "beside"):
            return None
        per_task = self.skills_per_task if self.induction_variant == "contract" and self.level == "subtask" else None
        return InductionConfig(format=fmt, variant=self.induction_variant,
                               only_successful=self.only_successful or self.induction_source == "success",
                               lessons=self.induction_source == "lessons",
                               mask_instance_names=bool(self.mask_instance_names), skills_per_task=per_task)

    def recorded(self) -> StreamConfig:
        """The settings a run is identified by, as ``config.json`` records them: the model's `ModelSpec.recorded`,
        the embedder without the credentials of its URL, without the settings that do not change results
        (sandboxing, the embedding cache)."""
        verifier = self.verifier_model.recorded() if self.verifier_model is not None else None
        return self.model_copy(update={"model": self.model.recorded(), "embedder_cache": False,
                                       "embedder": without_credentials(self.embedder),
                                       "verifier_model": verifier,
                                       "env": self.env.model_copy(update={"sandboxed": None})})

    def differences(self, other: StreamConfig) -> list[str]:
        """The fields in which two recorded streams differ, leaving out what only selects the tasks (order seed,
        split, curated stream, task limits): the run's task ids record that, and a longer stream may extend a run."""
        mine, theirs = self._settings_only(), other._settings_only()
        return [name for name in type(self).model_fields if getattr(mine, name) != getattr(theirs, name)]

    def _settings_only(self) -> StreamConfig:
        return self.model_copy(update={
            "order_seed": 0, "limits": self.limits.model_copy(update={"task_limit": None}),
            "env": self.env.model_copy(update={"split": None, "stream": None, "task_limit": None})})

    def axis_values(self) -> dict[str, Any]:
        """The list axes (not env, model, condition) whose value differs from the default, in field order."""
        out = {}
        for name, field in type(self).model_fields.items():
            axis = axis_of(field)
            if axis is not None and not axis.labelled and name != "condition" and getattr(self, name) != field.default:
                out[name] = getattr(self, name)
        return out

    def condition_label(self, *, harness: bool | None = None) -> str:
        """The condition as the report groups it: tagged with a frozen library (``+library``,
        ``+library(top)``; ``+library+memory`` beside the agent's own memory), with every ``report="tag"`` axis whose
        value is not the default (``[no_demo]``), so ``task+text[no_demo]`` is compared with ``task``, and with the
        harness (``[harness=paper]``): when
        ``harness`` is True (the report: the runs of a table differ in it), never when False, and with None when it
        is not the model's default preset with its features as the preset has them."""
        label: str = self.condition
        if self.library is not None:
            label += f"+library({self.library_filter})" if self.library_filter else "+library"
            if self.library_use == "beside":
                label += "+memory"
        for name, value in self.axis_values().items():
            axis = axis_of(type(self).model_fields[name])
            if axis is not None and axis.report == "tag" and (axis.tag_if is None or axis.tag_if(self)):
                label += axis.tag.format(name=name, value=value)
        if self.evolution is not None:
            label += "[evolved]"
        label_of_harness = self.harness_label()
        if harness or (harness is None and label_of_harness != default_preset(self.model.resolved_name())):
            label += f"[harness={label_of_harness}]"
        return label

    def run_leaf(self, listed: Mapping[str, int]) -> str:
        """The last part of a grid run name: the condition, then a suffix per axis whose value is not the default or
        of which the phase lists several (``listed``: axis -> number of values) and the value is not None."""
        leaf: str = self.condition
        for name, field in type(self).model_fields.items():
            axis = axis_of(field)
            if axis is None or axis.run_tag is None or (axis.run_tag_if is not None and not axis.run_tag_if(self)):
                continue
            value = getattr(self, name)
            if value != field.default or (listed.get(name, 1) > 1 and value is not None):
                leaf += "-" + axis.run_tag.format(value=value)
        return leaf

    # The library a run read, named for three readers: a report's tables (`frozen_library_name`, `skills_read_label`),
    # its transfer events (`library_event_source`); the agent is told another name (`runner.build.agent_library_name`).
    def frozen_library_name(self) -> str | None:
        """The frozen library as reports name it, None without one: its path relative to ``runs_dir`` when inside it
        (else as given), a run's memory folder (``X/memory``) named by its run folder ``X``."""
        if self.library is None:
            return None
        path = Path(self.library)
        if path.name == MEMORY:
            path = path.parent
        try:
            return path.relative_to(self.runs_dir).as_posix()
        except ValueError:
            return path.as_posix()

    def skills_read_label(self) -> str:
        """Which skills a run read, as the report's execution-mode and organisation tables split their groups (column
        ``library``) and the viewer shows them: ``own memory`` (a growing memory), the `frozen_library_name`, or
        ``<name> + own memory`` for a library beside the agent's own memory."""
        name = self.frozen_library_name()
        if name is None:
            return "own memory"
        return f"{name} + own memory" if self.library_use == "beside" else name

    def library_event_source(self) -> str | None:
        """The source of the run's library transfer events (`skilltransfer.report.events.transfer_events`), None
        without a frozen library: ``run X`` for another run's memory folder (``X/memory``; X relative to ``runs_dir``
        when both are absolute and the library is inside it), else ``library PATH``; a snapshot adds ``@K`` (its first
        K tasks)."""
        if self.library is None:
            return None
        path = Path(self.library)
        if path.is_absolute() and path.is_relative_to(self.runs_dir):
            path = path.relative_to(self.runs_dir)
        snapshot = f"@{self.library_snapshot}" if self.library_snapshot is not None else ""
        if path.name == MEMORY and path.parent != path:
            return f"run {path.parent.as_posix()}{snapshot}"
        return f"library {path.as_posix()}{snapshot}"


def axes() -> dict[str, Axis]:
    """Field name -> `Axis` of every axis of `StreamConfig`, in field order."""
    return {name: axis for name, field in StreamConfig.model_fields.items() if (axis := axis_of(field)) is not None}

"""Experiment grid specs: YAML files (``experiments/*.yaml``) layered with ``-c key.path=value`` and CLI flags.

A spec names the axes of a grid: ``envs`` × ``models`` × ``conditions`` × ``order_seeds`` × ``induction_variants`` ×
``library_filters``. Every stream (one point of the grid) is one `run_stream` call. Top-level keys are the defaults;
an optional ``phases`` list holds override dicts merged on top of them (``name`` required), for grids whose later
streams read the memory an earlier phase produced (``library_from``). Layering follows mini-swe-agent: base YAML,
then each ``-c`` (a ``key.path=value`` with a YAML value, or another YAML file merged in), then flags.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from skilltransfer.agents.config import AgentConfig
from skilltransfer.errors import InputError, check_output_path, read_text
from skilltransfer.experiments.stream import CONDITIONS, LibraryFilter
from skilltransfer.induction.inducer import PromptVariant
from skilltransfer.llm import MODELS
from skilltransfer.llm.config import ModelConfig
from skilltransfer.memory.store import MemoryConfig

SPEC_DIR = Path(__file__).resolve().parents[2] / "experiments"
"""The ready-made specs of a source checkout (``experiments/`` at the repo root)."""
VARIANTS: tuple[str, ...] = get_args(PromptVariant)
FILTERS: tuple[str, ...] = get_args(LibraryFilter)
GRID_KEYS = ("name", "description", "out", "max_concurrency", "phases")
"""Keys that only the top level of a spec may hold (the rest are phase settings)."""
ENV_CHOICES = "apps, office, datasci, scienceworld, officebench[:<tasks folder>], or module:Class"


# --------------------------------------------------------------------------------------------- models
class EnvEntry(BaseModel):
    """One env of the grid (the key of ``envs`` is its label in run names)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    env: str | None = None
    """Registry name (apps, office, datasci, scienceworld), ``officebench[:<tasks folder>]`` or ``module:Class``;
    default: the key."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments of the env's constructor (``seed``, ``sandboxed``, ...)."""
    split: str | None = None
    """Only the tasks of this split (dev/test); None: all."""
    stream: str | None = None
    """A curated stream of the env (``env.streams``, e.g. apps ``starter``) instead of all its tasks."""
    task_limit: int | None = Field(default=None, ge=1)
    """Overrides ``limits.task_limit`` for this env."""


class Limits(BaseModel):
    """Run-length limits."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    task_limit: int | None = Field(default=None, ge=1)
    """Run only the first N tasks of each (ordered) stream; None: all."""
    step_limit: int | None = Field(default=None, ge=1)
    """Executor step budget per task (``AgentConfig.step_limit``); None: the agent's default (50)."""
    subtask_limit: int | None = Field(default=None, ge=1)
    """Most subtasks per task at subtask level; None: the agent's default (15)."""


class LibraryFrom(BaseModel):
    """Read a frozen library from the memory of an earlier phase's stream (same env, model and order seed)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    phase: str
    """The source phase's name."""
    condition: str | dict[str, str]
    """The source stream's condition, or a map from this phase's condition to the source condition."""


class PhaseSpec(BaseModel):
    """The settings of one phase: its axes, and the shared settings of its streams."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str = "main"
    """Phase name (a run-name prefix when the spec has phases)."""
    envs: dict[str, EnvEntry]
    """Label -> env; a list of names is short for ``{name: {}}``."""
    models: dict[str, ModelConfig]
    """Label -> `ModelConfig` (endpoint, model id, params, max_concurrency, cache...); streams on one endpoint share
    its concurrency limit."""
    conditions: list[str]
    """Any of task, task+text, task+code, subtask, subtask+text, subtask+code."""
    order_seeds: list[int] = Field(default_factory=lambda: [0])
    """Stream orders (``stream_order`` seeds; 0 is the canonical order)."""
    induction_variants: list[PromptVariant] = Field(default_factory=lambda: list[PromptVariant](["full"]))
    """Induction prompt variants: full, no_demo, no_rules."""
    library: str | None = None
    """A frozen library for every stream (a memory folder, SKILL.md folder or .jsonl)."""
    library_from: LibraryFrom | None = None
    """A frozen library from an earlier phase (see `LibraryFrom`)."""
    library_filters: list[LibraryFilter | None] = Field(default_factory=lambda: list[LibraryFilter | None]([None]))
    """Library halves by utility: top, bottom, or null (the whole library)."""
    embedder: str = "minilm"
    """Retrieval embedder: minilm, hash[:DIM] (test double) or a sentence-transformers folder."""
    embedder_cache: bool = False
    """Cache embeddings on disk (``make_embedder(cache=True)``)."""
    limits: Limits = Field(default_factory=Limits)
    """Task and step limits."""
    agent: dict[str, Any] = Field(default_factory=dict)
    """`AgentConfig` overrides (top_k, retrieval_query, ...); the level comes from the condition."""
    memory: dict[str, Any] = Field(default_factory=dict)
    """`MemoryConfig` overrides."""


class GridSpec(BaseModel):
    """A whole grid: its name, output folder, stream concurrency and phases."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str
    """Grid name (default output folder ``runs/grid-<name>``)."""
    description: str = ""
    """What the grid reproduces."""
    out: str | None = None
    """Output folder; None: ``runs/grid-<name>``."""
    max_concurrency: int = Field(default=16, ge=1)
    """Streams running at once (each stream is sequential: its memory evolves task by task)."""
    phases: list[PhaseSpec]
    """The phases, run in dependency order (one phase named "main" when the spec has no ``phases`` key)."""
    phased: bool = False
    """Whether the spec listed phases (then run names start with the phase name)."""

    @property
    def out_dir(self) -> Path:
        """The output folder as an absolute path (run folders record it; Ray workers need it absolute)."""
        return Path(self.out or f"runs/grid-{self.name}").expanduser().resolve()


# --------------------------------------------------------------------------------------------- layering
def recursive_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` merged in (dicts merge key by key; anything else is replaced)."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = recursive_merge(out[key], value)
        else:
            out[key] = value
    return out


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(read_text(path, what="grid spec"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"not valid YAML ({getattr(exc, 'problem', exc)})", path=path,
                         line=mark.line + 1 if mark is not None else None) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError("a grid spec must be a YAML mapping", path=path)
    return data


def available_specs() -> list[str]:
    """Names of the ready-made specs (``experiments/*.yaml`` of the working directory and the source checkout)."""
    names = {p.stem for folder in (Path("experiments"), SPEC_DIR) if folder.is_dir() for p in folder.glob("*.yaml")}
    return sorted(names)


def find_spec(spec: str) -> Path:
    """The YAML file of ``spec``: a path, or the name of a ready-made spec."""
    path = Path(spec).expanduser()
    if path.is_file():
        return path
    for folder in (Path("experiments"), SPEC_DIR):
        candidate = folder / f"{spec}.yaml"
        if candidate.is_file():
            return candidate
    raise InputError(f"no grid spec {spec!r}: not a file, and not a ready-made spec "
                     f"({', '.join(available_specs()) or 'none found'})")


def apply_override(data: dict[str, Any], item: str) -> dict[str, Any]:
    """Apply one ``-c``: ``key.path=value`` (value parsed as YAML; list items by index) or a YAML file to merge."""
    if "=" not in item:
        path = Path(item).expanduser()
        if not path.is_file():
            raise InputError(f"-c {item!r}: expected key.path=value or a YAML file")
        return recursive_merge(data, _read_yaml(path))
    key, _, raw = item.partition("=")
    parts = [p for p in key.strip().split(".") if p]
    if not parts:
        raise InputError(f"-c {item!r}: empty key path")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        value = raw
    out = json.loads(json.dumps(data, default=str))  # deep copy of plain data
    node: Any = out
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        where = ".".join(parts[: depth + 1])
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise InputError(f"-c {key}: {where!r} is not an index of a {len(node)}-item list")
            if last:
                node[int(part)] = value
            else:
                node = node[int(part)]
            continue
        if not isinstance(node, dict):
            raise InputError(f"-c {key}: {'.'.join(parts[:depth])!r} is not a mapping")
        if last:
            node[part] = value
        else:
            if not isinstance(node.get(part), dict | list):
                node[part] = {}
            node = node[part]
    return out


def _key_check(data: Any, allowed: list[str] | tuple[str, ...], where: str) -> None:
    if not isinstance(data, dict):
        raise InputError(f"{where or 'spec'}: expected a mapping, got {type(data).__name__}")
    for key in data:
        if key not in allowed:
            name = f"{where}.{key}" if where else str(key)
            raise InputError(f"unknown key {name!r}; allowed: {', '.join(allowed)}")


def _check_env_name(name: str, where: str) -> None:
    from skilltransfer.envs.registry import ENVS, OFFICEBENCH

    if name in ENVS or name == OFFICEBENCH or name.startswith(OFFICEBENCH + ":"):
        return
    if ":" in name:
        from skilltransfer.envs.base import resolve

        try:
            resolve(name)
        except (ImportError, AttributeError, ValueError) as exc:
            raise InputError(f"{where}: env class {name!r} cannot be imported ({type(exc).__name__}: {exc})") from None
        return
    raise InputError(f"{where}: unknown env {name!r}; choose one of: {ENV_CHOICES}")


def _normalise_phase(raw: dict[str, Any], where: str, *, complete: bool = True) -> dict[str, Any]:
    """Check a phase's keys and names (env, condition, model fields) and expand short forms.

    ``complete=False`` checks the top-level defaults of a spec with phases: only the keys present.
    """
    prefix = f"{where}." if where else ""
    _key_check(raw, [k for k in PhaseSpec.model_fields if k != "name" or where], where)
    data = dict(raw)
    for key in ("envs", "models", "conditions"):
        if not data.get(key) and (complete or key in data):
            raise InputError(f"{prefix}{key}: required, and must not be empty")
    if "envs" in data:
        data["envs"] = _normalise_envs(data["envs"], prefix)
    if "models" in data:
        data["models"] = _normalise_models(data["models"], prefix)
    if "conditions" in data:
        data["conditions"] = _normalise_conditions(data["conditions"], prefix)
    return _normalise_rest(data, prefix)


def _normalise_envs(envs: Any, prefix: str) -> dict[str, Any]:
    if isinstance(envs, str):
        envs = [envs]
    if isinstance(envs, list):
        envs = {str(e): {} for e in envs}
    _key_check(envs, list(envs) if isinstance(envs, dict) else [], f"{prefix}envs")
    for label, entry in envs.items():
        entry = {} if entry is None else entry
        _key_check(entry, list(EnvEntry.model_fields), f"{prefix}envs.{label}")
        _check_env_name(str(entry.get("env") or label), f"{prefix}envs.{label}")
        if isinstance(entry.get("args"), dict) and "workdir" in entry["args"]:
            raise InputError(f"{prefix}envs.{label}.args.workdir: set by the grid (one work folder per stream)")
        envs[label] = entry
    return envs


def _normalise_models(models: Any, prefix: str) -> dict[str, Any]:
    if isinstance(models, list):
        models = {str(m.get("model") or m.get("name") or i) if isinstance(m, dict) else str(m):
                  (m if isinstance(m, dict) else {"name": m}) for i, m in enumerate(models)}
    _key_check(models, list(models) if isinstance(models, dict) else [], f"{prefix}models")
    for label, entry in models.items():
        entry = {} if entry is None else entry
        _key_check(entry, list(ModelConfig.model_fields), f"{prefix}models.{label}")
        if entry.get("name") is not None and entry["name"] not in MODELS:
            raise InputError(f"{prefix}models.{label}.name: unknown model {entry['name']!r}; "
                             f"choose one of: {', '.join(MODELS)}")
        models[label] = entry
    return models


def _normalise_conditions(conditions: Any, prefix: str) -> list[Any]:
    conditions = [conditions] if isinstance(conditions, str) else conditions
    if not isinstance(conditions, list):
        raise InputError(f"{prefix}conditions: expected a list, got {type(conditions).__name__}")
    for i, condition in enumerate(conditions):
        if str(condition).strip().lower() not in CONDITIONS:
            raise InputError(f"{prefix}conditions[{i}]: unknown condition {condition!r}; "
                             f"choose one of: {', '.join(CONDITIONS)}")
    return conditions


def _normalise_rest(data: dict[str, Any], prefix: str) -> dict[str, Any]:
    for key, choices in (("induction_variants", VARIANTS), ("library_filters", (*FILTERS, None))):
        values = data.get(key)
        if values is None and key in data:
            values = data[key] = [None] if key == "library_filters" else values
        if isinstance(values, str):
            values = data[key] = [values]
        for i, value in enumerate(values or []):
            if value not in choices:
                raise InputError(f"{prefix}{key}[{i}]: unknown value {value!r}; choose one of: "
                                 f"{', '.join(str(c).replace('None', 'null') for c in choices)}")
    if isinstance(data.get("order_seeds"), int):
        data["order_seeds"] = [data["order_seeds"]]
    for key, cls in (("limits", Limits), ("library_from", LibraryFrom)):
        if data.get(key) is not None:
            _key_check(data[key], list(cls.model_fields), f"{prefix}{key}")
    agent_keys = [k for k in AgentConfig.model_fields if k != "level"]
    _key_check(data.get("agent") or {}, agent_keys, f"{prefix}agent")
    _key_check(data.get("memory") or {}, list(MemoryConfig.model_fields), f"{prefix}memory")
    return data


def _validation_message(exc: ValidationError, where: str) -> str:
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first.get("loc", ()))
    key = ".".join(p for p in (where, loc) if p)
    return f"{key or 'spec'}: {first.get('msg')} (got {first.get('input')!r})"


def build_spec(data: dict[str, Any], *, source: str | Path | None = None) -> GridSpec:
    """Validate layered spec data into a `GridSpec` (one-line `InputError` naming the key on any problem)."""
    try:
        return _build(data)
    except InputError as exc:
        raise InputError(str(exc), path=source) from None


def _build(data: dict[str, Any]) -> GridSpec:
    _key_check(data, [*GRID_KEYS, *(k for k in PhaseSpec.model_fields if k != "name")], "")
    grid = {k: data[k] for k in GRID_KEYS if k in data and k != "phases"}
    defaults = {k: v for k, v in data.items() if k not in GRID_KEYS}
    raw_phases = data.get("phases")
    phased = raw_phases is not None
    if phased and (not isinstance(raw_phases, list) or not raw_phases):
        raise InputError("phases: expected a non-empty list of phase overrides")
    if phased:  # report problems of the shared defaults under their own keys
        defaults = _normalise_phase(defaults, "", complete=False)
    phases: list[PhaseSpec] = []
    for i, override in enumerate(raw_phases or [{}]):
        where = f"phases[{i}]" if phased else ""
        if phased and (not isinstance(override, dict) or not override.get("name")):
            raise InputError(f"{where}.name: every phase needs a name")
        merged = _normalise_phase(recursive_merge(defaults, override), where)
        try:
            phases.append(PhaseSpec.model_validate(merged))
        except ValidationError as exc:
            raise InputError(_validation_message(exc, where)) from None
    names = [p.name for p in phases]
    if len(set(names)) != len(names):
        raise InputError(f"phases: names must be unique, got {', '.join(names)}")
    for i, phase in enumerate(phases):
        _check_library(phase, names[:i], f"phases[{i}]" if phased else "")
    if "name" not in grid:
        raise InputError("name: required (the grid's name)")
    try:
        return GridSpec.model_validate({**grid, "phases": phases, "phased": phased})
    except ValidationError as exc:
        raise InputError(_validation_message(exc, "")) from None


def _check_library(phase: PhaseSpec, earlier: list[str], where: str) -> None:
    prefix = f"{where}." if where else ""
    source = phase.library_from
    if phase.library is not None and source is not None:
        raise InputError(f"{prefix}library and library_from: give one, not both")
    if any(f is not None for f in phase.library_filters) and phase.library is None and source is None:
        raise InputError(f"{prefix}library_filters: a filter needs a library or library_from")
    if source is None:
        return
    if source.phase not in earlier:
        raise InputError(f"{prefix}library_from.phase: unknown phase {source.phase!r}; choose an earlier one: "
                         f"{', '.join(earlier) or 'none'}")
    mapping = source.condition if isinstance(source.condition, dict) else None
    for condition in phase.conditions:
        if mapping is not None and condition not in mapping:
            raise InputError(f"{prefix}library_from.condition: no source condition for {condition!r}; "
                             f"map each of: {', '.join(phase.conditions)}")
    for value in mapping.values() if mapping is not None else [str(source.condition)]:
        if value.strip().lower() not in CONDITIONS:
            raise InputError(f"{prefix}library_from.condition: unknown condition {value!r}; "
                             f"choose one of: {', '.join(CONDITIONS)}")


def _envs_as_mapping(data: dict[str, Any]) -> dict[str, Any]:
    """``envs: [apps, office]`` as ``{apps: {}, office: {}}`` (top level and phases): ``-c envs.apps.x=...`` works."""
    for node in [data, *(p for p in data.get("phases") or [] if isinstance(p, dict))]:
        envs = node.get("envs")
        if isinstance(envs, str):
            envs = [envs]
        if isinstance(envs, list) and all(isinstance(e, str) for e in envs):
            node["envs"] = {e: {} for e in envs}
    return data


def load_spec(spec: str, overrides: list[str] | None = None, **flags: Any) -> GridSpec:
    """Read a spec (path or ready-made name), apply ``-c`` overrides, then flags (None flags are ignored).

    Args:
        spec: a YAML path or the name of a ready-made spec.
        overrides: ``key.path=value`` items or YAML files, in order.
        **flags: key paths set last (``out``, ``max_concurrency``, ``limits.task_limit``...); phase settings are
            also set in every phase, so a flag wins over the spec.

    Raises:
        InputError: a missing file, bad YAML, an unknown key/env/condition/model field, a bad value, or an output
            folder that cannot be created.
    """
    path = find_spec(spec)
    data = _envs_as_mapping(_read_yaml(path))
    for item in overrides or []:
        data = _envs_as_mapping(apply_override(data, item))
    for key, value in flags.items():
        if value is None:
            continue
        data = apply_override(data, f"{key}={json.dumps(value)}")
        phases = data.get("phases")
        if key.split(".")[0] not in GRID_KEYS and isinstance(phases, list):  # a flag beats every phase's setting
            for i in range(len(phases)):
                data = apply_override(data, f"phases.{i}.{key}={json.dumps(value)}")
    grid = build_spec(data, source=path)
    check_output_path(grid.out or f"runs/grid-{grid.name}", flag="out")
    return grid

"""Experiment specs: YAML (``experiments/*.yaml``) layered with ``-c key.path=value`` and CLI flags, for ``grid`` and
``run`` alike.

A spec holds `StreamConfig` settings, each axis either as a list under its plural key (``conditions: [task,
task+text]``, ``envs: {label: entry}``) or as one value under its singular key (``condition: task``, ``env: apps``);
every combination of the listed values is one stream (`skilltransfer.runner.plan`). A grid spec adds ``name``,
``description``, ``out``, ``max_concurrency`` and optional ``phases``: override dicts merged on top of the top-level
settings (``name`` required), for grids whose later streams read the memory an earlier phase produced
(``library_from``). ``run`` reads the same keys and must come out with exactly one stream.

Layering follows mini-swe-agent: the YAML, then each ``-c`` (a ``key.path=value`` with a YAML value, or another
YAML file merged in), then flags. Setting an axis's singular key drops its plural key at the same level, and the
reverse, so a later layer always wins. The phase model (`PhaseSpec`) is derived from `StreamConfig`: a new axis or
setting there is a new spec key here.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator

from skilltransfer import untrusted
from skilltransfer.errors import InputError, check_output_path, validation_message
from skilltransfer.runner.build import check_env_name, check_model_name
from skilltransfer.settings.config import CONDITIONS, EnvSpec, ModelSpec, StreamConfig, axes, axis_of
from skilltransfer.util.files import read_text

MAX_SPEC_BYTES = 4 << 20
"""The largest spec file read."""
SPEC_DIR = Path(__file__).resolve().parents[2] / "experiments"
"""The ready-made specs of a source checkout (``experiments/`` at the repo root)."""
GRID_KEYS = ("name", "description", "out", "max_concurrency", "phases")
"""Keys that only the top level of a spec may hold (the rest are phase settings)."""
LOCATION = ("run", "runs_dir")
"""`StreamConfig` fields a spec does not set (the grid's ``out`` and the run names do)."""
DERIVED_LABEL = ""
"""The key of a labelled axis given in its singular form: the label is derived (`EnvSpec.display_label`)."""
COUNTERPARTS: dict[str, str] = {}
"""Singular key <-> plural key of every axis."""
for _name, _axis in axes().items():
    COUNTERPARTS[_name], COUNTERPARTS[_axis.plural] = _axis.plural, _name


# --------------------------------------------------------------------------------------------- models
class LibraryFrom(BaseModel):
    """Read a frozen library from the memory of an earlier phase's stream (same env, model and order seed)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    phase: str
    """The source phase's name."""
    condition: str | dict[str, str]
    """The source stream's condition, or a map from this phase's condition to the source condition."""
    model: str | None = None
    """The source stream's model label; None: this stream's own. A phase per source model gives every ordered
    (library model, user model) pair (spec ``model-transfer``)."""
    same_tasks: bool = False
    """The phase runs tasks the library was induced from, on purpose (e.g. a study of reuse on the source tasks);
    without it a grid refuses a stream whose tasks overlap its source stream's (`check_source_overlap`)."""


def _fold_singular(cls: type[BaseModel], data: Any) -> Any:
    """A phase's singular axis keys as one-value plural ones, and the short forms of envs and models expanded."""
    if not isinstance(data, dict):
        return data
    data = dict(data)
    for name, axis in axes().items():
        if name in data and axis.plural in data:
            raise ValueError(f"give {name} or {axis.plural}, not both")
        if name in data:
            value = data.pop(name)
            data[axis.plural] = {DERIVED_LABEL: value} if axis.labelled else [value]
        elif axis.plural in data and not axis.labelled and not isinstance(data[axis.plural], list):
            data[axis.plural] = [data[axis.plural]]  # conditions: task
    for key in ("envs", "models"):
        entries = data.get(key)
        if isinstance(entries, str):
            entries = [entries]
        if isinstance(entries, list):  # envs: [apps, office]; models: [{name: openai, model: m}, ...]
            entries = {_label_of(entry, i): entry for i, entry in enumerate(entries)}
        if isinstance(entries, dict):
            data[key] = {label: ({"env": entry} if isinstance(entry, str) and key == "envs" else entry or {})
                         for label, entry in entries.items()}
    return data


def _label_of(entry: Any, index: int) -> str:
    if isinstance(entry, dict):
        return str(entry.get("label") or entry.get("model") or entry.get("env") or entry.get("name") or index)
    return str(entry)


def _phase_model() -> type[BaseModel]:
    """`PhaseSpec`: ``name``, ``library_from``, each axis's plural key, every other `StreamConfig` setting."""
    fields: dict[str, Any] = {
        "name": (str, Field(default="main", description="Phase name (a run-name prefix when the spec has phases).")),
    }
    for name, field in StreamConfig.model_fields.items():
        axis = axis_of(field)
        if name in LOCATION:
            continue
        if axis is None:
            fields[name] = (field.annotation, field)
            continue
        kind = dict[str, field.annotation] if axis.labelled else list[field.annotation]  # type: ignore[name-defined]
        if axis.required:
            default = Field(min_length=1, description=f"{field.description} (several: one stream each)")
        elif axis.labelled:
            default = Field(default_factory=lambda f=field: {DERIVED_LABEL: f.get_default(call_default_factory=True)},
                            min_length=1, description=field.description)
        else:
            default = Field(default_factory=lambda f=field: [f.get_default(call_default_factory=True)], min_length=1,
                            description=f"{field.description} (several: one stream each)")
        fields[axis.plural] = (kind, default)
    fields["library_from"] = (LibraryFrom | None, Field(default=None, description="A frozen library from an earlier "
                                                                                   "phase (see `LibraryFrom`)."))
    fields["organization_from"] = (str | None, Field(default=None, description="An earlier phase of organise streams "
                                                                             "(``organize``) whose organisation of the "
                                                                             "same library each tree/graph stream "
                                                                             "reads (``organization``)."))
    validators: dict[str, Any] = {"fold_singular_keys": model_validator(mode="before")(_fold_singular),
                                  "check_library_keys": model_validator(mode="after")(_check_library_keys)}
    return create_model("PhaseSpec", __config__=ConfigDict(extra="forbid"), __validators__=validators, **fields)


def _check_library_keys(phase: Any) -> Any:
    """A phase reads one library, and filters or takes a snapshot of a library only."""
    if phase.library is not None and phase.library_from is not None:
        raise ValueError("library and library_from: give one, not both")
    if any(f is not None for f in phase.library_filters) and phase.library is None and phase.library_from is None:
        raise ValueError("library_filters: a filter needs a library or library_from")
    if any(k is not None for k in phase.library_snapshots) and phase.library is None and phase.library_from is None:
        raise ValueError("library_snapshots: a snapshot needs a library (--library) or library_from")
    return phase


PhaseSpec = _phase_model()
"""The settings of one phase (derived from `StreamConfig`; see the module docstring)."""
PHASE_KEYS = (*PhaseSpec.model_fields, *(name for name in axes()))


class GridSpec(BaseModel):
    """A whole spec: its name, output folder, stream concurrency and phases."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str = "run"
    """Grid name (default output folder ``runs/grid-<name>``)."""
    description: str = ""
    """What the grid reproduces."""
    out: str | None = None
    """Output folder (grid: the grid's folder, ``runs/grid-<name>`` by default; run: the run folder)."""
    max_concurrency: int = Field(default=16, ge=1)
    """Streams running at once (each stream is sequential: its memory evolves task by task)."""
    phases: list[Any]
    """The phases (`PhaseSpec`), run in dependency order (one phase named "main" when the spec has no ``phases``)."""
    phased: bool = False
    """Whether the spec listed phases (then run names start with the phase name)."""
    source: str | None = None
    """The spec's file (set by `load_spec`; errors found later name it)."""

    @property
    def out_dir(self) -> Path:
        """The output folder as an absolute path (run folders record it; Ray workers need it absolute)."""
        return Path(self.out or f"runs/grid-{self.name}").expanduser().resolve()


# --------------------------------------------------------------------------------------------- layering
def recursive_merge(base: dict[str, Any], override: dict[str, Any], *, top: bool = True) -> dict[str, Any]:
    """``base`` with ``override`` merged in (dicts merge key by key; anything else is replaced). At the top level
    and in phases an axis key replaces its singular/plural counterpart."""
    out = dict(base)
    for key, value in override.items():
        if top and key in COUNTERPARTS and COUNTERPARTS[key] not in override:
            out.pop(COUNTERPARTS[key], None)
        if key == "phases" and top and isinstance(value, list):
            out[key] = value
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = recursive_merge(out[key], value, top=False)
        else:
            out[key] = value
    return out


MAX_SPEC_DEPTH = 32
"""How deeply a spec's YAML may nest (a spec is a few levels; a deeper one is refused in one line, no traceback)."""


def _read_yaml(path: Path, *, what: str = "spec") -> dict[str, Any]:
    """A spec file's YAML: no anchors or aliases (no "billion laughs"), at most `MAX_SPEC_DEPTH` levels deep."""
    try:
        data = untrusted.parse_yaml(read_text(path, what=what, max_bytes=MAX_SPEC_BYTES), path,
                                    max_depth=MAX_SPEC_DEPTH)
    except untrusted.UntrustedFileError as exc:
        raise InputError(f"{what}: {exc.reason}", path=exc.shown) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(f"a {what} must be a YAML mapping", path=path)
    return _short_forms(data)


def _yaml_value(raw: str, item: str) -> Any:
    """A ``-c`` value parsed as YAML under the spec file's rules (text that is not YAML stays text)."""
    if not raw.strip():
        return None
    try:
        return untrusted.parse_yaml(raw, f"-c {item[:60]!r}", max_depth=MAX_SPEC_DEPTH)
    except untrusted.UntrustedFileError as exc:
        if any(word in exc.reason for word in ("anchors", "aliases", "levels deep")):
            raise InputError(exc.reason.replace("invalid YAML: ", f"-c {item[:60]!r}: ")) from None
        return raw


def _short_forms(data: dict[str, Any]) -> dict[str, Any]:
    """``envs: [apps]`` as ``{apps: {}}`` and ``env: apps`` as ``{env: apps}`` (top level and phases), so ``-c
    envs.apps.x=...`` and ``-c env.seed=1`` work on them."""
    for node in [data, *(p for p in data.get("phases") or [] if isinstance(p, dict))]:
        envs = node.get("envs")
        if isinstance(envs, str):
            envs = [envs]
        if isinstance(envs, list) and all(isinstance(e, str) for e in envs):
            node["envs"] = {e: {} for e in envs}
        if isinstance(node.get("env"), str):
            node["env"] = {"env": node["env"]}
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
    value = _yaml_value(raw, item)
    out = json.loads(json.dumps(data, default=str))  # deep copy of plain data
    if parts == ["envs"] and isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return _short_forms(_narrow_envs(out, value))
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
        if part in COUNTERPARTS and (depth == 0 or (depth == 2 and parts[0] == "phases")):
            node.pop(COUNTERPARTS[part], None)  # a later layer's axis key wins over its counterpart
        if last:
            node[part] = value
        else:
            if not isinstance(node.get(part), dict | list):
                node[part] = {}
            node = node[part]
    return _short_forms(out)


def _narrow_envs(data: dict[str, Any], labels: list[str]) -> dict[str, Any]:
    """``envs: [names]`` as a later layer: the spec narrowed (or widened) to these envs. A listed env keeps its entry
    (top level and in each phase that lists it), a new name gets the default entry, and phases drop the envs not
    listed.

    Raises:
        InputError: a phase that lists its own envs would keep none of them.
    """
    top = data.pop("env", None)
    entries: dict[str, Any] = data["envs"] if isinstance(data.get("envs"), dict) else {}
    if isinstance(top, dict):
        entries = {_label_of(top, 0): top}
    data["envs"] = {label: entries.get(label, {}) for label in labels}
    for i, phase in enumerate(data.get("phases") or []):
        if not isinstance(phase, dict) or not isinstance(phase.get("envs"), dict):
            continue
        kept = {label: entry for label, entry in phase["envs"].items() if label in labels}
        if not kept:
            raise InputError(f"-c envs={json.dumps(labels)}: phase {phase.get('name') or i!r} runs only its own envs "
                             f"({', '.join(phase['envs'])}); list at least one of them")
        phase["envs"] = kept
    return data


def _into_phases(data: dict[str, Any], item: str) -> dict[str, Any]:
    """A ``-c key.path=value`` of a phase setting that is not an axis is also set in every phase that sets that key
    itself (``limits`` in a phase with its own ``limits``), so the later layer wins there too."""
    key, sep, raw = item.partition("=")
    parts = [p for p in key.strip().split(".") if p]
    phases = data.get("phases")
    if not sep or not parts or parts[0] in GRID_KEYS or parts[0] in COUNTERPARTS or parts[0] not in PHASE_KEYS \
            or not isinstance(phases, list):
        return data
    for i, phase in enumerate(phases):
        if isinstance(phase, dict) and parts[0] in phase:
            data = apply_override(data, f"phases.{i}.{key.strip()}={raw}")
    return data


def layered(base: dict[str, Any], overrides: list[str] | None = None, flags: dict[str, Any] | None = None
            ) -> dict[str, Any]:
    """``base`` with the ``-c`` overrides, then the flags (key path -> value; None values are ignored) applied. A
    ``-c`` or flag for a phase setting also sets it in the phases (a ``-c``: those that set it themselves; a flag:
    every phase), so it wins over the spec; ``-c envs=[names]`` narrows every phase to those envs (`_narrow_envs`)."""
    data = _short_forms(json.loads(json.dumps(base, default=str)))
    for item in overrides or []:
        data = _into_phases(apply_override(data, item), item)
    for key, value in (flags or {}).items():
        if value is None:
            continue
        data = apply_override(data, f"{key}={json.dumps(value)}")
        phases = data.get("phases")
        if key.split(".")[0] not in GRID_KEYS and isinstance(phases, list):
            for i in range(len(phases)):
                data = apply_override(data, f"phases.{i}.{key}={json.dumps(value)}")
    return data


# --------------------------------------------------------------------------------------------- validation
def build_spec(data: dict[str, Any], *, source: str | Path | None = None,
               allowed_imports: Collection[str] | None = None) -> GridSpec:
    """Validate layered spec data into a `GridSpec` (one-line `InputError` naming the file and key on any problem).

    Env names are checked here (registry, installed plug-in, ``officebench[:path]``, importable ``module:Class``), not
    when a run's config is read back. ``allowed_imports``: the modules a ``module:Class`` env may come from (the CLI
    passes those the user allowed, `check_env_name`); None: the caller is trusted code, any module may be named.
    """
    try:
        return _build(data, allowed_imports)
    except InputError as exc:
        raise InputError(str(exc), path=source) from None


def _build(data: dict[str, Any], allowed_imports: Collection[str] | None) -> GridSpec:
    allowed = (*GRID_KEYS, *(k for k in PHASE_KEYS if k != "name"))
    unknown = [key for key in data if key not in allowed]
    if unknown:
        raise InputError(f"unknown key {unknown[0]!r}; allowed: {', '.join(allowed)}")
    grid = {k: data[k] for k in GRID_KEYS if k in data and k != "phases"}
    defaults = {k: v for k, v in data.items() if k not in GRID_KEYS}
    raw_phases = data.get("phases")
    phased = raw_phases is not None
    if phased and (not isinstance(raw_phases, list) or not raw_phases):
        raise InputError("phases: expected a non-empty list of phase overrides")
    phases: list[Any] = []
    for i, override in enumerate(raw_phases or [{}]):
        where = f"phases[{i}]" if phased else ""
        if not isinstance(override, dict) or (phased and not override.get("name")):
            raise InputError(f"{where}.name: every phase needs a name")
        try:
            phase = PhaseSpec.model_validate(recursive_merge(defaults, override))
        except ValidationError as exc:
            raise InputError(validation_message(exc, prefix=where, model=PhaseSpec, rename=_singular)) from None
        for label, entry in phase.envs.items():  # type: ignore[attr-defined]
            check_env_name(entry.name or label, f"{where + '.' if where else ''}envs.{label or entry.name}",
                           allowed_imports)
        for label, model in phase.models.items():  # type: ignore[attr-defined]
            key = f"models.{label}.name" if label else "model.name"  # a run config's one entry: model.name
            check_model_name(model.name, f"{where + '.' if where else ''}{key}", allowed_imports)
        verifier = phase.verifier_model  # type: ignore[attr-defined]
        if verifier is not None:
            check_model_name(verifier.name, f"{where + '.' if where else ''}verifier_model.name", allowed_imports)
        phases.append(phase)
    names = [p.name for p in phases]
    if len(set(names)) != len(names):
        raise InputError(f"phases: names must be unique, got {', '.join(names)}")
    for i, phase in enumerate(phases):
        _check_library_from(phase, names[:i], f"phases[{i}]" if phased else "")
    try:
        return GridSpec.model_validate({**grid, "phases": phases, "phased": phased})
    except ValidationError as exc:
        raise InputError(validation_message(exc, model=GridSpec)) from None


def _singular(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """An error location in an entry given in singular form (``models."".x``) as the user wrote it (``model.x``)."""
    if len(loc) >= 2 and loc[1] == DERIVED_LABEL and isinstance(loc[0], str) and loc[0] in COUNTERPARTS:
        return (COUNTERPARTS[loc[0]], *loc[2:])
    return loc


def _check_library_from(phase: Any, earlier: list[str], where: str) -> None:
    prefix = f"{where}." if where else ""
    if phase.organization_from is not None and phase.organization_from not in earlier:
        raise InputError(f"{prefix}organization_from: unknown phase {phase.organization_from!r}; choose an earlier "
                         f"one: {', '.join(earlier) or 'none'}")
    source: LibraryFrom | None = phase.library_from
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


def load_spec(spec: str, overrides: list[str] | None = None, *, allowed_imports: Collection[str] | None = None,
              **flags: Any) -> GridSpec:
    """Read a grid spec (path or ready-made name), apply ``-c`` overrides, then flags (None flags are ignored).

    Args:
        spec: a YAML path or the name of a ready-made spec.
        overrides: ``key.path=value`` items or YAML files, in order.
        allowed_imports: the modules a ``module:Class`` env of the spec or a ``-c`` may import (``grid``: its
            ``--allow-import`` items); None: any (a Python caller trusts the spec it names).
        **flags: key paths set last (``out``, ``max_concurrency``, ``limits.task_limit``...); phase settings are
            also set in every phase, so a flag wins over the spec.

    Raises:
        InputError: a missing file, bad YAML, an unknown key/env/condition/model field, a bad value, or an output
            folder that cannot be created.
    """
    path = find_spec(spec)
    data = layered(_read_yaml(path, what="grid spec"), overrides, flags)
    if "name" not in data:
        raise InputError("name: required (the grid's name)", path=path)
    grid = build_spec(data, source=path, allowed_imports=allowed_imports)
    check_output_path(grid.out or f"runs/grid-{grid.name}", flag="out")
    return grid.model_copy(update={"source": str(path)})


def load_run_spec(config: Path | None, overrides: list[str] | None, flags: dict[str, Any],
                  base: dict[str, Any] | None = None, allowed_imports: Collection[str] | None = None) -> GridSpec:
    """The spec of ``skilltransfer run``: ``base`` (run's defaults), then the ``--config`` YAML, the ``-c``
    overrides and the flags, layered as for a grid; ``allowed_imports`` as `load_spec`'s.

    Raises:
        InputError: as `load_spec`.
    """
    data = _short_forms(json.loads(json.dumps(base or {})))
    if config is not None:
        data = recursive_merge(data, _read_yaml(config, what="run config"))
    data = layered(data, overrides)
    for name, axis in axes().items():
        if axis.required and name not in data and axis.plural not in data and flags.get(f"{name}.{name}",
                                                                                         flags.get(name)) is None:
            raise InputError(f"{name}: required; give --{name} (or {name} in --config)", path=config)
    for name, axis in axes().items():  # a flag of a labelled axis's entry sets the spec's only entry, if it lists one
        entries = data.get(axis.plural)
        if axis.labelled and isinstance(entries, dict) and len(entries) == 1:
            label = next(iter(entries))
            flags = {(f"{axis.plural}.{label}." + key.partition(".")[2] if key.startswith(name + ".") else key): value
                     for key, value in flags.items()}
    return build_spec(layered(data, flags=flags), source=config, allowed_imports=allowed_imports)


def env_entry(phase: Any, label: str) -> EnvSpec:
    """A phase's env entry with its label set (a derived label stays None)."""
    entry: EnvSpec = phase.envs[label]
    return entry.model_copy(update={"label": label or None})


def model_entry(phase: Any, label: str) -> ModelSpec:
    """A phase's model entry with its label set (a derived label stays None)."""
    entry: ModelSpec = phase.models[label]
    return entry.model_copy(update={"label": label or None})

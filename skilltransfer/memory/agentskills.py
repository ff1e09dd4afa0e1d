"""The Agent Skills format (agentskills.io; reference validator ``skills-ref``): the rules a SKILL.md the toolkit
writes follows, and how the toolkit's own fields travel in it.

A skill folder holds ``SKILL.md``: YAML front matter with only ``name``, ``description``, and optionally ``license``,
``compatibility``, ``metadata`` (a string -> string map) and ``allowed-tools``, then a Markdown body.

* **Name rule** (`agent_skill_name`, `folder_names`): the toolkit's name folded to ASCII (NFKD, accents dropped),
  lower-cased, every run of characters other than ``a-z0-9`` made one hyphen, hyphens stripped from both ends, cut
  to 64 characters (and stripped again); a name with no ASCII letter or digit becomes ``skill-`` + 8 hex digits of
  its SHA-256. Within one library, a name already taken gets ``-2``, ``-3``, ... (in library order, the base cut so
  the whole stays within 64); a skill whose own SKILL.md is kept (`skilltransfer.memory.export`) and already has a
  valid name keeps it first. The folder has that name, and so has ``name``; the toolkit's own name, when it
  differs, is kept as ``metadata: skilltransfer.name``. ``look_before_acting`` -> ``look-before-acting``.
* **Description rule** (`cut_description`): a description longer than 1024 characters is cut at the last white
  space at or before character 1023 (or at 1023 when that would keep under half) and ends in ``…``; the whole text
  is kept as ``metadata: skilltransfer.description``. An empty description is written as the skill's name, with
  ``skilltransfer.description: ""``.
* **Metadata scheme** (`toolkit_metadata`, `read_metadata`): the toolkit's fields are ``metadata`` entries named
  ``skilltransfer.`` + the field's path in `skilltransfer.skill.Skill`, values as strings: ``skilltransfer.id``,
  ``.name`` and ``.description`` (when they differ from the front matter's), ``.format``, ``.level``, ``.inputs``,
  ``.outputs`` (contracts, when present), ``.provenance.source_task_id``, ``.provenance.stream_position``,
  ``.provenance.subtask_index``, ``.provenance.run_id``, ``.usage.times_retrieved``,
  ``.usage.successes_when_retrieved`` (when set), and ``.extra.<key>`` for every other ``Skill.extra`` entry (the
  induction prompt id ``extra.induction_prompt``, the inducer model ``extra.inducer_model``, a pruned library's
  measured effect ``extra.success_effect`` ...). ``license``, ``compatibility`` (at most 500 characters) and
  ``allowed-tools`` in ``extra`` are written as the format's own fields, other metadata entries as they were.
* The toolkit's older dialect (top-level ``id``, ``format``, ``level``, ``provenance``, ``usage``, ``inputs``,
  ``outputs``) is still read; an entry under ``metadata`` wins over the same field at the top level.

The front matter is written so that the reference validator reads it as the toolkit does: block style only, no
``---`` anywhere inside it (a value holding one is double-quoted with the middle hyphen escaped, ``-\\x2D-``).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from skilltransfer.skill import Provenance, Skill, UsageStats

MAX_SKILL_FILE_BYTES = 1 << 20
"""The largest SKILL.md read (front matter and body)."""
MAX_NAME = 64
"""The longest ``name`` the format allows."""
MAX_DESCRIPTION = 1024
"""The longest ``description`` the format allows."""
MAX_COMPATIBILITY = 500
"""The longest ``compatibility`` the format allows."""
SPEC_FIELDS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
"""The only front-matter keys the format allows, in the order the toolkit writes them."""
PREFIX = "skilltransfer."
"""The namespace of the toolkit's ``metadata`` entries."""
OLD_KEYS = ("id", "format", "level", "provenance", "usage", "inputs", "outputs")
"""Top-level keys of the toolkit's older SKILL.md dialect (read, never written)."""
_ELLIPSIS = "…"
_FIELD_KEYS = ("id", "name", "description", "format", "level", "inputs", "outputs")
_SPEC_EXTRA = ("license", "compatibility", "allowed-tools")


def agent_skill_name(name: str) -> str:
    """The format's name for a toolkit name (the name rule of the module docstring, without the collision suffix)."""
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii").lower()
    slug = re.sub(r"[^a-z0-9]+", "-", folded).strip("-")[:MAX_NAME].rstrip("-")
    return slug or f"skill-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def is_format_name(name: str) -> bool:
    """Whether ``name`` is a name the name rule gives itself (lower-case ASCII letters and digits, single inner
    hyphens, at most 64 characters)."""
    return agent_skill_name(name) == name


def folder_names(names: Iterable[str], *, taken: Iterable[str] = ()) -> list[str]:
    """Collision-free format names for a library's skill names, in order (the first keeps the plain name, later ones
    get ``-2``, ``-3``...; see the module docstring), none of them in ``taken``."""
    used: set[str] = set(taken)
    out = []
    for name in names:
        base = candidate = agent_skill_name(name)
        counter = 2
        while candidate in used:
            suffix = f"-{counter}"
            candidate = base[: MAX_NAME - len(suffix)].rstrip("-") + suffix
            counter += 1
        used.add(candidate)
        out.append(candidate)
    return out


def cut_description(text: str) -> str:
    """``text`` within the format's 1024 characters (the description rule of the module docstring)."""
    if len(text) <= MAX_DESCRIPTION:
        return text
    head = text[: MAX_DESCRIPTION - len(_ELLIPSIS)]
    space = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
    if space >= len(head) // 2:
        head = head[:space]
    return head.rstrip() + _ELLIPSIS


def toolkit_metadata(skill: Skill, *, name: str, description: str) -> dict[str, str]:
    """The toolkit's ``metadata`` entries for ``skill`` written under the front matter's ``name`` and
    ``description`` (see the module docstring)."""
    meta: dict[str, str] = {f"{PREFIX}id": skill.id}
    if skill.name != name:
        meta[f"{PREFIX}name"] = skill.name
    if skill.description != description:
        meta[f"{PREFIX}description"] = skill.description
    meta[f"{PREFIX}format"] = skill.format
    meta[f"{PREFIX}level"] = skill.level
    for key in ("inputs", "outputs"):
        if getattr(skill, key):
            meta[f"{PREFIX}{key}"] = getattr(skill, key)
    for group, values in (("provenance", skill.provenance.model_dump(exclude_defaults=True)),
                          ("usage", skill.usage.model_dump(exclude_defaults=True))):
        for key, value in values.items():
            meta[f"{PREFIX}{group}.{key}"] = str(value)
    for key, value in skill.extra.items():
        if key not in (*_SPEC_EXTRA, "metadata"):
            meta[f"{PREFIX}extra.{key}"] = value
    return meta


def foreign_metadata(skill: Skill) -> dict[str, str]:
    """The ``metadata`` entries a skill brought from its library that are not the toolkit's (``extra["metadata"]``,
    kept as JSON)."""
    raw = skill.extra.get("metadata")
    if raw is None:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return {f"{PREFIX}extra.metadata": raw}
    if not isinstance(value, dict):
        return {f"{PREFIX}extra.metadata": raw}
    return {str(key): item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)
            for key, item in value.items()}


def front_matter(skill: Skill, folder: str) -> dict[str, Any]:
    """The front matter the toolkit writes for ``skill`` in the folder ``folder`` (its format name)."""
    description = cut_description(skill.description) if skill.description.strip() else folder
    front: dict[str, Any] = {"name": folder, "description": description}
    for key in _SPEC_EXTRA:
        value = skill.extra.get(key)
        if value is not None and (key != "compatibility" or len(value) <= MAX_COMPATIBILITY):
            front[key] = value
    meta = foreign_metadata(skill)
    meta.update(toolkit_metadata(skill, name=folder, description=description))
    compatibility = skill.extra.get("compatibility")
    if compatibility is not None and "compatibility" not in front:
        meta[f"{PREFIX}extra.compatibility"] = compatibility
    front["metadata"] = meta
    return front


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper, with every string holding ``---`` double-quoted (escaped afterwards)."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"' if "---" in value else None)


_Dumper.add_representer(str, _represent_str)


def dump_front_matter(front: Mapping[str, Any]) -> str:
    """``front`` as YAML that the reference validator and the toolkit both read back as ``front``: block style,
    every string holding ``---`` double-quoted with its middle hyphen escaped (the validator ends the front matter at
    the first ``---`` anywhere), and line-break characters PyYAML would mangle escaped. Ends with a newline."""
    data = dict(front)
    for allow_unicode in (True, False):
        text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=allow_unicode, width=1 << 30,
                         default_flow_style=False)
        text = text.replace("---", "-\\x2D-")  # only inside double-quoted strings (see _represent_str)
        if yaml.safe_load(text) == data:
            return text
    raise ValueError("front matter cannot be written as YAML that reads back the same")


def split_skill_md(text: str) -> tuple[list[str], int] | None:
    """The lines of a SKILL.md (``\\r\\n`` read as ``\\n``) and the index of the line closing its front matter; None
    when it does not open with a ``---`` line or the front matter is not closed."""
    lines = text.replace("\r\n", "\n").split("\n")
    if not lines or lines[0].strip() != "---":
        return None
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    return None if end is None else (lines, end)


def read_metadata(front: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """The toolkit's fields in a front matter, whichever dialect.

    Returns:
        (fields for `Skill` (``id``, ``name``, ``description``, ``format``, ``level``, ``inputs``, ``outputs``,
        ``provenance``, ``usage``: each only when given), ``extra`` entries (the toolkit's ``skilltransfer.extra.*``
        and the front matter's other keys, non-strings as JSON; other ``metadata`` entries as ``extra["metadata"]``,
        JSON), problems (one line each: a ``metadata`` that is no mapping, a provenance or usage count that is no
        integer)).
    """
    fields: dict[str, Any] = {key: front[key] for key in OLD_KEYS if key in front}
    problems: list[str] = []
    extra: dict[str, Any] = {}
    for key, value in front.items():
        if key not in (*OLD_KEYS, "name", "description", "metadata"):
            extra[str(key)] = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    meta = front.get("metadata")
    if meta is None:
        return fields, extra, problems
    if not isinstance(meta, dict):
        problems.append("front matter 'metadata' must be a mapping of strings")
        extra["metadata"] = json.dumps(meta, ensure_ascii=False, default=str)
        return fields, extra, problems
    foreign: dict[str, Any] = {}
    groups: dict[str, dict[str, Any]] = {"provenance": {}, "usage": {}}
    for raw_key, raw_value in meta.items():
        key = str(raw_key)
        value = raw_value if isinstance(raw_value, str) else (
            "" if raw_value is None else json.dumps(raw_value, ensure_ascii=False, default=str))
        field = key[len(PREFIX):] if key.startswith(PREFIX) else None
        if field in _FIELD_KEYS:
            fields[field] = value
        elif field is not None and field.startswith("extra."):
            extra[field[len("extra."):]] = value
        elif field is not None and field.split(".", 1)[0] in groups and "." in field:
            group, name = field.split(".", 1)
            model = Provenance if group == "provenance" else UsageStats
            if name not in model.model_fields:
                foreign[key] = raw_value
                continue
            if name not in ("source_task_id", "run_id"):
                try:
                    groups[group][name] = int(value)
                except ValueError:
                    problems.append(f"metadata {key!r} must be an integer, got {value!r}")
                    continue
            else:
                groups[group][name] = value
        else:
            foreign[key] = raw_value
    for group, values in groups.items():
        if values:
            base = fields.get(group)
            fields[group] = {**(base if isinstance(base, dict) else {}), **values}
    if foreign:
        extra["metadata"] = json.dumps(foreign, ensure_ascii=False, default=str)
    return fields, extra, problems


def format_problems(front: Mapping[str, Any], folder: str) -> list[str]:
    """Why the reference validator (``agentskills validate``) would refuse this front matter in a folder named
    ``folder`` (its rules, for the report of an export; the tests check against the validator itself)."""
    problems = []
    extra = sorted(str(key) for key in front if key not in SPEC_FIELDS)
    if extra:
        problems.append(f"front-matter keys the format does not allow: {', '.join(extra)}")
    name = front.get("name")
    if not isinstance(name, str) or not name.strip():
        problems.append("no name")
    else:
        name = unicodedata.normalize("NFKC", name.strip())
        if len(name) > MAX_NAME:
            problems.append(f"name of {len(name)} characters, over {MAX_NAME}")
        if (name != name.lower() or name.startswith("-") or name.endswith("-") or "--" in name
                or not all(char.isalnum() or char == "-" for char in name)):
            problems.append(f"name {name!r} is not lower-case letters, digits and single hyphens")
        if unicodedata.normalize("NFKC", folder) != name:
            problems.append(f"name {name!r} differs from its folder {folder!r}")
    description = front.get("description")
    if not isinstance(description, str) or not description.strip():
        problems.append("no description")
    elif len(description) > MAX_DESCRIPTION:
        problems.append(f"description of {len(description)} characters, over {MAX_DESCRIPTION}")
    compatibility = front.get("compatibility")
    if compatibility is not None and (not isinstance(compatibility, str) or len(compatibility) > MAX_COMPATIBILITY):
        problems.append(f"compatibility not a string of at most {MAX_COMPATIBILITY} characters")
    return problems


def _style_problems(node: yaml.Node, found: list[str]) -> None:
    """Collect what the format's YAML (``strictyaml``, behind ``skills-ref``) refuses below ``node``: flow-style
    lists and mappings, keys given twice."""
    if isinstance(node, (yaml.SequenceNode, yaml.MappingNode)) and node.flow_style:
        found.append(f"a flow-style YAML {'list' if isinstance(node, yaml.SequenceNode) else 'mapping'} at line "
                     f"{node.start_mark.line + 1} (the format's YAML takes block style only)")
    if isinstance(node, yaml.MappingNode):
        keys = [key.value for key, _ in node.value if isinstance(key, yaml.ScalarNode)]
        found.extend(f"the key {key!r} twice" for key in sorted({k for k in keys if keys.count(k) > 1}))
        for _, value in node.value:
            _style_problems(value, found)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _style_problems(item, found)


def skill_md_problems(text: str, folder: str) -> list[str]:
    """Why the reference validator (``agentskills validate``) would refuse a ``SKILL.md`` holding ``text`` in a
    folder named ``folder``, read as it reads one: the file must start with ``---`` and its front matter ends at the
    next ``---`` anywhere; the YAML in block style, keys once; then `format_problems`. Empty when it would pass (the
    tests check against the validator itself)."""
    if not text.startswith("---"):
        return ["no front matter: the file does not start with '---'"]
    parts = text.split("---", 2)
    if len(parts) < 3:
        return ["front matter not closed by '---'"]
    try:
        node = yaml.compose(parts[1], Loader=yaml.SafeLoader)
        front = yaml.safe_load(parts[1])
    except yaml.YAMLError as exc:
        return [f"front matter that is not YAML: {str(exc).splitlines()[0]}"]
    problems: list[str] = []
    if node is not None:
        _style_problems(node, problems)
    if not isinstance(front, dict):
        return [*problems, "front matter that is not a mapping"]
    return problems + format_problems(front, folder)

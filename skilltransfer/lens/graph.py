"""The hierarchical skill graph: skills decomposed into units on four layers, with shared children across skills.

Layers, general to specific: ``policy`` (when to use a skill and what it achieves; one per skill, its root),
``strategy`` (an approach or phase), ``procedure`` (a concrete sequence of steps), ``primitive`` (one atomic action).
An edge runs from a parent to a child on the same or a deeper layer; a unit may have several parents (a child shared
by several skills after near-duplicate merging). Every unit keeps provenance to the source skills it came from.

The graph also carries the verifier's **routing notes** (the verifier-side registry that evolution edits), so one
folder holds the pair that routing reads. On disk (``save``/``load``, atomic folder swap): ``manifest.json``
(format version, embedder id, dim, counts, build info), ``units.jsonl``, ``edges.jsonl`` (one ``{"parent","child"}``
per line, each parent's children in order), ``roots.jsonl`` (``{"skill","unit"}``), ``skills.jsonl`` (the source
skills), ``embeddings.npy`` (one row per unit, in ``units.jsonl`` order) and ``routing_notes.json``.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

import faiss
import numpy as np
from pydantic import BaseModel, Field, ValidationError

from skilltransfer.errors import InputError
from skilltransfer.memory.library import MANIFEST, read_jsonl, replace_folder
from skilltransfer.memory.library import export_jsonl as export_skills
from skilltransfer.skill import Skill
from skilltransfer.util.files import atomic_write_text, read_text

Layer = Literal["policy", "strategy", "procedure", "primitive"]
LAYERS: tuple[Layer, ...] = ("policy", "strategy", "procedure", "primitive")
DEPTH: dict[str, int] = {layer: depth for depth, layer in enumerate(LAYERS)}
FORMAT_VERSION = 1
KIND = "skill-graph"
UNITS, EDGES, ROOTS, SKILLS, EMBEDDINGS, NOTES = ("units.jsonl", "edges.jsonl", "roots.jsonl", "skills.jsonl",
                                                  "embeddings.npy", "routing_notes.json")


class GraphError(InputError):
    """A skill graph that breaks a structural rule (one line naming the unit, edge or file)."""


class Unit(BaseModel):
    """One node of the skill graph: a piece of a skill at one layer."""

    id: str
    layer: Layer
    text: str
    """What the unit says (one sentence for most units; the agent reads it)."""
    sources: list[str] = Field(default_factory=list)
    """Ids of the source skills this unit came from (several once near-duplicates are merged)."""
    merged_from: list[str] = Field(default_factory=list)
    """Ids of the units folded into this one."""


def unit_id(skill_id: str, position: int) -> str:
    """A stable unit id from its source skill and its position in that skill's decomposition (12 hex chars)."""
    return "u-" + hashlib.sha256(f"{skill_id}/{position}".encode()).hexdigest()[:12]


class SkillGraph:
    """Units, ordered parent -> child edges, one root unit per source skill, unit embeddings and routing notes.

    Args:
        embedder: embeds unit texts and queries (``id``, ``dim``, ``embed(list[str])``); a saved graph refuses
            another embedder id.
        info: build information saved in the manifest (model, prompt ids, merge threshold, ...).
    """

    def __init__(self, embedder: Any, *, info: dict[str, Any] | None = None) -> None:
        self.embedder = embedder
        self.dim = int(embedder.dim)
        self.info: dict[str, Any] = dict(info or {})
        self.units: dict[str, Unit] = {}
        self.skills: dict[str, Skill] = {}
        self.roots: dict[str, str] = {}
        """Source skill id -> its root unit id, in library order."""
        self.routing_notes: list[str] = []
        self._children: dict[str, list[str]] = {}
        self._parents: dict[str, list[str]] = {}
        self._vectors: dict[str, np.ndarray] = {}
        self._matrix: tuple[list[str], np.ndarray] | None = None
        self._index: faiss.IndexFlatIP | None = None
        self._order: dict[str, int] | None = None

    # ----------------------------------------------------------------- building
    def add_skill(self, skill: Skill, root: Unit) -> None:
        """Register a source skill and its root unit (added if new)."""
        self.skills[skill.id] = skill
        if root.id not in self.units:
            self.add_unit(root)
        self.roots[skill.id] = root.id
        self._order = None

    def add_unit(self, unit: Unit, vector: np.ndarray | None = None) -> None:
        """Add a unit (an existing id is an error), with its embedding if known (else embedded on demand)."""
        if unit.id in self.units:
            raise GraphError(f"unit {unit.id} is already in the graph")
        self.units[unit.id] = unit
        self._children[unit.id] = []
        self._parents[unit.id] = []
        if vector is not None:
            self._vectors[unit.id] = np.asarray(vector, dtype=np.float32).reshape(-1)
        self._changed()

    def add_edge(self, parent: str, child: str) -> None:
        """Append ``child`` to ``parent``'s children (a repeated edge is ignored; unknown ids are errors)."""
        for end in (parent, child):
            if end not in self.units:
                raise GraphError(f"edge {parent} -> {child}: unknown unit {end}")
        if child not in self._children[parent]:
            self._children[parent].append(child)
            self._parents[child].append(parent)
            self._order = None

    def remove_edge(self, parent: str, child: str) -> None:
        """Remove one edge (absent: nothing happens)."""
        if child in self._children.get(parent, []):
            self._children[parent].remove(child)
            self._parents[child].remove(parent)
            self._order = None

    def remove_unit(self, uid: str) -> None:
        """Remove a unit and its edges (it must not be a root)."""
        if uid in self.roots.values():
            raise GraphError(f"unit {uid} is a skill's root and cannot be removed")
        for parent in list(self._parents[uid]):
            self.remove_edge(parent, uid)
        for child in list(self._children[uid]):
            self.remove_edge(uid, child)
        del self.units[uid], self._children[uid], self._parents[uid]
        self._vectors.pop(uid, None)
        self._changed()

    def merge(self, keep: str, drop: str) -> None:
        """Fold unit ``drop`` into ``keep`` (same layer): ``drop``'s parents point to ``keep`` at ``drop``'s place
        among their children, its children are appended to ``keep``'s, its provenance joins ``keep``'s.

        Raises:
            GraphError: different layers, or one reaches the other (the merge would close a cycle).
        """
        kept, dropped = self.units[keep], self.units[drop]
        if kept.layer != dropped.layer:
            raise GraphError(f"cannot merge {drop} ({dropped.layer}) into {keep} ({kept.layer}): layers differ")
        if self.reaches(keep, drop) or self.reaches(drop, keep):
            raise GraphError(f"cannot merge {drop} into {keep}: one lies below the other (a cycle would close)")
        for parent in self.parents(drop):
            kids = self._children[parent]
            if keep in kids:
                kids.remove(drop)
            else:
                kids[kids.index(drop)] = keep
                self._parents[keep].append(parent)
        self._parents[drop] = []
        for child in self.children(drop):
            self.remove_edge(drop, child)
            self.add_edge(keep, child)
        kept.sources.extend(s for s in dropped.sources if s not in kept.sources)
        kept.merged_from.extend([drop, *dropped.merged_from])
        self.roots = {skill: keep if root == drop else root for skill, root in self.roots.items()}
        self.remove_unit(drop)

    def remove_skill(self, skill_id: str) -> list[str]:
        """Remove a source skill: its root and every unit no other skill's root still reaches; units it shared keep
        their place under the other skills, without its provenance. Returns the removed unit ids."""
        self.roots.pop(skill_id, None)
        self.skills.pop(skill_id, None)
        reachable: set[str] = set()
        for root in self.roots.values():
            reachable.update(self.subtree(root))
        gone = [uid for uid in self.units if uid not in reachable]
        for uid in gone:
            for parent in list(self._parents[uid]):
                self.remove_edge(parent, uid)
            for child in list(self._children[uid]):
                self.remove_edge(uid, child)
        for uid in gone:
            del self.units[uid], self._children[uid], self._parents[uid]
            self._vectors.pop(uid, None)
        for unit in self.units.values():
            if skill_id in unit.sources:
                unit.sources.remove(skill_id)
        self._changed()
        return gone

    def set_text(self, uid: str, text: str) -> None:
        """Replace a unit's text (its embedding is recomputed on demand)."""
        self.units[uid].text = text
        self._vectors.pop(uid, None)
        self._changed()

    def _changed(self) -> None:
        self._matrix = None
        self._index = None
        self._order = None

    # ----------------------------------------------------------------- reading
    def __len__(self) -> int:
        return len(self.units)

    def __iter__(self) -> Iterator[Unit]:
        return iter(list(self.units.values()))

    def children(self, uid: str) -> list[str]:
        """The unit's children, in order."""
        return list(self._children[uid])

    def parents(self, uid: str) -> list[str]:
        """The unit's parents, in the order their edges were added."""
        return list(self._parents[uid])

    def degree(self, uid: str) -> int:
        """Parents plus children."""
        return len(self._children[uid]) + len(self._parents[uid])

    def edges(self) -> Iterator[tuple[str, str]]:
        """Every (parent, child) edge, parents in unit order, children in their order."""
        for parent, kids in self._children.items():
            for child in kids:
                yield parent, child

    def skill_names(self, unit: Unit) -> list[str]:
        """Names of the unit's source skills (ids for skills the graph does not hold)."""
        return [self.skills[s].name if s in self.skills else s for s in unit.sources]

    def order(self) -> dict[str, int]:
        """Graph order: each unit's first position in a preorder walk from the roots (in library order), children in
        their order; units not reachable from a root follow in insertion order. Cycle-safe."""
        if self._order is None:
            order: dict[str, int] = {}
            for root in self.roots.values():
                for uid in self.subtree(root):
                    order.setdefault(uid, len(order))
            for uid in self.units:
                order.setdefault(uid, len(order))
            self._order = order
        return self._order

    def subtree(self, uid: str) -> list[str]:
        """``uid`` and its descendants in preorder (children in order), each once, even if the graph has a cycle."""
        seen: set[str] = set()
        out: list[str] = []
        stack = [uid]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            out.append(current)
            stack.extend(reversed(self._children[current]))
        return out

    def reaches(self, source: str, target: str) -> bool:
        """Whether a path of parent -> child edges leads from ``source`` to ``target`` (a unit reaches itself)."""
        return target in self.subtree(source)

    # ----------------------------------------------------------------- embeddings
    def matrix(self) -> tuple[list[str], np.ndarray]:
        """All unit ids (unit order) and their normalised embeddings as an (n, dim) matrix (embeds missing ones)."""
        if self._matrix is None:
            missing = [uid for uid in self.units if uid not in self._vectors]
            if missing:
                vectors = np.asarray(self.embedder.embed([self.units[uid].text for uid in missing]), dtype=np.float32)
                if vectors.shape != (len(missing), self.dim):
                    raise ValueError(f"embedder {self.embedder.id} returned shape {vectors.shape}, "
                                     f"expected {(len(missing), self.dim)}")
                self._vectors.update(zip(missing, vectors, strict=True))
            ids = list(self.units)
            matrix = np.stack([self._vectors[uid] for uid in ids]) if ids else np.zeros((0, self.dim), np.float32)
            self._matrix = (ids, np.ascontiguousarray(matrix, dtype=np.float32))
        return self._matrix

    def vector(self, uid: str) -> np.ndarray:
        """One unit's embedding."""
        if uid not in self._vectors:
            self.matrix()
        return self._vectors[uid]

    def top_units(self, query: str, k: int) -> list[tuple[str, float]]:
        """The ``k`` units whose texts are most similar to ``query`` (cosine; exact FAISS inner-product search over
        the normalised embeddings), best first."""
        ids, matrix = self.matrix()
        if not ids or k <= 0:
            return []
        if self._index is None:
            self._index = faiss.IndexFlatIP(self.dim)
            self._index.add(matrix)
        q = np.ascontiguousarray(self.embedder.embed([query]), dtype=np.float32).reshape(1, self.dim)
        scores, rows = self._index.search(q, min(k, len(ids)))
        return [(ids[int(row)], float(score)) for score, row in zip(scores[0], rows[0], strict=True) if row >= 0]

    # ----------------------------------------------------------------- validation
    def validate(self) -> None:
        """Check the structure: roots exist, no edge goes up a layer, no cycle, every unit reachable from a root.

        Raises:
            GraphError: one line naming the first broken rule and where.
        """
        for skill_id, root in self.roots.items():
            if root not in self.units:
                raise GraphError(f"root of skill {skill_id} is unknown unit {root}")
        for parent, child in self.edges():
            if parent == child:
                raise GraphError(f"self-loop at unit {parent}")
            up, down = self.units[parent].layer, self.units[child].layer
            if DEPTH[down] < DEPTH[up]:
                raise GraphError(f"edge {parent} -> {child} goes up a layer ({up} -> {down}); a child must be on the "
                                 "same or a deeper layer")
        cycle = self.find_cycle()
        if cycle:
            raise GraphError("cycle: " + " -> ".join(cycle))
        reachable: set[str] = set()
        for root in self.roots.values():
            reachable.update(self.subtree(root))
        orphans = [uid for uid in self.units if uid not in reachable]
        if orphans:
            more = f" (and {len(orphans) - 1} more)" if len(orphans) > 1 else ""
            raise GraphError(f"unit {orphans[0]} is not reachable from any skill's root{more}")

    def find_cycle(self) -> list[str]:
        """A cycle as [u, ..., u] if the edges hold one, else [] (iterative depth-first search)."""
        state: dict[str, int] = {}  # 1: on the current path, 2: done
        for start in self.units:
            if start in state:
                continue
            path: list[str] = [start]
            iters: list[Iterator[str]] = [iter(self._children[start])]
            state[start] = 1
            while iters:
                child = next(iters[-1], None)
                if child is None:
                    state[path.pop()] = 2
                    iters.pop()
                elif state.get(child) == 1:
                    return [*path[path.index(child):], child]
                elif child not in state:
                    state[child] = 1
                    path.append(child)
                    iters.append(iter(self._children[child]))
        return []

    # ----------------------------------------------------------------- copies and counts
    def copy(self) -> SkillGraph:
        """A deep copy (units, edges, roots, notes, cached embeddings; skills shared as copies)."""
        out = SkillGraph(self.embedder, info=json.loads(json.dumps(self.info, default=str)))
        out.units = {uid: unit.model_copy(deep=True) for uid, unit in self.units.items()}
        out.skills = {sid: skill.model_copy(deep=True) for sid, skill in self.skills.items()}
        out.roots = dict(self.roots)
        out.routing_notes = list(self.routing_notes)
        out._children = {uid: list(kids) for uid, kids in self._children.items()}
        out._parents = {uid: list(ps) for uid, ps in self._parents.items()}
        out._vectors = dict(self._vectors)
        return out

    def counts(self) -> dict[str, Any]:
        """Units (total and by layer), edges, roots, shared units (more than one parent), notes."""
        by_layer = Counter(unit.layer for unit in self.units.values())
        return {"units": len(self.units), "by_layer": {layer: by_layer[layer] for layer in LAYERS},
                "edges": sum(len(kids) for kids in self._children.values()), "roots": len(self.roots),
                "shared_units": sum(len(ps) > 1 for ps in self._parents.values()),
                "routing_notes": len(self.routing_notes)}

    # ----------------------------------------------------------------- persistence
    def manifest(self) -> dict[str, Any]:
        """The manifest saved with the graph."""
        return {"format_version": FORMAT_VERSION, "kind": KIND, "embedder": str(self.embedder.id), "dim": self.dim,
                "counts": self.counts(), "info": self.info}

    def save(self, path: str | Path) -> Path:
        """Validate, then write the graph folder atomically (temp sibling folder swapped in by renames).

        Raises:
            GraphError: the graph is invalid (nothing is written).
            InputError: ``path`` exists and is a non-empty folder that is not a saved folder.
        """
        self.validate()
        ids, matrix = self.matrix()

        def write(folder: Path) -> None:
            atomic_write_text(folder / UNITS, "".join(unit.model_dump_json() + "\n" for unit in self.units.values()))
            atomic_write_text(folder / EDGES, "".join(json.dumps({"parent": p, "child": c}) + "\n"
                                                      for p, c in self.edges()))
            atomic_write_text(folder / ROOTS, "".join(json.dumps({"skill": s, "unit": u}) + "\n"
                                                      for s, u in self.roots.items()))
            export_skills(self.skills.values(), folder / SKILLS)
            buffer = io.BytesIO()
            np.save(buffer, matrix, allow_pickle=False)
            (folder / EMBEDDINGS).write_bytes(buffer.getvalue())
            atomic_write_text(folder / NOTES, json.dumps(self.routing_notes, indent=1, ensure_ascii=False) + "\n")
            atomic_write_text(folder / MANIFEST, json.dumps(self.manifest(), indent=2, default=str) + "\n")

        return replace_folder(path, write, what="skill graph")

    @classmethod
    def load(cls, path: str | Path, embedder: Any) -> SkillGraph:
        """Load and validate a saved graph folder; the embedder must have the id the graph was built with.

        Raises:
            InputError: missing folder or files, another format version or embedder, corrupt lines (file:line).
            GraphError: the loaded structure breaks a rule.
        """
        path = Path(path)
        if not path.is_dir():
            raise InputError("skill graph folder not found", path=path)
        if not (path / MANIFEST).is_file():
            raise InputError(f"not a saved skill graph: {MANIFEST} is missing", path=path)
        try:
            manifest = json.loads(read_text(path / MANIFEST))
            kind, version, embedder_id = manifest["kind"], manifest["format_version"], manifest["embedder"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise InputError(f"corrupt manifest ({type(exc).__name__}: {exc})", path=path / MANIFEST) from None
        if kind != KIND:
            raise InputError(f"not a saved skill graph (manifest kind {kind!r})", path=path)
        if version != FORMAT_VERSION:
            raise InputError(f"skill graph format_version {version!r} is not supported (this version reads "
                             f"{FORMAT_VERSION})", path=path)
        if embedder_id != str(embedder.id):
            raise InputError(f"skill graph was built with embedder {embedder_id!r} but the given embedder is "
                             f"{embedder.id!r}; load it with the same embedder", path=path)
        graph = cls(embedder, info=manifest.get("info") or {})
        units = [(number, Unit.model_validate(row)) for number, row in _rows(path / UNITS, Unit)]
        try:
            matrix = np.load(path / EMBEDDINGS, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read {EMBEDDINGS} ({exc})", path=path) from None
        if matrix.shape != (len(units), graph.dim):
            raise InputError(f"{EMBEDDINGS} has shape {matrix.shape} but there are {len(units)} units of dim "
                             f"{graph.dim}", path=path)
        for (number, unit), vector in zip(units, matrix, strict=True):
            try:
                graph.add_unit(unit, vector)
            except GraphError as exc:
                raise GraphError(str(exc), path=path / UNITS, line=number) from None
        skills = {skill.id: skill for skill, _ in read_jsonl(path / SKILLS)} if (path / SKILLS).is_file() else {}
        for number, row in _rows(path / EDGES):
            try:
                graph.add_edge(str(row["parent"]), str(row["child"]))
            except KeyError as exc:
                raise InputError(f"edge needs 'parent' and 'child' (missing {exc})", path=path / EDGES,
                                 line=number) from None
            except GraphError as exc:
                raise GraphError(str(exc), path=path / EDGES, line=number) from None
        for number, row in _rows(path / ROOTS):
            skill_id, root = str(row.get("skill")), str(row.get("unit"))
            if root not in graph.units:
                raise GraphError(f"root of skill {skill_id} is unknown unit {root}", path=path / ROOTS, line=number)
            graph.skills[skill_id] = skills.get(skill_id) or _stub_skill(skill_id, graph.units[root])
            graph.roots[skill_id] = root
        if (path / NOTES).is_file():
            notes = _json(path / NOTES)
            if not isinstance(notes, list) or not all(isinstance(note, str) for note in notes):
                raise InputError("routing notes must be a JSON list of strings", path=path / NOTES)
            graph.routing_notes = notes
        try:
            graph.validate()
        except GraphError as exc:
            raise GraphError(str(exc), path=path) from None
        return graph


def _json(path: Path) -> Any:
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"broken JSON: {exc.msg}", path=path, line=exc.lineno) from None


def _rows(path: Path, model: type[BaseModel] | None = None) -> Iterable[tuple[int, dict[str, Any]]]:
    """(line number, JSON object) for each line of a JSONL file; a broken line (or one ``model`` rejects) is an error
    naming file:line."""
    if not path.is_file():
        raise InputError(f"{path.name} is missing", path=path.parent)
    for number, raw in enumerate(read_text(path).split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
            if not isinstance(row, dict):
                raise TypeError(f"expected a JSON object, got {type(row).__name__}")
            if model is not None:
                model.model_validate(row)
        except (json.JSONDecodeError, TypeError) as exc:
            raise InputError(f"broken line: {exc}", path=path, line=number) from None
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(part) for part in err["loc"]) or "unit"
            raise InputError(f"field {field!r}: {err['msg']}", path=path, line=number) from None
        yield number, row


def _stub_skill(skill_id: str, root: Unit) -> Skill:
    """A source skill the folder does not hold (e.g. a hand-built graph): named by its id, described by its root."""
    return Skill(id=skill_id, name=skill_id, description=root.text, body="")

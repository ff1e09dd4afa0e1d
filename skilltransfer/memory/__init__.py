"""Skill memory: embedders, the FAISS-backed SkillMemory (and JointMemory: a frozen library beside it), library
import/export (Agent Skills folders, JSONL, memory folders), package reads and writes, and library organisations (the
`Skill` model itself, a package with contracts and resources, is `skilltransfer.skill`, re-exported here)."""

from skilltransfer.memory.embedders import CachedEmbedder, HashEmbedder, make_embedder
from skilltransfer.memory.export import export_library
from skilltransfer.memory.joint import JointMemory
from skilltransfer.memory.library import export_jsonl, export_skill_md, load_library, materialize_skill, read_library
from skilltransfer.memory.organization import (
    LibraryView,
    NodeNotFound,
    Organization,
    RoutingNode,
    load_organization,
    save_organization,
    task_tree,
)
from skilltransfer.memory.package import PackageWriteError
from skilltransfer.memory.store import MemoryConfig, ReadOnlyMemoryError, SkillMemory
from skilltransfer.memory.validate import validate_code_skill
from skilltransfer.skill import AddResult, Skill

__all__ = [
    "AddResult",
    "CachedEmbedder",
    "HashEmbedder",
    "JointMemory",
    "LibraryView",
    "MemoryConfig",
    "NodeNotFound",
    "Organization",
    "PackageWriteError",
    "ReadOnlyMemoryError",
    "RoutingNode",
    "Skill",
    "SkillMemory",
    "export_jsonl",
    "export_library",
    "export_skill_md",
    "load_library",
    "load_organization",
    "make_embedder",
    "materialize_skill",
    "read_library",
    "save_organization",
    "task_tree",
    "validate_code_skill",
]

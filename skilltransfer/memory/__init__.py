"""Skill memory: the Skill model (a package with contracts and resources), embedders, the FAISS-backed SkillMemory,
library import/export, and library organisations."""

from skilltransfer.memory.embedders import CachedEmbedder, HashEmbedder, make_embedder
from skilltransfer.memory.library import export_jsonl, export_skill_md, load_library, materialize_skill
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
from skilltransfer.memory.skill import Skill
from skilltransfer.memory.store import AddResult, MemoryConfig, ReadOnlyMemoryError, SkillMemory
from skilltransfer.memory.validate import validate_code_skill

__all__ = [
    "AddResult",
    "CachedEmbedder",
    "HashEmbedder",
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
    "export_skill_md",
    "load_library",
    "load_organization",
    "make_embedder",
    "materialize_skill",
    "save_organization",
    "task_tree",
    "validate_code_skill",
]

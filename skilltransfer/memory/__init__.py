"""Skill memory: the Skill model, embedders, the FAISS-backed SkillMemory, and library import/export."""

from skilltransfer.memory.embedders import CachedEmbedder, HashEmbedder, make_embedder
from skilltransfer.memory.library import export_jsonl, export_skill_md, load_library, materialize_skill
from skilltransfer.memory.package import PackageWriteError
from skilltransfer.memory.skill import Skill
from skilltransfer.memory.store import AddResult, MemoryConfig, ReadOnlyMemoryError, SkillMemory
from skilltransfer.memory.validate import validate_code_skill

__all__ = [
    "AddResult",
    "CachedEmbedder",
    "HashEmbedder",
    "MemoryConfig",
    "PackageWriteError",
    "ReadOnlyMemoryError",
    "Skill",
    "SkillMemory",
    "export_jsonl",
    "export_skill_md",
    "load_library",
    "make_embedder",
    "materialize_skill",
    "validate_code_skill",
]

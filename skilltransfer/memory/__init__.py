"""Skill memory: embedders, the FAISS-backed SkillMemory, and library import/export (the `Skill` model itself is
`skilltransfer.skill`, re-exported here)."""

from skilltransfer.memory.embedders import CachedEmbedder, HashEmbedder, make_embedder
from skilltransfer.memory.library import export_jsonl, export_skill_md, load_library
from skilltransfer.memory.store import MemoryConfig, ReadOnlyMemoryError, SkillMemory
from skilltransfer.memory.validate import validate_code_skill
from skilltransfer.skill import AddResult, Skill

__all__ = [
    "AddResult",
    "CachedEmbedder",
    "HashEmbedder",
    "MemoryConfig",
    "ReadOnlyMemoryError",
    "Skill",
    "SkillMemory",
    "export_jsonl",
    "export_skill_md",
    "load_library",
    "make_embedder",
    "validate_code_skill",
]

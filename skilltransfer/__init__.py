"""skilltransfer: cross-task skill transfer in LLM agents (induction, memory, retrieval, metrics)."""

__version__ = "0.1.0"

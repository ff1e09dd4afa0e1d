"""Multi-granularity skill reuse (SkillLens): a hierarchical skill graph, routing over it, and registry evolution.

- `graph`: units on four layers with shared children, saved as a folder with its embeddings and routing notes;
- `decompose`: an LLM-driven library -> graph build, with retries, a model-free fallback and near-duplicate merging;
- `walk` and `route`: seeds by embedding, a degree-corrected random walk, the verifier's ACCEPT / DECOMPOSE / REWRITE /
  SKIP routing and the budgeted context (``route(graph, query, model, config) -> RoutedContext``);
- `evolve`: rounds of gap reports -> writer edits -> validation, committed only when J rises.
"""

from skilltransfer.lens.decompose import DecomposeConfig, Decomposer, DecomposeRecord, decompose_library
from skilltransfer.lens.evolve import (
    Edit,
    EvolutionResult,
    EvolveConfig,
    GapReport,
    ModelWriter,
    TaskOutcome,
    WriterConfig,
    apply_edits,
    evolve,
    gap_reports,
    save_evolution,
)
from skilltransfer.lens.graph import LAYERS, GraphError, SkillGraph, Unit
from skilltransfer.lens.route import ROUTE_MODES, RouteConfig, RoutedContext, RouteLog, route
from skilltransfer.lens.walk import WalkConfig, expand

__all__ = [
    "LAYERS", "ROUTE_MODES", "DecomposeConfig", "DecomposeRecord", "Decomposer", "Edit", "EvolutionResult",
    "EvolveConfig", "GapReport", "GraphError", "ModelWriter", "RouteConfig", "RouteLog", "RoutedContext", "SkillGraph",
    "TaskOutcome", "Unit", "WalkConfig", "WriterConfig", "apply_edits", "decompose_library", "evolve", "expand",
    "gap_reports", "route", "save_evolution",
]

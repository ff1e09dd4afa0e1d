"""The harness: small-model features as guards at named hook points of the agent loops, and the presets that choose
them (``paper``, ``small-model``, ``custom``). `skilltransfer.agents.harness.base` holds the seam (decisions, the
`Guard` base, `Harness`), `skilltransfer.agents.harness.presets` the registry and resolution. The guards live in
modules named for the hooks they serve: `reply_forms` (sampling, reply, code form), `worked_example` (the executor's
and planner's openings), `observations` (step observed: error hints, stuck detection), `completion` (a claimed DONE,
SUBTASK DONE or ``complete_task``), `planning` (what the planner reads and plans: history, summary, proposed
subtasks) and `memory` (retrieval, induction); `grounding` holds the checks several of them share."""

from skilltransfer.agents.decisions import ACCEPT, Accept, Decision, End, Refuse, Rewrite
from skilltransfer.agents.harness.presets import (
    BY_NAME,
    GUARDS,
    HARNESS_NAMES,
    PRESETS,
    GuardSpec,
    HarnessName,
    default_preset,
    expected_features,
    harness_label,
    is_resolved,
    make_harness,
    preset_guards,
    resolve_agent,
    resolve_for,
    stream_features,
)
from skilltransfer.log import GuardRecord

__all__ = [
    "ACCEPT", "BY_NAME", "GUARDS", "HARNESS_NAMES", "PRESETS", "Accept", "Decision", "End", "GuardRecord", "GuardSpec",
    "HarnessName", "Refuse", "Rewrite", "default_preset", "expected_features", "harness_label", "is_resolved",
    "make_harness", "preset_guards", "resolve_agent", "resolve_for", "stream_features",
]

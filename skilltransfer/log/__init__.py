"""The run log: the files of one stream run, their typed records, and every read and write of them. It imports
nothing of the runner, the agents, the report or the models, so everything that reads runs (``show``, ``view``,
``report``, ``judge``, ``export``, `skilltransfer.load_runs`, the library commands, a notebook) reads through it.

**The folder.** A run is a folder ``<runs_dir>/<run>/``, every file with a ``format_version``, every write atomic (the
JSONL files are appended, a line per write); `RunFolder` reads and writes it, and only this package names its files:

- ``config.json`` (`RunConfigLog`): the stream's settings (`skilltransfer.settings.StreamConfig.recorded`: typed
  env, model, condition, every axis, limits, agent and memory settings), the derived agent/induction settings,
  prompt ids, the embedder id and the stream's task ids; a ``library_filter`` stream adds the utility it ranked its
  library by (`LibraryUtility`). The log reads the settings as JSON objects (`RunFolder.read_config`); typed, they
  are `skilltransfer.settings.RunSettings` (`skilltransfer.settings.read_run_settings`);
- ``results.jsonl`` (one `TaskRecord` per finished task, in stream order): the commit point. A task's line is
  appended in one write (a commit costs the same at the stream's last task as at its first); a partial last line,
  from an append cut off, is no committed task: readers skip it and `RunFolder.start` cuts it off;
- ``trajectories/<task_id>.json`` (`TrajectoryLog`; ids made file-name safe by `safe_task_id`), rewritten while the
  task runs (status "running"), once more if an error ends it ("aborted"), and when it is scored ("finished"); its
  steps read back typed through `read_steps` (`ActionStep`, `PlanStep`, `RetrievalStep`, `SummaryStep`,
  `InductionStep`, with the harness's records, `GuardRecord`);
- ``artifacts/<task file>.json``: the task's final artifacts (`skilltransfer.envs.artifacts.episode_artifacts`: the
  answer and the workspace files it added, changed or deleted, as text), written before the task is committed; what
  ``skilltransfer judge`` reads;
- ``plans/`` (coordinated streams, unless ``plans`` names a shared folder): one frozen plan per task;
- ``memory/``: the skill memory after the last committed task (its own files: `skilltransfer.memory`);
- ``prompts.jsonl`` (`PromptStore`): what the model saw and said. Every message of every model call and every raw
  reply, each stored once by content id (a system prompt sent in 50 calls is one line); a trajectory's
  ``calls[i]`` (`ModelCall`) names its prompt as ``messages`` (ids, in order) and its reply as ``reply`` (an id);
  `RunFolder.call_prompts` reads them back. Lines are appended, and flushed before the trajectory that names them is
  written; an append cut off by a crash leaves a partial last line that readers skip and `RunFolder.start` cuts off.

**Committing a task** (`RunFolder.commit`): its trajectory, a memory snapshot (``memory.next`` plus the marker
``memory.next.task`` naming the task), the results file with the task's line (the commit point), then the snapshot
replaces ``memory``. `RunFolder.recover_memory` finishes or undoes an interrupted commit, so a resumed run starts from
exactly the memory after its last committed task.

**Versions.** `FORMAT_VERSION` is 2. Folders of the old format (1: env and model recorded as strings) are read
through `skilltransfer.log.legacy` for ``show`` and ``report``; resuming one is refused with one line. Settings
renamed within format 2 read by their new names (`RENAMED_KEYS`); steps of format 1 read as guard records.

**Modules.** `records` (the typed records), `folder` (`RunFolder` and the file names), `prompts` (`PromptStore`),
`selection` (picks: which skills a task was shown and chose), `steps` (the trajectory's step types),
`trajectory_io` (reading steps back), `legacy` (format 1), `provenance` (what a run ran on, kept in
``config.json``).

JSONL is split on ``\\n`` only (`skilltransfer.util.files.iter_jsonl`): pydantic writes U+2028 and its kin unescaped,
and ``str.splitlines`` would break such a line in two.
"""

from skilltransfer.log.folder import (
    ARTIFACTS,
    CONFIG,
    MAX_RESULTS_BYTES,
    MEMORY,
    PLANS,
    PROMPTS,
    RENAMED_KEYS,
    RESULTS,
    TRAJECTORIES,
    RunFolder,
    memory_folder,
    parse_trajectory,
    safe_task_id,
)
from skilltransfer.log.prompts import MAX_PROMPTS_BYTES, PromptStore, message_id, reasoning_message, reply_message
from skilltransfer.log.records import (
    FORMAT_VERSION,
    TASK_ERROR,
    TASK_TIMEOUT,
    USED_SHARE,
    CoordinationRecord,
    Exposure,
    InducedSkill,
    LibraryUtility,
    RetrievedSkill,
    RouteRecord,
    RunConfigData,
    RunConfigLog,
    TaskRecord,
    TrajectoryLog,
    TrajectoryStatus,
    ranked,
)
from skilltransfer.log.selection import PICK_KINDS, LibraryDraw, PickKind, SkillPick, first_pick, picks_from_steps
from skilltransfer.log.steps import (
    ActionStep,
    GuardRecord,
    InductionStep,
    MessageStep,
    ModelCall,
    PlanStep,
    RetrievalStep,
    Step,
    SummaryStep,
)
from skilltransfer.log.trajectory_io import STEP_TYPES, ReadStep, UnknownStep, read_step, read_steps

__all__ = [
    "ARTIFACTS", "CONFIG", "FORMAT_VERSION", "MAX_PROMPTS_BYTES", "MAX_RESULTS_BYTES", "MEMORY", "PLANS", "PROMPTS",
    "RENAMED_KEYS", "RESULTS", "STEP_TYPES", "TASK_ERROR", "TASK_TIMEOUT", "TRAJECTORIES", "USED_SHARE", "ActionStep",
    "PICK_KINDS", "CoordinationRecord", "Exposure", "GuardRecord", "InducedSkill", "InductionStep", "LibraryDraw",
    "LibraryUtility", "MessageStep", "ModelCall", "PickKind", "PlanStep", "PromptStore", "ReadStep", "RetrievedSkill",
    "RetrievalStep", "RouteRecord", "RunConfigData", "RunConfigLog", "RunFolder", "SkillPick", "Step", "SummaryStep",
    "TaskRecord", "TrajectoryLog", "TrajectoryStatus", "UnknownStep", "first_pick", "memory_folder", "message_id",
    "parse_trajectory", "picks_from_steps", "ranked", "read_step", "read_steps", "reasoning_message", "reply_message",
    "safe_task_id",
]

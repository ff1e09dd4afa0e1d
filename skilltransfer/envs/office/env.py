"""``OfficeEnv``: generated OfficeBench-like tasks, or the real OfficeBench instances, on per-episode file testbeds."""

from __future__ import annotations

import logging
import random
import re
import tempfile
from pathlib import Path
from typing import Any

from skilltransfer.envs.base import WorkspaceEpisode, temporary_workdir
from skilltransfer.envs.office.checks import CheckContext, run_checks
from skilltransfer.envs.office.docs_example import example_for
from skilltransfer.envs.office.office_tools import files
from skilltransfer.envs.office.office_tools.apps import docs_overview
from skilltransfer.envs.office.officebench import RealTask, load_officebench, resolve_root
from skilltransfer.envs.office.templates import TEMPLATES, Draft, Template
from skilltransfer.envs.office.world import materialize
from skilltransfer.errors import InputError
from skilltransfer.protocols import Score, TaskSpec
from skilltransfer.sandbox import Limits
from skilltransfer.sandbox.scratch import remove_tree
from skilltransfer.util.trees import copy_tree

SETUP = "office_tools.apps:setup"
PACKAGES = {"office_tools": "skilltransfer.envs.office.office_tools"}
"""The agent-side package (apps over the testbed's files), importable as ``office_tools`` in the sandbox."""
DEV_FRACTION = 0.25
log = logging.getLogger("skilltransfer.envs.office")


TESTBED_MAX_BYTES = 512 << 20
"""The most a real task's testbed copy may hold (it is copied into every episode's workspace)."""


class NoReferenceSolutionError(LookupError):
    """The task (a real OfficeBench instance) ships no reference solution, only its checks."""


class OfficeEnv:
    """Office workflows over emails, calendars, Word, Excel, PDF and images.

    Args:
        seed: drives task generation and the dev/test split (same seed, same tasks and files).
        workdir: where episode workspaces are created (default: a fresh temporary folder).
        sandboxed: run agent code in the sandbox (default) or in-process (tests).
        limits: sandbox limits (``skilltransfer.sandbox.Limits``).
        source: ``"generated"`` (default), ``"officebench"`` (``$OFFICEBENCH_ROOT``) or ``"officebench:<path>"``.
        per_template: generated tasks per template (16 templates; 14 gives 224 tasks).
        keep: keep workspaces after episodes close.
        docs_example: end an episode's docs with the worked example of API use of the task's first app that has one
            (excel, calendar or email; see ``docs_example``), which the executor replays as chat turns, and its plan,
            which only the planner sees.
    """

    name = "office"
    official_metric = "success"
    """The benchmark's official score (`report`'s default metric for this env):
    OfficeBench's pass/fail: every check passes."""

    def __init__(self, *, seed: int = 0, workdir: Path | None = None, sandboxed: bool = True, limits: Any = None,
                 source: str = "generated", per_template: int = 14, keep: bool = False,
                 docs_example: bool = True) -> None:
        self.seed = seed
        self.docs_example = docs_example
        self.sandboxed = sandboxed
        self.limits = limits
        self.keep = keep
        self.source = source
        self._workdir = Path(workdir) if workdir is not None else None
        self._generated: dict[str, tuple[Template, Draft]] = {}
        self._real: dict[str, RealTask] = {}
        self._specs: list[TaskSpec] = []
        if source == "generated":
            if per_template < 1:
                raise InputError(f"per_template must be >= 1, got {per_template}")
            self._specs = self._generate(per_template)
        elif source == "officebench" or source.startswith("officebench:"):
            self._specs = self._load_real(resolve_root(source))
        else:
            raise InputError(f"unknown office source {source!r}: use 'generated', 'officebench' or "
                             "'officebench:<tasks folder>'")

    # ------------------------------------------------------------------ tasks

    def _generate(self, per_template: int) -> list[TaskSpec]:
        specs = []
        for template in TEMPLATES:
            dev = set(random.Random(f"office:{self.seed}:split:{template.name}").sample(
                range(per_template), int(per_template * DEV_FRACTION)))
            for k in range(per_template):
                draft = template.make(random.Random(f"office:{self.seed}:{template.name}:{k}"))
                task_id = f"{template.name}/{k}"
                metadata = {"source": "generated", "subprocedures": list(template.subprocedures),
                            "username": draft.user, "now": draft.now, "requires": list(draft.requires),
                            "has_reference_solution": True}
                specs.append(TaskSpec(id=task_id, instruction=draft.instruction, difficulty=len(template.apps),
                                      template=template.name, apps=template.apps,
                                      split="dev" if k in dev else "test", metadata=metadata))
                self._generated[task_id] = (template, draft)
        return specs

    def _load_real(self, root: Path) -> list[TaskSpec]:
        real = load_officebench(root)
        ids = [task.spec.id for task in real]
        dev = set(random.Random(f"office:{self.seed}:officebench-split").sample(ids, int(len(ids) * DEV_FRACTION)))
        specs = []
        for task in real:
            metadata = {**task.spec.metadata, "has_reference_solution": False,
                        "requires": ["tesseract"] if task.spec.metadata["needs_ocr"] else []}
            spec = TaskSpec(id=task.spec.id, instruction=task.spec.instruction, difficulty=task.spec.difficulty,
                            template=task.spec.template, apps=task.spec.apps,
                            split="dev" if task.spec.id in dev else "test", metadata=metadata)
            self._real[spec.id] = RealTask(spec=spec, folder=task.folder, evaluation=task.evaluation)
            specs.append(spec)
        return specs

    def tasks(self, split: str | None = None) -> list[TaskSpec]:
        """The task list (deterministic from the seed), optionally only the "dev" or "test" split."""
        if split not in (None, "dev", "test"):
            raise InputError(f"split must be 'dev' or 'test', got {split!r}")
        return [spec for spec in self._specs if split is None or spec.split == split]

    @property
    def streams(self) -> dict[str, tuple[str, ...]]:
        """Curated streams (``skilltransfer run --stream NAME``): ``multi-app`` is every test-split task over two or
        more apps (difficulty >= 2), in task order: the multi-skill tasks of the composition study
        (``experiments/composition.yaml``, which induces its skills on the dev split)."""
        return {"multi-app": tuple(s.id for s in self._specs if s.difficulty >= 2 and s.split == "test")}

    def task(self, task_id: str) -> TaskSpec:
        """One task by id."""
        for spec in self._specs:
            if spec.id == task_id:
                return spec
        raise InputError(f"unknown office task id {task_id!r}")

    # ------------------------------------------------------------------ episodes

    @property
    def workdir(self) -> Path:
        if self._workdir is None:
            self._workdir = temporary_workdir("skilltransfer-office-")
        self._workdir.mkdir(parents=True, exist_ok=True)
        return self._workdir

    def docs(self, task: TaskSpec | None = None) -> str:
        """The API overview an agent reads; for ``task``, ending with its apps' worked example (see
        ``docs_example``)."""
        example = example_for(task.apps) if task is not None and self.docs_example else None
        return f"{docs_overview()}\n\n{example}" if example is not None else docs_overview()

    def start(self, task: TaskSpec) -> WorkspaceEpisode:
        """A fresh workspace with the task's testbed, and an episode over it."""
        slug = re.sub(r"[^\w.-]+", "_", task.id)
        workspace = Path(tempfile.mkdtemp(prefix=f"{slug}-", dir=self.workdir))
        if task.id in self._generated:
            _, draft = self._generated[task.id]
            materialize(draft.plan, workspace, files.parse_event_time(draft.now))
        elif task.id in self._real:
            real = self._real[task.id]
            if real.testbed.is_dir():  # no link followed: a testbed file linked to a host file is left out
                left = copy_tree(real.testbed, workspace, max_bytes=TESTBED_MAX_BYTES, mode_mask=0o755)
                if left:
                    log.warning("task %s: testbed files not copied: %s", task.id, "; ".join(left[:10]))
            for folder in ("data", "emails", "calendar"):
                (workspace / folder).mkdir(exist_ok=True)
        else:
            raise InputError(f"task {task.id!r} does not belong to this office env (source {self.source!r})")
        setup_kwargs = {"now": task.metadata["now"], "username": task.metadata["username"]}
        return WorkspaceEpisode(task, workspace, setup=SETUP, setup_kwargs=setup_kwargs, packages=PACKAGES,
                                docs=self.docs(task), sandboxed=self.sandboxed, limits=self.limits, keep=self.keep,
                                evaluator=lambda ws, submission: self.evaluate(task, ws, submission.answer))

    def evaluate(self, task: TaskSpec, workspace: Path, answer: Any = None) -> Score:
        """Run the task's checks on a workspace (harness side; files are read defensively)."""
        limits = self.limits or Limits()  # checks of task data over agent-written files: time- and memory-bound
        if task.id in self._real:
            real = self._real[task.id]
            ctx = CheckContext(Path(workspace), answer, task_dir=real.folder, pristine=lambda: real.testbed)
            return run_checks(ctx, real.evaluation, limits)
        _, draft = self._generated[task.id]
        made: list[Path] = []

        def pristine() -> Path:
            if not made:
                made.append(temporary_workdir("office-pristine-"))
                materialize(draft.plan, made[0], files.parse_event_time(draft.now))
            return made[0]

        if any(item.get("function") == "evaluate_diff_contain_text" for item in draft.evaluation):
            pristine()  # made here, not in a check's child, so that it is removed below
        try:
            return run_checks(CheckContext(Path(workspace), answer, pristine=pristine), draft.evaluation, limits)
        finally:
            for folder in made:
                remove_tree(folder)

    # ------------------------------------------------------------------ solutions

    def reference_solution(self, task: TaskSpec) -> str:
        """Python action code that solves a generated task (real OfficeBench tasks have none)."""
        if task.id in self._real:
            raise NoReferenceSolutionError(
                f"OfficeBench task {task.id} has no reference solution: the benchmark ships only its checks")
        if task.id not in self._generated:
            raise InputError(f"unknown office task id {task.id!r}")
        return self._generated[task.id][1].solution

    def decoy_solution(self, task: TaskSpec) -> str:
        """A plausible but wrong solution of a generated task (for tests of the checks; never shown to agents)."""
        if task.id not in self._generated:
            raise NoReferenceSolutionError(f"task {task.id} has no decoy solution (only generated tasks do)")
        return self._generated[task.id][1].decoy

    @staticmethod
    def ocr_available() -> bool:
        """Whether OCR tasks can be solved here (Debian's tesseract-ocr and pytesseract installed)."""
        return files.tesseract_available()

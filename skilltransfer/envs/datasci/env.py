"""``DataSciEnv``: KramaBench-like data-science questions over generated, realistically messy domain files."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path
from typing import Any

from skilltransfer.envs.base import WorkspaceEpisode, temporary_workdir
from skilltransfer.envs.datasci.api import docs_text
from skilltransfer.envs.datasci.domains import DOMAINS
from skilltransfer.envs.datasci.scoring import SuccessRule, score_answer
from skilltransfer.envs.datasci.solutions import assemble
from skilltransfer.envs.datasci.templates import TEMPLATES, Question
from skilltransfer.envs.datasci.world import World, generate_world
from skilltransfer.errors import InputError
from skilltransfer.protocols import Score, TaskSpec

SETUP = "datasci_tools.apps:setup"
PACKAGES = {"datasci_tools": "skilltransfer.envs.datasci.datasci_tools"}
"""The agent-side package (the file app), importable as ``datasci_tools`` in the sandbox."""
MAX_ATTEMPTS = 200


def difficulty(n_subprocedures: int) -> int:
    """Difficulty from pipeline length: up to 3 sub-procedures -> 1, 4-5 -> 2, 6 or more -> 3."""
    return 1 if n_subprocedures <= 3 else 2 if n_subprocedures <= 5 else 3


class DataSciEnv:
    """Data-science questions over six scientific domains, answered by multi-step pandas pipelines.

    Args:
        seed: world and task generation seed.
        workdir: where episode workspaces are created (default: a temporary folder).
        sandboxed: run agent code in the sandbox (default) or in-process (tests).
        limits: sandbox limits, passed through.
        instances_per_template: questions per (domain, template) pair; 2 gives 132 tasks.
        dev_every: every n-th task of the stream is in the "dev" split, the rest in "test".
        keep: keep episode workspaces after close.
        success_thresholds: answer type -> minimal KramaBench score for success, over ``DEFAULT_THRESHOLDS``
            (see ``skilltransfer.envs.datasci.scoring``).
        docs_example: end the docs with a worked example (``skilltransfer.envs.datasci.api.EXAMPLE``), which the
            executor replays as chat turns.
    """

    name = "datasci"
    official_metric = "reward"
    """The benchmark's official score (`report`'s default metric for this env):
    KramaBench's mean partial score: the per-answer-type score in [0, 1]."""

    def __init__(self, *, seed: int = 0, workdir: Path | None = None, sandboxed: bool = True, limits: Any = None,
                 instances_per_template: int = 2, dev_every: int = 5, keep: bool = False,
                 success_thresholds: dict[str, float] | None = None, docs_example: bool = True) -> None:
        if instances_per_template < 1 or dev_every < 1:
            raise InputError("instances_per_template and dev_every must be >= 1")
        if success_thresholds is not None and not isinstance(success_thresholds, dict):
            raise InputError("success_thresholds must be a JSON object: answer type -> threshold")
        self.success_rule = SuccessRule(success_thresholds or {})
        self.docs_example = docs_example
        self.seed = seed
        self.sandboxed = sandboxed
        self.limits = limits
        self.keep = keep
        self._workdir = Path(workdir) if workdir is not None else None
        self.world: World = generate_world(seed)
        self._tasks: list[TaskSpec] = []
        self._questions: dict[str, Question] = {}
        self._build(instances_per_template, dev_every)

    def _build(self, instances: int, dev_every: int) -> None:
        specs: list[tuple[TaskSpec, Question]] = []
        for domain in DOMAINS:
            data = self.world.domains[domain.name]
            for template, make in TEMPLATES.items():
                rng = random.Random(f"datasci-tasks:{self.seed}:{domain.name}:{template}")
                seen: set[str] = set()
                for _ in range(MAX_ATTEMPTS):
                    if len(seen) == instances:
                        break
                    question = make(data, rng)
                    if question is None or question.instruction in seen:
                        continue
                    seen.add(question.instruction)
                    task_id = f"datasci-{domain.name}-{template}-{len(seen)}"
                    specs.append((TaskSpec(
                        id=task_id,
                        instruction=f"{question.instruction} See {data.folder}/README.md for the data conventions.",
                        difficulty=difficulty(len(question.subprocedures)),
                        template=template,
                        apps=("files",),
                        metadata={
                            "domain": domain.name,
                            "subprocedures": list(question.subprocedures),
                            "subtask_questions": [q for q, _ in question.subtasks] + [question.instruction],
                            "answer_type": question.answer_type,
                            "files": [data.main_path, data.lookup_path],
                        },
                    ), question))
        random.Random(f"datasci-order:{self.seed}").shuffle(specs)
        for i, (spec, question) in enumerate(specs):
            split = "dev" if i % dev_every == 0 else "test"
            spec = TaskSpec(spec.id, spec.instruction, spec.difficulty, spec.template, spec.apps, split,
                            spec.metadata)
            self._tasks.append(spec)
            self._questions[spec.id] = question

    def tasks(self, split: str | None = None) -> list[TaskSpec]:
        """The task stream (deterministic order), optionally only one split ("dev" or "test")."""
        if split not in (None, "dev", "test"):
            raise InputError(f"unknown split {split!r}; expected 'dev' or 'test'")
        return [t for t in self._tasks if split is None or t.split == split]

    @property
    def streams(self) -> dict[str, tuple[str, ...]]:
        """Curated streams (``skilltransfer run --stream NAME``): ``multi-step`` is every test-split task whose pipeline
        has four or more sub-procedures (difficulty >= 2), in task order: the multi-skill tasks of the composition
        study (``experiments/composition.yaml``, which induces its skills on the dev split)."""
        return {"multi-step": tuple(s.id for s in self._tasks if s.difficulty >= 2 and s.split == "test")}

    def _question(self, task: TaskSpec | str) -> Question:
        task_id = task if isinstance(task, str) else task.id
        if task_id not in self._questions:
            raise InputError(f"unknown datasci task {task_id!r} for seed {self.seed}")
        return self._questions[task_id]

    def reference_solution(self, task: TaskSpec) -> str:
        """Pandas pipeline code that answers the task via ``complete_task(answer=...)`` (harness side only)."""
        question = self._question(task)
        return assemble(list(question.subprocedures), list(question.pipeline))

    def annotations(self, task: TaskSpec) -> list[dict[str, Any]]:
        """The annotated subtasks with their answers, the last being the task itself (harness side only)."""
        question = self._question(task)
        steps = [*question.subtasks, (question.instruction, question.answer)]
        return [{"question": q, "answer": a} for q, a in steps]

    def answer_key(self, task: TaskSpec) -> dict[str, Any]:
        """The expected answer and how it is scored (harness side only)."""
        q = self._question(task)
        return {"answer": q.answer, "answer_type": q.answer_type,
                "success_threshold": self.success_rule.threshold(q.answer_type)}

    def score(self, task: TaskSpec, answer: Any) -> Score:
        """Score an answer to ``task``: KramaBench's score, success per ``success_thresholds`` (see ``scoring``)."""
        q = self._question(task)
        return score_answer(answer, q.answer, q.answer_type, rule=self.success_rule)

    def start(self, task: TaskSpec) -> WorkspaceEpisode:
        """A fresh workspace holding the task domain's data files (its data lake), and an episode running in it."""
        self._question(task)
        if self._workdir is None:
            self._workdir = temporary_workdir("skilltransfer-datasci-")
        self._workdir.mkdir(parents=True, exist_ok=True)
        workspace = Path(tempfile.mkdtemp(prefix=f"{task.id}-", dir=self._workdir))
        self.world.write(workspace, [task.metadata["domain"]])
        return WorkspaceEpisode(task, workspace, setup=SETUP, packages=PACKAGES,
                                docs=docs_text(example=self.docs_example),
                                evaluator=lambda _ws, submission: self.score(task, submission.answer),
                                sandboxed=self.sandboxed, limits=self.limits, keep=self.keep)

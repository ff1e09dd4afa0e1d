"""Planted skill effects: does randomised masking plus the IPW estimator recover what each skill does?

A scripted world (defined below) through the real stream (`run_stream`, a frozen library, ``mask_rate``, the
masking retriever, the run log) and the real estimator (`report`'s ``skill_effects`` table code). The library has
``GROUPS`` topics of four skills; a task names one topic, so retrieval (top-4, hash embedder) gives that topic's four
skills as candidates. Within a topic one skill raises the task's success probability by +0.3 when it is shown, one
lowers it by 0.3 and two do nothing; the base probability is 0.5, so it stays in [0.2, 0.8] and each skill's effect
is exactly its planted value. The scripted agent reads the skill names in its prompt and submits them; the episode
succeeds when a uniform fixed by the task (and replicate) is below 0.5 + the planted effects of the skills shown.

Each replicate is one stream of ``--tasks-per-skill`` tasks per topic (so every skill is a candidate that often),
with its own masking seed and task uniforms. Over all replicates it prints, per planted class, how often the
estimate's sign is right (the +-0.3 skills), the 95 % CI's coverage of the planted value, the share of harmful
skills flagged and of the others flagged (false flags), then the tasks per skill the normal approximation says give
80 % power to flag a -0.3 skill at this mask rate, and last:

    skill effects: sign recovered S%, CI coverage C%, harmful flagged H%, false flags F%

    python benchmarks/skill_effects.py [--tasks-per-skill 200] [--replicates 20] [--mask-rate 0.5] [--groups 3]
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import re
import tempfile
import time
from pathlib import Path
from statistics import NormalDist
from typing import Any

import faiss

from skilltransfer.envs.base import Submission, WorkspaceEpisode
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.memory import HashEmbedder, Skill, export_jsonl
from skilltransfer.metrics.effects import skill_effects
from skilltransfer.protocols import Check, Score, TaskSpec
from skilltransfer.report.effects import task_draws
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import StreamConfig

BASE = 0.5
PLANTED = (0.3, -0.3, 0.0, 0.0)
"""The effects of a topic's four skills when shown."""
TOPICS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")
SKILL_WORDS = ("one", "two", "three", "four")


def uniform(*parts: Any) -> float:
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64


def planted_library(groups: int) -> tuple[list[Skill], dict[str, float]]:
    """The library and each skill name's planted effect."""
    skills, effects = [], {}
    for topic in TOPICS[:groups]:
        for word, effect in zip(SKILL_WORDS, PLANTED, strict=True):
            name = f"{topic}_{word}"
            skills.append(Skill(name=name, description=f"{topic} {topic} request procedure {word}",
                                body=f"1. Handle the {topic} request ({word})."))
            effects[name] = effect
    return skills, effects


class PlantedEnv:
    """Tasks that each name one topic; success is a coin whose probability the shown skills move (module docstring).

    Args:
        effects: skill name -> planted effect.
        groups: topics used.
        per_topic: tasks per topic.
        replicate: varies the task uniforms.
        workdir: where episode folders are made.
    """

    name = "planted"

    def __init__(self, effects: dict[str, float], groups: int, per_topic: int, replicate: int, workdir: Path) -> None:
        self.effects, self.groups, self.per_topic, self.replicate = effects, groups, per_topic, replicate
        self.workdir = workdir
        self._count = itertools.count()

    def tasks(self, split: str | None = None) -> list[TaskSpec]:
        topics = TOPICS[:self.groups]
        return [TaskSpec(id=f"planted/{i}", instruction=f"Handle the {topics[i % len(topics)]} request.",
                         difficulty=1, template=topics[i % len(topics)])
                for i in range(self.per_topic * len(topics))]

    def start(self, task: TaskSpec) -> WorkspaceEpisode:
        workspace = self.workdir / f"ep{next(self._count)}"
        workspace.mkdir(parents=True)
        u = uniform(self.replicate, task.id)

        def evaluate(ws: Path, submission: Submission) -> Score:
            shown = [name for name in str(submission.answer or "").split(",") if name in self.effects]
            p = BASE + sum(self.effects[name] for name in shown)
            ok = u < p
            return Score(reward=float(ok), success=ok, checks=(Check(f"u < {p:.2f}", ok, f"u = {u:.3f}"),))

        return WorkspaceEpisode(task, workspace, docs="complete_task(answer): finish with the skills you used.",
                                evaluator=evaluate, sandboxed=False)


def planted_agent(messages: list[dict[str, Any]]) -> str:
    """The scripted agent: submits the names of the skills its task prompt shows."""
    prompt = "\n".join(str(m["content"]) for m in messages if m["role"] == "user")
    names = sorted(set(re.findall(r"### Skill: (\w+)", prompt)))
    return f"Using the skills shown.\n```python\ncomplete_task(answer={','.join(names)!r})\n```"


def run_replicate(root: Path, replicate: int, *, groups: int, per_topic: int, mask_rate: float) -> list[Any]:
    """One masked stream; its records."""
    skills, effects = planted_library(groups)
    library = export_jsonl(skills, root / f"library{replicate}.jsonl")
    env = PlantedEnv(effects, groups, per_topic, replicate, root / f"work{replicate}")
    config = StreamConfig(run=f"rep{replicate}", runs_dir=str(root), condition="task+text", library=str(library),
                          embedder="hash:256", mask_rate=mask_rate, mask_seed=replicate,
                          agent={"top_k": len(PLANTED), "harness": "paper"}, memory={"validate_code": False})
    summary = run_stream(env, ScriptedModel(planted_agent), config, embedder=HashEmbedder(256))
    return summary.records


def tasks_for_power(mask_rate: float, effect: float = 0.3, power: float = 0.8, level: float = 0.05 / 4) -> int:
    """Tasks per skill for ``power`` to flag an effect of ``-effect`` one-sided at ``level`` (the Benjamini-Hochberg
    threshold when one in four skills is harmful), normal approximation with Bernoulli(0.5) outcomes."""
    z = NormalDist().inv_cdf(1 - level) + NormalDist().inv_cdf(power)
    variance = 0.25 / (1 - mask_rate) + 0.25 / mask_rate  # per task: shown and withheld arms
    return int(z * z * variance / effect ** 2) + 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks-per-skill", type=int, default=200)
    parser.add_argument("--replicates", type=int, default=20)
    parser.add_argument("--mask-rate", type=float, default=0.5)
    parser.add_argument("--groups", type=int, default=3, choices=range(1, len(TOPICS) + 1))
    args = parser.parse_args()
    faiss.omp_set_num_threads(1)  # 12-24 vectors: threads only add contention (this script's own process)
    _, effects = planted_library(args.groups)
    tally = {"sign": [0, 0], "cover": [0, 0], "harm": [0, 0], "false": [0, 0]}
    by_class: dict[float, list[int]] = {e: [0, 0, 0, 0] for e in set(PLANTED)}  # sign ok, covered, flagged, n
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="skill-effects-") as tmp:
        for rep in range(args.replicates):
            records = run_replicate(Path(tmp), rep, groups=args.groups, per_topic=args.tasks_per_skill,
                                    mask_rate=args.mask_rate)
            names = {r.skill_id: r.name for record in records for r in record.retrieved}
            for row in skill_effects([task_draws(r) for r in records], seed=rep):
                truth = effects[names[row.skill_id]]
                est = row.effects["success"]
                covered = est.low is not None and est.high is not None and est.low <= truth <= est.high
                sign_ok = (est.estimate > 0) == (truth > 0)
                cls = by_class[truth]
                cls[0] += sign_ok
                cls[1] += covered
                cls[2] += row.harmful
                cls[3] += 1
                for key, hit in (("sign", sign_ok), ("cover", covered)):
                    if key == "cover" or truth:
                        tally[key][0] += hit
                        tally[key][1] += 1
                key = "harm" if truth < 0 else "false"
                tally[key][0] += row.harmful
                tally[key][1] += 1
    elapsed = time.perf_counter() - start
    n_tasks = args.tasks_per_skill * args.groups * args.replicates
    print(f"{args.replicates} replicates x {args.tasks_per_skill * args.groups} tasks ({args.groups} topics x 4 "
          f"skills), mask rate {args.mask_rate}: {n_tasks} tasks through run_stream in {elapsed:.0f} s")
    for truth in sorted(by_class):
        ok, cov, flagged, n = by_class[truth]
        sign = f"sign right {100 * ok / n:.0f}%, " if truth else ""
        print(f"planted {truth:+.1f}: {n} skills, {sign}CI covers {100 * cov / n:.0f}%, "
              f"flagged harmful {100 * flagged / n:.0f}%")
    print(f"tasks per skill for 80% power to flag a -0.3 skill at mask rate {args.mask_rate}: "
          f"{tasks_for_power(args.mask_rate)} (normal approximation); run here: {args.tasks_per_skill}")

    def pct(key: str) -> float:
        hit, n = tally[key]
        return 100 * hit / n if n else float("nan")

    print(f"skill effects: sign recovered {pct('sign'):.0f}%, CI coverage {pct('cover'):.0f}%, "
          f"harmful flagged {pct('harm'):.0f}%, false flags {pct('false'):.0f}%")


if __name__ == "__main__":
    main()

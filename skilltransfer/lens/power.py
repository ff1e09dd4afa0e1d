"""Can an evolution commit at all, and how often would it commit a real gain? Checked before any task runs.

A candidate commits when the paired commit test on the validation split passes at level ``alpha / k`` (k
candidates per round, Bonferroni; `skilltransfer.lens.evolve`). The sign-flip test on ``n`` paired differences
cannot give a p-value below ``2^-n`` (every difference positive: only the observed signs reach the observed mean),
so with ``2^-n > alpha / k`` no candidate can ever commit, whatever it does: `check_can_commit` refuses that.

`commit_power` is the chance that a candidate which raises every task's success probability by ``mde`` passes the
commit test, at the configuration's shape (validation tasks, passes, candidates, alpha, the test), simulated with
each task run a coin flip at ``base`` (0.5 by default: the largest variance, so the power is a lower bound for an
iid world) and the incumbent's pairs drawn the same way. It ignores token cost (the gain is in success).
"""

from __future__ import annotations

import numpy as np

from skilltransfer.errors import InputError
from skilltransfer.lens.evolve import EvolveConfig
from skilltransfer.metrics.stats import paired_gain

DEFAULT_MDE = 0.1
"""The minimum effect `evolve` states the power for (a +0.1 gain in success per task)."""
POWER_SIMULATIONS = 400
POWER_RESAMPLES = 1000


def smallest_p(n: int, config: EvolveConfig) -> float:
    """The smallest p-value the commit test can reach on ``n`` paired differences: ``2^-n`` for ``sign-flip`` (its
    Monte Carlo estimate's expectation, ``(1 + R 2^-n) / (1 + R)`` with R resamples); 0 for ``bootstrap`` (its
    lower bound clears 0 as soon as every difference is positive)."""
    if config.commit_test == "bootstrap":
        return 0.0
    return (1 + config.resamples * 2.0 ** -n) / (1 + config.resamples)


def commit_level(config: EvolveConfig, candidates: int) -> float:
    """The level each candidate is tested at: ``alpha / k``."""
    return config.alpha / max(1, candidates)


def never_commits(n_val: int, candidates: int, config: EvolveConfig, *, where: str = "evolution") -> str | None:
    """Why no candidate can ever commit at this shape (one line naming the smallest p and ``alpha / k``), else None."""
    floor, level = smallest_p(n_val, config), commit_level(config, candidates)
    if floor <= level:
        return None
    need = next(n for n in range(1, 64) if smallest_p(n, config) <= level)
    return (f"{where} can never commit: the smallest p-value the {config.commit_test} test reaches on {n_val} "
            f"validation tasks is {floor:.4g} > alpha/k = {config.alpha:g}/{candidates} = {level:.4g}; use at least "
            f"{need} validation tasks (or fewer candidates, a larger alpha)")


def check_can_commit(n_val: int, candidates: int, config: EvolveConfig, *, where: str = "evolution") -> None:
    """Refuse a configuration whose smallest achievable p is above ``alpha / k`` (`never_commits`).

    Raises:
        InputError: no candidate could ever commit.
    """
    reason = never_commits(n_val, candidates, config, where=where)
    if reason is not None:
        raise InputError(reason)


def commit_power(n_val: int, candidates: int, config: EvolveConfig, mde: float = DEFAULT_MDE, *, base: float = 0.5,
                 simulations: int = POWER_SIMULATIONS, seed: int = 0) -> float:
    """The share of simulated evaluations in which a candidate ``mde`` better per task passes the commit test (see
    the module docstring)."""
    if not 0 < base + mde <= 1:
        raise InputError(f"--mde {mde:+g} from a success of {base:g} leaves [0, 1]")
    rng = np.random.default_rng(seed)
    level = commit_level(config, candidates)
    repeats = config.val_repeats
    passed = 0
    for i in range(simulations):
        incumbent = rng.binomial(repeats, base, n_val) / repeats
        candidate = rng.binomial(repeats, base + mde, n_val) / repeats
        gain = paired_gain(candidate - incumbent - config.min_gain, alpha=level, test=config.commit_test,
                           n_resamples=POWER_RESAMPLES, seed=seed + i)
        passed += gain.passed
    return passed / simulations


def power_line(n_val: int, candidates: int, config: EvolveConfig, mde: float = DEFAULT_MDE) -> str:
    """One line: the commit test's power for ``mde`` at this shape, and its level and floor."""
    power = commit_power(n_val, candidates, config, mde)
    return (f"power to commit a {mde:+g} success gain: {100 * power:.0f}% ({n_val} validation tasks x "
            f"{config.val_repeats} passes, {candidates} candidates, {config.commit_test} at alpha/k = "
            f"{commit_level(config, candidates):.4g}; smallest reachable p {smallest_p(n_val, config):.4g}; runs as "
            "coin flips at 0.5)")

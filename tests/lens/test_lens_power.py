"""An evolution that can never commit is refused before any task runs (one line naming the smallest reachable p and
alpha/k), and the power to commit a stated gain is computed from the configuration's shape."""

from __future__ import annotations

import pytest

from skilltransfer.errors import InputError
from skilltransfer.lens.evolve import EvolveConfig
from skilltransfer.lens.power import check_can_commit, commit_power, never_commits, smallest_p
from skilltransfer.metrics.stats import paired_gain
from skilltransfer.runner.spec import load_spec


def test_smallest_p_is_what_the_sign_flip_test_reaches() -> None:
    cfg = EvolveConfig(resamples=10_000)
    assert smallest_p(3, cfg) == pytest.approx(0.125, abs=1e-3)  # the 3 validation tasks
    reached = paired_gain([0.3, 0.5, 0.2], alpha=0.05, n_resamples=10_000, seed=0).p_value  # every pair positive
    assert reached == pytest.approx(smallest_p(3, cfg), abs=0.01)
    assert smallest_p(3, EvolveConfig(commit_test="bootstrap")) == 0.0


def test_a_configuration_that_can_never_commit_is_refused_in_one_line() -> None:
    with pytest.raises(InputError) as caught:
        check_can_commit(3, 2, EvolveConfig())
    message = str(caught.value)
    assert "\n" not in message
    assert "0.1251 > alpha/k = 0.05/2 = 0.025" in message
    assert "at least 6 validation tasks" in message
    assert never_commits(6, 2, EvolveConfig()) is None  # 2^-6 = 0.016 <= 0.025
    assert never_commits(5, 1, EvolveConfig()) is None
    assert never_commits(4, 1, EvolveConfig()) is not None


def test_a_spec_whose_evolution_can_never_commit_is_refused() -> None:
    with pytest.raises(InputError, match=r"phases\[3\]\.evolution.*can never commit.*0\.1251 > alpha/k"):
        load_spec("granularity", ["phases.3.evolution.val=3"])
    load_spec("granularity")  # as shipped it can commit


def test_power_grows_with_the_validation_shape_and_the_effect() -> None:
    small = commit_power(10, 2, EvolveConfig(val_repeats=1), 0.1, simulations=200)
    shipped = commit_power(20, 2, EvolveConfig(val_repeats=8), 0.2, simulations=200)
    assert small < 0.2  # the old CLI defaults: a +0.1 gain is rarely committed
    assert shipped >= 0.85  # the granularity spec's shape at +0.2 (benchmarks/evolution_noise.py: 94 % at p = 0.4)
    assert commit_power(20, 2, EvolveConfig(val_repeats=8), 0.1, simulations=200) < shipped
    assert commit_power(3, 2, EvolveConfig(), 0.3, simulations=50) == 0.0  # below the floor nothing commits

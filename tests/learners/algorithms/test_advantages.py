"""Advantage estimators on constant groups: float32 residue must not become a signal."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from learners.algorithms.advantages import (
    EMABaseline,
    group_centred_advantages,
    group_mean_whitened_advantages,
    group_normalised_advantages,
    is_constant,
)


def _rloo():
    path = Path(__file__).parents[3] / "examples" / "rloo_learner.py"
    spec = importlib.util.spec_from_file_location("rloo_learner_adv", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.rloo_advantages


ESTIMATORS = {
    "trr_grpo": group_normalised_advantages,
    "reinforce_pp": group_mean_whitened_advantages,
    "centred_dr_grpo": group_centred_advantages,
    "ema": lambda r, g: EMABaseline(0.9)(r, g),
    "rloo": lambda r, g: _rloo()(r, g),
}
DTYPES = {"float32": np.float32, "float64": np.float64, "python": float}


def test_float32_constant_group_residue_is_what_the_old_guard_let_through():
    # the case: mean of seven float32 0.35 in float32 arithmetic is not 0.35
    vals = [np.float32(0.35)] * 7
    mean = sum(vals) / len(vals)
    assert float(np.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals))) > 1e-12
    assert is_constant(vals)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("value", [0.35e-6, 0.35, 0.35e6, 1234567.891])
def test_constant_groups_get_exactly_zero(name, dtype, value):
    cast = DTYPES[dtype]
    rewards = [cast(value)] * 7 + [cast(value * 3)] * 5 + [cast(value / 7)]
    groups = ["a"] * 7 + ["b"] * 5 + ["one"]  # two constant groups and a group of one
    adv = ESTIMATORS[name](rewards, groups)
    assert adv == [0.0] * len(rewards)
    assert all(type(a) is float for a in adv)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("scale", [1e-6, 1.0, 1e6])
def test_a_real_spread_survives_at_every_scale(dtype, scale):
    cast = DTYPES[dtype]
    rewards = [cast(0.3 * scale), cast(0.4 * scale)]
    assert group_centred_advantages(rewards, ["g", "g"]) == pytest.approx(
        [-0.05 * scale, 0.05 * scale], rel=1e-5
    )
    assert group_normalised_advantages(rewards, ["g", "g"], eps=0.0) == pytest.approx(
        [-1.0, 1.0], rel=1e-5
    )
    assert group_mean_whitened_advantages(rewards, ["g", "h"], eps=0.0) == [0.0, 0.0]
    assert _rloo()(rewards, ["g", "g"]) == pytest.approx([-0.1 * scale, 0.1 * scale], rel=1e-5)


def test_ema_baseline_is_exactly_the_constant_it_saw():
    ema = EMABaseline(0.5)
    r = [np.float32(0.35)] * 7
    assert ema(r, ["g"] * 7) == [0.0] * 7
    assert ema(r, ["g"] * 7) == [0.0] * 7  # the baseline stayed at the value, no drift
    assert ema([np.float32(0.45)], ["g"]) == pytest.approx([0.1], rel=1e-5)

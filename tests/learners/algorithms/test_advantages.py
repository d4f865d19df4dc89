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


# ---------------------------------------------------------------- issue 49: mutation survivors
def test_reinforce_pp_whitening_at_non_default_rtol_and_eps():
    import math as _m

    from learners.algorithms.advantages import group_mean_whitened_advantages as whiten

    # default eps: 1e-6 added to the batch std
    s = _m.sqrt(1 / 6)
    assert whiten([1.0, 0.0, 2.0], ["a", "a", "b"]) == pytest.approx(
        [0.5 / (s + 1e-6), -0.5 / (s + 1e-6), 0.0], rel=1e-9
    )
    # rtol reaches the groups' constancy: a = [1.0, 1.1] is constant within 20%
    out = whiten([1.0, 1.1, 0.0, 2.0], ["a", "a", "b", "b"], eps=0.0, rtol=0.2)
    s = _m.sqrt(0.5)
    assert out == pytest.approx([0.0, 0.0, -1 / s, 1 / s], rel=1e-9)
    assert out[:2] == [0.0, 0.0]
    # a batch std exactly at rtol * max|r| is residue: all 0 (inclusive edge)
    assert whiten([0.0, 2.0], ["a", "a"], eps=0.0, rtol=0.5) == [0.0, 0.0]
    # eps is added, not subtracted
    assert whiten([0.0, 2.0], ["a", "a"], eps=0.5) == pytest.approx([-1 / 1.5, 1 / 1.5])


def test_ema_baseline_decay_range_and_message():
    from learners.algorithms.advantages import EMABaseline

    assert EMABaseline().decay == 0.95
    assert EMABaseline(decay=0.0).decay == 0.0
    with pytest.raises(ValueError, match=r"decay must be in \[0, 1\), got 1.0"):
        EMABaseline(decay=1.0)


def test_ema_baseline_rtol_decides_residue_and_constant_means():
    from learners.algorithms.advantages import EMABaseline

    # rtol 0.2: [1.0, 1.1] is constant, so its mean is its first value exactly
    ema = EMABaseline(decay=0.5, rtol=0.2)
    assert ema([1.0, 1.1], ["g", "g"]) == [0.0, 0.0]
    assert ema.baselines == {"g": 1.0}
    # |v - b| = 1 is exactly rtol * max(|v|, |b|) = 0.5 * 2: residue, advantage 0
    ema = EMABaseline(decay=0.5, rtol=0.5)
    ema([1.0], ["g"])
    assert ema([2.0], ["g"]) == [0.0]
    # default rtol 1e-6 at scale 100: a 1e-6 gap is residue (relative 1e-8), exactly 0
    ema = EMABaseline()
    ema([100.0], ["g"])
    assert ema([100.0 + 1e-6], ["g"]) == [0.0]
    assert ema([101.0], ["g"]) == [pytest.approx(101.0 - 100.0 - 0.05 * 1e-6)]


def test_group_advantages_pass_rtol_on_and_use_their_default_eps():
    from learners.algorithms.advantages import (
        group_centred_advantages,
        group_normalised_advantages,
        is_constant,
    )

    rewards, groups = [1.0, 1.1, 0.0, 2.0], ["a", "a", "b", "b"]
    assert group_centred_advantages(rewards, groups, rtol=0.2) == [0.0, 0.0, -1.0, 1.0]
    assert group_normalised_advantages(rewards, groups, eps=0.0, rtol=0.2) == [0, 0, -1, 1]
    # default eps 1e-6 on a std of 1
    assert group_normalised_advantages([0.0, 2.0], ["a", "a"]) == pytest.approx(
        [-1 / (1 + 1e-6), 1 / (1 + 1e-6)], rel=1e-12
    )
    assert is_constant([1.0, 2.0], rtol=0.5)  # max - min == rtol * max: inclusive


def test_bad_input_messages_name_the_problem():
    from learners.algorithms.advantages import group_centred_advantages

    with pytest.raises(ValueError, match="2 rewards but 1 group keys"):
        group_centred_advantages([1.0, 2.0], ["a"])
    with pytest.raises(ValueError, match="reward 1 is not finite: inf"):
        group_centred_advantages([1.0, float("inf")], ["a", "a"])

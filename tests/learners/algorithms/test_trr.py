import math

import pytest
import torch

from learners.algorithms.trr import group_normalised_advantages, kl_penalty


def test_advantages_hand_example():
    rewards = [1.0, 0.0, 0.5, 0.5, 0.9]
    groups = [
        ("solver", "math"),
        ("solver", "math"),
        ("critic", "math"),
        ("critic", "math"),
        ("planner", "code"),
    ]
    adv = group_normalised_advantages(rewards, groups, eps=0.0)
    # solver/math: mean 0.5, population std 0.5 -> +1, -1
    assert adv[0] == pytest.approx(1.0)
    assert adv[1] == pytest.approx(-1.0)
    # critic/math: zero variance -> 0, never NaN
    assert adv[2] == 0.0 and adv[3] == 0.0
    # planner/code: group of one -> 0
    assert adv[4] == 0.0
    assert all(math.isfinite(a) for a in adv)


def test_advantages_three_members():
    adv = group_normalised_advantages([0.0, 0.0, 3.0], ["g"] * 3, eps=0.0)
    std = math.sqrt(2.0)  # mean 1, squared deviations 1, 1, 4 -> var 2
    assert adv == pytest.approx([-1 / std, -1 / std, 2 / std])


def test_advantages_reject_bad_input():
    with pytest.raises(ValueError):
        group_normalised_advantages([1.0], ["a", "b"])
    with pytest.raises(ValueError):
        group_normalised_advantages([float("nan")], ["a"])


def test_kl_estimators():
    logp = torch.tensor([math.log(0.5)])
    ref = torch.tensor([math.log(0.25)])
    r = math.log(0.25) - math.log(0.5)
    assert kl_penalty(logp, ref, "k1").item() == pytest.approx(-r)
    assert kl_penalty(logp, ref, "k2").item() == pytest.approx(0.5 * r * r)
    assert kl_penalty(logp, ref, "k3").item() == pytest.approx(math.exp(r) - r - 1)
    assert kl_penalty(logp, logp, "k3").item() == 0.0

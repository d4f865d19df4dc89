import math

import pytest
import torch

from learners.algorithms.advantages import group_normalised_advantages
from learners.algorithms.losses import kl_penalty


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


def _transition(role, domain, reward, group=""):
    from learners.types import Transition

    return Transition(f"{role}_0", role, domain, "act", [1], [2], [-1.0], "", reward, group=group)


def test_trr_learner_normalises_within_each_task_relative_group():
    """Issue 49 (a): TRR++ is task-relative: the learner groups by (role, domain), or
    (role, exec/<mode>) on execution tasks, never by role alone or by domain alone."""
    from learners.algorithms.pg import PGConfig
    from learners.algorithms.trr import TRRLearner

    learner = object.__new__(TRRLearner)
    learner.config = PGConfig(adv_eps=0.5)  # not the default: the learner must pass it on
    batch = [
        _transition("solver", "math", 1.0),
        _transition("solver", "math", 0.0),
        _transition("solver", "code", 1.0),
        _transition("solver", "code", 1.0),
        _transition("solver", "code", 0.0, group="exec/deduction"),
        _transition("solver", "code", 1.0, group="exec/deduction"),
        _transition("critic", "math", 0.5),
        _transition("critic", "math", 0.5),
    ]
    # solver/math and solver/exec/deduction: mean 0.5, std 0.5 -> +-0.5 / (0.5 + 0.5) = +-0.5;
    # solver/code and critic/math are constant: 0
    assert learner.advantages(batch) == pytest.approx(
        [0.5, -0.5, 0.0, 0.0, -0.5, 0.5, 0.0, 0.0]
    )
    assert [t.group_key for t in batch[3:6]] == [
        ("solver", "code"),
        ("solver", "exec/deduction"),
        ("solver", "exec/deduction"),
    ]

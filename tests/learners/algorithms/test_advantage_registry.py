"""Advantage estimators are registered functions; an algorithm class only names one and a
group key (issue 50 item 3, veRL's ``core_algos`` registry)."""

import pytest

from learners.algorithms.advantages import (
    ADVANTAGE_ESTIMATORS,
    group_mean_whitened_advantages,
    group_normalised_advantages,
    register_adv_est,
)
from learners.algorithms.grpo import GRPOLearner
from learners.algorithms.pg import PolicyGradientLearner
from learners.algorithms.pg_config import PGConfig
from learners.algorithms.reinforce_pp import ReinforcePPBaselineLearner
from learners.algorithms.trr import TRRLearner
from learners.types import Transition


def _batch():
    rows = [
        ("solver", "math", [1, 2], 1.0),
        ("solver", "math", [1, 2], 0.0),
        ("solver", "math", [3], 0.25),
        ("solver", "code", [3], 1.0),
        ("critic", "math", [1, 2], 0.5),
        ("critic", "math", [4], 0.75),
    ]
    return [
        Transition(f"{r}_0", r, d, "act", p, [9], [-1.0], "", reward) for r, d, p, reward in rows
    ]


def _learner(cls, eps=0.25):
    learner = object.__new__(cls)
    learner.config = PGConfig(adv_eps=eps)  # not the default: the learner must pass it on
    return learner


def test_the_built_in_estimators_are_registered_by_name():
    assert ADVANTAGE_ESTIMATORS.get("group_normalised") is group_normalised_advantages
    assert ADVANTAGE_ESTIMATORS.get("group_mean_whitened") is group_mean_whitened_advantages
    with pytest.raises(ValueError, match=r"unknown advantage estimator 'nope'; registered: .*"
                       r"'group_mean_whitened', 'group_normalised'"):
        ADVANTAGE_ESTIMATORS.get("nope")


@pytest.mark.parametrize(
    "cls, estimator, key",
    [
        (TRRLearner, group_normalised_advantages, lambda t: (t.role, t.domain)),
        (GRPOLearner, group_normalised_advantages, lambda t: (t.role, tuple(t.prompt_ids))),
        (ReinforcePPBaselineLearner, group_mean_whitened_advantages,
         lambda t: (t.role, tuple(t.prompt_ids))),
    ],
)
def test_a_built_in_learner_is_its_estimator_over_its_group_key(cls, estimator, key):
    batch = _batch()
    want = estimator([t.reward for t in batch], [key(t) for t in batch], 0.25)
    assert _learner(cls).advantages(batch) == want  # exactly: the same function, same inputs
    assert any(a != 0.0 for a in want)


def test_a_learner_names_a_registered_estimator_of_its_own():
    @register_adv_est("test_reward_minus_one")
    def minus_one(rewards, groups, eps):
        return [float(r) - 1.0 for r in rewards]

    class Mine(PolicyGradientLearner):
        advantage_estimator = "test_reward_minus_one"
        advantage_group = "role_domain"

    try:
        assert _learner(Mine).advantages(_batch()) == [0.0, -1.0, -0.75, 0.0, -0.5, -0.25]
        with pytest.raises(ValueError, match="already registered"):
            register_adv_est("test_reward_minus_one")(minus_one)
    finally:
        ADVANTAGE_ESTIMATORS.unregister("test_reward_minus_one")


def test_a_learner_without_estimator_or_group_must_override_advantages():
    class NoEstimator(PolicyGradientLearner):
        advantage_group = "role_prompt"

    class NoGroup(PolicyGradientLearner):
        advantage_estimator = "group_normalised"

    for cls in (NoEstimator, NoGroup):
        with pytest.raises(NotImplementedError, match="set both or override advantages"):
            _learner(cls).advantages(_batch())


def test_register_adv_est_registers_under_the_given_name():
    """The decorator files the function under ``name`` (a name it ignored would leave the
    estimator unreachable from an algorithm's ``advantage_estimator``)."""

    @register_adv_est("test_constant_one")
    def _ones(rewards, groups, eps):
        return [1.0] * len(rewards)

    try:
        assert "test_constant_one" in ADVANTAGE_ESTIMATORS
        assert ADVANTAGE_ESTIMATORS.get("test_constant_one") is _ones
    finally:
        ADVANTAGE_ESTIMATORS.unregister("test_constant_one")
    assert "test_constant_one" not in ADVANTAGE_ESTIMATORS

"""Advantage estimators shared by the learners, as plain functions of rewards and group keys.

Each takes one scalar reward per sequence and returns one advantage per sequence; the learner
spreads it over the sequence's tokens. The estimators a learner can name are registered here
with :func:`register_adv_est` (:data:`ADVANTAGE_ESTIMATORS`, veRL's ``@register_adv_est`` in
``core_algos.py``), called after each definition rather than as a decorator, since the mutation
tester (mutmut 3.8.1, ``scripts/mutation.py``) leaves decorated functions unmutated; an algorithm class only picks one and a group key
(:attr:`learners.algorithms.pg.PolicyGradientLearner.advantage_estimator` and
``advantage_group``). Unit-tested against hand-computed values in
``tests/learners/algorithms/test_builtin_algorithms.py``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence

from sage_env.registry import Registry

Estimator = Callable[..., list[float]]
"""``fn(rewards, groups, eps=...) -> advantages`` (see :data:`ADVANTAGE_ESTIMATORS`)."""

ADVANTAGE_ESTIMATORS: Registry[Estimator] = Registry(
    "advantage estimator",
    builtins=("learners.algorithms.advantages",),
    hint="register one with @register_adv_est(name) in learners/algorithms/advantages.py",
)
"""Advantage estimators by name, each ``fn(rewards, groups, eps=...) -> advantages``:
``rewards`` one float per sequence (length N), ``groups`` one hashable key per sequence,
``eps`` the learner's ``PGConfig.adv_eps``; returns N floats. Raises ``ValueError`` on an
unknown name, listing the registered ones."""


def register_adv_est(name: str) -> Callable[[Estimator], Estimator]:
    """Decorator: register an estimator in :data:`ADVANTAGE_ESTIMATORS` under ``name``.

    The decorator raises ``ValueError`` if ``name`` is registered already.
    """
    return ADVANTAGE_ESTIMATORS.register(name)


REWARD_RTOL = 1e-6
"""Relative tolerance under which rewards count as equal: about 8 float32 ulps. Rewards
computed or stored in float32 (``numpy.float32``) carry residue at ~1e-7 of their scale, and a
group mean computed from them differs from its members by that much; an absolute guard (a
std below 1e-12) lets the residue through and turns it into advantages of ~0.1."""


def _check(rewards: Sequence[float], groups: Sequence[Hashable]) -> dict[Hashable, list[int]]:
    if len(rewards) != len(groups):
        raise ValueError(f"{len(rewards)} rewards but {len(groups)} group keys")
    members: dict[Hashable, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        if not math.isfinite(rewards[i]):
            raise ValueError(f"reward {i} is not finite: {rewards[i]}")
        members[g].append(i)
    return members


def is_constant(values: Sequence[float], rtol: float = REWARD_RTOL) -> bool:
    """True when ``max - min <= rtol * max|v|``: equal up to floating-point residue.

    An empty or one-element sequence is constant; so is one of exact zeros.
    """
    if len(values) < 2:
        return True
    hi, lo = max(values), min(values)
    return float(hi) - float(lo) <= rtol * max(abs(float(hi)), abs(float(lo)))


def group_centred_advantages(
    rewards: Sequence[float], groups: Sequence[Hashable], rtol: float = REWARD_RTOL
) -> list[float]:
    """Group-baseline advantages without std scaling: ``A_i = r_i - mean_g``.

    The advantage of Dr. GRPO (Liu et al. 2025, arXiv 2503.20783, Sec. 3.1: dividing by the
    group std weighs too-easy and too-hard prompts up) and the first stage of REINFORCE++-
    baseline. Computed in float64; a constant group (:func:`is_constant`), including a group
    of one, gets exactly 0.

    Args:
        rewards: Scalar rewards, length N (Python, NumPy float32/float64 ...).
        groups: Group key per reward, length N.
        rtol: Relative tolerance of :func:`is_constant`.

    Raises:
        ValueError: if the lengths differ or a reward is not finite.
    """
    members = _check(rewards, groups)
    adv = [0.0] * len(rewards)
    for idx in members.values():
        vals = [float(rewards[i]) for i in idx]
        if is_constant(vals, rtol):
            continue
        mean = math.fsum(vals) / len(vals)
        for i, v in zip(idx, vals):
            adv[i] = v - mean
    return adv


def group_normalised_advantages(
    rewards: Sequence[float],
    groups: Sequence[Hashable],
    eps: float = 1e-6,
    rtol: float = REWARD_RTOL,
) -> list[float]:
    """Task-relative advantages: ``A_i = (r_i - mean_g) / (std_g + eps)`` within each group.

    TRR++ (AZR, arXiv 2505.03335, Sec. 3.3.5) with g = (role, domain); GRPO (arXiv
    2402.03300) with g = (role, prompt). ``std_g`` is the population standard deviation
    (ddof = 0), computed in float64. A group of one, or a group whose rewards are equal up to
    ``rtol`` of their scale (:func:`is_constant`, robust to float32 residue), gets advantage
    exactly 0 for every member (never NaN).

    Args:
        rewards: Scalar rewards, length N (Python, NumPy float32/float64 ...).
        groups: Group key per reward (e.g. ``(role, domain)``), length N.
        eps: Added to the std.
        rtol: Relative tolerance of :func:`is_constant`.

    Returns:
        N advantages (Python floats).

    Raises:
        ValueError: if the lengths differ or a reward is not finite.
    """
    adv = group_centred_advantages(rewards, groups, rtol)
    for idx in _check(rewards, groups).values():
        std = math.sqrt(math.fsum(adv[i] ** 2 for i in idx) / len(idx))
        if std > 0.0:  # a constant group is already exactly 0
            for i in idx:
                adv[i] /= std + eps
    return adv


register_adv_est("group_normalised")(group_normalised_advantages)


def group_mean_whitened_advantages(
    rewards: Sequence[float],
    groups: Sequence[Hashable],
    eps: float = 1e-6,
    rtol: float = REWARD_RTOL,
) -> list[float]:
    """REINFORCE++-baseline advantages (OpenRLHF; Hu 2025, arXiv 2501.03262).

    First subtract each group's mean reward, ``r_i - mean_g`` (the group baseline,
    :func:`group_centred_advantages`), then whiten across the whole batch:
    ``(x_i - mean(x)) / (std(x) + eps)``. A batch whose centred rewards have a std below
    ``rtol`` times the rewards' scale (max |r|) gets 0 everywhere.

    Args:
        rewards: Scalar rewards, length N.
        groups: Group key per reward (e.g. ``(role, prompt)``), length N.
        eps: Added to the batch std.
        rtol: Relative tolerance (of the groups' constancy and of the batch std).

    Raises:
        ValueError: if the lengths differ or a reward is not finite.
    """
    centred = group_centred_advantages(rewards, groups, rtol)
    if not centred:
        return []
    mu = math.fsum(centred) / len(centred)
    std = math.sqrt(math.fsum((c - mu) ** 2 for c in centred) / len(centred))
    scale = max(abs(float(r)) for r in rewards)
    if std <= rtol * scale:
        return [0.0] * len(centred)
    return [(c - mu) / (std + eps) for c in centred]


register_adv_est("group_mean_whitened")(group_mean_whitened_advantages)


class EMABaseline:
    """Per-group exponential-moving-average reward baseline.

    SPIRAL's role-conditioned advantage estimation (arXiv 2506.24119): ``A_i = r_i - b_g``,
    then ``b_g <- decay * b_g + (1 - decay) * mean(r in g)``.

    The baseline of a group seen for the first time starts at that batch's group mean (so
    its first advantages are centred). State is a plain dict, saved with the learner.

    Args:
        decay: EMA decay in [0, 1).
    """

    def __init__(self, decay: float = 0.95, rtol: float = REWARD_RTOL) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {decay}")
        self.decay = decay
        self.rtol = rtol
        self.baselines: dict[str, float] = {}

    def __call__(self, rewards: Sequence[float], groups: Sequence[Hashable]) -> list[float]:
        """Advantages for one batch (float64), then update the baselines.

        ``r_i - b_g`` within ``rtol`` of ``max(|r_i|, |b_g|)`` is float residue and becomes
        exactly 0; a constant group's mean is its value.

        Raises:
            ValueError: if the lengths differ or a reward is not finite.
        """
        members = _check(rewards, groups)
        adv = [0.0] * len(rewards)
        for g, idx in members.items():
            key = str(g)
            vals = [float(rewards[i]) for i in idx]
            mean = vals[0] if is_constant(vals, self.rtol) else math.fsum(vals) / len(vals)
            b = self.baselines.get(key, mean)
            for i, v in zip(idx, vals):
                if abs(v - b) > self.rtol * max(abs(v), abs(b)):
                    adv[i] = v - b
            self.baselines[key] = self.decay * b + (1.0 - self.decay) * mean
        return adv

"""Advantage estimators shared by the learners, as plain functions of rewards and group keys.

Each takes one scalar reward per sequence and returns one advantage per sequence; the learner
spreads it over the sequence's tokens. Unit-tested against hand-computed values in
``tests/test_algorithms.py``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence


def _check(rewards: Sequence[float], groups: Sequence[Hashable]) -> dict[Hashable, list[int]]:
    if len(rewards) != len(groups):
        raise ValueError(f"{len(rewards)} rewards but {len(groups)} group keys")
    members: dict[Hashable, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        if not math.isfinite(rewards[i]):
            raise ValueError(f"reward {i} is not finite: {rewards[i]}")
        members[g].append(i)
    return members


def group_normalised_advantages(
    rewards: Sequence[float], groups: Sequence[Hashable], eps: float = 1e-6
) -> list[float]:
    """Task-relative advantages: ``A_i = (r_i - mean_g) / (std_g + eps)`` within each group.

    ``std_g`` is the population standard deviation (ddof = 0). A group of one, or a group whose
    rewards are all equal, gets advantage 0 for every member (never NaN).

    Args:
        rewards: Scalar rewards, length N.
        groups: Group key per reward (e.g. ``(role, domain)``), length N.
        eps: Added to the std.

    Returns:
        N advantages.

    Raises:
        ValueError: if the lengths differ or a reward is not finite.
    """
    members = _check(rewards, groups)
    adv = [0.0] * len(rewards)
    for idx in members.values():
        vals = [rewards[i] for i in idx]
        mean = sum(vals) / len(vals)
        std = math.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals))
        if std < 1e-12:
            continue
        for i in idx:
            adv[i] = (rewards[i] - mean) / (std + eps)
    return adv


def group_mean_whitened_advantages(
    rewards: Sequence[float], groups: Sequence[Hashable], eps: float = 1e-6
) -> list[float]:
    """REINFORCE++-baseline advantages (OpenRLHF; Hu 2025, arXiv 2501.03262).

    First subtract each group's mean reward, ``r_i - mean_g`` (the group baseline), then
    whiten across the whole batch: ``(x_i - mean(x)) / (std(x) + eps)``. A batch whose
    centred rewards are all equal gets 0 everywhere.

    Args:
        rewards: Scalar rewards, length N.
        groups: Group key per reward (e.g. ``(role, prompt)``), length N.
        eps: Added to the batch std.

    Raises:
        ValueError: if the lengths differ or a reward is not finite.
    """
    members = _check(rewards, groups)
    centred = [0.0] * len(rewards)
    for idx in members.values():
        mean = sum(rewards[i] for i in idx) / len(idx)
        for i in idx:
            centred[i] = rewards[i] - mean
    if not centred:
        return []
    mu = sum(centred) / len(centred)
    std = math.sqrt(sum((c - mu) ** 2 for c in centred) / len(centred))
    if std < 1e-12:
        return [0.0] * len(centred)
    return [(c - mu) / (std + eps) for c in centred]


class EMABaseline:
    """Per-group exponential-moving-average reward baseline.

    SPIRAL's role-conditioned advantage estimation (arXiv 2506.24119): ``A_i = r_i - b_g``,
    then ``b_g <- decay * b_g + (1 - decay) * mean(r in g)``.

    The baseline of a group seen for the first time starts at that batch's group mean (so
    its first advantages are centred). State is a plain dict, saved with the learner.

    Args:
        decay: EMA decay in [0, 1).
    """

    def __init__(self, decay: float = 0.95) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {decay}")
        self.decay = decay
        self.baselines: dict[str, float] = {}

    def __call__(self, rewards: Sequence[float], groups: Sequence[Hashable]) -> list[float]:
        """Advantages for one batch, then update the baselines."""
        members = _check(rewards, groups)
        adv = [0.0] * len(rewards)
        for g, idx in members.items():
            key = str(g)
            mean = sum(rewards[i] for i in idx) / len(idx)
            b = self.baselines.get(key, mean)
            for i in idx:
                adv[i] = rewards[i] - b
            self.baselines[key] = self.decay * b + (1.0 - self.decay) * mean
        return adv

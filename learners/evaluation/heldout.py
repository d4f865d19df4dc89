"""Held-out scoring of a training run: did it learn, with an interval and a paired test.

``TrainConfig.heldout`` (``--heldout exec_heldout:100:16``) names benchmark items a run never
trains on. :func:`learners.training.loop.train` scores them greedily on the untouched model
(before the format warm-up), at the start of RL (after it) and after the last step, logs the
figures in ``metrics.jsonl`` (``heldout/<set>/...``) and prints one line per set, e.g.::

    held-out exec_heldout (100 items, greedy): untouched 0.090 [0.05, 0.16] -> start 0.200
    [0.13, 0.29] -> final 0.240 [0.17, 0.33]; final vs start 7 gained / 3 lost, McNemar p = 0.34

Statistics: the Wilson score interval at 95% (Wilson 1927; recommended by Brown, Cai &
DasGupta 2001) per point, and the exact McNemar test (McNemar 1947) of final against a
start on the same items. The experiments' statistics (``benchmarks/common/stats.py``) use the
same functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Z95 = 1.959963984540054
"""The standard normal's 97.5% quantile (two-sided 95%)."""
HELDOUT_SETS = ("exec_heldout", "cruxeval_o", "cruxeval_i")
"""Benchmarks a run can be scored on as it trains (shipped, scored by running code)."""


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion ``k / n`` (Wilson 1927).

    ``(p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)``, ``p = k/n``.

    Returns:
        ``(low, high)`` in [0, 1]; ``(0.0, 1.0)`` for ``n = 0``.

    Raises:
        ValueError: unless ``0 <= k <= n``.
    """
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = k / n
    den = 1.0 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    # the bounds are exactly 0 at k = 0 and 1 at k = n; rounding put them 1e-18 inside,
    # which made a plot's error bar negative (matplotlib refuses it)
    low = 0.0 if k == 0 else max(0.0, mid - half)
    high = 1.0 if k == n else min(1.0, mid + half)
    return low, high


def mcnemar_exact(base: list[bool], final: list[bool]) -> tuple[int, int, float]:
    """Exact McNemar test of paired correctness (McNemar 1947; the exact binomial form).

    Only discordant items count: ``gained`` (wrong at base, right at final) and ``lost``
    (right at base, wrong at final). Under H0 each discordant item is either with
    probability 1/2, so ``p = min(1, 2 P(X <= min(gained, lost)))``, ``X ~ Bin(gained + lost,
    1/2)``.

    Returns:
        ``(gained, lost, p_value)``; ``p = 1`` when no item is discordant.

    Raises:
        ValueError: if the lists differ in length.
    """
    if len(base) != len(final):
        raise ValueError(f"paired lists must have one length, got {len(base)} and {len(final)}")
    gained = sum(1 for b, f in zip(base, final) if f and not b)
    lost = sum(1 for b, f in zip(base, final) if b and not f)
    n = gained + lost
    if n == 0:
        return gained, lost, 1.0
    tail = sum(math.comb(n, i) for i in range(min(gained, lost) + 1)) / 2**n
    return gained, lost, min(1.0, 2.0 * tail)


@dataclass(frozen=True)
class HeldoutSet:
    """One held-out set of a run: the first ``items`` of ``name``, ``max_new_tokens`` each."""

    name: str
    items: int
    max_new_tokens: int


def parse_heldout(spec: str) -> list[HeldoutSet]:
    """``"exec_heldout:100:16,cruxeval_i:50:64"`` -> held-out sets (empty string: none).

    Raises:
        ValueError: on an unknown set (the message lists :data:`HELDOUT_SETS`), a malformed
            entry or a count below 1.
    """
    out = []
    for entry in (e.strip() for e in spec.split(",") if e.strip()):
        parts = entry.split(":")
        if len(parts) != 3 or parts[0] not in HELDOUT_SETS:
            raise ValueError(
                f"heldout entries are name:items:max_new_tokens with name in {HELDOUT_SETS}, "
                f"got {entry!r}"
            )
        try:
            n, t = int(parts[1]), int(parts[2])
        except ValueError:
            raise ValueError(f"heldout {entry!r}: items and max_new_tokens are integers") from None
        if n < 1 or t < 1:
            raise ValueError(f"heldout {entry!r}: items and max_new_tokens must be >= 1")
        out.append(HeldoutSet(parts[0], n, t))
    return out


def score(policy: Any, sets: list[HeldoutSet], out: Path, progress: bool = False) -> dict:
    """Greedy per-item correctness of ``policy`` on every set: ``{name: [bool, ...]}``.

    Runs ``sage-env eval``'s loop (:func:`learners.evaluation.run.run_eval`) with the given
    policy; its files go to ``out/<name>``.
    """
    from learners.evaluation.run import EvalConfig, run_eval

    got: dict[str, list[bool]] = {}
    for s in sets:
        ecfg = EvalConfig(
            model=getattr(policy, "name", "policy"),
            benchmarks=s.name,
            limit=s.items,
            max_new_tokens=s.max_new_tokens,
            out=str(out / s.name),
            device="cpu",
        )
        (result,) = run_eval(ecfg, policy=policy, progress=progress)
        got[s.name] = [bool(r["correct"][0]) for r in result.records]
    return got


def point(prefix: str, xs: list[bool]) -> dict[str, float]:
    """``{prefix: accuracy, prefix_ci_low, prefix_ci_high}`` (Wilson 95%)."""
    lo, hi = wilson(sum(xs), len(xs))
    return {
        prefix: sum(xs) / len(xs) if xs else 0.0,
        f"{prefix}_ci_low": lo,
        f"{prefix}_ci_high": hi,
    }


def final_metrics(name: str, start: list[bool], final: list[bool]) -> dict[str, float]:
    """``heldout/<name>/final`` (with its interval) and the McNemar test against the start."""
    gained, lost, p = mcnemar_exact(start, final)
    return {
        **point(f"heldout/{name}/final", final),
        f"heldout/{name}/gained": float(gained),
        f"heldout/{name}/lost": float(lost),
        f"heldout/{name}/mcnemar_p": p,
    }


def report_line(name: str, points: dict[str, list[bool]]) -> str:
    """One line: each point (``untouched``, ``start``, ``final``) and final vs start.

    Every point with its Wilson interval, then gained / lost and the McNemar p of final
    against start.
    """
    parts = []
    n = 0
    for label, xs in points.items():
        lo, hi = wilson(sum(xs), len(xs))
        n = len(xs)
        parts.append(f"{label} {sum(xs) / max(n, 1):.3f} [{lo:.2f}, {hi:.2f}]")
    line = f"held-out {name} ({n} items, greedy): " + " -> ".join(parts)
    if "start" in points and "final" in points:
        g, l_, p = mcnemar_exact(points["start"], points["final"])
        line += f"; final vs start {g} gained / {l_} lost, McNemar p = {p:.3g}"
    return line

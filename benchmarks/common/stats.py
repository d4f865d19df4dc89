"""Statistics of arms on held-out items: one arm's curve on one set, and a variant arm against
its plain arm.

Accuracy with its Wilson score interval at 95% (Wilson 1927; the interval recommended by
Brown, Cai & DasGupta 2001); final against base, and a variant's final against its plain arm's,
on the same items with the exact McNemar test (two-sided binomial test on the discordant
pairs, McNemar 1947): :func:`learners.evaluation.heldout.wilson` and
:func:`learners.evaluation.heldout.mcnemar_exact`.
"""

from __future__ import annotations

from typing import Any

from benchmarks.common.arms import split_variant
from learners.evaluation.heldout import mcnemar_exact, wilson


def set_summary(curve: list[tuple[int, list[bool]]]) -> dict[str, Any]:
    """One arm on one held-out set, from ``[(step, per-item correctness), ...]`` (step 0 first).

    Returns:
        ``{"base", "final", "ci95": {"base": [lo, hi], "final": [lo, hi]}, "items", "steps",
        "p_value", "gained", "lost", "gained_items", "lost_items" (indices of the items that
        turned right / wrong), "curve": [{"step", "accuracy", "ci95"}, ...]}``.
    """
    (_, base), (last, final) = curve[0], curve[-1]
    n = len(base)

    def acc(xs: list[bool]) -> float:
        return sum(xs) / len(xs) if xs else 0.0

    gained, lost, p = mcnemar_exact(base, final)
    return {
        "base": acc(base),
        "final": acc(final),
        "ci95": {"base": list(wilson(sum(base), n)), "final": list(wilson(sum(final), n))},
        "items": n,
        "steps": last,
        "p_value": p,
        "gained": gained,
        "lost": lost,
        "gained_items": [i for i, (b, f) in enumerate(zip(base, final)) if f and not b],
        "lost_items": [i for i, (b, f) in enumerate(zip(base, final)) if b and not f],
        "curve": [
            {"step": s, "accuracy": acc(xs), "ci95": list(wilson(sum(xs), len(xs)))}
            for s, xs in curve
        ],
    }


def final_items(base: list[bool], s: dict[str, Any]) -> list[bool]:
    """An arm's per-item correctness at its last step on one set, from the base model's and the
    arm's ``gained_items`` / ``lost_items`` (:func:`set_summary`)."""
    gained, lost = set(s["gained_items"]), set(s["lost_items"])
    return [(b and i not in lost) or i in gained for i, b in enumerate(base)]


def variant_pairs(
    per_arm: dict[str, Any], base: dict[str, list[bool]] | None
) -> dict[str, dict[str, Any]]:
    """Every ``PROTOCOL@NAME`` arm against its plain ``PROTOCOL`` arm, final against final on the
    same items: ``{"rlvr@bf16 vs rlvr": {set: {"variant", "plain", "items", "variant_only",
    "plain_only", "p_value"}}}`` (exact McNemar, two-sided; ``variant_only``: items only the
    variant's final model solves). Arms whose plain arm is absent are left out."""
    pairs: dict[str, dict[str, Any]] = {}
    if not base:
        return pairs
    for arm, result in per_arm.items():
        plain, variant = split_variant(arm)
        if variant is None or plain not in per_arm:
            continue
        rows = {}
        for name, s in result["sets"].items():
            other = per_arm[plain]["sets"].get(name)
            if other is None or name not in base or s["steps"] != other["steps"]:
                continue
            mine, theirs = final_items(base[name], s), final_items(base[name], other)
            only_mine, only_theirs, p = mcnemar_exact(theirs, mine)
            rows[name] = {
                "variant": s["final"],
                "plain": other["final"],
                "items": len(mine),
                "steps": s["steps"],
                "variant_only": only_mine,
                "plain_only": only_theirs,
                "p_value": p,
            }
        if rows:
            pairs[f"{arm} vs {plain}"] = rows
    return pairs

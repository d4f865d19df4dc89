"""What a training run's ``metrics.jsonl`` says: one row per step of the metrics an experiment
keeps (:func:`step_log`), and the steps, rollout tokens and step seconds it spent
(:func:`read_totals`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

STEP_KEYS = (
    "solver/accuracy",
    "rollout/tokens",
    "time/step_s",
    "pool/size",
    "pool/generated",
    "solver/trained_rows",
    "solver/judging_rows",
    "solver/generated_share",
)
"""Per-step metrics kept in ``summary.json`` (with every ``<role>/parse_rate``,
``valid_rate`` and ``accept_rate`` and every ``pool/accepted*``, ``pool/proposals`` and
``pool/valid``: the pool dynamics of :func:`learners.training.metrics.pool_dynamics_metrics`),
so a run's proposals and pool survive its folder."""


def step_log(run: Path) -> list[dict[str, Any]]:
    """One row per training step of a run's ``metrics.jsonl``: ``step``, :data:`STEP_KEYS` and
    each proposing role's parse/valid/accept rates (missing keys are left out; steps < 1,
    such as a warm-up row, are skipped)."""
    wanted = ("/parse_rate", "/valid_rate", "/accept_rate")
    pool_keys = ("pool/accepted", "pool/proposals", "pool/valid")
    out: dict[int, dict[str, Any]] = {}
    for x in (run / "metrics.jsonl").read_text().splitlines():
        r = json.loads(x) if x.strip() else {}
        step = r.get("step", 0)
        if not isinstance(step, int) or step < 1:
            continue
        row = out.setdefault(step, {"step": step})
        row.update(
            {
                k: v
                for k, v in r.items()
                if k in STEP_KEYS or k.endswith(wanted) or k.startswith(pool_keys)
            }
        )
    return [out[s] for s in sorted(out)]


def read_totals(run: Path) -> dict[str, float]:
    """Steps, rollout tokens and step seconds summed over a run's ``metrics.jsonl``."""
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    rows = [r for r in rows if r.get("step", 0) > 0]
    return {
        "steps": max((r["step"] for r in rows), default=0),
        "rollout_tokens": float(sum(r.get("rollout/tokens") or 0.0 for r in rows)),
        "train_seconds": float(sum(r.get("time/step_s") or 0.0 for r in rows)),
    }

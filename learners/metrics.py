"""What a run logs as it goes: per-step metrics (JSONL + TensorBoard) and round transcripts."""

from __future__ import annotations

import json
import os
import resource
from collections import defaultdict
from pathlib import Path
from typing import Any

from learners.rollout import RolloutResult, Transition


def rollout_metrics(result: RolloutResult, roles: list[str]) -> dict[str, float]:
    """Per-role mean reward and counts, proposal validity/acceptance, solver accuracy.

    Args:
        result: One step's rollouts.
        roles: Role names of the protocol (``reward/<role>`` is None when a role did not act).
    """
    by_role: dict[str, list[Transition]] = defaultdict(list)
    for t in result.transitions:
        by_role[t.role].append(t)
    m: dict[str, float] = {}
    for role in roles:
        ts = by_role.get(role, [])
        rs = [t.reward for t in ts]
        mean = sum(rs) / len(rs) if rs else None
        m[f"reward/{role}"] = mean
        m[f"reward_std/{role}"] = (
            (sum((r - mean) ** 2 for r in rs) / len(rs)) ** 0.5 if rs else None
        )
        m[f"count/{role}"] = float(len(rs))
        m[f"truncated/{role}"] = sum(t.truncated for t in ts) / len(ts) if ts else None
        reviews = [t for t in ts if "raw_score" in t.details]
        if reviews:  # the reviewing role (critic, judge): share of scores that parse
            m[f"{role}/format_rate"] = sum(
                t.details["raw_score"] is not None for t in reviews
            ) / len(reviews)
    for role in roles:  # the proposing role carries "parsed" details
        props = [t for t in result.transitions if t.role == role and "parsed" in t.details]
        if props:
            m[f"{role}/parse_rate"] = sum(
                bool(t.details["parsed"].get("well_formed")) for t in props
            ) / len(props)
            m[f"{role}/valid_rate"] = sum(
                bool(t.details["parsed"].get("valid")) for t in props
            ) / len(props)
            m[f"{role}/accept_rate"] = sum(
                bool(t.details.get("accepted", t.details["parsed"].get("valid"))) for t in props
            ) / len(props)
            probed = [t for t in props if (t.details.get("terms") or {}).get("d") is not None]
            if probed:  # accepted and probed: solved at least once is evidence it is well posed
                m[f"{role}/accepted_solved_rate"] = sum(
                    t.details["terms"]["d"] < 1.0 for t in probed
                ) / len(probed)
    solves = [
        t.details.get("verdict", {}).get("score", 0.0) or 0.0
        for t in result.transitions
        if t.phase == "solve"
    ]
    if solves:
        m["solver/accuracy"] = sum(solves) / len(solves)
    m["rollout/tokens"] = float(result.tokens)
    m["rollout/tokens_per_s"] = result.tokens / max(result.generate_seconds, 1e-9)
    m["time/generate_s"] = result.generate_seconds
    m["time/env_s"] = result.env_seconds
    return m


class MetricsLog:
    """Appends metric rows to ``out/metrics.jsonl`` (fsynced) and TensorBoard (``out/tb``).

    Args:
        out: Run folder.
    """

    def __init__(self, out: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.path = out / "metrics.jsonl"
        self.writer = SummaryWriter(str(out / "tb"))

    def write(self, row: dict[str, Any]) -> None:
        """Log one row; ``row["step"]`` is its step, numeric values go to TensorBoard."""
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        for key, value in row.items():
            if key != "step" and isinstance(value, (int, float)):
                self.writer.add_scalar(key, value, row["step"])
        self.writer.flush()

    def close(self) -> None:
        """Close the TensorBoard writer."""
        self.writer.close()


def peak_rss_mb() -> float:
    """Peak resident memory of this process, MiB (Linux ``ru_maxrss`` is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def write_transcripts(out: Path, step: int, result: RolloutResult, n: int) -> None:
    """Write the first ``n`` round transcripts of a step to ``out/transcripts/step_N.txt``."""
    if n <= 0:
        return
    folder = out / "transcripts"
    folder.mkdir(parents=True, exist_ok=True)
    parts = []
    for i, text in enumerate(result.transcripts[:n]):
        parts.append(f"######## step {step} round {i} ########\n{text}")
    (folder / f"step_{step:06d}.txt").write_text("\n".join(parts), encoding="utf-8")

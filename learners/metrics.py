"""What a run logs as it goes: per-step metrics (JSONL + a tracker) and round transcripts."""

from __future__ import annotations

import json
import os
import resource
from collections import defaultdict
from pathlib import Path
from typing import Any

from learners.rollout import RolloutResult, Transition

REPORT_TO = ("tensorboard", "wandb", "none")
"""Trackers of ``TrainConfig.report_to`` (``metrics.jsonl`` is written with every one)."""


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
    if result.calls:
        m["rollout/rows_per_call"] = result.rows / result.calls
        m["rollout/generate_calls"] = float(result.calls)
    m["time/env_s"] = result.env_seconds
    return m


def logprob_gap_metrics(update: dict[str, float]) -> dict[str, float]:
    """``rollout/logprob_gap`` (mean) and ``rollout/logprob_gap_max`` from a learner's update.

    The absolute difference, nats per token, between the rollout engine's sampling log-probs
    and the learner's log-probs of the same tokens under the same weights (as veRL and TRL
    log it); empty when the learner did not measure it.
    """
    if "logprob_gap_mean" not in update:
        return {}
    return {
        "rollout/logprob_gap": float(update["logprob_gap_mean"]),
        "rollout/logprob_gap_max": float(update["logprob_gap_max"]),
    }


class MetricsLog:
    """Appends metric rows to ``out/metrics.jsonl`` and sends their numbers to a tracker.

    ``metrics.jsonl`` is always written (one JSON object per row, fsynced): it is the ground
    truth the plots, the resume logic and the tests read. The numeric values of each row also
    go through accelerate's tracking API (``Accelerator(log_with=...)``, ``init_trackers``,
    ``log``; accelerate logs on the main process only) to TensorBoard (``out/tb``) or Weights
    & Biases (run files in ``out/wandb``), or nowhere with ``report_to="none"``.

    Args:
        out: Run folder (exists).
        report_to: ``"tensorboard"``, ``"wandb"`` or ``"none"`` (``TrainConfig.report_to``).
        accelerator: The run's ``Accelerator`` made with ``log_with=report_to`` and
            ``project_dir=out`` (:func:`learners.distributed.init`); made here when ``None``
            and a tracker is asked for. Unused with ``"none"``.
        config: The run's resolved config as plain data, stored as the W&B run config
            (TensorBoard gets none: it is in ``out/config.yaml``).
        purge_step: TensorBoard hides the events at this step and later that an earlier,
            killed run left in ``out/tb`` (a resumed run passes its first step).

    Raises:
        ValueError: on an unknown ``report_to``.
    """

    def __init__(
        self,
        out: Path,
        report_to: str = "tensorboard",
        accelerator: Any = None,
        config: dict[str, Any] | None = None,
        purge_step: int | None = None,
    ) -> None:
        if report_to not in REPORT_TO:
            raise ValueError(f"report_to must be one of {REPORT_TO}, got {report_to!r}")
        self.path = out / "metrics.jsonl"
        self.report_to = report_to
        self.accelerator = None
        if report_to == "none":
            return
        if accelerator is None:
            from learners import distributed

            accelerator = distributed.init("cpu", log_with=report_to, project_dir=str(out))
        if report_to == "tensorboard":
            # accelerate writes to project_dir/<project name>: the name "tb" gives out/tb
            kwargs: dict[str, Any] = {"purge_step": purge_step} if purge_step else {}
            accelerator.init_trackers("tb", init_kwargs={"tensorboard": kwargs})
        else:
            project = os.environ.get("WANDB_PROJECT", "sage-env")
            name = os.environ.get("WANDB_NAME", out.resolve().name)
            init = {"wandb": {"dir": str(out), "name": name}}
            accelerator.init_trackers(project, config=config, init_kwargs=init)
        self.accelerator = accelerator

    def write(self, row: dict[str, Any]) -> None:
        """Log one row; ``row["step"]`` is its step, numeric values go to the tracker."""
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        if self.accelerator is not None:
            scalars = {k: v for k, v in row.items() if k != "step" and isinstance(v, (int, float))}
            self.accelerator.log(scalars, step=row["step"])

    def close(self) -> None:
        """Finish the tracker (close the TensorBoard writer, end the W&B run); idempotent."""
        if self.accelerator is not None:
            for tracker in self.accelerator.trackers:
                tracker.finish()
            self.accelerator.trackers = []
            self.accelerator = None


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

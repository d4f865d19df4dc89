"""Training-dynamics plots (per-role reward and pool size), written as PNG."""

from __future__ import annotations

import json
import os
from pathlib import Path

ROLES = ("challenger", "planner", "solver", "critic")


def read_metrics(path: str | os.PathLike) -> list[dict]:
    """Read a metrics JSONL file, skipping lines a killed process left half-written."""
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


def plot_training(metrics_path: str | os.PathLike, out_png: str | os.PathLike) -> Path:
    """Plot mean reward per role and pool size against training step.

    Args:
        metrics_path: ``metrics.jsonl`` written by :func:`learners.train.train`.
        out_png: Output image path.

    Returns:
        The PNG path.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(metrics_path)
    steps = [r["step"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for role in ROLES:
        key = f"reward/{role}"
        pts = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
        if pts:
            ax1.plot(*zip(*pts), marker="o", label=role)
    ax1.set(xlabel="step", ylabel="mean reward", title="Reward per role", ylim=(-0.02, 1.02))
    ax1.legend()
    ax1.grid(alpha=0.3)
    ax2.plot(steps, [r.get("pool/size", 0) for r in rows], marker="o", color="tab:purple",
             label="pool size")
    ax2.set(xlabel="step", ylabel="tasks", title="Task pool")
    ax3 = ax2.twinx()
    ax3.plot(steps, [r.get("pool/generated", 0) for r in rows], marker="s", ls="--",
             color="tab:green", label="generated")
    ax3.set_ylabel("generated tasks")
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    out_png = Path(out_png)
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    return out_png

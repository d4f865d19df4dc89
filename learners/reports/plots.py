"""Training-dynamics plots (per-role reward and pool size), written as PNG."""

from __future__ import annotations

import json
import os
from pathlib import Path


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
    """Plot per-role mean reward, pool size and challenger/solver rates against step.

    Args:
        metrics_path: ``metrics.jsonl`` written by :func:`learners.training.loop.train`.
        out_png: Output image path.

    Returns:
        The PNG path.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    rows = read_metrics(metrics_path)

    def series(key: str) -> tuple[list, list]:
        pts = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
        return ([p[0] for p in pts], [p[1] for p in pts])

    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(15, 4))
    roles = list(
        dict.fromkeys(k[len("reward/") :] for r in rows for k in r if k.startswith("reward/"))
    )
    rates = list(
        dict.fromkeys(
            k
            for r in rows
            for k in r
            if k.endswith(("/parse_rate", "/valid_rate", "/accept_rate", "/format_rate", "/auc"))
            and not k.startswith("critic/probe")
        )
    )
    for role in roles:
        xs, ys = series(f"reward/{role}")
        if xs:
            ax1.plot(xs, ys, marker="o", label=role)
    ax1.set(xlabel="step", ylabel="mean reward", title="Reward per role", ylim=(-0.02, 1.02))
    xs, ys = series("pool/size")
    ax2.plot(xs, ys, marker="o", color="tab:purple", label="pool size")
    ax2.set(xlabel="step", ylabel="tasks", title="Pool size and validation accuracy")
    vx, vy = series("val/accuracy")
    if vx:  # the paper's Fig. 3: validation accuracy next to pool growth
        twin = ax2.twinx()
        twin.plot(vx, vy, marker="s", ls="--", color="tab:orange", label="validation accuracy")
        twin.set(ylabel="validation accuracy", ylim=(-0.02, 1.02))
        handles = ax2.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
        ax2.legend(handles=handles, fontsize=8, loc="upper left")
    labels = {
        "parse_rate": "output parses",
        "valid_rate": "valid task",
        "accept_rate": "task accepted",
        "format_rate": "scores parse",
        "auc": "AUC intact vs corrupted (probe)",
    }
    curves = [(k, f"{k.split('/')[0]} {labels[k.split('/')[1]]}") for k in rates]
    for key, label in curves + [("solver/accuracy", "solver verifier score")]:
        xs, ys = series(key)
        if xs:
            ax3.plot(xs, ys, marker="o", label=label)
    ax3.set(
        xlabel="step",
        ylabel="rate",
        title="Format, acceptance, critic, accuracy",
        ylim=(-0.02, 1.02),
    )
    for ax in (ax1, ax2, ax3):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    for ax in (ax1, ax3):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    out_png = Path(out_png)
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    return out_png

"""Arms, run results, statistics over seeds and what ``sage-env compare`` writes of them: the table and the plot.

:class:`Stat` (mean, sample standard deviation, min, max), :func:`summarise` per arm,
:func:`markdown` (``table.md``) and :func:`plot` (``compare.png``). Used by
:mod:`learners.reports.compare`, which runs the arms.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Arm:
    """One arm: a protocol and the roles it keeps frozen."""

    name: str
    protocol: str
    freeze: tuple[str, ...] = ()


@dataclass
class RunResult:
    """What one run (arm x seed) measured, read back from its ``metrics.jsonl``.

    Attributes:
        arm: Arm name.
        seed: Seed.
        out: Run folder.
        heldout_start: Held-out verifier accuracy before training (step 0).
        heldout_end: Held-out verifier accuracy after the last step.
        heldout_curve: ``[[step, accuracy], ...]`` of every held-out evaluation.
        solver_verifier_accuracy: Mean over steps of ``solver/accuracy`` (training rounds).
        own_reward: Mean over steps of each role's own reward (``reward/<role>``).
        own_reward_curve: Per role, ``[[step, reward], ...]``.
        rollout_tokens: Tokens generated in rollouts, summed over steps.
        seconds_per_step: Mean wall time of a step.
        steps: Steps the run completed.
        benchmark_end: ``benchmarks``: pass@1 of the run's final model per benchmark.
    """

    arm: str
    seed: int
    out: str
    heldout_start: float | None
    heldout_end: float | None
    heldout_curve: list[list[float]]
    solver_verifier_accuracy: float | None
    own_reward: dict[str, float]
    own_reward_curve: dict[str, list[list[float]]]
    rollout_tokens: float
    seconds_per_step: float | None
    steps: int
    benchmark_end: dict[str, float] = field(default_factory=dict)


@dataclass
class Stat:
    """Mean, sample std (``ddof=1``; 0 for one value), min and max over seeds, and the values."""

    mean: float | None
    std: float | None
    min: float | None
    max: float | None
    n: int
    values: list[float | None] = field(default_factory=list)

    @classmethod
    def of(cls, values: list[float | None]) -> Stat:
        """Statistics of the non-missing values (all fields ``None`` when there are none)."""
        xs = [float(v) for v in values if v is not None]
        if not xs:
            return cls(None, None, None, None, 0, list(values))
        mean = sum(xs) / len(xs)
        var = sum((x - mean) ** 2 for x in xs) / (len(xs) - 1) if len(xs) > 1 else 0.0
        return cls(mean, math.sqrt(var), min(xs), max(xs), len(xs), list(values))


def summarise(arms: list[Arm], runs: list[RunResult]) -> dict[str, dict[str, Any]]:
    """Per-arm statistics over seeds of every reported figure (:class:`Stat` as dicts)."""
    out: dict[str, dict[str, Any]] = {}
    for arm in arms:
        rs = [r for r in runs if r.arm == arm.name]
        roles = list(dict.fromkeys(role for r in rs for role in r.own_reward))
        out[arm.name] = {
            "protocol": arm.protocol,
            "freeze": list(arm.freeze),
            "seeds": [r.seed for r in rs],
            "heldout_start": dataclasses.asdict(Stat.of([r.heldout_start for r in rs])),
            "heldout_end": dataclasses.asdict(Stat.of([r.heldout_end for r in rs])),
            "heldout_change": dataclasses.asdict(
                Stat.of(
                    [
                        None
                        if r.heldout_end is None or r.heldout_start is None
                        else r.heldout_end - r.heldout_start
                        for r in rs
                    ]
                )
            ),
            "solver_verifier_accuracy": dataclasses.asdict(
                Stat.of([r.solver_verifier_accuracy for r in rs])
            ),
            "own_reward": {
                role: dataclasses.asdict(Stat.of([r.own_reward.get(role) for r in rs]))
                for role in roles
            },
            "rollout_tokens": dataclasses.asdict(Stat.of([r.rollout_tokens for r in rs])),
            "seconds_per_step": dataclasses.asdict(Stat.of([r.seconds_per_step for r in rs])),
            "benchmark_end": {
                b: dataclasses.asdict(Stat.of([r.benchmark_end.get(b) for r in rs]))
                for b in dict.fromkeys(b for r in rs for b in r.benchmark_end)
            },
        }
    return out


def _cell(stat: dict[str, Any], digits: int = 3) -> str:
    if stat["mean"] is None:
        return "-"
    text = f"{stat['mean']:.{digits}f}"
    if stat["n"] > 1:
        text += f" ± {stat['std']:.{digits}f} [{stat['min']:.{digits}f}, {stat['max']:.{digits}f}]"
    return text


def markdown(summary: dict[str, Any]) -> str:
    """The two Markdown tables of a comparison (``summary`` as :func:`run_compare` returns)."""
    arms, cfg = summary["arms"], summary["config"]
    n = len(cfg["seeds"])
    lines = [
        f"Budget: {cfg['steps']} steps x {cfg['rounds_per_step']} rounds per arm and seed; "
        f"learner `{cfg['algorithm']}`; model `{cfg['model']}`; {n} seed(s) "
        f"{list(cfg['seeds'])}. Cells: mean ± sample std [min, max] over seeds.",
        "",
        f"Like for like: verifier accuracy on the same {cfg['heldout']} held-out items "
        "(validation split, greedy, external verifier) for every protocol.",
        "",
        "| arm | held-out verifier acc, start | held-out verifier acc, end | change | "
        "solver verifier acc, training rounds | rollout tokens | s/step |",
        "|---|---|---|---|---|---|---|",
    ]
    benches = list(summary.get("benchmark_start") or {})
    if benches:
        lines[-2] += "".join(f" {b} pass@1, end |" for b in benches)
        lines[-1] += "---|" * len(benches)
    for name, a in arms.items():
        lines.append(
            f"| {name} | {_cell(a['heldout_start'])} | {_cell(a['heldout_end'])} | "
            f"{_cell(a['heldout_change'])} | {_cell(a['solver_verifier_accuracy'])} | "
            f"{_cell(a['rollout_tokens'], 0)} | {_cell(a['seconds_per_step'], 1)} |"
            + "".join(f" {_cell(a['benchmark_end'][b])} |" for b in benches)
        )
    if benches:
        start = ", ".join(f"{b} {v:.3f}" for b, v in summary["benchmark_start"].items())
        lines += [
            "",
            f"Benchmarks (first {cfg['benchmark_limit']} items each, greedy pass@1, the same "
            f"verifiers): the starting model scores {start}.",
        ]
    roles = list(dict.fromkeys(role for a in arms.values() for role in a["own_reward"]))
    lines += [
        "",
        "Each protocol's own reward (mean over steps, per role): its own reward function, "
        "NOT comparable across protocols.",
        "",
        "| arm | " + " | ".join(f"own reward: {r}" for r in roles) + " |",
        "|---|" + "---|" * len(roles),
    ]
    for name, a in arms.items():
        cells = [_cell(a["own_reward"][r]) if r in a["own_reward"] else "-" for r in roles]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(runs: list[RunResult], arms: list[Arm], path: str | Path) -> Path:
    """Held-out accuracy and own solver reward against step: mean over seeds, min-max band.

    Returns:
        The PNG path.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(16, 4.5))
    for i, arm in enumerate(arms):
        rs = [r for r in runs if r.arm == arm.name]
        color = f"C{i % 10}"
        for ax, curves in (
            (ax1, [r.heldout_curve for r in rs]),
            (ax3, [r.own_reward_curve.get("solver", []) for r in rs]),
        ):
            steps = sorted({s for c in curves for s, _ in c})
            if not steps:
                continue
            stats = [Stat.of([dict(map(tuple, c)).get(s) for c in curves]) for s in steps]
            ax.plot(steps, [s.mean for s in stats], marker="o", color=color, label=arm.name)
            ax.fill_between(
                steps, [s.min for s in stats], [s.max for s in stats], color=color, alpha=0.2
            )
        end = Stat.of([r.heldout_end for r in rs])
        if end.mean is not None:
            ax2.bar(i, end.mean, yerr=end.std, capsize=4, color=color, alpha=0.7)
            ax2.scatter([i] * end.n, [v for v in end.values if v is not None], color="k", s=12)
    ax2.set_xticks(range(len(arms)), [a.name for a in arms], rotation=20)
    ax1.set(title="Held-out verifier accuracy (mean, min-max band)", xlabel="step")
    ax2.set(title="Held-out verifier accuracy after training (mean ± std, seeds)")
    ax3.set(title="Own solver reward (each protocol's scale)", xlabel="step")
    for ax in (ax1, ax2, ax3):
        ax.grid(alpha=0.3)
    for ax in (ax1, ax2):
        ax.set_ylim(-0.02, 1.02)  # accuracies: the whole [0, 1] scale
    for ax in (ax1, ax3):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in (ax1, ax3):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)

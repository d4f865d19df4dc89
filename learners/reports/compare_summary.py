"""Arms, run results, statistics over seeds and what ``sage-env compare`` writes of them: the table and the plot.

:class:`Stat` (mean, sample standard deviation, min, max), :func:`summarise` per arm,
:func:`markdown` (``table.md``) and :func:`plot` (``compare.png``). Used by
:mod:`learners.training.compare`, which runs the arms.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Arm:
    """One arm: a learner, a protocol and the roles it keeps frozen.

    Attributes:
        name: ``PROTOCOL[-frozen-ROLE...]``, prefixed ``ALGORITHM/`` when the comparison has
            more than one learner (also the run folder under ``OUT``).
        protocol: Registered protocol name.
        freeze: Roles kept frozen.
        algorithm: Registered learner name.
        domains: Task domains the arm's solver trains on (:attr:`Protocol.domains`, else
            the preset's ``EnvConfig.domains``); filled in when the comparison is planned.
    """

    name: str
    protocol: str
    freeze: tuple[str, ...] = ()
    algorithm: str = "trr"
    domains: tuple[str, ...] = ()


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
        trained_steps: Steps whose update changed the weights (``learner/trained`` = 1), or
            ``None`` when the learner reports none of the figures that metric reads.
        heldout_sets: Per execution held-out set (``TrainConfig.heldout``):
            ``{"start", "end", "gained", "lost", "mcnemar_p"}`` of ``heldout/<set>/...``
            (start: after the warm-up, as ``val/accuracy`` at step 0).
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
    trained_steps: int | None = None
    heldout_sets: dict[str, dict[str, float | None]] = field(default_factory=dict)


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


def _set_stats(pairs: list[tuple[float | None, float | None]]) -> dict[str, Any]:
    """``{"start", "end", "change"}`` :class:`Stat` dicts of per-seed ``(start, end)`` pairs."""
    change = [None if a is None or b is None else b - a for a, b in pairs]
    return {
        "start": dataclasses.asdict(Stat.of([a for a, _ in pairs])),
        "end": dataclasses.asdict(Stat.of([b for _, b in pairs])),
        "change": dataclasses.asdict(Stat.of(change)),
    }


def summarise(arms: list[Arm], runs: list[RunResult]) -> dict[str, dict[str, Any]]:
    """Per-arm statistics over seeds of every reported figure (:class:`Stat` as dicts).

    ``heldout`` maps each set the arm was scored on (``"math"``: ``val/accuracy``; execution
    sets: ``heldout/<set>/...``) to its ``start`` / ``end`` / ``change`` statistics.
    """
    out: dict[str, dict[str, Any]] = {}
    for arm in arms:
        rs = [r for r in runs if r.arm == arm.name]
        roles = list(dict.fromkeys(role for r in rs for role in r.own_reward))
        heldout = {}
        if any(r.heldout_start is not None or r.heldout_end is not None for r in rs):
            heldout["math"] = _set_stats([(r.heldout_start, r.heldout_end) for r in rs])
        for name in dict.fromkeys(n for r in rs for n in r.heldout_sets):
            got = [r.heldout_sets.get(name, {}) for r in rs]
            heldout[name] = _set_stats([(g.get("start"), g.get("end")) for g in got])
        out[arm.name] = {
            "algorithm": arm.algorithm,
            "protocol": arm.protocol,
            "freeze": list(arm.freeze),
            "domains": list(arm.domains),
            "seeds": [r.seed for r in rs],
            "steps": max((r.steps for r in rs), default=0),
            "heldout": heldout,
            "trained_steps": dataclasses.asdict(Stat.of([r.trained_steps for r in rs])),
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


def _trained_cell(arm: dict[str, Any], budget: int) -> str:
    stat = arm["trained_steps"]
    if stat["mean"] is None:
        return "n/a (the learner reports no update figures)"
    text = f"{_cell(stat, 1) if stat['min'] != stat['max'] else int(stat['min'])} of {budget}"
    return text + (" **trained nothing**" if stat["max"] == 0 else "")


def _heldout_rows(summary: dict[str, Any]) -> list[tuple[str, str, dict, dict, dict]]:
    """``(set, arm, start, end, change)`` rows: held-out sets by set, then ``--benchmarks``."""
    arms = summary["arms"]
    sets = list(dict.fromkeys(name for a in arms.values() for name in a["heldout"]))
    rows = [
        (name, arm, *(a["heldout"][name][k] for k in ("start", "end", "change")))
        for name in sets
        for arm, a in arms.items()
        if name in a["heldout"]
    ]
    for b, start in (summary.get("benchmark_start") or {}).items():
        first = dataclasses.asdict(Stat.of([start]))
        for arm, a in arms.items():
            end = a["benchmark_end"].get(b, dataclasses.asdict(Stat.of([])))
            change = Stat.of([None if v is None else v - start for v in end["values"]])
            rows.append((f"{b} pass@1", arm, first, end, dataclasses.asdict(change)))
    return rows


def _training_rows(arms: dict[str, Any], steps: int) -> list[str]:
    """The training table: each arm's own tasks and costs (not like for like)."""
    lines = [
        "",
        "Training, NOT like for like: each arm's own tasks and costs. Trained steps: steps whose "
        "update changed the weights (learner/trained).",
        "",
        "| arm | learner | protocol | trains | trained steps | solver verifier acc, own "
        "training tasks | rollout tokens | s/step (with held-out scoring) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, a in arms.items():
        lines.append(
            f"| {name} | {a['algorithm']} | {a['protocol']} | {', '.join(a['domains']) or '-'} | "
            f"{_trained_cell(a, steps)} | {_cell(a['solver_verifier_accuracy'])} | "
            f"{_cell(a['rollout_tokens'], 0)} | {_cell(a['seconds_per_step'], 1)} |"
        )
    return lines


ALL_HELDOUT_ZERO = (
    "Every held-out figure is 0: no arm solved a held-out item before or after training (a "
    "random or tiny model, or answers cut by the token budget), so this table cannot tell the "
    "arms apart; compare with a model that solves some items"
)
"""The line ``table.md`` and ``sage-env compare`` add when :func:`all_heldout_zero`."""


def all_heldout_zero(summary: dict[str, Any]) -> bool:
    """Whether every held-out start and end value of every arm and seed (and benchmark) is 0.

    False when nothing was scored.
    """
    values = [
        v
        for _, _, start, end, _ in _heldout_rows(summary)
        for stat in (start, end)
        for v in stat["values"]
        if v is not None
    ]
    return bool(values) and all(v == 0 for v in values)


def markdown(summary: dict[str, Any]) -> str:
    """The three Markdown tables of a comparison (``summary`` as ``run_compare`` returns).

    Held-out accuracy (like for like within a set), training (each arm's own tasks) and each
    protocol's own reward.
    """
    arms, cfg = summary["arms"], summary["config"]
    n = len(cfg["seeds"])
    learners = ", ".join(f"`{a}`" for a in dict.fromkeys(a["algorithm"] for a in arms.values()))
    sources = summary.get("heldout", {})
    scored = {name for a in arms.values() for name in a["heldout"]}
    described = [
        f"{name}: {info['items']} items, {info['source']}, scored by {info['verifier']}"
        for name, info in sources.items()
        if isinstance(info, dict) and name in scored
    ]
    lines = [
        f"Budget: {cfg['steps']} steps x {cfg['rounds_per_step']} rounds per arm and seed; "
        f"learner(s) {learners}; model `{cfg['model']}`; {n} seed(s) {list(cfg['seeds'])}. "
        "Cells: mean ± sample std [min, max] over seeds.",
        "",
        "Held-out accuracy, like for like within a set (the same items, greedy, the same "
        "external verifier); start is after the warm-up, before the first update. "
        + ("Sets: " + "; ".join(described) + ". " if described else "")
        + "Compare rows of one set only.",
        "",
        "| set | arm | start | end | change |",
        "|---|---|---|---|---|",
    ]
    rows = _heldout_rows(summary)
    for name, arm, start, end, change in rows:
        lines.append(f"| {name} | {arm} | {_cell(start)} | {_cell(end)} | {_cell(change)} |")
    if all_heldout_zero(summary):
        lines += ["", f"**{ALL_HELDOUT_ZERO}**"]
    partial = {
        name: [arm for s, arm, *_ in rows if s == name]
        for name in dict.fromkeys(s for s, *_ in rows)
    }
    partial = {k: v for k, v in partial.items() if len(v) < len(arms)}
    if partial:
        lines += [
            "",
            "Not like for like across all arms: each arm is scored on the sets of the domains "
            "it trains (--no-heldout-match scores every arm on every set); "
            + "; ".join(f"{k} holds {', '.join(v)}" for k, v in partial.items())
            + ".",
        ]
    if summary.get("benchmark_start"):
        lines += [
            "",
            f"Benchmarks: the first {cfg['benchmark_limit']} items each, greedy pass@1 through "
            "the same verifiers; start is the starting model's score (the same for every arm).",
        ]
    lines += _training_rows(arms, cfg["steps"])
    roles = list(dict.fromkeys(role for a in arms.values() for role in a["own_reward"]))
    if not roles:
        return "\n".join([*lines, "", "No run logged an own reward (reward/ROLE)."])
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


def _end_points(r: RunResult) -> dict[str, float | None]:
    """A run's held-out accuracy after training, per set (``"math"`` and execution sets)."""
    return {"math": r.heldout_end, **{k: v.get("end") for k, v in r.heldout_sets.items()}}


def _set_line(r: RunResult, name: str) -> list[list[float | None]]:
    """An execution set's ``[[0, start], [last step, end]]`` in a run."""
    got = r.heldout_sets.get(name, {})
    return [[0, got.get("start")], [r.steps, got.get("end")]]


def trained_nothing(rs: list[RunResult]) -> bool:
    """Whether every run of an arm reported ``learner/trained`` and none changed the weights."""
    return bool(rs) and all(r.trained_steps == 0 for r in rs)


def _draw_arm(
    axes: tuple[Any, Any, Any],
    i: int,
    arm: Arm,
    rs: list[RunResult],
    sets: list[str],
    n_arms: int,
    drawn: dict[tuple, list[str]],
) -> None:
    """One arm's lines on the curve panels and its bars, one per held-out set.

    ``drawn`` maps a curve already drawn (panel, style, points) to the arms that drew it: a
    curve equal to one drawn before is shifted right by 1.5 % of the step range per earlier
    arm and labelled ``(= ARM)``, so identical lines do not hide each other. An arm that
    trained nothing (:func:`trained_nothing`) is drawn with ``x`` markers and hatched bars and
    labelled ``(trained nothing)``.
    """
    ax1, ax2, ax3 = axes
    width = 0.8 / max(n_arms, 1)
    color = f"C{i % 10}"
    idle = trained_nothing(rs)
    label = arm.name + (" (trained nothing)" if idle else "")
    named: set[Any] = set()  # axes whose legend names this arm already
    for ax, curves, style in (
        (ax1, [r.heldout_curve for r in rs], "-"),
        *((ax1, [_set_line(r, k) for r in rs], "--") for k in sets if k != "math"),
        (ax3, [r.own_reward_curve.get("solver", []) for r in rs], "-"),
    ):
        curves = [[p for p in c if p[1] is not None] for c in curves]
        steps = sorted({s for c in curves for s, _ in c})
        if not steps:
            continue
        stats = [Stat.of([dict(map(tuple, c)).get(s) for c in curves]) for s in steps]
        means = [s.mean for s in stats]
        twins = drawn.setdefault((id(ax), style, tuple(steps), tuple(means)), [])
        shift = len(twins) * 0.015 * max(steps[-1] - steps[0], 1)
        xs = [s + shift for s in steps]
        same = f" (= {', '.join(twins)})" if twins else ""
        twins.append(arm.name)
        ax.plot(
            xs,
            means,
            style,
            marker="x" if idle else "o",
            markersize=8 if idle else 6,
            color=color,
            label=None if ax in named else label + same,
        )
        named.add(ax)
        ax.fill_between(xs, [s.min for s in stats], [s.max for s in stats], color=color, alpha=0.2)
    for j, name in enumerate(sets):
        end = Stat.of([_end_points(r).get(name) for r in rs])
        if end.mean is None:
            continue
        x = j + (i - (n_arms - 1) / 2) * width
        ax2.bar(
            x,
            end.mean,
            width,
            yerr=end.std,
            capsize=3,
            color=color,
            alpha=0.7,
            hatch="//" if idle else None,
            label=None if ax2 in named else label,
        )
        named.add(ax2)
        ax2.scatter([x] * end.n, [v for v in end.values if v is not None], color="k", s=10)


def plot(runs: list[RunResult], arms: list[Arm], path: str | Path) -> Path:
    """Write :func:`figure` to ``path`` (``compare.png``); returns the PNG path."""
    import matplotlib.pyplot as plt

    fig = figure(runs, arms)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


def figure(runs: list[RunResult], arms: list[Arm]) -> Any:
    """Held-out accuracy and own solver reward against step: mean over seeds, min-max band.

    Panels: the math held-out curve (``val/accuracy``) with each execution set's start and end
    dashed; held-out accuracy after training, one group of bars per set (mean ± std, the
    seeds as dots); each protocol's own solver reward. Identical curves are shifted apart and
    labelled, and arms that trained nothing marked (:func:`_draw_arm`; a footnote says so).

    Returns:
        The matplotlib ``Figure``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(16, 4.5))
    sets = list(dict.fromkeys(k for r in runs for k, v in _end_points(r).items() if v is not None))
    drawn: dict[tuple, list[str]] = {}
    for i, arm in enumerate(arms):
        rs = [r for r in runs if r.arm == arm.name]
        _draw_arm((ax1, ax2, ax3), i, arm, rs, sets, len(arms), drawn)
    idle = [a.name for a in arms if trained_nothing([r for r in runs if r.arm == a.name])]
    notes = []
    if idle:
        notes.append(
            f"x markers, hatched bars: trained nothing ({', '.join(idle)}: learner/trained = 0 "
            "at every step)"
        )
    if any(len(names) > 1 for names in drawn.values()):
        notes.append("(= ARM): the same curve as ARM's, shifted right to stay visible")
    ax2.set_xticks(range(len(sets)), sets)
    ax1.set(title="Held-out accuracy (math solid; exec sets dashed)", xlabel="step")
    ax2.set(title="Held-out accuracy after training, per set (mean ± std)")
    ax3.set(title="Own solver reward (each protocol's scale)", xlabel="step")
    for ax in (ax1, ax2, ax3):
        ax.grid(alpha=0.3)
    for ax in (ax1, ax2):
        ax.set_ylim(-0.02, 1.02)  # accuracies: the whole [0, 1] scale
    for ax in (ax1, ax3):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in (ax1, ax2, ax3):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout(rect=(0, 0.06 if notes else 0, 1, 1))
    if notes:
        fig.text(0.01, 0.01, "; ".join(notes), fontsize=9, color="#a16207")
    return fig

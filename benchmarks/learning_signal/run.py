"""Learning signal: does each protocol give every role something to learn from?

SAGE (two seeds) vs AZR vs MAE vs plain RLVR on the default model, with the same learner
(TRR++), sampling, token budgets and steps: the ``demo`` preset with only the protocol (and
the seed) changed. Per step it records, from each run's ``metrics.jsonl``: proposal
parse/validity/acceptance, pool size (seeds vs generated), critic (or judge) format rate,
per-role reward mean and std, truncation per role, critic discrimination (AUC of intact vs
corrupted seed questions, ``sage_env.diagnostics.critic_probe``) and greedy held-out validation
accuracy (first and last step; the step-0 figure is measured once, since every arm starts from the
same model).

Writes ``benchmarks/learning_signal/results/``: ``summary.json`` (every per-step figure),
``table.md``, and plots in the manner of SAGE's Figure 3: ``pool_growth.png``,
``validation.png``, ``rewards.png`` (per-role mean reward, with std as a band).

Usage::

    python -m benchmarks.learning_signal.run                      # CPU, default model, ~60 min
    python -m benchmarks.learning_signal.run --steps 1 --rounds 1 --val-limit 2 --model PATH
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import time
from pathlib import Path

from learners.reports.plots import read_metrics
from learners.training.loop import train
from learners.training.presets import PRESETS

OUT = Path(__file__).parent / "results"

ARMS = {
    "sage-seed0": {"protocol": "sage", "seed": 0},
    "sage-seed1": {"protocol": "sage", "seed": 1},
    "azr": {"protocol": "azr", "seed": 0},
    "mae": {"protocol": "mae", "seed": 0},
    "rlvr": {"protocol": "rlvr", "seed": 0},
}
PROPOSER = {"sage": "challenger", "azr": "proposer", "mae": "proposer"}
REVIEWER = {"sage": "critic", "mae": "judge"}
KEYS = (
    "parse_rate",
    "valid_rate",
    "accept_rate",
)


def run_arm(name: str, args: argparse.Namespace, val_at_start: bool) -> list[dict]:
    """Train one arm; return its metric rows."""
    spec = ARMS[name]
    base = PRESETS["demo"]
    reviewed = spec["protocol"] in REVIEWER
    cfg = dataclasses.replace(
        base,
        model=args.model,
        out=str(Path(args.out) / name),
        steps=args.steps,
        rounds_per_step=args.rounds,
        seed=spec["seed"],
        val_every=args.steps,
        val_limit=args.val_limit,
        val_max_new_tokens=args.val_max_new_tokens,
        val_at_start=val_at_start,
        critic_probe_size=args.probe_size if reviewed else 0,
        gate_calibration=reviewed and args.probe_size >= 2,
        transcripts_per_step=1,
        env=dataclasses.replace(base.env, protocol=spec["protocol"]),
    )
    if Path(cfg.out).exists():
        shutil.rmtree(cfg.out)
    train(cfg, progress=not args.no_progress)
    return read_metrics(Path(cfg.out) / "metrics.jsonl")


def arm_summary(name: str, rows: list[dict], seconds: float) -> dict:
    """Per-step figures of one arm, named by role (``proposer``/``reviewer`` for tables)."""
    protocol = ARMS[name]["protocol"]
    prop, rev = PROPOSER.get(protocol), REVIEWER.get(protocol)
    steps = []
    for r in rows:
        if r.get("step", 0) < 1:
            continue
        s = {
            "step": r["step"],
            "pool_size": r.get("pool/size"),
            "generated": r.get("pool/generated"),
        }
        if prop:
            for k in KEYS:
                s[f"proposer_{k}"] = r.get(f"{prop}/{k}")
        if rev:
            s["reviewer_format_rate"] = r.get(f"{rev}/format_rate")
        for key, value in r.items():
            if key.startswith(("reward/", "reward_std/", "truncated/", "critic/", "gate/")):
                s[key] = value
        if "val/accuracy" in r:
            s["val_accuracy"] = r["val/accuracy"]
        s["step_seconds"] = r.get("time/step_s")
        steps.append(s)
    start = [r for r in rows if r.get("step") == 0]
    return {
        "arm": name,
        "protocol": protocol,
        "seconds": seconds,
        "start": start[0] if start else {},
        "steps": steps,
    }


def _fmt(x, pct: bool = False) -> str:
    if x is None:
        return "-"
    return f"{100 * x:.0f}%" if pct else f"{x:.2f}"


def table(summary: dict) -> str:
    """Markdown: first and last step of each arm."""
    lines = [
        "| arm | step | proposals parse | valid | accepted | generated in pool | "
        "critic format | critic AUC | gate alpha | reward std (min over roles) | "
        "truncated (max over roles) | val acc |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arm in summary["arms"]:
        first_auc = arm["start"].get("critic/auc")
        for s in (arm["steps"][0], arm["steps"][-1]) if arm["steps"] else ():
            stds = [v for k, v in s.items() if k.startswith("reward_std/") and v is not None]
            truncs = [v for k, v in s.items() if k.startswith("truncated/") and v is not None]
            auc = s.get("critic/auc", first_auc if s is arm["steps"][0] else None)
            val = s.get("val_accuracy", summary["val_start"] if s is arm["steps"][0] else None)
            lines.append(
                f"| {arm['arm']} | {s['step']} | {_fmt(s.get('proposer_parse_rate'), True)} | "
                f"{_fmt(s.get('proposer_valid_rate'), True)} | "
                f"{_fmt(s.get('proposer_accept_rate'), True)} | {_fmt(s.get('generated'))} | "
                f"{_fmt(s.get('reviewer_format_rate'), True)} | {_fmt(auc)} | "
                f"{_fmt(s.get('gate/alpha'))} | {_fmt(min(stds) if stds else None)} | "
                f"{_fmt(max(truncs) if truncs else None, True)} | {_fmt(val)} |"
            )
    return "\n".join(lines)


def plots(summary: dict, out: Path) -> None:
    """Pool growth, validation accuracy and per-role reward against step (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = summary["arms"]
    fig, ax = plt.subplots(figsize=(6, 4))
    for arm in arms:
        xs = [0] + [s["step"] for s in arm["steps"]]
        ys = [0] + [s.get("generated") or 0 for s in arm["steps"]]
        ax.plot(xs, ys, marker="o", label=arm["arm"])
    ax.set(xlabel="step", ylabel="generated tasks in pool", title="Pool growth")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "pool_growth.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    for arm in arms:
        pts = [(0, summary["val_start"])] + [
            (s["step"], s["val_accuracy"]) for s in arm["steps"] if "val_accuracy" in s
        ]
        pts = [p for p in pts if p[1] is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=arm["arm"])
    ax.set(xlabel="step", ylabel="greedy accuracy", title="Held-out validation (math)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "validation.png", dpi=120)
    plt.close(fig)

    fig, axes = plt.subplots(1, len(arms), figsize=(3.6 * len(arms), 3.4), sharey=True)
    axes = [axes] if len(arms) == 1 else list(axes)
    for ax, arm in zip(axes, arms):
        roles = sorted(
            {k[len("reward/") :] for s in arm["steps"] for k in s if k.startswith("reward/")}
        )
        for role in roles:
            xs = [s["step"] for s in arm["steps"] if s.get(f"reward/{role}") is not None]
            ys = [s[f"reward/{role}"] for s in arm["steps"] if s.get(f"reward/{role}") is not None]
            sd = [
                s.get(f"reward_std/{role}") or 0
                for s in arm["steps"]
                if s.get(f"reward/{role}") is not None
            ]
            line = ax.plot(xs, ys, marker="o", label=role)[0]
            ax.fill_between(
                xs,
                [y - d for y, d in zip(ys, sd)],
                [y + d for y, d in zip(ys, sd)],
                color=line.get_color(),
                alpha=0.15,
            )
        ax.set(title=arm["arm"], xlabel="step")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("mean reward (band: std)")
    fig.tight_layout()
    fig.savefig(out / "rewards.png", dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arms", default=",".join(ARMS))
    p.add_argument("--model", default=PRESETS["demo"].model)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--rounds", type=int, default=PRESETS["demo"].rounds_per_step)
    p.add_argument("--val-limit", type=int, default=64)
    p.add_argument("--val-max-new-tokens", type=int, default=160)
    p.add_argument("--probe-size", type=int, default=24)
    p.add_argument("--out", default=str(OUT))
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    names = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = set(names) - set(ARMS)
    if unknown:
        p.error(f"unknown arm(s) {sorted(unknown)}; known: {list(ARMS)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    arms, val_start = [], None
    t_all = time.perf_counter()
    for i, name in enumerate(names):
        t0 = time.perf_counter()
        rows = run_arm(name, args, val_at_start=i == 0)
        if i == 0:
            val_start = next(
                (r["val/accuracy"] for r in rows if r.get("step") == 0 and "val/accuracy" in r),
                None,
            )
        arms.append(arm_summary(name, rows, time.perf_counter() - t0))
        summary = {
            "model": args.model,
            "steps": args.steps,
            "rounds_per_step": args.rounds,
            "val_limit": args.val_limit,
            "val_start": val_start,
            "seconds": time.perf_counter() - t_all,
            "arms": arms,
        }
        (out / "summary.json").write_text(json.dumps(summary, indent=1))  # after every arm
    (out / "table.md").write_text(table(summary) + "\n")
    plots(summary, out)
    print(table(summary))
    return summary


if __name__ == "__main__":
    main()

"""Head-to-head: SAGE vs AZR vs MAE vs plain RLVR (and ablations) on one model and budget.

Each arm is one ``learners.train.train`` run with the same model, seeds, steps, rounds per
step, sampling, learner and validation split; only the protocol (or the frozen roles) differ.
Writes to ``benchmarks/results/compare/``: one run folder per arm, ``table.md``,
``summary.json`` and ``compare.png`` (per-role reward, pool size, proposal validity and
validation accuracy against step).

Usage::

    python benchmarks/compare_protocols.py --steps 4 --rounds 4            # CPU, default model
    python benchmarks/compare_protocols.py --arms sage,azr,sage-frozen-challenger
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import time
from pathlib import Path

from learners.plots import read_metrics
from learners.train import PRESETS, train

OUT = Path(__file__).parent / "results" / "compare"
_OUT = [OUT]


def args_out(name: str) -> Path:
    """Run folder of one arm."""
    return _OUT[0] / name


ARMS = {
    "sage": {"protocol": "sage"},
    "azr": {"protocol": "azr"},
    "mae": {"protocol": "mae"},
    "rlvr": {"protocol": "rlvr"},
    "sage-frozen-challenger": {"protocol": "sage", "freeze": ("challenger",)},
    "sage-frozen-critic": {"protocol": "sage", "freeze": ("critic",)},
}


def run_arm(name: str, args: argparse.Namespace) -> dict:
    spec = ARMS[name]
    base = PRESETS["demo"]
    cfg = dataclasses.replace(
        base,
        model=args.model,
        out=str(args_out(name)),
        steps=args.steps,
        rounds_per_step=args.rounds,
        seed=args.seed,
        val_every=args.val_every,
        val_limit=args.val_limit,
        freeze=tuple(spec.get("freeze", ())),
        env=dataclasses.replace(base.env, protocol=spec["protocol"]),
    )
    if Path(cfg.out).exists():
        shutil.rmtree(cfg.out)
    t0 = time.perf_counter()
    train(cfg, progress=True)
    rows = read_metrics(Path(cfg.out) / "metrics.jsonl")
    steps = [r for r in rows if r.get("step", 0) > 0]
    last = steps[-1] if steps else {}
    vals = [r["val/accuracy"] for r in rows if "val/accuracy" in r]
    return {
        "arm": name,
        "seconds": time.perf_counter() - t0,
        "final_pool": last.get("pool/size"),
        "generated": last.get("pool/generated"),
        "val_first": vals[0] if vals else None,
        "val_last": vals[-1] if vals else None,
        "val_best": max(vals) if vals else None,
        "mean_reward": {
            k[len("reward/") :]: sum(r[k] for r in steps if r.get(k) is not None)
            / max(1, sum(1 for r in steps if r.get(k) is not None))
            for k in last
            if k.startswith("reward/")
        },
        "valid_rate": _mean(steps, "valid_rate"),
        "seconds_per_step": _mean(steps, "time/step_s"),
    }


def _mean(rows: list[dict], suffix: str) -> float | None:
    vals = [v for r in rows for k, v in r.items() if k.endswith(suffix) and v is not None]
    return sum(vals) / len(vals) if vals else None


def plot(arms: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(20, 4))
    for name in arms:
        rows = read_metrics(args_out(name) / "metrics.jsonl")

        def series(key, rows=rows):
            pts = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
            return [p[0] for p in pts], [p[1] for p in pts]

        solver = series("reward/solver")
        axes[0].plot(*solver, marker="o", label=name)
        axes[1].plot(*series("pool/size"), marker="o", label=name)
        key = next((k for r in rows for k in r if k.endswith("/valid_rate")), None)
        if key:
            axes[2].plot(*series(key), marker="o", label=f"{name} ({key.split('/')[0]})")
        axes[3].plot(*series("val/accuracy"), marker="s", label=name)
    titles = ["Solver mean reward", "Pool size", "Proposal validity", "Validation accuracy"]
    for ax, title in zip(axes, titles):
        ax.set(title=title, xlabel="step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def table(summaries: list[dict]) -> str:
    roles = sorted({r for s in summaries for r in s["mean_reward"]})
    head = (
        "| arm | s/step | pool (generated) | proposal validity | val acc first -> last "
        "(best) | " + " | ".join(f"{r} reward" for r in roles) + " |"
    )
    lines = [head, "|" + "---|" * (5 + len(roles))]
    for s in summaries:
        fmt = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
        cells = [fmt(s["mean_reward"].get(r)) for r in roles]
        lines.append(
            f"| {s['arm']} | {fmt(s['seconds_per_step'])} | {s['final_pool']:.0f} "
            f"({s['generated']:.0f}) | {fmt(s['valid_rate'])} | {fmt(s['val_first'])} "
            f"-> {fmt(s['val_last'])} ({fmt(s['val_best'])}) | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arms", default="sage,azr,mae,rlvr")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--val-every", type=int, default=2)
    ap.add_argument("--val-limit", type=int, default=16)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = set(arms) - set(ARMS)
    if unknown:
        raise SystemExit(f"unknown arm(s) {sorted(unknown)}; known: {sorted(ARMS)}")
    _OUT[0] = Path(args.out)
    _OUT[0].mkdir(parents=True, exist_ok=True)
    summaries = [run_arm(a, args) for a in arms]
    (_OUT[0] / "summary.json").write_text(
        json.dumps({"args": vars(args), "arms": summaries}, indent=2)
    )
    (_OUT[0] / "table.md").write_text(table(summaries) + "\n")
    plot(arms, _OUT[0] / "compare.png")
    print(table(summaries))


if __name__ == "__main__":
    main()

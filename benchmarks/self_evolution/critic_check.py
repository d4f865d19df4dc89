"""Can the shared warm start's critic pass a good execution task? The gate before the grid.

Issue 47, item 4: the ``sage`` arm's quality gate passes a proposal when the critic's score q
reaches alpha, calibrated per domain on the critic probe (intact vs corrupted seed questions,
:mod:`sage_env.diagnostics.critic_probe`). With a critic at chance on execution questions the
gate passes valid proposals by score noise. This measures, for the warm start of an
:class:`~benchmarks.self_evolution.run.EvolutionConfig` (or a plan's settings):

- **the cell's own probe** (the ``sage`` arm's :class:`~learners.training.monitors.CriticProbe`
  at each seed: ``gate/alpha_exec``, ``critic/auc_exec``, the share of intact and corrupted
  items the calibrated gate passes);
- **a clean probe** on the held-out execution programs (``sage_env/data/exec_heldout.jsonl``:
  never a warm-up demonstration, disjoint from the seeds), scored with the same expected-score
  estimate: the critic's judgement on questions it has not seen.

Writes ``OUT/critic_check.json``. No training beyond the warm start (built or loaded from the
cache), no rollouts: a few minutes after the warm start.

Usage::

    python -m benchmarks.self_evolution.critic_check --plan benchmarks/self_evolution/plans/exec20.toml
    python -m benchmarks.self_evolution.critic_check --warmup-steps 48 --warmup-critic-reviews 96
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from benchmarks.learning_curve import run as lc
from benchmarks.self_evolution.run import EvolutionConfig, warm_start


def heldout_exec_tasks() -> list:
    """The held-out execution programs as ``exec`` tasks (solver questions), for a clean probe."""
    from importlib import resources

    from sage_env.tasks import exec_tasks

    path = resources.files("sage_env") / "data" / "exec_heldout.jsonl"
    tasks = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            tasks.append(
                exec_tasks.make_task(
                    r["mode"], r["program"], [r["input"]], [r["output"]], task_id=r["id"]
                )
            )
    return tasks


def cell_probe(cfg: EvolutionConfig, folder: str, seed: int) -> Any:
    """The ``sage`` cell's critic probe at ``seed`` (its config, its seeds, its items)."""
    import sage_env
    from learners.training.monitors import CriticProbe
    from sage_env.env_setup import make_pool
    from sage_env.tasks.exec_tasks import load_exec_seeds

    tcfg = lc.train_config(cfg.curve_config(folder, seed), "sage")
    tasks = sage_env.load_seeds()
    if "exec" in tcfg.env.domains:
        tasks += load_exec_seeds()
    seeds = [t for t in make_pool(tcfg.env, tasks).tasks if t.source != "generated"]
    return tcfg, CriticProbe(tcfg, seeds)


def measure(cfg: EvolutionConfig, seeds: list[int], clean_items: int = 96) -> dict[str, Any]:
    """Build (or load) the warm start and probe its critic; see the module docstring.

    Returns:
        ``{"warm_start": facts, "cells": {seed: metrics}, "clean": report, "seconds": s}``.
    """
    from learners.policy.hf_policy import HFPolicy
    from sage_env.diagnostics import critic_probe
    from sage_env.text.parsing import ScoredReply

    t0 = time.perf_counter()
    folder, facts = warm_start(cfg)
    policy = HFPolicy(folder, device="cpu", seed=0)
    out: dict[str, Any] = {"warm_start": facts, "cells": {}}
    try:
        tcfg = None
        for seed in seeds:
            tcfg, probe = cell_probe(cfg, folder, seed)
            m = probe(policy, [])
            intact, corrupted = m["critic/probe_q_intact"], m["critic/probe_q_corrupted"]
            alpha = m.get("gate/alpha_exec", m.get("gate/alpha"))
            out["cells"][str(seed)] = {
                "auc_exec": m.get("critic/auc_exec", m["critic/auc"]),
                "alpha_exec": alpha,
                "youden_exec": m.get("gate/youden_exec"),
                "pass_intact": sum(q >= alpha for q in intact) / max(len(intact), 1),
                "pass_corrupted": sum(q >= alpha for q in corrupted) / max(len(corrupted), 1),
                "mean_q_intact": sum(intact) / max(len(intact), 1),
                "mean_q_corrupted": sum(corrupted) / max(len(corrupted), 1),
            }
        rules = tcfg.env.rewards
        items = critic_probe.probe_set(heldout_exec_tasks(), clean_items, seed=0, config=tcfg.env)
        probs = policy.score_distribution(
            [it.observation for it in items], temperature=tcfg.temperature
        )
        replies = [ScoredReply("", p) for p in probs]
        report = critic_probe.discrimination(
            items, replies, rules.alpha, rules.critic_score_rule, rules.critic_score_estimate
        )
        threshold = critic_probe.best_threshold(
            items, replies, rules.critic_score_rule, estimate=rules.critic_score_estimate
        )
        out["clean"] = {"auc": report.auc, "gap": report.gap, "youden_alpha": threshold,
                        "n": report.n}
    finally:
        policy.close()
    out["seconds"] = time.perf_counter() - t0
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line (see the module docstring)."""
    from benchmarks.self_evolution import cells

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plan", help="a plan TOML: its settings (warm-up included)")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--warmup-steps", type=int)
    ap.add_argument("--warmup-critic-reviews", type=int)
    ap.add_argument("--out", default="runs/self_evolution/critic_check")
    args = ap.parse_args(argv)
    cfg = EvolutionConfig(arms="sage", progress=True)
    if args.plan:
        cfg = cells.load_plan(args.plan).evolution_config()
    changes = {
        k: v
        for k, v in (
            ("warmup_steps", args.warmup_steps),
            ("warmup_critic_reviews", args.warmup_critic_reviews),
        )
        if v is not None
    }
    cfg = dataclasses.replace(cfg, **changes)
    result = measure(cfg, [int(s) for s in args.seeds.split(",")])
    result["settings"] = {
        "warmup_steps": cfg.warmup_steps,
        "warmup_critic_reviews": cfg.warmup_critic_reviews,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "critic_check.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "warm_start"}, indent=1))
    return result


if __name__ == "__main__":
    main()

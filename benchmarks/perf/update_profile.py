"""Where the learner update's time goes, on the demo's own rollouts (issue 35).

Replays a demo's recorded updates (``benchmarks/perf/demo_memory.py --dump-buffers DIR``): the
first update is run untimed (it creates AdamW's state), then the second is timed, split into

- ``forward_s``: the policy's log-prob passes (``token_logprobs``, the reference model's
  pass included when ``kl_coef > 0``);
- ``backward_s``: ``loss.backward()`` (with activation checkpointing it holds the recompute);
- ``optimizer_s``: gradient clipping and the AdamW step;
- ``other_s``: the rest (advantages, the loss, bookkeeping).

It also counts what was forwarded: rows, padded tokens (rows x width, summed over
micro-batches), and the buffer's prompt and completion tokens, with the prompt tokens left
once each distinct prompt is forwarded once. Each setting (``PGConfig`` fields over the demo
preset's learner) runs in its own process, settings in turn, ``--repeats`` times; figures
are medians, and ``_vs_first`` ratios are to the first setting. ``--samples K`` widens the
buffer to K solver samples per prompt (the recorded completions repeated in turn with fresh
rewards: time depends on lengths, not on which tokens), as the demo at ``solver_samples = K``
would make. Writes ``benchmarks/perf/results/update_profile.json``. Never asserts a time.

Usage::

    python -m benchmarks.perf.demo_memory --json runs/prof/phases.json \\
        --dump-buffers runs/prof/buf -- \\
        --preset demo \\
        --steps 2 --warmup.steps 0 --val-every 0 --critic-probe-size 0 --heldout "" \\
        --no-gate-calibration --report-to none --out runs/prof/run
    python -m benchmarks.perf.update_profile --buffers runs/prof/buf
    python -m benchmarks.perf.update_profile --buffers runs/prof/buf --samples 8 \\
        --out benchmarks/perf/results/update_profile_k8.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).parent / "results" / "update_profile.json"
SETTINGS = {
    "before (checkpointing, every prompt forwarded)": {"share_prompts": False},
    "shared prompts": {"share_prompts": True},
    "no checkpointing": {"share_prompts": False, "gradient_checkpointing": False},
    "shared prompts, no checkpointing": {"share_prompts": True, "gradient_checkpointing": False},
    "shared prompts, bf16 autocast": {"share_prompts": True, "autocast_bf16": True},
    "shared prompts, bf16 autocast, no checkpointing": {
        "share_prompts": True,
        "autocast_bf16": True,
        "gradient_checkpointing": False,
    },
}
"""Name -> ``PGConfig`` fields over the demo preset's learner."""
PARTS = ("forward_s", "backward_s", "optimizer_s", "other_s")


def widen(buffer: list, samples: int, seed: int) -> list:
    """``buffer`` with every solver prompt group grown (or cut) to ``samples`` sequences.

    The added sequences repeat the group's recorded completions in turn; every solver
    sequence gets a fresh uniform reward, so no group's advantages are all 0.
    """
    from dataclasses import replace

    rng = random.Random(seed)
    groups: dict[tuple, list] = {}
    out = []
    for t in buffer:
        if t.role == "solver":
            groups.setdefault((t.phase, tuple(t.prompt_ids)), []).append(t)
        else:
            out.append(t)
    for members in groups.values():
        for j in range(samples):
            out.append(replace(members[j % len(members)], reward=round(rng.random(), 6)))
    return out


def counts(buffer: list) -> dict[str, int]:
    """Token counts of a buffer: prompts, distinct prompts, completions."""
    distinct = {tuple(t.prompt_ids) for t in buffer}
    return {
        "sequences": len(buffer),
        "prompt_tokens": sum(len(t.prompt_ids) for t in buffer),
        "distinct_prompt_tokens": sum(len(p) for p in distinct),
        "completion_tokens": sum(len(t.completion_ids) for t in buffer),
    }


def one(setting: dict, model: str, buffers: str, samples: int, seed: int) -> dict:
    """Replay the first update untimed, then time the second under ``setting``."""
    import dataclasses
    import pickle

    import torch

    from learners.algorithms.registry import make_learner
    from learners.policy import HFPolicy
    from learners.training.presets import PRESETS

    torch.manual_seed(seed)
    demo = PRESETS["demo"]
    policy = HFPolicy(model, device="cpu", seed=seed)
    cfg = dataclasses.replace(demo.learner, **setting)
    learner = make_learner(demo.algorithm, policy, cfg, temperature=demo.temperature, seed=seed)

    def load(name: str) -> list:
        with open(Path(buffers) / name, "rb") as f:
            buffer = pickle.load(f)
        return widen(buffer, samples, seed) if samples else buffer

    learner.observe(load("update_1.pkl"))
    learner.update()
    timer = {k: 0.0 for k in PARTS}
    shapes = {"rows": 0, "padded_tokens": 0, "micro_batches": 0}

    def timed(key, fn):
        def wrapper(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                timer[key] += time.perf_counter() - t0

        return wrapper

    def count(_module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is not None and torch.is_grad_enabled():
            shapes["rows"] += ids.shape[0]
            shapes["padded_tokens"] += ids.numel()
            shapes["micro_batches"] += 1

    hook = policy.model.register_forward_pre_hook(count, with_kwargs=True)
    policy.token_logprobs = timed("forward_s", policy.token_logprobs)
    policy.reference_logprobs = timed("forward_s", policy.reference_logprobs)
    learner.optimizer.step = timed("optimizer_s", learner.optimizer.step)
    backward = torch.Tensor.backward
    torch.Tensor.backward = timed("backward_s", backward)
    from learners.distributed import data_parallel

    clip = data_parallel.clip_grad_norm
    data_parallel.clip_grad_norm = timed("optimizer_s", clip)
    buffer = load("update_2.pkl")
    learner.observe(buffer)
    t0 = time.perf_counter()
    try:
        metrics = learner.update()
    finally:
        total = time.perf_counter() - t0
        torch.Tensor.backward = backward
        data_parallel.clip_grad_norm = clip
        hook.remove()
    timer["other_s"] = total - sum(timer[k] for k in PARTS if k != "other_s")
    return {
        "update_s": total,
        **timer,
        **shapes,
        **counts(buffer),
        "share_prompts_on": learner.share_prompts,
        "skipped_share": metrics.get("skipped_share"),
        "grad_norm": metrics.get("grad_norm"),
        "loss": metrics.get("loss"),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main(argv: list[str] | None = None) -> int:
    """Run every setting in its own process, in turn, ``--repeats`` times; write ``--out``."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--buffers", required=True, help="folder of update_1.pkl, update_2.pkl")
    p.add_argument("--model", default=None, help="default: the demo's model")
    p.add_argument("--samples", type=int, default=0, help="solver samples per prompt (0: as run)")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument(
        "--only-settings", default="", help="names separated by ';' (default: all)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(OUT))
    p.add_argument("--note", default="", help="what the machine was doing meanwhile")
    p.add_argument("--only", default=None, help=argparse.SUPPRESS)  # a child: one setting
    args = p.parse_args(argv)
    if args.model is None:
        from learners.policy import DEFAULT_MODEL

        args.model = DEFAULT_MODEL
    if args.only is not None:
        row = one(json.loads(args.only), args.model, args.buffers, args.samples, args.seed)
        print(json.dumps(row))
        return 0
    names = [n.strip() for n in args.only_settings.split(";") if n.strip()] or list(SETTINGS)
    unknown = [n for n in names if n not in SETTINGS]
    if unknown:
        p.error(f"unknown setting(s) {unknown}; known: {list(SETTINGS)}")
    runs: dict[str, list[dict]] = {n: [] for n in names}
    for _ in range(args.repeats):
        for name in names:
            cmd = [sys.executable, "-m", "benchmarks.perf.update_profile"]
            cmd += ["--buffers", args.buffers, "--model", args.model]
            cmd += ["--samples", str(args.samples), "--seed", str(args.seed)]
            cmd += ["--only", json.dumps(SETTINGS[name])]
            load = os.getloadavg()[0]
            done = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
            row = json.loads(done.stdout.strip().splitlines()[-1])
            runs[name].append({**row, "load_1min": load})
            print(name, json.dumps(row), flush=True)
            write(args, runs)  # after every run: a stopped benchmark keeps what it made
    return 0


def write(args: argparse.Namespace, runs: dict[str, list[dict]]) -> None:
    """Medians per setting, ratios to the first, the raw runs; to ``args.out``."""
    results = {}
    for name, rows in runs.items():
        if not rows:
            continue
        med = {
            k: statistics.median(r[k] for r in rows) for k in ("update_s", *PARTS, "peak_rss_mb")
        }
        results[name] = {"setting": SETTINGS[name], **rows[0], **med, "runs": rows}
    base = next(iter(results.values()))
    for r in results.values():
        r["update_s_vs_first"] = r["update_s"] / base["update_s"]
        r["padded_tokens_vs_first"] = r["padded_tokens"] / base["padded_tokens"]
    widened = f", widened to {args.samples} solver samples per prompt" if args.samples else ""
    out = {
        "benchmark": "update_profile",
        "workload": f"the demo's second update, replayed from {args.buffers}{widened}",
        "model": args.model,
        "repeats": args.repeats,
        "results": results,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "note": args.note},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())

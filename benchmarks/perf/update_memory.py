"""Peak memory and seconds of one learner update of the demo, per memory setting (issue 23).

Each setting runs in a fresh process (so its peak RSS, ``ru_maxrss``, is its own): load the
model, build a demo-like buffer, make the demo's learner (TRR++) with the setting's
``--learner.*`` values, and time one ``update()`` (advantages, forward/backward of every
micro-batch, AdamW step). The buffer is ``--rounds`` demo rounds of the interleaved order
(challenger, planner, two critic reviews, k = 2 probes, k = 2 solves: 8 sequences a round),
with prompts from the real role templates on seed tasks and completions of the lengths a demo
step makes (random token ids: memory and time depend on lengths, not on which tokens), every
sequence with a distinct reward, so none is skipped. Settings are taken in turn, the same
buffer (fixed seed) for each. Writes ``benchmarks/perf/results/update_memory.json``. Never asserts
a time.

Usage::

    python -m benchmarks.perf.update_memory                       # the default settings, 4 rounds
    python -m benchmarks.perf.update_memory --rounds 8 --model PATH
    python -m benchmarks.perf.update_memory --buffers DIR --out replay.json  # a demo's updates
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).parent / "results" / "update_memory.json"
SETTINGS = {
    "old demo (micro-batches of 4)": {"gradient_checkpointing": False, "micro_batch_size": 4},
    "checkpointing, micro-batches of 4": {"gradient_checkpointing": True, "micro_batch_size": 4},
    "1024-token micro-batches": {
        "gradient_checkpointing": False,
        "micro_batch_size": 16,
        "micro_batch_tokens": 1024,
    },
    "checkpointing, 2048-token micro-batches": {
        "gradient_checkpointing": True,
        "micro_batch_size": 16,
        "micro_batch_tokens": 2048,
    },
    "checkpointing, 2048-token micro-batches, per-parameter AdamW": {
        "gradient_checkpointing": True,
        "micro_batch_size": 16,
        "micro_batch_tokens": 2048,
        "adamw_foreach": False,
    },
}
"""Name -> :class:`~learners.algorithms.pg.PGConfig` fields over the demo's learner."""
REPLAY_SETTINGS = {
    "demo (1,024-token micro-batches)": {},
    "checkpointing": {"gradient_checkpointing": True},
    "512-token micro-batches": {"micro_batch_tokens": 512},
    "checkpointing, 512-token micro-batches": {
        "gradient_checkpointing": True,
        "micro_batch_tokens": 512,
    },
    "per-parameter AdamW": {"adamw_foreach": False},
    "checkpointing, per-parameter AdamW": {"gradient_checkpointing": True, "adamw_foreach": False},
    "8-bit AdamW": {"optimizer": "adamw8bit"},
    "checkpointing, 8-bit AdamW": {"gradient_checkpointing": True, "optimizer": "adamw8bit"},
}
"""With ``--buffers``: name -> fields over the demo preset's learner."""
LENGTHS = {
    "challenge": (90, 160),
    "review_question": (30, 40),
    "review_plan": (30, 40),
    "plan": (60, 96),
    "probe": (50, 112),
    "solve": (50, 112),
}
"""Completion-length range per phase (the demo preset's token budgets)."""


def rss_mb() -> float:
    """Peak resident set size of this process so far, MB (``ru_maxrss`` is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build_buffer(policy, rounds: int, seed: int) -> list:
    """``rounds`` demo rounds of transitions: real prompts, completions of demo lengths."""
    from learners.types import Transition
    from sage_env.tasks.task import load_seeds
    from sage_env.text import prompts

    rng = random.Random(seed)
    seeds = load_seeds()
    by_domain = {d: [t for t in seeds if t.domain == d] for d in ("math", "code")}
    plan = "<plan>\n1. Restate the question.\n2. Compute step by step.\n3. Check.\n</plan>"
    out = []
    vocab = policy.tokenizer.vocab_size
    for r in range(rounds):
        domain = ("math", "code")[r % 2]
        task, other = rng.sample(by_domain[domain], 2)
        turns = [
            ("challenger", "challenge", prompts.challenger(task)),
            ("planner", "plan", prompts.planner(task)),
            ("critic", "review_question", prompts.critic_question(other.prompt, other.domain)),
            ("critic", "review_plan", prompts.critic_plan(task, plan)),
            ("solver", "probe", prompts.solver(other)),
            ("solver", "probe", prompts.solver(other)),
            ("solver", "solve", prompts.solver(task, plan)),
            ("solver", "solve", prompts.solver(task, plan)),
        ]
        for role, phase, obs in turns:
            prompt_ids = policy.encode_prompt(obs, 1024)
            n = rng.randint(*LENGTHS[phase])
            ids = [rng.randrange(vocab) for _ in range(n)]
            out.append(
                Transition(
                    agent=f"{role}_0",
                    role=role,
                    domain=domain,
                    phase=phase,
                    prompt_ids=list(prompt_ids),
                    completion_ids=ids,
                    logprobs=[-2.0] * n,
                    text="",
                    reward=round(rng.uniform(0.0, 1.0), 6),
                    env_index=r,
                )
            )
    return out


def one(setting: dict, model: str, rounds: int, seed: int, buffers: str | None = None) -> dict:
    """Run one update under ``setting`` in this process; its figures.

    With ``buffers`` (a folder of ``update_N.pkl``, ``benchmarks/perf/demo_memory.py
    --dump-buffers``): the demo's own first update (untimed; it creates the optimiser state),
    then its second, timed, whose peak is measured (a 10 ms ``/proc/self/statm`` sampler).
    The weights are the model's, not the run's: memory and time depend on the sequences'
    lengths and which advantages are 0, not on the weights' values.
    """
    import dataclasses
    import pickle

    import torch

    from learners.algorithms.registry import make_learner
    from learners.policy import HFPolicy
    from learners.training.presets import PRESETS

    torch.manual_seed(seed)
    demo = PRESETS["demo"]
    policy = HFPolicy(model, device="cpu", seed=seed)
    loaded = rss_mb()
    cfg = dataclasses.replace(demo.learner, **setting)
    learner = make_learner(demo.algorithm, policy, cfg, temperature=demo.temperature, seed=seed)
    extra: dict = {}
    if buffers:
        from benchmarks.perf.demo_memory import PhaseMeter

        with open(Path(buffers) / "update_1.pkl", "rb") as f:
            learner.observe(pickle.load(f))
        t0 = time.perf_counter()
        learner.update()
        extra["first_update_s"] = time.perf_counter() - t0
        with open(Path(buffers) / "update_2.pkl", "rb") as f:
            buffer = pickle.load(f)
        meter = PhaseMeter()
        learner.observe(buffer)
        with meter.phase("update"):
            metrics = learner.update()
        meter.close()
        phase = meter.phases[0]
        seconds = phase["s"]
        extra.update(rss_before_update_mb=phase["rss_before"], update_peak_mb=phase["peak"])
        extra["update_rise_mb"] = phase["peak"] - phase["rss_before"]
    else:
        buffer = build_buffer(policy, rounds, seed)
        learner.observe(buffer)
        t0 = time.perf_counter()
        metrics = learner.update()
        seconds = time.perf_counter() - t0
    return {
        "setting": setting,
        **extra,
        "update_s": seconds,
        "peak_rss_mb": rss_mb(),
        "rss_after_load_mb": loaded,
        "sequences": len(buffer),
        "tokens": sum(len(t.prompt_ids) + len(t.completion_ids) for t in buffer),
        "completion_tokens": sum(len(t.completion_ids) for t in buffer),
        "skipped_share": metrics.get("skipped_share"),
    }


def main(argv: list[str] | None = None) -> int:
    """Run every setting in its own process, in turn; write :data:`OUT`."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="default: the demo's model")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(OUT))
    p.add_argument("--note", default="", help="what the machine was doing meanwhile")
    p.add_argument(
        "--buffers",
        default=None,
        help="replay a demo's own updates (benchmarks/perf/demo_memory.py --dump-buffers DIR) "
        "under REPLAY_SETTINGS instead of a built buffer",
    )
    p.add_argument("--only", default=None, help=argparse.SUPPRESS)  # a child: one setting
    args = p.parse_args(argv)
    if args.model is None:
        from learners.policy import DEFAULT_MODEL

        args.model = DEFAULT_MODEL
    if args.only is not None:
        setting = json.loads(args.only)
        print(json.dumps(one(setting, args.model, args.rounds, args.seed, args.buffers)))
        return 0
    results: dict[str, dict] = {}
    for name, setting in (REPLAY_SETTINGS if args.buffers else SETTINGS).items():
        cmd = [sys.executable, "-m", "benchmarks.perf.update_memory", "--model", args.model]
        cmd += ["--rounds", str(args.rounds)]
        cmd += ["--seed", str(args.seed), "--only", json.dumps(setting)]
        cmd += ["--buffers", args.buffers] if args.buffers else []
        load = os.getloadavg()[0]
        done = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
        results[name] = {**json.loads(done.stdout.strip().splitlines()[-1]), "load_1min": load}
        print(name, json.dumps(results[name]), flush=True)
        write(args, results)  # after every setting: a run stopped early keeps what it made
    return 0


def write(args: argparse.Namespace, results: dict[str, dict]) -> None:
    """Write :data:`OUT` (``args.out``) with ratios to the first setting."""
    base = next(iter(results.values()))
    for r in results.values():
        r["update_s_vs_first"] = r["update_s"] / base["update_s"]
        r["peak_rss_vs_first"] = r["peak_rss_mb"] / base["peak_rss_mb"]
    workload = f"one TRR++ update of {args.rounds} demo rounds (8 sequences a round)"
    if args.buffers:
        workload = f"the demo's second update, replayed from {args.buffers} after its first"
    out = {
        "benchmark": "update_memory",
        "workload": workload,
        "model": args.model,
        "seed": args.seed,
        "results": results,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "note": args.note},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())

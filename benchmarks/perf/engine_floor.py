"""One decoding step per engine and row count, against this CPU's ceilings (issue 48 item 1).

For 1, 4, 16 and 64 rows, the time of one decoding step of the default model for:

- ``ct2-int8`` and ``ct2-float32``: a CTranslate2 generator converted by the ``ct2`` engine
  (the step is the interval between two callbacks of the batch's first row);
- ``torch-bf16-bare``, ``torch-bf16-packed-bare`` and ``torch-float32-bare``: one forward
  of the model (loaded in bfloat16; the ``torch-bf16`` engine's copy, whose linear layers
  hold oneDNN-packed weights; the trainer's float32 model) into a transformers
  ``StaticCache`` filled to the context length without a prefill, then an argmax: what a
  torch loop on this route costs without sampling and stop checks;
- ``torch-bf16-lean-bare``: the engine's copy stepped by its ``LeanStep`` (fewer torch calls,
  its own attention for one query token) on the same cache, then an argmax;
- ``torch-bf16``: the engine itself (``engine.generate`` with ``min_new_tokens`` forcing the
  length; the step is the interval between two one-token forwards, sampling, stop checks and
  bookkeeping included).

Engines and row counts are interleaved (the order of the arms rotates per row count and
repeat), each figure is the median of its steps within a run and then of ``--repeats`` runs.
Both wall and CPU seconds (``time.process_time``) are recorded: on a shared machine a
low-priority process waits for the CPU between steps, and its CPU seconds are the more
stable figure (with ``--threads 1`` they are the step's own work).

The ceilings, measured here at the same thread count: a bfloat16 and a float32 matrix
product's GFLOP/s (1024^3) and the bandwidth of a read larger than the caches (a sum over
256 MB). A step's floor is the larger of reading its bytes (weights plus KV cache) at that
bandwidth and its FLOPs (2 per matrix parameter per row, plus attention) at that rate.

With ``--replay`` it also replays the demo's recorded ``generate`` calls
(``benchmarks/perf/results/ct2_demo_calls.json``, :mod:`benchmarks.perf.ct2_replay`) on ``ct2`` int8 (today's
default), ``torch-bf16`` and ``hf`` (float32), interleaved per call, ``--replay-repeats``
passes: generation tokens/s per engine and the engine/learner log-prob gap of the first pass.
Writes ``benchmarks/perf/results/engine_floor.json``. Never asserts a time.

Usage::

    python -m benchmarks.perf.engine_floor --threads 1 --replay          # ~20 min on 2 idle cores
    python -m benchmarks.perf.engine_floor --rows 1,4 --repeats 1        # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

OUT = Path(__file__).parent / "results" / "engine_floor.json"
ARMS = (
    "ct2-int8",
    "ct2-float32",
    "torch-bf16-bare",
    "torch-bf16-packed-bare",
    "torch-bf16-lean-bare",
    "torch-float32-bare",
    "torch-bf16",
)
"""The step arms, in the order of the first row count."""
REPLAY_ARMS = {
    "ct2-int8": {"engine": "ct2", "ct2_compute_type": "int8"},
    "torch-bf16": {"engine": "torch-bf16"},
    "hf": {"engine": "hf"},
}
"""``--replay`` arms (``benchmarks.perf.ct2_replay`` arm fields); the first is the ratios' base."""


def clocks() -> tuple[float, float]:
    """``(wall, cpu)`` seconds now."""
    return time.perf_counter(), time.process_time()


def intervals(stamps: list[tuple[float, float]]) -> tuple[float, float]:
    """Median ``(wall, cpu)`` seconds between consecutive stamps, the first interval dropped
    (it holds the first step's one-off costs)."""
    gaps = [(b[0] - a[0], b[1] - a[1]) for a, b in zip(stamps, stamps[1:])][1:] or [(0.0, 0.0)]
    return statistics.median(g[0] for g in gaps), statistics.median(g[1] for g in gaps)


def ceilings(threads: int) -> dict:
    """GFLOP/s of a bfloat16 and a float32 1024^3 product, and GB/s of a 256 MB read."""
    import torch

    out = {"threads": threads}
    n = 1024
    for dtype in (torch.bfloat16, torch.float32):
        a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
        a @ b
        cpu = []
        for _ in range(5):
            c0 = time.process_time()
            a @ b
            cpu.append(time.process_time() - c0)
        out[f"gemm_{str(dtype).split('.')[-1]}_gflops"] = 2 * n**3 / statistics.median(cpu) / 1e9
    x = torch.ones(64 * 2**20)  # 256 MB of float32
    x.sum()
    cpu = []
    for _ in range(5):
        c0 = time.process_time()
        x.sum()
        cpu.append(time.process_time() - c0)
    out["read_gb_per_s"] = x.numel() * 4 / statistics.median(cpu) / 1e9
    return out


def bare_step(model, rows: int, context: int, steps: int, lean=None) -> tuple[float, float]:
    """Median ``(wall, cpu)`` seconds of one one-token forward of ``model`` plus an argmax,
    with ``rows`` rows and a static KV cache already holding ``context`` positions (``lean``:
    the engine's ``LeanStep`` of ``model`` instead of its ``forward``)."""
    import torch
    from transformers import StaticCache

    config = model.config
    length = context + steps + 1
    cache = StaticCache(config=config, max_cache_len=length)
    heads = config.num_key_value_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    dtype = next(model.parameters()).dtype
    cache.early_initialization(rows, heads, head_dim, dtype, torch.device("cpu"))
    for layer in cache.layers:  # as if a prompt of `context` tokens had been forwarded
        layer.keys.normal_(0, 1)
        layer.values.normal_(0, 1)
        layer.cumulative_length.fill_(context)
    mask = torch.ones((rows, length), dtype=torch.long)
    top = min(1000, config.vocab_size - 8)
    tok = torch.randint(top // 3, top, (rows, 1))
    stamps = []
    with torch.no_grad():
        for t in range(steps):
            stamps.append(clocks())
            positions = torch.full((rows, 1), context + t)
            if lean is not None:
                logits = lean(tok, mask, positions, cache)
            else:
                out = model(
                    input_ids=tok,
                    attention_mask=mask,
                    position_ids=positions,
                    cache=cache,
                    use_cache=True,
                )
                logits = out.logits[:, -1]
            tok = logits.argmax(-1, keepdim=True)
        stamps.append(clocks())
    return intervals(stamps)


def ct2_step(generator, tokens: list[str], rows: int, steps: int) -> tuple[float, float]:
    """Median ``(wall, cpu)`` seconds of one CTranslate2 decoding step (``rows`` copies of
    the prompt ``tokens``, ``steps`` tokens forced)."""
    stamps = []

    def callback(result) -> bool:
        if result.batch_id == 0:
            stamps.append(clocks())
        return False

    generator.generate_batch(
        [tokens] * rows,
        max_length=steps,
        min_length=steps,
        include_prompt_in_result=False,
        sampling_topk=1,
        callback=callback,
    )
    return intervals(stamps)


def engine_step(engine, prompt: list[int], rows: int, steps: int) -> tuple[float, float]:
    """Median ``(wall, cpu)`` seconds between two one-token forwards of the ``torch-bf16``
    engine (sampling at T = 0.7, stop checks and bookkeeping included)."""
    from learners.policy import SamplingConfig

    stamps = []
    real = engine.step

    def timed(*args, **kwargs):
        stamps.append(clocks())
        return real(*args, **kwargs)

    engine.step = timed
    try:
        sampling = SamplingConfig(temperature=0.7, min_new_tokens=steps, batch_size=rows)
        engine.generate([list(prompt)] * rows, sampling, [steps] * rows, [()] * rows)
    finally:
        del engine.step
    return intervals(stamps)


def floor(args) -> dict:
    """The step table: every arm at every row count, ``args.repeats`` interleaved runs."""
    import torch

    from learners.engines import RolloutConfig, make_engine
    from learners.policy import HFPolicy

    policy = HFPolicy(args.model, device="cpu", seed=0, rollout="torch-bf16")
    engine = policy.engine
    engine.sync_weights()
    packed, f32 = engine.model, policy.model
    from transformers import AutoModelForCausalLM

    bf16 = AutoModelForCausalLM.from_pretrained(policy.path, dtype=torch.bfloat16).eval()
    f32.eval()
    tok = policy.tokenizer
    top = min(1000, f32.config.vocab_size - 8)  # ordinary tokens of the vocabulary
    seed = torch.Generator().manual_seed(0)
    prompt = torch.randint(top // 3, top, (args.prompt,), generator=seed).tolist()
    ct2 = {}
    if "ct2" in args.arms:
        for kind in ("int8", "float32"):
            ct2_engine = make_engine(policy, RolloutConfig("ct2", ct2_compute_type=kind))
            ct2[kind] = ct2_engine._generator(0.7, True)[0]  # converted, seeded
    arms = [a for a in ARMS if a.split("-")[0] in args.arms or a in args.arms]
    runs: dict[str, dict[int, list[tuple[float, float]]]] = {a: {} for a in arms}

    def measure(arm: str, rows: int) -> tuple[float, float]:
        if arm.startswith("ct2-"):
            tokens = tok.convert_ids_to_tokens(prompt)
            return ct2_step(ct2[arm.split("-")[1]], tokens, rows, args.steps)
        if arm == "torch-bf16-bare":
            return bare_step(bf16, rows, args.prompt, args.steps)
        if arm == "torch-bf16-packed-bare":
            return bare_step(packed, rows, args.prompt, args.steps)
        if arm == "torch-bf16-lean-bare":
            return bare_step(packed, rows, args.prompt, args.steps, engine._lean)
        if arm == "torch-float32-bare":
            return bare_step(f32, rows, args.prompt, args.steps)
        return engine_step(engine, prompt, rows, args.steps)

    turn = 0
    for rep in range(args.repeats):
        for rows in args.rows:
            order = arms[turn % len(arms) :] + arms[: turn % len(arms)]
            turn += 1
            for arm in order:
                wall, cpu = measure(arm, rows)
                runs[arm].setdefault(rows, []).append((wall, cpu))
                print(
                    f"repeat {rep} rows {rows} {arm}: {wall * 1e3:.1f} ms wall, "
                    f"{cpu * 1e3:.1f} ms CPU",
                    flush=True,
                )
    long_context = {}
    if args.long_context:  # the bare forwards again with a demo-length context
        for rows in args.rows:
            for name, model, lean in (
                ("torch-bf16-bare", bf16, None),
                ("torch-bf16-packed-bare", packed, None),
                ("torch-bf16-lean-bare", packed, engine._lean),
                ("torch-float32-bare", f32, None),
            ):
                got = [
                    bare_step(model, rows, args.long_context, args.steps, lean)
                    for _ in range(args.repeats)
                ]
                long_context.setdefault(name, {})[rows] = {
                    "wall_ms": round(statistics.median(g[0] for g in got) * 1e3, 2),
                    "cpu_ms": round(statistics.median(g[1] for g in got) * 1e3, 2),
                }
    config = f32.config
    params = sum(p.numel() for p in f32.parameters())  # tied head counted once
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    kv_per_position = 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim
    table = {}
    for arm in arms:
        table[arm] = {}
        for rows, got in runs[arm].items():
            wall = statistics.median(g[0] for g in got)
            cpu = statistics.median(g[1] for g in got)
            table[arm][rows] = {
                "wall_ms": round(wall * 1e3, 2),
                "cpu_ms": round(cpu * 1e3, 2),
                "tokens_per_cpu_s": round(rows / cpu, 1) if cpu else None,
                "repeats_cpu_ms": [round(g[1] * 1e3, 2) for g in got],
            }
    return {
        "table": table,
        "long_context": {"context": args.long_context, "table": long_context},
        "model": {
            "parameters": params,
            "layers": config.num_hidden_layers,
            "kv_values_per_position": kv_per_position,
            "attention_width": config.num_attention_heads * head_dim,
        },
        "prompt_tokens": args.prompt,
        "steps_per_run": args.steps,
    }


def with_ceilings(result: dict, ceil: dict) -> None:
    """Add each row count's floor (ms) per weight type, and each arm's share of its floor."""
    model = result["model"]
    params, layers = model["parameters"], model["layers"]
    context = result["prompt_tokens"] + result["steps_per_run"] // 2
    bytes_per = {"bf16": 2, "float32": 4, "int8": 1}
    gemm = {"bf16": ceil["gemm_bfloat16_gflops"], "float32": ceil["gemm_float32_gflops"]}
    gemm["int8"] = gemm["bf16"]  # no int8 product was measured; bf16's stands in
    floors = {}
    for kind, width in bytes_per.items():
        floors[kind] = {}
        for rows in result["rows"]:
            kv_width = 2 if kind != "float32" else 4
            read = params * width + rows * context * model["kv_values_per_position"] * kv_width
            flops = rows * (2 * params + 4 * layers * context * model["attention_width"])
            read_ms = read / (ceil["read_gb_per_s"] * 1e9) * 1e3
            compute_ms = flops / (gemm[kind] * 1e9) * 1e3
            floors[kind][rows] = {
                "read_ms": round(read_ms, 2),
                "compute_ms": round(compute_ms, 2),
                "floor_ms": round(max(read_ms, compute_ms), 2),
            }
    result["floors"] = floors
    kind_of = {
        "ct2-int8": "int8",
        "ct2-float32": "float32",
        "torch-bf16-bare": "bf16",
        "torch-bf16-packed-bare": "bf16",
        "torch-bf16-lean-bare": "bf16",
        "torch-float32-bare": "float32",
        "torch-bf16": "bf16",
    }
    for arm, rows_table in result["table"].items():
        for rows, cell in rows_table.items():
            f = floors[kind_of[arm]][rows]["floor_ms"]
            cell["x_floor"] = round(cell["cpu_ms"] / f, 2) if f else None


def cpu_flags() -> list[str]:
    """This CPU's AMX and AVX512-BF16 flags (``/proc/cpuinfo``; empty elsewhere)."""
    info = Path("/proc/cpuinfo")
    if not info.exists():
        return []
    return sorted({f for f in info.read_text().split() if f.startswith(("amx", "avx512_bf"))})


def machine_record(script: str, argv: list[str] | None, note: str) -> dict:
    """Where and how a step timing ran, for its JSON: torch's version and threads, the CPU
    (kind, AMX / AVX512-BF16 flags, count), the load average and nice level at the end, the
    ``note``, the date and the command (``python -m benchmarks.perf.<script> ...``)."""
    import torch

    return {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "machine": platform.processor() or platform.machine(),
        "cpu_flags": cpu_flags(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "nice": os.nice(0),
        "note": note,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": f"python -m benchmarks.perf.{script} " + " ".join(argv or sys.argv[1:]),
    }


def main(argv: list[str] | None = None) -> int:
    """Measure, print and write :data:`OUT`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--rows", default="1,4,16,64")
    parser.add_argument("--prompt", type=int, default=16, help="prompt tokens (the context)")
    parser.add_argument("--steps", type=int, default=12, help="decoding steps a run times")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch and ct2 threads (0: torch's)")
    parser.add_argument("--arms", default="ct2,torch", help="ct2 and/or torch (or arm names)")
    parser.add_argument(
        "--long-context",
        type=int,
        default=0,
        help="also time the bare forwards with this many cached positions",
    )
    parser.add_argument("--replay", action="store_true", help="replay the demo's recorded calls")
    parser.add_argument("--replay-repeats", type=int, default=3)
    parser.add_argument("--replay-calls", type=int, default=None, help="only the first N calls")
    parser.add_argument(
        "--gap-calls",
        type=int,
        default=2,
        help="calls of the first pass whose log-prob gap is measured",
    )
    parser.add_argument("--no-floor", action="store_true", help="skip the step table")
    parser.add_argument("--note", default="", help="what the machine was doing, for the record")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    args.rows = [int(r) for r in args.rows.split(",")]
    args.arms = args.arms.split(",")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    result: dict = {"rows": args.rows}
    if not args.no_floor:
        result.update(floor(args))
        ceil = ceilings(threads)
        result["ceilings"] = {k: round(v, 2) for k, v in ceil.items()}
        with_ceilings(result, ceil)
    if args.replay:
        from benchmarks.perf.ct2_replay import replay

        result["replay"] = replay(
            args.model,
            REPLAY_ARMS,
            greedy_calls=1,
            repeats=args.replay_repeats,
            calls_limit=args.replay_calls,
            gap_calls=args.gap_calls,
        )
    import ctranslate2
    import transformers

    result.update(
        machine_record("engine_floor", argv, args.note),
        transformers=transformers.__version__,
        ctranslate2=ctranslate2.__version__,
    )
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for arm, rows_table in result.get("table", {}).items():
        print(arm, {r: c["cpu_ms"] for r, c in rows_table.items()})
    if "replay" in result:
        print(json.dumps(result["replay"]["arms"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

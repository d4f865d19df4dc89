"""GPU check of the ``hf`` rollout engine: where a decoding step's time goes, old path vs new.

On one model (a randomly initialised Qwen2.5 shape from :mod:`benchmarks.perf.gpu_check`, no
EOS, so every row makes its whole budget), after one warm-up call, in one process:

- ``engine_old``: :class:`~learners.engines.HFEngine` as it was before 2026-12-04 (every step's
  logits stacked into ``[B, T, V]`` float32, moved to the host and reduced there; the row-by-row
  ``RowLimits``), via the references :func:`old_sampled_logprobs` and :class:`OldRowLimits`
  patched into :mod:`learners.engines.hf_engine`;
- ``engine_new``: the engine as it is (log-probs reduced on the device per step, one batched
  stop check per step), from the same seed: ``same_tokens`` and ``max_logprob_diff`` compare
  the two;
- ``bare_generate``: ``model.generate`` with the engine's arguments but no stopping criterion
  and no ``output_logits`` (what transformers costs on its own);
- ``generate_logits``: the same with ``output_logits=True``, then both log-prob reductions
  timed on its logits (``post_old_s``, ``post_new_s``);
- ``stops_old`` / ``stops_new``: both engines with stop strings on every row (two distinct
  sets) that never match, so each step runs every row's check;
- ``step``: one decoding forward at a time (host time to queue it, wall time, CUDA-event time);
- ``profile``: torch.profiler's top host-side operators over a short bare ``generate``.

Each engine figure splits ``seconds`` into ``generate_s`` (inside ``model.generate``, the
stopping criterion included) and ``after_generate_s`` (log-probs, decoding). The JSON is
rewritten after every part; ``--budget-s`` skips the parts left once that much time has passed.

    python -m benchmarks.perf.hf_engine_gpu          # CUDA, 7B shape: results/hf_engine_gpu.json
    python -m benchmarks.perf.hf_engine_gpu --shape tiny --device cpu --dtype float32 --batch 4 \\
        --prompt 8 --tokens 6 --stop-tokens 4 --out /tmp/h.json     # CPU smoke run
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.perf.gpu_check import RESULTS, BenchHost, _sync, _versions, build


class OldRowLimits:
    """``learners.engines.stops.RowLimits`` before 2026-12-04: each row's stop check on its
    own (a host sync per row with stop strings), a fresh ``done`` tensor every step."""

    def __init__(self, width, budgets, criteria, stops, tokenizer) -> None:
        self.width, self.budgets, self.criteria = width, budgets, criteria
        self.stops, self.tokenizer = stops, tokenizer
        self.stopped_at: list[int | None] = [None] * len(budgets)
        self.by_string = [False] * len(budgets)

    def __call__(self, input_ids: torch.Tensor, scores: Any, **kwargs: Any) -> torch.Tensor:
        n = input_ids.shape[1] - self.width
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        for row, budget in enumerate(self.budgets):
            if self.stopped_at[row] is not None:
                done[row] = True
                continue
            crit = self.criteria[row]
            hit = crit is not None and bool(crit(input_ids[row : row + 1], scores)[0])
            if hit:
                text = self.tokenizer.decode(input_ids[row, self.width :], skip_special_tokens=True)
                hit = any(stop in text for stop in self.stops[row])
            if hit or n >= budget:
                self.stopped_at[row], self.by_string[row], done[row] = n, hit, True
        return done


def old_sampled_logprobs(logits, tokens, temperature):
    """The ``hf`` log-probs before 2026-12-04: ``[B, T, V]`` float32 on the host, reduced there."""
    stacked = torch.stack(logits, dim=1).float().cpu() / temperature
    return torch.log_softmax(stacked, dim=-1).gather(-1, tokens.cpu().unsqueeze(-1)).squeeze(-1)


def main(argv: list[str] | None = None) -> dict:
    from transformers import AutoTokenizer

    from learners.engines import hf_engine
    from learners.policy.tiny import build_tiny_model
    from learners.types import SamplingConfig

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shape", default="qwen2.5-7b", help="benchmarks.perf.gpu_check SHAPES name")
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--batch", type=int, default=64, help="rows")
    p.add_argument("--prompt", type=int, default=256, help="prompt tokens per row")
    p.add_argument("--tokens", type=int, default=128, help="new tokens per row")
    p.add_argument("--stop-tokens", type=int, default=64, help="new tokens in the stops runs")
    p.add_argument("--budget-s", type=float, default=170.0, help="skip parts after this")
    p.add_argument("--out", default=str(RESULTS / "hf_engine_gpu.json"))
    args = p.parse_args(argv)

    t_start = time.perf_counter()
    device, dtype = args.device, getattr(torch, args.dtype)
    cuda = device.startswith("cuda")
    result: dict = {
        "device": torch.cuda.get_device_name() if cuda else platform.processor() or "cpu",
        "versions": _versions(),
        "settings": vars(args),
        "parts": {},
        "complete": False,
    }
    parts = result["parts"]

    def save() -> None:
        result["elapsed_s"] = round(time.perf_counter() - t_start, 1)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")

    def left() -> bool:
        return time.perf_counter() - t_start < args.budget_s

    def record(name: str, entry: dict) -> None:
        entry["at_s"] = round(time.perf_counter() - t_start, 1)
        parts[name] = entry
        print(name, json.dumps(entry), flush=True)
        save()

    t0 = time.perf_counter()
    model = build(args.shape, device, dtype).eval()
    model.config.use_cache = True
    _sync(device)
    result["build_s"] = round(time.perf_counter() - t0, 1)
    result["attn_implementation"] = getattr(model.config, "_attn_implementation", None)
    result["params"] = sum(q.numel() for q in model.parameters())

    tmp = tempfile.mkdtemp()
    build_tiny_model(tmp)  # byte-level tokenizer; the model is the shape built above
    host = BenchHost(model, AutoTokenizer.from_pretrained(tmp), tmp, torch.device(device), dtype)
    engine = hf_engine.HFEngine(host)
    g = torch.Generator().manual_seed(0)
    prompts = torch.randint(3, model.config.vocab_size, (args.batch, args.prompt), generator=g)
    prompts = prompts.tolist()

    calls: list[tuple[float, dict]] = []
    generate = model.generate

    def timed_generate(**kw):  # the engine's generate call, timed, its arguments kept
        _sync(device)
        t = time.perf_counter()
        out = generate(**kw)
        _sync(device)
        calls.append((time.perf_counter() - t, kw))
        return out

    model.generate = timed_generate

    def peak_reset() -> None:
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()

    def peak() -> float | None:
        return round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None

    def engine_run(old: bool, tokens: int, stops: list[tuple[str, ...]] | None = None):
        saved = hf_engine.RowLimits, hf_engine.sampled_logprobs
        if old:
            hf_engine.RowLimits, hf_engine.sampled_logprobs = OldRowLimits, old_sampled_logprobs
        sampling = SamplingConfig(
            max_new_tokens=tokens, batch_size=args.batch, min_new_tokens=tokens
        )
        host.generator.manual_seed(0)
        calls.clear()
        peak_reset()
        _sync(device)
        t = time.perf_counter()
        try:
            comps = engine.generate(
                prompts, sampling, [tokens] * args.batch, stops or [()] * args.batch
            )
            _sync(device)
        finally:
            hf_engine.RowLimits, hf_engine.sampled_logprobs = saved
        seconds = time.perf_counter() - t
        made = sum(len(c.completion_ids) for c in comps)
        gen_s = sum(c[0] for c in calls)
        return comps, {
            "tokens": made,
            "seconds": round(seconds, 3),
            "tokens_per_s": round(made / seconds, 1),
            "ms_per_step": round(1000 * seconds / tokens, 2),
            "generate_s": round(gen_s, 3),
            "after_generate_s": round(seconds - gen_s, 3),
            "peak_gib": peak(),
        }

    _, warm = engine_run(old=False, tokens=8)
    record("warmup", warm)

    comps_old = comps_new = None
    if left():
        comps_old, entry = engine_run(old=True, tokens=args.tokens)
        record("engine_old", entry)
    if left():
        comps_new, entry = engine_run(old=False, tokens=args.tokens)
        if comps_old is not None:
            entry["same_tokens"] = all(
                a.completion_ids == b.completion_ids for a, b in zip(comps_old, comps_new)
            )
            entry["max_logprob_diff"] = max(
                max((abs(x - y) for x, y in zip(a.logprobs, b.logprobs)), default=0.0)
                for a, b in zip(comps_old, comps_new)
            )
        gen_kwargs = dict(calls[-1][1])
        record("engine_new", entry)
    else:
        gen_kwargs = None

    def bare(logits: bool):
        """The engine's last ``generate`` call without its stopping criterion, timed."""
        kw = {k: v for k, v in gen_kwargs.items() if k != "stopping_criteria"}
        kw.update(return_dict_in_generate=logits, output_logits=logits)
        peak_reset()
        _sync(device)
        t = time.perf_counter()
        with torch.no_grad():
            out = generate(**kw)
        _sync(device)
        return out, time.perf_counter() - t, kw["input_ids"].shape[1]

    if gen_kwargs is not None and left():
        out, seconds, width = bare(logits=False)
        new_tokens = out.shape[1] - width
        del out
        record(
            "bare_generate",
            {
                "new_tokens": new_tokens,
                "seconds": round(seconds, 3),
                "tokens_per_s": round(args.batch * new_tokens / seconds, 1),
                "ms_per_step": round(1000 * seconds / new_tokens, 2),
                "peak_gib": peak(),
            },
        )

    if gen_kwargs is not None and left():
        out, seconds, width = bare(logits=True)
        tokens = out.sequences[:, width:]
        new_tokens = tokens.shape[1]
        t = time.perf_counter()
        lp_old = old_sampled_logprobs(out.logits, tokens, 1.0)
        post_old = time.perf_counter() - t
        t = time.perf_counter()
        lp_new = hf_engine.sampled_logprobs(out.logits, tokens, 1.0).cpu()
        post_new = time.perf_counter() - t
        diff = float((lp_old - lp_new).abs().max())
        del out, lp_old, lp_new
        record(
            "generate_logits",
            {
                "new_tokens": new_tokens,
                "seconds": round(seconds, 3),
                "tokens_per_s": round(args.batch * new_tokens / seconds, 1),
                "ms_per_step": round(1000 * seconds / new_tokens, 2),
                "post_old_s": round(post_old, 3),
                "post_new_s": round(post_new, 3),
                "post_max_abs_diff": diff,
                "peak_gib": peak(),
            },
        )

    half = [("</answer>",), ("</plan>", "\n\n\n")]
    stops = [half[row % 2] for row in range(args.batch)]
    for name, old in (("stops_old", True), ("stops_new", False)):
        if left():
            _, entry = engine_run(old=old, tokens=args.stop_tokens, stops=stops)
            record(name, entry)

    if left():
        ids = torch.tensor(prompts, device=device)
        rows = []
        with torch.no_grad():
            out = model(input_ids=ids, use_cache=True)
            cache, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
            del out
            for _ in range(12):
                _sync(device)
                t = time.perf_counter()
                if cuda:
                    ev0, ev1 = (
                        torch.cuda.Event(enable_timing=True),
                        torch.cuda.Event(enable_timing=True),
                    )
                    ev0.record()
                out = model(input_ids=nxt, past_key_values=cache, use_cache=True)
                queued = time.perf_counter() - t
                if cuda:
                    ev1.record()
                _sync(device)
                wall = time.perf_counter() - t
                gpu = ev0.elapsed_time(ev1) if cuda else None
                nxt = out.logits[:, -1:].argmax(-1)
                del out
                rows.append((queued * 1000, wall * 1000, gpu))
        rows = rows[2:]  # first steps warm the cache's growth path
        record(
            "step",
            {
                "forward_queue_ms": round(sum(r[0] for r in rows) / len(rows), 2),
                "forward_wall_ms": round(sum(r[1] for r in rows) / len(rows), 2),
                "forward_gpu_ms": round(sum(r[2] for r in rows) / len(rows), 2) if cuda else None,
                "steps": len(rows),
            },
        )
        del cache

    if gen_kwargs is not None and left():
        from torch.profiler import ProfilerActivity, profile

        kw = {k: v for k, v in gen_kwargs.items() if k != "stopping_criteria"}
        kw.update(return_dict_in_generate=False, output_logits=False, max_new_tokens=6)
        kw.update(min_new_tokens=6)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        t = time.perf_counter()
        with torch.no_grad(), profile(activities=activities) as prof:
            generate(**kw)
            _sync(device)
        wall = time.perf_counter() - t
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25)
        print(table, flush=True)
        top = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
        record(
            "profile",
            {
                "new_tokens": 6,
                "wall_ms": round(1000 * wall, 1),
                "top_self_cpu_ms": {
                    e.key: round(e.self_cpu_time_total / 1000, 2) for e in top[:12]
                },
                "cpu_ms_total": round(sum(e.self_cpu_time_total for e in top) / 1000, 1),
            },
        )

    result["complete"] = True
    save()
    print("->", args.out, flush=True)
    return result


if __name__ == "__main__":
    main()

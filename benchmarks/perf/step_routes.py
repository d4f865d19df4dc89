"""What the routes past ``torch-bf16``'s lean step could buy: a compiled step, int8 products.

Issue 48 asks for 3x int8 ``ct2``'s rollout tokens/s. ``engine_floor.py`` put the
``torch-bf16`` engine at 0.8x, its step at 3.3x its bfloat16 read floor at 1-4 rows, and named
the untried route: a compiled step. This script times one decoding step of the default model
at a few rows (the demo's calls are 5-8 rows) for:

- ``ct2-int8``: today's default engine's step (:func:`benchmarks.perf.engine_floor.ct2_step`);
- ``torch-bf16-lean``: the ``torch-bf16`` engine's ``LeanStep`` on its oneDNN-packed copy
  (:func:`benchmarks.perf.engine_floor.bare_step`);
- ``torch-bf16-compiled``: the same products in a step of fixed shapes (:class:`CompiledStep`:
  attention over the whole static cache under an additive mask, so nothing changes shape from
  one token to the next), compiled by ``torch.compile`` (inductor, C++ wrapper). The packed
  weights stay outside the graph behind an opaque custom op (inductor lowers oneDNN's packed
  linear only for weights frozen into the graph, and a frozen graph would be compiled again
  after every weight sync). Its first call's seconds are the compile's, per row count;
- ``bf16-products`` and ``int8-products``: the step's matrix products alone (7 a layer and
  the output head, no attention, norms or rotary), with the packed bfloat16 weights and with
  int8 weight-only products (``aten._weight_int8pack_mm``, one scale per output channel): the
  least a torch step on either kind of weight can cost on this CPU.

Arms are interleaved per row count and repeat; each figure is the median of a run's steps
(the first dropped), then of ``--repeats`` runs, in CPU milliseconds of the process
(``--threads 1``: the step's own work) and wall milliseconds. Writes
``benchmarks/perf/results/step_routes.json``. Never asserts a time.

Usage::

    python -m benchmarks.perf.step_routes --threads 1          # ~10 min on 2 idle cores
    python -m benchmarks.perf.step_routes --arms lean,products --rows 1 --repeats 1
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch

from benchmarks.perf.engine_floor import clocks, intervals, machine_record

OUT = Path(__file__).parent / "results" / "step_routes.json"
ARMS = ("ct2-int8", "torch-bf16-lean", "torch-bf16-compiled", "bf16-products", "int8-products")
"""Every arm, in the order of the first row count."""

_PACKED: list = []
"""The :class:`~learners.engines.torch_bf16_engine.PackedLinear` layers a compiled step calls,
by slot (the custom op takes the slot, not the packed tensor: an opaque oneDNN tensor)."""


@torch.library.custom_op("sage_perf::packed_linear", mutates_args=())
def packed_linear(x: torch.Tensor, slot: int) -> torch.Tensor:
    """``x @ W.T + b`` of the packed layer in ``slot`` (oneDNN, bfloat16)."""
    layer = _PACKED[slot]
    return torch.ops.mkldnn._linear_pointwise(x, layer.packed, layer.bias, "none", [], "")


@packed_linear.register_fake
def _packed_linear_shape(x: torch.Tensor, slot: int) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], _PACKED[slot].out_features))


class CompiledStep:
    """A one-token step of a Llama-family model whose shapes never change: compilable.

    The products are the packed copy's (:func:`packed_linear`); the norms, rotary embedding
    and attention are :class:`~learners.engines.torch_bf16_engine.LeanStep`'s, except that
    attention reads the whole cache (``[B, K, L, D]``) under an additive ``bias``
    (``[B, 1, 1, L]``: 0 where a row attends, -inf elsewhere) and the keys and values are
    written at a ``slot`` tensor, so one compiled graph serves every token of a call.

    Args:
        model: The ``torch-bf16`` engine's packed bfloat16 copy (a Llama-family model).
        compile: ``torch.compile`` the step (inductor, C++ wrapper); ``False`` runs it eagerly.
    """

    def __init__(self, model: torch.nn.Module, compile: bool = True) -> None:
        from learners.engines.torch_bf16_engine import LeanStep, PackedLinear

        self.model, self.inner = model, model.model
        self.rope = LeanStep(model).rope
        config = model.config
        self.head_dim = getattr(config, "head_dim", None) or (
            config.hidden_size // config.num_attention_heads
        )
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        for module in model.modules():
            if isinstance(module, PackedLinear):
                module.slot = len(_PACKED)
                module.out_features = module.packed.shape[0]
                _PACKED.append(module)
        self.fn = self._step
        if compile:
            import torch._inductor.config as inductor

            inductor.cpp_wrapper = True
            self.fn = torch.compile(self._step, dynamic=False, fullgraph=True)

    @staticmethod
    def _norm(norm: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        y = torch.rms_norm(x.float(), (x.shape[-1],), None, norm.variance_epsilon)
        return norm.weight * y.to(x.dtype)

    def _step(self, ids, positions, slot, bias, keys, values):
        inner, rows, dim = self.inner, ids.shape[0], self.head_dim
        h = inner.embed_tokens(ids)
        cos, sin = inner.rotary_emb(h, positions)
        for layer, k_cache, v_cache in zip(inner.layers, keys, values):
            attn = layer.self_attn
            x = self._norm(layer.input_layernorm, h)
            q = packed_linear(x, attn.q_proj.slot).view(rows, 1, -1, dim).transpose(1, 2)
            k = packed_linear(x, attn.k_proj.slot).view(rows, 1, -1, dim).transpose(1, 2)
            v = packed_linear(x, attn.v_proj.slot).view(rows, 1, -1, dim).transpose(1, 2)
            q, k = self.rope(q, k, cos, sin)
            k_cache.index_copy_(2, slot, k)
            v_cache.index_copy_(2, slot, v)
            q = q.reshape(rows, self.kv_heads, self.heads // self.kv_heads, dim)
            w = torch.matmul(q, k_cache.transpose(-1, -2)).float() * attn.scaling + bias
            w = torch.softmax(w, dim=-1).to(v_cache.dtype)
            out = torch.matmul(w, v_cache).reshape(rows, 1, self.heads * dim)
            h = h + packed_linear(out, attn.o_proj.slot)
            x = self._norm(layer.post_attention_layernorm, h)
            mlp = layer.mlp
            gate = torch.nn.functional.silu(packed_linear(x, mlp.gate_proj.slot))
            h = h + packed_linear(gate * packed_linear(x, mlp.up_proj.slot), mlp.down_proj.slot)
        head = self.model.lm_head
        return packed_linear(self._norm(inner.norm, h), head.slot)[:, -1]

    def cache(self, rows: int, length: int, context: int, seed: int = 0):
        """``(keys, values, bias)``: a random cache of ``length`` positions, ``context`` filled."""
        gen = torch.Generator().manual_seed(seed)
        shape = (rows, self.kv_heads, length, self.head_dim)
        keys = [torch.randn(shape, generator=gen).bfloat16() for _ in self.inner.layers]
        values = [torch.randn(shape, generator=gen).bfloat16() for _ in self.inner.layers]
        bias = torch.full((rows, 1, 1, length), float("-inf"))
        bias[..., :context] = 0.0
        return keys, values, bias

    def __call__(self, ids, position: int, keys, values, bias) -> torch.Tensor:
        """``[B, V]`` logits after ``ids`` (``[B, 1]``) written at ``position`` (opened in
        ``bias``)."""
        bias[..., position] = 0.0
        positions = torch.full((ids.shape[0], 1), position)
        return self.fn(ids, positions, torch.tensor([position]), bias, keys, values)


def compiled_steps(step: CompiledStep, rows: int, context: int, steps: int):
    """``((wall, cpu) median step, (wall, cpu) of the first call))`` on a random cache."""
    keys, values, bias = step.cache(rows, context + steps + 1, context)
    top = min(1000, step.model.config.vocab_size - 8)  # ordinary tokens of the vocabulary
    tok = torch.randint(top // 3, top, (rows, 1), generator=torch.Generator().manual_seed(1))
    stamps = []
    with torch.no_grad():
        for t in range(steps):
            stamps.append(clocks())
            tok = step(tok, context + t, keys, values, bias).argmax(-1, keepdim=True)
        stamps.append(clocks())
    first = (stamps[1][0] - stamps[0][0], stamps[1][1] - stamps[0][1])
    return intervals(stamps), first


def product_weights(model: torch.nn.Module, kind: str) -> list:
    """Per product of a step (7 a layer and the head), what :func:`products_step` calls."""
    from learners.engines.torch_bf16_engine import PackedLinear

    out = []
    for module in model.modules():
        if not isinstance(module, PackedLinear):
            continue
        if kind == "bf16":
            out.append((module.packed, module.bias))
            continue
        weight = torch.ops.mkldnn._linear_pointwise(  # the dense weight back from the layout
            torch.eye(module.packed.shape[1], dtype=torch.bfloat16),
            module.packed,
            None,
            "none",
            [],
            "",
        ).T.float()
        # the scale the product reads (bfloat16) is the one the weights are rounded with
        scale = (weight.abs().amax(dim=1).clamp(min=1e-8) / 127).bfloat16()
        q = torch.round(weight / scale.float()[:, None]).clamp(-127, 127).to(torch.int8)
        out.append((q.contiguous(), scale))
    return out


def products_step(weights: list, kind: str, rows: int, steps: int):
    """Median ``(wall, cpu)`` of one pass through every product of a step at ``rows`` rows."""
    inputs = {}
    for w, _ in weights:
        width = w.shape[1]
        inputs.setdefault(width, torch.randn(rows, width).bfloat16())
    stamps = []
    with torch.no_grad():
        for _ in range(steps):
            stamps.append(clocks())
            for w, extra in weights:
                x = inputs[w.shape[1]]
                if kind == "bf16":
                    torch.ops.mkldnn._linear_pointwise(x, w, extra, "none", [], "")
                else:
                    torch.ops.aten._weight_int8pack_mm(x, w, extra)
        stamps.append(clocks())
    return intervals(stamps)


def measure(args) -> dict:
    """Every arm at every row count, ``args.repeats`` interleaved runs."""
    from benchmarks.perf.engine_floor import bare_step, ct2_step
    from learners.engines import RolloutConfig, make_engine
    from learners.policy import HFPolicy

    policy = HFPolicy(args.model, device="cpu", seed=0, rollout="torch-bf16")
    engine = policy.engine
    engine.sync_weights()
    model = engine.model
    arms = [a for a in ARMS if any(part in a for part in args.arms)]
    ct2 = None
    if "ct2-int8" in arms:
        ct2 = make_engine(policy, RolloutConfig("ct2", ct2_compute_type="int8"))._generator(
            0.7, True
        )[0]
    compiled = CompiledStep(model) if "torch-bf16-compiled" in arms else None
    weights = {k: product_weights(model, k) for k in ("bf16", "int8") if f"{k}-products" in arms}
    top = min(1000, model.config.vocab_size - 8)
    prompt = torch.randint(
        top // 3, top, (args.prompt,), generator=torch.Generator().manual_seed(0)
    )
    tokens = policy.tokenizer.convert_ids_to_tokens(prompt.tolist())
    runs: dict = {a: {} for a in arms}
    compile_s: dict = {}
    turn = 0
    for rep in range(args.repeats):
        for rows in args.rows:
            order = arms[turn % len(arms) :] + arms[: turn % len(arms)]
            turn += 1
            for arm in order:
                if arm == "ct2-int8":
                    got = ct2_step(ct2, tokens, rows, args.steps)
                elif arm == "torch-bf16-lean":
                    got = bare_step(model, rows, args.prompt, args.steps, engine._lean)
                elif arm == "torch-bf16-compiled":
                    got, first = compiled_steps(compiled, rows, args.prompt, args.steps)
                    compile_s.setdefault(rows, [round(first[0], 1), round(first[1], 1)])
                else:
                    kind = arm.split("-")[0]
                    got = products_step(weights[kind], kind, rows, args.steps)
                runs[arm].setdefault(rows, []).append(got)
                print(
                    f"repeat {rep} rows {rows} {arm}: {got[0] * 1e3:.1f} ms wall, "
                    f"{got[1] * 1e3:.1f} ms CPU",
                    flush=True,
                )
    table = {}
    for arm in arms:
        table[arm] = {}
        for rows, got in runs[arm].items():
            table[arm][rows] = {
                "wall_ms": round(statistics.median(g[0] for g in got) * 1e3, 2),
                "cpu_ms": round(statistics.median(g[1] for g in got) * 1e3, 2),
                "repeats_cpu_ms": [round(g[1] * 1e3, 2) for g in got],
            }
    base = table.get("ct2-int8", {})
    for per_rows in table.values():
        for rows, cell in per_rows.items():
            if rows in base and cell["cpu_ms"]:
                cell["vs_ct2_int8"] = round(base[rows]["cpu_ms"] / cell["cpu_ms"], 2)
    out = {"table": table, "prompt_tokens": args.prompt, "steps_per_run": args.steps}
    if compiled is not None:
        out["compile_first_call_s"] = {
            str(r): {"wall": w, "cpu": c} for r, (w, c) in compile_s.items()
        }
        out["compiled_vs_lean_max_logit_diff"] = agreement(compiled, engine._lean, args.prompt)
    return out


def agreement(step: CompiledStep, lean, context: int) -> dict:
    """The compiled step's logits against ``LeanStep``'s on one row of the same cache."""
    from transformers import StaticCache

    keys, values, bias = step.cache(1, context + 2, context, seed=3)
    cache = StaticCache(config=step.model.config, max_cache_len=context + 2)
    cache.early_initialization(1, step.kv_heads, step.head_dim, torch.bfloat16, torch.device("cpu"))
    for layer, k, v in zip(cache.layers, keys, values):
        layer.keys.copy_(k)
        layer.values.copy_(v)
        layer.cumulative_length.fill_(context)
    ids = torch.tensor([[500 % step.model.config.vocab_size]])
    with torch.no_grad():
        a = lean(
            ids, torch.ones((1, context + 2), dtype=torch.long), torch.full((1, 1), context), cache
        )
        b = step(ids, context, keys, values, bias)
    a, b = a.float(), b.float()
    return {
        "max_abs": round(float((a - b).abs().max()), 4),
        "logit_range": round(float(a.max() - a.min()), 2),
        "same_argmax": bool(a.argmax() == b.argmax()),
    }


def main(argv: list[str] | None = None) -> dict:
    """Measure, print and write ``--out``; return the record."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--rows", default="1,4,8")
    parser.add_argument("--prompt", type=int, default=256, help="cached positions (the context)")
    parser.add_argument("--steps", type=int, default=12, help="decoding steps a run times")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch and ct2 threads (0: torch's)")
    parser.add_argument("--arms", default="ct2,lean,compiled,products", help="parts of arm names")
    parser.add_argument("--note", default="", help="what the machine was doing, for the record")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    args.rows = [int(r) for r in args.rows.split(",")]
    args.arms = args.arms.split(",")
    if args.threads:
        torch.set_num_threads(args.threads)
    result = measure(args)
    result.update(machine_record("step_routes", argv, args.note))
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for arm, per_rows in result["table"].items():
        print(arm, {r: c["cpu_ms"] for r, c in per_rows.items()})
    return result


if __name__ == "__main__":
    main()

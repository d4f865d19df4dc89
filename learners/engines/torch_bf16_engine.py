"""``torch-bf16``: a bfloat16 copy of the trainer's weights, decoded by torch (static KV cache)."""

from __future__ import annotations

import contextlib
import gc
import time
from typing import Any

import torch

from learners.engines.config import RolloutConfig
from learners.engines.hf_engine import HFEngine
from learners.engines.interface import EngineHost
from learners.engines.registry import register_engine
from learners.engines.stops import RowLimits, limited_completions
from learners.engines.weights import inference_weights
from learners.memory import release_memory
from learners.types import Completion, SamplingConfig


@register_engine("torch-bf16", syncs_weights=True)
class TorchBF16Engine:
    """A bfloat16 copy of the trainer's weights, decoded by a plain torch loop (``torch-bf16``).

    On a CPU with AVX512-BF16 or AMX, torch's matrix products in bfloat16 run on those units
    (oneDNN) and read half the bytes of float32: a decoding step is bound by reading the
    weights at a few rows and by the products at many. What the engine does:

    - **Weights.** :meth:`sync_weights` copies the trainer's current weights (LoRA merged out
      of place, :func:`~learners.engines.weights.inference_weights`) into a bfloat16 model
      built once from the trainer's config; :meth:`release` drops it during the update.
    - **Decoding.** All rows of a call (up to ``sampling.batch_size``) go in one left-padded
      batch: one prefill forward into a static KV cache sized for the batch's longest prompt
      plus its largest budget (transformers' ``StaticCache``, allocated once per batch), then
      one forward per token. Sampling runs on the logits tensor in float32 with ``hf``'s rules
      (temperature, then top-p as transformers' ``TopPLogitsWarper``; EOS held back before
      ``min_new_tokens``); rows stop at their budget, EOS or stop string with ``hf``'s own
      criterion (:class:`~learners.engines.stops.RowLimits`) and are cut as ``hf`` cuts them,
      but at the token that completed a stop string even where the pad id is an EOS id
      (SmolLM2's: ``hf`` then keeps the pad after the stop string as an EOS).
      The copy's linear layers hold oneDNN-packed weights (:class:`PackedLinear`) and a
      Llama-family model steps through :class:`LeanStep` (the same products in fewer torch
      calls than its ``forward``).
    - **Log-probs** are ``log_softmax(logits / T)`` of each sampled token, from the float32
      cast of the bfloat16 model's logits: the distribution that sampled it, as TIS needs;
      they differ from the float32 learner's by the bfloat16 rounding
      (``rollout/logprob_gap``; docs/guide/training.md, "Rollout engines", has the figure).
    - **Greedy calls** (validation, held-out scoring, ``sage-env eval``) decode the trainer's
      float32 model itself with the same loop (``bf16_greedy_float32``, on by default), so
      they measure the trained weights, not their bfloat16 rounding, and need no sync; their
      tokens and log-probs are ``hf``'s up to float32 rounding (the contract tests). Off,
      they decode the bfloat16 copy.

    Each batch draws one seed from the host's generator for its own ``torch.Generator``, so
    a policy seed fixes the samples.

    Args:
        host: The policy (:class:`EngineHost`).
        config: ``bf16_*`` settings.
    """

    def __init__(self, host: EngineHost, config: RolloutConfig | None = None) -> None:
        self.host = host
        self.config = config or RolloutConfig(engine="torch-bf16")
        self.model: torch.nn.Module | None = None
        """The bfloat16 copy (``None`` until the first sync or call, and after a release)."""
        self._stops = HFEngine(host)  # its cached StopStringCriteria
        self._lean: LeanStep | None = None  # the copy's decoding step, where it applies
        self._host_steps: dict[int, LeanStep | None] = {}  # id(trainer's model) -> its step
        self.syncs = 0
        """Weight copies so far."""
        self.sync_seconds = 0.0
        """Seconds spent building and filling the bfloat16 copy so far."""

    # ------------------------------------------------------------------ weights

    def _shell(self) -> torch.nn.Module:
        """A bfloat16 model of the trainer's architecture, its weights filled by a sync.

        Its linear layers are :class:`PackedLinear` where oneDNN runs bfloat16 (:func:`packs`).
        """
        from transformers import AutoModelForCausalLM

        model = self.host.model
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        shell = AutoModelForCausalLM.from_config(base.config, dtype=torch.bfloat16)
        shell.eval()
        shell.config.use_cache = True
        for p in shell.parameters():
            p.requires_grad_(False)
        shell = shell.to(self.host.device)
        if packs(self.host.device):
            for name, module in list(shell.named_modules()):
                if type(module) is torch.nn.Linear:
                    shell.set_submodule(name, PackedLinear(module.bias is not None))
        return shell

    def sync_weights(self) -> None:
        """Copy the trainer's current weights into the bfloat16 model (built at the first).

        A linear layer's weight is packed for oneDNN (:class:`PackedLinear`); a tied output
        head is packed from the input embedding.

        Raises:
            RuntimeError: if the trainer's weights and the bfloat16 model's differ in names.
        """
        t0 = time.perf_counter()
        if self.model is None:
            self.model = self._shell()
            self._lean = LeanStep(self.model) if LeanStep.supports(self.model) else None
        model = self.model
        params = dict(model.named_parameters())
        packed = {n: m for n, m in model.named_modules() if isinstance(m, PackedLinear)}
        seen = set()
        for module in packed.values():
            module.packed = None  # every packed weight is loaded again below
        with torch.no_grad():
            for name, tensor in inference_weights(self.host.model):
                owner, _, leaf = name.rpartition(".")
                if owner in packed:
                    packed[owner].load(leaf, tensor)
                elif name in params:
                    params[name].copy_(tensor)
                else:
                    raise RuntimeError(
                        f"torch-bf16: the trainer's weight {name} has no place "
                        "in the bfloat16 model"
                    )
                seen.add(name)
            head = model.get_output_embeddings()
            if isinstance(head, PackedLinear) and head.packed is None:  # tied to the input:
                head.load("weight", model.get_input_embeddings().weight)
        missing = [n for n in params if n not in seen]
        missing += [n for n, m in packed.items() if m.packed is None]
        missing += [n for n, m in packed.items() if m.has_bias and m.bias is None]
        if missing:
            raise RuntimeError(f"torch-bf16: weights missing from the trainer: {missing[:5]}")
        self.syncs += 1
        self.sync_seconds += time.perf_counter() - t0

    def release(self) -> None:
        """Drop the bfloat16 copy (the sync after the update builds it again)."""
        self.model = None
        self._lean = None
        gc.collect()
        release_memory()

    def rollout_session(self) -> contextlib.AbstractContextManager[None]:
        """No state across calls: a null context."""
        return contextlib.nullcontext()

    def close(self) -> None:
        """Drop the bfloat16 copy."""
        self.release()

    # ------------------------------------------------------------------ decoding

    def _model_for(self, sampling: SamplingConfig) -> torch.nn.Module:
        """The trainer's model for a greedy call (``bf16_greedy_float32``), else the copy."""
        if not sampling.do_sample and self.config.bf16_greedy_float32:
            return self.host.model
        if self.model is None:
            self.sync_weights()
        assert self.model is not None
        return self.model

    @torch.no_grad()
    def generate(
        self,
        prompts: list[list[int]],
        sampling: SamplingConfig,
        budgets: list[int],
        stops: list[tuple[str, ...]],
    ) -> list[Completion]:
        """See :meth:`RolloutEngine.generate`.

        Rows are sorted by prompt length and decoded ``sampling.batch_size`` at a time (one
        batch for a call of up to that many rows). A greedy call on the trainer's model puts
        it in eval mode for the call and back in its training mode after.
        """
        if not prompts:
            return []
        model = self._model_for(sampling)
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        results: list[Completion | None] = [None] * len(prompts)
        was_training = model.training
        model.eval()
        try:
            for start in range(0, len(order), sampling.batch_size):
                idx = order[start : start + sampling.batch_size]
                batch = self.decode(
                    model,
                    [prompts[i] for i in idx],
                    sampling,
                    [budgets[i] for i in idx],
                    [stops[i] for i in idx],
                )
                for i, comp in zip(idx, batch):
                    results[i] = comp
        finally:
            model.train(was_training)
        return results  # type: ignore[return-value]

    def _host_lean(self, model: torch.nn.Module) -> LeanStep | None:
        """The :class:`LeanStep` of the trainer's model, built at its first greedy call.

        Under peft it steps the base model, whose LoRA layers it calls as they are; ``None``
        where it does not apply (an FSDP-sharded model, an architecture outside
        :data:`LEAN_MODELS`).
        """
        from torch.distributed.fsdp import FSDPModule

        if id(model) not in self._host_steps:
            base = model.get_base_model() if hasattr(model, "get_base_model") else model
            fits = LeanStep.supports(base) and not isinstance(model, FSDPModule)
            self._host_steps = {id(model): LeanStep(base) if fits else None}
        return self._host_steps[id(model)]

    def step(
        self,
        model: torch.nn.Module,
        tokens: torch.Tensor,
        mask: torch.Tensor,
        positions: torch.Tensor,
        cache: Any,
    ) -> torch.Tensor:
        """``[B, V]`` logits after one more token per row.

        :class:`LeanStep` where it applies (the bfloat16 copy, or the trainer's float32 model
        for a greedy call), else the model's ``forward`` (``tokens [B, 1]``, ``mask [B, L]``,
        ``positions [B, 1]``).
        """
        lean = self._lean if model is self.model else self._host_lean(model)
        if lean is not None:
            return lean(tokens, mask, positions, cache)
        out = model(
            input_ids=tokens,
            attention_mask=mask,
            position_ids=positions,
            cache=cache,
            use_cache=True,
        )
        return out.logits[:, -1]

    def _prefill(
        self, model: torch.nn.Module, prompts: list[list[int]], width: int, cache: Any
    ) -> torch.Tensor:
        """Fill ``cache`` with the prompts' keys and values; return ``[B, V]`` next-token logits.

        ``cache`` is a fresh ``StaticCache``; the prompts sit left padded to ``width`` in it.
        The rows of each prompt length go through one forward of their own, unpadded, into a
        cache of that length, copied into the batch's cache: the padded batch forwarded up to
        the longest prompt, 28% more tokens over the demo's recorded calls, whose prefill was
        about a third of the engine's time. Only for :class:`LeanStep` models (the cache's
        shape is their key/value heads by head size).
        """
        from transformers import StaticCache

        config = model.get_base_model().config if hasattr(model, "get_base_model") else model.config
        device, dtype = self.host.device, next(model.parameters()).dtype
        head_dim = getattr(config, "head_dim", None)
        head_dim = head_dim or config.hidden_size // config.num_attention_heads
        cache.early_initialization(
            len(prompts), config.num_key_value_heads, head_dim, dtype, torch.device(device)
        )
        logits: torch.Tensor | None = None
        by_length: dict[int, list[int]] = {}
        for row, p in enumerate(prompts):
            by_length.setdefault(len(p), []).append(row)
        for length, rows in by_length.items():
            part = StaticCache(config=config, max_cache_len=length)
            out = model(
                input_ids=torch.tensor([prompts[r] for r in rows], device=device),
                position_ids=torch.arange(length, device=device).expand(len(rows), length),
                cache=part,
                use_cache=True,
                logits_to_keep=1,
            )
            if logits is None:
                logits = out.logits.new_empty((len(prompts), out.logits.shape[-1]))
            index = torch.tensor(rows, device=device)
            logits[index] = out.logits[:, -1]
            for big, small in zip(cache.layers, part.layers):
                big.keys[index, :, width - length : width] = small.keys
                big.values[index, :, width - length : width] = small.values
            del out, part
        for layer in cache.layers:
            layer.cumulative_length.fill_(width)
        assert logits is not None
        return logits

    def decode(
        self,
        model: torch.nn.Module,
        prompts: list[list[int]],
        sampling: SamplingConfig,
        budgets: list[int],
        stops: list[tuple[str, ...]],
    ) -> list[Completion]:
        """One batch: prefill, then a forward per token into a static KV cache."""
        from transformers import StaticCache

        host = self.host
        device = host.device
        n, width, steps = len(prompts), max(len(p) for p in prompts), max(budgets)
        pad = host.tokenizer.pad_token_id
        ids = torch.full((n, width), pad, dtype=torch.long)
        mask = torch.zeros((n, width + steps), dtype=torch.long)
        for row, p in enumerate(prompts):
            ids[row, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            mask[row, width - len(p) : width] = 1
        # positions as transformers' generate sets them for left padding
        positions = mask[:, :width].cumsum(-1) - 1
        positions.masked_fill_(mask[:, :width] == 0, 1)
        config = model.config
        if hasattr(model, "get_base_model"):
            config = model.get_base_model().config
        cache = StaticCache(config=config, max_cache_len=width + steps)
        mask_dev = mask.to(device)
        lean = self._lean if model is self.model else self._host_lean(model)
        if lean is not None:  # a Llama-family model: each prompt length forwarded unpadded
            logits = self._prefill(model, prompts, width, cache)
        else:
            out = model(
                input_ids=ids.to(device),
                attention_mask=mask_dev,
                position_ids=positions.to(device),
                cache=cache,
                use_cache=True,
                logits_to_keep=1,
            )
            logits = out.logits[:, -1]
            del out
        limits = RowLimits(
            width,
            budgets,
            [(self._stops.stop_criteria(st) if st else None) for st in stops],
            stops,
            host.tokenizer,
        )
        eos = torch.tensor(sorted(host.eos_ids), dtype=torch.long)
        generator = torch.Generator(device=device)
        generator.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=host.generator)))
        seqs = ids
        tokens, logps = [], []
        running = torch.ones(n, dtype=torch.bool)
        produced = torch.zeros(n, dtype=torch.long)  # tokens each row made before it stopped
        next_pos = positions[:, -1:] + 1
        work = (torch.empty(logits.shape, device=device), torch.empty(logits.shape, device=device))
        for t in range(steps):
            banned = eos.to(device) if t < sampling.min_new_tokens and len(eos) else None
            tok, logp = pick(logits, sampling, banned, generator, work)
            tok, logp = tok.cpu(), logp.cpu()
            tok = torch.where(running, tok, torch.full_like(tok, pad))
            produced += running
            tokens.append(tok)
            logps.append(logp)
            seqs = torch.cat([seqs, tok[:, None]], dim=1)
            if len(eos):
                running &= ~torch.isin(tok, eos)
            running &= ~limits(seqs, None)
            if not bool(running.any()) or t + 1 == steps:
                break
            mask_dev[:, width + t] = 1
            logits = self.step(
                model, tok[:, None].to(device), mask_dev, (next_pos + t).to(device), cache
            )
        del cache
        new = torch.stack(tokens, dim=1)
        lp = torch.stack(logps, dim=1)
        produced_rows = [int(n) for n in produced]
        return limited_completions(host, prompts, new, lp, budgets, limits, produced_rows)


def packs(device: torch.device) -> bool:
    """True where the copy's linear layers run on oneDNN's bfloat16 kernels, weights packed.

    That is a CPU whose oneDNN has bfloat16 (AVX512-BF16 or AMX).
    """
    return device.type == "cpu" and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


class PackedLinear(torch.nn.Module):
    """A bfloat16 linear layer whose weight is packed once for oneDNN.

    ``torch.nn.functional.linear`` on a bfloat16 CPU tensor reorders the weight into oneDNN's
    blocked layout at every call; the packed weight (``mkldnn._reorder_linear_weight``, what
    inductor's freezing does) is reordered once per sync. Same products, same results.
    """

    def __init__(self, bias: bool) -> None:
        super().__init__()
        self.packed: torch.Tensor | None = None
        self.has_bias = bias
        self.bias: torch.Tensor | None = None

    def load(self, leaf: str, tensor: torch.Tensor) -> None:
        """Set ``weight`` (packed from a bfloat16 cast) or ``bias`` from the trainer's tensor."""
        if leaf == "weight":
            self.packed = torch.ops.mkldnn._reorder_linear_weight(tensor.to(torch.bfloat16))
        elif leaf == "bias" and self.has_bias:
            self.bias = tensor.to(torch.bfloat16).clone()
        else:
            raise RuntimeError(f"torch-bf16: a linear layer has no {leaf}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ weight.T + bias`` in bfloat16."""
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")


LEAN_MODELS = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM")
"""Model classes whose decoding step :class:`LeanStep` runs (the default model is a Llama)."""


class LeanStep:
    """A one-token decoding step of a Llama-family model in half the torch calls of forward.

    transformers' ``forward`` makes about 50 torch calls a layer (the mask built per step,
    RMSNorm in 6 calls, keyword plumbing) and attends with torch's SDPA, whose CPU kernel is
    slow for one query token (:func:`decode_attention`). This step makes the calls that change
    numbers (the model's own modules for the products, its rotary embedding and
    ``apply_rotary_pos_emb``), RMSNorm as ``torch.rms_norm`` of the float32 cast, attends with
    :func:`decode_attention`, and writes the keys and values into the same ``StaticCache`` the
    prefill filled. With SDPA in place of :func:`decode_attention` its logits equalled
    ``forward``'s bit for bit on the default model (bfloat16, 2026-12-05). Built only for
    :data:`LEAN_MODELS` with full attention in every layer and SiLU (:meth:`supports`); other
    models step through their ``forward``.
    """

    def __init__(self, model: torch.nn.Module) -> None:
        import sys

        self.model = model
        self.inner = model.model
        self.rope = sys.modules[type(model).__module__].apply_rotary_pos_emb

    @staticmethod
    def supports(model: torch.nn.Module) -> bool:
        """True for a :data:`LEAN_MODELS` model with full attention in every layer and SiLU."""
        config = model.config
        if type(model).__name__ not in LEAN_MODELS or config.hidden_act != "silu":
            return False
        if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True):
            return False
        return all(t == "full_attention" for t in getattr(config, "layer_types", None) or [])

    @staticmethod
    def _norm(norm: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        """The model's RMSNorm (float32 statistics, the weight applied in ``x``'s dtype)."""
        y = torch.rms_norm(x.float(), (x.shape[-1],), None, norm.variance_epsilon)
        return norm.weight * y.to(x.dtype)

    def __call__(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        cache: Any,
    ) -> torch.Tensor:
        """``[B, V]`` logits of the next token after ``input_ids`` (``[B, 1]``).

        Args:
            input_ids: The last token of each row.
            attention_mask: ``[B, L]`` (L the cache's length): 1 on the positions each row
                attends to, this step's included.
            position_ids: ``[B, 1]`` rotary positions.
            cache: The ``StaticCache`` the prefill and the previous steps filled.
        """
        inner = self.inner
        rows = input_ids.shape[0]
        h = inner.embed_tokens(input_ids)
        cos, sin = inner.rotary_emb(h, position_ids)
        slot = cache.layers[0].cumulative_length.reshape(1).clone()
        used = int(slot) + 1  # the positions written so far, this step's included
        blocked = (attention_mask[:, :used] == 0)[:, None, None, :]
        for layer, kv in zip(inner.layers, cache.layers):
            attn = layer.self_attn
            x = self._norm(layer.input_layernorm, h)
            q = attn.q_proj(x).view(rows, 1, -1, attn.head_dim).transpose(1, 2)
            k = attn.k_proj(x).view(rows, 1, -1, attn.head_dim).transpose(1, 2)
            v = attn.v_proj(x).view(rows, 1, -1, attn.head_dim).transpose(1, 2)
            q, k = self.rope(q, k, cos, sin)
            kv.keys.index_copy_(2, slot, k)
            kv.values.index_copy_(2, slot, v)
            kv.cumulative_length.add_(1)
            keys, values = kv.keys[:, :, :used], kv.values[:, :, :used]
            out = decode_attention(q, keys, values, blocked, attn.scaling)
            h = h + attn.o_proj(out.reshape(rows, 1, -1))
            x = self._norm(layer.post_attention_layernorm, h)
            mlp = layer.mlp
            h = h + mlp.down_proj(torch.nn.functional.silu(mlp.gate_proj(x)) * mlp.up_proj(x))
        return self.model.lm_head(self._norm(inner.norm, h))[:, -1]


def decode_attention(
    q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, blocked: torch.Tensor, scale: float
) -> torch.Tensor:
    """Attention of one query token per row over a static cache, grouped heads.

    Two batched bfloat16 products (``q @ keys^T``, then the probabilities ``@ values``) with
    a float32 softmax between them. torch's CPU SDPA kernel (flash) spent 2.5 ms a layer on
    8 rows and 20 ms on 64 rows at a 300-position cache (development machine), about 10x
    this: it is built for many query tokens. The scores are rounded to bfloat16 (flash keeps
    them in float32); on the default model, teacher-forced on a demo call's completions, the
    sampled tokens' log-probs (T = 0.7) differed from the float32 model's by 0.036 nats mean
    with this attention, 0.035 with flash and 0.039 with float32 scores: the bfloat16
    weights, not the attention, make the gap (2026-12-05).

    Args:
        q: ``[B, H, 1, D]`` queries, rotary applied.
        keys: ``[B, K, L, D]`` (K key/value heads; H a multiple of K).
        values: ``[B, K, L, D]``.
        blocked: ``[B, 1, 1, L]`` True where a row may not attend.
        scale: The score scale (``1 / sqrt(D)`` for these models).

    Returns:
        ``[B, 1, H * D]``: the heads side by side, as ``o_proj`` takes them.
    """
    rows, heads, _, dim = q.shape
    groups = keys.shape[1]
    q = q.reshape(rows, groups, heads // groups, dim)
    weights = torch.matmul(q, keys.transpose(-1, -2)).float().mul_(scale)
    weights.masked_fill_(blocked, float("-inf"))
    weights = torch.softmax(weights, dim=-1).to(values.dtype)
    return torch.matmul(weights, values).reshape(rows, 1, heads * dim)


def scores(
    logits: torch.Tensor, sampling: SamplingConfig, banned: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(processed [B, V], logprobs [B, V])`` of one step's float32 logits.

    ``processed`` is what transformers' ``generate`` samples from (or takes the argmax of)
    with ``hf``'s settings: the ``banned`` ids (EOS before ``min_new_tokens``) at -inf, the
    logits divided by the temperature (T = 1 when greedy), then top-p filtered as
    ``TopPLogitsWarper`` does (every token outside the smallest set of most likely tokens
    whose mass reaches ``top_p`` at -inf). ``logprobs`` is ``log_softmax(logits / T)``
    before the ban and the filter, what ``hf`` returns from transformers' raw
    ``output_logits`` (and what the learner recomputes).

    Args:
        logits: ``[B, V]`` raw logits (any float dtype; computed in float32).
        sampling: Temperature, top-p, greedy or not.
        banned: Token ids that may not be picked, or ``None``.
    """
    out = logits.float()
    temperature = sampling.temperature if sampling.do_sample else 1.0
    if temperature != 1.0:
        out = out / temperature
    logprobs = torch.log_softmax(out, dim=-1)
    if banned is not None:
        out = out.index_fill(-1, banned, float("-inf"))
    if sampling.do_sample and sampling.top_p < 1.0:
        ordered, order = torch.sort(out, descending=False)
        remove = ordered.softmax(dim=-1).cumsum(dim=-1) <= (1 - sampling.top_p)
        remove[..., -1:] = False  # keep at least the most likely token
        out = out.masked_fill(remove.scatter(1, order, remove), float("-inf"))
    return out, logprobs


def pick(
    logits: torch.Tensor,
    sampling: SamplingConfig,
    banned: torch.Tensor | None,
    generator: torch.Generator,
    work: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tokens [B], logprobs [B])``: each row's next token and its sampling log-prob.

    A draw from ``softmax`` of the processed scores (:func:`scores`) by inverting its
    cumulative sum at one uniform number per row from ``generator``, or their argmax when
    greedy; the log-prob is ``log_softmax(logits / T)`` of the token. Without a top-p
    filter (the rollouts' case) the step builds two ``[B, V]`` tensors instead of
    :func:`scores`' four, in ``work`` (two float32 ``[B, V]`` buffers reused step after
    step) when given: at a 49k vocabulary a new tensor costs about as much as the arithmetic
    on it (fresh pages), and ``torch.multinomial`` took about 1 ms a row, 20x this draw
    (development machine).
    """
    temperature = sampling.temperature if sampling.do_sample else 1.0
    if work is not None:
        x, probs = work
        x.copy_(logits)
    else:
        x, probs = logits.to(torch.float32, copy=True), None
    if temperature != 1.0:
        x.div_(temperature)
    lse = torch.logsumexp(x, dim=-1, keepdim=True)
    processed = x
    if sampling.do_sample and sampling.top_p < 1.0:
        processed, _ = scores(logits, sampling, banned)
    elif banned is not None:  # in place: a banned token is never picked, so never gathered
        x.index_fill_(-1, banned, float("-inf"))
    if sampling.do_sample:
        if processed is x:
            probs = torch.sub(x, lse, out=probs).exp_() if probs is not None else (x - lse).exp_()
        else:
            probs = torch.softmax(processed, dim=-1)
        cdf = probs.cumsum_(dim=-1)
        u = torch.rand((cdf.shape[0], 1), generator=generator, device=cdf.device)
        # the first token whose cumulative mass exceeds u: a token of mass 0 is never it
        tok = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).squeeze(-1)
        tok = tok.clamp_(max=cdf.shape[-1] - 1)
    else:
        tok = processed.argmax(dim=-1)
    return tok, (x.gather(-1, tok[:, None]) - lse).squeeze(-1)

"""GPU memory arithmetic of the ``paper`` and ``paper-1gpu`` presets (``docs/guide/scaling.md``).

Estimates, per GPU, what training Qwen2.5 with sage-env holds: bf16 weights, the trainable
state (LoRA adapters with their gradients and AdamW moments, or full-weight training), the
rollout peak (KV cache and the prefill's widest activation) and the update peak (gradient
checkpoints, the recomputed layer, completion logits). The model shapes are the published
``config.json`` values of Qwen2.5-3B/7B-Instruct; the lengths and batch sizes are read from
``learners.training.presets.PRESETS``, so the table follows the presets. Nothing here is measured:
the
per-token activation constants are read off the code (``learners/policy/logprobs.py``, peft's LoRA
``Linear.forward``, transformers' Qwen2 layers) and rounded up; ``benchmarks/perf/gpu_check.py``
measures peak memory on a GPU when one is lent. ``docs/guide/scaling.md`` holds this script's output
(``tests/learners/training/test_qwen_presets.py`` checks that it is current)::

    python scripts/memory_arithmetic.py          # prints the markdown tables
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GIB = 2**30
CARD_GIB = 79.0
"""What PyTorch can allocate on an 80 GB card (an A100/H100 80GB reports about 79.1 GiB)."""


@dataclass(frozen=True)
class Shape:
    """A Qwen2 decoder's sizes (``config.json``: hidden_size, intermediate_size, ...)."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    vocab: int
    tied: bool
    head_dim: int = 128

    @property
    def kv_dim(self) -> int:
        """Width of the k and v projections (``num_key_value_heads * head_dim``)."""
        return self.kv_heads * self.head_dim

    def linears(self) -> list[tuple[int, int]]:
        """``(in, out)`` of each linear layer of one decoder layer (q, k, v, o, gate, up, down)."""
        h, i, kv = self.hidden, self.intermediate, self.kv_dim
        return [(h, h), (h, kv), (h, kv), (h, h), (h, i), (h, i), (i, h)]

    def params(self) -> int:
        """Parameters: embeddings (+ an untied head), layers (q/k/v carry biases), norms."""
        h, kv = self.hidden, self.kv_dim
        per_layer = sum(a * b for a, b in self.linears()) + h + 2 * kv + 2 * h
        embeddings = self.vocab * h * (1 if self.tied else 2)
        return embeddings + self.layers * per_layer + h

    def lora_params(self, r: int) -> int:
        """LoRA parameters on every linear layer but the head (peft ``all-linear``): r(in+out)."""
        return self.layers * sum(r * (a + b) for a, b in self.linears())

    def kv_bytes_per_token(self) -> int:
        """bf16 KV cache of one token over all layers: 2 (k, v) x layers x kv_dim x 2 bytes."""
        return 2 * self.layers * self.kv_dim * 2


QWEN = {
    "Qwen/Qwen2.5-3B-Instruct": Shape(36, 2048, 11008, 16, 2, 151936, tied=True),
    "Qwen/Qwen2.5-7B-Instruct": Shape(28, 3584, 18944, 28, 4, 152064, tied=False),
}
"""Published configs (huggingface.co/Qwen/Qwen2.5-{3B,7B}-Instruct/blob/main/config.json)."""


def prefill_bytes_per_token(s: Shape, lora: bool = True) -> int:
    """Widest transient of a no-grad forward, per token (one layer's MLP).

    With fp32 LoRA adapters peft casts the input to fp32 and adds the adapters' fp32 output
    to the bf16 base output: while ``up_proj`` runs, act(gate) (2 B) and up's base output
    (2 B), adapter output (4 B) and scaled output (4 B) are live, about 12 bytes per
    intermediate unit. Without adapters: act(gate), up, their product, 6 bytes.
    """
    return (12 if lora else 6) * s.intermediate + 4 * s.hidden


def recompute_bytes_per_token(s: Shape, lora: bool = True) -> int:
    """What one recomputed layer saves for its backward (checkpointing on), per token.

    Attention: normed input, q/k/v/o, RMSNorm's fp32 internals, and with LoRA the fp32
    copies of the adapters' inputs (about 48 bytes per hidden unit with LoRA, 24 without);
    MLP: gate, up, act, product in bf16, with LoRA the down adapter's fp32 input, plus the
    gradients in flight (about 16 bytes per intermediate unit with LoRA, 12 without).
    """
    if lora:
        return 48 * s.hidden + 16 * s.intermediate
    return 24 * s.hidden + 12 * s.intermediate


def logits_bytes_per_token(s: Shape) -> int:
    """Completion-position logits in the update (``learners.policy.logprobs.token_logprobs``),
    per token.

    The fp32 log-softmax kept for backward (4 B per vocabulary entry); in backward the
    scattered fp32 gradient of the gather, the softmax temporary and the fp32 input gradient
    (4 + 4 + 4 B): 16 bytes per vocabulary entry at the peak.
    """
    return 16 * s.vocab


@dataclass(frozen=True)
class Estimate:
    """Per-GPU memory of one preset, GiB."""

    preset: str
    model: str
    weights: float
    trainable: float
    kv_decode: float
    prefill: float
    checkpoints: float
    recompute: float
    logits: float

    @property
    def rollout(self) -> float:
        """Rollout peak above the resident state: the larger of prefill and full KV cache."""
        return max(self.prefill, self.kv_decode)

    @property
    def update(self) -> float:
        """Update peak above the resident state: checkpoints + recomputed layer + logits."""
        return self.checkpoints + self.recompute + self.logits

    @property
    def total(self) -> float:
        """Resident state + the larger phase peak (rollout and update never overlap)."""
        return self.weights + self.trainable + max(self.rollout, self.update)


def estimate(preset: str, lora: bool = True) -> Estimate:
    """The per-GPU estimate of ``PRESETS[preset]`` (a Qwen2.5 preset).

    ``lora=False`` gives the activations of the same lengths without adapters (the
    ``trainable`` field stays the LoRA state; full-weight state is in :func:`full_ft_table`).
    """
    from learners.training.presets import PRESETS

    cfg = PRESETS[preset]
    s = QWEN[cfg.model]
    lc = cfg.learner
    g, p, n = cfg.generation_batch_size, cfg.max_prompt_tokens, cfg.max_new_tokens
    b, t = lc.micro_batch_size, lc.max_seq_tokens
    c = min(n, t)  # completion tokens of a training sequence
    kv = s.kv_bytes_per_token()
    return Estimate(
        preset=preset,
        model=cfg.model,
        weights=2 * s.params() / GIB,
        trainable=16 * s.lora_params(lc.lora.r) / GIB,
        kv_decode=g * (p + n) * kv / GIB,
        prefill=(g * p * kv + g * p * prefill_bytes_per_token(s, lora)) / GIB,
        checkpoints=s.layers * b * t * s.hidden * 2 / GIB,
        recompute=b * t * recompute_bytes_per_token(s, lora) / GIB,
        logits=b * c * logits_bytes_per_token(s) / GIB,
    )


def parameter_table() -> str:
    """Markdown: parameters, LoRA r = 128 parameters and their memory, per model."""
    rows = [
        "| model | layers | hidden | intermediate | kv heads x dim | vocab | parameters | "
        "LoRA r=128 parameters | LoRA share | adapter + grad + AdamW (fp32, 16 B/param) | "
        "KV cache per token (bf16) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in QWEN.items():
        n, lora = s.params(), s.lora_params(128)
        rows.append(
            f"| {name.split('/')[1]} | {s.layers} | {s.hidden} | {s.intermediate} | "
            f"{s.kv_heads} x {s.head_dim} | {s.vocab}{' (tied)' if s.tied else ''} | "
            f"{n:,} | {lora:,} | {100 * lora / n:.1f}% | {16 * lora / GIB:.2f} GiB | "
            f"{s.kv_bytes_per_token() // 1024} KiB |"
        )
    return "\n".join(rows)


def full_ft_table() -> str:
    """Markdown: full-weight training vs LoRA, resident state plus the preset's phase peak."""
    rows = [
        "| model (preset lengths) | recipe | bytes/param | weights + grads + AdamW | "
        "+ phase peak | total | fits 79 GiB? |",
        "|---|---|---|---|---|---|---|",
    ]
    recipes = [
        ("LoRA r=128: bf16 base, fp32 adapters", None),
        ("full, pure bf16: bf16 weights, grads, AdamW moments (loses lr 3e-6 updates)", 8),
        ("full, pure bf16 + KL reference copy (kl_coef > 0)", 10),
        ("full, fp32 weights, grads, AdamW (`--dtype float32`; mixed precision alike)", 16),
    ]
    for preset in ("paper-1gpu", "paper"):
        e, plain = estimate(preset), estimate(preset, lora=False)
        s = QWEN[e.model]
        n, lora = s.params(), s.lora_params(128)
        for recipe, per in recipes:
            peak = max(e.rollout, e.update) if per is None else max(plain.rollout, plain.update)
            if per is None:
                resident = (2 * n + 16 * lora) / GIB
                per_txt = f"2 + 16 x {lora / n:.3f}"
            else:
                resident, per_txt = per * n / GIB, str(per)
            total = resident + peak
            verdict = "yes" if total < CARD_GIB else "**no**"
            rows.append(
                f"| {e.model.split('/')[1]} (`{preset}`) | {recipe} | {per_txt} | "
                f"{resident:.1f} GiB | {peak:.1f} GiB | {total:.1f} GiB | {verdict} |"
            )
    return "\n".join(rows)


def preset_table() -> str:
    """Markdown: the per-GPU estimate of each Qwen preset."""
    from learners.training.presets import PRESETS

    rows = [
        "| preset | model | bf16 weights | LoRA state | rollout: prefill / full KV cache | "
        "update: checkpoints + recomputed layer + logits | peak | of 79 GiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for preset in ("paper", "paper-1gpu"):
        e = estimate(preset)
        cfg = PRESETS[preset]
        rows.append(
            f"| `{preset}` | {e.model.split('/')[1]} | {e.weights:.1f} | {e.trainable:.1f} | "
            f"{e.prefill:.1f} / {e.kv_decode:.1f} (G={cfg.generation_batch_size}, "
            f"P={cfg.max_prompt_tokens}, N={cfg.max_new_tokens}) | "
            f"{e.checkpoints:.1f} + {e.recompute:.1f} + {e.logits:.1f} = {e.update:.1f} "
            f"(B={cfg.learner.micro_batch_size}, T={cfg.learner.max_seq_tokens}) | "
            f"**{e.total:.1f} GiB** | {100 * e.total / CARD_GIB:.0f}% |"
        )
    return "\n".join(rows)


def report() -> str:
    """All three tables, as ``docs/guide/scaling.md`` holds them."""
    return "\n\n".join([parameter_table(), full_ft_table(), preset_table()])


if __name__ == "__main__":
    print(report())

"""The hyperparameters of the policy-gradient learners (:class:`PGConfig`).

:class:`learners.algorithms.pg.PolicyGradientLearner` and every algorithm built on it (TRR++,
GRPO, REINFORCE++, the EMA baseline, plug-ins) read them; ``--learner.*`` on the command line
(``docs/guide/learners.md``). Torch-free. ``from learners.algorithms.pg import PGConfig``
still works.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from learners.types import LoRAConfig


@dataclass
class PGConfig:
    """Hyperparameters shared by the policy-gradient learners."""

    lr: float = 1e-6
    """AdamW learning rate."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    clip_eps: float = 0.2
    """PPO ratio clip range: ratio is clipped to [1 - eps, 1 + eps]."""
    kl_coef: float = 0.0
    """Weight of the KL penalty to the reference (initial) model; 0 disables it and skips the
    reference forward pass. With LoRA the reference is the base with its adapters disabled."""
    kl_estimator: Literal["k1", "k2", "k3"] = "k3"
    """Per-token KL estimator (k3 = exp(r) - r - 1 with r = log p_ref - log p, unbiased and
    non-negative)."""
    ppo_epochs: int = 1
    """Passes over the collected batch per update."""
    num_minibatches: int = 1
    """Optimizer steps per epoch; >1 makes later minibatches off-policy, where clipping acts."""
    micro_batch_size: int = 4
    """Sequences per forward/backward (gradient accumulation inside a minibatch)."""
    micro_batch_tokens: int = 0
    """Token budget of one forward/backward: a micro-batch holds at most this many padded
    tokens (sequences x its longest prompt + completion) as well as at most
    ``micro_batch_size`` sequences; a longer sequence goes alone. Activations grow with the
    padded tokens, so the budget bounds the update's memory peak whatever the lengths
    (``docs/write-ups/memory.md``, "Where the memory goes"). 0 (default): no budget."""
    max_grad_norm: float = 1.0
    """Global gradient-norm clip."""
    adamw_foreach: bool | None = None
    """torch's AdamW implementation (``torch.optim.AdamW(foreach=...)``): ``None`` (default)
    torch's choice, the multi-tensor one, whose step makes temporary copies of every
    parameter's state at once; ``False`` the per-parameter loop, whose temporaries are one
    parameter's, a lower memory peak for the step at the same result."""
    optimizer: Literal["adamw", "adamw8bit"] = "adamw"
    """``adamw`` (default): torch's AdamW, float32 moments (8 bytes a weight); ``adamw8bit``:
    bitsandbytes' 8-bit AdamW (about 2 bytes a weight; an approximation of AdamW's step,
    opt-in, ``pip install 'sage-env[lowmem]'``; :mod:`learners.algorithms.optimizers`)."""
    adv_eps: float = 1e-6
    """Added to the group std before dividing."""
    loss_agg: Literal["token_mean", "seq_mean"] = "token_mean"
    """``token_mean``: every completion token weighs the same; ``seq_mean``: every sequence
    weighs the same (mean over its tokens, then over sequences)."""
    gradient_checkpointing: bool = True
    """Recompute activations in backward (less memory, about 30% more compute)."""
    share_prompts: bool = True
    """Forward a prompt once for all the completions sampled from it (the k solver samples of
    a task): they are packed into one row behind the prompt, each completion seeing only the
    prompt and itself (``learners.policy.logprobs.shared_prompt_logprobs``). Log-probs and
    gradients equal the unpacked ones within float rounding; k samples of a P-token prompt
    cost P + sum C tokens instead of k P + sum C. On by default where the model passes a
    one-time check (``HFPolicy.enable_prompt_sharing``); ``False`` forwards every sequence
    whole, as before (``docs/write-ups/speed.md``, "Where the update's time goes")."""
    autocast_bf16: bool = False
    """Run the update's forwards (its log-probs, the reference's, the rescoring) under
    ``torch.autocast(dtype=torch.bfloat16)``; the backward follows the same casts. Weights,
    gradients and the optimiser's state stay in their dtype (float32 on a CPU), and log-probs
    are taken in float32 from bfloat16 logits. On a CPU with bfloat16 matrix units (Intel AMX,
    AVX512-BF16) the update is faster (``benchmarks/perf/update_profile.py``); the gradient is not
    float32's (bfloat16 rounding, about 1% relative), so off by default until a paired
    learning comparison says it learns as well (mixed precision as in Micikevicius et al.
    2018, "Mixed Precision Training", arXiv 1710.03740, with bfloat16 needing no loss
    scaling)."""
    max_seq_tokens: int = 2048
    """Prompt + completion longer than this keep the last tokens of the prompt."""
    truncation: Literal["keep", "zero", "mask"] = "keep"
    """What an action cut at its token budget (``Transition.truncated``) earns: ``keep`` its
    reward (default, as the paper: a cut reply usually fails the format and verifier already,
    which teaches the budget); ``zero`` reward 0 (before advantages); ``mask`` its reward
    still counts in the advantage statistics, but it gets no loss and no share of the loss
    normaliser (DAPO's overlong filtering, Yu et al. 2025, arXiv 2503.14476)."""
    tis_cap: float = 0.0
    """Truncated importance sampling (TIS; Yao et al. 2025, "Your efficient RL framework
    secretly brings you off-policy RL training", https://fengyao.notion.site/off-policy-rl,
    as veRL's ``tis_imp_ratio_cap``): with a cap C > 0 the PPO ratio's denominator is the
    learner's own log-prob of each sampled token under the weights that sampled it (a no-grad
    re-scoring pass), and each token's loss is weighted by ``min(p_learner / p_engine, C)``,
    correcting for an engine that samples from a different distribution (``--rollout.engine
    ct2`` at int8, vLLM in bf16). 0 (default) is off: the engine's log-probs are the
    denominator, exact for an engine that samples the learner's distribution (``hf``,
    ``ct2`` float32). The paper and veRL use C = 2."""
    lora: LoRAConfig = field(default_factory=LoRAConfig)
    """LoRA adapters (peft): ``--learner.lora.r 128`` trains rank-128 adapters instead of
    every weight; ``r = 0`` (default) is off. Checkpoints then hold the adapter."""

    def __post_init__(self) -> None:
        if isinstance(self.lora, dict):
            self.lora = LoRAConfig(**self.lora)
        if not self.lr > 0 or self.clip_eps <= 0 or self.kl_coef < 0:
            raise ValueError(
                f"need lr > 0, clip_eps > 0, kl_coef >= 0; got lr={self.lr}, "
                f"clip_eps={self.clip_eps}, kl_coef={self.kl_coef}"
            )
        if self.micro_batch_tokens < 0:
            raise ValueError(
                f"micro_batch_tokens must be >= 0 (0 = off), got {self.micro_batch_tokens}"
            )
        for name in ("ppo_epochs", "num_minibatches", "micro_batch_size", "max_seq_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.tis_cap < 0:
            raise ValueError(f"tis_cap must be >= 0 (0 = off), got {self.tis_cap}")
        if self.optimizer not in ("adamw", "adamw8bit"):
            raise ValueError(f"optimizer must be adamw or adamw8bit, got {self.optimizer!r}")
        if self.truncation not in ("keep", "zero", "mask"):
            raise ValueError(f"truncation must be keep, zero or mask, got {self.truncation!r}")

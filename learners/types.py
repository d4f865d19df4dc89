"""Data types shared by policies, engines, the rollout driver and learners (a leaf module).

:class:`SamplingConfig` (one generate call's settings), :class:`LoRAConfig` (adapters) and
:class:`Completion` (one sampled reply with its token ids and log-probs). Imports nothing from
``learners`` or torch, so every layer can use them without an import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

@dataclass
class SamplingConfig:
    """Sampling settings of one generate call."""

    max_new_tokens: int = 128
    """Completion budget in tokens."""
    temperature: float = 1.0
    """Softmax temperature; log-probs are computed from logits / temperature (as TRL does)."""
    top_p: float = 1.0
    """Nucleus sampling mass (1.0 = off, so log-probs are those of the sampling policy)."""
    do_sample: bool = True
    """False for greedy decoding."""
    max_prompt_tokens: int = 1024
    """Longer prompts keep their last ``max_prompt_tokens`` tokens."""
    batch_size: int = 32
    """Sequences per forward pass during generation."""
    min_new_tokens: int = 0
    """Suppress EOS before this many tokens (benchmarks use it to fix the length)."""
    stop: tuple[str, ...] = ()
    """Stop strings: a completion ends once its text ends with one of them (kept in the
    text; transformers' ``StopStringCriteria``). Not a truncation."""


@dataclass
class LoRAConfig:
    """LoRA adapters (Hu et al. 2021, arXiv 2106.09685) through peft; off while ``r = 0``.

    With LoRA on, only the adapter weights train (the base stays bit-identical), checkpoints
    hold the adapter (``adapter_model.safetensors`` + ``adapter_config.json``), and the KL
    reference is the same model with its adapters disabled (no second copy in memory).
    ``sage-env export`` merges an adapter into its base for plain transformers.
    """

    r: int = 0
    """Adapter rank; 0 = no LoRA (every weight trains). The paper uses 128."""
    alpha: float = 32.0
    """LoRA alpha: the adapter's update is scaled by ``alpha / r``."""
    dropout: float = 0.0
    """Dropout on the adapter's input (training forward passes only)."""
    target_modules: tuple[str, ...] = ("all-linear",)
    """Module names (or name suffixes) that get adapters, e.g. ``q_proj v_proj``;
    ``all-linear`` (default) is every linear layer but the output head (peft's shorthand)."""

    def __post_init__(self) -> None:
        if self.r < 0 or not self.alpha > 0 or not 0.0 <= self.dropout < 1.0:
            raise ValueError(
                f"lora needs r >= 0, alpha > 0, dropout in [0, 1); got r={self.r}, "
                f"alpha={self.alpha}, dropout={self.dropout}"
            )
        self.target_modules = tuple(self.target_modules)
        if self.r > 0 and not self.target_modules:
            raise ValueError("lora.target_modules is empty")

    @property
    def enabled(self) -> bool:
        """True when ``r > 0``."""
        return self.r > 0


@dataclass
class Completion:
    """One sampled completion.

    Attributes:
        text: Decoded completion (the generated tokens only) without special tokens.
        prompt_ids: Prompt token ids, shape ``[P]``: the chat template, its generation prompt
            and the observation's response prefix. No loss is ever taken on them.
        completion_ids: Sampled token ids, shape ``[C]`` (ends with EOS when it stopped).
        logprobs: Log-probability of each sampled token under the sampling policy, ``[C]``.
        prefix: The observation's response prefix (already in ``prompt_ids``).
        truncated: True when generation stopped at the token budget without an EOS.
    """

    text: str
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float] = field(default_factory=list)
    prefix: str = ""
    truncated: bool = False

    @property
    def action(self) -> str:
        """The whole reply, ``prefix + text``: what the environment receives."""
        return action_text(self)


def action_text(completion: Any) -> str:
    """The reply a completion stands for: its ``prefix`` (when it has one) + its ``text``.

    The one definition of an action's text (:attr:`Completion.action`, the rollout driver,
    evaluation); takes any object with ``text`` (and maybe ``prefix``), so a plugin policy's
    own completion type works too.
    """
    return (getattr(completion, "prefix", "") or "") + completion.text

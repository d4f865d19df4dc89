"""What an engine implements (:class:`RolloutEngine`) and what it uses of its policy
(:class:`EngineHost`). Type-only: importing it imports no engine and not torch.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Protocol

from learners.types import Completion, SamplingConfig

if TYPE_CHECKING:
    import torch

class EngineHost(Protocol):
    """What an engine uses of the policy it generates for (:class:`~learners.policy.HFPolicy`).

    Engines read ``model`` at every call: enabling LoRA replaces it with a peft model.
    """

    model: torch.nn.Module
    """The trainer's causal LM (possibly a peft ``PeftModel``)."""
    tokenizer: Any
    """Its tokenizer (decoding, stop strings)."""
    eos_ids: set[int]
    """Token ids that end a completion (empty: none does)."""
    generator: torch.Generator
    """The policy's sampling RNG; engines draw their seeds from it."""
    device: torch.device
    """Where the model lives."""
    dtype: torch.dtype
    """The model's dtype."""
    path: str
    """A folder (or hub id) holding the model's config, tokenizer and initial weights."""
    tokens_generated: int
    """Running count of generated tokens; engines add to it."""


class RolloutEngine(Protocol):
    """The interface an engine implements: token ids in, :class:`Completion` records out.

    A :class:`~learners.policy.HFPolicy` calls :meth:`generate` from its own ``generate``,
    :meth:`sync_weights` when the training loop says its weights changed, and
    :meth:`rollout_session` around a whole rollout (:class:`~learners.rollout.RolloutDriver`).
    """

    name: str
    """Registry name (``--rollout.engine``), set on the class by ``@register_engine``."""

    def generate(
        self,
        prompts: list[list[int]],
        sampling: SamplingConfig,
        budgets: list[int],
        stops: list[tuple[str, ...]],
    ) -> list[Completion]:
        """One completion per prompt, in input order.

        Args:
            prompts: Token ids ``[P_i]`` per row: chat template, generation prompt and the
                observation's response prefix (returned as ``Completion.prompt_ids``).
            sampling: Temperature, top-p, greedy or not, ``min_new_tokens``, batch size.
            budgets: Completion budget per row, tokens (>= 1).
            stops: Stop strings per row (kept in the text; a stop is not a truncation).

        Returns:
            ``Completion`` per row with ``completion_ids [C_i]`` (ending with EOS when it
            stopped on one), ``logprobs [C_i]`` (``log_softmax(logits / T)`` of each sampled
            token; T = 1 when greedy), ``text`` (the decoded ids) and ``truncated``; the
            policy sets ``prefix``.
        """
        ...

    def sync_weights(self) -> None:
        """Make the next completions come from the trainer's current weights.

        Called when they changed (an optimiser update, a warm-up, a resume). A no-op for
        engines that run the trainer's model itself.
        """
        ...

    def release(self) -> None:
        """Free what generation holds while the trainer needs the memory (called by the
        training loop before every update, which a :meth:`sync_weights` follows).

        ``ct2`` drops its converted models (a copy of the weights each); the sync after the
        update loads the new weights, so the release costs no conversion. A no-op for engines
        that sample from the trainer's model (``hf``, ``hf-cb``) and for ``vllm``, which sleeps
        outside a rollout session.
        """
        ...

    def rollout_session(self) -> contextlib.AbstractContextManager[None]:
        """A context around many :meth:`generate` calls (one rollout).

        ``vllm`` wakes at its start and sleeps at its end; a call outside a session gets one
        of its own.
        """
        ...

    def close(self) -> None:
        """Free what the engine holds (vLLM's engine and memory)."""
        ...

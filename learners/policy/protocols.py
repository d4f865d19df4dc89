"""What the rollout driver (:class:`Policy`) and a policy-gradient learner
(:class:`TrainablePolicy`) need from a policy. Type-only: imports no model code and not torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from learners.types import Completion, LoRAConfig, SamplingConfig

if TYPE_CHECKING:
    import torch

class Policy(Protocol):
    """What a rollout driver needs from a policy.

    A policy whose ``generate`` also takes per-observation ``budgets`` and ``stops`` keywords
    (lists as long as ``observations``, as :meth:`HFPolicy.generate` does) gets every pending
    request of a tick in one call. Others get one call per distinct (budget, stop strings),
    set through ``sampling.max_new_tokens`` and ``sampling.stop``.
    """

    def generate(
        self, observations: list[dict[str, str]], sampling: SamplingConfig
    ) -> list[Completion]:
        """Sample one completion per observation (``{"system", "user", "prefix"}``).

        The prefix starts the assistant turn; the completion continues it, and
        :attr:`Completion.action` is the reply the environment receives.
        """
        ...


class TrainablePolicy(Policy, Protocol):
    """What a policy-gradient learner (``learners.algorithms.pg``) needs from a policy beyond
    sampling.

    Log-prob tensors are ``[B, C]`` (B sequences, C the longest completion), float32, on the
    policy's device, 0 on padding, with a ``[B, C]`` mask that is 1.0 on real tokens.
    """

    lora: LoRAConfig | None
    """The adapters' config while LoRA is on, else ``None``."""

    def enable_lora(self, config: LoRAConfig) -> None:
        """Add fresh LoRA adapters; from then on only they train."""
        ...

    def enable_gradient_checkpointing(self) -> None:
        """Recompute activations in the backward pass."""
        ...

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        """The parameters an optimiser updates (the adapters only, with LoRA)."""
        ...

    def token_logprobs(
        self, prompts: list[list[int]], completions: list[list[int]], temperature: float = 1.0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logprobs, mask)`` of each completion token under the current weights.

        Has grad when grad is enabled.
        """
        ...

    def keep_reference(self) -> None:
        """Fix the current weights as the KL reference for :meth:`reference_logprobs`."""
        ...

    def reference_logprobs(
        self, prompts: list[list[int]], completions: list[list[int]], temperature: float = 1.0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`token_logprobs` under the reference (no grad)."""
        ...

    def train(self, mode: bool = True) -> None:
        """Training mode (dropout on) or evaluation mode."""
        ...

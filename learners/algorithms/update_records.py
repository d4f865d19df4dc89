"""The records that pass between the stages of ``PolicyGradientLearner.update``.

:class:`ScoredBatch` goes from the advantage stage
(:meth:`learners.algorithms.pg.PolicyGradientLearner.compute_advantages`) to the epochs;
:class:`LossInputs` is one micro-batch as the loss hook
(:meth:`learners.algorithms.pg.PolicyGradientLearner.loss`) sees it. Both are importable
from :mod:`learners.algorithms.pg`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from learners.types import Transition


@dataclass
class LossInputs:
    """One micro-batch as the loss hook (``PolicyGradientLearner.loss``) sees it.

    Tensors are ``[B, T]`` (B sequences of the micro-batch, T its longest completion, on the
    model's device) unless noted; padding positions are 0 in every log-prob tensor.

    Attributes:
        logp: Log-probs of the sampled completion tokens under the current model (with grad).
        old_logp: Their sampling log-probs (no grad; the PPO ratio's denominator).
        advantages: ``[B, 1]``, one advantage per sequence.
        mask: 1.0 on real completion tokens, 0.0 on padding.
        ref_logp: Log-probs under the reference (initial) model, or ``None`` when
            ``kl_coef = 0`` (no reference forward pass is made).
        num_tokens: Completion tokens of the whole minibatch (``token_mean``'s normaliser),
            summed over ranks in a multi-process run (``learners.distributed``).
        num_sequences: Sequences of the whole minibatch (``seq_mean``'s normaliser), also
            summed over ranks.
        tis_weight: Per-token truncated importance weights ``min(p_learner / p_engine, C)``
            (no grad) with ``tis_cap`` C > 0 (``old_logp`` is then the learner's re-scored
            log-prob), else ``None``.
    """

    logp: torch.Tensor
    old_logp: torch.Tensor
    advantages: torch.Tensor
    mask: torch.Tensor
    ref_logp: torch.Tensor | None
    num_tokens: int
    num_sequences: int
    tis_weight: torch.Tensor | None = None


@dataclass
class ScoredBatch:
    """The batch with its advantages (``PolicyGradientLearner.compute_advantages``).

    Attributes:
        batch: This rank's transitions that carry loss (n).
        advantages: One advantage per ``batch`` item (n).
        everyone: Every rank's transitions that carry loss, in rank order (N; ``batch`` on
            one process): the normalisers and the counts logged.
        all_advantages: One advantage per ``everyone`` item (N).
        truncated_share: Share of the global batch cut at its token budget, before
            ``truncation = "mask"`` removed those; ``None`` when the global batch was empty.
    """

    batch: list[Transition]
    advantages: list[float]
    everyone: list[Transition]
    all_advantages: list[float]
    truncated_share: float | None

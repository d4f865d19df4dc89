"""The learner's optimiser by name (``--learner.optimizer``).

``adamw`` (default): torch's AdamW, two float32 moments per weight (1.08 GB for a 135M
model). ``adamw8bit``: bitsandbytes' ``AdamW8bit`` (Dettmers et al. 2022, "8-bit Optimizers
via Block-wise Quantization", arXiv 2110.02861; CPU kernels since bitsandbytes 0.50), the same
update rule with each moment stored as 8-bit codes with a float32 scale per block of 256,
about a quarter of the memory; tensors under 4,096 elements keep float32 moments. It is an
approximation of AdamW (not the same step), opt-in, installed by ``pip install
'sage-env[lowmem]'``. The module imports no optimiser library until one is built.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

OPTIMIZERS = ("adamw", "adamw8bit")
"""The names ``--learner.optimizer`` accepts."""

BNB_MISSING = (
    "--learner.optimizer adamw8bit needs bitsandbytes, which is not installed: "
    "pip install 'sage-env[lowmem]' (bitsandbytes==0.50.2)"
)
"""The one-line error for ``adamw8bit`` without bitsandbytes."""


def optimizer_problems(name: str) -> list[str]:
    """What stops optimiser ``name`` from being built here (empty: nothing).

    For :func:`learners.training.preflight.check_train`: a missing package is named before
    the model loads, not after the warm-up.
    """
    if name == "adamw8bit" and importlib.util.find_spec("bitsandbytes") is None:
        return [BNB_MISSING]
    return []


def make_optimizer(params: Iterable[torch.nn.Parameter], config: Any) -> torch.optim.Optimizer:
    """The optimiser ``config.optimizer`` names over ``params``.

    Args:
        params: The trainable parameters.
        config: A :class:`~learners.algorithms.pg_config.PGConfig` (``optimizer``, ``lr``,
            ``weight_decay``, ``adamw_foreach``); betas (0.9, 0.999) and eps 1e-8 either way.

    Raises:
        ValueError: on a name not in :data:`OPTIMIZERS`.
        ImportError: for ``adamw8bit`` without bitsandbytes (:data:`BNB_MISSING`).
    """
    import torch

    if config.optimizer == "adamw":
        return torch.optim.AdamW(
            params, lr=config.lr, weight_decay=config.weight_decay, foreach=config.adamw_foreach
        )
    if config.optimizer == "adamw8bit":
        try:
            import bitsandbytes as bnb
        except ImportError as exc:
            raise ImportError(BNB_MISSING) from exc
        return bnb.optim.AdamW8bit(
            params, lr=config.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=config.weight_decay
        )
    raise ValueError(f"unknown optimizer {config.optimizer!r}; choose one of {OPTIMIZERS}")

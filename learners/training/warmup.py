"""Format warm-up (cold start): a short supervised stage on seed-derived role demonstrations.

The demonstrations come from :func:`sage_env.protocols.demonstrations.build_demonstrations` (seed
set only; no teacher model, no validation item). Each is tokenised exactly as a rollout would be
(:meth:`HFPolicy.encode_prompt`: chat template, generation prompt, response prefix), and the
loss is the mean negative log-likelihood of the target tokens only, through the same
:meth:`HFPolicy.token_logprobs` the RL update uses, with AdamW. The result can be
cached: the warmed weights are keyed by model, demonstrations and hyperparameters, so a rerun
of the demo loads them instead of training again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from learners.policy import HFPolicy, cache_dir

logger = logging.getLogger(__name__)


@dataclass
class WarmupConfig:
    """Hyperparameters of the format warm-up (off by default: ``steps = 0``)."""

    steps: int = 0
    """Optimizer steps; 0 turns the warm-up off."""
    batch_size: int = 4
    """Demonstrations per step."""
    num_demonstrations: int = 96
    """Demonstrations built from the seeds (cycled when ``steps * batch_size`` is larger)."""
    mix: dict[str, float] = field(
        default_factory=lambda: {"challenger": 0.45, "critic": 0.45, "planner": 0.1}
    )
    """Share of demonstrations per role (``challenger``, ``critic``, ``planner``, ``solver``)."""
    lr: float = 5e-5
    """AdamW learning rate (constant after a 10% linear warm-up)."""
    max_tokens: int = 640
    """Prompt + target longer than this keep the last tokens of the prompt."""
    seed: int = 0
    """Seed of the demonstrations and their order."""
    cache: bool = True
    """Keep the warmed weights under ``$SAGE_ENV_CACHE/warmup/<key>`` and reuse them."""

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "num_demonstrations", "max_tokens"):
            if getattr(self, name) < (0 if name == "steps" else 1):
                raise ValueError(f"warmup.{name} is out of range: {getattr(self, name)}")
        if not self.lr > 0:
            raise ValueError(f"warmup.lr must be > 0, got {self.lr}")


def cache_key(model: str, cfg: WarmupConfig, demos: list) -> str:
    """A short hash of what determines the warmed weights."""
    h = hashlib.sha256()
    h.update(model.encode())
    h.update(json.dumps({k: v for k, v in asdict(cfg).items() if k != "cache"}).encode())
    for d in demos:
        h.update(json.dumps([d.observation, d.target]).encode())
    return h.hexdigest()[:16]


def supervised_step(
    policy: HFPolicy,
    optimizer: torch.optim.Optimizer,
    batch: list,
    max_tokens: int,
) -> float:
    """One AdamW step on demonstrations; returns the mean target-token NLL (nats).

    Only target tokens carry loss: the prompt and the response prefix are conditioning. The
    demonstrations go forward and backward one at a time, each loss divided by the batch's
    target tokens, so the gradient is the batch's mean while the activations held at once
    are one sequence's (a whole batch at once set the demo's peak RSS; the figures are in
    docs/write-ups/memory.md, "Where the memory goes").
    """
    tok = policy.tokenizer
    prompts, targets = [], []
    eos = tok.eos_token_id
    for d in batch:
        p = policy.encode_prompt(d.observation, max_tokens)
        t = tok(d.target, add_special_tokens=False)["input_ids"] + (
            [eos] if eos is not None else []
        )
        t = t[: max_tokens // 2]
        p = p[-(max_tokens - len(t)) :]
        prompts.append(p)
        targets.append(t)
    policy.train()
    optimizer.zero_grad(set_to_none=True)
    total = max(sum(len(t) for t in targets), 1)
    loss_sum = 0.0
    for p, t in zip(prompts, targets):
        if not t:
            continue
        logp, mask = policy.token_logprobs([p], [t], 1.0)
        loss = -(logp * mask).sum() / total
        loss.backward()
        loss_sum += float(loss.detach())
    torch.nn.utils.clip_grad_norm_(policy.trainable_parameters(), 1.0)
    optimizer.step()
    return loss_sum


def run_warmup(
    policy: HFPolicy,
    demos: list,
    cfg: WarmupConfig,
    model_name: str = "",
    progress: bool = True,
    log_path: Path | None = None,
) -> dict[str, float]:
    """Warm ``policy`` up on ``demos`` in place (or load the cached result).

    Args:
        policy: The policy to train.
        demos: :class:`sage_env.protocols.demonstrations.Demonstration` items.
        cfg: Warm-up settings; ``cfg.steps == 0`` does nothing.
        model_name: The model's name, part of the cache key.
        progress: Show a progress bar.
        log_path: Append one JSON line per step (``{"warmup_step", "loss"}``) here.

    Returns:
        ``{"warmup/steps", "warmup/loss_first", "warmup/loss_last", "warmup/seconds",
        "warmup/cached"}`` (empty when off).

    Raises:
        ValueError: if ``demos`` is empty while ``cfg.steps > 0``.
    """
    if cfg.steps <= 0:
        return {}
    if not demos:
        raise ValueError("the warm-up has no demonstrations (are the seeds empty?)")
    t0 = time.perf_counter()
    target = cache_dir() / "warmup" / cache_key(model_name or policy.name, cfg, demos)
    if cfg.cache and (target / "model.safetensors").exists():
        policy.load_weights(target)
        meta = json.loads((target / "warmup.json").read_text())
        logger.info("warm-up: loaded cached weights from %s", target)
        return {**meta, "warmup/cached": 1.0, "warmup/seconds": time.perf_counter() - t0}
    from tqdm.auto import tqdm

    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=cfg.lr)
    warm = max(1, cfg.steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warm))
    rng = random.Random(cfg.seed)
    order: list[int] = []
    losses = []
    for step in tqdm(range(cfg.steps), desc="warm-up", unit="step", disable=not progress):
        batch = []
        for _ in range(cfg.batch_size):
            if not order:
                order = list(range(len(demos)))
                rng.shuffle(order)
            batch.append(demos[order.pop()])
        loss = supervised_step(policy, optimizer, batch, cfg.max_tokens)
        sched.step()
        losses.append(loss)
        if log_path is not None:
            with open(log_path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"warmup_step": step + 1, "loss": loss}) + "\n")
    if not all(math.isfinite(x) for x in losses):
        logger.warning("warm-up loss was not finite at some step")
    meta = {
        "warmup/steps": float(cfg.steps),
        "warmup/loss_first": losses[0],
        "warmup/loss_last": sum(losses[-5:]) / len(losses[-5:]),
    }
    if cfg.cache:
        _save_cache(policy, target, meta)
    return {**meta, "warmup/cached": 0.0, "warmup/seconds": time.perf_counter() - t0}


def _save_cache(policy: HFPolicy, target: Path, meta: dict) -> None:
    """Write the warmed weights atomically (temp folder, then rename)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        policy.model.save_pretrained(tmp)
        (tmp / "warmup.json").write_text(json.dumps(meta))
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except OSError as exc:  # a full disk must not stop training
        logger.warning("warm-up: could not cache weights in %s: %s", target, exc)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)

"""Held-out checks during training: best model, early stopping, critic probe, gate.

- :class:`EarlyStopping` keeps the best-validation model in ``out/checkpoints/best`` (with
  ``best.json``: step, accuracy, validations since it) and says when ``patience``
  validations in a row brought no new best.
- :class:`CriticProbe` scores the critic on intact and corrupted seed questions
  (``sage_env.diagnostics.critic_probe``) and, with ``gate_calibration``, moves every environment's
  quality gate alpha to the threshold that separates them.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from learners.evaluation.during_training import critic_replies
from learners.policy import HFPolicy
from learners.training.config import TrainConfig
from learners.training.run_checks import reads_scores
from sage_env import Task, rewards
from sage_env.diagnostics import critic_probe
from sage_env.text.parsing import ScoredReply

logger = logging.getLogger(__name__)


class EarlyStopping:
    """Best validation accuracy so far, its model on disk, and the stop rule.

    State lives in ``out/checkpoints/best.json`` (``{"step", "accuracy", "stale"}``), so a
    resumed run continues counting.

    Args:
        out: Run folder.
        patience: Validations without a new best after which :meth:`record` says stop
            (0 = never).
    """

    def __init__(self, out: Path, patience: int) -> None:
        self.root = out / "checkpoints"
        self.patience = patience
        path = self.root / "best.json"
        self.best: dict[str, Any] | None = json.loads(path.read_text()) if path.exists() else None

    def record(self, step: int, accuracy: float, policy: HFPolicy) -> bool:
        """Record a validation; a new best (strictly higher) saves the model.

        Returns:
            True when training should stop: ``patience > 0`` and the best is that many
            validations old.
        """
        if self.best is None or accuracy > self.best["accuracy"]:
            self.best = {"step": step, "accuracy": accuracy, "stale": 0}
            self._save_model(policy)
        else:
            self.best["stale"] += 1
        self._write()
        return self.patience > 0 and self.best["stale"] >= self.patience

    def _write(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / "best.json.tmp"
        tmp.write_text(json.dumps(self.best))
        os.replace(tmp, self.root / "best.json")

    def _save_model(self, policy: HFPolicy) -> None:
        """Keep the model in ``out/checkpoints/best`` (temp folder, then rename)."""
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / ".best.tmp"
        if tmp.exists():
            shutil.rmtree(tmp)
        policy.save(tmp)
        final = self.root / "best"
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)


class CriticProbe:
    """The critic's discrimination on fixed intact/corrupted seed questions, and the gate.

    Args:
        cfg: The run's config (``critic_probe_size``, ``gate_calibration``,
            ``gate_seed_quantile``, the env's alpha and score rule, the review budget).
        seeds: Seed tasks to draw the probe from (seeded by ``cfg.seed + 1``).

    The probe is empty (off) when ``critic_probe_size`` is 0 or the protocol has no role
    that writes scores (:func:`learners.training.run_checks.reads_scores`: no critic or judge).
    """

    BATCH = 16
    """Probe items per score-distribution call (``HFPolicy.score_distribution``'s own forward
    batch, so the batches, and the figures, are those of one call)."""

    def __init__(self, cfg: TrainConfig, seeds: list[Task], progress: bool = False) -> None:
        self.cfg = cfg
        self.progress = progress
        """Show a progress bar over the probe's items."""
        self.items = []
        if cfg.critic_probe_size > 0 and reads_scores(cfg.env.protocol):
            self.items = critic_probe.probe_set(
                seeds, cfg.critic_probe_size, seed=cfg.seed + 1, config=cfg.env
            )
        domain_of = {t.task_id: t.domain for t in seeds}
        self.domains = [domain_of.get(it.task_id, "") for it in self.items]
        """Each item's domain (that of its seed task), for ``gate_per_domain``."""

    @property
    def task_ids(self) -> set[str]:
        """Ids of the probe's tasks (kept out of the warm-up demonstrations)."""
        return {it.task_id for it in self.items}

    def _distributions(self, policy: HFPolicy) -> list | None:
        """Every item's score distribution, :attr:`BATCH` items a call, under the progress bar.

        Under ``gate_critic = "warm_start"`` from the policy's frozen scorer (the weights the
        gate reads), so ``critic/*`` then measures the gate, not the training Critic.

        ``None`` when the policy cannot read one (the probe then samples replies).
        """
        read = getattr(policy, "score_distribution", None)
        if not callable(read):
            return None
        probs = []
        with tqdm(
            total=len(self.items),
            desc="critic probe",
            unit="item",
            leave=False,
            disable=not self.progress,
        ) as bar:
            for i in range(0, len(self.items), self.BATCH):
                chunk = self.items[i : i + self.BATCH]
                frozen = {"frozen": True} if self.cfg.gate_critic == "warm_start" else {}
                probs += read(
                    [it.observation for it in chunk],
                    temperature=self.cfg.temperature,
                    max_prompt_tokens=self.cfg.max_prompt_tokens,
                    **frozen,
                )
                bar.update(len(chunk))
        return probs

    def __call__(self, policy: HFPolicy, envs: list) -> dict[str, Any]:
        """Probe the critic; with ``gate_calibration`` set alpha in every env.

        Returns:
            ``critic/*`` metrics (empty when the probe is off; ``critic/probe_q_intact`` and
            ``critic/probe_q_corrupted`` list every item's normalised score q (not rounded: 4
            places would tie near-equal scores and move the AUC, so they are kept whole; for
            ``sage-env report``'s ROC curve) and, when calibrating,
            ``gate/alpha`` and ``gate/youden`` (1 when Youden's threshold was used, 0 when
            the critic was at chance and the seed-quantile fallback or the configured alpha
            applies), and ``time/probe_s`` (its wall seconds).
        """
        if not self.items:
            return {}
        t0 = time.perf_counter()
        logger.info(
            "critic probe: scoring %d seed questions (intact and corrupted; --critic-probe-size)",
            len(self.items),
        )
        cfg, rules = self.cfg, self.cfg.env.rewards
        estimate = rules.critic_score_estimate
        probs = self._distributions(policy) if estimate == "expected" else None
        if probs is not None and all(p is not None for p in probs):
            # the gate reads distributions only: one forward pass, no sampled replies
            replies = [ScoredReply("", p) for p in probs]
        else:
            budget = int(cfg.phase_max_new_tokens.get("review_question", cfg.max_new_tokens))
            replies = critic_replies(policy, self.items, budget)
            probs = None
        report = critic_probe.discrimination(
            self.items, replies, rules.alpha, rules.critic_score_rule, estimate
        ).as_dict()
        if probs is not None:
            report.pop("critic/probe_parse_rate", None)  # nothing was sampled to parse
        # every item's q, for the report's ROC curve and score distributions
        qs = [
            rewards.normalise_critic_score(
                critic_probe.reply_score(r, estimate), rules.critic_score_rule
            )
            for r in replies
        ]
        report["critic/probe_q_intact"] = [
            float(q) for q, it in zip(qs, self.items) if it.intact
        ]
        report["critic/probe_q_corrupted"] = [
            float(q) for q, it in zip(qs, self.items) if not it.intact
        ]
        if cfg.gate_calibration:
            alpha, youden = self._gate(self.items, replies)
            report["gate/youden"] = youden
            for e in envs:  # the environment's public gate API, never its config
                e.unwrapped.set_gate(alpha)
            report["gate/alpha"] = alpha
            if cfg.gate_per_domain:
                report.update(self._domain_gates(replies, qs, envs))
        report["time/probe_s"] = time.perf_counter() - t0
        return report

    def _gate(self, items: list, replies: list) -> tuple[float, float]:
        """``(alpha, youden)`` calibrated on ``items``: Youden's threshold, else (critic at
        chance) ``min(alpha, the gate_seed_quantile of the intact items)``, else alpha; with
        ``gate_intact_pass``, never above the q that this share of the intact items reaches."""
        cfg, rules = self.cfg, self.cfg.env.rewards
        estimate = rules.critic_score_estimate
        threshold = critic_probe.best_threshold(
            items, replies, rules.critic_score_rule, estimate=estimate
        )
        alpha = rules.alpha if threshold is None else threshold
        if threshold is None and cfg.gate_seed_quantile is not None:
            level = critic_probe.seed_quantile(
                items, replies, cfg.gate_seed_quantile, rules.critic_score_rule, estimate
            )
            alpha = rules.alpha if level is None else min(rules.alpha, level)
        if cfg.gate_intact_pass is not None:
            floor = critic_probe.seed_quantile(
                items, replies, 1.0 - cfg.gate_intact_pass, rules.critic_score_rule, estimate
            )
            alpha = alpha if floor is None else min(alpha, floor)
        return alpha, float(threshold is not None)

    def _domain_gates(self, replies: list, qs: list[float], envs: list) -> dict[str, float]:
        """``gate_per_domain``: a gate per domain from that domain's probe items alone.

        A domain needs intact and corrupted items of its own; every env then gates that
        domain's questions with it (``set_gate(alpha, domain)``). Returns
        ``gate/alpha_<domain>``, ``gate/youden_<domain>`` and ``critic/auc_<domain>``.
        """
        report: dict[str, float] = {}
        for domain in sorted(set(self.domains) - {""}):
            idx = [i for i, d in enumerate(self.domains) if d == domain]
            items = [self.items[i] for i in idx]
            good = [qs[i] for i in idx if self.items[i].intact]
            bad = [qs[i] for i in idx if not self.items[i].intact]
            if not good or not bad:
                continue
            alpha, youden = self._gate(items, [replies[i] for i in idx])
            for e in envs:
                e.unwrapped.set_gate(alpha, domain)
            report[f"gate/alpha_{domain}"] = alpha
            report[f"gate/youden_{domain}"] = youden
            report[f"critic/auc_{domain}"] = critic_probe.auc(good, bad)
        return report

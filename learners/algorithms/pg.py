"""A PPO-clipped policy-gradient learner on a shared policy, all weights or LoRA adapters.

The policy is an :class:`~learners.policy.HFPolicy` or any
:class:`~learners.policy.TrainablePolicy`; LoRA is ``PGConfig.lora`` (hyperparameters:
:mod:`learners.algorithms.pg_config`; micro-batches: :mod:`learners.algorithms.micro_batches`).
Subclasses choose how sequence rewards become advantages: a registered estimator and a group
key (``advantage_estimator``, ``advantage_group``), or their own
:meth:`PolicyGradientLearner.advantages`; and may replace the objective through one hook,
:meth:`PolicyGradientLearner.loss` (inputs: :class:`LossInputs`; output: loss and metrics);
everything else — token log-probs, the optional reference model, AdamW, gradient clipping,
micro-batching, truncation handling — lives here once. ``examples/dapo_clip_higher.py`` and
``examples/dr_grpo.py`` override the hook. See ``learners/algorithms/trr.py`` (the default),
``grpo.py``, ``reinforce_pp.py`` and ``ema_baseline.py``.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace

import torch

from learners.algorithms.advantages import ADVANTAGE_ESTIMATORS
from learners.algorithms.loss_result import check_advantages, check_loss_result
from learners.algorithms.losses import clipped_policy_loss, kl_penalty
from learners.algorithms.micro_batches import shared_prompt_units, token_chunks
from learners.algorithms.optimizers import make_optimizer
from learners.algorithms.pg_config import PGConfig
from learners.algorithms.update_records import LossInputs, ScoredBatch
from learners.distributed import collectives, data_parallel
from learners.policy.protocols import TrainablePolicy
from learners.rng_state import as_tuple as _as_tuple
from learners.types import Transition

ADVANTAGE_GROUPS: dict[str, Callable[[Transition], Hashable]] = {
    "role_domain": lambda t: t.group_key,
    "role_prompt": lambda t: (t.role, tuple(t.prompt_ids)),
}
"""The group key of a transition for each :attr:`PolicyGradientLearner.advantage_group`:
``role_domain`` is TRR++'s task-relative group (role, domain), or (role, ``exec/<mode>``) on
execution tasks (:attr:`learners.types.Transition.group_key`); ``role_prompt`` is GRPO's
(role, prompt token ids), the k samples of one prompt."""


class PolicyGradientLearner:
    """Base of the policy-gradient learners: all roles update together on one model.

    Implements the ``Learner`` protocol (``learners.algorithms.registry``):
    ``observe(transitions)`` buffers, ``update()`` trains on the buffer and clears it,
    ``state_dict()/load_state_dict()`` hold the optimizer and RNG state. Subclasses override
    :meth:`advantages`.

    It trains the policy through :class:`~learners.policy.TrainablePolicy` only: with
    ``config.lora.r > 0`` it first adds LoRA adapters to the policy (the base then stays
    fixed), and with ``kl_coef > 0`` it asks the policy to keep the KL reference.

    Args:
        policy: The policy to train (its weights are updated in place).
        config: Hyperparameters.
        temperature: Sampling temperature used for the rollouts (log-probs use the same).
        seed: Seed of minibatch shuffling.

    Raises:
        ValueError: if the policy already has LoRA adapters other than ``config.lora``.
    """

    config_cls: type = PGConfig
    """Hyperparameter dataclass (``TrainConfig.learner``); a subclass that adds fields
    extends ``PGConfig`` and sets this."""
    advantage_group: str | None = None
    """Which sequences share a baseline in :meth:`advantages`: ``"role_domain"``,
    ``"role_prompt"`` or ``None`` (another or unknown rule; :data:`ADVANTAGE_GROUPS`).
    Declared next to :attr:`advantage_estimator` or an ``advantages`` override;
    ``sage-env train`` reads it to refuse a config in which every group holds one sequence
    (:func:`learners.training.run_checks.certain_no_update`)."""
    advantage_estimator: str | None = None
    """Name of a registered advantage estimator
    (:data:`learners.algorithms.advantages.ADVANTAGE_ESTIMATORS`: ``"group_normalised"``,
    ``"group_mean_whitened"``, or one of yours under ``@register_adv_est``) that
    :meth:`advantages` runs over the :attr:`advantage_group` keys with ``config.adv_eps``; a
    learner that sets both needs no ``advantages`` of its own (veRL's ``adv_estimator``)."""

    def __init__(
        self,
        policy: TrainablePolicy,
        config: PGConfig | None = None,
        temperature: float = 1.0,
        seed: int = 0,
    ) -> None:
        from learners.algorithms.hyperparams import as_config

        self.policy = policy
        self.config = as_config(config, self.config_cls)
        self.temperature = temperature
        if self.config.lora.enabled and policy.lora is None:
            policy.enable_lora(self.config.lora)
        elif policy.lora is not None and policy.lora != self.config.lora:
            raise ValueError(
                f"the policy has LoRA {policy.lora}, the learner config asks for {self.config.lora}"
            )
        if self.config.gradient_checkpointing:
            policy.enable_gradient_checkpointing()
        # one forward of a prompt for all its completions, where the model passes the check
        sharing = getattr(policy, "enable_prompt_sharing", None)
        if self.config.share_prompts and sharing is not None:
            self.share_prompts = bool(sharing())
        else:
            self.share_prompts = False
            if hasattr(policy, "share_prompts"):
                policy.share_prompts = False
        self.params = policy.trainable_parameters()
        """What the optimiser updates (the adapters only, with LoRA)."""
        self.optimizer = make_optimizer(self.params, self.config)  # --learner.optimizer
        self.use_reference = self.config.kl_coef > 0
        if self.use_reference:
            policy.keep_reference()
        self.buffer: list[Transition] = []
        self.rng = random.Random(seed)
        self._gap = [0.0, 0.0, 0]
        self.skip_zero_advantage = True
        """Give sequences with advantage exactly 0 (and no KL term) no forward/backward; set
        it False in a :meth:`loss` with terms that do not vanish at advantage 0."""

    def advantages(self, batch: list[Transition]) -> list[float]:
        """One advantage per transition, from the registered :attr:`advantage_estimator`.

        It runs over the keys of :attr:`advantage_group` (:data:`ADVANTAGE_GROUPS`) with
        ``config.adv_eps``; override it for another rule or a baseline with state.

        Raises:
            NotImplementedError: if the class names no estimator or no known group.
            ValueError: on an unknown estimator name (listing the registered ones), or from
                the estimator (a non-finite reward).
        """
        key = ADVANTAGE_GROUPS.get(self.advantage_group or "")
        if self.advantage_estimator is None or key is None:
            raise NotImplementedError(
                f"{type(self).__name__} sets no advantage_estimator and advantage_group "
                f"({sorted(ADVANTAGE_GROUPS)}): set both or override advantages(batch)"
            )
        estimator = ADVANTAGE_ESTIMATORS.get(self.advantage_estimator)
        return estimator(
            [t.reward for t in batch], [key(t) for t in batch], eps=self.config.adv_eps
        )

    def _checked_advantages(self, batch: list[Transition]) -> list[float]:
        """:meth:`advantages`, refused unless one finite float per transition.

        :func:`~learners.algorithms.loss_result.check_advantages` names the file and line.
        """
        return check_advantages(self, batch, self.advantages(batch))

    def observe(self, transitions: Sequence[Transition]) -> None:
        """Add finished transitions (with rewards) to the update buffer."""
        self.buffer.extend(t for t in transitions if t.completion_ids)

    def update(self) -> dict[str, float]:
        """One update on the buffered transitions; clears the buffer.

        The stages, each testable alone: :meth:`prepare_batch` (``truncation = "zero"``),
        :meth:`compute_advantages` (over every rank's batch; ``truncation = "mask"`` then
        drops the cut actions, so they carry no loss and no share of the normaliser),
        :meth:`trim_prompts`, :meth:`rescore` (TIS's no-grad pass) and :meth:`run_epochs`.

        Returns:
            Metrics: ``loss``, ``pg_loss``, ``kl``, ``clip_frac``, ``grad_norm``,
            ``adv_abs_mean``, ``num_sequences`` (trained on), ``num_tokens``,
            ``truncated_share`` (share of the buffer cut at its budget), ``skipped_share``
            (share of sequences with advantage exactly 0 and no KL term, which need no
            forward/backward), ``logprob_gap_mean`` / ``logprob_gap_max`` (mean and max
            absolute difference, nats, between the engine's sampling log-probs and the
            learner's log-probs of the same tokens under the same weights, as veRL and TRL
            report it: over every token with ``tis_cap`` > 0, else over the tokens the first
            optimiser step forwards), ``tis_weight_mean`` (with ``tis_cap``), plus what
            :meth:`loss` returns. An empty batch (on every rank, or after ``mask``) gives
            ``num_sequences`` 0 (and ``truncated_share``) and no step.

        Raises:
            ValueError: from :meth:`compute_advantages` (bad advantages or rewards) or
                :meth:`run_epochs` (a bad :meth:`loss` result).
        """
        batch, self.buffer = self.buffer, []
        scored = self.compute_advantages(self.prepare_batch(batch))
        if not scored.everyone:
            if scored.truncated_share is None:
                return {"num_sequences": 0.0}
            return {"num_sequences": 0.0, "truncated_share": scored.truncated_share}
        batch = self.trim_prompts(scored.batch)
        self.policy.train()
        self._gap = [0.0, 0.0, 0]  # sum, max, tokens of |engine - learner| log-probs
        rescored = self.rescore(batch)
        metrics = self.run_epochs(batch, scored.advantages, rescored, len(scored.everyone))
        gap_sum, gap_max, gap_n = self._gap
        if gap_n:
            metrics.update(logprob_gap_mean=gap_sum / gap_n, logprob_gap_max=gap_max)
        metrics.update(
            num_sequences=float(len(scored.everyone)),
            num_tokens=float(sum(len(t.completion_ids) for t in scored.everyone)),
            adv_abs_mean=sum(abs(a) for a in scored.all_advantages) / len(scored.all_advantages),
            truncated_share=scored.truncated_share,
        )
        return metrics

    def prepare_batch(self, batch: list[Transition]) -> list[Transition]:
        """Stage 1: the rewards the advantages see; ``truncation = "zero"`` zeroes cut actions.

        Args:
            batch: This rank's transitions (length n); they are not modified.

        Returns:
            ``batch`` itself, or with ``zero`` a new list in which each truncated transition
            is a copy with reward 0.
        """
        if self.config.truncation == "zero":
            return [replace(t, reward=0.0) if t.truncated else t for t in batch]
        return batch

    def compute_advantages(self, batch: list[Transition]) -> ScoredBatch:
        """Stage 2: :meth:`advantages` over every rank's batch, then ``mask``'s filtering.

        The estimator runs on the concatenation of all ranks' batches
        (:func:`learners.distributed.collectives.global_advantages`; one process: ``batch``),
        so group statistics are the global batch's. ``truncated_share`` is taken over that
        batch; with ``truncation = "mask"`` the truncated transitions then leave both the
        local and the global lists (their rewards stayed in the statistics).

        Args:
            batch: This rank's transitions, after :meth:`prepare_batch` (length n).

        Returns:
            The :class:`ScoredBatch`; ``everyone`` is empty when no rank had a transition
            (``truncated_share`` ``None``) or ``mask`` removed them all.

        Raises:
            ValueError: if :meth:`advantages` does not give one finite float per transition
                (:func:`~learners.algorithms.loss_result.check_advantages`) or a reward is not.
            NotImplementedError: from :meth:`advantages` when the class names no estimator.
        """
        # several ranks: statistics over every rank's batch (learners.distributed.collectives)
        adv, everyone, adv_all = collectives.global_advantages(self._checked_advantages, batch)
        if not everyone:
            return ScoredBatch(batch, adv, everyone, adv_all, None)
        truncated_share = sum(t.truncated for t in everyone) / len(everyone)
        if self.config.truncation == "mask":
            keep = [i for i, t in enumerate(batch) if not t.truncated]
            batch, adv = [batch[i] for i in keep], [adv[i] for i in keep]
            kept = [i for i, t in enumerate(everyone) if not t.truncated]
            everyone, adv_all = [everyone[i] for i in kept], [adv_all[i] for i in kept]
        return ScoredBatch(batch, adv, everyone, adv_all, truncated_share)

    def trim_prompts(self, batch: list[Transition]) -> list[Transition]:
        """Stage 3: fit each sequence into ``config.max_seq_tokens`` by cutting its prompt.

        A transition k tokens over the limit becomes a copy without its first k prompt tokens
        (the caller's keeps its ids); the completion is never cut. Runs after the advantages,
        so a prompt-keyed group (``role_prompt``) sees the whole prompt.

        Args:
            batch: Transitions (length n).

        Returns:
            n transitions, each ``<= max_seq_tokens`` long unless its completion alone is.
        """
        trimmed = []
        for t in batch:  # keep the tail of overlong prompts (a copy: callers keep theirs)
            overflow = len(t.prompt_ids) + len(t.completion_ids) - self.config.max_seq_tokens
            trimmed.append(replace(t, prompt_ids=t.prompt_ids[overflow:]) if overflow > 0 else t)
        return trimmed

    def rescore(self, batch: list[Transition]) -> list[list[float] | None]:
        """Stage 4: the learner's log-probs of the sampled tokens before any step (TIS).

        Truncated importance sampling needs, at every optimiser step, the learner's log-prob
        of each token under the weights that sampled it. With ``tis_cap > 0`` and more than
        one step (``ppo_epochs`` or ``num_minibatches`` > 1) one no-grad pass computes them
        and adds every token's engine/learner gap to ``logprob_gap_*``; otherwise nothing is
        forwarded and the first step's own log-probs serve (:meth:`_micro_batch`).

        Args:
            batch: Transitions after :meth:`trim_prompts` (length n).

        Returns:
            n lists of floats (length C_i each, nats, at ``self.temperature``), or n
            ``None`` when no pass is needed.
        """
        cfg = self.config
        single_step = cfg.ppo_epochs == 1 and cfg.num_minibatches == 1
        if cfg.tis_cap <= 0 or single_step:  # the first step's own log-probs serve
            return [None] * len(batch)
        rescored = self._rescore(batch)
        for t, vals in zip(batch, rescored):
            n = len(t.completion_ids)
            self._record_gap(
                torch.tensor(vals or [0.0] * n)[:n],
                torch.tensor(t.logprobs[:n] + [0.0] * (n - len(t.logprobs[:n]))),
                torch.ones(n),
            )
        return rescored

    def run_epochs(
        self,
        batch: list[Transition],
        adv: list[float],
        rescored: list[list[float] | None],
        global_size: int,
    ) -> dict[str, float]:
        """Stage 5: ``ppo_epochs`` passes of ``num_minibatches`` optimiser steps each.

        Each epoch shuffles the row order with the learner's RNG (``seed``; one
        ``shuffle`` per epoch, the order carried over from the last), cuts it into
        minibatches (:func:`learners.distributed.collectives.minibatches`) and takes one
        clipped policy-gradient step on each (:meth:`_step`).

        Args:
            batch: This rank's transitions that carry loss (length n).
            adv: One advantage per transition (length n).
            rescored: :meth:`rescore`'s output (length n).
            global_size: Transitions of the global batch (n on one process).

        Returns:
            Each step metric (``loss``, ``grad_norm``, ``skipped_share``, what :meth:`loss`
            returns, ``tis_weight_mean`` with TIS) averaged over the optimiser steps.

        Raises:
            ValueError: from :meth:`loss`'s result
                (:func:`~learners.algorithms.loss_result.check_loss_result`).
        """
        cfg = self.config
        totals = defaultdict(float)
        n_steps = 0
        order = list(range(len(batch)))
        for _ in range(cfg.ppo_epochs):
            self.rng.shuffle(order)
            for mb in collectives.minibatches(order, cfg.num_minibatches, global_size):
                stats = self._step(
                    [batch[i] for i in mb],
                    [adv[i] for i in mb],
                    [rescored[i] for i in mb],
                    first=n_steps == 0,
                )
                for k, v in stats.items():
                    totals[k] += v
                n_steps += 1
        return {k: v / max(n_steps, 1) for k, v in totals.items()}

    def loss(self, inputs: LossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor | float]]:
        """The loss hook: one micro-batch's share of its minibatch's loss, and metrics.

        Override it to change the objective (clip ranges, sequence-level ratios, another
        normalisation) without touching batching, log-probs or the optimiser. What is
        minimised is the *sum* of the returned losses over a minibatch's micro-batches, so
        normalise by ``inputs.num_tokens`` / ``inputs.num_sequences`` (whole-minibatch
        counts), not by this micro-batch's size. Metrics are summed the same way, then
        averaged over optimiser steps and logged as ``learner/<name>``.

        The default is :meth:`per_token_loss` reduced by :meth:`aggregate`; an override may
        reuse either half.

        Args:
            inputs: Log-probs, advantages, mask and normalisers (:class:`LossInputs`).

        Returns:
            ``(loss, metrics)``: a scalar tensor with grad, and (default) ``pg_loss``, ``kl``,
            ``clip_frac``.
        """
        per_token, metrics = self.per_token_loss(inputs)
        return self.aggregate(per_token, inputs), metrics

    def per_token_loss(
        self, inputs: LossInputs
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor | float]]:
        """The PPO-clip surrogate plus ``kl_coef`` times the per-token KL to the reference.

        Surrogate: :func:`~learners.algorithms.losses.clipped_policy_loss` (Schulman et al. 2017,
        arXiv
        1707.06347); KL: :func:`~learners.algorithms.losses.kl_penalty` (k1/k2/k3, Schulman 2020).

        Returns:
            ``(loss [B, T], metrics)``: ``pg_loss``, ``kl`` and ``clip_frac``, each a
            minibatch-token mean share (summed over micro-batches).
        """
        cfg = self.config
        pg, ratio = clipped_policy_loss(
            inputs.logp, inputs.old_logp, inputs.advantages, cfg.clip_eps
        )
        if inputs.tis_weight is not None:
            pg = pg * inputs.tis_weight
        kl = torch.zeros_like(pg)
        if inputs.ref_logp is not None:
            kl = kl_penalty(inputs.logp, inputs.ref_logp, cfg.kl_estimator)
        clipped = ((ratio - 1).abs() > cfg.clip_eps).float()
        n = max(inputs.num_tokens, 1)
        with torch.no_grad():
            metrics = {
                "pg_loss": (pg * inputs.mask).sum() / n,
                "kl": (kl * inputs.mask).sum() / n,
                "clip_frac": (clipped * inputs.mask).sum() / n,
            }
        return pg + cfg.kl_coef * kl, metrics

    def aggregate(self, per_token: torch.Tensor, inputs: LossInputs) -> torch.Tensor:
        """Reduce a ``[B, T]`` per-token loss by ``config.loss_agg`` over the minibatch.

        ``token_mean``: ``sum(loss * mask) / num_tokens``; ``seq_mean``: each sequence's mean
        over its tokens, summed, ``/ num_sequences``.
        """
        if self.config.loss_agg == "seq_mean":
            seq = (per_token * inputs.mask).sum(1) / inputs.mask.sum(1).clamp(min=1)
            return seq.sum() / max(inputs.num_sequences, 1)
        return (per_token * inputs.mask).sum() / max(inputs.num_tokens, 1)

    @torch.no_grad()
    def _rescore(self, batch: list[Transition]) -> list[list[float] | None]:
        """The learner's log-probs of every transition's tokens under the current weights."""
        out: list[list[float] | None] = [None] * len(batch)
        for mb in self._chunks(list(range(len(batch))), batch):
            with self._autocast():
                logp, _ = self.policy.token_logprobs(
                    [batch[i].prompt_ids for i in mb],
                    [batch[i].completion_ids for i in mb],
                    self.temperature,
                )
            for r, i in enumerate(mb):
                out[i] = logp[r, : len(batch[i].completion_ids)].float().cpu().tolist()
        return out

    def _step(
        self,
        batch: list[Transition],
        adv: list[float],
        rescored: list[list[float] | None] | None = None,
        first: bool = False,
    ) -> dict[str, float]:
        cfg = self.config
        self.optimizer.zero_grad(set_to_none=True)
        stats = defaultdict(float)
        # A sequence whose advantage is exactly 0 adds exactly 0 to the loss when there is no
        # KL term (-ratio * 0), so it gets no forward/backward; the normalisers (n_tokens,
        # len(batch)) still count it, so the gradient is the same as with it.
        skip = self.skip_zero_advantage and not self.use_reference
        active = [i for i in range(len(batch)) if adv[i] != 0.0 or not skip]
        # normalisers of the whole minibatch: on several ranks, summed over them
        n_tokens, n_seqs, n_active = collectives.global_counts(
            sum(len(t.completion_ids) for t in batch), len(batch), len(active)
        )
        skipped_share = 1.0 - n_active / max(n_seqs, 1)
        chunks = self._chunks(active, batch)
        # several ranks: as many passes everywhere, only the last reduces (DDP / FSDP2 sum)
        data_parallel.require_prepared(self.policy)
        n_passes = data_parallel.num_passes(len(chunks))
        with data_parallel.update_step(self.policy):  # FSDP2: sharded inside, gathered after
            self._passes(chunks, n_passes, batch, adv, rescored, first, n_tokens, n_seqs, stats)
            stats = collectives.sum_metrics(dict(stats))
            stats["skipped_share"] = skipped_share
            stats["grad_norm"] = data_parallel.clip_grad_norm(self.params, cfg.max_grad_norm)
            self.optimizer.step()
        return dict(stats)

    def _chunks(self, indices: list[int], batch: list[Transition]) -> list[list[int]]:
        """Micro-batches of ``indices`` (into ``batch``), one forward/backward each.

        Rows of similar length waste little padding, so rows are sorted by length and cut by
        :func:`~learners.algorithms.micro_batches.token_chunks`. With shared-prompt packing a
        row is a prompt and all its completions (:func:`~learners.algorithms.micro_batches.
        shared_prompt_units`), so a group stays in one micro-batch. The minibatch's gradient
        is a sum over its micro-batches: their order and grouping do not change it.
        """
        cfg = self.config
        if self.share_prompts:
            prompts = [tuple(t.prompt_ids) for t in batch]
            comps = [len(t.completion_ids) for t in batch]
            units, lengths = shared_prompt_units(indices, prompts, comps, cfg.micro_batch_tokens)
        else:
            units = [[i] for i in indices]
            lengths = [len(batch[i].prompt_ids) + len(batch[i].completion_ids) for i in indices]
        by_length = sorted(range(len(units)), key=lambda u: lengths[u])
        cut = token_chunks(by_length, lengths, cfg.micro_batch_size, cfg.micro_batch_tokens)
        return [[i for u in chunk for i in units[u]] for chunk in cut]

    def _passes(
        self,
        chunks: list[list[int]],
        n_passes: int,
        batch: list[Transition],
        adv: list[float],
        rescored: list[list[float] | None] | None,
        first: bool,
        n_tokens: int,
        n_seqs: int,
        stats: dict[str, float],
    ) -> None:
        """Forward/backward of each micro-batch, then idle passes up to ``n_passes``.

        Only the last pass reduces gradients over ranks (DDP ``no_sync`` / FSDP2
        ``set_requires_gradient_sync`` around the others, forward included).
        """
        if not n_passes:  # AdamW still steps (momentum), as it would on all-zero gradients
            for p in self.params:
                p.grad = torch.zeros_like(p)
        for k in range(n_passes):
            with data_parallel.gradient_sync(self.policy, last=k == n_passes - 1):
                if k < len(chunks):
                    self._micro_batch(
                        chunks[k], batch, adv, rescored, first, n_tokens, n_seqs, stats
                    )
                else:  # fewer micro-batches than another rank: same collectives, zero gradient
                    data_parallel.idle_pass(self.policy)

    def _micro_batch(
        self,
        mb: list[int],
        batch: list[Transition],
        adv: list[float],
        rescored: list[list[float] | None] | None,
        first: bool,
        n_tokens: int,
        n_seqs: int,
        stats: dict[str, float],
    ) -> None:
        """Forward and backward of one micro-batch (indices ``mb`` of ``batch``)."""
        cfg = self.config
        items = [batch[i] for i in mb]
        prompts = [t.prompt_ids for t in items]
        comps = [t.completion_ids for t in items]
        with self._autocast():
            logp, mask = self.policy.token_logprobs(prompts, comps, self.temperature)
        device = logp.device
        old = torch.zeros_like(logp)
        for r, t in enumerate(items):
            old[r, : len(t.logprobs)] = torch.tensor(t.logprobs, device=device)
        learner_old = None  # the learner's log-probs under the weights that sampled
        if rescored is not None and rescored[mb[0]] is not None:
            learner_old = torch.zeros_like(logp)
            for r, i in enumerate(mb):
                vals = rescored[i] or []
                learner_old[r, : len(vals)] = torch.tensor(vals, device=device)
        elif first:  # no update yet: the current weights sampled this batch
            learner_old = logp.detach()
        if first and rescored is not None and rescored[mb[0]] is None:
            self._record_gap(logp.detach(), old, mask)
        tis_weight = None
        if cfg.tis_cap > 0 and learner_old is not None:
            log_w = torch.clamp(learner_old - old, -20.0, 20.0)
            tis_weight = torch.exp(log_w).clamp(max=cfg.tis_cap) * mask
            stats["tis_weight_mean"] += float(tis_weight.sum()) / max(n_tokens, 1)
            old = learner_old
        ref_logp = None
        if self.use_reference:
            with self._autocast():
                ref_logp, _ = self.policy.reference_logprobs(prompts, comps, self.temperature)
        a = torch.tensor([adv[i] for i in mb], device=device, dtype=logp.dtype).unsqueeze(1)
        loss, parts = check_loss_result(
            self,
            self.loss(LossInputs(logp, old, a, mask, ref_logp, n_tokens, n_seqs, tis_weight)),
        )
        loss.backward()
        stats["loss"] += float(loss.detach())
        for key, value in parts.items():
            stats[key] += float(value)

    def _autocast(self) -> torch.autocast:
        """bfloat16 autocast on the parameters' device when :attr:`PGConfig.autocast_bf16`."""
        device = self.params[0].device.type if self.params else "cpu"
        return torch.autocast(device, dtype=torch.bfloat16, enabled=self.config.autocast_bf16)

    def _record_gap(self, learner: torch.Tensor, engine: torch.Tensor, mask: torch.Tensor) -> None:
        """Add ``|learner - engine|`` log-prob differences (masked) to this update's ``_gap``."""
        gap = self._gap
        diff = ((learner.detach() - engine).abs() * mask).float()
        gap[0] += float(diff.sum())
        gap[1] = max(gap[1], float(diff.max())) if diff.numel() else gap[1]
        gap[2] += int(mask.sum())

    def state_dict(self) -> dict:
        """Optimizer and RNG state (model weights are saved by the policy)."""
        return {
            "optimizer": self.optimizer.state_dict(),
            "rng": self.rng.getstate(),
            "extra": self.extra_state(),
        }

    def extra_state(self) -> dict:
        """Algorithm state to checkpoint (e.g. baselines); empty by default."""
        return {}

    def load_extra_state(self, state: dict) -> None:
        """Restore :meth:`extra_state`."""

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.optimizer.load_state_dict(state["optimizer"])
        rng = state.get("rng")
        if rng is not None:
            self.rng.setstate(_as_tuple(rng))
        self.load_extra_state(state.get("extra") or {})

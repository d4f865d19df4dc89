"""Truncated importance sampling in learners/algorithms/pg.py at non-default caps, at the
log-weight clamp's edges and across PPO steps (issue 49: the TIS mutation tests).

The policy is a unigram table: the log-prob of token v is ``log_softmax(theta / T)[v]``
whatever the context, so every expected weight is a closed form. A learner that records
what its loss hook receives shows the weights, the old log-probs and the metrics."""

from __future__ import annotations

import math

import pytest
import torch

from learners.algorithms.pg import LossInputs, PGConfig, PolicyGradientLearner
from learners.types import Transition

T = 0.8


class UnigramPolicy:
    lora = None

    def __init__(self, vocab: int = 8):
        self.theta = torch.nn.Parameter(torch.linspace(-1.0, 1.0, vocab, dtype=torch.float64))
        self.forwards = 0
        self.forwarded: list[tuple[tuple[int, ...], tuple[int, ...]]] = []

    def trainable_parameters(self):
        return [self.theta]

    def train(self):
        pass

    def enable_gradient_checkpointing(self):
        pass

    def keep_reference(self):
        self.reference = torch.linspace(0.5, -0.5, self.theta.numel(), dtype=torch.float64)
        self.ref_calls: list = []

    def reference_logprobs(self, prompts, comps, temperature):
        self.ref_calls.append(([tuple(p) for p in prompts], [tuple(c) for c in comps], temperature))
        table = torch.log_softmax(self.reference / temperature, -1)
        out = torch.zeros((len(comps), max(1, max(len(c) for c in comps))), dtype=torch.float64)
        for r, c in enumerate(comps):
            out[r, : len(c)] = table[torch.tensor(c, dtype=torch.long)]
        return out, (out != 0).double()

    def logp(self, tokens: list[int]) -> list[float]:
        table = torch.log_softmax(self.theta.detach() / T, -1)
        return [float(table[v]) for v in tokens]

    def token_logprobs(self, prompts, comps, temperature):
        assert temperature == T
        self.forwards += 1
        self.forwarded += [(tuple(p), tuple(c)) for p, c in zip(prompts, comps)]
        c_max = max(1, max(len(c) for c in comps))
        table = torch.log_softmax(self.theta / temperature, -1)
        out = torch.zeros((len(comps), c_max), dtype=torch.float64)
        mask = torch.zeros((len(comps), c_max), dtype=torch.float64)
        for r, c in enumerate(comps):
            out[r, : len(c)] = table[torch.tensor(c, dtype=torch.long)]
            mask[r, : len(c)] = 1.0
        return out * mask, mask


class Recording(PolicyGradientLearner):
    """Advantage = reward; keeps every :class:`LossInputs` its loss hook receives."""

    def advantages(self, batch):
        return [t.reward for t in batch]

    def loss(self, inputs):
        self.seen.append(inputs)
        return super().loss(inputs)


# per completion: tokens, the engine's shift d (engine = learner - d, so log w = d), reward
ROWS = [
    ([1, 5, 2], [0.3, -0.5, 1.0], 1.0),
    ([4, 7], [25.0, -25.0], -2.0),
    ([6], [0.0], 0.5),
]


def _setup(cap: float, rows=ROWS, **config):
    policy = UnigramPolicy()
    cfg = PGConfig(
        lr=1e-2, gradient_checkpointing=False, share_prompts=False, tis_cap=cap, **config
    )
    learner = Recording(policy, cfg, temperature=T, seed=0)
    learner.seen = []
    batch = []
    for k, (comp, shift, reward) in enumerate(rows):
        own = policy.logp(comp)
        batch.append(
            Transition(
                agent="solver_0", role="solver", domain="math", phase="solve",
                prompt_ids=[k, k + 1], completion_ids=comp,
                logprobs=[x - d for x, d in zip(own, shift)], text="", reward=reward,
            )
        )
    return policy, learner, batch


def _weights(cap: float, rows=ROWS) -> list[list[float]]:
    return [[min(math.exp(max(min(d, 20.0), -20.0)), cap) for d in shift] for _, shift, _ in rows]


def _by_row(seen, rows=ROWS):
    """Each sequence's (logp, old_logp, tis_weight, advantage) from the recorded micro-batches."""
    out = {}
    for inputs in seen:
        for r in range(inputs.mask.shape[0]):
            n = int(inputs.mask[r].sum())
            k = next(i for i, (comp, _, _) in enumerate(rows) if len(comp) == n)
            w = None if inputs.tis_weight is None else inputs.tis_weight[r, :n].tolist()
            out.setdefault(k, []).append(
                (inputs.logp[r, :n].tolist(), inputs.old_logp[r, :n].tolist(), w,
                 float(inputs.advantages[r, 0]))
            )
    return out


@pytest.mark.parametrize("cap", [0.5, 1.2, 1e9])
def test_first_step_weights_are_min_of_exp_learner_minus_engine_and_the_cap(cap):
    policy, learner, batch = _setup(cap, micro_batch_size=2)
    learner.observe(batch)
    m = learner.update()
    want = _weights(cap)
    rows = _by_row(learner.seen)
    assert sorted(rows) == [0, 1, 2]
    for k, [(logp, old, w, a)] in rows.items():
        assert w == pytest.approx(want[k], rel=1e-6)
        # the ratio's denominator is the learner's own log-prob, not the engine's
        assert old == pytest.approx(policy_logp_before(batch[k]), abs=1e-6)
        assert logp == pytest.approx(old, abs=1e-6)
        assert a == ROWS[k][2]
    for inputs in learner.seen:
        assert inputs.advantages.dtype == inputs.logp.dtype == torch.float64
        assert inputs.ref_logp is None  # kl_coef 0: no reference forward
    # padding carries weight 0
    for inputs in learner.seen:
        assert (inputs.tis_weight * (1 - inputs.mask)).abs().sum() == 0
    flat = [x for ws in want for x in ws]
    assert m["tis_weight_mean"] == pytest.approx(sum(flat) / 6, rel=1e-6)
    # ratio 1: the surrogate is -A * w per token, over the minibatch's 6 tokens
    pg = -sum(r * x for (_, _, r), ws in zip(ROWS, want) for x in ws) / 6
    assert m["pg_loss"] == pytest.approx(pg, rel=1e-6)
    assert m["loss"] == pytest.approx(pg, rel=1e-6)
    # the gap is engine vs learner, unclamped, over every token
    gaps = [abs(d) for _, shift, _ in ROWS for d in shift]
    assert m["logprob_gap_mean"] == pytest.approx(sum(gaps) / 6, rel=1e-6)
    assert m["logprob_gap_max"] == pytest.approx(25.0, rel=1e-6)
    assert policy.forwards == 2  # one forward per micro-batch, no re-scoring pass
    assert sorted(policy.forwarded) == sorted((tuple(t.prompt_ids), tuple(t.completion_ids)) for t in batch)


def policy_logp_before(t: Transition) -> list[float]:
    return [x + d for x, d in zip(t.logprobs, next(s for c, s, _ in ROWS if c == t.completion_ids))]


def test_log_weights_are_clamped_at_plus_minus_20():
    _, learner, batch = _setup(1e12)
    learner.observe(batch)
    learner.update()
    (_, _, w, _), = _by_row(learner.seen)[1]
    assert w[0] == pytest.approx(math.exp(20.0), rel=1e-6)
    assert w[1] == pytest.approx(math.exp(-20.0), rel=1e-6)


def test_without_a_cap_the_engine_log_probs_are_the_old_ones():
    _, learner, batch = _setup(0.0)
    learner.observe(batch)
    m = learner.update()
    assert "tis_weight_mean" not in m
    for k, [(_, old, w, _)] in _by_row(learner.seen).items():
        assert w is None
        assert old == pytest.approx(batch[k].logprobs, abs=1e-6)
    gaps = [abs(d) for _, shift, _ in ROWS for d in shift]
    assert m["logprob_gap_mean"] == pytest.approx(sum(gaps) / 6, rel=1e-6)


def test_weight_mean_of_a_single_token_batch():
    rows = [([3], [0.4], 1.0)]
    _, learner, batch = _setup(5.0, rows=rows)
    learner.observe(batch)
    m = learner.update()
    assert m["tis_weight_mean"] == pytest.approx(math.exp(0.4), rel=1e-6)
    assert m["pg_loss"] == pytest.approx(-math.exp(0.4), rel=1e-6)
    assert m["logprob_gap_mean"] == pytest.approx(0.4, rel=1e-6)


@pytest.mark.parametrize("epochs,minibatches", [(2, 1), (1, 2)])
def test_later_steps_weigh_by_the_log_probs_of_the_sampling_weights(epochs, minibatches):
    cap = 1.2
    policy, learner, batch = _setup(cap, ppo_epochs=epochs, num_minibatches=minibatches)
    before = [policy.logp(t.completion_ids) for t in batch]
    learner.observe(batch)
    m = learner.update()
    want = _weights(cap)
    rows = _by_row(learner.seen)
    steps = 0
    for k, seen in rows.items():
        for logp, old, w, _ in seen:
            steps += 1
            assert w == pytest.approx(want[k], rel=1e-6)
            # old: the re-scored log-probs of the weights that sampled, not the engine's
            assert old == pytest.approx(before[k], abs=1e-6)
    assert steps == 3 * epochs
    # the second epoch's log-probs are the updated model's
    if epochs == 2:
        assert any(s[1][0] != pytest.approx(s[0][0], abs=1e-6) for s in rows.values())
    gaps = [abs(d) for _, shift, _ in ROWS for d in shift]
    assert m["logprob_gap_mean"] == pytest.approx(sum(gaps) / 6, rel=1e-6)
    assert m["logprob_gap_max"] == pytest.approx(25.0, rel=1e-6)
    # the re-scoring pass (one micro-batch) plus one forward per step's micro-batch
    assert policy.forwards == 1 + epochs * minibatches
    flat = [x for ws in want for x in ws]
    n_tokens = 6 if minibatches == 1 else None
    if n_tokens:
        assert m["tis_weight_mean"] == pytest.approx(sum(flat) / 6, rel=1e-6)


@pytest.mark.parametrize("estimator", ["k1", "k2"])
@pytest.mark.parametrize("weighted", [False, True])
def test_per_token_loss_at_a_non_default_clip_kl_and_estimator(estimator, weighted):
    _, learner, _ = _setup(0.0, clip_eps=0.1, kl_coef=0.3, kl_estimator=estimator)
    ratio = torch.tensor([[1.5, 0.85, 1.0], [0.5, 1.05, 1.0]], dtype=torch.float64)
    logp = torch.log(ratio) - 0.2
    old = torch.full_like(logp, -0.2)
    ref = torch.tensor([[-0.5, -0.1, 0.0], [-1.0, -0.3, 0.0]], dtype=torch.float64)
    adv = torch.tensor([[1.0], [-2.0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]], dtype=torch.float64)
    w = torch.tensor([[0.5, 2.0, 0.0], [1.5, 0.25, 0.0]], dtype=torch.float64)
    inputs = LossInputs(logp, old, adv, mask, ref, 5, 2, w if weighted else None)
    loss, metrics = learner.per_token_loss(inputs)
    clipped = ratio.clamp(0.9, 1.1)
    pg = -torch.minimum(ratio * adv, clipped * adv) * (w if weighted else 1.0)
    d = ref - logp
    kl = -d if estimator == "k1" else 0.5 * d**2
    torch.testing.assert_close(loss, pg + 0.3 * kl)
    # metrics: sums over the mask divided by the minibatch's 5 tokens
    assert float(metrics["pg_loss"]) == pytest.approx(float((pg * mask).sum()) / 5)
    assert float(metrics["kl"]) == pytest.approx(float((kl * mask).sum()) / 5)
    assert float(metrics["clip_frac"]) == pytest.approx(3 / 5)  # 1.5, 0.85, 0.5 (1.05 is in)


def test_per_token_loss_without_a_reference_has_no_kl_and_a_floor_of_one_token():
    _, learner, _ = _setup(0.0, clip_eps=0.3)
    logp = torch.tensor([[math.log(1.2), math.log(2.0)]], dtype=torch.float64)
    inputs = LossInputs(logp, torch.zeros_like(logp), torch.tensor([[1.0]], dtype=torch.float64),
                        torch.ones_like(logp), None, 0, 1)
    loss, metrics = learner.per_token_loss(inputs)
    torch.testing.assert_close(loss, torch.tensor([[-1.2, -1.3]], dtype=torch.float64))
    assert float(metrics["kl"]) == 0.0
    assert float(metrics["pg_loss"]) == pytest.approx(-2.5)  # / max(0 tokens, 1)
    assert float(metrics["clip_frac"]) == pytest.approx(1.0)


def test_the_kl_reference_is_scored_on_each_micro_batch_s_own_sequences():
    policy, learner, batch = _setup(1.2, kl_coef=0.2, micro_batch_size=2)
    learner.observe(batch)
    learner.update()
    table = torch.log_softmax(policy.reference / T, -1)
    pairs = []
    for prompts, comps, temperature in policy.ref_calls:
        assert temperature == T
        pairs += list(zip(prompts, comps))
    assert sorted(pairs) == sorted((tuple(t.prompt_ids), tuple(t.completion_ids)) for t in batch)
    for inputs in learner.seen:
        for r in range(inputs.mask.shape[0]):
            n = int(inputs.mask[r].sum())
            comp = next(c for c, _, _ in ROWS if len(c) == n)
            assert inputs.ref_logp[r, :n].tolist() == pytest.approx(table[comp].tolist())

"""``PolicyGradientLearner.update`` on the tiny model: pinned metrics and weights (issue 50).

Each case trains one update of a tiny random Llama (``tests/conftest.py``'s ``tiny_path``) on
the same ten transitions (four task-relative groups, one execution group, one prompt sampled
three times, one truncated action, prompts long enough to be trimmed) and compares every
returned metric, a projection of the gradient of the last optimiser step and the weights'
movement with numbers recorded from the update before it was split into stages (commit
121ecc0). The update is a deterministic function of its inputs on a CPU, so a refactor that
changes the order of the shuffles, the rescoring or the steps moves these numbers.
"""

from __future__ import annotations

import copy

import pytest
import torch

from learners.algorithms.pg_config import PGConfig
from learners.algorithms.registry import make_learner
from learners.policy import HFPolicy
from learners.types import Transition

# role, domain, group, prompt, completion length, reward, truncated
ROWS = [
    ("solver", "math", "", 0, 5, 1.0, False),
    ("solver", "math", "", 0, 3, 0.0, False),
    ("solver", "math", "", 0, 6, 0.5, False),
    ("solver", "code", "", 1, 4, 0.2, False),
    ("solver", "code", "", 1, 7, 0.9, True),
    ("solver", "code", "", 2, 4, 0.6, False),
    ("solver", "code", "exec/induction", 3, 5, 1.0, False),
    ("solver", "code", "exec/induction", 3, 3, 0.0, False),
    ("critic", "math", "", 4, 4, 1.0, False),
    ("critic", "math", "", 5, 2, 0.0, False),
]
PROMPTS = [list(range(40 + 3 * p, 52 + 5 * p)) for p in range(6)]  # 12 to 37 tokens


def make_batch() -> list[Transition]:
    """The ten transitions; engine log-probs near the tiny model's -5.56 (uniform over 259)."""
    out = []
    for i, (role, domain, group, p, n, reward, truncated) in enumerate(ROWS):
        comp = [(97 + 11 * i + 5 * j) % 250 + 3 for j in range(n)]
        logprobs = [-5.6 + 0.15 * ((7 * i + 3 * j) % 5 - 2) for j in range(n)]
        out.append(
            Transition(
                f"{role}_0",
                role,
                domain,
                "solve",
                list(PROMPTS[p]),
                comp,
                logprobs,
                "",
                reward=reward,
                truncated=truncated,
                group=group,
            )
        )
    return out


CASES = {
    # TRR++ (role, domain) groups, one optimiser step, TIS off
    "trr": ("trr", dict(micro_batch_size=3)),
    # TRR++, two epochs of two minibatches with TIS at a non-default cap: the rescoring pass
    "trr_tis_steps": (
        "trr",
        dict(
            tis_cap=1.3,
            ppo_epochs=2,
            num_minibatches=2,
            micro_batch_size=2,
            truncation="mask",
            max_seq_tokens=30,
        ),
    ),
    # TRR++, one step with TIS: the first step's own log-probs are the denominator
    "trr_tis_first": ("trr", dict(tis_cap=2.0, truncation="zero", kl_coef=0.05)),
    # REINFORCE++-baseline (role, prompt) groups, TIS off, several steps, KL on
    "reinforce_pp": (
        "reinforce_pp",
        dict(ppo_epochs=2, num_minibatches=2, kl_coef=0.1, kl_estimator="k2", loss_agg="seq_mean"),
    ),
    # REINFORCE++-baseline with TIS across steps
    "reinforce_pp_tis": (
        "reinforce_pp",
        dict(tis_cap=1.1, ppo_epochs=1, num_minibatches=3, share_prompts=False),
    ),
}


@pytest.fixture(scope="module")
def base_policy(tiny_path):
    return HFPolicy(tiny_path, device="cpu", seed=0)


def run_case(base: HFPolicy, name: str) -> tuple[dict[str, float], dict[str, float]]:
    """One update of case ``name`` on a copy of ``base``: its metrics and weight checksums.

    Checksums: ``grad_proj`` (sum over tensors of the last step's gradient dotted with a fixed
    ramp), ``delta_proj`` (the same of the weights' change) and ``delta_abs`` (its L1 norm).
    """
    algorithm, overrides = CASES[name]
    policy = copy.deepcopy(base)
    cfg = PGConfig(lr=1e-3, gradient_checkpointing=False, **overrides)
    learner = make_learner(algorithm, policy, cfg, temperature=0.9, seed=3)
    before = {n: p.detach().clone() for n, p in policy.model.named_parameters()}
    learner.observe(make_batch())
    metrics = learner.update()
    sums = {"grad_proj": 0.0, "delta_proj": 0.0, "delta_abs": 0.0}
    for n, p in policy.model.named_parameters():
        ramp = torch.linspace(-1.0, 1.0, p.numel(), dtype=torch.float64)
        delta = (p.detach() - before[n]).double().flatten()
        if p.grad is not None:
            sums["grad_proj"] += float((p.grad.double().flatten() * ramp).sum())
        sums["delta_proj"] += float((delta * ramp).sum())
        sums["delta_abs"] += float(delta.abs().sum())
    return metrics, sums


GOLDEN: dict[str, tuple[dict[str, float], dict[str, float]]] = {
    "reinforce_pp": (
        {
            "adv_abs_mean": 0.7652051030393807,
            "clip_frac": 0.5422149077057838,
            "grad_norm": 2.467980980873108,
            "kl": 0.022363530239090323,
            "logprob_gap_max": 0.42732858657836914,
            "logprob_gap_mean": 0.21996749074835525,
            "loss": -0.03636576235294342,
            "num_sequences": 10.0,
            "num_tokens": 43.0,
            "pg_loss": -0.23389678820967674,
            "skipped_share": 0.0,
            "truncated_share": 0.1,
        },
        {
            "grad_proj": 0.286612795495387,
            "delta_proj": -1.0558742424260334,
            "delta_abs": 189.96317770302267,
        },
    ),
    "reinforce_pp_tis": (
        {
            "adv_abs_mean": 0.7652051030393807,
            "clip_frac": 0.041666666666666664,
            "grad_norm": 3.710522015889486,
            "kl": 0.0,
            "logprob_gap_max": 0.7141895294189453,
            "logprob_gap_mean": 0.22253161807392918,
            "loss": -0.05831716458002726,
            "num_sequences": 10.0,
            "num_tokens": 43.0,
            "pg_loss": -0.05831716458002726,
            "skipped_share": 0.0,
            "tis_weight_mean": 0.9590661406257314,
            "truncated_share": 0.1,
        },
        {
            "grad_proj": 0.5899337380310394,
            "delta_proj": -0.6906979626666906,
            "delta_abs": 154.4384403772283,
        },
    ),
    "trr": (
        {
            "adv_abs_mean": 0.9006914876290084,
            "clip_frac": 0.41860465705394745,
            "grad_norm": 2.0993525981903076,
            "kl": 0.0,
            "logprob_gap_max": 0.5016970634460449,
            "logprob_gap_mean": 0.2159173553054397,
            "loss": -0.19916240870952606,
            "num_sequences": 10.0,
            "num_tokens": 43.0,
            "pg_loss": -0.19916240870952606,
            "skipped_share": 0.09999999999999998,
            "truncated_share": 0.1,
        },
        {
            "grad_proj": 0.48369137951976815,
            "delta_proj": 0.014484046771180526,
            "delta_abs": 90.5996671798639,
        },
    ),
    "trr_tis_first": (
        {
            "adv_abs_mean": 0.9122077447695357,
            "clip_frac": 0.0,
            "grad_norm": 2.3991267681121826,
            "kl": 0.0,
            "logprob_gap_max": 0.7141895294189453,
            "logprob_gap_mean": 0.22253164025240166,
            "loss": -0.09792841784656048,
            "num_sequences": 10.0,
            "num_tokens": 43.0,
            "pg_loss": -0.09792841784656048,
            "skipped_share": 0.0,
            "tis_weight_mean": 1.0389436677444812,
            "truncated_share": 0.1,
        },
        {
            "grad_proj": -0.28175926687259123,
            "delta_proj": -0.18727818585850523,
            "delta_abs": 90.59887752227951,
        },
    ),
    "trr_tis_steps": (
        {
            "adv_abs_mean": 0.8716047269879786,
            "clip_frac": 0.31811146531254053,
            "grad_norm": 2.1522314846515656,
            "kl": 0.0,
            "logprob_gap_max": 0.7141895294189453,
            "logprob_gap_mean": 0.23235860135820177,
            "loss": -0.13719072006642818,
            "num_sequences": 9.0,
            "num_tokens": 36.0,
            "pg_loss": -0.13719072006642818,
            "skipped_share": 0.125,
            "tis_weight_mean": 0.8398027163951062,
            "truncated_share": 0.1,
        },
        {
            "grad_proj": 0.10904900907274202,
            "delta_proj": -0.13353725704402314,
            "delta_abs": 189.42942122181012,
        },
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_update_matches_the_numbers_recorded_before_the_stages(base_policy, name):
    metrics, sums = run_case(base_policy, name)
    want_metrics, want_sums = GOLDEN[name]
    assert sorted(metrics) == sorted(want_metrics)
    for key, value in want_metrics.items():
        assert metrics[key] == pytest.approx(value, rel=1e-5, abs=1e-8), key
    for key, value in want_sums.items():
        assert sums[key] == pytest.approx(value, rel=1e-4, abs=1e-9), key


# --- each stage alone, at non-default settings ----------------------------------------------
# The unigram policy of test_tis.py: log p(v) = log_softmax(theta / T)[v] whatever the context.


def _stub(algorithm: str = "trr", **config):
    from tests.learners.algorithms.test_tis import T, UnigramPolicy

    policy = UnigramPolicy()
    cfg = PGConfig(lr=1e-2, gradient_checkpointing=False, share_prompts=False, **config)
    return policy, make_learner(algorithm, policy, cfg, temperature=T, seed=0)


@pytest.mark.parametrize("truncation", ["keep", "zero", "mask"])
def test_prepare_batch_zeroes_the_reward_of_cut_actions_only_under_zero(truncation):
    _, learner = _stub(truncation=truncation)
    batch = make_batch()
    out = learner.prepare_batch(batch)
    assert [t.reward for t in batch] == [row[5] for row in ROWS]  # the caller's are kept
    want = [0.0 if truncation == "zero" and row[6] else row[5] for row in ROWS]
    assert [t.reward for t in out] == want
    assert [t.completion_ids for t in out] == [t.completion_ids for t in batch]


def test_compute_advantages_normalises_within_task_relative_groups_then_masks():
    import statistics

    _, learner = _stub(adv_eps=0.5, truncation="mask")
    batch = make_batch()
    scored = learner.compute_advantages(batch)
    # (role, domain) groups, the execution rows apart as (solver, exec/induction); the cut
    # row (reward 0.9) counts in its group's mean and std, then leaves the batch
    groups = {}
    for i, (role, domain, group, *_rest) in enumerate(ROWS):
        groups.setdefault((role, group or domain), []).append(i)
    assert len(groups) == 4
    want = {}
    for idx in groups.values():
        rewards = [ROWS[i][5] for i in idx]
        mean, std = statistics.fmean(rewards), statistics.pstdev(rewards)
        for i in idx:
            want[i] = (ROWS[i][5] - mean) / (std + 0.5)
    kept = [i for i, row in enumerate(ROWS) if not row[6]]
    assert scored.batch == [batch[i] for i in kept] == scored.everyone
    assert scored.advantages == pytest.approx([want[i] for i in kept], rel=1e-12)
    assert scored.all_advantages == scored.advantages
    assert scored.truncated_share == pytest.approx(0.1)
    # the code group's std includes the masked 0.9: (0.2 - mean) / (std + eps) with it
    code = [0.2, 0.9, 0.6]
    assert scored.advantages[3] == pytest.approx(
        (0.2 - statistics.fmean(code)) / (statistics.pstdev(code) + 0.5), rel=1e-12
    )


def test_compute_advantages_of_an_empty_batch_has_no_truncated_share():
    _, learner = _stub(truncation="mask")
    scored = learner.compute_advantages([])
    assert scored.everyone == [] and scored.truncated_share is None


def test_trim_prompts_keeps_each_prompts_tail_at_a_non_default_limit():
    _, learner = _stub(max_seq_tokens=20)
    batch = make_batch()
    out = learner.trim_prompts(batch)
    for t, new, row in zip(batch, out, ROWS):
        assert new.completion_ids == t.completion_ids
        assert t.prompt_ids == PROMPTS[row[3]]  # the caller's ids are kept
        room = 20 - len(t.completion_ids)
        if len(t.prompt_ids) > room:
            assert new.prompt_ids == t.prompt_ids[-room:]
        else:
            assert new is t
    assert sum(new is not t for t, new in zip(batch, out)) == 5


@pytest.mark.parametrize(
    ("cap", "epochs", "minibatches", "scores"),
    [(1.3, 2, 1, True), (0.7, 1, 3, True), (1.3, 1, 1, False), (0.0, 2, 2, False)],
)
def test_rescore_scores_every_token_once_only_for_tis_over_several_steps(
    cap, epochs, minibatches, scores
):
    from tests.learners.algorithms.test_tis import ROWS as TIS_ROWS
    from tests.learners.algorithms.test_tis import _setup

    policy, learner, batch = _setup(cap, ppo_epochs=epochs, num_minibatches=minibatches)
    learner._gap = [0.0, 0.0, 0]
    rescored = learner.rescore(batch)
    if not scores:
        assert rescored == [None] * 3 and policy.forwards == 0
        assert learner._gap == [0.0, 0.0, 0]
        return
    assert policy.forwards == 1  # one micro-batch holds the three rows
    for t, vals in zip(batch, rescored):
        assert vals == pytest.approx(policy.logp(t.completion_ids), abs=1e-6)
    # the gap, |learner - engine| in nats, is each row's shift: over all 6 tokens, unclamped
    shifts = [abs(d) for _, shift, _ in TIS_ROWS for d in shift]
    gap_sum, gap_max, gap_n = learner._gap
    assert gap_n == 6
    assert gap_sum == pytest.approx(sum(shifts), rel=1e-6)
    assert gap_max == pytest.approx(25.0, rel=1e-6)


def test_run_epochs_weighs_tokens_by_the_capped_ratio_of_the_given_rescored_log_probs():
    import math
    import random

    from tests.learners.algorithms.test_tis import _setup

    cap = 1.3
    policy, learner, batch = _setup(cap, ppo_epochs=2, num_minibatches=2)
    # log-probs that no forward would give: the stage must weigh by these, not by its own
    shifts = {3: [0.5, -0.3, 0.1], 2: [2.0, -1.0], 1: [0.26]}
    rescored = [[x + d for x, d in zip(t.logprobs, shifts[len(t.completion_ids)])] for t in batch]
    adv = [1.0, -2.0, 0.5]
    metrics = learner.run_epochs(batch, adv, rescored, len(batch))
    assert policy.forwards == 4  # two epochs of two steps, one micro-batch each
    assert len(learner.seen) == 4
    # each epoch reshuffles the learner's RNG's order and cuts it into ceil(3 / 2) = 2 rows
    rng, order, want_steps = random.Random(0), [0, 1, 2], []
    for _ in range(2):
        rng.shuffle(order)
        want_steps += [sorted(order[:2]), sorted(order[2:])]
    length_to_row = {len(t.completion_ids): i for i, t in enumerate(batch)}
    means = []
    for inputs, want_rows in zip(learner.seen, want_steps):
        rows = []
        for r in range(inputs.mask.shape[0]):
            n = int(inputs.mask[r].sum())
            i = length_to_row[n]
            rows.append(i)
            assert inputs.old_logp[r, :n].tolist() == pytest.approx(rescored[i], abs=1e-6)
            want_w = [min(math.exp(d), cap) for d in shifts[n]]
            assert inputs.tis_weight[r, :n].tolist() == pytest.approx(want_w, rel=1e-6)
            assert float(inputs.advantages[r, 0]) == adv[i]
        assert sorted(rows) == want_rows
        means.append(float(inputs.tis_weight.sum()) / float(inputs.mask.sum()))
    assert metrics["tis_weight_mean"] == pytest.approx(sum(means) / 4, rel=1e-9)
    assert {"loss", "pg_loss", "kl", "clip_frac", "grad_norm", "skipped_share"} <= set(metrics)

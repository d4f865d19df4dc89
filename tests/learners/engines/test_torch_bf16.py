"""The ``torch-bf16`` engine's own behaviour (its contract with the others is in
``test_engine_contract.py``): the bfloat16 copy and its syncs, float32 greedy calls, ``hf``'s
sampling rules on the tensor, LoRA, and a training run's log-prob gap."""

from pathlib import Path

import pytest
import torch

from learners.engines import HFEngine, RolloutConfig, TorchBF16Engine
from learners.engines.torch_bf16_engine import pick, scores
from learners.policy import HFPolicy, LoRAConfig, SamplingConfig

GREEDY = SamplingConfig(do_sample=False)
OBS = [
    {"system": "You plan.", "user": "Plan task 1.", "prefix": "<plan>"},
    {"system": "You solve.", "user": "Solve 2 + 2, please, with care.", "prefix": ""},
    {"system": "You review.", "user": "Score it.", "prefix": "<score>"},
]


def _policy(tiny_path, seed=0, **config):
    return HFPolicy(
        tiny_path, device="cpu", seed=seed, rollout=RolloutConfig("torch-bf16", **config)
    )


def _hf(policy, obs, sampling, **kw):
    engine, policy.engine = policy.engine, HFEngine(policy)
    try:
        return policy.generate(obs, sampling, **kw)
    finally:
        policy.engine = engine


def _gaps(policy, comps, temperature):
    with torch.no_grad():
        logp, _ = policy.token_logprobs(
            [c.prompt_ids for c in comps], [c.completion_ids for c in comps], temperature
        )
    return torch.cat(
        [(logp[r, : len(c.logprobs)] - torch.tensor(c.logprobs)).abs() for r, c in enumerate(comps)]
    )


def _samples(policy, seed=3):
    policy.generator.manual_seed(seed)
    comps = policy.generate(OBS, SamplingConfig(temperature=0.7), budgets=[10] * 3)
    return [(c.completion_ids, c.logprobs) for c in comps]


@pytest.mark.parametrize(
    "sampling",
    [
        SamplingConfig(temperature=0.7),
        SamplingConfig(temperature=1.3, top_p=0.8),
        SamplingConfig(temperature=0.7, top_p=0.3),
        GREEDY,
    ],
)
@pytest.mark.parametrize("banned", [False, True])
def test_scores_are_what_transformers_samples_from(sampling, banned):
    from transformers import (
        LogitsProcessorList,
        MinNewTokensLengthLogitsProcessor,
        TemperatureLogitsWarper,
        TopPLogitsWarper,
    )

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 300, generator=g) * 4
    processors = LogitsProcessorList()
    if banned:
        processors.append(MinNewTokensLengthLogitsProcessor(0, 5, [7, 11]))
    if sampling.do_sample:
        if sampling.temperature != 1.0:
            processors.append(TemperatureLogitsWarper(sampling.temperature))
        if sampling.top_p < 1.0:
            processors.append(TopPLogitsWarper(sampling.top_p))
    want = processors(torch.zeros((4, 1), dtype=torch.long), logits.clone())
    got, logprobs = scores(logits, sampling, torch.tensor([7, 11]) if banned else None)
    assert torch.equal(torch.isinf(got), torch.isinf(want))
    torch.testing.assert_close(got[~torch.isinf(got)], want[~torch.isinf(want)])
    temperature = sampling.temperature if sampling.do_sample else 1.0
    torch.testing.assert_close(logprobs, torch.log_softmax(logits / temperature, dim=-1))
    if sampling.top_p < 0.5:
        assert torch.isinf(got).sum() > 0  # the nucleus cut something


@pytest.mark.parametrize("top_p", [1.0, 0.6])
@pytest.mark.parametrize("banned", [None, [2, 5]])
def test_draws_follow_the_processed_distribution_and_carry_the_raw_logprob(top_p, banned):
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(1, 8, generator=g) * 2
    sampling = SamplingConfig(temperature=0.7, top_p=top_p)
    ban = None if banned is None else torch.tensor(banned)
    processed, logprobs = scores(logits, sampling, ban)
    want = torch.softmax(processed, dim=-1)[0]
    n = 20000
    work = (torch.empty(n, 8), torch.empty(n, 8))
    tok, logp = pick(logits.expand(n, 8), sampling, ban, g, work)
    freq = torch.bincount(tok, minlength=8) / n
    assert float((freq - want).abs().max()) < 0.015  # 20k draws: a few standard errors
    assert bool((freq[want == 0] == 0).all())  # never a banned or filtered token
    torch.testing.assert_close(logp, logprobs[0, tok])
    greedy, _ = pick(logits, GREEDY, ban, g)
    assert int(greedy) == int(scores(logits, GREEDY, ban)[0].argmax())


def test_samples_come_from_a_bfloat16_copy_and_greedy_calls_from_float32(tiny_path):
    policy = _policy(tiny_path)
    engine = policy.engine
    assert isinstance(engine, TorchBF16Engine) and engine.model is None  # built at first use
    comps = policy.generate(OBS, SamplingConfig(temperature=0.7), budgets=[24] * 3)
    assert engine.model is not None and engine.syncs == 1
    assert {p.dtype for p in engine.model.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in policy.model.parameters()} == {torch.float32}  # the trainer's
    gaps = _gaps(policy, comps, 0.7)
    assert 0 < float(gaps.mean()) < 5e-3 and float(gaps.max()) < 5e-2  # bfloat16, not float32
    # greedy: the trainer's float32 model, hf's log-probs; opted out, the bfloat16 copy
    want = _hf(policy, OBS, GREEDY, budgets=[12] * 3)
    got = policy.generate(OBS, GREEDY, budgets=[12] * 3)
    assert [c.completion_ids for c in got] == [c.completion_ids for c in want]
    flat = [x for c in want for x in c.logprobs]
    assert [x for c in got for x in c.logprobs] == pytest.approx(flat, abs=1e-5)
    copy = _policy(tiny_path, bf16_greedy_float32=False).generate(OBS, GREEDY, budgets=[12] * 3)
    assert [x for c in copy for x in c.logprobs] != pytest.approx(flat, abs=1e-5)


def test_samples_keep_the_weights_of_the_last_sync_and_release_drops_the_copy(tiny_path):
    policy = _policy(tiny_path)
    before = _samples(policy)
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    assert _samples(policy) == before  # not synced yet
    policy.sync_engine()
    assert policy.engine.syncs == 2 and policy.engine.sync_seconds > 0
    fresh = _samples(policy)
    assert fresh != before
    policy.release_engine()  # as the loop before an update
    assert policy.engine.model is None
    assert _samples(policy) == fresh  # rebuilt from the same weights at the next call


def test_a_stop_string_ends_the_row_there_when_the_pad_id_is_an_eos_id(tiny_path):
    # SmolLM2's pad is its EOS; a row stopped by a stop string must not gain the pad as EOS
    policy = _policy(tiny_path)
    hf = _hf(policy, OBS, GREEDY, budgets=[16] * 3)
    row = max(range(3), key=lambda r: len(hf[r].completion_ids))
    stops = [()] * 3
    stops[row] = (policy.tokenizer.decode(hf[row].completion_ids[2:5]),)
    want = policy.generate(OBS, GREEDY, budgets=[16] * 3, stops=stops)
    assert policy.tokenizer.pad_token_id not in policy.eos_ids
    policy.tokenizer.pad_token = policy.tokenizer.eos_token
    got = policy.generate(OBS, GREEDY, budgets=[16] * 3, stops=stops)
    assert [c.completion_ids for c in got] == [c.completion_ids for c in want]
    assert got[row].completion_ids[-1] not in policy.eos_ids and not got[row].truncated
    assert len(got[row].completion_ids) < len(hf[row].completion_ids)


def test_samples_are_fixed_by_the_policy_seed(tiny_path):
    runs = [_samples(_policy(tiny_path, seed=7)) for _ in range(2)]
    assert runs[0] == runs[1]


def test_min_new_tokens_holds_back_eos(tiny_path):
    policy = _policy(tiny_path)
    eos = min(policy.eos_ids)
    with torch.no_grad():
        policy.model.get_output_embeddings().weight[eos] += 5.0
    policy.sync_engine()
    greedy = SamplingConfig(do_sample=False, min_new_tokens=6)
    got = policy.generate(OBS, greedy, budgets=[8] * 3)
    want = _hf(policy, OBS, greedy, budgets=[8] * 3)
    assert [c.completion_ids for c in got] == [c.completion_ids for c in want]
    sampled = policy.generate(OBS, SamplingConfig(min_new_tokens=6), budgets=[8] * 3)
    assert all(len(c.completion_ids) >= 6 for c in got + sampled)
    assert any(eos in c.completion_ids for c in sampled)  # EOS was likely, held back until 6


def test_samples_the_lora_model_merged_and_greedy_reads_the_peft_model(tiny_path):
    policy = _policy(tiny_path, seed=3)
    policy.enable_lora(LoRAConfig(r=4))
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    base = {n: p.clone() for n, p in policy.model.named_parameters() if "lora_" not in n}
    policy.sync_engine()
    comps = policy.generate(OBS, SamplingConfig(temperature=0.7), budgets=[5, 8, 6])
    assert float(_gaps(policy, comps, 0.7).max()) < 5e-2
    with policy.model.disable_adapter():  # the base alone is far from the samples' log-probs
        assert float(_gaps(policy, comps, 0.7).mean()) > 5e-2
    got = policy.generate(OBS, GREEDY, budgets=[8] * 3)
    want = _hf(policy, OBS, GREEDY, budgets=[8] * 3)
    assert [c.completion_ids for c in got] == [c.completion_ids for c in want]
    for n, p in policy.model.named_parameters():
        if "lora_" not in n:
            assert torch.equal(p, base[n])


@pytest.mark.slow
def test_trains_through_the_loop_with_a_logprob_gap_within_its_bound(tiny_path, tmp_path):
    from learners.algorithms.pg import PGConfig
    from learners.reports.plots import read_metrics
    from learners.training.loop import TrainConfig, train

    cfg = TrainConfig(
        model=tiny_path,
        out=str(tmp_path / "bf16"),
        steps=2,
        rounds_per_step=2,
        device="cpu",
        max_new_tokens=8,
        temperature=0.7,
        rollout=RolloutConfig(engine="torch-bf16"),
        # a KL term forwards every sequence (no zero-advantage skip), so every step measures
        learner=PGConfig(kl_coef=0.01, gradient_checkpointing=False, tis_cap=2.0),
    )
    train(cfg, progress=False)
    rows = [r for r in read_metrics(Path(cfg.out) / "metrics.jsonl") if r["step"] >= 1]
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        assert row["rollout/tokens"] > 0 and row["learner/num_sequences"] > 0
        assert 0 < row["rollout/logprob_gap"] < 5e-3  # bfloat16 sampling, the tiny model
        assert row["rollout/logprob_gap"] <= row["rollout/logprob_gap_max"] < 5e-2
        assert row["time/weight_sync_s"] > 0
        assert 0.9 < row["learner/tis_weight_mean"] < 1.1

"""The rollout-engine contract, once for every engine that runs on this CPU (issue 48).

Every engine of :data:`CONTRACT` gets the same checks on the tiny model: greedy tokens and
log-probs equal ``hf``'s; sampled log-probs equal the learner's own (``token_logprobs`` at the
sampling temperature) within the engine's bound (:data:`SAMPLED_BOUND`); per-row budgets,
``truncated``, stop strings and a forced EOS as ``hf`` has them; and after a perturbation of
the trainer's weights and a sync the outputs change (to the new weights' log-probs), and
restoring the weights and syncing restores them. An engine whose package is not installed
skips with its install line. ``vllm`` has its own lane (``test_vllm_cpu.py``: one vLLM engine
per process, a 128-wide model), which keeps its own copies of these checks.
"""

import pytest
import torch

from learners.engines import ENGINES, HFEngine, RolloutConfig, engine_spec
from learners.policy import HFPolicy, SamplingConfig

CONTRACT = ("hf", "hf-cb", "ct2", "torch-bf16")
"""The engines checked here: every registered one but ``vllm``."""
SAMPLED_BOUND = {"torch-bf16": 5e-2}
"""Largest |engine - learner| log-prob of a sampled token, nats, where it is not 1e-4: the
bfloat16 engine samples from bfloat16 weights (its greedy calls are float32). On the tiny model
the gap measured 0.4-1.3e-3 nats mean and 1-6e-3 max per row, 0.02-0.033 max after the
perturbation below (sharper logits); docs/guide/training.md, "Rollout engines", has the
default model's."""
GREEDY = SamplingConfig(do_sample=False)
OBS = [
    {"system": "You plan.", "user": "Plan task 1.", "prefix": "<plan>"},
    {"system": "You solve.", "user": "Solve 2 + 2, please, with care.", "prefix": ""},
    {"system": "You review.", "user": "Score it.", "prefix": "<score>"},
]


def _engines():
    for name in CONTRACT:
        spec = engine_spec(name)
        yield pytest.param(
            name, marks=pytest.mark.skipif(not spec.installed(), reason=spec.missing), id=name
        )


@pytest.fixture(params=list(_engines()))
def policy(request, tiny_path):
    policy = HFPolicy(tiny_path, device="cpu", seed=0, rollout=RolloutConfig(request.param))
    yield policy
    policy.close()


def _hf(policy, obs, sampling, **kw):
    """``hf``'s completions on the policy's current weights, its engine kept as it is."""
    engine, policy.engine = policy.engine, HFEngine(policy)
    try:
        return policy.generate(obs, sampling, **kw)
    finally:
        policy.engine = engine


def _gap(policy, comps, temperature):
    """``[max |engine - learner|]`` per row of ``comps``, nats."""
    with torch.no_grad():
        logp, mask = policy.token_logprobs(
            [c.prompt_ids for c in comps], [c.completion_ids for c in comps], temperature
        )
    gaps = []
    for row, c in enumerate(comps):
        n = len(c.completion_ids)
        assert len(c.logprobs) == n and mask[row].sum() == n
        gaps.append(float((logp[row, :n] - torch.tensor(c.logprobs)).abs().max()))
    return gaps


def test_the_contract_covers_every_registered_engine_but_vllm():
    assert set(ENGINES) == set(CONTRACT) | {"vllm"}


def test_greedy_tokens_logprobs_budgets_prefixes_and_flags_equal_hfs(policy):
    budgets = [5, 12, 9]
    got = policy.generate(OBS, GREEDY, budgets=budgets)
    want = _hf(policy, OBS, GREEDY, budgets=budgets)
    for obs, a, b, budget in zip(OBS, got, want, budgets):
        assert a.completion_ids == b.completion_ids
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
        assert a.text == b.text and a.truncated == b.truncated
        assert 1 <= len(a.completion_ids) <= budget
        assert a.prompt_ids == policy.encode_prompt(obs, 1024)
        assert a.prefix == obs["prefix"] and a.action == obs["prefix"] + a.text


def test_sampled_logprobs_are_the_learners_at_the_temperature(policy):
    bound = SAMPLED_BOUND.get(policy.engine.name, 1e-4)
    for temperature in (0.7, 1.3):
        budgets = [3, 9, 6]
        comps = policy.generate(OBS, SamplingConfig(temperature=temperature), budgets=budgets)
        for c, b in zip(comps, budgets):
            n = len(c.completion_ids)
            assert 1 <= n <= b
            ended = c.completion_ids[-1] in policy.eos_ids
            assert c.truncated == (not ended and n == b)
        assert max(_gap(policy, comps, temperature)) < bound


def test_stop_strings_and_a_forced_eos_end_rows_where_hf_ends_them(policy):
    hf = _hf(policy, OBS, GREEDY, budgets=[16] * 3)
    row = max(range(3), key=lambda r: len(hf[r].completion_ids))
    ids = hf[row].completion_ids
    assert len(ids) >= 6
    # the text of tokens 2..4 as a stop string: the row ends at the token completing it
    stop = policy.tokenizer.decode(ids[2:5], skip_special_tokens=True)
    assert stop and "\ufffd" not in stop
    stops = [()] * 3
    stops[row] = (stop,)
    want = _hf(policy, OBS, GREEDY, budgets=[16] * 3, stops=stops)
    got = policy.generate(OBS, GREEDY, budgets=[16] * 3, stops=stops)
    assert [c.completion_ids for c in got] == [c.completion_ids for c in want]
    assert len(got[row].completion_ids) < len(ids) and stop in got[row].text
    assert got[row].truncated is False
    # an EOS forced into the greedy path: its output row becomes 3x that of hf's first token
    eos = min(policy.eos_ids)
    first = _hf(policy, OBS[:1], GREEDY, budgets=[1])[0].completion_ids[0]
    head = policy.model.get_output_embeddings()
    saved = head.weight[eos].detach().clone()
    with torch.no_grad():
        head.weight[eos] = head.weight[first] * 3.0
    try:
        policy.sync_engine()
        ended = policy.generate(OBS[:1], GREEDY, budgets=[10])[0]
        reference = _hf(policy, OBS[:1], GREEDY, budgets=[10])[0]
    finally:
        with torch.no_grad():
            head.weight[eos] = saved
        policy.sync_engine()
    assert eos in reference.completion_ids  # the construction forced an EOS in hf
    assert ended.completion_ids == reference.completion_ids
    assert ended.completion_ids[-1] == eos and ended.truncated is False


def test_a_sync_after_a_perturbation_changes_the_samples_and_restoring_restores_them(policy):
    def sample():
        policy.sync_engine()
        policy.generator.manual_seed(11)
        comps = policy.generate(OBS, SamplingConfig(temperature=0.7), budgets=[8] * 3)
        return comps, [(c.completion_ids, c.logprobs) for c in comps]

    _, before = sample()
    saved = {n: p.detach().clone() for n, p in policy.model.named_parameters()}
    torch.manual_seed(1)
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    try:
        comps, changed = sample()
        assert changed != before
        # the new samples carry the new weights' log-probs
        assert max(_gap(policy, comps, 0.7)) < SAMPLED_BOUND.get(policy.engine.name, 1e-4)
    finally:
        with torch.no_grad():
            for n, p in policy.model.named_parameters():
                p.copy_(saved[n])
    _, after = sample()
    assert [ids for ids, _ in after] == [ids for ids, _ in before]
    for (_, a), (_, b) in zip(after, before):
        assert a == pytest.approx(b, abs=1e-6)

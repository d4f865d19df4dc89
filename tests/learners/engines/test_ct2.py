"""The ``ct2`` rollout engine (CTranslate2) against ``hf`` on the tiny model, and TIS.

What every engine must do (greedy tokens and log-probs as ``hf``'s, the learner's sampled
log-probs, budgets, stop strings, a forced EOS, weight sync) is checked for ``ct2`` with the
others in ``test_engine_contract.py``; here is what is ``ct2``'s own. Every test that runs
CTranslate2 skips with a reason when ``ctranslate2`` is not installed
(``pip install ctranslate2==4.8.5``); the config, preflight and TIS tests run without it.
"""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from learners.engines import RolloutConfig, engine_spec, make_engine
from learners.policy import HFPolicy, LoRAConfig, SamplingConfig

needs_ct2 = pytest.mark.skipif(
    importlib.util.find_spec("ctranslate2") is None,
    reason="ctranslate2 is not installed (pip install ctranslate2==4.8.5)",
)

OBS = [
    {"system": "You plan.", "user": "Plan task 1.", "prefix": "<plan>"},
    {"system": "You solve.", "user": "Solve 2 + 2, please, with care.", "prefix": ""},
    {"system": "You review.", "user": "Score it.", "prefix": "<score>"},
]


@pytest.fixture()
def ct2_policy(tiny_path):
    return HFPolicy(tiny_path, device="cpu", seed=0, rollout="ct2")


def _hf(policy, obs, sampling, **kw):
    policy.use_engine("hf")
    try:
        return policy.generate(obs, sampling, **kw)
    finally:
        policy.use_engine("ct2")


def test_ct2_config_is_validated_and_missing_ctranslate2_is_a_one_line_error(
    monkeypatch, tmp_path, tiny_path
):
    assert RolloutConfig(engine="ct2").ct2_compute_type == "float32"
    with pytest.raises(ValueError, match="ct2_compute_type must be one of float32, int8"):
        RolloutConfig(engine="ct2", ct2_compute_type="float16")
    with pytest.raises(ValueError, match="ct2_threads must be >= 0"):
        RolloutConfig(engine="ct2", ct2_threads=-1)
    monkeypatch.setitem(sys.modules, "ctranslate2", None)
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "ctranslate2" else real(name, *a),
    )
    with pytest.raises(ImportError) as info:
        make_engine(object(), "ct2")
    missing = engine_spec("ct2").missing
    assert str(info.value) == missing and "\n" not in missing
    from learners.policy.model_check import PreflightError
    from learners.training.loop import TrainConfig
    from learners.training.preflight import check_train

    cfg = TrainConfig(model=tiny_path, out=str(tmp_path / "r"), rollout=RolloutConfig(engine="ct2"))
    with pytest.raises(PreflightError) as info:
        check_train(cfg)
    assert str(info.value) == (
        "--rollout.engine ct2 needs the ctranslate2 package, which is not installed: "
        "pip install ctranslate2==4.8.5"
    )


@pytest.mark.slow
@needs_ct2
def test_ct2_converts_a_model_per_temperature_and_a_sync_keeps_the_last_used(ct2_policy):
    # the learner's log-probs of these samples: test_engine_contract.py
    for temperature in (0.7, 1.3):
        ct2_policy.generate(OBS, SamplingConfig(temperature=temperature), budgets=[3, 9, 6])
    assert sorted(ct2_policy.engine._generators) == [0.7, 1.3]  # one per temperature
    ct2_policy.sync_engine()  # converts the last one used; the others wait for their next use
    assert sorted(ct2_policy.engine._generators) == [1.3]


@pytest.mark.slow
@needs_ct2
@pytest.mark.parametrize("compute_type", ["int8", "int8_float32"])
def test_ct2_int8_samples_the_model_quantised_not_a_broken_one(tiny_path, compute_type):
    # int8 samples a quantised copy: the trainer's own weights stay bitwise as they were (the
    # converter once quantised them in place), and the engine's log-probs of its own tokens
    # stay near the float32 learner's
    policy = HFPolicy(
        tiny_path, device="cpu", seed=0, rollout=RolloutConfig("ct2", ct2_compute_type=compute_type)
    )
    before = {n: p.detach().clone() for n, p in policy.model.named_parameters()}
    policy.generate(OBS, SamplingConfig(do_sample=False), budgets=[4, 4, 4])  # T = 1: tied head
    comps = policy.generate(OBS, SamplingConfig(temperature=0.7), budgets=[24, 24, 24])
    for name, p in policy.model.named_parameters():
        assert torch.equal(p.detach(), before[name]), name
    logp, mask = policy.token_logprobs(
        [c.prompt_ids for c in comps], [c.completion_ids for c in comps], 0.7
    )
    engine = torch.zeros_like(logp)
    for row, c in enumerate(comps):
        engine[row, : len(c.logprobs)] = torch.tensor(c.logprobs)
    gap = float(((logp - engine).abs() * mask).sum() / mask.sum())
    assert 0 < gap < 0.05, gap


@needs_ct2
def test_ct2_samples_are_fixed_by_the_policy_seed(tiny_path):
    runs = []
    for _ in range(2):
        policy = HFPolicy(tiny_path, device="cpu", seed=7, rollout="ct2")
        runs.append(
            [c.completion_ids for c in policy.generate(OBS, SamplingConfig(), budgets=[8] * 3)]
        )
    assert runs[0] == runs[1]


@needs_ct2
def test_ct2_min_new_tokens_holds_back_eos(ct2_policy):
    greedy = SamplingConfig(do_sample=False, min_new_tokens=6)
    eos = min(ct2_policy.eos_ids)
    with torch.no_grad():
        ct2_policy.model.get_output_embeddings().weight[eos] += 5.0
    ct2_policy.sync_engine()
    ct = ct2_policy.generate(OBS, greedy, budgets=[8] * 3)
    hf = _hf(ct2_policy, OBS, greedy, budgets=[8] * 3)
    assert [c.completion_ids for c in ct] == [c.completion_ids for c in hf]
    assert all(len(c.completion_ids) >= 6 for c in ct)


@pytest.mark.slow
@needs_ct2
def test_ct2_samples_the_weights_of_the_last_sync(ct2_policy):
    greedy = SamplingConfig(do_sample=False)
    before = ct2_policy.generate(OBS, greedy, budgets=[6] * 3)
    torch.manual_seed(1)
    with torch.no_grad():
        for p in ct2_policy.model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    stale = ct2_policy.generate(OBS, greedy, budgets=[6] * 3)
    assert [c.logprobs for c in stale] == [c.logprobs for c in before]  # not synced yet
    syncs = ct2_policy.engine.syncs
    ct2_policy.sync_engine()
    assert ct2_policy.engine.syncs == syncs + 1 and ct2_policy.engine.sync_seconds > 0
    fresh = ct2_policy.generate(OBS, greedy, budgets=[6] * 3)
    hf = _hf(ct2_policy, OBS, greedy, budgets=[6] * 3)
    assert [c.completion_ids for c in fresh] == [c.completion_ids for c in hf]
    # perturbed weights, sharper logits: float32 rounding grows (1.05e-4 in one full-suite run,
    # 2026-12-04; a stale model differs by far more, and the tokens above are compared exactly)
    for a, b in zip(fresh, hf):
        assert a.logprobs == pytest.approx(b.logprobs, abs=5e-4)
    # the trainer's model is intact after conversions (CTranslate2's loaders delete modules)
    assert all(hasattr(layer, "self_attn") for layer in ct2_policy.model.model.layers)


@pytest.mark.slow
@needs_ct2
def test_ct2_samples_the_lora_model_merged(tiny_path):
    policy = HFPolicy(tiny_path, device="cpu", seed=3, rollout="ct2")
    policy.enable_lora(LoRAConfig(r=4))
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    base = {n: p.clone() for n, p in policy.model.named_parameters() if "lora_" not in n}
    policy.sync_engine()
    comps = policy.generate(OBS, SamplingConfig(temperature=0.7), budgets=[5, 8, 6])
    logp, _ = policy.token_logprobs(
        [c.prompt_ids for c in comps], [c.completion_ids for c in comps], 0.7
    )
    for row, c in enumerate(comps):
        n = len(c.completion_ids)
        assert torch.allclose(logp[row, :n], torch.tensor(c.logprobs), atol=1e-5)
    for n, p in policy.model.named_parameters():
        if "lora_" not in n:
            assert torch.equal(p, base[n])


@pytest.mark.slow
@needs_ct2
def test_ct2_trains_through_the_loop_with_a_logprob_gap_and_sync_time(tiny_path, tmp_path):
    from learners.algorithms.pg import PGConfig
    from learners.reports.plots import read_metrics
    from learners.training.loop import TrainConfig, train

    cfg = TrainConfig(
        model=tiny_path,
        out=str(tmp_path / "ct2"),
        steps=2,
        rounds_per_step=2,
        device="cpu",
        max_new_tokens=8,
        temperature=0.7,
        rollout=RolloutConfig(engine="ct2"),
        # a KL term forwards every sequence (no zero-advantage skip), so every step measures
        learner=PGConfig(kl_coef=0.01, gradient_checkpointing=False),
    )
    train(cfg, progress=False)
    rows = [r for r in read_metrics(Path(cfg.out) / "metrics.jsonl") if r["step"] >= 1]
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        assert row["rollout/tokens"] > 0 and row["learner/num_sequences"] > 0
        assert 0 <= row["rollout/logprob_gap"] < 1e-4  # float32: the learner's own numbers
        assert row["rollout/logprob_gap"] <= row["rollout/logprob_gap_max"] < 1e-3
        assert row["time/weight_sync_s"] > 0
        assert row["rollout/rows_per_call"] >= 1


# ----------------------------------------------------------------------------- TIS


def _learner(tiny_path, **config):
    from learners.algorithms.pg import PGConfig
    from learners.algorithms.trr import TRRLearner

    policy = HFPolicy(tiny_path, device="cpu", seed=0)
    cfg = PGConfig(lr=1e-3, gradient_checkpointing=False, **config)
    return policy, TRRLearner(policy, cfg, temperature=1.0, seed=0)


def _transitions(policy, shift=0.0):
    from learners.types import Transition

    comps = policy.generate(OBS * 2, SamplingConfig(), budgets=[6] * 6)
    out = []
    for j, c in enumerate(comps):
        out.append(
            Transition(
                agent="solver_0",
                role="solver",
                domain="math",
                phase="solve",
                prompt_ids=c.prompt_ids,
                completion_ids=c.completion_ids,
                logprobs=[x + shift for x in c.logprobs],
                text=c.text,
                reward=float(j),
            )
        )
    return out


def test_tis_cap_is_validated():
    from learners.algorithms.pg import PGConfig

    assert PGConfig().tis_cap == 0.0
    with pytest.raises(ValueError, match="tis_cap must be >= 0"):
        PGConfig(tis_cap=-1.0)


def test_logprob_gap_is_the_engine_learner_difference_and_tis_weights_it(tiny_path):
    # engine log-probs lowered by 0.3 nats: the gap is 0.3, the TIS weight min(e^0.3, cap)
    for cap, minibatches in ((0.0, 1), (1.2, 1), (1.2, 2), (5.0, 1)):
        policy, learner = _learner(tiny_path, tis_cap=cap, num_minibatches=minibatches)
        batch = _transitions(policy, shift=-0.3)
        learner.observe(batch)
        m = learner.update()
        assert m["logprob_gap_mean"] == pytest.approx(0.3, abs=1e-4)
        assert m["logprob_gap_max"] == pytest.approx(0.3, abs=1e-4)
        if cap:
            expect = min(float(torch.tensor(0.3).exp()), cap)
            assert m["tis_weight_mean"] == pytest.approx(expect, rel=1e-4)
        else:
            assert "tis_weight_mean" not in m


def test_tis_with_the_learners_own_logprobs_is_the_plain_update(tiny_path):
    grads = []
    for cap in (0.0, 2.0):
        policy, learner = _learner(tiny_path, tis_cap=cap)
        learner.observe(_transitions(policy))
        m = learner.update()
        assert m["logprob_gap_mean"] < 1e-5
        # gradients, not AdamW's step (it normalises, so a near-zero gradient's rounding
        # flips a whole lr-sized step)
        grads.append([p.grad.detach().clone() for p in policy.trainable_parameters()])
    for a, b in zip(*grads):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-4)


def test_length_groups_batch_rows_of_similar_prompt_length():
    from learners.engines import length_groups

    # two clusters of lengths far apart: two groups, each sorted, every row once
    lengths = [300, 20, 305, 22, 310, 25]
    groups = length_groups(lengths, [50] * 6, batch_size=8)
    assert groups == [[1, 3, 5], [0, 2, 4]]
    # equal lengths: one batch, up to batch_size rows
    assert length_groups([100] * 5, [50] * 5, batch_size=8) == [[0, 1, 2, 3, 4]]
    assert sorted(len(g) for g in length_groups([100] * 5, [50] * 5, batch_size=2)) == [1, 2, 2]
    assert length_groups([], [], batch_size=4) == []


def test_worker_shares_give_the_longest_batches_first_to_the_least_loaded_worker():
    from learners.engines.ct2_engine import worker_shares

    lengths = [10, 10, 100, 200, 300]
    budgets = [50, 50, 10, 10, 10]
    groups = [[0, 1], [2], [3], [4]]  # estimated costs 65, 10, 10, 10
    assert worker_shares(groups, lengths, budgets, 2) == [[[0, 1]], [[2], [3], [4]]]
    assert worker_shares(groups, lengths, budgets, 1) == [[[0, 1], [2], [3], [4]]]
    assert worker_shares([], [], [], 2) == [[], []]
    with pytest.raises(ValueError, match="ct2_workers must be >= 1"):
        RolloutConfig(engine="ct2", ct2_workers=0)


# prompts far apart in length: length_groups makes several batches, which two workers share
MIXED = [
    {"system": "You plan.", "user": "Plan task 1.", "prefix": "<plan>"},
    {"system": "You solve.", "user": "Solve 2 + 2. " + "Show every step with care. " * 40,
     "prefix": ""},
    {"system": "You review.", "user": "Score it.", "prefix": "<score>"},
    {"system": "You solve.", "user": "Solve 3 + 5. " + "Explain it. " * 90, "prefix": ""},
]


@pytest.mark.slow
@needs_ct2
def test_ct2_parallel_workers_return_hfs_greedy_tokens_and_seeded_samples(tiny_path):
    from learners.engines import length_groups

    policy = HFPolicy(tiny_path, device="cpu", seed=3, rollout=RolloutConfig("ct2", ct2_workers=2))
    lengths = [len(policy.encode_prompt(o, 2048)) for o in MIXED]
    assert len(length_groups(lengths, [10] * 4, 32)) >= 2  # the workers both get batches
    greedy = SamplingConfig(do_sample=False)
    stops = [(), ("e",), (), ()]
    got = policy.generate(MIXED, greedy, budgets=[10] * 4, stops=stops)
    assert len(policy.engine._generators[1.0]) == 2  # two generators, one per worker
    want = _hf(policy, MIXED, greedy, budgets=[10] * 4, stops=stops)
    assert [c.completion_ids for c in got] == [c.completion_ids for c in want]
    assert [c.truncated for c in got] == [c.truncated for c in want]
    for a, b in zip(got, want):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
    runs = []
    for _ in range(2):  # a seed fixes the samples of every worker, call after call
        p = HFPolicy(tiny_path, device="cpu", seed=5, rollout=RolloutConfig("ct2", ct2_workers=2))
        runs.append(
            [[c.completion_ids for c in p.generate(MIXED, SamplingConfig(), budgets=[8] * 4)]
             for _ in range(2)]
        )
    assert runs[0] == runs[1]


# ------------------------------------------------------- one converted model at a time


def _keep_every_model(monkeypatch):
    """The engine as it was before issue 23: a model per temperature until the next sync."""
    from learners.engines.ct2_engine import CT2Engine

    monkeypatch.setattr(CT2Engine, "_drop_unsampled", lambda self: None)


def _greedy_then_sample(tiny_path):
    policy = HFPolicy(tiny_path, device="cpu", seed=4, rollout="ct2")
    sample, greedy = SamplingConfig(temperature=0.7), SamplingConfig(do_sample=False)
    out = [policy.generate(OBS, sample, budgets=[6] * 3)]
    policy.sync_engine()  # as the loop: sync, then validate (greedy), then the next rollout
    loaded = [sorted(policy.engine._generators)]
    out.append(policy.generate(OBS, greedy, budgets=[6] * 3))
    loaded.append(sorted(policy.engine._generators))
    out.append(policy.generate(OBS, sample, budgets=[6] * 3))
    loaded.append(sorted(policy.engine._generators))
    # a greedy model reloaded after it was dropped, then sampling at its temperature
    out.append(policy.generate(OBS, greedy, budgets=[6] * 3))
    out.append(policy.generate(OBS, SamplingConfig(temperature=1.0), budgets=[6] * 3))
    loaded.append(sorted(policy.engine._generators))
    ids = [[(c.completion_ids, c.logprobs) for c in comps] for comps in out]
    return ids, loaded, policy.engine.syncs


@pytest.mark.slow
@needs_ct2
def test_ct2_greedy_call_after_a_sync_replaces_the_unused_model_with_the_same_results(
    tiny_path, monkeypatch
):
    new, loaded, syncs = _greedy_then_sample(tiny_path)
    # validation after a sync: the fresh 0.7 model is dropped, not kept beside the greedy one
    assert loaded == [[0.7], [1.0], [0.7], [0.7, 1.0]]
    with monkeypatch.context() as m:
        _keep_every_model(m)
        old, old_loaded, old_syncs = _greedy_then_sample(tiny_path)
    assert old_loaded == [[0.7], [0.7, 1.0], [0.7, 1.0], [0.7, 1.0]]
    # the same tokens and log-probs: the dropped models are reconverted (two more
    # conversions) and reseeded with the seeds they had, greedy decoding draws nothing
    assert new == old
    assert syncs == old_syncs + 2


@pytest.mark.slow
@needs_ct2
def test_ct2_validating_loop_never_converts_beside_another_converted_model(
    tiny_path, tmp_path, monkeypatch
):
    from learners.engines.ct2_engine import CT2Engine
    from learners.reports.plots import read_metrics
    from learners.training.loop import TrainConfig, train

    loaded_at_conversion: list[list[float]] = []
    convert = CT2Engine._convert

    def spy(self, temperature):
        loaded_at_conversion.append(sorted(self._generators))
        return convert(self, temperature)

    monkeypatch.setattr(CT2Engine, "_convert", spy)
    cfg = TrainConfig(
        model=tiny_path,
        out=str(tmp_path / "val"),
        steps=2,
        rounds_per_step=2,
        device="cpu",
        max_new_tokens=8,
        temperature=0.7,
        val_every=1,
        val_limit=2,
        val_max_new_tokens=8,
        report_to="none",
        rollout=RolloutConfig(engine="ct2"),
    )
    train(cfg, progress=False)
    rows = read_metrics(Path(cfg.out) / "metrics.jsonl")
    assert [r["step"] for r in rows if "val/accuracy" in r] == [0, 1, 2]
    # per step: the sync, validation's greedy model, the sampling model again at the next
    # rollout; each converted with no other model loaded (one converted copy at a time)
    assert len(loaded_at_conversion) >= 6
    assert all(loaded == [] for loaded in loaded_at_conversion)


@pytest.mark.slow
@needs_ct2
def test_ct2_validating_run_resumed_samples_as_the_uninterrupted_one(tiny_path, tmp_path):
    import dataclasses

    from learners.reports.plots import read_metrics
    from learners.training.loop import TrainConfig, train

    def cfg(out, steps, resume=False):
        return TrainConfig(
            model=tiny_path,
            out=str(tmp_path / out),
            steps=steps,
            rounds_per_step=2,
            device="cpu",
            max_new_tokens=8,
            temperature=0.7,
            val_every=1,
            val_limit=2,
            val_max_new_tokens=8,
            report_to="none",
            resume=resume,
            rollout=RolloutConfig(engine="ct2"),
        )

    train(cfg("straight", 3), progress=False)
    train(cfg("split", 2), progress=False)
    train(dataclasses.replace(cfg("split", 3), resume=True), progress=False)

    def row(out):
        rows = read_metrics(tmp_path / out / "metrics.jsonl")
        last = [r for r in rows if r["step"] == 3][-1]
        timed = ("time/", "memory/", "rollout/tokens_per_s")
        return {k: v for k, v in last.items() if not k.startswith(timed)}

    assert row("split") == row("straight")


# ------------------------------------------------- no converted model during the update


def _sample_release_sync(tiny_path, release):
    policy = HFPolicy(tiny_path, device="cpu", seed=5, rollout="ct2")
    sample, greedy = SamplingConfig(temperature=0.7), SamplingConfig(do_sample=False)
    out = [policy.generate(OBS, sample, budgets=[6] * 3)]
    if release:  # as the loop: rollout, release, update (nothing here), sync
        policy.release_engine()
        assert policy.engine._generators == {}
        with pytest.raises(RuntimeError, match="released after it sampled"):
            policy.generate(OBS, sample, budgets=[6] * 3)
    policy.sync_engine()
    out.append(policy.generate(OBS, greedy, budgets=[6] * 3))
    if release:  # an unsampled model comes back with its seeds: the same greedy tokens
        policy.release_engine()
    out.append(policy.generate(OBS, greedy, budgets=[6] * 3))
    out.append(policy.generate(OBS, sample, budgets=[6] * 3))
    ids = [[(c.completion_ids, c.logprobs) for c in comps] for comps in out]
    return ids, policy.engine.syncs


@pytest.mark.slow
@needs_ct2
def test_ct2_release_before_a_sync_gives_the_same_tokens_and_no_extra_conversion(tiny_path):
    released, released_syncs = _sample_release_sync(tiny_path, release=True)
    kept, kept_syncs = _sample_release_sync(tiny_path, release=False)
    assert released == kept
    # the greedy model released between two greedy calls is converted once more; the
    # release before the sync costs nothing
    assert released_syncs == kept_syncs + 1


def test_engines_without_a_copy_release_nothing(tiny_path):
    policy = HFPolicy(tiny_path, device="cpu", seed=0)
    policy.release_engine()  # hf: a no-op
    policy.engine = object()  # an engine registered elsewhere, without release()
    policy.release_engine()


@pytest.mark.slow
@needs_ct2
def test_ct2_loop_holds_no_converted_model_during_the_update_and_trains_the_same(
    tiny_path, tmp_path, monkeypatch
):
    from learners.algorithms.pg import PolicyGradientLearner
    from learners.engines.ct2_engine import CT2Engine
    from learners.reports.plots import read_metrics
    from learners.training.loop import TrainConfig, train
    from learners.training.monitors import CriticProbe
    from sage_env.config import EnvConfig, RewardConfig

    held: list[list[float]] = []
    probed: list[list[float]] = []
    conversions: list[float] = []
    update, convert, probe = PolicyGradientLearner.update, CT2Engine._convert, CriticProbe.__call__

    def update_spy(self):
        held.append(sorted(self.policy.engine._generators))
        return update(self)

    def probe_spy(self, policy, envs):
        probed.append(sorted(policy.engine._generators))
        return probe(self, policy, envs)

    def convert_spy(self, temperature):
        conversions.append(temperature)
        return convert(self, temperature)

    monkeypatch.setattr(PolicyGradientLearner, "update", update_spy)
    monkeypatch.setattr(CT2Engine, "_convert", convert_spy)
    monkeypatch.setattr(CriticProbe, "__call__", probe_spy)

    def run(out):
        cfg = TrainConfig(
            model=tiny_path,
            out=str(tmp_path / out),
            steps=3,
            rounds_per_step=2,
            device="cpu",
            max_new_tokens=8,
            temperature=0.7,
            val_every=2,
            val_limit=2,
            val_max_new_tokens=8,
            critic_probe_size=4,  # read from score distributions: no generate call
            env=EnvConfig(rewards=RewardConfig(critic_score_estimate="expected")),
            report_to="none",
            rollout=RolloutConfig(engine="ct2"),
        )
        train(cfg, progress=False)
        timed = ("time/", "memory/", "rollout/tokens_per_s")
        rows = read_metrics(Path(cfg.out) / "metrics.jsonl")
        return [{k: v for k, v in r.items() if not k.startswith(timed)} for r in rows]

    released = run("released")
    # every update ran with no converted model, so did the critic probes of steps 2 and 3
    # (step 0's keeps the synced model, which validation at the start uses next)
    assert held == [[]] * 3 and probed == [[1.0], [], []]
    released_conversions = list(conversions)
    held[:], probed[:], conversions[:] = [], [], []
    with monkeypatch.context() as m:
        m.setattr(CT2Engine, "release", lambda self: None)  # the engine before the release
        kept = run("kept")
    assert held == [[0.7]] * 3 and probed == [[1.0], [1.0], [0.7]]
    assert released == kept  # the same tokens, rewards, losses and validation accuracy
    assert released_conversions == conversions  # and no conversion added


@needs_ct2
@pytest.mark.parametrize("compute_type", ["int8", "int8_float32"])
def test_quantised_ct2_decodes_greedy_calls_in_float32(tiny_path, compute_type):
    # validation and held-out scoring are greedy: they measure the trained weights, not their
    # int8 copy, unless ct2_greedy_float32 is turned off; sampling stays quantised
    def policy(**kw):
        return HFPolicy(tiny_path, device="cpu", seed=0, rollout=RolloutConfig("ct2", **kw))

    greedy = SamplingConfig(do_sample=False)
    f32 = policy().generate(OBS, greedy, budgets=[12] * 3)
    quant = policy(ct2_compute_type=compute_type)
    got = quant.generate(OBS, greedy, budgets=[12] * 3)
    assert [c.completion_ids for c in got] == [c.completion_ids for c in f32]
    assert [c.logprobs for c in got] == [c.logprobs for c in f32]
    # its sampled calls still decode the quantised model: log-probs off the learner's
    sampled = quant.generate(OBS, SamplingConfig(temperature=0.7), budgets=[12] * 3)
    logp, mask = quant.token_logprobs(
        [c.prompt_ids for c in sampled], [c.completion_ids for c in sampled], 0.7
    )
    engine = torch.zeros_like(logp)
    for row, c in enumerate(sampled):
        engine[row, : len(c.logprobs)] = torch.tensor(c.logprobs)
    assert float(((logp - engine).abs() * mask).sum() / mask.sum()) > 1e-4
    # and greedy calls again after sampling: still the float32 model's
    again = quant.generate(OBS, greedy, budgets=[12] * 3)
    assert [c.logprobs for c in again] == [c.logprobs for c in f32]
    # opted out: greedy calls decode the quantised model too
    old = policy(ct2_compute_type=compute_type, ct2_greedy_float32=False).generate(
        OBS, greedy, budgets=[12] * 3
    )
    flat = [x for c in old for x in c.logprobs]
    ref = [x for c in f32 for x in c.logprobs]
    assert flat != ref

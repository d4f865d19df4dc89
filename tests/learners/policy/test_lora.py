"""LoRA through peft: only adapters train, the KL reference is the base with adapters off,
checkpoints hold the adapter and resume bit for bit, and the export merges it."""

import dataclasses
import json

import pytest
import torch

from learners.algorithms.registry import register_learner
from learners.cli import main
from learners.policy import HFPolicy, LoRAConfig, SamplingConfig
from learners.policy.logprobs import token_logprobs
from learners.types import Transition
from learners.training.config import config_from_dict
from learners.training.loop import TrainConfig, train
from learners.algorithms.pg_config import PGConfig
from learners.algorithms.trr import TRRLearner
from sage_env import EnvConfig

LORA = LoRAConfig(r=4, alpha=16.0)


def _transitions(policy, n=4, rewards=(1.0, 0.0, 1.0, 0.0)):
    comps = policy.generate(
        [{"system": "s", "user": f"q{i}"} for i in range(n)], SamplingConfig(max_new_tokens=8)
    )
    return [
        Transition(
            "solver_0",
            "solver",
            "math",
            "solve",
            c.prompt_ids,
            c.completion_ids,
            c.logprobs,
            c.text,
            reward=r,
        )
        for c, r in zip(comps, rewards)
    ]


def _logprobs(model, policy, trs):
    with torch.no_grad():
        lp, _ = token_logprobs(
            model,
            [t.prompt_ids for t in trs],
            [t.completion_ids for t in trs],
            policy.tokenizer.pad_token_id,
        )
    return lp


def test_lora_update_changes_only_adapter_weights(tiny_path):
    policy = HFPolicy(tiny_path, device="cpu", seed=0)
    base = {n: p.detach().clone() for n, p in policy.model.named_parameters()}
    trs = _transitions(policy)
    cfg = PGConfig(lr=1e-2, kl_coef=0.1, gradient_checkpointing=True, lora=LORA)
    learner = TRRLearner(policy, cfg)
    assert policy.lora == LORA
    names = [n for n, p in policy.model.named_parameters() if p.requires_grad]
    assert names and all(".lora_A." in n or ".lora_B." in n for n in names)
    assert len(learner.params) == len(names)  # the optimiser holds the adapters only
    for _ in range(2):
        learner.observe(trs)
        learner.update()
    changed, adapters = [], 0
    for name, p in policy.model.named_parameters():
        if "lora_" in name:
            adapters += 1
            continue
        # peft names a wrapped layer's weight ...q_proj.base_layer.weight
        plain = name.removeprefix("base_model.model.").replace(".base_layer.", ".")
        if not torch.equal(p, base[plain]):
            changed.append(name)
    assert adapters == len(names) and not changed
    lora_b = [p for n, p in policy.model.named_parameters() if "lora_B" in n]
    assert any(p.abs().sum() > 0 for p in lora_b)  # B starts at 0; the update moved it


def test_kl_reference_is_the_base_with_adapters_disabled(tiny_path):
    plain = HFPolicy(tiny_path, device="cpu", seed=0)
    policy = HFPolicy(tiny_path, device="cpu", seed=0)
    n_base = sum(p.numel() for p in policy.model.parameters())
    trs = _transitions(policy)
    learner = TRRLearner(
        policy, PGConfig(lr=1e-2, kl_coef=0.1, gradient_checkpointing=False, lora=LORA)
    )
    for _ in range(2):
        learner.observe(trs)
        metrics = learner.update()
    assert metrics["kl"] > 0  # the second update sees adapters that moved
    prompts, comps = [t.prompt_ids for t in trs], [t.completion_ids for t in trs]
    ref, mask = policy.reference_logprobs(prompts, comps)
    assert torch.allclose(ref, _logprobs(plain.model, plain, trs), atol=1e-6)
    with torch.no_grad():
        now, _ = policy.token_logprobs(prompts, comps)
    assert ((now - ref).abs() * mask).max() > 1e-3  # the adapters are on outside the context
    # no second copy: the model is the base plus the adapters, and nothing else is kept
    n_lora = sum(p.numel() for p in learner.params)
    assert sum(p.numel() for p in policy.model.parameters()) == n_base + n_lora
    assert policy._reference is None


class _SignLearner(TRRLearner):
    """Advantages +1/-1 by position: a random tiny model's rewards have no spread, and the
    adapters must move for resume and export to be tested on something."""

    name = "test_sign"

    def advantages(self, batch):
        return [1.0 if i % 2 else -1.0 for i in range(len(batch))]


register_learner(_SignLearner.name, _SignLearner, overwrite=True)


def _train_cfg(tiny_path, out, steps, **kw):
    return TrainConfig(
        algorithm=_SignLearner.name,
        model=tiny_path,
        out=str(out),
        steps=steps,
        rounds_per_step=1,
        max_new_tokens=8,
        device="cpu",
        env=EnvConfig(solver_samples=1, domains=("math",)),  # no sandbox: rewards exact
        learner=PGConfig(lr=1e-2, kl_coef=0.05, gradient_checkpointing=False, lora=LORA),
        **kw,
    )


def _rows(out):
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    timing = ("time/", "memory/", "rollout/tokens_per_s")  # wall clock, not the run's state
    return [{k: v for k, v in r.items() if not k.startswith(timing)} for r in rows]


def _adapter(out, step):
    from safetensors.torch import load_file

    return load_file(
        str(out / "checkpoints" / f"step_{step:06d}" / "model" / "adapter_model.safetensors")
    )


@pytest.mark.slow
def test_lora_resume_is_bit_identical_and_export_reproduces_logprobs(tiny_path, tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    train(_train_cfg(tiny_path, straight, 3), progress=False)
    train(_train_cfg(tiny_path, resumed, 2), progress=False)
    model_dir = resumed / "checkpoints" / "step_000002" / "model"
    assert (model_dir / "adapter_model.safetensors").exists()
    assert not (model_dir / "model.safetensors").exists()  # the adapter, not the base
    train(_train_cfg(tiny_path, resumed, 3, resume=True), progress=False)
    assert _rows(straight) == _rows(resumed)
    a, b = _adapter(straight, 3), _adapter(resumed, 3)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    out = tmp_path / "merged"
    assert main(["export", "--run", str(straight), "--out", str(out)]) == 0
    assert not (out / "adapter_config.json").exists()
    from transformers import AutoModelForCausalLM

    merged = AutoModelForCausalLM.from_pretrained(out)  # plain transformers, no peft
    adapted = HFPolicy(tiny_path, device="cpu", lora=LORA)
    adapted.load_weights(straight / "checkpoints" / "step_000003" / "model")
    trs = _transitions(adapted)
    with torch.no_grad():
        want, mask = adapted.token_logprobs(
            [t.prompt_ids for t in trs], [t.completion_ids for t in trs]
        )
    got = _logprobs(merged, adapted, trs)
    assert ((got - want).abs() * mask).max() < 1e-4
    base = HFPolicy(tiny_path, device="cpu")
    assert ((_logprobs(base.model, base, trs) - want).abs() * mask).max() > 1e-3
    assert main(["export", "--run", str(straight), "--out", str(out)]) == 2  # not empty


@pytest.mark.slow
def test_lora_after_warmup_keeps_the_warmed_base(tiny_path, tmp_path, monkeypatch):
    from learners.training.warmup import WarmupConfig

    monkeypatch.setenv("SAGE_ENV_CACHE", str(tmp_path / "cache"))
    warm = WarmupConfig(steps=2, batch_size=2, num_demonstrations=4, lr=1e-2, cache=False)
    out = tmp_path / "run"
    train(_train_cfg(tiny_path, out, 1, warmup=warm), progress=False)
    assert (out / "base" / "model.safetensors").exists()
    adapter_cfg = json.loads(
        (out / "checkpoints" / "step_000001" / "model" / "adapter_config.json").read_text()
    )
    assert adapter_cfg["base_model_name_or_path"] == str(out / "base")
    train(_train_cfg(tiny_path, out, 2, warmup=warm, resume=True), progress=False)
    exported = tmp_path / "merged"
    assert main(["export", "--run", str(out), "--out", str(exported)]) == 0
    from transformers import AutoModelForCausalLM

    merged = AutoModelForCausalLM.from_pretrained(exported)
    adapted = HFPolicy(str(out / "base"), device="cpu", lora=LORA)
    adapted.load_weights(out / "checkpoints" / "step_000002" / "model")
    trs = _transitions(adapted)
    with torch.no_grad():
        want, mask = adapted.token_logprobs(
            [t.prompt_ids for t in trs], [t.completion_ids for t in trs]
        )
    assert ((_logprobs(merged, adapted, trs) - want).abs() * mask).max() < 1e-4


def test_lora_config_from_yaml_and_bad_values():
    cfg = config_from_dict({"learner": {"lora": {"r": 8, "target_modules": ["q_proj", "v_proj"]}}})
    assert cfg.learner.lora == LoRAConfig(r=8, target_modules=("q_proj", "v_proj"))
    assert TrainConfig().learner.lora.enabled is False  # off by default
    with pytest.raises(ValueError, match="lora"):
        config_from_dict({"learner": {"lora": {"r": -1}}})
    with pytest.raises(ValueError, match="lora"):
        LoRAConfig(r=4, dropout=1.0)
    grpo = config_from_dict({"algorithm": "ema", "learner": {"lora": {"r": 2}}})
    assert grpo.learner.lora.r == 2 and dataclasses.is_dataclass(grpo.learner.lora)


def test_adapter_checkpoint_needs_a_lora_policy(tiny_path, tmp_path):
    policy = HFPolicy(tiny_path, device="cpu", lora=LORA)
    policy.save(tmp_path / "adapter")
    with pytest.raises(RuntimeError, match="LoRA adapter"):
        HFPolicy(tiny_path, device="cpu").load_weights(tmp_path / "adapter")
    HFPolicy(tiny_path, device="cpu").save(tmp_path / "full")
    with pytest.raises(RuntimeError, match="full model weights"):
        policy.load_weights(tmp_path / "full")
    other = HFPolicy(tiny_path, device="cpu", lora=LoRAConfig(r=2))
    with pytest.raises(RuntimeError):
        other.load_weights(tmp_path / "adapter")
    with pytest.raises(ValueError, match="already has LoRA|asks for"):
        TRRLearner(policy, PGConfig(lora=LoRAConfig(r=8), gradient_checkpointing=False))

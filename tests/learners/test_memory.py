"""``learners.memory.release_memory`` (glibc's ``malloc_trim(0)``, a no-op elsewhere) and the
low-memory optimiser option ``--learner.optimizer adamw8bit`` (bitsandbytes)."""

import importlib.util
import sys

import pytest

from learners import memory


def test_release_memory_trims_on_glibc_and_is_a_no_op_elsewhere(monkeypatch):
    memory._malloc_trim.cache_clear()
    try:
        glibc = sys.platform.startswith("linux") and memory._malloc_trim() is not None
        assert memory.release_memory() is glibc
        memory._malloc_trim.cache_clear()
        monkeypatch.setattr(memory.sys, "platform", "darwin")
        assert memory._malloc_trim() is None
        assert memory.release_memory() is False
    finally:
        memory._malloc_trim.cache_clear()


# ------------------------------------------------------- --learner.optimizer adamw8bit

needs_bnb = pytest.mark.skipif(
    importlib.util.find_spec("bitsandbytes") is None,
    reason="bitsandbytes is not installed (pip install 'sage-env[lowmem]')",
)


def test_optimizer_option_is_validated_and_a_missing_bitsandbytes_is_named(monkeypatch):
    from learners.algorithms import optimizers
    from learners.algorithms.pg_config import PGConfig

    with pytest.raises(ValueError, match="optimizer must be adamw or adamw8bit"):
        PGConfig(optimizer="sgd")
    assert optimizers.optimizer_problems("adamw") == []
    monkeypatch.setattr(optimizers.importlib.util, "find_spec", lambda name: None)
    assert optimizers.optimizer_problems("adamw8bit") == [optimizers.BNB_MISSING]


def test_adamw_is_torchs_adamw_with_the_configs_settings():
    import torch

    from learners.algorithms.optimizers import make_optimizer
    from learners.algorithms.pg_config import PGConfig

    p = torch.nn.Parameter(torch.ones(3))
    opt = make_optimizer([p], PGConfig(lr=1e-3, weight_decay=0.1, adamw_foreach=False))
    assert type(opt) is torch.optim.AdamW
    group = opt.param_groups[0]
    assert (group["lr"], group["weight_decay"], group["foreach"]) == (1e-3, 0.1, False)


@needs_bnb
def test_adamw8bit_keeps_8bit_moments_and_steps_close_to_adamw():
    import torch

    from learners.algorithms.optimizers import make_optimizer
    from learners.algorithms.pg_config import PGConfig

    torch.manual_seed(0)
    init = torch.randn(64, 256)  # 16,384 elements: over bitsandbytes' 4,096 for 8-bit state
    steps = [torch.randn(64, 256) for _ in range(5)]
    moved = {}
    for name in ("adamw", "adamw8bit"):
        p = torch.nn.Parameter(init.clone())
        opt = make_optimizer([p], PGConfig(lr=1e-2, optimizer=name))
        for g in steps:
            p.grad = g.clone()
            opt.step()
        moved[name] = p.detach() - init
        if name == "adamw8bit":
            state = opt.state[p]
            assert state["state1"].dtype == torch.uint8 and state["state2"].dtype == torch.uint8
            assert state["state1"].numel() == p.numel()  # 1 byte a weight, not 4
    # the same update rule on quantised moments: 5 steps of lr 1e-2 move each weight by up
    # to 5e-2; the worst weight differs by under a fifth of that (on random gradients, the
    # hardest case for a block's shared scale), the direction by under 1%
    err = (moved["adamw8bit"] - moved["adamw"]).abs().max().item()
    assert err < 0.2 * moved["adamw"].abs().max().item()
    cos = torch.nn.functional.cosine_similarity(
        moved["adamw8bit"].flatten(), moved["adamw"].flatten(), dim=0
    )
    assert cos > 0.99


@needs_bnb
def test_learner_trains_with_adamw8bit_and_resumes_its_state(tiny_path, tmp_path):
    import torch

    from learners.algorithms.pg_config import PGConfig
    from learners.algorithms.trr import TRRLearner
    from learners.policy import HFPolicy, SamplingConfig
    from learners.types import Transition

    def learner():
        policy = HFPolicy(tiny_path, device="cpu", seed=0)
        cfg = PGConfig(lr=1e-3, gradient_checkpointing=False, optimizer="adamw8bit")
        return policy, TRRLearner(policy, cfg, temperature=1.0, seed=0)

    def batch(policy):
        obs = [{"system": "You solve.", "user": f"Solve {i} + 2.", "prefix": ""} for i in range(4)]
        comps = policy.generate(obs, SamplingConfig(), budgets=[6] * 4)
        return [
            Transition(
                agent="solver_0",
                role="solver",
                domain="math",
                phase="solve",
                prompt_ids=c.prompt_ids,
                completion_ids=c.completion_ids,
                logprobs=c.logprobs,
                text=c.text,
                reward=float(j),
            )
            for j, c in enumerate(comps)
        ]

    policy, first = learner()
    assert type(first.optimizer).__name__ == "AdamW8bit"
    before = {n: p.detach().clone() for n, p in policy.model.named_parameters()}
    work = batch(policy)
    first.observe(work)
    first.update()
    assert any(not torch.equal(p, before[n]) for n, p in policy.model.named_parameters())
    states = first.optimizer.state.values()
    assert any(s.get("state1") is not None and s["state1"].dtype == torch.uint8 for s in states)
    torch.save(first.state_dict(), tmp_path / "learner.pt")
    weights = {n: p.detach().clone() for n, p in policy.model.named_parameters()}
    first.observe(work)
    first.update()
    straight = {n: p.detach().clone() for n, p in policy.model.named_parameters()}

    resumed_policy, resumed = learner()
    with torch.no_grad():
        for n, p in resumed_policy.model.named_parameters():
            p.copy_(weights[n])
    resumed.load_state_dict(torch.load(tmp_path / "learner.pt", weights_only=False))
    resumed.observe(work)
    resumed.update()
    for n, p in resumed_policy.model.named_parameters():
        assert torch.equal(p, straight[n]), n

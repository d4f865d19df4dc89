"""DDP and FSDP2 (``--distributed.strategy``) on 2 CPU processes with gloo.

One spawn of two ranks (torch.multiprocessing, a file store) trains the tiny random model
(``learners.policy.tiny``) for 3 steps under each strategy on its half of one global batch, and the
weights are compared with one process training on the whole batch; it also checks that
FSDP2 trains LoRA adapters, that the rollout engine's weight push sees full weights, that the
gradients are summed (not averaged) over ranks, and that a ``torch.distributed.checkpoint``
checkpoint resumes exactly. ``tests/learners/distributed/test_collectives.py`` runs ``torchrun``
itself.
"""

from __future__ import annotations

import copy
import pickle
import random
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from learners.algorithms.pg_config import PGConfig
from learners.algorithms.trr import TRRLearner
from learners.distributed import collectives, data_parallel
from learners.distributed.data_parallel import DistributedConfig
from learners.engines import inference_weights
from learners.policy import HFPolicy, LoRAConfig, SamplingConfig
from learners.training.checkpoint import load_checkpoint, save_checkpoint
from learners.types import Transition
from sage_env import TaskPool
from tests.scripted import CODE_SEED, MATH_SEED

pytestmark = pytest.mark.slow  # every test shares a two-rank training run (about 35 s)

WORLD = 2
STEPS = 3
TOL = 1e-5
STRATEGIES = ("ddp", "fsdp2")


def _transitions(policy: HFPolicy, n: int = 12) -> list[Transition]:
    """``n`` transitions with rewards that differ between the two halves (the ranks' shares)."""
    obs = [{"system": "s", "user": f"question {i} " + "x" * (i % 5)} for i in range(n)]
    comps = policy.generate(obs, SamplingConfig(max_new_tokens=8, temperature=1.0))
    roles = [("solver", "math"), ("critic", "code"), ("challenger", "math")]
    out = []
    for i, c in enumerate(comps):
        role, domain = roles[i % 3]
        reward = (0.9 if i < n // 2 else 0.1) + 0.07 * (i % 4)
        ids = dict(prompt_ids=c.prompt_ids, completion_ids=c.completion_ids, logprobs=c.logprobs)
        out.append(Transition(f"{role}_0", role, domain, "solve", **ids, text="", reward=reward))
    return out


def _config(lora: bool = False) -> PGConfig:
    # micro-batches of 2: several backward passes per step, uneven between the ranks;
    # gradient checkpointing on, as the presets train (DDP and FSDP2 recompute in backward)
    lora_cfg = LoRAConfig(r=4, alpha=8, dropout=0.0) if lora else LoRAConfig()
    return PGConfig(lr=1e-4, gradient_checkpointing=True, micro_batch_size=2, lora=lora_cfg)


def _weights(policy: HFPolicy) -> dict[str, torch.Tensor]:
    """Full weights by name (FSDP2: gathered outside a step, so plain tensors here)."""
    return {n: p.detach().float().clone() for n, p in policy.model.named_parameters()}


def _train(
    policy: HFPolicy,
    batches: list[list[Transition]],
    strategy: str | None,
    lora: bool = False,
) -> tuple[HFPolicy, TRRLearner, list[dict]]:
    policy = copy.deepcopy(policy)
    torch.manual_seed(0)  # the same LoRA initialisation in every process
    learner = TRRLearner(policy, _config(lora))
    if strategy is not None:
        data_parallel.prepare(policy, learner, DistributedConfig(strategy=strategy))
    metrics = []
    for batch in batches:
        learner.observe(batch)
        metrics.append(learner.update())
    return policy, learner, metrics


def _mine(batch: list, rank: int) -> list:
    """Rank ``rank``'s share: rank 0 gets 7 of 12 transitions, rank 1 gets 5 (uneven)."""
    cut = len(batch) // 2 + 1
    return batch[:cut] if rank == 0 else batch[cut:]


def _worker(rank: int, store: str, tiny_path: str, data: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    torch.manual_seed(0)
    try:
        result: dict = {}
        base = HFPolicy(tiny_path, device="cpu", seed=0)
        batch = pickle.loads(Path(data).read_bytes())
        mine = _mine(batch, rank)
        for strategy in STRATEGIES:
            policy, learner, metrics = _train(base, [mine] * STEPS, strategy)
            result[strategy] = (metrics, _weights(policy))
            if strategy == "fsdp2":
                # the engine push and save see full tensors outside the step
                pushed = dict(inference_weights(policy.model))
                result["push"] = {k: v.float().clone() for k, v in pushed.items()}
                full = data_parallel.gathered_state_dict(policy.model)
                result["saved_keys"] = sorted(full)
                # last: the model's own state dict reshards it (FSDP2's hook)
                result["sharded"] = type(next(iter(policy.model.state_dict().values()))).__name__
        # a rank without transitions still takes part (idle passes, zero gradient)
        policy, _, _ = _train(base, [mine if rank == 0 else []], "fsdp2")
        result["idle"] = _weights(policy)
        # LoRA adapters under FSDP2 (base frozen, adapters trainable in the same units)
        policy, _, _ = _train(base, [mine] * STEPS, "fsdp2", lora=True)
        result["lora"] = {
            n: p.detach().clone() for n, p in policy.model.named_parameters() if "lora_" in n
        }
        # exact resume from a DCP checkpoint: 1 step, save, 2 steps == fresh, load, 2 steps
        for strategy in STRATEGIES:
            run = Path(out, f"run_{strategy}")
            policy, learner, _ = _train(base, [mine], strategy)
            pool = TaskPool([MATH_SEED, CODE_SEED])
            rng = random.Random(3)
            save_checkpoint(run, 1, policy, learner, pool, rng, keep=2)
            for _ in range(2):
                learner.observe(mine)
                learner.update()
            straight = _weights(policy)
            fresh = copy.deepcopy(base)
            fresh_learner = TRRLearner(fresh, _config())
            data_parallel.prepare(fresh, fresh_learner, DistributedConfig(strategy=strategy))
            step, _ = load_checkpoint(run / "checkpoints/step_000001", fresh, fresh_learner, rng)
            for _ in range(2):
                fresh_learner.observe(mine)
                fresh_learner.update()
            result[f"resume_{strategy}"] = (step, straight, _weights(fresh))
            collectives.barrier()
            if rank == 0:
                files = sorted(p.name for p in (run / "checkpoints/step_000001").iterdir())
                result[f"files_{strategy}"] = files
        Path(out, f"rank{rank}.pkl").write_bytes(pickle.dumps(result))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(tiny_path, tmp_path_factory):
    """Run the two-rank worker once; returns (per-rank results, batch, base policy)."""
    tmp = tmp_path_factory.mktemp("parallel")
    torch.manual_seed(0)
    policy = HFPolicy(tiny_path, device="cpu", seed=0)
    batch = _transitions(policy)
    (tmp / "batch.pkl").write_bytes(pickle.dumps(batch))
    args = (str(tmp / "store"), tiny_path, str(tmp / "batch.pkl"), str(tmp))
    torch.multiprocessing.spawn(_worker, args=args, nprocs=WORLD, join=True)
    results = [pickle.loads((tmp / f"rank{r}.pkl").read_bytes()) for r in range(WORLD)]
    return results, batch, policy


def _max_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max((a[k] - b[k]).abs().max().item() for k in a)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_two_ranks_equal_one_process_after_three_steps(ranks, strategy):
    results, batch, policy = ranks
    one, _, m_one = _train(policy, [batch] * STEPS, None)
    w_one = _weights(one)
    moved = _max_diff(w_one, _weights(policy))
    assert moved > 10 * TOL  # three steps moved the weights: equality below is meaningful
    (m0, w0), (m1, w1) = results[0][strategy], results[1][strategy]
    assert _max_diff(w_one, w0) <= TOL and _max_diff(w_one, w1) <= TOL
    for step in range(STEPS):
        for key in ("loss", "grad_norm", "num_sequences", "num_tokens"):
            assert m0[step][key] == pytest.approx(m_one[step][key], abs=TOL), (step, key)
            assert m1[step][key] == pytest.approx(m0[step][key], abs=1e-7), (step, key)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_gradients_are_summed_over_ranks_not_averaged(ranks, strategy):
    """AdamW and norm clipping hide a constant gradient scale from the weights, so the proof
    is the reduced gradient's norm (before clipping): the one-process norm, not half of it
    (what DDP's and FSDP2's default mean over 2 ranks would give)."""
    results, batch, policy = ranks
    _, _, m_one = _train(policy, [batch], None)
    norm = m_one[0]["grad_norm"]
    assert norm > 1e-3
    for r in results:
        assert r[strategy][0][0]["grad_norm"] == pytest.approx(norm, rel=1e-5)
        assert abs(r[strategy][0][0]["grad_norm"] - norm / 2) > 0.25 * norm


def test_a_rank_without_transitions_gets_the_common_update(ranks):
    results, batch, policy = ranks
    one, _, _ = _train(policy, [_mine(batch, 0)], None)
    assert _max_diff(_weights(one), results[0]["idle"]) <= TOL
    assert _max_diff(results[0]["idle"], results[1]["idle"]) == 0.0


def test_fsdp2_trains_lora_adapters_as_one_process(ranks):
    results, batch, policy = ranks
    one, _, _ = _train(policy, [batch] * STEPS, None, lora=True)
    w_one = {n: p.detach().clone() for n, p in one.model.named_parameters() if "lora_" in n}
    assert w_one and max(v.abs().max().item() for n, v in w_one.items() if "lora_B" in n) > TOL
    assert _max_diff(w_one, results[0]["lora"]) <= TOL
    assert _max_diff(w_one, results[1]["lora"]) <= TOL


def test_fsdp2_push_and_save_see_full_gathered_weights(ranks):
    results, _, policy = ranks
    r0 = results[0]
    assert r0["sharded"] == "DTensor"  # the model's own state dict is sharded ...
    w = r0["fsdp2"][1]
    for name, tensor in r0["push"].items():  # ... but the engine gets whole tensors
        assert tensor.shape == w[name].shape and torch.equal(tensor, w[name]), name
    assert r0["push"].keys() == w.keys()
    assert r0["saved_keys"] == sorted(policy.model.state_dict())


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_sharded_checkpoint_resumes_exactly(ranks, strategy):
    results, _, _ = ranks
    for r in results:
        step, straight, resumed = r[f"resume_{strategy}"]
        assert step == 1
        assert _max_diff(straight, resumed) == 0.0  # bit for bit
    files = results[0][f"files_{strategy}"]
    assert files == ["dcp", "learner.pt", "model", "pool.jsonl", "state.json"]

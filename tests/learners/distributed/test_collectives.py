"""Data-parallel training (learners.distributed.collectives) on 2 CPU processes with gloo.

One spawn of two ranks (torch.multiprocessing, a file store) checks the update, the pool sync
and the seeds; the CLI tests run ``torchrun --nproc_per_node 2 -m learners train`` itself.
"""

import copy
import json
import os
import pickle
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from learners.algorithms.advantages import group_normalised_advantages
from learners.algorithms.pg_config import PGConfig
from learners.algorithms.trr import TRRLearner
from learners.distributed import collectives, data_parallel
from learners.policy import HFPolicy, SamplingConfig
from learners.types import Transition
from sage_env import Task, TaskPool
from tests.scripted import CODE_SEED, MATH_SEED

WORLD = 2
ROUNDS = 3  # per rank; one process plays WORLD * ROUNDS
AGGS = ("token_mean", "seq_mean")


def _transitions(policy: HFPolicy) -> list[Transition]:
    """WORLD * ROUNDS rounds of 3 transitions, split so that per-rank statistics differ."""
    n = WORLD * ROUNDS
    obs = [{"system": "s", "user": f"question {i} " + "x" * (i % 4)} for i in range(3 * n)]
    comps = policy.generate(obs, SamplingConfig(max_new_tokens=10, temperature=1.0))
    out = []
    for i, c in enumerate(comps):
        role, domain = [("solver", "math"), ("critic", "code"), ("challenger", "math")][i % 3]
        first_half = i < len(comps) // 2  # rank 0's rounds: higher solver rewards
        if role == "solver":
            reward = (0.9 if first_half else 0.1) + 0.05 * (i % 5)
        else:
            reward = 0.3 * ((i * 7) % 5) if role == "challenger" else ((i * 5) % 7) / 7
        ids = dict(prompt_ids=c.prompt_ids, completion_ids=c.completion_ids, logprobs=c.logprobs)
        out.append(Transition(f"{role}_0", role, domain, "solve", **ids, text="", reward=reward))
    return out


def _update(policy: HFPolicy, batch: list[Transition], agg: str) -> tuple[dict, dict]:
    policy = copy.deepcopy(policy)
    cfg = PGConfig(lr=1e-4, gradient_checkpointing=False, micro_batch_size=2, loss_agg=agg)
    learner = TRRLearner(policy, cfg)
    data_parallel.prepare(policy, learner)  # several ranks: DDP (the default strategy) sums
    learner.observe(batch)
    metrics = learner.update()
    return metrics, {n: p.detach().clone() for n, p in policy.model.named_parameters()}


def _gen(prompt: str, task_id: str) -> Task:
    return Task(task_id, "math", prompt, answer="1", source="generated", parent_id="seed/m0")


def _worker(rank: int, store: str, tiny_path: str, data: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    try:
        result: dict = {"world": collectives.world_size(), "rank": collectives.rank()}
        policy = HFPolicy(tiny_path, device="cpu", seed=0)
        batch = pickle.loads(Path(data).read_bytes())
        half = len(batch) // WORLD
        mine = batch[rank * half : (rank + 1) * half]
        for agg in AGGS:
            metrics, weights = _update(policy, mine, agg)
            result[agg] = (metrics, weights if rank == 0 else None)
        # a rank with nothing to train on still takes part in the collectives
        metrics, weights = _update(policy, mine if rank == 0 else [], "token_mean")
        result["uneven"] = (metrics, weights)
        # pool: rank 0 accepts two tasks, rank 1 two (one a duplicate of rank 0's first)
        pool = TaskPool([MATH_SEED, CODE_SEED])
        pool.add(_gen("an earlier generated task about primes below fifty", pool.new_id()))
        snapshot = pool.snapshot()
        if rank == 0:
            accepted = ["how many edges does a cube have in total", "sum the digits of 2024"]
        else:
            accepted = ["How many edges does a cube have  in total", "what is seven squared"]
        for prompt in accepted:  # ids collide across ranks, as they do in a real step
            pool.add(_gen(prompt, pool.new_id()))
        added = collectives.sync_pool(pool, snapshot)
        result["pool"] = ([(t.task_id, t.prompt) for t in pool], pool.new_id(), added)
        result["digest"] = collectives.pool_digest(pool)
        result["seeds"] = collectives.rank_seeds(random.Random(5), ROUNDS)
        Path(out, f"rank{rank}.pkl").write_bytes(pickle.dumps(result))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(tiny_path, tmp_path_factory):
    """Run the two-rank worker once; returns (per-rank results, batch, base policy)."""
    tmp = tmp_path_factory.mktemp("ddp")
    policy = HFPolicy(tiny_path, device="cpu", seed=0)
    batch = _transitions(policy)
    (tmp / "batch.pkl").write_bytes(pickle.dumps(batch))
    args = (str(tmp / "store"), tiny_path, str(tmp / "batch.pkl"), str(tmp))
    torch.multiprocessing.spawn(_worker, args=args, nprocs=WORLD, join=True)
    results = [pickle.loads((tmp / f"rank{r}.pkl").read_bytes()) for r in range(WORLD)]
    return results, batch, policy


@pytest.mark.slow
@pytest.mark.parametrize("agg", AGGS)
def test_two_ranks_update_equals_one_process_on_all_rounds(ranks, agg):
    results, batch, policy = ranks
    assert [r["world"] for r in results] == [2, 2] and [r["rank"] for r in results] == [0, 1]
    # the split matters: advantages from rank 0's half alone are not the global ones
    half = len(batch) // WORLD
    rewards, groups = [t.reward for t in batch], [(t.role, t.domain) for t in batch]
    local = group_normalised_advantages(rewards[:half], groups[:half])
    assert (
        max(abs(a - b) for a, b in zip(local, group_normalised_advantages(rewards, groups))) > 0.1
    )

    m_one, w_one = _update(policy, batch, agg)
    m_two, w_two = results[0][agg]
    for key in ("loss", "pg_loss", "grad_norm", "num_sequences", "num_tokens", "adv_abs_mean"):
        assert m_two[key] == pytest.approx(m_one[key], abs=1e-5), key
    moved = max((w_one[n] - p).abs().max().item() for n, p in policy.model.named_parameters())
    assert moved > 1e-5  # the update is not a no-op, so equality below is meaningful
    for name, w in w_one.items():
        assert (w - w_two[name]).abs().max().item() <= 1e-5, name
    assert results[1][agg][0]["loss"] == pytest.approx(m_two["loss"], abs=1e-7)


@pytest.mark.slow
def test_a_rank_without_transitions_still_gets_the_common_update(ranks):
    results, batch, policy = ranks
    half = len(batch) // WORLD
    m_one, w_one = _update(policy, batch[:half], "token_mean")
    (m0, w0), (m1, w1) = results[0]["uneven"], results[1]["uneven"]
    assert m0["num_sequences"] == m1["num_sequences"] == half
    for name, w in w_one.items():
        assert (w - w0[name]).abs().max().item() <= 1e-5, name
        assert torch.equal(w0[name], w1[name]), name  # every rank holds the same weights


@pytest.mark.slow
def test_pools_are_identical_across_ranks_in_rank_order(ranks):
    results, _, _ = ranks
    (tasks0, next0, added0), (tasks1, next1, added1) = results[0]["pool"], results[1]["pool"]
    assert tasks0 == tasks1 and next0 == next1 and added0 == added1 == 3
    assert results[0]["digest"] == results[1]["digest"]
    prompts = [p for _, p in tasks0]
    assert prompts[3:] == [
        "how many edges does a cube have in total",
        "sum the digits of 2024",
        "what is seven squared",  # rank 1's cube task was a duplicate of rank 0's
    ]
    ids = [i for i, _ in tasks0]
    assert len(set(ids)) == len(ids) and ids[3:] == ["gen/1", "gen/2", "gen/4"]


@pytest.mark.slow
def test_env_seeds_are_rank_distinct_and_drawn_from_one_stream(ranks):
    results, _, _ = ranks
    rng = random.Random(5)
    one_process = [rng.randrange(2**31) for _ in range(WORLD * ROUNDS)]
    assert results[0]["seeds"] + results[1]["seeds"] == one_process


def test_one_process_helpers_are_the_identity():
    assert collectives.world_size() == 1 and collectives.is_main()
    assert collectives.gather(3) == [3] and collectives.global_counts(4, 5) == (4, 5)
    assert collectives.minibatches(list(range(7)), 3, 7) == [[0, 1, 2], [3, 4, 5], [6]]
    pool = TaskPool([MATH_SEED])
    assert collectives.sync_pool(pool, pool.snapshot()) == 0


# --- the real command: torchrun --nproc_per_node 2 -m learners train --------------------------


TINY_RUN = """\
device: cpu
rounds_per_step: 1
max_new_tokens: 8
phase_max_new_tokens: {}
phase_stop_strings: {}
val_every: 0
critic_probe_size: 0
gate_calibration: false
warmup: {steps: 0}
heldout: ""
env: {solver_samples: 1}
learner: {lr: 0.001, gradient_checkpointing: false}
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _torchrun(tiny_path: str, out: Path, *extra: str) -> list[str]:
    config = out.parent / "tiny_run.yaml"
    config.write_text(f"model: {tiny_path}\n{TINY_RUN}")
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    launcher += ["--master_port", str(_free_port())]
    train = ["-m", "learners", "train", "--no-progress", "--config", str(config)]
    return launcher + train + ["--out", str(out), *extra]


def _env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[3])
    return {
        **os.environ,
        "PYTHONPATH": root,
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "SAGE_ENV_LOGLEVEL": "WARNING",
    }


TIMEOUT_S = 900  # about 30 s on 2 idle cores; generous for a loaded CI machine


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    """Run a launcher in its own session; on a timeout kill it *and* its workers."""
    proc = subprocess.Popen(
        cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{cmd[:8]} timed out after {TIMEOUT_S} s: {err.decode()[-3000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out.decode(), err.decode())


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["ddp", "fsdp2"])
def test_torchrun_two_processes_train_two_steps_with_one_writer(tiny_path, tmp_path, strategy):
    out = tmp_path / "run"
    # warm-up on rank 0, validation and the critic probe: the paths that broadcast (and,
    # under FSDP2, generate on one rank only: the gathered weights need no collective)
    extra = ["--warmup.steps", "2", "--warmup.no-cache", "--val-every", "2", "--val-limit", "2"]
    extra += ["--val-max-new-tokens", "8", "--critic-probe-size", "4"]
    extra += ["--distributed.strategy", strategy, "--early-stopping-patience", "5"]
    cmd = _torchrun(tiny_path, out, "--steps", "2", *extra)
    proc = _run(cmd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = _rows(out)
    assert [r["step"] for r in rows] == [0, 1, 2]  # one writer: two would write 6 rows
    assert "val/accuracy" in rows[-1] and "critic/auc" in rows[-1]
    assert rows[-1]["count/challenger"] == 2.0  # but the metrics count both ranks' rounds
    # one TensorBoard writer (accelerate's tracker, main process only), holding the rows
    (events,) = list((out / "tb").iterdir())
    assert events.name.startswith("events.out.tfevents.")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(out / "tb"))
    acc.Reload()
    for tag in ("count/challenger", "pool/size", "val/accuracy"):
        logged = [(e.step, e.value) for e in acc.Scalars(tag)]
        assert logged == [(r["step"], pytest.approx(r[tag])) for r in rows if tag in r], tag
    ranks = torch.load(out / "checkpoints/step_000002/ranks.pt", weights_only=False)
    assert len(ranks) == 2 and not torch.equal(ranks[0]["policy_rng"], ranks[1]["policy_rng"])
    # every step checked that the pools are identical (the run raises otherwise)
    assert (out / "pool.jsonl").exists()
    # model and optimiser as torch.distributed.checkpoint shards, full weights beside them
    step2 = out / "checkpoints/step_000002"
    assert (step2 / "dcp/.metadata").exists() and (step2 / "model/model.safetensors").exists()
    # the best model, saved by rank 0 alone (FSDP2: from the gathered weights), is whole
    best, last = _weights(out / "checkpoints/best"), _weights(step2 / "model")
    assert best.keys() == last.keys()
    assert all(best[k].shape == last[k].shape for k in best)


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["ddp", "fsdp2"])
def test_torchrun_killed_with_sigkill_resumes_as_an_uninterrupted_run(
    tiny_path, tmp_path, strategy
):
    out = tmp_path / "run"
    flag = ("--distributed.strategy", strategy)
    cmd = _torchrun(tiny_path, out, "--steps", "100", *flag)
    log = tmp_path / "stderr.txt"
    with open(log, "wb") as err:  # a file, not a pipe: nobody reads it while the run goes on
        proc = subprocess.Popen(
            cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=err, start_new_session=True
        )
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not (out / "checkpoints/step_000001/state.json").exists():
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "no checkpoint in time"
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the launcher and its workers
        proc.wait()
    done = max(int(d.name.split("_")[1]) for d in (out / "checkpoints").glob("step_*"))
    cmd = _torchrun(tiny_path, out, "--steps", str(done + 1), "--resume", *flag)
    res = _run(cmd)
    assert res.returncode == 0, res.stderr[-3000:]
    assert [r["step"] for r in _rows(out)] == list(range(1, done + 2))
    last = out / f"checkpoints/step_{done + 1:06d}"
    assert (last / "ranks.pt").exists() and (last / "dcp/.metadata").exists()
    # the same number of steps without the kill: the same weights and metrics
    straight = tmp_path / "straight"
    res = _run(_torchrun(tiny_path, straight, "--steps", str(done + 1), *flag))
    assert res.returncode == 0, res.stderr[-3000:]
    resumed_w = _weights(last / "model")
    straight_w = _weights(straight / f"checkpoints/step_{done + 1:06d}/model")
    assert resumed_w.keys() == straight_w.keys()
    for name, w in straight_w.items():
        assert torch.equal(w, resumed_w[name]), name
    keys = ("learner/loss", "learner/grad_norm", "pool/size", "reward/solver")
    assert [{k: r.get(k) for k in keys} for r in _rows(out)][-1] == [
        {k: r.get(k) for k in keys} for r in _rows(straight)
    ][-1]

"""Collectives across ranks: what SAGE gathers, reduces and broadcasts, on ``torch.distributed``.

Launch with ``torchrun --nproc_per_node N -m learners train ...`` (anywhere; gloo on CPU) or
``accelerate launch --num_processes N -m learners train ...`` (GPUs). :func:`init` lets
accelerate's ``Accelerator`` read the launcher's environment and open the process group;
everything else is a ``torch.distributed`` collective. On one process every function here is
the identity, so a single-process run is unchanged. What is shared (``docs/guide/training.md``):

- **Rollouts**: each rank plays its own ``rounds_per_step`` environment copies, with env seeds
  drawn from one shared RNG (:func:`rank_seeds`), so rank r plays the seeds that rounds
  ``r*R .. r*R+R-1`` of a one-process run with ``N*R`` rounds would.
- **Advantages**: :func:`global_advantages` gathers every rank's transitions and runs the
  learner's own estimator on the concatenation (rank order), so TRR++ normalises each
  (role, domain) group over the global batch; each rank keeps its own slice.
- **Gradients**: each rank's loss is normalised by the *global* minibatch token (or sequence)
  count (:func:`global_counts`) and torch's own engine (DDP or FSDP2) sums the gradients over
  ranks: the wrapping, the per-pass gradient sync and the FSDP2 parameter gathering are
  :mod:`learners.distributed.data_parallel`'s.
- **Pool**: :func:`sync_pool` rolls each rank's pool back to the start of the step and adds
  every rank's accepted tasks in rank order, with ids reassigned in that order: pools are
  identical on every rank after every step.
- **Files**: only rank 0 (:func:`is_main`) writes metrics, transcripts, the pool and
  checkpoints; the other ranks' RNG states travel in the checkpoint (:func:`rank_states`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from learners.rng_state import as_tuple as _as_tuple
from learners.types import RolloutResult
from sage_env import TaskPool

T = TypeVar("T")


def launched() -> bool:
    """True when a launcher (torchrun, accelerate launch) started more than one process."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def init(device: str = "auto", log_with: str | None = None, project_dir: str | None = None) -> Any:
    """The run's accelerate ``Accelerator``: a launch's process group, the metric trackers.

    It opens the process group of a multi-process launch and holds the experiment trackers
    that :class:`learners.training.metrics.MetricsLog` logs to.
    On one process (no ``WORLD_SIZE > 1`` in the environment) without ``log_with`` nothing
    happens and ``None`` is returned. On a machine without CUDA, or with ``device="cpu"``, the
    Accelerator is made with ``cpu=True``, which selects gloo (without it accelerate sees no
    distributed setup on a CPU-only machine and every rank would train alone).

    Args:
        device: ``TrainConfig.device``.
        log_with: An accelerate tracker name (``"tensorboard"``, ``"wandb"``) or ``None``.
        project_dir: Where trackers that write files write them (the run folder).

    Returns:
        The ``accelerate.Accelerator`` (its ``device`` is this rank's device), or ``None``.
    """
    if not launched() and log_with is None:
        return None
    if launched():
        _die_with_launcher()
    from accelerate import Accelerator

    cpu = device == "cpu" or not torch.cuda.is_available()
    return Accelerator(cpu=cpu, log_with=log_with, project_dir=project_dir)


def _die_with_launcher() -> None:
    """Have the kernel kill this rank when its launcher dies (Linux ``PR_SET_PDEATHSIG``).

    torchrun starts every worker in its own session, so a ``kill -9`` of the launcher (or of
    its process group) leaves the workers training on, and writing into the run folder that a
    ``--resume`` then shares. Elsewhere than Linux this does nothing.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    if os.getppid() != parent:  # the launcher died before the call
        os._exit(1)


def shutdown() -> None:
    """Destroy the process group (a gloo group left open at exit aborts the process)."""
    if _active():
        dist.destroy_process_group()


def _active() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def world_size() -> int:
    """Number of ranks (1 without a process group)."""
    return dist.get_world_size() if _active() else 1


def rank() -> int:
    """The rank of this process (0 without a process group)."""
    return dist.get_rank() if _active() else 0


def is_main() -> bool:
    """True on rank 0, the only rank that writes files."""
    return rank() == 0


def barrier() -> None:
    """Wait for every rank (no-op on one process)."""
    if _active():
        dist.barrier()


def gather(obj: T) -> list[T]:
    """Every rank's ``obj`` (picklable), in rank order; ``[obj]`` on one process."""
    if not _active():
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def broadcast(obj: T, src: int = 0) -> T:
    """Rank ``src``'s ``obj`` on every rank (picklable); ``obj`` on one process."""
    if not _active():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def rank_seeds(rng: random.Random, per_rank: int) -> list[int]:
    """The ``per_rank`` env seeds of this rank, from an ``rng`` shared by all ranks.

    Draws ``per_rank * world_size`` seeds (so ``rng`` stays identical on every rank) and
    returns slice ``[rank * per_rank, (rank + 1) * per_rank)``: rank-distinct seeds, and on
    one process the same draws as before.
    """
    seeds = [rng.randrange(2**31) for _ in range(per_rank * world_size())]
    r = rank()
    return seeds[r * per_rank : (r + 1) * per_rank]


def global_advantages(
    fn: Callable[[list[T]], list[float]], batch: list[T]
) -> tuple[list[float], list[T], list[float]]:
    """Advantages of this rank's ``batch`` computed by ``fn`` over every rank's batch.

    ``fn`` (a learner's ``advantages``) runs on the concatenation of all ranks' batches in rank
    order, on every rank, so group statistics (TRR++'s per-(role, domain) mean and std, GRPO's
    per-prompt groups, a batch whitening) are those of the global batch, and stateful
    estimators (an EMA baseline) stay identical across ranks.

    Args:
        fn: ``batch -> one advantage per item``.
        batch: This rank's items (transitions), length n_r.

    Returns:
        ``(local advantages [n_r], global batch [sum n], global advantages [sum n])``; on one
        process ``(fn(batch), batch, same list)``.

    Raises:
        ValueError: if ``fn`` returns a list of the wrong length.
    """
    parts = gather(batch)
    everyone = [t for part in parts for t in part]
    adv = list(fn(everyone)) if everyone else []
    if len(adv) != len(everyone):
        raise ValueError(f"advantages returned {len(adv)} values for {len(everyone)} items")
    start = sum(len(p) for p in parts[: rank()])
    return adv[start : start + len(batch)], everyone, adv


def minibatches(order: list[int], num_minibatches: int, global_size: int) -> list[list[int]]:
    """Split this rank's (shuffled) indices into the minibatches of one epoch.

    One process: chunks of ``ceil(n / num_minibatches)``. Several ranks: every rank must make
    the same number of optimiser steps, so each splits its own indices into as many
    contiguous, near-equal parts (some possibly empty) as the global batch makes chunks; a
    minibatch is then the union of the ranks' parts (identical to the one-process update
    when ``num_minibatches = 1``).
    """
    if not _active():
        size = max(1, math.ceil(len(order) / num_minibatches))
        return [order[i : i + size] for i in range(0, len(order), size)]
    size = max(1, math.ceil(global_size / num_minibatches))
    k = max(1, math.ceil(global_size / size))
    bounds = [round(i * len(order) / k) for i in range(k + 1)]
    return [order[bounds[i] : bounds[i + 1]] for i in range(k)]


def global_counts(*counts: int) -> tuple[int, ...]:
    """Sums over ranks of integer counts (token and sequence normalisers), one all-reduce."""
    if not _active():
        return tuple(counts)
    t = torch.tensor(counts, dtype=torch.float64, device=comm_device())
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return tuple(int(round(v)) for v in t.tolist())


def sum_metrics(stats: dict[str, float]) -> dict[str, float]:
    """Per-key sums over ranks of float metrics (keys missing on a rank count as 0)."""
    if not _active():
        return stats
    total: dict[str, float] = {}
    for part in gather(dict(stats)):
        for key, value in part.items():
            total[key] = total.get(key, 0.0) + float(value)
    return total


def broadcast_parameters(model: torch.nn.Module) -> None:
    """Copy rank 0's parameters and buffers to every rank (no-op on one process)."""
    if not _active():
        return
    with torch.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            dist.broadcast(t.data, src=0)


def comm_device() -> torch.device:
    """The device collectives' tensors live on: this rank's GPU under NCCL, else the CPU."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def sync_pool(pool: TaskPool, snapshot: TaskPool) -> int:
    """Make ``pool`` identical on every rank: ``snapshot`` + all ranks' accepted tasks.

    ``snapshot`` is this rank's :meth:`TaskPool.snapshot` from the start of the step (equal on
    every rank). The generated tasks in ``pool`` that ``snapshot`` lacks (this rank's accepted
    tasks, in acceptance order) are gathered; ``pool`` is restored to ``snapshot``, then every
    rank's tasks are added in rank order, each with a fresh id from the restored pool's
    counter (the ids reserved during the round collide across ranks), so duplicates across
    ranks are rejected and the size cap applies as one process adding them in that order would.
    A parent id that named a task accepted in the same step on the same rank follows it.

    A task accepted and evicted again within one step on one rank is not shared: at least
    ``max_generated`` newer tasks from that rank precede every later rank's in the merged
    order, so the merged pool would have evicted it as well.

    Returns:
        Number of generated tasks added to the pool on this step (all ranks).
    """
    if not _active():
        return 0
    known = {t.task_id for t in snapshot.tasks}
    mine = [t for t in pool.tasks if t.source == "generated" and t.task_id not in known]
    parts = gather(mine)
    pool.restore(snapshot)
    added = 0
    for part in parts:
        renamed: dict[str, str] = {}
        for task in part:
            new_id = pool.new_id()
            renamed[task.task_id] = new_id
            parent = renamed.get(task.parent_id, task.parent_id) if task.parent_id else None
            added += pool.add(dataclasses.replace(task, task_id=new_id, parent_id=parent))
    return added


def rank_states(policy: Any, learner: Any) -> list[dict[str, Any]] | None:
    """Every rank's sampling RNG states, gathered (collective: call on all ranks).

    Returns:
        One dict per rank (``policy_rng``, ``torch_rng``, ``learner_rng``) on more than one
        process; ``None`` on one process (the checkpoint already holds them).
    """
    if not _active():
        return None
    rng = getattr(learner, "rng", None)
    mine = {
        "policy_rng": policy.generator.get_state(),
        "torch_rng": torch.get_rng_state(),
        "learner_rng": rng.getstate() if isinstance(rng, random.Random) else None,
    }
    return gather(mine)


def restore_rank_state(
    states: Sequence[dict[str, Any]] | None, policy: Any, learner: Any, seed: int, step: int
) -> None:
    """Restore this rank's RNG states from :func:`rank_states` (after a checkpoint load).

    A rank the checkpoint has no state for (a run resumed with more ranks, or one saved by a
    single process) reseeds its sampling generator with ``(seed, rank, step)``, so its
    samples differ from every other rank's. Rank 0 keeps what the checkpoint restored.
    """
    r = rank()
    if r == 0:
        return
    if states is not None and r < len(states):
        s = states[r]
        policy.generator.set_state(s["policy_rng"])
        torch.set_rng_state(s["torch_rng"])
        rng = getattr(learner, "rng", None)
        if s.get("learner_rng") is not None and isinstance(rng, random.Random):
            rng.setstate(_as_tuple(s["learner_rng"]))
        return
    policy.generator.manual_seed(rank_sampling_seed(seed, step))


def rank_sampling_seed(seed: int, step: int = 0) -> int:
    """The sampling seed of this rank at ``step``: ``seed`` on rank 0, distinct elsewhere."""
    r = rank()
    if r == 0:
        return seed
    return (seed * 1_000_003 + r * 7_919 + step) % (2**63 - 1)


def load_rank_states(checkpoint: os.PathLike | str) -> list[dict[str, Any]] | None:
    """The per-rank RNG states a multi-process run saved in ``checkpoint/ranks.pt``, if any."""
    from pathlib import Path

    path = Path(checkpoint) / "ranks.pt"
    return torch.load(path, weights_only=False) if path.exists() else None


def merge_rollouts(result: RolloutResult) -> RolloutResult:
    """Every rank's rollouts of this step as one result (collective: call on all ranks).

    Transitions and transcripts are concatenated in rank order, ``env_index`` is offset so
    that it names a global round (rank r's copy i becomes ``r * R + i``), tokens add up and
    times are the slowest rank's. On one process ``result`` is returned as is.
    """
    if not _active():
        return result
    parts = gather(result)
    transitions, transcripts = [], []
    offset = 0
    for part in parts:
        transitions += [
            dataclasses.replace(t, env_index=t.env_index + offset) for t in part.transitions
        ]
        transcripts += part.transcripts
        offset += len(part.transcripts)
    return RolloutResult(
        transitions,
        transcripts,
        max(p.generate_seconds for p in parts),
        max(p.env_seconds for p in parts),
        sum(p.tokens for p in parts),
        max(p.ticks for p in parts),
        sum(p.rows for p in parts),
        sum(p.calls for p in parts),
    )


def device() -> torch.device:
    """The device accelerate gave this rank (``cuda:LOCAL_RANK`` on GPUs); CPU on one process."""
    if not _active():
        return torch.device("cpu")
    from accelerate import PartialState

    return PartialState().device


def pool_digest(pool: TaskPool) -> str:
    """SHA-1 of the pool's tasks in order (id, domain, prompt, answer, tests)."""
    import hashlib
    import json

    h = hashlib.sha1()
    for t in pool.tasks:
        h.update(json.dumps([t.task_id, t.domain, t.prompt, t.answer, t.tests]).encode())
        h.update(b"\n")
    return h.hexdigest()


def check_identical(value: Any, what: str) -> None:
    """Raise on every rank unless ``value`` is equal on all ranks (no-op on one process).

    Raises:
        RuntimeError: naming ``what`` and each rank's value.
    """
    values = gather(value)
    if any(v != values[0] for v in values):
        raise RuntimeError(f"{what} differs across ranks: {values}")

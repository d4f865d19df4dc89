"""Checkpoints of a training run: written atomically, restored bit for bit on resume.

``OUT/checkpoints/step_N/`` holds ``model/`` (safetensors + tokenizer; with LoRA the peft
adapter only, ``adapter_model.safetensors`` + ``adapter_config.json``), ``learner.pt``
(learner state: optimizer, shuffling RNG, algorithm extras; torch and sampling RNG),
``pool.jsonl`` and ``state.json`` (step, task-draw RNG). Each is written to a hidden temp
folder and renamed, so a killed process never leaves a half-written checkpoint.

A multi-process run (``learners.distributed``, DDP or FSDP2) also writes ``dcp/``: model and
optimizer as ``torch.distributed.checkpoint`` shards, every rank writing its own
(``get_state_dict``/``set_state_dict`` of ``torch.distributed.checkpoint.state_dict``), which
resume loads on any number of ranks; ``learner.pt`` then holds the learner state without the
optimizer, ``ranks.pt`` every rank's RNG states, and ``model/`` the full weights (rank 0)
for export and evaluation. Every rank writes into the same temp folder; rank 0 renames it
once all shards are written.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import torch

from learners.algorithms.registry import Learner
from learners.distributed import collectives, data_parallel
from learners.policy import HFPolicy
from learners.rng_state import as_tuple as _as_tuple
from sage_env import EnvConfig, TaskPool


def checkpoint_dirs(out: Path) -> list[Path]:
    """Complete checkpoints ``out/checkpoints/step_N`` (with ``state.json``), oldest first."""
    root = out / "checkpoints"
    if not root.is_dir():
        return []
    dirs = [
        d
        for d in root.iterdir()
        if d.is_dir() and d.name.startswith("step_") and (d / "state.json").exists()
    ]
    return sorted(dirs, key=lambda d: int(d.name.split("_")[1]))


def save_checkpoint(
    out: Path,
    step: int,
    policy: HFPolicy,
    learner: Learner,
    pool: TaskPool,
    rng: random.Random,
    keep: int,
    rank_states: list[dict[str, Any]] | None = None,
) -> Path:
    """Write ``out/checkpoints/step_<step>`` atomically (temp folder, then rename).

    Holds the model (safetensors; with LoRA the adapter only), tokenizer, optimizer, pool,
    Python/torch RNG and step.
    A process killed mid-write leaves only a ``.tmp`` folder, which resume ignores.
    ``rank_states`` (a multi-process run's per-rank RNG states,
    :func:`learners.distributed.collectives.rank_states`) go to ``ranks.pt``.

    On several ranks it is collective (every rank calls it): all write their shards of model
    and optimizer to ``dcp/`` (``torch.distributed.checkpoint.save``), rank 0 the rest, then
    rank 0 renames the folder. On one process it writes what it always did.
    """
    root = out / "checkpoints"
    final = root / f"step_{step:06d}"
    tmp = root / f".step_{step:06d}.tmp"
    main = collectives.is_main()
    several = collectives.world_size() > 1
    if main:
        root.mkdir(parents=True, exist_ok=True)
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
    if several:
        collectives.barrier()  # the temp folder exists (and holds nothing stale)
        _save_sharded(tmp / "dcp", policy, learner)  # returns once every shard is written
    if not main:
        return final
    policy.save(tmp / "model")
    learner_state = learner.state_dict()
    if several:  # the optimizer is in dcp/ (sharded under FSDP2)
        learner_state = {k: v for k, v in learner_state.items() if k != "optimizer"}
    torch.save(
        {
            "learner": learner_state,
            "torch_rng": torch.get_rng_state(),
            "policy_rng": policy.generator.get_state(),
        },
        tmp / "learner.pt",
    )
    pool.save(tmp / "pool.jsonl")
    if rank_states is not None:
        torch.save(rank_states, tmp / "ranks.pt")
    (tmp / "state.json").write_text(json.dumps({"step": step, "rng": rng.getstate()}))
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    for old in checkpoint_dirs(out)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def _save_sharded(path: Path, policy: HFPolicy, learner: Learner) -> None:
    """Model and optimizer state as ``torch.distributed.checkpoint`` shards (collective)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    with data_parallel.update_step(policy):  # FSDP2: the state dicts name the sharded params
        model_sd, optim_sd = get_state_dict(policy.model, learner.optimizer)
        dcp.save({"model": model_sd, "optimizer": optim_sd}, checkpoint_id=str(path))


def _load_sharded(path: Path, policy: HFPolicy, learner: Learner) -> None:
    """Load :func:`_save_sharded`'s shards into the (wrapped) model and optimizer (collective)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    with data_parallel.update_step(policy):
        model_sd, optim_sd = get_state_dict(policy.model, learner.optimizer)
        state = {"model": model_sd, "optimizer": optim_sd}
        dcp.load(state, checkpoint_id=str(path))
        set_state_dict(
            policy.model,
            learner.optimizer,
            model_state_dict=state["model"],
            optim_state_dict=state["optimizer"],
        )


def load_checkpoint(
    path: Path,
    policy: HFPolicy,
    learner: Learner,
    rng: random.Random,
    env_config: EnvConfig | None = None,
) -> tuple[int, TaskPool]:
    """Restore what :func:`save_checkpoint` wrote; returns ``(step, pool)``.

    The pool gets the duplicate threshold and size cap of ``env_config``. A checkpoint with
    ``dcp/`` (a multi-process run's) loads model and optimizer from its shards, on every rank
    (collective), whatever the number of ranks now.
    """
    env_config = env_config or EnvConfig()
    state = torch.load(path / "learner.pt", weights_only=False)
    if (path / "dcp").is_dir():
        learner_state = dict(state["learner"])
        learner_state["optimizer"] = learner.optimizer.state_dict()  # replaced just below
        learner.load_state_dict(learner_state)
        _load_sharded(path / "dcp", policy, learner)
    else:
        if collectives.world_size() > 1 and data_parallel.is_sharded(policy.model):
            raise ValueError(
                f"{path} was written by one process (no dcp/ folder): resume it with one "
                "process or --distributed.strategy ddp, not fsdp2"
            )
        policy.load_weights(path / "model")
        learner.load_state_dict(state["learner"])
    torch.set_rng_state(state["torch_rng"])
    policy.generator.set_state(state["policy_rng"])
    meta = json.loads((path / "state.json").read_text())
    rng.setstate(_as_tuple(meta["rng"]))
    pool = TaskPool.load(
        path / "pool.jsonl",
        near_duplicate_threshold=env_config.pool_near_duplicate_threshold,
        max_generated=env_config.pool_max_generated,
        frozen=env_config.pool_admission == "frozen",
    )
    return int(meta["step"]), pool



def truncate_metrics(path: Path, step: int) -> None:
    """Drop metric rows after ``step`` (written after the checkpoint a resume restarts from)."""
    if not path.exists():
        return
    from learners.reports.plots import read_metrics

    rows = [r for r in read_metrics(path) if r.get("step", 0) <= step]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    os.replace(tmp, path)

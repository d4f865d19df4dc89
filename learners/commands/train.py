"""``sage-env train``: preset < YAML (``--config``) < flags, then :func:`learners.training.loop.train`."""

from __future__ import annotations

import dataclasses
import logging
import sys
from pathlib import Path
from typing import Any

from learners.commands import register_command
from learners.commands.common import import_plugins, preparser


@register_command("train", summary="run SAGE self-play training (sage-env train --help)")
def train_command(argv: list[str]) -> int:
    """``sage-env train ARGS``; returns the exit status.

    2 on a config or preflight error; 130 / 143 when SIGINT / SIGTERM stopped the run, after
    one line naming the last complete checkpoint and the ``--resume`` command
    (:mod:`learners.training.interrupt`).
    """
    from learners.policy.model_check import PreflightError
    from learners.training.presets import PRESETS

    pre = preparser()
    pre.add_argument("--preset", default="demo", choices=sorted(PRESETS))
    pre.add_argument("--config", default=None, help="YAML file with TrainConfig fields")
    pre.add_argument("--no-progress", action="store_true")
    pre.add_argument("--algorithm", default=None)
    known, rest = pre.parse_known_args(argv)
    imports = list(known.imports)
    if known.config:  # a saved run's config.yaml names the modules its learner came from
        try:
            imports = _config_imports(known.config) + imports
        except (OSError, ValueError) as exc:
            print(f"sage-env train: error: {exc}", file=sys.stderr)
            return 2
    imports = _recorded_imports(imports)
    if not import_plugins(imports, "train"):
        return 2
    built = _config(known, rest, imports)
    if built is None:
        return 2
    cfg, base, preset = built
    from learners.training.loop import train
    from learners.training.run_checks import ignored_settings

    always = set(ignored_settings(cfg))  # train() logs these itself
    # settings changed from the preset that another one overrides; a saved run's config.yaml
    # holds every field (checked when that run started), so only the flags given now count
    reference = base if known.config and _is_saved_config(known.config, base) else preset
    for message in ignored_settings(cfg, reference):
        if message not in always:
            logging.getLogger("sage_env.train").warning("%s", message)
    from learners.training.interrupt import Interrupted, resume_hint, stop_on_signals

    try:
        with stop_on_signals():  # Ctrl-C, pre-emption: the step is abandoned, files stay whole
            metrics = train(cfg, progress=not known.no_progress)
    except (FileExistsError, ValueError, ImportError, PreflightError) as exc:
        print(f"sage-env train: error: {exc}", file=sys.stderr)
        return 2
    except Interrupted as exc:
        print(resume_hint(exc, cfg.out, argv), file=sys.stderr)
        return exc.exit_code
    logging.getLogger("sage_env.train").info(
        "done: %s", {k: v for k, v in metrics.items() if k.startswith(("reward/", "pool/"))}
    )
    summary = Path(cfg.out) / "heldout.md"  # TrainConfig.heldout: the run's held-out figure
    if summary.exists():
        print(summary.read_text(encoding="utf-8").rstrip())
    pool = Path(cfg.out) / "pool.jsonl"  # what self-evolution made: tasks that entered the pool
    if pool.exists():
        print(pool_summary(pool, metrics.get("step")))
    print(f"finished; artifacts in {cfg.out}")
    return 0


def pool_summary(pool: Path, steps: int | float | None = None) -> str:
    """The end-of-run line on the self-made tasks in ``pool`` (a run's ``pool.jsonl``).

    Args:
        pool: The pool file (:meth:`sage_env.tasks.pool.TaskPool.save`).
        steps: The last step played (the line says "over N steps"; left out when ``None``).
    """
    from learners.reports.run_data import admitted_counts, admitted_line
    from sage_env.tasks.task import read_jsonl

    return admitted_line(admitted_counts(read_jsonl(pool)), None if steps is None else int(steps))


def _config(known: Any, rest: list[str], imports: list[str]) -> tuple[Any, Any, Any] | None:
    """``(TrainConfig, its base, the preset)`` from preset < YAML < flags; None on an error.

    The base is the preset with ``--config``, ``--algorithm`` and ``--protocol`` applied;
    tyro parses the remaining flags over it (``--help`` exits here).
    """
    import tyro

    from learners.algorithms.registry import available_learners
    from learners.engines.registry import ENGINES
    from learners.training.config import (
        config_type,
        load_yaml_config,
        with_algorithm,
        with_protocol,
    )
    from learners.training.presets import PRESETS
    from sage_env.protocols import available_protocols

    preset = PRESETS[known.preset]
    base = preset
    try:
        if known.config:
            base = load_yaml_config(known.config, base, known.algorithm, known.protocol)
        else:
            if known.algorithm:
                base = with_algorithm(base, known.algorithm)
            if known.protocol:
                base = with_protocol(base, known.protocol)
        train_type = config_type(base.algorithm, base.env.protocol)
        algorithms = ", ".join(available_learners())
        protocols = ", ".join(available_protocols())
        engines = ", ".join(sorted(ENGINES.names()))
    except (OSError, ValueError, TypeError, ImportError) as exc:
        print(f"sage-env train: error: {exc}", file=sys.stderr)
        return None
    cfg = tyro.cli(
        train_type,
        default=base,
        args=rest,
        prog="sage-env train",
        description="Run SAGE training. Also accepts "
        f"--preset {{{','.join(sorted(PRESETS))}}} (debug: the smallest run, for developing "
        "a learner), --config FILE.yaml, "
        f"--protocol {{{protocols}}} (the --env.protocol-config.* flags are the chosen "
        "protocol's own settings: sage-env train --protocol NAME --help), "
        f"--algorithm {{{algorithms}}} (the --learner.* flags "
        "below are the chosen algorithm's: sage-env train --algorithm NAME --help), "
        "--import MODULE (repeatable: a module that registers a learner or protocol; "
        "recorded in config.yaml) and --no-progress. "
        f"Rollout engines (--rollout.engine): {{{engines}}}.",
    )
    cfg = dataclasses.replace(cfg, imports=tuple(imports), model=_recorded_model(cfg.model))
    return _one_budget(cfg, rest, known.config), base, preset


def _config_imports(path: str) -> list[str]:
    """The ``imports`` a YAML config records (``[]`` when none).

    Raises:
        ValueError: if the file is not YAML or ``imports`` is not a list of strings.
        OSError: if it cannot be read.
    """
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path} is not valid YAML: {exc}") from exc
    found = data.get("imports") if isinstance(data, dict) else None
    if found is None:
        return []
    if not isinstance(found, list) or not all(isinstance(m, str) for m in found):
        raise ValueError(f"{path}: imports must be a list of module names, got {found!r}")
    return list(found)


def _is_saved_config(path: str, cfg: Any) -> bool:
    """Whether the YAML file at ``path`` sets every top-level field of ``cfg``.

    True for a run's ``config.yaml``; False for a file of a few overrides, or one that cannot
    be read.
    """
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and {f.name for f in dataclasses.fields(cfg)} <= set(data)


def _recorded_imports(imports: list[str]) -> list[str]:
    """``--import`` modules as ``config.yaml`` records them: ``.py`` paths made absolute."""
    out: list[str] = []
    for name in imports:
        name = str(Path(name).resolve()) if name.endswith(".py") else name
        if name not in out:
            out.append(name)
    return out


def _recorded_model(model: str) -> str:
    """``--model`` as ``config.yaml`` records it.

    A local folder is made absolute, so the saved config re-runs from any working directory;
    an alias or hub id stays as given.
    """
    return str(Path(model).resolve()) if Path(model).is_dir() else model


def _one_budget(cfg: Any, argv: list[str], config: str | None) -> Any:
    """Apply the rule of ``--max-new-tokens``: given, it sets every phase's budget.

    ``--max-new-tokens N`` on the command line (or ``max_new_tokens`` in a ``--config``
    file that has no ``phase_max_new_tokens``) drops the preset's per-phase budgets, keeping
    only the phases named with ``--phase-max-new-tokens.PHASE`` (or given whole with
    ``--phase-max-new-tokens``), and says so.
    """
    heads = [a.split("=", 1)[0].replace("_", "-") for a in argv if a.startswith("--")]
    given = "--max-new-tokens" in heads
    if not given and config:
        import yaml

        data = yaml.safe_load(Path(config).read_text(encoding="utf-8")) or {}
        given = "max_new_tokens" in data and "phase_max_new_tokens" not in data
    if not given or not cfg.phase_max_new_tokens or "--phase-max-new-tokens" in heads:
        return cfg
    prefix = "--phase-max-new-tokens."
    named = {h[len(prefix) :] for h in heads if h.startswith(prefix)}
    keep = {k: v for k, v in cfg.phase_max_new_tokens.items() if k.replace("_", "-") in named}
    dropped = sorted(set(cfg.phase_max_new_tokens) - set(keep))
    logging.getLogger("sage_env.train").info(
        "--max-new-tokens %d sets every phase: the preset's per-phase budgets of %s are "
        "dropped (set one phase with --phase-max-new-tokens.PHASE N)",
        cfg.max_new_tokens,
        ", ".join(dropped),
    )
    return dataclasses.replace(cfg, phase_max_new_tokens=keep)

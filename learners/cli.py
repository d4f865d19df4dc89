"""Command line: ``sage-env train ...`` (also ``python -m learners train ...``).

Config precedence: preset (``--preset demo`` by default) < YAML file (``--config FILE``) <
flags (``--steps 5 --learner.lr 1e-6 --env.rewards.alpha 0.6``). ``sage-env train --help``
lists every flag with its documentation; ``--algorithm NAME`` is read first, so the
``--learner.*`` flags (and the YAML ``learner:`` keys) are that algorithm's config; likewise
``--protocol NAME`` (or ``--env.protocol NAME``; train, play) is read first, so the
``--env.protocol-config.*`` flags (YAML ``env: {protocol_config: ...}``) are that protocol's
own settings.
``--import MODULE`` (train, play; repeatable) imports a module that registers a learner or a
protocol before names are resolved; installed packages can declare entry points instead
(``learners.algorithms.plugins``).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic

from learners.policy import DEFAULT_MODEL
from sage_env.config import MOVED_REWARD_FIELDS, EnvConfig, ProtocolConfigT

USAGE = """usage: sage-env COMMAND [options]

commands:
  train    run SAGE self-play training (sage-env train --help)
  play     step one round turn by turn and see every reward term (sage-env play --help)
  eval     pass@k of a model on math and code benchmarks (sage-env eval --help)
  compare  protocols side by side under one learner, several seeds (sage-env compare --help)
  decontam n-gram overlap between the seeds (or a run's pool) and each benchmark
  export   write a run's checkpoint (LoRA merged) as a plain transformers model
  report   one self-contained HTML page of one or more runs (sage-env report RUN --out F)
"""


@dataclass
class DecontamConfig:
    """Options of ``sage-env decontam``."""

    benchmarks: str = "gsm8k,math500,humaneval,humaneval_plus,mbpp,mbpp_plus"
    """Comma-separated benchmark names (default: the ones shipped with sage-env; aime24, aime25,
    amc23 and olympiadbench load from --data-dir or, with a network, the Hugging Face hub)."""
    pool: str | None = None
    """A run's pool.jsonl to check instead of the bundled seeds."""
    n: int = 13
    """Word n-gram size."""
    data_dir: str | None = None
    """Benchmark folder (default ``$SAGE_ENV_DATA``, else the shipped files; layout:
    ``learners.evaluation.benchmarks``)."""
    out: str | None = None
    """Write the item-by-item report as JSON here."""


def _eval(argv: list[str]) -> int:
    import tyro

    from learners.evaluation.run import EvalConfig, run_eval
    from learners.evaluation.scoring import markdown_table

    cfg = tyro.cli(
        EvalConfig,
        args=argv,
        prog="sage-env eval",
        description="pass@1 and unbiased pass@k on math and code benchmarks (files shipped "
        "in learners/data/benchmarks; --data-dir for your own copy; the Hugging Face hub for "
        'the rest, with pip install "sage-env[hub]").',
    )
    try:
        results = run_eval(cfg)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"sage-env eval: error: {exc}", file=sys.stderr)
        return 2
    print(markdown_table(results))
    print(f"results in {cfg.out}")
    return 0


def _compare(argv: list[str]) -> int:
    import tyro

    from learners.reports.compare import CompareConfig, run_compare
    from learners.training.preflight import PreflightError

    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE")
    known, rest = pre.parse_known_args(argv)
    cfg = tyro.cli(
        CompareConfig,
        args=rest,
        prog="sage-env compare",
        description="Train every protocol arm with one learner, once per seed, on an equal "
        "budget of steps; report verifier accuracy on the same held-out items for every arm "
        "(like for like) and each protocol's own reward apart, as mean and spread over seeds "
        "(table.md, summary.json, compare.png). --import MODULE (repeatable) registers a "
        "learner or protocol first.",
    )
    cfg = dataclasses.replace(cfg, imports=(*cfg.imports, *known.imports))
    try:
        summary = run_compare(cfg)
    except (ValueError, ImportError, FileExistsError, OSError, PreflightError) as exc:
        print(f"sage-env compare: error: {exc}", file=sys.stderr)
        return 2
    print(summary["table"])
    print(f"results in {cfg.out}")
    return 0


def _export(argv: list[str]) -> int:
    import tyro

    from learners.training.export import ExportConfig, export_model

    cfg = tyro.cli(
        ExportConfig,
        args=argv,
        prog="sage-env export",
        description="Write a training run's checkpoint as one model that plain transformers "
        "loads (AutoModelForCausalLM.from_pretrained): LoRA adapters are merged into the base.",
    )
    try:
        out = export_model(cfg)
    except (ValueError, FileNotFoundError, FileExistsError, OSError, RuntimeError) as exc:
        print(f"sage-env export: error: {exc}", file=sys.stderr)
        return 2
    print(f"exported to {out}")
    return 0


def _report(argv: list[str]) -> int:
    import tyro

    from learners.reports.run_report import ReportConfig, report_from_config

    cfg = tyro.cli(
        ReportConfig,
        args=argv,
        prog="sage-env report",
        description="One self-contained HTML page (opens offline) of one or more run folders: "
        "curves (runs overlaid), the pool's lineage, the critic probe and every round.",
        config=(tyro.conf.PositionalRequiredArgs,),
    )
    try:
        out = report_from_config(cfg)
    except (ValueError, FileNotFoundError, OSError) as exc:
        print(f"sage-env report: error: {exc}", file=sys.stderr)
        return 2
    print(f"report written to {out}")
    return 0


def _decontam(argv: list[str]) -> int:
    import json

    import tyro

    from learners.evaluation.decontam import overlap_report
    from learners.evaluation.benchmarks import load_benchmark
    from sage_env.tasks import read_jsonl

    cfg = tyro.cli(
        DecontamConfig,
        args=argv,
        prog="sage-env decontam",
        description="Word n-gram overlap between training tasks and benchmarks.",
    )
    try:
        tasks = read_jsonl(cfg.pool) if cfg.pool else None
        reports = [
            overlap_report(load_benchmark(b.strip(), cfg.data_dir), cfg.n, tasks, b)
            for b in cfg.benchmarks.split(",")
            if b.strip()
        ]
    except (ValueError, FileNotFoundError, OSError, RuntimeError) as exc:
        print(f"sage-env decontam: error: {exc}", file=sys.stderr)
        return 2
    print("| benchmark | items | overlapping | share | flagged |\n|---|---|---|---|---|")
    for r in reports:
        print(
            f"| {r.benchmark} | {r.items} | {len(r.overlapping)} | {100 * r.share:.1f}% | "
            f"{'yes' if r.contaminated else 'no'} |"
        )
    for r in reports:
        for item_id, hits in r.matches.items():
            print(f"{r.benchmark}\t{item_id}\t" + ", ".join(f"{t} ({c:.0%})" for t, c in hits))
    if cfg.out:
        with open(cfg.out, "w", encoding="utf-8") as fh:
            json.dump(
                [
                    {
                        "benchmark": r.benchmark,
                        "items": r.items,
                        "share": r.share,
                        "contaminated": r.contaminated,
                        "matches": r.matches,
                    }
                    for r in reports
                ],
                fh,
                indent=1,
            )
    return 0


@dataclass
class PlayConfig(Generic[ProtocolConfigT]):
    """Options of ``sage-env play`` (``PlayConfig[AZRConfig]``: ``env.protocol_config`` type)."""

    seed: int = 0
    """Reset seed of the round (picks the reference and pool tasks)."""
    players: str = "scripted"
    """Who plays: one kind for all agents, or ``role=kind`` pairs separated by commas, e.g.
    ``challenger=human,solver=oracle`` (others scripted). Kinds: human (type the action,
    end with a line '.'), scripted (well-formed answers), oracle (scripted, but the solver
    gives the gold answer), model (the --model policy)."""
    model: str = DEFAULT_MODEL
    """Model for ``model`` players (alias, hub id or path)."""
    max_new_tokens: int = 256
    """Completion budget of ``model`` players."""
    replay: str | None = None
    """Re-score a round saved with --save: same seed, actions and environment config as when
    it was saved (``--env.*`` flags given explicitly override the saved config)."""
    save: str | None = None
    """Write the played round as JSON, for --replay."""
    env: EnvConfig[ProtocolConfigT] = field(default_factory=EnvConfig)
    """Environment configuration (gates, reward weights, k; the protocol's own settings in
    ``env.protocol_config``, flags ``--env.protocol-config.*`` after ``--protocol NAME``)."""


def _players(spec: str, cfg: PlayConfig, agents: list[str] | None = None) -> dict:
    from sage_env.play import PLAYERS
    from sage_env.protocols import make_protocol

    agents = list(agents or make_protocol(cfg.env.protocol).agents)
    kinds = dict.fromkeys(agents, "scripted")
    if "=" not in spec:
        kinds = dict.fromkeys(agents, spec.strip())
    else:
        for pair in spec.split(","):
            role, _, kind = pair.partition("=")
            agent = role.strip() if role.strip().endswith("_0") else f"{role.strip()}_0"
            if agent not in kinds:
                roles = ", ".join(a.rsplit("_", 1)[0] for a in agents)
                raise ValueError(
                    f"unknown role {role!r} for protocol {cfg.env.protocol!r}; roles: {roles}"
                )
            kinds[agent] = kind.strip()
    players = {}
    model_player = None
    for agent, kind in kinds.items():
        if kind == "model":
            if model_player is None:
                model_player = _model_player(cfg)
            players[agent] = model_player
        elif kind in PLAYERS:
            players[agent] = PLAYERS[kind]
        else:
            raise ValueError(f"unknown player kind {kind!r}; kinds: {sorted(PLAYERS)} + model")
    return players


def _model_player(cfg: PlayConfig):
    from learners.policy import HFPolicy, SamplingConfig

    policy = HFPolicy(cfg.model, seed=cfg.seed)
    sampling = SamplingConfig(max_new_tokens=cfg.max_new_tokens, do_sample=False)

    def player(agent, obs, info, env):
        return policy.generate([obs], sampling)[0].action  # prefix + completion

    return player


def _play(argv: list[str]) -> int:
    import tyro

    import sage_env
    from learners.training.tyro_types import protocol_config_type
    from sage_env.play import PlayStopped, RoundRecord, play, replay, summary

    known, argv = _preparser().parse_known_args(argv)
    if not _import(known.imports, "play") or not _no_moved_flags(argv, "play"):
        return 2
    peek = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    peek.add_argument("--replay", default=None)
    saved = None
    try:
        replay_path = peek.parse_known_args(argv)[0].replay
        if replay_path:
            # the saved config is the default; --env.* flags given now override it
            saved = RoundRecord.load(replay_path)
            env_default = _saved_env_config(saved.config, known.protocol)
        else:
            env_default = EnvConfig().with_protocol(known.protocol or "sage")
        play_type = PlayConfig[protocol_config_type(env_default.protocol)]
    except (OSError, ValueError) as exc:
        print(f"sage-env play: error: {exc}", file=sys.stderr)
        return 2
    cfg = tyro.cli(
        play_type,
        default=PlayConfig(env=env_default),
        args=argv,
        prog="sage-env play",
        description="Step one SAGE round turn by turn; prints every observation, "
        "action, parsed field, verifier verdict, gate and reward term. Also accepts "
        "--import MODULE (repeatable: a module that registers a protocol) and --protocol "
        "NAME (read first: the --env.protocol-config.* flags are that protocol's settings).",
    )
    env = None
    try:
        env = sage_env.env(cfg.env, render_mode="human")
        if saved is not None:
            record = replay(env, saved)
        else:
            record = play(env, _players(cfg.players, cfg, env.possible_agents), seed=cfg.seed)
    except PlayStopped as exc:  # a human player's stdin ended: show what was played
        if exc.record is not None and exc.record.rewards:
            print("\n" + summary(exc.record))
        print(f"sage-env play: stopped: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"sage-env play: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if env is not None:
            env.close()
    print("\n" + summary(record))
    if cfg.save:
        record.save(cfg.save)
        print(f"saved to {cfg.save}")
    return 0


def _saved_env_config(saved: dict, protocol: str | None = None) -> EnvConfig:
    """The EnvConfig saved with a round (keys this version does not know are ignored).

    Reward fields saved under their old names move to ``protocol_config``
    (:func:`learners.training.config.config_from_dict`); ``protocol``, when given, replaces the
    saved protocol (its settings then take their defaults).

    Raises:
        ValueError: if a saved value does not fit its field.
    """
    from learners.training.loop import config_from_dict

    known = {f.name for f in dataclasses.fields(EnvConfig)}
    env = {k: v for k, v in saved.items() if k in known}
    if protocol and protocol != env.get("protocol"):
        env.pop("protocol_config", None)
    return config_from_dict({"env": env}, protocol=protocol).env


def _preparser() -> argparse.ArgumentParser:
    """Options read before tyro builds the config (they choose which config tyro builds)."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE")
    pre.add_argument("--protocol", "--env.protocol", dest="protocol", default=None, help="the game")
    return pre


def _no_moved_flags(argv: list[str], command: str) -> bool:
    """Print where an old-named flag went (``--env.rewards.azr-format-penalty``); False if any.

    In YAML and Python the old names still work (with a warning); a flag is typed by hand,
    so an error naming the new flag is the quicker fix.
    """
    for arg in argv:
        head = arg.split("=", 1)[0]
        if not head.startswith("--env.rewards."):
            continue
        name = head[len("--env.rewards.") :].replace("-", "_")
        name = name[3:] if name.startswith("no_") else name
        if name in MOVED_REWARD_FIELDS:
            owner, new = MOVED_REWARD_FIELDS[name]
            print(
                f"sage-env {command}: error: {head} moved to the settings of protocol "
                f"{owner!r}: use --protocol {owner} --env.protocol-config."
                f"{new.replace('_', '-')} (YAML: env.protocol_config.{new})",
                file=sys.stderr,
            )
            return False
    return True


def _import(imports: list[str], command: str) -> bool:
    """Import ``--import`` modules; print the error and return False if one fails."""
    from learners.algorithms.plugins import import_modules

    try:
        import_modules(imports)
    except ImportError as exc:
        print(f"sage-env {command}: error: {exc}", file=sys.stderr)
        return False
    return True


def _train(argv: list[str]) -> int:
    import tyro

    from learners.algorithms.registry import available_learners
    from learners.training.preflight import PreflightError
    from learners.training.loop import (
        PRESETS,
        config_type,
        load_yaml_config,
        train,
        with_algorithm,
        with_protocol,
    )
    from sage_env.protocols import available_protocols

    pre = _preparser()
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
    if not _import(imports, "train") or not _no_moved_flags(rest, "train"):
        return 2
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
    except (OSError, ValueError, TypeError, ImportError) as exc:
        print(f"sage-env train: error: {exc}", file=sys.stderr)
        return 2
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
        "recorded in config.yaml) and --no-progress.",
    )
    cfg = dataclasses.replace(cfg, imports=tuple(imports), model=_recorded_model(cfg.model))
    cfg = _one_budget(cfg, rest, known.config)
    from learners.training.run_checks import ignored_settings

    always = set(ignored_settings(cfg))  # train() logs these itself
    # settings changed from the preset that another one overrides; a saved run's config.yaml
    # holds every field (checked when that run started), so only the flags given now count
    reference = base if known.config and _is_saved_config(known.config, base) else preset
    for message in ignored_settings(cfg, reference):
        if message not in always:
            logging.getLogger("sage_env.train").warning("%s", message)
    try:
        metrics = train(cfg, progress=not known.no_progress)
    except (FileExistsError, ValueError, ImportError, PreflightError) as exc:
        print(f"sage-env train: error: {exc}", file=sys.stderr)
        return 2
    logging.getLogger("sage_env.train").info(
        "done: %s", {k: v for k, v in metrics.items() if k.startswith(("reward/", "pool/"))}
    )
    print(f"finished; artifacts in {cfg.out}")
    return 0


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


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``sage-env`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=os.environ.get("SAGE_ENV_LOGLEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    command, rest = argv[0], argv[1:]
    if command == "train":
        return _train(rest)
    if command == "play":
        return _play(rest)
    if command == "eval":
        return _eval(rest)
    if command == "decontam":
        return _decontam(rest)
    if command == "compare":
        return _compare(rest)
    if command == "export":
        return _export(rest)
    if command == "report":
        return _report(rest)
    print(f"sage-env: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())

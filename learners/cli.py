"""Command line: ``sage-env train ...`` (also ``python -m learners train ...``).

Config precedence: preset (``--preset demo`` by default) < YAML file (``--config FILE``) <
flags (``--steps 5 --learner.lr 1e-6 --env.rewards.alpha 0.6``). ``sage-env train --help``
lists every flag with its documentation.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

USAGE = """usage: sage-env COMMAND [options]

commands:
  train    run SAGE self-play training (sage-env train --help)
"""


def _train(argv: list[str]) -> int:
    import tyro

    from learners.train import PRESETS, load_yaml_config, train

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--preset", default="demo", choices=sorted(PRESETS))
    pre.add_argument("--config", default=None, help="YAML file with TrainConfig fields")
    pre.add_argument("--no-progress", action="store_true")
    known, rest = pre.parse_known_args(argv)
    base = PRESETS[known.preset]
    if known.config:
        try:
            base = load_yaml_config(known.config, base)
        except (OSError, ValueError) as exc:
            print(f"sage-env train: error: {exc}", file=sys.stderr)
            return 2
    cfg = tyro.cli(
        type(base),
        default=base,
        args=rest,
        prog="sage-env train",
        description="Run SAGE training. Also accepts --preset {demo,paper}, "
        "--config FILE.yaml and --no-progress.",
    )
    try:
        metrics = train(cfg, progress=not known.no_progress)
    except FileExistsError as exc:
        print(f"sage-env train: error: {exc}", file=sys.stderr)
        return 2
    logging.getLogger("sage_env.train").info(
        "done: %s", {k: v for k, v in metrics.items() if k.startswith(("reward/", "pool/"))}
    )
    print(f"finished; artifacts in {cfg.out}")
    return 0


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
    print(f"sage-env: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())

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

import importlib
import logging
import os
import sys

USAGE = """usage: sage-env COMMAND [options]

commands:
  train    run SAGE self-play training (sage-env train --help)
  play     step one round turn by turn and see every reward term (sage-env play --help)
  eval     pass@k of a model on math and code benchmarks (sage-env eval --help)
  compare  learners and protocols side by side, several seeds (sage-env compare --help)
  decontam n-gram overlap between the seeds (or a run's pool) and each benchmark
  export   write a run's checkpoint (LoRA merged) as a plain transformers model
  report   one self-contained HTML page of one or more runs (sage-env report RUN --out F)
  serve    the game as an OpenEnv server for other trainers (sage-env serve --help)
"""


COMMANDS = {
    "train": "learners.commands.train:train_command",
    "play": "learners.commands.play:play_command",
    "eval": "learners.commands.tools:eval_command",
    "decontam": "learners.commands.tools:decontam_command",
    "compare": "learners.commands.tools:compare_command",
    "export": "learners.commands.tools:export_command",
    "report": "learners.commands.tools:report_command",
    "serve": "learners.commands.serve:serve_command",
}
"""Command -> ``"module:function"`` taking the remaining arguments (imported when run)."""


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
    if command in COMMANDS:
        module, _, function = COMMANDS[command].partition(":")
        return getattr(importlib.import_module(module), function)(rest)
    print(f"sage-env: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())

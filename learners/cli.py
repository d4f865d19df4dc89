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
(``learners.algorithms.plugins``). The commands are registered with
``@register_command(name, summary=...)`` (:mod:`learners.commands`).
"""

from __future__ import annotations

import logging
import os
import sys


def usage() -> str:
    """The ``sage-env --help`` text: every registered command with its summary."""
    from learners.commands import COMMANDS

    rows = [f"  {name:<8} {COMMANDS.get(name).summary}" for name in COMMANDS.names()]
    return "usage: sage-env COMMAND [options]\n\ncommands:\n" + "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``sage-env`` console script.

    A reader that closes the pipe early (``sage-env train --help | head``) ends the command
    quietly, as the Python docs advise for ``BrokenPipeError`` (signal module, "Note on
    SIGPIPE"): stdout goes to ``/dev/null`` and the status is 1, with no traceback.
    """
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()  # a closed pipe raises here, inside the try
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush writes nowhere
        return 1


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=os.environ.get("SAGE_ENV_LOGLEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    from learners.commands import COMMANDS

    command, rest = argv[0], argv[1:]
    if command in COMMANDS:
        return COMMANDS.get(command).run(rest)
    print(f"sage-env: unknown command {command!r}\n\n{usage()}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())

"""The ``sage-env`` commands and their registry (:data:`COMMANDS`).

One module each: ``train``, ``play``, ``serve`` and the tools (``eval``, ``compare``,
``export``, ``report``, ``decontam``); :mod:`learners.cli` dispatches to them. Heavy imports
(torch, transformers) are inside the commands that need them.

A command is a function ``argv -> exit status`` registered with
``@register_command(name, summary=...)`` above it; :data:`COMMANDS` imports the command
modules on the first lookup.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sage_env.registry import Registry


@dataclass(frozen=True)
class CommandSpec:
    """A registered ``sage-env`` command.

    Attributes:
        name: The command (``sage-env NAME``).
        run: ``run(argv) -> exit status``, ``argv`` the arguments after the command.
        summary: One line for ``sage-env --help``.
    """

    name: str
    run: Callable[[list[str]], int]
    summary: str = ""


COMMANDS: Registry[CommandSpec] = Registry(
    "command",
    builtins=(
        "learners.commands.train",
        "learners.commands.play",
        "learners.commands.tools",
        "learners.commands.serve",
    ),
    entry=CommandSpec,
)
"""Command name -> :class:`CommandSpec` (the modules are imported when a command is run)."""


def register_command(
    name: str, run: Callable[[list[str]], int] | None = None, *, summary: str = ""
) -> Any:
    """Make ``run`` the command ``sage-env name``; as a decorator above the function.

    Returns:
        ``run`` (or, without it, a decorator that registers and returns its function).

    Raises:
        ValueError: if the name is taken.
    """
    return COMMANDS.register(name, run, summary=summary)

"""What ``sage-env train`` and ``sage-env play`` share: the options read before tyro builds
the config, ``--import``, and the error for a flag that moved."""

from __future__ import annotations

import argparse
import sys

from sage_env.config import MOVED_REWARD_FIELDS


def preparser() -> argparse.ArgumentParser:
    """Options read before tyro builds the config (they choose which config tyro builds)."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE")
    pre.add_argument("--protocol", "--env.protocol", dest="protocol", default=None, help="the game")
    return pre


def no_moved_flags(argv: list[str], command: str) -> bool:
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


def import_plugins(imports: list[str], command: str) -> bool:
    """Import ``--import`` modules; print the error and return False if one fails."""
    from learners.algorithms.plugins import import_modules

    try:
        import_modules(imports)
    except ImportError as exc:
        print(f"sage-env {command}: error: {exc}", file=sys.stderr)
        return False
    return True

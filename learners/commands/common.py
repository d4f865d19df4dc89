"""What ``sage-env train`` and ``sage-env play`` share: the options read before tyro builds
the config and ``--import``."""

from __future__ import annotations

import argparse
import sys


def preparser() -> argparse.ArgumentParser:
    """Options read before tyro builds the config (they choose which config tyro builds)."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE")
    pre.add_argument("--protocol", "--env.protocol", dest="protocol", default=None, help="the game")
    return pre


def import_plugins(imports: list[str], command: str) -> bool:
    """Import ``--import`` modules; print the error and return False if one fails."""
    from learners.algorithms.plugins import import_modules

    try:
        import_modules(imports)
    except ImportError as exc:
        print(f"sage-env {command}: error: {exc}", file=sys.stderr)
        return False
    return True

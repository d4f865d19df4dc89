"""``sage-env serve``: the game as an OpenEnv server (docs/guide/openenv.md; text, no torch)."""

from __future__ import annotations

import argparse
import importlib.util
import sys

from learners.commands import register_command
from learners.commands.common import import_plugins


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sage-env serve",
        description="Serve one protocol's round as an OpenEnv environment: one WebSocket "
        "session per client, each with its own AEC environment (own pool); one reset = one "
        "round. Needs openenv-core: pip install -e '.[openenv]'.",
    )
    p.add_argument("--protocol", default="sage", help="registered protocol (default: sage)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="EnvConfig.seed: the seed of a reset that gives none (default: none)",
    )
    p.add_argument(
        "--solver-samples", type=int, default=None, help="k, solver attempts per task (default: 2)"
    )
    p.add_argument(
        "--domains", default=None, help="comma-separated task domains (default: math,code)"
    )
    p.add_argument(
        "--turn-order", choices=("sequential", "interleaved"), default=None, help="turn order"
    )
    p.add_argument(
        "--math-grounding",
        choices=("program", "claim"),
        default="program",
        help="how a proposed math task gets its answer: 'program' (default here: computed by "
        "the proposal's own program, so a wrong claimed answer is never paid as truth) or "
        "'claim' (the paper's: the proposer's word; docs/reference/rewards.md, 'Math grounding')",
    )
    p.add_argument(
        "--pool-admission",
        choices=("gate", "solvable", "frozen"),
        default=None,
        help="which proposals join the pool (EnvConfig.pool_admission; docs/reference/rewards.md)",
    )
    p.add_argument(
        "--math-workers",
        type=int,
        default=1,
        help="math verifier processes per session (default 1: sessions run off the main "
        "thread, where the in-process verifier has no deadline)",
    )
    p.add_argument("--max-sessions", type=int, default=8, help="concurrent sessions (default: 8)")
    p.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import a module that registers a protocol (repeatable)",
    )
    return p


@register_command(
    "serve",
    summary="the game as an OpenEnv server for other trainers (sage-env serve --help)",
)
def serve_command(argv: list[str]) -> int:
    """Parse the flags, build the config and run the server until interrupted."""
    args = _parser().parse_args(argv)
    if args.max_sessions < 1:
        print("sage-env serve: error: --max-sessions must be >= 1", file=sys.stderr)
        return 2
    if importlib.util.find_spec("openenv") is None:
        print(
            "sage-env serve: error: openenv-core is not installed: pip install -e '.[openenv]'",
            file=sys.stderr,
        )
        return 2
    if not import_plugins(args.imports, "serve"):
        return 2
    import sage_env

    overrides = {
        "protocol": args.protocol,
        "math_workers": args.math_workers,
        "math_grounding": args.math_grounding,
    }
    if args.pool_admission is not None:
        overrides["pool_admission"] = args.pool_admission
    if args.seed is not None:
        overrides["seed"] = args.seed
    if args.solver_samples is not None:
        overrides["solver_samples"] = args.solver_samples
    if args.domains is not None:
        overrides["domains"] = tuple(d.strip() for d in args.domains.split(",") if d.strip())
    if args.turn_order is not None:
        overrides["turn_order"] = args.turn_order
    try:
        config = sage_env.EnvConfig(**overrides)
        sage_env.env(config).close()  # a bad setting fails here, before the server starts
        from sage_env.interactive.openenv_server import serve

        serve(config, host=args.host, port=args.port, max_sessions=args.max_sessions)
    except (ValueError, TypeError) as exc:
        print(f"sage-env serve: error: {exc}", file=sys.stderr)
        return 2
    return 0

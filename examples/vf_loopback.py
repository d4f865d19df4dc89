"""Tutorial: play the verifiers environment with no model server (docs/guide/verifiers_env.md).

A scripted model answers on 127.0.0.1 (sage_env.interactive.loopback.serve_chat) and verifiers'
own client plays whole rounds against it, one trace per turn with the game's reward.
Needs the verifiers venv (docs/guide/verifiers_env.md#install):

    .venv-verifiers/bin/python examples/vf_loopback.py --rounds 2
"""

from __future__ import annotations

import argparse



def main(argv: list[str] | None = None) -> list:
    """Play ``--rounds`` rounds of ``--protocol`` and print each turn's reward."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--protocol", default="sage")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--domains", default="math", help="comma-separated task domains")
    args = ap.parse_args(argv)
    try:
        import verifiers  # noqa: F401
    except ImportError:
        raise SystemExit(
            "vf_loopback: the `verifiers` package is not installed in this interpreter; it "
            "lives in its own venv: docs/guide/verifiers_env.md#install"
        ) from None
    from sage_env.interactive.vf_env import play_loopback

    episodes = play_loopback(
        args.protocol, rounds=args.rounds, domains=args.domains.split(","), solver_samples=2
    )
    for i, episode in enumerate(episodes):
        print(f"round {i}: ok={episode.ok}")
        for trace in episode.traces:
            sage = trace.info["sage"]
            print(f"  {sage['agent']:<13} {sage['phase']:<16} reward {trace.reward:.3f}")
    return episodes


if __name__ == "__main__":
    main()

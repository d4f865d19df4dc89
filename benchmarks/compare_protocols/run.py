"""Head-to-head of protocols under one learner: a thin wrapper of ``sage-env compare``.

Kept so older commands keep working; every option is ``sage-env compare``'s
(``learners/training/compare.py``: arms, seeds, the equal step budget, held-out verifier
accuracy for every arm and each protocol's own reward apart, ``table.md``, ``summary.json``,
``compare.png``). The default output folder is ``benchmarks/compare_protocols/results``.

Usage::

    python -m benchmarks.compare_protocols.run --protocols sage,azr,mae,rlvr --steps 4 --seeds 0 1
    python -m benchmarks.compare_protocols.run --protocols sage,sage-frozen-critic --import my.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from learners.cli import main as cli_main  # noqa: E402

OUT = Path(__file__).parent / "results"


def main(argv: list[str] | None = None) -> None:
    """Run ``sage-env compare`` with ``argv`` (default output: this folder's ``results/``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not any(a == "--out" or a.startswith("--out=") for a in argv):
        argv += ["--out", str(OUT)]
    raise SystemExit(cli_main(["compare", *argv]))


if __name__ == "__main__":
    main()

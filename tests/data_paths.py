"""Where tests read benchmark files: inside the checkout unless told otherwise (issue 36 item 9).

``RAW_DATA`` is ``$SAGE_ENV_DATA`` when set (a folder in the layout of
``learners.evaluation.benchmarks.BENCHMARK_FILES``, with the raw files the package does not
ship), else the files shipped in ``learners/data/benchmarks``. No test reads a path outside the
checkout by default: a test that needs a file the package does not ship skips, naming the file
and the variable (``.ci/run`` sets it where this workplace keeps the raw files).
"""

from pathlib import Path

import pytest

from learners.evaluation.benchmarks import default_data_dir

RAW_DATA: Path = default_data_dir()
"""The library's own rule (``$SAGE_ENV_DATA``, else the shipped files), read once."""


def missing(*files: str) -> list[str]:
    """Which of ``files`` (paths relative to the data folder) :data:`RAW_DATA` lacks."""
    return [f for f in files if not (RAW_DATA / f).exists()]


def needs(*files: str):
    """A ``skipif`` mark for a test that reads ``files`` under :data:`RAW_DATA`."""
    lacking = missing(*files)
    return pytest.mark.skipif(
        bool(lacking),
        reason=f"needs {', '.join(lacking)} under $SAGE_ENV_DATA (not shipped; sources: "
        "learners/data/benchmarks/README.md)",
    )


def require_benchmarks(*names: str) -> Path:
    """:data:`RAW_DATA`, or skip the calling test when a file of benchmark ``names`` is absent."""
    from learners.evaluation.benchmarks import BENCHMARK_FILES

    lacking = missing(*(BENCHMARK_FILES[n] for n in names if n in BENCHMARK_FILES))
    if lacking:
        pytest.skip(f"needs {', '.join(lacking)} under $SAGE_ENV_DATA (not shipped with sage-env)")
    return RAW_DATA

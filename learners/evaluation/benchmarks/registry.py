"""The benchmarks by name: :func:`register_benchmark` and :func:`load_benchmark`.

A benchmark family's module (``math_benchmarks``, ``code_benchmarks``, ``cruxeval``,
``livecodebench``) registers each of its benchmarks with the file its rows come from and the
function that turns rows into :class:`EvalItem` records. This module imports no family: the
package ``learners.evaluation.benchmarks`` imports them all (so importing this module, which
runs the package first, has them registered).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from learners.evaluation.benchmarks.files import benchmark_rows


@dataclass
class EvalItem:
    """One benchmark problem, ready to prompt and score.

    Attributes:
        benchmark: Benchmark name.
        item_id: Id within the benchmark.
        domain: ``"math"``, ``"code"`` or ``"exec"``.
        prompt: User message shown to the model.
        answer: Math: gold answer.
        tests: Code: independent test snippets (see :class:`~sage_env.tasks.Task`).
        test_setup: Code: run before the program's tests (imports, reference solution).
        entry_point: Code: the function under test.
        code_prefix: Code: text a completion continues when it is not a whole function.
        text: The problem text as the benchmark gives it (decontamination compares this).
    """

    benchmark: str
    item_id: str
    domain: str
    prompt: str
    answer: str | None = None
    tests: list[str] = field(default_factory=list)
    test_setup: str = ""
    entry_point: str | None = None
    code_prefix: str = ""
    text: str = ""
    """The benchmark's own problem text, without our instructions (used for decontamination)."""
    program: str = ""
    """Execution benchmarks (domain ``"exec"``, CRUXEval): the function ``f`` asked about;
    ``answer`` is then its output and ``tests`` holds its input."""
    prefix: str = ""
    """Response prefix the completion continues (``exec_heldout``: the execution solver's
    ```` ```output ```` opening, as in training); ``""`` for every other benchmark."""


Loader = Callable[..., "list[EvalItem]"]
"""``load(name, rows, plus_limit=..., source=...) -> list[EvalItem]``; ``rows`` is ``None``
for a benchmark without a file."""


@dataclass(frozen=True)
class BenchmarkSpec:
    """A registered benchmark.

    Attributes:
        name: Registry name (``sage-env eval --benchmarks``).
        load: Its :data:`Loader`.
        file: Its file in the data folder layout (``None``: loaded another way).
    """

    name: str
    load: Loader
    file: str | None = None


BENCHMARKS: dict[str, BenchmarkSpec] = {}
"""Benchmark name -> :class:`BenchmarkSpec`, in registration order."""

BENCHMARK_FILES: dict[str, str] = {}
"""Each local benchmark's file, relative to the data folder (the layout of ``--data-dir``)."""


def register_benchmark(name: str, load: Loader, file: str | None = None) -> None:
    """Make ``load`` available as benchmark ``name`` (reading ``file`` of the data layout).

    Raises:
        ValueError: if the name is taken.
    """
    if name in BENCHMARKS:
        raise ValueError(f"benchmark {name!r} is already registered")
    BENCHMARKS[name] = BenchmarkSpec(name, load, file)
    if file is not None:
        BENCHMARK_FILES[name] = file


def load_benchmark(
    name: str,
    data_dir: str | os.PathLike | None = None,
    plus_limit: int | None = 100,
    source: str = "auto",
) -> list[EvalItem]:
    """Load one benchmark from the data folder (by default the shipped files) or the hub.

    Args:
        name: One of :data:`BENCHMARKS`.
        data_dir: Data folder (default
            :func:`~learners.evaluation.benchmarks.files.default_data_dir`: ``$SAGE_ENV_DATA``
            or the shipped files).
        plus_limit: HumanEval+/MBPP+: at most this many plus inputs per task (``None``: all).
        source: ``auto``, ``local`` or ``hub``
            (:func:`~learners.evaluation.benchmarks.files.benchmark_rows`).

    Raises:
        ValueError: on an unknown benchmark or source.
        FileNotFoundError: if its file is missing (and the hub could not stand in).
        RuntimeError: for ``livecodebench`` or ``source="hub"`` without the ``datasets``
            package or a network.
    """
    spec = BENCHMARKS.get(name)
    if spec is None:
        raise ValueError(f"unknown benchmark {name!r}; available: {', '.join(BENCHMARKS)}")
    rows = benchmark_rows(spec.file, data_dir, source) if spec.file is not None else None
    return spec.load(name, rows, plus_limit=plus_limit, source=source)

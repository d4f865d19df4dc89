"""The benchmarks by name: :func:`register_benchmark` and :func:`load_benchmark`.

A benchmark family's module (``math_benchmarks``, ``code_benchmarks``, ``cruxeval``,
``livecodebench``) registers each of its benchmarks with the file its rows come from and the
function that turns rows into :class:`EvalItem` records (``@register_benchmark(name,
file=...)`` above a loader, or the plain call for a loader several benchmarks share).
:data:`BENCHMARKS` names those modules and imports them on the first lookup (a
:class:`sage_env.registry.Registry`); this module imports no family.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from learners.evaluation.benchmarks.files import benchmark_rows
from sage_env.registry import Registry


@dataclass
class EvalItem:
    """One benchmark problem, ready to prompt and score.

    Attributes:
        benchmark: Benchmark name.
        item_id: Id within the benchmark.
        domain: ``"math"``, ``"code"`` or ``"exec"``.
        prompt: User message shown to the model.
        answer: Math: gold answer.
        tests: Code: independent test snippets (see :class:`~sage_env.tasks.task.Task`).
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


BENCHMARKS: Registry[BenchmarkSpec] = Registry(
    "benchmark",
    builtins=(
        "learners.evaluation.benchmarks.math_benchmarks",
        "learners.evaluation.benchmarks.code_benchmarks",
        "learners.evaluation.benchmarks.cruxeval",
        "learners.evaluation.benchmarks.livecodebench",
    ),
    entry=BenchmarkSpec,
)
"""Benchmark name (``sage-env eval --benchmarks``) -> :class:`BenchmarkSpec`; :meth:`names`
lists them family by family, in registration order."""


def register_benchmark(
    name: str, load: Loader | None = None, file: str | None = None, overwrite: bool = False
) -> Any:
    """Make ``load`` available as benchmark ``name`` (reading ``file`` of the data layout).

    As a decorator above the loader, ``@register_benchmark("gsm8k", file="math/...")``; as a
    plain call, ``register_benchmark("math500", _load_plain, "math/math500_test.jsonl")``.

    Returns:
        ``load`` (or, without it, a decorator that registers and returns its function).

    Raises:
        ValueError: if the name is taken and ``overwrite`` is False.
    """
    return BENCHMARKS.register(name, load, overwrite=overwrite, file=file)


class _Layout(Mapping[str, str]):
    """Benchmark name -> its file in the data folder, read from :data:`BENCHMARKS`."""

    def __getitem__(self, name: str) -> str:
        file = BENCHMARKS.get(name).file if name in BENCHMARKS else None
        if file is None:
            raise KeyError(name)
        return file

    def __iter__(self) -> Iterator[str]:
        return (n for n in BENCHMARKS.names() if BENCHMARKS.get(n).file is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


BENCHMARK_FILES: Mapping[str, str] = _Layout()
"""Each local benchmark's file, relative to the data folder (the layout of ``--data-dir``)."""


def load_benchmark(
    name: str,
    data_dir: str | os.PathLike | None = None,
    plus_limit: int | None = 100,
    source: str = "auto",
) -> list[EvalItem]:
    """Load one benchmark from the data folder (by default the shipped files) or the hub.

    Args:
        name: One of :data:`BENCHMARKS` (``BENCHMARKS.names()``).
        data_dir: Data folder (default
            :func:`~learners.evaluation.benchmarks.files.default_data_dir`: ``$SAGE_ENV_DATA``
            or the shipped files).
        plus_limit: HumanEval+/MBPP+: at most this many plus inputs per task (``None``: all).
        source: ``auto``, ``local`` or ``hub``
            (:func:`~learners.evaluation.benchmarks.files.benchmark_rows`).

    Raises:
        ValueError: on an unknown benchmark (the message lists the registered ones) or source.
        FileNotFoundError: if its file is missing (and the hub could not stand in).
        RuntimeError: for ``livecodebench`` or ``source="hub"`` without the ``datasets``
            package or a network.
    """
    spec = BENCHMARKS.get(name)
    rows = benchmark_rows(spec.file, data_dir, source) if spec.file is not None else None
    return spec.load(name, rows, plus_limit=plus_limit, source=source)

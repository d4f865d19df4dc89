"""Tasks and the task pool.

A :class:`Task` is one math or code problem together with what an external verifier needs to
check an answer: a gold final answer for math, or independent test snippets for code.
:class:`sage_env.tasks.pool.TaskPool` holds the seed tasks plus every generated task the Challenger
got accepted, and persists as JSON Lines through :func:`write_jsonl` / :func:`read_jsonl`.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Literal

Domain = Literal["math", "code", "exec"]
SEED_SOURCES = ("math", "gsm8k", "humaneval", "mbpp")


@dataclass
class Task:
    r"""One problem and its verifier data.

    Attributes:
        task_id: Unique id, e.g. ``"gsm8k/train/17"`` or ``"gen/3/0/12"`` for generated tasks.
        domain: ``"math"`` (scored by :class:`sage_env.verifiers.MathVerifier`), ``"code"``
            (scored by :class:`sage_env.verifiers.CodeVerifier`) or ``"exec"`` (AZR's execution
            tasks, scored by running code: :mod:`sage_env.tasks.exec_tasks`).
        prompt: The problem statement shown to the model.
        answer: Math only: the gold final answer as LaTeX/plain text (``"72"``, ``"\\frac{1}{2}"``).
        tests: Code only: independent Python snippets. Each runs after ``test_setup`` and the
            candidate program in a fresh copy of the program's namespace and passes iff it raises
            nothing. The verifier's score is the fraction of snippets that pass.
        entry_point: Code only: the name of the function the tests call.
        test_setup: Code only: code run before the tests (imports, helper definitions).
        source: ``"math"``, ``"gsm8k"``, ``"humaneval"``, ``"mbpp"`` for seeds,
            ``"generated"`` for tasks written by the Challenger.
        parent_id: For generated tasks, the ``task_id`` of the reference task it came from.
        reference_solution: Optional known-good solution text (canonical code, or a worked
            math solution).
        meta: Free-form provenance (generation step, critic score, difficulty ...), JSON-safe.
    """

    task_id: str
    domain: Domain
    prompt: str
    answer: str | None = None
    tests: list[str] = field(default_factory=list)
    entry_point: str | None = None
    test_setup: str = ""
    source: str = "generated"
    parent_id: str | None = None
    reference_solution: str | None = None
    meta: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Return a JSON-serialisable dict (inverse of :meth:`from_dict`)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Task:
        """Build a task from a dict, ignoring unknown keys.

        Raises:
            ValueError: if ``task_id``, ``domain`` or ``prompt`` is missing or ``domain`` is
                not ``"math"``/``"code"``/``"exec"``.
        """
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        for key in ("task_id", "domain", "prompt"):
            if key not in kwargs:
                raise ValueError(f"task record is missing {key!r}: {str(data)[:200]}")
        if kwargs["domain"] not in ("math", "code", "exec"):
            raise ValueError(
                f"task domain must be 'math', 'code' or 'exec', got {kwargs['domain']!r}"
            )
        return cls(**kwargs)


def read_jsonl(path: str | os.PathLike) -> list[Task]:
    """Read tasks from a JSON Lines file, one :class:`Task` dict per line.

    Raises:
        ValueError: on a line that is not valid JSON or not a valid task (message names line).
    """
    tasks = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                tasks.append(Task.from_dict(json.loads(line)))
            except (json.JSONDecodeError, ValueError, TypeError) as exc:
                raise ValueError(f"{path}:{lineno}: {exc}") from exc
    return tasks


def write_jsonl(tasks: Iterable[Task], path: str | os.PathLike) -> None:
    """Write tasks as JSON Lines atomically.

    The file is written to a temp file and renamed (``os.replace``), so a killed process never
    leaves a half-written file behind.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for task in tasks:
                fh.write(json.dumps(task.to_dict(), ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_validation(limit: int | None = None) -> list[Task]:
    """Return the held-out validation tasks (200: 100 MATH + 100 GSM8K train, none a seed).

    Built with the seeds by ``scripts/build_seeds.py``; training evaluates on them for the
    validation curve and early stopping.

    Args:
        limit: At most this many tasks, taken from each source in turn (MATH, GSM8K, MATH,
            ...) so that a small subset holds both sources in equal shares; ``None``: all 200
            in file order.
    """
    with resources.as_file(resources.files("sage_env") / "data" / "validation.jsonl") as path:
        tasks = read_jsonl(path)
    if limit is None:
        return tasks
    by_source: dict[str, list[Task]] = {}
    for task in tasks:
        by_source.setdefault(task.source, []).append(task)
    picked: list[Task] = []
    queues = [list(reversed(q)) for q in by_source.values()]
    while len(picked) < limit and any(queues):
        for queue in queues:
            if queue and len(picked) < limit:
                picked.append(queue.pop())
    return picked


def load_seeds() -> list[Task]:
    """Return the 500 bundled seed tasks (156 MATH + 148 GSM8K + 87 HumanEval + 109 MBPP).

    The file ``sage_env/data/seeds.jsonl`` is built by ``scripts/build_seeds.py``; sources and
    licenses are in ``sage_env/data/ATTRIBUTION.md``.
    """
    with resources.as_file(resources.files("sage_env") / "data" / "seeds.jsonl") as path:
        return read_jsonl(path)

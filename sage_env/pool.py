"""The task pool: seeds plus every generated task that passed the quality gate."""

from __future__ import annotations

import hashlib
import os
import random
import re
from collections.abc import Iterable

from sage_env.tasks import Task, read_jsonl, write_jsonl


def _fingerprint(task: Task) -> str:
    norm = re.sub(r"\s+", " ", task.prompt.strip().lower())
    return hashlib.sha1(f"{task.domain}\x00{norm}".encode("utf-8", "replace")).hexdigest()


class TaskPool:
    """Seed and generated tasks, with exact-duplicate rejection and JSONL persistence.

    Several environment copies may share one pool, so tasks accepted in one round are drawn
    by planners in all of them. Duplicate detection compares prompts after lower-casing and
    collapsing whitespace.

    Args:
        tasks: Initial tasks (usually :func:`sage_env.load_seeds`).
    """

    def __init__(self, tasks: Iterable[Task] = ()) -> None:
        self._tasks: list[Task] = []
        self._seen: set[str] = set()
        self._generated = 0
        for task in tasks:
            self.add(task)

    def __len__(self) -> int:
        return len(self._tasks)

    def __contains__(self, task: object) -> bool:
        """True when a task with the same domain and normalised prompt is in the pool."""
        return isinstance(task, Task) and _fingerprint(task) in self._seen

    def __iter__(self):
        return iter(self._tasks)

    @property
    def tasks(self) -> list[Task]:
        """All tasks, seeds first, in insertion order (do not mutate)."""
        return self._tasks

    @property
    def num_generated(self) -> int:
        """Number of generated (non-seed) tasks in the pool."""
        return self._generated

    def next_id(self) -> str:
        """Id for the next generated task: ``"gen/<n>"``."""
        return f"gen/{self._generated}"

    def add(self, task: Task) -> bool:
        """Add ``task`` unless an identical prompt in the same domain is already present.

        Returns:
            True if added, False if rejected as a duplicate.
        """
        key = _fingerprint(task)
        if key in self._seen:
            return False
        self._seen.add(key)
        self._tasks.append(task)
        if task.source == "generated":
            self._generated += 1
        return True

    def sample(self, rng: random.Random, domain: str | None = None) -> Task:
        """Draw one task uniformly, optionally within ``domain``.

        Raises:
            ValueError: if the pool has no task in ``domain``.
        """
        if domain is None:
            if not self._tasks:
                raise ValueError("the task pool is empty")
            return self._tasks[rng.randrange(len(self._tasks))]
        candidates = [t for t in self._tasks if t.domain == domain]
        if not candidates:
            raise ValueError(f"the task pool has no {domain!r} task")
        return candidates[rng.randrange(len(candidates))]

    def save(self, path: str | os.PathLike) -> None:
        """Write every task to ``path`` as JSON Lines, atomically."""
        write_jsonl(self._tasks, path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> TaskPool:
        """Read a pool written by :meth:`save`.

        Raises:
            ValueError: on a malformed line (the message names the line).
        """
        return cls(read_jsonl(path))

"""The task pool: seeds plus every generated task that passed the quality gate."""

from __future__ import annotations

import hashlib
import os
import random
import re
from collections.abc import Iterable, Iterator

from sage_env.tasks import Task, read_jsonl, write_jsonl

_WORD_RE = re.compile(r"\w+", re.UNICODE)


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().lower())


def _fingerprint(task: Task) -> str:
    key = f"{task.domain}\x00{_normalise(task.prompt)}"
    return hashlib.sha1(key.encode("utf-8", "replace")).hexdigest()


def shingles(text: str, n: int = 3) -> frozenset[str]:
    """Word ``n``-grams of lower-cased ``text`` (the whole word list when shorter than n)."""
    words = _WORD_RE.findall(text.lower()[:20_000])
    if len(words) < n:
        return frozenset([" ".join(words)]) if words else frozenset()
    return frozenset(" ".join(words[i : i + n]) for i in range(len(words) - n + 1))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard similarity ``|a & b| / |a | b|`` in [0, 1] (1.0 for two empty sets)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


class TaskPool:
    """Seed and generated tasks, with duplicate rejection, a size cap and JSONL persistence.

    Several environment copies may share one pool, so tasks accepted in one round are drawn
    by planners in all of them.

    Duplicates: a task whose prompt equals one already in the pool (same domain, after
    lower-casing and collapsing whitespace) is rejected. A *generated* task is also rejected
    when the Jaccard similarity of its word-3-gram set with a task of the same domain is at
    least ``near_duplicate_threshold`` (seeds are only checked for exact duplicates).

    Eviction: when more than ``max_generated`` generated tasks are present, the oldest
    generated task is removed first (FIFO); seeds are never evicted.

    Args:
        tasks: Initial tasks (usually :func:`sage_env.load_seeds`).
        near_duplicate_threshold: Jaccard threshold in (0, 1]; ``None`` disables the check.
        max_generated: Cap on generated tasks; ``None`` for no cap.

    Raises:
        ValueError: on a threshold outside (0, 1] or a negative cap.
    """

    def __init__(
        self,
        tasks: Iterable[Task] = (),
        near_duplicate_threshold: float | None = 0.9,
        max_generated: int | None = None,
    ) -> None:
        if near_duplicate_threshold is not None and not 0 < near_duplicate_threshold <= 1:
            raise ValueError(
                f"near_duplicate_threshold must be in (0, 1], got {near_duplicate_threshold}"
            )
        if max_generated is not None and max_generated < 0:
            raise ValueError(f"max_generated must be >= 0, got {max_generated}")
        self.near_duplicate_threshold = near_duplicate_threshold
        self.max_generated = max_generated
        self._tasks: list[Task] = []
        self._seen: dict[str, str] = {}  # fingerprint -> task_id
        self._shingles: dict[str, frozenset[str]] = {}  # task_id -> shingles
        self._generated = 0
        self._ever_generated = 0
        self.evicted = 0
        """Number of generated tasks removed by the size cap so far."""
        for task in tasks:
            self.add(task)

    def __len__(self) -> int:
        return len(self._tasks)

    def __contains__(self, task: object) -> bool:
        """True when a task with the same domain and normalised prompt is in the pool."""
        return isinstance(task, Task) and _fingerprint(task) in self._seen

    def __iter__(self) -> Iterator[Task]:
        return iter(self._tasks)

    @property
    def tasks(self) -> list[Task]:
        """All tasks, seeds first, in insertion order (do not mutate)."""
        return self._tasks

    @property
    def num_generated(self) -> int:
        """Number of generated (non-seed) tasks now in the pool."""
        return self._generated

    def new_id(self) -> str:
        """Reserve a unique id for a generated task: ``"gen/<n>"``.

        Ids are reserved when a task is proposed, before it is accepted, so environment
        copies sharing the pool never hand out the same id; rejected proposals leave gaps.
        """
        self._ever_generated += 1
        return f"gen/{self._ever_generated - 1}"

    def duplicate_of(self, task: Task) -> str | None:
        """Why ``task`` would be rejected as a duplicate, or ``None`` if it would not.

        Returns:
            A short reason naming the matching task, e.g.
            ``"near duplicate of gen/3 (Jaccard 0.93)"``.
        """
        match = self._seen.get(_fingerprint(task))
        if match is not None:
            return f"exact duplicate of {match}"
        if task.source != "generated" or self.near_duplicate_threshold is None:
            return None
        mine = shingles(task.prompt)
        t = self.near_duplicate_threshold
        for other in self._tasks:
            if other.domain != task.domain:
                continue
            theirs = self._shingles[other.task_id]
            small, big = sorted((len(mine), len(theirs)))
            if big and small / big < t:  # Jaccard <= small / big: cannot reach t
                continue
            sim = jaccard(mine, theirs)
            if sim >= t:
                return f"near duplicate of {other.task_id} (Jaccard {sim:.2f})"
        return None

    def add(self, task: Task) -> bool:
        """Add ``task`` unless :meth:`duplicate_of` finds a match; apply the size cap.

        Returns:
            True if added, False if rejected as a duplicate.
        """
        if self.duplicate_of(task) is not None:
            return False
        self._seen[_fingerprint(task)] = task.task_id
        self._shingles[task.task_id] = shingles(task.prompt)
        self._tasks.append(task)
        if task.source == "generated":
            self._generated += 1
            self._evict()
        return True

    def _evict(self) -> None:
        if self.max_generated is None:
            return
        while self._generated > self.max_generated:
            idx = next(i for i, t in enumerate(self._tasks) if t.source == "generated")
            old = self._tasks.pop(idx)
            self._seen.pop(_fingerprint(old), None)
            self._shingles.pop(old.task_id, None)
            self._generated -= 1
            self.evicted += 1

    def snapshot(self) -> TaskPool:
        """An independent copy: same tasks, order, settings, id counter and eviction count.

        Tasks are shared (they are not mutated), the indexes are copied, so adding to either
        pool leaves the other unchanged. Used with :meth:`restore` to roll a pool back.
        """
        copy = TaskPool(
            near_duplicate_threshold=self.near_duplicate_threshold,
            max_generated=self.max_generated,
        )
        copy.restore(self)
        return copy

    def restore(self, snapshot: TaskPool) -> None:
        """Make this pool (in place, so environments holding it see it) equal to ``snapshot``."""
        self._tasks = list(snapshot._tasks)
        self._seen = dict(snapshot._seen)
        self._shingles = dict(snapshot._shingles)
        self._generated = snapshot._generated
        self._ever_generated = snapshot._ever_generated
        self.evicted = snapshot.evicted

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
    def load(cls, path: str | os.PathLike, **kwargs) -> TaskPool:
        """Read a pool written by :meth:`save` (``kwargs`` as for the constructor).

        Raises:
            ValueError: on a malformed line (the message names the line).
        """
        pool = cls(**kwargs)
        for task in read_jsonl(path):
            pool._tasks.append(task)  # trust the saved pool: no duplicate check, no cap
            pool._seen[_fingerprint(task)] = task.task_id
            pool._shingles[task.task_id] = shingles(task.prompt)
            if task.source == "generated":
                pool._generated += 1
                num = task.task_id.rsplit("/", 1)[-1]
                nxt = int(num) + 1 if num.isdigit() else pool._ever_generated + 1
                pool._ever_generated = max(pool._ever_generated, nxt)
        return pool

"""The task pool: seeds plus every generated task that passed the quality gate."""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import os
import random
import re
import warnings
from collections.abc import Iterable, Iterator

from sage_env.tasks.exec_tasks import ExecSpec, exec_mode, solver_question
from sage_env.tasks.novelty import PARSE_ERRORS, normalise_program
from sage_env.tasks.task import Task, read_jsonl, write_jsonl

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


class _SortSets(ast.NodeTransformer):
    """Sorts the elements of every set display (their written order is not their value)."""

    def visit_Set(self, node: ast.Set) -> ast.Set:
        self.generic_visit(node)
        node.elts.sort(key=ast.dump)
        return node


def _canonical_literal(text: str) -> str:
    """A literal argument list or value, canonicalised (layout, quoting, set order)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(f"({text},)", mode="eval")
        return ast.dump(_SortSets().visit(tree))
    except PARSE_ERRORS:
        return " ".join(str(text).split())


SAME_TASK = {
    "deduction": "on the same input",
    "abduction": "with the same output",
    "induction": "on the same inputs",
}
"""What, beside the normalised program, makes an ``exec`` task the same task, per mode (the
wording of :meth:`~sage_env.tasks.pool.TaskPool.duplicate_of`'s reason)."""


def exec_task_key(task: Task) -> str | None:
    """The identity of an ``exec`` task: two tasks with equal keys are the same question.

    The key is the mode, the normal form of the program (:func:`normalise_program`) and what
    the solver is asked about it:

    - deduction: the input (the solver sees ``f`` and ``i``). The same program on another
      input has another key, as in AZR, which deduplicates on the (program, input) text
      (the pool's Jaccard rule may still find it near: :class:`TaskPool`);
    - abduction: the output (the solver sees ``f`` and ``o``; another input with the same
      output asks the same question, and the same input gives the same output);
    - induction: the set of inputs (the solver's pairs and the held-out ones; their order
      and the message are not part of the task).

    Literals are compared canonically (layout, quoting, the order of a set's elements).

    Returns:
        A hex digest, or ``None`` when ``task`` is not an execution task.
    """
    mode = exec_mode(task)
    if mode is None:
        return None
    try:
        spec = ExecSpec.of(task)
    except ValueError:
        return None
    program = normalise_program(spec.program)
    if program is None:
        program = "\x01" + " ".join(spec.program.split())
    if mode == "deduction":
        shown = [_canonical_literal(i) for i in spec.inputs[:1]]
    elif mode == "abduction":
        shown = [_canonical_literal(o) for o in spec.outputs[:1]]
    else:
        shown = sorted({_canonical_literal(i) for i in spec.inputs})
    key = "\x00".join([mode, program, *shown])
    return hashlib.sha1(key.encode("utf-8", "replace")).hexdigest()


def normalised_question(task: Task) -> str:
    """The text the pool's near-duplicate rule compares for ``task``.

    ``task.prompt``, except that a deduction or abduction question shows its program in
    normal form (:func:`normalise_program`), so a renamed copy is as near to its original as
    a verbatim copy. An induction question does not show its program: its prompt is used.
    """
    mode = exec_mode(task)
    if mode not in ("deduction", "abduction"):
        return task.prompt
    try:
        spec = ExecSpec.of(task)
    except ValueError:
        return task.prompt
    program = normalise_program(spec.program)
    if program is None or not spec.inputs or not spec.outputs:
        return task.prompt
    return solver_question(dataclasses.replace(spec, program=program))


class TaskPool:
    """Seed and generated tasks, with duplicate rejection, a size cap and JSONL persistence.

    Several environment copies may share one pool, so tasks accepted in one round are drawn
    by planners in all of them.

    Duplicates: a task whose prompt equals one already in the pool (same domain, after
    lower-casing and collapsing whitespace) is rejected. A *generated* task is also rejected
    when the Jaccard similarity of its word-3-gram set with a task of the same domain is at
    least ``near_duplicate_threshold`` (seeds are only checked for exact duplicates).

    Execution tasks (domain ``"exec"``) are compared on their normalised program as well
    (DESIGN.md: novelty is judged on the normalised program, not its text): a *generated*
    ``exec`` task is rejected when a task of the pool has the same
    :func:`exec_task_key`: the same mode, the same program up to names,
    layout, comments, annotations and dead code (:func:`~sage_env.tasks.novelty.normalise_program`),
    and the same question about it (deduction: the input; abduction: the output; induction:
    the set of inputs). The keys sit in a dict built as tasks are added or loaded, so the
    check is one lookup. The Jaccard rule reads an ``exec`` task's question with its program
    in normal form (:func:`normalised_question`), so renaming does not
    evade it either. A renamed copy of a seed on the seed's input is a duplicate; the same
    program on a new input is a near duplicate unless the input changes enough of the
    question (AZR deduplicates only on the exact (program, input) text).

    Eviction: when more than ``max_generated`` generated tasks are present, the oldest
    generated task is removed first (FIFO); seeds are never evicted.

    Args:
        tasks: Initial tasks (usually :func:`sage_env.load_seeds`).
        near_duplicate_threshold: Jaccard threshold in (0, 1]; ``None`` disables the check.
        max_generated: Cap on generated tasks; ``None`` for no cap.
        frozen: The frozen-pool ablation (``EnvConfig.pool_admission = "frozen"``): generated
            tasks are added, indexed and counted as usual (so duplicates are refused and
            proposers paid exactly as in a growing pool), but :meth:`sample` and
            :meth:`trainable` never return one, so they never become solver or planner tasks.

    Raises:
        ValueError: on a threshold outside (0, 1] or a negative cap.
    """

    def __init__(
        self,
        tasks: Iterable[Task] = (),
        near_duplicate_threshold: float | None = 0.9,
        max_generated: int | None = None,
        frozen: bool = False,
    ) -> None:
        if near_duplicate_threshold is not None and not 0 < near_duplicate_threshold <= 1:
            raise ValueError(
                f"near_duplicate_threshold must be in (0, 1], got {near_duplicate_threshold}"
            )
        if max_generated is not None and max_generated < 0:
            raise ValueError(f"max_generated must be >= 0, got {max_generated}")
        self.near_duplicate_threshold = near_duplicate_threshold
        self.max_generated = max_generated
        self.frozen = bool(frozen)
        self._tasks: list[Task] = []
        self._seen: dict[str, str] = {}  # fingerprint -> task_id
        self._shingles: dict[str, frozenset[str]] = {}  # task_id -> shingles
        self._programs: dict[str, str] = {}  # exec_task_key -> task_id (the first with it)
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

    def trainable(self) -> list[Task]:
        """The tasks a solver or planner may be given (in insertion order; do not mutate).

        Every task, or the non-generated ones when the pool is :attr:`frozen`.
        """
        if not self.frozen:
            return self._tasks
        return [t for t in self._tasks if t.source != "generated"]

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

    def duplicate_of(self, task: Task, *, near: bool = True) -> str | None:
        """Why ``task`` would be rejected as a duplicate, or ``None`` if it would not.

        Args:
            task: The candidate.
            near: Also look for near duplicates (word-shingle Jaccard); ``False``: only the
                same task (the same text, or the same program after normalisation).

        Returns:
            A short reason naming the matching task, e.g.
            ``"near duplicate of gen/3 (Jaccard 0.93)"`` or ``"duplicate of
            exec/mbpp/2/deduction (the same program after normalisation, on the same
            input)"``.
        """
        match = self._seen.get(_fingerprint(task))
        if match is not None:
            return f"exact duplicate of {match}"
        if task.source != "generated":
            return None
        key = exec_task_key(task)
        match = self._programs.get(key) if key is not None else None
        if match is not None:
            same = SAME_TASK[task.meta["exec"]["mode"]]
            return f"duplicate of {match} (the same program after normalisation, {same})"
        if self.near_duplicate_threshold is None or not near:
            return None
        mine = shingles(normalised_question(task))
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
        self._shingles[task.task_id] = shingles(normalised_question(task))
        self._index_program(task)
        self._tasks.append(task)
        if task.source == "generated":
            self._generated += 1
            self._evict()
        return True

    def _index_program(self, task: Task) -> None:
        key = exec_task_key(task)
        if key is not None:
            self._programs.setdefault(key, task.task_id)

    def _evict(self) -> None:
        if self.max_generated is None:
            return
        while self._generated > self.max_generated:
            idx = next(i for i, t in enumerate(self._tasks) if t.source == "generated")
            old = self._tasks.pop(idx)
            self._seen.pop(_fingerprint(old), None)
            self._shingles.pop(old.task_id, None)
            key = exec_task_key(old)
            if key is not None and self._programs.get(key) == old.task_id:
                del self._programs[key]
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
            frozen=self.frozen,
        )
        copy.restore(self)
        return copy

    def restore(self, snapshot: TaskPool) -> None:
        """Make this pool (in place, so environments holding it see it) equal to ``snapshot``."""
        self._tasks = list(snapshot._tasks)
        self._seen = dict(snapshot._seen)
        self._shingles = dict(snapshot._shingles)
        self._programs = dict(snapshot._programs)
        self._generated = snapshot._generated
        self._ever_generated = snapshot._ever_generated
        self.evicted = snapshot.evicted

    def sample(self, rng: random.Random, domain: str | None = None) -> Task:
        """Draw one task uniformly from :meth:`trainable`, optionally within ``domain``.

        Raises:
            ValueError: if the pool has no such task in ``domain``.
        """
        tasks = self.trainable()
        if domain is None:
            if not tasks:
                raise ValueError("the task pool is empty")
            return tasks[rng.randrange(len(tasks))]
        candidates = [t for t in tasks if t.domain == domain]
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
            pool._shingles[task.task_id] = shingles(normalised_question(task))
            pool._index_program(task)
            if task.source == "generated":
                pool._generated += 1
                num = task.task_id.rsplit("/", 1)[-1]
                nxt = int(num) + 1 if num.isdigit() else pool._ever_generated + 1
                pool._ever_generated = max(pool._ever_generated, nxt)
        return pool

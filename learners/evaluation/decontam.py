"""Decontamination: word n-gram overlap between training tasks and benchmark items.

Word n-grams (default n = 13, the size GPT-3's decontamination used, Brown et al. 2020) of each
benchmark item are looked up in the training tasks. Sharing a single n-gram is too weak a
signal for math and code: boilerplate such as "where m and n are relatively prime positive
integers. Find m+n" recurs across unrelated problems. So an item counts as *contaminated* when
one training task covers at least ``min_coverage`` (default 0.5) of the item's n-grams, in the
spirit of the token-coverage measure of the Llama 2 report (Touvron et al. 2023, Sec. A.6).
A benchmark is flagged when more than 1% of its items are. Texts shorter than n words are
compared whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sage_env.tasks.task import Task, load_seeds

_WORD = re.compile(r"\w+", re.UNICODE)
FLAG_SHARE = 0.01
"""A benchmark is flagged when more than this share of its items overlaps."""


def ngrams(text: str, n: int) -> set[str]:
    """Lower-cased word n-grams of ``text`` (the whole word sequence if shorter than n)."""
    words = _WORD.findall(text.lower())
    if len(words) < n:
        return {" ".join(words)} if words else set()
    return {" ".join(words[i : i + n]) for i in range(len(words) - n + 1)}


@dataclass
class OverlapReport:
    """Overlap of one benchmark with the training texts.

    Attributes:
        benchmark: Benchmark name.
        items: Number of benchmark items.
        overlapping: Ids of items covered by a training task (coverage >= ``min_coverage``).
        matches: ``{item_id: [(training task id, coverage)]}`` for overlapping items (top 5).
        contaminated: ``len(overlapping) / items > FLAG_SHARE``.
    """

    benchmark: str
    items: int
    overlapping: list[str] = field(default_factory=list)
    matches: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    contaminated: bool = False

    @property
    def share(self) -> float:
        """Share of items that overlap."""
        return len(self.overlapping) / self.items if self.items else 0.0


_SEED_INDEX: dict[int, dict[str, list[str]]] = {}


def build_index(tasks: Iterable[Task], n: int) -> dict[str, list[str]]:
    """Map every word n-gram of the tasks' prompts to the ids of the tasks holding it."""
    index: dict[str, list[str]] = {}
    for t in tasks:
        for g in ngrams(t.prompt, n):
            index.setdefault(g, []).append(t.task_id)
    return index


def overlap_report(
    items: Sequence,
    n: int = 13,
    tasks: Iterable[Task] | None = None,
    benchmark: str | None = None,
    min_coverage: float = 0.5,
) -> OverlapReport:
    """Compare benchmark ``items`` (anything with ``item_id`` and ``prompt``) with ``tasks``.

    Args:
        items: Benchmark items (:class:`learners.evaluation.EvalItem`).
        n: Word n-gram size.
        tasks: Training tasks (default: the bundled seeds; pass a run's pool to check it).
        benchmark: Name for the report (default: the first item's ``benchmark``).
        min_coverage: Share of an item's n-grams that one training task must cover.
    """
    if tasks is None:
        if n not in _SEED_INDEX:
            _SEED_INDEX[n] = build_index(load_seeds(), n)
        index = _SEED_INDEX[n]
    else:
        index = build_index(tasks, n)
    name = benchmark or (getattr(items[0], "benchmark", "?") if items else "?")
    report = OverlapReport(name, len(items))
    for it in items:
        grams = ngrams(getattr(it, "text", "") or it.prompt, n)
        counts: dict[str, int] = {}
        for g in grams:
            for task_id in set(index.get(g, ())):
                counts[task_id] = counts.get(task_id, 0) + 1
        covered = sorted(
            ((t, c / len(grams)) for t, c in counts.items() if c / len(grams) >= min_coverage),
            key=lambda x: -x[1],
        )
        if covered:
            report.overlapping.append(str(it.item_id))
            report.matches[str(it.item_id)] = [(t, round(c, 3)) for t, c in covered[:5]]
    report.contaminated = report.share > FLAG_SHARE
    return report

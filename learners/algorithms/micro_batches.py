"""How a minibatch is cut into micro-batches (one forward/backward each).

:func:`token_chunks` bounds a micro-batch by a sequence count (``PGConfig.micro_batch_size``)
and a padded-token budget (``PGConfig.micro_batch_tokens``), which bounds the update's memory
peak whatever the lengths (``docs/training.md``, "Where the memory goes"). Pure functions on
index lists; torch-free.
"""

from __future__ import annotations


def chunks(items: list, size: int) -> list[list]:
    """``items`` in consecutive lists of ``size`` (the last one shorter)."""
    return [items[i : i + size] for i in range(0, len(items), size)]


def token_chunks(order: list[int], lengths: list[int], size: int, budget: int) -> list[list[int]]:
    """Consecutive micro-batches of ``order`` (indices sorted by length).

    Each holds at most ``size`` indices and, when ``budget > 0``, at most ``budget`` padded
    tokens (``len(mb) * max(lengths[i] for i in mb)``); an index longer than the budget goes
    alone. ``budget = 0``: chunks of ``size``.
    """
    if budget <= 0:
        return chunks(order, size)
    out: list[list[int]] = []
    mb: list[int] = []
    longest = 0
    for i in order:
        wider = max(longest, lengths[i])
        if mb and (len(mb) >= size or wider * (len(mb) + 1) > budget):
            out.append(mb)
            mb, wider = [], lengths[i]
        mb.append(i)
        longest = wider
    if mb:
        out.append(mb)
    return out

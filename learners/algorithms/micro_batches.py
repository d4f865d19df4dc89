"""How a minibatch is cut into micro-batches (one forward/backward each).

:func:`token_chunks` bounds a micro-batch by a sequence count (``PGConfig.micro_batch_size``)
and a padded-token budget (``PGConfig.micro_batch_tokens``), which bounds the update's memory
peak whatever the lengths (``docs/write-ups/memory.md``, "Where the memory goes"). Pure functions on
index lists.
"""

from __future__ import annotations

from learners.policy.logprobs import shared_prompt_groups


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


def shared_prompt_units(
    order: list[int],
    prompts: list[tuple[int, ...]],
    completion_lengths: list[int],
    budget: int,
) -> tuple[list[list[int]], list[int]]:
    """Group the indices of ``order`` that share a prompt into packed rows ("units").

    A unit is one row of shared-prompt packing (``learners.policy.logprobs.
    shared_prompt_logprobs``): a prompt once, then its completions; its length is
    ``len(prompt) + sum(completion lengths)``. A group
    (:func:`~learners.policy.logprobs.shared_prompt_groups`) whose
    row would pass ``budget`` tokens (``budget > 0``) is split into several units, each as
    full as the budget allows.

    Args:
        order: Indices to group.
        prompts: Per index (of the whole batch), its prompt token ids.
        completion_lengths: Per index, its completion's length in tokens.
        budget: Padded-token budget of a micro-batch (0 = none).

    Returns:
        ``(units, lengths)``: the units (lists of indices) and each unit's packed length.
    """
    units: list[list[int]] = []
    lengths: list[int] = []
    for group in shared_prompt_groups([prompts[i] for i in order]):
        n = len(prompts[order[group[0]]])
        unit: list[int] = []
        size = n
        for i in (order[g] for g in group):
            if unit and budget > 0 and size + completion_lengths[i] > budget:
                units.append(unit)
                lengths.append(size)
                unit, size = [], n
            unit.append(i)
            size += completion_lengths[i]
        units.append(unit)
        lengths.append(size)
    return units, lengths

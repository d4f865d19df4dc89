"""Where a completion ends: token budget, EOS and stop strings, one rule for every engine.

``hf`` stops rows while generating (:class:`RowLimits`, a transformers stopping criterion);
``hf-cb`` and ``vllm`` return raw rows that :func:`cut_completion` cuts the same way. Both end
a row at its first EOS with :func:`eos_cut`.
"""

from __future__ import annotations

from typing import Any

import torch

from learners.engines.interface import EngineHost
from learners.types import Completion


class RowLimits:
    """A transformers stopping criterion with a token budget and stop strings per row.

    Called after every decoding step with the whole ``input_ids`` (prompt width ``width``
    plus the tokens so far); returns a bool per row. Records, per row, how many tokens had
    been generated when it first stopped (``stopped_at``) and whether a stop string did it.
    ``StopStringCriteria`` looks at the end of the whole sequence, so a match it reports is
    kept only when the stop string lies in the generated text (not partly in the prefix).
    """

    def __init__(
        self,
        width: int,
        budgets: list[int],
        criteria: list[Any],
        stops: list[tuple[str, ...]],
        tokenizer: Any,
    ) -> None:
        self.width, self.budgets, self.criteria = width, budgets, criteria
        self.stops, self.tokenizer = stops, tokenizer
        self.stopped_at: list[int | None] = [None] * len(budgets)
        self.by_string = [False] * len(budgets)
        self._done: torch.Tensor | None = None
        self._index: dict[tuple, torch.Tensor] = {}

    def __call__(self, input_ids: torch.Tensor, scores: Any, **kwargs: Any) -> torch.Tensor:
        """``[B]`` bools: which rows have stopped after this step.

        Each distinct stop-string criterion runs once, on the running rows that use it, and
        their verdicts reach the host in one transfer (none when no running row has stop
        strings); only the rows it flags are decoded. The index tensors and the returned
        tensor are rebuilt only when a row stops, so a step without a stop costs at most that
        one transfer (transformers reads the unfinished rows every step anyway).
        """
        n = input_ids.shape[1] - self.width
        running = [row for row, at in enumerate(self.stopped_at) if at is None]
        groups: dict[int, list[int]] = {}
        for row in running:
            if self.criteria[row] is not None:
                groups.setdefault(id(self.criteria[row]), []).append(row)
        flagged: set[int] = set()
        if groups:
            order, verdicts = [], []
            for rows in groups.values():
                order += rows
                verdicts.append(self.criteria[rows[0]](self._rows(input_ids, rows), scores))
            hits = torch.cat(verdicts).tolist()
            flagged = {row for row, hit in zip(order, hits) if hit}
        changed = False
        for row in running:
            hit = False
            if row in flagged:
                text = self.tokenizer.decode(input_ids[row, self.width :], skip_special_tokens=True)
                hit = any(stop in text for stop in self.stops[row])
            if hit or n >= self.budgets[row]:
                self.stopped_at[row], self.by_string[row], changed = n, hit, True
        if changed or self._done is None or self._done.device != input_ids.device:
            done = [at is not None for at in self.stopped_at]
            self._done = torch.tensor(done, dtype=torch.bool, device=input_ids.device)
        return self._done

    def _rows(self, input_ids: torch.Tensor, rows: list[int]) -> torch.Tensor:
        """``input_ids[rows]``; the whole tensor when ``rows`` is every row (no copy)."""
        if len(rows) == input_ids.shape[0]:
            return input_ids
        key = (tuple(rows), input_ids.device)
        if key not in self._index:
            self._index[key] = torch.tensor(rows, device=input_ids.device)
        return input_ids[self._index[key]]


def stop_length(ids: list[int], stops: tuple[str, ...], tokenizer: Any) -> int | None:
    """Tokens up to and including the one that completes the first stop string, or ``None``.

    The shortest prefix of ``ids`` whose decoded text (special tokens skipped) contains one
    of ``stops`` (binary search on that monotone condition, O(log C) decodes). vLLM stops
    the same way; ``hf``'s ``StopStringCriteria`` fires only when the text *ends* with the
    string, so a last token that carries characters past it ends ``hf-cb``/``vllm`` rows
    but not ``hf`` ones.
    """
    stops = tuple(s for s in stops if s)
    if not stops or not ids:
        return None

    def hit(n: int) -> bool:
        text = tokenizer.decode(ids[:n], skip_special_tokens=True)
        return any(s in text for s in stops)

    if not hit(len(ids)):
        return None
    lo, hi = 1, len(ids)
    while lo < hi:
        mid = (lo + hi) // 2
        if hit(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def eos_cut(ids: list[int], budget: int, eos_ids: set[int]) -> tuple[int, bool]:
    """``(length, stopped)``: at most ``budget`` tokens of ``ids``, ending at the first EOS.

    ``stopped`` is True when an EOS (kept, counted in ``length``) ended the row.
    """
    length = min(len(ids), budget)
    for t, tok in enumerate(ids[:length]):
        if tok in eos_ids:
            return t + 1, True
    return length, False


def cut_completion(
    host: EngineHost,
    prompt: list[int],
    ids: list[int],
    logprobs: list[float],
    budget: int,
    stop: tuple[str, ...],
) -> Completion:
    """A :class:`Completion` from an engine's raw output row, cut as ``hf`` cuts its rows.

    Keeps at most ``budget`` tokens, ends at the first EOS (kept, :func:`eos_cut`) or at the
    token that completes a stop string (:func:`stop_length`), and marks the row ``truncated``
    when it reached its budget without either. Adds the kept tokens to ``host.tokens_generated``.

    Raises:
        ValueError: if ``logprobs`` is shorter than the kept tokens.
    """
    length, stopped = eos_cut(ids, budget, host.eos_ids)
    if not stopped:
        cut = stop_length(ids[:length], stop, host.tokenizer)
        if cut is not None:
            length, stopped = cut, True
    ids = [int(t) for t in ids[:length]]
    if len(logprobs) < length:
        raise ValueError(f"engine returned {len(logprobs)} log-probs for {length} tokens")
    host.tokens_generated += length
    return Completion(
        text=host.tokenizer.decode(ids, skip_special_tokens=True),
        prompt_ids=list(prompt),
        completion_ids=ids,
        logprobs=[float(x) for x in logprobs[:length]],
        truncated=not stopped and length >= budget,
    )


def limited_completions(
    host: EngineHost,
    prompts: list[list[int]],
    new: torch.Tensor,
    logprobs: torch.Tensor,
    budgets: list[int],
    limits: RowLimits,
    produced: list[int] | None = None,
) -> list[Completion]:
    """:class:`Completion` records of a batch that :class:`RowLimits` stopped while decoding.

    Row ``r`` keeps at most ``budgets[r]`` of its tokens ``new[r]``, ends at its first EOS
    (kept, :func:`eos_cut`) or at the token where ``limits`` stopped it, whichever comes
    first, and is ``truncated`` when it reached its budget without either. Adds the kept
    tokens to ``host.tokens_generated``.

    Args:
        host: The engine's host (tokenizer, EOS ids, token count).
        prompts: ``[B]`` prompt token ids.
        new: ``[B, T]`` generated token ids (CPU).
        logprobs: ``[B, T]`` log-probs of those tokens (CPU, float).
        budgets: ``[B]`` token budgets.
        limits: The criterion that stopped the rows (``stopped_at``, ``by_string``).
        produced: ``[B]`` tokens each row decoded before it stopped, or ``None`` (all ``T``).
            A row stopped early holds pad ids after them; with ``produced`` they are never
            read, so a pad id that is an EOS id does not end the row (``torch-bf16``). ``hf``
            passes ``None``: transformers keeps such a pad as the row's EOS.
    """
    completions = []
    for row, prompt in enumerate(prompts):
        ids = new[row].tolist() if produced is None else new[row, : produced[row]].tolist()
        length, stopped = eos_cut(ids, budgets[row], host.eos_ids)
        if not stopped and limits.stopped_at[row] is not None:
            at = limits.stopped_at[row]
            stopped = at < length or (at == length and limits.by_string[row])
            length = min(length, at)
        ids = ids[:length]
        host.tokens_generated += length
        completions.append(
            Completion(
                text=host.tokenizer.decode(ids, skip_special_tokens=True),
                prompt_ids=list(prompt),
                completion_ids=ids,
                logprobs=logprobs[row, :length].tolist(),
                truncated=not stopped and length >= budgets[row],
            )
        )
    return completions

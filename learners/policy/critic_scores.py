"""The critic's distribution over the scores it could write
(:data:`sage_env.text.parsing.SCORE_VALUES`).

Read from one forward pass of the policy's own model (not through a rollout engine); the
expected-score gate (``critic_score_estimate = "expected"``,
:class:`sage_env.text.parsing.ScoredReply`,
:func:`sage_env.text.parsing.expected_critic_score`) and the critic probe use it through
:meth:`learners.policy.HFPolicy.score_distribution`.
"""

from __future__ import annotations

from typing import Any

import torch

from sage_env.text.parsing import SCORE_VALUES

ScoreTokens = tuple[list[int], int, "int | None"]
"""``(first token id of each score, id of the top score's first digit, id of its second
digit or None)``."""


def score_tokens(tokenizer: Any) -> ScoreTokens | None:
    """Token ids for reading a score in :data:`~sage_env.text.parsing.SCORE_VALUES` (1..10).

    Every score but the top one must be one token. The top one (``"10"``) is either one token
    too, or two: the token of ``"1"`` then that of ``"0"`` (SmolLM2, Qwen2.5 split digits);
    then the third element is ``"0"``'s id. ``None`` overall when the scores are written
    otherwise (then no distribution can be read from one forward pass).
    """
    ids = [tokenizer(str(v), add_special_tokens=False)["input_ids"] for v in SCORE_VALUES]
    top = ids[-1]
    if not all(len(i) == 1 for i in ids[:-1]):
        return None
    one = ids[0][0]
    if len(top) == 1:
        return [i[0] for i in ids], one, None
    if len(top) == 2 and top[0] == one:
        return [i[0] for i in ids[:-1]] + [one], one, top[1]
    return None


@torch.no_grad()
def score_distribution(
    policy: Any,
    tokens: ScoreTokens | None,
    observations: list[dict[str, str]],
    temperature: float = 1.0,
    max_prompt_tokens: int = 2048,
    batch_size: int = 16,
    model: Any = None,
) -> list[tuple[float, ...] | None]:
    """The policy's distribution over the score it would write right after the prefix.

    For a critic observation whose prefix ends with ``<score>``: p(s) for each s in
    :data:`~sage_env.text.parsing.SCORE_VALUES` from one forward pass per batch over prompt +
    ``"1"`` (the second position splits ``"1"`` from ``"10"`` where ``"10"`` is two tokens), at
    the sampling ``temperature``, not renormalised (the rest of the mass went to other
    tokens). This is the distribution a sampled reply's score is drawn from, so ``sum_s s p(s)
    / sum_s p(s)`` is the mean of infinitely many sampled reviews
    (:func:`sage_env.text.parsing.expected_critic_score`).

    Args:
        policy: An :class:`~learners.policy.HFPolicy` (``model``, ``tokenizer``, ``device``,
            ``encode_prompt``).
        tokens: :func:`score_tokens` of its tokenizer.
        observations: ``{"system", "user", "prefix"}`` dicts.
        temperature: Sampling temperature (> 0); logits are divided by it.
        max_prompt_tokens: Prompt truncation, as in ``generate``.
        batch_size: Rows per forward pass.
        model: The causal LM to read (default ``policy.model``; a frozen scorer, see
            :meth:`~learners.policy.HFPolicy.freeze_scorer`), with ``policy``'s tokenizer.

    Returns:
        Per observation a tuple of ``len(SCORE_VALUES)`` probabilities, or ``None`` for all of
        them when ``tokens`` is None.
    """
    if tokens is None or not observations:
        return [None] * len(observations)
    first, one, zero = tokens
    t = max(float(temperature), 1e-6)
    pad = policy.tokenizer.pad_token_id
    pad = 0 if pad is None else pad
    out: list[tuple[float, ...] | None] = []
    model = policy.model if model is None else model
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(observations), batch_size):
            rows = [
                policy.encode_prompt(o, max_prompt_tokens) + [one]
                for o in observations[start : start + batch_size]
            ]
            out.extend(_batch_distribution(policy, model, rows, pad, first, zero, t))
    finally:
        model.train(was_training)
    return out


def _batch_distribution(
    policy: Any,
    model: Any,
    rows: list[list[int]],
    pad: int,
    first: list[int],
    zero: int | None,
    t: float,
) -> list[tuple[float, ...]]:
    """The score distribution of each prompt row (each already ending with ``"1"``'s id)."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for j, r in enumerate(rows):  # left-padded: the last two positions line up
        ids[j, width - len(r) :] = torch.tensor(r)
        mask[j, width - len(r) :] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    logits = model(
        input_ids=ids.to(policy.device),
        attention_mask=mask.to(policy.device),
        position_ids=positions.to(policy.device),
        logits_to_keep=2,
    ).logits[:, -2:]
    probs = torch.softmax(logits[:, 0].float() / t, -1)[:, first].cpu()
    if zero is not None:  # split "1" into "1" (then not "0") and the top score (then "0")
        p_zero = torch.softmax(logits[:, 1].float() / t, -1)[:, zero].cpu()
        probs[:, -1] = probs[:, 0] * p_zero
        probs[:, 0] = probs[:, 0] * (1.0 - p_zero)
    return [tuple(float(x) for x in row) for row in probs]

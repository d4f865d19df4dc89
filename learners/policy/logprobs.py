"""Log-probabilities of completion tokens under a causal LM: the training forward pass.

:func:`token_logprobs` is what :meth:`learners.policy.HFPolicy.token_logprobs` runs on its
model (and under the KL reference); :func:`shared_prompt_logprobs` forwards a prompt shared by
several completions once (:func:`shared_prompt_groups` finds them). Learners reach these
through the policy's interface (:class:`learners.policy.protocols.TrainablePolicy`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def shared_prompt_groups(prompts: Sequence[Sequence[int]]) -> list[list[int]]:
    """Indices of ``prompts`` grouped by identical (non-empty) prompt, in first-seen order.

    An empty prompt is never shared (its first token has no predicting position).
    """
    groups: dict[tuple[int, ...], list[int]] = {}
    out: list[list[int]] = []
    for i, p in enumerate(prompts):
        key = tuple(p)
        if not key:
            out.append([i])
        elif key in groups:
            groups[key].append(i)
        else:
            groups[key] = [i]
            out.append(groups[key])
    return out


def token_logprobs(
    model: torch.nn.Module,
    prompts: list[list[int]],
    completions: list[list[int]],
    pad_id: int,
    temperature: float = 1.0,
    device: torch.device | None = None,
    share_prompts: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs of each completion token under ``model``.

    Sequences are right-padded to a ``[B, L]`` batch; logits are divided by ``temperature``
    (matching how they were sampled). Only the positions that predict completion tokens are
    projected onto the vocabulary (transformers' ``logits_to_keep`` with per-row positions),
    so a long prompt costs its transformer layers but no ``[L, V]`` logits.

    With ``share_prompts`` and a prompt that several completions share (the k samples of one
    task), the prompt is forwarded once: :func:`shared_prompt_logprobs`. Without a repeated
    prompt the call is the plain padded batch above.

    Returns:
        ``(logprobs, mask)``, both ``[B, C_max]``; mask is 1.0 on real completion tokens.
    """
    groups = shared_prompt_groups(prompts) if share_prompts else []
    if len(groups) < len(prompts) and groups:
        return shared_prompt_logprobs(
            model, prompts, completions, pad_id, temperature, device, groups
        )
    device = device or next(model.parameters()).device
    seqs = [p + c for p, c in zip(prompts, completions)]
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(seqs), width), dtype=torch.long)
    for r, s in enumerate(seqs):
        ids[r, : len(s)] = torch.tensor(s, dtype=torch.long)
        attn[r, : len(s)] = 1
    c_max = max(1, max(len(c) for c in completions))
    # logits only where a completion token is predicted: position len(p) - 1 + j predicts
    # completion token j (clipped to the last position; the mask drops the clipped ones)
    pos = torch.zeros((len(seqs), c_max), dtype=torch.long)
    for r, p in enumerate(prompts):
        pos[r] = torch.clamp(torch.arange(c_max) + max(len(p) - 1, 0), max=width - 2)
    targets = torch.gather(ids, 1, torch.clamp(pos + 1, max=width - 1))
    ids, attn, pos, targets = ids.to(device), attn.to(device), pos.to(device), targets.to(device)
    try:
        logits = model(
            input_ids=ids, attention_mask=attn, use_cache=False, logits_to_keep=pos
        ).logits
    except TypeError:  # a model without logits_to_keep: project every position, then pick
        full = model(input_ids=ids, attention_mask=attn, use_cache=False).logits
        logits = torch.take_along_dim(full, pos[..., None], dim=1)
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    logp = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # [B, C_max]
    mask = torch.zeros((len(seqs), c_max), device=device)
    for r, c in enumerate(completions):
        mask[r, : len(c)] = 1.0
    return logp * mask, mask


def shared_prompt_logprobs(
    model: torch.nn.Module,
    prompts: list[list[int]],
    completions: list[list[int]],
    pad_id: int,
    temperature: float = 1.0,
    device: torch.device | None = None,
    groups: list[list[int]] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`token_logprobs` with each distinct prompt forwarded once (shared-prefix packing).

    The sequences that share a prompt become one row: the prompt, then each completion in
    turn. Every completion token sees the prompt and the earlier tokens of its own completion
    only (a ``[R, 1, L, L]`` additive attention mask), and its position ids continue from the
    prompt's end, as in its own unpacked sequence; so each log-prob is the unpacked one (equal
    within float rounding) and the gradient through the shared prompt is the sum of its
    completions' (autograd sums the uses of one activation). ``k`` samples of a ``P``-token
    prompt then cost ``P + sum C`` tokens instead of ``k * P + sum C``. The idea is
    Prefix Grouper's shared-prefix forward (Liu et al. 2025, arXiv 2506.05433), done here as
    one packed row under a mask rather than a split attention. The mask needs a model that
    takes a 4-D attention mask and ``position_ids`` (transformers' Llama, Qwen2, Mistral, ...
    do; :meth:`~learners.policy.HFPolicy.enable_prompt_sharing` checks a model once before
    it packs).

    ``groups`` (:func:`shared_prompt_groups` of
    ``prompts``) may be passed when the caller has them.

    Returns:
        ``(logprobs, mask)``, both ``[B, C_max]`` in the order of ``prompts``.
    """
    device = device or next(model.parameters()).device
    groups = groups if groups is not None else shared_prompt_groups(prompts)
    ids_t, pos_t, seg_t, keep_t, tgt_t, where = _packed_rows(prompts, completions, pad_id, groups)
    width = ids_t.shape[1]
    q, k = seg_t[:, :, None], seg_t[:, None, :]
    causal = torch.ones((width, width), dtype=torch.bool).tril()
    allowed = causal & (k >= 0) & ((k == 0) | (k == q))
    allowed |= torch.eye(width, dtype=torch.bool)  # a padding query attends to itself only
    dtype = next(model.parameters()).dtype
    mask4d = torch.zeros((ids_t.shape[0], 1, width, width), dtype=dtype)
    mask4d.masked_fill_(~allowed[:, None], torch.finfo(dtype).min)
    logits = model(
        input_ids=ids_t.to(device),
        attention_mask=mask4d.to(device),
        position_ids=pos_t.to(device),
        use_cache=False,
        logits_to_keep=keep_t.to(device),
    ).logits
    logp_rows = torch.log_softmax(logits.float() / temperature, dim=-1)
    logp_rows = logp_rows.gather(-1, tgt_t.to(device).unsqueeze(-1)).squeeze(-1)  # [R, K]
    c_max = max(1, max(len(c) for c in completions))
    row_idx = torch.zeros((len(prompts), c_max), dtype=torch.long)
    col_idx = torch.zeros((len(prompts), c_max), dtype=torch.long)
    mask = torch.zeros((len(prompts), c_max))
    for i, c in enumerate(completions):
        r, first = where[i]
        row_idx[i] = r
        col_idx[i, : len(c)] = torch.arange(first, first + len(c))
        mask[i, : len(c)] = 1.0
    mask = mask.to(device)
    logp = logp_rows[row_idx.to(device), col_idx.to(device)]
    return logp * mask, mask


def _packed_rows(
    prompts: list[list[int]], completions: list[list[int]], pad_id: int, groups: list[list[int]]
) -> tuple[torch.Tensor, ...]:
    """The rows of :func:`shared_prompt_logprobs`, as ``[R, L]`` / ``[R, K]`` tensors.

    Returns:
        ``(ids, positions, segments, keep, targets, where)``: token ids (``pad_id`` after a
        row's end), position ids, segment ids (0 the prompt, j completion j, -1 padding),
        the positions predicting each completion token, those tokens, and per sequence
        ``(row, index of its first token in keep)``.
    """
    rows: list[list[int]] = []
    positions: list[list[int]] = []
    segments: list[list[int]] = []
    keep: list[list[int]] = []
    targets: list[list[int]] = []
    where: list[tuple[int, int]] = [(0, 0)] * len(prompts)
    for r, group in enumerate(groups):
        prompt = prompts[group[0]]
        ids, pos, seg = list(prompt), list(range(len(prompt))), [0] * len(prompt)
        row_keep: list[int] = []
        row_targets: list[int] = []
        for j, i in enumerate(group, start=1):
            comp = completions[i]
            where[i] = (r, len(row_keep))
            start = len(ids)
            # token 0 is predicted by the prompt's last position, token t by token t - 1
            row_keep += [max(len(prompt) - 1, 0)] + [start + t for t in range(len(comp) - 1)]
            row_targets += comp
            ids += comp
            pos += range(len(prompt), len(prompt) + len(comp))
            seg += [j] * len(comp)
        rows.append(ids)
        positions.append(pos)
        segments.append(seg)
        keep.append(row_keep)
        targets.append(row_targets)
    n_rows, width = len(rows), max(len(r) for r in rows)
    k_max = max(1, max(len(k) for k in keep))
    ids_t = torch.full((n_rows, width), pad_id, dtype=torch.long)
    pos_t = torch.zeros((n_rows, width), dtype=torch.long)
    seg_t = torch.full((n_rows, width), -1, dtype=torch.long)
    keep_t = torch.zeros((n_rows, k_max), dtype=torch.long)
    tgt_t = torch.zeros((n_rows, k_max), dtype=torch.long)
    for r in range(n_rows):
        n = len(rows[r])
        ids_t[r, :n] = torch.tensor(rows[r], dtype=torch.long)
        pos_t[r, :n] = torch.tensor(positions[r], dtype=torch.long)
        seg_t[r, :n] = torch.tensor(segments[r], dtype=torch.long)
        keep_t[r, : len(keep[r])] = torch.tensor(keep[r], dtype=torch.long)
        tgt_t[r, : len(targets[r])] = torch.tensor(targets[r], dtype=torch.long)
    return ids_t, pos_t, seg_t, keep_t, tgt_t, where

"""Values of learners/policy/logprobs.py at non-default parameters, boundaries and types
(issue 49: the module's mutation tests; the functions lived in learners/algorithms/losses.py
then). A two-layer toy attention model stands in for a transformer: its logits depend on every earlier token, on the position ids and on the
attention mask, and a fully masked query gives NaN as an attention kernel's does, so a
wrong position, mask or gather changes the log-probs. The reference log-prob of a token is
the model's own on that sequence forwarded alone."""

from __future__ import annotations

import math

import pytest
import torch

import learners.policy.logprobs as logprobs
from learners.policy.logprobs import _packed_rows, shared_prompt_logprobs, token_logprobs

VOCAB = 13


class ToyLM(torch.nn.Module):
    """Two causal self-attention layers with learned positions and a vocabulary head.

    ``use_cache`` defaults to True, as a transformers config's does: a caller that does not
    pass False gets a cache built.

    Takes what :func:`token_logprobs` passes a transformers causal LM: a 0/1 ``[B, L]``
    mask (causal attention over the keys marked 1) or an additive ``[B, 1, L, L]`` one,
    optional ``position_ids`` (default ``0..L-1``) and ``logits_to_keep`` (``[B, K]``
    positions per row). ``keep=False``: a model without ``logits_to_keep``.
    """

    def __init__(self, keep: bool = True, dtype: torch.dtype = torch.float64, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)

        def p(*shape: int) -> torch.nn.Parameter:
            return torch.nn.Parameter(torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype))

        self.emb, self.pos, self.head = p(VOCAB, 8), p(64, 8), p(8, VOCAB)
        self.layers = torch.nn.ParameterList([p(8, 8) for _ in range(6)])
        self.keep = keep
        self.calls: list[dict] = []

    def forward(self, input_ids, attention_mask, use_cache=True, position_ids=None, **kw):
        if "logits_to_keep" in kw and not self.keep:
            raise TypeError("forward() got an unexpected keyword argument 'logits_to_keep'")
        self.calls.append(
            {"input_ids": input_ids, "attention_mask": attention_mask, "position_ids": position_ids,
             "use_cache": use_cache, **kw}
        )
        b, n = input_ids.shape
        if position_ids is None:
            position_ids = torch.arange(n).expand(b, n)
        if attention_mask.dim() == 2:
            allowed = torch.ones((n, n), dtype=torch.bool).tril() & (attention_mask[:, None, :] == 1)
        else:
            allowed = attention_mask[:, 0] == 0
        h = self.emb[input_ids] + self.pos[position_ids]
        for i in range(2):
            wq, wk, wv = self.layers[3 * i : 3 * i + 3]
            scores = (h @ wq) @ (h @ wk).transpose(1, 2) / math.sqrt(8)
            att = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
            h = h + att @ (h @ wv)
        keep = kw.get("logits_to_keep", 0)
        if isinstance(keep, torch.Tensor):
            h = torch.gather(h, 1, keep[..., None].expand(-1, -1, h.shape[-1]))
        return type("Out", (), {"logits": (h @ self.head).to(torch.float32)})()


def _reference(model, prompts, completions, temperature=1.0):
    """Per sequence, forwarded alone: log p(completion token j | prompt, tokens < j)."""
    c_max = max(1, max(len(c) for c in completions))
    out = torch.zeros((len(prompts), c_max), dtype=torch.float64)
    with torch.no_grad():
        for r, (p, c) in enumerate(zip(prompts, completions)):
            if not c:
                continue
            seq = torch.tensor([p + c])
            logits = model(input_ids=seq, attention_mask=torch.ones_like(seq)).logits[0]
            logp = torch.log_softmax(logits.double() / temperature, dim=-1)
            for j, tok in enumerate(c):
                out[r, j] = logp[len(p) - 1 + j, tok]
    model.calls.clear()
    return out


# three prompts, the first shared 3x and the second 2x; completions of 1 to 5 tokens
PROMPTS = [[1, 2, 3, 4], [5, 6], [1, 2, 3, 4], [7, 8, 9], [5, 6], [1, 2, 3, 4]]
COMPS = [[3, 1, 4, 1, 5], [9], [2, 6], [5, 3, 5, 8], [9, 7, 9], [3]]
PAD = 0


def _lengths_mask(completions, c_max):
    return torch.tensor([[1.0] * len(c) + [0.0] * (c_max - len(c)) for c in completions])


@pytest.mark.parametrize("share", [False, True])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_token_logprobs_are_each_sequence_s_own(share, temperature):
    model = ToyLM()
    want = _reference(model, PROMPTS, COMPS, temperature)
    logp, mask = token_logprobs(
        model, PROMPTS, COMPS, PAD, temperature, device=torch.device("cpu"), share_prompts=share
    )
    assert logp.shape == mask.shape == (6, 5)
    assert torch.equal(mask, _lengths_mask(COMPS, 5))
    assert mask.dtype == torch.float32
    torch.testing.assert_close(logp.double(), want * mask.double(), atol=1e-5, rtol=0)
    assert (logp * (1 - mask)).abs().max() == 0  # padding exactly 0
    # packed: one row per distinct prompt, an additive 4-D mask and explicit positions
    (call,) = model.calls
    assert call["use_cache"] is False
    if share:
        assert call["input_ids"].shape == (3, 4 + 5 + 2 + 1)
        assert call["attention_mask"].dim() == 4
        assert call["position_ids"] is not None
    else:
        assert call["input_ids"].shape == (6, 9)
        assert call["position_ids"] is None


def test_token_logprobs_defaults_are_temperature_1_and_no_packing():
    model = ToyLM()
    want = _reference(model, PROMPTS, COMPS)
    logp, mask = token_logprobs(model, PROMPTS, COMPS, PAD)
    torch.testing.assert_close(logp.double(), want * mask.double(), atol=1e-5, rtol=0)
    (call,) = model.calls
    assert call["input_ids"].shape == (6, 9)  # unpacked although prompts repeat
    hot = token_logprobs(model, PROMPTS, COMPS, PAD, 2.0)[0]
    assert not torch.allclose(hot, logp)


def test_unpacked_batch_is_right_padded_with_a_0_1_long_mask():
    model = ToyLM()
    token_logprobs(model, [[1, 2], [3]], [[4], [5, 6, 7]], pad_id=11)
    (call,) = model.calls
    ids, attn, keep = call["input_ids"], call["attention_mask"], call["logits_to_keep"]
    assert ids.dtype == attn.dtype == keep.dtype == torch.long
    assert ids.tolist() == [[1, 2, 4, 11], [3, 5, 6, 7]]
    assert attn.tolist() == [[1, 1, 1, 0], [1, 1, 1, 1]]
    # position len(p) - 1 + j predicts completion token j, clipped to width - 2
    assert keep.tolist() == [[1, 2, 2], [0, 1, 2]]


def test_all_distinct_prompts_are_not_packed_even_with_share_prompts():
    model = ToyLM()
    prompts, comps = [[1, 2], [3, 4], [5]], [[6], [7, 8], [9]]
    want = _reference(model, prompts, comps)
    logp, mask = token_logprobs(model, prompts, comps, PAD, share_prompts=True)
    (call,) = model.calls
    assert call["attention_mask"].dim() == 2 and call["input_ids"].shape == (3, 4)
    torch.testing.assert_close(logp.double(), want * mask.double(), atol=1e-5, rtol=0)


def test_a_model_without_logits_to_keep_gives_the_same_logprobs():
    with_keep, without = ToyLM(), ToyLM(keep=False)
    a, mask_a = token_logprobs(with_keep, PROMPTS, COMPS, PAD, 0.7)
    b, mask_b = token_logprobs(without, PROMPTS, COMPS, PAD, 0.7)
    assert torch.equal(mask_a, mask_b)
    torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    assert "logits_to_keep" not in without.calls[-1]
    assert without.calls[-1]["use_cache"] is False


def test_empty_completions_give_one_masked_column():
    model = ToyLM()
    logp, mask = token_logprobs(model, [[1, 2], [3]], [[], []], PAD)
    assert logp.shape == mask.shape == (2, 1)
    assert mask.sum() == 0 and logp.abs().sum() == 0


def test_packing_computes_the_groups_once_and_passes_them_on(monkeypatch):
    calls = []
    real = logprobs.shared_prompt_groups

    def counted(prompts):
        calls.append(len(prompts))
        return real(prompts)

    monkeypatch.setattr(logprobs, "shared_prompt_groups", counted)
    token_logprobs(ToyLM(), PROMPTS, COMPS, PAD, share_prompts=True)
    assert calls == [6]


def test_shared_prompt_logprobs_with_and_without_groups():
    model = ToyLM()
    want = _reference(model, PROMPTS, COMPS, 0.7)
    for groups in (None, [[0, 2, 5], [1, 4], [3]]):
        logp, mask = shared_prompt_logprobs(model, PROMPTS, COMPS, PAD, 0.7, groups=groups)
        assert torch.equal(mask, _lengths_mask(COMPS, 5))
        torch.testing.assert_close(logp.double(), want * mask.double(), atol=1e-5, rtol=0)
    default_t = shared_prompt_logprobs(model, PROMPTS, COMPS, PAD)[0]
    want_1 = _reference(model, PROMPTS, COMPS)
    torch.testing.assert_close(default_t.double(), want_1 * mask.double(), atol=1e-5, rtol=0)


def test_packed_mask_lets_a_completion_see_its_prompt_and_itself_only():
    model = ToyLM()
    shared_prompt_logprobs(model, [[1, 2], [3], [1, 2]], [[4, 5], [6], [7]], PAD)
    (call,) = model.calls
    m = call["attention_mask"]
    assert m.shape == (2, 1, 5, 5) and m.dtype == torch.float64
    low = torch.finfo(torch.float64).min
    ok = (m[:, 0] == 0).int().tolist()
    assert set(m.flatten().tolist()) == {0.0, low}
    # row 0: prompt 1 2 | completion 4 5 | completion 7; row 1: prompt 3 | 6 | padding
    assert ok[0] == [
        [1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0],
        [1, 1, 1, 1, 0],
        [1, 1, 0, 0, 1],
    ]
    assert ok[1] == [
        [1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [1, 0, 1, 0, 0],  # padding: the prompt and itself, never a completion
        [1, 0, 0, 1, 0],
        [1, 0, 0, 0, 1],
    ]
    assert call["position_ids"].tolist() == [[0, 1, 2, 3, 2], [0, 1, 0, 0, 0]]
    assert call["logits_to_keep"].tolist() == [[1, 2, 1], [0, 0, 0]]
    assert call["input_ids"].tolist() == [[1, 2, 4, 5, 7], [3, 6, 0, 0, 0]]


def test_packed_mask_takes_the_model_s_dtype():
    model = ToyLM(dtype=torch.float32)
    shared_prompt_logprobs(model, [[1, 2], [1, 2]], [[4], [5]], PAD)
    m = model.calls[0]["attention_mask"]
    assert m.dtype == torch.float32
    assert m.min() == torch.finfo(torch.float32).min


def test_packed_rows_layout():
    prompts = [[5, 6, 7], [8], [5, 6, 7]]
    comps = [[1, 2, 3], [3], [4]]
    ids, pos, seg, keep, tgt, where = _packed_rows(prompts, comps, 9, [[0, 2], [1]])
    for t in (ids, pos, seg, keep, tgt):
        assert t.dtype == torch.long
    assert ids.tolist() == [[5, 6, 7, 1, 2, 3, 4], [8, 3, 9, 9, 9, 9, 9]]
    assert pos.tolist() == [[0, 1, 2, 3, 4, 5, 3], [0, 1, 0, 0, 0, 0, 0]]
    assert seg.tolist() == [[0, 0, 0, 1, 1, 1, 2], [0, 1, -1, -1, -1, -1, -1]]
    assert keep.tolist() == [[2, 3, 4, 2], [0, 0, 0, 0]]
    assert tgt.tolist() == [[1, 2, 3, 4], [3, 0, 0, 0]]
    assert where == [(0, 0), (1, 0), (0, 3)]


def test_packed_rows_of_empty_completions_keep_one_column():
    ids, pos, seg, keep, tgt, where = _packed_rows([[5], [6, 7]], [[], []], 9, [[0], [1]])
    assert keep.shape == tgt.shape == (2, 1)
    assert ids.tolist() == [[5, 9], [6, 7]]
    assert where == [(0, 0), (1, 0)]


class _Elsewhere(torch.nn.Module):
    """A model whose weights live on the ``meta`` device; its logits follow its inputs'."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1, device="meta"))
        self.devices: list[str] = []

    def forward(self, input_ids, attention_mask, use_cache=True, position_ids=None, **kw):
        given = [input_ids, attention_mask, position_ids, kw["logits_to_keep"]]
        where = {t.device.type for t in given if t is not None}
        assert len(where) == 1, where  # every input on one device
        self.devices.append(where.pop())
        logits = torch.nn.functional.one_hot(input_ids, VOCAB).float()
        keep = kw["logits_to_keep"]
        logits = torch.gather(logits, 1, keep[..., None].expand(-1, -1, VOCAB))
        return type("Out", (), {"logits": logits})()


@pytest.mark.parametrize("share", [False, True])
def test_inputs_go_to_the_device_given_else_the_model_s(share):
    model = _Elsewhere()
    logp, mask = token_logprobs(model, PROMPTS, COMPS, PAD, device=torch.device("cpu"), share_prompts=share)
    assert model.devices == ["cpu"] and logp.device.type == mask.device.type == "cpu"
    logp, mask = token_logprobs(model, PROMPTS, COMPS, PAD, share_prompts=share)
    assert model.devices == ["cpu", "meta"] and logp.device.type == mask.device.type == "meta"


def test_packed_one_token_completions_give_one_column():
    model = ToyLM()
    prompts, comps = [[1, 2], [1, 2], [3]], [[4], [5], [6]]
    want = _reference(model, prompts, comps)
    logp, mask = shared_prompt_logprobs(model, prompts, comps, PAD)
    assert logp.shape == mask.shape == (3, 1) and mask.sum() == 3
    torch.testing.assert_close(logp.double(), want, atol=1e-5, rtol=0)


def test_shared_prompt_groups_never_shares_an_empty_prompt():
    """Identical non-empty prompts share a group in first-seen order; each empty prompt is a
    group of its own (its first token has no predicting position)."""
    from learners.policy.logprobs import shared_prompt_groups

    got = shared_prompt_groups([[1, 2], [], [1, 2], [], [3]])
    assert got == [[0, 2], [1], [3], [4]]

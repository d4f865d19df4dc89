"""``hf`` engine: log-probs reduced on the model's device, one batched stop check per step.

Both changed paths are compared against the code they replaced (kept as references in
:mod:`benchmarks.perf.hf_engine_gpu`, which times them on a GPU):
the ``[B, T, V]`` stack moved to the host for the log-probs, and the row-by-row
``RowLimits`` that called each row's ``StopStringCriteria`` (and synced) on its own.
"""

import pytest
import torch

from benchmarks.perf.hf_engine_gpu import OldRowLimits, old_sampled_logprobs  # replaced code
from learners.engines import HFEngine, RowLimits
from learners.engines import hf_engine as hf_engine_module
from learners.engines.hf_engine import sampled_logprobs
from learners.policy import HFPolicy, SamplingConfig

OBS = [
    {"system": "You plan.", "user": "Plan task 1.", "prefix": "<plan>"},
    {"system": "You solve.", "user": "Solve 2 + 2.", "prefix": ""},
    {"system": "You review.", "user": "Score it, then explain at length.", "prefix": "<score>"},
    {"system": "", "user": "Hi", "prefix": ""},
    {"system": "You solve.", "user": "Solve 3 * 7 and show the steps.", "prefix": "Step"},
]


@pytest.fixture(scope="module")
def policy(tiny_path):
    return HFPolicy(tiny_path, device="cpu", seed=0)


@pytest.mark.parametrize("temperature", [1.0, 0.7, 1.3])
def test_sampled_logprobs_equal_the_stacked_host_computation(temperature):
    g = torch.Generator().manual_seed(0)
    logits = tuple(torch.randn(4, 300, generator=g) * 5 for _ in range(7))
    tokens = torch.randint(0, 300, (4, 7), generator=g)
    got = sampled_logprobs(logits, tokens, temperature)
    want = old_sampled_logprobs(logits, tokens, temperature)
    assert got.dtype == torch.float32 and got.shape == (4, 7)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    assert sampled_logprobs((), torch.zeros((3, 0), dtype=torch.long), 1.0).shape == (3, 0)


def test_batched_row_limits_stop_the_same_rows_at_the_same_steps(policy):
    """Random token streams, mixed stop sets (shared, distinct, none) and budgets: both
    criteria return the same rows at every step and record the same stops."""
    engine = HFEngine(policy)
    tok = policy.tokenizer
    stops = [("e",), ("e",), (), ("t", "a"), ("e",), (), ("zz",), ("t", "a")]
    budgets = [30, 12, 9, 30, 25, 30, 3, 17]
    crits = [engine.stop_criteria(st) if st else None for st in stops]
    width = 5
    g = torch.Generator().manual_seed(1)
    letters = torch.tensor([tok.encode(ch, add_special_tokens=False)[0] for ch in "abcdeftz "])
    ids = letters[torch.randint(0, len(letters), (len(stops), width + 30), generator=g)]
    new = RowLimits(width, budgets, crits, stops, tok)
    old = OldRowLimits(width, budgets, crits, stops, tok)
    for t in range(1, 31):
        seq = ids[:, : width + t]
        assert new(seq, None).tolist() == old(seq, None).tolist(), t
    assert new.stopped_at == old.stopped_at and new.by_string == old.by_string
    assert any(new.by_string) and not all(new.by_string)  # both kinds of stop happened


def _run(policy, sampling, budgets, stops):
    policy.generator.manual_seed(0)
    return policy.generate(OBS, sampling, budgets=budgets, stops=stops)


def _stop_in(text: str, width: int) -> tuple[str, ...]:
    """A stop string of ``width`` printable ASCII characters found past the start of ``text``."""
    for i in range(2, len(text) - width + 1):
        piece = text[i : i + width]
        if all(" " <= ch <= "~" for ch in piece):
            return (piece,)
    return ()


@pytest.mark.parametrize(
    "sampling",
    [
        SamplingConfig(temperature=1.0, batch_size=3),
        SamplingConfig(temperature=0.7, top_p=0.9, batch_size=8),
        SamplingConfig(do_sample=False, batch_size=8),
    ],
)
def test_engine_samples_and_logprobs_match_the_old_path(policy, monkeypatch, sampling):
    budgets = [24, 7, 40, 16, 33]
    free = _run(policy, sampling, budgets, [()] * len(OBS))
    # stop strings these samples reach (one or two characters, and one that never occurs)
    stops = [_stop_in(free[0].text, 1), (), _stop_in(free[2].text, 2) + ("\x00zz",)]
    stops += [_stop_in(free[3].text, 1) + ("\n",), _stop_in(free[4].text, 2)]
    new = _run(policy, sampling, budgets, stops)
    monkeypatch.setattr(hf_engine_module, "RowLimits", OldRowLimits)
    monkeypatch.setattr(hf_engine_module, "sampled_logprobs", old_sampled_logprobs)
    old = _run(policy, sampling, budgets, stops)
    for a, b in zip(new, old):
        assert a.completion_ids == b.completion_ids
        assert a.text == b.text and a.truncated == b.truncated
        assert len(a.logprobs) == len(a.completion_ids)
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5, rel=0)
    by_string = [any(c.text.endswith(x) for x in st) for c, st in zip(new, stops)]
    assert sum(by_string) >= 2  # stop strings ended rows

"""benchmarks/perf/step_routes.py and draft_lookup.py (issue 48): the routes past the lean
step, checked for the values they compute, never for their times."""

import json

import pytest
import torch

from benchmarks.perf import draft_lookup


class TestDraftReplay:
    def test_a_completion_that_copies_its_prompt_is_drafted_k_tokens_at_a_time(self):
        prompt = [1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2]  # ends with a suffix that recurs
        completion = [3, 4, 5, 6, 7, 8]  # what followed the earlier 1, 2
        got = draft_lookup.replay(prompt, completion, k=2)
        # each verification keeps 2 drafted tokens and adds 1: 3 + 3
        assert got == {"tokens": 6, "verifications": 2, "drafted": 4, "accepted": 4}

    def test_without_a_recurring_suffix_every_token_costs_a_verification(self):
        got = draft_lookup.replay([10, 11, 12], [13, 14, 15, 16], k=4)
        assert got == {"tokens": 4, "verifications": 4, "drafted": 0, "accepted": 0}

    def test_a_wrong_draft_keeps_only_the_correction(self):
        # the suffix [7] recurs and proposes [8, 9]; the completion goes 5, 9 instead
        got = draft_lookup.replay([7, 8, 9, 7], [5, 9], k=2)
        assert got["verifications"] == 2 and got["accepted"] == 0 and got["drafted"] >= 2

    def test_k_zero_is_plain_decoding(self):
        got = draft_lookup.replay([1, 2, 1, 2], [1, 2, 1], k=0)
        assert got == {"tokens": 3, "verifications": 3, "drafted": 0, "accepted": 0}

    def test_the_longest_recurring_suffix_is_preferred(self):
        # [2, 3] recurs at 0 (followed by 9) and [3] alone most recently (followed by 5)
        assert draft_lookup.draft([2, 3, 9, 3, 5, 2, 3], k=1, ngram=3) == [9]
        assert draft_lookup.draft([2, 3, 9, 3, 5, 2, 3], k=1, ngram=1) == [5]

    def test_siblings_put_a_group_s_earlier_rows_after_the_prompt(self, tmp_path):
        class Tokenizer:  # one token per character
            def __call__(self, text, add_special_tokens=True):
                return {"input_ids": [ord(c) for c in text]}

        step = {
            "step": 1,
            "actions": [
                {
                    "role": "solver",
                    "task_id": "t",
                    "observation": "Q:",
                    "prefix": "A",
                    "action": "Axyz",
                },
                {
                    "role": "solver",
                    "task_id": "t",
                    "observation": "Q:",
                    "prefix": "A",
                    "action": "Axyw",
                },
                {
                    "role": "solver",
                    "task_id": "u",
                    "observation": "Q:",
                    "prefix": "A",
                    "action": "Aq",
                },
            ],
        }
        (tmp_path / "step_000001.jsonl").write_text(json.dumps(step) + "\n")
        plain = draft_lookup.transcript_rows(tmp_path, Tokenizer(), siblings=False)
        assert [(r, bytes(p).decode(), bytes(c).decode()) for r, p, c in plain] == [
            ("solver", "Q:A", "xyz"),
            ("solver", "Q:A", "xyw"),
            ("solver", "Q:A", "q"),
        ]
        sib = draft_lookup.transcript_rows(tmp_path, Tokenizer(), siblings=True)
        assert [bytes(p).decode() for _, p, _ in sib] == ["Q:A", "Q:Axyz", "Q:A"]
        assert {r for r, _, _ in sib} == {"solver+siblings"}

    def test_the_demo_calls_are_summarised_per_k(self, tmp_path):
        out = draft_lookup.main(["--k", "0,2", "--out", str(tmp_path / "d.json")])
        demo = out["by_source"]["demo_calls"]
        assert demo["0"]["tokens_per_verification"] == 1.0  # no drafts: one token a forward
        assert demo["0"]["tokens"] == demo["2"]["tokens"] > 0
        assert 1.0 < demo["2"]["tokens_per_verification"] <= 3.0
        assert json.loads((tmp_path / "d.json").read_text()) == out


@pytest.fixture(scope="module")
def packed_copy(tiny_path):
    from learners.policy import HFPolicy

    if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        pytest.skip("no oneDNN bfloat16 on this CPU: the engine keeps no packed copy")
    policy = HFPolicy(tiny_path, device="cpu", seed=0, rollout="torch-bf16")
    policy.engine.sync_weights()
    return policy.engine


def test_int8_product_weights_dequantise_to_the_packed_weights(packed_copy):
    from benchmarks.perf import step_routes

    bf16 = step_routes.product_weights(packed_copy.model, "bf16")
    int8 = step_routes.product_weights(packed_copy.model, "int8")
    assert len(bf16) == len(int8) == 7 * packed_copy.model.config.num_hidden_layers + 1
    q_proj = packed_copy.model.model.layers[0].self_attn.q_proj
    ids = [id(m) for m in packed_copy.model.modules() if hasattr(m, "packed")]
    q, scale = int8[ids.index(id(q_proj))]
    assert q.dtype == torch.int8 and int(q.abs().max()) == 127
    x = torch.eye(q.shape[1], dtype=torch.bfloat16)
    weight = torch.ops.mkldnn._linear_pointwise(x, q_proj.packed, None, "none", [], "").T.float()
    # rounded to nearest with the scale the product reads: every weight within half a step
    # of its int8 value (a truncation would leave up to a whole step)
    err = (q.float() * scale.float()[:, None] - weight).abs()
    assert float((err / scale.float()[:, None]).max()) <= 0.5 + 1e-3


def test_the_eager_full_cache_step_equals_the_lean_step(packed_copy):
    from benchmarks.perf import step_routes

    step = step_routes.CompiledStep(packed_copy.model, compile=False)
    got = step_routes.agreement(step, packed_copy._lean, context=6)
    assert got["same_argmax"] and got["max_abs"] <= 1e-3 * max(got["logit_range"], 1.0)


@pytest.mark.slow
def test_the_compiled_step_agrees_with_the_lean_step(packed_copy, tmp_path):
    import shutil

    from benchmarks.perf import step_routes

    if not any(shutil.which(cc) for cc in ("g++", "c++", "clang++")):
        pytest.skip("inductor's CPU backend needs a C++ compiler")

    out = step_routes.main(
        f"--model {packed_copy.host.name} --rows 1 --repeats 1 --steps 3 --prompt 6 "
        f"--arms lean,compiled,products --out {tmp_path / 's.json'}".split()
    )
    assert set(out["table"]) == {
        "torch-bf16-lean",
        "torch-bf16-compiled",
        "bf16-products",
        "int8-products",
    }
    diff = out["compiled_vs_lean_max_logit_diff"]
    # inductor keeps fused intermediates in float32 where eager rounds them to bfloat16
    assert diff["same_argmax"] and diff["max_abs"] <= 0.05 * diff["logit_range"]
    assert out["compile_first_call_s"]["1"]["cpu"] > 0


def test_a_run_without_the_compile_records_its_arms_and_machine(packed_copy, tmp_path):
    from benchmarks.perf import step_routes

    out = step_routes.main(
        f"--model {packed_copy.host.name} --rows 1,2 --repeats 1 --steps 3 --prompt 6 "
        f"--arms lean,products --note idle --out {tmp_path / 's.json'}".split()
    )
    assert json.loads((tmp_path / "s.json").read_text()) == json.loads(json.dumps(out))
    assert set(out["table"]) == {"torch-bf16-lean", "bf16-products", "int8-products"}
    assert all(set(per_rows) == {1, 2} for per_rows in out["table"].values())
    assert (
        "compile_first_call_s" not in out and "vs_ct2_int8" not in out["table"]["bf16-products"][1]
    )
    assert out["note"] == "idle" and out["command"].startswith(
        "python -m benchmarks.perf.step_routes --model"
    )

"""The held-out execution tasks: built by a fixed-seed script, disjoint, scored by the executor."""

import gzip
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from learners.evaluation.benchmarks import BENCHMARKS, load_benchmark
from learners.evaluation.run import EvalConfig, run_eval
from learners.evaluation.scoring import score_execution
from sage_env.tasks.exec_tasks import IDENTITY_PROGRAM
from sage_env.verifiers import executor, literals

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
import build_exec_heldout  # noqa: E402

RECORDS = [
    json.loads(x)
    for x in (ROOT / "sage_env/data/exec_heldout.jsonl").read_text().splitlines()
    if x.strip()
]


def _norm(program):
    return " ".join(program.split())


def test_the_set_is_large_unique_and_deduction_only():
    assert len(RECORDS) >= 200 and "exec_heldout" in BENCHMARKS
    assert len({r["id"] for r in RECORDS}) == len(RECORDS)
    assert len({(r["program"], r["input"]) for r in RECORDS}) == len(RECORDS)
    assert {r["mode"] for r in RECORDS} == {"deduction"}


def test_disjoint_from_every_buffer_seed_and_from_cruxeval():
    seeds = [
        json.loads(x)["program"]
        for x in (ROOT / "sage_env/data/exec_seeds.jsonl").read_text().splitlines()
        if x.strip()
    ]
    with gzip.open(ROOT / "learners/data/benchmarks/code/cruxeval.jsonl.gz", "rt") as fh:
        crux = [json.loads(x)["code"] for x in fh if x.strip()]
    banned = {_norm(p) for p in seeds + crux + [IDENTITY_PROGRAM]}
    assert len(banned) > 900
    assert not [r["id"] for r in RECORDS if _norm(r["program"]) in banned]


def test_outputs_are_the_executors():
    sample = RECORDS[::24]  # 10 records, every family
    for r in sample:
        args = literals.parse_args(r["input"])
        run = executor.execute(r["program"], [args])
        assert run.outputs == (r["output"],), r["id"]


@pytest.mark.slow
def test_the_script_rebuilds_the_file_deterministically():
    # the build is sequential, so its first records are the file's first records
    assert build_exec_heldout.build(6) == RECORDS[:6]


def test_benchmark_items_continue_the_solvers_output_block_and_score_by_value():
    items = load_benchmark("exec_heldout", data_dir="/nonexistent")  # shipped with sage_env
    assert len(items) == len(RECORDS)
    it = items[0]
    assert it.prefix == "```output\n" and it.domain == "exec" and it.program == RECORDS[0]["program"]
    assert "```input\n" + RECORDS[0]["input"] in it.prompt
    assert score_execution(it, it.prefix + it.answer + "\n```")[0]
    assert not score_execution(it, it.prefix + "'not it'\n```")[0]
    assert not score_execution(it, "no block at all")[0]


def test_run_eval_sends_the_prefix_and_a_fence_stop(tmp_path):
    seen = {}

    class Scripted:
        """Answers every item with its gold output (and the first one wrongly)."""

        def generate(self, obs, sampling, stops=None):
            seen.setdefault("obs", []).extend(obs)
            seen.setdefault("stops", []).extend(stops)
            gold = {i.prompt: i.answer for i in load_benchmark("exec_heldout")}
            out = []
            for o in obs:
                text = gold[o["user"]] + "\n```"
                if len(seen.get("done", [])) == 0:
                    text, seen["done"] = "'wrong'\n```", [1]
                out.append(SimpleNamespace(text=text, prefix=o["prefix"]))
            return out

    cfg = EvalConfig(benchmarks="exec_heldout", limit=5, out=str(tmp_path), batch_size=5)
    (res,) = run_eval(cfg, policy=Scripted(), progress=False)
    assert res.pass_at[1] == pytest.approx(4 / 5)
    assert {o["prefix"] for o in seen["obs"]} == {"```output\n"}
    assert set(seen["stops"]) == {("```",)}


def test_cruxeval_parse_audit_finds_answers_the_scorer_missed():
    import cruxeval_parse_audit as audit_mod

    rows = [
        {"item_id": "a", "answer": "'abc'", "completions": ["Output: 'abc'"], "correct": [False]},
        {"item_id": "b", "answer": "'abc'", "completions": ["```\nabc\n```"], "correct": [False]},
        {"item_id": "c", "answer": "[1, 2]", "completions": ["```output\n[1, 3]\n```"], "correct": [False]},
        {"item_id": "d", "answer": "3", "completions": ["```output\n3\n```"], "correct": [True]},
    ]
    got = audit_mod.audit(rows)
    assert (got["right"], got["wrong"], got["literal"], got["bare"]) == (1, 3, 1, 1)
    assert got["ids"] == [["a", "literal"], ["b", "bare"]]

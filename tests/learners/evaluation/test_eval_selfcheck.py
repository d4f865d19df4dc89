"""The eval self-check: each benchmark's own gold, written as a model would, must score.

A sample of every local benchmark (the first items plus the ones that used to fail) runs in
CI; ``benchmarks/eval_selfcheck/run.py`` runs them all
(figures in ``docs/write-ups/evaluation.md``).
"""

import math

import pytest

from benchmarks.eval_selfcheck import run as eval_selfcheck  # noqa: E402
from learners.evaluation import input_literal, mbpp_plus_inputs
from learners.evaluation.benchmarks.math_benchmarks import _olympiad_answer
from sage_env.verifiers import CodeVerifier, MathVerifier
from tests.data_paths import require_benchmarks

SAMPLE = {
    "gsm8k": None,
    "math500": None,
    "aime24": None,
    "aime25": None,
    "amc23": None,
    # a list final_answer, several answers, stray and several $ spans, a closing period
    "olympiadbench": {"1606", "1610", "1664", "2349", "1970", "2203", "2099"},
    "humaneval": None,
    "humaneval_plus": None,
    "mbpp": None,
    # tuples (2, 106, 720), nested tuples (580, 63), complex numbers (124, 252), a dict (722)
    "mbpp_plus": {"Mbpp/2", "Mbpp/106", "Mbpp/720", "Mbpp/580", "Mbpp/63", "Mbpp/124"}
    | {"Mbpp/252", "Mbpp/722", "Mbpp/3"},
    "cruxeval_o": None,
    # inputs that are expressions, not literals: '', dict(...), range(...), lambdas, a name
    # the program defines, a string method call
    "cruxeval_i": {"sample_0", "sample_135", "sample_152", "sample_258", "sample_344"}
    | {"sample_364", "sample_522", "sample_694", "sample_770"},
}


@pytest.fixture(scope="module")
def verifiers():
    with MathVerifier() as mv, CodeVerifier() as cv:
        yield mv, cv


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SAMPLE))
def test_gold_answers_of_a_sample_of_every_benchmark_score_correct(name, verifiers):
    mv, cv = verifiers
    ids, data = SAMPLE[name], require_benchmarks(name)
    result = eval_selfcheck.check_benchmark(
        name, data, mv, cv, limit=None if ids else 4, plus_limit=10, item_ids=ids
    )
    assert result.items == (len(ids) if ids else 4)
    assert result.failures == [] and result.rate == 1.0


def test_olympiad_gold_is_the_final_answer_list_as_latex():
    assert _olympiad_answer({"final_answer": ["$2^{1009}$"]}) == "2^{1009}"
    assert _olympiad_answer({"final_answer": "['$2^{1009}$']"}) == "2^{1009}"  # stringified
    assert _olympiad_answer({"final_answer": ["$69$,$84$"]}) == "69,84"
    assert _olympiad_answer({"final_answer": ["$221,$8$"]}) == "221,8"
    assert _olympiad_answer({"final_answer": ["$(-\\infty, 0) \\cup\\{1\\}$."]}) == (
        "(-\\infty, 0) \\cup\\{1\\}"
    )
    assert _olympiad_answer({"final_answer": ["$3$", "$\\frac{1}{2}$"]}) == "3, \\frac{1}{2}"


def test_mbpp_plus_inputs_get_the_types_evalplus_gives_them():
    assert mbpp_plus_inputs("Mbpp/106", [[[5, 6], [9, 10]]]) == [[[5, 6], (9, 10)]]
    assert mbpp_plus_inputs("Mbpp/580", [[[4, [7, [2]]], 1]]) == [[(4, (7, (2,))), 1]]
    assert mbpp_plus_inputs("Mbpp/2", [[[3, 4], [4]]]) == [[(3, 4), (4,)]]
    assert mbpp_plus_inputs("Mbpp/63", [[[[3, 5], [1, 7]]]]) == [[[(3, 5), (1, 7)]]]
    assert mbpp_plus_inputs("Mbpp/124", [[3, "1+2j"]]) == [[3.0, 1 + 2j]]
    assert mbpp_plus_inputs("Mbpp/115", [[[[1], []]]]) == [[[{1}, {}]]]
    assert mbpp_plus_inputs("Mbpp/722", [[{"a": [1, 2]}, 3]]) == [[{"a": (1, 2)}, 3]]
    assert mbpp_plus_inputs("Mbpp/3", [[[1, 2]]]) == [[[1, 2]]]  # not listed: unchanged


@pytest.mark.parametrize(
    "value",
    [
        (1,),
        (),
        [1, (2, (3,))],
        {1, 2},
        set(),
        frozenset(),
        frozenset({4}),
        1 - 2j,
        float("inf"),
        -float("inf"),
        -0.0,
        0.1,
        1e300,
        {"a": (1,), 2: [None, True]},
        "x'\n\"",
        b"\x00",
        10**40,
    ],
)
def test_input_literal_round_trips_types_json_loses(value):
    back = eval(input_literal(value))  # noqa: S307 - our own literal of trusted data
    assert back == value and type(back) is type(value)
    if isinstance(value, tuple):
        assert all(type(a) is type(b) for a, b in zip(back, value))
    nan = eval(input_literal(float("nan")))  # noqa: S307
    assert math.isnan(nan)


def test_the_selfcheck_table_names_failing_items(monkeypatch):
    monkeypatch.setattr(eval_selfcheck, "EXCEPTIONS", {"Mbpp/737": "a named special case"})
    ok = eval_selfcheck.SelfCheck("gsm8k", 2, 2, 0.1)
    bad = eval_selfcheck.SelfCheck(
        "mbpp_plus", 3, 2, 1.0, [{"item_id": "Mbpp/7", "status": "failed", "reason": "x"}], 10
    )
    named = eval_selfcheck.SelfCheck(
        "mbpp_plus", 1, 0, 1.0, [{"item_id": "Mbpp/737", "status": "failed", "reason": "x"}]
    )
    table = eval_selfcheck.table([ok, bad, named])
    assert "| gsm8k | 2 / 2 | 100.0% |" in table
    assert "| mbpp_plus | 2 / 3 | 66.7% | 1.0 | 10 | Mbpp/7 (unexplained) |" in table
    assert "| 0 / 1 | 0.0% | 1.0 | all | Mbpp/737 |" in table
    assert [f["item_id"] for f in bad.unexplained] == ["Mbpp/7"] and named.unexplained == []


def test_cruxeval_judges_values_and_runs_f_for_the_input(verifiers):
    from learners.evaluation import load_benchmark, score

    mv, cv = verifiers
    data = require_benchmarks("cruxeval_o", "cruxeval_i")
    o = load_benchmark("cruxeval_o", data)[0]  # f(nums) -> [(4, 1), ... (2, 3)]
    assert o.domain == "exec" and "```input" in o.prompt
    assert score(o, f"```output\n{o.answer.replace(' ', '')}\n```", mv, cv)[0]
    assert not score(o, "```output\n[(4, 1)]\n```", mv, cv)[0]
    i = load_benchmark("cruxeval_i", data)[0]
    # any input for which f gives the output is right: here the same multiset reordered
    assert score(i, "```input\n[3, 1, 1, 3, 1, 1]\n```", mv, cv)[0]
    assert not score(i, "```input\n[1]\n```", mv, cv)[0]
    ok, rec = score(i, "```input\n__import__('os').system('true')\n```", mv, cv)
    assert not ok and rec["status"] == "invalid"

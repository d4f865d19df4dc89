import math
from itertools import combinations

import pytest

from learners.evaluation import (
    EvalItem,
    gsm8k_gold,
    load_benchmark,
    markdown_table,
    pass_at_k,
    plus_tests,
    program_for,
    score,
    summarise,
)
from learners.evaluation.decontam import overlap_report
from sage_env import Task
from sage_env.verifiers import CodeVerifier, MathVerifier
from tests.data_paths import require_benchmarks


@pytest.fixture(scope="module")
def verifiers():
    with MathVerifier() as mv:
        yield mv, CodeVerifier(timeout_s=10)


@pytest.mark.parametrize("n, c, k", [(5, 2, 1), (5, 2, 3), (10, 0, 4), (10, 10, 4), (4, 1, 4)])
def test_pass_at_k_matches_the_closed_form(n, c, k):
    # closed form: probability that a random k-subset of the n samples contains a correct one
    subsets = list(combinations([1] * c + [0] * (n - c), k))
    expected = sum(any(s) for s in subsets) / len(subsets)
    assert pass_at_k(n, c, k) == pytest.approx(expected)
    assert pass_at_k(n, c, 1) == pytest.approx(c / n)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def test_summarise_and_table():
    res = summarise("toy", [[True, False], [False, False]], [{}, {}], ks=(1, 2, 5))
    assert res.pass_at == {1: pytest.approx(0.25), 2: pytest.approx(0.5)}
    table = markdown_table([res])
    assert "| toy | 2 | 2 | 25.0 | 50.0 |" in table


@pytest.mark.parametrize(
    "completion, correct",
    [
        ("... so she makes \\boxed{18} dollars", True),
        ("The answer is \\boxed{17}", False),
        ("I don't know", False),
        ("\\boxed{1,8", False),
    ],
)
def test_math_scoring(verifiers, completion, correct):
    item = EvalItem("gsm8k", "0", "math", "q", answer=gsm8k_gold("...\n#### 18"))
    assert score(item, completion, *verifiers)[0] is correct


def test_gsm8k_gold_strips_commas():
    assert gsm8k_gold("blah #### 1,000") == "1000"


HE_PROMPT = 'def add(a, b):\n    """Add two numbers."""\n'
HE_TEST = (
    "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(0, 0) == 0\n"
)


@pytest.mark.parametrize(
    "completion, correct",
    [
        ("```python\ndef add(a, b):\n    return a + b\n```", True),  # whole function
        ("    return a + b\n", True),  # body continuation
        ("```python\ndef add(a, b):\n    return a - b\n```", False),  # wrong
        ("```python\ndef add(a, b) return\n```", False),  # malformed
        ("no code at all, sorry", False),
    ],
)
def test_humaneval_style_scoring(verifiers, completion, correct):
    item = EvalItem(
        "humaneval",
        "x",
        "code",
        HE_PROMPT,
        tests=[f"{HE_TEST}\ncheck(add)"],
        entry_point="add",
        code_prefix=HE_PROMPT,
    )
    assert score(item, completion, *verifiers)[0] is correct


def test_plus_tests_compare_with_the_canonical_solution(verifiers):
    row = {
        "entry_point": "half",
        "prompt": "def half(x):\n",
        "canonical_solution": "    return x / 2\n",
        "base_input": [[4]],
        "plus_input": [[1], [float("inf")]],
        "atol": 0,
    }
    setup, tests = plus_tests(row, plus_limit=None)
    assert len(tests) == 3
    mv, cv = verifiers
    good = cv.verify("def half(x):\n    return x * 0.5\n", tests, setup)
    bad = cv.verify("def half(x):\n    return x // 2\n", tests, setup)
    # 4 // 2 == 2 matches 2.0; 1 // 2 == 0 is not 0.5; inf // 2 is nan, not inf
    assert good.score == 1.0 and bad.passed == 1


def test_program_for_keeps_prompt_imports():
    item = EvalItem(
        "humaneval",
        "x",
        "code",
        "p",
        entry_point="f",
        code_prefix="from typing import List\n\ndef f(xs: List[int]):\n",
    )
    prog = program_for(item, "```python\ndef f(xs: List[int]):\n    return 1\n```")
    assert prog.startswith("from typing import List\n")


def test_decontam_flags_a_planted_duplicate():
    items = [
        EvalItem("toy", str(i), "math", f"q{i}", text=t)
        for i, t in enumerate(
            [
                "A farmer has 17 sheep and all but 9 run away. How many sheep does the farmer have "
                "left at the end of the long day on the farm?",
                "Compute the number of ordered pairs of integers whose squares sum to exactly one "
                "hundred and twenty five in total.",
            ]
        )
    ]
    train = [
        Task("planted", "math", items[0].text + " Answer briefly.", answer="9", source="gsm8k"),
        Task("other", "math", "What is 2 + 2?", answer="4", source="gsm8k"),
    ]
    report = overlap_report(items, n=13, tasks=train)
    assert report.overlapping == ["0"] and report.matches["0"][0][0] == "planted"
    assert report.contaminated and math.isclose(report.share, 0.5)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, count",
    [
        ("gsm8k", 1319),
        ("math500", 500),
        ("aime24", 30),
        ("aime25", 30),
        ("amc23", 40),
        ("olympiadbench", 675),
        ("humaneval", 164),
        ("humaneval_plus", 164),
        ("mbpp", 257),
        ("mbpp_plus", 378),
    ],
)
def test_local_loaders(name, count):
    items = load_benchmark(name, require_benchmarks(name), plus_limit=5)
    assert len(items) == count
    assert (
        all(it.answer for it in items)
        if items[0].domain == "math"
        else all(it.tests and it.entry_point for it in items)
    )


@pytest.mark.slow
def test_canonical_solutions_score_correct_on_plus_tests(verifiers):
    mv, cv = verifiers
    import gzip
    import json

    data = require_benchmarks("humaneval_plus")
    rows = [json.loads(x) for x in gzip.open(data / "code/HumanEvalPlus-v0.1.10.jsonl.gz", "rt")]
    items = load_benchmark("humaneval_plus", data, plus_limit=20)[:10]
    for row, item in zip(rows, items):
        ok, rec = score(
            item, "```python\n" + row["prompt"] + row["canonical_solution"] + "```", mv, cv
        )
        assert ok, (item.item_id, rec)


def test_decontam_on_real_data_flags_humaneval_only():
    for name, flagged in (("humaneval_plus", True), ("gsm8k", False), ("aime24", False)):
        data = require_benchmarks(name)
        assert overlap_report(load_benchmark(name, data, plus_limit=1)).contaminated is flagged


def test_validation_says_what_it_runs_and_scores_with_the_verifier(verifiers, caplog):
    # validation runs before the training bar (and between its steps): it names itself in the
    # log, and has a bar of its own when asked (below)
    from learners.evaluation import validation_accuracy
    from learners.policy import Completion

    class Answers:
        def generate(self, observations, sampling):
            texts = ["\\boxed{4}", "\\boxed{7}"]
            return [
                Completion(prompt_ids=[], completion_ids=[], logprobs=[], text=t) for t in texts
            ]

    tasks = [
        Task(task_id=f"t{i}", domain="math", prompt="What is 2+2?", answer="4") for i in range(2)
    ]
    with caplog.at_level("INFO", logger="learners.evaluation"):
        acc = validation_accuracy(Answers(), tasks, verifiers[0], max_new_tokens=32)
    assert acc == 0.5
    assert "validation: 2 held-out tasks, greedy, up to 32 new tokens each" in caplog.text


def test_validation_generates_a_batch_at_a_time_under_its_progress_bar(verifiers, capsys):
    from learners.evaluation import validation_accuracy
    from learners.policy import Completion

    calls = []

    class Answers:
        def generate(self, observations, sampling):
            calls.append(len(observations))
            return [
                Completion(prompt_ids=[], completion_ids=[], logprobs=[], text="\\boxed{4}")
                for _ in observations
            ]

    tasks = [
        Task(task_id=f"t{i}", domain="math", prompt="What is 2+2?", answer="4" if i % 4 else "5")
        for i in range(40)
    ]
    acc = validation_accuracy(Answers(), tasks, verifiers[0], 32, batch_size=16, progress=True)
    assert calls == [16, 16, 8] and acc == 30 / 40
    assert "validation" in capsys.readouterr().err  # the bar

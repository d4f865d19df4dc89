"""AZR's answer checks (``sage_env.verifiers.answer_checks``) against a fake sandbox.

No sandbox: the names the module imported from the executor (``execute``, ``execute_all``,
``draw_check_variants``) are replaced by :class:`_FakeSandbox`, which runs this file's own
fixture programs in-process (trusted test code, never model output) or returns scripted runs,
and records what it was called with. Each test asserts the exact :class:`Check` (score,
formatted, status, reason) and, where that is the point, the runs asked for, at a boundary or
a non-default parameter, so that a changed comparison, bound, branch or forwarded argument
fails here (written for a mutation run of the module with this file alone;
docs/reference/testing.md).
"""

import random
from dataclasses import FrozenInstanceError

import pytest

from sage_env.verifiers import answer_checks
from sage_env.verifiers.answer_checks import (
    VERDICT_RUNS,
    Check,
    check_abduction,
    check_deduction,
    check_induction,
)
from sage_env.verifiers.executor import Execution
from sage_env.verifiers.program_checks import program_refusal

RIGHT = "equals the executor's output"
WRONG = "differs from the executor's output"
NOT_REPEATED = "f's output on this input does not repeat"

IDENTITY = "def f(x):\n    return x\n"
DOUBLE = "def f(x):\n    return x * 2\n"
NONE = "def f(x):\n    return None\n"
DIVIDE = "def f(x=0):\n    return 10 // x\n"
SEVEN = "def f():\n    return 7\n"
KEYS = "def f(d):\n    return sorted(d)\n"
RAISES_ON_2 = "def f(x):\n    if x == 2:\n        raise ValueError('two')\n    return x * 2\n"
ZERO_DIVISION = "ZeroDivisionError: integer division or modulo by zero"
FIVE_VARIANTS = tuple(f"variant-{n}" for n in range(5))  # what the fake draws for 5 runs


def _run(program: str, args_list, expressions: bool) -> Execution:
    """``f(*args)`` of a trusted fixture program for each input, in-process, as execute has it."""
    ns: dict = {}
    exec(program, ns)
    outputs, errors = [], []
    for args in args_list:
        try:
            if expressions:
                ns["_collect"] = lambda *a, **k: (a, k)
                pos, kw = eval(f"_collect({args})", ns)
            else:
                pos, kw = tuple(args), {}
            outputs.append(repr(ns["f"](*pos, **kw)))
            errors.append(None)
        except Exception as exc:
            outputs.append(None)
            errors.append(f"{type(exc).__name__}: {exc}")
    status = "ok" if all(e is None for e in errors) else "error"
    first = next((e for e in errors if e is not None), "")
    return Execution(status, tuple(outputs), tuple(errors), first or "every call returned")


def _match(hits: int, inputs: int) -> str:
    return f"{hits}/{inputs} held-out outputs match"


def _ok(*outputs: str) -> Execution:
    return Execution("ok", outputs, (None,) * len(outputs), "every call returned")


class _FakeSandbox:
    """Stands in for the executor: scripted or in-process runs, every call recorded.

    ``first``: what :func:`execute` returns (``None``: run the program in-process).
    ``repeats``: what the n-th check run of :func:`execute_all` returns (``None`` or past the
    end: run the program in-process).
    """

    def __init__(self) -> None:
        self.first: Execution | None = None
        self.repeats: list[Execution | None] = []
        self.execute_calls: list[tuple] = []
        self.draws: list[tuple] = []
        self.execute_all_calls: list[tuple] = []

    def execute(self, program, args_list, **kwargs):
        self.execute_calls.append((program, list(args_list), kwargs))
        if self.first is not None:
            return self.first
        return _run(program, args_list, kwargs.get("expressions", False))

    def draw_check_variants(self, count, check_rng=None):
        self.draws.append((count, check_rng))
        return tuple(f"variant-{n}" for n in range(count))

    def execute_all(self, program, args_list, variants, **kwargs):
        self.execute_all_calls.append((program, list(args_list), tuple(variants), kwargs))
        runs = []
        for n, _ in enumerate(variants):
            scripted = self.repeats[n] if n < len(self.repeats) else None
            if scripted is None:
                scripted = _run(program, args_list, kwargs.get("expressions", False))
            runs.append(scripted)
        return runs

    @property
    def repeat_runs(self) -> int:
        """Check runs asked for, over every call of :func:`execute_all`."""
        return sum(len(call[2]) for call in self.execute_all_calls)

    @property
    def untouched(self) -> bool:
        return not (self.execute_calls or self.draws or self.execute_all_calls)


@pytest.fixture
def box(monkeypatch) -> _FakeSandbox:
    fake = _FakeSandbox()
    monkeypatch.setattr(answer_checks, "execute", fake.execute)
    monkeypatch.setattr(answer_checks, "execute_all", fake.execute_all)
    monkeypatch.setattr(answer_checks, "draw_check_variants", fake.draw_check_variants)
    return fake


def _same(check: Check, score: float, formatted: bool, status: str, reason: str) -> None:
    assert check == Check(score, formatted, status, reason)
    assert type(check.score) is float
    assert type(check.formatted) is bool


# ---------------------------------------------------------------- constants, Check
def test_verdict_runs_is_six():
    assert VERDICT_RUNS == 6


def test_check_is_frozen():
    check = Check(1.0, True, "passed", "r")
    with pytest.raises(FrozenInstanceError):
        check.score = 0.0  # type: ignore[misc]


# ---------------------------------------------------------------- check_deduction
def test_deduction_without_an_answer_block_is_unformatted(box):
    _same(check_deduction(None, "1"), 0.0, False, "invalid", "no output answer found")
    assert box.untouched


@pytest.mark.parametrize("predicted", ["f(1)", "x", "", "   ", "(", "[1,"])
def test_deduction_refuses_an_answer_that_is_not_a_literal(predicted):
    check = check_deduction(predicted, "1")
    _same(check, 0.0, False, "invalid", "answer is not a Python literal")


@pytest.mark.parametrize("gold", ["x(", "", "f(1)"])
@pytest.mark.parametrize("strict", [True, False])
def test_deduction_with_an_unparseable_gold_is_invalid_not_right(gold, strict):
    # the gold would parse as None, and the answer "None" be right
    check = check_deduction("None", gold, strict_types=strict)
    _same(check, 0.0, True, "invalid", "the gold output is not a Python literal")


@pytest.mark.parametrize(
    ("predicted", "gold", "strict", "loose"),
    [
        ("1", "1", True, True),
        ("1", "2", False, False),
        ("1", "True", False, True),
        ("True", "1", False, True),
        ("1.0", "1", False, True),
        ("1", "1.0", False, True),
        ("(1, 2)", "[1, 2]", False, False),  # a tuple is never a list
        ("[1, 2]", "(1, 2)", False, False),
        ("[1, 2]", " [1, 2]\n", True, True),
        ("[1, 2]", "[1, 3]", False, False),
        (" 'a' ", "'a'", True, True),
        ("{1, 2}", "{2, 1}", True, True),
        ("None", "None", True, True),
        ("None", "0", False, False),
    ],
)
def test_deduction_compares_values_strictly_by_default(predicted, gold, strict, loose):
    def expected(right: bool) -> tuple:
        return (float(right), True, "passed" if right else "failed", RIGHT if right else WRONG)

    _same(check_deduction(predicted, gold), *expected(strict))
    _same(check_deduction(predicted, gold, strict_types=True), *expected(strict))
    _same(check_deduction(predicted, gold, strict_types=False), *expected(loose))


# ---------------------------------------------------------------- check_abduction: refusals
def test_abduction_without_an_answer_block_is_unformatted(box):
    _same(check_abduction(None, DOUBLE, "2"), 0.0, False, "invalid", "no input answer found")
    assert box.untouched


@pytest.mark.parametrize("expressions", [False, True])
def test_abduction_with_an_unparseable_gold_is_invalid_before_any_run(box, expressions):
    # f returns None; the gold would parse as None, and the answer be right
    check = check_abduction("1", NONE, "x(", expressions=expressions)
    _same(check, 0.0, True, "invalid", "the gold output is not a Python literal")
    assert box.untouched


@pytest.mark.parametrize("predicted", ["x, 1", "f(1)", "", "   ", "1,,", "dict(a=1)"])
def test_abduction_refuses_an_input_that_is_not_literals(box, predicted):
    check = check_abduction(predicted, DOUBLE, "2")
    _same(check, 0.0, False, "invalid", "answer is not a list of Python literals")
    assert box.untouched


@pytest.mark.parametrize("predicted", ["__import__('os')", "eval('1')", "x._y", "(a := 1)"])
def test_abduction_refuses_an_unsafe_expression(box, predicted):
    check = check_abduction(predicted, DOUBLE, "2", expressions=True)
    _same(check, 0.0, False, "invalid", "answer is not a safe argument list")
    assert box.untouched


# ---------------------------------------------------------------- check_abduction: runs
def test_abduction_runs_with_the_default_limits_and_six_runs(box):
    _same(check_abduction("3", DOUBLE, "6"), 1.0, True, "passed", RIGHT)
    limits = {"timeout_s": 5.0, "memory_mb": 512, "expressions": False}
    assert box.execute_calls == [(DOUBLE, [(3,)], limits)]
    assert box.draws == [(VERDICT_RUNS - 1, None)]
    assert box.execute_all_calls == [(DOUBLE, [(3,)], FIVE_VARIANTS, limits)]


def test_abduction_forwards_limits_expressions_and_check_rng(box):
    rng = random.Random(3)
    check = check_abduction(
        "  dict(a=1)  ", KEYS, "['a']", timeout_s=2.5, memory_mb=256, expressions=True,
        verdict_runs=4, check_rng=rng,
    )  # fmt: skip
    _same(check, 1.0, True, "passed", RIGHT)
    limits = {"timeout_s": 2.5, "memory_mb": 256, "expressions": True}
    assert box.execute_calls == [(KEYS, ["dict(a=1)"], limits)]
    assert len(box.draws) == 1
    assert box.draws[0][0] == 3
    assert box.draws[0][1] is rng
    variants = ("variant-0", "variant-1", "variant-2")
    assert box.execute_all_calls == [(KEYS, ["dict(a=1)"], variants, limits)]


def test_abduction_takes_literals_under_expressions_too(box):
    _same(
        check_abduction("[1, 2]", IDENTITY, "[1, 2]", expressions=True), 1.0, True, "passed", RIGHT
    )
    assert box.execute_calls[0][1] == ["[1, 2]"]


@pytest.mark.parametrize(
    "status", ["timeout", "memory", "crashed", "blocked", "syntax_error", "failed"]
)
@pytest.mark.parametrize(("predicted", "expressions"), [("3", False), ("", True)])
def test_abduction_passes_a_sandbox_status_through_formatted(box, status, predicted, expressions):
    box.first = Execution(status, reason=f"the run: {status}")
    check = check_abduction(predicted, DOUBLE, "6", expressions=expressions)
    _same(check, 0.0, True, status, f"the run: {status}")
    assert box.draws == []
    assert box.execute_all_calls == []


def test_abduction_when_f_raises_fails_a_nonempty_answer(box):
    check = check_abduction("0", DIVIDE, "5")
    _same(check, 0.0, True, "failed", f"f raised on this input: {ZERO_DIVISION}")
    assert box.execute_calls[0][1] == [(0,)]
    assert box.execute_all_calls == []


@pytest.mark.parametrize("predicted", ["", "  \n "])
def test_abduction_when_f_raises_an_empty_answer_is_unformatted(box, predicted):
    check = check_abduction(predicted, DIVIDE, "5", expressions=True)
    _same(check, 0.0, False, "invalid", f"f raised on this input: {ZERO_DIVISION}")
    assert box.execute_calls[0][1] == [""]
    assert box.execute_all_calls == []


def test_abduction_a_wrong_answer_needs_no_repeat(box):
    _same(check_abduction("4", DOUBLE, "6"), 0.0, True, "failed", WRONG)
    assert box.draws == []
    assert box.execute_all_calls == []


def test_abduction_output_that_does_not_parse_is_wrong(box):
    # parsed, the output would be None, as the gold is
    box.first = _ok("<object object at 0x1>")
    box.repeats = [_ok("<object object at 0x1>")] * 5
    _same(check_abduction("3", DOUBLE, "None"), 0.0, True, "failed", WRONG)
    assert box.execute_all_calls == []


@pytest.mark.parametrize("predicted", ["", "  \n "])
def test_abduction_an_empty_answer_that_is_right_is_formatted(box, predicted):
    check = check_abduction(predicted, SEVEN, "7", expressions=True)
    _same(check, 1.0, True, "passed", RIGHT)
    assert box.repeat_runs == 5


def test_abduction_an_empty_answer_that_is_wrong_is_unformatted(box):
    _same(check_abduction("", SEVEN, "8", expressions=True), 0.0, False, "invalid", WRONG)
    assert box.execute_all_calls == []


def test_abduction_a_nonempty_expression_that_is_wrong_is_formatted(box):
    _same(check_abduction("dict(b=1)", KEYS, "['a']", expressions=True), 0.0, True, "failed", WRONG)


def test_abduction_an_empty_right_answer_that_does_not_repeat_is_formatted(box):
    box.repeats = [None, _ok("8")]
    check = check_abduction("", SEVEN, "7", expressions=True)
    _same(check, 0.0, True, "nondeterministic", NOT_REPEATED)


# ---------------------------------------------------------------- check_abduction: repeats
@pytest.mark.parametrize(
    "bad",
    [
        _ok("7"),  # another value
        _ok("6.0"),  # the same value, another type
        _ok("True"),
        _ok("<object object at 0x1>"),  # not a literal
        _ok("x("),
        Execution("ok", (None,), ("?",), "?"),  # no output, however it says ok
        Execution("error", (None,), ("ValueError: v",), "ValueError: v"),
        Execution("timeout", reason="slow"),
        Execution("memory", ("6",), (None,), "out of memory"),  # the status alone counts
        Execution("crashed", ("6",), (None,), "crashed"),
    ],
)
@pytest.mark.parametrize("at", [0, 2, 4])
def test_abduction_a_right_answer_that_does_not_repeat_scores_zero(box, bad, at):
    box.repeats = [None] * at + [bad]
    check = check_abduction("3", DOUBLE, "6")
    _same(check, 0.0, True, "nondeterministic", NOT_REPEATED)
    assert len(box.execute_all_calls) == 1
    assert box.repeat_runs == 5


def test_abduction_verdict_runs_one_runs_no_repeat(box):
    box.repeats = [_ok("7")] * 6
    _same(check_abduction("3", DOUBLE, "6", verdict_runs=1), 1.0, True, "passed", RIGHT)
    assert box.repeat_runs == 0
    assert all(count == 0 for count, _ in box.draws)
    assert len(box.execute_calls) == 1


def test_abduction_verdict_runs_two_runs_one_repeat(box):
    rng = random.Random(0)
    box.repeats = [_ok("7")]
    check = check_abduction("3", DOUBLE, "6", verdict_runs=2, check_rng=rng)
    _same(check, 0.0, True, "nondeterministic", NOT_REPEATED)
    assert box.draws == [(1, rng)]
    assert box.repeat_runs == 1


def test_abduction_verdict_runs_two_passes_when_the_repeat_agrees(box):
    box.repeats = [_ok("6"), _ok("7")]  # only the first is asked for
    _same(check_abduction("3", DOUBLE, "6", verdict_runs=2), 1.0, True, "passed", RIGHT)
    assert box.repeat_runs == 1


@pytest.mark.parametrize("gold", ["True", "1.0"])
def test_abduction_compares_strictly_by_default(box, gold):
    _same(check_abduction("1", IDENTITY, gold), 0.0, True, "failed", WRONG)
    _same(check_abduction("1", IDENTITY, gold, strict_types=True), 0.0, True, "failed", WRONG)
    assert box.execute_all_calls == []


@pytest.mark.parametrize("gold", ["True", "1.0", "1"])
def test_abduction_loose_types_take_python_equality(box, gold):
    check = check_abduction("1", IDENTITY, gold, strict_types=False)
    _same(check, 1.0, True, "passed", RIGHT)
    assert box.repeat_runs == 5


def test_abduction_loose_types_still_tell_a_tuple_from_a_list(box):
    check = check_abduction("[1, 2]", IDENTITY, "(1, 2)", strict_types=False)
    _same(check, 0.0, True, "failed", WRONG)


def test_abduction_repeats_compare_with_the_run_strictly_under_loose_types(box):
    # f gave 1 (right under ==): a repeat giving True is another output, whatever the gold
    box.repeats = [_ok("True")]
    check = check_abduction("1", IDENTITY, "True", strict_types=False)
    _same(check, 0.0, True, "nondeterministic", NOT_REPEATED)


def test_abduction_repeats_accept_a_set_in_another_order(box):
    box.first = _ok("{1, 2}")
    box.repeats = [_ok("{2, 1}")] * 5
    _same(check_abduction("3", DOUBLE, "{2, 1}"), 1.0, True, "passed", RIGHT)


# ---------------------------------------------------------------- check_induction: refusals
@pytest.mark.parametrize(
    "program", [None, "", "def g(x):\n    return x\n", "def f(", "f = lambda x: x\n"]
)
def test_induction_without_a_program_defining_f_is_unformatted(box, program):
    check = check_induction(program, ["1"], ["1"])
    _same(check, 0.0, False, "invalid", "no Python program defining f found")
    assert box.untouched


def test_induction_refuses_a_program_off_the_allow_list(box):
    program = "import os\n\ndef f(x):\n    return x\n"
    reason = program_refusal(program)
    assert reason
    _same(
        check_induction(program, ["1"], ["1"]), 0.0, True, "blocked", f"program refused: {reason}"
    )
    assert box.untouched


@pytest.mark.parametrize("inputs", [[], ["x"], [""], ["1", "x"], ["x", "1"], ["1", "2", "1,,"]])
def test_induction_needs_every_input_to_parse(box, inputs):
    check = check_induction(DOUBLE, inputs, ["2"] * len(inputs))
    _same(check, 0.0, True, "invalid", "task has no parseable held-out inputs")
    assert box.untouched


@pytest.mark.parametrize(
    "status", ["timeout", "memory", "crashed", "blocked", "syntax_error", "failed"]
)
def test_induction_passes_a_sandbox_status_through(box, status):
    box.first = Execution(status, reason=f"the run: {status}")
    check = check_induction(DOUBLE, ["1", "2"], ["2", "4"], reward="accuracy")
    _same(check, 0.0, True, status, f"the run: {status}")
    assert box.draws == []
    assert box.execute_all_calls == []


# ---------------------------------------------------------------- check_induction: runs
INPUTS = ["1", "2", "3"]
GOLDS = ["2", "4", "6"]
TWO_OF_THREE = ["2", "4", "7"]


def test_induction_runs_with_the_default_limits_and_six_runs(box):
    _same(check_induction(DOUBLE, INPUTS, GOLDS), 1.0, True, "passed", _match(3, 3))
    limits = {"timeout_s": 5.0, "memory_mb": 512}
    args = [(1,), (2,), (3,)]
    assert box.execute_calls == [(DOUBLE, args, limits)]
    assert box.draws == [(VERDICT_RUNS - 1, None)]
    assert box.execute_all_calls == [(DOUBLE, args, FIVE_VARIANTS, limits)]


def test_induction_forwards_limits_and_check_rng(box):
    rng = random.Random(5)
    check = check_induction(
        DOUBLE, [" 1 ", "2"], ["2", "4"], timeout_s=2.5, memory_mb=256, verdict_runs=4,
        check_rng=rng,
    )  # fmt: skip
    _same(check, 1.0, True, "passed", _match(2, 2))
    limits = {"timeout_s": 2.5, "memory_mb": 256}
    assert box.execute_calls == [(DOUBLE, [(1,), (2,)], limits)]
    assert len(box.draws) == 1
    assert box.draws[0][0] == 3
    assert box.draws[0][1] is rng
    variants = ("variant-0", "variant-1", "variant-2")
    assert box.execute_all_calls == [(DOUBLE, [(1,), (2,)], variants, limits)]


@pytest.mark.parametrize(
    ("golds", "reward", "score", "reason"),
    [
        (GOLDS, "binary", 1.0, _match(3, 3)),
        (GOLDS, "accuracy", 1.0, _match(3, 3)),
        (TWO_OF_THREE, "binary", 0.0, _match(2, 3)),
        (TWO_OF_THREE, "accuracy", 2 / 3, _match(2, 3)),
        (["2", "5", "7"], "accuracy", 1 / 3, _match(1, 3)),
        (["0", "5", "7"], "accuracy", 0.0, _match(0, 3)),
        (["0", "5", "7"], "binary", 0.0, _match(0, 3)),
    ],
)
def test_induction_reward_binary_or_accuracy(box, golds, reward, score, reason):
    check = check_induction(DOUBLE, INPUTS, golds, reward=reward)
    _same(check, score, True, "passed" if score == 1.0 else "failed", reason)


def test_induction_accuracy_two_of_three_is_exact(box):
    check = check_induction(DOUBLE, INPUTS, TWO_OF_THREE, reward="accuracy")
    assert check.score == 2 / 3
    assert round(check.score, 4) == 0.6667
    assert check.status == "failed"


def test_induction_binary_is_the_default(box):
    _same(check_induction(DOUBLE, INPUTS, TWO_OF_THREE), 0.0, True, "failed", _match(2, 3))


@pytest.mark.parametrize("reward", ["Accuracy", "binary ", "", "fraction"])
def test_induction_refuses_an_unknown_reward_before_running_anything(box, reward):
    # a misspelt setting used to pay as binary without a word
    with pytest.raises(ValueError, match=r"reward must be one of \('binary', 'accuracy'\)"):
        check_induction(DOUBLE, INPUTS, GOLDS, reward=reward)
    assert box.execute_calls == [] and box.draws == [] and box.execute_all_calls == []


@pytest.mark.parametrize(("gold", "reward"), [("2", "binary"), ("2", "accuracy"), ("3", "binary")])
def test_induction_one_input(box, gold, reward):
    right = gold == "2"
    check = check_induction(DOUBLE, ["1"], [gold], reward=reward)
    _same(check, float(right), True, "passed" if right else "failed", _match(int(right), 1))


def test_induction_no_match_needs_no_repeat(box):
    check = check_induction(DOUBLE, INPUTS, ["0", "5", "7"], reward="accuracy")
    _same(check, 0.0, True, "failed", _match(0, 3))
    assert box.draws == []
    assert box.execute_all_calls == []


def test_induction_a_call_that_raised_is_a_miss_and_the_rest_still_count(box):
    # status "error": input 2 raised; inputs 1 and 3 match, in the run and its repeats
    check = check_induction(RAISES_ON_2, INPUTS, GOLDS, reward="accuracy")
    _same(check, 2 / 3, True, "failed", _match(2, 3))
    assert box.repeat_runs == 5


def test_induction_a_raise_in_the_first_input_does_not_end_the_count(box):
    box.first = Execution("error", (None, "4", "6"), ("ValueError: v", None, None), "ValueError: v")
    check = check_induction(DOUBLE, INPUTS, GOLDS, reward="accuracy", verdict_runs=1)
    _same(check, 2 / 3, True, "failed", _match(2, 3))


@pytest.mark.parametrize("verdict_runs", [1, 6])
def test_induction_an_unparseable_gold_matches_nothing(box, verdict_runs):
    # f returns None; the gold would parse as None
    check = check_induction(
        NONE, INPUTS, ["x(", "None", "None"], reward="accuracy", verdict_runs=verdict_runs
    )
    _same(check, 2 / 3, True, "failed", _match(2, 3))


@pytest.mark.parametrize("verdict_runs", [1, 6])
def test_induction_an_output_that_does_not_parse_matches_nothing(box, verdict_runs):
    # parsed, the first output would be None, as its gold is
    box.first = _ok("<object object at 0x1>", "4", "6")
    box.repeats = [_ok("<object object at 0x1>", "4", "6")] * 5
    check = check_induction(
        DOUBLE, INPUTS, ["None", "4", "6"], reward="accuracy", verdict_runs=verdict_runs
    )
    _same(check, 2 / 3, True, "failed", _match(2, 3))


@pytest.mark.parametrize("gold", ["True", "1.0"])
def test_induction_compares_types_strictly(box, gold):
    check = check_induction(IDENTITY, ["1", "2"], [gold, "2"], reward="accuracy")
    _same(check, 0.5, True, "failed", _match(1, 2))


# ---------------------------------------------------------------- check_induction: repeats
@pytest.mark.parametrize("at", [0, 2, 4])
def test_induction_a_repeat_that_differs_turns_that_match_into_a_miss(box, at):
    box.repeats = [None] * at + [_ok("2", "5", "6")]
    check = check_induction(DOUBLE, INPUTS, GOLDS, reward="accuracy")
    _same(check, 2 / 3, True, "failed", _match(2, 3))
    assert box.repeat_runs == 5


def test_induction_repeats_that_differ_on_several_inputs_add_up(box):
    box.repeats = [_ok("2", "5", "6"), None, _ok("3", "4", "6")]
    check = check_induction(DOUBLE, INPUTS, GOLDS, reward="accuracy")
    _same(check, 1 / 3, True, "failed", _match(1, 3))


def test_induction_a_repeat_in_binary_reward_fails_the_whole_answer(box):
    box.repeats = [None, _ok("2", "4", "6.0")]
    check = check_induction(DOUBLE, INPUTS, GOLDS)
    _same(check, 0.0, True, "failed", _match(2, 3))


def test_induction_a_repeat_with_status_error_still_compares_its_outputs(box):
    box.repeats = [
        Execution("error", ("2", None, "6"), (None, "ValueError: v", None), "ValueError: v")
    ]
    check = check_induction(DOUBLE, INPUTS, GOLDS, reward="accuracy")
    _same(check, 2 / 3, True, "failed", _match(2, 3))


def test_induction_a_repeat_does_not_turn_a_miss_into_a_match(box):
    # the third output is wrong, and the same in every repeat
    check = check_induction(DOUBLE, INPUTS, TWO_OF_THREE, reward="accuracy")
    _same(check, 2 / 3, True, "failed", _match(2, 3))
    assert box.repeat_runs == 5


def test_induction_repeats_accept_a_set_in_another_order(box):
    box.first = _ok("{1, 2}")
    box.repeats = [_ok("{2, 1}")] * 5
    _same(check_induction(DOUBLE, ["1"], ["{2, 1}"]), 1.0, True, "passed", _match(1, 1))


@pytest.mark.parametrize("status", ["timeout", "memory", "crashed", "blocked", "failed"])
@pytest.mark.parametrize("at", [0, 4])
def test_induction_a_repeat_that_does_not_run_zeroes_every_match(box, status, at):
    box.repeats = [None] * at + [Execution(status, ("2", "4", "6"), (None,) * 3, "slow")]
    check = check_induction(DOUBLE, INPUTS, GOLDS, reward="accuracy")
    _same(check, 0.0, True, "failed", _match(0, 3))


def test_induction_verdict_runs_one_skips_the_repeats(box):
    box.repeats = [Execution("timeout", reason="slow")] * 6
    check = check_induction(DOUBLE, INPUTS, GOLDS, verdict_runs=1)
    _same(check, 1.0, True, "passed", _match(3, 3))
    assert box.draws == []
    assert box.execute_all_calls == []


def test_induction_verdict_runs_two_runs_one_repeat(box):
    rng = random.Random(1)
    box.repeats = [Execution("timeout", reason="slow")]
    check = check_induction(DOUBLE, INPUTS, GOLDS, verdict_runs=2, check_rng=rng)
    _same(check, 0.0, True, "failed", _match(0, 3))
    assert box.draws == [(1, rng)]
    assert box.repeat_runs == 1


def test_induction_verdict_runs_two_passes_when_the_repeat_agrees(box):
    box.repeats = [None, Execution("timeout", reason="slow")]  # only the first is asked for
    check = check_induction(DOUBLE, INPUTS, GOLDS, verdict_runs=2)
    _same(check, 1.0, True, "passed", _match(3, 3))
    assert box.repeat_runs == 1

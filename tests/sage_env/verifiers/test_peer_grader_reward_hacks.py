"""Reward hacks replayed from public bug reports of peer graders (issue 12): each input here
was paid before its fix; every test asserts the verdict it must now get."""

import pytest

import sage_env
from sage_env import EnvConfig
from sage_env.verifiers import MathVerifier
from tests.scripted import MATH_SEED, play_round

UNGROUNDED = [
    "???",
    "five hundred seventy dollars",
    "\\text{blue}",
    "unknown",
    "...",
    "12 apples",
    "the answer",
    "\\mbox{four}",
    "a+b+c+d+e",
    "yes",
]
GROUNDED = [
    "570",
    "\\frac{1}{2}",
    "-7.25",
    "x^2+1",
    "(0,1]",
    "\\{1,2\\}",
    "\\sqrt{2}+\\pi",
    "\\sin(x)",
    "(-\\infty, 3)",
    "\\begin{pmatrix}1\\\\2\\end{pmatrix}",
    "2^{1009}",
    "\\boxed{5}",
]


@pytest.mark.parametrize("answer", UNGROUNDED)
def test_check_answer_refuses_free_text(answer):
    res = MathVerifier().check_answer(answer)
    assert (res.score, res.status) == (0.0, "invalid"), res.reason


@pytest.mark.parametrize("answer", GROUNDED)
def test_check_answer_keeps_math_values(answer):
    res = MathVerifier().check_answer(answer)
    assert (res.score, res.status) == (1.0, "passed"), res.reason


def _round(answer, solver_answer):
    def script(agent, phase, obs, n):
        return {
            "challenge": (
                f"<question>How much did Ann pay in all?</question><answer>{answer}</answer>"
            ),
            "review_question": "<score>10</score> A clear, well-posed question.",
            "probe": f"\\boxed{{{solver_answer}}}",
            "plan": "<plan>\n1. Add.\n2. Check.\n</plan>",
            "review_plan": "<score>5</score> The plan is fine.",
            "solve": "\\boxed{5}",
        }[phase]

    env = sage_env.env(EnvConfig(domains=("math",), solver_samples=2), seeds=[MATH_SEED])
    ((_, _, reward, info),) = [r for r in play_round(env, script) if r[1] == "challenge"]
    return reward, info, len(env.unwrapped.pool)


@pytest.mark.parametrize("answer", ["???", "five hundred seventy dollars", "\\text{lots}"])
def test_meaningless_answer_is_not_accepted_and_earns_less_than_honest(answer):
    cheat, info, pool_size = _round(answer, "570")
    assert info["verifier_check"]["status"] == "failed"
    assert "not math" in info["verifier_check"]["reason"]
    assert not info["accepted"] and pool_size == 1  # only the seed
    honest, honest_info, honest_pool = _round("570", "570")  # right answer, solver right: d = 0
    assert honest_info["accepted"] and honest_pool == 2
    assert cheat < honest


# -- math-verify guard layer (sage_env.verifiers.math_guards); rows cite Math-Verify #14, #34, PR #81 --
@pytest.mark.parametrize(
    "text, expected",
    [
        ("The answer is 2 2/3", "The answer is \\frac{8}{3}"),  # PR #81
        ("\\boxed{1 1/4}", "\\boxed{\\frac{5}{4}}"),  # #34
        ("-1 1/2", "-\\frac{3}{2}"),  # the sign applies to the whole value
        ("7 3 / 8 cups", "\\frac{59}{8} cups"),
        ("4 10/3", "\\text{not a mixed number}"),  # PR #81: improper part, no fragment
        ("1 2/0", "\\text{not a mixed number}"),
        # the edges of "proper": N = D is not a mixed number, N = 0 with D = 1 is one
        ("4 3/3", "\\text{not a mixed number}"),
        ("2 0/1", "\\frac{2}{1}"),
        ("x_1 1/2", "x_1 1/2"),  # a subscript, not a whole part
        ("1.5 1/2", "1.5 1/2"),
        ("3/4", "3/4"),
    ],
)
def test_normalise_mixed_numbers(text, expected):
    from sage_env.verifiers.math_guards import normalise_mixed_numbers

    assert normalise_mixed_numbers(text) == expected


@pytest.mark.parametrize(
    "gold, pred, disagree",
    [
        ("\\frac{1}{2^{99}}", "\\frac{1}{2^{98}}", True),  # #14
        # issue 49 (b): relative difference 2^-40, far inside any tolerance: exact or nothing
        ("\\frac{1}{2^{40}+1}", "\\frac{1}{2^{40}}", True),
        ("\\frac{1}{2004!}", "\\frac{1}{2006!}", True),  # #14
        ("2^{-3000}", "2^{-3001}", True),
        ("0.0000001", "0.0000002", True),
        ("\\sqrt{2}", "1.5", True),
        ("\\frac{1}{2004!}", "\\frac{1}{2004!}", False),
        ("1/3", "0.333333", False),  # math-verify's 6-decimal rounding is kept
        ("\\sqrt{2}", "1.414214", False),
        ("\\frac{1}{2}", "0.5", False),
        ("x+1", "x+1", False),  # not numbers: math-verify decides
        ("\\{1,2\\}", "\\{2,1\\}", False),
    ],
)
def test_numbers_disagree(gold, pred, disagree):
    from sage_env.verifiers.math_guards import numbers_disagree
    from sage_env.verifiers.math_verifier import _parse_gold

    assert numbers_disagree(_parse_gold(gold)[0], _parse_gold(pred)[0]) is disagree


class _Only:
    """A parsed item that has only the given SymPy-style attributes (others are missing)."""

    def __init__(self, **attrs):
        self.__dict__.update(attrs)


def test_numbers_disagree_reads_the_first_value_only_when_it_is_a_finite_number():
    """Only a finite number is a number here: infinity, a symbol declared finite, and items
    missing either attribute leave math-verify's verdict standing (False), never raise; a
    leading string (math-verify's text half) is skipped, not taken as the end of the parse."""
    import sympy

    from sage_env.verifiers.math_guards import numbers_disagree

    five = [sympy.Integer(5)]
    assert numbers_disagree([sympy.oo], five) is False  # is_number, not is_finite
    assert numbers_disagree([sympy.Symbol("x", finite=True)], five) is False  # finite, no number
    for item in (object(), _Only(is_finite=True), _Only(is_number=True)):
        assert numbers_disagree([item], five) is False
        assert numbers_disagree(five, [item]) is False
    # the first value decides; a string before it is skipped
    assert numbers_disagree(["5", sympy.Integer(5)], ["6", sympy.Integer(6)]) is True
    assert numbers_disagree(["5", sympy.Integer(5)], ["5", sympy.Integer(5)]) is False
    assert numbers_disagree([sympy.FiniteSet(1, 2), sympy.Integer(1)], [sympy.Integer(2)]) is False


def test_numbers_disagree_at_the_edges_of_the_tolerance():
    """Numbers that are not both rational are compared at 50 digits (a 15-digit float would
    round these differences away), the tolerance band's edge is "agree" (strictly more than
    ``rel_tol`` of the larger magnitude disagrees), and two zeros agree."""
    import sympy as S

    from sage_env.verifiers.math_guards import numbers_disagree

    def both_ways(a, b, **kw):
        one, other = numbers_disagree([a], [b], **kw), numbers_disagree([b], [a], **kw)
        assert one is other, (a, b)
        return one

    tiny = S.pi * S.Integer(10) ** -30
    # |2 - (1 - tiny)| = 1 + tiny > 0.5 * 2: disagree, though 1 + tiny is 1.0 as a float
    assert both_ways(S.Integer(2), 1 - tiny, rel_tol=0.5) is True
    # the larger magnitude 2 - tiny: half of it is 1 - tiny/2 < 1 - tiny/4, the difference
    assert both_ways(1 - S.Rational(3, 4) * tiny, 2 - tiny, rel_tol=0.5) is True
    assert both_ways(1 - S.Rational(1, 4) * tiny, 2 - tiny, rel_tol=0.5) is False
    # exactly at the edge: agree; just past it: disagree
    assert both_ways(S.Float(2), S.Float(1), rel_tol=0.5) is False
    assert both_ways(S.Float(2), S.Float(0.99), rel_tol=0.5) is True
    # a larger magnitude of exactly 1 is a scale like any other
    assert both_ways(S.Integer(1), 1 / S.sqrt(2)) is True
    assert both_ways(S.Float(0), S.Float(0)) is False
    assert both_ways(S.Float(0), S.sqrt(2)) is True


def test_rationals_compare_exactly_whatever_the_tolerance():
    """Issue 49 (b): ``rel_tol`` applies to irrational numbers only; two rationals are equal
    exactly or not at all, even under a tolerance of 50%."""
    from sage_env.verifiers.math_guards import numbers_disagree
    from sage_env.verifiers.math_verifier import _parse_gold

    def disagree(gold, pred, rel_tol):
        return numbers_disagree(_parse_gold(gold)[0], _parse_gold(pred)[0], rel_tol=rel_tol)

    assert disagree("\\frac{1}{3}", "\\frac{1}{4}", rel_tol=0.5) is True
    assert disagree("\\frac{1}{2^{40}+1}", "\\frac{1}{2^{40}}", rel_tol=1e-3) is True
    assert disagree("\\frac{2}{4}", "\\frac{1}{2}", rel_tol=0.0) is False
    # an irrational gold: the tolerance decides, both ways
    assert disagree("\\sqrt{2}", "1.4", rel_tol=0.05) is False
    assert disagree("\\sqrt{2}", "1.4", rel_tol=0.005) is True


@pytest.mark.parametrize(
    "gold, prediction, score",
    [
        ("2", "The answer is 2 2/3", 0.0),  # Math-Verify PR #81: the whole part leaked
        ("2", "\\boxed{2 2/3}", 0.0),
        ("10", "\\boxed{4 10/3}", 0.0),  # PR #81: no fragment of a bad mixed form
        ("\\frac{5}{4}", "\\boxed{1 1/4}", 1.0),  # #34: a right mixed number
        ("\\frac{5}{4}", "So she needs 1 1/4", 1.0),
        ("-\\frac{3}{2}", "\\boxed{-1 1/2}", 1.0),
        ("\\frac{8}{3}", "\\boxed{2\\frac{2}{3}}", 1.0),
        ("\\frac{1}{2^{99}}", "\\boxed{\\frac{1}{2^{98}}}", 0.0),  # #14: tiny magnitudes
        ("\\frac{1}{2^{40}+1}", "\\boxed{\\frac{1}{2^{40}}}", 0.0),  # issue 49 (b)
        ("\\frac{1}{2004!}", "\\boxed{\\frac{1}{2006!}}", 0.0),  # #14
        ("0.0000001", "\\boxed{0.0000002}", 0.0),
        ("\\frac{1}{2^{99}}", "\\boxed{2^{-99}}", 1.0),
        ("1/3", "\\boxed{0.333333}", 1.0),  # math-verify's rounding kept on purpose
        ("0,1", "\\boxed{(0,1)}", 1.0),  # a tuple gold stored without brackets
        ("(0,1)", "\\boxed{0,1}", 1.0),
    ],
)
def test_math_verifier_guarded_rows(gold, prediction, score):
    res = MathVerifier().verify(prediction, gold)
    assert res.score == score, res.reason

"""Plus tests with huge outputs (MBPP+'s Mbpp/255): the value crosses to the judge as a digest.

A plus site's output of more than ``HUGE_ITEMS`` items is compared by the SHA-256 of its exact
serialisation (``sage_env.sandbox.harness.report.digest_value``). These tests check that an honest
program passes, that every near miss (one item off, lists for tuples, a lying item type, a
shorter list) fails, at every isolation level, and that the digest is exact, independent of
object identity, and not used where EvalPlus's float tolerance applies.
"""

from __future__ import annotations

import pytest

from learners.evaluation import plus_tests
from sage_env.sandbox.harness.report import HUGE_ITEMS, Digest, decode_value, digest_value, is_huge
from sage_env.verifiers import CodeVerifier

N = HUGE_ITEMS // 2 + 5000  # pairs in the reference's output: 2 N items, over the threshold

ROWS = {
    "pairs": {
        "entry_point": "pairs",
        "prompt": "def pairs(n):\n",
        "canonical_solution": "    return [(i, str(i % 7)) for i in range(n)]  # REF\n",
        "base_input": [[3]],
        "plus_input": [[N], [N + 1]],
        "atol": 0,
    },
}

HONEST = "def pairs(n):\n    out = []\n    for i in range(n):\n        out.append((i, '%d' % (i % 7)))\n    return out\n"

#: Wrong only on the huge inputs (n > 100), right on the base input.
NEAR_MISSES = {
    "one_item_off": "    out = [(i, str(i % 7)) for i in range(n)]\n    out[-1] = (0, '0')\n",
    "lists_for_tuples": "    out = [[i, str(i % 7)] for i in range(n)]\n",
    "a_tuple_for_the_list": "    out = tuple((i, str(i % 7)) for i in range(n))\n",
    "one_item_short": "    out = [(i, str(i % 7)) for i in range(n - 1)]\n",
    "lying_item_type": "    out = [(i, S('?')) for i in range(n)]\n",
    "a_float_for_an_int": "    out = [(i, str(i % 7)) for i in range(n)]\n    out[0] = (0.0, '0')\n",
}
NEAR_MISS = (
    "class S(str):\n    def __eq__(s, o):\n        return True\n    __hash__ = str.__hash__\n"
    "def pairs(n):\n    if n <= 100:\n        return [(i, str(i % 7)) for i in range(n)]\n"
    "{body}    return out\n"
)


@pytest.fixture
def cv(level):
    with CodeVerifier(timeout_s=30.0) as verifier:
        yield verifier


def _verify(cv, name, program):
    setup, tests = plus_tests(ROWS[name], plus_limit=None)
    return cv.verify(program, tests, setup)


@pytest.mark.slow
def test_an_honest_huge_output_passes_and_every_near_miss_fails(cv):
    res = _verify(cv, "pairs", HONEST)
    assert (res.score, res.passed, res.total) == (1.0, 3, 3), res
    for name, body in NEAR_MISSES.items():
        res = _verify(cv, "pairs", NEAR_MISS.format(body=body))
        assert (res.passed, res.score) == (1, 1 / 3), (name, res)  # only the base input


@pytest.mark.slow
def test_digest_is_exact_and_independent_of_identity_and_interning():
    a = [(i, "x" * 3) for i in range(N)]
    b = [(i, "".join(["x", "x", "x"])) for i in range(N)]  # equal, distinct str objects
    assert digest_value(a) == digest_value(b)
    assert digest_value(a)[:3] == ["h", "l", N]
    assert digest_value(tuple(a))[1] == "t"
    assert digest_value(tuple(a)) != digest_value(a)
    c = list(a)
    c[7] = (7.0, "xxx")  # 7 == 7.0, but the digest is exact (documented deviation)
    assert digest_value(c) != digest_value(a)
    assert decode_value(digest_value(a)) == decode_value(digest_value(b))
    assert decode_value(digest_value(a)) != a  # a digest equals only a digest
    assert len(decode_value(digest_value(a))) == N and bool(decode_value(digest_value(a)))


def test_no_digest_for_small_values_floats_and_foreign_types():
    class S(str):
        pass

    assert digest_value(list(range(HUGE_ITEMS))) is None  # not over the threshold
    assert digest_value([(0, 1)] * (HUGE_ITEMS // 2)) is None  # 2 x HUGE_ITEMS / 2 items
    assert is_huge([(0, 1)] * (HUGE_ITEMS // 2 + 1)) and not is_huge([(0, 1)] * 3)
    assert digest_value([0.5] * (HUGE_ITEMS + 1)) is None  # floats only: EvalPlus's tolerance
    assert digest_value([(0.5, 1.5)] * N)[0] == "h"  # tuples of floats: EvalPlus's == is exact
    assert digest_value([S("a")] * (HUGE_ITEMS + 1)) is None  # marshal refuses; no method runs
    assert digest_value(range(2 * N)) is None and digest_value({i: 0 for i in range(2 * N)}) is None
    with pytest.raises(ValueError):
        decode_value(["h", "x", 3, "00"])
    assert Digest("l", 0, "00") != Digest("t", 0, "00")

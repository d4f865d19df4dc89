"""Red team, round 6: huge plus outputs judged by their digest (``report.digest_value``).

A Solver tries to get a plus test passed without returning the right value, through what the
digest treats as equal (marshal writes any buffer as ``bytes``), what it sees of the value
(``is_huge`` estimates from the first item), patched ``hashlib``/``marshal`` and forged
events; honest programs must still pass (dict order, set order, an equal value built
differently). Every test asserts the exact score at every isolation level.

Found and fixed here: a list of ``bytearray``/``memoryview``/``array.array`` items matched
the reference's list of ``bytes`` (item by item such items fail), and an honest list of dicts
built in another key order failed (marshal keeps insertion order; ``==`` does not). Now a
value travels as a digest only if it is made of exact builtin types other than ``dict``
(``report._digestible``), anything else item by item. And an honest program failed against a
reference that returned a ``list`` subclass (item by item there, a digest here): a list or
tuple not digested as it is is now digested as its plain copy, on both sides
(``worker.plus_code``).
"""

from __future__ import annotations

import array

import pytest

from learners.evaluation import plus_tests
from sage_env.sandbox.harness.report import HUGE_ITEMS, digest_value, is_huge
from sage_env.verifiers import CodeVerifier
from tests.sage_env.sandbox.test_plus_huge_outputs import HONEST as HONEST_PAIRS
from tests.sage_env.sandbox.test_plus_huge_outputs import ROWS as HUGE_ROWS

#: A first item of 2,049 items makes a list of 600 more items "huge" (is_huge's estimate:
#: 601 x 2,049 > 2^20) while it holds 2,649 items: the digest route, cheaply.
WIDE = "tuple(range(2049))"


def _row(name: str, items: str) -> dict:
    return {
        "entry_point": name,
        "prompt": f"def {name}(n):\n",
        "canonical_solution": f"    return [{WIDE}] + [{items} for i in range(n)]  # REF\n",
        "base_input": [[3]],
        "plus_input": [[600]],
        "atol": 0,
    }


def _program(name: str, items: str, head: str = "") -> str:
    return f"{head}def {name}(n):\n    return [{WIDE}] + [{items} for i in range(n)]\n"


ROWS = {
    "blobs": _row("blobs", "(i, b'%d' % (i % 7))"),
    "recs": _row("recs", "{'a': i, 'b': i % 7}"),
    "pairsets": _row("pairsets", "frozenset((i, i + 8))"),
    # a Challenger's reference with bytes subclass items: digested as its plain copy
    "subblobs": dict(
        _row("subblobs", "(i, B(b'%d' % (i % 7)))"),
        canonical_solution="class B(bytes):\n    pass\n"
        + _program("subblobs", "(i, B(b'%d' % (i % 7)))"),
    ),
    # ... a list subclass, or a tuple subclass first item (which is_huge does not count)
    "sublist": dict(
        _row("sublist", "(i, b'%d' % (i % 7))"),
        canonical_solution="class L(list):\n    pass\nclass T(tuple):\n    pass\n"
        f"def sublist(n):\n    return L([T({WIDE})] + [(i, b'%d' % (i % 7)) for i in range(n)])\n",
    ),
}


#: (row, program): each returns a value that is not the reference's (0.0 expected).
CHEATS = {
    # marshal writes any buffer as bytes: these matched the reference's bytes (fixed)
    "bytearray_for_bytes": ("blobs", _program("blobs", "(i, bytearray(b'%d' % (i % 7)))")),
    "memoryview_for_bytes": ("blobs", _program("blobs", "(i, memoryview(b'%d' % (i % 7)))")),
    "array_for_bytes": (
        "blobs",
        _program("blobs", "(i, array.array('B', b'%d' % (i % 7)))", "import array\n"),
    ),
    # the digest is computed in the program's process: patching it changes only its own
    "patched_hashlib_and_marshal": (
        "blobs",
        "import hashlib, marshal, sys\n"
        "class H:\n    def update(s, b):\n        pass\n"
        "    def hexdigest(s):\n        return '0' * 64\n"
        "hashlib.sha256 = lambda *a: H()\nmarshal.dumps = lambda *a: b''\n"
        "for m in list(sys.modules.values()):\n"
        "    d = getattr(m, '__dict__', {})\n"
        "    if 'digest_value' in d:\n"
        "        try:\n"
        "            d['digest_value'].__defaults__ = (type, len, range, lambda *a: b'', H)\n"
        "        except Exception:\n            pass\n"
        + _program("blobs", "(i, b'?')"),
    ),
    # a digest line forged on the channel: the reference's hash is not in this process
    "forged_digest_events": (
        "blobs",
        "import os, json\n"
        "for fd in range(3, 8):\n"
        "    for k in range(2):\n"
        "        try:\n"
        "            os.write(fd, (json.dumps({'ev': 'a', 'k': k, 'v': [[0, ['h', 'l', 601,"
        " '0' * 64]]]}) + '\\n').encode())\n"
        "        except OSError:\n            pass\n" + _program("blobs", "(i, b'?')"),
    ),
    # huge by the estimate, but the first item alone right: the rest is compared too
    "only_the_first_item_right": ("blobs", _program("blobs", "(i, b'')")),
    # the right value returned, then changed by a thread before the hole reads it
    "changed_after_return_by_a_thread": (
        "blobs",
        "import threading, time\n"
        "def blobs(n):\n"
        f"    out = [{WIDE}] + [(i, b'%d' % (i % 7)) for i in range(n)]\n"
        "    def spoil():\n        time.sleep(0.05)\n        out[-1] = (0, b'?')\n"
        "    threading.Thread(target=spoil, daemon=True).start()\n"
        "    time.sleep(0.2)\n"
        "    return out\n",
    ),
}

#: (row, program): equal values built differently (1.0 expected).
HONEST = {
    "same_bytes": ("blobs", _program("blobs", "(i, str(i % 7).encode())")),
    "bytes_subclass_items": (
        "blobs",
        _program("blobs", "(i, B(b'%d' % (i % 7)))", "class B(bytes):\n    pass\n"),
    ),
    "dicts_same_order": ("recs", _program("recs", "dict(a=i, b=i % 7)")),
    # equal dicts, other key order: marshal's bytes differ (failed before the fix)
    "dicts_other_key_order": ("recs", _program("recs", "{'b': i % 7, 'a': i}")),
    # equal sets, other iteration order: marshal (3.11+) sorts set items by their bytes
    "sets_other_iteration_order": ("pairsets", _program("pairsets", "frozenset((i + 8, i))")),
    # exact bytes against the reference's bytes subclass items (the same route on both sides)
    "bytes_for_a_subclass_reference": ("subblobs", _program("subblobs", "(i, b'%d' % (i % 7))")),
    "exact_list_for_a_subclass_reference": ("sublist", _program("sublist", "(i, b'%d' % (i % 7))")),
    "list_subclass_output": (
        "blobs",
        "class L(list):\n    pass\n"
        f"def blobs(n):\n    return L([{WIDE}] + [(i, b'%d' % (i % 7)) for i in range(n)])\n",
    ),
}


@pytest.fixture
def cv(level):
    with CodeVerifier(timeout_s=30.0) as verifier:
        yield verifier


def _score(cv, rows, name, program):
    setup, tests = plus_tests(rows[name], plus_limit=None)
    return cv.verify(program, tests, setup)


def test_the_rows_take_the_digest_route():
    ref = [tuple(range(2049))] + [(i, b"%d" % (i % 7)) for i in range(600)]
    assert is_huge(ref) and len(ref) + 2049 < HUGE_ITEMS
    assert digest_value(ref) is not None
    assert not is_huge([tuple(range(2049))] + [(i, b"") for i in range(3)])  # base input


@pytest.mark.slow
def test_no_cheat_passes(cv):
    for name, (row, program) in CHEATS.items():
        res = _score(cv, ROWS, row, program)
        assert res.score == 0.0, (name, res)


@pytest.mark.slow
def test_honest_programs_pass(cv):
    for name, (row, program) in HONEST.items():
        res = _score(cv, ROWS, row, program)
        assert (res.score, res.passed, res.total) == (1.0, 2, 2), (name, res)
    res = _score(cv, HUGE_ROWS, "pairs", HONEST_PAIRS)  # 2 million real items
    assert (res.score, res.passed, res.total) == (1.0, 3, 3), res


@pytest.mark.slow
def test_digest_only_for_exact_builtin_types_without_dicts():
    n = HUGE_ITEMS + 1

    class B(bytes):
        pass

    assert digest_value([(0, b"x")] * n) is not None
    for item in (bytearray(b"x"), memoryview(b"x"), array.array("B", b"x"), B(b"x"), {0: 1}):
        assert digest_value([(0, item)] * n) is None, type(item)
        assert digest_value([(0, (1, [item]))] * n) is None, type(item)  # at any depth
    assert digest_value([(0, frozenset((1, 9)))] * n) == digest_value([(0, frozenset((9, 1)))] * n)
    loop: list = []
    loop.append(loop)
    loop.append(loop)
    assert digest_value([loop] * n) is None  # a cycle: the scan is bounded, no digest


@pytest.mark.slow
def test_documented_deviations_of_the_exact_digest():
    # the digest is type-exact and compares floats by their bytes (docs/reference/verifiers.md)
    n = HUGE_ITEMS + 1
    assert digest_value([(0, 0.0)] * n) != digest_value([(0, -0.0)] * n)  # -0.0 == 0.0
    assert digest_value([(0, 1)] * n) != digest_value([(0, True)] * n)  # 1 == True
    nan = float("nan")
    assert digest_value([(0, nan)] * n) == digest_value([(0, float("nan"))] * n)

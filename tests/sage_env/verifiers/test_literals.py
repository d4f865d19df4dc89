"""The judge's literal parsing and equality rules (``sage_env.verifiers.literals``).

Pure functions, no sandbox: each test asserts the value at a boundary, a type or a
non-default parameter, so that a changed comparison, bound or branch fails here (the
module's mutation run uses this file alone; docs/reference/testing.md).
"""

import pytest

from sage_env.verifiers.literals import (
    distinct_inputs,
    format_args,
    parse_args,
    parse_literal,
    round_trips,
    runs_agree,
    same_output,
    values_equal,
)
from sage_env.verifiers.program_checks import MAX_LITERAL_CHARS


def _str_literal(length: int) -> str:
    """A quoted string literal of exactly ``length`` characters."""
    return "'" + "a" * (length - 2) + "'"


class _Int(int):
    """An ``int`` subclass whose ``repr`` is an int literal: not the same type back."""


class _EqRaises:
    """``repr`` is a literal, ``==`` raises."""

    def __repr__(self) -> str:
        return "1"

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no comparison")

    __hash__ = object.__hash__


class _ReprRaises:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


# ---------------------------------------------------------------- parse_literal
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", (True, 1)),
        ("  [1, 2]\n", (True, [1, 2])),  # surrounding whitespace is stripped
        ("None", (True, None)),  # a literal None is parsed, not a failure
        ("'a'", (True, "a")),
        ("{1: (2,)}", (True, {1: (2,)})),
        ("-0.5", (True, -0.5)),
    ],
)
def test_parse_literal_parses_python_literals(text, expected):
    ok, value = parse_literal(text)
    assert (ok, value) == expected
    assert type(value) is type(expected[1])


@pytest.mark.parametrize(
    "text",
    [
        None,
        1,
        b"1",
        "f(1)",  # a call: ValueError
        "x",  # a name
        "(",  # SyntaxError
        "{[]: 1}",  # unhashable key: TypeError
        "[" * 999 + "]" * 999,  # nested too deep for the parser
        "__import__('os')",
        "",
    ],
)
def test_parse_literal_refuses_what_is_not_one_literal_and_never_raises(text):
    assert parse_literal(text) == (False, None)


def test_parse_literal_length_bound_is_inclusive():
    at = _str_literal(MAX_LITERAL_CHARS)
    assert len(at) == MAX_LITERAL_CHARS
    assert parse_literal(at) == (True, "a" * (MAX_LITERAL_CHARS - 2))
    assert parse_literal(_str_literal(MAX_LITERAL_CHARS + 1)) == (False, None)


# ---------------------------------------------------------------- parse_args
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[1, 2]", ([1, 2],)),  # one argument
        ("'a', 3", ("a", 3)),  # two
        (" 5 ", (5,)),
        ("(1, 2)", ((1, 2),)),  # a tuple is one argument
        ("1, [2, 3], {'k': None}", (1, [2, 3], {"k": None})),
        ("1), (2", (1, (2,))),  # parsed as "(1), (2,)": its canonical text is "1, (2,)"
    ],
)
def test_parse_args_reads_azr_argument_lists(text, expected):
    assert parse_args(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        None,
        3,
        "",
        "   ",
        "1,",
        "1,,",
        "x, 1",
        "f(1)",
        "1)[0",
        "1)#",  # "(1)#,)" reads as the int 1: not an argument tuple
        "[1])#",
        _str_literal(MAX_LITERAL_CHARS),
    ],
)
def test_parse_args_refuses_what_is_not_a_literal_argument_list(text):
    assert parse_args(text) is None


def test_parse_args_bound_leaves_room_for_its_wrapping():
    # the text is parsed as "(<text>,)": 3 characters more than the text
    fits = _str_literal(MAX_LITERAL_CHARS - 3)
    assert parse_args(fits) == ("a" * (MAX_LITERAL_CHARS - 5),)
    assert parse_args(_str_literal(MAX_LITERAL_CHARS - 2)) is None


# ---------------------------------------------------------------- format_args, round_trips
def test_format_args_is_the_repr_of_each_argument_comma_separated():
    assert format_args((1, "a", [2, (3,)], None)) == "1, 'a', [2, (3,)], None"
    assert format_args(("x",)) == "'x'"
    assert format_args(()) == ""
    assert parse_args(format_args((1, "a"))) == (1, "a")


@pytest.mark.parametrize(
    "value", [1, -3, 1.5, -0.0, True, None, "s", b"b", [1, (2,)], {1: "a"}, {1, 2}, set(), 1j]
)
def test_round_trips_accepts_literals(value):
    assert round_trips(value) is True


@pytest.mark.parametrize(
    "value",
    [
        float("nan"),  # nan != nan
        float("inf"),  # repr 'inf' is not a literal
        object(),
        _Int(5),  # repr '5' reads back as an int, not an _Int
        _EqRaises(),
        _ReprRaises(),
        [1, float("nan")],
    ],
)
def test_round_trips_refuses_values_that_do_not_read_back_as_themselves(value):
    assert round_trips(value) is False


def test_round_trips_length_bound_is_on_the_repr_and_inclusive():
    at = "a" * (MAX_LITERAL_CHARS - 2)  # repr adds the two quotes
    assert len(repr(at)) == MAX_LITERAL_CHARS
    assert round_trips(at) is True
    assert round_trips(at + "a") is False


# ---------------------------------------------------------------- values_equal
@pytest.mark.parametrize(
    ("a", "b", "strict", "loose"),
    [
        (1, 1, True, True),
        (1, 2, False, False),
        (1, True, False, True),
        (1, 1.0, False, True),
        (0.0, -0.0, False, True),  # the reprs differ, as f's outputs did
        (float("nan"), float("nan"), True, False),  # the same repr; nan != nan
        ([1], (1,), False, False),  # a list is not a tuple under either rule
        ([1, [2]], [1, [2]], True, True),
        ([1, [2]], [1, [2.0]], False, True),
        ([[1]], [(1,)], False, False),  # shape is checked inside lists
        ({1, 2}, {2, 1}, True, True),  # order does not matter
        ({1}, {True}, False, True),
        ({1}, frozenset({1}), False, False),
        ({"a": 1}, {"a": 1}, True, True),
        ({"a": 1}, {"a": True}, False, True),
        ({"a": [1]}, {"a": (1,)}, False, False),  # shape is checked inside dicts
        ({"a": [1]}, {"a": [1]}, True, True),
        ({"a": {1}}, {"a": {1}}, True, True),
        ({"a": {1}}, {"a": frozenset({1})}, False, False),  # == holds; the kinds differ
        ([{1}], [frozenset({1})], False, False),
        ({1: "a"}, {True: "a"}, False, True),  # dict keys keep their type
        ((1, "a"), (1, "a"), True, True),
        ((1, "a"), (1, "b"), False, False),
        (1j, 1j, True, True),
        (1j, 1, False, False),
        (0j, -0j, False, True),  # complex zeros: the reprs differ, == holds
        (complex(1, -0.0), 1 + 0j, False, True),
        ("1", 1, False, False),
    ],
)
def test_values_equal_strict_and_loose(a, b, strict, loose):
    assert values_equal(a, b) is strict
    assert values_equal(a, b, strict_types=True) is strict
    assert values_equal(a, b, strict_types=False) is loose
    assert values_equal(b, a) is strict
    assert values_equal(b, a, strict_types=False) is loose


class _EqualToAll:
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__


def test_values_equal_a_container_is_never_equal_to_a_scalar_that_says_so():
    for container in ([1], (1,), {1: 1}, {1}, frozenset({1})):
        assert values_equal(container, _EqualToAll(), strict_types=False) is False
        assert values_equal(_EqualToAll(), container, strict_types=False) is False
    assert values_equal(_EqualToAll(), 1, strict_types=False) is True  # scalars: ==


def test_values_equal_never_raises():
    assert values_equal(_EqRaises(), 1) is False
    assert values_equal(_EqRaises(), 1, strict_types=False) is False
    assert values_equal([_EqRaises()], [1]) is False


# ---------------------------------------------------------------- same_output, runs_agree
@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("1", "1", True),
        ("{1, 2}", "{2, 1}", True),  # a set's repr order may differ between runs
        ("{'a': 1, 'b': 2}", "{'b': 2, 'a': 1}", True),
        ("1", "True", False),
        ("1", "1.0", False),
        ("[1]", "(1,)", False),
        ("1", "2", False),
        ("x", "x", False),  # not a literal on either side
        ("1", "x", False),
        ("x", "1", False),
        (None, "1", False),
        ("1", None, False),
        (None, None, False),
    ],
)
def test_same_output_compares_parsed_values_with_their_types(a, b, expected):
    assert same_output(a, b) is expected


@pytest.mark.parametrize(
    ("first", "other", "expected"),
    [
        ([1, "a"], [1, "a"], True),
        ([], [], True),
        ([1], [True], False),
        ([1, 2], [1, 2.0], False),  # the second element decides
        ([-0.0], [0.0], False),
        ([{"a": (1,)}], [{"a": (1.0,)}], False),
        ([[1]], [[True]], False),  # element types inside lists (issue 49's determinism bug)
        ([1, 2], [1], False),
        ([1], [1, 2], False),
        ([{1, 2}], [{2, 1}], True),
        (None, [1], False),  # never raises
        ([1], None, False),
    ],
)
def test_runs_agree_is_values_equal_element_by_element(first, other, expected):
    assert runs_agree(first, other) is expected


# ---------------------------------------------------------------- distinct_inputs
def test_loose_equality_of_inputs_never_raises():
    from sage_env.verifiers.literals import _loosely_equal

    assert _loosely_equal(_EqRaises(), 1) is False
    assert _loosely_equal((1, [2]), (1, [2])) is True
    assert _loosely_equal((1,), (2,)) is False


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        (["1", "True", "1.0", "2"], ["1", "2"]),  # by value with ==, the first spelling kept
        (["2", "1"], ["2", "1"]),  # order kept
        (["-0.0", "0.0"], ["-0.0"]),
        (["[1,2]", "[1, 2]"], ["[1, 2]"]),  # canonical text
        (["'a',1", "'a', 1", "'a', 2"], ["'a', 1", "'a', 2"]),
        (["x", "1", "f(2)", ""], ["1"]),  # what is not a literal argument list is dropped
        (["1e999", "3"], ["3"]),  # inf does not round-trip
        (["1, 1e999"], []),  # every argument must round-trip
        (["(1,)", "[1]"], ["(1,)", "[1]"]),  # a tuple == a list? no: two inputs
        ([], []),
    ],
)
def test_distinct_inputs_splits_by_value_and_keeps_canonical_text(texts, expected):
    assert distinct_inputs(texts) == expected

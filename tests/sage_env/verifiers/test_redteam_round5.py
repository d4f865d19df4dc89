"""Red-team pass on the integrity fixes of issue 46 (item 5): attacks that got a truth stored.

One class per test class, each as a policy would find it:

- the low bits of an address: address-space randomisation moves pages, not the offset of
  an object inside its page, so ``repr(object())`` / ``repr(lambda: 0)`` modulo 4096 was the
  same in every fresh interpreter (and another in a zygote's fork, and another at another
  isolation level). A program returning it passed every determinism check (6/6 of 20
  ``check_rng`` seeds, at ``unshare``, ``unshare`` with the zygote and ``rlimits``), and the
  stored run was told from the check runs by it (fork 3456, fresh 4032 for a lambda).
  Fixed: every run keeps a drawn heap layout (``RunVariant.layout``). Also a program tuned
  to the audit run (a fresh interpreter under the stored seeds): stored as 42, recomputed
  as 41, 10 of 10 with the zygote.
- a math value too large to compare (``9^{9^{9^9}}``): stored, as it agreed with itself as
  text, while every other right form timed out in math-verify. Fixed: a string value's powers
  are bounded at 700 bits, as an ``int`` value is (``render_value``).

Run at the default isolation level and with ``SAGE_SANDBOX_ISOLATION=unshare`` / ``rlimits``.
"""

from __future__ import annotations

import random

import pytest

from sage_env.verifiers import executor
from sage_env.verifiers.executor import RunVariant

#: Programs whose value is the low bits of an address (each a separate way to reach one).
ADDRESS_PROGRAMS = {
    "object": (
        "def answer():\n"
        "    return int(repr(object()).split(' at ')[1][:-1], 16) % 4096\n"
    ),
    "lambda": (
        "def answer():\n"
        "    return int(repr(lambda: 0).split(' at ')[1][:-1], 16) % 4096\n"
    ),
    "fstring": (
        "def answer():\n"
        "    class A:\n"
        "        pass\n"
        "    return int(f'{A()}'.split(' at ')[1][:-1], 16) % 4096 + 1\n"
    ),
}

#: A program that is one of two values by whether an address's low bits are those of a run
#: it was tuned to: passed everywhere before the fix, its stored run told apart.
_ADDRESS_BITS = (
    "def answer():\n"
    "    a = int(repr(object()).split(' at ')[1][:-1], 16) % 4096\n"
    "    b = int(repr(lambda: 0).split(' at ')[1][:-1], 16) % 4096\n"
    "    return a * 4096 + b\n"
)

#: Returns 41 only in a fresh interpreter under the stored seeds whose lambda lies at offset
#: XXXX (calibrated with M = 0, which returns the offset), else 42 (M = 1).
_TUNED = (
    "def answer():\n"
    "    seed0 = ''.join(set('abcdefghij')) == 'dfghbicaje'\n"
    "    off = int(repr(lambda: 0).split(' at ')[1][:-1], 16) % 4096\n"
    "    return (41 if seed0 and off == XXXX else 42) if M else off\n"
)

LEVELS = ["unshare", "unshare-zygote", "rlimits", "rlimits-zygote"]


@pytest.mark.parametrize("level", LEVELS, indirect=True)
class TestAddressLowBits:
    @pytest.mark.parametrize("name", sorted(ADDRESS_PROGRAMS))
    def test_a_value_made_of_address_bits_is_refused(self, level, name):
        program = ADDRESS_PROGRAMS[name]
        for seed in range(3):
            got = executor.compute_answer(program, check_rng=random.Random(seed))
            assert not got.valid, (name, seed, got)
            assert got.check == "deterministic"

    def test_no_two_runs_share_a_layout(self, level):
        """Neither the stored run nor a fresh one under the stored seeds has a fixed layout."""
        stored = {executor.execute(_ADDRESS_BITS, [()], entry="answer").outputs for _ in "ab"}
        audit = RunVariant(0, "UTC", 0, fresh=True)
        fresh = {
            executor.execute(_ADDRESS_BITS, [()], entry="answer", variant=audit).outputs
            for _ in "ab"
        }
        assert len(stored) == 2 and len(fresh) == 2

    def test_a_program_tuned_to_the_audit_run_recomputes(self, level):
        """A value that changes only in a fresh interpreter under the stored seeds.

        Calibrated on this host (the offset of a lambda in a fresh seed-0 run), the program
        returns 42 everywhere but there: before the fix it was stored as 42 in 10 of 10
        checks and the audit run (``recomputes``' conditions) computed 41 in all 10.
        """
        calibrate = _TUNED.replace("XXXX", "0000").replace(" M ", " 0 ")
        audit = RunVariant(0, "UTC", 0, fresh=True)
        off = executor.execute(calibrate, [()], entry="answer", variant=audit).outputs[0]
        program = _TUNED.replace("XXXX", "%04d" % int(off)).replace(" M ", " 1 ")
        for seed in range(3):
            got = executor.compute_answer(program, check_rng=random.Random(seed))
            if got.valid:
                # each audit run draws its layout, so some land on the tuned offset by chance:
                # the drawn offsets are not spread evenly (13 distinct in 16 fresh runs on this
                # host), so a majority vote of 3 runs failed now and then (a command-2 lane,
                # 2026-12-05). The bug was a fixed layout: the audit computed 41 in 10 of 10
                # runs. Without one, some of 6 audit runs compute the stored value (all 6
                # missing it at 1 in 4 each: 1 in 4,096)
                runs = [
                    executor.execute(program, [()], entry="answer", variant=audit).outputs
                    for _ in range(6)
                ]
                assert tuple(got.outputs) in runs, (seed, got.outputs, runs)

    def test_the_stored_run_draws_its_layout_reproducibly(self, level):
        checks = executor.draw_check_variants(5, random.Random(3))
        again = executor.draw_check_variants(5, random.Random(3))
        assert executor.stored_variant(checks) == executor.stored_variant(again)
        stored = executor.stored_variant(checks)
        assert (stored.hash_seed, stored.tz, stored.random_seed, stored.fresh) == (
            0, "UTC", 0, False,
        )  # fmt: skip
        assert stored.layout != 0
        assert len({v.layout for v in checks} | {stored.layout}) == 6


#: The pages a program can still allocate (``bytes(n)`` is lazily zeroed: no CPU to speak of),
#: in units of ``UNIT`` pages. Red team, 2026-12-06 (E2): the headroom told a zygote's fork
#: (at most 124,772 pages on one host) from a fresh interpreter (124,764), and at UNIT = 1024
#: it was the same in every run, so such a value passed the determinism check.
_HEADROOM = (
    "def answer():\n"
    "    lo, hi = 0, 1 << 31\n"
    "    while hi - lo > 4096:\n"
    "        mid = (lo + hi) // 2\n"
    "        try:\n"
    "            b = bytes(mid)\n"
    "            del b\n"
    "            lo = mid\n"
    "        except MemoryError:\n"
    "            hi = mid\n"
    "    return lo // (4096 * UNIT)\n"
)


@pytest.mark.parametrize("level", LEVELS, indirect=True)
class TestMemoryHeadroom:
    def test_the_headroom_is_drawn_per_run(self, level):
        """Stored runs (forks) and audit runs (fresh, stored seeds) alike: it spreads over
        hundreds of pages (drawn up to :data:`executor.MEMORY_SLACK_PAGES`); the fork and the
        fresh interpreter differed by 8 pages at the maximum before."""
        program = _HEADROOM.replace("UNIT", "1")
        audit = executor.AUDIT_RUN
        for variant in (executor.STORED_RUN, audit):
            pages = [
                int(executor.execute(program, [()], entry="answer", variant=variant).outputs[0])
                for _ in range(8)
            ]
            # uniform over 4,096 pages: 8 draws span under 500 once in about 10**5
            assert max(pages) - min(pages) > 500, (variant, pages)
            # the limit the sandbox set (512 MiB, 131,072 pages), less what is mapped, less
            # the slack: never more, and never all of the slack taken twice
            assert all(131072 - 2 * 4096 - 16384 < p < 131072 for p in pages), pages

    def test_a_value_keyed_on_the_headroom_is_refused(self, level):
        program = _HEADROOM.replace("UNIT", "1024")  # 4 MiB: constant across runs before
        for seed in range(2):
            got = executor.compute_answer(program, check_rng=random.Random(seed))
            assert not got.valid and got.check == "deterministic", (seed, got)


@pytest.mark.parametrize("level", ["unshare", "rlimits"], indirect=True)
def test_a_program_that_uses_most_of_its_memory_still_passes(level):
    """The drawn slack takes at most 16 MiB of the run's 512: 400 MiB held at once passes."""
    program = "def f(n):\n    b = bytearray(n << 20)\n    b[-1] = 7\n    return len(b) + b[-1]\n"
    got = executor.validate_program(program, ["400"], check_rng=random.Random(4))
    assert got.valid, got
    assert got.outputs == [str((400 << 20) + 7)]


@pytest.mark.parametrize("level", ["unshare", "rlimits"], indirect=True)
def test_a_math_grounding_answer_is_audited_through_answer(level):
    program = "def answer():\n    return sorted({'b', 'a'}) + [2 ** 10]\n"
    got = executor.compute_answer(program, check_rng=random.Random(1))
    assert (got.valid, got.inputs, got.outputs) == (True, [""], ["['a', 'b', 1024]"])
    audit = {"hash_seed": 0, "entry": "answer"}
    assert executor.recomputes(program, got.inputs, got.outputs, **audit)
    assert not executor.recomputes(program, got.inputs, ["['a', 'b', 1023]"], **audit)


@pytest.mark.parametrize("level", ["unshare", "rlimits"], indirect=True)
def test_honest_programs_still_pass_under_drawn_layouts(level):
    program = "def f(a):\n    return sorted({str(a), 'x'}) + [a * 2, -0.0, {'k': (1, 2.5)}]\n"
    got = executor.validate_program(program, ["3", "'b'"], check_rng=random.Random(0))
    assert got.valid, got
    assert executor.compute_answer(
        "def answer():\n    return sum(range(10)) / 4\n", check_rng=random.Random(1)
    ).valid


def test_a_value_too_large_to_compare_is_refused():
    from sage_env.verifiers import MathVerifier
    from sage_env.verifiers.math_grounding import ground_answer

    program = "def answer():\n    return '9^{9^{9^' + str(3 * 3) + '}}'\n"
    got = ground_answer(program, "9^{9^{9^9}}", MathVerifier(), check_rng=random.Random(0))
    assert got.verdict != "agree"


@pytest.mark.parametrize(
    "value",
    ["9^{9^{9^9}}", "2^{1000}", "9^{300}", "2^{2^{2^{2^2}}}", "x^{2^n}", "1.5^{2000}"],
)
def test_a_power_too_large_to_compare_is_refused_as_a_value(value):
    from sage_env.verifiers.math_grounding import render_value

    text, why = render_value(value)
    assert text is None and "power" in why


@pytest.mark.parametrize("value", ["2^{10}", "2^{700}", "2^{3^2}", "2^{2^{2^2}}", "2^{n}", "10^{-3}"])
def test_a_power_small_enough_to_compare_is_kept(value):
    from sage_env.verifiers.math_grounding import render_value

    assert render_value(value) == (value, "")


# Red team, 2026-12-06 (afternoon): state the allowed modules keep across the per-input reloads
# made a task's later outputs depend on the inputs before them. Validated in order, such a task
# stored [1/7 at 28 digits, 2/7 at 5, 3/7 at 5]; the induction check then failed the program
# itself on its held-out inputs. The check runs now call the inputs in reverse order.
ORDER_DEPENDENT = {
    "decimal context": (
        "import decimal\n"
        "def f(x):\n"
        "    c = decimal.getcontext()\n"
        "    r = str(decimal.Decimal(x) / decimal.Decimal(7))\n"
        "    c.prec = 5\n"
        "    return r\n"
    ),
    "ABC registry": (
        "import numbers\n"
        "def f(x):\n"
        "    r = isinstance(1.5, numbers.Integral)\n"
        "    numbers.Integral.register(float)\n"
        "    return [x, r]\n"
    ),
}


@pytest.mark.parametrize("name", sorted(ORDER_DEPENDENT))
def test_an_output_that_depends_on_the_calls_before_it_is_refused(name):
    program = ORDER_DEPENDENT[name]
    # in order, the stored run alone: the second output is not what the second input gives
    alone = executor.execute(program, [(2,)]).outputs
    ordered = executor.execute(program, [(1,), (2,), (3,)]).outputs
    assert ordered[1] != alone[0]
    for seed in range(2):
        got = executor.validate_program(program, ["1", "2", "3"], check_rng=random.Random(seed))
        assert (got.valid, got.check) == (False, "deterministic"), got
    # one input has no call before it: nothing to refuse
    assert executor.validate_program(program, ["2"], check_rng=random.Random(0)).valid

"""Unit tests of the executor's host side (sage_env/verifiers/executor.py), for the mutation
run (issue 49, ``scripts/mutation.py executor``).

No sandbox runs here: the sandbox (``executor.sandbox``), the run of one variant
(``_run_variant``) or :func:`execute` itself are fakes that record what they were given and
answer what the test scripts, so every test asserts the exact values passed and returned
(limits, variants, the runner's text, the parsed report). The runs of real programs are
``test_exec_ground_truth.py``'s and ``test_drawn_check_runs.py``'s.
"""

from __future__ import annotations

import random
import threading
import time

import pytest

from sage_env.sandbox.host.config import SandboxConfig
from sage_env.sandbox.host.runner import SandboxResult
from sage_env.verifiers import executor
from sage_env.verifiers.executor import (
    CHECK_TIME_ZONES,
    STORED_RUN,
    Execution,
    RunVariant,
    Validation,
)

M = 4294967295  # 2**32 - 1
NONCE = "@@AZR-0123456789abcdef@@"
ALL_RETURNED = "every call returned"
ADD = "def f(a, b):\n    return a + b\n"


def V(seed: int, tz: str = "Asia/Tehran", r: int = 3, fresh: bool = True, layout: int = 0):
    return RunVariant(seed, tz, r, fresh, layout)


# ------------------------------------------------------------------------------------------
# draw_check_variants, _layout_of, stored_variant


class RecordingRng:
    """A generator that records every draw and answers from a script."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.calls = []

    def randrange(self, *args):
        self.calls.append(("randrange", args))
        return self.answers.pop(0)

    def choice(self, seq):
        self.calls.append(("choice", seq))
        return seq[self.answers.pop(0)]


def test_each_check_run_draws_a_hash_seed_a_zone_and_a_random_seed_in_that_order():
    rng = RecordingRng([1, 0, 0, M, 15, M])
    got = executor.draw_check_variants(2, rng)
    one = [("randrange", (1, 4294967296)), ("choice", CHECK_TIME_ZONES), ("randrange", (2**32,))]
    assert rng.calls == one * 2
    assert got == (
        RunVariant(1, "Pacific/Kiritimati", 0, fresh=True, layout=40504),
        RunVariant(M, "America/Los_Angeles", M, fresh=True, layout=40504),
    )


def test_drawn_variants_are_fresh_with_a_layout_from_their_random_seed():
    got = executor.draw_check_variants(5, random.Random(11))
    rng = random.Random(11)
    expected = []
    for _ in range(5):
        h, tz, r = rng.randrange(1, 2**32), rng.choice(CHECK_TIME_ZONES), rng.randrange(2**32)
        expected.append(RunVariant(h, tz, r, True, (r * 2654435761 + 40503) % M + 1))
    assert got == tuple(expected)
    assert all(type(v.layout) is int and 1 <= v.layout <= M for v in got)


@pytest.mark.parametrize(("count", "n"), [(0, 0), (-3, 0), (1, 1), (3, 3)])
def test_the_count_of_check_runs_is_at_least_zero(count, n):
    assert len(executor.draw_check_variants(count, random.Random(4))) == n


def test_without_a_generator_the_system_one_is_used(monkeypatch):
    monkeypatch.setattr(executor.random, "SystemRandom", lambda: random.Random(21))
    assert executor.draw_check_variants(3) == executor.draw_check_variants(3, random.Random(21))


def test_without_a_generator_the_draws_are_unpredictable():
    a, b = executor.draw_check_variants(3), executor.draw_check_variants(3)
    assert a != b and all(v.fresh and v.tz in CHECK_TIME_ZONES for v in a + b)
    assert all(1 <= v.hash_seed <= M and 0 <= v.random_seed <= M for v in a + b)


@pytest.mark.parametrize(
    ("seed", "salt", "layout"),
    [
        (0, 0, 1),
        (0, 1, 40504),
        (0, 2, 81007),
        (1, 1, 2654476265),
        (2, 1, 1013944731),
        (M, 0, 1),
        (M - 1, 0, 1640531535),
        (5, 2, 387357927),
    ],
)
def test_a_layout_is_an_affine_draw_modulo_two_to_the_32_minus_one_plus_one(seed, salt, layout):
    assert executor._layout_of(seed, salt) == layout


def test_with_no_check_run_the_stored_run_is_the_pinned_one():
    assert executor.stored_variant(()) is STORED_RUN
    assert executor.stored_variant([]) is STORED_RUN
    assert STORED_RUN == RunVariant(0, "UTC", 0, fresh=False, layout=0)


def test_the_stored_run_draws_its_layout_from_the_first_check_run():
    checks = (V(9, r=5), V(8, r=7))
    assert executor.stored_variant(checks) == RunVariant(0, "UTC", 0, False, 387357927)


# ------------------------------------------------------------------------------------------
# _run_variant: a zygote's fork, or an interpreter of its own


class FakeSandbox:
    """Stands in for the ``sage_env.sandbox`` module: records runs and pools."""

    SandboxConfig = SandboxConfig

    def __init__(self):
        self.calls = []
        self.result = SandboxResult("passed", "ran")
        self.pool = None

    def run(self, code, **kwargs):
        self.calls.append(("run", code, kwargs))
        return self.result

    def SandboxPool(self, *args, **kwargs):  # noqa: N802 - the name it stands in for
        box = self

        class Pool:
            def __enter__(self):
                box.calls.append(("enter", args, kwargs))
                box.pool = self
                return self

            def __exit__(self, *exc):
                box.calls.append(("exit",))
                return False

        return Pool()


@pytest.fixture
def box(monkeypatch) -> FakeSandbox:
    fake = FakeSandbox()
    monkeypatch.setattr(executor, "sandbox", fake)
    return fake


def test_a_stored_run_forks_from_a_zygote_under_its_seed_and_zone(box):
    res = executor._run_variant("CODE", V(11, fresh=False), 2.5, 300)
    assert res is box.result
    env = (("TZ", "Asia/Tehran"),)
    kwargs = {"timeout_s": 2.5, "memory_mb": 300, "hash_seed": 11, "env": env}
    assert box.calls == [("run", "CODE", kwargs)]


def test_a_fresh_run_gets_a_pool_of_its_own_without_zygotes(box):
    res = executor._run_variant("CODE", V(12, tz="Etc/GMT+12"), 2.5, 300)
    assert res is box.result
    cfg = SandboxConfig(timeout_s=2.5, memory_mb=300, hash_seed=12, env=(("TZ", "Etc/GMT+12"),))
    assert box.calls[0] == ("enter", (0, cfg), {"zygotes": False})
    assert box.calls[1] == ("run", "CODE", {"pool": box.pool})
    assert box.pool is not None
    assert box.calls[2] == ("exit",)
    assert len(box.calls) == 3


# ------------------------------------------------------------------------------------------
# execute: the runner's text, the sandbox's answer


class FakeRuns:
    """Stands in for ``_run_variant``: records each run, answers a scripted result."""

    def __init__(self, status="passed", reason="", stdout=b""):
        self.calls = []
        self.result = SandboxResult(status, reason, stdout)

    def __call__(self, code, variant, timeout_s, memory_mb):
        self.calls.append((code, variant, timeout_s, memory_mb))
        return self.result


@pytest.fixture
def runs(monkeypatch) -> FakeRuns:
    fake = FakeRuns()
    monkeypatch.setattr(executor, "_run_variant", fake)
    drawn = []

    def token_hex(n):
        drawn.append(("token_hex", n))
        return "0123456789abcdef"

    def randbelow(n):
        drawn.append(("randbelow", n))
        return 0

    monkeypatch.setattr(executor.secrets, "token_hex", token_hex)
    monkeypatch.setattr(executor.secrets, "randbelow", randbelow)
    fake.drawn = drawn
    return fake


def _report(rows, before=b"", after=b"\n") -> bytes:
    return before + (NONCE + repr(rows)).encode() + after


def _runner(src, texts, entry="f", expr=False, seed=0, layout=1) -> str:
    return executor._RUNNER.format(
        src=src, args=texts, entry=entry, max_chars=2000, nonce=NONCE, expr=expr, seed=seed,
        layout=layout, slack_pages=4096,
    )  # fmt: skip


def test_execute_sends_the_runner_with_every_setting_and_its_limits(runs):
    runs.result = SandboxResult("passed", "", _report((("ok", "3"), ("ok", "'ab'"))))
    variant = V(5, r=7, fresh=True, layout=99)
    got = executor.execute(
        ADD, [(1, 2), ["a", "b"]], entry="g", timeout_s=2.5, memory_mb=300, variant=variant
    )
    assert got == Execution("ok", ("3", "'ab'"), (None, None), "every call returned")
    code = _runner(ADD, ["(1, 2)", "('a', 'b')"], entry="g", seed=7, layout=99)
    assert runs.calls == [(code, variant, 2.5, 300)]
    assert runs.drawn == [("token_hex", 8)]


def test_execute_defaults_to_the_stored_run_and_draws_a_layout_for_it(runs):
    runs.result = SandboxResult("passed", "", _report((("ok", "None"),)))
    got = executor.execute(ADD, [(1, 2)])
    assert got == Execution("ok", ("None",), (None,), "every call returned")
    assert runs.calls == [(_runner(ADD, ["(1, 2)"], layout=1), STORED_RUN, 5.0, 512)]
    assert runs.drawn == [("token_hex", 8), ("randbelow", M)]


def test_execute_sends_input_expressions_as_their_text(runs):
    runs.result = SandboxResult("passed", "", _report((("ok", "1"), ("ok", "2"))))
    executor.execute(ADD, ["1, 2", "x, [3]"], expressions=1)
    assert runs.calls[0][0] == _runner(ADD, ["1, 2", "x, [3]"], expr=True)


@pytest.mark.parametrize("program", ["", "  \n\t", None, 5])
def test_execute_refuses_an_empty_program_without_running(runs, program):
    got = executor.execute(program, [(1,)])
    assert got == Execution("syntax_error", reason="empty program")
    assert runs.calls == []


class Unprintable:
    def __repr__(self):
        raise ValueError("no")

    __str__ = __repr__


@pytest.mark.parametrize("expressions", [False, True])
def test_execute_reports_an_input_it_cannot_print(runs, expressions):
    got = executor.execute(ADD, [(1, 2), (Unprintable(),)], expressions=expressions)
    assert got == Execution("error", reason="unprintable input: ValueError")
    assert runs.calls == []


@pytest.mark.parametrize(
    ("status", "reason", "entry", "expected"),
    [
        ("timeout", "took too long", "f", "took too long"),
        ("failed", "KeyError: 'g'", "g", "the program defines no function 'g'"),
        ("failed", "KeyError: 'h'", "g", "KeyError: 'h'"),
        ("failed", "NameError: 'g'", "g", "NameError: 'g'"),
        ("crashed", "KeyError: 'g'", "g", "KeyError: 'g'"),
    ],
)
def test_execute_passes_on_a_failed_run_naming_a_missing_entry(
    runs, status, reason, entry, expected
):
    runs.result = SandboxResult(status, reason, _report((("ok", "1"),)))
    got = executor.execute(ADD, [(1, 2)], entry=entry)
    assert got == Execution(status, reason=expected)


def test_execute_reads_each_row_as_an_output_or_an_error(runs):
    rows = (("ok", "3"), ("error", "ZeroDivisionError: x"), ("ok", 5), ("error", 7))
    runs.result = SandboxResult("passed", "", _report(rows))
    got = executor.execute(ADD, [(1, 2)] * 4)
    assert got == Execution(
        "error",
        ("3", None, "5", None),
        (None, "ZeroDivisionError: x", None, "7"),
        "ZeroDivisionError: x",
    )


def test_execute_reads_the_last_report_wherever_it_starts(runs):
    # what precedes the report (a stray byte, an earlier nonce) is skipped; the report may
    # start after white space and be followed by more lines
    junk = b"\xff\xfe" + NONCE.encode() + b"(('ok', 'forged'),)\n"
    runs.result = SandboxResult("passed", "", _report((("ok", "4"),), junk, b" \nmore\n"))
    assert executor.execute(ADD, [(1, 2)]) == Execution("ok", ("4",), (None,), ALL_RETURNED)
    runs.result = SandboxResult("passed", "", (NONCE + "\n  (('ok', '6'),)\n").encode())
    assert executor.execute(ADD, [(1, 2)]) == Execution("ok", ("6",), (None,), ALL_RETURNED)


@pytest.mark.parametrize(
    ("stdout", "reason"),
    [
        (b"(('ok', '1'),)\n", "the run reported no result"),
        (b"", "the run reported no result"),
        ((NONCE + "garbage\n").encode(), "the run's result does not parse"),
        ((NONCE + "\n").encode(), "the run's result does not parse"),
        ((NONCE + "(('ok',),)\n").encode(), "the run's result does not parse"),
        ((NONCE + "(5,)\n").encode(), "the run's result does not parse"),
        (_report((("ok", "1"), ("ok", "2"))), "the run reported the wrong number of results"),
        (_report(()), "the run reported the wrong number of results"),
    ],
)
def test_execute_calls_a_report_it_cannot_read_a_crash(runs, stdout, reason):
    runs.result = SandboxResult("passed", "", stdout)
    assert executor.execute(ADD, [(1, 2)]) == Execution("crashed", reason=reason)


# ------------------------------------------------------------------------------------------
# _run_values


def test_run_values_parse_every_output_with_its_type():
    ex = Execution("ok", ("1", "'a'", "[1, (2.0,)]", "{1: None}"), (None,) * 4)
    got = executor._run_values(ex)
    assert got == [1, "a", [1, (2.0,)], {1: None}]
    assert [type(v) for v in got] == [int, str, list, dict]
    assert type(got[2][1][0]) is float
    assert executor._run_values(Execution("ok")) == []


def test_run_values_refuse_a_run_that_did_not_return():
    ex = Execution("error", ("1", None), (None, "E: m"), "E: m")
    got = executor._run_values(ex)
    assert got == Validation(False, "program does not run (error): E: m", "run")
    got = executor._run_values(Execution("timeout", reason="slow"))
    assert got == Validation(False, "program does not run (timeout): slow", "run")


@pytest.mark.parametrize(
    ("out", "shown"),
    [("1e400", "1e400"), ("x" * 100, "x" * 80), (None, "None"), ("f(1)", "f(1)")],
)
def test_run_values_refuse_an_output_that_is_no_literal(out, shown):
    got = executor._run_values(Execution("ok", ("2", out), (None, None)))
    assert got == Validation(False, f"output is not a Python literal: {shown}", "literal")


# ------------------------------------------------------------------------------------------
# execute_all: the check runs, together


class FakeExecute:
    """Stands in for :func:`execute`: records each call and its thread, answers per variant."""

    def __init__(self, answer=None, delay=0.0):
        self.calls = []
        self.lock = threading.Lock()
        self.answer = answer or (lambda v: Execution("ok", (str(v.random_seed),), (None,)))
        self.delay = delay

    def __call__(self, program, args_list, **kwargs):
        with self.lock:
            self.calls.append((program, args_list, kwargs, threading.current_thread().name))
        if self.delay:
            time.sleep(self.delay)
        return self.answer(kwargs["variant"])


@pytest.fixture
def fake_execute(monkeypatch) -> FakeExecute:
    fake = FakeExecute()
    monkeypatch.setattr(executor, "execute", fake)
    return fake


def _variants(n):
    return [V(100 + i, r=i) for i in range(n)]


def _threads(fake):
    return sorted({c[3] for c in fake.calls})


def test_one_check_run_runs_in_the_calling_thread(fake_execute):
    assert executor.execute_all(ADD, [(1, 2)], _variants(1), entry="g") == [
        Execution("ok", ("0",), (None,))
    ]
    variant = _variants(1)[0]
    assert fake_execute.calls == [(ADD, [(1, 2)], {"variant": variant, "entry": "g"}, "MainThread")]
    assert executor.execute_all(ADD, [(1, 2)], []) == []


def test_check_runs_run_together_in_order_and_with_their_limits(fake_execute):
    variants = _variants(2)
    got = executor.execute_all(ADD, [(1, 2)], variants, timeout_s=2.5, memory_mb=300)
    assert got == [Execution("ok", (str(i),), (None,)) for i in range(2)]
    calls = sorted(fake_execute.calls, key=lambda c: c[2]["variant"].random_seed)
    assert [c[:3] for c in calls] == [
        (ADD, [(1, 2)], {"variant": v, "timeout_s": 2.5, "memory_mb": 300}) for v in variants
    ]
    assert all(c[3].startswith("sage-check-run_") for c in calls)


def test_at_most_check_run_workers_run_at_a_time(fake_execute):
    assert executor.CHECK_RUN_WORKERS == 5
    fake_execute.delay = 0.2
    got = executor.execute_all(ADD, [(1, 2)], _variants(7))
    assert got == [Execution("ok", (str(i),), (None,)) for i in range(7)]
    assert _threads(fake_execute) == [f"sage-check-run_{i}" for i in range(5)]


def test_fewer_check_runs_than_workers_start_as_many_threads(fake_execute):
    fake_execute.delay = 0.2
    executor.execute_all(ADD, [(1, 2)], _variants(3))
    assert _threads(fake_execute) == [f"sage-check-run_{i}" for i in range(3)]


def test_check_run_workers_set_how_many_run_together(fake_execute, monkeypatch):
    fake_execute.delay = 0.2
    monkeypatch.setattr(executor, "CHECK_RUN_WORKERS", 2)
    executor.execute_all(ADD, [(1, 2)], _variants(3))
    assert _threads(fake_execute) == ["sage-check-run_0", "sage-check-run_1"]
    fake_execute.calls.clear()
    monkeypatch.setattr(executor, "CHECK_RUN_WORKERS", 1)
    got = executor.execute_all(ADD, [(1, 2)], _variants(3))
    assert got == [Execution("ok", (str(i),), (None,)) for i in range(3)]
    assert [c[3] for c in fake_execute.calls] == ["MainThread"] * 3
    assert [c[2]["variant"] for c in fake_execute.calls] == _variants(3)


# ------------------------------------------------------------------------------------------
# validate_program and compute_answer


class Scripted(FakeExecute):
    """:func:`execute` answering by run: the stored run, the check runs (inputs last to
    first) and the audit-configuration run (in order; the stored run's answer by default)."""

    def __init__(self, stored, checks=None, audit=None):
        def answer(v):
            if not v.fresh:
                return stored
            if (v.hash_seed, v.tz, v.random_seed) == (0, "UTC", 0):
                return audit or stored
            return checks or stored

        super().__init__(answer)


def _validate(monkeypatch, fake, *args, **kwargs):
    monkeypatch.setattr(executor, "execute", fake)
    return executor.validate_program(*args, **kwargs)


OK = Execution("ok", ("3", "'ab'"), (None, None), "every call returned")
OK_REVERSED = Execution("ok", ("'ab'", "3"), (None, None), "every call returned")
ONE = Execution("ok", ("3",), (None,), "every call returned")


def test_a_valid_program_gets_canonical_inputs_and_the_stored_runs_outputs(monkeypatch):
    fake = Scripted(OK, OK_REVERSED)  # the check runs call the inputs last to first
    got = _validate(
        monkeypatch, fake, ADD, [" 1,2 ", ("a", "b")], entry="f", timeout_s=2.5,
        memory_mb=300, determinism_runs=3, check_rng=random.Random(5),
    )  # fmt: skip
    assert got == Validation(True, "valid", "", ["1, 2", "'a', 'b'"], ["3", "'ab'"])
    checks = executor.draw_check_variants(2, random.Random(5))
    stored = executor.stored_variant(checks)
    assert stored != STORED_RUN and stored.layout != 0
    limits = {"entry": "f", "timeout_s": 2.5, "memory_mb": 300}
    args = [(1, 2), ("a", "b")]
    assert fake.calls[0][:3] == (ADD, args, {"variant": stored, **limits})
    assert fake.calls[0][3] == "MainThread"
    audit = executor.audit_variant(checks)
    order = [*checks, audit]
    later = sorted(fake.calls[1:], key=lambda c: order.index(c[2]["variant"]))
    assert [c[:3] for c in later] == [
        *((ADD, args[::-1], {"variant": v, **limits}) for v in checks),
        (ADD, args, {"variant": audit, **limits}),
    ]


def test_validation_defaults_six_runs_entry_f_and_its_limits(monkeypatch):
    fake = Scripted(Execution("ok", ("1",), (None,)))
    got = _validate(monkeypatch, fake, "def f(a):\n    return a\n", ["1"])
    assert got == Validation(True, "valid", "", ["1"], ["1"])
    assert len(fake.calls) == 7  # the stored run, 5 drawn check runs and the audit's
    assert sum(c[2]["variant"].fresh for c in fake.calls) == 6
    assert sum(c[2]["variant"].hash_seed == 0 for c in fake.calls) == 2
    assert all(
        {k: v for k, v in c[2].items() if k != "variant"}
        == {"entry": "f", "timeout_s": 5.0, "memory_mb": 512}
        for c in fake.calls
    )


@pytest.mark.parametrize(("runs", "calls"), [(0, 1), (1, 1), (2, 3), (4, 5)])
def test_determinism_runs_count_the_stored_run(monkeypatch, runs, calls):
    fake = Scripted(ONE)
    got = _validate(
        monkeypatch, fake, ADD, ["1, 2"], determinism_runs=runs, check_rng=random.Random(1)
    )
    assert got.valid and len(fake.calls) == calls
    if calls == 1:
        assert fake.calls[0][2]["variant"] is STORED_RUN


def test_a_check_run_that_differs_makes_the_program_not_deterministic(monkeypatch):
    fake = Scripted(Execution("ok", ("1",), (None,)), Execution("ok", ("1.0",), (None,)))
    got = _validate(monkeypatch, fake, ADD, ["1, 2"], determinism_runs=2)
    assert got == Validation(False, "program is not deterministic (runs differ)", "deterministic")


def test_check_runs_call_the_inputs_last_to_first_and_compare_input_by_input(monkeypatch):
    """An output that depends on the calls before it (red team, 2026-12-06: decimal's context
    set by the first call, an ABC registered by it) differs when the order is reversed."""
    same = Scripted(OK, OK_REVERSED)
    got = _validate(monkeypatch, same, ADD, ["1, 2", "'a', 'b'"], determinism_runs=2)
    assert got.valid and got.outputs == ["3", "'ab'"]
    assert [c[1] for c in same.calls] == [
        [(1, 2), ("a", "b")], [("a", "b"), (1, 2)], [(1, 2), ("a", "b")],
    ]  # fmt: skip
    # the same outputs in the same order: the first input's answer moved with the order
    moved = Scripted(OK, OK)
    got = _validate(monkeypatch, moved, ADD, ["1, 2", "'a', 'b'"], determinism_runs=2)
    assert got == Validation(False, "program is not deterministic (runs differ)", "deterministic")


def test_a_value_only_the_audit_configuration_computes_is_refused(monkeypatch):
    """Red team, 2026-12-06 (E2): a program that told the stored run's zygote fork from a fresh
    interpreter under the stored seeds (its memory headroom) agreed with every drawn check run,
    whose seeds differ, and was stored; the audit (``recomputes``) computed another value. The
    run in the audit's configuration sees it when the task is proposed."""
    odd = Execution("ok", ("4", "'ab'"), (None, None), "every call returned")
    fake = Scripted(OK, OK_REVERSED, audit=odd)
    got = _validate(monkeypatch, fake, ADD, ["1, 2", "'a', 'b'"], check_rng=random.Random(2))
    assert got == Validation(False, "program is not deterministic (runs differ)", "deterministic")
    # in order, as the audit calls them: its outputs compare unreversed
    fake = Scripted(OK, OK_REVERSED, audit=OK_REVERSED)
    got = _validate(monkeypatch, fake, ADD, ["1, 2", "'a', 'b'"], check_rng=random.Random(2))
    assert not got.valid and got.check == "deterministic"


def test_the_audit_run_draws_its_layout_from_the_first_check_run():
    checks = executor.draw_check_variants(3, random.Random(8))
    got = executor.audit_variant(checks)
    r = checks[0].random_seed
    assert got == RunVariant(0, "UTC", 0, True, (r * 2654435761 + 3 * 40503) % M + 1)
    assert got == executor.audit_variant(executor.draw_check_variants(3, random.Random(8)))
    assert got.layout not in {v.layout for v in checks} | {executor.stored_variant(checks).layout}
    assert executor.AUDIT_RUN == RunVariant(0, "UTC", 0, True, 0)
    with pytest.raises(IndexError):
        executor.audit_variant(())


def test_a_stored_run_that_fails_refuses_the_program_before_any_check_run(monkeypatch):
    fake = Scripted(Execution("timeout", reason="slow"))
    got = _validate(monkeypatch, fake, ADD, ["1, 2"])
    assert got == Validation(False, "program does not run (timeout): slow", "run")
    assert len(fake.calls) == 1


def test_a_check_run_that_fails_or_returns_no_literal_refuses_the_program(monkeypatch):
    fails = Scripted(OK, Execution("error", ("3", None), (None, "E: m"), "E: m"))
    got = _validate(monkeypatch, fails, ADD, ["1, 2"], determinism_runs=2)
    assert got == Validation(False, "program does not run (error): E: m", "run")
    odd = Scripted(OK, Execution("ok", ("3", "1e400"), (None, None)))
    got = _validate(monkeypatch, odd, ADD, ["1, 2"], determinism_runs=2)
    assert got == Validation(False, "output is not a Python literal: 1e400", "literal")
    bad = Scripted(Execution("ok", ("x y",), (None,)))
    got = _validate(monkeypatch, bad, ADD, ["1, 2"], determinism_runs=2)
    assert got == Validation(False, "output is not a Python literal: x y", "literal")
    assert len(bad.calls) == 1


NO_F = "program defines no top-level function "
BANNED = "program imports '%s', a banned module"


@pytest.mark.parametrize(
    ("program", "inputs", "kwargs", "expected"),
    [
        ("", ["1"], {}, ("empty program", "parse")),
        (" \n ", ["1"], {}, ("empty program", "parse")),
        (None, ["1"], {}, ("empty program", "parse")),
        ("def f(:\n", ["1"], {}, ("program does not parse: SyntaxError", "parse")),
        ("def g(a):\n    return a\n", ["1"], {}, (NO_F + "f", "entry")),
        (ADD, ["1"], {"entry": "g"}, (NO_F + "g", "entry")),
        ("import random\n" + ADD, ["1"], {}, (BANNED % "random", "forbidden")),
        ("import math\n" + ADD, ["1"], {"banned": ("math",)}, (BANNED % "math", "forbidden")),
        (ADD, [], {}, ("no input", "input")),
        (ADD, ["1)#"], {}, ("input is not a Python literal: '1)#'", "input")),
        (ADD, ["1", "1e400"], {}, ("input is not a Python literal: '1e400'", "input")),
        (ADD, [(float("inf"),)], {}, ("input is not a Python literal: '(inf,)'", "input")),
        (ADD, [[1, 2]], {}, ("input is not a Python literal: '[1, 2]'", "input")),
        (ADD, ["x" * 100], {}, (f"input is not a Python literal: {'x' * 80!r}", "input")),
    ],
)  # fmt: skip
def test_a_program_refused_before_it_runs(monkeypatch, program, inputs, kwargs, expected):
    fake = Scripted(OK)
    got = _validate(monkeypatch, fake, program, inputs, **kwargs)
    assert got == Validation(False, *expected)
    assert fake.calls == []


def test_compute_answer_validates_one_empty_input_under_its_settings(monkeypatch):
    calls = []

    def validate(*args, **kwargs):
        calls.append((args, kwargs))
        return "verdict"

    monkeypatch.setattr(executor, "validate_program", validate)
    rng = random.Random(0)
    got = executor.compute_answer(
        "P", entry="g", timeout_s=2.5, memory_mb=300, determinism_runs=2, check_rng=rng
    )
    assert got == "verdict"
    assert calls.pop() == (
        ("P", [()]),
        {"entry": "g", "timeout_s": 2.5, "memory_mb": 300, "determinism_runs": 2, "check_rng": rng},
    )
    executor.compute_answer("P")
    assert calls.pop() == (
        ("P", [()]),
        {"entry": "answer", "timeout_s": 5.0, "memory_mb": 512, "determinism_runs": 6,
         "check_rng": None},
    )  # fmt: skip


def test_compute_answer_runs_answer_with_no_argument(monkeypatch):
    fake = Scripted(Execution("ok", ("42",), (None,)))
    monkeypatch.setattr(executor, "execute", fake)
    got = executor.compute_answer("def answer():\n    return 42\n", determinism_runs=1)
    assert got == Validation(True, "valid", "", [""], ["42"])
    assert fake.calls[0][:2] == ("def answer():\n    return 42\n", [()])


# ------------------------------------------------------------------------------------------
# recomputes


def test_a_stored_task_recomputes_in_a_fresh_interpreter_under_its_seed(monkeypatch):
    fake = FakeExecute(lambda v: Execution("ok", ("3", "{2, 1}"), (None, None)))
    monkeypatch.setattr(executor, "execute", fake)
    ok = executor.recomputes(
        ADD, ["1, 2", "'a'"], ["3", "{1, 2}"], hash_seed=77, timeout_s=2.5, memory_mb=300
    )
    assert ok is True
    variant = RunVariant(77, "UTC", 0, fresh=True, layout=0)
    kwargs = {"entry": "f", "timeout_s": 2.5, "memory_mb": 300, "variant": variant}
    assert fake.calls == [(ADD, [(1, 2), ("a",)], kwargs, "MainThread")]
    assert executor.recomputes(ADD, ["1, 2", "'a'"], ["3", "{1, 2}"], hash_seed=1)
    assert fake.calls[-1][2] == {
        "entry": "f", "timeout_s": 5.0, "memory_mb": 512,
        "variant": RunVariant(1, "UTC", 0, True, 0),
    }  # fmt: skip


def test_a_math_grounding_program_is_audited_through_its_answer_function(monkeypatch):
    fake = FakeExecute(lambda v: Execution("ok", ("42",), (None,)))
    monkeypatch.setattr(executor, "execute", fake)
    program = "def answer():\n    return 6 * 7\n"
    assert executor.recomputes(program, [""], ["42"], hash_seed=0, entry="answer")
    assert fake.calls == [
        (
            program, [()],
            {"entry": "answer", "timeout_s": 5.0, "memory_mb": 512, "variant": executor.AUDIT_RUN},
            "MainThread",
        )
    ]  # fmt: skip
    assert not executor.recomputes(program, [""], ["41"], hash_seed=0, entry="answer")
    assert executor.recomputes(program, ["  "], ["42"], hash_seed=0, entry="answer")
    assert len(fake.calls) == 3 and fake.calls[-1][1] == [()]


@pytest.mark.parametrize(
    ("answer", "outputs"),
    [
        (Execution("ok", ("3", "{2, 1}"), (None, None)), ["3", "{1, 3}"]),
        (Execution("ok", ("3", "{2, 1}"), (None, None)), ["4", "{1, 2}"]),
        (Execution("ok", ("3", "{2, 1}"), (None, None)), ["3.0", "{1, 2}"]),
        (Execution("timeout", ("3", "{2, 1}"), (None, None)), ["3", "{1, 2}"]),
        (Execution("error", ("3", "{2, 1}"), (None, None)), ["3", "{1, 2}"]),
    ],
)
def test_a_stored_task_that_does_not_recompute_fails_its_audit(monkeypatch, answer, outputs):
    fake = FakeExecute(lambda v: answer)
    monkeypatch.setattr(executor, "execute", fake)
    assert executor.recomputes(ADD, ["1, 2", "'a'"], outputs, hash_seed=1) is False
    assert len(fake.calls) == 1


@pytest.mark.parametrize(
    ("inputs", "outputs"),
    [
        ([], []),
        (["1)#"], ["1"]),
        (["1", "1)#"], ["1", "1"]),
        (["1", "2"], ["1"]),
        (["1"], ["1", "2"]),
    ],
)
def test_an_audit_of_unreadable_stored_data_fails_without_running(monkeypatch, inputs, outputs):
    fake = FakeExecute(lambda v: Execution("ok", tuple(outputs), (None,) * len(outputs)))
    monkeypatch.setattr(executor, "execute", fake)
    assert executor.recomputes(ADD, inputs, outputs, hash_seed=1) is False
    assert fake.calls == []

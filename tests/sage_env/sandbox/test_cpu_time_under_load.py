"""Verdicts do not depend on load: CPU-time limits, with the wall clock only as a backstop.

Each test keeps every core of the machine busy with other processes while a correct program
runs, and asserts its status (never a duration). A program that needs its CPU budget's worth of
time gets it however long a loaded machine makes it wait; a program that loops forever is still
stopped, by ``RLIMIT_CPU`` or the wall-clock backstop.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sage_env import sandbox
from sage_env.sandbox import SandboxConfig
from sage_env.verifiers import CodeVerifier

pytestmark = pytest.mark.slow  # the sandbox with every core busy, by design

WORK = "def work(n):\n    s = 0\n    for i in range(n):\n        s += i % 7\n    return s\n"


def _work(n):
    s = 0
    for i in range(n):
        s += i % 7
    return s


@pytest.fixture(scope="module")
def n_for_half_a_second():
    """Iterations of ``work`` that take about 0.4 s of CPU here (measured before any load): a
    fraction of the 1 s budget, but more than 1 s of wall time on a machine this busy."""
    import time

    start = time.process_time()
    _work(200_000)
    per_iter = max(time.process_time() - start, 1e-3) / 200_000
    return max(100_000, int(0.4 / per_iter))


@pytest.fixture
def busy_machine():
    """Two CPU burners per core, for the duration of one test."""
    procs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(2 * (os.cpu_count() or 1))
    ]
    try:
        yield len(procs)
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


#: The levels under load (the ``level`` fixture: tests/sage_env/conftest.py).
LOADED_LEVELS = pytest.mark.parametrize(
    "level", ["unshare", "unshare-zygote", "bwrap-zygote"], indirect=True
)


def test_the_wall_clock_is_a_generous_backstop_of_the_cpu_budget():
    # (n_for_half_a_second is measured before the burners start: fixtures run in order)
    cfg = SandboxConfig(timeout_s=2.0)
    assert cfg.wall_limit_s() == 2.0 * 3.0 + 2.0
    assert ("RLIMIT_CPU", 2, 3) in cfg.limits(True)
    assert SandboxConfig(timeout_s=2.0, wall_s=30.0).wall_limit_s() == 30.0


@LOADED_LEVELS
def test_a_correct_program_passes_while_every_core_is_busy(
    level, n_for_half_a_second, busy_machine
):
    n = n_for_half_a_second
    r = sandbox.run(WORK + f"print(work({n}))\n", timeout_s=1.0)
    assert (r.status, r.stdout) == ("passed", b"%d\n" % _work(n)), r


@LOADED_LEVELS
def test_correct_tests_pass_in_code_verifier_while_every_core_is_busy(
    level, n_for_half_a_second, busy_machine
):
    n = n_for_half_a_second
    tests = [f"assert work({m}) == {_work(m)}" for m in (n // 2, n)]
    with CodeVerifier(timeout_s=1.0, pool_size=0) as cv:
        res = cv.verify(WORK, tests + ["assert work(3) > 2"])
    assert (res.score, res.status) == (1.0, "passed"), res


@LOADED_LEVELS
def test_an_endless_loop_is_still_a_timeout_while_every_core_is_busy(level, busy_machine):
    assert sandbox.run("while True:\n    pass\n", timeout_s=1.0).status == "timeout"
    with CodeVerifier(timeout_s=1.0, pool_size=0) as cv:
        res = cv.verify("def f(x):\n    while True:\n        pass\n", ["assert f(1) == 1"])
    assert (res.score, res.status) == (0.0, "timeout"), res

"""Tests for sage_env.verifiers (MathVerifier, CodeVerifier) and the answer extractors they
read with (sage_env.text.parsing.extract_boxed, sage_env.text.parsing.extract_code)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sage_env import sandbox
from sage_env import verifiers as V
from sage_env.text.parsing import extract_boxed, extract_code
from sage_env.verifiers import (
    MAX_PREDICTION_CHARS,
    STATUSES,
    CodeVerifier,
    MathVerifier,
    VerifierResult,
    math_verifier,
)

# ------------------------------------------------------------------------------------------
# worker-side hooks for the pool failure tests (module level so spawned workers can import them)


def _crashing_chunk(items, timeout_s):
    if any(pred == "CRASH" for pred, _ in items):
        os._exit(3)
    return math_verifier._verify_math_chunk(items, timeout_s)


def _hanging_chunk(items, timeout_s):
    if any(pred == "HANG" for pred, _ in items):
        while True:  # stands in for a C call SIGALRM cannot interrupt
            time.sleep(0.05)
    return math_verifier._verify_math_chunk(items, timeout_s)


# ------------------------------------------------------------------------------------------
# VerifierResult


def test_result_validates_and_clips():
    r = VerifierResult(1.7, "passed", "x" * 500)
    assert r.score == 1.0
    assert len(r.reason) == 200
    assert VerifierResult(float("nan"), "failed", "").score == 0.0
    with pytest.raises(ValueError):
        VerifierResult(0.0, "weird", "")
    assert set(STATUSES) == {
        "passed",
        "failed",
        "timeout",
        "memory",
        "crashed",
        "syntax_error",
        "invalid",
        "blocked",
    }


# ------------------------------------------------------------------------------------------
# extract_boxed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\\boxed{72}", "72"),
        ("The answer is \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}"),
        ("\\boxed{a{b{c}}d}", "a{b{c}}d"),
        ("\\boxed{1} then \\boxed{2}", "2"),
        ("\\boxed{\\{1,2\\}}", "\\{1,2\\}"),
        ("\\fbox{3}", "3"),
        ("\\boxed 5", "5"),
        ("\\boxed{}", ""),
        ("\\boxed{\\text{outer \\boxed{inner}}}", "\\text{outer \\boxed{inner}}"),
        ("\\boxed{1} then truncated \\boxed{2", "1"),  # best effort: last complete box
        ("\\boxed{2", None),
        ("\\boxed{2}}}}", "2"),
        ("no box here", None),
        ("\\boxedx{1}", None),
        ("", None),
        (None, None),
    ],
)
def test_extract_boxed(text, expected):
    assert extract_boxed(text) == expected


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("\\boxedfb{} 1x$")) | st.characters(), max_size=80))
def test_extract_boxed_never_raises(text):
    out = extract_boxed(text)
    assert out is None or isinstance(out, str)


# ------------------------------------------------------------------------------------------
# MathVerifier (in-process)


@pytest.fixture(scope="module")
def mv():
    return MathVerifier(workers=0, timeout_s=5.0)


@pytest.mark.parametrize(
    ("pred", "gold", "score", "status"),
    [
        ("\\boxed{72}", "72", 1.0, "passed"),
        ("The answer is \\boxed{\\frac{1}{2}}", "0.5", 1.0, "passed"),
        ("\\boxed{71}", "72", 0.0, "failed"),
        ("\\boxed{1} ... wait, actually \\boxed{2}", "2", 1.0, "passed"),
        ("\\boxed{1} ... wait, actually \\boxed{2}", "1", 0.0, "failed"),
        ("So the final answer is $72$.", "72", 1.0, "passed"),
        ("\\boxed{x = 5}", "5", 1.0, "passed"),
        ("\\boxed{\\$18.90}", "18.9", 1.0, "passed"),
        ("\\boxed{1,000}", "1000", 1.0, "passed"),
        ("\\boxed{\\{1, 2\\}}", "\\{2, 1\\}", 1.0, "passed"),
        ("\\boxed{72}", "\\boxed{72}", 1.0, "passed"),
        ("\\boxed{0.5000001}", "\\frac{1}{2}", 1.0, "passed"),  # math-verify rounds to 6 dp
        ("\\boxed{0.50001}", "\\frac{1}{2}", 0.0, "failed"),
        ("\\boxed{}", "1", 0.0, "invalid"),
        ("", "1", 0.0, "invalid"),
        ("no numbers at all", "1", 0.0, "invalid"),
        ("🙂🙂🙂", "1", 0.0, "invalid"),
        ("\\boxed{1}", "", 0.0, "invalid"),
        ("\\boxed{1}", "🙂", 0.0, "failed"),  # math-verify keeps '🙂' as a string match
        ("\\boxed{🙂}", "🙂", 1.0, "passed"),  # ... and compares strings exactly
        (None, "1", 0.0, "invalid"),
        ("\\boxed{1}", None, 0.0, "invalid"),
    ],
)
def test_math_verify_cases(mv, pred, gold, score, status):
    r = mv.verify(pred, gold)
    assert (r.score, r.status) == (score, status), r
    assert len(r.reason) <= 200


def test_math_huge_and_weird_inputs(mv):
    big = "x" * 1_000_000
    assert mv.verify(big, "72").status == "invalid"
    # the answer is at the end: the tail is kept
    r = mv.verify("y" * 1_000_000 + " so \\boxed{72}", "72")
    assert (r.score, r.status) == (1.0, "passed")
    # an answer only at the very start of a huge text is cut off
    r = mv.verify("\\boxed{72}" + " " * (MAX_PREDICTION_CHARS + 10), "72")
    assert (r.score, r.status) == (0.0, "invalid")
    for weird in ["{" * 5000, "}" * 5000, "\\boxed{" * 3000, "$" * 999, "\ud800\x00\u202e"]:
        r = mv.verify(weird, "1")
        assert r.score == 0.0 and r.status in STATUSES


def test_math_timeout_in_process():
    r = MathVerifier(timeout_s=0.5).verify("\\boxed{9^{9^{9^{9}}}}", "2")
    assert (r.score, r.status) == (0.0, "timeout")


def test_math_off_main_thread_runs_without_deadline(mv):
    out = []
    t = threading.Thread(target=lambda: out.append(mv.verify("\\boxed{72}", "72")))
    t.start()
    t.join(30)
    assert out and (out[0].score, out[0].status) == (1.0, "passed")


@pytest.mark.slow
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=60), st.sampled_from(["1", "\\frac{1}{2}", "x+1"]))
def test_math_never_raises(mv, pred, gold):
    r = mv.verify(pred, gold)
    assert r.status in STATUSES and 0.0 <= r.score <= 1.0


_PAIRS = [
    ("\\boxed{72}", "72"),
    ("\\boxed{71}", "72"),
    ("The answer is \\boxed{\\frac{1}{2}}", "0.5"),
    ("\\boxed{1} \\boxed{2}", "2"),
    ("", "3"),
    ("garbage 🙂", "3"),
    ("\\boxed{\\sqrt{2}}", "2^{1/2}"),
    ("\\boxed{(1,2]}", "(1, 2]"),
    ("\\boxed{x^2+2x+1}", "(x+1)^2"),
    ("\\boxed{3\\pi}", "3\\pi"),
    ("\\boxed{3.14}", "\\pi"),
    ("So it is 12.", "12"),
    ("\\boxed{5\\%}", "0.05"),
    ("\\boxed{-7}", "-7"),
    ("\\boxed{\\infty}", "\\infty"),
    ("x" * 200_000, "1"),
    ("\\boxed{\\frac{2}{4}}", "\\frac{1}{2}"),
    ("\\boxed{10}", "\\boxed{10}"),
    ("\\boxed{1}", ""),
    ("\\boxed{a}", "A"),
]


@pytest.mark.slow
def test_math_workers_match_in_process(mv):
    expected = mv.verify_batch(_PAIRS)
    with MathVerifier(workers=2, timeout_s=5.0) as pooled:
        got = pooled.verify_batch(_PAIRS)
        assert pooled.verify(*_PAIRS[0]) == expected[0]
    assert got == expected
    assert [r.score for r in expected[:4]] == [1.0, 0.0, 1.0, 1.0]


@pytest.mark.slow
def test_math_worker_crash_is_isolated_and_pool_recreated():
    with MathVerifier(workers=2, timeout_s=5.0) as pooled:
        pooled._chunk_fn = _crashing_chunk
        pairs = [("\\boxed{1}", "1"), ("CRASH", "1"), ("\\boxed{2}", "3"), ("\\boxed{4}", "4")]
        got = pooled.verify_batch(pairs)
        assert [(r.score, r.status) for r in got] == [
            (1.0, "passed"),
            (0.0, "crashed"),
            (0.0, "failed"),
            (1.0, "passed"),
        ]
        # the pool works again afterwards
        assert pooled.verify("\\boxed{9}", "9").status == "passed"


@pytest.mark.slow
def test_math_worker_hang_is_killed():
    with MathVerifier(workers=1, timeout_s=1.0) as pooled:
        pooled.worker_grace_s = 1.0
        pooled._chunk_fn = _hanging_chunk
        pooled.verify("\\boxed{0}", "0")  # warm the pool up so start-up is not in the deadline
        start = time.monotonic()
        got = pooled.verify_batch([("\\boxed{1}", "1"), ("HANG", "1"), ("\\boxed{2}", "2")])
        assert [(r.score, r.status) for r in got] == [
            (1.0, "passed"),
            (0.0, "timeout"),
            (1.0, "passed"),
        ]
        assert time.monotonic() - start < 30


@pytest.mark.slow
def test_math_worker_killed_externally_recovers():
    with MathVerifier(workers=1, timeout_s=5.0) as pooled:
        assert pooled.verify("\\boxed{1}", "1").score == 1.0
        for proc in list(pooled._pool._processes.values()):
            proc.kill()
            proc.join(5)
        assert pooled.verify("\\boxed{2}", "2").score == 1.0


# ------------------------------------------------------------------------------------------
# CodeVerifier


@pytest.fixture(scope="module")
def cv():
    return CodeVerifier(timeout_s=1.5)


DOUBLE = "def double(x):\n    return 2 * x\n"
DOUBLE_TESTS = ["assert double(1) == 2", "assert double(2) == 4", "assert double(3) == 6"]


def test_code_passes(cv):
    r = cv.verify(DOUBLE, DOUBLE_TESTS)
    assert (r.score, r.status, r.passed, r.total) == (1.0, "passed", 3, 3)


def test_code_one_of_three_fails(cv):
    r = cv.verify(DOUBLE, DOUBLE_TESTS[:2] + ["assert double(3) == 7"])
    assert (r.score, r.status, r.passed, r.total) == (2 / 3, "failed", 2, 3)
    assert "AssertionError" in r.reason


def test_code_two_of_three_fail(cv):
    r = cv.verify("def double(x):\n    return x + 1\n", DOUBLE_TESTS)
    assert (r.score, r.status, r.passed) == (1 / 3, "failed", 1)


def test_code_setup_and_namespace_copy(cv):
    setup = "import math\nHELPER = 10\n"
    program = "def f(x):\n    return math.floor(x) + HELPER\n"
    tests = ["assert f(1.5) == 11", "HELPER = 0\nassert f(1.5) == 11", "assert f(2.2) == 12"]
    r = cv.verify(program, tests, setup)
    assert (r.score, r.status) == (1.0, "passed")


def test_code_syntax_error(cv):
    r = cv.verify("def f(:\n    pass", ["assert True"])
    assert (r.score, r.status, r.passed, r.total) == (0.0, "syntax_error", 0, 1)


def test_code_bad_test_snippet_only_fails_that_test(cv):
    r = cv.verify(DOUBLE, ["assert double(1) == 2", "assert double(("])
    assert (r.score, r.status) == (0.5, "failed")


def test_code_no_tests_is_invalid(cv):
    assert cv.verify(DOUBLE, []).status == "invalid"
    assert cv.verify(DOUBLE, None).status == "invalid"


def test_code_failing_setup_is_invalid(cv):
    r = cv.verify(DOUBLE, ["assert True"], setup="raise RuntimeError('bad task')")
    assert (r.score, r.status) == (0.0, "invalid")


def test_code_program_error_scores_zero(cv):
    r = cv.verify(DOUBLE + "raise ValueError('boom')\n", ["assert double(1) == 2"])
    assert (r.score, r.status) == (0.0, "failed")


def test_code_main_block_does_not_run(cv):
    program = DOUBLE + "if __name__ == '__main__':\n    input()\n"
    assert cv.verify(program, ["assert double(2) == 4"]).status == "passed"


@pytest.mark.slow
def test_code_infinite_loop_times_out(cv):
    # stopped by its CPU limit, however loaded the machine: no wall-clock bound is asserted
    r = cv.verify("def f():\n    while True:\n        pass\n", ["f()"])
    assert (r.score, r.status) == (0.0, "timeout")


@pytest.mark.slow
def test_code_timeout_fails_only_the_spinning_test(cv, monkeypatch):
    # timeout_s is each test process's CPU budget (RLIMIT_CPU): the spinning test is killed
    # and the tests around it are judged. The wall-clock backstop is widened so that a loaded
    # machine cannot end the whole job first (that would also fail the last test).
    import sage_env.sandbox.host.config as sandbox_config

    monkeypatch.setattr(sandbox_config, "WALL_FACTOR", 40.0)
    program = DOUBLE + "def spin():\n    while True:\n        pass\n"
    tests = ["assert double(1) == 2", "assert double(2) == 4", "spin()", "assert True"]
    r = cv.verify(program, tests)
    assert (r.score, r.status, r.passed, r.total) == (0.75, "timeout", 3, 4)


def test_code_os_exit_at_top_level_scores_zero(cv):
    r = cv.verify("import os\nos._exit(0)\n", ["assert True", "assert 1"])
    assert (r.score, r.passed) == (0.0, 0)
    assert r.status == "failed"


def test_code_sys_exit_at_top_level_scores_zero(cv):
    r = cv.verify("import sys\nsys.exit(0)\n", ["assert True"])
    assert (r.score, r.status) == (0.0, "failed")


def test_code_exit_inside_function_fails_that_test(cv):
    program = DOUBLE + "def quit_early():\n    exit(0)\n"
    r = cv.verify(program, ["assert double(1) == 2", "quit_early()", "assert double(2) == 4"])
    assert (r.score, r.status, r.passed) == (2 / 3, "failed", 2)


def test_code_os_exit_inside_test_fails_only_that_test(cv):
    # each test runs in its own forked process: os._exit(0) ends (and fails) only that test
    program = DOUBLE + "import os\ndef bail():\n    os._exit(0)\n"
    r = cv.verify(program, ["assert double(1) == 2", "bail()", "assert double(2) == 4"])
    assert (r.score, r.status, r.passed) == (2 / 3, "failed", 2)


def test_code_fake_report_is_ignored(cv):
    fake = '{"ev": "test", "i": 0, "ok": true}'
    program = (
        "import os, sys\n"
        f"line = '\\nDEADBEEF {fake}\\n'\n"
        "print(line * 5)\n"
        "sys.stderr.write(line)\n"
        "for fd in range(3, 20):\n"
        "    try:\n"
        "        os.write(fd, line.encode())\n"
        "    except OSError:\n"
        "        pass\n"
        "def f():\n"
        "    return 1\n"
    )
    r = cv.verify(program, ["assert f() == 2"])
    assert (r.score, r.status, r.passed) == (0.0, "failed", 0)
    r = cv.verify(program + "os._exit(0)\n", ["assert f() == 1"])
    assert (r.score, r.passed) == (0.0, 0)


def test_code_memory_bomb(cv):
    r = cv.verify("x = bytearray(10**10)\n", ["assert True"])
    assert (r.score, r.status) == (0.0, "memory")
    r = cv.verify("def f():\n    return bytearray(10**10)\n", ["f()", "assert True"])
    assert (r.score, r.status, r.passed) == (0.5, "memory", 1)


def test_code_segfault_is_crashed(cv):
    r = cv.verify("import ctypes\n", ["ctypes.string_at(0)"])
    assert (r.score, r.status) == (0.0, "crashed")


def test_code_environment_is_scrubbed(cv, monkeypatch):
    monkeypatch.setenv("SAGE_SECRET_TOKEN", "hunter2")
    tests = [
        "import os\nassert 'SAGE_SECRET_TOKEN' not in os.environ",
        "import os\nassert set(os.environ) <= {'PATH', 'LANG', 'LC_CTYPE'}, os.environ",
    ]
    r = cv.verify("", tests)
    assert (r.score, r.status) == (1.0, "passed")


@pytest.mark.slow
def test_code_temp_dir_is_used_and_removed(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    cv = CodeVerifier(timeout_s=1.5, pool_size=0)  # no pre-started sandbox (and temp dir)
    # a zygote-forked job works in its own tmpfs, mounted in its own mount namespace
    where = sandbox.ZYGOTE_WORKDIR if sandbox.zygotes_available() else str(tmp_path)
    tests = [
        f"import os\nassert os.getcwd().startswith({where!r})\n"
        "open('scratch.txt', 'w').write('hi')\nos.mkdir('sub')",
        "import os\nassert sorted(os.listdir('.')) == ['scratch.txt', 'sub']",
    ]
    r = cv.verify("", tests)
    assert (r.score, r.status) == (1.0, "passed")
    assert list(tmp_path.iterdir()) == []
    r = cv.verify("while True:\n    pass\n", ["assert True"])
    assert r.status == "timeout"
    assert list(tmp_path.iterdir()) == []


def test_code_huge_output_does_not_hang():
    cv = CodeVerifier(timeout_s=20.0, max_output_bytes=1000)
    start = time.monotonic()
    program = "import sys\nprint('x' * 1_000_000)\nsys.stderr.write('y' * 1_000_000)\n"
    r = cv.verify(program + DOUBLE, ["print('z' * 2_000_000)\nassert double(1) == 2"])
    assert (r.score, r.status) == (1.0, "passed")
    assert time.monotonic() - start < 10


def _sandbox_uid_processes(marker):
    """Pids of live processes owned by the sandbox uids whose command line contains ``marker``."""
    from sage_env import sandbox

    uids = {sandbox.SANDBOX_UID, sandbox.HARNESS_UID}
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as fh:
                text = fh.read()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        if fields.get("State", "").split()[:1] in (["Z"], ["X"]):
            continue
        if int(fields.get("Uid", "0").split()[0]) not in uids:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if marker.encode() in fh.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox uid drop needs root")
def test_code_background_child_does_not_block():
    cv = CodeVerifier(timeout_s=20.0, pool_size=0)
    program = (
        "import subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60) # bgmark'])\n"
    )
    start = time.monotonic()
    r = cv.verify(program, ["assert True"])
    assert (r.score, r.status) == (1.0, "passed")
    assert time.monotonic() - start < 10  # did not wait for the wall-clock timeout
    deadline = time.monotonic() + 5
    while _sandbox_uid_processes("bgmark") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _sandbox_uid_processes("bgmark") == [], "background child survived the sandbox"


def test_code_stdin_is_closed(cv):
    r = cv.verify("def f():\n    return input()\n", ["try:\n    f()\nexcept EOFError:\n    pass"])
    assert r.status == "passed"


def test_code_never_raises_on_odd_input(cv):
    for program in [None, "\ud800", "\x00", "(" * 500, "x = '" + "🙂" * 1000 + "'"]:
        r = cv.verify(program, ["assert True"])
        assert r.status in STATUSES
    assert cv.verify(DOUBLE, "assert double(2) == 4").status == "passed"  # str -> one test


def test_code_missing_interpreter_is_crashed():
    r = CodeVerifier(python="/nonexistent/python3").verify(DOUBLE, ["assert True"])
    assert (r.score, r.status) == (0.0, "crashed")


def test_code_verify_batch_order_and_parallel(cv):
    jobs = [
        (DOUBLE, DOUBLE_TESTS, ""),
        ("def double(x):\n    return x\n", DOUBLE_TESTS, ""),
        ("def double(:", DOUBLE_TESTS, ""),
        (DOUBLE, ["assert double(2) == 4"]),
        ("oops", 3, ""),
    ]
    got = cv.verify_batch(jobs, max_parallel=2)
    assert [(r.score, r.status) for r in got] == [
        (1.0, "passed"),
        (0.0, "failed"),
        (0.0, "syntax_error"),
        (1.0, "passed"),
        (0.0, "invalid"),
    ]
    assert got[:4] == cv.verify_batch(jobs[:4], max_parallel=1)


def test_verifiers_module_is_light():
    # load the file on its own (not through the package __init__) in a fresh interpreter
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('verifiers_alone', {V.__file__!r})\n"
        "mod = sys.modules['verifiers_alone'] = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(mod)\n"
        "bad = {'torch', 'transformers', 'math_verify', 'sympy'} & set(sys.modules)\n"
        "assert not bad, bad\n"
        "assert mod.MathVerifier and mod.CodeVerifier\n"
        "import sage_env.text.parsing as P\n"  # the extractors the verifiers read with
        "assert P.extract_boxed('\\\\boxed{3}') == '3'\n"
        "assert not {'torch', 'transformers', 'math_verify', 'sympy'} & set(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# ------------------------------------------------------------------------------------------
# extract_code


def test_extract_code_fenced():
    text = "Here you go:\n```python\ndef f(x):\n    return x\n```\nDone."
    assert extract_code(text) == "def f(x):\n    return x"


def test_extract_code_prefers_last_block_defining_entry_point():
    text = (
        "```python\ndef solve(a):\n    return 1\n```\n"
        "```py\ndef solve(a):\n    return 2\n```\n"
        "Example:\n```\nprint(solve(3))\n```\n"
    )
    assert extract_code(text, entry_point="solve") == "def solve(a):\n    return 2"
    assert extract_code(text) == "print(solve(3))"
    assert extract_code(text, entry_point="missing") == "print(solve(3))"


def test_extract_code_ignores_other_languages():
    text = "```python\nx = 1\n```\n```bash\npip install foo\n```\n```output\n1\n```"
    assert extract_code(text) == "x = 1"
    assert extract_code("```cpp\nint main() {}\n```") is None


def test_extract_code_unclosed_fence_and_indent():
    assert extract_code("```python\ndef f():\n    return 1\n") == "def f():\n    return 1"
    assert extract_code("1. Code:\n   ```python\n   x = 1\n   ```\n") == "x = 1"


def test_extract_code_without_fence():
    assert extract_code("def f(x):\n    return x + 1\n") == "def f(x):\n    return x + 1"
    assert extract_code("The answer is to loop over the list and sum it.") is None
    assert extract_code("") is None
    assert extract_code("   \n ") is None
    assert extract_code(None) is None


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("`python\n def:()x=1")) | st.characters()))
def test_extract_code_never_raises(text):
    out = extract_code(text, entry_point="f")
    assert out is None or isinstance(out, str)


def test_extract_code_skips_a_stray_bare_fence_before_a_tagged_block():
    # seen from SmolLM2 on HumanEval/0: an empty bare fence, then the real block
    text = "```\n\n```python\ndef f(x):\n    return x\n```\n\nThis function returns x."
    assert extract_code(text, "f") == "def f(x):\n    return x"


def test_a_harness_killed_from_outside_is_retried_once_not_scored():
    from sage_env import sandbox

    class FlakyHost:
        """First run: the harness is SIGKILLed by the host; then a real sandbox."""

        def __init__(self):
            self.calls = 0
            self.real = sandbox.SandboxPool(size=0)

        def run_job(self, job):
            self.calls += 1
            if self.calls == 1:
                return sandbox.RawRun(-9, False, False, b"", b"", b"", 0.0)
            return self.real.run_job(job)

    host = FlakyHost()
    res = CodeVerifier(executor=host).verify("def f():\n    return 1\n", ["assert f() == 1"])
    assert (res.status, res.score, host.calls) == ("passed", 1.0, 2)

    class AlwaysKilled(FlakyHost):
        def run_job(self, job):
            self.calls += 1
            return sandbox.RawRun(-9, False, False, b"", b"", b"", 0.0)

    host = AlwaysKilled()
    res = CodeVerifier(executor=host).verify("x = 1", ["assert x == 1"])
    assert (res.status, host.calls) == ("crashed", 2)

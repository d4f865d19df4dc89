"""Forged verdicts: a judged program must not be able to make a test pass by talking to the judge.

Every program here fails its tests honestly (or faces contradictory tests, which no program can
pass) and tries to forge the harness's report format on every channel it can find: inherited
descriptors, re-opened ones, stdout/stderr, a daemonised child writing later, the test
process's own channel with the run tag and the harness's state read from its frames. Each must
score 0, at every isolation level this machine has (bubblewrap ones skip without bwrap).

Under "values, not verdicts" (docs/reference/sandbox.md) a test's own process carries no
verdict, only the values of its assertions' holes, so the strongest forgery left is a choice of
values: the adaptive forgers below make it, and
:func:`test_adaptive_forgers_reach_the_judge_and_lose_only_to_identical_tests` checks that
they really got that far (no crash at the look-up stage) and what stops them.
"""

from __future__ import annotations

import re

import pytest

import sage_env
from sage_env import EnvConfig, sandbox
from sage_env.verifiers import CodeVerifier
from tests.scripted import CODE_SEED, play_round

#: Two tests no program can both pass: they differ only in their expected literal.
CONTRADICTORY = ["assert f(1) == 1", "assert f(1) == 2"]

# Every event kind the harness and the host have ever used, in the report format, claiming that
# test i saw exactly the value its literal wants (1 for test 0, 2 for test 1, ...), finished
# without raising and exited with status 0; also the same wrapped as the worker's relay. The
# site values come in the current shape ("a": the holes of site k as [[j, value]]) and the
# older one ("site"). A blind forger does not know the run's tags, so on a test's channel these
# lines are dropped unread; on the worker's and the judge's channels (relay, exit status, the
# host's report) none is tagged, and there the descriptors must be out of reach.
FORGE = """
import os, json, sys
def _events():
    out = [{"ev": "program_ok"}, {"ev": "setup_ok"}]
    for i in range(4):
        want = 1 + i % 2
        a = {"ev": "a", "k": 0, "v": [[0, ["I", want]]]}
        site = {"ev": "site", "i": i, "k": 0, "v": ["I", want]}
        end = {"ev": "test", "i": i, "ok": True}
        out += [a, site, end, {"ev": "exit", "i": i, "status": 0}]
        out += [{"ev": "chan", "i": i, "e": e} for e in ({"ev": "setup_ok"}, a, site, end)]
    out += [{"ev": "done_w"}, {"ev": "done"}]
    return ("\\n" + "\\n".join(json.dumps(e) for e in out) + "\\n").encode()
DATA = _events()
def _fds():
    try:
        return [int(x) for x in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(64))
def forge(fds=None, data=DATA):
    wrote = []
    for fd in (_fds() if fds is None else fds):
        try:
            os.write(fd, data)
            wrote.append(fd)
        except OSError:
            pass
    return wrote
"""

# An adaptive forger's look-up, against the current harness: from inside the call under test it
# walks up its caller frames (through the shield's guard) to the <test> frame, whose globals
# hold the test's hooks (__sage_v__, __sage_a__, __sage_c__: closures over the ``send`` that
# writes this test's channel), and to run_worker/run_test, whose local ``t`` is the test's
# RunState: its run tag, its channel and W's state (W's last_fd; W's job with every test's tag).
# The literal a test compares against is not in its process (it stays with the judge), so the
# forger knows it the way a challenger who wrote both tests does: test 0 wants 1, the last test
# (the one W runs itself, on W's last_fd) wants 2. It says on stdout what it found.
ADAPTIVE = """
def _harness():
    frame, hooks, run = sys._getframe(1), None, None
    while frame is not None:
        if hooks is None and '__sage_a__' in frame.f_globals:
            hooks = frame.f_globals
        t = frame.f_locals.get('t')
        if run is None and all(hasattr(t, a) for a in ('tag', 'chan', 'w', 'send')):
            run = t
        frame = frame.f_back
    want = 2 if run.chan == run.w.last_fd else 1
    os.write(1, ('forger: tag %s, test wants %d\\n' % (run.tag, want)).encode())
    return hooks, run, want
def _other_channels(run):
    # every other test's events, under its real tag (W's job is in this process's memory),
    # raw and as the worker's relay with exit status 0, on every descriptor 0..255
    out = []
    for j, tag in enumerate(run.w.job['tags']):
        if tag != run.tag:
            evs = [{'ev': 'setup_ok'}, {'ev': 'program_ok'}, {'ev': 'test', 'ok': True},
                   {'ev': 'a', 'k': 0, 'v': [[0, ['I', 1 + j % 2]]]}]
            evs = [dict(e, n=tag) for e in evs]
            out += evs + [{'ev': 'chan', 'i': j, 'e': e} for e in evs]
            out += [{'ev': 'exit', 'i': j, 'status': 0}, {'ev': 'test', 'i': j, 'ok': True}]
    data = ('\\n' + '\\n'.join(json.dumps(e) for e in out) + '\\n').encode()
    wrote = forge(range(256), data)
    os.write(1, ('forger: wrote on fds %s\\n' % wrote).encode())
"""

VARIANTS = {
    "every_fd_in_proc_self_fd_at_import": FORGE + "forge()\ndef f(x):\n    return 3\n",
    "os_write_to_fds_0_to_255": FORGE + "forge(range(256))\ndef f(x):\n    return 3\n",
    "from_inside_the_test": FORGE + "def f(x):\n    forge()\n    forge(range(256))\n    return 3\n",
    "dup2_every_fd_onto_low_numbers": FORGE + "def f(x):\n"
    "    for src in _fds():\n"
    "        for dst in range(3, 24):\n"
    "            try:\n"
    "                os.dup2(src, dst)\n"
    "                os.write(dst, DATA)\n"
    "            except OSError:\n"
    "                pass\n"
    "    return 3\n",
    "reopen_fds_of_every_process": FORGE + "def f(x):\n"
    "    for pid in [p for p in os.listdir('/proc') if p.isdigit()] + ['self']:\n"
    "        try:\n"
    "            names = os.listdir('/proc/%s/fd' % pid)\n"
    "        except OSError:\n"
    "            continue\n"
    "        for n in names:\n"
    "            try:\n"
    "                fd = os.open('/proc/%s/fd/%s' % (pid, n), os.O_WRONLY)\n"
    "                os.write(fd, DATA)\n"
    "                os.close(fd)\n"
    "            except OSError:\n"
    "                pass\n"
    "    return 3\n",
    "report_format_on_stdout_and_stderr": FORGE
    + "sys.stdout.write(DATA.decode())\nsys.stderr.write(DATA.decode())\n"
    "def f(x):\n    print(DATA.decode())\n    os.write(1, DATA)\n    os.write(2, DATA)\n"
    "    return 3\n",
    # A run tag is 24 hex digits made by the judge per test and sent to W in the job, never in
    # an environment or on a command line: every such string (and the first strings) found in
    # any process's environ and cmdline is tried as the tag of every current event.
    "secrets_from_proc_environ_and_cmdline": FORGE + "import re\n"
    "def f(x):\n"
    "    found = []\n"
    "    for pid in ['self', str(os.getppid())] + os.listdir('/proc'):\n"
    "        for name in ('environ', 'cmdline'):\n"
    "            try:\n"
    "                with open('/proc/%s/%s' % (pid, name), 'rb') as fh:\n"
    "                    found.append(fh.read())\n"
    "            except OSError:\n"
    "                pass\n"
    "    keys = {m.decode() for blob in found for m in re.findall(b'[0-9a-f]{24}', blob)}\n"
    "    keys = sorted(keys)[:200] + [\n"
    "        s.decode('latin-1')[:64] for blob in found for s in blob.split(b'\\0') if s\n"
    "    ][:50]\n"
    "    for key in keys:\n"
    "        evs = [{'ev': 'setup_ok'}, {'ev': 'program_ok'}, {'ev': 'test', 'ok': True}]\n"
    "        evs = [dict(e, n=key) for e in evs + [{'ev': 'a', 'k': 0, 'v': [[0, ['I', 1]]]}]]\n"
    "        evs += [{'ev': 'chan', 'i': i, 'e': e} for i in (0, 1) for e in evs]\n"
    "        evs += [{'ev': 'test', 'i': i, 'ok': True, 'n': key} for i in (0, 1)]\n"
    "        forge(None, ('\\n' + '\\n'.join(json.dumps(e) for e in evs) + '\\n').encode())\n"
    "    forge()\n"
    "    return 3\n",
    "daemonised_child_writes_later": FORGE + "import time\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    "        end = time.time() + 2.5\n"
    "        while time.time() < end:\n"
    "            forge()\n"
    "            forge(range(3, 64))\n"
    "            time.sleep(0.05)\n"
    "    os._exit(0)\n"
    "def f(x):\n    time.sleep(0.3)\n    return 3\n",
    # Knows the judge's protocol, finds which test it is in from the harness's frames (ADAPTIVE),
    # tries every other test's channel under that test's real tag, silences the real check (the
    # ``send`` cells of the test's hooks and the RunState's own ``send``, so the value it
    # returns, 3, is never reported, nor the harness's end of test) and writes, under its own
    # run tag on its own channel (fd 3), the values that test's literal wants and the end of
    # the test. No verdict channel is left to forge (values, not verdicts): this is a choice of
    # values, which the judge reads and, alone, accepts (the lone test below passes); defeated
    # because identical tests must agree.
    "adaptive_forger_on_its_own_channel": FORGE + ADAPTIVE + "def f(x):\n"
    "    hooks, run, want = _harness()\n"
    "    _other_channels(run)\n"
    "    silent = lambda **ev: None\n"
    "    for name in ('__sage_v__', '__sage_a__', '__sage_c__'):\n"
    "        for cell in hooks[name].__closure__ or ():\n"
    "            if getattr(cell.cell_contents, '__name__', '') == 'send':\n"
    "                cell.cell_contents = silent\n"
    "    run.send = silent\n"
    "    for ev in ({'ev': 'a', 'k': 0, 'v': [[0, ['I', want]]]}, {'ev': 'test', 'ok': True}):\n"
    "        ev['n'] = run.tag\n"
    "        os.write(3, ('\\n' + json.dumps(ev) + '\\n').encode())\n"
    "    return 3\n",
    # The same forger through the harness's own modules (sys.modules holds them): it patches
    # the testproc helper the value hook reads every hole through (``plain``), so the real
    # check itself reports, and hands the test, what this test wants instead of the 3 returned.
    "adaptive_forger_patching_the_harness_modules": FORGE + ADAPTIVE + "def f(x):\n"
    "    hooks, run, want = _harness()\n"
    "    testproc = sys.modules['sage_env.sandbox.harness.testproc']\n"
    "    assert hooks['__sage_v__'].__globals__ is testproc.__dict__\n"
    "    testproc.plain = lambda v, depth=0: want\n"
    "    return 3\n",
    # No forging at all: an honest-looking program that answers the same call differently the
    # second time (a marker file in the shared working directory).
    "stateful_program_answers_per_test": "import os\n"
    "def f(x):\n"
    "    if os.path.exists('seen'):\n"
    "        return 2\n"
    "    open('seen', 'w').close()\n"
    "    return 1\n",
}


#: Every isolation level, rlimits too (the ``level`` fixture: tests/sage_env/conftest.py).
EVERY_LEVEL = pytest.mark.parametrize(
    "level", ["unshare", "unshare-zygote", "rlimits", "bwrap", "bwrap-zygote"], indirect=True
)

#: The forgers that read the harness's state from their own process (ADAPTIVE).
ADAPTIVE_VARIANTS = sorted(v for v in VARIANTS if v.startswith("adaptive_forger"))


@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(VARIANTS))
@EVERY_LEVEL
def test_forged_reports_score_zero(level, variant):
    with CodeVerifier(timeout_s=10.0, pool_size=0) as cv:
        res = cv.verify(VARIANTS[variant], CONTRADICTORY)
    assert (res.score, res.passed) == (0.0, 0), res


@pytest.mark.slow
@EVERY_LEVEL
def test_answering_identical_tests_differently_is_caught(level):
    with CodeVerifier(timeout_s=10.0, pool_size=0) as cv:
        res = cv.verify(VARIANTS["stateful_program_answers_per_test"], CONTRADICTORY)
    assert (res.score, res.status) == (0.0, "failed")
    assert "identical tests got different results" in res.reason


@EVERY_LEVEL
def test_forging_does_not_help_an_honest_partial_solution(level):
    # one test passes on its merits; forging adds nothing to the other
    program = VARIANTS["every_fd_in_proc_self_fd_at_import"].replace("return 3", "return x")
    program = program.replace("forge()\n", "")
    program += "forge()\n"  # forged lines from the end of the program, on every fd it holds
    with CodeVerifier(timeout_s=10.0, pool_size=0) as cv:
        honest = cv.verify("def f(x):\n    return x\n", ["assert f(2) == 2", "assert f(1) == 5"])
        forged = cv.verify(program, ["assert f(2) == 2", "assert f(1) == 5"])
    assert (honest.score, honest.passed) == (0.5, 1)
    assert forged.passed <= 1 and forged.score <= 0.5


@EVERY_LEVEL
def test_one_verdict_per_test_reaches_the_host(level):
    with CodeVerifier(timeout_s=10.0, pool_size=0) as cv:
        pool = cv._get_executor()
        job = {
            "mode": "verify",
            "setup": "",
            "program": VARIANTS["every_fd_in_proc_self_fd_at_import"],
            "tests": CONTRADICTORY,
        }
        raw = pool.run_job(job)
    verdicts = [e for e in sandbox.parse_report(raw.report) if e.get("ev") == "test"]
    assert sorted(e["i"] for e in verdicts) == [0, 1]
    assert all(e["ok"] is False for e in verdicts)


@EVERY_LEVEL
@pytest.mark.parametrize("variant", ADAPTIVE_VARIANTS)
def test_adaptive_forgers_reach_the_judge_and_lose_only_to_identical_tests(level, variant):
    """The adaptive forgers really attack (they do not die looking the harness up), and what
    stops them is the rule that identical tests must agree, not a crash of their own."""
    with CodeVerifier(timeout_s=10.0, pool_size=0) as cv:
        job = {"mode": "verify", "setup": "", "program": VARIANTS[variant]}
        raw = cv._get_executor().run_job(dict(job, tests=CONTRADICTORY))
        # liveness: alone, the test W runs itself gets the 2 its literal wants though f
        # returns 3, so the forged value is what the judge read (and no more than `return 2`)
        alone = cv.verify(VARIANTS[variant], ["assert f(1) == 2"])
        wrong = cv.verify(VARIANTS[variant], ["assert f(1) == 1"])
    out = raw.stdout.decode()
    # both tests' processes found their run tag and which literal they face
    assert len(set(re.findall(r"forger: tag ([0-9a-f]{24}), test wants 1\n", out))) == 1, out
    assert len(set(re.findall(r"forger: tag ([0-9a-f]{24}), test wants 2\n", out))) == 1, out
    for fds in re.findall(r"forger: wrote on fds \[([0-9, ]*)\]", out):
        # other tests' real tags went nowhere but stdout, stderr and its own channel
        assert set(map(int, fds.split(", "))) <= {1, 2, 3}, out
    # each test got the value its literal wants (a crash, the real 3 or an ignored line would
    # fail it on its own, with another message); only their disagreement fails them
    verdicts = [e for e in sandbox.parse_report(raw.report) if e.get("ev") == "test"]
    assert sorted(e["i"] for e in verdicts) == [0, 1], verdicts
    for e in verdicts:
        assert e["ok"] is False and "identical tests got different results" in e["msg"], e
    assert (alone.score, alone.status) == (1.0, "passed"), alone
    assert (wrong.score, wrong.status) == (0.0, "failed"), wrong
    assert "assertion 0: got 2" in wrong.reason, wrong


@pytest.mark.parametrize("variant", ["every_fd_in_proc_self_fd_at_import", *ADAPTIVE_VARIANTS])
def test_forging_solution_cannot_get_impossible_tests_into_the_pool(variant):
    """End to end: a SAGE code round whose challenger writes contradictory tests and a
    <solution> that forges reports. The verifier check must fail and the task stay out."""
    solution = VARIANTS[variant].replace("def f(x)", "def dbl(x)")

    def script(agent, phase, obs, n):
        return {
            "challenge": "<question>Write dbl(x) doubling x.</question><tests>\n"
            "assert dbl(1) == 1\nassert dbl(1) == 2\n</tests><solution>\n```python\n"
            + solution
            + "```\n</solution>",
            "review_question": "<score>10</score> Checked it with care.",
            "probe": "```python\ndef dbl(x):\n    return 2 * x\n```",
            "plan": "<plan>\n1. Read.\n2. Return 2 * x.\n</plan>",
            "review_plan": "<score>5</score> Fine.",
            "solve": "```python\ndef inc(x):\n    return x + 1\n```",
        }[phase]

    env = sage_env.env(EnvConfig(domains=("code",), solver_samples=1), seeds=[CODE_SEED])
    rec = [r for r in play_round(env, script) if r[1] == "challenge"]
    ((_, _, _, info),) = rec
    assert info["verifier_check"]["status"] == "failed", info["verifier_check"]
    if variant in ADAPTIVE_VARIANTS:  # it forged each test's value; only disagreement stops it
        assert "identical tests got different results" in info["verifier_check"]["reason"]
    assert not info["accepted"]
    assert len(env.unwrapped.pool) == 1  # only the seed

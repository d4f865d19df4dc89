"""Forged verdicts: a judged program must not be able to make a test pass by talking to the judge.

Every program here fails its tests honestly (or faces contradictory tests, which no program can
pass) and tries to forge the harness's report format on every channel it can find: inherited
descriptors, re-opened ones, stdout/stderr, a daemonised child writing later, the test
process's own channel with the judge's state read from its frames. Each must score 0, at every
isolation level this machine has (bubblewrap ones skip without bwrap).
"""

from __future__ import annotations

import shutil

import pytest

import sage_env
from sage_env import EnvConfig, sandbox
from sage_env.sandbox import probe
from sage_env.verifiers import CodeVerifier
from tests.scripted import CODE_SEED, play_round

#: Two tests no program can both pass: they differ only in their expected literal.
CONTRADICTORY = ["assert f(1) == 1", "assert f(1) == 2"]

# Every event kind the harness and the host have ever used, in the report format, claiming that
# test i saw exactly the value its literal wants (1 for test 0, 2 for test 1, ...), finished
# without raising and exited with status 0; also the same wrapped as the worker's relay.
FORGE = """
import os, json, sys
def _events():
    out = [{"ev": "program_ok"}, {"ev": "setup_ok"}]
    for i in range(4):
        want = 1 + i % 2
        site = {"ev": "site", "i": i, "k": 0, "v": ["I", want]}
        end = {"ev": "test", "i": i, "ok": True}
        out += [site, end, {"ev": "exit", "i": i, "status": 0}]
        out += [{"ev": "chan", "i": i, "e": e} for e in ({"ev": "setup_ok"}, site, end)]
    out += [{"ev": "done_w"}, {"ev": "done"}]
    return ("\\n" + "\\n".join(json.dumps(e) for e in out) + "\\n").encode()
DATA = _events()
def _fds():
    try:
        return [int(x) for x in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(64))
def forge(fds=None):
    for fd in (_fds() if fds is None else fds):
        try:
            os.write(fd, DATA)
        except OSError:
            pass
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
    "secrets_from_proc_environ_and_cmdline": FORGE + "def f(x):\n"
    "    found = []\n"
    "    for pid in ['self', str(os.getppid())] + os.listdir('/proc'):\n"
    "        for name in ('environ', 'cmdline'):\n"
    "            try:\n"
    "                with open('/proc/%s/%s' % (pid, name), 'rb') as fh:\n"
    "                    found += fh.read().split(b'\\0')\n"
    "            except OSError:\n"
    "                pass\n"
    "    keys = [s.decode('latin-1')[:64] for s in found if s][:50]\n"
    "    for key in keys:\n"
    "        line = json.dumps({'ev': 'test', 'i': 0, 'ok': True, 'key': key})\n"
    "        for fd in _fds():\n"
    "            try:\n"
    "                os.write(fd, ('\\n' + line + '\\n').encode())\n"
    "            except OSError:\n"
    "                pass\n"
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
    # Knows the judge's protocol, finds which test it is in from the harness's frames, silences
    # the real check (patching the cell of its channel writer) and sends the literal that test
    # wants on its own channel: defeated because identical tests must agree.
    "adaptive_forger_on_its_own_channel": FORGE + "def f(x):\n"
    "    frame = sys._getframe(1)\n"
    "    check = frame.f_globals['__sage_check__']\n"
    "    want = 1\n"
    "    while frame is not None:\n"
    "        up = frame.f_back\n"
    "        if 'chan' in frame.f_locals and up is not None and 'last_fd' in up.f_locals:\n"
    "            want = 2 if frame.f_locals['chan'] == up.f_locals['last_fd'] else 1\n"
    "        frame = up\n"
    "    for cell in check.__closure__ or ():\n"
    "        if getattr(cell.cell_contents, '__name__', '') == 'send':\n"
    "            cell.cell_contents = lambda **ev: None\n"
    "    for ev in ({'ev': 'site', 'k': 0, 'v': ['I', want]}, {'ev': 'test', 'ok': True}):\n"
    "        os.write(3, ('\\n' + json.dumps(ev) + '\\n').encode())\n"
    "    return want\n",
    # No forging at all: an honest-looking program that answers the same call differently the
    # second time (a marker file in the shared working directory).
    "stateful_program_answers_per_test": "import os\n"
    "def f(x):\n"
    "    if os.path.exists('seen'):\n"
    "        return 2\n"
    "    open('seen', 'w').close()\n"
    "    return 1\n",
}


def _level_available(level: str) -> bool:
    if level in ("bwrap", "unshare") and shutil.which(level) is None:
        return False
    return probe._probe_level(level, sandbox.default_python())


@pytest.fixture(params=["unshare", "unshare-zygote", "rlimits", "bwrap", "bwrap-zygote"])
def level(request, monkeypatch):
    """Force an isolation level (and the zygote fast path on or off) for one test."""
    name = request.param
    base = name.split("-")[0]
    if base == "bwrap" and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    if not _level_available(base):
        pytest.skip(f"isolation level {base} is unavailable here")
    sandbox.close_pools()
    monkeypatch.setattr(probe, "_LEVEL", base)
    monkeypatch.setenv("SAGE_SANDBOX_ZYGOTE", "1" if name.endswith("-zygote") else "0")
    if name.endswith("-zygote") and not sandbox.zygotes_available():
        pytest.skip("the zygote fast path needs root and a pids cgroup")
    yield name
    sandbox.close_pools()


@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_forged_reports_score_zero(level, variant):
    with CodeVerifier(timeout_s=10.0, pool_size=0) as cv:
        res = cv.verify(VARIANTS[variant], CONTRADICTORY)
    assert (res.score, res.passed) == (0.0, 0), res


@pytest.mark.slow
def test_answering_identical_tests_differently_is_caught(level):
    with CodeVerifier(timeout_s=10.0, pool_size=0) as cv:
        res = cv.verify(VARIANTS["stateful_program_answers_per_test"], CONTRADICTORY)
    assert (res.score, res.status) == (0.0, "failed")
    assert "identical tests got different results" in res.reason


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


@pytest.mark.parametrize(
    "variant", ["every_fd_in_proc_self_fd_at_import", "adaptive_forger_on_its_own_channel"]
)
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
    assert not info["accepted"]
    assert len(env.unwrapped.pool) == 1  # only the seed

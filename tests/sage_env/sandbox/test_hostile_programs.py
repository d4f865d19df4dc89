"""Hostile-program suite for sage_env.sandbox and CodeVerifier, plus dataset correctness.

Every hostile test asserts the exact status AND that the host is unharmed: no process of the
sandbox uids left behind, no file written outside the sandbox, the listener never accepted.
Fork and memory bombs only run after a harmless probe has shown that the uid drop and the limits
are in force, and only inside the sandbox, under short timeouts.
"""

from __future__ import annotations

import ast
import gzip
import json
import os
import socket
import threading
import time

import pytest

from sage_env import sandbox
from sage_env.sandbox.host import launch
from sage_env.verifiers import CodeVerifier
from tests.data_paths import RAW_DATA

ROOT = os.geteuid() == 0
LEVEL = sandbox.isolation_level()
DATA = RAW_DATA / "code"


def _sandbox_pids() -> set[int]:
    """Live (non-zombie) processes owned by the sandbox uids."""
    uids = {sandbox.SANDBOX_UID, sandbox.HARNESS_UID}
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as fh:
                fields = dict(line.split(":", 1) for line in fh.read().splitlines() if ":" in line)
        except OSError:
            continue
        if fields.get("State", "").strip()[:1] in ("Z", "X"):
            continue
        if int(fields.get("Uid", "0").split()[0]) in uids and not _other_hosts(entry):
            found.add(int(entry))
    return found


def _other_hosts(pid: str) -> bool:
    """Whether ``pid`` belongs to ANOTHER host process (a concurrent session on a shared
    machine), so it is not this test's leftover: it sits in another host's sandbox cgroup
    (ours are named ``r<our pid>-N``), or it hangs below a live process tree that does not
    contain this process. An orphan (parent 1) or anything below us counts as ours."""
    try:
        with open(f"/proc/{pid}/cgroup") as fh:
            text = fh.read()
    except OSError:
        return False
    owners = {
        line.split("/sage-sandbox/r", 1)[1].split("-", 1)[0]
        for line in text.splitlines()
        if "/sage-sandbox/r" in line
    }
    if owners:
        return str(os.getpid()) not in owners
    chain, cur = [], int(pid)
    while cur > 1 and len(chain) < 64:
        try:
            with open(f"/proc/{cur}/stat") as fh:
                cur = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        chain.append(cur)
    return bool(chain) and chain[0] != 1 and os.getpid() not in chain


def _our_cgroups() -> list[str]:
    out = []
    for ctrl in ("pids", "memory"):
        base = os.path.join("/sys/fs/cgroup", ctrl, "sage-sandbox")
        if os.path.isdir(base):
            out += [n for n in os.listdir(base) if n.startswith(f"r{os.getpid()}-")]
    return out


@pytest.fixture
def host_unharmed():
    """Baseline the sandbox-uid processes; after the test, require no new ones to remain."""
    sandbox.close_pools()  # idle pre-started harnesses of other verifiers are not leftovers
    before = _sandbox_pids()
    yield
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = _sandbox_pids() - before
        if not left:
            break
        time.sleep(0.05)
    assert not (_sandbox_pids() - before), "sandboxed processes survived the run"


@pytest.fixture(scope="module")
def limits_verified():
    """A harmless probe: the uid is dropped and the process limit is in force."""
    if not ROOT:
        pytest.skip("bomb tests need the root-only uid drop / cgroups to be contained")
    probe = (
        "import os, resource\n"
        "print(os.getuid(), resource.getrlimit(resource.RLIMIT_NPROC)[0])\n"
        "kids = []\n"
        "try:\n"
        "    for _ in range(200):\n"
        "        pid = os.fork()\n"
        "        if pid == 0:\n"
        "            import time; time.sleep(5); os._exit(0)\n"
        "        kids.append(pid)\n"
        "except OSError:\n"
        "    pass\n"
        "print(len(kids))\n"
    )
    r = sandbox.run(probe, timeout_s=5, max_processes=16)
    uid, _nproc = r.stdout.split()[:2]
    assert int(uid) == sandbox.SANDBOX_UID, r
    assert int(r.stdout.split()[2]) < 20, r  # the limit stopped it
    return True


def run(code: str, **kw) -> sandbox.SandboxResult:
    kw.setdefault("timeout_s", 3.0)
    return sandbox.run(code, **kw)


# ------------------------------------------------------------------------------------------
# isolation level and basics


def test_isolation_level_is_probed_and_logged():
    assert LEVEL in sandbox.ISOLATION_LEVELS
    assert sandbox.isolation_level() == LEVEL


def test_plain_program_passes(host_unharmed):
    r = run("print('hello')")
    assert (r.status, r.stdout) == ("passed", b"hello\n")
    assert r.isolation == LEVEL


@pytest.mark.skipif(not ROOT, reason="uid drop only as root")
def test_runs_as_unprivileged_uid_in_private_dir(host_unharmed):
    r = run("import os\nprint(os.getuid(), os.getgid(), os.listdir('.'), sorted(os.environ))")
    assert r.status == "passed"
    assert r.stdout.decode().split(" ", 2)[:2] == ["65534", "65534"]
    assert "[] ['LANG', 'PATH']" in r.stdout.decode()


def test_syntax_error(host_unharmed):
    assert run("def f(:\n").status == "syntax_error"


def test_exception_and_exit_codes(host_unharmed):
    assert run("raise ValueError('x')").status == "failed"
    assert run("import sys\nsys.exit(3)").status == "failed"
    assert run("import sys\nsys.exit(0)").status == "passed"


# ------------------------------------------------------------------------------------------
# hostile programs


def test_fork_bomb(limits_verified, host_unharmed):
    start = time.monotonic()
    r = run("import os\nwhile True:\n    os.fork()\n", timeout_s=5)
    assert r.status == "blocked", r
    assert time.monotonic() - start < 8


@pytest.mark.slow
def test_fork_bomb_with_spinning_children(limits_verified, host_unharmed):
    code = "import os\nfor _ in range(10000):\n    try:\n        os.fork()\n    except OSError:\n        pass\nwhile True:\n    pass\n"  # noqa: E501
    r = run(code, timeout_s=2)
    assert r.status == "timeout", r


def test_memory_bomb(limits_verified, host_unharmed):
    assert run("x = bytearray(10**10)", memory_mb=256).status == "memory"


def test_memory_bomb_gradual(limits_verified, host_unharmed):
    code = "xs = []\nwhile True:\n    xs.append(bytearray(32 * 2**20))\n"
    assert run(code, memory_mb=256).status == "memory"


@pytest.mark.slow
@pytest.mark.skipif(not sandbox.cgroups_available()["memory"], reason="needs a memory cgroup")
def test_memory_bomb_across_processes_hits_the_cgroup(limits_verified, host_unharmed):
    # each process stays under RLIMIT_AS; together they exceed the run's memory cgroup
    code = (
        "import os, time\n"
        "for _ in range(6):\n"
        "    if os.fork() == 0:\n"
        "        x = bytearray(150 * 2**20)\n"
        "        time.sleep(3)\n"
        "        os._exit(0)\n"
        "for _ in range(6):\n"
        "    os.wait()\n"
    )
    assert run(code, memory_mb=200, timeout_s=6).status == "memory"


@pytest.mark.slow
def test_infinite_loop(host_unharmed):
    # stopped by its CPU limit (RLIMIT_CPU) or, on a machine too busy to give it 1 s of CPU
    # within the backstop, by the wall clock: a timeout either way, and no duration asserted
    r = run("while True:\n    pass\n", timeout_s=1)
    assert r.status == "timeout", r


@pytest.mark.slow
def test_busy_threads(host_unharmed):
    code = (
        "import threading\n"
        "def spin():\n    while True:\n        pass\n"
        "for _ in range(8):\n    threading.Thread(target=spin).start()\n"
    )
    assert run(code, timeout_s=1.5).status == "timeout"


@pytest.mark.slow
def test_ignores_sigterm(host_unharmed):
    code = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.01)\n"  # noqa: E501
    assert run(code, timeout_s=1).status == "timeout"


def test_disk_fill_one_file(host_unharmed):
    code = "with open('big', 'wb') as fh:\n    while True:\n        fh.write(b'x' * 2**20)\n"
    r = run(code)
    assert r.status == "blocked", r  # RLIMIT_FSIZE: EFBIG


@pytest.mark.skipif(LEVEL == "rlimits", reason="a size-capped working directory needs a mount ns")
def test_disk_fill_many_files(host_unharmed):
    code = (
        "for i in range(10000):\n"
        "    with open(f'f{i}', 'wb') as fh:\n"
        "        fh.write(b'x' * 8 * 2**20)\n"
    )
    r = run(code, timeout_s=10)
    assert r.status == "blocked", r  # ENOSPC from the tmpfs cap


@pytest.mark.skipif(not ROOT, reason="as non-root the program may write where its user may")
def test_write_outside_temp_dir(host_unharmed):
    target = "/etc/sage_sandbox_evil"
    r = run(f"open({target!r}, 'w').write('pwned')")
    assert r.status == "blocked", r
    assert not os.path.exists(target)


@pytest.mark.skipif(LEVEL == "rlimits", reason="host dirs are protected only in a mount namespace")
def test_write_to_world_writable_host_dir(host_unharmed, tmp_path):
    target = "/var/tmp/sage_sandbox_evil"
    r = run(f"open({target!r}, 'w').write('pwned')")
    assert r.status == "blocked", r
    assert not os.path.exists(target)
    # a host file the sandbox uid could write by its mode is read-only too (the whole root is)
    open_file = f"/var/tmp/sage_sandbox_open_{os.getpid()}"
    with open(open_file, "w"):
        pass
    try:
        os.chmod(open_file, 0o666)
        r = run(f"open({open_file!r}, 'a').write('pwned')")
        assert r.status == "blocked" and "Read-only" in r.reason, r
        assert os.path.getsize(open_file) == 0
    finally:
        os.unlink(open_file)


TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", ".")


@pytest.mark.skipif(LEVEL == "rlimits", reason="private temp dirs need a mount namespace")
def test_temp_dirs_are_private_to_the_run(host_unharmed):
    """Files a run writes to any temp dir reach neither the host nor the next run."""
    name = f"sage_sandbox_left_{os.getpid()}"
    write = (
        "import os\n"
        f"for d in {TEMP_DIRS!r}:\n"
        "    try:\n"
        f"        open(os.path.join(d, {name!r}), 'w').write('x')\n"
        "        print(d, 'written')\n"
        "    except OSError as exc:\n"
        "        print(d, exc.errno)\n"
    )
    look = (
        "import os\n"
        f"print([d for d in {TEMP_DIRS!r} if os.path.exists(os.path.join(d, {name!r}))])\n"
    )
    first = run(write)
    assert first.status == "passed", first
    lines = dict(line.split(" ", 1) for line in first.stdout.decode().splitlines())
    # private writable /tmp and cwd; the host's /var/tmp and /run/lock are read-only (EROFS)
    assert (lines["/tmp"], lines["."], lines["/var/tmp"]) == ("written", "written", "30"), lines
    second = run(look)
    assert (second.status, second.stdout) == ("passed", b"[]\n"), second
    assert not [d for d in TEMP_DIRS[:-1] if os.path.exists(os.path.join(d, name))]


def test_environment_secrets_do_not_leak(monkeypatch, host_unharmed):
    monkeypatch.setenv("SAGE_FAKE_SECRET", "hunter2-s3cr3t")
    code = (
        "import os\n"
        "print(os.environ.get('SAGE_FAKE_SECRET'))\n"
        f"for path in ['/proc/{os.getpid()}/environ', '/proc/1/environ', '/proc/self/environ']:\n"
        "    try:\n"
        "        print(open(path, 'rb').read())\n"
        "    except OSError as exc:\n"
        "        print(type(exc).__name__)\n"
    )
    r = run(code)
    assert r.status == "passed"
    assert b"hunter2" not in r.stdout + r.stderr
    assert b"None" in r.stdout


@pytest.mark.skipif(LEVEL == "rlimits", reason="no network namespace at this isolation level")
def test_socket_to_local_listener_is_blocked(host_unharmed):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    accepted = []

    def accept():
        try:
            accepted.append(listener.accept())
        except OSError:
            pass

    t = threading.Thread(target=accept)
    t.start()
    try:
        r = run(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)")
        assert r.status == "blocked", r
        # bypass the audit hook with raw libc connect(): the namespace still stops it
        raw = (
            "import ctypes, socket, struct\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "fd = libc.socket(2, 1, 0)\n"
            f"addr = struct.pack('<HH4s8x', 2, socket.htons({port}), bytes([127, 0, 0, 1]))\n"
            "rc = libc.connect(fd, addr, len(addr))\n"
            "print(rc, ctypes.get_errno())\n"
            "assert rc == 0\n"
        )
        r = run(raw)
        assert r.status == "failed", r
    finally:
        t.join(3)
        listener.close()
    assert accepted == []


@pytest.mark.skipif(not ROOT, reason="the harness runs under its own uid only as root")
def test_killing_the_parent_is_refused(host_unharmed):
    r = run("import os\nos.kill(os.getppid(), 9)\nprint('still here')")
    assert r.status == "blocked", r


@pytest.mark.skipif(not ROOT, reason="the harness runs under its own uid only as root")
def test_killing_everything_it_can(host_unharmed):
    host_pid = os.getpid()
    r = run("import os\nos.kill(-1, 9)\nprint('survived')")
    # kill(-1) reaches only what the sandbox uid may signal (in bwrap's PID namespace:
    # nothing, so it survives; under `unshare -n` alone the call finds no process to signal)
    if r.isolation == "bwrap":
        assert (r.status, r.stdout) == ("passed", b"survived\n"), r
    else:
        assert r.status in ("passed", "failed") and "Permission" not in r.reason, r
    assert os.getpid() == host_pid


@pytest.mark.skipif(not ROOT, reason="uid drop only as root")
def test_ptrace_of_the_harness_is_refused(host_unharmed):
    r = run("import os\nopen(f'/proc/{os.getppid()}/mem', 'rb').read(1)")
    assert r.status == "blocked", r


@pytest.mark.skipif(not ROOT, reason="uid drop only as root")
def test_regaining_root_is_refused(host_unharmed):
    assert run("import os\nos.setuid(0)").status == "blocked"
    assert run("open('/etc/shadow').read()").status == "blocked"


def test_daemonised_child_is_killed(host_unharmed):
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.execv('/bin/sleep', ['sleep', '30'])\n"
        "    os._exit(0)\n"
        "time.sleep(0.3)\n"
        "print('parent done')\n"
    )
    start = time.monotonic()
    r = run(code, timeout_s=10)
    assert r.status == "passed", r
    assert time.monotonic() - start < 5
    sandbox.close_pools()  # a zygote's cgroup lives as long as the zygote
    assert _our_cgroups() == [] or not sandbox.cgroups_available()["pids"]


def test_100mb_of_output(host_unharmed):
    start = time.monotonic()
    r = run("import sys\nfor _ in range(100):\n    sys.stdout.write('x' * 2**20)\n", timeout_s=20)
    assert r.status == "passed", r
    assert len(r.stdout) == 65536
    assert time.monotonic() - start < 15


def test_segfault_via_ctypes(host_unharmed):
    assert run("import ctypes\nctypes.string_at(0)").status == "crashed"


@pytest.mark.slow
def test_deep_recursion(host_unharmed):
    assert run("def f(n):\n    return f(n + 1)\nf(0)").status == "failed"  # RecursionError
    # recursion in C (repr of a deeply nested list) with the limit lifted overflows the capped
    # C stack: SIGSEGV
    code = "import sys\nsys.setrecursionlimit(10**8)\nx = []\nfor _ in range(10**6):\n    x = [x]\nrepr(x)"  # noqa: E501
    r = run(code, timeout_s=10)
    assert r.status == "crashed", r


def test_too_many_open_files(host_unharmed):
    r = run("fs = [open('/dev/null') for _ in range(1000)]")
    assert r.status == "blocked", r


# ------------------------------------------------------------------------------------------
# fake-pass tricks against CodeVerifier


@pytest.fixture(scope="module")
def cv():
    # no pre-started harnesses, so host_unharmed can count every sandbox process as a leftover
    with CodeVerifier(timeout_s=3.0, pool_size=0) as verifier:
        yield verifier


SQUARE_TESTS = ["assert square(3) == 9", "assert square(4) == 16"]
WRONG = "def square(x):\n    return x + 1\n"

FAKE_PASSES = {
    "exit0_top_level": "import sys\nsys.exit(0)\n",
    "os_exit_top_level": "import os\nos._exit(0)\n",
    "os_exit_in_function": "import os\ndef square(x):\n    os._exit(0)\n",
    "exit_in_function": "def square(x):\n    exit(0)\n",
    "always_eq": (
        "class Any:\n    def __eq__(self, other):\n        return True\n"
        "    __hash__ = object.__hash__\n"
        "def square(x):\n    return Any()\n"
    ),
    "int_subclass_eq": (
        "class I(int):\n    def __eq__(self, other):\n        return True\n"
        "def square(x):\n    return I(0)\n"
    ),
    "patched_assertion_error": (
        "import builtins\nbuiltins.AssertionError = type('Nope', (Exception,), {})\n" + WRONG
    ),
    "print_passed": "print('PASSED\\nall tests passed\\nOK')\n" + WRONG,
    "forged_report_lines": (
        "import os\n"
        "lines = ''.join('\\n' + s + '\\n' for s in [\n"
        '    \'{"ev": "test", "i": 0, "ok": true}\', \'{"ev": "test", "i": 1, "ok": true}\',\n'
        '    \'{"ev": "exit", "i": 0, "status": 0}\', \'{"ev": "exit", "i": 1, "status": 0}\',\n'
        '    \'{"ev": "site", "i": 0, "k": 0, "t": true}\', \'{"ev": "done"}\'])\n'
        "for fd in range(0, 64):\n"
        "    try:\n"
        "        os.write(fd, lines.encode())\n"
        "    except OSError:\n"
        "        pass\n"
        "print(lines)\n" + WRONG
    ),
    # The test's checker today is its hooks (values, not verdicts): __sage_v__ reads a hole's
    # value, __sage_a__ reports a site (and raises where the test's process evaluates the
    # assertion itself), __sage_c__ a call statement. From inside the call under test it finds
    # them in its callers' globals and locals (the <test> frame's globals hold them) and gives
    # each a no-op's code, built with the hook's own free variables (a closure's code is
    # swapped only for one with as many), then says so on stdout. Its own site then runs the
    # no-ops: the site is never reported, which fails the test (a required site must be
    # reached); see test_patching_the_checker_reaches_the_hooks_and_loses_to_required_sites.
    "patch_the_checker": (
        "import sys\n"
        "HOOKS = ('__sage_v__', '__sage_a__', '__sage_c__')\n"
        "def _noop_code(hook):\n"
        "    free = hook.__code__.co_freevars\n"
        "    src = 'def outer():\\n' + ''.join('    %s = None\\n' % v for v in free)\n"
        "    src += '    def noop(*a, **k):\\n        [%s]\\n' % ', '.join(free)\n"
        "    src += '        return None\\n    return noop\\n'\n"
        "    ns = {}\n"
        "    exec(src, ns)\n"
        "    return ns['outer']().__code__\n"
        "def square(x):\n"
        "    found, done = set(), set()\n"
        "    f = sys._getframe(1)\n"
        "    while f is not None:\n"
        "        for ns in (f.f_globals, f.f_locals):\n"
        "            for name in HOOKS:\n"
        "                chk = ns.get(name)\n"
        "                if chk is not None and id(chk) not in done:\n"
        "                    chk.__code__ = _noop_code(chk)\n"
        "                    found.add(name)\n"
        "                    done.add(id(chk))\n"
        "        f = f.f_back\n"
        "    print('patched the checker: %s' % ' '.join(sorted(found)), flush=True)\n"
        "    return 0\n"
    ),
    "kill_judge_then_exit": (
        "import os, signal\n"
        "try:\n    os.kill(os.getppid(), signal.SIGKILL)\nexcept OSError:\n    pass\n" + WRONG
    ),
    "fork_and_report_from_child": (
        "import os\n"
        "def square(x):\n"
        "    if os.fork() == 0:\n"
        "        return x * x if False else 0\n"
        "    os.wait()\n"
        "    os._exit(0)\n"
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FAKE_PASSES))
def test_fake_pass_tricks_score_zero(cv, name, host_unharmed):
    r = cv.verify(FAKE_PASSES[name], SQUARE_TESTS)
    assert (r.score, r.passed) == (0.0, 0), (name, r)
    expected = "blocked" if name == "kill_judge_then_exit" and not ROOT else "failed"
    assert r.status == expected, (name, r)


@pytest.mark.parametrize(
    "level", ["unshare", "unshare-zygote", "rlimits", "bwrap", "bwrap-zygote"], indirect=True
)
def test_patching_the_checker_reaches_the_hooks_and_loses_to_required_sites(level):
    """patch_the_checker really patches what checks it today (it does not look up a name the
    harness no longer has and return 0 untouched): its marker and the judge's reason say so."""
    program = FAKE_PASSES["patch_the_checker"]
    with CodeVerifier(timeout_s=3.0, pool_size=0) as verifier:
        job = {"mode": "verify", "setup": "", "program": program, "tests": SQUARE_TESTS}
        raw = verifier._get_executor().run_job(job)
        res = verifier.verify(program, SQUARE_TESTS)
    out = raw.stdout.decode()
    # each test's process found all three hooks and swapped their code
    assert out.count("patched the checker: __sage_a__ __sage_c__ __sage_v__\n") == 2, out
    # and its own site ran the no-ops: no value, no site reported (the real hooks would have
    # reported 0: "assertion 0: got 0"); what fails it is that its required site went unseen
    verdicts = [e for e in sandbox.parse_report(raw.report) if e.get("ev") == "test"]
    assert sorted(e["i"] for e in verdicts) == [0, 1], verdicts
    for e in verdicts:
        assert (e["ok"], e.get("msg")) == (False, "assertion 0 was never checked"), e
    assert (res.score, res.status) == (0.0, "failed"), res
    assert res.reason.endswith("test 0: AssertionError: assertion 0 was never checked"), res


def test_right_answer_still_passes(cv):
    r = cv.verify("def square(x):\n    return x * x\n", SQUARE_TESTS)
    assert (r.score, r.status) == (1.0, "passed")


def test_subclasses_of_builtins_compare_by_value(cv):
    program = "import collections\ndef count(xs):\n    return collections.Counter(xs)\n"
    r = cv.verify(program, ["assert count([1, 1, 2]) == {1: 2, 2: 1}"])
    assert r.status == "passed", r


def test_truthiness_asserts(cv):
    program = "import re\ndef m(s):\n    return re.search('a', s)\n"
    assert cv.verify(program, ["assert m('cat')", "assert not m('dog')"]).status == "passed"
    fake = "class T:\n    def __bool__(self):\n        return True\ndef m(s):\n    return T()\n"
    assert cv.verify(fake, ["assert m('cat')"]).status == "failed"


def test_network_in_a_test_is_blocked(cv):
    r = cv.verify("import socket\n", ["socket.create_connection(('127.0.0.1', 9))"])
    assert (r.score, r.status) == (0.0, "blocked") or LEVEL == "rlimits"


# ------------------------------------------------------------------------------------------
# correctness on the benchmarks


def _load(name: str) -> list[dict]:
    path = DATA / name
    if not path.exists():
        pytest.skip(f"needs {path} (set $SAGE_ENV_DATA; learners/data/benchmarks/README.md)")
    with gzip.open(path, "rt") as fh:
        return [json.loads(line) for line in fh]


def humaneval_jobs(problems: list[dict], body: str | None = None) -> list[tuple]:
    jobs = []
    for p in problems:
        program = p["prompt"] + (p["canonical_solution"] if body is None else body)
        jobs.append((program, [p["test"] + f"\ncheck({p['entry_point']})\n"], ""))
    return jobs


def mbpp_tests(assertion: str) -> list[str]:
    """One test per assert; the statements before it (imports) are repeated in each."""
    tree = ast.parse(assertion)
    prefix, tests = [], []
    for node in tree.body:
        src = ast.get_source_segment(assertion, node)
        if isinstance(node, ast.Assert):
            tests.append("\n".join(prefix + [src]))
        else:
            prefix.append(src)
    return tests


def mbpp_jobs(problems: list[dict], body: str | None = None) -> list[tuple]:
    jobs = []
    for p in problems:
        if body is None:
            program = p["canonical_solution"]
        else:
            program = body.format(entry=p["entry_point"])
        # MBPP+'s evaluation imports math for its isclose-style assertions
        jobs.append((program, mbpp_tests(p["assertion"]), "import math"))
    return jobs


@pytest.fixture(scope="module")
def fast_cv():
    with CodeVerifier(timeout_s=20.0, pool_size=4) as verifier:
        yield verifier


@pytest.mark.slow
def test_humaneval_canonical_solutions_pass_and_wrong_ones_fail(fast_cv):
    problems = _load("HumanEval.jsonl.gz")
    assert len(problems) == 164
    got = fast_cv.verify_batch(humaneval_jobs(problems), max_parallel=4)
    bad = [(p["task_id"], r) for p, r in zip(problems, got) if r.status != "passed"]
    assert bad == [], bad[:3]
    wrong = fast_cv.verify_batch(humaneval_jobs(problems, "    return None\n"), max_parallel=4)
    assert [p["task_id"] for p, r in zip(problems, wrong) if r.score > 0] == []
    fake = "    class _Any:\n        __eq__ = lambda s, o: True\n    return _Any()\n"
    faked = fast_cv.verify_batch(humaneval_jobs(problems, fake), max_parallel=4)
    assert [p["task_id"] for p, r in zip(problems, faked) if r.score > 0] == []


@pytest.mark.slow
def test_mbppplus_canonical_solutions_pass_base_tests_and_wrong_ones_fail(fast_cv):
    problems = _load("MbppPlus-v0.2.0.jsonl.gz")
    assert len(problems) == 378
    got = fast_cv.verify_batch(mbpp_jobs(problems), max_parallel=4)
    bad = [(p["task_id"], r) for p, r in zip(problems, got) if r.status != "passed"]
    assert bad == []
    wrong = "def {entry}(*args, **kwargs):\n    return None\n"
    got = fast_cv.verify_batch(mbpp_jobs(problems, wrong), max_parallel=4)
    assert [p["task_id"] for p, r in zip(problems, got) if r.status == "passed"] == []


def test_a_pre_started_harness_outlives_the_thread_that_started_it():
    """bwrap arms PR_SET_PDEATHSIG, which fires when the starting THREAD exits (a pool refill
    thread): the cause of rare "sandbox harness died (exit -9)" results under load."""
    started = []

    def start():
        started.append(launch.HarnessProcess(sandbox.SandboxConfig(timeout_s=5.0)))
        time.sleep(0.3)  # long enough for bwrap to arm its parent-death signal

    worker = threading.Thread(target=start)
    worker.start()
    worker.join()
    harness = started[0]
    try:
        time.sleep(0.2)
        assert harness.proc.poll() is None
        raw = harness.run({"mode": "run", "setup": "", "program": "print('warm')", "tests": []})
        assert raw.stdout == b"warm\n"
    finally:
        harness.cleanup()


PATCHED_BUILTINS = {
    "bool": "import builtins\nbuiltins.bool = lambda *a: True\n",
    "abs": "import builtins\nbuiltins.abs = lambda x: 0\n",
    "isinstance": "import builtins\nbuiltins.isinstance = lambda *a: True\n",
    "namespace": "__builtins__ = {'abs': lambda x: 0, 'bool': lambda *a: True}\n",
}


@pytest.mark.parametrize("name", sorted(PATCHED_BUILTINS))
def test_patched_builtins_fool_neither_tests_nor_checks(cv, name):
    """Each test gets the builtins as they were before the program ran."""
    program = PATCHED_BUILTINS[name] + "def f(x):\n    return 0\n"
    tests = ["assert f(2) == 2**3", "assert abs(f(0.5) - 0.125) < 1e-6", "assert f(1) == 1"]
    r = cv.verify(program, tests)
    assert (r.passed, r.status) == (0, "failed"), r
    right = cv.verify("def f(x):\n    return x**3\n", tests)
    assert (right.passed, right.status) == (3, "passed"), right

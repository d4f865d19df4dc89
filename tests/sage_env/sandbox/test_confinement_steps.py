"""The sandbox worker's confinement steps, each alone (issue 36 item 5).

``sage_env.sandbox.harness.worker.WORKER_STEPS`` (the worker W) and
``sage_env.sandbox.harness.testproc.TEST_STEPS`` (each test's process) are applied in the order
docs/reference/sandbox.md gives ("Confinement steps"); these tests pin that order to the
document and check what single steps leave behind. A step that cannot be undone (a uid drop,
a seccomp filter, an audit hook, closed descriptors) runs in a fresh interpreter of its own.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sage_env.sandbox.harness import testproc, worker
from sage_env.sandbox.harness.report import REFERENCE_MARKER

ROOT = Path(__file__).resolve().parents[3]
_REAL_STEPS = worker.WORKER_STEPS


def _documented(title: str) -> list[str]:
    """The function names of the numbered list under ``title`` in docs/reference/sandbox.md."""
    text = (ROOT / "docs" / "reference" / "sandbox.md").read_text(encoding="utf-8")
    section = text.split("## Confinement steps", 1)[1].split("\n## ", 1)[0]
    block = section.split(title, 1)[1].split("\n\n", 2)[1]
    return re.findall(r"^\d+\. `(\w+)`", block, re.M)


def test_the_worker_steps_are_in_the_documented_order():
    names = [step.__name__ for step in worker.WORKER_STEPS]
    assert names == _documented("The worker W")
    assert names.index("drop_privileges") < names.index("read_job")  # no privilege left
    assert names.index("install_seccomp") > names.index("forbid_new_privileges")
    assert names[-1] == "compile_job"  # every limit is on before anything is compiled


def test_the_test_process_steps_are_in_the_documented_order():
    names = [step.__name__ for step in testproc.TEST_STEPS]
    assert names == _documented("Each test's process")
    assert names[0] == "keep_own_channel"  # before setup, let alone the program, runs


def test_every_step_is_a_module_function_saying_what_it_defends_against():
    for step in worker.WORKER_STEPS + testproc.TEST_STEPS:
        assert step.__qualname__ == step.__name__  # module level: no closure state
        doc = (step.__doc__ or "").strip().splitlines()
        assert doc and len(doc[0]) > 20, step.__name__


def test_run_worker_applies_the_steps_in_order_and_stops_where_one_says(monkeypatch):
    seen = []

    def fake(name, stop=False):
        def step(st):
            seen.append((name, type(st).__name__))
            return stop

        return step

    steps = [fake(s.__name__) for s in worker.WORKER_STEPS[:-1]]
    monkeypatch.setattr(worker, "WORKER_STEPS", (*steps, fake("last", True)))
    assert worker.run_worker(-1, -1, -1, -1) is None  # the last step ended the job
    assert [n for n, _ in seen] == [s.__name__ for s in _REAL_STEPS[:-1]] + ["last"]
    assert {kind for _, kind in seen} == {"WorkerState"}


def _child(body: str, stdin: bytes = b"") -> dict:
    """Run ``body`` in a fresh interpreter (with ``worker``, ``testproc``, ``st`` = a fresh
    WorkerState and ``out``, a dict printed as JSON at the end); return ``out``."""
    code = (
        "import json, os, sys\n"
        "from sage_env.sandbox.harness import worker, testproc\n"
        "st = worker.WorkerState(-1, -1, -1, -1)\n"
        "out = {}\n" + body + "\nprint(json.dumps(out))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", code], input=stdin, capture_output=True, timeout=60, env=env
    )
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


def test_null_stdin_leaves_nothing_to_read():
    out = _child("worker.null_stdin(st)\nout['read'] = os.read(0, 100).decode()", b"secret")
    assert out == {"read": ""}


def test_drop_privileges_leaves_the_worker_uid_and_no_groups():
    if os.geteuid() != 0:
        pytest.skip("the uid drop needs root")
    out = _child(
        "st.wuid = 65534\nworker.drop_privileges(st)\n"
        "out.update(uid=os.getuid(), euid=os.geteuid(), gid=os.getgid(), groups=os.getgroups())\n"
        "try:\n    os.setuid(0)\nexcept PermissionError:\n    out['regain'] = False\n"
    )
    assert out == {"uid": 65534, "euid": 65534, "gid": 65534, "groups": [], "regain": False}


def test_no_uid_means_no_drop():
    out = _child("worker.drop_privileges(st)\nout['uid'] = os.geteuid()")
    assert out["uid"] == os.geteuid()


def _status(field: str) -> str:
    return (
        "for line in open('/proc/self/status'):\n"
        f"    if line.startswith('{field}:'):\n"
        f"        out['{field}'] = line.split()[1]\n"
    )


@pytest.mark.skipif(sys.platform != "linux", reason="prctl is Linux's")
def test_forbid_new_privileges_sets_no_new_privs():
    assert _child("worker.forbid_new_privileges(st)\n" + _status("NoNewPrivs")) == {
        "NoNewPrivs": "1"
    }


@pytest.mark.skipif(
    sys.platform != "linux" or platform.machine() != "x86_64", reason="syscall numbers of x86_64"
)
def test_install_seccomp_fails_the_keyring_calls_with_eperm():
    out = _child(
        "import ctypes\n"
        "worker.forbid_new_privileges(st)\nworker.install_seccomp(st)\n" + _status("Seccomp")
        + "libc = ctypes.CDLL(None, use_errno=True)\n"
        "out['keyctl'] = [libc.syscall(250, 0, 0, 0, 0, 0), ctypes.get_errno()]\n"
    )
    assert out == {"Seccomp": "2", "keyctl": [-1, 1]}  # filter mode; EPERM


@pytest.mark.skipif(sys.platform != "linux", reason="prctl is Linux's")
def test_make_undumpable_clears_the_dumpable_flag():
    out = _child(
        "import ctypes\nlibc = ctypes.CDLL(None)\nout['before'] = libc.prctl(3, 0, 0, 0, 0)\n"
        "worker.make_undumpable(st)\nout['after'] = libc.prctl(3, 0, 0, 0, 0)\n"
    )
    assert out == {"before": 1, "after": 0}  # PR_GET_DUMPABLE


def test_scrub_environment_drops_the_working_directory_variables():
    out = _child(
        "os.environ.update(PWD='/x', OLDPWD='/y')\nworker.scrub_environment(st)\n"
        "out['left'] = sorted(k for k in ('PWD', 'OLDPWD', 'PATH') if k in os.environ)"
    )
    assert out == {"left": ["PATH"]}


def test_read_job_reads_the_whole_job_and_closes_its_pipe():
    out = _child(
        "r, w = os.pipe()\nos.write(w, json.dumps({'mode': 'run'}).encode())\nos.close(w)\n"
        "st.job_fd = r\nworker.read_job(st)\nout['job'] = st.job\n"
        "try:\n    os.fstat(r)\nexcept OSError:\n    out['closed'] = True\n"
    )
    assert out == {"job": {"mode": "run"}, "closed": True}


_LIMITS = [
    ["RLIMIT_AS", 512 << 20, 512 << 20],
    ["RLIMIT_CPU", 3, 4],
    ["RLIMIT_FSIZE", 16 << 20, 16 << 20],
    ["RLIMIT_NOFILE", 64, 64],
    ["RLIMIT_CORE", 0, 0],
    ["RLIMIT_STACK", 16 << 20, 16 << 20],
]


@pytest.mark.parametrize("mode", ["test", "reference"])
def test_set_rlimits_sets_the_limits_it_says(mode):
    out = _child(
        "import resource, signal\n"
        f"st.job = {{'mode': {mode!r}, 'limits': {_LIMITS!r}}}\n"
        "cpu = resource.getrlimit(resource.RLIMIT_CPU)\nworker.set_rlimits(st)\n"
        "out['got'] = [[n, *resource.getrlimit(getattr(resource, n))] for n, _, _ in "
        f"{_LIMITS!r}]\n"
        "out['cpu_kept'] = list(resource.getrlimit(resource.RLIMIT_CPU)) == list(cpu)\n"
        "out['base_cpu'] = st.base_cpu\n"
        "out['sigxfsz_ignored'] = signal.getsignal(signal.SIGXFSZ) == signal.SIG_IGN\n"
    )
    got = {n: [soft, hard] for n, soft, hard in out["got"]}
    for name, soft, hard in _LIMITS:
        if name != "RLIMIT_CPU" or mode == "reference":
            assert got[name] == [soft, hard], name
    assert out["sigxfsz_ignored"]
    if mode == "reference":  # R is trusted and runs every test: one budget for it
        assert out["base_cpu"] is None and got["RLIMIT_CPU"] == [3, 4]
    else:  # each test's process gets it (limit_cpu), on top of what it has used
        assert out["base_cpu"] == 3 and out["cpu_kept"]


def test_refuse_network_leaves_no_inet_socket_usable():
    out = _child(
        "import socket\nworker.refuse_network(st)\nout['refused'] = []\n"
        "for fam, addr in ((socket.AF_INET, ('127.0.0.1', 9)), (socket.AF_INET6, ('::1', 9))):\n"
        "    for how in ('connect', 'bind', 'sendto'):\n"
        "        s = socket.socket(fam, socket.SOCK_DGRAM)\n"
        "        try:\n"
        "            getattr(s, how)(*((b'x', addr) if how == 'sendto' else (addr,)))\n"
        "        except PermissionError:\n"
        "            out['refused'].append(how)\n"
        "        s.close()\n"
        "a, b = socket.socketpair()\na.sendall(b'ok')\nout['unix'] = b.recv(2).decode()\n"
    )
    assert out == {"refused": ["connect", "bind", "sendto"] * 2, "unix": "ok"}


def test_compile_job_reports_a_syntax_error_and_ends_the_job():
    out = _child(
        "r, w = os.pipe()\nst = worker.WorkerState(-1, w, -1, -1)\n"
        "st.job = {'mode': 'test', 'setup': 'x = 1', 'program': 'def (', 'tests': []}\n"
        "out['stop'] = worker.compile_job(st)\nos.close(w)\n"
        "out['events'] = [json.loads(x)['ev'] for x in os.read(r, 4096).splitlines() if x]\n"
    )
    assert out == {"stop": True, "events": ["syntax_error"]}


def test_compile_job_keeps_the_reference_out_of_a_program_job():
    setup = "x = 1" + REFERENCE_MARKER + "def f(): return 2\n"
    for mode, has_reference in (("test", False), ("reference", True)):
        st = worker.WorkerState(-1, -1, -1, -1)
        st.job = {"mode": mode, "setup": setup, "program": "y = 2", "tests": []}
        assert worker.compile_job(st) is False
        assert (st.reference is not None) is has_reference
        assert st.setup is not None and st.program is not None and not st.run_mode


def test_keep_own_channel_leaves_fds_0_to_2_and_the_channel_as_fd_3():
    out = _child(
        "extra = [os.open(os.devnull, os.O_RDONLY) for _ in range(4)]\n"
        "r, w = os.pipe()\nos.dup2(r, 0)\n"
        "t = testproc.RunState(st, w, None)\ntestproc.keep_own_channel(t)\n"
        "os.write(3, b'hi')\nout['channel'] = os.read(0, 2).decode()\n"
        "out['open'] = sorted(int(fd) for fd in os.listdir('/proc/self/fd'))\n"
    )
    assert out["channel"] == "hi"
    assert out["open"] == [0, 1, 2, 3, 4]  # 4: listdir's own descriptor


def test_limit_cpu_sets_the_test_budget_on_top_of_the_cpu_used():
    out = _child(
        "import math, resource\nst.base_cpu = 2\n"
        "t = testproc.RunState(st, 3, None)\n"
        "sum(range(3 * 10 ** 6))\n"
        "u = resource.getrusage(resource.RUSAGE_SELF)\nused = u.ru_utime + u.ru_stime\n"
        "testproc.limit_cpu(t)\n"
        "out['cpu'] = list(resource.getrlimit(resource.RLIMIT_CPU))\n"
        "out['want'] = int(math.ceil(2 + used))\n"
    )
    soft, hard = out["cpu"]
    assert soft in (out["want"], out["want"] + 1) and hard == soft + 1
    own = _child(
        "import resource\nst.base_cpu = 2\nt = testproc.RunState(st, 3, None, cpu=7)\n"
        "testproc.limit_cpu(t)\nout['cpu'] = list(resource.getrlimit(resource.RLIMIT_CPU))\n"
    )
    assert own["cpu"][0] >= 7  # a test's own budget (EvalPlus's per input) wins

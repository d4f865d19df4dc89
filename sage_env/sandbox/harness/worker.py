"""The worker W: confines itself step by step, then runs one process per test and relays them.

A harness module (runs inside the sandbox): standard library only. W holds no expected value
and no descriptor of the host's report channel.

:func:`run_worker` applies :data:`WORKER_STEPS` in order: the confinement sequence that
docs/reference/sandbox.md gives ("Confinement steps"), whose order is the security argument (no
privilege is left when the job is read; the limits, the seccomp filter and non-dumpability are
in place before any program runs). Each step is a module-level function of the
:class:`WorkerState` it is handed, so each can be tested alone
(``tests/sage_env/sandbox/test_confinement_steps.py``).
It then forks one process per test, which applies
:data:`~sage_env.sandbox.harness.testproc.TEST_STEPS`
(:mod:`~sage_env.sandbox.harness.testproc`), and relays what each reports; or it runs the
reference process R.
"""

from __future__ import annotations

import builtins
import json
import os
import resource
import select
import signal
import sys
import time

from sage_env.sandbox.harness.confine import drop, prctl, read_all, seccomp
from sage_env.sandbox.harness.report import REFERENCE_MARKER, parse_line, split_lines
from sage_env.sandbox.harness.shield import enc, plain, plus_code
from sage_env.sandbox.harness.testproc import (
    TEST_STEPS,
    RunState,
    describe,
    finish,
    sender,
)

#: What W relays of one test's channel at most, bytes (the rest is dropped: that test fails).
_RELAY_CAP_BYTES = 64 << 20

_cpu, _monotonic = time.process_time, time.monotonic
# bound when the harness loads, before any program runs (as testproc binds its own)
_dict, _exec, _exit, _fork, _getpid = dict, exec, os._exit, os.fork, os.getpid


class WorkerState:
    """What W's steps hand on to each other: its descriptors, the job and what it set up."""

    __slots__ = (
        "job_fd", "ctl_fd", "last_fd", "wuid", "ctl", "job", "base_cpu", "run_mode", "setup",
        "reference", "program", "spent",
    )

    def __init__(self, job_fd: int, ctl_fd: int, last_fd: int, wuid: int) -> None:
        self.job_fd, self.ctl_fd, self.last_fd, self.wuid = job_fd, ctl_fd, last_fd, wuid
        self.ctl = sender(ctl_fd)  # the judge's channel (events of W itself)
        self.job = None  # the job, once read_job has run
        self.base_cpu = None  # each test's CPU budget, set in its own process (limit_cpu)
        self.run_mode = False
        self.setup = self.reference = self.program = None  # compiled by compile_job
        self.spent = 0.0  # CPU seconds the tests have used so far


def null_stdin(st: WorkerState) -> None:
    """Make stdin /dev/null: the program reads nothing the harness was given."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)


def drop_privileges(st: WorkerState) -> None:
    """Drop to the worker uid (as root): W cannot signal or ptrace its judge, nor write as root."""
    drop(st.wuid)


def forbid_new_privileges(st: WorkerState) -> None:
    """no_new_privs: setuid binaries gain nothing (and the seccomp filter may be installed)."""
    prctl(38, 1)  # PR_SET_NO_NEW_PRIVS


def scrub_environment(st: WorkerState) -> None:
    """Only PATH and LANG (and the config's variables): drop what bwrap --chdir and sh set."""
    for var in ("PWD", "OLDPWD"):
        os.environ.pop(var, None)


def read_job(st: WorkerState) -> None:
    """Read the job and close its pipe: no program holds the descriptor the job came on."""
    st.job = json.loads(read_all(st.job_fd).decode("ascii"))
    os.close(st.job_fd)


def set_rlimits(st: WorkerState) -> None:
    """Set the rlimits against memory, fork and disk bombs: AS, FSIZE, NOFILE, CORE, STACK, NPROC.

    RLIMIT_CPU is kept for each test's own process (``st.base_cpu``, see
    :func:`~sage_env.sandbox.harness.testproc.limit_cpu`) except in R; SIGXFSZ is ignored, so a
    write past RLIMIT_FSIZE fails with EFBIG (``blocked``).
    """
    for name, soft, hard in st.job["limits"]:
        if name == "RLIMIT_CPU" and st.job["mode"] != "reference":
            # W itself only relays until it becomes the last test: its CPU is not the
            # program's, so the budget is set per process, on top of what it has used
            st.base_cpu = soft
            continue
        try:
            resource.setrlimit(getattr(resource, name), (soft, hard))
        except (ValueError, OSError):
            pass
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def install_seccomp(st: WorkerState) -> None:
    """A seccomp filter: the keyring calls (which outlive runs) and foreign ABIs fail with EPERM."""
    seccomp()


def make_undumpable(st: WorkerState) -> None:
    """PR_SET_DUMPABLE 0: a test (same uid) can neither ptrace W nor open its descriptors."""
    prctl(4, 0)


def _audit(event, args):
    if event[:7] == "socket." and event in (
        "socket.connect",
        "socket.bind",
        "socket.sendto",
        "socket.sendmsg",
    ):
        fam = getattr(args[0], "family", None)
        if fam in (2, 10):
            raise PermissionError(1, "network access is disabled in the sandbox")


def refuse_network(st: WorkerState) -> None:
    """An audit hook refuses AF_INET/AF_INET6 connect, bind, send (``blocked``; netns holds)."""
    sys.addaudithook(_audit)


def compile_job(st: WorkerState) -> bool:
    """Compile setup and program (errors to the judge); the reference stays out of W's job.

    Returns True when the job ends here (setup or program does not compile).
    """
    job = st.job
    st.run_mode = job["mode"] == "run"
    setup_src, _, reference_src = job["setup"].partition(REFERENCE_MARKER)
    if job["mode"] != "reference":
        reference_src = ""  # the judge strips it; a program's process never holds it
    try:
        st.setup = compile(setup_src, "<setup>", "exec")
        st.reference = compile(reference_src, "<reference>", "exec") if reference_src else None
    except BaseException as exc:
        st.ctl(ev="setup_error", **describe(exc))
        return True
    try:
        st.program = compile(job["program"], "<program>", "exec")
    except BaseException as exc:
        st.ctl(ev="syntax_error", **describe(exc))
        return True
    return False


#: W's confinement sequence, in order (docs/reference/sandbox.md, "Confinement steps"). A step that
#: returns True ends the job (it has told the judge why).
WORKER_STEPS = (
    null_stdin,
    drop_privileges,
    forbid_new_privileges,
    scrub_environment,
    read_job,
    set_rlimits,
    install_seccomp,
    make_undumpable,
    refuse_network,
    compile_job,
)


def run_worker(job_fd: int, ctl_fd: int, last_fd: int, wuid: int) -> None:
    """W: run the job read from ``job_fd``, one fresh process per test; never returns.

    W applies :data:`WORKER_STEPS` (drop to ``wuid``, limits, seccomp ...; compile errors go
    to ``ctl_fd``), then forks one process C_i per test except the last. C_i applies
    :data:`~sage_env.sandbox.harness.testproc.TEST_STEPS`: it keeps only stdin/stdout/stderr and a
    pipe of its own as fd 3 (every other inherited descriptor is closed before setup runs),
    runs setup, the program and test i, and reports on fd 3. W relays each C_i's lines to the
    judge on ``ctl_fd`` tagged with i (the index is W's, never the program's), then C_i's exit
    status. W runs no untrusted code itself until it becomes the last test: it then drops
    ``ctl_fd`` and reports on ``last_fd`` (the judge knows which test that is, and judges it
    by W's exit status). In ``run`` mode, or with no runnable test, W runs the program alone
    that way. In ``reference`` mode W is R (:func:`reference_run`). The test steps run in this
    function's frame, as many frames deep as the program always ran.
    """
    st = WorkerState(job_fd, ctl_fd, last_fd, wuid)
    for step in WORKER_STEPS:
        if step(st):
            return
    job = st.job
    # each test's __sage_plus__ sites (the judge's, from the rewritten tests)
    plus = [frozenset(p) for p in job.get("plus") or []]
    plus += [frozenset()] * (len(job.get("tests") or []) - len(plus))
    if job["mode"] == "reference":  # R, forked by the judge (see judge._run_reference)
        tests = job["tests"]  # rewritten by the judge, None where a test did not parse
        if st.reference is not None:
            reference_run(st, tests, plus, [i for i, src in enumerate(tests) if src is not None])
        return
    tests = [] if st.run_mode else job["tests"]
    tags = job.get("tags") or [None] * len(tests)
    cpu_limits = job.get("cpu_limits") or []
    limits = list(cpu_limits) + [None] * (len(tests) - len(cpu_limits))
    task_cpu = job.get("task_cpu_s")
    runnable = [i for i, src in enumerate(tests) if src is not None]
    for i in runnable[:-1]:
        if task_cpu and st.spent > task_cpu:  # the task's budget is spent (EvalPlus's cap)
            st.ctl(ev="fork_error", i=i, exc="TimeoutError", msg="the task's time budget is spent")
            continue
        try:
            r, w = os.pipe()
        except BaseException as exc:
            st.ctl(ev="fork_error", i=i, **describe(exc))
            continue
        try:
            pid = _fork()
        except BaseException as exc:
            os.close(r)
            os.close(w)
            st.ctl(ev="fork_error", i=i, **describe(exc))
            continue
        if pid == 0:  # C_i: becomes test i below
            t = RunState(st, w, tests[i], tags[i], limits[i], plus[i])
            break
        os.close(w)
        wall = limits[i] * 3.0 + 2.0 if limits[i] else None  # as SandboxConfig.wall_limit_s
        st.ctl(ev="exit", i=i, status=relay(st, pid, r, i, wall))
    else:  # W itself becomes the last test (or runs the program alone)
        if not runnable:
            t = RunState(st, last_fd, None)
        else:
            last = runnable[-1]
            if task_cpu and st.spent > task_cpu:
                _exit(0)  # no verdict for the last test: it fails
            t = RunState(st, last_fd, tests[last], tags[last], limits[last], plus[last])
    for step in TEST_STEPS:
        step(t)
    finish(t.me)


def relay(st: WorkerState, pid: int, r: int, i: int, wall: float | None = None) -> int:
    """C_i's lines -> the judge, tagged with i; returns C_i's exit status.

    Until C_i's pipe closes, or C_i has exited and what it wrote is drained (a daemonised
    grandchild may hold the pipe open). ``wall``: a wall-clock backstop for this test (a
    test that sleeps is killed, and reported as out of CPU time).
    """
    os.set_blocking(r, False)
    buf, total, status, killed = bytearray(), 0, None, False
    deadline = _monotonic() + wall if wall else None
    while True:
        if status is None:
            try:
                wpid, stat, usage = os.wait4(pid, os.WNOHANG)
            except ChildProcessError:
                wpid, stat, usage = pid, -1, None
            if wpid:
                status = stat
                if usage is not None:
                    st.spent += usage.ru_utime + usage.ru_stime
            elif deadline is not None and _monotonic() > deadline:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
                deadline, killed = None, True
        try:
            chunk = os.read(r, 1 << 16)
        except BlockingIOError:
            chunk = None
        if chunk:
            total += len(chunk)
            if total <= _RELAY_CAP_BYTES:
                for line in split_lines(buf, chunk):
                    ev = parse_line(line)
                    if ev is not None:
                        st.ctl(ev="chan", i=i, e=ev)
            continue
        if chunk == b"" or status is not None:
            break
        select.select([r], [], [], 0.05)
    os.close(r)
    if status is None:
        try:
            _, status, usage = os.wait4(pid, 0)
            st.spent += usage.ru_utime + usage.ru_stime
        except ChildProcessError:
            status = -1
    if killed and status >= 0 and os.WIFSIGNALED(status):
        status = int(signal.SIGXCPU)  # out of time (by the wall clock): a timeout
    return status


def reference_run(st: WorkerState, tests: list, plus: list, runnable: list) -> None:
    """R: setup, the reference solution, then every test (trusted code only); never returns.

    Reports the values of the tests' ``__sage_plus__`` sites as the expected ones, and each
    test's CPU time, on ``st.ctl_fd``.
    """
    chan = st.ctl_fd
    if chan != 3:
        os.dup2(chan, 3)
    os.closerange(4, 1 << 16)
    send = sender(3)
    me = _getpid()
    ns = {"__builtins__": builtins, "__name__": "reference"}
    try:
        _exec(st.setup, ns)
        _exec(st.reference, ns)
    except BaseException as exc:
        send(ev="ref_error", **describe(exc))
        finish(me)
    for i in runnable:
        plus_sites = set(plus[i])

        def value(k, j, v, _i=i, _plus=plus_sites):
            if k in _plus:
                try:
                    code, copy = plus_code(v)
                    code = code or enc(plain(v) if copy is None else copy)
                    send(ev="site", i=_i, k=k, v=code)
                except BaseException as exc:
                    send(ev="site", i=_i, k=k, bad=describe(exc)["msg"])
            return v

        tns = _dict(ns)
        tns["__sage_v__"] = value
        tns["__sage_a__"] = lambda k, result, check=True: None
        tns["__sage_c__"] = lambda k, result: result
        tns["__sage_b__"] = lambda k, result: bool(result)
        tns["__sage_e__"] = lambda a: None
        code = compile(tests[i], "<test>", "exec")
        start = _cpu()
        try:
            _exec(code, tns)
        except BaseException:
            pass
        if _getpid() != me:
            _exit(0)
        send(ev="time", i=i, cpu=_cpu() - start)
    finish(me)

"""The judge H: forks the worker, rewrites the tests, and feeds what each test reports to the rules.

A harness module (runs inside the sandbox): standard library only. H never runs untrusted code
and is the only process holding the report channel to the host (fd 3). It forks W (the worker)
and, verifying against a reference, the reference process R, reads their channels and hands
each event to a :class:`~sage_env.sandbox.harness.verdict.Judge`, which holds the judging rules
(where a verdict comes from: that module's docstring). :func:`run_judge` judges one job;
:func:`warm` judges a trusted sample in memory, for the zygote.

Each harness module is shipped as source into the confined interpreter
(:data:`sage_env.sandbox.host.launch.HARNESS_MODULES`), so a split adds a module to the boot
sequence. One such split (issue 24) changed the verdict of a program that kills the judge
(``tests/sage_env/sandbox/test_hostile_programs.py``, ``kill_judge_then_exit``) and was
reverted; a split must keep that test and the red-team rounds green at both levels.
"""

from __future__ import annotations

import json
import math
import os
import re
import select
from collections.abc import Callable

from sage_env.sandbox.harness.compare import (
    PLUS_MIN_TIME_S,
    PLUS_TASK_CAP_S,
    REFERENCE_CPU_S,
    plus_time_limit,
)
from sage_env.sandbox.harness.confine import drop, flush_exit, prctl, read_all, write_all
from sage_env.sandbox.harness.report import REFERENCE_MARKER, encode_line, parse_line, split_lines
from sage_env.sandbox.harness.rewrite import bound_names, needs_program_names, rewrite_asserts
from sage_env.sandbox.harness.verdict import Judge
from sage_env.sandbox.harness.worker import run_worker

#: What H reads from W at most, bytes (64 MiB); the rest is dropped (those tests fail).
_READ_CAP_BYTES = 64 << 20
#: What H reads from the reference process at most (it reports every test's values), bytes.
_REFERENCE_CAP_BYTES = 256 << 20


def _feed(
    fd: int, bufs: dict, handler: Callable[[dict], None], total: list, cap: int = _READ_CAP_BYTES
) -> bool:
    """Read what is there on ``fd`` and hand each complete line's event to ``handler``.

    Lines past ``cap`` bytes in all (``total[0]``) are read and dropped. Returns False at end
    of file.
    """
    try:
        chunk = os.read(fd, 1 << 16)
    except BlockingIOError:
        return True
    if not chunk:
        return False
    total[0] += len(chunk)
    if total[0] <= cap:
        for line in split_lines(bufs[fd], chunk):
            ev = parse_line(line)
            if ev is not None:
                try:
                    handler(ev)
                except Exception:  # a malformed event must not take the judge down
                    pass
    return True


#: How R's sender starts a site event (``json.dumps`` keeps the keys in the order written).
_SITE_PREFIX = re.compile(rb'\{"ev": "site", "i": (\d{1,9}), "k": (\d{1,9}), ')


def _run_reference(wuid: int, rjob: dict) -> tuple[list[dict], int]:
    """Run the reference process R to its end; return its events and the bytes it wrote.

    R is forked before H drops privileges and before W gets the job, drops to ``wuid`` like W,
    and runs only trusted code (setup, the reference solution, the tests), so the reference
    never exists in a process that runs the program.
    """
    job_r, job_w = os.pipe()
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            for fd in (3, job_w, out_r):
                os.close(fd)
            run_worker(job_r, out_w, -1, wuid)
        except BaseException:
            pass
        flush_exit()
    os.close(job_r)
    os.close(out_w)
    try:
        write_all(job_w, json.dumps(rjob, ensure_ascii=True).encode("ascii"))
    except BaseException:
        pass
    os.close(job_w)
    events, buf, total = [], bytearray(), 0
    while True:
        chunk = os.read(out_r, 1 << 16)
        if not chunk:
            break
        total += len(chunk)
        if total <= _REFERENCE_CAP_BYTES:
            for line in split_lines(buf, chunk):
                site = _SITE_PREFIX.match(line)
                if site:  # kept as its bytes, decoded when its test is judged (memory)
                    i, k = int(site.group(1)), int(site.group(2))
                    events.append({"ev": "site", "i": i, "k": k, "line": line})
                    continue
                ev = parse_line(line)
                if ev is not None:
                    events.append(ev)
    os.close(out_r)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    return events, total


#: A trusted sample job for :func:`warm` (no program's or model's text).
_WARM_JOB = {
    "program": "def f(x, y=1):\n    return [x + y, str(x)]\n",
    "tests": [
        "import math\n\ndef check(candidate):\n    assert candidate(1) == [2, '1']\n"
        "    assert abs(candidate(2.5)[0] - 3.5) < 1e-6 and len(candidate(0)) == 2\n"
        "    assert math.isclose(candidate(1, y=2)[0], 3.0), 'msg'\n"
        "    for i in range(2):\n        assert candidate(i)[1] != 'x'\n\ncheck(f)\n"
    ],
}


def warm() -> list[dict]:
    """Judge a trusted sample job in memory once (rewriting, events, evaluation, verdict).

    The zygote calls this before it freezes its heap: each job's H is a fork, and would
    otherwise build the same lazily made caches and specialised bytecode again (and copy the
    pages they sit on) for every job, about a millisecond each. Nothing of the sample's job
    stays: its judge, tests and events are dropped. Returns what the judge reported (the
    sample passes).
    """
    reports: list[dict] = []
    tests, sites, _ = _rewrite_tests(dict(_WARM_JOB))
    judge = Judge(tests, sites, lambda **ev: reports.append(parse_line(encode_line(ev))))

    def got(x):
        return ["l", [["I", x + 1] if type(x) is int else ["f", repr(x + 1)], ["s", str(x)]]]

    values = [(0, [got(1)]), (1, [got(2.5), got(0)]), (2, [got(2)]), (3, [got(0)]), (3, [got(1)])]
    events = [{"ev": "setup_ok"}, {"ev": "program_ok"}]
    events += [{"ev": "a", "k": k, "v": list(enumerate(v))} for k, v in values]
    events += [{"ev": "a", "k": 4, "v": []}, {"ev": "test", "ok": True}]
    for line in split_lines(bytearray(), b"".join(encode_line(ev) for ev in events)):
        judge.from_last(parse_line(line))
    judge.finish(0)
    return reports


def run_judge(wuid: int, huid: int, job_in: int) -> None:
    """Fork W, drop privileges, read ONE job from fd ``job_in``, judge it, report on fd 3."""
    job_r, job_w = os.pipe()
    ctl_r, ctl_w = os.pipe()
    last_r, last_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            for fd in (3, job_w, ctl_r, last_r):
                os.close(fd)
            run_worker(job_r, ctl_w, last_w, wuid)
        except BaseException:
            pass
        flush_exit()
    for fd in (job_r, ctl_w, last_w):
        os.close(fd)
    os.set_inheritable(3, False)
    job = json.loads(read_all(job_in).decode("ascii"))
    os.close(job_in)
    if job_in == 0:  # keep fd 0 taken, so no pipe below lands on it (W and R re-open it)
        os.open(os.devnull, os.O_RDONLY)
    setup_src, _, reference_src = str(job.get("setup", "")).partition(REFERENCE_MARKER)
    job["setup"] = setup_src  # W, and so every process that runs the program, never sees it
    tests, sites, errors = _rewrite_tests(job)
    expected, ref_bytes = [], 0
    if reference_src and job.get("mode") == "verify":
        rjob = _reference_job(job, tests, sites, setup_src, reference_src)
        expected, ref_bytes = _run_reference(wuid, rjob)
    drop(huid)
    prctl(4, 0)  # PR_SET_DUMPABLE 0: no ptrace, no /proc/<pid>/mem for same-uid processes

    def report(**ev):
        try:
            write_all(3, encode_line(ev))
        except BaseException:
            pass

    for ev in errors:
        report(**ev)
    # a fresh random tag per test: the harness marks its events with it, so lines forged by a
    # program that has not dug the tag out of its own process's memory are not even read
    tags = [os.urandom(12).hex() for _ in tests]
    judge = Judge(tests, sites, report, tags)
    for ev in expected:
        judge.from_reference(ev)
    wjob = _worker_job(job, tests, tags, expected, bool(reference_src), _plus_sites(sites))
    try:
        write_all(job_w, json.dumps(wjob, ensure_ascii=True).encode("ascii"))
    except BaseException:
        pass
    os.close(job_w)

    handlers = {ctl_r: judge.from_worker, last_r: judge.from_last}
    judge.finish(_collect(pid, handlers, ref_bytes))


def _rewrite_tests(job: dict) -> tuple[list, list, list[dict]]:
    """Each test of ``job`` rewritten: ``(tests, sites, errors)``.

    ``tests[i]`` is the rewritten source (``None`` where rewriting raised), ``sites[i]`` its
    assertion sites, ``errors`` the ``test`` events to report for the tests that did not
    rewrite. Names the program binds are reserved.
    """
    reserved = None  # parsed from the program only for a test it can change
    tests, sites, errors = [], [], []
    for i, src in enumerate(job.get("tests", [])):
        try:
            if reserved is None and needs_program_names(src):
                reserved = bound_names(str(job.get("program", "")))
            new, s = rewrite_asserts(src, reserved or frozenset())
            tests.append(new)
            sites.append(s)
        except BaseException as exc:
            tests.append(None)
            sites.append([])
            errors.append(
                dict(ev="test", i=i, ok=False, exc=type(exc).__name__, msg=str(exc)[:160])
            )
    return tests, sites, errors


def _reference_job(
    job: dict, tests: list, sites: list, setup_src: str, reference_src: str
) -> dict:
    """The job of the reference process R: the rewritten tests, the reference, its CPU limit."""
    rjob = dict(job, mode="reference", tests=tests, plus=_plus_sites(sites))
    rjob["setup"] = setup_src + REFERENCE_MARKER + reference_src
    cpu = math.ceil(REFERENCE_CPU_S)
    rjob["limits"] = [
        (n, cpu, cpu + 1) if n == "RLIMIT_CPU" else (n, soft, hard)
        for n, soft, hard in job.get("limits", [])
    ]
    return rjob


def _plus_sites(sites: list) -> list[list[int]]:
    """Each test's ``__sage_plus__`` sites (indices into its ``sites``)."""
    return [[k for k, site in enumerate(s) if site[0] == "plus"] for s in sites]


def _worker_job(
    job: dict, tests: list, tags: list, expected: list, has_reference: bool, plus: list
) -> dict:
    """W's job: the rewritten tests, their tags and plus sites (and, verifying against a
    reference, the per-test CPU limits). Empties ``expected`` (the judge holds the decoded
    values)."""
    wjob = dict(job, tests=tests, tags=tags, plus=plus)
    times = {ev.get("i"): ev.get("cpu") for ev in expected if ev.get("ev") == "time"}
    expected.clear()  # the judge holds the decoded values; the events would double H's memory
    if has_reference and job.get("mode") == "verify":
        # EvalPlus's time protocol: each test (one plus input) gets a CPU limit from the
        # reference's own time on it, the task a cap on all of them together
        wjob["cpu_limits"] = [
            plus_time_limit(times[i]) if type(times.get(i)) in (int, float) else PLUS_MIN_TIME_S
            for i in range(len(tests))
        ]
        wjob["task_cpu_s"] = PLUS_TASK_CAP_S
    wjob.pop("expected", None)
    return wjob


def _collect(pid: int, handlers: dict, ref_bytes: int) -> int:
    """Read W's channels (``{fd: handler}``) until W is gone and they are drained; W's status."""
    bufs = {fd: bytearray() for fd in handlers}
    total = [0]
    # what H reads from W: its own cap, plus room for as many bytes of values as the reference
    # reported (plus tests whose honest outputs are large, EvalPlus's HumanEval/15 and /130)
    cap = _READ_CAP_BYTES + 2 * min(ref_bytes, _REFERENCE_CAP_BYTES)
    for fd in handlers:
        os.set_blocking(fd, False)
    w_status = None
    while handlers:
        if w_status is None:
            try:
                wpid, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                wpid, status = pid, -1
            if wpid:
                w_status = status
        ready, _, _ = select.select(list(handlers), [], [], 0.05 if w_status is None else 0)
        if not ready and w_status is not None:
            break  # W is gone and its channels are drained (a leftover may hold them open)
        for fd in ready:
            if not _feed(fd, bufs, handlers[fd], total, cap):
                del handlers[fd]
    if w_status is None:
        try:
            w_status = os.waitpid(pid, 0)[1]
        except ChildProcessError:
            w_status = -1
    return w_status

"""The judge H: forks the worker, rewrites the tests, and judges what each test reports.

A harness module (runs inside the sandbox): standard library only. H never runs untrusted code
and is the only process holding the report channel to the host (fd 3).

Where a verdict comes from (``docs/reference/sandbox.md``, threat model): W forks one process C_i
per test and relays what C_i writes on a pipe of its own, tagged by W with i, then C_i's exit
status; the last test runs in W itself on a second pipe, judged by W's exit status, which H
collects. Untrusted code can therefore speak only about the one test whose process it runs
in: an event that names another test, claims an exit status or arrives on another channel is
not what H reads. :class:`Judge` holds the rules; :func:`run_judge` the plumbing.

Why one file of more than 500 lines: it is one process's code, and each harness module is
shipped as source into the confined interpreter
(:data:`sage_env.sandbox.host.launch.HARNESS_MODULES`), so a split adds a module to the boot
sequence. One such split (issue 24) changed the verdict of a program that kills the judge
(``tests/sage_env/sandbox/test_hostile_programs.py``, ``kill_judge_then_exit``) and was
reverted; a future split must keep that test and the red-team rounds green at both levels.
"""

from __future__ import annotations

import json
import math
import os
import re
import select
import signal
from collections.abc import Callable

from sage_env.sandbox.harness.compare import (
    PLUS_MIN_TIME_S,
    PLUS_TASK_CAP_S,
    REFERENCE_CPU_S,
    plus_equal,
    plus_time_limit,
)
from sage_env.sandbox.harness.confine import drop, flush_exit, prctl, read_all, write_all
from sage_env.sandbox.harness.flow import unreached
from sage_env.sandbox.harness.report import (
    REFERENCE_MARKER,
    decode_value,
    encode_line,
    parse_line,
    split_lines,
)
from sage_env.sandbox.harness.rewrite import bound_names, needs_program_names, rewrite_asserts
from sage_env.sandbox.harness.template import evaluate
from sage_env.sandbox.harness.worker import run_worker

#: What H reads from W at most, bytes (64 MiB); the rest is dropped (those tests fail).
_READ_CAP_BYTES = 64 << 20
#: What H reads from the reference process at most (it reports every test's values), bytes.
_REFERENCE_CAP_BYTES = 256 << 20


def _show(value: object) -> str:
    """A short repr for a failure message (a huge int's repr would take quadratic time)."""
    if type(value) is int and value.bit_length() > 4096:
        return f"<int of {value.bit_length()} bits>"
    return repr(value)[:120]


_PROGRAM_EVENTS = ("program_ok", "program_error")


class _OutOfOrder(Exception):
    """A site's values did not arrive in the order its evaluation needs them."""


def _truth(value: object) -> bool:
    try:
        return bool(value)
    except BaseException:
        return False


_FORWARD_KEYS = ("ev", "exc", "msg", "errno", "code")


class Judge:
    """The judging rules of one job, fed events as H reads them.

    Args:
        tests: Rewritten test sources, ``None`` where a test did not parse (length T).
        sites: Per test, the sites of :func:`rewrite_asserts`.
        report: Writes one event to the host.
        tags: Per test, the run tag its own process puts on every event (``None``: untagged).

    Values, not verdicts: a test's process reports only the values of the holes of each
    assertion it evaluates, in evaluation order, in one event once the assertion is reached;
    the judge evaluates every assertion itself
    (:func:`~sage_env.sandbox.harness.template.evaluate`).
    A test passes iff its own process exited with status 0 after reporting that it finished
    without raising, every reported site evaluation was complete, in order and true, every
    required site was reached, and no value was undecodable or out of place (a hole reported
    twice or out of order, values the evaluation does not need, an untagged event). Tests
    whose rewritten sources are identical (they differ only in the literals and operators the
    judge keeps, which the program never sees) must also report identical
    values, or all of them fail. Exactly one verdict is reported per runnable test.
    """

    def __init__(
        self, tests: list, sites: list, report: Callable[..., None], tags: list | None = None
    ) -> None:
        self.tests, self.sites, self.report = tests, sites, report
        self.tags = list(tags) if tags is not None else [None] * len(tests)
        runnable = [i for i, src in enumerate(tests) if src is not None]
        self.first = runnable[0] if runnable else None
        #: the test W runs itself (None: W runs the program alone, as in ``run`` mode)
        self.last = runnable[-1] if runnable else None
        self.state = {
            i: {
                "end": None,
                "seen": set(),
                "bad": None,
                "setup": False,
                "trace": [],
                "plus": {},
                "count": {},  # site -> how often it was reported
                "truths": {},  # branch site -> [judged true, judged false]
                "arms": {},  # counted arm -> how often the process says it was entered
            }
            for i in runnable
        }
        self.groups: dict[str, list[int]] = {}
        for i in runnable:
            self.groups.setdefault(tests[i], []).append(i)
        self.pending: dict[int, dict | None] = {}  # judged, held until its group is complete
        self.done: set[int] = set()
        self.program_seen = False
        self.expected: dict[tuple[int, int], list] = {}  # (i, k) -> the reference's values
        self.program_state = {"setup": False}  # the program-only run (no runnable test)

    # -- events -------------------------------------------------------------------------------

    def from_worker(self, ev: dict) -> None:
        """An event W wrote on its control pipe (W has run no untrusted code at that point)."""
        kind, i = ev.get("ev"), ev.get("i")
        if kind in ("syntax_error", "setup_error"):
            self.report(**{k: v for k, v in ev.items() if k in _FORWARD_KEYS})
        elif i not in self.state or i == self.last:
            return
        elif kind == "chan" and isinstance(ev.get("e"), dict):
            self.from_test(i, ev["e"])
        elif kind == "exit":
            status = ev.get("status")
            self.verdict(i, status if type(status) is int and 0 <= status < 1 << 16 else -1)
        elif kind == "fork_error":
            self.state[i]["end"] = {k: ev.get(k) for k in ("exc", "msg", "errno")}
            self.state[i]["end"]["ok"] = False
            self.verdict(i, 0)

    def from_reference(self, ev: dict) -> None:
        """An event of the reference process (trusted code only: setup, reference, tests)."""
        i, k = ev.get("i"), ev.get("k")
        if ev.get("ev") == "site" and i in self.state and type(k) is int:
            if type(ev.get("line")) is bytes:  # decoded when test i is judged
                self.expected.setdefault((i, k), []).append(("line", ev["line"]))
                return
            try:
                value = ("v", decode_value(ev["v"])) if "v" in ev else ("bad", ev.get("bad"))
            except BaseException:
                value = ("bad", "undecodable")
            self.expected.setdefault((i, k), []).append(value)

    def from_last(self, ev: dict) -> None:
        """An event on the last test's channel (the test W runs itself)."""
        if self.last is None:
            self._program_event(self.program_state, ev, True)
        else:
            self.from_test(self.last, ev)

    def from_test(self, i: int, ev: dict) -> None:
        """An event test ``i``'s own process wrote (untrusted once it reported ``setup_ok``)."""
        s = self.state[i]
        if i in self.done or i in self.pending:
            return
        if ev.get("n") != self.tags[i]:
            return  # not written by the harness of this run (a forger that does not know it)
        if self._program_event(s, ev, True):
            return
        kind = ev.get("ev")
        if not s["setup"]:
            return
        if kind == "a":
            self._reached(i, s, ev)
        elif kind == "test":
            if s["end"] is None or not ev.get("ok"):
                s["end"] = {k: ev.get(k) for k in ("ok", "exc", "msg", "errno")}
                s["arms"] = _arm_counts(ev.get("e"))

    def _program_event(self, s: dict, ev: dict, forward: bool) -> bool:
        kind = ev.get("ev")
        if kind == "setup_ok":
            s["setup"] = True
        elif kind == "setup_error":
            if not s["setup"]:  # trusted only before setup_ok
                s["end"] = {"ok": False, **{k: ev.get(k) for k in ("exc", "msg", "errno")}}
                if forward:
                    self.report(**{k: v for k, v in ev.items() if k in _FORWARD_KEYS})
        elif kind in _PROGRAM_EVENTS:
            if not s["setup"]:
                return True
            if kind == "program_error" and s.get("end") is None:
                s["end"] = {"ok": False, **{k: ev.get(k) for k in ("exc", "msg", "errno")}}
            if forward and not self.program_seen:
                self.program_seen = True
                self.report(**{k: v for k, v in ev.items() if k in _FORWARD_KEYS})
        else:
            return False
        return True

    def _fail(self, s: dict, msg: str) -> None:
        if s["bad"] is None:
            s["bad"] = {"exc": "AssertionError", "msg": msg}

    def _reached(self, i: int, s: dict, ev: dict) -> None:
        # site k's evaluation is complete: judge it from its values alone
        k = ev.get("k")
        if type(k) is not int or not 0 <= k < len(self.sites[i]):
            self._fail(s, "a site this test does not have")
            return
        values = ev.get("v")
        if not isinstance(values, list) or not all(
            isinstance(x, list) and len(x) == 2 and type(x[0]) is int for x in values
        ):
            self._fail(s, f"assertion {k}: malformed values")
            return
        if any(a[0] >= b[0] for a, b in zip(values, values[1:])):
            self._fail(s, f"assertion {k}: values out of order")
            return
        if "bad" in ev or any(raw is None for _, raw in values):
            self._fail(s, f"assertion {k}: {str(ev.get('bad', 'unreadable value'))[:120]}")
            return
        kind, template, _required, atol = self.sites[i][k]
        if len(self.groups[self.tests[i]]) > 1:  # compared only with identical tests
            s["trace"].append((k, [json.dumps(v, sort_keys=True) for _, v in values]))
        s["seen"].add(k)
        s["count"][k] = s["count"].get(k, 0) + 1
        if kind == "call":
            if values:
                self._fail(s, f"statement {k}: values out of order")
            return
        if kind == "plus":
            if [j for j, _ in values] != [0]:
                self._fail(s, f"assertion {k}: values out of order")
                return
            s["plus"].setdefault(k, []).append(values[0][1])
            return
        queue = list(values)
        what = "condition" if kind == "branch" else "assertion"

        def pull(j):
            if not queue or queue[0][0] != j:
                raise _OutOfOrder(j)
            got = queue.pop(0)[1]
            return decode_value(got)

        try:
            result = evaluate(template, pull)
            if kind == "branch":  # a condition: which way the flow goes, as the judge sees it
                if queue:
                    raise _OutOfOrder(-1)
                s["truths"].setdefault(k, [0, 0])[not _truth(result)] += 1
                return
            ok = _truth(result) and not queue
            msg = f"assertion {k} failed" if not queue else f"assertion {k}: values out of order"
            if ok is not True and len(values) == 1 and template[0] == "cmp":
                msg = f"assertion {k}: got {_show(decode_value(values[0][1]))}"
        except _OutOfOrder:
            ok, msg = False, f"{what} {k}: values out of order"
        except BaseException as exc:
            ok, msg = False, f"{what} {k}: {type(exc).__name__}: {str(exc)[:100]}"
        if ok is not True:
            self._fail(s, msg)

    # -- verdicts -----------------------------------------------------------------------------

    def verdict(self, i: int, status: int) -> None:
        """Judge test ``i`` whose process ended with wait ``status`` (-1: unknown)."""
        if i not in self.state or i in self.done or i in self.pending:
            return
        s = self.state[i]
        fail = None
        if s["bad"] is not None:
            fail = s["bad"]
        elif s["end"] is not None and not s["end"].get("ok"):
            fail = s["end"]
        elif status >= 0 and os.WIFSIGNALED(status):
            try:
                name = signal.Signals(os.WTERMSIG(status)).name
            except ValueError:
                name = str(os.WTERMSIG(status))
            fail = {"exc": "Signal", "msg": name, "signal": os.WTERMSIG(status)}
        elif s["end"] is None or status != 0:
            code = os.WEXITSTATUS(status) if status >= 0 and os.WIFEXITED(status) else -1
            fail = {"exc": "EarlyExit", "msg": f"test exited before finishing (status {code})"}
        else:
            # every site the reported flow reaches, as often as it reaches it
            msg = unreached(self.sites[i], s["count"], s["truths"], s["arms"])
            if msg is not None:
                fail = {"exc": "AssertionError", "msg": msg}
        if fail is None:
            fail = self._plus_failure(i, s)
        # test i is judged: its values and the reference's for it are no longer needed (large
        # plus outputs would otherwise pile up in H until the job ends)
        for k in range(len(self.sites[i])):
            self.expected.pop((i, k), None)
        s["plus"] = {}
        group = self.groups[self.tests[i]]
        self.pending[i] = fail
        if all(j in self.pending for j in group):
            self._release(group)

    def _plus_failure(self, i: int, s: dict) -> dict | None:
        for k, site in enumerate(self.sites[i]):
            # each value the reference reported at a plus site, the candidate must report too
            n_want, n_got = len(self.expected.get((i, k), ())), len(s["plus"].get(k, ()))
            if site[0] == "plus" and n_got < n_want:
                what = "was never checked" if not n_got else f"was checked {n_got} times"
                return {
                    "exc": "AssertionError",
                    "msg": f"assertion {k} {what}, the reference's {n_want}",
                }
        for k, values in s["plus"].items():
            atol = self.sites[i][k][3]
            want = self.expected.get((i, k), [])
            for n, raw in enumerate(values):
                if n < len(want) and want[n][0] == "line":
                    try:
                        ev = json.loads(want[n][1])
                        want[n] = ("v", decode_value(ev["v"])) if "v" in ev else ("bad", "")
                    except BaseException:
                        want[n] = ("bad", "undecodable")
                if n >= len(want) or want[n][0] != "v":
                    return {"exc": "AssertionError", "msg": f"assertion {k}: no reference value"}
                try:
                    got = decode_value(raw) if raw is not None else None
                    ok = raw is not None and plus_equal(got, want[n][1], atol)
                except BaseException:
                    ok, got = False, "<undecodable>"
                if not ok:
                    return {"exc": "AssertionError", "msg": f"assertion {k}: got {_show(got)}"}
        return None

    def _release(self, group: list[int]) -> None:
        traces = {json.dumps(self.state[j]["trace"]) for j in group if self.pending[j] is None}
        for j in group:
            fail = self.pending.pop(j)
            if fail is None and len(traces) > 1:
                fail = {
                    "exc": "AssertionError",
                    "msg": "identical tests got different results (a test-dependent program)",
                }
            self.done.add(j)
            if fail is None:
                self.report(ev="test", i=j, ok=True)
            else:
                keys = ("exc", "msg", "errno", "signal")
                self.report(
                    ev="test",
                    i=j,
                    ok=False,
                    **{k: fail[k] for k in keys if fail.get(k) is not None},
                )

    def finish(self, w_status: int | None) -> None:
        """W has exited with ``w_status``: judge the last test by it and report what is held.

        A test W never got to (W died first) gets no verdict, which the host counts as failed.
        """
        status = w_status if w_status is not None else -1
        if self.last is not None:
            self.verdict(self.last, status)
        for group in self.groups.values():
            if any(j in self.pending for j in group):
                self._release([j for j in group if j in self.pending])
        if w_status is not None and w_status >= 0 and os.WIFSIGNALED(w_status):
            self.report(ev="worker_signal", signal=os.WTERMSIG(w_status))
        self.report(ev="done")


def _arm_counts(raw: object) -> dict:
    """The arm counts of a test's end event, ``[[arm, n], ...]`` (anything malformed: none)."""
    counts: dict = {}
    if isinstance(raw, list):
        for item in raw[: 1 << 16]:
            if (
                isinstance(item, list)
                and len(item) == 2
                and type(item[0]) is int
                and type(item[1]) is int
                and item[1] >= 0
            ):
                counts[item[0]] = item[1]
    return counts


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

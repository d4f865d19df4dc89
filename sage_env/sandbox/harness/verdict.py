"""The judging rules of one job: from what its processes report to one verdict per test.

A harness module (runs inside the sandbox): standard library only. :class:`Judge` is fed the
events the judge H reads (:mod:`~sage_env.sandbox.harness.judge` holds H's plumbing: the
fork of W and of the reference process, the channels, the report to the host) and reports a
verdict for each runnable test.

Where a verdict comes from (``docs/reference/sandbox.md``, threat model): W forks one process C_i
per test and relays what C_i writes on a pipe of its own, tagged by W with i, then C_i's exit
status; the last test runs in W itself on a second pipe, judged by W's exit status, which H
collects. Untrusted code can therefore speak only about the one test whose process it runs
in: an event that names another test, claims an exit status or arrives on another channel is
not what the judge reads.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable

from sage_env.sandbox.harness.compare import plus_equal
from sage_env.sandbox.harness.flow import unreached
from sage_env.sandbox.harness.report import decode_value
from sage_env.sandbox.harness.template import evaluate


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

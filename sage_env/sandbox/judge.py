"""The judge H: forks the worker, rewrites the tests, and judges what the worker reports.

A harness module (runs inside the sandbox): standard library only. H never runs untrusted code
and is the only process holding the report channel to the host (fd 3).
"""

from __future__ import annotations

import os

from sage_env.sandbox.confine import _drop, _flush_exit, _prctl, _read_all, _write_all
from sage_env.sandbox.report import decode_value, encode_line, parse_line
from sage_env.sandbox.rewrite import rewrite_asserts
from sage_env.sandbox.worker import run_worker


def run_judge(wuid: int, huid: int, job_in: int) -> None:
    """Fork W, drop privileges, read ONE job from fd ``job_in``, report on fd 3."""
    # H: fork W, drop privileges, read ONE job from fd job_in, report on fd 3.
    job_r, job_w = os.pipe()
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(3)
            os.close(job_w)
            os.close(out_r)
            run_worker(job_r, out_w, wuid)
        except BaseException:
            pass
        _flush_exit()
    os.close(job_r)
    os.close(out_w)
    _drop(huid)
    _prctl(4, 0)  # PR_SET_DUMPABLE 0: no ptrace, no /proc/<pid>/mem for same-uid processes
    import json
    import select
    import signal

    os.set_inheritable(3, False)
    job = json.loads(_read_all(job_in).decode("ascii"))
    os.close(job_in)

    def report(**ev):
        try:
            _write_all(3, encode_line(ev))
        except BaseException:
            pass

    tests, sites = [], []
    for i, src in enumerate(job.get("tests", [])):
        try:
            new, s = rewrite_asserts(src)
            tests.append(new)
            sites.append(s)
        except BaseException as exc:
            tests.append(None)
            sites.append([])
            report(ev="test", i=i, ok=False, exc=type(exc).__name__, msg=str(exc)[:160])
    wjob = dict(job, tests=tests)
    wjob.pop("expected", None)
    try:
        _write_all(job_w, json.dumps(wjob, ensure_ascii=True).encode("ascii"))
    except BaseException:
        pass
    os.close(job_w)

    state = {}  # i -> {"ok": bool|None, "fail": dict|None, "seen": set, "bad": dict|None}

    def st(i):
        return state.setdefault(i, {"end": None, "seen": set(), "bad": None})

    inline = []

    def verdict(i, status):
        s = st(i)
        s["judged"] = True
        fail = None
        if s["end"] is not None and not s["end"].get("ok"):
            fail = s["end"]
        elif s["bad"] is not None:
            fail = s["bad"]
        elif os.WIFSIGNALED(status):
            try:
                name = signal.Signals(os.WTERMSIG(status)).name
            except ValueError:
                name = str(os.WTERMSIG(status))
            fail = {"exc": "Signal", "msg": name, "signal": os.WTERMSIG(status)}
        elif s["end"] is None or status != 0:
            code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
            fail = {
                "exc": "EarlyExit",
                "msg": f"test exited before finishing (status {code})",
            }
        else:
            missing = [
                k for k, (kind, _) in enumerate(sites[i]) if kind == "eq" and k not in s["seen"]
            ]
            if missing:
                fail = {
                    "exc": "AssertionError",
                    "msg": f"assertion {missing[0]} was never checked",
                }
        if fail is None:
            report(ev="test", i=i, ok=True)
        else:
            report(
                ev="test",
                i=i,
                ok=False,
                **{
                    k: fail.get(k)
                    for k in ("exc", "msg", "errno", "signal")
                    if fail.get(k) is not None
                },
            )

    def handle(ev):
        kind = ev.get("ev")
        i = ev.get("i")
        if kind in ("site", "test", "exit"):
            if type(i) is not int or not 0 <= i < len(tests) or tests[i] is None:
                return
        if kind == "site":
            s = st(i)
            k = ev.get("k")
            if type(k) is not int or not 0 <= k < len(sites[i]):
                return
            kind_k, expected = sites[i][k]
            if kind_k == "eq":
                ok = False
                if "v" in ev:
                    try:
                        got = decode_value(ev["v"])
                        ok = got == expected
                        if not ok:
                            msg = f"assertion {k}: got {repr(got)[:120]}"
                    except BaseException:
                        msg = f"assertion {k}: undecodable result"
                else:
                    msg = f"assertion {k}: {str(ev.get('bad'))[:120]}"
            else:
                ok = ev.get("t") is True
                msg = f"assertion {k} failed"
            if ok:
                s["seen"].add(k)
            elif s["bad"] is None:
                s["bad"] = {"exc": "AssertionError", "msg": msg}
        elif kind == "test":
            s = st(i)
            if s["end"] is None or not ev.get("ok"):
                s["end"] = {k: ev.get(k) for k in ("ok", "exc", "msg", "errno")}
        elif kind == "exit":
            status = ev.get("status")
            verdict(i, status if type(status) is int and 0 <= status < 1 << 16 else -1)
        elif kind == "inline":
            if type(i) is int and 0 <= i < len(tests) and tests[i] is not None:
                inline.append(i)
        elif kind in ("setup_error", "syntax_error", "program_error", "program_ok"):
            report(**{k: v for k, v in ev.items() if k in ("ev", "exc", "msg", "errno", "code")})
        elif kind == "done":
            report(ev="done_w")

    buf = b""
    total = 0
    os.set_blocking(out_r, False)
    w_status = None
    while True:
        if w_status is None:
            try:
                wpid, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                wpid, status = pid, -1
            if wpid:
                w_status = status
        try:
            chunk = os.read(out_r, 1 << 16)
        except BlockingIOError:
            chunk = None
        if chunk:
            total += len(chunk)
            if total < (64 << 20):
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    ev = parse_line(line)
                    if ev is not None:
                        try:
                            handle(ev)
                        except Exception:  # a forged event must not take the judge down
                            pass
            continue
        if chunk == b"" or w_status is not None:
            if w_status is None:
                try:
                    w_status = os.waitpid(pid, 0)[1]
                except ChildProcessError:
                    w_status = -1
            break
        select.select([out_r], [], [], 0.05)
    for i in inline:  # the test W ran itself: judged by W's own exit
        if not st(i).get("judged"):
            verdict(i, w_status if w_status is not None else -1)
    if w_status is not None and os.WIFSIGNALED(w_status):
        report(ev="worker_signal", signal=os.WTERMSIG(w_status))
    report(ev="done")

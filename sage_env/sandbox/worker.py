"""The worker W: runs setup, the untrusted program and each test, and reports to the judge.

A harness module (runs inside the sandbox): standard library only. W holds no expected value
and no descriptor of the host's report channel.
"""

from __future__ import annotations

import os
import sys

from sage_env.sandbox.confine import _drop, _prctl, _read_all, _seccomp


def run_worker(job_fd: int, out_fd: int, wuid: int) -> None:
    """Run one job read from ``job_fd``; events go to ``out_fd``; drops to ``wuid`` first."""
    # W: untrusted code runs here (and in per-test forks). Holds no secrets.
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    _drop(wuid)
    _prctl(38, 1)  # PR_SET_NO_NEW_PRIVS
    for var in ("PWD", "OLDPWD"):  # bwrap --chdir and sh set these
        os.environ.pop(var, None)
    import builtins
    import json
    import resource
    import signal
    import types

    job = json.loads(_read_all(job_fd).decode("ascii"))
    os.close(job_fd)
    for name, soft, hard in job["limits"]:
        try:
            resource.setrlimit(getattr(resource, name), (soft, hard))
        except (ValueError, OSError):
            pass
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _seccomp()
    _dumps, _exec, _dict, _type, _getpid, _exit, _fork, _listdir, _os_write = (
        json.dumps,
        exec,
        dict,
        type,
        os.getpid,
        os._exit,
        os.fork,
        os.listdir,
        os.write,
    )
    _NUM = (bool, int, float, complex)

    def send(**ev):
        # writes through os.write as it was before the program ran (a program that patches
        # os.write cannot filter what its tests report)
        try:
            data = ("\n" + _dumps(ev, ensure_ascii=True) + "\n").encode("ascii")
            while data:
                data = data[_os_write(out_fd, data) :]
        except BaseException:
            pass

    def describe(exc):
        try:
            name = _type(exc).__name__
        except BaseException:
            name = "Exception"
        try:
            msg = str(exc)[:160]
        except BaseException:
            msg = "<unprintable>"
        err = getattr(exc, "errno", None)
        return {"exc": name, "msg": msg, "errno": err if _type(err) is int else None}

    def audit(event, args):
        if event[:7] == "socket." and event in (
            "socket.connect",
            "socket.bind",
            "socket.sendto",
            "socket.sendmsg",
        ):
            fam = getattr(args[0], "family", None)
            if fam in (2, 10):
                raise PermissionError(1, "network access is disabled in the sandbox")

    sys.addaudithook(audit)

    _SCALARS = (bool, int, float, complex, str, bytes)
    _len, _range, _isinstance = len, range, isinstance

    def plain(v, depth=0):
        # The value as exact builtin types, read through the BASE types' own methods so that
        # overridden __eq__/__iter__/__int__/... of subclasses are never called.
        t = _type(v)
        if depth > 60:
            raise ValueError("result nested too deeply")
        if v is None or t in _SCALARS:
            return v
        if _isinstance(v, bool):
            return bool.__bool__(v)
        if _isinstance(v, int):
            return int.__int__(v)
        if _isinstance(v, float):
            return float.__float__(v)
        if _isinstance(v, complex):
            return complex(
                float.__float__(complex.real.__get__(v)), float.__float__(complex.imag.__get__(v))
            )
        if _isinstance(v, str):
            return str.__str__(v)
        if _isinstance(v, bytes):
            return bytes.__bytes__(v) if hasattr(bytes, "__bytes__") else bytes(bytearray(v))
        if _isinstance(v, list):
            return [plain(list.__getitem__(v, i), depth + 1) for i in _range(list.__len__(v))]
        if _isinstance(v, tuple):
            return tuple(
                plain(tuple.__getitem__(v, i), depth + 1) for i in _range(tuple.__len__(v))
            )
        if _isinstance(v, dict):
            return {plain(k, depth + 1): plain(x, depth + 1) for k, x in dict.items(v)}
        if _isinstance(v, frozenset):
            return frozenset(plain(x, depth + 1) for x in frozenset.__iter__(v))
        if _isinstance(v, set):
            return {plain(x, depth + 1) for x in set.__iter__(v)}
        raise TypeError("unsupported result type " + t.__name__)

    def enc(v):
        t = _type(v)
        if v is None:
            return ["n"]
        if t is bool:
            return ["o", v]
        if t is int:
            return ["i", str(v)] if abs(v) > 2**53 else ["I", v]
        if t is float:
            return ["f", repr(v)]
        if t is complex:
            return ["c", repr(v.real), repr(v.imag)]
        if t is str:
            return ["s", v]
        if t is bytes:
            return ["b", v.hex()]
        if t is dict:
            return ["d", [[enc(k), enc(x)] for k, x in v.items()]]
        return [{list: "l", tuple: "t", set: "S", frozenset: "F"}[t], [enc(x) for x in v]]

    def custom(v, names):
        for klass in _type(v).__mro__:
            if klass.__module__ != "builtins" and any(n in klass.__dict__ for n in names):
                return True
        return False

    def truth(v):
        # bool(v), but an object whose truthiness is defined by Python code (program-defined
        # __bool__/__len__) is not trusted: it counts as false.
        try:
            return bool(plain(v))
        except (TypeError, ValueError):
            pass
        if custom(v, ("__bool__", "__len__")):
            return False
        return bool(v)

    def same(a, b):
        # Type-strict ==: both sides as plain builtin values; objects with program-defined
        # __eq__ only compare equal to values of their own type, through the RIGHT side.
        try:
            pa = plain(a)
            pa_ok = True
        except (TypeError, ValueError):
            pa_ok = False
        try:
            pb = plain(b)
            pb_ok = True
        except (TypeError, ValueError):
            pb_ok = False
        if pa_ok and pb_ok:
            return pa == pb
        if pa_ok or pb_ok:
            return False
        if _type(a) is not _type(b):
            return False
        return truth(b == a)

    module = types.ModuleType("__main__" if job["mode"] == "run" else "solution")
    ns = module.__dict__
    ns["__builtins__"] = builtins
    sys.modules[module.__name__] = module
    try:
        setup = compile(job["setup"], "<setup>", "exec")
    except BaseException as exc:
        send(ev="setup_error", **describe(exc))
        return
    try:
        program = compile(job["program"], "<program>", "exec")
    except BaseException as exc:
        send(ev="syntax_error", **describe(exc))
        return
    try:
        _exec(setup, ns)
    except BaseException as exc:
        send(ev="setup_error", **describe(exc))
        return
    # The builtins as (trusted) setup left them. Each test gets them back, so a program that
    # patches bool/abs/isinstance/... can fool neither its tests nor the checks made for them.
    _builtins_dict = builtins.__dict__
    _pristine = _dict(_builtins_dict)
    _clear, _update = dict.clear, dict.update
    wpid = _getpid()
    try:
        _exec(program, ns)
        if _getpid() != wpid:  # a fork made by the program must not act as the worker
            _exit(0)
    except SystemExit as exc:
        if _getpid() != wpid:
            _exit(0)
        if job["mode"] == "run" and exc.code in (None, 0):
            send(ev="program_ok")
        else:
            send(ev="program_error", **describe(exc), code=str(exc.code)[:40])
        return
    except BaseException as exc:
        if _getpid() != wpid:
            _exit(0)
        send(ev="program_error", **describe(exc))
        return
    if job["mode"] == "run" and "threading" in sys.modules:
        try:
            sys.modules["threading"]._shutdown()  # like interpreter exit: join non-daemon threads
        except BaseException as exc:
            send(ev="program_error", **describe(exc))
            return
    send(ev="program_ok")
    last = max([i for i, src in enumerate(job["tests"]) if src is not None], default=-1)
    for i, src in enumerate(job["tests"]):
        if src is None:
            continue
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        # The last test runs in W itself (no test runs after it, so it still has a namespace
        # of its own) unless the program left threads running; H then judges it by W's exit.
        try:
            inline = i == last and _len(_listdir("/proc/self/task")) == 1
        except BaseException:
            inline = False
        if inline:
            send(ev="inline", i=i)
            pid = 0
        else:
            try:
                pid = _fork()
            except BaseException as exc:
                send(ev="test", i=i, ok=False, **describe(exc))
                continue
        if pid == 0:
            me = _getpid()

            def check(k, value, truthy=False, _i=i):
                if truthy:
                    ok = truth(value)
                    send(ev="site", i=_i, k=k, t=ok is True)
                    if ok is not True:
                        raise AssertionError(f"assertion {k} failed")
                    return
                try:
                    send(ev="site", i=_i, k=k, v=enc(plain(value)))
                except BaseException as exc:
                    send(ev="site", i=_i, k=k, bad=describe(exc)["msg"])

            _clear(_builtins_dict)
            _update(_builtins_dict, _pristine)
            tns = _dict(ns)
            tns["__builtins__"] = builtins
            tns["__sage_check__"] = check
            tns["__sage_eq__"] = same
            try:
                _exec(compile(src, "<test>", "exec"), tns)
                result = {"ok": True}
            except BaseException as exc:
                result = {"ok": False, **describe(exc)}
            if _getpid() != me:
                _exit(0)
            send(ev="test", i=i, **result)
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except BaseException:
                    pass
            if inline:
                break
            _exit(0)
        try:
            _, status = os.waitpid(pid, 0)
        except BaseException:
            status = -1
        send(ev="exit", i=i, status=status)
    send(ev="done")

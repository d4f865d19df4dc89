"""Run untrusted Python behind an OS-level boundary.

:func:`run` executes one program; :class:`SandboxPool` runs jobs without an interpreter start-up
each: where :func:`zygotes_available`, a long-lived sandbox (the zygote) forks every job into its
own mount and IPC namespaces and cgroup-contained process tree; otherwise whole sandboxed harness
processes are kept pre-started. :class:`~sage_env.verifiers.CodeVerifier` is built on the same
pieces.

Layers (see ``docs/sandbox.md`` for the threat model):

* **Isolation level**, chosen once per process by :func:`isolation_level` in the order
  ``bwrap`` -> ``unshare`` -> ``rlimits`` (override with ``SAGE_SANDBOX_ISOLATION``):

  - ``bwrap``: bubblewrap with a read-only root, private ``/tmp`` and working directory (size-
    capped tmpfs), fresh ``/dev`` and ``/proc``, new PID, network, IPC and UTS namespaces,
    ``--die-with-parent`` and ``--new-session``.
  - ``unshare``: ``unshare --net --pid --fork --kill-child --mount-proc`` (no network, own PID
    namespace), file system as seen by the dropped uid.
  - ``rlimits``: resource limits, session, uid drop (when root) only.

* **Privileges**: when running as root, the harness forks its worker and then both drop to
  unprivileged uids (worker ``SANDBOX_UID`` = 65534, harness ``HARNESS_UID`` = 65533, so
  untrusted code can neither signal nor ptrace its judge). ``no_new_privs`` is set.
* **cgroups** (cgroup v1 ``pids`` and ``memory``, when writable): one cgroup per run with
  ``pids.max`` and ``memory.limit_in_bytes``; everything in it is killed when the run ends,
  daemonised grandchildren included. Without cgroups, the PID namespace plays that role.
* **rlimits** in the worker: ``RLIMIT_AS``, ``RLIMIT_CPU``, ``RLIMIT_NPROC``, ``RLIMIT_FSIZE``,
  ``RLIMIT_NOFILE``, ``RLIMIT_CORE`` = 0.
* Scrubbed environment, stdin at EOF, capped stdout/stderr, a fresh empty working directory
  removed afterwards, a Python audit hook that refuses IPv4/IPv6 socket connects and binds
  (a policy layer reporting ``blocked``; the namespace is the boundary).

This module imports only the standard library.
"""

from __future__ import annotations

import atexit
import errno as _errno
import itertools
import json
import logging
import math
import os
import queue
import selectors
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

__all__ = [
    "HARNESS_UID",
    "ISOLATION_LEVELS",
    "SANDBOX_STATUSES",
    "SANDBOX_UID",
    "SandboxPool",
    "SandboxResult",
    "cgroups_available",
    "default_python",
    "isolation_level",
    "run",
    "zygotes_available",
]

log = logging.getLogger(__name__)

#: Fallback order, strongest first.
ISOLATION_LEVELS = ("bwrap", "unshare", "rlimits")

#: Statuses :func:`run` can return.
SANDBOX_STATUSES = (
    "passed",
    "failed",
    "timeout",
    "memory",
    "crashed",
    "syntax_error",
    "blocked",
)

#: uid/gid untrusted code runs as when the host process is root (``nobody``).
SANDBOX_UID = 65534
#: uid/gid the judging harness runs as when the host is root (differs from SANDBOX_UID so the
#: untrusted worker cannot signal or ptrace it).
HARNESS_UID = 65533

#: errnos that mean "the sandbox refused": reported as status ``blocked``.
BLOCKED_ERRNOS = frozenset(
    {
        _errno.EPERM,
        _errno.EACCES,
        _errno.EROFS,
        _errno.ENETUNREACH,
        _errno.ENETDOWN,
        _errno.EFBIG,
        _errno.ENOSPC,
        _errno.EDQUOT,
        _errno.EAGAIN,
        _errno.EMFILE,
    }
)

_CHILD_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
_REPORT_CAP_BYTES = 4 << 20
_DRAIN_GRACE_S = 0.5
_CG_ROOT = "/sys/fs/cgroup"
_CG_DIR = "sage-sandbox"
_HIDE_PATHS = ("/root", "/home", "/work", "/mnt", "/srv", "/media")

# --------------------------------------------------------------------------------------------
# The harness. Runs as ``python -I -c HARNESS <worker_uid> <harness_uid>`` inside the chosen
# isolation. Before any job arrives it forks the worker W, and both drop privileges. The
# harness H then reads ONE job from stdin, rewrites the tests' asserts (keeping literal expected
# values to itself), hands W the program and rewritten tests, and judges what W and its per-test
# children C_i report. H never runs untrusted code, and W was forked before H read the job, so
# the expected values never exist in any process that runs untrusted code. Only H holds fd 3,
# the report channel to the host.
# --------------------------------------------------------------------------------------------
HARNESS = r"""
import os, sys

def _drop(uid):
    if uid >= 0 and os.geteuid() == 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)

def _prctl(opt, arg):
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(opt, arg, 0, 0, 0)
    except Exception:
        pass

_os_exit = os._exit  # as it was before any program ran in this process

def _flush_exit():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    _os_exit(0)

def _write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]

def _read_all(fd):
    chunks = []
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            return b"".join(chunks)
        chunks.append(b)

_KEYRING_SYSCALLS = {  # add_key, request_key, keyctl: the kernel keyrings of a uid outlive runs
    "x86_64": (0xC000003E, (248, 249, 250), 0x40000000),  # (AUDIT_ARCH, numbers, x32 bit)
    "aarch64": (0xC00000B7, (217, 218, 219), None),
}

_SECCOMP = []  # [True] once this process (a zygote) has the filter: its forks inherit it

def _seccomp():
    # A seccomp filter (needs no_new_privs or CAP_SYS_ADMIN): the keyring syscalls fail with
    # EPERM, as do syscalls of a foreign ABI (x32, or 32-bit int 0x80 on x86_64). Best effort.
    import ctypes
    spec = _KEYRING_SYSCALLS.get(os.uname().machine)
    if spec is None or _SECCOMP:
        return
    arch, numbers, x32 = spec
    LD, JEQ, JGE, RET = 0x20, 0x15, 0x35, 0x06
    ALLOW, EPERM = 0x7FFF0000, 0x00050000 | 1
    n = len(numbers)
    prog = [(LD, 0, 0, 4), (JEQ, 0, n + 3, arch), (LD, 0, 0, 0)]
    prog.append((JGE, n + 1, 0, x32) if x32 else (JEQ, 0, 0, 0))
    prog += [(JEQ, n - k, 0, nr) for k, nr in enumerate(numbers)]
    prog += [(RET, 0, 0, ALLOW), (RET, 0, 0, EPERM)]

    class Filter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                    ("k", ctypes.c_uint)]

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]

    filters = (Filter * len(prog))(*[Filter(*ins) for ins in prog])
    fprog = Prog(len(prog), filters)
    try:
        if ctypes.CDLL(None, use_errno=True).prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0:
            _SECCOMP.append(True)  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
    except Exception:
        pass

def _worker(job_fd, out_fd, wuid):
    # W: untrusted code runs here (and in per-test forks). Holds no secrets.
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    _drop(wuid)
    _prctl(38, 1)  # PR_SET_NO_NEW_PRIVS
    for var in ("PWD", "OLDPWD"):  # bwrap --chdir and sh set these
        os.environ.pop(var, None)
    import json, resource, signal, types, builtins
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
        json.dumps, exec, dict, type, os.getpid, os._exit, os.fork, os.listdir, os.write)
    _NUM = (bool, int, float, complex)

    def send(**ev):
        # writes through os.write as it was before the program ran (a program that patches
        # os.write cannot filter what its tests report)
        try:
            data = ("\n" + _dumps(ev, ensure_ascii=True) + "\n").encode("ascii")
            while data:
                data = data[_os_write(out_fd, data):]
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
                "socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"):
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
            return complex(float.__float__(complex.real.__get__(v)),
                           float.__float__(complex.imag.__get__(v)))
        if _isinstance(v, str):
            return str.__str__(v)
        if _isinstance(v, bytes):
            return bytes.__bytes__(v) if hasattr(bytes, "__bytes__") else bytes(bytearray(v))
        if _isinstance(v, list):
            return [plain(list.__getitem__(v, i), depth + 1) for i in _range(list.__len__(v))]
        if _isinstance(v, tuple):
            return tuple(plain(tuple.__getitem__(v, i), depth + 1)
                         for i in _range(tuple.__len__(v)))
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
                        raise AssertionError("assertion %d failed" % k)
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

def _decode(e):
    tag = e[0]
    if tag == "n":
        return None
    if tag in ("o", "I", "s"):
        return e[1]
    if tag == "i":
        return int(e[1])
    if tag == "f":
        return float(e[1])
    if tag == "c":
        return complex(float(e[1]), float(e[2]))
    if tag == "b":
        return bytes.fromhex(e[1])
    if tag in ("l", "t", "S", "F"):
        items = [_decode(x) for x in e[1]]
        return {"l": list, "t": tuple, "S": set, "F": frozenset}[tag](items)
    if tag == "d":
        return {_decode(k): _decode(v) for k, v in e[1]}
    raise ValueError(tag)

def _rewrite(src):
    # Rewrite each assert of a test. Returns (new_source, sites) where sites[k] is
    # ("eq", expected) for `assert X == <literal>` (X is sent, the literal stays here) or
    # ("truthy", None) for any other assert (its value, with == made type-strict, is sent).
    import ast
    tree = ast.parse(src, "<test>", "exec")
    sites = []

    def literal(node):
        try:
            return True, ast.literal_eval(node)
        except Exception:
            return False, None

    class T(ast.NodeTransformer):
        def visit_Assert(self, node):
            self.generic_visit(node)
            test = node.test
            k = len(sites)
            if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(
                    test.ops[0], ast.Eq):
                left, right = test.left, test.comparators[0]
                okr, vr = literal(right)
                okl, vl = literal(left) if not okr else (False, None)
                if okr or okl:
                    sites.append(("eq", vr if okr else vl))
                    value = left if okr else right
                    call = ast.Call(ast.Name("__sage_check__", ast.Load()),
                                    [ast.Constant(k), value], [])
                    return ast.copy_location(ast.Expr(call), node)
                test = ast.Call(ast.Name("__sage_eq__", ast.Load()), [left, right], [])
            sites.append(("truthy", None))
            call = ast.Call(ast.Name("__sage_check__", ast.Load()),
                            [ast.Constant(k), test, ast.Constant(True)], [])
            return ast.copy_location(ast.Expr(call), node)

    tree = ast.fix_missing_locations(T().visit(tree))
    return ast.unparse(tree), sites

def _judge(wuid, huid, job_in):
    # H: fork W, drop privileges, read ONE job from fd job_in, report on fd 3.
    job_r, job_w = os.pipe()
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(3)
            os.close(job_w)
            os.close(out_r)
            _worker(job_r, out_w, wuid)
        except BaseException:
            pass
        _flush_exit()
    os.close(job_r)
    os.close(out_w)
    _drop(huid)
    _prctl(4, 0)  # PR_SET_DUMPABLE 0: no ptrace, no /proc/<pid>/mem for same-uid processes
    import json, select, signal
    os.set_inheritable(3, False)
    job = json.loads(_read_all(job_in).decode("ascii"))
    os.close(job_in)

    def report(**ev):
        try:
            _write_all(3, (json.dumps(ev, ensure_ascii=True) + "\n").encode("ascii"))
        except BaseException:
            pass

    tests, sites = [], []
    for i, src in enumerate(job.get("tests", [])):
        try:
            new, s = _rewrite(src)
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
            fail = {"exc": "EarlyExit", "msg": "test exited before finishing (status %d)"
                    % (os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1)}
        else:
            missing = [k for k, (kind, _) in enumerate(sites[i]) if kind == "eq"
                       and k not in s["seen"]]
            if missing:
                fail = {"exc": "AssertionError",
                        "msg": "assertion %d was never checked" % missing[0]}
        if fail is None:
            report(ev="test", i=i, ok=True)
        else:
            report(ev="test", i=i, ok=False, **{k: fail.get(k) for k in
                   ("exc", "msg", "errno", "signal") if fail.get(k) is not None})

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
                        got = _decode(ev["v"])
                        ok = got == expected
                        if not ok:
                            msg = "assertion %d: got %s" % (k, repr(got)[:120])
                    except BaseException:
                        msg = "assertion %d: undecodable result" % k
                else:
                    msg = "assertion %d: %s" % (k, str(ev.get("bad"))[:120])
            else:
                ok = ev.get("t") is True
                msg = "assertion %d failed" % k
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
            report(**{k: v for k, v in ev.items() if k in (
                "ev", "exc", "msg", "errno", "code")})
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
                    if line[:1] != b"{":
                        continue
                    try:
                        ev = json.loads(line)
                    except Exception:
                        continue
                    if isinstance(ev, dict):
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

_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWNET = 0x00020000, 0x08000000, 0x40000000
_MS_REC, _MS_PRIVATE = 1 << 14, 1 << 18

def _job_process(hdr, fds, wuid, huid, libc):
    # H, forked by the zygote as root (inside the zygote's bwrap namespaces and cgroups): take
    # private mount and IPC namespaces with fresh size-capped tmpfs for the
    # cwd, /tmp and /dev/shm (so nothing a run writes outlives it or reaches the next run),
    # drop every capability from the bounding set, then judge exactly like a fresh harness.
    import ctypes
    os.setsid()
    high = [os.dup(fd) for fd in fds]  # received fds may collide with 0..3
    for fd in fds:
        os.close(fd)
    for dst, src in enumerate(high):  # job -> stdin, out -> 1, err -> 2, report -> 3
        os.dup2(src, dst)
    os.closerange(4, 1 << 16)
    with open("/proc/self/oom_score_adj", "w") as fh:  # the OOM killer takes jobs, not the zygote
        fh.write("1000")

    def check(rc, what):
        if rc != 0:
            err = ctypes.get_errno()
            raise OSError(err, "%s: %s" % (what, os.strerror(err)))

    def tmpfs(path, opts):
        check(libc.mount(b"tmpfs", path.encode(), b"tmpfs", 0, opts.encode()), "mount " + path)

    check(libc.unshare(_CLONE_NEWNS | _CLONE_NEWIPC | _CLONE_NEWNET), "unshare")
    check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "make / private")
    size = int(hdr["disk_bytes"])
    tmpfs("/tmp", "mode=1777,size=%d" % size)
    work = hdr["workdir"]
    os.mkdir(work, 0o700)
    owner = ",uid=%d,gid=%d" % (wuid, wuid) if wuid >= 0 else ""
    tmpfs(work, "mode=0700,size=%d%s" % (size, owner))
    if os.path.isdir("/dev/shm"):
        tmpfs("/dev/shm", "mode=1777,size=%d" % size)
    os.chdir(work)
    for cap in range(64):  # PR_CAPBSET_DROP
        if libc.prctl(24, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:
            break
    _judge(wuid, huid, 0)

def _zygote(ctl, wuid, huid):
    # The zygote Z: a long-lived root process inside one bwrap/unshare sandbox. It never reads a
    # job: for each request it forks H with the request's pipes and waits for it.
    import ast, ctypes, gc, json, resource, select, signal, socket, types  # preloaded for H, W
    libc = ctypes.CDLL(None, use_errno=True)
    sock = socket.socket(fileno=ctl)
    os.set_inheritable(ctl, False)
    _seccomp()  # once for every job forked from here (the zygote needs no keyrings either)
    gc.freeze()  # forked children's collections skip (and so do not copy) inherited objects
    sock.send(b'{"ev": "ready"}')
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, 1 << 16, 8)
        except InterruptedError:
            continue
        except OSError:
            break
        if not msg:
            break
        try:
            hdr = json.loads(msg)
            if len(fds) != 4:
                raise ValueError("expected 4 fds, got %d" % len(fds))
        except BaseException as exc:
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"ev": "refused", "msg": str(exc)[:200]}).encode())
            continue
        pid = os.fork()
        if pid == 0:
            try:
                sock.close()
                _job_process(hdr, fds, wuid, huid, libc)
            except BaseException as exc:
                try:
                    _write_all(3, (json.dumps({"ev": "harness_error", "exc": type(exc).__name__,
                               "msg": str(exc)[:200]}) + "\n").encode("ascii"))
                except BaseException:
                    pass
            _flush_exit()
        for fd in fds:
            os.close(fd)
        while True:
            try:
                status = os.waitpid(pid, 0)[1]
                break
            except InterruptedError:
                continue
            except ChildProcessError:
                status = -1
                break
        try:
            sock.send(json.dumps({"ev": "exit", "status": status}).encode())
        except OSError:
            break

if sys.argv[1] == "zygote":
    _zygote(int(sys.argv[4]), int(sys.argv[2]), int(sys.argv[3]))
else:
    _rfd = int(sys.argv[3])
    if _rfd != 3:
        os.dup2(_rfd, 3)
        os.close(_rfd)
    _judge(int(sys.argv[1]), int(sys.argv[2]), 0)
_flush_exit()
"""


# --------------------------------------------------------------------------------------------
# Environment probing
# --------------------------------------------------------------------------------------------

_PROBE_LOCK = threading.Lock()
_LEVEL: str | None = None
_CGROUPS: dict[str, bool] | None = None


def _reachable_by_others(path: str) -> bool:
    """Whether ``path`` can be executed by an unprivileged other user (o+x on every parent)."""
    try:
        real = os.path.realpath(path)
        if not os.stat(real).st_mode & stat.S_IXOTH:
            return False
        parent = os.path.dirname(real)
        while True:
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
            if parent == "/":
                return True
            parent = os.path.dirname(parent)
    except OSError:
        return False


def default_python() -> str:
    """The interpreter the sandbox runs: ``sys.executable`` unless the dropped uid cannot reach it.

    As root, an interpreter under a mode-700 directory (e.g. pyenv under ``/root``) is not
    executable by uid 65534; then ``/usr/bin/python3`` is used.
    """
    if os.geteuid() != 0 or _reachable_by_others(sys.executable):
        return sys.executable
    for cand in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if _reachable_by_others(cand):
            return cand
    return sys.executable


def _bwrap_argv(
    workdir: str | None, python: str, disk_bytes: int, *, zygote: bool = False
) -> list[str]:
    """Build bubblewrap's argv up to ``--``.

    ``workdir`` gets a private tmpfs and becomes the cwd; a ``zygote`` keeps the capabilities it
    needs to give every job its own mounts.
    """
    argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    keep = [os.path.realpath(python)] + ([os.path.realpath(workdir)] if workdir else [])
    for path in _HIDE_PATHS:
        if os.path.isdir(path) and not any(k == path or k.startswith(path + "/") for k in keep):
            argv += ["--tmpfs", path]
    argv += ["--perms", "1777", "--size", str(disk_bytes), "--tmpfs", "/tmp"]
    if workdir:
        argv += ["--perms", "0777", "--size", str(disk_bytes), "--tmpfs", workdir]
    argv += ["--chdir", workdir or "/tmp"]
    argv += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
    argv += ["--unshare-cgroup-try", "--die-with-parent", "--new-session"]
    if os.geteuid() == 0:
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        if zygote:
            argv += ["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"]
    return argv + ["--"]


_UNSHARE_ARGV = ["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]


def _probe_level(level: str, python: str) -> bool:
    workdir = tempfile.mkdtemp(prefix="sage-probe-")
    try:
        code = "import socket; socket.socket().connect_ex(('127.0.0.1', 9)); print('ok')"
        inner = [python, "-I", "-S", "-c", code]
        if level == "bwrap":
            if shutil.which("bwrap") is None:
                return False
            argv = _bwrap_argv(workdir, python, 1 << 20) + inner
        elif level == "unshare":
            if shutil.which("unshare") is None:
                return False
            argv = _UNSHARE_ARGV + inner
        else:
            return True
        out = subprocess.run(
            argv, capture_output=True, timeout=20, env=dict(_CHILD_ENV), cwd=workdir
        )
        return out.returncode == 0 and out.stdout.strip() == b"ok"
    except Exception:
        return False
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def isolation_level() -> str:
    """The isolation level in use (``"bwrap"``, ``"unshare"`` or ``"rlimits"``).

    Probed once per process, strongest first; ``SAGE_SANDBOX_ISOLATION`` forces a level (it is
    still probed; an unusable forced level falls back with a warning). Logged with ``logging``.
    """
    global _LEVEL
    with _PROBE_LOCK:
        if _LEVEL is not None:
            return _LEVEL
        python = default_python()
        forced = os.environ.get("SAGE_SANDBOX_ISOLATION", "").strip().lower()
        order = list(ISOLATION_LEVELS)
        if forced in ISOLATION_LEVELS:
            order = order[order.index(forced) :]
        if sys.platform != "linux":
            order = ["rlimits"]
        for level in order:
            if _probe_level(level, python):
                _LEVEL = level
                break
            log.warning("sandbox: isolation level %r unavailable here, falling back", level)
        assert _LEVEL is not None
        cg = cgroups_available()
        log.info(
            "sandbox: isolation=%s, cgroups(pids=%s, memory=%s), root=%s, python=%s",
            _LEVEL,
            cg["pids"],
            cg["memory"],
            os.geteuid() == 0,
            python,
        )
        if _LEVEL == "rlimits":
            log.warning(
                "sandbox: no network/PID namespace; untrusted code keeps network access "
                "(see docs/sandbox.md)"
            )
        return _LEVEL


def cgroups_available() -> dict[str, bool]:
    """Which cgroup v1 controllers (``pids``, ``memory``) this process can create groups in."""
    global _CGROUPS
    if _CGROUPS is not None:
        return _CGROUPS
    found = {}
    for ctrl in ("pids", "memory"):
        ok = False
        if sys.platform == "linux" and os.environ.get("SAGE_SANDBOX_NO_CGROUPS") != "1":
            base = os.path.join(_CG_ROOT, ctrl, _CG_DIR)
            probe = os.path.join(base, f"probe-{os.getpid()}")
            try:
                os.makedirs(base, exist_ok=True)
                os.mkdir(probe)
                os.rmdir(probe)
                ok = True
            except OSError:
                ok = False
            if ok:
                _sweep_stale(base)
        found[ctrl] = ok
    _CGROUPS = found
    return found


def _sweep_stale(base: str) -> None:
    """Remove per-run cgroups left by sandbox hosts that no longer exist (e.g. killed hosts)."""
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        try:
            owner = int(name[1:].split("-", 1)[0])
        except ValueError:
            continue
        if name.startswith("r") and not os.path.exists(f"/proc/{owner}"):
            try:
                os.rmdir(os.path.join(base, name))
            except OSError:
                pass


# --------------------------------------------------------------------------------------------
# One sandboxed harness process
# --------------------------------------------------------------------------------------------

_COUNTER = itertools.count()
_LAUNCH_QUEUE: queue.SimpleQueue = queue.SimpleQueue()
_LAUNCHER: list[threading.Thread] = []
_LAUNCHER_LOCK = threading.Lock()


def _launcher_loop() -> None:
    while True:
        future, args, kwargs = _LAUNCH_QUEUE.get()
        try:
            future.set_result(subprocess.Popen(*args, **kwargs))
        except BaseException as exc:
            future.set_exception(exc)


def _popen(*args: Any, **kwargs: Any) -> subprocess.Popen:
    """``subprocess.Popen`` run on one thread that lives as long as the process.

    bubblewrap's ``--die-with-parent`` (``PR_SET_PDEATHSIG``) fires when the *thread* that
    started it exits, so a sandbox started from a short-lived thread (a ``verify_batch`` worker,
    a pool refill) would be SIGKILLed under a later job. Started from this thread, sandboxes die
    only with the process.
    """
    with _LAUNCHER_LOCK:
        if not _LAUNCHER or not _LAUNCHER[0].is_alive():
            _LAUNCHER[:] = [
                threading.Thread(target=_launcher_loop, daemon=True, name="sage-sandbox-launcher")
            ]
            _LAUNCHER[0].start()
        launcher = _LAUNCHER[0]
    if threading.current_thread() is launcher:
        return subprocess.Popen(*args, **kwargs)
    future: Future = Future()
    _LAUNCH_QUEUE.put((future, args, kwargs))
    return future.result()


@dataclass
class RawRun:
    returncode: int | None
    timed_out: bool
    oom_killed: bool
    stdout: bytes
    stderr: bytes
    report: bytes
    duration_s: float


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _kill_and_reap(proc: subprocess.Popen) -> None:
    """SIGKILL a sandbox wrapper started with ``start_new_session`` (its group too), then reap it.

    Only while the child is unreaped: until then its pid (= its process group) cannot be reused.
    After ``wait`` the number may already belong to someone else (``pid_max`` can be as low as
    32768), e.g. another sandbox, so a reaped child is left alone.
    """
    if proc.returncode is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.kill()
    except OSError:
        pass
    proc.wait()


def _kill_members(cgroup: _Cgroup, pids: list[int]) -> None:
    """SIGKILL ``pids`` that are still members of ``cgroup``, never a recycled pid.

    A pid read from ``cgroup.procs`` may exit and be reused by an unrelated process before the
    signal is sent. A pidfd pins the process it was opened for, so each pid is opened first and
    signalled only if it is still listed in the cgroup afterwards (no process can join a group
    whose ``pids.max`` is 0 by forking). Falls back to ``kill`` where pidfds are unavailable.
    """
    opened: list[tuple[int, int]] = []
    try:
        for pid in pids:
            try:
                opened.append((pid, os.pidfd_open(pid)))
            except ProcessLookupError:
                continue
            except (AttributeError, OSError):  # no pidfd support: plain kill
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        members = set(cgroup.pids()) if opened else set()
        for pid, fd in opened:
            if pid in members:
                try:
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
                except OSError:
                    pass
    finally:
        for _pid, fd in opened:
            os.close(fd)


class _Cgroup:
    """A per-run cgroup v1 group in the ``pids`` and/or ``memory`` controllers."""

    def __init__(self, pids_max: int, memory_bytes: int) -> None:
        self.pids_max = pids_max
        avail = cgroups_available()
        name = f"r{os.getpid()}-{next(_COUNTER)}"
        self.paths: dict[str, str] = {}
        for ctrl in ("pids", "memory"):
            if not avail[ctrl]:
                continue
            path = os.path.join(_CG_ROOT, ctrl, _CG_DIR, name)
            try:
                os.mkdir(path)
                if ctrl == "pids":
                    _write(os.path.join(path, "pids.max"), str(pids_max))
                else:
                    _write(os.path.join(path, "memory.limit_in_bytes"), str(memory_bytes))
                    try:
                        _write(os.path.join(path, "memory.memsw.limit_in_bytes"), str(memory_bytes))
                    except OSError:
                        pass
                self.paths[ctrl] = path
            except OSError as exc:
                log.debug("sandbox: cgroup %s unavailable: %s", path, exc)
                try:
                    os.rmdir(path)
                except OSError:
                    pass

    def procs_file(self, ctrl: str) -> str:
        return os.path.join(self.paths[ctrl], "cgroup.procs") if ctrl in self.paths else os.devnull

    def pids(self) -> list[int]:
        out: set[int] = set()
        for path in self.paths.values():
            try:
                with open(os.path.join(path, "cgroup.procs")) as fh:
                    out.update(int(x) for x in fh.read().split())
            except (OSError, ValueError):
                pass
        return sorted(out)

    def oom_kills(self) -> int:
        path = self.paths.get("memory")
        if path is None:
            return 0
        try:
            with open(os.path.join(path, "memory.oom_control")) as fh:
                for line in fh:
                    if line.startswith("oom_kill "):
                        return int(line.split()[1])
        except (OSError, ValueError):
            pass
        return 0

    def kill_all(self, keep: frozenset[int] = frozenset()) -> bool:
        """Freeze forking (``pids.max`` = 0) and SIGKILL every process but ``keep``.

        Repeats until none is left (for up to about 0.4 s), then restores ``pids.max`` if
        processes were kept (a zygote's own). Returns whether no other process is left.
        """
        pids_dir = self.paths.get("pids")
        if pids_dir is not None:
            try:
                _write(os.path.join(pids_dir, "pids.max"), "0")
            except OSError:
                pass
        pids: list[int] = []
        for _ in range(200):
            pids = [pid for pid in self.pids() if pid not in keep]
            if not pids:
                break
            _kill_members(self, pids)
            time.sleep(0.002)
        if keep and pids_dir is not None:
            self.set_pids_max(self.pids_max)
        return not pids

    def set_pids_max(self, value: int) -> None:
        """Set ``pids.max`` (and remember it)."""
        self.pids_max = value
        if "pids" in self.paths:
            try:
                _write(os.path.join(self.paths["pids"], "pids.max"), str(value))
            except OSError:
                pass

    def lower_memory_limit(self, value: int) -> None:
        """Lower the memory and memory+swap limits to ``value`` bytes.

        memsw must stay >= the memory limit, so the memory limit goes first.
        """
        path = self.paths.get("memory")
        if path is None:
            return
        for name in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"):
            try:
                _write(os.path.join(path, name), str(value))
            except OSError:
                pass

    def memory_stat(self) -> dict[str, int]:
        """``memory.stat`` of the group as ``{name: bytes}`` (empty without the controller)."""
        path = self.paths.get("memory")
        out: dict[str, int] = {}
        try:
            with open(os.path.join(path, "memory.stat")) as fh:  # type: ignore[arg-type]
                for line in fh:
                    name, _, value = line.partition(" ")
                    out[name] = int(value)
        except (OSError, TypeError, ValueError):
            pass
        return out

    def held(self) -> int:
        """Usage that reclaim cannot give back, bytes.

        All but clean page cache: tmpfs, anonymous and kernel memory (e.g. pipe buffers).
        """
        stat = self.memory_stat()
        return self.usage() - stat.get("cache", 0) + stat.get("shmem", 0)

    def usage(self) -> int:
        """Current memory usage of the group, bytes (0 without the memory controller)."""
        path = self.paths.get("memory")
        try:
            with open(os.path.join(path, "memory.usage_in_bytes")) as fh:  # type: ignore[arg-type]
                return int(fh.read())
        except (OSError, TypeError, ValueError):
            return 0

    def destroy(self) -> None:
        self.kill_all()
        for path in self.paths.values():
            for _ in range(100):
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.005)
        self.paths = {}


@dataclass
class SandboxConfig:
    """Limits of one sandboxed run.

    Attributes:
        timeout_s: Wall-clock budget from the moment the job is handed over.
        memory_mb: ``RLIMIT_AS`` per process and the run's memory cgroup limit (plus harness
            overhead), MiB.
        max_output_bytes: Cap on captured stdout and on captured stderr, bytes each.
        max_processes: ``pids.max`` of the run's cgroup (and ``RLIMIT_NPROC`` without cgroups).
        file_size_mb: ``RLIMIT_FSIZE``, MiB.
        disk_mb: Size of the private tmpfs working directory and ``/tmp`` (bwrap only), MiB.
        open_files: ``RLIMIT_NOFILE``.
        python: Interpreter (must be executable by the dropped uid); default
            :func:`default_python`.
    """

    timeout_s: float = 10.0
    memory_mb: int = 1024
    max_output_bytes: int = 65536
    max_processes: int = 64
    file_size_mb: int = 16
    disk_mb: int = 64
    open_files: int = 64
    python: str | None = None

    def limits(self, use_cgroup_pids: bool) -> list[tuple[str, int, int]]:
        cpu = math.ceil(self.timeout_s) + 1
        mem = self.memory_mb << 20
        fsize = self.file_size_mb << 20
        # With a pids cgroup the per-run limit is the cgroup's; RLIMIT_NPROC (per uid, shared by
        # parallel runs) is then only a generous backstop.
        nproc = 4096 if use_cgroup_pids else self.max_processes
        limits = [
            ("RLIMIT_AS", mem, mem),
            ("RLIMIT_CPU", cpu, cpu + 1),
            ("RLIMIT_FSIZE", fsize, fsize),
            ("RLIMIT_NOFILE", self.open_files, self.open_files),
            ("RLIMIT_CORE", 0, 0),
            ("RLIMIT_STACK", 16 << 20, 16 << 20),
        ]
        if os.geteuid() == 0 or not use_cgroup_pids:
            limits.append(("RLIMIT_NPROC", nproc, nproc))
        return limits


def _pump(
    stdin_fd: int,
    close_stdin: Any,
    payload: bytes,
    caps: dict[int, int],
    deadline: float,
    *,
    exited: Any,
    kill: Any,
    wake: dict[int, Any] | None = None,
) -> tuple[dict[int, bytearray], bool]:
    """Feed ``payload`` to ``stdin_fd`` and drain the ``caps`` fds.

    Keeps at most ``caps[fd]`` bytes of each, until they close, the harness has exited
    (``exited()``) and a grace period to drain its pipes has passed, or ``deadline``
    (``time.monotonic()``) hits; calls ``kill()`` once when the harness exits or times out.
    ``wake`` maps extra fds to callbacks run when they become readable (the zygote's control
    socket). Returns ``(buffers, timed_out)``.
    """
    bufs = {fd: bytearray() for fd in caps}
    os.set_blocking(stdin_fd, False)
    view = memoryview(payload)
    sel = selectors.DefaultSelector()
    for fd in caps:
        sel.register(fd, selectors.EVENT_READ)
    for fd in wake or {}:
        sel.register(fd, selectors.EVENT_READ)
    sel.register(stdin_fd, selectors.EVENT_WRITE)
    pending = set(caps) | {stdin_fd}
    timed_out = False
    exited_at: float | None = None
    try:
        while pending:
            now = time.monotonic()
            if exited_at is None and exited():
                exited_at = now
                kill()
            limit = exited_at + _DRAIN_GRACE_S if exited_at is not None else deadline
            if now >= limit:
                if exited_at is None:
                    timed_out = True
                    kill()
                    exited_at = now
                    continue
                break
            for key, _ in sel.select(min(0.1, limit - now)):
                fd = key.fd
                if wake and fd in wake:
                    if not wake[fd]():
                        sel.unregister(fd)
                    continue
                if fd == stdin_fd:
                    try:
                        sent = os.write(fd, view[:65536])
                        view = view[sent:]
                    except BlockingIOError:
                        continue
                    except OSError:
                        view = view[:0]
                    if not view:
                        sel.unregister(fd)
                        pending.discard(fd)
                        close_stdin()
                    continue
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(fd)
                    pending.discard(fd)
                    continue
                room = caps[fd] - len(bufs[fd])
                if room > 0:
                    bufs[fd] += data[:room]
    finally:
        sel.close()
    return bufs, timed_out


class _Harness:
    """One pre-started sandboxed harness process, waiting for exactly one job on stdin."""

    def __init__(self, cfg: SandboxConfig) -> None:
        self.cfg = cfg
        python = cfg.python or default_python()
        if not os.path.exists(python):
            raise FileNotFoundError(f"interpreter not found: {python}")
        level = isolation_level()
        root = os.geteuid() == 0
        self.workdir = tempfile.mkdtemp(prefix="sage-code-")
        self.cgroup: _Cgroup | None = None
        self.report_r = -1
        self.proc: subprocess.Popen | None = None
        try:
            if root:
                os.chown(self.workdir, SANDBOX_UID, SANDBOX_UID)
            os.chmod(self.workdir, 0o700 if root else 0o700)
            inner = [python, "-I", "-c", HARNESS]
            inner += [str(SANDBOX_UID), str(HARNESS_UID)] if root else ["-1", "-1"]
            if level == "bwrap":
                argv = _bwrap_argv(self.workdir, python, cfg.disk_mb << 20) + inner
            elif level == "unshare":
                argv = _UNSHARE_ARGV + inner
            else:
                argv = inner
            cg = cgroups_available()
            if cg["pids"] or cg["memory"]:
                self.cgroup = _Cgroup(
                    cfg.max_processes + 4, (cfg.memory_mb << 20) + _HARNESS_OVERHEAD
                )
                argv = _join_cgroup_argv(self.cgroup) + argv
            self.report_r, report_w = os.pipe()
            argv.append(str(report_w))
            try:
                self.proc = _popen(
                    argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=self.workdir,
                    env=dict(_CHILD_ENV),
                    pass_fds=(report_w,),
                    close_fds=True,
                    start_new_session=True,
                )
            finally:
                os.close(report_w)
        except BaseException:
            self.cleanup()
            raise

    def run(self, job: dict) -> RawRun:
        """Hand over ``job``, wait for it under the wall-clock limit, then destroy everything."""
        assert self.proc is not None
        job = dict(
            job, limits=self.cfg.limits("pids" in (self.cgroup.paths if self.cgroup else {}))
        )
        payload = json.dumps(job, ensure_ascii=True).encode("ascii")
        start = time.monotonic()
        try:
            raw = self._communicate(payload, start + self.cfg.timeout_s)
        finally:
            oom = self.cgroup.oom_kills() if self.cgroup else 0
            self.cleanup()
        raw.oom_killed = oom > 0
        raw.duration_s = time.monotonic() - start
        return raw

    def _communicate(self, payload: bytes, deadline: float) -> RawRun:
        proc = self.proc
        assert proc is not None and proc.stdin and proc.stdout and proc.stderr
        cap = self.cfg.max_output_bytes
        out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
        bufs, timed_out = _pump(
            proc.stdin.fileno(),
            proc.stdin.close,
            payload,
            {out_fd: cap, err_fd: cap, self.report_r: _REPORT_CAP_BYTES},
            deadline,
            exited=lambda: proc.poll() is not None,
            kill=self._kill,
        )
        if not timed_out:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
        self._kill()
        return RawRun(
            returncode=proc.returncode,
            timed_out=timed_out,
            oom_killed=False,
            stdout=bytes(bufs[out_fd]),
            stderr=bytes(bufs[err_fd]),
            report=bytes(bufs[self.report_r]),
            duration_s=0.0,
        )

    def _kill(self) -> None:
        if self.cgroup is not None:
            self.cgroup.kill_all()
        if self.proc is not None:
            _kill_and_reap(self.proc)

    def cleanup(self) -> None:
        """Kill everything the run started and remove its cgroup and working directory."""
        try:
            self._kill()
        finally:
            if self.proc is not None:
                for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                    try:
                        if stream is not None:
                            stream.close()
                    except Exception:
                        pass
            if self.report_r >= 0:
                os.close(self.report_r)
                self.report_r = -1
            if self.cgroup is not None:
                self.cgroup.destroy()
                self.cgroup = None
            shutil.rmtree(self.workdir, ignore_errors=True)


#: Where a zygote-forked job runs (a fresh tmpfs per job, inside the job's own mount namespace).
ZYGOTE_WORKDIR = "/tmp/sage-run"
_ZYGOTE_START_S = 30.0
_ZYGOTE_EXIT_WAIT_S = 5.0
_ZYGOTE_RELEASE_WAIT_S = 0.25
_ZYGOTE_HELD_SLACK = 8 << 20
_ZYGOTE_LOGGED: list[bool] = []
_HARNESS_OVERHEAD = 96 << 20


def zygotes_available() -> bool:
    """Whether :class:`SandboxPool` forks jobs from long-lived zygotes (see :class:`_Zygote`).

    Needs Linux, root (the zygote gives each job its own mounts), the ``bwrap`` isolation level
    (whose init reaps orphans) and a writable ``pids`` cgroup (which is what kills a job's
    leftovers once jobs no longer get their own PID namespace). ``SAGE_SANDBOX_ZYGOTE=0`` turns
    zygotes off; a pool whose zygote fails to start falls back for its lifetime, with a warning.
    """
    return (
        sys.platform == "linux"
        and os.environ.get("SAGE_SANDBOX_ZYGOTE", "1") != "0"
        and os.geteuid() == 0
        and isolation_level() == "bwrap"
        and cgroups_available()["pids"]
    )


class _ZygoteLost(RuntimeError):
    """The zygote died before it took the job (the job did not run; safe to retry)."""


def _wait_status_code(status: Any) -> int | None:
    """A ``waitpid`` status as ``Popen.returncode`` (``-signal`` when killed by a signal)."""
    if type(status) is not int or status < 0:
        return None
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return None


class _Zygote:
    """A long-lived bwrap sandbox (as root) that forks one judging harness per job.

    Start-up (bwrap, interpreter, imports) is paid once per zygote. The zygote lives in its own
    ``pids`` (and, when available, ``memory``) cgroup, so each job is born in it by ``fork``
    with no cgroup set-up of its own. Each job still gets its own process tree, its own mount
    and IPC namespaces with fresh size-capped tmpfs for the cwd, ``/tmp`` and ``/dev/shm``,
    and the same uid drop as a fresh harness. A zygote runs one job at a time, so untrusted code
    never shares the zygote's PID namespace with another job, and when a job ends everything it
    started (every process in the cgroup but the zygote's own) is killed before the next one.
    The zygote never reads a job: it receives four pipe ends over a Unix socket and forks the
    harness, which reads the job. Jobs run with ``oom_score_adj`` 1000, so the OOM killer of
    the memory cgroup picks them before the zygote.
    """

    def __init__(self, cfg: SandboxConfig) -> None:
        self.cfg = cfg
        python = cfg.python or default_python()
        if not os.path.exists(python):
            raise FileNotFoundError(f"interpreter not found: {python}")
        self.alive = False
        self.jobs = 0
        self.proc: subprocess.Popen | None = None
        self.residents: frozenset[int] = frozenset()
        self._stderr = tempfile.TemporaryFile()
        self.sock, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # generous until the zygote's own processes are known; tightened below
        self.cgroup = _Cgroup(cfg.max_processes + 16, 1 << 40)
        try:
            if "pids" not in self.cgroup.paths:
                raise RuntimeError("a zygote needs a pids cgroup")
            inner = [python, "-I", "-c", HARNESS, "zygote", str(SANDBOX_UID), str(HARNESS_UID)]
            inner.append(str(child.fileno()))
            argv = _bwrap_argv(None, python, 1 << 20, zygote=True) + inner
            self.proc = _popen(
                _join_cgroup_argv(self.cgroup) + argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
                cwd="/",
                env=dict(_CHILD_ENV),
                pass_fds=(child.fileno(),),
                close_fds=True,
                start_new_session=True,
            )
            child.close()
            ready = b""
            if _select_readable(self.sock, _ZYGOTE_START_S):
                try:
                    ready = self.sock.recv(4096)
                except OSError:
                    ready = b""
            if ready != b'{"ev": "ready"}':
                raise RuntimeError(f"sandbox zygote did not start: {self._errors()}")
            self.residents = frozenset(self.cgroup.pids())
            n = len(self.residents)
            self.cgroup.set_pids_max(cfg.max_processes + 4 + n)
            self.base_held = self.cgroup.held()
            self.cgroup.lower_memory_limit(
                (cfg.memory_mb << 20) + _HARNESS_OVERHEAD + self.cgroup.usage()
            )
        except BaseException:
            child.close()
            self.close()
            raise
        self.sock.setblocking(False)
        self.alive = True
        if not _ZYGOTE_LOGGED:
            _ZYGOTE_LOGGED.append(True)
            log.info(
                "sandbox: zygote fast path on (one long-lived sandbox per concurrent job; "
                "SAGE_SANDBOX_ZYGOTE=0 turns it off)"
            )

    def run(self, job: dict) -> RawRun:
        """Run one harness job in a fresh process tree forked by the zygote.

        Raises:
            _ZygoteLost: If the zygote is gone before it took the job (nothing ran).
        """
        cfg = self.cfg
        if not self.alive or self.proc is None or self.proc.poll() is not None:
            self.close()
            raise _ZygoteLost("zygote exited")
        cg = self.cgroup
        payload = json.dumps(dict(job, limits=cfg.limits(True)), ensure_ascii=True).encode()
        opened: list[int] = []
        try:
            for _ in range(4):
                opened += os.pipe()
            job_r, job_w, out_r, out_w, err_r, err_w, rep_r, rep_w = opened
            hdr = {"workdir": ZYGOTE_WORKDIR, "disk_bytes": cfg.disk_mb << 20}
            ooms = cg.oom_kills()
            try:
                socket.send_fds(self.sock, [json.dumps(hdr).encode()], [job_r, out_w, err_w, rep_w])
            except OSError as exc:
                self.alive = False
                raise _ZygoteLost(f"zygote is gone: {exc}") from exc
            for fd in (job_r, out_w, err_w, rep_w):
                os.close(fd)
                opened.remove(fd)
            start = time.monotonic()
            exit_ev: list[dict] = []

            def on_ctl() -> bool:
                try:
                    msg = self.sock.recv(4096)
                except BlockingIOError:
                    return True
                except OSError:
                    msg = b""
                try:
                    ev = json.loads(msg) if msg else {"ev": "lost"}
                except ValueError:
                    ev = {"ev": "lost"}
                if ev.get("ev") != "exit":
                    self.alive = False
                    time.sleep(0.05)
                    log.warning(
                        "sandbox: zygote lost during a job (%s; sandbox exit %s, OOM kills %d): %s",
                        ev.get("ev"),
                        self.proc.poll() if self.proc else None,
                        cg.oom_kills() - ooms,
                        self._errors(),
                    )
                exit_ev.append(ev)
                return False

            def close_job_w() -> None:
                os.close(job_w)
                opened.remove(job_w)

            emptied: list[bool] = []  # once per job: when the harness exits or times out

            def kill() -> None:
                if not emptied:
                    emptied.append(cg.kill_all(keep=self.residents))

            cap = cfg.max_output_bytes
            bufs, timed_out = _pump(
                job_w,
                close_job_w,
                payload,
                {out_r: cap, err_r: cap, rep_r: _REPORT_CAP_BYTES},
                start + cfg.timeout_s,
                exited=lambda: bool(exit_ev),
                kill=kill,
                wake={self.sock.fileno(): on_ctl},
            )
            kill()
            if not exit_ev:  # pipes closed first, or timed out: the harness is dead by now
                if _select_readable(self.sock, _ZYGOTE_EXIT_WAIT_S):
                    on_ctl()
                else:
                    self.alive = False
            oom = cg.oom_kills() - ooms
            # never reuse a zygote whose group could not be emptied or still holds memory
            if not emptied[0] or not self._memory_released():
                self.alive = False
            self.jobs += 1
            ev = exit_ev[0] if exit_ev else {}
            return RawRun(
                returncode=_wait_status_code(ev.get("status")),
                timed_out=timed_out,
                oom_killed=oom > 0,
                stdout=bytes(bufs[out_r]),
                stderr=bytes(bufs[err_r]),
                report=bytes(bufs[rep_r]),
                duration_s=time.monotonic() - start,
            )
        finally:
            for fd in opened:
                try:
                    os.close(fd)
                except OSError:
                    pass
            if not self.alive:
                self.close()

    def _errors(self) -> str:
        """The tail of what the zygote wrote to its stderr (a traceback if it crashed)."""
        try:
            self._stderr.seek(0)
            return self._stderr.read()[-600:].decode("utf-8", "replace").strip() or "no output"
        except (OSError, ValueError):
            return "unreadable"

    def _memory_released(self) -> bool:
        """Whether the job's memory left the zygote's cgroup once its processes were dead.

        A job can keep memory alive after death by sending descriptors (of its tmpfs files,
        memfds, full pipes ...) around a cycle of Unix sockets, which the kernel frees lazily;
        the memory would stay charged to this cgroup and shrink every later job's limit. Such
        cycles are collected by the kernel's Unix-socket garbage collector, which closing any
        Unix socket schedules. If memory the group cannot reclaim (:meth:`_Cgroup.held`) is
        still above the zygote's baseline after two collections, the zygote is retired.
        """
        cg = self.cgroup

        def back() -> bool:
            return cg.held() <= self.base_held + _ZYGOTE_HELD_SLACK

        if back():
            return True
        for _ in range(2):
            a, b = socket.socketpair()
            a.close()
            b.close()
            deadline = time.monotonic() + _ZYGOTE_RELEASE_WAIT_S
            while time.monotonic() < deadline:
                time.sleep(0.005)
                if back():
                    return True
        log.info(
            "sandbox: a job left %d MiB pinned; retiring its zygote",
            (cg.held() - self.base_held) >> 20,
        )
        return False

    def close(self) -> None:
        """Kill the zygote, its sandbox and anything left in its cgroup; remove the cgroup."""
        self.alive = False
        if self.proc is not None:
            _kill_and_reap(self.proc)
        if self.cgroup is not None:
            self.cgroup.destroy()
        for closeable in (self.sock, self._stderr):
            try:
                closeable.close()
            except OSError:
                pass


def _join_cgroup_argv(cgroup: _Cgroup) -> list[str]:
    """``sh -c`` prefix that moves itself into ``cgroup`` and then ``exec``s the rest of argv."""
    join = 'unset PWD OLDPWD; echo $$ >"$1" && echo $$ >"$2" && shift 2 && exec "$@"'
    return ["/bin/sh", "-c", join, "sh", cgroup.procs_file("pids"), cgroup.procs_file("memory")]


def _select_readable(sock: socket.socket, timeout_s: float) -> bool:
    """Whether ``sock`` becomes readable (data or EOF) within ``timeout_s`` seconds."""
    with selectors.DefaultSelector() as sel:
        sel.register(sock, selectors.EVENT_READ)
        return bool(sel.select(timeout_s))


_LIVE_POOLS: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_pools() -> None:
    for pool in list(_LIVE_POOLS):
        try:
            pool.close()
        except Exception:
            pass


class SandboxPool:
    """Runs harness jobs, each in a fresh sandboxed process tree, without paying start-up per job.

    Where :func:`zygotes_available` (Linux, root, bwrap/unshare, a pids cgroup: this is the fast
    path), the pool keeps one long-lived zygote per concurrent job and each job costs a ``fork``
    (see :class:`_Zygote`). Otherwise it keeps up to ``size`` whole harnesses (wrapper +
    interpreter) pre-started, one per job, refilled by a background thread.

    Args:
        size: Idle pre-started harnesses to keep in the fallback mode (0 = start one per job,
            synchronously). Zygotes are started on demand, one per concurrent job, and kept.
        config: Limits; all jobs of a pool share them.
    """

    def __init__(self, size: int = 2, config: SandboxConfig | None = None) -> None:
        self.size = max(0, int(size))
        self.config = config or SandboxConfig()
        self._idle: queue.SimpleQueue[_Harness] = queue.SimpleQueue()
        self._zygotes: list[_Zygote] = []
        self._zygote_error: str | None = None
        self._lock = threading.Lock()
        self._pending = 0
        self._closed = False
        _LIVE_POOLS.add(self)

    def acquire(self) -> _Harness:
        """Take a warm harness if one is ready, else start one now; then top the pool up."""
        try:
            harness = self._idle.get_nowait()
        except queue.Empty:
            harness = None
        if harness is not None and harness.proc is not None and harness.proc.poll() is not None:
            harness.cleanup()
            harness = None
        if harness is None:
            harness = _Harness(self.config)
        self._top_up()
        return harness

    def _top_up(self) -> None:
        with self._lock:
            if self._closed:
                return
            want = self.size - self._idle.qsize() - self._pending
            if want <= 0:
                return
            self._pending += want

        def fill(n: int) -> None:
            for _ in range(n):
                try:
                    h = _Harness(self.config)
                except Exception as exc:
                    log.debug("sandbox: could not pre-start a harness: %s", exc)
                    h = None
                with self._lock:
                    self._pending -= 1
                    closed = self._closed
                if h is not None:
                    if closed:
                        h.cleanup()
                    else:
                        self._idle.put(h)

        threading.Thread(target=fill, args=(want,), daemon=True, name="sage-sandbox-fill").start()

    def run_job(self, job: dict) -> RawRun:
        """Run one harness job in a fresh sandboxed process tree (forked by a zygote if possible).

        Args:
            job: ``{"mode": "run"|"verify", "setup": str, "program": str, "tests": [str]}``.

        Returns:
            The :class:`RawRun` of the job.
        """
        for _attempt in range(2):
            if self._zygote_error is not None or not zygotes_available():
                break
            try:
                zygote = self._take_zygote()
            except FileNotFoundError:  # a bad config (interpreter): the same for either path
                raise
            except Exception as exc:
                self._zygote_error = f"{type(exc).__name__}: {exc}"
                log.warning(
                    "sandbox: zygote unavailable (%s); this pool starts a fresh sandbox per job",
                    exc,
                )
                break
            try:
                return zygote.run(job)
            except _ZygoteLost as exc:
                log.info("sandbox: zygote lost before the job started (%s); using a new one", exc)
            finally:
                self._put_zygote(zygote)
        return self.acquire().run(job)

    def _take_zygote(self) -> _Zygote:
        with self._lock:
            while self._zygotes:
                zygote = self._zygotes.pop()
                if zygote.alive:
                    return zygote
                zygote.close()
        return _Zygote(self.config)

    def _put_zygote(self, zygote: _Zygote) -> None:
        with self._lock:
            if zygote.alive and not self._closed:
                self._zygotes.append(zygote)
                return
        zygote.close()

    def close(self) -> None:
        """Kill idle harnesses and zygotes (jobs in flight finish normally)."""
        with self._lock:
            self._closed = True
            zygotes, self._zygotes = self._zygotes, []
        for zygote in zygotes:
            zygote.close()
        while True:
            try:
                self._idle.get_nowait().cleanup()
            except queue.Empty:
                break

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


# --------------------------------------------------------------------------------------------
# Reports -> results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SandboxResult:
    """Outcome of :func:`run`.

    Attributes:
        status: One of :data:`SANDBOX_STATUSES`. ``passed``: ran to the end (or ``exit(0)``);
            ``failed``: raised or exited non-zero; ``timeout``: wall clock or CPU limit;
            ``memory``: ``MemoryError`` or the memory cgroup's OOM kill; ``crashed``: killed by
            a signal; ``syntax_error``: did not compile; ``blocked``: the sandbox refused an
            operation (network, write outside the sandbox, process or file-size limit, ...).
        reason: Short explanation (at most 200 characters).
        stdout: Captured standard output (capped).
        stderr: Captured standard error (capped).
        duration_s: Wall-clock seconds from job hand-over to clean-up.
        isolation: The isolation level used.
    """

    status: str
    reason: str
    stdout: bytes = b""
    stderr: bytes = b""
    duration_s: float = 0.0
    isolation: str = ""


def parse_report(report: bytes) -> list[dict]:
    """Decode the harness's report channel (one JSON object per line)."""
    events = []
    for line in report.split(b"\n"):
        if not line.startswith(b"{"):
            continue
        try:
            ev = json.loads(line)
        except Exception:
            continue
        if isinstance(ev, dict):
            events.append(ev)
    return events


def is_blocked(event: dict) -> bool:
    """Whether a failure event is the sandbox refusing something (status ``blocked``)."""
    return event.get("exc") == "PermissionError" or event.get("errno") in BLOCKED_ERRNOS


def describe_event(event: dict) -> str:
    """``"Exc: message"`` for a failure event."""
    return f"{event.get('exc', '?')}: {event.get('msg', '')}".rstrip(": ")


_SHARED_POOLS: dict[tuple, SandboxPool] = {}
_SHARED_LOCK = threading.Lock()
_SHARED_MAX = 8


def _shared_pool(cfg: SandboxConfig) -> SandboxPool:
    """The process-wide pool :func:`run` uses for ``cfg`` (at most ``_SHARED_MAX`` are kept)."""
    key = (cfg.timeout_s, cfg.memory_mb, cfg.max_output_bytes, cfg.max_processes, cfg.python)
    with _SHARED_LOCK:
        pool = _SHARED_POOLS.pop(key, None)
        if pool is None or pool._closed:
            pool = SandboxPool(0, cfg)
        _SHARED_POOLS[key] = pool  # most recently used last
        while len(_SHARED_POOLS) > _SHARED_MAX:
            _SHARED_POOLS.pop(next(iter(_SHARED_POOLS))).close()
        return pool


def run(
    code: str,
    *,
    timeout_s: float = 10.0,
    memory_mb: int = 1024,
    max_output_bytes: int = 65536,
    max_processes: int = 64,
    python: str | None = None,
    pool: SandboxPool | None = None,
) -> SandboxResult:
    """Run ``code`` as ``__main__`` in a fresh sandbox and classify the outcome.

    Args:
        code: Python source (untrusted).
        timeout_s: Wall-clock limit, seconds.
        memory_mb: Address-space and memory-cgroup limit, MiB.
        max_output_bytes: Cap on captured stdout and stderr, bytes each.
        max_processes: Process/thread limit of the run.
        python: Interpreter; default :func:`default_python`.
        pool: Run on this pool (its config wins over the other arguments); default a
            process-wide pool per set of limits.

    Returns:
        A :class:`SandboxResult`. Never raises on untrusted input; an unusable interpreter gives
        status ``crashed``.
    """
    level = isolation_level()
    cfg = SandboxConfig(
        timeout_s=float(timeout_s),
        memory_mb=int(memory_mb),
        max_output_bytes=int(max_output_bytes),
        max_processes=int(max_processes),
        python=python,
    )
    job = {
        "mode": "run",
        "setup": "",
        "program": code if isinstance(code, str) else "",
        "tests": [],
    }
    try:
        raw = (pool or _shared_pool(cfg)).run_job(job)
    except Exception as exc:
        return SandboxResult("crashed", f"sandbox failed: {type(exc).__name__}: {exc}"[:200])
    timeout = pool.config.timeout_s if pool is not None else cfg.timeout_s
    status, reason = _classify_run(raw, timeout)
    return SandboxResult(status, reason[:200], raw.stdout, raw.stderr, raw.duration_s, level)


def _classify_run(raw: RawRun, timeout_s: float) -> tuple[str, str]:
    events = parse_report(raw.report)
    kinds = {ev.get("ev"): ev for ev in events}
    if "syntax_error" in kinds:
        return "syntax_error", describe_event(kinds["syntax_error"])
    if raw.timed_out:
        return "timeout", f"timed out after {timeout_s:g} s"
    if "program_error" in kinds:
        ev = kinds["program_error"]
        if ev.get("exc") == "MemoryError":
            return "memory", describe_event(ev)
        if ev.get("exc") in ("RecursionError",):
            return "failed", describe_event(ev)
        if is_blocked(ev):
            return "blocked", describe_event(ev)
        return "failed", describe_event(ev)
    if raw.oom_killed:
        return "memory", "killed by the out-of-memory killer"
    if "worker_signal" in kinds:
        sig = kinds["worker_signal"].get("signal")
        if sig == signal.SIGXCPU:
            return "timeout", "CPU time limit (SIGXCPU)"
        if sig == signal.SIGKILL:
            return "memory" if raw.oom_killed else "crashed", "killed by SIGKILL"
        return "crashed", f"killed by {_signame(sig)}"
    if "program_ok" in kinds:
        return "passed", "ran to completion"
    if "done" not in kinds:
        return "crashed", f"sandbox harness died (exit {raw.returncode})"
    return "failed", "exited before finishing"


def _signame(sig: Any) -> str:
    try:
        return signal.Signals(int(sig)).name
    except (ValueError, TypeError):
        return f"signal {sig}"

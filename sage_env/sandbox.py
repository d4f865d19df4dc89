"""Run untrusted Python behind an OS-level boundary.

:func:`run` executes one program; :class:`SandboxPool` keeps pre-started sandboxed harness
processes warm so that each job pays only a ``fork`` instead of an interpreter start-up;
:class:`~sage_env.verifiers.CodeVerifier` is built on the same pieces.

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
import stat
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, field
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
    _dumps, _exec, _dict, _type, _getpid, _exit, _fork = (
        json.dumps, exec, dict, type, os.getpid, os._exit, os.fork)
    _NUM = (bool, int, float, complex)

    def send(**ev):
        try:
            _write_all(out_fd, ("\n" + _dumps(ev, ensure_ascii=True) + "\n").encode("ascii"))
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
    for i, src in enumerate(job["tests"]):
        if src is None:
            continue
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
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

            tns = _dict(ns)
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

def _main():
    wuid, huid, rfd = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    if rfd != 3:
        os.dup2(rfd, 3)
        os.close(rfd)
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
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        os._exit(0)
    os.close(job_r)
    os.close(out_w)
    _drop(huid)
    _prctl(4, 0)  # PR_SET_DUMPABLE 0: no ptrace, no /proc/<pid>/mem for same-uid processes
    import json, select, signal
    os.set_inheritable(3, False)
    job = json.loads(sys.stdin.buffer.read().decode("ascii"))

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

    def verdict(i, status):
        s = st(i)
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
            verdict(i, status if type(status) is int else -1)
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
                        handle(ev)
            continue
        if chunk == b"" or w_status is not None:
            if w_status is None:
                try:
                    w_status = os.waitpid(pid, 0)[1]
                except ChildProcessError:
                    w_status = -1
            break
        select.select([out_r], [], [], 0.05)
    if w_status is not None and os.WIFSIGNALED(w_status):
        report(ev="worker_signal", signal=os.WTERMSIG(w_status))
    report(ev="done")

_main()
for _s in (sys.stdout, sys.stderr):
    try:
        _s.flush()
    except BaseException:
        pass
os._exit(0)
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


def _bwrap_argv(workdir: str, python: str, disk_bytes: int) -> list[str]:
    argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    keep = (os.path.realpath(python), os.path.realpath(workdir))
    for path in _HIDE_PATHS:
        if os.path.isdir(path) and not any(k == path or k.startswith(path + "/") for k in keep):
            argv += ["--tmpfs", path]
    argv += ["--perms", "1777", "--size", str(disk_bytes), "--tmpfs", "/tmp"]
    argv += ["--perms", "0777", "--size", str(disk_bytes), "--tmpfs", workdir, "--chdir", workdir]
    argv += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
    argv += ["--unshare-cgroup-try", "--die-with-parent", "--new-session"]
    if os.geteuid() == 0:
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
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


class _Cgroup:
    """A per-run cgroup v1 group in the ``pids`` and/or ``memory`` controllers."""

    def __init__(self, pids_max: int, memory_bytes: int) -> None:
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

    def kill_all(self) -> None:
        """Freeze forking (``pids.max`` = 0) and SIGKILL every process until the group is empty."""
        if "pids" in self.paths:
            try:
                _write(os.path.join(self.paths["pids"], "pids.max"), "0")
            except OSError:
                pass
        for _ in range(200):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.002)

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
    extra: dict[str, Any] = field(default_factory=dict)

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
                overhead = 96 << 20
                self.cgroup = _Cgroup(cfg.max_processes + 4, (cfg.memory_mb << 20) + overhead)
                join = 'unset PWD OLDPWD; echo $$ >"$1" && echo $$ >"$2" && shift 2 && exec "$@"'
                argv = [
                    "/bin/sh",
                    "-c",
                    join,
                    "sh",
                    self.cgroup.procs_file("pids"),
                    self.cgroup.procs_file("memory"),
                    *argv,
                ]
            self.report_r, report_w = os.pipe()
            argv.append(str(report_w))
            try:
                self.proc = subprocess.Popen(
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
        caps = {
            proc.stdout.fileno(): cap,
            proc.stderr.fileno(): cap,
            self.report_r: _REPORT_CAP_BYTES,
        }
        bufs = {fd: bytearray() for fd in caps}
        stdin_fd = proc.stdin.fileno()
        os.set_blocking(stdin_fd, False)
        view = memoryview(payload)
        sel = selectors.DefaultSelector()
        for fd in caps:
            sel.register(fd, selectors.EVENT_READ)
        sel.register(stdin_fd, selectors.EVENT_WRITE)
        timed_out = False
        exited_at: float | None = None
        try:
            while sel.get_map():
                now = time.monotonic()
                if exited_at is None and proc.poll() is not None:
                    exited_at = now
                    self._kill()
                limit = exited_at + _DRAIN_GRACE_S if exited_at is not None else deadline
                if now >= limit:
                    if exited_at is None:
                        timed_out = True
                        self._kill()
                        exited_at = now
                        continue
                    break
                for key, _ in sel.select(min(0.1, limit - now)):
                    fd = key.fd
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
                            proc.stdin.close()
                        continue
                    try:
                        data = os.read(fd, 65536)
                    except BlockingIOError:
                        continue
                    except OSError:
                        data = b""
                    if not data:
                        sel.unregister(fd)
                        continue
                    room = caps[fd] - len(bufs[fd])
                    if room > 0:
                        bufs[fd] += data[:room]
        finally:
            sel.close()
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
            stdout=bytes(bufs[proc.stdout.fileno()]),
            stderr=bytes(bufs[proc.stderr.fileno()]),
            report=bytes(bufs[self.report_r]),
            duration_s=0.0,
        )

    def _kill(self) -> None:
        if self.cgroup is not None:
            self.cgroup.kill_all()
        proc = self.proc
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            if proc.returncode is None:
                try:
                    proc.kill()
                except OSError:
                    pass
                proc.wait()

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


_LIVE_POOLS: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_pools() -> None:
    for pool in list(_LIVE_POOLS):
        try:
            pool.close()
        except Exception:
            pass


class SandboxPool:
    """Keeps up to ``size`` sandboxed harness processes started and idle, each for ONE job.

    Every job still gets a fresh process tree, working directory and cgroup; the pool only hides
    interpreter start-up (and the bwrap/namespace set-up) by starting the next harness in a
    background thread while the current one runs.

    Args:
        size: Idle harnesses to keep ready (0 = start one per job, synchronously).
        config: Limits; all harnesses of a pool share them.
    """

    def __init__(self, size: int = 2, config: SandboxConfig | None = None) -> None:
        self.size = max(0, int(size))
        self.config = config or SandboxConfig()
        self._idle: queue.SimpleQueue[_Harness] = queue.SimpleQueue()
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
        """Run one harness job in a fresh sandboxed process tree."""
        return self.acquire().run(job)

    def close(self) -> None:
        """Kill idle harnesses (jobs in flight finish normally)."""
        with self._lock:
            self._closed = True
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
        pool: Take a warm harness from this pool (its config wins over the other arguments).

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
        raw = pool.run_job(job) if pool is not None else _Harness(cfg).run(job)
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

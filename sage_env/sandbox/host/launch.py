"""Starting one sandboxed harness process per job (the fallback path), and feeding it."""

from __future__ import annotations

import functools
import json
import logging
import os
import queue
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from concurrent.futures import Future
from typing import Any

from sage_env.sandbox.host.cgroups import Cgroup, cgroups_available, join_cgroup_argv
from sage_env.sandbox.host.config import (
    DRAIN_GRACE_S,
    HARNESS_DIR,
    HARNESS_OVERHEAD,
    HARNESS_UID,
    REPORT_CAP_BYTES,
    SANDBOX_UID,
    RawRun,
    SandboxConfig,
)
from sage_env.sandbox.host.probe import (
    UNSHARE_ARGV,
    bwrap_argv,
    default_python,
    isolation_level,
    unshare_fs_arg,
)

log = logging.getLogger("sage_env.sandbox")

#: The harness's modules (those of :mod:`sage_env.sandbox.harness`), in load order. They import
#: only the standard library and each other.
HARNESS_MODULES = (
    "report", "compare", "confine", "template", "rewrite", "flow", "shield", "testproc", "worker",
    "verdict", "judge", "entry",
)  # fmt: skip

# Run as ``python -I -c _BOOT N name_1 source_1 ... name_N source_N ARGS...``: registers each
# source as module ``sage_env.sandbox.harness.<name>`` (under stub parent packages, so the
# modules' imports of each other resolve) and calls ``entry.main(["-c", *ARGS])``. The sources
# travel in argv, so the dropped uid never has to read the repository (which may sit under a
# mode-700 ``/root``, or under a path bubblewrap hides).
_BOOT = """
import sys, types
def _boot(argv):
    n = int(argv[1])
    for name in ("sage_env", "sage_env.sandbox", "sage_env.sandbox.harness"):
        pkg = types.ModuleType(name)
        pkg.__path__ = []
        sys.modules[name] = pkg
    parent = sys.modules["sage_env.sandbox.harness"]
    for k in range(n):
        short, source = argv[2 + 2 * k], argv[3 + 2 * k]
        mod = types.ModuleType("sage_env.sandbox.harness." + short)
        mod.__file__ = "<sandbox>/harness/" + short + ".py"
        sys.modules[mod.__name__] = mod
        setattr(parent, short, mod)
        exec(compile(source, mod.__file__, "exec"), mod.__dict__)
    del argv[1 : 2 + 2 * n]
    parent.entry.main(argv)
_boot(sys.argv)
"""

_SOURCES: list[str] = []


def harness_argv(python: str, args: list[str]) -> list[str]:
    """The command line that runs the harness under ``python`` with ``args``.

    ``args`` are the harness's own: ``[worker_uid, harness_uid]`` (then the report fd, appended
    by the caller) for a one-job harness, or ``["zygote", worker_uid, harness_uid, ctl_fd]``;
    at the ``unshare`` level they start with the ``fs=`` argument of the file system view.
    The modules of :data:`HARNESS_MODULES` are read from
    :data:`~sage_env.sandbox.host.config.HARNESS_DIR` once per process and passed as source
    text (``python -s -P -c``: no user site, no script directory on ``sys.path``; not
    ``-I``, whose ``-E`` would ignore the ``PYTHONHASHSEED`` of
    :meth:`SandboxConfig.child_env`, the only ``PYTHON*`` variable of that scrubbed
    environment), so the interpreter needs no access to this repository and nothing from
    ``sys.path``.

    Raises:
        OSError: If a harness module's file cannot be read.
    """
    if not _SOURCES:
        sources = []
        for name in HARNESS_MODULES:
            with open(os.path.join(HARNESS_DIR, name + ".py"), encoding="utf-8") as fh:
                sources += [name, fh.read()]
        _SOURCES[:] = sources
    flags = ["-s", "-P"] if _knows_safe_path(python) else ["-s"]
    return [python, *flags, "-c", _BOOT, str(len(HARNESS_MODULES)), *_SOURCES, *args]


@functools.lru_cache(maxsize=8)
def _knows_safe_path(python: str) -> bool:
    """Whether ``python`` takes ``-P`` (3.11+; Ubuntu 22.04's ``/usr/bin/python3`` is 3.10).

    Without it the empty sandbox workdir is first on the harness's ``sys.path``, which holds
    nothing but what the job itself writes there.
    """
    try:
        out = subprocess.run(
            [python, "-P", "-c", "pass"], capture_output=True, timeout=30, env={}
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0


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


def popen(*args: Any, **kwargs: Any) -> subprocess.Popen:
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


def kill_and_reap(proc: subprocess.Popen) -> None:
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


def pump(
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
            limit = exited_at + DRAIN_GRACE_S if exited_at is not None else deadline
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


class HarnessProcess:
    """One pre-started sandboxed harness process, waiting for exactly one job on stdin."""

    def __init__(self, cfg: SandboxConfig) -> None:
        self.cfg = cfg
        python = cfg.python or default_python()
        if not os.path.exists(python):
            raise FileNotFoundError(f"interpreter not found: {python}")
        level = isolation_level()
        root = os.geteuid() == 0
        self.workdir = tempfile.mkdtemp(prefix="sage-code-")
        self.cgroup: Cgroup | None = None
        self.report_r = -1
        self.proc: subprocess.Popen | None = None
        try:
            if root:
                os.chown(self.workdir, SANDBOX_UID, SANDBOX_UID)
            os.chmod(self.workdir, 0o700 if root else 0o700)
            uids = [str(SANDBOX_UID), str(HARNESS_UID)] if root else ["-1", "-1"]
            if level == "bwrap":
                argv = bwrap_argv(self.workdir, python, cfg.disk_mb << 20)
                argv += harness_argv(python, uids)
            elif level == "unshare":
                fs = unshare_fs_arg(self.workdir, python, cfg.disk_mb << 20)
                argv = UNSHARE_ARGV + harness_argv(python, [fs, *uids])
            else:
                argv = harness_argv(python, uids)
            cg = cgroups_available()
            if cg["pids"] or cg["memory"]:
                self.cgroup = Cgroup(
                    cfg.max_processes + 4, (cfg.memory_mb << 20) + HARNESS_OVERHEAD
                )
                argv = join_cgroup_argv(self.cgroup) + argv
            self.report_r, report_w = os.pipe()
            argv.append(str(report_w))
            try:
                self.proc = popen(
                    argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=self.workdir,
                    env=cfg.child_env(),
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
            wall = float(job.get("wall_s") or self.cfg.wall_limit_s())
            raw = self._communicate(payload, start + wall)
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
        bufs, timed_out = pump(
            proc.stdin.fileno(),
            proc.stdin.close,
            payload,
            {out_fd: cap, err_fd: cap, self.report_r: REPORT_CAP_BYTES},
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
            kill_and_reap(self.proc)

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

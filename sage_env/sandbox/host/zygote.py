"""The zygote fast path: a long-lived sandbox that forks one judging harness per job."""

from __future__ import annotations

import json
import logging
import os
import selectors
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

from sage_env.sandbox.host.cgroups import Cgroup, cgroups_available, join_cgroup_argv
from sage_env.sandbox.host.config import (
    HARNESS_OVERHEAD,
    HARNESS_UID,
    REPORT_CAP_BYTES,
    SANDBOX_UID,
    ZYGOTE_WORKDIR,
    RawRun,
    SandboxConfig,
)
from sage_env.sandbox.host.launch import harness_argv, kill_and_reap, popen, pump
from sage_env.sandbox.host.probe import (
    UNSHARE_ARGV,
    bwrap_argv,
    default_python,
    isolation_level,
    unshare_fs_arg,
)

log = logging.getLogger("sage_env.sandbox")

_ZYGOTE_START_S = 30.0
_ZYGOTE_EXIT_WAIT_S = 5.0
_ZYGOTE_RELEASE_WAIT_S = 0.25
_ZYGOTE_HELD_SLACK = 8 << 20
_ZYGOTE_LOGGED: list[bool] = []


def zygotes_available() -> bool:
    """Whether :class:`SandboxPool` forks jobs from long-lived zygotes (see :class:`Zygote`).

    Needs Linux, root (the zygote gives each job its own mounts), the ``bwrap`` or ``unshare``
    isolation level (bwrap's init, or at ``unshare`` the harness's own PID 1, reaps orphans)
    and a writable ``pids`` cgroup (which is what kills a job's leftovers once jobs no longer
    get their own PID namespace). ``SAGE_SANDBOX_ZYGOTE=0`` turns zygotes off; a pool whose
    zygote fails to start falls back for its lifetime, with a warning.
    """
    return (
        sys.platform == "linux"
        and os.environ.get("SAGE_SANDBOX_ZYGOTE", "1") != "0"
        and os.geteuid() == 0
        and isolation_level() in ("bwrap", "unshare")
        and cgroups_available()["pids"]
    )


class ZygoteLost(RuntimeError):
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


class Zygote:
    """A long-lived bwrap or unshare sandbox (as root) that forks one judging harness per job.

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
        self.cgroup = Cgroup(cfg.max_processes + 16, 1 << 40)
        try:
            if "pids" not in self.cgroup.paths:
                raise RuntimeError("a zygote needs a pids cgroup")
            args = ["zygote", str(SANDBOX_UID), str(HARNESS_UID), str(child.fileno())]
            if isolation_level() == "bwrap":
                argv = bwrap_argv(None, python, 1 << 20, zygote=True) + harness_argv(python, args)
            else:  # unshare: the harness sets up bubblewrap's file system view itself
                fs = unshare_fs_arg(None, python, 1 << 20)
                argv = UNSHARE_ARGV + harness_argv(python, [fs, *args])
            self.proc = popen(
                join_cgroup_argv(self.cgroup) + argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
                cwd="/",
                env=cfg.child_env(),
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
                (cfg.memory_mb << 20) + HARNESS_OVERHEAD + self.cgroup.usage()
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
            ZygoteLost: If the zygote is gone before it took the job (nothing ran).
        """
        cfg = self.cfg
        if not self.alive or self.proc is None or self.proc.poll() is not None:
            self.close()
            raise ZygoteLost("zygote exited")
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
                raise ZygoteLost(f"zygote is gone: {exc}") from exc
            for fd in (job_r, out_w, err_w, rep_w):
                os.close(fd)
                opened.remove(fd)
            start = time.monotonic()
            exit_ev: list[dict] = []

            def on_ctl() -> bool:
                return self._on_ctl(exit_ev, cg, ooms)

            def close_job_w() -> None:
                os.close(job_w)
                opened.remove(job_w)

            emptied: list[bool] = []  # once per job: when the harness exits or times out

            def kill() -> None:
                if not emptied:
                    emptied.append(cg.kill_all(keep=self.residents))

            cap = cfg.max_output_bytes
            bufs, timed_out = pump(
                job_w,
                close_job_w,
                payload,
                {out_r: cap, err_r: cap, rep_r: REPORT_CAP_BYTES},
                start + float(job.get("wall_s") or cfg.wall_limit_s()),
                exited=lambda: bool(exit_ev),
                kill=kill,
                wake={self.sock.fileno(): on_ctl},
            )
            kill()
            oom = self._settle(exit_ev, on_ctl, emptied, cg, ooms)
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

    def _on_ctl(self, exit_ev: list[dict], cg: Any, ooms: int) -> bool:
        """Read the zygote's control message for the job; False once it has come.

        Appends the event to ``exit_ev`` (``{"ev": "lost"}`` when the socket closed or the
        message is not JSON); any event but ``exit`` marks the zygote dead.
        """
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

    def _settle(
        self, exit_ev: list[dict], on_ctl: Any, emptied: list[bool], cg: Any, ooms: int
    ) -> int:
        """After a job: wait for the exit event, mark the zygote dead if it cannot be reused;
        the OOM kills during the job."""
        if not exit_ev:  # pipes closed first, or timed out: the harness is dead by now
            if _select_readable(self.sock, _ZYGOTE_EXIT_WAIT_S):
                on_ctl()
            else:
                self.alive = False
        oom = cg.oom_kills() - ooms
        # never reuse a zygote whose group could not be emptied or still holds memory
        if not emptied[0] or not self._memory_released():
            self.alive = False
        return oom

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
        Unix socket schedules. If memory the group cannot reclaim (:meth:`Cgroup.held`) is
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
            kill_and_reap(self.proc)
        if self.cgroup is not None:
            self.cgroup.destroy()
        for closeable in (self.sock, self._stderr):
            try:
                closeable.close()
            except OSError:
                pass


def _select_readable(sock: socket.socket, timeout_s: float) -> bool:
    """Whether ``sock`` becomes readable (data or EOF) within ``timeout_s`` seconds."""
    with selectors.DefaultSelector() as sel:
        sel.register(sock, selectors.EVENT_READ)
        return bool(sel.select(timeout_s))

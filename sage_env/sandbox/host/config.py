"""Limits, statuses and constants shared by the host side of the sandbox."""

from __future__ import annotations

import errno as _errno
import math
import os
from dataclasses import dataclass

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

#: The whole environment of a sandboxed process (besides :meth:`SandboxConfig.child_env`'s).
CHILD_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
#: What the host keeps of the harness's report channel at most, bytes.
REPORT_CAP_BYTES = 4 << 20
#: How long the host drains a harness's pipes after it exited, seconds.
DRAIN_GRACE_S = 0.5
#: The cgroup v1 hierarchy, and the folder of ours in each controller.
CG_ROOT = "/sys/fs/cgroup"
CG_DIR = "sage-sandbox"
#: Directories hidden (an empty tmpfs over each) at the bwrap and unshare levels.
HIDE_PATHS = ("/root", "/home", "/work", "/mnt", "/srv", "/media")

#: The ``sage_env`` package folder (this file is ``sage_env/sandbox/host/config.py``).
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
#: The folder of the harness's modules (:mod:`sage_env.sandbox.harness`), whose sources
#: :func:`~sage_env.sandbox.host.launch.harness_argv` ships into the sandbox.
HARNESS_DIR = os.path.join(PACKAGE_DIR, "sandbox", "harness")

#: Memory the harness itself needs on top of a job's ``memory_mb`` (cgroup limit), bytes.
HARNESS_OVERHEAD = 96 << 20

#: Where a zygote-forked job runs (a fresh tmpfs per job, inside the job's own mount namespace).
ZYGOTE_WORKDIR = "/tmp/sage-run"


@dataclass
class RawRun:
    """What one harness job produced, before classification.

    Attributes:
        returncode: The harness's exit status as ``Popen.returncode`` (``-signal`` when
            killed), or ``None`` if unknown.
        timed_out: Whether the wall-clock limit ended the job.
        oom_killed: Whether the memory cgroup's OOM killer fired during the job.
        stdout: Captured standard output of the program (capped).
        stderr: Captured standard error (capped).
        report: The bytes the judge wrote to the report channel (JSON lines, see
            :mod:`sage_env.sandbox.harness.report`).
        duration_s: Wall-clock seconds from hand-over to clean-up.
    """

    returncode: int | None
    timed_out: bool
    oom_killed: bool
    stdout: bytes
    stderr: bytes
    report: bytes
    duration_s: float


#: The wall-clock backstop of a job is this many times its CPU budget ``timeout_s`` ...
WALL_FACTOR = 3.0
#: ... plus this many seconds (start-up, a loaded machine).
WALL_SLACK_S = 2.0


@dataclass
class SandboxConfig:
    """Limits of one sandboxed run.

    Attributes:
        timeout_s: CPU-time budget, seconds, of every process of the job (``RLIMIT_CPU``, which
            the kernel counts per process whatever else the machine runs): a program and its
            test get this much CPU however loaded the machine is.
        wall_s: Wall-clock backstop from the moment the job is handed over (catches programs
            that sleep or block); ``None``: :data:`WALL_FACTOR` x ``timeout_s`` +
            :data:`WALL_SLACK_S`, generous so that load does not fail correct programs.
        memory_mb: ``RLIMIT_AS`` per process and the run's memory cgroup limit (plus harness
            overhead), MiB.
        max_output_bytes: Cap on captured stdout and on captured stderr, bytes each.
        max_processes: ``pids.max`` of the run's cgroup (and ``RLIMIT_NPROC`` without cgroups).
        file_size_mb: ``RLIMIT_FSIZE``, MiB.
        disk_mb: Size of the private tmpfs working directory and ``/tmp`` (bwrap only), MiB.
        open_files: ``RLIMIT_NOFILE``.
        python: Interpreter (must be executable by the dropped uid); default
            :func:`default_python`.
        hash_seed: ``PYTHONHASHSEED`` of the job's interpreter (0 to 4294967295), so that
            string hashing, and with it the iteration order of sets of strings, is the same
            on every host; ``None``: a random seed per interpreter (Python's default). Jobs
            forked from one zygote share its seed, so a pool's jobs all run under this one.
        env: Extra environment variables of the job's interpreter, as ``(name, value)``
            pairs (a determinism check varies ``TZ`` with them).
    """

    timeout_s: float = 10.0
    wall_s: float | None = None
    memory_mb: int = 1024
    max_output_bytes: int = 65536
    max_processes: int = 64
    file_size_mb: int = 16
    disk_mb: int = 64
    open_files: int = 64
    python: str | None = None
    hash_seed: int | None = None
    env: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.hash_seed is not None and not 0 <= int(self.hash_seed) <= 4294967295:
            raise ValueError(f"hash_seed must be in [0, 4294967295], got {self.hash_seed}")

    def child_env(self) -> dict[str, str]:
        """The environment a harness starts with: a scrubbed one, plus ``PYTHONHASHSEED``."""
        env = dict(CHILD_ENV)
        env.update((str(k), str(v)) for k, v in self.env)
        if self.hash_seed is not None:
            env["PYTHONHASHSEED"] = str(int(self.hash_seed))
        return env

    def wall_limit_s(self) -> float:
        """The job's wall-clock backstop, seconds (see ``wall_s``)."""
        if self.wall_s is not None:
            return float(self.wall_s)
        return self.timeout_s * WALL_FACTOR + WALL_SLACK_S

    def limits(self, use_cgroup_pids: bool) -> list[tuple[str, int, int]]:
        """The worker's rlimits as ``(RLIMIT_name, soft, hard)``; units as :mod:`resource`.

        ``RLIMIT_CPU``: SIGXCPU at ``ceil(timeout_s)`` seconds of CPU, SIGKILL a second later.
        """
        cpu = max(1, math.ceil(self.timeout_s))
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

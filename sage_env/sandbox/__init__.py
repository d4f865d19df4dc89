"""Run untrusted Python behind an OS-level boundary.

:func:`run` executes one program; :class:`SandboxPool` runs jobs without an interpreter start-up
each: where :func:`zygotes_available`, a long-lived sandbox (the zygote) forks every job into its
own mount and IPC namespaces and cgroup-contained process tree; otherwise whole sandboxed harness
processes are kept pre-started. :class:`~sage_env.verifiers.CodeVerifier` is built on the same
pieces.

Layers (see ``docs/reference/sandbox.md`` for the threat model):

* **Isolation level**, chosen once per process by :func:`isolation_level` in the order
  ``bwrap`` -> ``unshare`` -> ``rlimits`` (override with ``SAGE_SANDBOX_ISOLATION``):

  - ``bwrap``: bubblewrap with a read-only root, private ``/tmp`` and working directory (size-
    capped tmpfs), fresh ``/dev`` and ``/proc``, new PID, network, IPC and UTS namespaces,
    ``--die-with-parent`` and ``--new-session``.
  - ``unshare``: ``unshare --net --pid --fork --kill-child --mount-proc --ipc --uts`` (util-
    linux, root only); the harness, still root in the new mount namespace, gives itself
    bubblewrap's file system view: every mount read-only, the same directories hidden, private
    size-capped tmpfs for ``/tmp``, ``/dev/shm`` and the working directory. No fresh ``/dev``.
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

Two packages, so that the boundary is a folder: :mod:`sage_env.sandbox.host` runs in the
trusted process (:mod:`~sage_env.sandbox.host.probe` (isolation level, interpreter),
:mod:`~sage_env.sandbox.host.cgroups`, :mod:`~sage_env.sandbox.host.launch` (one sandboxed
harness per job), :mod:`~sage_env.sandbox.host.zygote`, :mod:`~sage_env.sandbox.host.pool`,
:mod:`~sage_env.sandbox.host.runner` (:func:`run`), :mod:`~sage_env.sandbox.host.config`);
:mod:`sage_env.sandbox.harness` runs inside the sandbox (:mod:`~sage_env.sandbox.harness.entry`
with :mod:`~sage_env.sandbox.harness.judge` (and its rules,
:mod:`~sage_env.sandbox.harness.verdict`), :mod:`~sage_env.sandbox.harness.worker` (its
confinement steps) with :mod:`~sage_env.sandbox.harness.testproc` and
:mod:`~sage_env.sandbox.harness.shield`, :mod:`~sage_env.sandbox.harness.rewrite` with
:mod:`~sage_env.sandbox.harness.template` and :mod:`~sage_env.sandbox.harness.flow`,
:mod:`~sage_env.sandbox.harness.compare`, :mod:`~sage_env.sandbox.harness.confine` and the
wire format :mod:`~sage_env.sandbox.harness.report`, shared with the host). This module is the
public API.

This package imports only the standard library.
"""

from sage_env.sandbox.harness.report import REFERENCE_MARKER, parse_report
from sage_env.sandbox.host.cgroups import cgroups_available
from sage_env.sandbox.host.config import (
    BLOCKED_ERRNOS,
    HARNESS_UID,
    ISOLATION_LEVELS,
    SANDBOX_STATUSES,
    SANDBOX_UID,
    ZYGOTE_WORKDIR,
    RawRun,
    SandboxConfig,
)
from sage_env.sandbox.host.launch import HARNESS_MODULES, harness_argv
from sage_env.sandbox.host.pool import SandboxPool, close_pools
from sage_env.sandbox.host.probe import default_python, isolation_level
from sage_env.sandbox.host.runner import SandboxResult, describe_event, is_blocked, run
from sage_env.sandbox.host.zygote import zygotes_available

__all__ = [
    "BLOCKED_ERRNOS",
    "HARNESS_MODULES",
    "HARNESS_UID",
    "ISOLATION_LEVELS",
    "REFERENCE_MARKER",
    "SANDBOX_STATUSES",
    "SANDBOX_UID",
    "ZYGOTE_WORKDIR",
    "RawRun",
    "SandboxConfig",
    "SandboxPool",
    "SandboxResult",
    "cgroups_available",
    "close_pools",
    "default_python",
    "describe_event",
    "harness_argv",
    "is_blocked",
    "isolation_level",
    "parse_report",
    "run",
    "zygotes_available",
]


"""The public :func:`run`: one program in a fresh sandbox, classified into a status."""

from __future__ import annotations

import signal
import threading
from dataclasses import dataclass
from typing import Any

from sage_env.sandbox.harness.report import parse_report
from sage_env.sandbox.host.config import BLOCKED_ERRNOS, RawRun, SandboxConfig
from sage_env.sandbox.host.pool import SandboxPool
from sage_env.sandbox.host.probe import isolation_level


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


def is_blocked(event: dict) -> bool:
    """Whether a failure event is the sandbox refusing something (status ``blocked``)."""
    return event.get("exc") == "PermissionError" or event.get("errno") in BLOCKED_ERRNOS


def describe_event(event: dict) -> str:
    """``"Exc: message"`` for a failure event."""
    return f"{event.get('exc', '?')}: {event.get('msg', '')}".rstrip(": ")


_SHARED_POOLS: dict[tuple, SandboxPool] = {}
_SHARED_LOCK = threading.Lock()
_SHARED_MAX = 16


def _shared_pool(cfg: SandboxConfig) -> SandboxPool:
    """The process-wide pool :func:`run` uses for ``cfg`` (at most ``_SHARED_MAX`` are kept)."""
    key = (
        cfg.timeout_s, cfg.memory_mb, cfg.max_output_bytes, cfg.max_processes, cfg.python,
        cfg.hash_seed, tuple(cfg.env),
    )  # fmt: skip
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
    hash_seed: int | None = None,
    env: tuple[tuple[str, str], ...] = (),
    pool: SandboxPool | None = None,
) -> SandboxResult:
    """Run ``code`` as ``__main__`` in a fresh sandbox and classify the outcome.

    Args:
        code: Python source (untrusted).
        timeout_s: CPU-time limit of every process of the run, seconds (``RLIMIT_CPU``); the
            wall clock is only a generous backstop (:meth:`SandboxConfig.wall_limit_s`), so a
            loaded machine does not time out a correct program.
        memory_mb: Address-space and memory-cgroup limit, MiB.
        max_output_bytes: Cap on captured stdout and stderr, bytes each.
        max_processes: Process/thread limit of the run.
        python: Interpreter; default :func:`default_python`.
        hash_seed: ``PYTHONHASHSEED`` of the run's interpreter (:class:`SandboxConfig`);
            ``None``: a random one.
        env: Extra environment variables of the run's interpreter, ``(name, value)`` pairs.
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
        hash_seed=hash_seed,
        env=tuple(env),
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
    wall = (pool.config if pool is not None else cfg).wall_limit_s()
    status, reason = _classify_run(raw, wall)
    return SandboxResult(status, reason[:200], raw.stdout, raw.stderr, raw.duration_s, level)


def _classify_run(raw: RawRun, timeout_s: float) -> tuple[str, str]:
    events = parse_report(raw.report)
    kinds = {ev.get("ev"): ev for ev in events}
    if "syntax_error" in kinds:
        return "syntax_error", describe_event(kinds["syntax_error"])
    if raw.timed_out:
        return "timeout", f"wall-clock backstop reached after {timeout_s:g} s"
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

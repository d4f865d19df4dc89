"""SandboxPool: runs jobs on zygotes where possible, else on pre-started harnesses."""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import weakref
from typing import Any

from sage_env.sandbox.host.config import RawRun, SandboxConfig
from sage_env.sandbox.host.launch import HarnessProcess
from sage_env.sandbox.host.zygote import Zygote, ZygoteLost, zygotes_available

log = logging.getLogger("sage_env.sandbox")

_LIVE_POOLS: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def close_pools() -> None:
    """Close every live :class:`SandboxPool` (its idle zygotes or pre-started harnesses).

    Runs at interpreter exit; call it to release them earlier (between test modules, before a
    fork). A pool closed so starts afresh when next used. Never raises.
    """
    for pool in list(_LIVE_POOLS):
        try:
            pool.close()
        except Exception:
            pass


class SandboxPool:
    """Runs harness jobs, each in a fresh sandboxed process tree, without paying start-up per job.

    Where :func:`zygotes_available` (Linux, root, bwrap/unshare, a pids cgroup: this is the fast
    path), the pool keeps one long-lived zygote per concurrent job and each job costs a ``fork``
    (see :class:`Zygote`). Otherwise it keeps up to ``size`` whole harnesses (wrapper +
    interpreter) pre-started, one per job, refilled by a background thread.

    Args:
        size: Idle pre-started harnesses to keep in the fallback mode (0 = start one per job,
            synchronously). Zygotes are started on demand, one per concurrent job, and kept.
        config: Limits; all jobs of a pool share them.
        zygotes: False: never fork jobs from a zygote, so each job gets an interpreter of its
            own (its own hash seed and address layout: every job forked from one zygote
            shares the zygote's, which hides that kind of nondeterminism).
    """

    def __init__(
        self, size: int = 2, config: SandboxConfig | None = None, *, zygotes: bool = True
    ) -> None:
        self.size = max(0, int(size))
        self.config = config or SandboxConfig()
        self.zygotes = bool(zygotes)
        self._idle: queue.SimpleQueue[HarnessProcess] = queue.SimpleQueue()
        self._zygotes: list[Zygote] = []
        self._zygote_error: str | None = None
        self._lock = threading.Lock()
        self._pending = 0
        self._closed = False
        _LIVE_POOLS.add(self)

    def acquire(self) -> HarnessProcess:
        """Take a warm harness if one is ready, else start one now; then top the pool up."""
        try:
            harness = self._idle.get_nowait()
        except queue.Empty:
            harness = None
        if harness is not None and harness.proc is not None and harness.proc.poll() is not None:
            harness.cleanup()
            harness = None
        if harness is None:
            harness = HarnessProcess(self.config)
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
                    h = HarnessProcess(self.config)
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
            if not self.zygotes or self._zygote_error is not None or not zygotes_available():
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
            except ZygoteLost as exc:
                log.info("sandbox: zygote lost before the job started (%s); using a new one", exc)
            finally:
                self._put_zygote(zygote)
        return self.acquire().run(job)

    def _take_zygote(self) -> Zygote:
        with self._lock:
            while self._zygotes:
                zygote = self._zygotes.pop()
                if zygote.alive:
                    return zygote
                zygote.close()
        return Zygote(self.config)

    def _put_zygote(self, zygote: Zygote) -> None:
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

"""A per-call wall-clock deadline (SIGALRM) for math-verify calls in the main thread.

Owns :func:`_call_with_deadline` and the :class:`_DeadlineExceeded` it raises, used by
:mod:`sage_env.verifiers.math_verifier`. Standard library only.
"""

from __future__ import annotations

import signal
import threading
from typing import Any


class _DeadlineExceeded(BaseException):
    """Raised by the SIGALRM handler.

    A BaseException so that math-verify's ``except Exception`` blocks cannot swallow it.
    """


class _Deadline:
    """A per-call wall-clock deadline using ``ITIMER_REAL`` (main thread only)."""

    def __init__(self) -> None:
        self.armed = False

    def handler(self, signum: int, frame: Any) -> None:
        if self.armed:
            raise _DeadlineExceeded()


def _call_with_deadline(fn: Any, seconds: float) -> Any:
    """Run ``fn()`` with a SIGALRM deadline of ``seconds`` when in the main thread.

    The timer repeats every 50 ms until disarmed, so code that swallows the first exception is
    interrupted again. Callers must catch :class:`_DeadlineExceeded` around this call.
    Outside the main thread (where signals cannot be used) ``fn()`` runs without a deadline.
    """
    if threading.current_thread() is not threading.main_thread():
        return fn()
    deadline = _Deadline()
    old_handler = signal.signal(signal.SIGALRM, deadline.handler)
    try:
        deadline.armed = True
        signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-3), 0.05)
        try:
            return fn()
        finally:
            deadline.armed = False
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)

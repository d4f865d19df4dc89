"""Stopping a run on SIGINT (Ctrl-C) or SIGTERM (a cluster's pre-emption) without a traceback.

Inside :func:`stop_on_signals` either signal raises :class:`Interrupted` in the main thread:
the step under way (rollouts, update) is abandoned, and every environment and verifier is
closed as on any other exception. What a step writes once it is done (its metrics row,
transcripts, the pool, a checkpoint) is written inside :func:`deferred`, which holds the
signal until the block ends, so no file is left half-written; a checkpoint is also written
to a temporary folder and renamed (``learners.training.checkpoint``). ``sage-env train``
then prints one line naming the last complete checkpoint and the ``--resume`` command
(:func:`resume_hint`) and exits with ``128 + signal number`` (130 for SIGINT, 143 for
SIGTERM), as a shell does for a process a signal ended.
"""

from __future__ import annotations

import contextlib
import shlex
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop a run cleanly."""


class Interrupted(BaseException):
    """Raised in the main thread by SIGINT or SIGTERM inside :func:`stop_on_signals`.

    A ``BaseException`` (as ``KeyboardInterrupt``), so ``except Exception`` does not swallow it.

    Attributes:
        signum: The signal's number.
    """

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)

    @property
    def exit_code(self) -> int:
        """``128 + signum``: 130 for SIGINT, 143 for SIGTERM (the shell's convention)."""
        return 128 + self.signum


class _Guard:
    """Whether a :func:`deferred` block is running, and the signal it holds back."""

    def __init__(self) -> None:
        self.depth = 0
        self.pending: int | None = None

    def handler(self, signum: int, frame: object) -> None:
        if self.depth:
            self.pending = self.pending or signum
            return
        raise Interrupted(signum)


_GUARD = _Guard()  # signal handlers are process-wide; so is what they defer


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block SIGINT and SIGTERM raise :class:`Interrupted`; restored after.

    Does nothing outside the main thread (only it may set signal handlers).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _GUARD.handler) for s in SIGNALS}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)
        _GUARD.pending = None


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold SIGINT / SIGTERM back while the block writes; raise :class:`Interrupted` after it.

    Outside :func:`stop_on_signals` the signals keep their handlers and this does nothing.
    """
    _GUARD.depth += 1
    try:
        yield
    finally:
        _GUARD.depth -= 1
        if _GUARD.depth == 0 and _GUARD.pending is not None:
            signum, _GUARD.pending = _GUARD.pending, None
            raise Interrupted(signum)


def resume_hint(exc: Interrupted, out: str | Path, argv: list[str]) -> str:
    """The one line ``sage-env train`` prints when ``exc`` stopped the run in ``out``.

    Names the last complete checkpoint (or that there is none yet) and the command that
    continues the run: ``sage-env train`` with ``argv`` (the arguments given) plus
    ``--resume``.
    """
    from learners.training.checkpoint import checkpoint_dirs

    args = list(argv) if "--resume" in argv else [*argv, "--resume"]
    command = shlex.join(["sage-env", "train", *args])
    done = checkpoint_dirs(Path(out))
    where = (
        f"last complete checkpoint {done[-1]}"
        if done
        else f"no checkpoint yet in {out} (--resume starts the run afresh)"
    )
    name = signal.Signals(exc.signum).name
    return f"sage-env train: stopped by {name}; {where}; resume: {command}"

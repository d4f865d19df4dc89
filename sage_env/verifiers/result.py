"""The verifiers' common result type and input coercion."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sage_env import sandbox

#: The closed set of statuses a :class:`VerifierResult` can carry: the sandbox's, plus
#: ``"invalid"`` (nothing to judge).
STATUSES = (*sandbox.SANDBOX_STATUSES, "invalid")

#: Predictions longer than this many characters are cut to their LAST this-many characters
#: before any parsing (the final answer is at the end of a solution).
MAX_PREDICTION_CHARS = 10_000

#: Gold answers longer than this are rejected as ``"invalid"`` (a bad gold, not a wrong answer).
MAX_GOLD_CHARS = 10_000

_MAX_REASON_CHARS = 200


@dataclass(frozen=True)
class VerifierResult:
    """Outcome of one verification.

    Attributes:
        score: In ``[0, 1]``. Math: 1.0 iff the answer is equivalent to the gold. Code:
            ``passed / total``.
        status: One of :data:`STATUSES`. ``"passed"`` / ``"failed"``: judged normally;
            ``"timeout"``: the wall-clock (or CPU) budget ran out; ``"memory"``: a
            ``MemoryError`` or an out-of-memory kill; ``"crashed"``: the process died (signal,
            broken worker) or the verifier itself hit an internal error; ``"syntax_error"``: the
            program does not compile; ``"invalid"``: nothing to judge (no parseable answer, bad
            gold, no tests, failing test setup).
        reason: Short human-readable explanation, at most 200 characters.
        passed: Code only: number of test snippets that passed (0 for math).
        total: Code only: number of test snippets (0 for math).

    Raises:
        ValueError: On construction with a status outside :data:`STATUSES` (programming error).
    """

    score: float
    status: str
    reason: str
    passed: int = 0
    total: int = 0

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}; expected one of {STATUSES}")
        score = float(self.score)
        if not math.isfinite(score):
            score = 0.0
        object.__setattr__(self, "score", min(1.0, max(0.0, score)))
        object.__setattr__(self, "reason", _clip(str(self.reason), _MAX_REASON_CHARS))


def _clip(text: str, limit: int) -> str:
    """Shorten ``text`` to at most ``limit`` characters, marking the cut with ``...``."""
    return text if len(text) <= limit else text[: max(0, limit - 3)] + "..."

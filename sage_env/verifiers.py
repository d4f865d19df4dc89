r"""External verifiers: a math answer checker and a code test runner.

Both verifiers turn model output (text) into a :class:`VerifierResult` with a score in
``[0, 1]``, a status from a closed set and a short human-readable reason. Neither ever raises on
model output: empty strings, any unicode, megabyte-long strings, unbalanced braces, programs that
loop forever, exhaust memory or call ``os._exit`` all come back as a result.

* :class:`MathVerifier` extracts the last ``\boxed{...}`` from the prediction and compares it
  with the gold answer using math-verify (huggingface/Math-Verify,
  https://github.com/huggingface/Math-Verify), which parses LaTeX and plain expressions into
  SymPy and checks equivalence (numeric, symbolic, sets, intervals, equations ...).
* :class:`CodeVerifier` runs a candidate program plus independent test snippets in one child
  Python process and scores the fraction of snippets that pass, in the spirit of the functional
  correctness evaluation of HumanEval (Chen et al. 2021, "Evaluating Large Language Models Trained
  on Code", https://arxiv.org/abs/2107.03374).

Isolation: the code runner executes inside :mod:`sage_env.sandbox` (bubblewrap / ``unshare`` /
rlimits, an unprivileged uid when run as root, per-run cgroups, a private temp cwd, a scrubbed
environment, capped output) and judges each test in its own process against expected values kept
outside the untrusted processes; see ``docs/sandbox.md`` and ``docs/verifiers.md``.

This module imports only the standard library and (lazily) ``math_verify``; never torch or
transformers.
"""

from __future__ import annotations

import ast
import concurrent.futures as cf
import logging
import math
import multiprocessing
import os
import re
import signal
import textwrap
import threading
import time
from collections.abc import Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from sage_env import sandbox

log = logging.getLogger(__name__)

__all__ = [
    "MAX_PREDICTION_CHARS",
    "MAX_GOLD_CHARS",
    "STATUSES",
    "CodeVerifier",
    "MathVerifier",
    "VerifierResult",
    "extract_boxed",
    "extract_code",
]

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


def _as_text(value: Any) -> str:
    """Coerce model output of unexpected type (None, bytes, numbers) to ``str``; never raises."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    try:
        return str(value)
    except Exception:
        return ""


# --------------------------------------------------------------------------------------------
# Math
# --------------------------------------------------------------------------------------------

_BOX_RE = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")


def _matching_brace(text: str, open_idx: int) -> int:
    r"""Return the index of the ``}`` closing the ``{`` at ``open_idx``, or -1 if unbalanced.

    A backslash escapes the next character, so ``\{`` and ``\}`` do not count.
    """
    depth = 0
    i = open_idx
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def extract_boxed(text: str) -> str | None:
    r"""Return the content of the last top-level ``\boxed{...}`` or ``\fbox{...}`` in ``text``.

    Braces are matched with nesting (``\boxed{\frac{1}{2}}`` gives ``\frac{1}{2}``) and escaped
    braces (``\{``, ``\}``) are skipped. A box nested inside another box is part of the outer
    box's content. The brace-less form ``\boxed 5`` gives ``"5"``. If the last box is unbalanced
    (e.g. output truncated mid-answer) the last complete box before it is returned (best effort).

    Args:
        text: Model output; any string (non-strings are coerced, ``None`` is treated as empty).

    Returns:
        The box content (possibly ``""`` for ``\boxed{}``), or ``None`` when there is no complete
        box. Never raises.
    """
    try:
        text = _as_text(text)
        last: str | None = None
        pos = 0
        while True:
            match = _BOX_RE.search(text, pos)
            if match is None:
                break
            i = match.end()
            while i < len(text) and text[i] in " \t":
                i += 1
            if i < len(text) and text[i] == "{":
                end = _matching_brace(text, i)
                if end < 0:
                    break  # unbalanced: keep the last complete box
                last = text[i + 1 : end]
                pos = end + 1
            else:
                token = re.match(r"[^\s$}{\\]+", text[i:])
                if token is not None and i > match.end():
                    last = token.group(0)
                    pos = i + token.end()
                else:
                    pos = match.end()
        return last
    except Exception:
        return None


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


_MV: Any = None


def _math_verify() -> Any:
    """Import math_verify lazily (it pulls in SymPy, ~0.5 s) and return the module.

    Also silences its one-time "Timeout is disabled" warning: we pass ``parsing_timeout=None`` /
    ``timeout_seconds=None`` on purpose because :func:`_call_with_deadline` enforces the deadline.
    """
    global _MV
    if _MV is None:
        import math_verify
        import math_verify.grader
        import math_verify.parser

        for module in (math_verify.parser, math_verify.grader):
            if hasattr(module, "TIMEOUT_WARNING_SHOWN"):
                module.TIMEOUT_WARNING_SHOWN = True
        _MV = math_verify
    return _MV


def _mv_parse(text: str) -> list:
    mv = _math_verify()
    return mv.parse(
        text,
        extraction_config=[mv.LatexExtractionConfig(), mv.ExprExtractionConfig()],
        parsing_timeout=None,
    )


def _parse_first(candidates: Sequence[str]) -> tuple[list, str]:
    """Parse candidates in order; return the first non-empty parse and the text that gave it."""
    for cand in candidates:
        parsed = _mv_parse(cand)
        if parsed:
            return parsed, cand
    return [], ""


_GOLD_CACHE: dict[str, tuple[list, str]] = {}
_GOLD_CACHE_MAX = 4096


def _parse_gold(gold: str) -> tuple[list, str]:
    cached = _GOLD_CACHE.get(gold)
    if cached is not None:
        return cached
    text = gold
    inner = extract_boxed(gold) if "\\boxed" in gold or "\\fbox" in gold else None
    if inner is not None:
        text = inner
    result = _parse_first(["$" + text + "$", "\\boxed{" + text + "}"])
    if len(_GOLD_CACHE) >= _GOLD_CACHE_MAX:
        _GOLD_CACHE.clear()
    _GOLD_CACHE[gold] = result
    return result


def _show(parsed: list, fallback: str) -> str:
    """Return a short printable form of a math-verify parse (its string match if it has one)."""
    for item in reversed(parsed):
        if isinstance(item, str):
            return _clip(item, 60)
    return _clip(fallback, 60)


def _verify_math(prediction: Any, gold: Any, timeout_s: float) -> VerifierResult:
    """Score one (prediction, gold) pair; the single code path used in-process and in workers.

    Never raises (except KeyboardInterrupt/SystemExit, which are not ours to swallow).
    """
    try:
        pred = _as_text(prediction)
        gold_text = _as_text(gold).strip()
        if not gold_text:
            return VerifierResult(0.0, "invalid", "empty gold answer")
        if len(gold_text) > MAX_GOLD_CHARS:
            return VerifierResult(0.0, "invalid", f"gold answer longer than {MAX_GOLD_CHARS}")
        pred = pred[-MAX_PREDICTION_CHARS:]
        boxed = extract_boxed(pred)
        if boxed is not None:
            pred_candidates = ["\\boxed{" + boxed + "}", "$" + boxed + "$"]
        else:
            pred_candidates = [pred]

        def work() -> VerifierResult:
            gold_parsed, _ = _parse_gold(gold_text)
            if not gold_parsed:
                return VerifierResult(0.0, "invalid", f"gold unparseable: {_clip(gold_text, 60)}")
            if boxed is not None and not boxed.strip():
                return VerifierResult(0.0, "invalid", "empty \\boxed{}")
            pred_parsed, _ = _parse_first(pred_candidates) if pred.strip() else ([], "")
            if not pred_parsed:
                where = "\\boxed{}" if boxed is not None else "prediction"
                return VerifierResult(0.0, "invalid", f"no parseable answer in {where}")
            shown = _show(pred_parsed, boxed or "")
            gold_shown = _show(gold_parsed, gold_text)
            mv = _math_verify()
            if mv.verify(gold_parsed, pred_parsed, timeout_seconds=None):
                return VerifierResult(1.0, "passed", f"{shown} == gold {gold_shown}")
            return VerifierResult(0.0, "failed", f"{shown} != gold {gold_shown}")

        try:
            return _call_with_deadline(work, timeout_s)
        except _DeadlineExceeded:
            return VerifierResult(0.0, "timeout", f"math verification exceeded {timeout_s:g} s")
    except _DeadlineExceeded:
        return VerifierResult(0.0, "timeout", f"math verification exceeded {timeout_s:g} s")
    except MemoryError:
        return VerifierResult(0.0, "memory", "MemoryError during math verification")
    except Exception as exc:  # math-verify/SymPy bug on odd input: never propagate
        return VerifierResult(0.0, "crashed", f"verifier error: {type(exc).__name__}")


#: Words an answer may contain outside LaTeX commands: function names math-verify reads.
ANSWER_WORDS = frozenset(
    "sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh log ln exp sqrt pi inf oo"
    " infty max min gcd lcm mod deg".split()
)

_LATEX_COMMAND = re.compile(r"\\(?:begin|end)\s*\{[^{}]*\}|\\[A-Za-z]+")
_WORD = re.compile(r"[A-Za-z]{2,}")
_TEXT_COMMAND = re.compile(r"\\(?:text|mathrm|textbf|mbox|operatorname)\s*\{([^{}]*)\}")


def _grounded(parsed: list) -> bool:
    """True when a math-verify parse holds a SymPy value.

    That is a number, an expression in at most three single-letter variables, or a set,
    interval, tuple or matrix of them.
    """
    for item in parsed:
        if isinstance(item, str):
            continue
        symbols = getattr(item, "free_symbols", None)
        if symbols is None:
            continue
        names = [str(sym) for sym in symbols]
        if len(names) <= 3 and all(len(n) == 1 for n in names):
            return True
    return False


def _check_answer(answer: Any, timeout_s: float) -> VerifierResult:
    """The body of :meth:`MathVerifier.check_answer` (never raises)."""
    try:
        text = _as_text(answer).strip()
        if not text:
            return VerifierResult(0.0, "invalid", "empty answer")
        if len(text) > MAX_GOLD_CHARS:
            return VerifierResult(0.0, "invalid", f"answer longer than {MAX_GOLD_CHARS}")
        inner = extract_boxed(text) if "\\boxed" in text else None
        plain = _TEXT_COMMAND.sub(r" \1 ", inner if inner is not None else text)
        words = [
            w
            for w in _WORD.findall(_LATEX_COMMAND.sub(" ", plain))
            if w.lower() not in ANSWER_WORDS
        ]
        if words:
            return VerifierResult(
                0.0, "invalid", f"answer is free text, not math ({_clip(' '.join(words), 40)})"
            )
        parsed, _ = _call_with_deadline(lambda: _parse_gold(text), timeout_s)
        if not _grounded(parsed):
            return VerifierResult(0.0, "invalid", f"answer has no math value: {_clip(text, 40)}")
        return VerifierResult(1.0, "passed", f"answer parses to {_clip(str(parsed[0]), 40)}")
    except _DeadlineExceeded:
        return VerifierResult(0.0, "timeout", f"answer parsing exceeded {timeout_s:g} s")
    except MemoryError:
        return VerifierResult(0.0, "memory", "MemoryError while parsing the answer")
    except Exception as exc:  # SymPy bug on odd input: never propagate
        return VerifierResult(0.0, "crashed", f"verifier error: {type(exc).__name__}")


def _verify_math_chunk(items: list[tuple[Any, Any]], timeout_s: float) -> list[VerifierResult]:
    """Score a chunk of pairs in order."""
    return [_verify_math(p, g, timeout_s) for p, g in items]


def _worker_ping() -> int:
    """Return the worker's pid (used to wait until a fresh pool is up)."""
    return os.getpid()


def _math_worker_init() -> None:
    """Initialize a worker: ignore Ctrl-C (the parent handles it) and pre-import math-verify."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _math_verify()


class MathVerifier:
    r"""Check a model's final math answer against a gold answer with math-verify.

    The prediction's LAST ``\boxed{...}`` (see :func:`extract_boxed`) is parsed; when there is
    no box the whole (tail-truncated) text is handed to math-verify's own extraction. The gold is
    parsed as ``$gold$`` (then ``\boxed{gold}``). Score 1.0 iff
    ``math_verify.verify(gold, prediction)`` (huggingface/Math-Verify; numeric comparison rounds
    floats to 6 decimals, e.g. ``0.5000001 == 1/2``).

    Timeouts: math-verify's own timeouts use ``signal.alarm`` and only whole seconds; this class
    disables them and enforces ``timeout_s`` per pair with ``ITIMER_REAL`` instead. That needs the
    main thread: with ``workers=0`` called from another thread, pairs run without a deadline.
    With ``workers >= 1`` every call goes to a lazily created ``ProcessPoolExecutor`` ("spawn"
    context) whose workers run the same code in their main thread, plus a parent-side backstop
    (``n_pairs * timeout_s + worker_grace_s`` per wave of chunks, after a fresh pool has answered
    a ping) for hangs the signal cannot interrupt (long C calls) and for dead workers: the pool
    is killed and recreated, and the affected pairs are re-run one at a time so that only the
    culprit gets ``"timeout"`` / ``"crashed"``. Results are therefore identical in-process and
    in workers. Use workers (and an ``if __name__ == "__main__":`` guard in scripts) for
    untrusted input.

    Args:
        workers: 0 to verify in the calling process; ``n >= 1`` for a pool of ``n`` processes.
        timeout_s: Wall-clock budget per pair, in seconds (parsing gold + prediction + compare).

    Raises:
        ValueError: If ``workers < 0`` or ``timeout_s <= 0``.
    """

    #: Extra seconds the parent waits beyond ``n_pairs * timeout_s`` before declaring a worker hung.
    worker_grace_s: float = 20.0
    #: Seconds a fresh pool may take to start (spawn + imports) before it counts as broken.
    startup_timeout_s: float = 120.0

    def __init__(self, workers: int = 0, timeout_s: float = 5.0) -> None:
        if workers < 0:
            raise ValueError(f"workers must be >= 0, got {workers}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.workers = int(workers)
        self.timeout_s = float(timeout_s)
        self._pool: cf.ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self._chunk_fn = _verify_math_chunk  # module-level so it pickles; tests may swap it

    # -- public API ---------------------------------------------------------------------------

    def verify(self, prediction: str, gold: str) -> VerifierResult:
        r"""Score one prediction against one gold answer.

        Args:
            prediction: Model output text (any length; only the last
                :data:`MAX_PREDICTION_CHARS` characters are considered).
            gold: The reference final answer, LaTeX or plain (``"72"``, ``"\frac{1}{2}"``).

        Returns:
            A :class:`VerifierResult` with score 1.0 (``"passed"``) or 0.0. Never raises on input.
        """
        return self.verify_batch([(prediction, gold)])[0]

    def verify_batch(self, pairs: Sequence[tuple[str, str]]) -> list[VerifierResult]:
        """Score many (prediction, gold) pairs; output order matches input order.

        Args:
            pairs: Sequence of ``(prediction, gold)`` tuples, length N.

        Returns:
            N results. With workers, pairs are fanned out in chunks. Never raises on input.
        """
        items = [_as_pair(p) for p in pairs]
        if not items:
            return []
        if self.workers == 0:
            return [_verify_math(p, g, self.timeout_s) for p, g in items]
        with self._lock:
            return self._run_in_pool(items)

    def check_answer(self, answer: str) -> VerifierResult:
        r"""Check that a proposed gold answer is grounded math, before it is used as a gold.

        A task whose answer means nothing (``???``, ``five hundred dollars``) would match
        itself in :meth:`verify` (math-verify falls back to comparing strings), fail every
        solver, and be paid as hard. Here the answer must (1) hold no word of two or more
        letters outside LaTeX commands, except function names in :data:`ANSWER_WORDS`
        (``\text{...}`` counts as words, so units are not part of an answer), and (2) parse,
        as a gold answer would, to a SymPy value: a number, an expression in at most three
        single-letter variables, or a set, interval, tuple or matrix of them.

        Runs in the calling process, under ``timeout_s`` when called from the main thread.

        Returns:
            :class:`VerifierResult`: 1.0 ``"passed"``, else 0.0 ``"invalid"`` (or
            ``"timeout"`` / ``"crashed"``) with the reason. Never raises on input.
        """
        return _check_answer(answer, self.timeout_s)

    def close(self) -> None:
        """Shut the worker pool down (a later call creates a new one)."""
        with self._lock:
            pool, self._pool = self._pool, None
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> MathVerifier:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- pool management ----------------------------------------------------------------------

    def _get_pool(self) -> cf.ProcessPoolExecutor:
        """Return the pool, creating it and waiting for it to answer if there is none.

        Raises:
            RuntimeError: If a fresh pool does not answer within ``startup_timeout_s``.
        """
        if self._pool is None:
            self._pool = cf.ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_math_worker_init,
            )
            pings = [self._pool.submit(_worker_ping) for _ in range(self.workers)]
            done, _ = cf.wait(pings, timeout=self.startup_timeout_s)
            if len(done) < len(pings) or any(f.exception() is not None for f in done):
                self._kill_pool()
                raise RuntimeError("math worker pool did not start")
        return self._pool

    def _kill_pool(self) -> None:
        """Kill every worker of the current pool (hung or not) and forget the pool."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        procs = list((getattr(pool, "_processes", None) or {}).values())
        for proc in procs:
            try:
                proc.kill()
            except Exception:
                pass
        try:
            pool.shutdown(wait=False, cancel_futures=True)
        except Exception:
            pass
        for proc in procs:
            try:
                proc.join(timeout=5)
            except Exception:
                pass

    def _run_in_pool(self, items: list[tuple[str, str]]) -> list[VerifierResult]:
        n = len(items)
        results: list[VerifierResult | None] = [None] * n
        size = max(1, min(256, math.ceil(n / (self.workers * 2))))
        queue = [list(range(i, min(n, i + size))) for i in range(0, n, size)]
        suspects: list[int] = []  # indices re-run alone after a pool failure, for exact blame
        while queue or suspects:
            try:
                self._get_pool()
            except Exception as exc:  # cannot start workers at all: do not retry per pair
                broken = VerifierResult(0.0, "crashed", f"worker pool failed to start: {exc}")
                return [r if r is not None else broken for r in results]
            if suspects:
                idx = suspects.pop(0)
                outcome = self._run_wave([[idx]], items, results)
                if outcome is not None:
                    results[idx] = outcome
                continue
            # submit every chunk at once: workers stay busy with no barrier between waves; after
            # a failure the unfinished pairs are re-run one by one to blame the guilty one
            wave, queue = queue, []
            failure = self._run_wave(wave, items, results)
            if failure is not None:
                suspects.extend(i for chunk in wave for i in chunk if results[i] is None)
        return [
            r if r is not None else VerifierResult(0.0, "crashed", "no result") for r in results
        ]

    def _run_wave(
        self,
        chunks: list[list[int]],
        items: list[tuple[str, str]],
        results: list[VerifierResult | None],
    ) -> VerifierResult | None:
        """Run chunks on the pool (queued, so every worker stays busy), filling ``results``.

        Returns None on success, else the failure result (timeout / crashed); on failure the pool
        has been killed and every chunk not finished is left with ``None`` results.
        """
        try:
            pool = self._get_pool()
            start = time.monotonic()
            futures = {}
            for chunk in chunks:
                payload = [items[i] for i in chunk]
                futures[pool.submit(self._chunk_fn, payload, self.timeout_s)] = chunk
        except Exception as exc:  # BrokenProcessPool on submit, pool start-up failure ...
            self._kill_pool()
            return VerifierResult(0.0, "crashed", f"worker pool failed: {type(exc).__name__}")
        pending = set(futures)
        # Every pair is bounded by timeout_s inside the worker; allow for the chunks running one
        # after the other (a worker may be slower to become ready than the others).
        n_pairs = sum(len(c) for c in chunks)
        deadline = start + n_pairs * self.timeout_s + self.worker_grace_s
        failure: VerifierResult | None = None
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                failure = VerifierResult(
                    0.0, "timeout", f"math worker exceeded {self.timeout_s:g} s and was killed"
                )
                break
            done, pending = cf.wait(pending, timeout=remaining, return_when=cf.FIRST_COMPLETED)
            for fut in done:
                chunk = futures[fut]
                try:
                    out = fut.result()
                    if not isinstance(out, list) or len(out) != len(chunk):
                        raise TypeError("bad worker output")
                except BrokenProcessPool:
                    failure = VerifierResult(0.0, "crashed", "math worker process died")
                    continue
                except Exception as exc:
                    failure = VerifierResult(0.0, "crashed", f"worker error: {type(exc).__name__}")
                    continue
                for i, res in zip(chunk, out, strict=True):
                    results[i] = res
            if failure is not None:
                break
        if failure is not None:
            self._kill_pool()
        return failure


def _as_pair(pair: Any) -> tuple[Any, Any]:
    try:
        pred, gold = pair
        return pred, gold
    except Exception:
        return "", ""


# --------------------------------------------------------------------------------------------
# Code
# --------------------------------------------------------------------------------------------

_FENCE_RE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n", re.MULTILINE)
_CLOSE_RE = re.compile(r"^[ \t]*```[ \t]*$", re.MULTILINE)
_PY_LANGS = {"", "python", "py", "python3", "py3"}


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
        return True
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return False


def _defines(code: str, name: str) -> bool:
    """Return True if ``code`` defines ``name`` at top level (def / class / assignment / import)."""
    try:
        tree = ast.parse(code)
    except Exception:
        pattern = rf"^\s*(?:async\s+)?(?:def|class)\s+{re.escape(name)}\b"
        return re.search(pattern, code, re.MULTILINE) is not None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == name:
                return True
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
    return False


def extract_code(text: str, entry_point: str | None = None) -> str | None:
    """Extract a Python program from model output.

    Takes fenced blocks tagged ``python``, ``py``, ``python3`` or untagged (other languages are
    ignored). With several blocks, the last one that defines ``entry_point`` wins, else the last
    block. An unclosed final fence (truncated output) runs to the end of the text. Without any
    fence, the whole text is returned if it parses as Python (``ast.parse``).

    Args:
        text: Model output.
        entry_point: Name of the function the tests call, if known.

    Returns:
        The dedented program text, or ``None`` if there is no fenced block and the text is not
        valid Python (or is blank). Never raises.
    """
    try:
        text = _as_text(text)
        blocks: list[str] = []
        pos = 0
        while True:
            fence = _FENCE_RE.search(text, pos)
            if fence is None:
                break
            close = _CLOSE_RE.search(text, fence.end())
            reopen = _FENCE_RE.search(text, fence.end())
            if (
                reopen is not None
                and reopen.group(1)
                and (close is None or reopen.start() < close.start())
            ):
                # "```\n\n```python\n...": a bare fence followed by a tagged one before any
                # close: the bare fence was stray; start over at the tagged one
                pos = reopen.start()
                continue
            body = text[fence.end() : close.start() if close else len(text)]
            if fence.group(1).lower() in _PY_LANGS:
                blocks.append(textwrap.dedent(body).strip("\n"))
            if close is None:
                break
            pos = close.end()
        blocks = [b for b in blocks if b.strip()]
        if blocks:
            if entry_point:
                for block in reversed(blocks):
                    if _defines(block, entry_point):
                        return block
            return blocks[-1]
        if "```" in text:
            return None
        code = textwrap.dedent(text).strip("\n")
        if code.strip() and _parses(code):
            return code
        return None
    except Exception:
        return None


class CodeVerifier:
    """Runs a candidate program against independent test snippets inside :mod:`sage_env.sandbox`.

    Semantics: ``setup`` then ``program`` are exec'd in one module namespace (named
    ``"solution"``, so ``if __name__ == "__main__":`` blocks do not run); each test snippet then
    runs in its OWN forked process holding a shallow copy of that namespace, and is judged
    separately. Score = passed / total, as in HumanEval's functional-correctness evaluation
    (Chen et al. 2021) but per test.

    Anti-gaming rule (see ``docs/verifiers.md``): every ``assert`` in a test is rewritten before
    the program runs. ``assert X == <literal>`` (or ``<literal> == X``) sends only the value of
    ``X``, encoded by exact builtin type, to the judging process, which keeps the literal to
    itself and compares it there; every other ``assert E`` sends ``E``'s truth, with a top-level
    ``==`` made type-strict (exact builtin types compared structurally, so an object whose
    ``__eq__`` is always true fails). A test passes only if its process finished normally, raised
    nothing and every literal assertion was checked and matched. ``exit(0)``/``os._exit(0)``,
    patched ``assert``/builtins, printed text and forged messages therefore cannot make a literal
    assertion pass; see the docs for what remains forgeable.

    Isolation: each call uses one fresh sandboxed process tree (``sandbox.isolation_level()``:
    bubblewrap with read-only root and no network, or ``unshare``, or rlimits only), an
    unprivileged uid when run as root, cgroups, rlimits, a private temp cwd, a scrubbed
    environment and capped output. Where ``sandbox.zygotes_available()``, each call is forked
    from a long-lived sandbox (one per concurrent call) into its own mount and IPC namespaces;
    otherwise a small pool of pre-started sandboxed harnesses hides interpreter start-up. See
    ``docs/sandbox.md``.

    Args:
        timeout_s: Wall-clock budget for the whole call (program + all tests), seconds.
        memory_mb: Address-space limit per process and memory-cgroup limit of the run, MiB.
        max_output_bytes: Cap on captured stdout and on captured stderr, bytes each.
        python: Interpreter to run; default :func:`sage_env.sandbox.default_python` (an
            interpreter the dropped uid can execute).
        pool_size: Pre-started harnesses kept warm when zygotes are not available (0 = start
            one per call).
        max_processes: Process/thread limit per run.
        executor: Anything with ``run_job(job: dict) -> sandbox.RawRun`` that runs
            :data:`sage_env.sandbox.HARNESS` on the job elsewhere (e.g. a remote sandbox); default
            a local :class:`sage_env.sandbox.SandboxPool`.

    Raises:
        ValueError: On non-positive limits.
    """

    def __init__(
        self,
        timeout_s: float = 10.0,
        memory_mb: int = 1024,
        max_output_bytes: int = 65536,
        python: str | None = None,
        *,
        pool_size: int = 2,
        max_processes: int = 64,
        executor: Any = None,
    ) -> None:
        if not timeout_s > 0 or memory_mb <= 0 or max_output_bytes < 0:
            raise ValueError("timeout_s and memory_mb must be > 0, max_output_bytes >= 0")
        self.timeout_s = float(timeout_s)
        self.memory_mb = int(memory_mb)
        self.max_output_bytes = int(max_output_bytes)
        self.python = python or sandbox.default_python()
        self.pool_size = int(pool_size)
        self.max_processes = int(max_processes)
        self._executor = executor
        self._own_pool: sandbox.SandboxPool | None = None
        self._pool_lock = threading.Lock()

    # -- public API ---------------------------------------------------------------------------

    def verify(self, program: str, tests: Sequence[str], setup: str = "") -> VerifierResult:
        """Run ``setup`` + ``program`` and each test; score the fraction of tests passed.

        Args:
            program: Candidate Python source (e.g. from :func:`extract_code`).
            tests: Test snippets (e.g. ``"assert f(2) == 4"``), length T. A single string is
                treated as one test.
            setup: Trusted code run before the program (imports, helpers).

        Returns:
            A :class:`VerifierResult` with ``passed``/``total`` = number passed / T and
            score = passed / T. T == 0 gives status ``"invalid"``. Never raises on input.
        """
        try:
            program = _as_text(program)
            setup = _as_text(setup)
            if isinstance(tests, (str, bytes)):
                tests = [tests]
            test_list = [_as_text(t) for t in (tests or [])]
        except Exception:
            return VerifierResult(0.0, "invalid", "unreadable job")
        total = len(test_list)
        if total == 0:
            return VerifierResult(0.0, "invalid", "no tests")
        job = {"mode": "verify", "setup": setup, "program": program, "tests": test_list}
        for attempt in (1, 2):
            try:
                raw = self._get_executor().run_job(job)
            except Exception as exc:
                return VerifierResult(
                    0.0, "crashed", f"sandbox failed: {type(exc).__name__}: {exc}", 0, total
                )
            result = self._judge(raw, total)
            # The harness runs under its own uid, out of the program's reach; a SIGKILL that is
            # neither our timeout nor the memory cgroup comes from outside (it used to be
            # bwrap's parent-death signal when the thread that started a sandbox exited, now
            # fixed in sage_env.sandbox). Run the job once more rather than score the model.
            if not (
                attempt == 1
                and result.status == "crashed"
                and not raw.timed_out
                and raw.returncode == -signal.SIGKILL
            ):
                return result
            log.warning("code verifier: sandbox harness was SIGKILLed from outside; retrying")
        return result

    def verify_batch(
        self, jobs: Sequence[tuple[str, Sequence[str], str]], max_parallel: int = 2
    ) -> list[VerifierResult]:
        """Run many ``(program, tests, setup)`` jobs, up to ``max_parallel`` sandboxes at a time.

        Args:
            jobs: Sequence of ``(program, tests)`` or ``(program, tests, setup)``, length N.
            max_parallel: Maximum concurrent sandboxes.

        Returns:
            N results in input order. Never raises on input.
        """

        def one(job: Any) -> VerifierResult:
            try:
                program, tests, *rest = job
                setup = rest[0] if rest else ""
            except Exception:
                return VerifierResult(0.0, "invalid", "job must be (program, tests[, setup])")
            return self.verify(program, tests, setup)

        jobs = list(jobs)
        if not jobs:
            return []
        if max_parallel <= 1 or len(jobs) == 1:
            return [one(j) for j in jobs]
        pool = self._get_executor()
        if isinstance(pool, sandbox.SandboxPool) and pool.size < max_parallel:
            pool.size = max_parallel  # keep one warm harness per concurrent job
        with cf.ThreadPoolExecutor(max_workers=min(max_parallel, len(jobs))) as ex:
            return list(ex.map(one, jobs))

    def close(self) -> None:
        """Kill the pre-started sandboxes this verifier owns (it stays usable)."""
        with self._pool_lock:
            pool, self._own_pool = self._own_pool, None
        if pool is not None:
            pool.close()

    def __enter__(self) -> CodeVerifier:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------------

    def _get_executor(self) -> Any:
        if self._executor is not None:
            return self._executor
        with self._pool_lock:
            if self._own_pool is None:
                self._own_pool = sandbox.SandboxPool(
                    self.pool_size,
                    sandbox.SandboxConfig(
                        timeout_s=self.timeout_s,
                        memory_mb=self.memory_mb,
                        max_output_bytes=self.max_output_bytes,
                        max_processes=self.max_processes,
                        python=self.python,
                    ),
                )
            return self._own_pool

    def _judge(self, run: sandbox.RawRun, total: int) -> VerifierResult:
        """Turn the judging harness's report, exit status and timing into a result."""
        events = sandbox.parse_report(run.report)
        by_kind: dict[str, dict] = {}
        verdicts: dict[int, dict] = {}
        for event in events:
            kind = str(event.get("ev"))
            by_kind.setdefault(kind, event)
            idx = event.get("i")
            if kind == "test" and isinstance(idx, int) and 0 <= idx < total:
                verdicts.setdefault(idx, event)
        passed = sum(1 for ev in verdicts.values() if ev.get("ok") is True)
        failures = [verdicts[i] for i in sorted(verdicts) if verdicts[i].get("ok") is not True]
        score = passed / total
        err = sandbox.describe_event

        def result(status: str, reason: str, s: float = score, p: int = passed) -> VerifierResult:
            return VerifierResult(s, status, reason, p, total)

        if "syntax_error" in by_kind:
            event = by_kind["syntax_error"]
            status = "memory" if event.get("exc") == "MemoryError" else "syntax_error"
            return result(status, f"program does not compile: {err(event)}", 0.0, 0)
        if "setup_error" in by_kind:
            return result("invalid", f"test setup failed: {err(by_kind['setup_error'])}", 0.0, 0)
        worker_sig = by_kind.get("worker_signal", {}).get("signal")
        if (
            run.timed_out
            or worker_sig == signal.SIGXCPU
            or any(ev.get("signal") == signal.SIGXCPU for ev in failures)
        ):
            return result(
                "timeout", f"timed out after {self.timeout_s:g} s; {passed}/{total} passed"
            )
        if "program_error" in by_kind:
            event = by_kind["program_error"]
            if event.get("exc") == "MemoryError":
                status = "memory"
            elif sandbox.is_blocked(event):
                status = "blocked"
            else:
                status = "failed"
            return result(status, f"program raised {err(event)}", 0.0, 0)
        if run.oom_killed or any(ev.get("exc") == "MemoryError" for ev in failures):
            return result("memory", f"out of memory (limit {self.memory_mb} MiB); {passed}/{total}")
        if "done" not in by_kind:
            return result(
                "crashed", f"sandbox harness died (exit {run.returncode}); {passed}/{total} passed"
            )
        if "program_ok" not in by_kind:
            where = f"killed by {_signal_name(worker_sig)}" if worker_sig else "exited early"
            return result("failed", f"program {where} before the tests ran", 0.0, 0)
        if passed == total:
            return result("passed", f"all {total} tests passed")
        for event in failures:
            if event.get("signal") is not None:
                return result(
                    "crashed",
                    f"test {event.get('i')} killed by {event.get('msg')}; {passed}/{total} passed",
                )
        status = "blocked" if any(sandbox.is_blocked(ev) for ev in failures) else "failed"
        reason = f"{passed}/{total} passed"
        if failures:
            reason += f"; test {failures[0].get('i')}: {err(failures[0])}"
        elif worker_sig:
            reason += f"; worker killed by {_signal_name(worker_sig)}"
        return result(status, reason)


def _signal_name(sig: Any) -> str:
    try:
        return signal.Signals(int(sig)).name
    except (TypeError, ValueError):
        return f"signal {sig}"

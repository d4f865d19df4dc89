r"""MathVerifier: the last ``\\boxed{}`` answer against a gold answer, through math-verify.

The answer is found by :func:`sage_env.text.parsing.extract_boxed` and checked under
:func:`sage_env.verifiers.deadline._call_with_deadline`.

math-verify (huggingface/Math-Verify, https://github.com/huggingface/Math-Verify) parses LaTeX
and plain expressions into SymPy and checks equivalence; it is imported lazily.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import math
import multiprocessing
import os
import re
import signal
import threading
import time
from collections.abc import Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from sage_env.text.parsing import as_text, extract_boxed
from sage_env.verifiers.deadline import _call_with_deadline, _DeadlineExceeded
from sage_env.verifiers.math_guards import normalise_mixed_numbers, numbers_disagree
from sage_env.verifiers.result import (
    MAX_GOLD_CHARS,
    MAX_PREDICTION_CHARS,
    VerifierResult,
    _clip,
)

log = logging.getLogger("sage_env.verifiers")

_MV: Any = None


def _math_verify() -> Any:
    """Import math_verify lazily (it pulls in SymPy, slow to import) and return the module.

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


_WARM_UP_PAIRS = (
    ("\\boxed{2\\sqrt{2}+\\frac{3}{4}x^2}", "2\\sqrt{2} + \\frac{3}{4}x^2"),
    ("\\boxed{0.75}", "3/4"),
    ("\\boxed{(1, 2]}", "(1,2]"),
    ("\\boxed{\\{1, 2\\}}", "\\{1,2\\}"),
    ("x = \\boxed{\\sin(\\pi/6) + \\log_2 8}", "\\frac{7}{2}"),
    ("\\boxed{x \\in [0, 1)}", "[0,1)"),
)
"""Pairs :func:`_warm_up` verifies: numbers, a fraction, a root, a polynomial, intervals, a
set, functions and an equation, so that the lazy imports and parser builds of math-verify,
latex2sympy and SymPy they trigger happen before any deadline."""
_WARM = False


def _warm_up() -> None:
    """Import math-verify and verify :data:`_WARM_UP_PAIRS` once per process, untimed.

    The first call in a fresh process imports SymPy and math-verify and builds their parsers
    (seconds on a loaded machine). Under a per-pair deadline that
    cold start was charged to the first pair: one user saw the same reply scored f = 0.5 once
    and 1.0 six times (issue 33, item 8). :func:`_verify_math` and :func:`_check_answer` call
    this before they arm their deadline, and worker processes call it in their initializer,
    so a fresh pool answers its ping only once it is warm. Never raises.
    """
    global _WARM
    if _WARM:
        return
    _WARM = True
    try:
        mv = _math_verify()
        for pred, gold in _WARM_UP_PAIRS:
            gold_parsed = _mv_parse("$" + gold + "$")
            pred_parsed = _mv_parse(pred)
            if mv.verify(gold_parsed, pred_parsed, timeout_seconds=None):
                numbers_disagree(gold_parsed, pred_parsed)
    except Exception as exc:  # a broken install shows up, with its reason, in the real call
        log.debug("math-verify warm-up failed: %s", exc)


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
        _warm_up()  # outside the deadline: a cold import is not the pair's fault
        pred = as_text(prediction)
        gold_text = as_text(gold).strip()
        if not gold_text:
            return VerifierResult(0.0, "invalid", "empty gold answer")
        if len(gold_text) > MAX_GOLD_CHARS:
            return VerifierResult(0.0, "invalid", f"gold answer longer than {MAX_GOLD_CHARS}")
        pred = pred[-MAX_PREDICTION_CHARS:]
        boxed = extract_boxed(pred)
        if boxed is not None:
            answer = normalise_mixed_numbers(boxed)
            pred_candidates = ["\\boxed{" + answer + "}", "$" + answer + "$"]
        else:
            pred_candidates = [normalise_mixed_numbers(pred)]

        def work() -> VerifierResult:
            gold_parsed, _ = _parse_gold(normalise_mixed_numbers(gold_text))
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
                if numbers_disagree(gold_parsed, pred_parsed):  # math-verify's tolerance
                    return VerifierResult(0.0, "failed", f"{shown} != gold {gold_shown} exactly")
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
        _warm_up()  # outside the deadline, as in _verify_math
        text = as_text(answer).strip()
        if not text:
            return VerifierResult(0.0, "invalid", "empty answer")
        if len(text) > MAX_GOLD_CHARS:
            return VerifierResult(0.0, "invalid", f"answer longer than {MAX_GOLD_CHARS}")
        # read as _verify_math reads a gold: "4 10/3" is no mixed number, and "2 1/2" is 5/2
        text = normalise_mixed_numbers(text)
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
    """Initialize a worker: ignore Ctrl-C (the parent handles it) and warm math-verify up.

    A worker takes work only after this returns, so :func:`_warm_up` (imports, parser
    builds) never counts against a pair's deadline, and the pool's start-up ping waits for it.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _warm_up()


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

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

Isolation status: the code runner uses a separate process group, resource limits, a wall-clock
timeout, a fresh temporary working directory, a scrubbed environment and capped output. It does
NOT yet drop privileges, unshare the network or mount namespaces, or contain fork bombs when run
as root; that hardening (bubblewrap / ``unshare``, uid drop, cgroups, a hostile-program test
suite) is a later issue and plugs into :func:`_launch`, the single place that starts the child.

This module imports only the standard library and (lazily) ``math_verify``; never torch or
transformers.
"""

from __future__ import annotations

import ast
import concurrent.futures as cf
import json
import math
import multiprocessing
import os
import re
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

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

#: The closed set of statuses a :class:`VerifierResult` can carry.
STATUSES = ("passed", "failed", "timeout", "memory", "crashed", "syntax_error", "invalid")

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
        size = max(1, min(32, math.ceil(n / (self.workers * 4))))
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
            wave, queue = queue[: self.workers], queue[self.workers :]
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
        """Run up to ``workers`` chunks at once, filling ``results``.

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


# The harness runs as ``python -I -c HARNESS`` in the child. It reads one JSON job from stdin
# BEFORE any untrusted code runs, applies the resource limits, then execs setup + program in one
# module namespace and each test in a shallow copy of it. Results go to a private pipe fd as lines
# "<nonce> <json>" so nothing the program prints on stdout/stderr can fake them.
HARNESS = r"""
import builtins, json, os, resource, signal, sys, types

def _main():
    job = json.loads(sys.stdin.buffer.read().decode("ascii"))  # stdin stays at EOF
    nonce, fd = job["nonce"], job["fd"]
    if fd != 3:
        os.dup2(fd, 3)
        os.close(fd)
        fd = 3
    os.set_inheritable(fd, False)
    for name, soft, hard in job["limits"]:
        try:
            resource.setrlimit(getattr(resource, name), (soft, hard))
        except (ValueError, OSError):
            pass
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _write, _dumps, _exec, _dict, _type = os.write, json.dumps, exec, dict, type

    def describe(exc):
        try:
            name = _type(exc).__name__
        except BaseException:
            name = "Exception"
        try:
            msg = str(exc)[:160]
        except BaseException:
            msg = "<unprintable>"
        return name, msg

    def report(**event):
        line = "\n" + nonce + " " + _dumps(event, ensure_ascii=True) + "\n"
        try:
            _write(fd, line.encode("ascii"))
        except BaseException:
            pass

    try:
        setup = compile(job["setup"], "<setup>", "exec")
    except BaseException as exc:
        name, msg = describe(exc)
        report(ev="setup_error", exc=name, msg=msg)
        return
    try:
        program = compile(job["program"], "<program>", "exec")
    except BaseException as exc:
        name, msg = describe(exc)
        report(ev="syntax_error", exc=name, msg=msg)
        return
    tests = []
    for src in job["tests"]:
        try:
            tests.append((compile(src, "<test>", "exec"), None))
        except BaseException as exc:
            tests.append((None, describe(exc)))
    module = types.ModuleType("solution")
    sys.modules["solution"] = module
    namespace = module.__dict__
    namespace["__builtins__"] = builtins
    try:
        _exec(setup, namespace)
    except BaseException as exc:
        name, msg = describe(exc)
        report(ev="setup_error", exc=name, msg=msg)
        return
    try:
        _exec(program, namespace)
    except BaseException as exc:
        name, msg = describe(exc)
        report(ev="program_error", exc=name, msg=msg)
        return
    for i, (code, err) in enumerate(tests):
        if code is None:
            report(ev="test", i=i, ok=False, exc=err[0], msg=err[1])
            continue
        try:
            _exec(code, _dict(namespace))
        except BaseException as exc:
            name, msg = describe(exc)
            report(ev="test", i=i, ok=False, exc=name, msg=msg)
        else:
            report(ev="test", i=i, ok=True)
    report(ev="done")

_main()
for _stream in (sys.stdout, sys.stderr):
    try:
        _stream.flush()
    except BaseException:
        pass
os._exit(0)
"""

_CHILD_PATH = "/usr/local/bin:/usr/bin:/bin"
_REPORT_CAP_BYTES = 4 << 20
_DRAIN_GRACE_S = 0.5


def _launch(
    argv: list[str], cwd: str, env: dict[str, str], pass_fds: tuple[int, ...]
) -> subprocess.Popen:
    """Start the sandboxed child; the ONE place that launches untrusted code.

    Currently: a new session/process group, piped stdio, only ``pass_fds`` inherited, a scrubbed
    environment and a private working directory. Resource limits are applied by the harness itself
    (first thing, before untrusted code), not via ``preexec_fn``, which is unsafe when the parent
    has threads (``CodeVerifier.verify_batch`` uses threads). Later hardening (bubblewrap /
    ``unshare -n``, uid drop, cgroups) wraps ``argv`` here.

    Args:
        argv: Interpreter command line.
        cwd: Working directory (a fresh temporary directory).
        env: Complete child environment.
        pass_fds: File descriptors to keep open in the child.

    Returns:
        The started process (its pid is also its process-group id).

    Raises:
        OSError: If the interpreter cannot be started.
    """
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=env,
        pass_fds=pass_fds,
        close_fds=True,
        start_new_session=True,
    )


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


@dataclass
class _RunOutput:
    nonce: str
    returncode: int | None
    timed_out: bool
    stdout: bytes
    stderr: bytes
    report: bytes


class CodeVerifier:
    """Runs a candidate program against independent test snippets in a child Python process.

    Semantics: ``setup`` then ``program`` are exec'd in one module namespace (named
    ``"solution"``, so ``if __name__ == "__main__":`` blocks do not run); each test snippet is
    then exec'd in a shallow copy of that namespace and passes iff it raises nothing
    (``SystemExit`` included counts as a failure). Score = passed / total, as in HumanEval's
    functional-correctness evaluation (Chen et al. 2021) but judged per test.

    Each :meth:`verify` call runs ONE child (``python -I -c HARNESS``) with: a new process group
    killed as a whole (``SIGKILL``) at the wall-clock timeout; ``RLIMIT_AS`` = ``memory_mb``,
    ``RLIMIT_CPU`` ~ timeout, ``RLIMIT_FSIZE`` 16 MiB, ``RLIMIT_NOFILE`` 64, ``RLIMIT_CORE`` 0;
    a fresh temporary cwd removed afterwards; an environment of only ``PATH`` and ``LANG``;
    stdout/stderr read to at most ``max_output_bytes`` each (the rest is drained and dropped).
    Per-test results come back over a private pipe as nonce-prefixed JSON lines, so printing a
    fake report does nothing; a program that exits early leaves its tests unreported = failed.

    NOT yet isolated (a later issue): the network, the filesystem outside cwd (the child runs as
    the parent's user, e.g. root), other processes, process counts (``RLIMIT_NPROC`` is ignored
    for root), and a program that deliberately inspects the harness's memory to forge the nonce.
    Only run it on output from models you train, on a machine you do not mind being poked at.

    Args:
        timeout_s: Wall-clock budget for the whole call (program + all tests), seconds.
        memory_mb: Address-space limit of the child, MiB.
        max_output_bytes: Cap on captured stdout and on captured stderr, bytes each.
        python: Interpreter to run; defaults to ``sys.executable``.

    Raises:
        ValueError: On non-positive limits.
    """

    def __init__(
        self,
        timeout_s: float = 10.0,
        memory_mb: int = 1024,
        max_output_bytes: int = 65536,
        python: str | None = None,
    ) -> None:
        if not timeout_s > 0 or memory_mb <= 0 or max_output_bytes < 0:
            raise ValueError("timeout_s and memory_mb must be > 0, max_output_bytes >= 0")
        self.timeout_s = float(timeout_s)
        self.memory_mb = int(memory_mb)
        self.max_output_bytes = int(max_output_bytes)
        self.python = python or sys.executable

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
        try:
            run = self._run(program, test_list, setup)
        except Exception as exc:
            return VerifierResult(
                0.0, "crashed", f"sandbox failed: {type(exc).__name__}: {exc}", 0, total
            )
        return self._judge(run, total)

    def verify_batch(
        self, jobs: Sequence[tuple[str, Sequence[str], str]], max_parallel: int = 2
    ) -> list[VerifierResult]:
        """Run many ``(program, tests, setup)`` jobs, up to ``max_parallel`` children at a time.

        Args:
            jobs: Sequence of ``(program, tests)`` or ``(program, tests, setup)``, length N.
            max_parallel: Maximum concurrent child processes.

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
        with cf.ThreadPoolExecutor(max_workers=min(max_parallel, len(jobs))) as ex:
            return list(ex.map(one, jobs))

    # -- internals ----------------------------------------------------------------------------

    def _limits(self) -> list[tuple[str, int, int]]:
        cpu = math.ceil(self.timeout_s) + 1
        mem = self.memory_mb << 20
        return [
            ("RLIMIT_AS", mem, mem),
            ("RLIMIT_CPU", cpu, cpu + 1),
            ("RLIMIT_FSIZE", 16 << 20, 16 << 20),
            ("RLIMIT_NOFILE", 64, 64),
            ("RLIMIT_CORE", 0, 0),
        ]

    def _run(self, program: str, tests: list[str], setup: str) -> _RunOutput:
        nonce = secrets.token_hex(16)
        workdir = tempfile.mkdtemp(prefix="sage-code-")
        report_r, report_w = os.pipe()
        proc: subprocess.Popen | None = None
        try:
            job = {
                "nonce": nonce,
                "fd": report_w,
                "limits": self._limits(),
                "setup": setup,
                "program": program,
                "tests": tests,
            }
            payload = json.dumps(job, ensure_ascii=True).encode("ascii")
            env = {"PATH": _CHILD_PATH, "LANG": "C.UTF-8"}
            argv = [self.python, "-I", "-c", HARNESS]
            start = time.monotonic()
            proc = _launch(argv, workdir, env, (report_w,))
            os.close(report_w)
            report_w = -1
            run = self._communicate(proc, payload, report_r, start + self.timeout_s)
            run.nonce = nonce
            return run
        finally:
            if report_w >= 0:
                os.close(report_w)
            os.close(report_r)
            if proc is not None:
                _killpg(proc.pid)
                if proc.returncode is None:
                    proc.kill()
                    proc.wait()
                for stream in (proc.stdin, proc.stdout, proc.stderr):
                    try:
                        if stream is not None:
                            stream.close()
                    except Exception:
                        pass
            shutil.rmtree(workdir, ignore_errors=True)

    def _communicate(
        self, proc: subprocess.Popen, payload: bytes, report_fd: int, deadline: float
    ) -> _RunOutput:
        """Feed stdin and drain stdout/stderr/report without threads or deadlock."""
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        caps = {
            proc.stdout.fileno(): self.max_output_bytes,
            proc.stderr.fileno(): self.max_output_bytes,
            report_fd: _REPORT_CAP_BYTES,
        }
        bufs = {fd: bytearray() for fd in caps}
        stdin_fd = proc.stdin.fileno()
        os.set_blocking(stdin_fd, False)
        view = memoryview(payload)
        sel = selectors.DefaultSelector()
        for fd in caps:
            sel.register(fd, selectors.EVENT_READ)
        sel.register(stdin_fd, selectors.EVENT_WRITE)
        timed_out = False
        exited_at: float | None = None
        try:
            while sel.get_map():
                now = time.monotonic()
                if exited_at is None and proc.poll() is not None:
                    # The harness is gone; kill leftovers that may hold the pipes open.
                    exited_at = now
                    _killpg(proc.pid)
                limit = exited_at + _DRAIN_GRACE_S if exited_at is not None else deadline
                if now >= limit:
                    if exited_at is None:
                        timed_out = True
                        _killpg(proc.pid)
                        exited_at = now
                        continue
                    break
                for key, _ in sel.select(min(0.1, limit - now)):
                    fd = key.fd
                    if fd == stdin_fd:
                        try:
                            sent = os.write(fd, view[:65536])
                            view = view[sent:]
                        except BlockingIOError:
                            continue
                        except OSError:  # BrokenPipe: child died or closed stdin
                            view = view[:0]
                        if not view:
                            sel.unregister(fd)
                            proc.stdin.close()
                        continue
                    try:
                        data = os.read(fd, 65536)
                    except BlockingIOError:
                        continue
                    except OSError:
                        data = b""
                    if not data:
                        sel.unregister(fd)
                        continue
                    room = caps[fd] - len(bufs[fd])
                    if room > 0:
                        bufs[fd] += data[:room]
        finally:
            sel.close()
        if not timed_out:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
        _killpg(proc.pid)
        if proc.returncode is None:
            proc.kill()
            proc.wait()
        return _RunOutput(
            nonce="",
            returncode=proc.returncode,
            timed_out=timed_out,
            stdout=bytes(bufs[proc.stdout.fileno()]),
            stderr=bytes(bufs[proc.stderr.fileno()]),
            report=bytes(bufs[report_fd]),
        )

    def _judge(self, run: _RunOutput, total: int) -> VerifierResult:
        """Turn the child's report lines, exit status and timing into a result."""
        prefix = run.nonce.encode("ascii") + b" "
        events: list[dict] = []
        for line in run.report.split(b"\n"):
            if not line.startswith(prefix):
                continue
            try:
                event = json.loads(line[len(prefix) :])
            except Exception:
                continue
            if isinstance(event, dict):
                events.append(event)
        by_kind: dict[str, dict] = {}
        passed_ids: set[int] = set()
        first_fail: dict | None = None
        memory = False
        for event in events:
            kind = event.get("ev")
            by_kind.setdefault(str(kind), event)
            if kind == "test":
                idx = event.get("i")
                if not isinstance(idx, int) or not 0 <= idx < total:
                    continue
                if event.get("ok") is True:
                    passed_ids.add(idx)
                else:
                    memory = memory or event.get("exc") == "MemoryError"
                    if first_fail is None:
                        first_fail = event
        passed = len(passed_ids)
        score = passed / total
        stderr_tail = run.stderr[-2048:].decode("utf-8", "replace")
        oom_words = ("MemoryError", "Cannot allocate memory", "out of memory")

        def err(event: dict) -> str:
            return f"{event.get('exc', '?')}: {event.get('msg', '')}".rstrip(": ")

        def result(status: str, reason: str, s: float = score, p: int = passed) -> VerifierResult:
            return VerifierResult(s, status, reason, p, total)

        if "syntax_error" in by_kind:
            event = by_kind["syntax_error"]
            status = "memory" if event.get("exc") == "MemoryError" else "syntax_error"
            return result(status, f"program does not compile: {err(event)}", 0.0, 0)
        if "setup_error" in by_kind:
            return result("invalid", f"test setup failed: {err(by_kind['setup_error'])}", 0.0, 0)
        rc = run.returncode
        killed_by = -rc if rc is not None and rc < 0 else None
        if run.timed_out or killed_by == signal.SIGXCPU:
            return result(
                "timeout", f"timed out after {self.timeout_s:g} s; {passed}/{total} passed"
            )
        if "program_error" in by_kind:
            event = by_kind["program_error"]
            status = "memory" if event.get("exc") == "MemoryError" else "failed"
            return result(status, f"program raised {err(event)}", 0.0, 0)
        if memory or (
            "done" not in by_kind and rc != 0 and any(word in stderr_tail for word in oom_words)
        ):
            return result("memory", f"MemoryError (limit {self.memory_mb} MiB); {passed}/{total}")
        if killed_by == signal.SIGKILL and "done" not in by_kind:
            # We only SIGKILL on timeout (handled above): an outside kill is most likely the
            # kernel's OOM killer.
            return result("memory", f"killed by SIGKILL (out of memory?); {passed}/{total}")
        if killed_by is not None and "done" not in by_kind:
            try:
                name = signal.Signals(killed_by).name
            except ValueError:
                name = f"signal {killed_by}"
            return result("crashed", f"killed by {name}; {passed}/{total} passed")
        if passed == total:
            return result("passed", f"all {total} tests passed")
        if "done" not in by_kind:
            return result(
                "failed", f"exited early (code {rc}) before reporting; {passed}/{total} passed"
            )
        reason = f"{passed}/{total} passed"
        if first_fail is not None:
            reason += f"; test {first_fail.get('i')}: {err(first_fail)}"
        return result("failed", reason)

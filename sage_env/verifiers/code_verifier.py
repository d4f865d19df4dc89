"""CodeVerifier: a program against test snippets inside :mod:`sage_env.sandbox`."""

from __future__ import annotations

import concurrent.futures as cf
import logging
import signal
import threading
from collections.abc import Sequence
from typing import Any

from sage_env import sandbox
from sage_env.sandbox.harness.compare import PLUS_TASK_CAP_S, REFERENCE_CPU_S
from sage_env.sandbox.host.config import WALL_FACTOR, WALL_SLACK_S
from sage_env.text.parsing import as_text
from sage_env.verifiers.result import VerifierResult

log = logging.getLogger("sage_env.verifiers")

class CodeVerifier:
    """Runs a candidate program against independent test snippets inside :mod:`sage_env.sandbox`.

    Semantics: ``setup`` then ``program`` are exec'd in one module namespace (named
    ``"solution"``, so ``if __name__ == "__main__":`` blocks do not run); each test snippet then
    runs in a shallow copy of that namespace, in its OWN process in which setup and program ran
    afresh, and is judged separately. Score = passed / total, as in HumanEval's
    functional-correctness evaluation (Chen et al. 2021) but per test.

    Anti-gaming rule (docs/reference/verifiers.md): every ``assert`` in a test is rewritten before
    the program runs. ``assert X == <literal>`` (or ``<literal> == X``) sends only the value of
    ``X``, encoded by exact builtin type, to the judging process, which keeps the literal to
    itself and compares it there; every other ``assert E`` sends ``E``'s truth, with a top-level
    ``==`` made type-strict (exact builtin types compared structurally, so an object whose
    ``__eq__`` is always true fails). A test passes only if its process finished normally, raised
    nothing and every literal assertion was checked and matched. ``exit(0)``/``os._exit(0)``,
    patched ``assert``/builtins, printed text and forged messages therefore cannot make a literal
    assertion pass: a test's process holds only its own channel to the judge, which believes it
    about that test alone, and exit statuses come from the waiting parent. See the docs for
    what remains forgeable.

    Isolation: each call uses one fresh sandboxed process tree (``sandbox.isolation_level()``:
    bubblewrap, or ``unshare`` with the same read-only root and no network, or rlimits only), an
    unprivileged uid when run as root, cgroups, rlimits, a private temp cwd, a scrubbed
    environment and capped output. Where ``sandbox.zygotes_available()``, each call is forked
    from a long-lived sandbox (one per concurrent call) into its own mount and IPC namespaces;
    otherwise a small pool of pre-started sandboxed harnesses hides interpreter start-up. See
    ``docs/reference/sandbox.md``.

    Args:
        timeout_s: CPU-time budget, seconds, of every process of the call (the program with one
            test each; ``RLIMIT_CPU``, which load does not eat into); the wall clock is a
            generous backstop for the whole call (3 x ``timeout_s`` + 2 s, see
            :meth:`~sage_env.sandbox.SandboxConfig.wall_limit_s`).
        memory_mb: Address-space limit per process and memory-cgroup limit of the run, MiB.
        max_output_bytes: Cap on captured stdout and on captured stderr, bytes each.
        python: Interpreter to run; default :func:`sage_env.sandbox.default_python` (an
            interpreter the dropped uid can execute).
        pool_size: Pre-started harnesses kept warm when zygotes are not available (0 = start
            one per call).
        max_processes: Process/thread limit per run.
        executor: Anything with ``run_job(job: dict) -> sandbox.RawRun`` that runs the harness
            (:func:`sage_env.sandbox.harness_argv`) on the job elsewhere (e.g. a remote
            sandbox); default a local :class:`sage_env.sandbox.SandboxPool`.

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
            program = as_text(program)
            setup = as_text(setup)
            if isinstance(tests, (str, bytes)):
                tests = [tests]
            test_list = [as_text(t) for t in (tests or [])]
        except Exception:
            return VerifierResult(0.0, "invalid", "unreadable job")
        total = len(test_list)
        if total == 0:
            return VerifierResult(0.0, "invalid", "no tests")
        job = {"mode": "verify", "setup": setup, "program": program, "tests": test_list}
        if sandbox.REFERENCE_MARKER in setup:
            # plus tests: each input gets EvalPlus's limit from the reference's time on it
            # (inside the sandbox); the wall clock backs up the reference's and the task's caps
            job["wall_s"] = (self.timeout_s + REFERENCE_CPU_S + PLUS_TASK_CAP_S) * WALL_FACTOR
            job["wall_s"] += WALL_SLACK_S
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
                "timeout",
                f"timed out (CPU limit {self.timeout_s:g} s per test, or the wall-clock backstop);"
                f" {passed}/{total} passed",
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

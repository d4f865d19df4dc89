"""Scoring an answer and checking a proposal's own verifier: plain functions of values.

:func:`verify` (math / code answers through a :class:`~sage_env.verifiers.MathVerifier` /
:class:`~sage_env.verifiers.CodeVerifier`), :func:`verify_exec` (AZR's execution tasks),
:func:`check_verifier` (a proposed task's answer or reference solution) and
:func:`ground_math_task` (``math_grounding = "program"``). Each takes what it reads: the
task, the text, the :class:`~sage_env.config.EnvConfig` (format rule, code limits, grounding
settings) and the verifiers; none takes an environment, so each can be called on its own.
:class:`~sage_env.env.raw_env`'s methods of the same names pass them the environment's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sage_env.tasks.task import Task
from sage_env.text.parsing import defines_function, extract_boxed, extract_code, last_fenced

if TYPE_CHECKING:
    import random

    from sage_env.config import EnvConfig
    from sage_env.verifiers import CodeVerifier, MathVerifier


def format_score(config: EnvConfig, soft: float, binary: float) -> float:
    """The format score of ``config.rewards.format_rule``: ``soft`` or ``binary``."""
    return soft if config.rewards.format_rule == "soft" else binary


def verify(
    task: Task,
    text: str,
    config: EnvConfig,
    math_verifier: MathVerifier,
    code_verifier: CodeVerifier,
    *,
    check_rng: random.Random | None = None,
) -> tuple[float, float, dict]:
    r"""Score an answer to ``task`` with the external verifier.

    ``check_rng`` draws the variants of an ``exec`` answer's repeat runs
    (:func:`verify_exec`).

    Returns:
        ``(s_gt, format, verdict)``: verifier score in [0, 1], format score (math: a
        ``\boxed{}`` is present; code: code found, 0.5 under the soft rule when it does
        not compile), and ``{"status", "reason", "score"}``.
    """
    if task.domain == "exec":
        return verify_exec(task, text, config, check_rng=check_rng)
    if task.domain == "math":
        if extract_boxed(text) is None:
            return 0.0, 0.0, {"status": "invalid", "reason": "no \\boxed{} answer"}
        res = math_verifier.verify(text, task.answer or "")
    else:
        program = extract_code(text, task.entry_point)
        if program is None:
            return 0.0, 0.0, {"status": "invalid", "reason": "no Python code found"}
        res = code_verifier.verify(program, task.tests, task.test_setup)
        if task.entry_point and not defines_function(program, task.entry_point):
            fmt = format_score(config, 0.5, 0.0)  # code, but not the asked-for function
            return (
                float(res.score),
                fmt,
                {"status": res.status, "reason": res.reason, "score": res.score},
            )
    fmt = format_score(config, 0.5, 1.0) if res.status == "syntax_error" else 1.0
    return (
        float(res.score),
        fmt,
        {"status": res.status, "reason": res.reason, "score": res.score},
    )

def verify_exec(
    task: Task, text: str, config: EnvConfig, *, check_rng: random.Random | None = None
) -> tuple[float, float, dict]:
    """Score an answer to an ``exec`` task by running code (AZR Sec. 3.3.4).

    Deduction: the ```` ```output ```` literal equals the executor's output. Abduction: the
    program run on the ```` ```input ```` arguments returns the target output. Induction:
    the ```` ```python ```` program maps every held-out input to its output (binary, AZR's
    default). Timeouts and memory are ``code_timeout_s`` / ``code_memory_mb``. A passing
    abduction or induction answer must repeat in check runs whose variants ``check_rng``
    draws (``None``: :class:`random.SystemRandom`).

    Returns:
        ``(s_gt, format, verdict)``: format is 1 when the answer block was found and
        parsed, else 0.
    """
    from sage_env.tasks import exec_tasks
    from sage_env.verifiers import execution

    spec = exec_tasks.ExecSpec.of(task)
    limits = {
        "timeout_s": config.code_timeout_s,
        "memory_mb": config.code_memory_mb,
        "check_rng": check_rng,
    }
    if spec.mode == "deduction":
        res = execution.check_deduction(last_fenced(text, "output"), spec.outputs[0])
    elif spec.mode == "abduction":
        res = execution.check_abduction(
            last_fenced(text, "input"), spec.program, spec.outputs[0], **limits
        )
    else:
        inputs, outputs = spec.held_out()
        res = execution.check_induction(
            last_fenced(text, "python"), inputs, outputs, **limits
        )
    verdict = {
        "status": res.status,
        "reason": res.reason,
        "score": res.score,
        "mode": spec.mode,
    }
    return res.score, float(res.formatted), verdict


def check_verifier(
    task: Task,
    config: EnvConfig,
    math_verifier: MathVerifier,
    code_verifier: CodeVerifier,
    *,
    check_rng: random.Random | None = None,
) -> dict:
    """Check a proposed task's own verifier before it is used.

    Math: the answer must be grounded math (:meth:`MathVerifier.check_answer`: no free
    text, parses to a SymPy value) and math-verify must accept it against itself. Under
    ``config.math_grounding = "program"`` the proposal's answer program
    (``task.meta["answer_program"]``) must also compute a value that agrees with it
    (:func:`sage_env.verifiers.math_grounding.ground_answer`); on agreement ``task.answer``
    becomes the program's value (the stored answer) and the claim moves to
    ``task.meta["claimed_answer"]``; ``check_rng`` draws the variants of its check runs.
    Code: the tests parsed already; the reference solution
    must pass all of them in the sandbox. Without one the check fails, unless
    ``config.require_code_solution`` is False (then the tests are accepted unchecked).

    Returns:
        ``{"status": "passed" | "failed", "reason": str}``, plus ``"grounding"`` (the
        :class:`~sage_env.verifiers.math_grounding.Grounding` as a dict: program, value,
        verdict, reason) when the answer program was checked.
    """
    if task.domain == "math":
        grounded = math_verifier.check_answer(task.answer or "")
        if grounded.score < 1.0:
            return {"status": "failed", "reason": f"answer is not math ({grounded.reason})"}
        res = math_verifier.verify(f"\\boxed{{{task.answer}}}", task.answer or "")
        if res.score < 1.0:
            return {"status": "failed", "reason": f"answer does not parse ({res.reason})"}
        if config.math_grounding == "program":
            return ground_math_task(task, config, math_verifier, check_rng=check_rng)
        return {"status": "passed", "reason": "answer parses to a math value"}
    if not task.reference_solution:
        if config.require_code_solution:
            return {"status": "failed", "reason": "no <solution> to check the tests against"}
        return {"status": "passed", "reason": "no reference solution to check the tests"}
    program = extract_code(task.reference_solution, task.entry_point)
    if program is None:
        return {"status": "failed", "reason": "reference solution has no Python code"}
    res = code_verifier.verify(program, task.tests, task.test_setup)
    if res.score < 1.0:
        return {
            "status": "failed",
            "reason": f"reference solution fails its tests ({res.status}: {res.reason})",
        }
    return {"status": "passed", "reason": "reference solution passes every test"}


def ground_math_task(
    task: Task,
    config: EnvConfig,
    math_verifier: MathVerifier,
    *,
    check_rng: random.Random | None = None,
) -> dict:
    """Compute a proposed math task's answer with its program (``math_grounding="program"``).

    Runs :func:`~sage_env.verifiers.math_grounding.ground_answer` on
    ``task.meta["answer_program"]`` and ``task.answer`` (the claim) with the code limits
    (``code_timeout_s``, ``code_memory_mb``) and the check runs' variants drawn from
    ``check_rng`` (``None``: :class:`random.SystemRandom`). When they agree, ``task.answer``
    becomes the
    program's rendered value and ``task.meta`` keeps ``claimed_answer`` and ``answer_value``
    (the value's ``repr``); otherwise the task is left as it was.

    Returns:
        The check: ``{"status": "passed" | "failed", "reason", "grounding"}``.
    """
    from sage_env.verifiers.math_grounding import ground_answer

    claim = task.answer or ""
    meta = task.meta if isinstance(task.meta, dict) else {}
    grounding = ground_answer(
        meta.get("answer_program"),
        claim,
        math_verifier,
        timeout_s=config.code_timeout_s,
        memory_mb=config.code_memory_mb,
        check_rng=check_rng,
    )
    if not grounding.agreed:
        return {"status": "failed", "reason": grounding.reason, "grounding": grounding.to_dict()}
    task.meta.update(claimed_answer=claim, answer_value=grounding.value)
    task.answer = grounding.answer
    return {"status": "passed", "reason": grounding.reason, "grounding": grounding.to_dict()}

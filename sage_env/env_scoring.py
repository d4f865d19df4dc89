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
from sage_env.text.parsing import (
    defines_function,
    extract_boxed,
    extract_code,
    last_fenced,
    prefix_only_code,
)

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
    prefix: str = "",
    *,
    check_rng: random.Random | None = None,
) -> tuple[float, float, dict]:
    r"""Score an answer to ``task`` with the external verifier.

    The format credit must be the reply's own: on a code task whose program sits in the fence
    the environment opened (``prefix``, the phase's response prefix, e.g. ```` ```python ````)
    and that the reply never opened itself, the soft rule's 0.5 for "code, but it does not
    compile" or "code, but not the asked-for function" needs a ``def`` or ``class`` written by
    the model: a reply that only holds the prefix plus unreadable text earns format 0.

    Args:
        task: The task answered.
        text: The whole reply (prefix + completion).
        config: Format rule and code limits.
        math_verifier: Scores math answers.
        code_verifier: Runs code answers in the sandbox.
        prefix: The response prefix the reply was asked to start with (``""``: none).
        check_rng: Draws the variants of an ``exec`` answer's repeat runs (:func:`verify_exec`).

    Returns:
        ``(s_gt, format, verdict)``: verifier score in [0, 1], format score (math: a
        ``\boxed{}`` is present; code: code found, 0.5 under the soft rule when it does
        not compile), and ``{"status", "reason", "score", "format"}``; ``format`` says in one
        line why the format score is what it is (no gold answer in it).
    """
    if task.domain == "exec":
        return verify_exec(task, text, config, check_rng=check_rng)
    if task.domain == "math":
        if extract_boxed(text) is None:
            return 0.0, 0.0, _verdict("invalid", "no \\boxed{} answer", None, "no \\boxed{} answer")
        res = math_verifier.verify(text, task.answer or "")
        return (
            float(res.score),
            1.0,
            _verdict(res.status, res.reason, res.score, "a \\boxed{} answer"),
        )
    program = extract_code(text, task.entry_point)
    if program is None:
        why = "no Python code found"
        return 0.0, 0.0, _verdict("invalid", why, None, why)
    res = code_verifier.verify(program, task.tests, task.test_setup)
    compiles = res.status != "syntax_error"
    defines = not task.entry_point or defines_function(program, task.entry_point)
    if compiles and defines:
        return float(res.score), 1.0, _verdict(res.status, res.reason, res.score, _CODE_OK)
    if prefix_only_code(text, prefix, program):
        why = f"no code of its own: only the environment's {prefix.strip()!r} prefix"
        return float(res.score), 0.0, _verdict(res.status, res.reason, res.score, why)
    if not defines:  # code, but not the asked-for function
        why = f"code, but no def {task.entry_point} (soft 0.5, binary 0)"
        fmt = format_score(config, 0.5, 0.0)
    else:
        why = "code that does not compile (soft 0.5, binary 1)"
        fmt = format_score(config, 0.5, 1.0)
    return float(res.score), fmt, _verdict(res.status, res.reason, res.score, why)


_CODE_OK = "Python code that compiles (and defines the entry point when the task names one)"


def _verdict(status: str, reason: str, score: float | None, why: str) -> dict:
    """A verdict dict; ``score`` is left out when ``None`` (no program or answer was found)."""
    out: dict = {"status": status, "reason": reason}
    if score is not None:
        out["score"] = score
    out["format"] = why
    return out


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
        parsed, else 0; ``verdict["format"]`` says which in one line.
    """
    from sage_env.tasks import exec_tasks
    from sage_env.verifiers import answer_checks

    spec = exec_tasks.ExecSpec.of(task)
    limits = {
        "timeout_s": config.code_timeout_s,
        "memory_mb": config.code_memory_mb,
        "check_rng": check_rng,
    }
    if spec.mode == "deduction":
        res = answer_checks.check_deduction(last_fenced(text, "output"), spec.outputs[0])
    elif spec.mode == "abduction":
        res = answer_checks.check_abduction(
            last_fenced(text, "input"), spec.program, spec.outputs[0], **limits
        )
    else:
        inputs, outputs = spec.held_out()
        res = answer_checks.check_induction(last_fenced(text, "python"), inputs, outputs, **limits)
    verdict = {
        "status": res.status,
        "reason": res.reason,
        "score": res.score,
        "mode": spec.mode,
        "format": (
            f"the {_EXEC_BLOCK[spec.mode]} answer block was found and parsed"
            if res.formatted
            else f"no {_EXEC_BLOCK[spec.mode]} answer block that parses"
        ),
    }
    return res.score, float(res.formatted), verdict


_EXEC_BLOCK = {"deduction": "```output", "abduction": "```input", "induction": "```python"}


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
    must pass all of them in the sandbox, and no trivial program may (:func:`trivial_pass`:
    tests a constant passes pin nothing). Without a solution the check fails, unless
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
    trivial = trivial_pass(task, code_verifier)
    if trivial is not None:
        return {
            "status": "failed",
            "reason": f"tests do not pin the task: a function that returns {trivial} passes "
            "every one",
        }
    return {"status": "passed", "reason": "reference solution passes every test"}


TRIVIAL_RETURNS: tuple[str, ...] = (
    "None", "False", "True", "0", "1", "''", "[]", "(args[0] if args else None)"
)  # fmt: skip
"""What the trivial programs of :func:`trivial_pass` return: constants a weak solver writes,
and the first argument unchanged."""


def trivial_pass(task: Task, code_verifier: CodeVerifier) -> str | None:
    """The return expression of a trivial program that passes every test of ``task``, if any.

    A proposed code task's tests are evidence of nothing when a function that ignores its
    question passes them all: "write ``is_prime(n)``" with tests that assert only composites
    is passed in full by ``return False``, so a probe writing that constant would count as a
    solve (the red team's "tests a constant function passes", issue 46). Each program of
    :data:`TRIVIAL_RETURNS`, ``def <entry>(*args, **kwargs): return <expr>``, runs against
    the tests in the sandbox until one passes every test (at most
    ``len(TRIVIAL_RETURNS)`` sandbox checks of the tests, each stopped by its first failing
    test's verdict as :meth:`CodeVerifier.verify` scores it).

    Returns:
        The expression (e.g. ``"False"``), or ``None`` when every trivial program fails a
        test or the task names no entry point; never raises on model output.
    """
    entry = task.entry_point
    if not entry or not entry.isidentifier():
        return None
    for expr in TRIVIAL_RETURNS:
        program = f"def {entry}(*args, **kwargs):\n    return {expr}\n"
        if code_verifier.verify(program, task.tests, task.test_setup).score >= 1.0:
            return expr
    return None


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


FORMAT_TERMS = ("f", "formatted", "passable")
"""Reward-term names whose value :func:`term_reasons` explains: the format score ``f`` and
AZR's ``formatted`` / ``passable`` (Eq. 6)."""


def term_reasons(
    kind: str | None, terms: dict, details: dict, text: str, reward: float = 0.0
) -> dict[str, str]:
    """One line per format term of ``terms`` saying why it has its value.

    Published as ``infos[agent]["last"]["why"]`` by :meth:`sage_env.env.raw_env.deliver`
    (``kind`` and ``text`` are those of the credited action). Every reason comes from parsing
    the reply or from the verdict's ``format`` line, never from a gold answer or a verdict's
    reason, so the OpenEnv server sends it to clients.

    Args:
        kind: The credited phase's kind (``"propose"``, ``"review"``, ``"plan"``,
            ``"solve"``; :meth:`~sage_env.protocols.Protocol.phase_kind`), or ``None``.
        terms: The reward terms delivered.
        details: The details delivered (``verdict``, ``parsed``, ``mode``, ``reason``...).
        text: The credited reply (prefix + completion).
        reward: The reward delivered (AZR's ``passable`` line names it).

    Returns:
        ``{term: reason}`` for ``f`` when numeric and for AZR's ``formatted`` and
        ``passable``; terms absent from ``terms`` are absent here. Never raises.
    """
    from sage_env.text.parsing import critic_format_reason, plan_format_reason

    out: dict[str, str] = {}
    verdict = details.get("verdict") if isinstance(details.get("verdict"), dict) else {}
    parsed = details.get("parsed") if isinstance(details.get("parsed"), dict) else {}
    f = terms.get("f")
    if isinstance(f, (int, float)) and not isinstance(f, bool):
        if verdict.get("format"):
            out["f"] = str(verdict["format"])
        elif kind == "review":
            out["f"] = critic_format_reason(text)
        elif kind == "plan":
            out["f"] = plan_format_reason(text)
        elif kind == "propose":
            out["f"] = _proposal_reason(f, parsed)
        else:
            out["f"] = "no reason recorded (a protocol passes one as why={...} to deliver)"
    if "formatted" in terms:
        if kind == "solve":
            out["formatted"] = str(verdict.get("format") or "the answer block did not parse")
        else:
            out["formatted"] = (
                "the proposal's blocks parse (a program and its input or inputs)"
                if terms["formatted"]
                else "the proposal's blocks do not parse (or it copies a pool task)"
            )
    if "passable" in terms:
        out["passable"] = _passable_reason(kind, terms, details, reward)
    return out


def _proposal_reason(f: float, parsed: dict) -> str:
    """Why a proposal has format ``f``: its parse (a missing tag), never its answer."""
    if "mode" in parsed:  # an execution proposal (AZR's blocks)
        if f > 0:
            return "the proposal's blocks parse (AZR's formatted): 0.5"
        return "the proposal's blocks do not parse (or it copies a pool task)"
    if f >= 1.0:
        return "the question and its verifier (answer or tests) parse"
    lost = str(parsed.get("reason") or "").split("; ")
    lost = [r for r in lost if r.startswith(("missing", "question longer", "no parseable"))]
    got = "half the format: one of question / verifier parses" if f > 0 else "no part parses"
    return f"{got}; {'; '.join(lost)}" if lost else got


def _passable_reason(kind: str | None, terms: dict, details: dict, reward: float) -> str:
    """AZR's ``passable`` term in words (Eq. 6): what made the reply count, and what it paid."""
    if kind == "solve":
        if terms.get("passable"):
            return "the answer is right (the executor agrees): the reward is r_role, its score"
        return (
            f"the answer is not right: r_role is not paid; the reward is {reward:g} "
            "(AZR Eq. 6: -0.5 formatted, -1 malformed; 0 without format_penalty)"
        )
    if terms.get("passable"):
        return (
            "a valid task (the executor ran it): r_role is the learnability "
            "1 - acc when 0 < acc < 1, else 0"
        )
    why = details.get("reason")
    because = f" ({why})" if isinstance(why, str) and why else ""
    return (
        f"not a valid task{because}: the reward is {reward:g} "
        "(AZR Eq. 6: -0.5 formatted, -1 malformed; 0 without format_penalty)"
    )

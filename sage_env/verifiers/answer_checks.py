"""AZR's answer checks (Absolute Zero, arXiv 2505.03335, Sec. 3.3.4), judged by the executor.

* :func:`check_deduction`: value equality of the predicted output with the executor's;
* :func:`check_abduction`: ``p(i_pred) == o`` by running ``p``;
* :func:`check_induction`: the predicted program's outputs on held-out inputs.

Each returns a :class:`Check`. Programs run in the sandbox through
:mod:`sage_env.verifiers.executor`; values are compared on the host after parsing both sides
with :func:`ast.literal_eval`, with exact types at every level
(:func:`~sage_env.verifiers.literals.values_equal`). A passing verdict counts only when it
repeats under drawn variants (:data:`VERDICT_RUNS`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sage_env.verifiers.executor import draw_check_variants, execute, execute_all
from sage_env.verifiers.literals import parse_args, parse_literal, same_output, values_equal
from sage_env.verifiers.program_checks import (
    defines_f,
    program_refusal,
    safe_input_expression,
)

VERDICT_RUNS = 6
"""Runs that must agree before a *passing* answer check counts (abduction, induction): the
run that passed and ``VERDICT_RUNS - 1`` check runs under drawn variants (a failing check
needs no repeat, so only right answers pay the extra runs). With 6, an answer that is right
by one bit of noise is paid 1 time in 64 instead of 1 in 2."""

INDUCTION_REWARDS = ("binary", "accuracy")
"""What :func:`check_induction` pays: all held-out outputs right (AZR's default) or their
share."""


@dataclass(frozen=True)
class Check:
    """Outcome of an answer check.

    Attributes:
        score: In [0, 1].
        formatted: An answer block was found and parsed (AZR Eq. 6's format condition).
        status: ``passed``, ``failed``, ``invalid`` or a sandbox status.
        reason: Short explanation.
    """

    score: float
    formatted: bool
    status: str
    reason: str


def check_deduction(
    predicted: str | None, gold_output: str, *, strict_types: bool = True
) -> Check:
    """Deduction (AZR Sec. 3.3.4): the predicted output equals the executor's, as values.

    Both sides are parsed with :func:`ast.literal_eval` on the judge's side and compared
    as :func:`values_equal` does: with ``strict_types`` (the default, ours) the values and
    their types agree at every level, so ``1`` is not ``True`` nor ``1.0``; without it
    ``==`` as Python has it (``1 == True == 1.0``; CRUXEval's own rule), except that a tuple
    is never a list.
    """
    if predicted is None:
        return Check(0.0, False, "invalid", "no output answer found")
    ok, value = parse_literal(predicted)
    if not ok:
        return Check(0.0, False, "invalid", "answer is not a Python literal")
    gold_ok, gold = parse_literal(gold_output)
    if not gold_ok:  # else an unparseable gold would be None, and the answer "None" right
        return Check(0.0, True, "invalid", "the gold output is not a Python literal")
    right = values_equal(value, gold, strict_types=strict_types)
    return Check(float(right), True, "passed" if right else "failed", _verdict(right))


def _verdict(right: bool) -> str:
    return "equals the executor's output" if right else "differs from the executor's output"


def _repeats(
    program: str,
    args: tuple[Any, ...] | str,
    value: Any,
    *,
    runs: int,
    timeout_s: float,
    memory_mb: int,
    expressions: bool,
    check_rng: random.Random | None,
) -> bool:
    """Whether ``program`` returns ``value`` on ``args`` in ``runs - 1`` check runs too.

    The repeat of a passing verdict (ours): an answer that matches only under the pinned run
    (output noise elsewhere: another hash seed, address layout, time zone) does not count.
    The check runs' variants are drawn from ``check_rng`` (:func:`draw_check_variants`).
    """
    variants = draw_check_variants(runs - 1, check_rng)
    limits = {"timeout_s": timeout_s, "memory_mb": memory_mb, "expressions": expressions}
    for ex in execute_all(program, [args], variants, **limits):
        if ex.status != "ok" or ex.outputs[0] is None:
            return False
        ok, again = parse_literal(ex.outputs[0])
        if not ok or not values_equal(again, value):
            return False
    return True


def check_abduction(
    predicted: str | None,
    program: str,
    gold_output: str,
    *,
    timeout_s: float = 5.0,
    memory_mb: int = 512,
    expressions: bool = False,
    strict_types: bool = True,
    verdict_runs: int = VERDICT_RUNS,
    check_rng: random.Random | None = None,
) -> Check:
    """Abduction (AZR Sec. 3.3.4): run ``program`` on the predicted input.

    Right when its output equals ``gold_output`` (``p(i_pred) == p(i*)``; any input that
    gives the output is right; compared as :func:`values_equal` with ``strict_types``), and
    the same output comes back in ``verdict_runs - 1`` more runs under hash seeds, time
    zones and :mod:`random` seeds drawn from ``check_rng`` (:func:`draw_check_variants`;
    ``None``: :class:`random.SystemRandom`; ours): a program that is deterministic on its
    proposer's input and noisy elsewhere does not pay answers that match by chance (status
    ``nondeterministic``). The input must be Python literals (AZR), or with
    ``expressions`` an argument list that passes :func:`safe_input_expression`, evaluated in
    the sandbox (CRUXEval-I's rule). An empty block is well-formed only when ``f()`` is
    right (one CRUXEval-I item), so ``mae``'s format term never pays an empty answer.
    """
    if predicted is None:
        return Check(0.0, False, "invalid", "no input answer found")
    empty = not str(predicted).strip()
    if not parse_literal(gold_output)[0]:  # else the output None would match it
        return Check(0.0, True, "invalid", "the gold output is not a Python literal")
    if expressions:
        args = safe_input_expression(predicted.strip())
        if args is None:
            return Check(0.0, False, "invalid", "answer is not a safe argument list")
    else:
        args = parse_args(predicted)
        if args is None:
            return Check(0.0, False, "invalid", "answer is not a list of Python literals")
    ex = execute(program, [args], timeout_s=timeout_s, memory_mb=memory_mb, expressions=expressions)
    if ex.status not in ("ok", "error"):
        return Check(0.0, True, ex.status, ex.reason)
    failed = "invalid" if empty else "failed"
    if ex.outputs[0] is None:
        return Check(0.0, not empty, failed, f"f raised on this input: {ex.errors[0]}")
    ok, value = parse_literal(ex.outputs[0])
    _, gold = parse_literal(gold_output)
    right = ok and values_equal(value, gold, strict_types=strict_types)
    if right and not _repeats(
        program, args, value, runs=verdict_runs, timeout_s=timeout_s, memory_mb=memory_mb,
        expressions=expressions, check_rng=check_rng,
    ):  # fmt: skip
        return Check(0.0, True, "nondeterministic", "f's output on this input does not repeat")
    return Check(float(right), right or not empty, "passed" if right else failed, _verdict(right))


def check_induction(
    predicted_program: str | None,
    inputs: Sequence[str],
    gold_outputs: Sequence[str],
    *,
    reward: str = "binary",
    timeout_s: float = 5.0,
    memory_mb: int = 512,
    verdict_runs: int = VERDICT_RUNS,
    check_rng: random.Random | None = None,
) -> Check:
    """Induction (AZR Sec. 3.3.4): run the predicted program on the held-out inputs.

    An output matches when it equals the gold as :func:`values_equal` (strict types) has it
    and comes back alike in ``verdict_runs - 1`` more runs under hash seeds, time zones and
    :mod:`random` seeds drawn from ``check_rng`` (:func:`draw_check_variants`; ours; a
    matching output that does not repeat counts as a miss).

    Args:
        predicted_program: The solver's program (must define ``f``), or ``None``.
        inputs: Held-out inputs (canonical text, :func:`format_args`).
        gold_outputs: The hidden program's outputs on them, as the executor gave them.
        reward: ``"binary"`` (AZR's default ``code_f_reward_type``: 1 iff every output
            matches) or ``"accuracy"`` (the fraction that match).
        timeout_s: Wall-clock limit of the run, seconds.
        memory_mb: Memory limit, MiB.
        verdict_runs: Runs a matching output must come back in, the first included.
        check_rng: Where the repeat runs' variants are drawn from; ``None``:
            :class:`random.SystemRandom`.

    Raises:
        ValueError: if ``reward`` is neither ``"binary"`` nor ``"accuracy"``.
    """
    if reward not in INDUCTION_REWARDS:
        raise ValueError(f"reward must be one of {INDUCTION_REWARDS}, got {reward!r}")
    if predicted_program is None or not defines_f(predicted_program):
        return Check(0.0, False, "invalid", "no Python program defining f found")
    hit = program_refusal(predicted_program)
    if hit:
        return Check(0.0, True, "blocked", f"program refused: {hit}")
    args_list = [parse_args(t) for t in inputs]
    if not args_list or any(a is None for a in args_list):
        return Check(0.0, True, "invalid", "task has no parseable held-out inputs")
    ex = execute(predicted_program, args_list, timeout_s=timeout_s, memory_mb=memory_mb)
    if ex.status not in ("ok", "error"):
        return Check(0.0, True, ex.status, ex.reason)
    matched: list[bool] = []
    for out, gold_text in zip(ex.outputs, gold_outputs):
        if out is None:
            matched.append(False)
            continue
        ok, value = parse_literal(out)
        gold_ok, gold = parse_literal(gold_text)  # an unparseable gold matches nothing
        matched.append(bool(ok and gold_ok and values_equal(value, gold)))
    if any(matched) and verdict_runs > 1:
        variants = draw_check_variants(verdict_runs - 1, check_rng)
        limits = {"timeout_s": timeout_s, "memory_mb": memory_mb}
        for again in execute_all(predicted_program, args_list, variants, **limits):
            if again.status not in ("ok", "error"):
                matched = [False] * len(matched)
                break
            pairs = zip(matched, again.outputs, ex.outputs)
            matched = [m and same_output(a, b) for m, a, b in pairs]
    hits = sum(matched)
    acc = hits / len(args_list)
    score = acc if reward == "accuracy" else float(hits == len(args_list))
    status = "passed" if score >= 1.0 else "failed"
    return Check(score, True, status, f"{hits}/{len(args_list)} held-out outputs match")

"""Scripted replies by *phase kind*: what a well-behaved player writes in each kind of phase.

A phase's kind says what its reply looks like, whatever the protocol calls the phase
(replies in this order):

- ``propose`` (built-in ``challenge``, ``propose``): a valid new task with its verifier;
- ``review`` (``review_question``, ``review_plan``, ``judge_question``, ``judge_answer``): a
  passing score (8), then a failing one (2);
- ``plan`` (``plan``): a three-step plan;
- ``solve`` (``probe``, ``solve``): the gold answer when the task has one, then a wrong answer.

:meth:`sage_env.protocols.Protocol.scripted_actions` serves these to
:func:`sage_env.check_protocol` (which rotates through them, so both sides of every gate run)
and to the ``scripted`` and ``oracle`` players of ``sage-env play``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sage_env.text import prompts

if TYPE_CHECKING:
    from sage_env.tasks.task import Task

KINDS = ("propose", "review", "plan", "solve")
"""The phase kinds scripted players know."""
PHASE_KINDS: dict[str, str] = {
    "challenge": "propose",
    "propose": "propose",
    "review_question": "review",
    "review_plan": "review",
    "judge_question": "review",
    "judge_answer": "review",
    "plan": "plan",
    "probe": "solve",
    "solve": "solve",
}
"""Kind of each built-in phase name."""
_SYSTEM_KINDS = {
    prompts.CHALLENGER_SYSTEM: "propose",
    prompts.CRITIC_SYSTEM: "review",
    prompts.PLANNER_SYSTEM: "plan",
    prompts.SOLVER_SYSTEM: "solve",
}
_PREFIX_KINDS = {"<question>": "propose", "<score>": "review", "<plan>": "plan"}

PROPOSAL_MATH = (
    "<question>A shop sells pens at 3 dollars each. How much do 17 pens and "
    "4 notebooks at 5 dollars each cost?</question>\n<answer>71</answer>"
)
"""A valid math proposal (its answer is right and parses)."""
PROPOSAL_MATH_PROGRAM = (
    "<question>A shop sells pens at 3 dollars each. How much do 17 pens and "
    "4 notebooks at 5 dollars each cost?</question>\n<program>\ndef answer():\n"
    "    return 17 * 3 + 4 * 5\n</program>\n<answer>71</answer>"
)
""":data:`PROPOSAL_MATH` with the program that computes its answer, for a prompt that asks
for one (``EnvConfig.math_grounding = "program"``)."""
PROPOSAL_CODE = (
    "<question>Write a function sum_squares(n) returning 1^2 + ... + n^2."
    "</question>\n<tests>\nassert sum_squares(1) == 1\nassert sum_squares(3) == 14"
    "\n</tests>\n<solution>\n```python\ndef sum_squares(n):\n    return sum(i * i "
    "for i in range(1, n + 1))\n```\n</solution>"
)
"""A valid code proposal (its reference solution passes its tests)."""
REVIEW_PASS = "<score>8</score> Clear and well posed."
"""A review whose score (8 -> 0.78) passes the default gates (alpha 0.7, beta 0.3)."""
REVIEW_FAIL = "<score>2</score> Unclear and not well posed."
"""A review whose score (2 -> 0.11) fails the default gates."""
PLAN = (
    "<plan>\n1. Restate what is asked.\n2. Work it out step by step.\n3. Check the result.\n</plan>"
)
"""A well-formed three-step plan."""


def infer_kind(observation: dict | None) -> str | None:
    """The kind of a phase from its observation: a built-in role prompt or response prefix.

    A protocol that builds its observations with :mod:`sage_env.text.prompts` (or asks for the
    built-in opening tags) gets its phases' kinds without declaring them.
    """
    if not observation:
        return None
    kind = _SYSTEM_KINDS.get(str(observation.get("system", "")))
    if kind is not None:
        return kind
    prefix = str(observation.get("prefix", "") or "")
    return next((k for tag, k in _PREFIX_KINDS.items() if prefix.startswith(tag)), None)


def proposal(domain: str, observation: dict | None = None) -> str:
    """A valid proposal for a reference task in ``domain``.

    On math, with an answer program (:data:`PROPOSAL_MATH_PROGRAM`) when ``observation``'s
    prompt asks for ``<program>`` (``math_grounding = "program"``).
    """
    if domain != "math":
        return PROPOSAL_CODE
    asks = "<program>" in str((observation or {}).get("user", ""))
    return PROPOSAL_MATH_PROGRAM if asks else PROPOSAL_MATH


def gold_answer(task: Task | None) -> str | None:
    r"""The task's own answer as a solver writes it: ``\boxed{answer}`` or its reference code.

    ``None`` when the task has no answer (math) or no reference solution (code).
    """
    if task is None:
        return None
    if task.domain == "math":
        return f"\\boxed{{{task.answer}}}" if task.answer else None
    if task.reference_solution:
        return f"```python\n{task.reference_solution}\n```"
    return None


def wrong_answer(task: Task | None) -> str:
    r"""A well-formed answer that is (almost surely) wrong: ``\boxed{0}`` or a stub function."""
    if task is not None and task.domain == "code":
        name = task.entry_point or "solution"
        return f"```python\ndef {name}(*args, **kwargs):\n    return None\n```"
    return "The answer is \\boxed{0}."


def replies(kind: str | None, task: Task | None, observation: dict | None = None) -> list[str]:
    """The scripted replies of a phase of ``kind`` on ``task`` (list above); ``[]`` if unknown.

    ``observation`` (the acting agent's) lets a proposal follow the prompt's format
    (:func:`proposal`).
    """
    if kind == "propose":
        return [proposal(task.domain if task is not None else "math", observation)]
    if kind == "review":
        return [REVIEW_PASS, REVIEW_FAIL]
    if kind == "plan":
        return [PLAN]
    if kind == "solve":
        gold = gold_answer(task)
        return [gold, wrong_answer(task)] if gold is not None else [wrong_answer(task)]
    return []

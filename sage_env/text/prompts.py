"""Role prompts. Each function returns the messages of an observation: ``{"system", "user"}``.

The environment adds ``"prefix"``, the start of the reply, per phase (see
:meth:`sage_env.protocols.Protocol.prefix`).

The learner turns an observation into chat messages and applies its own chat template, so the
same environment serves any instruction-tuned model. Prompts ask for explicit tags that
:mod:`sage_env.text.parsing` reads.
"""

from __future__ import annotations

import ast

from sage_env.tasks.task import Task

DEFAULT_PREFIXES: dict[str, str] = {
    "challenge": "<question>",
    "propose": "<question>",
    "review_question": "<score>",
    "review_plan": "<score>",
    "judge_question": "<score>",
    "judge_answer": "<score>",
    "plan": "<plan>\n1.",
}
"""Response prefix of each built-in phase name (the opening tag of the expected reply).
Solver phases (``probe``, ``solve``) open a Python fence on code tasks and have no prefix on
math tasks; see :meth:`sage_env.protocols.Protocol.prefix`."""
CODE_PREFIX = "```python\n"
"""Prefix of a solver phase on a code task."""

Observation = dict[str, str]

EXAMPLE_QUESTIONS = (
    "What is the sum of the first 20 positive odd numbers?",
    "Write a function second_largest(xs) that returns the second largest distinct value in a "
    "list of integers.",
)
"""The example questions shown in the Challenger prompts; a proposal that copies one is
rejected as a duplicate (otherwise copying the example is a free, always-valid proposal)."""

CHALLENGER_SYSTEM = (
    "You are the Challenger. Given a reference problem, write ONE new problem that is harder "
    "but still solvable, together with a way to check answers."
)
CHALLENGER_MATH = (
    "Reference problem:\n{prompt}\n\n"
    "Write a new, harder math problem in the same style. Reply exactly in this format:\n"
    "<question>the new problem</question>\n<answer>its final answer only</answer>\n\n"
    "Example reply:\n<question>" + EXAMPLE_QUESTIONS[0] + "</question>\n<answer>400</answer>"
)
CHALLENGER_MATH_PROGRAM = (
    "Reference problem:\n{prompt}\n\n"
    "Write a new, harder math problem in the same style, and a Python function answer() "
    "that computes its answer. Reply exactly in this format:\n"
    "<question>the new problem</question>\n"
    "<program>\ndef answer():\n    return ...\n</program>\n"
    "<answer>its final answer only</answer>\n\n"
    "Example reply:\n<question>" + EXAMPLE_QUESTIONS[0] + "</question>\n"
    "<program>\ndef answer():\n    return sum(range(1, 40, 2))\n</program>\n"
    "<answer>400</answer>"
)
"""The math Challenger prompt under ``EnvConfig.math_grounding = "program"`` (ours, not the
paper's): the reply adds ``<program>`` defining ``answer()``, which the sandbox runs; the
task stands only when its value agrees with ``<answer>``, and the value becomes the stored
answer (``docs/reference/rewards.md``, "Math grounding"). The program comes before the answer,
so the stop string ``</answer>`` still ends a complete reply."""
CHALLENGER_CODE = (
    "Reference problem:\n{prompt}\n\n"
    "Write a new, harder Python function problem. Reply exactly in this format:\n"
    "<question>the new problem, naming the function</question>\n"
    "<tests>\nassert function_name(...) == ...\nassert function_name(...) == ...\n</tests>\n"
    "<solution>\n```python\na correct implementation\n```\n</solution>\n\n"
    "Example reply:\n<question>" + EXAMPLE_QUESTIONS[1] + "</question>\n<tests>\n"
    "assert second_largest([1, 3, 2]) == 2\nassert second_largest([5, 5, 4]) == 4\n</tests>\n"
    "<solution>\n```python\ndef second_largest(xs):\n    return sorted(set(xs))[-2]\n```\n"
    "</solution>"
)
CRITIC_SYSTEM = "You are the Critic. You review work carefully and score it from 1 to 10."
CRITIC_RUBRIC = (
    "Score from 1 to 10: 1-3 if it is unclear, impossible, broken or not a problem at all; "
    "4-6 if it is solvable but flawed, vague or trivial; 7-10 if it is clear, correct and "
    "challenging."
)
"""The critic's scale, anchored at three points of the range rather than by one example
score: SmolLM2-135M copies a single example (the old prompt's ``<score>7</score>`` came back
for most questions, so the prompt, not the critic, decided the quality gate). With the
three anchors it still writes the first anchor for most questions, and its scores separate
intact from corrupted seed questions barely better than chance (the figures are in
``docs/write-ups/learning.md``); the probe (:mod:`sage_env.diagnostics.critic_probe`) keeps
measuring it."""
CRITIC_QUESTION = (
    "Review this {domain} problem for clarity, correctness and difficulty:\n\n{question}\n\n"
    + CRITIC_RUBRIC
    + "\nReply with the score in tags (<score>2</score> means broken, <score>5</score> flawed, "
    "<score>9</score> clear and challenging), then one sentence saying why."
)
CRITIC_PLAN = (
    "Problem:\n{prompt}\n\nProposed plan:\n{plan}\n\n"
    "Is this plan correct and useful for solving the problem? Score from 1 to 10: 1-3 if it "
    "is wrong, empty or not a plan; 4-6 if it is partly right or vague; 7-10 if its steps are "
    "correct and would solve the problem.\n"
    "Reply with the score in tags (<score>2</score> means wrong, <score>5</score> partly "
    "right, <score>9</score> correct and useful), then one sentence saying why."
)
PLANNER_SYSTEM = "You are the Planner. You write short step-by-step plans; you do not solve."
PLANNER_USER = (
    "Problem:\n{prompt}\n\nWrite a numbered plan (2 to 6 steps) for solving it, inside "
    "<plan></plan>, like:\n<plan>\n1. ...\n2. ...\n</plan>"
)
SOLVER_SYSTEM = "You are the Solver. You solve problems correctly."
SOLVER_MATH = "{prompt}{plan}\n\nPut your final answer in \\boxed{{}}."
SOLVER_CODE = (
    "{prompt}{plan}\n\nWrite the Python function `{entry_point}` in a single ```python code block."
)


def _plan_block(plan: str | None) -> str:
    return f"\n\nA plan that may help:\n{plan}" if plan else ""


def challenger(reference: Task, math_grounding: str = "claim") -> Observation:
    """Observation of the Challenger for a reference task (its domain picks the template).

    Args:
        reference: The seed task the new one is modelled on.
        math_grounding: ``EnvConfig.math_grounding``; ``"program"`` asks a math Challenger
            for an answer program too (:data:`CHALLENGER_MATH_PROGRAM`).
    """
    if reference.domain != "math":
        template = CHALLENGER_CODE
    elif math_grounding == "program":
        template = CHALLENGER_MATH_PROGRAM
    else:
        template = CHALLENGER_MATH
    return {"system": CHALLENGER_SYSTEM, "user": template.format(prompt=reference.prompt)}


CRITIC_VERIFIER = {
    "math": "\n\nProposed answer: {verifier}\n\nCheck that this answer is right.",
    "code": "\n\nProposed tests:\n{verifier}\n\nCheck that these tests are right.",
}
"""Appended to the question review when the critic sees the proposal's verifier
(``EnvConfig.critic_sees_verifier``)."""
MAX_VERIFIER_CHARS = 1500
"""A verifier shown to the critic is cut to this many characters."""


ANSWER_PROGRAM = "\n\nAnswer program:\n```python\n{program}\n```\nIts value: {value}"
"""How a math proposal's answer program and its value follow the answer in
:func:`verifier_text` (``EnvConfig.math_grounding = "program"``)."""


def verifier_text(task: Task) -> str:
    """The verifier of ``task`` as the critic sees it: the answer (math) or the tests (code).

    A math task grounded by its answer program (``EnvConfig.math_grounding = "program"``:
    ``task.meta`` holds ``answer_program`` and, once the sandbox ran it, ``answer_value``)
    shows the program and its value after the answer (:data:`ANSWER_PROGRAM`), so the critic
    can check that the program computes what the question asks. Cut to
    :data:`MAX_VERIFIER_CHARS`.
    """
    if task.domain != "math":
        return "\n".join(task.tests)[:MAX_VERIFIER_CHARS]
    text = task.answer or ""
    meta = task.meta if isinstance(task.meta, dict) else {}
    program = meta.get("answer_program")
    if isinstance(program, str) and program.strip():
        value = str(meta.get("answer_value", "not computed"))[:300]
        room = MAX_VERIFIER_CHARS - len(text) - len(ANSWER_PROGRAM.format(program="", value=value))
        shown = _program_as_code(program)
        if len(shown) > room:  # cut the program, never the value after it
            shown = shown[: max(0, room - 4)] + "\n..."
        text += ANSWER_PROGRAM.format(program=shown, value=value)
    return text[:MAX_VERIFIER_CHARS]


def _program_as_code(program: str) -> str:
    """A program as the critic sees it: its code, without comments (ours, issue 46 item 5).

    ``ast.unparse`` drops comments, and every string literal is written on one line, so a
    program cannot talk to the critic in a comment or close the code fence with a string
    that holds a fake ``Its value:`` line; only a program that parses reaches a review.
    """
    try:
        tree = _OneLineStrings().visit(ast.parse(program))
        return ast.unparse(tree)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return program.strip()


class _OneLineStrings(ast.NodeTransformer):
    """Write every string literal (f-strings and docstrings too) as one escaped line."""

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, (str, bytes)):
            return ast.copy_location(ast.Name(id=repr(node.value), ctx=ast.Load()), node)
        return node

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
        text = ast.unparse(node).replace("\r", "\\r").replace("\n", "\\n")
        return ast.copy_location(ast.Name(id=text, ctx=ast.Load()), node)


def critic_question(question: str, domain: str, verifier: str | None = None) -> Observation:
    """Observation of the Critic reviewing a newly proposed question.

    Args:
        question: The proposed question.
        domain: ``"math"`` or ``"code"``.
        verifier: The proposal's answer or tests (:func:`verifier_text`) when the critic
            sees them (``EnvConfig.critic_sees_verifier``); ``None``: the question alone.
    """
    user = CRITIC_QUESTION.format(domain=domain, question=question)
    if verifier is not None:
        head, sep, rubric = user.partition(CRITIC_RUBRIC)
        extra = CRITIC_VERIFIER.get(domain, "\n\nVerifier:\n{verifier}")
        user = head.rstrip("\n") + extra.format(verifier=verifier)
        user += "\n\n" + sep + rubric
    return {"system": CRITIC_SYSTEM, "user": user}


def critic_plan(task: Task, plan: str) -> Observation:
    """Observation of the Critic reviewing a plan for ``task``."""
    return {"system": CRITIC_SYSTEM, "user": CRITIC_PLAN.format(prompt=task.prompt, plan=plan)}


JUDGE_ANSWER = (
    "Problem:\n{prompt}\n\nProposed answer:\n{answer}\n\n"
    "Is this answer correct and complete? Score from 1 (wrong) to 10 (certainly correct).\n"
    "Reply with the score in tags (<score>2</score> means wrong, <score>5</score> unsure, "
    "<score>9</score> correct), then one sentence saying why."
)


def judge_answer(task: Task, answer: str) -> Observation:
    """Observation of the MAE-style Judge scoring a solver's answer to ``task``."""
    return {"system": CRITIC_SYSTEM, "user": JUDGE_ANSWER.format(prompt=task.prompt, answer=answer)}


def planner(task: Task) -> Observation:
    """Observation of the Planner for ``task``."""
    return {"system": PLANNER_SYSTEM, "user": PLANNER_USER.format(prompt=task.prompt)}


def solver(task: Task, plan: str | None = None) -> Observation:
    """Observation of the Solver for ``task``, with the plan appended when it passed the gate."""
    if task.domain == "exec":  # the question says what to answer and in which block
        user = task.prompt + _plan_block(plan)
    elif task.domain == "math":
        user = SOLVER_MATH.format(prompt=task.prompt, plan=_plan_block(plan))
    else:
        user = SOLVER_CODE.format(
            prompt=task.prompt, plan=_plan_block(plan), entry_point=task.entry_point or "solution"
        )
    return {"system": SOLVER_SYSTEM, "user": user}

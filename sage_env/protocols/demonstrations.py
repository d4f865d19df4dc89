r"""Role demonstrations for a format warm-up (cold start), built only from the seed set.

A supervised warm-up before RL teaches a small model the reply formats the roles need; the
SAGE loop then has parseable proposals and reviews to learn from. Every demonstration is an
observation exactly as the environment shows it (system, user, response prefix) and the
target reply that follows the prefix. No teacher model, no validation or benchmark item:

- **challenger**: reference seed -> another seed of the same domain written as a proposal
  (math: ``<question>``/``<answer>``; code: ``<question>``/``<tests>``/``<solution>`` with the
  seed's own tests and canonical solution);
- **critic**: a seed question scored 8 or 9, or a corrupted copy of one (shuffled, cut off,
  spliced with another task; :mod:`sage_env.diagnostics.critic_probe`) scored 2 or 3, each with a
  rationale that names what is wrong. Scores come from whether the question is intact, never one
  constant, so the warm-up teaches the critic to tell the two apart rather than to open the
  quality gate for everything (:func:`build_exec_reviews`: the same on execution questions);
- **planner**: a GSM8K or MATH worked solution cut into 2-6 numbered steps;
- **solver**: a math seed answered with its worked solution and ``\boxed{}`` answer, a code
  seed with its canonical solution in a Python fence.

:class:`Demonstration` is the record of one example, which every warm-up set holds. Execution
tasks (AZR's modes) have demonstrations of their own,
:mod:`sage_env.protocols.exec_demonstrations`; which set a run's warm-up gets is
:func:`sage_env.protocols.warmup.demonstrations_for`.

Text only; the learner does the supervised step (``learners.training.warmup``).
"""

from __future__ import annotations

import ast
import operator
import random
import re
from dataclasses import dataclass
from typing import Any

from sage_env.diagnostics.critic_probe import CORRUPTIONS, corrupt
from sage_env.tasks import exec_tasks
from sage_env.tasks.task import Task
from sage_env.text import prompts
from sage_env.text.prompts import CODE_PREFIX, DEFAULT_PREFIXES

ROLES = ("challenger", "critic", "planner", "solver")
"""Roles a demonstration can be for."""

RATIONALES = {
    "": "The problem is clear, complete and can be solved.",
    "shuffled": "The words are scrambled, so the problem cannot be understood.",
    "truncated": "The problem is cut off before it asks anything.",
    "spliced": "The problem mixes two unrelated tasks, so it is not well posed.",
}
"""Critic rationale per corruption (``""`` = intact)."""


@dataclass
class Demonstration:
    """One supervised example.

    Attributes:
        role: One of :data:`ROLES`.
        observation: ``{"system", "user", "prefix"}`` as the environment would show it.
        target: The reply after the prefix (the only tokens that carry loss).
        task_ids: Seed tasks the example was built from (for overlap checks).
    """

    role: str
    observation: dict[str, str]
    target: str
    task_ids: tuple[str, ...]

    @property
    def texts(self) -> list[str]:
        """Every text the example shows the model (for overlap checks)."""
        return [self.observation["user"], self.target]


def _statement(task: Task) -> str:
    """A code seed's statement without its inline example tests (MBPP's 'Your code...')."""
    return task.prompt.split("\nYour code should pass these tests:")[0].strip()


def _grounded_answer(answer: str) -> bool:
    """A seed answer a generated task could carry (the env's check: no free text, a value)."""
    from sage_env.verifiers import MathVerifier

    return MathVerifier().check_answer(answer).score == 1.0


_ANNOTATION_RE = re.compile(r"<<([^<>=]{1,120})=([^<>]{0,40})>>")
_NUMBER_RE = re.compile(r"\d+(?:\.\d+)?|\.\d+")
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.USub, ast.UAdd)
MAX_DEMO_PROGRAM_CHARS = 300
"""Answer programs longer than this are not used in demonstrations (the reply must fit the
``challenge`` phase's token budget)."""


def _arith(node: ast.AST, env: dict[str, Any]) -> Any:
    """Evaluate an arithmetic expression tree of numbers and known names, as Python would."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, _ARITHMETIC):
        value = _arith(node.operand, env)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and isinstance(node.op, _ARITHMETIC):
        a, b = _arith(node.left, env), _arith(node.right, env)
        if isinstance(node.op, ast.Pow) and (abs(b) > 8 or abs(a) > 1e6):
            raise ValueError("power too large for a demonstration")
        ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}
        ops.update({ast.Div: operator.truediv, ast.Pow: operator.pow})
        return ops[type(node.op)](a, b)
    raise ValueError(f"not arithmetic: {type(node).__name__}")


def answer_program(task: Task) -> str | None:
    """A program ``def answer():`` that computes a GSM8K seed's answer, or ``None``.

    Built from the calculator annotations of its worked solution (``<<48/2=24>>``): one line
    per annotation, in order, and the last one returned. A number in a step that is not in
    the question but equals an earlier step's value becomes that step's variable, so the
    program computes the chain rather than restating its results. ``None`` unless every
    annotation is plain arithmetic (at most 6 of them), the program is at most
    :data:`MAX_DEMO_PROGRAM_CHARS` long, and its value, evaluated here exactly as Python
    would, renders (:func:`sage_env.verifiers.math_grounding.render_value`) to the gold
    answer. Used for the math Challenger's demonstrations under
    ``math_grounding = "program"``.
    """
    from sage_env.verifiers.math_grounding import render_value

    steps = _ANNOTATION_RE.findall(task.reference_solution or "")
    if task.domain != "math" or not task.answer or not 1 <= len(steps) <= 6:
        return None
    given = {float(n) for n in _NUMBER_RE.findall(task.prompt.replace(",", ""))}
    names = "abcdef"
    env: dict[str, Any] = {}
    lines = []
    try:
        for i, (expr, _) in enumerate(steps):
            tree = _Substitute(env, given).visit(ast.parse(expr.strip(), mode="eval").body)
            env[names[i]] = _arith(tree, env)
            lines.append(f"    {names[i]} = {ast.unparse(tree)}")
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, TypeError):
        return None
    last = lines.pop().split(" = ", 1)[1]
    program = "def answer():\n" + "".join(line + "\n" for line in lines) + f"    return {last}"
    text, _ = render_value(env[names[len(steps) - 1]])
    gold = task.answer.strip().replace(",", "")
    if text != gold or len(program) > MAX_DEMO_PROGRAM_CHARS:
        return None
    return program


class _Substitute(ast.NodeTransformer):
    """Replace a number not given in the question by the latest earlier step of that value."""

    def __init__(self, env: dict[str, Any], given: set[float]) -> None:
        self.env, self.given = env, given

    def visit_Constant(self, node: ast.Constant) -> ast.AST:  # noqa: N802 - ast's naming
        if type(node.value) not in (int, float) or float(node.value) in self.given:
            return node
        for name in reversed(list(self.env)):
            if self.env[name] == node.value:
                return ast.Name(id=name, ctx=ast.Load())
        return node


def _challenger(ref: Task, other: Task, math_grounding: str = "claim") -> Demonstration | None:
    obs = dict(prompts.challenger(ref, math_grounding), prefix=DEFAULT_PREFIXES["challenge"])
    if ref.domain == "math":
        if not other.answer or len(other.answer) > 60 or not _grounded_answer(other.answer):
            return None
        answer = f"<answer>{other.answer.strip()}</answer>"
        if math_grounding == "program":  # only seeds whose program computes the answer
            program = answer_program(other)
            if program is None:
                return None
            answer = f"<program>\n{program}\n</program>\n{answer}"
        target = f"{other.prompt.strip()}</question>\n{answer}"
    else:
        sol = (other.reference_solution or "").strip("\n")
        if not other.tests or not sol or other.test_setup or len(sol) > 700:
            return None
        question = _statement(other)
        if other.entry_point and other.entry_point not in question:
            question += f" The function is named {other.entry_point}."
        tests = "\n".join(other.tests[:3])
        target = (
            f"{question}</question>\n<tests>\n{tests}\n</tests>\n"
            f"<solution>\n```python\n{sol}\n```\n</solution>"
        )
    return Demonstration("challenger", obs, target, (ref.task_id, other.task_id))


def _critic(task: Task, kind: str, other: Task, rng: random.Random) -> Demonstration:
    question = task.prompt if not kind else corrupt(task.prompt, kind, other.prompt, rng)
    score = rng.choice((8, 9)) if not kind else rng.choice((2, 3))
    obs = dict(
        prompts.critic_question(question, task.domain), prefix=DEFAULT_PREFIXES["review_question"]
    )
    target = f"{score}</score> {RATIONALES[kind]}"
    return Demonstration("critic", obs, target, (task.task_id, other.task_id))


_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|\n+")


def plan_steps(solution: str, max_steps: int = 6) -> list[str]:
    r"""Cut a worked solution into at most ``max_steps`` short steps (sentences/lines).

    GSM8K calculator annotations (``<<2*3=6>>``), the final ``#### N`` line and
    ``\boxed{}`` wrappers are removed. Returns ``[]`` when fewer than 2 steps remain.
    """
    text = re.sub(r"<<[^>]*>>", "", solution)
    text = re.sub(r"^####.*$", "", text, flags=re.MULTILINE)
    text = re.sub(r"\\boxed\{([^{}]*)\}", r"\1", text)
    parts = [p.strip() for p in _SENTENCE_RE.split(text) if len(p.strip().split()) >= 3]
    if len(parts) < 2:
        return []
    if len(parts) > max_steps:  # merge evenly into max_steps steps
        size = -(-len(parts) // max_steps)
        parts = [" ".join(parts[i : i + size]) for i in range(0, len(parts), size)]
    return [p[:200] for p in parts]


def _planner(task: Task) -> Demonstration | None:
    steps = plan_steps(task.reference_solution or "")
    if task.domain != "math" or not steps:
        return None
    obs = dict(prompts.planner(task), prefix=DEFAULT_PREFIXES["plan"])
    # the prefix already opened step 1
    body = " " + steps[0] + "".join(f"\n{i}. {s}" for i, s in enumerate(steps[1:], start=2))
    return Demonstration("planner", obs, body + "\n</plan>", (task.task_id,))


def _solver(task: Task) -> Demonstration | None:
    obs = prompts.solver(task)
    if task.domain == "math":
        if not task.answer:
            return None
        sol = (task.reference_solution or "").strip()
        sol = re.sub(r"<<[^>]*>>", "", re.sub(r"^####.*$", "", sol, flags=re.MULTILINE)).strip()
        if "\\boxed" not in sol:
            sol = f"{sol}\nThe answer is \\boxed{{{task.answer}}}." if sol else ""
        if not sol or len(sol) > 900:
            sol = f"The answer is \\boxed{{{task.answer}}}."
        return Demonstration("solver", dict(obs, prefix=""), sol, (task.task_id,))
    code = (task.reference_solution or "").strip("\n")
    if not code or len(code) > 700 or (task.entry_point and f"def {task.entry_point}" not in code):
        return None
    return Demonstration("solver", dict(obs, prefix=CODE_PREFIX), f"{code}\n```", (task.task_id,))


def build_demonstrations(
    seeds: list[Task],
    n: int = 64,
    mix: dict[str, float] | None = None,
    seed: int = 0,
    exclude: list[Task] | None = None,
    math_grounding: str = "claim",
) -> list[Demonstration]:
    """About ``n`` demonstrations drawn from ``seeds`` in the proportions of ``mix``.

    Args:
        seeds: Seed tasks (the only source of text).
        n: Number of demonstrations (roles with no usable seed get none).
        mix: Share per role (default: challenger 0.4, critic 0.4, planner 0.1, solver 0.1).
        seed: Seed of every draw.
        exclude: Tasks that must not appear (e.g. the validation split): a seed whose prompt
            equals one of theirs is dropped before drawing.
        math_grounding: ``EnvConfig.math_grounding``. Under ``"program"`` the math
            Challenger sees the prompt that asks for an answer program, and its targets are
            the GSM8K seeds whose worked solution gives one (:func:`answer_program`); MATH
            seeds still serve as references, never as targets (their solutions hold no
            computation to turn into a program, and a program that returns the answer as a
            literal would teach the Challenger to restate its claim).

    Raises:
        ValueError: on an unknown role in ``mix`` or a negative share.
    """
    mix = dict(mix or {"challenger": 0.4, "critic": 0.4, "planner": 0.1, "solver": 0.1})
    if set(mix) - set(ROLES) or any(v < 0 for v in mix.values()):
        raise ValueError(f"mix must map roles {ROLES} to shares >= 0, got {mix}")
    banned = {_norm(t.prompt) for t in exclude or []}
    pool = [t for t in seeds if _norm(t.prompt) not in banned]
    rng = random.Random(seed)
    by_domain = {d: [t for t in pool if t.domain == d] for d in ("math", "code")}
    total = sum(mix.values()) or 1.0
    out: list[Demonstration] = []
    for role, share in mix.items():
        want = round(n * share / total)
        made, tries = 0, 0
        while made < want and tries < 50 * max(want, 1) and pool:
            tries += 1
            task = pool[rng.randrange(len(pool))]
            if role == "challenger":
                other = rng.choice(by_domain[task.domain])
                demo = None if other is task else _challenger(task, other, math_grounding)
            elif role == "critic":
                kind = "" if made % 2 == 0 else CORRUPTIONS[(made // 2) % len(CORRUPTIONS)]
                demo = _critic(task, kind, pool[rng.randrange(len(pool))], rng)
            elif role == "planner":
                demo = _planner(task)
            else:
                demo = _solver(task)
            if demo is not None:
                out.append(demo)
                made += 1
    rng.shuffle(out)
    return out


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def overlapping(demos: list[Demonstration], tasks: list[Task]) -> list[str]:
    """Task ids of ``tasks`` whose prompt appears verbatim in a demonstration's text."""
    hits = []
    texts = [_norm(t) for d in demos for t in d.texts]
    for task in tasks:
        needle = _norm(task.prompt)
        if needle and any(needle in t for t in texts):
            hits.append(task.task_id)
    return hits


def build_exec_reviews(
    tasks: list[Task], n: int, seed: int = 0, exclude_ids: set[str] | None = None
) -> list[Demonstration]:
    """``n`` critic demonstrations on execution questions, as SAGE's critic reviews them.

    An execution proposal reaches the critic as its solver question (program and input), the
    prompt of an execution seed; intact seed questions are scored 8-9, corrupted ones
    (:data:`CORRUPTIONS` in turn: shuffled, truncated, spliced) 2-3, as the math/code reviews
    of :func:`build_demonstrations`. Without them the critic meets its first program in the
    game and scores every one below the word problems it was calibrated on.

    Args:
        tasks: ``exec`` tasks (others are skipped).
        n: Number of demonstrations (0 when no task is usable).
        seed: Seed of the draws.
        exclude_ids: ``parent_id``/``task_id`` of tasks that must not appear (the critic
            probe's, the validation's).
    """
    excluded = exclude_ids or set()
    pool = [
        t
        for t in tasks
        if exec_tasks.exec_mode(t) is not None
        and t.task_id not in excluded
        and (t.parent_id or "") not in excluded
    ]
    if not pool:
        return []
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = "" if i % 2 == 0 else CORRUPTIONS[(i // 2) % len(CORRUPTIONS)]
        task, other = pool[rng.randrange(len(pool))], pool[rng.randrange(len(pool))]
        out.append(_critic(task, kind, other, rng))
    return out

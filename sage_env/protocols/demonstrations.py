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
  quality gate for everything;
- **planner**: a GSM8K or MATH worked solution cut into 2-6 numbered steps;
- **solver**: a math seed answered with its worked solution and ``\boxed{}`` answer, a code
  seed with its canonical solution in a Python fence.

Execution tasks (AZR's modes, :mod:`sage_env.tasks.exec_tasks`) have demonstrations of their own,
:func:`build_exec_demonstrations`, in the exact format of the ``azr`` protocol's prompts (and of
SAGE's prompts over the ``exec`` domain). They are right by construction: every program, input
and output is a bundled execution seed's, whose outputs the sandboxed executor computed
(``scripts/build_exec_seeds.py``); the model's claims never enter.

Each protocol owns its warm-up: :func:`demonstrations_for` asks the run's protocol for its set
(:meth:`sage_env.protocols.Protocol.demonstrations`: by default SAGE's formats,
:func:`sage_formats`; AZR's own are its execution tasks in its prompts).

Text only; the learner does the supervised step (``learners.training.warmup``).
"""

from __future__ import annotations

import ast
import operator
import random
import re
from collections.abc import Callable
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


# ------------------------------------------------------------------ execution tasks
EXEC_MAX_PROGRAM_CHARS = 600
"""Seed programs longer than this are not used in demonstrations (the warm-up keeps the last
``max_tokens`` of a prompt, and a proposer prompt shows several programs)."""
EXEC_MAX_VALUE_CHARS = 200
"""Inputs/outputs longer than this are not used as targets."""


def compact_program(source: str) -> str:
    """``source`` without docstrings and comments (``ast.unparse``), or unchanged if it does
    not parse.

    A deduction/abduction proposer's target is written compactly: 51 of the 163 seed
    programs short enough for a demonstration carry a HumanEval docstring with doctests, and
    with it a target (program and input) was a median of 92 tokens (SmolLM2's tokenizer),
    26 of them over the ``propose`` phase's budget of 160 (``DEMO_BUDGETS``); warmed up on
    them, the default model wrote docstrings and ran out of tokens before its ``input`` block
    (``benchmarks/proposal_validity/results/proposal_validity.json``). Compacted: median 64, 4 over. The code
    is the same (docstrings and comments do not change what ``f`` returns; no seed reads
    ``__doc__``).
    """
    import ast
    import warnings

    try:
        with warnings.catch_warnings():  # a seed's "\\s" in a plain string: not our warning
            warnings.simplefilter("ignore")
            tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return source
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]
    try:
        return ast.unparse(tree)
    except (ValueError, RecursionError):
        return source


def takes_one_argument(task: Task) -> bool:
    """Whether ``task``'s program defines ``f`` with exactly one parameter (no ``*args``,
    ``**kwargs`` or keyword-only ones), so that its input is one literal."""
    import ast
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(task.reference_solution or "")
    except (SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "f":
            a = node.args
            return (
                len(a.posonlyargs) + len(a.args) == 1
                and a.vararg is None
                and a.kwarg is None
                and not a.kwonlyargs
            )
    return False


def _exec_proposer(
    mode: str, target_task: Task, refs: list[Task], banned: tuple[str, ...], n_inputs: int
) -> Demonstration | None:
    """A proposer demonstration: the prompt of ``mode`` -> ``target_task`` written as a proposal.

    Deduction/abduction: the references are K buffer tasks, the target one seed program and its
    first input. Induction: the program is ``target_task``'s, the target its inputs (all of
    them, up to ``n_inputs``) in numbered blocks and its message; the prefix
    (:func:`~sage_env.tasks.exec_tasks.proposer_prefix`) holds the first input and opens
    ```` ```input 2 ````, so the target starts with the second.
    """
    spec = exec_tasks.ExecSpec.of(target_task)
    if mode == "induction":
        inputs = list(dict.fromkeys(spec.inputs))[:n_inputs]
        if len(inputs) < 2 or not spec.message or any(
            len(i) > EXEC_MAX_VALUE_CHARS for i in inputs
        ):
            return None
        view = exec_tasks.make_task(
            "induction",
            spec.program,
            list(spec.inputs[:2]),
            list(spec.outputs[:2]),
            task_id=target_task.task_id,
        )
        obs = dict(exec_tasks.proposer_prompt("induction", [view], banned, n_inputs))
        obs["prefix"] = exec_tasks.proposer_prefix("induction", view)
        # the prefix holds the first input and opened the second block (or only opened the first)
        first = 2 if obs["prefix"].endswith("```input 2\n") else 1
        target = f"{inputs[first - 1]}\n```\n" + "".join(
            f"```input {k}\n{i}\n```\n" for k, i in enumerate(inputs[first:], first + 1)
        )
        target += f"```message\n{spec.message}\n```"
        return Demonstration("challenger", obs, target, (target_task.task_id,))
    if len(spec.inputs[0]) > EXEC_MAX_VALUE_CHARS:
        return None
    obs = dict(
        exec_tasks.proposer_prompt(mode, refs, banned, n_inputs, exec_tasks.REFERENCE_CHARS)
    )
    obs["prefix"] = exec_tasks.PROPOSER_PREFIX[mode]
    # compact (no docstring): the target fits the phase's token budget (compact_program)
    target = f"{compact_program(spec.program)}\n```\n```input\n{spec.inputs[0]}\n```"
    ids = (target_task.task_id, *(t.task_id for t in refs))
    return Demonstration("challenger", obs, target, ids)


def _exec_solver(
    task: Task, solver_prompt: Callable[[Task], dict[str, str]]
) -> Demonstration | None:
    """A solver demonstration on an execution task: the answer block of its mode.

    Deduction: the executor's output; abduction: the seed's own input (which gives that output
    by construction); induction: the program itself. The observation is ``solver_prompt``'s
    (AZR's :func:`sage_env.tasks.exec_tasks.solver_prompt`, SAGE's ``prompts.solver``).
    """
    spec = exec_tasks.ExecSpec.of(task)
    answer = {
        "deduction": spec.outputs[0],
        "abduction": spec.inputs[0],
        "induction": spec.program,
    }[spec.mode]
    if spec.mode != "induction" and len(answer) > EXEC_MAX_VALUE_CHARS:
        return None
    obs = dict(solver_prompt(task), prefix=exec_tasks.SOLVER_PREFIX[spec.mode])
    return Demonstration("solver", obs, f"{answer}\n```", (task.task_id,))


def build_exec_demonstrations(
    tasks: list[Task],
    n: int = 64,
    mix: dict[str, float] | None = None,
    seed: int = 0,
    solver_prompt: Callable[[Task], dict[str, str]] | None = None,
    references: int = 6,
    banned: tuple[str, ...] | None = None,
    n_inputs: int = 10,
    exclude_ids: set[str] | frozenset[str] = frozenset(),
) -> list[Demonstration]:
    """About ``n`` execution-task demonstrations (proposer and solver), modes in turn.

    Args:
        tasks: ``exec`` tasks (:func:`sage_env.tasks.exec_tasks.load_exec_seeds`); others are
            ignored. Programs longer than :data:`EXEC_MAX_PROGRAM_CHARS` are skipped.
        n: Number of demonstrations.
        mix: Share per role; only ``challenger`` (the proposing role: AZR's proposer, SAGE's
            Challenger) and ``solver`` are used (default: half each).
        seed: Seed of every draw.
        solver_prompt: The solver's observation of a task (default: AZR's,
            :func:`sage_env.tasks.exec_tasks.solver_prompt`; SAGE over ``exec`` passes
            ``prompts.solver``).
        references: K, the reference triplets in a deduction/abduction proposer prompt.
        banned: Modules left out of the allowed ones the proposer prompt names (default
            AZR's list).
        n_inputs: N, the inputs an induction proposer is asked for.
        exclude_ids: ``parent_id``/``task_id`` of tasks that must not appear.

    Returns:
        Demonstrations with ``role`` ``"challenger"`` or ``"solver"``; the proposer's target
        is a seed program and its input (or inputs and message), the solver's the executor's
        output, the seed input, or the program. A deduction/abduction proposer's target is a
        seed program that takes one argument (:func:`takes_one_argument`; 128 of the 191
        bundled ones), so the program it writes and its one input match: warmed up on programs
        of any arity, the demo's Challenger wrote ``def f(a, b)`` with one input (TypeError 6
        of the demo's 20 deduction/abduction proposals). The reference snippets in its prompt
        keep every arity.

    Raises:
        ValueError: on an unknown role or a negative share in ``mix``.
    """
    from sage_env.verifiers.program_checks import AZR_BANNED_MODULES

    mix = dict(mix or {"challenger": 0.5, "solver": 0.5})
    if set(mix) - set(ROLES) or any(v < 0 for v in mix.values()):
        raise ValueError(f"mix must map roles {ROLES} to shares >= 0, got {mix}")
    banned = tuple(banned if banned is not None else AZR_BANNED_MODULES)
    solver_prompt = solver_prompt or exec_tasks.solver_prompt
    pool = [
        t
        for t in tasks
        if exec_tasks.exec_mode(t) is not None
        and len(t.reference_solution or "") <= EXEC_MAX_PROGRAM_CHARS
        and t.task_id not in exclude_ids
        and (t.parent_id or "") not in exclude_ids
    ]
    by_mode = {m: [t for t in pool if exec_tasks.exec_mode(t) == m] for m in exec_tasks.MODES}
    one_argument = {m: [t for t in by_mode[m] if takes_one_argument(t)] for m in by_mode}
    rng = random.Random(seed)
    shares = {r: mix.get(r, 0.0) for r in ("challenger", "solver")}
    total = sum(shares.values())
    out: list[Demonstration] = []
    if not pool or total <= 0:
        return out
    for role, share in shares.items():
        want = round(n * share / total)
        made, tries = 0, 0
        while made < want and tries < 50 * max(want, 1):
            mode = exec_tasks.MODES[(made + tries) % len(exec_tasks.MODES)]
            tries += 1
            cands = by_mode[mode]
            if not cands:
                continue
            # a proposer's target program takes one argument: its input is one literal
            targets = one_argument[mode] if role == "challenger" and mode != "induction" else cands
            if not targets:
                continue
            task = targets[rng.randrange(len(targets))]
            if role == "solver":
                demo = _exec_solver(task, solver_prompt)
            elif mode == "induction":
                demo = _exec_proposer(mode, task, [], banned, n_inputs)
            else:
                others = [t for t in cands if t.reference_solution != task.reference_solution]
                refs = rng.sample(others, min(references, len(others)))
                demo = _exec_proposer(mode, task, refs, banned, n_inputs) if refs else None
            if demo is not None:
                out.append(demo)
                made += 1
    rng.shuffle(out)
    return out


def demonstrations_for(
    protocol: Any,
    domains: tuple[str, ...] | list[str],
    seeds: list[Task],
    n: int = 64,
    mix: dict[str, float] | None = None,
    seed: int = 0,
    exclude: list[Task] | None = None,
    math_grounding: str = "claim",
    domain_weights: dict[str, float] | None = None,
) -> list[Demonstration]:
    """The warm-up demonstrations a run of ``protocol`` over ``domains`` needs.

    The protocol's own (:meth:`sage_env.protocols.Protocol.demonstrations`; AZR's are its
    execution tasks, :meth:`sage_env.protocols.azr.AZRProtocol.demonstrations`).

    ``protocol`` is a registered name or a :class:`~sage_env.protocols.Protocol` instance; a name
    nothing registered gets SAGE's (:func:`sage_formats`). ``mix`` defaults to 40% challenger, 40%
    critic, 10% planner, 10% solver. ``seeds`` may hold ``exec`` tasks or not; the bundled execution
    seeds are loaded when a protocol needs them and ``seeds`` has none. ``exclude`` as in
    :func:`build_demonstrations` (an excluded task's id also removes execution seeds built from
    it). ``math_grounding`` as in :func:`build_demonstrations`. ``domain_weights``
    (``EnvConfig.domain_weights``) is passed on only when set, so a protocol written before it
    still works without it.
    """
    from sage_env.protocols.registry import PROTOCOLS, make_protocol

    mix = dict(mix or {"challenger": 0.4, "critic": 0.4, "planner": 0.1, "solver": 0.1})
    if isinstance(protocol, str) and protocol not in PROTOCOLS.names():
        return sage_formats(
            domains, seeds, n, mix, seed, exclude, math_grounding, domain_weights=domain_weights
        )
    weights = {} if domain_weights is None else {"domain_weights": domain_weights}
    return make_protocol(protocol).demonstrations(
        domains,
        seeds,
        n=n,
        mix=mix,
        seed=seed,
        exclude=exclude,
        math_grounding=math_grounding,
        **weights,
    )


def exec_seeds(seeds: list[Task]) -> list[Task]:
    """The ``exec`` tasks of ``seeds``, or the bundled execution seeds when it has none."""
    return [t for t in seeds if t.domain == "exec"] or exec_tasks.load_exec_seeds()


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


def sage_formats(
    domains: tuple[str, ...] | list[str],
    seeds: list[Task],
    n: int,
    mix: dict[str, float],
    seed: int = 0,
    exclude: list[Task] | None = None,
    math_grounding: str = "claim",
    domain_weights: dict[str, float] | None = None,
) -> list[Demonstration]:
    """SAGE's warm-up (every protocol's unless it has its own): its four roles' formats.

    - ``"exec"`` in ``domains`` (SAGE over execution tasks): the proposing and solving shares
      are split between the math/code seeds (:func:`build_demonstrations`) and the execution
      seeds (:func:`build_exec_demonstrations` with SAGE's solver prompt), in proportion to
      the number of domains (or to ``domain_weights``, the rounds' mix); so is the critic's
      share (:func:`build_exec_reviews`: the critic reviews execution questions too);
      planner demonstrations stay math/code.
    - otherwise: :func:`build_demonstrations`.
    """
    plain = [t for t in seeds if t.domain != "exec"]
    if "exec" not in domains:
        return build_demonstrations(
            plain, n, mix, seed=seed, exclude=exclude, math_grounding=math_grounding
        )
    exe = exec_seeds(seeds)
    excluded = {t.task_id for t in exclude or []}
    other = [d for d in domains if d != "exec"]
    frac = 1.0 / len(domains)
    if domain_weights is not None:
        weights = {d: float(domain_weights.get(d, 1.0)) for d in domains}
        frac = weights["exec"] / (sum(weights.values()) or 1.0)
    total = sum(mix.values()) or 1.0
    active = mix.get("challenger", 0.0) + mix.get("solver", 0.0)
    n_exec = round(n * frac * active / total)
    exec_mix = {"challenger": mix.get("challenger", 0.0), "solver": mix.get("solver", 0.0)}
    demos = build_exec_demonstrations(
        exe, n_exec, exec_mix, seed=seed, solver_prompt=prompts.solver, exclude_ids=excluded
    )
    n_reviews = round(n * frac * mix.get("critic", 0.0) / total)
    demos += build_exec_reviews(exe, n_reviews, seed=seed, exclude_ids=excluded)
    if other:
        plain = [t for t in plain if t.domain in other]
        demos += build_demonstrations(
            plain, n - len(demos), mix, seed=seed, exclude=exclude, math_grounding=math_grounding
        )
    random.Random(seed).shuffle(demos)
    return demos

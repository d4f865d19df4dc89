"""Demonstrations of AZR's execution tasks, in the exact format of their prompts.

:func:`build_exec_demonstrations` gives proposer and solver demonstrations for the modes of
:mod:`sage_env.tasks.exec_tasks` (deduction, abduction, induction) in the ``azr`` protocol's
prompts (and, given SAGE's solver prompt, in SAGE's prompts over the ``exec`` domain). They
are right by construction: every program, input and output is a bundled execution seed's,
whose outputs the sandboxed executor computed (``scripts/build_exec_seeds.py``); the model's
claims never enter. Also :func:`exec_seeds` (the tasks they are drawn from),
:func:`compact_program` and :func:`takes_one_argument` (which seeds a proposer's target may
be). Each is a :class:`~sage_env.protocols.demonstrations.Demonstration`.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from sage_env.protocols.demonstrations import ROLES, Demonstration
from sage_env.tasks import exec_tasks
from sage_env.tasks.task import Task

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
    """Whether ``task``'s program defines ``f`` with exactly one parameter.

    No ``*args``, ``**kwargs`` or keyword-only ones (:func:`~sage_env.tasks.exec_tasks.signature`),
    so that its input is one literal.
    """
    sig = exec_tasks.signature(task.reference_solution or "")
    return sig is not None and len(sig[0]) == 1


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
    from sage_env.verifiers.allow_list import AZR_BANNED_MODULES

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


def exec_seeds(seeds: list[Task]) -> list[Task]:
    """The ``exec`` tasks of ``seeds``, or the bundled execution seeds when it has none."""
    return [t for t in seeds if t.domain == "exec"] or exec_tasks.load_exec_seeds()

r"""Execution tasks: AZR's deduction, abduction and induction (arXiv 2505.03335, Sec. 3.2).

A task of domain ``"exec"`` is built from a program ``p`` (entry function ``f``) and inputs
whose outputs the sandboxed executor computed (:mod:`sage_env.verifiers.executor`); the
ground truth is never a model's claim. Its :class:`~sage_env.tasks.task.Task` keeps the program in
``reference_solution`` and everything else in ``meta["exec"]``::

    {"mode": "deduction" | "abduction" | "induction",
     "inputs": ["1, 2", ...],       # canonical argument text, one per call
     "outputs": ["3", ...],         # repr of each output, from the executor
     "shown": 1,                    # pairs the solver sees (induction holds out the rest)
     "message": "..."}              # induction only: the proposer's hint

The solver is asked (prompts here, paraphrasing AZR's ``code_output_predictor_prompt``,
``code_input_predictor_prompt`` and ``code_function_predictor_prompt``):

- deduction: ``p`` and ``i`` -> ``o`` in a fenced block tagged ``output``;
- abduction: ``p`` and ``o`` -> any ``i`` with ``p(i) == o`` in a block tagged ``input``;
- induction: the shown ``(i, o)`` pairs and the message -> a program ``f`` in a ``python``
  block, judged on the held-out inputs.

The proposer writes (AZR's ``code_output_prompt`` / ``code_input_prompt`` /
``code_function_prompt``): for deduction and abduction a program in a ``python`` block and one
input in an ``input`` block, given K reference triplets; for induction, N inputs (each in its
own ``input`` block) and a ``message`` block for a program drawn from the deduction and
abduction buffers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources

from sage_env.tasks.task import Task

MODES = ("deduction", "abduction", "induction")
"""AZR's three reasoning modes (Sec. 3.2)."""

IDENTITY_PROGRAM = "def f(a):\n    return a"
"""AZR's seed program (``seed_program`` in AZR's ``azr_ray_trainer.py``; the paper's zero
triplet, Sec. 3.3.1)."""
IDENTITY_INPUT = "'Hello World'"
"""The zero triplet's input and output."""

EXEC_SYSTEM = (
    "You are a careful Python programmer. You reason about what code does and answer in the "
    "exact fenced format asked for."
)
"""System message of every execution-task prompt."""

@dataclass(frozen=True)
class ExecSpec:
    """The execution part of an ``exec`` task (``Task.meta["exec"]`` as a record)."""

    mode: str
    program: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    shown: int = 1
    message: str = ""

    @classmethod
    def of(cls, task: Task) -> ExecSpec:
        """Read the spec of an ``exec`` task.

        Raises:
            ValueError: if ``task`` is not an execution task.
        """
        m = task.meta.get("exec") if isinstance(task.meta, dict) else None
        if task.domain != "exec" or not isinstance(m, dict) or m.get("mode") not in MODES:
            raise ValueError(f"task {task.task_id} is not an execution task")
        return cls(
            m["mode"],
            task.reference_solution or "",
            tuple(m.get("inputs", ())),
            tuple(m.get("outputs", ())),
            int(m.get("shown", 1)),
            str(m.get("message", "")),
        )

    def held_out(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Induction: the inputs and outputs the solver does not see and could not look up.

        A held-out input equal by value (Python's ``==``: ``1``, ``True``, ``1.0``) to a
        shown input or to an earlier held-out one is dropped with its output, so a lookup
        table of the shown pairs scores nothing (the proposal check already keeps inputs
        distinct by value, :func:`sage_env.verifiers.literals.distinct_inputs`; this holds
        for any stored task too).
        """
        from sage_env.verifiers.literals import distinct_inputs

        shown = distinct_inputs(self.inputs[: self.shown])
        inputs: list[str] = []
        outputs: list[str] = []
        for text, output in zip(self.inputs[self.shown :], self.outputs[self.shown :]):
            if len(distinct_inputs([*shown, *inputs, text])) > len(shown) + len(inputs):
                inputs.append(text)
                outputs.append(output)
        return tuple(inputs), tuple(outputs)


def exec_mode(task: Task | None) -> str | None:
    """The mode of an ``exec`` task, else ``None``."""
    if task is None or task.domain != "exec" or not isinstance(task.meta, dict):
        return None
    m = task.meta.get("exec")
    return m.get("mode") if isinstance(m, dict) else None


def make_task(
    mode: str,
    program: str,
    inputs: list[str],
    outputs: list[str],
    *,
    task_id: str,
    message: str = "",
    source: str = "generated",
    parent_id: str | None = None,
    meta: dict | None = None,
) -> Task:
    """An ``exec`` :class:`Task` whose prompt is the solver's question.

    Deduction and abduction ask about the first input/output pair (the others are kept).
    Induction shows the first half of the pairs (at least one) and holds out the rest (AZR
    shows N/2, Sec. 3.3.2).

    Raises:
        ValueError: on an unknown mode, or induction with fewer than 2 pairs.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if len(inputs) != len(outputs) or not inputs:
        raise ValueError(
            f"need as many outputs as inputs (>= 1), got {len(inputs)}, {len(outputs)}"
        )
    if mode == "induction":
        if len(inputs) < 2:
            raise ValueError("induction needs at least 2 input/output pairs")
        shown = max(1, len(inputs) // 2)
    else:
        shown = 1  # the question uses the first pair; the others stay as provenance
    spec = {
        "mode": mode,
        "inputs": list(inputs),
        "outputs": list(outputs),
        "shown": shown,
        "message": message,
    }
    task = Task(
        task_id=task_id,
        domain="exec",
        prompt="",
        source=source,
        parent_id=parent_id,
        reference_solution=program,
        entry_point="f",
        meta={**(meta or {}), "exec": spec},
    )
    task.prompt = solver_question(ExecSpec.of(task))
    return task


# ------------------------------------------------------------------------ prompts
def solver_question(spec: ExecSpec) -> str:
    """The solver's user message for ``spec`` (its mode decides what is asked)."""
    if spec.mode == "deduction":
        return (
            "Deduce the output of this Python function for the given input. Think it through "
            "step by step, then give the output as a Python literal in a ```output block "
            "(quote strings; tuples in parentheses).\n\n"
            f"```python\n{spec.program}\n```\n\nInput (the arguments of f):\n"
            f"```input\n{spec.inputs[0]}\n```"
        )
    if spec.mode == "abduction":
        return (
            "Find an input for which this Python function returns the given output. Think it "
            "through, then give the arguments of f as Python literals, separated by commas, in "
            "an ```input block (quote strings). Any input that produces the output is right."
            f"\n\n```python\n{spec.program}\n```\n\nOutput:\n```output\n{spec.outputs[0]}\n```"
        )
    pairs = "\n".join(
        f"```input\n{i}\n```\n```output\n{o}\n```"
        for i, o in zip(spec.inputs[: spec.shown], spec.outputs[: spec.shown])
    )
    return (
        "Deduce the Python function that maps these inputs to these outputs. Your function "
        "will be run on other, hidden inputs and must return their outputs. Name it `f`, keep "
        "it deterministic, and give it in one ```python block.\n\n"
        f"{pairs}\n\nMessage from the task's author:\n```message\n{spec.message}\n```"
    )


def solver_prompt(task: Task) -> dict[str, str]:
    """The solver's observation (``system``, ``user``) on an ``exec`` task."""
    return {"system": EXEC_SYSTEM, "user": task.prompt}


SOLVER_PREFIX = {"deduction": "```output\n", "abduction": "```input\n", "induction": "```python\n"}
"""Response prefix of the solver per mode (the opening of the answer block)."""
PROPOSER_PREFIX = {
    "deduction": "```python\n",
    "abduction": "```python\n",
    "induction": "```input 1\n",
}
"""Response prefix of the proposer per mode.

Induction's opens a *numbered* block, ```` ```input 1 ````, and its proposer is asked for
```` ```input 1 ````, ```` ```input 2 ```` ... (the parser reads the tag and ignores the rest of
the fence line, so a numbered block is an ``input`` block like any other). Deduction and
abduction proposals end right after their one ```` ```input ```` block; with the same unnumbered
block, the demo's warmed 135M Challenger ended its induction replies after one input too (9 of
9 "fewer than 2 distinct literal inputs" in the demo; docs/write-ups/demo-run.md, "Self-made
tasks in the pool"). After ```` ```input 1 ```` the next block's number is the natural
continuation."""


SHOWN_INPUT_CHARS = 200
"""Longest reference input :func:`proposer_prefix` writes into an induction proposer's reply
as its first block (a longer one leaves the prefix at ```` ```input 1 ````)."""


def proposer_prefix(mode: str, view: Task | None = None) -> str:
    """The start of the proposer's reply for ``mode`` on its task view ``view``.

    :data:`PROPOSER_PREFIX`, except for induction on a view with an input: then the reply
    starts with that input (the reference program's first input, a truth the pool holds) in
    ```` ```input 1 ```` and opens ```` ```input 2 ````, so the proposer writes from its
    second input on. The warmed 135M proposer ended its induction replies after one input
    block in 15 of 28 proposals (exec20 growth check, k = 4, 8 rounds: "fewer than 2 distinct
    literal inputs"); after a closed first block it writes the second. The inputs it writes
    must still differ from the first (2 distinct are needed) and run. The prefix is part of
    the reply the validator parses, not of what the proposer is trained on.

    Raises:
        KeyError: on an unknown mode.
    """
    base = PROPOSER_PREFIX[mode]
    if mode != "induction" or view is None:
        return base
    try:
        inputs = ExecSpec.of(view).inputs
    except ValueError:
        return base
    if not inputs or len(inputs[0]) > SHOWN_INPUT_CHARS or "```" in inputs[0]:
        return base
    return f"{base}{inputs[0]}\n```\n```input 2\n"


def signature(program: str, entry: str = "f") -> tuple[tuple[str, ...], int] | None:
    """``(names, defaults)`` of ``entry``'s positional parameters in ``program``.

    ``names`` are the positional parameters in order (positional-only ones first),
    ``defaults`` how many of the last ones have a default. ``None`` when the program does not
    parse, defines no top-level ``entry``, or ``entry`` takes ``*args``, ``**kwargs`` or
    keyword-only parameters (no fixed count of comma-separated literals calls it). Parses
    only; never runs the program nor raises on model output.
    """
    import ast
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(program or "")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == entry:
            a = node.args
            if a.vararg is not None or a.kwarg is not None or a.kwonlyargs:
                return None
            names = tuple(x.arg for x in a.posonlyargs + a.args)
            return names, len(a.defaults)
    return None


def arity_hint(program: str, entry: str = "f") -> str:
    """One sentence telling an induction proposer how many literals an input holds.

    ``"`f` takes 2 arguments (`a`, `b`): each input block holds exactly 2 comma-separated
    literals, in that order."``; ``""`` when :func:`signature` gives no fixed count (varargs,
    keyword-only parameters, defaults) or no parameter. Wrong-arity inputs were the most
    common reason the grid's induction proposals did not run (``f() takes 1 positional
    argument but 4 were given``, ``missing 1 required positional argument``; exec20 seed 0,
    04d9ee0), and every input must run for the proposal to be valid, as in AZR's
    ``gen_code_f`` check.
    """
    sig = signature(program, entry)
    if sig is None or sig[1] or not sig[0]:
        return ""
    names = ", ".join(f"`{n}`" for n in sig[0])
    if len(sig[0]) == 1:
        return (
            f"`{entry}` takes 1 argument ({names}): each input block holds exactly one literal "
            "(a list, tuple or dict counts as one)."
        )
    return (
        f"`{entry}` takes {len(sig[0])} arguments ({names}): each input block holds exactly "
        f"{len(sig[0])} comma-separated literals, in that order."
    )


REFERENCE_CHARS = 1000
"""Default character budget of the reference snippets in a proposer prompt
(``AZRConfig.reference_chars``; see :func:`proposer_prompt`)."""


def _reference_block(i: int, spec: ExecSpec) -> str:
    return (
        f"<snippet_{i}>\n```python\n{spec.program}\n```\n```input\n{spec.inputs[0]}\n```\n"
        f"```output\n{spec.outputs[0]}\n```\n</snippet_{i}>"
    )


def shown_references(references: list[Task], reference_chars: int = 0) -> list[Task]:
    """The deduction/abduction references :func:`proposer_prompt` shows, in order.

    With ``reference_chars`` > 0 a reference is kept while the snippets kept so far and its
    own fit in that many characters (the first one always; a shorter one later may still
    fit); 0 keeps them all. The proposal's ``parent_id`` names these, not the ones dropped.
    """
    kept: list[Task] = []
    used = 0
    for t in references:
        size = len(_reference_block(len(kept), ExecSpec.of(t))) + 1
        if kept and reference_chars > 0 and used + size - 1 > reference_chars:
            continue
        kept.append(t)
        used += size
    return kept


def proposer_prompt(
    mode: str,
    references: list[Task],
    banned: tuple[str, ...],
    n_inputs: int = 10,
    reference_chars: int = 0,
) -> dict[str, str]:
    """The proposer's observation for ``mode``.

    Deduction/abduction: write a new program ``f`` and one input, given K reference triplets
    (AZR Sec. 3.3.2). The snippets come first and the instruction last, so that a prompt cut
    to its last tokens (``SamplingConfig.max_prompt_tokens``) keeps what to write and in which
    blocks. ``reference_chars`` > 0 keeps the references, in order, while their snippets fit
    in that many characters (the first one always). The instruction names the modules a
    program may import: the allow-list's (``allow_list.ALLOWED_MODULES``) less
    ``banned``. Induction: write ``n_inputs`` inputs and a message for the program of
    ``references[0]``, followed by :func:`arity_hint` where ``f`` has a fixed count of
    parameters.
    """
    from sage_env.verifiers.allow_list import allowed_modules

    if mode == "induction":
        spec = ExecSpec.of(references[0])
        user = (
            f"Write {n_inputs} different inputs for this Python function, so that a test "
            "subject who sees half of the input/output pairs and your message can work out "
            "what the function does. Put each input (the arguments of f as Python literals, "
            "comma-separated) in its own numbered block (```input 1, ```input 2, ...), then a "
            "short hint in a ```message block. Do not reveal the code in the message.\n\n"
            f"```python\n{spec.program}\n```"
        )
        hint = arity_hint(spec.program)
        if hint:
            user += f"\n\n{hint}"
        return {"system": EXEC_SYSTEM, "user": user}
    goal = (
        "whose OUTPUT is hard but possible to deduce from the code and the input"
        if mode == "deduction"
        else "for which it is hard but possible to find an INPUT that gives a shown output"
    )
    shown = shown_references(references, reference_chars)
    refs = "\n".join(_reference_block(i, ExecSpec.of(t)) for i, t in enumerate(shown))
    user = (
        f"Reference snippets:\n{refs}\n\n"
        f"Write a new Python function `f` and one input {goal}. Requirements: `f` takes at "
        "least one argument and returns a value; it is deterministic; no randomness, time, "
        "I/O, printing or external state; it finishes within a few seconds; imports at the "
        f"top, only of these modules: {', '.join(allowed_modules(banned))}. The input is the "
        "arguments of f as Python literals, comma-separated. Make it different from the "
        "reference snippets."
        "\n\nReply with the function in a ```python block and the input in an ```input block."
    )
    return {"system": EXEC_SYSTEM, "user": user}


# ------------------------------------------------------------------------ seeds
def identity_tasks() -> list[Task]:
    """AZR's zero triplet as a deduction, an abduction and an induction task.

    ``def f(a): return a`` on ``'Hello World'`` (Sec. 3.3.1); the induction task adds three
    more inputs so that it has pairs to hold out.
    """
    ded = make_task(
        "deduction",
        IDENTITY_PROGRAM,
        [IDENTITY_INPUT],
        [IDENTITY_INPUT],
        task_id="exec/identity/deduction",
        source="exec_seed",
    )
    abd = make_task(
        "abduction",
        IDENTITY_PROGRAM,
        [IDENTITY_INPUT],
        [IDENTITY_INPUT],
        task_id="exec/identity/abduction",
        source="exec_seed",
    )
    ind = make_task(
        "induction",
        IDENTITY_PROGRAM,
        [IDENTITY_INPUT, "[1, 2]", "42", "'abc'"],
        [IDENTITY_INPUT, "[1, 2]", "42", "'abc'"],
        task_id="exec/identity/induction",
        message="The function returns something simple.",
        source="exec_seed",
    )
    return [ded, abd, ind]


def load_exec_seeds() -> list[Task]:
    """AZR's zero triplet plus the bundled seed programs, as ``exec`` tasks of all modes.

    ``sage_env/data/exec_seeds.jsonl`` is built by ``scripts/build_exec_seeds.py`` from the
    code seeds' reference solutions (renamed to ``f``) on the literal inputs of their tests,
    every output computed by the sandboxed executor. Each record makes one deduction, one
    abduction and (with 2+ pairs) one induction task.
    """
    tasks = identity_tasks()
    path = resources.files("sage_env") / "data" / "exec_seeds.jsonl"
    if not path.is_file():
        return tasks
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        for mode in MODES:
            if mode == "induction" and len(rec["inputs"]) < 2:
                continue
            tasks.append(
                make_task(
                    mode,
                    rec["program"],
                    rec["inputs"],
                    rec["outputs"],
                    task_id=f"exec/{rec['id']}/{mode}",
                    message=rec.get("message", ""),
                    source="exec_seed",
                    parent_id=rec["id"],
                )
            )
    return tasks

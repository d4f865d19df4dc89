"""Benchmark data: loaders of the evaluation benchmarks, as :class:`EvalItem`, and the layout.

Used by :mod:`learners.evaluation` (scoring, pass@k, ``sage-env eval``).

Where a benchmark's rows come from (``source``, ``sage-env eval --source``):

- ``auto`` (default): the data folder, which is ``--data-dir`` if given, else
  ``$SAGE_ENV_DATA``, else the files shipped inside the package
  (``learners/data/benchmarks``, see its README for sources and licenses); a benchmark
  whose file is not there loads from the Hugging Face hub (:data:`HUB_SOURCES`, needs
  ``pip install "sage-env[hub]"`` and a network).
- ``local``: the data folder only (no network).
- ``hub``: the hub only, through ``datasets.load_dataset``; the rows go through the same
  loaders as local files.

Data folder layout (:data:`BENCHMARK_FILES`; shipped: gsm8k, math500, humaneval,
humaneval_plus, mbpp, mbpp_plus, cruxeval)::

    math/gsm8k_test.jsonl            question, answer ("... #### 18")
    math/math500_test.jsonl          problem, answer
    math/aime24_test.jsonl           problem, answer                  (not shipped: hub)
    math/aime25_test.jsonl           problem, answer                  (not shipped: hub)
    math/amc23_test.jsonl            problem, answer (float)          (not shipped: hub)
    math/olympiadbench_test.jsonl.gz question, final_answer (list)    (not shipped: hub)
    code/HumanEval.jsonl.gz          task_id, prompt, test, entry_point
    code/HumanEvalPlus-v0.1.10.jsonl.gz  + canonical_solution, base_input, plus_input, atol
    code/sanitized-mbpp.json         task_id, prompt, test_list, test_imports (test ids 11-510)
    code/MbppPlus-v0.2.0.jsonl.gz    prompt, entry_point, canonical_solution, base_input, plus_input
    code/cruxeval.jsonl.gz           code, input, output, id (CRUXEval: cruxeval_o, cruxeval_i)

LiveCodeBench's test cases are not shipped; ``livecodebench`` loads
``livecodebench/code_generation_lite`` from the Hugging Face hub and needs a network.
"""

from __future__ import annotations

import ast
import gzip
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sage_env import sandbox

MATH_INSTRUCTION = "\n\nPlease reason step by step, and put your final answer within \\boxed{}."
CODE_INSTRUCTION = (
    "Complete the following Python function. Reply with the whole function in one ```python "
    "code block.\n\n"
)
BENCHMARKS = (
    "gsm8k",
    "math500",
    "aime24",
    "aime25",
    "amc23",
    "olympiadbench",
    "humaneval",
    "humaneval_plus",
    "mbpp",
    "mbpp_plus",
    "cruxeval_o",
    "cruxeval_i",
    "exec_heldout",
    "livecodebench",
)


@dataclass
class EvalItem:
    """One benchmark problem, ready to prompt and score.

    Attributes:
        benchmark: Benchmark name.
        item_id: Id within the benchmark.
        domain: ``"math"`` or ``"code"``.
        prompt: User message shown to the model.
        answer: Math: gold answer.
        tests: Code: independent test snippets (see :class:`~sage_env.tasks.Task`).
        test_setup: Code: run before the program's tests (imports, reference solution).
        entry_point: Code: the function under test.
        code_prefix: Code: text a completion continues when it is not a whole function.
        text: The problem text as the benchmark gives it (decontamination compares this).
    """

    benchmark: str
    item_id: str
    domain: str
    prompt: str
    answer: str | None = None
    tests: list[str] = field(default_factory=list)
    test_setup: str = ""
    entry_point: str | None = None
    code_prefix: str = ""
    text: str = ""
    """The benchmark's own problem text, without our instructions (used for decontamination)."""
    program: str = ""
    """Execution benchmarks (domain ``"exec"``, CRUXEval): the function ``f`` asked about;
    ``answer`` is then its output and ``tests`` holds its input."""
    prefix: str = ""
    """Response prefix the completion continues (``exec_heldout``: the execution solver's
    ```` ```output ```` opening, as in training); ``""`` for every other benchmark."""


SHIPPED_DATA = Path(__file__).resolve().parent / "data" / "benchmarks"
"""The benchmark files shipped inside the package (``learners/data/benchmarks``)."""

BENCHMARK_FILES: dict[str, str] = {
    "gsm8k": "math/gsm8k_test.jsonl",
    "math500": "math/math500_test.jsonl",
    "aime24": "math/aime24_test.jsonl",
    "aime25": "math/aime25_test.jsonl",
    "amc23": "math/amc23_test.jsonl",
    "olympiadbench": "math/olympiadbench_test.jsonl.gz",
    "humaneval": "code/HumanEval.jsonl.gz",
    "humaneval_plus": "code/HumanEvalPlus-v0.1.10.jsonl.gz",
    "mbpp": "code/sanitized-mbpp.json",
    "mbpp_plus": "code/MbppPlus-v0.2.0.jsonl.gz",
    "cruxeval_o": "code/cruxeval.jsonl.gz",
    "cruxeval_i": "code/cruxeval.jsonl.gz",
}
"""Each local benchmark's file, relative to the data folder (the layout of ``--data-dir``)."""

SOURCES = ("auto", "local", "hub")
"""Values of ``source``: see the module docstring."""


@dataclass(frozen=True)
class HubSource:
    """Where a benchmark file's rows live on the Hugging Face hub.

    Attributes:
        path: Dataset id (``"openai/gsm8k"``).
        name: Dataset configuration, if it has several.
        split: Split to load.
        revision: Commit or tag (``None``: the hub's default branch at load time).
        rename: ``(hub field, local field)`` pairs, applied when the local field is absent,
            so the rows fit the loader written for the local file.
    """

    path: str
    name: str | None = None
    split: str = "test"
    revision: str | None = None
    rename: tuple[tuple[str, str], ...] = ()


HUB_SOURCES: dict[str, HubSource] = {
    "math/gsm8k_test.jsonl": HubSource("openai/gsm8k", "main"),
    "math/math500_test.jsonl": HubSource("HuggingFaceH4/MATH-500"),
    "math/aime24_test.jsonl": HubSource("HuggingFaceH4/aime_2024", split="train"),
    "math/aime25_test.jsonl": HubSource("math-ai/aime25", rename=(("question", "problem"),)),
    "math/amc23_test.jsonl": HubSource("math-ai/amc23", rename=(("question", "problem"),)),
    "math/olympiadbench_test.jsonl.gz": HubSource(
        "Hothan/OlympiadBench", "OE_TO_maths_en_COMP", split="train"
    ),
    "code/HumanEval.jsonl.gz": HubSource("openai/openai_humaneval"),
    "code/sanitized-mbpp.json": HubSource("google-research-datasets/mbpp", "sanitized"),
    "code/cruxeval.jsonl.gz": HubSource("cruxeval-org/cruxeval"),
}
"""Hub copies of the layout's files, keyed by file. HumanEval+ and MBPP+ have none: the hub
copies do not carry EvalPlus's ``base_input``/``plus_input`` (the package ships both files)."""


def default_data_dir() -> Path:
    """``$SAGE_ENV_DATA`` if set, else the files shipped with the package (:data:`SHIPPED_DATA`)."""
    env = os.environ.get("SAGE_ENV_DATA")
    return Path(env) if env else SHIPPED_DATA


def _read(path: Path) -> list[dict]:
    if not path.exists():
        raise FileNotFoundError(
            f"benchmark file {path} not found; pass --data-dir DIR holding it (layout: "
            "BENCHMARK_FILES in learners/benchmark_data.py; what ships with sage-env: "
            "learners/data/benchmarks/README.md) or load it from the hub (--source hub, "
            'needs pip install "sage-env[hub]" and a network)'
        )
    if path.suffix == ".json":
        return json.loads(path.read_text(encoding="utf-8"))
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def hub_rows(hub: HubSource) -> list[dict]:
    """The rows of a hub dataset split as plain dicts, renamed to the local file's fields.

    Raises:
        RuntimeError: without the ``datasets`` package, or when the load fails (no network
            and no cached copy under ``HF_HUB_OFFLINE=1``, an unknown dataset).
    """
    try:
        from datasets import load_dataset
    except ImportError as exc:
        raise RuntimeError(
            f'loading {hub.path} from the Hugging Face hub needs pip install "sage-env[hub]" '
            "(the datasets package)"
        ) from exc
    try:
        rows = load_dataset(hub.path, hub.name, split=hub.split, revision=hub.revision)
    except Exception as exc:  # network, auth, unknown dataset: one clear message
        raise RuntimeError(
            f"could not load {hub.path} (config {hub.name or 'default'}, split {hub.split}) "
            f"from the Hugging Face hub: {type(exc).__name__}: {exc}"
        ) from exc
    out = []
    for row in rows:
        row = dict(row)
        for src, dst in hub.rename:
            if dst not in row and src in row:
                row[dst] = row.pop(src)
        out.append(row)
    return out


def benchmark_rows(
    file: str, data_dir: str | os.PathLike | None = None, source: str = "auto"
) -> list[dict]:
    """The rows of one benchmark file of the layout, from the data folder or the hub.

    Args:
        file: The file's path in the layout (``"math/gsm8k_test.jsonl"``).
        data_dir: Data folder (default :func:`default_data_dir`).
        source: ``auto`` (the folder, else the hub for a file that is not there), ``local``
            or ``hub``.

    Raises:
        ValueError: on an unknown ``source``, or ``hub`` for a file with no hub copy.
        FileNotFoundError: if the file is not in the folder (and, with ``auto``, the hub
            could not provide it either; the message says both).
        RuntimeError: with ``hub``, when the hub load fails.
    """
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}; choose one of {', '.join(SOURCES)}")
    path = (Path(data_dir) if data_dir is not None else default_data_dir()) / file
    hub = HUB_SOURCES.get(file)
    if source == "hub":
        if hub is None:
            raise ValueError(
                f"{file} has no hub source (HUB_SOURCES in learners/benchmark_data.py); "
                "use --source local"
            )
        return hub_rows(hub)
    if source == "local" or path.exists() or hub is None:
        return _read(path)
    try:
        return hub_rows(hub)
    except RuntimeError as exc:
        raise FileNotFoundError(
            f"benchmark file {file} is not in {path.parent.parent} (sage-env does not ship it: "
            f"learners/data/benchmarks/README.md says why), and the hub fallback failed: {exc}. "
            f"Pass --data-dir DIR holding {file} (layout: BENCHMARK_FILES in "
            "learners/benchmark_data.py), or give the hub a network."
        ) from exc


def gsm8k_gold(answer: str) -> str:
    """The number after ``####`` with thousands separators removed."""
    return answer.split("####")[-1].strip().replace(",", "")


def _math(name: str, rows: list[dict], q: str, a: Callable[[dict], str]) -> list[EvalItem]:
    return [
        EvalItem(
            name,
            str(r.get("id", r.get("unique_id", i))),
            "math",
            r[q] + MATH_INSTRUCTION,
            answer=a(r),
            text=r[q],
        )
        for i, r in enumerate(rows)
    ]


def _olympiad_answer(r: dict) -> str:
    """OlympiadBench's gold: its ``final_answer`` values without ``$``, joined by ``", "``.

    ``final_answer`` is a JSON list in the Qwen2.5-Math copy (``["$2^{1009}$"]``); a copy that
    stores it as a stringified list (``"['$2^{1009}$']"``) or a bare string also works.
    """
    values = r["final_answer"]
    if isinstance(values, str):
        try:
            values = ast.literal_eval(values)
        except (ValueError, SyntaxError):
            pass
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    return ", ".join(_olympiad_value(v) for v in values)


def _olympiad_value(value: object) -> str:
    r"""One OlympiadBench answer as LaTeX: ``$`` delimiters and a closing period removed.

    Some values hold several ``$...$`` spans (``"$69$,$84$"``) or stray ones (``"$221,$8$"``,
    item 2349) and one ends in a period (``"$(-\infty, 0) \cup\{1\}$."``, item 1970).
    """
    return str(value).replace("$", "").strip().rstrip(".").strip()


def _amc_answer(r: dict) -> str:
    value = float(r["answer"])
    return str(int(value)) if value.is_integer() else str(value)


def _tuples(x: object) -> object:
    """Every list inside ``x`` (and ``x`` itself) as a tuple, recursively."""
    return tuple(_tuples(v) for v in x) if isinstance(x, list) else x


def _each(f: Callable[[object], object]) -> Callable[[list], list]:
    return lambda args: [f(a) for a in args]


def _first(f: Callable[[object], object]) -> Callable[[list], list]:
    return lambda args: [f(args[0]), *args[1:]]


def _tuple(x: object) -> tuple:
    return tuple(x)


def _inner_tuples(x: list) -> list:
    return [tuple(v) for v in x]


_MBPP_PLUS_TYPES: dict[int, Callable[[list], list]] = {
    **dict.fromkeys(
        (2, 116, 132, 143, 222, 261, 273, 394, 399, 421, 424, 429, 470, 560, 579, 596, 616, 630)
        + (726, 740, 744, 809),
        _each(_tuple),
    ),
    **dict.fromkeys(
        (63, 64, 70, 94, 120, 237, 272, 299, 400, 409, 417, 438, 473, 614, 780),
        _each(_inner_tuples),
    ),
    **dict.fromkeys((75, 413, 444, 753), _first(_inner_tuples)),
    **dict.fromkeys((106, 750), lambda args: [args[0], tuple(args[1]), *args[2:]]),
    115: _first(lambda xs: [set(v) if isinstance(v, list) and v else {} for v in xs]),
    124: lambda args: [float(args[0]), complex(args[1])],
    **dict.fromkeys((250, 405, 446, 617, 720, 763, 808), _first(_tuple)),
    **dict.fromkeys((259, 401, 445), _each(lambda a: tuple(tuple(v) for v in a))),
    278: _first(lambda xs: tuple(tuple(v) if isinstance(v, list) else v for v in xs)),
    307: _first(_tuple),
    722: _first(lambda d: {k: tuple(v) for k, v in d.items()}),
    252: _first(complex),
    **dict.fromkeys((580, 615, 791), lambda args: list(_tuples(args))),
}
"""MBPP+ tasks whose inputs are not what JSON gives back, and how to restore each input's
argument list. The facts are EvalPlus's (``evalplus/data/mbpp.py``,
``mbpp_deserialize_inputs``, MBPP+ v0.2.0): JSON has no tuple, set or complex number, so
EvalPlus rebuilds them per task before calling the function; so must we (Mbpp/106 appends a
list to a tuple, Mbpp/580 walks nested tuples: fed lists, the canonical solution fails)."""


def mbpp_plus_inputs(task_id: str, inputs: list) -> list:
    """MBPP+ inputs with the Python types EvalPlus gives them (tuples, sets, complex numbers).

    Args:
        task_id: ``"Mbpp/106"``.
        inputs: The task's ``base_input`` or ``plus_input`` as read from JSON: one argument
            list per call.

    Returns:
        The argument lists, with the types restored for the tasks of
        :data:`_MBPP_PLUS_TYPES` (the others unchanged).
    """
    restore = _MBPP_PLUS_TYPES.get(int(str(task_id).rsplit("/", 1)[-1]))
    return [restore(list(inp)) for inp in inputs] if restore else list(inputs)


def input_literal(value: object) -> str:
    """Python source that evaluates to ``value``, keeping its types (unlike JSON).

    Tuples stay tuples, sets sets (``set()`` when empty), complex numbers complex, and
    non-finite floats are written ``float('inf')``, ``float('nan')``; finite floats by
    ``repr`` (which round-trips exactly). Lists, dicts, str, int, bool and None as ``repr``.
    Used to hand HumanEval+/MBPP+ inputs to the sandboxed tests.
    """
    if isinstance(value, bool) or value is None or isinstance(value, (int, str, bytes)):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    if isinstance(value, complex):
        return f"complex({input_literal(value.real)}, {input_literal(value.imag)})"
    if isinstance(value, tuple):
        inner = ", ".join(input_literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(input_literal(v) for v in value) + "]"
    if isinstance(value, (set, frozenset)):
        items = ", ".join(input_literal(v) for v in value)
        body = f"{{{items}}}" if value else "set()"
        return body if isinstance(value, set) else f"frozenset({body if value else ''})"
    if isinstance(value, dict):
        pairs = ", ".join(f"{input_literal(k)}: {input_literal(v)}" for k, v in value.items())
        return "{" + pairs + "}"
    return repr(value)


MBPP_OUTPUT_NOT_NONE_TASKS = ("check_str", "text_match_three", "text_starta_endb")
"""MBPP+ entry points (Mbpp/737, 787, 794) whose reference returns a ``re.Match`` or ``None``.

EvalPlus (``evalplus/eval/_special_oracle.py`` and ``evaluate.py``, ``get_groundtruth``) keeps
only ``out is not None`` of the reference's output for them, and ``unsafe_execute`` compares a
candidate's output ``out`` with that bool as ``out == exp`` when ``out`` is a bool, else as
``exp == (out is not None)``: :func:`plus_tests` writes their tests to the same rule."""

PLUS_MEMORY_MB = 4096
"""EvalPlus's memory limit per process (``EVALPLUS_MAX_MEMORY_BYTES``, default 4 GiB): what
``sage-env eval`` and the self-check give HumanEval+/MBPP+ programs (and the reference)."""


def plus_tests(row: dict, plus_limit: int | None) -> tuple[str, list[str]]:
    """EvalPlus-style tests: the candidate's output on each input against the reference's.

    Each input becomes one test ``assert __sage_plus__(f(*inp), atol)``. The canonical
    solution travels in ``test_setup`` after :data:`sage_env.sandbox.REFERENCE_MARKER`, so the
    sandbox runs it only in a reference process of its own (setup, reference, every test),
    never where the candidate runs; the candidate's outputs leave its process as plain builtin
    values (any other type fails; an ``int``/``list`` subclass is read through its base type,
    so an overridden ``__eq__`` is never called), and the judge, out of the program's reach,
    compares them with the reference's by EvalPlus's type-aware rule
    (:func:`sage_env.sandbox.compare.plus_equal`: exact, else the same type and
    ``np.allclose``-style ``atol`` + ``rtol=1e-07``; ``atol`` 1e-6 for float outputs when the
    task gives none). No name the program binds, builtin it patches or object it returns
    decides the verdict.

    Returns:
        ``(test_setup, tests)`` for :meth:`~sage_env.verifiers.CodeVerifier.verify`.
    """
    entry = row["entry_point"]
    reference = (
        row["prompt"] + row["canonical_solution"]
        if "def " + entry not in (row["canonical_solution"])
        else row["canonical_solution"]
    )
    inputs = list(row["base_input"]) + list(row["plus_input"])[:plus_limit]
    atol = float(row.get("atol") or 0)
    call = f"{entry}(*_inp)"
    if str(row.get("task_id", "")).startswith("Mbpp/") and entry in MBPP_OUTPUT_NOT_NONE_TASKS:
        # EvalPlus's oracle for these tasks: the reference's output becomes ``out is not None``
        # and a candidate's bool output is compared as is, any other one as ``is not None``
        call = f"(lambda _o: _o if type(_o) is bool else _o is not None)({call})"
    tests = [
        f"_inp = {input_literal(inp)}\nassert __sage_plus__({call}, {atol!r})" for inp in inputs
    ]
    return "import json, math, copy" + sandbox.REFERENCE_MARKER + reference, tests


def _prompt_helpers(prompt: str, entry_point: str) -> str:
    """The prompt's imports and functions other than ``entry_point``, as source text."""
    try:
        tree = ast.parse(prompt)
    except (SyntaxError, ValueError):
        return ""
    parts = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) or (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name != entry_point
        ):
            parts.append(ast.get_source_segment(prompt, node) or "")
    return "\n".join(p for p in parts if p)


def _humaneval_tests(row: dict) -> list[str]:
    # The test re-defines the prompt's helpers (HumanEval/32's ``poly``, /38's
    # ``encode_cyclic``, /50's ``encode_shift``) in its own namespace: a program that
    # redefines them (``encode_shift = identity`` with ``decode_shift = identity``) changes
    # its own functions, never the ones the test checks it with.
    helpers = _prompt_helpers(row.get("prompt", ""), row["entry_point"])
    head = f"{helpers}\n" if helpers else ""
    return [f"{head}{row['test']}\ncheck({row['entry_point']})"]


def load_benchmark(
    name: str,
    data_dir: str | os.PathLike | None = None,
    plus_limit: int | None = 100,
    source: str = "auto",
) -> list[EvalItem]:
    """Load one benchmark from the data folder (by default the shipped files) or the hub.

    Args:
        name: One of :data:`BENCHMARKS`.
        data_dir: Data folder (default :func:`default_data_dir`: ``$SAGE_ENV_DATA`` or the
            shipped files).
        plus_limit: HumanEval+/MBPP+: at most this many plus inputs per task (``None``: all).
        source: ``auto``, ``local`` or ``hub`` (:func:`benchmark_rows`).

    Raises:
        ValueError: on an unknown benchmark or source.
        FileNotFoundError: if its file is missing (and the hub could not stand in).
        RuntimeError: for ``livecodebench`` or ``source="hub"`` without the ``datasets``
            package or a network.
    """
    if name == "exec_heldout":  # shipped with sage_env, whatever the data folder
        return exec_heldout()
    if name in BENCHMARK_FILES:
        rows = benchmark_rows(BENCHMARK_FILES[name], data_dir, source)
    if name == "gsm8k":
        return _math(name, rows, "question", lambda r: gsm8k_gold(r["answer"]))
    if name in ("math500", "aime24", "aime25"):
        return _math(name, rows, "problem", lambda r: str(r["answer"]))
    if name == "amc23":
        return _math(name, rows, "problem", _amc_answer)
    if name == "olympiadbench":
        return _math(name, rows, "question", _olympiad_answer)
    if name in ("humaneval", "humaneval_plus"):
        items = []
        for r in rows:
            setup, tests = (
                ("", _humaneval_tests(r)) if name == "humaneval" else plus_tests(r, plus_limit)
            )
            items.append(
                EvalItem(
                    name,
                    r["task_id"],
                    "code",
                    CODE_INSTRUCTION + r["prompt"],
                    tests=tests,
                    test_setup=setup,
                    entry_point=r["entry_point"],
                    code_prefix=r["prompt"],
                    text=r["prompt"],
                )
            )
        return items
    if name == "mbpp":
        rows = [r for r in rows if 11 <= int(r["task_id"]) <= 510]
        items = []
        for r in rows:
            tests = list(r["test_list"])
            entry = _called(tests[0])
            setup = "\n".join(r.get("test_imports") or [])
            items.append(
                EvalItem(
                    name,
                    str(r["task_id"]),
                    "code",
                    f"{r['prompt']}\nYour code should pass this test:\n{tests[0]}"
                    "\n\nReply with the function in one ```python code block.",
                    tests=tests,
                    test_setup=setup,
                    entry_point=entry,
                    text=r["prompt"],
                )
            )
        return items
    if name == "mbpp_plus":
        items = []
        for r in rows:
            r = {
                **r,
                "base_input": mbpp_plus_inputs(r["task_id"], r["base_input"]),
                "plus_input": mbpp_plus_inputs(r["task_id"], r["plus_input"]),
            }
            setup, tests = plus_tests(r, plus_limit)
            items.append(
                EvalItem(
                    name,
                    r["task_id"],
                    "code",
                    r["prompt"].strip().strip('"').strip()
                    + "\n\nReply with the function in one ```python code block.",
                    tests=tests,
                    test_setup=setup,
                    entry_point=r["entry_point"],
                    text=r["prompt"],
                )
            )
        return items
    if name in ("cruxeval_o", "cruxeval_i"):
        return _cruxeval(name, rows)
    if name == "livecodebench":
        if source == "local":
            raise ValueError("livecodebench has no local test cases: use --source auto or hub")
        return _livecodebench()
    raise ValueError(f"unknown benchmark {name!r}; available: {', '.join(BENCHMARKS)}")


def _cruxeval(name: str, rows: list[dict]) -> list[EvalItem]:
    """CRUXEval (Gu et al. 2024, arXiv 2401.03065): O predicts ``f(input)``, I an input.

    The question is the execution-task solver's (:func:`sage_env.exec_tasks.solver_question`,
    deduction for O, abduction for I); scoring is :mod:`sage_env.verifiers.execution`'s.
    """
    from sage_env.exec_tasks import ExecSpec, solver_question

    mode = "deduction" if name == "cruxeval_o" else "abduction"
    return [
        EvalItem(
            name,
            r["id"],
            "exec",
            solver_question(ExecSpec(mode, r["code"], (r["input"],), (r["output"],))),
            answer=r["output"],
            tests=[r["input"]],
            entry_point="f",
            text=r["code"],
            program=r["code"],
        )
        for r in rows
    ]


def exec_heldout() -> list[EvalItem]:
    """The held-out execution tasks (``sage_env/data/exec_heldout.jsonl``), deduction.

    Built once by ``scripts/build_exec_heldout.py`` (fixed seed; outputs from the sandboxed
    executor; programs disjoint from the execution seeds and from CRUXEval). The question is
    the execution solver's (:func:`sage_env.exec_tasks.solver_question`), and the completion
    continues the solver's response prefix (`````output``), as the ``azr`` solver's does in
    training; scored like CRUXEval-O (the output literal's value).
    """
    from importlib import resources

    from sage_env.exec_tasks import SOLVER_PREFIX, ExecSpec, solver_question

    path = resources.files("sage_env") / "data" / "exec_heldout.jsonl"
    items = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        spec = ExecSpec(r["mode"], r["program"], (r["input"],), (r["output"],))
        items.append(
            EvalItem(
                "exec_heldout",
                r["id"],
                "exec",
                solver_question(spec),
                answer=r["output"],
                tests=[r["input"]],
                entry_point="f",
                text=r["program"],
                program=r["program"],
                prefix=SOLVER_PREFIX[r["mode"]],
            )
        )
    return items


def _called(assert_src: str) -> str | None:
    """The function under test in an assert.

    The first non-builtin name called, else the first name called (MBPP 126 names its
    function ``sum``).
    """
    import builtins

    try:
        tree = ast.parse(assert_src)
    except SyntaxError:
        return None
    names = [
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    ]
    return next((n for n in names if not hasattr(builtins, n)), names[0] if names else None)


def _livecodebench() -> list[EvalItem]:  # pragma: no cover - needs a network
    try:
        from datasets import load_dataset
    except ImportError as exc:
        raise RuntimeError(
            "livecodebench needs `pip install datasets` and a network: its "
            "test cases are not shipped locally"
        ) from exc
    try:
        rows = load_dataset(
            "livecodebench/code_generation_lite",
            split="test",
            version_tag="release_v5",
            trust_remote_code=True,
        )
    except Exception as exc:
        raise RuntimeError(f"could not load livecodebench from the hub: {exc}") from exc
    items = []
    for r in rows:
        tests = []
        for case in json.loads(r["public_test_cases"]):
            if case.get("testtype") == "stdin":
                tests.append(
                    f"import subprocess, sys\n_out = subprocess.run([sys.executable, "
                    f"'solution.py'], input={case['input']!r}, capture_output=True, "
                    f"text=True, timeout=10).stdout\n"
                    f"assert _out.split() == {case['output']!r}.split()"
                )
        if tests:
            items.append(
                EvalItem(
                    "livecodebench",
                    r["question_id"],
                    "code",
                    r["question_content"] + "\n\nWrite a Python program that "
                    "reads stdin and writes stdout, in one ```python block.",
                    tests=tests,
                )
            )
    return items

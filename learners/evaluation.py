"""Benchmark evaluation: loaders, answer extraction, scoring and unbiased pass@k.

``sage-env eval --model PATH_OR_ID --benchmarks gsm8k,math500 --samples 4 --limit 50`` samples
``samples`` completions per item, scores them with the project's verifiers
(:class:`~sage_env.verifiers.MathVerifier`, :class:`~sage_env.verifiers.CodeVerifier`) and
reports pass@1 and pass@k with the unbiased estimator of Chen et al. 2021 (arXiv 2107.03374).

Local data layout (``--data-dir``, default ``$SAGE_ENV_DATA`` or ``../shared/data``)::

    math/gsm8k_test.jsonl            question, answer ("... #### 18")
    math/math500_test.jsonl          problem, answer
    math/aime24_test.jsonl           problem, answer
    math/aime25_test.jsonl           problem, answer
    math/amc23_test.jsonl            problem, answer (float)
    math/olympiadbench_test.jsonl.gz question, final_answer (list of LaTeX strings)
    code/HumanEval.jsonl.gz          task_id, prompt, test, entry_point
    code/HumanEvalPlus-v0.1.10.jsonl.gz  + canonical_solution, base_input, plus_input, atol
    code/sanitized-mbpp.json         task_id, prompt, test_list, test_imports (test ids 11-510)
    code/MbppPlus-v0.2.0.jsonl.gz    prompt, entry_point, canonical_solution, base_input, plus_input

LiveCodeBench's test cases are not shipped locally; ``livecodebench`` loads
``livecodebench/code_generation_lite`` from the Hugging Face hub and needs a network.
"""

from __future__ import annotations

import ast
import gzip
import json
import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from learners.rollout import action_text
from sage_env import sandbox
from sage_env.verifiers import CodeVerifier, MathVerifier, extract_code

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


def default_data_dir() -> Path:
    """``$SAGE_ENV_DATA`` if set, else ``../shared/data`` next to the working directory."""
    return Path(os.environ.get("SAGE_ENV_DATA", Path.cwd().parent / "shared" / "data"))


def _read(path: Path) -> list[dict]:
    if not path.exists():
        raise FileNotFoundError(
            f"benchmark file {path} not found; pass --data-dir (layout: see learners/evaluation.py)"
        )
    if path.suffix == ".json":
        return json.loads(path.read_text(encoding="utf-8"))
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


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
    tests = [
        f"_inp = {input_literal(inp)}\nassert __sage_plus__({entry}(*_inp), {atol!r})"
        for inp in inputs
    ]
    return "import json, math, copy" + sandbox.REFERENCE_MARKER + reference, tests


def _humaneval_tests(row: dict) -> list[str]:
    return [f"{row['test']}\ncheck({row['entry_point']})"]


def load_benchmark(
    name: str, data_dir: str | os.PathLike | None = None, plus_limit: int | None = 100
) -> list[EvalItem]:
    """Load one benchmark from the local data folder.

    Args:
        name: One of :data:`BENCHMARKS`.
        data_dir: Data folder (default :func:`default_data_dir`).
        plus_limit: HumanEval+/MBPP+: at most this many plus inputs per task (``None``: all).

    Raises:
        ValueError: on an unknown benchmark.
        FileNotFoundError: if its file is missing.
        RuntimeError: for ``livecodebench`` without the ``datasets`` package or a network.
    """
    d = Path(data_dir) if data_dir is not None else default_data_dir()
    if name == "gsm8k":
        return _math(
            name, _read(d / "math/gsm8k_test.jsonl"), "question", lambda r: gsm8k_gold(r["answer"])
        )
    if name in ("math500", "aime24", "aime25"):
        return _math(
            name, _read(d / f"math/{name}_test.jsonl"), "problem", lambda r: str(r["answer"])
        )
    if name == "amc23":
        return _math(name, _read(d / "math/amc23_test.jsonl"), "problem", _amc_answer)
    if name == "olympiadbench":
        return _math(
            name, _read(d / "math/olympiadbench_test.jsonl.gz"), "question", _olympiad_answer
        )
    if name in ("humaneval", "humaneval_plus"):
        rows = _read(
            d
            / (
                "code/HumanEval.jsonl.gz"
                if name == "humaneval"
                else "code/HumanEvalPlus-v0.1.10.jsonl.gz"
            )
        )
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
        rows = [r for r in _read(d / "code/sanitized-mbpp.json") if 11 <= int(r["task_id"]) <= 510]
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
        for r in _read(d / "code/MbppPlus-v0.2.0.jsonl.gz"):
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
    if name == "livecodebench":
        return _livecodebench()
    raise ValueError(f"unknown benchmark {name!r}; available: {', '.join(BENCHMARKS)}")


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


# ------------------------------------------------------------------------ scoring
def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021, arXiv 2107.03374, Eq. 1): ``1 - C(n-c, k) / C(n, k)``.

    Computed as ``1 - prod_{i=n-c+1}^{n} (1 - k / i)`` for numerical stability.

    Args:
        n: Samples drawn for the item.
        c: Correct samples among them.
        k: The k of pass@k (``k <= n``).

    Raises:
        ValueError: if ``k > n`` or ``c`` is outside [0, n].
    """
    if not 0 <= c <= n or k > n or k < 1:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def program_for(item: EvalItem, completion: str) -> str | None:
    """The program to test for a code completion.

    The last fenced block (or the whole text when it parses); if it does not define the entry
    point, the completion is treated as a continuation of the item's prompt. Imports of the
    prompt are kept in front.
    """
    code = extract_code(completion, item.entry_point)
    if code is not None and (item.entry_point is None or f"def {item.entry_point}" in code):
        imports = "\n".join(
            line for line in item.code_prefix.splitlines() if line.startswith(("import ", "from "))
        )
        return f"{imports}\n{code}" if imports else code
    if item.code_prefix:  # a continuation of the prompt: a fenced body, or the raw text
        body = code if code is not None and "```" in completion else completion
        return item.code_prefix + body
    return code


def score(
    item: EvalItem, completion: str, math_verifier: MathVerifier, code_verifier: CodeVerifier
) -> tuple[bool, dict]:
    """Score one completion: ``(correct, record)``; never raises on model output."""
    if item.domain == "math":
        res = math_verifier.verify(completion, item.answer or "")
        return res.score >= 1.0, {"status": res.status, "reason": res.reason}
    program = program_for(item, completion)
    if program is None:
        return False, {"status": "invalid", "reason": "no code found"}
    res = code_verifier.verify(program, item.tests, item.test_setup)
    return res.score >= 1.0, {
        "status": res.status,
        "reason": res.reason,
        "passed": res.passed,
        "total": res.total,
    }


@dataclass
class BenchmarkResult:
    """Scores of one benchmark: ``pass_at`` maps k to the mean unbiased pass@k."""

    benchmark: str
    items: int
    samples: int
    pass_at: dict[int, float]
    records: list[dict] = field(default_factory=list)
    contaminated: bool | None = None


def summarise(
    benchmark: str, correct: list[list[bool]], records: list[dict], ks: tuple[int, ...] = (1, 5, 10)
) -> BenchmarkResult:
    """Mean pass@k over items for every k <= samples (``correct[i][j]``: item i, sample j)."""
    n = len(correct[0]) if correct else 0
    pass_at = (
        {k: sum(pass_at_k(n, sum(c), k) for c in correct) / len(correct) for k in ks if 1 <= k <= n}
        if correct
        else {}
    )
    return BenchmarkResult(benchmark, len(correct), n, pass_at, records)


def markdown_table(results: list[BenchmarkResult]) -> str:
    """A markdown table: benchmark, items, samples, pass@k columns, contamination flag."""
    ks = sorted({k for r in results for k in r.pass_at})
    head = "| benchmark | items | samples | " + " | ".join(f"pass@{k}" for k in ks) + " | note |"
    lines = [head, "|" + "---|" * (4 + len(ks))]
    for r in results:
        cells = [f"{100 * r.pass_at[k]:.1f}" if k in r.pass_at else "-" for k in ks]
        note = "overlaps the seed set" if r.contaminated else ""
        lines.append(
            f"| {r.benchmark} | {r.items} | {r.samples} | " + " | ".join(cells) + f" | {note} |"
        )
    return "\n".join(lines)


def result_dict(r: BenchmarkResult) -> dict:
    """JSON-safe summary (without per-item records)."""
    d = asdict(r)
    d.pop("records")
    d["pass_at"] = {f"pass@{k}": v for k, v in r.pass_at.items()}
    return d


@dataclass
class EvalConfig:
    """Options of ``sage-env eval``."""

    model: str = "smollm2-135m-instruct"
    """Model alias, hub id or local path (a training checkpoint's ``model/`` folder works)."""
    benchmarks: str = "gsm8k,math500"
    """Comma-separated names from: gsm8k, math500, aime24, aime25, amc23, olympiadbench,
    humaneval, humaneval_plus, mbpp, mbpp_plus, livecodebench (hub only)."""
    samples: int = 1
    """Completions per item (n). 1 = greedy decoding; more = sampling at ``temperature``."""
    limit: int | None = None
    """At most this many items per benchmark (the first ones, in file order)."""
    temperature: float = 0.6
    """Sampling temperature when ``samples > 1``."""
    max_new_tokens: int = 512
    """Completion budget, tokens."""
    batch_size: int = 16
    """Sequences per generate call."""
    plus_limit: int | None = 100
    """HumanEval+/MBPP+: plus inputs per task (None: all, as EvalPlus does)."""
    data_dir: str | None = None
    """Local benchmark folder (default ``$SAGE_ENV_DATA`` or ``../shared/data``)."""
    out: str = "runs/eval"
    """Output folder: results.json, results.md, items/<benchmark>.jsonl."""
    device: str = "auto"
    """``auto``, ``cpu``, ``cuda`` ..."""
    seed: int = 0
    """Sampling seed."""
    decontam_ngram: int = 13
    """n of the word n-grams used to flag benchmarks that overlap the seed set."""


def run_eval(cfg: EvalConfig, policy=None, progress: bool = True) -> list[BenchmarkResult]:
    """Evaluate ``cfg.model`` (or a given policy) and write the results to ``cfg.out``.

    Raises:
        ValueError: on an unknown benchmark name.
        FileNotFoundError: if a benchmark file is missing.
    """
    from tqdm.auto import tqdm

    from learners.decontam import overlap_report
    from learners.policy import HFPolicy, SamplingConfig

    names = [b.strip() for b in cfg.benchmarks.split(",") if b.strip()]
    unknown = [b for b in names if b not in BENCHMARKS]
    if unknown:
        raise ValueError(f"unknown benchmark(s) {unknown}; available: {', '.join(BENCHMARKS)}")
    suites = {b: load_benchmark(b, cfg.data_dir, cfg.plus_limit)[: cfg.limit] for b in names}
    policy = policy or HFPolicy(cfg.model, device=cfg.device, seed=cfg.seed)
    sampling = SamplingConfig(
        max_new_tokens=cfg.max_new_tokens,
        temperature=cfg.temperature,
        do_sample=cfg.samples > 1,
        batch_size=cfg.batch_size,
        max_prompt_tokens=2048,
    )
    out = Path(cfg.out)
    (out / "items").mkdir(parents=True, exist_ok=True)
    results = []
    with MathVerifier() as mv:
        cv = CodeVerifier()
        for name, items in suites.items():
            correct, records = [], []
            bar = tqdm(items, desc=name, unit="item", disable=not progress)
            for start in range(0, len(items), max(1, cfg.batch_size // cfg.samples)):
                chunk = items[start : start + max(1, cfg.batch_size // cfg.samples)]
                obs = [
                    {"system": "You are a helpful assistant.", "user": it.prompt}
                    for it in chunk
                    for _ in range(cfg.samples)
                ]
                comps = policy.generate(obs, sampling)
                for i, it in enumerate(chunk):
                    outs = comps[i * cfg.samples : (i + 1) * cfg.samples]
                    verdicts = [score(it, action_text(c), mv, cv) for c in outs]
                    correct.append([v[0] for v in verdicts])
                    records.append(
                        {
                            "item_id": it.item_id,
                            "answer": it.answer,
                            "completions": [action_text(c) for c in outs],
                            "correct": [v[0] for v in verdicts],
                            "verdicts": [v[1] for v in verdicts],
                        }
                    )
                bar.update(len(chunk))
            bar.close()
            result = summarise(name, correct, records)
            result.contaminated = overlap_report(items, n=cfg.decontam_ngram).contaminated
            with open(out / "items" / f"{name}.jsonl", "w", encoding="utf-8") as fh:
                for rec in records:
                    fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
            results.append(result)
    (out / "results.json").write_text(
        json.dumps(
            {
                "model": cfg.model,
                "config": asdict(cfg),
                "results": [result_dict(r) for r in results],
            },
            indent=2,
        )
    )
    (out / "results.md").write_text(markdown_table(results) + "\n")
    return results


def validation_accuracy(
    policy,
    tasks: list,
    math_verifier: MathVerifier,
    max_new_tokens: int = 256,
    batch_size: int = 16,
) -> float:
    """Greedy accuracy of ``policy`` on math ``tasks`` (e.g. :func:`sage_env.load_validation`).

    Each task is prompted as the solver role sees it and scored with ``math_verifier``.

    Returns:
        Share of tasks answered correctly, in [0, 1] (0 for an empty list).
    """
    from learners.policy import SamplingConfig
    from sage_env import prompts

    if not tasks:
        return 0.0
    sampling = SamplingConfig(max_new_tokens=max_new_tokens, do_sample=False, batch_size=batch_size)
    comps = policy.generate([prompts.solver(t) for t in tasks], sampling)
    scores = [
        math_verifier.verify(action_text(c), t.answer or "").score for c, t in zip(comps, tasks)
    ]
    return sum(scores) / len(scores)


def critic_replies(
    policy, items: list, max_new_tokens: int = 48, temperature: float = 0.7, seed: int = 0
) -> list[str]:
    """The policy's critic replies (prefix + completion) to critic-probe items.

    Sampled at ``temperature`` as in training, from a generator reseeded with ``seed`` and
    restored afterwards, so the probe neither depends on nor disturbs the run's sampling.

    Args:
        policy: An :class:`~learners.policy.HFPolicy` (or anything with ``generate``).
        items: :class:`sage_env.critic_probe.ProbeItem` list.
        max_new_tokens: Reply budget.
        temperature: Sampling temperature.
        seed: Seed of the probe's sampling.
    """
    import torch

    from learners.policy import SamplingConfig

    if not items:
        return []
    gen = getattr(policy, "generator", None)
    saved = gen.get_state() if gen is not None else None
    cpu_rng = torch.get_rng_state()
    if gen is not None:
        gen.manual_seed(seed)
    try:
        sampling = SamplingConfig(max_new_tokens=max_new_tokens, temperature=temperature)
        comps = policy.generate([it.observation for it in items], sampling)
    finally:
        if gen is not None:
            gen.set_state(saved)
        torch.set_rng_state(cpu_rng)
    return [action_text(c) for c in comps]

"""Build the bundled 500-task seed set ``sage_env/data/seeds.jsonl``.

The seeds are drawn from four public training sets kept in the shared data folder (see its
``README.md`` for provenance and ``sage_env/data/ATTRIBUTION.md`` for licences):

========= ============================== ===== ===================================================
source    file                           drawn candidate pool
========= ============================== ===== ===================================================
math      math/math_train.jsonl.gz         156 MATH train (7500); gold = last ``\\boxed{}``
gsm8k     math/gsm8k_train.jsonl.gz        148 GSM8K train (7473); gold = text after ``####``
humaneval code/HumanEval.jsonl.gz           87 HumanEval (164); tests split from ``check()``
mbpp      code/mbpp.jsonl                  109 MBPP train split only (task_ids 601-974)
========= ============================== ===== ===================================================

Every drawn seed is validated, and a candidate that fails validation is never drawn:

* math / gsm8k: the gold answer is non-empty and ``math_verify.parse("$" + answer + "$")``
  returns a non-empty result;
* humaneval / mbpp: the reference solution passes every test snippet. Each snippet is run in a
  subprocess (with a timeout) after ``test_setup`` and the solution, in a fresh namespace, with
  ``PYTHONHASHSEED=0``. ``--audit`` repeats this under several hash seeds to catch tests that
  depend on the iteration order of string sets/dicts (none in the current pool).

Candidates whose raw record cannot be turned into a task at all (no boxed answer, no parsable
entry point) are dropped while loading.

Drawing is reproducible byte for byte: each source's candidates are sorted by their natural key,
shuffled with ``random.Random(f"{seed}:{source}")`` and the first ``n`` candidates that pass
validation are kept (then re-sorted into source order). That is a uniform draw of ``n`` from the
valid candidates, but it only validates the candidates it needs. ``--audit`` validates the whole
pool instead and reports every candidate that would be excluded.

Usage::

    python scripts/build_seeds.py --data-dir RAW_DATA [--out sage_env/data/seeds.jsonl]
"""

from __future__ import annotations

import argparse
import ast
import builtins
import functools
import gzip
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from sage_env.tasks.task import SEED_SOURCES, Task, write_jsonl  # noqa: E402

DEFAULT_DATA_DIR = Path(os.environ["SAGE_ENV_DATA"]) if os.environ.get("SAGE_ENV_DATA") else None
"""``$SAGE_ENV_DATA`` (the raw training files are not shipped); ``--data-dir`` otherwise."""
DEFAULT_OUT = REPO_ROOT / "sage_env" / "data" / "seeds.jsonl"
SEED = 2603
COUNTS = {"math": 156, "gsm8k": 148, "humaneval": 87, "mbpp": 109}
SOURCE_FILES = {
    "math": "math/math_train.jsonl.gz",
    "gsm8k": "math/gsm8k_train.jsonl.gz",
    "humaneval": "code/HumanEval.jsonl.gz",
    "mbpp": "code/mbpp.jsonl",
}
MBPP_TRAIN_IDS = range(601, 975)
CODE_TIMEOUT_S = 60.0
HASH_SEEDS = ("0",)
AUDIT_HASH_SEEDS = ("0", "1", "2", "3")
MATH_PARSE_TIMEOUT_S = 20

Validator = Callable[[Task], str | None]


@dataclass
class Pool:
    """The candidate tasks of one source, in their natural (sorted) order.

    Attributes:
        source: One of :data:`sage_env.tasks.task.SEED_SOURCES`.
        candidates: Tasks built from the raw records, sorted by the source's natural key.
        skipped: ``(record id, reason)`` for raw records that could not be turned into a task.
    """

    source: str
    candidates: list[Task]
    skipped: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Draw:
    """The result of drawing from a :class:`Pool`.

    Attributes:
        chosen: The drawn tasks, all of which passed validation, in source order.
        rejected: ``(task_id, reason)`` for candidates that were validated and failed.
        validated: How many candidates were validated.
    """

    chosen: list[Task]
    rejected: list[tuple[str, str]]
    validated: int


# --------------------------------------------------------------------------- raw-data helpers


def read_records(path: Path) -> Iterator[dict]:
    """Yield the JSON records of a ``.jsonl`` or ``.jsonl.gz`` file."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def lf(text: str) -> str:
    """Normalise CRLF / CR line endings to LF."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


_BOX_RE = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")


def extract_boxed(text: str) -> str | None:
    """Return the content of the last ``\\boxed{...}`` / ``\\fbox{...}`` in ``text``.

    Braces are matched with a balanced scan in which escaped characters (``\\{``, ``\\}``, ...)
    are literal. The brace-less form ``\\boxed 2`` (content up to the next ``$`` or line end)
    and whitespace before the brace (``\\boxed {17}``) are handled as well.

    Returns:
        The stripped content of the last box, or ``None`` if there is no box, the last box is
        unbalanced, or it is empty.
    """
    matches = list(_BOX_RE.finditer(text))
    if not matches:
        return None
    pos = matches[-1].end()
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    if pos < len(text) and text[pos] == "{":
        depth, start = 0, pos + 1
        while pos < len(text):
            char = text[pos]
            if char == "\\":
                pos += 2
                continue
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    return text[start:pos].strip() or None
            pos += 1
        return None
    match = re.match(r"[^$\n]*", text[pos:])
    content = match.group(0).strip() if match else ""
    return content or None


_THOUSANDS_RE = re.compile(r"(?<=\d),(?=\d)")


def gsm8k_gold(answer: str) -> str:
    """Return the GSM8K gold answer: the text after ``####``, stripped, with digit-group
    commas removed (``"1,000"`` -> ``"1000"``)."""
    return _THOUSANDS_RE.sub("", answer.split("####")[-1].strip())


def _parse(source: str) -> ast.Module:
    """``ast.parse`` without the warnings the raw data triggers (invalid escape sequences)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(source)


def _segment(source: str, node: ast.AST) -> str:
    """Return the dedented source text of ``node``."""
    text = ast.get_source_segment(source, node, padded=True)
    if text is None:  # pragma: no cover - only for synthetic ASTs
        return ast.unparse(node)
    return textwrap.dedent(text).strip()


def _is_noop(stmt: ast.stmt) -> bool:
    """True for statements that do nothing in a test body: ``pass``, docstrings, bare names."""
    if isinstance(stmt, ast.Pass):
        return True
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, (ast.Constant, ast.Name))


def _mentions(node: ast.AST, name: str) -> bool:
    """True if ``node`` reads the variable ``name`` anywhere."""
    return any(isinstance(sub, ast.Name) and sub.id == name for sub in ast.walk(node))


def split_humaneval_test(test: str, entry_point: str) -> tuple[list[str], str]:
    """Split a HumanEval ``test`` module into independent snippets and setup code.

    If every statement of ``check(candidate)`` is an ``assert`` (ignoring no-ops and imports),
    each assert that uses ``candidate`` becomes its own snippet
    ``candidate = <entry_point>\\n<assert>``; asserts that never use ``candidate`` (such as
    ``assert True``) are vacuous and dropped. The imports in ``check`` and the module-level code
    of the test other than ``check`` (``METADATA``, imports, helpers) become the setup code.
    Otherwise the whole test becomes one snippet ``<test>\\ncheck(<entry_point>)`` with no setup.

    Returns:
        ``(snippets, test_setup)``.

    Raises:
        ValueError: if the module has no ``check`` function.
    """
    module = _parse(test)
    checks = [s for s in module.body if isinstance(s, ast.FunctionDef) and s.name == "check"]
    if len(checks) != 1:
        raise ValueError("test has no unique check() function")
    check = checks[0]
    imports = [s for s in check.body if isinstance(s, (ast.Import, ast.ImportFrom))]
    asserts = [s for s in check.body if isinstance(s, ast.Assert)]
    others = [s for s in check.body if s not in imports and s not in asserts and not _is_noop(s)]
    useful = [s for s in asserts if _mentions(s, "candidate")]
    if others or not useful:
        return [f"{test.strip()}\n\ncheck({entry_point})"], ""
    setup = [_segment(test, s) for s in module.body if s is not check]
    setup += [_segment(test, s) for s in imports]
    snippets = [f"candidate = {entry_point}\n{_segment(test, s)}" for s in useful]
    return snippets, "\n".join(setup) + ("\n" if setup else "")


def mbpp_entry_point(first_test: str, code: str) -> str | None:
    """Return the name of the function a MBPP test calls.

    Prefers the first called name that the reference ``code`` defines at top level, then the
    first called name that is not a builtin. ``None`` if neither exists or the test does not
    parse.
    """
    try:
        test_tree, code_tree = _parse(first_test), _parse(code)
    except SyntaxError:
        return None
    called = [
        node.func.id
        for node in ast.walk(test_tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    ]
    defined = {
        node.name
        for node in code_tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    for name in called:
        if name in defined:
            return name
    for name in called:
        if not hasattr(builtins, name):
            return name
    return None


# --------------------------------------------------------------------------------- loaders


def load_math(path: Path) -> Pool:
    """Build MATH train candidates, sorted by (subject, problem number)."""

    def key(record: dict) -> tuple[str, int]:
        _, subject, name = record["unique_id"].split("/")
        return subject, int(name.removesuffix(".json"))

    pool = Pool("math", [])
    for record in sorted(read_records(path), key=key):
        uid = record["unique_id"]
        answer = extract_boxed(record["solution"])
        if answer is None:
            pool.skipped.append((uid, "no non-empty boxed answer in solution"))
            continue
        pool.candidates.append(
            Task(
                task_id="math/" + uid.removesuffix(".json"),
                domain="math",
                prompt=record["problem"],
                answer=answer,
                source="math",
                reference_solution=record["solution"],
                meta={"unique_id": uid, "level": record["level"], "type": record["type"]},
            )
        )
    return pool


def load_gsm8k(path: Path) -> Pool:
    """Build GSM8K train candidates in file order; the id is the 0-based line index."""
    pool = Pool("gsm8k", [])
    for index, record in enumerate(read_records(path)):
        if "####" not in record["answer"]:
            pool.skipped.append((str(index), "no '####' in answer"))
            continue
        pool.candidates.append(
            Task(
                task_id=f"gsm8k/train/{index}",
                domain="math",
                prompt=record["question"],
                answer=gsm8k_gold(record["answer"]),
                source="gsm8k",
                reference_solution=record["answer"],
                meta={"index": index},
            )
        )
    return pool


def load_humaneval(path: Path) -> Pool:
    """Build HumanEval candidates sorted by problem number."""
    pool = Pool("humaneval", [])
    records = sorted(read_records(path), key=lambda r: int(r["task_id"].split("/")[1]))
    for record in records:
        number = int(record["task_id"].split("/")[1])
        try:
            tests, setup = split_humaneval_test(record["test"], record["entry_point"])
        except (SyntaxError, ValueError) as exc:
            pool.skipped.append((record["task_id"], f"test not splittable: {exc}"))
            continue
        pool.candidates.append(
            Task(
                task_id=f"humaneval/{number}",
                domain="code",
                prompt=record["prompt"],
                tests=tests,
                entry_point=record["entry_point"],
                test_setup=setup,
                source="humaneval",
                reference_solution=record["prompt"] + record["canonical_solution"],
                meta={"original_task_id": record["task_id"], "index": number},
            )
        )
    return pool


def load_mbpp(path: Path) -> Pool:
    """Build MBPP candidates from the train split (task_ids 601-974), sorted by task_id."""
    pool = Pool("mbpp", [])
    records = [r for r in read_records(path) if r["task_id"] in MBPP_TRAIN_IDS]
    for record in sorted(records, key=lambda r: r["task_id"]):
        tests = [lf(t).strip() for t in record["test_list"]]
        code = lf(record["code"])
        entry_point = mbpp_entry_point(tests[0], code) if tests else None
        if entry_point is None:
            pool.skipped.append((str(record["task_id"]), "no entry point in first test"))
            continue
        pool.candidates.append(
            Task(
                task_id=f"mbpp/{record['task_id']}",
                domain="code",
                prompt=f"{lf(record['text']).strip()}\nYour code should pass these tests:\n"
                f"{tests[0]}",
                tests=tests,
                entry_point=entry_point,
                test_setup=lf(record["test_setup_code"]),
                source="mbpp",
                reference_solution=code,
                meta={"original_task_id": record["task_id"], "split": "train"},
            )
        )
    return pool


LOADERS: dict[str, Callable[[Path], Pool]] = {
    "math": load_math,
    "gsm8k": load_gsm8k,
    "humaneval": load_humaneval,
    "mbpp": load_mbpp,
}


# ------------------------------------------------------------------------------ validation


def validate_math(task: Task) -> str | None:
    """Return ``None`` if the gold answer is non-empty and math_verify parses it, else why not."""
    from math_verify import parse

    if not task.answer or not task.answer.strip():
        return "empty gold answer"
    if not parse(f"${task.answer}$", parsing_timeout=MATH_PARSE_TIMEOUT_S):
        return f"math_verify cannot parse gold {task.answer!r}"
    return None


_DRIVER = r"""
import contextlib, io, json, sys
job = json.load(sys.stdin)
failures = []
for index, snippet in enumerate(job["tests"]):
    namespace = {"__name__": "__sage_seed__"}
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(job["setup"], "<test_setup>", "exec"), namespace)
            exec(compile(job["program"], "<program>", "exec"), namespace)
            exec(compile(snippet, f"<test {index}>", "exec"), namespace)
    except BaseException as exc:
        failures.append(f"test {index}: {type(exc).__name__}: {exc}"[:300])
with open(job["result"], "w", encoding="utf-8") as fh:
    json.dump(failures, fh)
"""


def run_code_tests(
    program: str,
    tests: list[str],
    setup: str = "",
    hash_seed: str = "0",
    timeout: float = CODE_TIMEOUT_S,
) -> list[str]:
    """Run each test snippet against ``program`` in a subprocess and return the failures.

    Every snippet runs in a fresh namespace after ``setup`` and ``program`` (stdout discarded),
    in a throw-away working directory, with ``PYTHONHASHSEED=hash_seed``.

    Returns:
        One message per failing snippet; ``["timeout ..."]`` / ``["crash ..."]`` if the whole
        run timed out or died. An empty list means every snippet passed.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONHASHSEED"] = hash_seed
    with tempfile.TemporaryDirectory(prefix="sage-seed-") as workdir:
        result = Path(workdir) / "result.json"
        job = {"program": program, "tests": tests, "setup": setup, "result": str(result)}
        try:
            proc = subprocess.run(
                [sys.executable, "-s", "-c", _DRIVER],
                input=json.dumps(job),
                cwd=workdir,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return [f"timeout after {timeout:g}s"]
        if not result.exists():
            return [f"crash (exit {proc.returncode}): {proc.stderr.strip()[-300:]}"]
        return json.loads(result.read_text(encoding="utf-8"))


def validate_code(task: Task, hash_seeds: tuple[str, ...] = HASH_SEEDS) -> str | None:
    """Return ``None`` if the reference solution passes every test snippet under each
    ``PYTHONHASHSEED`` in ``hash_seeds``, else the first failure."""
    if not task.tests:
        return "no tests"
    if not task.reference_solution:
        return "no reference solution"
    for hash_seed in hash_seeds:
        failures = run_code_tests(
            task.reference_solution, task.tests, task.test_setup, hash_seed=hash_seed
        )
        if failures:
            return f"reference solution fails (PYTHONHASHSEED={hash_seed}): {failures[0]}"
    return None


VALIDATORS: dict[str, Validator] = {
    "math": validate_math,
    "gsm8k": validate_math,
    "humaneval": validate_code,
    "mbpp": validate_code,
}


# --------------------------------------------------------------------------------- drawing


def draw(pool: Pool, n: int, seed: int, validate: Validator, workers: int = 1) -> Draw:
    """Draw ``n`` valid tasks from ``pool`` reproducibly.

    The candidates are shuffled with ``random.Random(f"{seed}:{pool.source}")`` and validated
    in that order, in batches of exactly the number still missing (in parallel when
    ``workers > 1``), until ``n`` have passed; so the result is the first ``n`` valid
    candidates of the shuffle regardless of ``workers``.

    Raises:
        RuntimeError: if the pool has fewer than ``n`` valid candidates.
    """
    order = list(pool.candidates)
    random.Random(f"{seed}:{pool.source}").shuffle(order)
    chosen: list[Task] = []
    rejected: list[tuple[str, str]] = []
    pos = 0
    with ThreadPoolExecutor(max_workers=max(1, workers)) as executor:
        while len(chosen) < n and pos < len(order):
            batch = order[pos : pos + n - len(chosen)]
            pos += len(batch)
            results = executor.map(validate, batch) if workers > 1 else map(validate, batch)
            for task, reason in zip(batch, results, strict=True):
                if reason is None:
                    chosen.append(task)
                else:
                    rejected.append((task.task_id, reason))
    if len(chosen) < n:
        raise RuntimeError(f"{pool.source}: only {len(chosen)} valid candidates, need {n}")
    rank = {task.task_id: i for i, task in enumerate(pool.candidates)}
    chosen.sort(key=lambda task: rank[task.task_id])
    return Draw(chosen, rejected, pos)


def default_workers() -> int:
    """Number of parallel code-validation subprocesses: the CPU count, at most 8."""
    return max(1, min(8, os.cpu_count() or 1))


def build_seeds(
    data_dir: str | os.PathLike = DEFAULT_DATA_DIR,
    seed: int = SEED,
    workers: int | None = None,
    log: Callable[[str], None] | None = None,
) -> list[Task]:
    """Build the seed tasks: :data:`COUNTS` per source, grouped in :data:`SEED_SOURCES` order.

    Args:
        data_dir: The shared data folder holding the raw files in :data:`SOURCE_FILES`.
        seed: Draw seed.
        workers: Parallel subprocesses for code validation (default :func:`default_workers`).
            The result does not depend on it.
        log: Optional callback for progress / exclusion messages.
    """
    data_dir = Path(data_dir)
    workers = default_workers() if workers is None else workers
    tasks: list[Task] = []
    for source in SEED_SOURCES:
        pool = LOADERS[source](data_dir / SOURCE_FILES[source])
        parallel = workers if source in ("humaneval", "mbpp") else 1
        result = draw(pool, COUNTS[source], seed, VALIDATORS[source], workers=parallel)
        tasks.extend(result.chosen)
        if log:
            log(
                f"{source}: {len(pool.candidates)} candidates ({len(pool.skipped)} raw records "
                f"skipped), validated {result.validated}, rejected {len(result.rejected)}, "
                f"drew {len(result.chosen)}"
            )
            for task_id, reason in result.rejected:
                log(f"  rejected {task_id}: {reason}")
    return tasks


VALIDATION_COUNTS = {"math": 100, "gsm8k": 100}
"""Held-out validation tasks per source (never among the seeds)."""
DEFAULT_VALIDATION_OUT = DEFAULT_OUT.parent / "validation.jsonl"


def build_validation(
    data_dir: str | os.PathLike = DEFAULT_DATA_DIR,
    seeds: list[Task] | None = None,
    seed: int = SEED,
) -> list[Task]:
    """Draw a held-out math validation split from the same training files as the seeds.

    Tasks already in ``seeds`` are excluded; the draw uses its own RNG stream
    (``f"{seed}:validation:{source}"``), so it is reproducible and independent of the seeds'.
    Used by training for the validation curve and early stopping (the paper's Fig. 3).
    """
    data_dir = Path(data_dir)
    taken = {t.task_id for t in (seeds or [])}
    tasks: list[Task] = []
    for source, n in VALIDATION_COUNTS.items():
        pool = LOADERS[source](data_dir / SOURCE_FILES[source])
        pool = Pool(pool.source, [t for t in pool.candidates if t.task_id not in taken])
        result = draw(pool, n, f"{seed}:validation", VALIDATORS[source])
        tasks.extend(result.chosen)
    return tasks


def audit(data_dir: str | os.PathLike, workers: int | None = None) -> dict[str, list]:
    """Validate every candidate of every source and return the exclusions.

    Code candidates are run under each of :data:`AUDIT_HASH_SEEDS`.

    Returns:
        ``{source: [(id, reason), ...]}`` covering both raw records skipped while loading and
        candidates that fail validation.
    """
    data_dir = Path(data_dir)
    workers = default_workers() if workers is None else workers
    report: dict[str, list] = {}
    for source in SEED_SOURCES:
        pool = LOADERS[source](data_dir / SOURCE_FILES[source])
        validate = VALIDATORS[source]
        if validate is validate_code:
            validate = functools.partial(validate_code, hash_seeds=AUDIT_HASH_SEEDS)
        if source in ("humaneval", "mbpp") and workers > 1:
            with ThreadPoolExecutor(max_workers=workers) as executor:
                reasons = list(executor.map(validate, pool.candidates))
        else:
            reasons = [validate(task) for task in pool.candidates]
        failed = [
            (t.task_id, r) for t, r in zip(pool.candidates, reasons, strict=True) if r is not None
        ]
        report[source] = pool.skipped + failed
    return report


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help="raw data folder holding SOURCE_FILES (default: $SAGE_ENV_DATA; required without it)",
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="output JSONL (default: %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=SEED, help="draw seed (default: %(default)s)")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="parallel code-validation subprocesses (default: CPU count, <= 8)",
    )
    parser.add_argument(
        "--audit",
        action="store_true",
        help="validate every candidate, report exclusions, write nothing",
    )
    args = parser.parse_args(argv)
    if args.data_dir is None:
        parser.error("--data-dir is required (or set $SAGE_ENV_DATA): sage-env does not ship "
                     f"all of the raw training files {sorted(SOURCE_FILES.values())}")

    start = time.monotonic()
    if args.audit:
        for source, excluded in audit(args.data_dir, args.workers).items():
            print(f"{source}: {len(excluded)} excluded")
            for item_id, reason in excluded:
                print(f"  {item_id}: {reason}")
    else:
        tasks = build_seeds(args.data_dir, args.seed, args.workers, log=print)
        write_jsonl(tasks, args.out)
        print(f"wrote {len(tasks)} tasks to {args.out}")
        validation = build_validation(args.data_dir, tasks, args.seed)
        val_out = args.out.parent / DEFAULT_VALIDATION_OUT.name
        write_jsonl(validation, val_out)
        print(f"wrote {len(validation)} held-out validation tasks to {val_out}")
    print(f"done in {time.monotonic() - start:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

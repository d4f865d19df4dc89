"""Tests for the bundled seed set (``sage_env/data/seeds.jsonl``) and its build script.

The code checks here use their own tiny subprocess runner, independent of both
``sage_env.verifiers`` and the build script's validator.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sage_env.tasks.task import SEED_SOURCES, Task, load_seeds, write_jsonl
from tests.data_paths import RAW_DATA, needs

REPO_ROOT = Path(__file__).resolve().parents[3]
SEEDS_FILE = REPO_ROOT / "sage_env" / "data" / "seeds.jsonl"
DATA_DIR = RAW_DATA
TIMEOUT_S = 30


# A fixed sample of code seeds checked snippet by snippet: HumanEval/38 and /50 have a single
# whole-check() snippet, 66/101/137/163 had vacuous ``assert True`` lines dropped.
SAMPLE_HUMANEVAL = [0, 1, 2, 9, 38, 50, 66, 101, 137, 163]
SAMPLE_MBPP = [603, 606, 611, 644, 699, 740, 807, 926, 928, 974]


def _load_build_script():
    """Import ``scripts/build_seeds.py`` as a module (``scripts`` is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "build_seeds", REPO_ROOT / "scripts" / "build_seeds.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("build_seeds", module)
    spec.loader.exec_module(module)
    return module


build = _load_build_script()
needs_raw_data = needs(*build.SOURCE_FILES.values())


@pytest.fixture(scope="module")
def seeds() -> list[Task]:
    return load_seeds()


@pytest.fixture(scope="module")
def by_id(seeds: list[Task]) -> dict[str, Task]:
    return {task.task_id: task for task in seeds}


def run_snippet(task: Task, snippet: str, program: str | None = None) -> bool:
    """True iff ``test_setup + program + snippet`` exits 0 in a fresh interpreter."""
    program = task.reference_solution if program is None else program
    script = f"{task.test_setup}\n{program}\n{snippet}\n"
    try:
        proc = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return False
    return proc.returncode == 0


_ALL_SNIPPETS = r"""
import json, sys
setup, program, tests = json.load(sys.stdin)
failed = []
for i, snippet in enumerate(tests):
    ns = {"__name__": "__seed_check__"}
    try:
        exec(setup, ns)
        exec(program, ns)
        exec(snippet, ns)
    except BaseException as exc:
        failed.append(f"{i}: {type(exc).__name__}: {exc}")
print(json.dumps(failed))
"""


def failing_snippets(task: Task) -> list[str]:
    """Run all snippets of ``task`` against its reference solution in one subprocess, each in
    a fresh namespace; return the failures (``["timeout"]`` / ``["crash"]`` on a dead run)."""
    payload = json.dumps([task.test_setup, task.reference_solution, task.tests])
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _ALL_SNIPPETS],
            input=payload,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return ["timeout"]
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return [f"crash: {proc.stderr[-300:]}"]
    return json.loads(lines[-1])


# ------------------------------------------------------------------------ the bundled file


def test_seed_counts(seeds: list[Task]) -> None:
    assert len(seeds) == 500
    assert all(isinstance(task, Task) for task in seeds)
    assert Counter(task.source for task in seeds) == {
        "math": 156,
        "gsm8k": 148,
        "humaneval": 87,
        "mbpp": 109,
    }


def test_grouped_by_source_in_order(seeds: list[Task]) -> None:
    order = [task.source for task in seeds]
    groups = [s for i, s in enumerate(order) if i == 0 or order[i - 1] != s]
    assert groups == list(SEED_SOURCES)


def test_ids_unique_and_well_formed(seeds: list[Task]) -> None:
    ids = [task.task_id for task in seeds]
    assert len(set(ids)) == 500
    prefixes = {
        "math": "math/train/",
        "gsm8k": "gsm8k/train/",
        "humaneval": "humaneval/",
        "mbpp": "mbpp/",
    }
    for task in seeds:
        assert task.task_id.startswith(prefixes[task.source]), task.task_id
        assert task.domain == ("math" if task.source in ("math", "gsm8k") else "code")
        assert task.prompt.strip()
        assert task.parent_id is None


def test_mbpp_ids_are_train_split(seeds: list[Task]) -> None:
    mbpp_ids = [int(t.task_id.split("/")[1]) for t in seeds if t.source == "mbpp"]
    assert len(mbpp_ids) == 109
    assert all(601 <= n <= 974 for n in mbpp_ids)
    assert all(
        t.meta["original_task_id"] == int(t.task_id[5:]) for t in seeds if t.source == "mbpp"
    )


def test_humaneval_ids_in_range(seeds: list[Task]) -> None:
    numbers = [int(t.task_id.split("/")[1]) for t in seeds if t.source == "humaneval"]
    assert all(0 <= n < 164 for n in numbers)


def test_known_gsm8k_gold(by_id: dict[str, Task]) -> None:
    # Raw record (line 3327 of GSM8K train, 0-based): 250 dollars * 100 gems = 25000 gems,
    # a 20% bonus = 5000 gems, total 30000; the raw answer line is "#### 30,000".
    task = by_id["gsm8k/train/3327"]
    assert task.prompt.startswith("Tom spends $250 to buy gems in a game he plays.")
    assert task.reference_solution.endswith("#### 30,000")
    assert task.answer == "30000"
    assert task.meta == {"index": 3327}


def test_known_math_gold(by_id: dict[str, Task]) -> None:
    task = by_id["math/train/algebra/42"]
    assert task.prompt == "Evaluate $(\\sqrt[6]{4})^9$."
    assert task.answer == "8"
    assert task.meta == {
        "unique_id": "train/algebra/42.json",
        "level": "Level 2",
        "type": "Algebra",
    }


def test_math_gold_answers_parse(seeds: list[Task]) -> None:
    from math_verify import parse

    for task in seeds:
        if task.domain == "math":
            assert task.answer and task.answer.strip(), task.task_id
            assert task.tests == [] and task.entry_point is None
            assert parse("$" + task.answer + "$"), task.task_id


def test_code_seeds_shape(seeds: list[Task]) -> None:
    for task in seeds:
        if task.domain != "code":
            continue
        assert task.answer is None
        assert task.entry_point and task.entry_point.isidentifier(), task.task_id
        assert task.tests and task.reference_solution, task.task_id
        assert "\r" not in task.reference_solution
        if task.source == "mbpp":
            assert f"{task.entry_point}(" in task.prompt
            assert task.prompt.endswith(task.tests[0])
        else:
            assert task.reference_solution.startswith(task.prompt)
            # No vacuous snippets such as ``assert True``: each one exercises the candidate.
            assert all("candidate" in test for test in task.tests), task.task_id


def test_humaneval_split_example(by_id: dict[str, Task]) -> None:
    task = by_id["humaneval/0"]
    assert task.entry_point == "has_close_elements"
    assert len(task.tests) == 7
    assert task.tests[0] == (
        "candidate = has_close_elements\n"
        "assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True"
    )
    assert task.test_setup.startswith("METADATA = {")
    # check() of HumanEval/38 has loops, so it stays one whole snippet.
    whole = by_id["humaneval/38"]
    assert len(whole.tests) == 1 and whole.tests[0].endswith("check(decode_cyclic)")


@pytest.mark.slow
def test_sample_of_code_seeds_pass_per_snippet(by_id: dict[str, Task]) -> None:
    sample = [by_id[f"humaneval/{n}"] for n in SAMPLE_HUMANEVAL]
    sample += [by_id[f"mbpp/{n}"] for n in SAMPLE_MBPP]
    jobs = [(task, snippet) for task in sample for snippet in task.tests]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda job: run_snippet(*job), jobs))
    failed = [
        (task.task_id, snippet) for (task, snippet), ok in zip(jobs, results, strict=True) if not ok
    ]
    assert failed == []


@pytest.mark.slow
def test_all_code_seeds_pass_with_reference(seeds: list[Task]) -> None:
    code = [task for task in seeds if task.domain == "code"]
    assert len(code) == 196
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(failing_snippets, code))
    failed = {task.task_id: res for task, res in zip(code, results, strict=True) if res}
    assert failed == {}


def test_runner_rejects_wrong_solution(by_id: dict[str, Task]) -> None:
    task = by_id["humaneval/0"]
    wrong = task.prompt + "    return False\n"
    outcomes = [run_snippet(task, snippet, program=wrong) for snippet in task.tests]
    assert outcomes.count(True) == 3  # the three asserts expecting False
    mbpp = by_id["mbpp/603"]
    assert not run_snippet(
        mbpp, mbpp.tests[0], program=f"def {mbpp.entry_point}(n):\n    return []"
    )


# ----------------------------------------------------------------------- build-script units


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("so the answer is $\\boxed{5}$.", "5"),
        ("$\\boxed{\\frac{1}{2}}$", "\\frac{1}{2}"),
        ("first $\\boxed{1}$, then $\\boxed{2}$ wins", "2"),
        ("$\\boxed{\\sqrt{\\frac{a}{b}}+\\{1\\}}$", "\\sqrt{\\frac{a}{b}}+\\{1\\}"),
        ("$\\fbox{42}$", "42"),
        ("$$\\boxed {17}.$$", "17"),
        ("so $x = \\boxed 2$.", "2"),
        ("\\boxed{\\text{(C)}}", "\\text{(C)}"),
        ("no box here", None),
        ("empty $\\boxed{}$", None),
        ("unbalanced $\\boxed{\\frac{1}{2}$", None),
        ("\\boxedfoo{3}", None),
    ],
)
def test_extract_boxed(text: str, expected: str | None) -> None:
    assert build.extract_boxed(text) == expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("a\n#### 72", "72"),
        ("x\n#### 1,000", "1000"),
        ("#### 2,520,000 ", "2520000"),
        ("#### -3.5", "-3.5"),
    ],
)
def test_gsm8k_gold(answer: str, expected: str) -> None:
    assert build.gsm8k_gold(answer) == expected


def test_split_humaneval_test_all_asserts() -> None:
    test = (
        "METADATA = {}\n\n\ndef check(candidate):\n    import math\n"
        "    assert candidate(1) == 2\n    assert True\n"
        "    assert math.isclose(candidate(\n        2), 3)\n"
    )
    snippets, setup = build.split_humaneval_test(test, "inc")
    assert snippets == [
        "candidate = inc\nassert candidate(1) == 2",
        "candidate = inc\nassert math.isclose(candidate(\n    2), 3)",
    ]
    assert setup == "METADATA = {}\nimport math\n"


def test_split_humaneval_test_fallback() -> None:
    test = "def check(candidate):\n    x = 1\n    assert candidate(x) == 2\n"
    snippets, setup = build.split_humaneval_test(test, "inc")
    assert snippets == [test.strip() + "\n\ncheck(inc)"]
    assert setup == ""


def test_mbpp_entry_point() -> None:
    code = "def helper(x):\n    return x\ndef similar(a, b):\n    return set(a) & set(b)"
    assert build.mbpp_entry_point("assert set(similar((1,), (1,))) == {1}", code) == "similar"
    assert build.mbpp_entry_point("assert int(lobb(5, 3)) == 35", "def lobb(n, m): pass") == "lobb"
    assert build.mbpp_entry_point("assert len([]) == 0", "x = 1") is None


# ------------------------------------------------------------------------ reproducibility


@pytest.mark.slow
@needs_raw_data
def test_build_is_reproducible(tmp_path: Path) -> None:
    out = tmp_path / "seeds.jsonl"
    write_jsonl(build.build_seeds(DATA_DIR, workers=4), out)
    assert out.read_bytes() == SEEDS_FILE.read_bytes()


@needs_raw_data
def test_known_bad_candidates_are_excluded(by_id: dict[str, Task]) -> None:
    math_pool = build.load_math(DATA_DIR / build.SOURCE_FILES["math"])
    assert (
        "train/number_theory/7115.json",
        "no non-empty boxed answer in solution",
    ) in math_pool.skipped
    mbpp_pool = build.load_mbpp(DATA_DIR / build.SOURCE_FILES["mbpp"])
    assert len(mbpp_pool.candidates) == 374
    broken = next(t for t in mbpp_pool.candidates if t.task_id == "mbpp/927")
    assert "NameError" in build.validate_code(broken)  # its test_setup needs the program's Node
    assert "mbpp/927" not in by_id

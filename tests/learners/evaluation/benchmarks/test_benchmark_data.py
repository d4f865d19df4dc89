"""Benchmark data a fresh clone can use: shipped files, --data-dir, and the hub fallback."""

import fnmatch
import gzip
import hashlib
import json
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from learners.evaluation import benchmarks as bd
from learners.evaluation.benchmarks import BENCHMARK_FILES, SHIPPED_DATA, load_benchmark
from tests.data_paths import RAW_DATA

ROOT = Path(__file__).resolve().parents[4]
SHIPPED = {
    "gsm8k": 1319,
    "math500": 500,
    "humaneval": 164,
    "humaneval_plus": 164,
    "mbpp": 257,
    "mbpp_plus": 378,
}
"""Benchmarks shipped in learners/data/benchmarks, with their item counts."""


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A user's clone: no $SAGE_ENV_DATA and no ../shared/data next to the working directory."""
    monkeypatch.delenv("SAGE_ENV_DATA", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def fake_hub(monkeypatch):
    """A stand-in ``datasets`` module: records each load_dataset call, serves given rows."""
    calls, tables = [], {}

    def load_dataset(path, name=None, split=None, revision=None):
        calls.append((path, name, split))
        if path not in tables:
            raise ConnectionError(f"Couldn't reach {path!r} on the Hub (OfflineModeIsEnabled)")
        return iter(tables[path])

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    return calls, tables


@pytest.mark.parametrize("name, count", sorted(SHIPPED.items()))
def test_shipped_benchmarks_load_without_a_data_dir(fresh, name, count):
    items = load_benchmark(name, plus_limit=2)
    assert len(items) == count
    if items[0].domain == "math":
        assert all(it.answer for it in items)
    else:
        assert all(it.tests and it.entry_point for it in items)


def test_shipped_files_match_their_manifest_and_the_raw_data():
    """Every shipped file is listed in the README with its sha256 and is byte-identical to
    the raw-data copy the project records sources for."""
    readme = (SHIPPED_DATA / "README.md").read_text()
    listed = dict(re.findall(r"\| `((?:math|code)/[^`]+)` \|.*\| ([0-9a-f]{16}) \|\n", readme))
    files = sorted(p.relative_to(SHIPPED_DATA).as_posix() for p in SHIPPED_DATA.rglob("*.*"))
    files.remove("README.md")
    assert sorted(listed) == files
    for rel, short in listed.items():
        data = (SHIPPED_DATA / rel).read_bytes()
        assert hashlib.sha256(data).hexdigest()[:16] == short, rel
        if RAW_DATA != SHIPPED_DATA and (RAW_DATA / rel).is_file():  # $SAGE_ENV_DATA's copy
            assert data == (RAW_DATA / rel).read_bytes(), rel
    # the layout names every shipped benchmark's file
    assert {BENCHMARK_FILES[b] for b in SHIPPED} <= set(files)
    assert "code/cruxeval.jsonl.gz" in files


def test_package_data_globs_carry_every_shipped_file():
    """pyproject's package-data puts every file of learners/data/benchmarks in the wheel."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = cfg["tool"]["setuptools"]["package-data"]["learners"]
    for path in SHIPPED_DATA.rglob("*"):
        if path.is_file():
            rel = path.relative_to(ROOT / "learners").as_posix()
            assert any(fnmatch.fnmatch(rel, g) for g in globs), rel
    assert "datasets==5.2.0" in cfg["project"]["optional-dependencies"]["hub"]


def test_shipped_files_are_tracked_by_git():
    try:
        out = subprocess.run(
            ["git", "ls-files", "learners/data/benchmarks"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    if not out:
        pytest.skip("the shipped files are not committed yet")
    assert "learners/data/benchmarks/math/gsm8k_test.jsonl" in out
    assert "learners/data/benchmarks/code/HumanEvalPlus-v0.1.10.jsonl.gz" in out


def test_data_dir_overrides_the_shipped_files(tmp_path, monkeypatch):
    (tmp_path / "math").mkdir()
    rows = [{"question": "What is 6 * 7?", "answer": "6 * 7 = 42\n#### 4,2"}]
    (tmp_path / "math/gsm8k_test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (item,) = load_benchmark("gsm8k", tmp_path)
    assert item.text == "What is 6 * 7?" and item.answer == "42"
    monkeypatch.setenv("SAGE_ENV_DATA", str(tmp_path))  # the environment variable too
    assert [it.answer for it in load_benchmark("gsm8k")] == ["42"]


def test_a_missing_file_names_the_layout_module(tmp_path, fake_hub):
    calls, _ = fake_hub
    with pytest.raises(FileNotFoundError, match="learners.evaluation.benchmarks.BENCHMARK_FILES"):
        load_benchmark("humaneval_plus", tmp_path)  # no hub copy: a plain missing file
    with pytest.raises(FileNotFoundError, match="learners.evaluation.benchmarks.BENCHMARK_FILES"):
        load_benchmark("gsm8k", tmp_path, source="local")
    assert calls == []  # local never touches the network


def test_unshipped_benchmark_falls_back_to_the_hub(fresh, fake_hub):
    calls, tables = fake_hub
    tables["math-ai/amc23"] = [
        {"id": 0, "question": "Find $x$ if $2x = 3$.", "answer": 1.5},
        {"id": 1, "question": "What is $10^2$?", "answer": 100.0},
    ]
    items = load_benchmark("amc23")
    assert calls == [("math-ai/amc23", None, "test")]
    assert [(it.item_id, it.text, it.answer) for it in items] == [
        ("0", "Find $x$ if $2x = 3$.", "1.5"),
        ("1", "What is $10^2$?", "100"),
    ]
    assert items[0].prompt.startswith("Find $x$") and "\\boxed{}" in items[0].prompt


def test_hub_rows_go_through_the_same_loader_as_the_local_file(fresh, fake_hub):
    _, tables = fake_hub
    local = load_benchmark("mbpp")[:2]
    with open(SHIPPED_DATA / "code/sanitized-mbpp.json", encoding="utf-8") as fh:
        raw = {r["task_id"]: r for r in json.load(fh)}
    tables["google-research-datasets/mbpp"] = [raw[int(it.item_id)] for it in local]
    hub = load_benchmark("mbpp", source="hub")
    assert hub == local


def test_hub_failure_is_one_clear_error(fresh, fake_hub):
    with pytest.raises(FileNotFoundError) as err:
        load_benchmark("aime24")
    msg = str(err.value)
    assert "HuggingFaceH4/aime_2024" in msg and "OfflineModeIsEnabled" in msg
    assert "--data-dir" in msg and "learners.evaluation.benchmarks.BENCHMARK_FILES" in msg
    with pytest.raises(RuntimeError, match="could not load openai/gsm8k"):
        load_benchmark("gsm8k", source="hub")
    with pytest.raises(ValueError, match="no hub source"):
        load_benchmark("humaneval_plus", source="hub")
    with pytest.raises(ValueError, match="unknown source"):
        load_benchmark("gsm8k", source="web")


def test_hub_without_the_datasets_package_says_what_to_install(fresh, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # import fails
    with pytest.raises(RuntimeError, match=r"sage-env\[hub\]"):
        load_benchmark("gsm8k", source="hub")


def test_real_datasets_loads_a_local_dataset_folder_offline(fresh, monkeypatch, tmp_path):
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "olympiad"
    folder.mkdir()
    rows = [
        {"id": 7, "question": "Compute $1+1$.", "final_answer": ["$2$"]},
        {"id": 8, "question": "Solve $x^2=4$, $x>0$.", "final_answer": ["$2$."]},
    ]
    with gzip.open(folder / "test.jsonl.gz", "wt") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    source = bd.HubSource(str(folder))  # test.jsonl.gz: split "test"
    monkeypatch.setitem(bd.HUB_SOURCES, BENCHMARK_FILES["olympiadbench"], source)
    items = load_benchmark("olympiadbench")  # not shipped: auto goes to the (local) hub copy
    assert [(it.item_id, it.answer) for it in items] == [("7", "2"), ("8", "2")]


@pytest.mark.slow
def test_eval_on_a_fresh_clone_needs_no_data_dir_and_no_network(fresh, tiny_path):
    """docs/guide/debugging.md's eval command, with the tiny model: shipped files, offline."""
    from learners.cli import main

    rc = main(
        ["eval", "--model", tiny_path, "--benchmarks", "gsm8k,humaneval_plus", "--limit", "3"]
        + ["--max-new-tokens", "8", "--plus-limit", "2", "--out", str(fresh / "ev")]
    )
    assert rc == 0
    results = json.loads((fresh / "ev/results.json").read_text())["results"]
    assert [(r["benchmark"], r["items"]) for r in results] == [
        ("gsm8k", 3),
        ("humaneval_plus", 3),
    ]
    assert all(0.0 <= r["pass_at"]["pass@1"] <= 1.0 for r in results)
    ids = [json.loads(x)["item_id"] for x in open(fresh / "ev/items/humaneval_plus.jsonl")]
    assert ids == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]

"""The mutation-testing table of scripts/mutation.py (issue 49) names files that exist, and
each committed result agrees with the table: same module, every equivalent mutant has a
reason, and the kill rate is what its counts give."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("mutation", ROOT / "scripts" / "mutation.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["mutation"] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


MUTATION = _script()


@pytest.mark.parametrize("name", sorted(MUTATION.TARGETS))
def test_every_mutation_target_names_existing_files(name):
    target = MUTATION.TARGETS[name]
    assert (ROOT / target.source).is_file()
    for test in target.tests:
        assert (ROOT / test.split("::")[0]).is_file(), test
    assert all(reason.strip() for reason in target.equivalent.values())
    # an equivalent mutant names a function of this module (mutmut: <module>.x_<fn>__mutmut_N)
    module = target.source.removesuffix(".py").replace("/", ".")
    assert all(name.startswith(module + ".x_") for name in target.equivalent), name


@pytest.mark.parametrize(
    "path", sorted((ROOT / "benchmarks" / "results" / "mutation").glob("*.json")), ids=str
)
def test_committed_mutation_results_agree_with_the_table(path):
    result = json.loads(path.read_text())
    target = MUTATION.TARGETS[path.stem]
    assert result["module"] == target.source
    assert set(result["equivalent"]) <= set(target.equivalent)
    scored = result["mutants"] - len(result["equivalent"]) - result["not_checked"]
    assert result["kill_rate"] == round((result["killed"] + result["timeouts"]) / scored, 4)
    assert result["survived"] + result["no_tests"] == len(result["survivors"])

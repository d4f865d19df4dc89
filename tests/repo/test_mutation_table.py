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
    # an equivalent mutant names a function of this module (mutmut: <module>.x_<fn>__mutmut_N,
    # a method <module>.xǁ<Class>ǁ<method>__mutmut_N)
    module = target.source.removesuffix(".py").replace("/", ".")
    functions = MUTATION._functions_of((ROOT / target.source).read_text())
    for mutant in target.equivalent:
        assert mutant.startswith(module + "."), mutant
        fn = mutant[len(module) + 1 :].partition("__mutmut_")[0]
        assert fn in functions, mutant
        assert MUTATION._selected(mutant, target.functions), mutant
    # a restricted target names functions the module has
    for fn in target.functions:
        assert fn.startswith(module + ".") and fn[len(module) + 1 :] in functions, fn


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


def test_functions_are_named_as_mutmut_names_them():
    source = "def f(x):\n    return x\n\nclass C:\n    def m(self):\n        return 1\n"
    assert MUTATION._functions_of(source) == {
        "x_f": "def f(x):\n    return x",
        "x\u01c1C\u01c1m": "def m(self):\n        return 1",
    }
    assert MUTATION._selected("a.x_f__mutmut_3", ("a.x_f",))
    assert not MUTATION._selected("a.x_ff__mutmut_3", ("a.x_f",))
    assert MUTATION._selected("a.x_ff__mutmut_3", ())


def test_a_survivor_is_known_by_its_changed_lines_whatever_its_number():
    diff = "--- a.py\n+++ a.py\n@@ -3,1 +3,1 @@\n     y = 1\n-    x = a - b\n+    x = a + b\n"
    assert MUTATION._diff_lines(diff) == ("-    x = a - b", "+    x = a + b")


def test_the_ci_check_passes_at_once_when_no_critical_function_changed(monkeypatch, capsys):
    monkeypatch.setattr(MUTATION, "changed_functions", lambda ref: {})
    monkeypatch.setattr(MUTATION, "run", lambda *a, **k: pytest.fail("nothing to run"))
    assert MUTATION.check_changed("HEAD", 5) == 0
    assert "no critical-path function changed" in capsys.readouterr().out


def test_the_ci_check_fails_on_a_new_survivor_only(monkeypatch, tmp_path):
    target = MUTATION.TARGETS["trr"]
    module = target.source.removesuffix(".py").replace("/", ".")
    listed = f"{module}.x_f__mutmut_1"
    committed = {"survivors": {listed: "--- a\n+++ a\n-    x = 1\n+    x = 2\n"}}
    (tmp_path / "trr.json").write_text(json.dumps(committed))
    monkeypatch.setattr(MUTATION, "RESULTS", tmp_path)
    monkeypatch.setattr(MUTATION, "changed_functions", lambda ref: {"trr": (f"{module}.x_f",)})

    def fake_run(survivors):
        def run(module_name, limit, functions, workers, write):
            assert not write and functions == (f"{module}.x_f",)
            return {"mutants": 3, "killed": 3 - len(survivors), "timeouts": 0,
                    "survived": len(survivors), "not_checked": 0, "survivors": survivors}
        return run

    # the listed survivor, under its own name or renumbered: known
    for name in (listed, f"{module}.x_f__mutmut_7"):
        monkeypatch.setattr(MUTATION, "run", fake_run({name: "-    x = 1\n+    x = 2\n"}))
        assert MUTATION.check_changed("HEAD", 5) == 0
    monkeypatch.setattr(MUTATION, "run", fake_run({f"{module}.x_f__mutmut_2": "-    x = 1\n+    x = 3\n"}))
    assert MUTATION.check_changed("HEAD", 5) == 1


def test_a_result_file_records_what_its_figures_describe():
    source = "def f(x):\n    return x\n\ndef g(x):\n    return -x\n"
    shas = MUTATION.function_shas(source, "pkg/mod.py")
    assert set(shas) == {"pkg.mod.x_f", "pkg.mod.x_g"}
    assert all(len(s) == 16 for s in shas.values())
    # a restricted target records only its functions; an edit changes only that function's sha
    assert set(MUTATION.function_shas(source, "pkg/mod.py", ("pkg.mod.x_g",))) == {"pkg.mod.x_g"}
    edited = MUTATION.function_shas(source.replace("-x", "x - 1"), "pkg/mod.py")
    assert edited["pkg.mod.x_f"] == shas["pkg.mod.x_f"]
    assert edited["pkg.mod.x_g"] != shas["pkg.mod.x_g"]


def _fake_target(monkeypatch, tmp_path, source: str):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(source)
    results = tmp_path / "results"
    results.mkdir()
    monkeypatch.setattr(MUTATION, "ROOT", tmp_path)
    monkeypatch.setattr(MUTATION, "RESULTS", results)
    monkeypatch.setattr(MUTATION, "TARGETS", {"mod": MUTATION.Target("pkg/mod.py", ())})
    return results


def test_the_committed_check_mutates_only_functions_edited_since_the_results(monkeypatch, tmp_path):
    source = "def f(x):\n    return x\n\ndef g(x):\n    return -x\n"
    results = _fake_target(monkeypatch, tmp_path, source)
    # no result file: every function is stale and the check fails without running anything
    assert MUTATION.stale_functions("mod")[0] == ("pkg.mod.x_f", "pkg.mod.x_g")
    monkeypatch.setattr(MUTATION, "run", lambda *a, **k: pytest.fail("nothing to run"))
    assert MUTATION.check_committed(5) == 1
    # results that describe the source: nothing stale, exit 0 at once
    shas = MUTATION.function_shas(source, "pkg/mod.py")
    (results / "mod.json").write_text(json.dumps({"function_sha": shas, "survivors": {}}))
    assert MUTATION.stale_functions("mod")[0] == ()
    assert MUTATION.check_committed(5) == 0
    # g edited: only g's mutants run; a survivor of it fails the check, none passes it
    (tmp_path / "pkg" / "mod.py").write_text(source.replace("-x", "x - 1"))
    assert MUTATION.stale_functions("mod")[0] == ("pkg.mod.x_g",)
    for survivors, code in (({}, 0), ({"pkg.mod.x_g__mutmut_1": "-    a\n+    b\n"}, 1)):
        def run(name, limit, functions, workers, write, survivors=survivors):
            assert (name, functions, write) == ("mod", ("pkg.mod.x_g",), False)
            return {"mutants": 2, "killed": 2 - len(survivors), "timeouts": 0,
                    "survived": len(survivors), "not_checked": 0, "survivors": survivors}

        monkeypatch.setattr(MUTATION, "run", run)
        assert MUTATION.check_committed(5) == code


def test_every_committed_result_records_its_functions():
    for path in sorted((ROOT / "benchmarks" / "results" / "mutation").glob("*.json")):
        shas = json.loads(path.read_text()).get("function_sha")
        assert shas, f"{path.name} records no function_sha"
        target = MUTATION.TARGETS[path.stem]
        module = target.source.removesuffix(".py").replace("/", ".")
        assert all(fn.startswith(module + ".") for fn in shas), path.name


@pytest.mark.parametrize("name", sorted(MUTATION.TARGETS))
def test_no_critical_function_hides_from_the_mutation_tester(name):
    """mutmut 3.8.1 leaves a decorated function unmutated (its kill rate then says nothing of
    it): a critical module's functions carry no decorator but a lone @staticmethod or
    @classmethod, unless the target names it in ``unmutated`` with a reason."""
    target = MUTATION.TARGETS[name]
    module = target.source.removesuffix(".py").replace("/", ".")
    decorated = {
        f"{module}.{fn}"
        for fn in MUTATION.decorated_functions((ROOT / target.source).read_text())
        if MUTATION._selected(f"{module}.{fn}__mutmut_0", target.functions)
    }
    assert decorated <= set(target.unmutated), sorted(decorated - set(target.unmutated))
    assert all(reason.strip() for reason in target.unmutated.values())


def test_decorated_functions_are_the_ones_mutmut_skips():
    source = (
        "import functools\n"
        "@functools.cache\ndef a():\n    return 1\n\n"
        "def b():\n    return 2\n\n"
        "class C:\n"
        "    @staticmethod\n    def s():\n        return 3\n"
        "    @property\n    def p(self):\n        return 4\n"
        "    @classmethod\n    @functools.cache\n    def c(cls):\n        return 5\n"
    )
    assert MUTATION.decorated_functions(source) == ["x_a", "x\u01c1C\u01c1p", "x\u01c1C\u01c1c"]


def test_a_decorated_function_is_not_in_the_record_until_it_can_be_mutated():
    decorated = "import functools\n\n@functools.cache\ndef f(x):\n    return x\n"
    plain = "import functools\n\ndef f(x):\n    return x\n\nf = functools.cache(f)\n"
    assert MUTATION.function_shas(decorated, "pkg/mod.py") == {}
    assert set(MUTATION.function_shas(plain, "pkg/mod.py")) == {"pkg.mod.x_f"}

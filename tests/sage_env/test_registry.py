"""One registry mechanism (``sage_env.registry.Registry``) behind algorithms, engines,
protocols, benchmarks and commands: decorators, lazy built-ins, entry points, clear errors."""

import dataclasses
import importlib.metadata
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import sage_env.registry
from sage_env.registry import Registry

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def widgets(tmp_path, monkeypatch):
    """A registry ``demo_widget_registry.REG`` whose built-ins live in two modules not yet
    imported, plus a module an entry point names; every module is forgotten afterwards."""
    files = {
        "demo_widget_registry": """
            from sage_env.registry import Registry
            REG = Registry("widget", builtins=("demo_widgets_a", "demo_widgets_b"),
                           group="demo.widgets", hint="add one with REG.register")
        """,
        "demo_widgets_a": """
            from demo_widget_registry import REG
            @REG.register("alpha")
            class Alpha:
                pass
        """,
        "demo_widgets_b": """
            from demo_widget_registry import REG
            @REG.register("beta")
            def beta():
                return "b"
        """,
        "demo_widgets_plugin": """
            from demo_widget_registry import REG
            class Gamma:
                pass
            @REG.register("delta")
            class Delta:
                pass
        """,
    }
    for name, text in files.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sage_env.registry, "entry_points", lambda group: [])
    yield importlib.import_module("demo_widget_registry").REG
    for name in files:
        sys.modules.pop(name, None)


def _entry_points(monkeypatch, group, **points):
    eps = [importlib.metadata.EntryPoint(n, v, group) for n, v in points.items()]
    monkeypatch.setattr(
        sage_env.registry, "entry_points", lambda group=None: [e for e in eps if e.group == group]
    )


def test_the_decorator_registers_what_it_decorates_unchanged():
    reg = Registry("widget")

    @reg.register("a")
    class A:
        pass

    def f():
        return 1

    assert reg.register("f", f) is f  # the plain call returns what it registered
    assert reg.get("a") is A and reg.get("f") is f
    assert reg.names() == ["a", "f"] and "a" in reg and "b" not in reg and len(reg) == 2
    reg.unregister("a")
    assert reg.names() == ["f"]


def test_settings_build_the_stored_record_and_a_plain_registry_refuses_them():
    @dataclasses.dataclass(frozen=True)
    class Spec:
        name: str
        cls: type
        syncs: bool = False

    reg = Registry("engine", entry=Spec)

    @reg.register("e", syncs=True)
    class E:
        pass

    assert reg.get("e") == Spec("e", E, syncs=True)
    with pytest.raises(TypeError, match="unexpected keyword"):
        reg.register("x", E, nonsense=1)
    with pytest.raises(TypeError, match=r"a widget takes no settings, got \['syncs'\]"):
        Registry("widget").register("w", E, syncs=True)


def test_a_taken_name_is_refused_without_overwrite():
    reg = Registry("widget")
    reg.register("a", int)
    with pytest.raises(ValueError) as info:
        reg.register("a", str)
    assert str(info.value) == "widget 'a' is already registered (pass overwrite=True)"
    assert reg.get("a") is int
    reg.register("a", str, overwrite=True)
    assert reg.get("a") is str


def test_builtins_load_on_the_first_lookup_not_on_import(widgets):
    assert "demo_widgets_a" not in sys.modules and "demo_widgets_b" not in sys.modules
    assert widgets.get("beta")() == "b"
    assert "demo_widgets_a" in sys.modules and "demo_widgets_b" in sys.modules
    assert widgets.names() == ["alpha", "beta"]


def test_a_runtime_registration_meets_the_builtins_first(widgets):
    with pytest.raises(ValueError, match="widget 'alpha' is already registered"):
        widgets.register("alpha", object)  # the built-in alpha was not imported yet
    widgets.register("mine", object)
    assert widgets.names() == ["alpha", "beta", "mine"]


def test_entry_points_are_found_and_the_unknown_name_error_lists_every_one(widgets, monkeypatch):
    _entry_points(
        monkeypatch,
        "demo.widgets",
        gamma="demo_widgets_plugin:Gamma",  # an object: registered under the entry's name
        plugin="demo_widgets_plugin",  # a module: it registers "delta" itself
        alpha="demo_widgets_plugin:Gamma",  # a built-in's name: the built-in stays
    )
    widgets.register("runtime", object)
    with pytest.raises(ValueError) as info:
        widgets.get("alphaa")
    assert str(info.value) == (
        "unknown widget 'alphaa'; registered: ['alpha', 'beta', 'delta', 'gamma', 'runtime']"
        " (add one with REG.register)"
    )
    assert widgets.get("gamma").__name__ == "Gamma"
    assert widgets.get("alpha").__name__ == "Alpha"


def test_an_entry_point_that_fails_to_load_is_named(widgets, monkeypatch):
    _entry_points(monkeypatch, "demo.widgets", broken="no_such_module_xyz:Thing")
    with pytest.raises(ImportError, match=r"entry point broken = 'no_such_module_xyz:Thing' "):
        widgets.names()


def test_importing_every_registry_imports_no_torch_vllm_or_engine():
    code = (
        "import sys\n"
        "from learners.algorithms.registry import LEARNERS\n"
        "from learners.engines.registry import ENGINES\n"
        "from learners.evaluation.benchmarks.registry import BENCHMARKS\n"
        "from learners.commands import COMMANDS\n"
        "from sage_env.protocols.registry import PROTOCOLS\n"
        "heavy = {'torch', 'vllm', 'ctranslate2', 'transformers'} & set(sys.modules)\n"
        "engines = [m for m in sys.modules if m.startswith('learners.engines.')]\n"
        "assert not heavy and engines == ['learners.engines.registry'], (heavy, engines)\n"
        "print(COMMANDS.names(), PROTOCOLS.names())\n"
        "assert 'torch' not in sys.modules  # commands and protocols are text only\n"
        "print(ENGINES.names())  # the engine modules import vllm / ctranslate2 lazily\n"
        "assert not {'vllm', 'ctranslate2'} & set(sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == [
        "['train', 'play', 'eval', 'compare', 'export', 'report', 'decontam', 'serve'] "
        "['sage', 'azr', 'azr-qa', 'mae', 'rlvr']",
        "['hf', 'hf-cb', 'vllm', 'ct2', 'torch-bf16']",
    ]


def test_every_kind_registers_its_builtins_by_decorator():
    from learners.algorithms.registry import LEARNERS
    from learners.algorithms.trr import TRRLearner
    from learners.commands import COMMANDS
    from learners.commands.train import train_command
    from learners.engines.registry import ENGINES
    from learners.engines.vllm_engine import VLLMEngine
    from learners.evaluation.benchmarks import BENCHMARK_FILES, BENCHMARKS
    from sage_env.protocols import PROTOCOLS, SAGEProtocol

    assert {"trr", "grpo", "reinforce_pp", "ema"} <= set(LEARNERS.names())
    assert LEARNERS.get("trr").factory is TRRLearner
    spec = ENGINES.get("vllm")
    assert (spec.cls, spec.requires, spec.syncs_weights) == (VLLMEngine, "vllm", True)
    assert VLLMEngine.name == "vllm"  # the decorator names the class (eval records it)
    assert ENGINES.get("hf").requires is None and not ENGINES.get("hf-cb").syncs_weights
    assert PROTOCOLS.get("sage") is SAGEProtocol
    assert COMMANDS.get("train").run is train_command
    assert BENCHMARKS.names()[:2] == ["gsm8k", "math500"] and len(BENCHMARKS) == 14
    assert BENCHMARK_FILES["cruxeval_i"] == "code/cruxeval.jsonl.gz"
    assert "livecodebench" not in BENCHMARK_FILES  # hub only: no file in the layout


def test_unknown_engine_protocol_and_benchmark_list_every_registered_one():
    from learners.engines import RolloutConfig
    from learners.evaluation.benchmarks import load_benchmark
    from sage_env.protocols import available_protocols, make_protocol

    with pytest.raises(ValueError, match=r"registered: \['ct2', 'hf', 'hf-cb', 'torch-bf16', 'vllm'\]$"):
        RolloutConfig(engine="sglang")
    with pytest.raises(ValueError) as info:
        make_protocol("sagee")
    names = available_protocols()  # with what other tests registered, if any
    assert {"azr", "azr-qa", "mae", "rlvr", "sage"} <= set(names)
    assert str(info.value) == f"unknown protocol 'sagee'; registered: {names}"
    with pytest.raises(ValueError) as info:
        load_benchmark("gsm8kk")
    assert "'exec_heldout', 'gsm8k', 'humaneval'" in str(info.value)
    assert "'livecodebench', 'math500'" in str(info.value)


def test_train_help_and_the_unknown_algorithm_error_list_builtins_and_plugins(
    tmp_path, monkeypatch, capsys
):
    from learners.algorithms.registry import LEARNER_GROUP, LEARNERS, available_learners
    from learners.cli import main

    (tmp_path / "ep_learner_demo.py").write_text(
        "from learners.algorithms.trr import TRRLearner\n\n\n"
        "class PluginLearner(TRRLearner):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    _entry_points(monkeypatch, LEARNER_GROUP, ep_demo="ep_learner_demo:PluginLearner")
    try:
        assert main(["train", "--algorithm", "grpoo"]) == 2
        err = capsys.readouterr().err
        names = available_learners()  # with what other tests registered, if any
        assert {"ema", "ep_demo", "grpo", "reinforce_pp", "trr"} <= set(names)
        assert f"unknown algorithm 'grpoo'; registered: {names} " in err
        with pytest.raises(SystemExit):
            main(["train", "--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert f"--algorithm {{{', '.join(names)}}}" in out
        assert "--rollout.engine): {ct2, hf, hf-cb, torch-bf16, vllm}" in out
    finally:
        LEARNERS.unregister("ep_demo")
        sys.modules.pop("ep_learner_demo", None)

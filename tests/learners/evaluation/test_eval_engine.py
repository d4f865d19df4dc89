"""``sage-env eval --engine``: which rollout engine samples, and that ``ct2`` scores as ``hf``."""

from __future__ import annotations

import importlib.util
import json

import pytest

from learners.evaluation.run import EvalConfig, resolve_engine, run_eval

needs_ct2 = pytest.mark.skipif(
    importlib.util.find_spec("ctranslate2") is None,
    reason="ctranslate2 is not installed (pip install ctranslate2==4.8.5)",
)


def test_auto_picks_ct2_on_a_cpu_when_installed_and_names_are_checked(monkeypatch):
    assert EvalConfig().engine == "auto"
    assert resolve_engine(EvalConfig(engine="hf", device="cpu")).engine == "hf"
    real = importlib.util.find_spec
    has_ct2 = real("ctranslate2") is not None
    assert resolve_engine(EvalConfig(device="cpu")).engine == ("ct2" if has_ct2 else "hf")
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "ctranslate2" else real(n, *a)
    )
    assert resolve_engine(EvalConfig(device="cpu")).engine == "hf"  # not installed: hf
    with pytest.raises(ValueError, match="bogus"):
        resolve_engine(EvalConfig(engine="bogus"))


@needs_ct2
def test_ct2_and_hf_give_the_same_greedy_completions_and_scores(tiny_path, tmp_path):
    runs = {}
    for engine in ("hf", "ct2"):
        cfg = EvalConfig(
            model=str(tiny_path),
            benchmarks="gsm8k,cruxeval_o",
            limit=3,
            max_new_tokens=12,
            batch_size=3,
            device="cpu",
            engine=engine,
            out=str(tmp_path / engine),
        )
        run_eval(cfg, progress=False)
        summary = json.loads((tmp_path / engine / "results.json").read_text())
        assert summary["engine"] == engine
        items = {}
        for name in ("gsm8k", "cruxeval_o"):
            lines = (tmp_path / engine / "items" / f"{name}.jsonl").read_text().splitlines()
            items[name] = [json.loads(x) for x in lines]
        runs[engine] = (summary["results"], items)
    assert runs["ct2"] == runs["hf"]
    assert all(len(rec["completions"][0]) > 0 for rec in runs["ct2"][1]["gsm8k"])

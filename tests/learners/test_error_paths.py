"""Error paths a new user meets first: unknown names list every registered one, and
``sage-env eval`` checks its model path and layout before anything loads."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from learners.algorithms import registry
from learners.cli import main
from learners.engines.registry import ENGINES, engine_spec
from learners.evaluation.model_path import eval_model
from learners.evaluation.run import EvalConfig, run_eval
from learners.policy.model_check import PreflightError
from sage_env.protocols.registry import make_protocol

ROOT = Path(__file__).resolve().parents[2]
BUILTIN_ALGORITHMS = ["ema", "grpo", "reinforce_pp", "trr"]
BUILTIN_PROTOCOLS = ["azr", "azr-qa", "mae", "rlvr", "sage"]


# ----------------------------------------------------------------- unknown names


@pytest.mark.slow
def test_unknown_algorithm_in_a_fresh_process_lists_all_four_builtins():
    # the bug: only the algorithms imported so far were listed ("registered: ['trr']")
    proc = subprocess.run(
        [sys.executable, "-m", "learners", "train", "--algorithm", "grpoo"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    expected = f"unknown algorithm 'grpoo'; registered: {BUILTIN_ALGORITHMS} "
    assert last.startswith(f"sage-env train: error: {expected}")


def test_unknown_algorithm_lists_builtins_and_user_learners():
    # other tests may have registered learners of their own: all of them are listed
    with pytest.raises(ValueError) as info:
        registry.learner_spec("grpoo")
    names = registry.available_learners()
    assert set(BUILTIN_ALGORITHMS) <= set(names)
    assert f"registered: {names} " in str(info.value)
    from learners.algorithms.trr import TRRLearner

    registry.register_learner("mine", TRRLearner)
    try:
        with pytest.raises(ValueError) as info:
            registry.learner_spec("grpoo")
        assert f"registered: {sorted([*names, 'mine'])} " in str(info.value)
    finally:
        registry.LEARNERS.unregister("mine")


def test_unknown_protocol_lists_every_registered_one(monkeypatch):
    from sage_env.protocols import registry as protocols

    with pytest.raises(ValueError) as info:
        make_protocol("sagee")
    assert str(info.value) == f"unknown protocol 'sagee'; registered: {BUILTIN_PROTOCOLS}"
    protocols.register_protocol("echo_err", lambda: None)  # a user's protocol
    try:
        with pytest.raises(ValueError, match=r"'echo_err', 'mae'"):
            make_protocol("sagee")
    finally:
        protocols.PROTOCOLS.unregister("echo_err")


def test_unknown_protocol_on_the_command_line(capsys):
    assert main(["play", "--protocol", "sagee"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"sage-env play: error: unknown protocol 'sagee'; registered: {BUILTIN_PROTOCOLS}"


def test_unknown_rollout_engine_lists_every_registered_one():
    with pytest.raises(ValueError) as info:
        engine_spec("vllmm")
    assert str(info.value) == (
        "unknown rollout engine 'vllmm'; registered: ['ct2', 'hf', 'hf-cb', 'torch-bf16', 'vllm']"
    )
    assert list(ENGINES) == ["hf", "hf-cb", "vllm", "ct2", "torch-bf16"]


# ------------------------------------------------------------- sage-env eval --model


def _model_folder(path: Path, *, tokenizer: bool = True, weights: bool = True) -> Path:
    """A folder laid out as ``save_pretrained`` writes one (empty files: only names count)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text("{}")
    if weights:
        (path / "model.safetensors").write_bytes(b"")
    if tokenizer:
        (path / "tokenizer.json").write_text("{}")
        (path / "tokenizer_config.json").write_text("{}")
    return path


def _checkpoint(run: Path, name: str, lora: bool = False) -> Path:
    ckpt = run / "checkpoints" / name
    if lora:
        (ckpt / "model").mkdir(parents=True)
        (ckpt / "model" / "adapter_config.json").write_text("{}")
        (ckpt / "model" / "adapter_model.safetensors").write_bytes(b"")
    else:
        _model_folder(ckpt / "model")
    (ckpt / "state.json").write_text(json.dumps({"step": int(name.split("_")[1])}))
    return ckpt


def _eval_error(capsys, model: str) -> str:
    """Run ``sage-env eval --model MODEL``: exit 2 and one line on stderr, returned."""
    assert main(["eval", "--model", model, "--limit", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("sage-env eval: error: ")
    return err.strip().removeprefix("sage-env eval: error: ")


def test_eval_of_a_missing_best_names_the_checkpoints_the_run_has(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    # nothing there at all: a path, not a hub id (used to be a 23-frame HFValidationError)
    assert _eval_error(capsys, "runs/x/checkpoints/best") == (
        "model path runs/x/checkpoints/best does not exist (pass a model folder, a checkpoint "
        "RUN/checkpoints/step_N, a `sage-env export` output or a hub id)"
    )
    _checkpoint(tmp_path / "runs" / "x", "step_000002")
    assert _eval_error(capsys, "runs/x/checkpoints/best") == (
        "model path runs/x/checkpoints/best does not exist; runs/x/checkpoints holds: "
        "step_000002 (best/ is written only when training validates: --val-every N) (a step_N "
        "folder evaluates its model/ weights; a LoRA run needs `sage-env export` first)"
    )
    # runs/x with one slash, ./runs here: a path too, not a hub id
    assert _eval_error(capsys, "runs/y").startswith("model path runs/y does not exist")


def test_eval_of_a_checkpoint_folder_loads_its_model_subfolder(tmp_path):
    ckpt = _checkpoint(tmp_path / "run", "step_000004")
    assert eval_model(str(ckpt)) == str(ckpt / "model")
    assert eval_model(str(ckpt / "model")) == str(ckpt / "model")
    best = _model_folder(tmp_path / "run" / "checkpoints" / "best")
    assert eval_model(str(best)) == str(best)  # best/ is a model folder itself


def test_eval_refuses_a_run_a_checkpoint_without_model_and_a_lora_adapter(tmp_path, capsys):
    run = tmp_path / "run"
    _checkpoint(run, "step_000002")
    assert _eval_error(capsys, str(run)) == (
        f"{run} is a training run folder, not a model; pass one of its checkpoints; "
        f"{run}/checkpoints holds: step_000002 (best/ is written only when training validates: "
        "--val-every N) (a step_N folder evaluates its model/ weights; a LoRA run needs "
        "`sage-env export` first)"
    )
    alone = tmp_path / "alone" / "checkpoints" / "step_000001"
    alone.mkdir(parents=True)
    (alone / "state.json").write_text("{}")  # no model/: used to blame sentencepiece
    assert _eval_error(capsys, str(alone)) == (
        f"checkpoint {alone} has no model/ folder (incomplete or not written by sage-env "
        f"train); pass another checkpoint; {alone.parent} holds no other checkpoint"
    )
    broken = run / "checkpoints" / "step_000004"
    broken.mkdir()
    (broken / "state.json").write_text("{}")
    assert _eval_error(capsys, str(broken)).startswith(
        f"checkpoint {broken} has no model/ folder (incomplete or not written by sage-env "
        f"train); pass another checkpoint; {run}/checkpoints holds: step_000002 "
    )
    lora = _checkpoint(run, "step_000006", lora=True)
    for model in (lora, lora / "model"):
        assert _eval_error(capsys, str(model)) == (
            f"{lora / 'model'} holds a LoRA adapter only, not a model: merge it into its base "
            f"with `sage-env export --run {run} --checkpoint step_000006 --out {run}/export` "
            "and pass --model with that folder"
        )


def test_eval_refuses_folders_without_config_weights_or_tokenizer(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _eval_error(capsys, str(empty)) == (
        f"model folder {empty} has no config.json (not a transformers model)"
    )
    no_weights = _model_folder(tmp_path / "no_weights", weights=False)
    assert _eval_error(capsys, str(no_weights)) == (
        f"model folder {no_weights} holds no weights (none of model.safetensors, "
        "pytorch_model.bin, model.safetensors.index.json, pytorch_model.bin.index.json)"
    )
    no_tok = _model_folder(tmp_path / "no_tok", tokenizer=False)
    assert _eval_error(capsys, str(no_tok)).startswith(
        f"model folder {no_tok} holds no tokenizer (none of tokenizer.json, tokenizer.model, "
        "vocab.json)"
    )
    file = tmp_path / "model.safetensors"
    file.write_bytes(b"")
    assert _eval_error(capsys, str(file)) == (
        f"--model {file} is a file; pass the model's folder (with config.json)"
    )


def test_eval_of_a_hub_id_missing_from_the_offline_cache_is_one_line(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(PreflightError, match="^model org/nope is not in the local Hugging Face"):
        eval_model("org/nope")


def test_eval_checks_the_model_before_loading_benchmarks(tmp_path, monkeypatch):
    import learners.evaluation.run as run_module

    def fail(*args, **kwargs):
        raise AssertionError("benchmarks loaded before the model was checked")

    monkeypatch.setattr(run_module, "load_benchmark", fail)
    with pytest.raises(PreflightError, match="does not exist"):
        run_eval(EvalConfig(model=str(tmp_path / "a" / "b" / "c"), out=str(tmp_path / "out")))
    assert not (tmp_path / "out").exists()


def test_eval_of_a_real_checkpoint_folder_scores_its_model(tiny_path, tmp_path):
    ckpt = tmp_path / "run" / "checkpoints" / "step_000001"
    shutil.copytree(tiny_path, ckpt / "model")
    (ckpt / "state.json").write_text("{}")
    cfg = EvalConfig(
        model=str(ckpt),
        benchmarks="gsm8k",
        limit=1,
        max_new_tokens=4,
        device="cpu",
        engine="hf",
        out=str(tmp_path / "out"),
    )
    (result,) = run_eval(cfg, progress=False)
    assert result.benchmark == "gsm8k" and result.items == 1 and 1 in result.pass_at
    summary = json.loads((tmp_path / "out" / "results.json").read_text())
    assert summary["model"] == str(ckpt)

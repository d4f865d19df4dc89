"""Preflight: what a run lacks is one clear line before anything heavy loads."""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from learners.policy import model_check
from learners.training import preflight
from learners.cli import main

ROOT = Path(__file__).resolve().parents[3]
QWEN7 = "Qwen/Qwen2.5-7B-Instruct"


def _cache_file(cache: Path, repo: str, name: str, text: str = "{}") -> None:
    """Put ``name`` of ``repo`` into a Hugging Face cache laid out as the hub client does."""
    folder = cache / f"models--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / "main").write_text("a" * 40)
    path = folder / "snapshots" / ("a" * 40) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def offline_cache(tmp_path, monkeypatch):
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return cache


@pytest.mark.slow
def test_paper_preset_on_a_machine_without_gpu_or_cached_weights_is_one_line(tmp_path):
    out = tmp_path / "run"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HF_HOME": str(tmp_path / "hf"),  # an empty cache
        "HF_HUB_OFFLINE": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }
    env.pop("HF_HUB_CACHE", None)
    cmd = [sys.executable, "-m", "learners", "train", "--preset", "paper", "--out", str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "OSError" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("sage-env train:")]
    assert len(errors) == 1, proc.stderr
    line = errors[0]
    assert line.startswith("sage-env train: error: no CUDA device: --device cuda")
    assert "pass --device cpu" in line
    assert f"model {QWEN7} is not in the local Hugging Face cache" in line
    assert str(tmp_path / "hf" / "hub") in line  # names the cache it looked in
    assert f"hf download {QWEN7}" in line and "--model PATH" in line
    assert "--rollout.engine vllm needs the vllm package" in line  # vLLM is not installed here
    assert "pip install 'sage-env[vllm]'" in line
    assert not out.exists()  # nothing was written


def test_missing_model_in_an_empty_offline_cache(offline_cache):
    (problem,) = model_check.model_problems(QWEN7)
    assert problem.startswith(
        f"model {QWEN7} is not in the local Hugging Face cache ({offline_cache}) and "
        "HF_HUB_OFFLINE=1 forbids downloading: run `hf download"
    )
    assert f"`hf download {QWEN7}`" in problem


def test_cached_config_without_weights_names_the_missing_file(offline_cache):
    _cache_file(offline_cache, QWEN7, "config.json")
    (problem,) = model_check.model_problems(QWEN7)
    assert f"the weights of {QWEN7} are not in the local Hugging Face cache" in problem
    assert "missing model.safetensors" in problem


def test_sharded_weights_must_all_be_cached(offline_cache):
    shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    index = json.dumps({"weight_map": {"a": shards[0], "b": shards[1]}})
    _cache_file(offline_cache, QWEN7, "config.json")
    _cache_file(offline_cache, QWEN7, "model.safetensors.index.json", index)
    _cache_file(offline_cache, QWEN7, shards[0])
    (problem,) = model_check.model_problems(QWEN7)
    assert f"missing {shards[1]}" in problem
    _cache_file(offline_cache, QWEN7, shards[1])
    assert model_check.model_problems(QWEN7) == []


def test_unreachable_hub_online_is_one_problem_at_once(tmp_path, monkeypatch):
    import time

    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    # a closed local port: connection refused, as on a machine without a network
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    start = time.monotonic()
    (problem,) = model_check.model_problems(QWEN7)
    assert time.monotonic() - start < 5  # one request, not the hub client's 25 s of retries
    assert problem.startswith(f"model {QWEN7} is not in the local Hugging Face cache")
    assert "the hub is unreachable (ConnectError)" in problem
    assert f"hf download {QWEN7}" in problem
    _cache_file(tmp_path, QWEN7, "config.json")
    _cache_file(tmp_path, QWEN7, "model.safetensors")
    assert model_check.model_problems(QWEN7) == []  # a cached copy serves without the hub


def test_local_models_and_the_default(tiny_path, tmp_path):
    assert model_check.model_problems(tiny_path) == []
    assert "does not exist" in model_check.model_problems(str(tmp_path / "nope" / "model"))[0]
    assert "has no config.json" in model_check.model_problems(str(tmp_path))[0]


def test_cuda_asked_for_on_a_machine_without_it(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    (problem,) = preflight.device_problems("cuda")
    assert problem.startswith("no CUDA device: --device cuda needs an NVIDIA GPU")
    assert "pass --device cpu" in problem
    assert preflight.device_problems("cpu") == preflight.device_problems("auto") == []


def test_cuda_index_and_processes_beyond_the_devices(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert "has 2 CUDA device(s)" in preflight.device_problems("cuda:2")[0]
    assert preflight.device_problems("cuda:1") == []
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    assert "8 processes on this node but 2 CUDA device(s)" in preflight.device_problems("cuda")[0]


def test_an_fsdp_launch_needs_the_fsdp2_strategy_and_deepspeed_is_refused(monkeypatch):
    assert preflight.launch_problems() == []
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    (problem,) = preflight.launch_problems("ddp")
    assert "add --distributed.strategy fsdp2" in problem
    assert preflight.launch_problems("fsdp2") == []  # FSDP is no longer refused
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    (problem,) = preflight.launch_problems("fsdp2")
    assert problem.startswith("DeepSpeed is not supported")


def test_wandb_chosen_but_not_installed_is_one_line(tiny_path, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb fails, as when absent
    assert "pip install wandb==0.31.0" in preflight.tracker_problems("wandb")[0]
    assert preflight.tracker_problems("tensorboard") == preflight.tracker_problems("none") == []
    out = tmp_path / "run"
    argv = ["train", "--model", tiny_path, "--device", "cpu", "--out", str(out)]
    assert main([*argv, "--report-to", "wandb", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "sage-env train: error: --report-to wandb needs the wandb package, which is not "
        "installed: pip install wandb==0.31.0"
    ]
    assert not out.exists()


def test_everything_missing_is_reported_at_once(offline_cache, monkeypatch):
    import torch

    from learners.training.presets import PRESETS

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setitem(sys.modules, "wandb", None)
    monkeypatch.setitem(sys.modules, "vllm", None)
    cfg = PRESETS["paper-1gpu"]
    cfg = dataclasses.replace(cfg, report_to="wandb")
    with pytest.raises(model_check.PreflightError) as info:
        preflight.check_train(cfg)
    assert len(info.value.problems) == 4  # CUDA, the weights, wandb, vllm
    assert "\n" not in str(info.value)
    assert "Qwen/Qwen2.5-3B-Instruct" in str(info.value)

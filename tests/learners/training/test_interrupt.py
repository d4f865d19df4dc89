"""SIGINT and SIGTERM stop ``sage-env train`` in one line, leave whole files, and the printed
``--resume`` command continues to the same metrics as a run never stopped
(``learners.training.interrupt``)."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from learners.training.checkpoint import checkpoint_dirs
from learners.training.interrupt import Interrupted, deferred, resume_hint, stop_on_signals
from tests.learners.training.test_reproducible_runs import WALL_CLOCK

STEPS = 10
"""Steps of each run: the signal lands after the first checkpoint, well before the last."""


def _args(model: str, out: Path) -> list[str]:
    """The ``debug`` preset on the tiny model, set so its updates change the weights (the
    critic's expected score makes rewards differ within a group), a checkpoint every step."""
    return [
        "--preset", "debug", "--model", model, "--device", "cpu", "--out", str(out),
        "--steps", str(STEPS), "--save-every", "1", "--keep-checkpoints", "2",
        "--rounds-per-step", "4", "--max-new-tokens", "12", "--learner.lr", "1e-3",
        "--env.rewards.critic-score-estimate", "expected", "--no-progress",
    ]  # fmt: skip


def _train(args: list[str], **kw) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "learners", "train", *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _rows(run: Path) -> list[dict]:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not any(w in k for w in WALL_CLOCK)} for r in rows]


@pytest.fixture(scope="module")
def uninterrupted(tiny_path, tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("whole") / "run"
    proc = _train(_args(tiny_path, out))
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    return _rows(out)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_train_in_one_line_and_resume_matches_an_unstopped_run(
    signum, tiny_path, tmp_path, uninterrupted
):
    out = tmp_path / "run"
    proc = _train(_args(tiny_path, out))
    deadline = time.monotonic() + 300
    while not checkpoint_dirs(out) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=300)

    assert proc.returncode == 128 + signum, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    said = [line for line in err.splitlines() if line.startswith("sage-env train: stopped")]
    assert len(said) == 1 and said[0] == err.rstrip().splitlines()[-1], err[-3000:]
    last = checkpoint_dirs(out)[-1]
    name = signal.Signals(signum).name
    assert said[0].startswith(
        f"sage-env train: stopped by {name}; last complete checkpoint {last};"
    )
    assert int(last.name.split("_")[1]) < STEPS  # it stopped mid-run
    # nothing partial: no temp folder, every checkpoint whole, every metrics line JSON
    assert not [p for p in (out / "checkpoints").iterdir() if p.name.startswith(".")]
    for ckpt in checkpoint_dirs(out):
        assert {"model", "learner.pt", "pool.jsonl", "state.json"} <= {
            p.name for p in ckpt.iterdir()
        }
    _rows(out)

    command = shlex.split(said[0].split("; resume: ", 1)[1])
    assert command[:2] == ["sage-env", "train"] and command[-1] == "--resume"
    resumed = _train(command[2:])
    _, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err[-3000:]
    rows = _rows(out)
    assert [r["step"] for r in rows] == [r["step"] for r in uninterrupted]
    assert any(r.get("learner/trained") == 1.0 for r in rows)  # the weights did change
    for got, want in zip(rows, uninterrupted, strict=True):
        diff = {k: (got.get(k), want.get(k)) for k in got.keys() | want.keys()}
        diff = {k: v for k, v in diff.items() if v[0] != v[1]}
        assert not diff, f"step {got['step']}: {diff}"


def test_a_signal_inside_deferred_waits_for_the_block_to_end():
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN in a background job (nohup, &)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a foreground run
    try:
        _signal_inside_deferred()
    finally:
        signal.signal(signal.SIGINT, before)


def _signal_inside_deferred():
    done = []
    with pytest.raises(Interrupted) as caught, stop_on_signals():
        with deferred():
            signal.raise_signal(signal.SIGTERM)
            done.append("wrote the whole file")
    assert done and caught.value.exit_code == 143
    with pytest.raises(Interrupted) as caught, stop_on_signals():
        signal.raise_signal(signal.SIGINT)
    assert caught.value.exit_code == 130
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_resume_hint_names_the_checkpoint_and_the_command(tmp_path):
    ckpt = tmp_path / "checkpoints" / "step_000003"
    ckpt.mkdir(parents=True)
    (ckpt / "state.json").write_text("{}")
    argv = ["--out", str(tmp_path), "--steps", "9"]
    line = resume_hint(Interrupted(signal.SIGINT), tmp_path, argv)
    assert line == (
        f"sage-env train: stopped by SIGINT; last complete checkpoint {ckpt}; "
        f"resume: sage-env train --out {tmp_path} --steps 9 --resume"
    )
    empty = resume_hint(Interrupted(signal.SIGTERM), tmp_path / "new", ["--resume"])
    assert "no checkpoint yet" in empty and empty.endswith("resume: sage-env train --resume")

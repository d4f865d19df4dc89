"""Two training runs under one seed are bitwise equal, for every built-in protocol.

What is reproduced: every number of ``metrics.jsonl`` except wall-clock and memory figures
(:data:`WALL_CLOCK`), the saved pool (``pool.jsonl``, byte for byte) and the structured
transcripts (``transcripts/step_N.jsonl``) of ``sage``, ``azr``, ``mae`` and ``rlvr``
trained by :func:`learners.training.loop.train`, each run in its own interpreter under
another ``PYTHONHASHSEED``, with the protocols trained in opposite orders in the two
interpreters (so nothing one training run leaves in the process reaches the next one's
numbers: the learning-curve benchmark trains its arms one after another in one process).
The configuration is the ``demo`` preset's, as ``benchmarks/learning_curve/run.py`` trains it
(the interleaved SAGE round, the critic's expected score, math grounding by program,
execution tasks beside math and code; the ``ct2`` engine for ``sage``, ``hf`` for the
others), plus what that benchmark leaves out and ``sage-env train --preset demo`` runs: the
format warm-up (not cached), the critic probe with the calibrated gate, validation, and a
resume from the first step's checkpoint, on a tiny random model.

What is not reproduced: wall-clock and memory figures, and any verdict that a time limit
decides. A program that runs out of its CPU budget times out on every host, but a
math-verify comparison has a wall-clock deadline per pair (``MathVerifier.timeout_s``) and
a sandboxed run a wall-clock backstop (``SandboxConfig.wall_limit_s``), so a reply whose
check takes about that long can pass on an idle machine and time out on a loaded one. The
tiny random model writes nothing a verifier runs long on; ``docs/guide/training.md``
("Reproducibility") says what this means for a real model.
"""

from __future__ import annotations

import dataclasses
import filecmp
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROTOCOLS = {"sage": "ct2", "azr": "hf", "mae": "hf", "rlvr": "hf"}
"""The built-in protocols, each trained once per interpreter, and the rollout engine of each
(``ct2``: the demo's and the learning curve's; ``hf``: ``sage-env train``'s default)."""
WALL_CLOCK = ("time/", "memory/", "tokens_per_s", "seconds")
"""A metric whose name holds one of these measures the machine, not the run: not compared."""
STEPS = 2
"""Training steps per run: step 1, its checkpoint, then a resumed run to step 2."""
TRAINS = ("sage", "mae")
"""Protocols whose rewards differ within an advantage group on a random model (the critic's
and the judge's expected scores), so their learner updates the weights. ``azr`` and
``rlvr`` pay every garbage reply alike, so their updates are skipped (the same learner)."""


def run_config(protocol: str, model: str, out: str):
    """The run: the ``demo`` preset of ``protocol``, shrunk to seconds on a tiny model."""
    from learners.training.config import with_algorithm, with_protocol
    from learners.training.presets import PRESETS

    cfg = with_protocol(with_algorithm(PRESETS["demo"], "trr"), protocol)
    env = dataclasses.replace(cfg.env, domains=("math", "code", "exec"), solver_samples=2)
    rollout = dataclasses.replace(cfg.rollout, engine=PROTOCOLS[protocol])
    return dataclasses.replace(
        cfg,
        model=model,
        out=out,
        device="cpu",
        steps=STEPS,
        # 4 rounds: two of them plan tasks of one domain, so the planners' advantage group
        # has two rewards that differ (the critic's expected scores) and SAGE trains
        rounds_per_step=4,
        max_new_tokens=12,
        phase_max_new_tokens={},
        val_every=STEPS,
        val_limit=2,
        val_max_new_tokens=8,
        heldout="",  # held-out items: tests/learners/evaluation/test_heldout_during_training.py
        critic_probe_size=4,
        warmup=dataclasses.replace(cfg.warmup, steps=1, num_demonstrations=4, cache=False),
        learner=dataclasses.replace(cfg.learner, lr=1e-3, gradient_checkpointing=False),
        env=env,
        rollout=rollout,
        report_to="none",
    )


def train_all(model: str, out: Path, order: list[str]) -> None:
    """Train every protocol of ``order`` in this process: step 1, then resumed to step 2."""
    from learners.training.loop import train

    for protocol in order:
        cfg = run_config(protocol, model, str(out / protocol))
        train(dataclasses.replace(cfg, steps=1), progress=False)
        train(dataclasses.replace(cfg, resume=True), progress=False)


def _metrics(run: Path) -> list[dict]:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x]
    return [{k: v for k, v in r.items() if not any(w in k for w in WALL_CLOCK)} for r in rows]


def _spawn(model: str, out: Path, order: list[str], hash_seed: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONHASHSEED": hash_seed,
        "SAGE_ENV_CACHE": str(out / "cache"),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    argv = [sys.executable, __file__, model, str(out), ",".join(order)]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


@pytest.mark.slow
def test_two_runs_of_every_protocol_under_one_seed_are_bitwise_equal(tiny_path, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    procs = [
        _spawn(tiny_path, a, list(PROTOCOLS), "1"),
        _spawn(tiny_path, b, list(reversed(PROTOCOLS)), "4242"),
    ]
    for proc in procs:  # both at once: two cores halve the wait
        log = proc.communicate(timeout=900)[0].decode(errors="replace")
        assert proc.returncode == 0, log[-4000:]
    for protocol in PROTOCOLS:
        ra, rb = a / protocol, b / protocol
        rows = _metrics(ra)
        assert [r["step"] for r in rows] == [0, 1, 2], protocol
        if protocol in TRAINS:  # the update ran, so step 2 sampled from new weights
            assert any(r.get("learner/trained") == 1.0 for r in rows), protocol
        for x, y in zip(rows, _metrics(rb), strict=True):
            diff = {k: (x.get(k), y.get(k)) for k in x.keys() | y.keys() if x.get(k) != y.get(k)}
            assert not diff, f"{protocol} step {x['step']}: {diff}"
        assert filecmp.cmp(ra / "pool.jsonl", rb / "pool.jsonl", shallow=False), protocol
        for step in range(1, STEPS + 1):
            name = f"transcripts/step_{step:06d}.jsonl"
            assert (ra / name).read_bytes() == (rb / name).read_bytes(), f"{protocol} {name}"
        starts = json.loads((ra / "provenance.json").read_text())
        assert [e["start_step"] for e in starts] == [0, 1], protocol  # the start, the resume


def test_a_run_records_the_code_that_trained_it(tmp_path, caplog):
    from learners.training.build import code_provenance, record_provenance

    code = code_provenance()
    root = Path(__file__).resolve().parents[3]
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True)
    if head.returncode == 0:  # a checkout (not an installed copy): the commit and its state
        assert code["git_commit"] == head.stdout.decode().strip()
        assert isinstance(code["git_dirty"], bool)
    assert code["packages"]["torch"] and code["packages"]["sage-env"]
    older = {**code, "git_commit": "0" * 40, "start_step": 0}
    (tmp_path / "provenance.json").write_text(json.dumps([older]))
    entries = record_provenance(tmp_path, 3)  # resumed at step 3 under other code
    assert [e["start_step"] for e in entries] == [0, 3]
    assert "under other code" in caplog.text
    assert record_provenance(tmp_path, 0) == [{"start_step": 0, **code}]  # a new run


if __name__ == "__main__":  # one interpreter's runs: MODEL OUT PROTOCOL,PROTOCOL,...
    train_all(sys.argv[1], Path(sys.argv[2]), sys.argv[3].split(","))

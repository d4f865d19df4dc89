"""Metrics go to metrics.jsonl (ground truth) and, through accelerate's trackers, to TensorBoard
or W&B (``--report-to``); the values a tracker holds are those of metrics.jsonl."""

import json

import pytest

from learners.training.metrics import MetricsLog

ROWS = [
    {"step": 0, "pool/size": 500.0, "critic/auc": 0.5, "reward/planner": None},
    {"step": 1, "pool/size": 503.0, "reward/planner": 0.25, "count/solver": 8.0, "note": "x"},
    {"step": 2, "pool/size": 504.0, "reward/planner": 0.75, "count/solver": 6.0},
]


def _scalars(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _write(out, rows, **kwargs):
    log = MetricsLog(out, **kwargs)
    for row in rows:
        log.write(row)
    log.close()
    log.close()  # idempotent


def test_tensorboard_holds_the_numbers_of_metrics_jsonl(tmp_path):
    _write(tmp_path, ROWS, report_to="tensorboard")
    assert [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()] == ROWS
    events = list((tmp_path / "tb").glob("events.out.tfevents.*"))
    assert len(events) == 1 and [p.name for p in (tmp_path / "tb").iterdir()] == [events[0].name]
    scalars = _scalars(tmp_path / "tb")
    assert scalars == {
        "pool/size": [(0, 500.0), (1, 503.0), (2, 504.0)],
        "critic/auc": [(0, 0.5)],
        "reward/planner": [(1, 0.25), (2, 0.75)],  # None (the role did not act) is skipped
        "count/solver": [(1, 8.0), (2, 6.0)],
    }  # and strings ("note") stay in the JSONL only


def test_report_to_none_writes_no_event_file(tmp_path):
    _write(tmp_path, ROWS, report_to="none")
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 3
    assert not (tmp_path / "tb").exists() and not list(tmp_path.rglob("*tfevents*"))


def test_a_resumed_run_hides_the_steps_the_killed_run_logged_after_its_checkpoint(tmp_path):
    _write(tmp_path, ROWS, report_to="tensorboard")  # killed after step 2, checkpoint at 1
    _write(tmp_path, [{"step": 2, "pool/size": 999.0}], report_to="tensorboard", purge_step=2)
    assert _scalars(tmp_path / "tb")["pool/size"] == [(0, 500.0), (1, 503.0), (2, 999.0)]


def test_unknown_tracker_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="report_to must be one of"):
        MetricsLog(tmp_path, report_to="mlflow")


@pytest.mark.slow
def test_wandb_offline_run_gets_the_rows_and_the_config(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    log = MetricsLog(tmp_path, report_to="wandb", config={"learner": {"lr": 3e-6}})
    for row in ROWS:
        log.write(row)
    run = log.accelerator.get_tracker("wandb", unwrap=True)
    # W&B commits a step's row when the next step starts: step 1 is the last committed one
    assert run.summary["pool/size"] == 503.0 and run.summary["count/solver"] == 8.0
    assert run.config["learner"] == {"lr": 3e-6} and run.project == "sage-env"
    log.close()
    (folder,) = (tmp_path / "wandb").glob("offline-run-*")
    assert list(folder.glob("run-*.wandb"))  # what `wandb sync` uploads later
    assert not (tmp_path / "tb").exists()

"""The end of ``sage-env train`` counts the self-made tasks in the pool (issue 47, item 8)."""

from pathlib import Path

from learners.commands.train import pool_summary, train_command
from learners.reports.run_data import admitted_counts, admitted_line
from sage_env import Task
from sage_env.tasks.exec_tasks import make_task
from sage_env.tasks.task import write_jsonl


def _pool() -> list[Task]:
    seeds = [
        Task("gsm8k/train/1", "math", "What is 2 + 3?", answer="5", source="gsm8k"),
        make_task("deduction", "def f(x):\n    return x + 1", ["1"], ["2"], task_id="s/1",
                  source="exec_seed"),
    ]
    made = [
        make_task("deduction", "def f(x):\n    return x * 2", ["3"], ["6"], task_id="gen/0"),
        make_task("deduction", "def f(x):\n    return x - 2", ["3"], ["1"], task_id="gen/1"),
        make_task(
            "induction", "def f(x):\n    return x * x", ["1", "2", "3", "4"], ["1", "4", "9", "16"],
            task_id="gen/2", message="squares",
        ),
        Task("gen/3", "math", "What is 7 * 6?", answer="42"),
    ]
    return seeds + made


def test_admitted_counts_count_self_made_tasks_by_mode_and_domain():
    assert admitted_counts(_pool()) == {"exec/deduction": 2, "exec/induction": 1, "math": 1}
    assert admitted_counts(_pool()[:2]) == {}


def test_admitted_line_names_total_steps_and_kinds():
    assert admitted_line(admitted_counts(_pool()), steps=12) == (
        "self-made tasks in the pool: 4 over 12 steps "
        "(exec/deduction 2, exec/induction 1, math 1)"
    )
    assert admitted_line({}, steps=1) == "self-made tasks in the pool: 0 over 1 step"
    assert admitted_line({"code": 1}) == "self-made tasks in the pool: 1 (code 1)"


def test_train_prints_the_self_made_tasks_of_its_pool(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"

    def fake_train(cfg, progress=True):  # a finished run: its pool file and last metrics
        Path(cfg.out).mkdir(parents=True)
        write_jsonl(_pool(), Path(cfg.out) / "pool.jsonl")
        return {"step": 3, "pool/generated": 4.0}

    monkeypatch.setattr("learners.training.loop.train", fake_train)
    assert train_command(["--preset", "debug", "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[-2] == (
        "self-made tasks in the pool: 4 over 3 steps (exec/deduction 2, exec/induction 1, math 1)"
    )
    assert printed[-1] == f"finished; artifacts in {out}"
    assert pool_summary(out / "pool.jsonl") == printed[-2].replace(" over 3 steps", "")

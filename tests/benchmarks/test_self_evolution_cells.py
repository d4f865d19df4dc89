"""benchmarks/self_evolution/cells.py: plans, status, run order and budget, aggregation from cell
files alone, a reproducible warm start, and cells pinned to a commit (run in its worktree)."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.self_evolution import cells as ec
from benchmarks.self_evolution import run as se

REPO = Path(__file__).resolve().parents[2]
N = 20  # items of the synthetic held-out set
# right items at the final step (first N); seed s gets s more; the warmed model gets 5
FINAL_RIGHT = {"azr": 12, "azr:frozen": 8, "rlvr": 7}

PLAN = """
[plan]
name = "synthetic"
arms = {arms}
seeds = {seeds}
out = "{out}"
work = "{work}"
minutes_per_cell = {minutes}
estimate_source = "a test"

[settings]
model = "tiny"
warmup_steps = 2
max_steps = 4
eval_every = 2
sets = "exec_heldout:{n}:8"
curve_sets = "exec_heldout"
solver_samples = 8
"""


def _plan(tmp_path, arms=("azr", "azr:frozen", "rlvr"), seeds=(0, 1), minutes=30.0):
    path = tmp_path / "plan.toml"
    path.write_text(
        PLAN.format(
            arms=json.dumps(list(arms)),
            seeds=json.dumps(list(seeds)),
            out=tmp_path / "out",
            work=tmp_path / "work",
            minutes=minutes,
            n=N,
        )
    )
    return path, ec.load_plan(path)


def _right(k):
    return [i < k for i in range(N)]


def _cell(plan, seed, arm, warm="w" * 64, key=None, code="c1", seconds=1200.0, platform="cpu"):
    final = FINAL_RIGHT[arm] + seed
    return {
        "schema": ec.SCHEMA,
        "plan": plan.name,
        "seed": seed,
        "arm": arm,
        "settings": plan.settings,
        "items": {
            "exec_heldout": [
                {"step": 0, "correct": _right(5)},
                {"step": 2, "correct": _right(6)},
                {"step": 4, "correct": _right(final)},
            ]
        },
        "budget": {"steps": 4, "rollout_tokens": 200.0, "train_seconds": 12.0},
        "seconds_per_step": 3.0,
        "eval_seconds": 5.0,
        "step_log": [
            {"step": s, "pool/accepted": 0.0 if arm == "rlvr" else 2.0} for s in range(1, 5)
        ],
        "provenance": {
            "git_commit": "0" * 40,
            "code_key": code,
            "settings_key": key or plan.settings_key(),
            "warm_start_sha256": warm,
            "platform": platform,
        },
        "seconds": seconds,
    }


def _write_cells(plan, **over):
    for seed, arm in plan.cells():
        ec.write_atomic(
            plan.cell_file(seed, arm), _cell(plan, seed, arm, **over.get(f"{seed}/{arm}", {}))
        )


def test_plan_reads_settings_and_overrides_change_the_key(tmp_path):
    path, plan = _plan(tmp_path)
    assert plan.arms == ["azr", "azr:frozen", "rlvr"] and plan.seeds == [0, 1]
    assert plan.settings["max_steps"] == 4 and plan.minutes_per_cell == 30.0
    other = ec.load_plan(path, ["max_steps=8", 'engine="hf"'])
    assert other.settings["max_steps"] == 8 and other.settings["engine"] == "hf"
    assert other.settings_key() != plan.settings_key()
    assert ec.load_plan(path).settings_key() == plan.settings_key()
    cfg = plan.evolution_config()
    assert (cfg.max_steps, cfg.solver_samples, cfg.arms) == (4, 8, "azr,azr:frozen,rlvr")
    with pytest.raises(ValueError, match="unknown settings"):
        ec.load_plan(path, ["nosuch=1"])
    assert plan.cell_file(1, "azr:frozen").name == "seed1__azr-frozen.json"


def test_committed_plan_pins_the_grid_of_issue_47():
    plan = ec.load_plan(REPO / "benchmarks/self_evolution/plans/exec20.toml")
    assert sorted(plan.arms) == ["azr", "azr:frozen", "rlvr", "sage", "sage:frozen"]
    assert plan.arms[:2] == ["sage", "azr"]  # the growing arms run first in every seed
    assert plan.seeds == [0, 1, 2] and len(plan.cells()) == 15
    s = plan.settings
    assert (s["max_steps"], s["eval_every"], s["domains"], s["engine"]) == (20, 10, "exec", "ct2")
    assert s["sets"] == "exec_heldout:240:16,cruxeval_i:200:64,cruxeval_o:200:64"
    assert s["curve_sets"] == "exec_heldout,cruxeval_i,cruxeval_o"
    # k = 4 with 8 proposals a step (the k = 8, 4-round sage cell accepted about 20 in 20 steps)
    assert (s["solver_samples"], s["rounds_per_step"]) == (4, 8)
    assert plan.minutes_per_cell <= 60 and "estimate" in plan.estimate_source
    # pinned: the cells run (and are judged by) one commit's code, whatever main does next
    assert len(plan.commit) == 40 and len(plan.code_key) == 16
    cfg = plan.evolution_config()
    assert cfg.warmup_steps == 24 and cfg.lr == 1e-5
    assert cfg.gate_probe_size == 96  # sage's gate is calibrated per domain, as the demo's
    assert cfg.gate_intact_pass == 0.75 and cfg.warmup_critic_reviews == 0
    assert cfg.gate_critic == "warm_start"  # the gate reads the warm start, frozen


def test_status_lists_done_missing_and_stale_with_minutes(tmp_path):
    _, plan = _plan(tmp_path)
    ec.write_atomic(plan.cell_file(0, "azr"), _cell(plan, 0, "azr", seconds=1230.0))
    ec.write_atomic(plan.cell_file(0, "azr:frozen"), _cell(plan, 0, "azr:frozen", key="old"))
    ec.write_atomic(plan.cell_file(0, "rlvr"), _cell(plan, 0, "rlvr", code="c0", seconds=60))
    ec.write_atomic(plan.cell_file(1, "azr"), _cell(plan, 1, "azr"))
    ec.write_atomic(plan.cell_file(1, "rlvr"), _cell(plan, 1, "rlvr", warm="x" * 64))
    got = {(c.seed, c.arm): c for c in ec.status(plan, code={"key": "c1"})}
    assert got[(0, "azr")].state == "done" and got[(0, "azr")].minutes == pytest.approx(20.5)
    assert (
        got[(0, "azr:frozen")].state == "stale"
        and "settings key old" in got[(0, "azr:frozen")].reason
    )
    assert got[(0, "rlvr")].state == "stale" and "code key c0" in got[(0, "rlvr")].reason
    assert got[(0, "rlvr")].minutes == pytest.approx(1.0)
    assert got[(1, "azr:frozen")].state == "missing" and got[(1, "azr:frozen")].minutes is None
    # seed 1: one cell each on two warm starts; the first seen (plan order) is the reference
    assert got[(1, "azr")].state == "done"
    assert got[(1, "rlvr")].state == "stale" and "warm start" in got[(1, "rlvr")].reason
    table = ec.status_table(list(got.values()))
    assert "| 0 | azr | done | 20.5 |  |" in table
    assert "| 1 | azr:frozen | missing | - |  |" in table
    assert "2 done, 1 missing, 3 stale of 6" in table


def _runner(clock, minutes, calls):
    def run_cell_fn(plan, seed, arm):
        calls.append((seed, arm))
        clock[0] += minutes * 60
        return _cell(plan, seed, arm, seconds=minutes * 60)

    return run_cell_fn


def test_run_missing_fills_whole_seeds_first_and_stops_at_the_budget(tmp_path):
    _, plan = _plan(tmp_path)
    ec.write_atomic(plan.cell_file(0, "azr:frozen"), _cell(plan, 0, "azr:frozen", seconds=600))
    clock, calls = [0.0], []
    ran = ec.run_missing(
        plan, 50, _runner(clock, 20, calls), clock=lambda: clock[0], code={"key": None}
    )
    # expected 10 min (the done cell) -> runs; at 20 min, mean 15 -> runs; at 40, mean 16.7 > 10
    assert ran == calls == [(0, "azr"), (0, "rlvr")]
    rec = json.loads(plan.cell_file(0, "rlvr").read_text())
    assert rec["seconds"] == 1200 and rec["items"]["exec_heldout"][2]["correct"] == _right(7)
    assert not list(plan.cell_file(0, "rlvr").parent.glob(".*tmp*"))
    ran = ec.run_missing(
        plan, 1000, _runner(clock, 20, calls), clock=lambda: clock[0], code={"key": None}
    )
    assert ran == [(1, "azr"), (1, "azr:frozen"), (1, "rlvr")]
    assert ec.run_missing(plan, 1000, _runner(clock, 20, []), code={"key": None}) == []


def test_run_missing_uses_the_plans_estimate_and_the_warm_start_before_any_cell(tmp_path):
    _, plan = _plan(tmp_path, minutes=30.0)
    clock, calls = [0.0], []
    kw = dict(clock=lambda: clock[0], code={"key": None})
    assert ec.run_missing(plan, 29, _runner(clock, 5, calls), **kw) == []
    assert ec.run_missing(plan, 40, _runner(clock, 5, calls), warm_minutes=15, **kw) == []
    # no cell measured: the plan's 30 min -> runs (20 min); then 20 used + 20 measured > 35
    ran = ec.run_missing(plan, 35, _runner(clock, 20, calls), **kw)
    assert ran == calls == [(0, "azr")]
    # the warm start counts once, before the first cell of a call
    clock[0], calls[:] = 0.0, []
    ran = ec.run_missing(plan, 59, _runner(clock, 20, calls), warm_minutes=20, **kw)
    assert ran == [(0, "azr:frozen"), (0, "rlvr")]  # 0 + 20 + 20, 20 + 20 <= 59; 40 + 20 > 59


def test_commit_cell_commits_the_cell_file_alone(tmp_path):
    _, plan = _plan(tmp_path, seeds=(0,))
    git = ["git", "-C", str(tmp_path)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "config", "user.email", "t@t"], check=True)
    subprocess.run([*git, "config", "user.name", "t"], check=True)
    (tmp_path / "other.txt").write_text("x")
    subprocess.run([*git, "add", "other.txt"], check=True)
    ran = ec.run_missing(
        plan,
        100,
        _runner([0.0], 30, []),
        clock=lambda: 0.0,
        code={"key": None},
        on_cell=ec.commit_cell,
    )
    assert len(ran) == 3
    log = subprocess.run([*git, "log", "--format=%s"], capture_output=True, text=True).stdout
    assert log.splitlines() == [
        "cells synthetic: seed0 rlvr (30 min, cpu)",
        "cells synthetic: seed0 azr:frozen (30 min, cpu)",
        "cells synthetic: seed0 azr (30 min, cpu)",
    ]
    shown = subprocess.run(
        [*git, "show", "--name-only", "--format=", "HEAD"], capture_output=True, text=True
    ).stdout.split()
    assert shown == ["out/cells/seed0__rlvr.json"]
    staged = subprocess.run(
        [*git, "diff", "--cached", "--name-only"], capture_output=True, text=True
    )
    assert staged.stdout.split() == ["other.txt"]


def test_run_missing_reruns_stale_cells_only_when_asked(tmp_path):
    _, plan = _plan(tmp_path, seeds=(0,))
    _write_cells(plan, **{"0/rlvr": {"key": "old"}})
    kw = dict(clock=lambda: 0.0, code={"key": None})
    assert ec.run_missing(plan, 100, _runner([0.0], 1, []), **kw) == []
    assert ec.run_missing(plan, 100, _runner([0.0], 1, []), rerun_stale=True, **kw) == [(0, "rlvr")]
    assert ec.status(plan, code={"key": None})[2].state == "done"


def test_aggregate_from_cell_files_gives_the_known_differences(tmp_path):
    _, plan = _plan(tmp_path)
    _write_cells(plan)
    summary = ec.aggregate(plan)
    assert summary["refused"] == [] and summary["missing"] == []
    assert summary["cells"][0] == "seed0/azr" and len(summary["cells"]) == 6
    assert summary["start"]["exec_heldout"]["warmed"]["accuracy"] == 0.25
    assert "untouched" not in summary["start"]["exec_heldout"]
    azr = summary["arms"]["azr"]
    assert azr["final_mean"]["exec_heldout"]["mean"] == pytest.approx((0.6 + 0.65) / 2)
    assert azr["gain_over_warmed"]["exec_heldout"]["mean"] == pytest.approx(0.375)
    assert azr["seeds"]["1"]["sets"]["exec_heldout"]["curve"][1]["accuracy"] == 0.3
    assert azr["accepted_per_run"] == [8.0, 8.0]
    assert azr["seeds"]["0"]["cell"]["platform"] == "cpu"
    diff = summary["comparisons"]["azr - azr:frozen"]["sets"]["exec_heldout"]
    assert diff["per_seed"] == pytest.approx([0.2, 0.2])
    assert diff["mean"] == pytest.approx(0.2) and diff["ci95"] == pytest.approx([0.2, 0.2])
    assert (diff["pooled"]["a_better"], diff["pooled"]["b_better"]) == (8, 0)
    assert diff["pooled"]["p_value"] == pytest.approx(2 * 0.5**8)
    vs = summary["comparisons"]["azr - rlvr"]["sets"]["exec_heldout"]
    assert vs["per_seed"] == pytest.approx([0.25, 0.25])
    out = Path(plan.out)
    table = (out / "table.md").read_text()
    assert "| azr - azr:frozen | exec_heldout | +0.200, +0.200 |" in table
    assert "| azr | exec_heldout | 0.250 | 0.625 | +0.375" in table
    saved = json.loads((out / "summary.json").read_text())
    assert saved["settings_key"] == plan.settings_key() and saved["table"] == summary["table"]
    assert (out / "heldout.png").stat().st_size > 1000 and (out / "pool.png").stat().st_size > 1000


def test_aggregate_of_a_plan_with_no_cell_done_writes_an_empty_summary(tmp_path):
    """A new plan aggregated before its first cell lands: no scores, no plots, no crash (it
    raised in matplotlib on zero held-out sets)."""
    _, plan = _plan(tmp_path)
    summary = ec.aggregate(plan)
    assert summary["cells"] == [] and summary["refused"] == [] and len(summary["missing"]) == 6
    assert summary["start"] == {}
    out = Path(plan.out)
    assert json.loads((out / "summary.json").read_text())["cells"] == []
    assert (out / "table.md").exists()
    assert not (out / "heldout.png").exists() and not (out / "pool.png").exists()


def test_aggregate_refuses_a_stale_settings_key_or_warm_start_with_the_reason(tmp_path):
    _, plan = _plan(tmp_path)
    _write_cells(plan, **{"0/azr:frozen": {"key": "old"}, "1/rlvr": {"warm": "x" * 64}})
    summary = ec.aggregate(plan)
    refused = {(r["seed"], r["arm"]): r["reason"] for r in summary["refused"]}
    assert set(refused) == {(0, "azr:frozen"), (1, "rlvr")}
    assert refused[(0, "azr:frozen")].startswith(
        f"settings key old != the plan's {plan.settings_key()}"
    )
    assert "warm start sha256/platform ('" + "x" * 64 in refused[(1, "rlvr")]
    assert "seed0/azr:frozen" not in summary["cells"] and len(summary["cells"]) == 4
    assert summary["arms"]["azr:frozen"]["accepted_per_run"] == [2.0 * 4]
    # each comparison keeps only the seeds both arms have
    assert summary["comparisons"]["azr - azr:frozen"]["sets"]["exec_heldout"]["per_seed"] == (
        pytest.approx([0.2])
    )
    assert summary["comparisons"]["azr - rlvr"]["sets"]["exec_heldout"]["per_seed"] == (
        pytest.approx([0.25])
    )
    saved = json.loads((Path(plan.out) / "summary.json").read_text())
    assert saved["refused"] == summary["refused"]


def test_aggregate_command_loads_no_torch(tmp_path):
    path, plan = _plan(tmp_path)
    _write_cells(plan, **{"1/rlvr": {"key": "old"}})
    code = (
        "import sys\n"
        "from benchmarks.self_evolution import run\n"
        f"run.main(['--plan', {str(path)!r}, '--aggregate'])\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "assert 'transformers' not in sys.modules\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"refused seed1/rlvr: settings key old != the plan's {plan.settings_key()}" in (
        done.stdout
    )
    assert "| azr - azr:frozen | exec_heldout | +0.200, +0.200 |" in done.stdout
    assert (Path(plan.out) / "summary.json").exists()


def test_status_command_prints_the_table(tmp_path, capsys):
    path, plan = _plan(tmp_path, seeds=(0,))
    ec.write_atomic(plan.cell_file(0, "azr"), _cell(plan, 0, "azr", seconds=90))
    se.main(["--plan", str(path), "--status"])
    out = capsys.readouterr().out
    assert out.startswith("code: cells judged against this checkout (HEAD ")
    assert "| 0 | azr | " in out and "| 1.5 |" in out
    assert "| 0 | rlvr | missing | - |  |" in out


def test_weights_hash_ignores_file_metadata_and_tensor_layout(tmp_path):
    np = pytest.importorskip("numpy")
    st = pytest.importorskip("safetensors.numpy")
    a = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(3, dtype=np.float32)}
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    st.save_file(a, str(tmp_path / "one" / "model.safetensors"), metadata={"format": "pt"})
    st.save_file(dict(reversed(a.items())), str(tmp_path / "two" / "model.safetensors"))
    assert ec.weights_sha256(tmp_path / "one") == ec.weights_sha256(tmp_path / "two")
    a["b"][0] = 2.0
    st.save_file(a, str(tmp_path / "two" / "model.safetensors"))
    assert ec.weights_sha256(tmp_path / "one") != ec.weights_sha256(tmp_path / "two")
    with pytest.raises(FileNotFoundError):
        ec.weights_sha256(tmp_path)


def test_run_cell_writes_items_budget_and_provenance(tmp_path, monkeypatch):
    """The real cell runner with the warm start and the curve stood in (no model)."""
    np = pytest.importorskip("numpy")
    st = pytest.importorskip("safetensors.numpy")
    import sage_env.sandbox as sandbox
    from benchmarks.learning_curve import run as lc

    _, plan = _plan(tmp_path, seeds=(3,))
    # the level comes from the sandbox's own probe, not from a constant
    monkeypatch.setattr(sandbox, "isolation_level", lambda: "probed-level")
    warm = tmp_path / "warm"
    warm.mkdir()
    st.save_file({"w": np.zeros(2, dtype=np.float32)}, str(warm / "model.safetensors"))
    monkeypatch.setattr(se, "warm_start", lambda cfg: (str(warm), {"steps": 2, "folder": "x"}))
    seen = []

    def run_curve(ccfg):
        seen.append(ccfg)
        state = {
            "curves": {"exec_heldout": [[0, _right(5)], [2, _right(6)], [4, _right(9)]]},
            "result": {
                "budget": {"steps": 4, "rollout_tokens": 99.0, "train_seconds": 8.0},
                "seconds_per_step": 2.0,
                "eval_seconds": 1.0,
                "step_log": [{"step": 1, "pool/accepted": 3.0}],
                "code": None,
            },
        }
        ec.write_atomic(Path(ccfg.out) / "partial" / "azr-frozen.json", state)

    monkeypatch.setattr(lc, "run_curve", run_curve)
    rec = ec.run_cell(plan, 3, "azr:frozen")
    (ccfg,) = seen
    assert ccfg.protocols == "azr:frozen" and ccfg.seed == 3 and ccfg.model == str(warm)
    assert ccfg.out == str(tmp_path / "work" / "seed3") and ccfg.resume
    assert (ccfg.max_steps, ccfg.eval_every, ccfg.solver_samples) == (4, 2, 8)
    assert rec["items"]["exec_heldout"][2] == {"step": 4, "correct": _right(9)}
    assert rec["budget"]["rollout_tokens"] == 99.0 and rec["budget"]["solver_samples"] == 8
    assert rec["pool"]["accepted_total"] == 3.0
    prov = rec["provenance"]
    assert prov["warm_start_sha256"] == ec.weights_sha256(warm)
    assert prov["settings_key"] == plan.settings_key() and prov["platform"] == "cpu"
    assert prov["warm_start"] == {"steps": 2} and rec["seconds"] >= 0
    assert prov["sandbox_isolation"] == "probed-level"


WARM = """
import json, sys
from benchmarks.self_evolution import run as se
from benchmarks.self_evolution.cells import weights_sha256
folder, _ = se.warm_start(se.EvolutionConfig(model=sys.argv[1], warmup_steps=3, progress=False))
print(json.dumps({"folder": folder, "sha256": weights_sha256(folder)}))
"""


@pytest.mark.slow
def test_warm_start_is_bitwise_reproducible_across_processes_and_thread_counts(tmp_path, tiny_path):
    """Two fresh processes, two caches, 1 and 3 torch threads: the same weights (1 thread
    against 2 gave other weights before the build pinned its threads)."""
    got = []
    for i, threads in enumerate(("1", "3")):
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "SAGE_ENV_CACHE": str(tmp_path / f"cache{i}"),
            "OMP_NUM_THREADS": threads,
            "HF_HUB_OFFLINE": "1",
        }
        done = subprocess.run(
            [sys.executable, "-c", WARM, tiny_path],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        got.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert got[0]["folder"] != got[1]["folder"]
    assert Path(got[0]["folder"]).name == Path(got[1]["folder"]).name  # the same key
    assert got[0]["sha256"] == got[1]["sha256"]


# --------------------------------------------------------------------------- pinned code
FAKE_CELLS = '''"""A stand-in cells module: --run-cell writes what it saw as the record."""
import json, os, subprocess, sys
args = sys.argv[1:]
seed, arm = args[args.index("--run-cell") + 1 : args.index("--run-cell") + 3]
print(f"child: seed {seed} {arm} starts", file=sys.stderr, flush=True)
if arm == "fail":
    print("x" * 3000 + "boom", file=sys.stderr)
    sys.exit(3)
head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout
import sage_env
record = {"sage_env": sage_env.__file__, "version": sage_env.VERSION,
    "seed": int(seed), "arm": arm, "argv": args, "cwd": os.getcwd(), "file": __file__,
    "pythonpath": os.environ.get("PYTHONPATH"), "offline": os.environ.get("HF_HUB_OFFLINE"),
    "seconds": 60.0, "provenance": {"git_commit": head.strip(), "code_key": "fake"},
}
if arm != "silent":
    with open(args[args.index("--record") + 1], "w") as fh:
        json.dump(record, fh)
'''


def _git(root, *args):
    return subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def _code_repo(tmp_path, top="benchmarks"):
    """A git repository with CODE_PATHS and a stand-in cells module --run-cell: commit one,
    then commit two changing sage_env/. ``top="experiments"``: the layout of a commit from
    before the move to benchmarks/. Returns (root, sha one, sha two)."""
    root = tmp_path / "repo"
    files = {
        "sage_env/__init__.py": "VERSION = 1\n",
        "learners/__init__.py": "",
        f"{top}/__init__.py": "",
        f"{top}/learning_curve/run.py": "# curve\n",
        f"{top}/self_evolution/__init__.py": "",
        f"{top}/self_evolution/cells.py": FAKE_CELLS + "# --run-cell\n",
        "README.md": "one\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    _git(root, "init", "-q")
    _git(root, "config", "user.email", "t@t")
    _git(root, "config", "user.name", "t")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "one")
    one = _git(root, "rev-parse", "HEAD")
    (root / "sage_env/__init__.py").write_text("VERSION = 2\n")
    _git(root, "commit", "-q", "-am", "two")
    return root, one, _git(root, "rev-parse", "HEAD")


def _pinned_plan(tmp_path, commit, seeds=(0,)):
    path, _ = _plan(tmp_path, seeds=seeds)
    head = 'name = "synthetic"\n'
    path.write_text(path.read_text().replace(head, f'{head}commit = "{commit}"\n'))
    return path, ec.load_plan(path)


def test_code_key_at_a_revision_covers_its_trees_and_head_adds_the_edits(tmp_path):
    root, one, two = _code_repo(tmp_path)
    at_one, head = ec.code_key(root, one), ec.code_key(root)
    assert at_one["git_commit"] == one and head["git_commit"] == two
    assert len(at_one["key"]) == 16 and at_one["key"] != head["key"]
    assert at_one["dirty"] is False and head["dirty"] is False
    assert ec.code_key(root, "HEAD~1") == at_one and ec.code_key(root, one[:8]) == at_one
    assert ec.code_key(root, two)["key"] == head["key"]  # clean HEAD: its commit's key
    (root / "learners/__init__.py").write_text("x = 1\n")  # an edit: HEAD's key moves
    edited = ec.code_key(root)
    assert edited["dirty"] is True and edited["key"] not in (head["key"], at_one["key"])
    assert ec.code_key(root, two) == {"key": head["key"], "git_commit": two, "dirty": False}
    (root / "README.md").write_text("two\n")  # outside CODE_PATHS: no change
    assert ec.code_key(root)["key"] == edited["key"]
    assert ec.code_key(root, "nosuch") == {"key": None, "git_commit": None, "dirty": None}


def test_code_key_leaves_out_a_path_a_revision_lacks(tmp_path, monkeypatch):
    """A path added to CODE_PATHS after a commit leaves that commit's key as it was: the hash
    of the trees it has, as ``git rev-parse REV:PATH...`` listed them."""
    root, one, two = _code_repo(tmp_path)
    older = tuple(p for p in ec.CODE_PATHS if (root / p).exists())  # what the repo has
    trees = _git(root, "rev-parse", *(f"{one}:{p}" for p in older)) + "\n"
    before = hashlib.sha256((trees + "\0").encode()).hexdigest()[:16]
    assert ec.code_trees(root, one) == trees and ec.code_key(root, one)["key"] == before
    monkeypatch.setattr(ec, "CODE_PATHS", (*older, "benchmarks/shared"))
    assert ec.code_trees(root, one) == trees  # the new path is absent there: left out
    assert ec.code_key(root, one)["key"] == before
    (root / "benchmarks/shared").mkdir()
    (root / "benchmarks/shared/__init__.py").write_text('"""shared"""\n')
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "three")
    three = _git(root, "rev-parse", "HEAD")
    every = _git(root, "rev-parse", *(f"{three}:{p}" for p in (*older, "benchmarks/shared")))
    every += "\n"
    assert ec.code_trees(root, three) == every  # every path there: in CODE_PATHS order
    assert ec.code_key(root, three)["key"] not in (before, ec.code_key(root, two)["key"])
    (root / "benchmarks/shared/__init__.py").write_text('"""edited"""\n')
    edited = ec.code_key(root)
    assert edited["dirty"] is True and edited["key"] != ec.code_key(root, three)["key"]
    assert ec.code_trees(root, "nosuch") is None


def test_every_code_path_exists_here_and_the_pinned_commit_keeps_its_recorded_key():
    # a path missing here would drop out of this checkout's key silently; the former paths
    # (the experiment code before the move to benchmarks/) are for older commits' keys alone
    assert [p for p in ec.CODE_PATHS if not (REPO / p).exists()] == list(ec.FORMER_CODE_PATHS)
    assert not any((REPO / p).exists() for p in ec.FORMER_CODE_PATHS)
    plan = ec.load_plan(REPO / "benchmarks/self_evolution/plans/exec20.toml")
    if ec.resolve_commit(plan.commit, REPO) is None:
        pytest.skip(f"this clone lacks the pinned commit {plan.commit[:12]}")
    assert ec.code_key(REPO, plan.commit)["key"] == plan.code_key


def test_plan_reads_the_pinned_commit(tmp_path):
    path, plan = _plan(tmp_path)
    assert plan.commit == "" and plan.path == str(path.resolve()) and plan.overrides == []
    assert ec.load_plan(path, ["max_steps=2"]).overrides == ["max_steps=2"]
    _, pinned = _pinned_plan(tmp_path, "abc123")
    assert pinned.commit == "abc123" and "commit" not in pinned.extra


def test_a_pinned_plan_judges_cells_against_its_commit_not_head(tmp_path):
    root, one, two = _code_repo(tmp_path)
    k_one, k_head = ec.code_key(root, one)["key"], ec.code_key(root)["key"]
    _, plan = _pinned_plan(tmp_path, one[:10], seeds=(0,))
    ec.write_atomic(plan.cell_file(0, "azr"), _cell(plan, 0, "azr", code=k_one))
    ec.write_atomic(plan.cell_file(0, "rlvr"), _cell(plan, 0, "rlvr", code=k_head))
    got = {c.arm: c for c in ec.status(plan, root=root)}
    assert got["azr"].state == "done" and got["azr"].reason == ""
    assert got["rlvr"].state == "stale"
    assert got["rlvr"].reason == f"code key {k_head} != pinned commit {one[:12]}'s {k_one}"
    assert got["azr:frozen"].state == "missing"
    line = ec.reference_line(plan, root)
    assert line.startswith(f"code: cells judged against the pinned commit {one} (code key {k_one}")
    assert line.endswith(f"differs: cells run in {tmp_path / 'work' / ('code-' + one[:12])}")
    # unpinned: the same cells are judged against this checkout (HEAD two)
    plan.commit = ""
    got = {c.arm: c for c in ec.status(plan, root=root)}
    assert got["rlvr"].state == "done"
    assert got["azr"].reason == f"code key {k_one} != this checkout's {k_head}"
    assert ec.reference_line(plan, root) == (
        f"code: cells judged against this checkout (HEAD {two[:12]}, clean, code key {k_head}); "
        "the plan pins no commit"
    )
    plan.commit = two
    assert ec.reference_line(plan, root).endswith(f"{k_head} matches: cells run here")
    plan.commit = "nosuch"
    with pytest.raises(ValueError, match="'nosuch' is not a commit"):
        ec.status(plan, root=root)


def test_a_recorded_code_key_judges_cells_without_the_commit(tmp_path):
    # a clone without the commit, or a checkout where CODE_PATHS moved, still judges the grid
    root, one, _ = _code_repo(tmp_path)
    k_one = ec.code_key(root, one)["key"]
    _, plan = _pinned_plan(tmp_path, "f" * 40, seeds=(0,))  # a commit this repo lacks
    plan.code_key = k_one
    ec.write_atomic(plan.cell_file(0, "azr"), _cell(plan, 0, "azr", code=k_one))
    ec.write_atomic(plan.cell_file(0, "rlvr"), _cell(plan, 0, "rlvr", code="0" * 16))
    got = {c.arm: c for c in ec.status(plan, root=root)}
    assert got["azr"].state == "done"
    assert got["rlvr"].reason == f"code key {'0' * 16} != pinned commit ffffffffffff's {k_one}"
    plan.commit = ""
    with pytest.raises(ValueError, match="code_key needs the commit"):
        ec.status(plan, root=root)


def test_pinned_command_runs_the_worktrees_cells_on_this_checkouts_folders(tmp_path):
    path, plan = _plan(tmp_path)
    plan = ec.load_plan(path, ["max_steps=2", 'engine="hf"'])
    plan.out, plan.work = "results/syn", "runs/syn"
    wt, rec = tmp_path / "runs/syn/code-abc", tmp_path / "rec.json"
    environ = {"PYTHONPATH": "/a", "HF_HUB_OFFLINE": "1", "X": "y"}
    argv, cwd, env = ec.pinned_command(
        plan, 1, "azr:frozen", wt, rec, root=Path("/repo"), environ=environ, executable="/py"
    )
    assert argv == [
        "/py", "-m", "benchmarks.self_evolution.cells",
        "--plan", str(path.resolve()),
        "--run-cell", "1", "azr:frozen",
        "--record", str(rec),
        "--out", "/repo/results/syn",
        "--work", "/repo/runs/syn",
        "--set", "max_steps=2", "--set", 'engine="hf"',
    ]  # fmt: skip
    assert cwd == wt
    assert env == {"PYTHONPATH": f"{wt}{os.pathsep}/a", "HF_HUB_OFFLINE": "1", "X": "y"}
    assert environ["PYTHONPATH"] == "/a"  # not changed in place
    plan.out, plan.work = str(tmp_path / "o"), str(tmp_path / "w")
    argv, _, env = ec.pinned_command(plan, 0, "azr", wt, rec, environ={})
    assert argv[argv.index("--out") + 1] == str(tmp_path / "o")
    assert argv[argv.index("--work") + 1] == str(tmp_path / "w")
    assert argv[0] == sys.executable and env == {"PYTHONPATH": str(wt)}
    plan.path = ""
    with pytest.raises(ValueError, match="no file"):
        ec.pinned_command(plan, 0, "azr", wt, rec)


def test_run_missing_runs_a_pinned_plan_through_the_worktree_only_when_the_keys_differ(tmp_path):
    _, plan = _pinned_plan(tmp_path, "abc", seeds=(0,))
    code = {"key": "k1", "against": "pinned commit abc"}
    here, there, written = [], [], []

    def runner(into):
        def fn(plan, seed, arm):
            into.append((seed, arm))
            return _cell(plan, seed, arm, code="k1", seconds=60)

        return fn

    kw = dict(clock=lambda: 0.0, code=code, run_cell_fn=runner(here))
    kw.update(run_pinned_fn=runner(there), on_cell=lambda p, r: written.append(p))
    ran = ec.run_missing(plan, 1000, checkout={"key": "k2"}, **kw)
    assert ran == there == [(0, "azr"), (0, "azr:frozen"), (0, "rlvr")] and here == []
    assert written == [plan.cell_file(0, a) for a in plan.arms]  # this checkout's out
    assert json.loads(plan.cell_file(0, "rlvr").read_text())["provenance"]["code_key"] == "k1"
    assert [c.state for c in ec.status(plan, code=code)] == ["done"] * 3
    for arm in plan.arms:
        plan.cell_file(0, arm).unlink()
    assert ec.run_missing(plan, 1000, checkout={"key": "k1"}, **kw) == here
    assert len(here) == 3 and len(there) == 3  # the checkout is the pinned code: in-process
    plan.commit = ""
    for arm in plan.arms:
        plan.cell_file(0, arm).unlink()
    ec.run_missing(plan, 1000, checkout={"key": "k2"}, **kw)  # no pin: in-process
    assert len(here) == 6 and len(there) == 3


def test_run_cell_pinned_runs_a_child_in_a_worktree_of_the_commit(tmp_path, monkeypatch, capfd):
    root, one, two = _code_repo(tmp_path)
    _, plan = _pinned_plan(tmp_path, one[:10], seeds=(0,))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    rec = ec.run_cell_pinned(plan, 0, "azr", root=root)
    wt = tmp_path / "work" / f"code-{one[:12]}"
    assert rec["cwd"] == str(wt)
    assert rec["file"] == str(wt / "benchmarks/self_evolution/cells.py")
    assert rec["provenance"]["git_commit"] == one
    # the worktree's packages, not this checkout's (an editable install included)
    assert (rec["sage_env"], rec["version"]) == (str(wt / "sage_env/__init__.py"), 1)
    assert (wt / "sage_env/__init__.py").read_text() == "VERSION = 1\n"
    assert rec["pythonpath"].split(os.pathsep)[0] == str(wt) and rec["offline"] == "1"
    assert rec["argv"][:4] == ["--plan", plan.path, "--run-cell", "0"]
    assert rec["argv"][rec["argv"].index("--work") + 1] == str(tmp_path / "work")
    assert ec.code_key(wt)["key"] == ec.code_key(root, one)["key"]  # what status compares
    assert "child: seed 0 azr starts" in capfd.readouterr().err  # streamed
    assert ec.run_cell_pinned(plan, 0, "rlvr", root=root)["arm"] == "rlvr"  # reused
    with pytest.raises(RuntimeError, match="cell seed 0 fail failed") as err:
        ec.run_cell_pinned(plan, 0, "fail", root=root)
    tail = str(err.value).split("its stderr ends:\n", 1)[1]
    assert len(tail) == ec.TAIL_CHARS and tail.endswith("x" * 100 + "boom\n")
    with pytest.raises(RuntimeError, match="wrote no record"):
        ec.run_cell_pinned(plan, 0, "silent", root=root)
    (wt / "sage_env/__init__.py").write_text("VERSION = 3\n")
    with pytest.raises(RuntimeError, match="has edits"):
        ec.run_cell_pinned(plan, 0, "azr", root=root)
    _git(wt, "checkout", "-q", "--", ".")
    assert ec.pinned_worktree(plan, root) == wt
    plan.commit = "HEAD"  # another commit: another worktree
    assert ec.pinned_worktree(plan, root) == tmp_path / "work" / f"code-{two[:12]}"
    _git(wt, "checkout", "-q", "--detach", two)  # the folder of commit one at commit two
    plan.commit = one
    with pytest.raises(RuntimeError, match="is not a checkout of the pinned commit"):
        ec.pinned_worktree(plan, root)
    other = tmp_path / "work" / f"code-{two[:12]}"
    _git(root, "worktree", "remove", "--force", str(other))
    other.mkdir()  # a plain folder under the worktree's name
    plan.commit = two
    with pytest.raises(RuntimeError, match="is not a checkout of the pinned commit"):
        ec.pinned_worktree(plan, root)
    plan.commit = "0123456789ab"
    with pytest.raises(ValueError, match="is not in"):
        ec.pinned_worktree(plan, root)


def test_a_pinned_cell_runs_the_cells_module_by_the_name_its_worktree_has(tmp_path):
    path, plan = _plan(tmp_path)
    wt, rec = tmp_path / "wt", tmp_path / "rec.json"
    assert ec.cells_module(wt) == "benchmarks.self_evolution.cells"  # neither there: today's
    (wt / "experiments/self_evolution").mkdir(parents=True)
    (wt / "experiments/self_evolution/cells.py").write_text("# --run-cell\n")
    assert ec.cells_module(wt) == "experiments.self_evolution.cells"  # before the move
    argv, _, _ = ec.pinned_command(plan, 0, "azr", wt, rec, environ={})
    assert argv[1:3] == ["-m", "experiments.self_evolution.cells"]
    (wt / "benchmarks/self_evolution").mkdir(parents=True)
    (wt / "benchmarks/self_evolution/cells.py").write_text("# --run-cell\n")
    assert ec.cells_module(wt) == "benchmarks.self_evolution.cells"
    argv, _, _ = ec.pinned_command(plan, 0, "azr", wt, rec, environ={})
    assert argv[1:3] == ["-m", "benchmarks.self_evolution.cells"]


def test_a_commit_from_before_the_move_to_benchmarks_keeps_its_key_and_runs_its_cells(
    tmp_path, monkeypatch
):
    """A commit with the experiment code under experiments/ (the exec20 plan's pinned one):
    its key hashes the trees it has, as before the move, and its own cells module runs."""
    root, one, _ = _code_repo(tmp_path, top="experiments")
    old = ("sage_env", "learners", "experiments/learning_curve/run.py")
    trees = _git(root, "rev-parse", *(f"{one}:{p}" for p in old)) + "\n"
    assert ec.code_key(root, one)["key"] == hashlib.sha256((trees + "\0").encode()).hexdigest()[:16]
    _, plan = _pinned_plan(tmp_path, one[:10], seeds=(0,))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    rec = ec.run_cell_pinned(plan, 0, "azr", root=root)
    wt = tmp_path / "work" / f"code-{one[:12]}"
    assert rec["file"] == str(wt / "experiments/self_evolution/cells.py")
    assert rec["provenance"]["git_commit"] == one
    (wt / "experiments/self_evolution/cells.py").write_text("# old\n")
    with pytest.raises(RuntimeError, match="predates pinning"):
        ec.pinned_worktree(plan, root)


def test_a_commit_before_run_cell_cannot_be_pinned(tmp_path):
    root, _, two = _code_repo(tmp_path)
    (root / "benchmarks/self_evolution/cells.py").write_text("# old\n")
    _git(root, "commit", "-q", "-am", "old cells")
    _, plan = _pinned_plan(tmp_path, "HEAD", seeds=(0,))
    with pytest.raises(RuntimeError, match="predates pinning"):
        ec.pinned_worktree(plan, root)


def test_run_cell_command_writes_the_record(tmp_path, monkeypatch):
    path, plan = _plan(tmp_path, seeds=(0,))
    monkeypatch.setattr(ec, "run_cell", lambda plan, seed, arm: _cell(plan, seed, arm, code="k"))
    out = tmp_path / "rec" / "r.json"
    got = ec.main(["--plan", str(path), "--run-cell", "0", "rlvr", "--record", str(out)])
    assert got["arm"] == "rlvr" and json.loads(out.read_text()) == got
    assert not plan.cell_file(0, "rlvr").exists()  # the parent writes the cell file
    with pytest.raises(ValueError, match="no cell seed 5 rlvr"):
        ec.main(["--plan", str(path), "--run-cell", "5", "rlvr", "--record", str(out)])
    with pytest.raises(SystemExit):
        ec.main(["--plan", str(path), "--run-cell", "0", "rlvr"])
    with pytest.raises(SystemExit):
        ec.main(["--plan", str(path), "--status", "--run-cell", "0", "rlvr", "--record", "x"])


def test_cells_module_runs_as_a_command_and_status_names_the_reference(tmp_path):
    path, _ = _plan(tmp_path, seeds=(0,))
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.self_evolution.cells", "--plan", str(path), "--status"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    first, *rest = done.stdout.splitlines()
    assert first.startswith("code: cells judged against this checkout (HEAD ")
    assert rest[0] == "| seed | arm | state | minutes | reason |"
    assert "0 done, 3 missing, 0 stale of 3" in done.stdout

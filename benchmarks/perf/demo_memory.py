"""Peak RSS of the demo, phase by phase (issue 23): ``sage-env train`` in this process with
each phase of the loop timed and its RSS measured.

Usage (the demo cut to 2 steps that validate at steps 0 and 2, as in
``benchmarks/perf/results/demo_memory.json``)::

    /usr/bin/time -v python -m benchmarks.perf.demo_memory --json phases.json -- \\
        --preset demo --steps 2 --val-every 2 --report-to none --out runs/mem

Everything after ``--`` goes to ``sage-env train``. A thread samples ``/proc/self/statm``
every 10 ms; each phase (the warm-up, a rollout, the engine's release, the update, a
conversion, a sync, validation, the critic probe, a checkpoint) records its RSS before and
after and the largest sample while it ran (MB; nested phases such as a conversion inside a
sync each record their own). The JSON holds the phases in order, each step's
``memory/peak_rss_mb`` and the peak of the whole process (``ru_maxrss``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any

PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20


def rss_mb() -> float:
    """Resident set size of this process now, MB (``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE_MB


class PhaseMeter:
    """Phases with their RSS before/after and their peak (a 10 ms sampling thread)."""

    def __init__(self) -> None:
        self.phases: list[dict[str, Any]] = []
        self._open: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            now = rss_mb()
            with self._lock:
                for phase in self._open:
                    phase["peak"] = max(phase["peak"], now)

    @contextlib.contextmanager
    def phase(self, name: str):
        before = rss_mb()
        record = {"phase": name, "rss_before": before, "peak": before}
        with self._lock:
            self._open.append(record)
        t0 = time.perf_counter()
        try:
            yield
        finally:
            after = rss_mb()
            with self._lock:
                self._open.remove(record)
                record["peak"] = max(record["peak"], after)
            record.update(rss_after=after, s=time.perf_counter() - t0)
            self.phases.append(record)

    def wrap(self, owner: Any, attribute: str, name: str) -> None:
        """Replace ``owner.attribute`` (a function) by one measured as phase ``name``."""
        real = getattr(owner, attribute)

        @functools.wraps(real)
        def measured(*args: Any, **kwargs: Any) -> Any:
            with self.phase(name):
                return real(*args, **kwargs)

        setattr(owner, attribute, measured)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def _dump_buffers(learner_class: Any, folder: Path) -> None:
    """Make ``learner_class.update`` pickle its buffer to ``folder/update_N.pkl`` first."""
    import pickle

    folder.mkdir(parents=True, exist_ok=True)
    real = learner_class.update
    count = [0]

    @functools.wraps(real)
    def dumping(self: Any) -> Any:
        count[0] += 1
        with open(folder / f"update_{count[0]}.pkl", "wb") as f:
            pickle.dump(list(self.buffer), f)
        return real(self)

    learner_class.update = dumping


def main() -> int:
    """Run ``sage-env train`` with the arguments after ``--``, phases measured."""
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", required=True, help="where to write the phases (JSON)")
    parser.add_argument(
        "--dump-buffers",
        default=None,
        help="folder: pickle each update's buffer there (update_N.pkl, a list of Transition) "
        "for benchmarks/perf/update_memory.py --buffers",
    )
    args = parser.parse_args(argv[:split])
    train_args = argv[split + 1 :]

    from learners import cli
    from learners.algorithms.pg import PolicyGradientLearner
    from learners.engines.ct2_engine import CT2Engine
    from learners.policy.hf_policy import HFPolicy
    from learners.rollout import RolloutDriver
    from learners.training import build, loop
    from learners.training.monitors import CriticProbe

    meter = PhaseMeter()
    meter.wrap(build, "_warm_up", "warm_up")
    meter.wrap(RolloutDriver, "collect", "collect")
    meter.wrap(HFPolicy, "release_engine", "release")
    meter.wrap(PolicyGradientLearner, "update", "update")
    meter.wrap(CT2Engine, "_convert", "ct2_convert")
    meter.wrap(HFPolicy, "sync_engine", "sync")
    meter.wrap(loop, "_validate", "validate")
    meter.wrap(CriticProbe, "__call__", "probe")
    meter.wrap(loop, "save_checkpoint", "checkpoint")
    if args.dump_buffers:  # outside the measured update
        _dump_buffers(PolicyGradientLearner, Path(args.dump_buffers))
    t0 = time.perf_counter()
    try:
        rc = cli.main(["train", *train_args])
    finally:
        meter.close()
    out = None
    if "--out" in train_args:
        out = Path(train_args[train_args.index("--out") + 1])
    steps = {}
    if out is not None and (out / "metrics.jsonl").exists():
        for line in (out / "metrics.jsonl").read_text().splitlines():
            row = json.loads(line)
            if "memory/peak_rss_mb" in row:
                steps[str(row["step"])] = row["memory/peak_rss_mb"]
    result = {
        "argv": train_args,
        "seconds": time.perf_counter() - t0,
        "ru_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "peak_rss_mb_per_step": steps,
        "phases": [
            {k: (round(v, 1) if isinstance(v, float) else v) for k, v in p.items()}
            for p in meter.phases
        ],
    }
    Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())

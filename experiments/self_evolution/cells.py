r"""The self-evolution experiment as a grid of cells (one arm x one seed), run piecewise (issue 47).

A **plan** (TOML, ``plans/*.toml``) names the arms, the seeds, the settings every cell shares
(``[settings]``: the fields of :class:`~experiments.self_evolution.run.EvolutionConfig` plus
``precision``) and the estimated minutes of a cell. A **cell** trains one arm on one seed from
the shared warm start (:func:`~experiments.self_evolution.run.warm_start`) and writes one file,
``OUT/cells/seed<s>__<arm>.json`` (atomically), holding everything the summary needs: per-item
outcomes at every evaluation step, pool dynamics per step, the budget, and provenance (git
commit, the code key, the settings key, the SHA-256 of the warm-started weights, platform).
Cells are committed as they finish; the summary is rebuilt from the committed files alone,
without a model (``--aggregate``).

Commands (``python -m experiments.self_evolution.run --plan PLAN.toml ...``):

- ``--status``: every cell, done / missing / stale (settings, code or warm start differ), with
  its measured minutes;
- ``--run-missing --budget-min N``: runs the missing cells one at a time, whole seeds first,
  and stops before a cell that would not finish in the budget (the mean of the cells done so
  far, or the plan's estimate);
- ``--aggregate``: ``OUT/summary.json``, ``table.md``, ``heldout.png`` and ``pool.png`` from the
  cell files; a cell whose settings key, warm-start hash or platform differs from its seed's
  other cells is refused, with the reason (``summary.json["refused"]``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import struct
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

try:  # Python 3.11+; tomli (the same parser) on 3.10
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    import tomli as tomllib

logger = logging.getLogger("sage_env.self_evolution.cells")

SCHEMA = 1
"""Version of the cell file's layout."""

CODE_PATHS = ("sage_env", "learners", "experiments/learning_curve/run.py")
"""The code a cell's result depends on (its code key hashes their git trees and edits); the
orchestration in this folder is left out, so editing the aggregation leaves cells fresh."""

REPO = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- the plan
@dataclass
class Plan:
    """A grid of cells: arms x seeds under one set of shared settings."""

    name: str
    """The plan's name (its results go to ``out``)."""
    arms: list[str]
    """Arms, as ``EvolutionConfig.arms`` names them (``sage``, ``sage:frozen``, ``rlvr``...)."""
    seeds: list[int]
    """Seeds; a seed's cells run on one platform."""
    settings: dict[str, Any]
    """Settings every cell shares (``EvolutionConfig`` fields and ``precision``): hashed into
    the settings key."""
    minutes_per_cell: float
    """Estimated minutes of one cell, used by ``--run-missing`` until a cell is measured."""
    warm_start_minutes: float = 45.0
    """Estimated minutes to build the shared warm start on a machine without it."""
    estimate_source: str = ""
    """Where the estimate comes from."""
    out: str = ""
    """Folder of the committed results (``cells/``, ``summary.json``, table, plots)."""
    work: str = ""
    """Scratch folder of the running cells (git-ignored: runs, cached step-0 scores)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else under ``[plan]`` (notes), kept for the summary."""

    def settings_key(self) -> str:
        """SHA-256 (16 hex digits) of the canonical JSON of :attr:`settings`."""
        return settings_key(self.settings)

    def evolution_config(self, **over: Any) -> Any:
        """The :class:`EvolutionConfig` of the shared settings (``precision`` aside)."""
        from experiments.self_evolution.run import EvolutionConfig

        names = {f.name for f in fields(EvolutionConfig)}
        kw = {k: v for k, v in self.settings.items() if k in names}
        kw.update(arms=",".join(self.arms), seeds=",".join(map(str, self.seeds)))
        kw.update(out=self.out, runs=str(Path(self.work) / "runs"), progress=False)
        return EvolutionConfig(**{**kw, **over})

    def cell_file(self, seed: int, arm: str) -> Path:
        """``OUT/cells/seed<s>__<arm>.json`` (``:`` written ``-``)."""
        return Path(self.out) / "cells" / f"seed{seed}__{arm.replace(':', '-')}.json"

    def cells(self) -> list[tuple[int, str]]:
        """Every cell, in run order: whole seeds first (seed 0's arms, then seed 1's, ...)."""
        return [(s, a) for s in self.seeds for a in self.arms]


SETTING_KEYS = (
    "model",
    "warmup_steps",
    "domains",
    "max_steps",
    "eval_every",
    "rounds_per_step",
    "solver_samples",
    "sets",
    "curve_sets",
    "engine",
    "lr",
    "gate_probe_size",
    "precision",
)
"""Keys ``[settings]`` may hold (``lr`` absent: the demo preset's)."""


def settings_key(settings: dict[str, Any]) -> str:
    """SHA-256 (first 16 hex digits) of ``settings`` as sorted, compact JSON."""
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_plan(path: str | os.PathLike, overrides: list[str] | None = None) -> Plan:
    """Read a plan (TOML: ``[plan]`` and ``[settings]``), with ``KEY=VALUE`` overrides of settings.

    Values of overrides are parsed as TOML values (``max_steps=2``, ``engine="hf"``); a bare
    word is a string.

    Raises:
        ValueError: on a missing ``[plan]`` key, an unknown setting, or an empty grid.
    """
    raw = tomllib.loads(Path(path).read_text())
    head, settings = dict(raw.get("plan", {})), dict(raw.get("settings", {}))
    for item in overrides or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--set takes KEY=VALUE, got {item!r}")
        try:
            settings[key.strip()] = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError:
            settings[key.strip()] = value
    unknown = set(settings) - set(SETTING_KEYS)
    if unknown:
        raise ValueError(f"plan {path}: unknown settings {sorted(unknown)} (known: {SETTING_KEYS})")
    try:
        name = head.pop("name")
        plan = Plan(
            name=name,
            arms=list(head.pop("arms")),
            seeds=[int(s) for s in head.pop("seeds")],
            settings=settings,
            minutes_per_cell=float(head.pop("minutes_per_cell")),
            warm_start_minutes=float(head.pop("warm_start_minutes", 45.0)),
            estimate_source=str(head.pop("estimate_source", "")),
            out=str(head.pop("out", f"experiments/self_evolution/results/{name}")),
            work=str(head.pop("work", f"runs/self_evolution/{name}")),
        )
    except KeyError as exc:
        raise ValueError(f"plan {path}: [plan] needs {exc.args[0]!r}") from None
    plan.extra = head
    if not plan.arms or not plan.seeds or len(set(plan.seeds)) != len(plan.seeds):
        raise ValueError(f"plan {path}: needs arms and distinct seeds")
    return plan


# --------------------------------------------------------------------------- provenance
def code_key(root: Path = REPO) -> dict[str, Any]:
    """The code a cell depends on (:data:`CODE_PATHS`), without importing it.

    Returns:
        ``{"key": 16 hex digits (SHA-256 of the git tree ids of CODE_PATHS at HEAD and of
        ``git diff HEAD`` on them), "git_commit", "dirty"}``; ``key`` is None outside git.
    """

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "--no-optional-locks", "-C", str(root), *args],
                capture_output=True,
                timeout=60,
                check=True,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.decode("utf-8", "replace")

    commit = (git("rev-parse", "HEAD") or "").strip() or None
    trees = git("rev-parse", *(f"HEAD:{p}" for p in CODE_PATHS))
    diff = git("diff", "HEAD", "--no-ext-diff", "--binary", "--", *CODE_PATHS)
    if trees is None or diff is None:
        return {"key": None, "git_commit": commit, "dirty": None}
    digest = hashlib.sha256((trees + "\0" + diff).encode()).hexdigest()[:16]
    return {"key": digest, "git_commit": commit, "dirty": bool(diff)}


def weights_sha256(folder: str | os.PathLike) -> str:
    """SHA-256 over the tensors of every ``*.safetensors`` file in ``folder``.

    Files in name order, tensors in name order; each tensor contributes its name, dtype,
    shape and raw bytes, so the file's metadata and layout do not count. Reads the
    safetensors header directly (8-byte little-endian length, JSON): no torch.

    Raises:
        FileNotFoundError: if ``folder`` holds no safetensors file.
    """
    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors in {folder}")
    h = hashlib.sha256()
    for f in files:
        with open(f, "rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(n))
            start = 8 + n
            for name in sorted(k for k in header if k != "__metadata__"):
                t = header[name]
                lo, hi = t["data_offsets"]
                fh.seek(start + lo)
                h.update(json.dumps([name, t["dtype"], t["shape"]]).encode())
                h.update(fh.read(hi - lo))
    return h.hexdigest()


# --------------------------------------------------------------------------- status
@dataclass
class CellStatus:
    """One cell of a plan as its file stands."""

    seed: int
    arm: str
    state: str
    """``done``, ``missing`` or ``stale``."""
    minutes: float | None = None
    """Measured minutes of the cell (None when missing)."""
    reason: str = ""
    """Why a cell is stale."""


def read_cell(path: Path) -> dict[str, Any] | None:
    """A cell file's record, or None when absent or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _reference(records: list[dict[str, Any]], key: Callable[[dict], Any]) -> Any:
    """The most common value of ``key`` over ``records`` (ties: the first seen)."""
    counts = Counter(key(r) for r in records)
    return max(counts, key=lambda v: (counts[v], -[key(r) for r in records].index(v)))


def _warm(r: dict[str, Any]) -> tuple[str | None, str | None]:
    p = r.get("provenance", {})
    return p.get("warm_start_sha256"), p.get("platform")


def status(plan: Plan, code: dict[str, Any] | None = None) -> list[CellStatus]:
    """Every cell of ``plan``: done, missing, or stale (another settings key than the plan's,
    another code key than ``code`` (default: this checkout's), or another warm start or
    platform than most done cells of its seed)."""
    code = code if code is not None else code_key()
    key = plan.settings_key()
    out = []
    by_seed: dict[int, list[dict[str, Any]]] = {}
    for seed, arm in plan.cells():
        rec = read_cell(plan.cell_file(seed, arm))
        if rec is not None:
            by_seed.setdefault(seed, []).append(rec)
    for seed, arm in plan.cells():
        rec = read_cell(plan.cell_file(seed, arm))
        if rec is None:
            out.append(CellStatus(seed, arm, "missing"))
            continue
        minutes = rec.get("seconds", 0.0) / 60
        prov = rec.get("provenance", {})
        reasons = []
        if prov.get("settings_key") != key:
            reasons.append(f"settings key {prov.get('settings_key')} != plan's {key}")
        if code.get("key") and prov.get("code_key") != code["key"]:
            reasons.append(f"code key {prov.get('code_key')} != this checkout's {code['key']}")
        ref = _reference(by_seed[seed], _warm)
        if _warm(rec) != ref:
            reasons.append(f"warm start/platform {_warm(rec)} != seed {seed}'s {ref}")
        state = "stale" if reasons else "done"
        out.append(CellStatus(seed, arm, state, minutes, "; ".join(reasons)))
    return out


def status_table(cells: list[CellStatus]) -> str:
    """A markdown table of :func:`status` with a count line."""
    lines = ["| seed | arm | state | minutes | reason |", "|---|---|---|---|---|"]
    for c in cells:
        m = "-" if c.minutes is None else f"{c.minutes:.1f}"
        lines.append(f"| {c.seed} | {c.arm} | {c.state} | {m} | {c.reason} |")
    n = Counter(c.state for c in cells)
    lines.append("")
    lines.append(f"{n['done']} done, {n['missing']} missing, {n['stale']} stale of {len(cells)}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- running cells
def write_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` through a temp file and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


def run_missing(
    plan: Plan,
    budget_min: float,
    run_cell_fn: Callable[[Plan, int, str], dict[str, Any]] | None = None,
    rerun_stale: bool = False,
    clock: Callable[[], float] = time.monotonic,
    code: dict[str, Any] | None = None,
    warm_minutes: float = 0.0,
    on_cell: Callable[[Path, dict[str, Any]], None] | None = None,
) -> list[tuple[int, str]]:
    """Run the missing cells (and the stale ones with ``rerun_stale``), whole seeds first, each
    written to its cell file when done; stop before a cell that would not finish in
    ``budget_min`` minutes from the call.

    A cell's expected minutes are the mean of the plan's cells measured so far (done cells,
    including those of this call), else :attr:`Plan.minutes_per_cell`; the first cell also
    expects ``warm_minutes`` (building the shared warm start on this machine: see
    :func:`warm_start_ready`). ``run_cell_fn`` (default :func:`run_cell`) returns the cell's
    record; tests pass a stand-in. ``on_cell(path, record)`` runs after each cell file is
    written (``--commit``: :func:`commit_cell`).

    Returns:
        The cells run, ``[(seed, arm), ...]``.
    """
    run_cell_fn = run_cell_fn or run_cell
    t0 = clock()
    ran: list[tuple[int, str]] = []
    cells = status(plan, code)
    todo = [c for c in cells if c.state == "missing" or (rerun_stale and c.state == "stale")]
    measured = [c.minutes for c in cells if c.state == "done" and c.minutes]
    for i, c in enumerate(todo):
        expect = sum(measured) / len(measured) if measured else plan.minutes_per_cell
        expect += warm_minutes if not ran else 0.0
        used = (clock() - t0) / 60
        if used + expect > budget_min:
            logger.info(
                "cells: stop before seed %d %s: %.0f min used + %.0f expected > budget %.0f "
                "(%d cells left)",
                c.seed,
                c.arm,
                used,
                expect,
                budget_min,
                len(todo) - i,
            )
            break
        logger.info(
            "cells: [%d/%d] seed %d %s starts (expected %.0f min, %.0f of %.0f min used)",
            i + 1,
            len(todo),
            c.seed,
            c.arm,
            expect,
            used,
            budget_min,
        )
        t1 = clock()
        record = run_cell_fn(plan, c.seed, c.arm)
        write_atomic(plan.cell_file(c.seed, c.arm), record)
        if on_cell is not None:
            on_cell(plan.cell_file(c.seed, c.arm), record)
        minutes = record.get("seconds", (clock() - t1)) / 60
        measured.append(minutes)
        ran.append((c.seed, c.arm))
        logger.info(
            "cells: [%d/%d] seed %d %s done in %.1f min -> %s",
            i + 1,
            len(todo),
            c.seed,
            c.arm,
            minutes,
            plan.cell_file(c.seed, c.arm),
        )
    return ran


def commit_cell(path: Path, record: dict[str, Any]) -> None:
    """Commit one cell file alone (``git commit -- path``: other staged changes stay staged).

    Raises:
        subprocess.CalledProcessError: if git refuses.
    """
    path = Path(path).resolve()
    minutes = record.get("seconds", 0.0) / 60
    msg = (
        f"cells {record.get('plan')}: seed{record.get('seed')} {record.get('arm')} "
        f"({minutes:.0f} min, {record.get('provenance', {}).get('platform')})"
    )
    git = ["git", "-C", str(path.parent)]
    subprocess.run([*git, "add", "--", str(path)], check=True, capture_output=True)
    subprocess.run(
        [*git, "commit", "-q", "-m", msg, "--", str(path)], check=True, capture_output=True
    )


def warm_start_ready(plan: Plan) -> bool:
    """Whether the plan's shared warm start is already in this machine's cache (imports the
    learners: the demonstrations make its key)."""
    import dataclasses

    from experiments.self_evolution import run as se
    from learners.policy import cache_dir
    from learners.training.presets import PRESETS
    from learners.training.warmup import cache_key

    cfg = plan.evolution_config()
    if cfg.warmup_steps <= 0:
        return True
    warmup = dataclasses.replace(PRESETS["demo"].warmup, steps=cfg.warmup_steps, cache=False)
    key = cache_key(cfg.model, warmup, se.warm_demonstrations(cfg, warmup))
    return (cache_dir() / "warm_start" / key / "warm_start.json").exists()


def _platform(seed_cells: list[dict[str, Any]]) -> str | None:
    got = {r.get("provenance", {}).get("platform") for r in seed_cells}
    return got.pop() if len(got) == 1 else None


def run_cell(plan: Plan, seed: int, arm: str) -> dict[str, Any]:
    """Train one arm on one seed from the shared warm start and return its cell record.

    The warm start is built (or found in ``$SAGE_ENV_CACHE/warm_start``) first; the run goes
    through :func:`learning_curve.run_curve` in ``WORK/seed<s>`` (its cached step-0 scores of
    the warmed model are reused by the seed's later cells; ``--resume`` continues a killed
    cell). Its per-item outcomes come from the arm's ``partial/<arm>.json``.

    Raises:
        RuntimeError: if the training configuration's precision or platform is not the plan's,
            or the seed's cells ran on another platform.
    """
    import dataclasses

    from experiments.learning_curve import run as lc
    from experiments.self_evolution import run as se
    from learners.training.build import code_provenance

    cfg = plan.evolution_config(arms=arm, seeds=str(seed), resume=True)
    warm, warm_facts = se.warm_start(cfg)
    t0 = time.perf_counter()  # the cell's own time: a warm start is built once per machine
    warm_hash = weights_sha256(warm)
    ccfg = dataclasses.replace(
        cfg.curve_config(warm, seed),
        out=str(Path(plan.work) / f"seed{seed}"),
        runs=str(Path(plan.work) / "runs" / f"seed{seed}"),
    )
    tcfg = lc.train_config(ccfg, arm)
    precision = plan.settings.get("precision", "float32")
    if tcfg.rollout.ct2_compute_type != precision or tcfg.dtype not in ("auto", precision):
        raise RuntimeError(
            f"plan precision {precision!r}, training has dtype {tcfg.dtype!r} and ct2 "
            f"compute type {tcfg.rollout.ct2_compute_type!r}"
        )
    platform = tcfg.device if tcfg.device != "auto" else "cpu"
    others = [
        r for a in plan.arms if a != arm and (r := read_cell(plan.cell_file(seed, a))) is not None
    ]
    if others and _platform(others) not in (None, platform):
        raise RuntimeError(
            f"seed {seed}'s cells ran on {_platform(others)}, this one on {platform}"
        )
    lc.run_curve(ccfg)
    state_file = Path(ccfg.out) / "partial" / f"{arm.replace(':', '-')}.json"
    state = json.loads(state_file.read_text())
    result = state["result"]
    code = code_key()
    return {
        "schema": SCHEMA,
        "plan": plan.name,
        "seed": seed,
        "arm": arm,
        "settings": plan.settings,
        "items": {
            name: [{"step": s, "correct": xs} for s, xs in curve]
            for name, curve in state["curves"].items()
        },
        "budget": {
            **result["budget"],
            "solver_samples": cfg.solver_samples,
            "rounds_per_step": cfg.rounds_per_step,
            "max_steps": cfg.max_steps,
        },
        "seconds_per_step": result["seconds_per_step"],
        "eval_seconds": result["eval_seconds"],
        "pool": se.pool_dynamics(result.get("step_log", [])),
        "step_log": result.get("step_log", []),
        "provenance": {
            "git_commit": code["git_commit"],
            "code_key": code["key"],
            "code_dirty": code["dirty"],
            "settings_key": plan.settings_key(),
            "warm_start_sha256": warm_hash,
            "warm_start": {k: v for k, v in warm_facts.items() if k != "folder"},
            "platform": platform,
            "precision": precision,
            "cpu_count": os.cpu_count(),
            "code": code_provenance(),
            "runs": result.get("code"),
        },
        "seconds": time.perf_counter() - t0,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


# --------------------------------------------------------------------------- aggregation
def accepted_cells(
    plan: Plan,
) -> tuple[dict[tuple[int, str], dict[str, Any]], list[dict[str, Any]]]:
    """The plan's cell files split into accepted ``{(seed, arm): record}`` and refused
    ``[{"seed", "arm", "file", "reason"}]``.

    Refused: another settings key than the plan's, or another (warm-start hash, platform)
    than the most common among the seed's cells of the plan's key.
    """
    key = plan.settings_key()
    found = {
        (s, a): rec for s, a in plan.cells() if (rec := read_cell(plan.cell_file(s, a))) is not None
    }
    refused: list[dict[str, Any]] = []
    ok: dict[tuple[int, str], dict[str, Any]] = {}
    for (s, a), rec in found.items():
        got = rec.get("provenance", {}).get("settings_key")
        if got != key:
            refused.append(_refusal(plan, s, a, f"settings key {got} != the plan's {key}"))
        else:
            ok[(s, a)] = rec
    for seed in plan.seeds:
        mine = [r for (s, _), r in ok.items() if s == seed]
        if not mine:
            continue
        ref = _reference(mine, _warm)
        for arm in plan.arms:
            rec = ok.get((seed, arm))
            if rec is not None and _warm(rec) != ref:
                refused.append(
                    _refusal(
                        plan,
                        seed,
                        arm,
                        f"warm start sha256/platform {_warm(rec)} differs from seed {seed}'s "
                        f"other cells {ref}",
                    )
                )
                del ok[(seed, arm)]
    return ok, refused


def _refusal(plan: Plan, seed: int, arm: str, reason: str) -> dict[str, Any]:
    return {"seed": seed, "arm": arm, "file": str(plan.cell_file(seed, arm)), "reason": reason}


def aggregate(plan: Plan) -> dict[str, Any]:
    """Rebuild ``summary.json``, ``table.md``, ``heldout.png`` and ``pool.png`` in ``plan.out``
    from the cell files alone (no model, no torch), with
    :func:`experiments.self_evolution.run.summarise`'s statistics (Wilson per point, exact
    McNemar, Student-t over seeds).

    Returns:
        The summary, with ``plan``, ``settings_key``, ``cells`` (accepted ``seed/arm`` names),
        ``missing`` and ``refused`` (``{"seed", "arm", "file", "reason"}``) added.
    """
    from experiments.learning_curve import run as lc
    from experiments.self_evolution import run as se

    ok, refused = accepted_cells(plan)
    for r in refused:
        logger.warning("cells: refused seed %s %s: %s", r["seed"], r["arm"], r["reason"])
    per_seed: dict[int, dict[str, Any]] = {}
    warmed: dict[str, list[bool]] = {}
    warm_facts: dict[str, Any] = {}
    for (seed, arm), rec in sorted(ok.items(), key=lambda kv: plan.cells().index(kv[0])):
        curves = {
            name: [(p["step"], p["correct"]) for p in points]
            for name, points in rec["items"].items()
        }
        base = {name: c[0][1] for name, c in curves.items()}
        warmed = warmed or base
        prov = rec["provenance"]
        warm_facts = warm_facts or {
            **prov.get("warm_start", {}),
            "sha256": prov.get("warm_start_sha256"),
        }
        per_seed.setdefault(seed, {"protocols": {}})["protocols"][arm] = {
            "sets": {name: lc.set_summary(c) for name, c in curves.items()},
            "budget": rec["budget"],
            "seconds_per_step": rec.get("seconds_per_step"),
            "step_log": rec.get("step_log", []),
            "base_items": base,
            "cell": {
                "seconds": rec.get("seconds"),
                "platform": prov.get("platform"),
                "git_commit": prov.get("git_commit"),
                "code_key": prov.get("code_key"),
                "warm_start_sha256": prov.get("warm_start_sha256"),
            },
        }
    cfg = plan.evolution_config()
    out = Path(plan.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = se.summarise(cfg, warm_facts, {}, warmed, per_seed, out)
    summary.update(
        plan=plan.name,
        settings=plan.settings,
        settings_key=plan.settings_key(),
        cells=[f"seed{s}/{a}" for s, a in plan.cells() if (s, a) in ok],
        missing=[
            f"seed{s}/{a}"
            for s, a in plan.cells()
            if (s, a) not in ok and not plan.cell_file(s, a).exists()
        ],
        refused=refused,
    )
    se.write(summary, out)
    return summary


# --------------------------------------------------------------------------- command line
def main(argv: list[str]) -> Any:
    """``--plan PLAN.toml`` with ``--status``, ``--run-missing --budget-min N`` or
    ``--aggregate``; ``--set KEY=VALUE`` overrides a setting, ``--out`` / ``--work`` the
    plan's folders."""
    ap = argparse.ArgumentParser(
        prog="python -m experiments.self_evolution.run --plan PLAN.toml",
        description="The self-evolution experiment as a grid of cells (arm x seed).",
    )
    ap.add_argument("--plan", required=True, help="the plan (TOML)")
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--status", action="store_true", help="table of done/missing/stale cells")
    what.add_argument("--run-missing", action="store_true", help="run missing cells in budget")
    what.add_argument("--aggregate", action="store_true", help="summary from the cell files")
    ap.add_argument("--budget-min", type=float, default=60.0, help="minutes for --run-missing")
    ap.add_argument("--rerun-stale", action="store_true", help="--run-missing reruns stale cells")
    ap.add_argument("--commit", action="store_true", help="git-commit each cell file when done")
    ap.add_argument("--set", action="append", default=[], help="KEY=VALUE: override a setting")
    ap.add_argument("--out", help="results folder (default: the plan's)")
    ap.add_argument("--work", help="scratch folder (default: the plan's)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    plan = load_plan(args.plan, args.set)
    plan.out = args.out or plan.out
    plan.work = args.work or plan.work
    if args.status:
        cells = status(plan)
        print(status_table(cells))
        return cells
    if args.run_missing:
        warm = 0.0 if warm_start_ready(plan) else plan.warm_start_minutes
        return run_missing(
            plan,
            args.budget_min,
            rerun_stale=args.rerun_stale,
            warm_minutes=warm,
            on_cell=commit_cell if args.commit else None,
        )
    summary = aggregate(plan)
    for r in summary["refused"]:
        print(f"refused seed{r['seed']}/{r['arm']}: {r['reason']}")
    print(summary["table"])
    return summary

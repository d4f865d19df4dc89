r"""The self-evolution experiment as a grid of cells (one arm x one seed), run piecewise (issue 47).

A **plan** (TOML, ``plans/*.toml``) names the arms, the seeds, the settings every cell shares
(``[settings]``: the fields of :class:`~benchmarks.self_evolution.run.EvolutionConfig` plus
``precision``) and the estimated minutes of a cell. A **cell** trains one arm on one seed from
the shared warm start (:func:`~benchmarks.self_evolution.run.warm_start`) and writes one file,
``OUT/cells/seed<s>__<arm>.json`` (atomically), holding everything the summary needs: per-item
outcomes at every evaluation step, pool dynamics per step, the budget, and provenance (git
commit, the code key, the settings key, the SHA-256 of the warm-started weights, platform, the
sandbox's isolation level).
Cells are committed as they finish; the summary is rebuilt from the committed files alone,
without a model (``--aggregate``).

**Pinned code.** A cell's code key hashes the git trees of :data:`CODE_PATHS` (and, at HEAD,
their uncommitted edits). Without ``[plan] commit`` cells are judged against this checkout's
key, so any change to ``sage_env/`` or ``learners/`` stales every committed cell. With
``[plan] commit = "<sha>"`` they are judged against that commit's key
(``code_key(REPO, commit)``) whatever HEAD is, and ``--run-missing`` from a checkout whose key
differs runs each cell in a subprocess (``python -m benchmarks.self_evolution.cells --run-cell
SEED ARM --record TMP.json``; ``experiments.self_evolution.cells`` in a commit from before the
move to ``benchmarks/``) inside a git worktree of the commit, ``WORK/code-<12 hex>`` (added with
``git worktree add --detach`` if absent); the child writes the record, this process
writes the cell file into its own ``OUT`` and commits it (``--commit``). The pinned commit must
have ``--run-cell`` (this module's, from the commit that added pinning on).

Commands (``python -m benchmarks.self_evolution.run --plan PLAN.toml ...``, or
``python -m benchmarks.self_evolution.cells --plan PLAN.toml ...``):

- ``--status``: one line naming the code cells are judged against (the pinned commit, or this
  checkout), then every cell, done / missing / stale (settings, code or warm start differ),
  with its measured minutes;
- ``--run-missing --budget-min N``: runs the missing cells one at a time, whole seeds first,
  and stops before a cell that would not finish in the budget (the mean of the cells done so
  far, or the plan's estimate); in a worktree of the pinned commit when this checkout's code
  differs from it;
- ``--aggregate``: ``OUT/summary.json``, ``table.md``, ``heldout.png`` and ``pool.png`` from the
  cell files; a cell whose settings key, warm-start hash or platform differs from its seed's
  other cells is refused, with the reason (``summary.json["refused"]``);
- ``--run-cell SEED ARM --record PATH``: one cell in this process, its record written to
  ``PATH`` (no cell file, no commit): what a pinned cell's subprocess runs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter, deque
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

FORMER_CODE_PATHS = ("experiments/learning_curve/run.py", "experiments/common")
"""Where the experiment code of :data:`CODE_PATHS` lay before ``experiments/`` moved into
``benchmarks/`` (issue 50 item 7): kept in the key so that a commit from before the move (a
plan's pinned commit) keeps the key it had; no checkout from the move on has them."""

CODE_PATHS = (
    "sage_env",
    "learners",
    "benchmarks/learning_curve/run.py",
    "benchmarks/common",
    *FORMER_CODE_PATHS,
)
"""The code a cell's result depends on (its code key hashes their git trees and edits); the
orchestration in this folder is left out, so editing the aggregation leaves cells fresh. A path
a revision lacks is left out of its key (``experiments/common`` is younger than the commits
the first plans pinned; a commit has either the ``benchmarks/`` paths or the former ones), so a
path added here leaves the keys of older commits unchanged."""

CELLS_MODULES = ("benchmarks.self_evolution.cells", "experiments.self_evolution.cells")
"""This module's dotted name in a checkout: today's, then its name before the move to
``benchmarks/``. A pinned cell runs the one its worktree has (:func:`cells_module`)."""

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
    """Scratch folder of the running cells (git-ignored: runs, cached step-0 scores, the
    worktree of a pinned commit)."""
    commit: str = ""
    """``[plan] commit``: the commit whose code every cell runs (a sha or any git revision;
    ``""``: none, cells are judged against this checkout's code)."""
    code_key: str = ""
    """``[plan] code_key``: the pinned commit's code key as recorded when the plan was pinned
    (:func:`code_key` at ``commit``). When set, cells are judged against it without reading
    the commit, so a clone without that commit, or a checkout where :data:`CODE_PATHS` moved,
    still judges the grid by the code it ran; ``""``: computed from ``commit``."""
    path: str = ""
    """Absolute path of the TOML the plan was read from (``""`` when built in code)."""
    overrides: list[str] = field(default_factory=list)
    """The ``KEY=VALUE`` overrides it was read with (``--set``), passed on to a pinned cell."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else under ``[plan]`` (notes), kept for the summary."""

    def settings_key(self) -> str:
        """SHA-256 (16 hex digits) of the canonical JSON of :attr:`settings`."""
        return settings_key(self.settings)

    def evolution_config(self, **over: Any) -> Any:
        """The :class:`EvolutionConfig` of the shared settings (``precision`` aside)."""
        from benchmarks.self_evolution.run import EvolutionConfig

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
    "gate_probe_every",
    "gate_intact_pass",
    "gate_critic",
    "warmup_critic_reviews",
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
            out=str(head.pop("out", f"benchmarks/self_evolution/results/{name}")),
            work=str(head.pop("work", f"runs/self_evolution/{name}")),
            commit=str(head.pop("commit", "")).strip(),
            code_key=str(head.pop("code_key", "")).strip(),
            path=str(Path(path).resolve()),
            overrides=list(overrides or []),
        )
    except KeyError as exc:
        raise ValueError(f"plan {path}: [plan] needs {exc.args[0]!r}") from None
    plan.extra = head
    if not plan.arms or not plan.seeds or len(set(plan.seeds)) != len(plan.seeds):
        raise ValueError(f"plan {path}: needs arms and distinct seeds")
    return plan


# --------------------------------------------------------------------------- provenance
def _git(root: Path, *args: str) -> str | None:
    """``git -C root ARGS``' stdout, or None when git fails or is absent."""
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


def resolve_commit(rev: str, root: Path = REPO) -> str | None:
    """The full sha (40 hex digits) of the commit ``rev`` names in ``root``'s repository, or
    None when it names none there (or outside git)."""
    got = _git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if got is None or not got.strip():
        return None
    return got.strip()


def code_trees(root: Path = REPO, rev: str = "HEAD") -> str | None:
    """The git object ids of :data:`CODE_PATHS` at ``rev``, one a line in CODE_PATHS order,
    each line ending in a newline, those ``rev`` lacks left out (what ``git rev-parse
    REV:PATH...`` prints when every path is there); None when git fails or ``rev`` has none
    of them."""
    listing = _git(root, "ls-tree", "-z", "--full-tree", rev, "--", *CODE_PATHS)
    if listing is None:
        return None
    ids: dict[str, str] = {}
    for entry in listing.split("\0"):
        meta, tab, path = entry.partition("\t")
        if tab:
            ids[path] = meta.split()[2]
    got = [ids[p] for p in CODE_PATHS if p in ids]
    return "".join(f"{x}\n" for x in got) if got else None


def code_key(root: Path = REPO, rev: str = "HEAD") -> dict[str, Any]:
    """The code a cell depends on (:data:`CODE_PATHS`) at ``rev``, without importing it.

    At ``HEAD`` the key covers the checkout's edits too (``git diff HEAD`` on CODE_PATHS); at
    any other revision it covers the committed trees alone, so it equals the key of a clean
    checkout of that commit.

    Returns:
        ``{"key": 16 hex digits (SHA-256 of the git object ids of CODE_PATHS at ``rev``, one a
        line in CODE_PATHS order, those ``rev`` lacks left out, and, at HEAD, of ``git diff
        HEAD`` on them), "git_commit": the commit's full sha, "dirty": whether the diff term is
        non-empty (False off HEAD)}``; ``key`` (and ``dirty``) is None outside git, when
        ``rev`` is not found, or when it has none of CODE_PATHS.
    """
    commit = resolve_commit(rev, root)
    trees = code_trees(root, rev)
    if rev == "HEAD":
        diff = _git(root, "diff", "HEAD", "--no-ext-diff", "--binary", "--", *CODE_PATHS)
    else:
        diff = ""
    if commit is None or trees is None or diff is None:
        return {"key": None, "git_commit": commit, "dirty": None}
    digest = hashlib.sha256((trees + "\0" + diff).encode()).hexdigest()[:16]
    return {"key": digest, "git_commit": commit, "dirty": bool(diff)}


def reference_key(plan: Plan, root: Path = REPO) -> dict[str, Any]:
    """The code key cells of ``plan`` are judged against: the pinned commit's
    (``code_key(root, plan.commit)``) when the plan has one, else this checkout's
    (``code_key(root)``: HEAD and its edits).

    Returns:
        :func:`code_key`'s dict with ``"against"`` added: ``"pinned commit <12 hex>"`` or
        ``"this checkout"`` (the reason text of a stale cell names it).

    Raises:
        ValueError: if the plan pins a commit that ``root``'s repository does not have.
    """
    if not plan.commit:
        if plan.code_key:
            raise ValueError(f"plan {plan.name}: [plan] code_key needs the commit it was read at")
        return {**code_key(root), "against": "this checkout"}
    if plan.code_key:
        sha = resolve_commit(plan.commit, root) or plan.commit
        return {
            "key": plan.code_key,
            "git_commit": sha,
            "dirty": False,
            "against": f"pinned commit {sha[:12]}",
        }
    code = code_key(root, plan.commit)
    if code["key"] is None:
        raise ValueError(
            f"plan {plan.name}: [plan] commit {plan.commit!r} is not a commit of {root} with "
            f"{', '.join(CODE_PATHS)} (git fetch it, or fix the plan)"
        )
    return {**code, "against": f"pinned commit {code['git_commit'][:12]}"}


def reference_line(plan: Plan, root: Path = REPO) -> str:
    """One line saying which code the cells of ``plan`` are judged against (``--status``
    prints it above the table), and for a pinned plan whether this checkout matches it.

    Raises:
        ValueError: as :func:`reference_key`.
    """
    ref = reference_key(plan, root)
    if not plan.commit:
        head = (ref["git_commit"] or "?")[:12]
        edits = {True: ", with edits", False: ", clean", None: ""}[ref["dirty"]]
        return (
            f"code: cells judged against this checkout (HEAD {head}{edits}, code key "
            f"{ref['key']}); the plan pins no commit"
        )
    here = code_key(root)
    same = here["key"] == ref["key"]
    return (
        f"code: cells judged against the pinned commit {ref['git_commit']} (code key "
        f"{ref['key']}); this checkout's code key {here['key']} "
        + (
            "matches: cells run here"
            if same
            else f"differs: cells run in {pinned_dir(plan, ref['git_commit'], root)}"
        )
    )


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


def status(
    plan: Plan, code: dict[str, Any] | None = None, root: Path = REPO
) -> list[CellStatus]:
    """Every cell of ``plan``: done, missing, or stale (another settings key than the plan's,
    another code key than ``code``, or another warm start or platform than most done cells of
    its seed).

    ``code`` defaults to :func:`reference_key` of ``root``: the pinned commit's key when the
    plan has ``commit``, else this checkout's; a stale cell's reason names which
    (``code["against"]``).

    Raises:
        ValueError: as :func:`reference_key` (a pinned commit ``root`` does not have).
    """
    code = code if code is not None else reference_key(plan, root)
    against = code.get("against", "this checkout")
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
            reasons.append(f"code key {prov.get('code_key')} != {against}'s {code['key']}")
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
    checkout: dict[str, Any] | None = None,
    run_pinned_fn: Callable[[Plan, int, str], dict[str, Any]] | None = None,
) -> list[tuple[int, str]]:
    """Run the missing cells (and the stale ones with ``rerun_stale``), whole seeds first, each
    written to its cell file when done; stop before a cell that would not finish in
    ``budget_min`` minutes from the call.

    ``code`` is the key cells are judged against (default :func:`reference_key`). When the plan
    pins a commit and ``checkout`` (this checkout's :func:`code_key`, HEAD and edits; computed
    when None) differs from the pinned key, each cell runs through ``run_pinned_fn`` (default
    :func:`run_cell_pinned`: a subprocess in a worktree of that commit) instead of
    ``run_cell_fn`` (default :func:`run_cell`, in this process).

    A cell's expected minutes are the mean of the plan's cells measured so far (done cells,
    including those of this call), else :attr:`Plan.minutes_per_cell`; the first cell also
    expects ``warm_minutes`` (building the shared warm start on this machine: see
    :func:`warm_start_ready`). ``run_cell_fn`` (default :func:`run_cell`) returns the cell's
    record; tests pass a stand-in. ``on_cell(path, record)`` runs after each cell file is
    written (``--commit``: :func:`commit_cell`).

    Returns:
        The cells run, ``[(seed, arm), ...]``.
    """
    t0 = clock()
    code = code if code is not None else reference_key(plan)
    runner = run_cell_fn or run_cell
    if plan.commit:
        checkout = checkout if checkout is not None else code_key()
        if checkout.get("key") != code.get("key"):
            runner = run_pinned_fn or run_cell_pinned
            logger.info(
                "cells: this checkout's code key %s != %s's %s: each cell runs in a worktree of "
                "that commit",
                checkout.get("key"),
                code.get("against", "the pinned commit"),
                code.get("key"),
            )
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
        record = runner(plan, c.seed, c.arm)
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


# --------------------------------------------------------------------------- pinned cells
def _under(folder: str | os.PathLike, root: Path = REPO) -> Path:
    """``folder`` as an absolute path; a relative one is taken from ``root``."""
    p = Path(folder)
    return p if p.is_absolute() else root / p


def pinned_dir(plan: Plan, commit: str, root: Path = REPO) -> Path:
    """``WORK/code-<first 12 hex of commit>``: the worktree where a pinned plan's cells run
    (``WORK`` relative to ``root``)."""
    return _under(plan.work, root) / f"code-{commit[:12]}"


def pinned_worktree(plan: Plan, root: Path = REPO) -> Path:
    """A worktree of the plan's pinned commit at :func:`pinned_dir`: created with
    ``git worktree add --detach`` when absent, reused when present at that commit.

    Returns:
        The worktree's absolute path.

    Raises:
        ValueError: if the plan pins no commit, or one ``root`` does not have.
        RuntimeError: if git cannot add the worktree; if the folder exists but is not a
            checkout of that commit, or has edits in :data:`CODE_PATHS` (its key would not be
            the pinned one); or if the commit's ``cells.py`` has no ``--run-cell`` (pinned
            before this command existed).
    """
    if not plan.commit:
        raise ValueError(f"plan {plan.name} pins no commit")
    sha = resolve_commit(plan.commit, root)
    if sha is None:
        raise ValueError(f"plan {plan.name}: [plan] commit {plan.commit!r} is not in {root}")
    wt = pinned_dir(plan, sha, root)
    if not wt.exists():
        wt.parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["git", "-C", str(root), "worktree", "add", "--detach", str(wt), sha],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"git worktree add {wt} {sha} failed: {done.stderr.strip()}")
        logger.info("cells: worktree of the pinned commit %s at %s", sha[:12], wt)
    here = code_key(wt) if (wt / ".git").exists() else {"git_commit": None}
    if here["git_commit"] != sha:
        raise RuntimeError(
            f"{wt} is not a checkout of the pinned commit {sha} (HEAD {here['git_commit']}): "
            "remove it (git worktree remove) or move the plan's work folder"
        )
    if here["dirty"]:
        raise RuntimeError(
            f"{wt} has edits in {', '.join(CODE_PATHS)}: its code key would not be the pinned "
            f"commit's (git -C {wt} checkout -- . to drop them)"
        )
    cells_py = wt / (cells_module(wt).replace(".", "/") + ".py")
    if "--run-cell" not in (cells_py.read_text() if cells_py.exists() else ""):
        raise RuntimeError(
            f"the pinned commit {sha[:12]} has no `cells --run-cell` (it predates pinning): pin "
            "a later commit"
        )
    return wt


def cells_module(worktree: str | os.PathLike) -> str:
    """The dotted name of the cells module that ``worktree`` has: the first of
    :data:`CELLS_MODULES` whose file is there (a commit from before the move to
    ``benchmarks/`` has ``experiments.self_evolution.cells``), else today's."""
    for name in CELLS_MODULES:
        if (Path(worktree) / (name.replace(".", "/") + ".py")).is_file():
            return name
    return CELLS_MODULES[0]


def pinned_command(
    plan: Plan,
    seed: int,
    arm: str,
    worktree: str | os.PathLike,
    record: str | os.PathLike,
    root: Path = REPO,
    environ: dict[str, str] | None = None,
    executable: str = sys.executable,
) -> tuple[list[str], Path, dict[str, str]]:
    """The subprocess that runs one cell of a pinned plan in ``worktree`` (pure: runs nothing).

    The child runs ``worktree``'s own ``cells`` module (:func:`cells_module`: by the dotted
    name it has there) on the plan file this plan was read from, with its ``--set``
    overrides, and this plan's out and work folders (relative ones taken from ``root``, so the
    child's scratch goes to this checkout's work folder); it writes the cell record to
    ``record``.

    Returns:
        ``(argv, cwd, env)``: ``argv`` = ``[executable, "-m", cells_module(worktree),
        "--plan", PLAN, "--run-cell", SEED, ARM, "--record", RECORD, "--out", OUT, "--work",
        WORK, ("--set", KEY=VALUE)...]`` (absolute paths); ``cwd`` = ``worktree``; ``env`` =
        ``environ`` (default ``os.environ``) with ``worktree`` prepended to ``PYTHONPATH``.

    Raises:
        ValueError: if the plan was not read from a file (``plan.path`` empty).
    """
    if not plan.path:
        raise ValueError(f"plan {plan.name} has no file (load it with load_plan)")
    wt = Path(worktree).resolve()
    argv = [
        executable,
        "-m",
        cells_module(wt),
        "--plan",
        str(Path(plan.path).resolve()),
        "--run-cell",
        str(seed),
        arm,
        "--record",
        str(Path(record).resolve()),
        "--out",
        str(_under(plan.out, root)),
        "--work",
        str(_under(plan.work, root)),
    ]
    for item in plan.overrides:
        argv += ["--set", item]
    env = dict(os.environ if environ is None else environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(wt), env.get("PYTHONPATH", "")) if p)
    return argv, wt, env


TAIL_CHARS = 2000
"""Characters of a failed child's stderr quoted in the error."""


def run_subprocess(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run ``argv``, streaming its stderr to this process's stderr as it comes.

    Returns:
        ``(exit status, the last TAIL_CHARS characters of its stderr)``.
    """
    tail: deque[str] = deque()
    size = 0
    with subprocess.Popen(
        argv, cwd=cwd, env=env, stderr=subprocess.PIPE, text=True, errors="replace"
    ) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            sys.stderr.write(line)
            sys.stderr.flush()
            tail.append(line)
            size += len(line)
            while size - len(tail[0]) >= TAIL_CHARS:
                size -= len(tail.popleft())
        rc = proc.wait()
    return rc, "".join(tail)[-TAIL_CHARS:]


def run_cell_pinned(
    plan: Plan,
    seed: int,
    arm: str,
    root: Path = REPO,
    runner: Callable[[list[str], Path, dict[str, str]], tuple[int, str]] = run_subprocess,
) -> dict[str, Any]:
    """:func:`run_cell` of the plan's pinned commit: in a subprocess in
    :func:`pinned_worktree` (:func:`pinned_command`), which writes the record to a temp file.

    Returns:
        The child's cell record (its provenance: the pinned commit and its code key).

    Raises:
        RuntimeError: if the child fails (naming the cell, with the last 2,000 characters of
            its stderr) or writes no record; as :func:`pinned_worktree`.
    """
    wt = pinned_worktree(plan, root)
    with tempfile.TemporaryDirectory(prefix="cell-record-") as tmp:
        record_file = Path(tmp) / f"seed{seed}__{arm.replace(':', '-')}.json"
        argv, cwd, env = pinned_command(plan, seed, arm, wt, record_file, root)
        logger.info("cells: seed %d %s runs in %s: %s", seed, arm, cwd, " ".join(argv))
        rc, tail = runner(argv, cwd, env)
        if rc != 0:
            raise RuntimeError(
                f"cell seed {seed} {arm} failed in {cwd} (exit {rc}); its stderr ends:\n{tail}"
            )
        record = read_cell(record_file)
    if record is None:
        raise RuntimeError(f"cell seed {seed} {arm} ran in {cwd} but wrote no record")
    want = reference_key(plan, root)["key"]
    got = record.get("provenance", {}).get("code_key")
    if got != want:
        logger.warning(
            "cells: seed %d %s carries code key %s, not the pinned commit's %s", seed, arm, got,
            want,
        )
    return record


def warm_start_ready(plan: Plan) -> bool:
    """Whether the plan's shared warm start is already in this machine's cache (imports the
    learners: the demonstrations make its key)."""
    import dataclasses

    from benchmarks.self_evolution import run as se
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

    from benchmarks.learning_curve import run as lc
    from benchmarks.self_evolution import run as se
    from learners.training.build import code_provenance
    from sage_env.sandbox import isolation_level

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
            # bwrap / unshare / rlimits: what ran the model's programs (validity and pay do not
            # depend on it, but a reader comparing cells from several machines should see it)
            "sandbox_isolation": isolation_level(),
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
    :func:`benchmarks.self_evolution.run.summarise`'s statistics (Wilson per point, exact
    McNemar, Student-t over seeds).

    Returns:
        The summary, with ``plan``, ``settings_key``, ``cells`` (accepted ``seed/arm`` names),
        ``missing`` and ``refused`` (``{"seed", "arm", "file", "reason"}``) added.
    """
    from benchmarks.common.stats import set_summary
    from benchmarks.self_evolution import run as se

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
            "sets": {name: set_summary(c) for name, c in curves.items()},
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
    """``--plan PLAN.toml`` with ``--status``, ``--run-missing --budget-min N``,
    ``--aggregate`` or ``--run-cell SEED ARM --record PATH``; ``--set KEY=VALUE`` overrides a
    setting, ``--out`` / ``--work`` the plan's folders.

    Returns:
        ``--status``: the :class:`CellStatus` list; ``--run-missing``: the cells run;
        ``--aggregate``: the summary; ``--run-cell``: the cell record (also written to
        ``--record``, atomically; no cell file, no commit).

    Raises:
        ValueError: on a bad plan, a pinned commit this repository lacks, or a ``--run-cell``
            outside the plan's grid.
    """
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.self_evolution.run --plan PLAN.toml",
        description="The self-evolution experiment as a grid of cells (arm x seed).",
    )
    ap.add_argument("--plan", required=True, help="the plan (TOML)")
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--status", action="store_true", help="table of done/missing/stale cells")
    what.add_argument("--run-missing", action="store_true", help="run missing cells in budget")
    what.add_argument("--aggregate", action="store_true", help="summary from the cell files")
    what.add_argument(
        "--run-cell",
        nargs=2,
        metavar=("SEED", "ARM"),
        help="run one cell here, writing its record to --record (what a pinned cell's "
        "subprocess runs)",
    )
    ap.add_argument("--record", help="with --run-cell: JSON file for the cell's record")
    ap.add_argument("--budget-min", type=float, default=60.0, help="minutes for --run-missing")
    ap.add_argument("--rerun-stale", action="store_true", help="--run-missing reruns stale cells")
    ap.add_argument("--commit", action="store_true", help="git-commit each cell file when done")
    ap.add_argument("--set", action="append", default=[], help="KEY=VALUE: override a setting")
    ap.add_argument("--out", help="results folder (default: the plan's)")
    ap.add_argument("--work", help="scratch folder (default: the plan's)")
    args = ap.parse_args(argv)
    if args.run_cell and not args.record:
        ap.error("--run-cell needs --record PATH")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    plan = load_plan(args.plan, args.set)
    plan.out = args.out or plan.out
    plan.work = args.work or plan.work
    if args.status:
        cells = status(plan)
        print(reference_line(plan))
        print(status_table(cells))
        return cells
    if args.run_cell:
        seed, arm = int(args.run_cell[0]), args.run_cell[1]
        if (seed, arm) not in plan.cells():
            raise ValueError(f"plan {plan.name} has no cell seed {seed} {arm}")
        if plan.commit and code_key()["key"] != reference_key(plan)["key"]:
            logger.warning(
                "cells: this checkout is not the pinned commit %s: the record's code key "
                "will make the cell stale",
                plan.commit,
            )
        record = run_cell(plan, seed, arm)
        write_atomic(Path(args.record), record)
        return record
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


if __name__ == "__main__":
    main(sys.argv[1:])

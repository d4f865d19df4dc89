"""Reading a run folder into the data the run report shows (:func:`load_run`).

What :func:`learners.training.loop.train` leaves in a run folder (``metrics.jsonl``,
``transcripts/step_N.jsonl`` or ``.txt``, ``pool.jsonl``, ``config.yaml``) as JSON-safe data:
curves, the critic probe's scores, every proposal with its outcome, the rounds and notes on
what was missing or left out. :mod:`learners.reports.run_report` renders it.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from learners.reports.proposals import (
    _cut,
    _number,
    _proposals,
    _slim_action,
    _split_text_rounds,
)
from sage_env import Task

_POOL_KEYS = ("pool/seeds", "pool/generated")


def read_jsonl_rows(path: Path) -> tuple[list[dict[str, Any]], int]:
    """JSON objects of a JSONL file, and how many lines were skipped as unreadable.

    A line a killed process left half-written, or one that is not a JSON object, is
    skipped and counted, never raised.
    """
    rows, bad = [], 0
    try:
        fh = open(path, encoding="utf-8", errors="replace")
    except OSError:
        return [], 0
    with fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            if isinstance(row, dict):
                rows.append(row)
            else:
                bad += 1
    return rows, bad


def roc_curve(positive: list[float], negative: list[float]) -> tuple[list[float], list[float]]:
    """ROC points of scores where ``positive`` should outscore ``negative``.

    A threshold t accepts scores >= t; thresholds run from above the highest score down to
    the lowest, so the curve goes from (0, 0) to (1, 1). Its trapezoid area equals
    :func:`sage_env.diagnostics.critic_probe.auc` (ties count one half).

    Returns:
        ``(false positive rates, true positive rates)``, same length; empty when either
        list is empty.
    """
    if not positive or not negative:
        return [], []
    fpr, tpr = [0.0], [0.0]
    for t in sorted(set(positive) | set(negative), reverse=True):
        fpr.append(sum(q >= t for q in negative) / len(negative))
        tpr.append(sum(q >= t for q in positive) / len(positive))
    return fpr, tpr


def _finite(x: Any) -> Any:
    """``x`` with every non-finite float replaced by None (JSON has no NaN)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def _step_of(path: Path) -> int | None:
    m = re.fullmatch(r"step_(\d+)\.(?:jsonl|txt)", path.name)
    return int(m.group(1)) if m else None


def _metrics(rows: list[dict[str, Any]]) -> tuple[dict[str, list], list[dict[str, Any]]]:
    """Columnar numeric metrics by step, and the critic probe's per-step item scores."""
    by_step: dict[int, dict[str, Any]] = {}
    for row in rows:
        step = _number(row.get("step"))
        if step is None:
            continue
        by_step.setdefault(int(step), {}).update(row)  # a repeated step: the later row wins
    steps = sorted(by_step)
    keys: dict[str, None] = {}
    for s in steps:
        for k, v in by_step[s].items():
            if k != "step" and _number(v) is not None:
                keys.setdefault(k)
    columns: dict[str, list] = {"step": steps}
    for k in keys:
        columns[k] = [_number(by_step[s].get(k)) for s in steps]
    probes = []
    for s in steps:
        row = by_step[s]
        good, bad = row.get("critic/probe_q_intact"), row.get("critic/probe_q_corrupted")
        if isinstance(good, list) and isinstance(bad, list):
            good = [v for v in map(_number, good) if v is not None]
            bad = [v for v in map(_number, bad) if v is not None]
            fpr, tpr = roc_curve(good, bad)
            probes.append(
                {
                    "step": s,
                    "intact": good,
                    "corrupted": bad,
                    "fpr": fpr,
                    "tpr": tpr,
                    "auc": _number(row.get("critic/auc")),
                    "alpha": _number(row.get("gate/alpha")),
                }
            )
    return columns, probes


TRAINED_NOTHING = (
    "trained nothing: no step's update changed the weights (learner/trained = 0 at every "
    "step), so every later figure is the starting model's "
    "(docs/guide/debugging.md#5-a-run-that-trains-nothing)"
)
"""The note (and the summary's badge) of a run that trained nothing."""


def _kinds(rows: Any) -> dict[str, int]:
    """Generated tasks among pool rows by kind (:func:`admitted_counts`).

    Rows that are not tasks are skipped.
    """
    tasks = []
    for row in rows:
        try:
            tasks.append(Task.from_dict(row))
        except (TypeError, ValueError, KeyError):
            continue
    return admitted_counts(tasks)


def _trained_steps(metrics: dict[str, list]) -> int | None:
    """Steps whose update changed the weights (``learner/trained`` = 1); None when not logged."""
    flags = [v for v in metrics.get("learner/trained", []) if v is not None]
    return sum(1 for v in flags if v == 1.0) if flags else None


def _config_summary(cfg: dict[str, Any]) -> dict[str, Any]:
    env = cfg.get("env") or {}
    rewards = env.get("rewards") or {}
    learner = cfg.get("learner") or {}
    warm = cfg.get("warmup") or {}
    lora = learner.get("lora") or {}
    pairs = {
        "model": cfg.get("model"),
        "protocol": env.get("protocol"),
        "algorithm": cfg.get("algorithm"),
        "steps": cfg.get("steps"),
        "rounds per step": cfg.get("rounds_per_step"),
        "solver samples (k)": env.get("solver_samples"),
        "alpha (quality gate)": rewards.get("alpha"),
        "beta (plan gate)": rewards.get("beta"),
        "critic score estimate": rewards.get("critic_score_estimate"),
        "gate calibration": cfg.get("gate_calibration"),
        "critic probe size": cfg.get("critic_probe_size"),
        "pool admission": env.get("pool_admission"),
        "difficulty rule": rewards.get("difficulty_rule"),
        "learning rate": learner.get("lr"),
        "LoRA rank": lora.get("r") if lora else None,
        "warm-up steps": warm.get("steps"),
        "temperature": cfg.get("temperature"),
        "seed": cfg.get("seed"),
        "device": cfg.get("device"),
    }
    return {k: v for k, v in pairs.items() if v is not None}


def load_run(
    path: str | Path, max_rounds_per_step: int = 8, max_rejected: int = 20_000
) -> dict[str, Any]:
    """Everything the page shows of one run folder, as JSON-safe data.

    Args:
        path: A run folder (``sage-env train --out``).
        max_rounds_per_step: Rounds per step whose transcript is kept (0 = all).
        max_rejected: Rejected proposals kept, the latest (0 = all).

    Returns:
        ``{"name", "path", "config", "summary", "metrics", "probes", "tasks", "parents",
        "rounds", "notes"}``; ``summary["trained_steps"]`` counts the steps whose update
        changed the weights (None when ``learner/trained`` was not logged), and a run with
        0 gets the note :data:`TRAINED_NOTHING`.

    Raises:
        FileNotFoundError: if ``path`` is not a folder or holds none of ``metrics.jsonl``,
            ``pool.jsonl``, ``transcripts/``.
    """
    run = Path(path)
    if not run.is_dir():
        raise FileNotFoundError(f"{run} is not a folder (give the --out folder of a run)")
    found = [n for n in ("metrics.jsonl", "pool.jsonl", "transcripts") if (run / n).exists()]
    if not found:
        raise FileNotFoundError(
            f"{run} holds no run: none of metrics.jsonl, pool.jsonl, transcripts/ is there"
        )
    notes: list[str] = []
    config, config_text = _read_config(run, notes)
    metrics, probes = _read_metrics(run, notes)
    pool_rows, bad = read_jsonl_rows(run / "pool.jsonl")
    if bad:
        notes.append(f"pool.jsonl: {bad} unreadable line(s) skipped")
    pool = {str(t.get("task_id")): t for t in pool_rows if t.get("task_id") is not None}
    tasks, rounds = _read_transcripts(run, max_rounds_per_step, notes)
    tasks = _cap_rejected(tasks, max_rejected, notes)
    _merge_pool(tasks, pool)
    if pool and not any(t.get("source") == "generated" for t in pool.values()) and not tasks:
        notes.append("the pool holds no generated task")
    seeds_n = sum(1 for t in pool.values() if t.get("source") != "generated")
    generated_n = len(pool) - seeds_n
    if not pool:  # no pool.jsonl: the last logged sizes
        last = {k: [v for v in metrics.get(k, []) if v is not None] for k in _POOL_KEYS}
        seeds_n = int(last["pool/seeds"][-1]) if last["pool/seeds"] else 0
        generated_n = int(last["pool/generated"][-1]) if last["pool/generated"] else 0
        if (run / "metrics.jsonl").exists():
            notes.append("no pool.jsonl: the pool view lists only what the round records hold")
    trained = _trained_steps(metrics)
    if trained == 0:
        notes.append(TRAINED_NOTHING)
    summary = {
        "steps": len([s for s in metrics["step"] if s > 0]),
        "trained_steps": trained,
        "last_step": metrics["step"][-1] if metrics["step"] else None,
        "proposals": len(tasks),
        "accepted": sum(t["accepted"] for t in tasks),
        "pool_seeds": seeds_n,
        "pool_generated": generated_n,
        # self-made tasks by kind (exec/<mode>, math, code), as `sage-env train` ends
        "pool_generated_by_kind": _kinds(pool.values()),
        "rounds": len(rounds),
    }
    return _finite(
        {
            "name": run.resolve().name,
            "path": str(run),
            "config": _config_summary(config),
            "config_text": config_text[:20_000],
            "summary": summary,
            "metrics": metrics,
            "probes": probes,
            "tasks": tasks,
            "parents": _parents(tasks, pool),
            "rounds": rounds,
            "notes": notes,
        }
    )


def _read_config(run: Path, notes: list[str]) -> tuple[dict[str, Any], str]:
    """``(config, its text)`` from ``config.yaml`` (empty when absent or unparsable)."""
    config: dict[str, Any] = {}
    config_text = ""
    if (run / "config.yaml").exists():
        config_text = (run / "config.yaml").read_text(encoding="utf-8", errors="replace")
        try:
            loaded = yaml.safe_load(config_text)
            config = loaded if isinstance(loaded, dict) else {}
        except yaml.YAMLError as exc:
            notes.append(f"config.yaml does not parse ({str(exc)[:200]})")
    return config, config_text


def _read_metrics(run: Path, notes: list[str]) -> tuple[dict[str, list], list[dict[str, Any]]]:
    """The curves and the critic probe's per-item scores of ``metrics.jsonl``."""
    rows, bad = read_jsonl_rows(run / "metrics.jsonl")
    if bad:
        notes.append(f"metrics.jsonl: {bad} unreadable line(s) skipped")
    metrics, probes = _metrics(rows)
    if not rows:
        notes.append("no metrics.jsonl rows: no curves")
    if rows and not probes and "critic/auc" in metrics:
        notes.append(
            "the critic probe's per-item scores are not in metrics.jsonl (a run from before "
            "they were logged): the critic section shows AUC over steps only"
        )
    return metrics, probes


def _read_transcripts(
    run: Path, max_rounds_per_step: int, notes: list[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(proposals, rounds)`` from ``transcripts/step_N.jsonl`` (else ``step_N.txt``)."""
    tasks: list[dict[str, Any]] = []
    rounds: list[dict[str, Any]] = []
    omitted = 0
    folder = run / "transcripts"
    json_steps: set[int] = set()
    files = sorted(folder.glob("step_*.jsonl")) if folder.is_dir() else []
    for f in files:
        step = _step_of(f)
        if step is None:
            continue
        json_steps.add(step)
        records, bad = read_jsonl_rows(f)
        if bad:
            notes.append(f"{f.name}: {bad} unreadable line(s) skipped")
        for n, rec in enumerate(records):
            rec.setdefault("step", step)
            included = max_rounds_per_step <= 0 or n < max_rounds_per_step
            tasks += _proposals(rec, included)
            if included:
                actions = [_slim_action(a) for a in rec.get("actions") or [] if isinstance(a, dict)]
                rounds.append(
                    {"step": rec["step"], "round": rec.get("round", n), "actions": actions}
                )
            else:
                omitted += 1
    texts = sorted(folder.glob("step_*.txt")) if folder.is_dir() else []
    text_only = [f for f in texts if _step_of(f) is not None and _step_of(f) not in json_steps]
    for f in text_only:
        step = _step_of(f)
        parts = _split_text_rounds(step, f.read_text(encoding="utf-8", errors="replace"))
        keep = parts if max_rounds_per_step <= 0 else parts[:max_rounds_per_step]
        omitted += len(parts) - len(keep)
        rounds += [dict(r, text=_cut(r["text"], 200_000)) for r in keep]
    if text_only:
        notes.append(
            f"{len(text_only)} step(s) have plain-text transcripts only (a run from before "
            "transcripts/step_N.jsonl): their rounds show as text, and the pool view lists "
            "only the accepted tasks that pool.jsonl holds, not the rejected proposals"
        )
    if omitted:
        notes.append(
            f"{omitted} round(s) beyond {max_rounds_per_step} per step left out of the "
            "transcripts (--max-rounds-per-step 0 keeps all); their proposals are in the pool"
        )
    rounds.sort(key=lambda r: (r["step"] if isinstance(r["step"], int) else 0, r["round"]))
    return tasks, rounds


def _cap_rejected(
    tasks: list[dict[str, Any]], max_rejected: int, notes: list[str]
) -> list[dict[str, Any]]:
    """``tasks`` with only the latest ``max_rejected`` rejected proposals (0 keeps all)."""
    rejected = [i for i, t in enumerate(tasks) if not t["accepted"]]
    if max_rejected > 0 and len(rejected) > max_rejected:
        drop = set(rejected[: len(rejected) - max_rejected])  # the oldest
        tasks = [t for i, t in enumerate(tasks) if i not in drop]
        notes.append(
            f"{len(drop)} older rejected proposal(s) left out of the pool view "
            f"(--max-rejected {max_rejected}; 0 keeps all); every accepted one is in"
        )
    return tasks


def _merge_pool(tasks: list[dict[str, Any]], pool: dict[str, dict]) -> None:
    """Mark the accepted tasks of the final pool, add those no round record knows (in place)."""
    by_id = {t["id"]: t for t in tasks if t["candidate"]}
    for tid, t in pool.items():
        if t.get("source") != "generated":
            continue
        meta = t.get("meta") if isinstance(t.get("meta"), dict) else {}
        row = by_id.get(tid)
        if row is None:
            row = _pool_row(tid, t, meta)
            tasks.append(row)
            by_id[tid] = row
        row["in_pool"] = True
        if row.get("q") is None:
            row["q"] = _number(meta.get("q"))
        if row.get("d") is None:
            row["d"] = _number(meta.get("d"))
    for t in tasks:
        p = t["probe"]
        t["solved"] = None if not p else bool(max(p) > 0)
        if t["accepted"] and not t["in_pool"] and pool and t["outcome"] == "accepted":
            t["outcome"] = "evicted"  # accepted, later removed by the pool's size cap


def _pool_row(tid: str, t: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """The pool view's row of an accepted task known only from ``pool.jsonl``."""
    scores = meta.get("probe_scores") or meta.get("scores") or []
    step = meta.get("step", meta.get("episode"))
    return {
        "id": tid,
        "candidate": True,
        "parent": str(t.get("parent_id") or ""),
        "domain": str(t.get("domain") or ""),
        "step": step if isinstance(step, int) else None,
        "round": None,
        "accepted": True,
        "outcome": "accepted",
        "reason": "",
        "check": "",
        "check_reason": "",
        "q": _number(meta.get("q")),
        "d": _number(meta.get("d")),
        "probe": [_number(v) or 0.0 for v in scores if _number(v) is not None],
        "reward": None,
        "question": _cut(t.get("prompt")),
        "answer": _cut(t.get("answer"), 400),
        "tests": _cut("\n".join(map(str, t.get("tests") or []))),
        "transcript": False,
    }


def _parents(tasks: list[dict[str, Any]], pool: dict[str, dict]) -> dict[str, Any]:
    """The text of every proposal's parent task (from the pool, else the bundled seeds)."""
    parents: dict[str, Any] = {}
    wanted = {t["parent"] for t in tasks if t["parent"]}
    seeds = None
    for pid in sorted(wanted):
        src = pool.get(pid)
        if src is None:
            if seeds is None:
                seeds = _seed_index()
            src = seeds.get(pid)
        if src is not None:
            parents[pid] = {
                "prompt": _cut(src.get("prompt"), 1500),
                "domain": src.get("domain"),
                "source": src.get("source"),
                "parent": src.get("parent_id"),
            }
    return parents


def _seed_index() -> dict[str, dict[str, Any]]:
    """The bundled seeds by id (parents of a run without ``pool.jsonl``)."""
    try:
        from sage_env import load_seeds

        return {t.task_id: t.to_dict() for t in load_seeds()}
    except (OSError, ValueError):
        return {}


def admitted_counts(tasks: list[Task]) -> dict[str, int]:
    """Self-made tasks among ``tasks`` (``source == "generated"``), counted by kind.

    An execution task counts under ``"exec/<mode>"`` (deduction, abduction, induction), any
    other under its domain (``"math"``, ``"code"``); kinds are sorted by name.

    Args:
        tasks: A pool's tasks (``TaskPool.tasks`` or ``read_jsonl(OUT/pool.jsonl)``).
    """
    from sage_env.tasks.exec_tasks import exec_mode

    counts: dict[str, int] = defaultdict(int)
    for t in tasks:
        if t.source == "generated":
            mode = exec_mode(t)
            counts[f"exec/{mode}" if mode else t.domain] += 1
    return dict(sorted(counts.items()))


def admitted_line(counts: dict[str, int], steps: int | None = None) -> str:
    """One line for the end of ``sage-env train``: self-made tasks in the pool, by kind.

    Example: ``self-made tasks in the pool: 13 over 12 steps (exec/deduction 9,
    exec/induction 4)``; with none, ``self-made tasks in the pool: 0 over 12 steps``.

    Args:
        counts: :func:`admitted_counts`'s dict.
        steps: Steps the run played (left out of the line when ``None``).
    """
    total = sum(counts.values())
    over = "" if steps is None else f" over {steps} step{'s' if steps != 1 else ''}"
    kinds = ", ".join(f"{k} {n}" for k, n in counts.items() if n)
    return f"self-made tasks in the pool: {total}{over}" + (f" ({kinds})" if kinds else "")

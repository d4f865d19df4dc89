"""``sage-env report``: one self-contained HTML page of a run (or several, overlaid).

The page answers the four questions a run leaves: did the pool grow and with what, which
tasks were accepted and were they any good, does the critic's gate discriminate, and what did
each role write. It reads what :func:`learners.training.loop.train` leaves in a run folder:

- ``metrics.jsonl``: the curves (every numeric key; several runs overlaid with a legend) and
  the critic probe's per-item scores (``critic/probe_q_intact`` / ``_corrupted``);
- ``transcripts/step_N.jsonl``: every round as structured data (``learners.training.metrics
  .round_records``): the transcripts section and every proposal, accepted or rejected, with
  its parent, verifier check, critic score and difficulty probes; runs written before that
  file existed fall back to ``transcripts/step_N.txt`` (plain text) and ``pool.jsonl``;
- ``pool.jsonl``: the final pool (seeds, the parents' text, accepted tasks' provenance);
- ``config.yaml``: the run's settings.

Charts are Plotly (``plotly.offline.get_plotlyjs()``, inlined): a well-kept library whose
bundle works offline, with zoom, hover and legend toggles out of the box. Scripts, styles and
data are all inline, so the file opens from disk with no network.
"""

from __future__ import annotations

import datetime
import json
import logging
import math
import re
from collections import Counter
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

logger = logging.getLogger("sage_env.report")

TEMPLATE = "report_template.html"
"""The page template, shipped as package data next to this module."""
TEXT_CHARS = 4000
"""Longest question, answer or test text kept per task in the pool view."""
PROPOSAL_PHASES = ("challenge", "propose")
_POOL_KEYS = ("pool/seeds", "pool/generated")
"""Phases whose action proposes a task (the challenger's, a baseline proposer's)."""


@dataclass
class ReportConfig:
    """Options of ``sage-env report``."""

    runs: tuple[str, ...]
    """Run folders (``sage-env train --out``); several are overlaid in the curves."""
    out: str = "report.html"
    """The HTML file to write (one self-contained file)."""
    title: str | None = None
    """Page title (default: the run names)."""
    max_rounds_per_step: int = 8
    """Rounds per step whose full transcript goes into the page (0 = every round). Every
    round's proposal is in the pool view and every step in the curves whatever this is; it
    only bounds the page size of runs with many rounds per step."""
    max_rejected: int = 20_000
    """Rejected proposals kept in the pool view, the latest first (0 = all); every accepted
    one is kept. Bounds the page of a long run with many rounds per step."""


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
    :func:`sage_env.critic_probe.auc` (ties count one half).

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


def _cut(text: Any, n: int = TEXT_CHARS) -> str:
    s = "" if text is None else str(text)
    return s if len(s) <= n else s[:n] + f"\n... [{len(s) - n} more characters]"


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(x) else None


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
        "learning rate": learner.get("lr"),
        "LoRA rank": lora.get("r") if lora else None,
        "warm-up steps": warm.get("steps"),
        "temperature": cfg.get("temperature"),
        "seed": cfg.get("seed"),
        "device": cfg.get("device"),
    }
    return {k: v for k, v in pairs.items() if v is not None}


def _review_after(actions: list[dict], i: int, parent: str) -> dict | None:
    """The action right after proposal ``i`` when it acts on the candidate (review, probe)."""
    if i + 1 < len(actions):
        nxt = actions[i + 1]
        if nxt.get("task_id") and nxt.get("task_id") != parent and nxt.get("role") != "planner":
            return nxt
    return None


def _proposals(record: dict[str, Any], included: bool) -> list[dict[str, Any]]:
    """Every proposal of one round record, as a pool-view row."""
    actions = [a for a in record.get("actions") or [] if isinstance(a, dict)]
    step, rnd = record.get("step"), record.get("round")
    rows = []
    for i, a in enumerate(actions):
        details = a.get("details") if isinstance(a.get("details"), dict) else {}
        parsed = details.get("parsed") if isinstance(details.get("parsed"), dict) else None
        if parsed is None and a.get("phase") not in PROPOSAL_PHASES:
            continue
        parsed = parsed or {}
        parent = str(a.get("task_id") or "")
        terms = details.get("terms") if isinstance(details.get("terms"), dict) else {}
        check = details.get("verifier_check")
        check = check if isinstance(check, dict) else {}
        accepted = bool(details.get("accepted", parsed.get("valid")))
        added = details.get("added_to_pool")
        new_id = details.get("new_task_id")
        follow = _review_after(actions, i, parent)
        cand = new_id or (follow or {}).get("task_id")
        q = _number(terms.get("q"))
        if q is None and follow is not None and isinstance(follow.get("details"), dict):
            q = _number(follow["details"].get("q"))
        probes = []
        if cand:  # the solver's attempts on the candidate (SAGE's probes, AZR's solves)
            for b in actions[i + 1 :]:
                bd = b.get("details") if isinstance(b.get("details"), dict) else {}
                if b.get("role") == "solver" and b.get("task_id") == cand:
                    verdict = bd.get("verdict") if isinstance(bd.get("verdict"), dict) else {}
                    probes.append(_number(verdict.get("score")) or 0.0)
        if not probes and isinstance(details.get("probe_scores"), list):
            probes = [_number(v) or 0.0 for v in details["probe_scores"]]
        gate = details.get("gate")
        if accepted:
            outcome = "accepted" if added is not False else "duplicate"
        elif not parsed.get("well_formed", parsed.get("valid")) and not check:
            outcome = "unparsed"
        elif "duplicate" in str(parsed.get("reason") or ""):
            outcome = "duplicate"
        elif check.get("status") == "failed":
            outcome = "verifier failed"
        elif isinstance(gate, str) and "probe" in gate:
            outcome = "unsolved"
        elif isinstance(gate, str) and gate:
            outcome = "gate"
        else:
            outcome = "invalid"
        reason = gate or parsed.get("reason") or ("" if accepted else check.get("reason")) or ""
        rows.append(
            {
                "id": str(new_id or cand or f"step{step}/round{rnd}"),
                "candidate": bool(new_id or cand),
                "parent": parent,
                "domain": str(a.get("domain") or ""),
                "step": step,
                "round": rnd,
                "accepted": accepted,
                "outcome": outcome,
                "reason": _cut(reason, 400),
                "check": check.get("status") or "",
                "check_reason": _cut(check.get("reason"), 400),
                "q": q,
                "d": _number(terms.get("d")),
                "probe": probes,
                "reward": _number(a.get("reward")),
                "question": _cut(parsed.get("question")),
                "answer": _cut(parsed.get("answer"), 400),
                "tests": _cut("\n".join(map(str, parsed.get("tests") or []))),
                "transcript": included,
                "in_pool": False,
            }
        )
    return rows


def _split_text_rounds(step: int, text: str) -> list[dict[str, Any]]:
    parts = re.split(r"^######## step \d+ round (\d+) ########\n", text, flags=re.M)
    rounds = []
    for k in range(1, len(parts) - 1, 2):
        rounds.append({"step": step, "round": int(parts[k]), "text": parts[k + 1]})
    if not rounds and text.strip():
        rounds.append({"step": step, "round": 0, "text": text})
    return rounds


def _slim_action(a: dict[str, Any]) -> dict[str, Any]:
    """An action of a round record as the page shows it."""
    keep = (
        "agent",
        "role",
        "phase",
        "task_id",
        "domain",
        "observation",
        "prefix",
        "action",
        "reward",
        "tokens",
        "truncated",
        "details",
    )
    return {k: a[k] for k in keep if k in a}


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
        "rounds", "notes"}``.

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
    config: dict[str, Any] = {}
    config_text = ""
    if (run / "config.yaml").exists():
        config_text = (run / "config.yaml").read_text(encoding="utf-8", errors="replace")
        try:
            loaded = yaml.safe_load(config_text)
            config = loaded if isinstance(loaded, dict) else {}
        except yaml.YAMLError as exc:
            notes.append(f"config.yaml does not parse ({str(exc)[:200]})")
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

    pool_rows, bad = read_jsonl_rows(run / "pool.jsonl")
    if bad:
        notes.append(f"pool.jsonl: {bad} unreadable line(s) skipped")
    pool = {str(t.get("task_id")): t for t in pool_rows if t.get("task_id") is not None}

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
    rejected = [i for i, t in enumerate(tasks) if not t["accepted"]]
    if max_rejected > 0 and len(rejected) > max_rejected:
        drop = set(rejected[: len(rejected) - max_rejected])  # the oldest
        tasks = [t for i, t in enumerate(tasks) if i not in drop]
        notes.append(
            f"{len(drop)} older rejected proposal(s) left out of the pool view "
            f"(--max-rejected {max_rejected}; 0 keeps all); every accepted one is in"
        )

    # accepted tasks of the final pool: mark them, and add those no round record knows
    by_id = {t["id"]: t for t in tasks if t["candidate"]}
    for tid, t in pool.items():
        if t.get("source") != "generated":
            continue
        meta = t.get("meta") if isinstance(t.get("meta"), dict) else {}
        row = by_id.get(tid)
        if row is None:
            scores = meta.get("probe_scores") or meta.get("scores") or []
            step = meta.get("step", meta.get("episode"))
            row = {
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
    if pool and not any(t.get("source") == "generated" for t in pool.values()) and not tasks:
        notes.append("the pool holds no generated task")

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
    seeds_n = sum(1 for t in pool.values() if t.get("source") != "generated")
    generated_n = len(pool) - seeds_n
    if not pool:  # no pool.jsonl: the last logged sizes
        last = {k: [v for v in metrics.get(k, []) if v is not None] for k in _POOL_KEYS}
        seeds_n = int(last["pool/seeds"][-1]) if last["pool/seeds"] else 0
        generated_n = int(last["pool/generated"][-1]) if last["pool/generated"] else 0
        if (run / "metrics.jsonl").exists():
            notes.append("no pool.jsonl: the pool view lists only what the round records hold")
    summary = {
        "steps": len([s for s in metrics["step"] if s > 0]),
        "last_step": metrics["step"][-1] if metrics["step"] else None,
        "proposals": len(tasks),
        "accepted": sum(t["accepted"] for t in tasks),
        "pool_seeds": seeds_n,
        "pool_generated": generated_n,
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
            "parents": parents,
            "rounds": rounds,
            "notes": notes,
        }
    )


def _seed_index() -> dict[str, dict[str, Any]]:
    """The bundled seeds by id (parents of a run without ``pool.jsonl``)."""
    try:
        from sage_env import load_seeds

        return {t.task_id: t.to_dict() for t in load_seeds()}
    except (OSError, ValueError):
        return {}


def _unique_names(runs: list[dict[str, Any]]) -> None:
    counts = Counter(r["name"] for r in runs)
    seen: Counter = Counter()
    for r in runs:
        if counts[r["name"]] > 1:
            parent = Path(r["path"]).resolve().parent.name
            seen[r["name"]] += 1
            r["name"] = f"{parent}/{r['name']}" if parent else f"{r['name']} ({seen[r['name']]})"
    counts = Counter(r["name"] for r in runs)  # still equal (same parent name): number them
    seen = Counter()
    for r in runs:
        if counts[r["name"]] > 1:
            seen[r["name"]] += 1
            r["name"] = f"{r['name']} ({seen[r['name']]})"


def _script_json(data: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">`` (no ``</script>``)."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def render_html(runs: list[dict[str, Any]], title: str | None = None) -> str:
    """The page for runs loaded with :func:`load_run` (one self-contained HTML string)."""
    import html

    from plotly.offline import get_plotlyjs

    template = resources.files("learners.reports").joinpath(TEMPLATE).read_text(encoding="utf-8")
    title = title or "sage-env report: " + ", ".join(r["name"] for r in runs)
    payload = {
        "title": title,
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "runs": runs,
    }
    pieces = {
        "/*__PLOTLY_JS__*/": get_plotlyjs(),
        "__REPORT_DATA__": _script_json(payload),
        "__REPORT_TITLE__": html.escape(title),
    }
    out = [template]
    for marker, value in pieces.items():  # split on markers, so no value is ever rescanned
        nxt = []
        for part in out:
            if isinstance(part, tuple):
                nxt.append(part)
                continue
            chunks = part.split(marker)
            for k, chunk in enumerate(chunks):
                if k:
                    nxt.append((value,))
                nxt.append(chunk)
        out = nxt
    return "".join(p[0] if isinstance(p, tuple) else p for p in out)


def write_report(
    runs: list[str | Path] | tuple[str | Path, ...],
    out: str | Path,
    title: str | None = None,
    max_rounds_per_step: int = 8,
    max_rejected: int = 20_000,
) -> Path:
    """Write the HTML report of one or more run folders to ``out`` (atomically).

    Args:
        runs: Run folders; the curves overlay them, the other sections pick one at a time.
        out: The HTML file to write (its folder is created).
        title: Page title (default: the run names).
        max_rounds_per_step: Rounds per step whose transcript goes into the page (0 = all).
        max_rejected: Rejected proposals kept in the pool view, the latest (0 = all).

    Returns:
        ``Path(out)``.

    Raises:
        ValueError: if ``runs`` is empty.
        FileNotFoundError: if a run folder does not exist or holds no run.
    """
    if not runs:
        raise ValueError("give at least one run folder")
    loaded = [load_run(r, max_rounds_per_step, max_rejected) for r in runs]
    _unique_names(loaded)
    text = render_html(loaded, title)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text, encoding="utf-8", errors="replace")  # lone surrogates from a model
    tmp.replace(out)
    return out


def report_from_config(cfg: ReportConfig) -> Path:
    """Run ``sage-env report`` as configured; returns the file written."""
    return write_report(
        list(cfg.runs), cfg.out, cfg.title, cfg.max_rounds_per_step, cfg.max_rejected
    )


__all__ = [
    "ReportConfig",
    "load_run",
    "read_jsonl_rows",
    "render_html",
    "report_from_config",
    "roc_curve",
    "write_report",
]

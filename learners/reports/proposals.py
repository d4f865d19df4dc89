"""Proposals and rounds of a run's transcripts, as the run report's pool view lists them.

Each proposal (a challenger's or proposer's task) with its parent, outcome, verifier check,
critic score and difficulty probes, from the structured round records
(:func:`learners.training.metrics.round_records`); plain-text transcripts of older runs split
into rounds. Used by :mod:`learners.reports.run_data`.
"""

from __future__ import annotations

import math
import re
from typing import Any

TEXT_CHARS = 4000
"""Longest question, answer or test text kept per task in the pool view."""
PROPOSAL_PHASES = ("challenge", "propose")


def _cut(text: Any, n: int = TEXT_CHARS) -> str:
    s = "" if text is None else str(text)
    return s if len(s) <= n else s[:n] + f"\n... [{len(s) - n} more characters]"


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(x) else None


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
        elif isinstance(gate, str) and ("probe" in gate or "solved" in gate):
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

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

from sage_env.outcome import Decision, Outcome, Parse

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


def _outcome(action: dict[str, Any]) -> Outcome | None:
    """The :class:`~sage_env.outcome.Outcome` of a round record's action (its ``details``),
    ``None`` when it has none; keys an older version wrote and this one lacks are dropped."""
    details = action.get("details")
    if not isinstance(details, dict) or not details:
        return None
    try:
        return Outcome.from_dict(details, strict=False)
    except (TypeError, ValueError):  # a record this version cannot read: no outcome
        return None


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
    outcomes = [_outcome(a) for a in actions]
    for i, a in enumerate(actions):
        out = outcomes[i]
        parse = out.parse if out is not None else None
        if parse is None and a.get("phase") not in PROPOSAL_PHASES:
            continue
        parse = parse or Parse()
        parent = str(a.get("task_id") or "")
        terms = out.terms if out is not None else {}
        decision = (out.decision if out is not None else None) or Decision()
        check = (out.verifier_check if out is not None else None) or {}
        accepted = bool(decision.accepted if decision.accepted is not None else parse.valid)
        added, new_id = decision.added_to_pool, decision.new_task_id
        follow = _review_after(actions, i, parent)
        cand = new_id or (follow or {}).get("task_id")
        q = _number(terms.get("q"))
        if q is None and follow is not None:
            review = outcomes[i + 1]  # follow is the next action
            review = review.review if review is not None else None
            if review is not None and review.kind == "question":
                q = _number(review.score)
        probes = []
        if cand:  # the solver's attempts on the candidate (SAGE's probes, AZR's solves)
            for b, ob in zip(actions[i + 1 :], outcomes[i + 1 :]):
                if b.get("role") == "solver" and b.get("task_id") == cand:
                    verdict = ob.verdict if ob is not None else None
                    score = verdict.get("score") if isinstance(verdict, dict) else None
                    probes.append(_number(score) or 0.0)
        if not probes and isinstance(decision.probe_scores, list):
            probes = [_number(v) or 0.0 for v in decision.probe_scores]
        gate = decision.gate
        if accepted:
            outcome = "accepted" if added is not False else "duplicate"
        elif not (parse.well_formed or parse.valid) and not check:
            outcome = "unparsed"
        elif "duplicate" in str(parse.reason or ""):
            outcome = "duplicate"
        elif check.get("status") == "failed":
            outcome = "verifier failed"
        elif isinstance(gate, str) and ("probe" in gate or "solved" in gate):
            outcome = "unsolved"
        elif isinstance(gate, str) and gate:
            outcome = "gate"
        else:
            outcome = "invalid"
        reason = gate or parse.reason or ("" if accepted else check.get("reason")) or ""
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
                "question": _cut(parse.question),
                "answer": _cut(parse.answer, 400),
                "tests": _cut("\n".join(map(str, parse.tests or []))),
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

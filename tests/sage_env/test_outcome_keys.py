"""Every key a protocol delivers and every key a reader asks ``infos[agent]["last"]`` for is
one the :class:`sage_env.outcome.Outcome` type declares (issue 50 item 1).

The scan reads the source of ``sage_env/``, ``learners/``, ``examples/`` and ``tests/`` with
:mod:`ast`:
the keyword names of every ``deliver(...)`` call; string subscripts, ``.get("...")`` and
``"..." in`` tests on ``X["last"]``, on names and attributes called ``last``, ``details``
or ``*_details``; and the same on a ``parsed`` record against :class:`sage_env.outcome.Parse`.
The docs' ``["last"]["..."]`` examples are checked too. At run time ``deliver`` refuses an
undeclared key (``TypeError``) and ``Outcome["..."]`` / ``.get`` refuse one (``KeyError``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from sage_env.outcome import KEYS, PARSE_KEYS, Decision, Outcome, Parse, Review

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("sage_env", "learners", "examples", "tests")
NOT_AN_OUTCOME = {
    # a metrics record's last row, or a server reply: not infos["last"]
    ("learners/reports/run_data.py", "last"),
    ("examples/trl_grpo_solver.py", "last"),
    ("tests/learners/evaluation/test_heldout_during_training.py", "last"),
    ("tests/learners/test_trl_solver.py", "last"),
    ("tests/sage_env/interactive/test_openenv_server.py", "last"),
}
"""(file, name) pairs where a variable of an outcome-like name holds something else."""
RECORD_NAMES = ("last", "details", "outcome")


def _sources() -> list[Path]:
    return sorted(p for d in SCANNED for p in (ROOT / d).rglob("*.py"))


def _record_name(node: ast.AST) -> str | None:
    """The outcome-like name ``node`` is read through, or None.

    ``last``, ``details``, ``*_details``, ``outcome`` (names or attributes), or an expression
    ``X["last"]`` / ``X.get("last")`` (named ``"last"``).
    """
    if isinstance(node, ast.Name):
        name = node.id
    elif isinstance(node, ast.Attribute):
        name = node.attr
    elif isinstance(node, ast.Subscript) and _literal(node.slice) == "last":
        return "last"
    elif _get_call(node) == "last":
        return "last"
    else:
        return None
    if name in RECORD_NAMES or name.endswith("_details"):
        return name
    return None


def _literal(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _get_call(node: ast.AST) -> str | None:
    """The literal key of ``X.get("key", ...)``."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
    ):
        return _literal(node.args[0])
    return None


def _reads(tree: ast.AST) -> list[tuple[int, str, str, str]]:
    """``(line, record name, key, which type)`` of every literal-key read of a record."""
    out = []
    for node in ast.walk(tree):
        target = key = None
        if isinstance(node, ast.Subscript):
            target, key = node.value, _literal(node.slice)
        elif _get_call(node) is not None:
            target, key = node.func.value, _get_call(node)
        elif (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], (ast.In, ast.NotIn))
        ):
            target, key = node.comparators[0], _literal(node.left)
        if target is None or key is None:
            continue
        name = _record_name(target)
        if name is not None:
            out.append((node.lineno, name, key, "Outcome"))
            continue
        # a proposal's parse: X["parsed"][...], X.get("parsed").get(...), a name `parsed`
        parsed = (
            (isinstance(target, ast.Subscript) and _literal(target.slice) == "parsed")
            or _get_call(target) == "parsed"
            or (isinstance(target, ast.Name) and target.id == "parsed")
        )
        if parsed:
            out.append((node.lineno, "parsed", key, "Parse"))
    return out


def _deliver_keywords(tree: ast.AST) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name != "deliver":
            continue
        out += [(node.lineno, kw.arg) for kw in node.keywords if kw.arg is not None]
        for kw in node.keywords:  # **{"q": ...}: a dict literal's keys
            if kw.arg is None and isinstance(kw.value, ast.Dict):
                out += [(node.lineno, _literal(k)) for k in kw.value.keys if _literal(k)]
    return out


def test_the_scan_finds_the_deliver_calls_and_the_readers():
    trees = {p: ast.parse(p.read_text()) for p in _sources()}
    calls = sum(len(_deliver_keywords(t)) for t in trees.values())
    reads = sum(len(_reads(t)) for t in trees.values())
    assert calls >= 60 and reads >= 10  # about 26 calls with 2-8 keywords each


def test_every_deliver_keyword_is_an_outcome_key():
    bad = [
        f"{p.relative_to(ROOT)}:{line}: deliver(..., {kw}=...)"
        for p in _sources()
        for line, kw in _deliver_keywords(ast.parse(p.read_text()))
        if kw not in KEYS and kw not in ("why",)
    ]
    assert not bad, "keys Outcome does not declare (sage_env.outcome.KEYS):\n" + "\n".join(bad)


def test_every_reader_of_last_asks_for_a_declared_key():
    bad = []
    for p in _sources():
        rel = str(p.relative_to(ROOT))
        for line, name, key, kind in _reads(ast.parse(p.read_text())):
            if (rel, name) in NOT_AN_OUTCOME:
                continue
            declared = KEYS if kind == "Outcome" else PARSE_KEYS
            if key not in declared:
                bad.append(f"{rel}:{line}: {name}[{key!r}] ({kind} declares no such key)")
    assert not bad, "\n".join(bad)


DOC_READ = re.compile(r"""\["last"\]\["(\w+)"\]""")


def test_the_docs_read_declared_keys_only():
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *_sources()]
    bad = [
        f"{f.relative_to(ROOT)}: [\"last\"][{key!r}]"
        for f in files
        for key in DOC_READ.findall(f.read_text())
        if key not in KEYS
    ]
    assert not bad, "\n".join(bad)


def test_deliver_refuses_an_undeclared_key():
    with pytest.raises(TypeError, match="does not declare"):
        Outcome.build("solver_0", "solve", 1.0, {"s_gt": 1.0}, verdikt={"score": 1.0})


def test_an_undeclared_key_is_a_key_error_not_absent():
    out = Outcome.build("critic_0", "review_question", 1.0, {"f": 1.0}, review="question", q=0.5)
    assert out["q"] == 0.5 and out.get("gate") is None and "raw_score" in out
    with pytest.raises(KeyError, match="not a key of Outcome"):
        out.get("qq")
    with pytest.raises(KeyError, match="not a key of Outcome"):
        out["qq"]


def test_the_flat_form_reads_back_to_the_same_outcome():
    out = Outcome.build(
        "challenger_0",
        "challenge",
        0.75,
        {"q": 0.8, "d": 0.5, "f": 1.0},
        {"f": "it parses"},
        parsed={"valid": True, "well_formed": True, "reason": "", "question": "Q?"},
        accepted=True,
        added_to_pool=True,
        new_task_id="gen/0",
        verifier_check={"status": "passed", "reason": "ok"},
    )
    assert out.parse == Parse(valid=True, well_formed=True, reason="", question="Q?")
    assert out.decision == Decision(accepted=True, added_to_pool=True, new_task_id="gen/0")
    assert Outcome.from_dict(out.to_dict()) == out
    review = Outcome.build(
        "critic_0", "review_plan", 1.0, {"f": 1.0}, review="plan", p=0.3, raw_score=None
    )
    assert review.review == Review(kind="plan", score=0.3, raw_score=None)
    assert Outcome.from_dict(review.to_dict()) == review
    assert dict(review) == review.to_dict()

"""Audit CRUXEval-O answers that the scorer rejected: is the parser at fault, or the model?

Reads ``sage-env eval``'s per-item file (``items/cruxeval_o.jsonl``: completions, gold answer,
verdicts) and, for every completion scored wrong, looks for the gold value anywhere a lenient
reader could find it:

- ``literal``: any fenced block, or any line (after dropping a leading ``Output:`` / ``The
  output is``), that ``ast.literal_eval`` reads as a value equal to the gold value;
- ``bare``: a gold string written without its quotes (a whole fenced block or line equal to
  the string's text), which CRUXEval's own check (``assert f(input) == <answer>``) rejects too.

A ``literal`` hit would be a parser fault (a right answer that our scorer missed); a ``bare``
hit is a formatting fault of the model under CRUXEval's rule. Prints the counts as JSON.

Usage::

    python scripts/cruxeval_parse_audit.py RUN/items/cruxeval_o.jsonl
"""

from __future__ import annotations

import ast
import json
import re
import sys

_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)
_LEAD = re.compile(r"^\s*(?:the\s+)?output(?:\s+is)?\s*[:=]?\s*", re.IGNORECASE)


def candidates(text: str) -> list[str]:
    """Fenced blocks and lines of ``text``, each also without a leading 'Output:'."""
    out = [b.strip() for b in _FENCE.findall(text)]
    out += [ln.strip() for ln in text.splitlines() if ln.strip()]
    return out + [_LEAD.sub("", c) for c in out]


def audit(rows: list[dict]) -> dict:
    """Counts over rows: scored right, wrong, and wrong-but-found (``literal``/``bare``)."""
    counts = {"items": len(rows), "right": 0, "wrong": 0, "literal": 0, "bare": 0, "ids": []}
    for r in rows:
        text = r["completions"][0]
        if r["correct"][0]:
            counts["right"] += 1
            continue
        counts["wrong"] += 1
        gold = ast.literal_eval(r["answer"])
        lit = bare = False
        for c in candidates(text):
            try:
                lit = lit or ast.literal_eval(c) == gold
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                pass
            bare = bare or (isinstance(gold, str) and gold != "" and c == gold)
        counts["literal"] += lit
        counts["bare"] += bare and not lit
        if lit or bare:
            counts["ids"].append([r["item_id"], "literal" if lit else "bare"])
    return counts


def main() -> None:
    """Print the audit of the file named on the command line."""
    rows = [json.loads(x) for x in open(sys.argv[1], encoding="utf-8") if x.strip()]
    print(json.dumps(audit(rows), indent=1))


if __name__ == "__main__":
    main()

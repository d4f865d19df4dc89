"""Build ``sage_env/data/exec_heldout.jsonl``: a held-out set of execution tasks (deduction).

Short programs (one or two lines of arithmetic, string or list code) drawn from the templates
below with ``random.Random(SEED)``: a template fixes the operation, the generator draws its
constants and the input. Every output is the sandboxed executor's
(:func:`sage_env.verifiers.executor.validate_program`: parses, no forbidden module, runs
within the limits, deterministic over two runs, literal input and output that round-trip),
never a value written here. A program is kept only when its text differs from every bundled
execution seed's (``sage_env/data/exec_seeds.jsonl``, the AZR buffers' seeds) and from every
CRUXEval program (``learners/data/benchmarks/code/cruxeval.jsonl.gz``) and from AZR's
identity program; no (program, input) pair repeats.

The set is made for the default model (SmolLM2-135M-Instruct): CRUXEval's programs are too
hard for it (0/24 greedy, docs/write-ups/evaluation.md), so these are simpler; the base accuracy
measured on them is in docs/write-ups/evaluation.md ("Execution held-out set").

Records: ``{"id", "mode": "deduction", "family", "program", "input", "output"}``.
Deterministic: the same file on every run (fixed seed, templates in order).

Usage::

    python scripts/build_exec_heldout.py [--n 240] [--out sage_env/data/exec_heldout.jsonl]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import string
from collections.abc import Callable
from pathlib import Path

from sage_env.verifiers.executor import validate_program

SEED = 20261202
"""Seed of every draw."""

ROOT = Path(__file__).resolve().parents[1]
WORDS = ["apple", "banana", "cat", "dog", "hello", "world", "python", "code", "sun", "tree",
         "river", "moon", "blue", "green", "stone", "bird", "sage", "exec", "lamp", "book"]


def _int(rng: random.Random, lo: int = -9, hi: int = 20) -> int:
    return rng.randint(lo, hi)


def _word(rng: random.Random) -> str:
    return rng.choice(WORDS)


def _list(rng: random.Random, n: tuple[int, int] = (3, 6)) -> list[int]:
    return [rng.randint(-5, 15) for _ in range(rng.randint(*n))]


Template = Callable[[random.Random], tuple[str, str]]
"""``rng -> (body of f, input text)``; the body is the line(s) after ``def f(...):``."""


def _t(sig: str, body: str, arg: Callable[[random.Random], object]) -> Template:
    """A template: ``body`` may name ``{a}``, ``{b}``, ``{w}`` (constants drawn per program)."""

    def make(rng: random.Random) -> tuple[str, str]:
        consts = {"a": rng.randint(2, 9), "b": rng.randint(1, 9), "w": repr(_word(rng)),
                  "c": repr(rng.choice(string.ascii_lowercase[:8]))}
        src = f"def f({sig}):\n    " + body.format(**consts)
        value = arg(rng)
        text = ", ".join(repr(v) for v in value) if isinstance(value, tuple) else repr(value)
        return src, text

    return make


TEMPLATES: dict[str, list[Template]] = {
    "int": [
        _t("x", "return x + {a}", _int),
        _t("x", "return x - {a}", _int),
        _t("x", "return x * {a}", _int),
        _t("x", "return x * {a} + {b}", _int),
        _t("x", "return (x + {a}) * {b}", _int),
        _t("x", "return x // {a}", lambda r: _int(r, 0, 60)),
        _t("x", "return x % {a}", lambda r: _int(r, 0, 60)),
        _t("x", "return x * x", lambda r: _int(r, -9, 12)),
        _t("x", "return max(x, {a})", _int),
        _t("x", "return min(x, {a})", _int),
        _t("x", "return abs(x - {a})", _int),
        _t("x", "return x > {a}", _int),
        _t("x, y", "return x + y", lambda r: (_int(r), _int(r))),
        _t("x, y", "return x * y - {a}", lambda r: (_int(r, 0, 9), _int(r, 0, 9))),
        _t("x", "return str(x) + {w}", lambda r: _int(r, 0, 99)),
        _t("x", "return [x] * {a}", lambda r: _int(r, 0, 9)),
    ],
    "str": [
        _t("s", "return s.upper()", _word),
        _t("s", "return s[::-1]", _word),
        _t("s", "return s + {w}", _word),
        _t("s", "return len(s)", _word),
        _t("s", "return s[0]", _word),
        _t("s", "return s[-1]", _word),
        _t("s", "return s[1:{a}]", _word),
        _t("s", "return s * 2", _word),
        _t("s", "return s.count({c})", _word),
        _t("s", "return s.replace({c}, 'z')", _word),
        _t("s", "return s.capitalize()", _word),
        _t("s", "return len(s) + {a}", _word),
        _t("s", "return s[::-1].upper()", _word),
        _t("s", "return {c} in s", _word),
        _t("s, t", "return s + '-' + t", lambda r: (_word(r), _word(r))),
        _t("s", "return s.split('a')", _word),
    ],
    "list": [
        _t("xs", "return len(xs)", _list),
        _t("xs", "return sum(xs)", _list),
        _t("xs", "return max(xs)", _list),
        _t("xs", "return min(xs)", _list),
        _t("xs", "return sorted(xs)", _list),
        _t("xs", "return xs[::-1]", _list),
        _t("xs", "return xs[0] + xs[-1]", _list),
        _t("xs", "return xs + [{a}]", _list),
        _t("xs", "return [x + {a} for x in xs]", _list),
        _t("xs", "return [x * {a} for x in xs]", _list),
        _t("xs", "return [x for x in xs if x > {a}]", _list),
        _t("xs", "return xs.count({a})", lambda r: _list(r) + [r.randint(2, 9)]),
        _t("xs", "return {a} in xs", _list),
        _t("xs", "return xs[1:{a}]", _list),
        _t("xs", "return sum(xs) * {a}", _list),
        _t("xs", "return sorted(xs)[-1] - sorted(xs)[0]", _list),
    ],
    "copy": [  # the output is the input unchanged, or a constant: the easiest reading
        _t("x", "return x + 0", _int),
        _t("x", "return x * 1", _int),
        _t("x", "return int(x)", _int),
        _t("x", "return min(x, 100)", _int),
        _t("x", "return abs(x)", lambda r: _int(r, 1, 30)),
        _t("x", "return {a}", _int),
        _t("s", "return {w}", _word),
        _t("s", "return s.lower()", _word),
        _t("s", "return s.strip()", _word),
        _t("s", "return str(s)", _word),
        _t("s", "return s[:]", _word),
        _t("xs", "return list(xs)", _list),
        _t("xs", "return xs[:]", _list),
        _t("xs", "return sorted(xs)", lambda r: sorted(_list(r))),
        _t("x, y", "return x", lambda r: (_int(r), _int(r))),
        _t("x, y", "return y", lambda r: (_int(r), _int(r))),
    ],
}
"""Template families; a program is one template with its constants drawn."""
FAMILY_ORDER = ("int", "copy", "str", "copy", "list")
"""Families in turn (``copy`` twice: the default model reads little else). Measured base
accuracy of the default model: 24/240 = 10.0% (greedy, docs/write-ups/evaluation.md), the
band's lower edge; an earlier mix without ``copy`` scored 1/16 on a pilot."""


def known_programs() -> set[str]:
    """Program texts the held-out set must not contain: exec seeds and CRUXEval."""
    from sage_env.tasks.exec_tasks import IDENTITY_PROGRAM

    seen = {_norm(IDENTITY_PROGRAM)}
    for line in (ROOT / "sage_env/data/exec_seeds.jsonl").read_text().splitlines():
        if line.strip():
            seen.add(_norm(json.loads(line)["program"]))
    with gzip.open(ROOT / "learners/data/benchmarks/code/cruxeval.jsonl.gz", "rt") as fh:
        for line in fh:
            if line.strip():
                seen.add(_norm(json.loads(line)["code"]))
    return seen


def _norm(program: str) -> str:
    return " ".join(program.split())


def build(n: int, seed: int = SEED) -> list[dict]:
    """``n`` records, families in :data:`FAMILY_ORDER`, each (program, input) pair once."""
    rng = random.Random(seed)
    banned = known_programs()
    families = list(FAMILY_ORDER)
    records: list[dict] = []
    kept: set[str] = set()
    tries = 0
    while len(records) < n and tries < 50 * n:
        family = families[tries % len(families)]
        tries += 1
        program, given = rng.choice(TEMPLATES[family])(rng)
        if _norm(program) in banned or (_norm(program), given) in kept:
            continue
        check = validate_program(program, [given], timeout_s=5.0)
        if not check.valid:
            continue
        kept.add((_norm(program), given))
        records.append(
            {
                "id": f"exec_heldout/{len(records)}",
                "mode": "deduction",
                "family": family,
                "program": program,
                "input": check.inputs[0],
                "output": check.outputs[0],
            }
        )
    return records


def main() -> None:
    """Write the file."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=240)
    ap.add_argument("--out", default=str(ROOT / "sage_env/data/exec_heldout.jsonl"))
    args = ap.parse_args()
    records = build(args.n)
    with open(args.out, "w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print(f"wrote {len(records)} records to {args.out}")


if __name__ == "__main__":
    main()

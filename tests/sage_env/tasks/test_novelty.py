"""Novelty of execution tasks (issue 33, item 4): a renamed, re-docstringed or dead-code-padded
copy of a seed or pool program is the duplicate it is, under every protocol."""

import collections
import json
from importlib import resources

import pytest

import sage_env
from sage_env import EnvConfig, TaskPool, rewards
from sage_env.tasks.exec_tasks import load_exec_seeds, make_task
from sage_env.tasks.novelty import normalise_program, program_distance
from sage_env.tasks.pool import exec_task_key
from tests.scripted import play_round

BASE = """\
import math
from typing import List


def helper(x: int) -> int:
    return x * 2


def f(numbers: List[int], k: int = 3) -> list:
    total = 0
    for i, v in enumerate(numbers):
        total += helper(v) * k + i
    kept = [y for y in numbers if y > k]
    kept.append(math.floor(total / 2))
    return kept
"""

SAME = {
    "renamed": """\
import math as m
def double(z):
    return z * 2
def f(arr, lim=3):
    acc = 0
    for idx, val in enumerate(arr):
        acc += double(val) * lim + idx
    out = [w for w in arr if w > lim]
    out.append(m.floor(acc / 2))
    return out
""",
    "docstrings and comments": BASE.replace(
        "    total = 0\n",
        '    """Sum things up.\n\n    >>> f([1])\n    [1]\n    """\n    # a comment\n'
        "    total = 0  # start at zero\n",
    ).replace("def helper(x: int) -> int:\n", 'def helper(x: int) -> int:\n    "doc"\n'),
    "annotations dropped": BASE.replace(": int", "")
    .replace(": List[int]", "")
    .replace(" -> list", "")
    .replace("    total = 0", "    total: int = 0\n    other: str"),
    "dead code after return": BASE.replace(
        "    return kept\n", "    return kept\n    kept = None\n    print('never')\n"
    ).replace("    return x * 2\n", "    return x * 2\n    raise ValueError\n"),
    "if False and while 0 blocks": BASE.replace(
        "    total = 0\n",
        "    total = 0\n    if False:\n        total = 99\n    if 0:\n        pass\n"
        "    else:\n        pass\n    while 0:\n        total -= 1\n    if not True:\n"
        "        return None\n",
    ),
    "unused imports, helpers, assignments and pass": "import os, re\nimport collections as c\n"
    + BASE.replace("    total = 0\n", "    unused = 5\n    pad = unused\n    pass\n    total = 0\n")
    + "\n\ndef never_called(a):\n    return a + 1\n",
    "layout and parentheses": BASE.replace("x * 2", "(x)*2").replace("    ", "\t"),
}

DIFFERENT = {
    "a constant": BASE.replace("x * 2", "x * 3"),
    "a default": BASE.replace("k: int = 3", "k: int = 4"),
    "an operator": BASE.replace("total += ", "total -= "),
    "a comparison": BASE.replace("y > k", "y >= k"),
    "an attribute": BASE.replace("kept.append", "kept.extend").replace(
        "math.floor(total / 2)", "[math.floor(total / 2)]"
    ),
    "a module attribute": BASE.replace("math.floor", "math.ceil"),
    "a builtin": BASE.replace("enumerate(numbers)", "zip(numbers, numbers)"),
    "swapped arguments": BASE.replace("helper(v) * k + i", "helper(i) * k + v"),
    "the statement order": BASE.replace(
        "    kept = [y for y in numbers if y > k]\n    kept.append(math.floor(total / 2))\n",
        "    kept = [y for y in numbers if y > k]\n    kept.append(math.floor(total / 2))\n"
        "    kept.reverse()\n",
    ),
}


@pytest.mark.parametrize("variant", sorted(SAME))
def test_normal_form_is_invariant_under_names_comments_annotations_and_dead_code(variant):
    base = normalise_program(BASE)
    assert base is not None and "helper" not in base and "numbers" not in base
    assert normalise_program(SAME[variant]) == base
    assert program_distance(BASE, SAME[variant]) == 0.0


@pytest.mark.parametrize("change", sorted(DIFFERENT))
def test_normal_form_changes_with_what_the_program_computes(change):
    assert normalise_program(DIFFERENT[change]) != normalise_program(BASE)
    assert 0.0 < program_distance(BASE, DIFFERENT[change]) < 0.2


def test_renaming_is_a_bijection_that_respects_scopes():
    """Swapped roles of two arguments, a local that shadows the entry ``f`` (seed mbpp/712)
    and a name that is a builtin in one program and a variable in the other all count."""
    assert normalise_program("def f(a, b):\n    return a - b") != normalise_program(
        "def f(a, b):\n    return b - a"
    )
    shadow = "def f(xs):\n    f = sorted(xs)\n    return f"
    assert normalise_program(shadow) == normalise_program(
        "def f(items):\n    out = sorted(items)\n    return out"
    )
    assert normalise_program("def f(a):\n    return len(a)") != normalise_program(
        "def f(len):\n    return len(len)"
    )
    # the entry stays ``f``; attributes, keywords, class attributes and builtins keep names
    text = normalise_program(
        "class Box:\n    size = 2\n    def grow(self, by):\n        return self.size * by\n"
        "def f(n):\n    return sorted(range(n), key=Box().grow, reverse=True)"
    )
    for kept in ("def f(", "size = 2", "def grow(", ".size", "key=", "reverse=True", "sorted"):
        assert kept in text
    # recursion through a renamed helper, ``global`` and ``nonlocal`` stay consistent
    prog = (
        "count = 0\ndef walk(n):\n    global count\n    count += 1\n    return walk(n - 1) "
        "if n else count\ndef f(n):\n    total = 0\n    def add(v):\n        nonlocal total\n"
        "        total += v\n    add(walk(n))\n    return total"
    )
    renamed = prog.replace("count", "c").replace("walk", "w").replace("total", "t")
    assert normalise_program(prog) == normalise_program(renamed.replace("add", "plus"))


@pytest.mark.parametrize(
    "text",
    [
        "def f(x:\n    return",
        "def f(x):\n\x00    return x",
        "(" * 100_000,
        "x = " + "[" * 5000 + "]" * 5000,
        "",
        "\ud800",
        None,
        42,
        ["def f(a): return a"],
    ],
)
def test_normalise_never_raises_on_model_output(text):
    out = normalise_program(text)
    assert out is None or isinstance(out, str)
    assert 0.0 <= program_distance(text, "def f(a):\n    return a") <= 1.0


def test_program_distance_is_a_fraction_of_tokens():
    assert program_distance("def f(a):\n    return a", "def f(b):\n    return b") == 0.0
    far = program_distance("def f(a):\n    return a", "import re\nclass C:\n    pass")
    assert 0.5 < far <= 1.0
    one = program_distance(BASE, DIFFERENT["a constant"])
    assert one == pytest.approx(program_distance(DIFFERENT["a constant"], BASE))


# --------------------------------------------------------------------------------- the pool
def _seed(parent: str, mode: str):
    return next(t for t in load_exec_seeds() if t.task_id == f"exec/{parent}/{mode}")


SEED_98 = "humaneval/98"  # count upper-case vowels at even indices; docstring, loop, local
COPY_98 = """\
def f(text):
    # renamed copy of a seed: no docstring, new names, dead code at the end
    n = 0
    for k in range(0, len(text), 2):
        if text[k] in "AEIOU":
            n += 1
    return n
    n = -1
"""
NEW_98 = 'def f(text):\n    return sum(1 for c in text[1::2] if c in "aeiou")'


def _generated(mode: str, program: str, inputs: list[str], outputs: list[str], tid="gen/0"):
    return make_task(mode, program, inputs, outputs, task_id=tid, source="generated")


def test_pool_finds_a_renamed_copy_of_a_seed_per_mode():
    pool = TaskPool(load_exec_seeds())
    seed = f"exec/{SEED_98}"
    copy = _generated("deduction", COPY_98, ["'aBCdEf'"], ["1"])
    assert pool.duplicate_of(copy) == (
        f"duplicate of {seed}/deduction (the same program after normalisation, on the same input)"
    )
    # the same program on a new input: a near duplicate (Jaccard on the question with its
    # program in normal form), the renamed copy as the verbatim one; a new task only under
    # the exact rule (no Jaccard threshold), as AZR deduplicates on (program, input)
    for program in (COPY_98, _seed(SEED_98, "deduction").reference_solution):
        new_input = _generated("deduction", program, ["'EEEE'"], ["2"])
        assert pool.duplicate_of(new_input).startswith(f"near duplicate of {seed}/deduction")
        exact_only = TaskPool(load_exec_seeds(), near_duplicate_threshold=None)
        assert exact_only.duplicate_of(new_input) is None
        assert exact_only.duplicate_of(copy).startswith(f"duplicate of {seed}/deduction")
    # abduction: the solver sees the output; another input with the same output is the same
    reason = pool.duplicate_of(_generated("abduction", COPY_98, ["'Eb'"], ["1"]))
    assert reason.startswith(f"duplicate of {seed}/abduction") and "same output" in reason
    # induction: the set of inputs, in any order (the message is not part of the task)
    spec = _seed(SEED_98, "induction").meta["exec"]
    ind = _generated("induction", COPY_98, spec["inputs"][::-1], spec["outputs"][::-1])
    assert pool.duplicate_of(ind).startswith(f"duplicate of {seed}/induction")
    assert pool.duplicate_of(_generated("deduction", NEW_98, ["'aBCdEf'"], ["0"])) is None
    assert not pool.add(copy) and pool.add(_generated("deduction", NEW_98, ["'ae'"], ["0"]))


def test_every_seed_is_kept_and_indexed():
    """Seeds are not checked against each other on the normalised program (as for the
    Jaccard rule): every bundled seed stays but one whose prompt is exactly another's (the
    rule before this one: mbpp/670 and mbpp/680 are one program, and both abduction tasks
    show the output True), and a copy of any of them is found."""
    seeds = load_exec_seeds()
    pool = TaskPool(seeds)
    assert [t.task_id for t in seeds if t not in pool.tasks] == ["exec/mbpp/680/abduction"]
    for task in seeds[::17]:
        copy = make_task(
            task.meta["exec"]["mode"],
            "# a copy\n" + task.reference_solution,
            task.meta["exec"]["inputs"],
            task.meta["exec"]["outputs"],
            task_id="gen/9",
        )
        assert "duplicate of" in pool.duplicate_of(copy)


def test_index_survives_save_load_snapshot_and_eviction(tmp_path):
    pool = TaskPool(load_exec_seeds()[:3], max_generated=1)
    first = _generated("deduction", NEW_98, ["'ae'"], ["0"], tid="gen/0")
    assert pool.add(first)
    copy = _generated("deduction", NEW_98.replace("text", "s"), ["'ae'"], ["0"], tid="gen/1")
    assert "duplicate of gen/0" in pool.duplicate_of(copy)
    pool.save(tmp_path / "pool.jsonl")
    loaded = TaskPool.load(tmp_path / "pool.jsonl", max_generated=1)
    assert "duplicate of gen/0" in loaded.duplicate_of(copy)
    snap = loaded.snapshot()
    assert "duplicate of gen/0" in snap.duplicate_of(copy)
    other = "def f(s):\n    return len(s) * 7 + 1"
    assert loaded.add(_generated("deduction", other, ["'x'"], ["8"], tid="gen/2"))  # evicts
    assert loaded.duplicate_of(copy) is None  # gen/0 was evicted with its key
    loaded.restore(snap)
    assert "duplicate of gen/0" in loaded.duplicate_of(copy)


def test_seed_programs_that_share_a_normal_form():
    """The measurement the issue asks for: of the 190 bundled seed programs only mbpp/670
    and mbpp/680 share a normal form, and their texts are identical already."""
    path = resources.files("sage_env") / "data" / "exec_seeds.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    groups = collections.defaultdict(list)
    for rec in records:
        norm = normalise_program(rec["program"])
        assert norm is not None, rec["id"]
        groups[norm].append(rec["id"])
    shared = sorted(ids for ids in groups.values() if len(ids) > 1)
    assert len(records) == 190 and shared == [["mbpp/670", "mbpp/680"]]
    keys = collections.Counter(exec_task_key(t) for t in load_exec_seeds())
    assert sum(n - 1 for n in keys.values()) == 1  # their abduction tasks: both output True


# --------------------------------------------------------------------------------- rounds
def _proposal(program: str, given: str) -> str:
    return f"```python\n{program}\n```\n```input\n{given}\n```"


COPY_REPLY = _proposal(COPY_98, "'aBCdEf'")
NEW_REPLY = _proposal(NEW_98, "'aBCdEf'")


def _exec_round(protocol: str, mode: str, reply: str, **azr):
    """One round of ``protocol`` on seed humaneval/98's ``mode`` task, in a pool of all the
    bundled exec seeds; the proposer writes ``reply``. Returns the env and the records."""
    if protocol == "azr":
        settings = {"modes": (mode,), **azr}
        env = sage_env.env(EnvConfig(protocol="azr", solver_samples=1, protocol_config=settings))
    else:
        env = sage_env.env(
            EnvConfig(protocol=protocol, domains=("exec",), solver_samples=1),
            seeds=[_seed(SEED_98, mode)],
            pool=TaskPool(load_exec_seeds()),
        )

    def act(agent, phase, obs, n):
        if phase in ("challenge", "propose"):
            return reply
        if phase in ("solve", "probe"):
            return "```output\n0\n```" if mode == "deduction" else "```input\n'x'\n```"
        if phase == "plan":
            return "<plan>\n1. Read it.\n2. Run it.\n</plan>"
        return "<score>9</score> A fine task."

    return env, play_round(env, act)


def _proposer(records):
    ((reward, info),) = [(r, i) for _, ph, r, i in records if ph in ("challenge", "propose")]
    return reward, info


def _generated_in(env):
    return [t for t in env.unwrapped.pool.tasks if t.source == "generated"]


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["sage", "mae", "azr"])
@pytest.mark.parametrize("mode", ["deduction", "abduction"])
def test_a_renamed_copy_of_a_seed_is_refused_as_a_duplicate(protocol, mode):
    """Before: the copy was a new task, paid 0.963 under ``sage`` and 0.667 under ``mae``.
    Now it is never reviewed nor solved as a task and earns the duplicate reward: 0 under
    ``sage``/``mae`` (format score 0), -1 under ``azr`` (a reply with formatting errors)."""
    env, records = _exec_round(protocol, mode, COPY_REPLY)
    reward, info = _proposer(records)
    parsed = info["parsed"]
    assert parsed["valid"] is False
    assert parsed["reason"].startswith(f"duplicate of exec/{SEED_98}/{mode}")
    assert _generated_in(env) == []
    phases = [ph for _, ph, _, _ in records]
    assert "review_question" not in phases and "judge_question" not in phases
    assert "probe" not in phases
    if protocol == "azr":
        assert reward == rewards.AZR_FORMAT_ERROR == -1.0
        assert info["valid"] is False and "duplicate of" in info["reason"]
        assert parsed["well_formed"] is True  # well formed, paid as if it were not
    else:
        assert reward == 0.0 and info["accepted"] is False


@pytest.mark.parametrize("protocol", ["sage", "mae", "azr"])
def test_an_honest_new_program_is_still_accepted(protocol):
    env, records = _exec_round(protocol, "deduction", NEW_REPLY)
    reward, info = _proposer(records)
    assert info["parsed"]["valid"] is True and info["parsed"]["output"] == "0"
    (new,) = _generated_in(env)
    assert new.reference_solution == NEW_98
    if protocol == "azr":
        assert info["valid"] is True and info["parsed"]["added_to_buffer"] is True
    else:
        assert info["accepted"] is True and reward > 0.5


@pytest.mark.slow
def test_azr_pays_a_duplicate_only_under_its_own_rule():
    """``AZRConfig.pay_duplicates=True``: AZR's rule, a valid duplicate is solved and paid
    its learnability (here 0: the solver is wrong, acc = 0) and kept out of the buffer."""
    env, records = _exec_round("azr", "deduction", COPY_REPLY, pay_duplicates=True)
    reward, info = _proposer(records)
    assert info["valid"] is True and info["parsed"]["added_to_buffer"] is False
    assert reward == 0.0 and info["terms"]["acc"] == 0.0
    assert _generated_in(env) == []
    env, records = _exec_round("azr", "deduction", COPY_REPLY, format_penalty=False)
    assert _proposer(records)[0] == 0.0  # refused, and no penalty without format_penalty


def test_azr_induction_with_a_seeds_inputs_reordered_is_a_duplicate():
    ind = _seed(SEED_98, "induction")
    inputs = ind.meta["exec"]["inputs"][::-1]
    reply = "".join(f"```input\n{i}\n```\n" for i in inputs) + "```message\nvowels\n```"
    pool = TaskPool([t for t in load_exec_seeds() if t.parent_id == SEED_98])
    env = sage_env.env(
        EnvConfig(protocol="azr", solver_samples=1, protocol_config={"modes": ("induction",)}),
        pool=pool,
    )
    records = play_round(
        env, lambda a, ph, o, n: reply if ph == "propose" else "```python\ndef f(a): 0\n```"
    )
    reward, info = _proposer(records)
    assert reward == -1.0 and info["reason"].startswith(f"duplicate of exec/{SEED_98}/induction")


@pytest.mark.slow
def test_azr_pays_a_renamed_seed_program_on_a_new_input_as_azr_does():
    """A pool program on a new input is a near duplicate (the question's words match), not the
    same task: ``azr`` solves and pays it (AZR's rule) and keeps it out of the buffer."""
    new_input = _proposal(COPY_98, "'UuAaEeIiOo'")
    env, records = _exec_round("azr", "deduction", new_input)
    reward, info = _proposer(records)
    assert info["valid"] is True and info["parsed"]["added_to_buffer"] is False
    assert reward == 0.0 and info["terms"]["acc"] == 0.0  # the solver's "0" is wrong: acc 0
    assert _generated_in(env) == []
    # the same input is the same task: refused with -1
    assert _proposer(_exec_round("azr", "deduction", COPY_REPLY)[1])[0] == -1.0

"""Ground truth that cannot be gamed: reproducible runs, repeated verdicts, value splits, gold.

Red-team cases of issue 33, one class each, tried as a policy under RL would find them:

- hash-seed and address noise (host-dependent output, low-entropy nondeterminism): refused
  by the determinism check, which runs under hash seeds, time zones and interpreters drawn
  per check;
- abduction noise: ``f`` deterministic on its proposer's input and noisy elsewhere; an answer
  right by chance is not paid, because a passing verdict must repeat;
- induction split by text: held-out inputs equal by value to shown ones (``1`` / ``True``);
- scalar type: ``1`` is not ``True`` (the training judge's policy);
- gold readable from the sandbox: the package's data, wherever it is installed.

The cases run in a subprocess per sandbox configuration (the isolation level is probed once
per process): ``unshare`` and, where installed, ``bwrap``, each with and without the zygote.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sage_env.tasks import exec_tasks
from sage_env.verifiers import answer_checks, executor, literals
from sage_env.verifiers.program_checks import program_refusal

ROOT = Path(__file__).resolve().parents[3]

#: 20 programs whose output is one bit of string-hash noise (the order of a 2-element set).
ONE_BIT = [f"def f(a):\n    return next(iter({{'x{i}', 'y{i}'}}))" for i in range(20)]
#: 20 programs deterministic on the proposer's input 0 and one bit of noise on any other.
ABDUCTION_NOISE = [
    f"def f(a):\n    if a == 0:\n        return 'x{i}'\n    return next(iter({{'x{i}', 'y{i}'}}))"
    for i in range(20)
]
HOST_DEPENDENT = {
    "address of a function": "def f(a):\n    return str(f)[-10:]",
    "address in a lambda's repr": "def f(a):\n    return repr(lambda: a)[-8:]",
    "set order of strings": "def f(s):\n    return ''.join({c for c in s})",
    "dict keyed by set order": "def f(s):\n    return {c: i for i, c in enumerate(set(s))}",
}
#: The low bits of an address agree in every zygote's fork and in every fresh interpreter of
#: one build, but not between the two: with zygotes the (fresh) check runs refuse them;
#: without zygotes every run is fresh and the stored value is what a fresh interpreter of
#: that build recomputes (an interpreter build is pinned like the hash seed).
LOW_ADDRESS_BITS = {
    "low bits of an address": "def f(s):\n    return repr(object())[-4:-1]",
    "low bits of a function's address": (
        "def g():\n    return 0\ndef f(s):\n    return str(g)[-4:-1]"
    ),
}
HONEST = {
    "sorted set": "def f(s):\n    return sorted(set(s))",
    "set value": "def f(s):\n    return set(s)",
    "dict": "def f(s):\n    return {c: s.count(c) for c in s}",
    "len of set": "def f(s):\n    return len(set(s)) * 2",
}


#: Seed of the check runs' generator in :func:`_cases` (with drawn variants a one-bit program
#: passes six runs 1 time in 32; under this seed none of the 20 does).
CHECK_SEED = 46


def _cases() -> dict:
    """Run every case at the sandbox configuration of this process; JSON-able results."""
    out: dict = {}
    # the check runs' variants are drawn per check; a seeded generator keeps the cases fixed
    rng = random.Random(CHECK_SEED)
    out["one_bit_valid"] = sum(
        executor.validate_program(p, ["1"], check_rng=rng).valid for p in ONE_BIT
    )
    out["one_bit_valid_two_runs"] = sum(
        executor.validate_program(p, ["1"], determinism_runs=2, check_rng=rng).valid
        for p in ONE_BIT
    )
    out["host"] = {
        name: executor.validate_program(p, ["'abcdefgh'"], check_rng=rng).check
        for name, p in HOST_DEPENDENT.items()
    }
    out["low_bits"] = {}
    for name, p in LOW_ADDRESS_BITS.items():
        got = executor.validate_program(p, ["'abcdefgh'"], check_rng=rng)
        out["low_bits"][name] = got.check if not got.valid else (
            "recomputes"
            if executor.recomputes(p, got.inputs, got.outputs, hash_seed=99)
            else "stored but does not recompute"
        )
    out["honest"] = {
        name: executor.validate_program(p, ["'abcdefgh'"], check_rng=rng).valid
        for name, p in HONEST.items()
    }
    paid = paid_one_run = 0.0
    for p in ABDUCTION_NOISE:
        gold = executor.validate_program(p, ["0"], check_rng=rng).outputs[0]
        paid += answer_checks.check_abduction("1", p, gold, check_rng=rng).score
        paid_one_run += answer_checks.check_abduction("1", p, gold, verdict_runs=1).score
    out["abduction_paid"], out["abduction_paid_one_run"] = paid, paid_one_run
    honest = answer_checks.check_abduction("'zz'", HONEST["len of set"], "2", check_rng=rng)
    out["abduction_honest"] = [honest.score, honest.status]
    noisy = "def f(a):\n    return next(iter({'p', 'q'}))"
    out["induction_noisy_solver"] = max(
        answer_checks.check_induction(noisy, ["1", "2"], [repr(v), repr(v)], check_rng=rng).score
        for v in ("p", "q")
    )
    gold_file = Path(exec_tasks.__file__).resolve().parent / "data" / "exec_heldout.jsonl"
    from sage_env import sandbox

    read = sandbox.run(f"print(open({str(gold_file)!r}).read()[:40])")
    out["gold_read"] = [read.status, read.stdout.decode()[:40], read.isolation]
    listing = sandbox.run(f"import os; print(os.listdir({str(gold_file.parent)!r}))")
    out["gold_listing"] = listing.stdout.decode().strip()
    out["isolation"] = sandbox.isolation_level()
    out["zygotes"] = sandbox.zygotes_available()
    return out


def _levels() -> list[tuple[str, str]]:
    levels = ["unshare"] + (["bwrap"] if shutil.which("bwrap") else [])
    return [(lvl, z) for lvl in levels for z in ("1", "0")]


def _run_cases(level: str, zygote: str, package_root: Path | None = None) -> dict:
    env = dict(os.environ, SAGE_SANDBOX_ISOLATION=level, SAGE_SANDBOX_ZYGOTE=zygote)
    if package_root is not None:  # import this copy of sage_env (as if from site-packages)
        env["PYTHONPATH"] = f"{package_root}{os.pathsep}{ROOT / 'tests/sage_env/verifiers'}"
        code = "import json, test_exec_ground_truth as t; print(json.dumps(t._cases()))"
        cwd = str(package_root)
    else:
        env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{ROOT / 'tests/sage_env/verifiers'}"
        code = "import json, test_exec_ground_truth as t; print(json.dumps(t._cases()))"
        cwd = str(ROOT)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


needs_root_linux = pytest.mark.skipif(
    sys.platform != "linux" or os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="the unshare and bwrap levels need Linux and root",
)


@pytest.mark.slow
@needs_root_linux
@pytest.mark.parametrize(("level", "zygote"), _levels())
def test_red_team_ground_truth_cases_score_zero_at_every_isolation_level(level, zygote):
    got = _run_cases(level, zygote)
    assert got["isolation"] == level
    assert got["zygotes"] is (zygote == "1")
    # one bit of hash noise: AZR's two runs let about half through; six runs none of these
    assert got["one_bit_valid"] == 0
    assert got["one_bit_valid_two_runs"] >= 5
    assert got["host"] == dict.fromkeys(HOST_DEPENDENT, "deterministic")
    # address low bits: every run draws its heap layout (issue 46 item 5), so they are noise
    # at every level; before, a fresh interpreter reproduced them (stored, "recomputes" on
    # this host, though another isolation level computes other bits)
    assert got["low_bits"] == dict.fromkeys(LOW_ADDRESS_BITS, "deterministic")
    assert got["honest"] == dict.fromkeys(HONEST, True)
    # abduction noise: a single run pays about half the noisy answers; repeated verdicts none
    assert got["abduction_paid"] == 0.0
    assert got["abduction_paid_one_run"] >= 5
    assert got["abduction_honest"] == [1.0, "passed"]
    assert got["induction_noisy_solver"] == 0.0
    # gold is hidden: the data folder is an empty tmpfs inside the sandbox
    status, text, _ = got["gold_read"]
    assert status == "failed" and text == ""
    assert got["gold_listing"] in ("", "[]")  # an empty folder, or none (/work is hidden too)


@pytest.mark.slow
@needs_root_linux
@pytest.mark.parametrize("level", ["unshare"] + (["bwrap"] if shutil.which("bwrap") else []))
def test_gold_is_unreadable_from_a_copy_installed_outside_the_hidden_folders(level, tmp_path):
    # /tmp is private inside the sandbox anyway: install the copy under /var/tmp, which is not
    site = Path(tmp_path_outside_tmp := Path("/var/tmp") / f"sage-gold-{os.getpid()}-{level}")
    try:
        skip = shutil.ignore_patterns("*.pyc")
        shutil.copytree(ROOT / "sage_env", site / "sage_env", ignore=skip)
        code = (
            "import json\n"
            "from sage_env import sandbox\n"
            f"p = {str(site / 'sage_env' / 'data' / 'seeds.jsonl')!r}\n"
            "r = sandbox.run('print(open(%r).read()[:40])' % p)\n"
            "print(json.dumps([r.status, r.stdout.decode(), r.isolation]))\n"
        )
        env = dict(os.environ, SAGE_SANDBOX_ISOLATION=level, PYTHONPATH=str(site))
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, cwd="/", capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[-2000:]
        status, text, isolation = json.loads(out.stdout.strip().splitlines()[-1])
        assert isolation == level
        assert (site / "sage_env" / "data" / "seeds.jsonl").read_text()[:40]  # there on the host
        assert status == "failed" and text == ""
    finally:
        shutil.rmtree(tmp_path_outside_tmp, ignore_errors=True)


def test_scalar_types_are_part_of_the_answer():
    for predicted, gold in [("1", "True"), ("1.0", "1"), ("[1]", "[True]"), ("{1}", "{True}"),
                            ("{1: 'a'}", "{True: 'a'}"), ("(0,)", "(False,)"),
                            ("0.0", "-0.0"), ("[0j]", "[-0j]")]:  # fmt: skip
        assert answer_checks.check_deduction(predicted, gold).score == 0.0, (predicted, gold)
        # CRUXEval's rule (``==``) is kept for that benchmark
        assert answer_checks.check_deduction(predicted, gold, strict_types=False).score == 1.0
    assert answer_checks.check_deduction("{'b': 2, 'a': 1}", "{'a': 1, 'b': 2}").score == 1.0
    assert answer_checks.check_deduction("{3, 1, 2}", "{1, 2, 3}").score == 1.0
    assert answer_checks.check_deduction("[1, 2]", "(1, 2)", strict_types=False).score == 0.0


def test_induction_holds_out_no_input_equal_by_value_to_a_shown_one():
    program = "def f(x):\n    return x"
    task = exec_tasks.make_task(
        "induction", program, ["1", "2", "True", "2.0", "3"], ["1", "2", "True", "2.0", "3"],
        task_id="t",
    )  # fmt: skip
    spec = exec_tasks.ExecSpec.of(task)
    assert spec.inputs[: spec.shown] == ("1", "2")
    assert spec.held_out() == (("3",), ("3",))
    lookup = "def f(x):\n    return {1: 1, 2: 2}[x]"
    inputs, outputs = spec.held_out()
    assert answer_checks.check_induction(lookup, inputs, outputs).score == 0.0
    assert answer_checks.check_induction(program, inputs, outputs).score == 1.0
    # a proposal's inputs are kept distinct by value: 1, True and 1.0 are one input
    assert literals.distinct_inputs(["1", "True", "1.0", "'1'", "(1, 2)", "(True, 2.0)"]) == [
        "1",
        "'1'",
        "(1, 2)",
    ]


def test_every_run_of_a_task_program_is_pinned():
    """The stored run is variant 0: hash seed 0, random seeded, on any host."""
    program = "def f(s):\n    return [c for c in {'alpha', 'beta', 'gamma', 'delta'}]"
    first = executor.execute(program, [("x",)])
    again = executor.execute(program, [("x",)])
    assert first.status == "ok" and first.outputs == again.outputs
    # the same order a host interpreter with PYTHONHASHSEED=0 computes
    host = subprocess.run(
        [sys.executable, "-c", "print(repr([c for c in {'alpha', 'beta', 'gamma', 'delta'}]))"],
        env={"PYTHONHASHSEED": "0", "PATH": os.environ.get("PATH", "")},
        capture_output=True, text=True,
    )  # fmt: skip
    assert first.outputs[0] == host.stdout.strip()
    assert not executor.validate_program(program, ["'x'"]).valid


#: Honest proposals an AZR proposer might write: several touch string hashing (sets, dicts of
#: strings) and are still deterministic, as the stored outputs must be.
PROPOSALS = [
    ("def f(s):\n    return sorted(set(s.split()))", "'b a c a b'"),
    ("def f(s):\n    return {w: len(w) for w in s.split()}", "'to be or not'"),
    ("def f(xs):\n    return len(set(xs)), max(xs)", "[3, 1, 3, 7]"),
    ("def f(s):\n    return set(s) - {'a'}", "'banana'"),
    ("def f(n):\n    return [i * i for i in range(n) if i % 2]", "9"),
    ("def f(a, b):\n    return frozenset(a) & frozenset(b)", "'hello', 'world'"),
    ("def f(s):\n    return ''.join(sorted(s, key=s.count))", "'mississippi'"),
    ("def f(d):\n    return sorted(d.items(), key=lambda kv: -kv[1])", "{'x': 2, 'y': 5}"),
]


@pytest.mark.slow
def test_every_accepted_task_of_a_4_step_azr_run_recomputes_in_a_fresh_interpreter():
    import itertools

    import sage_env
    from sage_env import EnvConfig
    from tests.scripted import play_round

    env = sage_env.env(EnvConfig(protocol="azr", solver_samples=2))
    bank = itertools.cycle(PROPOSALS)

    def script(agent, phase, obs, n):
        if phase != "propose":
            return "```output\n0\n```"
        if "Write 10 different inputs" in str(obs):  # induction: inputs for a buffer program
            return "".join(f"```input\n{x!r}\n```\n" for x in ["ab", "ba", "abc", 1]) + (
                "```message\nlook at the letters\n```"
            )
        program, given = next(bank)
        return f"```python\n{program}\n```\n```input\n{given}\n```"

    for step in range(4):  # the demo's 4 steps of 4 rounds
        for r in range(4):
            play_round(env, script, seed=4 * step + r)
    generated = [t for t in env.unwrapped.pool.tasks if t.source == "generated"]
    assert len(generated) >= 8  # the run accepted tasks of its own
    for task in generated:
        spec = exec_tasks.ExecSpec.of(task)
        assert executor.recomputes(
            spec.program, spec.inputs, spec.outputs, hash_seed=20261203
        ), task.task_id


#: Escapes a red-team helper found in the first allow-list (each reached ``os`` or the format
#: machinery): a metaclass makes ``case G(g)`` match anything and read the attribute that
#: ``__match_args__`` names, built at run time; a class pattern fetches ``str.format``.
ESCAPES = {
    "metaclass and __match_args__": (
        "class M(type):\n    def __instancecheck__(cls, x):\n        return True\n"
        "class G(metaclass=M):\n    __match_args__ = ('_' * 2 + 'globals' + '_' * 2,)\n"
        "def f(x):\n    match f:\n        case G(g):\n            return len(g)\n"
    ),
    "__match_args__ alone": (
        "class G:\n    __match_args__ = ('_' * 2 + 'class' + '_' * 2,)\n"
        "def f(x):\n    match G():\n        case G(c):\n            return 1\n"
    ),
    "instancecheck without a metaclass keyword": (
        "class G:\n    def __instancecheck__(cls, x):\n        return True\n"
        "def f(x):\n    return 1\n"
    ),
    "format method from a class pattern": (
        "import collections\ndef f(n):\n    t = '{0.' + '_' * 2 + 'globals' + '_' * 2 + '}'\n"
        "    match t:\n        case str(format=fm):\n"
        "            return fm(collections.namedtuple)[:n]\n"
    ),
    "class from a computed namespace": (
        "def f(x):\n    C = type('C', (), {'_' * 2 + 'match_args' + '_' * 2: ('a',)})\n"
        "    return 1\n"
    ),
    "frame attribute named in a string": "def f(x):\n    return len('gi_frame')\n",
}


def test_allow_list_escapes_found_by_red_team_are_refused_before_anything_runs():
    for name, program in ESCAPES.items():
        refusal = program_refusal(program)
        assert refusal is not None, name
        got = executor.validate_program(program, ["1"])
        assert (got.valid, got.check) == (False, "forbidden"), (name, got)
    # honest classes keep their special methods and patterns
    honest = (
        "from dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\n    y: int = 2\n"
        "    def __lt__(self, other):\n        return self.x < other.x\n"
        "def f(a):\n    match P(a):\n        case P(x, y):\n            return x + y\n"
    )
    assert program_refusal(honest) is None
    assert executor.validate_program(honest, ["1"]).outputs == ["3"]


def test_a_cruxeval_input_cannot_reach_the_builtins_through_a_generator_frame():
    attack = (
        "[g.gi_frame.f_globals['__builtins__']['setattr'](f, '__code__', (lambda *a: 'x')) "
        "for g in [(x for x in [0])]][0]"
    )
    check = answer_checks.check_abduction(
        attack, "def f(x):\n    return len(x) % 2", "'x'", expressions=True,
        strict_types=False, verdict_runs=1,
    )  # fmt: skip
    assert (check.score, check.status) == (0.0, "invalid")


def test_recursion_depth_is_the_same_in_a_zygote_and_a_fresh_interpreter():
    program = (
        "def g(k):\n    try:\n        return g(k + 1)\n    except RecursionError:\n"
        "        return k\ndef f(n):\n    return g(0)\n"
    )
    got = executor.validate_program(program, ["1"])
    assert got.valid
    assert executor.recomputes(program, got.inputs, got.outputs, hash_seed=77)

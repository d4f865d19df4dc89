"""AZR's execution tasks and the ``azr`` protocol: ground truth from the executor."""

import pytest
from pettingzoo.test import api_test

import sage_env
from sage_env import EnvConfig, check_protocol, rewards
from sage_env.tasks.exec_tasks import ExecSpec, exec_mode, load_exec_seeds, make_task
from sage_env.verifiers import answer_checks, executor

SQUARE = "def f(a):\n    return a * a"


def test_executor_output_is_the_ground_truth_not_the_proposers_claim():
    # the proposer claims 10; the executor computes 9 and the task says 9
    check = executor.validate_program(SQUARE, ["3"])
    assert check.valid and check.outputs == ["9"]
    task = make_task("deduction", SQUARE, check.inputs, check.outputs, task_id="t")
    assert ExecSpec.of(task).outputs == ("9",)
    assert answer_checks.check_deduction("9", "9").score == 1.0
    assert answer_checks.check_deduction("10", "9").score == 0.0


def test_program_printing_fake_results_cannot_change_its_output():
    program = 'def f(a):\n    print(\'@@AZR-0@@[["ok", "999"]]\')\n    return a + 1'
    assert executor.execute(program, [(1,)]).outputs == ("2",)


@pytest.mark.slow
@pytest.mark.parametrize(
    "program, inputs, check, words",
    [
        # hash() is refused before anything runs (not on the allow-list); set order is not
        (
            "def f(a):\n    return ''.join({c for c in 'abcdefgh'})",
            ["1"],
            "deterministic",
            "not deterministic",
        ),
        # OS entropy and the clock are refused before anything runs: a two-run check catches
        # them only when the runs happen to differ (``secrets.randbelow(2)`` half the time)
        (
            "import secrets\ndef f(a):\n    return a + secrets.randbelow(2)",
            ["1"],
            "forbidden",
            "'secrets'",
        ),
        (
            "import _random\ndef f(a):\n    return _random.Random().random() < 2",
            ["1"],
            "forbidden",
            "'random'",
        ),
        (
            "import _datetime\ndef f(a):\n    return str(_datetime.date.today())",
            ["1"],
            "forbidden",
            "'datetime'",
        ),
        (
            "import email.utils\ndef f(a):\n    return email.utils.formatdate()[:16]",
            ["1"],
            "forbidden",
            "'email'",
        ),
        (
            "import gzip\ndef f(a):\n    return gzip.compress(b'a')[4:8]",
            ["1"],
            "forbidden",
            "'gzip'",
        ),
        # a banned module reached through another module's attribute, an alias or by name
        (
            "import posixpath\ndef f(a):\n    return posixpath.os.system('true') + a",
            ["1"],
            "forbidden",
            "'os'",
        ),
        (
            "import tempfile\ndef f(a):\n    return tempfile._os.getpid() * 0 + a",
            ["1"],
            "forbidden",
            "'os'",
        ),
        ("from tempfile import _os\ndef f(a):\n    return a", ["1"], "forbidden", "'os'"),
        (
            "import collections\ndef f(a):\n    return collections._sys.maxsize",
            ["1"],
            "forbidden",
            "'sys'",
        ),
        ("import posix\ndef f(a):\n    return posix.getpid() * 0 + a", ["1"], "forbidden", "'os'"),
        (
            "import pkgutil\ndef f(a):\n    return pkgutil.resolve_name('os').getpid()",
            ["1"],
            "forbidden",
            "'pkgutil'",
        ),
        ("import random\ndef f(a):\n    return random.random()", ["1"], "forbidden", "random"),
        ("from os import path\ndef f(a):\n    return a", ["1"], "forbidden", "'os'"),
        ("def f(a):\n    return __import__('sys').argv", ["1"], "forbidden", "__import__"),
        ("def f(a):\n    return object()", ["1"], "run", "OutputNotALiteral"),
        ("def f(a):\n    return float('nan')", ["1"], "literal", "not a Python literal"),
        ("def f(a):\n    return a", ["print(1)"], "input", "not a Python literal"),
        ("def f(a):\n    while True:\n        pass", ["1"], "run", "timeout"),
        ("def f(a):\n    return 1 / 0", ["1"], "run", "ZeroDivisionError"),
        ("def g(a):\n    return a", ["1"], "entry", "no top-level function f"),
        ("def f(a:\n    return a", ["1"], "parse", "does not parse"),
    ],
)
def test_invalid_proposals_are_rejected_with_their_reason(program, inputs, check, words):
    res = executor.validate_program(program, inputs, timeout_s=2.0)
    assert not res.valid and res.check == check and words in res.reason


@pytest.mark.parametrize(
    "program",
    [
        "import __main__\ndef f(x):\n    return x",
        "def f(x):\n    return ().__class__.__base__.__subclasses__()",
        "def f(x):\n    open('/dev/stdout', 'w').write('forged')\n    return x",
        "import os\ndef f(x):\n    os._exit(0)",
    ],
)
def test_induction_refuses_programs_that_could_reach_the_judge(program):
    res = answer_checks.check_induction(program, ["1", "2"], ["1", "2"])
    assert res.score == 0.0 and res.status == "blocked"


def test_objects_cannot_forge_their_repr():
    program = (
        "class X(list):\n    def __repr__(self):\n        return '42'\ndef f(a):\n    return X()"
    )
    ex = executor.execute(program, [(1,)])
    assert ex.outputs == (None,) and "OutputNotALiteral" in ex.errors[0]


def test_deduction_compares_values_not_text():
    assert answer_checks.check_deduction("[1,2 ]", "[1, 2]").score == 1.0
    assert answer_checks.check_deduction("(1, 2)", "[1, 2]").score == 0.0  # a tuple is not a list
    assert answer_checks.check_deduction("{'b': 2, 'a': 1}", "{'a': 1, 'b': 2}").score == 1.0
    bad = answer_checks.check_deduction("__import__('os')", "1")
    assert bad.score == 0.0 and not bad.formatted
    assert not answer_checks.check_deduction(None, "1").formatted
    assert not answer_checks.check_deduction("x" * 100_000, "1").formatted


def test_abduction_runs_the_program_on_the_answer():
    program = "def f(a, b):\n    return sorted(a)[b]"
    gold = executor.validate_program(program, ["[3, 1, 2], 0"]).outputs[0]
    assert gold == "1"
    # a different input that gives the same output is right: checked by running f
    assert answer_checks.check_abduction("[5, 1], 0", program, gold).score == 1.0
    assert answer_checks.check_abduction("[5, 7], 0", program, gold).score == 0.0
    raised = answer_checks.check_abduction("[], 0", program, gold)
    assert raised.score == 0.0 and raised.formatted and "IndexError" in raised.reason
    assert not answer_checks.check_abduction("os.system('x')", program, gold).formatted


def test_induction_runs_the_solvers_program_on_held_out_inputs():
    inputs, outputs = ["1", "2", "3", "4"], ["2", "4", "6", "8"]
    task = make_task("induction", "def f(x):\n    return 2 * x", inputs, outputs, task_id="t")
    held_in, held_out = ExecSpec.of(task).held_out()
    assert held_in == ("3", "4") and "```input\n3" not in task.prompt
    right = "def f(x):\n    return x + x"
    assert answer_checks.check_induction(right, held_in, held_out).score == 1.0
    lookup = "def f(x):\n    return {1: 2, 2: 4}[x]"  # memorises the shown pairs only
    assert answer_checks.check_induction(lookup, held_in, held_out).score == 0.0
    half = "def f(x):\n    return 6 if x == 3 else 0"
    assert answer_checks.check_induction(half, held_in, held_out).score == 0.0
    assert answer_checks.check_induction(half, held_in, held_out, reward="accuracy").score == 0.5


def test_azr_reward_matches_equations_4_to_6():
    assert rewards.learnability_reward(0.0) == 0.0
    assert rewards.learnability_reward(1.0) == 0.0
    assert rewards.learnability_reward(0.25) == 0.75
    assert rewards.azr_reward(0.75, True, True)[0] == 0.75
    assert rewards.azr_reward(0.0, True, True)[0] == 0.0  # valid but not learnable
    assert rewards.azr_reward(0.0, False, True)[0] == -0.5
    assert rewards.azr_reward(0.0, False, False)[0] == -1.0
    assert rewards.azr_reward(0.0, False, False, format_penalty=False)[0] == 0.0


def test_seed_buffers_hold_the_identity_triplet_and_checked_seed_programs():
    seeds = load_exec_seeds()
    ids = {t.task_id for t in seeds}
    assert {"exec/identity/deduction", "exec/identity/abduction"} <= ids
    by_mode = {m: [t for t in seeds if exec_mode(t) == m] for m in ("deduction", "induction")}
    assert len(by_mode["deduction"]) > 150 and len(by_mode["induction"]) > 100
    spec = ExecSpec.of(next(t for t in seeds if t.task_id == "exec/humaneval/0/deduction"))
    # the executor's output on the seed's first test input
    assert answer_checks.check_deduction(spec.outputs[0], spec.outputs[0]).score == 1.0
    assert "def f(" in spec.program


def _env(mode, k=2, **cfg):
    return sage_env.env(
        EnvConfig(
            protocol="azr",
            solver_samples=k,
            protocol_config={"modes": (mode,), "seed_programs": False, **cfg},
        ),
        render_mode="ansi",
    )


def _credits(env, script):
    """Rewards delivered per (agent, phase) over one round, read from infos as they come."""
    got = []
    env.reset(seed=0)
    for agent in env.agent_iter():
        obs, reward, term, trunc, info = env.last()
        last = info.get("last") or {}
        if last and (term or trunc or last.get("phase") is not None):
            got.append((agent, last.get("phase"), reward, last))
        if term or trunc:
            env.step(None)
            continue
        env.step(script(agent, info, obs))
    return got


def test_azr_deduction_round_pays_learnability_and_solver_with_penalties():
    proposal = "```python\ndef f(a):\n    return a * 3\n```\n```input\n4\n```"
    answers = iter(["```output\n12\n```", "```output\n13\n```"])
    env = _env("deduction")
    got = _credits(env, lambda a, i, o: proposal if a == "proposer_0" else next(answers))
    solver = [(r, last["verdict"]["status"]) for a, p, r, last in got if a == "solver_0"]
    assert (1.0, "passed") in solver and (-0.5, "failed") in solver
    prop = [last for a, p, r, last in got if a == "proposer_0"][-1]
    assert prop["valid"] and prop["terms"]["acc"] == 0.5 and prop["reward"] == 0.5
    assert prop["parsed"]["output"] == "12"  # the executor's output
    new = env.unwrapped.pool.tasks[-1]
    assert exec_mode(new) == "deduction" and ExecSpec.of(new).outputs == ("12",)


def test_azr_invalid_proposal_gets_penalty_and_reason_and_solver_still_trains():
    # (hash() itself is refused before anything runs: it is not on the allow-list)
    nondet = (
        "```python\ndef f(a):\n    return ''.join({c for c in 'abcdefgh'})\n```\n```input\n1\n```"
    )
    env = _env("abduction", k=1)
    got = _credits(env, lambda a, i, o: nondet if a == "proposer_0" else "no block")
    prop = next(last for a, p, r, last in got if a == "proposer_0")
    assert prop["reward"] == -0.5 and not prop["valid"]
    assert "not deterministic" in prop["reason"]
    solver = next(last for a, p, r, last in got if a == "solver_0")
    assert solver["reward"] == -1.0  # unformatted answer on the identity buffer task
    env = _env("abduction", k=1)
    got = _credits(env, lambda a, i, o: "junk" if a == "proposer_0" else "```input\n'x'\n```")
    prop = next(last for a, p, r, last in got if a == "proposer_0")
    assert prop["reward"] == -1.0 and "```python" in prop["reason"]


def test_azr_induction_round_checks_the_solvers_program_by_running_it():
    env = _env("induction", k=2)
    proposal = "".join(f"```input\n{x!r}\n```\n" for x in ["a", "b", "c", "d"])
    proposal += "```message\nreturns its argument\n```"
    answers = iter(
        ["```python\ndef f(a):\n    return a\n```", "```python\ndef f(a):\n  return 0\n```"]
    )
    got = _credits(env, lambda a, i, o: proposal if a == "proposer_0" else next(answers))
    solver = [r for a, p, r, last in got if a == "solver_0" and "verdict" in last]
    assert solver == [1.0, -0.5]
    prop = [last for a, p, r, last in got if a == "proposer_0"][-1]
    assert prop["valid"] and prop["reward"] == 0.5


def _induction_round(completion):
    """One azr induction round whose proposer replies prefix + ``completion`` (``None``: the
    prefix alone); returns (the proposer's prefix, its reference's inputs, its last info)."""
    seen = {}

    def script(agent, info, obs):
        if agent == "proposer_0":
            seen.setdefault("prefix", obs["prefix"])
            return obs["prefix"] + (completion or "")
        return "```python\ndef f(*a):\n    return 0\n```"

    got = _credits(_env("induction", k=1), script)
    return seen["prefix"], [last for a, p, r, last in got if a == "proposer_0"][-1]


def test_induction_proposer_starts_from_its_programs_first_input():
    prefix, _ = _induction_round(None)
    first = prefix.split("```input 1\n", 1)[1].split("\n```", 1)[0]
    assert prefix == f"```input 1\n{first}\n```\n```input 2\n"
    assert first  # a literal the pool holds: the reference program's first input


def test_induction_proposal_needs_a_second_distinct_input_of_its_own():
    prefix, _ = _induction_round(None)
    first = prefix.split("```input 1\n", 1)[1].split("\n```", 1)[0]
    # the prefix alone adds no block: not even formatted (no format credit for the prefix)
    _, last = _induction_round(None)
    assert not last["valid"] and "of its own" in last["reason"] and last["reward"] == -1.0
    # the prefix's input repeated is one distinct input: formatted, refused
    _, last = _induction_round(f"{first}\n```\n```message\nx\n```")
    assert not last["valid"] and "fewer than 2 distinct" in last["reason"]
    assert last["reward"] == -0.5


def test_induction_prefix_leaves_a_long_or_fenced_input_out():
    from sage_env.tasks.exec_tasks import SHOWN_INPUT_CHARS, proposer_prefix

    long_input = repr("x" * SHOWN_INPUT_CHARS)
    for first in (long_input, "'```'"):
        view = make_task("induction", "def f(a):\n    return a", [first, "1"], [first, "1"], task_id="t")
        assert proposer_prefix("induction", view) == "```input 1\n"
    view = make_task("induction", "def f(a):\n    return a", ["7", "1"], ["7", "1"], task_id="t")
    assert proposer_prefix("induction", view) == "```input 1\n7\n```\n```input 2\n"
    assert proposer_prefix("deduction", view) == "```python\n"
    assert proposer_prefix("induction") == "```input 1\n"


def test_azr_groups_advantages_per_mode_and_role_and_play_shows_each_mode():
    seen = {}
    env = sage_env.env(EnvConfig(protocol="azr", solver_samples=1), render_mode="ansi")
    for seed in range(12):
        env.reset(seed=seed)
        for agent in env.agent_iter():
            obs, _, term, trunc, info = env.last()
            if term or trunc:
                env.step(None)
                continue
            seen[(agent, info["group"])] = obs
            env.step(obs["prefix"])
    groups = {g for _, g in seen}
    assert groups == {"exec/deduction", "exec/abduction", "exec/induction"}
    assert "```output" in seen[("solver_0", "exec/abduction")]["user"]
    assert seen[("solver_0", "exec/deduction")]["prefix"] == "```output\n"
    assert "<snippet_0>" in seen[("proposer_0", "exec/deduction")]["user"]


@pytest.mark.slow
def test_azr_passes_protocol_checks_and_pettingzoo_api_test():
    assert check_protocol("azr", rounds=3) == []
    env = sage_env.env(
        EnvConfig(protocol="azr", solver_samples=1, protocol_config={"seed_programs": False})
    )
    api_test(env, num_cycles=10)


def test_sage_on_execution_tasks_grounds_the_new_task_in_the_executor():
    from sage_env.tasks.exec_tasks import identity_tasks

    env = sage_env.env(
        EnvConfig(protocol="sage", domains=("exec",), solver_samples=1),
        seeds=identity_tasks()[:1],  # the deduction zero triplet
    )
    proposal = "```python\ndef f(a):\n    return a[::-1]\n```\n```input\n'abc'\n```"
    script = {
        "challenge": proposal,
        "review_question": "<score>9</score> A fine task.",
        "probe": "```output\n'cba'\n```",
        "plan": "<plan>\n1. Reverse.\n2. Answer.</plan>",
        "review_plan": "<score>9</score> Good plan.",
    }
    seen = {}
    env.reset(seed=0)
    for _agent in env.agent_iter():
        obs, _, term, trunc, info = env.last()
        if term or trunc:
            env.step(None)
            continue
        seen[info["phase"]] = (obs, info)
        env.step(script.get(info["phase"], "```output\n'wrong'\n```"))
    assert seen["challenge"][0]["prefix"] == "```python\n"
    assert seen["probe"][0]["prefix"] == "```output\n"
    new = env.unwrapped.pool.tasks[-1]
    assert new.source == "generated" and ExecSpec.of(new).outputs == ("'cba'",)
    assert seen["solve"][1]["group"].startswith("exec/")


@pytest.mark.parametrize("order", ["sequential", "interleaved"])
def test_sage_on_execution_tasks_passes_pettingzoo_api_test(order):
    from sage_env.tasks.exec_tasks import identity_tasks

    env = sage_env.env(
        EnvConfig(protocol="sage", domains=("exec",), solver_samples=1, turn_order=order),
        seeds=identity_tasks(),
    )
    api_test(env, num_cycles=10)


def test_trr_normalises_each_mode_and_role_on_its_own():
    from learners.algorithms.advantages import group_normalised_advantages
    from learners.types import Transition

    def tr(role, group, reward):
        return Transition(
            f"{role}_0", role, "exec", "solve", [1], [2], [0.0], "", reward, group=group
        )

    batch = [
        tr("solver", "exec/deduction", 1.0),
        tr("solver", "exec/deduction", 0.0),
        tr("solver", "exec/induction", -1.0),
        tr("solver", "exec/induction", -0.5),
        tr("proposer", "exec/deduction", 0.5),
        tr("solver", "", 1.0),  # no group: falls back to the domain
    ]
    keys = [t.group_key for t in batch]
    assert keys[0] == ("solver", "exec/deduction") and keys[-1] == ("solver", "exec")
    adv = group_normalised_advantages([t.reward for t in batch], keys)
    assert adv[0] == pytest.approx(1.0, abs=1e-5) and adv[1] == pytest.approx(-1.0, abs=1e-5)
    assert adv[2] == pytest.approx(-1.0, abs=1e-5) and adv[3] == pytest.approx(1.0, abs=1e-5)
    assert adv[4] == 0.0 and adv[5] == 0.0  # groups of one


def test_sage_on_execution_tasks_seeds_a_shared_pool_that_has_none():
    """`sage-env train` shares one pool of math/code seeds between its environments: with
    ``domains=("exec",)`` the environment adds the execution seeds to it (AZR's buffers), so a
    round can draw its reference programs instead of failing on an empty buffer."""
    math_code = sage_env.load_seeds()
    pool = sage_env.TaskPool(math_code)
    env = sage_env.env(
        EnvConfig(protocol="sage", domains=("exec",), solver_samples=1), seeds=math_code, pool=pool
    )
    exec_seeds = [t for t in pool.tasks if t.domain == "exec"]
    assert len(exec_seeds) > 100 and all(exec_mode(t) is not None for t in exec_seeds)
    assert len(pool.tasks) == len(math_code) + len(exec_seeds)
    env.reset(seed=0)
    obs, _, _, _, info = env.last()
    assert info["phase"] == "challenge" and obs["prefix"] == "```python\n"
    # a second environment on the same pool adds nothing more
    sage_env.env(
        EnvConfig(protocol="sage", domains=("exec",), solver_samples=1), seeds=math_code, pool=pool
    )
    assert len([t for t in pool.tasks if t.domain == "exec"]) == len(exec_seeds)


def _proposer_prompts(mode, reference_chars, n=200):
    import random

    from sage_env.protocols.azr import AZRConfig
    from sage_env.tasks.exec_tasks import proposer_prompt

    cfg, rng = AZRConfig(), random.Random(0)
    pool = [t for t in load_exec_seeds() if exec_mode(t) == mode]
    out = []
    for _ in range(n):
        refs = rng.sample(pool, cfg.references)
        out.append((refs, proposer_prompt(mode, refs, cfg.banned_modules, 10, reference_chars)))
    return out


@pytest.mark.parametrize("mode", ["deduction", "abduction"])
def test_proposer_prompt_ends_with_its_instruction_and_keeps_references_in_budget(mode):
    for refs, obs in _proposer_prompts(mode, 1000, n=50):
        user = obs["user"]
        assert user.startswith("Reference snippets:\n<snippet_0>")
        assert user.endswith("in a ```python block and the input in an ```input block.")
        snippets = user.split("\n\nWrite a new Python function")[0]
        kept = snippets.count("</snippet_")
        assert 1 <= kept <= len(refs)
        assert ExecSpec.of(refs[0]).program in snippets  # the first reference is always kept
        if kept > 1:
            assert len(snippets) - len("Reference snippets:\n") <= 1000
    # no budget: all K references
    for refs, obs in _proposer_prompts(mode, 0, n=5):
        assert obs["user"].count("</snippet_") == len(refs)


@pytest.mark.parametrize(
    ("program", "expected"),
    [
        ("def f(a, b):\n    return a + b", (("a", "b"), 0)),
        ("def f(x, /, y=1):\n    return x", (("x", "y"), 1)),
        ("def g(a):\n    return a\ndef f(s):\n    return s", (("s",), 0)),
        ("def f(*xs):\n    return xs", None),
        ("def f(a, *, k):\n    return a", None),
        ("def f(**kw):\n    return kw", None),
        ("def g(a):\n    return a", None),
        ("def f(a:\n", None),
        ("\x00" * 5, None),
    ],
)
def test_signature_reads_fs_positional_parameters_without_running_it(program, expected):
    from sage_env.tasks.exec_tasks import signature

    assert signature(program) == expected


def test_induction_prompt_says_how_many_literals_an_input_holds():
    """Inputs of the wrong arity make an induction proposal invalid (every input must run)."""
    from sage_env.tasks.exec_tasks import arity_hint, proposer_prompt

    def user(program):
        view = make_task("induction", program, ["1, 2", "3, 4"], ["3", "7"], task_id="t")
        return proposer_prompt("induction", [view], (), 10)["user"]

    two = user("def f(a, b):\n    return a + b")
    assert two.endswith(
        "```\n\n`f` takes 2 arguments (`a`, `b`): each input block holds exactly 2 "
        "comma-separated literals, in that order."
    )
    one = user("def f(xs):\n    return sorted(xs)")
    assert one.endswith(
        "`f` takes 1 argument (`xs`): each input block holds exactly one literal "
        "(a list, tuple or dict counts as one)."
    )
    # no fixed count: no sentence, the prompt ends with the program as before
    for program in ("def f(*xs):\n    return xs", "def f(a, b=1):\n    return a"):
        assert arity_hint(program) == ""
        assert user(program).endswith(f"```python\n{program}\n```")


def test_induction_programs_take_one_argument_when_the_env_asks():
    """``exec_induction_one_argument`` (the demo's): every induction view's ``f`` takes one
    argument; off (AZR's rule), the bundled buffers give programs of every arity."""
    from sage_env.protocols.azr import exec_references
    from sage_env.protocols.exec_demonstrations import takes_one_argument

    counts = {}
    for flag in (False, True):
        env = sage_env.env(EnvConfig(protocol="azr", exec_induction_one_argument=flag))
        env.reset(seed=0)
        views = [exec_references(env.unwrapped, "induction", 6)[0] for _ in range(60)]
        assert all(exec_mode(v) == "induction" for v in views)
        counts[flag] = sum(takes_one_argument(v) for v in views)
    assert counts[True] == 60
    assert 0 < counts[False] < 60  # 43 of 60 with seed 0


def test_proposer_prompts_fit_the_training_prompt_budget_with_the_default_model():
    """With AZR's K = 6 bundled references, a prompt over ``max_prompt_tokens`` keeps only its
    last tokens: before the budget, 99.5% of deduction prompts lost their instruction."""
    from transformers import AutoTokenizer

    from learners.policy.hf_policy import resolve_model
    from learners.training.config import TrainConfig
    from sage_env.protocols.azr import AZRConfig

    tok = AutoTokenizer.from_pretrained(resolve_model("smollm2-135m-instruct"))
    budget = TrainConfig().max_prompt_tokens

    def length(obs):
        msgs = [
            {"role": "system", "content": obs["system"]},
            {"role": "user", "content": obs["user"]},
        ]
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        return len(tok(text, add_special_tokens=False)["input_ids"])

    for mode in ("deduction", "abduction"):
        fits = [
            length(obs) <= budget for _, obs in _proposer_prompts(mode, AZRConfig().reference_chars)
        ]
        assert all(fits)
        unlimited = [length(obs) <= budget for _, obs in _proposer_prompts(mode, 0, n=40)]
        assert sum(unlimited) / len(unlimited) < 0.1  # what the budget is for


def _play_mae_exec(proposal, answer="```output\n'cba'\n```"):
    from sage_env.tasks.exec_tasks import identity_tasks
    from tests.scripted import play_round

    env = sage_env.env(
        EnvConfig(protocol="mae", domains=("exec",), solver_samples=2),
        seeds=identity_tasks()[:1],  # the deduction zero triplet
    )
    script = {
        "propose": proposal,
        "judge_question": "<score>9</score> A fine task.",
        "solve": answer,
        "judge_answer": "<score>10</score> Checked it with care.",
    }
    seen: dict = {}

    def act(agent, phase, obs, n):
        seen.setdefault(phase, []).append(obs)
        return script[phase]

    records = play_round(env, act)
    paid = {}
    for _agent, phase, reward, info in records:
        paid.setdefault(phase, []).append((reward, info))
    return env, seen, paid


def test_mae_on_execution_tasks_proposes_as_azr_and_the_executor_gives_the_output():
    """MAE's proposer gets AZR's proposer prompt on an exec task (not SAGE's math/code
    challenger prompt); the new task's output is the executor's, and the judge reviews it."""
    proposal = (
        "```python\ndef f(a):\n    return a[::-1]\n```\n```input\n'abc'\n```\n"
        "```output\n'this claim is ignored'\n```"
    )
    env, seen, paid = _play_mae_exec(proposal)
    obs = seen["propose"][0]
    assert obs["prefix"] == "```python\n"
    assert "```input" in obs["user"] and "<question>" not in obs["user"]
    new = env.unwrapped.pool.tasks[-1]
    assert new.source == "generated" and new.meta["protocol"] == "mae"
    assert ExecSpec.of(new).outputs == ("'cba'",)  # computed, not the claimed output
    assert "def f(a)" in seen["judge_question"][0]["user"]
    # both answers are right by the executor; MAE pays the judge (j = 1) and reports the verdict
    assert [i["verdict"]["score"] for _, i in paid["solve"]] == [1.0, 1.0]
    assert [r for r, _ in paid["solve"]] == pytest.approx([1.0, 1.0])
    ((reward, info),) = paid["propose"]
    assert info["accepted"] and info["parsed"]["output"] == "'cba'"
    cfg = env.unwrapped.config.rewards
    q = rewards.normalise_critic_score(9)  # (9 - 1) / 9
    assert reward == pytest.approx(rewards.challenger_reward(q, 0.0, 1.0, cfg)[0])


def test_mae_on_execution_tasks_rejects_an_invalid_program_with_its_reason():
    proposal = (
        "```python\nimport random\ndef f(a):\n    return random.random()\n```\n```input\n1\n```"
    )
    env, seen, paid = _play_mae_exec(proposal)
    assert "judge_question" not in seen  # never reviewed
    assert all(t.source != "generated" for t in env.unwrapped.pool.tasks)
    # a well-formed but invalid proposal: no judge score, no difficulty, f = 0.5
    ((reward, info),) = paid["propose"]
    cfg = env.unwrapped.config.rewards
    assert reward == pytest.approx(rewards.challenger_reward(0.0, None, 0.5, cfg)[0])
    assert info["accepted"] is False and info["verifier_check"]["status"] == "failed"
    assert "random" in info["parsed"]["reason"] and info["parsed"]["mode"] == "deduction"


def test_mae_on_execution_tasks_passes_pettingzoo_api_test():
    from sage_env.tasks.exec_tasks import identity_tasks

    env = sage_env.env(
        EnvConfig(protocol="mae", domains=("exec",), solver_samples=1), seeds=identity_tasks()
    )
    api_test(env, num_cycles=10)


@pytest.mark.slow
def test_a_proposals_parents_are_the_references_its_proposer_saw():
    """``reference_chars`` drops references that do not fit; the new task's ``parent_id``
    names only the references shown in the prompt (each one's program is in it)."""
    from tests.scripted import play_round

    env = sage_env.env(
        EnvConfig(protocol="azr", solver_samples=1, protocol_config={"modes": ("deduction",)})
    )
    prompts_seen, programs = [], []

    def act(agent, phase, obs, n):
        if phase == "propose":  # a new program each round (a duplicate would not be pooled)
            prompts_seen.append(obs["user"])
            programs.append(f"def f(a):\n    return a * {len(programs) + 2}")
            return f"```python\n{programs[-1]}\n```\n```input\n1\n```"
        return "```output\n0\n```"

    dropped = 0
    for seed in range(6):
        play_round(env, act, seed=seed)
        new = env.unwrapped.pool.tasks[-1]
        assert new.source == "generated" and ExecSpec.of(new).program == programs[-1]
        parents = new.parent_id.split(",")
        by_id = {t.task_id: t for t in env.unwrapped.pool.tasks}
        assert all(ExecSpec.of(by_id[p]).program in prompts_seen[-1] for p in parents)
        dropped += len(parents) < env.unwrapped.config.protocol_config.references
    assert dropped > 0  # some prompt had to drop a reference: the case this test is about


def test_mae_on_execution_tasks_does_not_pay_a_copy_of_a_pool_task():
    """A copy of AZR's zero triplet (in the pool) is a duplicate: never judged, not pooled,
    format score 0, the duplicate named in its reason (as on math/code)."""
    env, seen, paid = _play_mae_exec(
        "```python\ndef f(a):\n    return a\n```\n```input\n'Hello World'\n```"
    )
    assert "judge_question" not in seen
    assert all(t.source != "generated" for t in env.unwrapped.pool.tasks)
    ((reward, info),) = paid["propose"]
    assert reward == 0.0 and info["accepted"] is False
    assert "duplicate of" in info["parsed"]["reason"]


def test_sage_on_execution_tasks_does_not_pay_a_copy_of_a_pool_task():
    from sage_env.tasks.exec_tasks import identity_tasks
    from tests.scripted import play_round

    env = sage_env.env(
        EnvConfig(protocol="sage", domains=("exec",), solver_samples=1),
        seeds=identity_tasks()[:1],
    )
    copy = "```python\ndef f(a):\n    return a\n```\n```input\n'Hello World'\n```"
    records = play_round(
        env, lambda a, phase, o, n: copy if phase == "challenge" else "<score>9</score> Fine."
    )
    ((reward, info),) = [(r, i) for _, ph, r, i in records if ph == "challenge"]
    assert reward == 0.0 and "duplicate of" in info["parsed"]["reason"]
    assert "review_question" not in [ph for _, ph, _, _ in records]
    assert all(t.source != "generated" for t in env.unwrapped.pool.tasks)


def test_the_transcript_says_why_an_exec_proposal_failed():
    """``sage-env play`` prints a reward's details through ``transcript.short_details``: an
    execution proposal shows its mode, validity, reason and output (it has no ``format_score``)."""
    from sage_env.transcript import short_details

    parsed = {"mode": "deduction", "valid": False, "reason": "forbidden 'os'", "program": "x" * 999}
    text = short_details({"parsed": parsed, "accepted": False})
    assert "'mode': 'deduction'" in text and "forbidden 'os'" in text
    assert "format_score" not in text and "xxx" not in text


def test_the_scripted_player_answers_an_exec_task_wrong_but_well_formed():
    from sage_env.interactive.play import oracle_player, scripted_player
    from sage_env.tasks.exec_tasks import identity_tasks

    env = sage_env.env(
        EnvConfig(protocol="mae", domains=("exec",), solver_samples=1), seeds=identity_tasks()
    )
    env.reset(seed=2)
    answers = {}
    for agent in env.agent_iter(max_iter=50):
        obs, _, term, trunc, info = env.last()
        if term or trunc:
            env.step(None)
            continue
        if info["phase"] == "solve":
            answers["scripted"] = scripted_player(agent, obs, info, env)
            answers["oracle"] = oracle_player(agent, obs, info, env)
            task = env.unwrapped.current_task
            break
        env.step(oracle_player(agent, obs, info, env))
    prefix = obs["prefix"]  # the answer block the mode asks for
    assert answers["scripted"].startswith(prefix) and answers["oracle"].startswith(prefix)
    right, _, _ = env.unwrapped.verify(task, answers["oracle"])
    wrong, f, verdict = env.unwrapped.verify(task, answers["scripted"])
    assert right == 1.0 and wrong == 0.0 and f > 0 and verdict["status"] == "failed"


def test_an_empty_abduction_answer_is_not_well_formed_unless_it_is_right():
    """MAE pays format apart from truth (``w_f f``): an empty ``input`` block (what its
    solver learned to write, stop 31) is well-formed only when ``f()`` is the answer (one
    CRUXEval-I item), under both the literal and CRUXEval-I's expression rule."""
    for expressions in (False, True):
        wrong = answer_checks.check_abduction(
            "  \n", "def f(a):\n    return a", "1", expressions=expressions
        )
        assert (wrong.score, wrong.formatted, wrong.status) == (0.0, False, "invalid")
    right = answer_checks.check_abduction("", "def f():\n    return 1", "1", expressions=True)
    assert (right.score, right.formatted) == (1.0, True)
    task = make_task("abduction", "def f(a):\n    return a + 1", ["1"], ["2"], task_id="t")
    env = sage_env.env(EnvConfig(protocol="mae", domains=("exec",), solver_samples=1), seeds=[task])
    score, f, verdict = env.unwrapped.verify(task, "```input\n```")
    assert (score, f) == (0.0, 0.0) and verdict["status"] == "invalid"
    score, f, _ = env.unwrapped.verify(task, "```input\n5\n```")
    assert (score, f) == (0.0, 1.0)  # a wrong but well-formed input keeps its format credit

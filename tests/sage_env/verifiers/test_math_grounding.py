"""Math grounding (issue 33, item 6): ``math_grounding="program"`` computes a generated math
task's answer with the Challenger's own program instead of taking its claim."""

import random

import pytest

import sage_env
from learners.training.metrics import rollout_metrics
from learners.training.presets import PRESETS
from learners.types import RolloutResult, Transition
from sage_env import EnvConfig, Outcome
from sage_env.protocols import scripted
from sage_env.protocols.demonstrations import answer_program, build_demonstrations
from sage_env.tasks.task import load_seeds
from sage_env.verifiers import MathVerifier
from sage_env.verifiers.math_grounding import ground_answer, render_value
from tests.scripted import MATH_SEED, play_round

TWO_PLUS_TWO = (
    "<question>What is 2+2?</question>\n<program>\n{program}\n</program>\n<answer>{answer}</answer>"
)
FOUR = "def answer():\n    return 2 + 2"
PLAN = "<plan>\n1. Read the problem.\n2. Compute.\n</plan>"


def script(challenge, probe="\\boxed{4}"):
    """A round whose critic passes every question and whose probes answer ``probe``."""

    def play(agent, phase, obs, n):
        if phase == "challenge":
            return challenge
        if phase in ("review_question", "review_plan"):
            return "<score>10</score> The question is clear."
        if phase == "plan":
            return PLAN
        return probe  # probe and solve

    return play


def make_env(grounding, **kw):
    cfg = EnvConfig(domains=("math",), solver_samples=2, math_grounding=grounding, **kw)
    return sage_env.env(cfg, seeds=[MATH_SEED], render_mode="ansi")


def challenge_record(env, challenge, probe="\\boxed{4}"):
    ((_, _, reward, info),) = [
        r for r in play_round(env, script(challenge, probe)) if r[1] == "challenge"
    ]
    return reward, info


def test_a_wrong_claim_is_refused_under_program_and_paid_as_hard_under_claim():
    wrong = TWO_PLUS_TWO.format(program=FOUR, answer="5")
    # the paper's rules (claim, inverse_accuracy): the claim is the truth, every (right)
    # probe "fails", d = 1 and the wrong task joins the pool
    env = make_env("claim", rewards={"difficulty_rule": "inverse_accuracy"})
    reward, info = challenge_record(env, wrong)
    assert info["accepted"] and info["terms"]["d"] == 1.0 and reward == pytest.approx(1.0)
    assert env.unwrapped.pool.tasks[-1].answer == "5"
    # claim under the default learnability rule: no probe solved it, so no difficulty and no
    # pool: (q + 0 + f) / 3 with q = f = 1 (issue 46)
    env = make_env("claim")
    reward, info = challenge_record(env, wrong)
    assert not info["accepted"] and info["terms"]["d"] == 0.0 and reward == pytest.approx(2 / 3)
    assert env.unwrapped.pool.num_generated == 0
    # ours: the program says 4, the claim 5: refused before review, no d, not pooled
    env = make_env("program")
    reward, info = challenge_record(env, wrong)
    assert not info["accepted"] and info["terms"]["d"] is None
    assert reward == pytest.approx(0.5 / 3)  # q = 0 (never reviewed), f = 0.5
    assert env.unwrapped.pool.num_generated == 0
    check = info["verifier_check"]
    assert check["status"] == "failed" and check["grounding"]["verdict"] == "disagree"
    assert check["grounding"]["value"] == "4" and check["grounding"]["program"] == FOUR
    assert info["parsed"]["program"] == FOUR
    assert "disagrees with the program's value '4'" in info["parsed"]["reason"]


def test_an_honest_proposal_stores_the_programs_value_as_its_answer():
    env = make_env("program")
    # the claim is written as 8/2; the program returns the float 4.0: stored "4"
    honest = TWO_PLUS_TWO.format(program="def answer():\n    return 8 / 2", answer="\\frac{8}{2}")
    reward, info = challenge_record(env, honest, probe="\\boxed{4}")
    assert info["accepted"] and info["terms"]["d"] == 0.0  # both probes right
    assert reward == pytest.approx(2 / 3)
    task = env.unwrapped.pool.tasks[-1]
    assert task.source == "generated" and task.answer == "4"
    assert task.meta["claimed_answer"] == "\\frac{8}{2}" and task.meta["answer_value"] == "4.0"
    assert task.meta["answer_program"].startswith("def answer():")
    assert info["verifier_check"]["grounding"]["verdict"] == "agree"


def test_seeds_keep_their_gold_under_program():
    env = make_env("program")
    env.reset(seed=0)
    assert env.unwrapped.pool.tasks[0].answer == "5" and "answer_program" not in MATH_SEED.meta


def test_a_missing_program_is_refused_under_program_and_ignored_under_claim():
    bare = "<question>What is 2+2?</question>\n<answer>4</answer>"
    reward, info = challenge_record(make_env("program"), bare)
    assert not info["accepted"] and info["verifier_check"]["grounding"]["verdict"] == "no_program"
    assert (
        info["parsed"]["reason"]
        == "verifier check failed: no <program> defining answer() was given"
    )
    _, info = challenge_record(make_env("claim"), bare)
    assert info["accepted"] and "grounding" not in info["verifier_check"]


@pytest.mark.parametrize(
    "program, check",
    [
        ("def answer():\n    return len(open('/etc/hostname').read())", "forbidden"),
        ("import os\ndef answer():\n    return os.getpid()", "forbidden"),
        ("import random\ndef answer():\n    return random.randint(1, 9)", "forbidden"),
        ("def answer():\n    return hash('abc') % 7", "forbidden"),
        # the first of eight strings of distinct lengths in set order: which one depends on the
        # hash seed (two strings, as before, agreed in all 6 runs about 1 time in 32)
        ("def answer():\n    return len(next(iter(set('a bb ccc dddd eeeee ffffff ggggggg hhhhhhhh'.split()))))", "deterministic"),
        ("def answer():\n    return 1 / 0", "run"),
        ("def solve():\n    return 4", "entry"),
    ],
)
def test_an_unsafe_or_nondeterministic_program_is_refused(program, check):
    run = ground_answer(
        program, "4", MathVerifier(), timeout_s=2.0, memory_mb=256, check_rng=random.Random(0)
    )
    assert run.verdict == "program_failed" and f"({check})" in run.reason, run.reason
    assert run.answer is None


@pytest.mark.slow
@pytest.mark.parametrize(
    "returned, claim, stored",
    [
        ("0.75", "3/4", "0.75"),
        ("'3/4'", "0.75", "3/4"),
        ("'\\\\frac{3}{4}'", "0.75", "\\frac{3}{4}"),
        ("'2\\\\sqrt{2}'", "\\sqrt{8}", "2\\sqrt{2}"),
        ("2 ** 0.5 * 2", "2\\sqrt{2}", "2.8284271247461903"),
        ("'x**2 + 1'", "x^2+1", "x^2 + 1"),
        ("1e-05", "0.00001", "0.00001"),
        ("12.0", "12", "12"),
    ],
)
def test_a_value_in_another_form_agrees(returned, claim, stored):
    # ``(lambda: v)()`` is a computation, if a trivial one: a bare ``return v`` is refused
    program = f"def answer():\n    return (lambda: {returned})()"
    run = ground_answer(program, claim, MathVerifier())
    assert run.verdict == "agree", run.reason
    assert run.answer == stored


@pytest.mark.parametrize(
    "value, why",
    [
        (True, "True"),
        (None, "None"),
        ([4], "list"),
        (float("nan"), "finite"),
        ("", "empty"),
        ("9" * 300, "longer"),
        (1 + 2j, "complex"),
    ],
)
def test_values_that_are_no_answer_are_refused(value, why):
    text, reason = render_value(value)
    assert text is None and why in reason


def test_a_program_returning_free_text_is_refused():
    run = ground_answer("def answer():\n    return 'four ' + 'apples'", "4", MathVerifier())
    assert run.verdict == "program_failed" and "not math" in run.reason


@pytest.mark.parametrize(
    "body", ["return 5", '"""The answer."""\n    return -5', "x = 5\n    return x", "return"]
)
def test_a_program_that_only_restates_a_constant_is_refused(body):
    """``return 5`` for "What is 2+2?" would launder the claim: nothing is computed."""
    run = ground_answer(f"def answer():\n    {body}", "5", MathVerifier())
    assert run.verdict == "program_failed" and "constant" in run.reason, run.reason
    assert ground_answer("def answer():\n    return 2 + 3", "5", MathVerifier()).agreed


GARBAGE = [
    "\x00\x01\xff\ud800 \U0001f600" * 50,
    "def answer(:\n    return",
    "def answer():\n" + "    x = 1\n" * 1500,  # longer than the program limit
    "x" * 15_000,
    "```python\n```",
    "def answer():\n    while True:\n        pass",
    "def answer():\n    return 10 ** 10 ** 8",
    "def answer():\n    return [0] * 10 ** 9",
    "def answer():\n    return answer()",
    "<program></program>",
]


@pytest.mark.slow
@pytest.mark.parametrize("program", GARBAGE)
def test_garbage_programs_never_crash_the_round(program):
    env = make_env("program", code_timeout_s=1.0, code_memory_mb=256)
    reward, info = challenge_record(env, TWO_PLUS_TWO.format(program=program, answer="4"))
    assert not info["accepted"] and 0.0 <= reward <= 0.5 / 3 + 1e-9
    assert info["verifier_check"]["grounding"]["verdict"] in ("no_program", "program_failed")
    assert env.unwrapped.pool.num_generated == 0


def _transitions(infos):
    return [
        Transition(
            "challenger_0", "challenger", "math", "challenge", [], [], [], "",
            outcome=Outcome.from_dict(i),
        )  # fmt: skip
        for i in infos
    ]


def test_metrics_count_refusals_by_kind():
    infos = []
    for program, answer in [
        (FOUR, "5"),  # disagree
        (FOUR, "4"),  # agree
        ("import os\ndef answer():\n    return 4", "4"),  # program failed
        (None, "4"),  # no program
    ]:
        text = (
            TWO_PLUS_TWO.format(program=program, answer=answer)
            if program
            else f"<question>What is 2+2?</question><answer>{answer}</answer>"
        )
        infos.append(challenge_record(make_env("program"), text)[1])
    result = RolloutResult(_transitions(infos), [], 1.0, 1.0, 0, 1)
    m = rollout_metrics(result, ["challenger"])
    assert m["challenger/math_refused_disagree"] == 1.0
    assert m["challenger/math_refused_program"] == 2.0
    assert m["challenger/math_grounded"] == 1.0
    claim = challenge_record(make_env("claim"), TWO_PLUS_TWO.format(program=FOUR, answer="5"))[1]
    m = rollout_metrics(RolloutResult(_transitions([claim]), [], 1.0, 1.0, 0, 1), ["challenger"])
    assert "challenger/math_refused_disagree" not in m  # no check ran under "claim"


def test_the_prompt_asks_for_a_program_only_under_program():
    for grounding, asks in (("claim", False), ("program", True)):
        env = make_env(grounding)
        env.reset(seed=0)
        user = env.observe("challenger_0")["user"]
        assert ("<program>" in user) is asks and "<answer>" in user


@pytest.mark.slow
def test_the_scripted_challenger_writes_a_correct_program_under_program():
    report = sage_env.check_protocol("sage", rounds=2, math_grounding="program", domains=("math",))
    assert list(report) == [] and report.phases_reached.get("probe")  # proposals passed
    env = make_env("program")
    env.reset(seed=0)
    obs = env.observe("challenger_0")
    (reply,) = env.unwrapped.protocol.scripted_actions("challenge", obs, MATH_SEED)
    assert reply == scripted.PROPOSAL_MATH_PROGRAM
    _, info = challenge_record(env, reply, probe="\\boxed{71}")  # a probe solves it: pooled
    assert info["verifier_check"]["grounding"]["verdict"] == "agree"
    assert env.unwrapped.pool.tasks[-1].answer == "71"
    claim_obs = {"user": "Reference problem: ... <answer>"}
    assert scripted.replies("propose", MATH_SEED, claim_obs) == [scripted.PROPOSAL_MATH]


def test_config_rejects_an_unknown_grounding_and_presets_choose_theirs():
    with pytest.raises(ValueError, match="math_grounding must be 'claim' or 'program'"):
        EnvConfig(math_grounding="oracle")
    assert PRESETS["demo"].env.math_grounding == "program"
    assert PRESETS["paper"].env.math_grounding == "claim"
    assert PRESETS["paper-1gpu"].env.math_grounding == "claim"
    assert EnvConfig().math_grounding == "claim"


def test_the_cli_flag_sets_the_grounding():
    import argparse

    from learners.commands.train import _config

    def parse(preset, flags):
        known = argparse.Namespace(preset=preset, config=None, algorithm=None, protocol=None)
        return _config(known, flags, [])

    assert parse("demo", [])[0].env.math_grounding == "program"
    assert parse("demo", ["--env.math-grounding", "claim"])[0].env.math_grounding == "claim"
    assert parse("paper", [])[0].env.math_grounding == "claim"
    assert parse("paper", ["--env.math-grounding", "program"])[0].env.math_grounding == "program"
    with pytest.raises(SystemExit):
        parse("demo", ["--env.math-grounding", "oracle"])


def test_warmup_demonstrations_teach_a_program_that_computes_the_answer():
    seeds = load_seeds()
    demos = build_demonstrations(seeds, 40, {"challenger": 1.0}, seed=0, math_grounding="program")
    math = [d for d in demos if "<answer>" in d.target]
    assert math and all("<program>\ndef answer():" in d.target for d in math)
    assert all("<program>" in d.observation["user"] for d in math)
    plain = build_demonstrations(seeds, 40, {"challenger": 1.0}, seed=0)
    assert not any("<program>" in d.target for d in plain)
    # the programs compute the chain of the worked solution and agree with the gold
    by_id = {t.task_id: t for t in seeds}
    verifier = MathVerifier()
    for demo in math[:3]:
        task = by_id[demo.task_ids[1]]
        program = answer_program(task)
        assert program in demo.target and "return" in program
        run = ground_answer(program, task.answer, verifier)
        assert run.verdict == "agree", run.reason


def test_answer_program_chains_the_worked_solution():
    task = sage_env.Task(
        "t",
        "math",
        "Natalia sold clips to 48 of her friends in April, and then she sold half as many "
        "clips in May. How many clips did Natalia sell altogether in April and May?",
        answer="72",
        reference_solution="Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
        "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72",
    )
    assert answer_program(task) == "def answer():\n    a = 48 / 2\n    return 48 + a"
    task.answer = "73"  # the program must compute the gold
    assert answer_program(task) is None


@pytest.mark.parametrize(
    "expr",
    [
        'str(2 + 2) + " \\\\implies 5"',
        'str(2 + 2) + " $5$"',
        '"\\\\boxed{5} " + str(2 + 2)',
        'str(2 + 2) + " \\\\lor 5"',
        'str(5) + "\\\\%"',
    ],
)
def test_a_string_value_cannot_launder_a_claim_the_program_did_not_compute(expr):
    """math-verify reads the last expression: ``4 \\implies 5`` would be stored, graded as 5."""
    run = ground_answer(f"def answer():\n    return {expr}", "5", MathVerifier())
    assert run.verdict == "program_failed" and "return one value" in run.reason, run.reason


def test_the_last_definition_of_answer_is_the_one_judged():
    program = "def answer():\n    return 2 + 2\ndef answer():\n    return 5"
    run = ground_answer(program, "5", MathVerifier())
    assert run.verdict == "program_failed" and "constant" in run.reason

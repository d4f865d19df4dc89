"""A task nobody can solve must not pay as hard (issue 46, items 1 and 2).

Whole scripted rounds: a proposal whose stored answer is wrong fails every right probe; under
the default ``difficulty_rule="learnability"`` it earns no difficulty and joins no pool, the
paper's ``"inverse_accuracy"`` pays it d = 1; execution tasks keep d = 1 - r.
"""

import dataclasses

import pytest

import sage_env
from learners.training.presets import PRESETS
from sage_env import EnvConfig
from sage_env.interactive.play import _scripted
from tests.scripted import MATH_SEED, play_round

PLAN = "<plan>\n1. Read the problem.\n2. Compute.\n</plan>"
PASS = "<score>10</score> The question is clear."


def sage_script(challenge, probes):
    """Critic passes everything (q = 1); probe n answers ``probes[n]``."""

    def play(agent, phase, obs, n):
        if phase == "challenge":
            return challenge
        if phase in ("review_question", "review_plan"):
            return PASS
        if phase == "plan":
            return PLAN
        if phase == "probe":
            return f"\\boxed{{{probes[n]}}}"
        return "\\boxed{5}"  # solve

    return play


def math_env(grounding="claim", rule=None, **kw):
    rewards = {} if rule is None else {"difficulty_rule": rule}
    cfg = EnvConfig(
        domains=("math",), solver_samples=2, math_grounding=grounding, rewards=rewards, **kw
    )
    return sage_env.env(cfg, seeds=[MATH_SEED], render_mode="ansi")


def challenge(env, text, probes):
    records = play_round(env, sage_script(text, probes))
    ((_, _, reward, info),) = [r for r in records if r[1] == "challenge"]
    return reward, info


def program_proposal(question, program, answer):
    return (
        f"<question>{question}</question>\n<program>\ndef answer():\n    return {program}\n"
        f"</program>\n<answer>{answer}</answer>"
    )


WRONG_TASKS = [
    # (grounding, proposal, the right answer the probes give)
    ("claim", "<question>What is 17*23?</question>\n<answer>408</answer>", "391"),
    ("program", program_proposal("What is 3+4?", "int('4' + '2')", "42"), "7"),
    ("program", program_proposal("What is 3+4?", "6 * 7", "42"), "7"),
    ("program", program_proposal("What is 17*23?", "17 * 24", "408"), "391"),
]


@pytest.mark.parametrize("grounding, proposal, right", WRONG_TASKS)
def test_a_wrong_task_whose_right_probes_all_fail_earns_no_difficulty_and_no_pool(
    grounding, proposal, right
):
    env = math_env(grounding)
    reward, info = challenge(env, proposal, (right, right))
    assert info["verifier_check"]["status"] == "passed"  # the program agrees with the claim
    assert info["probe_scores"] == [0.0, 0.0]
    assert not info["accepted"] and info["added_to_pool"] is False
    assert info["terms"] == {"q": 1.0, "d": 0.0, "f": 1.0}
    assert reward == pytest.approx(2 / 3)  # (q + 0 + f) / 3
    assert "no difficulty probe solved it" in info["gate"] and "learnability" in info["gate"]
    assert env.unwrapped.pool.num_generated == 0


@pytest.mark.parametrize("grounding, proposal, right", WRONG_TASKS[:2])
def test_the_paper_rule_pays_a_wrong_task_as_hard_and_pools_it(grounding, proposal, right):
    """The paper's behaviour (d = 1 - r), kept by the paper presets."""
    paper = PRESETS["paper"].env
    assert paper.rewards.difficulty_rule == "inverse_accuracy"
    cfg = dataclasses.replace(
        paper, domains=("math",), solver_samples=2, math_workers=0, math_grounding=grounding
    )
    env = sage_env.env(cfg, seeds=[MATH_SEED], render_mode="ansi")
    reward, info = challenge(env, proposal, (right, right))
    assert info["accepted"] and info["terms"]["d"] == 1.0 and reward == pytest.approx(1.0)
    assert env.unwrapped.pool.num_generated == 1


def test_presets_choose_their_difficulty_rule():
    assert PRESETS["paper"].env.rewards.difficulty_rule == "inverse_accuracy"
    assert PRESETS["paper-1gpu"].env.rewards.difficulty_rule == "inverse_accuracy"
    assert PRESETS["demo"].env.rewards.difficulty_rule == "learnability"
    assert PRESETS["debug"].env.rewards.difficulty_rule == "learnability"


RIGHT = "<question>What is 17*23?</question>\n<answer>391</answer>"


@pytest.mark.parametrize(
    "rule, d",
    [("learnability", 0.5), ("band", 1.0), ("inverse_accuracy", 0.5)],
)
def test_a_task_one_probe_of_two_solves_is_pooled_with_the_rules_difficulty(rule, d):
    env = math_env(rule=rule)
    reward, info = challenge(env, RIGHT, ("391", "390"))
    assert info["accepted"] and info["added_to_pool"] is True
    assert info["terms"]["d"] == pytest.approx(d)
    assert reward == pytest.approx((2 + d) / 3)
    assert env.unwrapped.pool.num_generated == 1


@pytest.mark.parametrize("rule", ["learnability", "band"])
def test_a_task_every_probe_solves_is_pooled_but_earns_no_difficulty(rule):
    """Solved is evidence that the task is right: it joins the pool; too easy: d = 0."""
    env = math_env(rule=rule)
    reward, info = challenge(env, RIGHT, ("391", "391"))
    assert info["accepted"] and info["added_to_pool"] is True
    assert info["terms"]["d"] == 0.0 and reward == pytest.approx(2 / 3)
    assert env.unwrapped.pool.num_generated == 1


def _exec_round(rule):
    """One exec round: a valid scripted proposal, passing reviews, every probe wrong."""
    env = sage_env.env(
        EnvConfig(
            domains=("exec",),
            solver_samples=2,
            seed=0,
            rewards={} if rule is None else {"difficulty_rule": rule},
        )
    )
    env.reset(seed=0)
    challenge_info = None
    for agent in env.agent_iter(max_iter=300):
        obs, reward, term, trunc, info = env.last()
        if agent == "challenger_0" and info.get("last") is not None:  # the proposal's credit
            challenge_info = (reward, dict(info["last"]))
        if term or trunc:
            env.step(None)
            continue
        _, actions, _ = _scripted(env, obs, info)
        if info["phase"] == "probe":
            env.step(actions[1])  # the well-formed wrong output
        else:
            env.step(actions[0])
    return challenge_info, env.unwrapped


@pytest.mark.parametrize("rule", ["learnability", "band"])
def test_an_exec_task_no_probe_solves_keeps_d_1_and_joins_the_pool(rule):
    """The sandbox computes an execution task's truth, so nobody solving it means hard."""
    (reward, info), env = _exec_round(rule)
    assert info["accepted"] and info["added_to_pool"] is True
    assert info["terms"]["d"] == 1.0
    q = info["terms"]["q"]
    assert reward == pytest.approx((q + 1.0 + 1.0) / 3)
    assert env.pool.num_generated == 1


# ------------------------------------------------------------------------------- MAE
def mae_script(proposal, answer, answer_score):
    def play(agent, phase, obs, n):
        if phase == "propose":
            return proposal
        if phase == "judge_question":
            return PASS
        if phase == "judge_answer":
            return f"<score>{answer_score}</score> Checked."
        return f"\\boxed{{{answer}}}"  # solve

    return play


@pytest.mark.parametrize(
    "rule, pooled, d, answer_score",
    [
        ("learnability", False, 0.0, "1"),  # the judge scores every answer 1 (j = 0)
        ("inverse_accuracy", True, 1.0, "1"),  # the paper's MAE: d = 1 - mean j = 1
        ("learnability", True, 0.0, "10"),  # every answer judged right: pooled, d = 0
    ],
)
def test_mae_applies_the_rule_to_the_judges_scores(rule, pooled, d, answer_score):
    env = sage_env.env(
        EnvConfig(
            protocol="mae",
            domains=("math",),
            solver_samples=2,
            rewards={"difficulty_rule": rule},
        ),
        seeds=[MATH_SEED],
    )
    records = play_round(env, mae_script(RIGHT, "391", answer_score))
    ((_, _, reward, info),) = [r for r in records if r[0] == "proposer_0"]
    assert info["accepted"] is pooled and info["added_to_pool"] is pooled
    assert info["terms"]["d"] == d and reward == pytest.approx((2 + d) / 3)
    assert env.unwrapped.pool.num_generated == int(pooled)
    if not pooled:
        assert "the judge scored no answer above 0" in info["gate"]


# ---------------------------------------------------------------------------- azr-qa
@pytest.mark.parametrize("answers, pooled", [(("390", "390"), False), (("391", "390"), True)])
def test_azr_qa_pools_a_task_only_once_an_attempt_solved_it(answers, pooled):
    env = sage_env.env(
        EnvConfig(protocol="azr-qa", domains=("math",), solver_samples=2), seeds=[MATH_SEED]
    )

    def play(agent, phase, obs, n):
        return RIGHT if phase == "propose" else f"\\boxed{{{answers[n]}}}"

    records = play_round(env, play)
    ((_, _, reward, info),) = [r for r in records if r[0] == "proposer_0"]
    assert info["added_to_pool"] is pooled
    assert reward == pytest.approx(0.5 if pooled else 0.0)  # learnability: 1 - acc
    assert env.unwrapped.pool.num_generated == int(pooled)
    if not pooled:
        assert "no attempt solved it" in info["gate"]


# ------------------------------------------------------- the critic sees what it judges
@pytest.mark.parametrize("sees", [False, True])
def test_the_question_review_shows_the_answer_program_and_its_value(sees):
    env = math_env("program", critic_sees_verifier=sees)
    env.reset(seed=0)
    env.step(program_proposal("What is 3+4?", "int('4' + '2')", "42"))
    assert env.agent_selection == "critic_0"
    user = env.observe("critic_0")["user"]
    assert "What is 3+4?" in user
    shown = "Answer program:\n```python\ndef answer():\n    return int('4' + '2')\n```"
    assert (shown in user) is sees
    assert ("Its value: 42" in user) is sees
    assert ("Proposed answer: 42" in user) is sees


def test_a_claim_review_shows_no_program():
    env = math_env("claim", critic_sees_verifier=True)
    env.reset(seed=0)
    env.step("<question>What is 17*23?</question>\n<answer>408</answer>")
    user = env.observe("critic_0")["user"]
    assert "Proposed answer: 408" in user and "Answer program" not in user


def test_a_code_review_shows_the_tests():
    from tests.scripted import CODE_SEED

    env = sage_env.env(
        EnvConfig(domains=("code",), solver_samples=1, critic_sees_verifier=True),
        seeds=[CODE_SEED],
    )
    env.reset(seed=0)
    env.step(
        "<question>Write dbl(x) doubling x.</question><tests>\nassert dbl(2) == 4\n"
        "</tests><solution>\n```python\ndef dbl(x):\n    return 2 * x\n```\n</solution>"
    )
    user = env.observe("critic_0")["user"]
    assert "Proposed tests:\nassert dbl(2) == 4" in user

"""Red-team pass on the difficulty rule (issue 46 item 5): partial scores as evidence.

A code task scores the fraction of its tests a solution passes. A proposal whose tests hold
one assert that the question's function satisfies and four that contradict the question
(the reference solution special-cases them, so it passes every test) was paid: an honest
probe passes 1 of 5 tests, r = 0.2 > 0 counted as "solved", learnability paid d = 0.8 and
the task joined the pool, where it then pays every right solution 0.2. Evidence that a
proposer's tests are right is a full pass: a task no attempt passes in full earns d = 0 and
joins no pool (sage, azr-qa).
"""

import pytest

import sage_env
from sage_env import EnvConfig
from tests.scripted import CODE_SEED, play_round

PLAN = "<plan>\n1. Read the problem.\n2. Compute.\n</plan>"
PASS = "<score>10</score> The question is clear."

WRONG_TESTS = (
    "<question>Write add(a, b) returning the sum a + b.</question>\n<tests>\n"
    "assert add(1, 2) == 3\nassert add(2, 2) == 5\nassert add(3, 3) == 7\n"
    "assert add(0, 5) == 6\nassert add(4, 1) == 9\n</tests>\n<solution>\n```python\n"
    "def add(a, b):\n"
    "    return {(2, 2): 5, (3, 3): 7, (0, 5): 6, (4, 1): 9}.get((a, b), a + b)\n"
    "```\n</solution>"
)
HONEST = "```python\ndef add(a, b):\n    return a + b\n```"
SPECIAL = (
    "```python\ndef add(a, b):\n"
    "    return {(2, 2): 5, (3, 3): 7, (0, 5): 6, (4, 1): 9}.get((a, b), a + b)\n```"
)


def script(probes):
    def play(agent, phase, obs, n):
        if phase == "challenge":
            return WRONG_TESTS
        if phase in ("review_question", "review_plan"):
            return PASS
        if phase == "plan":
            return PLAN
        if phase == "probe":
            return probes[n]
        return HONEST

    return play


def code_env(**kw):
    return sage_env.env(EnvConfig(domains=("code",), solver_samples=2, **kw), seeds=[CODE_SEED])


def test_tests_a_right_solution_passes_only_in_part_earn_no_difficulty_and_no_pool():
    env = code_env()
    records = play_round(env, script((HONEST, HONEST)))
    ((_, _, reward, info),) = [r for r in records if r[1] == "challenge"]
    assert info["verifier_check"]["status"] == "passed"
    assert info["probe_scores"] == [pytest.approx(0.2), pytest.approx(0.2)]
    assert info["terms"]["d"] == 0.0
    assert not info["accepted"] and info["added_to_pool"] is False
    assert env.unwrapped.pool.num_generated == 0
    assert "no difficulty probe solved it" in info["gate"]


def test_a_full_pass_is_evidence_and_partial_scores_keep_their_weight():
    env = code_env()
    records = play_round(env, script((SPECIAL, HONEST)))
    ((_, _, reward, info),) = [r for r in records if r[1] == "challenge"]
    assert info["accepted"] and info["added_to_pool"] is True
    assert info["terms"]["d"] == pytest.approx(1 - 0.6)  # r = (1 + 0.2) / 2


def test_azr_qa_pools_a_code_task_only_after_a_full_pass():
    env = sage_env.env(
        EnvConfig(protocol="azr-qa", domains=("code",), solver_samples=2), seeds=[CODE_SEED]
    )

    def play(agent, phase, obs, n):
        return WRONG_TESTS if phase == "propose" else HONEST

    records = play_round(env, play)
    ((_, _, reward, info),) = [r for r in records if r[0] == "proposer_0"]
    assert info["added_to_pool"] is False
    assert env.unwrapped.pool.num_generated == 0
    assert reward == 0.0  # was learnability(0.2) = 0.8


# ------------------------------------------------------------------ residual attacks
WEAK_TESTS = (
    "<question>Write is_prime(n) returning True when n is a prime number.</question>\n"
    "<tests>\nassert is_prime(4) == False\nassert is_prime(9) == False\n"
    "assert is_prime(15) == False\n</tests>\n<solution>\n```python\n"
    "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, n))\n```\n</solution>"
)
CONSTANT = "```python\ndef is_prime(n):\n    return False\n```"


def test_tests_a_constant_function_passes_are_no_evidence():
    env = code_env()

    def play(agent, phase, obs, n):
        if phase == "challenge":
            return WEAK_TESTS
        if phase in ("review_question", "review_plan"):
            return PASS
        if phase == "plan":
            return PLAN
        return CONSTANT

    records = play_round(env, play)
    ((_, _, reward, info),) = [r for r in records if r[1] == "challenge"]
    assert info["accepted"] is False and not info.get("added_to_pool")
    assert info["verifier_check"]["status"] == "failed"
    assert "returns False passes every one" in info["verifier_check"]["reason"]
    assert not any(t.parent_id for t in env.unwrapped.pool.tasks)


@pytest.mark.xfail(
    strict=True,
    reason="residual (docs/reference/verifiers.md, 'Known residual attacks'): a wrong stored "
    "answer that a weak solver gives by default (0) is 'solved' by one lucky probe; with k "
    "probes the chance is 1 - (1 - p)^k for a default rate p, and learnability pays 1 - r",
)
def test_a_wrong_answer_a_probe_gives_by_default_is_no_evidence():
    from tests.scripted import MATH_SEED

    env = sage_env.env(
        EnvConfig(domains=("math",), solver_samples=2), seeds=[MATH_SEED], render_mode="ansi"
    )
    probes = ("0", "391")

    def play(agent, phase, obs, n):
        if phase == "challenge":
            return "<question>What is 17*23?</question>\n<answer>0</answer>"
        if phase in ("review_question", "review_plan"):
            return PASS
        if phase == "plan":
            return PLAN
        return f"\\boxed{{{probes[n % 2]}}}"

    records = play_round(env, play)
    ((_, _, reward, info),) = [r for r in records if r[1] == "challenge"]
    assert info["added_to_pool"] is False and info["terms"]["d"] == 0.0

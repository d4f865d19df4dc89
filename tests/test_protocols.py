import pytest
from pettingzoo.test import api_test, seed_test

import sage_env
from sage_env import EnvConfig, Protocol, ProtocolError, check_protocol, register_protocol
from sage_env.protocols import learnability_reward
from tests.scripted import CODE_SEED, MATH_SEED, play_round

Q = "<question>What is 7*6?</question>\n<answer>42</answer>"


def by_phase(records):
    out = {}
    for agent, phase, reward, info in records:
        out.setdefault(phase, []).append((agent, reward, info))
    return out


def make(protocol, k=2, **kw):
    return sage_env.env(
        EnvConfig(protocol=protocol, domains=("math",), solver_samples=k), seeds=[MATH_SEED], **kw
    )


@pytest.mark.parametrize("acc, expected", [(0.0, 0.0), (1.0, 0.0), (0.25, 0.75), (0.5, 0.5)])
def test_learnability_reward(acc, expected):
    assert learnability_reward(acc) == expected


def test_azr_round_values():
    answers = iter(["\\boxed{42}", "\\boxed{41}", "\\boxed{42}", "\\boxed{7}"])
    rec = by_phase(
        play_round(
            make("azr", k=4), lambda a, phase, o, n: Q if phase == "propose" else next(answers)
        )
    )
    assert [r for _, r, _ in rec["solve"]] == [1.0, 0.0, 1.0, 0.0]
    ((agent, reward, info),) = rec["propose"]
    assert agent == "proposer_0" and reward == pytest.approx(0.5)  # 1 - acc, acc = 0.5
    assert info["terms"] == {"acc": 0.5, "valid": True}


def test_azr_all_solved_gives_zero_and_invalid_proposal_falls_back_to_pool():
    rec = by_phase(
        play_round(make("azr"), lambda a, phase, o, n: Q if phase == "propose" else "\\boxed{42}")
    )
    assert rec["propose"][0][1] == 0.0  # acc = 1 -> not learnable
    env = make("azr", k=1)
    rec = by_phase(
        play_round(env, lambda a, phase, o, n: "junk" if phase == "propose" else "\\boxed{5}")
    )
    assert rec["propose"][0][1] == 0.0 and not rec["propose"][0][2]["terms"]["valid"]
    assert rec["solve"][0][1] == 1.0  # solved the seed "What is 2+3?"
    assert len(env.unwrapped.pool) == 1


def test_azr_format_penalty_option():
    env = make("azr", k=2, azr_format_penalty=True)
    answers = iter(["\\boxed{41}", "no box"])
    rec = by_phase(
        play_round(env, lambda a, phase, o, n: Q if phase == "propose" else next(answers))
    )
    assert [r for _, r, _ in rec["solve"]] == [-0.5, -1.0]


def test_mae_round_values():
    def script(agent, phase, obs, n):
        return {
            "propose": Q,
            "judge_question": "<score>10</score> Checked it with care.",
            "solve": "\\boxed{42}",
            "judge_answer": [
                "<score>10</score> Checked it with care.",
                "<score>1</score> Checked it with care.",
            ][n % 2],
        }[phase]

    env = make("mae")
    rec = by_phase(play_round(env, script))
    # judge scores answers 1.0 and 0.0; solver: 0.8 j + 0.2 f
    assert [r for _, r, _ in rec["solve"]] == pytest.approx([1.0, 0.2])
    assert [r for _, r, _ in rec["judge_answer"]] == [1.0, 1.0]
    # verifier says both answers are right: the judge agreed once
    assert [i["verifier_agrees"] for _, _, i in rec["judge_answer"]] == [True, False]
    ((_, reward, info),) = rec["propose"]
    assert reward == pytest.approx((1.0 + 0.5 + 1.0) / 3) and info["accepted"]
    assert len(env.unwrapped.pool) == 2


def test_mae_rejected_question_is_not_pooled():
    def script(agent, phase, obs, n):
        return {
            "propose": Q,
            "judge_question": "<score>2</score> Checked it with care.",
            "solve": "\\boxed{5}",
            "judge_answer": "<score>10</score> Checked it with care.",
        }[phase]

    env = make("mae", k=1)
    rec = by_phase(play_round(env, script))
    assert rec["propose"][0][1] == pytest.approx((1 / 9 + 1.0) / 3)
    assert len(env.unwrapped.pool) == 1


@pytest.mark.parametrize("protocol", ["sage", "azr", "mae"])
def test_builtin_protocols_pass_checks_and_pettingzoo_tests(protocol):
    assert check_protocol(protocol) == []

    def mk():
        return sage_env.env(
            EnvConfig(protocol=protocol, solver_samples=1), seeds=[MATH_SEED, CODE_SEED]
        )

    api_test(mk(), num_cycles=20)
    seed_test(mk, num_cycles=20)
    from pettingzoo.test import render_test

    render_test(
        lambda render_mode=None: sage_env.env(
            EnvConfig(protocol=protocol, solver_samples=1),
            seeds=[MATH_SEED, CODE_SEED],
            render_mode=render_mode,
        )
    )


def test_unknown_protocol_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown protocol 'zero'.*registered"):
        sage_env.env(protocol="zero")


class Echo(Protocol):
    name = "echo_test"
    agents = ("solver_0",)

    def start(self, env):
        env.select("solver_0", "solve", env.draw_reference(), {"system": "s", "user": "say 1"})

    def on_solve(self, env, text):
        env.deliver("solver_0", float(text.strip() == "1"), {"match": text.strip() == "1"})
        env.finish()


def test_user_protocol_plugs_in_without_library_changes():
    register_protocol("echo_test", Echo, overwrite=True)
    assert check_protocol("echo_test") == []
    rec = play_round(sage_env.env(protocol="echo_test", seeds=[MATH_SEED]), lambda *a: "1")
    assert rec == [("solver_0", "solve", 1.0, rec[0][3])]


class DoubleCredit(Echo):
    def on_solve(self, env, text):
        env.deliver("solver_0", 1.0, {})
        env.deliver("solver_0", 1.0, {})
        env.finish()


class NeverEnds(Echo):
    def on_solve(self, env, text):
        env.deliver("solver_0", 0.0, {})
        env.select("solver_0", "solve", env.current_task, {"system": "", "user": "again"})


class Raises(Echo):
    def on_solve(self, env, text):
        raise KeyError("boom")


class Uncredited(Echo):
    def on_solve(self, env, text):
        env.finish()


class BadAgents(Echo):
    agents = ("Solver",)


@pytest.mark.parametrize(
    "cls, message",
    [
        (DoubleCredit, "double credit"),
        (NeverEnds, "did not end within 200 turns"),
        (Raises, "KeyError: 'boom'"),
        (Uncredited, "last action was never credited"),
        (BadAgents, "should look like 'role_0'"),
    ],
)
def test_check_protocol_names_the_problem(cls, message):
    problems = check_protocol(cls, rounds=1, raise_on_error=False)
    assert any(message in p for p in problems), problems
    with pytest.raises(ProtocolError, match="protocol check failed"):
        check_protocol(cls, rounds=1)

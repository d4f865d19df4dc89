from dataclasses import dataclass

import pytest
from pettingzoo.test import api_test, seed_test

import sage_env
from sage_env import EnvConfig, Protocol, ProtocolError, check_protocol, register_protocol
from sage_env.protocols import AZRConfig, AZRQAConfig, MAEConfig, learnability_reward, propose
from sage_env.text import prompts
from tests.scripted import CODE_SEED, MATH_SEED, play_round

Q = "<question>What is 7*6?</question>\n<answer>42</answer>"


@pytest.fixture(autouse=True)
def _forget_test_protocols():
    """A protocol a test here registers is forgotten after it: later tests in the same
    process (tests/learners/test_error_paths.py lists every registered protocol) see only the
    built-ins and their own."""
    from sage_env.protocols import PROTOCOLS

    before = set(PROTOCOLS.names())
    yield
    for name in set(PROTOCOLS.names()) - before:
        PROTOCOLS.unregister(name)


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
            make("azr-qa", k=4), lambda a, phase, o, n: Q if phase == "propose" else next(answers)
        )
    )
    assert [r for _, r, _ in rec["solve"]] == [1.0, 0.0, 1.0, 0.0]
    ((agent, reward, info),) = rec["propose"]
    assert agent == "proposer_0" and reward == pytest.approx(0.5)  # 1 - acc, acc = 0.5
    assert info["terms"] == {"acc": 0.5, "valid": True}


def test_azr_all_solved_gives_zero_and_invalid_proposal_falls_back_to_pool():
    rec = by_phase(
        play_round(
            make("azr-qa"), lambda a, phase, o, n: Q if phase == "propose" else "\\boxed{42}"
        )
    )
    assert rec["propose"][0][1] == 0.0  # acc = 1 -> not learnable
    env = make("azr-qa", k=1)
    rec = by_phase(
        play_round(env, lambda a, phase, o, n: "junk" if phase == "propose" else "\\boxed{5}")
    )
    assert rec["propose"][0][1] == 0.0 and not rec["propose"][0][2]["terms"]["valid"]
    assert rec["solve"][0][1] == 1.0  # solved the seed "What is 2+3?"
    assert len(env.unwrapped.pool) == 1


def azr_penalty_round(env):
    answers = iter(["\\boxed{41}", "no box"])
    rec = by_phase(
        play_round(env, lambda a, phase, o, n: Q if phase == "propose" else next(answers))
    )
    return [r for _, r, _ in rec["solve"]]


def test_azr_format_penalty_option():
    env = make("azr-qa", k=2, protocol_config={"format_penalty": True})
    assert env.unwrapped.config.protocol_config == AZRQAConfig(format_penalty=True)
    assert azr_penalty_round(env) == [-0.5, -1.0]
    assert azr_penalty_round(make("azr-qa", k=2)) == [0.0, 0.0]  # default: off


def test_old_reward_field_names_are_refused_as_unknown():
    with pytest.raises(TypeError, match=r"unknown EnvConfig option\(s\): \['azr_format_penalty'\]"):
        make("azr", k=2, azr_format_penalty=False)
    with pytest.raises(TypeError, match="mae_solver_weights"):
        sage_env.RewardConfig(alpha=0.6, mae_solver_weights=(0.5, 0.5))
    assert not hasattr(sage_env.RewardConfig(), "azr_format_penalty")


def test_mae_solver_weights_come_from_its_settings():
    def script(agent, phase, obs, n):
        return {
            "propose": Q,
            "judge_question": "<score>10</score> Checked it with care.",
            "solve": "\\boxed{42}",
            "judge_answer": "<score>10</score> Checked it with care.",
        }[phase]

    env = make("mae", protocol_config=MAEConfig(solver_weights=(0.5, 0.25)))
    rec = by_phase(play_round(env, script))
    assert [r for _, r, _ in rec["solve"]] == pytest.approx([0.75, 0.75])  # 0.5 j + 0.25 f


def test_protocol_settings_are_checked_with_clear_errors():
    with pytest.raises(
        ValueError,
        match=r"unknown protocol_config key\(s\) \['penalty'\].*"
        r"AZRQAConfig has \['format_penalty'\]",
    ):
        EnvConfig(protocol="azr-qa", protocol_config={"penalty": True})
    with pytest.raises(ValueError, match="'mae' takes a MAEConfig .* got AZRConfig"):
        EnvConfig(protocol="mae", protocol_config=AZRConfig())
    with pytest.raises(ValueError, match="'sage' has no settings of its own"):
        EnvConfig(protocol_config={"format_penalty": True})
    with pytest.raises(ValueError, match="solver_weights must be two finite numbers"):
        MAEConfig(solver_weights=(1.0, float("nan")))
    # a new protocol resets the settings to its own defaults
    assert EnvConfig(protocol="azr").with_protocol("mae").protocol_config == MAEConfig()
    env = sage_env.env(EnvConfig(protocol="azr"), protocol="mae")
    assert env.unwrapped.config.protocol == "mae"
    assert env.unwrapped.config.protocol_config == MAEConfig()


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


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["sage", "azr", "azr-qa", "mae", "rlvr"])
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


PHASES = {
    "sage": {"challenge", "review_question", "probe", "plan", "review_plan", "solve"},
    "azr": {"propose", "solve"},
    "azr-qa": {"propose", "solve"},
    "mae": {"propose", "judge_question", "solve", "judge_answer"},
    "rlvr": {"solve"},
}


@pytest.mark.slow
@pytest.mark.parametrize("protocol", sorted(PHASES))
def test_check_protocol_reaches_every_phase_of_every_builtin(protocol):
    report = check_protocol(protocol, rounds=2)
    assert report == []
    assert report.phases_declared == PHASES[protocol]
    assert set(report.phases_reached) == PHASES[protocol]
    assert report.rounds == 6  # garbage, scripted from the first reply, from the second


def test_check_protocol_runs_both_sides_of_the_sage_gates():
    # scripted replies start with a passing review (question accepted, probed k=2 times) and,
    # on the second pass, a failing one (rejected: no probe)
    report = check_protocol("sage", rounds=1)
    assert report.phases_reached["review_question"] == 2  # one scripted round each
    assert report.phases_reached["probe"] == 2  # only the accepted question is probed


class PoseAttempt(Protocol):
    """A user's proposer/solver game with phase names of its own (and the built-in prompts)."""

    name = "pose_attempt_test"
    agents = ("proposer_0", "solver_0")

    def start(self, env):
        self.reference = env.draw_reference()
        self.proposed = False
        env.select("proposer_0", "pose", self.reference, prompts.challenger(self.reference))

    def on_pose(self, env, text):
        _, candidate, _ = propose(env, text, self.reference)
        if candidate is None:
            env.deliver("proposer_0", 0.0, {"valid": False})
            self.task = env.pool.sample(env.rng)
        else:
            self.task, self.proposed = candidate, True
        env.select("solver_0", "attempt", self.task, prompts.solver(self.task))

    def on_attempt(self, env, text):
        s_gt, _, _ = env.verify(self.task, text)
        env.deliver("solver_0", s_gt, {"s_gt": s_gt})
        if self.proposed:
            env.deliver("proposer_0", 1.0 - s_gt, {"d": 1.0 - s_gt})
        env.finish()


class NeverCreditsProposer(PoseAttempt):
    """Broken: an accepted proposal is never credited."""

    def on_attempt(self, env, text):
        s_gt, _, _ = env.verify(self.task, text)
        env.deliver("solver_0", s_gt, {"s_gt": s_gt})
        env.finish()


class AttemptRaises(PoseAttempt):
    """Broken: an invalid proposal ends the round; the solve handler of a valid one raises."""

    def on_pose(self, env, text):
        _, candidate, _ = propose(env, text, self.reference)
        if candidate is None:
            env.deliver("proposer_0", 0.0, {"valid": False})
            env.finish()
            return
        self.task, self.proposed = candidate, True
        env.select("solver_0", "attempt", self.task, prompts.solver(self.task))

    def on_attempt(self, env, text):
        raise KeyError("difficulty")


def test_a_sound_user_protocol_with_its_own_phase_names_passes_and_reaches_them():
    report = check_protocol(PoseAttempt, rounds=1)
    assert report == []
    assert set(report.phases_reached) == {"pose", "attempt"}
    # inferred from the built-in prompts: the scripted proposer wrote a valid proposal
    assert PoseAttempt().phase_kind("pose", prompts.challenger(MATH_SEED)) == "propose"


def test_check_protocol_finds_a_proposer_never_credited_on_the_success_path():
    problems = check_protocol(NeverCreditsProposer, rounds=1, raise_on_error=False)
    uncredited = [p for p in problems if "proposer_0's last action was never credited" in p]
    assert uncredited and all("(phase 'pose')" in p and "scripted" in p for p in uncredited)
    assert not any("garbage players" in p for p in problems)  # invalid proposals are credited


def test_check_protocol_finds_a_solve_handler_that_raises_after_a_valid_proposal():
    problems = check_protocol(AttemptRaises, rounds=1, raise_on_error=False)
    assert any(
        "step of solver_0 in phase 'attempt' raised" in p and "KeyError: 'difficulty'" in p
        for p in problems
    ), problems


class Chant(Protocol):
    """A phase of its own kind: no built-in name, prompt or prefix."""

    name = "chant_test"
    agents = ("singer_0", "listener_0")

    def start(self, env):
        env.select("singer_0", "chant", env.draw_reference(), {"system": "Sing.", "user": "la"})

    def on_chant(self, env, text):
        env.deliver("singer_0", float("la" in text), {})
        env.finish()

    def on_encore(self, env, text):  # never selected
        env.deliver("singer_0", 0.0, {})
        env.finish()


class ScriptedChant(Chant):
    def scripted_actions(self, phase, observation, task):
        return ["la la"] if phase == "chant" else super().scripted_actions(phase, observation, task)


def test_check_protocol_reports_unreached_and_unscripted_phases_and_idle_agents():
    problems = check_protocol(Chant, rounds=1, raise_on_error=False)
    assert any("phase 'encore' (on_encore) was never reached in 3 rounds" in p for p in problems)
    assert any("phase 'chant' has no scripted actions" in p for p in problems)
    assert any("listener_0 is in `agents` but never acted" in p for p in problems)
    fixed = check_protocol(ScriptedChant, rounds=1, raise_on_error=False)
    assert not any("no scripted actions" in p for p in fixed)
    assert any("'encore'" in p for p in fixed)


class CreditsNobody(Echo):
    agents = ("solver_0", "critic_0")

    def start(self, env):
        env.select("critic_0", "review_plan", env.draw_reference(), {"system": "", "user": "?"})

    def on_review_plan(self, env, text):
        env.select("solver_0", "solve", env.current_task, {"system": "", "user": "say 1"})


def test_check_protocol_reports_an_agent_that_acted_but_was_never_credited():
    problems = check_protocol(CreditsNobody, rounds=1, raise_on_error=False)
    assert any(
        "critic_0 acted 3 times (phases ['review_plan']) but was never credited" in p
        for p in problems
    ), problems


def test_check_protocol_plays_the_players_it_is_given():
    seen = []

    def says_one(agent, obs, info, env):
        seen.append((agent, info["phase"]))
        return "1"

    register_protocol("echo_test", Echo, overwrite=True)
    report = check_protocol("echo_test", rounds=2, players={"mine": says_one})
    assert report == [] and seen == [("solver_0", "solve")] * 2 and report.rounds == 8


@pytest.mark.slow
def test_the_protocols_of_the_docs_pass_the_check():
    import re
    from pathlib import Path

    from sage_env.protocols import PROTOCOLS

    text = (Path(__file__).resolve().parents[3] / "docs/reference/protocols/custom.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 3
    for name in ("solve_only", "restate", "graded"):
        PROTOCOLS.unregister(name)
    namespace = {}
    for block in blocks:  # each calls check_protocol(...), which raises on a problem
        exec(compile(block, "docs/reference/protocols/custom.md", "exec"), namespace)
    assert set(namespace["report"].phases_reached) == {"restate", "answer"}
    assert check_protocol("solve_only") == []
    with pytest.raises(ValueError, match="format_weight must be in"):
        sage_env.env(protocol="graded", protocol_config={"format_weight": 2})


@dataclass
class ThresholdConfig:
    """Settings of the ``threshold_test`` protocol."""

    target: str = "1"
    """The reply that earns the reward."""
    reward: float = 1.0
    """What it earns."""


class Threshold(Echo):
    name = "threshold_test"
    config_cls = ThresholdConfig

    def on_solve(self, env, text):
        mine = env.config.protocol_config
        hit = text.strip() == mine.target
        env.deliver("solver_0", mine.reward if hit else 0.0, {"hit": hit})
        env.finish()


def test_a_user_protocols_settings_reach_its_handlers():
    register_protocol("threshold_test", Threshold, overwrite=True)
    env = sage_env.env(protocol="threshold_test", seeds=[MATH_SEED])
    assert env.unwrapped.config.protocol_config == ThresholdConfig()
    assert play_round(env, lambda *a: "1")[0][2] == 1.0
    settings = {"target": "2", "reward": 0.25}
    env = sage_env.env(protocol="threshold_test", seeds=[MATH_SEED], protocol_config=settings)
    assert [r for _, _, r, _ in play_round(env, lambda *a: "2")] == [0.25]
    # an instance (not a registered name) gets its settings built for its own config_cls
    raw = sage_env.raw_env(protocol=Threshold(), seeds=[MATH_SEED], protocol_config=settings)
    assert raw.config.protocol_config == ThresholdConfig("2", 0.25)
    with pytest.raises(ValueError, match=r"unknown protocol_config key\(s\) \['treshold'\]"):
        sage_env.env(protocol="threshold_test", protocol_config={"treshold": 1})
    seen = []

    def player(agent, obs, info, env):
        seen.append(env.unwrapped.config.protocol_config)
        return "2"

    assert check_protocol("threshold_test", rounds=1, protocol_config=settings) == []
    check_protocol("threshold_test", rounds=1, players={"p": player}, protocol_config=settings)
    assert seen == [ThresholdConfig("2", 0.25)]
    problems = check_protocol(
        "threshold_test", rounds=1, protocol_config={"x": 1}, raise_on_error=False
    )
    assert problems == [
        "protocol_config={'x': 1} does not fit: unknown protocol_config key(s) ['x'] for "
        "protocol 'threshold_test': ThresholdConfig has ['reward', 'target']"
    ]


@dataclass
class NoDefault:
    needed: int


@dataclass
class Nested:
    inner: ThresholdConfig = None

    def __post_init__(self):
        self.inner = self.inner or ThresholdConfig()


@pytest.mark.parametrize(
    "config_cls, message",
    [
        (dict, "config_cls must be a dataclass"),
        (NoDefault, "NoDefault() fails"),
        (Nested, "does not round-trip through a mapping"),
    ],
)
def test_check_protocol_finds_settings_that_do_not_fit_a_config_file(config_cls, message):
    cls = type("Bad", (Echo,), {"config_cls": config_cls})
    problems = check_protocol(cls, rounds=1, raise_on_error=False)
    assert len(problems) == 1 and message in problems[0], problems

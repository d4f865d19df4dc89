"""SingleRoleEnv (sage_env.interactive.wrappers) and the Stable-Baselines3 curriculum example."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gymnasium.utils import env_checker as gym_checker

import sage_env
from sage_env import EnvConfig
from sage_env.interactive.wrappers import SingleRoleEnv
from tests.scripted import MATH_SEED, play_round

CHALLENGE = "<question>What is 7*6?</question>\n<answer>42</answer>"
Q8 = (8 - 1) / 9  # the scripted critic scores 8


def load_example():
    path = Path(__file__).parents[3] / "examples" / "sb3_curriculum.py"
    spec = importlib.util.spec_from_file_location("sb3_curriculum", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["sb3_curriculum"] = module  # dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    return module


ex = load_example()


def aec(**kw):
    # the paper's difficulty rule: these tests are about the wrapper, and their scripted
    # solver fails the challenge (d = 1 - 0 = 1; the default learnability pays it 0)
    cfg = EnvConfig(
        domains=("math",), solver_samples=2, rewards={"difficulty_rule": "inverse_accuracy"}
    )
    return sage_env.env(cfg, seeds=[MATH_SEED], **kw)


def critic_scoring(score):
    def player(agent, obs, info, env):
        return f"<score>{score}</score> ok, checked it."

    return player


# ------------------------------------------------------------------------ SingleRoleEnv
def test_wrappers_module_imports_neither_sb3_nor_torch():
    code = (
        "import sys, sage_env.interactive.wrappers\n"
        "bad = {'torch', 'stable_baselines3', 'transformers'} & set(sys.modules)\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_challenger_reward_is_the_rounds_reward():
    env = SingleRoleEnv(aec(), role="challenger_0")
    obs, info = env.reset(seed=0)
    assert info["phase"] == "challenge" and info["last"] is None and info["round"] == 1
    assert (
        "What is 2+3?" in obs["user"]
        and set(obs) == {"system", "user", "prefix"}
        and obs["prefix"] == "<question>"
    )
    obs, reward, terminated, truncated, info = env.step(CHALLENGE)
    # scripted critic 8 -> q = 7/9 >= alpha, accepted; scripted solver \boxed{0} twice on
    # 7*6 -> d = 1; f = 1: (q + d + f) / 3 = 25/27
    assert reward == pytest.approx((Q8 + 1 + 1) / 3) == pytest.approx(25 / 27)
    assert (terminated, truncated) == (True, False)
    assert info["phase"] == "done" and info["last"]["accepted"]
    assert info["last"]["terms"] == pytest.approx({"q": Q8, "d": 1.0, "f": 1.0})
    assert info["last"]["reward"] == reward
    with pytest.raises(RuntimeError):
        env.step(CHALLENGE)

    # the same round played directly on the AEC env gives the same reward
    scripted = sage_env.interactive.play.PLAYERS["scripted"]

    def script(agent, phase, obs, n):
        if agent == "challenger_0":
            return CHALLENGE
        return scripted(agent, obs, {"phase": phase, "domain": "math"}, direct)

    direct = aec()
    (challenge,) = [r for r in play_round(direct, script, seed=0) if r[1] == "challenge"]
    assert challenge[2] == reward


def test_rejected_and_unparseable_challenges():
    env = SingleRoleEnv(aec(), role="challenger_0", players={"critic_0": critic_scoring(3)})
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(CHALLENGE)
    # q = 2/9 < alpha: d dropped (counts as 0), (q + f) / 3
    assert reward == pytest.approx((2 / 9 + 1) / 3) and terminated
    assert not info["last"]["accepted"]
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("no tags at all")
    assert reward == 0.0 and terminated and info["last"]["terms"]["f"] == 0.0


def test_solver_role_takes_several_steps_with_exact_rewards():
    env = SingleRoleEnv(aec(), role="solver_0")
    _, info = env.reset(seed=0)
    assert info["phase"] == "probe"  # the scripted challenger's pens question (answer 71)
    _, r1, t1, _, info = env.step("\\boxed{71}")
    assert r1 == pytest.approx(0.6 * 1 + 0.2 * 1) and not t1  # probe: no plan term
    assert info["phase"] == "probe"
    _, r2, t2, _, info = env.step("I do not know")
    assert r2 == 0.0 and not t2
    assert info["phase"] == "solve"
    gold = env.aec.unwrapped.current_task.answer
    _, r3, t3, _, info = env.step(f"\\boxed{{{gold}}}")
    # plan shown (p = 7/9 > beta): 0.2 p + 0.6 s_gt + 0.2 f
    assert r3 == pytest.approx(0.2 * Q8 + 0.6 + 0.2) and not t3
    _, r4, t4, _, info = env.step("\\boxed{-12345}")
    assert r4 == pytest.approx(0.2 * Q8 + 0.2) and t4 and info["phase"] == "done"
    assert info["last"]["reward"] == r4


def test_rounds_chain_into_one_episode():
    env = SingleRoleEnv(aec(), role="challenger_0", rounds_per_episode=3)
    env.reset(seed=0)
    results = []
    for i in range(3):
        obs, reward, terminated, _, info = env.step(
            f"<question>What is 7*{i + 3}?</question>\n<answer>{7 * (i + 3)}</answer>"
        )
        results.append((reward, terminated, info["round"], info["phase"]))
        assert info["last"]["parsed"]["answer"] == str(7 * (i + 3))
    assert [r[1:] for r in results] == [
        (False, 2, "challenge"),
        (False, 3, "challenge"),
        (True, 3, "done"),
    ]
    assert [r[0] for r in results] == pytest.approx([25 / 27] * 3)


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="role"):
        SingleRoleEnv(aec(), role="judge_0")
    with pytest.raises(ValueError, match="rounds_per_episode"):
        SingleRoleEnv(aec(), rounds_per_episode=0)
    with pytest.raises(ValueError, match="unknown agents"):
        SingleRoleEnv(aec(), players={"nobody": critic_scoring(8)})
    with pytest.raises(RuntimeError, match="reset"):
        SingleRoleEnv(aec()).step("x")


@pytest.mark.parametrize("role", ["challenger_0", "solver_0", "critic_0", "planner_0"])
def test_gymnasium_checks_pass(role):
    # gymnasium's check_env minus check_step_determinism: reset(seed) reseeds the RNG but the
    # task pool (and its id counter) persists across episodes by design, so a second
    # "identical" step sees a different pool. Determinism holds across fresh copies instead.
    env = SingleRoleEnv(aec(), role=role)
    gym_checker.check_action_space(env.action_space)
    gym_checker.check_observation_space(env.observation_space)
    gym_checker.check_reset_return_type(env)
    gym_checker.check_reset_seed_determinism(env)
    gym_checker.check_reset_options(env)
    gym_checker.env_reset_passive_checker(env)
    gym_checker.env_step_passive_checker(env, env.action_space.sample())

    runs = []
    for _ in range(2):
        fresh = SingleRoleEnv(aec(), role=role)
        fresh.action_space.seed(3)
        out = [fresh.reset(seed=3)]
        done = False
        while not done:
            step = fresh.step(fresh.action_space.sample())
            out.append(step)
            done = step[2] or step[3]
        runs.append(out)
    assert runs[0] == runs[1]


def test_sb3_check_env_rejects_text_observations():
    # documented limitation (docs/guide/sb3.md): SB3 requires numpy observations, so text spaces
    # fail its check; the curriculum env below is the SB3-facing one
    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker")
    with pytest.raises(AssertionError, match="numpy array"):
        sb3_checker.check_env(SingleRoleEnv(aec(), role="challenger_0"))


# ------------------------------------------------------------------- curriculum example
def test_generator_answers_are_exact():
    rng = np.random.default_rng(0)
    for family, level in ex.ACTIONS:
        for _ in range(20):
            task = ex.generate(family, level, rng)
            nums = [int(n) for n in re.findall(r"\d+", task.question)]
            if family == "addition":
                assert task.answer == nums[0] + nums[1]
            elif family == "multiplication":
                assert task.answer == nums[0] * nums[1]
            elif family == "modular":
                assert task.answer == nums[0] % nums[1]
            else:
                a, b, c = nums
                assert a * task.answer + b == c
            lengths = {len(str(n)) for n in nums}
            assert (lengths == {1}) == (level == 1), task


def test_curriculum_rewards_are_the_standard_challenger_reward():
    env = ex.ChallengerCurriculumEnv(seeds=[MATH_SEED])
    env.reset(seed=0)
    for action, (family, level) in enumerate(ex.ACTIONS):
        obs, reward, terminated, _, info = env.step(action)
        assert terminated and obs.shape == (1,)
        assert (info["family"], info["level"]) == (family, level)
        assert reward == pytest.approx(ex.expected_reward(family, level)), info
        assert info["accepted"] == (level > 1)
        env.reset()
    means = [ex.expected_reward(*a) for a in ex.ACTIONS]
    # 4 rejected at 11/27, 6 solved at 16/27, 6 failed at 25/27
    assert np.mean(means) == pytest.approx((4 * 11 + 6 * 16 + 6 * 25) / (27 * 16))
    assert max(means) == pytest.approx(25 / 27)


def test_sb3_check_env_passes_on_the_curriculum_env():
    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker")
    sb3_checker.check_env(ex.ChallengerCurriculumEnv(seeds=[MATH_SEED]))


@pytest.mark.slow
def test_ppo_learns_a_curriculum_better_than_random():
    pytest.importorskip("stable_baselines3")
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = ex.train(total_timesteps=1024, seed=0)
    finally:
        torch.set_num_threads(threads)
    greedy = ex.evaluate(ex.ppo_policy(model), episodes=100, seed=1000)
    sampled = ex.evaluate(
        lambda obs, rng: int(model.predict(obs, deterministic=False)[0]), episodes=100, seed=1000
    )
    uniform = ex.evaluate(ex.random_policy, episodes=100, seed=1000)
    # expected: optimal 0.926, uniform 0.671 (see the example's docstring)
    assert uniform["mean"] == pytest.approx(0.671, abs=0.05)
    assert greedy["mean"] >= uniform["mean"] + 0.15
    assert sampled["mean"] >= uniform["mean"] + 0.1

"""Stable-Baselines3's PPO learns a curriculum policy for the SAGE Challenger (docs/guide/sb3.md).

The Challenger's job is to propose tasks that the critic accepts and the solver cannot yet
solve: its reward is ``(q + d + f) / 3`` when the question passes the quality gate
(``q >= alpha``) and ``(q + 0 + f) / 3`` when it does not (``docs/reference/rewards.md``). Here the
Challenger does not write free text. It picks one of 16 *task kinds* — a family of
procedurally generated arithmetic tasks and a difficulty level — and the example turns the
pick into Challenger text::

    <question>What is 4821 * 377?</question>
    <answer>1817517</answer>

The answer is computed exactly by the generator, so the environment's math verifier scores
the solver against a correct reference. The round is the unchanged SAGE round of
``sage_env``; only the opponents are scripted:

- **critic** (``review_question``): a "too trivial" rule — a question whose numbers all have a
  single digit gets ``<score>3</score>`` (q = 2/9, rejected), any other ``<score>8</score>``
  (q = 7/9, accepted). Plans get 8 (the scripted player).
- **solver** (``probe``): it knows addition at every level, multiplication up to level 2,
  modular arithmetic up to level 3 and linear equations at level 1 only
  (:data:`SOLVER_SKILL`). On a task it can do it answers the task's true answer (read from
  ``env.unwrapped.current_task``), otherwise a wrong one, deterministically. On pool tasks
  (``solve`` phase) it is the scripted player; that does not touch the Challenger's reward.

The generator's answer is exact, so a task the solver fails is hard, not wrong: the example
plays under the paper's difficulty rule (``RewardConfig.difficulty_rule =
"inverse_accuracy"``, d = 1 - r). Under the default ``"learnability"`` a task that no probe
solves earns d = 0 (its stored answer could be wrong), and against this all-or-nothing
solver every accepted task would earn the same.

So each action's reward is fixed (:func:`expected_reward`): a level-1 task is rejected,
``(2/9 + 0 + 1) / 3 = 0.407``; an accepted task the solver solves earns ``(7/9 + 0 + 1) / 3 =
0.593``; an accepted task it fails earns ``(7/9 + 1 + 1) / 3 = 0.926``. Six of the 16 actions
are optimal; a uniform random policy averages 0.671. The observation is a constant (a
1-vector of ones): against a fixed solver the curriculum is a 16-armed bandit, and PPO's
policy is a state-independent distribution over task kinds. Against a learning solver one
would observe, e.g., running solve rates per family.

Run:  python examples/sb3_curriculum.py --timesteps 1024 --seed 0
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

import sage_env
from sage_env import RewardConfig
from sage_env.interactive.play import PLAYERS
from sage_env.interactive.wrappers import SingleRoleEnv
from sage_env.rewards import challenger_reward, quality_gate

FAMILIES = ("addition", "multiplication", "modular", "linear")
LEVELS = (1, 2, 3, 4)
ACTIONS = tuple((family, level) for family in FAMILIES for level in LEVELS)
"""Discrete action ``i`` proposes a task of kind ``ACTIONS[i] = (family, level)``."""

SOLVER_SKILL = {"addition": 4, "multiplication": 2, "modular": 3, "linear": 1}
"""Highest level of each family the scripted solver answers correctly."""
TRIVIAL_SCORE, DEFAULT_SCORE = 3, 8
"""Scripted critic: score of a question whose numbers all have one digit, and of any other."""


# ----------------------------------------------------------------------- task generator
@dataclass(frozen=True)
class ArithmeticTask:
    """One generated task: its kind, its question and its exact integer answer."""

    family: str
    level: int
    question: str
    answer: int

    def challenger_text(self) -> str:
        """The Challenger action proposing this task (``docs/reference/rewards.md``)."""
        return f"<question>{self.question}</question>\n<answer>{self.answer}</answer>"


def _digits(rng: np.random.Generator, n: int, low: int | None = None) -> int:
    """A uniformly random integer with exactly ``n`` digits (at least ``low``)."""
    lo = max(10 ** (n - 1), low or 0)
    return int(rng.integers(lo, 10**n))


def generate(family: str, level: int, rng: np.random.Generator) -> ArithmeticTask:
    """Generate a task of ``family`` at ``level`` (1..4) with its exact answer.

    Level 1 uses one-digit numbers only; higher levels use more digits:
    addition and multiplication of two ``level``-digit numbers, the remainder of a
    ``(2 level - 1)``-digit number divided by a ``level``-digit one, and ``a x + b = c`` with
    ``level``-digit ``a``, ``b`` and solution ``x``.

    Raises:
        ValueError: on an unknown family or a level outside 1..4.
    """
    if level not in LEVELS:
        raise ValueError(f"level must be in {LEVELS}, got {level}")
    if family == "addition":
        a, b = _digits(rng, level), _digits(rng, level)
        return ArithmeticTask(family, level, f"What is {a} + {b}?", a + b)
    if family == "multiplication":
        a, b = _digits(rng, level, 2), _digits(rng, level, 2)
        return ArithmeticTask(family, level, f"What is {a} * {b}?", a * b)
    if family == "modular":
        a, m = _digits(rng, 2 * level - 1), _digits(rng, level, 2)
        return ArithmeticTask(
            family, level, f"What is the remainder when {a} is divided by {m}?", a % m
        )
    if family == "linear":
        if level == 1:  # keep c one-digit too: a x + b <= 3 * 2 + 3
            a, x, b = int(rng.integers(2, 4)), int(rng.integers(1, 3)), int(rng.integers(1, 4))
        else:
            a, x, b = _digits(rng, level), _digits(rng, level), _digits(rng, level)
        return ArithmeticTask(family, level, f"Solve for x: {a}x + {b} = {a * x + b}.", x)
    raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")


# ------------------------------------------------------------------ scripted opponents
def critic_player(agent: str, obs: dict, info: dict, env: Any) -> str:
    """Score a question 3 when all its numbers have one digit ("too trivial"), else 8."""
    if info.get("phase") == "review_question":
        task = env.unwrapped.current_task
        numbers = re.findall(r"\d+", task.prompt if task is not None else obs["user"])
        score = TRIVIAL_SCORE if numbers and all(len(n) == 1 for n in numbers) else DEFAULT_SCORE
        return f"<score>{score}</score> Checked the question."
    return PLAYERS["scripted"](agent, obs, info, env)


def solver_solves(family: str, level: int) -> bool:
    """Whether the scripted solver answers a task of this kind correctly."""
    return level <= SOLVER_SKILL[family]


PAPER_REWARDS = RewardConfig(difficulty_rule="inverse_accuracy")
"""The example's rewards: the paper's, d = 1 - r (see the module docstring)."""


def expected_reward(family: str, level: int, cfg: RewardConfig | None = None) -> float:
    """The Challenger's reward for a (new) task of this kind, by docs/reference/rewards.md."""
    cfg = cfg or PAPER_REWARDS
    q = (TRIVIAL_SCORE - 1) / 9 if level == 1 else (DEFAULT_SCORE - 1) / 9
    if not quality_gate(q, cfg):  # rejected: the difficulty term is dropped
        return challenger_reward(q, None, 1.0, cfg)[0]
    d = 0.0 if solver_solves(family, level) else 1.0
    return challenger_reward(q, d, 1.0, cfg)[0]


# ---------------------------------------------------------------------- the curriculum env
class ChallengerCurriculumEnv(gymnasium.Env):
    """The SAGE Challenger as a discrete curriculum choice (one step = one round).

    Action: ``Discrete(16)``, index into :data:`ACTIONS` (task family, difficulty level).
    Observation: ``Box(0, 1, (1,), float32)``, always ``[1.0]`` (a bandit; see module doc).
    Reward: the environment's Challenger reward for the proposed task, in [0, 1].
    Every episode is one round, one step long (``terminated=True`` after the step).
    ``info`` holds ``family``, ``level``, ``question``, ``answer``, ``accepted``, ``terms``
    and the environment's ``last`` record.

    Args:
        solver_samples: k, the solver's attempts per new question (difficulty probes).
        seeds: Reference tasks for the round (default: the bundled math seeds).
        pool_max_generated: Cap on generated tasks kept in the pool (bounded memory and
            duplicate checks over long runs).
        render_mode: ``None`` or ``"ansi"`` (``render()`` returns the round transcript).
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        solver_samples: int = 2,
        seeds: list[sage_env.Task] | None = None,
        pool_max_generated: int | None = 256,
        render_mode: str | None = None,
    ) -> None:
        if seeds is None:
            seeds = [t for t in sage_env.load_seeds() if t.domain == "math"]
        aec = sage_env.env(
            domains=("math",),
            rewards=PAPER_REWARDS,
            solver_samples=solver_samples,
            pool_max_generated=pool_max_generated,
            seeds=seeds,
            render_mode=render_mode,
        )
        self.current: ArithmeticTask | None = None
        players = {
            "critic_0": critic_player,
            "solver_0": self._solver_player,
            "planner_0": PLAYERS["scripted"],
        }
        self.role_env = SingleRoleEnv(aec, role="challenger_0", players=players)
        self.action_space = spaces.Discrete(len(ACTIONS))
        self.observation_space = spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.render_mode = render_mode

    def _solver_player(self, agent: str, obs: dict, info: dict, env: Any) -> str:
        task = env.unwrapped.current_task
        spec = self.current
        if info.get("phase") == "probe" and spec is not None and task.prompt == spec.question:
            answer = spec.answer if solver_solves(spec.family, spec.level) else spec.answer + 1
            return f"The answer is \\boxed{{{answer}}}."
        return PLAYERS["scripted"](agent, obs, info, env)

    def _obs(self) -> np.ndarray:
        return np.ones(1, dtype=np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict | None = None
    ) -> tuple[np.ndarray, dict]:
        """Start a round; ``seed`` seeds the task generator and the round's RNG."""
        super().reset(seed=seed)
        self.current = None
        _, info = self.role_env.reset(seed=seed)
        return self._obs(), {"reference_task_id": info["task_id"]}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Propose a task of kind ``ACTIONS[action]``; play the round; return its reward."""
        family, level = ACTIONS[int(action)]
        self.current = generate(family, level, self.np_random)
        _, reward, terminated, truncated, info = self.role_env.step(self.current.challenger_text())
        last = info["last"]
        out = {
            "family": family,
            "level": level,
            "question": self.current.question,
            "answer": self.current.answer,
            "accepted": bool(last.decision and last.decision.accepted),
            "terms": last.terms,
            "last": last,
        }
        return self._obs(), reward, terminated, truncated, out

    def render(self) -> str | None:
        """The round's transcript (``render_mode="ansi"``)."""
        return self.role_env.render()

    def close(self) -> None:
        """Close the underlying environment."""
        self.role_env.close()


# ------------------------------------------------------------------------- train / evaluate
def train(total_timesteps: int = 1024, seed: int = 0, verbose: int = 0, **env_kwargs: Any):
    """Train SB3's PPO on a fresh :class:`ChallengerCurriculumEnv`; return the model.

    A small MLP policy (one hidden layer of 16 units); ``n_steps=128`` rounds per update.
    """
    from stable_baselines3 import PPO

    env = ChallengerCurriculumEnv(**env_kwargs)
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=128,
        batch_size=64,
        n_epochs=10,
        learning_rate=3e-3,
        ent_coef=0.0,
        policy_kwargs={"net_arch": {"pi": [16], "vf": [16]}},
        seed=seed,
        verbose=verbose,
        device="cpu",
    )
    model.learn(total_timesteps=total_timesteps)
    return model


def evaluate(policy: Any, episodes: int = 100, seed: int = 0, **env_kwargs: Any) -> dict:
    """Mean Challenger reward of ``policy`` over ``episodes`` rounds on a fresh env.

    ``policy(obs, rng) -> action``; the env is reset with ``seed`` once, then continues.

    Returns:
        ``{"mean": float, "actions": counts per action (list of 16 ints)}``.
    """
    env = ChallengerCurriculumEnv(**env_kwargs)
    rng = np.random.default_rng(seed)
    rewards, counts = [], [0] * len(ACTIONS)
    obs, _ = env.reset(seed=seed)
    for _ in range(episodes):
        action = int(policy(obs, rng))
        counts[action] += 1
        obs, reward, terminated, truncated, _ = env.step(action)
        rewards.append(reward)
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    return {"mean": float(np.mean(rewards)), "actions": counts}


def random_policy(obs: np.ndarray, rng: np.random.Generator) -> int:
    """Uniform over the 16 task kinds."""
    return int(rng.integers(len(ACTIONS)))


def ppo_policy(model: Any):
    """The greedy (deterministic) policy of a trained PPO model."""
    return lambda obs, rng: int(model.predict(obs, deterministic=True)[0])


def main() -> None:
    """Train PPO, then compare it with a uniform random policy."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timesteps", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--episodes", type=int, default=100)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    print("expected Challenger reward per task kind (docs/reference/rewards.md):")
    for i, (family, level) in enumerate(ACTIONS):
        print(f"  {i:2d} {family:<15} level {level}: {expected_reward(family, level):.3f}")
    model = train(args.timesteps, seed=args.seed)
    ppo = evaluate(ppo_policy(model), args.episodes, seed=1000 + args.seed)
    rnd = evaluate(random_policy, args.episodes, seed=1000 + args.seed)
    choice = ACTIONS[int(np.argmax(ppo["actions"]))]
    print(f"PPO    mean reward {ppo['mean']:.3f}  (mostly proposes {choice[0]}, level {choice[1]})")
    print(f"random mean reward {rnd['mean']:.3f}")


if __name__ == "__main__":
    main()

"""The layers talk through contracts (issue 36, item 4).

- the critic gate alpha moves only through ``raw_env.set_gate`` (no learner writes into an
  environment's config);
- the action is a ``str`` or a :class:`sage_env.ScoredReply` with the documented effect;
- scoring is plain functions of values, called without an environment;
- model output is parsed in one package, :mod:`sage_env.parsing`.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

import sage_env
from sage_env import EnvConfig, RewardConfig
from tests.scripted import MATH_SEED, play_round

ROOT = Path(__file__).resolve().parent.parent


def small_env(**rewards):
    cfg = EnvConfig(domains=("math",), solver_samples=2, rewards=RewardConfig(**rewards))
    return sage_env.env(cfg, seeds=[MATH_SEED])


# ------------------------------------------------------------------------ the critic gate


def test_set_gate_moves_the_gate_and_leaves_a_shared_config_alone():
    cfg = EnvConfig(domains=("math",), solver_samples=2)
    a = sage_env.env(cfg, seeds=[MATH_SEED])
    b = sage_env.env(cfg, seeds=[MATH_SEED])
    assert a.unwrapped.gate_alpha == 0.7
    a.set_gate(0.25)  # through the order-enforcing wrapper too
    assert a.unwrapped.gate_alpha == 0.25
    assert a.unwrapped.config.rewards.alpha == 0.25
    assert cfg.rewards.alpha == 0.7 and b.unwrapped.gate_alpha == 0.7
    a.unwrapped.set_gate(1)  # an int is a number
    assert a.unwrapped.gate_alpha == 1.0 and isinstance(a.unwrapped.gate_alpha, float)
    a.unwrapped.set_gate(0.0)
    assert a.unwrapped.gate_alpha == 0.0


@pytest.mark.parametrize(
    "bad", [-0.01, 1.5, float("nan"), float("inf"), -float("inf"), True, "0.5", None, [0.5]]
)
def test_set_gate_refuses_anything_but_a_number_in_0_1(bad):
    env = small_env()
    with pytest.raises(ValueError, match=r"critic gate alpha must be a number in \[0, 1\]"):
        env.unwrapped.set_gate(bad)
    assert env.unwrapped.gate_alpha == 0.7  # unchanged


def _question_review(env, reply):
    """Play one round with a q of 4 -> 1/3; return the question review's ``last``."""

    def play(agent, phase, obs, n):
        if phase == "challenge":
            return "<question>What is 7*6?</question>\n<answer>42</answer>"
        if phase in ("review_question", "review_plan"):
            return reply
        if phase == "plan":
            return "<plan>\n1. Read.\n2. Compute.\n</plan>"
        return "\\boxed{42}"

    records = play_round(env, play)
    return next(r[3] for r in records if r[1] == "challenge")


def test_the_gate_set_through_the_public_method_decides_the_next_round():
    reply = "<score>4</score> The question is plain but fine."
    env = small_env()
    challenger = _question_review(env, reply)
    assert challenger["accepted"] is False  # q = 1/3 < 0.7
    env.unwrapped.set_gate(0.3)
    challenger = _question_review(env, reply)
    assert challenger["accepted"] is True  # q = 1/3 >= 0.3


def _env_names(tree: ast.AST) -> set[str]:
    """Names that hold an environment: named ``*env*``, or bound from an expression that
    mentions an environment (``u = e.unwrapped``, ``for e in envs``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        pairs = []
        if isinstance(node, ast.Assign):
            pairs = [(t, node.value) for t in node.targets]
        elif isinstance(node, (ast.For, ast.comprehension)):
            pairs = [(node.target, node.iter)]
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            pairs = [(node.optional_vars, node.context_expr)]
        for target, value in pairs:
            source = ast.unparse(value).lower()
            if "env" in source or "unwrapped" in source:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        if isinstance(node, ast.Name) and "env" in node.id.lower():
            names.add(node.id)
        if isinstance(node, ast.arg) and "env" in node.arg.lower():
            names.add(node.arg)
    return names


def _assignments_into_config(path: Path) -> list[str]:
    """Assignments in ``path`` into an environment's ``config`` (or through ``unwrapped``):
    ``env.config = ...``, ``u.config = ...`` after ``u = e.unwrapped``,
    ``e.unwrapped.config.rewards.alpha = ...``, ``setattr(env.config, ...)``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    envs = _env_names(tree)
    found = []
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("setattr", "delattr")
            and node.args
        ):
            targets = [ast.Attribute(value=node.args[0], attr="?", ctx=ast.Store())]
        for target in targets:
            chain, attrs = target, []
            while isinstance(chain, (ast.Attribute, ast.Subscript)):
                if isinstance(chain, ast.Attribute):
                    attrs.append(chain.attr)
                chain = chain.value
            into_env = isinstance(chain, ast.Name) and chain.id in envs
            if ("config" in attrs and into_env) or "unwrapped" in attrs:
                found.append(f"{path.name}:{node.lineno}")
    return sorted(set(found))


def test_the_config_assignment_finder_finds_the_old_back_door(tmp_path):
    path = tmp_path / "back_door.py"
    path.write_text(
        "def f(envs, alpha):\n"
        "    for e in envs:\n"
        "        u = e.unwrapped\n"
        "        u.config = replace(u.config, alpha=alpha)\n"
        "        e.unwrapped.config.rewards.alpha = alpha\n"
        "        setattr(u.config, 'seed', 1)\n"
        "        env.config.seed = 2\n"
        "        self.config = 1\n"
        "        model.config.use_cache = False\n"
    )
    assert _assignments_into_config(path) == [
        "back_door.py:4",
        "back_door.py:5",
        "back_door.py:6",
        "back_door.py:7",
    ]


def test_no_learner_code_assigns_into_an_environment_config():
    found = [
        f"{p.relative_to(ROOT)}: {hit}"
        for p in sorted((ROOT / "learners").rglob("*.py"))
        for hit in _assignments_into_config(p)
    ]
    assert found == []


def test_the_calibrated_gate_reaches_the_env_through_set_gate(monkeypatch):
    pytest.importorskip("torch")
    from learners.training.monitors import CriticProbe
    from tests.test_critic_estimate import Judge, _probe_cfg

    calls = []
    original = sage_env.raw_env.set_gate

    def spy(self, alpha):
        calls.append(alpha)
        original(self, alpha)

    monkeypatch.setattr(sage_env.raw_env, "set_gate", spy)
    cfg = _probe_cfg()
    probe = CriticProbe(cfg, sage_env.load_seeds())
    envs = [sage_env.env(cfg.env), sage_env.env(cfg.env)]
    report = probe(Judge(probe), envs)
    assert calls == [report["gate/alpha"]] * 2
    assert report["gate/alpha"] == pytest.approx(7 / 9)
    assert all(e.unwrapped.gate_alpha == pytest.approx(7 / 9) for e in envs)
    assert cfg.env.rewards.alpha == 0.7  # the run's config is not written into

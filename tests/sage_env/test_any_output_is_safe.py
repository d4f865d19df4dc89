"""Property-based tests: any model output is safe (never raises, rewards in [0, 1])."""

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sage_env
from sage_env import EnvConfig
from sage_env.text.parsing import (
    critic_format_score,
    extract_tag,
    parse_challenger,
    parse_critic_score,
    parse_plan,
    plan_format_score,
)
from tests.scripted import CODE_SEED, MATH_SEED

FRAGMENTS = [
    "<score>",
    "</score>",
    "<SCORE>",
    "10",
    "7/10",
    "11",
    "0.5",
    "Score: 10/10",
    "<question>",
    "</question>",
    "<answer>",
    "</answer>",
    "<tests>",
    "</tests>",
    "assert f(1) == 1",
    "<plan>",
    "</plan>",
    "1.",
    "2)",
    "Step 3:",
    "\\boxed{",
    "}",
    "{",
    "```python",
    "```",
    "def f(x):\n    return x",
    "\n",
    "😀",
    "\x00",
    "\ud800",
    "é",
    "𝔘",
]
any_char = st.characters(codec=None, categories=None)
model_text = st.one_of(
    st.text(alphabet=any_char, max_size=300),
    st.lists(
        st.one_of(st.sampled_from(FRAGMENTS), st.text(alphabet=any_char, max_size=20)), max_size=40
    ).map("".join),
)


@given(model_text)
def test_parsers_never_raise_and_stay_in_range(text):
    score = parse_critic_score(text)
    assert score is None or 1.0 <= score <= 10.0
    assert critic_format_score(text) in (0.0, 0.25, 0.375, 0.5, 0.625, 0.75, 1.0)
    assert plan_format_score(text) in (0.0, 0.5, 1.0)
    plan = parse_plan(text)
    assert plan is None or plan == extract_tag(text, "plan")
    for domain in ("math", "code"):
        out = parse_challenger(text, domain)
        assert out.format_score in (0.0, 0.5, 1.0)
        assert out.valid == (out.format_score == 1.0)


@given(st.text(alphabet=any_char, max_size=50), st.integers(1, 10))
def test_score_outside_the_tag_is_never_read(prefix, n):
    assert parse_critic_score(f"{prefix} Score: {n}/10 ... {n} out of 10") is None or (
        "<score>" in prefix.lower()
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_actions_give_finite_rewards_in_unit_interval(data):
    env = sage_env.env(
        EnvConfig(solver_samples=2),
        seeds=[MATH_SEED, CODE_SEED],
        render_mode="ansi",
        code_timeout_s=5.0,
    )
    env.reset(seed=data.draw(st.integers(0, 3)))
    for _agent in env.agent_iter(max_iter=50):
        _, reward, term, trunc, info = env.last()
        assert math.isfinite(reward) and 0.0 <= reward <= 1.0
        env.step(None if term or trunc else data.draw(model_text))
    assert isinstance(env.render(), str)


def test_megabyte_outputs_are_safe():
    huge = [
        "x" * (1 << 20),
        "<score>" * 150_000,
        "{" * (1 << 20),
        "\\boxed{" * 100_000,
        "😀" * 300_000,
        "<question>" + "a" * (1 << 20) + "</question><answer>1</answer>",
    ]
    for text in huge:
        assert parse_critic_score(text) is None
        assert not parse_challenger(text, "math").valid
        env = sage_env.env(EnvConfig(solver_samples=1), seeds=[MATH_SEED, CODE_SEED])
        env.reset(seed=0)
        for _agent in env.agent_iter(max_iter=20):
            _, reward, term, trunc, _ = env.last()
            assert 0.0 <= reward <= 1.0
            env.step(None if term or trunc else text)

"""The layers talk through contracts (issue 36, item 4).

- the critic gate alpha moves only through ``raw_env.set_gate`` (no learner writes into an
  environment's config);
- the action is a ``str`` or a :class:`sage_env.ScoredReply` with the documented effect;
- scoring is plain functions of values, called without an environment;
- model output is parsed in one package, :mod:`sage_env.text.parsing`.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

import sage_env
from sage_env import EnvConfig, RewardConfig
from tests.scripted import MATH_SEED, play_round

ROOT = Path(__file__).resolve().parents[2]


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
    from tests.sage_env.test_critic_expected_score import Judge, _probe_cfg

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


# ---------------------------------------------------------------------- the action contract


def onehot(score):
    probs = [0.0] * 10
    probs[score - 1] = 1.0
    return probs


def test_scored_reply_is_exported_at_the_top_and_is_the_parsing_one():
    from sage_env.text import parsing

    assert sage_env.ScoredReply is parsing.ScoredReply
    assert "ScoredReply" in sage_env.__all__
    reply = sage_env.ScoredReply("<score>2</score> Weak.", onehot(9))
    assert isinstance(reply, str) and reply == "<score>2</score> Weak."
    assert reply.score_probs == tuple(onehot(9))


def test_read_action_is_the_documented_reading():
    from sage_env.actions import read_action

    plain = read_action("abc", 10)
    assert (plain.text, plain.score_probs, plain.chars, plain.cut) == ("abc", None, 3, False)
    assert type(plain.text) is str
    scored = read_action(sage_env.ScoredReply("x" * 12, onehot(3)), 10)
    assert scored.text == "x" * 10 and type(scored.text) is str
    assert scored.score_probs == tuple(onehot(3)) and scored.chars == 12 and scored.cut
    assert read_action(None, 10).text == "" and read_action(42, 10).text == "42"


def _review_q(reply, estimate="expected"):
    """Play a round whose question review is ``reply``; return (critic, challenger) lasts."""
    env = small_env(critic_score_estimate=estimate)
    records = []

    def play(agent, phase, obs, n):
        records.append(phase)
        if phase == "challenge":
            return "<question>What is 7*6?</question>\n<answer>42</answer>"
        if phase == "review_question":
            return reply
        if phase == "review_plan":
            return "<score>4</score> The plan is fine."
        if phase == "plan":
            return "<plan>\n1. Read.\n2. Compute.\n</plan>"
        return "\\boxed{42}"

    rows = play_round(env, play)
    critic = next(r for r in rows if r[1] == "review_question")
    challenger = next(r for r in rows if r[1] == "challenge")
    return critic, challenger


SAMPLED_REPLY = "<score>2</score> The question is weak."


def test_a_plain_str_review_gates_on_its_sampled_score():
    (_, _, reward, critic), (_, _, _, challenger) = _review_q(SAMPLED_REPLY)
    assert critic["score_estimate"] == "sampled"
    assert critic["q"] == pytest.approx(1 / 9) and critic["raw_score"] == 2.0
    assert challenger["accepted"] is False
    assert reward == 1.0  # the critic's own reward: its reply's format


def test_a_scored_reply_gates_on_its_expected_score_and_pays_the_critic_its_format():
    reply = sage_env.ScoredReply(SAMPLED_REPLY, onehot(9))
    (_, _, reward, critic), (_, _, _, challenger) = _review_q(reply)
    assert critic["score_estimate"] == "expected"
    assert critic["expected_raw_score"] == 9.0 and critic["q"] == pytest.approx(8 / 9)
    assert critic["sampled_score"] == pytest.approx(1 / 9) and critic["raw_score"] == 2.0
    assert challenger["accepted"] is True
    assert reward == 1.0  # the same as for the plain str: the distribution never pays it


def test_under_the_paper_default_a_distribution_is_ignored():
    reply = sage_env.ScoredReply(SAMPLED_REPLY, onehot(9))
    (_, _, _, critic), (_, _, _, challenger) = _review_q(reply, estimate="sampled")
    assert "score_estimate" not in critic and critic["q"] == pytest.approx(1 / 9)
    assert challenger["accepted"] is False


def test_a_distribution_that_does_not_sum_to_one_is_renormalised():
    reply = sage_env.ScoredReply(SAMPLED_REPLY, [0.0] * 7 + [0.2, 0.0, 0.2])  # 8 and 10
    (_, _, _, critic), _ = _review_q(reply)
    assert critic["score_estimate"] == "expected" and critic["expected_raw_score"] == 9.0


def test_huge_finite_weights_are_renormalised_without_overflow():
    reply = sage_env.ScoredReply(SAMPLED_REPLY, [1e308] * 10)
    (_, _, _, critic), _ = _review_q(reply)
    assert critic["score_estimate"] == "expected" and critic["expected_raw_score"] == 5.5


@pytest.mark.parametrize(
    "probs",
    [
        [0.0, 1.0],  # too short
        onehot(9) + [0.0],  # too long
        [0.1] * 100_000,  # huge
        [-0.5] + [0.0] * 8 + [1.5],  # negative
        [float("nan")] + [0.1] * 9,  # NaN
        [float("inf")] + [0.0] * 9,  # infinite
        [0.0] * 10,  # no mass
        ["a"] * 10,  # not numbers
        ["0.1"] * 10,  # numbers written as strings
        "0123456789",  # a string
        {i: 0.1 for i in range(10)},  # a mapping
        5,  # not iterable: kept as None
    ],
)
def test_a_malformed_distribution_falls_back_to_the_sampled_score(probs):
    (_, _, reward, critic), (_, _, _, challenger) = _review_q(
        sage_env.ScoredReply(SAMPLED_REPLY, probs)
    )
    assert critic["score_estimate"] == "sampled"
    assert critic["q"] == pytest.approx(1 / 9) and "expected_raw_score" not in critic
    assert challenger["accepted"] is False and reward == 1.0
    for value in (reward, critic["q"]):
        assert math.isfinite(value)


def test_a_distribution_on_a_turn_that_is_no_review_is_ignored():
    def scored(agent, phase, obs, n):
        text = _scripted(phase)
        return text if phase.startswith("review") else sage_env.ScoredReply(text, onehot(1))

    plain = play_round(small_env(critic_score_estimate="expected"), lambda *a: _scripted(a[1]))
    other = play_round(small_env(critic_score_estimate="expected"), scored)
    assert [r[:3] for r in plain] == [r[:3] for r in other]
    assert len(plain) == 8  # challenge, review, 2 probes, plan, review, 2 solves


def _scripted(phase):
    return {
        "challenge": "<question>What is 7*6?</question>\n<answer>42</answer>",
        "review_question": "<score>9</score> The question is clear.",
        "review_plan": "<score>9</score> The plan is clear.",
        "plan": "<plan>\n1. Read.\n2. Compute.\n</plan>",
    }.get(phase, "\\boxed{42}")


# ------------------------------------------------------- scoring without an environment


@pytest.fixture(scope="module")
def verifiers():
    from sage_env.verifiers import CodeVerifier, MathVerifier

    math_v, code_v = MathVerifier(workers=1), CodeVerifier()
    yield math_v, code_v
    math_v.close()


def test_verify_is_a_function_of_the_task_the_text_the_config_and_the_verifiers(verifiers):
    from sage_env import env_scoring
    from tests.scripted import CODE_SEED

    math_v, code_v = verifiers
    soft, binary = EnvConfig(), EnvConfig(rewards=RewardConfig(format_rule="binary"))
    right = env_scoring.verify(MATH_SEED, "so \\boxed{5}", soft, math_v, code_v)
    assert right[:2] == (1.0, 1.0) and right[2]["status"] == "passed"
    wrong = env_scoring.verify(MATH_SEED, "\\boxed{6}", soft, math_v, code_v)
    assert wrong[:2] == (0.0, 1.0)
    assert env_scoring.verify(MATH_SEED, "5", soft, math_v, code_v) == (
        0.0,
        0.0,
        # the verdict's format line says why the format score is 0 (issue 51)
        {"status": "invalid", "reason": "no \\boxed{} answer", "format": "no \\boxed{} answer"},
    )
    good = "```python\ndef inc(x):\n    return x + 1\n```"
    assert env_scoring.verify(CODE_SEED, good, soft, math_v, code_v)[:2] == (1.0, 1.0)
    other = "```python\ndef add_one(x):\n    return x + 1\n```"  # code, not the asked function
    assert env_scoring.verify(CODE_SEED, other, soft, math_v, code_v)[1] == 0.5
    assert env_scoring.verify(CODE_SEED, other, binary, math_v, code_v)[1] == 0.0
    assert env_scoring.verify(CODE_SEED, "no code here", soft, math_v, code_v) == (
        0.0,
        0.0,
        {"status": "invalid", "reason": "no Python code found", "format": "no Python code found"},
    )
    assert env_scoring.format_score(soft, 0.5, 0.0) == 0.5
    assert env_scoring.format_score(binary, 0.5, 0.0) == 0.0


def test_the_env_methods_are_the_functions_with_the_envs_values(verifiers):
    from sage_env import env_scoring
    from tests.scripted import CODE_SEED

    math_v, code_v = verifiers
    env = sage_env.env(
        EnvConfig(domains=("math",)),
        seeds=[MATH_SEED],
        math_verifier=math_v,
        code_verifier=code_v,
    ).unwrapped
    for task, text in [(MATH_SEED, "\\boxed{5}"), (CODE_SEED, "def inc(x): return x")]:
        assert env.verify(task, text) == env_scoring.verify(task, text, env.config, math_v, code_v)
    proposal = dataclasses_replace(MATH_SEED, answer="five apples")
    assert env.check_verifier(proposal) == env_scoring.check_verifier(
        proposal, env.config, math_v, code_v
    )


def dataclasses_replace(task, **kw):
    import dataclasses

    return dataclasses.replace(task, **kw)


def test_check_verifier_without_an_environment(verifiers):
    from sage_env import env_scoring
    from tests.scripted import CODE_SEED

    math_v, code_v = verifiers
    cfg = EnvConfig()
    ok = env_scoring.check_verifier(MATH_SEED, cfg, math_v, code_v)
    assert ok == {"status": "passed", "reason": "answer parses to a math value"}
    words = dataclasses_replace(MATH_SEED, answer="five apples")
    assert env_scoring.check_verifier(words, cfg, math_v, code_v)["status"] == "failed"
    unchecked = dataclasses_replace(CODE_SEED, reference_solution=None)
    assert env_scoring.check_verifier(unchecked, cfg, math_v, code_v)["status"] == "failed"
    lax = EnvConfig(require_code_solution=False)
    assert env_scoring.check_verifier(unchecked, lax, math_v, code_v)["status"] == "passed"
    solved = dataclasses_replace(CODE_SEED, reference_solution="def inc(x):\n    return x + 1")
    assert env_scoring.check_verifier(solved, cfg, math_v, code_v) == {
        "status": "passed",
        "reason": "reference solution passes every test",
    }


def test_verify_exec_without_an_environment():
    from sage_env import env_scoring
    from sage_env.tasks import exec_tasks

    task = exec_tasks.make_task(
        "deduction", "def f(a):\n    return a * 2", ["3"], ["6"], task_id="x/0"
    )
    cfg = EnvConfig()
    assert env_scoring.verify_exec(task, "```output\n6\n```", cfg)[:2] == (1.0, 1.0)
    assert env_scoring.verify_exec(task, "```output\n7\n```", cfg)[:2] == (0.0, 1.0)
    assert env_scoring.verify_exec(task, "six", cfg)[:2] == (0.0, 0.0)
    with_math = env_scoring.verify(task, "```output\n6\n```", cfg, None, None)
    assert with_math == env_scoring.verify_exec(task, "```output\n6\n```", cfg)


def test_no_scoring_function_takes_an_environment():
    import inspect

    from sage_env import env_scoring

    for name in ("verify", "verify_exec", "check_verifier", "ground_math_task", "format_score"):
        params = inspect.signature(getattr(env_scoring, name)).parameters
        assert "env" not in params, name


def test_a_string_or_a_mapping_is_no_distribution():
    from sage_env.text.parsing import expected_critic_score

    assert sage_env.ScoredReply("x", "0123456789").score_probs is None
    assert sage_env.ScoredReply("x", {i: 0.1 for i in range(10)}).score_probs is None
    assert expected_critic_score(["0.1"] * 10) is None
    assert expected_critic_score(tuple(onehot(4))) == 4.0


# ------------------------------------------------------------------ parsing has one home

_EXTRACTOR_MARKS = ("```", "boxed", "fbox", "<score", "<question", "<plan", "<answer", "def\\s")
"""What a regex that reads a model's reply looks for (fences, boxes, the roles' tags, defs)."""

_NOT_MODEL_OUTPUT = {  # files whose reply-like regexes read something else, and what
    "sage_env/protocols/demonstrations.py": (
        "strips \\boxed{} from the seed files' worked solutions"
    ),
}


def _reply_regexes(path: Path) -> list[str]:
    """String literals passed to a ``re`` function in ``path`` that look for reply syntax."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "re"
            and node.args
        ):
            pattern = node.args[0]
            text = ast.unparse(pattern)
            if any(mark in text for mark in _EXTRACTOR_MARKS):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_reply_is_parsed_outside_sage_env_parsing():
    found = []
    for path in sorted((ROOT / "sage_env").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel.startswith(("sage_env/text/parsing/", "sage_env/sandbox/")):
            continue  # the sandbox parses its own wire format, not a model's reply
        found += [hit for hit in _reply_regexes(path) if rel not in _NOT_MODEL_OUTPUT]
    for path in sorted((ROOT / "learners").rglob("*.py")):
        found += _reply_regexes(path)
    assert found == []
    # the scan sees them
    assert _reply_regexes(ROOT / "sage_env" / "protocols" / "demonstrations.py")
    assert _reply_regexes(ROOT / "sage_env" / "text" / "parsing" / "answers.py")


def test_the_extractors_live_in_parsing_only():
    from sage_env import verifiers
    from sage_env.tasks import exec_tasks
    from sage_env.text import parsing

    for name in ("extract_boxed", "extract_code"):
        assert not hasattr(verifiers, name)
        assert getattr(parsing, name).__module__ == "sage_env.text.parsing.answers"
    for name in ("fenced", "last_fenced"):
        assert not hasattr(exec_tasks, name)
        assert getattr(parsing, name).__module__ == "sage_env.text.parsing.answers"
    assert parsing.ScoredReply.__module__ == "sage_env.text.parsing.roles"
    assert not (ROOT / "sage_env" / "verifiers" / "answer_extraction.py").exists()

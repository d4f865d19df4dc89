"""Determinism checks that cannot be predicted, and that compare with exact types (issue 46).

One class each, as a policy would find them:

- outputs that differ only in type between runs (``1`` / ``True``, ``1`` / ``1.0``,
  ``0.0`` / ``-0.0``, nested): the old whole-list ``==`` let them through;
- a program tuned to the old fixed hash seeds 0..5 (a set order that agrees under exactly
  those): refused under seeds drawn per check;
- the draws are reproducible from the check generator's seed, and the environment's check
  generator never moves its task generator.

Run at the default isolation level and with ``SAGE_SANDBOX_ISOLATION=unshare``.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest

from sage_env.verifiers import answer_checks, executor, literals
from sage_env.verifiers.executor import RunVariant

#: Output pairs that are ``==`` in Python but not the same value with their types.
TYPE_ONLY_DIFFERENCES = [
    ("1", "True"),
    ("1", "1.0"),
    ("0.0", "-0.0"),
    ("[1]", "[True]"),
    ("{'a': (1,)}", "{'a': (1.0,)}"),
    ("(0, [2])", "(False, [2])"),
    ("{1: 'x'}", "{True: 'x'}"),
    ("frozenset({1.0})", "frozenset({1})"),
]


def _one_bit(first: str, other: str) -> str:
    """A program that returns ``first`` or ``other`` by the hash order of two strings."""
    return f"def f(a):\n    return {first} if next(iter({{'x1', 'y1'}})) == 'x1' else {other}\n"


class TestExactTypes:
    @pytest.mark.parametrize(("first", "other"), TYPE_ONLY_DIFFERENCES)
    def test_runs_that_differ_only_in_type_do_not_agree(self, first, other):
        a, b = eval(first), eval(other)  # noqa: S307 - our own literals
        assert a == b  # what the old whole-list comparison saw
        assert not literals.runs_agree([a], [b])
        assert not literals.runs_agree([0, a], [0, b])

    def test_equal_values_agree_whatever_their_order(self):
        assert literals.runs_agree([{"b": 2, "a": 1}, {3, 1}], [{"a": 1, "b": 2}, {1, 3}])
        assert literals.runs_agree([[1, (2.5, "x")]], [[1, (2.5, "x")]])
        assert not literals.runs_agree([1], [1, 1])
        assert not literals.runs_agree([[1, 2]], [[2, 1]])

    @pytest.mark.parametrize(("first", "other"), TYPE_ONLY_DIFFERENCES[:5])
    def test_a_program_whose_runs_differ_only_in_type_is_refused(self, first, other):
        # check generator seed 0 draws a hash seed that orders {'x1', 'y1'} unlike seed 0
        got = executor.validate_program(_one_bit(first, other), ["1"], check_rng=random.Random(0))
        assert (got.valid, got.check) == (False, "deterministic")
        # the same program with one value in both branches is deterministic and stored
        same = executor.validate_program(_one_bit(first, first), ["1"], check_rng=random.Random(0))
        assert same.valid and same.outputs == [repr(eval(first))]  # noqa: S307

    def test_a_math_answer_program_whose_runs_differ_in_type_is_refused(self):
        program = "def answer():\n    return 42 if next(iter({'x1', 'y1'})) == 'x1' else 42.0\n"
        got = executor.compute_answer(program, check_rng=random.Random(0))
        assert (got.valid, got.check) == (False, "deterministic")


def _set_heads(hash_seed: int, count: int) -> list[str]:
    """``next(iter({'x<i>', 'y<i>'}))`` for i < count, on the host under ``hash_seed``."""
    code = f"print([next(iter({{'x%d' % i, 'y%d' % i}})) for i in range({count})])"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONHASHSEED": str(hash_seed), "PATH": os.environ.get("PATH", "")},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return eval(out.stdout)  # noqa: S307 - a list of our own strings


class TestTunedToFixedSeeds:
    def test_a_set_order_that_agrees_under_the_old_seeds_is_refused_under_drawn_ones(self):
        heads = [_set_heads(seed, 400) for seed in range(6)]  # the old seeds 0..5
        tuned = next(i for i in range(400) if len({h[i] for h in heads}) == 1)
        program = f"def f(a):\n    return next(iter({{'x{tuned}', 'y{tuned}'}}))"
        # the old check: six runs under hash seeds 0..5 all return the same value
        old = [
            executor.execute(program, [(1,)], variant=RunVariant(s, "UTC", s, fresh=True))
            for s in range(6)
        ]
        assert len({ex.outputs for ex in old}) == 1 and old[0].status == "ok"
        # drawn seeds: refused under each of these check generator seeds (31 in 32 are)
        for seed in range(4):
            got = executor.validate_program(program, ["1"], check_rng=random.Random(seed))
            assert (got.valid, got.check) == (False, "deterministic"), seed

    def test_a_verdict_repeat_draws_its_runs_too(self):
        heads = [_set_heads(seed, 400) for seed in range(6)]
        tuned = next(i for i in range(400) if len({h[i] for h in heads}) == 1)
        noisy = f"def f(a):\n    return next(iter({{'x{tuned}', 'y{tuned}'}}))"
        gold = repr(heads[0][tuned])
        # right in the stored run, but the answer does not repeat under drawn seeds
        got = answer_checks.check_abduction("1", noisy, gold, check_rng=random.Random(1))
        assert (got.score, got.status) == (0.0, "nondeterministic")
        held = answer_checks.check_induction(
            noisy, ["1", "2"], [gold, gold], check_rng=random.Random(1)
        )
        assert held.score == 0.0
        honest = "def f(a):\n    return len({'x', 'y'}) + a"
        right = answer_checks.check_abduction("1", honest, "3", check_rng=random.Random(1))
        assert right.score == 1


class TestReproducibleDraws:
    def test_the_same_seed_draws_the_same_variants_and_another_seed_others(self):
        a = executor.draw_check_variants(5, random.Random(7))
        assert a == executor.draw_check_variants(5, random.Random(7))
        assert a != executor.draw_check_variants(5, random.Random(8))
        assert len(a) == 5 and all(v.fresh for v in a)
        assert all(v.hash_seed != executor.TASK_HASH_SEED and v.tz != "UTC" for v in a)
        assert len({v.hash_seed for v in a}) == 5
        # no generator: the system's, unpredictable
        assert executor.draw_check_variants(5) != executor.draw_check_variants(5)
        assert executor.draw_check_variants(0, random.Random(7)) == ()

    def test_a_check_advances_its_generator_alike_whatever_the_runs_return(self):
        expected = random.Random(3)
        executor.draw_check_variants(5, expected)
        # an honest program (all runs) and a noisy one (stops at the first run that differs)
        for program, valid in (("def f(a):\n    return a", True), (_one_bit("1", "2"), False)):
            rng = random.Random(3)
            assert executor.validate_program(program, ["1"], check_rng=rng).valid is valid
            assert rng.getstate() == expected.getstate()

    def test_the_stored_run_stays_pinned(self):
        assert executor.STORED_RUN == RunVariant(0, "UTC", 0, fresh=False)

    def test_the_environment_derives_its_check_generator_from_the_reset_seed(self):
        import sage_env
        from sage_env import EnvConfig

        env = sage_env.env(EnvConfig(protocol="azr")).unwrapped
        env.reset(seed=11)
        first = executor.draw_check_variants(5, env.check_rng)
        after_checks = env.rng.getstate()
        env.reset(seed=11)
        assert executor.draw_check_variants(5, env.check_rng) == first
        assert env.rng.getstate() == after_checks  # check draws never move a task draw
        env.reset(seed=12)
        assert executor.draw_check_variants(5, env.check_rng) != first
        env.close()


class TestEnvironmentChecksDrawFromItsGenerator:
    @staticmethod
    def _advanced_by(env, seed: int, draws: int) -> bool:
        """Whether ``env.check_rng`` is where ``draws`` variants drawn from ``seed`` leave it."""
        from sage_env.env import _check_rng

        expected = _check_rng(seed)
        executor.draw_check_variants(draws, expected)
        return env.check_rng.getstate() == expected.getstate()

    def test_an_azr_proposal_check_draws_its_check_runs_from_env_check_rng(self):
        import sage_env
        from sage_env import EnvConfig
        from sage_env.protocols.azr import AZRConfig, vet_exec_proposal
        from sage_env.tasks import exec_tasks

        env = sage_env.env(EnvConfig(protocol="azr")).unwrapped
        env.reset(seed=5)
        assert self._advanced_by(env, 5, 0)
        reference = exec_tasks.identity_tasks()[0]
        text = "```python\ndef f(x):\n    return sorted(x)\n```\n```input\n[3, 1, 2]\n```"
        settings = AZRConfig()
        _, valid, reason, task, _ = vet_exec_proposal(
            env, "deduction", text, reference, [reference], settings
        )
        assert valid, reason
        assert task is not None and task.meta["exec"]["outputs"] == ["[1, 2, 3]"]
        assert self._advanced_by(env, 5, settings.determinism_runs - 1)
        env.close()

    def test_a_math_grounding_check_draws_from_env_check_rng(self):
        import sage_env
        from sage_env import EnvConfig

        env = sage_env.env(EnvConfig(domains=("math",), math_grounding="program")).unwrapped
        env.reset(seed=6)
        task = sage_env.Task(
            "t", "math", "What is 6 times 7?", answer="42",
            meta={"answer_program": "def answer():\n    return str(6 * 7) + 'e0'"},
        )  # fmt: skip
        check = env.check_verifier(task)
        assert check["status"] == "passed", check
        assert task.answer == "42" and task.meta["answer_value"] == "'42e0'"
        assert self._advanced_by(env, 6, executor.DETERMINISM_RUNS - 1)
        env.close()

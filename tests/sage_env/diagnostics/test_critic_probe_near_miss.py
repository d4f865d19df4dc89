"""The critic probe's wrong-answer corruption ``near_miss`` (issue 46, item 2)."""

import random

import pytest

from sage_env import EnvConfig
from sage_env.diagnostics import critic_probe
from sage_env.diagnostics.critic_probe import near_miss, near_miss_tests
from sage_env.tasks.task import load_seeds
from sage_env.verifiers import MathVerifier


@pytest.mark.parametrize(
    "answer, allowed",
    [
        ("42", {"41", "43", "40", "44", "45", "46", "47", "48", "49"}),
        ("-7", {"-6", "-8"}),
        ("0", {"1"}),
        ("\\frac{3}{4}", {"\\frac{2}{4}", "\\frac{4}{4}"}),
        ("3/4", {"2/4", "4/4"}),
        ("2.5", {"2.4", "2.6"}),
    ],
)
def test_near_miss_moves_a_number_by_one_or_changes_one_digit(answer, allowed):
    for seed in range(20):
        assert near_miss(answer, random.Random(seed)) in allowed


def test_near_miss_of_a_multi_digit_integer_changes_one_digit_or_adds_one():
    for seed in range(50):
        moved = near_miss("391", random.Random(seed))
        assert moved != "391"
        one_digit = len(moved) == 3 and sum(a != b for a, b in zip(moved, "391")) == 1
        assert one_digit and moved[0] == "3" or abs(int(moved) - 391) == 1, moved


def test_near_miss_never_equals_the_seed_answers_it_changes():
    """On every seed answer that has a number: a different string and a different value."""
    math = MathVerifier()
    answers = sorted({t.answer for t in load_seeds() if t.domain == "math" and t.answer})
    changed = 0
    for i, answer in enumerate(answers):
        moved = near_miss(answer, random.Random(i))
        if moved is None:
            assert not any(c.isdigit() for c in answer), answer
            continue
        changed += 1
        assert moved != answer
        assert math.verify(f"\\boxed{{{moved}}}", answer).score == 0.0, (answer, moved)
    assert changed >= 0.9 * len(answers)


def test_near_miss_without_a_number_is_none():
    assert near_miss("\\pi", random.Random(0)) is None


def test_near_miss_tests_moves_one_expected_integer():
    tests = ["assert f(3) == 6", "assert g('a')", "assert f(10) == 20"]
    for seed in range(20):
        moved = near_miss_tests(tests, random.Random(seed))
        assert moved != tests and moved[1] == tests[1]
        diff = [(a, b) for a, b in zip(tests, moved) if a != b]
        assert len(diff) == 1
        before, after = diff[0]
        assert after.split("==")[0] == before.split("==")[0]  # the call is unchanged
    assert near_miss_tests(["assert g('a')"], random.Random(0)) is None


def test_probe_near_miss_items_show_the_intact_question_with_a_near_miss_answer():
    seeds = load_seeds()
    by_id = {t.task_id: t for t in seeds}
    shown = critic_probe.probe_set(
        seeds, 24, config=EnvConfig(critic_sees_verifier=True), corruptions=("near_miss",)
    )
    bad = [it for it in shown if not it.intact]
    assert len(bad) == 12 and {it.corruption for it in bad} == {"near_miss"}
    for it in bad:
        task = by_id[it.task_id]
        user = it.observation["user"]
        assert task.prompt in user
        if task.domain == "math":
            assert "Proposed answer: " in user
            assert f"Proposed answer: {task.answer}\n" not in user
        else:
            assert "Proposed tests:" in user and "\n".join(task.tests) not in user
    # without the verifier a near-miss item is an intact question: the control arm
    hidden = critic_probe.probe_set(seeds, 24, corruptions=("near_miss",))
    for it in hidden:
        assert "Proposed answer" not in it.observation["user"]
        assert by_id[it.task_id].prompt in it.observation["user"]


def test_probe_set_rejects_an_unknown_corruption_and_keeps_its_default():
    seeds = load_seeds()
    with pytest.raises(ValueError, match="unknown corruption"):
        critic_probe.probe_set(seeds, 8, corruptions=("typo",))
    assert critic_probe.probe_set(seeds, 24) == critic_probe.probe_set(
        seeds, 24, corruptions=critic_probe.CORRUPTIONS
    )

import math
from dataclasses import replace

import pytest

from sage_env import RewardConfig
from sage_env.rewards import (
    challenger_reward,
    critic_reward,
    normalise_critic_score,
    plan_gate,
    planner_reward,
    quality_gate,
    solver_reward,
)
from sage_env.text.parsing import parse_challenger, parse_critic_score, parse_plan

CFG = RewardConfig()


def test_paper_defaults():
    assert CFG.alpha == 0.7 and CFG.beta == 0.3
    assert CFG.solver_weights == (0.2, 0.6, 0.2)
    assert CFG.planner_weights == (0.5, 0.5)


@pytest.mark.parametrize(
    "raw, expected", [(1, 0.0), (10, 1.0), (7.3, 0.7), (5.5, 0.5), (None, 0.0)]
)
def test_critic_score_minus_one_over_nine(raw, expected):
    assert normalise_critic_score(raw) == pytest.approx(expected)


def test_critic_score_over_ten_rule():
    assert normalise_critic_score(7, "over_ten") == pytest.approx(0.7)


def test_quality_gate_edge_is_inclusive():
    assert quality_gate(0.7, CFG) is True
    assert quality_gate(normalise_critic_score(7.3), CFG) is True  # 0.7 up to float rounding
    assert quality_gate(0.7 - 1e-6, CFG) is False


def test_plan_gate_edge_is_strict():
    assert plan_gate(0.3, CFG) is False
    assert plan_gate(normalise_critic_score(3.7), CFG) is False  # 0.3 up to float rounding
    assert plan_gate(0.3 + 1e-6, CFG) is True


def test_challenger_reward_accepted():
    # q = 0.8, d = 1 - mean(1, 0) = 0.5, f = 1 -> (0.8 + 0.5 + 1) / 3
    r, terms = challenger_reward(0.8, 0.5, 1.0, CFG)
    assert r == pytest.approx(2.3 / 3)
    assert terms == {"q": 0.8, "d": 0.5, "f": 1.0}


def test_challenger_reward_at_gate_edge_keeps_difficulty():
    q = normalise_critic_score(7.3)  # exactly 0.7 -> accepted
    assert quality_gate(q, CFG)
    r, _ = challenger_reward(q, 1.0, 1.0, CFG)
    assert r == pytest.approx((0.7 + 1.0 + 1.0) / 3)


def test_challenger_reward_rejected_drops_difficulty():
    r, terms = challenger_reward(0.6, None, 1.0, CFG)  # default: d counts as 0
    assert r == pytest.approx(1.6 / 3)
    assert terms["d"] is None
    renorm = RewardConfig(difficulty_when_gated="renormalise")
    assert challenger_reward(0.6, None, 1.0, renorm)[0] == pytest.approx(0.8)


def test_rejected_question_never_out_earns_an_accepted_one_by_default():
    worst_accepted = challenger_reward(CFG.alpha, 0.0, 1.0, CFG)[0]
    best_rejected = challenger_reward(CFG.alpha - 1e-6, None, 1.0, CFG)[0]
    assert best_rejected < worst_accepted


def test_solver_reward_with_and_without_plan():
    assert solver_reward(0.5, 1.0, 1.0, CFG)[0] == pytest.approx(0.1 + 0.6 + 0.2)
    assert solver_reward(None, 1.0, 1.0, CFG)[0] == pytest.approx(0.8)
    assert solver_reward(None, 0.0, 0.0, CFG)[0] == 0.0
    renorm = RewardConfig(solver_plan_term_when_gated="renormalise")
    assert solver_reward(None, 1.0, 1.0, renorm)[0] == pytest.approx(1.0)


def test_planner_and_critic_reward():
    assert planner_reward(0.5, 1.0, CFG)[0] == pytest.approx(0.5 * 0.5 + 0.5)
    assert critic_reward(1.0)[0] == 1.0 and critic_reward(0.0)[0] == 0.0


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Looks fine. <score>8</score>", 8.0),
        ("<score> 7/10 </score>", 7.0),
        ("<score>7.5</score>", 7.5),
        ("<score>3</score> then <score>9</score>", 9.0),
        ("Score: 10/10", None),  # outside the tag
        ("<score>11</score>", None),  # out of range
        ("<score>0</score>", None),
        ("<score>eight</score>", None),
        ("<score>8", None),  # unclosed
        ("", None),
        ("<score>" + "9" * 1000 + "</score>", None),
    ],
)
def test_parse_critic_score(text, expected):
    assert parse_critic_score(text) == expected


def test_unparseable_critic_output_means_zero_quality():
    assert normalise_critic_score(parse_critic_score("I give it a nine")) == 0.0


def test_parse_plan_requires_two_numbered_steps():
    assert parse_plan("<plan>\n1. read\n2. compute\n</plan>") == "1. read\n2. compute"
    assert parse_plan("<plan>just do it</plan>") is None
    assert parse_plan("1. a\n2. b") is None


def test_parse_challenger_math_and_code():
    out = parse_challenger("<question>What is 2+3?</question><answer>5</answer>", "math")
    assert out.valid and out.question == "What is 2+3?" and out.answer == "5"
    code = parse_challenger(
        "<question>Write add(a, b).</question><tests>\nassert add(1, 2) == 3\n"
        "assert add(0, 0) == 0\n</tests>",
        "code",
    )
    assert code.valid and code.entry_point == "add" and len(code.tests) == 2
    bad = parse_challenger("<question>Q</question><tests>not python (</tests>", "code")
    assert not bad.valid and "assert" in bad.reason
    assert not parse_challenger("<question>Q</question>", "math").valid
    assert not parse_challenger("\x00\ud800 garbage 😀" * 1000, "math").valid


def test_no_nan_anywhere():
    for q in (0.0, 0.7, 1.0):
        for d in (None, 0.0, 1.0):
            assert math.isfinite(challenger_reward(q, d, 1.0, CFG)[0])


# ------------------------------------------------------------- difficulty rule (issue 46)
@pytest.mark.parametrize(
    "r, inverse_accuracy, learnability, band",
    [
        (0.0, 1.0, 0.0, 0.0),  # nobody solved it: hard or wrong; only the paper pays it
        (0.25, 0.75, 0.75, 0.5),
        (0.5, 0.5, 0.5, 1.0),
        (0.75, 0.25, 0.25, 0.5),
        (1.0, 0.0, 0.0, 0.0),
    ],
)
def test_difficulty_rules_pay_the_documented_table(r, inverse_accuracy, learnability, band):
    from sage_env.rewards import difficulty

    assert difficulty(r, "inverse_accuracy") == pytest.approx(inverse_accuracy)
    assert difficulty(r, "learnability") == pytest.approx(learnability)
    assert difficulty(r, "band") == pytest.approx(band)


def test_execution_tasks_keep_inverse_accuracy_under_every_rule():
    from sage_env.rewards import needs_solvability_evidence, task_difficulty

    for rule in ("inverse_accuracy", "learnability", "band"):
        assert task_difficulty(0.0, rule, "exec") == 1.0
        assert task_difficulty(0.5, rule, "exec") == 0.5
        assert needs_solvability_evidence(rule, "exec") is False
    assert task_difficulty(0.0, "learnability", "math") == 0.0
    assert needs_solvability_evidence("learnability", "math") is True
    assert needs_solvability_evidence("band", "code") is True
    assert needs_solvability_evidence("inverse_accuracy", "math") is False


def test_difficulty_rule_defaults_to_learnability_and_rejects_unknown_names():
    from sage_env import EnvConfig
    from sage_env.rewards import difficulty

    assert RewardConfig().difficulty_rule == "learnability"
    with pytest.raises(ValueError, match="difficulty_rule must be one of"):
        RewardConfig(difficulty_rule="hardness")
    with pytest.raises(ValueError, match="difficulty_rule must be one of"):
        EnvConfig(rewards={"difficulty_rule": "inverse-accuracy"})
    with pytest.raises(ValueError, match="unknown difficulty rule 'x'"):
        difficulty(0.5, "x")


# ---------------------------------------------------------------- non-default parameters
# Issue 49: a test that uses only the default weights (0.2, 0.6, 0.2), alpha 0.7 or rule
# cannot tell a swapped or ignored argument from the right one. These pin each formula at
# distinct, non-default values, so every weight and term has a visible effect.

ODD = RewardConfig(
    alpha=0.55,
    beta=0.45,
    challenger_weights=(0.1, 0.3, 0.6),
    planner_weights=(0.25, 0.75),
    solver_weights=(0.1, 0.7, 0.2),
)


def test_every_weight_lands_on_its_own_term():
    q, d, f, p, s = 0.9, 0.4, 0.2, 0.8, 0.5
    assert challenger_reward(q, d, f, ODD)[0] == pytest.approx(0.1 * q + 0.3 * d + 0.6 * f)
    assert planner_reward(p, f, ODD)[0] == pytest.approx(0.25 * p + 0.75 * f)
    assert solver_reward(p, s, f, ODD)[0] == pytest.approx(0.1 * p + 0.7 * s + 0.2 * f)


def test_gated_terms_drop_or_renormalise_at_non_default_weights():
    q, f, s = 0.9, 0.2, 0.5
    zero = challenger_reward(q, None, f, ODD)
    assert zero == (pytest.approx(0.1 * q + 0.6 * f), {"q": q, "d": None, "f": f})
    renorm = replace(ODD, difficulty_when_gated="renormalise")
    assert challenger_reward(q, None, f, renorm)[0] == pytest.approx((0.1 * q + 0.6 * f) / 0.7)
    assert solver_reward(None, s, f, ODD) == (
        pytest.approx(0.7 * s + 0.2 * f),
        {"p": None, "s_gt": s, "f": f},
    )
    renorm = replace(ODD, solver_plan_term_when_gated="renormalise")
    assert solver_reward(None, s, f, renorm)[0] == pytest.approx((0.7 * s + 0.2 * f) / 0.9)


def test_reward_terms_name_every_input():
    assert challenger_reward(0.9, 0.4, 0.2, ODD)[1] == {"q": 0.9, "d": 0.4, "f": 0.2}
    assert planner_reward(0.8, 0.2, ODD)[1] == {"p": 0.8, "f": 0.2}
    assert solver_reward(0.8, 0.5, 0.2, ODD)[1] == {"p": 0.8, "s_gt": 0.5, "f": 0.2}
    assert critic_reward(0.3) == (0.3, {"f": 0.3})


def test_gates_at_non_default_thresholds_and_their_edges():
    assert quality_gate(0.55, ODD) and quality_gate(0.55 - 1e-10, ODD)
    assert not quality_gate(0.549, ODD) and quality_gate(0.56, ODD)
    assert plan_gate(0.46, ODD) and not plan_gate(0.45, ODD) and not plan_gate(0.45 + 1e-10, ODD)
    assert not plan_gate(0.44, ODD)
    # the exact edges of the tolerance band: inclusive for quality, strict for the plan
    from sage_env.rewards import GATE_TOLERANCE

    assert quality_gate(ODD.alpha - GATE_TOLERANCE, ODD)
    assert not plan_gate(ODD.beta + GATE_TOLERANCE, ODD)


@pytest.mark.parametrize("raw, minus, over", [(1.0, 0.0, 0.1), (5.5, 0.5, 0.55), (10.0, 1.0, 1.0)])
def test_critic_score_rules_at_both_ends(raw, minus, over):
    assert normalise_critic_score(raw) == pytest.approx(minus)
    assert normalise_critic_score(raw, "minus_one_over_nine") == pytest.approx(minus)
    assert normalise_critic_score(raw, "over_ten") == pytest.approx(over)
    assert normalise_critic_score(None, "over_ten") == 0.0


@pytest.mark.parametrize(
    "f, p, s_mean, w, reward, agreement",
    [
        (0.8, 0.9, 0.5, 0.25, 0.75 * 0.8 + 0.25 * 0.6, 0.6),
        (0.8, 0.2, 0.5, 0.5, 0.5 * 0.8 + 0.5 * 0.7, 0.7),
        (0.8, None, 0.5, 0.25, 0.75 * 0.8, 0.0),  # silence predicts nothing
        (0.6, 0.3, 0.3, 0.0, 0.6, 1.0),  # w = 0 is the paper's critic
        (0.0, 0.3, 0.3, 1.0, 1.0, 1.0),
    ],
)
def test_critic_plan_reward_formula(f, p, s_mean, w, reward, agreement):
    from sage_env.rewards import critic_plan_reward

    r, terms = critic_plan_reward(f, p, s_mean, w)
    assert r == pytest.approx(reward)
    assert terms == {"f": f, "p": p, "s_mean": s_mean, "agreement": pytest.approx(agreement)}


@pytest.mark.parametrize(
    "acc, expected", [(0.0, 0.0), (1e-9, 1.0 - 1e-9), (0.25, 0.75), (1.0, 0.0), (1.5, 0.0)]
)
def test_learnability_reward_boundaries(acc, expected):
    from sage_env.rewards import learnability_reward

    assert learnability_reward(acc) == pytest.approx(expected)


def test_azr_reward_table():
    from sage_env.rewards import AZR_FORMAT_ERROR, AZR_WRONG_FORMATTED, azr_reward

    assert (AZR_WRONG_FORMATTED, AZR_FORMAT_ERROR) == (-0.5, -1.0)
    terms = {"r_role": 0.75, "passable": True, "formatted": True}
    assert azr_reward(0.75, True, True) == (0.75, terms)
    assert azr_reward(0.75, True, False, format_penalty=False)[0] == 0.75
    assert azr_reward(0.75, False, True) == (
        -0.5,
        {"r_role": 0.75, "passable": False, "formatted": True},
    )
    assert azr_reward(0.75, False, False)[0] == -1.0
    assert azr_reward(0.75, False, True, format_penalty=False)[0] == 0.0
    assert azr_reward(0.75, False, False, format_penalty=False)[0] == 0.0


def test_solvability_evidence_by_rule_and_domain():
    from sage_env.rewards import needs_solvability_evidence

    assert not needs_solvability_evidence("inverse_accuracy", "math")
    assert needs_solvability_evidence("learnability", "math")
    assert needs_solvability_evidence("band", "code")
    assert not needs_solvability_evidence("band", "exec")


def test_gate_alpha_and_quality_gate_per_domain():
    # issue 49: the per-domain gate at a non-default value (the mutation CI check's first find)
    from sage_env.rewards import gate_alpha, quality_gate

    cfg = RewardConfig(alpha=0.7, domain_alpha={"exec": 0.4, "code": 1})
    assert gate_alpha(cfg, "exec") == 0.4
    assert gate_alpha(cfg, "math") == 0.7 and gate_alpha(cfg) == 0.7
    assert gate_alpha(cfg, "code") == 1.0 and type(gate_alpha(cfg, "code")) is float
    assert quality_gate(0.45, cfg, "exec") and not quality_gate(0.45, cfg, "math")
    assert not quality_gate(0.45, cfg)


def test_solved_by_any_counts_only_a_full_pass_as_evidence():
    """Issue 46 item 5: only an attempt that scores 1 shows a task can be solved; a partial
    pass of code tests (0.2, 0.99) is no evidence, and no attempt is none."""
    from sage_env.rewards import solved_by_any

    assert solved_by_any([1.0]) is True
    assert solved_by_any([0.0, 0.2, 1.0]) is True
    assert solved_by_any([0.2, 0.99]) is False
    assert solved_by_any([]) is False
    assert solved_by_any((s for s in [0.5, 1.0])) is True  # any iterable of scores

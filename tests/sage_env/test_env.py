import pytest
from pettingzoo.test import api_test, seed_test

import sage_env
from sage_env import EnvConfig, TaskPool
from tests.scripted import CODE_SEED, MATH_SEED, play_round

PLAN = "<plan>\n1. Read the problem.\n2. Compute.\n</plan>"


def math_script(question_score="10", plan_score="4", probe=("42", "41")):
    def script(agent, phase, obs, n):
        if phase == "challenge":
            return "<question>What is 7*6?</question>\n<answer>42</answer>"
        if phase == "review_question":
            return f"<score>{question_score}</score> The question is clear."
        if phase == "probe":
            return f"\\boxed{{{probe[n]}}}"
        if phase == "plan":
            return PLAN
        if phase == "review_plan":
            return f"<score>{plan_score}</score> The plan looks fine."
        if phase == "solve":
            return "\\boxed{42}" if "7*6" in obs["user"] else "\\boxed{5}"
        raise AssertionError(phase)

    return script


def make_env(**kw):
    return sage_env.env(
        EnvConfig(domains=("math",), solver_samples=2), seeds=[MATH_SEED], render_mode="ansi", **kw
    )


def by_phase(records):
    out = {}
    for agent, phase, reward, info in records:
        out.setdefault(phase, []).append((agent, reward, info))
    return out


def test_scripted_round_rewards_known_in_advance():
    env = make_env()
    rec = by_phase(play_round(env, math_script()))
    # critic: q = (10 - 1) / 9 = 1 -> accepted; critic reward = format 1
    assert rec["review_question"] == [("critic_0", 1.0, rec["review_question"][0][2])]
    # probes (no plan shown): 0.6 * s_gt + 0.2 * f
    assert [r for _, r, _ in rec["probe"]] == pytest.approx([0.8, 0.2])
    # challenger: q = 1, d = 1 - mean(1, 0) = 0.5, f = 1 -> 2.5 / 3
    ((_, ch_reward, ch_info),) = rec["challenge"]
    assert ch_reward == pytest.approx(2.5 / 3)
    assert ch_info["terms"] == {"q": 1.0, "d": 0.5, "f": 1.0} and ch_info["accepted"]
    # plan score 4 -> p = 1/3 > beta = 0.3 -> shown; planner 0.5 p + 0.5 f
    ((_, pl_reward, pl_info),) = rec["plan"]
    assert pl_reward == pytest.approx(0.5 / 3 + 0.5) and pl_info["plan_shown"]
    # solver with plan, correct: 0.2 p + 0.6 + 0.2
    assert [r for _, r, _ in rec["solve"]] == pytest.approx([0.2 / 3 + 0.8] * 2)
    assert [r for _, r, _ in rec["review_plan"]] == [1.0]
    # the accepted task joined the pool with provenance
    pool = env.unwrapped.pool
    assert len(pool) == 2 and pool.num_generated == 1
    new = pool.tasks[-1]
    assert new.answer == "42" and new.parent_id == "seed/m0" and new.meta["d"] == 0.5
    text = env.render()
    assert "=== challenge: challenger_0 ===" in text and "reward solver_0" in text


def test_quality_gate_edge_q_equals_alpha_is_accepted():
    rec = by_phase(play_round(make_env(), math_script(question_score="7.3")))
    ((_, reward, info),) = rec["challenge"]
    assert info["accepted"] and "probe" in rec
    assert reward == pytest.approx((0.7 + 0.5 + 1.0) / 3)


def test_question_below_alpha_rejected_and_not_solved():
    env = make_env()
    rec = by_phase(play_round(env, math_script(question_score="7")))
    ((_, reward, info),) = rec["challenge"]
    q = 6 / 9
    assert not info["accepted"] and "probe" not in rec
    assert reward == pytest.approx((q + 1.0) / 3)  # d dropped (counts as 0)
    assert len(env.unwrapped.pool) == 1


def test_plan_gate_edge_p_equals_beta_hides_plan():
    env = sage_env.env(
        EnvConfig(domains=("math",), solver_samples=1), seeds=[MATH_SEED], beta=1 / 3
    )
    seen = []

    def script(agent, phase, obs, n):
        if phase == "solve":
            seen.append(obs["user"])
        return math_script(plan_score="4")(agent, phase, obs, 0)

    rec = by_phase(play_round(env, script))
    ((_, pl_reward, pl_info),) = rec["plan"]
    assert not pl_info["plan_shown"]
    assert "plan that may help" not in seen[0]
    # solver saw no plan: p term is zero -> 0.6 + 0.2
    assert [r for _, r, _ in rec["solve"]] == pytest.approx([0.8])


@pytest.mark.parametrize("text, critic_format", [("nine", 0.625), ("11", 0.625)])
def test_unparseable_critic_output_rejects_question(text, critic_format):
    rec = by_phase(play_round(make_env(), math_script(question_score=text)))
    ((_, critic_reward, critic_info),) = rec["review_question"]
    # a <score> pair whose content breaks the rule earns half the score part (0.75 / 2),
    # plus the rationale part (0.25)
    assert critic_reward == critic_format and critic_info["raw_score"] is None
    ((_, ch_reward, ch_info),) = rec["challenge"]
    assert ch_reward == pytest.approx(1 / 3)  # (q = 0 + f = 1) / 3
    assert not ch_info["accepted"]


def test_binary_format_rule_and_missing_tag():
    env = sage_env.env(EnvConfig(domains=("math",)), seeds=[MATH_SEED], format_rule="binary")
    rec = by_phase(play_round(env, math_script(question_score="nine")))
    assert rec["review_question"][0][1] == 0.0

    def script(agent, phase, obs, n):
        if phase == "challenge":
            return "<question>What is 9*9?</question> the answer is 81"  # no <answer>
        return math_script()(agent, phase, obs, n)

    rec = by_phase(play_round(make_env(), script))
    ((_, reward, info),) = rec["challenge"]
    assert info["terms"]["f"] == 0.5 and reward == pytest.approx(0.5 / 3)  # (0 + 0.5) / 3
    assert "missing or overlong <answer>" in info["parsed"]["reason"]


def test_critic_without_score_tag_gets_zero():
    def script(agent, phase, obs, n):
        if phase == "review_question":
            return "Score: 10/10"
        return math_script()(agent, phase, obs, n)

    rec = by_phase(play_round(make_env(), script))
    assert rec["review_question"][0][1] == 0.0


def test_garbage_actions_never_crash_and_score_zero():
    env = sage_env.env(EnvConfig(solver_samples=2), seeds=[MATH_SEED, CODE_SEED])
    for seed in range(4):
        rec = play_round(env, lambda *a: "\x00\ud800 <score> 😀 </plan>" * 50, seed=seed)
        assert {phase for _, phase, _, _ in rec} == {"challenge", "plan", "review_plan", "solve"}
        assert all(reward == 0.0 for _, _, reward, _ in rec)


def test_code_round_uses_the_code_verifier():
    solved = []

    def script(agent, phase, obs, n):
        if phase == "solve":
            solved.append("inc" if "inc" in obs["user"] else "dbl")
        return {
            "challenge": "<question>Write dbl(x) doubling x.</question><tests>\n"
            "assert dbl(2) == 4\nassert dbl(0) == 0\n</tests><solution>def dbl(x):\n"
            "    return x + x</solution>",
            "review_question": "<score>10</score> Checked it with care.",
            "probe": "```python\ndef dbl(x):\n    return 2 * x\n```",
            "plan": PLAN,
            "review_plan": "<score>1</score> Checked it with care.",
            "solve": "```python\ndef inc(x):\n    return x + 2\n```"
            if "inc" in obs["user"]
            else "```python\ndef dbl(x):\n    return 2 * x\n```",
        }[phase]

    env = sage_env.env(EnvConfig(domains=("code",), solver_samples=1), seeds=[CODE_SEED])
    rec = by_phase(play_round(env, script))
    assert rec["probe"][0][2]["verdict"]["score"] == 1.0
    ((_, ch_reward, ch_info),) = rec["challenge"]
    assert ch_info["terms"]["d"] == 0.0 and ch_reward == pytest.approx(2 / 3)
    ((_, solve_reward, solve_info),) = rec["solve"]
    # the pool task is the seed inc (the script answers it wrongly: x + 2) or the new dbl
    right = solved == ["dbl"]
    assert solve_info["verdict"]["score"] == (1.0 if right else 0.0)
    assert solve_reward == pytest.approx(0.8 if right else 0.2)  # 0.6 s_gt + 0.2 f


def test_unformatted_plan_is_still_reviewed_but_never_shown():
    seen = []

    def script(agent, phase, obs, n):
        if phase == "plan":
            return "first read, then compute"
        if phase == "solve":
            seen.append(obs["user"])
        return math_script(plan_score="10")(agent, phase, obs, n)

    rec = by_phase(play_round(make_env(), script))
    ((_, reward, info),) = rec["plan"]
    assert reward == pytest.approx(0.5 * 1.0 + 0.5 * 0.0)
    assert not info["plan_shown"] and "plan that may help" not in seen[0]


def test_duplicate_question_is_invalid():
    def script(agent, phase, obs, n):
        if phase == "challenge":
            return "<question>What is 2+3?</question><answer>5</answer>"
        return math_script()(agent, phase, obs, n)

    rec = by_phase(play_round(make_env(), script))
    ((_, reward, info),) = rec["challenge"]
    assert reward == 0.0 and "duplicate" in info["parsed"]["reason"]


def test_shared_pool_between_copies():
    pool = TaskPool([MATH_SEED])
    envs = [
        sage_env.env(EnvConfig(domains=("math",)), seeds=[MATH_SEED], pool=pool) for _ in range(2)
    ]
    play_round(envs[0], math_script())
    assert envs[1].unwrapped.pool is pool and len(pool) == 2


def test_pettingzoo_api_test():
    env = sage_env.env(EnvConfig(solver_samples=1), seeds=[MATH_SEED, CODE_SEED])
    api_test(env, num_cycles=30)


def test_pettingzoo_seed_test():
    seed_test(
        lambda: sage_env.env(EnvConfig(solver_samples=1), seeds=[MATH_SEED, CODE_SEED]),
        num_cycles=20,
    )


def test_unknown_option_is_a_clear_error():
    with pytest.raises(TypeError, match="unknown EnvConfig option"):
        sage_env.env(alpah=0.5)
    with pytest.raises(ValueError, match="alpha"):
        EnvConfig(rewards={"alpha": 2.0})


def test_math_answer_that_does_not_parse_is_rejected_before_review():
    def script(agent, phase, obs, n):
        if phase == "challenge":
            return "<question>What is 6*7 exactly?</question><answer>\\frac{</answer>"
        return math_script()(agent, phase, obs, n)

    env = make_env()
    rec = by_phase(play_round(env, script))
    ((_, reward, info),) = rec["challenge"]
    assert "review_question" not in rec and "probe" not in rec
    assert info["verifier_check"]["status"] == "failed"
    assert info["parsed"]["reason"].startswith("verifier check failed: answer is not math")
    assert reward == pytest.approx(0.5 / 3)  # (q = 0 + f = 0.5) / 3
    assert len(env.unwrapped.pool) == 1


@pytest.mark.parametrize("solution, accepted", [("return 2 * x", True), ("return x", False)])
def test_code_reference_solution_must_pass_its_tests(solution, accepted):
    def script(agent, phase, obs, n):
        if phase == "challenge":
            return (
                "<question>Write dbl(x) doubling x.</question><tests>\nassert dbl(2) == 4\n"
                f"</tests><solution>\n```python\ndef dbl(x):\n    {solution}\n```\n"
                "</solution>"
            )
        return {
            "review_question": "<score>10</score> Checked it with care.",
            "probe": "```python\ndef dbl(x):\n    return x\n```",
            "plan": PLAN,
            "review_plan": "<score>1</score> Checked it with care.",
            "solve": "no code",
        }[phase]

    # the paper's difficulty rule: the probe fails, yet an accepted task joins the pool
    env = sage_env.env(
        EnvConfig(
            domains=("code",), solver_samples=1, rewards={"difficulty_rule": "inverse_accuracy"}
        ),
        seeds=[CODE_SEED],
    )
    rec = by_phase(play_round(env, script))
    ((_, reward, info),) = rec["challenge"]
    assert info["verifier_check"]["status"] == ("passed" if accepted else "failed")
    assert ("probe" in rec) is accepted
    assert len(env.unwrapped.pool) == (2 if accepted else 1)
    if accepted:  # q = 1, d = 1 - 0 = 1, f = 1
        assert reward == pytest.approx(1.0)


def test_pettingzoo_render_test():
    from pettingzoo.test import render_test

    render_test(
        lambda render_mode=None: sage_env.env(
            EnvConfig(solver_samples=1), seeds=[MATH_SEED, CODE_SEED], render_mode=render_mode
        )
    )


def test_same_seed_same_actions_same_everything():
    def run():
        env = make_env()
        recs = [play_round(env, math_script(), seed=s) for s in (3, 4)]
        return recs, [t.to_dict() for t in env.unwrapped.pool], env.render()

    assert run() == run()


def test_reset_keeps_the_pool_and_rng_and_clears_the_round():
    env = make_env()
    raw = env.unwrapped
    play_round(env, math_script(), seed=5)
    accepted = raw.pool.tasks[-1]
    assert len(raw.pool) == 2 and accepted.task_id == "gen/0" and raw.episode == 1
    env.reset()  # no seed: the next round of the same game
    assert raw.pool.tasks == [MATH_SEED, accepted]  # the accepted task stays
    assert raw.pool.new_id() == "gen/1"  # and ids go on, never reused
    assert raw.episode == 2 and raw.agents == raw.possible_agents
    assert raw.agent_selection == "challenger_0"
    assert raw.rewards == {a: 0.0 for a in raw.agents} and raw.render() == "\n"
    assert raw.infos["challenger_0"]["last"] is None
    assert raw.infos["challenger_0"]["phase"] == "challenge"
    continued = raw.rng.getstate()
    env.reset(seed=5)
    reseeded = raw.rng.getstate()
    env.reset(seed=5)
    assert raw.rng.getstate() == reseeded != continued  # reset() did not reseed
    assert len(raw.pool) == 2  # reset(seed=...) does not roll the pool back either
    env.close()


@pytest.mark.slow
def test_determinism_holds_with_verifiers_in_worker_processes():
    def run(workers):
        env = sage_env.env(
            EnvConfig(domains=("math",), solver_samples=2, math_workers=workers),
            seeds=[MATH_SEED],
            render_mode="ansi",
        )
        try:
            recs = [play_round(env, math_script(), seed=s) for s in (1, 2)]
            return recs, [t.to_dict() for t in env.unwrapped.pool]
        finally:
            env.close()

    assert run(2) == run(0)


def test_code_task_without_reference_solution_is_rejected_by_default():
    challenge = (
        "<question>Write f(x).</question><tests>\nassert f(1) == 'impossible'\n"
        "assert f(1) == 'also impossible'\n</tests>"
    )

    def script(agent, phase, obs, n):
        return challenge if phase == "challenge" else "x"

    rec = by_phase(
        play_round(
            sage_env.env(EnvConfig(domains=("code",), solver_samples=1), seeds=[CODE_SEED]), script
        )
    )
    ((_, reward, info),) = rec["challenge"]
    assert info["verifier_check"]["reason"] == "no <solution> to check the tests against"
    assert "probe" not in rec and reward == pytest.approx(0.5 / 3)
    lax = sage_env.env(
        EnvConfig(domains=("code",), solver_samples=1, require_code_solution=False),
        seeds=[CODE_SEED],
    )
    assert "review_question" in by_phase(play_round(lax, script))


def test_code_answer_must_define_the_entry_point_for_full_format():
    env = sage_env.env(EnvConfig(domains=("code",), solver_samples=1), seeds=[CODE_SEED])
    task = CODE_SEED
    s_gt, f, _ = env.unwrapped.verify(task, "42")  # parses as Python, defines nothing
    assert (s_gt, f) == (0.0, 0.5)
    s_gt, f, _ = env.unwrapped.verify(task, "```python\ndef inc(x):\n    return x + 1\n```")
    assert (s_gt, f) == (1.0, 1.0)


def test_copying_the_prompt_example_is_rejected():
    def script(agent, phase, obs, n):
        if phase == "challenge":  # seen in a real demo run: the critic gave it 10
            return (
                "<question>What is the sum of the first 20 positive odd numbers?</question>"
                "<answer>400</answer>"
            )
        return math_script()(agent, phase, obs, n)

    env = make_env()
    rec = by_phase(play_round(env, script))
    ((_, reward, info),) = rec["challenge"]
    assert info["parsed"]["reason"] == "copies the example question of the prompt"
    assert reward == 0.0 and len(env.unwrapped.pool) == 1


def test_repeats_hint_counts_down_the_solver_attempts():
    env = sage_env.env(
        EnvConfig(domains=("math",), solver_samples=3), seeds=[MATH_SEED], render_mode="ansi"
    )
    script = math_script(probe=("42", "41", "40"))
    env.reset(seed=0)
    seen = []
    for agent in env.agent_iter(max_iter=200):
        obs, _r, term, trunc, info = env.last()
        if term or trunc:
            env.step(None)
            continue
        seen.append((info["phase"], info["repeats"]))
        n = sum(1 for p, _ in seen[:-1] if p == info["phase"])
        env.step(script(agent, info["phase"], obs, n))
    assert seen == [
        ("challenge", 1),
        ("review_question", 1),
        ("probe", 3),
        ("probe", 2),
        ("probe", 1),
        ("plan", 1),
        ("review_plan", 1),
        ("solve", 3),
        ("solve", 2),
        ("solve", 1),
    ]


def test_critic_plan_grounding_pays_the_review_after_the_solves():
    env = sage_env.env(
        EnvConfig(domains=("math",), solver_samples=2, rewards={"critic_plan_grounding": 0.5}),
        seeds=[MATH_SEED],
        render_mode="ansi",
    )
    rec = by_phase(play_round(env, math_script(plan_score="4")))
    # p = (4 - 1) / 9 = 1/3; both solves right (s = 1): agreement 1 - |1/3 - 1| = 1/3
    ((_, reward, info),) = rec["review_plan"]
    assert reward == pytest.approx(0.5 * 1.0 + 0.5 / 3)
    assert info["terms"] == pytest.approx({"f": 1.0, "p": 1 / 3, "s_mean": 1.0, "agreement": 1 / 3})
    # the question review is still paid its format score alone
    assert rec["review_question"][0][1] == 1.0
    # a plan score of 10 on a task the solver always gets right: agreement 1
    rec = by_phase(play_round(env, math_script(plan_score="10")))
    assert rec["review_plan"][0][1] == pytest.approx(1.0)


def test_critic_plan_grounding_with_unparseable_review_and_failed_solves():
    env = sage_env.env(
        EnvConfig(domains=("math",), solver_samples=2, rewards={"critic_plan_grounding": 1.0}),
        seeds=[MATH_SEED],
        render_mode="ansi",
    )

    def script(agent, phase, obs, n):
        if phase == "review_plan":
            return "no score here"
        if phase == "solve":
            return "\\boxed{0}"
        return math_script()(agent, phase, obs, n)

    rec = by_phase(play_round(env, script))
    # unparseable review: f = 0 and no prediction (agreement 0), although the solver failed
    # both times (s = 0): silence never earns what an honest "this will fail" would
    ((_, reward, info),) = rec["review_plan"]
    assert reward == 0.0 and info["terms"]["agreement"] == 0.0 and info["terms"]["p"] is None


def test_critic_plan_grounding_out_of_range_is_a_clear_error():
    with pytest.raises(ValueError, match="critic_plan_grounding"):
        EnvConfig(rewards={"critic_plan_grounding": 1.5})


@pytest.mark.parametrize("sees", [False, True])
def test_critic_sees_the_proposed_answer_only_when_configured(sees):
    env = sage_env.env(
        EnvConfig(domains=("math",), solver_samples=1, critic_sees_verifier=sees),
        seeds=[MATH_SEED],
    )
    env.reset(seed=0)
    env.step("<question>What is 7*6?</question>\n<answer>42</answer>")
    assert env.agent_selection == "critic_0"
    user = env.observe("critic_0")["user"]
    assert "What is 7*6?" in user
    assert ("Proposed answer: 42" in user) is sees


def test_critic_probe_adds_wrong_verifier_items_when_the_critic_sees_verifiers():
    from sage_env.diagnostics import critic_probe
    from sage_env.tasks.task import load_seeds

    seeds = load_seeds()
    plain = critic_probe.probe_set(seeds, 24)
    assert {it.corruption for it in plain} == {"", *critic_probe.CORRUPTIONS}
    assert not any("Proposed answer" in it.observation["user"] for it in plain)
    shown = critic_probe.probe_set(seeds, 24, config=EnvConfig(critic_sees_verifier=True))
    wrong = [it for it in shown if it.corruption == critic_probe.VERIFIER_CORRUPTION]
    assert wrong and not any(it.intact for it in wrong)
    by_id = {t.task_id: t for t in seeds}
    for it in wrong:  # the question is intact, the verifier belongs to another task
        task = by_id[it.task_id]
        assert task.prompt in it.observation["user"]
        mine = (
            f"Proposed answer: {task.answer}\n\n"
            if task.domain == "math"
            else sage_env.text.prompts.verifier_text(task)
        )
        assert mine not in it.observation["user"]
    for it in shown:
        if it.intact and by_id[it.task_id].domain == "math":
            assert f"Proposed answer: {by_id[it.task_id].answer}" in it.observation["user"]


def test_solvable_admission_keeps_unsolved_questions_out_and_unpaid():
    def make(admission):
        # the paper's difficulty rule, under which "gate" pools an unsolved question (the
        # default learnability rule keeps it out under both admissions)
        return sage_env.env(
            EnvConfig(
                domains=("math",),
                solver_samples=2,
                pool_admission=admission,
                rewards={"difficulty_rule": "inverse_accuracy"},
            ),
            seeds=[MATH_SEED],
            render_mode="ansi",
        )

    # no probe solves "What is 7*6?" (gold 42): under "gate" it joins and earns d = 1
    env = make("gate")
    rec = by_phase(play_round(env, math_script(probe=("41", "40"))))
    ((_, reward, info),) = rec["challenge"]
    assert reward == pytest.approx(3.0 / 3) and info["accepted"]
    assert env.unwrapped.pool.num_generated == 1
    # under "solvable" it stays out, and d counts as 0: (q + f) / 3 with q = f = 1
    env = make("solvable")
    rec = by_phase(play_round(env, math_script(probe=("41", "40"))))
    ((_, reward, info),) = rec["challenge"]
    assert reward == pytest.approx(2.0 / 3) and not info["accepted"]
    assert "no difficulty probe solved it" in info["gate"]
    assert env.unwrapped.pool.num_generated == 0
    # one probe of two solves it: it joins with d = 0.5
    rec = by_phase(play_round(env, math_script(probe=("42", "40"))))
    ((_, reward, info),) = rec["challenge"]
    assert reward == pytest.approx(2.5 / 3) and info["accepted"]
    assert env.unwrapped.pool.num_generated == 1


def test_unknown_pool_admission_is_a_clear_error():
    with pytest.raises(ValueError, match="pool_admission"):
        EnvConfig(pool_admission="always")


def test_load_validation_limit_takes_math_and_gsm8k_in_turn():
    import sage_env

    everything = sage_env.load_validation()
    assert len(everything) == 200
    head = sage_env.load_validation(5)
    assert [t.source for t in head] == ["math", "gsm8k", "math", "gsm8k", "math"]
    assert [t.task_id for t in head[::2]] == [t.task_id for t in everything[:3]]
    assert len(sage_env.load_validation(500)) == 200


# ---------------------------------------------------------------- interleaved turn order
def _phases(records):
    return [(agent, phase) for agent, phase, _r, _i in records]


def test_interleaved_round_alternates_the_two_halves_with_the_same_rewards():
    # the question is rejected (q = 0), so the pool holds the seed alone in both orders and
    # the planned task is the same: every action earns what it earns in the paper's order
    script = math_script(question_score="1")
    seq = play_round(make_env(), script)
    wide = play_round(make_env(turn_order="interleaved"), script)
    assert _phases(seq) == [
        ("challenger_0", "challenge"),
        ("critic_0", "review_question"),
        ("planner_0", "plan"),
        ("critic_0", "review_plan"),
        ("solver_0", "solve"),
        ("solver_0", "solve"),
    ]
    assert _phases(wide) == [
        ("challenger_0", "challenge"),
        ("planner_0", "plan"),
        ("critic_0", "review_question"),
        ("critic_0", "review_plan"),
        ("solver_0", "solve"),
        ("solver_0", "solve"),
    ]
    assert sorted((a, p, r) for a, p, r, _ in wide) == sorted((a, p, r) for a, p, r, _ in seq)
    # q = 0 < alpha: the challenger earns the gate's reward, not a difficulty term
    ((_, ch_reward, ch_info),) = by_phase(wide)["challenge"]
    assert ch_info["accepted"] is False and ch_info["terms"]["d"] is None


def test_interleaved_round_probes_before_the_solves_and_pays_as_the_paper_order():
    wide = play_round(make_env(turn_order="interleaved"), math_script())
    assert _phases(wide) == [
        ("challenger_0", "challenge"),
        ("planner_0", "plan"),
        ("critic_0", "review_question"),
        ("critic_0", "review_plan"),
        ("solver_0", "probe"),
        ("solver_0", "probe"),
        ("solver_0", "solve"),
        ("solver_0", "solve"),
    ]
    rec = by_phase(wide)
    # the same values as test_scripted_round_rewards_known_in_advance; the planned task is
    # the seed "What is 2+3?" (drawn before this round's question joined the pool), which the
    # script answers 5: right, with the plan shown
    assert [r for _, r, _ in rec["probe"]] == pytest.approx([0.8, 0.2])
    ((_, ch_reward, _),) = rec["challenge"]
    assert ch_reward == pytest.approx(2.5 / 3)
    ((_, pl_reward, pl_info),) = rec["plan"]
    assert pl_reward == pytest.approx(0.5 / 3 + 0.5) and pl_info["plan_shown"]
    assert [r for _, r, _ in rec["solve"]] == pytest.approx([0.2 / 3 + 0.8] * 2)
    assert by_phase(wide)["solve"][0][2]["verdict"]["score"] == 1.0


def test_interleaved_turns_are_announced_with_the_observation_they_will_have():
    env = make_env(turn_order="interleaved")
    env.reset(seed=0)
    (ahead,) = env.infos["challenger_0"]["ahead"]
    assert ahead["agent"] == "planner_0" and ahead["phase"] == "plan"
    env.step("<question>What is 7*6?</question>\n<answer>42</answer>")
    assert env.agent_selection == "planner_0"
    assert env.observe("planner_0") == ahead["observation"]
    (review,) = env.infos["planner_0"]["ahead"]
    assert (review["agent"], review["phase"]) == ("critic_0", "review_question")
    env.step(PLAN)
    assert env.observe("critic_0") == review["observation"]
    (plan_review,) = env.infos["critic_0"]["ahead"]
    assert plan_review["phase"] == "review_plan"
    env.step("<score>10</score> clear.")
    assert env.observe("critic_0") == plan_review["observation"]
    (probe,) = env.infos["critic_0"]["ahead"]
    assert (probe["phase"], probe["repeats"]) == ("probe", 2)
    env.step("<score>4</score> fine.")
    assert env.observe("solver_0") == probe["observation"]
    (solve,) = env.infos["solver_0"]["ahead"]
    assert (solve["phase"], solve["repeats"]) == ("solve", 2)
    # the paper's order announces nothing
    seq = make_env()
    seq.reset(seed=0)
    assert "ahead" not in seq.infos["challenger_0"]


def test_turn_order_must_be_known():
    with pytest.raises(ValueError, match="turn_order"):
        EnvConfig(turn_order="parallel")


@pytest.mark.slow
def test_interleaved_sage_passes_protocol_checks_and_pettingzoo_tests():
    from sage_env import check_protocol

    assert check_protocol("sage", turn_order="interleaved") == []

    def mk():
        return sage_env.env(
            EnvConfig(solver_samples=2, turn_order="interleaved"), seeds=[MATH_SEED, CODE_SEED]
        )

    api_test(mk(), num_cycles=30)
    seed_test(mk, num_cycles=30)

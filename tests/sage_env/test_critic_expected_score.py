"""The expected-score gate: ``RewardConfig.critic_score_estimate = "expected"``.

A critic reply can carry the policy's distribution over its score (``ScoredReply``); under
``"expected"`` the gates use ``sum_s s p(s)``, the critic is still paid for its sampled reply,
and anything malformed falls back to the sampled score.
"""

import math

import pytest
import torch

import sage_env
from learners.policy import HFPolicy, SamplingConfig
from learners.rollout import RolloutDriver
from learners.training.monitors import CriticProbe
from sage_env import EnvConfig, RewardConfig
from sage_env.diagnostics import critic_probe
from sage_env.text import parsing
from sage_env.text.parsing import ScoredReply, expected_critic_score
from tests.scripted import MATH_SEED, play_round

PLAN = "<plan>\n1. Read the problem.\n2. Compute.\n</plan>"


def onehot(score, weight=1.0):
    probs = [0.0] * 10
    probs[score - 1] = weight
    return probs


def script(question_reply, plan_reply="<score>4</score> The plan is fine."):
    def play(agent, phase, obs, n):
        if phase == "challenge":
            return "<question>What is 7*6?</question>\n<answer>42</answer>"
        if phase == "review_question":
            return question_reply
        if phase == "probe":
            return "\\boxed{42}" if n == 0 else "\\boxed{41}"
        if phase == "plan":
            return PLAN
        if phase == "review_plan":
            return plan_reply
        if phase == "solve":
            return "\\boxed{42}" if "7*6" in obs["user"] else "\\boxed{5}"
        raise AssertionError(phase)

    return play


def make_env(estimate="expected", **rewards):
    cfg = EnvConfig(
        domains=("math",),
        solver_samples=2,
        rewards=RewardConfig(critic_score_estimate=estimate, **rewards),
    )
    return sage_env.env(cfg, seeds=[MATH_SEED])


def phase(records, name):
    return [(agent, reward, info) for agent, ph, reward, info in records if ph == name]


# ---------------------------------------------------------------- parsing
def test_expected_score_is_the_mean_of_the_renormalised_distribution():
    assert expected_critic_score(onehot(7)) == 7.0
    assert expected_critic_score(onehot(10, 0.2)) == 10.0  # renormalised
    half = [0.0] * 10
    half[1], half[7] = 0.25, 0.25  # scores 2 and 8, mass 0.5 elsewhere
    assert expected_critic_score(half) == pytest.approx(5.0)
    assert expected_critic_score(tuple(0.1 for _ in range(10))) == pytest.approx(5.5)


@pytest.mark.parametrize(
    "bad",
    [
        None,
        "0123456789",
        [0.1] * 9,
        [0.1] * 11,
        [0.0] * 10,
        [float("nan")] + [0.1] * 9,
        [float("inf")] + [0.1] * 9,
        [-0.5] + [0.1] * 9,
        [float("inf")] * 10,
        ["x"] * 10,
        object(),
        7,
    ],
)
def test_malformed_distributions_are_refused_not_raised(bad):
    assert expected_critic_score(bad) is None


def test_scored_reply_is_a_str_that_keeps_its_distribution():
    r = ScoredReply("<score>3</score> ok", onehot(9))
    assert isinstance(r, str) and r == "<score>3</score> ok"
    assert r.score_probs == tuple(onehot(9))
    assert parsing.parse_critic_score(r) == 3.0
    assert ScoredReply("x", 5).score_probs is None  # not iterable: no distribution
    assert ScoredReply("x").score_probs is None


# ---------------------------------------------------------------- environment
def test_review_phases_ask_for_a_distribution_only_under_expected():
    for estimate, asked in (("expected", True), ("sampled", False)):
        env = make_env(estimate)
        seen = {}
        env.reset(seed=0)
        for agent in env.agent_iter(max_iter=50):
            _obs, _r, term, trunc, info = env.last()
            if term or trunc:
                env.step(None)
                continue
            seen[info["phase"]] = bool(info.get("score_probs"))
            play = script("<score>9</score> The question is good.")
            env.step(play(agent, info["phase"], _obs, 0))
        assert seen["review_question"] is asked and seen["review_plan"] is asked
        assert not any(v for k, v in seen.items() if not k.startswith("review"))


def test_the_gate_reads_the_expected_score_and_the_critic_is_paid_for_its_sample():
    # sampled score 2 (q = 1/9, rejected), distribution all on 9 (q = 8/9, accepted)
    reply = ScoredReply("<score>2</score> The question is weak.", onehot(9))
    rec = play_round(make_env(), script(reply))
    ((_, critic_reward, critic_info),) = phase(rec, "review_question")
    assert critic_info["q"] == pytest.approx(8 / 9)
    assert critic_info["score_estimate"] == "expected"
    assert critic_info["expected_raw_score"] == 9.0
    assert critic_info["sampled_score"] == pytest.approx(1 / 9)
    assert critic_info["raw_score"] == 2.0
    assert critic_reward == 1.0  # format only, from the text
    ((_, ch_reward, ch_info),) = phase(rec, "challenge")
    assert ch_info["accepted"] and ch_info["terms"]["q"] == pytest.approx(8 / 9)
    assert ch_reward == pytest.approx((8 / 9 + 0.5 + 1.0) / 3)


def test_the_paper_default_ignores_a_distribution():
    reply = ScoredReply("<score>2</score> The question is weak.", onehot(9))
    rec = play_round(make_env("sampled"), script(reply))
    ((_, _, critic_info),) = phase(rec, "review_question")
    assert critic_info["q"] == pytest.approx(1 / 9)
    assert "score_estimate" not in critic_info
    ((_, _, ch_info),) = phase(rec, "challenge")
    assert not ch_info["accepted"]


@pytest.mark.parametrize(
    "reply",
    [
        "<score>2</score> A plain str, as a human or a scripted player writes.",
        ScoredReply("<score>2</score> The distribution is not a number.", [float("nan")] * 10),
        ScoredReply("<score>2</score> The distribution is negative.", [-1.0] + [0.0] * 8 + [5.0]),
        ScoredReply("<score>2</score> The distribution is too short.", [0.0, 1.0]),
        ScoredReply("<score>2</score> The distribution has no mass.", [0.0] * 10),
    ],
)
def test_a_missing_or_forged_distribution_falls_back_to_the_sampled_score(reply):
    rec = play_round(make_env(), script(reply))
    ((_, critic_reward, critic_info),) = phase(rec, "review_question")
    assert critic_info["score_estimate"] == "sampled"
    assert critic_info["q"] == pytest.approx(1 / 9)
    assert critic_reward == 1.0
    ((_, _, ch_info),) = phase(rec, "challenge")
    assert not ch_info["accepted"]


def test_an_unparseable_reply_earns_no_score_format_reward_even_with_a_distribution():
    rec = play_round(make_env(), script(ScoredReply("I think it is great.", onehot(10))))
    ((_, critic_reward, critic_info),) = phase(rec, "review_question")
    # soft format: score part 0 (weight 0.75), rationale part 1 (weight 0.25)
    assert critic_reward == 0.25 and critic_info["raw_score"] is None
    assert critic_info["q"] == 1.0  # the gate still reads the distribution


def test_plan_grounding_pays_the_sampled_p_while_the_plan_gate_reads_the_expected_one():
    # sampled plan score 1 (p = 0: plan hidden); distribution on 10 (p = 1: plan shown)
    plan_reply = ScoredReply("<score>1</score> The plan is bad.", onehot(10))
    env = make_env(critic_plan_grounding=1.0)
    question_reply = ScoredReply("<score>9</score> The question is good.", onehot(9))
    rec = play_round(env, script(question_reply, plan_reply))
    ((_, pl_reward, pl_info),) = phase(rec, "plan")
    assert pl_info["plan_shown"]
    assert pl_reward == pytest.approx(0.5 * 1.0 + 0.5 * 1.0)
    solves = phase(rec, "solve")
    assert all(info["plan_shown"] for _, _, info in solves)
    s_mean = sum(info["verdict"]["score"] for _, _, info in solves) / len(solves)
    ((_, critic_plan_reward, cp_info),) = [r for r in phase(rec, "review_plan")]
    # paid for how well its *sampled* p = 0 predicted s: 1 - |0 - s|
    assert critic_plan_reward == pytest.approx(1.0 - abs(0.0 - s_mean))
    assert cp_info["p"] == 1.0 and cp_info["score_estimate"] == "expected"


def test_expected_estimate_is_validated():
    with pytest.raises(ValueError, match="critic_score_estimate"):
        EnvConfig(rewards=RewardConfig(critic_score_estimate="mean"))


# ---------------------------------------------------------------- learner side
@pytest.fixture(scope="module")
def policy(tiny_path):
    return HFPolicy(tiny_path, device="cpu", seed=0)


def critic_observation():
    env = make_env()
    env.reset(seed=0)
    env.step("<question>What is 7*6?</question>\n<answer>42</answer>")
    assert env.unwrapped.infos["critic_0"].get("score_probs")
    return env.observe("critic_0")


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_score_distribution_equals_the_learners_token_logprobs(policy, temperature):
    obs = critic_observation()
    assert obs["prefix"].endswith("<score>")
    (probs,) = policy.score_distribution([obs], temperature=temperature)
    prompt = policy.encode_prompt(obs, 2048)
    tok = policy.tokenizer

    def p_of(text):
        ids = tok(text, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logp, mask = policy.token_logprobs([prompt], [ids], temperature)
        return math.exp(float((logp * mask).sum()))

    for s in range(2, 10):
        assert probs[s - 1] == pytest.approx(p_of(str(s)), rel=1e-4)
    assert probs[9] == pytest.approx(p_of("10"), rel=1e-4)
    assert probs[0] == pytest.approx(p_of("1") - p_of("10"), rel=1e-4)
    assert 0.0 < sum(probs) <= 1.0 + 1e-6


def test_score_distribution_is_the_same_batched_and_alone(policy):
    obs = critic_observation()
    short = dict(obs, user=obs["user"][:40])
    batched = policy.score_distribution([obs, short, obs])
    alone = policy.score_distribution([short])
    assert batched[0] == pytest.approx(batched[2], abs=1e-6)
    assert batched[1] == pytest.approx(alone[0], abs=1e-5)
    assert policy.score_distribution([]) == []


def test_the_rollout_driver_hands_reviews_their_distribution(policy):
    envs = [make_env(), make_env()]
    driver = RolloutDriver(envs, policy, SamplingConfig(max_new_tokens=8, temperature=1.0))
    result = driver.collect(seeds=[0, 1])
    reviews = [t for t in result.transitions if t.phase.startswith("review")]
    assert reviews and all(t.outcome["score_estimate"] == "expected" for t in reviews)
    for t in reviews:
        value = t.outcome["expected_raw_score"]
        assert 1.0 <= value <= 10.0
        key = "q" if t.phase == "review_question" else "p"
        if key in t.outcome:
            assert t.outcome[key] == pytest.approx((value - 1) / 9, abs=1e-4)
    others = [t for t in result.transitions if not t.phase.startswith("review")]
    assert others and all("score_estimate" not in t.outcome for t in others)
    assert all(type(t.text) is str for t in result.transitions)  # transitions keep plain text


def _probe_cfg():
    from learners.training.config import TrainConfig

    return TrainConfig(
        critic_probe_size=8,
        gate_calibration=True,
        env=EnvConfig(rewards=RewardConfig(critic_score_estimate="expected")),
    )


class Judge:
    """Writes score 5 for everything; its distribution knows intact from corrupted."""

    def __init__(self, probe, readable=True):
        self.probe, self.readable, self.generated = probe, readable, 0

    def generate(self, observations, sampling, **kw):
        from learners.policy import Completion

        self.generated += len(observations)
        return [
            Completion(prompt_ids=[], completion_ids=[], logprobs=[], text="<score>5</score>")
            for _ in observations
        ]

    def score_distribution(self, observations, temperature=1.0, max_prompt_tokens=0):
        if not self.readable:  # a tokenizer whose scores are not single tokens
            return [None] * len(observations)
        intact = {it.observation["user"]: it.intact for it in self.probe.items}
        return [onehot(8 if intact[o["user"]] else 3) for o in observations]


def test_the_probe_calibrates_on_expected_scores_without_sampling():
    cfg = _probe_cfg()
    probe = CriticProbe(cfg, sage_env.load_seeds())
    judge = Judge(probe)
    envs = [sage_env.env(cfg.env)]
    report = probe(judge, envs)
    assert judge.generated == 0  # one forward pass, no sampled replies
    assert report["critic/auc"] == 1.0 and "critic/probe_parse_rate" not in report
    assert report["gate/youden"] == 1.0
    assert report["gate/alpha"] == pytest.approx(7 / 9)
    assert envs[0].unwrapped.config.rewards.alpha == pytest.approx(7 / 9)


def test_the_probe_shows_progress_in_batches_and_reports_its_seconds(capsys):
    """With a progress bar the probe reads its items 16 at a time (the policy's own forward
    batch) and its figures are those of the run without one."""
    import dataclasses

    cfg = dataclasses.replace(_probe_cfg(), critic_probe_size=40)
    quiet = CriticProbe(cfg, sage_env.load_seeds())
    shown = CriticProbe(cfg, sage_env.load_seeds(), progress=True)
    assert len(shown.items) == len(quiet.items) > CriticProbe.BATCH
    judge = Judge(shown)
    sizes = []
    read = judge.score_distribution
    judge.score_distribution = lambda obs, **kw: sizes.append(len(obs)) or read(obs, **kw)
    a = shown(judge, [sage_env.env(cfg.env)])
    b = quiet(Judge(quiet), [sage_env.env(cfg.env)])
    n = len(shown.items)
    assert sizes == [16] * (n // 16) + ([n % 16] if n % 16 else [])
    assert "critic probe" in capsys.readouterr().err  # the bar, on stderr
    assert a.pop("time/probe_s") >= 0.0 and b.pop("time/probe_s") >= 0.0
    assert a == b


def test_the_probe_samples_when_the_policy_cannot_read_a_distribution():
    cfg = _probe_cfg()
    probe = CriticProbe(cfg, sage_env.load_seeds())
    judge = Judge(probe, readable=False)
    report = probe(judge, [sage_env.env(cfg.env)])
    assert judge.generated == len(probe.items)
    assert report["critic/auc"] == 0.5 and report["critic/probe_parse_rate"] == 1.0
    assert report["gate/youden"] == 0.0  # all scores tie: nothing to calibrate on


def test_probe_threshold_refuses_sampled_noise_but_finds_the_expected_split():
    items = critic_probe.probe_set(sage_env.load_seeds(), 8, seed=0)
    replies = [ScoredReply("<score>5</score>", onehot(8 if it.intact else 3)) for it in items]
    assert critic_probe.best_threshold(items, replies) is None
    assert critic_probe.best_threshold(items, replies, estimate="expected") == pytest.approx(7 / 9)
    rep = critic_probe.discrimination(items, replies, estimate="expected")
    assert rep.auc == 1.0 and rep.parse_rate == 1.0
    assert torch.isfinite(torch.tensor(rep.gap))


def test_huge_but_finite_weights_do_not_overflow():
    assert expected_critic_score([1e308] * 10) == pytest.approx(5.5)
    assert expected_critic_score([5e-324] + [0.0] * 9) == 1.0  # subnormal mass still counts


def test_the_mae_judge_scores_answers_by_its_expected_score():
    cfg = EnvConfig(
        protocol="mae",
        domains=("math",),
        solver_samples=1,
        rewards=RewardConfig(critic_score_estimate="expected"),
    )
    env = sage_env.env(cfg, seeds=[MATH_SEED])

    def play(agent, phase, obs, n):
        if phase == "propose":
            return "<question>What is 7*6?</question>\n<answer>42</answer>"
        if phase == "judge_question":
            return ScoredReply("<score>9</score> The question is good.", onehot(9))
        if phase == "judge_answer":
            return ScoredReply("<score>1</score> The answer is wrong.", onehot(10))
        if phase == "solve":
            return "\\boxed{41}"
        raise AssertionError(phase)

    rec = play_round(env, play)
    ((_, _, judged),) = phase(rec, "judge_answer")
    assert judged["j"] == 1.0 and judged["score_estimate"] == "expected"
    assert judged["sampled_score"] == 0.0
    ((_, solver_reward, solver_info),) = phase(rec, "solve")
    assert solver_info["terms"]["j"] == 1.0


def test_without_the_score_prefix_nothing_is_asked_and_the_gate_samples():
    cfg = EnvConfig(
        domains=("math",),
        solver_samples=2,
        prefixes=False,
        rewards=RewardConfig(critic_score_estimate="expected"),
    )
    env = sage_env.env(cfg, seeds=[MATH_SEED])
    env.reset(seed=0)
    env.step("<question>What is 7*6?</question>\n<answer>42</answer>")
    assert env.observe("critic_0")["prefix"] == ""
    assert "score_probs" not in env.unwrapped.infos["critic_0"]
    rec = play_round(env, script("<score>2</score> The question is weak."))
    ((_, _, critic_info),) = phase(rec, "review_question")
    assert critic_info["q"] == pytest.approx(1 / 9)


def test_the_probe_says_what_it_runs(caplog):
    # the start-up probe runs before the progress bar, with none of its own: it names itself
    cfg = _probe_cfg()
    probe = CriticProbe(cfg, sage_env.load_seeds())
    with caplog.at_level("INFO", logger="learners.training.monitors"):
        report = probe(Judge(probe), [sage_env.env(cfg.env)])
    assert report["critic/auc"] == 1.0
    assert f"critic probe: scoring {len(probe.items)} seed questions" in caplog.text
    assert len(probe.items) == 8

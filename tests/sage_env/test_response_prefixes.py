"""Response prefixes end to end, per-phase budgets, critic format, probe and warm-up data."""

import io

import pytest
import torch

import sage_env
from learners.policy import HFPolicy, SamplingConfig
from learners.rollout import RolloutDriver
from learners.training.warmup import WarmupConfig, run_warmup, supervised_step
from sage_env import EnvConfig
from sage_env.diagnostics import critic_probe
from sage_env.interactive.play import human_player
from sage_env.protocols.demonstrations import build_demonstrations, overlapping, plan_steps
from sage_env.text import parsing
from tests.scripted import CODE_SEED, MATH_SEED


@pytest.fixture
def policy(tiny_path):
    return HFPolicy(tiny_path, device="cpu", seed=0)


def first_obs(**kw):
    env = sage_env.env(seeds=[MATH_SEED], **kw)
    env.reset(seed=0)
    return env, env.observe(env.agent_selection)


def test_every_protocol_phase_has_the_documented_prefix():
    seen = {}
    for protocol in ("sage", "azr-qa", "mae", "rlvr"):
        env = sage_env.env(seeds=[MATH_SEED, CODE_SEED], protocol=protocol, solver_samples=1)
        for seed in range(6):
            env.reset(seed=seed)
            for agent in env.agent_iter():
                obs, _, term, trunc, info = env.last()
                if term or trunc:
                    env.step(None)
                    continue
                seen[(protocol, info["phase"], info["domain"])] = obs["prefix"]
                assert obs in env.observation_space(agent)
                env.step(obs["prefix"] + "9</score> fine and clear here")
        env.close()
    assert seen[("sage", "challenge", "math")] == "<question>"
    assert seen[("azr-qa", "propose", "code")] == "<question>"
    assert seen[("sage", "plan", "math")] == "<plan>\n1."
    assert seen[("mae", "judge_answer", "math")] == "<score>"
    assert seen[("sage", "review_plan", "code")] == "<score>"
    assert seen[("rlvr", "solve", "code")] == "```python\n"
    assert seen[("rlvr", "solve", "math")] == ""


def test_prefixes_off_and_per_phase_overrides():
    _, obs = first_obs(prefixes=False)
    assert obs["prefix"] == ""
    _, obs = first_obs(prefix_overrides={"challenge": "<question>Q:"})
    assert obs["prefix"] == "<question>Q:"
    with pytest.raises(ValueError, match="prefix_overrides"):
        EnvConfig(prefix_overrides={"challenge": 3})


def test_prefix_contract_observation_to_policy_to_action_to_parse(policy):
    """The policy writes the prefix after the generation prompt; the env parses prefix+text."""
    env, obs = first_obs(solver_samples=1)
    assert obs["prefix"] == "<question>"
    comp = policy.generate([obs], SamplingConfig(max_new_tokens=6))[0]
    template = policy.tokenizer.apply_chat_template(
        [{"role": "system", "content": obs["system"]}, {"role": "user", "content": obs["user"]}],
        tokenize=False,
        add_generation_prompt=True,
    )
    decoded_prompt = policy.tokenizer.decode(comp.prompt_ids)
    assert decoded_prompt.endswith("<|im_start|>assistant\n<question>")
    assert decoded_prompt == template + "<question>"
    assert comp.action == "<question>" + comp.text and comp.prefix == "<question>"
    # a scripted completion of the prefix parses as a whole proposal
    assert parsing.parse_challenger(
        obs["prefix"] + "What is 17 * 3?</question>\n<answer>51</answer>", "math"
    ).valid


def test_rollout_actions_carry_the_prefix_and_its_tokens_are_prompt(policy):
    envs = [sage_env.env(seeds=[MATH_SEED], solver_samples=1, render_mode="ansi")]
    driver = RolloutDriver(envs, policy, SamplingConfig(max_new_tokens=5))
    result = driver.collect([0])
    challenge = [t for t in result.transitions if t.phase == "challenge"][0]
    assert challenge.prefix == "<question>" and challenge.text.startswith("<question>")
    prefix_ids = policy.tokenizer("<question>", add_special_tokens=False)["input_ids"]
    assert challenge.prompt_ids[-len(prefix_ids) :] == prefix_ids  # prefix is prompt, no loss
    assert len(challenge.completion_ids) == len(challenge.logprobs) <= 5
    assert "--- prefix ---\n<question>" in result.transcripts[0]


def test_prefix_tokens_never_get_loss_weight(policy):
    """The loss reads log-probs of generated tokens only; the prefix is conditioning."""
    from learners.policy.logprobs import token_logprobs

    obs = {"system": "s", "user": "u", "prefix": "<score>"}
    prompt = policy.encode_prompt(obs, 512)
    prefix_ids = policy.tokenizer("<score>", add_special_tokens=False)["input_ids"]
    assert prompt[-len(prefix_ids) :] == prefix_ids
    comp = policy.tokenizer("7</score> ok", add_special_tokens=False)["input_ids"]
    logp, mask = token_logprobs(policy.model, [prompt], [comp], policy.tokenizer.pad_token_id)
    assert logp.shape == (1, len(comp)) and mask.sum().item() == len(comp)
    # the same numbers from a full forward: position len(prompt) - 1 + j predicts comp[j]
    with torch.no_grad():
        ids = torch.tensor([prompt + comp])
        full = torch.log_softmax(policy.model(input_ids=ids).logits.float(), dim=-1)[0]
    expected = [full[len(prompt) - 1 + j, tok].item() for j, tok in enumerate(comp)]
    assert logp[0].tolist() == pytest.approx(expected, abs=1e-4)


def test_truncated_flag_and_per_phase_budgets(policy):
    envs = [sage_env.env(seeds=[MATH_SEED], solver_samples=1) for _ in range(2)]
    budgets = {"challenge": 3, "review_question": 2, "plan": 4}
    driver = RolloutDriver(envs, policy, SamplingConfig(max_new_tokens=7), budgets)
    result = driver.collect([0, 1])
    for t in result.transitions:
        assert len(t.completion_ids) <= budgets.get(t.phase, 7)
        stopped = bool(t.completion_ids) and t.completion_ids[-1] in policy.eos_ids
        assert t.truncated == (not stopped and len(t.completion_ids) == budgets.get(t.phase, 7))
    with pytest.raises(ValueError, match="budgets"):
        RolloutDriver(envs, policy, SamplingConfig(), {"plan": 0})


def test_rows_of_one_batch_stop_at_their_own_budget(policy):
    _, obs = first_obs()
    sampling = SamplingConfig(max_new_tokens=9, min_new_tokens=9)  # no EOS: budgets decide
    comps = policy.generate([obs, obs, obs], sampling, budgets=[2, 5, 9])
    assert [len(c.completion_ids) for c in comps] == [2, 5, 9]
    assert [len(c.logprobs) for c in comps] == [2, 5, 9]
    assert all(c.truncated for c in comps)
    with pytest.raises(ValueError, match="budgets"):
        policy.generate([obs], sampling, budgets=[2, 3])


def test_stop_string_ends_a_row_without_truncation(policy):
    _, obs = first_obs()
    greedy = SamplingConfig(max_new_tokens=12, min_new_tokens=12, do_sample=False)
    (full,) = policy.generate([obs], greedy)
    ids = full.completion_ids
    stop = policy.tokenizer.decode(ids[:4], skip_special_tokens=True)[-3:]
    assert stop.strip(), "the tiny model should write visible text"
    cut, other = policy.generate([obs, obs], greedy, stops=[(stop,), ()])
    assert cut.text.endswith(stop) and not cut.truncated
    assert len(cut.completion_ids) <= 4 and cut.completion_ids == ids[: len(cut.completion_ids)]
    assert cut.logprobs == pytest.approx(full.logprobs[: len(cut.completion_ids)], abs=1e-5)
    assert other.completion_ids == ids and other.truncated  # the other row ran on


def test_driver_sends_one_call_per_tick_with_phase_stops(policy):
    calls = []

    class Spy:
        def generate(self, observations, sampling, budgets=None, stops=None):
            calls.append((len(observations), list(budgets), list(stops)))
            return policy.generate(observations, sampling, budgets, stops)

    envs = [sage_env.env(seeds=[MATH_SEED, CODE_SEED], solver_samples=1) for _ in range(3)]
    driver = RolloutDriver(
        envs,
        Spy(),
        SamplingConfig(max_new_tokens=5),
        {"challenge": 3, "plan": 4},
        {"plan": ("</plan>",), "solve/code": ("```",)},
    )
    driver.collect([0, 1, 2])
    assert calls and all(n == len(b) == len(st) for n, b, st in calls)
    assert driver.stops("solve", "code") == ("```",) and driver.stops("solve", "math") == ()
    assert driver.stops("plan", "math") == ("</plan>",)
    assert calls[0][1] == [3, 3, 3]  # every env starts with a challenge


def test_human_player_sees_prefix_before_typing_and_types_the_rest(monkeypatch, capsys):
    env = sage_env.env(seeds=[MATH_SEED], solver_samples=1)
    env.reset(seed=0)
    obs, _, _, _, info = env.last()
    monkeypatch.setattr(
        "sys.stdin", io.StringIO("What is 6*7?</question>\n<answer>42</answer>\n.\n")
    )
    action = human_player("challenger_0", obs, info, env)
    out = capsys.readouterr().out
    assert "Reference problem" in out and out.rstrip().endswith("<question>")
    assert action == "<question>What is 6*7?</question>\n<answer>42</answer>"
    env.close()


def test_critic_format_needs_score_and_one_sentence():
    assert parsing.critic_format_score("<score>8</score> The problem is clear.") == 1.0
    assert parsing.critic_format_score("<score>8</score>") == 0.75  # no rationale
    assert parsing.critic_format_score("<score>8</score> " + "word " * 60) == 0.75  # an essay
    assert parsing.critic_format_score("<score>eight</score> It is fine, I think.") == 0.625
    assert parsing.critic_format_score("It is fine, I think.") == 0.25
    assert parsing.critic_format_binary("<score>8</score>") == 0.0
    assert parsing.critic_format_binary("<score>8</score> It is clear enough.") == 1.0
    assert parsing.critic_rationale("<score>8</score> It is clear.") == "It is clear."


def test_critic_prompts_anchor_the_whole_scale_not_one_example_score():
    import re

    for obs in (
        sage_env.text.prompts.critic_question("What is 2+2?", "math"),
        sage_env.text.prompts.critic_plan(MATH_SEED, "1. add\n2. check"),
        sage_env.text.prompts.judge_answer(MATH_SEED, "4"),
    ):
        anchors = [int(x) for x in re.findall(r"<score>(\d+)</score>", obs["user"])]
        assert len(anchors) == 3 and min(anchors) <= 3 and max(anchors) >= 8


def test_probe_auc_counts_intact_over_corrupted():
    assert critic_probe.auc([1.0, 0.8], [0.1, 0.2]) == 1.0
    assert critic_probe.auc([0.1], [0.8]) == 0.0
    assert critic_probe.auc([0.5], [0.5]) == 0.5
    seeds = sage_env.load_seeds()
    items = critic_probe.probe_set(seeds, n=12, seed=3)
    assert len(items) == 12 and sum(it.intact for it in items) == 6
    assert all(it.observation["prefix"] == "<score>" for it in items)
    off = critic_probe.probe_set(seeds, n=4, config=EnvConfig(prefixes=False))
    assert {it.observation["prefix"] for it in off} == {""}
    assert items == critic_probe.probe_set(seeds, n=12, seed=3)  # a fixed probe
    oracle = [
        "9</score> intact and clear." if it.intact else "2</score> it is broken." for it in items
    ]
    rep = critic_probe.discrimination(items, ["<score>" + r for r in oracle])
    assert rep.auc == 1.0 and rep.parse_rate == 1.0 and rep.gap == pytest.approx(7 / 9)
    assert rep.accept_intact == 1.0 and rep.accept_corrupted == 0.0
    constant = critic_probe.discrimination(items, ["<score>8</score> ok then."] * 12)
    assert constant.auc == 0.5 and constant.accept_corrupted == 1.0


def test_corruptions_change_the_question():
    import random

    q = "A farmer has 12 cows and buys 7 more. How many cows does the farmer have now?"
    rng = random.Random(0)
    assert sorted(critic_probe.corrupt(q, "shuffled", "", rng).split()) == sorted(q.split())
    assert critic_probe.corrupt(q, "shuffled", "", rng) != q
    assert len(critic_probe.corrupt(q, "truncated", "", rng)) < len(q) // 2 + 5
    assert "banana" in critic_probe.corrupt(q, "spliced", "x y z banana split", rng)
    with pytest.raises(ValueError):
        critic_probe.corrupt(q, "nope", "", rng)


def test_warmup_demonstrations_exclude_validation_and_parse_as_replies():
    seeds, val = sage_env.load_seeds(), sage_env.load_validation()
    demos = build_demonstrations(
        seeds,
        n=80,
        mix={"challenger": 0.4, "critic": 0.3, "planner": 0.2, "solver": 0.1},
        exclude=val,
    )
    assert overlapping(demos, val) == []
    roles = {d.role for d in demos}
    assert roles == {"challenger", "critic", "planner", "solver"}
    for d in demos:
        reply = d.observation["prefix"] + d.target
        if d.role == "challenger":
            domain = "code" if "<tests>" in reply else "math"
            out = parsing.parse_challenger(reply, domain)
            assert out.valid, (reply, out.reason)
            assert domain == "math" or out.solution
        elif d.role == "critic":
            assert parsing.critic_format_score(reply) == 1.0
        elif d.role == "planner":
            assert parsing.parse_plan(reply) is not None
    critic_scores = {
        parsing.parse_critic_score("<score>" + d.target) for d in demos if d.role == "critic"
    }
    assert critic_scores <= {2.0, 3.0, 8.0, 9.0} and len(critic_scores) >= 3  # never constant
    # an excluded seed never appears
    banned = seeds[:50]
    demos = build_demonstrations(seeds, n=40, exclude=banned)
    assert overlapping(demos, banned) == []


def test_plan_steps_from_a_gsm8k_solution():
    sol = "He buys 3 packs at 2 each. That is 3*2=<<3*2=6>>6 dollars.\nHe pays 6 more.\n#### 12"
    assert plan_steps(sol) == [
        "He buys 3 packs at 2 each.",
        "That is 3*2=6 dollars.",
        "He pays 6 more.",
    ]
    assert plan_steps("one") == []


@pytest.mark.slow
def test_warmup_lowers_target_nll_and_caches(policy, tmp_path, monkeypatch):
    monkeypatch.setenv("SAGE_ENV_CACHE", str(tmp_path))
    demos = build_demonstrations(sage_env.load_seeds(), n=4, mix={"critic": 1.0})
    opt = torch.optim.AdamW(policy.model.parameters(), lr=3e-3)
    first = supervised_step(policy, opt, demos, 512)
    for _ in range(8):
        last = supervised_step(policy, opt, demos, 512)
    assert last < first
    cfg = WarmupConfig(steps=2, batch_size=2, lr=1e-3)
    m = run_warmup(policy, demos, cfg, "tiny", progress=False)
    assert m["warmup/cached"] == 0.0 and m["warmup/steps"] == 2.0
    weights = {n: p.detach().clone() for n, p in policy.model.named_parameters()}
    with torch.no_grad():
        for p in policy.model.parameters():
            p.zero_()
    m2 = run_warmup(policy, demos, cfg, "tiny", progress=False)
    assert m2["warmup/cached"] == 1.0
    for n, p in policy.model.named_parameters():
        assert torch.equal(p, weights[n]), n
    assert run_warmup(policy, demos, WarmupConfig(steps=0)) == {}


def test_calibrated_gate_is_the_best_separating_threshold():
    seeds = sage_env.load_seeds()
    items = critic_probe.probe_set(seeds, n=8, seed=0)
    # intact items scored 5, corrupted 2: the gate that separates them is q = 4/9
    replies = [
        "<score>5</score> ok it is." if it.intact else "<score>2</score> no it is not."
        for it in items
    ]
    assert critic_probe.best_threshold(items, replies) == pytest.approx(4 / 9)
    # a critic that cannot tell them apart gives nothing to calibrate on
    assert critic_probe.best_threshold(items, ["<score>8</score> ok fine."] * 8) is None
    inverted = [
        "<score>2</score> ok it is." if it.intact else "<score>9</score> no." for it in items
    ]
    assert critic_probe.best_threshold(items, inverted) is None


def test_seed_quantile_fallback_is_the_level_of_intact_scores():
    seeds = sage_env.load_seeds()
    items = critic_probe.probe_set(seeds, n=8, seed=0)
    intact = [i for i, it in enumerate(items) if it.intact]
    scores = dict(zip(intact, [3, 5, 6, 8]))  # intact scores, corrupted ones all 9
    replies = [
        f"<score>{scores[i]}</score> ok it is." if i in scores else "<score>9</score> fine."
        for i in range(len(items))
    ]
    assert len(intact) == 4
    assert critic_probe.best_threshold(items, replies) is None  # corrupted outscore intact
    # the median's lower value: 3 of 4 intact seeds reach q = 4/9
    assert critic_probe.seed_quantile(items, replies, 0.5) == pytest.approx(4 / 9)
    assert critic_probe.seed_quantile(items, replies, 0.0) == pytest.approx(2 / 9)
    assert critic_probe.seed_quantile(items, replies, 1.0) == pytest.approx(7 / 9)
    # unparseable intact replies do not count; none parsed -> nothing to calibrate on
    assert critic_probe.seed_quantile(items, ["no score"] * len(items)) is None
    ones = ["<score>1</score> bad one." if it.intact else "x" for it in items]
    assert critic_probe.seed_quantile(items, ones) == critic_probe.MIN_FALLBACK_ALPHA > 0
    with pytest.raises(ValueError, match="quantile"):
        critic_probe.seed_quantile(items, replies, 1.5)


@pytest.mark.slow
def test_warmup_step_one_sequence_at_a_time_is_the_batch_mean_gradient(policy):
    # the gradient of the whole batch's mean target NLL, the step's forward one demo at a time
    demos = build_demonstrations(sage_env.load_seeds(), n=3, mix={"challenger": 1.0})
    tok = policy.tokenizer
    targets = [
        (tok(d.target, add_special_tokens=False)["input_ids"] + [tok.eos_token_id])[:1024]
        for d in demos
    ]
    prompts = [
        policy.encode_prompt(d.observation, 2048)[-(2048 - len(t)) :]
        for d, t in zip(demos, targets)
    ]
    assert len({len(p) + len(t) for p, t in zip(prompts, targets)}) > 1  # padding differs
    policy.train()
    logp, mask = policy.token_logprobs(prompts, targets, 1.0)
    want_loss = -(logp * mask).sum() / mask.sum()
    want_loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.trainable_parameters(), 1.0)
    want = [p.grad.clone() for p in policy.trainable_parameters()]
    opt = torch.optim.SGD(policy.trainable_parameters(), lr=0.0)
    got_loss = supervised_step(policy, opt, demos, 2048)
    assert got_loss == pytest.approx(float(want_loss), rel=1e-5)
    for a, b in zip(want, policy.trainable_parameters()):
        assert torch.allclose(a, b.grad, atol=1e-6, rtol=1e-4)

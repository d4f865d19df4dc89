import json

import pytest
import torch

from learners.algorithms.pg_config import PGConfig
from learners.algorithms.trr import TRRLearner
from learners.policy import HFPolicy, SamplingConfig
from learners.policy.logprobs import token_logprobs
from learners.rollout import RolloutDriver
from learners.training.config import config_from_dict, load_yaml_config
from learners.training.loop import TrainConfig, train
from learners.types import Transition
from sage_env import EnvConfig, Outcome
from tests.scripted import CODE_SEED, MATH_SEED


@pytest.fixture
def policy(tiny_path):
    return HFPolicy(tiny_path, device="cpu", seed=0)


def test_generate_returns_ids_and_matching_logprobs(policy):
    obs = [{"system": "s", "user": "héllo 😀"}, {"system": "s", "user": "a longer prompt"}]
    out = policy.generate(obs, SamplingConfig(max_new_tokens=12, temperature=1.0))
    assert len(out) == 2
    for c in out:
        assert 1 <= len(c.completion_ids) <= 12
        assert len(c.logprobs) == len(c.completion_ids)
        recomputed, _ = token_logprobs(
            policy.model, [c.prompt_ids], [c.completion_ids], policy.tokenizer.pad_token_id
        )
        assert recomputed[0, : len(c.logprobs)].tolist() == pytest.approx(c.logprobs, abs=1e-4)


def test_trr_update_moves_logprobs_in_the_direction_of_the_advantage(policy):
    obs = [{"system": "s", "user": "q"}] * 4
    comps = policy.generate(obs, SamplingConfig(max_new_tokens=8))
    before = {n: p.detach().clone() for n, p in policy.model.named_parameters()}
    rewards = [1.0, 0.0, 1.0, 0.0]
    trs = [
        Transition(
            "solver_0",
            "solver",
            "math",
            "solve",
            c.prompt_ids,
            c.completion_ids,
            c.logprobs,
            c.text,
            reward=r,
        )
        for c, r in zip(comps, rewards)
    ]

    def seq_logp():
        lp, mask = token_logprobs(
            policy.model,
            [t.prompt_ids for t in trs],
            [t.completion_ids for t in trs],
            policy.tokenizer.pad_token_id,
        )
        return (lp * mask).sum(1)

    with torch.no_grad():
        lp0 = seq_logp()
    learner = TRRLearner(policy, PGConfig(lr=1e-3, gradient_checkpointing=False))
    learner.observe(trs)
    metrics = learner.update()
    assert metrics["num_sequences"] == 4.0 and learner.buffer == []
    assert metrics["adv_abs_mean"] == pytest.approx(1.0, abs=1e-4)
    changed = sum(not torch.equal(before[n], p) for n, p in policy.model.named_parameters())
    assert changed > 0
    with torch.no_grad():
        delta = seq_logp() - lp0
    # sequences with positive advantage gain log-probability, relative to the negative ones
    assert delta[0] > 0 and delta[2] > 0
    assert min(delta[0], delta[2]) > max(delta[1], delta[3])


def test_zero_variance_batch_leaves_weights_unchanged(policy):
    comps = policy.generate([{"system": "s", "user": "q"}] * 2, SamplingConfig(max_new_tokens=4))
    before = [p.detach().clone() for p in policy.model.parameters()]
    learner = TRRLearner(policy, PGConfig(lr=1e-2, gradient_checkpointing=False))
    learner.observe(
        [
            Transition(
                "critic_0",
                "critic",
                "code",
                "review_plan",
                c.prompt_ids,
                c.completion_ids,
                c.logprobs,
                c.text,
                reward=0.5,
            )
            for c in comps
        ]
    )
    learner.update()
    assert all(torch.equal(a, b) for a, b in zip(before, policy.model.parameters()))


def test_rollout_driver_batches_envs_and_credits_rewards(policy):
    import sage_env

    envs = [
        sage_env.env(EnvConfig(solver_samples=2), seeds=[MATH_SEED, CODE_SEED], render_mode="ansi")
        for _ in range(3)
    ]
    calls = []
    inner = policy.generate

    def spy(observations, sampling):
        calls.append(len(observations))
        return inner(observations, sampling)

    policy.generate = spy
    result = RolloutDriver(envs, policy, SamplingConfig(max_new_tokens=6)).collect([0, 1, 2])
    assert calls[0] == 3  # one batched call for the three challengers
    assert sum(calls) == len(result.transitions)  # every completion sampled once, used once
    assert len(calls) <= result.ticks  # a tick answered from pre-sampled repeats calls nothing
    solves = [t for t in result.transitions if t.phase == "solve"]
    assert len(solves) == 6 and 6 in calls  # k = 2 attempts x 3 envs in one call
    roles = {t.role for t in result.transitions}
    assert {"challenger", "planner", "solver"} <= roles
    assert all(t.outcome is not None for t in result.transitions)  # every action was credited
    assert all(len(t.logprobs) == len(t.completion_ids) for t in result.transitions)
    assert all("challenge" in text for text in result.transcripts)


@pytest.mark.slow
def test_train_writes_artifacts_and_resumes(tiny_path, tmp_path):
    cfg = TrainConfig(
        model=tiny_path,
        out=str(tmp_path / "run"),
        steps=2,
        rounds_per_step=2,
        max_new_tokens=8,
        device="cpu",
        env=EnvConfig(solver_samples=1),
        learner=PGConfig(lr=1e-3, gradient_checkpointing=False),
    )
    train(cfg, progress=False)
    out = tmp_path / "run"
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert rows[-1]["pool/size"] >= 500
    for name in (
        "config.yaml",
        "pool.jsonl",
        "training.png",
        "checkpoints/step_000002/state.json",
        "checkpoints/step_000002/model/model.safetensors",
        "transcripts/step_000001.txt",
    ):
        assert (out / name).exists(), name
    assert list((out / "tb").iterdir())
    with pytest.raises(FileExistsError):
        train(cfg, progress=False)
    cfg.steps, cfg.resume = 3, True
    train(cfg, progress=False)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_000002", "step_000003"]


def test_config_overlay_and_errors(tmp_path):
    cfg = config_from_dict(
        {
            "steps": 7,
            "learner": {"lr": 0.5},
            "env": {"rewards": {"alpha": 0.6}, "domains": ["math"]},
        }
    )
    assert cfg.steps == 7 and cfg.learner.lr == 0.5 and cfg.env.rewards.alpha == 0.6
    assert cfg.env.domains == ("math",)
    with pytest.raises(ValueError, match="learner.lrr"):
        config_from_dict({"learner": {"lrr": 1}})
    with pytest.raises(ValueError, match="alpha"):
        config_from_dict({"env": {"rewards": {"alpha": 3}}})
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps: [1, 2\n")
    with pytest.raises(ValueError, match="not valid YAML"):
        load_yaml_config(bad)


@pytest.mark.slow
@pytest.mark.parametrize(
    "protocol, roles", [("azr", ["proposer", "solver"]), ("mae", ["proposer", "solver", "judge"])]
)
def test_baseline_protocols_train_through_the_same_learner(tiny_path, tmp_path, protocol, roles):
    cfg = TrainConfig(
        model=tiny_path,
        out=str(tmp_path / protocol),
        steps=1,
        rounds_per_step=2,
        max_new_tokens=6,
        device="cpu",
        env=EnvConfig(protocol=protocol, solver_samples=1),
        learner=PGConfig(gradient_checkpointing=False),
    )
    metrics = train(cfg, progress=False)
    assert sorted(k for k in metrics if k.startswith("reward/")) == sorted(
        f"reward/{r}" for r in roles
    )
    assert metrics["count/proposer"] == 2.0
    assert (tmp_path / protocol / "training.png").exists()


@pytest.mark.slow
def test_validation_curve_and_early_stopping(tiny_path, tmp_path):
    cfg = TrainConfig(
        model=tiny_path,
        out=str(tmp_path / "v"),
        steps=5,
        rounds_per_step=1,
        max_new_tokens=4,
        device="cpu",
        val_every=1,
        val_limit=3,
        val_max_new_tokens=4,
        early_stopping_patience=2,
        env=EnvConfig(solver_samples=1),
        learner=PGConfig(gradient_checkpointing=False),
    )
    train(cfg, progress=False)
    out = tmp_path / "v"
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    vals = [(r["step"], r["val/accuracy"]) for r in rows if "val/accuracy" in r]
    # a random tiny model scores 0 everywhere: best stays step 0, stop after 2 stale checks
    assert vals == [(0, 0.0), (1, 0.0), (2, 0.0)]
    best = json.loads((out / "checkpoints" / "best.json").read_text())
    assert best == {"step": 0, "accuracy": 0.0, "stale": 2}
    assert (out / "checkpoints" / "best" / "model.safetensors").exists()
    assert (out / "checkpoints" / "step_000002").exists()  # saved at the early stop


def test_validation_split_is_held_out():
    import sage_env

    seeds = {t.task_id for t in sage_env.load_seeds()}
    val = sage_env.load_validation()
    assert len(val) == 200 and not seeds & {t.task_id for t in val}
    assert {t.source for t in val} == {"math", "gsm8k"} and all(t.answer for t in val)


def test_skipping_zero_advantage_sequences_gives_the_same_update(tiny_path):
    import copy

    obs = [{"system": "s", "user": f"q{i}"} for i in range(6)]
    base = HFPolicy(tiny_path, device="cpu", seed=0)
    comps = base.generate(obs, SamplingConfig(max_new_tokens=6))
    # solver group has spread; critic group is constant -> advantage exactly 0, skipped
    roles = ["solver", "solver", "solver", "critic", "critic", "critic"]
    rewards = [1.0, 0.0, 0.5, 1.0, 1.0, 1.0]
    results = []
    for skip in (True, False):
        policy = copy.deepcopy(base)
        learner = TRRLearner(
            policy, PGConfig(lr=1e-3, gradient_checkpointing=False, micro_batch_size=2)
        )
        learner.skip_zero_advantage = skip
        learner.observe(
            [
                Transition(
                    f"{r}_0",
                    r,
                    "math",
                    "solve",
                    c.prompt_ids,
                    c.completion_ids,
                    c.logprobs,
                    c.text,
                    reward=w,
                )
                for c, r, w in zip(comps, roles, rewards)
            ]
        )
        metrics = learner.update()
        results.append(
            (metrics, {n: p.detach().clone() for n, p in policy.model.named_parameters()})
        )
    (m_skip, w_skip), (m_all, w_all) = results
    assert m_skip["skipped_share"] == pytest.approx(
        4 / 6
    )  # the 0.5 solver is at the mean and m_all["skipped_share"] == 0.0
    assert m_skip["loss"] == pytest.approx(m_all["loss"], abs=1e-6)
    for n in w_skip:
        assert torch.allclose(w_skip[n], w_all[n], atol=1e-6), n


def test_update_keeps_the_callers_prompt_ids(policy):
    comps = policy.generate(
        [{"system": "s", "user": "a long prompt " * 8}] * 2, SamplingConfig(max_new_tokens=4)
    )
    learner = TRRLearner(policy, PGConfig(max_seq_tokens=16, gradient_checkpointing=False))
    trs = [
        Transition(
            "solver_0",
            "solver",
            "math",
            "solve",
            list(c.prompt_ids),
            c.completion_ids,
            c.logprobs,
            c.text,
            reward=r,
        )
        for c, r in zip(comps, (1.0, 0.0))
    ]
    before = [list(t.prompt_ids) for t in trs]
    learner.observe(trs)
    assert learner.update()["num_sequences"] == 2.0
    assert [t.prompt_ids for t in trs] == before and len(before[0]) > 16


@pytest.mark.slow
def test_train_with_warmup_probe_and_calibrated_gate(tiny_path, tmp_path, monkeypatch):
    from learners.training.warmup import WarmupConfig

    monkeypatch.setenv("SAGE_ENV_CACHE", str(tmp_path / "cache"))
    cfg = TrainConfig(
        model=tiny_path,
        out=str(tmp_path / "run"),
        steps=1,
        rounds_per_step=2,
        max_new_tokens=6,
        phase_max_new_tokens={"review_question": 3},
        device="cpu",
        critic_probe_size=6,
        gate_calibration=True,
        warmup=WarmupConfig(steps=2, batch_size=2, num_demonstrations=8),
        env=EnvConfig(solver_samples=1),
        learner=PGConfig(lr=1e-3, gradient_checkpointing=False),
    )
    train(cfg, progress=False)
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1]
    assert rows[0]["warmup/steps"] == 2.0 and rows[0]["warmup/cached"] == 0.0
    assert 0.0 <= rows[0]["critic/auc"] <= 1.0 and 0.0 <= rows[1]["gate/alpha"] <= 1.0
    assert any((tmp_path / "cache" / "warmup").iterdir())  # the warmed weights were cached
    with pytest.raises(ValueError, match="gate_calibration"):
        TrainConfig(gate_calibration=True, critic_probe_size=1)
    # probe off: calibration off too (tests/learners/training/test_run_checks.py)
    TrainConfig(gate_calibration=True)


def test_rollout_metrics_proposal_rates_and_solved_acceptances():
    from learners.training.loop import rollout_metrics
    from learners.types import RolloutResult, Transition

    def prop(well_formed, valid, accepted, d=None, truncated=False):
        terms = {"q": 0.5, "d": d, "f": 1.0}
        return Transition(
            "challenger_0",
            "challenger",
            "math",
            "challenge",
            [1],
            [2, 3],
            [-1.0, -1.0],
            "x",
            reward=0.5,
            outcome=Outcome.from_dict(
                {
                    "parsed": {"well_formed": well_formed, "valid": valid},
                    "accepted": accepted,
                    "terms": terms,
                }
            ),
            truncated=truncated,
        )

    ts = [
        prop(False, False, False),
        prop(True, False, False, truncated=True),
        prop(True, True, False),
        prop(True, True, True, d=1.0),
        prop(True, True, True, d=0.5),
    ]
    m = rollout_metrics(RolloutResult(ts, [], 1.0, 0.0, 10, 1), ["challenger"])
    assert m["challenger/parse_rate"] == pytest.approx(4 / 5)
    assert m["challenger/valid_rate"] == pytest.approx(3 / 5)
    assert m["challenger/accept_rate"] == pytest.approx(2 / 5)
    assert m["challenger/accepted_solved_rate"] == pytest.approx(1 / 2)
    assert m["truncated/challenger"] == pytest.approx(1 / 5)
    assert m["reward_std/challenger"] == 0.0


class _RepeatEnv:
    """A minimal AEC-shaped env: one agent acts ``n`` times, announcing ``repeats``.

    With ``change_at`` the observation changes before that action, so samples drawn ahead
    for the old observation must be thrown away.
    """

    render_mode = None

    def __init__(self, n: int, change_at: int | None = None) -> None:
        self.n, self.change_at = n, change_at

    def reset(self, seed=None):
        self.done, self.agents, self.agent_selection = 0, ["solver_0"], "solver_0"
        self.seen: list[str] = []

    def last(self):
        version = int(self.change_at is not None and self.done >= self.change_at)
        obs = {"system": "", "user": f"task v{version}", "prefix": ""}
        info = {"phase": "solve", "domain": "math", "repeats": self.n - self.done}
        finished = self.done >= self.n
        return obs, float(self.done), finished, False, info

    def step(self, action):
        if self.done >= self.n:
            self.agents = []
            return
        self.seen.append(action)
        self.done += 1


def test_rollout_driver_samples_announced_repeats_in_one_call():
    from learners.policy import Completion

    calls: list[list[str]] = []
    counter = iter(range(10_000))

    class Counting:
        def generate(self, observations, sampling):
            calls.append([o["user"] for o in observations])
            return [
                Completion(
                    text=f"{o['user']}#{next(counter)}",
                    prompt_ids=[1],
                    completion_ids=[2],
                    logprobs=[-0.1],
                )
                for o in observations
            ]

    env = _RepeatEnv(3)
    result = RolloutDriver([env], Counting(), SamplingConfig()).collect([0])
    assert calls == [["task v0"] * 3]  # three attempts, one call
    assert env.seen == ["task v0#0", "task v0#1", "task v0#2"]  # each sample used once
    # one generation round: the two later attempts are played from the samples drawn ahead
    assert result.ticks == 1 and len(result.transitions) == 3

    calls.clear()
    env = _RepeatEnv(3, change_at=1)
    RolloutDriver([env], Counting(), SamplingConfig()).collect([0])
    # the observation changed after one action: the two samples ahead are dropped and
    # the new observation is sampled afresh (two repeats left, both in one call)
    assert calls == [["task v0"] * 3, ["task v1"] * 2]
    assert env.seen[0].startswith("task v0#")
    assert all(a.startswith("task v1#") for a in env.seen[1:])


class _ByObservation:
    """A deterministic policy: the reply is a function of the observation alone."""

    def __init__(self):
        self.calls: list[int] = []

    def generate(self, observations, sampling, budgets=None, stops=None):
        from learners.policy import Completion

        self.calls.append(len(observations))
        out = []
        for obs in observations:
            prefix = obs.get("prefix", "")
            if prefix.startswith("<question>"):
                text = "What is 7*6?</question>\n<answer>42</answer>"
            elif prefix.startswith("<score>"):
                text = "9</score> Clear."
            elif prefix.startswith("<plan>"):
                text = " Read.\n2. Compute.\n</plan>"
            else:
                text = "\\boxed{42}" if "7*6" in obs["user"] else "\\boxed{5}"
            out.append(Completion(text=text, prompt_ids=[1], completion_ids=[2], prefix=prefix))
        return out


def _play_wide(n, lookahead, order="interleaved"):
    import sage_env
    from sage_env.verifiers import MathVerifier

    slow_ok = MathVerifier(timeout_s=60.0)  # a loaded machine must not time the checks out
    envs = [
        sage_env.env(
            EnvConfig(domains=("math",), solver_samples=2, turn_order=order),
            seeds=[MATH_SEED],
            math_verifier=slow_ok,
        )
        for _ in range(n)
    ]
    policy = _ByObservation()
    driver = RolloutDriver(envs, policy, SamplingConfig(max_new_tokens=8), lookahead=lookahead)
    result = driver.collect(list(range(n)))
    return result, policy.calls


@pytest.mark.parametrize("n", [1, 3])
def test_wide_ticks_carry_every_round_of_the_step_in_three_calls(n):
    # a round: challenge, plan, 2 reviews, k = 2 probes, k = 2 solves = 8 rows
    wide, calls = _play_wide(n, lookahead=True)
    assert calls == [2 * n, 2 * n, 4 * n]  # challengers + planners, both reviews, probes + solves
    assert (wide.calls, wide.rows, wide.ticks) == (3, 8 * n, 3)
    assert wide.rows / wide.calls == 8 * n / 3
    # the same turn order played one turn at a time: a call per phase
    narrow, calls = _play_wide(n, lookahead=False)
    assert calls == [n, n, n, n, 2 * n, 2 * n]
    assert (narrow.calls, narrow.rows) == (6, 8 * n)
    # the same actions and rewards either way (the policy is a function of the observation)
    def key(r):
        return sorted((t.env_index, t.agent, t.phase, t.text, t.reward) for t in r.transitions)

    assert key(wide) == key(narrow)
    assert all(t.outcome is not None for t in wide.transitions)  # every action was credited
    # the paper's turn order announces nothing: 6 calls with lookahead on
    sequential, calls = _play_wide(n, lookahead=True, order="sequential")
    assert calls == [n, n, 2 * n, n, n, 2 * n] and sequential.rows == 8 * n


def test_wide_ticks_read_score_distributions_of_turns_drawn_ahead():
    import sage_env

    read: list[str] = []

    class Scored(_ByObservation):
        def score_distribution(self, observations, temperature=1.0, max_prompt_tokens=None):
            read.extend(o["user"][:20] for o in observations)
            return [tuple([0.0] * 9 + [1.0]) for _ in observations]  # p(score 10) = 1

    cfg = EnvConfig(
        domains=("math",), solver_samples=1, turn_order="interleaved",
        rewards={"critic_score_estimate": "expected"},
    )
    from sage_env.verifiers import MathVerifier

    slow_ok = MathVerifier(timeout_s=60.0)  # a loaded machine must not time the checks out
    envs = [sage_env.env(cfg, seeds=[MATH_SEED], math_verifier=slow_ok) for _ in range(2)]
    policy = Scored()
    result = RolloutDriver(envs, policy, SamplingConfig(max_new_tokens=8)).collect([0, 1])
    assert policy.calls == [4, 4, 4]
    assert len(read) == 4  # 2 question reviews + 2 plan reviews (one drawn ahead each)
    reviews = [t for t in result.transitions if t.phase.startswith("review")]
    # the expected score 10 (not the sampled 9) reached the gate: q = p = 1
    assert sorted(t.outcome.review.score for t in reviews) == [1.0] * 4


def test_token_budget_micro_batches():
    from learners.algorithms.micro_batches import token_chunks as _token_chunks

    lengths = [10, 20, 30, 40, 100, 300]
    order = list(range(6))
    assert _token_chunks(order, lengths, 4, 0) == [[0, 1, 2, 3], [4, 5]]
    # padded tokens = len(mb) x its longest: 3 x 30 = 90 <= 100, 4 x 40 > 100
    assert _token_chunks(order, lengths, 4, 100) == [[0, 1, 2], [3], [4], [5]]
    assert _token_chunks(order, lengths, 2, 1000) == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(ValueError, match="micro_batch_tokens"):
        PGConfig(micro_batch_tokens=-1)


def test_token_budget_gives_the_same_update(tiny_path):
    import copy

    obs = [{"system": "s", "user": "q" * (3 * i + 1)} for i in range(6)]
    base = HFPolicy(tiny_path, device="cpu", seed=0)
    comps = base.generate(obs, SamplingConfig(max_new_tokens=6))
    rewards = [1.0, 0.0, 0.5, 0.2, 0.9, 0.0]
    results = []
    for budget in (0, 40):
        policy = copy.deepcopy(base)
        learner = TRRLearner(
            policy,
            PGConfig(
                lr=1e-3, gradient_checkpointing=False, micro_batch_size=6,
                micro_batch_tokens=budget,
            ),
        )
        learner.observe(
            [
                Transition(
                    "solver_0", "solver", "math", "solve", c.prompt_ids, c.completion_ids,
                    c.logprobs, c.text, reward=w,
                )
                for c, w in zip(comps, rewards)
            ]
        )
        metrics = learner.update()
        # the gradient AdamW stepped on (an element near 0 can flip AdamW's sign, so the
        # weights are not compared)
        results.append(
            (metrics, {n: p.grad.clone() for n, p in policy.model.named_parameters()})
        )
    (m_all, g_all), (m_budget, g_budget) = results
    assert m_budget["loss"] == pytest.approx(m_all["loss"], abs=1e-6)
    assert m_budget["grad_norm"] == pytest.approx(m_all["grad_norm"], rel=1e-4)
    for n in g_all:
        assert torch.allclose(g_budget[n], g_all[n], rtol=1e-3, atol=1e-7), n


@pytest.mark.slow
@pytest.mark.parametrize(
    ("order", "calls"),
    # the tiny random model's proposals never parse: a round is challenge, plan, the plan's
    # review and k = 2 solves (5 rows); interleaved, the challengers and planners share a call
    [("sequential", 4), ("interleaved", 3)],
)
def test_train_logs_wide_ticks(tiny_path, tmp_path, order, calls):
    rounds = 3
    cfg = TrainConfig(
        model=tiny_path,
        out=str(tmp_path / "run"),
        steps=1,
        rounds_per_step=rounds,
        max_new_tokens=6,
        device="cpu",
        env=EnvConfig(solver_samples=2, domains=("math",), turn_order=order),
        learner=PGConfig(lr=1e-3, gradient_checkpointing=False),
    )
    train(cfg, progress=False)
    (row,) = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    assert row["rollout/generate_calls"] == calls
    assert row["rollout/rows_per_call"] == pytest.approx(5 * rounds / calls)


def test_per_parameter_adamw_gives_the_same_step(tiny_path):
    import copy

    obs = [{"system": "s", "user": f"q{i}"} for i in range(4)]
    base = HFPolicy(tiny_path, device="cpu", seed=0)
    comps = base.generate(obs, SamplingConfig(max_new_tokens=6))
    weights = []
    for foreach in (None, False):
        policy = copy.deepcopy(base)
        learner = TRRLearner(
            policy, PGConfig(lr=1e-3, gradient_checkpointing=False, adamw_foreach=foreach)
        )
        assert learner.optimizer.defaults["foreach"] is foreach
        learner.observe(
            [
                Transition(
                    "solver_0", "solver", "math", "solve", c.prompt_ids, c.completion_ids,
                    c.logprobs, c.text, reward=w,
                )
                for c, w in zip(comps, [1.0, 0.0, 0.3, 0.8])
            ]
        )
        learner.update()
        weights.append({n: p.detach().clone() for n, p in policy.model.named_parameters()})
    for n in weights[0]:
        assert torch.allclose(weights[0][n], weights[1][n], atol=1e-7), n

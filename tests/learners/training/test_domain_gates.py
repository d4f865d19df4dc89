"""A quality gate per domain (issue 47, item 8): the critic scores execution tasks on their own
scale, so ``gate_per_domain`` calibrates each domain's gate on that domain's probe items."""

import dataclasses

import pytest

import sage_env
from learners.training.config import TrainConfig
from learners.training.monitors import CriticProbe
from sage_env import EnvConfig, RewardConfig, rewards
from sage_env.tasks.exec_tasks import load_exec_seeds


def onehot(score):
    probs = [0.0] * 10
    probs[score - 1] = 1.0
    return probs


class DomainJudge:
    """Separates intact from corrupted items, 8 vs 3 on math/code and 4 vs 2 on exec."""

    def __init__(self, probe):
        self.items = {it.observation["user"]: (it, d) for it, d in zip(probe.items, probe.domains)}

    def score_distribution(self, observations, temperature=1.0, max_prompt_tokens=0):
        out = []
        for o in observations:
            it, domain = self.items[o["user"]]
            high, low = (4, 2) if domain == "exec" else (8, 3)
            out.append(onehot(high if it.intact else low))
        return out


def _cfg(per_domain):
    return TrainConfig(
        critic_probe_size=48,
        gate_calibration=True,
        gate_per_domain=per_domain,
        env=EnvConfig(
            domains=("math", "code", "exec"),
            rewards=RewardConfig(critic_score_estimate="expected"),
        ),
    )


def _seeds():
    return sage_env.load_seeds() + load_exec_seeds()


def test_gate_per_domain_sets_each_domains_gate_from_its_own_items():
    cfg = _cfg(per_domain=True)
    probe = CriticProbe(cfg, _seeds())
    assert {"math", "code", "exec"} <= set(probe.domains)
    env = sage_env.env(cfg.env)
    report = probe(DomainJudge(probe), [env])
    assert report["gate/alpha_exec"] == pytest.approx(3 / 9)  # score 4: exec's intact level
    assert report["gate/alpha_math"] == pytest.approx(7 / 9)
    assert report["critic/auc_exec"] == 1.0 and report["gate/youden_exec"] == 1.0
    gates = env.unwrapped.config.rewards
    assert gates.domain_alpha["exec"] == pytest.approx(3 / 9)
    assert gates.alpha == report["gate/alpha"]
    # an exec question at the exec critic's intact level passes; a math one there does not
    assert rewards.quality_gate(3 / 9, gates, "exec")
    assert not rewards.quality_gate(3 / 9, gates, "math")


def test_one_gate_without_gate_per_domain():
    cfg = _cfg(per_domain=False)
    probe = CriticProbe(cfg, _seeds())
    env = sage_env.env(cfg.env)
    report = probe(DomainJudge(probe), [env])
    assert not any(k.startswith("gate/alpha_") for k in report)
    assert env.unwrapped.config.rewards.domain_alpha == {}


def test_set_gate_with_a_domain_leaves_the_shared_gate_and_other_domains():
    env = sage_env.env(EnvConfig(domains=("math", "exec")))
    env.unwrapped.set_gate(0.4)
    env.unwrapped.set_gate(0.2, "exec")
    cfg = env.unwrapped.config.rewards
    assert cfg.alpha == 0.4 and cfg.domain_alpha == {"exec": 0.2}
    assert rewards.gate_alpha(cfg, "exec") == 0.2 and rewards.gate_alpha(cfg, "math") == 0.4
    assert rewards.gate_alpha(cfg) == 0.4
    with pytest.raises(ValueError):
        env.unwrapped.set_gate(1.5, "exec")


def test_domain_alpha_out_of_range_is_refused():
    with pytest.raises(ValueError, match="domain_alpha"):
        EnvConfig(rewards=RewardConfig(domain_alpha={"exec": 2.0}))


def test_the_demo_probe_holds_execution_questions():
    """The demo's probe draws from the seeds its envs play, execution seeds included."""
    from learners.training.presets import PRESETS

    cfg = PRESETS["demo"]
    assert cfg.gate_per_domain and "exec" in cfg.env.domains
    probe = CriticProbe(dataclasses.replace(cfg), _seeds())
    assert probe.domains.count("exec") >= 8


def test_domain_weights_set_where_the_rounds_go():
    import collections

    env = sage_env.env(EnvConfig(domains=("math", "exec"), domain_weights={"exec": 3})).unwrapped
    env.reset(seed=0)
    drawn = collections.Counter(env.draw_reference().domain for _ in range(400))
    assert 0.65 < drawn["exec"] / 400 < 0.85
    only = sage_env.env(EnvConfig(domains=("math", "exec"), domain_weights={"math": 0})).unwrapped
    only.reset(seed=0)
    assert {only.draw_reference().domain for _ in range(20)} == {"exec"}


@pytest.mark.parametrize(
    "weights", [{"chess": 1.0}, {"exec": -1.0}, {"math": 0, "exec": 0}, {"exec": float("nan")}]
)
def test_domain_weights_must_match_the_domains(weights):
    with pytest.raises(ValueError, match="domain_weights"):
        EnvConfig(domains=("math", "exec"), domain_weights=weights)


def test_the_warm_up_gives_exec_the_share_of_the_rounds():
    from sage_env.protocols.warmup import demonstrations_for

    domains = ("math", "code", "exec")

    def exec_share(weights):
        demos = demonstrations_for("sage", domains, _seeds(), 60, domain_weights=weights)
        return sum(d.task_ids[0].startswith("exec/") for d in demos) / len(demos)

    assert exec_share({"exec": 4.0}) > 0.55 > exec_share(None) > 0.2


def test_domain_weights_survive_a_change_of_domains():
    """The demo's weights name exec; a run of the demo on exec alone still builds."""
    cfg = EnvConfig(domains=("math", "code", "exec"), domain_weights={"exec": 4.0})
    only = dataclasses.replace(cfg, domains=("exec",))
    assert only.domain_weight_list() == [4.0]
    assert dataclasses.replace(cfg, domains=("math",)).domain_weight_list() == [1.0]


class NoisyJudge:
    """Ranks intact above corrupted on average, but the intact scores spread 3-8: score
    ``3 + i % 6`` for the i-th intact item, ``2 + i % 3`` for the i-th corrupted one."""

    def __init__(self, probe):
        self.rank = {}
        n_good = n_bad = 0
        for it in probe.items:
            if it.intact:
                self.rank[it.observation["user"]] = 3 + n_good % 6
                n_good += 1
            else:
                self.rank[it.observation["user"]] = 2 + n_bad % 3
                n_bad += 1

    def score_distribution(self, observations, temperature=1.0, max_prompt_tokens=0):
        return [onehot(self.rank[o["user"]]) for o in observations]


def _intact_pass(report, probe, judge):
    alpha = report["gate/alpha"]
    good = [(judge.rank[it.observation["user"]] - 1) / 9 for it in probe.items if it.intact]
    return sum(q >= alpha - 1e-12 for q in good) / len(good)


@pytest.mark.parametrize("share", [0.75, 0.9, 1.0])
def test_gate_intact_pass_caps_youdens_threshold(share):
    """Youden's J on this judge picks score 5 (q = 4/9), which passes 4 of 6 intact levels; with
    ``gate_intact_pass`` the gate passes at least that share of the intact items."""
    plain = dataclasses.replace(_cfg(per_domain=False), gate_intact_pass=None)
    probe = CriticProbe(plain, _seeds())
    judge = NoisyJudge(probe)
    youden = probe(judge, [sage_env.env(plain.env)])
    assert youden["gate/youden"] == 1.0 and youden["gate/alpha"] == pytest.approx(4 / 9)
    assert _intact_pass(youden, probe, judge) < 0.75

    cfg = dataclasses.replace(plain, gate_intact_pass=share)
    probe = CriticProbe(cfg, _seeds())
    report = probe(judge, [sage_env.env(cfg.env)])
    assert report["gate/alpha"] < youden["gate/alpha"]
    assert _intact_pass(report, probe, judge) >= share
    if share == 1.0:  # the lowest intact level, score 3
        assert report["gate/alpha"] == pytest.approx(2 / 9)


def test_gate_intact_pass_out_of_range_is_a_clear_error():
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="gate_intact_pass"):
            dataclasses.replace(_cfg(per_domain=False), gate_intact_pass=bad)

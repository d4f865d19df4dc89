"""Learner extension points: per-algorithm config, loss hook, truncation, plugins, --import."""

import json
import textwrap

import pytest
import torch

from learners.algorithms.registry import (
    LEARNERS,
    as_config,
    available_learners,
    learner_spec,
    make_learner,
    register_learner,
)
from learners.cli import main
from learners.algorithms.ema_baseline import EMAConfig
from learners.algorithms.pg import LossInputs, PGConfig
from learners.policy import HFPolicy
from learners.types import Transition
from learners.training.config import config_from_dict
from learners.training.loop import TrainConfig
from learners.algorithms.trr import TRRLearner


def test_each_algorithm_owns_its_config():
    assert learner_spec("ema").config_cls is EMAConfig
    assert "ema_decay" not in {f for f in PGConfig.__dataclass_fields__}
    cfg = TrainConfig(algorithm="ema", learner=PGConfig(lr=0.5))
    assert type(cfg.learner) is EMAConfig and cfg.learner.lr == 0.5
    assert cfg.learner.ema_decay == 0.95
    assert config_from_dict({"algorithm": "ema", "learner": {"ema_decay": 0.5}}).learner == (
        EMAConfig(ema_decay=0.5)
    )
    with pytest.raises(ValueError, match=r"learner.ema_decay.*'trr' takes a PGConfig"):
        config_from_dict({"learner": {"ema_decay": 0.5}})
    with pytest.raises(ValueError, match="no field"):
        as_config(EMAConfig(), type("Other", (), {"__dataclass_fields__": {}}))
    with pytest.raises(TypeError, match="config_cls"):
        register_learner("bad", object)
    with pytest.raises(ValueError, match="already registered"):
        register_learner("trr", TRRLearner)


def _transitions(rewards, truncated):
    return [
        Transition(
            "solver_0",
            "solver",
            "math",
            "solve",
            [5, 6, 7],
            [8, 9] if not cut else [8, 9, 10],
            [-1.0, -1.0] if not cut else [-1.0, -1.0, -1.0],
            "x",
            reward=r,
            truncated=cut,
        )
        for r, cut in zip(rewards, truncated)
    ]


class SpyLearner(TRRLearner):
    """TRR++ that records what the advantage estimator and the loss hook receive."""

    def advantages(self, batch):
        self.rewards = [t.reward for t in batch]
        self.adv = super().advantages(batch)
        return self.adv

    def loss(self, inputs):
        self.inputs.append(inputs)
        return super().loss(inputs)


@pytest.mark.parametrize("mode", ["keep", "zero", "mask"])
def test_truncation_modes_change_exactly_reward_or_loss_mask(tiny_path, mode):
    policy = HFPolicy(tiny_path, device="cpu", seed=0)
    cfg = PGConfig(truncation=mode, gradient_checkpointing=False, micro_batch_size=8)
    learner = SpyLearner(policy, cfg)
    learner.inputs = []
    learner.observe(_transitions([1.0, 0.0, 1.0, 0.5], [False, False, False, True]))
    metrics = learner.update()
    (inputs,) = learner.inputs
    assert metrics["truncated_share"] == 0.25
    if mode == "zero":
        assert learner.rewards == [1.0, 0.0, 1.0, 0.0]
        assert learner.adv == pytest.approx([1.0, -1.0, 1.0, -1.0], abs=1e-5)
    else:  # keep and mask: the truncated reward still counts in the group statistics
        assert learner.rewards == [1.0, 0.0, 1.0, 0.5]
        # mean 0.625, std sqrt(0.171875): the truncated action's advantage is -0.125 / std
        assert learner.adv[3] == pytest.approx(-0.125 / 0.171875**0.5, abs=1e-5)
    if mode == "mask":  # out of the loss and out of its normalisers
        assert (inputs.num_sequences, inputs.num_tokens) == (3, 6)
        assert inputs.mask.shape == (3, 2) and metrics["num_sequences"] == 3.0
        kept = [abs(a) for a in learner.adv[:3]]
        assert metrics["adv_abs_mean"] == pytest.approx(sum(kept) / 3)
    else:
        assert (inputs.num_sequences, inputs.num_tokens) == (4, 9)
        assert inputs.mask.sum() == 9 and metrics["num_sequences"] == 4.0


def _inputs(ratio, adv):
    logp = torch.log(torch.tensor([ratio]))
    return LossInputs(
        logp,
        torch.zeros_like(logp),
        torch.tensor([[adv]]),
        torch.ones_like(logp),
        None,
        logp.shape[1],
        1,
    )


def _example(name):
    import importlib

    from learners.algorithms.plugins import import_modules

    import_modules([f"examples.{name}"])
    return importlib.import_module(f"examples.{name}")


def test_dapo_clip_higher_loss_hook_values():
    dapo = _example("dapo_clip_higher")
    learner = object.__new__(dapo.DAPOLearner)
    learner.config = dapo.DAPOConfig()
    default = object.__new__(TRRLearner)
    default.config = PGConfig()
    # ratio 1.25, A = 1: PPO clips at 1.2, clip-higher (eps_high 0.28) lets 1.25 through
    loss, parts = learner.loss(_inputs([1.25, 1.5, 0.7], 1.0))
    assert float(loss) == pytest.approx(-(1.25 + 1.28 + 0.7) / 3)
    assert float(parts["clip_frac"]) == pytest.approx(2 / 3)  # 1.5 and 0.7 leave [0.8, 1.28]
    assert float(default.loss(_inputs([1.25, 1.5, 0.7], 1.0))[0]) == pytest.approx(
        -(1.2 + 1.2 + 0.7) / 3
    )
    # A < 0: the lower range is unchanged (0.8)
    assert float(learner.loss(_inputs([0.7], -1.0))[0]) == pytest.approx(0.8)


def test_dr_grpo_advantage_and_constant_length_normalisation():
    dr = _example("dr_grpo")
    learner = object.__new__(dr.DrGRPOLearner)
    learner.config = dr.DrGRPOConfig(loss_length=10.0)
    batch = _transitions([1.0, 0.0, 0.25], [False] * 3)
    batch[2].prompt_ids = [1]  # sampled once: no group, advantage 0
    assert learner.advantages(batch) == [0.5, -0.5, 0.0]  # no division by the std
    loss, _ = learner.loss(_inputs([1.0, 1.0, 1.0], 2.0))  # 3 tokens of -2: sum -6
    assert float(loss) == pytest.approx(-6.0 / (1 * 10.0))


def _cli_yaml(tmp_path, tiny_path, learner):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        textwrap.dedent(f"""\
        model: {tiny_path}
        device: cpu
        steps: 1
        rounds_per_step: 2
        max_new_tokens: 4
        phase_max_new_tokens: {{}}
        val_every: 0
        critic_probe_size: 0
        gate_calibration: false
        warmup: {{steps: 0}}
        heldout: ""
        env: {{protocol: rlvr, solver_samples: 2}}
        learner: {learner}
        """)
    )
    return str(cfg)


@pytest.mark.slow
@pytest.mark.parametrize(
    "module, algorithm, learner, saved",
    [
        (
            "examples.dr_grpo",
            "dr_grpo",
            "{gradient_checkpointing: false, loss_length: 4, kl_coef: 0.01}",
            "loss_length: 4.0",
        ),
        (
            "examples.dapo_clip_higher",
            "dapo",
            "{gradient_checkpointing: false, kl_coef: 0.01}",
            "clip_eps_high: 0.28",
        ),
    ],
)
def test_example_algorithms_train_from_the_cli(
    tiny_path, tmp_path, module, algorithm, learner, saved
):
    out = tmp_path / "run"
    args = ["train", "--import", module, "--algorithm", algorithm, "--no-progress"]
    config = _cli_yaml(tmp_path, tiny_path, learner)
    assert main([*args, "--config", config, "--out", str(out), "--learner.lr", "0.01"]) == 0
    (row,) = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    # random rewards are all 0 here; kl_coef > 0 sends every sequence through the hook
    assert row["learner/num_sequences"] == 4.0 and row["learner/skipped_share"] == 0.0
    assert row["learner/clip_frac"] == 0.0  # one epoch, on-policy: ratio 1
    text = (out / "config.yaml").read_text()
    assert f"algorithm: {algorithm}" in text and saved in text and "lr: 0.01" in text


def test_cli_import_and_algorithm_errors_are_clear(capsys, tmp_path, tiny_path):
    assert main(["train", "--import", "examples.no_such_module"]) == 2
    assert "--import examples.no_such_module" in capsys.readouterr().err
    assert main(["play", "--import", "examples/no_such_file.py"]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["train", "--algorithm", "no_such_algo"]) == 2
    assert "unknown algorithm 'no_such_algo'" in capsys.readouterr().err
    config = _cli_yaml(tmp_path, tiny_path, "{ema_decay: 0.5}")
    assert main(["train", "--config", config, "--algorithm", "grpo"]) == 2
    assert "learner.ema_decay" in capsys.readouterr().err


PLUGIN = """
from learners.algorithms.trr import TRRLearner
from sage_env.protocols import Protocol


class PluginLearner(TRRLearner):
    name = "ep_trr"


class EchoProtocol(Protocol):
    name = "ep_echo"
    agents = ("solver_0",)

    def start(self, env):
        env.select("solver_0", "solve", env.draw_reference(), {"system": "", "user": "?"})

    def on_solve(self, env, text):
        env.deliver("solver_0", 1.0, {"const": 1.0})
        env.finish()
"""


def test_entry_points_register_learners_and_protocols(tmp_path, monkeypatch):
    from sage_env.protocols import PROTOCOLS, available_protocols, make_protocol

    (tmp_path / "sage_plugin_demo.py").write_text(PLUGIN)
    info = tmp_path / "sage_plugin_demo-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sage-plugin-demo\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[sage_env.learners]\nep_trr = sage_plugin_demo:PluginLearner\n\n"
        "[sage_env.protocols]\nep_echo = sage_plugin_demo:EchoProtocol\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    LEARNERS.unregister("ep_trr")
    try:
        assert learner_spec("ep_trr").config_cls is PGConfig
        assert "ep_trr" in available_learners()
        assert make_protocol("ep_echo").agents == ("solver_0",)
        assert "ep_echo" in available_protocols()
        import sage_env

        env = sage_env.env(protocol="ep_echo")
        env.reset(seed=0)
        assert env.agent_selection == "solver_0"
        env.step("anything")
        assert env.unwrapped._cumulative_rewards["solver_0"] == 1.0
        env.close()
    finally:
        LEARNERS.unregister("ep_trr")
        PROTOCOLS.unregister("ep_echo")


def test_make_learner_upgrades_the_shared_config(tiny_path):
    policy = HFPolicy(tiny_path, device="cpu", seed=0)
    learner = make_learner("ema", policy, PGConfig(lr=0.25, gradient_checkpointing=False))
    assert type(learner.config) is EMAConfig and learner.config.lr == 0.25
    assert learner.baseline.decay == 0.95


@pytest.mark.parametrize("fail", [False, True])
def test_train_closes_every_verifier_also_on_error(tiny_path, tmp_path, monkeypatch, fail):
    import learners.training.build as train_module  # where the run opens its verifiers
    from learners.training.loop import train
    from sage_env import EnvConfig

    closed = []
    for name in ("MathVerifier", "CodeVerifier"):
        cls = getattr(train_module, name)

        def close(self, n=name, base=cls):
            closed.append(n)
            base.close(self)

        spy = type(name, (cls,), {"close": close})
        monkeypatch.setattr(train_module, name, spy)
    if fail:

        def boom(self, seeds):
            raise RuntimeError("rollout failed")

        monkeypatch.setattr(train_module.RolloutDriver, "collect", boom)
    cfg = TrainConfig(
        model=tiny_path,
        out=str(tmp_path / "run"),
        steps=1,
        rounds_per_step=1,
        max_new_tokens=4,
        device="cpu",
        env=EnvConfig(protocol="rlvr", solver_samples=1),
        learner=PGConfig(gradient_checkpointing=False),
    )
    if fail:
        with pytest.raises(RuntimeError, match="rollout failed"):
            train(cfg, progress=False)
    else:
        train(cfg, progress=False)
    assert sorted(closed) == ["CodeVerifier", "MathVerifier"]


USER_PROTOCOL = """
from dataclasses import dataclass

from sage_env import Protocol, register_protocol


@dataclass
class BonusConfig:
    '''Settings of protocol ``bonus_demo``.'''

    bonus: float = 0.0
    '''Added to every reward.'''
    greeting: str = "hi"
    '''What the solver is asked to say.'''


class Bonus(Protocol):
    name = "bonus_demo"
    agents = ("solver_0",)
    config_cls = BonusConfig

    def start(self, env):
        say = env.config.protocol_config.greeting
        env.select("solver_0", "solve", env.draw_reference(), {"system": "", "user": say})

    def on_solve(self, env, text):
        env.deliver("solver_0", 1.0 + env.config.protocol_config.bonus, {})
        env.finish()


register_protocol("bonus_demo", Bonus, overwrite=True)
"""


@pytest.fixture
def captured_train(monkeypatch):
    """``sage-env train`` parses its config but trains nothing; the config is kept."""
    seen = []

    def fake_train(cfg, progress=True):
        seen.append(cfg)
        return {}

    monkeypatch.setattr("learners.training.loop.train", fake_train)
    return seen


def test_protocol_settings_from_flags_yaml_and_a_user_module(tmp_path, captured_train, capsys):
    from sage_env.protocols import PROTOCOLS, AZRConfig, MAEConfig

    assert main(["train", "--protocol", "azr", "--env.protocol-config.format-penalty"]) == 0
    assert captured_train[-1].env.protocol_config == AZRConfig(format_penalty=True)
    yaml_file = tmp_path / "mae.yaml"
    yaml_file.write_text("env:\n  protocol: mae\n  protocol_config: {solver_weights: [0.6, 0.4]}\n")
    args = ["train", "--config", str(yaml_file), "--env.protocol-config.solver-weights", "0.7"]
    assert main([*args, "0.3"]) == 0  # the flag wins over the file
    assert captured_train[-1].env.protocol_config == MAEConfig(solver_weights=(0.7, 0.3))
    assert main(["train", "--config", str(yaml_file)]) == 0
    assert captured_train[-1].env.protocol_config == MAEConfig(solver_weights=(0.6, 0.4))
    # --protocol wins over the file's protocol; the file's mae settings do not fit azr
    assert main(["train", "--config", str(yaml_file), "--protocol", "azr"]) == 2
    assert "env.protocol_config.solver_weights" in capsys.readouterr().err
    # a user's protocol, imported: its settings are flags, YAML keys and reach its handlers
    module = tmp_path / "bonus_demo.py"
    module.write_text(USER_PROTOCOL)
    try:
        base = ["train", "--import", str(module), "--protocol", "bonus_demo"]
        with pytest.raises(SystemExit):
            main([*base, "--help"])
        assert "--env.protocol-config.bonus FLOAT" in capsys.readouterr().out
        assert main([*base, "--env.protocol-config.bonus", "0.5"]) == 0
        cfg = captured_train[-1]
        assert (cfg.env.protocol, cfg.env.protocol_config.bonus) == ("bonus_demo", 0.5)
        import sage_env

        env = sage_env.env(cfg.env)
        env.reset(seed=0)
        assert env.observe("solver_0")["user"] == "hi"
        env.step("x")
        assert env.unwrapped._cumulative_rewards["solver_0"] == 1.5
        with pytest.raises(SystemExit):  # tyro's unknown-flag error
            main([*base, "--env.protocol-config.bonuss", "1"])
        assert "--env.protocol-config.bonus FLOAT" in capsys.readouterr().err
        yaml_file.write_text("env: {protocol: bonus_demo, protocol_config: {bonuss: 1}}\n")
        assert main(["train", "--import", str(module), "--config", str(yaml_file)]) == 2
        err = capsys.readouterr().err
        assert (
            "unknown config key 'env.protocol_config.bonuss'; known: ['bonus', 'greeting']" in err
        )
        assert "(protocol 'bonus_demo' takes BonusConfig)" in err
    finally:
        PROTOCOLS.unregister("bonus_demo")


@pytest.mark.parametrize(
    "protocol, settings",
    [
        ("sage", None),
        ("azr", None),
        ("azr-qa", {"format_penalty": True}),
        ("mae", {"solver_weights": (0.5, 0.5)}),
    ],
)
def test_protocol_settings_round_trip_through_the_saved_yaml(tmp_path, protocol, settings):
    import dataclasses

    import yaml

    from learners.training.build import plain as _plain
    from learners.training.config import load_yaml_config

    cfg = config_from_dict({"env": {"protocol": protocol, "protocol_config": settings}})
    if settings is not None:
        assert dataclasses.asdict(cfg.env.protocol_config) == settings
    saved = tmp_path / "config.yaml"  # as train() writes it
    saved.write_text(yaml.safe_dump(_plain(dataclasses.asdict(cfg)), sort_keys=False))
    assert load_yaml_config(saved) == cfg


def test_old_reward_field_names_are_refused_naming_the_key(capsys):
    # 0.1's rewards.azr_format_penalty / mae_solver_weights moved to protocol_config; no shim
    old = {"rewards": {"alpha": 0.6, "azr_format_penalty": True}, "protocol": "azr"}
    with pytest.raises(ValueError, match=r"unknown config key 'env\.rewards\.azr_format_penalty'"):
        config_from_dict({"env": old})
    with pytest.raises(SystemExit) as info:  # tyro: an unknown flag
        main(["train", "--env.rewards.azr-format-penalty"])
    assert info.value.code == 2
    assert "--env.rewards.azr-format-penalty" in capsys.readouterr().err

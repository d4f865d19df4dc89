"""A run that trains nothing, settings that do nothing, and learner plugins checked early
(issue 21, items 3-5): start-up errors, the per-step ``learner/trained`` metric, the
``debug`` preset, ``--max-new-tokens`` over per-phase budgets, and ``config.yaml`` imports."""

import dataclasses
import json
import logging
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from learners.algorithms import loss_result
from learners.training import run_checks as checks
from learners.algorithms.registry import LEARNERS, register_learner
from learners.algorithms.loss_result import LearnerPluginError
from learners.training.run_checks import certain_no_update, nothing_trained
from learners.cli import main
from learners.algorithms.pg import PGConfig, PolicyGradientLearner
from learners.training.presets import DEMO_BUDGETS, PRESETS
from learners.training.config import TrainConfig
from sage_env import EnvConfig

DEBUG = PRESETS["debug"]


def _cfg(**kw):
    env = kw.pop("env", EnvConfig(solver_samples=1))
    return TrainConfig(rounds_per_step=1, env=env, **kw)


# --- item 3: certain at start-up ------------------------------------------------------------
@pytest.mark.parametrize("algorithm", ["grpo", "reinforce_pp"])
def test_prompt_baselines_with_one_round_and_one_sample_are_refused(algorithm):
    why = certain_no_update(_cfg(algorithm=algorithm), world_size=1)
    assert why is not None
    assert f"algorithm {algorithm!r}" in why and "(role, prompt)" in why and "(k = 1)" in why
    assert "--rounds-per-step 2" in why and "--env.solver-samples 2" in why
    # the solver frozen: its k samples no longer count
    frozen = _cfg(algorithm=algorithm, env=EnvConfig(solver_samples=4), freeze=("solver",))
    assert "solver is frozen" in certain_no_update(frozen, world_size=1)


@pytest.mark.parametrize(
    "cfg",
    [
        _cfg(algorithm="grpo", env=EnvConfig(solver_samples=2)),  # k samples share a prompt
        TrainConfig(algorithm="grpo", rounds_per_step=2, env=EnvConfig(solver_samples=1)),
        _cfg(algorithm="trr"),  # solver and critic act more than once per round
        _cfg(algorithm="ema", freeze=("solver", "critic")),  # baseline across steps
    ],
)
def test_configs_that_can_train_are_not_refused(cfg):
    assert certain_no_update(cfg, world_size=1) is None


def test_several_processes_count_as_several_rounds():
    cfg = _cfg(algorithm="grpo")
    assert certain_no_update(cfg, world_size=2) is None
    assert certain_no_update(cfg, world_size=1) is not None


def test_task_relative_baseline_refused_when_only_one_action_roles_train():
    why = certain_no_update(_cfg(algorithm="trr", freeze=("solver", "critic")), world_size=1)
    assert "['challenger', 'planner'] act once per round" in why
    azr = _cfg(algorithm="trr", env=EnvConfig(protocol="azr", solver_samples=2))
    assert certain_no_update(dataclasses.replace(azr, freeze=("solver",)), world_size=1)


def test_a_learner_declares_its_grouping_and_an_override_drops_it():
    from learners.algorithms.grpo import GRPOLearner

    class Declared(PolicyGradientLearner):
        advantage_group = "role_prompt"

        def advantages(self, batch):
            return [0.0] * len(batch)

    class Overrides(GRPOLearner):  # new advantages, no declaration: grouping unknown
        def advantages(self, batch):
            return [0.0] * len(batch)

    class Inherits(GRPOLearner):  # a new loss only: GRPO's grouping still holds
        pass

    assert checks.advantage_group(Declared) == "role_prompt"
    assert checks.advantage_group(Overrides) is None
    assert checks.advantage_group(Inherits) == "role_prompt"
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    import examples.rloo_learner  # noqa: F401

    assert certain_no_update(_cfg(algorithm="rloo"), world_size=1) is not None


def test_train_cli_refuses_a_certain_no_op_before_the_model_loads(capsys):
    code = main(
        [
            "train",
            "--preset",
            "debug",
            "--algorithm",
            "grpo",
            "--rounds-per-step",
            "1",
            "--env.solver-samples",
            "1",
            "--model",
            "/nonexistent/model",  # never loaded: the check comes first
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "trains nothing" in err and "/nonexistent" not in err


# --- item 3: per step -----------------------------------------------------------------------
def test_nothing_trained_reads_the_update_metrics():
    trained = {"num_sequences": 8.0, "skipped_share": 0.5, "grad_norm": 0.3}
    assert nothing_trained(trained) is None
    assert checks.trained_metric(trained) == {"learner/trained": 1.0}
    zero = {"num_sequences": 8.0, "skipped_share": 1.0, "grad_norm": 0.0, "adv_abs_mean": 0.0}
    assert "loss hook was never called" in nothing_trained(zero)
    assert checks.trained_metric(zero) == {"learner/trained": 0.0}
    assert "no sequence" in nothing_trained({"num_sequences": 0.0})
    assert "gradient is 0" in nothing_trained({"num_sequences": 4.0, "grad_norm": 0.0})
    assert checks.trained_metric({"loss": 1.0}) == {}  # a learner that reports none of them


ZERO_LEARNER = """
from learners.algorithms.registry import register_learner
from learners.algorithms.pg import PolicyGradientLearner


class ZeroLearner(PolicyGradientLearner):
    '''Every advantage 0: the loss hook is never called.'''

    def advantages(self, batch):
        return [0.0] * len(batch)


register_learner("zero_adv", ZeroLearner, overwrite=True)
"""


@pytest.mark.slow
def test_debug_run_that_trains_nothing_warns_logs_and_reruns_from_its_config(
    tiny_path, tmp_path, caplog
):
    plugin = tmp_path / "zero_plugin.py"
    plugin.write_text(ZERO_LEARNER)
    out = tmp_path / "run"
    argv = ["--model", tiny_path, "--device", "cpu", "--steps", "1", "--max-new-tokens", "4"]
    argv += ["--env.domains", "math", "--no-progress"]
    with caplog.at_level(logging.WARNING, logger="sage_env.train"):
        code = main(
            ["train", "--preset", "debug", "--import", str(plugin), "--algorithm", "zero_adv"]
            + argv
            + ["--out", str(out)]
        )
    assert code == 0
    row = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert row["learner/trained"] == 0.0 and row["learner/skipped_share"] == 1.0
    assert row["learner/grad_norm"] == 0.0
    assert any("step 1 trained nothing" in r.getMessage() for r in caplog.records)
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["imports"] == [str(plugin.resolve())] and saved["algorithm"] == "zero_adv"
    assert saved["warmup"]["steps"] == 0 and saved["critic_probe_size"] == 0
    assert saved["val_every"] == 0 and saved["max_new_tokens"] == 4
    # a fresh process knows nothing of zero_adv: the config alone brings it back
    LEARNERS.unregister("zero_adv")
    sys.modules.pop("zero_plugin", None)
    again = tmp_path / "again"
    assert main(["train", "--config", str(out / "config.yaml"), "--out", str(again)]) == 0
    assert "zero_adv" in LEARNERS
    assert json.loads((again / "metrics.jsonl").read_text())["learner/trained"] == 0.0


# --- item 4: debug preset, --max-new-tokens, probe off ----------------------------------------
def test_debug_preset_is_the_smallest_run():
    assert DEBUG.steps == 2 and DEBUG.rounds_per_step == 2 and DEBUG.env.solver_samples == 2
    assert DEBUG.warmup.steps == 0 and DEBUG.critic_probe_size == 0
    assert DEBUG.val_every == 0 and not DEBUG.gate_calibration
    assert DEBUG.phase_max_new_tokens == {} and DEBUG.max_new_tokens == 48
    assert DEBUG.report_to == "none"
    for algorithm in ("trr", "grpo", "reinforce_pp", "ema"):
        cfg = dataclasses.replace(DEBUG, algorithm=algorithm)
        assert certain_no_update(cfg, world_size=1) is None
    for doc in ("docs/guide/learners.md", "docs/guide/debugging.md"):
        text = (Path(__file__).resolve().parents[3] / doc).read_text()
        assert "sage-env train --preset debug --import examples.rloo_learner" in text


@pytest.fixture
def captured(monkeypatch):
    """``sage-env train`` up to the config: ``learners.training.loop.train`` records it instead."""
    seen = []
    monkeypatch.setattr(
        "learners.training.loop.train", lambda cfg, progress=True: seen.append(cfg) or {}
    )
    return seen


def test_max_new_tokens_on_the_command_line_sets_every_phase(captured, caplog):
    with caplog.at_level(logging.INFO, logger="sage_env.train"):
        assert main(["train", "--preset", "demo", "--max-new-tokens", "16"]) == 0
    cfg = captured[-1]
    assert cfg.max_new_tokens == 16 and cfg.phase_max_new_tokens == {}
    assert any("--max-new-tokens 16 sets every phase" in r.getMessage() for r in caplog.records)
    # phases named in the same command keep their budget
    argv = ["train", "--max-new-tokens", "16", "--phase-max-new-tokens.review-question", "8"]
    assert main(argv) == 0
    assert captured[-1].phase_max_new_tokens == {"review_question": 8}
    assert main(["train", "--preset", "demo"]) == 0  # not given: the preset's budgets
    assert captured[-1].phase_max_new_tokens == DEMO_BUDGETS


def test_max_new_tokens_in_a_config_file_without_phase_budgets_sets_every_phase(captured, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("max_new_tokens: 12\n")
    assert main(["train", "--config", str(path)]) == 0
    assert captured[-1].phase_max_new_tokens == {} and captured[-1].max_new_tokens == 12
    path.write_text("max_new_tokens: 12\nphase_max_new_tokens: {plan: 30}\n")
    assert main(["train", "--config", str(path)]) == 0
    assert captured[-1].phase_max_new_tokens == {"plan": 30}


def test_probe_off_alone_turns_calibration_off_with_a_message(captured):
    assert main(["train", "--preset", "demo", "--critic-probe-size", "0"]) == 0
    cfg = captured[-1]
    assert cfg.critic_probe_size == 0 and cfg.gate_calibration  # inert, and said so:
    (message,) = [m for m in checks.ignored_settings(cfg) if "gate_calibration" in m]
    assert "off" in message and "critic_probe_size = 0" in message
    with pytest.raises(ValueError, match="critic_probe_size >= 2"):
        TrainConfig(gate_calibration=True, critic_probe_size=1)


def test_probe_every_recalibrates_between_validations_and_needs_the_probe():
    from learners.training.loop import probe_due

    cfg = dataclasses.replace(DEBUG, steps=20, probe_every=5, critic_probe_size=8)
    due = [s for s in range(1, 21) if probe_due(cfg, s, validate=False)]
    assert due == [5, 10, 15, 20]
    assert probe_due(cfg, 7, validate=True)  # validations still probe
    off = dataclasses.replace(cfg, probe_every=0)
    assert [s for s in range(1, 21) if probe_due(off, s, validate=False)] == [20]
    assert not checks.ignored_settings(cfg)
    (message,) = checks.ignored_settings(dataclasses.replace(cfg, critic_probe_size=0))
    assert message.startswith("probe_every = 5 does nothing") and "critic_probe_size = 0" in message
    with pytest.raises(ValueError, match="probe_every must be >= 0"):
        TrainConfig(probe_every=-1)


def test_settings_switched_off_by_another_are_named(captured, caplog):
    cfg = dataclasses.replace(DEBUG, val_limit=3, early_stopping_patience=2)
    cfg = dataclasses.replace(cfg, warmup=dataclasses.replace(cfg.warmup, lr=1e-3))
    found = checks.ignored_settings(cfg, DEBUG)
    assert any(m.startswith("val_limit = 3 does nothing without validation") for m in found)
    assert any(m.startswith("early_stopping_patience = 2") for m in found)
    assert any(m.startswith("warmup.lr does nothing with warmup.steps = 0") for m in found)
    assert checks.ignored_settings(DEBUG, DEBUG) == []
    demo = PRESETS["demo"]
    both = dataclasses.replace(demo, max_new_tokens=16)  # phase budgets cover every phase
    assert any("max_new_tokens = 16 is not used" in m for m in checks.ignored_settings(both, demo))
    with caplog.at_level(logging.WARNING, logger="sage_env.train"):
        assert main(["train", "--preset", "debug", "--val-limit", "3"]) == 0
    assert any("val_limit = 3 does nothing" in r.getMessage() for r in caplog.records)


def test_a_saved_config_reruns_without_warnings_about_its_own_settings(captured, caplog, tmp_path):
    from learners.training.build import plain as _plain

    saved = tmp_path / "config.yaml"  # what a --preset debug run writes, every field
    saved.write_text(yaml.safe_dump(_plain(dataclasses.asdict(DEBUG))))
    with caplog.at_level(logging.WARNING, logger="sage_env.train"):
        assert main(["train", "--config", str(saved)]) == 0
    assert captured[-1].val_limit == DEBUG.val_limit and captured[-1].warmup.steps == 0
    assert [r.getMessage() for r in caplog.records] == []
    # a flag given now is still checked against the saved run
    with caplog.at_level(logging.WARNING, logger="sage_env.train"):
        assert main(["train", "--config", str(saved), "--val-limit", "3"]) == 0
    assert any("val_limit = 3 does nothing" in r.getMessage() for r in caplog.records)
    # a hand-written file of a few overrides is laid over the preset and checked against it
    caplog.clear()
    partial = tmp_path / "mine.yaml"
    partial.write_text("val_limit: 3\n")
    with caplog.at_level(logging.WARNING, logger="sage_env.train"):
        assert main(["train", "--preset", "debug", "--config", str(partial)]) == 0
    assert any("val_limit = 3 does nothing" in r.getMessage() for r in caplog.records)


def test_a_local_model_folder_is_recorded_as_an_absolute_path(captured, tmp_path, monkeypatch):
    (tmp_path / "tiny-model").mkdir()
    monkeypatch.chdir(tmp_path)  # the docs build the tiny model in the working directory
    assert main(["train", "--preset", "debug", "--model", "tiny-model"]) == 0
    assert captured[-1].model == str(tmp_path.resolve() / "tiny-model")
    assert main(["train", "--preset", "debug", "--model", "not-a-folder/some-model"]) == 0
    assert captured[-1].model == "not-a-folder/some-model"  # a hub id stays as given


# --- item 5: plugins checked when registered --------------------------------------------------
def test_a_config_class_registered_as_the_learner_is_named():
    @dataclasses.dataclass
    class MyConfig(PGConfig):
        extra: int = 1

    with pytest.raises(LearnerPluginError, match="looks like the learner's config") as err:
        register_learner("cfg_as_learner", MyConfig, MyConfig)
    assert f"{Path(__file__).resolve()}:" in str(err.value) or __file__ in str(err.value)
    assert "cfg_as_learner" not in LEARNERS
    with pytest.raises(LearnerPluginError, match="config_cls must be a dataclass"):
        register_learner("no_config", PolicyGradientLearner, dict)


BAD_LOSS = """
from learners.algorithms.registry import register_learner
from learners.algorithms.pg import PolicyGradientLearner


class FloatLoss(PolicyGradientLearner):
    def advantages(self, batch):
        return [t.reward for t in batch]

    def loss(self, inputs):
        return 0.0, {}


register_learner("float_loss", FloatLoss, overwrite=True)
"""


def test_a_loss_returning_a_float_is_caught_at_import_with_file_and_line(tmp_path, capsys):
    plugin = tmp_path / "float_loss_plugin.py"
    plugin.write_text(BAD_LOSS)
    code = main(["train", "--import", str(plugin), "--algorithm", "float_loss"])
    assert code == 2
    err = capsys.readouterr().err
    line = BAD_LOSS.splitlines().index("    def loss(self, inputs):") + 1
    assert f"{plugin.resolve()}:{line}" in err
    assert "its loss is a float (0.0), not a tensor" in err and "must return (loss, metrics)" in err


@pytest.mark.parametrize(
    "hook, message",
    [
        ("def loss(self):\n        return None", "cannot be called as self.loss(inputs)"),
        ("def loss(self, inputs) -> float:\n        return 0.0", "annotated to return float"),
        ("@staticmethod\n    def loss(inputs):\n        return 0.0", "must be a plain method"),
        ("def advantages(self, batch, extra):\n        return []", "self.advantages(batch)"),
    ],
)
def test_hook_signatures_are_checked(hook, message):
    namespace = {"PolicyGradientLearner": PolicyGradientLearner}
    source = f"class Bad(PolicyGradientLearner):\n    {hook}\n"
    exec(textwrap.dedent(source), namespace)  # noqa: S102 - a class with the hook under test
    with pytest.raises(LearnerPluginError, match=message.replace("(", r"\(").replace(")", r"\)")):
        register_learner("bad_hook", namespace["Bad"])
    assert "bad_hook" not in LEARNERS


def test_loss_result_checked_at_every_call():
    import torch

    class Stub(PolicyGradientLearner):
        def loss(self, inputs):
            return 0.0, {}

    learner = object.__new__(Stub)
    with pytest.raises(LearnerPluginError, match=r"Stub\.loss \(.*test_run_checks\.py:\d+\)"):
        loss_result.check_loss_result(learner, 0.5)
    with pytest.raises(LearnerPluginError, match="does not require grad"):
        loss_result.check_loss_result(learner, (torch.tensor(1.0), {}))
    good = (torch.tensor(1.0, requires_grad=True), {"x": 1.0})
    assert loss_result.check_loss_result(learner, good) is good


def test_shipped_examples_pass_the_plugin_checks():
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    import examples.dapo_clip_higher  # noqa: F401
    import examples.dr_grpo  # noqa: F401
    import examples.rloo_learner  # noqa: F401

    for name in ("dapo", "dr_grpo", "rloo", "trr", "grpo", "reinforce_pp", "ema"):
        assert name in LEARNERS


def test_critic_probe_under_a_protocol_without_critic_is_named_and_skipped():
    demo = PRESETS["demo"]
    azr = dataclasses.replace(demo, env=dataclasses.replace(demo.env, protocol="azr"))
    (message,) = [m for m in checks.ignored_settings(azr) if "critic_probe_size" in m]
    assert message.startswith(f"critic_probe_size = {demo.critic_probe_size} does nothing")
    assert "'azr' has no critic or judge" in message and "['proposer', 'solver']" in message
    # sage and mae read scores (critic, judge): their probe stays
    for protocol in ("sage", "mae"):
        cfg = dataclasses.replace(demo, env=dataclasses.replace(demo.env, protocol=protocol))
        assert not [m for m in checks.ignored_settings(cfg) if "critic_probe_size" in m]


def test_azr_run_skips_the_critic_probe(tiny_path, tmp_path, caplog):
    out = tmp_path / "run"
    argv = ["train", "--preset", "debug", "--model", tiny_path, "--device", "cpu"]
    argv += ["--protocol", "azr", "--steps", "1", "--max-new-tokens", "4", "--no-progress"]
    argv += ["--critic-probe-size", "8", "--out", str(out)]
    with caplog.at_level(logging.WARNING, logger="sage_env.train"):
        assert main(argv) == 0
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert not any(k.startswith("critic/") for row in rows for k in row)
    assert any("has no critic or judge" in r.getMessage() for r in caplog.records)


def test_progress_bar_names_the_protocol(tiny_path, tmp_path, monkeypatch):
    import learners.training.loop as train_module

    seen = []
    monkeypatch.setattr(train_module, "_run", lambda *args: seen.append(args[-1]) or {})
    for protocol in ("azr", "mae"):
        cfg = dataclasses.replace(
            DEBUG,
            model=tiny_path,
            device="cpu",
            out=str(tmp_path / protocol),
            env=dataclasses.replace(DEBUG.env, protocol=protocol),
        )
        train_module.train(cfg, progress=False)
    train_module.train(dataclasses.replace(cfg, out=str(tmp_path / "c")), desc="mae seed 1")
    assert seen == ["azr train", "mae train", "mae seed 1"]


def test_turn_order_under_another_protocol_is_named():
    azr = dataclasses.replace(
        DEBUG, env=dataclasses.replace(DEBUG.env, protocol="azr", turn_order="interleaved")
    )
    found = [m for m in checks.ignored_settings(azr, DEBUG) if "turn_order" in m]
    assert found == [
        "env.turn_order = 'interleaved' does nothing: it orders the turns of protocol "
        "'sage', not 'azr'"
    ]
    sage = dataclasses.replace(DEBUG, env=dataclasses.replace(DEBUG.env, turn_order="interleaved"))
    assert not [m for m in checks.ignored_settings(sage, DEBUG) if "turn_order" in m]

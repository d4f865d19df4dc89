"""A learner's ``advantages`` is tried on a synthetic batch when it is registered (wrong
length, non-finite values: refused naming class, file and line), and a learner that keeps
state its checkpoint does not save is warned about (``learners.algorithms.plugin_checks``)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

from learners.algorithms.ema_baseline import EMABaselineLearner
from learners.algorithms.loss_result import LearnerPluginError
from learners.algorithms.pg import PolicyGradientLearner
from learners.algorithms.plugin_checks import LearnerStateWarning, check_learner_class
from learners.algorithms.registry import LEARNERS, learner_spec, register_learner
from learners.cli import main

ROOT = Path(__file__).resolve().parents[3]

SHORT = """
from learners.algorithms.registry import register_learner
from learners.algorithms.pg import PolicyGradientLearner


class OneShort(PolicyGradientLearner):
    def advantages(self, batch):
        return [t.reward for t in batch][1:]


register_learner("one_short", OneShort, overwrite=True)
"""


def test_advantages_of_the_wrong_length_fail_at_import_naming_class_file_and_line(tmp_path, capsys):
    plugin = tmp_path / "one_short_plugin.py"
    plugin.write_text(SHORT)
    assert main(["train", "--import", str(plugin), "--algorithm", "one_short"]) == 2
    err = capsys.readouterr().err
    line = SHORT.splitlines().index("    def advantages(self, batch):") + 1
    assert "learner 'one_short': OneShort.advantages (" in err
    assert f"{plugin.resolve()}:{line}" in err
    assert "returned 5 values for a test batch of 6 transitions" in err
    assert "one finite float per Transition" in err
    assert "one_short" not in LEARNERS


def test_advantages_are_checked_at_every_update_too():
    from learners.algorithms.loss_result import check_advantages

    batch = [object()] * 3
    with pytest.raises(LearnerPluginError, match=r"NaNAdvantages\.advantages \(.*test_plugin"):
        check_advantages(object.__new__(NaNAdvantages), batch, [0.0, float("inf"), 1.0])
    with pytest.raises(LearnerPluginError, match="it returned float 1.0 on a batch of 3"):
        check_advantages(NaNAdvantages, batch, 1.0)
    assert check_advantages(NaNAdvantages, batch, (1, 2, 3)) == [1.0, 2.0, 3.0]


class NaNAdvantages(PolicyGradientLearner):
    def advantages(self, batch):
        rewards = [t.reward for t in batch]
        spread = max(rewards) - max(rewards)  # 0: a division by it gives nan
        return [(r - r) / spread if spread else float("nan") for r in rewards]


def test_non_finite_advantages_are_refused_naming_class_and_file():
    with pytest.raises(LearnerPluginError) as err:
        register_learner("nan_adv", NaNAdvantages)
    message = str(err.value)
    assert "NaNAdvantages.advantages" in message and f"{Path(__file__).resolve()}:" in message
    assert "non-finite advantages [nan, nan, nan, nan, nan, nan]" in message
    assert "nan_adv" not in LEARNERS


class RunningMean(PolicyGradientLearner):
    """A running mean of every reward seen, kept across updates but never saved."""

    def __init__(self, policy, config=None, temperature=1.0, seed=0):
        super().__init__(policy, config, temperature, seed)
        self.history: list[float] = []

    def advantages(self, batch):
        self.history.extend(t.reward for t in batch)
        mean = sum(self.history) / len(self.history)
        return [t.reward - mean for t in batch]


class SavedRunningMean(RunningMean):
    def extra_state(self):
        return {"history": list(self.history)}

    def load_extra_state(self, state):
        self.history = list(state.get("history", []))


class ForgetfulEMA(EMABaselineLearner):
    """The built-in EMA learner without its extra_state: its baselines would be lost."""

    extra_state = PolicyGradientLearner.extra_state
    load_extra_state = PolicyGradientLearner.load_extra_state


@pytest.mark.parametrize("cls, attribute", [(RunningMean, "history"), (ForgetfulEMA, "baseline")])
def test_a_learner_with_unsaved_state_is_warned_about_at_import(cls, attribute):
    with pytest.warns(LearnerStateWarning) as caught:
        check_learner_class("stateful", cls, cls.config_cls)
    message = str(caught[0].message)
    assert f"learner 'stateful' ({cls.__name__}, {Path(__file__).resolve()}:" in message
    assert f"self.{attribute} changed" in message and "--resume" in message
    assert "extra_state()" in message and "docs/guide/learners.md#a-learner-with-state" in message


def _no_state_warning(name: str, cls, config_cls) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", LearnerStateWarning)
        check_learner_class(name, cls, config_cls)


def test_a_learner_that_saves_its_state_is_not_warned_about():
    _no_state_warning("saved", SavedRunningMean, SavedRunningMean.config_cls)


@pytest.mark.parametrize("name", ["trr", "grpo", "reinforce_pp", "ema"])
def test_built_in_learners_pass_the_advantages_check_without_a_warning(name):
    spec = learner_spec(name)
    _no_state_warning(name, spec.factory, spec.config_cls)


@pytest.mark.parametrize("module, name", [
    ("rloo_learner", "rloo"), ("dr_grpo", "dr_grpo"), ("dapo_clip_higher", "dapo"),
])  # fmt: skip
def test_example_learners_pass_the_advantages_check_without_a_warning(module, name):
    sys.path.insert(0, str(ROOT))
    with warnings.catch_warnings():
        warnings.simplefilter("error", LearnerStateWarning)
        __import__(f"examples.{module}")
    spec = learner_spec(name)
    _no_state_warning(name, spec.factory, spec.config_cls)

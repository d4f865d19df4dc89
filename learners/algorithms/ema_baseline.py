"""Per-role EMA baseline (SPIRAL, arXiv 2506.24119, role-conditioned advantage estimation).

Each role keeps an exponential moving average of its rewards across updates;
``A = r - b_role``. The baseline carries information across steps, so a role whose rewards are
constant within a batch still learns when they differ from its history.
"""

from __future__ import annotations

from dataclasses import dataclass

from learners.algorithms.advantages import EMABaseline
from learners.algorithms.pg import PGConfig, PolicyGradientLearner
from learners.algorithms.registry import register_learner
from learners.policy import HFPolicy
from learners.types import Transition


@dataclass
class EMAConfig(PGConfig):
    """Hyperparameters of the ``ema`` learner: the shared ``PGConfig`` plus the decay."""

    ema_decay: float = 0.95
    """Decay of the per-(role, domain) reward baseline, in [0, 1); higher remembers longer."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.ema_decay < 1.0:
            raise ValueError(f"ema_decay must be in [0, 1), got {self.ema_decay}")


@register_learner("ema")
class EMABaselineLearner(PolicyGradientLearner):
    """``A = r - b_role`` with an EMA baseline per (role, domain)."""

    config_cls = EMAConfig

    def __init__(
        self,
        policy: HFPolicy,
        config: EMAConfig | PGConfig | None = None,
        temperature: float = 1.0,
        seed: int = 0,
    ) -> None:
        super().__init__(policy, config, temperature, seed)
        self.baseline = EMABaseline(self.config.ema_decay)

    def advantages(self, batch: list[Transition]) -> list[float]:
        """Reward minus the (role, domain) EMA baseline; then the baseline moves."""
        return self.baseline([t.reward for t in batch], [t.group_key for t in batch])

    def extra_state(self) -> dict:
        """The baselines, so a resumed run continues with them."""
        return {"baselines": dict(self.baseline.baselines)}

    def load_extra_state(self, state: dict) -> None:
        """Restore the baselines."""
        self.baseline.baselines = dict(state.get("baselines", {}))

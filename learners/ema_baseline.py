"""Per-role EMA baseline (SPIRAL, arXiv 2506.24119, role-conditioned advantage estimation).

Each role keeps an exponential moving average of its rewards across updates;
``A = r - b_role``. The baseline carries information across steps, so a role whose rewards are
constant within a batch still learns when they differ from its history.
"""

from __future__ import annotations

from learners.advantages import EMABaseline
from learners.pg import PGConfig, PolicyGradientLearner
from learners.policy import HFPolicy
from learners.rollout import Transition


class EMABaselineLearner(PolicyGradientLearner):
    """``A = r - b_role`` with an EMA baseline per (role, domain)."""

    name = "ema"

    def __init__(
        self,
        policy: HFPolicy,
        config: PGConfig | None = None,
        temperature: float = 1.0,
        seed: int = 0,
    ) -> None:
        super().__init__(policy, config, temperature, seed)
        self.baseline = EMABaseline(self.config.ema_decay)

    def advantages(self, batch: list[Transition]) -> list[float]:
        """Reward minus the (role, domain) EMA baseline; then the baseline moves."""
        return self.baseline([t.reward for t in batch], [(t.role, t.domain) for t in batch])

    def extra_state(self) -> dict:
        """The baselines, so a resumed run continues with them."""
        return {"baselines": dict(self.baseline.baselines)}

    def load_extra_state(self, state: dict) -> None:
        """Restore the baselines."""
        self.baseline.baselines = dict(state.get("baselines", {}))

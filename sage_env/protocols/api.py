"""The protocol API: what a protocol may use of the environment it runs in (type only).

:class:`ProtocolEnv` is the part of :class:`sage_env.env.raw_env` that protocols call (see
:mod:`sage_env.protocols.base` for what each member means). Protocols annotate ``env`` with it
instead of ``raw_env``, so ``sage_env.protocols`` does not import ``sage_env.env`` even for
type checking (the environment imports the protocols, not the other way round).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from sage_env.config import EnvConfig
    from sage_env.tasks.pool import TaskPool
    from sage_env.tasks.task import Task
    from sage_env.text.parsing import ChallengerOutput


class ProtocolEnv(Protocol):
    """The environment as a protocol sees it (:class:`sage_env.env.raw_env` implements it)."""

    config: EnvConfig
    """The environment's settings; ``config.protocol_config`` is the protocol's own."""
    pool: TaskPool
    """The task pool (seeds and accepted generated tasks)."""

    @property
    def rng(self) -> random.Random:
        """The environment's seeded random generator (use it, never ``random``)."""
        ...

    @property
    def check_rng(self) -> random.Random:
        """The generator of the sandbox's check runs: pass it as ``check_rng``, never :attr:`rng`.

        So checks never move a task draw.
        """
        ...

    @property
    def episode(self) -> int:
        """Rounds started so far."""
        ...

    @property
    def current_task(self) -> Task | None:
        """The task the selected agent acts on."""
        ...

    @property
    def action_score_probs(self) -> tuple | None:
        """The score distribution of the action being stepped, when the driver sent one."""
        ...

    def select(
        self, agent: str, phase: str, task: Task, obs: dict[str, str], repeats: int = 1
    ) -> None:
        """Give the turn to ``agent`` in ``phase`` on ``task``."""
        ...

    def announce(
        self, agent: str, phase: str, task: Task, obs: dict[str, str], repeats: int = 1
    ) -> None:
        """Announce a later turn of this round whose observation is already fixed."""
        ...

    def deliver(self, agent: str, reward: float, terms: dict, **details: Any) -> None:
        """Credit ``agent``'s most recent action with ``reward``; ``terms`` are its parts by
        name, ``details`` keys of :data:`sage_env.outcome.KEYS` (the action's
        :class:`~sage_env.outcome.Outcome`)."""
        ...

    def finish(self) -> None:
        """End the round."""
        ...

    def draw_reference(self) -> Task:
        """Draw a seed task."""
        ...

    def soft(self, soft: float, binary: float) -> float:
        """The format score of the configured ``format_rule``."""
        ...

    def verify(self, task: Task, text: str) -> tuple[float, float, dict]:
        """Score an answer with the external verifier: ``(s_gt, format, verdict)``."""
        ...

    def check_verifier(self, task: Task) -> dict:
        """Check a proposed task's own verifier."""
        ...

    def new_task(self, out: ChallengerOutput, reference: Task) -> Task:
        """A generated task from a parsed proposal, with provenance."""
        ...

"""The action contract of :class:`sage_env.env.raw_env`: its text space, how an action is read.

An action is one ``str``: the agent's whole reply (the observation's ``prefix`` + the
completion). Any string is legal. :func:`read_action` is the one reading of it:

- a non-``str`` is converted with ``str()``; ``None`` becomes ``""``;
- text beyond ``max_chars`` (``EnvConfig.max_action_chars``) is cut, and the cut is
  reported (``infos[agent]["action_truncated"]``);
- a :class:`sage_env.text.parsing.ScoredReply` (a ``str`` subclass) also carries
  ``score_probs``: the policy's probability of each critic score 1-10 right after the
  ``<score>`` prefix. It is handed on unvalidated (:attr:`Action.score_probs`); only a
  review turn under ``RewardConfig.critic_score_estimate = "expected"`` reads it, through
  :func:`sage_env.text.parsing.expected_critic_score`, which turns anything malformed into
  ``None`` (the sampled score is used then). A plain ``str`` carries none.

Standard library and gymnasium only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gymnasium import spaces

MAX_TEXT = 1 << 20
"""Longest observation field :class:`AnyText` holds by default (characters)."""


class AnyText(spaces.Text):
    """A text space that contains any Python ``str`` up to ``max_length`` characters.

    ``gymnasium.spaces.Text`` only contains strings over its charset (alphanumeric by
    default), which rejects the newlines, emoji and LaTeX a language model writes.
    ``sample()`` still draws from the default charset.
    """

    def __init__(self, max_length: int = MAX_TEXT, seed: int | None = None) -> None:
        super().__init__(max_length=max_length, min_length=0, seed=seed)

    def contains(self, x: Any) -> bool:
        """True for any ``str`` of at most ``max_length`` characters."""
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText({self.max_length})"


@dataclass(frozen=True)
class Action:
    """An action as the environment applies it.

    Attributes:
        text: The reply as a plain ``str``, cut to ``max_chars``.
        score_probs: The ``score_probs`` the action carried (a
            :class:`~sage_env.text.parsing.ScoredReply`'s), unvalidated; ``None`` for a plain
            ``str``.
        chars: The reply's length before the cut.
    """

    text: str
    score_probs: Any
    chars: int

    @property
    def cut(self) -> bool:
        """Whether the reply was longer than ``max_chars`` (and :attr:`text` is its start)."""
        return self.chars > len(self.text)


def read_action(action: object, max_chars: int) -> Action:
    """Read ``action`` by the contract above; never raises on a ``str`` or ``None``."""
    text = action if isinstance(action, str) else ("" if action is None else str(action))
    return Action(
        text=str(text[:max_chars]),
        score_probs=getattr(action, "score_probs", None),
        chars=len(text),
    )

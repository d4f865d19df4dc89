"""The round's transcript: the readable text ``render()`` shows.

A :class:`Transcript` is what :meth:`sage_env.env.raw_env.render` returns
(``render_mode="ansi"``) or prints as it grows (``"human"``): per action, the phase and the
agent, the observation, the response prefix and the reply (with where it was cut at
``max_action_chars``); per credit, the reward, its terms, a short view of the outcome's
details (:func:`short_details`) and why each format term has its value. The environment
writes to it only when a render mode is set, and starts a new one at every ``reset``.
"""

from __future__ import annotations

from typing import Any


class Transcript:
    """The text of one round so far, one entry per action or credit."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.printed = 0  # entries a "human" render has printed already

    def action(
        self, phase: str, agent: str, user: str, prefix: str, text: str, cut: tuple | None
    ) -> None:
        """Add ``agent``'s reply ``text`` in ``phase`` to observation ``user``.

        ``cut`` is ``(chars, kept)`` when the reply had ``chars`` characters and was cut to
        its first ``kept`` (``max_action_chars``), else ``None``.
        """
        self.lines.append(
            f"=== {phase}: {agent} ===\n--- observation ---\n{user}\n"
            + (f"--- prefix ---\n{prefix}\n" if prefix else "")
            + (
                f"--- action (cut to its first {cut[1]} of {cut[0]} characters: "
                "max_action_chars) ---\n"
                if cut
                else "--- action ---\n"
            )
            + text
        )

    def credit(
        self, agent: str, reward: float, terms: dict, details: dict, why: dict[str, str]
    ) -> None:
        """Add the credit of ``agent``'s action: its reward, terms, details and reasons."""
        self.lines.append(f"--- reward {agent}: {reward:.4f} {terms} {short_details(details)}")
        for term, reason in why.items():
            self.lines.append(f"    why {term}={terms.get(term)}: {reason}")

    def text(self) -> str:
        """The whole round so far."""
        return "\n".join(self.lines) + "\n"

    def unprinted(self) -> str | None:
        """What was added since the last call (``None``: nothing); marks it printed."""
        new = self.lines[self.printed :]
        self.printed = len(self.lines)
        return "\n".join(new) if new else None


def short_details(details: dict[str, Any]) -> str:
    """``details`` in at most 400 characters: a proposal's ``parsed`` cut to why it failed.

    ``parsed`` keeps ``mode``, ``valid``, ``reason`` and ``output`` for an execution proposal,
    else ``valid``, ``format_score`` and ``reason``; ``plan`` is left out.
    """
    keep = {k: v for k, v in details.items() if k not in ("parsed", "plan")}
    parsed = details.get("parsed")
    if parsed:  # say why a proposal failed without dumping the whole question
        fields = (
            ("mode", "valid", "reason", "output")
            if "mode" in parsed
            else ("valid", "format_score", "reason")
        )
        keep["parsed"] = {k: parsed.get(k) for k in fields if k in parsed}
    return str(keep)[:400]

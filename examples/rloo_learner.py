"""Tutorial: a new RL algorithm for sage-env in one small file (docs/guide/learners.md).

RLOO (Ahmadian et al. 2024, arXiv 2402.14740): each completion's baseline is the mean reward
of the *other* completions sampled for the same prompt,

    A_i = r_i - mean_{j != i} r_j        (within a (role, prompt) group of size n >= 2)

and a completion without siblings gets 0. Everything else — log-probs, PPO clipping, KL,
AdamW, checkpoints — comes from ``PolicyGradientLearner``.

Train with it:  python examples/rloo_learner.py --preset debug --out runs/rloo
(the flags are ``sage-env train``'s; without ``--preset`` it runs the ``demo`` preset, and
says so first).
"""

from __future__ import annotations

from collections import defaultdict

from learners.algorithms.advantages import is_constant
from learners.algorithms.pg import PolicyGradientLearner
from learners.algorithms.registry import register_learner
from learners.types import Transition


def rloo_advantages(rewards: list[float], groups: list) -> list[float]:
    """Leave-one-out advantages; 0 for a group of one or of equal rewards (float32 too)."""
    members = defaultdict(list)
    for i, g in enumerate(groups):
        members[g].append(i)
    adv = [0.0] * len(rewards)
    for idx in members.values():
        n, vals = len(idx), [float(rewards[i]) for i in idx]
        if is_constant(vals):  # also n == 1
            continue
        total = sum(vals)
        for i, v in zip(idx, vals):
            adv[i] = v - (total - v) / (n - 1)
    return adv


@register_learner("rloo", overwrite=True)  # overwrite: importing twice is fine
class RLOOLearner(PolicyGradientLearner):
    """REINFORCE with a leave-one-out baseline per (role, prompt)."""

    advantage_group = "role_prompt"  # sage-env train refuses a config with groups of one

    def advantages(self, batch: list[Transition]) -> list[float]:
        """Leave-one-out baseline among completions of the same (role, prompt)."""
        groups = [(t.role, tuple(t.prompt_ids)) for t in batch]
        return rloo_advantages([t.reward for t in batch], groups)


def preset_note(args: list[str]) -> str | None:
    """What this script says before training when ``args`` name no ``--preset``."""
    if any(a in ("-h", "--help") or a.split("=")[0] == "--preset" for a in args):
        return None
    from learners.training.presets import PRESETS

    demo = PRESETS["demo"]
    return (
        f"rloo_learner.py: no --preset, so this is the demo preset ({demo.steps} steps of "
        f"{demo.rounds_per_step} rounds, {demo.model}; your flags override it); "
        "--preset debug is the smallest run"
    )


if __name__ == "__main__":
    import sys

    from learners.cli import main

    note = preset_note(sys.argv[1:])
    if note:
        print(note, file=sys.stderr)
    raise SystemExit(main(["train", "--algorithm", "rloo", *sys.argv[1:]]))

"""Environment configuration.

Every number the SAGE paper (arXiv 2603.15255) fixes has its paper default here, and every
point the paper leaves open is a field with a documented default (see ``docs/rewards.md``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass
class RewardConfig:
    """Reward weights and gates of the SAGE round (paper defaults)."""

    alpha: float = 0.7
    """Quality gate: a generated question joins the pool and is solved for difficulty only
    when the critic's normalised quality score ``q >= alpha``."""
    beta: float = 0.3
    """Plan gate: the solver sees the plan only when the critic's plan score ``p > beta``."""
    challenger_weights: tuple[float, float, float] = (1 / 3, 1 / 3, 1 / 3)
    """Weights of (q, d, f) in the Challenger reward; the paper's (q + d + f) / 3."""
    difficulty_when_gated: Literal["zero", "renormalise"] = "zero"
    """When ``q < alpha`` (or the proposal is invalid) the difficulty term d is dropped.
    ``"zero"`` (default): d counts as 0, reward (q + f) / 3, so a rejected question never
    out-earns an accepted one ((q + d + f) / 3 with q >= alpha). ``"renormalise"``: the
    remaining weights are rescaled to sum to 1, reward (q + f) / 2, which is how secondary
    summaries of the paper report it; it lets a rejected question (q = 0.6: 0.8) out-earn an
    accepted hard one (q = 0.8, d = 0.25: 0.68)."""
    planner_weights: tuple[float, float] = (0.5, 0.5)
    """Weights (w_plan, w_fmt) of the Planner reward ``w_plan * p + w_fmt * f``
    (paper default lambda_plan = lambda_f = 0.5)."""
    solver_weights: tuple[float, float, float] = (0.2, 0.6, 0.2)
    """Weights of (p, s_gt, f) in the Solver reward; the paper's 0.2 p + 0.6 s_gt + 0.2 f."""
    solver_plan_term_when_gated: Literal["zero", "renormalise"] = "zero"
    """When the solver saw no plan (plan gated out, or a difficulty attempt on a fresh
    question) the p term is ``"zero"`` (default: reward 0.6 s_gt + 0.2 f) or
    ``"renormalise"`` (reward (0.6 s_gt + 0.2 f) / 0.8)."""
    format_rule: Literal["soft", "binary"] = "soft"
    """Format scores f. ``"soft"`` (default; the paper's soft format score in [0, 1] as
    reported by secondary summaries): partial credit for partly well-formed output, e.g. 0.5
    for a challenger that wrote ``<question>`` but no ``<answer>`` (see ``docs/rewards.md``).
    ``"binary"``: 1 only when fully well-formed, else 0."""
    critic_score_rule: Literal["minus_one_over_nine", "over_ten"] = "minus_one_over_nine"
    """How the critic's 1-10 score becomes [0, 1]: ``(s - 1) / 9`` (default) or ``s / 10``."""
    critic_plan_grounding: float = 0.0
    """Weight w of a grounded term in the critic's reward for a plan review, in [0, 1]:
    ``(1 - w) f + w (1 - |p - s|)``, s the mean external verifier score of the k solver
    attempts on the planned task (paid when they end). 0 (default, the paper): format only,
    so a critic whose every reply parses gets no gradient. The term never touches the
    correctness of anything: the verifier decides s, the critic is paid for predicting it."""
    mae_solver_weights: tuple[float, float] = (0.8, 0.2)
    """Protocol ``"mae"``: weights (w_j, w_f) of the solver reward ``w_j j + w_f f``, j the
    judge's normalised score of the answer."""
    azr_format_penalty: bool = False
    """Protocol ``"azr"``: use AZR Eq. 6 penalties (-1 unformatted, -0.5 formatted but wrong)
    instead of 0; rewards then leave [0, 1]."""


@dataclass
class EnvConfig:
    """Configuration of :func:`sage_env.env`.

    Attributes are plain values so the config round-trips through YAML and CLI flags.
    """

    protocol: str = "sage"
    """The game: ``"sage"`` (default), ``"azr"``, ``"mae"`` or a name registered with
    :func:`sage_env.protocols.register_protocol` (see ``docs/protocols/README.md``)."""
    rewards: RewardConfig = field(default_factory=RewardConfig)
    """Reward weights and gates."""
    solver_samples: int = 2
    """k: solver attempts per task, both to measure a new question's difficulty and to solve
    the planned task. The paper samples several; 2 keeps CPU demos cheap."""
    domains: tuple[str, ...] = ("math", "code")
    """Domains the Challenger's reference task is drawn from."""
    max_action_chars: int = 20_000
    """Actions longer than this are truncated (keeping the head) before parsing."""
    max_task_chars: int = 4_000
    """Generated questions longer than this fail the format check."""
    require_code_solution: bool = True
    """A proposed code task must carry a ``<solution>`` that passes its own tests; without it,
    impossible tests would earn difficulty d = 1 for free."""
    pool_admission: Literal["gate", "solvable"] = "gate"
    """Which accepted questions join the pool. ``"gate"`` (default, the paper): every question
    with ``q >= alpha``, and the challenger earns d = 1 - mean probe score, so a question that
    no probe solves earns d = 1 whether it is hard or wrong. ``"solvable"``: a question joins
    only when at least one of the k difficulty probes solves it (AZR's learnability idea);
    one that none solves stays out of the pool and its d counts as 0, as for a gated
    question, so an unsolvable (often wrong) task is never paid as hard."""
    pool_near_duplicate_threshold: float | None = 0.9
    """A generated question whose word-3-gram Jaccard similarity with a pool task of the same
    domain reaches this is rejected as a near duplicate (``None`` disables)."""
    pool_max_generated: int | None = None
    """Cap on generated tasks in the pool; the oldest generated task is evicted first."""
    math_workers: int = 0
    """Worker processes for :class:`~sage_env.verifiers.MathVerifier` (0 = in process)."""
    code_timeout_s: float = 10.0
    """Wall-clock limit of one code verification (program + all its tests), seconds."""
    code_memory_mb: int = 1024
    """Address-space limit of the code verification process, MiB."""
    seed: int | None = None
    """Default seed when :meth:`reset` is called without one."""
    critic_sees_verifier: bool = False
    """The critic's question review shows the proposal's verifier too: its final answer
    (math) or its tests (code), so a wrong answer or impossible tests can be scored down.
    False (default): the question alone, as in the paper's description of the quality
    score. Measured on the default model in ``docs/results.md``."""
    prefixes: bool = True
    """Response prefixes: every observation carries ``"prefix"``, the start of the assistant
    turn the protocol chooses for the phase (an opening tag such as ``"<question>"``). The
    learner writes it after the chat template's generation prompt and returns prefix +
    completion as the action. False: every prefix is ``""`` (the model writes the whole
    reply). Small models follow the reply format far more often with a prefix
    (``docs/environment.md``)."""
    prefix_overrides: dict[str, str] = field(default_factory=dict)
    """Per-phase prefixes that replace the protocol's choice, ``{phase: prefix}``; ``""``
    turns the prefix of that phase off. Applies when ``prefixes`` is True."""

    def resolve_prefix(self, phase: str, default: str) -> str:
        """The response prefix of ``phase`` under this config, given the protocol's ``default``.

        ``""`` when ``prefixes`` is False, else ``prefix_overrides[phase]`` when set, else
        ``default``.
        """
        if not self.prefixes:
            return ""
        return self.prefix_overrides.get(phase, default)

    def __post_init__(self) -> None:
        if isinstance(self.rewards, dict):
            self.rewards = RewardConfig(**self.rewards)
        r = self.rewards
        if not 0.0 <= r.alpha <= 1.0 or not 0.0 <= r.beta <= 1.0:
            raise ValueError(f"alpha and beta must be in [0, 1], got {r.alpha}, {r.beta}")
        if not 0.0 <= r.critic_plan_grounding <= 1.0:
            raise ValueError(
                f"critic_plan_grounding must be in [0, 1], got {r.critic_plan_grounding}"
            )
        if self.solver_samples < 1:
            raise ValueError(f"solver_samples must be >= 1, got {self.solver_samples}")
        if not isinstance(self.prefix_overrides, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.prefix_overrides.items()
        ):
            raise ValueError(
                f"prefix_overrides must map phase names to strings, got {self.prefix_overrides!r}"
            )
        if self.pool_admission not in ("gate", "solvable"):
            raise ValueError(
                f"pool_admission must be 'gate' or 'solvable', got {self.pool_admission!r}"
            )
        bad = set(self.domains) - {"math", "code"}
        if bad or not self.domains:
            raise ValueError(
                f"domains must be a non-empty subset of ('math', 'code'), got {self.domains!r}"
            )

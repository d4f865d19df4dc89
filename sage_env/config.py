"""Environment configuration.

Every number the SAGE paper (arXiv 2603.15255) fixes has its paper default here, and every
point the paper leaves open is a field with a documented default (``docs/reference/rewards.md``).
Settings that only one protocol reads belong to that protocol
(:attr:`sage_env.protocols.Protocol.config_cls`) and live in ``EnvConfig.protocol_config``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

ProtocolConfigT = TypeVar("ProtocolConfigT")
"""The chosen protocol's settings class (``AZRConfig`` for ``"azr"``; ``None`` when it has none)."""


def build_protocol_config(config_cls: type | None, value: Any, protocol: str) -> Any:
    """``EnvConfig.protocol_config`` for a protocol whose settings class is ``config_cls``.

    Args:
        config_cls: The protocol's :attr:`~sage_env.protocols.Protocol.config_cls`.
        value: ``None`` (the defaults), an instance of ``config_cls``, or a mapping of its
            fields (from Python or YAML).
        protocol: The protocol's name, for messages.

    Returns:
        An instance of ``config_cls``; ``None`` when ``config_cls`` is ``None``.

    Raises:
        ValueError: on a key ``config_cls`` lacks (the message lists its fields), an instance
            of another class, settings for a protocol without any, or a value its
            ``__post_init__`` rejects.
    """
    if config_cls is None:
        if value is None or (isinstance(value, Mapping) and not value):
            return None
        raise ValueError(
            f"protocol {protocol!r} has no settings of its own (no config_cls), "
            f"got protocol_config={value!r}"
        )
    if value is None:
        return config_cls()
    if isinstance(value, config_cls):
        return value
    if isinstance(value, Mapping):
        names = {f.name for f in dataclasses.fields(config_cls) if f.init}
        unknown = sorted(set(value) - names)
        if unknown:
            raise ValueError(
                f"unknown protocol_config key(s) {unknown} for protocol {protocol!r}: "
                f"{config_cls.__name__} has {sorted(names)}"
            )
        try:
            return config_cls(**value)
        except TypeError as exc:  # a field without default left out
            raise ValueError(f"protocol_config of {protocol!r}: {exc}") from None
    raise ValueError(
        f"protocol {protocol!r} takes a {config_cls.__name__} (or a mapping of its fields) as "
        f"protocol_config, got {type(value).__name__}: {value!r}"
    )


_UNREGISTERED = object()


def _registered_config_cls(protocol: str) -> Any:
    """The protocol's settings class, or ``_UNREGISTERED`` when no such protocol is known yet."""
    from sage_env.protocols.registry import protocol_config_cls

    try:
        return protocol_config_cls(protocol)
    except ValueError:
        return _UNREGISTERED


DIFFICULTY_RULES = ("inverse_accuracy", "learnability", "band")
"""Names of :attr:`RewardConfig.difficulty_rule` (:func:`sage_env.rewards.difficulty`)."""


@dataclass
class RewardConfig:
    """Reward weights and gates of the SAGE round (paper defaults, except ``difficulty_rule``).

    Raises:
        ValueError: on an unknown ``difficulty_rule``.
    """

    alpha: float = 0.7
    """Quality gate: a generated question joins the pool and is solved for difficulty only
    when the critic's normalised quality score ``q >= alpha``."""
    domain_alpha: dict[str, float] = field(default_factory=dict)
    """Quality gates per domain (``{"exec": 0.21}``): a question of a domain named here passes
    when ``q >= domain_alpha[domain]`` instead of ``alpha``. Empty by default (one gate);
    ``sage-env train --gate-calibration`` with ``gate_per_domain`` fills it from the critic
    probe's items of each domain (:meth:`sage_env.env.raw_env.set_gate`), because a critic
    scores an execution task's program on another scale than a word problem."""
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
    difficulty_rule: Literal["inverse_accuracy", "learnability", "band"] = "learnability"
    """How the difficulty term d of a proposal whose stored answer comes from the proposer
    (a math answer, code tests) follows from r, the mean verifier score of its k difficulty
    probes (MAE: the mean judge score). ``"learnability"`` (default; AZR, arXiv 2505.03335,
    Eq. 4): ``d = 1 - r`` when ``0 < r < 1``, else 0, so a task that no probe solves earns
    nothing for difficulty and stays out of the pool: with a wrong stored answer every right
    probe is judged wrong, so "nobody solved it" is no evidence of a hard task. ``"band"``
    (R-Zero, arXiv 2508.05004): ``d = 1 - 2 |r - 0.5|``, 1 at r = 0.5, 0 at r = 0 and 1; an
    unsolved task stays out of the pool too. ``"inverse_accuracy"`` (the SAGE paper):
    ``d = 1 - r``, so a task that no probe solves earns d = 1 whether it is hard or wrong,
    and joins the pool (unless ``EnvConfig.pool_admission = "solvable"``). Execution tasks
    (domain ``exec``), whose truth the sandbox computes from the program, keep ``d = 1 - r``
    under every rule. Table: ``docs/reference/rewards.md``, "Difficulty rule"."""
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
    for a challenger that wrote ``<question>`` but no ``<answer>`` (``docs/reference/rewards.md``).
    ``"binary"``: 1 only when fully well-formed, else 0."""
    critic_score_rule: Literal["minus_one_over_nine", "over_ten"] = "minus_one_over_nine"
    """How the critic's 1-10 score becomes [0, 1]: ``(s - 1) / 9`` (default) or ``s / 10``."""
    critic_score_estimate: Literal["sampled", "expected"] = "sampled"
    """Which critic score the gates and the other roles' rewards use (q, p, and MAE's j).
    ``"sampled"`` (default, the paper): the score parsed from the one sampled reply.
    ``"expected"``: the expected score ``sum_s s p(s)`` under the critic's own distribution
    over its score, which a rollout driver passes with the reply
    (:class:`sage_env.text.parsing.ScoredReply`; the environment asks for it with
    ``infos[agent]["score_probs"] = True`` on review turns whose response prefix ends with
    ``<score>``; with prefixes off there is no such position to read). It removes the
    sampling noise that hides a small critic's judgement (``benchmarks/critic_warmup/run.py``).
    A reply without a distribution (a human player, a scripted policy) falls back to its
    sampled score, and ``infos`` says which was used. The critic's own reward is always
    computed from its sampled reply."""
    critic_plan_grounding: float = 0.0
    """Weight w of a grounded term in the critic's reward for a plan review, in [0, 1]:
    ``(1 - w) f + w (1 - |p - s|)``, s the mean external verifier score of the k solver
    attempts on the planned task (paid when they end). 0 (default, the paper): format only,
    so a critic whose every reply parses gets no gradient. The term never touches the
    correctness of anything: the verifier decides s, the critic is paid for predicting it."""

    def __post_init__(self) -> None:
        if self.difficulty_rule not in DIFFICULTY_RULES:
            raise ValueError(
                f"difficulty_rule must be one of {DIFFICULTY_RULES}, got {self.difficulty_rule!r}"
            )


@dataclass
class EnvConfig(Generic[ProtocolConfigT]):
    """Configuration of :func:`sage_env.env`.

    Attributes are plain values so the config round-trips through YAML and CLI flags.
    ``EnvConfig[AZRConfig]`` names the type of ``protocol_config`` (for tyro and pydantic).

    Raises:
        ValueError: on an out-of-range value, or a ``protocol_config`` that does not fit a
            registered ``protocol`` (:func:`build_protocol_config`).
    """

    protocol: str = "sage"
    """The game: ``"sage"`` (default), ``"azr"``, ``"mae"`` or a name registered with
    :func:`sage_env.protocols.register_protocol` (see ``docs/reference/protocols/README.md``)."""
    rewards: RewardConfig = field(default_factory=RewardConfig)
    """Reward weights and gates."""
    protocol_config: ProtocolConfigT = None  # type: ignore[assignment]
    """The chosen protocol's own settings: an instance of its ``config_cls``
    (``AZRConfig`` for ``azr``, ``MAEConfig`` for ``mae``; ``None`` for a protocol without
    any, as ``sage``). A mapping of its fields (Python, YAML) is converted; ``None`` gives its
    defaults. ``sage-env train --protocol NAME --help`` lists them as
    ``--env.protocol-config.*`` flags. Changing ``protocol`` with :meth:`with_protocol`
    resets it."""
    solver_samples: int = 2
    """k: solver attempts per task, both to measure a new question's difficulty and to solve
    the planned task. The paper samples several; 2 keeps CPU demos cheap."""
    domains: tuple[str, ...] = ("math", "code")
    """Domains the Challenger's reference task is drawn from: ``math``, ``code`` and
    ``exec`` (AZR's execution tasks; the bundled execution seeds then join the seeds and the
    pool, and the Challenger proposes a program and an input whose output the sandboxed
    executor computes)."""
    domain_weights: dict[str, float] | None = None
    """Relative weights of ``domains`` when a round draws its reference task's domain, by name
    (``{"exec": 4.0}`` with ``("math", "code", "exec")`` draws exec in 4 of 6 rounds; a domain
    not named weighs 1, a name not in ``domains`` is ignored, so ``--env.domains`` can change
    without it). ``None`` (default): uniform. A domain whose proposals this model never makes
    valid gives its rounds no self-made task; the weights say where the rounds go."""

    exec_induction_one_argument: bool = False
    """Draw an induction proposer's program from the one-argument programs of the deduction
    and abduction buffers (``f`` with exactly one positional parameter,
    :func:`~sage_env.tasks.exec_tasks.signature`), or from all of them when none takes one.
    False (default, AZR's rule): from every program. The demo's 135M Challenger wrote inputs
    of one argument for programs of two to four in 4 of its 12 induction proposals even when
    the prompt stated the arity, and an induction proposal is valid only when every input
    runs (docs/write-ups/demo-run.md, "Self-made tasks in the pool")."""

    def domain_weight_list(self) -> list[float] | None:
        """``domain_weights`` as one weight per entry of ``domains`` (``None``: uniform)."""
        if self.domain_weights is None:
            return None
        return [float(self.domain_weights.get(d, 1.0)) for d in self.domains]
    max_action_chars: int = 20_000
    """Actions longer than this are truncated (keeping the head) before parsing; the cut is
    flagged as ``infos[agent]["action_truncated"] = {"chars": original length, "kept":
    max_action_chars}`` (also in ``last`` when that action is credited) and in the
    transcript's action header."""
    max_task_chars: int = 4_000
    """Generated questions longer than this fail the format check."""
    require_code_solution: bool = True
    """A proposed code task must carry a ``<solution>`` that passes its own tests; without it,
    impossible tests would earn difficulty d = 1 for free under
    ``difficulty_rule="inverse_accuracy"``."""
    pool_admission: Literal["gate", "solvable", "frozen"] = "gate"
    """Which accepted questions join the pool. ``"gate"`` (default, the paper): every question
    with ``q >= alpha`` that ``RewardConfig.difficulty_rule`` admits: under the default
    ``"learnability"`` (and ``"band"``) a math or code question that no probe solves stays out
    and earns d = 0 (its stored answer may be wrong); under the paper's
    ``"inverse_accuracy"`` it joins and earns d = 1 whether it is hard or wrong.
    ``"solvable"``: a question joins only when at least one of the k difficulty probes solves
    it, in every domain and under every rule; one that none solves stays out of the pool and
    its d is dropped, as for a gated question. Under the evidence rules it adds only that
    execution questions (whose truth the sandbox computes) need a solved probe too; under
    ``"inverse_accuracy"`` it is the paper's rule with unsolved questions kept out. ``"frozen"`` (an
    ablation, every protocol): proposals are generated, judged, admitted and paid exactly as
    under ``"gate"``, but an accepted task never becomes a solver or planner task
    (:meth:`~sage_env.tasks.pool.TaskPool.trainable`): the solver attempts that judge a new task
    (AZR's and MAE's learnability, SAGE's difficulty probes) are made and paid but marked
    ``infos[agent]["last"]["train"] = False``, which learners leave out of the update, and
    the solver then trains on a seed task instead. Growing minus frozen is what self-made
    tasks add (docs/reference/rewards.md, "Frozen pool")."""
    turn_order: Literal["sequential", "interleaved"] = "sequential"
    """Order of a ``"sage"`` round's turns. ``"sequential"`` (default, the paper's order):
    challenger, critic on the question, k difficulty probes, then planner, critic on the plan,
    k solves, with the planned task drawn from the pool after this round's question joined it.
    ``"interleaved"``: the planned task is drawn when the round starts, and the round's two
    independent halves alternate (challenger, planner, critic on the question, critic on the
    plan, k probes, k solves); every turn whose observation is already fixed is announced in
    ``infos[agent]["ahead"]``, so a rollout driver samples both halves in one batch (3
    generate calls a round instead of 6). Rewards follow the same rules in both orders; the
    only difference in the game is that this round's question can be planned only from the
    next round on (``docs/guide/environment.md``, "Turn order")."""
    math_grounding: Literal["claim", "program"] = "claim"
    """Where a generated math task's stored answer comes from. ``"claim"`` (default, the
    paper): the Challenger's ``<answer>`` is the truth, so a wrong answer that no solver
    matches is paid as hard (d = 1) under ``difficulty_rule="inverse_accuracy"`` and left
    out of the pool under the default ``"learnability"``. ``"program"`` (ours,
    ``docs/reference/rewards.md``, "Math grounding"): the Challenger also writes
    ``<program>`` defining ``def answer():``, which the sandbox runs under the execution
    tasks' rules (:func:`sage_env.verifiers.executor.compute_answer`: allow-listed modules
    and builtins, the stored run and check runs under drawn hash seeds must agree); the task
    is refused unless the program's value and the stated answer agree under math-verify, and
    the stored answer is the program's value. Seeds keep their gold either way."""
    pool_near_duplicate_threshold: float | None = 0.9
    """A generated question whose word-3-gram Jaccard similarity with a pool task of the same
    domain reaches this is rejected as a near duplicate (``None`` disables)."""
    pool_max_generated: int | None = None
    """Cap on generated tasks in the pool; the oldest generated task is evicted first."""
    math_workers: int = 0
    """Worker processes for :class:`~sage_env.verifiers.MathVerifier` (0 = in process)."""
    code_timeout_s: float = 10.0
    """CPU-time limit of each test's process (the program with one test), seconds; the
    wall clock stops a process only at 3x this + 2 s (``docs/reference/sandbox.md``, "Limits under
    load"). A program that loops on every test costs tests x this."""
    code_memory_mb: int = 1024
    """Address-space limit of the code verification process, MiB."""
    seed: int | None = None
    """Default seed when :meth:`reset` is called without one."""
    critic_sees_verifier: bool = False
    """The critic's question review shows the proposal's verifier too: its final answer
    (math) or its tests (code), so a wrong answer or impossible tests can be scored down.
    False (default): the question alone, as in the paper's description of the quality
    score. Measured on the default model in ``docs/write-ups/learning.md``."""
    prefixes: bool = True
    """Response prefixes: every observation carries ``"prefix"``, the start of the assistant
    turn the protocol chooses for the phase (an opening tag such as ``"<question>"``). The
    learner writes it after the chat template's generation prompt and returns prefix +
    completion as the action. False: every prefix is ``""`` (the model writes the whole
    reply). Small models follow the reply format far more often with a prefix
    (``docs/guide/environment.md``)."""
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

    def with_protocol(self, protocol: str) -> EnvConfig:
        """A copy playing ``protocol``, with that protocol's default settings (``self`` if same).

        Raises:
            ValueError: as the constructor.
        """
        if protocol == self.protocol:
            return self
        return dataclasses.replace(self, protocol=protocol, protocol_config=None)

    def __post_init__(self) -> None:
        if isinstance(self.rewards, dict):
            self.rewards = RewardConfig(**self.rewards)
        config_cls = _registered_config_cls(self.protocol)
        if config_cls is not _UNREGISTERED:  # else raw_env builds it once the name is known
            self.protocol_config = build_protocol_config(
                config_cls, self.protocol_config, self.protocol
            )
        r = self.rewards
        if not 0.0 <= r.alpha <= 1.0 or not 0.0 <= r.beta <= 1.0:
            raise ValueError(f"alpha and beta must be in [0, 1], got {r.alpha}, {r.beta}")
        for domain, a in r.domain_alpha.items():
            if isinstance(a, bool) or not isinstance(a, (int, float)) or not 0.0 <= a <= 1.0:
                raise ValueError(f"domain_alpha[{domain!r}] must be in [0, 1], got {a!r}")
        if not 0.0 <= r.critic_plan_grounding <= 1.0:
            raise ValueError(
                f"critic_plan_grounding must be in [0, 1], got {r.critic_plan_grounding}"
            )
        if r.critic_score_estimate not in ("sampled", "expected"):
            raise ValueError(
                "critic_score_estimate must be 'sampled' or 'expected', "
                f"got {r.critic_score_estimate!r}"
            )
        if self.solver_samples < 1:
            raise ValueError(f"solver_samples must be >= 1, got {self.solver_samples}")
        if not isinstance(self.prefix_overrides, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.prefix_overrides.items()
        ):
            raise ValueError(
                f"prefix_overrides must map phase names to strings, got {self.prefix_overrides!r}"
            )
        if self.turn_order not in ("sequential", "interleaved"):
            raise ValueError(
                f"turn_order must be 'sequential' or 'interleaved', got {self.turn_order!r}"
            )
        if self.math_grounding not in ("claim", "program"):
            raise ValueError(
                f"math_grounding must be 'claim' or 'program', got {self.math_grounding!r}"
            )
        if self.pool_admission not in ("gate", "solvable", "frozen"):
            raise ValueError(
                "pool_admission must be 'gate', 'solvable' or 'frozen', "
                f"got {self.pool_admission!r}"
            )
        bad = set(self.domains) - {"math", "code", "exec"}
        if bad or not self.domains:
            raise ValueError(
                "domains must be a non-empty subset of ('math', 'code', 'exec'), "
                f"got {self.domains!r}"
            )
        if self.domain_weights is not None:
            w = dict(self.domain_weights)
            if (
                set(w) - {"math", "code", "exec"}
                or any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in w.values())
                or any(not x >= 0 for x in w.values())
                or not sum(w.get(d, 1.0) for d in self.domains) > 0
            ):
                raise ValueError(
                    "domain_weights must map 'math', 'code', 'exec' to weights >= 0, not 0 for "
                    f"every domain of {tuple(self.domains)!r}, got {self.domain_weights!r}"
                )
            self.domain_weights = {k: float(v) for k, v in w.items()}

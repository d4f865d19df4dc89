"""Reward formulas of the SAGE round (arXiv 2603.15255, Sec. 3) as pure functions.

Each returns ``(reward, terms)`` where ``terms`` names every term that went in, so a person
debugging a reward can see exactly why it came out as it did. See ``docs/reference/rewards.md``.
"""

from __future__ import annotations

from collections.abc import Sequence

from sage_env.config import RewardConfig


def normalise_critic_score(raw: float | None, rule: str = "minus_one_over_nine") -> float:
    """Map a raw critic score in [1, 10] to [0, 1].

    ``"minus_one_over_nine"``: (s - 1) / 9 (paper default); ``"over_ten"``: s / 10.
    An unparseable score (``None``) maps to 0.0.
    """
    if raw is None:
        return 0.0
    if rule == "over_ten":
        return raw / 10.0
    return (raw - 1.0) / 9.0


GATE_TOLERANCE = 1e-9
"""Gates compare with this tolerance so that a critic score that lands on a gate in exact
arithmetic (7.3 -> (7.3 - 1) / 9 = 0.7) is treated as on the gate despite float rounding."""


def gate_alpha(cfg: RewardConfig, domain: str | None = None) -> float:
    """The quality gate of a question of ``domain``: ``cfg.domain_alpha[domain]`` when set,
    else ``cfg.alpha``."""
    return float(cfg.domain_alpha.get(domain, cfg.alpha)) if domain is not None else cfg.alpha


def quality_gate(q: float, cfg: RewardConfig, domain: str | None = None) -> bool:
    """True when a proposed question passes the quality gate ``q >= alpha`` (inclusive).

    ``alpha`` is :func:`gate_alpha` of the question's ``domain`` (``cfg.alpha`` when the
    domain has no gate of its own or is not given).
    """
    return q >= gate_alpha(cfg, domain) - GATE_TOLERANCE


def plan_gate(p: float, cfg: RewardConfig) -> bool:
    """True when the plan is shown to the solver: ``p > beta`` (strict)."""
    return p > cfg.beta + GATE_TOLERANCE


def challenger_reward(q: float, d: float | None, f: float, cfg: RewardConfig) -> tuple[float, dict]:
    """Challenger reward ``w_q q + w_d d + w_f f`` (paper: (q + d + f) / 3).

    Args:
        q: Critic quality score in [0, 1].
        d: Difficulty in [0, 1] (:func:`difficulty` of the mean solver verifier score under
            ``cfg.difficulty_rule``), or ``None`` when the question failed the quality gate
            and was not solved.
        f: Format score in [0, 1].
        cfg: Weights and the ``difficulty_when_gated`` rule.
    """
    wq, wd, wf = cfg.challenger_weights
    if d is None:
        if cfg.difficulty_when_gated == "renormalise":
            reward = (wq * q + wf * f) / (wq + wf)
        else:
            reward = wq * q + wf * f
    else:
        reward = wq * q + wd * d + wf * f
    return reward, {"q": q, "d": d, "f": f}


def planner_reward(p: float, f: float, cfg: RewardConfig) -> tuple[float, dict]:
    """Planner reward ``w_plan p + w_fmt f``."""
    w_plan, w_fmt = cfg.planner_weights
    return w_plan * p + w_fmt * f, {"p": p, "f": f}


def solver_reward(p: float | None, s_gt: float, f: float, cfg: RewardConfig) -> tuple[float, dict]:
    """Solver reward ``0.2 p + 0.6 s_gt + 0.2 f`` (weights from ``cfg.solver_weights``).

    Args:
        p: Critic plan score when the plan was shown, ``None`` when it was not (gated out or
            a difficulty attempt); then ``solver_plan_term_when_gated`` decides.
        s_gt: External verifier score in [0, 1] (never the critic's opinion).
        f: Format score in [0, 1].
        cfg: Weights and the ``solver_plan_term_when_gated`` rule.
    """
    wp, ws, wf = cfg.solver_weights
    if p is None:
        reward = ws * s_gt + wf * f
        if cfg.solver_plan_term_when_gated == "renormalise":
            reward /= ws + wf
    else:
        reward = wp * p + ws * s_gt + wf * f
    return reward, {"p": p, "s_gt": s_gt, "f": f}


def critic_reward(f: float) -> tuple[float, dict]:
    """Critic reward: its format score (the critic never judges correctness)."""
    return f, {"f": f}


def critic_plan_reward(f: float, p: float | None, s_mean: float, w: float) -> tuple[float, dict]:
    """Critic reward for a plan review with a grounded term of weight ``w``.

    ``(1 - w) f + w (1 - |p - s_mean|)`` (``RewardConfig.critic_plan_grounding``; not in the
    SAGE paper, whose critic earns its format score only, which is ``w = 0``). A review
    whose score does not parse predicts nothing and gets agreement 0, so silence never
    earns what an honest low score earns.

    Args:
        f: The review's format score in [0, 1].
        p: Its normalised plan score in [0, 1], ``None`` when the score did not parse.
        s_mean: Mean external verifier score of the solver attempts on the planned task,
            in [0, 1].
        w: Weight of the grounded term in [0, 1].
    """
    agreement = 0.0 if p is None else 1.0 - abs(p - s_mean)
    terms = {"f": f, "p": p, "s_mean": s_mean, "agreement": agreement}
    return (1.0 - w) * f + w * agreement, terms


# --------------------------------------------------------------------- AZR (arXiv 2505.03335)
AZR_WRONG_FORMATTED = -0.5
"""AZR Eq. 6: reward of a response that is well formatted but wrong (not passable)."""
AZR_FORMAT_ERROR = -1.0
"""AZR Eq. 6: reward of a response with formatting errors."""


def learnability_reward(acc: float) -> float:
    """AZR's proposer reward (arXiv 2505.03335, Eq. 4): ``1 - acc`` if ``0 < acc < 1`` else 0.

    ``acc`` is the solver's mean reward over its Monte Carlo rollouts on the proposed task.
    """
    return 1.0 - acc if 0.0 < acc < 1.0 else 0.0


def difficulty(r: float, rule: str) -> float:
    """The difficulty term d of a proposed task whose probes scored ``r`` on average.

    Args:
        r: Mean verifier score of the solver's difficulty probes, in [0, 1].
        rule: :attr:`~sage_env.config.RewardConfig.difficulty_rule`.
            ``"inverse_accuracy"`` (the SAGE paper): ``1 - r``. ``"learnability"`` (AZR,
            arXiv 2505.03335, Eq. 4; :func:`learnability_reward`): ``1 - r`` when
            ``0 < r < 1``, else 0. ``"band"`` (R-Zero, arXiv 2508.05004, uncertainty
            reward): ``1 - 2 |r - 0.5|``, 1 at r = 0.5 and 0 at r = 0 or 1.

    Returns:
        d in [0, 1].

    Raises:
        ValueError: on an unknown ``rule``.
    """
    if rule == "inverse_accuracy":
        return 1.0 - r
    if rule == "learnability":
        return learnability_reward(r)
    if rule == "band":
        return 1.0 - 2.0 * abs(r - 0.5)
    raise ValueError(
        f"unknown difficulty rule {rule!r}; known: 'inverse_accuracy', 'learnability', 'band'"
    )


def task_difficulty(r: float, rule: str, domain: str) -> float:
    """The difficulty term d of a proposed task of ``domain`` whose probes scored ``r``.

    :func:`difficulty` under ``rule`` for a task whose answer or tests come from the
    proposer (``math``, ``code``); ``1 - r`` for an execution task (``exec``), whose truth
    the sandbox computes, under every rule.
    """
    return 1.0 - r if domain == "exec" else difficulty(r, rule)


def needs_solvability_evidence(rule: str, domain: str) -> bool:
    """True when a proposed task that no attempt solved must stay out of the pool.

    Under every rule but ``"inverse_accuracy"`` a task whose answer or tests come from the
    proposer (domains ``math``, ``code``) is admitted only when at least one attempt solved
    it: with a wrong stored answer every right attempt is judged wrong, so a task nobody
    solves is a suspect, not a hard task. An execution task (``exec``) is its program, whose
    outputs the sandbox computes, so it is never a suspect of that kind.
    """
    return rule != "inverse_accuracy" and domain != "exec"


def solved_by_any(scores: Sequence[float]) -> bool:
    """Whether some attempt solved a task in full: the evidence that its verifier is right.

    A score is 1 for a right math answer and the fraction of tests passed for code. A
    partial pass is no evidence (ours, issue 46 item 5): tests that contradict the question
    in four asserts of five (the proposer's reference solution special-cases them) give a
    right solution 0.2, which counted as "solved" paid the proposal d = 0.8 under
    learnability and pooled it. Only an attempt that passes every test shows the tests can
    be met by a solution to the question.
    """
    return any(s >= 1.0 for s in scores)


def azr_reward(
    role_reward: float, passable: bool, formatted: bool, format_penalty: bool = True
) -> tuple[float, dict]:
    """AZR's format-aware reward (arXiv 2505.03335, Eq. 6).

    ``R = r_role`` if the response is passable; ``-0.5`` if it is wrong but well formatted;
    ``-1`` if it has formatting errors. For the solver, passable means a correct answer
    (``r_role`` = its accuracy reward, Eq. 5); for the proposer, a valid task (``r_role`` =
    the learnability reward, Eq. 4). With ``format_penalty`` False, a response that is not
    passable earns 0 instead (rewards stay in [0, 1]).

    Returns:
        ``(reward, terms)`` with ``r_role``, ``passable`` and ``formatted``.
    """
    terms = {"r_role": role_reward, "passable": passable, "formatted": formatted}
    if passable:
        return role_reward, terms
    if not format_penalty:
        return 0.0, terms
    return (AZR_WRONG_FORMATTED if formatted else AZR_FORMAT_ERROR), terms

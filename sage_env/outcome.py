"""The record of one scored action: what the environment tells the learner about a reward.

:meth:`sage_env.env.raw_env.deliver` builds an :class:`Outcome` for every credited action;
``infos[agent]["last"]`` carries it, ``learners.types.Transition.outcome`` holds it, and
metrics, reports, the OpenEnv server and the verifiers environment read its fields. It is the
typed form of what used to be a free-form dict (issue 50), in the style of OpenEnv's typed
``Observation`` and PettingZoo's records:

- :class:`Outcome`: who acted, in which phase, the reward and its terms, why each format term
  has its value, and the groups below when the action had them;
- :class:`Parse`: what the environment read from a proposal (a challenger's or proposer's
  task);
- :class:`Review`: a critic's or judge's score of a question, plan or answer;
- :class:`Decision`: what the gates decided (pool admission, whether a plan was shown).

Verifier results (``verdict``, ``verifier_check``) stay the verifiers' own JSON dicts
(``score``, ``status``, ``reason`` and per-verifier fields; ``docs/reference/verifiers.md``).

:meth:`Outcome.to_dict` gives the flat JSON form (the keys :data:`KEYS`, as
``transcripts/step_N.jsonl`` and the server store them) and :meth:`Outcome.from_dict` reads
it back. For reading in a debugger or a notebook an :class:`Outcome` also answers
``last["why"]``, ``last.get("gate")``, ``"raw_score" in last`` and ``dict(last)`` over the
same flat keys; a key that is not in :data:`KEYS` raises ``KeyError`` (a typo never reads as
"absent"). Code in this repository reads fields (``tests/sage_env/test_outcome_keys.py``
checks it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

REVIEW_SCORE_KEYS = {"question": "q", "plan": "p", "answer": "j"}
"""The flat key of a review's normalised score, by what was reviewed (``q``, ``p``, ``j``)."""


@dataclass(frozen=True)
class Parse:
    """What the environment read from a proposal, and whether it is a valid task.

    Math/code proposals fill the first group (:func:`sage_env.protocols.base.public`), execution
    proposals the second (:func:`sage_env.protocols.azr.vet_exec_proposal`); a field the
    proposal's kind has no use for is ``None``.
    """

    valid: bool = False
    """The proposal is a task the pool could take (parsed, checked, not a duplicate)."""
    well_formed: bool = False
    """Its format parsed (the tags or fenced blocks its prompt asks for)."""
    reason: str = ""
    """Why it is not valid (``"valid"`` or ``""`` when it is)."""
    format_score: float | None = None
    """Math/code: the format score of the reply, in [0, 1]."""
    question: str | None = None
    """Math/code: the new task's statement."""
    answer: str | None = None
    """Math: the stated final answer."""
    tests: list[str] | None = None
    """Code: the assert-style tests."""
    entry_point: str | None = None
    """Code: the function the tests call."""
    program: str | None = None
    """Math (``math_grounding="program"``): the answer program; exec: the proposed program."""
    mode: str | None = None
    """Exec: ``"deduction"``, ``"abduction"`` or ``"induction"``."""
    formatted: bool | None = None
    """AZR: the reply had the blocks its mode asks for (AZR's name for ``well_formed``)."""
    input: str | None = None
    """Exec deduction/abduction: the proposed input."""
    inputs: list[str] | None = None
    """Exec induction: the proposed inputs."""
    message: str | None = None
    """Exec induction: the proposer's message to the solver."""
    output: str | None = None
    """Exec: the output the executor computed for ``input``."""
    validation: str | None = None
    """Exec: the program check that refused it, or ``"valid"``."""
    added_to_buffer: bool | None = None
    """AZR: a valid task joined its mode's buffer."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``valid``, ``well_formed``, ``reason``, then a math/code
        proposal's six fields (``None`` or not), or an execution proposal's set fields."""
        return _given(self, _PARSE_CORE | (_PUBLIC_KEYS if self.mode is None else frozenset()))


_PARSE_CORE = frozenset({"valid", "well_formed", "reason"})
_PUBLIC_KEYS = frozenset(
    {"format_score", "question", "answer", "tests", "entry_point", "program"}
)


@dataclass(frozen=True)
class Review:
    """A critic's or judge's score of a question, a plan or an answer.

    Scores are normalised to [0, 1] by ``RewardConfig.critic_score_rule``
    (:func:`sage_env.rewards.normalise_critic_score`); see :func:`sage_env.protocols.base.review`.
    """

    kind: str
    """What was reviewed: ``"question"``, ``"plan"`` or ``"answer"``."""
    score: float | None = None
    """The normalised score the gates use (flat key ``q``, ``p`` or ``j`` by ``kind``)."""
    raw_score: float | None = None
    """The 1-10 score the reply wrote, ``None`` when none parsed."""
    score_estimate: str | None = None
    """Under ``critic_score_estimate = "expected"``: ``"expected"`` or ``"sampled"`` (the
    fallback when the action carried no valid score distribution); else ``None``."""
    expected_raw_score: float | None = None
    """The expected 1-10 score of the action's distribution, when it was used."""
    sampled_score: float | None = None
    """The normalised score of the sampled reply, under ``"expected"``."""
    verifier_agrees: bool | None = None
    """MAE's judge: its verdict (j >= 0.5) agrees with the external verifier's."""

    def to_dict(self) -> dict[str, Any]:
        """The flat keys: ``review``, ``q``/``p``/``j``, ``raw_score`` and the set others."""
        out: dict[str, Any] = {"review": self.kind, "raw_score": self.raw_score}
        if self.score is not None or self.kind in REVIEW_SCORE_KEYS:
            out[REVIEW_SCORE_KEYS.get(self.kind, "score")] = self.score
        for name in ("score_estimate", "expected_raw_score", "sampled_score", "verifier_agrees"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


@dataclass(frozen=True)
class Decision:
    """What the gates decided about the action's task or plan; ``None``: not decided here."""

    gate: str | None = None
    """One line: the gate that decided and its numbers (``"q=0.111 < alpha=0.700: rejected"``)."""
    accepted: bool | None = None
    """SAGE, MAE: the proposal passed the critic's gate."""
    valid: bool | None = None
    """AZR: the proposal is a valid execution task."""
    added_to_pool: bool | None = None
    """The new task joined the pool (False: a duplicate, unsolved or refused)."""
    new_task_id: str | None = None
    """The id the new task has (in the pool when ``added_to_pool``)."""
    probe_scores: list[float] | None = None
    """SAGE: the solver's verifier scores on the new task, when they refused it."""
    judge_scores: list[float] | None = None
    """MAE: the judge's scores of the solver's answers, when they refused it."""
    plan_shown: bool | None = None
    """SAGE planner and solver: the plan passed the beta gate and was shown to the solver."""

    def to_dict(self) -> dict[str, Any]:
        """The set fields under their own names."""
        return _given(self, frozenset())


@dataclass(frozen=True)
class Outcome:
    """The record of one credited action, built by :meth:`sage_env.env.raw_env.deliver`.

    The reward is the one ``env.last()`` returns at the agent's next turn (several credits
    of one turn add up there; each has its own :class:`Outcome`). Reward functions and terms:
    :mod:`sage_env.rewards`; ``why``: :func:`sage_env.env_scoring.term_reasons`.
    """

    agent: str
    """The credited agent id, e.g. ``"solver_0"``."""
    phase: str | None
    """The phase the action was taken in (``challenge``, ``review_question``, ``solve``...)."""
    reward: float
    """The reward, finite (a non-finite one was delivered as 0)."""
    terms: dict[str, Any] = field(default_factory=dict)
    """The reward's terms by name (``q``, ``d``, ``f``, ``s_gt``, ``acc``...): floats, or
    ``None`` for a dropped term, or a protocol's own flags."""
    why: dict[str, str] = field(default_factory=dict)
    """One line per format term on why it has its value (empty when there is none)."""
    parse: Parse | None = None
    """A proposal's parse (flat key ``parsed``); ``None`` for any other action."""
    review: Review | None = None
    """A critic's or judge's review; ``None`` for any other action."""
    decision: Decision | None = None
    """The gates' decisions; ``None`` when none was taken on this action."""
    verdict: dict[str, Any] | None = None
    """A solver's answer checked by the external verifier (``score``, ``status``, ``reason``)."""
    verifier_check: dict[str, Any] | None = None
    """A proposal's own verifier checked (``status``, ``reason``, math ``grounding``)."""
    reason: str | None = None
    """Why the reply lost format credit: a review or plan that lacks what its format needs,
    or an AZR proposal that is not valid (``""`` when nothing is wrong)."""
    plan: str | None = None
    """SAGE planner: the parsed plan text."""
    mode: str | None = None
    """AZR: the execution mode of the task (``deduction``, ``abduction``, ``induction``)."""
    train: bool = True
    """False when the action only judged a new task (frozen pool): learners leave it out."""
    action_truncated: dict[str, int] | None = None
    """The reply was cut at ``max_action_chars``: ``{"chars": its length, "kept": limit}``."""

    # --------------------------------------------------------------- building
    @classmethod
    def build(
        cls,
        agent: str,
        phase: str | None,
        reward: float,
        terms: Mapping[str, Any],
        why: Mapping[str, str] | None = None,
        **details: Any,
    ) -> Outcome:
        """The outcome of a ``deliver`` call: its flat ``details`` keywords sorted into groups.

        Args:
            agent, phase, reward, terms, why: As the fields.
            **details: Flat keys of :data:`KEYS` (``parsed=dict``, ``raw_score=``,
                ``review=``, ``q=``, ``gate=``, ``verdict=``...), as protocols pass them.

        Raises:
            TypeError: on a keyword that is not in :data:`KEYS`.
        """
        unknown = set(details) - KEYS
        if unknown:
            raise TypeError(
                f"deliver got detail key(s) {sorted(unknown)} that Outcome does not declare; "
                "a reward's parts go in `terms`, other keys must be fields of "
                "sage_env.outcome.Outcome (KEYS)"
            )
        parsed = details.pop("parsed", None)
        parse = None
        if isinstance(parsed, Parse):
            parse = parsed
        elif isinstance(parsed, Mapping) and parsed:
            parse = Parse(**{k: v for k, v in parsed.items() if k in _PARSE_FIELDS})
        elif isinstance(parsed, Mapping):  # public(None): no proposal parsed at all
            parse = _NO_PARSE
        review = None
        kind = details.pop("review", None)
        score_key = REVIEW_SCORE_KEYS.get(kind) if kind is not None else None
        if kind is not None:
            review = Review(
                kind=kind,
                score=details.pop(score_key, None) if score_key else None,
                raw_score=details.pop("raw_score", None),
                **{k: details.pop(k) for k in _REVIEW_EXTRA if k in details},
            )
        decision_kw = {k: details.pop(k) for k in _DECISION_FIELDS if k in details}
        decision = Decision(**decision_kw) if decision_kw else None
        stray = set(details) - set(_OUTCOME_FLAT)
        if stray:
            raise TypeError(f"detail key(s) {sorted(stray)} belong to a review: pass review=")
        return cls(
            agent=agent,
            phase=phase,
            reward=reward,
            terms=dict(terms),
            why=dict(why or {}),
            parse=parse,
            review=review,
            decision=decision,
            **details,
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], strict: bool = True) -> Outcome:
        """Read :meth:`to_dict`'s form back (a round record's ``details``, a server reply).

        Args:
            data: The flat dict.
            strict: Raise on a key that is not in :data:`KEYS`; False drops such keys (records
                written by older versions).

        Raises:
            TypeError: on an unknown key when ``strict``.
        """
        flat = dict(data)
        if not strict:
            flat = {k: v for k, v in flat.items() if k in KEYS}
            if "review" not in flat:  # a review's score without its kind: not readable
                for k in ("raw_score", *REVIEW_SCORE_KEYS.values(), *_REVIEW_EXTRA):
                    flat.pop(k, None)
        own = {k: flat.pop(k) for k in _OWN if k in flat}
        return cls.build(
            agent=str(own.get("agent", "")),
            phase=own.get("phase"),
            reward=float(own.get("reward", 0.0)),
            terms=own.get("terms") or {},
            why=own.get("why") or {},
            **flat,
        )

    # ---------------------------------------------------------------- reading
    def to_dict(self) -> dict[str, Any]:
        """The flat JSON form: the keys of :data:`KEYS` that this action has.

        ``phase``, ``reward`` and ``terms`` always; ``why`` when not empty; ``parsed`` as a
        dict; a review's and a decision's fields at the top level; ``train`` only when
        False; the other fields when not ``None``.
        """
        out: dict[str, Any] = {
            "agent": self.agent,
            "phase": self.phase,
            "reward": self.reward,
            "terms": self.terms,
        }
        for name in _OUTCOME_FLAT:
            value = getattr(self, name)
            if value is not None and not (name == "train" and value):
                out[name] = value
        if self.parse is not None:
            out["parsed"] = self.parse.to_dict()
        if self.review is not None:
            out.update(self.review.to_dict())
        if self.decision is not None:
            out.update(self.decision.to_dict())
        if self.why:
            out["why"] = self.why
        return out

    def __getitem__(self, key: str) -> Any:
        """``to_dict()[key]``; ``KeyError`` when the action has no such key or :data:`KEYS`
        does not declare it."""
        _declared(key)
        return self.to_dict()[key]

    def get(self, key: str, default: Any = None) -> Any:
        """``to_dict().get(key, default)``.

        Raises:
            KeyError: when :data:`KEYS` does not declare ``key`` (a typo is not "absent").
        """
        _declared(key)
        return self.to_dict().get(key, default)

    def __contains__(self, key: object) -> bool:
        """Whether the flat form has ``key``."""
        return key in self.to_dict()

    def keys(self) -> Any:
        """The flat form's keys (so that ``dict(outcome)`` works)."""
        return self.to_dict().keys()

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())

    __hash__ = None  # type: ignore[assignment] - dict fields: not hashable


_NO_PARSE = Parse()
_PARSE_FIELDS = frozenset(f.name for f in dataclasses.fields(Parse))
_REVIEW_EXTRA = ("score_estimate", "expected_raw_score", "sampled_score", "verifier_agrees")
_DECISION_FIELDS = tuple(f.name for f in dataclasses.fields(Decision))
_OWN = ("agent", "phase", "reward", "terms", "why")
_OUTCOME_FLAT = (
    "verdict", "verifier_check", "reason", "plan", "mode", "train", "action_truncated",
)  # fmt: skip

KEYS: frozenset[str] = frozenset(
    {*_OWN, "parsed", "review", "raw_score", *REVIEW_SCORE_KEYS.values(), *_REVIEW_EXTRA}
    | set(_DECISION_FIELDS)
    | set(_OUTCOME_FLAT)
)
"""Every key of :meth:`Outcome.to_dict`: what ``deliver(**details)`` may pass, what a reader
of ``infos[agent]["last"]`` may ask for."""
PARSE_KEYS: frozenset[str] = _PARSE_FIELDS
"""Every key of :meth:`Parse.to_dict` (``last["parsed"]``)."""


def _declared(key: str) -> None:
    if key not in KEYS:
        raise KeyError(f"{key!r} is not a key of Outcome (sage_env.outcome.KEYS)")


def _given(record: Any, always: frozenset[str]) -> dict[str, Any]:
    """A dataclass's fields as a dict, less the ``None`` ones not in ``always``."""
    return {
        f.name: getattr(record, f.name)
        for f in dataclasses.fields(record)
        if f.name in always or getattr(record, f.name) is not None
    }

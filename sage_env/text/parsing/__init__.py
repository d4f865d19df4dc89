r"""Parsing of model output: the one home of every reader of what a model writes.

Every function takes arbitrary text (any length, any unicode, broken tags) and never raises:
a missing or malformed field comes back as ``None`` (or an empty result) and the caller
gives a format score of 0. Nothing else in ``sage_env`` or ``learners`` extracts fields,
answers, scores or code from a reply; they import them from here.

- :mod:`sage_env.text.parsing.roles`: the tagged fields of each role (:func:`extract_tag`,
  :func:`parse_challenger`, :func:`parse_answer_program`, :func:`parse_plan`,
  :func:`parse_critic_score`, the critic's and planner's format rules and their one-line
  reasons :func:`critic_format_reason`, :func:`plan_format_reason`) and :class:`ScoredReply`,
  a critic reply carrying its score distribution (:func:`expected_critic_score`);
- :mod:`sage_env.text.parsing.answers`: answers: :func:`extract_boxed` (math),
  :func:`extract_code` (a Python program), :func:`fenced` / :func:`last_fenced` (AZR's
  blocks), :func:`defines_function`, :func:`prefix_only_code`, :func:`as_text`.

Standard library only.
"""

from sage_env.text.parsing.answers import (
    as_text,
    defines_function,
    extract_boxed,
    extract_code,
    fenced,
    last_fenced,
    prefix_only_code,
)
from sage_env.text.parsing.roles import (
    RATIONALE_WORDS,
    SCORE_VALUES,
    ChallengerOutput,
    ScoredReply,
    critic_format_binary,
    critic_format_reason,
    critic_format_score,
    critic_rationale,
    critic_rationale_ok,
    critic_reply_reason,
    expected_critic_score,
    extract_tag,
    parse_answer_program,
    parse_challenger,
    parse_critic_score,
    parse_plan,
    plan_format_reason,
    plan_format_score,
)

__all__ = [
    "RATIONALE_WORDS",
    "SCORE_VALUES",
    "ChallengerOutput",
    "ScoredReply",
    "as_text",
    "critic_format_binary",
    "critic_format_reason",
    "critic_format_score",
    "critic_rationale",
    "critic_rationale_ok",
    "critic_reply_reason",
    "defines_function",
    "expected_critic_score",
    "extract_boxed",
    "extract_code",
    "extract_tag",
    "fenced",
    "last_fenced",
    "parse_answer_program",
    "parse_challenger",
    "parse_critic_score",
    "parse_plan",
    "plan_format_reason",
    "plan_format_score",
    "prefix_only_code",
]

"""The tagged fields each role writes: proposal, plan, critic score and rationale.

The challenger's proposal, the planner's plan, the critic's score and rationale, and the
score distribution a critic reply may carry (:class:`ScoredReply`). Every function here
takes arbitrary text (any length, any unicode, broken tags) and never raises: a missing or
malformed field comes back as ``None`` and the caller gives a format score of 0.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field

_SCORE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(?:/\s*10(?:\.0+)?)?\s*$")
_STEP_RE = re.compile(r"^\s*(?:step\s*)?\d+\s*[.):]", re.IGNORECASE | re.MULTILINE)


def extract_tag(text: str, tag: str) -> str | None:
    """Return the stripped content of the LAST complete ``<tag>...</tag>`` pair in ``text``.

    Matching is case-insensitive. An opening tag without a closing one yields ``None``.
    The last pair wins so a model can think aloud and then commit to a final answer.

    Args:
        text: Model output of any length.
        tag: Tag name without brackets, e.g. ``"score"``.

    Returns:
        The content (may be the empty string) or ``None`` when no complete pair exists.
    """
    if not isinstance(text, str) or not text:
        return None
    lower = text.lower()
    close = f"</{tag.lower()}>"
    open_ = f"<{tag.lower()}>"
    end = lower.rfind(close)
    if end < 0:
        return None
    start = lower.rfind(open_, 0, end)
    if start < 0:
        return None
    return text[start + len(open_) : end].strip()


def parse_critic_score(text: str) -> float | None:
    """Parse the critic's 1-10 score by one documented rule.

    Rule: take the content of the last ``<score>...</score>`` pair; it must be a single
    number, optionally written as a fraction of ten (``7``, ``7.5``, ``7/10``); the number
    must lie in [1, 10]. Anything else (no tag, text in the tag, out of range, a score
    written outside the tag) is unparseable.

    Returns:
        The raw score in [1, 10], or ``None`` when unparseable.
    """
    content = extract_tag(text, "score")
    if content is None or len(content) > 32:
        return None
    match = _SCORE_RE.match(content)
    if match is None:
        return None
    value = float(match.group(1))
    return value if 1.0 <= value <= 10.0 else None


SCORE_VALUES = tuple(range(1, 11))
"""The integer critic scores a score distribution ranges over (:class:`ScoredReply`)."""


class ScoredReply(str):
    """A critic reply that also carries the policy's distribution over its score.

    A ``str`` (the whole reply, prefix + completion), so every consumer of actions works
    unchanged, plus ``score_probs``: the probability of each integer score 1-10
    (:data:`SCORE_VALUES`) as the first thing written after the ``<score>`` prefix, under the
    policy that sampled the reply. With ``RewardConfig.critic_score_estimate = "expected"``
    the environment gates on the expected score ``sum_s s p(s)`` instead of the one sampled
    score: the mean of infinitely many sampled reviews, free of sampling noise.

    Args:
        text: The reply.
        score_probs: 10 probabilities for the scores 1..10; renormalised by
            :func:`expected_critic_score`, which returns ``None`` for anything malformed.
    """

    score_probs: tuple[float, ...] | None

    def __new__(cls, text: str, score_probs: object = None) -> ScoredReply:
        """Build the reply; a ``score_probs`` that is not iterable is kept as ``None``.

        So is a string or a mapping: its characters or keys are no distribution.
        """
        obj = super().__new__(cls, text)
        if isinstance(score_probs, (str, bytes, dict)):
            score_probs = None
        try:
            obj.score_probs = None if score_probs is None else tuple(score_probs)  # type: ignore[arg-type]
        except TypeError:
            obj.score_probs = None
        return obj


def expected_critic_score(score_probs: object) -> float | None:
    """The expected raw score ``sum_s s p(s)`` over s = 1..10, in [1, 10].

    ``score_probs`` is renormalised to sum to 1 (mass the policy put on other tokens is
    dropped).

    Returns:
        The expected score, or ``None`` unless ``score_probs`` is a sequence of 10 finite
        non-negative numbers (not strings), not all zero (never raises).
    """
    if isinstance(score_probs, (str, bytes, dict)):
        return None
    try:
        if any(isinstance(p, (str, bytes)) for p in score_probs):  # type: ignore[union-attr]
            return None
        probs = [float(p) for p in score_probs]  # type: ignore[union-attr]
    except (TypeError, ValueError, OverflowError):
        return None
    if len(probs) != len(SCORE_VALUES) or not all(math.isfinite(p) and p >= 0.0 for p in probs):
        return None
    peak = max(probs)
    if not peak > 0.0:
        return None
    probs = [p / peak for p in probs]  # in [0, 1]: the sums below cannot overflow
    value = math.fsum(s * p for s, p in zip(SCORE_VALUES, probs)) / math.fsum(probs)
    return min(10.0, max(1.0, value))


def parse_plan(text: str) -> str | None:
    """Return the ``<plan>`` content if it has two or more numbered steps, else ``None``.

    Steps are lines starting with ``1.``, ``2)``, ``Step 3:`` and the like.
    """
    plan = extract_tag(text, "plan")
    if not plan or len(_STEP_RE.findall(plan)) < 2:
        return None
    return plan


@dataclass
class ChallengerOutput:
    """Fields parsed from a Challenger action.

    Attributes:
        question: The new problem statement, or ``None`` if missing/too long.
        answer: Math: the gold final answer, or ``None``.
        tests: Code: assert statements, one per list item (each parses with ``ast``).
        entry_point: Code: the function the first test calls, or ``None``.
        solution: Optional reference solution text.
        program: Math: the ``<program>`` content (a ```` ```python ```` fence inside is
            dropped; without the tag, the last ```` ```python ```` block), or ``None``. Read
            only under ``EnvConfig.math_grounding = "program"``, where it must define
            ``def answer():`` computing the answer.
        valid: Whether every required field is present and well-formed (and, after the
            environment vetted it, not a duplicate and its own verifier passed its check).
        well_formed: Whether every required field parsed (``valid`` before vetting).
        format_score: Fraction of the two required parts (question; answer or tests) that are
            well-formed: 0, 0.5 or 1.
        reason: Why the output is invalid ("" when valid).
    """

    question: str | None = None
    answer: str | None = None
    tests: list[str] = field(default_factory=list)
    entry_point: str | None = None
    solution: str | None = None
    program: str | None = None
    valid: bool = False
    format_score: float = 0.0
    reason: str = ""
    well_formed: bool = False


def _split_asserts(block: str) -> list[str]:
    """Split a block of test code into top-level ``assert`` statements (source text)."""
    block = re.sub(r"^\s*```[a-zA-Z]*\s*$", "", block, flags=re.MULTILINE)
    try:
        tree = ast.parse(block)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    out = []
    for node in tree.body:
        if isinstance(node, ast.Assert):
            seg = ast.get_source_segment(block, node)
            if seg:
                out.append(seg)
    return out


_FENCE_LINE_RE = re.compile(r"^\s*```[a-zA-Z]*\s*$", re.MULTILINE)
_PYTHON_TAG_RE = re.compile(r"(?:python|py)[ \t]*\n", re.IGNORECASE)


def _last_python_fence(text: str) -> str | None:
    """Content of the last closed ```` ```python ```` block (linear time), or ``None``."""
    parts = text.split("```")
    for i in range(len(parts) - 2, 0, -1):  # parts[i] is inside a fence when i is odd
        if i % 2 == 1:
            m = _PYTHON_TAG_RE.match(parts[i])
            if m:
                return parts[i][m.end() :]
    return None


def parse_answer_program(text: str) -> str | None:
    """The answer program of a math proposal: ``<program>`` content, else a Python fence.

    Fence lines inside the tag are dropped; without a complete ``<program>`` pair the last
    ```` ```python ```` block counts. ``None`` when neither holds any text. Never raises.
    """
    if not isinstance(text, str):
        return None
    body = extract_tag(text, "program")
    if body is None:
        body = _last_python_fence(text)
    if body is None:
        return None
    body = _FENCE_LINE_RE.sub("", body).strip("\n")
    return body if body.strip() else None


def _called_name(assert_src: str) -> str | None:
    try:
        tree = ast.parse(assert_src)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return node.func.id
    return None


def parse_challenger(text: str, domain: str, max_question_chars: int = 4000) -> ChallengerOutput:
    """Parse a Challenger action for a task in ``domain`` (``"math"`` or ``"code"``).

    Math needs ``<question>`` and ``<answer>`` (and may add ``<program>``, which
    ``math_grounding = "program"`` requires: its check, not the format, refuses a proposal
    without one); code needs ``<question>`` and ``<tests>``
    holding at least one top-level ``assert`` that calls a function, and may add
    ``<solution>``. ``format_score`` is the fraction of the two required parts that are
    well-formed (0, 0.5 or 1); ``valid`` means both are. Never raises.
    """
    out = ChallengerOutput()
    reasons = []
    question = extract_tag(text, "question")
    if not question:
        reasons.append("missing <question>")
    elif len(question) > max_question_chars:
        reasons.append(f"question longer than {max_question_chars} chars")
    else:
        out.question = question
    verifier_ok = False
    if domain == "math":
        answer = extract_tag(text, "answer")
        if not answer or len(answer) > 200:
            reasons.append("missing or overlong <answer>")
        else:
            out.answer, verifier_ok = answer, True
        out.program = parse_answer_program(text)
    else:
        tests = _split_asserts(extract_tag(text, "tests") or "")
        entry = _called_name(tests[0]) if tests else None
        if not tests:
            reasons.append("no parseable assert statements in <tests>")
        elif entry is None:
            reasons.append("first test calls no function")
        else:
            out.tests, out.entry_point, verifier_ok = tests, entry, True
    out.solution = extract_tag(text, "solution") or None
    out.format_score = (float(out.question is not None) + float(verifier_ok)) / 2
    out.valid = out.well_formed = out.format_score == 1.0
    out.reason = "; ".join(reasons)
    return out


def plan_format_score(text: str) -> float:
    """Soft format score of a Planner action in {0, 0.5, 1}.

    0.5 for a complete ``<plan>...</plan>`` pair plus 0.5 for at least two numbered steps
    (inside the tag when present, else anywhere in the text).
    """
    plan = extract_tag(text, "plan")
    body = plan if plan is not None else (text if isinstance(text, str) else "")
    steps = len(_STEP_RE.findall(body[:20_000])) >= 2
    return 0.5 * float(plan is not None) + 0.5 * float(steps)


def plan_format_reason(text: str) -> str:
    """Why a Planner reply earns :func:`plan_format_score`, in one line (which halves it got).

    E.g. ``"<plan>...</plan> pair (0.5); 3 numbered steps (0.5)"`` or ``"no closed <plan>
    pair (0 of 0.5); 1 numbered step, want 2 (0 of 0.5)"``. Never raises.
    """
    plan = extract_tag(text, "plan")
    body = plan if plan is not None else (text if isinstance(text, str) else "")
    n = len(_STEP_RE.findall(body[:20_000]))
    where = "inside <plan>" if plan is not None else "in the text"
    pair = "<plan>...</plan> pair (0.5)" if plan is not None else "no closed <plan> pair (0 of 0.5)"
    steps = (
        f"{n} numbered steps {where} (0.5)"
        if n >= 2
        else f"{n} numbered step{'' if n == 1 else 's'} {where}, want 2 (0 of 0.5)"
    )
    return f"{pair}; {steps}"


RATIONALE_WORDS = (3, 40)
"""A critic's rationale is well-formed with this many words (inclusive): one sentence, not
an essay. Counted in the text outside the ``<score>`` pair."""


def critic_rationale(text: str) -> str:
    """The critic's rationale: its text with the last ``<score>...</score>`` pair removed."""
    if not isinstance(text, str):
        return ""
    lower = text.lower()
    end = lower.rfind("</score>")
    start = lower.rfind("<score>", 0, end) if end >= 0 else -1
    if start >= 0:
        text = text[:start] + " " + text[end + len("</score>") :]
    return text.strip()


def critic_rationale_ok(text: str) -> bool:
    """Whether the rationale has :data:`RATIONALE_WORDS` words (and no second score tag)."""
    rationale = critic_rationale(text)
    if "<score>" in rationale.lower():
        return False
    n = len(rationale[:4000].split())
    return RATIONALE_WORDS[0] <= n <= RATIONALE_WORDS[1]


def critic_format_score(text: str) -> float:
    """Soft format score of a Critic action in {0, 0.25, 0.375, 0.625, 0.75, 1}.

    The reply format is ``<score>N</score>`` followed by a one-sentence rationale (the
    ``<score>`` opening tag is the response prefix). Score part (weight 0.75): 1 when
    :func:`parse_critic_score` succeeds, 0.5 when a ``<score>`` pair is present but its content
    breaks the rule, else 0. Rationale part (weight 0.25): :func:`critic_rationale_ok`.
    """
    if parse_critic_score(text) is not None:
        score_part = 1.0
    else:
        score_part = 0.5 if extract_tag(text, "score") is not None else 0.0
    return 0.75 * score_part + 0.25 * float(critic_rationale_ok(text))


def critic_reply_reason(text: str) -> str:
    """Why a critic/judge reply loses format credit, in words; ``""`` when it is well-formed.

    The score part first (:func:`parse_critic_score`'s rule), then the rationale
    (:func:`critic_rationale_ok`); both when both fail, joined by ``"; "``. Published as
    ``infos[agent]["last"]["reason"]`` for every review, as a challenger's ``parsed.reason``.
    """
    if not isinstance(text, str):
        return "not text"
    reasons = []
    if parse_critic_score(text) is None:
        content = extract_tag(text, "score")
        if content is None:
            reasons.append("no <score>N</score> pair")
        elif len(content) > 32:
            reasons.append(f"<score> content is {len(content)} characters long (one number)")
        elif _SCORE_RE.match(content) is None:
            reasons.append(f"<score> content {content[:32]!r} is not one number (7, 7.5, 7/10)")
        else:
            reasons.append(f"score {content.strip()} is outside [1, 10]")
    rationale = critic_rationale(text)
    if "<score>" in rationale.lower():
        reasons.append("a second <score> tag outside the scored pair")
    else:
        n = len(rationale[:4000].split())
        lo, hi = RATIONALE_WORDS
        if not lo <= n <= hi:
            reasons.append(f"rationale has {n} words (want {lo}-{hi}: one sentence)")
    return "; ".join(reasons)


def critic_format_reason(text: str) -> str:
    """Why a critic/judge reply earns :func:`critic_format_score`, in one line.

    The score part (weight 0.75) and the rationale part (0.25), each with what it earned, e.g.
    ``"<score>8</score> parses (0.75); rationale of 4 words (0.25)"``; the lost parts read as
    :func:`critic_reply_reason` says them. Never raises.
    """
    if not isinstance(text, str):
        return "not text (0)"
    lost = critic_reply_reason(text)
    if parse_critic_score(text) is not None:
        score = f"<score>{extract_tag(text, 'score').strip()}</score> parses (0.75)"
    elif extract_tag(text, "score") is not None:
        score = f"{lost.split('; ')[0]} (0.375 of 0.75)"
    else:
        score = "no <score>N</score> pair (0 of 0.75)"
    if critic_rationale_ok(text):
        words = len(critic_rationale(text)[:4000].split())
        return f"{score}; rationale of {words} words (0.25)"
    rationale = lost.split("; ")[-1] if lost else "rationale not well-formed"
    return f"{score}; {rationale} (0 of 0.25)"


def critic_format_binary(text: str) -> float:
    """Binary format score of a Critic action.

    1 when the score parses and the rationale is well-formed, else 0.
    """
    return float(parse_critic_score(text) is not None and critic_rationale_ok(text))

"""Critic discrimination: how well the critic's score separates intact from corrupted tasks.

The SAGE quality gate (``q >= alpha``) is only as good as the critic behind it. This module
builds a fixed probe set — intact seed questions and corrupted copies of other seed questions
(words shuffled, cut off mid-sentence, or spliced with an unrelated task) — as critic
observations, and scores a critic's replies with the area under the ROC curve of the gate's
own quantity, the normalised score q (an unparseable reply counts as q = 0, as the gate sees
it). AUC 0.5 is chance; 1.0 means every intact task outscored every corrupted one. When the
critic sees verifiers (``EnvConfig.critic_sees_verifier``), corruptions of the verifier test
whether it checks answers: another task's answer or tests, or a near miss of its own.

Text only: the learner generates the replies (``learners.evaluation.critic_replies``).
"""

from __future__ import annotations

import dataclasses
import random
import re
from dataclasses import dataclass

from sage_env import rewards
from sage_env.config import EnvConfig
from sage_env.tasks.task import Task
from sage_env.text import parsing, prompts
from sage_env.text.prompts import DEFAULT_PREFIXES

CORRUPTIONS = ("shuffled", "truncated", "spliced")
"""How a corrupted probe question is made from a seed question."""
VERIFIER_CORRUPTION = "wrong_verifier"
"""With ``EnvConfig.critic_sees_verifier`` the probe adds this corruption: an intact question
shown with the answer or tests of another seed task of its domain."""
NEAR_MISS = "near_miss"
"""A wrong-answer corruption (asked for with ``probe_set(corruptions=...)``): an intact
question shown with its own answer changed to a near miss (:func:`near_miss`), or one of its
tests' expected integers off by one: the honest-looking wrong answer a proposer writes (17 x 24
for "17 x 23")."""
VERIFIER_KINDS = (VERIFIER_CORRUPTION, NEAR_MISS)
"""Corruptions of the verifier, not the question: without ``critic_sees_verifier`` such an
item shows the intact question alone, indistinguishable from an intact item (a control arm
whose expected AUC is 0.5; a sampled critic's draws still scatter around it)."""
_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?!\d)|\d+(?:\.\d+)?")
_FRACTION = re.compile(r"\\[dt]?frac\{\s*-?(?P<tex>\d+)\s*\}|(?<![\d.])(?P<num>\d+)\s*/\s*\d")
_EXPECTED_INT = re.compile(r"(==\s*[-(\[]*\s*)(\d+)(?!.*==)")
MIN_FALLBACK_ALPHA = 1e-6
"""Floor of :func:`seed_quantile`: q = 0 (no parse, or the lowest score) never passes."""


@dataclass
class ProbeItem:
    """One critic probe.

    Attributes:
        observation: The critic's observation ``{"system", "user", "prefix"}``.
        intact: True for an unmodified seed question, False for a corrupted one.
        corruption: ``""``, one of :data:`CORRUPTIONS` or :data:`VERIFIER_KINDS`.
        task_id: The seed the question came from.
    """

    observation: dict[str, str]
    intact: bool
    corruption: str
    task_id: str


@dataclass
class DiscriminationReport:
    """How well critic scores separate intact from corrupted tasks.

    Attributes:
        auc: P(q_intact > q_corrupted) + 0.5 P(tie), over all intact x corrupted pairs
            (Mann-Whitney U / (n_i n_c)); 0.5 is chance.
        gap: Mean q of intact minus mean q of corrupted items, in [-1, 1].
        parse_rate: Share of replies whose score parses.
        accept_intact: Share of intact items with q >= alpha (what the gate would let in).
        accept_corrupted: Share of corrupted items with q >= alpha.
        n: Number of items.
    """

    auc: float
    gap: float
    parse_rate: float
    accept_intact: float
    accept_corrupted: float
    n: int

    def as_dict(self, prefix: str = "critic/") -> dict[str, float]:
        """Flat metrics, e.g. ``{"critic/auc": 0.61, ...}``."""
        return {
            f"{prefix}auc": self.auc,
            f"{prefix}score_gap": self.gap,
            f"{prefix}probe_parse_rate": self.parse_rate,
            f"{prefix}probe_accept_intact": self.accept_intact,
            f"{prefix}probe_accept_corrupted": self.accept_corrupted,
        }


def corrupt(question: str, kind: str, other: str, rng: random.Random) -> str:
    """A corrupted copy of ``question``.

    Args:
        question: The seed question.
        kind: ``"shuffled"`` (its words in random order), ``"truncated"`` (its first 40% of
            words) or ``"spliced"`` (its first half + the second half of ``other``).
        other: An unrelated question, used by ``"spliced"``.
        rng: Source of randomness.

    Raises:
        ValueError: on an unknown ``kind``.
    """
    words = question.split()
    if kind == "shuffled":
        shuffled = list(words)
        for _ in range(5):  # a 2-word question may shuffle to itself
            rng.shuffle(shuffled)
            if shuffled != words:
                break
        return " ".join(shuffled)
    if kind == "truncated":
        return " ".join(words[: max(1, int(0.4 * len(words)))])
    if kind == "spliced":
        tail = other.split()
        return " ".join(words[: max(1, len(words) // 2)] + tail[len(tail) // 2 :])
    raise ValueError(f"unknown corruption {kind!r}; known: {CORRUPTIONS}")


def _shift_digits(digits: str, rng: random.Random) -> str:
    """``digits`` (a non-negative integer's) plus or minus 1, or with one digit changed."""
    n = int(digits)
    if len(digits) > 1 and rng.random() < 0.5:  # change one digit, never the leading one
        i = rng.randrange(1, len(digits))
        new = rng.choice([c for c in "0123456789" if c != digits[i]])
        return digits[:i] + new + digits[i + 1 :]
    return str(n + 1 if n == 0 or rng.random() < 0.5 else n - 1)


def near_miss(answer: str, rng: random.Random) -> str | None:
    r"""A wrong answer close to ``answer``: the honest-looking mistake, not a random value.

    A fraction (``\frac{3}{4}``, ``3/4``) gets its numerator plus or minus 1; otherwise the
    last number in the answer (not a base subscript) gets plus or minus 1, or (two or more digits)
    one digit other than the leading one changed (``391`` -> ``392``, ``381``, ``491`` never).

    Args:
        answer: A math answer as LaTeX or plain text.
        rng: Source of randomness.

    Returns:
        The changed answer (always a different string with a different value), or ``None``
        when ``answer`` holds no number.
    """
    frac = _FRACTION.search(answer)
    if frac is not None:
        group = "tex" if frac.group("tex") is not None else "num"
        n = int(frac.group(group))
        moved = str(n + 1 if n == 0 or rng.random() < 0.5 else n - 1)
        return answer[: frac.start(group)] + moved + answer[frac.end(group) :]
    # a subscript names a base (28_9, 101_{2}), not a value: the number before it moves
    numbers = [m for m in _NUMBER.finditer(answer) if not answer[: m.start()].endswith(("_", "_{"))]
    if not numbers:
        return None
    last = numbers[-1]
    whole, dot, frac_digits = last.group(0).partition(".")
    if "," in whole:  # 1,000 -> 1,001 or 1,090: thousands separators kept
        text = f"{int(_shift_digits(whole.replace(',', ''), rng)):,}"
    elif dot:  # a decimal: its last digit moves, so 2.5 -> 2.4 or 2.6
        moved = _shift_digits(frac_digits[-1], rng)[-1]
        if moved == frac_digits[-1]:
            moved = str((int(moved) + 1) % 10)
        text = whole + "." + frac_digits[:-1] + moved
    else:
        text = _shift_digits(whole, rng)
    return answer[: last.start()] + text + answer[last.end() :]


def near_miss_tests(tests: list[str], rng: random.Random) -> list[str] | None:
    """``tests`` with one expected integer moved by :func:`near_miss`'s rule.

    The integer is the first one after the last ``==`` of one test, drawn among the tests
    that have one. Returns ``None`` when no test compares with an integer.
    """
    usable = [i for i, t in enumerate(tests) if _EXPECTED_INT.search(t)]
    if not usable:
        return None
    i = usable[rng.randrange(len(usable))]
    m = _EXPECTED_INT.search(tests[i])
    moved = _shift_digits(m.group(2), rng)
    out = list(tests)
    out[i] = tests[i][: m.start(2)] + moved + tests[i][m.end(2) :]
    return out


def near_miss_task(task: Task, rng: random.Random) -> Task | None:
    """A copy of ``task`` whose answer (math) or one test (code) is a near miss, or ``None``."""
    if task.domain == "math":
        answer = near_miss(task.answer or "", rng)
        return None if answer is None else dataclasses.replace(task, answer=answer)
    if task.domain == "code":
        tests = near_miss_tests(list(task.tests), rng)
        return None if tests is None else dataclasses.replace(task, tests=tests)
    return None


def _other_with_verifier(task: Task, tasks: list[Task], rng: random.Random) -> Task:
    """Another task of ``task``'s domain whose verifier differs (``task`` itself if none)."""
    mine = prompts.verifier_text(task)
    others = [t for t in tasks if t.domain == task.domain and prompts.verifier_text(t) != mine]
    return others[rng.randrange(len(others))] if others else task


def probe_set(
    tasks: list[Task],
    n: int = 24,
    seed: int = 0,
    config: EnvConfig | None = None,
    corruptions: tuple[str, ...] | None = None,
) -> list[ProbeItem]:
    """``n`` critic observations, half intact seed questions and half corrupted ones.

    Intact and corrupted items come from different tasks (a critic cannot compare the two
    versions). The set depends only on ``tasks``, ``n`` and ``seed``, so the same probe can be
    asked at the first and the last step of a run.

    Args:
        tasks: Tasks to draw from (e.g. the seeds); at least 3.
        n: Number of items (rounded down to even; at least 2).
        seed: Seed of the draw and the corruptions.
        config: The environment config whose response prefix the observations get (that of
            ``review_question``: ``"<score>"`` by default, ``""`` with prefixes off), and
            whose ``critic_sees_verifier`` decides whether items show the verifier.
        corruptions: The kinds the corrupted half cycles through, from :data:`CORRUPTIONS`
            and :data:`VERIFIER_KINDS`; ``None`` (default): :data:`CORRUPTIONS`, plus
            :data:`VERIFIER_CORRUPTION` when the config shows verifiers. A
            :data:`NEAR_MISS` item is drawn among the tasks that have a number to move
            (:func:`near_miss_task`).

    Raises:
        ValueError: if ``n < 2``, fewer than 3 tasks are given, or a corruption is unknown.
    """
    if n < 2 or len(tasks) < 3:
        raise ValueError(f"need n >= 2 and at least 3 tasks, got n={n}, {len(tasks)} tasks")
    rng = random.Random(seed)
    config = config or EnvConfig()
    prefix = config.resolve_prefix("review_question", DEFAULT_PREFIXES["review_question"])
    if corruptions is None:
        kinds = CORRUPTIONS + ((VERIFIER_CORRUPTION,) if config.critic_sees_verifier else ())
    else:
        kinds = tuple(corruptions)
        unknown = sorted(set(kinds) - set(CORRUPTIONS) - set(VERIFIER_KINDS))
        if unknown or not kinds:
            raise ValueError(
                f"unknown corruption(s) {unknown or kinds!r}; known: {CORRUPTIONS + VERIFIER_KINDS}"
            )
    half = n // 2
    picks = [tasks[rng.randrange(len(tasks))] for _ in range(2 * half)]
    items = []
    for i, task in enumerate(picks):
        intact = i < half
        kind = "" if intact else kinds[i % len(kinds)]
        shown = task
        if kind == NEAR_MISS:  # redraw until the task has a number to move
            changed = near_miss_task(task, rng)
            for _ in range(100):
                if changed is not None:
                    break
                task = tasks[rng.randrange(len(tasks))]
                changed = near_miss_task(task, rng)
            if changed is None:
                raise ValueError("no task has a number for a near_miss corruption")
            shown = changed
        question = task.prompt
        verifier = prompts.verifier_text(shown) if config.critic_sees_verifier else None
        if kind == VERIFIER_CORRUPTION and config.critic_sees_verifier:
            verifier = prompts.verifier_text(_other_with_verifier(task, tasks, rng))
        elif not intact and kind not in VERIFIER_KINDS:
            other = tasks[rng.randrange(len(tasks))].prompt
            question = corrupt(task.prompt, kind, other, rng)
        obs = dict(prompts.critic_question(question, task.domain, verifier), prefix=prefix)
        items.append(ProbeItem(obs, intact, kind, task.task_id))
    rng.shuffle(items)
    return items


def auc(positive: list[float], negative: list[float]) -> float:
    """Area under the ROC curve, P(pos > neg) + 0.5 P(pos == neg) (Mann-Whitney U).

    Returns 0.5 when either list is empty.
    """
    if not positive or not negative:
        return 0.5
    wins = 0.0
    for p in positive:
        for q in negative:
            wins += 1.0 if p > q else 0.5 if p == q else 0.0
    return wins / (len(positive) * len(negative))


def reply_score(reply: str, estimate: str = "sampled") -> float | None:
    """The raw 1-10 score a reply stands for under ``critic_score_estimate``.

    ``"sampled"``: the score parsed from the text. ``"expected"``: the expected score of
    the reply's ``score_probs`` (:class:`~sage_env.text.parsing.ScoredReply`), falling back to
    the parsed one when it has none.
    """
    if estimate == "expected":
        value = parsing.expected_critic_score(getattr(reply, "score_probs", None))
        if value is not None:
            return value
    return parsing.parse_critic_score(reply)


def best_threshold(
    items: list[ProbeItem],
    replies: list[str],
    score_rule: str = "minus_one_over_nine",
    min_auc: float = 0.55,
    estimate: str = "sampled",
) -> float | None:
    """The quality gate that best separates intact from corrupted probe items.

    Among the q values the critic gave, the threshold t maximising Youden's J = TPR(t) -
    FPR(t) (TPR: share of intact items with q >= t; FPR: the same for corrupted items);
    ties go to the stricter t. A gate calibrated this way rests on what the critic can tell
    apart, not on where a prompt's example puts its scores.

    Returns:
        The threshold in [0, 1], or ``None`` when the critic does not discriminate
        (AUC < ``min_auc``, or J <= 0): then there is nothing to calibrate on.
    """
    if len(items) != len(replies):
        raise ValueError(f"{len(items)} probe items but {len(replies)} replies")
    qs = [rewards.normalise_critic_score(reply_score(r, estimate), score_rule) for r in replies]
    good = [q for q, it in zip(qs, items) if it.intact]
    bad = [q for q, it in zip(qs, items) if not it.intact]
    if not good or not bad or auc(good, bad) < min_auc:
        return None
    best, best_j = None, 0.0
    for t in sorted(set(good), reverse=True):
        j = sum(q >= t for q in good) / len(good) - sum(q >= t for q in bad) / len(bad)
        if j > best_j + 1e-12:
            best, best_j = t, j
    return best


def seed_quantile(
    items: list[ProbeItem],
    replies: list[str],
    quantile: float = 0.5,
    score_rule: str = "minus_one_over_nine",
    estimate: str = "sampled",
) -> float | None:
    """The q that the critic gives to at least ``1 - quantile`` of the intact probe seeds.

    The fallback gate for a critic that does not discriminate: with
    ``alpha = min(alpha, seed_quantile(...))`` the gate never asks more of a generated task
    than this critic gives to most real seed tasks (seed tasks are good by construction). It
    corrects the level of a critic's scores, not its judgement: at AUC 0.5 it lets through
    about ``1 - quantile`` of the well-formed proposals whatever their quality, which the
    verifier check still guards.

    Args:
        items: The probe set (:func:`probe_set`).
        replies: One critic reply per item (prefix + completion).
        quantile: In [0, 1]; 0.5 is the median intact score, 0 the lowest.
        score_rule: How a 1-10 score maps to q (``RewardConfig.critic_score_rule``).
        estimate: ``RewardConfig.critic_score_estimate`` (:func:`reply_score`).

    Returns:
        The lower ``quantile``-quantile of the q of the intact items whose reply parsed (so
        that at least ``1 - quantile`` of them reach it), never below
        :data:`MIN_FALLBACK_ALPHA` (an unparseable reply or the lowest score never passes);
        ``None`` when no intact reply parsed.

    Raises:
        ValueError: if ``quantile`` is outside [0, 1] or the lengths differ.
    """
    if not 0.0 <= quantile <= 1.0:
        raise ValueError(f"quantile must be in [0, 1], got {quantile}")
    if len(items) != len(replies):
        raise ValueError(f"{len(items)} probe items but {len(replies)} replies")
    scores = [reply_score(r, estimate) for r, it in zip(replies, items) if it.intact]
    good = sorted(rewards.normalise_critic_score(s, score_rule) for s in scores if s is not None)
    if not good:
        return None
    return max(good[int(quantile * (len(good) - 1))], MIN_FALLBACK_ALPHA)


def discrimination(
    items: list[ProbeItem],
    replies: list[str],
    alpha: float = 0.7,
    score_rule: str = "minus_one_over_nine",
    estimate: str = "sampled",
) -> DiscriminationReport:
    """Score critic ``replies`` (one per item, the whole reply: prefix + completion).

    AUC, gap and acceptance use :func:`reply_score` under ``estimate`` (the expected score
    of a :class:`~sage_env.text.parsing.ScoredReply` under ``"expected"``); the parse rate is
    always that of the sampled text.

    Raises:
        ValueError: if the lengths differ.
    """
    if len(items) != len(replies):
        raise ValueError(f"{len(items)} probe items but {len(replies)} replies")
    raws = [parsing.parse_critic_score(r) for r in replies]
    qs = [rewards.normalise_critic_score(reply_score(r, estimate), score_rule) for r in replies]
    good = [q for q, it in zip(qs, items) if it.intact]
    bad = [q for q, it in zip(qs, items) if not it.intact]

    def mean(xs: list[float]) -> float:
        return sum(xs) / len(xs) if xs else 0.0

    return DiscriminationReport(
        auc=auc(good, bad),
        gap=mean(good) - mean(bad),
        parse_rate=mean([float(r is not None) for r in raws]),
        accept_intact=mean([float(q >= alpha) for q in good]),
        accept_corrupted=mean([float(q >= alpha) for q in bad]),
        n=len(items),
    )

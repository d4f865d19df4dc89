r"""Math grounding (ours, not in the paper): a proposed math task's answer, computed by a program.

In SAGE (arXiv 2603.15255) a generated math task's answer is the Challenger's claim: a
Challenger that proposes "What is 2+2?" with answer 5 earns d = 1 (no solver matches 5) and
its task joins the pool. Under ``EnvConfig.math_grounding = "program"`` the Challenger also
writes a program defining ``def answer():``; :func:`ground_answer` runs it in the sandbox
under the execution tasks' rules (:func:`sage_env.verifiers.executor.compute_answer`: the
static allow-list of modules and builtins; the stored run and check runs under hash seeds and
time zones drawn per check must return the same value, with exact types) and compares its
value with the stated answer under math-verify. The task stands
only when they agree, and its stored answer is then the program's value, rendered as text by
:func:`render_value`, never the claim (``docs/reference/rewards.md``, "Math grounding").

The program's value is a Python literal parsed on the judge's side; rendering and comparing
happen here, in the trusted process.
"""

from __future__ import annotations

import ast
import decimal
import math
import random
import re
from dataclasses import asdict, dataclass
from typing import Any

from sage_env.verifiers.executor import compute_answer
from sage_env.verifiers.literals import parse_literal

MAX_PROGRAM_CHARS = 4000
"""An answer program longer than this is refused unrun."""
MAX_ANSWER_CHARS = 200
"""A rendered value longer than this is refused (the parser's limit on a stated answer)."""
ENTRY = "answer"
"""The zero-argument function an answer program defines."""
VERDICTS = ("agree", "disagree", "no_program", "program_failed")
"""Outcomes of :func:`ground_answer`: the task stands only on ``"agree"``."""


@dataclass(frozen=True)
class Grounding:
    """Outcome of :func:`ground_answer`, as ``infos`` show it (``to_dict``).

    Attributes:
        verdict: One of :data:`VERDICTS`.
        reason: Short explanation (why the task was refused, or what the program computed).
        program: The answer program (``None`` when the proposal had none).
        claim: The stated ``<answer>``.
        value: ``repr`` of the program's return value, as the sandbox reported it.
        answer: The value rendered as answer text (:func:`render_value`); the stored answer
            when the verdict is ``"agree"``.
    """

    verdict: str
    reason: str
    program: str | None
    claim: str
    value: str | None = None
    answer: str | None = None

    @property
    def agreed(self) -> bool:
        """Whether the program ran and its value agrees with the claim."""
        return self.verdict == "agree"

    def to_dict(self) -> dict:
        """A JSON-safe dict of the fields."""
        return asdict(self)


def render_value(value: Any) -> tuple[str | None, str]:
    r"""The text of a program's return value as a math answer.

    A value is a value, read by one strict rule (ours, issue 46):

    * ``int`` -> its digits; ``float`` -> positional decimal notation (``1e-05`` ->
      ``0.00001``: math-verify reads ``1e-05`` as ``e - 5``), an integral float without its
      ``.0``.
    * ``str`` that is one Python ``int`` or ``float`` literal, with an optional sign
      (``'42'``, ``'4.2e1'``, ``'42e0'``, ``'0x2A'``, ``'1_000'``, ``'-3.5'``): that number,
      rendered as above (``'4.2e1'`` -> ``42``), never LaTeX (where ``4.2e1`` is
      ``4.2 * e``, ``42e0`` is 0 and ``0x2A`` is 0).
    * any other ``str`` is math text: stripped, with Python's ``**`` written as ``^``
      (``"3/4"``, ``"\\frac{3}{4}"``, ``"2\\sqrt{2}"``, ``"\\pi/2"``, ``"e^2"``), made of the
      characters and commands of one value (:func:`_unsafe_math_text`). Forms that read two
      ways are refused, not guessed (:func:`_ambiguous_math_text`): a power chain without
      braces (``'2^3^2'``, ``'9^9^9^9'``: LaTeX reads it left to right, Python right to
      left; ``'2^{3^2}'`` and ``'(2^3)^2'`` are fine), ``e``/``E`` next to a digit or point
      that is no Python literal (``'2e'``, ``'1.5e'``, ``'3e^2'``: Euler's e or an
      exponent?), and a ``0x``/``0o``/``0b`` prefix or ``j`` suffix that is no int or float
      literal (``'0x2G'``, ``'2j'``).

    Anything else (``bool``, ``complex``, containers, ``None``), a non-finite float, an empty
    string or text longer than :data:`MAX_ANSWER_CHARS` is refused.

    Returns:
        ``(text, "")`` or ``(None, why)``; never raises.
    """
    if isinstance(value, bool) or value is None:
        return None, f"returned {value!r}; return an int, a float or a string"
    if isinstance(value, int):
        text = str(value) if value.bit_length() <= 700 else ""
    elif isinstance(value, float):
        if not math.isfinite(value):
            return None, f"returned {value!r}, which is not a finite number"
        if value.is_integer() and abs(value) < 1e15:
            text = str(int(value))
        else:
            text = format(decimal.Decimal(repr(value)), "f")
    elif isinstance(value, str):
        number = _python_number(value.strip())
        if number is not None:
            return render_value(number)
        text = value.strip().replace("**", "^")
        if not text:
            return None, "returned an empty string"
        bad = _unsafe_math_text(text) or _ambiguous_math_text(text)
        if bad:
            return None, f"returned a string with {bad}; return one value"
    else:
        return None, f"returned a {type(value).__name__}; return an int, a float or a string"
    if not text or len(text) > MAX_ANSWER_CHARS:
        return None, f"returned a value longer than {MAX_ANSWER_CHARS} characters"
    return text, ""


_MATH_COMMANDS = frozenset(
    {"frac", "dfrac", "tfrac", "sqrt", "pi", "cdot", "times", "div", "infty", "pm", "left",
     "right", "circ"}
)  # fmt: skip
"""LaTeX commands a string value may hold: those of one number or expression."""
_MATH_TEXT = re.compile(r"[0-9A-Za-z+\-*/^()\[\]{}.,\\ ]*")


def _unsafe_math_text(text: str) -> str | None:
    r"""What in ``text`` is not part of one math value, else ``None``.

    math-verify reads the last expression of a text, so ``"4 \implies 5"`` or ``"4 $5$"``
    would store ``4`` but grade as ``5``: only digits, letters, ``+-*/^()[]{}.,`` and the
    commands of :data:`_MATH_COMMANDS` are allowed (no ``$``, ``=``, ``%``, ``\boxed``).
    """
    if not _MATH_TEXT.fullmatch(text):
        return "a character outside one math value"
    for command in re.findall(r"\\([A-Za-z]+)", text):
        if command not in _MATH_COMMANDS:
            return f"the command \\{command}"
    return None


def _python_number(text: str) -> int | float | None:
    """``text`` as a number when it is one Python ``int`` or ``float`` literal, else ``None``.

    An optional sign is allowed: ``'-4.2e1'``, ``'0x2A'``, ``'1_000'``, ``'.5'``.
    """
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or body[0] not in "0123456789." or len(body) > MAX_ANSWER_CHARS:
        return None
    try:
        node = ast.parse(body, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    if not isinstance(node, ast.Constant) or type(node.value) not in (int, float):
        return None
    return -node.value if text[0] == "-" else node.value


_COMMAND = re.compile(r"\\[A-Za-z]+")
_E_NEXT_TO_NUMBER = re.compile(r"[0-9.][eE]|[eE][0-9.]")
_NUMBER_PREFIX = re.compile(r"(?<![0-9A-Za-z.])0[xXoObB]|[0-9.][jJ](?![A-Za-z])")


def _ambiguous_math_text(text: str) -> str | None:
    r"""What makes ``text`` read as two different values, else ``None``.

    Refused rather than parsed (see :func:`render_value`): a ``^`` whose exponent (a
    ``{...}`` or ``(...)`` group, a command with its ``{...}`` arguments, or a run of
    letters, digits and points, after an optional sign) is followed by another ``^``;
    ``e``/``E`` next to a digit or point outside a command; a ``0x``/``0o``/``0b`` prefix or
    a ``j`` after a digit.
    """
    for at in (i for i, c in enumerate(text) if c == "^"):
        end = _exponent_end(text, at + 1)
        rest = text[end:].lstrip()
        if rest.startswith("^"):
            return "a power chain without braces (write 2^{3^2} or (2^3)^2)"
        too_large = _too_large_power(text, at, end)
        if too_large:
            return too_large
    plain = _COMMAND.sub(" ", text)
    if _E_NEXT_TO_NUMBER.search(plain):
        return "e next to a number (an exponent, or Euler's e?)"
    if _NUMBER_PREFIX.search(plain):
        return "a 0x/0o/0b prefix or j suffix that is not one Python number"
    return None


MAX_POWER_BITS = 700
"""A power in a string value may stand for at most this many bits, as an ``int`` value may."""
_NUMBER_BEFORE = re.compile(r"([0-9]+(?:\.[0-9]*)?)\s*$")


def _too_large_power(text: str, at: int, end: int) -> str | None:
    r"""Why the power whose ``^`` is at ``text[at]`` and exponent ends at ``end`` is refused.

    A value must be one that a solver's right answer can be compared with in time: a power
    of more than :data:`MAX_POWER_BITS` bits (``2^{100000}``; ``9^{300}`` needs 951 bits),
    counting powers in its exponent (``9^{9^{9^9}}``; ``2^{3^2}`` is fine), makes math-verify
    expand a number it cannot compare within its timeout, so only a reply that echoes the
    text would ever be judged right (the red team's "value too large to compare", issue 46).
    An exponent that holds a power and is not a plain number (``x^{2^n}``) is refused too.
    ``None`` when the power is small enough or its exponent is a symbol (``2^{n}``).
    """
    exponent = text[at + 1 : end].strip().lstrip("+-").strip()
    if "^" in exponent:
        e = _small_power(exponent)
        if e is None:
            return "a power in an exponent that is too large or not a number"
    else:
        try:
            e = float(exponent.strip("{}() "))
        except ValueError:
            return None
    base = _NUMBER_BEFORE.search(text[:at])
    b = float(base.group(1)) if base else 2.0
    bits = abs(e) * math.log2(b) if b > 1.0 else abs(e)
    if bits > MAX_POWER_BITS:
        return f"a power of more than {MAX_POWER_BITS} bits (a value too large to compare)"
    return None


_PLAIN_POWER = re.compile(r"[0-9(){}^ ]+")


def _small_power(text: str) -> int | None:
    """The value of ``text`` made of whole numbers, ``^`` and brackets (``{3^2}`` -> 9).

    ``None`` when it holds anything else, does not parse, or a power in it needs more than
    :data:`MAX_POWER_BITS` bits (each power is bounded before it is computed).
    """
    if not _PLAIN_POWER.fullmatch(text) or len(text) > 100:
        return None
    python = text.replace("{", "(").replace("}", ")").replace("^", "**")
    try:
        tree = ast.parse(python, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None

    def value(node: ast.AST) -> int | None:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            base, power = value(node.left), value(node.right)
            if base is None or power is None:
                return None
            if base > 1 and power * math.log2(base) > MAX_POWER_BITS:
                return None
            return base**power
        return None

    return value(tree)


def _exponent_end(text: str, at: int) -> int:
    """Where the exponent that starts at ``text[at]`` (after a ``^``) ends."""
    n = len(text)
    while at < n and text[at] == " ":
        at += 1
    if at < n and text[at] in "+-":
        at += 1
    if at < n and text[at] in "{(":
        return _group_end(text, at)
    if at < n and text[at] == "\\":
        at += 1
        while at < n and text[at].isalpha():
            at += 1
        while at < n and text[at] == "{":
            at = _group_end(text, at)
        return at
    while at < n and (text[at].isalnum() or text[at] == "."):
        at += 1
    return at


def _group_end(text: str, at: int) -> int:
    """The index after the bracket that closes the one at ``text[at]`` (or the text's end)."""
    close = {"{": "}", "(": ")"}[text[at]]
    depth = 0
    for i in range(at, len(text)):
        if text[i] == text[at]:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def ground_answer(
    program: str | None,
    claim: str,
    math_verifier: Any,
    *,
    timeout_s: float = 5.0,
    memory_mb: int = 512,
    check_rng: random.Random | None = None,
) -> Grounding:
    r"""Run a math proposal's answer program and compare its value with the stated answer.

    In order: there is a program (at most :data:`MAX_PROGRAM_CHARS`); it passes
    :func:`~sage_env.verifiers.executor.compute_answer` (parses, defines ``answer``, uses
    only allowed modules and builtins, runs within the limits, returns a literal, the same
    with exact types in the stored run and the check runs drawn from ``check_rng``); its
    value renders (:func:`render_value`) to grounded math
    (``math_verifier.check_answer``); and ``\boxed{claim}`` scores 1 against that text as the
    gold (``math_verifier.verify``: math-verify, so ``0.75`` agrees with ``3/4``).

    Args:
        program: The answer program, untrusted (``None`` when missing).
        claim: The stated answer.
        math_verifier: A :class:`~sage_env.verifiers.MathVerifier`.
        timeout_s: Wall-clock limit of each sandboxed run, seconds.
        memory_mb: Memory limit of each run, MiB.
        check_rng: Where the determinism check's runs draw their hash seeds, time zones and
            :mod:`random` seeds (the environment's ``check_rng``); ``None``:
            :class:`random.SystemRandom`.

    Returns:
        A :class:`Grounding`; never raises on model output.
    """
    claim = claim if isinstance(claim, str) else ""
    if not isinstance(program, str) or not program.strip():
        return Grounding("no_program", "no <program> defining answer() was given", None, claim)
    if len(program) > MAX_PROGRAM_CHARS:
        why = f"answer program longer than {MAX_PROGRAM_CHARS} characters"
        return Grounding("program_failed", why, program[:MAX_PROGRAM_CHARS], claim)
    if _returns_a_constant(program):
        why = "answer() only returns a constant: compute the answer, do not restate it"
        return Grounding("program_failed", why, program, claim)
    run = compute_answer(
        program, entry=ENTRY, timeout_s=timeout_s, memory_mb=memory_mb, check_rng=check_rng
    )
    if not run.valid or len(run.outputs) != 1:
        reason = f"answer program refused ({run.check or 'run'}): {run.reason}"
        return Grounding("program_failed", reason[:300], program, claim)
    value_repr = run.outputs[0]
    ok, value = parse_literal(value_repr)
    text, why = render_value(value) if ok else (None, "returned no Python literal")
    if text is None:
        return Grounding("program_failed", f"answer program {why}", program, claim, value_repr)
    grounded = math_verifier.check_answer(text)
    if grounded.score < 1.0 or grounded.status != "passed":  # a timeout shows nothing
        why = f"the program's value is not math ({grounded.reason})"
        return Grounding("program_failed", why, program, claim, value_repr, text)
    same = math_verifier.verify("\\boxed{" + claim + "}", text)
    if same.score >= 1.0 and same.status == "passed":  # and the other way round, so
        same = math_verifier.verify("\\boxed{" + text + "}", claim)  # neither is a subset
    if same.score < 1.0 or same.status != "passed":
        how = "disagrees with"
        if same.status != "failed":
            how = f"was not shown ({same.status}) to agree with"
        why = f"the stated answer {claim[:60]!r} {how} the program's value {text[:60]!r}"
        return Grounding("disagree", why, program, claim, value_repr, text)
    why = f"the program computes {text[:60]!r}, which agrees with the stated answer"
    return Grounding("agree", why, program, claim, value_repr, text)


def _returns_a_constant(program: str) -> bool:
    """Whether ``answer()`` computes nothing: no operator, call, comparison, subscript,
    comprehension, loop or formatted string anywhere in its body.

    Such a program restates a claim rather than computing it (``return 5``, or ``x = 5`` then
    ``return x``, for "What is 2+2?"), so grounding it would ground nothing. Any computation,
    even ``return 2 + 3``, passes; the critic still judges whether it is the question's.
    """
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    for node in reversed(tree.body):  # the last definition is the one that binds
        if isinstance(node, ast.FunctionDef) and node.name == ENTRY:
            return not any(isinstance(n, _COMPUTING) for n in ast.walk(node))
    return False


_COMPUTING = (
    ast.BinOp, ast.BoolOp, ast.Compare, ast.Call, ast.Subscript, ast.IfExp, ast.Lambda,
    ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.FormattedValue,
    ast.For, ast.While, ast.AugAssign,
)  # fmt: skip
"""AST nodes that compute something (a ``-5`` or a name alone does not)."""

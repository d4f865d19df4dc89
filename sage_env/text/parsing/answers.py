r"""Answers in model output: a ``\boxed{}`` value, a Python program, fenced blocks.

What a solver's reply (and a proposer's program) is read for, by one rule each:

- :func:`extract_boxed`: the last top-level ``\boxed{...}`` / ``\fbox{...}`` (math answers;
  :class:`~sage_env.verifiers.MathVerifier` checks what it returns);
- :func:`extract_code`: a Python program (code answers, reference solutions; the last
  ``python`` / ``py`` / ``python3`` / ``py3`` / untagged block, preferring one that defines the
  entry point; an unclosed final fence runs to the end; without fences, the whole text when
  it parses);
- :func:`fenced` / :func:`last_fenced`: every closed block tagged ``tag`` (AZR's ``output``,
  ``input``, ``message`` and ``python`` blocks: execution tasks, CRUXEval answers);
- :func:`defines_function`: whether a program has a ``def name`` (the env's check that a code
  answer wrote the asked-for function);
- :func:`prefix_only_code`: whether a program is code only because the environment's
  response prefix opened its fence (no format credit for it).

The fence readers differ on purpose and are kept apart (each with its callers' tests):
:func:`extract_code` reads line-anchored fences and unclosed ones, :func:`fenced` only closed
blocks anywhere in a line, and :func:`sage_env.text.parsing.roles.parse_answer_program`'s
fallback splits on the backticks. :func:`defines_function` (any ``def name``, nested too) is
not :func:`extract_code`'s preference rule (a top-level def, class, assignment or import).

Standard library only; every function takes any text and never raises.
"""

from __future__ import annotations

import ast
import re
import textwrap
from typing import Any

_BOX_RE = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_FENCE_RE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n", re.MULTILINE)
_CLOSE_RE = re.compile(r"^[ \t]*```[ \t]*$", re.MULTILINE)
_PY_LANGS = {"", "python", "py", "python3", "py3"}
_FENCE = re.compile(r"```[ \t]*([A-Za-z_0-9]*)[^\n]*\n(.*?)```", re.DOTALL)


def as_text(value: Any) -> str:
    """Coerce model output of unexpected type (None, bytes, numbers) to ``str``; never raises."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    try:
        return str(value)
    except Exception:
        return ""


def _matching_brace(text: str, open_idx: int) -> int:
    r"""Return the index of the ``}`` closing the ``{`` at ``open_idx``, or -1 if unbalanced.

    A backslash escapes the next character, so ``\{`` and ``\}`` do not count.
    """
    depth = 0
    i = open_idx
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def extract_boxed(text: str) -> str | None:
    r"""Return the content of the last top-level ``\boxed{...}`` or ``\fbox{...}`` in ``text``.

    Braces are matched with nesting (``\boxed{\frac{1}{2}}`` gives ``\frac{1}{2}``) and escaped
    braces (``\{``, ``\}``) are skipped. A box nested inside another box is part of the outer
    box's content. The brace-less form ``\boxed 5`` gives ``"5"``. If the last box is unbalanced
    (e.g. output truncated mid-answer) the last complete box before it is returned (best effort).

    Args:
        text: Model output; any string (non-strings are coerced, ``None`` is treated as empty).

    Returns:
        The box content (possibly ``""`` for ``\boxed{}``), or ``None`` when there is no complete
        box. Never raises.
    """
    try:
        text = as_text(text)
        last: str | None = None
        pos = 0
        while True:
            match = _BOX_RE.search(text, pos)
            if match is None:
                break
            i = match.end()
            while i < len(text) and text[i] in " \t":
                i += 1
            if i < len(text) and text[i] == "{":
                end = _matching_brace(text, i)
                if end < 0:
                    break  # unbalanced: keep the last complete box
                last = text[i + 1 : end]
                pos = end + 1
            else:
                token = re.match(r"[^\s$}{\\]+", text[i:])
                if token is not None and i > match.end():
                    last = token.group(0)
                    pos = i + token.end()
                else:
                    pos = match.end()
        return last
    except Exception:
        return None


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
        return True
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return False


def _defines(code: str, name: str) -> bool:
    """Return True if ``code`` defines ``name`` at top level (def / class / assignment / import)."""
    try:
        tree = ast.parse(code)
    except Exception:
        pattern = rf"^\s*(?:async\s+)?(?:def|class)\s+{re.escape(name)}\b"
        return re.search(pattern, code, re.MULTILINE) is not None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == name:
                return True
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
    return False


def extract_code(text: str, entry_point: str | None = None) -> str | None:
    """Extract a Python program from model output.

    Takes fenced blocks tagged ``python``, ``py``, ``python3`` or untagged (other languages are
    ignored). With several blocks, the last one that defines ``entry_point`` wins, else the last
    block. An unclosed final fence (truncated output) runs to the end of the text. Without any
    fence, the whole text is returned if it parses as Python (``ast.parse``).

    Args:
        text: Model output.
        entry_point: Name of the function the tests call, if known.

    Returns:
        The dedented program text, or ``None`` if there is no fenced block and the text is not
        valid Python (or is blank). Never raises.
    """
    try:
        text = as_text(text)
        blocks: list[str] = []
        pos = 0
        while True:
            fence = _FENCE_RE.search(text, pos)
            if fence is None:
                break
            close = _CLOSE_RE.search(text, fence.end())
            reopen = _FENCE_RE.search(text, fence.end())
            if (
                reopen is not None
                and reopen.group(1)
                and (close is None or reopen.start() < close.start())
            ):
                # "```\n\n```python\n...": a bare fence followed by a tagged one before any
                # close: the bare fence was stray; start over at the tagged one
                pos = reopen.start()
                continue
            body = text[fence.end() : close.start() if close else len(text)]
            if fence.group(1).lower() in _PY_LANGS:
                blocks.append(textwrap.dedent(body).strip("\n"))
            if close is None:
                break
            pos = close.end()
        blocks = [b for b in blocks if b.strip()]
        if blocks:
            if entry_point:
                for block in reversed(blocks):
                    if _defines(block, entry_point):
                        return block
            return blocks[-1]
        if "```" in text:
            return None
        code = textwrap.dedent(text).strip("\n")
        if code.strip() and _parses(code):
            return code
        return None
    except Exception:
        return None


_OWN_CODE_RE = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+\w", re.MULTILINE)
_OPEN_TAGGED_RE = re.compile(r"^[ \t]*```[ \t]*\w", re.MULTILINE)


def prefix_only_code(text: str, prefix: str, program: str) -> bool:
    """Whether ``program`` (found in ``text`` by :func:`extract_code`) is code only by the prefix.

    True when ``text`` starts with a fence ``prefix`` the environment opened (the response
    prefix, e.g. ```` ```python ````), the completion after it opens no tagged fence of its own
    and ``program`` holds no ``def`` / ``class`` line: the model wrote no code, the fence is
    the environment's. False whenever ``prefix`` is empty or holds no fence. Never raises.
    """
    if not (isinstance(text, str) and isinstance(prefix, str) and isinstance(program, str)):
        return False
    if not prefix or "```" not in prefix or not text.startswith(prefix):
        return False
    if _OPEN_TAGGED_RE.search(text[len(prefix) :]):
        return False  # the model opened a fence itself
    return _OWN_CODE_RE.search(program) is None


def fenced(text: str, tag: str) -> list[str]:
    """Contents of the fenced blocks of ``text`` tagged ``tag`` (`````tag``), in order.

    ``python`` also matches ``py``/``python3``. Never raises; a non-``str`` gives ``[]``.
    """
    if not isinstance(text, str):
        return []
    tags = {"python", "py", "python3"} if tag == "python" else {tag}
    return [body.strip("\n") for t, body in _FENCE.findall(text) if t.lower() in tags]


def last_fenced(text: str, tag: str | None) -> str | None:
    """The last block tagged ``tag`` (stripped), or ``None``; ``tag=None``: any block."""
    if tag is None:
        found = _FENCE.findall(text) if isinstance(text, str) else []
        return found[-1][1].strip() if found else None
    blocks = fenced(text, tag)
    return blocks[-1].strip() if blocks else None


def defines_function(program: str, name: str) -> bool:
    """Whether ``program`` has a ``def name`` anywhere (a regex on the text, nested defs too)."""
    return re.search(rf"\bdef\s+{re.escape(name)}\b", program) is not None

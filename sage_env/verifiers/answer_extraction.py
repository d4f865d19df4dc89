r"""Answer extraction: the final ``\boxed{}`` / ``\fbox{}`` answer in a model's text.

Owns :func:`extract_boxed` (and its brace matcher); :mod:`sage_env.verifiers.math_verifier`
checks what it extracts. Standard library only; never raises on model output.
"""

from __future__ import annotations

import re

from sage_env.verifiers.result import _as_text

_BOX_RE = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")


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
        text = _as_text(text)
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

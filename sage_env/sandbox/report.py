"""The harness's wire format, shared by the judging harness and the host.

Every channel (worker -> judge, judge -> host) carries one JSON object per line. Values that a
test computes travel as nested ``[tag, ...]`` lists that name their exact builtin type (see
:func:`decode_value`). This module runs inside the sandbox too (it is one of the harness
modules passed to the interpreter as source), so it imports only the standard library.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "REFERENCE_MARKER",
    "Opaque",
    "decode_value",
    "encode_line",
    "parse_line",
    "parse_report",
    "split_lines",
]

#: In a job's ``setup``, the code after this line is a reference solution: it runs only in a
#: reference process of its own (setup, reference, then every test), never where the program
#: runs, and gives the expected values of ``assert __sage_plus__(X, atol)`` sites.
REFERENCE_MARKER = "\n# --- sage-env reference solution ---\n"


def encode_line(event: dict) -> bytes:
    r"""One report line: ``event`` as ASCII JSON plus a newline.

    Raises:
        TypeError: If ``event`` holds a value JSON cannot encode.
    """
    return (json.dumps(event, ensure_ascii=True) + "\n").encode("ascii")


def parse_line(line: bytes) -> dict | None:
    """The event on one line, or ``None`` for anything that is not a JSON object."""
    if line[:1] != b"{":
        return None
    try:
        event = json.loads(line)
    except Exception:
        return None
    return event if isinstance(event, dict) else None


def split_lines(pending: bytearray, chunk: bytes) -> list[bytes]:
    """Add ``chunk`` to the partial line ``pending``; return the lines it completes.

    ``pending`` keeps what follows the last newline. Linear in the bytes read: a long line
    arriving in many chunks is appended in place, not rebuilt per chunk (``buf + chunk`` is
    quadratic, minutes for a line of a gigabyte).
    """
    if b"\n" not in chunk:
        pending += chunk
        return []
    head, *rest = chunk.split(b"\n")
    first = bytes(pending) + head if pending else head
    pending[:] = rest.pop()
    return [first, *rest]


def parse_report(report: bytes) -> list[dict]:
    """Decode a whole channel (one JSON object per line); other lines are skipped."""
    events = []
    for line in report.split(b"\n"):
        event = parse_line(line)
        if event is not None:
            events.append(event)
    return events


class Opaque:
    """A value the test's process could not encode (not built from builtin types).

    The judge knows its type name, whether it is truthy without program-defined
    ``__bool__``/``__len__`` and, for a builtin iterable that is not a container (a generator,
    ``map``, ``range``, a dict view, ``os.environ`` ...), the items it yields (``len`` only
    where the type has one). It equals nothing and supports no other operation.
    """

    __slots__ = ("name", "truthy", "items", "sized")

    def __init__(self, name: str, truthy: bool, items: list | None = None, sized=False) -> None:
        self.name, self.truthy = str(name)[:80], truthy is True
        self.items, self.sized = items, sized is True

    def __bool__(self) -> bool:
        return self.truthy

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__

    def __iter__(self):
        if self.items is None:
            raise TypeError(f"'{self.name}' object is not iterable")
        return iter(self.items)

    def __len__(self) -> int:
        if self.items is None or not self.sized:
            raise TypeError(f"object of type '{self.name}' has no len()")
        return len(self.items)

    def __repr__(self) -> str:
        return f"<{self.name} object>"


_CONTAINERS: dict[str, Any] = {"l": list, "t": tuple, "S": set, "F": frozenset}


def decode_value(e: Any) -> Any:
    """A test's value from its tagged encoding (the worker's ``enc``).

    Tags: ``n`` None, ``o`` bool, ``I`` int (JSON number), ``i`` int (decimal string),
    ``x`` int (``hex()`` string), ``f`` float (repr), ``c`` complex, ``s`` str, ``b`` bytes
    (hex), ``l``/``t``/``S``/``F`` list/tuple/set/frozenset, ``d`` dict (list of key/value pairs),
    ``?`` an object of another type (:class:`Opaque`: its type name and truthiness).

    Raises:
        ValueError: On an unknown tag; other exceptions on malformed input.
    """
    tag = e[0]
    if tag == "n":
        return None
    if tag in ("o", "I", "s"):
        return e[1]
    if tag == "i":
        return int(e[1])
    if tag == "x":
        return int(e[1], 16)
    if tag == "f":
        return float(e[1])
    if tag == "c":
        return complex(float(e[1]), float(e[2]))
    if tag == "b":
        return bytes.fromhex(e[1])
    if tag in _CONTAINERS:
        return _CONTAINERS[tag]([decode_value(x) for x in e[1]])
    if tag == "d":
        return {decode_value(k): decode_value(v) for k, v in e[1]}
    if tag == "?":
        if len(e) > 3:
            return Opaque(e[1], e[2], [decode_value(x) for x in e[3]], e[4])
        return Opaque(e[1], e[2])
    raise ValueError(tag)

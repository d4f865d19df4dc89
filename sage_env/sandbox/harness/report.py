"""The harness's wire format, shared by the judging harness and the host.

Every channel (worker -> judge, judge -> host) carries one JSON object per line. Values that a
test computes travel as nested ``[tag, ...]`` lists that name their exact builtin type (see
:func:`decode_value`). This module runs inside the sandbox too (it is one of the harness
modules passed to the interpreter as source), so it imports only the standard library.
"""

from __future__ import annotations

import hashlib
import json
import marshal
import sys
from itertools import chain, compress, repeat
from operator import is_
from typing import Any

__all__ = [
    "HUGE_ITEMS",
    "REFERENCE_MARKER",
    "Digest",
    "Opaque",
    "decode_value",
    "digest_value",
    "is_huge",
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


#: A plus site's value that is a list or tuple of more items than this, counting the items of
#: its first item too (:func:`is_huge`), travels as a digest (:func:`digest_value`), not item
#: by item.
HUGE_ITEMS = 1 << 20


def is_huge(v: Any, _type=type, _len=len) -> bool:
    """Whether ``v`` is an exact list or tuple of more than about :data:`HUGE_ITEMS` items.

    The count is estimated in O(1), without calling any method of ``v``'s items: its length
    times the length of its first item when that is an exact list or tuple (MBPP+'s Mbpp/255
    returns 82,160 77-tuples: 6.3 million items).
    """
    t = _type(v)
    if t is not list and t is not tuple:
        return False
    n = _len(v)
    first = v[0] if n else None
    width = _len(first) if _type(first) in (list, tuple) else 1
    return n * max(width, 1) > HUGE_ITEMS


#: ``marshal`` runs no Python code on the values :func:`_digestible` lets through before
#: Python 3.12 (on a set of ``bytes`` subclass items its sort would call their ``__eq__``);
#: from 3.12 on a class may define ``__buffer__`` (PEP 688), which marshal would call.
_MARSHAL_RUNS_NO_PYTHON = sys.version_info < (3, 12)


#: The ids of the exact types a digested value may be made of: marshal writes each as itself,
#: so equal bytes mean ``==`` values. Left out: ``dict`` (marshal keeps its insertion order,
#: which ``==`` ignores), buffers other than exact ``bytes`` (marshal writes a ``bytearray``,
#: ``memoryview``, ``array.array`` or ``bytes`` subclass as ``bytes``, so a list of them would
#: match a list of ``bytes`` that item by item it does not), subclasses (a set of ``bytes``
#: subclass items makes marshal's sort call their ``__eq__``/``__lt__``), code objects.
_DIGESTIBLE = frozenset(
    map(id, (type(None), bool, int, float, complex, str, bytes, list, tuple, set, frozenset))
)
_NESTED = frozenset(map(id, (list, tuple, set, frozenset)))
#: Bounds on the scan (:func:`_digestible`): levels of nesting and items in all.
_MAX_LEVELS, _MAX_SCANNED = 64, 1 << 28
_EMPTY = object()


def _digestible(v: list | tuple, _type=type, _id=id, _len=len, _sum=sum, _map=map) -> bool:
    """Whether ``v`` is made of :data:`_DIGESTIBLE` types only, level by level.

    Every step runs in C (``chain``, ``map``, ``compress``, ``is``, a set of type ids), calls
    no method of an item (not even a metaclass's ``__hash__``: types are compared by identity
    and id; Mbpp/255's 128 million strings, one type, take about 3 s) and holds
    at most one level's containers (Mbpp/255: the 82,160 tuples, then 6.3 million items seen).
    """
    level, scanned = [v], 0
    for _ in range(_MAX_LEVELS):
        scanned += _sum(_map(_len, level))  # every container in a level is an exact one
        if scanned > _MAX_SCANNED:
            return False
        first = next(chain.from_iterable(level), _EMPTY)
        t0 = _type(first)  # one type throughout (the common case): compared by identity
        if all(_map(is_, _map(_type, chain.from_iterable(level)), repeat(t0))):
            ids = set() if first is _EMPTY else {_id(t0)}
        else:
            ids = set(_map(_id, _map(_type, chain.from_iterable(level))))
        if not ids <= _DIGESTIBLE:
            return False
        if not ids & _NESTED:
            return True
        items = chain.from_iterable(level)
        nested = _map(_NESTED.__contains__, _map(_id, _map(_type, chain.from_iterable(level))))
        level = list(compress(items, nested))
    return False


class Digest:
    """A huge list/tuple as the judge sees it: its type, length and SHA-256 (see
    :func:`digest_value`). Equal only to a :class:`Digest` of the same type, length and hash;
    truthy when non-empty."""

    __slots__ = ("kind", "n", "sha")

    def __init__(self, kind: str, n: int, sha: str) -> None:
        if kind not in ("l", "t") or type(n) is not int or type(sha) is not str:
            raise ValueError("malformed digest")
        self.kind, self.n, self.sha = kind, n, sha

    def __eq__(self, other: object) -> bool:
        return type(other) is Digest and (self.kind, self.n, self.sha) == (
            other.kind,
            other.n,
            other.sha,
        )

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        return self.n > 0

    def __len__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        name = "list" if self.kind == "l" else "tuple"
        return f"<{name} of {self.n} items, sha256 {self.sha[:12]}>"


def digest_value(
    v: Any,
    _type=type,
    _len=len,
    _range=range,
    _dumps=marshal.dumps,
    _sha256=hashlib.sha256,
) -> list | None:
    """The encoding ``["h", "l"|"t", n, sha256]`` of a huge list or tuple, or ``None``.

    A plus site's output of more than :data:`HUGE_ITEMS` items (MBPP+'s Mbpp/255 returns 1.7
    million 77-tuples on one input, 128 million items, 82,160 77-tuples on others) cannot cross
    to the judge item by item within a process's memory and time. It crosses as the SHA-256 of
    its exact-typed serialisation instead: ``marshal`` format 0 (written in C; floats as 17
    digits; sets in the order of their items' bytes; no interning or back-reference flags, so
    equal values give equal bytes), 32,768 items at a time. The judge then compares exactly (no
    float tolerance, ``1 != 1.0 != True``, ``0.0 != -0.0``, NaN equal to NaN): a documented
    deviation from EvalPlus's ``==`` (docs/reference/verifiers.md).

    ``None`` (the value goes item by item, as any other) for anything else: not an exact
    ``list``/``tuple``, not over :data:`HUGE_ITEMS` items (:func:`is_huge`), a list of floats
    only (where EvalPlus's tolerance applies), anything inside that is not of an exact
    :data:`_DIGESTIBLE` type (a ``dict``, a ``bytearray`` or other buffer, a subclass: see
    :func:`_digestible`; no method of it is called), or Python 3.12+ (see
    ``_MARSHAL_RUNS_NO_PYTHON``).

    Why the rule holds (nothing the program's process writes is worth more than a value it
    could have returned): a digest it forges matches the reference's only if it is the hash
    of the right value's serialisation, which it can only compute by holding that value.
    """
    if not _MARSHAL_RUNS_NO_PYTHON or not is_huge(v):
        return None
    t, n = _type(v), _len(v)
    for x in v:  # stops at the first item that is not a float
        if _type(x) is not float:
            break
    else:
        return None
    if not _digestible(v):
        return None
    h = _sha256()
    try:
        for start in _range(0, n, 1 << 15):
            h.update(_dumps(v[start : start + (1 << 15)], 0))
    except ValueError:  # "unmarshallable object": not an exact builtin type
        return None
    return ["h", "l" if t is list else "t", n, h.hexdigest()]


_CONTAINERS: dict[str, Any] = {"l": list, "t": tuple, "S": set, "F": frozenset}


def decode_value(e: Any) -> Any:
    """A test's value from its tagged encoding (the worker's ``enc``).

    Tags: ``n`` None, ``o`` bool, ``I`` int (JSON number), ``i`` int (decimal string),
    ``x`` int (``hex()`` string), ``f`` float (repr), ``c`` complex, ``s`` str, ``b`` bytes
    (hex), ``l``/``t``/``S``/``F`` list/tuple/set/frozenset, ``d`` dict (list of key/value pairs),
    ``?`` an object of another type (:class:`Opaque`: its type name and truthiness), ``h`` a
    huge list or tuple as its digest (:class:`Digest`, :func:`digest_value`).

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
    if tag == "h":
        return Digest(e[1], e[2], e[3])
    if tag == "?":
        if len(e) > 3:
            return Opaque(e[1], e[2], [decode_value(x) for x in e[3]], e[4])
        return Opaque(e[1], e[2])
    raise ValueError(tag)

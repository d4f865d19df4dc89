"""The test's view of the program's objects, and the encoding of the values a test reports.

A harness module (runs inside the sandbox): standard library only. Used by a test's process
(:mod:`~sage_env.sandbox.harness.testproc`) and the reference process R
(:func:`sage_env.sandbox.harness.worker.reference_run`).

Test code never operates on an object of the program (see docs/reference/verifiers.md, "Values, not
verdicts"). A value the program hands to the test (a name it binds, what a call of it returns,
an attribute of one of its objects) reaches the test as plain builtin values (:func:`plain`), a
one-pass iterator of such values (a generator), or a :class:`Guard`: an object that equals only
itself, is truthy only by builtin rules, formats as ``<T object>`` and supports no operator, but
can be called, have its attributes read and be passed back to the program (unwrapped). So no
``__eq__``/``__bool__``/``__format__``/``__iter__`` ... of the program decides anything in the
test's own code, in or outside an assert. Every builtin this module relies on is bound here at
import, before any program runs.
"""

from __future__ import annotations

import itertools
import os
import types

from sage_env.sandbox.harness.report import decode_value, digest_value, is_huge

_SCALARS = (bool, int, float, complex, str, bytes)
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE
_range, _isinstance, _type = range, isinstance, type
_id, _getattr, _setattr, _object_setattr = id, getattr, setattr, object.__setattr__
_object_getattribute = object.__getattribute__
_FORWARDED = frozenset({"__name__", "__qualname__", "__doc__", "__module__"})  # values
_type_instancecheck, _type_subclasscheck = type.__instancecheck__, type.__subclasscheck__
_BaseException = BaseException
_get_args, _set_args = BaseException.args.__get__, BaseException.args.__set__


def plain(v, depth=0):
    """The value as exact builtin types.

    Read through the BASE types' own methods, so that overridden
    ``__eq__``/``__iter__``/``__int__``/... of subclasses are never called.
    """
    t = _type(v)
    if depth > 60:
        raise ValueError("result nested too deeply")
    if v is None or t in _SCALARS:
        return v
    if _isinstance(v, bool):
        return bool.__bool__(v)
    if _isinstance(v, int):
        return int.__int__(v)
    if _isinstance(v, float):
        return float.__float__(v)
    if _isinstance(v, complex):
        return complex(
            float.__float__(complex.real.__get__(v)), float.__float__(complex.imag.__get__(v))
        )
    if _isinstance(v, str):
        return str.__str__(v)
    if _isinstance(v, bytes):
        return bytes.__bytes__(v) if hasattr(bytes, "__bytes__") else bytes(bytearray(v))
    if _isinstance(v, list):
        return [plain(list.__getitem__(v, i), depth + 1) for i in _range(list.__len__(v))]
    if _isinstance(v, tuple):
        return tuple(
            plain(tuple.__getitem__(v, i), depth + 1) for i in _range(tuple.__len__(v))
        )
    if _isinstance(v, dict):
        return {plain(k, depth + 1): plain(x, depth + 1) for k, x in dict.items(v)}
    if _isinstance(v, frozenset):
        return frozenset(plain(x, depth + 1) for x in frozenset.__iter__(v))
    if _isinstance(v, set):
        return {plain(x, depth + 1) for x in set.__iter__(v)}
    raise TypeError("unsupported result type " + t.__name__)


def enc(v):
    """A plain value (exact builtin types) in the wire encoding that report.decode_value reads."""
    t = _type(v)
    if v is None:
        return ["n"]
    if t is bool:
        return ["o", v]
    if t is int:
        return ["x", hex(v)] if abs(v) > 2**53 else ["I", v]  # hex: linear in size
    if t is float:
        return ["f", repr(v)]
    if t is complex:
        return ["c", repr(v.real), repr(v.imag)]
    if t is str:
        return ["s", v]
    if t is bytes:
        return ["b", v.hex()]
    if t is dict:
        return ["d", [[enc(k), enc(x)] for k, x in v.items()]]
    return [{list: "l", tuple: "t", set: "S", frozenset: "F"}[t], [enc(x) for x in v]]


def custom(v, names):
    """Whether ``v``'s class defines one of ``names`` in Python code.

    That is, in a heap type (a ``class`` statement, whatever its ``__module__`` claims;
    builtin types are static).
    """
    for klass in _type(v).__mro__:
        if klass.__flags__ & _HEAPTYPE and any(n in klass.__dict__ for n in names):
            return True
    return False


def truth(v):
    """``bool(v)``, but an object whose truthiness is defined by Python code is not trusted.

    A program-defined ``__bool__``/``__len__`` counts as false.
    """
    try:
        return bool(plain(v))
    except (TypeError, ValueError):
        pass
    if custom(v, ("__bool__", "__len__")):
        return False
    return bool(v)


def _again(items, v):
    # an iterator that was read to encode it is handed on as a fresh one over its items
    return iter([decode_value(x) for x in items])


ITERABLES = {
    t: (lambda items, v: v)
    for t in (
        range,
        type({}.keys()),
        type({}.values()),
        type({}.items()),
        type(os.environ),
    )
}
for _t in (
    types.GeneratorType,
    map,
    filter,
    zip,
    enumerate,
    reversed,
    type(iter([])),
    type(iter(())),
    type(iter(set())),
    type(iter("")),
    type(iter(range(0))),
    itertools.islice,
    itertools.chain,
    itertools.permutations,
    itertools.combinations,
    itertools.product,
):
    ITERABLES[_t] = _again
del _t
MAX_ITEMS = 1 << 20


class Guard:
    """The test's view of one of the program's objects: what it returns is shielded too."""

    __slots__ = ("_sage_raw",)

    def __init__(self, raw):
        _object_setattr(self, "_sage_raw", raw)

    def __call__(self, *args, **kwargs):
        """Call the object on unshielded arguments; what it returns or raises is shielded."""
        fn = raw(self)
        args = [unshield(a) for a in args]
        kwargs = {k: unshield(a) for k, a in kwargs.items()}
        try:
            result = fn(*args, **kwargs)
        except _BaseException as exc:  # what it raises carries shielded args too
            try:
                _set_args(exc, tuple(shield(a) for a in _get_args(exc)))
            except _BaseException:
                pass
            raise
        return shield(result)

    def __getattribute__(self, name):
        # the object's attributes, shielded; dunders are the guard's own (an explicit
        # ``f(1).__eq__(4)`` is the guard's), and its slot is out of reach by name
        if name[:2] == "__" and name[-2:] == "__":
            if name == "__class__":  # isinstance(guard, ProgramClass) as for the object
                return _type(raw(self))
            if name not in _FORWARDED:
                return _object_getattribute(self, name)
        return shield(_getattr(raw(self), name))

    def __setattr__(self, name, value):
        _setattr(raw(self), name, unshield(value))

    def __eq__(self, other):
        return _type(other) is Guard and raw(other) is raw(self)

    def __ne__(self, other):
        return not (_type(other) is Guard and raw(other) is raw(self))

    def __hash__(self):
        return _id(raw(self))

    def __bool__(self):
        return truth(raw(self))

    def __repr__(self):
        return "<" + type_name(raw(self)) + " object>"

    __str__ = __repr__

    def __format__(self, spec):
        return self.__repr__()

    def __instancecheck__(self, obj):  # isinstance(x, ProgramClass)
        cls = raw(self)
        return _isinstance(cls, type) and _type_instancecheck(cls, unshield(obj))

    def __subclasscheck__(self, sub):
        cls = raw(self)
        return _isinstance(cls, type) and _type_subclasscheck(cls, unshield(sub))


raw = Guard._sage_raw.__get__


def type_name(v):
    """The name of ``v``'s type, at most 80 characters (``"object"`` if it cannot be read)."""
    try:
        return str(_type(v).__name__)[:80]
    except BaseException:
        return "object"


def _lazy(it):
    for x in it:
        yield shield(x)


_LAZY = set(ITERABLES) - {range}

shielded = [None]  # the last container shield built (exact builtin types throughout)
plus_test = [False]  # the running test has __sage_plus__ sites (set by its process)


def shield(v):
    """A value of the program as the test may see it (see above)."""
    t = _type(v)
    if t is Guard or v is None or t in _SCALARS or t is range:
        return v
    if plus_test[0] and is_huge(v):
        # a huge output in a plus test (Mbpp/255: 6 million items) is not copied: the
        # test sees a guard, and a plus site sends its digest (value, digest_value)
        return Guard(v)
    try:
        p = plain(v)
    except (TypeError, ValueError):
        pass
    else:
        shielded[0] = p  # a hole taking this very value need not copy it again
        return p
    if t in _LAZY:
        return _lazy(v)
    if t is type and issubclass(v, _BaseException):
        return v  # `except ProgramError:` needs the class itself (no metaclass of its own)
    return Guard(v)


def plus_code(v, is_plain=False):
    """A plus site's value as its digest (report.digest_value), else None, and its plain copy.

    The copy is made where needed: a list or tuple that is not digested as it is (a
    subclass, subclass items, a subclass first item that is_huge does not count) is
    digested as that copy (read through the base types, as item by item), so a value equal
    to the other side's takes the same route (digest or item by item) on both sides. The
    copy is the one item by item needs anyway.
    """
    code = digest_value(v)
    if code is not None or is_plain or not _isinstance(v, (list, tuple)):
        return code, None
    p = plain(v)
    return digest_value(p), p


_CONTAINERS = (list, tuple, set, frozenset)


def unshield(v):
    """What the program gets back: its own object for a guard.

    Also as an item of a list, tuple, set or dict (keys and values) the test built around
    guards; anything else as is (the same object: a program may change the test's list in
    place).
    """
    t = _type(v)
    if t is Guard:
        return raw(v)
    if t in _CONTAINERS:
        if Guard in set(map(_type, v)):  # one C-level pass
            return t(raw(x) if _type(x) is Guard else x for x in v)
    elif t is dict:
        if Guard in set(map(_type, v)) or Guard in set(map(_type, v.values())):
            return {
                (raw(k) if _type(k) is Guard else k): (raw(x) if _type(x) is Guard else x)
                for k, x in v.items()
            }
    return v

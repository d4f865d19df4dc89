"""The worker W: runs setup, the untrusted program and each test, and reports to the judge.

A harness module (runs inside the sandbox): standard library only. W holds no expected value
and no descriptor of the host's report channel.

:func:`run_worker` (with its nested ``become``) is the one function over the project's
80-line limit (``tests/repo/test_layout.py``), on purpose: it is one straight-line sequence of
confinement steps (drop to the worker uid, limits, descriptor hygiene, seccomp, then one
fork per test) whose order is the security argument. Split into helpers, each step would
read as safe on its own while the guarantee depends on what ran before it; kept in one
place, a reviewer checks the order top to bottom.
"""

from __future__ import annotations

import bisect  # noqa: F401
import builtins
import heapq  # noqa: F401
import itertools
import json
import math
import os
import random
import re
import resource
import select
import signal
import string  # noqa: F401
import sys
import time
import types

from sage_env.sandbox.confine import _drop, _prctl, _read_all, _seccomp
from sage_env.sandbox.report import (
    REFERENCE_MARKER,
    decode_value,
    digest_value,
    is_huge,
    parse_line,
    split_lines,
)

# The modules above (with math, itertools, collections, functools, operator, re ... that the
# harness imports anyway) are loaded before any program runs, so the test imports a private
# copy of each as it was then (run_worker, private_module): tests draw their inputs from them.

#: an import statement: ``from a.b import c`` (group 1: ``a``) or ``import a.b as x, c``
#: (group 2: ``a.b as x, c``); compiled once, in the zygote, not per job
_IMPORTS = re.compile(
    r"(?:^|;)[ \t]*(?:from[ \t]+(\w+)[\w.]*[ \t]+import\b|import[ \t]+([\w. \t,]+))", re.M
)

#: What W relays of one test's channel at most, bytes (the rest is dropped: that test fails).
_RELAY_CAP_BYTES = 64 << 20


def run_worker(job_fd: int, ctl_fd: int, last_fd: int, wuid: int) -> None:
    """W: run the job read from ``job_fd``, one fresh process per test; never returns.

    W drops to ``wuid`` and applies the job's limits, compiles setup and program (errors go
    to ``ctl_fd``), then forks one process C_i per test except the last. C_i keeps only
    stdin/stdout/stderr and a pipe of its own as fd 3 (every other inherited descriptor is
    closed before setup runs), runs setup, the program and test i, and reports on fd 3. W
    relays each C_i's lines to the judge on ``ctl_fd`` tagged with i (the index is W's, never
    the program's), then C_i's exit status. W runs no untrusted code itself until it becomes
    the last test: it then drops ``ctl_fd`` and reports on ``last_fd`` (the judge knows which
    test that is, and judges it by W's exit status). In ``run`` mode, or with no runnable
    test, W runs the program alone that way.
    """
    # W: untrusted code runs here (and in per-test forks). Holds no secrets.
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    _drop(wuid)
    _prctl(38, 1)  # PR_SET_NO_NEW_PRIVS
    for var in ("PWD", "OLDPWD"):  # bwrap --chdir and sh set these
        os.environ.pop(var, None)
    job = json.loads(_read_all(job_fd).decode("ascii"))
    os.close(job_fd)
    cpu_limits = job.get("cpu_limits") or []
    base_cpu = None  # each test's CPU budget, set in its own process (see become)
    for name, soft, hard in job["limits"]:
        if name == "RLIMIT_CPU" and job["mode"] != "reference":
            # W itself only relays until it becomes the last test: its CPU is not the
            # program's, so the budget is set per process, on top of what it has used
            base_cpu = soft
            continue
        try:
            resource.setrlimit(getattr(resource, name), (soft, hard))
        except (ValueError, OSError):
            pass
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _seccomp()
    _prctl(4, 0)  # PR_SET_DUMPABLE 0: a test (same uid) can neither ptrace W nor open its fds
    _cpu, _monotonic = time.process_time, time.monotonic
    _dumps, _exec, _dict, _type, _getpid, _exit, _fork, _os_write = (
        json.dumps,
        exec,
        dict,
        type,
        os.getpid,
        os._exit,
        os.fork,
        os.write,
    )

    def sender(fd, tag=None):
        # writes through os.write as it was before the program ran (a program that patches
        # os.write cannot filter what its test reports); a test's events carry its run tag
        def send(**ev):
            try:
                if tag is not None:
                    ev["n"] = tag
                data = ("\n" + _dumps(ev, ensure_ascii=True) + "\n").encode("ascii")
                while data:
                    data = data[_os_write(fd, data) :]
            except BaseException:
                pass

        return send

    ctl = sender(ctl_fd)

    def describe(exc):
        try:
            name = _type(exc).__name__
        except BaseException:
            name = "Exception"
        try:
            msg = str(exc)[:160]
        except BaseException:
            msg = "<unprintable>"
        err = getattr(exc, "errno", None)
        return {"exc": name, "msg": msg, "errno": err if _type(err) is int else None}

    def audit(event, args):
        if event[:7] == "socket." and event in (
            "socket.connect",
            "socket.bind",
            "socket.sendto",
            "socket.sendmsg",
        ):
            fam = getattr(args[0], "family", None)
            if fam in (2, 10):
                raise PermissionError(1, "network access is disabled in the sandbox")

    sys.addaudithook(audit)

    _SCALARS = (bool, int, float, complex, str, bytes)
    _HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE
    _range, _isinstance = range, isinstance

    def plain(v, depth=0):
        # The value as exact builtin types, read through the BASE types' own methods so that
        # overridden __eq__/__iter__/__int__/... of subclasses are never called.
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
        # a method defined by Python code: the class is a heap type (a ``class`` statement,
        # whatever its ``__module__`` claims; builtin types are static)
        for klass in _type(v).__mro__:
            if klass.__flags__ & _HEAPTYPE and any(n in klass.__dict__ for n in names):
                return True
        return False

    def truth(v):
        # bool(v), but an object whose truthiness is defined by Python code (program-defined
        # __bool__/__len__) is not trusted: it counts as false.
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

    _ITERABLES = {
        t: (lambda items, v: v)
        for t in (
            range,
            type({}.keys()),
            type({}.values()),
            type({}.items()),
            type(os.environ),
        )
    }
    for t in (
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
        _ITERABLES[t] = _again
    _MAX_ITEMS = 1 << 20

    # -- the test's view of the program's objects (see docs/reference/verifiers.md, "Values, not
    # verdicts"): test code never operates on an object of the program. A value the program
    # hands to the test (a name it binds, what a call of it returns, an attribute of one of its
    # objects) reaches the test as plain builtin values (``plain``), a one-pass iterator of
    # such values (a generator), or a _Guard: an object that equals only itself, is truthy
    # only by builtin rules, formats as ``<T object>`` and supports no operator, but can be
    # called, have its attributes read and be passed back to the program (unwrapped). So no
    # ``__eq__``/``__bool__``/``__format__``/``__iter__`` ... of the program decides anything
    # in the test's own code, in or outside an assert.
    _Module = types.ModuleType
    _id, _getattr, _setattr, _object_setattr = id, getattr, setattr, object.__setattr__
    _object_getattribute = object.__getattribute__
    _FORWARDED = frozenset({"__name__", "__qualname__", "__doc__", "__module__"})  # values
    _type_instancecheck, _type_subclasscheck = type.__instancecheck__, type.__subclasscheck__
    _BaseException = BaseException
    _get_args, _set_args = BaseException.args.__get__, BaseException.args.__set__

    class _Guard:
        __slots__ = ("_sage_raw",)

        def __init__(self, raw):
            _object_setattr(self, "_sage_raw", raw)

        def __call__(self, *args, **kwargs):
            fn = _raw(self)
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
                    return _type(_raw(self))
                if name not in _FORWARDED:
                    return _object_getattribute(self, name)
            return shield(_getattr(_raw(self), name))

        def __setattr__(self, name, value):
            _setattr(_raw(self), name, unshield(value))

        def __eq__(self, other):
            return _type(other) is _Guard and _raw(other) is _raw(self)

        def __ne__(self, other):
            return not (_type(other) is _Guard and _raw(other) is _raw(self))

        def __hash__(self):
            return _id(_raw(self))

        def __bool__(self):
            return truth(_raw(self))

        def __repr__(self):
            return "<" + _type_name(_raw(self)) + " object>"

        __str__ = __repr__

        def __format__(self, spec):
            return self.__repr__()

        def __instancecheck__(self, obj):  # isinstance(x, ProgramClass)
            cls = _raw(self)
            return _isinstance(cls, type) and _type_instancecheck(cls, unshield(obj))

        def __subclasscheck__(self, sub):
            cls = _raw(self)
            return _isinstance(cls, type) and _type_subclasscheck(cls, unshield(sub))

    _raw = _Guard._sage_raw.__get__

    def _type_name(v):
        try:
            return str(_type(v).__name__)[:80]
        except BaseException:
            return "object"

    def _lazy(it):
        for x in it:
            yield shield(x)

    _LAZY = set(_ITERABLES) - {range}

    _shielded = [None]  # the last container shield built (exact builtin types throughout)
    _plus_test = [False]  # the running test has __sage_plus__ sites (set by become)

    def shield(v):
        # a value of the program as the test may see it (see above)
        t = _type(v)
        if t is _Guard or v is None or t in _SCALARS or t is range:
            return v
        if _plus_test[0] and is_huge(v):
            # a huge output in a plus test (Mbpp/255: 6 million items) is not copied: the
            # test sees a guard, and a plus site sends its digest (value, digest_value)
            return _Guard(v)
        try:
            p = plain(v)
        except (TypeError, ValueError):
            pass
        else:
            _shielded[0] = p  # a hole taking this very value need not copy it again
            return p
        if t in _LAZY:
            return _lazy(v)
        if t is type and issubclass(v, _BaseException):
            return v  # `except ProgramError:` needs the class itself (no metaclass of its own)
        return _Guard(v)

    def plus_code(v, is_plain=False):
        # A plus site's value as its digest (report.digest_value), else None, and its plain
        # copy where one was made: a list or tuple that is not digested as it is (a subclass,
        # subclass items, a subclass first item that is_huge does not count) is digested as
        # that copy (read through the base types, as item by item), so a value equal to the
        # other side's takes the same route (digest or item by item) on both sides. The copy
        # is the one item by item needs anyway.
        code = digest_value(v)
        if code is not None or is_plain or not _isinstance(v, (list, tuple)):
            return code, None
        p = plain(v)
        return digest_value(p), p

    _CONTAINERS = (list, tuple, set, frozenset)

    def unshield(v):
        # what the program gets back: its own object for a guard, also as an item of a list,
        # tuple, set or dict (keys and values) the test built around guards; anything else as
        # is (the same object: a program may change the test's list in place)
        t = _type(v)
        if t is _Guard:
            return _raw(v)
        if t in _CONTAINERS:
            if _Guard in set(map(_type, v)):  # one C-level pass
                return t(_raw(x) if _type(x) is _Guard else x for x in v)
        elif t is dict:
            if _Guard in set(map(_type, v)) or _Guard in set(map(_type, v.values())):
                return {
                    (_raw(k) if _type(k) is _Guard else k): (_raw(x) if _type(x) is _Guard else x)
                    for k, x in v.items()
                }
        return v

    def _imported(src):
        names = set()
        for m in _IMPORTS.finditer(src):
            if m.group(1):
                names.add(m.group(1))
            else:
                for part in m.group(2).split(","):
                    words = part.split()
                    if words:
                        names.add(words[0].split(".")[0])
        return names

    _random_path = getattr(random, "__file__", None)  # the test's own random: private_module
    _open, _compile = open, compile
    run_mode = job["mode"] == "run"
    setup_src, _, reference_src = job["setup"].partition(REFERENCE_MARKER)
    if job["mode"] != "reference":
        reference_src = ""  # the judge strips it; a program's process never holds it
    try:
        setup = compile(setup_src, "<setup>", "exec")
        reference = compile(reference_src, "<reference>", "exec") if reference_src else None
    except BaseException as exc:
        ctl(ev="setup_error", **describe(exc))
        return
    try:
        program = compile(job["program"], "<program>", "exec")
    except BaseException as exc:
        ctl(ev="syntax_error", **describe(exc))
        return
    _builtins_dict = builtins.__dict__
    _clear, _update = dict.clear, dict.update

    def finish(me):
        if _getpid() == me:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except BaseException:
                    pass
        _exit(0)

    def become(chan, src, tag=None, cpu=None, plus_sites=()):
        # This process runs setup, the program and one test (src; None: the program alone),
        # holding no descriptor but 0-2 and its own channel (fd 3). Never returns.
        # ``plus_sites``: the test's ``__sage_plus__`` sites (whose values only the judge uses).
        if chan != 3:
            os.dup2(chan, 3)
        os.closerange(4, 1 << 16)
        budget = cpu or base_cpu  # this test's own CPU limit (plus: EvalPlus's per input)
        if budget:  # on top of what this process used before (W: relaying earlier tests)
            used = resource.getrusage(resource.RUSAGE_SELF)
            soft = int(math.ceil(budget + used.ru_utime + used.ru_stime))
            try:
                resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 1))
            except (ValueError, OSError):
                pass
        send = sender(3, tag)
        me = _getpid()
        _plus_test[0] = bool(plus_sites)
        module = types.ModuleType("__main__" if run_mode else "solution")
        ns = module.__dict__
        ns["__builtins__"] = builtins
        sys.modules[module.__name__] = module
        try:
            _exec(setup, ns)
        except BaseException as exc:
            send(ev="setup_error", **describe(exc))
            finish(me)
        send(ev="setup_ok")  # the last event trusted code writes: untrusted code runs next
        # The builtins as (trusted) setup left them. The test gets them back, so a program that
        # patches bool/abs/isinstance/... can fool neither its test nor the checks made for it.
        pristine = _dict(_builtins_dict)
        # Likewise every module and the namespace as setup left them: the test imports private
        # copies of these modules (see private_module), and sees the program's names shielded
        if src is not None:
            # only the modules this test can name (an import statement of its source, a module
            # setup bound): copying every loaded module's dict would cost each test ~10 ms
            wanted = _imported(src)
            wanted.update(
                getattr(m, "__name__", "") for m in ns.values() if _type(m) is _Module
            )
            loaded = sys.modules  # read now, before the program runs: no copy of it needed
            pre_modules = {
                name: (loaded[name], _dict(loaded[name].__dict__))
                for name in wanted
                if _type(loaded.get(name)) is _Module and loaded[name] is not module
            }
            pre_ns = _dict(ns)
        try:
            _exec(program, ns)
            if _getpid() != me:  # a fork made by the program must not act as the harness
                _exit(0)
        except SystemExit as exc:
            if _getpid() != me:
                _exit(0)
            if run_mode and exc.code in (None, 0):
                send(ev="program_ok")
            else:
                send(ev="program_error", **describe(exc), code=str(exc.code)[:40])
            finish(me)
        except BaseException as exc:
            if _getpid() != me:
                _exit(0)
            send(ev="program_error", **describe(exc))
            finish(me)
        if run_mode and "threading" in sys.modules:
            try:
                sys.modules["threading"]._shutdown()  # like interpreter exit: join threads
            except BaseException as exc:
                send(ev="program_error", **describe(exc))
                finish(me)
        send(ev="program_ok")
        if src is not None:
            # Hole values wait here until their site is reached, then travel in ONE event
            # (a site evaluation is reported whole or not at all): [k, last j, [[j, code]]].
            # A site nested in a hole (a helper with asserts) opens an entry of its own.
            open_sites = []

            def keep(k, j, code):
                if open_sites and open_sites[-1][0] == k and j > open_sites[-1][1]:
                    top = open_sites[-1]
                    top[1] = j
                    top[2].append([j, code])
                else:
                    open_sites.append([k, j, [[j, code]]])

            def value(k, j, v):
                # a hole's value: kept for the judge (who decides), returned as plain builtins
                guard = v if _type(v) is _Guard else None
                if guard is not None:  # the program's object: the judge sees it as is
                    v = _raw(guard)
                if k in plus_sites:  # a huge output goes as its digest; the test drops it
                    try:
                        code, copy = plus_code(v, v is _shielded[0] and v is not None)
                    except (TypeError, ValueError):  # not plain: read below, as any value
                        code, copy = None, None
                    if code is not None:
                        keep(k, j, code)
                        return None
                    if copy is not None:
                        v = _shielded[0] = copy  # plain already: not copied again below
                try:
                    # what shield has just built is plain already; if the test has since put
                    # something else in it, enc (exact types only) fails and the hole with it
                    p = v if v is _shielded[0] and v is not None else plain(v)
                except (TypeError, ValueError):
                    name = _type_name(v)
                    code = ["?", name, truth(v)]
                    if guard is not None:
                        keep(k, j, code)
                        return guard
                    if _type(v) in _ITERABLES:  # builtin iterators and views: their items
                        try:
                            items = []
                            for x in v:
                                items.append(enc(plain(x)))
                                if len(items) > _MAX_ITEMS:
                                    raise ValueError("too many items")
                            code += [items, hasattr(_type(v), "__len__")]
                            v = _ITERABLES[_type(v)](items, v)
                        except (TypeError, ValueError):
                            code = code[:3]
                    keep(k, j, code)
                    return v
                except BaseException as exc:
                    keep(k, j, None)
                    send(ev="a", k=k, v=open_sites.pop()[2], bad=describe(exc)["msg"])
                    raise AssertionError(f"assertion {k}: unreadable value") from None
                try:
                    keep(k, j, enc(p))
                except BaseException:
                    keep(k, j, None)
                return p

            def reached(k, result, check=True):
                values = open_sites.pop()[2] if open_sites and open_sites[-1][0] == k else []
                send(ev="a", k=k, v=values)
                if check and truth(result) is not True:
                    raise AssertionError(f"assertion {k} failed")

            def called(k, result):
                send(ev="a", k=k, v=[])
                return result

            _clear(_builtins_dict)
            _update(_builtins_dict, pristine)
            # the test's own copy of the pristine builtins: a program that patches the
            # builtins module again from inside a call under test (``builtins.all = ...``)
            # changes what its own code sees, never what the test's code looks up
            tbuiltins = _dict(pristine)
            real_import = tbuiltins.get("__import__")
            private = {}
            pre_ids = {_id(m): name for name, (m, _) in pre_modules.items()}

            def private_module(name):
                # A module the test imports, as it was before the program ran, in an object of
                # the test's own: the program's later changes to the shared module (``random.
                # choice = ...``, even from inside a call under test) do not reach it, and
                # ``random`` is a fresh instance (its own generator state, seeded by the OS),
                # so the program can neither pick nor predict the test's random inputs.
                if name in private:
                    return private[name]
                orig, snap = pre_modules[name]
                mod = _Module(name)
                d = mod.__dict__
                if name == "random" and _random_path:
                    d["__builtins__"] = tbuiltins
                    d["__file__"] = _random_path
                    with _open(_random_path, "rb") as fh:
                        _exec(_compile(fh.read(), _random_path, "exec"), d)
                else:
                    for key, val in _dict(orig.__dict__).items():
                        if key not in snap:  # submodules imported since
                            d[key] = val
                    _update(d, snap)
                private[name] = mod
                return mod

            def test_import(name, globals=None, locals=None, fromlist=(), level=0):
                mod = real_import(name, globals, locals, fromlist, level)
                if level == 0 and _type(name) is str:
                    want = name if fromlist else name.partition(".")[0]
                    if want in pre_modules:
                        return private_module(want)
                return mod

            if real_import is not None:
                tbuiltins["__import__"] = test_import
            tns = {}
            for key, val in ns.items():
                if _type(val) is _Module and _id(val) in pre_ids:
                    tns[key] = private_module(pre_ids[_id(val)])
                elif pre_ns.get(key, tns) is val and _type(val) is not types.FunctionType:
                    tns[key] = val  # setup's own (a constant, a typing alias ...)
                else:
                    tns[key] = shield(val)  # the program's, or a setup helper it can reach
            sys.modules.pop(module.__name__, None)  # no raw route to the program's namespace
            tns["__builtins__"] = tbuiltins
            tns["__sage_v__"] = value
            tns["__sage_a__"] = reached
            tns["__sage_c__"] = called
            try:
                _exec(compile(src, "<test>", "exec"), tns)
                result = {"ok": True}
            except BaseException as exc:
                result = {"ok": False, **describe(exc)}
            if _getpid() != me:
                _exit(0)
            send(ev="test", **result)
        finish(me)

    def reference_run(chan, runnable):
        # R: setup, the reference solution, then every test (trusted code only), reporting the
        # values of the tests' assertion sites as the expected ones. Never returns.
        if chan != 3:
            os.dup2(chan, 3)
        os.closerange(4, 1 << 16)
        send = sender(3)
        me = _getpid()
        ns = {"__builtins__": builtins, "__name__": "reference"}
        try:
            _exec(setup, ns)
            _exec(reference, ns)
        except BaseException as exc:
            send(ev="ref_error", **describe(exc))
            finish(me)
        for i in runnable:
            plus_sites = set(plus[i])

            def value(k, j, v, _i=i, _plus=plus_sites):
                if k in _plus:
                    try:
                        code, copy = plus_code(v)
                        code = code or enc(plain(v) if copy is None else copy)
                        send(ev="site", i=_i, k=k, v=code)
                    except BaseException as exc:
                        send(ev="site", i=_i, k=k, bad=describe(exc)["msg"])
                return v

            tns = _dict(ns)
            tns["__sage_v__"] = value
            tns["__sage_a__"] = lambda k, result, check=True: None
            tns["__sage_c__"] = lambda k, result: result
            code = compile(tests[i], "<test>", "exec")
            start = _cpu()
            try:
                _exec(code, tns)
            except BaseException:
                pass
            if _getpid() != me:
                _exit(0)
            send(ev="time", i=i, cpu=_cpu() - start)
        finish(me)

    def relay(pid, r, i, wall=None):
        # C_i's lines -> the judge, tagged with i; until C_i's pipe closes, or C_i has exited
        # and what it wrote is drained (a daemonised grandchild may hold the pipe open).
        # ``wall``: a wall-clock backstop for this test (a test that sleeps is killed).
        os.set_blocking(r, False)
        buf, total, status, killed = bytearray(), 0, None, False
        deadline = _monotonic() + wall if wall else None
        while True:
            if status is None:
                try:
                    wpid, st, usage = os.wait4(pid, os.WNOHANG)
                except ChildProcessError:
                    wpid, st, usage = pid, -1, None
                if wpid:
                    status = st
                    if usage is not None:
                        spent[0] += usage.ru_utime + usage.ru_stime
                elif deadline is not None and _monotonic() > deadline:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                    deadline, killed = None, True
            try:
                chunk = os.read(r, 1 << 16)
            except BlockingIOError:
                chunk = None
            if chunk:
                total += len(chunk)
                if total <= _RELAY_CAP_BYTES:
                    for line in split_lines(buf, chunk):
                        ev = parse_line(line)
                        if ev is not None:
                            ctl(ev="chan", i=i, e=ev)
                continue
            if chunk == b"" or status is not None:
                break
            select.select([r], [], [], 0.05)
        os.close(r)
        if status is None:
            try:
                _, status, usage = os.wait4(pid, 0)
                spent[0] += usage.ru_utime + usage.ru_stime
            except ChildProcessError:
                status = -1
        if killed and status >= 0 and os.WIFSIGNALED(status):
            status = int(signal.SIGXCPU)  # out of time (by the wall clock): a timeout
        return status

    # each test's __sage_plus__ sites (the judge's, from the rewritten tests)
    plus = [frozenset(p) for p in job.get("plus") or []]
    plus += [frozenset()] * (len(job.get("tests") or []) - len(plus))
    if job["mode"] == "reference":  # R, forked by the judge (see judge._run_reference)
        tests = job["tests"]  # rewritten by the judge, None where a test did not parse
        if reference is not None:
            reference_run(ctl_fd, [i for i, src in enumerate(tests) if src is not None])
        return
    tests = [] if run_mode else job["tests"]
    tags = job.get("tags") or [None] * len(tests)
    limits = list(cpu_limits) + [None] * (len(tests) - len(cpu_limits))
    task_cpu = job.get("task_cpu_s")
    spent = [0.0]  # CPU seconds the tests have used so far
    runnable = [i for i, src in enumerate(tests) if src is not None]
    for i in runnable[:-1]:
        if task_cpu and spent[0] > task_cpu:  # the task's budget is spent (EvalPlus's cap)
            ctl(ev="fork_error", i=i, exc="TimeoutError", msg="the task's time budget is spent")
            continue
        try:
            r, w = os.pipe()
        except BaseException as exc:
            ctl(ev="fork_error", i=i, **describe(exc))
            continue
        try:
            pid = _fork()
        except BaseException as exc:
            os.close(r)
            os.close(w)
            ctl(ev="fork_error", i=i, **describe(exc))
            continue
        if pid == 0:
            become(w, tests[i], tags[i], limits[i], plus[i])
        os.close(w)
        wall = limits[i] * 3.0 + 2.0 if limits[i] else None  # as SandboxConfig.wall_limit_s
        ctl(ev="exit", i=i, status=relay(pid, r, i, wall))
    if not runnable:
        become(last_fd, None)
    last = runnable[-1]
    if task_cpu and spent[0] > task_cpu:
        _exit(0)  # no verdict for the last test: it fails
    become(last_fd, tests[last], tags[last], limits[last], plus[last])

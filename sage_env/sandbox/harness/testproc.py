"""A test's process: setup, the untrusted program and one test, reporting values on fd 3.

A harness module (runs inside the sandbox): standard library only. The worker W forks one
such process per test (and becomes the last one itself), which applies :data:`TEST_STEPS`
to its :class:`RunState`, in the order docs/reference/sandbox.md gives ("Confinement steps";
the loop is :func:`sage_env.sandbox.harness.worker.run_worker`'s). The process is the
program's: it reports only the values of what the test evaluates
(docs/reference/verifiers.md, "Values, not verdicts"), through functions bound here at
import, before any program runs.
"""

from __future__ import annotations

import bisect  # noqa: F401
import builtins
import heapq  # noqa: F401
import json
import math
import os
import random
import re
import resource
import string  # noqa: F401
import sys
import types

from sage_env.sandbox.harness.shield import (
    ITERABLES,
    MAX_ITEMS,
    Guard,
    enc,
    plain,
    plus_code,
    plus_test,
    raw,
    shield,
    shielded,
    truth,
    type_name,
)

# The modules above (with math, itertools, collections, functools, operator, re ... that the
# harness imports anyway) are loaded before any program runs, so the test imports a private
# copy of each as it was then (_TestImports): tests draw their inputs from them.

#: an import statement: ``from a.b import c`` (group 1: ``a``) or ``import a.b as x, c``
#: (group 2: ``a.b as x, c``); compiled once, in the zygote, not per job
_IMPORTS = re.compile(
    r"(?:^|;)[ \t]*(?:from[ \t]+(\w+)[\w.]*[ \t]+import\b|import[ \t]+([\w. \t,]+))", re.M
)

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
_Module, _id = types.ModuleType, id
_random_path = getattr(random, "__file__", None)  # the test's own random: _TestImports
_open, _compile = open, compile
_builtins_dict = builtins.__dict__
_clear, _update = dict.clear, dict.update


def sender(fd, tag=None):
    """A function that sends one event (keyword arguments) as a line on ``fd``.

    It writes through os.write as it was before the program ran (a program that patches
    os.write cannot filter what its test reports); a test's events carry its run tag.
    """

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


def describe(exc):
    """An exception as the judge reads it: its type's name, message and errno."""
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


def finish(me):
    """End this process (status 0), flushing its streams if it is the test's own (``me``)."""
    if _getpid() == me:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
    _exit(0)


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


class RunState:
    """One test's process, as its steps hand it on: W's state ``w`` and what the steps set up."""

    __slots__ = (
        "w", "chan", "src", "tag", "cpu", "plus_sites", "send", "me", "module", "ns",
        "pristine", "pre_modules", "pre_ns",
    )

    def __init__(self, w, chan, src, tag=None, cpu=None, plus_sites=()):
        self.w, self.chan, self.src, self.tag, self.cpu = w, chan, src, tag, cpu
        self.plus_sites = plus_sites
        self.send = sender(3, tag)
        self.me = _getpid()
        self.module = self.ns = self.pristine = self.pre_modules = self.pre_ns = None


def keep_own_channel(t):
    """Only fds 0-2 and the test's own channel (as fd 3) stay open: no forgery on another's."""
    if t.chan != 3:
        os.dup2(t.chan, 3)
    os.closerange(4, 1 << 16)


def limit_cpu(t):
    """RLIMIT_CPU: the test's own CPU budget on top of what the process used (SIGXCPU: timeout)."""
    budget = t.cpu or t.w.base_cpu  # this test's own CPU limit (plus: EvalPlus's per input)
    if budget:  # on top of what this process used before (W: relaying earlier tests)
        used = resource.getrusage(resource.RUSAGE_SELF)
        soft = int(math.ceil(budget + used.ru_utime + used.ru_stime))
        try:
            resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 1))
        except (ValueError, OSError):
            pass


def run_setup(t):
    """Trusted setup runs before the program; ``setup_ok`` is the last event trusted code writes."""
    plus_test[0] = bool(t.plus_sites)
    t.module = types.ModuleType("__main__" if t.w.run_mode else "solution")
    t.ns = t.module.__dict__
    t.ns["__builtins__"] = builtins
    sys.modules[t.module.__name__] = t.module
    try:
        _exec(t.w.setup, t.ns)
    except BaseException as exc:
        t.send(ev="setup_error", **describe(exc))
        finish(t.me)
    t.send(ev="setup_ok")  # the last event trusted code writes: untrusted code runs next


def snapshot_pristine(t):
    """Keep builtins, the test's modules and setup's names as setup left them, for the test."""
    # The builtins as (trusted) setup left them. The test gets them back, so a program that
    # patches bool/abs/isinstance/... can fool neither its test nor the checks made for it.
    t.pristine = _dict(_builtins_dict)
    # Likewise every module and the namespace as setup left them: the test imports private
    # copies of these modules (see _TestImports), and sees the program's names shielded
    if t.src is not None:
        # only the modules this test can name (an import statement of its source, a module
        # setup bound): copying every loaded module's dict would cost each test ~10 ms
        wanted = _imported(t.src)
        wanted.update(getattr(m, "__name__", "") for m in t.ns.values() if _type(m) is _Module)
        loaded = sys.modules  # read now, before the program runs: no copy of it needed
        t.pre_modules = {
            name: (loaded[name], _dict(loaded[name].__dict__))
            for name in wanted
            if _type(loaded.get(name)) is _Module and loaded[name] is not t.module
        }
        t.pre_ns = _dict(t.ns)


def run_program(t):
    """The untrusted program; a fork it makes never acts as the harness, exit(0) is no pass."""
    send, me, run_mode = t.send, t.me, t.w.run_mode
    try:
        _exec(t.w.program, t.ns)
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


def run_test(t):
    """The test: pristine builtins, private modules, the program's names shielded; values only."""
    if t.src is None:
        return
    value, reached, called, branch, entered, arms = _site_hooks(t.send, t.plus_sites)
    _clear(_builtins_dict)
    _update(_builtins_dict, t.pristine)
    tns = _test_namespace(t)
    tns["__sage_v__"] = value
    tns["__sage_a__"] = reached
    tns["__sage_c__"] = called
    tns["__sage_b__"] = branch
    tns["__sage_e__"] = entered
    try:
        _exec(compile(t.src, "<test>", "exec"), tns)
        # how often each counted arm (a for iteration, a handler, a match case) was entered
        result = {"ok": True, "e": [[a, n] for a, n in arms.items()]}
    except BaseException as exc:
        result = {"ok": False, **describe(exc)}
    if _getpid() != t.me:
        _exit(0)
    t.send(ev="test", **result)


#: What a test's process does, in order (docs/reference/sandbox.md, "Confinement steps").
TEST_STEPS = (keep_own_channel, limit_cpu, run_setup, snapshot_pristine, run_program, run_test)


def _test_namespace(t):
    # The test's globals: its own copy of the pristine builtins (a program that patches the
    # builtins module again from inside a call under test, ``builtins.all = ...``, changes
    # what its own code sees, never what the test's code looks up), private copies of the
    # modules setup bound, setup's own values, and the program's names shielded.
    tbuiltins = _dict(t.pristine)
    imports = _TestImports(t.pre_modules, tbuiltins)
    if imports.real_import is not None:
        tbuiltins["__import__"] = imports.test_import
    pre_ids = {_id(m): name for name, (m, _) in t.pre_modules.items()}
    tns = {}
    for key, val in t.ns.items():
        if _type(val) is _Module and _id(val) in pre_ids:
            tns[key] = imports.private_module(pre_ids[_id(val)])
        elif t.pre_ns.get(key, tns) is val and _type(val) is not types.FunctionType:
            tns[key] = val  # setup's own (a constant, a typing alias ...)
        else:
            tns[key] = shield(val)  # the program's, or a setup helper it can reach
    sys.modules.pop(t.module.__name__, None)  # no raw route to the program's namespace
    tns["__builtins__"] = tbuiltins
    return tns


class _TestImports:
    # The test's imports of the modules loaded before the program ran (pre_modules).
    __slots__ = ("pre_modules", "tbuiltins", "real_import", "private")

    def __init__(self, pre_modules, tbuiltins):
        self.pre_modules, self.tbuiltins = pre_modules, tbuiltins
        self.real_import = tbuiltins.get("__import__")
        self.private = {}

    def private_module(self, name):
        # A module the test imports, as it was before the program ran, in an object of
        # the test's own: the program's later changes to the shared module (``random.
        # choice = ...``, even from inside a call under test) do not reach it, and
        # ``random`` is a fresh instance (its own generator state, seeded by the OS),
        # so the program can neither pick nor predict the test's random inputs.
        private = self.private
        if name in private:
            return private[name]
        orig, snap = self.pre_modules[name]
        mod = _Module(name)
        d = mod.__dict__
        if name == "random" and _random_path:
            d["__builtins__"] = self.tbuiltins
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

    def test_import(self, name, globals=None, locals=None, fromlist=(), level=0):
        mod = self.real_import(name, globals, locals, fromlist, level)
        if level == 0 and _type(name) is str:
            want = name if fromlist else name.partition(".")[0]
            if want in self.pre_modules:
                return self.private_module(want)
        return mod


def _keep(open_sites, k, j, code):
    # A hole's code waits in ``open_sites`` until its site is reached, then travels in ONE
    # event (a site evaluation is reported whole or not at all): [k, last j, [[j, code]]].
    # A site nested in a hole (a helper with asserts) opens an entry of its own.
    if open_sites and open_sites[-1][0] == k and j > open_sites[-1][1]:
        top = open_sites[-1]
        top[1] = j
        top[2].append([j, code])
    else:
        open_sites.append([k, j, [[j, code]]])


def _site_hooks(send, plus_sites):
    """The test's hooks, reporting through ``send``, and the counts of the arms entered.

    ``(__sage_v__, __sage_a__, __sage_c__, __sage_b__, __sage_e__, arms)``: the values of its
    assertions' holes, each site reached, each call statement, each ``if``/``while`` condition
    (a site whose values the judge evaluates; the hook returns the truth the test branches
    on), each counted arm entered (``arms``, sent with the end of the test). Closures, as they
    always were: what the program can read of them (``send`` among their cells) is what
    docs/reference/verifiers.md's forger reads.
    """
    open_sites = []
    arms = {}

    def value(k, j, v):
        # a hole's value: kept for the judge (who decides), returned as plain builtins
        guard = v if _type(v) is Guard else None
        if guard is not None:  # the program's object: the judge sees it as is
            v = raw(guard)
        if k in plus_sites:  # a huge output goes as its digest; the test drops it
            try:
                code, copy = plus_code(v, v is shielded[0] and v is not None)
            except (TypeError, ValueError):  # not plain: read below, as any value
                code, copy = None, None
            if code is not None:
                _keep(open_sites, k, j, code)
                return None
            if copy is not None:
                v = shielded[0] = copy  # plain already: not copied again below
        try:
            # what shield has just built is plain already; if the test has since put
            # something else in it, enc (exact types only) fails and the hole with it
            p = v if v is shielded[0] and v is not None else plain(v)
        except (TypeError, ValueError):
            code = ["?", type_name(v), truth(v)]
            if guard is not None:
                _keep(open_sites, k, j, code)
                return guard
            if _type(v) in ITERABLES:  # builtin iterators and views: their items
                try:
                    items = []
                    for x in v:
                        items.append(enc(plain(x)))
                        if len(items) > MAX_ITEMS:
                            raise ValueError("too many items")
                    code += [items, hasattr(_type(v), "__len__")]
                    v = ITERABLES[_type(v)](items, v)
                except (TypeError, ValueError):
                    code = code[:3]
            _keep(open_sites, k, j, code)
            return v
        except BaseException as exc:
            _keep(open_sites, k, j, None)
            send(ev="a", k=k, v=open_sites.pop()[2], bad=describe(exc)["msg"])
            raise AssertionError(f"assertion {k}: unreadable value") from None
        try:
            _keep(open_sites, k, j, enc(p))
        except BaseException:
            _keep(open_sites, k, j, None)
        return p

    def reached(k, result, check=True):
        values = open_sites.pop()[2] if open_sites and open_sites[-1][0] == k else []
        send(ev="a", k=k, v=values)
        if check and truth(result) is not True:
            raise AssertionError(f"assertion {k} failed")

    def called(k, result):
        send(ev="a", k=k, v=[])
        return result

    def branch(k, result):
        values = open_sites.pop()[2] if open_sites and open_sites[-1][0] == k else []
        send(ev="a", k=k, v=values)
        return truth(result) is True

    def entered(a):
        arms[a] = arms.get(a, 0) + 1

    return value, reached, called, branch, entered, arms

"""The executor: run a program on inputs in the sandbox, under a pinned run or drawn variants.

The ground truth of AZR's tasks (Absolute Zero, arXiv 2505.03335, Sec. 3.2-3.3) is what a
code executor returns for ``o = p(i)``, never what a model claims. This module is that
executor:

* :func:`execute` runs ``f(*args)`` of a program for each argument tuple inside
  :func:`sage_env.sandbox.run` (one sandboxed process per call of :func:`execute`) and returns
  the ``repr`` of every output. Arguments travel into the sandbox as ``repr`` of host-parsed
  literals (:mod:`sage_env.verifiers.literals`) and are parsed there with
  :func:`ast.literal_eval`, so a model-written input never becomes code.
* :func:`validate_program` is AZR's proposal check (Sec. 3.3.3): the program parses, defines
  ``f``, keeps to the allow-list (:func:`~sage_env.verifiers.program_checks.program_refusal`),
  runs within the limits on every input, is deterministic (the stored run,
  :data:`STORED_RUN`, and five check runs whose hash seeds, time zones and :mod:`random` seeds
  are drawn per check (:func:`draw_check_variants`), each in an interpreter of its own, give
  the same values with exact types, :func:`~sage_env.verifiers.literals.runs_agree`; the
  stored run's outputs are kept), and its inputs and outputs are Python literals that
  round-trip (``literal_eval(repr(v)) == v``).
* :func:`recomputes` audits a stored task in a fresh interpreter; :func:`compute_answer` runs
  a zero-argument function under the proposal rules (math grounding).

The sandboxed process only ever reports a ``repr`` string; values are parsed and compared on
the host (:mod:`sage_env.verifiers.literals`). Behind the static checks, the runner refuses at
run time what leads to its own frames, objects and code (an audit hook: frame reads, ``gc``'s
object walks, tracing, ``ctypes``, reading or replacing the code of the runner's functions;
docs/reference/protocols/azr.md, "At run time"), keeps its results immutable and prints them
with ``repr``. AZR's answer checks, built on this executor,
are :mod:`sage_env.verifiers.answer_checks`; the static checks of a program's source
(:func:`~sage_env.verifiers.program_checks.program_refusal`,
:func:`~sage_env.verifiers.program_checks.defines_f`, ...) are
:mod:`sage_env.verifiers.program_checks`.
"""

from __future__ import annotations

import ast
import random
import secrets
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from sage_env import sandbox
from sage_env.verifiers.allow_list import AZR_BANNED_MODULES
from sage_env.verifiers.literals import (
    format_args,
    parse_args,
    parse_literal,
    round_trips,
    runs_agree,
    same_output,
)
from sage_env.verifiers.program_checks import MAX_LITERAL_CHARS, defines_f, program_refusal

TASK_HASH_SEED = 0
"""``PYTHONHASHSEED`` of every run whose output is stored or judged, so that any host
recomputes it (string hashing, and the iteration order of sets of strings, depend on it)."""


@dataclass(frozen=True)
class RunVariant:
    """The environment one sandboxed run of a program sees.

    Attributes:
        hash_seed: ``PYTHONHASHSEED`` of the run's interpreter (0 to 2**32 - 1).
        tz: The ``TZ`` environment variable (an IANA zone name).
        random_seed: The seed the runner gives :mod:`random` before the program loads.
        fresh: Run in an interpreter started for this run, not forked from a zygote (its
            own hash seed and address layout; forks of one zygote share both).
        layout: Heap layout of the run (ours, issue 46 item 5): with a nonzero value the
            runner keeps blocks of sizes and counts drawn from it allocated before the
            program loads, so the low bits of an address (``repr(object())``, which address
            space randomisation leaves alone and which tell a zygote's fork from a fresh
            interpreter, and one isolation level from another) vary from run to run. 0 (as
            in :data:`STORED_RUN`): :func:`execute` draws one from the host's entropy;
            :func:`stored_variant` draws a reproducible one for a checked stored run.
    """

    hash_seed: int
    tz: str
    random_seed: int
    fresh: bool = False
    layout: int = 0


STORED_RUN = RunVariant(TASK_HASH_SEED, "UTC", TASK_HASH_SEED, fresh=False)
"""The run whose outputs are stored and judged: hash seed :data:`TASK_HASH_SEED`, UTC,
:mod:`random` seeded with 0, forked from a zygote. Any host recomputes it."""

AUDIT_RUN = RunVariant(TASK_HASH_SEED, "UTC", TASK_HASH_SEED, fresh=True)
""":data:`STORED_RUN`'s seeds in an interpreter started for the run: what :func:`recomputes`
runs (under its ``hash_seed``), and what one check run of :func:`validate_program` runs too, so
that a value that differs only between a zygote's fork and a fresh interpreter under the
stored seeds is refused when it is proposed, not found out by a later audit."""

MEMORY_SLACK_PAGES = 4096
"""Pages (4 KiB) by which a run whose heap layout is drawn (:attr:`RunVariant.layout`) also
has its address-space limit lowered, drawn from 0 .. this - 1 (up to 16 MiB; ours, red team
2026-12-06). How much a program can still allocate (``bytes(n)`` until ``MemoryError``) told a
zygote's fork (at most 124,772 pages on one host) from a fresh interpreter (124,764); with the
drawn slack it varies by thousands of pages from run to run, so a value keyed on it is refused
by the determinism check."""

CHECK_TIME_ZONES: tuple[str, ...] = (
    "Pacific/Kiritimati", "America/St_Johns", "Asia/Kathmandu", "Pacific/Marquesas",
    "Australia/Eucla", "Pacific/Chatham", "Asia/Kolkata", "Asia/Tehran", "Australia/Adelaide",
    "Australia/Lord_Howe", "Pacific/Pago_Pago", "Etc/GMT+12", "America/Sao_Paulo",
    "Asia/Yangon", "Europe/Helsinki", "America/Los_Angeles",
)  # fmt: skip
"""Time zones a check run draws from: none is UTC, and their offsets differ (quarter and
half hours, both sides of the date line), so a program that reads the local time or date
sees another value than the stored run's."""

DETERMINISM_RUNS = 6
"""Default number of runs under drawn variants whose outputs must agree in
:func:`validate_program`: the stored run and 5 check runs (:func:`draw_check_variants`); one
run in the audit's configuration (:data:`AUDIT_RUN`) comes on top."""

CHECK_RUN_WORKERS = 5
"""Check runs of one check that run at the same time (:func:`execute_all`). Each is an
interpreter of its own, so peak memory is up to this times ``memory_mb``; 1 runs them one
after another. Five fresh interpreters took 0.67 s one after another and 0.27 s together on
a loaded 2-core host."""


def draw_check_variants(
    count: int, check_rng: random.Random | None = None
) -> tuple[RunVariant, ...]:
    """Draw the environments of ``count`` check runs, per check, from ``check_rng``.

    Each check run gets a hash seed drawn uniformly from 1 .. 2**32 - 1, a time zone from
    :data:`CHECK_TIME_ZONES` and a :mod:`random` seed from 0 .. 2**32 - 1, and runs in an
    interpreter started for it (``fresh``: its own address layout too). A program cannot
    know the draws: the generator lives in the trusted process. A check draws all its
    variants before its check runs start, so how far it moves the generator never depends on
    what those runs return.

    Args:
        count: Check runs to draw (0 or more).
        check_rng: The generator to draw from, e.g. the environment's ``check_rng``, which it
            derives from its reset seed (reproducible, and separate from the generator that
            draws tasks). ``None``: :class:`random.SystemRandom` (unpredictable, not
            reproducible).

    Returns:
        ``count`` :class:`RunVariant`, all ``fresh``.
    """
    rng = check_rng if check_rng is not None else random.SystemRandom()
    drawn = [
        (rng.randrange(1, 2**32), rng.choice(CHECK_TIME_ZONES), rng.randrange(2**32))
        for _ in range(max(0, int(count)))
    ]
    return tuple(
        RunVariant(hash_seed=h, tz=tz, random_seed=r, fresh=True, layout=_layout_of(r, 1))
        for h, tz, r in drawn
    )


def _layout_of(seed: int, salt: int) -> int:
    """A heap-layout draw (1 .. 2**32 - 1) derived from a drawn seed, with no extra draw."""
    return (int(seed) * 2654435761 + salt * 40503) % (2**32 - 1) + 1


def stored_variant(checks: Sequence[RunVariant]) -> RunVariant:
    """:data:`STORED_RUN` with a heap layout drawn for this check (from ``checks``' draws).

    The stored run's outputs are kept, so its hash seed, time zone and :mod:`random` seed
    stay pinned; its heap layout (:attr:`RunVariant.layout`) is drawn like the check runs',
    so the low bits of an address are no fingerprint of the stored run either (a program
    keyed on them returns its claim only in the stored run, or only on some hosts). With no
    check run it is :data:`STORED_RUN` itself.
    """
    if not checks:
        return STORED_RUN
    return replace(STORED_RUN, layout=_layout_of(checks[0].random_seed, 2))


def audit_variant(checks: Sequence[RunVariant]) -> RunVariant:
    """:data:`AUDIT_RUN` with a heap layout drawn for this check (from ``checks``' draws).

    The check run of :func:`validate_program` that runs as :func:`recomputes` does; its layout
    (and with it its memory slack) is drawn like the others', reproducibly.

    Raises:
        IndexError: ``checks`` is empty (with no check run there is no audit run either).
    """
    return replace(AUDIT_RUN, layout=_layout_of(checks[0].random_seed, 3))


@dataclass(frozen=True)
class Execution:
    """What one sandboxed run of ``f`` on several inputs returned.

    Attributes:
        status: ``"ok"`` when the program loaded and every call returned; ``"error"`` when a
            call raised (see ``errors``); otherwise the sandbox status (``"timeout"``,
            ``"memory"``, ``"syntax_error"``, ``"crashed"``, ``"blocked"``, ``"failed"``).
        outputs: ``repr`` of each call's return value, ``None`` where it raised.
        errors: ``"ExcType: message"`` of each call that raised, ``None`` where it returned.
        reason: Short explanation.
    """

    status: str
    outputs: tuple[str | None, ...] = ()
    errors: tuple[str | None, ...] = ()
    reason: str = ""


@dataclass
class Validation:
    """Outcome of :func:`validate_program`.

    Attributes:
        valid: Whether the program and its inputs make valid AZR tasks.
        reason: Why not (or ``"valid"``), at most 200 characters.
        check: The check that failed: ``"parse"``, ``"entry"``, ``"forbidden"``,
            ``"input"``, ``"run"``, ``"literal"``, ``"deterministic"``, or ``""``.
        inputs: Canonical ``repr`` of each argument tuple's arguments, comma-separated (what a
            solver is shown).
        outputs: ``repr`` of each output, as the executor computed it.
    """

    valid: bool
    reason: str
    check: str = ""
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)


_RUNNER = """\
import ast as _ast, contextlib as _cl, io as _io, random as _random
import sys as _sys, types as _types
_random.seed({seed!r})
if {layout!r}:
    # the heap layout of this run, drawn (ours): blocks of drawn sizes and count stay
    # allocated before the program loads, so an address's low bits (repr(object()),
    # repr(lambda: 0)) are no fingerprint of the run, the same in every fresh interpreter
    _r = _random.Random({layout!r})
    _PAD = [bytes(_r.randrange(0, 1024)) for _ in range(_r.randrange(256, 4096))]
    _PAD += [object() for _ in range(_r.randrange(256, 4096))]
    _PAD += [_r.random() for _ in range(_r.randrange(256, 4096))]
    # and its memory headroom, drawn too: the address-space limit lowered by up to
    # {slack_pages!r} pages, so how much a program can still allocate (a zygote's fork and a
    # fresh interpreter differ by a few pages) is no fingerprint of the run either
    _slack = _r.randrange({slack_pages!r}) * 4096
    import resource as _res
    _soft, _hard = _res.getrlimit(_res.RLIMIT_AS)
    if _soft != _res.RLIM_INFINITY and _slack:
        # hard and soft alike: a program cannot raise it back
        _soft = max(1 << 20, _soft - _slack)
        _res.setrlimit(_res.RLIMIT_AS, (_soft, _soft))
    del _r, _slack, _soft, _hard, _res
_PLAIN = (int, float, complex, str, bytes, bool, type(None))
def _plain(v, type=type, list=list, tuple=tuple, dict=dict, set=set, frozenset=frozenset,
           scalars=_PLAIN):
    # exact types, by identity: ``t in scalars`` would ask a metaclass's __eq__
    stack, seen = [v], 0
    while stack:
        x = stack.pop()
        seen += 1
        t = type(x)
        if seen > 100000:
            return False
        for s in scalars:
            if t is s:
                break
        else:
            if t is list or t is tuple or t is set or t is frozenset:
                stack.extend(x)
            elif t is dict:
                stack.extend(x.keys())
                stack.extend(x.values())
            else:
                return False
    return True
# what a program could use to reach this runner's frames, objects or code: refused once the
# program loads (an audit hook cannot be removed once added)
_REFUSED = frozenset((
    "sys._current_frames", "sys._current_exceptions", "sys.settrace", "sys.setprofile",
    "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.addaudithook",
))
def _hook(own, refused=_REFUSED, str=str, RuntimeError=RuntimeError):
    # own: this runner's functions, the hook's included, in a tuple the hook closes over
    def refuse(event, args):
        if event == "object.__getattr__":
            # the reads CPython audits: gi_frame, cr_frame, ag_frame, tb_frame lead to a
            # frame; __code__ is refused for this runner's own functions only (dataclasses
            # read a class's __init__.__code__)
            name = args[1]
            if name[-6:] == "_frame":
                raise RuntimeError("the sandbox refuses reading ." + name)
            for fn in own + (refuse,):
                if args[0] is fn:
                    raise RuntimeError("the sandbox refuses reading ." + name)
        elif event == "object.__setattr__" or event == "object.__delattr__":
            # a new __code__ or __defaults__ for the hook or the runner
            for fn in own + (refuse,):
                if args[0] is fn:
                    raise RuntimeError("the sandbox refuses changing ." + str(args[1]))
        elif event in refused or event[:7] == "ctypes.":
            raise RuntimeError("the sandbox refuses " + event)
    return refuse
def _load(code, ModuleType=_types.ModuleType, modules=_sys.modules, exec=exec):
    # a module of its own (``dataclasses`` looks the class's module up), loaded afresh for
    # every input so that no state a call leaves in the program carries to the next input
    mod = ModuleType("__azr_program__")
    modules[mod.__name__] = mod
    exec(code, mod.__dict__)
    return mod.__dict__
def _main(src={src!r}, texts={args!r}, entry={entry!r}, most={max_chars!r}, expr={expr!r},
          repr=repr, type=type, str=str, len=len, compile=compile, eval=eval, exec=exec,
          print=print,
          literal_eval=_ast.literal_eval, plain=_plain, load=_load, Exception=Exception):
    results = ()  # a tuple: what a call leaves behind cannot change an earlier result
    with _cl.redirect_stdout(_io.StringIO()), _cl.redirect_stderr(_io.StringIO()):
        # dont_inherit: the harness's ``from __future__`` flags are not the program's
        code = compile(src, "<program>", "exec", dont_inherit=True)
        # the same recursion budget however deep the harness called us (a zygote's fork and a
        # fresh interpreter differ by a few frames, which a depth-counting program would see)
        depth, frame = 0, _sys._getframe()
        while frame is not None:
            depth, frame = depth + 1, frame.f_back
        del frame
        _sys.setrecursionlimit(depth + 1000)
        _sys.addaudithook(_hook((_main, _plain, _load, _hook)))
        ns = load(code)
        fn = ns[entry]
        for n, text in enumerate(texts):
            try:
                if n:
                    ns = load(code)
                    fn = ns[entry]
                if expr:
                    # CRUXEval's rule: the input is evaluated in the program's namespace
                    exec("def _azr_collect(*a, **k):\\n    return a, k\\n", ns)
                    call = compile("_azr_collect(" + text + ")", "<input>", "eval")
                    args, kwargs = eval(call, ns)
                else:
                    args, kwargs = literal_eval(text), {{}}
                out = fn(*args, **kwargs)
                if not plain(out):
                    row = ("error", "OutputNotALiteral: " + type(out).__name__)
                else:
                    r = repr(out)
                    row = ("ok", r) if len(r) <= most else ("error", "OutputTooLong")
            except Exception as exc:
                row = ("error", (type(exc).__name__ + ": " + str(exc))[:200])
            results = results + (row,)
    # repr, not json: a module's state (json's encoder) is the program's to change
    print({nonce!r} + repr(results))
_main()
"""


def _run_variant(
    code: str, variant: RunVariant, timeout_s: float, memory_mb: int
) -> sandbox.SandboxResult:
    """Run ``code`` under ``variant``: on a zygote's fork, or in an interpreter of its own."""
    env = (("TZ", variant.tz),)
    if not variant.fresh:
        return sandbox.run(
            code, timeout_s=timeout_s, memory_mb=memory_mb, hash_seed=variant.hash_seed, env=env
        )
    cfg = sandbox.SandboxConfig(
        timeout_s=timeout_s, memory_mb=memory_mb, hash_seed=variant.hash_seed, env=env
    )
    with sandbox.SandboxPool(0, cfg, zygotes=False) as pool:
        return sandbox.run(code, pool=pool)


def execute(
    program: str,
    args_list: Sequence[tuple[Any, ...]],
    *,
    entry: str = "f",
    timeout_s: float = 5.0,
    memory_mb: int = 512,
    expressions: bool = False,
    variant: RunVariant = STORED_RUN,
) -> Execution:
    """Run ``entry(*args)`` of ``program`` for every argument tuple in one sandboxed process.

    A call whose return value is not made only of plain built-in types (``int``, ``float``,
    ``complex``, ``str``, ``bytes``, ``bool``, ``None``, ``list``, ``tuple``, ``set``,
    ``frozenset``, ``dict``; exact types, no subclasses) counts as raising
    ``OutputNotALiteral``, so no object can forge its ``repr``.

    Args:
        program: Python source defining ``entry`` (untrusted).
        args_list: Argument tuples, already parsed on the host (:func:`parse_args`); each is
            sent into the sandbox as its ``repr`` and re-parsed there with ``literal_eval``.
        entry: Name of the function to call.
        timeout_s: Wall-clock limit of the whole run, seconds.
        memory_mb: Memory limit, MiB.
        expressions: ``args_list`` holds argument-list *source text* that passed
            :func:`safe_input_expression`, evaluated in the program's namespace (CRUXEval-I).
        variant: The run's hash seed, time zone, :mod:`random` seed and interpreter:
            :data:`STORED_RUN` (the default) is the one whose outputs are stored and judged;
            check runs use :func:`draw_check_variants`, and :func:`recomputes` a fresh
            interpreter under another hash seed.

    Returns:
        An :class:`Execution`; never raises on untrusted input.
    """
    if not isinstance(program, str) or not program.strip():
        return Execution("syntax_error", reason="empty program")
    try:
        arg_texts = (
            [str(a) for a in args_list] if expressions else [repr(tuple(a)) for a in args_list]
        )
    except Exception as exc:  # a host-side value that cannot be printed
        return Execution("error", reason=f"unprintable input: {type(exc).__name__}")
    nonce = "@@AZR-" + secrets.token_hex(8) + "@@"
    code = _RUNNER.format(
        src=program,
        args=arg_texts,
        entry=entry,
        max_chars=MAX_LITERAL_CHARS,
        nonce=nonce,
        expr=bool(expressions),
        seed=int(variant.random_seed),
        # 0: a layout drawn here from the host's entropy, so that no run, stored or audit,
        # has a layout a program could be tuned to
        layout=int(variant.layout) or secrets.randbelow(2**32 - 1) + 1,
        slack_pages=MEMORY_SLACK_PAGES,
    )
    res = _run_variant(code, variant, timeout_s, memory_mb)
    if res.status != "passed":
        reason = res.reason
        if res.status == "failed" and "KeyError" in reason and repr(entry) in reason:
            reason = f"the program defines no function {entry!r}"
        return Execution(res.status, reason=reason)
    stdout = res.stdout.decode("utf-8", errors="replace")
    at = stdout.rfind(nonce)
    if at < 0:
        return Execution("crashed", reason="the run reported no result")
    try:
        rows = ast.literal_eval(stdout[at + len(nonce) :].strip().splitlines()[0])
        outputs = tuple(str(r[1]) if r[0] == "ok" else None for r in rows)
        errors = tuple(None if r[0] == "ok" else str(r[1]) for r in rows)
    except (ValueError, IndexError, TypeError, KeyError, SyntaxError, MemoryError, RecursionError):
        return Execution("crashed", reason="the run's result does not parse")
    if len(outputs) != len(arg_texts):
        return Execution("crashed", reason="the run reported the wrong number of results")
    status = "ok" if all(e is None for e in errors) else "error"
    first = next((e for e in errors if e is not None), "")
    return Execution(status, outputs, errors, first or "every call returned")


def validate_program(
    program: str,
    inputs: Sequence[str | tuple[Any, ...]],
    *,
    banned: Sequence[str] = AZR_BANNED_MODULES,
    entry: str = "f",
    timeout_s: float = 5.0,
    memory_mb: int = 512,
    determinism_runs: int = DETERMINISM_RUNS,
    check_rng: random.Random | None = None,
) -> Validation:
    """AZR's proposal check (arXiv 2505.03335, Sec. 3.3.3) of a program and its inputs.

    In order: the program parses and defines ``f``; it imports no module of ``banned``;
    every input is a comma-separated list of Python literals that round-trip; the program
    runs on every input within the limits without raising; every output round-trips as a
    Python literal; and ``determinism_runs`` runs return the same values as
    :func:`runs_agree` has it (exact types at every level). The first run is
    :data:`STORED_RUN`, whose outputs are kept (any host recomputes them); the others are
    check runs, each in an interpreter of its own under a hash seed, time zone and
    :mod:`random` seed drawn for this check from ``check_rng`` (:func:`draw_check_variants`),
    so a program cannot be tuned to them, and each calls the inputs in reverse order, so an
    output that depends on the calls before it (state the allowed modules keep across the
    per-input reloads) is refused too. With at least one check run, one more runs in the
    audit's configuration (:func:`audit_variant`: fresh, the stored seeds, inputs in order), so
    a value that tells the stored run's zygote fork from :func:`recomputes`' fresh interpreter
    is refused here, not stored and found out later. Every run's heap layout and memory
    headroom are drawn (:data:`MEMORY_SLACK_PAGES`). The check runs start only when the stored
    run passed, and run together (at most :data:`CHECK_RUN_WORKERS` at a time).

    Residual chance (ours): let a program's output depend on hidden entropy ``X`` that the
    check runs vary (string hashes, address layout, local time), and let ``p`` be the
    chance that a run under a random variant returns the stored run's value (``x0`` is
    fixed by the stored run's public seed, so a program may be tuned to it). The check runs
    draw independent variants, so the program passes with probability ``p ** (n - 1)`` for
    ``n = determinism_runs``; a value that is an injective function of ``k`` uniform bits has
    ``p = 2 ** -k`` and passes with ``2 ** (-k * (n - 1))``: 1/32 for one bit at ``n = 6``,
    on every try (with fixed seeds it was found once in about 32 tries and then passed
    every time). Not varied: the interpreter build and platform, and entropy that a fresh
    interpreter of the same build reproduces; see ``docs/reference/verifiers.md``.

    Args:
        program: Python source defining ``entry`` (untrusted).
        inputs: Argument lists as AZR writes them (``"1, 'a'"``), or parsed tuples.
        banned: Modules refused even if allowed.
        entry: The function to call.
        timeout_s: Wall-clock limit of each run, seconds.
        memory_mb: Memory limit of each run, MiB.
        determinism_runs: Runs under drawn variants whose outputs must agree, the stored
            one included (1: no check run); with 2 or more, the audit-configuration run
            comes on top (``determinism_runs + 1`` runs in all).
        check_rng: Where the check runs' variants are drawn from (the environment's
            ``check_rng``); ``None``: :class:`random.SystemRandom`.

    Returns:
        A :class:`Validation` with the canonical inputs and the executor's outputs; never
        raises on model output.
    """
    if not isinstance(program, str) or not program.strip():
        return Validation(False, "empty program", "parse")
    try:
        ast.parse(program)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        return Validation(False, f"program does not parse: {type(exc).__name__}", "parse")
    if not defines_f(program, entry):
        return Validation(False, f"program defines no top-level function {entry}", "entry")
    refusal = program_refusal(program, banned)
    if refusal:
        return Validation(False, f"program {refusal}", "forbidden")
    if not inputs:
        return Validation(False, "no input", "input")
    args_list = []
    for text in inputs:
        args = text if isinstance(text, tuple) else parse_args(text)
        if args is None or not all(round_trips(a) for a in args):
            return Validation(False, f"input is not a Python literal: {str(text)[:80]!r}", "input")
        args_list.append(args)
    checks = draw_check_variants(max(1, determinism_runs) - 1, check_rng)
    limits = {"entry": entry, "timeout_s": timeout_s, "memory_mb": memory_mb}
    stored_run = stored_variant(checks)
    stored = _run_values(execute(program, args_list, variant=stored_run, **limits))
    if isinstance(stored, Validation):
        return stored
    # the check runs call the inputs last to first: a value that carries over from one call to
    # the next (a module's state: decimal's context, an ABC's registry) then reaches other
    # calls, and the runs differ; stored in order, such a task's later outputs are not f(input).
    # One more runs as the audit does (in order, fresh, the stored seeds): a value that the
    # stored run's fork computes and a fresh interpreter under the same seeds does not
    jobs = [(args_list[::-1], v) for v in checks]
    in_order = [False] * len(jobs)
    if checks:
        jobs.append((args_list, audit_variant(checks)))
        in_order.append(True)
    for forward, ex in zip(in_order, _execute_each(program, jobs, **limits)):
        values = _run_values(ex)
        if isinstance(values, Validation):
            return values
        if not runs_agree(stored, values if forward else values[::-1]):
            return Validation(False, "program is not deterministic (runs differ)", "deterministic")
    canonical = [format_args(a) for a in args_list]
    return Validation(True, "valid", "", canonical, [repr(v) for v in stored])


def _run_values(ex: Execution) -> list[Any] | Validation:
    """A run's parsed outputs, or the :class:`Validation` that refuses the program."""
    if ex.status != "ok":
        return Validation(False, f"program does not run ({ex.status}): {ex.reason}", "run")
    values = []
    for out in ex.outputs:
        ok, value = parse_literal(out)
        if not ok or not round_trips(value):
            return Validation(False, f"output is not a Python literal: {str(out)[:80]}", "literal")
        values.append(value)
    return values


def execute_all(
    program: str,
    args_list: Sequence[tuple[Any, ...] | str],
    variants: Sequence[RunVariant],
    **kwargs: Any,
) -> list[Execution]:
    """:func:`execute` under each of ``variants``, at most :data:`CHECK_RUN_WORKERS` at a time.

    The check runs of one check, run together: each is an interpreter of its own, and their
    limits are CPU time (the wall clock only a backstop at several times that), so running
    them together changes no outcome, only the wall time. ``kwargs`` go to :func:`execute`.

    Returns:
        One :class:`Execution` per variant, in order; never raises on untrusted input.
    """
    return _execute_each(program, [(args_list, v) for v in variants], **kwargs)


def _execute_each(
    program: str, jobs: Sequence[tuple[Sequence[Any], RunVariant]], **kwargs: Any
) -> list[Execution]:
    """:func:`execute` of ``program`` on each ``(args_list, variant)`` of ``jobs``.

    At most :data:`CHECK_RUN_WORKERS` at a time; the results come in the order of ``jobs``.
    """
    if len(jobs) <= 1 or CHECK_RUN_WORKERS <= 1:
        return [execute(program, a, variant=v, **kwargs) for a, v in jobs]
    workers = min(len(jobs), CHECK_RUN_WORKERS)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sage-check-run") as pool:
        runs = pool.map(lambda job: execute(program, job[0], variant=job[1], **kwargs), jobs)
        return list(runs)


def recomputes(
    program: str,
    inputs: Sequence[str],
    outputs: Sequence[str],
    *,
    hash_seed: int,
    entry: str = "f",
    timeout_s: float = 5.0,
    memory_mb: int = 512,
) -> bool:
    """Whether a fresh interpreter under ``hash_seed`` computes the stored ``outputs`` again.

    The audit of a stored task (issue 33): every output, parsed, equals the stored one as
    :func:`values_equal` has it (a set's ``repr`` order may differ, its value may not).
    ``entry`` is the function to call: ``"answer"`` audits a math-grounding program
    (:func:`compute_answer`'s ``inputs`` are ``[""]``). Never raises on stored data; an input
    that does not parse fails the audit.
    """
    # "" is the canonical text of no argument (``format_args(())``, what compute_answer stores)
    args_list = [parse_args(text) if str(text).strip() else () for text in inputs]
    if not args_list or any(a is None for a in args_list) or len(outputs) != len(args_list):
        return False
    variant = replace(AUDIT_RUN, hash_seed=hash_seed)
    ex = execute(
        program, args_list, entry=entry, timeout_s=timeout_s, memory_mb=memory_mb, variant=variant
    )
    return ex.status == "ok" and all(same_output(a, b) for a, b in zip(ex.outputs, outputs))


def compute_answer(
    program: str,
    *,
    entry: str = "answer",
    timeout_s: float = 5.0,
    memory_mb: int = 512,
    determinism_runs: int = DETERMINISM_RUNS,
    check_rng: random.Random | None = None,
) -> Validation:
    """Run a zero-argument function ``entry()`` of ``program`` under the proposal rules.

    The math-grounding check (``math_grounding = "program"``, ours): the Challenger's program
    computes its task's answer. The same static checks as :func:`validate_program` apply (the
    program parses, defines ``entry``, uses only allowed modules and builtins), and the value
    must be a Python literal that every run returns alike, with exact types (``1``,
    ``1.0`` and ``True`` are three values), the check runs under variants drawn from
    ``check_rng`` (``None``: :class:`random.SystemRandom`).

    Returns:
        A :class:`Validation` whose ``outputs`` is ``[repr(value)]`` when valid; never raises
        on model output.
    """
    return validate_program(
        program,
        [()],
        entry=entry,
        timeout_s=timeout_s,
        memory_mb=memory_mb,
        determinism_runs=determinism_runs,
        check_rng=check_rng,
    )

"""Absolute Zero (AZR, arXiv 2505.03335) as its paper defines it (protocol ``"azr"``).

One round, on one of AZR's three modes (drawn uniformly from ``AZRConfig.modes``):

1. ``proposer_0`` proposes a task (Sec. 3.3.2). Deduction and abduction: a program ``f``
   and one input, conditioned on K reference triplets drawn from that mode's buffer.
   Induction: N inputs and a message for a program drawn from the deduction and abduction
   buffers.
2. The executor validates it (Sec. 3.3.3, :func:`~sage_env.verifiers.executor.validate_program`:
   parses, defines ``f``, no forbidden module, runs within the limits, deterministic over two
   runs, literal inputs and outputs) and computes the outputs. The ground truth is the
   executor's output, never the proposer's. A valid task joins its mode's buffer (the pool).
3. ``solver_0`` answers it ``k`` times (the Monte Carlo rollouts of Eq. 4); when the proposal
   is invalid, a task drawn from the mode's buffer instead, so the solver always trains.
   Answers are checked by running code (Sec. 3.3.4).
4. Rewards (Eq. 4-6): the solver earns 1 for a right answer (induction: all held-out outputs
   right); the proposer earns the learnability ``1 - acc`` when ``0 < acc < 1``, else 0.
   With ``format_penalty`` (default, as AZR trains) a response that is not passable earns
   -0.5 when well formatted and -1 when not (an invalid proposal whose blocks parse is
   "well formatted"). A valid proposal that the pool already holds (the same program up to
   names and dead code on the same input: :meth:`~sage_env.tasks.pool.TaskPool.duplicate_of`
   with ``near=False``) is refused and earns -1, as a reply that does not parse; a near
   duplicate (a pool program on a new input) is paid as AZR pays it and kept out of the
   buffer (``AZRConfig.pay_duplicates``; docs/reference/protocols/azr.md, Duplicates).

Buffers are the pool's ``exec`` tasks, seeded on the first round with AZR's identity triplet
and the bundled seed programs (:func:`sage_env.tasks.exec_tasks.load_exec_seeds`). Actions on
mode ``m`` publish ``infos[agent]["group"] = "exec/m"``, so TRR++ normalises per (mode, role)
as AZR's task-relative baselines do (Sec. 3.3.5).

``"azr-qa"`` (:mod:`sage_env.protocols.azr_qa`) is the older game: the learnability reward on
SAGE's math/code question format.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sage_env import rewards
from sage_env.protocols.base import Protocol, public
from sage_env.protocols.demonstrations import Demonstration
from sage_env.protocols.exec_demonstrations import (
    build_exec_demonstrations,
    exec_seeds,
    takes_one_argument,
)
from sage_env.protocols.registry import register_protocol
from sage_env.tasks import exec_tasks
from sage_env.tasks.exec_tasks import MODES, ExecSpec, exec_mode
from sage_env.text import parsing
from sage_env.verifiers import executor, literals
from sage_env.verifiers.allow_list import AZR_BANNED_MODULES

if TYPE_CHECKING:
    from sage_env.protocols.api import ProtocolEnv
    from sage_env.tasks.task import Task

learnability_reward = rewards.learnability_reward


@dataclass
class AZRConfig:
    """Settings of protocol ``"azr"`` (defaults: AZR's, arXiv 2505.03335 and its config).

    ``EnvConfig.protocol_config``; flags ``--env.protocol-config.*`` after ``--protocol azr``.
    """

    modes: tuple[str, ...] = MODES
    """Task types a round draws from (uniformly): ``deduction``, ``abduction``,
    ``induction``."""
    references: int = 6
    """K: reference triplets from the mode's buffer in the proposer's prompt (AZR's
    ``io_n`` = 6)."""
    reference_chars: int = exec_tasks.REFERENCE_CHARS
    """The reference snippets in the proposer's prompt are kept, in order, while their text
    fits in this many characters (the first always; 0: no limit). AZR's K = 6 snippets of the
    bundled seeds make a median prompt of 1,126 tokens (SmolLM2's tokenizer), over the 768 of
    ``TrainConfig.max_prompt_tokens``, and a prompt cut to its last tokens loses the system
    prompt; 1,000 characters keep 200 of 200 sampled prompts within it (median 577 tokens,
    3 references)."""
    induction_inputs: int = 10
    """N: inputs the induction proposer is asked for (AZR's ``num_inputs`` = 10); half of the
    valid ones are shown to the solver, the rest held out."""
    format_penalty: bool = True
    """AZR Eq. 6: -0.5 for a well-formatted response that is not passable, -1 for one with
    formatting errors. False: both earn 0 (rewards stay in [0, 1])."""
    banned_modules: tuple[str, ...] = AZR_BANNED_MODULES
    """Modules refused even if on the allow-list (AZR's ``banned_words`` plus Sec. 3.3.3's
    ``os``, ``sys``, ``shutil``, none of which is on it). A program imports only modules of
    ``allow_list.ALLOWED_MODULES``; the proposer's prompt names those not in this list,
    and a refusal that reaches one of these names it (``tempfile._os`` is ``'os'``)."""
    determinism_runs: int = executor.DETERMINISM_RUNS
    """Runs whose outputs must be equal (exact types): the stored run and check runs, each
    under a hash seed, generator seed and time zone drawn per check from ``env.check_rng``,
    in an interpreter of its own (:func:`~sage_env.verifiers.executor.draw_check_variants`).
    AZR Sec. 3.3.3 uses 2 runs; 6 (ours) let one bit of hash noise through 1 time in 32
    instead of 1 in 2."""
    seed_programs: bool = True
    """Seed the buffers with the bundled seed programs as well as the identity triplet."""
    pay_duplicates: bool = False
    """False (ours): a valid proposal that the pool already holds (``duplicate_of(task,
    near=False)``: the same program up to names, layout and dead code on the same input) is
    refused: it is not solved, not added, and earns what a reply with formatting errors
    earns (-1; 0 without ``format_penalty``), as ``sage`` and ``mae`` give a duplicate format score 0. A copy is a
    free, always-valid proposal, so it must earn less than an honest program that fails a
    check (-0.5). True: AZR's own rule (a valid duplicate is solved and paid its
    learnability, and kept out of the buffer)."""

    def __post_init__(self) -> None:
        self.modes = tuple(self.modes)
        self.banned_modules = tuple(self.banned_modules)
        bad = set(self.modes) - set(MODES)
        if bad or not self.modes:
            raise ValueError(f"modes must be a non-empty subset of {MODES}, got {self.modes!r}")
        if self.reference_chars < 0:
            raise ValueError(f"reference_chars must be >= 0, got {self.reference_chars}")
        if self.references < 1 or self.induction_inputs < 2 or self.determinism_runs < 1:
            raise ValueError(
                "need references >= 1, induction_inputs >= 2 and determinism_runs >= 1, got "
                f"{self.references}, {self.induction_inputs}, {self.determinism_runs}"
            )


@functools.lru_cache(maxsize=2)
def _seed_buffer(with_programs: bool) -> tuple[Task, ...]:
    tasks = exec_tasks.load_exec_seeds() if with_programs else exec_tasks.identity_tasks()
    return tuple(tasks)


def buffer(env: ProtocolEnv, mode: str, trainable: bool = False) -> list[Task]:
    """AZR's buffer D_mode: the pool's ``exec`` tasks of ``mode`` (``trainable``: a solver's)."""
    tasks = env.pool.trainable() if trainable else env.pool.tasks
    return [t for t in tasks if exec_mode(t) == mode]


def _as_mode(task: Task, mode: str) -> Task:
    """``task`` relabelled as ``mode`` (the induction proposer's view of a buffer program)."""
    spec = dict(task.meta.get("exec", {}))
    spec["mode"] = mode
    return dataclasses.replace(task, meta={**task.meta, "exec": spec})


def vet_exec_proposal(
    env: ProtocolEnv,
    mode: str,
    text: str,
    reference: Task,
    references: list[Task],
    settings: AZRConfig,
    protocol: str = "azr",
) -> tuple[bool, bool, str, Task | None, dict]:
    """Parse and validate an execution-task proposal (AZR Sec. 3.3.2-3.3.3).

    Deduction/abduction: the last ```` ```python ```` block is the program, the last
    ```` ```input ```` block its input. Induction: the program of ``reference``; the
    ```` ```input ```` blocks (at most ``settings.induction_inputs``; the distinct literal ones
    are kept, 2 needed) and the ```` ```message ```` block. The executor computes the outputs.

    Returns:
        ``(formatted, valid, reason, task or None, fields for infos)``; never raises on
        model output.
    """
    limits = {
        "banned": settings.banned_modules,
        "timeout_s": env.config.code_timeout_s,
        "memory_mb": env.config.code_memory_mb,
        "determinism_runs": settings.determinism_runs,
        "check_rng": env.check_rng,
    }
    parent = ",".join(t.task_id for t in references)
    meta = {"episode": env.episode, "protocol": protocol}
    if mode == "induction":
        program = ExecSpec.of(reference).program
        blocks = parsing.fenced(text, "input")[: settings.induction_inputs]
        message = (parsing.last_fenced(text, "message") or "")[:1000]
        fields: dict = {"inputs": blocks, "message": message}
        if not blocks:
            return False, False, "no ```input blocks", None, fields
        # the first block may be the environment's (exec_tasks.proposer_prefix): a reply that
        # adds no block of its own is not formatted, as a reply holding only the prefix is not
        prefix = exec_tasks.proposer_prefix("induction", reference)
        given = len(parsing.fenced(prefix, "input")) if text.startswith(prefix) else 0
        if len(blocks) <= given:
            return False, False, "no ```input block of its own", None, fields
        kept = literals.distinct_inputs(blocks)  # by value: ``1`` and ``True`` are one input
        if len(kept) < 2:
            return True, False, "fewer than 2 distinct literal inputs", None, fields
        check = executor.validate_program(program, kept, **limits)
        fields["validation"] = check.check or "valid"
        if not check.valid:
            return True, False, check.reason, None, fields
        task = exec_tasks.make_task(
            "induction",
            program,
            check.inputs,
            check.outputs,
            task_id=env.pool.new_id(),
            message=message,
            parent_id=parent,
            meta=meta,
        )
        return True, True, "valid", task, fields
    program = parsing.last_fenced(text, "python")
    given = parsing.last_fenced(text, "input")
    fields = {"program": program, "input": given}
    if program is None or given is None:
        return False, False, "needs a ```python block and an ```input block", None, fields
    check = executor.validate_program(program, [given], **limits)
    fields["validation"] = check.check or "valid"
    if not check.valid:
        return True, False, check.reason, None, fields
    fields["output"] = check.outputs[0]
    task = exec_tasks.make_task(
        mode,
        program,
        check.inputs,
        check.outputs,
        task_id=env.pool.new_id(),
        parent_id=parent,
        meta=meta,
    )
    return True, True, "valid", task, fields


def exec_references(
    env: ProtocolEnv, mode: str, k: int, reference_chars: int = 0
) -> tuple[Task, list[Task]]:
    """``(the proposer's task view, its reference tasks)`` for ``mode`` from the pool's buffers.

    Deduction/abduction: K tasks of the mode's buffer, less those the prompt would drop to
    stay within ``reference_chars`` (:func:`sage_env.tasks.exec_tasks.shown_references`), so that a
    proposal's ``parent_id`` names only the references its proposer saw. Induction: one
    program drawn from the deduction and abduction buffers, relabelled as induction (from their
    one-argument programs with ``EnvConfig.exec_induction_one_argument``, when there are any).
    """
    if mode == "induction":
        programs = buffer(env, "deduction") + buffer(env, "abduction")
        programs = programs or buffer(env, "induction")  # a pool of induction tasks only
        if env.config.exec_induction_one_argument:
            programs = [t for t in programs if takes_one_argument(t)] or programs
        ref = programs[env.rng.randrange(len(programs))]
        return _as_mode(ref, "induction"), [ref]
    pool = buffer(env, mode)
    refs = exec_tasks.shown_references(env.rng.sample(pool, min(k, len(pool))), reference_chars)
    return refs[0], refs


def exec_proposer_turn(env: ProtocolEnv, reference: Task) -> tuple[Task, list[Task], dict] | None:
    """The proposer's turn on an execution task, as the ``sage`` and ``mae`` challengers take it.

    Returns:
        ``(the proposer's task view, its reference tasks, the observation)`` when ``reference``
        is an ``exec`` task (AZR's proposer prompt for its mode, :class:`AZRConfig` defaults),
        else ``None`` (the protocol's own math/code prompt applies).
    """
    mode = exec_mode(reference)
    if mode is None:
        return None
    settings = AZRConfig()
    view, refs = exec_references(env, mode, settings.references, settings.reference_chars)
    obs = exec_tasks.proposer_prompt(
        mode, refs, settings.banned_modules, settings.induction_inputs, settings.reference_chars
    )
    return view, refs, obs


def vet_exec_challenge(
    env: ProtocolEnv, text: str, reference: Task, references: list[Task], protocol: str
) -> tuple[dict, dict, Task | None, float]:
    """Vet a challenger's execution-task proposal (:func:`vet_exec_proposal`, AZR defaults).

    A valid task the pool already holds (a copy of a reference snippet or seed, renamed or
    padded with dead code or not, a repeat, a near duplicate by
    :meth:`~sage_env.tasks.pool.TaskPool.duplicate_of`) is rejected with format score 0, as a
    duplicate math/code proposal is (:func:`~sage_env.protocols.base.propose`): the
    Challenger is not paid for a task that adds nothing. (The ``azr`` protocol refuses it
    too, with -1, unless ``AZRConfig.pay_duplicates``.)

    Returns:
        ``(parsed, check, task or None, f)``: ``parsed`` the fields for ``infos`` (mode,
        validity, reason, program, input...), ``check`` the verifier check
        (``{"status": "passed"|"failed", "reason": ...}``), the new task when valid (outputs
        computed by the executor), and the format score of a rejected proposal (0.5 when
        well-formed, else 0). Never raises on model output.
    """
    mode = exec_mode(reference) or "deduction"
    formatted, valid, reason, task, fields = vet_exec_proposal(
        env, mode, text, reference, references, AZRConfig(), protocol=protocol
    )
    duplicate = env.pool.duplicate_of(task) if task is not None else None
    if duplicate is not None:
        valid, reason, task = False, duplicate, None
    parsed = {"mode": mode, "valid": valid, "well_formed": formatted, "reason": reason, **fields}
    check = {"status": "passed" if valid else "failed", "reason": reason}
    return parsed, check, task, 0.5 if formatted and duplicate is None else 0.0


def exec_scripted_replies(kind: str, task: Task) -> list[str]:
    """Scripted replies on an ``exec`` task, best first.

    Kind ``"propose"``: a valid then an invalid proposal; ``"solve"``: a right then a wrong,
    well-formatted answer.
    """
    mode = exec_mode(task)
    if mode is None:
        return []
    spec = ExecSpec.of(task)
    if kind == "propose":
        if mode == "induction":
            inputs = list(dict.fromkeys(spec.inputs[:4]))
            blocks = "".join(f"```input\n{i}\n```\n" for i in inputs)
            return [blocks + "```message\nLook at the types.\n```", "I have no inputs."]
        valid = "```python\ndef f(a, b):\n    return [a * 2, b[::-1]]\n```\n```input\n3, 'abc'\n```"
        invalid = (
            "```python\nimport random\ndef f(a):\n    return random.random() + a\n```\n"
            "```input\n1\n```"
        )
        return [valid, invalid]
    if kind != "solve":
        return []
    if mode == "deduction":
        wrong = "'not the output'" if spec.outputs[0] != "'not the output'" else "0"
        return [f"```output\n{spec.outputs[0]}\n```", f"```output\n{wrong}\n```"]
    if mode == "abduction":
        return [f"```input\n{spec.inputs[0]}\n```", "```input\n'no such input'\n```"]
    return [
        f"```python\n{spec.program}\n```",
        "```python\ndef f(*args):\n    return 'not the output'\n```",
    ]


class ExecChallenger(Protocol):
    """Base of a protocol whose proposer also proposes execution tasks (``sage``, ``mae``).

    Gives :meth:`_parsed` (the proposal's fields for ``infos``: the exec fields of
    :func:`vet_exec_challenge`, else :func:`~sage_env.protocols.base.public` of the math/code
    proposal) and AZR's scripted replies on ``exec`` tasks. Subclasses set ``exec_parsed``
    and ``proposal`` when a round starts.
    """

    exec_parsed: dict | None = None
    proposal = None
    exec_refs: list[Task] = []  # noqa: RUF012 - replaced per round, never mutated

    def _proposer_observation(self, env: ProtocolEnv) -> dict:
        """The proposer's observation on ``self.reference`` (a seed drawn this round).

        On an ``exec`` reference: AZR's proposer prompt (:func:`exec_proposer_turn`), and
        ``self.reference`` / ``self.exec_refs`` become its task view and references;
        otherwise the SAGE challenger prompt.
        """
        from sage_env.text import prompts

        turn = exec_proposer_turn(env, self.reference)
        if turn is None:
            self.exec_refs = []
            return prompts.challenger(self.reference, env.config.math_grounding)
        self.reference, self.exec_refs, obs = turn
        return obs

    def _parsed(self) -> dict:
        return self.exec_parsed if self.exec_parsed is not None else public(self.proposal)

    def scripted_actions(self, phase: str, observation: dict, task: Task | None) -> list[str]:
        """As :meth:`Protocol.scripted_actions`; AZR's scripted replies on execution tasks."""
        kind = self.phase_kind(phase, observation)
        if task is not None and task.domain == "exec" and kind in ("propose", "solve"):
            return exec_scripted_replies(kind, task)
        return super().scripted_actions(phase, observation, task)


@register_protocol("azr")
class AZRProtocol(Protocol):
    """Proposer/solver self-play on execution tasks (deduction, abduction, induction)."""

    name = "azr"
    agents = ("proposer_0", "solver_0")
    domains = ("exec",)
    config_cls = AZRConfig
    phases = {"propose": "propose", "solve": "solve"}

    def start(self, env: ProtocolEnv) -> None:
        """Seed the buffers when empty, draw a mode and give the proposer its prompt."""
        cfg: AZRConfig = env.config.protocol_config
        if not any(t.domain == "exec" for t in env.pool.tasks):
            for task in _seed_buffer(cfg.seed_programs):
                env.pool.add(task)
        self.mode = env.rng.choice(list(cfg.modes))
        self.valid = False
        self.proposal: dict = {}
        self.task: Task | None = None
        self.scores: list[float] = []
        self.judging = False  # the solver's attempts only judge the task (frozen pool)
        self.reference, self.references = exec_references(
            env, self.mode, cfg.references, cfg.reference_chars
        )
        obs = exec_tasks.proposer_prompt(
            self.mode,
            self.references,
            cfg.banned_modules,
            cfg.induction_inputs,
            cfg.reference_chars,
        )
        env.select("proposer_0", "propose", self.reference, obs)

    def prefix(self, phase: str, task: Task) -> str:
        """The opening of the answer block the mode asks for (``````python``, ``````input``...)."""
        mode = exec_mode(task) or "deduction"
        if phase == "propose":
            return exec_tasks.proposer_prefix(mode, task)
        return exec_tasks.SOLVER_PREFIX[mode]

    # ------------------------------------------------------------------ proposer
    def _vet(self, env: ProtocolEnv, text: str) -> tuple[bool, bool, str, Task | None, dict]:
        """``(formatted, valid, reason, task, fields)`` of a proposal."""
        return vet_exec_proposal(
            env, self.mode, text, self.reference, self.references, env.config.protocol_config
        )

    def on_propose(self, env: ProtocolEnv, text: str) -> None:
        """Validate the proposal with the executor; the solver attempts it (or a buffer task).

        A valid copy of a pool task (the same program after normalisation, on the same input)
        is refused unless ``AZRConfig.pay_duplicates``. A near duplicate (a pool program on a
        new input) is a new task to solve, paid as AZR pays it and kept out of the buffer.
        """
        cfg: AZRConfig = env.config.protocol_config
        formatted, self.valid, reason, task, fields = self._vet(env, text)
        duplicate = None
        if self.valid and not cfg.pay_duplicates:
            duplicate = env.pool.duplicate_of(task, near=False)
            if duplicate is not None:
                self.valid, reason, task = False, duplicate, None
        self.proposal = {
            "mode": self.mode,
            "valid": self.valid,
            "formatted": formatted,
            "well_formed": formatted,
            "reason": reason,
            **fields,
        }
        if self.valid:
            added = env.pool.add(task)
            self.proposal["added_to_buffer"] = added
            self.task = task
            self.judging = env.pool.frozen
        else:
            scored_as_formatted = formatted and duplicate is None  # a copy earns -1
            env.deliver(
                "proposer_0",
                *rewards.azr_reward(0.0, False, scored_as_formatted, cfg.format_penalty),
                mode=self.mode,
                valid=False,
                reason=reason,
                parsed=self.proposal,
            )
            self.task = None
        self._start_solve(env)

    def _start_solve(self, env: ProtocolEnv) -> None:
        """k solver attempts at ``self.task``, or at a trainable buffer task when it is None."""
        if self.task is None:
            pool = buffer(env, self.mode, trainable=True)
            self.task = pool[env.rng.randrange(len(pool))]
        self.scores = []
        env.select(
            "solver_0",
            "solve",
            self.task,
            exec_tasks.solver_prompt(self.task),
            repeats=env.config.solver_samples,
        )

    # -------------------------------------------------------------------- solver
    def on_solve(self, env: ProtocolEnv, text: str) -> None:
        """One attempt, checked by running code; after k, pay the proposer's learnability."""
        # a frozen pool's k attempts at a new task only judge it (train=False); the solver
        # then answers a seed task of the mode k times, and those train
        cfg: AZRConfig = env.config.protocol_config
        s, f, verdict = env.verify(self.task, text)
        self.scores.append(s)
        env.deliver(
            "solver_0",
            *rewards.azr_reward(s, s > 0.0, f > 0.0, cfg.format_penalty),
            mode=self.mode,
            verdict=verdict,
            **({"train": False} if self.judging else {}),
        )
        if len(self.scores) < env.config.solver_samples:
            return
        if self.valid:
            acc = sum(self.scores) / len(self.scores)
            reward, terms = rewards.azr_reward(
                rewards.learnability_reward(acc), True, True, cfg.format_penalty
            )
            env.deliver(
                "proposer_0",
                reward,
                {**terms, "acc": acc},
                mode=self.mode,
                valid=True,
                reason="valid",
                parsed=self.proposal,
                new_task_id=self.task.task_id,
            )
            if self.judging:  # frozen pool: the solver trains on a seed task instead
                self.valid, self.judging, self.task = False, False, None
                self._start_solve(env)
                return
        env.finish()

    # ---------------------------------------------------------------- scripted
    def demonstrations(
        self,
        domains: tuple[str, ...] | list[str],
        seeds: list[Task],
        n: int,
        mix: dict[str, float],
        seed: int = 0,
        exclude: list[Task] | None = None,
        math_grounding: str = "claim",
        domain_weights: dict[str, float] | None = None,
    ) -> list[Demonstration]:
        """AZR's warm-up: execution tasks only, in AZR's prompts, whatever ``domains`` says.

        Built by :func:`sage_env.protocols.exec_demonstrations.build_exec_demonstrations`. AZR
        has no critic and no planner, so their shares in ``mix`` go to the solver;
        ``math_grounding`` and ``domain_weights`` do not apply.
        """
        moved = {
            "challenger": mix.get("challenger", 0.0),
            "solver": sum(v for r, v in mix.items() if r != "challenger"),
        }
        excluded = {t.task_id for t in exclude or []}
        return build_exec_demonstrations(
            exec_seeds(seeds),
            n,
            moved,
            seed=seed,
            solver_prompt=exec_tasks.solver_prompt,
            exclude_ids=excluded,
        )

    def scripted_actions(self, phase: str, observation: dict, task: Task | None) -> list[str]:
        """A valid then an invalid proposal; a right then a wrong answer (per mode)."""
        if task is None:
            return []
        return exec_scripted_replies("propose" if phase == "propose" else "solve", task)

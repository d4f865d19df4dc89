"""What a run logs as it goes: per-step metrics (JSONL + a tracker) and round transcripts."""

from __future__ import annotations

import json
import os
import resource
from collections import defaultdict
from pathlib import Path
from typing import Any

from learners.types import RolloutResult, Transition

REPORT_TO = ("tensorboard", "wandb", "none")
"""Trackers of ``TrainConfig.report_to`` (``metrics.jsonl`` is written with every one)."""


def check_report_to(report_to: str) -> None:
    """The one check of a ``report_to`` value (``TrainConfig`` and :class:`MetricsLog`).

    Raises:
        ValueError: unless it is one of :data:`REPORT_TO`.
    """
    if report_to not in REPORT_TO:
        raise ValueError(f"report_to must be one of {REPORT_TO}, got {report_to!r}")


def rollout_metrics(result: RolloutResult, roles: list[str]) -> dict[str, float]:
    """Per-role mean reward and counts, proposal validity/acceptance, solver accuracy.

    Args:
        result: One step's rollouts.
        roles: Role names of the protocol (``reward/<role>`` is None when a role did not act).
    """
    by_role: dict[str, list[Transition]] = defaultdict(list)
    for t in result.transitions:
        by_role[t.role].append(t)
    m: dict[str, float] = {}
    for role in roles:
        ts = by_role.get(role, [])
        rs = [t.reward for t in ts]
        mean = sum(rs) / len(rs) if rs else None
        m[f"reward/{role}"] = mean
        m[f"reward_std/{role}"] = (
            (sum((r - mean) ** 2 for r in rs) / len(rs)) ** 0.5 if rs else None
        )
        m[f"count/{role}"] = float(len(rs))
        m[f"truncated/{role}"] = sum(t.truncated for t in ts) / len(ts) if ts else None
        reviews = [t.outcome.review for t in ts if t.outcome and t.outcome.review]
        if reviews:  # the reviewing role (critic, judge): share of scores that parse
            m[f"{role}/format_rate"] = sum(r.raw_score is not None for r in reviews) / len(
                reviews
            )
    for role in roles:  # the proposing role's outcomes carry a parse
        props = [t for t in proposals(result) if t.role == role]
        if props:
            parses = [t.outcome.parse for t in props]
            m[f"{role}/parse_rate"] = sum(bool(p.well_formed) for p in parses) / len(props)
            m[f"{role}/valid_rate"] = sum(bool(p.valid) for p in parses) / len(props)
            m[f"{role}/accept_rate"] = sum(accepted(t) for t in props) / len(props)
            m.update(math_grounding_metrics(role, props))
            probed = [t for t in props if t.outcome.terms.get("d") is not None]
            if probed:  # accepted and probed: solved at least once is evidence it is well posed
                m[f"{role}/accepted_solved_rate"] = sum(
                    t.outcome.terms["d"] < 1.0 for t in probed
                ) / len(probed)
    solves = [
        (t.outcome.verdict or {}).get("score", 0.0) or 0.0 if t.outcome else 0.0
        for t in result.transitions
        if t.phase == "solve"
    ]
    if solves:
        m["solver/accuracy"] = sum(solves) / len(solves)
    m["rollout/tokens"] = float(result.tokens)
    m["rollout/tokens_per_s"] = result.tokens / max(result.generate_seconds, 1e-9)
    m["time/generate_s"] = result.generate_seconds
    if result.calls:
        m["rollout/rows_per_call"] = result.rows / result.calls
        m["rollout/generate_calls"] = float(result.calls)
    m["time/env_s"] = result.env_seconds
    return m


def proposals(result: RolloutResult) -> list[Transition]:
    """The step's proposing actions: those whose outcome carries a :class:`~sage_env.Parse`."""
    return [t for t in result.transitions if t.outcome is not None and t.outcome.parse]


def accepted(t: Transition) -> bool:
    """Whether a proposal was accepted: the critic gate's ``accepted`` (SAGE, MAE), else
    AZR's validity (its ``parse.valid``)."""
    decision = t.outcome.decision
    if decision is not None and decision.accepted is not None:
        return bool(decision.accepted)
    return bool(t.outcome.parse.valid)


GENERATED_ID = "gen/"
"""The id prefix of generated tasks (:meth:`sage_env.tasks.pool.TaskPool.new_id`)."""


def pool_dynamics_metrics(result: RolloutResult, pool: Any) -> dict[str, float]:
    """What the step's proposals did to the pool, and how much the solver trained on them.

    Counts over the step (issue 34, item 4; ``docs/guide/training.md``, "Pool dynamics"):

    - ``pool/proposals``, ``pool/valid``, ``pool/accepted``: proposing actions (those with
      an ``Outcome.parse``: :func:`proposals`), the valid ones, the accepted ones
      (:func:`accepted`);
    - ``pool/accepted_<kind>``: accepted tasks per kind, the execution mode (``deduction``,
      ``abduction``, ``induction``) or the domain (``math``, ``code``);
    - ``pool/accepted_difficulty``: mean over accepted proposals of the difficulty the
      protocol paid, ``d`` (SAGE, MAE: the ``difficulty_rule`` of the mean probe or judge
      score) or ``1 - acc`` (AZR: the solver's pass rate on the new task);
    - ``pool/accepted_novelty``: mean over accepted deduction and abduction tasks of the
      normalised-program distance to the nearest seed program
      (:func:`sage_env.tasks.novelty.nearest_program_distance`; 0: a renamed seed, 1: nothing in
      common). Induction is left out: its program is a buffer program by AZR's design (what
      is new is the inputs);
    - ``solver/trained_rows``, ``solver/judging_rows``: solver actions that train, and those
      that only judged a new task (frozen pool, ``Transition.trains`` False);
      ``solver/generated_share``: the share of the trained ones whose task was generated
      (its id starts with :data:`GENERATED_ID`).

    Args:
        result: One step's rollouts.
        pool: The run's :class:`~sage_env.tasks.pool.TaskPool` after the step.

    Returns:
        The metrics above (the proposal ones only when some action proposed).
    """
    from sage_env.tasks.novelty import nearest_program_distance

    m: dict[str, float] = {}
    props = proposals(result)
    by_id = {t.task_id: t for t in pool.tasks}
    if props:
        taken = [t for t in props if accepted(t)]
        m["pool/proposals"] = float(len(props))
        m["pool/valid"] = float(sum(bool(t.outcome.parse.valid) for t in props))
        m["pool/accepted"] = float(len(taken))
        diffs, novelty = [], []
        seeds = [
            x.reference_solution or ""
            for x in pool.tasks
            if x.domain == "exec" and x.source != "generated"
        ]
        for t in taken:
            kind = t.outcome.parse.mode or t.domain
            m[f"pool/accepted_{kind}"] = m.get(f"pool/accepted_{kind}", 0.0) + 1.0
            terms = t.outcome.terms
            if isinstance(terms.get("d"), (int, float)):
                diffs.append(float(terms["d"]))
            elif isinstance(terms.get("acc"), (int, float)):
                diffs.append(1.0 - float(terms["acc"]))
            decision = t.outcome.decision
            task = by_id.get(str(decision.new_task_id or "")) if decision else None
            program = t.outcome.parse.program
            if not isinstance(program, str) and task is not None and task.domain == "exec":
                program = task.reference_solution
            if isinstance(program, str) and seeds and kind != "induction":
                novelty.append(nearest_program_distance(program, seeds))
        if diffs:
            m["pool/accepted_difficulty"] = sum(diffs) / len(diffs)
        if novelty:
            m["pool/accepted_novelty"] = sum(novelty) / len(novelty)
    solver = [t for t in result.transitions if t.role == "solver" and t.phase in ("solve", "probe")]
    trained = [t for t in solver if t.trains]
    if solver:
        m["solver/trained_rows"] = float(len(trained))
        m["solver/judging_rows"] = float(len(solver) - len(trained))
    if trained:
        generated = [t for t in trained if t.task_id.startswith(GENERATED_ID)]
        m["solver/generated_share"] = len(generated) / len(trained)
    return m


def math_grounding_metrics(role: str, proposals: list[Transition]) -> dict[str, float]:
    """How many math proposals the answer-program check refused, and why.

    ``<role>/math_refused_disagree``: the program ran but its value disagreed with the stated
    answer; ``<role>/math_refused_program``: no program, or one that failed (refused by the
    static checks, raised, timed out, was not deterministic, returned no math value);
    ``<role>/math_grounded``: proposals whose program agreed. Counts over the step, from
    ``Outcome.verifier_check["grounding"]`` (:mod:`sage_env.verifiers.math_grounding`);
    empty when no proposal of the step reached the check (``math_grounding="claim"``, or
    none parsed).
    """
    checks = [t.outcome.verifier_check for t in proposals if t.outcome is not None]
    verdicts = [
        c["grounding"].get("verdict")
        for c in checks
        if isinstance(c, dict) and isinstance(c.get("grounding"), dict)
    ]
    if not verdicts:
        return {}
    return {
        f"{role}/math_refused_disagree": float(verdicts.count("disagree")),
        f"{role}/math_refused_program": float(
            verdicts.count("no_program") + verdicts.count("program_failed")
        ),
        f"{role}/math_grounded": float(verdicts.count("agree")),
    }


GAP_KEYS = ("logprob_gap_mean", "logprob_gap_max")
"""Update metrics logged as ``rollout/logprob_gap*`` (:func:`logprob_gap_metrics`), not again
as ``learner/*``."""


def logprob_gap_metrics(update: dict[str, float]) -> dict[str, float]:
    """``rollout/logprob_gap`` (mean) and ``rollout/logprob_gap_max`` from a learner's update.

    The absolute difference, nats per token, between the rollout engine's sampling log-probs
    and the learner's log-probs of the same tokens under the same weights (as veRL and TRL
    log it); empty when the learner did not measure it.
    """
    if "logprob_gap_mean" not in update:
        return {}
    return {
        "rollout/logprob_gap": float(update["logprob_gap_mean"]),
        "rollout/logprob_gap_max": float(update["logprob_gap_max"]),
    }


class MetricsLog:
    """Appends metric rows to ``out/metrics.jsonl`` and sends their numbers to a tracker.

    ``metrics.jsonl`` is always written (one JSON object per row, fsynced): it is the ground
    truth the plots, the resume logic and the tests read. The numeric values of each row also
    go through accelerate's tracking API (``Accelerator(log_with=...)``, ``init_trackers``,
    ``log``; accelerate logs on the main process only) to TensorBoard (``out/tb``) or Weights
    & Biases (run files in ``out/wandb``), or nowhere with ``report_to="none"``.

    Args:
        out: Run folder (exists).
        report_to: ``"tensorboard"``, ``"wandb"`` or ``"none"`` (``TrainConfig.report_to``).
        accelerator: The run's ``Accelerator`` made with ``log_with=report_to`` and
            ``project_dir=out`` (:func:`learners.distributed.collectives.init`); made here when
            ``None`` and a tracker is asked for. Unused with ``"none"``.
        config: The run's resolved config as plain data, stored as the W&B run config
            (TensorBoard gets none: it is in ``out/config.yaml``).
        purge_step: TensorBoard hides the events at this step and later that an earlier,
            killed run left in ``out/tb`` (a resumed run passes its first step).

    Raises:
        ValueError: on an unknown ``report_to``.
    """

    def __init__(
        self,
        out: Path,
        report_to: str = "tensorboard",
        accelerator: Any = None,
        config: dict[str, Any] | None = None,
        purge_step: int | None = None,
    ) -> None:
        check_report_to(report_to)
        self.path = out / "metrics.jsonl"
        self.report_to = report_to
        self.accelerator = None
        if report_to == "none":
            return
        if accelerator is None:
            from learners.distributed import collectives

            accelerator = collectives.init("cpu", log_with=report_to, project_dir=str(out))
        if report_to == "tensorboard":
            # accelerate writes to project_dir/<project name>: the name "tb" gives out/tb
            kwargs: dict[str, Any] = {"purge_step": purge_step} if purge_step else {}
            accelerator.init_trackers("tb", init_kwargs={"tensorboard": kwargs})
        else:
            project = os.environ.get("WANDB_PROJECT", "sage-env")
            name = os.environ.get("WANDB_NAME", out.resolve().name)
            init = {"wandb": {"dir": str(out), "name": name}}
            accelerator.init_trackers(project, config=config, init_kwargs=init)
        self.accelerator = accelerator

    def write(self, row: dict[str, Any]) -> None:
        """Log one row; ``row["step"]`` is its step, numeric values go to the tracker."""
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        if self.accelerator is not None:
            scalars = {k: v for k, v in row.items() if k != "step" and isinstance(v, (int, float))}
            self.accelerator.log(scalars, step=row["step"])

    def close(self) -> None:
        """Finish the tracker (close the TensorBoard writer, end the W&B run); idempotent."""
        if self.accelerator is not None:
            for tracker in self.accelerator.trackers:
                tracker.finish()
            self.accelerator.trackers = []
            self.accelerator = None


def peak_rss_mb() -> float:
    """Peak resident memory of this process, MiB (Linux ``ru_maxrss`` is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def write_transcripts(out: Path, step: int, result: RolloutResult, n: int) -> None:
    """Write a step's rounds: the first ``n`` as text, every one as JSON.

    ``out/transcripts/step_N.txt`` holds the first ``n`` round transcripts as the environment
    renders them (none when ``n`` is 0); ``out/transcripts/step_N.jsonl`` holds every round
    of the step as structured data (:func:`round_records`), which ``sage-env report`` reads.
    """
    folder = out / "transcripts"
    folder.mkdir(parents=True, exist_ok=True)
    write_rounds(folder / f"step_{step:06d}.jsonl", step, result)
    if n <= 0:
        return
    parts = []
    for i, text in enumerate(result.transcripts[:n]):
        parts.append(f"######## step {step} round {i} ########\n{text}")
    (folder / f"step_{step:06d}.txt").write_text("\n".join(parts), encoding="utf-8")


OBSERVATION_CHARS = 8000
"""Longest observation kept per action in ``transcripts/step_N.jsonl`` (the rest is cut)."""


def round_records(step: int, result: RolloutResult) -> list[dict[str, Any]]:
    """One JSON-safe record per round of a step, for ``transcripts/step_N.jsonl``.

    A record is ``{"step", "round", "actions": [...]}``; each action, in the order played,
    holds ``agent``, ``role``, ``phase``, ``task_id`` (the reference seed for a proposal),
    ``domain``, ``observation`` (the user message, at most :data:`OBSERVATION_CHARS`; left
    out when it repeats the agent's previous observation, as the k solver attempts do),
    ``prefix``, ``action`` (prefix + completion), ``reward``, ``tokens``, ``truncated`` and
    ``details``: ``infos[agent]["last"]`` as :meth:`sage_env.outcome.Outcome.to_dict` writes
    it (parsed fields, verdict, gates, reward ``terms``,
    ``accepted`` / ``new_task_id`` for a proposal).
    """
    rounds: dict[int, list[Transition]] = defaultdict(list)
    for t in result.transitions:
        rounds[t.env_index].append(t)
    records = []
    for index in sorted(rounds):
        actions, seen = [], {}
        for t in rounds[index]:
            a: dict[str, Any] = {
                "agent": t.agent,
                "role": t.role,
                "phase": t.phase,
                "task_id": t.task_id,
                "domain": t.domain,
            }
            obs = t.observation[:OBSERVATION_CHARS]
            if seen.get(t.agent) != obs:
                a["observation"] = obs
                seen[t.agent] = obs
            a.update(
                prefix=t.prefix,
                action=t.text,
                reward=t.reward,
                tokens=len(t.completion_ids),
                truncated=t.truncated,
                details=t.outcome.to_dict() if t.outcome is not None else {},
            )
            actions.append(a)
        records.append({"step": step, "round": index, "actions": actions})
    return records


def write_rounds(path: Path, step: int, result: RolloutResult) -> None:
    """Write :func:`round_records` as JSON Lines to ``path`` (temp file, then rename)."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for record in round_records(step, result):
            fh.write(json.dumps(record, ensure_ascii=False, default=_jsonable) + "\n")
    os.replace(tmp, path)


def _jsonable(value: Any) -> Any:
    """JSON fallback for ``infos`` values that are not plain data (tuples pass already)."""
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return str(value)

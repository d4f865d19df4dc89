"""The TRL door: train a solver with TRL's ``GRPOTrainer`` on our pool, scored by our verifiers.

A TRL user brings a model and a ``GRPOTrainer``; this module brings the rest of the solver's
side of the game:

- :func:`load_tasks`: the tasks, the 500 bundled seeds or a pool JSONL (seeds plus the tasks a
  SAGE run made and accepted: ``TaskPool.save``), optionally a subset of domains;
- :func:`solver_rows` / :func:`solver_dataset`: one row per task, ``prompt`` the environment's
  solver observation (:func:`sage_env.text.prompts.solver`, AZR's
  :func:`~sage_env.tasks.exec_tasks.solver_prompt` on ``exec`` tasks) as chat messages, plus
  ``task_id``, ``domain`` and ``prefix`` (the response prefix the environment gives the
  phase). With a ``tokenizer`` the prompt is the rendered chat template followed by the
  prefix (TRL's standard, non-chat format): the model then continues after the environment's
  ```` ```python ```` exactly as our learners do;
- :class:`SolverReward`: the reward function, a plain callable
  ``(prompts, completions, task_id, **kwargs) -> list[float]`` as TRL calls it (TRL 1.16,
  ``GRPOTrainer(reward_funcs=...)``). It scores each completion as the environment scores a
  solver reply: :func:`sage_env.env_scoring.verify` (math-verify; code run in the sandbox;
  ``exec`` tasks through the executor) then :func:`sage_env.rewards.solver_reward` without a
  plan (``0.6 s_gt + 0.2 f`` by default, divided by 0.8 under
  ``solver_plan_term_when_gated = "renormalise"``), or the verifier score alone
  (``score="s_gt"``). It never
  raises on a completion: anything unreadable scores as the environment scores it, and an
  internal error or an unknown task scores 0 (logged).

What it does not do: the four-role game (challenger, planner, critic, the pool growing with
self-made tasks, Task-Relative REINFORCE++) needs our environment and learners (``sage-env
train``); this door trains a solver only, on a fixed set of tasks. Nothing here imports TRL:
the dataset needs ``datasets`` (TRL's own dependency) and only for :func:`solver_dataset`.
Example: ``examples/trl_grpo_solver.py``; docs: ``docs/guide/trl.md``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sage_env import env_scoring, rewards
from sage_env.config import EnvConfig
from sage_env.protocols.base import Protocol
from sage_env.tasks import exec_tasks
from sage_env.tasks.task import Task, load_seeds, read_jsonl
from sage_env.text import prompts
from sage_env.verifiers import CodeVerifier, MathVerifier

log = logging.getLogger(__name__)

DOMAINS = ("math", "code", "exec")
"""Task domains the door serves (``exec``: AZR's execution tasks, found in an AZR pool)."""


def load_tasks(
    pool: str | os.PathLike | None = None, domains: Sequence[str] | None = None
) -> list[Task]:
    """The tasks to train on: the bundled seeds, or every task of a pool JSONL.

    Args:
        pool: A JSONL of tasks (``TaskPool.save``, a run's pool: seeds and accepted self-made
            tasks with their provenance), or ``None`` for the 500 seeds
            (:func:`sage_env.load_seeds`).
        domains: Keep only these domains (``None``: all of :data:`DOMAINS`).

    Returns:
        The tasks that carry a verifier (a math answer, code tests, an ``exec`` spec), in file
        order.

    Raises:
        ValueError: on a malformed pool line (the message names the line), or when no task is
            left.
    """
    tasks = load_seeds() if pool is None else read_jsonl(pool)
    keep = set(domains or DOMAINS)
    out = [t for t in tasks if t.domain in keep and _has_verifier(t)]
    if not out:
        raise ValueError(f"no task of domains {sorted(keep)} with a verifier in {pool or 'seeds'}")
    return out


def _has_verifier(task: Task) -> bool:
    if task.domain == "math":
        return bool(task.answer)
    if task.domain == "code":
        return bool(task.tests)
    return task.domain == "exec"


def solver_prefix(task: Task, config: EnvConfig | None = None) -> str:
    """The response prefix the environment gives a solver on ``task`` (``""`` on math)."""
    config = config or EnvConfig()
    return config.resolve_prefix("solve", Protocol().prefix("solve", task))


def solver_messages(task: Task) -> list[dict[str, str]]:
    """The environment's solver observation on ``task`` as chat messages (system, user)."""
    obs = exec_tasks.solver_prompt(task) if task.domain == "exec" else prompts.solver(task)
    return [
        {"role": "system", "content": obs["system"]},
        {"role": "user", "content": obs["user"]},
    ]


def solver_rows(
    tasks: Iterable[Task], tokenizer: Any = None, config: EnvConfig | None = None
) -> list[dict[str, Any]]:
    """One GRPO dataset row per task.

    Args:
        tasks: The tasks (:func:`load_tasks`).
        tokenizer: ``None``: ``prompt`` is the chat messages (TRL's conversational format;
            TRL applies the model's chat template, and the model writes the whole reply,
            fence included). A tokenizer with a chat template: ``prompt`` is the rendered
            template with the generation prompt, followed by the response prefix (TRL's
            standard format; the model continues after ```` ```python ````).
        config: Prefix settings (``prefixes``, ``prefix_overrides``); default ``EnvConfig()``.

    Returns:
        Rows ``{"prompt", "task_id", "domain", "prefix"}``; ``task_id`` is the key
        :class:`SolverReward` scores with.
    """
    rows = []
    for task in tasks:
        messages = solver_messages(task)
        prefix = solver_prefix(task, config)
        prompt: Any = messages
        if tokenizer is not None:
            rendered = tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True
            )
            prompt = rendered + prefix
        rows.append(
            {"prompt": prompt, "task_id": task.task_id, "domain": task.domain, "prefix": prefix}
        )
    return rows


def solver_dataset(
    tasks: Iterable[Task], tokenizer: Any = None, config: EnvConfig | None = None
) -> Any:
    """:func:`solver_rows` as a ``datasets.Dataset`` (what ``GRPOTrainer`` takes).

    Raises:
        ImportError: without the ``datasets`` package (TRL installs it).
    """
    from datasets import Dataset

    return Dataset.from_list(solver_rows(tasks, tokenizer, config))


@dataclass
class SolverScore:
    """One completion scored as the environment scores a solver reply.

    Attributes:
        reward: What :class:`SolverReward` returns for it.
        s_gt: The verifier score in [0, 1].
        f: The format score in [0, 1].
        verdict: The verifier's ``{"status", "reason", "score", "format"}`` (the reason may
            name the gold answer: keep it away from the model).
        reply: The text scored (the prefix plus the completion when the prompt ended with it).
    """

    reward: float
    s_gt: float
    f: float
    verdict: dict = field(default_factory=dict)
    reply: str = ""


class SolverReward:
    """TRL reward function: scores completions with our verifiers, as the env scores a solver.

    ``GRPOTrainer(reward_funcs=[SolverReward(tasks)], train_dataset=solver_dataset(tasks))``.
    TRL calls it with the batch's ``prompts`` and ``completions`` and every dataset column as
    a keyword (``task_id``, ``prefix``...); it returns one float per completion and never
    raises on a completion. ``last`` holds the :class:`SolverScore` of the latest call's
    completions, in order (for logging and tests).

    Args:
        tasks: The tasks the dataset was built from (looked up by ``task_id``).
        config: Format rule, solver weights, code limits, math workers; default
            ``EnvConfig()``, the environment's defaults.
        score: ``"reward"``: the environment's solver reward without a plan
            (:func:`sage_env.rewards.solver_reward` with ``p=None``); ``"s_gt"``: the
            verifier score alone.
    """

    __name__ = "sage_solver"  # TRL names a reward function's metrics after it

    def __init__(
        self,
        tasks: Iterable[Task],
        config: EnvConfig | None = None,
        score: Literal["reward", "s_gt"] = "reward",
    ) -> None:
        if score not in ("reward", "s_gt"):
            raise ValueError(f"score must be 'reward' or 's_gt', got {score!r}")
        self.env_config = config or EnvConfig()
        self.score = score
        self.tasks = {t.task_id: t for t in tasks}
        self.math_verifier = MathVerifier(workers=self.env_config.math_workers)
        self.code_verifier = CodeVerifier(
            timeout_s=self.env_config.code_timeout_s, memory_mb=self.env_config.code_memory_mb
        )
        self.last: list[SolverScore] = []

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        task_id: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> list[float]:
        """One reward per completion (TRL's reward-function signature).

        Args:
            prompts: The prompts (chat messages or text), one per completion.
            completions: The completions: text, or a list of messages whose assistant
                contents are joined (TRL's conversational format).
            task_id: The dataset column: the task of each completion.
            **kwargs: Other dataset columns and TRL's extras (``trainer_state``...), unused.

        Returns:
            ``len(completions)`` floats.
        """
        ids = list(task_id) if task_id is not None else [None] * len(completions)
        self.last = [
            self.score_one(tid, prompt, completion)
            for tid, prompt, completion in zip(ids, prompts, completions)
        ]
        return [s.reward for s in self.last]

    def score_one(self, task_id: str | None, prompt: Any, completion: Any) -> SolverScore:
        """Score one completion of the prompt of task ``task_id``; never raises."""
        try:
            task = self.tasks.get(str(task_id))
            if task is None:
                log.warning("SolverReward: unknown task_id %r scores 0", task_id)
                return SolverScore(0.0, 0.0, 0.0, {"status": "invalid", "reason": "unknown task"})
            text = _completion_text(completion)
            prefix = solver_prefix(task, self.env_config)
            # the model continued after the prefix only when the prompt ended with it
            prefixed = bool(prefix) and isinstance(prompt, str) and prompt.endswith(prefix)
            reply = prefix + text if prefixed else text
            s_gt, f, verdict = env_scoring.verify(
                task,
                reply,
                self.env_config,
                self.math_verifier,
                self.code_verifier,
                prefix=prefix if prefixed else "",
            )
            reward = s_gt
            if self.score == "reward":
                reward, _ = rewards.solver_reward(None, s_gt, f, self.env_config.rewards)
            return SolverScore(float(reward), float(s_gt), float(f), verdict, reply)
        except Exception as exc:  # a reward function must not stop training
            log.warning("SolverReward: scoring failed (%s: %s); scores 0", type(exc).__name__, exc)
            return SolverScore(0.0, 0.0, 0.0, {"status": "error", "reason": str(exc)[:200]})

    def close(self) -> None:
        """Stop the math verifier's worker processes (the sandbox pools stop at exit)."""
        self.math_verifier.close()


def _completion_text(completion: Any) -> str:
    """The text of a completion: a string, or the joined contents of its messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content") or "")
    if isinstance(completion, (list, tuple)):
        return "".join(
            str(m.get("content") or "") if isinstance(m, dict) else str(m) for m in completion
        )
    return "" if completion is None else str(completion)

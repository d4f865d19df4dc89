"""``vllm``: a vLLM engine colocated with the trainer, as TRL's ``vllm_mode="colocate"``."""

from __future__ import annotations

import contextlib
import gc
import os
import socket
from collections.abc import Iterator
from typing import Any

import torch

from learners.engines.config import RolloutConfig
from learners.engines.interface import EngineHost
from learners.engines.registry import import_engine_module
from learners.engines.stops import cut_completion
from learners.engines.weights import inference_weights
from learners.types import Completion, SamplingConfig

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
        self.vllm = import_engine_module("vllm")
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

    def release(self) -> None:
        """Nothing more: with ``vllm_sleep`` the engine already sleeps outside a rollout
        session (the update runs outside one); without it, it keeps its GPU memory."""

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

"""``hf-cb``: transformers' continuous batching (paged attention) on the policy's own model."""

from __future__ import annotations

import contextlib
import math
from typing import Any

import torch

from learners.engines.config import RolloutConfig
from learners.engines.interface import EngineHost
from learners.engines.registry import register_engine
from learners.engines.stops import cut_completion
from learners.types import Completion, SamplingConfig


@register_engine("hf-cb")
class HFContinuousBatchingEngine:
    """transformers' continuous batching (paged attention) on the host's model (``hf-cb``).

    Each :meth:`generate` call opens a manager with ``model.continuous_batching_context_manager``
    (sized for the call's requests through transformers' ``WorkloadHints``), adds one request
    per row with its own ``max_new_tokens`` and the host's EOS ids, and collects the results
    with their log-probs (``ContinuousBatchingConfig(return_logprobs=True)``: log-softmax of
    the processed logits, i.e. after temperature and top-p). transformers' continuous batching
    has no stop-string support, so a row runs to EOS or its budget and is cut at its first
    stop string afterwards (:func:`~learners.engines.stops.cut_completion`): the same tokens,
    with the time of the tail spent.
    The model must not train while a call runs (the manager swaps its attention
    implementation for the call). Speed against ``hf`` is unmeasured.

    Args:
        host: The policy (:class:`EngineHost`).
        config: ``cb_*`` settings.

    Raises:
        RuntimeError: if the installed transformers has no continuous batching.
    """

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

    def release(self) -> None:
        """Nothing to free: the engine holds no copy of the weights."""

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
                cut_completion(self.host, p, list(r.generated_tokens), list(r.logprobs), b, stop)
            )
        return completions

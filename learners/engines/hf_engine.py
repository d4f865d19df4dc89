"""``hf``: batched ``model.generate`` on the policy's own model (the default engine)."""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from learners.engines.config import RolloutConfig
from learners.engines.interface import EngineHost
from learners.engines.registry import register_engine
from learners.engines.stops import RowLimits, limited_completions
from learners.types import Completion, SamplingConfig


@register_engine("hf")
class HFEngine:
    """Batched ``model.generate`` on the host's model (the default engine, ``hf``).

    Prompts are sorted by length and generated in batches of ``sampling.batch_size``, left
    padded; every row stops at its own budget or stop string (:class:`RowLimits`) and a batch
    runs until all its rows have stopped. Log-probs come from the logits transformers returns
    (``output_logits=True``) divided by the temperature, computed on the model's device one
    step at a time (:func:`sampled_logprobs`); only the ``[B, T]`` result reaches the host.
    Each batch reseeds torch from the
    host's generator, so a policy seed fixes the samples.

    Args:
        host: The policy (:class:`EngineHost`).
        config: Unused (no settings); accepted for a uniform factory signature.
    """

    def __init__(self, host: EngineHost, config: RolloutConfig | None = None) -> None:
        self.host = host
        self._stop_cache: dict[tuple[str, ...], Any] = {}

    def sync_weights(self) -> None:
        """Nothing to do: the engine samples from the trainer's model itself."""

    def release(self) -> None:
        """Nothing to free: the engine holds no copy of the weights."""

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
        temp = sampling.temperature if sampling.do_sample else 1.0
        logps = sampled_logprobs(out.logits, out.sequences[:, width:], temp).cpu()
        new = out.sequences[:, width:].cpu()
        del out
        return limited_completions(host, prompts, new, logps, budgets, limits)


def sampled_logprobs(
    logits: tuple[torch.Tensor, ...], tokens: torch.Tensor, temperature: float
) -> torch.Tensor:
    """``[B, T]`` float32 log-probs of ``tokens`` (``[B, T]``) under ``log_softmax(logits / T)``.

    ``logits`` is transformers' ``output_logits`` tuple (one ``[B, V]`` tensor per step). Each
    step is reduced where it lies, so no ``[B, T, V]`` tensor is built or copied to the host
    (at 64 rows, 256 steps and Qwen's 152k vocabulary that was 10 GB of float32 per batch).
    """
    steps = []
    for t, step in enumerate(logits):
        step = step.float()
        if temperature != 1.0:
            step = step / temperature
        chosen = tokens[:, t : t + 1].to(step.device)
        steps.append(torch.log_softmax(step, dim=-1).gather(-1, chosen))
    if not steps:
        return torch.zeros((tokens.shape[0], 0), dtype=torch.float32)
    return torch.cat(steps, dim=1)

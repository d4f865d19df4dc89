"""Rollout engines: what turns token-id prompts into completions for a policy.

:class:`~learners.policy.HFPolicy` builds its prompts (chat template, generation prompt, the
observation's response prefix) and hands the token ids to its engine; the engine samples and
returns :class:`~learners.types.Completion` records (token ids, sampling log-probs, a
``truncated`` flag). Choose one with ``--rollout.engine`` (:class:`RolloutConfig`):

- ``hf`` (default): batched ``model.generate`` on the policy's own model
  (:mod:`learners.engines.hf_engine`).
- ``hf-cb``: transformers' continuous batching with paged attention
  (``model.continuous_batching_context_manager``, :mod:`learners.engines.hf_cb_engine`), on
  the policy's own model. Its speed against ``hf`` is unmeasured.
- ``vllm``: a vLLM ``LLM`` colocated with the trainer as TRL's ``vllm_mode="colocate"`` does
  it (:mod:`learners.engines.vllm_engine`): one engine per process, asleep between rollouts,
  the trainer's weights (LoRA merged, :mod:`learners.engines.weights`) pushed into it after
  every update. Optional extra ``pip install 'sage-env[vllm]'``; unverified until run where
  vLLM is installed.
- ``ct2``: CTranslate2 on the CPU (:mod:`learners.engines.ct2_engine`).
- ``torch-bf16``: a bfloat16 copy of the trainer's weights decoded by torch with a static KV
  cache, one batch per call (:mod:`learners.engines.torch_bf16_engine`); greedy calls decode
  the float32 model.

Every engine honours a token budget and stop strings per row (one rule,
:mod:`learners.engines.stops`), returns the log-prob of each sampled token at the sampling
temperature (``log_softmax(logits / T)``, what
:meth:`~learners.policy.HFPolicy.token_logprobs` recomputes), and puts loss on nothing it did
not generate: the prompt ids it receives (prefix included) come back as ``prompt_ids``.
:mod:`learners.engines.registry` holds the registry (``@register_engine(name, ...)`` above
each engine class: what it needs installed, whether it syncs weights); :func:`make_engine`
builds one. Names load lazily (no torch on import).
"""

from learners.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "RolloutConfig": "learners.engines.config",
        "CT2_COMPUTE_TYPES": "learners.engines.config",
        "EngineHost": "learners.engines.interface",
        "RolloutEngine": "learners.engines.interface",
        "EngineSpec": "learners.engines.registry",
        "ENGINES": "learners.engines.registry",
        "engine_spec": "learners.engines.registry",
        "register_engine": "learners.engines.registry",
        "require_engine": "learners.engines.registry",
        "syncs_weights": "learners.engines.registry",
        "make_engine": "learners.engines.factory",
        "HFEngine": "learners.engines.hf_engine",
        "HFContinuousBatchingEngine": "learners.engines.hf_cb_engine",
        "VLLMEngine": "learners.engines.vllm_engine",
        "CT2Engine": "learners.engines.ct2_engine",
        "TorchBF16Engine": "learners.engines.torch_bf16_engine",
        "length_groups": "learners.engines.ct2_engine",
        "inference_weights": "learners.engines.weights",
        "RowLimits": "learners.engines.stops",
        "stop_length": "learners.engines.stops",
        "eos_cut": "learners.engines.stops",
        "cut_completion": "learners.engines.stops",
    },
)

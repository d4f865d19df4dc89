"""Evaluation benchmarks: loaders (one module per family) behind :func:`register_benchmark`.

:mod:`~learners.evaluation.benchmarks.registry` holds :class:`EvalItem`, the registry and
:func:`load_benchmark`; :mod:`~learners.evaluation.benchmarks.files` the data folder and the
hub; the families are :mod:`~learners.evaluation.benchmarks.math_benchmarks`,
:mod:`~learners.evaluation.benchmarks.code_benchmarks` (with EvalPlus's protocol in
:mod:`~learners.evaluation.benchmarks.evalplus`),
:mod:`~learners.evaluation.benchmarks.cruxeval` and
:mod:`~learners.evaluation.benchmarks.livecodebench`; each registers its own benchmarks
(:data:`BENCHMARKS` imports them on the first lookup). Used by :mod:`learners.evaluation`
(scoring, pass@k, ``sage-env eval``).

Where a benchmark's rows come from (``source``, ``sage-env eval --source``):

- ``auto`` (default): the data folder, which is ``--data-dir`` if given, else
  ``$SAGE_ENV_DATA``, else the files shipped inside the package
  (``learners/data/benchmarks``, see its README for sources and licenses); a benchmark
  whose file is not there loads from the Hugging Face hub (:data:`HUB_SOURCES`, needs
  ``pip install "sage-env[hub]"`` and a network).
- ``local``: the data folder only (no network).
- ``hub``: the hub only, through ``datasets.load_dataset``; the rows go through the same
  loaders as local files.

Data folder layout (:data:`BENCHMARK_FILES`; shipped: gsm8k, math500, humaneval,
humaneval_plus, mbpp, mbpp_plus, cruxeval)::

    math/gsm8k_test.jsonl            question, answer ("... #### 18")
    math/math500_test.jsonl          problem, answer
    math/aime24_test.jsonl           problem, answer                  (not shipped: hub)
    math/aime25_test.jsonl           problem, answer                  (not shipped: hub)
    math/amc23_test.jsonl            problem, answer (float)          (not shipped: hub)
    math/olympiadbench_test.jsonl.gz question, final_answer (list)    (not shipped: hub)
    code/HumanEval.jsonl.gz          task_id, prompt, test, entry_point
    code/HumanEvalPlus-v0.1.10.jsonl.gz  + canonical_solution, base_input, plus_input, atol
    code/sanitized-mbpp.json         task_id, prompt, test_list, test_imports (test ids 11-510)
    code/MbppPlus-v0.2.0.jsonl.gz    prompt, entry_point, canonical_solution, base_input, plus_input
    code/cruxeval.jsonl.gz           code, input, output, id (CRUXEval: cruxeval_o, cruxeval_i)

LiveCodeBench's test cases are not shipped; ``livecodebench`` loads
``livecodebench/code_generation_lite`` from the Hugging Face hub and needs a network.
"""

from learners.evaluation.benchmarks.code_benchmarks import CODE_INSTRUCTION
from learners.evaluation.benchmarks.evalplus import (
    MBPP_OUTPUT_NOT_NONE_TASKS,
    PLUS_MEMORY_MB,
    input_literal,
    mbpp_plus_inputs,
    plus_tests,
)
from learners.evaluation.benchmarks.files import (
    HUB_SOURCES,
    SHIPPED_DATA,
    SOURCES,
    HubSource,
    benchmark_rows,
    default_data_dir,
    hub_rows,
)
from learners.evaluation.benchmarks.math_benchmarks import MATH_INSTRUCTION, gsm8k_gold
from learners.evaluation.benchmarks.registry import (
    BENCHMARK_FILES,
    BENCHMARKS,
    BenchmarkSpec,
    EvalItem,
    load_benchmark,
    register_benchmark,
)

__all__ = [
    "BENCHMARKS",
    "BENCHMARK_FILES",
    "BenchmarkSpec",
    "CODE_INSTRUCTION",
    "EvalItem",
    "HUB_SOURCES",
    "HubSource",
    "MATH_INSTRUCTION",
    "MBPP_OUTPUT_NOT_NONE_TASKS",
    "PLUS_MEMORY_MB",
    "SHIPPED_DATA",
    "SOURCES",
    "benchmark_rows",
    "default_data_dir",
    "gsm8k_gold",
    "hub_rows",
    "input_literal",
    "load_benchmark",
    "mbpp_plus_inputs",
    "plus_tests",
    "register_benchmark",
]

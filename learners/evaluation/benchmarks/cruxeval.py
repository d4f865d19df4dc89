"""CRUXEval (Gu et al. 2024, arXiv 2401.03065): predict a function's output (``cruxeval_o``)
or an input that gives its output (``cruxeval_i``)."""

from __future__ import annotations

from learners.evaluation.benchmarks.registry import EvalItem, register_benchmark

def _cruxeval(name: str, rows: list[dict], **_: object) -> list[EvalItem]:
    """CRUXEval (Gu et al. 2024, arXiv 2401.03065): O predicts ``f(input)``, I an input.

    The question is the execution-task solver's (:func:`sage_env.exec_tasks.solver_question`,
    deduction for O, abduction for I); scoring is :mod:`sage_env.verifiers.execution`'s.
    """
    from sage_env.exec_tasks import ExecSpec, solver_question

    mode = "deduction" if name == "cruxeval_o" else "abduction"
    return [
        EvalItem(
            name,
            r["id"],
            "exec",
            solver_question(ExecSpec(mode, r["code"], (r["input"],), (r["output"],))),
            answer=r["output"],
            tests=[r["input"]],
            entry_point="f",
            text=r["code"],
            program=r["code"],
        )
        for r in rows
    ]


register_benchmark("cruxeval_o", _cruxeval, "code/cruxeval.jsonl.gz")
register_benchmark("cruxeval_i", _cruxeval, "code/cruxeval.jsonl.gz")

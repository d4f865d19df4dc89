"""CRUXEval (Gu et al. 2024, arXiv 2401.03065): predict a function's output (``cruxeval_o``)
or an input that gives its output (``cruxeval_i``); and the shipped held-out execution tasks
(``exec_heldout``)."""

from __future__ import annotations

import json

from learners.evaluation.benchmarks.registry import EvalItem, register_benchmark


def _cruxeval(name: str, rows: list[dict], **_: object) -> list[EvalItem]:
    """CRUXEval (Gu et al. 2024, arXiv 2401.03065): O predicts ``f(input)``, I an input.

    The question is the execution-task solver's (:func:`sage_env.tasks.exec_tasks.solver_question`,
    deduction for O, abduction for I), and the completion continues the solver's response
    prefix (`````output`` / `````input``) as the execution solver's does in training, so
    an answer is one short fenced literal; scoring is :mod:`sage_env.verifiers.answer_checks`'.
    CRUXEval's own harness prompts few-shot with ``assert f(...) == ??`` instead.
    """
    from sage_env.tasks.exec_tasks import SOLVER_PREFIX, ExecSpec, solver_question

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
            prefix=SOLVER_PREFIX[mode],
        )
        for r in rows
    ]


register_benchmark("cruxeval_o", _cruxeval, "code/cruxeval.jsonl.gz")
register_benchmark("cruxeval_i", _cruxeval, "code/cruxeval.jsonl.gz")


@register_benchmark("exec_heldout")
def _exec_heldout(name: str, rows: None = None, **_: object) -> list[EvalItem]:
    """The held-out execution tasks (``sage_env/data/exec_heldout.jsonl``), deduction.

    Built once by ``scripts/build_exec_heldout.py`` (fixed seed; outputs from the sandboxed
    executor; programs disjoint from the execution seeds and from CRUXEval). The question is
    the execution solver's (:func:`sage_env.tasks.exec_tasks.solver_question`), and the completion
    continues the solver's response prefix (`````output``), as the ``azr`` solver's does in
    training; scored like CRUXEval-O (the output literal's value). Shipped with ``sage_env``,
    whatever the data folder.
    """
    from importlib import resources

    from sage_env.tasks.exec_tasks import SOLVER_PREFIX, ExecSpec, solver_question

    path = resources.files("sage_env") / "data" / "exec_heldout.jsonl"
    items = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        spec = ExecSpec(r["mode"], r["program"], (r["input"],), (r["output"],))
        items.append(
            EvalItem(
                name,
                r["id"],
                "exec",
                solver_question(spec),
                answer=r["output"],
                tests=[r["input"]],
                entry_point="f",
                text=r["program"],
                program=r["program"],
                prefix=SOLVER_PREFIX[r["mode"]],
            )
        )
    return items


"""Greedy per-item scores of a model on the held-out sets, and the completions kept for reading.

The sets (:data:`SETS`), each scored greedily on its first N items:

- ``exec_heldout``: the held-out execution tasks (``sage_env/data/exec_heldout.jsonl``,
  deduction, disjoint from the seeds and CRUXEval), ``sage-env eval``'s loop;
- ``cruxeval_o`` / ``cruxeval_i``: CRUXEval's first N items, ``sage-env eval``'s loop;
- ``validation``: the math/code validation split's first N tasks
  (:func:`sage_env.load_validation`, MATH and GSM8K in turn), prompted as the solver role and
  scored by the math verifier, as training's validation is.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchmarks.learning_curve.run import CurveConfig

SETS = ("exec_heldout", "cruxeval_o", "cruxeval_i", "validation")
"""Held-out sets :func:`evaluate` scores (the names of ``CurveConfig.sets``)."""


def evaluate(model: str, sets: list[tuple[str, int, int]], cfg: CurveConfig, out: Path) -> dict:
    """Per-item greedy correctness of ``model`` on every held-out set, ``{set: [bool]}``.

    Benchmarks run through ``sage-env eval``'s :func:`~learners.evaluation.run_eval` (its
    files land in ``out/<set>``); ``validation`` prompts each task as the solver role and
    scores it with the math verifier, as training's validation does. Of ``cfg`` it reads the
    policy's ``seed``, ``eval_engine`` and ``eval_batch`` (rows per generate call).
    """
    from learners.engines.config import RolloutConfig
    from learners.evaluation.run import EvalConfig, run_eval
    from learners.policy.hf_policy import HFPolicy
    from learners.types import SamplingConfig, action_text
    from sage_env import load_validation
    from sage_env.text import prompts
    from sage_env.verifiers import MathVerifier

    policy = HFPolicy(
        model, device="cpu", seed=cfg.seed, rollout=RolloutConfig(engine=cfg.eval_engine)
    )
    got: dict[str, list[bool]] = {}
    try:
        for name, n, tokens in sets:
            if name == "validation":
                tasks = load_validation(n)
                sampling = SamplingConfig(
                    max_new_tokens=tokens, do_sample=False, batch_size=cfg.eval_batch
                )
                comps = policy.generate([prompts.solver(t) for t in tasks], sampling)
                with MathVerifier() as mv:
                    got[name] = [
                        mv.verify(action_text(c), t.answer or "").score >= 1.0
                        for c, t in zip(comps, tasks)
                    ]
                continue
            ecfg = EvalConfig(
                model=model,
                benchmarks=name,
                limit=n,
                max_new_tokens=tokens,
                batch_size=cfg.eval_batch,
                out=str(out / name),
                device="cpu",
            )
            (result,) = run_eval(ecfg, policy=policy, progress=False)
            got[name] = [bool(r["correct"][0]) for r in result.records]
    finally:
        policy.close()
    return got


def keep_completions(src: Path, dst: Path) -> None:
    """Copy the per-item completion files (``*.jsonl``) an evaluation wrote under ``src`` to
    ``dst`` (flat), so that the items an arm gained or lost can be read after its run folder
    is deleted."""
    files = sorted(src.rglob("*.jsonl")) if src.exists() else []
    if files:
        dst.mkdir(parents=True, exist_ok=True)
    for f in files:
        shutil.copyfile(f, dst / f.name)

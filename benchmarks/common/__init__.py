"""What the learning-curve and self-evolution experiments share: training arms from one start
and comparing them on held-out sets.

- :mod:`benchmarks.common.arms`: arm names (``azr``, ``azr:frozen``, ``rlvr@bf16``), parsed
  and checked against the protocol registry;
- :mod:`benchmarks.common.scoring`: greedy per-item scores of a model on the held-out sets;
- :mod:`benchmarks.common.run_metrics`: what a training run's ``metrics.jsonl`` says (the
  step log, the rollout-token and step totals);
- :mod:`benchmarks.common.stats`: one arm's curve on one set (Wilson intervals, exact
  McNemar final against base) and a variant arm against its plain arm.

The interval and the test themselves are :func:`learners.evaluation.heldout.wilson` and
:func:`learners.evaluation.heldout.mcnemar_exact`.
"""

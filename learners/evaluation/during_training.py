"""Evaluation the training loop runs: held-out validation accuracy and the critic probe's
replies (:class:`~learners.training.monitors.CriticProbe`).
"""

from __future__ import annotations

import logging

from learners.types import SamplingConfig, action_text
from sage_env.verifiers import MathVerifier


def validation_accuracy(
    policy,
    tasks: list,
    math_verifier: MathVerifier,
    max_new_tokens: int = 256,
    batch_size: int = 16,
    progress: bool = False,
) -> float:
    """Greedy accuracy of ``policy`` on math ``tasks`` (e.g. :func:`sage_env.load_validation`).

    Each task is prompted as the solver role sees it and scored with ``math_verifier``. The
    tasks are generated ``batch_size`` at a time (one generate call each), under a progress
    bar when ``progress`` is set.

    Returns:
        Share of tasks answered correctly, in [0, 1] (0 for an empty list).
    """
    from tqdm.auto import tqdm

    from sage_env.text import prompts

    if not tasks:
        return 0.0
    logging.getLogger(__name__).info(
        "validation: %d held-out tasks, greedy, up to %d new tokens each",
        len(tasks),
        max_new_tokens,
    )
    sampling = SamplingConfig(max_new_tokens=max_new_tokens, do_sample=False, batch_size=batch_size)
    comps = []
    with tqdm(
        total=len(tasks), desc="validation", unit="task", leave=False, disable=not progress
    ) as bar:
        for i in range(0, len(tasks), batch_size):
            chunk = tasks[i : i + batch_size]
            comps += policy.generate([prompts.solver(t) for t in chunk], sampling)
            bar.update(len(chunk))
    scores = [
        math_verifier.verify(action_text(c), t.answer or "").score for c, t in zip(comps, tasks)
    ]
    return sum(scores) / len(scores)


def critic_replies(
    policy, items: list, max_new_tokens: int = 48, temperature: float = 0.7, seed: int = 0
) -> list[str]:
    """The policy's critic replies (prefix + completion) to critic-probe items.

    Sampled at ``temperature`` as in training, from a generator reseeded with ``seed`` and
    restored afterwards, so the probe neither depends on nor disturbs the run's sampling.

    Args:
        policy: An :class:`~learners.policy.HFPolicy` (or anything with ``generate``).
        items: :class:`sage_env.diagnostics.critic_probe.ProbeItem` list.
        max_new_tokens: Reply budget.
        temperature: Sampling temperature.
        seed: Seed of the probe's sampling.
    """
    import torch


    if not items:
        return []
    gen = getattr(policy, "generator", None)
    saved = gen.get_state() if gen is not None else None
    cpu_rng = torch.get_rng_state()
    if gen is not None:
        gen.manual_seed(seed)
    try:
        sampling = SamplingConfig(max_new_tokens=max_new_tokens, temperature=temperature)
        comps = policy.generate([it.observation for it in items], sampling)
    finally:
        if gen is not None:
            gen.set_state(saved)
        torch.set_rng_state(cpu_rng)
    return [action_text(c) for c in comps]

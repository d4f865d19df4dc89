"""The update's zero-advantage skip, timed on its own (issue 13).

``PolicyGradientLearner.skip_zero_advantage`` gives a sequence whose advantage is exactly 0
(and no KL term) no forward/backward; the normalisers still count it, so the gradient is the
same. This times one whole ``learner.update()`` (advantages, forward/backward, AdamW step) of
the ``demo`` preset's learner (TRR++, ``PGConfig(lr=1e-5, micro_batch_size=4)``, temperature
0.7) with the skip on and off, on the same buffer and the same starting weights, in
``--repeats`` interleaved pairs, and records how far the two gradients (what AdamW steps on)
and the weights after the step differ.

The buffer is demo-like without running the environment: 4 rounds of a step, each with one
challenger proposal, two critic reviews (question, plan), one plan and two solver probes and
two solves (32 sequences), prompts from the real role templates (``sage_env.text.prompts``) on seed
tasks, completions sampled once from the model (EOS suppressed, then each cut to its phase's
length, so the sampling log-probs stay exact). The critic's rewards are constant (1.0, as in
the demo when every reply parses), so its TRR++ advantages are exactly 0; every other
(role, domain) group has distinct rewards.

Writes ``benchmarks/perf/results/update_skip_bench.json``. Never asserts a time.

Usage::

    python -m benchmarks.perf.update_skip_bench                 # default model, ~45 min on 2 cores
    python -m benchmarks.perf.update_skip_bench --model PATH --repeats 1 --max-new-tokens 8
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time
from pathlib import Path

import torch

from learners.algorithms.registry import make_learner
from learners.policy import DEFAULT_MODEL, HFPolicy, SamplingConfig
from learners.training.presets import PRESETS
from learners.types import Transition
from sage_env.tasks.task import load_seeds
from sage_env.text import prompts

OUT = Path(__file__).parent / "results" / "update_skip_bench.json"
CONSTANT_ROLE = "critic"
PLAN_STAND_IN = (
    "<plan>\n1. Restate what is given and what is asked.\n2. Write the relation between "
    "the quantities.\n3. Compute step by step.\n4. Check the result against the question.\n"
    "</plan>"
)
"""The plan the critic reviews and the solver is shown (one generate call builds the buffer,
so no real plan exists yet)."""
LENGTHS = {
    "challenge": (90, 110),
    "review_question": (36, 40),
    "review_plan": (36, 40),
    "plan": (60, 96),
    "probe": (50, 110),
    "solve": (50, 110),
}
"""Completion-length range per phase (within the demo preset's token budgets)."""


def round_observations(task, other) -> list[tuple[str, str, dict]]:
    """One round's ``(role, phase, observation)``: 1 challenger, 2 critic, 1 planner, 4 solver.

    ``other`` (a seed of the same domain) stands in for the challenger's proposed question.
    """
    return [
        ("challenger", "challenge", prompts.challenger(task)),
        ("critic", "review_question", prompts.critic_question(other.prompt, other.domain)),
        ("planner", "plan", prompts.planner(task)),
        ("critic", "review_plan", prompts.critic_plan(task, PLAN_STAND_IN)),
        ("solver", "probe", prompts.solver(other)),
        ("solver", "probe", prompts.solver(other)),
        ("solver", "solve", prompts.solver(task, PLAN_STAND_IN)),
        ("solver", "solve", prompts.solver(task, PLAN_STAND_IN)),
    ]


def build_buffer(
    policy, rounds: int, max_new_tokens: int, max_prompt_tokens: int, temperature: float, seed: int
) -> list[Transition]:
    """A demo-like buffer: real role prompts, completions sampled once, cut per phase."""
    rng = random.Random(seed)
    seeds = load_seeds()
    by_domain = {d: [t for t in seeds if t.domain == d] for d in ("math", "code")}
    rows = []
    for r in range(rounds):
        domain = ("math", "code")[r % 2]
        task, other = rng.sample(by_domain[domain], 2)
        rows += [(role, phase, obs, domain) for role, phase, obs in round_observations(task, other)]
    longest = min(max(hi for _, hi in LENGTHS.values()), max_new_tokens)
    sampling = SamplingConfig(
        max_new_tokens=longest,
        min_new_tokens=longest,
        temperature=temperature,
        max_prompt_tokens=max_prompt_tokens,
        batch_size=len(rows),
    )
    comps = policy.generate([obs for _, _, obs, _ in rows], sampling)
    buffer = []
    counts: dict[str, int] = {}
    for (role, phase, _, domain), c in zip(rows, comps):
        lo, hi = LENGTHS[phase]
        n = min(rng.randint(lo, hi), len(c.completion_ids))
        agent = f"{role}_{counts.get(role, 0)}"
        counts[role] = counts.get(role, 0) + 1
        ids = c.completion_ids[:n]
        buffer.append(
            Transition(
                agent=agent,
                role=role,
                domain=domain,
                phase=phase,
                prompt_ids=list(c.prompt_ids),
                completion_ids=list(ids),
                logprobs=list(c.logprobs[:n]),
                text=policy.tokenizer.decode(ids),
            )
        )
    set_rewards(buffer, rng)
    return buffer


def set_rewards(buffer: list[Transition], rng: random.Random) -> None:
    """The constant role gets 1.0 everywhere; every other sequence a distinct random reward."""
    for t in buffer:
        t.reward = 1.0 if t.role == CONSTANT_ROLE else round(rng.uniform(0.0, 1.0), 6)


def snapshot(policy) -> dict[str, torch.Tensor]:
    """A detached copy of every model tensor (weights and buffers)."""
    return {k: v.detach().clone() for k, v in policy.model.state_dict().items()}


def one_update(policy, start, buffer, skip: bool) -> tuple[float, dict, list[torch.Tensor]]:
    """Restore ``start``, build a fresh demo learner, time one ``update()`` of ``buffer``.

    Returns:
        ``(seconds, metrics, grads)``: ``grads`` are the clipped gradients AdamW stepped on.
    """
    demo = PRESETS["demo"]
    policy.model.load_state_dict(start)
    learner = make_learner(
        demo.algorithm, policy, demo.learner, temperature=demo.temperature, seed=demo.seed
    )
    learner.skip_zero_advantage = skip
    grads: list[torch.Tensor] = []
    params = learner.params

    def keep_grads(optimizer, args, kwargs) -> None:
        grads[:] = [p.grad.detach().clone() for p in params]

    learner.optimizer.register_step_pre_hook(keep_grads)
    learner.observe(list(buffer))
    t0 = time.perf_counter()
    metrics = learner.update()
    seconds = time.perf_counter() - t0
    del learner  # its AdamW state (twice the weights)
    return seconds, metrics, grads


def max_param_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """Largest absolute element difference between two state dicts of one model."""
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


def main(argv: list[str] | None = None) -> dict:
    """Time skip on/off in interleaved pairs; write and return the result."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=DEFAULT_MODEL, help="model alias, hub id or path")
    p.add_argument("--repeats", type=int, default=3, help="interleaved skip/no-skip pairs")
    p.add_argument("--rounds", type=int, default=4, help="demo rounds in the buffer")
    p.add_argument("--max-new-tokens", type=int, default=110, help="cap on completion lengths")
    p.add_argument("--max-prompt-tokens", type=int, default=1024, help="prompts keep their tail")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--contended", action="store_true", help="note that the machine was shared")
    p.add_argument("--out", default=str(OUT), help="JSON output path")
    args = p.parse_args(argv)
    torch.manual_seed(args.seed)
    load_before = os.getloadavg()[0]
    demo = PRESETS["demo"]
    policy = HFPolicy(args.model, device="cpu", seed=args.seed)
    t0 = time.perf_counter()
    buffer = build_buffer(
        policy,
        args.rounds,
        args.max_new_tokens,
        args.max_prompt_tokens,
        demo.temperature,
        args.seed,
    )
    build_s = time.perf_counter() - t0
    constant_share = sum(t.role == CONSTANT_ROLE for t in buffer) / len(buffer)
    skipped_tokens = sum(len(t.completion_ids) for t in buffer if t.role == CONSTANT_ROLE)
    skipped_seq_tokens = sum(
        len(t.prompt_ids) + len(t.completion_ids) for t in buffer if t.role == CONSTANT_ROLE
    )
    start = snapshot(policy)
    one_update(policy, start, buffer[:2], skip=True)  # warm-up (threads, allocator); untimed
    runs: dict[str, list[float]] = {"skip": [], "no_skip": []}
    shares: dict[str, list[float]] = {"skip": [], "no_skip": []}
    after: dict[str, dict[str, torch.Tensor]] = {}
    grads: dict[str, list[torch.Tensor]] = {}
    for r in range(max(1, args.repeats)):
        for name, skip in (("skip", True), ("no_skip", False)):
            seconds, metrics, grad = one_update(policy, start, buffer, skip)
            runs[name].append(seconds)
            shares[name].append(metrics["skipped_share"])
            if r == 0:
                after[name], grads[name] = snapshot(policy), grad
            del grad
            print(f"pair {r + 1} {name}: {seconds:.2f} s, skipped_share {metrics['skipped_share']}")
    diff = max_param_diff(after["skip"], after["no_skip"])
    update_size = max_param_diff(after["no_skip"], start)
    # the skip's claim is the gradient; AdamW's first step moves a weight by about
    # lr * g / (|g| + eps), so where |g| is near eps (1e-8) float rounding in g shows in it
    grad_diff = max(float((a - b).abs().max()) for a, b in zip(grads["skip"], grads["no_skip"]))
    grad_max = max(float(g.abs().max()) for g in grads["no_skip"])
    policy.model.load_state_dict(start)
    med = {k: statistics.median(v) for k, v in runs.items()}
    load_after = os.getloadavg()[0]
    result = {
        "model": args.model,
        "learner": {
            "algorithm": demo.algorithm,
            "lr": demo.learner.lr,
            "micro_batch_size": demo.learner.micro_batch_size,
            "gradient_checkpointing": demo.learner.gradient_checkpointing,
            "kl_coef": demo.learner.kl_coef,
            "temperature": demo.temperature,
        },
        "buffer": {
            "rounds": args.rounds,
            "sequences": len(buffer),
            "by_role": {
                role: sum(t.role == role for t in buffer)
                for role in ("challenger", "critic", "planner", "solver")
            },
            "prompt_tokens": _stats([len(t.prompt_ids) for t in buffer]),
            "completion_tokens": _stats([len(t.completion_ids) for t in buffer]),
            "constant_role": CONSTANT_ROLE,
            "constant_role_share": constant_share,
            "constant_role_completion_token_share": skipped_tokens
            / sum(len(t.completion_ids) for t in buffer),
            "constant_role_sequence_token_share": skipped_seq_tokens
            / sum(len(t.prompt_ids) + len(t.completion_ids) for t in buffer),
            "build_s": round(build_s, 2),
        },
        "skipped_share": shares["skip"][0],
        "skipped_share_no_skip": shares["no_skip"][0],
        "repeats": len(runs["skip"]),
        "update_s_runs": runs,
        "update_s_median": med,
        "ratio_skip_over_no_skip": med["skip"] / med["no_skip"],
        "ratio_runs": [s / n for s, n in zip(runs["skip"], runs["no_skip"])],
        "max_param_diff": diff,
        "max_param_update": update_size,
        "max_grad_diff": grad_diff,
        "max_grad_abs": grad_max,
        "grad_rel_diff": grad_diff / grad_max,
        "machine": {
            "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "platform": platform.platform(),
            "device": "cpu",
            "loadavg_1m_before": round(load_before, 2),
            "loadavg_1m_after": round(load_after, 2),
            # another process held about a core before we started, or the caller says so
            "contended": bool(args.contended or load_before >= 1.0),
        },
        "date": time.strftime("%Y-%m-%d"),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("update_s_median", "ratio_skip_over_no_skip")}))
    print("skipped_share", result["skipped_share"], "max_param_diff", diff, "->", args.out)
    print("max_grad_diff", grad_diff, "of max |grad|", grad_max)
    return result


def _stats(xs: list[int]) -> dict:
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs), "total": sum(xs)}


if __name__ == "__main__":
    main()

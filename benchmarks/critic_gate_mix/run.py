"""Which warm-up mix lets the demo's gate see the critic's judgement? Expected vs sampled AUC.

For each warm-up mix (``--mixes``), this warms a fresh copy of the model up exactly as
``sage-env train --preset demo`` does (``learners.training.warmup.run_warmup`` with the demo's
steps,
demonstrations and lr; only the mix differs), then scores ``--items`` critic-probe items
(``sage_env.diagnostics.critic_probe``: intact seed questions and corrupted copies, none of them a
demonstration) two ways:

- **expected AUC**: the expected score from the critic's score distribution
  (``HFPolicy.score_distribution`` at the demo's temperature), what the gate reads under
  ``critic_score_estimate = "expected"``;
- **sampled AUC**: one sampled reply per item, what the paper's gate reads.

Writes ``benchmarks/critic_gate_mix/results/critic_gate_mix.json``. About 7 minutes per mix on 2 cores
(warm-up 5, probe 2); a cached warm-up is reused.

Usage::

    python -m benchmarks.critic_gate_mix.run                     # demo mix and two others
    python -m benchmarks.critic_gate_mix.run --model PATH --items 8 \
        --mixes challenger=0.5,critic=0.5
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import torch

import sage_env
from learners.evaluation import critic_replies
from learners.policy import HFPolicy
from learners.training.presets import PRESETS
from learners.training.warmup import run_warmup
from sage_env.diagnostics import critic_probe
from sage_env.protocols.demonstrations import build_demonstrations
from sage_env.tasks.task import load_seeds
from sage_env.text.parsing import ScoredReply

OUT = Path(__file__).resolve().parent / "results" / "critic_gate_mix.json"
MIXES = (
    "challenger=0.85,critic=0.15",
    "challenger=0.7,critic=0.3",
    "challenger=0.55,critic=0.45",
)


def parse_mix(text: str) -> dict[str, float]:
    """``"challenger=0.7,critic=0.3"`` -> ``{"challenger": 0.7, "critic": 0.3}``.

    Raises:
        ValueError: on a malformed entry.
    """
    mix = {}
    for part in text.split(","):
        role, _, share = part.partition("=")
        if not role or not share:
            raise ValueError(f"mix entries are role=share, got {part!r}")
        mix[role.strip()] = float(share)
    return mix


def main(argv: list[str] | None = None) -> dict:
    """Warm up per mix, probe both ways; write and return the result."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=PRESETS["demo"].model, help="model alias, hub id or path")
    p.add_argument("--mixes", nargs="+", default=list(MIXES), help="role=share,... per arm")
    p.add_argument("--items", type=int, default=96, help="probe items (half intact)")
    p.add_argument("--out", default=str(OUT), help="JSON output path")
    args = p.parse_args(argv)
    cfg = PRESETS["demo"]
    seeds = load_seeds()
    items = critic_probe.probe_set(seeds, args.items, seed=cfg.seed + 1, config=cfg.env)
    probe_ids = {it.task_id for it in items}
    exclude = sage_env.load_validation() + [t for t in seeds if t.task_id in probe_ids]
    rules = cfg.env.rewards
    budget = int(cfg.phase_max_new_tokens.get("review_question", cfg.max_new_tokens))
    arms = []
    for text in args.mixes:
        mix = parse_mix(text)
        torch.manual_seed(cfg.seed)
        policy = HFPolicy(args.model, device="cpu", seed=cfg.seed)
        wcfg = dataclasses.replace(cfg.warmup, mix=mix)
        demos = build_demonstrations(
            seeds, wcfg.num_demonstrations, mix, seed=wcfg.seed, exclude=exclude
        )
        assert not any(set(d.task_ids) & probe_ids for d in demos), "a probe task was trained on"
        t0 = time.perf_counter()
        run_warmup(policy, demos, wcfg, args.model, progress=False)
        warm_s = time.perf_counter() - t0
        policy.train(False)
        observations = [it.observation for it in items]
        probs = policy.score_distribution(observations, temperature=cfg.temperature)
        scored = [ScoredReply("", pr) for pr in probs]
        expected = critic_probe.discrimination(
            items, scored, rules.alpha, rules.critic_score_rule, "expected"
        )
        replies = critic_replies(policy, items, budget, temperature=cfg.temperature)
        sampled = critic_probe.discrimination(items, replies, rules.alpha, rules.critic_score_rule)
        arm = {
            "mix": mix,
            "critic_demonstrations": sum(d.role == "critic" for d in demos),
            "expected_auc": round(expected.auc, 3),
            "expected_gap": round(expected.gap, 4),
            "sampled_auc": round(sampled.auc, 3),
            "sampled_gap": round(sampled.gap, 4),
            "sampled_parse_rate": round(sampled.parse_rate, 3),
            "warmup_seconds": round(warm_s, 1),
        }
        arms.append(arm)
        print(arm, flush=True)
    result = {"model": args.model, "items": len(items), "temperature": cfg.temperature}
    result["arms"] = arms
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print("->", out)
    return result


if __name__ == "__main__":
    main()

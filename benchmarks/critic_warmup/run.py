"""Can a warm-up teach the critic to judge? Probe AUC along a critic-only warm-up.

The critic probe (``sage_env.diagnostics.critic_probe``) asks the critic to score intact seed
questions and corrupted copies (words shuffled, cut off, spliced with another task). On the default
model the prompt alone scores at chance. This trains the critic on the warm-up's critic
demonstrations only (``sage_env.protocols.demonstrations``: an intact seed question scored 8 or 9, a
corrupted one 2 or 3) with the warm-up's own loss and optimiser
(``learners.training.warmup.supervised_step``: target-token NLL, AdamW, 10% linear warm-up), and
measures, before training and at each of ``--checkpoints`` steps:

- **sampled AUC**: the probe as the quality gate sees it, one reply per item at T = 0.7, its
  parsed score (an unparseable reply is q = 0);
- **expected AUC**: the AUC of the expected score sum_s s p(s) over the first token after the
  ``<score>`` prefix (digits 1-9, renormalised), which removes sampling noise. It says what a
  gate that averaged many critic samples would see.

The seeds are split in two halves: demonstrations come from one (minus the validation
split), probe items from the other, so no probe question (intact or corrupted) is a
demonstration. Per probe draw and checkpoint it records both AUCs, per-corruption AUCs, the
mean scores and the parse rate; the time per step is in the JSON (a 2-core CPU: a critic
demonstration is about 230 prompt + 15 target tokens). Writes
``benchmarks/critic_warmup/results/critic_warmup.json`` and ``critic_warmup.png``.

Usage::

    python -m benchmarks.critic_warmup.run                          # default model, CPU, ~25 min
    python -m benchmarks.critic_warmup.run --model PATH --checkpoints 1,2 --items 4 --draws 1
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch

import sage_env
from learners.evaluation import critic_replies
from learners.policy import DEFAULT_MODEL, HFPolicy
from learners.training.warmup import supervised_step
from sage_env import EnvConfig
from sage_env.diagnostics import critic_probe
from sage_env.protocols.demonstrations import build_demonstrations, overlapping
from sage_env.tasks.task import load_seeds

OUT = Path(__file__).resolve().parent / "results" / "critic_warmup.json"


def expected_scores(policy: HFPolicy, items: list) -> list[float]:
    """Expected critic score per probe item, in [1, 9].

    The distribution is the policy's next-token softmax after the observation's prefix,
    restricted to the tokens of the digits 1-9 and renormalised (a two-digit ``10`` starts
    with the token of ``1``, so it is not told apart; the rubric's anchors are 2, 5 and 9).
    """
    tok = policy.tokenizer
    digits = [tok(str(d), add_special_tokens=False)["input_ids"][0] for d in range(1, 10)]
    values = torch.arange(1, 10, dtype=torch.float32)
    out = []
    with torch.no_grad():
        for it in items:
            ids = policy.encode_prompt(it.observation, 768)
            logits = policy.model(torch.tensor([ids], device=policy.device)).logits[0, -1]
            p = torch.softmax(logits[digits].float().cpu(), -1)
            out.append(float((p * values).sum()))
    return out


def _subset(items: list, replies: list[str], kind: str) -> critic_probe.DiscriminationReport:
    """The probe report on intact items and the corrupted items of one ``kind``."""
    keep = [i for i, it in enumerate(items) if it.intact or it.corruption == kind]
    return critic_probe.discrimination([items[i] for i in keep], [replies[i] for i in keep])


def measure(policy: HFPolicy, probes: list[list], seed: int) -> list[dict]:
    """Both AUCs (and their parts) on every probe draw."""
    rows = []
    for d, items in enumerate(probes):
        replies = critic_replies(policy, items, max_new_tokens=24, temperature=0.7, seed=seed + d)
        rep = critic_probe.discrimination(items, replies)
        exp = expected_scores(policy, items)
        pos = [e for e, it in zip(exp, items) if it.intact]
        by_kind = {}
        for k in critic_probe.CORRUPTIONS:
            kind_scores = [e for e, it in zip(exp, items) if it.corruption == k]
            by_kind[k] = round(critic_probe.auc(pos, kind_scores), 3)
        neg = [e for e, it in zip(exp, items) if not it.intact]
        rows.append(
            {
                "sampled_auc": round(rep.auc, 3),
                "sampled_gap": round(rep.gap, 3),
                "parse_rate": round(rep.parse_rate, 3),
                "sampled_auc_by_corruption": {
                    k: round(_subset(items, replies, k).auc, 3) for k in critic_probe.CORRUPTIONS
                },
                "expected_auc": round(critic_probe.auc(pos, neg), 3),
                "expected_auc_by_corruption": by_kind,
                "expected_score_intact": round(sum(pos) / len(pos), 2),
                "expected_score_corrupted": round(sum(neg) / len(neg), 2),
            }
        )
    return rows


def plot(result: dict, path: Path) -> None:
    """Sampled and expected AUC (mean over draws) against warm-up steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [c["step"] for c in result["checkpoints"]]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    curves = (("sampled_auc", "sampled score (the gate)"), ("expected_auc", "expected score"))
    for key, label in curves:
        ys = [sum(r[key] for r in c["draws"]) / len(c["draws"]) for c in result["checkpoints"]]
        ax.plot(steps, ys, marker="o", label=label)
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.set(xlabel="critic warm-up steps", ylabel="probe AUC", ylim=(0.3, 1.0))
    ax.set_title(f"critic probe, held-out seeds ({result['model'].split('/')[-1]})", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    """Train the critic and probe it at each checkpoint; write and return the result."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=DEFAULT_MODEL, help="model alias, hub id or path")
    p.add_argument("--checkpoints", default="10,30,60", help="comma-separated step counts")
    p.add_argument("--demos", type=int, default=200, help="critic demonstrations")
    p.add_argument("--batch", type=int, default=4, help="demonstrations per step")
    p.add_argument("--lr", type=float, default=1e-4, help="AdamW learning rate")
    p.add_argument("--items", type=int, default=48, help="probe items per draw")
    p.add_argument("--draws", type=int, default=2, help="probe draws")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(OUT), help="JSON output path")
    args = p.parse_args(argv)
    checkpoints = sorted({int(c) for c in args.checkpoints.split(",") if c})
    if not checkpoints or checkpoints[0] < 1:
        p.error("--checkpoints needs step counts >= 1")
    torch.manual_seed(args.seed)
    policy = HFPolicy(args.model, device="cpu")
    seeds = load_seeds()
    order = list(range(len(seeds)))
    random.Random(args.seed).shuffle(order)
    half = len(seeds) // 2
    train_half = [seeds[i] for i in order[:half]]
    probe_half = [seeds[i] for i in order[half:]]
    demos = build_demonstrations(
        train_half, args.demos, {"critic": 1.0}, seed=args.seed, exclude=sage_env.load_validation()
    )
    probe_ids = {t.task_id for t in probe_half}
    assert not any(set(d.task_ids) & probe_ids for d in demos), "a probe task is a demonstration"
    assert not overlapping(demos, sage_env.load_validation())
    probes = [
        critic_probe.probe_set(probe_half, args.items, seed=100 + d, config=EnvConfig())
        for d in range(args.draws)
    ]
    result = {
        "model": args.model,
        "demos": len(demos),
        "batch": args.batch,
        "lr": args.lr,
        "items": args.items,
        "draws": args.draws,
        "checkpoints": [{"step": 0, "draws": measure(policy, probes, args.seed)}],
    }
    print("step 0", result["checkpoints"][0]["draws"], flush=True)
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=args.lr)
    warm = max(1, checkpoints[-1] // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warm))
    rng = random.Random(args.seed + 1)
    queue: list[int] = []
    train_s = 0.0
    for step in range(1, checkpoints[-1] + 1):
        batch = []
        for _ in range(args.batch):
            if not queue:
                queue = list(range(len(demos)))
                rng.shuffle(queue)
            batch.append(demos[queue.pop()])
        t0 = time.perf_counter()
        policy.train(True)
        loss = supervised_step(policy, optimizer, batch, 640)
        sched.step()
        policy.train(False)
        train_s += time.perf_counter() - t0
        if step in checkpoints:
            draws = measure(policy, probes, args.seed)
            row = {"step": step, "loss": round(loss, 4), "draws": draws}
            result["checkpoints"].append(row)
            print(f"step {step}", row, flush=True)
    result["seconds_per_step"] = round(train_s / checkpoints[-1], 2)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    plot(result, out.with_suffix(".png"))
    print("->", out)
    return result


if __name__ == "__main__":
    main()

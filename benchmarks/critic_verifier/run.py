"""Does the critic use a proposal's verifier? Probe AUC with and without it.

``EnvConfig.critic_sees_verifier`` shows the critic the proposed answer (math) or tests (code)
when it scores a question. This asks the critic probe (``sage_env.diagnostics.critic_probe``) both
ways on the same seed picks: question only (corruptions: shuffled, truncated, spliced) and question
+ verifier (the same corruptions plus ``wrong_verifier``: an intact question with another seed's
answer or tests). Per arm it reports the AUC of q over all items and per corruption, the score
gap and the parse rate, for ``--repeats`` probe seeds (the AUC's standard error at 24 items is
about 0.1, so one draw decides nothing).

With ``--corruptions near_miss,wrong_verifier`` every corrupted item is a wrong answer to an
intact question: its own answer (tests) changed to a near miss (``near_miss``: 391 -> 392) or
another seed's (``wrong_verifier``). The question-only arm then shows intact questions
alone, so its AUC is chance by construction (the control); the question+verifier arm asks
whether the critic checks the answer.

Writes ``benchmarks/critic_verifier/results/critic_verifier.json`` (``--out``).

Usage::

    python -m benchmarks.critic_verifier.run                    # default model, CPU, ~6 min
    python -m benchmarks.critic_verifier.run --model PATH --items 4 --repeats 1
    python -m benchmarks.critic_verifier.run --corruptions near_miss,wrong_verifier \
        --repeats 2 --out benchmarks/critic_verifier/results/wrong_answers.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from learners.evaluation import critic_replies
from learners.policy import DEFAULT_MODEL, HFPolicy
from sage_env import EnvConfig
from sage_env.diagnostics import critic_probe
from sage_env.tasks.task import load_seeds

OUT = Path(__file__).parent / "results" / "critic_verifier.json"


def arm(
    policy, seeds, sees: bool, items: int, repeat: int, corruptions: tuple[str, ...] | None = None
) -> dict:
    """One probe draw scored by the policy's critic; AUC overall and per corruption."""
    probe = critic_probe.probe_set(
        seeds,
        items,
        seed=repeat,
        config=EnvConfig(critic_sees_verifier=sees),
        corruptions=corruptions,
    )
    replies = critic_replies(policy, probe, seed=repeat)
    report = critic_probe.discrimination(probe, replies)
    per_kind = {}
    for kind in sorted({it.corruption for it in probe if not it.intact}):
        keep = [i for i, it in enumerate(probe) if it.intact or it.corruption == kind]
        sub = critic_probe.discrimination([probe[i] for i in keep], [replies[i] for i in keep])
        per_kind[kind] = round(sub.auc, 3)
    return {
        "auc": round(report.auc, 3),
        "gap": round(report.gap, 3),
        "parse_rate": round(report.parse_rate, 3),
        "auc_by_corruption": per_kind,
        "n": report.n,
    }


def main(argv: list[str] | None = None) -> dict:
    """Run both arms; write and return the result."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=DEFAULT_MODEL, help="model alias, hub id or path")
    p.add_argument("--items", type=int, default=32, help="probe items per draw")
    p.add_argument("--repeats", type=int, default=3, help="probe draws (seeds) per arm")
    p.add_argument("--out", default=str(OUT), help="JSON output path")
    p.add_argument(
        "--corruptions",
        default="",
        help="comma-separated corruption kinds of both arms (critic_probe.CORRUPTIONS, "
        "wrong_verifier, near_miss); default: the probe's own",
    )
    args = p.parse_args(argv)
    corruptions = tuple(k for k in args.corruptions.split(",") if k) or None
    policy = HFPolicy(args.model, device="cpu")
    seeds = load_seeds()
    t0 = time.perf_counter()
    result = {"model": args.model, "items": args.items, "draws": {}}
    if corruptions:
        result["corruptions"] = list(corruptions)
    for sees in (False, True):
        name = "question+verifier" if sees else "question only"
        result["draws"][name] = [
            arm(policy, seeds, sees, args.items, r, corruptions) for r in range(args.repeats)
        ]
        aucs = [d["auc"] for d in result["draws"][name]]
        result.setdefault("mean_auc", {})[name] = round(sum(aucs) / len(aucs), 3)
        print(name, aucs)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["mean_auc"]), "->", args.out)
    return result


if __name__ == "__main__":
    main()

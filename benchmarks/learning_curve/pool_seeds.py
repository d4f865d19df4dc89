r"""Pool the variant-against-plain comparisons of several learning-curve runs (one per seed).

Each ``summary.json`` (:func:`benchmarks.learning_curve.run.write_summary`) holds, per variant
arm, its final model against the plain arm's on the same items (``pairs``). Seeds train
different runs on the same held-out items, so the pooled test counts every (seed, item) pair:
the exact McNemar test on the summed discordant pairs (McNemar 1947), beside each seed's own.
Also pooled: each arm's mean final accuracy and its gain over the base model.

Usage::

    python -m benchmarks.learning_curve.pool_seeds runs/precision_seed*/summary.json \
        --out benchmarks/learning_curve/results/precision/pooled.json

Writes ``pooled.json`` and ``pooled.md`` (a table) beside it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from learners.evaluation.heldout import mcnemar_exact


def pool(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """Pooled pairs and arms of ``summaries`` (loaded ``summary.json`` files, one per seed).

    Returns:
        ``{"seeds": [...], "pairs": {pair: {set: {"variant_only", "plain_only", "pairs",
        "p_value", "variant", "plain", "per_seed": [...]}}}, "arms": {arm: {set: {"final",
        "base", "gained", "lost", "runs"}}}}``; accuracies are means over the seeds.

    Raises:
        ValueError: if the summaries were scored on different base models or sets.
    """
    if not summaries:
        raise ValueError("no summaries to pool")
    keys = {json.dumps(s["base_key"], sort_keys=True) for s in summaries}
    if len(keys) != 1:
        raise ValueError(f"the summaries have different base models or sets: {sorted(keys)}")
    pairs: dict[str, dict[str, Any]] = {}
    for s in summaries:
        seed = s["config"]["seed"]
        for pair, rows in s.get("pairs", {}).items():
            for name, r in rows.items():
                p = pairs.setdefault(pair, {}).setdefault(
                    name, {"variant_only": 0, "plain_only": 0, "pairs": 0, "per_seed": []}
                )
                p["variant_only"] += r["variant_only"]
                p["plain_only"] += r["plain_only"]
                p["pairs"] += r["items"]
                p["per_seed"].append({"seed": seed, **r})
    for rows in pairs.values():
        for p in rows.values():
            a, b = p["variant_only"], p["plain_only"]
            p["p_value"] = mcnemar_exact([False] * a + [True] * b, [True] * a + [False] * b)[2]
            p["variant"] = sum(r["variant"] for r in p["per_seed"]) / len(p["per_seed"])
            p["plain"] = sum(r["plain"] for r in p["per_seed"]) / len(p["per_seed"])
    arms: dict[str, dict[str, Any]] = {}
    for s in summaries:
        for arm, result in s["protocols"].items():
            for name, st in result["sets"].items():
                a = arms.setdefault(arm, {}).setdefault(
                    name, {"final": 0.0, "base": st["base"], "gained": 0, "lost": 0, "runs": 0}
                )
                a["final"] += st["final"]
                a["gained"] += st["gained"]
                a["lost"] += st["lost"]
                a["runs"] += 1
    for rows in arms.values():
        for a in rows.values():
            a["final"] /= a["runs"]
    return {"seeds": [s["config"]["seed"] for s in summaries], "pairs": pairs, "arms": arms}


def markdown(pooled: dict[str, Any]) -> str:
    """Two tables: each arm's mean final accuracy, and each pooled variant-vs-plain test."""
    lines = [
        "| arm | held-out set | runs | base | mean final | gained / lost (all runs) |",
        "|---|---|---|---|---|---|",
    ]
    for arm, rows in pooled["arms"].items():
        for name, a in rows.items():
            lines.append(
                f"| {arm} | {name} | {a['runs']} | {a['base']:.3f} | {a['final']:.3f} | "
                f"{a['gained']} / {a['lost']} |"
            )
    lines += [
        "",
        "| variant vs plain arm | held-out set | (seed, item) pairs | variant mean | plain mean "
        "| only variant / only plain | McNemar p (pooled) | per seed: only variant / only plain |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for pair, rows in pooled["pairs"].items():
        for name, p in rows.items():
            seeds = ", ".join(
                f"{r['seed']}: {r['variant_only']} / {r['plain_only']}" for r in p["per_seed"]
            )
            lines.append(
                f"| {pair} | {name} | {p['pairs']} | {p['variant']:.3f} | {p['plain']:.3f} | "
                f"{p['variant_only']} / {p['plain_only']} | {p['p_value']:.3g} | {seeds} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: summary files, ``--out`` the pooled JSON (a ``.md`` table beside it)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("summaries", nargs="+", help="summary.json of each seed's run")
    parser.add_argument("--out", required=True, help="the pooled JSON to write")
    args = parser.parse_args(argv)
    pooled = pool([json.loads(Path(p).read_text()) for p in args.summaries])
    pooled["sources"] = args.summaries
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(pooled, indent=2) + "\n")
    table = markdown(pooled)
    out.with_suffix(".md").write_text(table + "\n")
    print(table)
    return pooled


if __name__ == "__main__":
    main()

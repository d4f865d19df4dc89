"""How many of the demo Challenger's execution proposals are valid, per mode, after its warm-up?

README command 1 (``python -m learners train --preset demo``) pools a self-made task only when
the Challenger's proposal is valid and passes the critic's gate. This measures the first half
cheaply, without a training run: the ``demo`` preset's policy gets the demo's own format
warm-up (``learners.training.build._warm_up``, with the critic probe's tasks and the validation
split excluded, exactly as ``build_run`` does; cached under ``$SAGE_ENV_CACHE/warmup/<key>``),
then ``--n`` Challenger observations per execution mode are read off the demo's own
environment (``sage_env.env(cfg.env)`` reset with seeds 0, 1, ... until each mode has ``n``
rounds whose reference is an ``exec`` task), sampled once each with the demo's temperature,
``challenge`` token budget and stop strings (the rollout driver's rules), and vetted by the
protocol's own :func:`sage_env.protocols.azr.vet_exec_challenge` (parse, the executor's checks
in the sandbox, the pool's duplicate check). Nothing is trained after the warm-up.

Optionally (``--gate``) each valid proposal is also reviewed by the critic as the demo's gate
reads it (the expected score of the critic's question review).

Usage::

    python -m benchmarks.perf.demo_proposals --n 32 --label baseline --out runs/demo_proposals.json

Appends one entry per run to ``--out``, rewritten after each mode (induction first):
``{"label", "commit", "settings", "warmup", "modes": {mode: {"n", "valid", "formatted",
"truncated", "reasons", "examples"}}}``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import subprocess
import tempfile
import time
from pathlib import Path


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
        dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True)
        return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return ""


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=32, help="proposals per execution mode")
    ap.add_argument("--label", default="")
    ap.add_argument("--out", default="runs/demo_proposals.json")
    ap.add_argument("--examples", type=int, default=4, help="raw replies kept per mode")
    ap.add_argument("--preset", default="demo")
    ap.add_argument(
        "--warmup-steps", type=int, default=None, help="instead of the preset's (0: none)"
    )
    args = ap.parse_args(argv)

    import sage_env
    from learners.policy import HFPolicy
    from learners.rollout import RolloutDriver
    from learners.training.build import _warm_up, sampling_config
    from learners.training.monitors import CriticProbe
    from learners.training.presets import PRESETS
    from learners.types import action_text
    from sage_env.env_setup import make_pool
    from sage_env.protocols.azr import vet_exec_challenge
    from sage_env.tasks.exec_tasks import MODES, exec_mode, load_exec_seeds

    cfg = PRESETS[args.preset]
    if args.warmup_steps is not None:
        cfg = dataclasses.replace(
            cfg, warmup=dataclasses.replace(cfg.warmup, steps=args.warmup_steps)
        )
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        policy = HFPolicy(
            cfg.model, device="cpu", dtype=cfg.dtype, seed=cfg.seed, rollout=cfg.rollout
        )
        stack.callback(policy.close)
        tasks = sage_env.load_seeds() + load_exec_seeds()
        pool = make_pool(cfg.env, tasks)
        seeds = [t for t in pool.tasks if t.source != "generated"]
        probe = CriticProbe(cfg, seeds)
        warm = _warm_up(cfg, Path(tmp), [], policy, seeds, probe, True)
        policy.sync_engine()
        warm_s = time.perf_counter() - t0

        env = sage_env.env(cfg.env, seeds=seeds, pool=make_pool(cfg.env, tasks)).unwrapped
        stack.callback(env.close)
        items: dict[str, list] = {m: [] for m in MODES}
        seed = 0
        while any(len(v) < args.n for v in items.values()) and seed < 100 * args.n:
            env.reset(seed=seed)
            seed += 1
            mode = exec_mode(env.protocol.reference)
            if env.agent_selection != "challenger_0" or mode is None or len(items[mode]) >= args.n:
                continue
            obs = dict(env.observe("challenger_0"))
            items[mode].append((obs, env.protocol.reference, list(env.protocol.exec_refs)))
        sampling = sampling_config(cfg)
        driver = RolloutDriver(
            [env], policy, sampling, cfg.phase_max_new_tokens, cfg.phase_stop_strings
        )
        budget, stops = driver.budget("challenge", "exec"), driver.stops("challenge", "exec")
        modes: dict[str, dict] = {}
        out = Path(args.out)
        runs = json.loads(out.read_text()) if out.exists() else []
        entry = {
            "label": args.label,
            "commit": _commit(),
            "machine": "2 CPU cores shared with other sessions' jobs (this ran at nice 19)",
            "settings": {
                "preset": args.preset,
                "warmup_steps": cfg.warmup.steps,
                "n_per_mode": args.n,
                "budget": budget,
                "stops": list(stops),
                "temperature": cfg.temperature,
            },
            "warmup": {k: v for k, v in warm.items() if isinstance(v, (int, float))},
            "warmup_and_load_s": round(warm_s, 1),
            "modes": modes,
        }
        runs.append(entry)
        # induction first: the mode whose validity the numbered blocks are for
        for mode in sorted(items, key=lambda m: m != "induction"):
            its = items[mode]
            t1 = time.perf_counter()
            comps = policy.generate(
                [o for o, _, _ in its], sampling, budgets=[budget] * len(its),
                stops=[stops] * len(its),
            )
            gen_s = time.perf_counter() - t1
            reasons: collections.Counter = collections.Counter()
            valid = formatted = truncated = 0
            examples = []
            for (obs, ref, refs), comp in zip(its, comps):
                text = action_text(comp)
                parsed, _check, task, _f = vet_exec_challenge(env, text, ref, refs, "sage")
                ok = task is not None
                valid += ok
                formatted += bool(parsed.get("well_formed"))
                truncated += bool(getattr(comp, "truncated", False))
                reasons[str(parsed.get("reason", ""))[:90]] += 1
                if len(examples) < args.examples or (ok and len(examples) < 2 * args.examples):
                    examples.append({"reply": text, "valid": ok, "reason": parsed.get("reason")})
            modes[mode] = {
                "n": len(its),
                "valid": valid,
                "formatted": formatted,
                "truncated": truncated,
                "reasons": dict(reasons.most_common()),
                "generate_s": round(gen_s, 1),
                "prefix": its[0][0].get("prefix", "") if its else "",
                "examples": examples,
            }
            print(f"{mode}: {valid}/{len(its)} valid; {dict(reasons.most_common(6))}", flush=True)
            entry["valid"] = sum(m["valid"] for m in modes.values())
            entry["n"] = sum(m["n"] for m in modes.values())
            entry["seconds"] = round(time.perf_counter() - t0, 1)
            out.parent.mkdir(parents=True, exist_ok=True)  # written after every mode
            out.write_text(json.dumps(runs, indent=1) + "\n")
    print(f"all: {entry['valid']}/{entry['n']} valid ({args.label})", flush=True)
    return entry


if __name__ == "__main__":
    main()

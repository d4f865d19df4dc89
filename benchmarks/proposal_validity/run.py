"""How many AZR proposals are valid? Parse and valid rates of the proposer, per mode.

For a model (a name or a path, optionally after the format warm-up that training would run
first), this samples ``--n`` proposer prompts per AZR mode (deduction, abduction, induction)
exactly as the ``azr`` protocol builds them: an environment of protocol ``azr`` on domain
``exec`` (one mode per environment, ``AZRConfig.modes``) is reset with seeds ``0..n-1`` and
the proposer's observation (system, user, response prefix) is read off it. The policy
samples one completion per prompt with the training settings of the ``demo`` preset (as
``benchmarks/learning_curve/run.py`` trains): its temperature, the ``propose`` phase's token
budget and stop strings (looked up by the rollout driver's own rules), the prompt cut to
``max_prompt_tokens``. Each reply (prefix + completion) is vetted by the protocol's own
:func:`sage_env.protocols.azr.vet_exec_proposal` (parse, then the executor's checks in the
sandbox). Reported per mode:

- ``parse_rate``: replies whose blocks parse (AZR Eq. 6's "well formatted");
- ``valid_rate``: replies that make a valid task;
- ``reasons``: histogram of the reason strings the protocol puts in
  ``infos["proposer_0"]["last"]["reason"]`` (cut to 100 characters), and ``checks``: the
  validation check that failed (``parse``, ``entry``, ``run`` ... as ``parsed.validation``;
  ``blocks``: a block is missing; ``inputs``: induction without 2 distinct literal inputs);
- ``truncated_rate``: completions that used their whole token budget;
- ``examples``: the first few raw replies with their verdicts.

``--warmup-steps K`` first runs the format warm-up as ``sage-env train --protocol azr``
would (``learners.training.build._warm_up``: the demo preset's warm-up settings with K
steps, the demonstrations of :func:`sage_env.protocols.warmup.demonstrations_for` for
``azr`` on ``exec``, the validation split excluded; cached under
``$SAGE_ENV_CACHE/warmup/<key>``, reused when there). Several ``--warmup-steps`` values are
measured one after the other, each from the base model.

Usage::

    python -m benchmarks.proposal_validity.run                            # base model, N = 16
    python -m benchmarks.proposal_validity.run --warmup-steps 0,12,48     # base, then two warm-ups
    python -m benchmarks.proposal_validity.run --model PATH --n 4 --engine hf

Writes ``benchmarks/proposal_validity/results/proposal_validity.json`` (``--out``): one entry per
model variant, ``{"label", "model", "warmup", "settings", "modes": {mode: {...}}, "overall"}``.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "results" / "proposal_validity.json"
MODES = ("deduction", "abduction", "induction")


def train_config(model: str, warmup_steps: int, engine: str, budget: int | None = None):
    """The TrainConfig an ``azr`` run on ``exec`` would use (demo preset, as learning_curve).

    ``budget``: the ``propose/exec`` token budget instead of the preset's.
    """
    from learners.engines.config import RolloutConfig
    from learners.training.config import with_protocol
    from learners.training.presets import PRESETS

    cfg = with_protocol(PRESETS["demo"], "azr")
    env = dataclasses.replace(cfg.env, domains=("exec",))
    warm = dataclasses.replace(cfg.warmup, steps=warmup_steps)
    budgets = dict(cfg.phase_max_new_tokens)
    if budget is not None:
        budgets["propose/exec"] = budget
    return dataclasses.replace(
        cfg,
        phase_max_new_tokens=budgets,
        model=model,
        env=env,
        warmup=warm,
        rollout=dataclasses.replace(RolloutConfig(), engine=engine),
        device="cpu",
    )


def warm_up(cfg, policy) -> dict:
    """The format warm-up exactly as training runs it (``learners.training.build._warm_up``).

    The critic probe is off in these runs (``critic_probe_size = 0`` in learning_curve), so no
    probe item is excluded; the validation split is.
    """
    import types

    import sage_env
    from learners.training.build import _warm_up
    from sage_env.env_setup import make_pool
    from sage_env.protocols.warmup import demonstrations_for

    if cfg.warmup.steps <= 0:
        return {}
    pool = make_pool(cfg.env, sage_env.load_seeds())
    seeds = [t for t in pool.tasks if t.source != "generated"]
    probe = types.SimpleNamespace(task_ids=frozenset())
    metrics = _warm_up(cfg, Path(cfg.out), [], policy, seeds, probe, False)
    policy.sync_engine()
    demos = demonstrations_for(  # the same call as _warm_up's, for the role counts
        cfg.env.protocol,
        cfg.env.domains,
        seeds,
        cfg.warmup.num_demonstrations,
        cfg.warmup.mix,
        seed=cfg.warmup.seed,
        exclude=sage_env.load_validation(),
        math_grounding=cfg.env.math_grounding,
    )
    roles = collections.Counter(d.role for d in demos)
    return {**metrics, "demonstrations": len(demos), "roles": dict(roles)}


def prompts(cfg, mode: str, n: int) -> tuple[object, list[tuple[dict, object, list]]]:
    """``(env, [(observation, reference, references), ...])``: n proposer prompts of ``mode``.

    The environment draws them itself (``reset(seed=i)``, the ``azr`` protocol's ``start``).
    """
    import sage_env

    settings = dataclasses.replace(cfg.env.protocol_config, modes=(mode,))
    env = sage_env.env(cfg.env, protocol_config=settings).unwrapped
    out = []
    for i in range(n):
        env.reset(seed=i)
        assert env.agent_selection == "proposer_0" and env.protocol.mode == mode
        obs = dict(env.observe("proposer_0"))
        out.append((obs, env.protocol.reference, list(env.protocol.references)))
    return env, out


def measure(cfg, policy, n: int, keep: int) -> dict:
    """Sample and vet ``n`` proposals per mode; the figures of the module docstring."""
    from learners.rollout import RolloutDriver
    from learners.training.build import sampling_config
    from learners.types import action_text
    from sage_env.protocols.azr import vet_exec_proposal

    sampling = sampling_config(cfg)
    modes = {}
    for mode in MODES:
        env, items = prompts(cfg, mode, n)
        try:
            driver = RolloutDriver(
                [env], policy, sampling, cfg.phase_max_new_tokens, cfg.phase_stop_strings
            )
            budget, stops = driver.budget("propose", "exec"), driver.stops("propose", "exec")
            t0 = time.perf_counter()
            comps = policy.generate(
                [o for o, _, _ in items], sampling, budgets=[budget] * n, stops=[stops] * n
            )
            gen_s = time.perf_counter() - t0
            reasons: collections.Counter = collections.Counter()
            checks: collections.Counter = collections.Counter()
            formatted = valid = truncated = 0
            examples = []
            for (obs, ref, refs), comp in zip(items, comps):
                text = action_text(comp)
                ok_format, ok, reason, _task, fields = vet_exec_proposal(
                    env, mode, text, ref, refs, cfg.env.protocol_config
                )
                formatted += ok_format
                valid += ok
                cut = bool(getattr(comp, "truncated", False))
                truncated += cut
                reasons[reason[:100]] += 1
                checks[fields.get("validation", "blocks" if not ok_format else "inputs")] += 1
                if len(examples) < keep:
                    examples.append(
                        {
                            "reply": text,
                            "formatted": ok_format,
                            "valid": ok,
                            "reason": reason,
                            "truncated": cut,
                        }
                    )
        finally:
            env.close()
        modes[mode] = {
            "n": n,
            "parse_rate": formatted / n,
            "valid_rate": valid / n,
            "truncated_rate": truncated / n,
            "reasons": dict(reasons.most_common()),
            "checks": dict(checks.most_common()),
            "prefix": items[0][0]["prefix"],
            "budget_tokens": budget,
            "stops": list(stops),
            "generate_s": round(gen_s, 1),
            "examples": examples,
        }
    total = n * len(MODES)
    overall = {
        "n": total,
        "parse_rate": sum(m["parse_rate"] * n for m in modes.values()) / total,
        "valid_rate": sum(m["valid_rate"] * n for m in modes.values()) / total,
    }
    return {"modes": modes, "overall": overall}


def run_variant(model: str, warmup_steps: int, args) -> dict:
    """Load ``model``, warm it up (K > 0), and measure it."""
    from learners.policy import HFPolicy

    cfg = train_config(model, warmup_steps, args.engine, args.budget)
    policy = HFPolicy(model, device="cpu", seed=args.seed, rollout=cfg.rollout)
    try:
        t0 = time.perf_counter()
        warm = warm_up(cfg, policy)
        warm_s = time.perf_counter() - t0
        result = measure(cfg, policy, args.n, args.keep)
    finally:
        policy.close()
    return {
        "label": (f"warmup {warmup_steps}" if warmup_steps else "base")
        + (f", budget {args.budget}" if args.budget else "")
        + (f", {args.label}" if args.label else ""),
        "model": model,
        "warmup": {
            **dataclasses.asdict(cfg.warmup),
            **warm,
            "seconds_here": round(warm_s, 1),
        },
        "settings": {
            "engine": args.engine,
            "temperature": cfg.temperature,
            "top_p": cfg.top_p,
            "max_prompt_tokens": cfg.max_prompt_tokens,
            "seed": args.seed,
            "protocol_config": dataclasses.asdict(cfg.env.protocol_config),
        },
        **result,
    }


def main(argv: list[str] | None = None) -> dict:
    """Run every ``--warmup-steps`` variant and write the JSON."""
    from learners.policy import DEFAULT_MODEL

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=DEFAULT_MODEL, help="model name or path")
    ap.add_argument("--n", type=int, default=16, help="prompts per mode")
    ap.add_argument(
        "--warmup-steps", default="0", help="comma-separated warm-up lengths (0: base model)"
    )
    ap.add_argument("--engine", default="ct2", choices=("ct2", "hf"))
    ap.add_argument(
        "--budget", type=int, default=None, help="propose/exec token budget (default: preset's)"
    )
    ap.add_argument("--seed", type=int, default=0, help="sampling seed")
    ap.add_argument("--keep", type=int, default=4, help="raw replies kept per mode")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--append", action="store_true", help="add to the variants in --out")
    ap.add_argument("--label", default="", help="added to each variant's label")
    args = ap.parse_args(argv)
    out = Path(args.out)
    variants = []
    if args.append and out.exists():
        variants = json.loads(out.read_text())["variants"]
    for k in [int(x) for x in args.warmup_steps.split(",")]:
        row = run_variant(args.model, k, args)
        variants.append(row)
        print(
            f"{row['label']}: parse {row['overall']['parse_rate']:.2f} valid "
            f"{row['overall']['valid_rate']:.2f} "
            + " ".join(
                f"{m}={v['parse_rate']:.2f}/{v['valid_rate']:.2f}" for m, v in row["modes"].items()
            ),
            flush=True,
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"variants": variants}, indent=1) + "\n")
    return {"variants": variants}


if __name__ == "__main__":
    main()

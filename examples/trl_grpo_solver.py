"""Tutorial: train a solver with TRL's GRPOTrainer on the sage-env pool (docs/guide/trl.md).

The dataset is our tasks (the 500 seeds, or a run's pool JSONL with its self-made tasks), each
row the environment's solver prompt as chat messages; the reward function scores every
completion with our verifiers (math-verify; code run in the sandbox), exactly as the
environment scores a solver reply. This trains the solver only: the four-role game needs
``sage-env train``.

Needs TRL (``pip install trl==1.16.0``: it changes none of our pins). A CPU smoke run on the
tiny random model (no download), two steps:

    python examples/trl_grpo_solver.py --tiny --steps 2 --out runs/trl-tiny

A real run: ``--model HuggingFaceTB/SmolLM2-135M-Instruct`` (or a local path) and a pool
written by ``sage-env train`` (``--pool runs/demo/pool.jsonl``; the seeds without it).
"""

from __future__ import annotations

import argparse
import tempfile

from learners.trl_solver import SolverReward, load_tasks, solver_dataset


def main(argv: list[str] | None = None) -> dict:
    """Parse the flags, train, return the last logged metrics."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a model id or path (default: --tiny)")
    ap.add_argument("--tiny", action="store_true", help="the tiny random test model")
    ap.add_argument("--pool", default=None, help="a pool JSONL (default: the 500 seeds)")
    ap.add_argument("--domains", default="math,code", help="comma-separated task domains")
    ap.add_argument("--limit", type=int, default=64, help="at most this many tasks")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--generations", type=int, default=2, help="completions per prompt")
    ap.add_argument("--max-completion-length", type=int, default=64)
    ap.add_argument("--text-prompts", action="store_true", help="render prompts + env prefix")
    ap.add_argument("--out", default="runs/trl-solver")
    args = ap.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    model_path = args.model
    if model_path is None or args.tiny:
        from learners.policy.tiny import build_tiny_model

        model_path = build_tiny_model(tempfile.mkdtemp(prefix="tiny-"))
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    tasks = load_tasks(args.pool, domains=args.domains.split(","))[: args.limit]
    reward = SolverReward(tasks)
    config = GRPOConfig(
        output_dir=args.out,
        max_steps=args.steps,
        per_device_train_batch_size=args.generations,
        num_generations=args.generations,
        max_completion_length=args.max_completion_length,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=not torch.cuda.is_available(),
        bf16=torch.cuda.is_available(),  # TRL's default bf16=True refuses a CPU
    )
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_path),
        reward_funcs=[reward],
        args=config,
        train_dataset=solver_dataset(tasks, tokenizer if args.text_prompts else None),
        processing_class=tokenizer,
    )
    try:
        trainer.train()
    finally:
        reward.close()
    logged = [h for h in trainer.state.log_history if "reward" in h]
    last = logged[-1] if logged else {}
    print({k: v for k, v in last.items() if k.startswith(("reward", "step"))})
    return last


if __name__ == "__main__":
    main()

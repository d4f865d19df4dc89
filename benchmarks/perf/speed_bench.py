"""Learner speed and memory, each comparison in one run on one machine (issue 5).

1. Rollout overhead: ``HFPolicy.generate`` (what the rollout driver calls) vs a bare
   ``model.generate`` on the same prompts, token budget and batch (EOS suppressed so both
   produce exactly ``--tokens`` tokens per sequence). Target: at most 1.05x the bare time.
2. One RL iteration (generate, reward, update) of our GRPO-style learner vs TRL's
   ``GRPOTrainer`` on the same model, prompts, group size and lengths (TRL must be
   installed: ``pip install trl``). Target: at most 1.0x TRL.
3. Peak memory (RSS) of one training step with and without gradient checkpointing.

On a CUDA machine, ``--model qwen0.5b-random`` builds a randomly initialised
Qwen2.5-0.5B-shaped model in bf16 and the same figures are recorded (tokens/s, step time).

Writes ``benchmarks/perf/results/speed_bench.json``.
Usage:
``python -m benchmarks.perf.speed_bench [--prompts 8] [--group 4] [--tokens 64] [--repeats 3]``
(``--repeats`` interleaved ours/TRL pairs; the medians and every run are recorded).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

RESULTS = Path(__file__).parent / "results"
PROMPTS = [
    "What is 17 * 23? Put the final answer in \\boxed{}.",
    "A train travels 60 km/h for 3 hours. How far does it go? Answer in \\boxed{}.",
    "Write a Python function add(a, b) that returns a + b.",
    "What is the sum of the first 10 positive integers? Answer in \\boxed{}.",
    "Simplify (x^2 - 1) / (x - 1). Answer in \\boxed{}.",
    "Write a Python function is_even(n) returning True for even n.",
    "How many minutes are in 3.5 hours? Answer in \\boxed{}.",
    "What is 2^10? Put the final answer in \\boxed{}.",
]


def reward_fn(texts: list[str]) -> list[float]:
    """A cheap stand-in reward: 1 if the completion contains a \\boxed{} or a def."""
    return [float("\\boxed{" in t or "def " in t) for t in texts]


def bench_generate(policy, n_prompts: int, group: int, tokens: int, repeats: int = 2) -> dict:
    from learners.policy import SamplingConfig

    obs = [{"system": "You are helpful.", "user": p} for p in PROMPTS[:n_prompts]] * group
    sampling = SamplingConfig(max_new_tokens=tokens, min_new_tokens=tokens, batch_size=len(obs))
    tok = policy.tokenizer
    ids = [policy.encode_prompt(o, 1024) for o in obs]
    width = max(map(len, ids))
    input_ids = torch.full((len(ids), width), tok.pad_token_id)
    attn = torch.zeros_like(input_ids)
    for r, p in enumerate(ids):
        input_ids[r, width - len(p) :] = torch.tensor(p)
        attn[r, width - len(p) :] = 1
    input_ids, attn = input_ids.to(policy.device), attn.to(policy.device)
    policy.generate(obs[:2], sampling)  # warm-up
    ours, bare = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        policy.generate(obs, sampling)
        ours.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        with torch.no_grad():
            policy.model.generate(
                input_ids=input_ids,
                attention_mask=attn,
                do_sample=True,
                max_new_tokens=tokens,
                min_new_tokens=tokens,
                top_k=0,
                pad_token_id=tok.pad_token_id,
            )
        bare.append(time.perf_counter() - t0)
    n_tok = len(obs) * tokens
    return {
        "sequences": len(obs),
        "tokens_per_sequence": tokens,
        "ours_s": min(ours),
        "bare_s": min(bare),
        "ratio": min(ours) / min(bare),
        "ours_tokens_per_s": n_tok / min(ours),
        "bare_tokens_per_s": n_tok / min(bare),
    }


def bench_ours_iteration(
    model_path: str, n_prompts: int, group: int, tokens: int, device: str, iters: int = 2
) -> dict:
    from learners.algorithms.grpo import GRPOLearner
    from learners.algorithms.pg import PGConfig
    from learners.policy import HFPolicy, SamplingConfig
    from learners.types import Transition

    policy = HFPolicy(model_path, device=device)
    learner = GRPOLearner(
        policy, PGConfig(lr=1e-6, micro_batch_size=8, gradient_checkpointing=False)
    )
    obs = [{"system": "You are helpful.", "user": p} for p in PROMPTS[:n_prompts]] * group
    sampling = SamplingConfig(max_new_tokens=tokens, batch_size=len(obs))
    times = []
    for _ in range(iters + 1):
        t0 = time.perf_counter()
        comps = policy.generate(obs, sampling)
        rewards = reward_fn([c.text for c in comps])
        learner.observe(
            [
                Transition(
                    "solver_0",
                    "solver",
                    "math",
                    "solve",
                    c.prompt_ids,
                    c.completion_ids,
                    c.logprobs,
                    c.text,
                    reward=r,
                )
                for c, r in zip(comps, rewards)
            ]
        )
        learner.update()
        times.append(time.perf_counter() - t0)
    return {"iteration_s": min(times[1:]), "all_s": times}


def bench_trl_iteration(
    model_path: str, n_prompts: int, group: int, tokens: int, iters: int = 2
) -> dict:
    try:
        from datasets import Dataset
        from transformers import TrainerCallback
        from trl import GRPOConfig, GRPOTrainer
    except ImportError as exc:
        return {"skipped": f"TRL not installed ({exc}); pip install trl"}

    stamps: list[float] = []

    class Stamp(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            stamps.append(time.perf_counter())

    def reward(completions, **kw):
        texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
        return reward_fn(texts)

    data = Dataset.from_list(
        [
            {
                "prompt": [
                    {"role": "system", "content": "You are helpful."},
                    {"role": "user", "content": p},
                ]
            }
            for p in PROMPTS[:n_prompts]
        ]
    )
    cfg = GRPOConfig(
        output_dir="/tmp/trl-bench",
        per_device_train_batch_size=n_prompts * group,
        num_generations=group,
        max_completion_length=tokens,
        max_steps=iters + 1,
        learning_rate=1e-6,
        logging_steps=1000,
        save_strategy="no",
        report_to=[],
        use_cpu=not torch.cuda.is_available(),
        beta=0.0,
        temperature=1.0,
        gradient_accumulation_steps=1,
        bf16=torch.cuda.is_available(),
    )
    trainer = GRPOTrainer(
        model=model_path, reward_funcs=reward, args=cfg, train_dataset=data, callbacks=[Stamp()]
    )
    t0 = time.perf_counter()
    trainer.train()
    steps = [b - a for a, b in zip([t0] + stamps[:-1], stamps)]
    return {"iteration_s": min(steps[1:]) if len(steps) > 1 else steps[0], "all_s": steps}


def bench_memory(model_path: str, checkpointing: bool) -> dict:
    """Peak RSS of one update, in a fresh process.

    Read from ``VmHWM`` in ``/proc/self/status``: ``ru_maxrss`` survives ``exec`` on Linux, so a
    child of a large parent would report the parent's peak.
    """
    code = f"""
import json, torch
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

from learners.policy import HFPolicy, SamplingConfig
from learners.algorithms.pg import PGConfig
from learners.algorithms.trr import TRRLearner
from learners.types import Transition
p = HFPolicy({model_path!r}, device="cpu")
obs = [{{"system": "s", "user": "Explain addition in detail."}}] * 8
comps = p.generate(obs, SamplingConfig(max_new_tokens=128, min_new_tokens=128))
before = hwm()
l = TRRLearner(p, PGConfig(micro_batch_size=8, gradient_checkpointing={checkpointing}))
l.observe([Transition("solver_0","solver","math","solve",c.prompt_ids,c.completion_ids,
           c.logprobs,c.text,reward=float(i % 2)) for i, c in enumerate(comps)])
l.update()
after = hwm()
print(json.dumps({{"peak_rss_mb": after, "before_update_mb": before}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1800)
    line = [x for x in out.stdout.splitlines() if x.startswith("{")]
    result = json.loads(line[-1]) if line else {"error": out.stderr[-500:]}
    result["gradient_checkpointing"] = checkpointing
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--skip-trl", action="store_true")
    ap.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="interleaved ours/TRL iteration pairs; medians are reported (single runs drift)",
    )
    ap.add_argument(
        "--only-memory",
        action="store_true",
        help="re-measure the memory part and merge it into the results file",
    )
    args = ap.parse_args()
    from learners.policy import HFPolicy, resolve_model

    device = "cuda" if torch.cuda.is_available() else "cpu"
    path = resolve_model(args.model) if args.model != "qwen0.5b-random" else _random_qwen()
    if args.only_memory:
        out = RESULTS / "speed_bench.json"
        result = json.loads(out.read_text()) if out.exists() else {}
        result["memory"] = [bench_memory(path, False), bench_memory(path, True)]
        out.write_text(json.dumps(result, indent=2))
        print(json.dumps(result["memory"], indent=2))
        return
    result = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "device": device,
            "cuda": torch.cuda.get_device_name(0) if device == "cuda" else None,
        },
        "model": args.model,
        "prompts": args.prompts,
        "group": args.group,
        "tokens": args.tokens,
    }
    policy = HFPolicy(path, device=device)
    result["generate"] = bench_generate(policy, args.prompts, args.group, args.tokens)
    del policy
    gc.collect()
    ours_runs, trl_runs = [], []
    for _ in range(max(1, args.repeats)):  # interleaved, so drift hits both sides alike
        ours_runs.append(bench_ours_iteration(path, args.prompts, args.group, args.tokens, device))
        gc.collect()
        if not args.skip_trl:
            trl_runs.append(bench_trl_iteration(path, args.prompts, args.group, args.tokens))
            gc.collect()
    result["ours_grpo_iteration"] = _median_run(ours_runs)
    result["ours_grpo_iteration_s_runs"] = [r["iteration_s"] for r in ours_runs]
    if trl_runs:
        result["trl_grpo_iteration"] = _median_run(trl_runs)
        times = [r.get("iteration_s") for r in trl_runs]
        result["trl_grpo_iteration_s_runs"] = times
        trl_s = result["trl_grpo_iteration"].get("iteration_s")
        if trl_s:
            result["iteration_ratio_ours_over_trl"] = (
                result["ours_grpo_iteration"]["iteration_s"] / trl_s
            )
            result["iteration_ratio_runs"] = [
                o["iteration_s"] / t for o, t in zip(ours_runs, times) if t
            ]
    if device == "cpu":
        result["memory"] = [bench_memory(path, False), bench_memory(path, True)]
    result["peak_rss_mb_this_process"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "speed_bench.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


def _median_run(runs: list[dict]) -> dict:
    """The run whose ``iteration_s`` is the median (lower median for an even count)."""
    timed = sorted((r for r in runs if r.get("iteration_s")), key=lambda r: r["iteration_s"])
    if not timed:
        return runs[-1]
    return {**timed[(len(timed) - 1) // 2], "runs": len(timed)}


def _random_qwen() -> str:
    """A randomly initialised Qwen2.5-0.5B-shaped model (bf16) for GPU speed runs."""
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from learners.policy import resolve_model

    out = Path("/tmp/qwen0.5b-random")
    if not (out / "config.json").exists():
        cfg = Qwen2Config(
            vocab_size=151936,
            hidden_size=896,
            intermediate_size=4864,
            num_hidden_layers=24,
            num_attention_heads=14,
            num_key_value_heads=2,
            max_position_embeddings=32768,
            tie_word_embeddings=True,
        )
        Qwen2ForCausalLM(cfg).to(torch.bfloat16).save_pretrained(out)
        # the SmolLM2 tokenizer stands in (vocab ids beyond it are simply never sampled)
        AutoTokenizer.from_pretrained(resolve_model("smollm2-135m-instruct")).save_pretrained(out)
    return str(out)


if __name__ == "__main__":
    main()

"""Named starting points of ``sage-env train --preset NAME``: demo, debug, paper, paper-1gpu."""

from __future__ import annotations

from learners.algorithms.pg import PGConfig
from learners.engines import RolloutConfig
from learners.policy import LoRAConfig
from learners.training.config import TrainConfig
from learners.training.warmup import WarmupConfig
from sage_env import EnvConfig, RewardConfig

DEMO_BUDGETS = {
    "challenge": 192,
    "propose": 192,
    "review_question": 40,
    "review_plan": 40,
    "judge_question": 40,
    "judge_answer": 40,
    "plan": 96,
    "probe": 112,
    "solve": 112,
}
"""Per-phase token budgets of the ``demo`` preset: a code proposal needs room for tests and a
solution, a math proposal for its answer program (``math_grounding="program"``: the warm-up's
math targets are a median 112 tokens, at most 175, against 65 without one), an execution
proposal for a program and its input (at 160, 6 of 80 in the exec20 growth check were cut
before their input block); a critic reply is a score and one sentence."""

DEMO_STOPS: dict[str, tuple[str, ...]] = {
    "challenge": ("</answer>", "</solution>"),
    "propose": ("</answer>", "</solution>"),
    "plan": ("</plan>",),
    "probe/code": ("```",),
    "solve/code": ("```",),
    # an execution task's answer prefix opens its block: the closing fence ends the answer
    "probe/exec": ("```",),
    "solve/exec": ("```",),
}
"""Stop strings of the ``demo`` preset: the closing tag or code fence that ends what the
parser reads (a code answer's prefix opens the fence, so the first fence closes it)."""

PRESETS: dict[str, TrainConfig] = {
    "demo": TrainConfig(
        # 12 steps: with int8 rollouts (below) a 4-round step took 51-63 s on 2 idle cores
        # (README command 1 on a clean clone of 95066bf: 21 min 35 s with the install; issue
        # 35's target; docs/write-ups/demo-run.md)
        steps=12,
        # 4 rounds: wide ticks cut a step's generate calls from 4 to 3, but with ct2 the
        # step was not faster (ct2 splits a call by prompt length), so 8 rounds would double
        # the step (docs/write-ups/speed.md, "Wide ticks and a lean update")
        rounds_per_step=4,
        # validation and the critic probe at steps 0, 6 and 12: each pass cost about 62 s of
        # a 21.6-minute command 1 at val_every = 4 (docs/write-ups/demo-run.md)
        val_every=6,
        val_limit=16,
        val_max_new_tokens=128,
        max_new_tokens=96,
        phase_max_new_tokens=dict(DEMO_BUDGETS),
        phase_stop_strings=dict(DEMO_STOPS),
        temperature=0.7,
        # read from score distributions (one forward pass each), so 96 items cost seconds
        critic_probe_size=96,
        # the demo's figure a user can trust: 100 held-out execution tasks (never trained
        # on), scored greedily on the untouched model, after the warm-up and at the end
        # (docs/write-ups/demo-run.md, "The demo run")
        heldout="exec_heldout:100:16",
        gate_calibration=True,
        # a gate per domain: the critic probe holds execution questions too, and the critic
        # scored the demo's valid exec proposals at q = 0.22-0.28 while the gate, calibrated on
        # math/code questions alone, asked 0.25-0.29 (0 of 48 proposals pooled; issue 47;
        # docs/write-ups/demo-run.md)
        gate_per_domain=True,
        # and never rejecting more than a quarter of the probe's intact seed questions: the
        # critic ranks execution questions (AUC 0.75-0.84) on a compressed scale, where Youden's
        # threshold passed 37-77% of the intact seeds (issue 47; the gate passed 2 of the last
        # demo run's 11 valid exec proposals)
        gate_intact_pass=0.75,
        # the Challenger's execution demonstrations ask for what the validator needs: induction
        # writes numbered input blocks (```input 1, ```input 2 ...; its 9 proposals of the demo
        # run before this held one input each) and deduction/abduction demonstrate one-argument
        # programs (a missing argument broke 6 of their 20); benchmarks/perf/demo_proposals.py counts the
        # valid proposals per mode after this warm-up (docs/write-ups/demo-run.md, "Self-made
        # tasks in the pool")
        warmup=WarmupConfig(
            steps=12, mix={"challenger": 0.7, "critic": 0.3}, num_demonstrations=48, lr=1e-4
        ),
        env=EnvConfig(
            # the math and code seeds and the execution seeds (AZR's program tasks, whose
            # truth the executor computes): execution tasks are what the default model
            # learned in the learning curve (docs/write-ups/learning.md, "Learning curve")
            domains=("math", "code", "exec"),
            # four rounds in five (and their share of the warm-up's demonstrations) on exec:
            # the 135M Challenger's math and code proposals were valid 0 of 19 in each of
            # three demo runs at two in three (claims that disagree with their own program,
            # code failing its own tests) against 6, 11 and 9 of about 29 exec proposals,
            # whose truth the sandbox computes (docs/write-ups/demo-run.md, "Self-made tasks
            # in the pool"); the pool's growth (issue 47 item 8) needs the exec rounds
            domain_weights={"exec": 8.0},
            # the induction proposer gets a one-argument program: with programs of two to four
            # arguments the 135M Challenger wrote one-argument inputs in 4 of 12 induction
            # proposals even with the arity stated in its prompt (1 of 12 valid;
            # docs/write-ups/demo-run.md, "Self-made tasks in the pool")
            exec_induction_one_argument=True,
            solver_samples=2,
            # the round's two halves alternate, so a step's rounds make 3 generate calls of
            # up to 2, 2 and 4 rows a round instead of 6 narrower ones (docs/guide/training.md,
            # "Wide ticks"); a new question is planned from the next round on
            turn_order="interleaved",
            # CPU seconds per test: the seed programs need milliseconds, and a 135M model's
            # infinite loop cost 3 tests x 10 s per answer (64 s of one 135 s demo step)
            code_timeout_s=2.0,
            # a math proposal's answer is computed by its own program, not taken on its
            # word (not in the paper; docs/reference/rewards.md, "Math grounding")
            math_grounding="program",
            rewards=RewardConfig(
                # the critic's plan reviews are half format, half how well p predicted the
                # solver (not in the paper: a critic whose every reply parses otherwise gets
                # no gradient)
                critic_plan_grounding=0.5,
                # gates read the critic's expected score, not one noisy sample (not in the
                # paper; docs/reference/rewards.md, "Expected-score gate")
                critic_score_estimate="expected",
                # a math or code task that no probe solves earns no difficulty and joins no
                # pool (AZR's learnability; the default, not the paper's d = 1 - r: with a
                # wrong stored answer every right probe fails; docs/reference/rewards.md,
                # "Difficulty rule")
                difficulty_rule="learnability",
            ),
        ),
        # micro-batches of at most 1024 padded tokens: a micro-batch of 4 long sequences held
        # 5 GB of activations; with activation checkpointing the demo's own second update
        # peaked at 3.4 GB instead of 4.8 GB, at 1.2-1.3x its seconds (docs/write-ups/memory.md,
        # "Where the memory goes"; benchmarks/perf/results/demo_memory.json)
        # int8 rollouts corrected by truncated importance sampling (FlashRL's recipe, cap 2 on
        # p_learner / p_engine): in a paired learning comparison (4 seeds, 800 paired held-out
        # items) int8 + TIS learned as well as float32 (0.164 vs 0.160, p = 0.74) at 1.9x the
        # generation tokens/s (docs/write-ups/speed.md, "Precision in the loop")
        learner=PGConfig(
            lr=1e-5,
            micro_batch_size=16,
            micro_batch_tokens=1024,
            gradient_checkpointing=True,
            tis_cap=2.0,
        ),
        # CTranslate2 on the CPU, sampling an int8 copy of the weights (validation and held-out
        # scoring decode a float32 one: RolloutConfig.ct2_greedy_float32); docs/guide/training.md,
        # "CPU speed"
        rollout=RolloutConfig(engine="ct2", ct2_compute_type="int8"),
    ),
    "debug": TrainConfig(
        out="runs/debug",
        steps=2,
        # two rounds: every built-in learner has groups of more than one sequence
        rounds_per_step=2,
        # one budget for every phase: --max-new-tokens N changes them all
        max_new_tokens=48,
        phase_stop_strings=dict(DEMO_STOPS),
        temperature=0.7,
        val_every=0,
        critic_probe_size=0,
        gate_calibration=False,
        warmup=WarmupConfig(steps=0),
        save_every=1_000_000,  # one checkpoint, at the last step
        keep_checkpoints=1,
        report_to="none",  # metrics.jsonl only
        # the default difficulty rule, "learnability" (docs/reference/rewards.md)
        env=EnvConfig(solver_samples=2),
        learner=PGConfig(lr=1e-5, micro_batch_size=4, gradient_checkpointing=False),
    ),
    "paper": TrainConfig(
        model="Qwen/Qwen2.5-7B-Instruct",
        out="runs/paper",
        steps=200,
        # per process: launched on 8 GPUs (examples/accelerate/paper_8gpu.yaml) a step plays
        # 8 x 8 = 64 rounds; one GPU of 80 GB holds a rank (docs/guide/scaling.md)
        rounds_per_step=8,
        device="cuda",
        dtype="bfloat16",
        max_new_tokens=4096,
        max_prompt_tokens=4096,
        # 8 rounds x k = 4 solver samples: one generate call per tick; the prefill of 32
        # prompts of 4096 tokens is the rollout's memory peak
        generation_batch_size=32,
        # colocated vLLM (TRL's colocate mode; unverified until run where vLLM is installed)
        rollout=RolloutConfig(engine="vllm"),
        save_every=10,
        keep_checkpoints=3,
        env=EnvConfig(
            solver_samples=4,
            math_workers=8,
            # the paper's difficulty d = 1 - r: a task no probe solves earns d = 1 and joins
            # the pool, also when its stored answer is wrong (docs/reference/rewards.md,
            # "Difficulty rule"; our default is "learnability")
            rewards=RewardConfig(difficulty_rule="inverse_accuracy"),
        ),
        learner=PGConfig(
            lr=3e-6,
            # 2 sequences of up to 8192 tokens: their 4096 completion positions' logits
            # (152k vocabulary, fp32) dominate the update's memory
            micro_batch_size=2,
            num_minibatches=4,
            gradient_checkpointing=True,
            max_seq_tokens=8192,
            # the paper trains rank-128 LoRA; it does not report alpha (2r is our choice)
            lora=LoRAConfig(r=128, alpha=256.0),
        ),
    ),
    "paper-1gpu": TrainConfig(
        model="Qwen/Qwen2.5-3B-Instruct",
        out="runs/paper-1gpu",
        steps=200,
        # one GPU plays every round: 16 rounds (a quarter of paper's 64) keep a step's
        # rollout to one generate call per tick (16 rounds x k = 4 = 64 sequences)
        rounds_per_step=16,
        device="cuda",
        dtype="bfloat16",
        # half of paper's lengths: the worst-case step time on one GPU halves, and a
        # sequence's logits in the update take half the memory (micro batch 4 instead of 2)
        max_new_tokens=2048,
        max_prompt_tokens=2048,
        generation_batch_size=64,
        # colocated vLLM (TRL's colocate mode; unverified until run where vLLM is installed)
        rollout=RolloutConfig(engine="vllm"),
        save_every=10,
        keep_checkpoints=3,
        env=EnvConfig(
            solver_samples=4,
            math_workers=8,
            # the paper's difficulty d = 1 - r: a task no probe solves earns d = 1 and joins
            # the pool, also when its stored answer is wrong (docs/reference/rewards.md,
            # "Difficulty rule"; our default is "learnability")
            rewards=RewardConfig(difficulty_rule="inverse_accuracy"),
        ),
        learner=PGConfig(
            lr=3e-6,
            micro_batch_size=4,
            num_minibatches=2,
            gradient_checkpointing=True,
            max_seq_tokens=4096,
            lora=LoRAConfig(r=128, alpha=256.0),
        ),
    ),
}
"""Named starting points: ``demo`` (CPU, minutes), ``debug`` (the smallest run for developing
a learner: 2 steps of 2 rounds, 48 tokens a phase, no warm-up, probe or validation, one
checkpoint; ``docs/guide/learners.md``), ``paper`` (Qwen2.5-7B-Instruct, LoRA
r = 128, one process per GPU on 8 GPUs of 80 GB) and ``paper-1gpu`` (Qwen2.5-3B-Instruct,
LoRA r = 128, one GPU of 80 GB). ``docs/guide/scaling.md`` has their memory arithmetic."""

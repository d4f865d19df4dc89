"""The TRL door (issue 51, item 7): our pool as a GRPO dataset, our verifiers as the reward
function, and two real GRPOTrainer steps on the tiny model whose logged rewards are our scores."""

from __future__ import annotations

import math

import pytest

from learners.trl_solver import (
    SolverReward,
    load_tasks,
    solver_dataset,
    solver_prefix,
    solver_rows,
)
from sage_env import env_scoring, rewards
from sage_env.config import EnvConfig
from sage_env.tasks.pool import TaskPool
from sage_env.tasks.task import Task
from sage_env.text import prompts
from sage_env.verifiers import CodeVerifier, MathVerifier
from tests.scripted import CODE_SEED, MATH_SEED

INC = "def inc(x):\n    return x + 1"


@pytest.fixture(scope="module")
def reward():
    fn = SolverReward([MATH_SEED, CODE_SEED])
    yield fn
    fn.close()


def test_rows_carry_the_envs_solver_observation_as_chat_messages_and_a_task_key():
    rows = solver_rows([MATH_SEED, CODE_SEED])
    for row, task in zip(rows, [MATH_SEED, CODE_SEED]):
        obs = prompts.solver(task)
        assert row["prompt"] == [
            {"role": "system", "content": obs["system"]},
            {"role": "user", "content": obs["user"]},
        ]
        assert (row["task_id"], row["domain"]) == (task.task_id, task.domain)
    assert [r["prefix"] for r in rows] == ["", "```python\n"]


def test_with_a_tokenizer_the_prompt_is_the_template_then_the_prefix(tiny_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_path)
    row = solver_rows([CODE_SEED], tokenizer=tok)[0]
    assert row["prompt"].endswith("<|im_start|>assistant\n```python\n")


def test_tasks_come_from_the_seeds_or_a_pool_jsonl_with_self_made_tasks(tmp_path):
    seeds = load_tasks(domains=["code"])
    assert len(seeds) == 87 + 109 and all(t.domain == "code" for t in seeds)
    made = Task(
        task_id="gen/1",
        domain="math",
        prompt="What is 6 times 7?",
        answer="42",
        source="generated",
        parent_id=MATH_SEED.task_id,
    )
    pool = TaskPool([MATH_SEED, CODE_SEED, made])
    pool.save(tmp_path / "pool.jsonl")
    tasks = load_tasks(tmp_path / "pool.jsonl")
    assert [t.task_id for t in tasks] == [MATH_SEED.task_id, CODE_SEED.task_id, "gen/1"]
    assert tasks[2].source == "generated"
    assert len(solver_dataset(tasks)) == 3
    with pytest.raises(ValueError, match="no task"):
        load_tasks(tmp_path / "pool.jsonl", domains=["exec"])


def _env_score(task, reply, prefix=""):
    """The environment's own scoring of a solver reply without a plan."""
    cfg = EnvConfig()
    mv, cv = MathVerifier(workers=0), CodeVerifier()
    s_gt, f, _ = env_scoring.verify(task, reply, cfg, mv, cv, prefix=prefix)
    return rewards.solver_reward(None, s_gt, f, cfg.rewards)[0]


def test_the_reward_is_the_envs_solver_reward_and_never_raises(reward):
    gold = f"\\boxed{{{MATH_SEED.answer}}}"
    code = f"```python\n{INC}\n```"
    completions = [
        [{"role": "assistant", "content": gold}],
        "\\boxed{-1}",
        None,
        12,
        "\x00 garbage 😀",
        [{"role": "assistant", "content": code}],
        "zz qq ?? unreadable",
        {"weird": object()},
    ]
    ids = [MATH_SEED.task_id] * 5 + [CODE_SEED.task_id] * 3
    got = reward(["p"] * len(ids), completions, task_id=ids)
    assert len(got) == len(ids) and all(isinstance(x, float) and math.isfinite(x) for x in got)
    assert got[0] == pytest.approx(0.8) and got[1] == pytest.approx(0.2)  # 0.6 s_gt + 0.2 f
    assert got[5] == pytest.approx(0.8)
    for i, tid in enumerate(ids):
        task = MATH_SEED if tid == MATH_SEED.task_id else CODE_SEED
        assert got[i] == pytest.approx(_env_score(task, reward.last[i].reply))
    # an unknown task, or no task_id column, scores 0 instead of raising
    assert reward(["p"], ["\\boxed{1}"], task_id=["nope"]) == [0.0]
    assert reward(["p"], ["\\boxed{1}"]) == [0.0]


def test_a_text_prompt_ending_in_the_prefix_is_scored_with_it(reward):
    prefix = solver_prefix(CODE_SEED)
    prompt = "<|im_start|>assistant\n" + prefix
    body = INC + "\n```"
    assert reward([prompt], [body], task_id=[CODE_SEED.task_id]) == [pytest.approx(0.8)]
    assert reward.last[0].reply == prefix + body
    # the prefix alone plus garbage: no format credit (the env's rule, issue 51 item 3)
    assert reward([prompt], ["zz qq ??"], task_id=[CODE_SEED.task_id]) == [0.0]
    assert reward.last[0].f == 0.0


def test_score_s_gt_returns_the_verifier_score_alone():
    fn = SolverReward([MATH_SEED], score="s_gt")
    try:
        gold = f"\\boxed{{{MATH_SEED.answer}}}"
        assert fn(["p", "p"], [gold, "\\boxed{-1}"], task_id=[MATH_SEED.task_id] * 2) == [
            1.0,
            0.0,
        ]
    finally:
        fn.close()
    with pytest.raises(ValueError, match="score must be"):
        SolverReward([MATH_SEED], score="bogus")


@pytest.mark.slow
def test_two_grpo_steps_on_the_tiny_model_log_our_verifiers_scores(tiny_path, tmp_path):
    trl = pytest.importorskip("trl", reason="TRL is not installed: pip install trl==1.16.0")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_path)
    model = AutoModelForCausalLM.from_pretrained(tiny_path)
    tasks = [MATH_SEED, CODE_SEED]
    # a random model's replies all score 0; taught "\\boxed{5}" first, its samples score
    # 0.8 (right), 0.2 (a wrong box) or 0, so equal rewards are not equal zeros
    _teach(model, tok, solver_rows([MATH_SEED])[0]["prompt"], "\\boxed{5}")
    scorer = SolverReward(tasks)
    seen: list[tuple[list, list, list]] = []  # (task ids, completions, rewards) per call

    def sage_solver(prompts, completions, task_id, **kwargs):
        out = scorer(prompts, completions, task_id=task_id, **kwargs)
        seen.append((list(task_id), [s.reply for s in scorer.last], list(out)))
        return out

    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=2,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=12,
        learning_rate=1e-4,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=0,
        dataloader_num_workers=0,
    )
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=[sage_solver],
        args=args,
        train_dataset=solver_dataset(tasks),
        processing_class=tok,
    )
    trainer.train()
    scorer.close()
    assert len(seen) == 2, seen
    logged = [h for h in trainer.state.log_history if "rewards/sage_solver/mean" in h]
    assert len(logged) == 2
    by_id = {t.task_id: t for t in tasks}
    for (ids, replies, got), entry in zip(seen, logged):
        # our verifiers, called afresh on the same completions, give the same scores
        again = [_env_score(by_id[tid], reply) for tid, reply in zip(ids, replies)]
        assert got == pytest.approx(again)
        assert entry["rewards/sage_solver/mean"] == pytest.approx(sum(got) / len(got))
        assert entry["reward"] == pytest.approx(sum(got) / len(got))
    assert any(r > 0 for _, _, got in seen for r in got), seen


def _teach(model, tok, messages, target: str, steps: int = 200) -> None:
    """A few Adam steps on one (prompt, target) pair: the model then mostly writes target."""
    import torch

    prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    t_ids = tok(target + "<|im_end|>", add_special_tokens=False)["input_ids"]
    ids = torch.tensor([p_ids + t_ids])
    labels = torch.tensor([[-100] * len(p_ids) + t_ids])
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    torch.manual_seed(0)
    model.train()
    for _ in range(steps):
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()


@pytest.mark.slow
def test_the_example_script_trains_on_the_seeds(tmp_path):
    pytest.importorskip("trl", reason="TRL is not installed: pip install trl==1.16.0")
    from examples.trl_grpo_solver import main

    last = main(
        ["--tiny", "--steps", "1", "--max-completion-length", "8", "--limit", "4"]
        + ["--out", str(tmp_path / "out")]
    )
    assert last["step"] == 1 and "rewards/sage_solver/mean" in last

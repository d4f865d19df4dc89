import random

import pytest

from sage_env import Task, TaskPool
from sage_env.tasks.pool import jaccard, shingles
from tests.scripted import CODE_SEED, MATH_SEED


def gen(prompt, i=0, domain="math"):
    return Task(
        task_id=f"gen/{i}",
        domain=domain,
        prompt=prompt,
        answer="1",
        source="generated",
        parent_id="seed/m0",
        meta={"q": 0.9, "d": 0.5},
    )


def test_exact_duplicates_rejected_after_normalisation():
    pool = TaskPool([MATH_SEED])
    assert not pool.add(gen("  what IS 2+3? "))
    assert pool.duplicate_of(gen("What is  2+3?")) == "exact duplicate of seed/m0"
    assert len(pool) == 1


def test_near_duplicates_rejected_only_for_generated_tasks():
    base = "A train travels 60 miles per hour for 3 hours and then 40 miles per hour for 2 hours."
    pool = TaskPool([Task("s", "math", base, answer="260", source="gsm8k")])
    near = base.replace("2 hours.", "2 hours!")  # same words
    assert shingles(near) == shingles(base)
    reason = pool.duplicate_of(gen(near))
    assert reason.startswith("near duplicate of s (Jaccard 1.00")
    different = "A car travels 50 miles per hour for 4 hours; how far does it go in total?"
    assert pool.add(gen(different, 1))
    # seeds are only checked for exact duplicates
    assert pool.add(Task("s2", "math", near, answer="260", source="gsm8k"))
    # another domain never collides
    assert pool.add(gen(base + " Write code.", 2, domain="code"))


def test_jaccard_values():
    a, b = frozenset({"x", "y"}), frozenset({"y", "z"})
    assert jaccard(a, b) == pytest.approx(1 / 3)
    assert jaccard(frozenset(), frozenset()) == 1.0


def test_size_cap_evicts_oldest_generated_never_seeds():
    pool = TaskPool([MATH_SEED, CODE_SEED], max_generated=2)
    prompts = ["alpha beta gamma delta", "one two three four five", "red green blue cyan"]
    for i, p in enumerate(prompts):
        assert pool.add(gen(p, i))
    assert [t.task_id for t in pool] == ["seed/m0", "seed/c0", "gen/1", "gen/2"]
    assert pool.num_generated == 2 and pool.evicted == 1
    assert pool.add(gen(prompts[0], 9))  # the evicted prompt is no longer a duplicate


def test_new_ids_are_unique_even_before_acceptance():
    pool = TaskPool([MATH_SEED])
    assert [pool.new_id(), pool.new_id()] == ["gen/0", "gen/1"]


def test_jsonl_round_trip_without_loss(tmp_path):
    pool = TaskPool([MATH_SEED, CODE_SEED])
    task = gen("Ünïcödé 😀 question with\nnewlines and \\boxed{x}", 0)
    task.meta.update(probe_scores=[1.0, 0.0], episode=3)
    pool.add(task)
    path = tmp_path / "pool.jsonl"
    pool.save(path)
    back = TaskPool.load(path)
    assert [t.to_dict() for t in back] == [t.to_dict() for t in pool]
    assert back.num_generated == 1 and back.new_id() == "gen/1"
    assert oct(path.stat().st_mode & 0o777) == "0o644"


def test_broken_pool_file_is_a_clear_error(tmp_path):
    path = tmp_path / "pool.jsonl"
    path.write_text('{"task_id": "a", "domain": "math", "prompt": "p"}\n{not json\n')
    with pytest.raises(ValueError, match="pool.jsonl:2"):
        TaskPool.load(path)


def test_sample_by_domain():
    pool = TaskPool([MATH_SEED, CODE_SEED])
    rng = random.Random(0)
    assert {pool.sample(rng, "code").task_id for _ in range(5)} == {"seed/c0"}
    with pytest.raises(ValueError):
        TaskPool([MATH_SEED]).sample(rng, "code")


def test_snapshot_and_restore_roll_a_pool_back_in_place():
    pool = TaskPool([MATH_SEED], max_generated=1)
    pool.add(gen("How many primes are below 20?", 0))
    snap = pool.snapshot()
    pool.new_id()
    pool.add(gen("What is the sum of the first ten odd numbers?", 1))  # evicts gen/0
    assert [t.task_id for t in pool] == ["seed/m0", "gen/1"] and pool.evicted == 1
    assert [t.task_id for t in snap] == ["seed/m0", "gen/0"] and snap.evicted == 0
    same = pool
    pool.restore(snap)
    assert pool is same and [t.task_id for t in pool] == ["seed/m0", "gen/0"]
    assert pool.evicted == 0 and pool.num_generated == 1 and pool.new_id() == snap.new_id()
    assert not pool.add(gen("how many primes are below 20?", 5))  # the index came back too

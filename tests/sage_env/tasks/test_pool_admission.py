"""The task pool's admission at its boundaries, with non-default settings and exact reasons
(issue 49: the mutation tests of sage_env/tasks/pool.py): membership of non-tasks, a
snapshot's settings, a loaded pool's id counter and indexes, the error messages."""

from __future__ import annotations

import random

import pytest

from sage_env import Task, TaskPool
from sage_env.tasks.exec_tasks import make_task
from sage_env.tasks.pool import jaccard, shingles
from tests.scripted import MATH_SEED

NEAR = "A train travels 60 miles per hour for 3 hours and then 40 miles per hour for 2 hours."
NEAR_COPY = NEAR.replace("2 hours.", "2 hours!!")  # same words, another text
PROGRAM = "def f(s):\n    return sum(1 for c in s if c in 'aeiou')"
RENAMED = "def f(text):\n    return sum(1 for ch in text if ch in 'aeiou')"


def gen(prompt: str, tid: str = "gen/0", domain: str = "math") -> Task:
    return Task(task_id=tid, domain=domain, prompt=prompt, answer="1", source="generated")


def exec_gen(program: str, tid: str) -> Task:
    return make_task("deduction", program, ["'ae'"], ["2"], task_id=tid, source="generated")


def test_jaccard_of_one_empty_set_is_0_and_of_two_is_1():
    assert jaccard(frozenset(), frozenset({"a b c"})) == 0.0
    assert jaccard(frozenset({"a b c"}), frozenset()) == 0.0
    assert jaccard(frozenset(), frozenset()) == 1.0
    assert shingles("") == frozenset()


def test_membership_is_by_normalised_prompt_and_only_for_tasks():
    pool = TaskPool([MATH_SEED])
    assert MATH_SEED in pool
    assert Task(task_id="x", domain="math", prompt="  what IS 2+3? ", answer="5") in pool
    assert gen("What is 2+4?") not in pool
    assert Task(task_id="x", domain="code", prompt=MATH_SEED.prompt, answer="5") not in pool
    assert MATH_SEED.prompt not in pool  # a string is not a task
    assert None not in pool


def test_a_snapshot_keeps_the_threshold_the_cap_and_frozen():
    pool = TaskPool([MATH_SEED], near_duplicate_threshold=0.5, max_generated=1, frozen=True)
    snap = pool.snapshot()
    assert (snap.near_duplicate_threshold, snap.max_generated, snap.frozen) == (0.5, 1, True)
    assert snap.add(gen(NEAR, "gen/0"))
    assert snap.duplicate_of(gen(NEAR_COPY + " more words here", "gen/1")).startswith(
        "near duplicate of gen/0"
    )
    assert snap.add(gen("Something else entirely, with other words.", "gen/1"))
    assert [t.task_id for t in snap] == ["seed/m0", "gen/1"] and snap.evicted == 1
    assert snap.trainable() == [MATH_SEED]
    assert len(pool) == 1  # the original is untouched


def test_restore_brings_back_the_near_duplicate_index():
    pool = TaskPool([MATH_SEED])
    pool.add(gen(NEAR, "gen/0"))
    snap = pool.snapshot()
    fresh = TaskPool()
    fresh.restore(snap)
    assert fresh.duplicate_of(gen(NEAR_COPY, "gen/1")) == "near duplicate of gen/0 (Jaccard 1.00)"
    assert fresh.duplicate_of(gen(NEAR, "gen/1")) == "exact duplicate of gen/0"
    assert fresh.num_generated == 1 and fresh.new_id() == pool.new_id() == "gen/0"


def test_sample_errors_name_what_is_missing():
    rng = random.Random(0)
    with pytest.raises(ValueError, match=r"^the task pool is empty$"):
        TaskPool().sample(rng)
    with pytest.raises(ValueError, match=r"^the task pool has no 'code' task$"):
        TaskPool([MATH_SEED]).sample(rng, "code")


def test_a_loaded_pool_indexes_ids_prompts_shingles_and_programs(tmp_path):
    pool = TaskPool([MATH_SEED])
    for task in (gen(NEAR, "gen/3"), exec_gen(PROGRAM, "gen/1")):
        assert pool.add(task)
    pool.save(tmp_path / "pool.jsonl")
    loaded = TaskPool.load(tmp_path / "pool.jsonl")
    assert loaded.num_generated == 2 and len(loaded) == 3
    assert loaded.duplicate_of(gen(NEAR, "gen/9")) == "exact duplicate of gen/3"
    assert loaded.duplicate_of(gen(NEAR_COPY, "gen/9")) == "near duplicate of gen/3 (Jaccard 1.00)"
    assert loaded.duplicate_of(exec_gen(RENAMED, "gen/9")) == (
        "duplicate of gen/1 (the same program after normalisation, on the same input)"
    )
    # the next id follows the highest loaded one
    assert loaded.new_id() == "gen/4"


@pytest.mark.parametrize(
    "ids,next_id",
    [
        (["gen/2", "gen/7", "gen/5"], "gen/8"),
        (["gen/run2/7"], "gen/8"),  # the number after the last slash
        (["custom"], "gen/1"),  # no number: one more than the counter so far
        (["gen/x", "gen/y"], "gen/2"),
        (["gen/4", "gen/x"], "gen/6"),
    ],
)
def test_a_loaded_pool_s_id_counter(tmp_path, ids, next_id):
    pool = TaskPool()
    for k, tid in enumerate(ids):
        assert pool.add(gen(f"Question number {k} about {'x' * k} other things", tid))
    pool.save(tmp_path / "pool.jsonl")
    loaded = TaskPool.load(tmp_path / "pool.jsonl")
    assert loaded.num_generated == len(ids)
    assert loaded.new_id() == next_id


def test_a_loaded_pool_counts_seeds_apart_and_keeps_the_cap(tmp_path):
    pool = TaskPool([MATH_SEED])
    pool.add(gen(NEAR, "gen/0"))
    pool.save(tmp_path / "pool.jsonl")
    loaded = TaskPool.load(tmp_path / "pool.jsonl", max_generated=1, near_duplicate_threshold=0.5)
    assert loaded.num_generated == 1 and loaded.new_id() == "gen/1"
    assert loaded.max_generated == 1 and loaded.near_duplicate_threshold == 0.5
    assert loaded.add(gen("Something else entirely, with other words.", "gen/2"))
    assert [t.task_id for t in loaded] == ["seed/m0", "gen/2"] and loaded.evicted == 1


def test_case_is_folded_by_lower_casing():
    # "ß".upper() is "SS": upper-casing would make these one prompt, lower-casing does not
    pool = TaskPool([Task(task_id="seed/g", domain="math", prompt="Wie lang ist die Straße?", answer="1")],
                    near_duplicate_threshold=None)
    assert pool.duplicate_of(gen("Wie lang ist die Strasse?")) is None
    assert pool.duplicate_of(gen("WIE LANG IST DIE STRAßE?")) == "exact duplicate of seed/g"


def test_a_prompt_that_is_not_valid_unicode_is_still_fingerprinted():
    pool = TaskPool()
    assert pool.add(gen("What is \ud800 plus 1?"))
    assert pool.duplicate_of(gen("what is \ud800  plus 1?", "gen/1")) == "exact duplicate of gen/0"


def test_set_literals_are_one_input_in_any_order():
    pool = TaskPool(near_duplicate_threshold=None)
    first = make_task("deduction", PROGRAM, ["{'a', 'b', 'c'}"], ["2"], task_id="gen/0", source="generated")
    again = make_task("deduction", PROGRAM, ["{'c', 'a', 'b'}"], ["2"], task_id="gen/1", source="generated")
    assert pool.add(first)
    assert pool.duplicate_of(again) == (
        "duplicate of gen/0 (the same program after normalisation, on the same input)"
    )


def test_eviction_counts_every_task_and_leaves_no_index_behind():
    pool = TaskPool([MATH_SEED], max_generated=1)
    for k in range(3):
        assert pool.add(exec_gen(PROGRAM.replace("aeiou", "aeiou"[: k + 2]), f"gen/{k}"))
    assert pool.evicted == 2 and [t.task_id for t in pool] == ["seed/m0", "gen/2"]
    assert set(pool._shingles) == {"seed/m0", "gen/2"}
    assert len(pool._seen) == 2 and list(pool._programs.values()) == ["gen/2"]


def test_a_loaded_file_with_a_line_twice_evicts_both_copies(tmp_path):
    pool = TaskPool()
    pool.add(gen(NEAR, "gen/0"))
    pool.save(tmp_path / "pool.jsonl")
    line = (tmp_path / "pool.jsonl").read_text()
    (tmp_path / "twice.jsonl").write_text(line + line)
    loaded = TaskPool.load(tmp_path / "twice.jsonl", max_generated=0)
    assert loaded.num_generated == 2
    assert loaded.add(gen("Something else entirely, with other words.", "gen/5"))
    assert len(loaded) == 0 and loaded.evicted == 3


def test_evicting_a_copy_keeps_the_program_index_of_the_first_task(tmp_path):
    seed = make_task("deduction", PROGRAM, ["'ae'"], ["2"], task_id="exec/s/deduction", source="seed")
    copy = exec_gen(RENAMED, "gen/0")
    pool = TaskPool(near_duplicate_threshold=None)
    pool._tasks += [seed, copy]  # as a saved pool that holds both (load trusts its file)
    pool.save(tmp_path / "pool.jsonl")
    loaded = TaskPool.load(tmp_path / "pool.jsonl", max_generated=1, near_duplicate_threshold=None)
    assert loaded.add(gen("Something else entirely, with other words.", "gen/1"))  # evicts gen/0
    assert [t.task_id for t in loaded] == ["exec/s/deduction", "gen/1"]
    assert loaded.duplicate_of(exec_gen(RENAMED.replace("text", "word"), "gen/2")) == (
        "duplicate of exec/s/deduction (the same program after normalisation, on the same input)"
    )


def test_shingles_are_word_3_grams_of_the_lower_cased_text():
    from sage_env.tasks.pool import shingles

    assert shingles("A b C d") == frozenset({"a b c", "b c d"})
    assert shingles("A b C d", 2) == frozenset({"a b", "b c", "c d"})
    assert shingles("one, TWO.") == frozenset({"one two"})  # fewer words than n: all of them
    assert shingles("a b c") == frozenset({"a b c"})
    assert shingles("  ") == frozenset()
    # only the first 20,000 characters count
    assert shingles("a " * 10_000 + "z") == frozenset({"a a a"})


def test_normalised_question_shows_the_program_in_normal_form_for_deduction_and_abduction():
    import dataclasses

    from sage_env.tasks.pool import normalised_question

    for mode in ("deduction", "abduction"):
        a = make_task(mode, PROGRAM, ["'ae'"], ["2"], task_id="gen/0", source="generated")
        b = make_task(mode, RENAMED, ["'ae'"], ["2"], task_id="gen/1", source="generated")
        assert normalised_question(a) == normalised_question(b) != b.prompt
    ind = make_task("induction", RENAMED, ["'ae'", "'x'"], ["2", "0"], task_id="gen/2")
    assert normalised_question(ind) == ind.prompt
    assert normalised_question(MATH_SEED) == MATH_SEED.prompt
    # no outputs, or a program that does not parse: the prompt as it is
    a = make_task("deduction", RENAMED, ["'ae'"], ["2"], task_id="gen/3")
    meta = {"exec": dict(a.meta["exec"], outputs=[])}
    assert normalised_question(dataclasses.replace(a, meta=meta)) == a.prompt
    broken = dataclasses.replace(a, reference_solution="def f(:\n    return")
    assert normalised_question(broken) == broken.prompt


def test_near_duplicates_are_looked_for_past_other_domains():
    pool = TaskPool([Task(task_id="seed/c", domain="code", prompt=NEAR, answer="1")])
    pool.add(gen(NEAR + " Then it stops.", "gen/0"))
    assert pool.duplicate_of(gen(NEAR_COPY + " Then it stops!", "gen/1")) == (
        "near duplicate of gen/0 (Jaccard 1.00)"
    )


def test_a_jaccard_exactly_at_the_threshold_is_a_near_duplicate():
    # mine's 2 shingles are a subset of theirs' 4: Jaccard 2/4 = 0.5, as is the size bound
    pool = TaskPool(near_duplicate_threshold=0.5)
    pool.add(gen("alpha beta gamma delta epsilon zeta", "gen/0"))
    assert pool.duplicate_of(gen("alpha beta gamma delta", "gen/1")) == (
        "near duplicate of gen/0 (Jaccard 0.50)"
    )
    assert TaskPool([gen("alpha beta gamma delta epsilon zeta")], near_duplicate_threshold=0.51
                    ).duplicate_of(gen("alpha beta gamma delta", "gen/1")) is None


def test_settings_are_checked_at_their_edges():
    assert TaskPool().frozen is False
    assert TaskPool([gen(NEAR)]).trainable() == [gen(NEAR)]
    assert TaskPool(near_duplicate_threshold=1.0).near_duplicate_threshold == 1.0
    assert TaskPool(max_generated=0).max_generated == 0
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError, match=rf"^near_duplicate_threshold must be in \(0, 1\], got {bad}$"):
            TaskPool(near_duplicate_threshold=bad)
    with pytest.raises(ValueError, match=r"^max_generated must be >= 0, got -1$"):
        TaskPool(max_generated=-1)


def test_literals_are_compared_canonically_and_others_by_their_words():
    from sage_env.tasks.pool import _canonical_literal

    assert _canonical_literal("'a'") == _canonical_literal('"a"')
    assert _canonical_literal("[1,  2]") == _canonical_literal("[1, 2]") != _canonical_literal("[2, 1]")
    assert _canonical_literal("{2, 1}") == _canonical_literal("{1, 2}")
    assert _canonical_literal("f(  x") == "f( x"  # not a literal: its words


def test_a_program_that_does_not_parse_is_keyed_by_its_words():
    from sage_env.tasks.pool import exec_task_key

    def task(program, tid):
        return make_task("deduction", program, ["'ae'"], ["2"], task_id=tid, source="generated")

    a = exec_task_key(task("def f(s:\n    return  len(s)", "gen/0"))
    b = exec_task_key(task("def f(s:   return len(s)", "gen/1"))
    c = exec_task_key(task("def f(t:\n    return len(t)", "gen/2"))
    assert a is not None and a == b != c

"""The frozen-pool ablation (``EnvConfig.pool_admission = "frozen"``, issue 34, item 2).

Proposals are judged, admitted and paid exactly as in a growing pool, but an accepted task
never becomes a solver or planner task: the attempts that judge it are marked
``train=False`` and the solver trains on a seed task instead.
"""

import random

import pytest

import sage_env
from sage_env import EnvConfig, Outcome, Task
from sage_env.interactive.play import _scripted
from sage_env.tasks.pool import TaskPool

PROPOSERS = {"azr": "proposer_0", "mae": "proposer_0", "sage": "challenger_0"}


def _player(env, obs, info, n_solves):
    """A valid proposal and passing reviews; solve-kind turns alternate right and wrong, so
    a new task is solved half the time (AZR's learnability is then paid)."""
    kind, actions, task = _scripted(env, obs, info)
    if kind == "solve":
        return actions[n_solves % 2] if len(actions) > 1 else actions[0]
    return actions[0]


def _rounds(protocol, admission, rounds=1):
    """Play ``rounds`` rounds; ``[(agent, phase, task_id, reward, last_info)]`` and the env."""
    env = sage_env.env(
        EnvConfig(
            protocol=protocol,
            domains=("exec",),
            solver_samples=2,
            pool_admission=admission,
            seed=0,
        )
    )
    out = []
    n_solves = 0
    for r in range(rounds):
        env.reset(seed=r)
        awaiting = {}
        for agent in env.agent_iter(max_iter=300):
            obs, reward, term, trunc, info = env.last()
            if agent in awaiting:
                rec = awaiting.pop(agent)
                rec[3], rec[4] = reward, dict(info["last"])
            if term or trunc:
                env.step(None)
                continue
            rec = [agent, info["phase"], str(info.get("task_id") or ""), None, None]
            out.append(rec)
            awaiting[agent] = rec
            action = _player(env, obs, info, n_solves)
            if agent == "solver_0":
                n_solves += 1
            env.step(action)
    env.close()
    return [tuple(r) for r in out], env.unwrapped


def _trains(last):
    return last.get("train", True) is not False


@pytest.mark.slow
@pytest.mark.parametrize("protocol", sorted(PROPOSERS))
def test_frozen_pool_pays_as_usual_but_never_trains_on_a_generated_task(protocol):
    grow, grow_env = _rounds(protocol, "gate")
    frozen, frozen_env = _rounds(protocol, "frozen")
    proposer = PROPOSERS[protocol]
    (g_prop,) = [r for r in grow if r[0] == proposer]
    (f_prop,) = [r for r in frozen if r[0] == proposer]
    # the same proposal is accepted and paid the same in both
    assert g_prop[4]["parsed"]["valid"] and f_prop[4]["parsed"]["valid"]
    assert f_prop[3] == pytest.approx(g_prop[3])
    assert grow_env.pool.num_generated == frozen_env.pool.num_generated == 1
    new_id = f_prop[4]["new_task_id"]
    assert new_id.startswith("gen/")
    # growing: the solver trains on the new task; frozen: those attempts only judge it
    g_solver = [r for r in grow if r[0] == "solver_0"]
    f_solver = [r for r in frozen if r[0] == "solver_0"]
    assert any(r[2] == new_id and _trains(r[4]) for r in g_solver)
    judging = [r for r in f_solver if r[2] == new_id]
    assert len(judging) == 2 and all(r[4]["train"] is False for r in judging)
    for agent, phase, task_id, _, last in frozen:
        if agent in ("solver_0", "planner_0") and _trains(last):
            assert not task_id.startswith("gen/"), (agent, phase, task_id)
    if protocol in ("azr", "mae"):  # the solver then trains on a seed task, k times
        g_trained = [r for r in g_solver if _trains(r[4])]
        f_trained = [r for r in f_solver if _trains(r[4])]
        assert len(f_trained) == len(g_trained) == 2
        assert all(not r[2].startswith("gen/") for r in f_trained)


@pytest.mark.slow
@pytest.mark.parametrize("protocol", sorted(PROPOSERS))
def test_frozen_pool_over_several_rounds_keeps_generated_tasks_out_of_training(protocol):
    records, env = _rounds(protocol, "frozen", rounds=4)
    assert env.pool.num_generated >= 2  # tasks were admitted...
    trained = [r for r in records if r[0] in ("solver_0", "planner_0") and _trains(r[4])]
    assert trained and not any(r[2].startswith("gen/") for r in trained)  # ...never trained on


def test_frozen_pool_samples_only_seed_tasks():
    seeds = [
        Task(
            task_id=f"s{i}",
            domain="math",
            prompt=f"What is {i}+1?",
            answer=str(i + 1),
            source="gsm8k",
        )
        for i in range(3)
    ]
    pool = TaskPool(seeds, frozen=True)
    gen = Task(
        task_id="gen/0",
        domain="math",
        prompt="What is 9*9 plus 3?",
        answer="84",
        source="generated",
    )
    assert pool.add(gen) and pool.num_generated == 1 and len(pool) == 4
    assert pool.duplicate_of(gen) is not None  # still indexed: a copy is refused as usual
    rng = random.Random(0)
    assert {pool.sample(rng).task_id for _ in range(200)} == {"s0", "s1", "s2"}
    assert [t.task_id for t in pool.trainable()] == ["s0", "s1", "s2"]
    assert pool.snapshot().frozen
    with pytest.raises(ValueError, match="no 'code' task"):
        pool.sample(rng, "code")


def test_frozen_is_a_known_admission():
    assert EnvConfig(pool_admission="frozen").pool_admission == "frozen"
    with pytest.raises(ValueError, match="'gate', 'solvable' or 'frozen'"):
        EnvConfig(pool_admission="freeze")


def _tr(role, phase, task_id, details, domain="exec"):
    from learners.types import Transition

    return Transition(
        agent=f"{role}_0",
        role=role,
        domain=domain,
        phase=phase,
        prompt_ids=[1],
        completion_ids=[2],
        logprobs=[0.0],
        text="x",
        outcome=Outcome.from_dict(details),
        task_id=task_id,
    )


def test_pool_dynamics_metrics_count_proposals_difficulty_novelty_and_generated_rows():
    from learners.training.metrics import pool_dynamics_metrics
    from learners.types import RolloutResult
    from sage_env.tasks.exec_tasks import load_exec_seeds

    seeds = load_exec_seeds()
    pool = TaskPool(seeds)
    seed_program = seeds[0].reference_solution
    renamed = seed_program.replace("def f(", "def f(", 1)  # the same program: novelty 0
    transitions = [
        _tr(
            "proposer",
            "propose",
            seeds[0].task_id,
            {
                "parsed": {
                    "valid": True,
                    "well_formed": True,
                    "mode": "deduction",
                    "program": renamed,
                },
                "terms": {"acc": 0.25},
            },
        ),
        _tr(
            "proposer",
            "propose",
            seeds[0].task_id,
            {
                "parsed": {
                    "valid": True,
                    "well_formed": True,
                    "mode": "abduction",
                    "program": "def f(q):\n    return sorted(set(q))[::-1] * 7",
                },
                "terms": {"acc": 0.75},
            },
        ),
        _tr(
            "proposer",
            "propose",
            seeds[0].task_id,
            {"parsed": {"valid": False, "well_formed": True}},
        ),
        _tr("solver", "solve", "gen/0", {"train": False}),
        _tr("solver", "solve", "gen/1", {}),
        _tr("solver", "solve", seeds[1].task_id, {}),
        _tr("solver", "solve", seeds[2].task_id, {}),
    ]
    result = RolloutResult(transitions, [], 0.0, 0.0, 7, 1)
    m = pool_dynamics_metrics(result, pool)
    assert m["pool/proposals"] == 3 and m["pool/valid"] == 2 and m["pool/accepted"] == 2
    assert m["pool/accepted_deduction"] == 1 and m["pool/accepted_abduction"] == 1
    assert m["pool/accepted_difficulty"] == pytest.approx((0.75 + 0.25) / 2)
    assert 0.0 < m["pool/accepted_novelty"] < 0.5  # one copy (0) and one new program
    # induction's program is a buffer program by design: its novelty is not counted
    induction = _tr(
        "proposer",
        "propose",
        seeds[0].task_id,
        {
            "parsed": {
                "valid": True,
                "well_formed": True,
                "mode": "induction",
                "program": "def f(z):\n    return {z: 3}",
            }
        },
    )
    again = pool_dynamics_metrics(RolloutResult([*transitions, induction], [], 0, 0, 7, 1), pool)
    assert again["pool/accepted_induction"] == 1
    assert again["pool/accepted_novelty"] == m["pool/accepted_novelty"]
    assert m["solver/trained_rows"] == 3 and m["solver/judging_rows"] == 1
    assert m["solver/generated_share"] == pytest.approx(1 / 3)
    assert not transitions[3].trains and transitions[4].trains

"""Warm-up demonstrations for execution tasks: AZR's formats, right by construction."""

from collections import Counter

import pytest

import sage_env
from sage_env import EnvConfig
from sage_env.protocols.azr import AZRConfig, vet_exec_proposal
from sage_env.protocols.exec_demonstrations import build_exec_demonstrations, compact_program
from sage_env.protocols.warmup import demonstrations_for
from sage_env.tasks import exec_tasks
from sage_env.tasks.exec_tasks import load_exec_seeds
from sage_env.tasks.task import load_seeds
from sage_env.text import parsing, prompts

SEEDS = load_seeds()
EXEC = {t.task_id: t for t in load_exec_seeds()}


def _mode(demo):
    return demo.task_ids[0].rsplit("/", 1)[1]


def test_azr_warmup_is_execution_format_and_moves_critic_share_to_solver():
    demos = demonstrations_for("azr", ("math", "code"), SEEDS, 40, {"challenger": 0.5, "critic": 0.5})
    assert len(demos) == 40
    assert Counter(d.role for d in demos) == {"challenger": 20, "solver": 20}
    assert all(d.task_ids[0].startswith("exec/") for d in demos)
    assert all(d.observation["system"] == exec_tasks.EXEC_SYSTEM for d in demos)
    # every mode appears for both roles
    assert {(d.role, _mode(d)) for d in demos} == {
        (r, m) for r in ("challenger", "solver") for m in exec_tasks.MODES
    }


@pytest.mark.slow
def test_solver_demonstrations_are_scored_right_by_the_executor():
    env = sage_env.env(EnvConfig(protocol="azr", solver_samples=1)).unwrapped
    demos = build_exec_demonstrations(list(EXEC.values()), 9, {"solver": 1.0}, seed=3)
    assert len(demos) == 9 and {_mode(d) for d in demos} == set(exec_tasks.MODES)
    for d in demos:
        task = EXEC[d.task_ids[0]]
        obs = exec_tasks.solver_prompt(task)
        assert d.observation["user"] == obs["user"]
        assert d.observation["prefix"] == exec_tasks.SOLVER_PREFIX[_mode(d)]
        reply = d.observation["prefix"] + d.target
        score, fmt, verdict = env.verify(task, reply)
        assert (score, fmt) == (1.0, 1.0), (d.task_ids, verdict)
    env.close()


@pytest.mark.slow
def test_proposer_demonstrations_are_valid_proposals_for_the_executor():
    env = sage_env.env(EnvConfig(protocol="azr", solver_samples=1)).unwrapped
    env.reset(seed=0)
    demos = build_exec_demonstrations(list(EXEC.values()), 6, {"challenger": 1.0}, seed=1)
    assert {_mode(d) for d in demos} == set(exec_tasks.MODES)
    for d in demos:
        mode = _mode(d)
        task = EXEC[d.task_ids[0]]
        # the prefix the environment gives this proposer on this task (induction: with the
        # program's first input)
        assert d.observation["prefix"] == exec_tasks.proposer_prefix(mode, task)
        refs = [EXEC[i] for i in d.task_ids[1:]] or [task]
        formatted, valid, reason, new, _ = vet_exec_proposal(
            env, mode, d.observation["prefix"] + d.target, task, refs, AZRConfig()
        )
        assert formatted and valid, (d.task_ids, reason)
        # the executor's outputs for the demonstrated input are the seed's own
        spec, seed = exec_tasks.ExecSpec.of(new), exec_tasks.ExecSpec.of(task)
        assert spec.outputs[0] == seed.outputs[seed.inputs.index(spec.inputs[0])]
        if mode != "induction":
            # the reference snippets are other programs than the demonstrated one
            assert all(EXEC[i].reference_solution != task.reference_solution for i in d.task_ids[1:])
    env.close()


def test_compact_program_drops_docstrings_and_comments_only():
    src = (
        "from typing import List\n\n\n"
        "def f(xs: List[int]) -> int:\n"
        '    """ Sum.\n    >>> f([1, 2])\n    3\n    """\n'
        "    # add them up\n"
        "    return sum(xs)  # done\n"
        "\n\nclass A:\n    'doc'\n"
    )
    out = compact_program(src)
    assert out == (
        "from typing import List\n\ndef f(xs: List[int]) -> int:\n    return sum(xs)\n\n"
        "class A:\n    pass"
    )
    broken = "def f(:\n    'x'"
    assert compact_program(broken) == broken  # does not parse: as it was
    assert compact_program(out) == out


def _without_docstrings(source):
    import ast
    import warnings

    with warnings.catch_warnings():  # invalid escapes in some seeds' strings
        warnings.simplefilter("ignore")
        tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def test_proposer_targets_are_the_seed_programs_without_docstrings():
    demos = build_exec_demonstrations(list(EXEC.values()), 90, {"challenger": 1.0}, seed=0)
    demos = [d for d in demos if _mode(d) != "induction"]
    with_doc = 0
    for d in demos:
        seed = EXEC[d.task_ids[0]].reference_solution
        program = parsing.fenced(d.observation["prefix"] + d.target, "python")[0]
        assert '"""' not in program and "'''" not in program and "\n#" not in program
        # the same code: only docstrings (and comments) differ
        assert _without_docstrings(program) == _without_docstrings(seed)
        with_doc += '"""' in seed
    assert with_doc > 0  # some demonstrated seeds had a docstring, and lost it


def test_selection_by_protocol_and_domain():
    plain = demonstrations_for("sage", ("math", "code"), SEEDS, 30)
    assert plain and not any(d.task_ids[0].startswith("exec/") for d in plain)
    qa = demonstrations_for("azr-qa", ("math", "code"), SEEDS, 30)
    assert not any(d.task_ids[0].startswith("exec/") for d in qa)
    mixed = demonstrations_for("sage", ("math", "code", "exec"), SEEDS, 60)
    exe = [d for d in mixed if d.task_ids[0].startswith("exec/")]
    assert exe and len(exe) < len(mixed)
    # SAGE's solver prompt (not AZR's) on execution tasks under the sage protocol
    assert all(
        d.observation["system"] == prompts.SOLVER_SYSTEM for d in exe if d.role == "solver"
    )
    assert {d.role for d in exe} == {"challenger", "solver", "critic"}
    # the critic reviews execution questions too: intact ones high, corrupted ones low
    reviews = [d for d in exe if d.role == "critic"]
    assert all(d.observation["prefix"] == "<score>" for d in reviews)
    scores = [int(d.target.split("<")[0]) for d in reviews]
    assert {s for s in scores if s >= 8} and {s for s in scores if s <= 3}


def test_exec_reviews_skip_excluded_tasks_and_their_children():
    from sage_env.protocols.demonstrations import build_exec_reviews

    tasks = list(EXEC.values())
    banned = {tasks[0].task_id} | {t.parent_id for t in tasks[:20] if t.parent_id}
    reviews = build_exec_reviews(tasks, 40, seed=1, exclude_ids=banned)
    assert len(reviews) == 40 and {d.role for d in reviews} == {"critic"}
    for d in reviews:
        for tid in d.task_ids:
            assert tid not in banned and (EXEC[tid].parent_id or "") not in banned
    assert build_exec_reviews([t for t in SEEDS if t.domain == "math"], 4) == []


def test_excluded_programs_never_appear_and_bad_mix_is_refused():
    tasks = list(EXEC.values())
    parents = {t.parent_id for t in tasks if t.parent_id}
    banned = set(sorted(parents)[: len(parents) // 2])
    demos = build_exec_demonstrations(tasks, 30, seed=0, exclude_ids=banned)
    assert demos and not any(EXEC[d.task_ids[0]].parent_id in banned for d in demos)
    with pytest.raises(ValueError, match="mix"):
        build_exec_demonstrations(tasks, 4, {"judge": 1.0})
    assert build_exec_demonstrations([t for t in SEEDS if t.domain == "math"], 4) == []


class _Stop(Exception):
    pass


@pytest.mark.parametrize("protocol, exec_only", [("azr", True), ("sage", False)])
def test_train_warms_up_on_the_protocols_demonstrations(
    protocol, exec_only, tiny_path, tmp_path, monkeypatch
):
    import learners.training.build as build_mod
    from learners.training.config import TrainConfig
    from learners.training.loop import train
    from learners.training.warmup import WarmupConfig

    seen = {}

    def spy(policy, demos, cfg, *args, **kwargs):
        seen["demos"] = demos
        raise _Stop

    monkeypatch.setattr(build_mod, "run_warmup", spy)
    cfg = TrainConfig(
        model=tiny_path,
        out=str(tmp_path / "run"),
        steps=1,
        device="cpu",
        critic_probe_size=0,
        gate_calibration=False,
        warmup=WarmupConfig(steps=1, num_demonstrations=12),
        env=EnvConfig(protocol=protocol, solver_samples=1),
    )
    with pytest.raises(_Stop):
        train(cfg, progress=False)
    ids = [d.task_ids[0] for d in seen["demos"]]
    assert abs(len(ids) - 12) <= 1  # rounding of the per-role shares
    assert all(i.startswith("exec/") for i in ids) == exec_only
    assert any(i.startswith("exec/") for i in ids) == exec_only


def test_induction_proposals_number_their_input_blocks():
    demos = build_exec_demonstrations(list(EXEC.values()), 30, {"challenger": 1.0}, seed=2)
    ind = [d for d in demos if _mode(d) == "induction"]
    assert ind
    for d in ind:
        seed = exec_tasks.ExecSpec.of(EXEC[d.task_ids[0]])
        # the prefix holds the seed's first input and opens the second block
        assert d.observation["prefix"] == f"```input 1\n{seed.inputs[0]}\n```\n```input 2\n"
        assert not d.target.startswith(seed.inputs[0] + "\n```")
        assert "```input 1, ```input 2" in d.observation["user"]
        reply = d.observation["prefix"] + d.target
        inputs = parsing.fenced(reply, "input")
        assert len(inputs) >= 2
        # block k is opened as ```input k, and each is an input block to the parser
        assert all(f"```input {k}\n{i}\n```" in reply for k, i in enumerate(inputs, 1))
        seed_inputs = exec_tasks.ExecSpec.of(EXEC[d.task_ids[0]]).inputs
        assert inputs == list(dict.fromkeys(seed_inputs))[: len(inputs)]


def test_numbered_input_blocks_are_what_unnumbered_ones_were_to_the_validator():
    env = sage_env.env(EnvConfig(protocol="azr", solver_samples=1)).unwrapped
    env.reset(seed=0)
    task = EXEC["exec/identity/induction"]
    plain = "```input\n1\n```\n```input\n'a'\n```\n```message\nx\n```"
    numbered = "```input 1\n1\n```\n```input 2\n'a'\n```\n```message\nx\n```"
    got = [
        vet_exec_proposal(env, "induction", r, task, [task], AZRConfig())
        for r in (plain, numbered)
    ]
    assert [g[:3] for g in got] == [(True, True, "valid")] * 2
    assert exec_tasks.ExecSpec.of(got[0][3]).inputs == exec_tasks.ExecSpec.of(got[1][3]).inputs
    one = vet_exec_proposal(env, "induction", "```input 1\n1\n```", task, [task], AZRConfig())
    assert one[:3] == (True, False, "fewer than 2 distinct literal inputs")
    env.close()


def test_deduction_and_abduction_targets_take_one_argument_and_references_any():
    from sage_env.protocols.exec_demonstrations import takes_one_argument

    demos = build_exec_demonstrations(list(EXEC.values()), 60, {"challenger": 1.0}, seed=0)
    da = [d for d in demos if _mode(d) != "induction"]
    assert len(da) >= 30
    assert all(takes_one_argument(EXEC[d.task_ids[0]]) for d in da)
    refs = [EXEC[i] for d in da for i in d.task_ids[1:]]
    assert any(not takes_one_argument(t) for t in refs)  # the snippets keep every arity
    # solver demonstrations are not restricted
    solver = build_exec_demonstrations(list(EXEC.values()), 60, {"solver": 1.0}, seed=0)
    assert any(not takes_one_argument(EXEC[d.task_ids[0]]) for d in solver)


def test_takes_one_argument_reads_the_signature_of_f():
    from sage_env.protocols.exec_demonstrations import takes_one_argument

    def task(src):
        return exec_tasks.make_task("deduction", src, ["1"], ["1"], task_id="t")

    assert takes_one_argument(task("def f(a):\n    return a"))
    helper = "import math\ndef g(a, b):\n    return a\ndef f(x: int) -> int:\n    return g(x, 1)"
    assert takes_one_argument(task(helper))
    for src in (
        "def f(a, b):\n    return a",
        "def f(*a):\n    return a",
        "def f(a, **k):\n    return a",
        "def f(a, *, b=1):\n    return a",
        "def f():\n    return 1",
        "def g(a):\n    return a",
        "def f(:",
    ):
        assert not takes_one_argument(task(src)), src

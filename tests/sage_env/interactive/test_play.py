import json

import pytest

import sage_env
from learners.cli import main
from sage_env import EnvConfig
from sage_env.interactive.play import PLAYERS, RoundRecord, play, replay, summary
from tests.scripted import CODE_SEED, MATH_SEED


def make_env(**kw):
    return sage_env.env(
        EnvConfig(solver_samples=1, domains=("math",)), seeds=[MATH_SEED, CODE_SEED], **kw
    )


def test_oracle_round_rewards_and_replay(tmp_path):
    record = play(make_env(), dict.fromkeys(sage_env.AGENTS, PLAYERS["oracle"]), seed=0)
    by = {(r["agent"], r["phase"]): r for r in record.rewards}
    # scripted critic says 8 -> q = p = 7/9; oracle solver is right on the pool task
    assert by[("critic_0", "review_question")]["reward"] == 1.0
    assert by[("planner_0", "plan")]["reward"] == pytest.approx(0.5 * 7 / 9 + 0.5)
    assert by[("solver_0", "solve")]["terms"]["s_gt"] == 1.0
    assert len(record.actions) == len(record.rewards) == 6
    path = tmp_path / "round.json"
    record.save(path)
    again = replay(make_env(), RoundRecord.load(path))
    assert again.rewards == record.rewards
    assert "challenger_0" in summary(record) and "s_gt=1.0" in summary(record)


def test_replay_rescores_a_round_whose_turn_order_changed(tmp_path):
    record = play(make_env(), dict.fromkeys(sage_env.AGENTS, PLAYERS["scripted"]), seed=0)
    # with alpha = 0.9 the scripted question (q = 7/9) is rejected: no probe turn any more
    again = replay(
        sage_env.env(
            EnvConfig(solver_samples=1, domains=("math",)),
            seeds=[MATH_SEED, CODE_SEED],
            alpha=0.9,
        ),
        record,
    )
    assert again.notes == [
        "skipped the saved solver_0 [probe] action: the round now goes from there to "
        "planner_0 [plan]"
    ]
    by = {(r["agent"], r["phase"]): r for r in again.rewards}
    assert by[("challenger_0", "challenge")]["terms"]["d"] is None  # gated: d dropped
    assert by[("challenger_0", "challenge")]["reward"] == pytest.approx((7 / 9 + 1) / 3)
    assert ("solver_0", "solve") in by and ("solver_0", "probe") not in by
    assert not any(a.get("filled") for a in again.actions)
    assert "replay: the turn order changed" in summary(again)


def test_load_rejects_a_file_that_is_not_a_round(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a saved round"):
        RoundRecord.load(bad)


def test_play_cli_prints_every_reward_term_and_saves(tmp_path, capsys):
    out = tmp_path / "r.json"
    code = main(
        [
            "play",
            "--players",
            "solver=oracle",
            "--seed",
            "2",
            "--save",
            str(out),
            "--env.solver-samples",
            "1",
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "=== challenge: challenger_0 ===" in text and "--- reward solver_0" in text
    assert "agent" in text and "phase" in text
    saved = json.loads(out.read_text())
    assert saved["seed"] == 2 and saved["actions"][0]["agent"] == "challenger_0"
    assert main(["play", "--replay", str(out), "--env.solver-samples", "1"]) == 0


def test_play_cli_rejects_unknown_player(capsys):
    assert main(["play", "--players", "solver=wizard"]) == 2
    assert "unknown player kind" in capsys.readouterr().err


@pytest.mark.slow
def test_play_cli_runs_every_protocol_with_its_own_roles(capsys):
    for protocol, spec in (
        ("azr", "proposer=oracle,solver=oracle"),
        ("mae", "judge=scripted"),
        ("rlvr", "solver=oracle"),
    ):
        assert main(["play", "--env.protocol", protocol, "--players", spec]) == 0
    assert main(["play", "--env.protocol", "azr", "--players", "critic=human"]) == 2
    assert "roles: proposer, solver" in capsys.readouterr().err


def test_replay_uses_the_config_saved_with_the_round(tmp_path, capsys):
    out = tmp_path / "round.json"
    assert (
        main(["play", "--env.domains", "math", "--env.solver-samples", "1", "--save", str(out)])
        == 0
    )
    saved = RoundRecord.load(out)
    capsys.readouterr()
    # replayed without flags: the saved math-only, k = 1 config, so the turn order matches
    assert main(["play", "--replay", str(out)]) == 0
    assert "turn order differs" not in capsys.readouterr().err
    # a flag given now overrides the saved value: k = 2 asks for a second probe the round
    # lacks; the scripted player fills it and the summary says so
    assert main(["play", "--replay", str(out), "--env.solver-samples", "2"]) == 0
    text = capsys.readouterr().out
    assert "solver_0 [probe]: the saved round has no action for this turn" in text
    assert "solver_0 [solve]: the saved round has no action for this turn" in text
    assert saved.config["domains"] == ["math"] and saved.config["solver_samples"] == 1


def test_plan_gate_line_says_pass_or_fail():
    import sage_env
    from tests.scripted import MATH_SEED

    env = sage_env.env(seeds=[MATH_SEED], solver_samples=1, render_mode="ansi")
    play(env, {a: PLAYERS["scripted"] for a in env.possible_agents}, seed=0)
    assert "> beta=0.3: plan shown" in env.render()  # scripted critic scores the plan 8

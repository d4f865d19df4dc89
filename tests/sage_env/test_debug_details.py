"""Debugging details (issue 21, Why item 7): a cut action is flagged, reviews carry a parse
reason, ``sage-env play`` handles piped stdin and its end, rewards.md's format values."""

import io
from pathlib import Path

import pytest

import sage_env
from learners.cli import main
from sage_env import EnvConfig
from sage_env.interactive.play import PLAYERS, PlayStopped, human_player, play
from sage_env.text import parsing
from tests.scripted import MATH_SEED, play_round

ROOT = Path(__file__).resolve().parents[2]


def _env(**kw):
    return sage_env.env(
        EnvConfig(solver_samples=1, domains=("math",)), seeds=[MATH_SEED], render_mode="ansi", **kw
    )


def test_an_action_cut_at_the_length_limit_is_flagged_in_infos_and_transcript():
    env = _env()
    env.reset(seed=0)
    env.step("<question>" + "x" * 24_990)  # 25,000 characters: cut to 20,000
    info = env.infos["challenger_0"]
    assert info["action_truncated"] == {"chars": 25_000, "kept": 20_000}
    # the proposal failed to parse, so it was credited at once, with the flag
    assert info["last"]["action_truncated"] == {"chars": 25_000, "kept": 20_000}
    assert "--- action (cut to its first 20000 of 25000 characters: max_action_chars) ---" in (
        env.render()
    )
    # a reply under the limit carries no flag
    obs, _, _, _, info = env.last()
    env.step("<plan>\n1. a\n2. b</plan>")
    assert "action_truncated" not in env.infos["planner_0"]
    assert env.infos["planner_0"]["last"] is None  # credited after the plan's review
    env.close()


@pytest.mark.parametrize(
    "reply, reason",
    [
        ("<score>8</score> The question is clear.", ""),
        ("It is fine.", "no <score>N</score> pair"),
        (
            "<score>eight</score> The question is clear.",
            "<score> content 'eight' is not one number",
        ),
        ("<score>11</score> The question is clear.", "score 11 is outside [1, 10]"),
        ("<score>8</score>", "rationale has 0 words (want 3-40: one sentence)"),
        ("<score>x</score> <score>2</score>", "a second <score> tag"),
    ],
)
def test_critic_reply_reason_says_why_the_format_fell_short(reply, reason):
    got = parsing.critic_reply_reason(reply)
    assert got.startswith(reason) if reason else got == ""
    assert (got == "") == (parsing.critic_format_binary(reply) == 1.0)


def test_critic_and_judge_parse_failures_carry_a_reason_in_infos():
    def script(agent, phase, obs, n):
        if phase == "challenge":
            return "<question>What is 3+4?</question><answer>7</answer>"
        if phase == "review_question":
            return "<score>11</score> The question is clear."
        if phase == "plan":
            return "<plan>\n1. add\n2. check</plan>"
        if phase == "review_plan":
            return "no score here"
        return "\\boxed{7}"

    rows = play_round(_env(), script)
    by = {phase: last for _, phase, _, last in rows}
    assert by["review_question"]["reason"] == "score 11 is outside [1, 10]"
    assert by["review_plan"]["reason"] == "no <score>N</score> pair"
    # the grounded plan review (paid after the solves) carries it too
    grounded = sage_env.env(
        EnvConfig(solver_samples=1, domains=("math",)), seeds=[MATH_SEED], render_mode="ansi"
    )
    grounded.config.rewards.critic_plan_grounding = 0.5
    rows = play_round(grounded, script)
    plan_review = [last for _, phase, _, last in rows if phase == "review_plan"][0]
    assert plan_review["reason"] == "no <score>N</score> pair"

    def judge(agent, phase, obs, n):
        if phase.startswith("judge"):
            return "<score>0</score> The answer is wrong."
        return PLAYERS["oracle"](agent, obs, {"phase": phase}, env)

    env = sage_env.env(
        EnvConfig(protocol="mae", solver_samples=1, domains=("math",)), seeds=[MATH_SEED]
    )
    rows = play_round(env, judge)
    reasons = {phase: last["reason"] for _, phase, _, last in rows if phase.startswith("judge")}
    assert reasons["judge_question"] == reasons["judge_answer"] == "score 0 is outside [1, 10]"


def test_human_player_with_piped_stdin_keeps_the_prefix_on_its_own_line(monkeypatch, capsys):
    env = _env()
    env.reset(seed=0)
    obs, _, _, _, info = env.last()
    monkeypatch.setattr("sys.stdin", io.StringIO("What is 6*7?</question>\n.\n"))
    action = human_player("challenger_0", obs, info, env)
    assert action == "<question>What is 6*7?</question>"
    assert capsys.readouterr().out.endswith("<question>\n")
    env.close()


def test_stdin_ending_before_a_human_turn_stops_the_round_clearly(monkeypatch, capsys):
    env = _env()
    env.reset(seed=0)
    obs, _, _, _, info = env.last()
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    with pytest.raises(PlayStopped, match=r"stdin ended before challenger_0 \[challenge\]"):
        human_player("challenger_0", obs, info, env)
    # a line "." alone is an empty reply, not the end
    monkeypatch.setattr("sys.stdin", io.StringIO(".\n"))
    assert human_player("challenger_0", obs, info, env) == "<question>"
    # inside a round: the record of the turns played so far comes with it
    monkeypatch.setattr("sys.stdin", io.StringIO("Q?</question>\n.\n"))
    players = dict.fromkeys(sage_env.AGENTS, PLAYERS["scripted"])
    players["challenger_0"] = players["planner_0"] = human_player
    with pytest.raises(PlayStopped, match=r"before planner_0 \[plan\]") as stopped:
        play(_env(), players, seed=0)
    assert [a["agent"] for a in stopped.value.record.actions] == ["challenger_0"]
    assert stopped.value.record.actions[0]["action"] == "<question>Q?</question>"
    env.close()


def test_play_cli_with_stdin_at_eof_exits_1_with_a_message(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(["play", "--players", "planner=human", "--env.solver-samples", "1"]) == 1
    captured = capsys.readouterr()
    assert "sage-env play: stopped: stdin ended before planner_0 [plan] replied" in captured.err
    assert "challenger_0" in captured.out  # the reward table of the turns played


def test_rewards_doc_lists_the_format_values_the_parsers_give():
    line = " ".join((ROOT / "docs" / "reference" / "rewards.md").read_text().splitlines()[12:16])
    assert "(challenger, planner and" in line and "critic: 0, 0.25, 0.375, 0.625, 0.75 or 1" in line
    replies = [
        "<score>8</score> The question is clear.",
        "<score>8</score>",
        "<score>x</score> The question is clear.",
        "<score>x</score>",
        "The question is clear.",
        "",
    ]
    assert sorted(parsing.critic_format_score(r) for r in replies) == [
        0.0,
        0.25,
        0.375,
        0.625,
        0.75,
        1.0,
    ]
    plans = ["", "<plan>x</plan>", "1. a\n2. b", "<plan>\n1. a\n2. b</plan>"]
    assert sorted({parsing.plan_format_score(p) for p in plans}) == [0.0, 0.5, 1.0]

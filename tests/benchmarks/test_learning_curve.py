"""benchmarks/learning_curve/run.py on a scripted run (no model): summary, statistics, plot."""

import dataclasses
import json
import math
from pathlib import Path

import pytest

from benchmarks.common.stats import final_items, set_summary
from benchmarks.learning_curve import run as lc
from learners.evaluation.heldout import wilson


def test_sets_are_parsed_and_checked():
    cfg = lc.CurveConfig(sets="exec_heldout:200:24, validation:10:64")
    assert cfg.parsed_sets() == [("exec_heldout", 200, 24), ("validation", 10, 64)]
    with pytest.raises(ValueError):
        lc.CurveConfig(sets="gsm8k:10:10").parsed_sets()
    with pytest.raises(ValueError):
        lc.CurveConfig(sets="exec_heldout:0:10").parsed_sets()


def _scripted(
    tmp_path, token_budget, protocols="azr,rlvr", merge=False, calls=None, curve_sets="", seen=None,
    trained=None, **extra,
):
    """A run with a scripted trainer (writes metrics.jsonl) and scripted held-out scores."""
    tokens_per_step = {"azr": 100.0, "rlvr": 40.0}

    def train_fn(tcfg):
        if trained is not None:
            trained.append((tcfg.env.protocol, tcfg.steps, tcfg.resume))
        run = Path(tcfg.out)
        run.mkdir(parents=True, exist_ok=True)
        rows = []
        if tcfg.resume:
            rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
        else:
            rows = [{"step": 0}]
        start = rows[-1]["step"]
        for s in range(start + 1, tcfg.steps + 1):
            row = {"step": s, "rollout/tokens": tokens_per_step[tcfg.env.protocol], "time/step_s": 2.0}
            if tcfg.env.protocol == "azr":
                row.update({"proposer/valid_rate": s / 8, "learner/loss": 0.5})
            rows.append(row)
        (run / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")

    def evaluate_fn(model, sets, cfg, out):
        (out / "exec_heldout" / "items").mkdir(parents=True, exist_ok=True)
        (out / "exec_heldout" / "items" / "exec_heldout.jsonl").write_text(f'{{"model": "{model}"}}\n')
        if calls is not None:
            calls.append(model)
        if seen is not None:
            seen.append(sorted(name for name, _, _ in sets))
        # base: 4 of 20 right; azr gains one item per two steps; rlvr stays
        step = 0 if model == cfg.model else int(Path(model).name.split("@")[1])
        arm = "" if model == cfg.model else Path(model).name.split("@")[0]
        right = 4 + (step // 2 if arm == "azr" else 0) * 3
        return {name: [i < right for i in range(n)] for name, n, _ in sets}

    def model_of(run):
        steps = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["step"]
        return str(run / f"{run.parent.name}@{steps}")

    cfg = lc.CurveConfig(
        protocols=protocols,
        merge=merge,
        sets="exec_heldout:20:8,validation:20:8",
        max_steps=extra.pop("max_steps", 6),
        eval_every=2,
        token_budget=token_budget,
        out=str(tmp_path / "out"),
        runs=str(tmp_path / "runs"),
        warmup_steps=0,
        curve_sets=curve_sets,
        progress=False,
        **extra,
    )
    return lc.run_curve(cfg, train_fn=train_fn, evaluate_fn=evaluate_fn, model_of=model_of)


def test_summary_schema_and_values_on_a_scripted_run(tmp_path):
    summary = _scripted(tmp_path, token_budget=0)
    on_disk = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert on_disk["protocols"].keys() == {"azr", "rlvr"}
    for arm in on_disk["protocols"].values():
        for name in ("exec_heldout", "validation"):
            s = arm["sets"][name]
            assert {"base", "final", "ci95", "items", "steps", "p_value"} <= s.keys()
            assert len(s["ci95"]["base"]) == 2 and len(s["ci95"]["final"]) == 2
            assert s["items"] == 20 and s["steps"] == 6
            assert [p["step"] for p in s["curve"]] == [0, 2, 4, 6]
    azr = on_disk["protocols"]["azr"]["sets"]["exec_heldout"]
    # 4/20 -> 13/20: 9 gained, 0 lost
    assert (azr["base"], azr["final"], azr["gained"], azr["lost"]) == (0.2, 0.65, 9, 0)
    assert azr["p_value"] == pytest.approx(2 * 0.5**9)
    assert azr["ci95"]["final"] == pytest.approx(list(wilson(13, 20)))
    assert azr["gained_items"] == list(range(4, 13)) and azr["lost_items"] == []
    rlvr = on_disk["protocols"]["rlvr"]["sets"]["validation"]
    assert rlvr["p_value"] == 1.0 and rlvr["final"] == rlvr["base"] == 0.2
    assert on_disk["significant"] == ["azr/exec_heldout", "azr/validation"]
    assert on_disk["budget"]["unit"] == "steps"
    assert on_disk["protocols"]["azr"]["seconds_per_step"] == 2.0
    # each step's proposal validity survives the deleted run folder; other metrics do not
    log = on_disk["protocols"]["azr"]["step_log"]
    assert [r["step"] for r in log] == [1, 2, 3, 4, 5, 6]
    assert log[2] == {"step": 3, "rollout/tokens": 100.0, "time/step_s": 2.0, "proposer/valid_rate": 0.375}
    assert "proposer/valid_rate" not in on_disk["protocols"]["rlvr"]["step_log"][0]
    assert (tmp_path / "out" / "learning_curve.png").stat().st_size > 0
    assert "| azr | exec_heldout | 20 |" in (tmp_path / "out" / "table.md").read_text()
    assert not (tmp_path / "runs").exists()  # training runs are cleaned up
    kept = tmp_path / "out" / "items"  # ... but the completions of base and final are kept
    assert sorted(p.name for p in kept.iterdir()) == ["azr_step6", "base", "rlvr_step6"]
    assert "rlvr@6" in (kept / "rlvr_step6" / "exec_heldout.jsonl").read_text()
    assert summary["table"] == on_disk["table"]


@pytest.mark.slow
def test_equal_token_budget_stops_each_arm_at_its_own_step(tmp_path):
    summary = _scripted(tmp_path, token_budget=300)
    arms = summary["protocols"]
    # azr: 100 tokens/step -> stops after the chunk that reaches 300 (step 4); rlvr: 40/step
    # -> never reaches 300 within 6 steps
    assert arms["azr"]["budget"]["steps"] == 4 and arms["azr"]["budget"]["rollout_tokens"] == 400
    assert arms["rlvr"]["budget"]["steps"] == 6
    assert summary["budget"] == {"unit": "rollout tokens", "per_arm": 300, "max_steps": 6}
    assert math.isclose(arms["azr"]["sets"]["exec_heldout"]["final"], 0.5)


@pytest.mark.slow
def test_merge_keeps_earlier_arms_and_reuses_the_base_scores(tmp_path):
    calls = []
    _scripted(tmp_path, 0, protocols="azr", calls=calls)
    assert calls[0] == "smollm2-135m-instruct"  # the base model, scored once
    calls.clear()
    summary = _scripted(tmp_path, 0, protocols="rlvr", merge=True, calls=calls)
    assert "smollm2-135m-instruct" not in calls  # reused from base_items.json
    assert list(summary["protocols"]) == ["azr", "rlvr"]
    assert summary["protocols"]["azr"]["sets"]["exec_heldout"]["final"] == 0.65


def test_curve_sets_score_the_other_sets_at_base_and_last_chunk_only(tmp_path):
    seen = []
    summary = _scripted(tmp_path, token_budget=0, protocols="azr", curve_sets="exec_heldout", seen=seen)
    # base (both sets), steps 2 and 4 (exec_heldout only), step 6 = last chunk (both)
    assert seen == [["exec_heldout", "validation"], ["exec_heldout"], ["exec_heldout"],
                    ["exec_heldout", "validation"]]
    sets = summary["protocols"]["azr"]["sets"]
    assert [p["step"] for p in sets["exec_heldout"]["curve"]] == [0, 2, 4, 6]
    assert [p["step"] for p in sets["validation"]["curve"]] == [0, 6]
    assert (sets["validation"]["base"], sets["validation"]["final"]) == (0.2, 0.65)
    assert sets["validation"]["steps"] == 6
    with pytest.raises(ValueError, match="curve-sets"):
        lc.CurveConfig(sets="exec_heldout:5:5", curve_sets="validation").every_chunk()


def test_arm_config_applies_k_lr_and_domains_to_every_protocol():
    for protocol in ("sage", "azr", "rlvr", "mae"):
        t = lc.train_config(lc.CurveConfig(solver_samples=8, lr=2e-5, eval_every=3), protocol)
        assert (t.env.protocol, t.env.solver_samples, t.learner.lr) == (protocol, 8, 2e-5)
        assert t.env.domains == ("exec",) and t.steps == 3 and t.val_every == 0
        assert t.heldout == ""  # the benchmark scores its own sets
    preset = lc.train_config(lc.CurveConfig(), "azr")
    assert (preset.env.solver_samples, preset.learner.lr) == (2, 1e-5)  # the demo preset's


def test_wilson_is_exact_at_the_edges_and_a_zero_accuracy_set_plots(tmp_path):
    # a set with 0 right (CRUXEval-I at base) crashed the plot: the low bound was 1e-18, not 0
    assert wilson(0, 200)[0] == 0.0 and wilson(200, 200)[1] == 1.0
    lo, hi = wilson(0, 200)
    curve = [{"step": 0, "accuracy": 0.0, "ci95": [lo, hi]}, {"step": 3, "accuracy": 0.085, "ci95": list(wilson(17, 200))}]
    summary = {"protocols": {"azr": {"sets": {"cruxeval_i": {"items": 200, "curve": curve}}}}}
    path = lc.plot(summary, tmp_path / "c.png")
    assert path.exists() and path.stat().st_size > 1000


@pytest.mark.slow
def test_resume_continues_a_stopped_arm_and_skips_a_finished_one(tmp_path):
    trained = []
    first = _scripted(tmp_path, 0, protocols="azr", max_steps=4, keep_runs=True, trained=trained)
    assert trained == [("azr", 2, False), ("azr", 4, True)]
    assert first["protocols"]["azr"]["sets"]["exec_heldout"]["steps"] == 4
    # a larger --max-steps with --resume trains only steps 5-6, keeping the earlier curve
    trained.clear()
    summary = _scripted(
        tmp_path, 0, protocols="azr", max_steps=6, keep_runs=True, resume=True, trained=trained
    )
    assert trained == [("azr", 6, True)]
    curve = summary["protocols"]["azr"]["sets"]["exec_heldout"]["curve"]
    assert [p["step"] for p in curve] == [0, 2, 4, 6]
    assert summary["protocols"]["azr"]["sets"]["exec_heldout"]["final"] == 0.65
    # finished: resuming again trains nothing and gives the same summary entry
    trained.clear()
    again = _scripted(
        tmp_path, 0, protocols="azr", max_steps=6, keep_runs=True, resume=True, trained=trained
    )
    assert trained == [] and again["protocols"]["azr"]["sets"] == summary["protocols"]["azr"]["sets"]
    # without --resume the arm starts over
    trained.clear()
    _scripted(tmp_path, 0, protocols="azr", max_steps=2, keep_runs=True, trained=trained)
    assert trained == [("azr", 2, False)]


def test_frozen_arm_gets_its_own_run_folder_and_items(tmp_path):
    summary = _scripted(tmp_path, 0, protocols="azr,azr:frozen", max_steps=2)
    assert list(summary["protocols"]) == ["azr", "azr:frozen"]
    assert (tmp_path / "out" / "partial" / "azr-frozen.json").exists()


def test_variant_arm_applies_its_train_flags_on_top_of_the_arm():
    cfg = lc.CurveConfig(
        variants="int8-tis=--rollout.ct2-compute-type int8 --learner.tis-cap 2;"
        " bf16=--learner.autocast-bf16",
        solver_samples=8,
    )
    plain, bf16, int8 = (lc.train_config(cfg, a) for a in ("rlvr", "rlvr@bf16", "rlvr@int8-tis"))
    assert (plain.learner.autocast_bf16, bf16.learner.autocast_bf16) == (False, True)
    assert (int8.rollout.ct2_compute_type, int8.learner.tis_cap) == ("int8", 2.0)
    assert plain.rollout.ct2_compute_type == bf16.rollout.ct2_compute_type == "float32"
    # everything else is the plain arm's: same k, engine, seed; its own run folder
    assert bf16.env.solver_samples == int8.env.solver_samples == 8
    assert bf16.rollout.engine == plain.rollout.engine == "ct2" and bf16.seed == plain.seed
    assert dataclasses.replace(bf16, learner=plain.learner, out=plain.out) == plain
    assert len({plain.out, bf16.out, int8.out}) == 3


@pytest.mark.parametrize(
    "variants, arms, match",
    [
        ("bf16=--learner.autocast-bf16", "rlvr,rlvr@fast", "not in --variants"),
        ("bf16 --learner.autocast-bf16", "rlvr", "NAME=FLAGS"),
        ("a=--seed 1;a=--seed 2", "rlvr", "repeats"),
        ("a@b=--seed 1", "rlvr", "NAME=FLAGS"),
        ("bad=--learner.no-such-flag 3", "rlvr,rlvr@bad", "no-such-flag"),
        ("bad=--learner.tis-cap many", "rlvr,rlvr@bad", "tis-cap"),
    ],
)
def test_bad_variants_fail_before_any_scoring(tmp_path, variants, arms, match):
    calls = []
    with pytest.raises(ValueError, match=match):
        _scripted(tmp_path, 0, protocols=arms, variants=variants, calls=calls)
    assert calls == []  # nothing was scored or trained


def test_variant_arm_is_compared_with_its_plain_arm_on_the_same_items(tmp_path):
    summary = _scripted(
        tmp_path, 0, protocols="azr,azr@slow,rlvr@slow", max_steps=2,
        variants="slow=--learner.autocast-bf16",
    )
    assert list(summary["protocols"]) == ["azr", "azr@slow", "rlvr@slow"]
    # the scripted azr gains items 4-6 by step 2; the variant (another run folder) gains none
    pair = summary["pairs"]["azr@slow vs azr"]["exec_heldout"]
    assert (pair["plain"], pair["variant"], pair["items"], pair["steps"]) == (0.35, 0.2, 20, 2)
    assert (pair["variant_only"], pair["plain_only"]) == (0, 3)
    assert pair["p_value"] == pytest.approx(2 * 0.5**3)
    assert list(summary["pairs"]) == ["azr@slow vs azr"]  # rlvr@slow has no plain arm here
    table = (tmp_path / "out" / "table.md").read_text()
    assert "| azr@slow vs azr | exec_heldout | 20 | 2 | 0.200 | 0.350 | 0 / 3 | 0.25 |" in table
    assert (tmp_path / "out" / "partial" / "azr-slow.json").exists()
    assert sorted(p.name for p in (tmp_path / "out" / "items").iterdir()) == [
        "azr-slow_step2", "azr_step2", "base", "rlvr-slow_step2"]


def test_final_items_rebuilds_an_arms_last_scores_from_base_and_changes():
    base = [True, True, False, False, True]
    s = set_summary([(0, base), (3, [True, False, True, False, True])])
    assert final_items(base, s) == [True, False, True, False, True]


def test_pool_seeds_sums_discordant_pairs_over_seeds(tmp_path):
    from benchmarks.learning_curve import pool_seeds

    def seed_run(seed, plain_final, variant_final):
        out = tmp_path / f"s{seed}"
        s = _scripted(
            out, 0, protocols="azr,azr@v", max_steps=2, variants="v=--learner.autocast-bf16",
            seed=seed,
        )
        # what the scripted run scored is fixed; overwrite the pair with this seed's figures
        s["pairs"]["azr@v vs azr"]["exec_heldout"].update(
            variant_only=variant_final, plain_only=plain_final
        )
        return s

    got = pool_seeds.pool([seed_run(0, 3, 0), seed_run(1, 4, 1), seed_run(2, 2, 0)])
    p = got["pairs"]["azr@v vs azr"]["exec_heldout"]
    assert got["seeds"] == [0, 1, 2]
    assert (p["variant_only"], p["plain_only"], p["pairs"]) == (1, 9, 60)
    assert p["p_value"] == pytest.approx(2 * 11 * 0.5**10)  # 2 P(X <= 1), X ~ Bin(10, 1/2)
    assert [r["seed"] for r in p["per_seed"]] == [0, 1, 2]
    arm = got["arms"]["azr"]["exec_heldout"]
    assert (arm["runs"], arm["base"], arm["gained"]) == (3, 0.2, 9)
    assert arm["final"] == pytest.approx(0.35)
    assert "| azr@v vs azr | exec_heldout | 60 |" in pool_seeds.markdown(got)
    other = seed_run(3, 0, 0)
    other["base_key"] = {**other["base_key"], "model": "another"}
    with pytest.raises(ValueError, match="different base"):
        pool_seeds.pool([seed_run(0, 1, 1), other])

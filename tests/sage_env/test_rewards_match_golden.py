"""Rewards and reward terms byte-identical to the record taken before the typed outcome
(issue 50 item 1): every credit of scripted rounds of every protocol
(:mod:`tests.sage_env.reward_golden`, ``tests/data/reward_golden.json``), compared as
``repr`` strings.

A deliberate reward change regenerates the record (``python -m tests.sage_env.reward_golden``)
in the commit that makes it, saying why.
"""

from __future__ import annotations

import json

import pytest

from tests.sage_env import reward_golden

GOLDEN = json.loads(reward_golden.GOLDEN.read_text())
QUICK_CASES, QUICK_SEEDS = {"default", "interleaved", "expected_score"}, {0}
"""Rounds of the quick lane (seed 0 of the cases that run the sandbox least); the others
(seed 1, execution tasks, program-grounded math) are marked slow."""


def _params():
    for case in reward_golden.cases():
        quick = case[1] in QUICK_CASES and case[3] in QUICK_SEEDS
        marks = () if quick else (pytest.mark.slow,)
        yield pytest.param(*case, id=reward_golden.key(*case), marks=marks)


def test_the_record_covers_every_protocol_and_case():
    assert set(GOLDEN) == {reward_golden.key(*c) for c in reward_golden.cases()}
    protocols = {k.split("/")[0] for k in GOLDEN}
    assert protocols == {"azr", "azr-qa", "mae", "rlvr", "sage"}
    credits = [r for v in GOLDEN.values() for r in v if r[0] == "deliver"]
    assert len(credits) > 300
    rewards = {r[3] for r in credits}
    assert len(rewards) > 12  # both sides of the gates: many distinct rewards


@pytest.mark.parametrize(("protocol", "case", "player", "seed"), list(_params()))
def test_rewards_and_terms_are_byte_identical(protocol, case, player, seed):
    got = json.loads(json.dumps(reward_golden.play(protocol, case, player, seed)))
    assert got == GOLDEN[reward_golden.key(protocol, case, player, seed)]

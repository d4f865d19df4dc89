"""Each protocol owns its warm-up demonstrations (issue 36 item 4): ``demonstrations_for`` asks
the protocol, SAGE's formats are the default, AZR overrides them, and a user's protocol can."""

import pytest

from sage_env import Protocol
from sage_env.protocols.demonstrations import Demonstration
from sage_env.protocols.warmup import demonstrations_for, sage_formats
from sage_env.tasks.task import load_seeds

SEEDS = load_seeds()
MIX = {"challenger": 0.4, "critic": 0.4, "planner": 0.1, "solver": 0.1}


@pytest.mark.parametrize("name", ["sage", "mae", "rlvr", "azr-qa", "not-registered"])
@pytest.mark.parametrize("domains", [("math", "code"), ("math", "code", "exec")])
def test_every_protocol_but_azr_warms_up_on_sage_formats(name, domains):
    want = sage_formats(domains, SEEDS, 24, MIX, seed=2)
    assert demonstrations_for(name, domains, SEEDS, 24, seed=2) == want


def test_azr_owns_its_warmup():
    from sage_env.protocols.azr import AZRProtocol

    assert AZRProtocol.demonstrations is not Protocol.demonstrations
    demos = demonstrations_for("azr", ("math", "code"), SEEDS, 12, seed=1)
    assert demos == AZRProtocol().demonstrations(("math", "code"), SEEDS, 12, MIX, seed=1)
    assert demos != sage_formats(("math", "code"), SEEDS, 12, MIX, seed=1)


def test_a_user_protocol_supplies_its_own_demonstrations():
    class OwnDemos(Protocol):
        name = "own_demos_test"

        def demonstrations(self, domains, seeds, n, mix, seed=0, exclude=None,
                           math_grounding="claim"):
            obs = {"system": "s", "user": seeds[0].prompt, "prefix": ""}
            return [Demonstration("solver", obs, "42", (seeds[0].task_id,))] * n

    demos = demonstrations_for(OwnDemos(), ("math",), SEEDS, 3)
    assert [d.target for d in demos] == ["42"] * 3

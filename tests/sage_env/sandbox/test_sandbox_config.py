"""Unit tests of the sandbox's limits (sage_env/sandbox/host/config.py: ``SandboxConfig``),
for the mutation run (issue 49, ``scripts/mutation.py sandbox_limits``).

No sandbox runs here: every test asserts the exact values a config hands the harness (its
rlimits, its wall-clock backstop, its environment) at settings other than the defaults, as
root and not (``os.geteuid`` faked).
"""

from __future__ import annotations

import os

import pytest

from sage_env.sandbox.host import config
from sage_env.sandbox.host.config import CHILD_ENV, SandboxConfig

MIB = 1 << 20


def _as(monkeypatch, euid: int) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: euid)


# ------------------------------------------------------------------------------------------
# hash_seed: 0 .. 2**32 - 1


@pytest.mark.parametrize("seed", [None, 0, 1, 4294967295])
def test_a_hash_seed_in_range_or_none_is_accepted(seed):
    assert SandboxConfig(hash_seed=seed).hash_seed == seed


@pytest.mark.parametrize("seed", [-1, 4294967296])
def test_a_hash_seed_out_of_range_is_refused_with_its_value(seed):
    with pytest.raises(ValueError) as err:
        SandboxConfig(hash_seed=seed)
    assert str(err.value) == f"hash_seed must be in [0, 4294967295], got {seed}"


# ------------------------------------------------------------------------------------------
# child_env: the scrubbed environment, the extras, PYTHONHASHSEED


def test_the_child_environment_is_the_scrubbed_one_without_a_hash_seed():
    env = SandboxConfig().child_env()
    assert env == {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    assert "PYTHONHASHSEED" not in env


def test_the_child_environment_adds_the_extras_as_text_and_the_hash_seed_zero():
    cfg = SandboxConfig(hash_seed=0, env=(("TZ", "Asia/Kathmandu"), ("N", 3), ("LANG", "C")))
    env = cfg.child_env()
    assert env == {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C",  # an extra overrides the scrubbed value
        "TZ": "Asia/Kathmandu",
        "N": "3",
        "PYTHONHASHSEED": "0",
    }
    assert all(type(k) is str and type(v) is str for k, v in env.items())
    # the module's table is copied, never changed
    assert CHILD_ENV == {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    assert env is not CHILD_ENV


def test_the_largest_hash_seed_is_written_in_full():
    assert SandboxConfig(hash_seed=4294967295).child_env()["PYTHONHASHSEED"] == "4294967295"


def test_an_extra_named_pythonhashseed_yields_to_the_config_seed():
    cfg = SandboxConfig(hash_seed=5, env=(("PYTHONHASHSEED", "9"),))
    assert cfg.child_env()["PYTHONHASHSEED"] == "5"


# ------------------------------------------------------------------------------------------
# wall_limit_s: WALL_FACTOR x timeout_s + WALL_SLACK_S unless wall_s is given


def test_the_wall_limit_is_three_times_the_cpu_budget_plus_two_seconds():
    assert config.WALL_FACTOR == 3.0 and config.WALL_SLACK_S == 2.0
    assert SandboxConfig(timeout_s=4.0).wall_limit_s() == 14.0
    assert SandboxConfig(timeout_s=0.5).wall_limit_s() == 3.5
    assert SandboxConfig().wall_limit_s() == 32.0


def test_a_given_wall_limit_wins_as_a_float_zero_included():
    limit = SandboxConfig(timeout_s=4.0, wall_s=7).wall_limit_s()
    assert limit == 7.0 and type(limit) is float
    zero = SandboxConfig(timeout_s=4.0, wall_s=0).wall_limit_s()
    assert zero == 0.0 and type(zero) is float


# ------------------------------------------------------------------------------------------
# limits: the worker's rlimits


def _cfg() -> SandboxConfig:
    return SandboxConfig(
        timeout_s=2.5, memory_mb=300, file_size_mb=5, open_files=33, max_processes=17
    )


BASE = [
    ("RLIMIT_AS", 300 * MIB, 300 * MIB),
    ("RLIMIT_CPU", 3, 4),
    ("RLIMIT_FSIZE", 5 * MIB, 5 * MIB),
    ("RLIMIT_NOFILE", 33, 33),
    ("RLIMIT_CORE", 0, 0),
    ("RLIMIT_STACK", 16 * MIB, 16 * MIB),
]


def test_limits_as_root_with_a_pids_cgroup_keep_a_generous_nproc_backstop(monkeypatch):
    _as(monkeypatch, 0)
    assert _cfg().limits(True) == BASE + [("RLIMIT_NPROC", 4096, 4096)]


def test_limits_as_root_without_a_pids_cgroup_cap_nproc_at_max_processes(monkeypatch):
    _as(monkeypatch, 0)
    assert _cfg().limits(False) == BASE + [("RLIMIT_NPROC", 17, 17)]


def test_limits_as_a_user_with_a_pids_cgroup_set_no_nproc(monkeypatch):
    _as(monkeypatch, 1)
    assert _cfg().limits(True) == BASE
    _as(monkeypatch, 1000)
    assert _cfg().limits(True) == BASE


def test_limits_as_a_user_without_a_pids_cgroup_cap_nproc_at_max_processes(monkeypatch):
    _as(monkeypatch, 1000)
    assert _cfg().limits(False) == BASE + [("RLIMIT_NPROC", 17, 17)]


@pytest.mark.parametrize(
    ("timeout_s", "cpu"), [(0.0, 1), (0.2, 1), (1.0, 1), (1.01, 2), (2.0, 2), (2.5, 3)]
)
def test_the_cpu_limit_is_the_budget_rounded_up_at_least_one_second(monkeypatch, timeout_s, cpu):
    _as(monkeypatch, 1000)
    limits = dict(
        (name, (soft, hard)) for name, soft, hard in SandboxConfig(timeout_s).limits(True)
    )
    assert limits["RLIMIT_CPU"] == (cpu, cpu + 1)


def test_default_limits(monkeypatch):
    _as(monkeypatch, 1000)
    assert SandboxConfig().limits(False) == [
        ("RLIMIT_AS", 1024 * MIB, 1024 * MIB),
        ("RLIMIT_CPU", 10, 11),
        ("RLIMIT_FSIZE", 16 * MIB, 16 * MIB),
        ("RLIMIT_NOFILE", 64, 64),
        ("RLIMIT_CORE", 0, 0),
        ("RLIMIT_STACK", 16 * MIB, 16 * MIB),
        ("RLIMIT_NPROC", 64, 64),
    ]

"""Fixtures shared by the sandbox and verifier tests."""

from __future__ import annotations

import shutil

import pytest

from sage_env import sandbox
from sage_env.sandbox.host import probe

#: The isolation levels a ``level`` test runs at unless it says otherwise: each level with and
#: without the zygote fast path (``-zygote``). A module that wants other ones parametrizes
#: ``level`` itself, indirectly: ``@pytest.mark.parametrize("level", [...], indirect=True)``.
LEVELS = ("unshare", "unshare-zygote", "bwrap", "bwrap-zygote")


def level_available(level: str) -> bool:
    """Whether isolation level ``level`` (``bwrap``, ``unshare``, ``rlimits``) works here."""
    if level in ("bwrap", "unshare") and shutil.which(level) is None:
        return False
    return probe._probe_level(level, sandbox.default_python())


@pytest.fixture(params=LEVELS)
def level(request, monkeypatch):
    """Force an isolation level (and the zygote fast path on or off) for one test.

    Every pool is closed before and after, so the test's jobs run at that level only. A level
    this machine lacks is skipped (bubblewrap not installed, ``unshare`` without root, the
    zygote without a pids cgroup).
    """
    name = request.param
    base = name.split("-")[0]
    if base == "bwrap" and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    if not level_available(base):
        pytest.skip(f"isolation level {base} is unavailable here")
    sandbox.close_pools()
    monkeypatch.setattr(probe, "_LEVEL", base)
    monkeypatch.setenv("SAGE_SANDBOX_ZYGOTE", "1" if name.endswith("-zygote") else "0")
    if name.endswith("-zygote") and not sandbox.zygotes_available():
        pytest.skip("the zygote fast path needs root and a pids cgroup")
    yield name
    sandbox.close_pools()

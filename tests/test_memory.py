"""``learners.memory.release_memory``: glibc's ``malloc_trim(0)``, a no-op elsewhere."""

import sys

from learners import memory


def test_release_memory_trims_on_glibc_and_is_a_no_op_elsewhere(monkeypatch):
    memory._malloc_trim.cache_clear()
    try:
        glibc = sys.platform.startswith("linux") and memory._malloc_trim() is not None
        assert memory.release_memory() is glibc
        memory._malloc_trim.cache_clear()
        monkeypatch.setattr(memory.sys, "platform", "darwin")
        assert memory._malloc_trim() is None
        assert memory.release_memory() is False
    finally:
        memory._malloc_trim.cache_clear()

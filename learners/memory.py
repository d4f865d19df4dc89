"""Giving freed memory back to the system (glibc's ``malloc_trim``).

glibc keeps the memory a process frees in its heaps for later allocations, so a process's
resident memory (RSS) stays at what a large transient (a converted CTranslate2 model, a
step's activations) left behind. ``malloc_trim(0)`` returns the free pages of every heap
to the system; it changes no value the process computes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or ``None`` (not Linux, or a libc without it, e.g. musl)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_memory() -> bool:
    """Return the free pages of the C heap to the system (glibc ``malloc_trim(0)``).

    Call it after freeing something large; it takes milliseconds to a few tenths of a second.

    Returns:
        ``True`` when glibc's ``malloc_trim`` ran, ``False`` where there is none (a no-op).
    """
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True

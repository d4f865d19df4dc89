"""Random-generator state written to JSON and read back (a leaf module).

``random.Random.getstate()`` is a tuple of tuples; JSON gives lists back. :func:`as_tuple`
restores the tuples so ``setstate`` accepts it (checkpoints, per-rank states, learners).
"""

from __future__ import annotations

from typing import Any


def as_tuple(x: Any) -> Any:
    """``x`` with every list (recursively) turned into a tuple; other values unchanged."""
    return tuple(as_tuple(v) for v in x) if isinstance(x, list) else x

"""Where the raw benchmark data (``shared/data``) is, for tests that need it.

``$SAGE_ENV_DATA`` if set, else ``shared/data`` next to the repository, else
``/work/shared/data``; tests that need it skip with a reason when none exists.
"""

import os
from pathlib import Path

_CANDIDATES = [
    os.environ.get("SAGE_ENV_DATA"),
    Path(__file__).resolve().parents[2] / "shared" / "data",
    "/work/shared/data",
]
SHARED_DATA = next(
    (Path(c) for c in _CANDIDATES if c and Path(c).is_dir()),
    Path(__file__).resolve().parents[2] / "shared" / "data",
)

"""Where benchmark rows come from: the data folder (shipped files, ``--data-dir``,
``$SAGE_ENV_DATA``) or the Hugging Face hub (``source``: see :mod:`learners.evaluation.benchmarks`).
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass
from pathlib import Path

SHIPPED_DATA = Path(__file__).resolve().parents[2] / "data" / "benchmarks"
"""The benchmark files shipped inside the package (``learners/data/benchmarks``)."""

SOURCES = ("auto", "local", "hub")
"""Values of ``source``: see the module docstring."""


@dataclass(frozen=True)
class HubSource:
    """Where a benchmark file's rows live on the Hugging Face hub.

    Attributes:
        path: Dataset id (``"openai/gsm8k"``).
        name: Dataset configuration, if it has several.
        split: Split to load.
        revision: Commit or tag (``None``: the hub's default branch at load time).
        rename: ``(hub field, local field)`` pairs, applied when the local field is absent,
            so the rows fit the loader written for the local file.
    """

    path: str
    name: str | None = None
    split: str = "test"
    revision: str | None = None
    rename: tuple[tuple[str, str], ...] = ()


HUB_SOURCES: dict[str, HubSource] = {
    "math/gsm8k_test.jsonl": HubSource("openai/gsm8k", "main"),
    "math/math500_test.jsonl": HubSource("HuggingFaceH4/MATH-500"),
    "math/aime24_test.jsonl": HubSource("HuggingFaceH4/aime_2024", split="train"),
    "math/aime25_test.jsonl": HubSource("math-ai/aime25", rename=(("question", "problem"),)),
    "math/amc23_test.jsonl": HubSource("math-ai/amc23", rename=(("question", "problem"),)),
    "math/olympiadbench_test.jsonl.gz": HubSource(
        "Hothan/OlympiadBench", "OE_TO_maths_en_COMP", split="train"
    ),
    "code/HumanEval.jsonl.gz": HubSource("openai/openai_humaneval"),
    "code/sanitized-mbpp.json": HubSource("google-research-datasets/mbpp", "sanitized"),
    "code/cruxeval.jsonl.gz": HubSource("cruxeval-org/cruxeval"),
}
"""Hub copies of the layout's files, keyed by file. HumanEval+ and MBPP+ have none: the hub
copies do not carry EvalPlus's ``base_input``/``plus_input`` (the package ships both files)."""


def default_data_dir() -> Path:
    """``$SAGE_ENV_DATA`` if set, else the files shipped with the package (:data:`SHIPPED_DATA`)."""
    env = os.environ.get("SAGE_ENV_DATA")
    return Path(env) if env else SHIPPED_DATA


def read_rows(path: Path) -> list[dict]:
    """The records of a ``.json`` (a list), ``.jsonl`` or ``.jsonl.gz`` benchmark file.

    Raises:
        FileNotFoundError: naming the layout and the hub alternative when it is missing.
    """
    if not path.exists():
        raise FileNotFoundError(
            f"benchmark file {path} not found; pass --data-dir DIR holding it (layout: "
            "learners.evaluation.benchmarks.BENCHMARK_FILES; what ships with sage-env: "
            "learners/data/benchmarks/README.md) or load it from the hub (--source hub, "
            'needs pip install "sage-env[hub]" and a network)'
        )
    if path.suffix == ".json":
        return json.loads(path.read_text(encoding="utf-8"))
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def hub_rows(hub: HubSource) -> list[dict]:
    """The rows of a hub dataset split as plain dicts, renamed to the local file's fields.

    Raises:
        RuntimeError: without the ``datasets`` package, or when the load fails (no network
            and no cached copy under ``HF_HUB_OFFLINE=1``, an unknown dataset).
    """
    try:
        from datasets import load_dataset
    except ImportError as exc:
        raise RuntimeError(
            f'loading {hub.path} from the Hugging Face hub needs pip install "sage-env[hub]" '
            "(the datasets package)"
        ) from exc
    try:
        rows = load_dataset(hub.path, hub.name, split=hub.split, revision=hub.revision)
    except Exception as exc:  # network, auth, unknown dataset: one clear message
        raise RuntimeError(
            f"could not load {hub.path} (config {hub.name or 'default'}, split {hub.split}) "
            f"from the Hugging Face hub: {type(exc).__name__}: {exc}"
        ) from exc
    out = []
    for row in rows:
        row = dict(row)
        for src, dst in hub.rename:
            if dst not in row and src in row:
                row[dst] = row.pop(src)
        out.append(row)
    return out


def benchmark_rows(
    file: str, data_dir: str | os.PathLike | None = None, source: str = "auto"
) -> list[dict]:
    """The rows of one benchmark file of the layout, from the data folder or the hub.

    Args:
        file: The file's path in the layout (``"math/gsm8k_test.jsonl"``).
        data_dir: Data folder (default :func:`default_data_dir`).
        source: ``auto`` (the folder, else the hub for a file that is not there), ``local``
            or ``hub``.

    Raises:
        ValueError: on an unknown ``source``, or ``hub`` for a file with no hub copy.
        FileNotFoundError: if the file is not in the folder (and, with ``auto``, the hub
            could not provide it either; the message says both).
        RuntimeError: with ``hub``, when the hub load fails.
    """
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}; choose one of {', '.join(SOURCES)}")
    path = (Path(data_dir) if data_dir is not None else default_data_dir()) / file
    hub = HUB_SOURCES.get(file)
    if source == "hub":
        if hub is None:
            raise ValueError(
                f"{file} has no hub source (learners.evaluation.benchmarks.HUB_SOURCES); "
                "use --source local"
            )
        return hub_rows(hub)
    if source == "local" or path.exists() or hub is None:
        return read_rows(path)
    try:
        return hub_rows(hub)
    except RuntimeError as exc:
        raise FileNotFoundError(
            f"benchmark file {file} is not in {path.parent.parent} (sage-env does not ship it: "
            f"learners/data/benchmarks/README.md says why), and the hub fallback failed: {exc}. "
            f"Pass --data-dir DIR holding {file} (layout: "
            "learners.evaluation.benchmarks.BENCHMARK_FILES), or give the hub a network."
        ) from exc

"""``sage-env report``: one self-contained HTML page of a run (or several, overlaid).

The page answers the four questions a run leaves: did the pool grow and with what, which
tasks were accepted and were they any good, does the critic's gate discriminate, and what did
each role write. It reads what :func:`learners.training.loop.train` leaves in a run folder:

- ``metrics.jsonl``: the curves (every numeric key; several runs overlaid with a legend) and
  the critic probe's per-item scores (``critic/probe_q_intact`` / ``_corrupted``);
- ``transcripts/step_N.jsonl``: every round as structured data (``learners.training.metrics
  .round_records``): the transcripts section and every proposal, accepted or rejected, with
  its parent, verifier check, critic score and difficulty probes; runs written before that
  file existed fall back to ``transcripts/step_N.txt`` (plain text) and ``pool.jsonl``;
- ``pool.jsonl``: the final pool (seeds, the parents' text, accepted tasks' provenance);
- ``config.yaml``: the run's settings.

Charts are Plotly (``plotly.offline.get_plotlyjs()``, inlined): a well-kept library whose
bundle works offline, with zoom, hover and legend toggles out of the box. Scripts, styles and
data are all inline, so the file opens from disk with no network.
"""

from __future__ import annotations

import datetime
import json
import logging
from collections import Counter
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from learners.reports.run_data import load_run

logger = logging.getLogger("sage_env.report")

TEMPLATE = "report_template.html"
"""The page template, shipped as package data next to this module."""


@dataclass
class ReportConfig:
    """Options of ``sage-env report``."""

    runs: tuple[str, ...]
    """Run folders (``sage-env train --out``); several are overlaid in the curves."""
    out: str = "report.html"
    """The HTML file to write (one self-contained file)."""
    title: str | None = None
    """Page title (default: the run names)."""
    max_rounds_per_step: int = 8
    """Rounds per step whose full transcript goes into the page (0 = every round). Every
    round's proposal is in the pool view and every step in the curves whatever this is; it
    only bounds the page size of runs with many rounds per step."""
    max_rejected: int = 20_000
    """Rejected proposals kept in the pool view, the latest first (0 = all); every accepted
    one is kept. Bounds the page of a long run with many rounds per step."""


def _unique_names(runs: list[dict[str, Any]]) -> None:
    counts = Counter(r["name"] for r in runs)
    seen: Counter = Counter()
    for r in runs:
        if counts[r["name"]] > 1:
            parent = Path(r["path"]).resolve().parent.name
            seen[r["name"]] += 1
            r["name"] = f"{parent}/{r['name']}" if parent else f"{r['name']} ({seen[r['name']]})"
    counts = Counter(r["name"] for r in runs)  # still equal (same parent name): number them
    seen = Counter()
    for r in runs:
        if counts[r["name"]] > 1:
            seen[r["name"]] += 1
            r["name"] = f"{r['name']} ({seen[r['name']]})"


def _script_json(data: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">`` (no ``</script>``)."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def render_html(runs: list[dict[str, Any]], title: str | None = None) -> str:
    """The page for runs loaded with :func:`load_run` (one self-contained HTML string)."""
    import html

    from plotly.offline import get_plotlyjs

    template = resources.files("learners.reports").joinpath(TEMPLATE).read_text(encoding="utf-8")
    title = title or "sage-env report: " + ", ".join(r["name"] for r in runs)
    payload = {
        "title": title,
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "runs": runs,
    }
    pieces = {
        "/*__PLOTLY_JS__*/": get_plotlyjs(),
        "__REPORT_DATA__": _script_json(payload),
        "__REPORT_TITLE__": html.escape(title),
    }
    out = [template]
    for marker, value in pieces.items():  # split on markers, so no value is ever rescanned
        nxt = []
        for part in out:
            if isinstance(part, tuple):
                nxt.append(part)
                continue
            chunks = part.split(marker)
            for k, chunk in enumerate(chunks):
                if k:
                    nxt.append((value,))
                nxt.append(chunk)
        out = nxt
    return "".join(p[0] if isinstance(p, tuple) else p for p in out)


def write_report(
    runs: list[str | Path] | tuple[str | Path, ...],
    out: str | Path,
    title: str | None = None,
    max_rounds_per_step: int = 8,
    max_rejected: int = 20_000,
) -> Path:
    """Write the HTML report of one or more run folders to ``out`` (atomically).

    Args:
        runs: Run folders; the curves overlay them, the other sections pick one at a time.
        out: The HTML file to write (its folder is created).
        title: Page title (default: the run names).
        max_rounds_per_step: Rounds per step whose transcript goes into the page (0 = all).
        max_rejected: Rejected proposals kept in the pool view, the latest (0 = all).

    Returns:
        ``Path(out)``.

    Raises:
        ValueError: if ``runs`` is empty.
        FileNotFoundError: if a run folder does not exist or holds no run.
    """
    if not runs:
        raise ValueError("give at least one run folder")
    loaded = [load_run(r, max_rounds_per_step, max_rejected) for r in runs]
    _unique_names(loaded)
    text = render_html(loaded, title)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text, encoding="utf-8", errors="replace")  # lone surrogates from a model
    tmp.replace(out)
    return out


def report_from_config(cfg: ReportConfig) -> Path:
    """Run ``sage-env report`` as configured; returns the file written."""
    return write_report(
        list(cfg.runs), cfg.out, cfg.title, cfg.max_rounds_per_step, cfg.max_rejected
    )


__all__ = ["ReportConfig", "render_html", "report_from_config", "write_report"]

"""Check that the GPU install (``pip install -e ".[vllm]"``) resolves with our pins.

vLLM pins torch exactly and bounds transformers, and its dependencies bound numpy; a release
of any of them can make ``pip install -e ".[vllm]"`` impossible without any test noticing,
since no GPU wheel is installed here. This script asks pip to resolve the extra for this
interpreter and platform, installing nothing::

    pip install --dry-run --ignore-installed --report REPORT.json -e ".[vllm]"

then reads pip's JSON installation report and checks that the resolved set holds vLLM at the
extra's pin and torch, transformers and numpy at the core pins of ``pyproject.toml`` (so a GPU
machine runs the versions the CPU test suite ran). It prints the resolved versions and exits 0,
or names what failed and exits 1. pip downloads the metadata (some wheels) of about 200
packages: it needs PyPI and takes about 2 minutes. CI runs it before the test suite
(``.ci/run``); the GPU recipe is in ``docs/guide/scaling.md`` ("Installing on a GPU machine")::

    python scripts/check_gpu_extra.py                 # the check, about 2 minutes
    python scripts/check_gpu_extra.py --report r.json # keep pip's report
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ("torch", "transformers", "numpy")
"""Core pins that the extra's resolution must keep (the versions the test suite runs)."""


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _exact_pins(requirements: list[str]) -> dict[str, str]:
    """``{normalised name: version}`` of the ``name==version`` entries (markers ignored)."""
    pins = {}
    for req in requirements:
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*([^\s;,]+)", req)
        if m:
            pins[_norm(m.group(1))] = m.group(2)
    return pins


def read_pins(pyproject: Path, extra: str) -> tuple[dict[str, str], dict[str, str]]:
    """The core pins and the extra's pins of ``pyproject``."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    extras = project.get("optional-dependencies", {})
    if extra not in extras:
        raise SystemExit(f"check_gpu_extra: pyproject.toml has no [{extra}] extra")
    return _exact_pins(project["dependencies"]), _exact_pins(extras[extra])


def resolve(root: Path, extra: str, report: Path, pip_args: list[str]) -> tuple[int, str]:
    """Run pip's dry-run resolution of ``root[extra]`` writing ``report``: (status, output)."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--dry-run",
        "--ignore-installed",
        "--disable-pip-version-check",
        "--report",
        str(report),
        *pip_args,
        "-e",
        f"{root}[{extra}]",
    ]
    print("$ " + " ".join(cmd), flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def resolved_versions(report: dict) -> dict[str, str]:
    """``{normalised name: version}`` of everything pip's report would install."""
    return {
        _norm(item["metadata"]["name"]): item["metadata"]["version"]
        for item in report.get("install", [])
    }


def check(resolved: dict[str, str], core: dict[str, str], extra_pins: dict[str, str]) -> list[str]:
    """What is wrong with the resolved set: the extra's pins and the core ``CORE`` pins."""
    wanted = {**{n: core[n] for n in CORE if n in core}, **extra_pins}
    problems = [
        f"{n} is not pinned in pyproject.toml's dependencies" for n in CORE if n not in core
    ]
    for name, version in wanted.items():
        got = resolved.get(name)
        if got is None:
            problems.append(f"{name} is not in the resolved set (wanted =={version})")
        elif got.split("+")[0] != version:  # ==2.13.0 admits a local build, 2.13.0+cpu
            problems.append(f"{name} resolved to {got}, not the pinned {version}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Check that pip resolves sage-env's GPU extra (vLLM) together with the core "
        "pins torch, transformers and numpy, installing nothing (pip install --dry-run "
        "--ignore-installed --report). Needs PyPI; takes about 2 minutes. Exit 0: it resolves "
        "and keeps the pins; 1: it does not (the reason is printed)."
    )
    parser.add_argument("--extra", default="vllm", help="the extra to resolve (default: vllm)")
    parser.add_argument(
        "--report",
        type=Path,
        default=None,
        help="where to keep pip's JSON report (default: a temporary file)",
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=ROOT,
        help="the project folder holding pyproject.toml (default: this checkout)",
    )
    parser.add_argument(
        "--pip-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more argument for pip (repeatable), e.g. --pip-arg=--no-cache-dir",
    )
    args = parser.parse_args(argv)

    root = args.root.resolve()
    core, extra_pins = read_pins(root / "pyproject.toml", args.extra)
    with tempfile.TemporaryDirectory() as tmp:
        report_path = args.report or Path(tmp) / "report.json"
        start = time.monotonic()
        status, output = resolve(root, args.extra, report_path, args.pip_arg)
        seconds = time.monotonic() - start
        if status != 0 or not report_path.exists():
            tail = "\n".join(output.strip().splitlines()[-60:])
            print(tail, file=sys.stderr)
            print(
                f"check_gpu_extra: FAILED after {seconds:.0f} s: pip cannot resolve "
                f'-e ".[{args.extra}]" with the core pins (exit {status}; pip\'s explanation '
                "above)",
                file=sys.stderr,
            )
            return 1
        resolved = resolved_versions(json.loads(report_path.read_text(encoding="utf-8")))

    shown = [*extra_pins, *CORE]
    print(
        f"resolved [{args.extra}] for Python {sys.version.split()[0]} in {seconds:.0f} s, "
        f"{len(resolved)} packages:"
    )
    for name in dict.fromkeys(shown):
        print(f"  {name}=={resolved.get(name, '(absent)')}")
    problems = check(resolved, core, extra_pins)
    if problems:
        for p in problems:
            print(f"check_gpu_extra: FAILED: {p}", file=sys.stderr)
        return 1
    print(f"check_gpu_extra: OK: [{args.extra}] resolves with the core pins")
    return 0


if __name__ == "__main__":
    sys.exit(main())

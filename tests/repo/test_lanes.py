"""The two test lanes (issue 36): ``-m "not slow"`` is the quick one, plain pytest runs all.

Each test runs pytest in a subprocess on a small file of its own, under this repository's
``pyproject.toml`` (so its ``markers`` and ``addopts`` apply, and not this suite's conftest).
"""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _pytest(tmp_path: Path, source: str, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_sample.py").write_text(textwrap.dedent(source))
    cmd = [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml")]
    cmd += ["--rootdir", str(tmp_path), "-p", "no:cacheprovider", "-q", *args]
    cmd.append(str(tmp_path / "test_sample.py"))
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_slow_is_a_registered_marker(pytestconfig):
    markers = {line.split(":")[0].strip() for line in pytestconfig.getini("markers")}
    assert "slow" in markers


def test_a_misspelt_marker_is_an_error(tmp_path):
    proc = _pytest(
        tmp_path,
        """
        import pytest

        @pytest.mark.slwo
        def test_typo():
            pass
        """,
    )
    assert proc.returncode != 0
    assert "'slwo' not found in `markers` configuration option" in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "args, passed", [((), "2 passed"), (("-m", "not slow"), "1 passed, 1 deselected")]
)
def test_the_quick_lane_leaves_out_slow_tests_and_plain_pytest_runs_them(tmp_path, args, passed):
    proc = _pytest(
        tmp_path,
        """
        import pytest

        def test_quick():
            pass

        @pytest.mark.slow
        def test_slow():
            pass
        """,
        *args,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert passed in proc.stdout

"""The math verifier's deadline never includes the cold start of its libraries (issue 33,
item 8): a user saw one reply scored f = 0.5 once and 1.0 six times with the same seed and
actions, because the first call timed out while importing SymPy and math-verify."""

import subprocess
import sys
import textwrap
import time

import pytest

from sage_env.verifiers import MathVerifier, math_verifier

COLD = textwrap.dedent(
    """
    import json, sys
    from sage_env.verifiers import MathVerifier

    if __name__ == "__main__":
        out = []
        for workers in (0, 1):  # in process, then in a fresh worker process
            with MathVerifier(workers=workers, timeout_s=0.5) as mv:
                r = mv.verify("\\\\boxed{\\\\frac{3}{4}}", "0.75")
                c = mv.check_answer("2\\\\sqrt{2}")
                out.append([r.score, r.status, c.score, c.status])
        print(json.dumps(out))
    """
)


@pytest.mark.slow
def test_a_fresh_verifier_scores_its_first_pair_within_a_tiny_deadline(tmp_path):
    script = tmp_path / "cold.py"
    script.write_text(COLD)
    run = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=True
    )
    rows = run.stdout.strip().splitlines()[-1]
    assert rows == '[[1.0, "passed", 1.0, "passed"], [1.0, "passed", 1.0, "passed"]]', run.stderr


@pytest.mark.slow
def test_a_slow_import_is_not_charged_to_the_first_pair(monkeypatch):
    """A cold start slower than the deadline (simulated: 0.6 s against 0.2 s) still passes."""
    real = math_verifier._math_verify
    slow = {"first": True}

    def slow_import():
        if slow["first"]:
            slow["first"] = False
            time.sleep(0.6)
        return real()

    monkeypatch.setattr(math_verifier, "_math_verify", slow_import)
    monkeypatch.setattr(math_verifier, "_WARM", False)
    verifier = MathVerifier(workers=0, timeout_s=0.2)
    assert verifier.verify("\\boxed{4}", "4").score == 1.0
    assert not slow["first"]  # the warm-up paid the slow import
    monkeypatch.setattr(math_verifier, "_WARM", False)
    slow["first"] = True
    assert verifier.check_answer("\\frac{1}{2}").score == 1.0

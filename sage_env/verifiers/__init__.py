r"""External verifiers: a math answer checker and a code test runner.

Both verifiers turn model output (text) into a :class:`VerifierResult` with a score in
``[0, 1]``, a status from a closed set and a short human-readable reason. Neither ever raises on
model output: empty strings, any unicode, megabyte-long strings, unbalanced braces, programs that
loop forever, exhaust memory or call ``os._exit`` all come back as a result.

* :class:`MathVerifier` extracts the last ``\boxed{...}`` from the prediction and compares it
  with the gold answer using math-verify (huggingface/Math-Verify,
  https://github.com/huggingface/Math-Verify), which parses LaTeX and plain expressions into
  SymPy and checks equivalence (numeric, symbolic, sets, intervals, equations ...).
* :class:`CodeVerifier` runs a candidate program plus independent test snippets in one child
  Python process and scores the fraction of snippets that pass, in the spirit of the functional
  correctness evaluation of HumanEval (Chen et al. 2021, "Evaluating Large Language Models Trained
  on Code", https://arxiv.org/abs/2107.03374).

Isolation: the code runner executes inside :mod:`sage_env.sandbox` (bubblewrap / ``unshare`` /
rlimits, an unprivileged uid when run as root, per-run cgroups, a private temp cwd, a scrubbed
environment, capped output) and judges each test in its own process against expected values kept
outside the untrusted processes; see ``docs/reference/sandbox.md`` and
``docs/reference/verifiers.md``.

What the verifiers read out of model output (``extract_boxed``, ``extract_code``) is parsing and
lives in :mod:`sage_env.text.parsing` with every other extractor.

This module imports only the standard library, :mod:`sage_env.text.parsing` and (lazily)
``math_verify``; never torch or transformers.
"""

from sage_env.verifiers.code_verifier import CodeVerifier
from sage_env.verifiers.math_verifier import ANSWER_WORDS, MathVerifier
from sage_env.verifiers.result import (
    MAX_GOLD_CHARS,
    MAX_PREDICTION_CHARS,
    STATUSES,
    VerifierResult,
)

__all__ = [
    "ANSWER_WORDS",
    "MAX_PREDICTION_CHARS",
    "MAX_GOLD_CHARS",
    "STATUSES",
    "CodeVerifier",
    "MathVerifier",
    "VerifierResult",
]

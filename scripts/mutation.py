"""Mutation testing of the critical path (issue 49): ``python scripts/mutation.py MODULE``.

Runs mutmut (pinned in the ``dev`` extra) on one critical module against the test files that
cover it, in a scratch copy of the repository (mutmut writes a ``mutants/`` tree next to the
code it mutates; the working tree is never touched), and writes
``benchmarks/results/mutation/<module>.json``: mutants, killed, survived, timeouts, the
equivalent mutants with their reasons, the kill rate over the non-equivalent mutants, and
each survivor's diff.

    python scripts/mutation.py --list
    nice -n 19 python scripts/mutation.py rewards
    nice -n 19 python scripts/mutation.py advantages --time-limit 600
    nice -n 19 python scripts/mutation.py --check --max-minutes 10
    nice -n 19 python scripts/mutation.py --changed-since origin/main --max-minutes 5

The last two are the bounded CI check (``.ci/run`` runs ``--check``): they mutate only the
functions of critical modules whose text differs from what the committed results describe
(each result file's ``function_sha``), or from the given ref, and fail when one of their
mutants survives that the committed results do not already list (as a survivor or an
equivalent mutant); nothing differs: they exit 0 at once.

A mutant is marked equivalent only in ``TARGETS`` below, with a one-line reason; the way to
deal with any other survivor is a test that kills it. docs/reference/testing.md quotes the
committed figures.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "mutation"
MUTMUT_VERSION = "3.8.1"


@dataclass(frozen=True)
class Target:
    """One critical module and the tests that must kill its mutants."""

    source: str
    """The file mutated, relative to the repository root."""
    tests: tuple[str, ...]
    """Test files (or node ids) run against each mutant, less those marked slow; mutmut runs,
    per mutant, only the tests among these that call the mutated function."""
    time_limit_s: int = 1200
    """Wall-clock limit of the whole run; mutants left unchecked are counted as such."""
    equivalent: dict[str, str] = field(default_factory=dict)
    """Mutant name -> one-line reason why no test can tell it from the original."""
    unmutated: dict[str, str] = field(default_factory=dict)
    """Function (mutmut name, without ``__mutmut_<n>``) -> why it may keep a decorator that
    makes mutmut skip it (:func:`decorated_functions`); any other decorated function of the
    module fails ``tests/repo/test_mutation_table.py``."""
    functions: tuple[str, ...] = ()
    """Only these functions' mutants (names as in ``equivalent``, without ``__mutmut_<n>``:
    ``<module>.x_<function>``, ``<module>.xǁ<Class>ǁ<method>``); empty: the whole file."""


TARGETS: dict[str, Target] = {
    "rewards": Target(
        source="sage_env/rewards.py",
        # test_difficulty_rule.py plays whole rounds (13 s per mutant): the unit tests must
        # kill every mutant on their own
        tests=("tests/sage_env/test_rewards.py",),
        time_limit_s=900,
        equivalent={
            "sage_env.rewards.x_learnability_reward__mutmut_7": "acc <= 1: at acc = 1 both "
            "branches return 0 (1 - 1 = 0)",
            "sage_env.rewards.x_normalise_critic_score__mutmut_1": "the default rule is only "
            'compared with "over_ten": any other default string takes the same branch',
            "sage_env.rewards.x_normalise_critic_score__mutmut_2": "as _1 (the default string "
            'upper-cased is still not "over_ten")',
            "sage_env.rewards.x_gate_alpha__mutmut_2": "without a domain it returns "
            "float(domain_alpha.get(None, alpha)): domain_alpha's keys are domain names, so "
            "that is alpha as a float, equal in value",
        },
    ),
    "advantages": Target(
        source="learners/algorithms/advantages.py",
        tests=(
            "tests/learners/algorithms/test_advantages.py",
            "tests/learners/algorithms/test_builtin_algorithms.py",
            "tests/learners/algorithms/test_trr.py",
            "tests/learners/algorithms/test_extension_points.py",
            # the estimators' registry (register_adv_est)
            "tests/learners/algorithms/test_advantage_registry.py",
        ),
        # a 1,200 s run beside a grid cell left 30 of 112 mutants unchecked
        time_limit_s=2400,
        equivalent={
            f"learners.algorithms.advantages.x_group_mean_whitened_advantages__mutmut_{n}": (
                "the centred values sum to 0 in every group, so their batch mean mu is 0 up "
                f"to rounding and {what} changes nothing"
            )
            for n, what in ((11, "mu * N"), (18, "c + mu"), (29, "c + mu"))
        },
    ),
    "trr": Target(
        source="learners/algorithms/trr.py",
        tests=("tests/learners/algorithms/test_trr.py",),
        equivalent={},
    ),
    "losses": Target(
        source="learners/algorithms/losses.py",
        tests=("tests/learners/algorithms/test_losses.py",),
        equivalent={
            "learners.algorithms.losses.x_kl_penalty__mutmut_1": 'the default estimator is only '
            'compared with "k1" and "k2": any other default string takes the k3 branch',
            "learners.algorithms.losses.x_kl_penalty__mutmut_2": 'as _1 ("K3" is neither "k1" '
            'nor "k2")',
        },
    ),
    "logprobs": Target(
        source="learners/policy/logprobs.py",
        # the learner tests (test_builtin_algorithms.py, test_extension_points.py) train whole
        # rounds, 10 to 80 s per mutant of token_logprobs: a first run with them checked 106 of
        # 466 mutants in its 240 s; the unit tests must kill every mutant on their own
        tests=("tests/learners/policy/test_logprobs.py",),
        time_limit_s=3600,
        equivalent={
            **{
                f"learners.policy.logprobs.x_token_logprobs__mutmut_{n}": "torch.full infers "
                "int64 from the int pad_id, so dtype=torch.long changes nothing"
                for n in (37, 40)
            },
            **{
                f"learners.policy.logprobs.x__packed_rows__mutmut_{n}": "torch.full infers "
                "int64 from an int fill value (pad_id, -1), so dtype=torch.long changes nothing"
                for n in (74, 77, 86, 89)
            },
            **{
                f"learners.policy.logprobs.x__packed_rows__mutmut_{n}": "torch.tensor of a "
                "list of ints is int64 already (an empty list's float is assigned to an empty "
                "slice), so dtype=torch.long changes nothing"
                for n in (106, 108, 111, 113, 116, 118, 121, 123, 126, 128)
            },
            **{
                f"learners.policy.logprobs.x__packed_rows__mutmut_{n}": "every sequence is in "
                "exactly one group, so the loop overwrites every default entry of where"
                for n in (8, 9)
            },
            "learners.policy.logprobs.x_token_logprobs__mutmut_97": "pos is clamped to "
            "width - 2 already, so pos + 1 never reaches the max=width - 1 clamp (nor width + 1)",
            **{
                f"learners.policy.logprobs.x_token_logprobs__mutmut_{n}": "torch.tensor of a "
                "list of ints is int64 already, so dtype=torch.long changes nothing"
                for n in (49, 51)
            },
        },
    ),
    "pg_tis": Target(
        source="learners/algorithms/pg.py",
        # truncated importance sampling (PGConfig.tis_cap): the weights, the old log-probs they
        # replace, the re-scoring pass of later PPO steps and the engine/learner gap
        tests=("tests/learners/algorithms/test_tis.py",),
        unmutated={
            "learners.algorithms.pg.x\u01c1PolicyGradientLearner\u01c1_rescore": "@torch.no_grad: "
            "not mutated by the committed run (mutmut skips decorated functions); a run with "
            "the decorator made a with-block was stopped for time (2026-12-05)",
        },
        functions=tuple(
            f"learners.algorithms.pg.xǁPolicyGradientLearnerǁ{m}"
            for m in ("_micro_batch", "_rescore", "_record_gap", "per_token_loss")
        ),
        equivalent={
            "learners.algorithms.pg.xǁPolicyGradientLearnerǁ_micro_batch__mutmut_21": "with "
            "tis_cap > 0 every micro-batch has learner_old (the first step its own log-probs, "
            "later steps the re-scored ones), so its default never reaches the is-not-None test",
            **{
                f"learners.algorithms.pg.xǁPolicyGradientLearnerǁ_record_gap__mutmut_{n}": "a "
                "micro-batch's [B, C_max] mask has C_max >= 1, so diff is never empty and the "
                "numel() test always takes its first branch"
                for n in (12, 19)
            },
        },
    ),
    "pool": Target(
        source="sage_env/tasks/pool.py",
        tests=(
            "tests/sage_env/tasks/test_pool.py",
            "tests/sage_env/tasks/test_pool_admission.py",
            "tests/sage_env/tasks/test_pool_frozen_admission.py",
            # exec_task_key and the pool's duplicate rules on execution tasks
            "tests/sage_env/tasks/test_novelty.py",
        ),
        time_limit_s=3600,
        unmutated={
            f"sage_env.tasks.pool.x\u01c1TaskPool\u01c1{name}": "a @property that returns an "
            "attribute as it is"
            for name in ("tasks", "num_generated")
        },
        equivalent={
            "sage_env.tasks.pool.x__normalise__mutmut_8": "_normalise only feeds _fingerprint's "
            'equality test; "XX XX" cannot occur in lower-cased text, so it separates the '
            "words as one space does",
            "sage_env.tasks.pool.x__fingerprint__mutmut_9": 'codec names are case-insensitive: '
            '"UTF-8" is "utf-8"',
            "sage_env.tasks.pool.x_exec_task_key__mutmut_11": "the prefix only keeps an "
            "unparsed program's key apart from a normal form (ast output, never a raw \\x01); "
            '"XX\\x01XX" does the same',
            "sage_env.tasks.pool.x_exec_task_key__mutmut_13": "keys are only compared; the "
            'words have no whitespace, so "XX XX" joins them as injectively as one space',
            **{
                f"sage_env.tasks.pool.xǁTaskPoolǁload__mutmut_{n}": "the last item of an id "
                'split at "/" is the same whatever the maximum number of splits'
                for n in (20, 23)
            },
            "sage_env.tasks.pool.x_shingles__mutmut_6": "with exactly n words the one n-gram is "
            "the whole word list, which the short-text branch returns",
            "sage_env.tasks.pool.xǁTaskPoolǁduplicate_of__mutmut_13": "_index_program never "
            "stores the key None, so _programs.get(None) is None, as the else branch",
            "sage_env.tasks.pool.xǁTaskPoolǁduplicate_of__mutmut_35": "the size test only skips "
            "pairs whose Jaccard (<= small / big) cannot reach t; with small * big it skips "
            "just the empty set's, and computing the others gives the same answer",
        },
    ),
    "math_guards": Target(
        source="sage_env/verifiers/math_guards.py",
        # the guards around math-verify: mixed numbers rewritten, exact rationals, the
        # relative tolerance of other numbers (each row of the module's table is a test there)
        tests=(
            "tests/sage_env/verifiers/test_peer_grader_reward_hacks.py",
            "tests/sage_env/verifiers/test_math_strict_values.py",
        ),
        time_limit_s=1800,
        equivalent={
            f"sage_env.verifiers.math_guards.x__number__mutmut_{n}": "getattr's default only "
            "feeds the and of an if: None is as falsy as False"
            for n in (5, 14)
        }
        | {
            f"sage_env.verifiers.math_guards.x_numbers_disagree__mutmut_{n}": "51 instead of "
            "50 digits: only a number within 1e-51 relative of the tolerance edge tells them "
            "apart (measured: 10^-51 and 10^-52 do), a precision no answer check claims"
            for n in (17, 25, 28)
        }
        | {
            "sage_env.verifiers.math_guards.x_numbers_disagree__mutmut_30": "scale == 1 never "
            "holds: evalf gives a Float for every nonzero number, and SymPy 1.14's Float(1) "
            "!= Integer(1) (an exact zero stays Zero, so scale == 0 can)",
        },
    ),
    "literals": Target(
        source="sage_env/verifiers/literals.py",
        # the judge's literal parsing and the exact-type equality of execution answers and of
        # the determinism check; pure functions, so the unit tests must kill every mutant
        tests=("tests/sage_env/verifiers/test_literals.py",),
        time_limit_s=1800,
        equivalent={
            f"sage_env.verifiers.literals.x__typed__mutmut_{n}": "the dict tag only has to "
            "differ from the other tags, which are type names (a literal's type is never "
            "named XXdictXX or DICT)"
            for n in (14, 15)
        },
    ),
    "program_checks": Target(
        source="sage_env/verifiers/program_checks.py",
        # the static checks that hold a model-written program (and an input expression) to the
        # allow-list before it runs; pure functions, so the unit tests must kill every mutant
        tests=("tests/sage_env/verifiers/test_program_checks.py",),
        time_limit_s=2400,
        equivalent={
            f"sage_env.verifiers.program_checks.x__global_use__mutmut_{n}": "symtable's file "
            "name shows only in a SyntaxError's text, which _global_use catches and never reads"
            for n in (8, 9)
        }
        | {
            "sage_env.verifiers.program_checks.x\u01c1_Judge\u01c1__init____mutmut_16": "imports "
            "is only read as a truth value (or, if), where None and False agree",
            "sage_env.verifiers.program_checks.x\u01c1_Judge\u01c1visit_import_from__mutmut_6": "a "
            "from-import of level 0 always names its module (only relative ones, refused just "
            "before, have none), so the or-default is never taken",
            "sage_env.verifiers.program_checks.x\u01c1_Judge\u01c1enum_class__mutmut_8": "a name "
            "no import bound gets a default that does not start with 'enum.', '' or 'XXXX' alike",
            "sage_env.verifiers.program_checks.x\u01c1_Judge\u01c1visit_string__mutmut_11": "None "
            "is _Refusal.module's default, so passing it or not makes the same refusal",
        },
    ),
    "answer_checks": Target(
        source="sage_env/verifiers/answer_checks.py",
        # AZR's deduction, abduction and induction checks: what pays a solver's answer; the
        # unit tests fake the sandbox (the executor's own tests cover the sandbox)
        tests=("tests/sage_env/verifiers/test_answer_checks.py",),
        time_limit_s=1800,
    ),
    "verdict": Target(
        source="sage_env/sandbox/harness/verdict.py",
        # the sandbox judge's rules (Judge fed events, one verdict per test); the unit tests
        # feed it synthetic events (the sandbox tests run programs, seconds per mutant)
        tests=("tests/sage_env/sandbox/test_verdict_rules.py",),
        time_limit_s=2400,
        equivalent={
            **{
                f"sage_env.sandbox.harness.verdict.x\u01c1Judge\u01c1{fn}__mutmut_{n}": "verdict "
                "reads every negative status as unknown: -2 gives the same (status -1) failure"
                for fn, n in (("from_worker", 50), ("finish", 6))
            },
            **{
                f"sage_env.sandbox.harness.verdict.x\u01c1Judge\u01c1from_worker__mutmut_{n}": "a "
                "fork error's end is not ok, so verdict fails the test with it before it reads "
                "the status (None or 1 for 0)"
                for n in (71, 74)
            },
            **{
                f"sage_env.sandbox.harness.verdict.x\u01c1Judge\u01c1{fn}__mutmut_{n}": "a "
                'reference entry that is not ("v", value) is only told apart from "v" and '
                '"line" (then: no reference value), so its tag\'s spelling and its reason are '
                "never read"
                for fn, ns in (
                    ("from_reference", (44, 45, 46, 47, 48, 50, 51, 52, 53)),
                    ("_plus_failure", (52, 53, 54, 56, 57, 58, 59)),
                )
                for n in ns
            },
            **{
                f"sage_env.sandbox.harness.verdict.x\u01c1Judge\u01c1{fn}__mutmut_{n}": "an "
                'entry without "v" then reads ev["v"], a KeyError caught as ("bad", '
                '"undecodable"): still not "v", the same no reference value'
                for fn, n in (("from_reference", 35), ("_plus_failure", 43))
            },
            **{
                f"sage_env.sandbox.harness.verdict.x\u01c1Judge\u01c1_reached__mutmut_{n}": "the "
                "argument of _OutOfOrder is never read (the failure names the site, not the hole)"
                for n in (138, 152, 153, 154)
            },
            **{
                f"sage_env.sandbox.harness.verdict.x\u01c1Judge\u01c1{fn}__mutmut_{n}": "> 0 or "
                ">= 1 for >= 0: WIFSIGNALED(0) is false, so status 0 takes the same branch"
                for fn, n in (("verdict", 28), ("verdict", 29), ("finish", 19), ("finish", 20))
            },
            "sage_env.sandbox.harness.verdict.x\u01c1Judge\u01c1_plus_failure__mutmut_75": "raw "
            "is never None there (_reached refuses a None value), so decode_value(raw) runs "
            "either way",
            "sage_env.sandbox.harness.verdict.x\u01c1Judge\u01c1_program_event__mutmut_36": "a "
            "program event before setup_ok, taken or not: from_test drops every event before "
            "setup_ok, from_last ignores the answer",
            "sage_env.sandbox.harness.verdict.x\u01c1Judge\u01c1_program_event__mutmut_64": "the "
            'events it takes are neither "a" nor "test", so from_test does nothing more '
            "with them when told they were not taken; from_last ignores the answer",
            "sage_env.sandbox.harness.verdict.x\u01c1Judge\u01c1finish__mutmut_13": "a group with "
            "a held test is incomplete (a complete one is released at once), so it has a test "
            "not held too; releasing no test does nothing",
        },
    ),
    "math_verifier": Target(
        source="sage_env/verifiers/math_verifier.py",
        # what pays a math answer (verify, check_answer) and the worker pool around it; the
        # unit tests fake math-verify and drive the pool in-process (fake executor and clock)
        tests=("tests/sage_env/verifiers/test_math_verifier_units.py",),
        time_limit_s=1800,
        equivalent={
            **{
                f"sage_env.verifiers.math_verifier.x_{fn}__mutmut_{n}": "VerifierResult clamps "
                "its score into [0, 1]: 2.0 is stored as 1.0"
                for fn, n in (("_verify_math", 138), ("_check_answer", 97))
            },
            "sage_env.verifiers.math_verifier.x__parse_gold__mutmut_7": "extract_boxed finds "
            "only \\boxed or \\fbox, so on a gold with neither it returns None, as the else "
            "branch",
            "sage_env.verifiers.math_verifier.x__verify_math__mutmut_82": "the text of the "
            "parse is discarded (_), so its placeholder string changes nothing",
            **{
                f"sage_env.verifiers.math_verifier.xǁMathVerifierǁ_run_wave__mutmut_{n}": (
                    "only the exception's type name reaches the result, never its message"
                )
                for n in (58, 59, 60)
            },
            **{
                f"sage_env.verifiers.math_verifier.xǁMathVerifierǁ_run_wave__mutmut_{n}": (
                    "the output's length was checked equal to the chunk's just before, so "
                    "zip's strict never fires"
                )
                for n in (88, 91, 92)
            },
        },
    ),
    "novelty": Target(
        source="sage_env/tasks/novelty.py",
        # the normal form that copies of a program share (renames, dead code) and the distance
        # between programs: what the pool's duplicate rule on execution tasks compares
        # the rest of test_novelty.py plays the pool (1-2 s per test, all of them calling
        # _normal_form): the rules' own tests must kill every mutant on their own
        tests=(
            "tests/sage_env/tasks/test_novelty_rules.py",
            *(
                f"tests/sage_env/tasks/test_novelty.py::{name}"
                for name in (
                    "test_normal_form_is_invariant_under_names_comments_annotations_and_dead_code",
                    "test_normal_form_changes_with_what_the_program_computes",
                    "test_renaming_is_a_bijection_that_respects_scopes",
                    "test_normalise_never_raises_on_model_output",
                    "test_program_distance_is_a_fraction_of_tokens",
                )
            ),
        ),
        time_limit_s=3600,
        equivalent={
            **{
                f"sage_env.tasks.novelty.x__strip_annotations__mutmut_{n}": "ast.unparse "
                'writes an annotation only when it is truthy: "" prints as None does'
                for n in (1, 11)
            },
            **{
                f"sage_env.tasks.novelty.x\u01c1_Binder\u01c1{fn}__mutmut_{n}": "an "
                "occurrence's index is read only for a global/nonlocal statement's names, "
                "which visit_Global records with their own"
                for fn, n in (("_bind", 7), ("visit_Name", 2))
            },
            "sage_env.tasks.novelty.x\u01c1_Pruner\u01c1__init____mutmut_16": "changed only "
            "ends the rounds early: a round past the fixed point removes nothing",
            "sage_env.tasks.novelty.x\u01c1_Pruner\u01c1visit_Import__mutmut_7": "as "
            "__init___16: a kept import then reports a change, and the extra rounds remove "
            "nothing",
            "sage_env.tasks.novelty.x_program_distance__mutmut_24": "SequenceMatcher only "
            "tests autojunk for truth: None is False",
        },
    ),
    "sandbox_limits": Target(
        source="sage_env/sandbox/host/config.py",
        # SandboxConfig: the worker's rlimits, the wall-clock backstop, the child's environment
        # and the hash seed's range; the unit tests run no sandbox (os.geteuid faked)
        tests=("tests/sage_env/sandbox/test_sandbox_config.py",),
        time_limit_s=900,
    ),
    "executor": Target(
        source="sage_env/verifiers/executor.py",
        # the executor's host side: the check runs' variants, the runner's settings, reading
        # the sandbox's report, the proposal check and the audit; the unit tests fake the
        # sandbox (the runner template itself is checked by the tests that run programs)
        tests=("tests/sage_env/verifiers/test_executor_units.py",),
        time_limit_s=2400,
        functions=tuple(
            f"sage_env.verifiers.executor.x_{fn}"
            for fn in (
                "draw_check_variants",
                "_layout_of",
                "stored_variant",
                "audit_variant",
                "_run_variant",
                "execute",
                "validate_program",
                "_run_values",
                "execute_all",
                "_execute_each",
                "recomputes",
                "compute_answer",
            )
        ),
        equivalent={
            "sage_env.verifiers.executor.x_execute__mutmut_101": "bytes.decode's default "
            'encoding is "utf-8": naming it or not decodes the same',
            "sage_env.verifiers.executor.x_execute__mutmut_104": "codec names are "
            'case-insensitive: "UTF-8" is "utf-8"',
            "sage_env.verifiers.executor.x_execute__mutmut_172": "the first error only "
            'feeds `first or "every call returned"`, where None and "" are both falsy',
        },
    ),
}

# what the scratch copy needs: the packages, the tests and what the tests import
COPIED = ("sage_env", "learners", "tests", "benchmarks", "scripts", "examples", "pyproject.toml")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "runs", "checkpoints", "tb", "*.jsonl.gz")


def _mutmut_config(target: Target) -> str:
    tests = [t for t in target.tests if (ROOT / t.split("::")[0]).exists()]
    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["sage_env", "learners"]\n'
        'also_copy = ["examples", "benchmarks", "scripts"]\n'
        f"only_mutate = [{json.dumps(target.source)}]\n"
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-m", "not slow"]\n'
        'process_isolation = "forkserver"\n'
        "use_git_change_detection = false\n"
    )


def _scratch_copy(target: Target, work: Path) -> None:
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, work / name, ignore=IGNORED)
        elif src.exists():
            shutil.copy2(src, work / name)
    with open(work / "pyproject.toml", "a") as f:
        f.write(_mutmut_config(target))


def _status(code: int | None) -> str:
    if code is None:
        return "not_checked"
    if code in (1, 3):
        return "killed"
    if code == 0:
        return "survived"
    if code in (24, -24, 36, 152, 255):
        return "timeout"
    if code in (5, 33):
        return "no_tests"
    return "suspicious"


_DIFFS = """
import json, sys
import mutmut.__main__ as mm
out = {}
for name in json.loads(sys.stdin.read()):
    try:
        out[name] = mm.get_diff_for_mutant(name, path=mm.find_mutant(name).path)
    except Exception as e:  # noqa: BLE001 - reported in the JSON instead of the diff
        out[name] = f"(no diff: {type(e).__name__}: {e})"
print(json.dumps(out))
"""


def _diffs(work: Path, names: list[str]) -> dict[str, str]:
    """Each mutant's diff (what ``mutmut show`` prints), from one process for all of them."""
    if not names:
        return {}
    out = subprocess.run(
        [sys.executable, "-c", _DIFFS],
        input=json.dumps(names),
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
    )
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {n: f"(no diff: {out.stderr[-300:]})" for n in names}


def _selected(name: str, functions: tuple[str, ...]) -> bool:
    return not functions or any(name.startswith(f + "__mutmut_") for f in functions)


def run(
    module: str,
    time_limit_s: int | None = None,
    keep: bool = False,
    functions: tuple[str, ...] | None = None,
    workers: int = 1,
    write: bool = True,
    resume: str | os.PathLike | None = None,
    summarise_only: bool = False,
    only: list[str] | None = None,
) -> dict:
    """Run mutmut on ``TARGETS[module]`` and return (and write) its summary.

    ``functions`` (default: the target's own) restricts the run to those functions' mutants;
    ``write=False`` leaves the committed JSON alone (the CI check). ``resume``: a scratch copy
    kept by an earlier run (``--keep``): its test files are replaced by the current ones and
    only its survivors and unchecked mutants run again (tests only added since: a mutant
    killed then is still killed). ``summarise_only`` (with ``resume``): no mutmut run, only
    the summary of what the kept copy holds.
    """
    target = TARGETS[module]
    limit = time_limit_s or target.time_limit_s
    functions = target.functions if functions is None else functions
    names = list(only) if only else [f + "__mutmut_*" for f in functions]
    if resume is not None:  # a kept scratch copy: its survivors and unchecked mutants again
        work, keep = Path(resume), True
        meta = json.loads((work / "mutants" / (target.source + ".meta")).read_text())
        names = [
            n
            for n, c in meta["exit_code_by_key"].items()
            if _selected(n, functions) and _status(c) not in ("killed", "timeout")
        ]
        for test in target.tests:  # the tests as they are now (mutmut runs them in mutants/)
            path = test.split("::")[0]
            for dest in (work / path, work / "mutants" / path):
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / path, dest)
        # the target's test selection as it is now: when it changed (a test file added),
        # mutmut forgets every mutant's result, so all of them run again
        config = work / "pyproject.toml"
        head, _, old_config = config.read_text().partition("\n[tool.mutmut]\n")
        if "\n[tool.mutmut]\n" + old_config != _mutmut_config(target):
            config.write_text(head + _mutmut_config(target))
            names = [f + "__mutmut_*" for f in functions] if functions else []
            print("test selection changed: every mutant runs again", file=sys.stderr)
    else:
        work = Path(tempfile.mkdtemp(prefix=f"sage-mutation-{module}-"))
    try:
        if resume is None:
            _scratch_copy(target, work)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        started = time.monotonic()
        # a session of its own: at the time limit mutmut and its workers go together
        if summarise_only:
            names = ["--help"]  # mutmut prints its usage and runs nothing
        proc = subprocess.Popen(
            [sys.executable, "-m", "mutmut", "run", "--max-children", str(workers)] + names,
            cwd=work,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            out, _ = proc.communicate(timeout=limit)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            rc = None
        tail = (out or "")[-3000:]
        wall = time.monotonic() - started
        meta_path = work / "mutants" / (target.source + ".meta")
        if not meta_path.exists():
            raise RuntimeError(f"mutmut produced no results (rc {rc}):\n{tail}")
        codes = json.loads(meta_path.read_text())["exit_code_by_key"]
        codes = {n: c for n, c in codes.items() if _selected(n, functions)}
        if codes and all(c is None for c in codes.values()):
            raise RuntimeError(f"mutmut checked no mutant (rc {rc}):\n{tail}")
        by_status: dict[str, list[str]] = {}
        for name, code in sorted(codes.items()):
            by_status.setdefault(_status(code), []).append(name)
        equivalent = {n: r for n, r in target.equivalent.items() if n in codes}
        survived = [n for n in by_status.get("survived", []) if n not in equivalent]
        killed = len(by_status.get("killed", [])) + len(by_status.get("timeout", []))
        scored = len(codes) - len(equivalent) - len(by_status.get("not_checked", []))
        summary = {
            "module": target.source,
            "tool": f"mutmut=={MUTMUT_VERSION}",
            "tests": list(target.tests),
            "functions": list(functions),
            "mutants": len(codes),
            "killed": len(by_status.get("killed", [])),
            "survived": len(survived),
            "timeouts": len(by_status.get("timeout", [])),
            "no_tests": len(by_status.get("no_tests", [])),
            "suspicious": len(by_status.get("suspicious", [])),
            "not_checked": len(by_status.get("not_checked", [])),
            "equivalent": equivalent,
            "kill_rate": round(killed / scored, 4) if scored else None,
            "kill_rate_note": "(killed + timeouts) / (mutants - equivalent - not_checked)",
            "wall_s": None if summarise_only else round(wall),
            "finished": rc is not None,
            "resumed": resume is not None,
            # what these figures describe: each mutated function's text (the CI check,
            # ``--check``, mutates the functions whose text differs from these)
            "function_sha": function_shas(
                (work / target.source).read_text(), target.source, functions
            ),
            "survivors": _diffs(work, survived + by_status.get("no_tests", [])),
        }
    finally:
        if keep:
            print(f"scratch copy kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    if write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        out = RESULTS / f"{module}.json"
        out.write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _functions_of(source: str) -> dict[str, str]:
    """Mutmut's name of each function and method of ``source`` -> its source text."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[f"x_{node.name}"] = ast.get_source_segment(source, node) or ""
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    seg = ast.get_source_segment(source, item) or ""
                    out[f"x\u01c1{node.name}\u01c1{item.name}"] = seg
    return out


def decorated_functions(text: str) -> list[str]:
    """The functions and methods of ``text`` that mutmut 3.8.1 leaves unmutated: those with
    a decorator other than a lone ``@staticmethod`` or ``@classmethod`` (mutmut names)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []

    def skipped(node: ast.AST) -> bool:
        decos = getattr(node, "decorator_list", [])
        lone = len(decos) == 1 and isinstance(decos[0], ast.Name)
        return bool(decos) and not (lone and decos[0].id in ("staticmethod", "classmethod"))

    out = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and skipped(node):
            out.append(f"x_{node.name}")
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and skipped(item):
                    out.append(f"x\u01c1{node.name}\u01c1{item.name}")
    return out


def _module_name(source: str) -> str:
    return source.removesuffix(".py").replace("/", ".")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def function_shas(text: str, source: str, functions: tuple[str, ...] = ()) -> dict[str, str]:
    """``{mutmut name of each function of ``text`` that mutmut mutates (within ``functions``;
    not a decorated one, :func:`decorated_functions`): 16 hex digits of the SHA-256 of its
    source text}``: what a result file's figures describe. A function that loses its
    decorator is then new to the record, so ``--check`` mutates it."""
    module = _module_name(source)
    skipped = set(decorated_functions(text))
    return {
        f"{module}.{fn}": _sha(body)
        for fn, body in _functions_of(text).items()
        if _selected(f"{module}.{fn}__mutmut_0", functions) and fn not in skipped
    }


def stale_functions(name: str) -> tuple[tuple[str, ...], str]:
    """The functions of ``TARGETS[name]`` whose text differs from what its committed result
    file describes (``function_sha``), and why; every function when there is no result file.

    Returns:
        ``(mutmut function names, reason)``; an empty tuple when the results are current.
    """
    target = TARGETS[name]
    path = RESULTS / f"{name}.json"
    now = function_shas((ROOT / target.source).read_text(), target.source, target.functions)
    if not path.exists():
        return tuple(now), f"no committed results ({path.relative_to(ROOT)})"
    recorded = json.loads(path.read_text()).get("function_sha")
    if recorded is None:
        return tuple(now), f"{path.relative_to(ROOT)} records no function_sha"
    changed = tuple(fn for fn, sha in now.items() if recorded.get(fn) != sha)
    return changed, f"{len(changed)} of {len(now)} functions differ from the committed results"


def changed_functions(ref: str) -> dict[str, tuple[str, ...]]:
    """Per target: the functions mutmut mutates (:func:`function_shas`) of its source that
    differ from ``ref`` (the working tree against that commit; a new file: all of them)."""
    out: dict[str, tuple[str, ...]] = {}
    for name, target in TARGETS.items():
        path = ROOT / target.source
        now = path.read_text() if path.exists() else ""
        old = subprocess.run(
            ["git", "show", f"{ref}:{target.source}"], cwd=ROOT, capture_output=True, text=True
        )
        text = old.stdout if old.returncode == 0 else ""
        before = function_shas(text, target.source, target.functions)
        now_shas = function_shas(now, target.source, target.functions)
        changed = tuple(fn for fn, sha in now_shas.items() if before.get(fn) != sha)
        if changed:
            out[name] = changed
    return out


def _diff_lines(diff: str) -> tuple[str, ...]:
    """The removed and added lines of a mutant's diff (its name's number and context aside)."""
    return tuple(
        line.strip()
        for line in diff.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    )


def check_changed(ref: str, max_minutes: float, workers: int = 1) -> int:
    """The CI check: mutants of the critical functions changed since ``ref``; 0 if none
    survives that the committed results do not list, 1 otherwise."""
    known = subprocess.run(["git", "rev-parse", "--verify", "-q", ref], cwd=ROOT, capture_output=True)
    if known.returncode != 0:
        print(f"mutation check: {ref} is not a commit of this clone (a shallow clone?)")
        return 2
    todo = changed_functions(ref)
    if not todo:
        print(f"mutation check: no critical-path function changed since {ref}")
        return 0
    return _check(todo, max_minutes, workers)


def check_committed(max_minutes: float, workers: int = 1) -> int:
    """The CI check without a ref (any clone, shallow ones too): per target, the functions
    whose text differs from what its committed result file describes (:func:`stale_functions`);
    0 when none or when none of their mutants survives that the results do not list, 1 when
    one does, when the bound leaves mutants unchecked or when a target has no result file."""
    todo = {}
    missing = []
    for name in TARGETS:
        changed, why = stale_functions(name)
        if changed and not (RESULTS / f"{name}.json").exists():
            missing.append(f"{name}: {why}: run `python scripts/mutation.py {name}`")
        elif changed:
            print(f"mutation check: {name}: {why}")
            todo[name] = changed
    for line in missing:
        print(f"mutation check: {line}")
    if not todo:
        print("mutation check: every critical function is as its committed results describe")
        return 1 if missing else 0
    return max(_check(todo, max_minutes, workers), 1 if missing else 0)


def _check(todo: dict[str, tuple[str, ...]], max_minutes: float, workers: int) -> int:
    deadline = time.monotonic() + max_minutes * 60
    failed = False
    for module, functions in todo.items():
        left = deadline - time.monotonic()
        if left < 30:
            print(f"mutation check: out of time before {module} ({', '.join(functions)})")
            return 1
        committed_path = RESULTS / f"{module}.json"
        committed = json.loads(committed_path.read_text()) if committed_path.exists() else {}
        known = set(committed.get("survivors", {})) | set(TARGETS[module].equivalent)
        known_diffs = {_diff_lines(d) for d in committed.get("survivors", {}).values()}
        print(f"mutation check: {module}: {', '.join(f.rsplit('.', 1)[-1] for f in functions)}")
        s = run(module, int(left), functions=functions, workers=workers, write=False)
        new = {
            n: d for n, d in s["survivors"].items() if n not in known and _diff_lines(d) not in known_diffs
        }
        print(
            f"  {s['mutants']} mutants, {s['killed'] + s['timeouts']} killed, "
            f"{s['survived']} survived ({s['survived'] - len(new)} already listed), "
            f"{s['not_checked']} not checked"
        )
        for n, d in new.items():
            print(f"  NEW SURVIVOR {n}\n{d}")
        if new or s["not_checked"]:
            failed = True
    return 1 if failed else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("module", nargs="?", choices=sorted(TARGETS))
    parser.add_argument("--time-limit", type=int, help="seconds; default: the module's own")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copy (mutmut show)")
    parser.add_argument("--list", action="store_true", help="list the modules and their tests")
    parser.add_argument("--workers", type=int, default=1, help="mutmut's --max-children")
    parser.add_argument(
        "--resume", metavar="DIR", help="a kept scratch copy: rerun its survivors and unchecked"
    )
    parser.add_argument(
        "--summarise", metavar="DIR", help="a kept scratch copy: write its summary, run nothing"
    )
    parser.add_argument(
        "--changed-since", metavar="REF", help="CI: only the critical functions changed since REF"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="CI: only the critical functions that differ from their committed results",
    )
    parser.add_argument(
        "--max-minutes", type=float, default=5.0, help="with --changed-since/--check: the bound"
    )
    args = parser.parse_args()
    if args.check:
        sys.exit(check_committed(args.max_minutes, args.workers))
    if args.changed_since:
        sys.exit(check_changed(args.changed_since, args.max_minutes, args.workers))
    if args.list or not args.module:
        for name, t in TARGETS.items():
            changed, why = stale_functions(name)
            state = "current" if not changed else why
            print(f"{name:13s} {t.source}  <- {', '.join(t.tests)}\n{'':13s} results: {state}")
        return
    s = run(
        args.module,
        args.time_limit,
        args.keep,
        workers=args.workers,
        resume=args.resume or args.summarise,
        summarise_only=bool(args.summarise),
    )
    print(
        f"{s['module']}: {s['mutants']} mutants, {s['killed']} killed, {s['timeouts']} timeouts, "
        f"{s['survived']} survived, {len(s['equivalent'])} equivalent, "
        f"{s['not_checked']} not checked; kill rate {s['kill_rate']}"
    )
    for name in s["survivors"]:
        print("  survived:", name)


if __name__ == "__main__":
    main()

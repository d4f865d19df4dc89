"""The sandbox's harness: what runs inside the boundary (standard library only).

Its modules, :data:`sage_env.sandbox.host.launch.HARNESS_MODULES` in load order, import only
the standard library and each other: the host ships their source text in argv
(:func:`~sage_env.sandbox.host.launch.harness_argv`) and a short loader registers them as
``sage_env.sandbox.harness.<name>`` under stub parent packages, so this ``__init__`` never runs
inside the sandbox and must hold nothing but this docstring.

:mod:`~sage_env.sandbox.harness.entry` (the entry point: a one-job harness, or the zygote that
forks one per job), :mod:`~sage_env.sandbox.harness.judge` (H) with
:mod:`~sage_env.sandbox.harness.verdict` (its judging rules),
:mod:`~sage_env.sandbox.harness.worker` (W: its confinement steps, the fork per test, the
relay), :mod:`~sage_env.sandbox.harness.testproc` (each test's process),
:mod:`~sage_env.sandbox.harness.shield` (the test's view of the program's objects),
:mod:`~sage_env.sandbox.harness.rewrite` (the assert rewriter),
:mod:`~sage_env.sandbox.harness.template` (the judge's templates and their evaluator),
:mod:`~sage_env.sandbox.harness.flow` (how often each site must be reached),
:mod:`~sage_env.sandbox.harness.compare` (EvalPlus's value comparison and time limits),
:mod:`~sage_env.sandbox.harness.confine` (uid drop, prctl, seccomp, mounts) and
:mod:`~sage_env.sandbox.harness.report`, the wire format and its one parser, which the host
uses too.
"""

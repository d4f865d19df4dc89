"""The sandbox's host side: what runs in the trusted process, outside the boundary.

:mod:`~sage_env.sandbox.host.config` (limits, uids, constants, :class:`SandboxConfig`),
:mod:`~sage_env.sandbox.host.probe` (the isolation level, the interpreter, the bubblewrap and
``unshare`` command lines), :mod:`~sage_env.sandbox.host.cgroups` (one cgroup per run),
:mod:`~sage_env.sandbox.host.launch` (one sandboxed harness process per job, and
:func:`~sage_env.sandbox.host.launch.harness_argv`, which ships the harness's sources),
:mod:`~sage_env.sandbox.host.zygote` (the long-lived sandbox that forks each job),
:mod:`~sage_env.sandbox.host.pool` (:class:`SandboxPool`) and
:mod:`~sage_env.sandbox.host.runner` (:func:`run`, :class:`SandboxResult`). What runs inside
the boundary is :mod:`sage_env.sandbox.harness`; of it the host imports only the wire format,
:mod:`sage_env.sandbox.harness.report`, to parse what comes back. The public API is
:mod:`sage_env.sandbox`'s.
"""

"""Diagnostics of a policy in its roles.

Does the critic's score separate intact from corrupted tasks
(:mod:`sage_env.diagnostics.critic_probe`).
"""

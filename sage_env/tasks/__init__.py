"""Tasks: what a round is about.

The task record and its seed files (:mod:`sage_env.tasks.task`), AZR's execution tasks
(:mod:`sage_env.tasks.exec_tasks`), the task pool (:mod:`sage_env.tasks.pool`) and the novelty
of a program (:mod:`sage_env.tasks.novelty`).
"""

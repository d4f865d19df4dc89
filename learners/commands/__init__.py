"""The ``sage-env`` commands, one module each: ``train``, ``play`` and the tools (``eval``,
``compare``, ``export``, ``report``, ``decontam``); :mod:`learners.cli` dispatches to them.
Heavy imports (torch, transformers) are inside the commands that need them.
"""

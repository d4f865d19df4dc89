"""The training run: config and presets, set-up (``build``), the step loop (``loop``),
checkpoints, monitors (validation, early stopping, critic probe), warm-up, run checks,
preflight, metrics, export, and ``sage-env compare``'s arms (``compare``).

Import the modules themselves (``from learners.training.loop import train``); this package
imports nothing.
"""

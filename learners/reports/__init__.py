"""Reports on runs: the HTML run report (``run_report``, read by ``run_data``), the
statistics, table and plot of ``sage-env compare`` (``compare_summary``; the arms run in
:mod:`learners.training.compare`) and the training plots (``plots``). Below the training
loop, which writes them: nothing here imports :mod:`learners.training`.

Import the modules themselves; this package imports nothing.
"""

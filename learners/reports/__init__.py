"""Reports on finished runs: the HTML run report (``run_report``), ``sage-env compare``
(``compare``) and the training plots (``plots``).

Import the modules themselves; this package imports nothing.
"""

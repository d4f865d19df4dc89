"""``python -m learners`` is the ``sage-env`` command."""

from learners.cli import main

raise SystemExit(main())

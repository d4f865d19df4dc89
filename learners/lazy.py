"""Lazy re-exports for package ``__init__`` modules (PEP 562 ``__getattr__``).

A package lists its public names and the module each lives in; a name's module is imported on
first access. So ``import learners.engines.registry`` (which runs ``learners/engines/__init__``
first) does not import torch through the package's other modules. A leaf module.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(
    package: str, exports: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package`` re-exporting ``exports``.

    Args:
        package: The package's ``__name__``.
        exports: Public name -> the module that defines it (absolute dotted path).

    Returns:
        The three module attributes; ``__getattr__`` raises ``AttributeError`` on other names.
    """

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(exports[name]), name)

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__, sorted(exports)

"""Types for tyro's command line that need no model code (torch-free, so ``sage-env play``
and ``--help`` stay light)."""

from __future__ import annotations

from typing import Any

from sage_env.protocols import protocol_config_cls


def protocol_config_type(protocol: str) -> Any:
    """The type of ``EnvConfig.protocol_config`` for ``protocol``, for tyro and pydantic.

    The protocol's ``config_cls``; for a protocol without one, ``None`` marked for tyro to
    leave out of ``--help``.

    Raises:
        ValueError: on an unknown protocol.
        TypeError: on a ``config_cls`` that is not a dataclass.
    """
    import tyro

    settings = protocol_config_cls(protocol)
    return settings if settings is not None else tyro.conf.Suppress[None]

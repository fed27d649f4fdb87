"""Registries: name -> factory, for the plug-ins chosen by name (the generators: ``--engine``, the leaderboard, the
compile panel)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from studio.contracts.generator import Generator, GeneratorInfo

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> factory. ``register`` is a decorator; implementations register where they are defined and the
    registry imports their modules on first use (``modules``), so that nothing heavy loads until it is needed."""

    def __init__(self, kind: str, modules: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self._factories: dict[str, Callable[..., T]] = {}
        self._modules = modules
        self._loaded = False
        self._lock = threading.Lock()

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def deco(factory: Callable[..., T]) -> Callable[..., T]:
            self._factories[name] = factory
            return factory

        return deco

    def _load(self) -> None:
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
        import importlib
        import logging

        for mod in self._modules:
            try:
                importlib.import_module(mod)
            except ImportError as exc:  # an optional extra that is not installed: its entries are simply absent
                logging.getLogger(__name__).info("%s registry: %s not available (%s)", self.kind, mod, exc)

    def names(self) -> tuple[str, ...]:
        self._load()
        return tuple(self._factories)

    def get(self, name: str) -> Callable[..., T]:
        self._load()
        try:
            return self._factories[name]
        except KeyError:
            from studio.errors import InputError

            raise InputError(f"Unknown {self.kind} '{name}': use one of {', '.join(self.names())}.") from None

    def create(self, name: str, *args, **kwargs) -> T:
        return self.get(name)(*args, **kwargs)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


GENERATORS: Registry[Generator] = Registry("engine", ("studio.generators.builtin", "studio.generators.musetalk",
                                                      "studio.generators.wav2lip", "studio.generators.liveportrait",
                                                      "studio.generators.ditto", "studio.generators.wan_dit"))


def cast_refusal(info: GeneratorInfo, cast_size: int) -> str:
    """Why an engine that draws one anchor is not opened on a cast of ``cast_size``, naming the engines that draw
    several (``GeneratorInfo.cast_rows``)."""
    able: list[str] = []
    for name in GENERATORS.names():
        other = GENERATORS.get(name)().info  # class facts only: nothing is built before ``open``
        label = other.label.split(" (")[0]
        if other.cast_rows and label not in able:
            able.append(label)
    return (f"{info.label} draws one anchor: a cast of {cast_size} needs an engine that draws several "
            f"({', '.join(able)}).")

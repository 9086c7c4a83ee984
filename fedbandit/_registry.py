"""A name → entry registry whose entries register themselves in modules imported on first use.

Shared by the protocol registry (:mod:`fedbandit.protocols.registry`) and the learner
registry (:mod:`fedbandit.learners.registry`): a family module registers its entries when
it is imported, and the registry imports its families only when a name is first looked up,
so importing a subpackage stays cheap and families may import each other freely.
"""

from __future__ import annotations

import importlib

__all__ = ["Registry"]


class Registry:
    """Names of one kind of thing (``what``), filled by the ``families`` modules."""

    def __init__(self, what: str, families: tuple[str, ...]):
        self.what = what
        self._families = tuple(families)
        self._entries: dict = {}
        self._loaded = False

    def add(self, name: str, entry, *, same=lambda a, b: a is b) -> None:
        """Register ``entry`` under ``name``; a second, different entry under one name is an error."""
        if name in self._entries and not same(self._entries[name], entry):
            raise ValueError(f"{self.what} name {name!r} is registered twice")
        self._entries[name] = entry

    def remove(self, name: str) -> None:
        """Remove ``name`` (an entry registered for a while: a test's or a notebook's); unknown names are refused."""
        self._load()
        if name not in self._entries:
            raise ValueError(f"unknown {self.what} {name!r:.80}; available: {', '.join(self._entries)}")
        del self._entries[name]

    def _load(self) -> None:
        if not self._loaded:
            for mod in self._families:
                try:
                    importlib.import_module(mod)
                except ModuleNotFoundError as exc:  # a family that is not installed
                    if exc.name != mod:
                        raise
            self._loaded = True

    def items(self):
        self._load()
        return self._entries.items()

    def names(self) -> tuple[str, ...]:
        """Every registered name, in registration order."""
        self._load()
        return tuple(self._entries)

    def get(self, name):
        """The entry of ``name``; an unknown name is refused, listing the known ones."""
        self._load()
        if not isinstance(name, str) or name not in self._entries:
            raise ValueError(
                f"unknown {self.what} {name!r:.80}; available: {', '.join(self._entries)} (the name must be one of these)"
            )
        return self._entries[name]

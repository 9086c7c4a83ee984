"""One registry of privacy protocols: every name the book uses, and how to build it.

``available()`` lists the names (optionally of one kind), ``create(name, **params)``
builds a protocol, ``describe(name)`` says what it is.  Chapters, the synthesis and every
configuration use these names only (the Opacus pattern: ``create_accountant("rdp")``).

A protocol family registers its factories with :func:`register` in the module that
defines it; the registry imports those modules on first use, so importing
:mod:`fedbandit.protocols` stays cheap.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from fedbandit._registry import Registry
from fedbandit._validation import check_choice
from fedbandit.protocols.base import KINDS, Protocol

__all__ = ["register", "unregister", "available", "create", "describe", "ProtocolInfo"]

#: A protocol factory ``(epsilon, delta, **params) -> Protocol`` (kept as it is by :func:`register`).
Factory = TypeVar("Factory", bound=Callable[..., Protocol])

#: Modules that register protocol factories (imported on first use of the registry).
_FAMILIES = (
    "fedbandit.protocols.statistics_catalog",
    "fedbandit.protocols.concurrent",
    "fedbandit.protocols.counting",
    "fedbandit.protocols.sums",
)


@dataclass(frozen=True)
class ProtocolInfo:
    """What the registry knows about a protocol name."""

    name: str
    kind: str
    summary: str
    reference: str
    factory: Callable[..., Protocol]

    @property
    def parameters(self) -> tuple[str, ...]:
        """The keyword parameters ``create(name, ...)`` accepts."""
        return tuple(inspect.signature(self.factory).parameters)


_REGISTRY = Registry("protocol", _FAMILIES)


def register(name: str, *, kind: str, summary: str, reference: str = "") -> Callable[[Factory], Factory]:
    """Decorator: register ``factory(**params) -> Protocol`` under ``name``."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")

    def deco(factory: Factory) -> Factory:
        _REGISTRY.add(name, ProtocolInfo(name, kind, summary, reference, factory), same=lambda a, b: a.factory is b.factory)
        return factory

    return deco


def unregister(name: str) -> None:
    """Remove the protocol registered as ``name`` (for tests and notebooks that register one for a while)."""
    _REGISTRY.remove(name)


def available(kind: str | None = None) -> tuple[str, ...]:
    """Every registered protocol name, in registration order (of ``kind`` only, if given)."""
    if kind is not None:
        check_choice("kind", kind, KINDS)
    return tuple(n for n, info in _REGISTRY.items() if kind is None or info.kind == kind)


def describe(name: str) -> ProtocolInfo:
    """The :class:`ProtocolInfo` of ``name``."""
    return _REGISTRY.get(name)


def create(name: str, **params: Any) -> Protocol:
    """Build the protocol registered as ``name`` with keyword ``params``.

    Raises
    ------
    ValueError
        For an unknown name (listing the available ones) or an invalid parameter (from
        the protocol's own checks, naming it).
    TypeError
        For a parameter the protocol does not take (listing the ones it does).
    """
    info = describe(name)
    allowed = info.parameters
    extra = [k for k in params if k not in allowed]
    if extra:
        raise TypeError(f"protocol {name!r} takes no parameter {', '.join(map(repr, extra))}; it takes {', '.join(allowed)}")
    required = inspect.signature(info.factory).parameters
    if "epsilon" in params and params["epsilon"] is None and required["epsilon"].default is inspect.Parameter.empty:
        # A private family with epsilon=None would be built and fail only at configure(); None never means
        # "no privacy" for it (that is create('non-private'), 'counter-exact' or 'sum-non-private').
        raise ValueError(
            f"protocol {name!r} is private and needs epsilon (a number > 0), got epsilon=None; for exact statistics "
            f"use the non-private protocol of its kind ({', '.join(available_nonprivate(info.kind))})"
        )
    return info.factory(**params)


def available_nonprivate(kind: str) -> tuple[str, ...]:
    """The registered protocols of ``kind`` whose factory takes no epsilon (the exact ones)."""
    return tuple(n for n in available(kind) if "epsilon" not in describe(n).parameters)

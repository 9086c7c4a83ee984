"""Privacy protocols P = (R, S, A): the only way a learner's data reaches the server.

Every protocol is composed of a randomizer R, an intermediary S and an analyzer A (objects
of :mod:`~fedbandit.protocols.base`), built by name from one registry::

    from fedbandit.protocols import available, create
    protocol = create("silo-ldp", epsilon=1.0, delta=1e-5)

Kinds: ``statistics`` (continual release of the linear-bandit statistics;
:mod:`~fedbandit.protocols.statistics`, :mod:`~fedbandit.protocols.statistics_catalog`,
:mod:`~fedbandit.protocols.concurrent`), ``counter`` (continual counting of many streams;
:mod:`~fedbandit.protocols.counting`) and ``sum`` (one private vector sum per round;
:mod:`~fedbandit.protocols.sums`).  Intermediaries: :mod:`~fedbandit.protocols.intermediaries`.

The top level (``__all__``) exports what a user calls; every other public name is imported
from its module, e.g. ``from fedbandit.protocols.statistics import GaussianTree`` (ARCHITECTURE.md, *Public API*).
"""

import importlib
from typing import Any

# --- the top level: what a user calls (ARCHITECTURE.md, "Public API"); every other public name
# is imported from its module (each module's __all__) ---
_EXPORTS = {
    "Randomizer": "base",
    "Intermediary": "base",
    "Analyzer": "base",
    "Protocol": "base",
    "ProtocolStateError": "base",
    "CounterRandomizer": "counting",
    "CounterProtocol": "counting",
    "Identity": "intermediaries",
    "Shuffler": "intermediaries",
    "SecureAggregation": "intermediaries",
    "register": "registry",
    "unregister": "registry",
    "available": "registry",
    "create": "registry",
    "describe": "registry",
    "StatisticsProtocol": "statistics",
    "StatisticsRandomizer": "statistics",
    "StatisticsAnalyzer": "statistics",
    "SumProtocol": "sums",
    "SumRandomizer": "sums",
    "SumAnalyzer": "sums",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    # Public names are imported from their module on first use (PEP 562), so importing a
    # subpackage stays cheap and subpackages can import each other's modules freely.
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
# --- end of re-exports ---

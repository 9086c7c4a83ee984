"""fedbandit.protocols._legacy_tree."""

import importlib

# --- re-exports (generated from each module's __all__) ---
_EXPORTS = {
    "Randomizer": "base",
    "Intermediary": "base",
    "Analyzer": "base",
    "Protocol": "base",
    "Communication": "base",
    "ProtocolStateError": "base",
    "KINDS": "base",
    "Identity": "intermediaries",
    "Shuffler": "intermediaries",
    "SecureAggregation": "intermediaries",
    "ConcurrentShufflers": "intermediaries",
    "Allocation": "intermediaries",
    "Release": "intermediaries",
    "Transcript": "intermediaries",
    "ConcurrentShuffleModel": "intermediaries",
    "MixedRadixServer": "intermediaries",
    "Server": "intermediaries",
    "register": "registry",
    "available": "registry",
    "create": "registry",
    "describe": "registry",
    "ProtocolInfo": "registry",
    "pack_statistics": "statistics",
    "unpack_statistics": "statistics",
    "user_records": "statistics",
    "n_coordinates": "statistics",
    "ExactStatistics": "statistics",
    "GaussianTree": "statistics",
    "DiscreteGaussianTree": "statistics",
    "VectorSum": "statistics",
    "RunningTotal": "statistics",
    "TreePrefix": "statistics",
    "CentralTree": "statistics",
    "StatisticsProtocol": "statistics",
    "AUTO_BITS_ROUNDING_SHARE": "statistics",
    "SCHEDULES": "statistics",
}

__all__ = list(_EXPORTS)


def __getattr__(name):
    # Public names are imported from their module on first use (PEP 562), so importing a
    # subpackage stays cheap and subpackages can import each other's modules freely.
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
# --- end of re-exports ---

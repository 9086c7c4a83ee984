"""fedbandit.protocols.tree."""

import importlib

# --- re-exports (generated from each module's __all__) ---
_EXPORTS = {
    "Shuffler": "intermediaries",
    "Allocation": "intermediaries",
    "Release": "intermediaries",
    "Transcript": "intermediaries",
    "ConcurrentShuffleModel": "intermediaries",
    "MixedRadixServer": "intermediaries",
    "Server": "intermediaries",
    "shuffle_messages": "intermediaries",
    "Communication": "tree",
    "Protocol": "tree",
    "NonPrivateProtocol": "tree",
    "DistributedTreeProtocol": "tree",
    "SiloLDPProtocol": "tree",
    "ShuffleAmplificationProtocol": "tree",
    "CentralTreeProtocol": "tree",
    "VectorSumShuffleProtocol": "tree",
    "DDGSecAggProtocol": "tree",
    "pack_statistics": "tree",
    "unpack_statistics": "tree",
    "user_records": "tree",
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

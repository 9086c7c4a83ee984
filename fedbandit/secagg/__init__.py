"""Secure aggregation (Bonawitz et al. 2017), implemented with real cryptography (``protocol``)."""

import importlib

# --- re-exports (generated from each module's __all__) ---
_EXPORTS = {
    "PRIME": "protocol",
    "SecAggError": "protocol",
    "SecAggAbort": "protocol",
    "AdvertiseKeys": "protocol",
    "ShareKeys": "protocol",
    "MaskedInput": "protocol",
    "UnmaskResponse": "protocol",
    "SecAggClient": "protocol",
    "SecAggServer": "protocol",
    "SecAggResult": "protocol",
    "shamir_share": "protocol",
    "shamir_reconstruct": "protocol",
    "prg_mask": "protocol",
    "run_secagg": "protocol",
    "ROUND_NAMES": "protocol",
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

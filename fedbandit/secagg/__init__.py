"""Secure aggregation (Bonawitz et al. 2017) with real cryptography: the protocol (``protocol``), Shamir sharing with
error detection (``shamir``), the errors (``errors``), a keystream-backed noise source (``noise``) and attacks (``attacks``).

The top level (``__all__``) exports what a user calls; every other public name is imported
from its module, e.g. ``from fedbandit.secagg.shamir import shamir_share`` (ARCHITECTURE.md, *Public API*).
"""

import importlib

# --- the top level: what a user calls (ARCHITECTURE.md, "Public API"); every other public name
# is imported from its module (each module's __all__) ---
_EXPORTS = {
    "ATTACKS": "attacks",
    "run_attack": "attacks",
    "SecAggError": "errors",
    "SecAggAbort": "errors",
    "SecAggIntegrityError": "errors",
    "secure_generator": "noise",
    "SecAggClient": "protocol",
    "SecAggServer": "protocol",
    "SecAggResult": "protocol",
    "run_secagg": "protocol",
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

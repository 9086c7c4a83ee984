"""Secure aggregation (Bonawitz et al. 2017) with real cryptography: the protocol (``protocol``), Shamir sharing with
error detection (``shamir``), the errors (``errors``), a keystream-backed noise source (``noise``) and attacks (``attacks``)."""

import importlib

# --- re-exports (generated from each module's __all__) ---
_EXPORTS = {
    "ATTACKS": "attacks",
    "AttackOutcome": "attacks",
    "run_attack": "attacks",
    "SecAggError": "errors",
    "SecAggAbort": "errors",
    "SecAggIntegrityError": "errors",
    "KEYSTREAM_CIPHER": "noise",
    "secure_generator": "noise",
    "AdvertiseKeys": "protocol",
    "ShareKeys": "protocol",
    "EncryptedShares": "protocol",
    "MaskedInput": "protocol",
    "ConsistencySignature": "protocol",
    "RevealedShare": "protocol",
    "UnmaskResponse": "protocol",
    "SecAggClient": "protocol",
    "SecAggServer": "protocol",
    "SecAggResult": "protocol",
    "check_threshold": "protocol",
    "generate_identities": "protocol",
    "prg_mask": "protocol",
    "run_secagg": "protocol",
    "ROUND_NAMES": "protocol",
    "PRIME": "shamir",
    "LIMBS": "shamir",
    "SHARE_BYTES": "shamir",
    "SECRET_BITS": "shamir",
    "shamir_share": "shamir",
    "shamir_share_many": "shamir",
    "shamir_reconstruct": "shamir",
    "shamir_reconstruct_many": "shamir",
    "shamir_consistent": "shamir",
    "is_share": "shamir",
    "share_limbs": "shamir",
    "add_to_share": "shamir",
    "INCONSISTENT": "shamir",
    "OUT_OF_RANGE": "shamir",
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

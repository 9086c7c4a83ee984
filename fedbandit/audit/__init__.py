"""Empirical lower bounds on ε: attacks that could refute a privacy claim.

``epsilon``: Clopper–Pearson bounds (:func:`audit_epsilon`, :func:`audit_epsilon_split`,
fitted attacks); ``harness``: attack statistics and :class:`AuditReport`; ``views``: what each
model's adversary sees (taps on a protocol's deliveries and releases); ``broken``: testing
hooks that build deliberately broken variants (noise scaled down) for power checks;
``tight``: known-optimal-test audits of the releases of one user; ``deshuffle``: the
de-shuffling attack on shuffled Gaussian messages (the target silo's message picked out of
the multiset); ``end_to_end``: audits of
every learner and protocol over a whole run; ``schedule``: the synchronization-schedule
attack on DP20's FedUCB (Zhou & Chowdhury 2023, Example 4.1); ``replay``: the counterfactual
replay contract (with the releases forced, one user changes no record but its own).

The top level (``__all__``) exports what a user calls; every other public name is imported
from its module, e.g. ``from fedbandit.audit.schedule import alice_tracy_instance`` (ARCHITECTURE.md, *Public API*).
"""

import importlib

# --- the top level: what a user calls (ARCHITECTURE.md, "Public API"); every other public name
# is imported from its module (each module's __all__) ---
_EXPORTS = {
    "planted_noise": "broken",
    "deshuffle_audit": "deshuffle",
    "EndToEndSpec": "end_to_end",
    "end_to_end_specs": "end_to_end",
    "audit_end_to_end": "end_to_end",
    "users_from_environment": "end_to_end",
    "AuditResult": "epsilon",
    "audit_epsilon": "epsilon",
    "audit_epsilon_split": "epsilon",
    "epsilon_lower_bound": "epsilon",
    "AuditReport": "harness",
    "replay_check": "replay",
    "replay_pairs": "replay",
    "tight_audit": "tight",
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

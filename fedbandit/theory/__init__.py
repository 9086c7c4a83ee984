"""The bounds each chapter plots next to its measurements, one module per paper.

``linear`` (Zhou & Chowdhury: the fixed-batch federated LinUCB's regret bounds and schedule),
``consensus`` (Li, Song & Fragouli: consensus private UCB), ``psco`` (Tenenbaum, Kaplan, Mansour &
Stemmer: private summation under continual observation and its bandit) and ``ddg`` (Kairouz, Liu &
Steinke: the distributed discrete Gaussian's Theorem 2).  The top level exports nothing: every
bound is numerics, imported from its paper's module (``from fedbandit.theory.linear import
regret_bound_ldp``), as ``dp_accounting.rdp`` keeps its functions.
"""

import importlib

# --- the top level: what a user calls (ARCHITECTURE.md, "Public API"); every other public name
# is imported from its module (each module's __all__) ---
_EXPORTS: dict[str, str] = {}

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

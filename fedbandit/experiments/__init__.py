"""Running the chapters' experiments: the grid runner, the one configuration runner, statistics.

``grid`` (:func:`run_grid`: configurations × seeds with an on-disk cache, serial, joblib or
Dask), ``runner`` (:func:`run_config`: any learner from one configuration dict),
``synthesis`` (every privacy model side by side), ``statistics`` (intervals and fitted
exponents) and ``trials`` (the mechanisms' own trials: PSCO, mean estimation, bandit
trials on one shared environment).

The top level (``__all__``) exports what a user calls; every other public name is imported
from its module, e.g. ``from fedbandit.experiments.synthesis import MODELS`` (ARCHITECTURE.md, *Public API*).
"""

import importlib

# --- the top level: what a user calls (ARCHITECTURE.md, "Public API"); every other public name
# is imported from its module (each module's __all__) ---
_EXPORTS = {
    "run_grid": "grid",
    "run_config": "runner",
    "mean_and_se": "statistics",
    "regret_interval": "statistics",
    "t_interval": "statistics",
    "fit_exponent_t": "statistics",
    "Claim": "statistics",
    "claim": "statistics",
    "claim_slope": "statistics",
    "claim_exponent": "statistics",
    "claim_difference": "statistics",
    "claim_slope_gap": "statistics",
    "claim_order": "statistics",
    "mean_below": "statistics",
    "means_not_distinguished": "statistics",
    "mean_within": "statistics",
    "claim_estimate_gap": "statistics",
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

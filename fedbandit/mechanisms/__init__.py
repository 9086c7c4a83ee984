"""The noise-adding primitives: trees, Gaussians, discrete Gaussians, counters, randomized response.

A mechanism takes its noise level as a parameter (computed by :mod:`fedbandit.accounting`)
and says nothing about privacy itself.  Modules: ``tree`` (the binary tree, distributed or
central, with per-run steps), ``honaker_tree`` (the full binary tree with Honaker's best linear
estimator of the prefixes), ``matrix_factorization`` (the square-root
factorization of the prefix-sum matrix and its banded form), ``gaussian``, ``discrete_gaussian`` (the exact sampler of
Canonne, Kamath & Steinke), ``ddg`` (the distributed discrete Gaussian's client and
server steps), ``flattening`` (random rotations), ``continual_counting`` (binary,
logarithmic, hybrid and per-item counters), ``randomized_response``, ``vector_sum`` (the
shuffle vector sum of Cheu et al.) and ``psco`` (private summation under continual
observation).

The top level (``__all__``) exports what a user calls; every other public name is imported
from its module, e.g. ``from fedbandit.mechanisms.psco import optimal_batch_sizes`` (ARCHITECTURE.md, *Public API*).
"""

import importlib
from typing import Any

# --- the top level: what a user calls (ARCHITECTURE.md, "Public API"); every other public name
# is imported from its module (each module's __all__) ---
_EXPORTS = {
    "BinomialMechanism": "binomial",
    "BinaryMechanism": "continual_counting",
    "LogarithmicMechanism": "continual_counting",
    "HybridMechanism": "continual_counting",
    "PerItemLaplaceMechanism": "continual_counting",
    "DDGMechanism": "ddg",
    "sample_discrete_gaussian": "discrete_gaussian",
    "gaussian_mechanism": "gaussian",
    "HonakerTreeMechanism": "honaker_tree",
    "run_psco": "psco",
    "RRShuffleSummation": "randomized_response",
    "TreeMechanism": "tree",
    "VectorSumShuffle": "vector_sum",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
# --- end of re-exports ---

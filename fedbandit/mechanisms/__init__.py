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
"""

import importlib
from typing import Any

# --- re-exports (generated from each module's __all__) ---
_EXPORTS = {
    "BinomialMechanism": "binomial",
    "BinaryMechanism": "continual_counting",
    "LogarithmicMechanism": "continual_counting",
    "HybridMechanism": "continual_counting",
    "PerItemLaplaceMechanism": "continual_counting",
    "hybrid_noise_variance": "continual_counting",
    "binary_noise_variance": "continual_counting",
    "per_item_noise_variance": "continual_counting",
    "hybrid_sd_bound_by_level": "continual_counting",
    "hybrid_sd_factor": "continual_counting",
    "lowest_set_bit_index": "continual_counting",
    "floor_log2": "continual_counting",
    "draw_standard_laplace": "continual_counting",
    "DDGMechanism": "ddg",
    "clip_l2": "ddg",
    "conditional_randomized_round": "ddg",
    "modular_clip": "ddg",
    "ddg_noisy_sum": "ddg",
    "MAX_TABLE_SIGMA": "discrete_gaussian",
    "sample_discrete_gaussian": "discrete_gaussian",
    "sample_discrete_gaussian_reference": "discrete_gaussian",
    "discrete_gaussian_pmf": "discrete_gaussian",
    "discrete_gaussian_variance": "discrete_gaussian",
    "bernoulli_exp_reference": "discrete_gaussian",
    "discrete_laplace_reference": "discrete_gaussian",
    "fwht": "flattening",
    "next_power_of_two": "flattening",
    "flattened_dim": "flattening",
    "HadamardFlattener": "flattening",
    "DFTFlattener": "flattening",
    "make_flattener": "flattening",
    "gaussian_mechanism": "gaussian",
    "honaker_level_variance": "honaker_tree",
    "honaker_prefix_variance": "honaker_tree",
    "honaker_max_prefix_variance": "honaker_tree",
    "FullTreeRandomizer": "honaker_tree",
    "HonakerAnalyzer": "honaker_tree",
    "HonakerTreeMechanism": "honaker_tree",
    "sqrt_toeplitz_coefficients": "matrix_factorization",
    "inverse_series": "matrix_factorization",
    "lower_toeplitz": "matrix_factorization",
    "max_column_norm": "matrix_factorization",
    "factorization_noise_coefficients": "matrix_factorization",
    "MAX_DENSE_STEPS": "matrix_factorization",
    "SqrtToeplitzRandomizer": "matrix_factorization",
    "BandedSqrtRandomizer": "matrix_factorization",
    "ContinualRelease": "psco",
    "local_psco": "psco",
    "central_tree_psco": "psco",
    "concurrent_psco": "psco",
    "sequential_psco": "psco",
    "tree_psco": "psco",
    "extrapolating_psco": "psco",
    "run_psco": "psco",
    "PSCO_ALGORITHMS": "psco",
    "optimal_batch_sizes": "psco",
    "paper_batch_sizes": "psco",
    "dyadic_batch_sizes": "psco",
    "error_proxy": "psco",
    "sup_error": "psco",
    "prefix_sums": "psco",
    "sample_hard_input": "psco",
    "hard_input_single_positions": "psco",
    "sample_bernoulli_input": "psco",
    "bernoulli_concurrent_sup_error": "psco",
    "sample_runs_input": "psco",
    "rep_nk": "psco",
    "big_nk": "psco",
    "c_epsilon": "psco",
    "RRShuffleSummation": "randomized_response",
    "randomized_round": "randomized_response",
    "unary_round": "randomized_response",
    "unary_resolution": "randomized_response",
    "rr_randomize": "randomized_response",
    "rr_debias": "randomized_response",
    "sample_rr_counts": "randomized_response",
    "lowest_set_bit": "tree",
    "prefix_nodes": "tree",
    "tree_depth": "tree",
    "prefix_noise_variance": "tree",
    "draw_noise": "tree",
    "TreeRandomizer": "tree",
    "TreeAnalyzer": "tree",
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

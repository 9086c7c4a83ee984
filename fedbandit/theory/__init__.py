"""The bounds each chapter plots next to its measurements (``linear``, ``consensus``, ``psco``)."""

import importlib

# --- re-exports (generated from each module's __all__) ---
_EXPORTS = {
    "fact1_error_bound": "consensus",
    "hybrid_error_bound": "consensus",
    "paper_regret_order": "consensus",
    "master_worker_regret_bound": "consensus",
    "decentralized_regret_bound": "consensus",
    "ucb_regret_bound": "consensus",
    "centralized_regret_bound": "consensus",
    "master_worker_communications": "consensus",
    "width_pulls": "consensus",
    "theorem2_sigma": "ddg",
    "theorem2_gamma": "ddg",
    "theorem2_beta": "ddg",
    "theorem2_bits": "ddg",
    "theorem2_params": "ddg",
    "theorem2_mse": "ddg",
    "ddg_mean_mse_by_bits": "ddg",
    "ddg_mse_bound": "ddg",
    "ddg_mse_terms": "ddg",
    "check_batch_schedule": "linear",
    "n_batches": "linear",
    "kappa": "linear",
    "regularizer_lambda": "linear",
    "confidence_radius": "linear",
    "lemma67_regret_bound": "linear",
    "regret_bound_ldp": "linear",
    "regret_bound_sdp": "linear",
    "regret_bound_super_agent": "linear",
    "regret_bound_nonprivate": "linear",
    "communication_rounds": "linear",
    "optimal_batch_size": "linear",
    "nearest_divisor": "linear",
    "fixed_batch_noise_levels": "linear",
    "PRIVACY_COST_EXPONENT_M": "linear",
    "MAX_HORIZON": "linear",
    "ALGORITHMS": "psco",
    "c_epsilon": "psco",
    "rep_nk": "psco",
    "error_proxy_local_slope": "psco",
    "supremum_factor_slope": "psco",
    "big_nk": "psco",
    "rep_threshold": "psco",
    "window_variance_inflation": "psco",
    "big_ladder": "psco",
    "tree_levels": "psco",
    "local_error_rate": "psco",
    "sequential_error_rate": "psco",
    "concurrent_error_rate": "psco",
    "tree_error_rate": "psco",
    "central_error_rate": "psco",
    "lower_bound_rate": "psco",
    "predicted_error_exponent": "psco",
    "bandit_regret_rate": "psco",
    "sequential_bandit_regret": "psco",
    "predicted_regret_exponent": "psco",
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

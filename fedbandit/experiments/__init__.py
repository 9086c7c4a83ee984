"""Running the chapters' experiments: the grid runner, the one configuration runner, statistics.

``grid`` (:func:`run_grid`: configurations × seeds with an on-disk cache, serial, joblib or
Dask), ``runner`` (:func:`run_config`: any learner from one configuration dict),
``synthesis`` (every privacy model side by side), ``statistics`` (intervals and fitted
exponents) and ``trials`` (the mechanisms' own trials: PSCO, mean estimation, bandit
trials on one shared environment).
"""

import importlib

# --- re-exports (generated from each module's __all__) ---
_EXPORTS = {
    "BACKENDS": "grid",
    "run_grid": "grid",
    "make_rng": "grid",
    "config_hash": "grid",
    "default_cache_dir": "grid",
    "package_source_hash": "grid",
    "prune_cache": "grid",
    "stack_results": "grid",
    "regret_trial": "regret",
    "run_config": "runner",
    "RUNNER_KEYS": "runner",
    "mean_and_se": "statistics",
    "fit_power_law": "statistics",
    "regret_interval": "statistics",
    "ExponentFit": "statistics",
    "fit_exponent": "statistics",
    "MeanGap": "statistics",
    "welch_dof": "statistics",
    "mean_gap": "statistics",
    "gap_false_alarm": "statistics",
    "gap_threshold": "statistics",
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
    "mean_above_level": "statistics",
    "ordering_summary": "statistics",
    "mean_and_half_width": "statistics",
    "ratio_and_se": "statistics",
    "claim_estimate_gap": "statistics",
    "fit_polylog": "statistics",
    "spearman_rho": "statistics",
    "worst_case_runs": "statistics",
    "held_out_worst_case": "statistics",
    "COMPARISON_RELATION": "synthesis",
    "accounting_under": "synthesis",
    "end_to_end_audit": "synthesis",
    "Model": "synthesis",
    "MODELS": "synthesis",
    "BEYOND_MODELS": "synthesis",
    "model": "synthesis",
    "model_of": "synthesis",
    "applicability": "synthesis",
    "applicability_table": "synthesis",
    "model_config": "synthesis",
    "side_by_side_configs": "synthesis",
    "sweep_configs": "synthesis",
    "random_play_regret": "synthesis",
    "audit_side_by_side": "synthesis",
    "table_rows": "synthesis",
    "markdown_table": "synthesis",
    "format_value": "synthesis",
    "TABLE_COLUMNS": "synthesis",
    "pair_audit_rows": "synthesis",
    "claim_lower_bound": "synthesis",
    "PAIR_AUDIT_COLUMNS": "synthesis",
    "dme_trial": "trials",
    "theorem2_trial": "trials",
    "psco_trial": "trials",
    "bandit_trial": "trials",
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

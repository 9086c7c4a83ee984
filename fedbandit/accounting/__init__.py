"""Privacy accounting apart from the mechanisms: events, the accountant, every calibration rule.

Modelled on ``dp_accounting`` (events apart from accountants) and Opacus (analysis formulas
apart from state).  A protocol describes what it released as a privacy event
(:mod:`~fedbandit.accounting.events`); :func:`account` turns the event into (ε, δ) with a
status and the theorem it used.  Every rule that turns a target (ε, δ) into a noise level
lives here and nowhere else (:mod:`~fedbandit.accounting.calibration`, and the DDG,
shuffle, counting and Gaussian modules).

Modules: ``events``, ``accountant``, ``calibration``, ``zcdp`` (zCDP / RDP conversions),
``composition`` (basic, advanced, group, level budgets), ``amplification`` (shuffling),
``ddg`` (the distributed discrete Gaussian), ``sampled_ddg`` (its Poisson-sampled rounds, through
the sampled Gaussian that dominates them), ``deshuffle`` (the exact de-shuffling lower
bound on shuffled Gaussian messages), ``shuffle`` (shuffled randomized response),
``counting`` (continual counting), ``gaussian`` and ``composed_gaussian`` (the analytic
Gaussian mechanism).
"""

import importlib
from typing import Any

# --- re-exports (generated from each module's __all__) ---
_EXPORTS = {
    "Accounting": "accountant",
    "STATUSES": "accountant",
    "account": "accountant",
    "VERIFY_TOLERANCE": "accountant",
    "COMPOSITIONS": "allocation",
    "mechanism_budget": "allocation",
    "composed_guarantee": "allocation",
    "advanced_wins_from": "allocation",
    "AmplificationValidityError": "amplification",
    "AmplificationValidityWarning": "amplification",
    "Condition": "amplification",
    "fmt22_closed_form_validity": "amplification",
    "fmt22_closed_form_epsilon": "amplification",
    "fmt22_numerical_delta": "amplification",
    "fmt22_numerical_epsilon": "amplification",
    "fmt22_approx_dp": "amplification",
    "zc_amplification_validity": "amplification",
    "zc_amplification_sigma0": "amplification",
    "gaussian_delta_exact": "amplification",
    "gaussian_epsilon_exact": "amplification",
    "zc_lemma_sigma0": "amplification",
    "shuffled_gaussian_privacy_loss": "amplification",
    "shuffled_gaussian_epsilon_mc": "amplification",
    "shuffled_gaussian_epsilon_far": "amplification",
    "group_privacy_route_epsilon": "amplification",
    "binomial_sensitivities": "binomial",
    "cpsgd_epsilon": "binomial",
    "cpsgd_condition": "binomial",
    "binomial_run_epsilon": "binomial",
    "BinomialParams": "binomial",
    "binomial_params": "binomial",
    "ldp_sigma0": "calibration",
    "ldp_total_variance": "calibration",
    "central_sigma": "calibration",
    "CALIBRATIONS": "calibration",
    "dp20_m": "calibration",
    "dp20_sigma": "calibration",
    "TREE_SIGMA_RULES": "calibration",
    "gaussian_tree_sigma0": "calibration",
    "vector_sum_parameters": "calibration",
    "authors_vector_sum_noise": "calibration",
    "authors_vector_sum_lambda_sigma": "calibration",
    "authors_vector_sum_constant": "calibration",
    "laplace_counter_scale": "calibration",
    "CJMP21_CONSTANT": "calibration",
    "COMPOSED_GAUSSIAN_CALIBRATIONS": "composed_gaussian",
    "composed_gaussian_sigma": "composed_gaussian",
    "advanced_composition": "composition",
    "optimal_composition_delta": "composition",
    "optimal_composition_epsilon": "composition",
    "split_budget_optimal": "composition",
    "MAX_OPTIMAL_MECHANISMS": "composition",
    "split_budget_advanced": "composition",
    "group_budget": "composition",
    "level_budget": "composition",
    "gaussian_noise_scale": "composition",
    "hybrid_counter_scales": "counting",
    "binary_counter_scale": "counting",
    "per_item_counter_scale": "counting",
    "account_pure": "counting",
    "RDP_ORDERS": "ddg",
    "ddg_tau": "ddg",
    "ddg_delta2": "ddg",
    "ddg_zcdp_epsilon": "ddg",
    "ddg_rdp": "ddg",
    "ddg_epsilon": "ddg",
    "ddg_sigma_for_epsilon": "ddg",
    "sum_closeness_bound": "ddg",
    "single_dg_sum_epsilon": "ddg",
    "DDGParams": "ddg",
    "ddg_params": "ddg",
    "ddg_params_from_gamma": "ddg",
    "ddg_tree_params": "ddg",
    "DEFAULT_BETA": "ddg",
    "DeshuffleScenario": "deshuffle",
    "deshuffle_scenarios": "deshuffle",
    "deshuffled_max_logpdf": "deshuffle",
    "deshuffled_gaussian_delta": "deshuffle",
    "deshuffled_gaussian_epsilon": "deshuffle",
    "DeshuffledGaussianEvent": "deshuffle",
    "deshuffled_event_epsilon": "deshuffle",
    "RELATIONS": "events",
    "check_relation": "events",
    "record_sensitivities": "events",
    "DpEvent": "events",
    "NoReleaseEvent": "events",
    "NonPrivateEvent": "events",
    "GaussianEvent": "events",
    "LaplaceEvent": "events",
    "DiscreteGaussianSumEvent": "events",
    "SampledDiscreteGaussianSumEvent": "events",
    "ShuffledRandomizedResponseEvent": "events",
    "ApproxDpEvent": "events",
    "ClaimedEvent": "events",
    "ConditionalEvent": "events",
    "InvalidEvent": "events",
    "SelfComposedEvent": "events",
    "ComposedEvent": "events",
    "analytic_gaussian_delta": "gaussian",
    "analytic_gaussian_sigma": "gaussian",
    "analytic_gaussian_epsilon": "gaussian",
    "SMOOTHING": "sampled_ddg",
    "TAIL_SHARE": "sampled_ddg",
    "smoothing_closeness": "sampled_ddg",
    "share_closeness": "sampled_ddg",
    "sampling_tail": "sampled_ddg",
    "MIN_SHARE_SCALE": "sampled_ddg",
    "noise_shares_for": "sampled_ddg",
    "client_shares": "sampled_ddg",
    "SampledDDGBound": "sampled_ddg",
    "sampled_ddg_bound": "sampled_ddg",
    "sampled_ddg_epsilon": "sampled_ddg",
    "sampled_ddg_noise_std": "sampled_ddg",
    "rr_shuffle_delta": "shuffle",
    "rr_shuffle_delta_exact": "shuffle",
    "rr_flip_probability": "shuffle",
    "local_rr_flip_probability": "shuffle",
    "psco_accounting": "shuffle",
    "rr_message_probabilities": "shuffle",
    "rr_estimator_variance": "shuffle",
    "SUBSAMPLING_ORDERS": "subsampling",
    "SAMPLED_GAUSSIAN_ORDERS": "subsampling",
    "AMPLIFICATIONS": "subsampling",
    "SAMPLING_SCHEMES": "subsampling",
    "SAMPLING_RELATIONS": "subsampling",
    "amplification_for": "subsampling",
    "sampled_gaussian_rdp": "subsampling",
    "poisson_subsampled_rdp": "subsampling",
    "without_replacement_rdp": "subsampling",
    "subsampled_rdp": "subsampling",
    "subsampled_epsilon": "subsampling",
    "sampled_gaussian_epsilon": "subsampling",
    "sampled_gaussian_noise_multiplier": "subsampling",
    "gaussian_zcdp": "zcdp",
    "compose_zcdp": "zcdp",
    "gaussian_sigma_for_zcdp": "zcdp",
    "zcdp_to_approx_dp": "zcdp",
    "approx_dp_to_zcdp": "zcdp",
    "rdp_to_approx_dp": "zcdp",
    "calibrate_gaussian_sigma": "zcdp",
    "tree_zcdp": "zcdp",
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

"""Bandit environments, communication graphs and the shipped datasets.

``linear`` (the synthetic and real-data linear instances of Zhou & Chowdhury), ``mslr``
(the learning-to-rank sample and its rebuild), ``multi_armed`` (Bernoulli and Gaussian
K-armed bandits), ``graphs`` (communication graphs and consensus matrices), ``users``
(given users; a federated instance served one user at a time), ``digits`` (the federated
digits data) and ``factory`` (:func:`make_environment`, one configuration → one
environment).
"""

import importlib

# --- re-exports (generated from each module's __all__) ---
_EXPORTS = {
    "load_digits_federated": "digits",
    "make_environment": "factory",
    "ENVIRONMENT_KEYS": "factory",
    "INSTANCES": "factory",
    "register_environment": "factory",
    "unregister_environment": "factory",
    "available_environments": "factory",
    "environment_keys": "factory",
    "EnvironmentInfo": "factory",
    "Graph": "graphs",
    "DisconnectedGraphError": "graphs",
    "MAX_AGENTS": "graphs",
    "complete_graph": "graphs",
    "ring_graph": "graphs",
    "star_graph": "graphs",
    "grid_graph": "graphs",
    "erdos_renyi_graph": "graphs",
    "make_graph": "graphs",
    "TOPOLOGIES": "graphs",
    "laplacian": "graphs",
    "default_kappa": "graphs",
    "consensus_matrix": "graphs",
    "NetworkTerms": "graphs",
    "network_terms": "graphs",
    "RoundBlock": "linear",
    "SyntheticLinearEnv": "linear",
    "RealDataLinearEnv": "linear",
    "as_seed_sequence": "linear",
    "MSLR_ANCHOR_URL_COLUMNS": "mslr",
    "RANKEVAL_VERSION": "mslr",
    "RANKEVAL_SHA256": "mslr",
    "DEFAULT_MSLR_PATH": "mslr",
    "mslr_path": "mslr",
    "shipped_data_path": "mslr",
    "read_rankeval_sample": "mslr",
    "build_mslr_instance": "mslr",
    "save_mslr_instance": "mslr",
    "load_mslr_instance": "mslr",
    "MSLR_FILE": "mslr",
    "BernoulliBandit": "multi_armed",
    "GaussianBandit": "multi_armed",
    "CategoricalBandit": "multi_armed",
    "KArmedBandit": "multi_armed",
    "RewardStream": "multi_armed",
    "make_env": "multi_armed",
    "OrthogonalArmsEnv": "orthogonal",
    "RANKER_FILE": "recommendation",
    "DEFAULT_RANKER_PATH": "recommendation",
    "RELEVANCE_VALUES": "recommendation",
    "ranker_table_path": "recommendation",
    "build_ranker_table": "recommendation",
    "save_ranker_table": "recommendation",
    "load_ranker_table": "recommendation",
    "ranker_distributions": "recommendation",
    "ranker_bandit": "recommendation",
    "run_in_lockstep": "sharing",
    "share": "sharing",
    "handover": "sharing",
    "task_clock": "sharing",
    "in_lockstep": "sharing",
    "SharedEnvironment": "sharing",
    "UsersEnv": "users",
    "UserSequenceEnv": "users",
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

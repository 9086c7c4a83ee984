"""Bandit environments, communication graphs and the shipped datasets.

``linear`` (the synthetic and real-data linear instances of Zhou & Chowdhury), ``mslr``
(the learning-to-rank sample and its rebuild), ``multi_armed`` (Bernoulli and Gaussian
K-armed bandits), ``graphs`` (communication graphs and consensus matrices), ``users``
(given users; a federated instance served one user at a time), ``digits`` (the federated
digits data) and ``factory`` (:func:`make_environment`, one configuration → one
environment).

The top level (``__all__``) exports what a user calls; every other public name is imported
from its module, e.g. ``from fedbandit.envs.graphs import consensus_matrix`` (ARCHITECTURE.md, *Public API*).
"""

import importlib

# --- the top level: what a user calls (ARCHITECTURE.md, "Public API"); every other public name
# is imported from its module (each module's __all__) ---
_EXPORTS = {
    "load_digits_federated": "digits",
    "make_environment": "factory",
    "register_environment": "factory",
    "unregister_environment": "factory",
    "available_environments": "factory",
    "environment_keys": "factory",
    "Graph": "graphs",
    "make_graph": "graphs",
    "RoundBlock": "linear",
    "SyntheticLinearEnv": "linear",
    "RealDataLinearEnv": "linear",
    "load_mslr_instance": "mslr",
    "load_ranker_table": "recommendation",
    "ranker_bandit": "recommendation",
    "UsersEnv": "users",
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

"""Bandit learners of the book.

* :mod:`fedbandit.learners.linucb` -- the LinUCB core (Abbasi-Yadkori, Pál & Szepesvári
  2011), vectorized over (runs, agents): regularized inverse Gram matrices kept by
  Sherman–Morrison updates, optimistic scores and the arg-max over arms.  Shared by every
  federated linear learner.
* :mod:`fedbandit.learners.fixed_batch` -- Algorithm 1 of Zhou & Chowdhury (2023):
  fixed-batch federated LinUCB with a pluggable privacy protocol
  (:mod:`fedbandit.protocols`), and its baselines (central-DP super agent, independent
  agents).
* :mod:`fedbandit.learners.dp20` -- DP20's FedUCB (Dubey & Pentland 2020).
* :mod:`fedbandit.learners.consensus` -- federated private UCB with consensus
  (Li, Song & Fragouli 2022).
* :mod:`fedbandit.learners.concurrent_linucb` -- LinUCB in the concurrent shuffle model
  (Tenenbaum, Kaplan, Mansour & Stemmer 2023).

The top level (``__all__``) exports what a user calls; every other public name is imported
from its module, e.g. ``from fedbandit.learners.linucb import select_arms`` (ARCHITECTURE.md, *Public API*).
"""

import importlib

# --- the top level: what a user calls (ARCHITECTURE.md, "Public API"); every other public name
# is imported from its module (each module's __all__) ---
_EXPORTS = {
    "ConcurrentShuffleLinUCB": "concurrent_linucb",
    "MasterWorkerUCB": "consensus",
    "DecentralizedUCB": "consensus",
    "IndependentUCB": "consensus",
    "CentralizedUCB": "consensus",
    "FedUCB": "dp20",
    "FederatedLearner": "federated",
    "FixedBatchFedLinUCB": "fixed_batch",
    "IndependentLinUCB": "fixed_batch",
    "SuperAgent": "fixed_batch",
    "register_learner": "registry",
    "unregister_learner": "registry",
    "learner_class": "registry",
    "available_learners": "registry",
    "RunResult": "result",
    "CommunicationRecord": "result",
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

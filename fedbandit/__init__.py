"""fedbandit: differentially private federated bandits, the package behind the book.

Subpackages, by concept (imported on first access, so ``import fedbandit`` stays cheap):

- :mod:`fedbandit.accounting`: privacy events, accountants and every noise calibration rule
- :mod:`fedbandit.mechanisms`: the noise-adding primitives (tree, Gaussian, discrete Gaussian, ...)
- :mod:`fedbandit.protocols`: privacy protocols P = (R, S, A) and their registry
- :mod:`fedbandit.secagg`: the secure-aggregation protocol (Bonawitz et al. 2017)
- :mod:`fedbandit.learners`: the bandit and federated learners, each taking ``protocol=``
- :mod:`fedbandit.envs`: bandit environments, communication graphs and shipped datasets
- :mod:`fedbandit.theory`: the bounds the chapters plot
- :mod:`fedbandit.audit`: empirical lower bounds on ε (attacks)
- :mod:`fedbandit.experiments`: the grid runner with its cache, the synthesis, statistics helpers
- :mod:`fedbandit.integrations`: the mechanisms in deployment frameworks (Flower; optional ``flwr``)
- :mod:`fedbandit.book`: the scale knob, the figure style and the Sphinx extension
"""

from __future__ import annotations

import importlib

__version__ = "0.2.0"

_SUBPACKAGES = {
    "accounting",
    "audit",
    "book",
    "envs",
    "experiments",
    "integrations",
    "learners",
    "mechanisms",
    "protocols",
    "secagg",
    "theory",
}


def __getattr__(name: str):
    if name in _SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _SUBPACKAGES)

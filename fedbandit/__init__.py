"""fedbandit: differentially private federated bandits, the package behind the book.

Submodules (imported on first access, so ``import fedbandit`` stays cheap):

- :mod:`fedbandit.accounting`: zCDP / RDP / (ε, δ) conversions and Gaussian calibration
- :mod:`fedbandit.mechanisms`: tree (binary) mechanism and the other privacy mechanisms
- :mod:`fedbandit.experiments`: grid × seeds runner with an on-disk cache (serial, joblib, Dask)
- :mod:`fedbandit.config`: the ``FEDBANDIT_SCALE`` knob
- :mod:`fedbandit.plotting`: the book's figure style
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_SUBMODULES = {
    "accounting",
    "amplification",
    "audit",
    "config",
    "continual",
    "datasets",
    "ddg_accounting",
    "dp20_audit",
    "envs",
    "envs_mab",
    "experiments",
    "graphs",
    "learners",
    "mechanisms",
    "plotting",
    "protocols",
    "secagg",
    "shuffle",
    "theory_consensus",
    "theory_linear",
    "theory_psco",
}


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in {"run_grid", "make_rng"}:
        return getattr(importlib.import_module(f"{__name__}.experiments"), name)
    if name == "get_scale":
        return importlib.import_module(f"{__name__}.config").get_scale
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _SUBMODULES | {"run_grid", "make_rng", "get_scale"})

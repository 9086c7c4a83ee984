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

The top level (``__all__``) exports what a user calls; every other public name is imported
from its module, e.g. ``from fedbandit.accounting.ddg import ddg_params`` (ARCHITECTURE.md, *Public API*).
"""

import importlib
from typing import Any

# --- the top level: what a user calls (ARCHITECTURE.md, "Public API"); every other public name
# is imported from its module (each module's __all__) ---
_EXPORTS = {
    "Accounting": "accountant",
    "account": "accountant",
    "AmplificationValidityError": "amplification",
    "AmplificationValidityWarning": "amplification",
    "RELATIONS": "events",
    "DpEvent": "events",
    "NonPrivateEvent": "events",
    "GaussianEvent": "events",
    "LaplaceEvent": "events",
    "SelfComposedEvent": "events",
    "ComposedEvent": "events",
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

"""The distributed discrete Gaussian (Kairouz, Liu & Steinke 2021) in Flower 1.42.

* :mod:`fedbandit.integrations.flower.setting` -- the public setting every party agrees
  on (:class:`DDGSetting`, calibrated by this package's ``sum-ddg-secagg``), Flower's
  identity quantiser, and the checks that refuse a bad configuration before any round
  (no ``flwr`` needed);
* :mod:`fedbandit.integrations.flower.digits` -- chapter 5's digits clients (local training
  and test accuracy) as a Flower federation runs them (no ``flwr`` needed);
* :mod:`fedbandit.integrations.flower.apps` -- the client mod (:func:`ddg_mod`), the server
  workflow (:class:`DDGSecAggPlusWorkflow`), the strategy (:class:`DDGFedAvgM`) and the
  simulation runner (:func:`run_ddg_simulation`); importing them needs ``flwr``
  (``pip install 'fedbandit[flower]'``).
"""

import importlib

# --- re-exports (generated from each module's __all__) ---
_EXPORTS = {
    "FLOWER_MAX_BITS": "setting",
    "DDGSetting": "setting",
    "flower_quantization": "setting",
    "residues_to_flower": "setting",
    "modular_sum_from_flower": "setting",
    "check_secagg_threshold": "setting",
    "check_flower_modulus": "setting",
    "check_expected_calibration": "setting",
    "check_round_config": "setting",
    "ddg_mod": "apps",
    "DDGSecAggPlusWorkflow": "apps",
    "DDGFedAvgM": "apps",
    "RoundRecord": "apps",
    "DigitsClients": "digits",
    "run_ddg_simulation": "apps",
    "flower_digits_trial": "apps",
}

__all__ = list(_EXPORTS)


def __getattr__(name):
    # Public names are imported from their module on first use (PEP 562): the setting and
    # its checks work without flwr; the Flower apps import it.
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))

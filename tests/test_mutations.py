"""The tests that guard against known bugs fail on those bugs (mutation tests, run in process).

Each mutation is a one-line change to the source of a module (issue 14: bugs that once
passed every unit test).  The mutated function or method is compiled from its edited source and
replaces the original (on its class, or in every module that references it) for the
duration of one test; the guarding tests must then fail:

* (a) the confidence radius with the sign of its noise term flipped (both rules, and
  FedUCB's own β_t);
* (b) the amplification validity threshold 16 ln(4/δ) changed to 16 ln(1/δ) (the
  Zhou–Chowdhury condition and the FMT22 closed form's);
* (c) the shuffler's permutation replaced by the identity (vectorized and message level),
  which the once-vacuous ``assert not np.array_equal(sa, a) or True`` could not catch;
* (d) issue 21: a SecAgg client that no longer refuses a U_2 smaller than t itself (a
  malicious server's short inbox then exposes its input), and the privacy-blanket bound
  binned at the right bin edges (δ about 0.3-0.8 % too small at m = 10⁶).

Every mutation is also checked to leave the guards passing when it is not applied.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import test_calibration_formulas as formulas  # noqa: E402
import test_protocol_contract as contract  # noqa: E402
import test_protocols as protocols_tests  # noqa: E402
import test_secagg_attacks as secagg_attacks  # noqa: E402
import test_shuffle as shuffle_tests  # noqa: E402


def _install(monkeypatch, module_name: str, qualname: str, old: str, new: str) -> None:
    """Replace the function or method ``module_name.qualname`` by one compiled from its edited source.

    A method is replaced on its class (every instance sees it); a module-level function in
    every module that references it (``from ... import`` copies included).
    """
    mod = importlib.import_module(module_name)
    owner, name = mod, qualname
    if "." in qualname:
        cls_name, name = qualname.split(".")
        owner = getattr(mod, cls_name)
    original = inspect.getattr_static(owner, name)
    func = original.__func__ if isinstance(original, (staticmethod, classmethod)) else original
    src = textwrap.dedent(inspect.getsource(func))
    assert src.count(old) == 1, f"mutation target not found exactly once in {module_name}.{qualname}: {old!r}"
    namespace = dict(mod.__dict__)
    exec(compile(src.replace(old, new), mod.__file__, "exec"), namespace)
    mutated = namespace[name]  # (re-decorated by its own source, e.g. @staticmethod)
    if owner is not mod:
        monkeypatch.setattr(owner, name, mutated)
    plain = mutated.__func__ if isinstance(mutated, (staticmethod, classmethod)) else mutated
    for m in list(sys.modules.values()):  # every alias of the function (module globals, `x = Cls.method`)
        d = getattr(m, "__dict__", None)
        if isinstance(d, dict):
            for attr, value in list(d.items()):
                if value is original or value is func:
                    monkeypatch.setattr(m, attr, mutated if value is original else plain)


def _fails(test, *args, **kwargs) -> bool:
    try:
        test(*args, **kwargs)
    except AssertionError:
        return True
    return False


MUTATIONS = {
    "radius-authors": ("fedbandit.theory.linear", "confidence_radius",
                       "beta = math.sqrt(lam) * S + noise_std * np.sqrt(log_det + math.log(1.0 / alpha))",
                       "beta = math.sqrt(lam) * S - noise_std * np.sqrt(log_det + math.log(1.0 / alpha))",
                       [lambda: formulas.test_confidence_radius_is_the_formula(formulas.RADIUS_CASES[1], "authors",
                                                                               formulas.beta_authors),
                        lambda: formulas.test_confidence_radius_grows_with_the_reward_noise("authors"),
                        formulas.test_fixed_batch_learner_lambda_beta_and_sigma0_are_the_formulas]),
    "radius-paper": ("fedbandit.theory.linear", "confidence_radius",
                     "beta = noise_std * np.sqrt(2.0 * math.log(2.0 / alpha) + log_det) + math.sqrt(lam) * S",
                     "beta = -noise_std * np.sqrt(2.0 * math.log(2.0 / alpha) + log_det) + math.sqrt(lam) * S",
                     [lambda: formulas.test_confidence_radius_is_the_formula(formulas.RADIUS_CASES[1], "paper",
                                                                             formulas.beta_paper),
                      lambda: formulas.test_confidence_radius_grows_with_the_reward_noise("paper")]),
    "radius-dp20": ("fedbandit.learners.dp20", "FedUCB.beta",
                    "beta = self.beta_scale * (self.noise_bound * np.sqrt(inner) + self.param_bound",
                    "beta = self.beta_scale * (-self.noise_bound * np.sqrt(inner) + self.param_bound",
                    [formulas.test_dp20_learner_sigma_shift_and_beta_are_the_formulas]),
    "zc-validity-ln-1-over-delta": ("fedbandit.accounting.amplification", "zc_amplification_validity",
                                    "need = 16.0 * math.log(4.0 / delta)", "need = 16.0 * math.log(1.0 / delta)",
                                    [lambda: formulas.test_zhou_chowdhury_validity_threshold_is_16_ln_4_over_delta(1e-4)]),
    "fmt22-validity-ln-1-over-delta": ("fedbandit.accounting.amplification", "fmt22_closed_form_validity",
                                       "ratio = n / (16.0 * math.log(4.0 / delta))",
                                       "ratio = n / (16.0 * math.log(1.0 / delta))",
                                       [lambda: formulas.test_fmt22_closed_form_validity_is_epsilon0_below_ln_n_over_16_ln_4_over_delta(
                                           10_000, 1e-6)]),
    "shuffler-identity-permute": ("fedbandit.protocols.intermediaries", "Shuffler.permute",
                                  "perm = np.argsort(gen.random((R, M)), axis=1)",
                                  "perm = np.tile(np.arange(M), (R, 1)); gen.random((R, M))",
                                  [contract.test_shuffler_hides_the_sender,
                                   protocols_tests.test_shuffler_permutation_is_uniform]),
    "shuffler-identity-release": ("fedbandit.protocols.intermediaries", "Shuffler.release",
                                  "out = np.asarray(self._messages)[rng.permutation(self.batch_size)]",
                                  "out = np.asarray(self._messages); rng.permutation(self.batch_size)",
                                  [shuffle_tests.test_shuffler_release_is_uniform_permutation]),
    "secagg-client-accepts-short-u2": ("fedbandit.secagg.protocol", "SecAggClient.masked_input",
                                       "if len(u2) < self.threshold:", "if False:",
                                       [secagg_attacks.test_client_refuses_a_short_inbox_that_would_expose_its_input]),
    "blanket-right-bin-edges": ("fedbandit.accounting.shuffle", "_rr_shuffle_delta",
                                "h = _blanket_hockey(epsilon, edges[:-1].astype(float), p)",
                                "h = _blanket_hockey(epsilon, edges[1:].astype(float), p)",
                                [lambda: shuffle_tests.test_binned_blanket_delta_upper_bounds_the_unbinned_sum(
                                    10**6, 0.2, 0.00266)]),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_guards_pass_on_the_real_code(name):
    *_, guards = MUTATIONS[name]
    for guard in guards:
        assert not _fails(guard), f"guard {guard} fails without the mutation"


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_guards_catch_the_mutation(name, monkeypatch):
    module, qualname, old, new, guards = MUTATIONS[name]
    _install(monkeypatch, module, qualname, old, new)
    for guard in guards:
        assert _fails(guard), f"mutation {name!r} ({old!r} -> {new!r}) passes the guard {guard}"

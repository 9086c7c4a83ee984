"""Cross-checks of fedbandit.accounting.zcdp against Google's dp-accounting (relative 1e-6)."""

import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

from fedbandit.accounting import composition, zcdp

RTOL = 1e-6
RHOS = [1e-4, 1e-3, 0.01, 0.1, 0.5, 1.0, 5.0, 20.0]
DELTAS = [1e-10, 1e-6, 1e-5, 1e-3, 0.1]


def _dp_accounting_zcdp_eps(rho: float, delta: float) -> float:
    """dp-accounting's Prop. 12 conversion of the RDP curve ε(α) = ρα, minimised on a
    dense grid of orders around our optimum (the grid minimum converges to the
    infimum quadratically in the grid step)."""
    # locate the optimum coarsely with dp-accounting itself, then refine the grid
    coarse = np.exp(np.linspace(np.log(1.02), np.log(1e7), 20001))
    _, a0 = rdp_lib.compute_epsilon(coarse, coarse * rho, delta)
    fine = np.linspace(max(1.011, a0 * 0.99), a0 * 1.01, 20001)
    eps, _ = rdp_lib.compute_epsilon(fine, fine * rho, delta)
    return eps


@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("delta", DELTAS)
def test_zcdp_to_approx_dp_matches_dp_accounting(rho, delta):
    ours = zcdp.zcdp_to_approx_dp(rho, delta)
    theirs = _dp_accounting_zcdp_eps(rho, delta)
    assert ours == pytest.approx(theirs, rel=RTOL)
    # the simple bound is never better than the optimal conversion
    assert zcdp.zcdp_to_approx_dp(rho, delta, method="simple") >= ours


@pytest.mark.parametrize("delta", DELTAS)
@pytest.mark.parametrize("epsilon", [0.05, 0.5, 1.0, 4.0, 10.0])
def test_approx_dp_to_zcdp_inverts(epsilon, delta):
    rho = zcdp.approx_dp_to_zcdp(epsilon, delta)
    assert zcdp.zcdp_to_approx_dp(rho, delta) == pytest.approx(epsilon, rel=1e-9)
    assert _dp_accounting_zcdp_eps(rho, delta) == pytest.approx(epsilon, rel=RTOL)


@pytest.mark.parametrize("noise_multiplier", [0.5, 1.0, 3.0, 10.0])
@pytest.mark.parametrize("delta", [1e-6, 1e-3])
def test_rdp_to_approx_dp_matches_dp_accounting(noise_multiplier, delta):
    accountant = rdp_lib.RdpAccountant(orders=list(np.linspace(1.1, 200, 500)))
    accountant.compose(dp_event.GaussianDpEvent(noise_multiplier), count=7)
    orders = np.asarray(accountant._orders)
    rdp = 7 * orders / (2 * noise_multiplier**2)
    assert zcdp.rdp_to_approx_dp(orders, rdp, delta) == pytest.approx(accountant.get_epsilon(delta), rel=RTOL)
    classic = zcdp.rdp_to_approx_dp(orders, rdp, delta, method="classic")
    assert classic >= zcdp.rdp_to_approx_dp(orders, rdp, delta)
    assert classic == pytest.approx(np.min(rdp + math.log(1 / delta) / (orders - 1)), rel=1e-12)


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 5.0])
@pytest.mark.parametrize("delta", [1e-6, 1e-4])
@pytest.mark.parametrize("k", [1, 10, 400])
@pytest.mark.parametrize("sensitivity", [1.0, 2.5])
def test_calibrated_gaussian_matches_dp_accounting(epsilon, delta, k, sensitivity):
    sigma = zcdp.calibrate_gaussian_sigma(epsilon, delta, sensitivity, n_compositions=k)
    # dp-accounting's RDP accountant, Gaussian events at noise multiplier σ/Δ, with a
    # dense order grid around the optimum
    rho = k * sensitivity**2 / (2 * sigma**2)
    assert zcdp.gaussian_zcdp(sensitivity, sigma) * k == pytest.approx(rho)
    coarse = np.exp(np.linspace(np.log(1.02), np.log(1e7), 20001))
    _, a0 = rdp_lib.compute_epsilon(coarse, coarse * rho, delta)
    orders = list(np.linspace(max(1.011, a0 * 0.99), a0 * 1.01, 4001))
    accountant = rdp_lib.RdpAccountant(orders=orders)
    accountant.compose(dp_event.GaussianDpEvent(sigma / sensitivity), count=k)
    assert accountant.get_epsilon(delta) == pytest.approx(epsilon, rel=RTOL)


def test_zcdp_basics():
    assert zcdp.gaussian_zcdp(1.0, 1.0) == 0.5
    assert zcdp.compose_zcdp(0.1, 0.2, 0.3) == pytest.approx(0.6)
    assert zcdp.gaussian_sigma_for_zcdp(0.5, 1.0) == pytest.approx(1.0)
    assert zcdp.zcdp_to_approx_dp(0.0, 1e-5) == 0.0


def test_advanced_composition_and_split():
    eps, delta = composition.advanced_composition(0.1, 1e-6, 10, 1e-6)
    assert eps == pytest.approx(math.sqrt(20 * math.log(1e6)) * 0.1 + 10 * 0.1 * math.expm1(0.1))
    assert delta == pytest.approx(1.1e-5)
    for k in [1, 5, 50, 5000]:
        e0, d0 = composition.split_budget_advanced(1.0, 1e-5, k)
        if d0 == pytest.approx(1e-5 / k):  # basic composition chosen
            assert e0 * k == pytest.approx(1.0)
        else:
            total, dtot = composition.advanced_composition(e0, d0, k, 1e-5 / 2)
            assert total == pytest.approx(1.0, rel=1e-9) and dtot == pytest.approx(1e-5)
        assert e0 >= 1.0 / k - 1e-15
    # for many compositions advanced composition wins
    assert composition.split_budget_advanced(1.0, 1e-5, 5000)[0] > 1.0 / 5000


def test_advanced_composition_of_huge_epsilon_is_infinite():
    assert composition.advanced_composition(800.0, 0.0, 3, 1e-6)[0] == math.inf
    e0, _ = composition.split_budget_advanced(5000.0, 1e-5, 3)
    assert e0 == pytest.approx(5000.0 / 3)  # basic composition wins there


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: zcdp.zcdp_to_approx_dp(-1.0, 1e-5), "rho"),
        (lambda: zcdp.zcdp_to_approx_dp(1.0, 0.0), "delta"),
        (lambda: zcdp.zcdp_to_approx_dp(1.0, 1.5), "delta"),
        (lambda: zcdp.zcdp_to_approx_dp(1.0, 1e-5, method="bogus"), "method"),
        (lambda: zcdp.approx_dp_to_zcdp(0.0, 1e-5), "epsilon"),
        (lambda: zcdp.calibrate_gaussian_sigma(1.0, 1e-5, n_compositions=0), "n_compositions"),
        (lambda: zcdp.calibrate_gaussian_sigma(1.0, 1e-5, sensitivity=-2), "sensitivity"),
        (lambda: zcdp.gaussian_zcdp(1.0, 0.0), "sigma"),
        (lambda: zcdp.rdp_to_approx_dp([0.5, 2.0], [1.0, 1.0], 1e-5), "orders"),
        (lambda: zcdp.rdp_to_approx_dp([2.0, 3.0], [1.0], 1e-5), "rdp"),
        (lambda: composition.split_budget_advanced(1.0, 1e-5, 2.5), "k"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_bool_is_not_an_integer():
    with pytest.raises(TypeError, match="n_compositions"):
        zcdp.calibrate_gaussian_sigma(1.0, 1e-5, n_compositions=True)

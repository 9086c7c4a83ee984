"""Tests of the DDG pipeline (fedbandit.mechanisms.ddg), its accounting (fedbandit.accounting.ddg)
and the analytic Gaussian baseline (fedbandit.mechanisms.gaussian).

Statistical tests use fixed seeds; each has a false-alarm rate below 1e-3 (stated).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reference_ddg as ref
from fedbandit.accounting.ddg import (
    ddg_delta2,
    ddg_epsilon,
    ddg_params,
    ddg_params_from_gamma,
    ddg_rdp,
    ddg_sigma_for_epsilon,
    ddg_tau,
    ddg_zcdp_epsilon,
    single_dg_sum_epsilon,
    sum_closeness_bound,
)
from fedbandit.accounting.gaussian import analytic_gaussian_delta, analytic_gaussian_epsilon, analytic_gaussian_sigma
from fedbandit.mechanisms.ddg import DDGMechanism, conditional_randomized_round, ddg_noisy_sum, modular_clip
from fedbandit.mechanisms.discrete_gaussian import sample_discrete_gaussian

BETA = math.exp(-0.5)


def _unit_vectors(rng, n, d, c):
    x = rng.normal(size=(n, d))
    return c * x / np.linalg.norm(x, axis=-1, keepdims=True)


# ---------------------------------------------------------------- accounting
def test_paper_example_prop13():
    """[KLS21]: sigma = Delta = 1, n = 1e4 gives epsilon < 0.02."""
    assert single_dg_sum_epsilon(1.0, 1.0, 10_000) < 0.02


def test_paper_example_theorem11():
    """[KLS21]: sigma^2 = tau^2 = 3 gives a max-divergence bound <= 1e-12."""
    assert sum_closeness_bound(3.0, 3.0) <= 1e-12
    with pytest.raises(ValueError, match="<= 8"):
        sum_closeness_bound(0.1, 0.1)


def test_tau_and_delta2():
    assert ddg_tau(5.0, 1) == 0.0
    assert ddg_tau(0.5, 100) > ddg_tau(1.0, 100) > 0
    # beta = 0: worst case c + gamma sqrt(d); beta > 0 is never larger
    assert ddg_delta2(1.0, 0.1, 100, 0.0) == pytest.approx(2.0)
    assert ddg_delta2(1.0, 0.1, 100, BETA) <= 2.0
    assert ddg_delta2(1.0, 1e-9, 100, BETA) == pytest.approx(1.0, rel=1e-6)


def test_rdp_is_at_most_the_zcdp_form():
    orders = np.array([1.5, 2.0, 10.0, 100.0])
    d2, s, g, n, d = 10.0, 3.0, 1.0, 50, 256
    rdp = ddg_rdp(orders, d2, s, g, n, d)
    eps = ddg_zcdp_epsilon(d2, s, g, n, d)
    assert np.all(rdp <= orders * eps**2 / 2 + 1e-12)


@pytest.mark.parametrize("method", ["rdp", "zcdp"])
def test_sigma_for_epsilon_inverts_epsilon(method):
    kw = dict(c=10.0, gamma=0.05, beta=BETA, n=100, d=256, delta=1e-5, method=method)
    for eps in [0.75, 2.0, 6.0]:
        s = ddg_sigma_for_epsilon(eps, **kw)
        assert ddg_epsilon(s, **kw) == pytest.approx(eps, rel=1e-6)
    # fewer honest clients (dropouts) -> larger epsilon at fixed noise
    s = ddg_sigma_for_epsilon(1.0, **kw)
    kw2 = dict(kw, n=60)
    assert ddg_epsilon(s, **kw2) > 1.0


def test_analytic_gaussian_known_value_and_inverse():
    # Balle & Wang: eps = 1, delta = 1e-5, Delta = 1 needs sigma ~ 3.73 (classic bound gives 4.84)
    s = analytic_gaussian_sigma(1.0, 1e-5, 1.0)
    assert 3.70 < s < 3.76
    assert analytic_gaussian_delta(1.0, s, 1.0) == pytest.approx(1e-5, rel=1e-6)
    assert analytic_gaussian_epsilon(s, 1e-5, 1.0) == pytest.approx(1.0, rel=1e-8)
    assert analytic_gaussian_sigma(1.0, 1e-5, 10.0) == pytest.approx(10 * s, rel=1e-8)


def test_analytic_gaussian_beats_zcdp_calibration():
    from fedbandit.accounting.zcdp import calibrate_gaussian_sigma

    for eps in [0.5, 1.0, 4.0]:
        assert analytic_gaussian_sigma(eps, 1e-5, 1.0) < calibrate_gaussian_sigma(eps, 1e-5, 1.0)


# ---------------------------------------------------------------- parameter selection
@pytest.mark.parametrize("growth", ["conservative", "optimistic"])
def test_gamma_solves_the_modular_range_equation(growth):
    p = ddg_params(14, 3, 100, 250, 10.0, 2.0, 1e-5, BETA, norm_growth=growth)
    n_f = 100**2 if growth == "conservative" else 100
    rhs = 2 * 3 * math.sqrt(10.0**2 * n_f / 256 + (p.gamma**2 / 4 + p.sigma**2) * 100)
    assert 2**14 * p.gamma == pytest.approx(rhs, rel=1e-8)
    assert p.epsilon_for(100) == pytest.approx(2.0, rel=1e-6)
    assert p.d_pad == 256
    assert p.delta2 == pytest.approx(ddg_delta2(10.0, p.gamma, 256, BETA))


def test_more_bits_finer_grid():
    g = [ddg_params(b, 2, 100, 250, 10.0, 1.0, 1e-5).gamma for b in (10, 12, 14)]
    assert g[0] > g[1] > g[2]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(bits=1), "bits"),
        (dict(bits=2.5), "bits"),
        (dict(k=0.0), "k"),
        (dict(k=-1.0), "k"),
        (dict(bits=4, n=1000, k=2.0), "2\\^\\(2\\*bits\\)"),
        (dict(c=0.0), "c must"),
        (dict(c=-3.0), "c must"),
        (dict(beta=1.0), "beta"),
        (dict(beta=-0.1), "beta"),
        (dict(epsilon=0.0), "epsilon"),
        (dict(delta=1.5), "delta"),
        (dict(d=0), "d must"),
    ],
)
def test_bad_parameters(kwargs, match):
    base = dict(bits=12, k=2.0, n=100, d=250, c=10.0, epsilon=1.0, delta=1e-5, beta=BETA)
    base.update(kwargs)
    with pytest.raises((ValueError, TypeError), match=match):
        ddg_params(**base)


def test_wrong_dimension_rejected():
    p = ddg_params(12, 2, 10, 20, 1.0, 1.0, 1e-5)
    mech = DDGMechanism(p, 0)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="length d=20"):
        mech.noisy_sum(np.zeros((10, 21)), rng)
    with pytest.raises(ValueError, match="length d=20"):
        mech.encode(np.zeros((10, 19)), rng)
    with pytest.raises(ValueError, match="d_pad=32"):
        mech.decode(np.zeros(20, dtype=np.int64))
    with pytest.raises(ValueError, match="finite"):
        mech.encode(np.full((2, 20), np.nan), rng)


# ---------------------------------------------------------------- pipeline
def test_vectorized_encode_decode_match_the_loop_reference():
    """Same random draws -> the vectorized pipeline equals the line-by-line reference."""
    p = ddg_params_from_gamma(12, gamma=0.05, sigma=0.2, n=4, d=13, c=1.0, delta=1e-5, beta=0.0)
    mech = DDGMechanism(p, 42)
    rng_data = np.random.default_rng(1)
    x = rng_data.normal(size=(4, 13))
    x[0] *= 5  # gets clipped
    res = mech.encode(x, np.random.default_rng(99))
    # replay the draws: rounding coins first, then the discrete Gaussian noise
    replay = np.random.default_rng(99)
    coins = replay.random((4, p.d_pad))
    noise = sample_discrete_gaussian(p.sigma_int, (4, p.d_pad), replay)
    for i in range(4):
        assert list(res[i]) == ref.encode_one(list(x[i]), p, mech.flattener.signs, coins[i], noise[i])
    total = mech.aggregate(res)
    np.testing.assert_allclose(mech.decode(total), ref.decode(list(total), p, mech.flattener.signs), atol=1e-9)


@pytest.mark.parametrize("bits", [2, 3, 10, 16, 31, 62])
def test_encode_residues_are_np_mod_of_the_noised_vectors(bits):
    """The residues (the low B bits of the int64 noised vector) are np.mod(noised, 2^B), for
    negative entries and entries beyond the modulus too."""
    p = ddg_params_from_gamma(bits, gamma=0.05, sigma=2.0, n=6, d=13, c=1.0, delta=1e-5, beta=0.0)
    res, st_ = DDGMechanism(p, 3).encode(np.random.default_rng(2).normal(size=(6, 13)), np.random.default_rng(5),
                                         stages=True)
    noised = st_["noised"]
    assert (noised < 0).any() and (bits > 4 or (noised >= p.modulus).any())
    assert res.dtype == np.int64 and np.array_equal(res, np.mod(noised, p.modulus))


def _plain_conditional_round(z, bound, rng):
    """Conditional rounding as first written: floors kept aside, a fresh array per step."""
    flat = z.reshape(-1, z.shape[-1])
    fl = np.floor(flat)
    frac = flat - fl
    base = fl.astype(np.int64)
    out = base + (rng.random(flat.shape) < frac)
    limit = math.floor(bound * bound * (1.0 - 1e-12))
    todo = np.flatnonzero(np.einsum("ij,ij->i", out, out) > limit)
    while todo.size:
        redo = base[todo] + (rng.random((todo.size, flat.shape[1])) < frac[todo])
        out[todo] = redo
        todo = todo[np.einsum("ij,ij->i", redo, redo) > limit]
    return out.reshape(z.shape)


@pytest.mark.parametrize("tight", [False, True])
def test_conditional_rounding_draws_what_the_plain_loop_draws(tight):
    """In-place rounding (uniforms written over the floors, floors recomputed for the redone rows)
    gives the plain loop's vectors and leaves the generator in the same state, with and without redos."""
    z = np.random.default_rng(6).normal(size=(3, 500, 16))
    z *= 12.0 / np.linalg.norm(z, axis=-1, keepdims=True)  # every vector of norm 12: about half are redone when tight
    bound = 12.5 if tight else 12.0 + 4.0
    r_fast, r_plain = np.random.default_rng(8), np.random.default_rng(8)
    got = conditional_randomized_round(z, bound, r_fast)
    want = _plain_conditional_round(z, bound, r_plain)
    assert got.dtype == np.int64 and np.array_equal(got, want)
    assert r_fast.bit_generator.state == r_plain.bit_generator.state
    with pytest.raises(ValueError, match="2\\^52"):
        conditional_randomized_round(np.array([1.0, -(2.0**53)]), 1e20, r_fast)


def test_conditional_rounding_is_unbiased_and_bounded():
    """Unconditional rounding (worst-case bound) is unbiased within 5 s.e. (false alarm < 1e-5);
    a tight bound is always met (at the price of a bias toward small norms)."""
    rng = np.random.default_rng(4)
    z = np.tile(np.array([0.3, -1.7, 2.5, 0.0, 4.9]), (20_000, 1))
    worst = np.linalg.norm(z[0]) + math.sqrt(5)
    r = conditional_randomized_round(z, worst, rng)
    assert r.dtype == np.int64
    frac = z[0] - np.floor(z[0])
    se = np.sqrt(frac * (1 - frac) / 20_000) + 1e-12
    assert np.all(np.abs(r.mean(0) - z[0]) < 5 * se)
    tight = math.sqrt(np.sum(z[0] ** 2) + 0.5)
    r = conditional_randomized_round(z, tight, rng)
    assert np.all(np.sum(r.astype(float) ** 2, axis=1) <= tight**2)


@settings(max_examples=50, deadline=None)
@given(bits=st.integers(2, 20), vals=st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=20))
def test_modular_clip_is_the_centred_residue(bits, vals):
    m = 1 << bits
    out = modular_clip(np.array(vals) % m, m)
    assert np.all((out >= -m // 2) & (out < m // 2))
    assert np.all((out - np.array(vals)) % m == 0)


def test_noisy_sum_accuracy_matches_theory():
    """Per-coordinate squared error of the decoded sum ~ n sigma^2 + rounding (false alarm < 1e-3).

    With 16 bits and k = 4 wrap-around has probability ~1e-4 per coordinate; the mean
    squared error over 30 x 256 coordinates is within 15% of n sigma^2 + n gamma^2 / 4
    (upper) and above n sigma^2 * 0.85 (lower).
    """
    rng = np.random.default_rng(6)
    n, d, c = 50, 256, 1.0
    p = ddg_params(16, 4, n, d, c, 2.0, 1e-5, BETA)
    x = _unit_vectors(rng, n, d, c)
    est = DDGMechanism(p, 1).noisy_sum(np.broadcast_to(x, (30, n, d)), rng)
    assert est.shape == (30, d)
    err = np.mean((est - x.sum(0)) ** 2)
    assert 0.85 * n * p.sigma**2 < err < 1.15 * (n * p.sigma**2 + n * p.gamma**2 / 4)
    assert abs(np.mean(est - x.sum(0))) < 5 * math.sqrt(err / est.size)


def test_few_bits_optimistic_bound_wraps_around():
    rng = np.random.default_rng(8)
    n, d, c = 100, 64, 1.0
    x = np.tile(np.full(d, c / math.sqrt(d)), (n, 1))  # all clients agree: norm of the sum = n c
    p = ddg_params(12, 1, n, d, c, 4.0, 1e-5, BETA, norm_growth="optimistic")
    assert DDGMechanism(p, 0).wrap_fraction(x, rng) > 0.1
    p2 = ddg_params(12, 5, n, d, c, 4.0, 1e-5, BETA, norm_growth="conservative")
    assert DDGMechanism(p2, 0).wrap_fraction(x, rng) == 0.0


def test_functional_form_and_dft_variant():
    rng = np.random.default_rng(3)
    x = _unit_vectors(rng, 20, 30, 1.0)
    p = ddg_params(16, 3, 20, 30, 1.0, 4.0, 1e-5, flatten="dft")
    assert p.d_pad == 30
    est = ddg_noisy_sum(x, p, rng, flatten_seed=5)
    assert est.shape == (30,)
    assert np.mean((est - x.sum(0)) ** 2) < 3 * (20 * p.sigma**2 + 20 * p.gamma**2)


def test_calibration_shortcut_equals_ddg_epsilon():
    # ddg_sigma_for_epsilon's root finding evaluates ε(σ) through a copy of ddg_epsilon's arithmetic with the
    # σ-free terms precomputed; it must give ddg_epsilon's value bit for bit, or the calibration drifts silently.
    from fedbandit.accounting.ddg import _FixedRoundsEpsilon, ddg_epsilon

    for c, gamma, beta, n, d, delta, steps in ((1.0, 1e-3, 0.0, 100, 64, 1e-5, 1), (0.5, 2e-3, 0.3, 20, 1024, 1e-6, 50)):
        shortcut = _FixedRoundsEpsilon(c=c, gamma=gamma, beta=beta, n=n, d=d, delta=delta, steps=steps)
        for sigma in (1e-3, 0.01, 0.1, 1.0, 10.0):
            want = ddg_epsilon(sigma, c=c, gamma=gamma, beta=beta, n=n, d=d, delta=delta, steps=steps)
            assert shortcut(sigma) == want, (sigma, shortcut(sigma), want)

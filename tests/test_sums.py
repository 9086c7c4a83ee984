"""The sum protocols (fedbandit.protocols.sums): composition, lifecycle, draws, noise and accounting."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fedbandit.accounting.accountant import account
from fedbandit.accounting.ddg import ddg_epsilon, ddg_params
from fedbandit.accounting.gaussian import (
    analytic_gaussian_epsilon,
    analytic_gaussian_sigma,
)
from fedbandit.accounting.zcdp import calibrate_gaussian_sigma
from fedbandit.experiments.trials import dme_trial
from fedbandit.mechanisms.ddg import DDGMechanism, clip_l2
from fedbandit.protocols.base import ProtocolStateError
from fedbandit.protocols.intermediaries import Identity, SecureAggregation, Shuffler
from fedbandit.protocols.registry import available, create, describe
from fedbandit.protocols.sums import (
    ClippedVectors,
    DDGDecoder,
    DDGVectors,
    ExactVectors,
    GaussianSum,
    PlainSum,
    SumProtocol,
)

BETA = math.exp(-0.5)
SUMS = ("sum-non-private", "sum-central-gaussian", "sum-binomial-secagg", "sum-ddg-secagg")


def _vectors(rng, shape, c=1.0):
    x = rng.normal(size=shape)
    return x * (c / np.linalg.norm(x, axis=-1, keepdims=True)) * rng.uniform(0.2, 1.0, size=shape[:-1] + (1,))


def _make(name, n=20, d=30, T=3, c=1.0, **kw):
    params = {} if name == "sum-non-private" else dict(epsilon=2.0, delta=1e-5)
    params.update(kw)
    return create(name, **params).configure(n_parties=n, dim=d, n_rounds=T, clip=c)


def test_registry_lists_the_sum_protocols():
    assert available(kind="sum") == SUMS
    for name in SUMS:
        assert describe(name).kind == "sum"
        assert create(name, **({} if name == "sum-non-private" else dict(epsilon=1.0, delta=1e-5))).kind == "sum"


@pytest.mark.parametrize(
    "parts, match",
    [
        ((DDGVectors(), Identity(), DDGDecoder()), "ddg-vectors.*identity"),
        ((DDGVectors(), Shuffler(), DDGDecoder()), "ddg-vectors.*shuffler"),
        ((ClippedVectors(), SecureAggregation("real"), GaussianSum()), "clipped-vectors.*secure-aggregation"),
        ((ExactVectors(), Identity(), GaussianSum()), "gaussian-sum.*exact-vectors"),
        ((DDGVectors(), SecureAggregation(), PlainSum()), "ddg-vectors.*plain-sum"),
        ((ClippedVectors(), Identity(), DDGDecoder()), "clipped-vectors.*ddg-decoder"),
    ],
)
def test_invalid_compositions_are_refused_naming_both_parts(parts, match):
    with pytest.raises(ValueError, match=match):
        SumProtocol(*parts, name="x", epsilon=1.0, delta=1e-5)


def test_private_flags_must_match_the_parts():
    with pytest.raises(ValueError, match="not private"):
        SumProtocol(ExactVectors(), Identity(), PlainSum(), name="x", epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="needs a target"):
        SumProtocol(ClippedVectors(), Identity(), GaussianSum(), name="x")


@pytest.mark.parametrize(
    "name, kw, match",
    [
        ("sum-ddg-secagg", dict(bits=1), "bits"),
        ("sum-ddg-secagg", dict(bits="auto", method="zcdp"), "method"),
        ("sum-ddg-secagg", dict(k=0.0), "k"),
        ("sum-ddg-secagg", dict(rounding_beta=1.0), "beta"),
        ("sum-ddg-secagg", dict(secure_aggregation="fake"), "mode"),
        ("sum-central-gaussian", dict(calibration="paper"), "calibration"),
        ("sum-central-gaussian", dict(relation="swap"), "relation"),
        ("sum-central-gaussian", dict(epsilon=-1.0), "epsilon"),
    ],
)
def test_bad_parameters_name_the_parameter(name, kw, match):
    params = dict(epsilon=1.0, delta=1e-5)
    params.update(kw)
    with pytest.raises((ValueError, TypeError), match=match):
        create(name, **params)


def test_configure_checks_the_setting():
    p = create("sum-central-gaussian", epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="clip"):
        p.configure(n_parties=10, dim=5, n_rounds=2)
    with pytest.raises(ValueError, match="n_parties"):
        p.configure(n_parties=0, dim=5, n_rounds=2, clip=1.0)
    with pytest.raises(ValueError, match="clip"):
        p.configure(n_parties=10, dim=5, n_rounds=2, clip=-1.0)
    with pytest.raises(ValueError, match="clip"):
        create("sum-ddg-secagg", epsilon=1.0, delta=1e-5).configure(n_parties=10, dim=5, n_rounds=2)
    with pytest.raises(ValueError, match="n_parties >= 2"):
        create("sum-ddg-secagg", epsilon=1.0, delta=1e-5, secure_aggregation="real").configure(
            n_parties=1, dim=5, clip=1.0)
    with pytest.raises(ValueError, match="no valid gamma"):
        create("sum-ddg-secagg", epsilon=1.0, delta=1e-5, bits=4).configure(n_parties=1000, dim=5, clip=1.0)


@pytest.mark.parametrize("name", SUMS)
def test_lifecycle_and_shapes(name):
    p = _make(name, n=5, d=4, T=2)
    with pytest.raises(ProtocolStateError):
        p.aggregate(np.zeros((5, 4)))
    p.reset(n_runs=1, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="shape"):
        p.aggregate(np.zeros((4, 4)))
    with pytest.raises(ValueError, match="finite"):
        p.aggregate(np.full((5, 4), np.nan))
    assert p.aggregate(np.zeros((5, 4))).shape == (4,)
    assert p.aggregate(np.zeros((1, 5, 4))).shape == (1, 4)
    with pytest.raises(ValueError, match="n_rounds=2"):
        p.aggregate(np.zeros((5, 4)))
    p.reset(n_runs=3, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="n_runs=1"):
        p.aggregate(np.zeros((5, 4)))
    assert p.aggregate(np.zeros((3, 5, 4))).shape == (3, 4)


def test_non_private_sum_is_exact_and_unclipped():
    rng = np.random.default_rng(1)
    x = 5.0 * rng.normal(size=(2, 6, 3))
    p = _make("sum-non-private", n=6, d=3, T=1).reset(n_runs=2, rng=rng)
    total, noise = p.aggregate(x, return_noise=True)
    np.testing.assert_array_equal(total, x.sum(axis=1))
    np.testing.assert_array_equal(noise, 0.0)
    assert p.accounting().status == "none"
    assert p.model == "none" and p.noise_std() == 0.0


def test_central_gaussian_draws_are_the_mechanism_s():
    """The protocol's release is clip(x).sum + N(0, σ²) drawn from the generator itself, σ analytic at c√T."""
    x = _vectors(np.random.default_rng(2), (3, 20, 30), c=2.0) * 2.0  # some norms above c = 1
    p = _make("sum-central-gaussian", n=20, d=30, T=4, c=1.0).reset(n_runs=3, rng=np.random.default_rng(7))
    out = p.aggregate(x)
    rng = np.random.default_rng(7)
    sigma = analytic_gaussian_sigma(2.0, 1e-5, 1.0 * math.sqrt(4))
    np.testing.assert_array_equal(out, clip_l2(x, 1.0).sum(axis=1) + rng.normal(0.0, sigma, size=(3, 30)))
    assert p.noise_std() == sigma
    assert p.calibration()["sigma"] == sigma and p.trusted == "the server"


def test_ddg_draws_are_the_mechanism_s():
    """The protocol's release is DDGMechanism(ddg_params(..., steps=T), rng, runs=R).noisy_sum(x, rng), bit for bit:
    one rotation per run, drawn at reset."""
    x = _vectors(np.random.default_rng(3), (2, 20, 30))
    p = _make("sum-ddg-secagg", n=20, d=30, T=3, bits=14, k=3).reset(n_runs=2, rng=np.random.default_rng(9))
    out = [p.aggregate(x), p.aggregate(x)]
    rng = np.random.default_rng(9)
    params = ddg_params(14, 3, 20, 30, 1.0, 2.0, 1e-5, BETA, steps=3)
    assert p.params == params
    mech = DDGMechanism(params, rng, runs=2)
    ref = [mech.noisy_sum(x, rng), mech.noisy_sum(x, rng)]
    np.testing.assert_array_equal(out, ref)


def test_ddg_runs_have_their_own_rotation():
    """Each run of a reset draws its own public rotation (the runs are independent executions); a fixed
    flatten_seed shares one.  Run r's release is what a one-run mechanism with run r's signs computes."""
    p = _make("sum-ddg-secagg", n=20, d=30, T=1, bits=14, k=3).reset(n_runs=3, rng=np.random.default_rng(2))
    signs = p.randomizer.mechanism.flattener.signs
    assert signs.shape == (3, 32) and not np.array_equal(signs[0], signs[1]) and not np.array_equal(signs[1], signs[2])
    fixed = _make("sum-ddg-secagg", n=20, d=30, T=1, flatten_seed=5).reset(n_runs=3, rng=np.random.default_rng(2))
    assert fixed.randomizer.mechanism.flattener.signs.shape == (32,)
    x = _vectors(np.random.default_rng(4), (3, 20, 30))
    mech = p.randomizer.mechanism
    y = np.stack([mech.flattener.flatten(x[r], run=r) for r in range(3)])
    np.testing.assert_allclose(mech.flattener.flatten(x), y)
    np.testing.assert_allclose(np.stack([mech.flattener.unflatten(y[r], run=r) for r in range(3)]), x, atol=1e-12)


def test_ddg_fixed_flatten_seed_reuses_the_rotation():
    x = _vectors(np.random.default_rng(4), (20, 30))
    p = _make("sum-ddg-secagg", n=20, d=30, T=1, flatten_seed=5)
    a = p.reset(n_runs=1, rng=np.random.default_rng(1)).aggregate(x)
    b = p.reset(n_runs=1, rng=np.random.default_rng(1)).aggregate(x)
    np.testing.assert_array_equal(a, b)
    mech = DDGMechanism(p.params, 5)
    np.testing.assert_array_equal(a, mech.noisy_sum(x, np.random.default_rng(1)))


def test_real_secure_aggregation_gives_the_ideal_sum():
    x = _vectors(np.random.default_rng(5), (2, 6, 10))
    ideal = _make("sum-ddg-secagg", n=6, d=10, T=1).reset(n_runs=2, rng=np.random.default_rng(3)).aggregate(x)
    real = _make("sum-ddg-secagg", n=6, d=10, T=1, secure_aggregation="real")
    np.testing.assert_array_equal(real.reset(n_runs=2, rng=np.random.default_rng(3)).aggregate(x), ideal)


def test_ddg_refuses_return_noise():
    p = _make("sum-ddg-secagg", n=5, d=4, T=1).reset(n_runs=1, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="return_noise"):
        p.aggregate(np.zeros((5, 4)), return_noise=True)


def test_central_gaussian_noise_has_the_calibrated_variance():
    """Chi-square test of the released noise: 50 x 200 coordinates, two-sided, false-alarm rate 1e-3."""
    p = _make("sum-central-gaussian", n=10, d=200, T=1).reset(n_runs=50, rng=np.random.default_rng(11))
    _, noise = p.aggregate(np.zeros((50, 10, 200)), return_noise=True)
    df = noise.size
    stat = np.sum(noise**2) / p.noise_std() ** 2
    assert stats.chi2.ppf(0.0005, df) < stat < stats.chi2.ppf(0.9995, df)


def test_ddg_error_matches_privacy_noise_plus_rounding():
    """Per-coordinate squared error of the decoded sum in [0.9 nσ², 1.1 (nσ² + nγ²/4)], and unbiased.

    16 bits, k = 4 (wrap-around ~1e-4 per coordinate).  The true mean square lies between
    the two bounds (privacy noise, plus rounding of variance at most γ²/4 per party); over
    30 runs × 256 coordinates its estimate has a relative standard error of about
    sqrt(2/7680) ≈ 1.6%, so the 10% margins are more than 6 standard errors (false alarm
    < 1e-9); the mean error is tested at 5 standard errors (false alarm < 1e-6).
    """
    n, d = 40, 256
    x = _vectors(np.random.default_rng(6), (30, n, d))
    p = _make("sum-ddg-secagg", n=n, d=d, T=1, bits=16, k=4).reset(n_runs=30, rng=np.random.default_rng(8))
    err = p.aggregate(x) - x.sum(axis=1)
    q = p.params
    mse = np.mean(err**2)
    assert 0.9 * n * q.sigma**2 < mse < 1.1 * (n * q.sigma**2 + n * q.gamma**2 / 4)
    assert abs(np.mean(err)) < 5 * math.sqrt(mse / err.size)
    assert p.wrap_fraction() < 1e-3
    assert p.noise_std() == pytest.approx(math.sqrt(n) * q.sigma)


def test_wrap_fraction_is_measured():
    n, d = 100, 64
    x = np.tile(np.full(d, 1.0 / math.sqrt(d)), (n, 1))  # all agree: the sum has norm n c
    few = _make("sum-ddg-secagg", n=n, d=d, T=1, bits=12, k=1, norm_growth="optimistic")
    few.reset(n_runs=1, rng=np.random.default_rng(0)).aggregate(x)
    assert few.wrap_fraction() > 0.1
    safe = _make("sum-ddg-secagg", n=n, d=d, T=1, bits=12, k=5)
    safe.reset(n_runs=1, rng=np.random.default_rng(0)).aggregate(x)
    assert safe.wrap_fraction() == 0.0
    with pytest.raises(TypeError):
        _make("sum-central-gaussian").reset(n_runs=1, rng=np.random.default_rng(0)).wrap_fraction()


@pytest.mark.parametrize("T", [1, 7])
def test_central_gaussian_accounting_is_exact(T):
    p = _make("sum-central-gaussian", T=T, c=0.3)
    a = p.accounting()
    assert a.status == "verified" and a.model == "central" and a.relation == "add-remove"
    assert a.epsilon == pytest.approx(2.0, rel=1e-7)
    assert a.epsilon == pytest.approx(analytic_gaussian_epsilon(p.noise_std(), 1e-5, 0.3 * math.sqrt(T)), rel=1e-9)
    # the event accounts to the same result; the accountant's generic zCDP route for the Gaussian
    # composition itself overstates ε: that is why the event carries the exact profile
    same = account(p.event(), target_epsilon=2.0, target_delta=1e-5)
    assert (same.status, same.epsilon) == (a.status, a.epsilon)
    assert account(p.gaussian_event(), target_epsilon=2.0, target_delta=1e-5).epsilon > 2.0 * 1.01
    # replacing a party's vector doubles the sensitivity: not private at the target
    r = p.accounting("replace")
    assert r.status == "invalid" and r.epsilon > 2.0 * 1.5


def test_central_gaussian_zcdp_calibration():
    p = _make("sum-central-gaussian", T=5, c=0.3, calibration="zcdp")
    assert p.noise_std() == calibrate_gaussian_sigma(2.0, 1e-5, 0.3, n_compositions=5)
    a = p.accounting()
    assert a.status == "verified" and a.epsilon < 2.0  # the exact ε of the looser calibration
    assert p.noise_std() > _make("sum-central-gaussian", T=5, c=0.3).noise_std()


@pytest.mark.parametrize("T", [1, 6])
def test_ddg_accounting_composes_over_the_rounds(T):
    p = _make("sum-ddg-secagg", n=50, d=30, T=T, bits=16, k=3)
    q = p.params
    a = p.accounting()
    assert a.status == "verified" and a.model == "distributed"
    assert a.epsilon == pytest.approx(2.0, rel=1e-6)
    assert a.epsilon == ddg_epsilon(q.sigma, c=1.0, gamma=q.gamma, beta=q.beta, n=50, d=q.d_pad, delta=1e-5, steps=T)
    assert q.epsilon_for(50) == pytest.approx(a.epsilon, rel=1e-12)
    r = p.accounting("replace")
    assert r.status == "invalid" and r.epsilon > 2.0 * 1.5


def test_communication_counts_bits():
    p = _make("sum-ddg-secagg", n=20, d=30, T=2, bits=14).reset(n_runs=1, rng=np.random.default_rng(0))
    p.aggregate(np.zeros((20, 30)))
    p.aggregate(np.zeros((20, 30)))
    c = p.communication
    assert (c.rounds, c.messages, c.payload_unit) == (2, 40, "bits")
    assert c.payload == 2 * 20 * 32 * 14 and p.bits_per_coordinate == 14
    g = _make("sum-central-gaussian", n=20, d=30, T=1).reset(n_runs=1, rng=np.random.default_rng(0))
    g.aggregate(np.zeros((20, 30)))
    assert g.communication.payload == 20 * 30 and g.communication.bits == 20 * 30 * 64 and g.bits_per_coordinate == 64


def test_auto_bits_meets_the_rounding_share():
    from fedbandit.protocols.sums import AUTO_BITS_ROUNDING_SHARE_SUM

    p = _make("sum-ddg-secagg", n=100, d=250, T=1, c=10.0, bits="auto", k=3)
    q = p.params
    assert q.bits % 2 == 0
    assert 100 * q.gamma**2 / 4 <= AUTO_BITS_ROUNDING_SHARE_SUM * 100 * q.sigma**2
    smaller = ddg_params(q.bits - 2, 3, 100, 250, 10.0, 2.0, 1e-5, BETA)
    assert 100 * smaller.gamma**2 / 4 > AUTO_BITS_ROUNDING_SHARE_SUM * 100 * smaller.sigma**2


def test_dme_trial_uses_the_protocols():
    cfg = dict(n=50, d=30, c=1.0, bits=14, k=3, epsilon=2.0, delta=1e-5, beta=BETA, reps=20)
    out = dme_trial(cfg, np.random.default_rng(0))
    g = create("sum-central-gaussian", epsilon=2.0, delta=1e-5).configure(n_parties=50, dim=30, clip=1.0)
    assert out["mse_gauss_analytic"] == g.noise_std() ** 2 / 50**2
    assert out["mse_gauss_sim"].shape == out["mse_ddg"].shape == (20,)
    # means of 20 x 30 squared Gaussian errors: within 25% of their expectation (false alarm < 1e-4)
    assert abs(out["mse_gauss_sim"].mean() / out["mse_gauss_analytic"] - 1) < 0.25
    assert out["mse_gauss_zcdp"] > out["mse_gauss_analytic"]
    assert abs(out["mse_ddg"].mean() / out["mse_ddg_noise"] - 1) < 0.25  # rounding adds ~(γ/σ)²/4 ≈ 3e-5


# --- client sampling ------------------------------------------------------------------

@pytest.mark.parametrize("sampling, relation, status", [
    ("fixed", "replace", "verified"), ("fixed", "add-remove", "unproven"), ("poisson", "add-remove", "verified"),
])
def test_sampled_gaussian_accounting_states_what_is_proven(sampling, relation, status):
    from fedbandit.accounting.subsampling import sampled_gaussian_epsilon

    p = create("sum-central-gaussian", epsilon=3.0, delta=1e-5, relation=relation).configure(
        n_parties=20, dim=30, n_rounds=50, clip=1.0, sampling_rate=0.1, sampling=sampling)
    a = p.accounting()
    assert a.status == status and a.epsilon == pytest.approx(3.0, rel=1e-6)
    sens = 1.0 if relation == "add-remove" else 2.0
    amp = "poisson" if relation == "add-remove" else "without-replacement"
    assert sampled_gaussian_epsilon(p.noise_std() / sens, 0.1, 50, 1e-5, amp) == pytest.approx(3.0, rel=1e-6)
    assert p.calibration()["rule"] == "subsampled-rdp" and p.calibration()["sampling_rate"] == 0.1
    # amplification needs less noise than everyone in every round
    full = create("sum-central-gaussian", epsilon=3.0, delta=1e-5, relation=relation).configure(
        n_parties=20, dim=30, n_rounds=50, clip=1.0)
    assert p.noise_std() < full.noise_std()


def test_sampled_ddg_is_calibrated_with_amplification_and_poisson_needs_a_population():
    p = _make("sum-ddg-secagg", n=20, d=30, T=50)
    a = create("sum-ddg-secagg", epsilon=2.0, delta=1e-5).configure(
        n_parties=20, dim=30, n_rounds=50, clip=1.0, sampling_rate=0.1)
    assert a.params.sigma < p.params.sigma and a.accounting().status == "unproven"
    s = create("sum-ddg-secagg", epsilon=2.0, delta=1e-5, relation="replace").configure(
        n_parties=20, dim=30, n_rounds=50, clip=1.0, sampling_rate=0.1)
    assert s.accounting().status == "verified" and s.accounting().epsilon == pytest.approx(2.0, rel=1e-6)
    assert s.params.sigma > a.params.sigma  # replace-one: twice the sensitivity
    # Poisson rounds of 20 clients at q = 0.1: a round with nobody but the target has chance 0.1·0.9^19 per round,
    # far above delta, so no noise gives this delta (sampled_ddg step 1)
    with pytest.raises(ValueError, match="no DDG noise gives this delta"):
        create("sum-ddg-secagg", epsilon=2.0, delta=1e-5).configure(
            n_parties=20, dim=30, n_rounds=5, clip=1.0, sampling_rate=0.1, sampling="poisson")
    with pytest.raises(ValueError, match="add-remove"):
        create("sum-ddg-secagg", epsilon=2.0, delta=1e-5, relation="replace").configure(
            n_parties=2000, dim=30, n_rounds=5, clip=1.0, sampling_rate=0.05, sampling="poisson")
    with pytest.raises(ValueError, match="Poisson sample"):
        create("sum-binomial-secagg", epsilon=2.0, delta=1e-5).configure(
            n_parties=2000, dim=30, n_rounds=5, clip=1.0, sampling_rate=0.05, sampling="poisson")
    with pytest.raises(ValueError, match="auto"):
        create("sum-ddg-secagg", epsilon=2.0, delta=1e-5, bits="auto").configure(
            n_parties=20, dim=30, n_rounds=5, clip=1.0, sampling_rate=0.1)
    with pytest.raises(ValueError, match="sampling"):
        create("sum-central-gaussian", epsilon=2.0, delta=1e-5).configure(
            n_parties=20, dim=30, n_rounds=5, clip=1.0, sampling_rate=0.1, sampling="bernoulli")


def test_mask_drops_the_absent_parties():
    p = _make("sum-non-private").reset(n_runs=2, rng=np.random.default_rng(0))
    x = np.random.default_rng(1).normal(size=(2, 20, 30))
    mask = np.zeros((2, 20), dtype=bool)
    mask[0, :5] = mask[1, 3:] = True
    np.testing.assert_allclose(p.aggregate(x, mask=mask), (x * mask[..., None]).sum(1))
    assert p.communication.messages == pytest.approx((5 + 17) / 2)
    with pytest.raises(TypeError, match="boolean"):
        p.aggregate(x, mask=mask.astype(int))
    d = _make("sum-ddg-secagg").reset(n_runs=2, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="noise share"):
        d.aggregate(x, mask=mask)


def _poisson_ddg(N=400, q=0.1, T=3, d=30, **kw):
    return create("sum-ddg-secagg", epsilon=2.0, delta=1e-5, bits=16, k=3, **kw).configure(
        n_parties=N, dim=d, n_rounds=T, clip=1.0, sampling_rate=q, sampling="poisson")


def test_poisson_ddg_deals_its_shares_and_is_the_mechanism_s():
    """Poisson rounds: the release is DDGMechanism.encode of every run's clients that joined, in one call (run-major,
    each with its run's rotation and the K shares dealt over its run's k, client_shares), summed mod 2^B per run and
    decoded with that run's rotation -- bit for bit."""
    from fedbandit.accounting.sampled_ddg import client_shares, noise_shares_for

    p = _poisson_ddg()
    K = noise_shares_for(0.1, 400, 3, 1e-5)
    assert p.params.n == K and p.params.sampling == "poisson" and p.params.population == 400
    assert p.noise_std() == pytest.approx(math.sqrt(K) * p.params.sigma)
    x = _vectors(np.random.default_rng(3), (3, 400, 30))
    mask = np.random.default_rng(4).random((3, 400)) < 0.1
    mask[1] = False  # a run where nobody joined: its sum is 0
    p.reset(n_runs=3, rng=np.random.default_rng(9))
    out = p.aggregate(x, mask=mask)
    rng = np.random.default_rng(9)
    mech = DDGMechanism(p.params, rng, runs=3)
    idx = [np.flatnonzero(mask[r]) for r in range(3)]
    rows = np.concatenate([x[r, i] for r, i in enumerate(idx)])
    shares = np.concatenate([client_shares(K, i.size) for i in idx if i.size])
    which = np.concatenate([np.full(i.size, r) for r, i in enumerate(idx)])
    res = mech.encode(rows, rng, noise_shares=shares, run=which)
    ref = [mech.decode(np.mod(res[which == r].sum(0), p.params.modulus), run=r) for r in range(3)]
    np.testing.assert_array_equal(out, np.stack(ref))
    assert np.all(out[1] == 0)
    assert p.accounting().status == "verified" and p.accounting().epsilon == pytest.approx(2.0, rel=1e-6)
    with pytest.raises(ValueError, match="mask"):
        p.aggregate(x)


def _per_run_poisson_releases(p, x, mask, rng):
    """The plain implementation of a Poisson round of DDG: one DDGMechanism.encode call per run, that run's clients
    with their dealt shares and that run's rotation, summed mod 2^B and decoded (as the randomizer did before it
    encoded every run in one call)."""
    from fedbandit.accounting.sampled_ddg import client_shares

    mech = DDGMechanism(p.params, rng, runs=x.shape[0])
    out = np.zeros((x.shape[0], x.shape[2]))
    for r in range(x.shape[0]):
        present = np.flatnonzero(mask[r])
        if present.size == 0:
            continue
        res = mech.encode(x[r, present], rng, noise_shares=client_shares(p.params.n, present.size), run=r)
        out[r] = mech.decode(np.mod(res.sum(0), p.params.modulus), run=r)
    return out


def _poisson_release_statistics(out, x, mask):
    """Per run (independent, so i.i.d. over runs): the error's first coordinate and its squared norm, against the
    clipped sum of the clients that joined."""
    err = out - (clip_l2(x, 1.0) * mask[..., None]).sum(axis=1)
    return err[:, 0], np.einsum("ij,ij->i", err, err)


def test_poisson_ddg_one_call_has_the_law_of_the_per_run_loop():
    """Encoding every run's clients in one call (another draw order) releases what one call per run does, in law:
    two-sample Kolmogorov-Smirnov on each run's error (first coordinate, squared norm) against the per-run loop
    written out above, 2000 independent runs each, false-alarm rate 1e-3 in all (5e-4 per statistic).  Power: a
    randomizer that gives every client one share, or encodes every run with run 0's rotation, is rejected."""
    runs, N, d = 2000, 60, 30
    x = _vectors(np.random.default_rng(1), (runs, N, d))
    mask = np.random.default_rng(2).random((runs, N)) < 0.1  # k ~ Bin(60, 0.1): from 0 to ~15 clients, K shares
    p = create("sum-ddg-secagg", epsilon=2.0, delta=1e-3, bits=16, k=3).configure(
        n_parties=N, dim=d, n_rounds=1, clip=1.0, sampling_rate=0.1, sampling="poisson")
    assert p.params.n > 6  # the shares are dealt (K > E[k]): one share per client would lower the noise
    plain = _poisson_release_statistics(_per_run_poisson_releases(p, x, mask, np.random.default_rng(3)), x, mask)

    def one_call(seed):
        q = create("sum-ddg-secagg", epsilon=2.0, delta=1e-3, bits=16, k=3).configure(
            n_parties=N, dim=d, n_rounds=1, clip=1.0, sampling_rate=0.1, sampling="poisson")
        q.reset(n_runs=runs, rng=np.random.default_rng(seed))
        return q, _poisson_release_statistics(q.aggregate(x, mask=mask), x, mask)

    _, fast = one_call(4)
    for a, b in zip(plain, fast):
        assert stats.ks_2samp(a, b).pvalue > 5e-4

    # power: the broken variants are rejected by the same test
    q = create("sum-ddg-secagg", epsilon=2.0, delta=1e-3, bits=16, k=3).configure(
        n_parties=N, dim=d, n_rounds=1, clip=1.0, sampling_rate=0.1, sampling="poisson")
    q.reset(n_runs=runs, rng=np.random.default_rng(5))
    mech = q.randomizer.mechanism
    real_encode = mech.encode

    def one_share_each(xs, rng, **kw):
        kw["noise_shares"] = np.ones_like(kw["noise_shares"])
        return real_encode(xs, rng, **kw)

    def run0_rotation(xs, rng, **kw):
        kw["run"] = np.zeros_like(kw["run"])
        return real_encode(xs, rng, **kw)

    for broken in (one_share_each, run0_rotation):
        q.reset(n_runs=runs, rng=np.random.default_rng(6))
        mech = q.randomizer.mechanism
        real_encode = mech.encode
        mech.encode = broken
        bad = _poisson_release_statistics(q.aggregate(x, mask=mask), x, mask)
        assert min(stats.ks_2samp(a, b).pvalue for a, b in zip(plain, bad)) < 5e-4, broken.__name__


def test_poisson_ddg_noise_has_the_declared_variance_whatever_the_number_of_clients():
    """The error of a Poisson round's release (against the clipped sum of the clients that joined) has per-coordinate
    variance noise_std()² plus the rounding's (at most k γ²/4), whether 5 or 60 clients joined: the dealt shares keep
    the sum's noise (two-sided chi-square band at false-alarm rate 1e-4 per case, with the rounding's range)."""
    p = _poisson_ddg(N=400, q=0.1, T=1, d=64)
    var = p.noise_std() ** 2
    g2 = p.params.gamma ** 2
    for k in (5, 60):
        runs = 200
        x = _vectors(np.random.default_rng(k), (runs, 400, 64))
        mask = np.zeros((runs, 400), dtype=bool)
        mask[:, :k] = True
        pk = _poisson_ddg(N=400, q=0.1, T=1, d=64).reset(n_runs=runs, rng=np.random.default_rng(100 + k))
        err = pk.aggregate(x, mask=mask) - clip_l2(x[:, :k], 1.0).sum(axis=1)
        m = err.size
        lo = stats.chi2.ppf(0.5e-4, m) / m * var
        hi = stats.chi2.ppf(1 - 0.5e-4, m) / m * (var + k * g2 / 4)
        assert lo < np.mean(err**2) < hi, (k, np.mean(err**2) / var)


def test_poisson_ddg_wrap_count_is_the_per_run_sums_of_the_noised_vectors():
    """The wrap diagnostic of a Poisson round (one integer sum per run's block of clients, computed run by run)
    counts what np.add.reduceat of the noised vectors over the runs' blocks counts (the plain form it replaced),
    with runs where nobody joined and few enough bits that sums wrap."""
    from fedbandit.accounting.sampled_ddg import client_shares

    p = create("sum-ddg-secagg", epsilon=2.0, delta=1e-5, bits=9, k=1, norm_growth="optimistic").configure(
        n_parties=400, dim=30, n_rounds=3, clip=1.0, sampling_rate=0.1, sampling="poisson")
    x = _vectors(np.random.default_rng(3), (4, 400, 30))  # with 9 bits about a third of the sums wrap
    mask = np.random.default_rng(4).random((4, 400)) < 0.1
    mask[0] = mask[2] = False
    p.reset(n_runs=4, rng=np.random.default_rng(9))
    p.aggregate(x, mask=mask)
    rng = np.random.default_rng(9)
    mech = DDGMechanism(p.params, rng, runs=4)
    idx = [np.flatnonzero(mask[r]) for r in range(4)]
    rows = np.concatenate([x[r, i] for r, i in enumerate(idx)])
    shares = np.concatenate([client_shares(p.params.n, i.size) for i in idx if i.size])
    which = np.concatenate([np.full(i.size, r) for r, i in enumerate(idx)])
    _, st = mech.encode(rows, rng, stages=True, noise_shares=shares, run=which)
    counts = mask.sum(1)
    starts = np.cumsum(counts) - counts
    int_sum = np.add.reduceat(st["noised"], starts[counts > 0], axis=0)
    half = p.params.modulus // 2
    wrapped = np.count_nonzero((int_sum < -half) | (int_sum >= half))
    assert 0 < wrapped < int_sum.size
    assert p.randomizer.wrapped == wrapped and p.randomizer.coordinates == int_sum.size


@pytest.mark.parametrize("name", ["sum-non-private", "sum-central-gaussian"])
def test_masked_clear_sum_is_the_plain_form_bit_for_bit(name):
    """A masked round of a protocol that sends its vectors in the clear (exact or clipped) encodes only the rows
    that joined: the release is the plain form's, aggregate(x·mask) without a mask, bit for bit (same noise draws,
    signs of zeros included) -- many rows of mixed magnitudes (an order of the sum other than row by row shows),
    columns that are zero or −0 everywhere, present rows that cancel, a run where nobody joined, one where all did."""
    rng = np.random.default_rng(21)
    R, n, d = 5, 300, 40
    x = rng.normal(size=(R, n, d)) * np.exp(rng.uniform(-20, 20, size=(R, n, 1)))
    x[rng.random((R, n)) < 0.5] *= 1e-3  # some rows inside the clipping ball
    mask = rng.random((R, n)) < 0.3
    mask[1] = False
    mask[3] = True
    x[:, :, 0] = 0.0
    x[:, :, 1] = -0.0
    x[:, :, 2] = np.where(mask, -0.0, 0.0)  # −0 where present, +0 where absent: the sum is +0
    x[:, :, 3] = np.where(mask, 0.0, -0.0)
    x[:, :, 4] = np.where(mask, -0.0, -1.0)  # absent rows negative: x·0 = −0, so the plain sum is −0
    p, q = _make(name, n=n, d=d, c=3.0), _make(name, n=n, d=d, c=3.0)
    for t in range(3):
        if t == 1:
            x[:, :, 5] = 0.0
            first = np.argmax(mask, axis=1)
            x[np.arange(R), first, 5] = 1.5  # one present row's entry and its negation: they cancel to +0
            x[np.arange(R), n - 1 - np.argmax(mask[:, ::-1], axis=1), 5] = -1.5
        if t == 0:
            p.reset(n_runs=R, rng=np.random.default_rng(5))
            q.reset(n_runs=R, rng=np.random.default_rng(5))
        got = p.aggregate(x, mask=mask)
        ref = q.aggregate(x * mask[..., None])
        assert got.tobytes() == ref.tobytes()


def test_the_masked_clear_path_rests_on_the_parts_declarations():
    """The masked fast path (encode only the rows that joined) is taken on the parts' word: the randomizer's
    ``row_wise_clear_sum`` and the intermediary's ``delivers_as_sent``.  A subclass that overrides ``encode`` (here: a
    draw per row) or ``deliver`` (here: doubled messages) without declaring again loses the declaration, so its
    masked round is the plain form's, aggregate(x·mask), bit for bit.  The same noisy randomizer declared clear
    (wrongly) takes the fast path and its release differs: the check can fail."""

    class NoisyRows(ExactVectors):
        def encode(self, x, rng):
            return x + rng.normal(size=x.shape)

    class DeclaredNoisyRows(NoisyRows):
        row_wise_clear_sum = True

    class Doubling(Identity):
        def deliver(self, messages, rng=None, *, modulus=None):
            return 2.0 * messages

    assert ExactVectors.row_wise_clear_sum and ClippedVectors.row_wise_clear_sum and Identity.delivers_as_sent
    assert not DDGVectors.row_wise_clear_sum and not Shuffler.delivers_as_sent
    assert not SecureAggregation.delivers_as_sent
    assert not NoisyRows.row_wise_clear_sum and DeclaredNoisyRows.row_wise_clear_sum and not Doubling.delivers_as_sent
    rng = np.random.default_rng(8)
    R, n, d = 3, 50, 6
    x = rng.normal(size=(R, n, d))
    mask = rng.random((R, n)) < 0.4

    def masked_and_plain(randomizer_type, intermediary_type):
        p, q = (SumProtocol(randomizer_type(), intermediary_type(), PlainSum(), name="test").configure(
            n_parties=n, dim=d, n_rounds=2, clip=1.0) for _ in range(2))
        p.reset(n_runs=R, rng=np.random.default_rng(5))
        q.reset(n_runs=R, rng=np.random.default_rng(5))
        return p.aggregate(x, mask=mask), q.aggregate(x * mask[..., None])

    for parts in ((NoisyRows, Identity), (ExactVectors, Doubling)):
        got, ref = masked_and_plain(*parts)
        assert got.tobytes() == ref.tobytes(), parts
    got, ref = masked_and_plain(DeclaredNoisyRows, Identity)
    assert not np.allclose(got, ref)

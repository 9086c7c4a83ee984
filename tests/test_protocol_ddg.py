"""Tests of the distributed discrete Gaussian + secure aggregation protocol (``create("ddg-secagg", ...)``)."""

import math

import numpy as np
import pytest

from fedbandit.accounting.ddg import ddg_params
from fedbandit.learners import FixedBatchFedLinUCB
from fedbandit.protocols import create
from fedbandit.protocols.statistics import AUTO_BITS_ROUNDING_SHARE


def DDGSecAggProtocol(epsilon, delta, *, beta=None, **kw):
    if beta is not None:
        kw["rounding_beta"] = beta
    return create("ddg-secagg", epsilon=epsilon, delta=delta, **kw)


def CentralTreeProtocol(epsilon, delta, calibration="paper"):
    return create("central", epsilon=epsilon, delta=delta, calibration=calibration)


def _users(rng, B, R, M, d):
    x = rng.standard_normal((B, R, M, d))
    x /= np.linalg.norm(x, axis=-1, keepdims=True) * rng.uniform(1.0, 2.0, (B, R, M, 1))
    y = rng.uniform(-1, 1, (B, R, M))
    return x, y


def _sums(x, y):
    return np.einsum("brmd,brm->rmd", x, y), np.einsum("brmd,brme->rmde", x, x)


def test_prefix_error_is_unbiased_with_tree_variance():
    """Statistical: the server's prefix error has mean 0 and variance M·popcount(k)·σ² (+ rounding).

    R = 3000 runs, D = 9 coordinates pooled per k (27,000 draws per variance, relative
    s.e. ≈ 0.009): a ±6 % band is > 6 s.e. (false-alarm rate < 1e-8 per check); the mean
    is checked within 6 s.e. of 0.
    """
    rng = np.random.default_rng(0)
    M, d, B, K, R = 4, 2, 3, 7, 3000
    p = DDGSecAggProtocol(2.0, 0.1).configure(n_agents=M, dim=d, n_batches=K, batch_size=B)
    p.reset(n_runs=R, rng=np.random.default_rng(1))
    tb, tg = 0.0, 0.0
    for k in range(1, K + 1):
        x, y = _users(rng, B, R, M, d)
        b, g = _sums(x, y)
        tb, tg = tb + b.sum(1), tg + g.sum(1)
        ub, ug = p.synchronize(b, g, users=(x, y))
        np.testing.assert_allclose(ug, np.swapaxes(ug, -1, -2))
        err = np.concatenate([(ub - tb).reshape(R, -1), (ug - tg)[:, *np.triu_indices(d)]], axis=1)
        expected = p.prefix_noise_variance(k)
        var = err.var()
        assert abs(err.mean()) < 6 * math.sqrt(expected / err.size)
        assert var == pytest.approx(expected, rel=0.06 + 2 * p.rounding_variance() / expected)
    assert p.communication.rounds == K and p.communication.payload_unit == "bits"
    assert p.communication.payload == K * M * p.randomizer.params.d_pad * p.randomizer.bits


def test_real_secure_aggregation_gives_the_ideal_output():
    """The five-round SecAgg of fedbandit.secagg.protocol computes exactly the ideal modular sum."""
    M, d, B, K, R = 3, 2, 2, 3, 2
    outs = []
    for mode in ("ideal", "real"):
        rng = np.random.default_rng(5)
        p = DDGSecAggProtocol(1.0, 0.1, secure_aggregation=mode).configure(n_agents=M, dim=d, n_batches=K, batch_size=B)
        p.reset(n_runs=R, rng=np.random.default_rng(6))
        res = []
        for _ in range(K):
            x, y = _users(rng, B, R, M, d)
            res.append(p.synchronize(*_sums(x, y), users=(x, y)))
        outs.append(res)
    for (b1, g1), (b2, g2) in zip(*outs):
        np.testing.assert_array_equal(b1, b2)
        np.testing.assert_array_equal(g1, g2)


def test_accounting_verified_and_matches_central_up_to_rounding():
    """σ meets the target exactly; the server's variance is within 5 % of the tight central tree's."""
    kw = dict(n_agents=100, dim=10, n_batches=400, batch_size=25)
    p = DDGSecAggProtocol(1.0, 0.1).configure(**kw)
    a = p.accounting()
    assert a.status == "verified" and a.private and a.epsilon == pytest.approx(1.0, rel=1e-6)
    central = CentralTreeProtocol(1.0, 0.1, calibration="zcdp").configure(**kw)
    ratio = p.calibration()["total_variance"] / central.calibration()["total_variance"]
    assert 1.0 <= ratio < 1.05
    # auto bits: rounding at most the stated share of the node's privacy noise, and the
    # next smaller width would not satisfy it.
    assert p.rounding_variance() <= AUTO_BITS_ROUNDING_SHARE * p.n_agents * p.sigma0**2
    smaller = ddg_params(
        p.randomizer.bits - 2, 3.0, 100, p.randomizer.coord_dim, p.randomizer.clip, 1.0, 0.1, steps=p.kappa, n_signal=p.randomizer.max_node_users
    )
    assert p.randomizer.max_node_users * smaller.gamma**2 / 4 > AUTO_BITS_ROUNDING_SHARE * 100 * smaller.sigma**2
    # Fewer agents adding noise (dropouts or collusion): the same σ gives a larger ε.
    assert p.randomizer.params.epsilon_for(50) > 1.0
    # Unclipped rewards: no guarantee.
    q = DDGSecAggProtocol(1.0, 0.1).configure(**kw, reward_bound=None)
    assert q.accounting().status == "invalid"


def test_ddg_in_fixed_batch_learner():
    from fedbandit.envs.linear import SyntheticLinearEnv

    env = SyntheticLinearEnv(4, 5, 3, n_runs=2, seed=0)
    learner = FixedBatchFedLinUCB(create("ddg-secagg", epsilon=1.0, delta=0.1), horizon=16, batch_size=4, n_agents=4,
                                  dim=3)
    out = learner.run(env, rng=np.random.default_rng(0))
    assert np.all(np.isfinite(out.regret)) and out.regret.shape == (2, 16)
    assert out.accounting.status == "verified" and out.communication.unit == "bits"


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(bits=1), "bits"),
        (dict(bits="many"), "bits"),
        (dict(k=0.0), "k"),
        (dict(beta=1.0), "beta"),
        (dict(flatten_seed=-1), "flatten_seed"),
        (dict(secure_aggregation="trusted"), "secure_aggregation"),
        (dict(flatten="none"), "flatten"),
    ],
)
def test_bad_input(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        DDGSecAggProtocol(1.0, 0.1, **kwargs)


def test_bad_settings_rejected_at_configure():
    with pytest.raises(ValueError, match="epsilon"):
        DDGSecAggProtocol(0.0, 0.1)
    with pytest.raises(ValueError, match="no valid gamma"):
        DDGSecAggProtocol(1.0, 0.1, bits=8).configure(n_agents=50, dim=4, n_batches=64, batch_size=10)
    with pytest.raises(ValueError, match="n_agents"):
        DDGSecAggProtocol(1.0, 0.1, secure_aggregation="real").configure(n_agents=1, dim=2, n_batches=4, batch_size=2)
    p = DDGSecAggProtocol(1.0, 0.1).configure(n_agents=2, dim=2, n_batches=4, batch_size=2)
    p.reset(n_runs=1, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="users"):
        p.synchronize(np.zeros((1, 2, 2)), np.zeros((1, 2, 2, 2)))


def test_auto_bits_skips_widths_without_a_valid_gamma():
    """A small width with no valid γ is skipped, not raised (d = 57, M = 10, as the real-data instance)."""
    p = DDGSecAggProtocol(4.0, 1e-5).configure(n_agents=10, dim=57, n_batches=4, batch_size=10)
    assert p.accounting().status == "verified" and p.randomizer.bits > 8

"""The distributed binomial mechanism (cpSGD) baseline: accounting, mechanism and sum protocol."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedbandit.accounting.binomial import (
    binomial_params,
    binomial_run_epsilon,
    binomial_sensitivities,
    cpsgd_condition,
    cpsgd_epsilon,
)
from fedbandit.mechanisms.binomial import BinomialMechanism
from fedbandit.protocols import create


def test_cpsgd_epsilon_known_value_and_monotone():
    """A hand computation of [ASYKM18] Thm. 1 (p = 1/2: b_p = 1/3, c_p = 5/sqrt(2)·(3/4+1)... evaluated here)."""
    N, p, s, d, delta = 1e6, 0.5, 0.01, 16, 1e-5
    sens = (4.0, 1.0, 1.0)
    v = N * p * (1 - p)
    cp = math.sqrt(2) * (3 * 0.125 * 2 + 2 * 0.25 * 2)
    bp = 2 / 3 * 0.5
    dp = 4 / 3 * 0.5
    want = (1.0 * math.sqrt(2 * math.log(1.25 / delta)) / (s * math.sqrt(v))
            + (1.0 * cp * math.sqrt(math.log(10 / delta)) + 4.0 * bp) / (s * v * (1 - delta / 10))
            + (2 / 3 * math.log(1.25 / delta) + dp * math.log(20 * d / delta) * math.log(10 / delta)) / (s * v))
    assert cpsgd_epsilon(N, p, s, d, delta, sens) == pytest.approx(want, rel=1e-12)
    assert cpsgd_epsilon(4 * N, p, s, d, delta, sens) < cpsgd_epsilon(N, p, s, d, delta, sens)
    assert not cpsgd_condition(10, p, s, d, delta, 1.0)
    assert math.isinf(cpsgd_epsilon(10, p, s, d, delta, sens))


def test_sensitivities_double_for_replacement():
    a = binomial_sensitivities(1.0, 0.01, 64)
    b = binomial_sensitivities(1.0, 0.01, 64, "replace")
    assert a == pytest.approx((8.0 + 0.64, 1.08, 1.01)) and b == pytest.approx(tuple(2 * x for x in a))


def test_params_meet_the_target_over_the_rounds():
    for q, T in ((1.0, 1), (1.0, 20), (0.1, 100)):
        b = binomial_params(16, 3, 50, 100, 1.0, 2.0, 1e-5, steps=T, sampling_rate=q)
        assert b.trials_per_client % 2 == 0
        sens = binomial_sensitivities(1.0, b.scale, b.d_pad)
        eps0 = cpsgd_epsilon(50 * b.trials_per_client, 0.5, b.scale, b.d_pad, b.delta_round, sens)
        assert eps0 <= b.eps_round * (1 + 1e-9)
        slack = 0.0 if T == 1 else 1e-5 / 2
        assert binomial_run_epsilon(eps0, b.delta_round, T, q, slack) <= 2.0 * (1 + 1e-9)
        # the range condition: 2^B s covers k standard deviations of the conservative aggregate
        var = 1.0 * 50**2 / b.d_pad + 50 * b.scale**2 / 4 + 50 * b.trials_per_client * 0.25 * b.scale**2
        assert 2**16 * b.scale == pytest.approx(2 * 3 * math.sqrt(var), rel=1e-3)


def test_mechanism_is_unbiased_with_the_stated_noise():
    b = binomial_params(16, 3, 20, 30, 1.0, 4.0, 1e-5)
    mech = BinomialMechanism(b, flatten_seed=3)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 20, 30))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    est = mech.decode(mech.aggregate(mech.encode(x, rng)), 20)
    err = est - x.sum(-2)
    var_pred = 20 * (b.sigma**2) + 20 * b.scale**2 / 4  # noise + at most the rounding variance
    var_lo = 20 * b.sigma**2
    se = math.sqrt(2 / err.size)
    assert abs(err.mean()) < 4 * math.sqrt(var_pred / err.size)
    assert var_lo * (1 - 4 * se) <= np.mean(err**2) <= var_pred * (1 + 4 * se)


def test_protocol_accounting_and_refusals():
    p = create("sum-binomial-secagg", epsilon=4.0, delta=1e-5).configure(n_parties=50, dim=100, n_rounds=30, clip=1.0)
    a = p.accounting()
    assert a.status == "verified" and a.epsilon <= 4.0 * (1 + 1e-6)
    assert p.bits_per_coordinate == 16 and p.calibration()["trials_per_client"] > 0
    # with sampling, fixed-size sampling is proven under replace-one only
    s = create("sum-binomial-secagg", epsilon=4.0, delta=1e-5, relation="replace").configure(
        n_parties=50, dim=100, n_rounds=30, clip=1.0, sampling_rate=0.1)
    assert s.accounting().status == "verified"
    u = create("sum-binomial-secagg", epsilon=4.0, delta=1e-5).configure(
        n_parties=50, dim=100, n_rounds=30, clip=1.0, sampling_rate=0.1)
    assert u.accounting().status == "unproven" and "no theorem" in u.accounting().notes
    with pytest.raises(ValueError, match="poisson"):
        create("sum-binomial-secagg", epsilon=4.0, delta=1e-5).configure(
            n_parties=50, dim=100, n_rounds=30, clip=1.0, sampling_rate=0.1, sampling="poisson")
    with pytest.raises(ValueError, match="return_noise"):
        p.reset(n_runs=1, rng=np.random.default_rng(0))
        p.aggregate(np.zeros((50, 100)), return_noise=True)

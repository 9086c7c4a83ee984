"""Tests of DP20's FedUCB (fedbandit.learners.dp20) and the schedule audit (fedbandit.audit.schedule)."""

import math
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fedbandit.accounting.calibration import dp20_m, dp20_sigma
from fedbandit.audit.epsilon import audit_epsilon
from fedbandit.audit.schedule import (
    ActionIs,
    DP20ScheduleMechanism,
    FirstSync,
    FixedBatchScheduleMechanism,
    RecordingProtocol,
    SyncAt,
    alice_threshold,
    alice_tracy_instance,
    dp20_schedule_mechanism,
    select_action_attack,
)
from fedbandit.envs.linear import SyntheticLinearEnv
from fedbandit.envs.users import UsersEnv
from fedbandit.experiments.runner import run_config
from fedbandit.learners.dp20 import FedUCB, noise_norm_bound, wang_threshold
from fedbandit.learners.result import RunResult
from fedbandit.protocols.intermediaries import Identity
from fedbandit.protocols.registry import create
from fedbandit.protocols.statistics import GaussianTree, StatisticsProtocol, TreePrefix
from reference_dp20 import reference_feducb


def _random_users(seed, T, R, M, K, d, shared=False):
    """Users with features of varied norms (no exact ties in LinUCB's scores)."""
    rng = np.random.default_rng(seed)
    Rc = 1 if shared else R
    f = rng.standard_normal((T, Rc, M, K, d))
    f /= np.linalg.norm(f, axis=-1, keepdims=True)
    f *= rng.uniform(0.2, 1.0, size=(T, Rc, M, K, 1))
    theta = rng.standard_normal(d)
    theta /= np.linalg.norm(theta)
    means = f @ theta
    noise = 0.5 * rng.standard_normal((T, R, M))
    return UsersEnv(f, means, noise, n_runs=R, block_size=7)


def tree(sigma0):
    """A per-silo Gaussian tree with an explicit σ₀ (no calibration rule)."""
    return StatisticsProtocol(GaussianTree(sigma0=sigma0), Identity(), TreePrefix(), name="gaussian-tree")


def plain():
    return create("non-private")


def dp20(eps=1.0, delta=0.1, noise="corrected"):
    return create("dp20", epsilon=eps, delta=delta, noise=noise)


# ----------------------------------------------------------------------------------------
# Reference equivalence
# ----------------------------------------------------------------------------------------

CASES = [
    (plain, dict(threshold=0.05)),
    (plain, dict(schedule="fixed", batch_size=3)),
    (lambda: tree(0.3), dict(threshold=0.02)),
    (lambda: tree(0.3 / math.sqrt(3)), dict(threshold=0.02)),
    (lambda: dp20(2.0, 0.1), dict(threshold=1e-3)),
    (lambda: dp20(2.0, 0.1, "claimed"), dict(threshold=1e-3)),
    (lambda: tree(0.3), dict(schedule="fixed", batch_size=5)),
    (lambda: tree(0.3), dict(threshold=0.02, reward_bound=0.3)),
    (plain, dict(schedule="fixed", batch_size=3, local_updates=True)),
    (lambda: tree(0.3), dict(schedule="fixed", batch_size=5, local_updates=True)),
    (lambda: dp20(2.0, 0.1), dict(schedule="fixed", batch_size=4, reward_bound=1.0)),
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("shared", [False, True])
def test_same_decisions_as_reference(case, shared):
    make, kw = CASES[case]
    T, R, M, K, d = 30, 4, 3, 5, 3
    env = _random_users(1, T, R, M, K, d, shared=shared)
    learner = FedUCB(make(), n_agents=M, dim=d, horizon=T, beta_scale=0.3, refresh=7, **kw)
    res = learner.run(env, np.random.default_rng(3), record_arms=True)
    actions, sync, regret, _ = reference_feducb(learner, env, np.random.default_rng(3))
    np.testing.assert_array_equal(res.extras["arms"], actions)
    np.testing.assert_array_equal(res.extras["sync"], sync)
    np.testing.assert_allclose(res.per_round(), regret, atol=1e-12)
    assert res.extras["n_syncs"].sum() > 0


def test_fixed_schedule_variants_differ_at_B_above_one_and_coincide_at_B_one():
    """The frozen variant (default) and DP20 as written (local_updates=True): other decisions at B > 1
    (so the reference cases of both variants test different code), the same ones at B = 1."""
    T, R, M, K, d = 30, 4, 3, 5, 3
    env = _random_users(1, T, R, M, K, d)

    def arms(B, local):
        learner = FedUCB(tree(0.3), n_agents=M, dim=d, horizon=T, beta_scale=0.3, schedule="fixed", batch_size=B,
                         local_updates=local)
        return learner.run(env, np.random.default_rng(3), record_arms=True).extras["arms"]

    assert not np.array_equal(arms(5, False), arms(5, True))
    np.testing.assert_array_equal(arms(1, False), arms(1, True))
    assert FedUCB(plain(), n_agents=M, dim=d, horizon=T, schedule="fixed", batch_size=5).local_updates is False
    assert FedUCB(plain(), n_agents=M, dim=d, horizon=T, threshold=1.0).local_updates is True


def test_frozen_variant_serves_every_agent_of_a_run_alike():
    """Frozen: within a batch every agent uses the same released statistics, so agents facing the same
    arms choose the same arm; as written they diverge once their own users differ."""
    T, R, M, K, d = 20, 2, 3, 5, 3
    rng = np.random.default_rng(7)
    f = rng.standard_normal((T, R, 1, K, d))
    f /= np.linalg.norm(f, axis=-1, keepdims=True)
    f = np.broadcast_to(f, (T, R, M, K, d)).copy()  # every agent sees the same arms
    means = f @ (np.ones(d) / math.sqrt(d))
    noise = 0.5 * rng.standard_normal((T, R, M))  # but its own rewards
    env = UsersEnv(f, means, noise, n_runs=R)
    frozen = FedUCB(plain(), n_agents=M, dim=d, horizon=T, schedule="fixed", batch_size=10, beta_scale=0.3)
    a = frozen.run(env, np.random.default_rng(0), record_arms=True).extras["arms"]
    assert (a == a[:, :, :1]).all()
    written = FedUCB(plain(), n_agents=M, dim=d, horizon=T, schedule="fixed", batch_size=10, beta_scale=0.3,
                     local_updates=True)
    b = written.run(env, np.random.default_rng(0), record_arms=True).extras["arms"]
    assert not (b == b[:, :, :1]).all()


def test_reference_test_can_fail():
    """Other draws (another seed) give other decisions: the equivalence test is not vacuous."""
    T, R, M, K, d = 30, 4, 3, 5, 3
    env = _random_users(1, T, R, M, K, d)
    learner = FedUCB(tree(0.3), n_agents=M, dim=d, horizon=T, beta_scale=0.3, threshold=0.02)
    res = learner.run(env, np.random.default_rng(3), record_arms=True)
    actions, _, _, _ = reference_feducb(learner, env, np.random.default_rng(4))
    assert not np.array_equal(res.extras["arms"], actions)


def test_runs_synchronize_at_different_rounds():
    """The masked update is exercised: runs with different data sync at different rounds."""
    T, R, M, K, d = 30, 4, 3, 5, 3
    env = _random_users(2, T, R, M, K, d)
    learner = FedUCB(tree(0.3), n_agents=M, dim=d, horizon=T, threshold=0.05, beta_scale=0.3)
    res = learner.run(env, np.random.default_rng(0), record_arms=True)
    assert len({tuple(row) for row in res.extras["sync"]}) > 1
    actions, sync, _, _ = reference_feducb(learner, env, np.random.default_rng(0))
    np.testing.assert_array_equal(res.extras["sync"], sync)
    np.testing.assert_array_equal(res.extras["arms"], actions)


def test_synthetic_env_runs_and_is_deterministic():
    env = SyntheticLinearEnv(4, n_arms=10, dim=4, n_runs=3, seed=0)
    learner = FedUCB(dp20(5.0), n_agents=4, dim=4, horizon=50, threshold=wang_threshold(50, 4, 4))
    a = learner.run(env, np.random.default_rng(1))
    b = learner.run(env, np.random.default_rng(1))
    assert isinstance(a, RunResult) and a.learner == "feducb" and a.protocol == "dp20"
    np.testing.assert_array_equal(a.regret, b.regret)
    np.testing.assert_array_equal(a.extras["sync"], b.extras["sync"])
    np.testing.assert_array_equal(a.t, np.arange(1, 51))
    assert a.regret.shape == (3, 50) and np.all(np.diff(a.regret, axis=1) >= -1e-12)
    for r in range(3):
        np.testing.assert_array_equal(a.extras["sync_times"][r], np.flatnonzero(a.extras["sync"][r]) + 1)


# ----------------------------------------------------------------------------------------
# Per-run tree steps through the protocol (what RunwiseTree did)
# ----------------------------------------------------------------------------------------


def _configured(protocol, M, d, K, R, rng=0):
    protocol.configure(n_agents=M, dim=d, n_batches=K, batch_size=1, schedule="adaptive")
    return protocol.reset(n_runs=R, rng=np.random.default_rng(rng))


def test_protocol_prefix_noise_variance_with_run_masks():
    """Prefix noise of a run at its step k has per-entry variance popcount(k)·M·σ₀².

    Half of 8000 runs synchronize at every call, the other half every second call, so
    the two halves' trees are at different steps.  Statistical test: per group and call
    4000 runs × 9 packed entries (bias and Gram upper triangle); the sample variance's
    relative s.e. is sqrt(2/36000) ≈ 0.75 %; a two-sided chi-square test at level 1e-4
    per (group, call), 14 + 7 tests: family-wise false-alarm rate < 2.1e-3.
    """
    R, M, d, sigma0 = 8000, 3, 3, 0.7
    p = _configured(tree(sigma0), M, d, 16, R, rng=11)
    every, second = np.arange(0, R, 2), np.arange(1, R, 2)
    k_second = 0
    lo, hi = stats.chi2.ppf([0.5e-4, 1 - 0.5e-4], df=every.size * 9)
    iu = np.triu_indices(d)
    for call in range(1, 15):
        runs = np.arange(R) if call % 2 == 0 else every
        bias, gram = p.synchronize(np.zeros((runs.size, M, d)), np.zeros((runs.size, M, d, d)), runs=runs)
        np.testing.assert_array_equal(gram, np.swapaxes(gram, 1, 2))  # symmetric noise
        packed = np.concatenate([bias, gram[:, iu[0], iu[1]]], axis=1)
        groups = [(every, call)]
        if call % 2 == 0:
            k_second += 1
            groups.append((second, k_second))
        for members, k in groups:
            rows = np.searchsorted(runs, members)
            want = bin(k).count("1") * M * sigma0**2
            stat = np.sum(packed[rows] ** 2) / want
            assert lo < stat < hi, (call, k, stat / (members.size * 9))
            assert p.prefix_noise_variance(k) == pytest.approx(want)


@given(
    st.integers(1, 4),
    st.integers(1, 3),
    st.lists(st.lists(st.booleans(), min_size=3, max_size=3), min_size=1, max_size=20),
)
@settings(max_examples=30, deadline=None)
def test_protocol_noise_is_independent_of_the_data(n_agents, d, masks):
    """Whatever rounds each run synchronizes at, prefix − running total is the data-free noise.

    Two protocols on the same stream, one fed random statistics and one zeros: their
    releases differ exactly by the running totals (up to rounding).
    """
    R = 3
    data = np.random.default_rng(0)
    a = _configured(tree(0.5), n_agents, d, len(masks), R, rng=1)
    b = _configured(tree(0.5), n_agents, d, len(masks), R, rng=1)
    total_u, total_G = np.zeros((R, d)), np.zeros((R, d, d))
    for mask in masks:
        idx = np.flatnonzero(mask)
        if idx.size == 0:
            continue
        u = data.standard_normal((idx.size, n_agents, d))
        G = data.standard_normal((idx.size, n_agents, d, d))
        G = G + np.swapaxes(G, -1, -2)
        total_u[idx] += u.sum(axis=1)
        total_G[idx] += G.sum(axis=1)
        ua, Ga = a.synchronize(u, G, runs=idx)
        ub, Gb = b.synchronize(np.zeros_like(u), np.zeros_like(G), runs=idx)
        np.testing.assert_allclose(ua - ub, total_u[idx], atol=1e-10)
        np.testing.assert_allclose(Ga - Gb, total_G[idx], atol=1e-10)


def test_protocol_rejects_a_run_past_its_steps():
    p = _configured(tree(1.0), 1, 2, 2, 2)
    for _ in range(2):
        p.synchronize(np.zeros((1, 1, 2)), np.zeros((1, 1, 2, 2)), runs=np.array([0]))
    with pytest.raises(ValueError, match="n_steps"):
        p.synchronize(np.zeros((1, 1, 2)), np.zeros((1, 1, 2, 2)), runs=np.array([0]))
    p.synchronize(np.zeros((1, 1, 2)), np.zeros((1, 1, 2, 2)), runs=np.array([1]))  # the other run is behind
    with pytest.raises(ValueError, match="runs"):
        p.synchronize(np.zeros((2, 1, 2)), np.zeros((2, 1, 2, 2)), runs=np.array([1, 0]))


# ----------------------------------------------------------------------------------------
# Noise accounting: the server's total injected variance
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("noise, factor", [("corrected", "M"), ("claimed", "1")])
def test_measured_total_variance(noise, factor):
    """Measured per-entry variance of Σ_i Z is Mσ² (DP20 as written) or σ² (as claimed).

    Statistical test: 8 runs × 20 releases × 20 entries = 3200 entries, each Σ_i Z ~
    N(0, v₀); the sum of squares / v₀ is χ²(3200) under the hypothesis: two-sided test at
    level 1e-4 (false-alarm rate 1e-4 per case).  The other hypothesis (M = 8 times off)
    would fail it.
    """
    M, d, T = 8, 5, 40
    env = SyntheticLinearEnv(M, n_arms=6, dim=d, n_runs=8, seed=0)
    learner = FedUCB(dp20(1.0, 0.1, noise), n_agents=M, dim=d, horizon=T, schedule="fixed", batch_size=2)
    res = learner.run(env, np.random.default_rng(5))
    sigma2 = dp20_sigma(1.0, 0.1, T) ** 2
    want = sigma2 * (M if factor == "M" else 1)
    n = int(res.extras["n_syncs"].sum()) * (d * (d + 1) // 2 + d)
    assert n == 8 * 20 * 20
    assert learner.protocol.randomizer.noise_count.sum() == n
    lo, hi = stats.chi2.ppf([0.5e-4, 1 - 0.5e-4], df=n)
    assert lo < res.extras["measured_total_variance"] * n / want < hi
    assert not lo < res.extras["measured_total_variance"] * n / (want * M if factor == "1" else want / M) < hi
    np.testing.assert_allclose(np.nanmean(res.extras["measured_noise_variance"]), res.extras["measured_total_variance"])
    assert res.calibration["nominal_total_variance"] == pytest.approx(want)
    assert learner.protocol.node_noise_std() ** 2 == pytest.approx(want)


def test_no_noise_measures_nothing():
    env = SyntheticLinearEnv(2, n_arms=4, dim=3, n_runs=2, seed=0)
    res = FedUCB(plain(), n_agents=2, dim=3, horizon=20, schedule="fixed", batch_size=4).run(env, np.random.default_rng(0))
    assert math.isnan(res.extras["measured_total_variance"])
    assert np.isnan(res.extras["measured_noise_variance"]).all()
    assert res.extras["n_syncs"].tolist() == [5, 5]
    assert res.noise_variance == 0.0
    assert res.communication.rounds == 5 and res.communication.messages == 10


def test_noise_variance_is_the_largest_prefix_variance():
    """RunResult.noise_variance = max over the steps reached of popcount(k)·M·σ₀²."""
    M, d, T, B = 3, 3, 24, 2  # 12 synchronizations: popcount is largest (3) at k = 7 and 11
    env = SyntheticLinearEnv(M, n_arms=4, dim=d, n_runs=2, seed=0)
    learner = FedUCB(tree(0.4), n_agents=M, dim=d, horizon=T, schedule="fixed", batch_size=B)
    res = learner.run(env, np.random.default_rng(0))
    want = max(bin(k).count("1") for k in range(1, T // B + 1)) * M * 0.4**2
    assert res.noise_variance == pytest.approx(want)
    assert [learner.max_prefix_noise_variance(k) / (M * 0.16) for k in (1, 2, 3, 6, 7, 8)] == pytest.approx(
        [1, 1, 2, 2, 3, 3])


# ----------------------------------------------------------------------------------------
# Accounting
# ----------------------------------------------------------------------------------------


def test_adaptive_schedule_voids_the_claim():
    learner = FedUCB(dp20(1.0, 1e-5), n_agents=3, dim=3, horizon=16, threshold=1.0)
    acc = learner.accounting()
    assert acc.status == "invalid" and acc.epsilon == math.inf and not acc.private
    assert "Example 4.1" in acc.notes and "Zhou & Chowdhury 2023, Sec. 4" in acc.theorem
    assert acc.target_epsilon == 1.0 and acc.target_delta == 1e-5
    env = _random_users(0, 16, 2, 3, 4, 3)
    assert learner.run(env, np.random.default_rng(0)).accounting == acc


def test_fixed_schedule_has_the_protocols_accounting():
    for kw in (dict(), dict(reward_bound=1.0)):
        learner = FedUCB(dp20(1.0, 1e-5), n_agents=3, dim=3, horizon=16, schedule="fixed", batch_size=4, **kw)
        assert learner.accounting() == learner.protocol.accounting()
    # DP20 as written does not clip rewards: the sensitivity assumption fails
    unclipped = FedUCB(dp20(1.0, 1e-5), n_agents=3, dim=3, horizon=16, schedule="fixed", batch_size=4)
    assert unclipped.accounting().status == "invalid"
    clipped = FedUCB(dp20(1.0, 1e-5), n_agents=3, dim=3, horizon=16, schedule="fixed", batch_size=4, reward_bound=1.0)
    acc = clipped.accounting()
    assert acc.status == "verified" and acc.epsilon <= 1.0  # DP20's σ per silo suffices for a fixed schedule
    explicit = FedUCB(tree(50.0), n_agents=3, dim=3, horizon=16, schedule="fixed", batch_size=4, reward_bound=1.0)
    assert math.isfinite(explicit.accounting().epsilon)  # an explicit σ₀: the guarantee is computed
    assert FedUCB(plain(), n_agents=3, dim=3, horizon=16, threshold=1.0).accounting().status == "none"


def test_fixed_schedule_as_written_is_accounted_invalid():
    """DP20 as written (local_updates=True) on a fixed schedule with B > 1: one user moves its agent's batch sum,
    so the claim is kept but the status is invalid; at B = 1, or without privacy, nothing changes."""
    from fedbandit.learners.fixed_batch import WITHIN_BATCH_LEAK

    kw = dict(n_agents=3, dim=3, horizon=16, schedule="fixed", reward_bound=1.0)
    frozen = FedUCB(dp20(1.0, 1e-5), batch_size=4, **kw).accounting()
    written = FedUCB(dp20(1.0, 1e-5), batch_size=4, local_updates=True, **kw).accounting()
    assert frozen.status == "verified"
    assert written.status == "invalid" and written.epsilon == math.inf and WITHIN_BATCH_LEAK in written.notes
    assert written.target_epsilon == 1.0 and written.relation == frozen.relation
    one = FedUCB(dp20(1.0, 1e-5), batch_size=1, local_updates=True, **kw).accounting()
    assert one == FedUCB(dp20(1.0, 1e-5), batch_size=1, **kw).accounting() and one.status == "verified"
    assert FedUCB(plain(), batch_size=4, local_updates=True, **kw).accounting().status == "none"
    env = _random_users(0, 16, 2, 3, 4, 3)
    res = FedUCB(dp20(1.0, 1e-5), batch_size=4, local_updates=True, **kw).run(env, np.random.default_rng(0))
    assert res.accounting == written and res.calibration["local_updates"] is True


# ----------------------------------------------------------------------------------------
# Schedules
# ----------------------------------------------------------------------------------------


@given(st.integers(1, 40), st.integers(1, 40))
@settings(max_examples=25, deadline=None)
def test_fixed_schedule_syncs_at_multiples_of_B(T, B):
    B = min(B, T)
    env = SyntheticLinearEnv(2, n_arms=4, dim=2, n_runs=2, seed=0)
    res = FedUCB(plain(), n_agents=2, dim=2, horizon=T, schedule="fixed", batch_size=B).run(env, np.random.default_rng(0))
    assert res.extras["sync_times"][1].tolist() == list(range(B, T + 1, B))


def test_huge_threshold_never_syncs_and_tiny_threshold_always():
    env = SyntheticLinearEnv(3, n_arms=5, dim=3, n_runs=2, seed=1)
    never = FedUCB(plain(), n_agents=3, dim=3, horizon=30, threshold=1e9).run(env, np.random.default_rng(0))
    assert never.extras["n_syncs"].tolist() == [0, 0]
    assert never.extras["first_sync"].tolist() == [31, 31]
    always = FedUCB(plain(), n_agents=3, dim=3, horizon=30, threshold=1e-12).run(env, np.random.default_rng(0))
    assert always.extras["n_syncs"].tolist() == [30, 30]
    assert always.communication.rounds == 30


def test_calibration_formulas():
    assert dp20_m(1024) == 11 and dp20_m(1000) == 11 and dp20_m(1) == 1
    s = dp20_sigma(2.0, 1e-3, 1000)
    assert s == pytest.approx(math.sqrt(16 * 11) * math.log(1e3) / 2.0)
    assert wang_threshold(100, 5, 2) == pytest.approx(100 * math.log(100) / 10)
    assert noise_norm_bound(0.0, 3, 10) == 0.0
    claimed = FedUCB(dp20(1.0, 0.1, "claimed"), n_agents=4, dim=3, horizon=100, threshold=1.0)
    corrected = FedUCB(dp20(1.0, 0.1), n_agents=4, dim=3, horizon=100, threshold=1.0)
    assert corrected.calibration()["sigma0"] == pytest.approx(dp20_sigma(1.0, 0.1, 100))
    assert claimed.calibration()["sigma0"] == pytest.approx(corrected.calibration()["sigma0"] / 2)
    assert corrected.total_sigma == pytest.approx(2 * claimed.total_sigma)
    assert corrected.total_sigma == pytest.approx(2 * dp20_sigma(1.0, 0.1, 100))  # sqrt(M)·σ
    assert corrected.shift == pytest.approx(2 * claimed.shift)
    assert corrected.lam0 == pytest.approx(1 + 2 * noise_norm_bound(corrected.total_sigma, 3, 100))
    flat = FedUCB(plain(), n_agents=4, dim=3, horizon=100, threshold=1.0)
    assert flat.lam0 == 1.0 and flat.beta(1) < claimed.beta(1) < corrected.beta(1)
    assert FedUCB(plain(), n_agents=4, dim=3, horizon=100, threshold=1.0, shift=2.5).lam0 == 3.5


# ----------------------------------------------------------------------------------------
# The configuration runner
# ----------------------------------------------------------------------------------------

BASE = dict(learner="feducb", instance="synthetic", M=3, T=40, d=3, K=5, runs=2, env_seed=0)


def test_run_config():
    res = run_config(dict(BASE, protocol="dp20", noise="corrected", epsilon=5.0, delta=0.1, schedule="adaptive",
                          D="wang"), np.random.default_rng(0))
    assert isinstance(res, RunResult) and res.regret.shape == (2, 40) and res.t[-1] == 40
    assert res.calibration["D"] == pytest.approx(wang_threshold(40, 3, 3))
    assert res.accounting.status == "invalid"
    res = run_config(dict(BASE, protocol="non-private", schedule="fixed", B="optimal", n_checkpoints=8),
                     np.random.default_rng(0))
    assert res.extras["n_syncs"].tolist() == [10, 10]  # B = 4 is the divisor of 40 closest to sqrt(40/3)
    assert res.regret.shape == (2, 8) and res.accounting.status == "none"
    claimed = run_config(dict(BASE, protocol="dp20", noise="claimed", epsilon=5.0, delta=0.1, schedule="fixed", B=8),
                         np.random.default_rng(0))
    assert claimed.calibration["B"] == 8 and claimed.calibration["rule"] == "dp20-claimed"
    written = run_config(dict(BASE, protocol="dp20", noise="corrected", epsilon=5.0, delta=0.1, schedule="fixed", B=8,
                              reward_bound=1.0, local_updates=True), np.random.default_rng(0))
    assert written.calibration["local_updates"] is True and written.accounting.status == "invalid"
    frozen = run_config(dict(BASE, protocol="dp20", noise="corrected", epsilon=5.0, delta=0.1, schedule="fixed", B=8,
                             reward_bound=1.0), np.random.default_rng(0))
    assert frozen.calibration["local_updates"] is False and frozen.accounting.status == "verified"
    shared = run_config(dict(BASE, protocol="non-private", B=8), np.random.default_rng(0))  # adaptive: B unused
    assert shared.calibration["B"] is None and shared.calibration["schedule"] == "adaptive"
    # the same learner built directly gives the same result (run_config only routes keys)
    env = SyntheticLinearEnv(3, 5, 3, n_runs=2, seed=0)
    direct = FedUCB(dp20(5.0, 0.1, "claimed"), n_agents=3, dim=3, horizon=40, schedule="fixed", batch_size=8)
    np.testing.assert_array_equal(direct.run(env, np.random.default_rng(0)).regret[:, -1], claimed.cum_regret)


@pytest.mark.parametrize(
    "extra, match",
    [
        (dict(protocol="non-private", schedule="fixed", D=1.0), "D="),
        (dict(protocol="non-private", threshold=1.0), "threshold"),
        (dict(protocol="non-private", D="big"), "D"),
        (dict(protocol="non-private", schedule="fixed", B="best"), "B"),
        (dict(protocol="non-private", noise="corrected"), "noise"),
        (dict(protocol="dp20", noise="loud", epsilon=1.0, delta=0.1), "noise"),
        (dict(protocol="non-private", schedule="sometimes"), "schedule"),
    ],
)
def test_run_config_rejects_bad_keys(extra, match):
    with pytest.raises(ValueError, match=match):
        run_config(dict(BASE, **extra), np.random.default_rng(0))


# ----------------------------------------------------------------------------------------
# The Alice/Tracy leak
# ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def instance():
    return alice_tracy_instance(3, 8, 3, 16, seed=1)


def _dp20_mech(instance, eps=1.0):
    return DP20ScheduleMechanism(instance, dp20(eps, 1e-5))


def test_alice_threshold_of_the_mechanism(instance):
    mech = _dp20_mech(instance)
    lam0 = FedUCB(dp20(1.0, 1e-5), n_agents=3, dim=3, horizon=16, threshold=1.0).lam0
    assert mech.threshold == pytest.approx(alice_threshold(lam0))
    assert mech.learner.lam0 == lam0
    explicit = DP20ScheduleMechanism(instance, dp20(1.0, 1e-5), threshold=0.5)
    assert explicit.threshold == 0.5


def test_dp20_schedule_mechanism(instance):
    private = dp20_schedule_mechanism(instance, 1.0, 1e-5)
    assert private.learner.protocol.name == "dp20" and private.learner.calibration()["rule"] == "dp20"
    assert private.threshold == _dp20_mech(instance).threshold
    flat = dp20_schedule_mechanism(instance, private=False)
    assert flat.learner.protocol.name == "non-private" and flat.learner.lam0 == 1.0
    for mech in (private, flat):  # the leak needs no noise: it is in the schedule
        assert mech(instance.dataset("alice"), np.random.default_rng(0), 3)["sync"][:, 0].all()
        assert not mech(instance.dataset("tracy"), np.random.default_rng(0), 3)["sync"][:, 0].any()
    with pytest.raises(TypeError, match="private"):
        dp20_schedule_mechanism(instance, 1.0, 1e-5, private=1)


def test_alice_triggers_the_first_round_sync_and_tracy_does_not(instance):
    mech = _dp20_mech(instance)
    alice = mech(instance.dataset("alice"), np.random.default_rng(0), 20)
    tracy = mech(instance.dataset("tracy"), np.random.default_rng(0), 20)
    assert alice["sync"][:, 0].all() and not tracy["sync"][:, 0].any()
    assert (FirstSync()(alice) > FirstSync()(tracy)).all()
    again = mech(instance.dataset("alice"), np.random.default_rng(0), 20)  # no state carried between calls
    np.testing.assert_array_equal(again["actions"], alice["actions"])


def test_audit_of_the_schedule_exceeds_the_claim(instance):
    """With TPR = 1 and FPR = 0 the 95 % bound is ln(q/(1−q)), q = 0.025^{1/n}."""
    mech = _dp20_mech(instance)
    n = 400
    res = audit_epsilon(
        mech, instance.dataset("tracy"), instance.dataset("alice"), SyncAt(1), 0.5, n,
        delta=1e-5, rng=np.random.default_rng(1), vectorized=True,
    )
    q = 0.025 ** (1 / n)
    assert res.tpr == 1.0 and res.fpr == 0.0
    assert res.epsilon_lower == pytest.approx(math.log((q - 1e-5) / (1 - q)), rel=1e-6)
    assert res.epsilon_lower > 1.0


def test_fixed_batch_schedule_does_not_leak(instance):
    mech = FixedBatchScheduleMechanism(instance, 1.0, 1e-5, 4)
    a = mech(instance.dataset("alice"), np.random.default_rng(0), 10)
    t = mech(instance.dataset("tracy"), np.random.default_rng(0), 10)
    np.testing.assert_array_equal(a["sync"], t["sync"])
    assert a["sync"][0].nonzero()[0].tolist() == [3, 7, 11, 15]
    assert a["actions"].shape == (10, 16)
    res = audit_epsilon(
        mech, instance.dataset("tracy"), instance.dataset("alice"), SyncAt(4), 0.5, 200,
        delta=1e-5, rng=np.random.default_rng(1), vectorized=True,
    )
    assert res.epsilon_lower == 0.0


def test_recording_protocol_releases_what_its_base_releases():
    """Same parts, target and draws as the created protocol; records the rounds."""

    class Tracker:
        current_round = 0

    tracker = Tracker()
    base = create("silo-ldp", epsilon=1.0, delta=1e-5, calibration="paper")
    rec = RecordingProtocol(create("silo-ldp", epsilon=1.0, delta=1e-5, calibration="paper"), tracker)
    for p in (base, rec):
        p.configure(n_agents=2, dim=2, n_batches=4, batch_size=1).reset(n_runs=3, rng=np.random.default_rng(0))
    data = np.random.default_rng(1).standard_normal((3, 2, 2))
    for k in (1, 2, 3):
        tracker.current_round = 5 * k
        for x, y in zip(base.synchronize(data, data[..., None] * data[..., None, :]),
                        rec.synchronize(data, data[..., None] * data[..., None, :])):
            np.testing.assert_array_equal(x, y)
    assert rec.sync_rounds == [5, 10, 15]
    assert rec.accounting() == base.accounting() and rec.model == base.model
    with pytest.raises(TypeError, match="base"):
        RecordingProtocol(object(), tracker)


def test_select_action_attack(instance):
    mech = _dp20_mech(instance)
    attack, info = select_action_attack(
        mech, instance.dataset("tracy"), instance.dataset("alice"), 2, 50, np.random.default_rng(0)
    )
    assert isinstance(attack, ActionIs) and attack.t == 2 and info["n"] == 50
    out = mech(instance.dataset("alice"), np.random.default_rng(1), 5)
    assert attack(out).shape == (5,)


def test_mechanisms_pickle(instance):
    mech = _dp20_mech(instance)
    mech(instance.dataset("alice"), np.random.default_rng(0), 50)
    small = len(pickle.dumps(_dp20_mech(instance)))
    assert len(pickle.dumps(mech)) == small  # a call leaves no run state behind
    for m in (mech, FixedBatchScheduleMechanism(instance, 1.0, 1e-5, 4)):
        back = pickle.loads(pickle.dumps(m))
        np.testing.assert_array_equal(back(instance.dataset("tracy"), np.random.default_rng(2), 3)["actions"],
                                      m(instance.dataset("tracy"), np.random.default_rng(2), 3)["actions"])
    assert pickle.loads(pickle.dumps(SyncAt(3))).t == 3


def test_neighbouring_datasets(instance):
    from fedbandit.audit.epsilon import is_neighbouring

    assert is_neighbouring(instance.dataset("alice"), instance.dataset("tracy"))
    feats, means, noise = instance.full_data(instance.dataset("alice"))
    assert np.linalg.norm(feats[0, instance.silo], axis=-1).min() >= 0.9
    assert np.linalg.norm(feats[1:, instance.silo], axis=-1).max() <= 0.5 + 1e-12


# ----------------------------------------------------------------------------------------
# Bad input
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(threshold=0.0), "threshold"),
        (dict(threshold=-1.0), "threshold"),
        (dict(threshold=float("nan")), "threshold"),
        (dict(), "threshold"),
        (dict(threshold=1.0, schedule="sometimes"), "schedule"),
        (dict(schedule="fixed"), "batch_size"),
        (dict(schedule="fixed", batch_size=0), "batch_size"),
        (dict(schedule="fixed", batch_size=11), "batch_size"),
        (dict(schedule="fixed", batch_size=2, threshold=1.0), "threshold"),
        (dict(threshold=1.0, batch_size=2), "batch_size"),
        (dict(threshold=1.0, lam=0.0), "lam"),
        (dict(threshold=1.0, shift="big"), "shift"),
        (dict(threshold=1.0, shift=-1.0), "shift"),
        (dict(threshold=1.0, alpha=1.5), "alpha"),
        (dict(threshold=1.0, reward_bound=0.0), "reward_bound"),
        (dict(threshold=1.0, feature_bound=-1.0), "feature_bound"),
        (dict(threshold=1.0, local_updates=False), "local_updates"),
        (dict(schedule="fixed", batch_size=2, local_updates=1), "local_updates"),
    ],
)
def test_bad_learner_arguments(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        FedUCB(plain(), n_agents=2, dim=3, horizon=10, **kwargs)


def test_bad_protocols():
    with pytest.raises(TypeError, match="protocol"):
        FedUCB("dp20", n_agents=2, dim=3, horizon=10, threshold=1.0)
    with pytest.raises(TypeError, match="protocol"):
        FedUCB(object(), n_agents=2, dim=3, horizon=10, threshold=1.0)
    with pytest.raises(ValueError, match="every user's record"):
        FedUCB(create("sdp-vector-sum", epsilon=1.0, delta=0.1), n_agents=2, dim=3, horizon=10, threshold=1.0)
    with pytest.raises(ValueError, match="epsilon"):
        create("dp20", epsilon=0.0, delta=0.1)
    with pytest.raises(ValueError, match="delta"):
        create("dp20", epsilon=1.0, delta=1.0)


@pytest.mark.parametrize("kw, match", [(dict(n_agents=0), "n_agents"), (dict(dim=0), "dim"), (dict(horizon=0), "horizon")])
def test_bad_sizes(kw, match):
    with pytest.raises(ValueError, match=match):
        FedUCB(plain(), **{**dict(n_agents=2, dim=3, horizon=10), **kw}, threshold=1.0)


def test_environment_shape_mismatch():
    learner = FedUCB(plain(), n_agents=2, dim=3, horizon=10, threshold=1.0)
    with pytest.raises(ValueError, match="n_agents"):
        learner.run(SyntheticLinearEnv(3, n_arms=4, dim=3), np.random.default_rng(0))
    with pytest.raises(ValueError, match="dim"):
        learner.run(SyntheticLinearEnv(2, n_arms=4, dim=4), np.random.default_rng(0))
    with pytest.raises(TypeError, match="env"):
        learner.run(object(), np.random.default_rng(0))
    with pytest.raises(TypeError, match="rng"):
        learner.run(SyntheticLinearEnv(2, n_arms=4, dim=3), None)
    with pytest.raises(TypeError, match="record_arms"):
        learner.run(SyntheticLinearEnv(2, n_arms=4, dim=3), np.random.default_rng(0), record_arms=1)


def test_bad_audit_inputs(instance):
    with pytest.raises(ValueError, match="r_alice"):
        alice_tracy_instance(3, 4, 3, 8, r_typical=0.5, r_alice=(0.4, 0.6))
    with pytest.raises(ValueError, match="n_agents"):
        alice_tracy_instance(1, 4, 3, 8)
    with pytest.raises(ValueError, match="observer"):
        alice_tracy_instance(3, 4, 3, 8, silo=1, observer=1)
    with pytest.raises(ValueError, match="dataset"):
        instance.full_data(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="first_user"):
        instance.dataset("bob")
    with pytest.raises(ValueError, match="r_alice_min"):
        alice_threshold(10.0, 0.5, 0.4)
    with pytest.raises(ValueError, match="batch_size"):
        FixedBatchScheduleMechanism(instance, 1.0, 1e-5, 5)  # 5 does not divide T = 16
    with pytest.raises(ValueError, match="threshold"):
        DP20ScheduleMechanism(instance, dp20(), threshold="bob")
    with pytest.raises(ValueError, match="threshold"):
        DP20ScheduleMechanism(instance, dp20(), learner_kwargs=dict(threshold=1.0))
    with pytest.raises(TypeError, match="learner_kwargs"):
        DP20ScheduleMechanism(instance, dp20(), learner_kwargs=[1])


def test_nesting_holds_without_noise_and_breaks_with_it():
    """Noise-free synchronized Gram matrices are nested; DP20's tree noise breaks that."""
    env = SyntheticLinearEnv(4, n_arms=6, dim=4, n_runs=3, seed=0)
    flat = FedUCB(plain(), n_agents=4, dim=4, horizon=64, schedule="fixed", batch_size=2).run(env, np.random.default_rng(0))
    assert flat.extras["n_nonmonotone"].sum() == 0
    noisy = FedUCB(dp20(1.0, 0.1), n_agents=4, dim=4, horizon=64, schedule="fixed", batch_size=2)
    res = noisy.run(env, np.random.default_rng(0))
    assert res.extras["n_nonmonotone"].sum() > 0 and res.extras["n_indefinite"].sum() == 0


def test_mechanisms_reject_bad_instances():
    with pytest.raises(TypeError, match="instance"):
        DP20ScheduleMechanism(object(), dp20())
    with pytest.raises(TypeError, match="instance"):
        FixedBatchScheduleMechanism(object(), 1.0, 0.1, 2)


def test_rejects_features_beyond_the_bound():
    env = _random_users(0, 5, 1, 2, 3, 2)
    env.features = env.features * 3.0
    with pytest.raises(ValueError, match="feature_bound"):
        FedUCB(plain(), n_agents=2, dim=2, horizon=5, threshold=1.0).run(env, np.random.default_rng(0))


@pytest.mark.parametrize("protocol", ["non-private", "dp20"])
def test_table_arms_served_round_by_round_equal_the_block_features(protocol):
    # real data (arms are rows of a table): FedUCB forms each round's features from the rows and checks the
    # norms on the table; the plain reference, the same blocks with their features formed in full
    # (RoundBlock.features), gives the same run bit for bit
    import dataclasses

    from fedbandit.envs.factory import make_environment
    from fedbandit.learners.dp20 import FedUCB

    cfg = dict(learner="feducb", protocol=protocol, instance="real", M=3, T=40, runs=2, max_arms=6, env_seed=0,
               noise_bound=1.0, param_bound=1.0)
    if protocol == "dp20":
        cfg.update(epsilon=4.0, delta=1e-5)
    env = make_environment(cfg)

    class Materialized:
        n_agents, dim, n_runs = env.n_agents, env.dim, env.n_runs

        def iter_blocks(self, horizon):
            for b in env.iter_blocks(horizon):
                assert b._features is None and b.table is not None  # the lazy path is the one under test
                yield dataclasses.replace(b, _features=b.features, table=None)

    lazy = FedUCB.from_config(cfg, env).run(env, np.random.default_rng(3), record_arms=True)
    plain = FedUCB.from_config(cfg, env).run(Materialized(), np.random.default_rng(3), record_arms=True)
    np.testing.assert_array_equal(lazy.regret, plain.regret)
    np.testing.assert_array_equal(lazy.extras["arms"], plain.extras["arms"])
    np.testing.assert_array_equal(lazy.extras["sync"], plain.extras["sync"])

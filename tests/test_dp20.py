"""Tests of DP20's FedUCB (fedbandit.learners.dp20) and the schedule audit (fedbandit.audit.schedule)."""

import math
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbandit.audit.epsilon import audit_epsilon
from fedbandit.audit.schedule import ActionIs, DP20ScheduleMechanism, FirstSync, FixedBatchScheduleMechanism, SyncAt, alice_threshold, alice_tracy_instance, select_action_attack
from fedbandit.envs.users import UsersEnv
from fedbandit.envs.linear import SyntheticLinearEnv
from fedbandit.learners.dp20 import FedUCB, RunwiseTree, noise_bound, simulate, wang_threshold
from fedbandit.accounting.calibration import dp20_m, dp20_sigma

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


# ----------------------------------------------------------------------------------------
# Reference equivalence
# ----------------------------------------------------------------------------------------

CASES = [
    dict(noise="none", threshold=0.05),
    dict(noise="none", schedule="fixed", batch_size=3),
    dict(noise="corrected", sigma=0.3, threshold=0.02),
    dict(noise="claimed", sigma=0.3, threshold=0.02),
    dict(noise="corrected", epsilon=2.0, delta=0.1, threshold=1e-3),
    dict(noise="corrected", sigma=0.3, schedule="fixed", batch_size=5),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("shared", [False, True])
def test_same_decisions_as_reference(case, shared):
    T, R, M, K, d = 30, 4, 3, 5, 3
    env = _random_users(1, T, R, M, K, d, shared=shared)
    learner = FedUCB(M, d, T, beta_scale=0.3, refresh=7, **case)
    res = learner.run(env, np.random.default_rng(3), record_actions=True)
    actions, sync, regret, _ = reference_feducb(learner, env, np.random.default_rng(3))
    np.testing.assert_array_equal(res.actions, actions)
    np.testing.assert_array_equal(res.sync, sync)
    np.testing.assert_allclose(res.regret, regret, atol=1e-12)
    assert res.n_syncs.sum() > 0


def test_runs_synchronize_at_different_rounds():
    """The masked update is exercised: runs with different data sync at different rounds."""
    T, R, M, K, d = 30, 4, 3, 5, 3
    env = _random_users(2, T, R, M, K, d)
    learner = FedUCB(M, d, T, threshold=0.05, noise="corrected", sigma=0.3, beta_scale=0.3)
    res = learner.run(env, np.random.default_rng(0), record_actions=True)
    assert len({tuple(row) for row in res.sync}) > 1
    actions, sync, _, _ = reference_feducb(learner, env, np.random.default_rng(0))
    np.testing.assert_array_equal(res.sync, sync)
    np.testing.assert_array_equal(res.actions, actions)


def test_synthetic_env_runs_and_is_deterministic():
    env = SyntheticLinearEnv(4, n_arms=10, dim=4, n_runs=3, seed=0)
    learner = FedUCB(4, 4, 50, threshold=wang_threshold(50, 4, 4), noise="corrected", epsilon=5.0, delta=0.1)
    a = learner.run(env, np.random.default_rng(1))
    b = learner.run(env, np.random.default_rng(1))
    np.testing.assert_array_equal(a.regret, b.regret)
    np.testing.assert_array_equal(a.sync, b.sync)
    assert a.regret.shape == (3, 50) and np.all(a.regret >= -1e-12)


# ----------------------------------------------------------------------------------------
# Tree over synchronization rounds
# ----------------------------------------------------------------------------------------


@given(
    st.integers(1, 4),
    st.integers(1, 3),
    st.lists(st.lists(st.booleans(), min_size=3, max_size=3), min_size=1, max_size=20),
)
@settings(max_examples=40, deadline=None)
def test_runwise_tree_prefix_is_exact_without_noise(n_agents, d, masks):
    """Whatever rounds each run synchronizes at, the noise-free prefix is the running total."""
    R = 3
    rng = np.random.default_rng(0)
    tree = RunwiseTree(len(masks), R, d, n_agents, 0.0)
    total_G = np.zeros((R, d, d))
    total_u = np.zeros((R, d))
    for mask in masks:
        idx = np.flatnonzero(mask)
        if idx.size == 0:
            continue
        G = rng.standard_normal((idx.size, n_agents, d, d))
        u = rng.standard_normal((idx.size, n_agents, d))
        total_G[idx] += G.sum(axis=1)
        total_u[idx] += u.sum(axis=1)
        S, s, sq = tree.step(idx, G, u, None)
        np.testing.assert_allclose(S, total_G[idx], atol=1e-10)
        np.testing.assert_allclose(s, total_u[idx], atol=1e-10)
        assert np.all(sq == 0)


def test_runwise_tree_prefix_noise_variance():
    """Prefix noise at step k has per-entry variance popcount(k)·M·σ₀².

    Statistical test: 4000 runs × 3 bias entries per step; the sample variance's relative
    standard error is sqrt(2/12000) ≈ 1.3 %, and the tolerance is 6 % (> 4.5 s.e.; false
    alarm rate < 1e-5 per step, 7 steps).
    """
    R, M, d, sigma0 = 4000, 3, 3, 0.7
    tree = RunwiseTree(8, R, d, M, sigma0)
    rng = np.random.default_rng(11)
    idx = np.arange(R)
    for k in range(1, 8):
        S, u, _ = tree.step(idx, np.zeros((R, M, d, d)), np.zeros((R, M, d)), rng)
        want = bin(k).count("1") * M * sigma0**2
        assert abs(u.var() / want - 1) < 0.06
        np.testing.assert_allclose(S, np.swapaxes(S, 1, 2))  # symmetric noise


def test_runwise_tree_rejects_overflow():
    tree = RunwiseTree(2, 1, 2, 1, 0.0)
    for _ in range(2):
        tree.step(np.array([0]), np.zeros((1, 1, 2, 2)), np.zeros((1, 1, 2)))
    with pytest.raises(ValueError, match="n_steps"):
        tree.step(np.array([0]), np.zeros((1, 1, 2, 2)), np.zeros((1, 1, 2)))


# ----------------------------------------------------------------------------------------
# Noise accounting: the server's total injected variance
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("noise, factor", [("corrected", "M"), ("claimed", "1")])
def test_measured_total_variance(noise, factor):
    """Measured per-entry variance of Σ_i Z is Mσ² (DP20 as written) or σ² (as claimed).

    Statistical test: ≥ 8 runs × 20 releases × 20 entries = 3200 entries, relative s.e.
    ≈ 2.5 %; tolerance 12 % (> 4.5 s.e., false alarm rate < 1e-5).
    """
    M, d, T = 8, 5, 40
    env = SyntheticLinearEnv(M, n_arms=6, dim=d, n_runs=8, seed=0)
    learner = FedUCB(M, d, T, schedule="fixed", batch_size=2, noise=noise, epsilon=1.0, delta=0.1)
    res = learner.run(env, np.random.default_rng(5))
    want = learner.sigma**2 * (M if factor == "M" else 1)
    assert res.noise_count.sum() == 8 * 20 * (d * (d + 1) // 2 + d)
    assert abs(res.measured_total_variance / want - 1) < 0.12
    assert res.params["nominal_total_variance"] == pytest.approx(want)


def test_no_noise_measures_nothing():
    env = SyntheticLinearEnv(2, n_arms=4, dim=3, n_runs=2, seed=0)
    res = FedUCB(2, 3, 20, schedule="fixed", batch_size=4, noise="none").run(env, np.random.default_rng(0))
    assert math.isnan(res.measured_total_variance)
    assert res.n_syncs.tolist() == [5, 5]


# ----------------------------------------------------------------------------------------
# Schedules
# ----------------------------------------------------------------------------------------


@given(st.integers(1, 40), st.integers(1, 40))
@settings(max_examples=25, deadline=None)
def test_fixed_schedule_syncs_at_multiples_of_B(T, B):
    B = min(B, T)
    env = SyntheticLinearEnv(2, n_arms=4, dim=2, n_runs=2, seed=0)
    res = FedUCB(2, 2, T, schedule="fixed", batch_size=B, noise="none").run(env, np.random.default_rng(0))
    assert res.sync_times(1).tolist() == list(range(B, T + 1, B))


def test_huge_threshold_never_syncs_and_tiny_threshold_always():
    env = SyntheticLinearEnv(3, n_arms=5, dim=3, n_runs=2, seed=1)
    never = FedUCB(3, 3, 30, threshold=1e9, noise="none").run(env, np.random.default_rng(0))
    assert never.n_syncs.tolist() == [0, 0]
    assert never.first_sync().tolist() == [31, 31]
    always = FedUCB(3, 3, 30, threshold=1e-12, noise="none").run(env, np.random.default_rng(0))
    assert always.n_syncs.tolist() == [30, 30]


def test_calibration_formulas():
    assert dp20_m(1024) == 11 and dp20_m(1000) == 11 and dp20_m(1) == 1
    s = dp20_sigma(2.0, 1e-3, 1000)
    assert s == pytest.approx(math.sqrt(16 * 11) * math.log(1e3) / 2.0)
    assert wang_threshold(100, 5, 2) == pytest.approx(100 * math.log(100) / 10)
    assert noise_bound(0.0, 3, 10) == 0.0
    claimed = FedUCB(4, 3, 100, threshold=1.0, noise="claimed", epsilon=1.0, delta=0.1)
    corrected = FedUCB(4, 3, 100, threshold=1.0, noise="corrected", epsilon=1.0, delta=0.1)
    assert claimed.sigma0 == pytest.approx(corrected.sigma0 / 2)
    assert corrected.total_sigma == pytest.approx(2 * claimed.total_sigma)
    assert corrected.shift == pytest.approx(2 * claimed.shift)
    plain = FedUCB(4, 3, 100, threshold=1.0, noise="none")
    assert plain.lam0 == 1.0 and plain.beta(1) < claimed.beta(1) < corrected.beta(1)


# ----------------------------------------------------------------------------------------
# The Alice/Tracy leak
# ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def instance():
    return alice_tracy_instance(3, 8, 3, 16, seed=1)


def _dp20_mech(instance, eps=1.0):
    base = dict(noise="corrected", epsilon=eps, delta=1e-5)
    lam0 = FedUCB(3, 3, 16, threshold=1.0, **base).lam0
    return DP20ScheduleMechanism(instance, dict(base, threshold=alice_threshold(lam0)))


def test_alice_triggers_the_first_round_sync_and_tracy_does_not(instance):
    mech = _dp20_mech(instance)
    alice = mech(instance.dataset("alice"), np.random.default_rng(0), 20)
    tracy = mech(instance.dataset("tracy"), np.random.default_rng(0), 20)
    assert alice["sync"][:, 0].all() and not tracy["sync"][:, 0].any()
    assert (FirstSync()(alice) > FirstSync()(tracy)).all()


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
    res = audit_epsilon(
        mech, instance.dataset("tracy"), instance.dataset("alice"), SyncAt(4), 0.5, 200,
        delta=1e-5, rng=np.random.default_rng(1), vectorized=True,
    )
    assert res.epsilon_lower == 0.0


def test_select_action_attack(instance):
    mech = _dp20_mech(instance)
    attack, info = select_action_attack(
        mech, instance.dataset("tracy"), instance.dataset("alice"), 2, 50, np.random.default_rng(0)
    )
    assert isinstance(attack, ActionIs) and attack.t == 2 and info["n"] == 50
    out = mech(instance.dataset("alice"), np.random.default_rng(1), 5)
    assert attack(out).shape == (5,)


def test_mechanisms_pickle(instance):
    for mech in (_dp20_mech(instance), FixedBatchScheduleMechanism(instance, 1.0, 1e-5, 4)):
        assert pickle.loads(pickle.dumps(mech)) is not None
    assert pickle.loads(pickle.dumps(SyncAt(3))).t == 3


def test_neighbouring_datasets(instance):
    from fedbandit.audit.epsilon import is_neighbouring

    assert is_neighbouring(instance.dataset("alice"), instance.dataset("tracy"))
    feats, means, noise = instance.full_data(instance.dataset("alice"))
    assert np.linalg.norm(feats[0, instance.silo], axis=-1).min() >= 0.9
    assert np.linalg.norm(feats[1:, instance.silo], axis=-1).max() <= 0.5 + 1e-12


def test_simulate_summary():
    cfg = dict(M=3, T=40, d=3, K=5, runs=2, env_seed=0, noise="corrected", epsilon=5.0, delta=0.1,
               schedule="adaptive", D="wang")
    out = simulate(cfg, np.random.default_rng(0))
    assert out["regret"].shape == (2,) and out["curve"].shape == (2, 20)
    assert out["n_syncs"].shape == (2,)
    out = simulate(dict(cfg, schedule="fixed", B="optimal", noise="none"), np.random.default_rng(0))
    assert out["n_syncs"].tolist() == [10, 10]  # B = 4 is the divisor of 40 closest to sqrt(40/3)


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
        (dict(threshold=1.0, epsilon=0.0, delta=0.1), "epsilon"),
        (dict(threshold=1.0, epsilon=-1.0, delta=0.1), "epsilon"),
        (dict(threshold=1.0, epsilon=1.0, delta=1.0), "delta"),
        (dict(threshold=1.0, epsilon=1.0, delta=0.0), "delta"),
        (dict(threshold=1.0, noise="corrected"), "epsilon and delta"),
        (dict(threshold=1.0, noise="loud"), "noise"),
        (dict(threshold=1.0, schedule="sometimes"), "schedule"),
        (dict(schedule="fixed"), "batch_size"),
        (dict(schedule="fixed", batch_size=0), "batch_size"),
        (dict(schedule="fixed", batch_size=11), "batch_size"),
        (dict(threshold=1.0, batch_size=2), "batch_size"),
        (dict(threshold=1.0, noise="none", lam=0.0), "lam"),
        (dict(threshold=1.0, noise="none", shift="big"), "shift"),
        (dict(threshold=1.0, noise="none", shift=-1.0), "shift"),
        (dict(threshold=1.0, noise="none", alpha=1.5), "alpha"),
        (dict(threshold=1.0, noise="corrected", sigma=0.0), "sigma"),
    ],
)
def test_bad_learner_arguments(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        FedUCB(2, 3, 10, **kwargs)


@pytest.mark.parametrize("args, match", [((0, 3, 10), "n_agents"), ((2, 0, 10), "dim"), ((2, 3, 0), "horizon")])
def test_bad_sizes(args, match):
    with pytest.raises(ValueError, match=match):
        FedUCB(*args, threshold=1.0, noise="none")


def test_environment_shape_mismatch():
    learner = FedUCB(2, 3, 10, threshold=1.0, noise="none")
    with pytest.raises(ValueError, match="n_agents"):
        learner.run(SyntheticLinearEnv(3, n_arms=4, dim=3), np.random.default_rng(0))
    with pytest.raises(ValueError, match="dim"):
        learner.run(SyntheticLinearEnv(2, n_arms=4, dim=4), np.random.default_rng(0))
    with pytest.raises(TypeError, match="env"):
        learner.run(object(), np.random.default_rng(0))
    with pytest.raises(TypeError, match="rng"):
        learner.run(SyntheticLinearEnv(2, n_arms=4, dim=3), None)


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


def test_nesting_holds_without_noise_and_breaks_with_it():
    """Noise-free synchronized Gram matrices are nested; DP20's tree noise breaks that."""
    env = SyntheticLinearEnv(4, n_arms=6, dim=4, n_runs=3, seed=0)
    plain = FedUCB(4, 4, 64, schedule="fixed", batch_size=2, noise="none").run(env, np.random.default_rng(0))
    assert plain.n_nonmonotone.sum() == 0
    noisy = FedUCB(4, 4, 64, schedule="fixed", batch_size=2, noise="corrected", epsilon=1.0, delta=0.1)
    res = noisy.run(env, np.random.default_rng(0))
    assert res.n_nonmonotone.sum() > 0 and res.n_indefinite.sum() == 0


def test_runwise_tree_rejects_bad_arguments():
    tree = RunwiseTree(4, 2, 2, 1, 0.0)
    with pytest.raises(ValueError, match="idx"):
        tree.step(np.array([1, 0]), np.zeros((2, 1, 2, 2)), np.zeros((2, 1, 2)))
    with pytest.raises(ValueError, match="idx"):
        tree.step(np.array([2]), np.zeros((1, 1, 2, 2)), np.zeros((1, 1, 2)))
    with pytest.raises(ValueError, match="gram and bias"):
        tree.step(np.array([0]), np.zeros((1, 1, 3, 3)), np.zeros((1, 1, 2)))
    with pytest.raises(ValueError, match="sigma0"):
        RunwiseTree(4, 2, 2, 1, -1.0)


def test_mechanisms_reject_bad_instances():
    with pytest.raises(TypeError, match="instance"):
        DP20ScheduleMechanism(object(), {})
    with pytest.raises(TypeError, match="instance"):
        FixedBatchScheduleMechanism(object(), 1.0, 0.1, 2)


def test_rejects_features_beyond_the_bound():
    env = _random_users(0, 5, 1, 2, 3, 2)
    env.features = env.features * 3.0
    with pytest.raises(ValueError, match="feature_bound"):
        FedUCB(2, 2, 5, threshold=1.0, noise="none").run(env, np.random.default_rng(0))

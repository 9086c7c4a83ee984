"""Tests of the concurrent-shuffle protocol (fedbandit.protocols.concurrent) and its LinUCB learner."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from fedbandit.accounting.composition import advanced_composition, level_budget
from fedbandit.accounting.zcdp import calibrate_gaussian_sigma
from fedbandit.envs.linear import SyntheticLinearEnv
from fedbandit.envs.users import UserSequenceEnv
from fedbandit.experiments.runner import run_config
from fedbandit.experiments.trials import bandit_trial
from fedbandit.learners.concurrent_linucb import ConcurrentShuffleLinUCB
from fedbandit.mechanisms.tree import tree_depth
from fedbandit.protocols.base import Protocol
from fedbandit.protocols.concurrent import (
    ConcurrentShuffleProtocol,
    MixedRadixAnalyzer,
    RandomizedResponseRecords,
    concurrent_schedule,
    record_half_range,
    sequential_batch_sizes,
)
from fedbandit.protocols.intermediaries import ConcurrentShufflers, Identity
from fedbandit.protocols.registry import available, create
from fedbandit.protocols.statistics import n_coordinates

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference_continual import reference_concurrent_records  # noqa: E402


def _users(rng, n, runs, dim):
    x = rng.standard_normal((n, runs, dim))
    x /= np.maximum(1.0, np.linalg.norm(x, axis=-1, keepdims=True))
    y = np.clip(rng.standard_normal((n, runs)) * 0.5, -1, 1)
    iu, ju = np.triu_indices(dim)
    z = np.concatenate([x * y[..., None], x[..., iu] * x[..., ju]], axis=-1)
    return x, y, z


def _configured(sizes, n, dim=2, eps=2.0, delta=1e-6):
    proto = create("concurrent-shuffle", epsilon=eps, delta=delta, batch_sizes=sizes)
    a = sizes[-1]
    return proto.configure(n_agents=1, dim=dim, n_batches=n // a, batch_size=a, n_users=n)


def _sync(proto, x, y):
    """synchronize with the period's users x (b, R, d), y (b, R)."""
    bias = np.einsum("brd,br->rd", x, y)[:, None]
    gram = np.einsum("brd,bre->rde", x, x)[:, None]
    b_out, g_out = proto.synchronize(bias, gram, users=(x[:, :, None], y[:, :, None]))
    iu, ju = np.triu_indices(x.shape[-1])
    return np.concatenate([b_out, g_out[:, iu, ju]], axis=-1)


def test_registered_and_composed():
    assert "concurrent-shuffle" in available(kind="statistics")
    proto = create("concurrent-shuffle", epsilon=1.0, delta=1e-6, k=2)
    assert isinstance(proto, Protocol) and proto.kind == "statistics" and proto.relation == "replace"
    assert isinstance(proto.randomizer, RandomizedResponseRecords)
    assert isinstance(proto.intermediary, ConcurrentShufflers)
    assert isinstance(proto.analyzer, MixedRadixAnalyzer)
    assert set(proto.parts()) == {"R", "S", "A"}
    assert _configured((1,), 10).model == "LDP" and _configured((5,), 10).model == "SDP"
    assert _configured((8, 4), 16).model == "CSDP"
    assert "nobody" in _configured((1,), 10).trusted


@pytest.mark.parametrize("sizes", [(12, 4), (8, 4, 2, 1), (6,), (1,)])
def test_protocol_matches_reference_loop(sizes):
    """Same generator: the vectorized protocol and the plain per-user, per-coordinate loop
    (with the message-level server's mixed-radix walk) release the same prefix sums."""
    dim, n, runs = 2, 24, 3
    x, y, z = _users(np.random.default_rng(7), n, runs, dim)
    proto = _configured(sizes, n).reset(n_runs=runs, rng=np.random.default_rng(5))
    a = sizes[-1]
    fast = np.array([_sync(proto, x[t - a : t], y[t - a : t]) for t in range(a, n + 1, a)])
    ref = reference_concurrent_records(z, sizes, proto.randomizer.levels, record_half_range(dim),
                                       np.random.default_rng(5))
    np.testing.assert_allclose(fast, ref, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("sizes", [(12, 4), (8, 4, 2, 1), (5,), (1,)])
def test_protocol_unbiased_with_stated_variance(sizes):
    """Released sums are unbiased, with variance between the privacy noise and the stated bound.

    z-test per coordinate and release with |z| < 5 (Bonferroni over ≤ 5 × 24 tests, false
    alarm < 1e-4); the empirical variance must not exceed the bound of that release
    (privacy noise + rounding bound, ``prefix_noise_variance``) by more than 15 % nor fall
    below the privacy noise alone by more than 15 % (sampling error of a variance from
    4000 runs is about 2 %).
    """
    dim, n, runs = 2, 24, 4000
    rng = np.random.default_rng(sum(sizes))
    x, y, z = _users(rng, n, 1, dim)
    x, y = np.broadcast_to(x, (n, runs, dim)), np.broadcast_to(y, (n, runs))
    proto = _configured(sizes, n).reset(n_runs=runs, rng=rng)
    a = sizes[-1]
    levels = proto.randomizer.levels
    for k, t in enumerate(range(a, n + 1, a), start=1):
        out = _sync(proto, x[t - a : t], y[t - a : t])
        truth = z[:t, 0].sum(axis=0)
        bound = proto.prefix_noise_variance(k)  # every coordinate has s = 1 here
        digits = [t // sizes[0]] + [(t % sizes[i - 1]) // sizes[i] for i in range(1, len(sizes))]
        privacy = 4.0 * sum(c * lvl.variance for c, lvl in zip(digits, levels))
        zscore = (out.mean(axis=0) - truth) / np.sqrt(bound / runs)
        assert np.all(np.abs(zscore) < 5), (t, zscore)
        assert np.all(out.var(axis=0) <= 1.15 * bound), (t, out.var(axis=0), bound)
        assert np.all(out.var(axis=0) >= 0.85 * privacy), (t, out.var(axis=0), privacy)
    assert bound <= proto.server_noise_std() ** 2 * (1 + 1e-12)


def test_accounting_matches_composition_over_kD_mechanisms():
    """The event composes k·D = 18 mechanisms at (ε₀, δ₀) = level_budget(ε, δ, 18): the better of
    basic and advanced composition (δ' = δ/2), within the target; verified."""
    proto = create("concurrent-shuffle", epsilon=1.0, delta=1e-6, k=2)
    ConcurrentShuffleLinUCB(proto, n_users=5000, dim=3)
    acc = proto.accounting()
    cal = proto.calibration()
    m = 2 * n_coordinates(3)
    assert cal["mechanisms_per_user"] == m == 18 and cal["batches_certified"]
    eps0, delta0 = level_budget(1.0, 1e-6, m)
    assert (cal["epsilon0"], cal["delta0"]) == (eps0, delta0)
    basic = (m * eps0, m * delta0)
    expected = min(basic, advanced_composition(eps0, delta0, m, 1e-6 / 2.0))
    assert acc.status == "verified" and acc.relation == "replace"
    assert acc.epsilon == pytest.approx(expected[0], rel=1e-9) and acc.delta == pytest.approx(expected[1], rel=1e-9)
    assert acc.epsilon <= 1.0 + 1e-9 and acc.delta <= 1e-6 * (1 + 1e-9)
    assert proto.accounting("add-remove").epsilon == acc.epsilon  # a null record substituted
    # a level whose privacy-blanket certificate fails makes the whole run invalid
    proto.randomizer.certified = (True, False)
    bad = proto.accounting()
    assert bad.status == "invalid" and "level 2" in bad.notes


def test_schedules():
    assert sequential_batch_sizes(10_000) == (math.ceil(10_000**0.6),)
    assert sequential_batch_sizes(1) == (1,) and sequential_batch_sizes(3) == (2,)
    assert concurrent_schedule(1000, "log", 1.0, 1e-6, 2)[0] == 512
    assert len(concurrent_schedule(5000, 2, 1.0, 1e-6, 2)) == 2
    lr = ConcurrentShuffleLinUCB(create("concurrent-shuffle", epsilon=1.0, delta=1e-6, batch_sizes=(40, 8)), n_users=100,
                                 dim=2)
    assert lr.period == 8 and lr.protocol.n_batches == 12 and lr.protocol.n_users == 100
    assert ConcurrentShuffleLinUCB(create("concurrent-shuffle", epsilon=1.0, delta=1e-6, batch_sizes=(1,)),
                                   n_users=100, dim=2).period == 1


def test_schedule_with_a_given_period():
    """configure(batch_size=B) fixes b_k = B; the optimum with b_k fixed is the unconstrained one
    when that has b_k = B (what the learner relies on: it takes b_k of the optimum as its period)."""
    for n, k in ((800, 2), (2000, 2), (5000, 3), (20_000, 1), (20_000, 2)):
        sizes = concurrent_schedule(n, k, 10.0, 1e-6, 2)
        assert concurrent_schedule(n, k, 10.0, 1e-6, 2, finest=sizes[-1]) == sizes
    assert concurrent_schedule(100, "log", 1.0, 1e-6, 2, finest=4) == (64, 32, 16, 8, 4)
    proto = create("concurrent-shuffle", epsilon=2.0, delta=1e-3, k=2)
    proto.configure(n_agents=1, dim=2, n_batches=4, batch_size=4)
    assert proto.batch_sizes[-1] == 4 and proto.period == 4 and len(proto.batch_sizes) == 2
    with pytest.raises(ValueError, match="finest"):
        create("concurrent-shuffle", epsilon=2.0, delta=1e-3, k=3).configure(n_agents=1, dim=2, n_batches=2, batch_size=8)


def test_central_is_the_user_level_gaussian_tree():
    """create("central", relation="replace") with M = 1, B = 1: σ is the old stream's rule
    (σ = calibrate_gaussian_sigma(ε, δ, 2√2, L), L = ⌊log₂ n⌋ + 1: Δ = 2 per statistic under
    substitution), and the released prefixes carry per-entry noise variance (popcount k)σ².
    Chi-square-style check over 4000 runs: within 10 % (sampling error ≈ 2.3 % per entry)."""
    n, dim, runs = 20, 2, 4000
    lr = ConcurrentShuffleLinUCB(create("central", epsilon=1.0, delta=1e-6, relation="replace"), n_users=n, dim=dim)
    proto = lr.protocol
    sigma = proto.node_noise_std()
    assert sigma == pytest.approx(calibrate_gaussian_sigma(1.0, 1e-6, 2 * math.sqrt(2), tree_depth(n)), rel=1e-12)
    assert proto.server_noise_std() == pytest.approx(math.sqrt(tree_depth(n)) * sigma, rel=1e-12)
    assert proto.accounting().status == "verified" and proto.accounting().relation == "replace"
    x, y, z = _users(np.random.default_rng(0), n, 1, dim)
    proto.reset(n_runs=runs, rng=np.random.default_rng(1))
    for t in range(n):
        xt, yt = np.broadcast_to(x[t : t + 1], (1, runs, dim)), np.broadcast_to(y[t : t + 1], (1, runs))
        out = _sync(proto, xt, yt)
        noise = out - z[: t + 1, 0].sum(axis=0)
        var = proto.prefix_noise_variance(t + 1)
        assert var == pytest.approx(bin(t + 1).count("1") * sigma**2)
        assert np.all(np.abs(noise.var(axis=0) / var - 1) < 0.10), (t, noise.var(axis=0) / var)


def _env(runs=3, dim=2, seed=1, agents=1):
    return SyntheticLinearEnv(agents, n_arms=10, dim=dim, n_runs=runs, noise_std=0.1, shared_contexts=False,
                              means_from_raw=False, seed=seed)


def test_linucb_learns_with_little_noise():
    """With a large ε (ε₀ ≥ 5 per coordinate) the private learners behave like LinUCB: far below uniform play."""
    n = 1500
    env = _env()
    uniform = sum((b.best[:, :, 0] - b.means[:, :, 0].mean(axis=-1)).sum(axis=0) for b in env.iter_blocks(n))
    for name, kw in (("concurrent-shuffle", dict(k=2)), ("central", dict(relation="replace")),
                     ("concurrent-shuffle", dict(batch_sizes=(1,)))):
        lr = ConcurrentShuffleLinUCB(create(name, epsilon=100.0, delta=1e-6, **kw), n_users=n, dim=2, beta_scale=0.3)
        res = lr.run(_env(), np.random.default_rng(0), per_user=True)
        regret = res.extras["user_regret"]
        assert regret.shape == (3, n) and res.regret.shape == (3, n) and res.t[-1] == n
        assert np.all(regret >= -1e-12)
        np.testing.assert_allclose(res.regret, np.cumsum(regret, axis=1))
        assert np.all(res.cum_regret < 0.2 * uniform), (name, kw, res.cum_regret, uniform)
        assert res.accounting["status"] == "verified" and res.learner == "concurrent-linucb"


def test_non_private_protocol_is_plain_linucb():
    """create("non-private"): no noise, so λ = 1 and γ = 0, and the learner's regret is far below uniform play."""
    n = 600
    lr = ConcurrentShuffleLinUCB(create("non-private"), n_users=n, dim=2)
    assert lr.lam == 1.0 and lr.params["gamma"] == 0.0
    res = lr.run(_env(), np.random.default_rng(0))
    uniform = sum((b.best[:, :, 0] - b.means[:, :, 0].mean(axis=-1)).sum(axis=0) for b in _env().iter_blocks(n))
    assert np.all(res.cum_regret < 0.2 * uniform) and res.accounting["status"] == "none"


def test_communication_counts_one_bit_messages():
    n, dim = 100, 2
    lr = ConcurrentShuffleLinUCB(create("concurrent-shuffle", epsilon=1.0, delta=1e-6, batch_sizes=(40, 8)), n_users=n,
                                 dim=dim)
    res = lr.run(_env(dim=dim), np.random.default_rng(0))
    g = lr.protocol.randomizer.resolutions
    syncs = n // 8
    assert res.communication["rounds"] == syncs and res.communication["unit"] == "bits"
    assert res.communication["messages"] == syncs * 8 * n_coordinates(dim) * sum(g) == res.communication["bits"]


class _UnequalNormsEnv:
    """Linear bandit whose arm features have distinct norms < 1, so no two UCB scores tie
    (with equal-norm features the first scores tie exactly and float rounding decides)."""

    n_agents, n_arms, dim, n_runs = 1, 8, 2, 3

    def iter_blocks(self, horizon):
        from fedbandit.envs.linear import RoundBlock

        rng = np.random.default_rng(11)
        x = rng.standard_normal((horizon, self.n_runs, 1, self.n_arms, self.dim))
        x *= rng.uniform(0.2, 0.99, x.shape[:-1] + (1,)) / np.linalg.norm(x, axis=-1, keepdims=True)
        means = x @ np.array([0.6, -0.3])
        noise = 0.1 * rng.standard_normal((horizon, self.n_runs, 1))
        yield RoundBlock(0, x, means, means.max(axis=-1), noise)


def test_block_and_lean_paths_agree_for_one_user_batches():
    """A period-1 protocol through the lean one-user loop and through the general block loop:
    same arms, same regret, on the same draws."""
    n = 80
    for name, kw in (("concurrent-shuffle", dict(k="log")), ("central", dict(relation="replace"))):
        res = [
            ConcurrentShuffleLinUCB(create(name, epsilon=3.0, delta=1e-6, **kw), n_users=n, dim=2, lean=lean).run(
                _UnequalNormsEnv(), np.random.default_rng(3))
            for lean in (True, False)
        ]
        np.testing.assert_allclose(res[0].regret, res[1].regret, atol=1e-12)


def test_bandit_trial_outputs():
    cfg = dict(n=300, epsilon=10.0, delta=1e-6, dim=2, runs=2, n_arms=10,
               protocols=[{"label": "concurrent-1", "protocol": "concurrent-shuffle", "k": 1},
                          {"label": "sequential", "protocol": "concurrent-shuffle", "batch_sizes": [31]},
                          {"label": "central", "protocol": "central", "relation": "replace"}])
    out = bandit_trial(cfg, np.random.default_rng(0))
    for lab in ("concurrent-1", "sequential", "central"):
        assert out[lab].shape == (2,)
        assert out["curves"][lab].shape == out["checkpoints"].shape
        assert out["accounting"][lab]["status"] == "verified"
    assert out["batch_sizes"]["sequential"] == [31] and out["batch_sizes"]["central"] is None
    assert np.all(out["uniform"] > 0)
    with pytest.raises(ValueError, match="protocols"):
        bandit_trial(dict(cfg, protocols=[["concurrent", 1]]), np.random.default_rng(0))


def test_run_config_and_user_sequence_env():
    cfg = dict(learner="concurrent-linucb", protocol="concurrent-shuffle", k=2, epsilon=10.0, delta=1e-6, n=300, M=1,
               K=10, d=2, noise_std=0.1, runs=2, n_checkpoints=10)
    res = run_config(cfg, np.random.default_rng(0))
    assert res.t[-1] == 300 and res.regret.shape == (2, 10) and res.accounting["status"] == "verified"
    assert res.calibration["period"] == res.calibration["batch_sizes"][-1] and res.extras["agents_per_round"] == 1
    with pytest.raises(ValueError, match="M·T"):
        run_config(dict(cfg, M=2, T=100), np.random.default_rng(0))
    with pytest.raises(ValueError, match="'n'"):
        run_config({k: v for k, v in cfg.items() if k != "n"}, np.random.default_rng(0))
    # a federated instance (M agents, T rounds): its M·T users served in sequence
    # (UserSequenceEnv, round-major); the result is the group regret per round
    fed = dict(cfg, M=3, T=50, runs=2, n_checkpoints=None)
    del fed["n"]
    r_fed = run_config(dict(fed, n_checkpoints=50), np.random.default_rng(0))
    assert r_fed.t[-1] == 50 and r_fed.regret.shape == (2, 50) and r_fed.extras["agents_per_round"] == 3
    from fedbandit.envs.factory import make_environment

    lr = ConcurrentShuffleLinUCB(create("concurrent-shuffle", epsilon=10.0, delta=1e-6, k=2), n_users=150, dim=2,
                                 noise_bound=0.1, agents_per_round=3)
    direct = lr.run(make_environment(fed), np.random.default_rng(0), per_user=True)
    np.testing.assert_array_equal(direct.regret, r_fed.regret)
    per_round = direct.extras["user_regret"].reshape(2, 50, 3).sum(axis=2)
    np.testing.assert_array_equal(direct.regret, np.cumsum(per_round, axis=1))
    # the same users, wrapped by hand and served as one agent: the same per-user regret
    lr1 = ConcurrentShuffleLinUCB(create("concurrent-shuffle", epsilon=10.0, delta=1e-6, k=2), n_users=150, dim=2,
                                  noise_bound=0.1)
    one = lr1.run(UserSequenceEnv(make_environment(fed)), np.random.default_rng(0), per_user=True)
    np.testing.assert_array_equal(one.extras["user_regret"], direct.extras["user_regret"])
    assert one.t[-1] == 150


def test_bad_inputs():
    assert create("concurrent-shuffle", epsilon=1.0, delta=1e-6).k_rule == 1  # default: one shuffler
    with pytest.raises(ValueError, match="k"):
        create("concurrent-shuffle", epsilon=1.0, delta=1e-6, k=0)
    with pytest.raises(ValueError, match="k"):
        create("concurrent-shuffle", epsilon=1.0, delta=1e-6, k="tree")
    with pytest.raises(ValueError, match="k"):
        create("concurrent-shuffle", epsilon=1.0, delta=1e-6, k=2, batch_sizes=(4,))
    with pytest.raises(ValueError, match="not both"):
        create("concurrent-shuffle", epsilon=1.0, delta=1e-6, k="log", batch_sizes=(4, 2))
    with pytest.raises(ValueError, match="epsilon"):
        create("concurrent-shuffle", epsilon=0.0, delta=1e-6, k=1)
    with pytest.raises(ValueError, match="delta"):
        create("concurrent-shuffle", epsilon=1.0, delta=1.0, k=1)
    with pytest.raises(ValueError, match="batch_sizes"):
        create("concurrent-shuffle", epsilon=1.0, delta=1e-6, batch_sizes=(10, 3))
    with pytest.raises(ValueError, match="batch_sizes"):
        ConcurrentShuffleLinUCB(create("concurrent-shuffle", epsilon=1.0, delta=1e-6, batch_sizes=(200,)), n_users=100,
                                dim=2)
    with pytest.raises(ValueError, match="k"):
        ConcurrentShuffleLinUCB(create("concurrent-shuffle", epsilon=1.0, delta=1e-6, k=9), n_users=100, dim=2)
    with pytest.raises(ValueError, match="randomized-response.*identity"):
        ConcurrentShuffleProtocol(RandomizedResponseRecords(), Identity(), MixedRadixAnalyzer(), name="x",
                                  epsilon=1.0, delta=1e-6, k=1)
    proto = create("concurrent-shuffle", epsilon=1.0, delta=1e-6, batch_sizes=(4, 2))
    with pytest.raises(ValueError, match="n_agents"):
        proto.configure(n_agents=2, dim=2, n_batches=50, batch_size=2)
    with pytest.raises(ValueError, match="batch_size"):
        proto.configure(n_agents=1, dim=2, n_batches=25, batch_size=4)
    with pytest.raises(ValueError, match="reward_bound"):
        proto.configure(n_agents=1, dim=2, n_batches=50, batch_size=2, reward_bound=None)
    with pytest.raises(ValueError, match="schedule"):
        proto.configure(n_agents=1, dim=2, n_batches=50, batch_size=2, schedule="adaptive")
    proto.configure(n_agents=1, dim=2, n_batches=2, batch_size=2)
    proto.reset(n_runs=2, rng=np.random.default_rng(0))
    x, y = np.zeros((2, 2, 1, 2)), np.zeros((2, 2, 1))
    bias, gram = np.zeros((2, 1, 2)), np.zeros((2, 1, 2, 2))
    with pytest.raises(ValueError, match="users"):
        proto.synchronize(bias, gram, users=(x[:1], y[:1]))
    with pytest.raises(ValueError, match="users"):
        proto.synchronize(bias, gram)
    with pytest.raises(ValueError, match="runs"):
        proto.synchronize(bias, gram, users=(x, y), runs=[0])
    with pytest.raises(ValueError, match="bias"):
        proto.synchronize(bias[:, :, :1], gram, users=(x, y))
    proto.synchronize(bias, gram, users=(x, y))
    proto.synchronize(bias, gram, users=(x, y))
    with pytest.raises(ValueError, match="n_batches"):
        proto.synchronize(bias, gram, users=(x, y))
    with pytest.raises(TypeError, match="protocol"):
        ConcurrentShuffleLinUCB("central", n_users=10, dim=2)
    with pytest.raises(TypeError, match="reward_bound"):
        ConcurrentShuffleLinUCB(create("central", epsilon=1.0, delta=1e-6), n_users=10, dim=2, reward_bound=None)
    with pytest.raises(TypeError, match="lean"):
        ConcurrentShuffleLinUCB(create("central", epsilon=1.0, delta=1e-6), n_users=10, dim=2, lean=1)
    lr = ConcurrentShuffleLinUCB(create("concurrent-shuffle", epsilon=1.0, delta=1e-6, batch_sizes=(4, 2)), n_users=10,
                                 dim=2)
    with pytest.raises(ValueError, match="n_agents"):
        lr.run(_env(agents=2), np.random.default_rng(0))
    with pytest.raises(ValueError, match="agents_per_round"):
        ConcurrentShuffleLinUCB(create("central", epsilon=1.0, delta=1e-6), n_users=10, dim=2, agents_per_round=3)
    with pytest.raises(ValueError, match="silo-ldp.*concurrent-shuffle"):
        ConcurrentShuffleLinUCB(create("silo-ldp", epsilon=1.0, delta=1e-6), n_users=10, dim=2)
    with pytest.raises(ValueError, match="dim"):
        lr.run(_env(dim=3), np.random.default_rng(0))


class _PaddedArmsEnv(_UnequalNormsEnv):
    """Half the arms are padding (mask False) with the best-looking features and -inf means."""

    def iter_blocks(self, horizon):
        from fedbandit.envs.linear import RoundBlock

        (block,) = super().iter_blocks(horizon)
        x, means = block.features.copy(), block.means.copy()
        mask = np.ones(means.shape, dtype=bool)
        mask[..., 4:] = False
        x[..., 4:, :] = np.array([0.6, -0.3]) / np.linalg.norm([0.6, -0.3])
        means[..., 4:] = -np.inf
        best = np.where(mask, means, -np.inf).max(axis=-1)
        yield RoundBlock(0, x, means, best, block.noise, mask)


def test_padded_arms_are_never_played():
    """With a mask (the real-data instance pads queries with few documents), both loops play real arms only."""
    n = 60
    for name, kw in (("central", dict(relation="replace")), ("concurrent-shuffle", dict(k=2))):
        for lean in (True, False):
            lr = ConcurrentShuffleLinUCB(create(name, epsilon=3.0, delta=1e-6, **kw), n_users=n, dim=2, lean=lean)
            res = lr.run(_PaddedArmsEnv(), np.random.default_rng(0))
            assert np.all(np.isfinite(res.regret)), (name, lean)

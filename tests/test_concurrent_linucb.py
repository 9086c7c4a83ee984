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


def test_one_user_counts_carry_into_a_longer_period(monkeypatch):
    """Randomized response's running counts of one-user periods (kept in floats) enter the batches a
    longer period closes: with records at the top of their range (rounding without draws) and the
    count sampler replaced by the identity, level b's batch count is b·g ones per coordinate, the
    users of the one-user periods included."""
    import fedbandit.protocols.concurrent as concurrent

    monkeypatch.setattr(concurrent, "_sample_counts", lambda batch, m, q0, q1, rng: batch)
    proto = _configured((4, 2, 1), 8).reset(n_runs=2, rng=np.random.default_rng(0))
    r, rng = proto.randomizer, np.random.default_rng(1)
    x, y = np.full((1, 2, 2), 5.0), np.full((1, 2), 5.0)  # every coordinate clipped to 1
    for _ in range(3):
        r.encode((x, y), rng)
    g = r.resolutions
    out = r.encode((np.repeat(x, 2, axis=0), np.repeat(y, 2, axis=0)), rng)  # users 4 and 5
    times, counts = out[0]
    assert list(times) == [4] and np.all(counts == 4 * g[0]), (times, counts)
    times, counts = out[1]
    assert list(times) == [4] and np.all(counts == 2 * g[1]), (times, counts)


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
        assert res.accounting.status == "verified" and res.learner == "concurrent-linucb"


def test_non_private_protocol_is_plain_linucb():
    """create("non-private"): no noise, so λ = 1 and γ = 0, and the learner's regret is far below uniform play."""
    n = 600
    lr = ConcurrentShuffleLinUCB(create("non-private"), n_users=n, dim=2)
    assert lr.lam == 1.0 and lr.params["gamma"] == 0.0
    res = lr.run(_env(), np.random.default_rng(0))
    uniform = sum((b.best[:, :, 0] - b.means[:, :, 0].mean(axis=-1)).sum(axis=0) for b in _env().iter_blocks(n))
    assert np.all(res.cum_regret < 0.2 * uniform) and res.accounting.status == "none"


def test_communication_counts_one_bit_messages():
    n, dim = 100, 2
    lr = ConcurrentShuffleLinUCB(create("concurrent-shuffle", epsilon=1.0, delta=1e-6, batch_sizes=(40, 8)), n_users=n,
                                 dim=dim)
    res = lr.run(_env(dim=dim), np.random.default_rng(0))
    g = lr.protocol.randomizer.resolutions
    syncs = n // 8
    assert res.communication.rounds == syncs and res.communication.unit == "bits"
    assert res.communication.messages == syncs * 8 * n_coordinates(dim) * sum(g) == res.communication.bits


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


def test_lean_path_matches_block_path_when_rewards_clip():
    """The lean one-user loop (block arrays broadcast over runs once, the clip as max-then-min, the
    inverse without numpy's wrapper) against the general block loop, user by user and bit for bit:
    rewards that clip often (noise 1.5, reward bound 0.3), contexts shared by the runs (Rc = 1) or
    the same contexts given per run (Rc = R; the block loop scores those with the lean loop's
    arithmetic), a federated instance served in sequence, and the noise-free twin (whose exact sums a
    stray in-place update of the Gram would corrupt)."""
    from fedbandit.envs.users import UsersEnv

    d, K, R = 3, 6, 3
    rng = np.random.default_rng(5)

    def env(T, agents, shared):
        x = rng_x[:T, :, :agents]  # (T, 1, M, K, d)
        x = x if shared else np.repeat(x, R, axis=1)
        means = x @ np.array([0.5, -0.4, 0.3])
        return UsersEnv(x, means, noise[:T, :, :agents], n_runs=R, block_size=16)

    rng_x = rng.normal(size=(96, 1, 3, K, d)) / math.sqrt(d)
    noise = 1.5 * rng.standard_normal((96, R, 3))
    for name, kw in (("concurrent-shuffle", dict(k="log")), ("central", dict(relation="replace"))):
        for agents, free in ((1, False), (3, False), (1, True)):
            n = 96 if agents == 1 else 32 * agents
            per_user = {}
            for lean, shared in ((True, True), (True, False), (False, False)):
                lr = ConcurrentShuffleLinUCB(create(name, epsilon=3.0, delta=1e-6, **kw), n_users=n, dim=d, lean=lean,
                                             reward_bound=0.3, noise_free=free, agents_per_round=agents)
                assert lr.period == 1
                res = lr.run(env(n // agents, agents, shared), np.random.default_rng(7), per_user=True)
                per_user[lean, shared] = res.extras["user_regret"]
            case = str((name, agents, free))
            np.testing.assert_array_equal(per_user[True, True], per_user[True, False], err_msg=case)
            np.testing.assert_array_equal(per_user[True, False], per_user[False, False], err_msg=case)


def test_bandit_trial_outputs():
    cfg = dict(n=300, epsilon=10.0, delta=1e-6, dim=2, runs=2, n_arms=10,
               protocols=[{"label": "concurrent-1", "protocol": "concurrent-shuffle", "k": 1},
                          {"label": "sequential", "protocol": "concurrent-shuffle", "batch_sizes": [31]},
                          {"label": "central", "protocol": "central", "relation": "replace"}])
    out = bandit_trial(cfg, np.random.default_rng(0))
    for lab in ("concurrent-1", "sequential", "central"):
        assert out[lab].shape == (2,)
        assert out["curves"][lab].shape == out["checkpoints"].shape
        assert out["accounting"][lab].status == "verified"
    assert out["batch_sizes"]["sequential"] == [31] and out["batch_sizes"]["central"] is None
    assert np.all(out["uniform"] > 0)
    with pytest.raises(ValueError, match="protocols"):
        bandit_trial(dict(cfg, protocols=[["concurrent", 1]]), np.random.default_rng(0))


def test_run_config_and_user_sequence_env():
    cfg = dict(learner="concurrent-linucb", protocol="concurrent-shuffle", k=2, epsilon=10.0, delta=1e-6, n=300, M=1,
               K=10, d=2, noise_std=0.1, runs=2, n_checkpoints=10)
    res = run_config(cfg, np.random.default_rng(0))
    assert res.t[-1] == 300 and res.regret.shape == (2, 10) and res.accounting.status == "verified"
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
        proto.configure(n_agents=1, dim=2, n_batches=33, batch_size=3)  # not a multiple of b_k = 2
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


# ---------------------------------------------------------------------------------------
# Periods of several batches, the vector-sum protocol, the noise-free twin, fixed arms
# ---------------------------------------------------------------------------------------


def _configured_period(sizes, n, period, dim=2, eps=2.0, delta=1e-6, name="concurrent-shuffle", **kw):
    if name == "concurrent-shuffle":
        proto = create(name, epsilon=eps, delta=delta, batch_sizes=sizes, **kw)
    else:
        proto = create(name, epsilon=eps, delta=delta, batch_size=sizes[0], **kw)
    return proto.configure(n_agents=1, dim=dim, n_batches=n // period, batch_size=period, n_users=n)


@pytest.mark.parametrize("sizes,period", [((12, 4), 4), ((12, 4), 8), ((12, 4), 24), ((8, 4, 2, 1), 1),
                                          ((8, 4, 2, 1), 6), ((8, 2, 1), 3), ((16, 4, 1), 6), ((1,), 5), ((6,), 18)])
def test_a_period_of_several_batches_releases_the_mixed_radix_estimate(monkeypatch, sizes, period):
    """With the randomizer made deterministic (rounding to the nearest unary count; the shuffler's count its
    expectation, which the analyzer debiases exactly), the estimate after every period of P users -- several
    batches of the finer levels closing inside one period, released together -- is the mixed-radix sum computed
    here from its definition: the full level-1 batches, then the full level-2 batches after them, ..., each
    user's value rounded at that level's g.  (Dropping the carry of a batch begun in the previous period, or
    not clearing the finer levels at a coarser release, fails it.)"""
    import fedbandit.protocols.concurrent as pc

    monkeypatch.setattr(pc, "_unary_round_parts",
                        lambda arr, g, rng, out=None: (np.floor(arr[None] * g + 0.5),
                                                       np.zeros((len(g),) + arr.shape, dtype=bool)))
    monkeypatch.setattr(pc, "_sample_counts", lambda ones, m, q0, q1, rng: ones * q1 + (m - ones) * q0)
    dim, n, runs = 2, 96, 2
    x, y, z = _users(np.random.default_rng(3), n, runs, dim)
    proto = _configured_period(sizes, n, period).reset(n_runs=runs, rng=np.random.default_rng(0))
    assert proto.period == period and proto.batch_sizes == sizes
    half = record_half_range(dim)
    z01 = np.clip((z / half + 1.0) / 2.0, 0.0, 1.0)
    gs = proto.randomizer.resolutions
    for t in range(period, n + 1, period):
        total, start = np.zeros((runs, z.shape[-1])), 0
        for b, g in zip(sizes, gs):
            full = (t - start) // b
            total += (np.floor(z01[start : start + full * b] * g + 0.5) / g).sum(axis=0)
            start += full * b
        np.testing.assert_allclose(_sync(proto, x[t - period : t], y[t - period : t]), half * (2 * total - t),
                                   atol=1e-9)


@pytest.mark.parametrize("sizes,period", [((12, 4), 8), ((8, 4, 2, 1), 6), ((1,), 4)])
def test_a_period_of_several_batches_is_unbiased_with_the_stated_variance(sizes, period):
    """The same z-test and variance bounds as test_protocol_unbiased_with_stated_variance, P > b_k."""
    dim, n, runs = 2, 24, 4000
    rng = np.random.default_rng(sum(sizes) + period)
    x, y, z = _users(rng, n, 1, dim)
    x, y = np.broadcast_to(x, (n, runs, dim)), np.broadcast_to(y, (n, runs))
    proto = _configured_period(sizes, n, period).reset(n_runs=runs, rng=rng)
    for _ in _unbiased_releases(proto, x, y, z, period):
        pass  # every release is checked as it comes


def _unbiased_releases(proto, x, y, z, period):
    """Every release of ``proto`` over the users (t, released (runs, D)), each z-tested
    against the true prefix (|z| < 5) with its variance at most 1.15 × the stated bound."""
    n, runs = x.shape[0], x.shape[1]
    for k, t in enumerate(range(period, n + 1, period), start=1):
        out = _sync(proto, x[t - period : t], y[t - period : t])
        truth = z[:t, 0].sum(axis=0)
        bound = proto.prefix_noise_variance(k)
        zscore = (out.mean(axis=0) - truth) / np.sqrt(bound / runs)
        assert np.all(np.abs(zscore) < 5), (t, zscore)
        assert np.all(out.var(axis=0) <= 1.15 * bound), (t, out.var(axis=0), bound)
        yield t, out


def test_vector_sum_protocol_unbiased_with_stated_variance_and_claimed():
    """Chowdhury & Zhou's sequential protocol: every user in one batch of B through the vector sum.

    z-test per coordinate and release, |z| < 5 over 4000 runs (Bonferroni over ≤ 5 × 6 tests, false alarm
    < 1e-4); variance within 15 % of the stated binomial + rounding bound from above and of the binomial noise
    alone from below (sampling error of a variance from 4000 runs ≈ 2 %)."""
    dim, n, runs, B = 2, 24, 4000, 4
    rng = np.random.default_rng(11)
    x, y, z = _users(rng, n, 1, dim)
    x, y = np.broadcast_to(x, (n, runs, dim)), np.broadcast_to(y, (n, runs))
    for period in (B, 2 * B):
        proto = _configured_period((B,), n, period, name="sequential-vector-sum", eps=1.0, delta=1e-3,
                                   constant=1.0).reset(n_runs=runs, rng=rng)
        mech = proto.randomizer.mech
        for t, out in _unbiased_releases(proto, x, y, z, period):
            assert np.all(out.var(axis=0) >= 0.85 * (t // B) * mech.noise_std() ** 2), t
    assert proto.accounting().status == "invalid"  # constant 1 < the theorem's
    ok = create("sequential-vector-sum", epsilon=0.2, delta=0.1, batch_size=20)
    ConcurrentShuffleLinUCB(ok, n_users=2000, dim=5)
    acc = ok.accounting()
    assert acc.status == "claimed" and acc.epsilon == 0.2 and acc.delta == 0.1 and acc.relation == "replace"
    assert ok.calibration()["b"] > 1e9 and ok.model == "SDP"
    auto = create("sequential-vector-sum", epsilon=1.0, delta=1e-3)
    assert ConcurrentShuffleLinUCB(auto, n_users=10_000, dim=2).period == sequential_batch_sizes(10_000)[0]
    with pytest.raises(ValueError, match="multiple of B"):
        _configured_period((4,), 24, 6, name="sequential-vector-sum")


def test_min_period_and_noise_free_twin():
    n = 2000
    lr = ConcurrentShuffleLinUCB(create("concurrent-shuffle", epsilon=4.0, delta=1e-6, k="log"), n_users=n, dim=2,
                                 min_period=16)
    assert lr.period == 16 and lr.protocol.batch_sizes[-1] == 16 and lr.protocol.batch_sizes[0] == 1024
    local = ConcurrentShuffleLinUCB(create("concurrent-shuffle", epsilon=4.0, delta=1e-6, batch_sizes=(1,)),
                                    n_users=n, dim=2, min_period=10)
    assert local.period == 10 and local.protocol.batch_sizes == (1,)
    central = ConcurrentShuffleLinUCB(create("central", epsilon=4.0, delta=1e-6, relation="replace"), n_users=n,
                                      dim=2, min_period=8)
    assert central.period == 8 and central.protocol.n_batches == n // 8
    k2 = ConcurrentShuffleLinUCB(create("concurrent-shuffle", epsilon=4.0, delta=1e-6, k=2), n_users=n, dim=2)
    assert ConcurrentShuffleLinUCB(create("concurrent-shuffle", epsilon=4.0, delta=1e-6, k=2), n_users=n, dim=2,
                                   min_period=k2.period).period == k2.period
    with pytest.raises(ValueError, match="min_period"):
        ConcurrentShuffleLinUCB(create("central", epsilon=4.0, delta=1e-6), n_users=n, dim=2, min_period=0)
    # the twin: same λ and period, exact sums (its runs do not depend on the protocol's generator), no privacy
    twins = [ConcurrentShuffleLinUCB(create("concurrent-shuffle", epsilon=4.0, delta=1e-6, k=2), n_users=n, dim=2,
                                     noise_free=True) for _ in range(2)]
    assert twins[0].lam == k2.lam and twins[0].period == k2.period
    res = [tw.run(_env(), np.random.default_rng(seed)) for tw, seed in zip(twins, (0, 1))]
    np.testing.assert_array_equal(res[0].regret, res[1].regret)
    assert res[0].accounting.status == "none" and res[0].calibration["noise_free"]
    private = k2.run(_env(), np.random.default_rng(0))
    assert not np.array_equal(private.regret, res[0].regret)


def test_orthogonal_arms_env_and_static_scoring():
    """The gap family: regret Δ_r per pull of a worse arm; the learner's one-context scoring of a period makes
    the decisions of the per-user scoring (the env with its features materialized)."""
    from fedbandit.envs.linear import RoundBlock
    from fedbandit.envs.orthogonal import OrthogonalArmsEnv

    gaps = np.repeat([0.05, 0.2, 0.5], 2)
    env = OrthogonalArmsEnv(gaps, dim=3, noise_std=0.1, seed=4, block_size=50)
    assert env.n_runs == 6 and env.n_arms == 3 and env.param_norm == pytest.approx(math.sqrt(0.25 + 2 * 0.45**2))
    blocks = list(env.iter_blocks(120))
    assert [b.n_rounds for b in blocks] == [50, 50, 20] and blocks[0].features.strides[0] == 0
    np.testing.assert_allclose(blocks[0].means[0, :, 0, 1], 0.5 - gaps)
    again = list(OrthogonalArmsEnv(gaps, dim=3, noise_std=0.1, seed=4, block_size=50).iter_blocks(120))
    np.testing.assert_array_equal(blocks[1].noise, again[1].noise)

    class Materialized:
        n_agents, n_runs, dim, n_arms = 1, env.n_runs, env.dim, env.n_arms

        def iter_blocks(self, horizon):
            for b in env.iter_blocks(horizon):
                yield RoundBlock(b.start, b.features.copy(), b.means.copy(), b.best.copy(), b.noise, None)

    n = 600
    out = []
    for e in (env, Materialized()):
        lr = ConcurrentShuffleLinUCB(create("concurrent-shuffle", epsilon=4.0, delta=1e-6, k=2), n_users=n, dim=3,
                                     min_period=8)
        out.append(lr.run(e, np.random.default_rng(2), per_user=True))
    np.testing.assert_array_equal(out[0].extras["user_regret"], out[1].extras["user_regret"])
    per_user = out[0].extras["user_regret"]
    assert np.all(np.isclose(per_user, 0) | np.isclose(per_user, gaps[:, None]))
    with pytest.raises(ValueError, match="gaps"):
        OrthogonalArmsEnv([0.0, 0.1])
    with pytest.raises(ValueError, match="gaps"):
        OrthogonalArmsEnv([1.2])
    with pytest.raises(ValueError, match="dim"):
        OrthogonalArmsEnv([0.1], dim=1)


def test_regret_trial_outputs():
    from fedbandit.experiments.regret import regret_trial

    protos = [{"label": "k2", "protocol": "concurrent-shuffle", "k": 2},
              {"label": "k2-twin", "protocol": "concurrent-shuffle", "k": 2, "noise_free": True},
              {"label": "cz", "protocol": "sequential-vector-sum", "batch_size": 20, "constant": 1.0},
              {"label": "np", "protocol": "non-private"}]
    gaps = dict(n=400, epsilon=4.0, delta=1e-6, dim=2, instance="gaps", gaps=[0.1, 0.4], runs_per_gap=2,
                min_period=8, protocols=protos)
    out = regret_trial(gaps, np.random.default_rng(0))
    for lab in ("k2", "k2-twin", "cz", "np"):
        assert out[lab].shape == (4,) and out["curves"][lab].shape == out["checkpoints"].shape
        assert out["syncs"][lab] == 400 // out["period"][lab] and out["wall"][lab] >= 0
    assert out["accounting"]["k2"].status == "verified" and out["accounting"]["k2-twin"].status == "none"
    assert out["accounting"]["cz"].status == "invalid" and out["period"]["cz"] == 20
    ctx = regret_trial(dict(gaps, instance="contextual", runs=2, n_arms=10, protocols=protos[:1]),
                       np.random.default_rng(0))
    assert ctx["k2"].shape == (2,) and np.all(ctx["uniform"] > 0)
    with pytest.raises(ValueError, match="instance"):
        regret_trial(dict(gaps, instance="mslr"), np.random.default_rng(0))


def test_regret_grid_units_per_environment_changes_the_schedule_only(monkeypatch):
    """Dealing one environment's configurations to two units (snake order) gives the same results as one
    unit, and as each configuration run alone; the deal is 0, 1, 1, 0, 0, 1, ..."""
    from fedbandit.experiments.regret import _snake, run_regret_grid

    assert [_snake(i, 2) for i in range(7)] == [0, 1, 1, 0, 0, 1, 1]
    assert [_snake(i, 3) for i in range(7)] == [0, 1, 2, 2, 1, 0, 0]
    labels = [("k1", {"protocol": "concurrent-shuffle", "k": 1}), ("k2", {"protocol": "concurrent-shuffle", "k": 2}),
              ("central", {"protocol": "central", "relation": "replace"}), ("np", {"protocol": "non-private"})]
    base = dict(epsilon=4.0, delta=1e-6, dim=2, instance="gaps", gaps=[0.1, 0.4], runs_per_gap=2, min_period=8)
    cfgs = [dict(base, n=n, env_seed=n, protocols=[dict(spec, label=lab)]) for n in (480, 240) for lab, spec in labels]
    cfgs.append(dict(base, n=240, protocols=[dict(labels[0][1], label="alone")]))  # no env_seed: runs alone
    one = run_regret_grid(cfgs, backend="serial", cache_dir=False, progress=False)
    two = run_regret_grid(cfgs, backend="serial", cache_dir=False, progress=False, units_per_environment=2)
    alone = [run_regret_grid([c], backend="serial", cache_dir=False, progress=False)[0] for c in cfgs]
    for a, b, c, cfg in zip(one, two, alone, cfgs):
        lab = cfg["protocols"][0]["label"]
        assert np.array_equal(a[0][lab], b[0][lab]) and np.array_equal(a[0][lab], c[0][lab]), lab
        assert np.array_equal(a[0]["curves"][lab], b[0]["curves"][lab])
    # the schedule: one unit per environment, or two per environment (4 configurations dealt 2 + 2); the lone
    # point alone
    import fedbandit._grid as grid_module

    seen = []

    def spy(tasks, n_workers, key):
        units = grid_module_units(tasks, n_workers, key)
        seen.append(sorted(len(u) for u in units))
        return units

    grid_module_units = grid_module._units
    monkeypatch.setattr(grid_module, "_units", spy)
    run_regret_grid(cfgs, backend="serial", cache_dir=False, progress=False)
    run_regret_grid(cfgs, backend="serial", cache_dir=False, progress=False, units_per_environment=2)
    assert seen == [[1, 4, 4], [1, 2, 2, 2, 2]]
    with pytest.raises(ValueError, match="units_per_environment"):
        run_regret_grid(cfgs, backend="serial", cache_dir=False, progress=False, units_per_environment=0)


def test_static_scoring_equals_per_user_scoring_when_the_choice_moves():
    """_static_arms (one context scored once per period, refined only where the choice moves with β) against
    the LinUCB core's per-user select_arms, with β_t spanning a range over which the arg-max changes."""
    from fedbandit.learners.concurrent_linucb import _static_arms
    from fedbandit.learners.linucb import select_arms

    rng = np.random.default_rng(5)
    R, c, K, d = 40, 25, 4, 3
    feats = rng.standard_normal((R, K, d))
    theta = rng.standard_normal((R, d))
    A = rng.standard_normal((R, d, d))
    v_inv = A @ A.transpose(0, 2, 1) + 0.1 * np.eye(d)
    betas = np.linspace(0.0, 3.0, c)
    fast = _static_arms(feats, theta, v_inv, betas, None)
    slow = select_arms(np.broadcast_to(feats[:, None], (R, c, K, d)), np.broadcast_to(theta[:, None], (R, c, d)),
                       np.broadcast_to(v_inv[:, None], (R, c, d, d)), np.broadcast_to(betas, (R, c)))
    assert np.any(slow[:, 0] != slow[:, -1])  # the choice does move within the period for some runs
    np.testing.assert_array_equal(fast, slow)
    mask = rng.random((R, K)) < 0.7
    mask[:, 0] = True
    slow_m = select_arms(np.broadcast_to(feats[:, None], (R, c, K, d)), np.broadcast_to(theta[:, None], (R, c, d)),
                         np.broadcast_to(v_inv[:, None], (R, c, d, d)), np.broadcast_to(betas, (R, c)),
                         np.broadcast_to(mask[:, None], (R, c, K)))
    np.testing.assert_array_equal(_static_arms(feats, theta, v_inv, betas, mask), slow_m)


def test_the_randomizers_rounding_in_two_parts_is_unary_round_draw_for_draw():
    """The hot loop's rounding (floor and Bernoulli increment, summed over users only where needed) is
    unary_round_unchecked's, draw for draw: the same generator state gives the same integer ones."""
    import fedbandit.protocols.concurrent as pc
    from fedbandit.mechanisms.randomized_response import unary_round_unchecked

    z01 = np.random.default_rng(1).random((64, 5, 9))
    z01[:, 0, :3] = 0.5  # exact halves and integers: fractions 0 at even g
    g = np.array([1.0, 8.0, 13.0, 256.0])[:, None, None, None]
    low, up = pc._unary_round_parts(z01, g, np.random.default_rng(7))
    np.testing.assert_array_equal(low.astype(np.int64) + up, unary_round_unchecked(z01, g, np.random.default_rng(7)))
    np.testing.assert_array_equal(pc._user_sum(low[2], up[2]), (low[2] + up[2]).sum(axis=0).astype(np.int64))


@pytest.mark.parametrize("shared", [True, False])
def test_learners_run_together_are_each_learner_run_alone(shared):
    """run_together (one environment, its blocks generated once, every learner fed each block in turn) gives
    every learner exactly its own run's result: same regret, bit for bit (a learner that kept state across
    learners, or a block mutated by one of them, would break it)."""
    from fedbandit.learners.concurrent_linucb import run_together

    n, d = 640, 3

    def env():
        return SyntheticLinearEnv(1, n_arms=7, dim=d, n_runs=3, noise_std=0.1, shared_contexts=shared,
                                  means_from_raw=False, seed=11)

    def learners():
        protos = [create("concurrent-shuffle", epsilon=2.0, delta=1e-5, k=2),
                  create("concurrent-shuffle", epsilon=2.0, delta=1e-5, k="log"),
                  create("central", epsilon=2.0, delta=1e-5, relation="replace")]
        out = [ConcurrentShuffleLinUCB(p, n_users=n, dim=d, min_period=16) for p in protos]
        out.append(ConcurrentShuffleLinUCB(create("concurrent-shuffle", epsilon=2.0, delta=1e-5, k=1), n_users=n,
                                           dim=d, min_period=16, noise_free=True))
        return out

    alone = [lr.run(env(), np.random.default_rng(i)) for i, lr in enumerate(learners())]
    together, times = run_together(learners(), env(), [np.random.default_rng(i) for i in range(4)])
    assert len(times) == 4 and all(w >= 0 and c >= 0 for w, c in times)
    for a, b in zip(alone, together):
        np.testing.assert_array_equal(a.regret, b.regret)
    with pytest.raises(ValueError, match="same users"):
        run_together([learners()[0], ConcurrentShuffleLinUCB(create("non-private"), n_users=320, dim=d)], env(),
                     [np.random.default_rng(0)] * 2)


def test_user_sequence_env_of_table_arms_equals_the_plain_flattening():
    # real data (arms are rows of a table, padded arms masked): UserSequenceEnv's blocks form their features
    # from the flattened rows; the plain reference (every block's features, padded arms replaced by the
    # user's first arm, then flattened) gives the same arrays bit for bit
    from fedbandit.envs.factory import make_environment

    env = make_environment(dict(instance="real", M=3, T=12, runs=2, max_arms=6, env_seed=0, noise_bound=1.0))
    seq = list(UserSequenceEnv(env).iter_blocks(36))
    assert any(b.arm_ids is not None for b in seq)
    M = 3
    for b, s in zip(env.iter_blocks(12), seq):
        r = b.n_rounds
        feats, means = b.features, b.means
        if b.mask is not None:
            feats = np.where(b.mask[..., None], feats, feats[..., :1, :])
            means = np.where(b.mask, means, means[..., :1])

        def flat(a):
            a = np.moveaxis(a, 2, 1)
            return a.reshape((r * M, a.shape[2], 1) + a.shape[3:])

        for got, want in ((s.features, flat(feats)), (s.means, flat(means)), (s.best, flat(b.best)),
                          (s.noise, flat(b.noise))):
            assert got.shape == want.shape
            np.testing.assert_array_equal(got.view(np.uint64) if got.dtype == np.float64 else got,
                                          want.view(np.uint64) if want.dtype == np.float64 else want)
        assert s.mask is None and s.start == b.start * M


@pytest.mark.parametrize("protocol", ["central", "concurrent-shuffle"])
def test_users_from_table_rows_served_one_at_a_time_equal_the_block_features(protocol):
    # real data served one user at a time (period 1): the lean loop forms each user's features from the
    # table's rows; the plain reference, the same blocks with their features formed in full
    # (RoundBlock.features), gives the same run bit for bit
    import dataclasses

    from fedbandit.envs.factory import make_environment

    env = UserSequenceEnv(make_environment(dict(instance="real", M=3, T=12, runs=2, max_arms=6, env_seed=0,
                                                noise_bound=1.0)))

    class Materialized:
        n_agents, dim, n_runs = env.n_agents, env.dim, env.n_runs

        def iter_blocks(self, horizon):
            for b in env.iter_blocks(horizon):
                assert b._features is None and b.table is not None  # the per-user rows are the path under test
                yield dataclasses.replace(b, _features=b.features, table=None)

    def learner():
        kw = dict(epsilon=4.0, delta=1e-5) if protocol == "central" else dict(epsilon=4.0, delta=1e-5, k="log")
        lr = ConcurrentShuffleLinUCB(create(protocol, **kw), n_users=36, dim=env.dim, noise_bound=1.0)
        assert lr.period == 1
        return lr

    by_rows = learner().run(env, np.random.default_rng(5), per_user=True)
    plain = learner().run(Materialized(), np.random.default_rng(5), per_user=True)
    np.testing.assert_array_equal(by_rows.extras["user_regret"], plain.extras["user_regret"])
    assert by_rows.noise_variance == plain.noise_variance


@pytest.mark.parametrize("c, R", [(1, 1), (4, 16), (5, 13), (64, 27)])
def test_records_in_unit_units_equal_the_formula_on_both_layouts(c, R):
    """protocols.concurrent._records01 (few users: the (c, R, D) layout; many: coordinate-major) against the record
    written out, entry by entry: z = (x y, x_i x_j for i ≤ j, row-major), mapped to (z/s + 1)/2 and clipped to [0, 1]."""
    from fedbandit.protocols.concurrent import _records01, record_half_range

    d = 4
    rng = np.random.default_rng(c * 100 + R)
    x = rng.uniform(-1.0, 1.0, (c, R, d))
    y = rng.uniform(-1.0, 1.0, (c, R))
    x[0, 0, :2], y[0, 0] = 1.6, 0.9  # beyond the bounds (x y > L·Y, x_i x_j > L²): the clipping acts
    s = record_half_range(d, 1.5, 0.7)  # unequal halves (L·Y for x y, L² for x xᵀ)
    expected = np.empty((c, R, s.size))
    for a in range(c):
        for r in range(R):
            z = [x[a, r, i] * y[a, r] for i in range(d)] + [x[a, r, i] * x[a, r, j] for i in range(d) for j in range(i, d)]
            expected[a, r] = [min(1.0, max(0.0, (v / s[k] + 1.0) / 2.0)) for k, v in enumerate(z)]
    got = _records01(np.moveaxis(np.moveaxis(x, 2, 0).copy(), 0, 2), y, s)  # a transposed view, as the learner passes
    np.testing.assert_array_equal(got, expected)


# ---------------------------------------------------------------------------------------
# Fast paths of the gap family's periods against their plain forms
# ---------------------------------------------------------------------------------------


def test_aligned_is_no_batch_closing_inside_the_period():
    """RandomizedResponseRecords.aligned(t0, t) is the definition: every level's batch boundaries
    (multiples of b_i) in (t0, t] are t itself or none, checked by enumeration."""
    proto = _configured_period((24, 12, 4), 96, 4)
    r = proto.randomizer
    for t0 in range(0, 60):
        for t in range(t0 + 1, t0 + 30):
            inside = [m for b in (24, 12, 4) for m in range(t0 + 1, t + 1) if m % b == 0]
            assert r.aligned(t0, t) == all(m == t for m in inside), (t0, t)


@pytest.mark.parametrize("sizes,period", [((32, 16, 8, 4), 4), ((64, 8), 8), ((12, 4), 8), ((16, 4, 1), 6)])
def test_aligned_periods_release_what_the_level_loop_releases(monkeypatch, sizes, period):
    """A period whose batches close at its end only (_encode_aligned: one add for all levels) gives the
    counts, the draws and the carried state of the general loop over the levels (_encode_levels), release
    by release, bit for bit; the periods are aligned when the finest batch is the period (the last two
    schedules close a finest batch inside every period: the general loop).  (A coarse-first release order,
    or a level not restarted from 0 after its release, fails it.)"""
    from fedbandit.protocols.concurrent import RandomizedResponseRecords

    dim, n, runs = 2, 96, 3
    x, y, _ = _users(np.random.default_rng(5), n, runs, dim)
    fast = _configured_period(sizes, n, period).reset(n_runs=runs, rng=np.random.default_rng(11))
    plain = _configured_period(sizes, n, period).reset(n_runs=runs, rng=np.random.default_rng(11))
    used = []
    aligned = RandomizedResponseRecords.aligned

    def spy(self, t0, t):
        used.append(self is fast.randomizer and aligned(self, t0, t))
        return self is fast.randomizer and aligned(self, t0, t)

    monkeypatch.setattr(RandomizedResponseRecords, "aligned", spy)
    for t in range(period, n + 1, period):
        xs, ys = x[t - period : t], y[t - period : t]
        a = fast.randomizer.encode((xs, ys), fast._noise_rng)
        b = plain.randomizer.encode((xs, ys), plain._noise_rng)
        assert list(a) == list(b)
        for i in a:
            np.testing.assert_array_equal(a[i][0], b[i][0])
            np.testing.assert_array_equal(a[i][1], b[i][1])
        np.testing.assert_array_equal(fast.randomizer._ones, plain.randomizer._ones)
    assert any(used) == (sizes[-1] == period)
    assert fast._noise_rng.bit_generator.state == plain._noise_rng.bit_generator.state


@pytest.mark.parametrize("c", [1, 2, 3, 7, 64, 65, 255, 256])
@pytest.mark.parametrize("threshold", [0, None])
def test_level_user_sums_are_the_plain_sums(monkeypatch, c, threshold):
    """_level_user_sums (floors by one product with ones, increments as bytes added in halves) against the plain
    sums over the users, low.sum(axis=1) + the count of True, at every c (odd ones leave a remainder at some
    halving; 256 users overflow a byte: the plain path), with the product path forced (threshold 0) or not.
    (Dropping the odd remainder, or a byte count past 255, fails it.)"""
    import fedbandit.protocols.concurrent as pc

    if threshold is not None:
        monkeypatch.setattr(pc, "_SUMS_BY_PRODUCT", threshold)
    rng = np.random.default_rng(c)
    k, R, D = 3, 4, 5
    low = np.floor(rng.random((k, c, R, D)) * np.array([1.0, 23.0, 725.0])[:, None, None, None])
    up = rng.random(low.shape) < 0.5
    up[1] = True  # every increment set: a level's count reaches c
    plain = np.zeros((k, R, D), dtype=np.int64)
    for i in range(k):
        for u in range(c):
            plain[i] += low[i, u].astype(np.int64) + up[i, u]
    got = pc._level_user_sums(low, up)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, plain)


@pytest.mark.parametrize("sizes,period,runs", [((256, 128, 64), 64, 60), ((195, 65), 65, 80)])
def test_periods_of_many_users_release_the_plain_implementations_counts(sizes, period, runs):
    """Periods of c > 1 users (work arrays kept between periods; the levels' sums by _level_user_sums, whose
    product path these sizes take: k·c·R·D ≥ 50 000) release the counts and leave the generator state of the
    plain form written out here: a new rounding array per period (⌊g z⌋ + 1{U < g z − ⌊g z⌋}, one draw of
    uniforms (k, c, R, D)), every level's running count summed over the users, and each level whose batch
    closes at t, finest first, sampled as Bin(ones, q1) + Bin(m − ones, q0) and restarted.  (Rounding with the
    previous period's uniforms, or a sum that drops a user, fails it.)"""
    from fedbandit.protocols.concurrent import _records01

    dim, n = 2, 4 * sizes[0]
    x, y, _ = _users(np.random.default_rng(9), n, runs, dim)
    proto = _configured_period(sizes, n, period).reset(n_runs=runs, rng=np.random.default_rng(1))
    r = proto.randomizer
    assert all(lvl.n_messages > 16 for lvl in r.levels)  # two binomials per count (no small-batch table)
    assert len(sizes) * period * runs * r.n_coords >= 50_000
    rng, ref_rng = np.random.default_rng(21), np.random.default_rng(21)
    g = np.array(r.resolutions, dtype=float)[:, None, None, None]
    ones = np.zeros((len(sizes), runs, r.n_coords), dtype=np.int64)
    for t in range(period, n + 1, period):
        xs, ys = x[t - period : t], y[t - period : t]
        got = r.encode((xs, ys), rng)
        scaled = _records01(xs, ys, r.half_range)[None] * g
        low = np.floor(scaled)
        rounded = low + (ref_rng.random(scaled.shape) < scaled - low)
        ones += rounded.sum(axis=1).astype(np.int64)
        want = {}
        for i in reversed(range(len(sizes))):
            lvl = r.levels[i]
            if t % lvl.n_users == 0:
                batch = ones[i : i + 1].copy()
                ones[i] = 0
                want[i] = ref_rng.binomial(batch, lvl.q1) + ref_rng.binomial(lvl.n_messages - batch, lvl.q0)
        assert list(got) == list(want)
        for i in want:
            np.testing.assert_array_equal(got[i][0], [t])
            np.testing.assert_array_equal(got[i][1], want[i])
        np.testing.assert_array_equal(r._ones, ones)
    assert rng.bit_generator.state == ref_rng.bit_generator.state


@pytest.mark.parametrize("shape", [(4, 64, 20), (27, 2, 2), (3, 5, 1), (6, 7)])
def test_tie_argmax_is_the_plain_tie_rule(shape):
    """_tie_argmax (the row's largest score read at its arg-max) against the rule written out with the
    reduction: threshold max − TIE_TOL·max(1, |max|), the first arm at or above it; on rows with exact ties,
    ties within the tolerance, signed zeros, a NaN, masked (−inf) arms, a row of −inf only, and +inf, for a
    C-ordered array, a transposed view and a given arg-max.  (Reading the score at the last arg-max, or a
    threshold without the max(1, |max|) factor, fails it.)"""
    from fedbandit.learners.concurrent_linucb import _tie_argmax
    from fedbandit.learners.linucb import TIE_TOL

    def plain(scores):
        best = scores.max(axis=-1, keepdims=True)
        best -= TIE_TOL * np.maximum(1.0, np.abs(best))
        return np.argmax(scores >= best, axis=-1)

    rng = np.random.default_rng(len(shape) * 100 + shape[-1])
    scores = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)
    rows = scores.reshape(-1, shape[-1])
    K, n = shape[-1], rows.shape[0]
    rows[rng.random(rows.shape) < 0.1] = -np.inf
    for r in range(0, n, 5):
        j = rng.integers(K)
        kind = (r // 5) % 7
        if kind == 0:
            rows[r, j:] = rows[r].max() if np.isfinite(rows[r].max()) else 1.0  # exact ties
        elif kind == 1:
            rows[r, :] = 5.0 - 5.0 * TIE_TOL * rng.random(K)  # ties within the tolerance, |max| > 1
        elif kind == 2:
            rows[r, :] = rng.choice([0.0, -0.0], K)  # signed zeros
        elif kind == 3:
            rows[r, j] = np.nan
        elif kind == 4:
            rows[r, :] = -np.inf
        elif kind == 5:
            rows[r, j] = np.inf
        else:
            rows[r, :] = 0.5 - 0.5 * TIE_TOL * rng.random(K)  # ties within the tolerance, |max| < 1
    with np.errstate(invalid="ignore"):  # inf − inf in the threshold of the +inf rows (NaN: no arm above it)
        want = plain(scores)
        np.testing.assert_array_equal(_tie_argmax(scores), want)
        np.testing.assert_array_equal(_tie_argmax(scores, np.argmax(scores, axis=-1)), want)
        swapped = np.ascontiguousarray(np.swapaxes(scores, 0, -1))
        np.testing.assert_array_equal(_tie_argmax(np.swapaxes(swapped, 0, -1)), want)  # not C-ordered


@pytest.mark.parametrize("masked", [False, True])
def test_period_arms_on_a_blocks_products_are_the_periods_own(masked):
    """_period_arms given the period's columns of the block's table products (formed once per block by the
    learner, shared contexts) chooses the arms it chooses from the period's own table_products, every period of
    the block, bit for bit (the quadratic forms' floats included, so ties break alike).  (A slice offset by one
    user, or the block's products not copied to the period's layout, would fail it.)"""
    from fedbandit.learners.concurrent_linucb import _period_arms
    from fedbandit.learners.linucb import table_products

    rng = np.random.default_rng(4 + masked)
    n_b, K, d, R, c = 192, 20, 3, 4, 16
    feats = rng.standard_normal((n_b, 1, K, d)) / np.sqrt(d)
    feats[:, :, 3] = feats[:, :, 5]  # tied arms
    mask = rng.random((n_b, 1, K)) < 0.8 if masked else None
    if masked:
        mask[:, :, 0] = True
    block = table_products(feats[:, 0].reshape(-1, d))
    a = rng.standard_normal((R, d, d))
    v_inv = np.linalg.inv(a @ np.swapaxes(a, 1, 2) + np.eye(d))
    theta = rng.standard_normal((R, d))
    for s in range(0, n_b, c):
        betas = np.linspace(1.0, 1.5, c) + s
        m = None if mask is None else mask[s : s + c]
        plain = _period_arms(feats[s : s + c], theta, v_inv, betas, m)
        got = _period_arms(feats[s : s + c], theta, v_inv, betas, m,
                           np.ascontiguousarray(block[:, s * K : (s + c) * K]))
        np.testing.assert_array_equal(got, plain)


@pytest.mark.parametrize("min_period", [16, 24, 1000])
def test_shared_context_runs_on_block_products_are_the_runs_on_each_periods_own(monkeypatch, min_period):
    """A learner on shared contexts (the block's table products formed once, each period given its columns)
    regrets, bit for bit, what it regrets when every period forms its own products (the plain form: the
    products argument dropped); periods that straddle blocks (24, 1000 users) included.  (The products of
    the wrong users, e.g. the previous period's, fail it.)"""
    import fedbandit.learners.concurrent_linucb as cl

    def env():
        return SyntheticLinearEnv(1, n_arms=7, dim=3, n_runs=3, noise_std=0.1, shared_contexts=True,
                                  means_from_raw=False, seed=5, block_size=200)

    def run():
        lr = ConcurrentShuffleLinUCB(create("central", epsilon=2.0, delta=1e-5, relation="replace"), n_users=3000,
                                     dim=3, min_period=min_period)
        return lr.run(env(), np.random.default_rng(8), per_user=True).extras["user_regret"]

    plain_arms = cl._period_arms
    given = []

    def spy(*args):
        given.append(args[-1] is not None)
        return plain_arms(*args)

    monkeypatch.setattr(cl, "_period_arms", spy)
    fast = run()
    assert given and all(given)
    monkeypatch.setattr(cl, "_period_arms", lambda feats, theta, v_inv, betas, mask, products=None:
                        plain_arms(feats, theta, v_inv, betas, mask))
    np.testing.assert_array_equal(fast, run())


def test_gram_of_zero_one_records_is_the_einsum():
    """_gram's matrix product for x of 1.0/+0.0 entries equals np.einsum("rbd,rbe->rde", x, x) bit for bit
    (exact integers), at the gap family's shapes and beyond; _zero_one admits only 1.0 and +0.0 (−0.0, NaN,
    0.5 and 2.0 refused); and for general x _gram is the einsum itself."""
    from fedbandit.learners.concurrent_linucb import _gram, _zero_one

    rng = np.random.default_rng(6)
    for R, b, d in ((27, 64, 2), (4, 4096, 5), (3, 1, 3)):
        x = (rng.random((R, b, d)) < 0.4).astype(float)
        assert _zero_one(x)
        np.testing.assert_array_equal(_gram(x, True), np.einsum("rbd,rbe->rde", x, x))
        np.testing.assert_array_equal(np.signbit(_gram(x, True)), False)
        xr = rng.standard_normal((R, b, d))
        np.testing.assert_array_equal(_gram(xr, False), np.einsum("rbd,rbe->rde", xr, xr))
    assert _zero_one(np.broadcast_to(np.eye(3), (5, 3, 3)))
    for bad in (-0.0, np.nan, 0.5, 2.0):
        a = np.eye(3)
        a[1, 2] = bad
        assert not _zero_one(a), bad


@pytest.mark.parametrize("arms", ["orthogonal", "general"])
def test_fixed_arm_runs_sum_the_gram_as_the_einsum_does(monkeypatch, arms):
    """A fixed-arm run (the gap family's static blocks, the central protocol: the learner sums the period's
    Gram matrices itself) regrets, bit for bit, what it regrets with every Gram sum by the einsum (the plain
    form); on orthogonal arms (1.0/+0.0: the matrix product taken) and on general fixed arms (the einsum kept:
    a product there sums in another order, so treating every static block as 0/1 fails it)."""
    import dataclasses

    import fedbandit.learners.concurrent_linucb as cl
    from fedbandit.envs.orthogonal import OrthogonalArmsEnv

    base = OrthogonalArmsEnv(np.geomspace(0.05, 0.5, 6), 3, noise_std=0.1, seed=3)
    table = np.random.default_rng(2).uniform(0.05, 0.6, (base.n_runs, 1, 3, 3))  # general fixed arms (R, 1, K, d)

    class Env:
        n_agents, dim, n_runs = 1, base.dim, base.n_runs

        def iter_blocks(self, horizon):
            for blk in base.iter_blocks(horizon):
                if arms == "general":
                    blk = dataclasses.replace(blk, _features=np.broadcast_to(table, blk.features.shape))
                yield blk

    def run(exact=False):
        lr = ConcurrentShuffleLinUCB(create("central", epsilon=2.0, delta=1e-5, relation="replace"), n_users=4000,
                                     dim=3, min_period=64, noise_free=exact)
        return lr.run(Env(), np.random.default_rng(8), per_user=True).extras["user_regret"]

    taken = []
    plain_gram = cl._gram
    monkeypatch.setattr(cl, "_gram", lambda x, zero_one: taken.append(zero_one) or plain_gram(x, zero_one))
    fast, fast_twin = run(), run(exact=True)
    assert taken and all(taken) == (arms == "orthogonal")
    monkeypatch.setattr(cl, "_gram", lambda x, zero_one: np.einsum("rbd,rbe->rde", x, x))
    np.testing.assert_array_equal(fast, run())
    np.testing.assert_array_equal(fast_twin, run(exact=True))


@pytest.mark.parametrize("layout", ["one", "broadcast", "per-run"])
def test_static_played_is_the_fancy_indexed_gather(layout):
    """_static_played's take of one table's rows equals feats[runs[:, None] or 0, arms] for the three layouts
    of a static block: one run axis entry, a run axis broadcast with stride 0 (the gap family), and
    per-run arms (a take from run 0's table there would fail it)."""
    from fedbandit.learners.concurrent_linucb import _static_played

    rng = np.random.default_rng(2)
    R, K, d, c = 5, 4, 3, 7
    table = rng.standard_normal((1 if layout != "per-run" else R, K, d))
    feats = np.broadcast_to(table, (R, K, d)) if layout == "broadcast" else table
    arms = rng.integers(0, K, (R, c))
    runs = np.arange(R)
    plain = feats[runs[:, None] if feats.shape[0] > 1 else 0, arms]
    np.testing.assert_array_equal(_static_played(feats, arms, runs), plain)


@pytest.mark.parametrize("c", [3, 40])
def test_vector_sum_encode_is_the_plain_formula(c):
    """The vector-sum randomizer's records and rounding (through _records01, in place) give the counts and
    draws of the formula written entry by entry: z = (x y, x_i x_j), clip((z/s + 1)/2, 0, 1) g, rounded up
    with probability its fraction (a missing clip, or g applied before the mapping, fails it)."""
    from fedbandit.protocols.concurrent import _triu

    dim, runs, B = 3, 4, 12
    x, y, _ = _users(np.random.default_rng(8), c, runs, dim)
    x *= 1.5  # some records outside [-s, s]: the clip matters
    proto = _configured_period((B,), 120, B, dim=dim, name="sequential-vector-sum").reset(
        n_runs=runs, rng=np.random.default_rng(3))
    r = proto.randomizer
    rng = np.random.default_rng(4)
    got = r.encode((x, y), rng)
    # the plain formula, with the same generator state
    ref_rng = np.random.default_rng(4)
    iu, ju = _triu(dim)
    z = np.concatenate([x * y[..., None], x[..., iu] * x[..., ju]], axis=-1)
    scaled = np.clip((z / r.half_range + 1.0) / 2.0, 0.0, 1.0) * r.g
    low = np.floor(scaled)
    ones = low + (ref_rng.random(scaled.shape) < scaled - low)
    if c < B:
        assert got == {}
        np.testing.assert_array_equal(r._ones, ones.sum(axis=0))
    else:
        times, counts = got[0]
        cum = np.cumsum(ones, axis=0)
        batch = np.diff(cum[times - 1], axis=0, prepend=0.0)
        noise = ref_rng.binomial(B * r.mech.b, r.mech.p, batch.shape)
        np.testing.assert_array_equal(counts, batch + noise)
        np.testing.assert_array_equal(r._ones, cum[-1] - cum[times[-1] - 1])
    assert rng.bit_generator.state == ref_rng.bit_generator.state


def _plain_one_user_releases(proto, x, y, rng):
    """The concurrent shuffle's releases of one-user periods, written out plainly (the protocol's code before its
    one-user fast paths): np.clip and fancy indexing for the records, a new rounding array per user, every
    closing count sampled column by column (m ≤ 16) or by two binomials, the analyzer's masked sums, the Gram
    prefix unpacked by two fancy assignments.  Returns [(bias (R, d), gram (R, d, d))] per user."""
    from fedbandit.mechanisms.randomized_response import _SMALL_BATCH, _small_count_cdf

    r = proto.randomizer
    levels, s = r.levels, r.half_range
    n, R, d = x.shape
    iu, ju = np.triu_indices(d)
    g = np.array(r.resolutions, dtype=float)[:, None, None, None]
    ones = np.zeros((len(levels), R, s.size))
    since = np.zeros((len(levels), R, s.size))
    out = []
    for t in range(1, n + 1):
        xt, yt = x[t - 1 : t], y[t - 1 : t]
        z = np.concatenate([xt * yt[..., None], xt[..., iu] * xt[..., ju]], axis=-1)
        z01 = np.clip((z / s + 1.0) / 2.0, 0.0, 1.0)
        scaled = z01[None] * g
        low = np.floor(scaled)
        up = rng.random(scaled.shape) < scaled - low
        ones += low[:, 0]
        ones += up[:, 0]
        decoded = {}
        for i in reversed(range(len(levels))):
            lvl = levels[i]
            if t % lvl.n_users:
                continue
            batch = ones[i].astype(np.int64)[None]
            ones[i] = 0.0
            m = lvl.n_messages
            if m <= _SMALL_BATCH:
                table, u = _small_count_cdf(m, lvl.q0, lvl.q1), rng.random(batch.shape)
                count = np.zeros(batch.shape, dtype=np.int64)
                for j in range(m):
                    count += u > table[batch, j]
            else:
                count = rng.binomial(batch, lvl.q1) + rng.binomial(m - batch, lvl.q0)
            b, gi, p = lvl.n_users, lvl.resolution, lvl.p
            decoded[i] = (np.array([t]), (count - b * gi * p / 2.0) / ((1.0 - p) * gi))
        last_clear = -1
        for i in range(len(levels)):
            if i not in decoded:
                continue
            times, sums = decoded[i]
            if last_clear >= 0:
                since[i] = sums[times > last_clear].sum(axis=0)
            else:
                since[i] += sums.sum(axis=0)
            last_clear = max(last_clear, int(times[-1]))
        prefix = s * (2.0 * since.sum(axis=0) - t)
        gram = np.empty((R, d, d))
        gram[:, iu, ju] = prefix[:, d:]
        gram[:, ju, iu] = prefix[:, d:]
        out.append((prefix[:, :d], gram))
    return out


@pytest.mark.parametrize("sizes,dim", [((8, 4, 2, 1), 2), ((64, 32, 16, 8, 4, 2, 1), 3), ((16, 4, 1), 4)])
def test_one_user_periods_release_the_plain_implementations_floats(sizes, dim):
    """The one-user release path (the dyadic schedule's hot loop: record by take and maximum/minimum, rounding in
    kept work arrays, counts of small batches by one take, the analyzer without masks for single releases, the
    Gram prefix by one take) gives, with the same generator, the plain implementation's floats bit for bit, user
    after user, and leaves the generator in the same state (so the same later draws).  Levels of m ≤ 16 and of
    m > 16 messages both occur; records at and beyond their range's ends (clipped) too."""
    n, runs = 2 * sizes[0], 3
    x, y, _ = _users(np.random.default_rng(dim), n, runs, dim)
    x[::5] *= 3.0  # some records beyond their range: clipped
    proto = _configured(sizes, n, dim=dim).reset(n_runs=runs, rng=np.random.default_rng(3))
    assert {lvl.n_messages <= 16 for lvl in proto.randomizer.levels} == {True, False}
    fast = [proto.release(x[t - 1 : t], y[t - 1 : t]) for t in range(1, n + 1)]
    ref_rng = np.random.default_rng(3)
    plain = _plain_one_user_releases(proto, x, y, ref_rng)
    for t, ((fb, fg), (pb, pg)) in enumerate(zip(fast, plain), start=1):
        np.testing.assert_array_equal(fb, pb, err_msg=f"bias after user {t}")
        np.testing.assert_array_equal(fg, pg, err_msg=f"gram after user {t}")
    assert proto._noise_rng.random() == ref_rng.random()


def _sums_one_at_a_time(per_round):
    """out[:, 0] = r[:, 0]; out[:, t] = out[:, t − 1] + r[:, t]: the cumulative regret, one addition at a time."""
    out = np.empty_like(per_round)
    acc = per_round[:, 0].copy()
    out[:, 0] = acc
    for t in range(1, per_round.shape[1]):
        acc = acc + per_round[:, t]
        out[:, t] = acc
    return out


def test_cumulative_regret_is_the_sequential_sum_of_the_user_regret():
    """RunResult.regret is Σ_{s ≤ t} of the (per-round) user regret, added left to right, whether or not the
    per-user regret is kept (without it the sums reuse its storage; with it, it must stay per user)."""
    for name, params in (("central", {"relation": "replace"}), ("concurrent-shuffle", {"k": 2})):
        for agents in (1, 3):
            def run(per_user):
                env = SyntheticLinearEnv(agents, n_arms=5, dim=2, n_runs=3, noise_std=0.1, seed=4)
                lr = ConcurrentShuffleLinUCB(create(name, epsilon=4.0, delta=1e-6, **params), n_users=150 * agents,
                                             dim=2, noise_bound=0.1, agents_per_round=agents, min_period=4)
                return lr.run(env, np.random.default_rng(3), per_user=per_user)

            kept, plain = run(True), run(False)
            user = kept.extras["user_regret"]
            per_round = user.reshape(3, 150, agents).sum(axis=2) if agents > 1 else user
            assert np.all(user >= 0) and np.any(np.diff(user, axis=1) < 0), (name, agents)  # per user, not cumulative
            np.testing.assert_array_equal(kept.regret, _sums_one_at_a_time(per_round), err_msg=f"{name} M={agents}")
            np.testing.assert_array_equal(plain.regret, kept.regret, err_msg=f"{name} M={agents}")
            assert plain.regret.flags.c_contiguous and plain.regret.shape == (3, 150)


def test_kept_checkpoints_are_the_whole_runs_columns():
    """run_together(keep=...) gives the columns keep − 1 of the whole cumulative regret, bit for bit: blocks of
    uneven size (the last one shorter), the period-1 loop (central, min_period 1) and the period loop, a
    checkpoint on every block boundary and inside blocks; the whole run's sums written out one at a time."""
    from fedbandit.envs.orthogonal import OrthogonalArmsEnv
    from fedbandit.learners.concurrent_linucb import run_together

    n = 200
    keep = np.array([1, 2, 36, 37, 38, 74, 111, 150, 199, 200])
    envs = {
        "gaps": lambda: OrthogonalArmsEnv(np.array([0.1, 0.3, 0.3]), 2, noise_std=0.1, seed=5, block_size=37),
        "contextual": lambda: SyntheticLinearEnv(1, n_arms=4, dim=2, n_runs=3, noise_std=0.1, seed=6, block_size=37),
    }
    protocols = {"central-1": ("central", {"relation": "replace"}, 1), "central-4": ("central", {"relation": "replace"}, 4),
                 "k2": ("concurrent-shuffle", {"k": 2}, 4)}
    for env_name, make in envs.items():
        def learners():
            return [ConcurrentShuffleLinUCB(create(name, epsilon=4.0, delta=1e-6, **params), n_users=n, dim=2,
                                            noise_bound=0.1, min_period=period)
                    for name, params, period in protocols.values()]

        rngs = lambda: [np.random.default_rng(i) for i in range(len(protocols))]  # noqa: E731
        whole, _ = run_together(learners(), make(), rngs(), per_user=True)
        part, _ = run_together(learners(), make(), rngs(), keep=keep)
        for label, w, p in zip(protocols, whole, part):
            sums = _sums_one_at_a_time(w.extras["user_regret"])
            np.testing.assert_array_equal(p.t, keep)
            np.testing.assert_array_equal(p.regret, sums[:, keep - 1], err_msg=f"{env_name} {label}")
            np.testing.assert_array_equal(p.regret, w.regret[:, keep - 1], err_msg=f"{env_name} {label}")
            assert p.regret.shape == (3, keep.size)
    with pytest.raises(ValueError, match="keep"):
        run_together(learners(), make(), rngs(), keep=np.array([3, 2]))
    with pytest.raises(ValueError, match="keep"):
        run_together(learners(), make(), rngs(), keep=np.array([0, 5]))
    with pytest.raises(ValueError, match="per_user"):
        run_together(learners(), make(), rngs(), keep=keep, per_user=True)

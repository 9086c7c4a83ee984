"""Tests of fedbandit.learners.concurrent_linucb (private LinUCB on PSCO streams)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedbandit.envs.linear import SyntheticLinearEnv
from fedbandit.learners.concurrent_linucb import ShuffleSumStream, bandit_trial, make_stream, n_coordinates, record_half_range, run_private_linucb
from fedbandit.mechanisms.tree import TreeMechanism


def _records(rng, n, runs, dim):
    x = rng.standard_normal((n, runs, dim))
    x /= np.maximum(1.0, np.linalg.norm(x, axis=-1, keepdims=True))
    y = np.clip(rng.standard_normal((n, runs)) * 0.5, -1, 1)
    iu, ju = np.triu_indices(dim)
    return np.concatenate([x * y[..., None], x[..., iu] * x[..., ju]], axis=-1)


@pytest.mark.parametrize("sizes", [(12, 4), (8, 4, 2, 1), (5,), (1,)])
def test_shuffle_stream_unbiased_with_stated_variance(sizes):
    """Released sums are unbiased with variance at most the stated bound.

    z-test per coordinate and release with |z| < 5 (Bonferroni over ≤ 6 × 24 tests, false
    alarm < 1e-4); the empirical variance must not exceed the bound by more than 15 %
    (sampling error of a variance from 4000 runs is about 2 %).
    """
    dim, n, runs = 2, 24, 4000
    rng = np.random.default_rng(sum(sizes))
    z = _records(rng, n, 1, dim)
    z = np.broadcast_to(z, (n, runs, z.shape[-1]))
    half = record_half_range(dim)
    stream = ShuffleSumStream(sizes, 2.0, 1e-6, n, half)
    stream.reset(runs, rng)
    a = sizes[-1]
    bound = 4.0 * half**2 * stream.max_variance()
    for t in range(a, n + 1, a):
        out = stream.push(z[t - a : t])
        truth = z[:t, 0].sum(axis=0)
        zscore = (out.mean(axis=0) - truth) / np.sqrt(bound / runs)
        assert np.all(np.abs(zscore) < 5), (t, zscore)
        assert np.all(out.var(axis=0) <= 1.15 * bound)


def test_shuffle_stream_accounting():
    stream = make_stream("concurrent", 1.0, 1e-6, n=5000, dim=3, k=2)
    acc = stream.accounting()
    assert acc["batches_certified"]
    assert acc["epsilon"] <= 1.0 + 1e-9 and acc["delta"] <= 1e-6 * (1 + 1e-9)
    assert acc["mechanisms_per_user"] == 2 * n_coordinates(3) == 18
    assert make_stream("local", 1.0, 1e-6, n=100, dim=2).period == 1
    assert make_stream("sequential", 1.0, 1e-6, n=10_000, dim=2).sizes == (math.ceil(10_000**0.6),)
    assert make_stream("tree", 1.0, 1e-6, n=1000, dim=2).sizes[0] == 512


def test_central_stream_matches_tree_mechanism():
    dim, n, runs = 2, 20, 3
    rng = np.random.default_rng(0)
    z = _records(rng, n, runs, dim)
    stream = make_stream("central", 1.0, 1e-6, n=n, dim=dim)
    stream.reset(runs, np.random.default_rng(5))
    mech = TreeMechanism(n, (z.shape[-1],), stream.sigma, batch_shape=(runs,))
    ref_rng = np.random.default_rng(5)
    for t in range(n):
        np.testing.assert_allclose(stream.push(z[t : t + 1]), mech.step(z[t], ref_rng))
    assert stream.accounting()["epsilon"] == 1.0


def _env(runs=3, dim=2, seed=1):
    return SyntheticLinearEnv(1, n_arms=10, dim=dim, n_runs=runs, noise_std=0.1, shared_contexts=False,
                              means_from_raw=False, seed=seed)


def test_linucb_learns_with_little_noise():
    """With a large ε (ε₀ ≥ 5 per coordinate) the private learners behave like LinUCB: far below uniform play."""
    n = 1500
    env = _env()
    uniform = sum((b.best[:, :, 0] - b.means[:, :, 0].mean(axis=-1)).sum(axis=0) for b in env.iter_blocks(n))
    for name, k in (("concurrent", 2), ("central", None), ("local", None)):
        stream = make_stream(name, 100.0, 1e-6, n=n, dim=2, k=k)
        res = run_private_linucb(stream, _env(), n, np.random.default_rng(0), beta_scale=0.3)
        assert res["regret"].shape == (3, n)
        assert np.all(res["regret"] >= -1e-12)
        assert np.all(res["regret"].sum(axis=1) < 0.2 * uniform), (name, res["regret"].sum(axis=1), uniform)


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
    """A period-1 stream through the lean one-user loop and through the general block loop:
    same arms, same regret, on the same draws."""
    n = 80
    for name in ("tree", "central"):
        res = [
            run_private_linucb(
                make_stream(name, 3.0, 1e-6, n=n, dim=2), _UnequalNormsEnv(), n, np.random.default_rng(3), lean=lean
            )
            for lean in (True, False)
        ]
        np.testing.assert_allclose(res[0]["regret"], res[1]["regret"], atol=1e-12)


def test_bandit_trial_outputs():
    cfg = dict(n=300, epsilon=10.0, delta=1e-6, dim=2, runs=2, n_arms=10,
               learners=[["concurrent", 1], ["sequential", None], ["central", None]])
    out = bandit_trial(cfg, np.random.default_rng(0))
    for lab in ("concurrent-1", "sequential", "central"):
        assert out[lab].shape == (2,)
        assert out["curves"][lab].shape == out["checkpoints"].shape
    assert np.all(out["uniform"] > 0)


def test_bad_inputs():
    with pytest.raises(ValueError, match="name"):
        make_stream("magic", 1.0, 1e-6, n=100, dim=2)
    with pytest.raises(ValueError, match="k"):
        make_stream("concurrent", 1.0, 1e-6, n=100, dim=2)
    with pytest.raises(ValueError, match="k"):
        make_stream("concurrent", 1.0, 1e-6, n=100, dim=2, k=0)
    with pytest.raises(ValueError, match="epsilon"):
        make_stream("local", 0.0, 1e-6, n=100, dim=2)
    with pytest.raises(ValueError, match="delta"):
        make_stream("central", 1.0, 1.0, n=100, dim=2)
    with pytest.raises(ValueError, match="batch_sizes"):
        ShuffleSumStream((10, 3), 1.0, 1e-6, 100, record_half_range(2))
    with pytest.raises(ValueError, match="batch_sizes"):
        ShuffleSumStream((200,), 1.0, 1e-6, 100, record_half_range(2))
    stream = ShuffleSumStream((4, 2), 1.0, 1e-6, 100, record_half_range(2))
    stream.reset(2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="records"):
        stream.push(np.zeros((3, 2, 5)))
    env = SyntheticLinearEnv(2, n_arms=10, dim=2, seed=0)
    with pytest.raises(ValueError, match="n_agents"):
        run_private_linucb(stream, env, 10, np.random.default_rng(0))


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
    for name, k in (("central", None), ("concurrent", 2)):
        for lean in (True, False):
            stream = make_stream(name, 3.0, 1e-6, n=n, dim=2, k=k)
            res = run_private_linucb(stream, _PaddedArmsEnv(), n, np.random.default_rng(0), lean=lean)
            assert np.all(np.isfinite(res["regret"])), (name, lean)

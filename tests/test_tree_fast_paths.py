"""The central tree's per-step fast paths against the plain implementation, bit for bit.

The lockstep release and update of :class:`fedbandit.mechanisms.tree.TreeRandomizer` /
:class:`~fedbandit.mechanisms.tree.TreeAnalyzer` add the stored levels in place instead of
gathering them (``stored[levels].sum(axis=0)``), the segmented noise is scaled straight into
its columns instead of concatenated, and the statistics' packing gathers the Gram triangle by
one flat index.  Each must give the same floats (signed zeros included) and consume the same
draws as the plain implementation written out here.
"""

import numpy as np
import pytest

from fedbandit.mechanisms.tree import TreeAnalyzer, TreeRandomizer, _fold_levels
from fedbandit.protocols.statistics.packing import pack_unchecked, unpack_unchecked


def bits(a):
    return np.ascontiguousarray(a).view(np.uint8)


class PlainTree:
    """Algorithm 2's randomizer and analyzer, runs in lockstep, as the package had them."""

    def __init__(self, n_steps, shape, sigma, segments=None):
        kappa = n_steps.bit_length()
        self.k, self.sigma, self.segments, self.shape = 0, sigma, segments, shape
        self.alpha = np.zeros((kappa,) + shape)
        self.tilde = np.zeros((kappa,) + shape)

    def noise(self, rng):
        def draw(shape):
            if self.sigma == 0.0:
                return np.zeros(shape)
            z = rng.standard_normal(shape)
            z *= self.sigma
            return z

        if self.segments is None:
            return draw(self.shape)
        return np.concatenate([draw(self.shape[:-1] + (s,)) for s in self.segments], axis=-1)

    def step(self, gamma, rng):
        self.k += 1
        j = (self.k & -self.k).bit_length() - 1
        alpha_j = self.alpha[:j].sum(axis=0) + gamma
        self.alpha[:j] = 0.0
        self.alpha[j] = alpha_j
        z = self.noise(rng)
        noisy = alpha_j + z
        self.tilde[j] = noisy
        set_bits = [lvl for lvl in range(self.tilde.shape[0]) if self.k >> lvl & 1]
        return j, noisy, z, self.tilde[set_bits].sum(axis=0)


def _stream(rng, n_steps, shape, kind):
    g = rng.standard_normal((n_steps,) + shape) * np.exp(rng.uniform(-20, 20, (n_steps,) + shape))
    if kind == "signed-zeros":  # zeros of both signs and small integers: the sign of a zero sum shows
        g = rng.choice([0.0, -0.0, 1.0, -1.0], size=(n_steps,) + shape)
    return g


@pytest.mark.parametrize("sigma", [0.7, 0.0])
@pytest.mark.parametrize("segments", [None, (3, 6)])
@pytest.mark.parametrize("kind", ["wide", "signed-zeros"])
def test_lockstep_release_and_prefix_match_the_plain_tree(sigma, segments, kind):
    n_steps, shape = 45, (4, 9)
    rng = np.random.default_rng(11)
    stream = _stream(rng, n_steps, shape, kind)
    plain = PlainTree(n_steps, shape, sigma, segments)
    rand = TreeRandomizer(n_steps, shape[1:], sigma, batch_shape=shape[:1], segments=segments)
    tree = TreeAnalyzer(n_steps, shape[1:], batch_shape=shape[:1])
    r_plain, r_fast = np.random.default_rng(5), np.random.default_rng(5)
    for g in stream:
        j0, noisy0, z0, prefix0 = plain.step(g, r_plain)
        j1, noisy1, z1 = rand.release(g, r_fast, return_noise=True)
        prefix1 = tree.update(j1, noisy1)
        assert j0 == j1
        for a, b in ((noisy0, noisy1), (z0, z1), (prefix0, prefix1)):
            assert a.shape == b.shape and np.array_equal(bits(a), bits(b))
    assert np.array_equal(bits(plain.alpha), bits(rand._alpha))
    assert r_plain.bit_generator.state == r_fast.bit_generator.state  # the same draws, no more


def test_fold_levels_is_the_gathered_sum():
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        stored = rng.choice([0.0, -0.0, 1.5, -2.25, 1e300, -1e300, 3e-300], size=(n, 5, 3))
        levels = sorted(rng.choice(n, size=int(rng.integers(0, n + 1)), replace=False).tolist())
        last = rng.choice([0.0, -0.0, 1.0, -7.0], size=(5, 3))
        with np.errstate(over="ignore", invalid="ignore"):
            want = stored[levels].sum(axis=0) + last
            got = _fold_levels(stored, levels, last)
            assert np.array_equal(bits(want), bits(got))
            if levels:
                assert np.array_equal(bits(stored[levels].sum(axis=0)), bits(_fold_levels(stored, levels)))


@pytest.mark.parametrize("d", [1, 2, 3, 10])
@pytest.mark.parametrize("lead", [(), (4,), (6, 1), (2, 3, 2)])
def test_pack_and_unpack_match_the_plain_triangle(d, lead):
    rng = np.random.default_rng(d)
    bias = rng.standard_normal(lead + (d,))
    gram = rng.standard_normal(lead + (d, d))
    iu, ju = np.triu_indices(d)
    for g in (gram, np.swapaxes(gram, -1, -2)):  # also a non-contiguous Gram
        want = np.concatenate([bias, g[..., iu, ju]], axis=-1)
        got = pack_unchecked(bias, g)
        assert got.shape == want.shape and np.array_equal(bits(got), bits(want))
    packed = pack_unchecked(bias, gram)
    want_g = np.zeros(lead + (d, d))
    want_g[..., iu, ju] = packed[..., d:]
    want_g[..., ju, iu] = packed[..., d:]
    b, g = unpack_unchecked(packed, d)
    assert np.array_equal(bits(b), bits(packed[..., :d]))
    assert g.shape == want_g.shape and g.dtype == np.float64 and np.array_equal(bits(g), bits(want_g))


def test_calls_without_runs_follow_runs_apart_and_together_again():
    """Whether the runs are at different steps is a flag kept by the per-run calls: a call without
    ``runs`` must advance each run by its own step while they are apart (the same as ``runs`` =
    every run) and step in lockstep once they are together again."""
    R, shape = 3, (4,)
    rng = np.random.default_rng(2)
    masks = [[0], [1, 2], [0, 1, 2], [0], [1], [2], [0, 1, 2]]  # apart, apart, ..., together after [2]
    for sigma in (0.0, 0.5):
        a_rand, b_rand = (TreeRandomizer(16, shape, sigma, batch_shape=(R,)) for _ in range(2))
        a_tree, b_tree = (TreeAnalyzer(16, shape, batch_shape=(R,)) for _ in range(2))
        ra, rb = np.random.default_rng(9), np.random.default_rng(9)
        for runs in masks:
            g = rng.standard_normal((len(runs),) + shape)
            for rand, tree, r in ((a_rand, a_tree, ra), (b_rand, b_tree, rb)):
                j, noisy = rand.release(g, r, runs=np.array(runs))
                tree.update(j, noisy, runs=np.array(runs))
            g = rng.standard_normal((R,) + shape)
            j_a, noisy_a = a_rand.release(g, ra)  # no runs=
            pa = a_tree.update(j_a, noisy_a)
            j_b, noisy_b = b_rand.release(g, rb, runs=np.arange(R))
            pb = b_tree.update(j_b, noisy_b, runs=np.arange(R))
            np.testing.assert_array_equal(np.asarray(j_a) + np.zeros(R, dtype=int), j_b)
            assert np.array_equal(bits(noisy_a), bits(noisy_b)) and np.array_equal(bits(pa), bits(pb))
            np.testing.assert_array_equal(a_rand.steps, b_rand.steps)

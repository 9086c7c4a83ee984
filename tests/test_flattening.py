"""Tests of the flattening transforms (fedbandit.mechanisms.flattening)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.linalg import hadamard

from fedbandit.mechanisms.flattening import DFTFlattener, HadamardFlattener, fwht, make_flattener, next_power_of_two


@pytest.mark.parametrize("k", list(range(0, 12)))
def test_fwht_matches_dense_hadamard(k):
    d = 1 << k
    rng = np.random.default_rng(k)
    x = rng.normal(size=(2, 3, d))
    ref = x @ hadamard(d).T / np.sqrt(d)
    np.testing.assert_allclose(fwht(x), ref, atol=1e-12)
    np.testing.assert_allclose(fwht(x, normalize=False), x @ hadamard(d).T, atol=1e-9)


def test_fwht_is_an_involution():
    x = np.random.default_rng(0).normal(size=(4, 2**13))
    np.testing.assert_allclose(fwht(fwht(x)), x, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(d=st.integers(1, 700), seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(["hadamard", "dft"]))
def test_flatten_is_orthogonal_and_invertible(d, seed, kind):
    f = make_flattener(d, seed, kind)
    x = np.random.default_rng(seed).normal(size=(3, d))
    y = f.flatten(x)
    assert y.shape == (3, f.d_out)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-10)
    np.testing.assert_allclose(f.unflatten(y), x, atol=1e-10)


def test_flattening_spreads_a_spike():
    """A basis vector becomes a vector of entries +-1/sqrt(d') (rho = 1 flatness)."""
    f = HadamardFlattener(100, 3)
    e = np.zeros(100)
    e[17] = 1.0
    y = f.flatten(e)
    np.testing.assert_allclose(np.abs(y), 1 / np.sqrt(128), atol=1e-12)
    g = DFTFlattener(100, 3)
    z = g.flatten(e)
    assert np.max(np.abs(z)) <= 1 / np.sqrt(50) + 1e-12


def test_shared_seed_gives_same_rotation():
    a, b = HadamardFlattener(37, 5), HadamardFlattener(37, 5)
    np.testing.assert_array_equal(a.signs, b.signs)
    assert next_power_of_two(37) == 64 and next_power_of_two(64) == 64 and next_power_of_two(1) == 1


def test_bad_input():
    with pytest.raises(ValueError, match="power-of-two"):
        fwht(np.zeros(12))
    with pytest.raises(ValueError, match="length 10"):
        HadamardFlattener(10, 0).flatten(np.zeros(11))
    with pytest.raises(ValueError, match="length 16"):
        HadamardFlattener(10, 0).unflatten(np.zeros(10))
    with pytest.raises(ValueError, match="d must"):
        HadamardFlattener(0, 0)
    with pytest.raises(ValueError, match="kind"):
        make_flattener(8, 0, "rotation")


def test_flattened_dim_is_each_flattener_output_dimension():
    from fedbandit.mechanisms.flattening import flattened_dim, make_flattener

    for d in (1, 2, 5, 8, 250, 650):
        for kind in ("hadamard", "dft"):
            assert flattened_dim(d, kind) == make_flattener(d, np.random.default_rng(0), kind).d_out


@pytest.mark.parametrize("kind", ["hadamard", "dft"])
def test_run_per_vector_is_each_vector_flattened_with_its_run_s_rotation(kind):
    """run= an array (one run per vector, several runs' vectors in one call) equals flattening each vector alone with
    run= its run, bit for bit; a wrong shape or a run out of range is refused."""
    f = make_flattener(37, np.random.default_rng(0), kind, runs=4)
    x = np.random.default_rng(1).normal(size=(9, 37))
    which = np.array([0, 0, 1, 3, 3, 3, 2, 0, 1])
    ref = np.stack([f.flatten(x[i], run=int(r)) for i, r in enumerate(which)])
    np.testing.assert_array_equal(f.flatten(x, run=which), ref)
    np.testing.assert_array_equal(f.unflatten(ref, run=which), np.stack([f.unflatten(ref[i], run=int(r))
                                                                         for i, r in enumerate(which)]))
    assert not np.array_equal(f.flatten(x, run=np.zeros(9, dtype=int)), ref)
    with pytest.raises(ValueError, match="one run per vector"):
        f.flatten(x, run=which[:5])
    with pytest.raises(ValueError, match="run"):
        f.flatten(x, run=which + 1)

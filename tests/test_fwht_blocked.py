"""The blocked fast Walsh-Hadamard transform (fedbandit.mechanisms.flattening.fwht): every
factor plan and every chunking of the rows gives the dense Hadamard product."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import hadamard

import fedbandit.mechanisms.flattening as flattening
from fedbandit.mechanisms.flattening import _plan, fwht


def _matches_dense(transform, x) -> bool:
    d = x.shape[-1]
    return np.allclose(transform(x, normalize=False), x @ hadamard(d).T, atol=1e-9)


@pytest.mark.parametrize("k", range(1, 21))
def test_plan_factors_k_into_blocks_of_at_most_four(k):
    plan = _plan(k)
    assert sum(plan) == k and max(plan) <= 4 and plan == sorted(plan)
    assert len(plan) == -(-k // 4) and max(plan) - min(plan) <= 1


@pytest.mark.parametrize("shape", [(70, 1024), (3, 5, 2048), (257, 256), (1, 8192)])
def test_several_chunks_and_a_partial_last_chunk(shape):
    """Rows are transformed ``_CHUNK // d`` at a time; these shapes need several chunks
    (70 rows of 1024: 64 + 6), or one row longer than a chunk."""
    x = np.random.default_rng(0).normal(size=shape)
    assert _matches_dense(fwht, x)
    np.testing.assert_allclose(fwht(fwht(x)), x, atol=1e-12)


def test_small_chunks_give_the_same_transform(monkeypatch):
    x = np.random.default_rng(1).normal(size=(9, 64))
    ref = fwht(x)
    monkeypatch.setattr(flattening, "_CHUNK", 64 * 2)  # two rows per chunk, last one alone
    np.testing.assert_allclose(fwht(x), ref, atol=1e-13)


def test_input_is_not_modified_and_views_work():
    x = np.random.default_rng(2).normal(size=(6, 32))
    keep = x.copy()
    y = fwht(x[:, ::1][1:5])  # a view
    np.testing.assert_array_equal(x, keep)
    assert _matches_dense(fwht, x[1:5]) and y.shape == (4, 32)
    z = fwht(x.T.copy().T)  # non-contiguous (Fortran-ordered) input
    np.testing.assert_allclose(z, fwht(np.ascontiguousarray(x)), atol=1e-13)


def test_the_comparison_catches_a_broken_transform(monkeypatch):
    """The dense comparison above is not vacuous: a plan that drops one factor, or a chunk
    loop that skips the last chunk, is caught."""
    x = np.random.default_rng(3).normal(size=(70, 1024))
    monkeypatch.setattr(flattening, "_plan", lambda k: _plan(k)[:-1] + [_plan(k)[-1] - 1])  # one level short
    try:
        caught = not _matches_dense(fwht, x)
    except ValueError:  # or the reshapes refuse the short plan
        caught = True
    assert caught
    monkeypatch.setattr(flattening, "_plan", lambda k: _plan(k)[::-1])  # another valid order: same transform
    assert _matches_dense(fwht, x)
    monkeypatch.undo()

    def skips_last_chunk(x, normalize=True):
        y = fwht(x, normalize=normalize)
        y[64:] = x[64:]
        return y

    assert not _matches_dense(skips_last_chunk, x)

"""composed_gaussian_sigma caches its root search on the exact validated arguments: the cached
value is the uncached solver's, bit for bit, for every argument that enters it."""

from __future__ import annotations

import itertools

import pytest

import fedbandit.accounting.composed_gaussian as cg
from fedbandit.accounting.composed_gaussian import composed_gaussian_sigma


@pytest.mark.parametrize("calibration", ["analytic", "zcdp"])
def test_cached_sigma_is_the_uncached_solvers(calibration):
    cg._composed_gaussian_sigma_cached.cache_clear()
    grid = list(itertools.product((0.75, 2.0, 6.0), (1e-5, 1e-3), (1.0, 10.0), (1, 3)))
    for _ in range(2):  # the second pass is served from the cache
        for eps, delta, sens, t in grid:
            want = cg._composed_gaussian_sigma(eps, delta, sens, t, calibration)
            assert composed_gaussian_sigma(eps, delta, sens, t, calibration=calibration) == want
    info = cg._composed_gaussian_sigma_cached.cache_info()
    assert info.misses == len(grid) and info.hits == len(grid)


def test_validation_still_runs_on_every_call():
    composed_gaussian_sigma(1.0, 1e-5, 1.0)
    with pytest.raises(ValueError):
        composed_gaussian_sigma(1.0, 1e-5, -1.0)
    with pytest.raises(ValueError):
        composed_gaussian_sigma(1.0, 1e-5, 1.0, calibration="nope")

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


def test_cached_zcdp_conversion_is_the_uncached_solvers():
    # approx_dp_to_zcdp (every zCDP-calibrated tree's ρ) is solved once per (typed) (ε, δ): bit for bit the
    # root search as written, on the second pass from the cache; arguments are still validated on every call
    import fedbandit.accounting.zcdp as zcdp

    zcdp._approx_dp_to_zcdp_cached.cache_clear()
    grid = list(itertools.product((0.1, 0.75, 1.0, 4.0, 16.0), (1e-9, 1e-5, 1e-3)))
    for _ in range(2):
        for eps, delta in grid:
            assert zcdp.approx_dp_to_zcdp(eps, delta) == zcdp._approx_dp_to_zcdp(eps, delta)
    info = zcdp._approx_dp_to_zcdp_cached.cache_info()
    assert info.misses == len(grid) and info.hits == len(grid)
    with pytest.raises(ValueError):
        zcdp.approx_dp_to_zcdp(0.0, 1e-5)
    with pytest.raises(ValueError):
        zcdp.approx_dp_to_zcdp(1.0, 1.5)

"""The blocked exact discrete Gaussian sampler (``_sample_exact_tables``) against the plain
one-pass loop it replaced: the same samples, bit for bit, and the generator left in the same state.

The fast path draws each batch of candidates whole (r1 then r2, the stream) and decides them
``_BLOCK`` at a time in preallocated buffers, signs them with integer arithmetic and detects
undecided candidates by counts; the plain loop below is the previous implementation, written out.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest

import fedbandit.mechanisms.discrete_gaussian as dg
from fedbandit.mechanisms.discrete_gaussian import (
    _FIX,
    _U64,
    _as_fraction,
    _build_tables,
    _exp_bounds,
    _resolve_candidate,
)


def _ceil_div(a, b):
    return -((-a) // b)


def plain_tables(sigma2):
    """The threshold tables' recurrences as first written (Fraction comparison, divisions)."""
    t = math.isqrt(sigma2.numerator // sigma2.denominator) + 1
    s = sigma2 / t
    P = _FIX
    one = 1 << P
    q_lo, q_hi = _exp_bounds(Fraction(-1, t), P)
    a_lo, a_hi = _exp_bounds(-s * s / (2 * sigma2), P)
    r_lo, r_hi = _exp_bounds((2 * s - 1) / (2 * sigma2), P)
    b_lo, b_hi = _exp_bounds(-1 / sigma2, P)
    pq_lo = pq_hi = one
    lq, hq, la, ha = [], [], [], []
    sh64, sh63 = P - 64, P - 63
    g = 0
    while True:
        lq.append(min(pq_lo >> sh64, _U64 - 1))
        hq.append(min(_ceil_div(pq_hi, 1 << sh64), _U64 - 1))
        la.append(min(a_lo >> sh63, _U64 - 1))
        ha.append(min(_ceil_div(a_hi, 1 << sh63), _U64 - 1))
        if g > s and ha[-1] <= 1:
            break
        pq_lo = (pq_lo * q_lo) >> P
        pq_hi = _ceil_div(pq_hi * q_hi, one)
        a_lo = (a_lo * r_lo) >> P
        a_hi = _ceil_div(a_hi * r_hi, one)
        r_lo = (r_lo * b_lo) >> P
        r_hi = _ceil_div(r_hi * b_hi, one)
        g += 1
    la[-1] = 0
    return t, s, g - 1, lq + [0], hq + [0], la + [0], ha + [0]


@pytest.mark.parametrize("sigma2", [_as_fraction(v) ** 2 for v in (0.01, 0.3, 1.0, 1.93, 3.0, 8.06, 141.27, 5766.8)]
                         + [Fraction(9), Fraction(49, 4), Fraction(1, 3)])
def test_the_tables_are_those_of_the_plain_recurrences(sigma2):
    """The table loop (shifts for the divisions by powers of two, floor(s) for the Fraction s)
    builds the same brackets as the plain recurrences, at integer and non-integer s."""
    tab = _build_tables.__wrapped__(sigma2)
    t, s, gtab, lq, hq, la, ha = plain_tables(sigma2)
    assert (tab.t, tab.s, tab.gtab) == (t, s, gtab)
    for got, want in ((tab.lq, lq), (tab.hq, hq), (tab.la, la), (tab.ha, ha)):
        assert got.dtype == np.uint64 and got.tolist() == want


def plain_sample(tab, n, rng):
    """The plain loop: every candidate of a batch decided in one pass (the previous implementation)."""
    out = np.empty(n, dtype=np.int64)
    filled = 0
    gcap = tab.gtab + 1
    tf = float(tab.t)
    one = np.uint64(1)
    while filled < n:
        need = n - filled
        m = min(int(need / tab.accept_rate * 1.03) + 64, dg._CHUNK)
        r1 = rng.integers(0, _U64, size=m, dtype=np.uint64)
        r2 = rng.integers(0, _U64, size=m, dtype=np.uint64)
        gf = (r1 >> np.uint64(11)).astype(np.float64)
        gf += 0.5
        gf *= 2.0**-53
        np.log(gf, out=gf)
        gf *= -tf
        np.minimum(gf, gcap, out=gf)
        g = gf.astype(np.intp)
        ok = (r1 < tab.lq[g]) & (r1 >= tab.hq[g + 1])
        a = r2 >> one
        acc_sure = a < tab.la[g]
        undecided = ((a < tab.ha[g]) & ~acc_sure) | ~ok
        negative = (r2 & one).astype(bool)
        accept = ok & acc_sure & ~(negative & (g == 0))
        vals = np.where(negative, -g, g).astype(np.int64)
        for i in np.flatnonzero(undecided):
            y = _resolve_candidate(tab, int(r1[i]), int(r2[i]), rng)
            accept[i] = y is not None
            if y is not None:
                vals[i] = y
        got = vals[accept]
        take = min(got.size, need)
        out[filled : filled + take] = got[:take]
        filled += take
    return out


def _same(tab, n, seed):
    r_plain, r_fast = np.random.default_rng(seed), np.random.default_rng(seed)
    a = plain_sample(tab, n, r_plain)
    b = dg._sample_exact_tables(tab, n, r_fast)
    return np.array_equal(a, b) and r_plain.bit_generator.state == r_fast.bit_generator.state


# sigmas of chapter 5's grids (0.8 to 5,800) and below 1 (a table of a few entries)
@pytest.mark.parametrize("sigma", [0.3, 0.8, 1.93, 8.06, 34.07, 141.27, 1047.4, 5766.8])
@pytest.mark.parametrize("n", [1, 5, 1000, 70_001])
def test_the_blocked_sampler_draws_what_the_plain_loop_draws(sigma, n):
    assert _same(_build_tables(_as_fraction(sigma) ** 2), n, [n, 7])


def test_several_batches_and_a_partial_last_block(monkeypatch):
    """More candidates than one batch (two batches of _CHUNK), and blocks that do not divide a batch."""
    tab = _build_tables(_as_fraction(3.41) ** 2)
    assert _same(tab, 1_100_000, 1)
    monkeypatch.setattr(dg, "_BLOCK", 1000)
    assert _same(tab, 12_345, 2)


def test_undecided_candidates_are_finished_in_the_same_order(monkeypatch):
    """Tables with wide brackets (lower ends halved) make many candidates undecided, or the
    float guess of G look off: both loops finish them with _resolve_candidate, which draws more
    bits from the generator, in the same order."""
    monkeypatch.setattr(dg, "_BLOCK", 256)
    base = _build_tables(_as_fraction(2.5) ** 2)
    for field in ("la", "lq"):
        wide = dataclasses.replace(base, **{field: getattr(base, field) // np.uint64(2) + (getattr(base, field) > 0)})
        assert _same(wide, 3000, 3), field


def test_the_comparison_catches_a_broken_sampler(monkeypatch):
    """Not vacuous: a blocked sampler that forgets to reject the (negative, G = 0) pair (its
    x != -1 test always true) differs from the plain loop."""
    tab = _build_tables(_as_fraction(1.93) ** 2)
    assert _same(tab, 10_000, 5)
    real = np.not_equal
    monkeypatch.setattr(dg.np, "not_equal", lambda x, y, out=None: np.ones_like(out) if out is not None else real(x, y))
    assert not _same(tab, 10_000, 5)

r"""Exact sampling from the discrete Gaussian :math:`\mathcal N_{\mathbb Z}(0, \sigma^2)`.

The discrete Gaussian puts mass proportional to :math:`e^{-y^2/(2\sigma^2)}` on every
integer :math:`y` [CKS20]_.  This module implements the rejection sampler of [CKS20]_
(Algorithm 3): propose :math:`Y` from the discrete Laplace distribution with integer
scale :math:`t = \lfloor\sigma\rfloor + 1` (mass :math:`\propto e^{-|y|/t}`) and accept
with probability

.. math:: \exp\!\Big(-\frac{(|Y| - \sigma^2/t)^2}{2\sigma^2}\Big).

The product of proposal and acceptance is proportional to :math:`e^{-y^2/(2\sigma^2)}`
for *any* integer :math:`t \ge 1`, so the output is exactly discrete Gaussian.

How the fast path stays exact
-----------------------------
Every random decision has the form "is a uniform :math:`U \in [0, 1)` below a real
number :math:`v`?" (a Bernoulli(:math:`v`) draw):

* the proposal magnitude :math:`G = |Y|` is the geometric variable
  :math:`G = \max\{g \ge 0 : U_1 < q^g\}`, :math:`q = e^{-1/t}` (so
  :math:`P(G \ge g) = q^g`);
* the sign is a fair bit, and the pair (negative sign, :math:`G = 0`) is rejected, as in
  [CKS20]_ Algorithm 2, so that :math:`P(Y = y) \propto q^{|y|}` on all of
  :math:`\mathbb Z`;
* acceptance is :math:`U_2 < A_G`, :math:`A_g = e^{-(g - \sigma^2/t)^2/(2\sigma^2)}`.

For each :math:`\sigma` we precompute, once and in exact integer arithmetic, integer
brackets :math:`L_g \le 2^{b} v_g \le H_g` of every threshold (:math:`b = 64` for
:math:`q^g`, :math:`b = 63` for :math:`A_g`): the constants :math:`e^{-1/t}`,
:math:`e^{-\sigma^2/(2t^2)}`, :math:`e^{(2s-1)/(2\sigma^2)}` and :math:`e^{-1/\sigma^2}`
(:math:`s = \sigma^2/t`) are bracketed by a Taylor series summed in exact rational
arithmetic with a rigorous remainder bound, and the tables follow by the recurrences
:math:`q^{g+1} = q^g \cdot q`, :math:`A_{g+1} = A_g \cdot e^{(2s-1)/(2\sigma^2)}
e^{-g/\sigma^2}` in 160-bit fixed point, rounding lower brackets down and upper brackets
up.  A sample then costs two 64-bit uniform integers :math:`r_1, r_2` (the first bits
of :math:`U_1, U_2`) and integer comparisons in ``numpy.uint64``:
:math:`r < L` proves :math:`U < v`, :math:`r \ge H` proves :math:`U \ge v`.  A
floating-point logarithm is used only to *guess* :math:`G`; the guess is then verified
by the two exact comparisons :math:`U_1 < q^G` and :math:`U_1 \ge q^{G+1}`.  No
floating-point number enters any accept/reject decision.

When a comparison is undecided (:math:`L \le r < H`: probability about
:math:`2^{-62}` per comparison), or the float guess was off, that candidate alone is
finished in Python by revealing further bits of the *same* uniform and bracketing the
threshold to higher precision until the comparison is decided; the outcome is
therefore exactly the one the infinite-precision comparison would give.  Candidates
keep their order, so the returned samples are i.i.d.

For :math:`\sigma` above :data:`MAX_TABLE_SIGMA` the tables would be too large; the
exact path then falls back to the scalar Algorithm 1-3 of [CKS20]_ in rational
arithmetic (slow, with a warning).  An opt-in ``exact=False`` path uses the same
proposal with floating-point acceptance; it is fast for any :math:`\sigma` but its
probabilities are only accurate to about :math:`10^{-16}` relative error (documented
as inexact).

References
----------
.. [CKS20] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential
   privacy", NeurIPS 2020.  Algorithm 1 (Bernoulli(exp(-gamma))), Algorithm 2
   (discrete Laplace), Algorithm 3 (discrete Gaussian).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from numbers import Rational

import numpy as np
from numpy.typing import ArrayLike

from fedbandit._validation import (
    check_array,
    check_bool,
    check_nonnegative_float,
    check_positive_float,
    check_positive_int,
    check_rng,
    check_shape,
)

__all__ = [
    "MAX_TABLE_SIGMA",
    "sample_discrete_gaussian",
    "sample_discrete_gaussian_reference",
    "discrete_gaussian_pmf",
    "discrete_gaussian_variance",
    "bernoulli_exp_reference",
    "discrete_laplace_reference",
]

#: Largest sigma served by the table-driven exact path (tables of about 10.4 sigma entries).
MAX_TABLE_SIGMA = 65536.0

_FIX = 160  # fixed-point bits of the table recurrences (error ~ table size * 2^-160)
_U64 = 1 << 64
_U63 = 1 << 63
_CHUNK = 1 << 20  # candidates per vectorized batch (bounds temporary memory)
_BLOCK = 1 << 15  # candidates decided at a time within a batch (the buffers stay in L2)


# ---------------------------------------------------------------------------
# Rigorous brackets of exp(z) for rational z
# ---------------------------------------------------------------------------
def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def _exp_bounds(z: Fraction, prec: int) -> tuple[int, int]:
    """Integers ``lo, hi`` with ``lo <= exp(z) * 2**prec <= hi`` (z rational, z <= 1).

    ``exp(w)`` for ``|w| <= 1/2`` is the exact rational Taylor sum plus a remainder of at
    most ``2|w|^(N+1)/(N+1)!`` (the tail is dominated by a geometric series of ratio
    ``|w|/(N+2) <= 1/2``).  Larger ``|z|`` are halved ``j`` times and the bracket squared
    back ``j`` times, rounding the lower end down and the upper end up.
    """
    z = Fraction(z)
    if z > 1:
        raise ValueError("_exp_bounds is only used for z <= 1")
    j = 0
    w = z
    while abs(w) > Fraction(1, 2):
        w /= 2
        j += 1
    wp = prec + 2 * j + 24  # guard bits: squaring at most doubles the absolute error
    one = 1 << wp
    # Taylor sum in fixed point with directed rounding: each term bracketed separately.
    num, den = w.numerator, w.denominator
    lo_sum = hi_sum = 0
    term_num, term_den = 1, 1  # w^k / k! as an exact fraction
    k = 0
    while True:
        lo_sum += (term_num * one) // term_den
        hi_sum += _ceil_div(term_num * one, term_den)
        k += 1
        term_num *= num
        term_den *= den * k
        # remainder after the term of order k-1: |R| <= 2 |w|^k / k!
        rem = _ceil_div(2 * abs(term_num) * one, term_den)
        if rem <= 1:
            break
    lo = lo_sum - rem - 1
    hi = hi_sum + rem + 1
    lo = max(lo, 0)
    for _ in range(j):
        lo = (lo * lo) >> wp
        hi = _ceil_div(hi * hi, one)
    shift = wp - prec
    return lo >> shift, _ceil_div(hi, 1 << shift)


# ---------------------------------------------------------------------------
# Exact threshold tables
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _Tables:
    sigma2: Fraction
    t: int
    s: Fraction  # sigma^2 / t
    gtab: int  # thresholds tabulated for g = 0..gtab+1; A_g <= 2^-63 for g >= gtab+1
    lq: np.ndarray  # uint64, floor-bracket of 2^64 q^g (clipped to 2^64 - 1)
    hq: np.ndarray  # uint64, ceil-bracket of 2^64 q^g; hq[gtab+2] = 0 (sentinel)
    la: np.ndarray  # uint64, floor-bracket of 2^63 A_g; la[gtab+1] = 0
    ha: np.ndarray  # uint64, ceil-bracket of 2^63 A_g
    accept_rate: float  # probability that one candidate is accepted


def _as_fraction(sigma: float | Fraction) -> Fraction:
    if isinstance(sigma, Rational):
        return Fraction(sigma)
    return Fraction(float(sigma))  # the exact binary value of the float


@lru_cache(maxsize=16)
def _build_tables(sigma2: Fraction) -> _Tables:
    t = math.isqrt(sigma2.numerator // sigma2.denominator) + 1  # floor(sigma) + 1
    s = sigma2 / t
    P = _FIX
    one = 1 << P
    q_lo, q_hi = _exp_bounds(Fraction(-1, t), P)
    a_lo, a_hi = _exp_bounds(-s * s / (2 * sigma2), P)  # A_0
    r_lo, r_hi = _exp_bounds((2 * s - 1) / (2 * sigma2), P)  # A_1 / A_0
    b_lo, b_hi = _exp_bounds(-1 / sigma2, P)  # ratio of successive factors
    pq_lo = pq_hi = one  # q^g
    lq, hq, la, ha = [], [], [], []
    sh64, sh63 = P - 64, P - 63
    top = _U64 - 1
    s_floor = s.numerator // s.denominator  # for an integer g, g > s iff g > floor(s)
    # (the loop runs ~10 sigma times: _ceil_div(a, b) is written out as -((-a) // b), and the
    # divisions by powers of two as shifts, -((-a) >> k), which round the same way)
    g = 0
    while True:
        v = pq_lo >> sh64
        lq.append(v if v < top else top)
        v = -((-pq_hi) >> sh64)
        hq.append(v if v < top else top)
        v = a_lo >> sh63
        la.append(v if v < top else top)
        v = -((-a_hi) >> sh63)
        ha.append(v if v < top else top)
        if g > s_floor and v <= 1:
            break
        pq_lo = (pq_lo * q_lo) >> P
        pq_hi = -((-(pq_hi * q_hi)) >> P)
        a_lo = (a_lo * r_lo) >> P
        a_hi = -((-(a_hi * r_hi)) >> P)
        r_lo = (r_lo * b_lo) >> P
        r_hi = -((-(r_hi * b_hi)) >> P)
        g += 1
    gtab = g - 1
    la[-1] = 0  # "beyond the table": never a certain acceptance
    hq.append(0)  # sentinel so that the test U >= q^(G+1) passes for G = gtab + 1
    lq.append(0)
    la.append(0)
    ha.append(0)
    lq_a = np.array(lq, dtype=np.uint64)
    hq_a = np.array(hq, dtype=np.uint64)
    la_a = np.array(la, dtype=np.uint64)
    ha_a = np.array(ha, dtype=np.uint64)
    # Acceptance probability of one candidate (used only to size batches).
    qf = math.exp(-1.0 / t)
    gs = np.arange(gtab + 2, dtype=np.float64)
    pg = (1 - qf) * qf**gs  # geometric magnitude
    acc = ha_a[: gtab + 2].astype(np.float64) / 2.0**63
    rate = float(np.sum(pg * acc) - 0.5 * (1 - qf) * acc[0])
    return _Tables(sigma2, t, s, gtab, lq_a, hq_a, la_a, ha_a, max(rate, 1e-3))


# ---------------------------------------------------------------------------
# Lazy exact comparisons for the rare undecided candidates
# ---------------------------------------------------------------------------
class _LazyUniform:
    """A uniform U in [0, 1) of which only the first ``nbits`` bits are known."""

    __slots__ = ("a", "nbits", "rng")

    def __init__(self, prefix: int, nbits: int, rng: np.random.Generator):
        self.a = int(prefix)
        self.nbits = nbits
        self.rng = rng

    def less_than(self, bounds: Callable[[int], tuple[int, int]]) -> bool:
        """Decide ``U < v`` exactly, where ``bounds(prec)`` brackets ``v * 2**prec``."""
        while True:
            prec = self.nbits + 32
            lo, hi = bounds(prec)
            low_end = self.a << 32  # U in [low_end, low_end + 2^32) / 2^prec
            if low_end + (1 << 32) <= lo:
                return True
            if low_end >= hi:
                return False
            self.a = (self.a << 64) | int.from_bytes(self.rng.bytes(8), "little")
            self.nbits += 64

    def approx(self) -> float:
        return (self.a + 0.5) / 2.0**self.nbits


def _resolve_candidate(tab: _Tables, r1: int, r2: int, rng: np.random.Generator) -> int | None:
    """Finish one candidate exactly from the known bits; return Y or None (rejected)."""
    u1 = _LazyUniform(r1, 64, rng)
    u2 = _LazyUniform(r2 >> 1, 63, rng)
    negative = bool(r2 & 1)
    t, s, sigma2 = tab.t, tab.s, tab.sigma2

    def q_pow(g: int) -> Callable[[int], tuple[int, int]]:
        return lambda prec: _exp_bounds(Fraction(-g, t), prec)

    # G = max{g : U1 < q^g}: start from a float guess, then walk with exact comparisons.
    g = max(0, int(-t * math.log(max(u1.approx(), 1e-300))))
    while g > 0 and not u1.less_than(q_pow(g)):
        g -= 1
    while u1.less_than(q_pow(g + 1)):
        g += 1
    if negative and g == 0:
        return None
    if u2.less_than(lambda prec: _exp_bounds(-((g - s) ** 2) / (2 * sigma2), prec)):
        return -g if negative else g
    return None


# ---------------------------------------------------------------------------
# The vectorized exact sampler
# ---------------------------------------------------------------------------
def _sample_exact_tables(tab: _Tables, n: int, rng: np.random.Generator) -> np.ndarray:
    out = np.empty(n, dtype=np.int64)
    filled = 0
    gcap = tab.gtab + 1
    tf = float(tab.t)
    one = np.uint64(1)
    s11 = np.uint64(11)
    hq_next = tab.hq[1:]  # hq_next[g] = hq[g + 1]
    # A batch of m candidates is drawn whole (two uniform 64-bit integers each, r1 then r2:
    # the stream), then decided _BLOCK candidates at a time in preallocated buffers.
    size = min(_BLOCK, int(n / tab.accept_rate * 1.03) + 64)
    gf_buf = np.empty(size, dtype=np.float64)
    g_buf = np.empty(size, dtype=np.intp)
    u_buf = np.empty(size, dtype=np.uint64)
    x_buf = np.empty(size, dtype=np.int64)
    ok_buf = np.empty(size, dtype=bool)
    sure_buf = np.empty(size, dtype=bool)
    b_buf = np.empty(size, dtype=bool)
    while filled < n:
        need = n - filled
        m = min(int(need / tab.accept_rate * 1.03) + 64, _CHUNK)
        r1_all = rng.integers(0, _U64, size=m, dtype=np.uint64)
        r2_all = rng.integers(0, _U64, size=m, dtype=np.uint64)
        parts = []
        for lo in range(0, m, _BLOCK):
            r1, r2 = r1_all[lo : lo + _BLOCK], r2_all[lo : lo + _BLOCK]
            nb = r1.size
            gf, g, u, x = gf_buf[:nb], g_buf[:nb], u_buf[:nb], x_buf[:nb]
            ok, acc_sure, scratch = ok_buf[:nb], sure_buf[:nb], b_buf[:nb]
            # Float guess of G = floor(-t log U1); only a guess, verified exactly below.  (The top
            # 53 bits of r1 convert to float64 exactly.)
            np.right_shift(r1, s11, out=u)
            np.add(u, 0.5, out=gf)
            gf *= 2.0**-53
            np.log(gf, out=gf)
            gf *= -tf
            np.minimum(gf, gcap, out=gf)
            np.copyto(g, gf, casting="unsafe")  # truncation toward 0, as astype; 0 <= g <= gcap
            # Exact verification: U1 < q^G (certain) and U1 >= q^(G+1) (certain).
            np.take(tab.lq, g, out=u, mode="clip")  # (g is in range: clip never clips)
            np.less(r1, u, out=ok)
            np.take(hq_next, g, out=u, mode="clip")
            np.greater_equal(r1, u, out=scratch)
            ok &= scratch
            # Acceptance U2 < A_G: certain when a < la[G]; possible when a < ha[G] (la <= ha).
            a = np.right_shift(r2, one, out=x.view(np.uint64))
            np.take(tab.la, g, out=u, mode="clip")
            np.less(a, u, out=acc_sure)
            n_sure = np.count_nonzero(acc_sure)
            np.take(tab.ha, g, out=u, mode="clip")
            np.less(a, u, out=scratch)
            if np.count_nonzero(scratch) != n_sure or np.count_nonzero(ok) != nb:
                # rare: an undecided acceptance or an off float guess; the plain loop below
                parts.append(_finish_block(tab, r1, r2, g, ok, acc_sure, scratch, rng))
                continue
            # Sign: s = low bit of r2; x = g ^ -s is g (s = 0) or -g - 1 (s = 1), so x = -1 marks
            # the rejected (negative, G = 0) pair and x + s is the signed value.
            s = np.bitwise_and(r2, one, out=u).view(np.int64)
            np.negative(s, out=x)
            np.bitwise_xor(x, g, out=x)
            np.not_equal(x, -1, out=scratch)
            acc_sure &= scratch
            x += s
            parts.append(x[acc_sure])
        got = parts[0] if len(parts) == 1 else np.concatenate(parts)
        take = min(got.size, need)
        out[filled : filled + take] = got[:take]
        filled += take
    return out


def _finish_block(tab: _Tables, r1: np.ndarray, r2: np.ndarray, g: np.ndarray, ok: np.ndarray, acc_sure: np.ndarray,
                  possible: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The accepted values of a block with undecided candidates, each finished exactly in order."""
    undecided = ~ok | (possible & ~acc_sure)
    negative = (r2 & np.uint64(1)).astype(bool)
    accept = ok & acc_sure
    accept &= ~(negative & (g == 0))
    vals = np.where(negative, -g, g).astype(np.int64)
    for i in np.flatnonzero(undecided):  # probability ~1e-18 per candidate unless a float guess is off
        y = _resolve_candidate(tab, int(r1[i]), int(r2[i]), rng)
        accept[i] = y is not None
        if y is not None:
            vals[i] = y
    return vals[accept]


def _sample_float(sigma: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """Inexact fast path: the CKS20 proposal with floating-point acceptance."""
    t = math.floor(sigma) + 1
    s = sigma * sigma / t
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        need = n - filled
        m = min(int(need / 0.6) + 64, _CHUNK)
        g = np.floor(-t * np.log1p(-rng.random(m))).astype(np.int64)
        negative = rng.random(m) < 0.5
        keep = ~(negative & (g == 0))
        keep &= rng.random(m) < np.exp(-((g - s) ** 2) / (2.0 * sigma * sigma))
        got = np.where(negative, -g, g)[keep]
        take = min(got.size, need)
        out[filled : filled + take] = got[:take]
        filled += take
    return out


#: Largest σ of the samplers: the samples are int64 (and exact in float64 below 2^53).
MAX_SAMPLER_SIGMA = 1e15


def _check_sigma(sigma: float | Fraction) -> Fraction:
    if isinstance(sigma, Fraction):
        if sigma <= 0:
            raise ValueError(f"sigma must lie in (0, inf), got {sigma!r}")
    else:
        check_positive_float("sigma", sigma)
    if sigma > MAX_SAMPLER_SIGMA:
        raise ValueError(
            f"sigma must be at most {MAX_SAMPLER_SIGMA:g} (the samples are int64, exact in float64 below 2^53), "
            f"got {sigma!r}"
        )
    return sigma if isinstance(sigma, Fraction) else _as_fraction(sigma)


def _check_size(size: int | tuple[int, ...]) -> tuple[int, ...]:
    if size is None:
        return ()
    return check_shape("size", size, allow_zero=True)


def sample_discrete_gaussian(sigma: float | Fraction, size: int | tuple[int, ...], rng: np.random.Generator, *, exact: bool = True) -> np.ndarray:
    r"""Draw i.i.d. samples from the discrete Gaussian :math:`\mathcal N_{\mathbb Z}(0, \sigma^2)`.

    Implements the rejection sampler of [CKS20]_ (Algorithm 3) with exact, table-driven
    Bernoulli decisions in ``numpy.uint64`` integer arithmetic (see the module
    documentation for why the result is exact).

    Parameters
    ----------
    sigma : float, int or fractions.Fraction
        Scale parameter :math:`\sigma > 0` (the distribution has mass
        :math:`\propto e^{-y^2/(2\sigma^2)}`; its variance is slightly below
        :math:`\sigma^2`).  A float is used at its exact binary value.
    size : int or tuple of int
        Output shape.
    rng : numpy.random.Generator
        Source of randomness.
    exact : bool, default True
        ``False`` selects an **inexact** floating-point fast path (same proposal,
        acceptance ``uniform < exp(...)`` in float64; probabilities accurate to about
        1e-16 relative error).  Use it only where exactness does not matter.

    Returns
    -------
    numpy.ndarray of int64, shape ``size``

    Notes
    -----
    Throughput of the exact path on one core is several million samples per second
    for :math:`\sigma` up to :data:`MAX_TABLE_SIGMA` (see ``benchmarks/bench_ddg.py``);
    the tables are built once per :math:`\sigma` in :math:`O(\sigma)` exact integer
    operations and cached.  Above :data:`MAX_TABLE_SIGMA` the exact path uses the scalar
    rational-arithmetic sampler (slow) and warns.
    """
    sig = _check_sigma(sigma)
    shape = _check_size(size)
    rng = check_rng("rng", rng)
    exact = check_bool("exact", exact)
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if n == 0:
        return np.zeros(shape, dtype=np.int64)
    if not exact:
        return _sample_float(float(sig), n, rng).reshape(shape)
    sigma2 = sig * sig
    if sig > MAX_TABLE_SIGMA:
        warnings.warn(
            f"sigma={float(sig):.4g} exceeds MAX_TABLE_SIGMA={MAX_TABLE_SIGMA:g}; using the slow "
            "scalar exact sampler (pass exact=False for the inexact fast path)",
            RuntimeWarning,
            stacklevel=2,
        )
        vals = [_cks_scalar(sigma2, rng) for _ in range(n)]
        return np.array(vals, dtype=np.int64).reshape(shape)
    tab = _build_tables(sigma2)
    return _sample_exact_tables(tab, n, rng).reshape(shape)


# ---------------------------------------------------------------------------
# The scalar algorithms of CKS20, line by line, in rational arithmetic
# ---------------------------------------------------------------------------
def _uniform_below(m: int, rng: np.random.Generator) -> int:
    """Uniform integer in {0, ..., m-1} for any Python int m >= 1 (exact)."""
    if m <= (1 << 62):
        return int(rng.integers(0, m))
    nbits = m.bit_length()
    while True:  # rejection on uniform bit strings
        x = int.from_bytes(rng.bytes((nbits + 7) // 8), "little") >> (8 * ((nbits + 7) // 8) - nbits)
        if x < m:
            return x


def _bernoulli_fraction(p: Fraction, rng: np.random.Generator) -> bool:
    return _uniform_below(p.denominator, rng) < p.numerator


def bernoulli_exp_reference(gamma: Fraction | int, rng: np.random.Generator) -> bool:
    r"""Bernoulli(:math:`e^{-\gamma}`) for rational :math:`\gamma \ge 0` ([CKS20]_ Algorithm 1).

    Von Neumann's method: for :math:`\gamma \le 1`, draw :math:`A_k \sim`
    Bernoulli(:math:`\gamma/k`) for :math:`k = 1, 2, \dots` until the first failure and
    return whether that :math:`k` is odd; for :math:`\gamma > 1`, multiply
    :math:`\lfloor\gamma\rfloor` independent Bernoulli(:math:`e^{-1}`) draws with one
    Bernoulli(:math:`e^{-(\gamma - \lfloor\gamma\rfloor)}`).  Exact, no floating point.

    Parameters
    ----------
    gamma : fractions.Fraction or int
        γ ≥ 0 (rational).
    rng : numpy.random.Generator

    Returns
    -------
    bool
    """
    if not isinstance(gamma, Fraction):
        check_nonnegative_float("gamma", gamma)
    gamma = Fraction(gamma)
    if gamma < 0:
        raise ValueError(f"gamma must be >= 0, got {gamma!r}")
    rng = check_rng("rng", rng)
    while gamma > 1:
        if not bernoulli_exp_reference(Fraction(1), rng):
            return False
        gamma -= 1
    k = 1
    while _bernoulli_fraction(gamma / k, rng):
        k += 1
    return k % 2 == 1


def discrete_laplace_reference(t: int, rng: np.random.Generator) -> int:
    r"""Discrete Laplace with integer scale :math:`t`, mass :math:`\propto e^{-|y|/t}` ([CKS20]_ Algorithm 2).

    Parameters
    ----------
    t : int
        The scale t ≥ 1.
    rng : numpy.random.Generator

    Returns
    -------
    int
    """
    t = check_positive_int("t", t)
    rng = check_rng("rng", rng)
    while True:
        u = _uniform_below(t, rng)
        if not bernoulli_exp_reference(Fraction(u, t), rng):
            continue
        v = 0
        while bernoulli_exp_reference(Fraction(1), rng):
            v += 1
        x = u + t * v
        negative = bool(rng.integers(0, 2))
        if negative and x == 0:
            continue
        return -x if negative else x


def _cks_scalar(sigma2: Fraction, rng: np.random.Generator) -> int:
    t = math.isqrt(sigma2.numerator // sigma2.denominator) + 1
    while True:
        y = discrete_laplace_reference(t, rng)
        gamma = (abs(y) - sigma2 / t) ** 2 / (2 * sigma2)
        if bernoulli_exp_reference(gamma, rng):
            return y


def sample_discrete_gaussian_reference(sigma: float | Fraction, size: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    r"""Scalar exact sampler, [CKS20]_ Algorithms 1-3 verbatim in rational arithmetic.

    Slow (tens of thousands of samples per second); kept as the reference that the
    vectorized :func:`sample_discrete_gaussian` is tested against, and as its fallback
    above :data:`MAX_TABLE_SIGMA`.

    Parameters
    ----------
    sigma : float
        σ > 0.
    size : int or tuple of int
        The output shape.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of int64
    """
    sig = _check_sigma(sigma)
    shape = _check_size(size)
    rng = check_rng("rng", rng)
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    sigma2 = sig * sig
    return np.array([_cks_scalar(sigma2, rng) for _ in range(n)], dtype=np.int64).reshape(shape)


# ---------------------------------------------------------------------------
# The exact pmf and variance (for tests and accounting)
# ---------------------------------------------------------------------------
#: Above this σ the pmf's normaliser and the variance take their Poisson-summation closed
#: forms (σ sqrt(2π) and σ²: the corrections e^{-2π²σ²} vanish in float64), instead of a sum
#: over 80σ integers.
_POISSON_SIGMA = 1e6


def _check_sum_sigma(sigma: float) -> float:
    return check_positive_float("sigma", sigma)


def discrete_gaussian_pmf(y: ArrayLike, sigma: float) -> np.ndarray:
    r"""Probability mass :math:`P(Y = y) = e^{-y^2/(2\sigma^2)} / \sum_z e^{-z^2/(2\sigma^2)}`.

    The normaliser is summed over :math:`|z| \le \lceil 40\sigma\rceil + 40` (the rest is
    below 1e-300); for :math:`\sigma < 1` the sum converges within a few terms.

    Parameters
    ----------
    y : array_like
        The point(s).
    sigma : float
        σ.

    Returns
    -------
    ndarray
        P(Y = y).
    """
    sig = _check_sum_sigma(sigma)
    y = check_array("y", y)
    if sig > _POISSON_SIGMA:
        # Poisson summation: Σ_z e^{-z²/2σ²} = σ sqrt(2π) (1 + 2 Σ_k e^{-2π²σ²k²}); the sum is 0 in float64
        norm = sig * math.sqrt(2.0 * math.pi)
    else:
        zmax = int(math.ceil(40 * sig)) + 40
        z = np.arange(-zmax, zmax + 1, dtype=np.float64)
        norm = np.sum(np.exp(-(z**2) / (2 * sig * sig)))
    return np.exp(-(y.astype(np.float64) ** 2) / (2 * sig * sig)) / norm


def discrete_gaussian_variance(sigma: float) -> float:
    r"""Variance of :math:`\mathcal N_{\mathbb Z}(0, \sigma^2)` (at most :math:`\sigma^2`, [CKS20]_ Cor. 9).

    By Poisson summation the variance equals :math:`\sigma^2` up to a term of order
    :math:`e^{-2\pi^2\sigma^2}`; it is computed here by direct summation.

    Parameters
    ----------
    sigma : float
        σ.

    Returns
    -------
    float
        The variance.
    """
    sig = _check_sum_sigma(sigma)
    if sig > _POISSON_SIGMA:
        # Poisson summation: the variance is σ² minus a term of order σ⁴ e^{-2π²σ²}, which is 0 in float64
        return sig * sig
    zmax = int(math.ceil(40 * sig)) + 40
    z = np.arange(-zmax, zmax + 1, dtype=np.float64)
    w = np.exp(-(z**2) / (2 * sig * sig))
    return float(np.sum(z**2 * w) / np.sum(w))

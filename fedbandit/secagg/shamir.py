r"""Shamir secret sharing of 256-bit secrets, limb by limb over :math:`\mathbb F_p`, :math:`p = 2^{31} - 1`, with error detection.

A secret :math:`s \in [0, 2^{256})` is cut into :data:`LIMBS` = 9 limbs of 30 bits,
:math:`s = \sum_k s_k 2^{30 k}`, and each limb is shared on its own: it is the constant term
of a random polynomial :math:`f_k` of degree :math:`t - 1` over :math:`\mathbb F_p`, and
client :math:`x` holds :math:`(f_0(x), \dots, f_8(x))`, packed into one integer (32 bits a
limb, :data:`SHARE_BYTES` = 36 bytes).  Any :math:`t` shares determine every limb (Lagrange
interpolation at 0), fewer reveal nothing about any of them: Shamir's scheme over the vector
space :math:`\mathbb F_p^9` with independent polynomials, perfectly private for any field
size.  Share points are the client ids, integers in :math:`[1, p)`.

Drawing the polynomial [derived]
--------------------------------
:func:`shamir_share` draws the shares at the first :math:`t - 1` points
:math:`x_1, \dots, x_{t-1}` uniformly from :math:`\mathbb F_p` (the operating system's
CSPRNG): with :math:`f(0) = s_k` fixed, the map from the monomial coefficients
:math:`(a_1, \dots, a_{t-1})` to :math:`(f(x_1), \dots, f(x_{t-1}))` is
:math:`\mathrm{diag}(x_i) V` with :math:`V` the Vandermonde matrix of the distinct nonzero
:math:`x_i`, a bijection of :math:`\mathbb F_p^{t-1}`, so uniform shares are uniform
coefficients (the textbook draw).  The other :math:`n - t + 1` shares follow by Lagrange
interpolation through :math:`(0, s_k), (x_1, f(x_1)), \dots`:

.. math:: f(x) = \sum_{j=0}^{t-1} f(z_j)\, L_j(x), \qquad
          L_j(x) = \frac{\ell(x)\, w_j}{x - z_j},\quad \ell(x) = \prod_j (x - z_j),\quad
          w_j = \prod_{i \ne j} (z_j - z_i)^{-1},

one matrix product :math:`(n - t + 1) \times t` by :math:`t \times (\text{secrets} \cdot 9)`
for all limbs of all secrets at once.  It is computed exactly with float64 matrix products
(BLAS): the matrix of the :math:`L_j(x)` is cut into three 11-bit pieces, so that every
product is below :math:`2^{31} \cdot 2^{11}` and every sum of at most 2048 of them below
:math:`2^{53}` (exact in float64), and the pieces are recombined mod :math:`p` in integers.
This replaces the :math:`t n` big-integer additions per secret of a 521-bit field (the
:math:`n^3` term of a SecAgg session) by a few BLAS calls.

Error detection [derived]
-------------------------
:func:`shamir_reconstruct` uses *every* share it is given, not only :math:`t` of them.  The
:math:`m` shares of one limb form a codeword of the Reed–Solomon code of length :math:`m`
and dimension :math:`t` over :math:`\mathbb F_p` (minimum distance :math:`m - t + 1`), and
they lie on one polynomial of degree at most :math:`t - 1` if and only if the :math:`m - t`
syndromes

.. math:: S_k = \sum_{i=1}^m w_i\, x_i^k\, y_i, \qquad
          w_i = \prod_{j \ne i} (x_i - x_j)^{-1}, \qquad k = 0, \dots, m - t - 1,

vanish (:math:`\sum_i w_i g(x_i)` is the leading coefficient of the interpolant of degree
:math:`m - 1` of :math:`g`, zero for every :math:`g` of degree :math:`\le m - 2`).  The
check computes :data:`CHECKS` = 6 random combinations :math:`\sum_k r^k S_k` of every limb,
with independent :math:`r` drawn from the CSPRNG once per set of share points and never
revealed: if some :math:`S_k \ne 0` a combination is a nonzero polynomial in :math:`r` of
degree :math:`< m - t`, which vanishes with probability below :math:`(m - t)/(p - 1)`, so
all six do with probability below :math:`((m - t)/(p - 1))^6 < 2^{-100}` for
:math:`m - t \le 2^{14}`.  Hence, except with that probability:

* **detected**: any :math:`e \le m - t` altered shares, whatever their values (another
  codeword differs in at least :math:`m - t + 1` positions);
* **not detected**: anything when :math:`m = t` (every :math:`t`-tuple is consistent);
  :math:`e > m - t` shares altered by someone who knows the others and chooses the new
  values to land on another codeword.  (Shares altered blindly pass only with probability
  below :math:`(m - t)^6/(p - 1)^6`.)

The protocol of :mod:`fedbandit.secagg.protocol` therefore also *authenticates* every share
with a commitment of its dealer, which catches any altered share regardless of :math:`m`;
the syndrome check remains to catch a dealer whose shares are inconsistent.
"""

from __future__ import annotations

import os
import secrets as _secrets
from functools import lru_cache
from typing import Iterable, Mapping, Sequence

import numpy as np

from fedbandit.secagg.errors import SecAggAbort, SecAggError, SecAggIntegrityError

__all__ = [
    "PRIME",
    "LIMBS",
    "SHARE_BYTES",
    "SECRET_BITS",
    "shamir_share",
    "shamir_share_many",
    "shamir_reconstruct",
    "shamir_reconstruct_many",
    "shamir_consistent",
    "is_share",
    "share_limbs",
    "add_to_share",
    "INCONSISTENT",
    "OUT_OF_RANGE",
]

#: The Mersenne prime 2^31 - 1: the field of every limb of a share.
PRIME = (1 << 31) - 1
#: Secrets are integers in [0, 2^SECRET_BITS) (X25519 keys, 32-byte seeds).
SECRET_BITS = 256
_LIMB_BITS = 30
#: Limbs of a secret (30 bits each), hence field elements of a share.
LIMBS = -(-SECRET_BITS // _LIMB_BITS)
_SLOT_BITS = 32
#: Bytes of a packed share (one 32-bit slot per limb).
SHARE_BYTES = LIMBS * _SLOT_BITS // 8
#: Independent random combinations of the syndromes in the consistency check.
CHECKS = 6
_SLOT_MASK = (1 << _SLOT_BITS) - 1
_INNER = 2048  # products summed per float64 block (2^31 · 2^11 · 2048 = 2^53)


# ------------------------------------------------------------------ field arithmetic (int64 arrays)
def _inverse(a: np.ndarray) -> np.ndarray:
    """a^(p-2) mod p elementwise (a ≠ 0 mod p): square and multiply, every product below 2^62."""
    a = np.asarray(a, dtype=np.int64) % PRIME
    out = np.ones_like(a)
    e = PRIME - 2
    while e:
        if e & 1:
            out = out * a % PRIME
        a = a * a % PRIME
        e >>= 1
    return out


def _product_mod(a: np.ndarray, axis: int) -> np.ndarray:
    """Π along ``axis`` mod p (one multiply per element, every product below 2^62)."""
    a = np.moveaxis(np.asarray(a, dtype=np.int64) % PRIME, axis, 0)
    out = np.ones(a.shape[1:], dtype=np.int64)
    for row in a:
        out = out * row % PRIME
    return out


def _matmul_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(a @ b) mod p exactly, for int64 arrays with entries in [0, p), by float64 matrix products.

    ``b`` is cut into 11-bit pieces and the inner dimension into blocks of 2048: every float64
    sum is then an integer below 2^53, hence exact.
    """
    a_f = a.astype(np.float64)
    out = np.zeros((a.shape[0], b.shape[1]), dtype=np.int64)
    for shift in (0, 11, 22):
        piece = ((b >> shift) & 0x7FF).astype(np.float64)
        acc = np.zeros_like(out)
        for k in range(0, a.shape[1], _INNER):
            acc += (a_f[:, k : k + _INNER] @ piece[k : k + _INNER]).astype(np.int64) % PRIME
        out += (acc % PRIME << shift) % PRIME
    return out % PRIME


def _uniform(shape) -> np.ndarray:
    """Independent uniform elements of F_p from the operating system's CSPRNG (rejection of 2^31 - 1)."""
    n = int(np.prod(shape))
    out = np.frombuffer(os.urandom(4 * n), dtype="<u4").astype(np.int64) & PRIME
    bad = out == PRIME
    while bad.any():
        out[bad] = np.frombuffer(os.urandom(4 * int(bad.sum())), dtype="<u4").astype(np.int64) & PRIME
        bad = out == PRIME
    return out.reshape(shape)


# ------------------------------------------------------------------ shares as packed integers
def share_limbs(share: int) -> np.ndarray:
    """The :data:`LIMBS` field elements of a packed share (int64 array)."""
    return _unpack([share])[0]


def _unpack(shares: Sequence[int]) -> np.ndarray:
    """(len(shares), LIMBS) int64: the slots of packed shares (little-endian 32-bit words)."""
    raw = b"".join(int(v).to_bytes(SHARE_BYTES, "little") for v in shares)
    return np.frombuffer(raw, dtype="<u4").astype(np.int64).reshape(len(shares), LIMBS)


def _pack_rows(limbs: np.ndarray) -> list[int]:
    """Packed shares of the rows of ``limbs`` (N, LIMBS), field elements."""
    raw = np.ascontiguousarray(limbs, dtype="<u4").tobytes()
    return [int.from_bytes(raw[i : i + SHARE_BYTES], "little") for i in range(0, len(raw), SHARE_BYTES)]


def _pack(limbs) -> int:
    return _pack_rows(np.asarray(limbs, dtype=np.int64)[None, :])[0]


def is_share(value) -> bool:
    """Whether ``value`` is a packed share: an int whose :data:`LIMBS` 32-bit slots are field elements."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << (_SLOT_BITS * LIMBS):
        return False
    return all(((value >> (_SLOT_BITS * k)) & _SLOT_MASK) < PRIME for k in range(LIMBS))


def add_to_share(share: int, delta: int, limb: int = 0) -> int:
    """``share`` with ``delta`` added (mod p) to its limb ``limb``: another valid share (tests, attacks)."""
    if not is_share(share):
        raise SecAggError(f"share must be a packed share (see is_share), got {share!r:.60}")
    if isinstance(limb, bool) or not isinstance(limb, int) or not 0 <= limb < LIMBS:
        raise SecAggError(f"limb must be an integer in [0, {LIMBS}), got {limb!r}")
    limbs = share_limbs(share)
    limbs[limb] = (int(limbs[limb]) + int(delta)) % PRIME
    return _pack(limbs)


def _secret_limbs(secret: int) -> list[int]:
    return [(secret >> (_LIMB_BITS * k)) & ((1 << _LIMB_BITS) - 1) for k in range(LIMBS)]


# ------------------------------------------------------------------ validation
def _check_points(ids, name="ids") -> tuple[int, ...]:
    try:
        xs = list(ids)
    except TypeError:
        raise TypeError(f"{name} must be an iterable of distinct integers in [1, p) (share points), got {ids!r:.60}") from None
    for x in xs:
        if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or not 0 < int(x) < PRIME:
            raise SecAggError(f"{name} (share points) must be integers in [1, p), p = 2^31 - 1, got {x!r:.60}")
    xs = [int(x) for x in xs]
    if len(set(xs)) != len(xs):
        raise SecAggError(f"{name} (share points) must be distinct, got {sorted(xs)}")
    return tuple(xs)


def _check_secret(secret) -> int:
    if isinstance(secret, bool) or not isinstance(secret, int) or not 0 <= secret < 1 << SECRET_BITS:
        raise SecAggError(f"secret must be an integer in [0, 2^{SECRET_BITS}), got {secret!r:.60}")
    return secret


# ------------------------------------------------------------------ sharing
@lru_cache(maxsize=16)
def _extension(xs: tuple[int, ...], threshold: int) -> np.ndarray:
    """L_j(x) for the base z = (0, xs[0], ..., xs[t-2]) and the points x = xs[t-1:]: shape (t, n - t + 1)."""
    z = np.array((0,) + xs[: threshold - 1], dtype=np.int64)
    x = np.array(xs[threshold - 1 :], dtype=np.int64)
    diff_xz = (x[:, None] - z[None, :]) % PRIME  # never 0: the points are distinct and nonzero
    diff_zz = (z[:, None] - z[None, :]) % PRIME
    np.fill_diagonal(diff_zz, 1)
    w = _inverse(_product_mod(diff_zz, axis=1))
    ell = _product_mod(diff_xz, axis=1)
    return np.ascontiguousarray((ell[:, None] * w[None, :] % PRIME * _inverse(diff_xz) % PRIME).T)


def shamir_share_many(secrets: Sequence[int], threshold: int, ids: Iterable[int]) -> list[dict[int, int]]:
    """Share every secret of ``secrets`` (each in [0, 2^256)), ``threshold``-of-n, at the points ``ids``.

    The same as :func:`shamir_share` on each secret (independent polynomials), computed in one
    batch.  Returns one dict {point: packed share} per secret.
    """
    xs = _check_points(ids)
    if isinstance(threshold, bool) or not isinstance(threshold, int) or not 1 <= threshold <= len(xs):
        raise SecAggError(f"threshold must lie in [1, {len(xs)}] (the number of share points), got {threshold!r}")
    if isinstance(secrets, (int, str, bytes)) or not isinstance(secrets, Sequence):
        raise TypeError(f"secrets must be a sequence of integers in [0, 2^{SECRET_BITS}), got {secrets!r:.60}")
    limbs = np.array([_secret_limbs(_check_secret(s)) for s in secrets], dtype=np.int64).reshape(-1)  # (S·9,)
    t = threshold
    # values at (0, x_1, ..., x_{t-1}) of every limb polynomial: the limb, then uniform draws
    base = np.concatenate([limbs[:, None], _uniform((limbs.size, t - 1))], axis=1)  # (S·9, t)
    values = np.empty((limbs.size, len(xs)), dtype=np.int64)
    values[:, : t - 1] = base[:, 1:]
    values[:, t - 1 :] = _matmul_mod(base, _extension(xs, t))
    values = values.reshape(len(secrets), LIMBS, len(xs)).transpose(0, 2, 1)  # (S, n, LIMBS)
    return [dict(zip(xs, _pack_rows(per_secret))) for per_secret in values]


def shamir_share(secret: int, threshold: int, ids: Iterable[int]) -> dict[int, int]:
    r"""Split ``secret`` (in [0, 2^256)) into ``threshold``-of-n Shamir shares at the points ``ids`` (in [1, p)).

    Each of its 30-bit limbs is shared over :math:`\mathbb F_p` with its own polynomial, whose
    values at the first ``threshold - 1`` points are uniform draws of the operating system's
    CSPRNG (the same law as uniform coefficients; module notes).  Returns {point: packed share}.
    """
    return shamir_share_many([secret], threshold, ids)[0]


# ------------------------------------------------------------------ reconstruction
@lru_cache(maxsize=64)
def lagrange_at_zero(xs: tuple[int, ...]) -> tuple[int, ...]:
    """L_j(0) for the points ``xs`` (field elements as ints)."""
    x = np.array(xs, dtype=np.int64)
    diff = (x[None, :] - x[:, None]) % PRIME  # x_k - x_j, row j
    np.fill_diagonal(diff, 1)
    num = _product_mod(np.where(np.eye(len(xs), dtype=bool), 1, x[None, :]), axis=1)  # Π_{k≠j} x_k
    return tuple(int(v) for v in num * _inverse(_product_mod(diff, axis=1)) % PRIME)


@lru_cache(maxsize=64)
def _check_matrix(xs: tuple[int, ...], n_checks: int) -> np.ndarray:
    """(CHECKS, m): c_i = w_i g(x_i), g(x) = Σ_{k < n_checks} (r x)^k, one secret random r per row."""
    x = np.array(xs, dtype=np.int64)
    diff = (x[:, None] - x[None, :]) % PRIME
    np.fill_diagonal(diff, 1)
    w = _inverse(_product_mod(diff, axis=1))
    r = np.array([1 + _secrets.randbelow(PRIME - 1) for _ in range(CHECKS)], dtype=np.int64)
    z = r[:, None] * x[None, :] % PRIME
    g = np.zeros((CHECKS, x.size), dtype=np.int64)
    for _ in range(n_checks):
        g = (g * z + 1) % PRIME
    return w[None, :] * g % PRIME


_SHARE_LIMIT = 1 << (_SLOT_BITS * LIMBS)


def _check_shares(shares: Mapping[int, int], threshold: int, *, seen: dict | None = None):
    """(points, shares, their limbs (m, LIMBS)) of one secret, validated; ``seen`` memoizes
    the validation of point sets (the maps of one reconstruction share their points)."""
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
        raise SecAggError(f"threshold must be a positive integer, got {threshold!r}")
    if not isinstance(shares, Mapping):
        raise TypeError(f"shares must be a mapping {{share point: share}}, got {type(shares).__name__}")
    keys = tuple(sorted(shares))
    xs = seen.get(keys) if seen is not None else None
    if xs is None:
        xs = _check_points(sorted(shares, key=int), "shares")
        if seen is not None:
            seen[keys] = xs
    ys = [shares[x] for x in keys]
    for x, y in zip(xs, ys):
        if type(y) is not int or not 0 <= y < _SHARE_LIMIT:
            raise SecAggError(f"shares: the share at point {x} is not a packed share of field elements (see is_share)")
    limbs = _unpack(ys)
    if not (limbs < PRIME).all():
        x = xs[int(np.nonzero((limbs >= PRIME).any(axis=1))[0][0])]
        raise SecAggError(f"shares: the share at point {x} is not a packed share of field elements (see is_share)")
    if len(xs) < threshold:
        raise SecAggAbort(f"need {threshold} shares to reconstruct, got {len(xs)}")
    return xs, ys, limbs


def _consistent(xs: tuple[int, ...], columns: np.ndarray, threshold: int) -> np.ndarray:
    """Per column of ``columns`` (m, c) of limb values at ``xs``: whether they lie on one polynomial of
    degree at most ``threshold - 1`` (CHECKS random combinations of the syndromes; module notes)."""
    m = len(xs)
    if m <= threshold:
        return np.ones(columns.shape[1], dtype=bool)
    return ~_matmul_mod(_check_matrix(xs, m - threshold), columns).any(axis=0)


#: Why a secret could not be reconstructed (see :func:`shamir_reconstruct_many`).
INCONSISTENT, OUT_OF_RANGE = "inconsistent", "out of range"


def _reconstruct(xs: tuple[int, ...], values: np.ndarray, threshold: int) -> list[int | str]:
    """The secrets whose shares' limbs at ``xs`` are ``values[s]`` (S, m, LIMBS): each an int, or why it is not one."""
    S, m = values.shape[:2]
    columns = values.transpose(1, 0, 2).reshape(m, S * LIMBS)
    consistent = np.broadcast_to(_consistent(xs, columns, threshold), (S * LIMBS,)).reshape(S, LIMBS).all(axis=1)
    lam = np.array(lagrange_at_zero(xs[:threshold]), dtype=np.int64)[None, :]
    limbs = _matmul_mod(lam, columns[:threshold]).reshape(S, LIMBS)
    top = SECRET_BITS - _LIMB_BITS * (LIMBS - 1)
    in_range = (limbs < 1 << _LIMB_BITS).all(axis=1) & (limbs[:, -1] < 1 << top)
    out: list[int | str] = []
    for row, good, ranged in zip(limbs, consistent, in_range):
        if not good:
            out.append(INCONSISTENT)
        elif not ranged:  # consistent shares of limbs that no 256-bit secret has: a dealer's doing
            out.append(OUT_OF_RANGE)
        else:
            out.append(sum(int(v) << (_LIMB_BITS * k) for k, v in enumerate(row)))
    return out


def shamir_reconstruct_many(share_maps: Sequence[Mapping[int, int]], threshold: int) -> list[int | str]:
    """Recover several secrets at once, checking that *all* shares of each agree.

    Parameters
    ----------
    share_maps : sequence of mappings {point: packed share}
        The shares of each secret (any point sets; maps with the same points are checked and
        interpolated in one batch).
    threshold : int

    Returns
    -------
    list
        Each secret (an int in [0, 2^256)), or :data:`INCONSISTENT` where its shares do not lie
        on one polynomial of degree ``threshold - 1`` (at least one is wrong), or
        :data:`OUT_OF_RANGE` where they do but encode no 256-bit secret.

    Raises
    ------
    SecAggAbort
        A secret with fewer than ``threshold`` shares.
    """
    if isinstance(share_maps, Mapping) or not isinstance(share_maps, Sequence):
        raise TypeError(f"share_maps must be a sequence of mappings {{share point: share}}, got {share_maps!r:.60}")
    seen: dict = {}
    checked = [_check_shares(s, threshold, seen=seen) for s in share_maps]
    out: list[int | str] = [INCONSISTENT] * len(checked)
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, (xs, _, _) in enumerate(checked):
        groups.setdefault(xs, []).append(i)
    for xs, members in groups.items():
        values = np.stack([checked[i][2] for i in members])
        for i, secret in zip(members, _reconstruct(xs, values, threshold)):
            out[i] = secret
    return out


def shamir_consistent(shares: Mapping[int, int], threshold: int) -> bool:
    """Whether all ``shares`` lie on one polynomial of degree at most ``threshold - 1`` (limb by limb; see the module notes)."""
    xs, _, limbs = _check_shares(shares, threshold)
    return bool(np.all(_consistent(xs, limbs, threshold)))


def shamir_reconstruct(shares: Mapping[int, int], threshold: int) -> int:
    """Recover the secret from at least ``threshold`` shares, checking that *all* of them agree.

    Raises
    ------
    SecAggAbort
        Fewer than ``threshold`` shares.
    SecAggIntegrityError
        The shares do not lie on one polynomial of degree ``threshold - 1`` (at least one is
        wrong: detected whenever at most ``len(shares) - threshold`` are wrong), or they do
        not encode a secret in [0, 2^256).
    """
    xs, _, limbs = _check_shares(shares, threshold)
    (secret,) = _reconstruct(xs, limbs[None], threshold)
    if secret == INCONSISTENT:
        raise SecAggIntegrityError(
            f"the {len(xs)} shares do not lie on one polynomial of degree {threshold - 1}: at least one share is wrong"
        )
    if secret == OUT_OF_RANGE:
        raise SecAggIntegrityError(f"the {len(xs)} shares do not encode a secret in [0, 2^{SECRET_BITS})")
    return secret

"""Packing the linear-bandit statistics: one vector of D = d + d(d+1)/2 coordinates per record.

A federated linear learner hands a statistics protocol, at every synchronization, each
agent's sums of x y (bias) and x xᵀ (Gram) over the batch just ended; the protocol packs
them into one vector per party (:func:`pack_statistics`: the bias, then the Gram matrix's
upper triangle), and its randomizers that act on every user's record pack each record alike
(:func:`user_records`).
"""

from __future__ import annotations

import functools

import numpy as np

from fedbandit._validation import MAX_STEPS, check_array, check_positive_int

__all__ = ["pack_statistics", "unpack_statistics", "user_records", "n_coordinates", "SCHEDULES"]

#: Synchronization schedules a learner may declare to :meth:`StatisticsProtocol.configure`.
SCHEDULES = ("fixed", "adaptive")


def check_setting(n_agents: object, dim: object, n_batches: object, batch_size: object) -> tuple[int, int, int, int]:
    """(M, d, K, B) of a statistics protocol's setting, checked: the trees hold κ·M·D floats per
    run (D = d + d(d+1)/2) and a run serves K·B rounds, each capped at 10^9."""
    M = check_positive_int("n_agents", n_agents, max_value=MAX_STEPS, reason="arrays hold one row per agent")
    d = check_positive_int("dim", dim, max_value=40_000, reason="the packed statistics have d + d(d+1)/2 entries")
    K = check_positive_int("n_batches", n_batches, max_value=MAX_STEPS, reason="the run serves n_batches·batch_size rounds")
    B = check_positive_int("batch_size", batch_size, max_value=MAX_STEPS, reason="the run serves n_batches·batch_size rounds")
    if K * B > MAX_STEPS:
        raise ValueError(f"n_batches·batch_size = {K * B} rounds exceed 10^9 (n_batches={K}, batch_size={B})")
    if M * (d + d * (d + 1) // 2) > MAX_STEPS:
        raise ValueError(f"n_agents={M} agents with dim={d} statistics hold more than 10^9 floats per run and tree level")
    return M, d, K, B


def n_coordinates(dim: int) -> int:
    """D = d + d(d+1)/2: coordinates of one packed record (bias x y and the Gram's upper triangle)."""
    dim = check_positive_int("dim", dim)
    return dim + dim * (dim + 1) // 2


def pack_statistics(bias: np.ndarray, gram: np.ndarray) -> np.ndarray:
    """Concatenate bias (..., d) and the upper triangle of gram (..., d, d): (..., d + d(d+1)/2)."""
    bias = check_array("bias", bias, finite=False)
    gram = check_array("gram", gram, finite=False)
    if bias.ndim < 1 or gram.shape != bias.shape + bias.shape[-1:]:
        raise ValueError(f"bias (..., d) and gram (..., d, d) must match, got shapes bias {bias.shape}, gram {gram.shape}")
    return pack_unchecked(bias, gram)


@functools.lru_cache(maxsize=64)
def _upper_triangle(d: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.triu_indices(d)``, read-only and built once per d (the per-synchronization path packs
    and unpacks at every batch; at B = 1 rebuilding them was a tenth of a round's time)."""
    iu, ju = np.triu_indices(d)
    iu.flags.writeable = False
    ju.flags.writeable = False
    return iu, ju


@functools.lru_cache(maxsize=64)
def _flat_triangle(d: int) -> tuple[np.ndarray, np.ndarray]:
    """(upper, full), read-only: ``upper`` the flat indices i·d + j of the upper triangle (the
    packed order, as ``np.triu_indices(d)``), ``full`` for every flat entry (i, j) of a d × d
    matrix the packed coordinate that holds it: d + the triangle position of (min, max)."""
    iu, ju = _upper_triangle(d)
    upper = iu * d + ju
    full = np.empty(d * d, dtype=np.intp)
    full[upper] = d + np.arange(iu.size)
    full[ju * d + iu] = d + np.arange(iu.size)
    upper.flags.writeable = False
    full.flags.writeable = False
    return upper, full


def pack_unchecked(bias: np.ndarray, gram: np.ndarray) -> np.ndarray:
    """:func:`pack_statistics` without the checks: the protocols' per-synchronization path
    (the shapes are checked by ``synchronize``).  The same values as
    ``np.concatenate([bias, gram[..., iu, ju]], axis=-1)``: the triangle gathered by one flat
    index and both parts written into the output (no concatenation)."""
    d = bias.shape[-1]
    upper, _ = _flat_triangle(d)
    lead = bias.shape[:-1]
    out = np.empty(lead + (d + upper.size,), dtype=np.result_type(bias, gram))
    out[..., :d] = bias
    out[..., d:] = gram.reshape(lead + (d * d,))[..., upper]
    return out


def user_records(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Every user's own record (x y, upper triangle of x xᵀ): (..., d) and (...) -> (..., d + d(d+1)/2).

    The per-user form of :func:`pack_statistics`, for randomizers that act on each record
    (the vector sum, DDG's per-record rounding, randomized response).
    """
    x = check_array("x", x, finite=False)
    y = check_array("y", y, finite=False)
    if x.ndim < 1 or y.shape != x.shape[:-1]:
        raise ValueError(f"x (..., d) and y (...) must match, got shapes x {x.shape}, y {y.shape}")
    return user_records_unchecked(x, y)


def user_records_unchecked(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """:func:`user_records` without the checks: the randomizers' path (shapes checked by ``synchronize``)."""
    # the Gram triangle row by row (one multiply per row into the output: far cheaper than
    # indexing x twice)
    d = x.shape[-1]
    out = np.empty(x.shape[:-1] + (d + d * (d + 1) // 2,))
    np.multiply(x, y[..., None], out=out[..., :d])
    k = d
    for i in range(d):
        np.multiply(x[..., i : i + 1], x[..., i:], out=out[..., k : k + d - i])
        k += d - i
    return out


def unpack_statistics(packed: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`pack_statistics` (the Gram matrix symmetrized)."""
    d = check_positive_int("d", d)
    packed = check_array("packed", packed, finite=False)
    if packed.ndim < 1 or packed.shape[-1] != d + d * (d + 1) // 2:
        raise ValueError(f"packed must have a last axis of d + d(d+1)/2 = {d + d * (d + 1) // 2} entries (d={d}), "
                         f"got shape {packed.shape}")
    return unpack_unchecked(packed, d)


def unpack_unchecked(packed: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`unpack_statistics` without the checks (the protocols' path)."""
    # one gather of every entry (i, j) from its packed coordinate: the same values as writing the
    # upper triangle and its mirror into zeros
    _, full = _flat_triangle(d)
    bias = packed[..., :d]
    gram = packed[..., full].reshape(packed.shape[:-1] + (d, d)).astype(np.float64, copy=False)
    return bias, gram

"""Plain loop reference of the DDG client/server pipeline [KLS21] (one client, explicit matrices).

Used by tests/test_ddg.py to check that the vectorized :class:`DDGMechanism` makes the same
computations from the same random draws.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import hadamard


def rotation_matrix(signs: np.ndarray) -> np.ndarray:
    """U = H D / sqrt(d') as a dense matrix."""
    dp = len(signs)
    return hadamard(dp) @ np.diag(signs) / math.sqrt(dp)


def encode_one(x, params, signs, uniforms, noise):
    """Client steps for one vector, line by line; rounding coins ``uniforms``, noise ``noise`` given."""
    d, dp = params.d, params.d_pad
    norm = math.sqrt(sum(v * v for v in x))
    scale = min(1.0, params.c / norm) if norm > 0 else 1.0
    clipped = [v * scale for v in x] + [0.0] * (dp - d)
    U = rotation_matrix(signs)
    flat = [sum(U[i, j] * clipped[j] for j in range(dp)) for i in range(dp)]
    out = []
    for i in range(dp):
        z = flat[i] / params.gamma
        lo = math.floor(z)
        r = lo + (1 if uniforms[i] < z - lo else 0)
        out.append(r)
    assert sum(v * v for v in out) <= (params.delta2 / params.gamma) ** 2  # beta = 0: always true
    return [int((out[i] + int(noise[i])) % params.modulus) for i in range(dp)]


def decode(total, params, signs):
    """Server steps, line by line: centre mod m, U^T, times gamma, drop the padding."""
    m = params.modulus
    centered = []
    for s in total:
        s = int(s) % m
        centered.append(s - m if s >= m // 2 else s)
    U = rotation_matrix(signs)
    dp = params.d_pad
    back = [sum(U[j, i] * centered[j] for j in range(dp)) for i in range(dp)]
    return [params.gamma * back[i] for i in range(params.d)]

"""mechanisms.vector_sum."""

from __future__ import annotations

import math
import warnings

import numpy as np
from numpy.typing import ArrayLike

from fedbandit._validation import (
    check_array,
    check_choice,
    check_rng,
)
from fedbandit.accounting.calibration import CJMP21_CONSTANT, vector_sum_parameters

__all__ = [
    "VectorSumShuffle",
]


class VectorSumShuffle:
    """The shuffle vector-sum protocol of Cheu, Joseph, Mao & Peng (2021), as the package reads it.

    For n users with vectors v ∈ [−1, 1]^D (coordinates shifted to z = (v + 1)/2 ∈ [0, 1]):
    per coordinate, the 1-D randomizer with parameters (g, b, p) sends g + b bits holding
    ⌊z g⌋ + η₁ + η₂ ones, η₁ ~ Ber(z g − ⌊z g⌋), η₂ ~ Bin(b, p); the shuffler mixes every
    message (tagged by coordinate); the analyzer estimates Σ z = (ones − p b n)/g and
    returns Σ v = 2 Σ z − n.  Parameters: g = max(⌈2 sqrt n⌉, D, 4),
    b = ⌈c g² log²(4D²/δ)/(ε² n)⌉ with c = :data:`CJMP21_CONSTANT` (the theorem's; smaller
    values are not covered by it), p = 1/4; valid for 0 < ε ≤ 15, 0 < δ < 1/2.  The
    randomizer, the parameters and their ranges are the package's reading of CJMP21 (their
    theorem's number and constant are not checked against the paper; chapter 2's
    Reconstruction box "the vector-sum protocol inside the tree"); privacy rests on that
    theorem.

    Two samplers of the analyzer's output, equal in distribution:

    * ``"per_user"`` -- every user's messages: D·(g + b) bits per user, drawn bit by bit
      (only for small inputs);
    * ``"aggregate"`` -- every user's rounding ⌊z g⌋ + η₁ drawn individually, the noise bits
      of all users at once: Σ_users η₂ ~ Bin(n b, p) (a sum of independent binomials with
      the same p).  ``tests/test_protocols.py`` checks the two agree in distribution.

    Parameters
    ----------
    epsilon, delta : float
        Per-invocation privacy.
    n_users, dim : int
        n and D.
    g : int, optional
        Override g (must be ≥ max(2 sqrt n, D, 4)).
    constant : float
        c in b.
    p : float, default 0.25
        The blanket probability (the theorem covers 1/4).
    """

    def __init__(self, epsilon: float, delta: float, n_users: int, dim: int, *, g: int | None = None,
                 constant: float = CJMP21_CONSTANT, p: float = 0.25) -> None:
        self.g, self.b, self.p = vector_sum_parameters(epsilon, delta, n_users, dim, g=g, constant=constant, p=p)
        self.epsilon, self.delta = float(epsilon), float(delta)
        self.n_users, self.dim, self.constant = int(n_users), int(dim), float(constant)

    @property
    def covered_by_theorem(self) -> bool:
        """Whether the theorem covers these parameters: c at least its constant and p = 1/4."""
        return self.constant >= CJMP21_CONSTANT and self.p == 0.25

    def noise_std(self) -> float:
        """Per-coordinate standard deviation of the binomial noise in Σ v (≥ the rounding's)."""
        return 2.0 / self.g * math.sqrt(self.n_users * self.b * self.p * (1 - self.p))

    def rounded_counts(self, v: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Σ over users (axis 0) of ⌊z g⌋ + η₁ for v of shape (n, ..., D): the users' roundings."""
        z = np.add(v, 1.0, dtype=float)  # z = clip((v + 1)/2, 0, 1)·g, in place
        z *= 0.5
        np.clip(z, 0.0, 1.0, out=z)
        z *= self.g
        fl = np.floor(z)
        z -= fl  # the fractional part: rounded up with that probability
        up = rng.random(z.shape) < z
        return fl.sum(axis=0) + up.sum(axis=0)  # integers: exact in any order

    def analyze(self, ones: ArrayLike, n_users: int | None = None) -> np.ndarray:
        """The analyzer: Σ v estimated from the count of ones per coordinate."""
        n = self.n_users if n_users is None else n_users
        return 2.0 * (np.asarray(ones, dtype=float) - self.p * self.b * n) / self.g - n

    def run(self, v: ArrayLike, rng: np.random.Generator, *, method: str = "aggregate") -> np.ndarray:
        """Estimate Σ_users v for v of shape (n, D) (or (n, ..., D) for independent copies)."""
        rng = check_rng("rng", rng)
        v = check_array("v", v)
        if v.ndim < 2 or v.shape[0] != self.n_users or v.shape[-1] != self.dim:
            raise ValueError(f"v must have shape ({self.n_users}, ..., {self.dim}), got {v.shape}")
        check_choice("method", method, ("aggregate", "per_user"))
        if method == "per_user" and v.size * (self.g + self.b) > _PER_USER_MAX_BITS:
            raise ValueError(
                f"method='per_user' would draw {v.size * (self.g + self.b):.3g} bits (n·D·(g + b)), more than "
                f"{_PER_USER_MAX_BITS:.0e}; use method='aggregate' (equal in distribution)"
            )
        if method == "aggregate":
            ones = self.rounded_counts(v, rng) + draw_binomial(rng, self.n_users * self.b, self.p, v.shape[1:])
        else:
            z = np.clip((v + 1.0) / 2.0, 0.0, 1.0) * self.g
            fl = np.floor(z)
            # Each user's g + b bits per coordinate: the first g hold ⌊zg⌋ + η₁ ones, the
            # last b are independent Ber(p) bits.  Shuffling does not change the count.
            unary = (np.arange(self.g) < (fl + (rng.random(z.shape) < (z - fl)))[..., None]).sum(axis=-1)
            noise_bits = (rng.random(v.shape + (self.b,)) < self.p).sum(axis=-1)
            ones = (unary + noise_bits).sum(axis=0)
        return self.analyze(ones)


#: Largest number of message bits the per-user sampler draws (memory ~ 1 byte per bit).
_PER_USER_MAX_BITS = 10**8


def draw_binomial(rng: np.random.Generator, n: float, p: float, size: int | tuple[int, ...] | None) -> np.ndarray:
    """Bin(n, p) draws; n beyond numpy's int64 range uses the normal limit (never at book settings)."""
    if n < 2**62:
        return rng.binomial(int(n), p, size=size).astype(float)
    warnings.warn(f"Bin(n={n:.3g}, p) drawn from its normal approximation (n exceeds int64)", RuntimeWarning, stacklevel=3)
    return n * p + math.sqrt(n * p * (1 - p)) * rng.standard_normal(size)


# The private names these helpers had before they were made public (fedbandit.protocols imported
# them): kept only so that code written against them still imports; nothing here uses them.
_binomial = draw_binomial

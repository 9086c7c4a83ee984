r"""The distributed discrete Gaussian (DDG) mechanism of Kairouz, Liu & Steinke [KLS21]_.

Client side (vectorized over any leading axes, clients on axis ``-2``):

1. **clip** each vector to :math:`\ell_2` norm :math:`c`;
2. **flatten** with the shared random rotation :math:`U` (:mod:`.flattening`), padding
   :math:`d` to :math:`d'` (a power of two for Walsh–Hadamard);
3. **scale** by :math:`1/\gamma`;
4. **conditional randomized rounding**: round each coordinate up with probability equal
   to its fractional part, and redo the whole vector until
   :math:`\|\tilde x\|_2 \le \Delta_2/\gamma` ([KLS21]_ Sec. 4.1, Prop. 22); the bound
   :math:`\Delta_2` from :func:`fedbandit.accounting.ddg.ddg_delta2` holds with probability
   at least :math:`1 - \beta` per try, so the expected number of tries is at most
   :math:`1/(1-\beta)`;
5. add i.i.d. **discrete Gaussian noise** :math:`\mathcal N_{\mathbb Z}(0, \sigma^2/\gamma^2)`
   (:func:`.discrete_gaussian.sample_discrete_gaussian`, exact);
6. reduce **modulo** :math:`m = 2^B` and hand the vector to secure aggregation.

Server side: secure aggregation returns :math:`\sum_i y_i \bmod m`; the server maps it to
:math:`[-m/2, m/2)` (**modular clipping**), **unflattens** with :math:`U^\top`, and
**rescales** by :math:`\gamma`, obtaining a noisy estimate of :math:`\sum_i x_i`.

Parameter selection (:func:`fedbandit.accounting.ddg.ddg_params`) follows the authors' method: given the bit
width :math:`B`, the per-client noise :math:`\sigma(\gamma)` is the smallest that meets
the target :math:`(\varepsilon, \delta)` for granularity :math:`\gamma`
(:func:`fedbandit.accounting.ddg.ddg_sigma_for_epsilon`), and :math:`\gamma` is chosen so
that the modular range :math:`2^B\gamma` covers :math:`\pm k` standard deviations of an
aggregate coordinate,

.. math:: 2^B \gamma = 2k\sqrt{\frac{\rho}{d'} c^2 n_f + \Big(\frac{\gamma^2}{4} + \sigma(\gamma)^2\Big) n},

with :math:`n_f = n^2` (conservative bound :math:`\|\sum_i x_i\| \le nc`) or :math:`n_f = n`
(optimistic, :math:`\|\sum_i x_i\| \lesssim \sqrt n c`) and flatness :math:`\rho = 1`
([KLS21]_ Thm. 34/Eq. 61; authors' code).  Without the dependence of :math:`\sigma` on
:math:`\gamma` this is the closed form
:math:`1/\gamma = \sqrt{2^{2B} - nk^2}/(2k\sqrt{\rho c^2 n_f/d' + n\sigma^2})`, which has no
solution when :math:`2^{2B} \le nk^2`.

As privacy protocols (:mod:`fedbandit.protocols`): one private sum per round, composed over
the rounds, is ``create("sum-ddg-secagg")`` (:mod:`fedbandit.protocols.sums`, used by the
federated trainer and the mean-estimation trial); the mechanism inside every node of the
bandit learners' tree is ``create("ddg-secagg")`` (:mod:`fedbandit.protocols.statistics`).

References
----------
.. [KLS21] P. Kairouz, Z. Liu and T. Steinke, "The distributed discrete Gaussian
   mechanism for federated learning with secure aggregation", ICML 2021.
"""

from __future__ import annotations

import math
from typing import Literal, overload

import numpy as np
from numpy.typing import ArrayLike

from fedbandit._validation import (
    MAX_STEPS,
    check_array,
    check_int_array,
    check_int_in_range,
    check_positive_float,
    check_positive_int,
    check_rng,
)
from fedbandit.accounting.ddg import DDGParams
from fedbandit.mechanisms.discrete_gaussian import sample_discrete_gaussian
from fedbandit.mechanisms.flattening import make_flattener

__all__ = [
    "DDGMechanism",
    "clip_l2",
    "conditional_randomized_round",
    "modular_clip",
    "ddg_noisy_sum",
]

# ---------------------------------------------------------------------------
# Pipeline steps
# ---------------------------------------------------------------------------
def clip_l2(x: ArrayLike, c: float) -> np.ndarray:
    r"""Scale each vector (last axis) to norm at most ``c``: :math:`x \min(1, c/\|x\|_2)`.

    Parameters
    ----------
    x : array_like, shape (..., d)
        The vectors.
    c : float
        The clipping norm.

    Returns
    -------
    ndarray
        The clipped vectors, same shape.
    """
    c = check_positive_float("c", c)
    x = check_array("x", x)
    if x.ndim < 1:
        raise ValueError(f"x must have at least one axis (vectors along the last), got shape {x.shape}")
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    factor = np.minimum(1.0, c / np.maximum(norms, 1e-300))
    return x * factor


def conditional_randomized_round(z: ArrayLike, bound: float, rng: np.random.Generator, *, max_tries: int = 10_000) -> np.ndarray:
    r"""Conditional randomized rounding ([KLS21]_ Sec. 4.1): resample until :math:`\|\tilde z\|_2 \le` ``bound``.

    Each coordinate is rounded to :math:`\lfloor z\rfloor + \mathrm{Bernoulli}(z - \lfloor z\rfloor)`
    (unbiased); a vector whose rounded norm exceeds ``bound`` is rounded again, only that
    vector.  The norm test is exact (integer sum of squares against
    :math:`\lfloor \text{bound}^2\rfloor`), so the sensitivity bound that privacy relies on
    holds with certainty; the rounding coins themselves need not be exact.

    Parameters
    ----------
    z : array_like, shape (..., d)
        Scaled vectors (grid units).
    bound : float
        :math:`\Delta_2/\gamma`; must be at least the norm of ``z`` plus the largest
        possible rounding (else the loop could be long; ``max_tries`` guards it).
    rng : numpy.random.Generator
    max_tries : int, default 10000
        Rounds allowed before giving up (a ``ValueError``: ``bound`` is too small).

    Returns
    -------
    ndarray of int64, shape of ``z``
        The rounded vectors, each of norm at most ``bound``.
    """
    rng = check_rng("rng", rng)
    bound = check_positive_float("bound", bound)
    max_tries = check_positive_int("max_tries", max_tries, max_value=MAX_STEPS, reason="each try costs a pass")
    z = check_array("z", z)
    if z.ndim < 1 or (z.size and (np.max(z) > 2.0**52 or np.min(z) < -(2.0**52))):  # (no |z| temporary)
        raise ValueError(f"z must have at least one axis and entries of magnitude at most 2^52, got shape {z.shape}")
    flat = z.reshape(-1, z.shape[-1])
    if flat.shape[0] > 1 and flat.strides[0] == 0:
        # one vector repeated (a broadcast view, as an audit's trials of one record): its floor and
        # fraction taken once; the same uniforms in the same order, the same integers
        fl = np.floor(flat[0])
        frac = np.broadcast_to(flat[0] - fl, flat.shape)
        out = fl.astype(np.int64) + (rng.random(flat.shape) < frac)
    else:
        fl = np.floor(flat)
        frac = flat - fl
        out = fl.astype(np.int64)  # the floors, then the rounded vectors (in place)
        out += rng.random(flat.shape, out=fl) < frac  # the uniforms overwrite the floors (no longer needed)
    limit = math.floor(bound * bound * (1.0 - 1e-12))
    todo = np.flatnonzero(np.einsum("ij,ij->i", out, out) > limit)
    tries = 0
    while todo.size:
        tries += 1
        if tries > max_tries:
            raise ValueError(
                f"bound={bound!r} is too small for z: conditional rounding did not meet it after max_tries={max_tries} "
                "tries (bound must be at least the norm of z plus the largest rounding, sqrt(d))"
            )
        redo = np.floor(flat[todo]).astype(np.int64) + (rng.random((todo.size, flat.shape[1])) < frac[todo])
        out[todo] = redo
        todo = todo[np.einsum("ij,ij->i", redo, redo) > limit]
    return out.reshape(z.shape)


def modular_clip(s: ArrayLike, modulus: int) -> np.ndarray:
    r"""Map residues mod :math:`m` to the representatives in :math:`[-m/2, m/2)` ([KLS21]_ Def. 33).

    Parameters
    ----------
    s : int or array_like of int
        The residues.
    modulus : int
        m.

    Returns
    -------
    ndarray of int64
        The representatives in [−m/2, m/2).
    """
    modulus = check_int_in_range("modulus", modulus, 2, 2**62)
    s = check_int_array("s", s, low=None, high=None)
    half = modulus // 2
    return np.mod(s + half, modulus) - half


class DDGMechanism:
    r"""Client encoder and server decoder of the distributed discrete Gaussian [KLS21]_.

    Parameters
    ----------
    params : DDGParams
        From :func:`fedbandit.accounting.ddg.ddg_params`.
    flatten_seed : int or numpy.random.Generator
        Shared public randomness of the flattening rotation (same for all clients and the
        server).
    runs : int or None, default None
        None: one rotation for every call; R: one rotation per run of a simulation that
        advances R independent runs side by side (the leading axis of every array, or the
        ``run`` of :meth:`encode` and :meth:`decode`).

    Notes
    -----
    :meth:`noisy_sum` is the whole protocol with an ideal modular-sum aggregator; the
    same :meth:`encode` / :meth:`decode` pair runs around the real secure aggregation of
    :mod:`fedbandit.secagg.protocol`.  Every method is vectorized over leading axes: client vectors
    have shape ``(..., n_clients, d)``.
    """

    def __init__(self, params: DDGParams, flatten_seed: int | np.random.Generator = 0, runs: int | None = None) -> None:
        if not isinstance(params, DDGParams):
            raise TypeError(f"params must be a DDGParams, got {type(params).__name__}")
        self.params = params
        self.flattener = make_flattener(params.d, check_rng("flatten_seed", flatten_seed), params.flatten, runs)
        if self.flattener.d_out != params.d_pad:
            raise ValueError("flattener output dimension does not match params.d_pad")

    # -- client ------------------------------------------------------------
    def _check_x(self, x: ArrayLike) -> np.ndarray:
        x = check_array("x", x, finite=False)
        if x.ndim < 1 or x.shape[-1] != self.params.d:
            raise ValueError(f"x must have last axis of length d={self.params.d}, got shape {x.shape}")
        if not np.all(np.isfinite(x)):
            raise ValueError("x must contain only finite values")
        return x

    @overload
    def encode(self, x: ArrayLike, rng: np.random.Generator, *, stages: Literal[False] = False,
               noise_shares: ArrayLike | None = None, run: int | ArrayLike | None = None) -> np.ndarray: ...

    @overload
    def encode(self, x: ArrayLike, rng: np.random.Generator, *, stages: Literal[True],
               noise_shares: ArrayLike | None = None,
               run: int | ArrayLike | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]: ...

    def encode(self, x: ArrayLike, rng: np.random.Generator, *, stages: bool = False,
               noise_shares: ArrayLike | None = None,
               run: int | ArrayLike | None = None) -> np.ndarray | tuple[np.ndarray, dict[str, np.ndarray]]:
        r"""Client side: clip, flatten, scale, round, add noise, reduce mod m.

        Returns int64 residues in ``[0, m)`` of shape ``x.shape[:-1] + (d_pad,)`` (and a
        dict of intermediate stages when ``stages=True``).  ``noise_shares``: for vectors
        ``x`` of shape (k, d), how many noise shares each of the k clients carries (a Poisson
        round, :meth:`fedbandit.accounting.ddg.DDGParams.noise_shares`; default one each): a
        client with m shares adds one :math:`\mathcal N_{\mathbb Z}(0, m\sigma^2/\gamma^2)` per
        coordinate.  ``run``: with one rotation per run, the run whose rotation applies to all of ``x``, or an
        integer array of shape ``x.shape[:-1]``, each vector's run (several runs' clients in one call; the draws
        then follow the vectors' order, not a run at a time).
        """
        x = self._check_x(x)
        rng = check_rng("rng", rng)
        p = self.params
        clipped = clip_l2(x, p.c)
        flat = self.flattener.flatten(clipped, run=run)
        scaled = flat / p.gamma
        rounded = conditional_randomized_round(scaled, p.delta2_int, rng)
        if noise_shares is None:
            noise = sample_discrete_gaussian(p.sigma_int, rounded.shape, rng)
        else:
            counts = check_int_array("noise_shares", noise_shares, low=1, high=None)
            if x.ndim != 2 or counts.shape != (x.shape[0],):
                raise ValueError(f"noise_shares needs vectors x of shape (k, d) and one count per vector, got x of shape "
                                 f"{x.shape} and noise_shares of shape {counts.shape}")
            noise = np.empty(rounded.shape, dtype=np.int64)
            for m in np.unique(counts):  # a few distinct counts (⌊K/k⌋ and ⌈K/k⌉): one sampler table each
                rows = counts == m
                noise[rows] = sample_discrete_gaussian(p.sigma_int * math.sqrt(int(m)), (int(rows.sum()), p.d_pad),
                                                       rng)
        noised = np.add(rounded, noise, out=noise)  # (noise itself is not kept)
        # mod 2^B of int64 two's complement: the low B bits (np.mod's value, without an integer division)
        residues = np.bitwise_and(noised, p.modulus - 1)
        if stages:
            return residues, {
                "input": x,
                "clipped": clipped,
                "flattened": flat,
                "scaled": scaled,
                "rounded": rounded,
                "noised": noised,
                "residues": residues,
            }
        return residues

    # -- aggregator (what secure aggregation computes) ---------------------
    def aggregate(self, residues: ArrayLike) -> np.ndarray:
        """Modular sum over the client axis ``-2`` (the output of secure aggregation)."""
        r = np.asarray(residues, dtype=np.int64)
        if r.ndim < 2 or r.shape[-1] != self.params.d_pad:
            raise ValueError(f"residues must have shape (..., n_clients, {self.params.d_pad}), got {r.shape}")
        return np.mod(r.sum(axis=-2), self.params.modulus)

    # -- server ------------------------------------------------------------
    def decode(self, total: ArrayLike, *, run: int | None = None) -> np.ndarray:
        """Server side: modular clipping to [-m/2, m/2), unflatten, rescale by γ (``run`` as in :meth:`encode`)."""
        s = np.asarray(total, dtype=np.int64)
        if s.ndim < 1 or s.shape[-1] != self.params.d_pad:
            raise ValueError(f"total must have last axis of length d_pad={self.params.d_pad}, got {s.shape}")
        centered = modular_clip(s, self.params.modulus)
        return self.params.gamma * self.flattener.unflatten(centered.astype(np.float64), run=run)

    def noisy_sum(self, x: ArrayLike, rng: np.random.Generator) -> np.ndarray:
        """The server's decoded noisy sum for client vectors ``x`` of shape (..., n_clients, d)."""
        x = self._check_x(x)
        if x.ndim < 2:
            raise ValueError(f"x must have shape (..., n_clients, d), got {x.shape}")
        return self.decode(self.aggregate(self.encode(x, rng)))

    def wrap_fraction(self, x: ArrayLike, rng: np.random.Generator) -> float:
        """Fraction of aggregate coordinates that left [-m/2, m/2) (modular wrap-around) for inputs ``x``."""
        res, st = self.encode(x, rng, stages=True)
        true_int = st["noised"].sum(axis=-2)
        half = self.params.modulus // 2
        return float(np.mean((true_int < -half) | (true_int >= half)))


def ddg_noisy_sum(x: ArrayLike, params: DDGParams, rng: np.random.Generator, *, flatten_seed: int | np.random.Generator = 0) -> np.ndarray:
    """Functional form of :meth:`DDGMechanism.noisy_sum` (batch (..., n_clients, d) -> (..., d)).

    Parameters
    ----------
    x : array_like, shape (..., n_clients, d)
        The clients' vectors.
    params : DDGParams
        The configuration.
    rng : numpy.random.Generator
    flatten_seed : int, default 0
        The shared seed of the flattening.

    Returns
    -------
    ndarray, shape (..., d)
        The decoded noisy sum.
    """
    return DDGMechanism(params, flatten_seed).noisy_sum(x, rng)



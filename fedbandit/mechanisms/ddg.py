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

Parameter selection (:func:`ddg_params`) follows the authors' method: given the bit
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

References
----------
.. [KLS21] P. Kairouz, Z. Liu and T. Steinke, "The distributed discrete Gaussian
   mechanism for federated learning with secure aggregation", ICML 2021.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import optimize

from fedbandit.accounting import ddg as acc
from fedbandit._validation import (
    check_choice,
    check_delta,
    check_epsilon,
    check_float_in_range,
    check_int_in_range,
    check_positive_float,
    check_positive_int,
    check_rng,
)
from fedbandit.mechanisms.discrete_gaussian import sample_discrete_gaussian
from fedbandit.mechanisms.flattening import make_flattener, next_power_of_two

__all__ = [
    "DDGParams",
    "ddg_params",
    "ddg_params_from_gamma",
    "DDGMechanism",
    "clip_l2",
    "conditional_randomized_round",
    "modular_clip",
    "ddg_noisy_sum",
    "dme_trial",
]

DEFAULT_BETA = math.exp(-0.5)


@dataclass(frozen=True)
class DDGParams:
    """All parameters of one DDG configuration (original units unless stated).

    Attributes
    ----------
    bits : int
        Bits per coordinate :math:`B`; modulus :math:`m = 2^B`.
    k : float
        Number of aggregate standard deviations that the modular range covers.
    n : int
        Number of clients the noise was calibrated for.
    d, d_pad : int
        Input dimension and flattened (padded) dimension.
    c : float
        Clipping norm.
    epsilon, delta : float
        Target privacy of one release (or of ``steps`` releases).
    beta : float
        Conditional rounding parameter.
    gamma : float
        Granularity :math:`\\gamma`.
    sigma : float
        Per-client noise scale in original units (integer-grid scale ``sigma / gamma``).
    delta2 : float
        Sensitivity bound :math:`\\Delta_2` enforced by conditional rounding.
    """

    bits: int
    k: float
    n: int
    d: int
    d_pad: int
    c: float
    epsilon: float
    delta: float
    beta: float
    gamma: float
    sigma: float
    delta2: float
    norm_growth: str = "conservative"
    flatten: str = "hadamard"
    method: str = "rdp"
    steps: int = 1
    rho: float = 1.0

    @property
    def modulus(self) -> int:
        return 1 << self.bits

    @property
    def sigma_int(self) -> float:
        """Scale of the discrete Gaussian on the integer grid, :math:`\\sigma/\\gamma`."""
        return self.sigma / self.gamma

    @property
    def delta2_int(self) -> float:
        """Norm bound on the integer grid, :math:`\\Delta_2/\\gamma`."""
        return self.delta2 / self.gamma

    def epsilon_for(self, n_honest: int, delta: float | None = None) -> float:
        """ε when only ``n_honest`` clients' noise is in the sum (dropouts), at fixed γ and σ."""
        return acc.ddg_epsilon(
            self.sigma,
            c=self.c,
            gamma=self.gamma,
            beta=self.beta,
            n=n_honest,
            d=self.d_pad,
            delta=self.delta if delta is None else delta,
            steps=self.steps,
            method=self.method,
        )

    def noise_mse(self) -> float:
        """Per-coordinate MSE of the *sum* due to privacy noise alone, :math:`n\\sigma^2` (approximately)."""
        return self.n * self.sigma**2

    def as_dict(self) -> dict:
        return asdict(self)


def _check_common(bits, k, n, d, c, epsilon, delta, beta, norm_growth, flatten, method, steps):
    bits = check_int_in_range("bits", bits, 2, 62)
    k = check_positive_float("k", k)
    n = check_positive_int("n", n)
    d = check_positive_int("d", d)
    c = check_positive_float("c", c)
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    beta = check_float_in_range("beta", beta, 0.0, 1.0, high_inclusive=False)
    check_choice("norm_growth", norm_growth, ("conservative", "optimistic"))
    check_choice("flatten", flatten, ("hadamard", "dft"))
    check_choice("method", method, ("rdp", "zcdp"))
    steps = check_positive_int("steps", steps)
    if 4**bits < n * k * k:
        raise ValueError(
            f"no valid gamma: 2^(2*bits) = {4**bits} < n*k^2 = {n * k * k:g} (bits={bits}, n={n}, k={k}); "
            "the rounding noise of n clients alone exceeds the modular range; use more bits or a smaller k"
        )
    d_pad = next_power_of_two(d) if flatten == "hadamard" else d + d % 2
    return bits, k, n, d, d_pad, c, epsilon, delta, beta, steps


def ddg_params(
    bits: int,
    k: float,
    n: int,
    d: int,
    c: float,
    epsilon: float,
    delta: float,
    beta: float = DEFAULT_BETA,
    *,
    norm_growth: str = "conservative",
    flatten: str = "hadamard",
    method: str = "rdp",
    steps: int = 1,
    rho: float = 1.0,
    n_signal: int | None = None,
) -> DDGParams:
    r"""Choose :math:`\gamma` and :math:`\sigma` from (bits, k, n, d, c, ε, δ) as in [KLS21]_'s code.

    Solves :math:`2^B\gamma = 2k\sqrt{\rho c^2 n_f/d' + (\gamma^2/4 + \sigma(\gamma)^2)n}` for
    :math:`\gamma` by root finding, where :math:`\sigma(\gamma)` is calibrated to the target
    ε by :func:`fedbandit.accounting.ddg.ddg_sigma_for_epsilon`.

    ``n_signal`` (default ``n``) is the number of clipped, rounded vectors in one aggregate
    when it differs from the number ``n`` of parties that add noise: in the bandit
    protocol (:class:`fedbandit.protocols.tree.DDGSecAggProtocol`) every *user* record is
    rounded and ``n`` *agents* add noise to the sum of their users' records.  The range
    condition is then :math:`2^B\gamma = 2k\sqrt{\rho c^2 n_f/d' + n_s\gamma^2/4 + n\sigma^2}`
    with :math:`n_f = n_s^2` (conservative) or :math:`n_s` (optimistic) [derived: the same
    variance bound with the rounding and noise terms counted separately].

    Raises
    ------
    ValueError
        For bits < 2, k <= 0, c <= 0, beta outside [0, 1), and when no γ exists
        (``2**(2*bits) < n*k**2``, or the bit width is too small for the noise).
    """
    bits, k, n, d, d_pad, c, epsilon, delta, beta, steps = _check_common(
        bits, k, n, d, c, epsilon, delta, beta, norm_growth, flatten, method, steps
    )
    rho = check_positive_float("rho", rho)
    n_s = n if n_signal is None else check_positive_int("n_signal", n_signal)
    if n_signal is not None and 4**bits < n_s * k * k:
        raise ValueError(
            f"no valid gamma: 2^(2*bits) = {4**bits} < n_signal*k^2 = {n_s * k * k:g} (bits={bits}); "
            "the rounding noise alone exceeds the modular range; use more bits or a smaller k"
        )
    m = float(1 << bits)
    n_f = float(n_s) ** 2 if norm_growth == "conservative" else float(n_s)

    def sigma_of(gamma: float) -> float:
        return acc.ddg_sigma_for_epsilon(
            epsilon, c=c, gamma=gamma, beta=beta, n=n, d=d_pad, delta=delta, steps=steps, method=method
        )

    def f(log_gamma: float) -> float:
        g = math.exp(log_gamma)
        s = sigma_of(g)
        return m * g - 2.0 * k * math.sqrt(rho * c * c * n_f / d_pad + g * g / 4.0 * n_s + s * s * n)

    # Start from the closed form with sigma at gamma -> 0 (no rounding inflation).
    s0 = sigma_of(1e-12 * c)
    g0 = 2.0 * k * math.sqrt(rho * c * c * n_f / d_pad + n * s0 * s0) / math.sqrt(max(m * m - n_s * k * k, 1.0))
    lo = hi = math.log(g0)
    tries = 0
    while f(lo) > 0:
        lo -= 1.0
        tries += 1
        if tries > 60:
            raise RuntimeError("could not bracket gamma from below")
    tries = 0
    while f(hi) < 0:
        hi += 1.0
        tries += 1
        if tries > 40:
            raise ValueError(
                f"no valid gamma for bits={bits}: the modular range 2^bits * gamma never covers "
                f"{k:g} standard deviations of the aggregate (epsilon={epsilon}, n={n}, d={d}); use more bits"
            )
    log_gamma = optimize.brentq(f, lo, hi, xtol=1e-10, rtol=1e-10, maxiter=200)
    gamma = math.exp(log_gamma)
    sigma = sigma_of(gamma)
    return DDGParams(
        bits=bits,
        k=k,
        n=n,
        d=d,
        d_pad=d_pad,
        c=c,
        epsilon=epsilon,
        delta=delta,
        beta=beta,
        gamma=gamma,
        sigma=sigma,
        delta2=acc.ddg_delta2(c, gamma, d_pad, beta),
        norm_growth=norm_growth,
        flatten=flatten,
        method=method,
        steps=steps,
        rho=rho,
    )


def ddg_params_from_gamma(
    bits: int,
    gamma: float,
    sigma: float,
    n: int,
    d: int,
    c: float,
    delta: float,
    beta: float = DEFAULT_BETA,
    *,
    flatten: str = "hadamard",
    method: str = "rdp",
    steps: int = 1,
    k: float = 1.0,
) -> DDGParams:
    """Build :class:`DDGParams` from a given γ and σ (ε is computed, not targeted)."""
    gamma = check_positive_float("gamma", gamma)
    sigma = check_positive_float("sigma", sigma)
    bits, k, n, d, d_pad, c, _, delta, beta, steps = _check_common(
        bits, k, n, d, c, 1.0, delta, beta, "conservative", flatten, method, steps
    )
    eps = acc.ddg_epsilon(sigma, c=c, gamma=gamma, beta=beta, n=n, d=d_pad, delta=delta, steps=steps, method=method)
    return DDGParams(
        bits=bits, k=k, n=n, d=d, d_pad=d_pad, c=c, epsilon=eps, delta=delta, beta=beta, gamma=gamma,
        sigma=sigma, delta2=acc.ddg_delta2(c, gamma, d_pad, beta), flatten=flatten, method=method, steps=steps,
    )


# ---------------------------------------------------------------------------
# Pipeline steps
# ---------------------------------------------------------------------------
def clip_l2(x, c: float) -> np.ndarray:
    r"""Scale each vector (last axis) to norm at most ``c``: :math:`x \min(1, c/\|x\|_2)`."""
    c = check_positive_float("c", c)
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    factor = np.minimum(1.0, c / np.maximum(norms, 1e-300))
    return x * factor


def conditional_randomized_round(z, bound: float, rng, *, max_tries: int = 10_000) -> np.ndarray:
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
    """
    rng = check_rng(rng)
    bound = check_positive_float("bound", bound)
    z = np.asarray(z, dtype=np.float64)
    flat = z.reshape(-1, z.shape[-1])
    fl = np.floor(flat)
    frac = flat - fl
    base = fl.astype(np.int64)
    out = base + (rng.random(flat.shape) < frac)
    limit = math.floor(bound * bound * (1.0 - 1e-12))
    todo = np.flatnonzero(np.einsum("ij,ij->i", out, out) > limit)
    tries = 0
    while todo.size:
        tries += 1
        if tries > max_tries:
            raise RuntimeError(f"conditional rounding did not meet the norm bound after {max_tries} tries")
        redo = base[todo] + (rng.random((todo.size, flat.shape[1])) < frac[todo])
        out[todo] = redo
        todo = todo[np.einsum("ij,ij->i", redo, redo) > limit]
    return out.reshape(z.shape)


def modular_clip(s, modulus: int) -> np.ndarray:
    r"""Map residues mod :math:`m` to the representatives in :math:`[-m/2, m/2)` ([KLS21]_ Def. 33)."""
    s = np.asarray(s, dtype=np.int64)
    half = modulus // 2
    return np.mod(s + half, modulus) - half


class DDGMechanism:
    r"""Client encoder and server decoder of the distributed discrete Gaussian [KLS21]_.

    Parameters
    ----------
    params : DDGParams
        From :func:`ddg_params`.
    flatten_seed : int or numpy.random.Generator
        Shared public randomness of the flattening rotation (same for all clients and the
        server).

    Notes
    -----
    :meth:`noisy_sum` is the whole protocol with an ideal modular-sum aggregator; the
    same :meth:`encode` / :meth:`decode` pair runs around the real secure aggregation of
    :mod:`fedbandit.secagg.protocol`.  Every method is vectorized over leading axes: client vectors
    have shape ``(..., n_clients, d)``.
    """

    def __init__(self, params: DDGParams, flatten_seed=0):
        if not isinstance(params, DDGParams):
            raise TypeError(f"params must be a DDGParams, got {type(params).__name__}")
        self.params = params
        self.flattener = make_flattener(params.d, check_rng(flatten_seed), params.flatten)
        if self.flattener.d_out != params.d_pad:
            raise ValueError("flattener output dimension does not match params.d_pad")

    # -- client ------------------------------------------------------------
    def _check_x(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim < 1 or x.shape[-1] != self.params.d:
            raise ValueError(f"x must have last axis of length d={self.params.d}, got shape {x.shape}")
        if not np.all(np.isfinite(x)):
            raise ValueError("x must contain only finite values")
        return x

    def encode(self, x, rng, *, stages: bool = False):
        """Client side: clip, flatten, scale, round, add noise, reduce mod m.

        Returns int64 residues in ``[0, m)`` of shape ``x.shape[:-1] + (d_pad,)`` (and a
        dict of intermediate stages when ``stages=True``).
        """
        x = self._check_x(x)
        rng = check_rng(rng)
        p = self.params
        clipped = clip_l2(x, p.c)
        flat = self.flattener.flatten(clipped)
        scaled = flat / p.gamma
        rounded = conditional_randomized_round(scaled, p.delta2_int, rng)
        noise = sample_discrete_gaussian(p.sigma_int, rounded.shape, rng)
        noised = rounded + noise
        residues = np.mod(noised, p.modulus)
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
    def aggregate(self, residues) -> np.ndarray:
        """Modular sum over the client axis ``-2`` (the output of secure aggregation)."""
        r = np.asarray(residues, dtype=np.int64)
        if r.ndim < 2 or r.shape[-1] != self.params.d_pad:
            raise ValueError(f"residues must have shape (..., n_clients, {self.params.d_pad}), got {r.shape}")
        return np.mod(r.sum(axis=-2), self.params.modulus)

    # -- server ------------------------------------------------------------
    def decode(self, total) -> np.ndarray:
        """Server side: modular clipping to [-m/2, m/2), unflatten, rescale by γ."""
        s = np.asarray(total, dtype=np.int64)
        if s.ndim < 1 or s.shape[-1] != self.params.d_pad:
            raise ValueError(f"total must have last axis of length d_pad={self.params.d_pad}, got {s.shape}")
        centered = modular_clip(s, self.params.modulus)
        return self.params.gamma * self.flattener.unflatten(centered.astype(np.float64))

    def noisy_sum(self, x, rng) -> np.ndarray:
        """The server's decoded noisy sum for client vectors ``x`` of shape (..., n_clients, d)."""
        x = self._check_x(x)
        if x.ndim < 2:
            raise ValueError(f"x must have shape (..., n_clients, d), got {x.shape}")
        return self.decode(self.aggregate(self.encode(x, rng)))

    def wrap_fraction(self, x, rng) -> float:
        """Fraction of aggregate coordinates that left [-m/2, m/2) (modular wrap-around) for inputs ``x``."""
        res, st = self.encode(x, rng, stages=True)
        true_int = st["noised"].sum(axis=-2)
        half = self.params.modulus // 2
        return float(np.mean((true_int < -half) | (true_int >= half)))


def ddg_noisy_sum(x, params: DDGParams, rng, *, flatten_seed=0) -> np.ndarray:
    """Functional form of :meth:`DDGMechanism.noisy_sum` (batch (..., n_clients, d) -> (..., d))."""
    return DDGMechanism(params, flatten_seed).noisy_sum(x, rng)


# ---------------------------------------------------------------------------
# Distributed mean estimation trial ([KLS21] Sec. 6.1), shared by the chapter and benchmarks
# ---------------------------------------------------------------------------
def dme_trial(config: dict, rng) -> dict:
    r"""One distributed-mean-estimation configuration, ``reps`` repetitions vectorized ([KLS21]_ Sec. 6.1).

    Each of ``n`` clients holds a vector drawn from :math:`\mathcal N(0, I_d)` and normalized
    to norm ``c`` (the authors' setting); the server estimates the mean.  The metric is the
    mean squared error per coordinate of the mean.

    Parameters
    ----------
    config : dict
        Keys ``n, d, c, bits, k, epsilon, delta, beta, norm_growth, reps`` (and optionally
        ``method``).
    rng : numpy.random.Generator

    Returns
    -------
    dict
        ``mse_ddg`` (reps,), ``mse_gauss_sim`` (reps,) of the central analytic Gaussian,
        ``mse_gauss_analytic`` and ``mse_gauss_zcdp`` (expected values: analytic
        calibration, and the zCDP/[CKS20] calibration), ``mse_ddg_noise`` (expected error
        from DDG's privacy noise alone, :math:`\sigma^2/n`), ``wrap`` (fraction of wrapped
        coordinates), ``gamma``, ``sigma``, ``sigma_int``.
    """
    from fedbandit.accounting.zcdp import calibrate_gaussian_sigma
    from fedbandit.mechanisms.gaussian import analytic_gaussian_sigma

    rng = check_rng(rng)
    n, d, c = int(config["n"]), int(config["d"]), float(config["c"])
    reps = int(config.get("reps", 1))
    p = ddg_params(
        int(config["bits"]),
        float(config["k"]),
        n,
        d,
        c,
        float(config["epsilon"]),
        float(config["delta"]),
        float(config.get("beta", DEFAULT_BETA)),
        norm_growth=config.get("norm_growth", "conservative"),
        method=config.get("method", "rdp"),
    )
    x = rng.normal(size=(reps, n, d))
    x *= c / np.linalg.norm(x, axis=-1, keepdims=True)
    true_mean = x.mean(axis=-2)
    mech = DDGMechanism(p, rng)
    residues, st = mech.encode(x, rng, stages=True)
    est = mech.decode(mech.aggregate(residues)) / n
    int_sum = st["noised"].sum(axis=-2)
    half = p.modulus // 2
    wrap = float(np.mean((int_sum < -half) | (int_sum >= half)))
    sg = analytic_gaussian_sigma(p.epsilon, p.delta, c)
    gauss = true_mean + rng.normal(0.0, sg, size=true_mean.shape) / n
    return {
        "mse_ddg": np.mean((est - true_mean) ** 2, axis=-1),
        "mse_gauss_sim": np.mean((gauss - true_mean) ** 2, axis=-1),
        "mse_gauss_analytic": sg**2 / n**2,
        "mse_gauss_zcdp": calibrate_gaussian_sigma(p.epsilon, p.delta, c) ** 2 / n**2,
        "mse_ddg_noise": p.sigma**2 / n,
        "wrap": wrap,
        "gamma": p.gamma,
        "sigma": p.sigma,
        "sigma_int": p.sigma_int,
    }

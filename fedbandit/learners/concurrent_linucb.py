"""LinUCB in the concurrent shuffle model (Tenenbaum, Kaplan, Mansour & Stemmer 2023), and its baselines.

LinUCB needs only the prefix sums of x xᵀ (Gram matrix) and x y (bias vector).  Users
t = 1, ..., n arrive one at a time; user t gets the server's action rule, plays
a_t = argmax_a ⟨x, θ̂⟩ + β_t ‖x‖_{V⁻¹}, observes y_t and sends its record
z_t = (x_t y_t, upper triangle of x_t x_tᵀ) of D = d + d(d+1)/2 coordinates through the
privacy model.  Every coordinate is a private summation under continual observation
(PSCO), and the server plays LinUCB on the noisy sums with a regularizer and a confidence
radius enlarged for the noise (Shariff & Sheffet 2018): regret Õ(sqrt(n ρ_max)) with
ρ_max the PSCO error.

Privacy models (one "stream" object each, all with the same learner :func:`run_private_linucb`):

* :class:`ShuffleSumStream` with k nested batch sizes -- the k-shuffler PSCO of
  :mod:`fedbandit.mechanisms.psco` on every coordinate: regret Õ(k^{3/4} n^{(k+1)/(2k+1)}/sqrt ε)
  (k = 1, 2, ...; the dyadic variant with k = ⌊log₂ n⌋ + 1 gives Õ(sqrt n));
* the same with one level of B ≈ n^{3/5} users -- the sequential shuffle model of
  Chowdhury & Zhou (2022), regret Õ(n^{3/5});
* the same with batches of one user -- the local model (randomized response per
  coordinate), regret Õ(n^{3/4});
* :class:`CentralTreeStream` -- a trusted server with the Gaussian tree mechanism
  (Dwork et al. 2010; Chan et al. 2011) on the exact sums, regret Õ(sqrt n).

Mapping to [0, 1] [derived]: coordinate v ∈ [−s, s] (s = L·Y for x y, L² for x xᵀ) enters
its PSCO as (v/s + 1)/2 and the server maps the estimated sum S back as s(2S − t).  The
values are not bits, so a user sends ⌈sqrt(b)⌉ unary messages to a batch of b users
(:class:`fedbandit.mechanisms.randomized_response.RRShuffleSummation` with ``resolution``), keeping the rounding
error O(1) per batch.  A user's record enters D coordinates × k levels = kD shuffle
mechanisms; the per-mechanism budget is the better of basic and advanced composition
over kD (:func:`fedbandit.accounting.composition.level_budget`).  Neighbouring datasets differ in one
user's record (substitution), for every model.

Regularizer and radius [recalled, Shariff & Sheffet 2018; constants derived]: with σ_G,
σ_u the per-entry noise standard deviations of the released Gram and bias sums (largest
over time), ν = σ_G (2 sqrt(d) + sqrt(2 ln(2n/α))) bounds the noise's operator norm at all
times with probability ≈ 1 − α; λ = max(1, 2ν), so V = G̃ + λI has ρ_min = λ − ν and
ρ_max = λ + ν; γ = σ_u (sqrt(d) + sqrt(2 ln(2n/α)))/sqrt(ρ_min) bounds ‖h_t‖_{V⁻¹};
β_t = R sqrt(2 ln(2/α) + d ln(ρ_max/ρ_min + t L²/(d ρ_min))) + S sqrt(ρ_max) + γ, times
``beta_scale``.
"""

from __future__ import annotations

import math

import numpy as np

from fedbandit._validation import (
    check_choice,
    check_delta,
    check_epsilon,
    check_nonnegative_float,
    check_positive_float,
    check_positive_int,
    check_probability,
    check_rng,
)
from fedbandit.accounting.zcdp import calibrate_gaussian_sigma
from fedbandit.accounting.composition import advanced_composition
from fedbandit.mechanisms.psco import optimal_batch_sizes
from fedbandit.mechanisms.tree import TreeMechanism, tree_depth
from fedbandit.protocols._legacy_tree import pack_statistics, unpack_statistics
from fedbandit.accounting.shuffle import rr_estimator_variance
from fedbandit._validation import check_batch_sizes
from fedbandit.accounting.shuffle import rr_flip_probability, rr_shuffle_delta
from fedbandit.accounting.composition import group_budget, level_budget
from fedbandit.mechanisms.randomized_response import _sample_counts
from fedbandit.learners.linucb import gather_played, regularized_inverse, select_arms

__all__ = [
    "n_coordinates",
    "record_half_range",
    "ShuffleSumStream",
    "CentralTreeStream",
    "concurrent_schedule",
    "make_stream",
    "linucb_parameters",
    "run_private_linucb",
    "bandit_trial",
    "LEARNERS",
]

#: Learner names accepted by :func:`make_stream` and :func:`bandit_trial`.
LEARNERS = ("concurrent", "tree", "sequential", "local", "central")


def n_coordinates(dim: int) -> int:
    """D = d + d(d+1)/2: coordinates of one user's record (bias x y and the Gram's upper triangle)."""
    dim = check_positive_int("dim", dim)
    return dim + dim * (dim + 1) // 2


def record_half_range(dim: int, feature_bound: float = 1.0, reward_bound: float = 1.0) -> np.ndarray:
    """s of every coordinate: L·Y for the d bias entries, L² for the Gram entries (``pack_statistics`` order)."""
    dim = check_positive_int("dim", dim)
    feature_bound = check_positive_float("feature_bound", feature_bound)
    reward_bound = check_positive_float("reward_bound", reward_bound)
    return np.r_[np.full(dim, feature_bound * reward_bound), np.full(n_coordinates(dim) - dim, feature_bound**2)]


class ShuffleSumStream:
    """Online k-level shuffle PSCO on every coordinate of the users' records.

    Parameters
    ----------
    batch_sizes : sequence of int
        Nested (b_1, ..., b_k) (consistent with ``n``); (b,) is the sequential model, (1,)
        the local model.
    epsilon, delta : float
        Overall (ε, δ) per user record.
    n : int
        Number of users (for checking the schedule and for the noise bound).
    half_range : array (D,)
        s of each coordinate (:func:`record_half_range`).
    model : str
        Label ("CSDP", "SDP", "LDP").

    Notes
    -----
    :meth:`push` takes the records of the next b_k users, feeds them to the shufflers of
    every level (independent unary rounding per level, randomized response, the released
    batch's count drawn from its exact distribution) and returns the mixed-radix estimate
    of the sums over all users so far (the estimate covers every user, since b_k divides
    every b_i).
    """

    def __init__(self, batch_sizes, epsilon, delta, n, half_range, *, model: str = "CSDP"):
        self.n = check_positive_int("n", n)
        self.sizes = check_batch_sizes(batch_sizes, self.n)
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_delta(delta)
        self.half_range = np.asarray(half_range, dtype=float)
        if self.half_range.ndim != 1 or np.any(self.half_range <= 0):
            raise ValueError("half_range must be a 1-D array of positive numbers")
        self.model = str(model)
        self.n_coords = self.half_range.size
        k = len(self.sizes)
        self.eps0, self.delta0 = level_budget(self.epsilon, self.delta, k * self.n_coords)
        self.resolutions, self.ps, self.noise_var, self._certified = [], [], [], []
        for b in self.sizes:
            g = max(1, math.ceil(math.sqrt(b)))
            eps_b, delta_b = group_budget(self.eps0, self.delta0, g)
            p = rr_flip_probability(b * g, eps_b, delta_b)
            self.resolutions.append(g)
            self.ps.append(p)
            self._certified.append(rr_shuffle_delta(eps_b, b * g, p) <= delta_b)
            # privacy noise + rounding (≤ b/(4g²)) variance of one released batch sum, [0, 1] units
            self.noise_var.append(rr_estimator_variance(b * g, p) / g**2 + b / (4.0 * g**2))
        self.period = self.sizes[-1]

    def __repr__(self) -> str:
        return f"ShuffleSumStream({self.model}, batch_sizes={self.sizes}, ε={self.epsilon:g}, δ={self.delta:g})"

    def reset(self, runs: int, rng) -> None:
        """Start ``runs`` independent streams."""
        self.runs = check_positive_int("runs", runs)
        self._rng = check_rng(rng)
        k, D = len(self.sizes), self.n_coords
        self._ones = np.zeros((k, self.runs, D), dtype=np.int64)
        self._g = np.array(self.resolutions, dtype=float)[:, None, None, None]
        self._filled = 0
        self._since_parent = np.zeros((k, self.runs, D))
        self._t = 0

    def push(self, records) -> np.ndarray:
        """Take the records (b_k, runs, D) of the next b_k users; return the noisy prefix sums (runs, D)."""
        z = np.asarray(records, dtype=float)
        if z.shape != (self.period, self.runs, self.n_coords):
            raise ValueError(f"records must have shape {(self.period, self.runs, self.n_coords)}, got {z.shape}")
        rng = self._rng
        z01 = np.clip((z / self.half_range + 1.0) / 2.0, 0.0, 1.0)
        # every level's randomizer rounds independently: g_i unary bits per value (one draw
        # for all levels at once)
        scaled = z01[None] * self._g  # (k, b_k, runs, D)
        low = np.floor(scaled)
        self._ones += (low + (rng.random(scaled.shape) < scaled - low)).sum(axis=1).astype(np.int64)
        self._t += self.period
        # Finest level first, so that a coarser release at the same time clears the finer
        # batches it contains.
        for i in reversed(range(len(self.sizes))):
            b = self.sizes[i]
            if self._t % b == 0:
                g, p = self.resolutions[i], self.ps[i]
                count = _sample_counts(self._ones[i], b * g, p / 2.0, 1.0 - p / 2.0, rng)
                self._since_parent[i] += (count - b * g * p / 2.0) / ((1.0 - p) * g)
                self._since_parent[i + 1 :] = 0.0
                self._ones[i] = 0
        return self.half_range * (2.0 * self._since_parent.sum(axis=0) - self._t)

    def max_variance(self) -> float:
        """Largest noise variance of a released estimate, in [0, 1] units."""
        var = (self.n // self.sizes[0]) * self.noise_var[0]
        for i in range(1, len(self.sizes)):
            var += (self.sizes[i - 1] // self.sizes[i] - 1) * self.noise_var[i]
        return var

    def noise_std(self) -> np.ndarray:
        """Per-coordinate noise std of a released prefix sum (largest over time), original units."""
        return 2.0 * self.half_range * math.sqrt(self.max_variance())

    def accounting(self) -> dict:
        """(ε, δ) per user record by composition over the k·D mechanisms it joins."""
        m = len(self.sizes) * self.n_coords
        basic = (m * self.eps0, m * self.delta0)
        # (advanced composition only helps for small ε₀; math.expm1 overflows for huge ones)
        adv = advanced_composition(self.eps0, self.delta0, m, self.delta / 2.0) if 1 < m and self.eps0 < 10 else basic
        eps, delta = min(basic, adv)
        return {
            "model": self.model,
            "epsilon": eps,
            "delta": delta,
            "mechanisms_per_user": m,
            "epsilon0": self.eps0,
            "delta0": self.delta0,
            "batches_certified": all(self._certified),
        }


class CentralTreeStream:
    """Central model: a trusted server adds all records and runs the Gaussian tree mechanism.

    One :class:`fedbandit.mechanisms.tree.TreeMechanism` over the n users on the D-vector
    of sums.  Substituting one record moves the vector by at most 2‖z‖₂ ≤ 2 sqrt(2) L²
    (with ‖x‖ ≤ L, |y| ≤ Y ≤ L: ‖x y‖ ≤ L Y, ‖triu(x xᵀ)‖ ≤ L²), in each of the
    L_tree = ⌊log₂ n⌋ + 1 nodes it enters: σ = ``calibrate_gaussian_sigma`` (ε, δ, Δ, L_tree).
    """

    model = "central"

    def __init__(self, epsilon, delta, n, half_range):
        self.n = check_positive_int("n", n)
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_delta(delta)
        self.half_range = np.asarray(half_range, dtype=float)
        self.n_coords = self.half_range.size
        self.sensitivity = 2.0 * math.sqrt(2.0) * float(self.half_range.max())
        self.levels = tree_depth(self.n)
        self.sigma = calibrate_gaussian_sigma(self.epsilon, self.delta, self.sensitivity, self.levels)
        self.period = 1

    def __repr__(self) -> str:
        return f"CentralTreeStream(ε={self.epsilon:g}, δ={self.delta:g}, σ={self.sigma:.3g})"

    def reset(self, runs: int, rng) -> None:
        self.runs = check_positive_int("runs", runs)
        self._rng = check_rng(rng)
        self._tree = TreeMechanism(self.n, (self.n_coords,), self.sigma, batch_shape=(self.runs,))

    def push(self, records) -> np.ndarray:
        z = np.asarray(records, dtype=float)
        if z.shape != (1, self.runs, self.n_coords):
            raise ValueError(f"records must have shape {(1, self.runs, self.n_coords)}, got {z.shape}")
        return self._tree.step(z[0], self._rng)

    def noise_std(self) -> np.ndarray:
        return np.full(self.n_coords, self.sigma * math.sqrt(self.levels))

    def accounting(self) -> dict:
        return {"model": "central", "epsilon": self.epsilon, "delta": self.delta, "sigma": self.sigma}


def concurrent_schedule(n: int, k, epsilon: float, delta: float, dim: int) -> tuple[int, ...]:
    """Batch sizes of the k-shuffler PSCO on a user's D-coordinate record over n users.

    ``k="log"``: dyadic (2^{L−1}, ..., 1) with L = ⌊log₂ n⌋ + 1; otherwise
    :func:`fedbandit.mechanisms.psco.optimal_batch_sizes` with ``streams=D`` and real values.
    """
    n = check_positive_int("n", n)
    if k == "log":
        levels = tree_depth(n)
        return tuple(2**j for j in range(levels - 1, -1, -1))
    return optimal_batch_sizes(n, check_positive_int("k", k), epsilon, delta, streams=n_coordinates(dim), values="real")


def make_stream(name: str, epsilon, delta, *, n, dim, k=None, batch_sizes=None, feature_bound=1.0, reward_bound=1.0):
    """The privacy model ``name`` (one of :data:`LEARNERS`) as a stream for :func:`run_private_linucb`.

    ``"concurrent"`` needs ``k``; ``"sequential"`` uses B = ⌈n^{3/5}⌉ (Chowdhury & Zhou 2022)
    unless ``batch_sizes`` is given.
    """
    check_choice("name", name, LEARNERS)
    n = check_positive_int("n", n)
    half = record_half_range(dim, feature_bound, reward_bound)
    if name == "central":
        return CentralTreeStream(epsilon, delta, n, half)
    if name == "local":
        return ShuffleSumStream((1,), epsilon, delta, n, half, model="LDP")
    if name == "sequential":
        sizes = (min(n, math.ceil(n**0.6)),) if batch_sizes is None else tuple(batch_sizes)
        return ShuffleSumStream(sizes, epsilon, delta, n, half, model="SDP")
    if name == "tree":
        return ShuffleSumStream(concurrent_schedule(n, "log", epsilon, delta, dim), epsilon, delta, n, half, model="CSDP")
    if k is None:
        raise ValueError("k is required for the concurrent learner")
    sizes = concurrent_schedule(n, k, epsilon, delta, dim) if batch_sizes is None else tuple(batch_sizes)
    return ShuffleSumStream(sizes, epsilon, delta, n, half, model="CSDP" if len(sizes) > 1 else "SDP")


def linucb_parameters(stream, n: int, dim: int, *, alpha=0.01, noise_bound=0.1, param_bound=1.0, feature_bound=1.0):
    """λ and the ingredients of β_t for a stream's noise level (see the module docstring)."""
    n = check_positive_int("n", n)
    dim = check_positive_int("dim", dim)
    alpha = check_probability("alpha", alpha)
    std = stream.noise_std()
    sigma_u, sigma_g = float(std[:dim].max()), float(std[dim:].max())
    tail = math.sqrt(2.0 * math.log(2.0 * n / alpha))
    nu = sigma_g * (2.0 * math.sqrt(dim) + tail)
    lam = max(1.0, 2.0 * nu)
    rho_min, rho_max = lam - nu, lam + nu
    gamma = sigma_u * (math.sqrt(dim) + tail) / math.sqrt(rho_min)
    return {
        "lam": lam,
        "rho_min": rho_min,
        "rho_max": rho_max,
        "gamma": gamma,
        "sigma_gram": sigma_g,
        "sigma_bias": sigma_u,
        "alpha": alpha,
        "noise_bound": check_nonnegative_float("noise_bound", noise_bound),
        "param_bound": check_nonnegative_float("param_bound", param_bound),
        "feature_bound": check_positive_float("feature_bound", feature_bound),
    }


def _beta(t, params, dim, scale):
    rho_min, rho_max = params["rho_min"], params["rho_max"]
    L = params["feature_bound"]
    inner = 2.0 * math.log(2.0 / params["alpha"]) + dim * np.log(rho_max / rho_min + t * L**2 / (dim * rho_min))
    return scale * (params["noise_bound"] * np.sqrt(inner) + params["param_bound"] * math.sqrt(rho_max) + params["gamma"])


def run_private_linucb(
    stream,
    env,
    n: int,
    rng,
    *,
    alpha=0.01,
    noise_bound=0.1,
    param_bound=1.0,
    beta_scale=1.0,
    reward_bound=1.0,
    lean: bool = True,
) -> dict:
    """LinUCB for n users on the noisy prefix sums a stream releases (Shariff–Sheffet style).

    Users between two releases are served with the same statistics, so they are handled as
    one vectorized block (the LinUCB core of :mod:`fedbandit.learners.linucb` with the block
    on its agents axis); with period-1 streams (local, central) this is one user at a time.

    Parameters
    ----------
    stream : ShuffleSumStream or CentralTreeStream
    env : fedbandit.envs.linear.SyntheticLinearEnv (or any environment with ``n_agents == 1``)
    n : int
        Number of users (rounds).
    rng : numpy.random.Generator
        The privacy mechanism's randomness.
    alpha, noise_bound, param_bound, beta_scale
        Failure probability, reward-noise level R, ‖θ*‖ bound S and a multiplier of β_t.
    reward_bound : float
        Rewards are clipped to [−Y, Y] before they enter any statistic.
    lean : bool, default True
        Serve period-1 streams with the specialised one-user loop (same decisions as the
        general block loop, which ``lean=False`` forces; the tests compare the two).

    Returns
    -------
    dict
        ``regret`` (runs, n) per-user pseudo-regret, ``lam``, ``beta_n``, ``accounting``.
    """
    n = check_positive_int("n", n)
    rng = check_rng(rng)
    if getattr(env, "n_agents", None) != 1:
        raise ValueError("run_private_linucb serves one user at a time: the environment must have n_agents=1")
    d = env.dim
    R = env.n_runs
    Y = check_positive_float("reward_bound", reward_bound)
    params = linucb_parameters(stream, n, d, alpha=alpha, noise_bound=noise_bound, param_bound=param_bound)
    lam = params["lam"]
    stream.reset(R, rng)
    period = stream.period
    betas = _beta(np.arange(1, n + 1), params, d, beta_scale)
    iu, ju = np.triu_indices(d)
    lam_eye = lam * np.eye(d)
    runs_idx = np.arange(R)
    v_inv = np.broadcast_to(np.eye(d) / lam, (R, d, d)).copy()
    theta = np.zeros((R, d))
    regret = np.zeros((R, n))
    pending = []
    filled = 0
    t = 0
    for block in env.iter_blocks(n):
        feats_b = block.features[:, :, 0]  # (rounds, Rc, K, d)
        means_b = block.means[:, :, 0]  # (rounds, Rc, K)
        best_b = block.best[:, :, 0]
        noise_b = block.noise[:, :, 0]
        mask_b = None if block.mask is None else block.mask[:, :, 0]  # (rounds, Rc, K): real arms
        if period == 1 and lean:
            # One user at a time (local, central, tree): the lean path.
            for s in range(block.n_rounds):
                X = np.broadcast_to(feats_b[s], (R,) + feats_b.shape[2:])  # (R, K, d)
                # the operations of linucb.ucb_scores, without its per-call overhead (same
                # floating-point results, so ties among arms break the same way)
                quad = np.einsum("rkd,rkd->rk", np.matmul(X, v_inv), X)
                scores = np.matmul(X, theta[..., None])[..., 0] + betas[t] * np.sqrt(np.maximum(quad, 0.0))
                if mask_b is not None:
                    scores = np.where(np.broadcast_to(mask_b[s], scores.shape), scores, -np.inf)
                arms = np.argmax(scores, axis=1)
                x = X[runs_idx, arms]  # (R, d)
                mean = np.broadcast_to(means_b[s], (R, means_b.shape[-1]))[runs_idx, arms]
                regret[:, t] = np.broadcast_to(best_b[s], (R,)) - mean
                y = np.clip(mean + noise_b[s], -Y, Y)
                z = np.concatenate([x * y[:, None], x[:, iu] * x[:, ju]], axis=1)
                t += 1
                released = stream.push(z[None])
                gram = np.empty((R, d, d))
                gram[:, iu, ju] = released[:, d:]
                gram[:, ju, iu] = released[:, d:]
                v_inv = np.linalg.inv(gram + lam_eye)
                theta = np.matmul(v_inv, released[:, :d, None])[..., 0]
            continue
        s = 0
        while s < block.n_rounds:
            # the next c users share the current statistics: one vectorized step
            c = min(block.n_rounds - s, period - filled)
            feats = np.moveaxis(feats_b[s : s + c], 0, 1)  # (Rc, c, K, d)
            means = np.moveaxis(means_b[s : s + c], 0, 1)  # (Rc, c, K)
            arms = select_arms(
                feats,
                np.broadcast_to(theta[:, None, :], (R, c, d)),
                np.broadcast_to(v_inv[:, None], (R, c, d, d)),
                np.broadcast_to(betas[t : t + c], (R, c)),
                None if mask_b is None else np.moveaxis(mask_b[s : s + c], 0, 1),
            )
            x = gather_played(feats, arms)  # (R, c, d)
            mean = gather_played(means, arms)  # (R, c)
            best = np.broadcast_to(np.moveaxis(best_b[s : s + c], 0, 1), (R, c))
            regret[:, t : t + c] = best - mean
            y = np.clip(mean + np.moveaxis(noise_b[s : s + c], 0, 1), -Y, Y)
            pending.append(pack_statistics(x * y[..., None], x[..., :, None] * x[..., None, :]))
            filled += c
            t += c
            s += c
            if filled == period:
                released = stream.push(np.moveaxis(np.concatenate(pending, axis=1), 1, 0))
                bias, gram = unpack_statistics(released, d)
                v_inv = regularized_inverse(gram, lam)
                theta = np.matmul(v_inv, bias[..., None])[..., 0]
                pending, filled = [], 0
    return {
        "regret": regret,
        "lam": lam,
        "beta_n": float(_beta(np.array([n]), params, d, beta_scale)[0]),
        "params": params,
        "accounting": stream.accounting(),
        "period": period,
    }


def bandit_trial(config: dict, rng) -> dict:
    """One seed of the regret experiment, in the form ``fedbandit.experiments.grid.run_grid`` runs.

    Parameters
    ----------
    config : dict
        ``n`` (users), ``epsilon``, ``delta``, ``runs``, ``dim``, ``n_arms``, ``noise_std``
        (reward noise, also the R of β), ``learners``: list of ``[name, k]`` with name in
        :data:`LEARNERS` (k for "concurrent"); optional ``beta_scale`` (default 1) and
        ``schedules``: label → batch sizes computed beforehand.
    rng : numpy.random.Generator
        Split into the environment's seed (shared by all learners: common random numbers)
        and one stream per learner.

    Returns
    -------
    dict
        label → cumulative regret at n of every run (array (runs,)); ``"curves"``: label →
        mean cumulative regret at ``"checkpoints"``; ``"lam"``: label → λ; ``"uniform"``: the
        regret of playing uniformly at random (per run).
    """
    from fedbandit.envs.linear import SyntheticLinearEnv

    n = check_positive_int("n", config["n"])
    epsilon = check_epsilon(config["epsilon"])
    delta = check_delta(config["delta"])
    runs = check_positive_int("runs", config.get("runs", 1))
    dim = check_positive_int("dim", config.get("dim", 3))
    noise_std = check_nonnegative_float("noise_std", config.get("noise_std", 0.1))
    rng = check_rng(rng)
    env_seed, learner_rng = rng.spawn(2)
    schedules = config.get("schedules") or {}
    checkpoints = np.unique(np.linspace(1, n, 40).astype(int))
    out: dict = {"curves": {}, "checkpoints": checkpoints, "lam": {}}

    def make_env():
        return SyntheticLinearEnv(
            1, n_arms=int(config.get("n_arms", 20)), dim=dim, n_runs=runs, noise_std=noise_std,
            shared_contexts=False, means_from_raw=False, seed=env_seed,
        )

    # regret of playing uniformly at random, for scale
    out["uniform"] = sum(
        (b.best[:, :, 0] - np.mean(b.means[:, :, 0], axis=-1)).sum(axis=0) for b in make_env().iter_blocks(n)
    )
    for (name, k), stream_rng in zip(config["learners"], learner_rng.spawn(len(config["learners"]))):
        label = name if k is None else f"{name}-{k}"
        stream = make_stream(name, epsilon, delta, n=n, dim=dim, k=k, batch_sizes=schedules.get(label))
        env = make_env()
        res = run_private_linucb(
            stream, env, n, stream_rng, noise_bound=noise_std, beta_scale=float(config.get("beta_scale", 1.0))
        )
        cum = np.cumsum(res["regret"], axis=1)
        out[label] = cum[:, -1]
        out["curves"][label] = cum[:, checkpoints - 1].mean(axis=0)
        out["lam"][label] = res["lam"]
    return out

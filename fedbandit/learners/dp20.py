"""DP20's FedUCB: federated LinUCB with an adaptive (log-det) synchronization rule.

Dubey & Pentland (NeurIPS 2020, "DP20") propose FedUCB: M agents (silos) run LinUCB on
their *synchronized* statistics plus their own *local* statistics since the last
synchronization; a synchronization of all agents is triggered by the data-dependent rule

.. math:: \\log\\det(V_{\\text{sync}} + W_i) - \\log\\det(V_{\\text{sync}}) \\ge D / \\Delta t

(rule (1) of Zhou & Chowdhury 2023, Section 4; Δt = rounds since the last
synchronization, the rule of DisLinUCB, Wang et al. 2020), and every synchronized
statistic passes through a tree-based Gaussian privatizer over the *synchronization
rounds* (Shariff & Sheffet 2018 style) whose noise is calibrated to
σ² ≈ 16 m L² log²(1/δ)/ε², m = 1 + ⌈log₂ T⌉.

Zhou & Chowdhury (2023, Section 4) identify three gaps, which the book's chapter
(``chapters/01_dp20_gaps.ipynb``) measures with this module:

1. the schedule depends on non-private local data (W_i above), so *when* agents
   synchronize leaks (their Example 4.1);
2. every silo adds noise of variance σ², so the server's total noise is Mσ², not the σ²
   of DP20's regret analysis (``noise="corrected"`` is DP20's algorithm as written,
   ``noise="claimed"`` the total σ² their analysis assumes, i.e. σ²/M per silo);
3. the O(M log T) communication argument is the non-private one.

What is reconstructed (the algorithm box of DP20 is not in the book's sources) is marked
[recalled] / [derived] in the docstrings, following ``paper-facts`` section 1:

* [recalled] V_{t,i} = λ₀ I + S̃_sync + W_i, θ̂ = V⁻¹(ũ_sync + U_i), LinUCB choice; the
  regularizer shift λ₀ = λ + 2b keeps the noisy V positive definite w.h.p., with b the
  Shariff–Sheffet bound b = sqrt(m)·s·(4 sqrt(d) + 2 log(2T/α)) on the spectral norm of a
  sum of ≤ m symmetric node noises of per-entry standard deviation s (the *total* node
  noise at the server: s = sqrt(M)·σ₀);
* [recalled] β_t = R sqrt(2 log(2/α) + d log(ρ_max/ρ_min + tML²/(dρ_min))) + S sqrt(ρ_max)
  + γ with ρ_min = λ + b, ρ_max = λ + 3b, γ = sqrt(m)·s·(sqrt d + sqrt(2 log(2T/α)))/sqrt(ρ_min)
  (Shariff & Sheffet's β with (ρ_min, ρ_max, γ)-accurate regularizers); without noise this
  is OFUL's radius R sqrt(2 log(2/α) + d log(1 + tM/(dλ))) + S sqrt(λ);
* [derived] the tree runs over synchronization rounds, one step per synchronization of the
  run, with n_steps = T (the most synchronizations possible); a synchronization at the
  end of round t uses that round's data (also at t = T, so that a fixed schedule with
  B | T synchronizes exactly T/B times, as Algorithm 1 of Zhou & Chowdhury does).

Vectorization
-------------
State carries (runs R, agents M) leading axes.  The synchronization decision is per run
(any agent triggering synchronizes every agent of that run), so runs synchronize at
different rounds and their trees are at different steps: a synchronization is a masked
update of the runs that synchronize, with per-run tree levels, never a loop over runs.
The server only ever sees Σ_i α̂_{j,i} = Σ_i α_{j,i} + Σ_i Z_{j,i}, and the p-sum of the
agent-summed stream is the sum of the agents' p-sums, so the noise-free p-sums are kept
agent-summed; the noise is drawn per agent (so the server's total injected noise is
measured, not assumed).

Random draws
------------
All privacy noise comes from the ``rng`` passed to :meth:`FedUCB.run`: at the end of a
round in which the runs ``idx`` (in increasing order) synchronize,
``draw_noise(rng, (len(idx), M, d, d), σ₀, symmetric=True)`` (the Gram noise) then
``draw_noise(rng, (len(idx), M, d), σ₀)`` (the bias noise), with
:func:`fedbandit.mechanisms.tree.draw_noise`.  Contexts and reward noise come from the
environment (common random numbers).  ``tests/reference_dp20.py`` consumes the same draws.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from fedbandit._validation import (
    check_choice,
    check_delta,
    check_epsilon,
    check_int_in_range,
    check_nonnegative_float,
    check_positive_float,
    check_positive_int,
    check_probability,
    check_rng,
)
from fedbandit.mechanisms.tree import draw_noise, tree_depth
from fedbandit.learners.linucb import gather_played, select_arms
from fedbandit.accounting.calibration import dp20_m, dp20_sigma

__all__ = [
    "NOISE_MODES",
    "SCHEDULES",
    "wang_threshold",
    "noise_bound",
    "RunwiseTree",
    "FedUCB",
    "DP20Result",
    "simulate",
]

#: ``"none"``: no privatizer; ``"corrected"``: DP20's algorithm as written, every silo adds
#: σ² per entry and node (server total Mσ²); ``"claimed"``: the total σ² that DP20's regret
#: analysis assumes (every silo adds σ²/M).
NOISE_MODES = ("none", "claimed", "corrected")
#: ``"adaptive"``: DP20's log-det rule; ``"fixed"``: synchronize every ``batch_size`` rounds
#: (a data-independent schedule, as in Zhou & Chowdhury's Algorithm 1).
SCHEDULES = ("adaptive", "fixed")


def wang_threshold(horizon, dim, n_agents) -> float:
    """D = T log T / (d M), the threshold of DisLinUCB (Wang et al. 2020) [paper-facts]."""
    T = check_positive_int("horizon", horizon)
    d = check_positive_int("dim", dim)
    M = check_positive_int("n_agents", n_agents)
    return T * math.log(max(T, 2)) / (d * M)


def noise_bound(total_sigma, dim, horizon, alpha=0.01) -> float:
    """b = sqrt(m)·s·(4 sqrt(d) + 2 log(2T/α)): w.h.p. bound on ‖Σ node noises‖₂ [recalled].

    Shariff & Sheffet (2018): a sum of at most m symmetric Gaussian node noises with
    per-entry standard deviation s has spectral norm at most b with probability ≥ 1 − α/T.
    ``total_sigma`` is s, the per-entry standard deviation of the *server's* node noise.
    """
    s = check_nonnegative_float("total_sigma", total_sigma)
    d = check_positive_int("dim", dim)
    T = check_positive_int("horizon", horizon)
    alpha = check_probability("alpha", alpha)
    return math.sqrt(dp20_m(T)) * s * (4.0 * math.sqrt(d) + 2.0 * math.log(2.0 * T / alpha))


@dataclass
class DP20Result:
    """Outcome of :meth:`FedUCB.run` (all arrays have a leading run axis R).

    Attributes
    ----------
    regret : ndarray (R, T)
        Per-round group pseudo-regret Σ_i (best mean − played mean).
    sync : ndarray of bool (R, T)
        ``sync[r, t-1]``: run r synchronized at the end of round t (what another silo
        or the server observes).
    n_syncs : ndarray (R,)
        Number of synchronization rounds (each: M uploads and one broadcast).
    actions : ndarray (R, M, T) of int, or None
        Played arms (only with ``record_actions=True``).
    noise_sumsq, noise_count : ndarray (R,)
        Sum of squares and number of the entries of the server's aggregated node noise
        Σ_i Z_{j,i} (Gram entries on and above the diagonal, and bias entries) over all
        releases: their ratio is the measured total injected variance per entry and node.
    n_indefinite : ndarray (R,)
        Synchronizations after which λ₀I + S̃_sync was not positive definite.
    n_nonmonotone : ndarray (R,)
        Synchronizations at which S̃_sync,k+1 − S̃_sync,k was not positive semidefinite:
        the nesting V_sync,k ⪯ V_sync,k+1 that the non-private log-det (telescoping)
        argument for O(log T) synchronizations needs fails there.
    params : dict
        σ (DP20's calibration), σ₀ (per silo), the nominal totals σ² and Mσ², λ₀, b, D, ...
    """

    regret: np.ndarray
    sync: np.ndarray
    n_syncs: np.ndarray
    actions: np.ndarray | None
    noise_sumsq: np.ndarray
    noise_count: np.ndarray
    n_indefinite: np.ndarray
    n_nonmonotone: np.ndarray
    params: dict = field(default_factory=dict)

    @property
    def cumulative_regret(self) -> np.ndarray:
        """Cumulative group regret (R, T)."""
        return np.cumsum(self.regret, axis=1)

    @property
    def measured_total_variance(self) -> float:
        """Measured per-entry variance of the server's node noise Σ_i Z_{j,i} (NaN if none)."""
        n = float(self.noise_count.sum())
        return float(self.noise_sumsq.sum() / n) if n > 0 else float("nan")

    def sync_times(self, run: int = 0) -> np.ndarray:
        """Rounds (1-based) at whose end run ``run`` synchronized."""
        return np.flatnonzero(self.sync[run]) + 1

    def first_sync(self) -> np.ndarray:
        """Round of the first synchronization of every run (T + 1 if none), shape (R,)."""
        T = self.sync.shape[1]
        has = self.sync.any(axis=1)
        return np.where(has, self.sync.argmax(axis=1) + 1, T + 1)


class RunwiseTree:
    """Tree-based aggregation over synchronization rounds, one tree per run.

    Runs synchronize at different rounds, so their trees are at different steps k_r.  At
    a synchronization of the runs ``idx`` every agent's local sums γ_{k,i} (its Gram matrix
    and bias vector since the last synchronization) enter its tree: with j = ν(k_r) the
    lowest set bit of k_r, α_j = Σ_{l<j} α_l + γ_k, released as α̂_{j,i} = α_{j,i} + Z_{j,i}
    with Z ~ N(0, σ₀²) entrywise (symmetric for the Gram matrix); the server sums the
    agents' releases, α̃_j = Σ_i α̂_{j,i}, and returns the prefix s̃_k = Σ_{bits l of k} α̃_l
    (Algorithm 2 of Zhou & Chowdhury 2023; Shariff & Sheffet's tree for DP20 [recalled]).
    Since p-sums are linear, the noise-free p-sums are kept summed over agents; the noise
    is drawn per agent (see the module notes for the order of the draws).

    This is :class:`fedbandit.mechanisms.tree.DistributedTreeMechanism` with a per-run
    step counter: that class advances all runs in lockstep, which an adaptive schedule
    does not.

    Parameters
    ----------
    n_steps : int
        Most synchronizations a run can have (T).
    n_runs, dim, n_agents : int
    sigma0 : float
        Per-agent, per-node noise standard deviation σ₀ ≥ 0.
    """

    def __init__(self, n_steps, n_runs, dim, n_agents, sigma0):
        self.n_steps = check_positive_int("n_steps", n_steps)
        R = self.n_runs = check_positive_int("n_runs", n_runs)
        d = self.dim = check_positive_int("dim", dim)
        self.n_agents = check_positive_int("n_agents", n_agents)
        self.sigma0 = check_nonnegative_float("sigma0", sigma0)
        L = self.n_levels = tree_depth(self.n_steps)
        self.k = np.zeros(R, dtype=np.int64)
        self._a_G = np.zeros((L, R, d, d))  # noise-free p-sums (agent-summed)
        self._a_u = np.zeros((L, R, d))
        self._t_G = np.zeros((L, R, d, d))  # the server's noisy p-sums
        self._t_u = np.zeros((L, R, d))
        self._levels = np.arange(L)[:, None]
        self._iu, self._ju = np.triu_indices(d)
        #: Entries of one release counted in the noise measurement (Gram on/above the diagonal, bias).
        self.entries_per_release = self._iu.size + d

    def step(self, idx, gram, bias, rng=None):
        """Synchronize the runs ``idx`` (increasing run indices).

        Parameters
        ----------
        idx : ndarray of int (n_s,)
        gram : ndarray (n_s, M, d, d)
            Every agent's Gram sum since its run's last synchronization.
        bias : ndarray (n_s, M, d)
        rng : numpy.random.Generator or None
            Source of the node noise; None adds no noise (the non-private tree).

        Returns
        -------
        (S, u, sumsq)
            The server's prefix sums (n_s, d, d) and (n_s, d), and per run the sum of
            squares of the aggregated noise Σ_i Z_{j,i} entries of this release.
        """
        idx = np.asarray(idx, dtype=np.int64)
        n_s, M, d = idx.size, self.n_agents, self.dim
        if idx.ndim != 1 or np.any(idx < 0) or np.any(idx >= self.n_runs) or np.any(np.diff(idx) <= 0):
            raise ValueError(f"idx must be increasing run indices in [0, {self.n_runs}), got {idx!r}")
        if np.shape(gram) != (n_s, M, d, d) or np.shape(bias) != (n_s, M, d):
            raise ValueError(
                f"gram and bias must have shapes {(n_s, M, d, d)} and {(n_s, M, d)}, "
                f"got {np.shape(gram)} and {np.shape(bias)}"
            )
        if np.any(self.k[idx] >= self.n_steps):
            raise ValueError(f"a run would exceed the tree's n_steps={self.n_steps} synchronizations")
        self.k[idx] += 1
        kk = self.k[idx]
        j = np.log2(kk & -kk).astype(np.int64)  # ν(k) per run
        low = self._levels < j[None, :]  # levels merged into the new p-sum
        newG = np.einsum("ls,lsij->sij", low, self._a_G[:, idx]) + gram.sum(axis=1)
        newu = np.einsum("ls,lsi->si", low, self._a_u[:, idx]) + bias.sum(axis=1)
        keep = ~low
        self._a_G[:, idx] *= keep[..., None, None]
        self._a_u[:, idx] *= keep[..., None]
        self._a_G[j, idx] = newG
        self._a_u[j, idx] = newu
        sumsq = np.zeros(n_s)
        if rng is not None and self.sigma0 > 0:
            zG = draw_noise(rng, (n_s, M, d, d), self.sigma0, symmetric=True).sum(axis=1)
            zu = draw_noise(rng, (n_s, M, d), self.sigma0).sum(axis=1)
            sumsq = (zG[:, self._iu, self._ju] ** 2).sum(axis=1) + (zu**2).sum(axis=1)
            newG = newG + zG
            newu = newu + zu
        self._t_G[j, idx] = newG
        self._t_u[j, idx] = newu
        bits = ((kk[None, :] >> self._levels) & 1).astype(float)  # prefix nodes: set bits of k
        S = np.einsum("ls,lsij->sij", bits, self._t_G[:, idx])
        u = np.einsum("ls,lsi->si", bits, self._t_u[:, idx])
        return S, u, sumsq


class FedUCB:
    """DP20's FedUCB (Dubey & Pentland 2020), vectorized over runs and agents.

    Parameters
    ----------
    n_agents : int
        M.
    dim : int
        d, the feature dimension.
    horizon : int
        T, rounds per agent.
    threshold : float, optional
        D > 0 of the log-det rule (required for ``schedule="adaptive"``).
        :func:`wang_threshold` gives DisLinUCB's choice.
    schedule : {"adaptive", "fixed"}, default "adaptive"
        DP20's rule, or a data-independent synchronization every ``batch_size`` rounds.
    batch_size : int, optional
        B for ``schedule="fixed"`` (1 ≤ B ≤ T).
    noise : {"none", "claimed", "corrected"}, default "corrected"
        See :data:`NOISE_MODES`.
    epsilon, delta : float, optional
        Privacy parameters of DP20's calibration :func:`dp20_sigma` (needed with noise
        unless ``sigma`` is given).
    sigma : float, optional
        Override of DP20's per-node σ (the per-silo σ₀ is σ for "corrected", σ/sqrt(M)
        for "claimed").
    lam : float, default 1.0
        Base regularizer λ > 0.
    shift : float or "auto", default "auto"
        Regularizer shift added to λ (λ₀ = λ + shift); "auto" is 2b with b from
        :func:`noise_bound` at the total node noise s = sqrt(M)σ₀ (0 without noise).
    alpha : float in (0, 1), default 0.01
        Failure probability in β and b.
    noise_std : float, default 0.5
        R, the reward-noise level in β.
    param_bound : float, default 1.0
        S ≥ ‖θ*‖ in β.
    feature_bound : float, default 1.0
        L ≥ ‖x‖ (in σ and β).
    beta_scale : float, default 1.0
        Multiplies β (1 is the theory's radius).
    refresh : int, default 256
        Between synchronizations V⁻¹ is kept by Sherman–Morrison updates and log det by the
        matrix determinant lemma; both are recomputed exactly every ``refresh`` rounds.

    Raises
    ------
    ValueError, TypeError
        On a bad D, ε, δ, σ, schedule/noise mode or size, naming the parameter.
    """

    def __init__(
        self,
        n_agents,
        dim,
        horizon,
        *,
        threshold=None,
        schedule="adaptive",
        batch_size=None,
        noise="corrected",
        epsilon=None,
        delta=None,
        sigma=None,
        lam=1.0,
        shift="auto",
        alpha=0.01,
        noise_std=0.5,
        param_bound=1.0,
        feature_bound=1.0,
        beta_scale=1.0,
        refresh=256,
    ):
        self.n_agents = check_positive_int("n_agents", n_agents)
        self.dim = check_positive_int("dim", dim)
        self.horizon = check_positive_int("horizon", horizon)
        self.schedule = check_choice("schedule", schedule, SCHEDULES)
        if self.schedule == "adaptive":
            if threshold is None:
                raise ValueError("threshold D is required for schedule='adaptive' (e.g. wang_threshold(T, d, M))")
            self.threshold = check_positive_float("threshold", threshold)
            if batch_size is not None:
                raise ValueError("batch_size is only used with schedule='fixed'; got batch_size with 'adaptive'")
            self.batch_size = None
        else:
            if batch_size is None:
                raise ValueError("batch_size is required for schedule='fixed'")
            self.batch_size = check_int_in_range("batch_size", batch_size, 1, self.horizon)
            self.threshold = None if threshold is None else check_positive_float("threshold", threshold)
        self.noise = check_choice("noise", noise, NOISE_MODES)
        self.lam = check_positive_float("lam", lam)
        self.alpha = check_probability("alpha", alpha)
        self.noise_std = check_nonnegative_float("noise_std", noise_std)
        self.param_bound = check_nonnegative_float("param_bound", param_bound)
        self.feature_bound = check_positive_float("feature_bound", feature_bound)
        self.beta_scale = check_nonnegative_float("beta_scale", beta_scale)
        self.refresh = check_positive_int("refresh", refresh)
        self.epsilon = None if epsilon is None else check_epsilon(epsilon)
        self.delta = None if delta is None else check_delta(delta)
        if self.noise == "none":
            self.sigma = 0.0
        elif sigma is not None:
            self.sigma = check_positive_float("sigma", sigma)
        else:
            if self.epsilon is None or self.delta is None:
                raise ValueError(f"noise={self.noise!r} needs epsilon and delta (or an explicit sigma)")
            self.sigma = dp20_sigma(self.epsilon, self.delta, self.horizon, self.feature_bound)
        M = self.n_agents
        # Per-silo node noise σ₀ and the server's total per-entry node noise s = sqrt(M)σ₀.
        self.sigma0 = {"none": 0.0, "claimed": self.sigma / math.sqrt(M), "corrected": self.sigma}[self.noise]
        self.total_sigma = math.sqrt(M) * self.sigma0
        self.m = dp20_m(self.horizon)
        self.b = noise_bound(self.total_sigma, self.dim, self.horizon, self.alpha) if self.noise != "none" else 0.0
        if isinstance(shift, str):
            check_choice("shift", shift, ("auto",))
            self.shift = 2.0 * self.b
        else:
            self.shift = check_nonnegative_float("shift", shift)
        self.lam0 = self.lam + self.shift
        self.n_levels = tree_depth(self.horizon)

    # ------------------------------------------------------------------------------
    def params(self) -> dict:
        """The learner's settings and derived noise levels (JSON-able)."""
        M = self.n_agents
        return {
            "M": M,
            "d": self.dim,
            "T": self.horizon,
            "schedule": self.schedule,
            "D": self.threshold,
            "B": self.batch_size,
            "noise": self.noise,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "sigma": self.sigma,
            "sigma0": self.sigma0,
            "claimed_total_variance": self.sigma**2,
            "corrected_total_variance": M * self.sigma**2,
            "nominal_total_variance": M * self.sigma0**2,
            "m": self.m,
            "b": self.b,
            "lam": self.lam,
            "shift": self.shift,
            "lam0": self.lam0,
        }

    def beta(self, t) -> np.ndarray | float:
        """Confidence radius β_t (see the module notes) [recalled]; array-friendly in t."""
        t = np.asarray(t, dtype=float)
        d, M, L = self.dim, self.n_agents, self.feature_bound
        rho_min = self.lam + self.b
        rho_max = self.lam + 3.0 * self.b
        gamma = 0.0
        if self.noise != "none":
            gamma = (
                math.sqrt(self.m)
                * self.total_sigma
                * (math.sqrt(d) + math.sqrt(2.0 * math.log(2.0 * self.horizon / self.alpha)))
                / math.sqrt(rho_min)
            )
        inner = 2.0 * math.log(2.0 / self.alpha) + d * np.log(rho_max / rho_min + t * M * L**2 / (d * rho_min))
        beta = self.beta_scale * (self.noise_std * np.sqrt(inner) + self.param_bound * math.sqrt(rho_max) + gamma)
        return float(beta) if beta.ndim == 0 else beta

    # ------------------------------------------------------------------------------
    def _check_env(self, env):
        for attr in ("iter_blocks", "n_agents", "dim", "n_runs"):
            if not hasattr(env, attr):
                raise TypeError(f"env must be a linear environment with iter_blocks/n_agents/dim/n_runs, got {env!r}")
        if env.n_agents != self.n_agents:
            raise ValueError(f"env has n_agents={env.n_agents} but the learner has n_agents={self.n_agents}")
        if env.dim != self.dim:
            raise ValueError(f"env has dim={env.dim} but the learner has dim={self.dim}")
        return check_positive_int("env.n_runs", env.n_runs)

    def run(self, env, rng, *, record_actions: bool = False) -> DP20Result:
        """Play T rounds on ``env`` for its ``n_runs`` runs side by side.

        Parameters
        ----------
        env : environment
            Anything with ``iter_blocks(T)`` yielding :class:`fedbandit.envs.linear.RoundBlock`
            objects and attributes ``n_agents``, ``dim``, ``n_runs`` (e.g.
            :class:`fedbandit.envs.linear.SyntheticLinearEnv`).
        rng : numpy.random.Generator
            Source of the privacy noise (see the module notes).
        record_actions : bool, default False
            Keep every played arm (R, M, T).

        Returns
        -------
        DP20Result
        """
        rng = check_rng(rng)
        R = self._check_env(env)
        M, d, T = self.n_agents, self.dim, self.horizon
        eye = np.eye(d)
        adaptive = self.schedule == "adaptive"
        noisy = self.noise != "none"

        # Synchronized (noisy) statistics, one per run; local statistics per (run, agent).
        S = np.zeros((R, d, d))
        u = np.zeros((R, d))
        W = np.zeros((R, M, d, d))
        U = np.zeros((R, M, d))
        v_inv = np.broadcast_to(eye / self.lam0, (R, M, d, d)).copy()
        logdet_sync = np.full(R, d * math.log(self.lam0))
        logdet_loc = np.full((R, M), d * math.log(self.lam0))
        last = np.zeros(R, dtype=np.int64)
        since = np.zeros(R, dtype=np.int64)  # rounds since V⁻¹ was last computed exactly
        tree = RunwiseTree(T, R, d, M, self.sigma0)

        regret = np.zeros((R, T))
        sync = np.zeros((R, T), dtype=bool)
        actions = np.zeros((R, M, T), dtype=np.int32) if record_actions else None
        sumsq = np.zeros(R)
        count = np.zeros(R)
        n_indef = np.zeros(R, dtype=np.int64)
        n_nonmono = np.zeros(R, dtype=np.int64)
        betas = self.beta(np.arange(1, T + 1))
        ridx = np.arange(R)

        tol = 1e-9 * self.feature_bound
        for block in env.iter_blocks(T):
            if block.features.shape[-1] != d:
                raise ValueError(f"environment features have dimension {block.features.shape[-1]}, expected dim={d}")
            norms = np.linalg.norm(block.features, axis=-1)
            if block.mask is not None:
                norms = np.where(block.mask, norms, 0.0)
            if np.any(norms > self.feature_bound + tol):
                # σ and β assume ‖x‖ ≤ L (the privacy calibration's sensitivity).
                raise ValueError(f"features exceed feature_bound={self.feature_bound} (max norm {norms.max():.6g})")
            noise_blk = np.broadcast_to(block.noise, (block.n_rounds, R, M))
            for s in range(block.n_rounds):
                t = block.start + s + 1
                feats = block.features[s]
                theta = np.matmul(v_inv, (u[:, None, :] + U)[..., None])[..., 0]
                mask = None if block.mask is None else block.mask[s]
                arms = select_arms(feats, theta, v_inv, betas[t - 1], mask)
                x = gather_played(feats, arms)
                mean = gather_played(block.means[s], arms)
                best = np.broadcast_to(block.best[s], (R, M))
                regret[:, t - 1] = (best - mean).sum(axis=1)
                if record_actions:
                    actions[:, :, t - 1] = arms
                y = mean + noise_blk[s]
                # log det(V + x xᵀ) = log det V + log(1 + xᵀV⁻¹x) (matrix determinant lemma);
                # |·| so a noisy, indefinite V follows slogdet's log|det| as the reference does.
                z = np.matmul(v_inv, x[..., None])[..., 0]
                q = np.einsum("rmi,rmi->rm", x, z)
                logdet_loc += np.log(np.abs(1.0 + q))
                # Sherman–Morrison with the z = V⁻¹x just computed (linucb's helper would redo it).
                v_inv -= z[..., :, None] * (z / (1.0 + q)[..., None])[..., None, :]
                W += x[..., :, None] * x[..., None, :]
                U += x * y[..., None]
                since += 1
                stale = since >= self.refresh
                if stale.any():
                    # Long epochs: recompute V⁻¹ and log det exactly so rounding does not accumulate.
                    st = ridx[stale]
                    V = S[st, None] + W[st] + self.lam0 * eye
                    v_inv[st] = np.linalg.inv(V)
                    logdet_loc[st] = np.linalg.slogdet(V)[1]
                    since[st] = 0

                if adaptive:
                    gap = logdet_loc - logdet_sync[:, None]
                    trig = (gap >= self.threshold / (t - last)[:, None]).any(axis=1)
                else:
                    trig = np.full(R, t % self.batch_size == 0)
                if not trig.any():
                    continue
                idx = ridx[trig]
                sync[idx, t - 1] = True
                last[idx] = t
                S_new, u_new, sq = tree.step(idx, W[idx], U[idx], rng if noisy else None)
                if noisy:
                    sumsq[idx] += sq
                    count[idx] += tree.entries_per_release
                # The non-private O(log T) argument telescopes log det over nested matrices
                # V_sync,k ⪯ V_sync,k+1; record when fresh tree noise breaks the nesting.
                step = np.linalg.eigvalsh(S_new - S[idx])[:, 0]
                scale = 1e-9 * (1.0 + np.abs(S_new).max(axis=(1, 2)))
                n_nonmono[idx] += (step < -scale).astype(np.int64)
                S[idx] = S_new
                u[idx] = u_new
                # One symmetric eigendecomposition gives log|det V|, V⁻¹ and definiteness.
                lam_v, vecs = np.linalg.eigh(S_new + self.lam0 * eye)
                n_indef[idx] += (lam_v[:, 0] <= 0).astype(np.int64)
                ld = np.log(np.abs(lam_v)).sum(axis=1)
                logdet_sync[idx] = ld
                logdet_loc[idx] = ld[:, None]
                since[idx] = 0
                v_inv[idx] = np.matmul(vecs / lam_v[:, None, :], np.swapaxes(vecs, 1, 2))[:, None]
                W[idx] = 0.0
                U[idx] = 0.0

        params = self.params()
        params["R"] = R
        return DP20Result(
            regret=regret,
            sync=sync,
            n_syncs=sync.sum(axis=1),
            actions=actions,
            noise_sumsq=sumsq,
            noise_count=count,
            n_indefinite=n_indef,
            n_nonmonotone=n_nonmono,
            params=params,
        )


def simulate(config: dict, rng) -> dict:
    """One configuration of FedUCB on the synthetic instance, for :func:`fedbandit.experiments.grid.run_grid`.

    The environment is :class:`fedbandit.envs.linear.SyntheticLinearEnv` (Zhou & Chowdhury's
    synthetic instance) with seed ``env_seed``, so every noise mode and schedule of a
    sweep sees the same contexts and reward noise (common random numbers); ``rng`` only
    drives the privacy noise.

    Parameters
    ----------
    config : dict
        ``M``, ``T``, ``d``, ``K``, ``runs`` (runs side by side), ``env_seed``, ``noise``,
        ``epsilon``, ``delta``, ``schedule`` ("adaptive" or "fixed"), ``D`` (a number or
        "wang" for :func:`wang_threshold`), ``B`` (an int or "optimal" for the divisor of T
        closest to sqrt(T/M)), and optionally ``beta_scale``, ``lam``, ``noise_std``.
    rng : numpy.random.Generator

    Returns
    -------
    dict
        ``regret`` (R,) total group regret, ``curve`` (R, 20) cumulative regret at 20
        equally spaced rounds, ``n_syncs`` (R,), ``sync_times`` (sync rounds of run 0),
        ``measured_total_variance``, ``n_indefinite``, ``n_nonmonotone`` and the learner's
        ``params``.
    """
    from fedbandit.envs.linear import SyntheticLinearEnv
    from fedbandit.theory.linear import optimal_batch_size

    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    required = ("M", "T", "d", "K", "runs", "env_seed", "noise", "schedule")
    missing = [k for k in required if k not in config]
    if missing:
        raise ValueError(f"config lacks {missing}")
    M, T, d = config["M"], config["T"], config["d"]
    schedule = check_choice("schedule", config["schedule"], SCHEDULES)
    kw = {}
    if schedule == "adaptive":
        D = config.get("D", "wang")
        kw["threshold"] = wang_threshold(T, d, M) if D == "wang" else D
    else:
        B = config.get("B", "optimal")
        kw["batch_size"] = optimal_batch_size(T, M) if B == "optimal" else B
    for key in ("beta_scale", "lam", "noise_std"):
        if key in config:
            kw[key] = config[key]
    noise = config["noise"]
    learner = FedUCB(
        M, d, T, schedule=schedule, noise=noise,
        epsilon=config.get("epsilon") if noise != "none" else None,
        delta=config.get("delta") if noise != "none" else None,
        **kw,
    )
    env = SyntheticLinearEnv(
        M, n_arms=config["K"], dim=d, n_runs=config["runs"], seed=config["env_seed"],
        noise_std=config.get("noise_std", 0.5),
    )
    res = learner.run(env, rng)
    cum = res.cumulative_regret
    points = np.linspace(T / 20, T, 20).round().astype(int) - 1
    return {
        "regret": cum[:, -1],
        "curve": cum[:, points],
        "curve_t": points + 1,
        "n_syncs": res.n_syncs,
        "sync_times": res.sync_times(0),
        "measured_total_variance": res.measured_total_variance,
        "n_indefinite": res.n_indefinite,
        "n_nonmonotone": res.n_nonmonotone,
        "params": res.params,
    }

"""Federated private UCB of Li, Song & Fragouli: master-worker and decentralized (consensus).

Implements, vectorized over ``(runs, agents)``, the two algorithms of
{cite}`li2022federated` and the baselines the book compares them with:

* :func:`dp_master_worker_ucb` -- DP-Master-worker UCB (their Algorithm 1);
* :func:`dp_decentralized_ucb` -- DP-Decentralized UCB (their Algorithm 2), running
  consensus with ``P = I - (kappa/d_max) L`` on a communication graph; with
  ``epsilon=None`` it is the non-private cooperative UCB (coop-UCB of Landgren, Srivastava
  & Leonard 2016) on the same graph;
* :func:`ucb` / :func:`private_ucb` -- ``M`` independent single agents (UCB1-style, and
  the same with hybrid-mechanism private sums);
* :func:`centralized_ucb` -- one learner seeing all ``M T`` samples (all agents share raw
  data every slot and play the pooled UCB arm).

Every reward is the private datum (the paper's privacy unit): each (agent, arm) reward
stream goes through its own hybrid mechanism
(:class:`fedbandit.mechanisms.continual_counting.HybridMechanism`), and everything an agent
sends or acts on is computed from the mechanism's outputs (and the pull counts, which the
paper does not protect), so each agent's reward sequence is epsilon-DP by post-processing
(their Theorems 1 and 3).

Reconstructions (the paper's algorithm boxes and index formulas are not available; each is
marked [derived] and shown against its alternatives in the chapter):

* Index of agent ``i`` for arm ``j`` (master-worker, own data):
  ``X̂ + sigma sqrt(2 rho ln t / n) + nu``, with ``X̂ = s̃/n`` the private mean and ``nu``
  the *privacy width* (``privacy_width=``): ``"fact1"`` = Fact 1's error bound
  ``(1/eps) (log2 t)^{1.5} ln(1/delta_t)`` at ``delta_t = t^{-rho}`` divided by ``n``;
  ``"std"`` = ``sqrt(2 rho ln t)`` times an upper bound on the hybrid noise's standard
  deviation at the agent's own count ``n`` (:func:`sd_bound_by_level`), divided by ``n``;
  ``"none"`` = 0.
* Master-worker schedule: communication at slots ``t = 2^p`` (after the ``K`` initial
  round-robin slots): every agent uploads its ``K`` indices, the master averages them and
  every agent replaces its index vector by the average ("same best arm for all agents").
  Between communications an agent updates, at the end of each block, the index of the arm
  it played from its own private sum ("starts from the common index and privately updates
  it").  Doubling rule: the ``p``-th consecutive selection of the same arm plays a block of
  ``2^{p-1}`` slots (1, 2, 4, ...); a communication ends the current block.
* Decentralized index (coop-UCB structure with the paper's ``c_0, c_i``):
  ``ŝ/n̂ + sigma sqrt(2 rho (n̂ + c_i)/(c_0 n̂) ln t / n̂) + nu``, with ``c_0 = M`` and ``c_i``
  the agent's consensus-error bound (:func:`fedbandit.envs.graphs.network_terms`), and privacy
  width ``nu = b (n̂ + c_i)/n̂^2`` where ``b`` is the per-agent width numerator of the
  master-worker index (for ``"std"``, the noise-std bound at the estimated per-agent count
  ``n̂``) divided by ``sqrt(c_0)`` (the consensus averages ``M`` independent noises).
* Private consensus (their eq. (7)): ``ŝ_j(t+1) = P (ŝ_j(t) + Δs̃_j(t))`` where ``Δs̃`` is
  the change of the agent's hybrid-mechanism output (non-zero only for the pulled arm);
  counts use eq. (5) ``n̂_j(t+1) = P (n̂_j(t) + ξ_j(t))`` unchanged.

Randomness: ``rng`` first yields the key of a :class:`fedbandit.envs.multi_armed.RewardStream`
(common random numbers: every algorithm sees the same rewards for a seed), then the
mechanisms' Laplace noise, one standard variate per (run, agent) and slot in (run, agent)
order.  The loop references in ``tests/reference_consensus_ucb.py`` follow the same
protocol and make the same decisions.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np

from fedbandit._validation import (
    check_choice,
    check_epsilon,
    check_float_in_range,
    check_int_in_range,
    check_positive_float,
    check_positive_int,
    check_rng,
)
from fedbandit.envs.multi_armed import BernoulliBandit, GaussianBandit, RewardStream, make_env
from fedbandit.envs.graphs import Graph, consensus_matrix, make_graph, network_terms
from fedbandit.mechanisms.continual_counting import HybridMechanism, floor_log2

__all__ = [
    "BanditResult",
    "PRIVACY_WIDTHS",
    "dp_master_worker_ucb",
    "dp_decentralized_ucb",
    "ucb",
    "private_ucb",
    "centralized_ucb",
    "run_config",
    "RUN_CONFIG_VERSION",
    "default_checkpoints",
    "privacy_width_numerator",
    "sd_bound_by_level",
]

def _single_thread_blas():
    """Context limiting BLAS to one thread (threadpoolctl if installed, else a no-op)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: only a speed matter
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


#: Accepted values of ``privacy_width=``.
PRIVACY_WIDTHS = ("fact1", "std", "none")

#: Version tag for run_grid caches of :func:`run_config`; bump when results change.
RUN_CONFIG_VERSION = "consensus-ucb-2"


@dataclass
class BanditResult:
    """Outcome of a vectorized bandit simulation.

    Attributes
    ----------
    algorithm : str
    times : ndarray (n_checkpoints,)
        Slots ``t`` at which the cumulative quantities are recorded.
    regret : ndarray (R, n_checkpoints)
        Cumulative pseudo-regret summed over the ``M`` agents, ``sum_s sum_i Delta_{a_i(s)}``.
    pulls : ndarray (R, M, K)
        Pull counts at the horizon.
    communications : ndarray (n_checkpoints,)
        Number of communication rounds up to each checkpoint (master-worker: rounds where
        the master averages the indices; decentralized: every slot is a consensus round).
    messages : ndarray (n_checkpoints,)
        Number of point-to-point messages (each carries ``K`` numbers for master-worker
        uploads/broadcasts, ``2K`` for consensus) up to each checkpoint.
    actions : ndarray (T, R, M) or None
        Every arm played (only with ``record_actions=True``).
    info : dict
        Settings and derived constants (network terms, ...).
    """

    algorithm: str
    times: np.ndarray
    regret: np.ndarray
    pulls: np.ndarray
    communications: np.ndarray
    messages: np.ndarray
    actions: np.ndarray | None = None
    info: dict = field(default_factory=dict)

    @property
    def final_regret(self) -> np.ndarray:
        """Regret at the horizon, one value per run."""
        return self.regret[:, -1]

    def to_dict(self) -> dict:
        """Plain-data form (for caches and the experiment runner)."""
        return {
            "algorithm": self.algorithm,
            "times": self.times,
            "regret": self.regret,
            "pulls": self.pulls,
            "communications": self.communications,
            "messages": self.messages,
            "info": self.info,
        }


def default_checkpoints(horizon: int, n: int = 60) -> np.ndarray:
    """About ``n`` log-spaced slots in ``[1, horizon]``, always including ``horizon``."""
    horizon = check_positive_int("horizon", horizon)
    n = check_positive_int("n", n)
    pts = np.unique(np.round(np.logspace(0, np.log10(horizon), n)).astype(np.int64))
    return np.unique(np.append(pts[(pts >= 1) & (pts <= horizon)], horizon))


def _check_checkpoints(checkpoints, horizon):
    if checkpoints is None:
        return default_checkpoints(horizon)
    c = np.unique(np.asarray(checkpoints, dtype=np.int64))
    if c.size == 0 or c.min() < 1 or c.max() > horizon:
        raise ValueError(f"checkpoints must be slots in [1, horizon={horizon}], got {checkpoints!r}")
    return c


def _check_env(env):
    if not isinstance(env, (BernoulliBandit, GaussianBandit)):
        raise TypeError(f"env must be a BernoulliBandit or GaussianBandit, got {type(env).__name__}")
    return env


def _check_clip(clip):
    try:
        lo, hi = (float(c) for c in clip)
    except Exception as exc:
        raise TypeError(f"clip must be a pair (low, high), got {clip!r}") from exc
    if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
        raise ValueError(f"clip must satisfy low < high (finite), got {clip!r}")
    return lo, hi


def sd_bound_by_level(max_level: int = 64) -> np.ndarray:
    """``g(k)`` with ``(2s/eps) g(k)`` an upper bound on the hybrid noise's standard deviation.

    For counts ``n`` with ``floor(log2 n) = k``:
    ``g(k) = sqrt(2 (k + 1) + 2 k^3)``, the exact variance
    (:func:`~fedbandit.mechanisms.continual_counting.hybrid_noise_variance`: ``k + 1``
    releases of ``Lap(2s/eps)``, ``popcount(tau) <= k`` nodes of ``Lap(2ks/eps)``) divided by
    ``(2s/eps)^2``, with ``popcount(tau)`` replaced by its maximum ``k``.
    """
    k = np.arange(max_level + 1, dtype=float)
    return np.sqrt(2.0 * (k + 1) + 2.0 * k**3)


_G = sd_bound_by_level()
_G_SHIFTED = np.r_[_G[0], _G]  # indexed by frexp's exponent (floor(log2 n) + 1); n < 1 -> level 0


def privacy_width_numerator(kind: str, t: int, epsilon, rho, sensitivity: float = 1.0):
    """Count-free factor of the privacy width at slot ``t`` (scalar or per run).

    ``"fact1"``: Fact 1's error bound ``(s/eps) (log2 t)^{1.5} ln(1/delta_t)`` at
    ``delta_t = t^{-rho}`` (the width is this divided by the count); ``"std"``:
    ``sqrt(2 rho ln t) (2s/eps)`` (the width is this times ``g(floor(log2 n))/n``, see
    :func:`sd_bound_by_level`); ``"none"``: 0.
    """
    if kind == "none" or epsilon is None:
        return 0.0
    lt = np.log(max(t, 2))
    if kind == "fact1":
        return sensitivity / epsilon * np.log2(max(t, 2)) ** 1.5 * rho * lt
    return np.sqrt(2.0 * rho * lt) * (2.0 * sensitivity / epsilon)


def _per_run(name, value, R, check):
    """Scalar or (R,) array -> (R,) float array, each entry validated by ``check``."""
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 0:
        return np.full(R, check(name, float(arr)) if check else float(arr))
    if arr.shape != (R,):
        raise ValueError(f"{name} must be a scalar or an array of shape (n_runs,) = ({R},), got shape {arr.shape}")
    for v in arr:
        check(name, float(v))
    return arr.copy()


def _check_eps_value(name, v):
    return check_epsilon(v, name)


def _check_rho_value(name, v):
    return check_float_in_range(name, v, 1.0, np.inf, low_inclusive=False, high_inclusive=False)


class _Recorder:
    def __init__(self, checkpoints, n_runs):
        self.cp = checkpoints
        self.regret = np.zeros((n_runs, checkpoints.size))
        self.comm = np.zeros(checkpoints.size, dtype=np.int64)
        self.msgs = np.zeros(checkpoints.size, dtype=np.int64)
        self.next = 0

    def record(self, t, regret, comm, msgs):
        while self.next < self.cp.size and self.cp[self.next] == t:
            self.regret[:, self.next] = regret
            self.comm[self.next] = comm
            self.msgs[self.next] = msgs
            self.next += 1


def _setup(env, n_runs, n_agents, rng):
    rng = check_rng(rng)
    stream = RewardStream(env, n_runs, n_agents, rng)
    return stream, rng


# --------------------------------------------------------------------------------------
# Shared argument handling
# --------------------------------------------------------------------------------------


class _Common:
    """Validated settings shared by the learners (all checks before any work)."""

    def __init__(self, env, n_agents, horizon, n_runs, epsilon, rho, privacy_width, sigma, clip, checkpoints):
        self.env = _check_env(env)
        self.M = check_positive_int("n_agents", n_agents)
        self.K = self.env.n_arms
        self.T = check_int_in_range("horizon", horizon, self.K, None)
        self.R = check_positive_int("n_runs", n_runs)
        self.private = epsilon is not None
        self.eps = _per_run("epsilon", epsilon, self.R, _check_eps_value) if self.private else None
        self.rho = _per_run("rho", rho, self.R, _check_rho_value)
        self.privacy_width = check_choice("privacy_width", privacy_width, PRIVACY_WIDTHS)
        self.sigma = self.env.sigma if sigma is None else check_positive_float("sigma", sigma)
        self.lo, self.hi = _check_clip(clip)
        self.sens = self.hi - self.lo
        self.cps = _check_checkpoints(checkpoints, self.T)

    def clip_shift(self, r):
        """Rewards clipped to [low, high] and shifted to [0, high - low] (flat), for the mechanism."""
        # two ufuncs: np.clip's Python wrapper costs more than the work at this size
        return np.minimum(np.maximum(r.reshape(-1), self.lo), self.hi) - self.lo

    def mechanism(self, batch_shape, eps_shape):
        return HybridMechanism(self.eps.reshape(eps_shape), batch_shape, sensitivity=self.sens, track_true=False)

    def width_numerator(self, t):
        """Per-run privacy-width factor (R,), or None when there is no privacy width."""
        if not self.private or self.privacy_width == "none":
            return None
        return privacy_width_numerator(self.privacy_width, t, self.eps, self.rho, self.sens)

    def info(self, **extra):
        d = {"n_agents": self.M, "horizon": self.T, "n_runs": self.R,
             "epsilon": None if self.eps is None else self.eps.tolist(), "rho": self.rho.tolist(),
             "privacy_width": self.privacy_width, "sigma": self.sigma, "means": self.env.means.tolist()}
        d.update(extra)
        return d


def _own_index(c, sums_over_n, n, t, rho_e, num_e):
    """Own index ``X̂ + sigma sqrt(2 rho ln t / n) + nu`` for flat entries (1-D arrays)."""
    idx = sums_over_n + c.sigma * np.sqrt(2.0 * rho_e * np.log(t) / n)
    if num_e is not None:
        if c.privacy_width == "fact1":
            idx = idx + num_e / n
        else:
            idx = idx + num_e * _G[floor_log2(n.astype(np.int64))] / n
    return idx


# --------------------------------------------------------------------------------------
# DP-Master-worker UCB
# --------------------------------------------------------------------------------------


def dp_master_worker_ucb(
    env,
    n_agents: int,
    horizon: int,
    epsilon,
    *,
    rng,
    n_runs: int = 1,
    rho=2.0,
    privacy_width: str = "std",
    sigma: float | None = None,
    doubling: bool = True,
    communicate: bool = True,
    clip=(0.0, 1.0),
    checkpoints=None,
    record_actions: bool = False,
) -> BanditResult:
    """DP-Master-worker UCB (Li, Song & Fragouli, Algorithm 1; reconstruction in the module doc).

    Parameters
    ----------
    env : BernoulliBandit or GaussianBandit
        Shared arm means.
    n_agents : int
        Number of agents ``M``.
    horizon : int
        Number of slots ``T`` (``T >= K``).
    epsilon : float, array of shape (n_runs,), or None
        Privacy of each agent's reward stream (one hybrid mechanism per arm, pure
        epsilon-DP); an array gives every run its own epsilon (sweeps in one simulation);
        ``None`` runs the same schedule on exact sums (non-private).
    rng : numpy.random.Generator
        Source of randomness (reward table key, then mechanism noise).
    n_runs : int
        Independent runs simulated side by side.
    rho : float > 1 or array of shape (n_runs,)
        Exploration parameter.
    privacy_width : {"std", "fact1", "none"}
        Privacy term of the index (see module doc).
    sigma : float, optional
        Sub-Gaussian scale of the rewards in the UCB width (default ``env.sigma``).
    doubling : bool
        Apply the doubling rule (else every block is one slot).
    communicate : bool
        Average the indices at ``t = 2^p`` (else the agents never communicate: ``M``
        independent private learners with the doubling rule).
    clip : (low, high)
        Rewards are clipped to this interval before the mechanism (sensitivity
        ``high - low``).
    checkpoints : array of int, optional
        Slots at which to record regret (default :func:`default_checkpoints`).
    record_actions : bool
        Keep every action (memory ``T R M``; for tests).
    """
    c = _Common(env, n_agents, horizon, n_runs, epsilon, rho, privacy_width, sigma, clip, checkpoints)
    R, M, K, T = c.R, c.M, c.K, c.T
    stream, rng = _setup(c.env, R, M, rng)
    gaps = c.env.gaps
    counts = np.zeros((R, M, K))
    exact = np.zeros((R, M, K))  # exact sums, used only when epsilon is None
    mech = c.mechanism((R, M, K), (R, 1, 1)) if c.private else None
    run_of = np.repeat(np.arange(R), M * K)  # run of every flat (r, m, j) entry
    base = (np.arange(R)[:, None] * M + np.arange(M)[None, :]) * K  # flat (r, m, 0)
    I = np.zeros((R, M, K))
    arm = np.zeros((R, M), dtype=np.int64)
    streak = np.zeros((R, M), dtype=np.int64)
    remaining = np.zeros((R, M), dtype=np.int64)
    rec = _Recorder(c.cps, R)
    cum = np.zeros(R)
    n_comm = 0
    actions = np.zeros((T, R, M), dtype=np.int16) if record_actions else None
    all_flat = np.arange(R * M * K)
    counts_f = counts.reshape(-1)
    I_f = I.reshape(-1)

    def own(flat, t):
        n = counts_f[flat]
        if c.private:
            # Private sums are of the shifted items (x - low): the mean gets low back.
            m = mech.value_at(flat) / n + c.lo
        else:
            m = exact.reshape(-1)[flat] / n
        num = c.width_numerator(t)
        ro = run_of[flat]
        return _own_index(c, m, n, t, c.rho[ro], None if num is None else num[ro])

    for t in range(1, T + 1):
        if t <= K:
            arm[:] = t - 1
        else:
            comm = communicate and (t & (t - 1)) == 0
            if comm:
                # Every agent uploads its K private indices; the master averages them and
                # every agent restarts from the common index.
                I[:] = own(all_flat, t).reshape(R, M, K).mean(axis=1, keepdims=True)
                d = np.arange(R * M)
                n_comm += 1
            else:
                if t == K + 1:
                    I_f[:] = own(all_flat, t)
                d = np.flatnonzero(remaining == 0)
                if d.size:
                    # End of a block: update the played arm's index from own private data.
                    f = base.reshape(-1)[d] + arm.reshape(-1)[d]
                    I_f[f] = own(f, t)
            if d.size:
                new = I.reshape(R * M, K)[d].argmax(axis=1)
                st = np.where(new == arm.reshape(-1)[d], streak.reshape(-1)[d] + 1, 1)
                streak.reshape(-1)[d] = st
                arm.reshape(-1)[d] = new
                remaining.reshape(-1)[d] = (np.int64(1) << (st - 1)) if doubling else 1
        flat = (base + arm).reshape(-1)
        r = stream.rewards(t, arm)
        if actions is not None:
            actions[t - 1] = arm
        counts_f[flat] += 1
        if c.private:
            mech.step_flat(flat, c.clip_shift(r), rng)
        else:
            exact.reshape(-1)[flat] += r.reshape(-1)
        if t > K:
            remaining -= 1
        cum += gaps[arm].sum(axis=1)
        rec.record(t, cum, n_comm, n_comm * 2 * M)
    return BanditResult(
        "dp_master_worker_ucb" if c.private else "master_worker_ucb",
        c.cps, rec.regret, counts.astype(np.int64), rec.comm, rec.msgs, actions,
        c.info(doubling=bool(doubling), communicate=bool(communicate)),
    )


# --------------------------------------------------------------------------------------
# DP-Decentralized UCB (and non-private coop-UCB)
# --------------------------------------------------------------------------------------


def dp_decentralized_ucb(
    env,
    graph: Graph,
    horizon: int,
    epsilon,
    *,
    rng,
    n_runs: int = 1,
    kappa: float | None = None,
    rho=2.0,
    privacy_width: str = "std",
    sigma: float | None = None,
    clip=(0.0, 1.0),
    checkpoints=None,
    record_actions: bool = False,
) -> BanditResult:
    """DP-Decentralized UCB (Li, Song & Fragouli, Algorithm 2; reconstruction in the module doc).

    Parameters
    ----------
    env : BernoulliBandit or GaussianBandit
        Shared arm means (the paper assumes Gaussian rewards with known ``sigma``).
    graph : Graph
        Connected communication graph of the ``M`` agents.
    horizon : int
        Number of slots ``T >= K``.
    epsilon : float, array of shape (n_runs,), or None
        Privacy of each agent's reward stream; ``None`` gives the non-private cooperative
        UCB (coop-UCB) on the same graph, consensus on the exact reward totals.
    rng : numpy.random.Generator
        Source of randomness.
    n_runs : int
        Independent runs simulated side by side.
    kappa : float in (0, 1], optional
        Consensus step size (default ``d_max / (d_max + 1)``).
    rho : float > 1 or array of shape (n_runs,)
        Exploration parameter.
    privacy_width : {"std", "fact1", "none"}
        Privacy term of the index.
    sigma : float, optional
        Reward scale in the index (default ``env.sigma``).
    clip : (low, high)
        Clipping interval of the rewards fed to the mechanism.
    checkpoints, record_actions
        As in :func:`dp_master_worker_ucb`.

    Raises
    ------
    fedbandit.envs.graphs.DisconnectedGraphError
        If the graph is disconnected (consensus needs connectivity).
    ValueError
        If ``kappa`` is outside (0, 1] (``kappa = 0`` means no consensus at all), ``rho <= 1``
        or ``epsilon <= 0``.
    """
    if not isinstance(graph, Graph):
        raise TypeError(f"graph must be a fedbandit.envs.graphs.Graph, got {type(graph).__name__}")
    c = _Common(env, graph.n_agents, horizon, n_runs, epsilon, rho, privacy_width, sigma, clip, checkpoints)
    if kappa is not None:
        kappa = check_float_in_range("kappa", kappa, 0.0, 1.0)
        if kappa == 0.0:
            raise ValueError("kappa must lie in (0, 1] for DP-Decentralized UCB: kappa = 0 gives P = I (no consensus)")
    P = consensus_matrix(graph, kappa)  # raises on a disconnected graph
    terms = network_terms(P)
    R, M, K, T = c.R, c.M, c.K, c.T
    stream, rng = _setup(c.env, R, M, rng)
    gaps = c.env.gaps
    mech = c.mechanism((R, M, K), (R, 1, 1)) if c.private else None
    rr = np.arange(R)[:, None]
    mm = np.arange(M)[None, :]
    mech_base = (rr * M + mm) * K  # (R, M): flat index of (r, m, arm 0) in the mechanism
    rec = _Recorder(c.cps, R)
    cum = np.zeros(R)
    actions = np.zeros((T, R, M), dtype=np.int16) if record_actions else None
    pulls = np.zeros((R * M * K,), dtype=np.int64)
    n_msgs_per_slot = 2 * graph.n_edges
    # Exact averaging (P = J, e.g. the complete graph with the default kappa): every agent
    # holds the network averages, c_i = 0, so all agents compute the same index; the state
    # is then kept once per run, (R, K), instead of once per agent.
    exact_avg = bool(np.allclose(P, 1.0 / M, rtol=0.0, atol=1e-12))
    A = 1 if exact_avg else M
    c_i = (np.zeros((1, 1, 1)) if exact_avg else terms.c_i.reshape(M, 1, 1))
    c_0 = terms.c_0
    # Consensus state, agents first so that one GEMM mixes everything: NS[m, 0] = n̂,
    # NS[m, 1] = ŝ (private totals, or exact totals for coop-UCB), each (R, K).
    NS = np.zeros((A, 2, R, K))
    rho_b = c.rho.reshape(1, R, 1)
    ns0_base = ((mm * 2) * R + rr) * K  # (R, M): flat index of NS[m, 0, r, 0]
    ns1_base = ((mm * 2 + 1) * R + rr) * K
    arms = np.zeros((R, M), dtype=np.int64)
    Q = np.empty((A, R, K))
    inv = np.empty((A, R, K))
    v = np.empty((A, R, K))
    tmp = np.empty((A, R, K))
    NSf = NS.reshape(-1)
    rows = np.arange(R)

    # One slot is a (M x M) @ (M x 2RK) product: BLAS threads only add overhead here.
    with _single_thread_blas():
        for t in range(1, T + 1):
            if t <= K:
                arms[:] = t - 1
            else:
                n_hat = NS[:, 0]
                s_hat = NS[:, 1]
                # v = (n̂ + c_i) / n̂^2;  Q = ŝ/n̂ + sigma sqrt(2 rho ln t v / c_0) + nu
                # (one reciprocal, then products: divisions are the slow passes here)
                np.divide(1.0, n_hat, out=inv)
                np.add(n_hat, c_i, out=v)
                v *= inv
                v *= inv
                np.multiply(s_hat, inv, out=Q)
                if c.private and c.lo != 0.0:
                    Q += c.lo
                np.multiply(v, rho_b * (2.0 * c.sigma**2 * np.log(t) / c_0), out=tmp)
                np.sqrt(tmp, out=tmp)
                Q += tmp
                num = c.width_numerator(t)
                if num is not None:
                    # The consensus averages M independent noises: width / sqrt(c_0).
                    np.multiply(v, (num / np.sqrt(c_0)).reshape(1, R, 1), out=tmp)
                    if c.privacy_width == "std":
                        # n̂ >= 1 after the round-robin slots, so frexp's exponent is
                        # floor(log2 n̂) + 1: index the shifted table directly.
                        tmp *= _G_SHIFTED[np.frexp(n_hat)[1]]
                    Q += tmp
                if exact_avg:
                    arms = np.broadcast_to(Q[0].argmax(axis=1)[:, None], (R, M))
                else:
                    arms = Q.argmax(axis=2).T  # (R, M)
            r = stream.rewards(t, arms)
            if actions is not None:
                actions[t - 1] = arms
            f = (mech_base + arms).reshape(-1)
            pulls[f] += 1
            if c.private:
                inc = mech.step_flat_increment(f, c.clip_shift(r), rng)
            else:
                inc = r.reshape(-1)
            if exact_avg:
                a = arms[:, 0]
                NS[0, 0, rows, a] += 1.0
                NS[0, 1, rows, a] += inc.reshape(R, M).sum(axis=1) / M
            else:
                NSf[(ns0_base + arms).reshape(-1)] += 1.0
                NSf[(ns1_base + arms).reshape(-1)] += inc
                NS = (P @ NS.reshape(M, -1)).reshape(M, 2, R, K)
                NSf = NS.reshape(-1)
            cum += gaps[arms].sum(axis=1)
            rec.record(t, cum, t, t * n_msgs_per_slot)
    return BanditResult(
        "dp_decentralized_ucb" if c.private else "coop_ucb",
        c.cps, rec.regret, pulls.reshape(R, M, K), rec.comm, rec.msgs, actions,
        c.info(graph=graph.name, kappa=kappa, lambda_2=terms.lambda_2, epsilon_n=terms.epsilon_n,
               c_i=terms.c_i.tolist(), c_0=terms.c_0, n_edges=graph.n_edges, exact_averaging=exact_avg),
    )


# --------------------------------------------------------------------------------------
# Baselines
# --------------------------------------------------------------------------------------


def _independent_ucb(env, n_agents, horizon, epsilon, *, rng, n_runs, rho, privacy_width, sigma, clip, checkpoints,
                     record_actions, name):
    c = _Common(env, n_agents, horizon, n_runs, epsilon, rho, privacy_width, sigma, clip, checkpoints)
    R, M, K, T = c.R, c.M, c.K, c.T
    stream, rng = _setup(c.env, R, M, rng)
    gaps = c.env.gaps
    counts = np.zeros((R, M, K))
    sums = np.zeros((R, M, K))  # private outputs (kept in sync) or exact sums
    mech = c.mechanism((R, M, K), (R, 1, 1)) if c.private else None
    rho_b = c.rho.reshape(R, 1, 1)
    base = (np.arange(R)[:, None] * M + np.arange(M)[None, :]) * K
    g_own = np.full((R, M, K), _G[0])  # g(floor(log2 n)) of the counts, updated incrementally
    rec = _Recorder(c.cps, R)
    cum = np.zeros(R)
    actions = np.zeros((T, R, M), dtype=np.int16) if record_actions else None
    arms = np.zeros((R, M), dtype=np.int64)
    for t in range(1, T + 1):
        if t <= K:
            arms[:] = t - 1
        else:
            Q = sums / counts
            if c.private and c.lo != 0.0:
                Q += c.lo
            Q += c.sigma * np.sqrt(2.0 * rho_b * np.log(t) / counts)
            num = c.width_numerator(t)
            if num is not None:
                if c.privacy_width == "fact1":
                    Q += num.reshape(R, 1, 1) / counts
                else:
                    Q += num.reshape(R, 1, 1) * g_own / counts
            arms = Q.argmax(axis=2)
        r = stream.rewards(t, arms)
        if actions is not None:
            actions[t - 1] = arms
        f = (base + arms).reshape(-1)
        counts.reshape(-1)[f] += 1
        if c.private:
            sums.reshape(-1)[f] = mech.step_flat(f, c.clip_shift(r), rng)
            g_own.reshape(-1)[f] = _G[floor_log2(mech._count[f])]
        else:
            sums.reshape(-1)[f] += r.reshape(-1)
        cum += gaps[arms].sum(axis=1)
        rec.record(t, cum, 0, 0)
    return BanditResult(name, c.cps, rec.regret, counts.astype(np.int64), rec.comm, rec.msgs, actions, c.info())


def ucb(env, n_agents: int, horizon: int, *, rng, n_runs: int = 1, rho: float = 2.0, sigma: float | None = None,
        checkpoints=None, record_actions: bool = False) -> BanditResult:
    """``M`` independent single-agent UCB learners: index ``ȳ + sigma sqrt(2 rho ln t / n)``.

    With ``sigma = 1/2`` and ``rho = 4`` this is UCB1 (Auer et al. 2002).  Regret summed
    over the agents.
    """
    return _independent_ucb(env, n_agents, horizon, None, rng=rng, n_runs=n_runs, rho=rho, privacy_width="none",
                            sigma=sigma, clip=(0.0, 1.0), checkpoints=checkpoints, record_actions=record_actions,
                            name="ucb")


def private_ucb(env, n_agents: int, horizon: int, epsilon: float, *, rng, n_runs: int = 1, rho: float = 2.0,
                privacy_width: str = "std", sigma: float | None = None, clip=(0.0, 1.0), checkpoints=None,
                record_actions: bool = False) -> BanditResult:
    """``M`` independent single-agent private UCB learners (hybrid-mechanism sums).

    The index of :func:`dp_master_worker_ucb` recomputed every slot, without communication
    or doubling (the DP-UCB of Tossou & Dimitrakakis 2016 / Mishra & Thakurta 2015 family).
    """
    if epsilon is None:
        raise ValueError("epsilon must be a positive float for private_ucb (use ucb for the non-private one)")
    return _independent_ucb(env, n_agents, horizon, epsilon, rng=rng, n_runs=n_runs, rho=rho,
                            privacy_width=privacy_width, sigma=sigma, clip=clip, checkpoints=checkpoints,
                            record_actions=record_actions, name="private_ucb")


def centralized_ucb(env, n_agents: int, horizon: int, *, rng, n_runs: int = 1, rho: float = 2.0,
                    sigma: float | None = None, checkpoints=None, record_actions: bool = False) -> BanditResult:
    """A central learner that sees all ``M T`` samples (no privacy, no communication cost).

    Every slot all ``M`` agents play the arm of largest pooled index
    ``Ȳ_j + sigma sqrt(2 rho ln(M t) / N_j)`` (``N_j`` pooled pulls; ``M t`` samples seen),
    and the ``M`` rewards are pooled.
    """
    env = _check_env(env)
    M = check_positive_int("n_agents", n_agents)
    K = env.n_arms
    T = check_int_in_range("horizon", horizon, K, None)
    R = check_positive_int("n_runs", n_runs)
    rho = _per_run("rho", rho, R, _check_rho_value)
    sigma = env.sigma if sigma is None else check_positive_float("sigma", sigma)
    cps = _check_checkpoints(checkpoints, T)
    stream, rng = _setup(env, R, M, rng)
    gaps = env.gaps
    N = np.zeros((R, K))
    S = np.zeros((R, K))
    rec = _Recorder(cps, R)
    cum = np.zeros(R)
    actions = np.zeros((T, R, M), dtype=np.int16) if record_actions else None
    rows = np.arange(R)
    for t in range(1, T + 1):
        if t <= K:
            a = np.full(R, t - 1)
        else:
            a = (S / N + sigma * np.sqrt(2.0 * rho[:, None] * np.log(M * t) / N)).argmax(axis=1)
        arms = np.broadcast_to(a[:, None], (R, M))
        r = stream.rewards(t, arms)
        if actions is not None:
            actions[t - 1] = arms
        N[rows, a] += M
        S[rows, a] += r.sum(axis=1)
        cum += M * gaps[a]
        rec.record(t, cum, 0, 0)
    pulls = np.zeros((R, M, K), dtype=np.int64)
    pulls[:] = (N / M).astype(np.int64)[:, None, :]
    return BanditResult("centralized_ucb", cps, rec.regret, pulls, rec.comm, rec.msgs, actions,
                        {"n_agents": M, "horizon": T, "n_runs": R, "rho": rho.tolist(), "sigma": sigma,
                         "means": env.means.tolist()})


# --------------------------------------------------------------------------------------
# Experiment-runner entry point
# --------------------------------------------------------------------------------------

ALGORITHMS = ("master_worker", "decentralized", "coop_ucb", "ucb", "private_ucb", "centralized_ucb")


def run_config(config: dict, rng) -> dict:
    """Run one configuration (the ``func`` of :func:`fedbandit.experiments.grid.run_grid`).

    Keys: ``algorithm`` (one of :data:`ALGORITHMS`), ``means``, ``env`` (``"bernoulli"``
    or ``"gaussian"``), ``env_sigma``, ``n_agents``, ``horizon``, ``n_runs``, ``epsilons``
    (list; or ``epsilon``, a number or None), ``rhos`` (list; or ``rho``),
    ``privacy_width``, ``topology`` (with ``er_p`` and ``graph_seed`` for Erdős–Rényi),
    ``kappa``, ``doubling``, ``communicate``, ``n_checkpoints``.  Missing keys take the
    functions' defaults.

    Every (epsilon, rho) pair gets ``n_runs`` runs, all simulated in one vectorized call
    (per-run epsilon and rho), which amortizes the per-slot overhead of a sweep.

    Returns
    -------
    dict
        :meth:`BanditResult.to_dict` with ``regret`` reshaped to
        ``(n_epsilons, n_rhos, n_runs, n_checkpoints)`` and ``pulls`` to
        ``(n_epsilons, n_rhos, n_runs, M, K)``, plus ``epsilons`` and ``rhos``.
    """
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    alg = check_choice("algorithm", config.get("algorithm"), ALGORITHMS)
    env = make_env(config.get("env", "bernoulli"), config["means"], sigma=config.get("env_sigma", 0.1))
    M = config["n_agents"]
    T = config["horizon"]
    n_runs = config.get("n_runs", 1)
    eps_list = list(config["epsilons"]) if "epsilons" in config else [config.get("epsilon")]
    rho_list = list(config["rhos"]) if "rhos" in config else [config.get("rho", 2.0)]
    private = alg in ("master_worker", "decentralized", "private_ucb") and eps_list != [None]
    if private and any(e is None for e in eps_list):
        raise ValueError("epsilons must all be numbers for a private algorithm (None only alone)")
    nE, nP = len(eps_list), len(rho_list)
    R = nE * nP * n_runs
    eps_runs = np.repeat(np.asarray(eps_list, dtype=float), nP * n_runs) if private else None
    rho_runs = np.tile(np.repeat(np.asarray(rho_list, dtype=float), n_runs), nE)
    common = dict(rng=rng, n_runs=R, rho=rho_runs, checkpoints=default_checkpoints(T, config.get("n_checkpoints", 60)))
    pw = config.get("privacy_width", "std")
    if alg == "master_worker":
        res = dp_master_worker_ucb(env, M, T, eps_runs, privacy_width=pw, doubling=config.get("doubling", True),
                                   communicate=config.get("communicate", True), **common)
    elif alg in ("decentralized", "coop_ucb"):
        g = make_graph(config.get("topology", "complete"), M, p=config.get("er_p", 0.3),
                       rng=np.random.default_rng(config.get("graph_seed", 0)))
        res = dp_decentralized_ucb(env, g, T, eps_runs if alg == "decentralized" else None,
                                   kappa=config.get("kappa"), privacy_width=pw, **common)
    elif alg == "ucb":
        res = ucb(env, M, T, **common)
    elif alg == "private_ucb":
        res = private_ucb(env, M, T, eps_runs, privacy_width=pw, **common)
    else:
        res = centralized_ucb(env, M, T, **common)
    out = res.to_dict()
    out["regret"] = out["regret"].reshape(nE, nP, n_runs, -1)
    out["pulls"] = out["pulls"].reshape(nE, nP, n_runs, M, env.n_arms)
    out["epsilons"] = eps_list
    out["rhos"] = rho_list
    return out

"""Federated private UCB of Li, Song & Fragouli: master-worker and decentralized (consensus).

Implements, vectorized over ``(runs, agents)``, the two algorithms of
{cite}`li2022federated` and the baselines the book compares them with, each a learner
class taking a counter protocol (``fedbandit.protocols.create("counter-hybrid", epsilon=...)``,
:mod:`fedbandit.protocols.counting`):

* :class:`MasterWorkerUCB` (``"master-worker"``) -- DP-Master-worker UCB (their Algorithm 1);
* :class:`DecentralizedUCB` (``"decentralized"``) -- DP-Decentralized UCB (their
  Algorithm 2), running consensus with ``P = I - (kappa/d_max) L`` on a communication
  graph; with the exact counter (``"counter-exact"``) it is the non-private cooperative
  UCB (coop-UCB of Landgren, Srivastava & Leonard 2016) on the same graph;
* :class:`IndependentUCB` (``"independent-ucb"``) -- ``M`` independent single agents
  (UCB1-style with the exact counter, private UCB with a private one);
* :class:`CentralizedUCB` (``"centralized-ucb"``) -- one learner seeing all ``M T``
  samples (all agents share raw data every slot and play the pooled UCB arm); no protocol.

Every reward is the private datum (the paper's privacy unit): each (agent, arm) reward
stream goes through its own continual counter (the protocol's randomizer; the paper's is
the hybrid mechanism, :class:`fedbandit.mechanisms.continual_counting.HybridMechanism`),
and everything an agent sends or acts on is computed from the counter's outputs (and the
pull counts, which the paper does not protect), so each agent's reward sequence is
epsilon-DP by post-processing (their Theorems 1 and 3): the run's accounting is the
protocol's (:meth:`fedbandit.protocols.CounterProtocol.accounting`).

Reconstructions (the paper's algorithm boxes and index formulas are not available; each is
marked [derived] and shown against its alternatives in the chapter):

* Index of agent ``i`` for arm ``j`` (master-worker, own data):
  ``X̂ + sigma sqrt(2 rho ln t / n) + nu``, with ``X̂ = s̃/n`` the private mean and ``nu``
  the *privacy width* (``privacy_width=``): ``"fact1"`` = Fact 1's error bound
  ``(1/eps) (log2 t)^{1.5} ln(1/delta_t)`` at ``delta_t = t^{-rho}`` divided by ``n``
  (hybrid mechanism only); ``"std"`` = ``sqrt(2 rho ln t)`` times an upper bound on the
  counter noise's standard deviation at the agent's own count ``n``
  (:meth:`~fedbandit.protocols.CounterProtocol.sd_factor`; for the hybrid mechanism
  :func:`~fedbandit.mechanisms.continual_counting.hybrid_sd_bound_by_level`), divided by
  ``n``; ``"none"`` = 0.
* Master-worker aggregation (``aggregate=``): ``"indices"`` (the paper's: the master averages
  the agents' indices) or ``"sums"`` ([derived], not the paper's: the master pools the
  private sums and counts, so the confidence width shrinks with the network count), and
  ``period=`` (communicate every ``period`` slots instead of at ``t = 2^p``): the chapter
  uses them to show that index averaging, not the schedule, is why master-worker
  cooperation does not beat independent agents.
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
  the change of the agent's private sum (non-zero only for the pulled arm); counts use
  eq. (5) ``n̂_j(t+1) = P (n̂_j(t) + ξ_j(t))`` unchanged.

Sweeps: ``epsilon`` (the protocol's) and ``rho`` may be one value per run, so a grid of
(epsilon, rho) pairs is one vectorized simulation; :meth:`from_config` builds it from lists
(``config["epsilon"]``, ``config["rho"]``; ``config["runs"]`` runs per pair, epsilon
outermost) and records the grid in ``RunResult.extras["grid"]`` (:func:`grid_view`
reshapes a result to it).

Common rewards across configurations: with ``config["reward_seed"]`` (:meth:`from_config`)
the rewards come from that seed and each run's replicate number within its (epsilon, rho)
cell (``RewardStream(run_keys=...)``), so two configurations of any sizes give equal rewards
to their runs of equal replicate number, and comparisons between them are paired.

Randomness: ``rng`` first yields the key of a :class:`fedbandit.envs.multi_armed.RewardStream`
(common random numbers: every algorithm sees the same rewards for a seed), then the
protocol's Laplace noise (:meth:`~fedbandit.protocols.CounterProtocol.reset` draws from
``rng`` itself), one standard variate per (run, agent) and slot in (run, agent) order.
The loop references in ``tests/reference_consensus_ucb.py`` follow the same protocol and
make the same decisions.
"""

from __future__ import annotations

import contextlib

import numpy as np

from fedbandit._validation import (
    MAX_STEPS,
    check_array,
    check_bool,
    check_choice,
    check_epsilon,
    check_float_in_range,
    check_int_array,
    check_int_in_range,
    check_positive_array,
    check_positive_float,
    check_positive_int,
    check_rng,
)
from fedbandit.accounting.accountant import account
from fedbandit.accounting.events import NonPrivateEvent
from fedbandit.envs.graphs import Graph, consensus_matrix, make_graph, network_terms
from fedbandit.envs.multi_armed import KArmedBandit, RewardStream
from fedbandit.learners.registry import register_learner, split_params
from fedbandit.learners.result import CommunicationRecord, RunResult
from fedbandit.protocols.counting import PRIVACY_WIDTH_KINDS, CounterProtocol
from fedbandit.protocols.registry import describe

__all__ = [
    "MasterWorkerUCB",
    "DecentralizedUCB",
    "IndependentUCB",
    "CentralizedUCB",
    "PRIVACY_WIDTHS",
    "default_checkpoints",
    "privacy_width_numerator",
    "expand_grid",
    "grid_view",
]


def _single_thread_blas():
    """Context limiting BLAS to one thread (threadpoolctl if installed, else a no-op)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: only a speed matter
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


#: Accepted values of ``privacy_width=``.
PRIVACY_WIDTHS = PRIVACY_WIDTH_KINDS


def default_checkpoints(horizon: int, n: int = 60) -> np.ndarray:
    """About ``n`` log-spaced slots in ``[1, horizon]``, always including ``horizon``."""
    horizon = check_positive_int("horizon", horizon, max_value=MAX_STEPS, reason="a run plays horizon slots")
    n = check_positive_int("n", n, max_value=10**6, reason="an array of n slots is built")
    pts = np.unique(np.round(np.logspace(0, np.log10(horizon), n)).astype(np.int64))
    return np.unique(np.append(pts[(pts >= 1) & (pts <= horizon)], horizon))


def _check_checkpoints(checkpoints, horizon):
    if checkpoints is None:
        return default_checkpoints(horizon)
    c = np.unique(check_int_array("checkpoints", checkpoints, low=None))
    if c.size == 0 or c.min() < 1 or c.max() > horizon:
        raise ValueError(f"checkpoints must be slots in [1, horizon={horizon}], got {checkpoints!r}")
    return c


def _check_env(env, n_arms=None):
    if not isinstance(env, KArmedBandit):
        raise TypeError(f"env must be a K-armed bandit (BernoulliBandit, GaussianBandit, CategoricalBandit), "
                        f"got {type(env).__name__}")
    if n_arms is not None and env.n_arms != n_arms:
        raise ValueError(f"environment has n_arms={env.n_arms} but the learner was built for n_arms={n_arms}")
    return env


def _check_clip(clip):
    try:
        lo, hi = (float(c) for c in clip)
    except Exception as exc:
        raise TypeError(f"clip must be a pair (low, high), got {clip!r}") from exc
    if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
        raise ValueError(f"clip must satisfy low < high (finite), got {clip!r}")
    return lo, hi


def privacy_width_numerator(kind: str, t: int, scale, rho):
    """Count-free factor of the privacy width at slot ``t`` (per run).

    ``scale`` is the protocol's :meth:`~fedbandit.protocols.CounterProtocol.width_scale`
    (scalar or per run).  ``"fact1"``: Fact 1's error bound
    ``(s/eps) (log2 t)^{1.5} ln(1/delta_t)`` at ``delta_t = t^{-rho}`` (``scale = s/eps``;
    the width is this divided by the count); ``"std"``: ``sqrt(2 rho ln t)`` times the
    noise-std scale (the width is this times the protocol's ``sd_factor(n)/n``).
    ``scale`` must be positive and ``rho`` > 1 (scalars or per-run arrays).
    """
    kind = check_choice("kind", kind, ("fact1", "std"))
    t = check_positive_int("t", t)
    scale = check_positive_array("scale", scale)
    rho = np.asarray(check_positive_array("rho", rho))
    if np.any(rho <= 1.0):
        raise ValueError(f"rho must lie in (1, inf), got {rho!r}")
    return _privacy_width_numerator(kind, t, scale, rho)


def _clip_is_noop(env, lo, hi):
    """Whether clipping ``env``'s rewards to [lo, hi] and subtracting lo returns every reward as it is:
    lo = 0 and every reward value in [0, hi], none of them -0.0 (max(-0.0, 0.0) and -0.0 - 0.0 keep
    no sign bit for sure)."""
    vals = env.reward_values
    if vals is None or lo != 0.0:
        return False
    return bool(vals.min() >= lo and vals.max() <= hi and not np.signbit(vals).any())


def _privacy_width_numerator(kind, t, scale, rho):
    """The width's numerator at slot ``t`` (R,), or at every slot of ``t`` (n,) as rows (n, R).

    The learners' fast path (arguments validated by the learner's constructor).  One formula for a
    slot and for a block of slots (:func:`_index_factors`), through the same ufuncs (``np.power``,
    not a float's ``**``, which numpy computes with its own scalar code and which may round
    otherwise than the array ``power`` on an AVX-512 host).
    """
    if np.ndim(t):
        t2 = np.maximum(t, 2).astype(np.float64).reshape(-1, 1)
    else:
        t2 = np.float64(max(t, 2))  # (a Python int of any size)
    lt = np.log(t2)
    if kind == "fact1":
        return scale * np.power(np.log2(t2), 1.5) * rho * lt
    return np.sqrt(2.0 * rho * lt) * scale


#: Slots whose index factors :func:`_index_factors` computes at once (about 90 KB per factor at R K = 700).
_FACTOR_BLOCK_FLOATS = 1 << 14


def _factor_block(R, K):
    """Slots per block of :func:`_index_factors`: about ``_FACTOR_BLOCK_FLOATS`` floats a factor, at least 1."""
    return max(1, _FACTOR_BLOCK_FLOATS // (R * K))


def _index_factors(learner, sigma, c_0, sqrt_c0, rho_rk, t0, n):
    """The decentralized index's per-run factors at slots ``t0 .. t0 + n - 1``, each (n, 1, R, K).

    ``coefs[i]`` is what ``np.multiply(rho_rk, 2 sigma^2 ln t / c_0)`` gives at ``t = t0 + i``, and
    ``widths[i]`` the privacy-width numerator (:func:`_privacy_width_numerator`) over sqrt(c_0)
    spread over the arms (None without a width): the same operations in the same order, done on
    arrays of slots (elementwise, so the same floats as slot by slot; tests/test_consensus_ucb.py
    writes the per-slot form out).
    """
    ts = np.arange(t0, t0 + n)
    scal = 2.0 * sigma**2 * np.log(ts.astype(np.float64)) / c_0  # (n,)
    coefs = np.multiply(rho_rk, scal.reshape(n, 1, 1, 1))
    widths = None
    if learner._width_scale is not None:
        num = _privacy_width_numerator(learner.privacy_width, ts, learner._width_scale, learner.rho)  # (n, R)
        R, K = rho_rk.shape[1:]
        widths = np.ascontiguousarray(np.broadcast_to((num / sqrt_c0).reshape(n, 1, R, 1), (n, 1, R, K)))
    return coefs, widths


def _run_factors(learner, t0, n):
    """The own-count indices' per-run factors at slots ``t0 .. t0 + n - 1``, each (n, R).

    ``coefs[i]`` is what ``2.0 * rho * np.log(t)`` gives at ``t = t0 + i`` (the exploration
    width's numerator, ``sigma sqrt(coef / n)``), and ``nums[i]`` the privacy-width numerator
    (:func:`_privacy_width_numerator`; None without a width): the same operations in the same order
    as slot by slot, done on arrays of slots (elementwise, so the same floats; ``np.log`` of the
    slots as float64, the ufunc loop a slot's ``np.log(t)`` runs; tests/test_consensus_ucb.py writes
    the per-slot form out).  The master-worker and independent learners read a slot's row
    (gathered by run, or spread over the agents and arms).
    """
    ts = np.arange(t0, t0 + n)
    coefs = np.multiply(2.0 * learner.rho, np.log(ts.astype(np.float64)).reshape(n, 1))
    nums = None
    if learner._width_scale is not None:
        nums = _privacy_width_numerator(learner.privacy_width, ts, learner._width_scale, learner.rho)
    return coefs, nums


class _SlotFactors:
    """Per-run factors of slot ``t`` (ascending slots), computed ``block`` slots at a time.

    ``compute(t0, n)`` gives the factors of slots ``t0 .. t0 + n - 1`` as a pair of arrays
    whose row ``i`` belongs to slot ``t0 + i`` (the second may be None: no privacy width), e.g.
    :func:`_run_factors` or :func:`_index_factors`; :meth:`at` reads a slot's rows.
    """

    def __init__(self, compute, block: int, horizon: int):
        self.compute, self.block, self.horizon = compute, block, horizon
        self.start = self.end = 0
        self.first = self.second = None

    def at(self, t):
        """The pair of factors of slot ``t`` (its rows of ``compute``'s arrays; None stays None)."""
        if not self.start <= t < self.end:
            n = max(1, min(self.block, self.horizon + 1 - t))
            self.first, self.second = self.compute(t, n)
            self.start, self.end = t, t + n
        i = t - self.start
        return self.first[i], (None if self.second is None else self.second[i])


def _own_count_factors(learner) -> _SlotFactors:
    """The master-worker and independent learners' :func:`_run_factors`, slot by slot."""
    return _SlotFactors(lambda t0, n: _run_factors(learner, t0, n), _factor_block(learner.n_runs, 1), learner.horizon)


def _per_run(name, value, R, check):
    """Scalar or (R,) array -> (R,) float array, each entry validated by ``check``."""
    if isinstance(value, (str, bytes)) or value is None:
        return np.full(R, check(name, value))
    arr = check_array(name, value, finite=False)
    if arr.ndim == 0:
        return np.full(R, check(name, float(arr)))
    if arr.shape != (R,):
        raise ValueError(f"{name} must be a scalar or an array of shape (n_runs,) = ({R},), got shape {arr.shape}")
    for v in arr:
        check(name, float(v))
    return arr.copy()


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


# --------------------------------------------------------------------------------------
# Sweeps over (epsilon, rho) in one simulation
# --------------------------------------------------------------------------------------


def _as_list(value):
    if isinstance(value, np.ndarray):
        return list(value.reshape(-1))
    return list(value) if isinstance(value, (list, tuple)) else [value]


def expand_grid(epsilon, rho, runs: int):
    """Per-run epsilon and rho for a grid of (epsilon, rho) pairs with ``runs`` runs each.

    ``epsilon`` and ``rho`` are a number or a list (``epsilon`` may be None: no privacy);
    runs are ordered epsilon-major, then rho, then run: run ``(e * n_rho + p) * runs + k``
    has ``epsilon[e]`` and ``rho[p]``.

    Returns
    -------
    eps_runs : ndarray (R,) or None
    rho_runs : ndarray (R,)
    grid : dict
        ``shape`` = (n_epsilon, n_rho, runs), ``epsilon`` and ``rho`` (the lists), ``runs``.
    """
    runs = check_positive_int("runs", runs, max_value=MAX_STEPS, reason="runs are simulated side by side")
    eps_list, rho_list = _as_list(epsilon), _as_list(rho)
    if not eps_list or not rho_list:
        raise ValueError(f"epsilon and rho must be non-empty (got epsilon={epsilon!r}, rho={rho!r})")
    if eps_list != [None] and any(e is None for e in eps_list):
        raise ValueError(f"epsilon must be all numbers or None alone, got {epsilon!r}")
    if eps_list != [None]:
        for e in eps_list:
            check_epsilon("epsilon", e)
    for r in rho_list:
        _check_rho_value("rho", r)
    if len(eps_list) * len(rho_list) * runs > MAX_STEPS:
        raise ValueError(f"the grid of {len(eps_list)} epsilon x {len(rho_list)} rho x runs={runs} runs exceeds 10^9 runs")
    nE, nP = len(eps_list), len(rho_list)
    eps_runs = None if eps_list == [None] else np.repeat(np.asarray(eps_list, dtype=float), nP * runs)
    rho_runs = np.tile(np.repeat(np.asarray(rho_list, dtype=float), runs), nE)
    grid = {"shape": (nE, nP, runs), "epsilon": [None if e is None else float(e) for e in eps_list],
            "rho": [float(r) for r in rho_list], "runs": runs}
    return eps_runs, rho_runs, grid


def grid_view(result: RunResult, values=None) -> np.ndarray:
    """``values`` (default ``result.regret``) with its run axis reshaped to the (epsilon, rho, run) grid.

    ``result.regret`` (R, n_cp) becomes (n_epsilon, n_rho, runs, n_cp); ``extras["pulls"]``
    (R, M, K) becomes (n_epsilon, n_rho, runs, M, K).
    """
    if not isinstance(result, RunResult):
        raise TypeError(f"result must be a fedbandit.learners.RunResult, got {type(result).__name__}")
    shape = tuple(result.extras.get("grid", {}).get("shape", (result.n_runs,)))
    values = result.regret if values is None else check_array("values", values, finite=False)
    if values.ndim < 1 or values.shape[0] != result.n_runs:
        raise ValueError(f"values must have the run axis first, of length {result.n_runs}, got shape {values.shape}")
    return values.reshape(shape + values.shape[1:])


def _reward_seed(config):
    """``config["reward_seed"]`` (a non-negative int) or None: see :meth:`_CounterLearner._start`."""
    seed = config.get("reward_seed")
    return None if seed is None else check_int_in_range("reward_seed", seed, 0, None)


def _grid_config(config: dict, cls, *, private_allowed=True):
    """(protocol, learner kwargs, grid) from a configuration with epsilon / rho lists."""
    for key in ("n_runs", "checkpoints"):
        if key in config:
            raise ValueError(f"config key {key!r} is set by the grid: give 'runs' (runs per (epsilon, rho) pair) "
                             "and 'n_checkpoints'")
    eps_runs, rho_runs, grid = expand_grid(config.get("epsilon"), config.get("rho", 2.0), config.get("runs", 1))
    name = config.get("protocol")
    if not private_allowed or name is None:
        protocol = None
        if eps_runs is not None or config.get("delta") is not None:
            raise ValueError(f"config has epsilon={config.get('epsilon')!r}, delta={config.get('delta')!r}, but learner "
                             f"{cls.name!r} has no privacy protocol")
        _, kw = split_params(config, cls, protocol=False)
    else:
        info = describe(name)
        if (eps_runs is not None or config.get("delta") is not None) and "epsilon" not in info.parameters:
            raise ValueError(f"config has epsilon={config.get('epsilon')!r}, delta={config.get('delta')!r}, but "
                             f"protocol {name!r} is not private")
        eps_arg = None if eps_runs is None else (float(eps_runs[0]) if grid["shape"][0] == 1 else eps_runs)
        protocol, kw = split_params(dict(config, epsilon=eps_arg), cls)
    kw["rho"] = rho_runs
    T = config["T"]
    kw["checkpoints"] = default_checkpoints(T, config.get("n_checkpoints", 60))
    kw["n_runs"] = rho_runs.size
    return protocol, kw, grid


# --------------------------------------------------------------------------------------
# Shared settings
# --------------------------------------------------------------------------------------


class _CounterLearner:
    """Validated settings shared by the learners (all checks before any work)."""

    name = "counter-learner"
    #: Read by :meth:`from_config`: rewards from this seed, common to every configuration.
    config_keys = ("reward_seed",)
    reward_seed = None

    def _setup(self, protocol, *, n_agents, n_arms, horizon, n_runs=1, rho=2.0, privacy_width="std", sigma=None,
               clip=(0.0, 1.0), checkpoints=None):
        # (not __init__: the registry reads each learner's own constructor keywords)
        if protocol is not None and not isinstance(protocol, CounterProtocol):
            raise TypeError(
                "protocol must be a fedbandit.protocols.CounterProtocol (fedbandit.protocols.create('counter-hybrid', "
                f"epsilon=...)), got {type(protocol).__name__}"
            )
        self.n_agents = check_positive_int("n_agents", n_agents, max_value=MAX_STEPS)
        self.n_arms = check_int_in_range("n_arms", n_arms, 2, MAX_STEPS)
        self.horizon = check_int_in_range("horizon", horizon, self.n_arms, MAX_STEPS, reason="a run plays horizon slots")
        self.n_runs = check_positive_int("n_runs", n_runs, max_value=MAX_STEPS)
        if self.n_runs * self.n_agents * self.n_arms > MAX_STEPS:
            raise ValueError(f"n_runs·n_agents·n_arms = {self.n_runs * self.n_agents * self.n_arms} streams exceed 10^9 "
                             f"(n_runs={self.n_runs}, n_agents={self.n_agents}, n_arms={self.n_arms})")
        self.rho = _per_run("rho", rho, self.n_runs, _check_rho_value)
        self.privacy_width = check_choice("privacy_width", privacy_width, PRIVACY_WIDTHS)
        self.sigma = None if sigma is None else check_positive_float("sigma", sigma)
        self.lo, self.hi = _check_clip(clip)
        self.checkpoints = _check_checkpoints(checkpoints, self.horizon)
        self.protocol = protocol
        self.private = False
        self._width_scale = None
        if protocol is not None:
            protocol.configure(n_agents=self.n_agents, n_arms=self.n_arms, horizon=self.horizon,
                               sensitivity=self.hi - self.lo, n_runs=self.n_runs)
            self.private = protocol.private
            self._width_scale = protocol.width_scale(self.privacy_width)
        self.grid = {"shape": (self.n_runs,), "epsilon": None, "rho": None, "runs": self.n_runs}

    def _start(self, env, rng, record_actions):
        env = _check_env(env, self.n_arms)
        rng = check_rng("rng", rng)
        check_bool("record_actions", record_actions)
        sigma = env.sigma if self.sigma is None else self.sigma
        reward_seed = getattr(self, "reward_seed", None)
        if reward_seed is None:
            stream = RewardStream(env, self.n_runs, self.n_agents, rng, n_slots=self.horizon)
        else:
            # Common random numbers across configurations: the rewards depend on the seed and
            # on each run's replicate number within its (epsilon, rho) cell only.
            stream = RewardStream(env, self.n_runs, self.n_agents, np.random.default_rng(reward_seed),
                                  run_keys=np.arange(self.n_runs) % self.grid["runs"], n_slots=self.horizon)
        if self.protocol is not None:
            self.protocol.reset(n_runs=self.n_runs, rng=rng)
        self._clip_noop = self.private and _clip_is_noop(env, self.lo, self.hi)
        return env, sigma, stream

    def clip_shift(self, r):
        """Rewards clipped to [low, high] and shifted to [0, high - low] (flat), for a private counter;
        the rewards themselves for the exact one (and for a private one when every reward value of
        the environment already lies in [0, high] with low = 0: the clip and the shift change no float)."""
        if not self.private or getattr(self, "_clip_noop", False):
            return r.reshape(-1)
        # two ufuncs: np.clip's Python wrapper costs more than the work at this size
        return np.minimum(np.maximum(r.reshape(-1), self.lo), self.hi) - self.lo

    def width_numerator(self, t):
        """Per-run privacy-width factor (R,), or None when there is no privacy width."""
        if self._width_scale is None:
            return None
        return _privacy_width_numerator(self.privacy_width, t, self._width_scale, self.rho)

    # ---------------------------------------------------------------- reports
    def accounting(self):
        """The guarantee per reward of the whole run (the protocol's: everything is post-processing)."""
        if self.protocol is None:  # pragma: no cover - CentralizedUCB overrides
            raise NotImplementedError
        return self.protocol.accounting()

    def _calibration(self, sigma, **extra) -> dict:
        out = dict(self.protocol.calibration()) if self.protocol is not None else {"protocol": "none"}
        out.update({"rho": self.rho.tolist(), "sigma": sigma, "privacy_width": self.privacy_width,
                    "clip": [self.lo, self.hi], "n_agents": self.n_agents, "horizon": self.horizon,
                    "n_runs": self.n_runs})
        out.update(extra)
        return out

    def _result(self, env, sigma, rec, pulls, actions, extras=None, calibration=None) -> RunResult:
        ex = {"pulls": pulls, "communications": rec.comm, "messages": rec.msgs, "grid": dict(self.grid),
              "means": env.means.tolist()}
        if self.protocol is not None and self.private:
            ex["accounting_by_epsilon"] = {e: a.as_dict() for e, a in self.protocol.accounting_by_epsilon().items()}
        if actions is not None:
            ex["actions"] = actions
        ex.update(extras or {})
        comm = self.protocol.communication if self.protocol is not None else None
        return RunResult(
            t=self.checkpoints.copy(),
            regret=rec.regret,
            communication=CommunicationRecord.of(comm) if comm is not None else CommunicationRecord(),
            accounting=self.accounting(),
            calibration=calibration if calibration is not None else self._calibration(sigma),
            noise_variance=self.protocol.max_noise_variance() if self.protocol is not None else 0.0,
            extras=ex,
            learner=self.name,
            protocol=self.protocol.name if self.protocol is not None else "none",
        )

    @classmethod
    def _from_grid(cls, config, env, **structural):
        protocol, kw, grid = _grid_config(config, cls)
        learner = cls(protocol, n_agents=config["M"], n_arms=env.n_arms, horizon=config["T"], **structural, **kw)
        learner.grid = grid
        learner.reward_seed = _reward_seed(config)
        return learner


def _sum_over_agents(up, axis, buf, out=None):
    """``np.add.reduce(up, axis=axis)`` for the agents' axis ``axis`` of ``up`` (not the last), the same floats.

    numpy adds over a middle axis agent by agent (no pairwise blocks: the agents are not the inner
    loop), with a K-long inner loop per (run, arm); this adds the same terms in the same order over
    an agents-first copy ``buf`` (shape: ``up``'s with that axis moved first), one contiguous pass
    per agent.  tests/test_consensus_ucb.py compares it with the plain sum and mean.
    """
    np.copyto(buf, np.moveaxis(up, axis, 0))
    return np.add.reduce(buf, axis=0, out=out)


def _own_index(learner, sigma, sums_over_n, n, coef_e, num_e):
    """Own index ``X̂ + sigma sqrt(2 rho ln t / n) + nu`` for flat entries (1-D arrays), or for every
    entry ((R, M K) arrays with (R, 1) factors: elementwise the same expression).

    ``coef_e`` is each entry's ``2 rho ln t`` and ``num_e`` its privacy-width numerator (None
    without a width), their runs' rows of :func:`_run_factors`.  The counts ``n`` are integers
    >= 1, where the protocol's ``sd_factor_float`` is its ``sd_factor`` (one shift of the bits
    instead of a floor log2 for the hybrid bound).
    """
    idx = sums_over_n + sigma * np.sqrt(coef_e / n)
    if num_e is not None:
        if learner.privacy_width == "fact1":
            idx = idx + num_e / n
        else:
            idx = idx + num_e * learner.protocol.sd_factor_float(n) / n
    return idx


# --------------------------------------------------------------------------------------
# DP-Master-worker UCB
# --------------------------------------------------------------------------------------


@register_learner("master-worker", family="counter")
class MasterWorkerUCB(_CounterLearner):
    """DP-Master-worker UCB (Li, Song & Fragouli, Algorithm 1; reconstruction in the module doc).

    Parameters
    ----------
    protocol : CounterProtocol
        The agents' counters (``create("counter-hybrid", epsilon=...)``, the paper's;
        ``"counter-exact"`` runs the same schedule on exact sums), configured by this
        constructor.  Its epsilon may be one value per run.
    n_agents : int
        Number of agents ``M``.
    n_arms : int
        Number of arms ``K`` (checked against the environment).
    horizon : int
        Number of slots ``T`` (``T >= K``).
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
    aggregate : {"indices", "sums"}
        What the master aggregates.  ``"indices"`` (the paper's: "the central node averages
        all the private indices") averages the agents' indices, each computed from the
        agent's own count.  ``"sums"`` [derived, not the paper's] pools the agents' private
        sums and counts instead: at a communication every agent receives the network totals
        and, until the next one, indexes arm ``j`` by
        ``S/N + sigma sqrt(2 rho ln t / N) + nu`` with ``S`` and ``N`` the totals of the last
        communication in which its own entries are replaced by its current private sum and
        count, and ``nu`` the privacy width of a sum of ``M`` streams (``"std"``: the
        root-sum-square of the streams' noise-std bounds; ``"fact1"``: ``sqrt(M)`` times
        one stream's bound) over ``N``.  The chapter uses it to show why index averaging
        does not pool samples.
    period : int, optional
        Communicate every ``period`` slots instead of at ``t = 2^p`` (default None: the
        paper's schedule).
    clip : (low, high)
        Rewards are clipped to this interval before a private counter (sensitivity
        ``high - low``).
    checkpoints : array of int, optional
        Slots at which to record regret (default :func:`default_checkpoints`).
    """

    name = "master-worker"

    def __init__(self, protocol, *, n_agents, n_arms, horizon, n_runs=1, rho=2.0, privacy_width="std", sigma=None,
                 doubling=True, communicate=True, aggregate="indices", period=None, clip=(0.0, 1.0),
                 checkpoints=None):
        if protocol is None:
            raise TypeError("protocol must be a fedbandit.protocols.CounterProtocol, got None")
        self.aggregate = check_choice("aggregate", aggregate, ("indices", "sums"))
        self.period = None if period is None else check_positive_int("period", period)
        self._setup(protocol, n_agents=n_agents, n_arms=n_arms, horizon=horizon, n_runs=n_runs, rho=rho,
                         privacy_width=privacy_width, sigma=sigma, clip=clip, checkpoints=checkpoints)
        self.doubling = check_bool("doubling", doubling)
        self.communicate = check_bool("communicate", communicate)

    def run(self, env, rng, *, record_actions: bool = False) -> RunResult:
        """Play ``horizon`` slots on ``env`` for all runs at once.

        ``record_actions=True`` keeps every arm played, ``extras["actions"]`` (T, R, M).
        Extras: ``pulls`` (R, M, K), ``communications`` and ``messages`` (cumulative, at
        the checkpoints), ``grid``, ``accounting_by_epsilon``.
        """
        env, sigma, stream = self._start(env, rng, record_actions)
        proto = self.protocol
        R, M, K, T = self.n_runs, self.n_agents, self.n_arms, self.horizon
        gaps = env.gaps
        counts = np.zeros((R, M, K))
        run_of = np.repeat(np.arange(R), M * K)  # run of every flat (r, m, j) entry
        base = (np.arange(R)[:, None] * M + np.arange(M)[None, :]) * K  # flat (r, m, 0)
        ucb = np.zeros((R, M, K))
        arm = np.zeros((R, M), dtype=np.int64)
        streak = np.zeros((R, M), dtype=np.int64)
        remaining = np.zeros((R, M), dtype=np.int64)
        rec = _Recorder(self.checkpoints, R)
        cum = np.zeros(R)
        actions = np.zeros((T, R, M), dtype=np.int16) if record_actions else None
        all_flat = np.arange(R * M * K)
        all_agents = np.arange(R * M)
        counts_f = counts.reshape(-1)
        ucb_f = ucb.reshape(-1)
        doubling, lo = self.doubling, self.lo
        # 2 rho ln t and the width's numerator per run, a block of slots at a time (the same floats)
        factors = _own_count_factors(self)

        def own(flat, t):
            n = counts_f.take(flat)
            if self.private:
                # Private sums are of the shifted items (x - low): the mean gets low back.
                m = proto.value_at(flat) / n + lo
            else:
                m = proto.value_at(flat) / n
            coef, num = factors.at(t)
            ro = run_of.take(flat)
            return _own_index(self, sigma, m, n, coef.take(ro), None if num is None else num.take(ro))

        def own_all(t):
            # own(all_flat, t): the same expression for every entry, with the runs' factors broadcast
            # over their (agent, arm) entries instead of gathered, and the counts read in place.
            n = counts.reshape(R, M * K)
            m = proto.value_at(all_flat).reshape(R, M * K) / n
            if self.private:
                m += lo
            coef, num = factors.at(t)
            return _own_index(self, sigma, m, n, coef.reshape(R, 1), None if num is None else num.reshape(R, 1))

        pooled = self.aggregate == "sums"
        if pooled:
            # Network totals of the last communication (R, 1, K) and each agent's own entries
            # in them (R, M, K): sums, counts and squared noise-std bounds.
            # Before the first communication both are zero: an agent indexes by its own data.
            tot = np.zeros((3, R, 1, K))
            mine = np.zeros((3, R, M, K))
            g2 = np.zeros(R * M * K)  # squared std factor of every stream at its count
            pool_bufs = (np.empty((R, M, K)), np.empty((R, M, K)), np.empty((R, M, K)))  # S, N, a term
            sqrt_m = [1.0]  # sqrt of the number of streams in a total (M after a communication)

        def pooled_index(flat, t):
            # Index of flat entries (r, m, j) from the totals with the agent's own entries current.
            r_, rest = np.divmod(flat, M * K)
            j_ = rest % K
            own_s, own_n = proto.value_at(flat), counts_f[flat]
            S = tot[0, r_, 0, j_] - mine[0].reshape(-1)[flat] + own_s
            N = tot[1, r_, 0, j_] - mine[1].reshape(-1)[flat] + own_n
            coef, num = factors.at(t)
            idx = S / N + (lo if self.private else 0.0) + sigma * np.sqrt(coef[r_] / N)
            if num is not None:
                if self.privacy_width == "fact1":
                    idx = idx + num[r_] * sqrt_m[0] / N
                else:
                    V = tot[2, r_, 0, j_] - mine[2].reshape(-1)[flat] + g2[flat]
                    idx = idx + num[r_] * np.sqrt(np.maximum(V, 0.0)) / N
            return idx

        def pooled_index_all(t, own_s=None):
            # pooled_index(all_flat, t) by broadcasting (R, 1, K) totals against (R, M, K) entries:
            # the same expression for every entry, without the gathers, term by term into the
            # buffers (the same operations in the same order), the index into ucb.  own_s: the
            # private sums (R, M, K) when the caller has just read them (a communication's upload).
            if own_s is None:
                own_s = proto.value_at(all_flat).reshape(R, M, K)
            S, N, w = pool_bufs
            q = ucb  # (the index is written into ucb)
            np.subtract(tot[0], mine[0], out=S)
            S += own_s
            np.subtract(tot[1], mine[1], out=N)
            N += counts
            coef, num = factors.at(t)
            # q = S / N + low + sigma sqrt(2 rho ln t / N)
            np.divide(S, N, out=q)
            q += lo if self.private else 0.0
            np.divide(coef.reshape(R, 1, 1), N, out=w)
            np.sqrt(w, out=w)
            np.multiply(sigma, w, out=w)
            q += w
            if num is not None:
                num_b = num.reshape(R, 1, 1)
                if self.privacy_width == "fact1":
                    np.divide(num_b * sqrt_m[0], N, out=w)
                else:
                    # + num sqrt(max(V, 0)) / N, V the pooled squared std factors
                    np.subtract(tot[2], mine[2], out=w)
                    w += g2.reshape(R, M, K)
                    np.maximum(w, 0.0, out=w)
                    np.sqrt(w, out=w)
                    np.multiply(num_b, w, out=w)
                    w /= N
                q += w

        index = pooled_index if pooled else own
        period = self.period
        by_agent_buf = np.empty((M, 3, R, K) if pooled else (M, R, K))

        for t in range(1, T + 1):
            if t <= K:
                arm[:] = t - 1
            else:
                comm = self.communicate and ((t & (t - 1)) == 0 if period is None else t % period == 0)
                if comm and pooled:
                    # Every agent uploads its K private sums and counts; the master sums them and
                    # broadcasts the totals (M uploads, M broadcasts of 2K floats, or 3K with the
                    # noise-std bounds of the "std" width).
                    width = 3 if self.privacy_width == "std" and self.private else 2
                    own_s = proto.value_at(all_flat).reshape(R, M, K)
                    np.stack([own_s, counts, g2.reshape(R, M, K)], out=mine)  # sent from the agents' records
                    up = proto.communicate(mine, n_messages=2 * M, payload=2 * M * width * K)
                    if up is not mine:
                        mine[:] = up
                    _sum_over_agents(up, 2, by_agent_buf, out=tot[:, :, 0, :])  # up.sum(axis=2, keepdims=True)
                    sqrt_m[0] = np.sqrt(M)
                    pooled_index_all(t, own_s)  # (the sums just read: nothing released since)
                    d = all_agents
                elif comm:
                    # Every agent uploads its K private indices; the master averages them and
                    # every agent restarts from the common index (M uploads, M broadcasts).
                    up = proto.communicate(own_all(t).reshape(R, M, K), n_messages=2 * M, payload=2 * M * K)
                    # up.mean(axis=1, keepdims=True): the sum over the agents, then divided by their number
                    ucb[:] = (_sum_over_agents(up, 1, by_agent_buf) / M)[:, None, :]
                    d = all_agents
                else:
                    if t == K + 1:
                        if pooled:
                            pooled_index_all(t)
                        else:
                            ucb_f[:] = own_all(t).reshape(-1)
                    d = (remaining == 0).reshape(-1).nonzero()[0]  # np.flatnonzero without its Python wrapper
                    if d.size:
                        # End of a block: update the played arm's index from own private data.
                        f = base.reshape(-1).take(d) + arm.reshape(-1).take(d)
                        ucb_f[f] = index(f, t)
                if d.size:
                    # (every agent after a communication: no copy of the index rows)
                    new = (ucb.reshape(R * M, K) if d is all_agents else ucb.reshape(R * M, K).take(d, axis=0)).argmax(axis=1)
                    st = np.where(new == arm.reshape(-1).take(d), streak.reshape(-1).take(d) + 1, 1)
                    streak.reshape(-1)[d] = st
                    arm.reshape(-1)[d] = new
                    remaining.reshape(-1)[d] = (np.int64(1) << (st - 1)) if doubling else 1
            flat = (base + arm).reshape(-1)
            r = stream.rewards_unchecked(t, arm)
            if actions is not None:
                actions[t - 1] = arm
            n_flat = counts_f.take(flat)
            n_flat += 1
            counts_f[flat] = n_flat
            proto.release(flat, self.clip_shift(r))
            if pooled and self.private and self.privacy_width == "std":
                g2[flat] = proto.sd_factor_float(n_flat) ** 2  # counts >= 1: equal to sd_factor's
            if t > K:
                remaining -= 1
            cum += np.add.reduce(gaps[arm], axis=1)  # ndarray.sum without its Python wrapper
            rec.record(t, cum, proto.communication.rounds, proto.communication.messages)
        return self._result(env, sigma, rec, counts.astype(np.int64), actions,
                            calibration=self._calibration(sigma, doubling=self.doubling,
                                                          communicate=self.communicate, aggregate=self.aggregate,
                                                          period=self.period))

    @classmethod
    def from_config(cls, config: dict, env):
        """Build from a configuration (see :func:`fedbandit.experiments.run_config`).

        ``protocol`` (a counter protocol), ``M``, ``T``, ``runs`` (per (epsilon, rho)
        pair), ``epsilon`` and ``rho`` (numbers or lists: the grid, simulated in one call),
        ``n_checkpoints`` (default 60, log-spaced) and the constructor's keywords by name.
        """
        return cls._from_grid(config, env)


# --------------------------------------------------------------------------------------
# DP-Decentralized UCB (and non-private coop-UCB)
# --------------------------------------------------------------------------------------


@register_learner("decentralized", family="counter")
class DecentralizedUCB(_CounterLearner):
    """DP-Decentralized UCB (Li, Song & Fragouli, Algorithm 2; reconstruction in the module doc).

    With ``protocol=create("counter-exact")`` it is the non-private coop-UCB on the same
    graph (consensus on the exact reward totals).

    Parameters
    ----------
    protocol : CounterProtocol
        The agents' counters (their private sums' changes enter the consensus).
    graph : Graph
        Connected communication graph of the ``M`` agents.
    n_arms, horizon, n_runs, rho, privacy_width, sigma, clip, checkpoints
        As in :class:`MasterWorkerUCB` (the paper assumes Gaussian rewards with known
        ``sigma``; private counters need the rewards clipped to ``clip``).
    kappa : float in (0, 1], optional
        Consensus step size (default ``d_max / (d_max + 1)``).

    Raises
    ------
    fedbandit.envs.graphs.DisconnectedGraphError
        If the graph is disconnected (consensus needs connectivity).
    ValueError
        If ``kappa`` is outside (0, 1] (``kappa = 0`` means no consensus at all) or
        ``rho <= 1``.
    """

    name = "decentralized"
    config_keys = ("topology", "er_p", "graph_seed", "reward_seed")

    def __init__(self, protocol, *, graph, n_arms, horizon, n_runs=1, kappa=None, rho=2.0, privacy_width="std",
                 sigma=None, clip=(0.0, 1.0), checkpoints=None):
        if protocol is None:
            raise TypeError("protocol must be a fedbandit.protocols.CounterProtocol, got None")
        if not isinstance(graph, Graph):
            raise TypeError(f"graph must be a fedbandit.envs.graphs.Graph, got {type(graph).__name__}")
        if kappa is not None:
            kappa = check_float_in_range("kappa", kappa, 0.0, 1.0)
            if kappa == 0.0:
                raise ValueError("kappa must lie in (0, 1] for DP-Decentralized UCB: kappa = 0 gives P = I (no consensus)")
        self.graph = graph
        self.kappa = kappa
        self.P = consensus_matrix(graph, kappa)  # raises on a disconnected graph
        self.terms = network_terms(self.P)
        self._setup(protocol, n_agents=graph.n_agents, n_arms=n_arms, horizon=horizon, n_runs=n_runs, rho=rho,
                         privacy_width=privacy_width, sigma=sigma, clip=clip, checkpoints=checkpoints)

    def run(self, env, rng, *, record_actions: bool = False) -> RunResult:
        """Play ``horizon`` slots on ``env`` for all runs at once (extras as :meth:`MasterWorkerUCB.run`,
        plus ``network``: the graph's consensus terms)."""
        env, sigma, stream = self._start(env, rng, record_actions)
        proto, P, terms, graph = self.protocol, self.P, self.terms, self.graph
        R, M, K, T = self.n_runs, self.n_agents, self.n_arms, self.horizon
        gaps = env.gaps
        rr = np.arange(R)[:, None]
        mm = np.arange(M)[None, :]
        mech_base = (rr * M + mm) * K  # (R, M): flat index of (r, m, arm 0) in the protocol
        rec = _Recorder(self.checkpoints, R)
        cum = np.zeros(R)
        actions = np.zeros((T, R, M), dtype=np.int16) if record_actions else None
        pulls = np.zeros((R * M * K,), dtype=np.int64)
        n_msgs_per_slot = 2 * graph.n_edges
        payload_per_slot = n_msgs_per_slot * 2 * K  # each message: n̂ and ŝ of the K arms
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
        NS_next = np.empty_like(NS)
        rho_b = self.rho.reshape(1, R, 1)
        ns0_base = ((mm * 2) * R + rr) * K  # (R, M): flat index of NS[m, 0, r, 0]
        ns1_base = ((mm * 2 + 1) * R + rr) * K
        arms = np.zeros((R, M), dtype=np.int64)
        arms_rm = np.empty((R, M), dtype=np.int64)  # exact averaging: the run's arm for every agent
        regret_arms = None
        Q = np.empty((A, R, K))
        inv = np.empty((A, R, K))
        v = np.empty((A, R, K))
        tmp = np.empty((A, R, K))
        n_hat = np.empty((A, R, K))  # n̂, contiguous: read three times a slot (a strided read costs more)
        NSf = NS.reshape(-1)
        rows_k = np.arange(R) * K  # exact averaging: flat index of NS[0, 0, r, 0]
        shift_lo = self.private and self.lo != 0.0
        std_width = self.privacy_width == "std"
        # Per-run factors of the index spread over the arms, (1, R, K): multiplying the (A, R, K)
        # terms by a (1, R, 1) factor runs numpy's inner loop over K = 10 entries at a time, by a
        # contiguous (1, R, K) one over R K (the same products).
        rho_rk = np.ascontiguousarray(np.broadcast_to(rho_b, (1, R, K)))
        sqrt_c0 = np.sqrt(c_0)
        # The index's per-run factors depend on the slot only: _index_factors computes them for a
        # block of slots at once (the same floats as slot by slot), and a slot reads its rows.
        factors = _SlotFactors(lambda t0, n: _index_factors(self, sigma, c_0, sqrt_c0, rho_rk, t0, n),
                               _factor_block(R, K), T)
        has_width = self._width_scale is not None

        # One slot is a (M x M) @ (M x 2RK) product: BLAS threads only add overhead here.
        with _single_thread_blas():
            for t in range(1, T + 1):
                if t <= K:
                    arms[:] = t - 1
                else:
                    np.copyto(n_hat, NS[:, 0])
                    s_hat = NS[:, 1]
                    # v = (n̂ + c_i) / n̂^2;  Q = ŝ/n̂ + sigma sqrt(2 rho ln t v / c_0) + nu
                    # (one reciprocal, then products: divisions are the slow passes here)
                    np.divide(1.0, n_hat, out=inv)
                    np.add(n_hat, c_i, out=v)
                    v *= inv
                    v *= inv
                    np.multiply(s_hat, inv, out=Q)
                    if shift_lo:
                        Q += self.lo
                    coef, width = factors.at(t)
                    np.multiply(v, coef, out=tmp)
                    np.sqrt(tmp, out=tmp)
                    Q += tmp
                    if has_width:
                        # The consensus averages M independent noises: width / sqrt(c_0).
                        np.multiply(v, width, out=tmp)
                        if std_width:
                            tmp *= proto.sd_factor_float(n_hat)
                        Q += tmp
                    if exact_avg:
                        np.copyto(arms_rm, Q[0].argmax(axis=1)[:, None])  # every agent plays its run's arm
                        arms = arms_rm
                    else:
                        by_agent = Q.argmax(axis=2)  # (M, R)
                        arms = np.ascontiguousarray(by_agent.T)  # (R, M), contiguous for the gathers
                        regret_arms = by_agent  # the regret sum below adds over the agents in this order
                r = stream.rewards_unchecked(t, arms)
                if actions is not None:
                    actions[t - 1] = arms
                f = (mech_base + arms).reshape(-1)
                np.add.at(pulls, f, 1)  # distinct indices: pulls[f] += 1, without the fancy-index round trip
                inc = proto.release_increment(f, self.clip_shift(r))
                if exact_avg:
                    # NS[0, 0, rows, a] += 1 and NS[0, 1, rows, a] += the agents' mean increment, by flat
                    # indices (one arm per run: distinct) instead of two-array fancy indexing
                    ia = rows_k + arms[:, 0]
                    np.add.at(NSf, ia, 1.0)
                    ia += R * K
                    np.add.at(NSf, ia, np.add.reduce(inc.reshape(R, M), axis=1) / M)
                    proto.communicate(None, n_messages=n_msgs_per_slot, payload=payload_per_slot)
                else:
                    # distinct indices (one arm per agent): the same sums as NSf[...] += ..., one pass each
                    np.add.at(NSf, (ns0_base + arms).reshape(-1), 1.0)
                    np.add.at(NSf, (ns1_base + arms).reshape(-1), inc)
                    # every agent sends its state (n̂ + ξ, ŝ + Δs̃) to its neighbours, who mix
                    sent = proto.communicate(NS, n_messages=n_msgs_per_slot, payload=payload_per_slot)
                    np.matmul(P, sent.reshape(M, -1), out=NS_next.reshape(M, -1))
                    NS, NS_next = NS_next, NS  # the mixed state; the old buffer takes the next product
                    NSf = NS.reshape(-1)
                if regret_arms is None:
                    cum += np.add.reduce(gaps.take(arms), axis=1)
                else:
                    # gaps[by_agent.T] as it always was: its sum over the agents runs agent by agent (the
                    # agents are the outer axis in memory), as this sum over (M, R)'s first axis does
                    cum += np.add.reduce(gaps.take(regret_arms), axis=0)
                rec.record(t, cum, proto.communication.rounds, proto.communication.messages)
        network = {"graph": graph.name, "kappa": self.kappa, "lambda_2": terms.lambda_2, "epsilon_n": terms.epsilon_n,
                   "c_i": terms.c_i.tolist(), "c_0": terms.c_0, "n_edges": graph.n_edges,
                   "exact_averaging": exact_avg}
        return self._result(env, sigma, rec, pulls.reshape(R, M, K), actions, extras={"network": network},
                            calibration=self._calibration(sigma, **network))

    @classmethod
    def from_config(cls, config: dict, env):
        """Build from a configuration: as :meth:`MasterWorkerUCB.from_config`, with the graph
        ``topology`` (default "complete"; ``er_p`` (0.3) and ``graph_seed`` (0) for
        Erdős–Rényi) of ``M`` agents."""
        g = make_graph(config.get("topology", "complete"), config["M"], p=config.get("er_p", 0.3),
                       rng=np.random.default_rng(config.get("graph_seed", 0)))
        protocol, kw, grid = _grid_config(config, cls)
        learner = cls(protocol, graph=g, n_arms=env.n_arms, horizon=config["T"], **kw)
        learner.grid = grid
        learner.reward_seed = _reward_seed(config)
        return learner


# --------------------------------------------------------------------------------------
# Baselines
# --------------------------------------------------------------------------------------


@register_learner("independent-ucb", family="counter")
class IndependentUCB(_CounterLearner):
    """``M`` independent single-agent UCB learners on their own counters (no communication).

    With ``"counter-exact"`` the index is ``ȳ + sigma sqrt(2 rho ln t / n)`` (UCB1 for
    ``sigma = 1/2``, ``rho = 4``; Auer et al. 2002); with a private counter it is the index
    of :class:`MasterWorkerUCB` recomputed every slot, without communication or doubling
    (the DP-UCB of Tossou & Dimitrakakis 2016 / Mishra & Thakurta 2015 family).  Regret
    summed over the agents.  Parameters as in :class:`MasterWorkerUCB`.
    """

    name = "independent-ucb"

    def __init__(self, protocol, *, n_agents, n_arms, horizon, n_runs=1, rho=2.0, privacy_width="std", sigma=None,
                 clip=(0.0, 1.0), checkpoints=None):
        if protocol is None:
            raise TypeError("protocol must be a fedbandit.protocols.CounterProtocol ('counter-exact' for UCB), got None")
        self._setup(protocol, n_agents=n_agents, n_arms=n_arms, horizon=horizon, n_runs=n_runs, rho=rho,
                         privacy_width=privacy_width, sigma=sigma, clip=clip, checkpoints=checkpoints)

    def run(self, env, rng, *, record_actions: bool = False) -> RunResult:
        """Play ``horizon`` slots on ``env`` for all runs at once (extras as :meth:`MasterWorkerUCB.run`)."""
        env, sigma, stream = self._start(env, rng, record_actions)
        proto = self.protocol
        R, M, K, T = self.n_runs, self.n_agents, self.n_arms, self.horizon
        gaps = env.gaps
        counts = np.zeros((R, M, K))
        base = (np.arange(R)[:, None] * M + np.arange(M)[None, :]) * K
        g_own = np.ones((R, M, K))  # sd_factor of the counts, updated incrementally
        rec = _Recorder(self.checkpoints, R)
        cum = np.zeros(R)
        actions = np.zeros((T, R, M), dtype=np.int16) if record_actions else None
        arms = np.zeros((R, M), dtype=np.int64)
        counts_f, g_f = counts.reshape(-1), g_own.reshape(-1)
        shift_lo = self.private and self.lo != 0.0
        std_width = self._width_scale is not None and self.privacy_width == "std"
        # The index's terms in preallocated buffers (no (R, M, K) temporaries per slot); the
        # mean sums/counts (+ low) changes only where an arm was pulled, so it is kept and
        # updated there, each entry by the same expression as a full recomputation.
        mean = np.zeros((R, M, K))
        mean_f = mean.reshape(-1)
        Q = np.empty((R, M, K))
        tmp = np.empty((R, M, K))
        fact1 = self.privacy_width == "fact1"
        # 2 rho ln t and the width's numerator per run, a block of slots at a time (the same floats)
        factors = _own_count_factors(self)
        for t in range(1, T + 1):
            if t <= K:
                arms[:] = t - 1
            else:
                coef, num = factors.at(t)
                # Q = sums/counts (+ low) + sigma sqrt(2 rho ln t / counts) + privacy width
                np.divide(coef.reshape(R, 1, 1), counts, out=tmp)
                np.sqrt(tmp, out=tmp)
                np.multiply(sigma, tmp, out=Q)
                np.add(mean, Q, out=Q)
                if num is not None:
                    num = num.reshape(R, 1, 1)
                    if fact1:
                        np.divide(num, counts, out=tmp)
                    else:
                        np.multiply(num, g_own, out=tmp)
                        tmp /= counts
                    Q += tmp
                arms = Q.argmax(axis=2)
            r = stream.rewards_unchecked(t, arms)
            if actions is not None:
                actions[t - 1] = arms
            f = (base + arms).reshape(-1)
            n_f = counts_f.take(f)
            n_f += 1
            counts_f[f] = n_f
            m_f = proto.release(f, self.clip_shift(r)) / n_f  # the counter's new private sums over the counts
            if shift_lo:
                m_f += self.lo
            mean_f[f] = m_f
            if std_width:
                g_f[f] = proto.sd_factor_float(n_f)  # the counts' factor (n_f >= 1: equal to sd_factor's)
            cum += np.add.reduce(gaps[arms], axis=1)
            rec.record(t, cum, 0, 0)
        return self._result(env, sigma, rec, counts.astype(np.int64), actions)

    @classmethod
    def from_config(cls, config: dict, env):
        """Build from a configuration (as :meth:`MasterWorkerUCB.from_config`)."""
        return cls._from_grid(config, env)


@register_learner("centralized-ucb", family="counter")
class CentralizedUCB(_CounterLearner):
    """A central learner that sees all ``M T`` samples (no privacy, no communication cost).

    Every slot all ``M`` agents play the arm of largest pooled index
    ``Ȳ_j + sigma sqrt(2 rho ln(M t) / N_j)`` (``N_j`` pooled pulls; ``M t`` samples seen),
    and the ``M`` rewards are pooled.  No protocol: every raw reward reaches the learner.
    """

    name = "centralized-ucb"

    def __init__(self, *, n_agents, n_arms, horizon, n_runs=1, rho=2.0, sigma=None, checkpoints=None):
        self._setup(None, n_agents=n_agents, n_arms=n_arms, horizon=horizon, n_runs=n_runs, rho=rho,
                         privacy_width="none", sigma=sigma, checkpoints=checkpoints)

    def accounting(self):
        """No privacy: a central learner sees every raw reward."""
        return account(NonPrivateEvent("a central learner sees every agent's raw rewards"), model="none",
                       relation="replace")

    def run(self, env, rng, *, record_actions: bool = False) -> RunResult:
        """Play ``horizon`` slots on ``env`` for all runs at once (extras: ``pulls``, ...)."""
        env, sigma, stream = self._start(env, rng, record_actions)
        R, M, K, T = self.n_runs, self.n_agents, self.n_arms, self.horizon
        rho = self.rho
        gaps = env.gaps
        N = np.zeros((R, K))
        S = np.zeros((R, K))
        rec = _Recorder(self.checkpoints, R)
        cum = np.zeros(R)
        actions = np.zeros((T, R, M), dtype=np.int16) if record_actions else None
        rows = np.arange(R)
        for t in range(1, T + 1):
            if t <= K:
                a = np.full(R, t - 1)
            else:
                a = (S / N + sigma * np.sqrt(2.0 * rho[:, None] * np.log(M * t) / N)).argmax(axis=1)
            arms = np.broadcast_to(a[:, None], (R, M))
            r = stream.rewards_unchecked(t, arms)
            if actions is not None:
                actions[t - 1] = arms
            N[rows, a] += M
            S[rows, a] += r.sum(axis=1)
            cum += M * gaps[a]
            rec.record(t, cum, 0, 0)
        pulls = np.zeros((R, M, K), dtype=np.int64)
        pulls[:] = (N / M).astype(np.int64)[:, None, :]
        return self._result(env, sigma, rec, pulls, actions,
                            calibration={"protocol": "none", "rho": rho.tolist(), "sigma": sigma,
                                         "n_agents": M, "horizon": T, "n_runs": R})

    @classmethod
    def from_config(cls, config: dict, env):
        """Build from a configuration (no ``protocol``, no ``epsilon``; else as :meth:`MasterWorkerUCB.from_config`)."""
        if config.get("protocol") is not None:
            raise ValueError(f"learner 'centralized-ucb' takes no protocol, got {config['protocol']!r}")
        _, kw, grid = _grid_config(config, cls, private_allowed=False)
        learner = cls(n_agents=config["M"], n_arms=env.n_arms, horizon=config["T"], **kw)
        learner.grid = grid
        learner.reward_seed = _reward_seed(config)
        return learner

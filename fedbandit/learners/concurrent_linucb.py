"""LinUCB in the concurrent shuffle model (Tenenbaum, Kaplan, Mansour & Stemmer 2023), and its baselines.

Users t = 1, ..., n arrive one at a time; user t gets the server's action rule, plays
a_t = argmax_a ⟨x, θ̂⟩ + β_t ‖x‖_{V⁻¹}, observes y_t and sends its record
z_t = (x_t y_t, upper triangle of x_t x_tᵀ) through a privacy protocol of kind
``"statistics"`` with one agent (:mod:`fedbandit.protocols`).  The server plays LinUCB on
the noisy prefix sums the protocol releases, with a regularizer and a confidence radius
enlarged for the noise (Shariff & Sheffet 2018): regret Õ(sqrt(n ρ_max)) with ρ_max the
PSCO error.

Protocols (:class:`ConcurrentShuffleLinUCB` takes any of them):

* ``create("concurrent-shuffle", epsilon, delta, k=k)`` -- the k-shuffler PSCO on every
  coordinate (:mod:`fedbandit.protocols.concurrent`): regret Õ(k^{3/4} n^{(k+1)/(2k+1)}/sqrt ε)
  (k = 1, 2, ...; ``k="log"``, the dyadic variant with k = ⌊log₂ n⌋ + 1, gives Õ(sqrt n));
* ``create("concurrent-shuffle", epsilon, delta, batch_sizes=(B,))`` with B ≈ n^{3/5}
  (:func:`fedbandit.protocols.concurrent.sequential_batch_sizes`) -- the sequential shuffle
  model of Chowdhury & Zhou (2022), regret Õ(n^{3/5});
* ``create("concurrent-shuffle", epsilon, delta, batch_sizes=(1,))`` -- the local model
  (randomized response per coordinate), regret Õ(n^{3/4});
* ``create("central", epsilon, delta, relation="replace")`` -- a trusted server with the
  Gaussian tree mechanism on the exact sums (Dwork et al. 2010; Chan et al. 2011), the
  fixed-batch family's central protocol with M = 1 and B = 1, regret Õ(sqrt n).

The learner synchronizes every ``period`` users: b_k, the finest batch of the concurrent
shuffle schedule, or 1 for the fixed-batch protocols -- or ``min_period`` users if that is
more (then the concurrent-shuffle schedule is optimised with b_k = ``min_period``, the
dyadic tree runs on blocks of ``min_period`` users, the fixed-batch protocols on batches of
``min_period`` users, and explicit schedules release all batches closing in one period
together).  Neighbouring datasets differ in one user's record (substitution) for every
model above.

The noise-free twin (``noise_free=True``) keeps λ, β and the period of the private learner
but acts on the exact prefix sums: the difference between the two regrets is the cost of
the noise itself, the difference between the twin and non-private LinUCB the cost of the
enlarged regularizer and confidence radius.  It is not private (its accounting says so).

Regularizer and radius (the form of Shariff & Sheffet 2018's radius, the constants the
book's choice; chapter 4's Reconstruction box "private LinUCB's regularizer, radius,
synchronization and baselines"): with σ_G,
σ_u the per-entry noise standard deviations of the released Gram and bias sums (largest
over time), ν = σ_G (2 sqrt(d) + sqrt(2 ln(2n/α))) bounds the noise's operator norm at all
times with probability ≈ 1 − α; λ = max(1, 2ν), so V = G̃ + λI has ρ_min = λ − ν and
ρ_max = λ + ν; γ = σ_u (sqrt(d) + sqrt(2 ln(2n/α)))/sqrt(ρ_min) bounds ‖h_t‖_{V⁻¹};
β_t = R sqrt(2 ln(2/α) + d ln(ρ_max/ρ_min + t L²/(d ρ_min))) + S sqrt(ρ_max) + γ, times
``beta_scale``.
"""

from __future__ import annotations

import functools
import math
import time

import numpy as np

try:  # numpy's private LAPACK gufuncs (numpy 1.x and 2.x); _inverse falls back to np.linalg.inv without them
    from numpy.linalg import _umath_linalg
except ImportError:  # pragma: no cover - a numpy that moved them
    _umath_linalg = None

from fedbandit._validation import (
    MAX_STEPS,
    check_bool,
    check_int_in_range,
    check_nonnegative_float,
    check_positive_float,
    check_positive_int,
    check_probability,
    check_rng,
)
from fedbandit.accounting.accountant import account
from fedbandit.accounting.events import NonPrivateEvent
from fedbandit.envs.users import UserSequenceEnv
from fedbandit.learners.linucb import TIE_TOL, table_products, weighted_upper
from fedbandit.learners.registry import register_learner, split_params
from fedbandit.learners.result import CommunicationRecord, RunResult
from fedbandit.protocols.concurrent import ConcurrentShuffleProtocol
from fedbandit.protocols.statistics import StatisticsProtocol

__all__ = [
    "ConcurrentShuffleLinUCB",
    "linucb_parameters",
]


def _noise_levels(protocol, dim: int) -> tuple[float, float]:
    """(σ_u, σ_G): largest per-entry noise std of the released bias and Gram sums (over time)."""
    if isinstance(protocol, ConcurrentShuffleProtocol):
        std = protocol.coordinate_noise_std()
        return float(std[:dim].max()), float(std[dim:].max())
    sigma = float(protocol.server_noise_std())
    return sigma, sigma


def linucb_parameters(protocol, n: int, dim: int, *, alpha=0.01, noise_bound=0.1, param_bound=1.0, feature_bound=1.0):
    """λ and the ingredients of β_t for a configured protocol's noise level (see the module docstring)."""
    if not isinstance(protocol, (ConcurrentShuffleProtocol, StatisticsProtocol)):
        raise TypeError(f"protocol must be a configured statistics protocol, got {type(protocol).__name__}")
    n = check_positive_int("n", n)
    dim = check_positive_int("dim", dim)
    alpha = check_probability("alpha", alpha)
    sigma_u, sigma_g = _noise_levels(protocol, dim)
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


def _raise_singular(err, flag):
    raise np.linalg.LinAlgError("Singular matrix")


def _inverse(a):
    """np.linalg.inv of a stack of float64 matrices (its LAPACK call and its error on a singular
    matrix), without the wrapper's shape and type checks: the lean loop inverts one stack per user.
    A numpy whose private module has moved gets np.linalg.inv itself (the same call, with its checks)."""
    if _umath_linalg is None:  # pragma: no cover
        return np.linalg.inv(a)
    with np.errstate(call=_raise_singular, invalid="call", over="ignore", divide="ignore", under="ignore"):
        return _umath_linalg.inv(a, signature="d->d")


@functools.lru_cache(maxsize=64)
def _row_starts(rows: int, width: int) -> np.ndarray:
    """0, width, 2·width, ...: the flat index of every row's first entry (read-only, cached)."""
    starts = np.arange(0, rows * width, width)
    starts.flags.writeable = False
    return starts


def _tie_argmax(scores, top=None):
    """Arg-max over the last axis with :func:`fedbandit.learners.linucb.select_arms`' tie rule.

    The rule's threshold is max − TIE_TOL·max(1, |max|) with max the largest score of the row; the
    largest score is read at the row's arg-max ``top`` (``np.argmax(scores, axis=-1)``, given if the
    caller has it), not formed by a reduction over the short last axis (~5 times dearer than the
    arg-max): the same value, hence the same threshold (a NaN row's first NaN for its NaN; +0.0 or
    −0.0 among tied zeros give the same threshold, −TIE_TOL).
    """
    if not scores.flags.c_contiguous:
        best = scores.max(axis=-1, keepdims=True)
    else:
        if top is None:
            top = scores.argmax(axis=-1)
        K = scores.shape[-1]
        best = scores.reshape(-1)[_row_starts(top.size, K) + top.reshape(-1)].reshape(top.shape + (1,))
    best -= TIE_TOL * np.maximum(1.0, np.abs(best))
    return np.argmax(scores >= best, axis=-1)


def _static_arms(feats, theta, v_inv, betas, mask):
    """LinUCB's choice for c users who face the same arms (a block whose rounds share one context).

    ``feats`` (Rc, K, d), ``mask`` (Rc, K) or None, ``betas`` (c,) non-decreasing: the
    scores m_a + β_t w_a (mean ⟨x_a, θ̂⟩, width ‖x_a‖_{V⁻¹}) of the c users differ only
    through β_t, so m and w are computed once.  As a function of β the largest score is
    the upper envelope of K lines, on which every arm holds an interval: a run whose
    envelope line is the same at the first and the last β_t keeps it in between, and then
    its choice under :func:`fedbandit.learners.linucb.select_arms`' tie rule (arms within
    a slack convex in β of that line) is constant too if it is the same at both ends.  So
    only the runs that fail either test are scored user by user.  Returns the arms (R, c).
    """
    R, c = theta.shape[0], betas.shape[0]
    # (R, K, d); the gap family's feats already are (a run axis of stride 0): no broadcast_to call
    X = feats if feats.shape[0] == R else np.broadcast_to(feats, (R,) + feats.shape[1:])
    mean = np.matmul(X, theta[:, :, None])[..., 0]  # (R, K)
    quad = np.einsum("rkd,rkd->rk", np.matmul(X, v_inv), X)
    width = np.sqrt(np.maximum(quad, 0.0))
    if mask is not None:
        mean = np.where(np.broadcast_to(mask, mean.shape), mean, -np.inf)
    end_scores = mean[:, None, :] + betas[[0, -1]][None, :, None] * width[:, None, :]  # (R, 2, K)
    top = np.argmax(end_scores, axis=-1)  # the envelope's line at both ends
    ends = _tie_argmax(end_scores, top)
    arms = np.repeat(ends[:, :1], c, axis=1)
    moving = np.flatnonzero((ends[:, 0] != ends[:, 1]) | (top[:, 0] != top[:, 1]))
    if moving.size:
        arms[moving] = _tie_argmax(mean[moving, None, :] + betas[None, :, None] * width[moving, None, :])
    return arms


def _period_arms(feats, theta, v_inv, betas, mask, products=None):
    """LinUCB's choice for the c users of one period, who share θ̂ and V⁻¹: arms (R, c).

    ``feats`` (c, Rc, K, d) with Rc = 1 (every run sees the same contexts) or R, ``betas``
    (c,), ``mask`` (c, Rc, K) or None.  The scores of :func:`fedbandit.learners.linucb.select_arms`
    (⟨x, θ̂⟩ + β_t sqrt(max(xᵀ V⁻¹ x, 0)), the same tie rule) in a few large products: with
    shared contexts, x xᵀ's upper triangle of every user's arms once and one (R × q)(q × cK)
    product for all quadratic forms; otherwise one (cK × d)(d × d) product per run.
    ``products`` (Rc = 1 only): ``table_products`` of the period's cK arms, if the caller formed
    them (for a whole block at once: the same products, column by column).
    """
    c, Rc, K, d = feats.shape
    R = theta.shape[0]
    if Rc == 1:
        table = feats[:, 0].reshape(c * K, d)
        if products is None:
            products = table_products(table)
        quad = np.matmul(weighted_upper(v_inv), products)  # (R, cK)
        lin = np.matmul(theta, np.ascontiguousarray(table.T))
    else:
        xr = np.moveaxis(feats, 1, 0).reshape(R, c * K, d)
        quad = np.einsum("rnd,rnd->rn", np.matmul(xr, v_inv), xr)
        lin = np.matmul(xr, theta[:, :, None])[..., 0]
    np.maximum(quad, 0.0, out=quad)
    np.sqrt(quad, out=quad)
    scores = quad.reshape(R, c, K)
    scores *= betas[None, :, None]
    scores += lin.reshape(R, c, K)
    if mask is not None:
        scores = np.where(np.moveaxis(mask, 1, 0), scores, -np.inf)
    return _tie_argmax(scores)


def _played(by_arm, arms):
    """``by_arm`` (c, Rc, K, ...) at the played arms (R, c): (R, c, ...), a run axis of length 1 broadcast."""
    R, c = arms.shape
    users = np.arange(c)[None, :]
    if by_arm.shape[1] == 1:
        return by_arm[:, 0][users, arms]
    return by_arm[users, np.arange(R)[:, None], arms]


def _static_played(feats, arms, runs_idx):
    """``feats`` (Rc, K, d) at the played arms (R, c): (R, c, d), the values of
    ``feats[runs_idx[:, None] if Rc > 1 else 0, arms]``.

    When every run has the same arms (Rc = 1, or a run axis broadcast with stride 0, as the gap
    family's), a take of the rows of one run's table: the same copied values, without fancy
    indexing's broadcast of the run index (~8 times faster for the gap family's periods).
    """
    if feats.shape[0] == 1 or feats.strides[0] == 0:
        return np.take(feats[0], arms, axis=0)
    return feats[runs_idx[:, None], arms]


def _zero_one(a) -> bool:
    """Whether every entry of ``a`` is 1.0 or +0.0 (not −0.0, not NaN)."""
    return bool(np.all((a == 1.0) | ((a == 0.0) & ~np.signbit(a))))


def _gram(x, zero_one: bool):
    """Σ_b x_b x_bᵀ of every run, x (R, b, d) → (R, d, d): ``np.einsum("rbd,rbe->rde", x, x)``.

    When every entry of x is 1.0 or +0.0 (``zero_one``: the gap family's orthogonal arms), one
    batched matrix product instead: every product is 0 or 1 and every partial sum an integer
    below 2**53, so both compute the same exact integers whatever their order of summation (and
    no −0.0 arises from +0.0 and 1.0): ~5 times cheaper at 27 runs of 64 users.
    """
    if zero_one:
        return np.matmul(x.transpose(0, 2, 1), x)
    return np.einsum("rbd,rbe->rde", x, x)


def _beta(t, params, dim, scale):
    rho_min, rho_max = params["rho_min"], params["rho_max"]
    L = params["feature_bound"]
    inner = 2.0 * math.log(2.0 / params["alpha"]) + dim * np.log(rho_max / rho_min + t * L**2 / (dim * rho_min))
    return scale * (params["noise_bound"] * np.sqrt(inner) + params["param_bound"] * math.sqrt(rho_max) + params["gamma"])


def _finish(steps):
    """Send a run's generator (:meth:`ConcurrentShuffleLinUCB._steps`) its end; its RunResult."""
    try:
        steps.send(None)
    except StopIteration as stop:
        return stop.value
    raise RuntimeError("a learner's run did not end after its last block")


def run_together(learners, env, rngs, *, per_user: bool = False, on_block=None, keep=None):
    """Run several learners on the same users, generating each block of ``env`` once.

    Every learner gets exactly the blocks its own :meth:`ConcurrentShuffleLinUCB.run` would
    generate (the environment is deterministic given its seed) and its own generator, so each
    result is bit for bit that of ``learner.run(env, rng)``; only the environment's cost
    (contexts, reward noise) is paid once instead of once per learner.

    Parameters
    ----------
    learners : sequence of ConcurrentShuffleLinUCB
        With the same ``n_users`` and ``agents_per_round``.
    env : linear environment
        As for :meth:`ConcurrentShuffleLinUCB.run`.
    rngs : sequence of numpy.random.Generator
        One per learner.
    per_user : bool, default False
    on_block : callable, optional
        Called with every block (of the environment as served) before the learners see it.
    keep : array of int, optional
        Keep the cumulative regret only at these users (1-based, increasing, in 1..n; one user per
        round, ``per_user`` False): each result's ``t`` is ``keep`` and its ``regret`` (R, len(keep))
        the columns ``keep − 1`` of the full result's, the same sums, without an (R, n) array.

    Returns
    -------
    (results, times) : list of RunResult, list of (float, float)
        The learners' results and the (wall, CPU) seconds each spent (the environment's excluded).
    """
    learners, rngs = list(learners), list(rngs)
    if not learners or len(rngs) != len(learners):
        raise ValueError(f"need one rng per learner and at least one learner, got {len(learners)} learners and "
                         f"{len(rngs)} rngs")
    for lr in learners:
        if not isinstance(lr, ConcurrentShuffleLinUCB):
            raise TypeError(f"learners must be ConcurrentShuffleLinUCB, got {type(lr).__name__}")
    shapes = {(lr.n_users, lr.agents_per_round) for lr in learners}
    if len(shapes) != 1:
        raise ValueError(f"the learners must serve the same users (n_users, agents_per_round), got {sorted(shapes)}")
    per_user = check_bool("per_user", per_user)
    rngs = [check_rng("rng", r) for r in rngs]
    served = [lr._served_env(env) for lr in learners]
    times = np.zeros((len(learners), 2))

    def timed(i, step, *args):
        w0, c0 = time.perf_counter(), time.process_time()
        value = step(*args)
        times[i] += (time.perf_counter() - w0, time.process_time() - c0)
        return value

    if keep is not None:
        keep = np.asarray(keep)
        n = learners[0].n_users
        if (keep.ndim != 1 or keep.size == 0 or keep.dtype.kind not in "iu" or keep[0] < 1 or keep[-1] > n
                or np.any(np.diff(keep) <= 0)):
            raise ValueError(f"keep must be increasing users in 1..{n}, got {keep!r}")
        if per_user or learners[0].agents_per_round != 1:
            raise ValueError("keep needs one user per round (agents_per_round=1) and per_user=False")
    steps = [lr._steps(e, r, per_user, keep) for lr, e, r in zip(learners, served, rngs)]
    for i, st in enumerate(steps):
        timed(i, next, st)
    for block in served[0].iter_blocks(learners[0].n_users):
        if on_block is not None:
            on_block(block)
        for i, st in enumerate(steps):
            timed(i, st.send, block)
    results = [timed(i, _finish, st) for i, st in enumerate(steps)]
    return results, [(float(w), float(c)) for w, c in times]


@register_learner("concurrent-linucb", family="linear")
class ConcurrentShuffleLinUCB:
    """LinUCB for n users served one at a time on the noisy prefix sums of a privacy protocol.

    Users between two synchronizations are served with the same statistics, so they are
    handled as one vectorized block (the LinUCB core of :mod:`fedbandit.learners.linucb`
    with the block on its agents axis); with period 1 (local, tree, central) this is one
    user at a time.

    Parameters
    ----------
    protocol : ConcurrentShuffleProtocol or StatisticsProtocol
        ``create("concurrent-shuffle", ...)``, or a trusted-server protocol of the
        fixed-batch family (``create("central", ..., relation="replace")`` or
        ``create("non-private")``) run with M = 1, B = 1; configured by this constructor.
        Protocols that randomize an agent's sums are refused: this learner's one agent is
        the server, which receives every user's record.
    n_users : int
        n, the number of users (rounds).
    dim : int
        d, the feature dimension (checked against the environment).
    alpha : float, default 0.01
        Failure probability in λ and β.
    noise_bound : float, default 0.1
        R, the reward-noise level in β.
    param_bound : float, default 1.0
        S, the bound on ‖θ*‖ in β.
    beta_scale : float, default 1.0
        Multiplier of β_t.
    feature_bound : float, default 1.0
        L (‖x‖ ≤ L), for the protocol's record range and β.
    reward_bound : float, default 1.0
        Y: rewards are clipped to [−Y, Y] before they enter any statistic.
    lean : bool, default True
        Serve period-1 protocols with the specialised one-user loop (same decisions as the
        general block loop, which ``lean=False`` forces; the tests compare the two).
    agents_per_round : int, default 1
        M of a federated instance whose n = M·T users this learner serves one at a time
        (round 1: agents 1..M, round 2: ..., :class:`fedbandit.envs.users.UserSequenceEnv`): the
        environment then has M agents and the result reports the group regret per round,
        the federated learners' metric.  [derived]
    min_period : int, default 1
        Synchronize at most once every ``min_period`` users (see the module docstring):
        the period is max(b_k, ``min_period``), rounded up to a multiple of b_k for an
        explicit schedule.  Fewer synchronizations make large n affordable; the regret
        pays at most ``min_period`` users' delay per change of the statistics.
    noise_free : bool, default False
        The noise-free twin: the private learner's λ, β and period on the exact prefix
        sums (not private; for decomposing the regret).
    """

    name = "concurrent-linucb"
    config_keys = ("n",)

    def __init__(
        self,
        protocol,
        *,
        n_users,
        dim,
        alpha=0.01,
        noise_bound=0.1,
        param_bound=1.0,
        beta_scale=1.0,
        feature_bound=1.0,
        reward_bound=1.0,
        lean=True,
        agents_per_round=1,
        min_period=1,
        noise_free=False,
    ):
        if not isinstance(protocol, (ConcurrentShuffleProtocol, StatisticsProtocol)):
            raise TypeError(
                "protocol must be a statistics protocol (fedbandit.protocols.create('concurrent-shuffle', ...) or a "
                f"fixed-batch one such as create('central', ..., relation='replace')), got {type(protocol).__name__}"
            )
        if isinstance(protocol, StatisticsProtocol) and protocol.randomizer.name != "exact":
            raise ValueError(
                f"protocol {protocol.name!r} randomizes an agent's batch sums ({protocol.randomizer.name!r}); this "
                "learner's one agent is the server itself, which receives every user's record: only the concurrent "
                "shuffle ('concurrent-shuffle') or a trusted server ('central', 'non-private') applies"
            )
        self.n_users = check_positive_int("n_users", n_users, max_value=MAX_STEPS, reason="a run serves n_users users")
        self.agents_per_round = check_positive_int("agents_per_round", agents_per_round)
        if self.n_users % self.agents_per_round:
            raise ValueError(
                f"n_users={self.n_users} must be a multiple of agents_per_round={self.agents_per_round} (M·T users)"
            )
        self.dim = check_positive_int("dim", dim)
        self.feature_bound = check_positive_float("feature_bound", feature_bound)
        self.reward_bound = check_positive_float("reward_bound", reward_bound)
        self.beta_scale = check_nonnegative_float("beta_scale", beta_scale)
        self.lean = check_bool("lean", lean)
        self.noise_free = check_bool("noise_free", noise_free)
        n, d = self.n_users, self.dim
        self.min_period = check_int_in_range("min_period", min_period, 1, n)
        bounds = dict(feature_bound=self.feature_bound, reward_bound=self.reward_bound)
        if isinstance(protocol, ConcurrentShuffleProtocol):
            finest = protocol.batch_sizes_for(n, d)[-1]
            if protocol._fixed_sizes is not None:
                self.period = finest * -(-self.min_period // finest)
            else:
                self.period = max(finest, self.min_period)
            if self.period > n:
                raise ValueError(f"min_period={min_period} gives a period of {self.period} users, more than n_users={n}")
            protocol.configure(n_agents=1, dim=d, n_batches=n // self.period, batch_size=self.period, n_users=n, **bounds)
        else:
            self.period = self.min_period
            protocol.configure(n_agents=1, dim=d, n_batches=n // self.period, batch_size=self.period, **bounds)
        self.protocol = protocol
        self.params = linucb_parameters(
            protocol, n, d, alpha=alpha, noise_bound=noise_bound, param_bound=param_bound,
            feature_bound=self.feature_bound,
        )
        self.lam = self.params["lam"]

    def beta(self, t):
        """β_t (array over t)."""
        return _beta(np.asarray(t), self.params, self.dim, self.beta_scale)

    def run(self, env, rng, *, per_user: bool = False) -> RunResult:
        """Serve users 1..n of ``env`` (all its runs at once).

        Parameters
        ----------
        env : SyntheticLinearEnv or RealDataLinearEnv (any linear environment)
            With ``n_agents`` = 1, or = ``agents_per_round`` (a federated instance, whose
            users are served in sequence through :class:`fedbandit.envs.users.UserSequenceEnv`).
            Supplies contexts and reward noise (common random numbers).
        rng : numpy.random.Generator
            The protocol's randomness.
        per_user : bool, default False
            Also keep the per-user regret (R, n) in ``extras["user_regret"]`` (exactly as
            computed, before the cumulative sum).

        Returns
        -------
        RunResult
            ``t`` = 1..n (users), ``regret`` the cumulative pseudo-regret over users; with
            ``agents_per_round`` = M > 1, ``t`` = 1..n/M (rounds) and the regret of each
            round's M users summed (group regret).  ``extras["agents_per_round"]`` = M.
        """
        rng = check_rng("rng", rng)
        per_user = check_bool("per_user", per_user)
        env = self._served_env(env)
        steps = self._steps(env, rng, per_user)
        next(steps)
        for block in env.iter_blocks(self.n_users):
            steps.send(block)
        return _finish(steps)

    def _served_env(self, env):
        """``env`` checked against the learner, as served one user at a time (a federated instance in sequence)."""
        M = self.agents_per_round
        if getattr(env, "n_agents", None) != M:
            raise ValueError(
                f"the environment has n_agents={getattr(env, 'n_agents', None)} but the learner serves "
                f"agents_per_round={M} users per round (one user at a time: n_agents=1, or a federated instance's "
                "M agents with agents_per_round=M)"
            )
        if M > 1:
            env = UserSequenceEnv(env)
        if getattr(env, "dim", None) != self.dim:
            raise ValueError(f"environment has dim={getattr(env, 'dim', None)} but the learner was built for dim={self.dim}")
        return env

    def _steps(self, env, rng, per_user, keep=None):
        """The run as a generator: primed with ``next``, it is sent the blocks of ``env.iter_blocks(n)`` one by
        one, then None; it then returns the :class:`RunResult` (as StopIteration's value).

        ``keep`` (checked by :func:`run_together`): the users at which to keep the cumulative regret; the
        per-user regret is then held one block at a time, in a buffer whose column 0 carries the sum so far,
        and summed in place at the block's end (the full array's sequential sums, block by block).
        """
        M = self.agents_per_round
        n, d, R, Y = self.n_users, self.dim, env.n_runs, self.reward_bound
        protocol = self.protocol
        lam = self.lam
        protocol.reset(n_runs=R, rng=rng)
        period = self.period
        exact = self.noise_free
        fast_release = isinstance(protocol, ConcurrentShuffleProtocol)
        exact_bias, exact_gram = np.zeros((R, d)), np.zeros((R, d, d))
        betas = self.beta(np.arange(1, n + 1))
        lam_eye = lam * np.eye(d)
        runs_idx = np.arange(R)
        v_inv = np.broadcast_to(np.eye(d) / lam, (R, d, d)).copy()
        theta = np.zeros((R, d))
        # regret[:, t − base]: user t's regret (the whole run's array, base 0; with keep, the current block's
        # columns of the buffer, base its first user)
        base = 0
        if keep is None:
            regret = np.zeros((R, n))
        else:
            kept = np.empty((R, keep.size))
            buffer = None
            width = 0  # users of the block held in the buffer (columns 1..width)
        needs_users = protocol.needs_user_data
        pend_x, pend_y = [], []
        pend_zero_one = True  # every pending user's x of 1.0/+0.0 entries
        filled = 0
        t = 0

        def synchronize(x, y, zero_one=False):
            # x (R, b, d), y (R, b): the period's users; their sums and (if needed) their records
            # (zero_one: every entry of x is 1.0 or +0.0, see _gram)
            if exact:
                exact_bias[:] += np.einsum("rbd,rb->rd", x, y)
                exact_gram[:] += _gram(x, zero_one)
                return exact_bias, exact_gram
            if fast_release:
                # the views np.moveaxis(x, 1, 0) and np.moveaxis(y, 1, 0), without its per-call axis checks
                return protocol.release(x.transpose(1, 0, 2), y.T)
            bias = np.einsum("rbd,rb->rd", x, y)[:, None]
            gram = _gram(x, zero_one)[:, None]
            users = (np.moveaxis(x, 1, 0)[:, :, None], np.moveaxis(y, 1, 0)[:, :, None]) if needs_users else None
            return protocol.synchronize(bias, gram, users=users)

        while True:
            block = yield
            if keep is not None and width:
                # the block's cumulative sums, continuing from the previous block's last (column 0)
                if base == 0:
                    np.cumsum(buffer[:, 1 : 1 + width], axis=1, out=buffer[:, 1 : 1 + width])
                else:
                    np.cumsum(buffer[:, : 1 + width], axis=1, out=buffer[:, : 1 + width])
                lo, hi = np.searchsorted(keep, [base + 1, base + width + 1])
                kept[:, lo:hi] = buffer[:, keep[lo:hi] - base]
                buffer[:, 0] = buffer[:, width]
                width = 0
            if block is None:
                break
            if keep is not None:
                base, width = t, block.n_rounds
                if buffer is None or buffer.shape[1] < 1 + width:  # (a larger block: its carry moves along)
                    grown = np.empty((R, 1 + width))
                    if buffer is not None:
                        grown[:, 0] = buffer[:, 0]
                    buffer = grown
                regret = buffer[:, 1 : 1 + width]
            # users whose arms are rows of a table (real data, served one at a time): each user's
            # features formed from its rows (RoundBlock.features' values), not the block's all at once
            by_rows = period == 1 and self.lean and block.features_from_table
            feats_b = None if by_rows else block.features[:, :, 0]  # (rounds, Rc, K, d)
            means_b = block.means[:, :, 0]  # (rounds, Rc, K)
            best_b = block.best[:, :, 0]
            noise_b = block.noise[:, :, 0]
            mask_b = None if block.mask is None else block.mask[:, :, 0]  # (rounds, Rc, K): real arms
            if period == 1 and self.lean:
                # One user at a time (local, tree, central): the lean path.  The block's arrays are
                # broadcast over the runs once (views: the same values and strides as broadcasting
                # each user's), so a user costs no broadcast of its own.
                n_b, K = block.n_rounds, means_b.shape[-1]
                X_b = None if by_rows else np.broadcast_to(feats_b, (n_b, R) + feats_b.shape[2:])  # (rounds, R, K, d)
                means_R = np.broadcast_to(means_b, (n_b, R, K))
                best_R = np.broadcast_to(best_b, (n_b, R))
                noise_R = np.broadcast_to(noise_b, (n_b, R))
                mask_R = None if mask_b is None else np.broadcast_to(mask_b, (n_b, R, K))
                for s in range(n_b):
                    if by_rows:
                        feats_s = block.round_features(s)[:, 0]  # (Rc, K, d)
                        X = np.broadcast_to(feats_s, (R,) + feats_s.shape[1:])  # (R, K, d)
                    else:
                        X = X_b[s]
                    # the operations of linucb.ucb_scores, without its per-call overhead (same
                    # floating-point results, so ties among arms break the same way)
                    quad = np.einsum("rkd,rkd->rk", np.matmul(X, v_inv), X)
                    np.maximum(quad, 0.0, out=quad)
                    np.sqrt(quad, out=quad)
                    quad *= betas[t]
                    scores = np.matmul(X, theta[..., None])[..., 0]
                    scores += quad
                    if mask_R is not None:
                        scores = np.where(mask_R[s], scores, -np.inf)
                    arms = scores.argmax(axis=1)  # (the method: np.argmax without its wrapper)
                    x = X[runs_idx, arms]  # (R, d)
                    mean = means_R[s][runs_idx, arms]
                    regret[:, t - base] = best_R[s] - mean
                    # np.clip's values (max, then min), without its wrapper
                    y = np.minimum(np.maximum(mean + noise_R[s], -Y), Y)
                    t += 1
                    if exact:
                        exact_bias += x * y[:, None]
                        exact_gram += x[:, :, None] * x[:, None, :]
                        bias, gram = exact_bias, exact_gram
                    elif fast_release:  # the concurrent shuffle: the user's record, without the argument checks
                        bias, gram = protocol.release(x[None], y[None])
                    else:
                        bias, gram = protocol.synchronize(
                            (x * y[:, None])[:, None], (x[:, :, None] * x[:, None, :])[:, None],
                            users=(x[None, :, None], y[None, :, None]) if needs_users else None,
                        )
                    gram = gram + lam_eye
                    v_inv = _inverse(gram)
                    theta = np.matmul(v_inv, bias[..., None])[..., 0]
                continue
            # a block whose rounds all show the same arms (fixed-arm instances broadcast one
            # context over the rounds): the users of a period differ only through β_t
            static = feats_b.shape[0] > 1 and feats_b.strides[0] == 0 and (mask_b is None or mask_b.strides[0] == 0)
            # a static block's arms of 1.0/+0.0 entries only (the played x are rows of them): see _gram
            zero_one = static and (exact or not fast_release) and _zero_one(feats_b[0])
            # shared contexts (one run axis entry): the upper-triangle products of the block's arms in one call, not
            # one per period (each period's are a contiguous copy of its columns: the same values and layout)
            block_products = None
            if not static and feats_b.shape[1] == 1:
                block_products = table_products(feats_b[:, 0].reshape(-1, feats_b.shape[-1]))
                K_b = feats_b.shape[2]
            s = 0
            while s < block.n_rounds:
                # the next c users share the current statistics: one vectorized step
                c = min(block.n_rounds - s, period - filled)
                fb = feats_b[s : s + c]  # (c, Rc, K, d)
                if static:
                    arms = _static_arms(feats_b[s], theta, v_inv, betas[t : t + c], None if mask_b is None else mask_b[s])
                else:
                    products = None if block_products is None else np.ascontiguousarray(
                        block_products[:, s * K_b : (s + c) * K_b])
                    arms = _period_arms(fb, theta, v_inv, betas[t : t + c], None if mask_b is None else mask_b[s : s + c],
                                        products)
                if static:  # every user of the period faces the arms of its first round
                    x = _static_played(feats_b[s], arms, runs_idx)  # (R, c, d)
                    mean = means_b[s][runs_idx[:, None] if means_b.shape[1] > 1 else 0, arms]  # (R, c)
                else:
                    x = _played(fb, arms)  # (R, c, d)
                    mean = _played(means_b[s : s + c], arms)  # (R, c)
                np.subtract(best_b[s : s + c].T, mean, out=regret[:, t - base : t - base + c])
                # np.clip's values (max, then min), without its wrapper
                y = np.add(mean, noise_b[s : s + c].T)
                np.maximum(y, -Y, out=y)
                np.minimum(y, Y, out=y)
                pend_x.append(x)
                pend_y.append(y)
                pend_zero_one = pend_zero_one and zero_one
                filled += c
                t += c
                s += c
                if filled == period:
                    if len(pend_x) == 1:  # the period's users in one step (no copy needed)
                        bias, gram = synchronize(pend_x[0], pend_y[0], pend_zero_one)
                    else:
                        bias, gram = synchronize(np.concatenate(pend_x, axis=1), np.concatenate(pend_y, axis=1),
                                                 pend_zero_one)
                    v_inv = _inverse(gram + lam_eye)  # linucb.regularized_inverse, without its checks
                    theta = np.matmul(v_inv, bias[..., None])[..., 0]
                    pend_x, pend_y, filled, pend_zero_one = [], [], 0, True
        c = protocol.communication
        extras = {"user_regret": regret} if per_user else {}
        extras["agents_per_round"] = M
        extras["noise_free"] = exact
        if keep is not None:
            users, cumulative = keep.copy(), kept
        else:
            per_round = regret if M == 1 else regret.reshape(R, n // M, M).sum(axis=2)
            # the cumulative sums over the per-round regret's own storage when nothing else keeps it: the same
            # sequential sums as a new array's (out[t] = out[t-1] + in[t], in[t] read before it is overwritten),
            # without a second (R, n) array, whose fresh pages cost more than the sums (~0.3 s at R = 27, n = 10⁶)
            users = np.arange(1, n // M + 1)
            cumulative = np.cumsum(per_round, axis=1, out=None if per_user and M == 1 else per_round)
        return RunResult(
            t=users,
            regret=cumulative,
            communication=CommunicationRecord.of(c),
            accounting=self.accounting(),
            calibration=self.calibration(),
            noise_variance=float(protocol.server_noise_std() ** 2),
            extras=extras,
            learner=self.name,
            protocol=protocol.name,
        )

    def accounting(self):
        """The protocol's accounting; the noise-free twin releases exact sums (no privacy)."""
        if self.noise_free:
            return account(NonPrivateEvent("exact prefix sums (the noise-free twin of a private learner)"),
                           model="none", relation=self.protocol.relation)
        return self.protocol.accounting()

    def calibration(self) -> dict:
        """λ, β at n, the synchronization period and the protocol's noise parameters."""
        out = dict(self.protocol.calibration())
        out.update({
            "lam": self.lam,
            "beta_n": float(self.beta(np.array([self.n_users]))[0]),
            "period": self.period,
            "min_period": self.min_period,
            "noise_free": self.noise_free,
            "n_users": self.n_users,
            "sigma_bias": self.params["sigma_bias"],
            "sigma_gram": self.params["sigma_gram"],
        })
        return out

    @classmethod
    def from_config(cls, config: dict, env):
        """Build from a configuration (:func:`fedbandit.experiments.run_config`).

        Keys: ``n`` (users) on a single-agent instance (``M`` = 1), or ``T`` (rounds) on a
        federated instance of ``M`` agents, whose n = M·T users are served in sequence;
        the environment's keys (``K``, ``d``, ``noise_std``, ...); ``protocol`` and its
        parameters (``epsilon``, ``delta``, ``k``, ``batch_sizes``, ``relation``, ...); the
        learner's keyword parameters.  ``noise_bound`` defaults to ``noise_std``.
        """
        for key in ("n_users", "agents_per_round"):
            if key in config:
                raise ValueError(f"config key {key!r}: the configuration gives the users as 'n' (M = 1) or M and 'T'")
        M = env.n_agents
        if "n" in config:
            n = check_positive_int("n", config["n"])
            if "T" in config and n != M * config["T"]:
                raise ValueError(f"config has n={n} users but M·T = {M}·{config['T']} = {M * config['T']}")
        elif "T" in config:
            n = M * check_positive_int("T", config["T"])
        else:
            raise ValueError("config lacks 'n' (users, M = 1) or 'T' (rounds of M agents) for the concurrent-linucb learner")
        protocol, kw = split_params(config, cls)
        if "noise_bound" not in kw and "noise_std" in config:
            kw["noise_bound"] = config["noise_std"]
        return cls(protocol, n_users=n, dim=env.dim, agents_per_round=M, **kw)

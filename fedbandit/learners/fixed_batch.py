"""Fixed-batch federated LinUCB with a pluggable privacy protocol (Zhou & Chowdhury 2023, Alg. 1).

Algorithm 1 (Section 5's prose; the line structure is the book's reading of it, chapter 2's
Reconstruction box "the lines of Algorithm 1, λ and β"): at round t agent i plays

    V_{t,i} = λI + W̃_syn + W_i,   θ̂_{t,i} = V_{t,i}⁻¹ (Ũ_syn + U_i),
    a_{t,i} = argmax_a ⟨x, θ̂_{t,i}⟩ + β_{t} ‖x‖_{V_{t,i}⁻¹},

observes y, and adds x y to U_i and x xᵀ to W_i.  At t = kB every agent hands (U_i, W_i) to
the protocol P = (R, S, A) (:mod:`fedbandit.protocols`), the server's analyzer returns the
noisy synchronized prefix sums (Ũ_syn, W̃_syn), and the agents reset U_i = W_i = 0.  The
schedule is fixed in advance: it does not depend on the data (unlike DP20's).

Two variants (``local_updates``):

* ``local_updates=True`` -- Algorithm 1 as written: line 5 serves user t from the
  synchronized statistics *and* the agent's own new local data U_i, W_i.  The arm, hence
  the record, of a later user of the batch then depends on the earlier users' raw records,
  so one user can move the whole batch sum the agent hands to the protocol, not one
  record: the protocols' one-record sensitivity does not hold and the accounting is
  "invalid" whenever B > 1 (the book's finding; the paper's text does not address it).
* ``local_updates=False`` (the default) -- every user of a batch is served from the last
  synchronized (released) statistics only: V = λI + W̃_syn, θ̂ = V⁻¹ Ũ_syn; the agent's own
  batch enters only through the next synchronization.  A later user's record depends on an
  earlier user only through released values (post-processing), so one user changes one
  record of one batch and the protocols' accounting (adaptive composition of the tree
  releases at one-record sensitivity) holds.  [derived]  At B = 1 the two coincide.

Vectorization: all runs and agents advance together; V_{t,i}⁻¹ is kept by Sherman–Morrison
updates between synchronizations and recomputed from λI + W̃_syn at each one (every
``refresh`` rounds as well when batches are long), so a round costs a handful of array
operations (:mod:`fedbandit.learners.linucb`).  ``tests/reference_fixed_batch.py`` is the
plain loop version, one agent at a time, straight from the algorithm box; the tests check
both make the same decisions on the same draws.

Baselines: :class:`SuperAgent` (central DP, trusted server, batch size 1: one agent serving
all M·T users), :class:`IndependentLinUCB` (no communication).  Non-private federated
LinUCB is :class:`FixedBatchFedLinUCB` with ``protocol=create("non-private")``.
"""

from __future__ import annotations

import math

import numpy as np

from fedbandit._validation import (
    check_bool,
    check_choice,
    check_nonnegative_float,
    check_positive_float,
    check_positive_int,
    check_probability,
    check_rng,
)
from fedbandit.accounting import account
from fedbandit.accounting.events import InvalidEvent, NoReleaseEvent
from fedbandit.learners.linucb import (
    TABLE_DIRECT_RUNS,
    gather_played,
    regularized_inverse,
    select_arms,
    select_from_table,
    serve_from_statistics,
    sherman_morrison_update,
    table_products,
    table_scores,
)
from fedbandit.learners.registry import register_learner, split_params
from fedbandit.learners.result import CommunicationRecord, RunResult
from fedbandit.protocols.registry import create
from fedbandit.protocols.statistics import StatisticsProtocol
from fedbandit.theory.linear import check_batch_schedule, confidence_radius, regularizer_lambda

__all__ = [
    "WITHIN_BATCH_LEAK",
    "FixedBatchFedLinUCB",
    "IndependentLinUCB",
    "SuperAgent",
    "paper_synthetic_configs",
]


#: Why serving users from an agent's own unsynchronized data (``local_updates=True``: Algorithm 1
#: as written, or DP20's FedUCB on a fixed schedule) is not private at B > 1.
WITHIN_BATCH_LEAK = (
    "NOT private as run: with local updates within a batch (Zhou & Chowdhury's Algorithm 1, line 5; DP20's FedUCB) "
    "a user's record changes the arms, "
    "hence the records, of the later users of its batch, so one user moves its agent's whole batch release, not one "
    "record; the protocol's one-record sensitivity does not hold (use local_updates=False)"
)


@register_learner("fixed-batch", family="linear")
class FixedBatchFedLinUCB:
    """Algorithm 1 of Zhou & Chowdhury (2023) with any statistics protocol of :mod:`fedbandit.protocols`.

    Parameters
    ----------
    protocol : StatisticsProtocol
        The privacy protocol (``fedbandit.protocols.create(name, ...)``), configured by
        this constructor for M, d, K = T/B, B.
    horizon : int
        T (rounds per agent).
    batch_size : int
        B; must divide T.
    n_agents : int
        M.
    dim : int
        d, the feature dimension (checked against the environment).
    alpha : float, default 0.01
        Failure probability in λ and β.
    lam : float or "auto"
        λ; "auto": :func:`~fedbandit.theory.linear.regularizer_lambda` with the protocol's
        σ (Lemma 6.7) and the authors' rule, floored at ``lam_min``.
    lam_min : float or None
        Floor of the automatic λ; default sqrt(M) (the authors' non-private choice).
    beta : float or "auto"
        Constant radius, or "auto": :func:`~fedbandit.theory.linear.confidence_radius`
        (authors' rule) at every round.
    beta_scale : float, default 1.0
        Multiplier of the automatic β (the authors' "crs": 1 synthetic, 0.1 real data).
    noise_bound : float, default 0.5
        R, the reward-noise level in β (0.5 in the synthetic instance).
    param_bound : float or None
        S in β; default sqrt(d) (the authors' code).
    feature_bound : float, default 1.0
        L: features are checked to have norm ≤ L.
    reward_bound : float or None, default 1.0
        Y: rewards are clipped to [−Y, Y] before entering any statistic, so one user's
        record has bounded sensitivity.  None disables clipping (the authors' code), and
        private protocols then report an invalid accounting.
    communicate : bool, default True
        False: agents never synchronize (independent agents).
    refresh : int, optional
        Recompute V⁻¹ exactly every ``refresh`` rounds within long batches (default 256).
    local_updates : bool, default False
        True: Algorithm 1 as written (the agent's own new data serve its later users within
        the batch; accounting "invalid" for private protocols when B > 1).  False: users
        are served from the synchronized statistics only (the private variant; see the
        module docstring).  Identical at B = 1.
    """

    def __init__(
        self,
        protocol: StatisticsProtocol,
        *,
        horizon,
        batch_size,
        n_agents,
        dim,
        alpha=0.01,
        lam="auto",
        lam_min=None,
        beta="auto",
        beta_scale=1.0,
        noise_bound=0.5,
        param_bound=None,
        feature_bound=1.0,
        reward_bound=1.0,
        communicate=True,
        refresh=256,
        local_updates=False,
    ):
        if not isinstance(protocol, StatisticsProtocol):
            raise TypeError(
                f"protocol must be a fedbandit.protocols.StatisticsProtocol (fedbandit.protocols.create(name, ...)), "
                f"got {type(protocol).__name__}"
            )
        self.horizon, self.batch_size = check_batch_schedule(horizon, batch_size)
        self.n_agents = check_positive_int("n_agents", n_agents)
        self.dim = check_positive_int("dim", dim)
        self.alpha = check_probability("alpha", alpha)
        self.n_batches = self.horizon // self.batch_size
        self.feature_bound = check_positive_float("feature_bound", feature_bound)
        self.reward_bound = None if reward_bound is None else check_positive_float("reward_bound", reward_bound)
        self.communicate = check_bool("communicate", communicate)
        self.refresh = check_positive_int("refresh", refresh)
        self.local_updates = check_bool("local_updates", local_updates)
        self.protocol = protocol.configure(
            n_agents=self.n_agents,
            dim=self.dim,
            n_batches=self.n_batches,
            batch_size=self.batch_size,
            feature_bound=self.feature_bound,
            reward_bound=self.reward_bound,
        )
        self.lam_min = math.sqrt(self.n_agents) if lam_min is None else check_positive_float("lam_min", lam_min)
        sigma = self.protocol.server_noise_std() if self.communicate else 0.0
        if isinstance(lam, str):
            check_choice("lam", lam, ("auto",))
            self.lam = regularizer_lambda(sigma, self.dim, self.n_batches, self.alpha, lam_min=self.lam_min)
        else:
            self.lam = check_positive_float("lam", lam)
        self.beta_scale = check_nonnegative_float("beta_scale", beta_scale)
        self.noise_bound = check_nonnegative_float("noise_bound", noise_bound)
        self.param_bound = None if param_bound is None else check_nonnegative_float("param_bound", param_bound)
        if isinstance(beta, str):
            check_choice("beta", beta, ("auto",))
            self._beta_const = None
        else:
            self._beta_const = check_nonnegative_float("beta", beta)

    def beta(self, t):
        """β_t (scalar or array over t)."""
        if self._beta_const is not None:
            return self._beta_const if np.ndim(t) == 0 else np.full(np.shape(t), self._beta_const)
        M = self.n_agents if self.communicate else 1
        return confidence_radius(
            t,
            self.lam,
            self.dim,
            M,
            self.alpha,
            noise_std=self.noise_bound,
            param_bound=self.param_bound,
            feature_bound=self.feature_bound,
            scale=self.beta_scale,
        )

    def _check_env(self, env) -> None:
        for attr, mine in (("n_agents", self.n_agents), ("dim", self.dim)):
            theirs = getattr(env, attr, None)
            if theirs != mine:
                raise ValueError(f"environment has {attr}={theirs} but the learner was built for {attr}={mine}")

    def run(self, env, rng, *, record_arms: bool = False) -> RunResult:
        """Play ``horizon`` rounds on ``env`` (all its runs at once); the curve has every round.

        Parameters
        ----------
        env : SyntheticLinearEnv or RealDataLinearEnv
            Supplies contexts and reward noise (common random numbers).
        rng : numpy.random.Generator
            The learner's own randomness (the protocol's noise and shuffles).
        record_arms : bool
            Keep the played arms (R, T, M) in ``extras["arms"]``.
        """
        self._check_env(env)
        rng = check_rng("rng", rng)
        R, M, d, B, T = env.n_runs, self.n_agents, self.dim, self.batch_size, self.horizon
        protocol = self.protocol
        protocol.reset(n_runs=R, rng=rng)
        eye = np.eye(d)
        v_inv = np.broadcast_to(eye / self.lam, (R, M, d, d)).copy()
        u_loc = np.zeros((R, M, d))  # U_i (flushed from the buffer)
        w_loc = np.zeros((R, M, d, d))  # W_i (flushed from the buffer)
        u_syn = np.zeros((R, d))
        w_syn = np.zeros((R, d, d))
        b_vec = np.zeros((R, M, d))  # Ũ_syn + U_i, kept current every round
        regret = np.zeros((R, T))
        arms_rec = np.zeros((R, T, M), dtype=np.int32) if record_arms else None
        needs_users = protocol.needs_user_data and self.communicate
        # The round's records go to a buffer; W_i and U_i are formed from it by one batched
        # product when it is flushed (at a synchronization, a refresh, or when full) instead
        # of adding an outer product every round.  Protocols that need the individual
        # records get the buffer, so it then holds a whole batch.
        L = B if (needs_users or (self.communicate and B <= self.refresh)) else self.refresh
        buf_x = np.zeros((R, M, L, d))
        buf_y = np.zeros((R, M, L))
        pos = 0

        def flush(n):
            if n:
                xb = buf_x[:, :, :n]
                w_loc[...] += np.matmul(np.swapaxes(xb, -1, -2), xb)
                u_loc[...] += np.matmul(buf_y[:, :, None, :n], xb)[..., 0, :]

        betas = self.beta(np.arange(1, T + 1))
        bound_sq = (self.feature_bound * (1 + 1e-9)) ** 2
        # Independent agents never synchronize: they always learn from their own data.
        local = self.local_updates or not self.communicate
        if not local:
            self._play_from_synchronized(env, betas, bound_sq, regret, arms_rec, buf_x, buf_y, flush, u_loc, w_loc)
            return self._result(regret, betas, arms_rec)
        since_inverse = 0
        t = 0
        theta_hat = np.matmul(v_inv, b_vec[..., None])[..., 0]
        for block in env.iter_blocks(T):
            if block.features.shape[-1] != d:
                raise ValueError(f"environment features have dimension {block.features.shape[-1]}, expected {d}")
            for s in range(block.n_rounds):
                X = block.features[s]
                mask = None if block.mask is None else block.mask[s]
                theta_hat = np.matmul(v_inv, b_vec[..., None])[..., 0]
                arms = select_arms(X, theta_hat, v_inv, betas[t], mask)
                x = gather_played(X, arms)  # (R, M, d)
                mean = gather_played(block.means[s], arms)  # (R, M)
                sq = np.einsum("rmd,rmd->rm", x, x)
                if sq.max() > bound_sq:
                    raise ValueError(
                        f"a played feature has norm {math.sqrt(sq.max()):.6g} > feature_bound={self.feature_bound}"
                    )
                regret[:, t] = (np.broadcast_to(block.best[s], (R, M)) - mean).sum(axis=1)
                if record_arms:
                    arms_rec[:, t] = arms
                y = mean + block.noise[s]
                if self.reward_bound is not None:
                    np.clip(y, -self.reward_bound, self.reward_bound, out=y)
                b_vec += x * y[..., None]
                buf_x[:, :, pos] = x
                buf_y[:, :, pos] = y
                pos += 1
                t += 1
                if self.communicate and t % B == 0:
                    u_syn, w_syn, a_inv = _synchronize(protocol, flush, pos, buf_x, buf_y, u_loc, w_loc,
                                                       needs_users, self.lam)
                    pos = 0
                    v_inv[:] = a_inv[:, None]
                    b_vec[:] = u_syn[:, None]
                    since_inverse = 0
                    continue
                if pos == L:
                    flush(pos)
                    pos = 0
                since_inverse += 1
                if since_inverse >= self.refresh:
                    flush(pos)
                    pos = 0
                    v_inv = regularized_inverse(w_syn[:, None] + w_loc, self.lam)
                    since_inverse = 0
                else:
                    sherman_morrison_update(v_inv, x)
        return self._result(regret, betas, arms_rec)

    def _play_from_synchronized(self, env, betas, bound_sq, regret, arms_rec, buf_x, buf_y, flush, u_loc, w_loc):
        """The private variant's rounds: every user of a batch is served from the last release.

        Between two synchronizations every agent of a run uses the same V⁻¹ = (λI + W̃_syn)⁻¹
        and θ̂ = V⁻¹Ũ_syn, so the rounds of a batch are scored together
        (:func:`~fedbandit.learners.linucb.serve_from_statistics`; when the arms are rows of
        a fixed table, :func:`~fedbandit.learners.linucb.table_scores` once per
        synchronization).  The same decisions as serving them one round at a time.
        """
        R, M, d, B, T = env.n_runs, self.n_agents, self.dim, self.batch_size, self.horizon
        protocol = self.protocol
        needs_users = protocol.needs_user_data
        L = buf_x.shape[2]
        v_inv = np.broadcast_to(np.eye(d) / self.lam, (R, d, d)).copy()
        theta_hat = np.zeros((R, d))
        table = getattr(env, "arm_features", None)
        # (few runs are scored from the table itself: TABLE_DIRECT_RUNS)
        products = None if table is None or R <= TABLE_DIRECT_RUNS else table_products(table)
        scored = None  # the table's scores for the current statistics
        pos = 0
        t = 0
        for block in env.iter_blocks(T):
            from_table = block.arm_ids is not None and table is not None
            dim = table.shape[-1] if from_table else block.features.shape[-1]
            if dim != d:
                raise ValueError(f"environment features have dimension {dim}, expected {d}")
            s = 0
            while s < block.n_rounds:
                n = min(block.n_rounds - s, B - t % B, L - pos)
                seg = slice(s, s + n)
                mask = None if block.mask is None else block.mask[seg]
                if from_table and _scores_whole_table(n, block.arm_ids.shape, table.shape):
                    if scored is None:
                        scored = table_scores(table, theta_hat, v_inv, products)
                    arms = select_from_table(*scored, block.arm_ids[seg], betas[t : t + n], mask)
                    x = table[_gather_rounds(block.arm_ids[seg], arms)]  # (n, R, M, d)
                elif from_table:  # few arms per table row: score the segment's own rows (the same decisions)
                    features = table[block.arm_ids[seg]]  # (n, Rc, M, K, d)
                    arms = serve_from_statistics(features, theta_hat, v_inv, betas[t : t + n], mask)
                    x = _gather_rounds(features, arms)  # (n, R, M, d)
                else:
                    arms = serve_from_statistics(block.features[seg], theta_hat, v_inv, betas[t : t + n], mask)
                    x = _gather_rounds(block.features[seg], arms)  # (n, R, M, d)
                mean = _gather_rounds(block.means[seg], arms)  # (n, R, M)
                sq = np.einsum("nrmd,nrmd->nrm", x, x)
                if sq.max() > bound_sq:
                    raise ValueError(
                        f"a played feature has norm {math.sqrt(sq.max()):.6g} > feature_bound={self.feature_bound}"
                    )
                regret[:, t : t + n] = (np.broadcast_to(block.best[seg], (n, R, M)) - mean).sum(axis=2).T
                if arms_rec is not None:
                    arms_rec[:, t : t + n] = arms.transpose(1, 0, 2)
                y = mean + block.noise[seg]
                if self.reward_bound is not None:
                    np.clip(y, -self.reward_bound, self.reward_bound, out=y)
                buf_x[:, :, pos : pos + n] = x.transpose(1, 2, 0, 3)
                buf_y[:, :, pos : pos + n] = y.transpose(1, 2, 0)
                pos += n
                t += n
                s += n
                if t % B == 0:
                    u_syn, w_syn, v_inv = _synchronize(protocol, flush, pos, buf_x, buf_y, u_loc, w_loc,
                                                       needs_users, self.lam)
                    pos = 0
                    theta_hat = np.matmul(v_inv, u_syn[..., None])[..., 0]
                    scored = None
                elif pos == L:
                    flush(pos)
                    pos = 0

    def _result(self, regret, betas, arms_rec) -> RunResult:
        T = self.horizon
        return RunResult(
            t=np.arange(1, T + 1),
            regret=np.cumsum(regret, axis=1),
            communication=self.communication(),
            accounting=self.accounting(),
            calibration=self.calibration(float(betas[-1])),
            noise_variance=float(self.protocol.server_noise_std() ** 2) if self.communicate else 0.0,
            extras={"arms": arms_rec} if arms_rec is not None else {},
            learner=self.name,
            protocol=self.protocol.name if self.communicate else "none",
        )

    name = "fixed-batch"

    def communication(self) -> CommunicationRecord:
        """What the agents sent (nothing for independent agents)."""
        if not self.communicate:
            return CommunicationRecord()
        return CommunicationRecord.of(self.protocol.communication)

    def accounting(self, relation=None):
        """The guarantee of the whole run: the protocol's, for this learner's behaviour.

        With ``local_updates=True`` and B > 1 a private protocol's accounting does not hold
        (one user changes the later records of its batch, so one agent's batch release has
        more than one record's sensitivity): status "invalid", with the protocol's claim
        kept in the event.  ``relation``: "add-remove" or "replace" (default: the
        protocol's own).
        """
        if not self.communicate:
            return account(
                NoReleaseEvent("nothing leaves a silo: every silo's users are private against everyone else (ε = 0)"),
                model="none (no communication)",
            )
        p = self.protocol
        if self.local_updates and self.batch_size > 1 and p.private:
            return p.account_event(lambda rel: InvalidEvent(WITHIN_BATCH_LEAK, claimed=p.event(rel)), relation)
        return p.accounting(relation)

    def calibration(self, beta_T: float | None = None) -> dict:
        """λ, β at T, the schedule and the protocol's noise parameters."""
        out = dict(self.protocol.calibration()) if self.communicate else {"protocol": "none (independent)"}
        beta_T = float(self.beta(self.horizon)) if beta_T is None else beta_T
        out.update({"lam": self.lam, "beta_T": beta_T, "batch_size": self.batch_size, "horizon": self.horizon})
        return out

    @classmethod
    def from_config(cls, config: dict, env):
        """Build from a configuration (see :func:`fedbandit.experiments.run_config`)."""
        protocol, kw = split_params(config, cls)
        return cls(protocol, horizon=config["T"], batch_size=config["B"], n_agents=config["M"], dim=env.dim, **kw)


@register_learner("independent", family="linear")
class IndependentLinUCB(FixedBatchFedLinUCB):
    """Non-federated baseline: M agents each running LinUCB on its own data only.

    No communication (``communicate=False``), λ = max(1, ...) with λ_min = 1; every agent
    learns from its own users (local updates: nothing is released, so nothing leaks).
    """

    name = "independent"

    def __init__(self, *, horizon, n_agents, dim, lam_min=1.0, **kwargs):
        if kwargs.pop("local_updates", True) is not True:
            raise ValueError("independent agents learn from their own users only: local_updates must be True")
        super().__init__(
            create("non-private"),
            horizon=horizon,
            batch_size=horizon,
            n_agents=n_agents,
            dim=dim,
            lam_min=lam_min,
            communicate=False,
            local_updates=True,
            **kwargs,
        )

    @classmethod
    def from_config(cls, config: dict, env):
        _, kw = split_params(config, FixedBatchFedLinUCB, protocol=False)
        return cls(horizon=config["T"], n_agents=config["M"], dim=env.dim, **kw)


@register_learner("super-agent", family="linear")
class SuperAgent(FixedBatchFedLinUCB):
    """The central-DP benchmark: one trusted server serving all M·T users (batch size 1).

    :class:`FixedBatchFedLinUCB` with B = 1 and λ_min = 1: after every round the server
    adds all M users' data to one central tree mechanism over T leaves (the
    ``"central"`` protocol, or ``"non-private"``) and every user of the next round is
    served from the same noisy statistics.  [derived] A strictly sequential super agent
    would update after each of the M users of a round; serving them in one batch of M
    changes the regret by at most the O(dM log(MT)) batching term of Lemma 6.7.
    """

    name = "super-agent"

    def __init__(self, protocol, *, horizon, n_agents, dim, lam_min=1.0, **kwargs):
        super().__init__(protocol, horizon=horizon, batch_size=1, n_agents=n_agents, dim=dim, lam_min=lam_min, **kwargs)

    @classmethod
    def from_config(cls, config: dict, env):
        protocol, kw = split_params(config, FixedBatchFedLinUCB)
        return cls(protocol, horizon=config["T"], n_agents=config["M"], dim=env.dim, **kw)


def paper_synthetic_configs(*, runs=25, T=10_000, M=100, env_seed=0, vecsum_split="advanced") -> list[dict]:
    """The six synthetic configurations of Zhou & Chowdhury's Fig. 2a/2b [authors' code].

    M = 100, T = 10⁴, K = 100, d = 10, B = 25, α = 0.01, 25 runs: SDP-amplification and
    silo-level LDP at ε ∈ {1e-4, 1e-3}, δ = 1e-4 (the amplification lemma's validity fails
    at M = 100, δ = 1e-4, so it is forced and reported "unproven"); LDP and SDP-vector-sum
    at ε = 0.2, δ = 0.1 (the vector sum with the budget split over the tree nodes by
    default).  The paper's silo-LDP calibration (Thm. 6.1) throughout.
    """
    check_choice("vecsum_split", vecsum_split, ("advanced", "none"))
    base = dict(learner="fixed-batch", instance="synthetic", M=M, T=T, B=25, K=100, d=10, runs=runs, env_seed=env_seed)
    out = []
    for eps in (1e-4, 1e-3):
        out.append(dict(base, protocol="sdp-amplification", epsilon=eps, delta=1e-4, force=True))
        out.append(dict(base, protocol="silo-ldp", epsilon=eps, delta=1e-4, calibration="paper"))
    out.append(dict(base, protocol="silo-ldp", epsilon=0.2, delta=0.1, calibration="paper"))
    vs = dict(base, protocol="sdp-vector-sum", epsilon=0.2, delta=0.1, split=vecsum_split)
    if vecsum_split == "none":
        vs["constant"] = 1.0
    out.append(vs)
    return out


def _scores_whole_table(n_rounds, arm_ids_shape, table_shape) -> bool:
    """Whether ``n_rounds`` rounds whose arms are table rows are served from the whole table's scores.

    :func:`~fedbandit.learners.linucb.table_scores` costs about N·d(d+1)/2 multiply-adds per
    run and synchronization (and reads the N × d(d+1)/2 products; N·d² in cache for at most
    :data:`~fedbandit.learners.linucb.TABLE_DIRECT_RUNS` runs); scoring the rounds' own rows
    (:func:`~fedbandit.learners.linucb.serve_from_statistics` on their features) about
    n·M·K·d² per run.  The whole table wins for batches of many rounds (Zhou & Chowdhury's
    B = 25 on the MSLR sample), the rounds' rows for the super agent's B = 1.  Both give the
    same decisions (:func:`~fedbandit.learners.linucb.select_from_table`).
    """
    _, _, M, K = arm_ids_shape
    N, d = table_shape
    return n_rounds * M * K * d >= N * (d + 1) // 2


def _gather_rounds(arrays_by_arm, arms):
    """``arrays_by_arm`` (n, Rc, M, K, ...) at ``arms`` (n, R, M): shape (n, R, M, ...).

    One ``take`` of whole rows from the flattened (n·Rc·M·K, ...) array (a row copy per
    played arm, much cheaper than a 4-axis fancy index)."""
    n, R, M = arms.shape
    Rc, K = arrays_by_arm.shape[1], arrays_by_arm.shape[3]
    tail = arrays_by_arm.shape[4:]
    rows = (np.arange(n).reshape(n, 1, 1) * Rc + (0 if Rc == 1 else np.arange(R).reshape(1, R, 1))) * M
    rows = (rows + np.arange(M).reshape(1, 1, M)) * K + arms
    flat = arrays_by_arm.reshape((-1,) + tail)
    return np.take(flat, rows.ravel(), axis=0).reshape((n, R, M) + tail)


def _synchronize(protocol, flush, pos, buf_x, buf_y, u_loc, w_loc, needs_users, lam):
    """A batch's synchronization, shared by both variants: flush the record buffer into the
    local sums, release them through the protocol (with the individual records if it needs
    them), clear them; returns Ũ_syn (R, d), W̃_syn (R, d, d) and (λI + W̃_syn)⁻¹, which
    every agent of a run shares."""
    flush(pos)
    users = (np.moveaxis(buf_x, 2, 0), np.moveaxis(buf_y, 2, 0)) if needs_users else None
    u_syn, w_syn = protocol.synchronize(u_loc, w_loc, users=users)
    u_loc[:] = 0.0
    w_loc[:] = 0.0
    return u_syn, w_syn, regularized_inverse(w_syn, lam)

"""DP20's FedUCB: federated LinUCB with an adaptive (log-det) synchronization rule.

Dubey & Pentland (NeurIPS 2020, "DP20") propose FedUCB: M agents (silos) run LinUCB on
their *synchronized* statistics plus their own *local* statistics since the last
synchronization; a synchronization of all agents is triggered by the data-dependent rule

.. math:: \\log\\det(V_{\\text{sync}} + W_i) - \\log\\det(V_{\\text{sync}}) \\ge D / \\Delta t

(rule (1) of Zhou & Chowdhury 2023, Section 4; Δt = rounds since the last
synchronization, the rule of DisLinUCB, Wang et al. 2020), and every synchronized
statistic passes through a privacy protocol: DP20's is a tree-based Gaussian privatizer
over the *synchronization rounds* (Shariff & Sheffet 2018 style) whose per-silo noise is
calibrated to σ² ≈ 16 m L² log²(1/δ)/ε², m = 1 + ⌈log₂ T⌉ (the ``"dp20"`` protocol of
:mod:`fedbandit.protocols`, ``create("dp20", epsilon=, delta=, noise=...)``).

Zhou & Chowdhury (2023, Section 4) identify three gaps, which the book's chapter
(``chapters/01_dp20_gaps.ipynb``) measures with this module:

1. the schedule depends on non-private local data (W_i above), so *when* agents
   synchronize leaks (their Example 4.1): with ``schedule="adaptive"`` the run's
   accounting is therefore invalid whatever the protocol (:meth:`FedUCB.accounting`);
2. every silo adds noise of variance σ², so the server's total noise is Mσ², not the σ²
   of DP20's regret analysis (``create("dp20", ..., noise="corrected")`` is DP20's
   algorithm as written, ``noise="claimed"`` the total σ² their analysis assumes, i.e.
   σ²/M per silo; the protocol measures the noise it injects,
   :meth:`fedbandit.protocols.StatisticsProtocol.measured_noise_variance`);
3. the O(M log T) communication argument is the non-private one.

A fourth, the book's (issue 21): on the fixed schedule with B > 1, serving a user from the
agent's own unsynchronized statistics (θ̂ = V⁻¹(ũ_sync + U_i) above) makes a later user's
record of the batch depend on an earlier user's raw record, so one user moves its agent's
whole batch sum and the protocol's one-record sensitivity fails, exactly as for
Algorithm 1 of Zhou & Chowdhury as written
(:data:`fedbandit.learners.fixed_batch.WITHIN_BATCH_LEAK`).  ``local_updates``:

* ``schedule="fixed"``, ``local_updates=False`` (the default) -- the frozen private
  variant: every user of a batch is served from the last synchronized (released)
  statistics only, V = λ₀I + S̃_sync, θ̂ = V⁻¹ũ_sync; the agent's batch enters only through
  the next synchronization.  A later record depends on an earlier user only through
  released values (post-processing), so the protocol's accounting holds (the book's fix).
* ``schedule="fixed"``, ``local_updates=True`` -- DP20 as written; accounted "invalid"
  (an :class:`~fedbandit.accounting.events.InvalidEvent` with the reason
  ``WITHIN_BATCH_LEAK``) when B > 1 and the protocol is private.  At B = 1 the two
  variants coincide (every batch is one user).
* ``schedule="adaptive"`` -- DP20's log-det rule is a function of the local statistics
  W_i, so the local updates are part of the rule: ``local_updates`` must be True (its
  default there; False is refused) and the run is accounted invalid for the schedule
  (gap 1).

Where each detail comes from.  DP20's outline is Zhou & Chowdhury 2023, Section 4 (LinUCB on
synchronized plus local statistics "with a regularizer shift", rule (1), a tree privatizer);
the details below are the book's reconstruction, in the form of Shariff & Sheffet's private
LinUCB, derived and checked numerically in chapter 1 (section "Where the calibration, the
shift and the radius come from", label ``sec-dp20-provenance``; Reconstruction box
"FedUCB's statistics, regularizer shift and radius"):

* V_{t,i} = λ₀ I + S̃_sync + W_i, θ̂ = V⁻¹(ũ_sync + U_i), LinUCB choice; the
  regularizer shift λ₀ = λ + 2b keeps the noisy V positive definite w.h.p., with b the
  bound b = sqrt(m)·s·(4 sqrt(d) + 2 log(2T/α)) on the spectral norm of a sum of ≤ m
  symmetric node noises of per-entry standard deviation s (the *total* node noise at the
  server, ``protocol.node_noise_std()`` = sqrt(M)·σ₀): by Weyl's inequality every
  eigenvalue of λ₀ I + H then lies in [λ + b, λ + 3b]; chapter 1 derives b (semicircle
  edge plus Gaussian concentration) and checks it by Monte Carlo;
* β_t = R sqrt(2 log(2/α) + d log(ρ_max/ρ_min + tML²/(dρ_min))) + S sqrt(ρ_max)
  + γ with ρ_min = λ + b, ρ_max = λ + 3b, γ = sqrt(m)·s·(sqrt d + sqrt(2 log(2T/α)))/sqrt(ρ_min)
  (the form of Shariff & Sheffet's β with (ρ_min, ρ_max, γ)-accurate regularizers, the
  constants the book's; derived in chapter 1); without noise this is OFUL's radius
  R sqrt(2 log(2/α) + d log(1 + tM/(dλ))) + S sqrt(λ) (Abbasi-Yadkori et al. 2011, Theorem 2);
* the book's choice: the tree runs over synchronization rounds, one step per synchronization of the
  run, sized for n_batches = T steps (the most synchronizations possible; batch_size = 1
  in the protocol's bookkeeping); a synchronization at the end of round t uses that
  round's data (also at t = T, so that a fixed schedule with B | T synchronizes exactly
  T/B times, as Algorithm 1 of Zhou & Chowdhury does).

Vectorization
-------------
State carries (runs R, agents M) leading axes.  The synchronization decision is per run
(any agent triggering synchronizes every agent of that run), so runs synchronize at
different rounds and their trees are at different steps: a synchronization is
``protocol.synchronize(U[idx], W[idx], runs=idx)`` for the runs ``idx`` that synchronize
(per-run tree steps, :class:`fedbandit.mechanisms.tree.TreeRandomizer` with ``runs=``),
never a loop over runs.

Random draws
------------
All privacy noise comes from the protocol, whose streams :meth:`FedUCB.run` spawns from
its ``rng`` (``protocol.reset(n_runs=R, rng=rng)``: the noise stream is
``rng.spawn(2)[0]``).  At the end of a round in which the runs ``idx`` (in increasing
order) synchronize, a Gaussian-tree protocol draws the packed statistics' noise of every
agent: first the bias noise, ``standard_normal((len(idx), M, d))·σ₀``, then the Gram
matrix's upper triangle, ``standard_normal((len(idx), M, d(d+1)/2))·σ₀`` (mirrored below
the diagonal).  [Before the protocol interface, FedUCB drew the Gram noise first; the
change of order changes the noisy runs' numbers, not their distribution.]  Contexts and
reward noise come from the environment (common random numbers).
``tests/reference_dp20.py`` consumes the same draws.
"""

from __future__ import annotations

import math

import numpy as np

from fedbandit._validation import (
    MAX_STEPS,
    check_bool,
    check_choice,
    check_int_in_range,
    check_nonnegative_float,
    check_positive_float,
    check_positive_int,
    check_probability,
    check_rng,
)
from fedbandit.accounting.accountant import account
from fedbandit.accounting.calibration import dp20_m
from fedbandit.accounting.events import InvalidEvent
from fedbandit.learners.fixed_batch import WITHIN_BATCH_LEAK
from fedbandit.learners.linucb import gather_played, select_arms
from fedbandit.learners.registry import register_learner, split_params
from fedbandit.learners.result import CommunicationRecord, RunResult
from fedbandit.protocols.statistics import SCHEDULES, GaussianTree, StatisticsProtocol, n_coordinates
from fedbandit.theory.linear import optimal_batch_size

__all__ = [
    "wang_threshold",
    "noise_norm_bound",
    "FedUCB",
    "ADAPTIVE_SCHEDULE_LEAK",
]

#: Why an adaptive schedule voids any privacy claim (the reason of the run's InvalidEvent).
ADAPTIVE_SCHEDULE_LEAK = (
    "NOT private: the synchronization schedule (DP20's log-det rule) is a deterministic function of the silos' "
    "non-private local data, and every silo sees when synchronizations happen, so one user can be revealed with "
    "certainty (Zhou & Chowdhury 2023, Sec. 4, Example 4.1)"
)


def wang_threshold(horizon, dim, n_agents) -> float:
    """D = T log T / (d M): the book's reading of DisLinUCB's threshold (Wang et al. 2020), not its theorem.

    Chapter 1's Reconstruction box "FedUCB's statistics, regularizer shift and radius" says
    so and also runs a constant D.
    """
    T = check_positive_int("horizon", horizon)
    d = check_positive_int("dim", dim)
    M = check_positive_int("n_agents", n_agents)
    return T * math.log(max(T, 2)) / (d * M)


def noise_norm_bound(total_sigma, dim, horizon, alpha=0.01) -> float:
    """b = sqrt(m)·s·(4 sqrt(d) + 2 log(2T/α)): w.h.p. bound on ‖Σ node noises‖₂ (the book's derivation).

    A sum of at most m symmetric Gaussian node noises with per-entry standard deviation s
    has spectral norm at most b with probability ≥ 1 − α/T: the semicircle edge 2 sqrt(dm) s
    plus Gaussian concentration (the norm is sqrt(2m) s-Lipschitz in the standardized
    entries), derived and checked by Monte Carlo in chapter 1 (section "Where the
    calibration, the shift and the radius come from"); the form follows Shariff & Sheffet
    (2018), the constants are the book's.
    ``total_sigma`` is s, the per-entry standard deviation of the *server's* node noise.
    """
    s = check_nonnegative_float("total_sigma", total_sigma)
    d = check_positive_int("dim", dim)
    T = check_positive_int("horizon", horizon)
    alpha = check_probability("alpha", alpha)
    return math.sqrt(dp20_m(T)) * s * (4.0 * math.sqrt(d) + 2.0 * math.log(2.0 * T / alpha))


@register_learner("feducb", family="linear")
class FedUCB:
    """DP20's FedUCB (Dubey & Pentland 2020) with a pluggable statistics protocol, vectorized over runs and agents.

    Parameters
    ----------
    protocol : StatisticsProtocol
        The privacy protocol (``fedbandit.protocols.create(name, ...)``): ``create("dp20",
        epsilon=, delta=, noise="corrected")`` is DP20's privatizer as written,
        ``noise="claimed"`` the total noise DP20's analysis assumes, ``create("non-private")``
        no privatizer (DisLinUCB).  Configured by this constructor with n_batches = T,
        batch_size = 1 and ``schedule``; an adaptive schedule needs a protocol that serves
        per-run steps, and protocols that act on every user's record are refused (FedUCB
        hands over batch sums only).
    n_agents : int
        M.
    dim : int
        d, the feature dimension.
    horizon : int
        T, rounds per agent.
    schedule : {"adaptive", "fixed"}, default "adaptive"
        DP20's rule, or a data-independent synchronization every ``batch_size`` rounds.
    threshold : float, optional
        D > 0 of the log-det rule (required for, and only used by, ``schedule="adaptive"``).
        :func:`wang_threshold` gives DisLinUCB's choice.
    batch_size : int, optional
        B for ``schedule="fixed"`` (1 ≤ B ≤ T).
    lam : float, default 1.0
        Base regularizer λ > 0.
    shift : float or "auto", default "auto"
        Regularizer shift added to λ (λ₀ = λ + shift); "auto" is 2b with b from
        :func:`noise_norm_bound` at the server's total node noise s = ``protocol.node_noise_std()``
        (0 without noise).
    alpha : float in (0, 1), default 0.01
        Failure probability in β and b.
    noise_bound : float, default 0.5
        R, the reward-noise level in β.
    param_bound : float, default 1.0
        S ≥ ‖θ*‖ in β.
    feature_bound : float, default 1.0
        L ≥ ‖x‖ (in the protocol's calibration and in β); played features are checked.
    reward_bound : float or None, default None
        Y: clip rewards to [−Y, Y] before they enter any statistic.  None (DP20 as
        written) does not clip, so a private protocol's sensitivity assumption |y| ≤ 1
        fails and its accounting is "invalid".
    beta_scale : float, default 1.0
        Multiplies β (1 is the theory's radius).
    refresh : int, default 256
        Between synchronizations V⁻¹ is kept by Sherman–Morrison updates and log det by the
        matrix determinant lemma; both are recomputed exactly every ``refresh`` rounds.
    local_updates : bool or None, default None
        Serve users from the agent's own unsynchronized statistics too (DP20 as written).
        None: the schedule's default -- False for ``schedule="fixed"`` (the frozen private
        variant, users served from the released statistics only), True for
        ``schedule="adaptive"``, whose rule needs the local log-det (False is refused
        there).  With ``schedule="fixed"``, True and B > 1 a private protocol's accounting
        is "invalid" (see the module notes).

    Raises
    ------
    ValueError, TypeError
        On a bad protocol, D, schedule or size, naming the parameter.
    """

    name = "feducb"
    #: Configuration keys :meth:`from_config` reads itself (besides T, B, M).
    config_keys = ("D",)

    def __init__(
        self,
        protocol: StatisticsProtocol,
        *,
        n_agents,
        dim,
        horizon,
        schedule="adaptive",
        threshold=None,
        batch_size=None,
        lam=1.0,
        shift="auto",
        alpha=0.01,
        noise_bound=0.5,
        param_bound=1.0,
        feature_bound=1.0,
        reward_bound=None,
        beta_scale=1.0,
        refresh=256,
        local_updates=None,
    ):
        if not isinstance(protocol, StatisticsProtocol):
            raise TypeError(
                "protocol must be a fedbandit.protocols.StatisticsProtocol (fedbandit.protocols.create(name, ...)), "
                f"got {type(protocol).__name__}"
            )
        if protocol.needs_user_data:
            raise ValueError(
                f"protocol {protocol.name!r} acts on every user's record, but FedUCB hands the protocol batch sums "
                "only; use a protocol whose randomizer takes the sums (non-private, central, silo-ldp, dp20, ...)"
            )
        self.n_agents = check_positive_int("n_agents", n_agents, max_value=MAX_STEPS)
        self.dim = check_positive_int("dim", dim, max_value=40_000, reason="the statistics have d + d(d+1)/2 entries")
        self.horizon = check_positive_int("horizon", horizon, max_value=MAX_STEPS, reason="a run plays horizon rounds")
        self.schedule = check_choice("schedule", schedule, SCHEDULES)
        if self.schedule == "adaptive":
            if threshold is None:
                raise ValueError("threshold D is required for schedule='adaptive' (e.g. wang_threshold(T, d, M))")
            self.threshold = check_positive_float("threshold", threshold)
            if batch_size is not None:
                raise ValueError(f"batch_size is only used with schedule='fixed'; got batch_size={batch_size!r} "
                                 "with schedule='adaptive'")
            self.batch_size = None
        else:
            if batch_size is None:
                raise ValueError("batch_size is required for schedule='fixed'")
            self.batch_size = check_int_in_range("batch_size", batch_size, 1, self.horizon)
            if threshold is not None:
                raise ValueError(f"threshold is only used with schedule='adaptive'; got threshold={threshold!r} "
                                 "with schedule='fixed'")
            self.threshold = None
        if local_updates is None:
            self.local_updates = self.schedule == "adaptive"
        else:
            self.local_updates = check_bool("local_updates", local_updates)
            if self.schedule == "adaptive" and not self.local_updates:
                raise ValueError(
                    "local_updates=False is refused with schedule='adaptive': DP20's log-det rule is a function of the "
                    "agents' local statistics (the schedule itself is not private, gap 1); use schedule='fixed' for "
                    "the frozen private variant, or local_updates=True / None"
                )
        self.lam = check_positive_float("lam", lam)
        self.alpha = check_probability("alpha", alpha)
        self.noise_bound = check_nonnegative_float("noise_bound", noise_bound)
        self.param_bound = check_nonnegative_float("param_bound", param_bound)
        self.feature_bound = check_positive_float("feature_bound", feature_bound)
        self.reward_bound = None if reward_bound is None else check_positive_float("reward_bound", reward_bound)
        self.beta_scale = check_nonnegative_float("beta_scale", beta_scale)
        self.refresh = check_positive_int("refresh", refresh)
        if isinstance(shift, str):
            check_choice("shift", shift, ("auto",))
        else:
            shift = check_nonnegative_float("shift", shift)
        self.protocol = protocol.configure(
            n_agents=self.n_agents,
            dim=self.dim,
            n_batches=self.horizon,
            batch_size=1,
            feature_bound=self.feature_bound,
            reward_bound=self.reward_bound,
            schedule=self.schedule,
        )
        # The server's total per-entry node noise s = sqrt(M)·σ₀ (0 without noise).
        self.total_sigma = float(self.protocol.node_noise_std())
        self.noisy = self.total_sigma > 0.0
        self.m = dp20_m(self.horizon)
        self.b = noise_norm_bound(self.total_sigma, self.dim, self.horizon, self.alpha) if self.noisy else 0.0
        self.shift = 2.0 * self.b if isinstance(shift, str) else shift
        self.lam0 = self.lam + self.shift

    # ------------------------------------------------------------------------------
    def beta(self, t) -> np.ndarray | float:
        """Confidence radius β_t (module notes; derived in chapter 1); array-friendly in t."""
        t = np.asarray(t, dtype=float)
        d, M, L = self.dim, self.n_agents, self.feature_bound
        rho_min = self.lam + self.b
        rho_max = self.lam + 3.0 * self.b
        gamma = 0.0
        if self.noisy:
            gamma = (
                math.sqrt(self.m)
                * self.total_sigma
                * (math.sqrt(d) + math.sqrt(2.0 * math.log(2.0 * self.horizon / self.alpha)))
                / math.sqrt(rho_min)
            )
        inner = 2.0 * math.log(2.0 / self.alpha) + d * np.log(rho_max / rho_min + t * M * L**2 / (d * rho_min))
        beta = self.beta_scale * (self.noise_bound * np.sqrt(inner) + self.param_bound * math.sqrt(rho_max) + gamma)
        return float(beta) if beta.ndim == 0 else beta

    def accounting(self):
        """The guarantee of the whole run, this learner's schedule included.

        With ``schedule="adaptive"`` and a private protocol: an
        :class:`~fedbandit.accounting.events.InvalidEvent` (ε = ∞, status "invalid") that
        wraps the protocol's claimed event, because *when* the agents synchronize is a
        function of non-private local data (Zhou & Chowdhury 2023, Sec. 4, Example 4.1).
        With ``schedule="fixed"``, ``local_updates=True`` (DP20 as written), B > 1 and a
        private protocol: "invalid" too, with the reason ``WITHIN_BATCH_LEAK`` (one user
        changes the later records of its agent's batch).  Otherwise (the frozen variant, B =
        1, or no privacy at all): the protocol's own accounting.
        """
        p = self.protocol
        if self.schedule == "fixed" and self.local_updates and self.batch_size > 1 and p.private:
            return p.account_event(lambda rel: InvalidEvent(WITHIN_BATCH_LEAK, claimed=p.event(rel)))
        if self.schedule == "fixed" or not p.private:
            return p.accounting()
        claimed = p.event()
        return account(
            InvalidEvent(ADAPTIVE_SCHEDULE_LEAK, claimed=claimed),
            target_epsilon=p.target_epsilon,
            target_delta=p.target_delta,
            model=p.model,
            relation=p.relation,
            theorem=f"claimed: {p.theorem() or claimed.describe()}; void under DP20's adaptive schedule "
            "(Zhou & Chowdhury 2023, Sec. 4, Example 4.1)",
            notes=p.bounds_note(),
        )

    def calibration(self) -> dict:
        """The protocol's noise parameters and the learner's own (λ₀, b, D, B, β at T, ...)."""
        out = dict(self.protocol.calibration())
        out.update(
            {
                "schedule": self.schedule,
                "local_updates": self.local_updates,
                "D": self.threshold,
                "B": self.batch_size,
                "horizon": self.horizon,
                "m": self.m,
                "node_noise_std": self.total_sigma,
                "nominal_total_variance": self.total_sigma**2,
                "b": self.b,
                "lam": self.lam,
                "shift": self.shift,
                "lam0": self.lam0,
                "beta_T": float(self.beta(self.horizon)),
            }
        )
        return out

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

    def run(self, env, rng, *, record_arms: bool = False) -> RunResult:
        """Play T rounds on ``env`` for its ``n_runs`` runs side by side.

        Parameters
        ----------
        env : environment
            Anything with ``iter_blocks(T)`` yielding :class:`fedbandit.envs.linear.RoundBlock`
            objects and attributes ``n_agents``, ``dim``, ``n_runs`` (e.g.
            :class:`fedbandit.envs.linear.SyntheticLinearEnv`).
        rng : numpy.random.Generator
            The learner's randomness: the protocol's noise (see the module notes).
        record_arms : bool, default False
            Keep every played arm in ``extras["arms"]`` (R, T, M).

        Returns
        -------
        RunResult
            ``t`` every round, ``regret`` cumulative group regret (R, T); ``communication``
            is the mean over runs (runs synchronize different numbers of times);
            ``noise_variance`` the largest per-entry prefix-noise variance the server
            received.  ``extras``:

            * ``sync`` (R, T) bool: ``sync[r, t-1]``, run r synchronized at the end of
              round t (what another silo or the server observes);
            * ``sync_times``: per run, the rounds (1-based) at whose end it synchronized;
            * ``n_syncs`` (R,): synchronization rounds (each: M uploads, one broadcast);
            * ``first_sync`` (R,): round of the first synchronization (T + 1 if none);
            * ``n_indefinite`` (R,): synchronizations after which λ₀I + S̃_sync was not
              positive definite;
            * ``n_nonmonotone`` (R,): synchronizations at which S̃_sync,k+1 − S̃_sync,k was not
              positive semidefinite -- the nesting V_sync,k ⪯ V_sync,k+1 that the
              non-private log-det (telescoping) argument for O(log T) synchronizations
              needs fails there;
            * ``measured_noise_variance`` (R,): per run, the measured per-entry variance of
              the server's aggregated node noise Σ_i Z_{j,i} (bias entries and Gram entries
              on and above the diagonal, every release; NaN without a Gaussian tree or
              without a synchronization), and ``measured_total_variance``, the same pooled
              over all runs' releases;
            * ``arms`` (R, T, M) with ``record_arms=True``.
        """
        rng = check_rng("rng", rng)
        record_arms = check_bool("record_arms", record_arms)
        R = self._check_env(env)
        M, d, T = self.n_agents, self.dim, self.horizon
        protocol = self.protocol
        protocol.reset(n_runs=R, rng=rng)
        eye = np.eye(d)
        adaptive = self.schedule == "adaptive"
        local = self.local_updates  # serve from ũ_sync + U_i (else from the synchronized statistics only)

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

        regret = np.zeros((R, T))
        sync = np.zeros((R, T), dtype=bool)
        arms_rec = np.zeros((R, T, M), dtype=np.int32) if record_arms else None
        n_indef = np.zeros(R, dtype=np.int64)
        n_nonmono = np.zeros(R, dtype=np.int64)
        betas = self.beta(np.arange(1, T + 1))
        ridx = np.arange(R)

        tol = 1e-9 * self.feature_bound
        table_norms = None  # arms that are rows of a table: the rows' norms, once
        for block in env.iter_blocks(T):
            lazy = block.features_from_table
            dim = (block.table if lazy else block.features).shape[-1]
            if dim != d:
                raise ValueError(f"environment features have dimension {dim}, expected dim={d}")
            if lazy:
                # the block's features are formed round by round below (the same values), never all at once
                if table_norms is None:
                    table_norms = np.linalg.norm(block.table, axis=-1)
                norms = table_norms[block.arm_ids]
            else:
                norms = np.linalg.norm(block.features, axis=-1)
            if block.mask is not None:
                norms = np.where(block.mask, norms, 0.0)
            if np.any(norms > self.feature_bound + tol):
                # The protocol's calibration and β assume ‖x‖ ≤ L (the sensitivity).
                raise ValueError(f"features exceed feature_bound={self.feature_bound} (max norm {norms.max():.6g})")
            noise_blk = np.broadcast_to(block.noise, (block.n_rounds, R, M))
            for s in range(block.n_rounds):
                t = block.start + s + 1
                feats = block.round_features(s)  # this round's arms only, when formed from the table
                served = u[:, None, :] + U if local else u[:, None, :]  # (R, M or 1, d): matmul broadcasts
                theta = np.matmul(v_inv, served[..., None])[..., 0]
                mask = None if block.mask is None else block.mask[s]
                arms = select_arms(feats, theta, v_inv, betas[t - 1], mask)
                x = gather_played(feats, arms)
                mean = gather_played(block.means[s], arms)
                regret[:, t - 1] = (block.best[s] - mean).sum(axis=1)  # best (1 or R, M) broadcasts
                if record_arms:
                    arms_rec[:, t - 1] = arms
                y = mean + noise_blk[s]
                if self.reward_bound is not None:
                    np.clip(y, -self.reward_bound, self.reward_bound, out=y)
                W += x[..., :, None] * x[..., None, :]
                U += x * y[..., None]
                if local:
                    # log det(V + x xᵀ) = log det V + log(1 + xᵀV⁻¹x) (matrix determinant lemma);
                    # |·| so a noisy, indefinite V follows slogdet's log|det| as the reference does.
                    z = np.matmul(v_inv, x[..., None])[..., 0]
                    q = np.einsum("rmi,rmi->rm", x, z)
                    logdet_loc += np.log(np.abs(1.0 + q))
                    # Sherman–Morrison with the z = V⁻¹x just computed (linucb's helper would redo it).
                    v_inv -= z[..., :, None] * (z / (1.0 + q)[..., None])[..., None, :]
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
                u_new, S_new = protocol.synchronize(U[idx], W[idx], runs=idx)
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

        n_syncs = sync.sum(axis=1)
        if isinstance(protocol.randomizer, GaussianTree):
            measured = protocol.measured_noise_variance()
            # Every release of a run holds D entries: pool the runs' sums of squares.
            done = n_syncs > 0
            measured_total = (
                float(np.sum(measured[done] * n_syncs[done]) / n_syncs[done].sum()) if done.any() else math.nan
            )
        else:
            measured = np.full(R, math.nan)
            measured_total = math.nan
        extras = {
            "sync": sync,
            "sync_times": tuple(np.flatnonzero(row) + 1 for row in sync),
            "n_syncs": n_syncs,
            "first_sync": np.where(sync.any(axis=1), sync.argmax(axis=1) + 1, T + 1),
            "n_indefinite": n_indef,
            "n_nonmonotone": n_nonmono,
            "measured_noise_variance": measured,
            "measured_total_variance": measured_total,
        }
        if record_arms:
            extras["arms"] = arms_rec
        return RunResult(
            t=np.arange(1, T + 1),
            regret=np.cumsum(regret, axis=1),
            communication=self.communication(n_syncs),
            accounting=self.accounting(),
            calibration=self.calibration(),
            noise_variance=self.max_prefix_noise_variance(int(n_syncs.max())),
            extras=extras,
            learner=self.name,
            protocol=protocol.name,
        )

    def communication(self, n_syncs) -> CommunicationRecord:
        """Mean over runs of what the agents sent: per synchronization M uploads of D = d + d(d+1)/2 floats."""
        n_syncs = np.asarray(n_syncs, dtype=float)
        rounds = float(n_syncs.mean())
        payload = rounds * self.n_agents * n_coordinates(self.dim)
        return CommunicationRecord(rounds=rounds, messages=rounds * self.n_agents, payload=payload, unit="floats",
                                   bits=64.0 * payload, rounds_min=int(n_syncs.min()), rounds_max=int(n_syncs.max()))

    def max_prefix_noise_variance(self, k_max: int) -> float:
        """Largest per-entry noise variance of a prefix released at steps 1..k_max.

        The prefix at step k carries popcount(k) nodes, and the largest popcount up to
        k_max is that of 2^⌊log₂(k_max + 1)⌋ − 1.
        """
        k_max = check_int_in_range("k_max", k_max, 0, self.horizon)
        if k_max == 0 or not self.noisy:
            return 0.0
        k_star = 2 ** ((k_max + 1).bit_length() - 1) - 1
        return float(self.protocol.prefix_noise_variance(k_star))

    @classmethod
    def from_config(cls, config: dict, env):
        """Build from a configuration (see :func:`fedbandit.experiments.run_config`).

        ``protocol`` ("non-private", "dp20" with ``noise`` "corrected" / "claimed", ...),
        ``schedule`` ("adaptive", the default, or "fixed"), ``local_updates`` (see the
        constructor), for the adaptive schedule ``D``
        (a number, or "wang" -- the default -- for :func:`wang_threshold`), for the fixed one
        ``B`` (an int, or "optimal" -- the default -- for the divisor of T closest to
        sqrt(T/M)), ``T``, ``M`` and any keyword of the constructor by name.  ``D`` with
        the fixed schedule is refused; ``B`` with the adaptive one is not used (it is the
        runner's batch size, which a side-by-side configuration shares with the fixed-batch
        learners).
        """
        protocol, kw = split_params(config, cls)
        if "threshold" in kw:
            raise ValueError("give the adaptive rule's threshold as config['D'] (a number or 'wang'), not 'threshold'")
        T, M, d = config["T"], config["M"], env.dim
        schedule = check_choice("schedule", kw.get("schedule", "adaptive"), SCHEDULES)
        if schedule == "adaptive":
            # B (the runner's batch-size key, shared with the fixed-batch learners of a
            # side-by-side configuration) is not used by the adaptive rule.
            D = config.get("D", "wang")
            if isinstance(D, str):
                check_choice("D", D, ("wang",))
                D = wang_threshold(T, d, M)
            kw["threshold"] = D
        else:
            if "D" in config:
                raise ValueError(f"config has D={config['D']!r}, which schedule='fixed' does not use (it uses B)")
            B = config.get("B", "optimal")
            if isinstance(B, str):
                check_choice("B", B, ("optimal",))
                B = optimal_batch_size(T, M)
            kw["batch_size"] = B
        return cls(protocol, n_agents=M, dim=d, horizon=T, **kw)

r"""Tight audits of the tree protocols: the known-optimal test on the releases that contain one user.

In the style of Nasr et al. (2021, 2023): where the law of the adversary's view is known,
attack it with the likelihood-ratio test and draw as many trials as the bound needs.  For
a statistics protocol (:mod:`fedbandit.protocols.statistics`) run on fixed data, one user's
record v enters exactly the κ tree nodes that contain its batch (released at batches
1, 2, 4, …, 2^{κ−1} for a user of batch 1), and nothing else: between two neighbouring
inputs -- the user present or absent (add/remove; a zero record), or replaced -- the view
changes by a vector Δ that can be computed exactly, and its noise is

* Gaussian, N(0, s²) per entry, with s = σ₀ (one agent's messages: silo-level LDP), √M·σ₀
  (the sum of M agents' messages: secure aggregation, or the server adding up a shuffled
  multiset), σ (a trusted server's own tree);
* discrete Gaussian: the (modular) sum of M parties' N_Z(0, σ²/γ²) per rotated coordinate,
  plus the record's own randomized rounding (the distributed discrete Gaussian).

Then ⟨view, Δ⟩ is the optimal statistic (Neyman–Pearson; the other entries are independent
of it and of the world), and its law is that of a few noise draws per trial, so millions of
trials cost a fraction of a second.  :func:`tight_audit`:

1. computes Δ **through the implementation**: a copy of the protocol with its noise
   removed (:func:`fedbandit.audit.broken.with_noise_scale`) is run on both inputs, its
   deliveries to the server (or releases, for the central model) recorded
   (:mod:`fedbandit.audit.views`); the record must change exactly the κ node releases of its
   batch (checked);
2. **measures the noise the implementation releases**: the real protocol (as configured,
   its own randomizer's draws) is run ``check_runs`` times on world 1, and the statistic of
   *all* the attacked releases is computed from what it delivers.  Two things follow:

   * the noise-law check, **enforced**: a Kolmogorov–Smirnov test of that statistic against
     the declared law (Gaussian: the one-sample test against N(‖Δ‖², s²‖Δ‖²), and the same
     test of every attacked release's own projection ⟨release_k − view₀_k, Δ_k⟩ against
     N(‖Δ_k‖², s²‖Δ_k‖²) -- a release whose node noise is missing --, Bonferroni over the
     κ' + 1 tests; discrete Gaussian: the two-sample test against 20·``check_runs`` draws of
     the fast sampler) at the false-alarm rate α = :data:`LAW_ALPHA` (10⁻³).  A rejection makes the report
     "noise law rejected" (:attr:`~fedbandit.audit.harness.AuditReport.noise_law_rejected`),
     which counts as not passing (``consistent`` is False).  Power against a quarter-noise
     bug: the KS distance between N(0, 1) and N(0, 1/16) is sup|Φ(x) − Φ(4x)| = 0.291, and
     the 10⁻³ critical value is 0.137 at 200 runs, 0.061 at 1000 (at the Bonferroni level
     α/(κ' + 1), 2·10⁻⁴ for the κ' = 4 nodes of 8 batches: 0.152 at 200 runs, 0.068 at 1000;
     at least :data:`MIN_CHECK_RUNS` = 1000 runs are made; a long tree, whose attacked releases
     reach past step 64, gets :data:`LONG_TREE_CHECK_RUNS` = 200: 0.161 for the κ' = 16 nodes of
     the user-level learner's 64,000 steps), so already at 200 runs the test rejects with
     probability > 0.999 (the binomial bound at the sup point; ``tests/test_planted_noise.py``
     computes it);
   * the **trials' scale is the implementation's**: the noise scale of the trials is the
     declared s times ρ⁺, the (1 − α) upper confidence bound of the measured ratio
     ρ = std(real statistic)/std(declared statistic) (χ² bound on the sample variance, n − 1
     degrees of freedom).  An implementation that adds less noise than it declares is
     audited at its own, smaller noise (a quarter-noise bug audits like the broken variant),
     and one that adds more is not over-audited; the bound holds at confidence
     ``confidence`` − α (union bound over the scale's confidence bound);
3. draws ``n_trials`` (plus selection trials) of the statistic from that law and audits
   it with Clopper–Pearson bounds (:func:`fedbandit.audit.epsilon.audit_epsilon_split`);
4. reports the exact ε of the attacked releases (Gaussian: μ = ‖Δ‖/s, the exact Gaussian
   privacy profile of Balle & Wang), which bounds what any audit of them can find, and of
   the first release alone;
5. the power check **mutates the implementation**, not the declared σ: the same pipeline
   (steps 1–3) is run on the same protocol with its randomizer's noise draw patched to
   ``broken_factor`` times its noise (:func:`fedbandit.audit.broken.planted_noise`; the
   declared σ, calibration and claim unchanged).  Its bound must exceed the claim.

Neighbouring pair (the adversary's options, searched): the target is agent 0's first user
of batch 1 with every other record zero.  Which batch: the user of batch 1 enters the most
node releases (κ', the largest number of levels: batches 1, 2, 4, …), every other batch at
most as many with the same per-node change, so batch 1 maximizes ‖Δ‖; which agent: the
agents are exchangeable (same σ₀, same view); what the other silos hold: the view is
linear in the records and the noise does not depend on them, so the change Δ is the same
whatever they hold (zeros here).  The record pair is :func:`target_records`: for
add/remove the record of largest norm, for replace the pair of largest record change
(checked in ``tests/test_audit.py`` against ‖Δ(xy)‖² + ‖Δ(xxᵀ)‖² written out).

The claim audited is the protocol's accounting for its configured run (all K releases):
an attack on a subset of the releases is an attack on the run.  Sampling the discrete
Gaussian sum of κ·M parties as one discrete Gaussian changes any event's probability by
at most the [KLS21] closeness bound, and modular wrap-around by at most its tail bound; both
are added to the Clopper–Pearson intervals (``slack``), so the bound stays valid.
"""

from __future__ import annotations

import copy
import math
import time

import numpy as np
from scipy import stats

from fedbandit._validation import (
    MAX_STEPS,
    check_choice,
    check_delta,
    check_nonnegative_float,
    check_positive_float,
    check_positive_int,
    check_probability,
    check_rng,
    check_str,
)
from fedbandit.accounting.amplification import gaussian_epsilon_exact
from fedbandit.accounting.ddg import sum_closeness_bound
from fedbandit.audit.broken import planted_noise, with_noise_scale
from fedbandit.audit.epsilon import audit_epsilon_split
from fedbandit.audit.harness import AuditReport, claim_of, worlds_relation
from fedbandit.audit.views import nodes_from_prefixes, tapped, tree_nodes_containing
from fedbandit.mechanisms.ddg import clip_l2, conditional_randomized_round
from fedbandit.mechanisms.discrete_gaussian import sample_discrete_gaussian
from fedbandit.protocols.statistics import (
    CentralTree,
    DiscreteGaussianTree,
    ExactStatistics,
    GaussianTree,
    StatisticsProtocol,
    pack_statistics,
    user_records,
)

__all__ = [
    "TightAudit",
    "tight_audit",
    "target_records",
]

#: Most runs of the real protocol in a noise-law check (each run is a row of its state).
MAX_CHECK_RUNS = 10**6

#: Fewest runs of the real protocol in a noise-law check: the trials' scale bound
#: ρ⁺ ≈ 1 + 3.09/√(2n) then costs the audit at most ~7 % of μ (a check run is one vectorized
#: row of the protocol: cheap next to the trials).
MIN_CHECK_RUNS = 1000
#: The same floor for the discrete Gaussian trees, whose exact sampler costs about a second per
#: paper-scale run: their KS check still has power against a quarter-noise bug at 100 runs (the
#: distance 0.29 against a critical value below 0.2 at α = 1e-3), and the trials' noise scale is
#: measured per released coordinate, not per run.
MIN_CHECK_RUNS_DDG = 100
#: The check's runs on a long tree: a check run walks the protocol through every step up to the
#: last attacked release, so where that release is past step :data:`LONG_TREE_STEPS` (the super
#: agent's 2,000 releases, the user-level learner's one per user: 64,000 at chapter 6's paper scale)
#: the runs are capped at 200.  The KS check keeps its power there (critical value 0.161 at the
#: Bonferroni level of κ' = 16 releases, against the quarter-noise distance 0.291), and the trials'
#: scale bound ρ⁺ rests on κ'·n·|support| ≥ 8·200·2 = 3,200 released coordinates (ρ⁺ ≈ 1 + 3.09/√6400
#: ≈ 1.04 at worst, 1.03 for κ' = 16, against 1.01 at 1000 runs: μ of the trials a few % lower).
LONG_TREE_CHECK_RUNS = 200
#: The last attacked step beyond which a tree is long (:data:`LONG_TREE_CHECK_RUNS`).
LONG_TREE_STEPS = 64
#: Runs of the real protocol per chunk of the noise-law check (bounds its memory, not its result's law).
_CHECK_CHUNK = 100

#: False-alarm rate of the enforced noise-law check (Kolmogorov–Smirnov) and of the measured
#: noise scale's upper confidence bound.
LAW_ALPHA = 1e-3

#: Draws of the fast sampler per check run in the discrete Gaussian's two-sample test.
_FAST_PER_RUN = 20


def target_records(dim: int, relation: str, feature_bound: float = 1.0, reward_bound: float = 1.0):
    """The neighbouring users of a tight audit: ((x₀, y₀) or None, (x₁, y₁)).

    add/remove: x₁ = L·e₁, y₁ = Y (the record of largest norm, sqrt((LY)² + L⁴)) against
    no user.  replace: x₀ = L·(e₁/2 + (√3/2)e₂), y₀ = −Y against x₁ = L·e₁, y₁ = Y: the
    angle of 60° maximizes ‖x₁y₁ − x₀y₀‖² + ‖x₁x₁ᵀ − x₀x₀ᵀ‖² for unit features [derived]
    (d = 1: x₀ = L, y₀ = −Y).
    """
    dim = check_positive_int("dim", dim, max_value=MAX_STEPS)
    relation = check_choice("relation", relation, ("add-remove", "replace"))
    L = check_positive_float("feature_bound", feature_bound)
    Y = check_positive_float("reward_bound", reward_bound)
    x1 = np.zeros(dim)
    x1[0] = L
    if relation == "add-remove":
        return None, (x1, Y)
    x0 = np.zeros(dim)
    if dim == 1:
        x0[0] = L
    else:
        x0[0], x0[1] = 0.5 * L, math.sqrt(3.0) / 2.0 * L
    return (x0, -Y), (x1, Y)


def _view_of(protocol):
    """(view name, per-entry noise std of that view) of a configured statistics protocol."""
    r, a, s = protocol.randomizer, protocol.analyzer, protocol.intermediary
    if isinstance(a, CentralTree):
        return "releases", float(a.sigma)
    if isinstance(r, ExactStatistics):
        raise ValueError(f"protocol {protocol.name!r} is not private: there is no noise law to audit")
    if isinstance(r, GaussianTree):
        if s.view == "messages":
            return "sender", float(r.sigma0)
        return ("sum" if s.view == "sum" else "multiset"), math.sqrt(protocol.n_agents) * float(r.sigma0)
    if isinstance(r, DiscreteGaussianTree):
        return ("sum" if s.view == "sum" else "multiset"), float(r.params.sigma_int)
    raise ValueError(f"protocol {protocol.name!r} (randomizer {r.name!r}): no known noise law for a tight audit")


def _feed(protocol, world_users, steps, n_runs, rng, keep=None):
    """Run a (tapped) protocol for ``steps`` batches on fixed data: the target user (or none)
    is agent 0's first user of batch 1; every other record is zero.  ``world_users`` may be
    a list of one user (or None) per run.  Returns the protocol, the tap and the recorder.

    A protocol that encodes every user's record (the distributed discrete Gaussian: each
    record rotated and randomly rounded) is handed one record per agent and batch -- the
    target's or a zero one -- instead of B: a zero record rotates and rounds to exactly zero
    and adds nothing, so the batch is the same input as with B − 1 more zero records (absent
    users), at 1/B of the encoding cost.  The others take the batch sums only.

    ``keep`` (steps, 1-based, powers of two): record only the deliveries and releases of those
    steps (the releases containing user 1), in order; the others are dropped as they come, so
    a long tree (the user-level learner's M·T steps) does not hold every step's view of every
    run.  Without it every step is recorded."""
    keep = None if keep is None else frozenset(keep)
    if keep is not None and any(k & (k - 1) for k in keep):
        raise ValueError(f"keep must hold powers of two (the releases of batch 1), got {sorted(keep)}")
    p, tap, rec = tapped(protocol)
    needs = p.needs_user_data
    M, d, B = p.n_agents, p.dim, 1 if needs else p.batch_size
    p.reset(n_runs=n_runs, rng=rng)
    per_run = world_users if isinstance(world_users, list) else [world_users] * n_runs
    x = np.zeros((B, n_runs, M, d))
    y = np.zeros((B, n_runs, M))
    for r, u in enumerate(per_run):
        if u is not None:
            x[0, r, 0] = u[0]
            y[0, r, 0] = u[1]
    zb, zg = np.zeros((n_runs, M, d)), np.zeros((n_runs, M, d, d))
    zx, zy = np.zeros_like(x), np.zeros_like(y)
    for k in range(1, steps + 1):
        n_tap, n_rec = len(tap.records), len(rec.records)
        if k == 1:
            bias = np.einsum("brmd,brm->rmd", x, y)
            gram = np.einsum("brmi,brmj->rmij", x, x)
            p.synchronize(bias, gram, users=(x, y) if needs else None)
        else:
            p.synchronize(zb, zg, users=(zx, zy) if needs else None)
        if keep is not None and k not in keep:
            del tap.records[n_tap:], rec.records[n_rec:]
    return p, tap, rec


def _views(p, tap, rec, view, kept=False):
    """Per release step: the adversary's view, (steps, R, F); with ``kept`` (a :func:`_feed` with
    ``keep``), per kept step.  The node released at a power of two 2^j is the prefix sum itself
    (the only set bit of 2^j is j: no older node enters it)."""
    if view == "releases":
        pref = np.stack([pack_statistics(b, g) for b, g in rec.records])
        return pref if kept else nodes_from_prefixes(pref)
    recs = np.stack(tap.records).astype(np.float64)
    if view == "sender":
        return recs[:, :, 0, :]
    if view == "multiset":
        if p.randomizer.message == "integer":  # the server adds the residues mod m
            return np.mod(recs.sum(axis=2), p.randomizer.params.modulus)
        return recs.sum(axis=2)
    return recs  # "sum": the secure aggregation's output


class GaussianTrials:
    """Vectorized trials of ⟨view − view₀, Δ⟩ with view = view₀ + 1[world 1]·Δ + N(0, s² I).

    The projection of N(0, s² I) on Δ is N(0, s²‖Δ‖²): one draw per trial has exactly the
    law of the statistic of the whole view (the other directions are independent of it).
    """

    def __init__(self, delta_vec, s):
        self.delta_vec = np.asarray(delta_vec, dtype=float)
        self.s = float(s)
        self.norm2 = float(self.delta_vec @ self.delta_vec)

    def __call__(self, world, rng, n):
        # the auditor's own draw (not the implementation's, which a planted bug may patch)
        out = rng.standard_normal(n) * (self.s * math.sqrt(self.norm2))
        if world[1] == 1:
            out += self.norm2
        return out


class _DDGTrials:
    """Vectorized trials of Σ_j ⟨centered residue_j, u⟩ over the κ' node releases of a DDG tree.

    The target's rounded record r (conditional randomized rounding of u₁ = its flattened,
    scaled record; u₀ for world 0) enters every node; the M parties' noise of the κ' nodes
    adds up, per coordinate, to a sum of κ'·M discrete Gaussians, drawn as one discrete
    Gaussian of scale σ_int·sqrt(κ'M) (the [KLS21] closeness bound goes into the slack).
    """

    def __init__(self, u0, u1, bound_int, sigma_int, n_nodes, n_parties):
        self.u0, self.u1 = np.asarray(u0, dtype=float), np.asarray(u1, dtype=float)
        self.direction = self.u1 - self.u0
        self.bound_int = float(bound_int)
        self.sigma_sum = float(sigma_int) * math.sqrt(n_nodes * n_parties)
        self.n_nodes = int(n_nodes)

    def __call__(self, world, rng, n):
        # the auditor's own samplers, bound at import (a planted bug patches the package's)
        conditional_randomized_round, sample_discrete_gaussian = _EXACT_SAMPLERS

        u = self.u1 if world[1] == 1 else self.u0
        out = np.empty(n)
        chunk = max(1, 4_000_000 // max(1, u.size))
        for start in range(0, n, chunk):
            c = min(chunk, n - start)
            r = conditional_randomized_round(np.broadcast_to(u, (c, u.size)), self.bound_int, rng)
            w = sample_discrete_gaussian(self.sigma_sum, (c, u.size), rng)
            out[start:start + c] = (self.n_nodes * r + w) @ self.direction
        return out


def _never_drawn(g) -> bool:
    """Whether a spawned generator is still at its starting state (nothing was drawn from it)."""
    if g is None:
        return True
    bg = g.bit_generator
    return bg.state == type(bg)(bg.seed_seq).state


#: Whether :func:`tight_audit`'s power check reuses the correct variant's noise-free views (when its feed drew
#: nothing: the same floats); ``tests/test_planted_noise.py`` compares both ways.
_REUSE_QUIET = True


def _exact_samplers():
    return conditional_randomized_round, sample_discrete_gaussian


_EXACT_SAMPLERS = _exact_samplers()


class TightAudit:
    """The exact change and noise law of one configured statistics protocol's releases of one user.

    Parameters
    ----------
    protocol : StatisticsProtocol
        Configured for the run (by its learner, or ``configure(...)``).
    rng : numpy.random.Generator
        For the implementation checks.
    check_runs : int, default 2000
        Runs of the real protocol (world 1, every attacked release) in the noise-law check
        and the noise measurement (at least :data:`MIN_CHECK_RUNS`; on a long tree, exactly
        :data:`LONG_TREE_CHECK_RUNS`).
    quiet : tuple of arrays, optional
        The ``quiet_views`` of an earlier TightAudit of the same protocol (the power check's
        is the correct variant's): used instead of running the noise-free twin again, the same
        floats (its feed drew no noise and shuffled nothing), and ``rng`` advanced as that run
        would (two spawned streams).  Not for the discrete Gaussian (its twin draws).

    Attributes
    ----------
    declared_trials
        The sampler of the declared law (exact ε, the law check's reference).
    trials
        The sampler of the audit: the declared law at the implementation's measured noise
        scale (declared scale × ``noise_ratio_upper``).
    noise_check_p, noise_ratio, noise_ratio_upper : float
        The KS p-value (against the declared law), the measured ratio of the real noise to
        the declared one, and its (1 − α) upper confidence bound.
    quiet_views : tuple of arrays or None
        The noise-free twin's views (run 0, run 1) where its feed drew nothing from either of
        its streams (a Gaussian or central tree at σ = 0, no shuffle), else None.
    """

    def __init__(self, protocol, rng, *, check_runs=2000, quiet=None):
        if not isinstance(protocol, StatisticsProtocol):
            raise TypeError(f"protocol must be a configured StatisticsProtocol, got {type(protocol).__name__}")
        protocol._require()
        rng = check_rng("rng", rng)
        self.ddg = isinstance(protocol.randomizer, DiscreteGaussianTree)
        check_runs = check_positive_int("check_runs", check_runs, max_value=MAX_CHECK_RUNS,
                                        reason="every check run is a run of the protocol")
        K = protocol.n_batches
        self.steps = tree_nodes_containing(1, K)
        last = self.steps[-1]
        if self.ddg:
            self.check_runs = max(MIN_CHECK_RUNS_DDG, check_runs)
        elif last > LONG_TREE_STEPS:
            self.check_runs = LONG_TREE_CHECK_RUNS
        else:
            self.check_runs = max(MIN_CHECK_RUNS, check_runs)
        self.protocol = protocol
        self.view, self.s = _view_of(protocol)
        self.users0, self.users1 = target_records(protocol.dim, protocol.relation, protocol.feature_bound,
                                                  protocol.reward_bound or 1.0)
        # 1. the exact change, through the implementation (noise removed)
        # (the discrete Gaussian keeps a negligible noise: its sampler needs σ > 0)
        # ``quiet``: the noise-free views (run 0, run 1) of an earlier TightAudit of the same protocol whose
        # feed drew nothing (quiet_views): recomputing them would give the same floats
        self.quiet_views = None
        if quiet is not None and not (isinstance(quiet, tuple) and len(quiet) == 2 and all(
                isinstance(v, np.ndarray) and v.dtype == np.float64 and v.ndim == 2 and v.shape[0] == last
                for v in quiet) and quiet[0].shape == quiet[1].shape):
            raise TypeError(f"quiet must be None or the quiet_views of a TightAudit of the same protocol (two float "
                            f"arrays of {last} rows), got {quiet!r:.80}")
        if quiet is not None and _REUSE_QUIET and not self.ddg:
            v0, v1 = quiet
            rng.spawn(2)  # what the feed's reset takes from rng: the streams spawned after it are the same
        else:
            twin = with_noise_scale(protocol, 1e-9 if self.ddg else 0.0)
            fed = _feed(twin, [self.users0, self.users1], last, 2, rng)
            both = _views(*fed, self.view)  # run 0, run 1
            v0, v1 = both[:, 0], both[:, 1]
            if not self.ddg and _never_drawn(fed[0]._noise_rng) and _never_drawn(fed[0]._shuffle_rng):
                # no noise drawn, no shuffle: the views are a function of the protocol and the users only
                self.quiet_views = (v0.copy(), v1.copy())
        if self.ddg:
            m = protocol.randomizer.params.modulus
            v0 = np.mod(v0 + m // 2, m) - m // 2
            v1 = np.mod(v1 + m // 2, m) - m // 2
        change = v1 - v0
        changed = [k + 1 for k in range(last) if np.any(np.abs(change[k]) > (0.5 if self.ddg else 1e-9))]
        if changed != self.steps:
            raise AssertionError(
                f"protocol {protocol.name!r}: one user's record changed the releases at batches {changed}, "
                f"expected exactly the tree nodes of its batch {self.steps}"
            )
        self.change = change[np.asarray(self.steps) - 1]  # (κ', F)
        self.view0 = v0[np.asarray(self.steps) - 1]
        if self.ddg:
            self._setup_ddg()
        else:
            self.delta_vec = self.change.reshape(-1)
            self.support = np.flatnonzero(self.delta_vec)
            self.declared_trials = GaussianTrials(self.delta_vec[self.support], self.s)
            self.slack = 0.0
        # 2. the noise the implementation releases: the law check (enforced) and the trials' scale
        self.alpha = LAW_ALPHA
        self.noise_check_p, self.noise_ratio, self.noise_ratio_upper = self._check_noise(rng)
        if self.ddg:
            self.trials = self._ddg_trials(self.noise_ratio_upper)
        else:
            self.trials = GaussianTrials(self.delta_vec[self.support], self.s * self.noise_ratio_upper)

    @property
    def noise_law_rejected(self) -> bool:
        """The KS test rejected the declared noise law at α = :data:`LAW_ALPHA`."""
        return bool(self.noise_check_p < self.alpha)

    def _ddg_trials(self, ratio=1.0):
        r = self.protocol.randomizer
        return _DDGTrials(self.u0, self.u1, r.params.delta2_int, r.params.sigma_int * ratio, len(self.steps),
                          self.protocol.n_agents)

    def _setup_ddg(self):
        p = self.protocol
        r = p.randomizer

        def scaled(users):
            if users is None:
                return np.zeros(r.params.d_pad)
            v = user_records(np.asarray(users[0])[None], np.asarray([users[1]]))[0]
            return r.mechanism.flattener.flatten(clip_l2(v, r.clip)) / r.params.gamma

        self.u0, self.u1 = scaled(self.users0), scaled(self.users1)
        n_nodes, n_parties = len(self.steps), p.n_agents
        self.declared_trials = self._ddg_trials()
        # closeness of a sum of N discrete Gaussians to one (chained [KLS21] Thm. 11), per coordinate
        s2 = r.params.sigma_int**2
        N = n_nodes * n_parties
        d_inf = sum(sum_closeness_bound(k * s2, s2) for k in range(1, N))
        tv = r.params.d_pad * math.expm1(d_inf)
        # modular wrap-around: some node coordinate leaves [-m/2, m/2) (sub-Gaussian tails of
        # the sum of M discrete Gaussians, variance proxy M σ², [CKS20])
        m = r.params.modulus
        room = m / 2 - r.params.delta2_int - 1
        wrap = 2 * n_nodes * r.params.d_pad * math.exp(-room**2 / (2 * n_parties * s2)) if room > 0 else 1.0
        self.slack = min(0.5, tv + wrap)
        self.delta_vec = None

    def _statistic_of_views(self, v):
        """The statistic from the recorded views (κ', R, F) of the real protocol at the attacked steps."""
        if self.ddg:
            m = self.protocol.randomizer.params.modulus
            v = np.mod(v + m // 2, m) - m // 2
            return np.einsum("krf,f->r", v, self.declared_trials.direction)
        v = v - self.view0[:, None, :]
        flat = np.moveaxis(v, 1, 0).reshape(v.shape[1], -1)
        return flat[:, self.support] @ self.declared_trials.delta_vec

    def _check_noise(self, rng):
        """(KS p-value, measured noise ratio ρ, its (1 − α) upper bound ρ⁺) from the real protocol.

        The real protocol (a copy, with its own randomizer) runs ``check_runs`` times on
        world 1 over every attacked release; the statistic of those releases is tested
        against the declared law and its spread compared with the declared one.
        """
        n = self.check_runs
        # in chunks of runs: the recorded views are (steps, runs, agents, F) and at a paper-scale
        # setting 1000 runs of them take gigabytes; only the statistics are kept
        real, per_release = [], []
        for start in range(0, n, _CHECK_CHUNK):
            p1 = copy.deepcopy(self.protocol)
            # only the attacked releases are kept (κ' of them, not every step's view of every run)
            v = _views(*_feed(p1, self.users1, self.steps[-1], min(_CHECK_CHUNK, n - start), rng, keep=self.steps),
                       self.view, kept=True)
            real.append(self._statistic_of_views(v))
            if self.ddg:
                m = self.protocol.randomizer.params.modulus
                v = np.mod(v + m // 2, m) - m // 2
            per_release.append(v - self.view0[:, None, :])
            del p1
        real = np.concatenate(real)
        if self.ddg:
            fast = self.declared_trials((None, 1), rng, _FAST_PER_RUN * n)
            p_value = float(stats.ks_2samp(real, fast).pvalue)
            declared_sd = float(np.std(fast, ddof=1))
        else:
            t = self.declared_trials
            declared_sd = t.s * math.sqrt(t.norm2)
            p_value = float(stats.kstest(real, "norm", args=(t.norm2, declared_sd)).pvalue)
            # and every attacked release on its own (a node whose noise is missing), Bonferroni
            # over the κ' + 1 tests: the reported p-value is (κ' + 1) × the smallest
            v = np.concatenate(per_release, axis=1)  # world 1's releases minus world 0's noise-free ones
            per = [p_value]
            for k in range(len(self.steps)):
                c = self.change[k]
                n2 = float(c @ c)
                if n2 > 0:
                    per.append(float(stats.kstest(v[k] @ c, "norm", args=(n2, t.s * math.sqrt(n2))).pvalue))
            p_value = min(1.0, len(per) * min(per))
        var = float(np.var(real, ddof=1)) if n > 1 else math.inf
        ratio = math.sqrt(var) / declared_sd
        # The trials' noise scale: the (1 − α) upper bound of the released noise's standard deviation
        # per coordinate (every attacked release, every run: κ'·n·F draws, not n), against the
        # declared one -- s for a Gaussian view, sqrt(M)·σ_int for the DDG sum of M parties (whose
        # variance is below σ_int² each; the target's rounding, bounded by 1, only adds to it).
        res = np.concatenate(per_release, axis=1) - self.change[:, None, :]
        if not self.ddg:  # the coordinates the statistic reads
            res = np.moveaxis(res, 1, 0).reshape(res.shape[1], -1)[:, self.support]
        coord_sd = math.sqrt(self.protocol.n_agents) * float(self.protocol.randomizer.params.sigma_int) \
            if self.ddg else float(self.s)
        n_coord = res.size
        mean_sq = float(np.mean(np.square(res)))
        upper = math.sqrt(n_coord * mean_sq / stats.chi2.ppf(self.alpha, n_coord)) / coord_sd
        return p_value, ratio, upper

    @property
    def mu(self) -> float:
        """‖Δ‖/s: the Gaussian view's privacy parameter (NaN for the discrete Gaussian)."""
        if self.ddg:  # Gaussian limit: κ'‖u‖² mean shift, sqrt(κ'M)σ_int‖u‖ spread (rounding aside)
            t = self.declared_trials
            return float(np.linalg.norm(t.direction) * len(self.steps) / t.sigma_sum)
        return float(np.linalg.norm(self.delta_vec) / self.s)

    def exact_epsilon(self, delta) -> float:
        """Exact ε at δ of the attacked releases (Gaussian); the Gaussian limit for DDG."""
        return gaussian_epsilon_exact(self.mu, delta)

    def first_release_epsilon(self, delta) -> float:
        """Exact ε at δ of the first release alone (one of the κ nodes)."""
        return gaussian_epsilon_exact(self.mu / math.sqrt(len(self.steps)), delta)


def tight_audit(protocol, n_trials, *, rng, n_select=None, confidence=0.95, delta=None, broken_factor=0.25,
                check_runs=2000, name=None) -> AuditReport:
    """Known-optimal-test audit of the releases of one user of a configured statistics protocol.

    Parameters
    ----------
    protocol : StatisticsProtocol
        Configured for the run (e.g. ``learner.protocol``).
    n_trials : int
        Counted trials per input (millions are cheap).
    rng : numpy.random.Generator
    n_select : int, optional
        Threshold-selection trials (default ``n_trials // 4``).
    confidence : float, default 0.95
        Of the Clopper–Pearson bound.
    delta : float, optional
        δ of the claim (default the protocol's target δ).
    broken_factor : float or None, default 0.25
        The power check's planted bug: the randomizer's noise draws × ``broken_factor``
        (:func:`fedbandit.audit.broken.planted_noise`; None: no power check).
    check_runs : int
        Runs of the real protocol in the noise-law check and noise measurement (at least
        :data:`MIN_CHECK_RUNS` = 1000; the power check uses 1000; a long tree
        :data:`LONG_TREE_CHECK_RUNS` = 200 in both).
    name : str, optional

    Returns
    -------
    AuditReport
        ``kind="tight"``; ``exact_epsilon`` is the exact ε of the attacked releases under the
        declared law, the most any audit of a correct implementation can find;
        ``noise_check_p`` the KS p-value of the implementation's released statistic against
        the declared law (rejected below ``noise_check_alpha`` = :data:`LAW_ALPHA`: the report
        then does not pass, ``consistent`` is False); ``noise_ratio`` the measured noise over
        the declared one.  The bound holds at ``confidence`` − α.
    """
    rng = check_rng("rng", rng)
    n_trials = check_positive_int("n_trials", n_trials)
    confidence = check_probability("confidence", confidence)
    if delta is not None:
        delta = check_delta("delta", delta)
    if broken_factor is not None:
        broken_factor = check_nonnegative_float("broken_factor", broken_factor)
    check_runs = check_positive_int("check_runs", check_runs, max_value=MAX_CHECK_RUNS,
                                    reason="every check run is a run of the protocol")
    if name is not None:
        check_str("name", name)
    t0, c0 = time.perf_counter(), time.process_time()
    ta = TightAudit(protocol, rng, check_runs=check_runs)
    delta = protocol.target_delta if delta is None else delta
    claim, status = claim_of(protocol.accounting())
    key = id(ta)
    res = audit_epsilon_split(ta.trials, (key, 0), (key, 1), _identity, n_trials, n_select=n_select, delta=delta,
                              confidence=confidence, rng=rng, neighbouring=worlds_relation, vectorized=True,
                              slack=ta.slack)
    broken_res = None
    broken = ""
    broken_p = math.nan
    if broken_factor is not None:
        # the power check mutates the code: the randomizer's own draws × broken_factor, σ declared as before
        with planted_noise(max(broken_factor, 1e-12)):
            # (its noise-free views are the correct variant's when their feed drew no noise: the planted bug
            # scales noise draws, and there were none)
            tb = TightAudit(protocol, rng, check_runs=MIN_CHECK_RUNS_DDG if ta.ddg else MIN_CHECK_RUNS,
                            quiet=ta.quiet_views)
        broken_res = audit_epsilon_split(tb.trials, (key, 0), (key, 1), _identity, n_trials, n_select=n_select,
                                         delta=delta, confidence=confidence, rng=rng, neighbouring=worlds_relation,
                                         vectorized=True, slack=tb.slack)
        broken_p = tb.noise_check_p
        broken = (f"planted bug: the randomizer's noise draw × {broken_factor:g} (code patched, declared σ kept; "
                  f"measured noise × {tb.noise_ratio:.3g}, law check p = {broken_p:.2g})")
    what = {"sender": "agent 0's messages", "sum": "the aggregate (secure aggregation)",
            "multiset": "the sum of the shuffled messages", "releases": "the server's node releases"}[ta.view]
    return AuditReport(
        name=name or protocol.name,
        kind="tight",
        view=f"{what}: the {len(ta.steps)} releases containing user 1 (batches {ta.steps})",
        attack=("projection on the exact change (likelihood ratio)" + (", discrete Gaussian" if ta.ddg else "")
                + f"; trials at the implementation's measured noise (× {ta.noise_ratio_upper:.3g}, the "
                f"{1 - ta.alpha:.1%} upper bound of {ta.noise_ratio:.3g} from {ta.check_runs} runs); noise-law KS "
                f"p = {ta.noise_check_p:.2g}" + (" -- REJECTED" if ta.noise_law_rejected else "")),
        relation=protocol.relation,
        claimed_epsilon=claim,
        delta=float(delta),
        status=status,
        result=res,
        broken=broken,
        broken_result=broken_res,
        exact_epsilon=ta.exact_epsilon(delta),
        first_release_epsilon=ta.first_release_epsilon(delta),
        n_trials=n_trials,
        confidence=confidence,
        seconds=time.perf_counter() - t0,
        cpu_seconds=time.process_time() - c0,
        noise_check_p=ta.noise_check_p,
        noise_check_alpha=ta.alpha,
        noise_ratio=ta.noise_ratio,
        noise_ratio_upper=ta.noise_ratio_upper,
        check_runs=ta.check_runs,
    )


def _identity(batch):
    return batch

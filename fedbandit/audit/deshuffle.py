r"""The de-shuffling attack on a shuffle protocol of Gaussian messages, run on the code.

A shuffler hides the senders, not the messages.  The adversary of shuffle DP (the server)
chooses the data; :func:`fedbandit.accounting.deshuffle.deshuffle_scenarios` lists its options
(which direction e to project on, what the other silos hold, which batches are filled).
On each option the law of the attack's statistic is known in closed form
(:mod:`fedbandit.accounting.deshuffle`), so the search picks the option with the largest
exact ε, and the audit then attacks **the real protocol** on it:

1. the data: every user of the target silo (agent 0) in the filled batches holds the
   largest record x = L e₁, y = Y; the target user (user 1 of batch 1) is absent (add/remove)
   or holds y = −Y (replace) in world 0; every user of the other silos holds the record
   pointing away from the target's (or zero), as the scenario says;
2. the protocol -- a copy of the configured one, its shuffler's deliveries to the server
   tapped (:func:`fedbandit.audit.views.tapped`) -- runs on those data for every trial
   (vectorized over runs), and the statistic is computed from the delivered multisets of the
   κ releases containing the target user: per release, T_j = the largest projection of the
   M shuffled messages on e; the attack's score is Σ_j log f₁(T_j)/f₀(T_j) with the exact
   laws of T_j (the Neyman–Pearson test of (T_1, …, T_κ));
3. the threshold is chosen on held-out selection trials and the bound is a Clopper–Pearson
   lower bound on fresh trials (:func:`fedbandit.audit.epsilon.audit_epsilon_split`).

Before the trials the data are checked through the implementation: with the noise removed
(:func:`fedbandit.audit.broken.with_noise_scale`) the delivered projections must be exactly
the scenario's node means (the target's μ_w, and c for the M − 1 others).  The report's
``exact_epsilon`` is the exact ε of the attacked statistic -- the most this attack can
find -- and a lower bound on the protocol's ε.
"""

from __future__ import annotations

import time

import numpy as np

from fedbandit._validation import (
    check_delta,
    check_positive_int,
    check_probability,
    check_rng,
    check_str,
)
from fedbandit.accounting.deshuffle import deshuffle_scenarios, deshuffled_gaussian_epsilon, deshuffled_max_logpdf
from fedbandit.audit.broken import with_noise_scale
from fedbandit.audit.epsilon import audit_epsilon_split
from fedbandit.audit.harness import AuditReport, claim_of, worlds_relation
from fedbandit.audit.views import tapped, tree_nodes_containing
from fedbandit.protocols.statistics import GaussianTree, StatisticsProtocol

__all__ = [
    "DeshuffleAudit",
    "deshuffle_audit",
]

#: Most protocol runs held in memory at once (each holds M messages of D floats per release).
MAX_CHUNK = 100_000
#: Most trials per world (each is a run of the real protocol).
MAX_TRIALS = 10**7


def _check_protocol(protocol):
    if not isinstance(protocol, StatisticsProtocol):
        raise TypeError(f"protocol must be a configured StatisticsProtocol, got {type(protocol).__name__}")
    protocol._require()
    if not isinstance(protocol.randomizer, GaussianTree) or protocol.intermediary.view != "multiset":
        raise ValueError(
            f"protocol must send Gaussian-tree messages through a shuffler (view 'multiset'), got protocol "
            f"{protocol.name!r} with randomizer {protocol.randomizer.name!r} and intermediary {protocol.intermediary.name!r}"
        )
    return protocol


class DeshuffleAudit:
    """The de-shuffling attack on one configured shuffle protocol: the search, the data, the trials.

    Parameters
    ----------
    protocol : StatisticsProtocol
        Configured, with a :class:`~fedbandit.protocols.statistics.GaussianTree` randomizer and
        a shuffler (``sdp-amplification``).
    delta : float, optional
        δ at which the scenarios are compared (default the protocol's target δ).
    chunk : int, default 2000
        Protocol runs per vectorized call (memory: chunk·M·D floats per release).

    Attributes
    ----------
    search : list of (DeshuffleScenario, float)
        Every scenario of :func:`fedbandit.accounting.deshuffle.deshuffle_scenarios` with its exact ε.
    scenario : DeshuffleScenario
        The one attacked: the largest exact ε (near-ties, within 1e-4, to the first listed).
    steps : list of int
        The batches whose releases contain the target user.
    direction : numpy.ndarray
        e in the packed coordinates (bias, upper Gram triangle).
    """

    def __init__(self, protocol, *, delta=None, chunk=2000):
        p = _check_protocol(protocol)
        if p.needs_user_data:  # pragma: no cover - the Gaussian tree never does
            raise ValueError(f"protocol {p.name!r} needs the users' records; the attack feeds batch sums")
        self.protocol = p
        self.delta = p.target_delta if delta is None else check_delta("delta", delta)
        if self.delta is None:
            raise ValueError(f"protocol {p.name!r} has no target δ: pass delta")
        self.chunk = check_positive_int("chunk", chunk, max_value=MAX_CHUNK, reason="chunk runs are held in memory")
        self.sigma0 = float(p.randomizer.sigma0)
        y = 1.0 if p.reward_bound is None else p.reward_bound
        self.search = [
            (s, deshuffled_gaussian_epsilon(self.delta, self.sigma0, p.n_agents, s.means0, s.means1, s.others_means))
            for s in deshuffle_scenarios(p.batch_size, p.kappa, p.feature_bound, y, p.relation)
        ]
        # the largest exact ε; near-ties (1e-4, the discretization's size) go to the earlier scenario
        top = max(e for _, e in self.search)
        self.scenario, self._exact = next(se for se in self.search if se[1] >= top - 1e-4 * max(1.0, top))
        self.steps = tree_nodes_containing(1, p.n_batches)
        if len(self.steps) != p.kappa:  # pragma: no cover - the tree's structure
            raise AssertionError(f"batch 1 is in {len(self.steps)} releases, expected κ={p.kappa}")
        D = p.dim + p.dim * (p.dim + 1) // 2
        self.direction = np.zeros(D)
        self.direction[0], self.direction[p.dim] = self.scenario.direction  # bias₁ and Gram₁₁
        self._check_data()

    # ------------------------------------------------------------ the data, fed to the protocol
    def _sums(self, world, k, n_runs):
        """Batch sums (R, M, d), (R, M, d, d) of batch k in ``world``: the scenario's records."""
        p, s = self.protocol, self.scenario
        bias = np.zeros((n_runs, p.n_agents, p.dim))
        gram = np.zeros((n_runs, p.n_agents, p.dim, p.dim))
        if k > 1 and s.fill == "batch":
            return bias, gram
        B = p.batch_size
        users = [(0, s.target, B)]  # (agent, record, count)
        if s.others is not None:
            users.append((slice(1, None), s.others, B))
        for agent, (x1, y1), count in users:
            n = count - 1 if (agent == 0 and k == 1) else count
            bias[:, agent, 0] += n * x1 * y1
            gram[:, agent, 0, 0] += n * x1 * x1
        if k == 1:  # the target user: present (world 1), or absent / its neighbour record (world 0)
            rec = s.target if world == 1 else s.neighbour
            if rec is not None:
                bias[:, 0, 0] += rec[0] * rec[1]
                gram[:, 0, 0, 0] += rec[0] * rec[0]
        return bias, gram

    def _run(self, protocol, world, n_runs, rng):
        """Run a tapped copy for n_runs runs; returns the deliveries of the κ steps, (κ, R, M, D)."""
        p, tap, _ = tapped(protocol)
        p.reset(n_runs=n_runs, rng=rng)
        for k in range(1, self.steps[-1] + 1):
            p.synchronize(*self._sums(world, k, n_runs))
        return np.stack([tap.records[k - 1] for k in self.steps])

    def _check_data(self):
        """With the noise removed, the delivered projections are the scenario's node means."""
        quiet = with_noise_scale(self.protocol, 0.0)
        s, M = self.scenario, self.protocol.n_agents
        for world, means in ((0, s.means0), (1, s.means1)):
            proj = np.sort(self._run(quiet, world, 1, np.random.default_rng(0))[:, 0] @ self.direction, axis=1)
            want = np.sort(np.column_stack([np.repeat(np.asarray(s.others_means)[:, None], M - 1, axis=1),
                                            np.asarray(means)[:, None]]), axis=1)
            if not np.allclose(proj, want, rtol=1e-9, atol=1e-9 * max(1.0, float(np.max(np.abs(want))))):
                raise AssertionError(f"protocol {self.protocol.name!r}: the delivered projections in world {world} are "
                                     f"{proj[:, -1]} (largest), expected the scenario's {np.asarray(means)}")

    # ------------------------------------------------------------ trials
    def __call__(self, world, rng, n):
        """``n`` trials of (T_1, …, T_κ, S_1, …, S_κ) from the real protocol in ``world`` = (key, w):
        the largest projection and the sum's projection of each attacked release's multiset."""
        rng = check_rng("rng", rng)
        n = check_positive_int("n", n, max_value=MAX_TRIALS, reason="every trial is a run of the protocol")
        out = np.empty((n, 2 * len(self.steps)))
        for start in range(0, n, self.chunk):
            r = min(self.chunk, n - start)
            proj = self._run(self.protocol, world[1], r, rng) @ self.direction  # (κ, r, M)
            out[start:start + r, : len(self.steps)] = proj.max(axis=2).T
            out[start:start + r, len(self.steps):] = proj.sum(axis=2).T
        return out

    def score(self, batch):
        """Σ_j log f₁(T_j)/f₀(T_j): the exact log-likelihood ratio of the κ largest projections."""
        batch = np.asarray(batch, dtype=float)
        s, M = self.scenario, self.protocol.n_agents
        total = np.zeros(batch.shape[0])
        for j in range(len(self.steps)):
            t = batch[:, j]
            total += (deshuffled_max_logpdf(t, s.means1[j], s.others_means[j], M, self.sigma0)
                      - deshuffled_max_logpdf(t, s.means0[j], s.others_means[j], M, self.sigma0))
        return total

    @property
    def exact_epsilon(self) -> float:
        """Exact ε at δ of the attacked statistic (T_1, …, T_κ): a lower bound on the protocol's ε."""
        return self._exact

    def first_release_epsilon(self, delta=None) -> float:
        """Exact ε of the first attacked release's statistic T_1 alone."""
        s = self.scenario
        delta = self.delta if delta is None else check_delta("delta", delta)
        return deshuffled_gaussian_epsilon(delta, self.sigma0, self.protocol.n_agents, s.means0[:1], s.means1[:1],
                                           s.others_means[:1])


def deshuffle_audit(protocol, n_trials, *, rng, n_select=None, confidence=0.95, delta=None, chunk=2000,
                    name=None) -> AuditReport:
    """Audit a shuffle protocol of Gaussian messages with the de-shuffling attack, on the code.

    Parameters
    ----------
    protocol : StatisticsProtocol
        Configured (``sdp-amplification``, or any Gaussian tree behind a shuffler).
    n_trials : int
        Counted trials per world (each a run of the real protocol).
    rng : numpy.random.Generator
    n_select : int, optional
        Threshold-selection trials (default ``n_trials // 4``).
    confidence : float, default 0.95
    delta : float, optional
        δ of the claim (default the protocol's target δ).
    chunk : int, default 2000
        Runs per vectorized call.
    name : str, optional

    Returns
    -------
    AuditReport
        ``kind="deshuffle"``; ``exact_epsilon`` is the attacked statistic's exact ε,
        ``first_release_epsilon`` that of the first release's alone; no broken variant (the
        attack's power is its margin over the sum-only attack, see the tests).
    """
    rng = check_rng("rng", rng)
    n_trials = check_positive_int("n_trials", n_trials, max_value=MAX_TRIALS, reason="every trial is a run of the protocol")
    if n_select is not None:
        n_select = check_positive_int("n_select", n_select, max_value=MAX_TRIALS,
                                      reason="every trial is a run of the protocol")
    confidence = check_probability("confidence", confidence)
    if name is not None:
        check_str("name", name)
    t0, c0 = time.perf_counter(), time.process_time()
    da = DeshuffleAudit(protocol, delta=delta, chunk=chunk)
    claim, status = claim_of(protocol.accounting())
    key = id(da)
    res = audit_epsilon_split(da, (key, 0), (key, 1), da.score, n_trials, n_select=n_select, delta=da.delta,
                              confidence=confidence, rng=rng, neighbouring=worlds_relation, vectorized=True)
    return AuditReport(
        name=name or protocol.name,
        kind="deshuffle",
        view=f"the shuffled multisets of the {len(da.steps)} releases containing user 1 (batches {da.steps})",
        attack=f"largest projection of the {protocol.n_agents} messages on e, exact likelihood ratio; data: "
               f"{da.scenario.label}",
        relation=protocol.relation,
        claimed_epsilon=claim,
        delta=float(da.delta),
        status=status,
        result=res,
        exact_epsilon=da.exact_epsilon,
        first_release_epsilon=da.first_release_epsilon(),
        n_trials=n_trials,
        confidence=confidence,
        seconds=time.perf_counter() - t0,
        cpu_seconds=time.process_time() - c0,
    )

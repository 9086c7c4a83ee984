"""The statistics protocol P = (R, S, A): continual release of Σ x y and Σ x xᵀ in batches."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from fedbandit._validation import (
    check_array,
    check_choice,
    check_int_array,
    check_positive_float,
    check_positive_int,
)
from fedbandit.accounting.events import ConditionalEvent, DpEvent, record_sensitivities
from fedbandit.mechanisms.tree import tree_depth
from fedbandit.protocols.base import Intermediary, Protocol
from fedbandit.protocols.statistics.packing import SCHEDULES, check_setting, pack_unchecked, unpack_unchecked
from fedbandit.protocols.statistics.parts import (
    CentralStatisticsAnalyzer,
    Runs,
    StatisticsAnalyzer,
    StatisticsRandomizer,
    Users,
)
from fedbandit.protocols.statistics.setting import StatisticsSetting

__all__ = ["StatisticsProtocol"]


class StatisticsProtocol(Protocol):
    """P = (R, S, A) for the linear-bandit statistics of M agents, synchronized in batches.

    The sharing step of Zhou & Chowdhury's Algorithm 1: at every synchronization each agent's
    batch sums go through R, S and A, and the server releases the synchronized prefix sums
    Ũ_syn, W̃_syn.  The protocol is the pipeline; its parts answer for themselves
    (:class:`~fedbandit.protocols.StatisticsRandomizer`,
    :class:`~fedbandit.protocols.StatisticsAnalyzer`): the randomizer encodes and decodes the
    messages and counts them, the analyzer forms the prefix, and the part that adds the noise
    (a central analyzer, else the randomizer) gives the event, the theorem and the noise.

    The interface a learner uses:

    ``configure(n_agents=M, dim=d, n_batches=K, batch_size=B, feature_bound=L, reward_bound=Y, schedule="fixed")``
        Called by the learner's constructor: validates the setting and calibrates the
        noise (raises on an inconsistent or unsupported one, naming why).  No random state.
        ``schedule="adaptive"`` (runs synchronize at different times, as in DP20's
        FedUCB) needs a randomizer that serves per-run steps; K is then an upper bound on
        the synchronizations of a run.
    ``reset(n_runs=R, rng=generator)``
        Called at the start of a run.
    ``synchronize(bias, gram, users=None, runs=None) -> (bias_prefix, gram_prefix)``
        ``bias`` (R', M, d) and ``gram`` (R', M, d, d): agent i's sums Σ x y and Σ x xᵀ over
        the batch just ended; with ``runs`` (increasing run indices) only those R' runs
        synchronize.  Returns the server's synchronized prefix sums (R', d) and (R', d, d).
        Randomizers with ``needs_user_data`` also receive ``users = (x, y)``, x (B, R, M, d)
        and y (B, R, M), the batch's individual records (y already clipped).
    ``accounting(relation=None)``, ``event(relation=None)``
        The guarantee for the configured setting (add/remove or replace one user).
    ``server_noise_std()``, ``prefix_noise_variance(k)``, ``calibration()``, ``parts()``,
    ``communication``.

    Parameters
    ----------
    randomizer : StatisticsRandomizer
        :class:`~fedbandit.protocols.statistics.ExactStatistics`, :class:`~fedbandit.protocols.statistics.GaussianTree`,
        :class:`~fedbandit.protocols.statistics.DiscreteGaussianTree`, :class:`~fedbandit.protocols.statistics.VectorSum`,
        :class:`~fedbandit.protocols.statistics.GaussianFactorization` or a new one.
    intermediary : Intermediary
        Identity, Shuffler or SecureAggregation.
    analyzer : StatisticsAnalyzer
        :class:`~fedbandit.protocols.statistics.RunningTotal`, :class:`~fedbandit.protocols.statistics.TreePrefix`,
        :class:`~fedbandit.protocols.statistics.CentralTree`, :class:`~fedbandit.protocols.statistics.PrefixTotal`,
        :class:`~fedbandit.protocols.statistics.CentralFactorization` or a new one.
    name : str
    epsilon, delta : float or None
    relation : {"add-remove", "replace"}, default "add-remove"
    model : str, optional
        The privacy model's name for tables (derived from the parts when omitted).

    Raises
    ------
    ValueError
        If the parts do not fit together (:meth:`supports` gives the reason), or the target does
        not fit them (exact sums with a target, a central analyzer without one).
    """

    kind: ClassVar[str] = "statistics"
    randomizer_type: ClassVar[type] = StatisticsRandomizer
    analyzer_type: ClassVar[type] = StatisticsAnalyzer

    setting: StatisticsSetting

    def __init__(self, randomizer: StatisticsRandomizer, intermediary: Intermediary, analyzer: StatisticsAnalyzer, *,
                 name: str, epsilon: float | None = None, delta: float | None = None, relation: str = "add-remove",
                 model: str | None = None) -> None:
        super().__init__(randomizer, intermediary, analyzer, name=name, epsilon=epsilon, delta=delta, relation=relation)
        if randomizer.message == "exact" and self.private and not analyzer.central:
            raise ValueError(f"randomizer 'exact' with analyzer {analyzer.name!r} is not private: omit epsilon and delta")
        if analyzer.central and not self.private:
            raise ValueError(f"analyzer {analyzer.name!r} needs a target (epsilon, delta)")
        self._model = model

    @classmethod
    def supports(cls, randomizer: Any, intermediary: Any, analyzer: Any) -> str | None:
        """Why (R, S, A) cannot form a statistics protocol, or None.

        R must be a :class:`~fedbandit.protocols.StatisticsRandomizer` and A a
        :class:`~fedbandit.protocols.StatisticsAnalyzer` that reads what R releases (batch sums,
        tree nodes or prefix sums: ``R.releases in A.reads``); a central analyzer (a trusted
        server) adds the noise to the exact sums, with no intermediary.
        """
        reason = super().supports(randomizer, intermediary, analyzer)
        if reason is not None:
            return reason
        if randomizer.releases not in analyzer.reads:
            reads = " or ".join(analyzer.reads) or "nothing declared"
            return (f"randomizer {randomizer.name!r} with analyzer {analyzer.name!r}: the randomizer releases "
                    f"{randomizer.releases or 'nothing declared'}, the analyzer reads {reads}")
        central = isinstance(analyzer, CentralStatisticsAnalyzer)
        if central and randomizer.message != "exact":
            return (f"randomizer {randomizer.name!r} with analyzer {analyzer.name!r}: a central analyzer adds the noise "
                    "to the exact sums (use 'exact')")
        if central and intermediary.name != "identity":
            return (f"analyzer {analyzer.name!r} with intermediary {intermediary.name!r}: the central model trusts the "
                    "server with the exact sums, so no intermediary is needed (use 'identity')")
        return None

    # ------------------------------------------------------------ configuration
    @property
    def model(self) -> str:
        if self._model is not None:
            return self._model
        if self.analyzer.central:
            return "central"
        if self.randomizer.message == "exact":
            return "none"
        return {"messages": "silo-LDP", "multiset": "SDP", "sum": "distributed"}[self.intermediary.view]

    @property
    def trusted(self) -> str:
        if self.analyzer.central:
            return "the server"
        if self.randomizer.message == "exact":
            return "everyone (no privacy)"
        if self.intermediary.view == "messages":
            return "own silo only"
        return self.intermediary.trusted

    @property
    def needs_user_data(self) -> bool:
        return self.randomizer.needs_user_data

    @property
    def supports_run_masks(self) -> bool:
        return self.randomizer.supports_run_masks

    def configure(self, *, n_agents: int, dim: int, n_batches: int, batch_size: int, feature_bound: float = 1.0,
                  reward_bound: float | None = 1.0, schedule: str = "fixed") -> StatisticsProtocol:
        """Validate the setting and calibrate the noise; returns ``self``.

        ``reward_bound=None`` means the learner does not clip rewards: the sensitivity is
        then unknown and private protocols report status "invalid" (they calibrate as if
        |y| ≤ 1, the papers' assumption, which Gaussian rewards violate).
        """
        self.n_agents, self.dim, self.n_batches, self.batch_size = check_setting(n_agents, dim, n_batches, batch_size)
        self.horizon = self.n_batches * self.batch_size
        self.feature_bound = check_positive_float("feature_bound", feature_bound)
        self.reward_bound = None if reward_bound is None else check_positive_float("reward_bound", reward_bound)
        self.schedule = check_choice("schedule", schedule, SCHEDULES)
        if self.schedule == "adaptive" and not self.supports_run_masks:
            raise ValueError(
                f"protocol {self.name!r} (randomizer {self.randomizer.name!r}) serves only a fixed schedule: its nodes "
                "are sized for batches of B·M users, so runs cannot synchronize at different times"
            )
        self.kappa = tree_depth(self.n_batches)
        db, dg = self.record_sensitivities(self.relation)
        self.sensitivity_bias, self.sensitivity_gram = db, dg
        self.sensitivity = max(db, dg)
        self.intermediary.check_parties(self.n_agents, "n_agents")
        setting = StatisticsSetting(
            n_agents=self.n_agents, dim=self.dim, n_batches=self.n_batches, batch_size=self.batch_size,
            feature_bound=self.feature_bound, reward_bound=self.reward_bound, schedule=self.schedule,
            epsilon=self.target_epsilon, delta=self.target_delta, relation=self.relation,
            view=self.intermediary.view, intermediary=self.intermediary.name,
        )
        self._configure_parts(setting, f"n_agents={self.n_agents}, dim={self.dim}, n_batches={self.n_batches}, "
                                       f"batch_size={self.batch_size}")
        self._configured = True
        self._reset_done = False
        return self

    def record_sensitivities(self, relation: str) -> tuple[float, float]:
        """(Δ_bias, Δ_gram) of one user's record under ``relation`` (Y = 1 if rewards are not clipped)."""
        y = 1.0 if self.reward_bound is None else self.reward_bound
        return record_sensitivities(self.feature_bound, y, relation)

    def _reset(self) -> None:
        self.randomizer.reset(self.setting, self.n_runs)
        self.analyzer.reset(self.setting, self.n_runs)
        self._k = 0

    # ------------------------------------------------------------ the release
    def synchronize(self, bias: np.ndarray, gram: np.ndarray, *, users: Users = None,
                    runs: Runs = None) -> tuple[np.ndarray, np.ndarray]:
        """One synchronization; returns (Ũ_syn (R', d), W̃_syn (R', d, d)) for the synchronizing runs."""
        self._require(reset=True)
        R, M, d = self.n_runs, self.n_agents, self.dim
        if runs is not None:
            if not self.supports_run_masks:
                raise ValueError(f"protocol {self.name!r} synchronizes all runs together: runs= is not supported")
            runs = check_int_array("runs", runs, low=0)
            if runs.ndim != 1 or runs.size == 0 or np.any(np.diff(runs) <= 0) or runs[0] < 0 or runs[-1] >= R:
                raise ValueError(f"runs must be increasing run indices in [0, {R}), got {runs!r}")
            if runs.size == R:
                runs = None
        n_s = R if runs is None else runs.size
        bias = check_array("bias", bias, finite=False)
        gram = check_array("gram", gram, finite=False)
        if bias.shape != (n_s, M, d):
            raise ValueError(f"bias must have shape (runs, agents, d) = {(n_s, M, d)}, got {bias.shape}")
        if gram.shape != (n_s, M, d, d):
            raise ValueError(f"gram must have shape (runs, agents, d, d) = {(n_s, M, d, d)}, got {gram.shape}")
        if self.needs_user_data:
            if users is None:
                raise ValueError(f"protocol {self.name!r} needs users=(x, y), the batch's individual records")
            x, y = users
            x = np.asarray(x, dtype=float)
            y = np.asarray(y, dtype=float)
            if x.ndim != 4 or x.shape[1:] != (R, M, d) or y.shape != x.shape[:3]:
                raise ValueError(f"users must be x (B, {R}, {M}, {d}) and y (B, {R}, {M}), got {x.shape} and {y.shape}")
            users = (x, y)
        if runs is None and self._k >= self.n_batches:
            raise ValueError(f"the protocol was configured for n_batches={self.n_batches} synchronizations")
        self._k += 1
        leaf = pack_unchecked(bias, gram)
        j, messages = self.randomizer.encode(leaf, users, runs, self._noise_rng)
        delivered = self.intermediary.deliver(messages, self._shuffle_rng, modulus=self.randomizer.modulus)
        prefix = self.analyzer.analyze(j, self.randomizer.decode(delivered), runs, self._noise_rng)
        messages_sent, payload = self.randomizer.payload(self.setting, j)
        c = self.communication
        c.rounds += 1
        c.messages += messages_sent
        c.payload += payload
        return unpack_unchecked(prefix, d)

    # ------------------------------------------------------------ privacy
    def event(self, relation: str | None = None) -> DpEvent:
        self._require()
        relation = self.relation if relation is None else relation
        ev = self._noise_part().event(self.setting, relation)
        if not self.private:
            return ev
        return ConditionalEvent(
            ev,
            "rewards are not clipped: the calibration assumes |y| ≤ 1 and ‖x‖ ≤ 1, which unbounded (Gaussian) rewards "
            "violate, so no guarantee holds",
            holds=self.reward_bound is not None,
            on_failure="invalid",
        )

    def bounds_note(self) -> str:
        if not self.private:
            return ""
        if self.reward_bound is None:
            return ""
        return f"for users with ‖x‖ ≤ {self.feature_bound:g} and |y| ≤ {self.reward_bound:g} (the learner clips y)"

    # ------------------------------------------------------------ reports
    @property
    def sigma0(self) -> float:
        """σ₀: the noise standard deviation one party (or, central, the server) adds per node entry."""
        self._require()
        return float(self._noise_part().sigma0)

    def node_noise_std(self) -> float:
        """Per-entry standard deviation of the noise in one node the server sums (all parties)."""
        self._require()
        return self._noise_part().node_noise_std(self.setting)

    def prefix_noise_variance(self, k: int) -> float:
        """Per-entry variance of the noise in the prefix sums released at batch k."""
        self._require()
        k = check_positive_int("k", k)
        return self._noise_part().prefix_variance(self.setting, k)

    def server_noise_std(self) -> float:
        """σ of Lemma 6.7: max over k of the per-entry noise standard deviation of a prefix."""
        self._require()
        return self._noise_part().server_noise_std(self.setting)

    def measured_noise_variance(self) -> np.ndarray:
        """Per run: the measured per-entry variance of the server's aggregated node noise Σ_i Z_{j,i}.

        Randomizers that measure their noise only (the Gaussian tree; NaN for runs that have not
        synchronized).
        """
        self._require(reset=True)
        return self._capability(self.randomizer, "measured_noise_variance", "the noise is measured for the Gaussian tree only")()

    def calibration(self) -> dict:
        self._require()
        sigma = self.server_noise_std()
        out = {
            "protocol": self.name,
            "model": self.model,
            "trusted": self.trusted,
            "kappa": self.kappa,
            "sigma0": 0.0,
            "sigma": sigma,
            "total_variance": sigma**2,
        }
        out.update(self.randomizer.calibration(self.setting))
        out.update(self.analyzer.calibration(self.setting))
        return out

    def sum_epsilon(self) -> float:
        """Exact ε of the server's sum of the parties' Gaussian releases: a lower bound on the protocol's ε.

        The server can always add up the messages it receives, and the sum is a Gaussian
        mechanism with noise sqrt(M)·σ₀ per node over the κ nodes a user enters
        (:meth:`fedbandit.protocols.statistics.GaussianTree.sum_epsilon`).
        """
        self._require()
        return self._capability(self.randomizer, "sum_epsilon", "sum_epsilon is defined for the Gaussian tree")(self.setting)

    def rounding_variance(self) -> float:
        """DDG only: upper bound on the rounding variance per entry of the largest node sum."""
        self._require()
        return self._capability(self.randomizer, "rounding_variance", "it does not round")()


"""The abstract parts of a statistics protocol: what its randomizer and analyzer must answer.

A :class:`~fedbandit.protocols.StatisticsProtocol` (Zhou & Chowdhury 2023, Alg. 1 with the
sharing step P = (R, S, A)) asks its parts and never checks their types (that is
:meth:`~fedbandit.protocols.StatisticsProtocol.supports`'s job, once, at construction):

* the randomizer (:class:`StatisticsRandomizer`) encodes a party's batch sums (or its users'
  records) into messages, decodes what the intermediary delivered with its public parameters,
  and says how many numbers it sends;
* the analyzer (:class:`StatisticsAnalyzer`) turns the decoded node sums into the released
  prefix sums;
* the part that adds the noise -- the randomizer, or a central analyzer
  (:class:`CentralStatisticsAnalyzer`, whose trusted server adds it) -- answers for the privacy
  (:class:`StatisticsNoise`): the event of one user's record under a relation, the theorem,
  the node and prefix noise, the calibration.

Every method that a new part must answer is abstract: a part that leaves one out cannot be
built (``TypeError`` naming it), so nothing falls back to a default payload, an empty theorem
or a missing σ.
"""

from __future__ import annotations

import abc
import math
from typing import ClassVar

import numpy as np

from fedbandit.accounting.events import DpEvent
from fedbandit.mechanisms.tree import prefix_noise_variance
from fedbandit.protocols.base import Analyzer, Randomizer
from fedbandit.protocols.statistics.setting import StatisticsSetting

__all__ = ["StatisticsNoise", "StatisticsRandomizer", "StatisticsAnalyzer", "CentralStatisticsAnalyzer"]

#: The batch's individual records ``(x (B, R, M, d), y (B, R, M))`` handed to a randomizer that acts on
#: every record (``needs_user_data``), or None.
Users = tuple[np.ndarray, np.ndarray] | None
#: The synchronizing runs' indices (increasing), or None for every run.
Runs = np.ndarray | None
#: The tree level (or step) of a release, as a randomizer's ``encode`` returns it; None for exact batch sums.
Level = int | None


def one_vector_per_party(setting: StatisticsSetting) -> tuple[int, int]:
    """(messages, floats) of one synchronization in which every party sends one packed vector:
    M messages of D = d + d(d+1)/2 floats (a randomizer's :meth:`StatisticsRandomizer.payload`)."""
    M = setting.n_agents
    return M, M * setting.coordinates


class StatisticsNoise(abc.ABC):
    """The privacy statements of the part that adds a statistics protocol's noise.

    Implemented by every :class:`StatisticsRandomizer` (the noise of distributed, shuffle and
    silo-level models, or none) and by every :class:`CentralStatisticsAnalyzer` (the central
    model's).  All methods take the configured :class:`StatisticsSetting`.
    """

    @abc.abstractmethod
    def event(self, setting: StatisticsSetting, relation: str) -> DpEvent:
        """What the server's view reveals about one user's record over the run, under ``relation``."""

    @abc.abstractmethod
    def theorem(self, setting: StatisticsSetting) -> str:
        """The result the guarantee rests on, with its citation ("" for exact sums: no guarantee)."""

    @abc.abstractmethod
    def node_variance(self, setting: StatisticsSetting) -> float:
        """Per-entry noise variance of one released node, summed over the parties (the server's view)."""

    def node_noise_std(self, setting: StatisticsSetting) -> float:
        """Per-entry standard deviation of the noise in one node the server sums (all parties)."""
        return math.sqrt(self.node_variance(setting))

    def prefix_variance(self, setting: StatisticsSetting, k: int) -> float:
        """Per-entry variance of the noise in the prefix sums released at batch k (tree parts:
        the nodes at the set bits of k, :func:`fedbandit.mechanisms.tree.prefix_noise_variance`)."""
        return float(prefix_noise_variance(k, self.node_noise_std(setting)))

    @abc.abstractmethod
    def server_noise_std(self, setting: StatisticsSetting) -> float:
        """σ of Zhou & Chowdhury's Lemma 6.7: the largest per-entry noise std of a released prefix."""

    @property
    @abc.abstractmethod
    def sigma0(self) -> float:
        """σ₀: the noise standard deviation one party (or, central, the server) adds per node entry."""

    @abc.abstractmethod
    def calibration(self, setting: StatisticsSetting) -> dict:
        """The noise parameters for tables (merged into the protocol's ``calibration()``)."""

    @abc.abstractmethod
    def scale_noise(self, factor: float) -> None:
        """Testing hook of the audits: multiply the calibrated noise by ``factor`` (after configure;
        the declared target is unchanged).  ``TypeError`` for a part that adds no noise."""


class StatisticsRandomizer(Randomizer, StatisticsNoise):
    """R of a statistics protocol: what each party sends about its batch sums at every synchronization.

    Lifecycle (called by the protocol): :meth:`configure` (setting), :meth:`reset` (runs), then per
    synchronization :meth:`encode` → the intermediary's ``deliver`` → :meth:`decode` → the analyzer.

    ``releases``: what its decoded messages are -- ``"batch sums"`` (each synchronization's sums,
    exact or noisy), ``"tree nodes"`` (the p-sums of Algorithm 2's tree) or ``"prefix sums"``; an
    analyzer states which it reads (:attr:`StatisticsAnalyzer.reads`) and
    :meth:`~fedbandit.protocols.StatisticsProtocol.supports` matches the two.
    ``supports_run_masks``: whether runs may synchronize at different times (an adaptive schedule).
    """

    releases: ClassVar[str] = ""
    supports_run_masks: ClassVar[bool] = False

    @abc.abstractmethod
    def reset(self, setting: StatisticsSetting, n_runs: int) -> None:
        """Allocate the state of ``n_runs`` independent runs."""

    @abc.abstractmethod
    def encode(self, leaf: np.ndarray, users: Users, runs: Runs, rng: np.random.Generator) -> tuple[Level, np.ndarray]:
        """One synchronization's messages: ``(j, messages)``.

        ``leaf`` (R', M, D) the packed batch sums of the synchronizing runs, ``users`` the
        batch's records ``(x (B, R, M, d), y (B, R, M))`` (randomizers with
        ``needs_user_data``) or None, ``runs`` the synchronizing run indices (None: all); ``j``
        is the tree level of the release (or the step) and ``messages`` (R', M, ...) one message
        per party (senders on axis 1).
        """

    def decode(self, delivered: np.ndarray) -> np.ndarray:
        """The server's node sums (R', D) from what the intermediary delivered, with the public
        parameters: real messages are summed over the senders (unless already summed)."""
        return delivered if delivered.ndim == 2 else delivered.sum(axis=1)

    @abc.abstractmethod
    def payload(self, setting: StatisticsSetting, level: Level) -> tuple[float, float]:
        """(messages, payload in :attr:`payload_unit`) the parties send at one synchronization whose
        release is at tree level ``level`` (as :meth:`encode` returned it)."""


class StatisticsAnalyzer(Analyzer):
    """A of a statistics protocol: the server's prefix sums from the decoded node sums.

    ``reads``: the releases it turns into prefix sums (:attr:`StatisticsRandomizer.releases`).
    """

    reads: ClassVar[tuple[str, ...]] = ()

    @abc.abstractmethod
    def reset(self, setting: StatisticsSetting, n_runs: int) -> None:
        """Allocate the state of ``n_runs`` independent runs."""

    @abc.abstractmethod
    def analyze(self, j: Level, node: np.ndarray, runs: Runs, rng: np.random.Generator) -> np.ndarray:
        """The released prefix sums (R', D) after the release ``j`` of the decoded ``node`` (R', D)."""


class CentralStatisticsAnalyzer(StatisticsAnalyzer, StatisticsNoise):
    """A of the central model: a trusted server receives the exact sums and adds the noise itself.

    Its noise statements are the protocol's; ``sigma`` is the server's noise per entry.
    """

    central: ClassVar[bool] = True
    #: The server's noise standard deviation per node entry, set by :meth:`configure`.
    sigma: float = math.nan

    @property
    def sigma0(self) -> float:
        """The server's noise standard deviation per node entry (σ)."""
        return self.sigma

"""R that sends the exact batch sums: no privacy, or a trusted server's input."""

from __future__ import annotations

from typing import ClassVar

from fedbandit.accounting.events import NonPrivateEvent
from fedbandit.protocols.statistics.parts import StatisticsRandomizer, one_vector_per_party

__all__ = ["ExactStatistics"]


class ExactStatistics(StatisticsRandomizer):
    """R that sends the batch sums as they are (no privacy; or a trusted server's input).

    Zhou & Chowdhury's Algorithm 1 with the identity as its sharing step (the non-private
    federated LinUCB), and the input of the central model's analyzers
    (:class:`~fedbandit.protocols.CentralTree`, :class:`~fedbandit.protocols.CentralFactorization`),
    whose trusted server adds the noise.  It adds none: its event is non-private and its noise
    statements are zero.
    """

    name: ClassVar[str] = "exact"
    releases: ClassVar[str] = "batch sums"
    message: ClassVar[str] = "exact"
    supports_run_masks: ClassVar[bool] = True
    sigma0: ClassVar[float] = 0.0

    def describe(self) -> str:
        return "send the exact batch sums Σxy, Σxxᵀ"

    def configure(self, setting):
        pass

    def reset(self, setting, n_runs):
        pass

    def encode(self, leaf, users, runs, rng):
        return None, leaf

    def payload(self, setting, level):
        return one_vector_per_party(setting)

    def event(self, setting, relation):
        return NonPrivateEvent("the server sees every agent's exact batch sums")

    def theorem(self, setting) -> str:
        return ""  # no guarantee

    def node_variance(self, setting):
        return 0.0

    def prefix_variance(self, setting, k):
        return 0.0

    def server_noise_std(self, setting):
        return 0.0

    def calibration(self, setting):
        return {}

    def scale_noise(self, factor):
        raise TypeError(f"randomizer {self.name!r} adds no noise to scale")

"""R that sends the exact batch sums: no privacy, or a trusted server's input."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from fedbandit.accounting.events import DpEvent, NonPrivateEvent
from fedbandit.protocols.statistics.parts import Level, Runs, StatisticsRandomizer, Users, one_vector_per_party
from fedbandit.protocols.statistics.setting import StatisticsSetting

__all__ = ["ExactStatistics"]


class ExactStatistics(StatisticsRandomizer):
    """R that sends the batch sums as they are (no privacy; or a trusted server's input).

    Zhou & Chowdhury's Algorithm 1 with the identity as its sharing step (the non-private
    federated LinUCB), and the input of the central model's analyzers
    (:class:`~fedbandit.protocols.statistics.CentralTree`, :class:`~fedbandit.protocols.statistics.CentralFactorization`),
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

    def configure(self, setting: StatisticsSetting) -> None:
        pass

    def reset(self, setting: StatisticsSetting, n_runs: int) -> None:
        pass

    def encode(self, leaf: np.ndarray, users: Users, runs: Runs, rng: np.random.Generator) -> tuple[Level, np.ndarray]:
        return None, leaf

    def payload(self, setting: StatisticsSetting, level: Level) -> tuple[float, float]:
        return one_vector_per_party(setting)

    def event(self, setting: StatisticsSetting, relation: str) -> DpEvent:
        return NonPrivateEvent("the server sees every agent's exact batch sums")

    def theorem(self, setting: StatisticsSetting) -> str:
        return ""  # no guarantee

    def node_variance(self, setting: StatisticsSetting) -> float:
        return 0.0

    def prefix_variance(self, setting: StatisticsSetting, k: int) -> float:
        return 0.0

    def server_noise_std(self, setting: StatisticsSetting) -> float:
        return 0.0

    def calibration(self, setting: StatisticsSetting) -> dict:
        return {}

    def scale_noise(self, factor: float) -> None:
        raise TypeError(f"randomizer {self.name!r} adds no noise to scale")

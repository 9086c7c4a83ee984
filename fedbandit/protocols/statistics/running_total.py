"""A that adds every synchronization's exact sums to running totals (the non-private protocol)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from fedbandit.protocols.statistics.parts import Level, Runs, StatisticsAnalyzer
from fedbandit.protocols.statistics.setting import StatisticsSetting

__all__ = ["RunningTotal"]


class RunningTotal(StatisticsAnalyzer):
    """A: add every synchronization's (exact) sums to the running totals.

    The server of Zhou & Chowdhury's Algorithm 1 without privacy: Ũ_syn and W̃_syn are the
    exact prefix sums of the agents' batch sums.
    """

    name: ClassVar[str] = "running-total"
    reads: ClassVar[tuple[str, ...]] = ("batch sums",)

    def describe(self) -> str:
        return "add them to the running totals"

    def reset(self, setting: StatisticsSetting, n_runs: int) -> None:
        self._total = np.zeros((n_runs, setting.coordinates))

    def analyze(self, j: Level, node: np.ndarray, runs: Runs, rng: np.random.Generator) -> np.ndarray:
        if runs is None:
            self._total += node
            return self._total.copy()
        self._total[runs] += node
        return self._total[runs].copy()

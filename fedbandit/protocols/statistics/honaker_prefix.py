"""A of the full-tree release: Honaker's estimate of the prefix sums from the parties' summed nodes."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from fedbandit.mechanisms.honaker_tree import HonakerAnalyzer
from fedbandit.protocols.statistics.parts import Level, Runs, StatisticsAnalyzer
from fedbandit.protocols.statistics.setting import StatisticsSetting

__all__ = ["HonakerPrefix"]


class HonakerPrefix(StatisticsAnalyzer):
    """A of the full-tree release: the server sums the parties' noisy nodes and estimates each prefix
    bottom up (Honaker 2015; :class:`fedbandit.mechanisms.honaker_tree.HonakerAnalyzer`) [beyond the papers]."""

    name: ClassVar[str] = "honaker-prefix"
    reads: ClassVar[tuple[str, ...]] = ("full tree nodes",)

    def describe(self) -> str:
        return "sum the parties' full-tree nodes; prefix = Honaker's bottom-up estimate of the subtrees at the set bits of k"

    def reset(self, setting: StatisticsSetting, n_runs: int) -> None:
        self._estimator = HonakerAnalyzer(setting.n_batches, (setting.coordinates,), batch_shape=(n_runs,))

    def analyze(self, j: Level, node: np.ndarray, runs: Runs, rng: np.random.Generator) -> np.ndarray:
        assert j is not None  # full-tree nodes come with their level
        return self._estimator.update(j, node, runs=runs)

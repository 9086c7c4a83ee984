"""A of the factorized release: the sum of the parties' noisy prefix sums."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from fedbandit.protocols.statistics.parts import Level, Runs, StatisticsAnalyzer
from fedbandit.protocols.statistics.setting import StatisticsSetting

__all__ = ["PrefixTotal"]


class PrefixTotal(StatisticsAnalyzer):
    """A of the factorized release: the server's prefix is the sum of the parties' noisy prefixes
    (:class:`~fedbandit.protocols.statistics.GaussianFactorization`; beyond the papers)."""

    name: ClassVar[str] = "prefix-total"
    reads: ClassVar[tuple[str, ...]] = ("prefix sums",)

    def describe(self) -> str:
        return "sum the parties' noisy prefix sums"

    def reset(self, setting: StatisticsSetting, n_runs: int) -> None:
        pass

    def analyze(self, j: Level, node: np.ndarray, runs: Runs, rng: np.random.Generator) -> np.ndarray:
        return np.array(node)

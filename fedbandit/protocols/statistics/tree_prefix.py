"""A of Zhou & Chowdhury's Algorithm 2: the prefix sums from the parties' noisy p-sums."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from fedbandit.mechanisms.tree import TreeAnalyzer
from fedbandit.protocols.statistics.parts import Level, Runs, StatisticsAnalyzer
from fedbandit.protocols.statistics.setting import StatisticsSetting

__all__ = ["TreePrefix"]


class TreePrefix(StatisticsAnalyzer):
    """A of Algorithm 2 (Zhou & Chowdhury): α̃_j = Σ_i α̂_{j,i} (decoded), prefix s̃_k = Σ over the set bits of k.

    The node sums come decoded by the randomizer's public decoding (real messages summed, the
    discrete Gaussian's residues summed mod m and unrotated, the vector sum's counts debiased);
    the analyzer keeps the latest node of every level (:class:`fedbandit.mechanisms.tree.TreeAnalyzer`).
    """

    name: ClassVar[str] = "tree-prefix"
    reads: ClassVar[tuple[str, ...]] = ("tree nodes",)

    def describe(self) -> str:
        return "sum the parties' noisy p-sums; prefix = Σ over the set bits of k"

    def reset(self, setting: StatisticsSetting, n_runs: int) -> None:
        self._tree = TreeAnalyzer(setting.n_batches, (setting.coordinates,), batch_shape=(n_runs,))

    def analyze(self, j: Level, node: np.ndarray, runs: Runs, rng: np.random.Generator) -> np.ndarray:
        assert j is not None  # tree nodes come with their level
        return self._tree.update(j, node, runs=runs)

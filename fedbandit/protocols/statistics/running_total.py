"""A that adds every synchronization's exact sums to running totals (the non-private protocol)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from fedbandit.protocols.statistics.parts import StatisticsAnalyzer

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

    def reset(self, setting, n_runs):
        self._total = np.zeros((n_runs, setting.coordinates))

    def analyze(self, j, node, runs, rng):
        if runs is None:
            self._total += node
            return self._total.copy()
        self._total[runs] += node
        return self._total[runs].copy()

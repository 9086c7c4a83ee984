"""A of the factorized release: the sum of the parties' noisy prefix sums."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from fedbandit.protocols.statistics.parts import StatisticsAnalyzer

__all__ = ["PrefixTotal"]


class PrefixTotal(StatisticsAnalyzer):
    """A of the factorized release: the server's prefix is the sum of the parties' noisy prefixes
    (:class:`~fedbandit.protocols.GaussianFactorization`; beyond the papers)."""

    name: ClassVar[str] = "prefix-total"
    reads: ClassVar[tuple[str, ...]] = ("prefix sums",)

    def describe(self) -> str:
        return "sum the parties' noisy prefix sums"

    def reset(self, setting, n_runs):
        pass

    def analyze(self, j, node, runs, rng):
        return np.array(node)

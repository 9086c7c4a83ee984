"""A of the central model with a full tree: a trusted server's own full tree and Honaker's estimator."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from fedbandit.accounting.events import DpEvent, GaussianEvent, SelfComposedEvent
from fedbandit.mechanisms.honaker_tree import HonakerTreeMechanism, honaker_max_prefix_variance, honaker_prefix_variance
from fedbandit.protocols.statistics.full_tree import GaussianFullTree, full_tree_sigma, full_tree_theorem
from fedbandit.protocols.statistics.parts import CentralStatisticsAnalyzer, Level, Runs
from fedbandit.protocols.statistics.setting import StatisticsSetting

__all__ = ["CentralHonakerTree"]


class CentralHonakerTree(CentralStatisticsAnalyzer):
    """A of the central model with a full tree: a trusted server adds the parties' exact sums, releases
    every node of the binary tree with N(0, σ²) noise and each prefix by Honaker's estimator
    [beyond the papers].

    σ is :class:`~fedbandit.protocols.statistics.CentralTree`'s (the tree's rule, added once), so the prefix
    variance is σ² Σ_{bits j of k} 2^j/(2^{j+1} − 1) instead of the tree's σ² popcount(k)
    (Honaker 2015; :class:`fedbandit.mechanisms.HonakerTreeMechanism`).

    Parameters
    ----------
    calibration : {"paper", "authors", "zcdp"}, default "zcdp"
    """

    name: ClassVar[str] = "central-honaker-tree"
    reads: ClassVar[tuple[str, ...]] = ("batch sums",)

    def __init__(self, calibration: str = "zcdp") -> None:
        self.calibration_rule = GaussianFullTree(calibration).calibration_rule  # the same check

    def describe(self) -> str:
        return "central full tree over the summed stream: every node plus N(0, σ²), prefixes by Honaker's estimator"

    def configure(self, setting: StatisticsSetting) -> None:
        if not setting.private:
            raise ValueError(f"analyzer {self.name!r} needs a target (epsilon, delta)")
        self.sigma = full_tree_sigma(setting, self.calibration_rule, 1)

    def reset(self, setting: StatisticsSetting, n_runs: int) -> None:
        self._mech = HonakerTreeMechanism(setting.n_batches, (setting.coordinates,), self.sigma, batch_shape=(n_runs,))

    def analyze(self, j: Level, node: np.ndarray, runs: Runs, rng: np.random.Generator) -> np.ndarray:
        return self._mech.step(node, rng, runs=runs)

    def event(self, setting: StatisticsSetting, relation: str) -> DpEvent:
        db, dg = setting.record_sensitivities(relation)
        return SelfComposedEvent(GaussianEvent(math.hypot(db, dg), self.sigma), setting.kappa)

    def theorem(self, setting: StatisticsSetting) -> str:
        return full_tree_theorem(self.calibration_rule, setting.kappa, "a trusted server")

    def node_variance(self, setting: StatisticsSetting) -> float:
        return self.sigma**2

    def node_noise_std(self, setting: StatisticsSetting) -> float:
        return self.sigma

    def prefix_variance(self, setting: StatisticsSetting, k: int) -> float:
        return honaker_prefix_variance(k, self.sigma)

    def server_noise_std(self, setting: StatisticsSetting) -> float:
        return math.sqrt(honaker_max_prefix_variance(setting.n_batches, self.sigma))

    def calibration(self, setting: StatisticsSetting) -> dict:
        return {"sigma0": self.sigma, "rule": self.calibration_rule, "estimator": "honaker"}

    def scale_noise(self, factor: float) -> None:
        self.sigma *= factor

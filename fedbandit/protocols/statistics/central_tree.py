"""A of the central model with a tree: a trusted server's own Gaussian tree mechanism."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from fedbandit._validation import check_choice
from fedbandit.accounting.calibration import gaussian_tree_sigma0
from fedbandit.accounting.events import DpEvent, GaussianEvent, SelfComposedEvent
from fedbandit.mechanisms.tree import TreeAnalyzer, TreeRandomizer
from fedbandit.protocols.statistics.gaussian_tree import GRAM_NOISES, gram_noise_scale
from fedbandit.protocols.statistics.parts import CentralStatisticsAnalyzer, Level, Runs
from fedbandit.protocols.statistics.setting import StatisticsSetting

__all__ = ["CentralTree"]


class CentralTree(CentralStatisticsAnalyzer):
    """A of the central model: a trusted server adds the parties' exact sums and runs one
    Gaussian tree mechanism over the summed stream (Dwork et al. 2010; Chan, Shi & Song 2011).

    The node noise σ has the calibration of silo-level LDP's σ₀ (``calibration``), added
    once instead of M times, so the prefix noise variance is κσ² rather than Mκσ₀².

    Parameters
    ----------
    calibration : {"paper", "authors", "zcdp"}
    gram_noise : {"mirror", "average"}
        The Gram noise's symmetrization (:class:`~fedbandit.protocols.statistics.GaussianTree`).
    """

    name: ClassVar[str] = "central-tree"
    reads: ClassVar[tuple[str, ...]] = ("batch sums",)

    def __init__(self, calibration: str = "paper", *, gram_noise: str = "mirror") -> None:
        self.calibration_rule = check_choice("calibration", calibration, ("paper", "authors", "zcdp"))
        self.gram_noise = check_choice("gram_noise", gram_noise, GRAM_NOISES)

    def describe(self) -> str:
        return "central tree mechanism over the summed stream: noise N(0, σ²) per node, once"

    def configure(self, setting: StatisticsSetting) -> None:
        s = setting
        if not s.private:
            raise ValueError("analyzer 'central-tree' needs a target (epsilon, delta)")
        epsilon, delta = s.target()
        self.sigma = float(
            gaussian_tree_sigma0(
                self.calibration_rule, epsilon, delta, n_batches=s.n_batches, horizon=s.horizon,
                n_agents=s.n_agents, sensitivity=s.sensitivity,
            )
        )

    def reset(self, setting: StatisticsSetting, n_runs: int) -> None:
        s = setting
        D = s.coordinates
        self._rand = TreeRandomizer(s.n_batches, (D,), self.sigma, batch_shape=(n_runs,), segments=(s.dim, D - s.dim))
        self._tree = TreeAnalyzer(s.n_batches, (D,), batch_shape=(n_runs,))
        self._noise_scale = gram_noise_scale(s.dim, self.gram_noise)

    def analyze(self, j: Level, node: np.ndarray, runs: Runs, rng: np.random.Generator) -> np.ndarray:
        jj, noisy, z = self._rand.release(node, rng, runs=runs, return_noise=True)
        if self._noise_scale is not None:
            noisy += z * (self._noise_scale - 1.0)
        return self._tree.update(jj, noisy, runs=runs)

    def event(self, setting: StatisticsSetting, relation: str) -> DpEvent:
        db, dg = setting.record_sensitivities(relation)
        return SelfComposedEvent(GaussianEvent(math.hypot(db, dg), self.sigma), setting.kappa)

    def theorem(self, setting: StatisticsSetting) -> str:
        return (f"central tree [DNPR10, CSS11], calibration {self.calibration_rule}; verified: zCDP over "
                f"κ={setting.kappa} nodes, [CKS20]")

    def node_variance(self, setting: StatisticsSetting) -> float:
        return self.sigma**2

    def node_noise_std(self, setting: StatisticsSetting) -> float:
        return self.sigma

    def server_noise_std(self, setting: StatisticsSetting) -> float:
        return math.sqrt(setting.kappa) * self.sigma

    def calibration(self, setting: StatisticsSetting) -> dict:
        return {"sigma0": self.sigma}

    def scale_noise(self, factor: float) -> None:
        self.sigma *= factor

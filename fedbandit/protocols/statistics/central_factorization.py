"""A of the central model with a factorized release: a trusted server's own factorization mechanism."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from fedbandit.accounting.events import DpEvent, GaussianEvent
from fedbandit.protocols.statistics.factorization import (
    GaussianFactorization,
    check_factorization_steps,
    factorization_mechanism,
    factorization_sensitivity_factor,
    factorization_sigma,
    factorization_theorem,
)
from fedbandit.protocols.statistics.parts import CentralStatisticsAnalyzer, Level, Runs
from fedbandit.protocols.statistics.setting import StatisticsSetting

__all__ = ["CentralFactorization"]


class CentralFactorization(CentralStatisticsAnalyzer):
    """A of the central model with a factorized release: a trusted server adds the parties' exact
    sums and releases their prefix sums through one factorization mechanism [beyond the papers].

    The noise σ is :class:`~fedbandit.protocols.statistics.GaussianFactorization`'s calibration, added once
    instead of by every party, so the prefix noise variance at k is σ² Σ_{j<k} b_j²
    (Fichtenberger, Henzinger & Upadhyay 2023; Henzinger, Upadhyay & Upadhyay 2023; the banded
    form: Kalinin & Lampert 2024).

    Parameters
    ----------
    factorization : {"sqrt", "banded-sqrt"}
    bands : int, optional
    """

    name: ClassVar[str] = "central-factorization"
    reads: ClassVar[tuple[str, ...]] = ("batch sums",)

    def __init__(self, factorization: str = "sqrt", *, bands: int | None = None) -> None:
        part = GaussianFactorization(factorization, bands=bands)  # the same checks of the two parameters
        self.factorization, self.bands = part.factorization, part.bands

    def describe(self) -> str:
        return "central factorized release of the summed stream: prefix plus correlated noise (B·z)_k, once"

    def configure(self, setting: StatisticsSetting) -> None:
        s = setting
        if not s.private:
            raise ValueError(f"analyzer {self.name!r} needs a target (epsilon, delta)")
        check_factorization_steps(self.factorization, s.n_batches)
        self.column_norm = factorization_sensitivity_factor(self.factorization, s.n_batches, self.bands)
        self.sigma = float(factorization_sigma(s, self.column_norm))

    def reset(self, setting: StatisticsSetting, n_runs: int) -> None:
        s = setting
        self._mech = factorization_mechanism(self.factorization, self.bands, s.n_batches, (s.coordinates,),
                                              self.sigma, (n_runs,))

    def analyze(self, j: Level, node: np.ndarray, runs: Runs, rng: np.random.Generator) -> np.ndarray:
        _, prefix = self._mech.release(node, rng, runs=runs)
        return prefix

    def event(self, setting: StatisticsSetting, relation: str) -> DpEvent:
        db, dg = setting.record_sensitivities(relation)
        return GaussianEvent(math.hypot(db, dg) * self.column_norm, self.sigma)

    def theorem(self, setting: StatisticsSetting) -> str:
        return factorization_theorem(self.factorization, self.column_norm, "a trusted server")

    def node_variance(self, setting: StatisticsSetting) -> float:
        return self.sigma**2

    def node_noise_std(self, setting: StatisticsSetting) -> float:
        return self.sigma

    def prefix_variance(self, setting: StatisticsSetting, k: int) -> float:
        return factorization_mechanism(self.factorization, self.bands, setting.n_batches, (1,), self.sigma,
                                        ()).prefix_noise_variance(k)

    def server_noise_std(self, setting: StatisticsSetting) -> float:
        return math.sqrt(self.prefix_variance(setting, setting.n_batches))  # Σ_{j<k} b_j² grows with k

    def calibration(self, setting: StatisticsSetting) -> dict:
        return {"sigma0": self.sigma, "factorization": self.factorization, "bands": self.bands,
                "column_norm": self.column_norm}

    def scale_noise(self, factor: float) -> None:
        self.sigma *= factor

"""A of the central model's sum: a trusted server adds Gaussian noise to the sum of the clipped vectors."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from fedbandit._validation import check_choice
from fedbandit.accounting.accountant import exact_gaussian_epsilon
from fedbandit.accounting.composed_gaussian import COMPOSED_GAUSSIAN_CALIBRATIONS, composed_gaussian_sigma
from fedbandit.accounting.events import ApproxDpEvent, DpEvent, GaussianEvent, SelfComposedEvent
from fedbandit.accounting.subsampling import (
    amplification_for,
    sampled_gaussian_epsilon,
    sampled_gaussian_noise_multiplier,
)
from fedbandit.mechanisms.gaussian import gaussian_mechanism
from fedbandit.protocols.sums.parts import SumAnalyzer, SumNoise
from fedbandit.protocols.sums.setting import SumSetting

__all__ = ["GaussianSum"]


class GaussianSum(SumAnalyzer, SumNoise):
    """A of the central model: the trusted server adds N(0, σ²) per coordinate to the sum of the clipped vectors.

    The baseline of Kairouz, Liu & Steinke (2021, Sec. 6): the T releases at sensitivity c
    (one party added or removed; 2c replaced) are one Gaussian mechanism at sensitivity c√T,
    whose exact privacy profile gives σ (Balle & Wang 2018, Thm. 8); with client sampling,
    the sampled Gaussian's RDP bound (Mironov, Talwar & Zhang 2019; Wang, Balle &
    Kasiviswanathan 2019).

    Parameters
    ----------
    calibration : {"analytic", "zcdp"}, default "analytic"
        The σ rule (:func:`fedbandit.accounting.composed_gaussian.composed_gaussian_sigma`):
        exact (Balle & Wang's analytic Gaussian at sensitivity c√T, Kairouz, Liu & Steinke's
        baseline), or through zCDP.
    """

    name: ClassVar[str] = "gaussian-sum"
    central: ClassVar[bool] = True

    def __init__(self, calibration: str = "analytic") -> None:
        self.calibration_rule = check_choice("calibration", calibration, COMPOSED_GAUSSIAN_CALIBRATIONS)

    def describe(self) -> str:
        return f"sum of the clipped vectors plus N(0, σ²) per coordinate, σ by the {self.calibration_rule!r} rule"

    def configure(self, setting: SumSetting) -> None:
        p = setting
        if not p.private:
            raise ValueError("analyzer 'gaussian-sum' needs a target (epsilon, delta)")
        epsilon, delta = p.target()
        if p.sampling_rate < 1.0:  # the subsampled Gaussian, RDP [MTZ19] / [WBK19] (its own rule)
            sens = p.clip_sensitivity(p.relation)
            self.sigma = sens * sampled_gaussian_noise_multiplier(
                epsilon, delta, p.sampling_rate, p.n_rounds, amplification_for(p.relation))
        else:
            self.sigma = composed_gaussian_sigma(epsilon, delta, p.clip_norm(), p.n_rounds,
                                                 calibration=self.calibration_rule)

    def analyze(self, total: np.ndarray, rng: np.random.Generator,
                return_noise: bool) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        return gaussian_mechanism(total, self.sigma, rng, return_noise=return_noise)

    def gaussian_event(self, setting: SumSetting, relation: str) -> SelfComposedEvent:
        """The T Gaussian releases, ``SelfComposedEvent(GaussianEvent(Δ, σ), T)`` (Δ = c for one party's
        vector added or removed, 2c for one replaced)."""
        return SelfComposedEvent(GaussianEvent(setting.clip_sensitivity(relation), self.sigma), setting.n_rounds)

    def event(self, setting: SumSetting, relation: str) -> DpEvent:
        """The exact (ε, δ) of the T releases at the target δ (one Gaussian mechanism, [BW18] Thm. 8), or
        with client sampling the sampled Gaussian's RDP bound."""
        p = setting
        delta = p.target()[1]
        if p.sampling_rate < 1.0:
            sens = p.clip_sensitivity(relation)
            eps = sampled_gaussian_epsilon(self.sigma / sens, p.sampling_rate, p.n_rounds, delta,
                                           amplification_for(relation))
            return ApproxDpEvent(eps, delta, what=(
                f"{p.n_rounds} rounds of the sampled Gaussian (q={p.sampling_rate:.4g}, z={self.sigma / sens:.4g}), "
                f"RDP by {p.sampling_bound(relation)} [MTZ19; WBK19]"))
        composed = self.gaussian_event(p, relation)
        eps = exact_gaussian_epsilon(composed, delta)
        return ApproxDpEvent(eps, delta,
                             what=f"{composed.describe()}: one Gaussian mechanism, exact profile [BW18, Thm. 8]")

    def theorem(self, setting: SumSetting) -> str:
        if setting.sampling_rate < 1.0:
            return (f"{setting.n_rounds} rounds of the sampled Gaussian, RDP [MTZ19] (Poisson, add/remove) or "
                    "[WBK19 Thm. 9] (without replacement, replace-one), converted [CKS20]")
        return (f"central Gaussian, σ by the {self.calibration_rule!r} rule; verified: {setting.n_rounds} "
                "Gaussian releases = one Gaussian mechanism at sensitivity c√T, exact profile [BW18, Thm. 8]")

    def noise_std(self, setting: SumSetting) -> float:
        return self.sigma

    def calibration(self, setting: SumSetting) -> dict:
        rule = self.calibration_rule if setting.sampling_rate == 1.0 else "subsampled-rdp"
        return {"sigma0": self.sigma, "rule": rule}

    def scale_noise(self, factor: float) -> None:
        self.sigma *= factor

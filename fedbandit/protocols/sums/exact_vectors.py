"""R that sends each party's vector as it is (the non-private sum)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from fedbandit.accounting.events import DpEvent
from fedbandit.protocols.sums.parts import SumRandomizer, exact_sum_event
from fedbandit.protocols.sums.setting import SumSetting

__all__ = ["ExactVectors"]


class ExactVectors(SumRandomizer):
    """R that sends the party's vector as it is (no privacy, no clipping): federated averaging's
    exact sum, the baseline of Kairouz, Liu & Steinke (2021, Sec. 6)."""

    name: ClassVar[str] = "exact-vectors"
    message: ClassVar[str] = "exact"
    row_wise_clear_sum: ClassVar[bool] = True  # each row sent as it is, the delivered rows added up

    def describe(self) -> str:
        return "send the vector as it is"

    def configure(self, setting: SumSetting) -> None:
        pass

    def reset(self, setting: SumSetting, n_runs: int, rng: np.random.Generator) -> None:
        pass

    def encode(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return x

    def payload(self, setting: SumSetting) -> int:
        return setting.dim

    def event(self, setting: SumSetting, relation: str) -> DpEvent:
        return exact_sum_event(setting)

    def theorem(self, setting: SumSetting) -> str:
        return ""  # no guarantee

    def noise_std(self, setting: SumSetting) -> float:
        return 0.0

    def calibration(self, setting: SumSetting) -> dict:
        return {}

    def scale_noise(self, factor: float) -> None:
        raise TypeError(f"randomizer {self.name!r} adds no noise to scale")

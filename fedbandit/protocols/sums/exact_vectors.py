"""R that sends each party's vector as it is (the non-private sum)."""

from __future__ import annotations

from typing import ClassVar

from fedbandit.protocols.sums.parts import SumRandomizer, exact_sum_event

__all__ = ["ExactVectors"]


class ExactVectors(SumRandomizer):
    """R that sends the party's vector as it is (no privacy, no clipping): federated averaging's
    exact sum, the baseline of Kairouz, Liu & Steinke (2021, Sec. 6)."""

    name: ClassVar[str] = "exact-vectors"
    message: ClassVar[str] = "exact"

    def describe(self) -> str:
        return "send the vector as it is"

    def configure(self, setting):
        pass

    def reset(self, setting, rng):
        pass

    def encode(self, x, rng):
        return x

    def payload(self, setting):
        return setting.dim

    def event(self, setting, relation):
        return exact_sum_event(setting)

    def theorem(self, setting) -> str:
        return ""  # no guarantee

    def noise_std(self, setting):
        return 0.0

    def calibration(self, setting):
        return {}

    def scale_noise(self, factor):
        raise TypeError(f"randomizer {self.name!r} adds no noise to scale")

"""R of the central model's sum: each party's vector clipped, sent in the clear to a trusted server."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from fedbandit.mechanisms.ddg import clip_l2
from fedbandit.protocols.sums.exact_vectors import ExactVectors
from fedbandit.protocols.sums.setting import SumSetting

__all__ = ["ClippedVectors"]


class ClippedVectors(ExactVectors):
    """R of the central model: send the vector clipped to ℓ2 norm c (:func:`fedbandit.mechanisms.ddg.clip_l2`).

    The vector reaches a trusted server in the clear; clipping bounds one party's
    contribution to the sum (the sensitivity c), the server's noise does the rest
    (:class:`~fedbandit.protocols.sums.GaussianSum`, the central baseline of Kairouz, Liu & Steinke
    2021, Sec. 6).  It adds no noise itself: its privacy statements are :class:`ExactVectors`'.
    """

    name: ClassVar[str] = "clipped-vectors"
    message: ClassVar[str] = "exact"
    row_wise_clear_sum: ClassVar[bool] = True  # clip_l2 clips each row alone, without draws

    def describe(self) -> str:
        return "send the vector clipped to ℓ2 norm c (in the clear, to a trusted server)"

    def configure(self, setting: SumSetting) -> None:
        if setting.clip is None:
            raise ValueError("randomizer 'clipped-vectors' needs clip, the ℓ2 clipping norm c")
        self.clip = setting.clip

    def encode(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return clip_l2(x, self.clip)

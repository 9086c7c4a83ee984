"""A of the distributed binomial sum: the decoded modular sum."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from fedbandit.protocols.sums.parts import SumAnalyzer

__all__ = ["BinomialDecoder"]


class BinomialDecoder(SumAnalyzer):
    """A of the distributed binomial mechanism (cpSGD, Agarwal et al. 2018): the modular sum, decoded.

    The decoding -- minus the noise mean n·N_i·p, modular clipping, the inverse rotation,
    rescaling -- is the randomizer's (:meth:`fedbandit.protocols.sums.BinomialVectors.decode`); its
    error is not an additive server noise (``return_noise`` is refused).
    """

    name: ClassVar[str] = "binomial-decoder"

    def describe(self) -> str:
        return "subtract the binomial mean, map the modular sum to [−m/2, m/2), undo the rotation, multiply by s"

    def analyze(self, total: np.ndarray, rng: np.random.Generator,
                return_noise: bool) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        if return_noise:
            raise ValueError("return_noise=True: the binomial mechanism's error is not an additive server noise")
        return total

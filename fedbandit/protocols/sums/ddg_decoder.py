"""A of the distributed discrete Gaussian sum: the decoded modular sum."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from fedbandit.protocols.sums.parts import SumAnalyzer

__all__ = ["DDGDecoder"]


class DDGDecoder(SumAnalyzer):
    """A of the distributed discrete Gaussian ([KLS21] Alg. 1): the server's modular sum, decoded.

    The decoding with the public parameters -- modular clipping to [−m/2, m/2), the inverse of
    the shared rotation, rescaling by γ -- is the randomizer's
    (:meth:`fedbandit.protocols.sums.DDGVectors.decode`); the analyzer releases the result.  Its error
    mixes every party's rounding and noise and the modular wrap-around, so it is not an additive
    server noise (``return_noise`` is refused).
    """

    name: ClassVar[str] = "ddg-decoder"

    def describe(self) -> str:
        return "map the modular sum to [−m/2, m/2), undo the rotation, multiply by γ"

    def analyze(self, total: np.ndarray, rng: np.random.Generator,
                return_noise: bool) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        if return_noise:
            raise ValueError(
                "return_noise=True: the error of the distributed discrete Gaussian is not an additive noise of the "
                "server (it mixes every party's rounding and noise, and modular wrap-around)"
            )
        return total

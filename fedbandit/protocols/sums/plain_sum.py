"""A that releases the exact sum (the non-private sum protocol)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from fedbandit.protocols.sums.parts import SumAnalyzer

__all__ = ["PlainSum"]


class PlainSum(SumAnalyzer):
    """A: add up the delivered messages (the decoded sum, released as it is)."""

    name: ClassVar[str] = "plain-sum"

    def describe(self) -> str:
        return "the exact sum of the messages"

    def analyze(self, total: np.ndarray, rng: np.random.Generator,
                return_noise: bool) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        return (total, np.zeros_like(total)) if return_noise else total

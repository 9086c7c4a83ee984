"""The accounting's one root search: a calibration's gap, decreasing in a log-scale parameter.

Every noise-for-a-target rule (the analytic Gaussian, the sampled Gaussian's noise
multiplier, the DDG noise scale) solves ``gap(x) = 0`` for a gap that decreases in ``x``:
widen ``[lo, hi]`` by ``step`` until ``gap(lo) >= 0 >= gap(hi)``, refusing (ValueError) once
an end passes its limit, then Brent's method.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from scipy import optimize

__all__: list[str] = []


def decreasing_root(gap: Callable[[float], float], lo: float, hi: float, *, step: float,
                    lowest: float = -math.inf, highest: float = math.inf,
                    below: Callable[[float], str] | None = None, above: Callable[[float], str] | None = None,
                    xtol: float = 1e-12, rtol: float = 1e-12, maxiter: int = 300) -> float:
    """The root of a decreasing ``gap`` from the bracket guess ``[lo, hi]``.

    ``below(x)`` / ``above(x)`` give the ValueError's message when the low (high) end would pass
    ``lowest`` (``highest``); ``x`` is the last end tried.
    """
    while gap(lo) < 0:
        if lo - step < lowest:
            raise ValueError(below(lo) if below else f"no root above {lowest}")
        lo -= step
    while gap(hi) > 0:
        if hi + step > highest:
            raise ValueError(above(hi) if above else f"no root below {highest}")
        hi += step
    return optimize.brentq(gap, lo, hi, xtol=xtol, rtol=rtol, maxiter=maxiter)

"""Argument validation shared by every public function of :mod:`fedbandit`.

Every check raises before any work is done, with a message that names the
parameter, the value received and the allowed range (the OpenDP/scikit-learn
convention).  Use these helpers rather than ad-hoc ``if`` statements so that the
messages stay uniform across the package.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

__all__ = [
    "check_positive_float",
    "check_nonnegative_float",
    "check_probability",
    "check_epsilon",
    "check_delta",
    "check_positive_int",
    "check_nonnegative_int",
    "check_int_in_range",
    "check_float_in_range",
    "check_rng",
    "check_array",
    "check_choice",
    "check_bool",
    "check_unit_interval",
    "check_batch_sizes",
]


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _require_real(name: str, value: Any) -> float:
    if not _is_real(value):
        raise TypeError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}")
    value = float(value)
    if np.isnan(value):
        raise ValueError(f"{name} must not be NaN")
    return value


def check_positive_float(name: str, value: Any, *, allow_inf: bool = False) -> float:
    """Return ``value`` as a float if it lies in (0, inf) (or (0, inf] with ``allow_inf``)."""
    value = _require_real(name, value)
    if not value > 0 or (np.isinf(value) and not allow_inf):
        upper = "inf]" if allow_inf else "inf)"
        raise ValueError(f"{name} must lie in (0, {upper}, got {value!r}")
    return value


def check_nonnegative_float(name: str, value: Any) -> float:
    """Return ``value`` as a float if it lies in [0, inf)."""
    value = _require_real(name, value)
    if not (value >= 0 and np.isfinite(value)):
        raise ValueError(f"{name} must lie in [0, inf), got {value!r}")
    return value


def check_float_in_range(
    name: str,
    value: Any,
    low: float,
    high: float,
    *,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
) -> float:
    """Return ``value`` as a float if it lies in the stated interval."""
    value = _require_real(name, value)
    ok_low = value >= low if low_inclusive else value > low
    ok_high = value <= high if high_inclusive else value < high
    if not (ok_low and ok_high):
        lb = "[" if low_inclusive else "("
        rb = "]" if high_inclusive else ")"
        raise ValueError(f"{name} must lie in {lb}{low}, {high}{rb}, got {value!r}")
    return value


def check_probability(name: str, value: Any, *, open_interval: bool = True) -> float:
    """Return ``value`` if it lies in (0, 1) (or [0, 1] with ``open_interval=False``)."""
    return check_float_in_range(
        name, value, 0.0, 1.0, low_inclusive=not open_interval, high_inclusive=not open_interval
    )


def check_epsilon(value: Any, name: str = "epsilon") -> float:
    """Privacy parameter ε: must lie in (0, inf)."""
    return check_positive_float(name, value)


def check_delta(value: Any, name: str = "delta") -> float:
    """Privacy parameter δ: must lie in (0, 1)."""
    return check_probability(name, value)


def check_positive_int(name: str, value: Any) -> int:
    """Return ``value`` as an int if it is an integer >= 1."""
    return check_int_in_range(name, value, 1, None)


def check_nonnegative_int(name: str, value: Any) -> int:
    """Return ``value`` as an int if it is an integer >= 0."""
    return check_int_in_range(name, value, 0, None)


def check_int_in_range(name: str, value: Any, low: int | None, high: int | None) -> int:
    """Return ``value`` as an int if it is an integer in [low, high] (None = unbounded)."""
    if not _is_int(value):
        if _is_real(value) and float(value).is_integer():
            value = int(value)
        else:
            raise TypeError(f"{name} must be an integer, got {value!r} of type {type(value).__name__}")
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        lo = "-inf" if low is None else str(low)
        hi = "inf" if high is None else str(high)
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")
    return value


def check_bool(name: str, value: Any) -> bool:
    """Return ``value`` if it is a ``bool`` (or numpy bool); refuse anything else, such as ``"no"``."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be a bool (True or False), got {value!r} of type {type(value).__name__}")


def check_choice(name: str, value: Any, choices) -> Any:
    """Return ``value`` if it is one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices!r}, got {value!r}")
    return value


def check_rng(rng: Any, name: str = "rng") -> np.random.Generator:
    """Return a :class:`numpy.random.Generator`.

    Accepts a Generator (returned as is), a :class:`numpy.random.SeedSequence`
    or a non-negative integer seed.  ``None`` is refused on purpose: randomness
    is always an explicit argument in this package, so results never depend on
    global state.
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, np.random.SeedSequence):
        return np.random.default_rng(rng)
    if _is_int(rng) and rng >= 0:
        return np.random.default_rng(int(rng))
    raise TypeError(
        f"{name} must be a numpy.random.Generator, a SeedSequence or a non-negative int seed, got {rng!r}"
    )


def check_array(
    name: str,
    value: Any,
    *,
    ndim: int | None = None,
    shape: tuple | None = None,
    dtype=float,
    finite: bool = True,
) -> np.ndarray:
    """Return ``value`` as an array, checking its number of axes and shape.

    ``shape`` may contain ``None`` for axes of any length.
    """
    try:
        arr = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be array-like of {np.dtype(dtype).name}, got {type(value).__name__}") from exc
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} axes, got shape {arr.shape}")
    if shape is not None:
        if arr.ndim != len(shape) or any(s is not None and s != a for s, a in zip(shape, arr.shape)):
            want = tuple("any" if s is None else s for s in shape)
            raise ValueError(f"{name} must have shape {want}, got {arr.shape}")
    if finite and np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must contain only finite values")
    return arr


def check_unit_interval(name: str, x: Any) -> np.ndarray:
    """Return ``x`` as an array after checking that every entry lies in [0, 1].

    Boolean and integer arrays are kept as ``uint8`` (bits); anything else becomes float64.
    """
    arr = np.asarray(x)
    if arr.dtype == bool:
        return arr.astype(np.uint8)
    if np.issubdtype(arr.dtype, np.integer):
        if arr.size and (arr.min() < 0 or arr.max() > 1):
            raise ValueError(
                f"{name} must hold values in [0, 1], got integers in [{arr.min()}, {arr.max()}]"
            )
        return arr.astype(np.uint8, copy=False)
    arr = check_array(name, arr, dtype=float)
    if arr.size and (arr.min() < 0.0 or arr.max() > 1.0):
        raise ValueError(f"{name} must hold values in [0, 1], got values in [{arr.min()!r}, {arr.max()!r}]")
    return arr


def _is_binary(arr: np.ndarray) -> bool:
    if arr.dtype == np.uint8:
        return True
    return bool(np.all((arr == 0.0) | (arr == 1.0)))


def check_batch_sizes(batch_sizes: Any, n: int, k: int | None = None) -> tuple[int, ...]:
    """Check a nested batch-size schedule (b_1, ..., b_k) against the horizon n.

    The schedule is consistent with n when every b_i is a positive integer,
    n ≥ b_1 > b_2 > ... > b_k ≥ 1 and every b_{i+1} divides b_i (the batches of shuffler
    i + 1 tile those of shuffler i, so every time is covered by one batch per level).
    """
    try:
        sizes = tuple(batch_sizes)
    except TypeError as exc:
        raise TypeError(f"batch_sizes must be a sequence of positive ints, got {batch_sizes!r}") from exc
    if not sizes:
        raise ValueError("batch_sizes must not be empty")
    sizes = tuple(check_positive_int(f"batch_sizes[{i}]", b) for i, b in enumerate(sizes))
    if k is not None and len(sizes) != k:
        raise ValueError(f"batch_sizes must have k={k} entries (one per shuffler), got {len(sizes)}: {sizes}")
    if sizes[0] > n:
        raise ValueError(f"batch_sizes[0]={sizes[0]} exceeds the number of users n={n}; batch_sizes inconsistent with n")
    for i in range(1, len(sizes)):
        if not sizes[i] < sizes[i - 1] or sizes[i - 1] % sizes[i]:
            raise ValueError(
                f"batch_sizes must be strictly decreasing with each entry dividing the previous one, "
                f"got {sizes} (batch_sizes[{i}]={sizes[i]} vs batch_sizes[{i - 1}]={sizes[i - 1]})"
            )
    return sizes

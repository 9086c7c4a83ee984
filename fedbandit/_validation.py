"""Argument validation shared by every public function of :mod:`fedbandit`.

Every check raises before any work is done, with a message that names the
parameter, the value received and the allowed range (the OpenDP/scikit-learn
convention).  Use these helpers rather than ad-hoc ``if`` statements so that the
messages stay uniform across the package.

Conventions (``tests/test_api_fuzz.py`` holds every public callable to them):

* every helper takes the parameter's name first: ``check_x(name, value, ...)``;
* a refusal is a ``TypeError`` (wrong kind of value) or a ``ValueError`` (right kind,
  outside the allowed range) whose message names the parameter, shows the value and
  states what is allowed;
* integers are ``int`` or NumPy integers, never floats (not even ``3.0`` or ``1e300``:
  NumPy's rule for sizes) and never ``bool``; booleans are ``bool`` (or ``numpy.bool_``),
  never truthy strings such as ``"no"``;
* counts that set a function's running time or memory (horizons, users, steps) are
  capped where the cost is proportional to them: :data:`MAX_STEPS` for loops and
  per-step arrays, :data:`MAX_COUNT` for counts that only enter closed forms as numbers;
* finite reals are at most :data:`MAX_MAGNITUDE` in magnitude; ε is at least
  :data:`MIN_EPSILON` and δ at least :data:`MIN_DELTA`.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

__all__ = [
    "MAX_STEPS",
    "MAX_COUNT",
    "MAX_MAGNITUDE",
    "MIN_EPSILON",
    "MIN_DELTA",
    "check_positive_float",
    "check_finite_float",
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
    "check_str",
    "check_callable",
    "check_instance",
    "check_positive_array",
    "check_shape",
    "check_int_array",
]

#: Largest number of steps (rounds, users, tree leaves) of a function whose running time or
#: memory is proportional to it: 10^9 steps take minutes to hours even fully vectorized, so a
#: larger value is a mistake (a horizon in the wrong unit), refused before the work starts.
MAX_STEPS = 10**9

#: Largest count (users, agents, samples) that only enters closed-form expressions: above
#: 2^62 it no longer fits NumPy's int64 and float64 loses integer precision.
MAX_COUNT = 2**62

#: Largest magnitude of a finite real parameter: no parameter of the package is meaningful
#: beyond it, and squares and products of larger values overflow float64 (1e300**2 raises
#: OverflowError in Python).  ±inf is left to each check (``allow_inf``).
MAX_MAGNITUDE = 1e100

#: Smallest ε: noise scales grow like 1/ε, and below 1e-50 they leave the range where the
#: calibrations (which square them) stay finite.
MIN_EPSILON = 1e-50

#: Smallest δ: log(1/δ) of a subnormal δ loses precision and the solvers' brackets break.
MIN_DELTA = 1e-300


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _require_real(name: str, value: Any) -> float:
    if not _is_real(value):
        raise TypeError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}")
    try:
        value = float(value)
    except OverflowError:  # an int beyond float64
        raise ValueError(f"{name} must be at most {MAX_MAGNITUDE:g} in magnitude, got {value!r}") from None
    if np.isnan(value):
        raise ValueError(f"{name} must not be NaN")
    if np.isfinite(value) and abs(value) > MAX_MAGNITUDE:
        raise ValueError(
            f"{name} must be at most {MAX_MAGNITUDE:g} in magnitude (larger values overflow float64 in the "
            f"formulas), got {value!r}"
        )
    return value


def check_positive_float(name: str, value: Any, *, allow_inf: bool = False) -> float:
    """Return ``value`` as a float if it lies in (0, inf) (or (0, inf] with ``allow_inf``)."""
    value = _require_real(name, value)
    if not value > 0 or (np.isinf(value) and not allow_inf):
        upper = "inf]" if allow_inf else "inf)"
        raise ValueError(f"{name} must lie in (0, {upper}, got {value!r}")
    return value


def check_finite_float(name: str, value: Any) -> float:
    """Return ``value`` as a float if it is a finite real number (any sign)."""
    value = _require_real(name, value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
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


def check_epsilon(name: str, value: Any) -> float:
    """Privacy parameter ε (``name`` is the parameter's name): must lie in [:data:`MIN_EPSILON`, inf)."""
    value = check_positive_float(name, value)
    if value < MIN_EPSILON:
        raise ValueError(f"{name} must be at least {MIN_EPSILON:g} (noise scales grow like 1/{name}), got {value!r}")
    return value


def check_delta(name: str, value: Any) -> float:
    """Privacy parameter δ (``name`` is the parameter's name): must lie in [:data:`MIN_DELTA`, 1)."""
    value = check_probability(name, value)
    if value < MIN_DELTA:
        raise ValueError(f"{name} must lie in [{MIN_DELTA:g}, 1) (below, log(1/{name}) loses precision), got {value!r}")
    return value


def check_positive_int(name: str, value: Any, *, max_value: int | None = None, reason: str = "") -> int:
    """Return ``value`` as an int if it is an integer in [1, ``max_value``] (see :func:`check_int_in_range`)."""
    return check_int_in_range(name, value, 1, max_value, reason=reason)


def check_nonnegative_int(name: str, value: Any, *, max_value: int | None = None, reason: str = "") -> int:
    """Return ``value`` as an int if it is an integer in [0, ``max_value``]."""
    return check_int_in_range(name, value, 0, max_value, reason=reason)


def _power(n: int) -> str:
    # 10**9 -> "10^9", 2**62 -> "2^62", anything else as is
    for base in (10, 2):
        e = round(np.log(n) / np.log(base)) if n > 0 else 0
        if e > 3 and base**e == n:
            return f"{base}^{e}"
    return str(n)


def check_int_in_range(name: str, value: Any, low: int | None, high: int | None, *, reason: str = "") -> int:
    """Return ``value`` as an int if it is an integer in [low, high] (None = unbounded).

    Integers are ``int`` or NumPy integers; floats (even integral ones such as ``3.0`` or
    ``1e300``) and ``bool`` are refused with a ``TypeError``.  ``reason`` (shown in the
    message) says why an upper bound exists, e.g. that the cost grows with the value.
    """
    if not _is_int(value):
        raise TypeError(f"{name} must be an integer (int or numpy integer), got {value!r} of type {type(value).__name__}")
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        lo = "-inf" if low is None else _power(low)
        hi = "inf" if high is None else _power(high)
        why = f" ({reason})" if reason else ""
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}]{why}, got {value!r}")
    return value


def check_bool(name: str, value: Any) -> bool:
    """Return ``value`` if it is a ``bool`` (or numpy bool); refuse anything else, such as ``"no"``."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be a bool (True or False), got {value!r} of type {type(value).__name__}")


def _same(value: Any, choice: Any) -> bool:
    if value is choice:
        return True
    if isinstance(value, (np.ndarray, list, dict, set)) or isinstance(value, (bool, np.bool_)) != isinstance(
        choice, (bool, np.bool_)
    ):
        return False
    try:
        return bool(value == choice)
    except (TypeError, ValueError):
        return False


def check_choice(name: str, value: Any, choices) -> Any:
    """Return ``value`` if it is one of ``choices`` (compared by equality; ``True`` is not ``1``)."""
    choices = tuple(choices)
    if not any(_same(value, c) for c in choices):
        raise ValueError(f"{name} must be one of {choices!r}, got {value!r}")
    return value


def check_str(name: str, value: Any) -> str:
    """Return ``value`` if it is a ``str`` (free text: labels, notes, theorem names)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {value!r:.80} of type {type(value).__name__}")
    return value


def check_callable(name: str, value: Any) -> Any:
    """Return ``value`` if it is callable."""
    if not callable(value):
        raise TypeError(f"{name} must be callable, got {value!r} of type {type(value).__name__}")
    return value


def check_instance(name: str, value: Any, cls, what: str | None = None) -> Any:
    """Return ``value`` if it is an instance of ``cls`` (a class or a tuple of classes)."""
    if not isinstance(value, cls):
        names = " or ".join(c.__name__ for c in (cls if isinstance(cls, tuple) else (cls,)))
        raise TypeError(f"{name} must be {what or 'a ' + names}, got {value!r:.80} of type {type(value).__name__}")
    return value


def check_rng(name: str, value: Any) -> np.random.Generator:
    """Return a :class:`numpy.random.Generator`.

    Accepts a Generator (returned as is), a :class:`numpy.random.SeedSequence`
    or a non-negative integer seed.  ``None`` is refused on purpose: randomness
    is always an explicit argument in this package, so results never depend on
    global state.
    """
    if isinstance(value, np.random.Generator):
        return value
    if isinstance(value, np.random.SeedSequence):
        return np.random.default_rng(value)
    if _is_int(value) and value >= 0:
        return np.random.default_rng(int(value))
    if _is_int(value):
        raise ValueError(f"{name} must be a numpy.random.Generator, a SeedSequence or a non-negative int seed, got {value!r}")
    raise TypeError(
        f"{name} must be a numpy.random.Generator, a SeedSequence or a non-negative int seed, got {value!r}"
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


def check_shape(name: str, value: Any, *, allow_empty: bool = True, allow_zero: bool = False,
                max_size: int = MAX_STEPS) -> tuple[int, ...]:
    """Return an array shape (an int or a sequence of ints) as a tuple of ints.

    Every entry must be >= 1 (>= 0 with ``allow_zero``) and the number of elements at most
    ``max_size`` (:data:`MAX_STEPS`: an array of the shape is allocated).
    """
    if _is_int(value):
        value = (value,)
    if isinstance(value, (str, bytes, dict, set)) or not hasattr(value, "__iter__"):
        raise TypeError(f"{name} must be an int or a tuple of ints, got {value!r:.80} of type {type(value).__name__}")
    items = tuple(value)
    if not all(_is_int(v) for v in items):
        raise TypeError(f"{name} must be an int or a tuple of ints, got {value!r:.80}")
    shape = tuple(int(v) for v in items)
    low = 0 if allow_zero else 1
    if any(v < low for v in shape) or (not shape and not allow_empty):
        raise ValueError(f"{name} must be a {'non-empty ' if not allow_empty else ''}tuple of ints >= {low}, got {shape!r}")
    size = 1
    for v in shape:
        size *= v
    if size > max_size:
        raise ValueError(f"{name}={shape!r} has {size} elements, more than {_power(max_size)} (an array of it is allocated)")
    return shape


def check_int_array(name: str, value: Any, *, low: int | None = 0, high: int | None = MAX_COUNT) -> np.ndarray:
    """Return ``value`` (an int or an array of ints) as an int64 array with entries in [low, high].

    Floats are refused unless every entry is an integer (counts computed in float arrays);
    NaN, inf and bools are refused.
    """
    if isinstance(value, (str, bytes, dict, set)) or value is None or isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an int or an array of ints, got {value!r:.80}")
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an int or an array of ints, got {value!r:.80}") from exc
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise TypeError(f"{name} must be an int or an array of ints, got {value!r:.80} (dtype {arr.dtype})")
    if np.issubdtype(arr.dtype, np.floating):
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must hold integers, got {value!r:.80}")
        if arr.size and np.max(np.abs(arr)) > MAX_COUNT:
            raise ValueError(f"{name} must hold integers in [{low}, {_power(high or MAX_COUNT)}], got {value!r:.80}")
        arr = arr.astype(np.int64)
    elif arr.dtype == np.uint64 and arr.size and arr.max() > MAX_COUNT:
        raise ValueError(f"{name} must hold integers at most {_power(MAX_COUNT)}, got {value!r:.80}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and ((low is not None and arr.min() < low) or (high is not None and arr.max() > high)):
        lo = "-inf" if low is None else _power(low)
        hi = "inf" if high is None else _power(high)
        raise ValueError(f"{name} must hold integers in [{lo}, {hi}], got values in [{arr.min()}, {arr.max()}]")
    return arr


def check_positive_array(name: str, value: Any, *, allow_zero: bool = False) -> np.ndarray:
    """Return ``value`` as a float array whose entries are finite and > 0 (>= 0 with ``allow_zero``)."""
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"{name} must be a positive number or array of them, got {value!r}")
    arr = check_array(name, value, dtype=float)
    bad = arr < 0 if allow_zero else arr <= 0
    if np.any(bad):
        which = "[0, inf)" if allow_zero else "(0, inf)"
        raise ValueError(f"{name} must lie in {which}, got {value!r:.80}")
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


def is_binary(arr: np.ndarray) -> bool:
    if arr.dtype == np.uint8:
        return True
    return bool(np.all((arr == 0.0) | (arr == 1.0)))


def check_batch_sizes(name: str, batch_sizes: Any, n: int, k: int | None = None) -> tuple[int, ...]:
    """Check a nested batch-size schedule (b_1, ..., b_k) against the horizon n.

    The schedule is consistent with n when every b_i is a positive integer,
    n ≥ b_1 > b_2 > ... > b_k ≥ 1 and every b_{i+1} divides b_i (the batches of shuffler
    i + 1 tile those of shuffler i, so every time is covered by one batch per level).
    """
    try:
        sizes = tuple(batch_sizes)
    except TypeError as exc:
        raise TypeError(f"{name} must be a sequence of positive ints, got {batch_sizes!r}") from exc
    if not sizes:
        raise ValueError(f"{name} must not be empty")
    sizes = tuple(check_positive_int(f"{name}[{i}]", b) for i, b in enumerate(sizes))
    if k is not None and len(sizes) != k:
        raise ValueError(f"{name} must have k={k} entries (one per shuffler), got {len(sizes)}: {sizes}")
    if sizes[0] > n:
        raise ValueError(f"{name}[0]={sizes[0]} exceeds the number of users n={n}; {name} inconsistent with n")
    for i in range(1, len(sizes)):
        if not sizes[i] < sizes[i - 1] or sizes[i - 1] % sizes[i]:
            raise ValueError(
                f"{name} must be strictly decreasing with each entry dividing the previous one, "
                f"got {sizes} ({name}[{i}]={sizes[i]} vs {name}[{i - 1}]={sizes[i - 1]})"
            )
    return sizes

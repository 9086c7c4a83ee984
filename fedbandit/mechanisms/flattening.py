r"""Flattening transforms for the distributed discrete Gaussian [KLS21]_, Section 4.2.

Before rounding and modular reduction each client multiplies its vector by a shared
random unitary matrix :math:`U`, and the server multiplies the decoded sum by
:math:`U^{-1} = U^\top`.  A good :math:`U` spreads any vector evenly over the
coordinates, so that no coordinate of the aggregate is large enough to wrap around
modulo :math:`m`.  Two constructions of the paper are provided:

* :class:`HadamardFlattener`: :math:`U = H D / \sqrt{d'}` with :math:`D` a diagonal of
  i.i.d. random signs and :math:`H` the Walsh–Hadamard matrix of size :math:`d' = 2^k`
  (the input is zero-padded to the next power of two).  Subgaussian flatness constant
  :math:`\rho = 1` ([KLS21]_ Lemma 29); the product costs :math:`O(d\log d)` with the
  fast Walsh–Hadamard transform :func:`fwht`.
* :class:`DFTFlattener`: pairs of real coordinates become one complex number, each is
  multiplied by a random phase in :math:`\{1, i, -1, -i\}` and the unitary discrete
  Fourier transform is applied; only one zero of padding is ever needed (even length),
  also :math:`\rho = 1` ([KLS21]_ Section 4.2).

The random signs/phases are *shared public randomness*: privacy does not depend on
them being secret ([KLS21]_ Section 4.2), so they are drawn from a seed known to the
server and all clients.  ``runs=R`` draws one rotation per run of a simulation that
advances R independent runs side by side (leading axis of every array), so that the runs
are independent executions of the protocol, rotation included.

References
----------
.. [KLS21] P. Kairouz, Z. Liu and T. Steinke, "The distributed discrete Gaussian
   mechanism for federated learning with secure aggregation", ICML 2021.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from fedbandit._combinatorics import flattened_dim, next_power_of_two
from fedbandit._validation import (
    MAX_STEPS,
    check_array,
    check_bool,
    check_choice,
    check_int_array,
    check_int_in_range,
    check_positive_int,
    check_rng,
)

__all__ = ["fwht", "next_power_of_two", "flattened_dim", "HadamardFlattener", "DFTFlattener", "make_flattener"]


_BLOCK_LOG2 = 4  # dense Hadamard factors of size at most 16: the matrix products' sweet spot
_CHUNK = 1 << 16  # elements transformed at a time: input, output and two buffers stay in L2


def _hadamard_dense(k: int) -> np.ndarray:
    h = np.ones((1, 1))
    for _ in range(k):
        h = np.block([[h, h], [h, -h]])
    return h


_DENSE = {k: _hadamard_dense(k) for k in range(_BLOCK_LOG2 + 1)}


def _plan(k: int) -> list[int]:
    """log2 sizes of the Kronecker factors of H_{2^k}: as few as blocks of at most 2^4 allow,
    as even as possible, the smallest first (the last factor, on contiguous memory, is the
    most efficient matrix product)."""
    n = -(-k // _BLOCK_LOG2)
    base, extra = divmod(k, n)
    return [base + (1 if i >= n - extra else 0) for i in range(n)]


def fwht(x: ArrayLike, *, normalize: bool = True) -> np.ndarray:
    r"""Fast Walsh–Hadamard transform along the last axis (length a power of two).

    Computes :math:`H_{d} x` for the Sylvester–Hadamard matrix
    :math:`H_{2d} = \begin{pmatrix} H_d & H_d \\ H_d & -H_d\end{pmatrix}`
    ([KLS21]_ Eq. 53), divided by :math:`\sqrt d` when ``normalize`` (then the transform is
    orthogonal and its own inverse).  Uses the Kronecker factorisation
    :math:`H_{2^k} = H_{2^{k_1}} \otimes \cdots \otimes H_{2^{k_j}}` with blocks of at most
    :math:`2^4`: each factor is a small dense matrix product along one axis of the reshaped
    array, :math:`O(d \log d)` operations in total.  Leading axes are flattened into rows,
    transformed a chunk of rows at a time so that the factors' products run on data in
    cache; the factor products write into two reused buffers.

    Parameters
    ----------
    x : array_like, shape (..., d)
        ``d`` must be a power of two.
    normalize : bool, default True

    Returns
    -------
    ndarray
        The transform of each vector (divided by sqrt(d) when ``normalize``).
    """
    x = check_array("x", x, finite=False)
    normalize = check_bool("normalize", normalize)
    if x.ndim == 0:
        raise ValueError("x must have at least one axis")
    d = x.shape[-1]
    if d < 1 or d & (d - 1):
        raise ValueError(f"the last axis of x must have a power-of-two length, got {d}")
    k = d.bit_length() - 1
    if k == 0 or x.size == 0:
        return x.copy()
    n = x.size // d
    src = x.reshape(n, d)
    out = np.empty((n, d))
    blocks = _plan(k)
    rows = max(1, _CHUNK // d)
    buffers = [np.empty(min(rows, n) * d) for _ in range(min(2, len(blocks) - 1))]
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        cur = src[r0:r1]
        # cur viewed as (rows, 2^b1, ..., 2^bj); H acts on each of these axes in turn.  For
        # the axis of size B with A elements before it and C after, (B, B) @ (A, B, C) is a
        # broadcast matrix product on contiguous memory (no transposes).
        before, after = r1 - r0, d
        for i, b in enumerate(blocks):
            size = 1 << b
            after //= size
            dst = out[r0:r1] if i == len(blocks) - 1 else buffers[i % 2][: (r1 - r0) * d]
            if after == 1:  # last factor: rows @ H (H is symmetric)
                np.matmul(cur.reshape(-1, size), _DENSE[b], out=dst.reshape(-1, size))
            else:
                np.matmul(_DENSE[b], cur.reshape(before, size, after), out=dst.reshape(before, size, after))
            before *= size
            cur = dst
    out = out.reshape(x.shape)
    if normalize:
        out *= 1.0 / np.sqrt(d)
    return out


def _check_last_axis(x: ArrayLike, dim: int, name: str) -> np.ndarray:
    """``x`` as an array whose last axis has length ``dim`` (both flatteners' input check)."""
    arr = check_array(name, x, finite=False)
    if arr.ndim == 0 or arr.shape[-1] != dim:
        raise ValueError(f"{name} must have last axis of length {dim}, got shape {arr.shape}")
    return arr


class HadamardFlattener:
    r"""Randomized Hadamard rotation :math:`U x = H D \,\mathrm{pad}(x) / \sqrt{d'}` ([KLS21]_ Sec. 4.2).

    Parameters
    ----------
    d : int
        Input dimension; the output dimension is ``d_out = next_power_of_two(d)``.
    rng : numpy.random.Generator or int
        Shared public randomness for the signs (an int seed is convenient: the
        server and the clients build the same flattener from it).
    runs : int or None, default None
        None: one rotation; R: one rotation per run (module docstring).
    """

    kind = "hadamard"
    rho = 1.0  # subgaussian flatness constant (Lemma 29)

    def __init__(self, d: int, rng: int | np.random.Generator, runs: int | None = None) -> None:
        self.d = check_positive_int("d", d, max_value=MAX_STEPS, reason="vectors of d entries are allocated")
        self.d_out = next_power_of_two(self.d)
        rng = check_rng("rng", rng)
        self.runs = _check_runs(runs, self.d_out)
        shape = (self.d_out,) if self.runs is None else (self.runs, self.d_out)
        self.signs = rng.choice(np.array([-1.0, 1.0]), size=shape)

    def flatten(self, x: ArrayLike, *, run: int | ArrayLike | None = None) -> np.ndarray:
        """Map ``x`` of shape (..., d) to ``U x`` of shape (..., d_out).

        With one rotation per run (``runs=R``): ``x`` of shape (R, ..., d), or ``run`` names
        the one run whose rotation applies to all of ``x``, or ``run`` is an integer array of
        shape ``x.shape[:-1]``, the run of each vector (several runs' vectors in one call).
        """
        x = _check_last_axis(x, self.d, "x")
        pad = np.zeros(x.shape[:-1] + (self.d_out,), dtype=np.float64)
        pad[..., : self.d] = x
        pad *= _per_run(self.signs, self.runs, run, pad.shape, "x")
        return fwht(pad)

    def unflatten(self, y: ArrayLike, *, run: int | ArrayLike | None = None) -> np.ndarray:
        """Map ``y`` of shape (..., d_out) to ``U^T y`` truncated to shape (..., d) (``run`` as in :meth:`flatten`)."""
        y = _check_last_axis(y, self.d_out, "y")
        z = fwht(y)
        z *= _per_run(self.signs, self.runs, run, z.shape, "y")
        return z[..., : self.d]


class DFTFlattener:
    r"""Random-phase unitary DFT flattening ([KLS21]_ Sec. 4.2, Eq. 56-57).

    Real coordinates ``(x_{2j}, x_{2j+1})`` form the complex number
    :math:`x_{2j} + i x_{2j+1}`; each is multiplied by a uniformly random phase
    :math:`e^{i\theta_j}`, :math:`\theta_j \in \{0, \pi/2, \pi, 3\pi/2\}`, and the unitary DFT
    (``norm="ortho"``) is applied; real and imaginary parts of the result are the
    ``d_out = d + (d mod 2)`` output coordinates.  The map is real-linear and orthogonal.

    Parameters
    ----------
    d : int
        The input dimension.
    rng : numpy.random.Generator or int
        The source of the shared random phases.
    runs : int or None, default None
        None: one rotation; R: one rotation per run (module docstring).
    """

    kind = "dft"
    rho = 1.0

    def __init__(self, d: int, rng: int | np.random.Generator, runs: int | None = None) -> None:
        self.d = check_positive_int("d", d, max_value=MAX_STEPS, reason="vectors of d entries are allocated")
        self.d_out = self.d + (self.d % 2)
        rng = check_rng("rng", rng)
        self.runs = _check_runs(runs, self.d_out)
        shape = (self.d_out // 2,) if self.runs is None else (self.runs, self.d_out // 2)
        self.phases = np.array([1, 1j, -1, -1j])[rng.integers(0, 4, size=shape)]

    def flatten(self, x: ArrayLike, *, run: int | ArrayLike | None = None) -> np.ndarray:
        """As :meth:`HadamardFlattener.flatten`."""
        x = _check_last_axis(x, self.d, "x")
        pad = np.zeros(x.shape[:-1] + (self.d_out,), dtype=np.float64)
        pad[..., : self.d] = x
        z = pad[..., 0::2] + 1j * pad[..., 1::2]
        z *= _per_run(self.phases, self.runs, run, z.shape, "x")
        f = np.fft.fft(z, axis=-1, norm="ortho")
        out = np.empty_like(pad)
        out[..., 0::2] = f.real
        out[..., 1::2] = f.imag
        return out

    def unflatten(self, y: ArrayLike, *, run: int | ArrayLike | None = None) -> np.ndarray:
        """As :meth:`HadamardFlattener.unflatten`."""
        y = _check_last_axis(y, self.d_out, "y")
        z = y[..., 0::2] + 1j * y[..., 1::2]
        f = np.fft.ifft(z, axis=-1, norm="ortho") * np.conj(_per_run(self.phases, self.runs, run, z.shape, "y"))
        out = np.empty(y.shape, dtype=np.float64)
        out[..., 0::2] = f.real
        out[..., 1::2] = f.imag
        return out[..., : self.d]


def _check_runs(runs: int | None, d_out: int) -> int | None:
    """``runs`` of a flattener: None (one shared rotation) or the number of runs, one rotation each."""
    if runs is None:
        return None
    return check_positive_int("runs", runs, max_value=max(1, MAX_STEPS // d_out),
                              reason="one rotation of d_out entries is drawn per run")


def _per_run(table: np.ndarray, runs: int | None, run: int | ArrayLike | None, shape: tuple[int, ...],
             name: str) -> np.ndarray:
    """The rotation's diagonal broadcast against an array of ``shape``: shared, one run's, one per vector (``run``
    an array over the vectors' leading axes), or one per leading row."""
    if runs is None:
        if run is not None:
            raise ValueError(f"run={run!r}: this flattener has one rotation shared by every run")
        return table
    if run is not None and np.ndim(run) == 0:
        return table[check_int_in_range("run", run, 0, runs - 1)]
    if run is not None:
        idx = check_int_array("run", run, low=0, high=runs - 1)
        if idx.shape != shape[:-1]:
            raise ValueError(f"run: one run per vector of {name}, shape {shape[:-1]}, got shape {idx.shape}")
        return table[idx]
    if len(shape) < 2 or shape[0] != runs:
        raise ValueError(f"{name} must have a leading axis of the {runs} runs (one rotation each), got shape {shape}")
    return table.reshape((runs,) + (1,) * (len(shape) - 2) + table.shape[1:])


def make_flattener(d: int, rng: int | np.random.Generator, kind: str = "hadamard",
                   runs: int | None = None) -> HadamardFlattener | DFTFlattener:
    """Build a :class:`HadamardFlattener` (``kind="hadamard"``) or :class:`DFTFlattener` (``"dft"``).

    Parameters
    ----------
    d : int
        The input dimension.
    rng : numpy.random.Generator or int
        The source of the shared randomness.
    kind : {"hadamard", "dft"}, default "hadamard"
        The flattener.
    runs : int or None, default None
        None for one rotation, or R for one rotation per run (module docstring).

    Returns
    -------
    HadamardFlattener or DFTFlattener
    """
    check_choice("kind", kind, ("hadamard", "dft"))
    return HadamardFlattener(d, rng, runs) if kind == "hadamard" else DFTFlattener(d, rng, runs)

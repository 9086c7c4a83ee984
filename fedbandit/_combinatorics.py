"""Dyadic-tree and padding arithmetic shared by the accounting and the mechanisms.

Both layers count the same things: how many p-sums of the binary tree one element enters
(κ = ⌊log₂ K⌋ + 1, which sets the tree's zCDP), which nodes add up to a prefix sum, and
how many coordinates a flattened vector has after padding (which sets the distributed
discrete Gaussian's sensitivity).  They live here, below both, so that
:mod:`fedbandit.accounting` never imports :mod:`fedbandit.mechanisms` (the layer order of
``pyproject.toml``'s import-linter contract); the mechanisms re-export them
(:mod:`fedbandit.mechanisms.tree`, :mod:`fedbandit.mechanisms.flattening`).
"""

from __future__ import annotations

import numpy as np

from fedbandit._validation import check_choice, check_positive_int

__all__ = ["lowest_set_bit", "lowest_set_bits", "prefix_nodes", "tree_depth", "next_power_of_two", "flattened_dim"]


def lowest_set_bit(k: int) -> int:
    """ν(k): the index j of the lowest set bit of k ≥ 1 (k = 2^j · odd).

    Parameters
    ----------
    k : int
        A positive step index.

    Returns
    -------
    int
        ν(k), with k = 2^ν(k) · odd.
    """
    k = check_positive_int("k", k)
    return (k & -k).bit_length() - 1


def lowest_set_bits(k: np.ndarray) -> np.ndarray:
    """ν(k) elementwise for an integer array of steps k ≥ 1 (unchecked: the per-run hot path).

    Parameters
    ----------
    k : ndarray of int
        Positive step indices.

    Returns
    -------
    ndarray of int64
        ν(k) per entry, as :func:`lowest_set_bit`.
    """
    return np.frexp((k & -k).astype(np.float64))[1].astype(np.int64) - 1


def prefix_nodes(k: int) -> list[tuple[int, int]]:
    """The tree nodes (level j, index) whose p-sums add up to the prefix sum s_k.

    Node (j, i) covers the stream positions (i − 1)·2^j + 1, …, i·2^j.  The nodes are
    the set bits of k, so there are popcount(k) ≤ ⌊log₂ k⌋ + 1 of them.

    Parameters
    ----------
    k : int
        A positive step index.

    Returns
    -------
    list of (int, int)
        The (level j, index i) of each node, lowest level first.
    """
    k = check_positive_int("k", k)
    nodes = []
    for j in range(k.bit_length()):
        if k >> j & 1:
            nodes.append((j, k >> j))
    return nodes


def tree_depth(n_steps: int) -> int:
    """κ = ⌊log₂ K⌋ + 1: the number of levels of a tree over K steps, which bounds how
    many p-sums one element enters (Zhou & Chowdhury, Algorithm 2).

    Parameters
    ----------
    n_steps : int
        K, the number of steps of the tree (≥ 1).

    Returns
    -------
    int
        κ = ⌊log₂ K⌋ + 1.
    """
    return check_positive_int("n_steps", n_steps).bit_length()


def next_power_of_two(d: int) -> int:
    """Smallest power of two >= ``d``.

    Parameters
    ----------
    d : int
        A positive integer.

    Returns
    -------
    int
        The smallest 2^j ≥ ``d``.
    """
    d = check_positive_int("d", d)
    return 1 << (d - 1).bit_length()


def flattened_dim(d: int, kind: str = "hadamard") -> int:
    """The flattener's output dimension for ``d`` inputs: the next power of two (Walsh–Hadamard)
    or ``d + d mod 2`` (DFT), as :class:`~fedbandit.mechanisms.flattening.HadamardFlattener` and
    :class:`~fedbandit.mechanisms.flattening.DFTFlattener` give.

    Parameters
    ----------
    d : int
        The input dimension (≥ 1).
    kind : {"hadamard", "dft"}
        The flattener.

    Returns
    -------
    int
        The padded dimension d′ the flattener outputs.
    """
    d = check_positive_int("d", d)
    return next_power_of_two(d) if check_choice("kind", kind, ("hadamard", "dft")) == "hadamard" else d + d % 2

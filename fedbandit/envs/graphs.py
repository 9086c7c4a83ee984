"""Communication graphs, the consensus matrix and its spectral network terms.

The decentralized algorithm of Li, Song & Fragouli (DP-Decentralized UCB, their
Algorithm 2; {cite}`li2022federated`) runs the discrete-time consensus
``x(t+1) = P x(t)`` with the row-stochastic matrix

.. math::  P = I_M - \\frac{\\kappa}{d_{\\max}} L ,

where ``L`` is the Laplacian of the (undirected) communication graph, ``d_max`` its largest
degree and ``kappa`` in [0, 1] a step size (the paper's equation (4), as in coop-UCB of
Landgren, Srivastava & Leonard, 2016).  This module builds the graphs the book uses
(complete, ring, star, 2-D grid, Erdős–Rényi), the matrix ``P`` and the spectral terms that
enter the index and the regret bound (:func:`network_terms`).

Graphs are :class:`Graph` objects holding a symmetric 0/1 adjacency matrix without
self-loops.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fedbandit._validation import (
    check_array,
    check_bool,
    check_choice,
    check_float_in_range,
    check_instance,
    check_int_in_range,
    check_positive_int,
    check_rng,
)

__all__ = [
    "Graph",
    "DisconnectedGraphError",
    "MAX_AGENTS",
    "complete_graph",
    "ring_graph",
    "star_graph",
    "grid_graph",
    "erdos_renyi_graph",
    "make_graph",
    "TOPOLOGIES",
    "laplacian",
    "default_kappa",
    "consensus_matrix",
    "NetworkTerms",
    "network_terms",
]

#: Topology names accepted by :func:`make_graph`.
TOPOLOGIES = ("complete", "ring", "star", "grid", "erdos_renyi")


class DisconnectedGraphError(ValueError):
    """Raised when consensus is asked of a graph that is not connected."""


@dataclass(frozen=True)
class Graph:
    """An undirected communication graph among ``M`` agents.

    Parameters
    ----------
    adjacency : array of shape (M, M)
        Symmetric 0/1 matrix with zero diagonal; ``adjacency[i, k] = 1`` when agents ``i``
        and ``k`` exchange messages.
    name : str
        A label used in figures and results (``"ring"``, ``"grid 4x5"``, ...).
    """

    adjacency: np.ndarray
    name: str = "graph"
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self):
        A = check_array("adjacency", self.adjacency, ndim=2, dtype=float)
        M = A.shape[0]
        if A.shape != (M, M) or M < 1:
            raise ValueError(f"adjacency must be a square (M, M) matrix with M >= 1, got shape {A.shape}")
        if not np.all((A == 0) | (A == 1)):
            raise ValueError("adjacency must contain only 0 and 1")
        if not np.array_equal(A, A.T):
            raise ValueError("adjacency must be symmetric (the paper's links are bi-directional)")
        if np.any(np.diag(A) != 0):
            raise ValueError("adjacency must have a zero diagonal (no self-loops)")
        A = A.astype(np.int8)
        A.setflags(write=False)
        object.__setattr__(self, "adjacency", A)
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a str, got {self.name!r}")

    @property
    def n_agents(self) -> int:
        """Number of agents ``M``."""
        return int(self.adjacency.shape[0])

    @property
    def degrees(self) -> np.ndarray:
        """Degree ``deg(i)`` of every agent."""
        return self.adjacency.sum(axis=1).astype(int)

    @property
    def d_max(self) -> int:
        """Largest degree ``d_max``."""
        return int(self.degrees.max()) if self.n_agents > 0 else 0

    @property
    def n_edges(self) -> int:
        """Number of undirected edges."""
        return int(self.adjacency.sum() // 2)

    @property
    def is_connected(self) -> bool:
        """Whether every agent can reach every other (breadth-first search)."""
        M = self.n_agents
        if M == 1:
            return True
        seen = np.zeros(M, dtype=bool)
        seen[0] = True
        frontier = np.array([0])
        while frontier.size:
            nxt = np.nonzero(self.adjacency[frontier].any(axis=0) & ~seen)[0]
            seen[nxt] = True
            frontier = nxt
        return bool(seen.all())


#: Largest number of agents of a graph: its adjacency and consensus matrices have M² entries
#: (5000 agents: 200 MB each, about a second to build).
MAX_AGENTS = 5_000


def _check_agents(n_agents, low=2) -> int:
    return check_int_in_range("n_agents", n_agents, low, MAX_AGENTS, reason="the matrices of the graph have M² entries")


def complete_graph(n_agents: int) -> Graph:
    """Complete graph on ``n_agents`` vertices (every pair linked).

    Parameters
    ----------
    n_agents : int
        M, the number of agents. (≥ 1)

    Returns
    -------
    Graph
    """
    M = _check_agents(n_agents, 1)
    return Graph(np.ones((M, M)) - np.eye(M), name="complete")


def ring_graph(n_agents: int) -> Graph:
    """Cycle ``0 - 1 - ... - (M-1) - 0`` (a path of two vertices when ``M = 2``).

    Parameters
    ----------
    n_agents : int
        M, the number of agents. (≥ 2)

    Returns
    -------
    Graph
    """
    M = _check_agents(n_agents)
    A = np.zeros((M, M))
    idx = np.arange(M)
    A[idx, (idx + 1) % M] = 1
    A[(idx + 1) % M, idx] = 1
    np.fill_diagonal(A, 0)
    return Graph(A, name="ring")


def star_graph(n_agents: int) -> Graph:
    """Star: agent 0 is linked to every other agent, no other links.

    Parameters
    ----------
    n_agents : int
        M, the number of agents. (≥ 2)

    Returns
    -------
    Graph
    """
    M = _check_agents(n_agents)
    A = np.zeros((M, M))
    A[0, 1:] = 1
    A[1:, 0] = 1
    return Graph(A, name="star")


def grid_graph(n_rows: int, n_cols: int) -> Graph:
    """2-D grid (4-neighbour lattice) of ``n_rows x n_cols`` agents, numbered row by row.

    Parameters
    ----------
    n_rows, n_cols : int
        The grid's shape (at least 2 agents in all).

    Returns
    -------
    Graph
    """
    r = check_positive_int("n_rows", n_rows, max_value=MAX_AGENTS)
    c = check_positive_int("n_cols", n_cols, max_value=MAX_AGENTS)
    if r * c > MAX_AGENTS:
        raise ValueError(f"n_rows * n_cols must be at most {MAX_AGENTS} agents, got {r}x{c}")
    if r * c < 2:
        raise ValueError(f"n_rows * n_cols must be >= 2, got {r}x{c}")
    A = np.zeros((r * c, r * c))
    for i in range(r):
        for j in range(c):
            v = i * c + j
            if j + 1 < c:
                A[v, v + 1] = A[v + 1, v] = 1
            if i + 1 < r:
                A[v, v + c] = A[v + c, v] = 1
    return Graph(A, name=f"grid {r}x{c}")


def _near_square(M: int) -> tuple[int, int]:
    r = int(np.floor(np.sqrt(M)))
    while M % r:
        r -= 1
    return r, M // r


def erdos_renyi_graph(n_agents: int, p: float, rng, *, require_connected: bool = True, max_tries: int = 1000) -> Graph:
    """Erdős–Rényi graph G(M, p): every pair linked independently with probability ``p``.

    Parameters
    ----------
    n_agents : int
        Number of agents ``M >= 2``.
    p : float
        Edge probability in (0, 1].
    rng : numpy.random.Generator
        Source of randomness.
    require_connected : bool, default True
        Redraw until the graph is connected (consensus needs connectivity); raise
        :class:`DisconnectedGraphError` after ``max_tries`` failures.
    max_tries : int, default 1000
        Number of draws allowed when ``require_connected``.

    Returns
    -------
    Graph
        Connected when ``require_connected``.
    """
    M = _check_agents(n_agents)
    p = check_float_in_range("p", p, 0.0, 1.0, low_inclusive=False)
    rng = check_rng("rng", rng)
    max_tries = check_positive_int("max_tries", max_tries)
    require_connected = check_bool("require_connected", require_connected)
    for _ in range(max_tries if require_connected else 1):
        upper = np.triu(rng.random((M, M)) < p, k=1)
        g = Graph((upper | upper.T).astype(float), name=f"Erdős–Rényi p={p:g}")
        if not require_connected or g.is_connected:
            return g
    raise DisconnectedGraphError(
        f"erdos_renyi_graph: no connected G({M}, p={p}) in {max_tries} draws; increase p "
        f"(connectivity needs p well above ln(M)/M = {np.log(M) / M:.3f})"
    )


def make_graph(topology: str, n_agents: int, *, p: float = 0.3, rng=None) -> Graph:
    """Build a graph by name: one of :data:`TOPOLOGIES`.

    ``"grid"`` uses the most nearly square factorization ``n_rows x n_cols = M`` (a 1 x M
    path when M is prime); ``"erdos_renyi"`` needs ``rng`` and uses edge probability ``p``.

    Parameters
    ----------
    topology : str
        One of :data:`TOPOLOGIES`.
    n_agents : int
        M, the number of agents.
    p : float, default 0.3
        The edge probability of ``"erdos_renyi"``.
    rng : numpy.random.Generator, optional
        Required by ``"erdos_renyi"``.

    Returns
    -------
    Graph
    """
    check_choice("topology", topology, TOPOLOGIES)
    M = _check_agents(n_agents)
    if topology == "complete":
        return complete_graph(M)
    if topology == "ring":
        return ring_graph(M)
    if topology == "star":
        return star_graph(M)
    if topology == "grid":
        return grid_graph(*_near_square(M))
    if rng is None:
        raise TypeError("make_graph('erdos_renyi', ...) needs rng (a numpy Generator or a seed)")
    return erdos_renyi_graph(M, p, rng)


def laplacian(graph: Graph) -> np.ndarray:
    """Graph Laplacian ``L = D - A`` (``D`` the diagonal degree matrix).

    Parameters
    ----------
    graph : Graph

    Returns
    -------
    ndarray of shape (M, M)
        L = D − A.
    """
    if not isinstance(graph, Graph):
        raise TypeError(f"graph must be a fedbandit.envs.graphs.Graph, got {type(graph).__name__}")
    A = graph.adjacency.astype(float)
    return np.diag(A.sum(axis=1)) - A


def default_kappa(graph: Graph) -> float:
    """Step size ``kappa = d_max / (d_max + 1)``, the choice of coop-UCB.

    It makes every diagonal entry of ``P`` at least ``1 / (d_max + 1) > 0``, so ``P`` is
    aperiodic (no eigenvalue -1) on every connected graph, bipartite ones included.

    Parameters
    ----------
    graph : Graph

    Returns
    -------
    float
        κ = d_max/(d_max + 1).
    """
    d = check_instance("graph", graph, Graph).d_max
    return d / (d + 1.0)


def consensus_matrix(graph: Graph, kappa: float | None = None) -> np.ndarray:
    """Consensus matrix ``P = I_M - (kappa / d_max) L`` (the paper's equation (4)).

    Parameters
    ----------
    graph : Graph
        A connected communication graph.
    kappa : float in [0, 1], optional
        Step size; default :func:`default_kappa`.

    Returns
    -------
    numpy.ndarray of shape (M, M)
        Symmetric, doubly stochastic, non-negative (because ``kappa <= 1``).

    Raises
    ------
    DisconnectedGraphError
        If the graph is not connected: the agents would then agree only within components,
        and no consensus estimate of the network's counts exists.
    ValueError
        If ``kappa`` lies outside [0, 1].
    """
    if not isinstance(graph, Graph):
        raise TypeError(f"graph must be a fedbandit.envs.graphs.Graph, got {type(graph).__name__}")
    if kappa is None:
        kappa = default_kappa(graph)
    kappa = check_float_in_range("kappa", kappa, 0.0, 1.0)
    if not graph.is_connected:
        raise DisconnectedGraphError(
            f"graph {graph.name!r} is disconnected: consensus needs a connected communication graph"
        )
    M = graph.n_agents
    if M == 1:
        return np.ones((1, 1))
    return np.eye(M) - (kappa / graph.d_max) * laplacian(graph)


@dataclass(frozen=True)
class NetworkTerms:
    """Spectral quantities of a consensus matrix ``P`` (see :func:`network_terms`).

    Attributes
    ----------
    eigenvalues : ndarray
        The eigenvalues of P, sorted decreasingly (λ₁ = 1).
    lambda_2 : float
        The largest modulus among λ₂, ..., λ_M.
    spectral_gap : float
        1 − λ₂.
    epsilon_n : float
        coop-UCB's sqrt(M) Σ_{p≥2} |λ_p|/(1 − |λ_p|).
    c_i : ndarray of shape (M,)
        The per-agent consensus error bounds (the index's c_i).
    c_0 : float
        The network scale (the index's c_0 = M).
    """

    eigenvalues: np.ndarray  #: eigenvalues of P, sorted decreasingly (lambda_1 = 1)
    lambda_2: float  #: largest modulus among lambda_2, ..., lambda_M
    spectral_gap: float  #: 1 - lambda_2
    epsilon_n: float  #: coop-UCB's sqrt(M) * sum_{p>=2} |lambda_p| / (1 - |lambda_p|)
    c_i: np.ndarray  #: per-agent consensus error bound (the index's c_i)
    c_0: float  #: network scale (the index's c_0 = M)

    @property
    def mean_c_i(self) -> float:
        """Average of the per-agent terms."""
        return float(np.mean(self.c_i))


def network_terms(P, *, tol: float = 1e-12, max_steps: int = 1_000_000) -> NetworkTerms:
    """Spectral network terms used by the decentralized index and its regret bound.

    The book's reconstruction (the paper names c_0 and c_i without a formula): with
    ``J = 1 1^T / M``, the running consensus ``n̂_j(t+1) = P (n̂_j(t) + ξ_j(t))`` with
    0/1 increments satisfies, for every agent ``i``,

    .. math:: |\\hat n_{i,j}(t) - n_j(t)/M| \\le c_i :=
              \\sum_{s \\ge 1} \\lVert e_i^\\top (P^s - J) \\rVert_1 ,

    the worst case over increments in [-1, 1]; over 0/1 increments (each row of
    ``P^s - J`` sums to zero) the exact worst case is ``c_i / 2``, which chapter 3
    checks by driving the recursion with the worst-case increments.  It is
    bounded by coop-UCB's spectral constant
    ``epsilon_n = sqrt(M) sum_{p>=2} |lambda_p| / (1 - |lambda_p|)`` (Landgren et al.,
    2016), which the paper's ``c_0``/``c_i`` generalize; sparse graphs (small spectral gap)
    have large ``c_i``.  ``c_0`` is the network scale ``M`` (the paper: "c_0 is
    proportional to the network scale").

    Parameters
    ----------
    P : array of shape (M, M)
        Symmetric doubly stochastic consensus matrix (from :func:`consensus_matrix`).
    tol : float
        The series is summed until ``max_i ||e_i^T (P^s - J)||_1 < tol``; the tail beyond
        is estimated geometrically with ``lambda_2`` and added.
    max_steps : int
        Safety cap on the number of powers.

    Raises
    ------
    ValueError
        If ``P`` has an eigenvalue of modulus 1 besides lambda_1 (a disconnected graph, or
        a periodic chain such as an even ring with ``kappa = 1``): the consensus never
        converges and the terms are infinite.

    Returns
    -------
    NetworkTerms
    """
    P = check_array("P", P, ndim=2)
    M = P.shape[0]
    if P.shape != (M, M):
        raise ValueError(f"P must be square, got shape {P.shape}")
    if not np.allclose(P, P.T, atol=1e-12) or not np.allclose(P.sum(axis=1), 1.0, atol=1e-10):
        raise ValueError("P must be symmetric with rows summing to 1 (a consensus matrix)")
    tol = check_float_in_range("tol", tol, 0.0, 1.0, low_inclusive=False)
    max_steps = check_positive_int("max_steps", max_steps)
    eig = np.sort(np.linalg.eigvalsh(P))[::-1]
    if M == 1:
        return NetworkTerms(eig, 0.0, 1.0, 0.0, np.zeros(1), 1.0)
    rest = np.abs(eig[1:])
    lam2 = float(rest.max())
    if lam2 >= 1 - 1e-10:
        raise ValueError(
            f"P has a second eigenvalue of modulus {lam2:.6f} ~ 1: the consensus does not converge "
            "(disconnected graph, or a periodic chain; use kappa < 1)"
        )
    eps_n = float(np.sqrt(M) * np.sum(rest / (1 - rest)))
    J = np.full((M, M), 1.0 / M)
    D = P - J  # (P^s - J) = (P - J)^s because P J = J P = J
    Ds = D.copy()
    c = np.zeros(M)
    for _ in range(max_steps):
        row = np.abs(Ds).sum(axis=1)
        c += row
        if row.max() < tol:
            break
        Ds = Ds @ D
    # Remaining tail (below tol per term, decaying like lam2^s): negligible, but add its
    # geometric estimate so the sum is not biased low.
    c += row * lam2 / (1 - lam2)
    return NetworkTerms(eig, lam2, 1.0 - lam2, eps_n, c, float(M))

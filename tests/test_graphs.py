"""Tests of fedbandit.envs.graphs: topologies, Laplacian, consensus matrix, spectral network terms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbandit.envs.graphs import (
    TOPOLOGIES,
    DisconnectedGraphError,
    Graph,
    complete_graph,
    consensus_matrix,
    default_kappa,
    erdos_renyi_graph,
    grid_graph,
    laplacian,
    make_graph,
    network_terms,
    ring_graph,
    star_graph,
)


def test_topology_shapes_and_degrees():
    M = 12
    assert complete_graph(M).n_edges == M * (M - 1) // 2
    assert np.all(complete_graph(M).degrees == M - 1)
    assert ring_graph(M).n_edges == M and np.all(ring_graph(M).degrees == 2)
    s = star_graph(M)
    assert s.n_edges == M - 1 and s.degrees[0] == M - 1 and np.all(s.degrees[1:] == 1)
    g = grid_graph(3, 4)
    assert g.n_agents == 12 and g.n_edges == 3 * 3 + 2 * 4  # horizontal + vertical links
    assert sorted(set(g.degrees)) == [2, 3, 4]
    er = erdos_renyi_graph(M, 0.4, np.random.default_rng(1))
    assert er.is_connected
    for name in TOPOLOGIES:
        gg = make_graph(name, 20, rng=np.random.default_rng(0))
        assert gg.n_agents == 20 and gg.is_connected


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_consensus_matrix_properties(name):
    g = make_graph(name, 16, rng=np.random.default_rng(3))
    L = laplacian(g)
    assert np.allclose(L.sum(axis=1), 0) and np.allclose(L, L.T)
    for kappa in (0.0, 0.3, default_kappa(g), 1.0):
        P = consensus_matrix(g, kappa)
        assert np.allclose(P, P.T)
        assert np.allclose(P.sum(axis=1), 1.0)
        assert P.min() >= -1e-15  # kappa <= 1 keeps P non-negative
        eig = np.linalg.eigvalsh(P)
        assert np.isclose(eig.max(), 1.0) and eig.min() >= -1 - 1e-12


def test_disconnected_graph_rejected():
    A = np.zeros((4, 4))
    A[0, 1] = A[1, 0] = 1
    A[2, 3] = A[3, 2] = 1
    g = Graph(A, name="two pairs")
    assert not g.is_connected
    with pytest.raises(DisconnectedGraphError, match="disconnected"):
        consensus_matrix(g)
    with pytest.raises(DisconnectedGraphError, match="no connected"):
        erdos_renyi_graph(30, 0.01, np.random.default_rng(0), max_tries=5)


@pytest.mark.parametrize("kappa", [-0.1, 1.5, float("nan")])
def test_kappa_outside_unit_interval_rejected(kappa):
    with pytest.raises(ValueError, match="kappa"):
        consensus_matrix(ring_graph(5), kappa)


def test_bad_adjacency_rejected():
    with pytest.raises(ValueError, match="symmetric"):
        Graph(np.array([[0, 1], [0, 0]]))
    with pytest.raises(ValueError, match="diagonal"):
        Graph(np.eye(3))
    with pytest.raises(ValueError, match="0 and 1"):
        Graph(np.array([[0, 2], [2, 0]]))
    with pytest.raises(ValueError, match="n_agents"):
        ring_graph(1)
    with pytest.raises(ValueError, match="topology"):
        make_graph("hypercube", 8)


def test_network_terms_complete_graph_is_exact_averaging():
    terms = network_terms(consensus_matrix(complete_graph(10)))
    # kappa = d/(d+1) on the complete graph gives P = J: one step of exact averaging.
    assert np.allclose(terms.c_i, 0.0) and terms.lambda_2 < 1e-12 and terms.c_0 == 10


def test_network_terms_sparser_is_larger():
    M = 20
    c = {name: network_terms(consensus_matrix(make_graph(name, M, rng=np.random.default_rng(0)))).mean_c_i
         for name in ("complete", "erdos_renyi", "grid", "ring")}
    assert c["complete"] < c["erdos_renyi"] < c["grid"] < c["ring"]
    ring_terms = network_terms(consensus_matrix(ring_graph(M)))
    assert np.allclose(ring_terms.c_i, ring_terms.c_i[0])  # vertex-transitive: all agents alike
    # the per-agent exact bound never exceeds coop-UCB's spectral constant
    for name in TOPOLOGIES:
        t = network_terms(consensus_matrix(make_graph(name, M, rng=np.random.default_rng(0))))
        assert np.all(t.c_i <= t.epsilon_n + 1e-9)


def test_periodic_chain_rejected():
    # Even ring with kappa = 1: P = (shift + shift^-1)/2 has eigenvalue -1 (no convergence).
    with pytest.raises(ValueError, match="does not converge"):
        network_terms(consensus_matrix(ring_graph(6), 1.0))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), name=st.sampled_from(["ring", "star", "grid", "erdos_renyi"]))
def test_consensus_error_within_c_i(seed, name):
    """Property: running consensus of 0/1 increments stays within c_i of n/M (the c_i definition)."""
    rng = np.random.default_rng(seed)
    M = 9
    g = make_graph(name, M, rng=rng)
    P = consensus_matrix(g)
    terms = network_terms(P)
    n_hat = np.zeros(M)
    n = 0.0
    for _ in range(200):
        xi = (rng.random(M) < rng.random()).astype(float)
        n += xi.sum()
        n_hat = P @ (n_hat + xi)
        assert np.all(np.abs(n_hat - n / M) <= terms.c_i + 1e-9)

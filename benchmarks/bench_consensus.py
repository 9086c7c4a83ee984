"""Consensus private UCB (Li, Song & Fragouli): agent-rounds per second, vectorized vs loops.

For DP-Master-worker UCB and DP-Decentralized UCB (ring of M = 20 agents, K = 10 arms,
epsilon = 1, hybrid mechanism per (agent, arm)):

* ``*_vectorized_agent_rounds_per_s``: ``fedbandit.learners.consensus``
  (``MasterWorkerUCB`` / ``DecentralizedUCB`` with the ``"counter-hybrid"`` protocol) with
  250 runs side by side (the chapter's paper-scale batch: 5 epsilons x 50 runs in one call) over
  1000 slots;
* ``*_reference_agent_rounds_per_s``: the plain-loop reference of
  ``tests/reference_consensus_ucb.py`` (the same algorithm, same draws) with 1 run over
  200 slots;
* ``*_speedup``: the ratio (the issue's target: at least 50).

An agent-round is one agent's decision, reward and mechanism update in one slot.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from _measure import timed  # noqa: E402
from reference_consensus_ucb import ref_decentralized, ref_master_worker  # noqa: E402

from fedbandit.envs.graphs import ring_graph  # noqa: E402
from fedbandit.envs.multi_armed import BernoulliBandit  # noqa: E402
from fedbandit.learners.consensus import DecentralizedUCB, MasterWorkerUCB  # noqa: E402
from fedbandit.protocols.registry import create  # noqa: E402

M, K = 20, 10
MEANS = np.array([0.75, 0.65, 0.6, 0.55, 0.5, 0.45, 0.4, 0.35, 0.3, 0.25])
R_VEC, T_VEC = 250, 1000
R_REF, T_REF = 1, 200


def benchmarks() -> list[dict]:
    env = BernoulliBandit(MEANS)
    graph = ring_graph(M)
    def master_worker():
        learner = MasterWorkerUCB(create("counter-hybrid", epsilon=1.0), n_agents=M, n_arms=K, horizon=T_VEC,
                                  n_runs=R_VEC)
        return learner.run(env, np.random.default_rng(0))

    def decentralized():
        learner = DecentralizedUCB(create("counter-hybrid", epsilon=1.0), graph=graph, n_arms=K, horizon=T_VEC,
                                   n_runs=R_VEC)
        return learner.run(env, np.random.default_rng(0))

    cases = {
        "master_worker": (
            master_worker,
            lambda: ref_master_worker(env, M, T_REF, 1.0, rng=np.random.default_rng(0), n_runs=R_REF),
        ),
        "decentralized": (
            decentralized,
            lambda: ref_decentralized(env, graph, T_REF, 1.0, rng=np.random.default_rng(0), n_runs=R_REF),
        ),
    }
    rows = []
    for name, (vec, ref) in cases.items():
        t_vec, mem_vec = timed(vec, repeat=2)
        start = time.perf_counter()
        ref()
        t_ref = time.perf_counter() - start
        v = R_VEC * M * T_VEC / t_vec
        r = R_REF * M * T_REF / t_ref
        rows += [
            {"name": f"{name}_vectorized_agent_rounds_per_s", "value": v, "unit": "agent-rounds/s",
             "peak_mem_mb": mem_vec, "notes": f"{R_VEC} runs x M={M} x {T_VEC} slots, K={K}, eps=1"},
            {"name": f"{name}_reference_agent_rounds_per_s", "value": r, "unit": "agent-rounds/s",
             "peak_mem_mb": float("nan"), "notes": f"tests/reference_consensus_ucb.py, {R_REF} run x {T_REF} slots"},
            {"name": f"{name}_speedup", "value": v / r, "unit": "x", "peak_mem_mb": mem_vec,
             "notes": "vectorized over loop reference (target >= 50)"},
        ]
    return rows


if __name__ == "__main__":
    for row in benchmarks():
        print(f"{row['name']}: {row['value']:.4g} {row['unit']} ({row['notes']})")

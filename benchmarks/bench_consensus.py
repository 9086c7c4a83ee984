"""Consensus private UCB (Li, Song & Fragouli): agent-rounds per second, vectorized vs loops.

For DP-Master-worker UCB and DP-Decentralized UCB (ring of M = 20 agents, K = 10 arms,
epsilon = 1, hybrid mechanism per (agent, arm)):

* ``*_vectorized_agent_rounds_per_s``: ``fedbandit.learners.consensus``
  (``MasterWorkerUCB`` / ``DecentralizedUCB`` with the ``"counter-hybrid"`` protocol) with
  250 runs side by side (the chapter's paper-scale batch: 5 epsilons x 50 runs in one call) over
  1000 slots;
* ``*_same_workload_speedup``: the plain-loop reference of ``tests/reference_consensus_ucb.py``
  against the vectorized learner on the SAME workload (4 runs x 200 slots, the same draws:
  the benchmark checks that both take the same actions), reference time / vectorized time;
  the reference's throughput is in the row's notes.  (The rows used to divide the
  250-run throughput by the 1-run reference's, a ratio of two different workloads.)

An agent-round is one agent's decision, reward and mechanism update in one slot.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from _measure import measure  # noqa: E402
from fedbandit.envs.graphs import ring_graph  # noqa: E402
from fedbandit.envs.multi_armed import BernoulliBandit  # noqa: E402
from fedbandit.learners.consensus import DecentralizedUCB, MasterWorkerUCB  # noqa: E402
from fedbandit.protocols.registry import create  # noqa: E402
from reference_consensus_ucb import ref_decentralized, ref_master_worker  # noqa: E402

M, K = 20, 10
MEANS = np.array([0.75, 0.65, 0.6, 0.55, 0.5, 0.45, 0.4, 0.35, 0.3, 0.25])
R_VEC, T_VEC = 250, 1000
R_REF, T_REF = 4, 200


def benchmarks() -> list[dict]:
    env = BernoulliBandit(MEANS)
    graph = ring_graph(M)

    def master_worker(runs, horizon, **kw):
        learner = MasterWorkerUCB(create("counter-hybrid", epsilon=1.0), n_agents=M, n_arms=K, horizon=horizon,
                                  n_runs=runs)
        return learner.run(env, np.random.default_rng(0), **kw)

    def decentralized(runs, horizon, **kw):
        learner = DecentralizedUCB(create("counter-hybrid", epsilon=1.0), graph=graph, n_arms=K, horizon=horizon,
                                   n_runs=runs)
        return learner.run(env, np.random.default_rng(0), **kw)

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
        t_vec = measure(lambda: vec(R_VEC, T_VEC), repeat=2)
        same = measure(lambda: vec(R_REF, T_REF), repeat=3, trace_memory=False)
        t_ref = measure(ref, repeat=1, trace_memory=False)
        if not np.array_equal(vec(R_REF, T_REF, record_actions=True).extras["actions"], ref()[0]):
            raise AssertionError(f"{name}: the vectorized learner and the reference took different actions")
        v = R_VEC * M * T_VEC / t_vec.wall
        work = R_REF * M * T_REF
        rows += [
            {"id": f"consensus_{name}_vectorized", "name": f"{name}_vectorized_agent_rounds_per_s", "value": v,
             "unit": "agent-rounds/s", **t_vec.as_dict(), "notes": f"{R_VEC} runs x M={M} x {T_VEC} slots, K={K}, eps=1"},
            {"id": f"consensus_{name}_same_workload_speedup", "name": f"{name}_same_workload_speedup",
             "value": t_ref.wall / same.wall, "ratio_cpu": t_ref.cpu / same.cpu, "unit": "x", **same.as_dict(),
             "notes": f"{R_REF} runs x {T_REF} slots for both, same actions; reference {work / t_ref.wall:.3g} "
                      f"agent-rounds/s, vectorized {work / same.wall:.3g}; CPU-time ratio {t_ref.cpu / same.cpu:.3g}"},
        ]
    return rows


if __name__ == "__main__":
    for row in benchmarks():
        print(f"{row['name']}: {row['value']:.4g} {row['unit']} ({row['notes']})")

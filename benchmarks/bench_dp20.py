"""DP20's FedUCB: agent-rounds per second of the vectorized learner, against the plain loop
reference (tests/reference_dp20.py) on the same small instance (the same workload: the
benchmark checks that both pull the same arms and synchronize in the same rounds), and at
the chapter's sizes (throughput only: no ratio to a different workload)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from _measure import measure  # noqa: E402
from fedbandit.envs.linear import SyntheticLinearEnv  # noqa: E402
from fedbandit.learners.dp20 import FedUCB, wang_threshold  # noqa: E402
from fedbandit.protocols.registry import create  # noqa: E402
from reference_dp20 import reference_feducb  # noqa: E402


def _dp20():
    return create("dp20", epsilon=30.0, delta=0.1, noise="corrected")


def _small():
    M, d, T, R = 16, 5, 40, 8
    env = SyntheticLinearEnv(M, n_arms=20, dim=d, n_runs=R, seed=0)
    learner = FedUCB(_dp20(), n_agents=M, dim=d, horizon=T, threshold=0.05)
    return env, learner, M * T * R


def benchmarks() -> list[dict]:
    rows = []
    env, learner, agent_rounds = _small()
    fast = measure(lambda: learner.run(env, np.random.default_rng(0)), repeat=3)
    slow = measure(lambda: reference_feducb(learner, env, np.random.default_rng(0)), repeat=1, trace_memory=False)
    res = learner.run(env, np.random.default_rng(0), record_arms=True)
    arms, sync, _, _ = reference_feducb(learner, env, np.random.default_rng(0))
    if not (np.array_equal(res.extras["arms"], arms) and np.array_equal(res.extras["sync"], sync)):
        raise AssertionError("DP20: the vectorized learner and the reference differ: not the same workload")
    rows.append(
        {
            "id": "dp20_same_workload_speedup",
            "name": "DP20 FedUCB vectorized vs loop reference, same workload (M=16, d=5, K=20, T=40, 8 runs)",
            "value": slow.wall / fast.wall,
            "ratio_cpu": slow.cpu / fast.cpu,
            "unit": "x speed-up",
            **fast.as_dict(),
            "notes": f"same arms and sync rounds; vectorized {agent_rounds / fast.wall:.3g} agent-rounds/s, reference "
                     f"{agent_rounds / slow.wall:.3g}; CPU-time ratio {slow.cpu / fast.cpu:.3g}",
        }
    )
    for M, runs, schedule in ((64, 16, "fixed"), (64, 4, "adaptive")):
        T, d = 2000, 5
        env = SyntheticLinearEnv(M, n_arms=20, dim=d, n_runs=runs, seed=0)
        kw = dict(schedule="fixed", batch_size=5) if schedule == "fixed" else dict(threshold=wang_threshold(T, d, M))
        learner = FedUCB(_dp20(), n_agents=M, dim=d, horizon=T, **kw)
        t = measure(lambda: learner.run(env, np.random.default_rng(0)), repeat=1)
        seconds = t.wall
        rows.append(
            {
                "id": f"dp20_{schedule}_chapter_size",
                **t.as_dict(),
                "name": f"DP20 FedUCB, {schedule} schedule, M={M}, T={T}, {runs} runs (chapter size)",
                "value": M * T * runs / seconds,
                "unit": "agent-rounds/s",
                "notes": f"{seconds:.2f} s per call; d={d}, K=20, DP20 noise as corrected at eps=30, delta=0.1",
            }
        )
    return rows


if __name__ == "__main__":  # pragma: no cover
    for row in benchmarks():
        print(row)

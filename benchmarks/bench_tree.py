"""The distributed tree through the silo-level LDP protocol: prefix-sum releases per second
of the packed statistics (bias and Gram upper triangle), 100 agents × 25 runs vectorized
(Zhou & Chowdhury's paper scale), d = 10 and 57."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import floor, measure  # noqa: E402
from fedbandit.protocols.registry import create  # noqa: E402

RUNS, AGENTS, STEPS = 25, 100, 16


def _run(d: int, steps: int) -> None:
    p = create("silo-ldp", epsilon=1.0, delta=1e-5).configure(n_agents=AGENTS, dim=d, n_batches=STEPS, batch_size=1)
    p.reset(n_runs=RUNS, rng=np.random.default_rng(0))
    gram = np.broadcast_to(np.eye(d), (RUNS, AGENTS, d, d))
    bias = np.zeros((RUNS, AGENTS, d))
    for _ in range(steps):
        p.synchronize(bias, gram)


def benchmarks() -> list[dict]:
    rows = []
    for d in (10, 57):
        steps = STEPS if d == 10 else 4
        t = measure(lambda: _run(d, steps), repeat=2)
        releases = steps * RUNS  # one synchronized prefix release per run and step
        packed = d + d * (d + 1) // 2  # bias + Gram upper triangle
        values = steps * RUNS * AGENTS * packed  # one fresh noisy node per agent, run and step
        rows.append(
            {
                "id": f"tree_silo_ldp_d{d}",
                "name": f"distributed tree, d={d}, {AGENTS} agents x {RUNS} runs",
                "value": releases / t.wall,
                "unit": "prefix releases/s",
                **t.as_dict(),
                "notes": f"{steps} steps; each release sums {AGENTS} agents' noisy packed p-sums (bias + Gram triangle) "
                f"({AGENTS * releases / t.wall:.3g} agent p-sums/s)",
                "floor": floor(f"{values:.3g} noise draws (one new node of {packed} packed values per agent, run and "
                               f"step), each value read and written once ({16 * values / 1e6:.3g} MB)",
                               {"normals_per_s": values, "copy_bytes_per_s": 16 * values}, t.cpu),
            }
        )
    return rows

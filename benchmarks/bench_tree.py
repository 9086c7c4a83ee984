"""Tree mechanism: prefix-sum releases per second for d×d Gram matrices, with
100 agents × 25 runs vectorized (Zhou & Chowdhury's paper scale), d = 10 and 57."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import timed  # noqa: E402

from fedbandit.mechanisms.tree import DistributedTreeMechanism  # noqa: E402

RUNS, AGENTS, STEPS = 25, 100, 16


def _run(d: int, steps: int) -> None:
    rng = np.random.default_rng(0)
    tree = DistributedTreeMechanism(STEPS, (d, d), 1.0, AGENTS, batch_shape=(RUNS,), symmetric=True)
    gram = np.broadcast_to(np.eye(d), (RUNS, AGENTS, d, d))
    for _ in range(steps):
        tree.step(gram, rng)


def benchmarks() -> list[dict]:
    rows = []
    for d in (10, 57):
        steps = STEPS if d == 10 else 4
        seconds, peak = timed(lambda: _run(d, steps), repeat=2)
        releases = steps * RUNS  # one synchronized prefix release per run and step
        rows.append(
            {
                "name": f"distributed tree, d={d}, {AGENTS} agents x {RUNS} runs",
                "value": releases / seconds,
                "unit": "prefix releases/s",
                "peak_mem_mb": peak,
                "notes": f"{steps} steps; each release sums {AGENTS} agents' noisy {d}x{d} p-sums "
                f"({AGENTS * releases / seconds:.3g} agent p-sums/s)",
            }
        )
    return rows

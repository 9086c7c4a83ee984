"""Throughput of private summation under continual observation (fedbandit.mechanisms.psco).

Users per second through the k-shuffler PSCO algorithm (aggregate sampling of every
shuffled batch, the path the chapter's sweeps use), through the per-user message
simulation, and through the dyadic (k = log n) and central tree variants.  Each row is
the best of three calls after one warm-up call (the warm-up fills the accountant's cache
of blanket probabilities, a one-off cost per schedule); input validation included.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import timed  # noqa: E402

from fedbandit.mechanisms.psco import central_tree_psco, concurrent_psco, sample_bernoulli_input, sequential_psco, tree_psco

EPS, DELTA = 1.0, 1e-8


def benchmarks() -> list[dict]:
    rng = np.random.default_rng(0)
    rows = []
    cases = [
        ("psco_concurrent_k3_aggregate_n1e7", 10**7, lambda x: concurrent_psco(x, 3, EPS, DELTA, rng), "k=3 shufflers, aggregate (binomial) sampling, 1 run"),
        ("psco_concurrent_k1_aggregate_n1e7", 10**7, lambda x: sequential_psco(x, EPS, DELTA, rng), "sequential (k=1), aggregate sampling, 1 run"),
        ("psco_concurrent_k3_per_user_n1e6", 10**6, lambda x: concurrent_psco(x, 3, EPS, DELTA, rng, sampling="per_user"), "k=3, every message simulated, 1 run"),
        ("psco_tree_logn_aggregate_n1e7", 10**7, lambda x: tree_psco(x, EPS, DELTA, rng), "dyadic variant, k=24 shufflers, 1 run"),
        ("psco_central_tree_n1e7", 10**7, lambda x: central_tree_psco(x, EPS, DELTA, rng), "central Gaussian tree, 1 run"),
    ]
    for name, n, func, notes in cases:
        x = sample_bernoulli_input(n, rng, runs=1)
        func(x)  # warm-up: fills the accountant's cache of blanket probabilities (one-off per schedule)
        best, peak = timed(lambda: func(x))
        users_per_s = n / best
        rows.append({"name": name, "value": users_per_s, "unit": "users/s", "peak_mem_mb": peak, "notes": notes})
    return rows


if __name__ == "__main__":
    for row in benchmarks():
        print(f"{row['name']:40s} {row['value']:14,.0f} {row['unit']}  peak {row['peak_mem_mb']:8.1f} MB  ({row['notes']})")

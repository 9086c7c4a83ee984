"""Throughput of private summation under continual observation and of the concurrent-shuffle learner.

Users per second through the k-shuffler PSCO algorithm of ``fedbandit.mechanisms.psco``
(aggregate sampling of every shuffled batch, the path the chapter's sweeps use), through
the per-user message simulation, and through the dyadic (k = log n) and central tree
variants; then through the concurrent-shuffle protocol (``fedbandit.protocols.create(
"concurrent-shuffle", ...)``: randomized response on every coordinate of every user's
linear-bandit record, synchronized every b_k users) and the LinUCB learner on it
(``fedbandit.learners.ConcurrentShuffleLinUCB``, the chapter's bandit sweep).  Each row is
the best of three calls after one warm-up call (the warm-up fills the accountant's cache
of blanket probabilities, a one-off cost per schedule); input validation included.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import timed  # noqa: E402
from fedbandit.envs.linear import SyntheticLinearEnv  # noqa: E402
from fedbandit.learners.concurrent_linucb import ConcurrentShuffleLinUCB  # noqa: E402
from fedbandit.mechanisms.psco import (  # noqa: E402
    central_tree_psco,
    concurrent_psco,
    sample_bernoulli_input,
    sequential_psco,
    tree_psco,
)
from fedbandit.protocols.registry import create  # noqa: E402

EPS, DELTA = 1.0, 1e-8
BANDIT_EPS, BANDIT_DELTA, DIM, RUNS = 10.0, 1e-6, 2, 4


def _protocol_stream(params, n):
    """n users' records (runs = RUNS, d = DIM) through a configured concurrent-shuffle protocol."""
    lr = ConcurrentShuffleLinUCB(create("concurrent-shuffle", epsilon=BANDIT_EPS, delta=BANDIT_DELTA, **params),
                                 n_users=n, dim=DIM)
    proto, b = lr.protocol, lr.period
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, RUNS, 1, DIM))
    x /= np.maximum(1.0, np.linalg.norm(x, axis=-1, keepdims=True))
    y = np.clip(rng.standard_normal((n, RUNS, 1)), -1.0, 1.0)
    bias, gram = np.zeros((RUNS, 1, DIM)), np.zeros((RUNS, 1, DIM, DIM))

    def run():
        proto.reset(n_runs=RUNS, rng=np.random.default_rng(1))
        for s in range(0, (n // b) * b, b):
            proto.synchronize(bias, gram, users=(x[s : s + b], y[s : s + b]))

    return run


def _learner_run(params, n):
    lr = ConcurrentShuffleLinUCB(create("concurrent-shuffle", epsilon=BANDIT_EPS, delta=BANDIT_DELTA, **params),
                                 n_users=n, dim=DIM, noise_bound=0.1)

    def run():
        env = SyntheticLinearEnv(1, n_arms=20, dim=DIM, n_runs=RUNS, noise_std=0.1, shared_contexts=False,
                                 means_from_raw=False, seed=0)
        lr.run(env, np.random.default_rng(1))

    return run


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
        rows.append({"name": name, "value": n / best, "unit": "users/s", "peak_mem_mb": peak, "notes": notes})
    protocol_cases = [
        ("protocol_concurrent_shuffle_seq_n1e5", _protocol_stream, dict(batch_sizes=(400,)), 10**5,
         "sequential (one level, b=400), D=5 coordinates, 4 runs, synchronize per batch"),
        ("protocol_concurrent_shuffle_k2_n1e5", _protocol_stream, dict(batch_sizes=(2000, 40)), 10**5,
         "k=2 levels (2000, 40), D=5 coordinates, 4 runs"),
        ("protocol_concurrent_shuffle_tree_n2e4", _protocol_stream, dict(k="log"), 2 * 10**4,
         "dyadic, k=15 levels, period 1 (one synchronize per user), 4 runs"),
        ("linucb_concurrent_shuffle_k2_n2e4", _learner_run, dict(k=2), 2 * 10**4,
         "ConcurrentShuffleLinUCB, k=2 optimal schedule, d=2, 20 arms, 4 runs"),
        ("linucb_concurrent_shuffle_tree_n2e4", _learner_run, dict(k="log"), 2 * 10**4,
         "ConcurrentShuffleLinUCB, dyadic (lean one-user loop), d=2, 20 arms, 4 runs"),
    ]
    for name, make, params, n, notes in protocol_cases:
        func = make(params, n)
        func()
        best, peak = timed(func)
        rows.append({"name": name, "value": n / best, "unit": "users/s", "peak_mem_mb": peak, "notes": notes})
    return rows


if __name__ == "__main__":
    for row in benchmarks():
        print(f"{row['name']:40s} {row['value']:14,.0f} {row['unit']}  peak {row['peak_mem_mb']:8.1f} MB  ({row['notes']})")

"""Distributed discrete Gaussian (Kairouz, Liu & Steinke): exact sampler throughput at sigma
10 and 1000, randomized Hadamard flattening of a 2^20 vector, the ``sum-ddg-secagg``
protocol's sums per second with the *ideal* modular sum (no cryptography) and with the real
five-round secure aggregation, the federated trainer's rounds per second under each sum
protocol, and (``long=True``) the DME sweep at the paper's settings.  SecAgg alone and the
transform alone are measured side by side with their peers in ``bench_hotpaths``.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import timed  # noqa: E402
from fedbandit.envs.digits import load_digits_federated  # noqa: E402
from fedbandit.experiments.trials import dme_trial  # noqa: E402
from fedbandit.learners.federated import FederatedLearner  # noqa: E402
from fedbandit.mechanisms.discrete_gaussian import sample_discrete_gaussian, sample_discrete_gaussian_reference  # noqa: E402
from fedbandit.mechanisms.flattening import HadamardFlattener  # noqa: E402
from fedbandit.protocols.registry import create  # noqa: E402

N_SAMPLES = 2_000_000


def _sampler_rows() -> list[dict]:
    rows = []
    rng = np.random.default_rng(0)
    for sigma in (10.0, 1000.0):
        sample_discrete_gaussian(sigma, 1000, rng)  # build the exact tables once (cached)
        seconds, peak = timed(lambda: sample_discrete_gaussian(sigma, N_SAMPLES, rng), repeat=3)
        rows.append(
            {
                "name": f"exact discrete Gaussian sampler, sigma={sigma:g}",
                "value": N_SAMPLES / seconds / 1e6,
                "unit": "M samples/s (1 core)",
                "peak_mem_mb": peak,
                "notes": f"{N_SAMPLES} samples per call, best of 3; target >= 2, aim 5",
            }
        )
    seconds, peak = timed(lambda: sample_discrete_gaussian_reference(10.0, 2000, rng), repeat=1)
    rows.append(
        {
            "name": "scalar CKS20 reference sampler (rational arithmetic), sigma=10",
            "value": 2000 / seconds / 1e3,
            "unit": "k samples/s",
            "peak_mem_mb": peak,
            "notes": "the slow exact baseline the vectorized sampler is tested against",
        }
    )
    return rows


def _flattening_rows() -> list[dict]:
    x = np.random.default_rng(1).normal(size=2**20)
    flat = HadamardFlattener(2**20, 0)
    seconds, peak = timed(lambda: flat.flatten(x), repeat=5)
    return [
        {
            "name": "randomized Hadamard flattening (signs + pad + FWHT), d=2^20",
            "value": seconds * 1e3,
            "unit": "ms",
            "peak_mem_mb": peak,
            "notes": "best of 5; the transform alone, against its peers: bench_hotpaths",
        },
    ]


def _sum_protocol_rows() -> list[dict]:
    """One private sum of 100 clients' vectors through ``sum-ddg-secagg``: ideal vs real secure aggregation."""
    n, d, rounds = 100, 2**12, 5
    x = np.random.default_rng(4).normal(size=(n, d)) / np.sqrt(d)
    rows = []
    for mode, repeat in (("ideal", 3), ("real", 1)):
        proto = create("sum-ddg-secagg", epsilon=2.0, delta=1e-5, bits=16, k=3, secure_aggregation=mode)
        proto.configure(n_parties=n, dim=d, n_rounds=rounds, clip=1.0)

        def run():
            proto.reset(n_runs=1, rng=np.random.default_rng(0))
            for _ in range(rounds):
                proto.aggregate(x)

        seconds, peak = timed(run, repeat=repeat)
        what = "ideal modular sum, no cryptography" if mode == "ideal" else "the real five-round SecAgg per sum"
        rows.append(
            {
                "name": f"sum-ddg-secagg ({what}), {n} clients, d=2^12, B=16",
                "value": rounds / seconds,
                "unit": "sums/s (1 core)",
                "peak_mem_mb": peak,
                "notes": f"{rounds} sums per reset, best of {repeat}; clip, flatten, round, discrete Gaussian, mod 2^16, "
                "decode",
            }
        )
    return rows


def _federated_rows() -> list[dict]:
    """The federated softmax-regression trainer of chapter 5 (100 clients, all in every round) per sum protocol."""
    data = load_digits_federated(100, rng=0)
    rounds, runs = 8, 2
    rows = []
    for name, params in (
        ("sum-non-private", {}),
        ("sum-central-gaussian", dict(epsilon=8.0, delta=1e-5)),
        ("sum-ddg-secagg", dict(epsilon=8.0, delta=1e-5, bits=16, k=3)),
    ):
        learner = FederatedLearner(create(name, **params), n_clients=100, n_features=64, rounds=rounds)
        seconds, peak = timed(lambda: learner.run(data, np.random.default_rng(0), n_runs=runs), repeat=2)
        sa = ", ideal modular sum (no cryptography)" if name == "sum-ddg-secagg" else ""
        rows.append(
            {
                "name": f"federated softmax regression, {name}{sa}",
                "value": runs * rounds / seconds,
                "unit": "run-rounds/s (1 core)",
                "peak_mem_mb": peak,
                "notes": f"digits, 100 clients x 5 local steps, d=650 (1024 padded), {runs} runs side by side, best of 2",
            }
        )
    return rows


def _dme_rows() -> list[dict]:
    configs = []
    base = dict(d=250, c=10.0, delta=1e-5, beta=math.exp(-0.5), reps=20)
    for n in (100, 1000):
        for bits in range(10, 19):
            for eps in (0.75, 1.0, 2.0, 4.0, 6.0):
                configs.append(dict(base, n=n, bits=bits, k=2, epsilon=eps, norm_growth="conservative"))
    rng = np.random.default_rng(3)
    t0 = time.perf_counter()
    for cfg in configs:
        dme_trial(cfg, rng)
    seconds = time.perf_counter() - t0
    return [
        {
            "name": "DME bit sweep at paper settings (n in {100,1000}, B 10-18, 5 eps, 20 reps)",
            "value": seconds,
            "unit": "s (1 core)",
            "peak_mem_mb": float("nan"),
            "notes": f"{len(configs)} configurations, serial; the chapter's full sweep adds the eps and k sweeps "
            "and runs on 2 workers; target <= 300 s",
        }
    ]


def benchmarks(long: bool = False) -> list[dict]:
    """Sampler, flattening, sum-protocol and trainer rows; with ``long`` also the DME sweep
    at the chapter's paper settings (minutes).  SecAgg and the transform alone are measured
    against their peers in ``bench_hotpaths``."""
    rows = _sampler_rows() + _flattening_rows() + _sum_protocol_rows() + _federated_rows()
    return rows + (_dme_rows() if long else [])


if __name__ == "__main__":
    for row in benchmarks():
        print(f"{row['name']}: {row['value']:.3f} {row['unit']}  ({row['notes']})")

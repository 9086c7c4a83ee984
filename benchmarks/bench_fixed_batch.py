"""Speed and memory of fixed-batch federated LinUCB (fedbandit.learners.fixed_batch).

* with ``long=True`` (``benchmarks/run.py --long``) ``paper_six_configs_wall`` and ``paper_six_configs_cpu``: the six synthetic paper-scale configurations of Zhou &
  Chowdhury's Fig. 2a/2b (M = 100, T = 10⁴, K = 100, d = 10, B = 25, 25 runs each;
  :func:`~fedbandit.learners.fixed_batch.paper_synthetic_configs`), run through
  :func:`fedbandit.experiments.grid.run_grid` on 2 worker processes (no cache): total wall time
  (target ≤ 600 s on 2 cores) and, as peak memory, the sum of the workers' peak resident
  sets (target < 4 GB); the CPU row is the sum of the configurations' CPU times, which does
  not depend on other load on the machine.  One row per configuration gives its own time.
* ``vectorized_agent_rounds_per_s``: agent-rounds per second of the vectorized learner (25
  runs side by side, 400 rounds; M = 100, K = 100, d = 10, B = 25, silo-level LDP ε = 0.2,
  δ = 0.1), against its compute floor (every arm's UCB width);
* ``vectorized_over_reference_same_workload``: the plain reference loop
  (``tests/reference_fixed_batch.py``) over the vectorized learner on the same 2 runs x 50
  rounds, checked to pull the same arms (the row used to divide a 25-run throughput by a
  1-run one).
* ``fixed_batch_ch2_main``: chapter 2's main configuration (silo-level LDP at (1e-3, 1e-4), M = 100,
  T = 10⁴, K = 100, d = 10, B = 25, 25 runs) alone, with its own environment, against its
  compute floor: its normal draws, the multiply-adds of every arm's UCB score and one square
  root per score, at this machine's measured peaks, one after the other (one core);
* ``fixed_batch_shared_environment``: four configurations of that instance (T = 2000) one by
  one and then in lockstep (``run_grid``'s shared environments), CPU-time ratio;
* ``ddg_ideal_sum_agent_rounds_per_s``: the same vectorized run under the ``ddg-secagg``
  protocol with *ideal* secure aggregation (per-user rounding, discrete Gaussian tree, the
  modular sum computed directly, no cryptography: the real protocol's cost is
  ``bench_ddg``'s), and its cost relative to silo-level LDP.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from fedbandit.envs.linear import SyntheticLinearEnv  # noqa: E402
from fedbandit.experiments.grid import run_grid  # noqa: E402
from fedbandit.experiments.runner import run_config  # noqa: E402
from fedbandit.learners.fixed_batch import FixedBatchFedLinUCB, paper_synthetic_configs  # noqa: E402
from fedbandit.protocols.registry import create  # noqa: E402


def SiloLDPProtocol(epsilon, delta):
    return create("silo-ldp", epsilon=epsilon, delta=delta, calibration="paper")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from _measure import floor, max_rss_mb, measure  # noqa: E402
from reference_fixed_batch import reference_run  # noqa: E402


def _label(c: dict) -> str:
    return f"{c['protocol']}_eps{c['epsilon']:g}_delta{c['delta']:g}"


def _speed_rows() -> list[dict]:
    M, K, d, B = 100, 100, 10, 25
    rows = []
    T_vec, R_vec = 400, 25
    env = SyntheticLinearEnv(M, K, d, n_runs=R_vec, seed=0)
    learner = FixedBatchFedLinUCB(SiloLDPProtocol(0.2, 0.1), horizon=T_vec, batch_size=B, n_agents=M, dim=d)
    learner.run(SyntheticLinearEnv(M, K, d, n_runs=R_vec, seed=1), np.random.default_rng(1))  # warm-up
    t_vec = measure(lambda: learner.run(env, np.random.default_rng(0)), repeat=1, trace_memory=False)
    agent_rounds = R_vec * M * T_vec
    vec = agent_rounds / t_vec.wall
    rows.append(
        {
            "id": "fixed_batch_vectorized",
            "name": "vectorized_agent_rounds_per_s",
            "value": vec,
            "unit": "agent-rounds/s",
            **t_vec.as_dict(),
            "peak_mem_mb": max_rss_mb(),
            "notes": f"M={M}, K={K}, d={d}, B={B}, LDP eps=0.2, {R_vec} runs x {T_vec} rounds, shared contexts",
            # the UCB of K arms per agent-round: x^T V^-1 x for every arm, an (R x d^2) by (d^2 x K) product
            "floor": floor(f"{agent_rounds:.3g} agent-rounds x 2 K d^2 = {2 * K * d * d} flops (every arm's "
                           "x^T V^-1 x)", {"flops_per_s": agent_rounds * 2 * K * d * d}, t_vec.cpu),
        }
    )
    ddg_learner = FixedBatchFedLinUCB(create("ddg-secagg", epsilon=0.2, delta=0.1), horizon=T_vec, batch_size=B,
                                      n_agents=M, dim=d)
    t_ddg = measure(lambda: ddg_learner.run(SyntheticLinearEnv(M, K, d, n_runs=R_vec, seed=0), np.random.default_rng(0)),
                    repeat=1, trace_memory=False)
    ddg = agent_rounds / t_ddg.wall
    rows.append(
        {
            "id": "fixed_batch_ddg_ideal_sum",
            "name": "ddg_ideal_sum_agent_rounds_per_s",
            "value": ddg,
            "unit": "agent-rounds/s",
            **t_ddg.as_dict(),
            "peak_mem_mb": max_rss_mb(),
            "notes": (
                f"same run under ddg-secagg (bits={ddg_learner.protocol.randomizer.bits}) with its IDEAL modular sum "
                f"(no cryptography; the real SecAgg's cost is the SecAgg rows'); {vec / ddg:.2f}x the time of silo-LDP"
            ),
        }
    )
    # The same workload through the vectorized learner and the plain loop, checked to take the same arms.
    T_ref, R_ref = 50, 2
    ref_learner = FixedBatchFedLinUCB(SiloLDPProtocol(0.2, 0.1), horizon=T_ref, batch_size=B, n_agents=M, dim=d)
    env_ref = SyntheticLinearEnv(M, K, d, n_runs=R_ref, seed=0)

    def reference():
        return reference_run(env_ref, np.random.default_rng(0), horizon=T_ref, batch_size=B, lam=ref_learner.lam,
                             beta=ref_learner.beta, kind="gaussian_tree", sigma0=ref_learner.protocol.sigma0,
                             local_updates=ref_learner.local_updates)

    t_same = measure(lambda: ref_learner.run(env_ref, np.random.default_rng(0)), repeat=3, trace_memory=False)
    t_ref = measure(reference, repeat=1, trace_memory=False)
    arms = ref_learner.run(env_ref, np.random.default_rng(0), record_arms=True).extras["arms"]
    if not np.array_equal(arms, reference()[1]):
        raise AssertionError("the vectorized learner and the reference pulled different arms")
    work = R_ref * M * T_ref
    rows.append(
        {
            "id": "fixed_batch_same_workload_speedup",
            "name": "vectorized_over_reference_same_workload",
            "value": t_ref.wall / t_same.wall,
            "ratio_cpu": t_ref.cpu / t_same.cpu,
            "unit": "x",
            **t_same.as_dict(),
            "peak_mem_mb": max_rss_mb(),
            "notes": f"{R_ref} runs x {T_ref} rounds for both (tests/reference_fixed_batch.py), same arms; reference "
                     f"{work / t_ref.wall:.3g} agent-rounds/s, vectorized {work / t_same.wall:.3g}; CPU-time ratio "
                     f"{t_ref.cpu / t_same.cpu:.3g}",
        }
    )
    return rows


#: Chapter 2's main configuration: silo-level LDP at (1e-3, 1e-4), M = 100, T = 10^4, K = 100, d = 10, B = 25, 25 runs.
CH2_MAIN = dict(learner="fixed-batch", instance="synthetic", M=100, T=10_000, B=25, K=100, d=10, runs=25, env_seed=0,
                protocol="silo-ldp", epsilon=1e-3, delta=1e-4, calibration="paper")


def _main_config_row() -> dict:
    """Chapter 2's main configuration, alone (its own environment), against its compute floor."""
    c = CH2_MAIN
    M, K, d, T, R = c["M"], c["K"], c["d"], c["T"], c["runs"]
    t = measure(lambda: run_config(dict(c), np.random.default_rng(0)), repeat=1, trace_memory=False)
    scores = R * M * K * T
    q = d * (d + 1) // 2
    # the work no exact run can skip: the contexts' and rewards' normals, every score's quadratic
    # form and inner product (q + d multiply-adds per run, arm, agent and round), one square root per score
    amounts = {"normals_per_s": M * K * (d - 1) * T + R * M * T, "flops_per_s": 2 * (q + d) * scores,
               "sqrt_per_s": scores}
    return {
        "id": "fixed_batch_ch2_main",
        "name": "chapter 2's main configuration (silo-LDP, M = 100, T = 10^4, K = 100, d = 10, B = 25, 25 runs)",
        "value": t.cpu,
        "unit": "s CPU",
        **t.as_dict(),
        "peak_mem_mb": max_rss_mb(),
        "notes": f"one configuration with its own environment (run_config); {M * T * R / t.cpu:.3g} agent-rounds/s",
        "floor": floor(f"{amounts['normals_per_s']:.3g} normal draws (contexts, reward noise), "
                       f"{amounts['flops_per_s']:.3g} flops (x^T V^-1 x and <x, theta> of every arm: {q} + {d} "
                       f"multiply-adds per run, arm, agent and round), {scores:.3g} square roots",
                       amounts, t.cpu, serial=("normals_per_s", "flops_per_s", "sqrt_per_s")),
    }


def _shared_environment_row() -> dict:
    """Four configurations of one instance run one by one, then in lockstep (the environment drawn once)."""
    base = {**CH2_MAIN, "T": 2_000}
    configs = [dict(base, protocol="non-private"), dict(base), dict(base, epsilon=0.2, delta=0.1),
               dict(base, protocol="central")]
    for c in configs:
        if c["protocol"] == "non-private":
            for k in ("epsilon", "delta", "calibration"):
                c.pop(k)
    kw = dict(seeds=1, cache_dir=False, backend="serial", progress=False)
    c0 = time.process_time()
    alone = run_grid(run_config, configs, share_environments=False, **kw)
    c1 = time.process_time()
    shared = run_grid(run_config, configs, share_environments=True, **kw)
    c2 = time.process_time()
    if not all(np.array_equal(a[0].regret, b[0].regret) for a, b in zip(alone, shared)):
        raise AssertionError("the configurations gave other results in lockstep")
    one, together = c1 - c0, c2 - c1
    return {
        "id": "fixed_batch_shared_environment",
        "name": "four configurations of one instance, one by one over in lockstep (environment drawn once)",
        "value": one / together,
        "ratio_cpu": one / together,
        "unit": "x",
        "wall_s": together,
        "cpu_s": together,
        "peak_mem_mb": max_rss_mb(),
        "notes": f"chapter 2's instance at T = {base['T']} (non-private, silo-LDP at two budgets, central): "
                 f"{one:.1f} s CPU one by one, {together:.1f} s in lockstep, equal results",
    }


def _paper_rows() -> list[dict]:
    configs = paper_synthetic_configs()
    start = time.perf_counter()
    results = run_grid(run_config, configs, seeds=1, cache_dir=False, backend="joblib", n_jobs=2, progress=False)
    wall = time.perf_counter() - start
    rows = []
    peaks = {}
    cpu_total = 0.0
    for c, (r,) in zip(configs, results):
        cpu_total += r.cpu_seconds
        rows.append(
            {
                "name": f"paper_{_label(c)}",
                "value": r.seconds,
                "unit": "s",
                "peak_mem_mb": r.peak_rss_mb,
                "notes": (
                    f"CPU {r.cpu_seconds:.0f} s; final time-average regret {r.avg_regret[:, -1].mean():.3f}; "
                    f"accounting {r.accounting.status}"
                ),
            }
        )
        peaks[round(r.peak_rss_mb, 3)] = r.peak_rss_mb
    # Two worker processes: the sum of the two largest peaks bounds the total resident memory.
    total_peak = sum(sorted(peaks.values())[-2:]) + max_rss_mb()
    rows.insert(
        0,
        {
            "name": "paper_six_configs_cpu",
            "value": cpu_total,
            "unit": "s",
            "peak_mem_mb": total_peak,
            "notes": "sum of the six configurations' CPU times; /2 = wall time on 2 otherwise idle cores",
        },
    )
    rows.insert(
        0,
        {
            "name": "paper_six_configs_wall",
            "value": wall,
            "unit": "s",
            "peak_mem_mb": total_peak,
            "notes": "6 synthetic paper-scale configs (25 runs each), joblib 2 workers; target <= 600 s, < 4096 MB",
        },
    )
    return rows


def benchmarks(long: bool = False) -> list[dict]:
    """The speed rows and chapter 2's main configuration; with ``long`` also the six paper-scale configurations."""
    return _speed_rows() + [_main_config_row(), _shared_environment_row()] + (_paper_rows() if long else [])


if __name__ == "__main__":
    only_speed = "--speed" in sys.argv
    rows = _speed_rows() if only_speed else benchmarks()
    for row in rows:
        print(f"{row['name']:45s} {row['value']:14,.2f} {row['unit']:16s} peak {row['peak_mem_mb']:8.1f} MB  ({row['notes']})")

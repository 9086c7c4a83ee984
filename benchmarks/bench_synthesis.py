"""Speed and memory of the side-by-side chapter's paper-scale runs (fedbandit.experiments.synthesis).

* ``paper_sweep_wall`` / ``paper_sweep_cpu``: the chapter's synthetic grid at paper scale --
  every applicable (learner, protocol) pair at ε ∈ {1, 2, 4, 8, 16} with M = 32, and at
  M ∈ {8, 16, 32, 64} with ε = 4 (δ = 1e-5, T = 2000, B = 20, d = 10, K = 50, 10 runs each;
  :func:`fedbandit.experiments.synthesis.sweep_configs`) -- through :func:`fedbandit.experiments.grid.run_grid`
  on 2 worker processes without cache.  Wall time (target, with the audits and the real-data
  runs: the chapter within 600 s on 2 cores) and the sum of the configurations' CPU times (which
  does not depend on other load on the machine); peak memory is the sum of the two largest
  worker peaks plus this process's.
* ``cpu_<model>``: CPU seconds of each model summed over its configurations (where
  the time goes: the user-level learners serve the M·T users one at a time).
* ``paper_audits_wall`` and ``paper_real_wall``: the chapter's audits at the target and its
  real-data runs.

The settings below must match the paper scale of ``chapters/06_side_by_side.ipynb``.
"""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from _measure import max_rss_mb  # noqa: E402
from fedbandit.experiments.grid import run_grid  # noqa: E402
from fedbandit.experiments.runner import run_config  # noqa: E402
from fedbandit.experiments.synthesis import MODELS, audit_side_by_side, side_by_side_configs, sweep_configs  # noqa: E402

# The chapter's paper scale (chapters/06_side_by_side.ipynb).
DELTA, EPS_MAIN = 1e-5, 4.0
SYN = dict(M=32, T=2_000, B=20, K=50, d=10, runs=10)
EPSILONS = [1.0, 2.0, 4.0, 8.0, 16.0]
MS = [8, 16, 32, 64]
BASE = dict(instance="synthetic", env_seed=0, delta=DELTA, param_bound=1.0, n_checkpoints=20, **SYN)
CC = "concurrent-linucb/central"
REAL = dict(M=10, T=1_000, B=20, runs=4, max_arms=50)
REAL_BASE = dict(instance="real", env_seed=0, epsilon=EPS_MAIN, delta=DELTA, param_bound=1.0, beta_scale=0.1,
                 noise_bound=1.0, reward_bound=1.0, n_checkpoints=10, **REAL)
AUDIT_TRIALS, AUDIT_CONFIDENCE = 2000, 0.995
LONG_ONLY = True  # minutes of paper-scale runs: only with `benchmarks/run.py --long`
GRID = dict(seeds=1, cache_dir=False, backend="joblib", n_jobs=2, progress=False)


def _peak(results) -> float:
    peaks = sorted({round(r.peak_rss_mb, 3): r.peak_rss_mb for r in results}.values())
    return sum(peaks[-2:]) + max_rss_mb()


def benchmarks() -> list[dict]:
    rows = []
    configs = sweep_configs(BASE, EPSILONS, MS, EPS_MAIN, main_only=[CC])
    start = time.perf_counter()
    results = [r[0] for r in run_grid(run_config, configs, **GRID)]
    wall = time.perf_counter() - start
    cpu = sum(r.cpu_seconds for r in results)
    peak = _peak(results)
    rows.append({"name": "paper_sweep_wall", "value": wall, "unit": "s", "peak_mem_mb": peak,
                 "notes": f"{len(configs)} synthetic configurations x {SYN['runs']} runs, joblib 2 workers, no cache"})
    rows.append({"name": "paper_sweep_cpu", "value": cpu, "unit": "s", "peak_mem_mb": peak,
                 "notes": "sum of the configurations' CPU times; /2 = wall time on 2 otherwise idle cores"})
    per_model = defaultdict(float)
    for c, r in zip(configs, results):
        per_model[c["tag"]] += r.cpu_seconds
    for key, seconds in sorted(per_model.items(), key=lambda kv: -kv[1]):
        n = sum(1 for c in configs if c["tag"] == key)
        rows.append({"name": f"cpu_{key}", "value": seconds, "unit": "s", "peak_mem_mb": peak,
                     "notes": f"{n} configurations"})

    main = [c for c in configs if c["M"] == SYN["M"] and c.get("epsilon") in (None, EPS_MAIN)]
    audit_configs = [dict(c, n_trials=AUDIT_TRIALS, confidence=AUDIT_CONFIDENCE) for c in main]
    start = time.perf_counter()
    run_grid(audit_side_by_side, audit_configs, **GRID)
    rows.append({"name": "paper_audits_wall", "value": time.perf_counter() - start, "unit": "s",
                 "peak_mem_mb": max_rss_mb(), "notes": f"{len(audit_configs)} audits x {AUDIT_TRIALS} trials per input"})

    real_configs = side_by_side_configs(REAL_BASE, [m.key for m in MODELS])
    start = time.perf_counter()
    real = [r[0] for r in run_grid(run_config, real_configs, **GRID)]
    rows.append({"name": "paper_real_wall", "value": time.perf_counter() - start, "unit": "s", "peak_mem_mb": _peak(real),
                 "notes": f"{len(real_configs)} real-data configurations (d = 57, M = 10, T = {REAL['T']}), "
                          f"CPU {sum(r.cpu_seconds for r in real):.0f} s"})
    return rows


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(__file__))
    for row in benchmarks():
        print(f"{row['name']:50s} {row['value']:12,.2f} {row['unit']:3s} peak {row['peak_mem_mb']:8.1f} MB  ({row['notes']})")

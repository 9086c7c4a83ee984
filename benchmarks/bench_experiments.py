"""Overhead of the experiment runner (fedbandit.experiments.grid.run_grid).

The function evaluated is nearly free (a few draws), so the rows measure what the runner
adds per grid point: seeding, the atomic cache write (fsync included), the cache read,
and the joblib round trip.  Run directly (``python benchmarks/bench_experiments.py``) or
through the lead's ``make bench`` runner, which calls :func:`benchmarks`.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import tracemalloc
from pathlib import Path

from fedbandit.experiments.grid import run_grid

N_CONFIGS = 50
N_SEEDS = 4


def tiny_experiment(config, rng):
    """A grid point that costs almost nothing: what remains is the runner's overhead."""
    return {"x": rng.normal(config["mu"], 1.0, size=config["n"])}


def _configs():
    return [{"mu": float(mu), "n": 100} for mu in range(N_CONFIGS)]


def _measure(call) -> tuple[float, float]:
    """(seconds, peak traced MB) of ``call()``; memory is traced in a second run so that
    tracemalloc's slowdown does not enter the timing."""
    start = time.perf_counter()
    call()
    seconds = time.perf_counter() - start
    tracemalloc.start()
    try:
        call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return seconds, peak / 2**20


def benchmarks() -> list[dict]:
    n_points = N_CONFIGS * N_SEEDS
    rows = []
    root = Path(tempfile.mkdtemp(prefix="bench_experiments_"))
    try:
        kw = dict(seeds=N_SEEDS, progress=False)

        fresh = iter(range(10))
        seconds, peak = _measure(
            lambda: run_grid(tiny_experiment, _configs(), cache_dir=root / f"w{next(fresh)}", backend="serial", **kw)
        )
        rows.append(
            {
                "name": "run_grid serial, cold cache (compute + atomic write)",
                "value": n_points / seconds,
                "unit": "grid points/s",
                "peak_mem_mb": peak,
                "notes": f"{N_CONFIGS} configs x {N_SEEDS} seeds, 100 normals each; fsync per entry",
            }
        )

        run_grid(tiny_experiment, _configs(), cache_dir=root / "warm", **kw)
        seconds, peak = _measure(lambda: run_grid(tiny_experiment, _configs(), cache_dir=root / "warm", **kw))
        rows.append(
            {
                "name": "run_grid, warm cache (read + checksum + unpickle)",
                "value": n_points / seconds,
                "unit": "grid points/s",
                "peak_mem_mb": peak,
                "notes": f"{n_points} entries, all hits",
            }
        )

        seconds, peak = _measure(lambda: run_grid(tiny_experiment, _configs(), cache_dir=False, backend="serial", **kw))
        rows.append(
            {
                "name": "run_grid serial, no cache",
                "value": n_points / seconds,
                "unit": "grid points/s",
                "peak_mem_mb": peak,
                "notes": "seeding + evaluation only",
            }
        )

        run_grid(tiny_experiment, _configs()[:2], cache_dir=False, backend="joblib", n_jobs=2, **kw)  # warm the pool
        seconds, peak = _measure(
            lambda: run_grid(tiny_experiment, _configs(), cache_dir=False, backend="joblib", n_jobs=2, **kw)
        )
        rows.append(
            {
                "name": "run_grid joblib (2 processes), no cache",
                "value": n_points / seconds,
                "unit": "grid points/s",
                "peak_mem_mb": peak,
                "notes": "process round trip per point (worker pool already started); peak is the parent's",
            }
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows


if __name__ == "__main__":
    for row in benchmarks():
        print(f"{row['name']:<55} {row['value']:>12.1f} {row['unit']:<14} {row['peak_mem_mb']:>7.2f} MB  {row['notes']}")

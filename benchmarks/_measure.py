"""Shared measurement helpers for the benchmark modules."""

from __future__ import annotations

import resource
import time
import tracemalloc


def timed(func, *, repeat: int = 3):
    """Best wall time of ``repeat`` calls of ``func()`` and the peak traced memory (MB)
    of one call (numpy allocations are traced by tracemalloc)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - start)
    tracemalloc.start()
    func()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return best, peak / 2**20


def max_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

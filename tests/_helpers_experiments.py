"""Module-level functions for tests/test_experiments.py.

The call log only counts calls made in processes started after the variable is set (the
test process and the kill-resume subprocess); worker pools outlive a test, so process
backends are checked through the ``pid`` entry of the result instead.

They live in their own module so that worker processes (joblib, Dask) and the
kill-resume subprocess can import them by name.  Behaviour that must differ between
runs without changing the cache key (sleeping, logging calls) is driven by environment
variables, not by the configuration, since the configuration is part of the key.
"""

from __future__ import annotations

import os
import time

import numpy as np

#: File to which every call appends one line: the fingerprint of the generator it received.
CALL_LOG_ENV = "FEDBANDIT_TEST_CALL_LOG"
#: Seconds each call sleeps before returning (the kill-resume test makes the grid slow).
SLEEP_ENV = "FEDBANDIT_TEST_SLEEP"

GRID_CONFIGS = [{"mu": float(mu), "n": 5, "label": f"arm-{mu}"} for mu in range(4)]


def rng_fingerprint(rng: np.random.Generator) -> str:
    """Initial PCG64 state of a generator: identifies the grid point it was spawned for."""
    return format(rng.bit_generator.state["state"]["state"], "x")


def read_calls(path) -> list[str]:
    """Fingerprints logged by :func:`logged_draw`, in call order (empty if no log yet)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return [line.strip() for line in fh if line.strip()]
    except FileNotFoundError:
        return []


def logged_draw(config, rng):
    """A small experiment: draws from every kind of generator method used in the package."""
    log = os.environ.get(CALL_LOG_ENV)
    if log:
        # One short O_APPEND write per call: atomic enough across processes.
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(rng_fingerprint(rng) + "\n")
    sleep = float(os.environ.get(SLEEP_ENV, "0") or 0)
    out = {
        "normal": rng.normal(config["mu"], 1.0, size=config["n"]),
        "integers": rng.integers(0, 2**62, size=3),
        "permutation": rng.permutation(config["n"]),
        "label": config["label"],
        # Which process computed the point (ignored when comparing results): shows that
        # the process backends really ran elsewhere and that cache hits were not recomputed.
        "pid": os.getpid(),
    }
    if sleep:
        time.sleep(sleep)
    return out

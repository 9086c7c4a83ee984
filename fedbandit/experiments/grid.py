"""Run a function over a grid of configurations × seeds, in parallel, with an on-disk cache.

The runner is defined in :mod:`fedbandit._grid`, below every subpackage, because the audits
(:mod:`fedbandit.audit`, a layer below :mod:`fedbandit.experiments`) run their trials through
it too; this module is its documented home, and re-exports it whole.  Its docstring
(``help(fedbandit.experiments.grid.run_grid)``) says how seeds, backends and the cache work.
"""

from fedbandit._grid import (
    BACKENDS,
    config_hash,
    default_cache_dir,
    make_rng,
    package_source_hash,
    prune_cache,
    run_grid,
    stack_results,
)

__all__ = [
    "BACKENDS",
    "run_grid",
    "make_rng",
    "config_hash",
    "default_cache_dir",
    "package_source_hash",
    "prune_cache",
    "stack_results",
]

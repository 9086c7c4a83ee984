"""Run a function over a grid of configurations × seeds, in parallel, with an on-disk cache.

The runner is defined in :mod:`fedbandit._grid`, below every subpackage, because the audits
(:mod:`fedbandit.audit`, a layer below :mod:`fedbandit.experiments`) run their trials through
it too; its docstring (``help(fedbandit._grid.run_grid)``) says how seeds, backends and the
cache work.  This module is its documented home: it re-exports it, with one addition.

.. rubric:: Shared environments

:func:`run_grid` here evaluates configurations of learners on one linear environment (equal
environment keys, e.g. every protocol of a comparison on the same ``env_seed``) together, in
lockstep (:func:`fedbandit.envs.sharing.run_in_lockstep`): each block of contexts and reward
noise is generated once and handed to all of them, instead of once per configuration.  A
group is split into as many units as there are workers (each unit generates the environment
once), so the points still spread over the workers.  A point's result, random stream and
cache entry are exactly those of the point run alone; ``share_environments=False`` runs
every point on its own.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from fedbandit._grid import (
    BACKENDS,
    Grouping,
    config_hash,
    default_cache_dir,
    make_rng,
    package_source_hash,
    prune_cache,
    stack_results,
)
from fedbandit._grid import run_grid as run_grid_ungrouped
from fedbandit.envs.factory import ENVIRONMENT_KEYS
from fedbandit.envs.sharing import in_lockstep, run_in_lockstep

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


def environment_key(config: Mapping[str, Any]) -> str | None:
    """The environment part of a learner configuration (None: not a linear instance's learner).

    Configurations with equal keys build equal environments through
    :func:`fedbandit.envs.make_environment`, whose blocks a lockstep unit generates once.
    """
    if "learner" not in config or config.get("instance", "synthetic") not in ("synthetic", "real"):
        return None
    return config_hash({k: config[k] for k in ENVIRONMENT_KEYS if k in config})


#: The grouping :func:`run_grid` uses by default: learners on one linear environment, in lockstep.
ENVIRONMENT_SHARING = Grouping(key=environment_key, run_together=run_in_lockstep, nested=in_lockstep)


@functools.wraps(run_grid_ungrouped)
def run_grid(*args: Any, share_environments: bool = True, **kwargs: Any) -> list[list[Any]]:
    if not isinstance(share_environments, bool):
        raise TypeError(f"share_environments must be a bool, got {share_environments!r} of type "
                        f"{type(share_environments).__name__}")
    if "grouping" in kwargs:
        raise TypeError("fedbandit.experiments.run_grid groups by environment (share_environments=...); "
                        "pass grouping= to fedbandit._grid.run_grid")
    return run_grid_ungrouped(*args, grouping=ENVIRONMENT_SHARING if share_environments else None, **kwargs)


_GROUPING_DOC = """    grouping : Grouping, optional
        Evaluate the points whose configurations have equal group keys together (see the
        module notes); the results are the same either way.
"""
assert _GROUPING_DOC in (run_grid_ungrouped.__doc__ or ""), "fedbandit._grid.run_grid documents grouping"
run_grid.__doc__ = (run_grid_ungrouped.__doc__ or "").replace(_GROUPING_DOC, """    share_environments : bool, default True
        Run the points whose configurations describe the same linear environment (a
        ``learner`` on instance ``"synthetic"`` or ``"real"`` with equal environment keys,
        :data:`fedbandit.envs.factory.ENVIRONMENT_KEYS`) in lockstep, so that its blocks are
        generated once for all of them (see the module notes).  The results are the same
        either way.
""")

"""Regret experiments of private LinUCB learners serving users one at a time (the concurrent-shuffle chapter).

:func:`regret_trial` runs :class:`fedbandit.learners.ConcurrentShuffleLinUCB` with a list of
privacy protocols on one instance, every protocol on the same users (common random
numbers), in the form :func:`fedbandit.experiments.grid.run_grid` runs:

* ``instance="contextual"`` -- the synthetic contextual instance of
  :mod:`fedbandit.envs.linear` (fresh arms for every user, mean rewards linear in the
  observed features);
* ``instance="gaps"`` -- the gap family of :mod:`fedbandit.envs.orthogonal` (fixed
  orthogonal arms, one gap per run), on which the regret bounds are worst-case.

Each protocol spec may ask for the learner's noise-free twin (``"noise_free": True``: the
same λ, β and period on exact sums), which splits the privacy cost of the regret into the
cost of the enlarged confidence set and the cost of the noise itself.  The trial records
each learner's wall and CPU time and its number of synchronizations, for the chapter's
speed report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbandit._grid import Grouping, config_hash
from fedbandit._grid import run_grid as _run_grid
from fedbandit._validation import (
    check_array,
    check_bool,
    check_choice,
    check_delta,
    check_epsilon,
    check_nonnegative_float,
    check_nonnegative_int,
    check_positive_int,
    check_rng,
)
from fedbandit.envs.linear import SyntheticLinearEnv
from fedbandit.envs.orthogonal import OrthogonalArmsEnv
from fedbandit.envs.sharing import in_lockstep, run_in_lockstep, share
from fedbandit.experiments.trials import check_config
from fedbandit.learners.concurrent_linucb import ConcurrentShuffleLinUCB, run_together
from fedbandit.protocols.registry import create, describe

__all__ = [
    "regret_trial",
    "run_regret_grid",
]

#: Most runs of one trial (each is a row of the learner's state).
MAX_RUNS = 10**6


def regret_trial(config: dict, rng) -> dict:
    """One seed of a regret experiment: every protocol of ``config["protocols"]`` on the same users.

    Parameters
    ----------
    config : dict
        ``n`` (users), ``epsilon``, ``delta``, ``dim``, ``noise_std`` (reward noise, also the
        R of β), ``instance`` ("contextual" or "gaps"), optional ``beta_scale`` (default 1),
        ``min_period`` (default 1, see the learner), and

        * for ``"contextual"``: ``runs``, ``n_arms``, ``shared_contexts`` (default False),
          ``uniform`` (default True: also measure uniformly random play);
        * for ``"gaps"``: ``gaps`` (list) and ``runs_per_gap``; the runs are gap-major
          (run g·S + s has gap ``gaps[g]``); S of β is the largest ‖θ*‖;

        ``protocols``: a list of dicts ``{"label": ..., "protocol": name, **params}``
        (``fedbandit.protocols.create(name, epsilon=, delta=, **params)``), optionally with
        ``"noise_free": True`` (the learner's noise-free twin) or ``"min_period"`` (overrides
        the config's).  Optional ``env_seed`` (int): the environment's seed, so that
        configurations run separately (one protocol each, in parallel) see the same users.
    rng : numpy.random.Generator
        Split into the environment's seed (shared by all protocols; replaced by
        ``env_seed`` if given) and one stream per protocol, in list order.

    Returns
    -------
    dict
        label → cumulative regret at n of every run (array (runs,)); ``"curves"``: label →
        mean cumulative regret at ``"checkpoints"``; ``"lam"``, ``"beta_n"`` (β at n), ``"sigma"`` (the Gram noise's
        largest per-entry std), ``"period"``, ``"syncs"``,
        ``"batch_sizes"``, ``"accounting"``, ``"wall"``, ``"cpu"``: label → value; for
        ``"contextual"`` also ``"uniform"``, the regret of playing uniformly at random
        (per run).
    """
    check_config(config, ("n", "epsilon", "delta", "protocols"))
    n = check_positive_int("n", config["n"])
    epsilon = check_epsilon("epsilon", config["epsilon"])
    delta = check_delta("delta", config["delta"])
    dim = check_positive_int("dim", config.get("dim", 2))
    noise_std = check_nonnegative_float("noise_std", config.get("noise_std", 0.1))
    instance = check_choice("instance", config.get("instance", "contextual"), ("contextual", "gaps"))
    min_period = check_positive_int("min_period", config.get("min_period", 1))
    beta_scale = check_nonnegative_float("beta_scale", config.get("beta_scale", 1.0))
    specs = config["protocols"]
    if not isinstance(specs, (list, tuple)) or not all(isinstance(sp, dict) and "protocol" in sp for sp in specs):
        raise ValueError(f"protocols must be a list of dicts with a 'protocol' name, got {specs!r}")
    rng = check_rng("rng", rng)
    env_seed, learner_rng = rng.spawn(2)
    if "env_seed" in config:
        env_seed = np.random.SeedSequence(check_nonnegative_int("env_seed", config["env_seed"]))
    checkpoints = np.unique(np.geomspace(1, n, 40).astype(int))
    out: dict[str, Any] = {key: {} for key in
                           ("curves", "lam", "beta_n", "sigma", "period", "syncs", "batch_sizes", "accounting", "wall",
                            "cpu")}
    out["checkpoints"] = checkpoints

    uniform = False
    if instance == "gaps":
        check_config(config, ("gaps", "runs_per_gap"))
        per_gap = check_positive_int("runs_per_gap", config["runs_per_gap"], max_value=MAX_RUNS,
                                     reason="every run is a row of the learner's state")
        gaps = np.repeat(check_array("gaps", config["gaps"], ndim=1), per_gap)
        if gaps.size > MAX_RUNS:
            raise ValueError(f"len(gaps) * runs_per_gap = {gaps.size} runs exceed {MAX_RUNS:.0e}")

        def make_env():
            return OrthogonalArmsEnv(gaps, dim, noise_std=noise_std, seed=env_seed)

        param_bound = make_env().param_norm
    else:
        runs = check_positive_int("runs", config.get("runs", 1), max_value=MAX_RUNS,
                                  reason="every run is a row of the learner's state")
        n_arms = check_positive_int("n_arms", config.get("n_arms", 20))
        shared = check_bool("shared_contexts", config.get("shared_contexts", False))

        def make_env():
            return SyntheticLinearEnv(
                1, n_arms=n_arms, dim=dim, n_runs=runs, noise_std=noise_std,
                shared_contexts=shared, means_from_raw=False, seed=env_seed,
            )

        param_bound = 1.0
        uniform = check_bool("uniform", config.get("uniform", True))
    learners, rngs, labels = [], [], []
    for spec, proto_rng in zip(specs, learner_rng.spawn(len(specs))):
        params = {k: v for k, v in spec.items() if k not in ("label", "protocol", "noise_free", "min_period")}
        name = spec["protocol"]
        labels.append(spec.get("label", name))
        accepted = describe(name).parameters
        params.update({k: v for k, v in (("epsilon", epsilon), ("delta", delta)) if k in accepted})
        learners.append(ConcurrentShuffleLinUCB(
            create(name, **params), n_users=n, dim=dim, noise_bound=noise_std, param_bound=param_bound,
            beta_scale=beta_scale, min_period=int(spec.get("min_period", min_period)),
            noise_free=bool(spec.get("noise_free", False)),
        ))
        rngs.append(proto_rng)
    # every learner of the configuration on the same blocks of one environment, generated once
    # (the same users as one environment per learner: it is deterministic given env_seed)
    uniform_sum: Any = 0
    if instance == "contextual" and uniform:
        def on_block(b):
            nonlocal uniform_sum
            uniform_sum = uniform_sum + (b.best[:, :, 0] - np.mean(b.means[:, :, 0], axis=-1)).sum(axis=0)
    else:
        on_block = None
    # share: run by run_regret_grid, the configurations on one environment generate it once
    if learners:
        # only the checkpoints' cumulative regret (checkpoints[-1] is n: geomspace's endpoint is n itself)
        results, times = run_together(learners, share(make_env()), rngs, on_block=on_block, keep=checkpoints)
    else:
        results, times = [], []
        for b in share(make_env()).iter_blocks(n) if on_block is not None else ():
            on_block(b)
    if on_block is not None:
        out["uniform"] = uniform_sum
    for label, learner, res, (wall, cpu) in zip(labels, learners, results, times):
        out["wall"][label] = wall
        out["cpu"][label] = cpu
        out[label] = res.regret[:, -1]  # user n's
        # the columns checkpoints − 1 of the whole run's regret, gathered by the same fancy index as from the whole
        # array (numpy lays the gather out column-major: its mean over the runs then adds them in that order)
        out["curves"][label] = res.regret[:, np.arange(checkpoints.size)].mean(axis=0)
        out["lam"][label] = learner.lam
        out["beta_n"][label] = float(learner.beta(np.array([n]))[0])
        out["sigma"][label] = learner.params["sigma_gram"]
        out["period"][label] = learner.period
        out["syncs"][label] = n // learner.period
        out["batch_sizes"][label] = res.calibration.get("batch_sizes")
        out["accounting"][label] = res.accounting
    return out


#: The keys of a regret_trial configuration that determine its environment (given ``env_seed``).
REGRET_ENVIRONMENT_KEYS = ("instance", "n", "env_seed", "dim", "noise_std", "gaps", "runs_per_gap", "runs", "n_arms",
                           "shared_contexts")


def regret_environment_key(config: Mapping[str, Any]) -> str | None:
    """The environment part of a :func:`regret_trial` configuration; None without ``env_seed`` (its
    environment's seed then comes from the point's own random stream, so no two points share it)."""
    if "env_seed" not in config:
        return None
    return config_hash({k: config[k] for k in REGRET_ENVIRONMENT_KEYS if k in config})


#: run_regret_grid's grouping: configurations on one environment run in lockstep (fedbandit.envs.sharing).
REGRET_SHARING = Grouping(key=regret_environment_key, run_together=run_in_lockstep, nested=in_lockstep)


def _snake(i: int, parts: int) -> int:
    """The part of the i-th item dealt to ``parts`` hands in snake order (0, 1, ..., p−1, p−1, ..., 0, 0, 1, ...)."""
    j = i % (2 * parts)
    return j if j < parts else 2 * parts - 1 - j


def run_regret_grid(configs, *, units_per_environment: int = 1, **kwargs: Any) -> list[list[Any]]:
    """:func:`fedbandit.experiments.run_grid` of :func:`regret_trial` over ``configs``, sharing environments.

    Configurations with the same environment (:func:`regret_environment_key`: equal
    :data:`REGRET_ENVIRONMENT_KEYS`, ``env_seed`` given) run in lockstep
    (:func:`fedbandit.envs.sharing.run_in_lockstep`), so that each block of contexts and reward
    noise is generated once per unit of the group instead of once per configuration.  Every
    point's result, random stream and cache entry are exactly those of the point run alone.

    Parameters
    ----------
    configs : sequence of dict
        :func:`regret_trial` configurations.
    units_per_environment : int, default 1
        Deal the configurations of one environment, in their order, to this many units in
        snake order (0, 1, 1, 0, 0, 1, ... for two), each run in lockstep on its own worker:
        a grid whose largest environment holds most of the work then spreads it over the
        workers, at the price of generating that environment's blocks once per unit.  Only
        the schedule changes, never a result.
    **kwargs
        run_grid's (seeds, backend, n_jobs, version, ...).
    """
    parts = check_positive_int("units_per_environment", units_per_environment)
    grouping = REGRET_SHARING
    if parts > 1:
        dealt: dict[str, str] = {}
        seen: dict[str, int] = {}
        for cfg in configs:
            env_key = regret_environment_key(cfg)
            if env_key is None:
                continue
            i = seen.get(env_key, 0)
            seen[env_key] = i + 1
            dealt.setdefault(config_hash(cfg), f"{env_key}/{_snake(i, parts)}")
        grouping = dataclasses.replace(REGRET_SHARING, key=lambda cfg: dealt.get(config_hash(cfg)))
    return _run_grid(regret_trial, configs, grouping=grouping, **kwargs)

"""One function that builds the environment a configuration describes, and the registry it reads.

Every instance name is registered with :func:`register_environment` (a decorator on the function
that builds it from the configuration), as protocols are with
:func:`fedbandit.protocols.register` and learners with :func:`fedbandit.learners.register_learner`:
a new environment is one decorated function, in any module, and
:func:`make_environment` (and so :func:`fedbandit.experiments.run_config`) builds it by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from fedbandit._registry import Registry
from fedbandit._validation import (
    MAX_STEPS,
    check_array,
    check_bool,
    check_choice,
    check_nonnegative_float,
    check_positive_float,
    check_positive_int,
    check_probability,
    check_rng,
    check_str,
)
from fedbandit.envs.digits import load_digits_federated
from fedbandit.envs.linear import RealDataLinearEnv, SyntheticLinearEnv, as_seed_sequence
from fedbandit.envs.mslr import load_mslr_instance
from fedbandit.envs.multi_armed import make_env
from fedbandit.envs.recommendation import ranker_bandit
from fedbandit.envs.sharing import share

__all__ = [
    "make_environment",
    "ENVIRONMENT_KEYS",
    "INSTANCES",
    "register_environment",
    "unregister_environment",
    "available_environments",
    "environment_keys",
    "EnvironmentInfo",
]

#: Keys every configuration may give, whatever its instance.
_COMMON_KEYS = ("instance", "runs", "env_seed")


@dataclass(frozen=True)
class EnvironmentInfo:
    """What the registry knows about an instance name: the keys it reads and how it is built.

    Attributes
    ----------
    name : str
        The instance name (``config["instance"]``).
    keys : tuple of str
        The configuration keys the builder reads, besides ``instance``, ``runs`` and ``env_seed``.
    summary : str
        One line for listings.
    build : callable
        ``build(config, runs, seed) -> environment``.
    """

    name: str
    keys: tuple[str, ...]
    summary: str
    build: Callable


_ENVIRONMENTS = Registry("environment", ())


def register_environment(name: str, *, keys=(), summary: str = ""):
    """Decorator: register ``build(config, runs, seed) -> environment`` as instance ``name``.

    ``keys`` are the configuration keys the builder reads (besides ``instance``, ``runs`` and
    ``env_seed``; the runner refuses a key nothing reads); ``runs`` is ``config["runs"]``
    (checked), ``seed`` the ``env_seed`` (checked: an int, a SeedSequence or a Generator).
    The builder checks its own keys (errors naming the key the user wrote).

    Parameters
    ----------
    name : str
        The instance name configurations give as ``instance``.
    keys : sequence of str, optional
        The configuration keys the builder reads.
    summary : str, optional
        One line for listings.

    Returns
    -------
    callable
        The decorator; it registers ``build`` and returns it unchanged.
    """
    name = check_str("name", name)
    if isinstance(keys, str) or not all(isinstance(k, str) for k in keys):
        raise TypeError(f"keys must be a sequence of configuration key names, got {keys!r:.80}")
    summary = check_str("summary", summary)

    def deco(build):
        if not callable(build):
            raise TypeError(f"register_environment({name!r}) decorates a function build(config, runs, seed)")
        _ENVIRONMENTS.add(name, EnvironmentInfo(name, tuple(keys), summary, build), same=lambda a, b: a.build is b.build)
        return build

    return deco


def unregister_environment(name: str) -> None:
    """Remove the environment registered as ``name`` (for tests and notebooks that register one for a while).

    Parameters
    ----------
    name : str
        A registered instance name.
    """
    _ENVIRONMENTS.remove(name)


def available_environments() -> tuple[str, ...]:
    """Every registered instance name, in registration order.

    Returns
    -------
    tuple of str
        The names ``config["instance"]`` accepts.
    """
    return _ENVIRONMENTS.names()


def environment_keys() -> tuple[str, ...]:
    """Every configuration key some registered environment reads (the runner's check).

    Returns
    -------
    tuple of str
        ``instance``, ``runs``, ``env_seed`` and every registered builder's keys, without repeats.
    """
    keys = list(_COMMON_KEYS)
    for _, info in _ENVIRONMENTS.items():
        keys += [k for k in info.keys if k not in keys]
    return tuple(keys)


def make_environment(config: dict):
    """The environment of ``config``, with ``config["runs"]`` runs side by side.

    ``instance``: ``"synthetic"`` (:class:`~fedbandit.envs.SyntheticLinearEnv`: ``M``, ``K``,
    ``d``, ``noise_std`` = 0.5, ``shared_contexts`` = True), ``"real"``
    (:class:`~fedbandit.envs.RealDataLinearEnv` on the shipped MSLR sample: ``M``,
    ``noise_std`` = 0, ``shared_contexts`` = False, ``max_arms``), ``"bernoulli"`` /
    ``"gaussian"`` (:class:`~fedbandit.envs.multi_armed.BernoulliBandit` / ``GaussianBandit`` with
    ``means`` and, for Gaussian rewards, ``env_sigma``).  ``env_seed`` (default 0) fixes
    the linear instances' contexts and reward noise: keep it equal across the learners and
    protocols of a comparison (common random numbers); inside
    :func:`fedbandit.envs.sharing.run_in_lockstep` (``run_grid`` runs configurations with one
    environment that way) a linear instance comes back as a
    :class:`~fedbandit.envs.sharing.SharedEnvironment` whose blocks are generated once for all.  ``"digits"``: the federated split
    of scikit-learn's digits (:func:`~fedbandit.envs.load_digits_federated`: ``n_clients``
    = 100, ``split_seed`` = 0, ``test_fraction`` = 0.2), the federated learner's data.
    ``"rankers"``: the ``K`` (default 10) best MSLR rankers as arms with their real reward
    distributions (:func:`~fedbandit.envs.recommendation.ranker_bandit`).

    Parameters
    ----------
    config : dict
        The configuration (keys above, plus ``runs``).

    Returns
    -------
    object
        The environment: a linear environment, a multi-armed bandit or the digits split.
    """
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    instance = check_choice("instance", config.get("instance", "synthetic"), available_environments())
    runs = check_positive_int("runs", config.get("runs", 1))
    seed = config.get("env_seed", 0)
    if not isinstance(seed, (np.random.Generator, np.random.SeedSequence)):  # (a Generator would be consumed)
        as_seed_sequence(seed, "env_seed")
    return _ENVIRONMENTS.get(instance).build(config, runs, seed)


# ---------------------------------------------------------------------------------------
# The book's instances (the config's names -- M, K, d, ... -- are checked here, so that a
# refusal names the key the user wrote)
# ---------------------------------------------------------------------------------------


def _check_linear(config, instance):
    if "M" not in config:
        raise ValueError(f"config must give 'M' (the number of agents) for instance {instance!r}")
    check_positive_int("M", config["M"], max_value=MAX_STEPS)
    check_nonnegative_float("noise_std", config.get("noise_std", 0.5))


@register_environment("synthetic", keys=("M", "K", "d", "noise_std", "shared_contexts"),
                      summary="Zhou & Chowdhury's synthetic linear instance")
def _synthetic(config, runs, seed):
    _check_linear(config, "synthetic")
    check_positive_int("K", config.get("K", 100), max_value=MAX_STEPS)
    check_positive_int("d", config.get("d", 10), max_value=MAX_STEPS)
    return share(SyntheticLinearEnv(
        config["M"], config.get("K", 100), config.get("d", 10), n_runs=runs,
        noise_std=config.get("noise_std", 0.5),
        shared_contexts=check_bool("shared_contexts", config.get("shared_contexts", True)), seed=seed,
    ))


@register_environment("real", keys=("M", "noise_std", "shared_contexts", "max_arms"),
                      summary="the real-data linear instance of the shipped MSLR sample")
def _real(config, runs, seed):
    _check_linear(config, "real")
    if config.get("max_arms") is not None:
        check_positive_int("max_arms", config["max_arms"])
    return share(RealDataLinearEnv(
        load_mslr_instance(), config["M"], n_runs=runs, noise_std=config.get("noise_std", 0.0),
        shared_contexts=check_bool("shared_contexts", config.get("shared_contexts", False)),
        max_arms=config.get("max_arms"), seed=seed,
    ))


def _k_armed(instance):
    def build(config, runs, seed):
        if "means" not in config:
            raise ValueError(f"instance {instance!r} needs 'means', the arms' mean rewards")
        check_array("means", config["means"])
        check_positive_float("env_sigma", config.get("env_sigma", 0.1))
        return make_env(instance, config["means"], sigma=config.get("env_sigma", 0.1))

    return build


register_environment("bernoulli", keys=("means",), summary="K-armed Bernoulli bandit with the given means")(
    _k_armed("bernoulli"))
register_environment("gaussian", keys=("means", "env_sigma"), summary="K-armed Gaussian bandit with the given means")(
    _k_armed("gaussian"))


@register_environment("digits", keys=("n_clients", "split_seed", "test_fraction"),
                      summary="the federated split of scikit-learn's digits (the federated learner's data)")
def _digits(config, runs, seed):
    check_probability("test_fraction", config.get("test_fraction", 0.2))
    check_rng("split_seed", config.get("split_seed", 0))
    return load_digits_federated(
        check_positive_int("n_clients", config.get("n_clients", 100)),
        test_fraction=config.get("test_fraction", 0.2), rng=config.get("split_seed", 0),
    )


@register_environment("rankers", keys=("K",), summary="the K best MSLR rankers as arms, real reward distributions")
def _rankers(config, runs, seed):
    return ranker_bandit(config.get("K", 10))


#: ``config["instance"]`` values of the book: the linear instances of Zhou & Chowdhury (synthetic, and
#: the MSLR real-data one), K-armed bandits with given means (Bernoulli or Gaussian), the federated
#: digits, and the K-armed recommendation instance of real relevance judgements (MSLR rankers as arms).
#: :func:`available_environments` adds the ones registered later.
INSTANCES = available_environments()

#: Configuration keys that describe the book's environments (:func:`environment_keys` adds the
#: keys of environments registered later).
ENVIRONMENT_KEYS = environment_keys()

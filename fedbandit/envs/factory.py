"""One function that builds the environment a configuration describes."""

from __future__ import annotations

import numpy as np

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
)

__all__ = ["make_environment", "ENVIRONMENT_KEYS", "INSTANCES"]

#: ``config["instance"]`` values: the linear instances of Zhou & Chowdhury (synthetic, and
#: the MSLR real-data one), K-armed bandits with given means (Bernoulli or Gaussian), and the
#: K-armed recommendation instance of real relevance judgements (MSLR rankers as arms).
INSTANCES = ("synthetic", "real", "bernoulli", "gaussian", "digits", "rankers")

#: Configuration keys that describe the environment (the runner checks every key is used).
ENVIRONMENT_KEYS = ("instance", "M", "K", "d", "env_seed", "noise_std", "shared_contexts", "max_arms", "means",
                    "env_sigma", "runs", "n_clients", "split_seed", "test_fraction")


def make_environment(config: dict):
    """The environment of ``config``, with ``config["runs"]`` runs side by side.

    ``instance``: ``"synthetic"`` (:class:`~fedbandit.envs.SyntheticLinearEnv`: ``M``, ``K``,
    ``d``, ``noise_std`` = 0.5, ``shared_contexts`` = True), ``"real"``
    (:class:`~fedbandit.envs.RealDataLinearEnv` on the shipped MSLR sample: ``M``,
    ``noise_std`` = 0, ``shared_contexts`` = False, ``max_arms``), ``"bernoulli"`` /
    ``"gaussian"`` (:class:`~fedbandit.envs.BernoulliBandit` / ``GaussianBandit`` with
    ``means`` and, for Gaussian rewards, ``env_sigma``).  ``env_seed`` (default 0) fixes
    the linear instances' contexts and reward noise: keep it equal across the learners and
    protocols of a comparison (common random numbers).  ``"digits"``: the federated split
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
    instance = check_choice("instance", config.get("instance", "synthetic"), INSTANCES)
    runs = check_positive_int("runs", config.get("runs", 1))
    seed = config.get("env_seed", 0)
    if not isinstance(seed, (np.random.Generator, np.random.SeedSequence)):  # (a Generator would be consumed)
        from fedbandit.envs.linear import as_seed_sequence

        as_seed_sequence(seed, "env_seed")
    # the config's names (M, K, d, ...) are checked here, so that a refusal names the key the user wrote
    if instance in ("synthetic", "real"):
        if "M" not in config:
            raise ValueError(f"config must give 'M' (the number of agents) for instance {instance!r}")
        check_positive_int("M", config["M"], max_value=MAX_STEPS)
        check_nonnegative_float("noise_std", config.get("noise_std", 0.5))
    if instance == "synthetic":
        from fedbandit.envs.linear import SyntheticLinearEnv

        check_positive_int("K", config.get("K", 100), max_value=MAX_STEPS)
        check_positive_int("d", config.get("d", 10), max_value=MAX_STEPS)
        return SyntheticLinearEnv(
            config["M"], config.get("K", 100), config.get("d", 10), n_runs=runs,
            noise_std=config.get("noise_std", 0.5),
            shared_contexts=check_bool("shared_contexts", config.get("shared_contexts", True)), seed=seed,
        )
    if instance == "real":
        from fedbandit.envs.linear import RealDataLinearEnv
        from fedbandit.envs.mslr import load_mslr_instance

        if config.get("max_arms") is not None:
            check_positive_int("max_arms", config["max_arms"])
        return RealDataLinearEnv(
            load_mslr_instance(), config["M"], n_runs=runs, noise_std=config.get("noise_std", 0.0),
            shared_contexts=check_bool("shared_contexts", config.get("shared_contexts", False)),
            max_arms=config.get("max_arms"), seed=seed,
        )
    if instance == "digits":
        from fedbandit.envs.digits import load_digits_federated

        check_probability("test_fraction", config.get("test_fraction", 0.2))
        check_rng("split_seed", config.get("split_seed", 0))
        return load_digits_federated(
            check_positive_int("n_clients", config.get("n_clients", 100)),
            test_fraction=config.get("test_fraction", 0.2), rng=config.get("split_seed", 0),
        )
    if instance == "rankers":
        from fedbandit.envs.recommendation import ranker_bandit

        return ranker_bandit(config.get("K", 10))
    from fedbandit.envs.multi_armed import make_env

    if "means" not in config:
        raise ValueError(f"instance {instance!r} needs 'means', the arms' mean rewards")
    check_array("means", config["means"])
    check_positive_float("env_sigma", config.get("env_sigma", 0.1))
    return make_env(instance, config["means"], sigma=config.get("env_sigma", 0.1))

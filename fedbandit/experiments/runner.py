"""The one configuration runner: ``run_config(config, rng) -> RunResult`` for every learner.

A configuration is a flat dict: ``learner`` (a name of
:func:`fedbandit.learners.available_learners`), ``protocol`` (a name of
:func:`fedbandit.protocols.available`, for learners that share), the environment's keys
(:func:`fedbandit.envs.environment_keys`), the learner's shape keys (``T``, ``B``, ...),
and any parameter of the protocol factory or of the learner's constructor, by name.
Every key must be used by one of them (a misspelt key is an error, not a silent
default).  ``rng`` drives only the learner's and the protocol's randomness; the
environment is a function of the configuration (common random numbers across learners).
"""

from __future__ import annotations

import contextlib
import re
import warnings

from fedbandit._validation import MAX_STEPS, check_int_in_range, check_positive_int, check_rng
from fedbandit.accounting.amplification import AmplificationValidityWarning
from fedbandit.envs.factory import environment_keys, make_environment
from fedbandit.envs.sharing import task_clock
from fedbandit.learners.registry import available_learners, keyword_parameters, learner_class
from fedbandit.protocols.registry import describe

__all__ = ["run_config", "RUNNER_KEYS"]

#: Keys the runner itself reads (``tag`` is a free label for grouping configurations: never read).
RUNNER_KEYS = ("learner", "protocol", "n_checkpoints", "T", "B", "epsilon", "delta", "tag")


def _max_rss_mb() -> float:
    try:
        import resource  # Unix only: imported where used, inside the try (absent on Windows)

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    except ImportError:  # pragma: no cover - not on POSIX
        return float("nan")


#: The learners' and environments' parameter names that stand for configuration keys.
CONFIG_NAMES = {
    "horizon": ("T",),
    "n_agents": ("M",),
    "batch_size": ("B",),
    "n_arms": ("K",),
    "dim": ("d",),
    "n_runs": ("runs",),
    "n_users": ("M", "T"),
    "n_batches": ("T", "B"),
    "n_parties": ("M", "n_clients"),
    "n_clients": ("n_clients",),
    "graph": ("topology", "M"),
}


def _available_learners():
    return available_learners()


@contextlib.contextmanager
def config_names(config):
    """Append to a refusal the configuration keys behind the parameter it names.

    The environment and learner constructors name their own parameters (``horizon``,
    ``n_agents``); the user wrote ``T``, ``M``: a refusal says both.
    """
    try:
        yield
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        keys = []
        for param, names in CONFIG_NAMES.items():
            if re.search(rf"\b{param}\b", msg):
                keys += [k for k in names if k in config and k not in keys]
        if keys:
            exc.args = (msg + " [from the config: " + ", ".join(f"{k}={config[k]!r}" for k in keys) + "]",)
        raise


def _check_keys(config, cls):
    known = set(RUNNER_KEYS) | set(environment_keys()) | set(keyword_parameters(cls)) | set(getattr(cls, "config_keys", ()))
    if config.get("protocol") is not None:
        known |= set(describe(config["protocol"]).parameters)
    unknown = sorted(set(config) - known)
    if unknown:
        raise ValueError(
            f"config keys {unknown} are used by neither the environment, the learner {config['learner']!r} nor the "
            f"protocol {config.get('protocol')!r}"
        )


def run_config(config: dict, rng):
    """Run one configuration: ``config["runs"]`` runs of one learner on one instance.

    Returns
    -------
    RunResult
        With the curve thinned to ``n_checkpoints`` (default 100) equally spaced rounds,
        and the wall time, CPU time and peak memory of the call.
    """
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    if "learner" not in config:
        raise ValueError(f"config must give 'learner' (one of {', '.join(_available_learners())}); it has {sorted(config)}")
    cls = learner_class(config.get("learner"))
    _check_keys(config, cls)
    rng = check_rng("rng", rng)
    n_cp = check_int_in_range("n_checkpoints", config.get("n_checkpoints", 100), 1, None)
    if "T" in config:
        check_positive_int("T", config["T"], max_value=MAX_STEPS, reason="a run plays T rounds")
    if "runs" in config:
        check_positive_int("runs", config["runs"], max_value=MAX_STEPS, reason="runs are simulated side by side")
    cpu_start, start = task_clock()  # this task's own time, also when run in lockstep with others
    with config_names(config):
        env = make_environment(config)
        with warnings.catch_warnings():
            # A forced amplification setting (force=True) is reported through the accounting ("unproven").
            warnings.simplefilter("ignore", AmplificationValidityWarning)
            learner = cls.from_config(config, env)
        result = learner.run(env, rng).at_checkpoints(n_cp)
    cpu_end, end = task_clock()
    result.seconds = end - start
    result.cpu_seconds = cpu_end - cpu_start
    result.peak_rss_mb = _max_rss_mb()
    return result

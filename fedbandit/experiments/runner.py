"""The one configuration runner: ``run_config(config, rng) -> RunResult`` for every learner.

A configuration is a flat dict: ``learner`` (a name of
:func:`fedbandit.learners.available_learners`), ``protocol`` (a name of
:func:`fedbandit.protocols.available`, for learners that share), the environment's keys
(:data:`fedbandit.envs.ENVIRONMENT_KEYS`), the learner's shape keys (``T``, ``B``, ...),
and any parameter of the protocol factory or of the learner's constructor, by name.
Every key must be used by one of them (a misspelt key is an error, not a silent
default).  ``rng`` drives only the learner's and the protocol's randomness; the
environment is a function of the configuration (common random numbers across learners).
"""

from __future__ import annotations

import time
import warnings

from fedbandit._validation import check_int_in_range, check_rng
from fedbandit.accounting.amplification import AmplificationValidityWarning

__all__ = ["run_config", "RUNNER_KEYS"]

#: Keys the runner itself reads (``tag`` is a free label for grouping configurations: never read).
RUNNER_KEYS = ("learner", "protocol", "n_checkpoints", "T", "B", "epsilon", "delta", "tag")


def _max_rss_mb() -> float:
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    except ImportError:  # pragma: no cover - not on POSIX
        return float("nan")


def _check_keys(config, cls):
    from fedbandit.envs.factory import ENVIRONMENT_KEYS
    from fedbandit.learners.registry import keyword_parameters
    from fedbandit.protocols.registry import describe

    known = set(RUNNER_KEYS) | set(ENVIRONMENT_KEYS) | set(keyword_parameters(cls)) | set(getattr(cls, "config_keys", ()))
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
    from fedbandit.envs.factory import make_environment
    from fedbandit.learners.registry import learner_class

    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    cls = learner_class(config.get("learner"))
    _check_keys(config, cls)
    rng = check_rng("rng", rng)
    n_cp = check_int_in_range("n_checkpoints", config.get("n_checkpoints", 100), 1, None)
    start, cpu_start = time.perf_counter(), time.process_time()
    env = make_environment(config)
    with warnings.catch_warnings():
        # A forced amplification setting (force=True) is reported through the accounting ("unproven").
        warnings.simplefilter("ignore", AmplificationValidityWarning)
        learner = cls.from_config(config, env)
    result = learner.run(env, rng).at_checkpoints(n_cp)
    result.seconds = time.perf_counter() - start
    result.cpu_seconds = time.process_time() - cpu_start
    result.peak_rss_mb = _max_rss_mb()
    return result

"""The learner registry: one name per learner family, and how a configuration builds one.

``register_learner(name)`` marks a class with ``from_config(config, env)``;
:func:`fedbandit.experiments.run_config` builds the environment, the learner and its
protocol from one configuration dict and returns the learner's
:class:`~fedbandit.learners.RunResult`.  :func:`split_params` routes a flat configuration
to the protocol factory and the learner's constructor by their signatures.
"""

from __future__ import annotations

import inspect

from fedbandit._registry import Registry
from fedbandit._validation import check_bool, check_choice
from fedbandit.protocols.registry import create, describe

__all__ = ["register_learner", "unregister_learner", "learner_class", "learner_family", "available_learners",
           "split_params", "LEARNER_FAMILIES"]

#: Modules that register learners (imported on first use).
_FAMILIES = (
    "fedbandit.learners.fixed_batch",
    "fedbandit.learners.dp20",
    "fedbandit.learners.concurrent_linucb",
    "fedbandit.learners.consensus",
    "fedbandit.learners.federated",
)
_LEARNERS = Registry("learner", _FAMILIES)

#: Constructor arguments that come from the configuration's shape keys, not by name.
_STRUCTURAL = {"self", "protocol", "horizon", "batch_size", "n_agents", "dim", "env", "graph", "n_arms", "kwargs",
               "n_features", "n_classes"}


#: The families of learners, by the data they learn from (the replay contract and the audits build a
#: family's learners on its small instance): ``"linear"`` (linear contextual bandits, a statistics
#: protocol; constructor ``cls(protocol, horizon=T, batch_size=B, n_agents=M, dim=d, **kw)``),
#: ``"counter"`` (K-armed bandits, a counter protocol; ``cls(protocol, n_agents=M, n_arms=K,
#: horizon=T, n_runs=R, **kw)``) and ``"federated"`` (federated learning, a sum protocol).
LEARNER_FAMILIES = ("linear", "counter", "federated")


def register_learner(name: str, *, family: str | None = None):
    """Class decorator: register a learner class under ``name``.

    ``family`` (one of :data:`LEARNER_FAMILIES`) says which small instance the replay contract and
    the audits build it on; it is stored as the class attribute ``family``.  A learner class needs
    ``run(env, rng) -> Result`` and ``from_config(config, env)`` (:func:`fedbandit.experiments.run_config`).
    """
    if family is not None:
        check_choice("family", family, LEARNER_FAMILIES)

    def deco(cls):
        if family is not None:
            cls.family = family
        _LEARNERS.add(name, cls)
        return cls

    return deco


def unregister_learner(name: str) -> None:
    """Remove the learner registered as ``name`` (for tests and notebooks that register one for a while)."""
    _LEARNERS.remove(name)


def learner_family(name) -> str | None:
    """The family (:data:`LEARNER_FAMILIES`) of the learner registered as ``name``; None if it declares none."""
    return getattr(learner_class(name), "family", None)


def available_learners() -> tuple[str, ...]:
    """Every registered learner name."""
    return _LEARNERS.names()


def learner_class(name) -> type:
    """The class registered as ``name``."""
    return _LEARNERS.get(name)


def keyword_parameters(func) -> tuple[str, ...]:
    """Names of the keyword-passable parameters of ``func`` (or a class's ``__init__``)."""
    target = func.__init__ if inspect.isclass(func) else func
    params = []
    for klass in (inspect.getmro(func) if inspect.isclass(func) else ()):
        if "__init__" in vars(klass):
            params += list(inspect.signature(klass.__init__).parameters)
    if not params:
        params = list(inspect.signature(target).parameters)
    return tuple(p for p in dict.fromkeys(params) if p not in _STRUCTURAL)


def split_params(config: dict, cls, *, protocol: bool = True):
    """(protocol, learner keyword arguments) from a flat configuration.

    The protocol is ``fedbandit.protocols.create(config["protocol"], **params)`` with the
    configuration's entries that its factory accepts; the learner gets the entries its
    constructor accepts.  ``protocol=False``: no protocol (independent agents).
    """
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    if not isinstance(cls, type):
        raise TypeError(f"cls must be a learner class, got {cls!r:.80}")
    protocol = check_bool("protocol", protocol)
    proto = None
    if protocol:
        name = config.get("protocol")
        if name is None:
            raise ValueError("config lacks 'protocol' (a name of fedbandit.protocols.available())")
        info = describe(name)
        proto = create(name, **{k: config[k] for k in info.parameters if k in config and config[k] is not None})
    kw = {k: config[k] for k in keyword_parameters(cls) if k in config}
    return proto, kw

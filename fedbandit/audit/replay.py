"""The counterfactual replay contract: does one user move anything but its own record?

Every protocol's accounting rests on one assumption about the learner that feeds it: each
user contributes *one record*, and everything else an agent hands to the protocol depends on
that user only through the protocol's releases (post-processing).  A learner that serves a
user from its own unsynchronized data (DP20's FedUCB, Algorithm 1 of Zhou & Chowdhury as
written: within-batch adaptivity), or whose synchronization schedule reads its local data
(DP20's log-det rule), breaks the assumption, and no noise calibration repairs it.

The check, for one learner on one small instance (:func:`replay_check`):

1. run the learner on D through a *recording* copy of its protocol
   (:func:`replaying`): every call of the protocol's release methods is kept, its inputs
   (what the agents hand over: batch sums, per-user records, stream items, messages) and
   its outputs (what the server releases);
2. run it again on D′ = D with one target user changed as the protocol's neighbouring
   relation says (``"add-remove"``: the target's record zeroed -- zero features, zero reward,
   as the protocols model an absent record; ``"replace"``: another record), with the
   releases of step 1 FORCED: the protocol copy returns D's recorded outputs, call by call,
   whatever it is handed;
3. compare the inputs call by call (:func:`compare_calls`).  With the releases forced, a
   learner whose records depend on the target only through the releases hands over
   identical inputs except the target's own record: one per-user cell (D's value the
   target's record on D, D′'s its record on D′) or one (run, agent) cell of a batch sum
   that differs by exactly the target's contribution x′y′ − xy, x′x′ᵀ − xxᵀ.  Anything
   else -- another cell, another difference, another number of calls or another method
   -- is a :class:`ReplayViolation`.

The target's record is known without the learner's help: all K arms of the target user
have the same features (the target's played record does not depend on the arm chosen),
and its reward is clipped to ±Y (Y = 1) by every learner that clips.  Counter learners
(one reward per record, :mod:`fedbandit.learners.consensus`) get the target reward from
:class:`~fedbandit.audit.end_to_end.TargetRewardBandit` (1 on D, 0 on D′: the item zeroed,
which is also a replacement), federated learning a client whose labels change (the
contract then requires every *other* client's update to be identical).

Targets (:data:`TARGETS`, a small stated search): the first user of the first batch of
agent 0, and a user in the middle of the second batch of agent 1.  The forced releases make
the check exact (no noise, no statistics): it does not say how much leaks, only whether the
learner's data flow matches what its accounting assumes.

Reconstruction [derived]: the contract is the book's, not a paper's.  It is the
"post-processing" half of every accounting argument of the book's learners made
executable; :mod:`fedbandit.audit.views` records what an adversary sees, this module what
the agents send when the adversary's view is held fixed.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass, field

import numpy as np

from fedbandit._validation import check_array, check_choice
from fedbandit.audit._inputs import TargetRewardBandit, federated_data, linear_users
from fedbandit.envs.graphs import make_graph
from fedbandit.envs.users import UsersEnv
from fedbandit.learners.registry import available_learners, keyword_parameters, learner_class, learner_family
from fedbandit.protocols.base import Protocol
from fedbandit.protocols.registry import available, create, describe

__all__ = [
    "ReplayViolation",
    "ReplayReport",
    "ReplayLog",
    "replaying",
    "compare_calls",
    "replay_check",
    "replay_pairs",
    "REPLAY_METHODS",
    "TARGETS",
    "NOT_REPLAYED",
]

#: The protocol methods a learner calls to hand over records or read releases, by kind.
REPLAY_METHODS = {
    "statistics": ("synchronize", "release"),
    "counter": ("release", "release_increment", "value_at", "communicate"),
    "sum": ("aggregate",),
}

#: The targets searched for every pair: (round index from 0, agent) as fractions of the
#: schedule -- ("first", 0): round 0 of agent 0; ("middle-second", 1): the middle of the
#: second batch (round B + B // 2) of agent 1.
TARGETS = (("first", 0), ("middle-second", 1))

#: Learners without a protocol: nothing is handed over, so there is nothing to replay.
NOT_REPLAYED = {
    "independent": "no protocol: the independent agents never send anything (accounting: no release)",
    "centralized-ucb": "no protocol: a central learner sees every raw reward (accounting: not private)",
}


class ReplayViolation(AssertionError):
    """A record other than the target's own changed when the releases were forced."""


class _Diverged(RuntimeError):
    """Raised inside the learner when its calls on D′ leave D's sequence."""


@dataclass
class ReplayLog:
    """The calls of one run: ``calls[i] = (method, args, kwargs)`` (copies) and ``outputs[i]``."""

    calls: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    forced: list | None = None  # D's outputs, replayed (None: recording)
    depth: int = 0
    diverged: str = ""


def _snap(obj):
    if isinstance(obj, np.ndarray):
        return np.array(obj, copy=True)
    if isinstance(obj, tuple):
        return tuple(_snap(o) for o in obj)
    if isinstance(obj, list):
        return [_snap(o) for o in obj]
    if isinstance(obj, dict):
        return {k: _snap(v) for k, v in obj.items()}
    return copy.deepcopy(obj)


_CLASSES: dict = {}


def _replay_class(cls, methods):
    key = (cls, methods)
    if key in _CLASSES:
        return _CLASSES[key]

    def make(name):
        def method(self, *args, **kwargs):
            log = self._replay_log
            parent = getattr(super(sub, self), name)
            if log.depth:  # a release method calling another (synchronize -> release): the outer call counts
                return parent(*args, **kwargs)
            log.depth += 1
            try:
                i = len(log.calls)
                log.calls.append((name, _snap(args), _snap(kwargs)))
                if log.forced is None:
                    out = parent(*args, **kwargs)
                    log.outputs.append(_snap(out))
                    return out
                try:  # keep the protocol's own state moving; its output is not used
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        parent(*args, **kwargs)
                except Exception:  # noqa: BLE001 - inputs D's run never gave; the comparison reports it
                    pass
                if i >= len(log.forced) or log.forced[i][0] != name:
                    log.diverged = (f"call {i}: {name}() on D′ but "
                                    + (f"{log.forced[i][0]}() on D" if i < len(log.forced) else "no such call on D"))
                    raise _Diverged(log.diverged)
                return _snap(log.forced[i][1])
            finally:
                log.depth -= 1

        method.__name__ = name
        return method

    sub = type(f"Replayed{cls.__name__}", (cls,), {n: make(n) for n in methods if hasattr(cls, n)})
    sub.__module__ = __name__
    _CLASSES[key] = sub
    return sub


def replaying(protocol: Protocol, log: ReplayLog) -> Protocol:
    """A deep copy of ``protocol`` whose release methods (:data:`REPLAY_METHODS`) go through ``log``.

    With ``log.forced`` None the calls and their outputs are recorded; with ``log.forced``
    a list of ``(method, output)`` (a recorded run's), every call returns the next recorded
    output instead of its own (the releases are forced), and a call of another method, or
    one call too many, stops the run (:attr:`ReplayLog.diverged`).
    """
    if not isinstance(protocol, Protocol):
        raise TypeError(f"protocol must be a fedbandit.protocols.Protocol, got {type(protocol).__name__}")
    if not isinstance(log, ReplayLog):
        raise TypeError(f"log must be a ReplayLog, got {type(log).__name__}")
    p = copy.deepcopy(protocol)
    p.__class__ = _replay_class(type(p), REPLAY_METHODS[p.kind])
    p._replay_log = log
    return p


# ---------------------------------------------------------------------------------------
# Comparing the calls
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Target:
    """The target's record on D and D′: x (d,), y, or (for counters) the item, or (federated) the client."""

    kind: str  # "linear", "counter", "federated"
    x: np.ndarray | None = None
    y: float = 0.0
    x1: np.ndarray | None = None
    y1: float = 0.0
    client: int = 0


def _close(a, b, tol=1e-9):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= tol * (1.0 + np.abs(a) + np.abs(b))))


def _cells(a, b, n_lead, tol=1e-9):
    """Leading-axes cells (index tuples) where arrays a and b differ."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    bad = np.abs(a - b) > tol * (1.0 + np.abs(a) + np.abs(b))
    if bad.ndim > n_lead:
        bad = bad.reshape(bad.shape[:n_lead] + (-1,)).any(axis=-1)
    return [tuple(int(i) for i in c) for c in np.argwhere(bad)]


def _roles(method, args, kwargs, kind):
    """{name: (array, role, n_lead)}: the record-carrying inputs of one call, by role.

    Roles: ``"sum"`` (cells (run, agent) holding batch sums), ``"user-x"`` / ``"user-y"``
    (per-user records, cells over the leading axes), ``"item"`` (a counter's items, cells
    over entries), ``"party"`` (a sum protocol's party vectors, cells (run, party)),
    ``"exact"`` (must be identical: indices, messages, masks, run lists)."""
    out = {}
    if kind == "statistics" and method == "synchronize":
        bias, gram = args[0], args[1]
        out["bias"] = (bias, "sum-bias", 2)
        out["gram"] = (gram, "sum-gram", 2)
        users = kwargs.get("users")
        if users is not None:
            out["users.x"] = (users[0], "user-x", users[0].ndim - 1)
            out["users.y"] = (users[1], "user-y", users[1].ndim)
        out["runs"] = (kwargs.get("runs"), "exact", 0)
    elif kind == "statistics" and method == "release":
        x, y = args[0], args[1]
        out["x"] = (x, "user-x", x.ndim - 1)
        out["y"] = (y, "user-y", y.ndim)
    elif kind == "counter" and method in ("release", "release_increment"):
        out["idx"] = (args[0], "exact", 0)
        out["items"] = (args[1], "item", 1)
    elif kind == "counter" and method == "value_at":
        out["idx"] = (args[0], "exact", 0)
    elif kind == "counter" and method == "communicate":
        out["messages"] = (args[0], "exact", 0)
        out["counts"] = ((kwargs.get("n_messages"), kwargs.get("payload")), "exact", 0)
    elif kind == "sum":
        out["vectors"] = (args[0], "party", 2)
        out["mask"] = (kwargs.get("mask"), "exact", 0)
    else:  # pragma: no cover - REPLAY_METHODS and this table go together
        raise ValueError(f"no record roles for {kind} method {method!r}")
    return out


def _same_exact(a, b):
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(_same_exact(u, v) for u, v in zip(a, b))
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "fc" or b.dtype.kind in "fc":
        return _close(a, b)
    return a.shape == b.shape and bool(np.all(a == b))


def compare_calls(log_d: ReplayLog, log_d1: ReplayLog, target: _Target, kind: str) -> list[str]:
    """The violations of the contract between a run on D and the forced run on D′ (empty: it holds).

    See the module docstring: per call the same method; inputs identical except the
    target's own record, which may appear in at most one cell of every record-carrying
    argument (a counter item, a per-user record, a batch sum differing by exactly the
    target's contribution); a sum protocol's party vectors may differ in the target
    client's row only.  A run in which the target's record never reaches the protocol is
    reported too (the check would be vacuous).
    """
    problems = []
    if log_d1.diverged:
        problems.append(f"the calls diverge on D′ ({log_d1.diverged}): the schedule depends on the target")
    if len(log_d1.calls) != len(log_d.calls) and not log_d1.diverged:
        problems.append(f"{len(log_d.calls)} protocol calls on D but {len(log_d1.calls)} on D′: the schedule depends "
                        "on the target")
    seen = {}  # role -> number of differing cells so far
    if target.kind == "linear":
        x0, y0, x1, y1 = target.x, target.y, target.x1, target.y1
        d_bias = x1 * y1 - x0 * y0
        d_gram = np.outer(x1, x1) - np.outer(x0, x0)
    for i, ((m0, a0, k0), (m1, a1, k1)) in enumerate(zip(log_d.calls, log_d1.calls)):
        if m0 != m1:
            problems.append(f"call {i}: {m0}() on D, {m1}() on D′")
            break
        r0, r1 = _roles(m0, a0, k0, kind), _roles(m1, a1, k1, kind)
        for name, (v0, role, n_lead) in r0.items():
            v1 = r1[name][0]
            where = f"call {i} ({m0}), {name}"
            if role == "exact":
                if not _same_exact(v0, v1):
                    problems.append(f"{where}: differs on D′ (not a record: it may depend on releases only)")
                continue
            if np.shape(v0) != np.shape(v1):
                problems.append(f"{where}: shape {np.shape(v0)} on D, {np.shape(v1)} on D′")
                continue
            cells = _cells(v0, v1, n_lead)
            if not cells:
                continue
            if role == "party":
                others = [c for c in cells if c[1] != target.client]
                if others:
                    problems.append(f"{where}: parties {sorted({c[1] for c in others})} changed, not only the target "
                                    f"client {target.client}")
                continue
            seen[role] = seen.get(role, 0) + len(cells)
            if seen[role] > 1:
                problems.append(f"{where}: cells {cells} changed; the target's record can change one cell only "
                                f"(another record of the run changed with the target)")
                continue
            c = cells[0]
            a, b = np.asarray(v0, dtype=float)[c], np.asarray(v1, dtype=float)[c]
            ok = True
            if role == "sum-bias":
                ok = _close(b - a, d_bias, 1e-7)
            elif role == "sum-gram":
                ok = _close(b - a, d_gram, 1e-7)
            elif role == "user-x":
                ok = _close(a, x0) and _close(b, x1)
            elif role == "user-y":
                ok = _close(a, y0) and _close(b, y1)
            elif role == "item":
                ok = _close(b - a, target.y1 - target.y)
            if not ok:
                problems.append(f"{where}: cell {c} changed by more than the target's own record (D: {np.round(a, 6)}, "
                                f"D′: {np.round(b, 6)}): another user's record is folded into it")
    if not problems and not seen and not any(r == "party" for r in _all_roles(log_d, kind)):
        problems.append("the target's record never reached the protocol: the check is vacuous on this instance")
    return problems


def _all_roles(log, kind):
    return {role for m, a, k in log.calls for _, role, _ in _roles(m, a, k, kind).values()}


# ---------------------------------------------------------------------------------------
# Small instances and the learners built on them
# ---------------------------------------------------------------------------------------

#: The small instance of every linear learner: T rounds, M agents, K arms, d, batch B.
LINEAR = dict(T=12, M=3, K=4, d=2, B=4)
#: Counter learners: M agents, K arms, T slots.
COUNTER = dict(M=3, K=3, T=24)
#: Federated learning: clients, features, classes, rounds.
FEDERATED = dict(n_clients=4, n_features=3, n_classes=3, T=3)

#: Protocol parameters of the contract (a generous target; the contract does not depend on it).
_PROTOCOL_PARAMS = {
    "sdp-amplification": dict(epsilon=0.5, delta=0.1, force=True),
    "concurrent-shuffle": dict(epsilon=2.0, delta=1e-3, k=2),
    "sequential-vector-sum": dict(epsilon=2.0, delta=0.1, batch_size=LINEAR["B"]),
    "dp20": dict(epsilon=2.0, delta=0.1),
}


def _protocol(name):
    info = describe(name)
    params = {} if "epsilon" not in info.parameters else dict(_PROTOCOL_PARAMS.get(name, dict(epsilon=2.0, delta=0.1)))
    if info.kind == "counter" and "delta" in params and "delta" not in info.parameters:
        params.pop("delta")
    params = {k: v for k, v in params.items() if k in info.parameters}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create(name, **params)


def _family(learner):
    return learner_family(learner)


def _build(learner, protocol, overrides):
    """The learner ``learner`` with ``protocol`` on the contract's small instance (construction may raise)."""
    cls = learner_class(learner)
    kw = dict(overrides)
    L, C, F = LINEAR, COUNTER, FEDERATED
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if learner == "fixed-batch":
            return cls(protocol, horizon=L["T"], batch_size=L["B"], n_agents=L["M"], dim=L["d"],
                       **{"lam": 1.0, **kw})
        if learner == "super-agent":
            return cls(protocol, horizon=L["T"], n_agents=L["M"], dim=L["d"], **{"lam": 1.0, **kw})
        if learner == "feducb":
            schedule = kw.pop("schedule", "fixed")
            sched = dict(batch_size=L["B"]) if schedule == "fixed" else dict(threshold=kw.pop("threshold", 0.3))
            return cls(protocol, n_agents=L["M"], dim=L["d"], horizon=L["T"], schedule=schedule,
                       **{"shift": 0.0, "reward_bound": 1.0, **sched, **kw})
        if learner == "concurrent-linucb":
            return cls(protocol, n_users=L["M"] * L["T"], dim=L["d"], agents_per_round=L["M"],
                       **{"min_period": L["B"], **kw})
        if learner == "decentralized":
            return cls(protocol, graph=make_graph("ring", C["M"]), n_arms=C["K"], horizon=C["T"], n_runs=1, **kw)
        if learner in ("master-worker", "independent-ucb"):
            return cls(protocol, n_agents=C["M"], n_arms=C["K"], horizon=C["T"], n_runs=1, **kw)
        if learner == "federated-learning":
            return cls(protocol, n_clients=F["n_clients"], n_features=F["n_features"], n_classes=F["n_classes"],
                       rounds=F["T"], **kw)
        # any other learner: its family's constructor convention (fedbandit.learners.registry.LEARNER_FAMILIES)
        family = _family(learner)
        if family == "linear":
            return cls(protocol, horizon=L["T"], batch_size=L["B"], n_agents=L["M"], dim=L["d"], **kw)
        if family == "counter":
            return cls(protocol, n_agents=C["M"], n_arms=C["K"], horizon=C["T"], n_runs=1, **kw)
        if family == "federated":
            return cls(protocol, n_clients=F["n_clients"], n_features=F["n_features"], n_classes=F["n_classes"],
                       rounds=F["T"], **kw)
    raise KeyError(learner)


def _target_round(position, batch):
    if position == "first":
        return 0
    return batch + batch // 2  # "middle-second"


def _linear_data(relation, target_round, agent, world, users=None):
    """Users of the linear instance (or ``users``); the target (all arms alike) is D's (world 1) or D′'s (world 0)."""

    L = LINEAR
    K = L["K"] if users is None else np.shape(users[0])[2]
    f, means, noise = linear_users(L["M"], K, L["d"], L["T"], relation=relation, world=1, users=users)
    tf, tm, tn = linear_users(L["M"], K, L["d"], L["T"], relation=relation, world=world)
    f[target_round, agent], means[target_round, agent], noise[target_round, agent] = tf[0, 0], tm[0, 0], tn[0, 0]
    return f, means, noise


def _run(learner, family, data, rng_seed=0):
    if family == "linear":
        env = UsersEnv(*data, n_runs=1)
        return learner.run(env, np.random.default_rng(rng_seed))
    if family == "counter":
        return learner.run(data, np.random.default_rng(rng_seed))
    return learner.run(data, np.random.default_rng(rng_seed), n_runs=1)


@dataclass
class ReplayReport:
    """The outcome of :func:`replay_check` for one (learner, protocol) pair: ``problems`` per target."""

    learner: str
    protocol: str
    overrides: dict
    relation: str
    problems: dict  # target label -> list of violations

    @property
    def holds(self) -> bool:
        return not any(self.problems.values())

    def raise_if_violated(self) -> None:
        if not self.holds:
            lines = [f"{t}: {p}" for t, ps in self.problems.items() for p in ps[:3]]
            raise ReplayViolation(f"{self.learner} × {self.protocol} {self.overrides or ''} breaks the replay contract "
                                  f"({self.relation}):\n  " + "\n  ".join(lines))


def _check_targets(targets):
    positions = ("first", "middle-second")
    if isinstance(targets, (str, bytes, dict)) or not hasattr(targets, "__len__") or len(targets) == 0:
        raise TypeError(f"targets must be a non-empty sequence of (position, agent) pairs, got {targets!r:.80}")
    out = []
    for t in targets:
        if isinstance(t, (str, bytes)) or not hasattr(t, "__len__") or len(t) != 2:
            raise TypeError(f"targets must hold (position, agent) pairs, got {t!r:.80} in targets")
        pos, agent = t
        if not isinstance(pos, str) or pos not in positions:
            raise ValueError(f"targets: position must be one of {positions}, got {pos!r:.80}")
        if isinstance(agent, bool) or not isinstance(agent, (int, np.integer)) or not 0 <= agent < 3:
            raise ValueError(f"targets: agent must be an int in [0, 2] (the instances have 3 agents), got {agent!r:.80}")
        out.append((pos, int(agent)))
    return tuple(out)


def _check_users(users):
    """(features (T, M, K, d), means (T, M, K), noise (T, M)) with the :data:`LINEAR` sizes T, M, d, checked."""
    if not isinstance(users, tuple) or len(users) != 3:
        raise TypeError(f"users must be a tuple (features, means, noise), got {type(users).__name__}")
    features, means, noise = (check_array(f"users[{i}]", a) for i, a in enumerate(users))
    L = LINEAR
    K = features.shape[2] if features.ndim == 4 else 0
    want = ((L["T"], L["M"], K, L["d"]), (L["T"], L["M"], K), (L["T"], L["M"]))
    if K < 1 or (features.shape, means.shape, noise.shape) != want:
        raise ValueError(f"users must have shapes features (T, M, K, d) = ({L['T']}, {L['M']}, K, {L['d']}), means "
                         f"(T, M, K) and noise (T, M) with the replay instance's T, M, d, got {features.shape}, "
                         f"{means.shape}, {noise.shape}")
    return features, means, noise


def replay_check(learner: str, protocol: str, overrides=None, *, targets=TARGETS, users=None) -> ReplayReport:
    """Run the replay contract (module docstring) for learner ``learner`` with protocol ``protocol``.

    Parameters
    ----------
    learner : str
        A name of :func:`fedbandit.learners.available_learners` with a protocol.
    protocol : str
        A name of :func:`fedbandit.protocols.available`.
    overrides : dict, optional
        Keyword arguments of the learner (e.g. ``local_updates=True``).
    targets : sequence of (position, agent)
        :data:`TARGETS` by default.
    users : tuple, optional
        Linear learners only: the instance's other users, ``(features (T, M, K, d), means (T, M, K),
        noise (T, M))`` with the :data:`LINEAR` sizes T, M, d (an environment's:
        :func:`fedbandit.audit.users_from_environment`); default the contract's synthetic users.

    Raises
    ------
    ValueError, TypeError
        If the learner does not accept the protocol (construction raises), or on an unknown name.
    """
    learner = check_choice("learner", learner, available_learners())
    protocol = check_choice("protocol", protocol, available())
    if overrides is not None and not isinstance(overrides, dict):
        raise TypeError(f"overrides must be a dict of the learner's keyword arguments or None, got {overrides!r:.80}")
    overrides = dict(overrides or {})
    targets = _check_targets(targets)
    family = _family(learner)
    if users is not None:
        users = _check_users(users)
        if family != "linear":
            raise ValueError(f"users: fixed users are for linear learners, and learner {learner!r} is of family "
                             f"{family!r}")
    if family is None or learner in NOT_REPLAYED:
        raise ValueError(f"learner {learner!r} has no replay instance"
                         + (f": {NOT_REPLAYED[learner]}" if learner in NOT_REPLAYED else ""))

    unknown = sorted(str(k) for k in overrides if k not in keyword_parameters(learner_class(learner)))
    if unknown:
        raise TypeError(f"overrides has keys {unknown} that learner {learner!r} does not take")
    base = _protocol(protocol)
    try:
        _build(learner, copy.deepcopy(base), overrides)
    except (ValueError, TypeError) as exc:
        raise type(exc)(f"learner {learner!r} does not accept protocol {protocol!r} with overrides {overrides}: "
                        f"{exc}") from exc
    relation = base.relation
    kind = base.kind
    problems = {}
    batch = LINEAR["B"] if learner != "super-agent" else 1
    for position, agent in targets:
        label = f"{position} user of agent {agent}"
        if family == "linear":
            t = _target_round(position, batch)
            d_data = _linear_data(relation, t, agent, world=1, users=users)
            d1_data = _linear_data(relation, t, agent, world=0, users=users)
            x0 = d_data[0][t, agent, 0]
            x1 = d1_data[0][t, agent, 0]
            y0 = float(np.clip(d_data[1][t, agent, 0] + d_data[2][t, agent], -1.0, 1.0))
            y1 = float(np.clip(d1_data[1][t, agent, 0] + d1_data[2][t, agent], -1.0, 1.0))
            target = _Target("linear", x0, y0, x1, y1)
            def make(data):
                return data
        elif family == "counter":
            C = COUNTER
            slot = 1 if position == "first" else C["T"] // 2
            means = np.linspace(0.2, 0.8, C["K"])[::-1]
            def make(value, slot=slot, agent=agent, means=means):
                return TargetRewardBandit(means, agent=agent, slot=slot, value=value, horizon=C["T"], n_agents=C["M"])
            d_data, d1_data = 1.0, 0.0
            target = _Target("counter", y=1.0, y1=0.0)
        else:
            F = FEDERATED
            if position != "first":
                continue  # one target client: every round carries its update
            d_data, d1_data = 0, 1
            def make(world):
                return federated_data(dict(F, seed=0), world)
            target = _Target("federated", client=0)
        logs = []
        for world_data, forced in ((d_data, None), (d1_data, True)):
            log = ReplayLog(forced=None if forced is None else [(c[0], o) for c, o in zip(logs[0].calls,
                                                                                          logs[0].outputs)])
            lrn = _build(learner, replaying(base, log), overrides)
            try:
                _run(lrn, family, make(world_data))
            except _Diverged:
                pass
            logs.append(log)
        problems[label] = compare_calls(logs[0], logs[1], target, kind)
        if not logs[0].calls:
            problems[label].append("no protocol call on D: the contract checked nothing")
    return ReplayReport(learner, protocol, overrides, relation, problems)


def replay_pairs() -> tuple[list[tuple[str, str]], dict]:
    """Every (learner, protocol) pair the learner accepts on the contract's instance, and the others with why.

    Returns ``(pairs, refused)``: ``refused[(learner, protocol)]`` is the construction's error
    message, or :data:`NOT_REPLAYED`'s reason for a learner without a protocol.  Building every
    pair takes about half a second and depends only on the registries, so the answer is
    memoized per registry content (a learner or protocol registered later gets a new one); each
    call returns fresh containers.
    """
    key = (tuple(available_learners()), tuple(available()))
    if key not in _REPLAY_PAIRS:
        _REPLAY_PAIRS[key] = _replay_pairs(*key)
    pairs, refused = _REPLAY_PAIRS[key]
    return list(pairs), dict(refused)


#: :func:`replay_pairs` per (learners, protocols) registered.
_REPLAY_PAIRS: dict = {}


def _replay_pairs(learners, protocols):
    pairs, refused = [], {}
    for lrn in learners:
        for name in protocols:
            if lrn in NOT_REPLAYED or _family(lrn) is None:
                refused[(lrn, name)] = NOT_REPLAYED.get(lrn, "no replay instance for this learner")
                continue
            try:
                _build(lrn, _protocol(name), {})
            except (ValueError, TypeError) as exc:
                refused[(lrn, name)] = str(exc).splitlines()[0][:200]
                continue
            pairs.append((lrn, name))
    return pairs, refused


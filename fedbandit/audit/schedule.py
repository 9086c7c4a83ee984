"""Auditing the synchronization schedule of DP20's FedUCB (the DP20 chapter's attack).

Zhou & Chowdhury (2023, Section 4, Example 4.1): the data-dependent rule of DP20 decides
*when* all silos synchronize from silo i's non-private local data, and every silo sees
when that happens.  Two inputs that differ in one user of silo i -- Alice or Tracy as
its first user -- can decide whether a synchronization happens at t = 1.

This module builds that experiment so that :func:`fedbandit.audit.epsilon.audit_epsilon` can run
it, and runs the same attack on the fixed-batch algorithm (Algorithm 1 of Zhou &
Chowdhury, :class:`fedbandit.learners.fixed_batch.FixedBatchFedLinUCB`):

* :class:`UsersEnv` -- an environment made of *given* users (contexts, mean rewards and
  reward noise of every (round, agent)): for privacy the data are fixed and only the
  mechanism's noise is random, so every trial of an audit replays the same users;
* :func:`alice_tracy_instance` -- the users of all silos, with silo i's first user
  either Alice or Tracy; a dataset of the audit is *silo i's sequence of users*, so the
  two inputs are neighbours under ``"replace_one"``;
* :class:`DP20ScheduleMechanism` (:func:`dp20_schedule_mechanism`), :class:`FixedBatchScheduleMechanism` -- vectorized
  mechanisms ``(dataset, rng, n) -> {"sync": (n, T), "actions": (n, T)}``: what an
  observing silo j sees (the rounds at which synchronizations happen) and silo j's own
  actions (for the Fed-DP argument: silo j's actions must not reveal silo i's user);
  :class:`RecordingProtocol` measures the fixed-batch learner's schedule (a statistics
  protocol that records the round of every synchronization);
* :class:`SyncAt`, :class:`FirstSync`, :class:`ActionIs` -- attack statistics, and
  :func:`select_action_attack`, which picks the arm of an :class:`ActionIs` attack on
  trials that the audit then does not count.

Reconstruction [derived]: Example 4.1's concrete users are not in the book's sources.
Here users' arms have features of norm at most ``r_typical`` (0.5), Alice's arms have
norm in [0.9, 1] (an unusual user; DP20 allows any ‖x‖ ≤ L = 1) and Tracy is a typical
user.  At t = 1 the synchronized matrix is λ₀I, so the local log-det increase of an agent
is exactly log(1 + ‖x‖²/λ₀): a threshold D between log(1 + r_typical²/λ₀) and
log(1 + 0.81/λ₀) (:func:`alice_threshold`) synchronizes at t = 1 if and only if silo i's
first user is Alice.  D is public, as the rule is.
"""

from __future__ import annotations

import copy
import inspect
import math
from dataclasses import dataclass

import numpy as np

from fedbandit._validation import (
    MAX_STEPS,
    check_array,
    check_bool,
    check_callable,
    check_float_in_range,
    check_int_in_range,
    check_nonnegative_float,
    check_positive_float,
    check_positive_int,
    check_rng,
)
from fedbandit.audit.epsilon import epsilon_lower_bound
from fedbandit.envs.linear import as_seed_sequence
from fedbandit.envs.users import UsersEnv
from fedbandit.learners.dp20 import FedUCB
from fedbandit.learners.fixed_batch import FixedBatchFedLinUCB
from fedbandit.protocols.registry import create
from fedbandit.protocols.statistics import StatisticsProtocol

__all__ = [
    "AliceTracyInstance",
    "alice_tracy_instance",
    "alice_threshold",
    "DP20ScheduleMechanism",
    "dp20_schedule_mechanism",
    "FixedBatchScheduleMechanism",
    "RecordingProtocol",
    "SyncAt",
    "FirstSync",
    "ActionIs",
    "select_action_attack",
]


def _check_learner_kwargs(learner_kwargs, cls, set_here=("protocol", "n_agents", "dim", "horizon")):
    """Refuse keys of ``learner_kwargs`` that ``cls`` does not accept (or that the mechanism sets)."""
    if not learner_kwargs:
        return
    accepted = set(inspect.signature(cls).parameters) - set(set_here)
    bad = sorted(str(k) for k in learner_kwargs if k not in accepted)
    if bad:
        raise TypeError(f"learner_kwargs has keys {bad} that {cls.__name__} does not accept here; it accepts "
                        f"{sorted(accepted)}")


def _users(rng, n, M, K, d, r_low, r_high):
    u = rng.standard_normal((n, M, K, d))
    u /= np.linalg.norm(u, axis=-1, keepdims=True)
    return u * rng.uniform(r_low, r_high, size=(n, M, K, 1))


@dataclass
class AliceTracyInstance:
    """All silos' users for Example 4.1, with silo ``silo``'s first user replaceable.

    A *dataset* (what the audit compares) is silo ``silo``'s sequence of T users, one row
    per user: the K·d arm features, the K mean rewards and the reward noise.
    """

    features: np.ndarray  # (T, M, K, d), silo i's first user = Tracy
    means: np.ndarray  # (T, M, K)
    noise: np.ndarray  # (T, M)
    theta: np.ndarray
    alice: np.ndarray  # one user row
    tracy: np.ndarray
    silo: int
    observer: int
    r_typical: float
    r_alice: tuple

    @property
    def horizon(self) -> int:
        return self.features.shape[0]

    def user_row(self, feats, means, noise) -> np.ndarray:
        return np.concatenate([np.ravel(feats), np.ravel(means), [float(noise)]])

    def dataset(self, first_user: str) -> np.ndarray:
        """Silo i's users (T, K·d + K + 1), its first user ``"alice"`` or ``"tracy"``."""
        if first_user not in ("alice", "tracy"):
            raise ValueError(f"first_user must be 'alice' or 'tracy', got {first_user!r}")
        i = self.silo
        rows = np.stack(
            [self.user_row(self.features[t, i], self.means[t, i], self.noise[t, i]) for t in range(self.horizon)]
        )
        rows[0] = self.alice if first_user == "alice" else self.tracy
        return rows

    def full_data(self, dataset):
        """(features, means, noise) of all silos, with silo i's users from ``dataset``."""
        T, M, K, d = self.features.shape
        dataset = check_array("dataset", dataset, shape=(T, K * d + K + 1))
        feats, means, noise = self.features.copy(), self.means.copy(), self.noise.copy()
        i = self.silo
        feats[:, i] = dataset[:, : K * d].reshape(T, K, d)
        means[:, i] = dataset[:, K * d : K * d + K]
        noise[:, i] = dataset[:, -1]
        return feats, means, noise


def alice_tracy_instance(
    n_agents,
    n_arms,
    dim,
    horizon,
    *,
    r_typical=0.5,
    r_alice=(0.9, 1.0),
    noise_std=0.5,
    silo=0,
    observer=1,
    close_call=True,
    seed=0,
) -> AliceTracyInstance:
    """Users of Example 4.1 (Zhou & Chowdhury 2023) [derived construction, see the module notes].

    Every user's K arms are uniform directions with norms uniform in
    [r_typical/2, r_typical]; Alice's arms have norms uniform in ``r_alice``; Tracy is a
    fresh typical user.  θ is a uniform unit vector; mean reward ⟨θ, x⟩; reward noise
    N(0, noise_std²), drawn once (it is part of the user's data).

    With ``close_call=True`` silo j's second user (round 2) has two arms of norm
    r_typical and r_typical·(1 − 10⁻⁶): a user for whom silo j's recommendation is a close
    call.  Under DP20's large regularizer LinUCB's early choice is driven by ‖x‖_{V⁻¹}, so
    whether noisy synchronized statistics arrived before round 2 can then change silo j's
    action -- the Fed-DP side of the example.
    """
    M = check_positive_int("n_agents", n_agents)
    if M < 2:
        raise ValueError(f"n_agents must be >= 2 (a silo i and an observing silo j), got {n_agents!r}")
    K = check_positive_int("n_arms", n_arms)
    d = check_positive_int("dim", dim)
    T = check_positive_int("horizon", horizon)
    if T * M * K * d > MAX_STEPS:
        raise ValueError(f"horizon·n_agents·n_arms·dim = {T * M * K * d} features exceed 10^9 (horizon={T}, "
                         f"n_agents={M}, n_arms={K}, dim={d})")
    r_typical = check_float_in_range("r_typical", r_typical, 0.0, 1.0, low_inclusive=False)
    if isinstance(r_alice, (str, bytes)) or not hasattr(r_alice, "__len__") or len(r_alice) != 2:
        raise TypeError(f"r_alice must be a pair (low, high) of norms, got {r_alice!r:.80}")
    lo, hi = (check_float_in_range("r_alice", v, 0.0, 1.0, low_inclusive=False) for v in r_alice)
    close_call = check_bool("close_call", close_call)
    if not (r_typical < lo <= hi):
        raise ValueError(f"r_alice must be an interval above r_typical={r_typical}, got {r_alice!r}")
    noise_std = check_nonnegative_float("noise_std", noise_std)
    silo = check_int_in_range("silo", silo, 0, M - 1)
    observer = check_int_in_range("observer", observer, 0, M - 1)
    if silo == observer:
        raise ValueError("observer must differ from silo")
    rng = np.random.default_rng(as_seed_sequence(seed))
    theta = rng.standard_normal(d)
    theta /= np.linalg.norm(theta)
    feats = _users(rng, T, M, K, d, r_typical / 2, r_typical)
    noise = noise_std * rng.standard_normal((T, M))
    if close_call and T >= 2:
        x = feats[1, observer]
        top = np.argsort(np.linalg.norm(x, axis=-1))[-2:]
        x[top] /= np.linalg.norm(x[top], axis=-1, keepdims=True)
        x[top[1]] *= r_typical
        x[top[0]] *= r_typical * (1 - 1e-6)
    alice_f = _users(rng, 1, 1, K, d, lo, hi)[0, 0]
    alice_noise = noise_std * rng.standard_normal()
    means = feats @ theta
    inst = AliceTracyInstance(feats, means, noise, theta, None, None, silo, observer, r_typical, (lo, hi))
    inst.tracy = inst.user_row(feats[0, silo], means[0, silo], noise[0, silo])
    inst.alice = inst.user_row(alice_f, alice_f @ theta, alice_noise)
    return inst


def alice_threshold(lam0, r_typical=0.5, r_alice_min=0.9) -> float:
    """D with log(1 + r_typical²/λ₀) < D < log(1 + r_alice_min²/λ₀): the t = 1 sync is Alice's.

    The geometric middle of the two log-det increases [derived].
    """
    lam0 = check_positive_float("lam0", lam0)
    r_typical = check_float_in_range("r_typical", r_typical, 0.0, 1.0, low_inclusive=False)
    r_alice_min = check_float_in_range("r_alice_min", r_alice_min, 0.0, 1.0, low_inclusive=False)
    a = math.log1p(r_typical**2 / lam0)
    b = math.log1p(r_alice_min**2 / lam0)
    if not a < b:
        raise ValueError(f"r_alice_min={r_alice_min} must exceed r_typical={r_typical}")
    return math.sqrt(a * b)


class DP20ScheduleMechanism:
    """DP20's FedUCB on an :class:`AliceTracyInstance`, as an audit mechanism.

    ``mechanism(dataset, rng, n)`` replays the users ``n`` times (runs side by side, only
    the privacy noise differs) and returns what silo ``observer`` sees:
    ``{"sync": (n, T) bool, "actions": (n, T) int}``.  Every call runs a fresh copy of the
    configured learner, so the mechanism carries no state from one call to the next.

    Parameters
    ----------
    instance : AliceTracyInstance
    protocol : StatisticsProtocol
        FedUCB's privacy protocol, e.g. ``fedbandit.protocols.create("dp20", epsilon=1.0,
        delta=1e-5, noise="corrected")`` (DP20 as written) or ``create("non-private")``.
    threshold : float or "alice", default "alice"
        D of the adaptive rule; "alice" is :func:`alice_threshold` at the learner's λ₀ and
        the instance's norms, which synchronizes at t = 1 exactly when silo i's first user
        is Alice.
    learner_kwargs : dict, optional
        Further keyword arguments of :class:`fedbandit.learners.dp20.FedUCB` (``n_agents``,
        ``dim`` and ``horizon`` are taken from the instance).
    """

    def __init__(self, instance: AliceTracyInstance, protocol, threshold="alice", learner_kwargs=None):
        if not isinstance(instance, AliceTracyInstance):
            raise TypeError(f"instance must be an AliceTracyInstance, got {type(instance).__name__}")
        if learner_kwargs is not None and not isinstance(learner_kwargs, dict):
            raise TypeError(f"learner_kwargs must be a dict or None, got {type(learner_kwargs).__name__}")
        _check_learner_kwargs(learner_kwargs, FedUCB)
        self.instance = instance
        T, M, K, d = instance.features.shape
        kw = dict(learner_kwargs or {})
        if "threshold" in kw:
            raise ValueError("pass the threshold as threshold=, not inside learner_kwargs")
        # Build now so that bad settings fail here, before any trial.
        if isinstance(threshold, str):
            if threshold != "alice":
                raise ValueError(f"threshold must be a positive number or 'alice', got {threshold!r}")
            lam0 = FedUCB(protocol, n_agents=M, dim=d, horizon=T, threshold=1.0, **kw).lam0
            threshold = alice_threshold(lam0, instance.r_typical, instance.r_alice[0])
        self.learner_kwargs = kw
        self.learner = FedUCB(protocol, n_agents=M, dim=d, horizon=T, threshold=threshold, **kw)
        self.threshold = self.learner.threshold

    def __call__(self, dataset, rng, n):
        rng = check_rng("rng", rng)
        n = check_positive_int("n", n)
        feats, means, noise = self.instance.full_data(dataset)
        env = UsersEnv(feats, means, noise, n_runs=n)
        res = copy.deepcopy(self.learner).run(env, rng, record_arms=True)
        return {"sync": res.extras["sync"], "actions": res.extras["arms"][:, :, self.instance.observer]}


def dp20_schedule_mechanism(instance, epsilon=None, delta=None, *, private=True, noise="corrected", learner_kwargs=None):
    """:class:`DP20ScheduleMechanism` with DP20's privatizer (``private=True``) or none.

    ``private=True``: ``create("dp20", epsilon=, delta=, noise=)`` (``noise="corrected"``
    is DP20 as written); ``private=False``: ``create("non-private")`` (ε, δ unused).  The
    threshold is :func:`alice_threshold` at the learner's λ₀.
    """
    if check_bool("private", private):
        protocol = create("dp20", epsilon=epsilon, delta=delta, noise=noise)
    else:
        protocol = create("non-private")
    return DP20ScheduleMechanism(instance, protocol, learner_kwargs=learner_kwargs)


class _RoundTracker(UsersEnv):
    """A :class:`UsersEnv` yielding one round per block and remembering the current round."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, block_size=1, **kwargs)
        self.current_round = 0

    def iter_blocks(self, horizon):
        for block in super().iter_blocks(horizon):
            self.current_round = block.start + 1
            yield block


class RecordingProtocol(StatisticsProtocol):
    """A statistics protocol that records the round of every ``synchronize`` call.

    Built from the parts (R, S, A) of a protocol of :func:`fedbandit.protocols.create`, with
    the same target, relation and model, so it releases exactly what that protocol
    releases; ``tracker`` is an environment with a ``current_round`` attribute.  After a
    run, ``sync_rounds`` lists the rounds (1-based) at whose end it synchronized.
    """

    def __init__(self, base: StatisticsProtocol, tracker):
        if not isinstance(base, StatisticsProtocol):
            raise TypeError(f"base must be a StatisticsProtocol, got {type(base).__name__}")
        super().__init__(
            base.randomizer, base.intermediary, base.analyzer, name=base.name, epsilon=base.target_epsilon,
            delta=base.target_delta, relation=base.relation, model=base.model,
        )
        self.tracker = tracker
        self.sync_rounds = []

    def reset(self, *, n_runs, rng):
        self.sync_rounds = []
        return super().reset(n_runs=n_runs, rng=rng)

    def synchronize(self, bias, gram, *, users=None, runs=None):
        self.sync_rounds.append(self.tracker.current_round)
        return super().synchronize(bias, gram, users=users, runs=runs)


class FixedBatchScheduleMechanism:
    """The fixed-batch algorithm (Zhou & Chowdhury, Alg. 1) on the same instance and attack.

    Runs :class:`fedbandit.learners.fixed_batch.FixedBatchFedLinUCB` with the silo-level
    LDP protocol (``create("silo-ldp", epsilon=, delta=, calibration="paper")``, Thm. 6.1)
    and *measures* its schedule: the protocol is a :class:`RecordingProtocol`, which
    records the round of every call of ``synchronize``.

    Parameters
    ----------
    instance : AliceTracyInstance
    epsilon, delta : float
        Of the silo-level LDP protocol.
    batch_size : int
        B (must divide T).
    learner_kwargs : dict, optional
        Further keyword arguments of ``FixedBatchFedLinUCB``.
    """

    def __init__(self, instance: AliceTracyInstance, epsilon, delta, batch_size, learner_kwargs=None):
        if not isinstance(instance, AliceTracyInstance):
            raise TypeError(f"instance must be an AliceTracyInstance, got {type(instance).__name__}")
        if learner_kwargs is not None and not isinstance(learner_kwargs, dict):
            raise TypeError(f"learner_kwargs must be a dict or None, got {type(learner_kwargs).__name__}")

        _check_learner_kwargs(learner_kwargs, FixedBatchFedLinUCB,
                              ("protocol", "n_agents", "dim", "horizon", "batch_size"))
        self.instance = instance
        self.epsilon, self.delta, self.batch_size = epsilon, delta, batch_size
        self.learner_kwargs = dict(learner_kwargs or {})
        self._learner(None)  # fail early on bad settings

    def _learner(self, tracker):
        T, M, K, d = self.instance.features.shape
        protocol = RecordingProtocol(create("silo-ldp", epsilon=self.epsilon, delta=self.delta, calibration="paper"),
                                     tracker)
        learner = FixedBatchFedLinUCB(
            protocol, horizon=T, batch_size=self.batch_size, n_agents=M, dim=d, **self.learner_kwargs
        )
        return learner, protocol

    def __call__(self, dataset, rng, n):
        rng = check_rng("rng", rng)
        n = check_positive_int("n", n)
        T = self.instance.horizon
        feats, means, noise = self.instance.full_data(dataset)
        env = _RoundTracker(feats, means, noise, n_runs=n)
        learner, protocol = self._learner(env)
        res = learner.run(env, rng, record_arms=True)
        sync = np.zeros((n, T), dtype=bool)
        # Every run of the fixed-batch learner synchronizes at the same calls.
        sync[:, np.asarray(protocol.sync_rounds, dtype=int) - 1] = True
        return {"sync": sync, "actions": res.extras["arms"][:, :, self.instance.observer]}


class SyncAt:
    """Attack statistic: 1 if a synchronization happened at the end of round ``t``."""

    def __init__(self, t):
        self.t = check_positive_int("t", t)

    def __call__(self, batch):
        return batch["sync"][:, self.t - 1].astype(float)


class FirstSync:
    """Attack statistic: minus the round of the first synchronization (T + 1 if none).

    Minus, so that "larger means dataset 1" for an input that synchronizes earlier.
    """

    def __call__(self, batch):
        sync = batch["sync"]
        T = sync.shape[1]
        return -np.where(sync.any(axis=1), sync.argmax(axis=1) + 1, T + 1).astype(float)


class ActionIs:
    """Attack statistic: 1 if silo j's action at round ``t`` is ``arm``."""

    def __init__(self, t, arm):
        self.t = check_positive_int("t", t)
        self.arm = check_int_in_range("arm", arm, 0, None)

    def __call__(self, batch):
        return (batch["actions"][:, self.t - 1] == self.arm).astype(float)


def select_action_attack(mechanism, dataset0, dataset1, t, n_select, rng, *, delta=0.0, confidence=0.95):
    """Choose the arm of an :class:`ActionIs` (t, arm) attack on ``n_select`` selection trials.

    Runs the (vectorized) mechanism ``n_select`` times on each dataset and returns the
    attack whose Clopper–Pearson ε bound (:func:`fedbandit.audit.epsilon.epsilon_lower_bound`,
    both directions) is largest on these trials.  The audit must then count *fresh*
    trials (choosing the attack on the counted trials would bias the bound upward).

    Returns
    -------
    (ActionIs, dict)
        The attack and the selection counts ``{"arm", "k0", "k1", "n", "eps_select"}``.
    """
    mechanism = check_callable("mechanism", mechanism)
    rng = check_rng("rng", rng)
    horizon = getattr(getattr(mechanism, "instance", None), "horizon", None)
    t = check_int_in_range("t", t, 1, horizon)
    n_select = check_positive_int("n_select", n_select, max_value=MAX_STEPS, reason="n_select runs are simulated")
    out0 = np.asarray(mechanism(dataset0, rng, n_select)["actions"])
    if out0.ndim != 2 or t > out0.shape[1]:
        raise ValueError(f"t must lie in [1, {out0.shape[-1]}] (the rounds of the mechanism's actions), got {t}")
    a0 = out0[:, t - 1]
    a1 = np.asarray(mechanism(dataset1, rng, n_select)["actions"])[:, t - 1]
    n_arms = int(max(a0.max(), a1.max())) + 1
    c0 = np.bincount(a0, minlength=n_arms)
    c1 = np.bincount(a1, minlength=n_arms)
    scores = [
        epsilon_lower_bound(int(c1[a]), n_select, int(c0[a]), n_select, delta=delta, confidence=confidence)[0]
        for a in range(n_arms)
    ]
    arm = int(np.argmax(scores))
    info = {"arm": arm, "k0": int(c0[arm]), "k1": int(c1[arm]), "n": n_select, "eps_select": float(scores[arm])}
    return ActionIs(t, arm), info

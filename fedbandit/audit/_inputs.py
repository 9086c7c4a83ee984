"""The fixed inputs of the end-to-end audits and of the replay contract.

Both draw the learners' data from here (:mod:`fedbandit.audit.end_to_end`, whose module
docstring describes the neighbouring inputs, and :mod:`fedbandit.audit.replay`), so neither
imports the other's module for it; :mod:`fedbandit.audit.end_to_end` exports
:class:`TargetRewardBandit`, :func:`linear_users` and :func:`users_from_environment`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fedbandit._validation import (
    MAX_STEPS,
    check_choice,
    check_finite_float,
    check_int_in_range,
    check_nonnegative_float,
    check_nonnegative_int,
    check_positive_float,
    check_positive_int,
)
from fedbandit.envs.multi_armed import BernoulliBandit

__all__ = ["TargetRewardBandit", "linear_users", "users_from_environment", "federated_data"]


#: Largest number of cells (rounds × agents × arms × ...) of the fixed inputs drawn for an audit.
_MAX_CELLS = 10**8


@dataclass(frozen=True)
class TargetRewardBandit(BernoulliBandit):
    """A Bernoulli bandit with fixed rewards; agent ``agent``'s reward at slot ``slot`` is ``value``.

    The reward of agent m pulling arm a at slot t is ``table[t − 1, m, a]``, Bernoulli(μ_a)
    draws made once from ``seed`` (the same in every run: fixed data, only the protocols'
    noise is random), except the target: with ``pull = 0`` agent ``agent``'s reward at slot
    ``slot``; with ``pull = n > 0`` its n-th reward of arm ``arm`` (counted per run: the n-th
    item of that (agent, arm) counter stream, whatever slot it comes at -- one reward of the
    stream changed, the counters' neighbouring relation, the other items chosen adaptively
    and alike in both inputs).  The learners draw the rewards of a slot with one
    call (:meth:`fedbandit.envs.multi_armed.RewardStream.rewards`), in order, so the slot is
    counted by calls; :attr:`calls` lets a caller check that ``T`` calls were made.  Build
    a fresh one for every run.
    """

    agent: int = 0
    slot: int = 1
    value: float = 1.0
    horizon: int = 1
    n_agents: int = 1
    seed: int = 0
    arm: int = 0
    pull: int = 0

    def __post_init__(self):
        super().__post_init__()
        horizon = check_positive_int("horizon", self.horizon, max_value=MAX_STEPS)
        n_agents = check_positive_int("n_agents", self.n_agents, max_value=MAX_STEPS)
        if horizon * n_agents * self.n_arms > _MAX_CELLS:
            raise ValueError(f"horizon * n_agents * n_arms = {horizon * n_agents * self.n_arms} exceeds {_MAX_CELLS:.0e} "
                             f"(a table of rewards of that size is drawn), got horizon={horizon}, n_agents={n_agents}")
        check_int_in_range("agent", self.agent, 0, n_agents - 1)
        check_nonnegative_int("slot", self.slot)
        check_finite_float("value", self.value)
        check_nonnegative_int("seed", self.seed)
        check_int_in_range("arm", self.arm, 0, self.n_arms - 1)
        check_nonnegative_int("pull", self.pull)
        rng = np.random.default_rng(self.seed)
        table = (rng.random((self.horizon, self.n_agents, self.n_arms)) < self.means).astype(float)
        object.__setattr__(self, "table", table)
        object.__setattr__(self, "calls", 0)
        object.__setattr__(self, "pulls", None)

    def _rewards(self, u, arms):
        object.__setattr__(self, "calls", self.calls + 1)
        arms = np.asarray(arms)
        tab = self.table[min(self.calls, self.horizon) - 1]  # (M, K)
        out = tab[np.arange(arms.shape[-1]), arms]
        if self.pull:
            sel = arms[..., self.agent] == self.arm
            pulls = (np.zeros(sel.shape, dtype=np.int64) if self.pulls is None else self.pulls) + sel
            object.__setattr__(self, "pulls", pulls)
            hit = sel & (pulls == self.pull)
            out[..., self.agent] = np.where(hit, self.value, out[..., self.agent])
        elif self.calls == self.slot:
            out[..., self.agent] = self.value
        return out


def users_from_environment(env, T: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first ``T`` rounds' users of a linear environment as fixed data: (features (T, M, K, d), means
    (T, M, K), noise (T, M)) of its first run, for :func:`linear_users` (``users=``), the replay contract
    (:func:`fedbandit.audit.replay_check`) and the audits (an :class:`EndToEndSpec` whose setting names an
    ``environment``).  Environments whose number of arms varies (masked arms) are refused."""
    T = check_positive_int("T", T, max_value=_MAX_CELLS)
    if not callable(getattr(env, "iter_blocks", None)):
        raise TypeError(f"env must be a linear environment (with iter_blocks(horizon)), got {type(env).__name__}")
    blocks = list(env.iter_blocks(T))
    if any(b.mask is not None for b in blocks):
        raise ValueError("env: its number of arms varies (masked arms); fixed users need K arms every round")
    features = np.concatenate([b.features[:, 0] for b in blocks])
    means = np.concatenate([b.means[:, 0] for b in blocks])
    noise = np.concatenate([b.noise[:, 0] for b in blocks])
    return features, means, noise


def linear_users(M, K, d, T, *, relation="add-remove", world=1, seed=0, feature_bound=1.0, reward_bound=1.0,
                 noise_std=0.5, users=None):
    """Fixed users (features (T, M, K, d), means (T, M, K), noise (T, M)) with the target in ``world``.

    The other users: K arms with uniform directions of norm L (normalized features, as in
    Zhou & Chowdhury's synthetic instance), θ a uniform unit vector scaled by 0.5, mean
    reward ⟨θ, x⟩, reward noise N(0, noise_std²) drawn once -- or ``users``, the
    ``(features, means, noise)`` of an environment (:func:`users_from_environment`; copied).
    The target (agent 0, round 1) is described in the module docstring.
    """
    M = check_positive_int("M", M, max_value=_MAX_CELLS)
    K = check_positive_int("K", K, max_value=_MAX_CELLS)
    d = check_positive_int("d", d, max_value=_MAX_CELLS)
    T = check_positive_int("T", T, max_value=_MAX_CELLS)
    if T * M * K * d > _MAX_CELLS:
        raise ValueError(f"T * M * K * d = {T * M * K * d} exceeds {_MAX_CELLS:.0e} (features of that size are drawn), "
                         f"got T={T}, M={M}, K={K}, d={d}")
    relation = check_choice("relation", relation, ("add-remove", "replace"))
    world = check_choice("world", world, (0, 1))
    seed = check_nonnegative_int("seed", seed)
    feature_bound = check_positive_float("feature_bound", feature_bound)
    reward_bound = check_positive_float("reward_bound", reward_bound)
    noise_std = check_nonnegative_float("noise_std", noise_std)
    if users is None:
        rng = np.random.default_rng(seed)
        theta = rng.standard_normal(d)
        theta *= 0.5 / np.linalg.norm(theta)
        f = rng.standard_normal((T, M, K, d))
        f /= np.linalg.norm(f, axis=-1, keepdims=True)
        f *= feature_bound
        means = f @ theta
        noise = noise_std * rng.standard_normal((T, M))
    else:
        if not isinstance(users, tuple) or len(users) != 3:
            raise TypeError(f"users must be a tuple (features, means, noise), got {type(users).__name__}")
        f, means, noise = (np.array(a, dtype=float) for a in users)
        if f.shape != (T, M, K, d) or means.shape != (T, M, K) or noise.shape != (T, M):
            raise ValueError(f"users must have shapes features {(T, M, K, d)}, means {(T, M, K)}, noise {(T, M)} "
                             f"(T={T}, M={M}, K={K}, d={d}), got {f.shape}, {means.shape}, {noise.shape}")
    L, Y = feature_bound, reward_bound
    if world == 1:
        x = np.zeros(d)
        x[0] = L
        f[0, 0] = x
        means[0, 0] = Y
        noise[0, 0] = Y  # y = clip(2Y) = Y whatever the learner plays
    elif relation == "add-remove":
        f[0, 0] = 0.0
        means[0, 0] = 0.0
        noise[0, 0] = 0.0
    else:
        x = np.zeros(d)
        if d == 1:
            x[0] = L
        else:
            x[0], x[1] = 0.5 * L, math.sqrt(3.0) / 2.0 * L
        f[0, 0] = x
        means[0, 0] = -Y
        noise[0, 0] = -Y
    return f, means, noise


def federated_data(st, world):
    """Client 0's labels replaced by the next class in world 1 (the federated family's fixed inputs)."""
    rng = np.random.default_rng(st.get("seed", 0))
    n, L, f, C = st["n_clients"], st.get("n_local", 6), st["n_features"], st["n_classes"]
    centers = rng.standard_normal((C, f))
    y = rng.integers(0, C, (n, L))
    X = centers[y] * 0.5 + 0.5 * rng.standard_normal((n, L, f))
    if world == 1:
        y = y.copy()
        y[0] = (y[0] + 1) % C
    yt = rng.integers(0, C, 20)
    return {"X": X, "y": y, "mask": np.ones((n, L), dtype=bool), "X_test": centers[yt] * 0.5, "y_test": yt,
            "n_classes": C}

"""K-armed stochastic bandit environments with common random numbers.

The setting of Li, Song & Fragouli ({cite}`li2022federated`): ``M`` agents face the same
``K`` arms; arm ``j`` pays i.i.d. rewards of mean ``mu_j`` to every agent (the means are
shared across agents).  The master-worker algorithm assumes rewards in [0, 1] (Bernoulli
here); the decentralized one Gaussian rewards ``N(mu_j, sigma^2)`` with known ``sigma``.

Common random numbers
---------------------
:class:`RewardStream` gives every algorithm the *same* random draws for a seed: the reward
that agent ``m`` of run ``r`` receives at slot ``t`` is a fixed function of one uniform
(Bernoulli) or standard normal (Gaussian) variate ``U[t, r, m]`` and of the arm pulled,

    Bernoulli: ``1{U < mu_a}``,        Gaussian: ``mu_a + sigma U``.

The table ``U`` is counter-based: the block of slots ``[c B, (c + 1) B)`` is drawn from
``SeedSequence(key, spawn_key=(c,))``, so any slot can be produced in any order, by any
algorithm, and always equals the same value.  One variate per (slot, run, agent) suffices
because an agent observes only the arm it pulls: the coupling across arms within a slot is
never observed, and the history of every policy has exactly the law of independent arms.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedbandit._validation import (
    check_array,
    check_choice,
    check_int_in_range,
    check_positive_float,
    check_positive_int,
    check_rng,
)

__all__ = ["BernoulliBandit", "GaussianBandit", "CategoricalBandit", "KArmedBandit", "RewardStream", "make_env"]


@dataclass(frozen=True)
class _KArmedBandit:
    """K arms with fixed mean rewards; the subclasses set the reward law.

    Attributes
    ----------
    means : ndarray of shape (K,)
        The arms' mean rewards (K ≥ 2), stored read-only.
    """

    means: np.ndarray

    def __post_init__(self):
        mu = check_array("means", self.means, ndim=1)
        if mu.size < 2:
            raise ValueError(f"means must hold at least 2 arms, got {mu.size}")
        mu = mu.copy()
        mu.setflags(write=False)
        object.__setattr__(self, "means", mu)

    @property
    def n_arms(self) -> int:
        """Number of arms ``K``."""
        return int(self.means.size)

    @property
    def best_arm(self) -> int:
        """Index of the arm of largest mean (the first one on ties)."""
        return int(np.argmax(self.means))

    @property
    def gaps(self) -> np.ndarray:
        """Suboptimality gaps ``Delta_j = mu_1 - mu_j`` (0 for the best arm)."""
        return self.means.max() - self.means

    @property
    def min_gap(self) -> float:
        """Smallest positive gap ``Delta_min``."""
        g = self.gaps
        pos = g[g > 0]
        return float(pos.min()) if pos.size else 0.0

    @property
    def reward_values(self) -> np.ndarray | None:
        """Every value a reward can take (a finite set, as floats), or None where they are not finitely many."""
        return None

    def stream(self, n_runs: int, n_agents: int, rng, *, block: int = 1024) -> RewardStream:
        """A :class:`RewardStream` of this environment for ``n_runs x n_agents`` agents."""
        return RewardStream(self, n_runs, n_agents, rng, block=block)


@dataclass(frozen=True)
class BernoulliBandit(_KArmedBandit):
    """K arms with Bernoulli(``mu_j``) rewards, ``mu_j`` in [0, 1].

    Rewards lie in [0, 1] (sensitivity 1 for the hybrid mechanism) and are sub-Gaussian
    with variance proxy ``sigma^2 = 1/4``.

    Attributes
    ----------
    means : ndarray of shape (K,)
        The arms' success probabilities μ_j in [0, 1].
    """

    kind = "bernoulli"

    def __post_init__(self):
        super().__post_init__()
        if np.any((self.means < 0) | (self.means > 1)):
            raise ValueError(f"means of a Bernoulli bandit must lie in [0, 1], got {self.means}")

    @property
    def sigma(self) -> float:
        """Sub-Gaussian scale of the rewards (1/2)."""
        return 0.5

    @property
    def reward_values(self) -> np.ndarray:
        """0.0 and 1.0."""
        return np.array([0.0, 1.0])

    def _rewards(self, u: np.ndarray, arms: np.ndarray) -> np.ndarray:
        return (u < self.means.take(arms)).astype(float)

    _variate = "uniform"


@dataclass(frozen=True)
class GaussianBandit(_KArmedBandit):
    """K arms with ``N(mu_j, sigma^2)`` rewards, ``sigma`` known and common to all arms.

    Attributes
    ----------
    means : ndarray of shape (K,)
        The arms' mean rewards μ_j.
    sigma : float, default 0.1
        The rewards' standard deviation σ.
    """

    sigma: float = 0.1
    kind = "gaussian"

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "sigma", check_positive_float("sigma", self.sigma))

    def _rewards(self, z: np.ndarray, arms: np.ndarray) -> np.ndarray:
        return self.means.take(arms) + self.sigma * z

    _variate = "normal"


@dataclass(frozen=True)
class CategoricalBandit(_KArmedBandit):
    """K arms whose rewards take finitely many values: arm ``j`` pays ``values[v]`` with
    probability ``probs[j, v]`` (a real instance's empirical reward distributions, e.g.
    :func:`fedbandit.envs.recommendation.ranker_bandit`).

    Build it with :meth:`from_distributions`; ``means`` is ``probs @ values``.  The reward
    of variate ``U`` (uniform) is the inverse CDF of the pulled arm's distribution at ``U``.
    Rewards lie in ``[min(values), max(values)]``; ``sigma`` is half that width (the
    sub-Gaussian scale of a bounded reward, as for Bernoulli rewards).

    Attributes
    ----------
    means : ndarray of shape (K,)
        The arms' mean rewards (``probs @ values``).
    values : ndarray of shape (V,)
        The reward values.
    probs : ndarray of shape (K, V)
        Each arm's probabilities of the values.
    """

    values: np.ndarray = None
    probs: np.ndarray = None
    kind = "categorical"
    _variate = "uniform"

    def __post_init__(self):
        super().__post_init__()
        values = check_array("values", self.values, ndim=1)
        probs = check_array("probs", self.probs, ndim=2)
        if probs.shape != (self.means.size, values.size):
            raise ValueError(f"probs must have shape (n_arms, n_values) = ({self.means.size}, {values.size}), "
                             f"got {probs.shape}")
        if np.any(probs < 0) or not np.allclose(probs.sum(axis=1), 1.0, atol=1e-9):
            raise ValueError("every row of probs must be a probability vector (non-negative, summing to 1)")
        if not np.allclose(probs @ values, self.means, atol=1e-12):
            raise ValueError("means must equal probs @ values (use CategoricalBandit.from_distributions)")
        cum = np.cumsum(probs, axis=1)
        cum[:, -1] = np.inf  # U < 1 always lands on a value
        # The thresholds by value, each a contiguous (K,) array: the inverse CDF below compares
        # U with one gathered threshold per value (a reduction over a short last axis is slow).
        thresholds = np.ascontiguousarray(cum[:, :-1].T)
        object.__setattr__(self, "_index_dtype", np.min_scalar_type(values.size))
        for name, arr in (("values", values.copy()), ("probs", probs.copy()), ("_cum", cum),
                          ("_thresholds", thresholds)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @classmethod
    def from_distributions(cls, values, probs) -> "CategoricalBandit":
        """Arms with reward values ``values`` (V,) and probabilities ``probs`` (K, V)."""
        values = check_array("values", values, ndim=1)
        probs = check_array("probs", probs, ndim=2)
        return cls(probs @ values, values=values, probs=probs)

    @property
    def sigma(self) -> float:
        """Sub-Gaussian scale of the bounded rewards: half the width of their range."""
        return 0.5 * float(self.values.max() - self.values.min())

    @property
    def reward_values(self) -> np.ndarray:
        """The reward values (``values``)."""
        return self.values

    @property
    def reward_std(self) -> np.ndarray:
        """Standard deviation of each arm's reward distribution."""
        second = self.probs @ self.values**2
        return np.sqrt(np.maximum(second - self.means**2, 0.0))

    def _rewards(self, u: np.ndarray, arms: np.ndarray) -> np.ndarray:
        # The index of the value is the number of the arm's CDF thresholds at or below U
        # (the last threshold, 1, is never reached: U < 1).
        if not len(self._thresholds):  # one value: every reward is it
            return np.full(np.broadcast(u, arms).shape, self.values[0])
        if len(self._thresholds) < 256:
            # All thresholds of the pulled arms in one gather, (V - 1, ...) one row per threshold, one
            # comparison, and the rows' 0/1 bytes added (uint8: at most 255 thresholds): the same
            # count as the loop below, in a third of its numpy calls.
            ge = np.greater_equal(u, self._thresholds.take(arms, axis=1)).view(np.uint8)
            idx = ge[0].copy() if len(ge) == 1 else np.add(ge[0], ge[1])
            for row in ge[2:]:
                idx += row
            return self.values.take(idx)
        first, *rest = self._thresholds
        idx = (u >= first.take(arms)).astype(self._index_dtype)
        for thr in rest:
            idx += u >= thr.take(arms)
        return self.values.take(idx)


#: The K-armed environments the consensus learners accept.
KArmedBandit = _KArmedBandit


def make_env(kind: str, means, *, sigma: float = 0.1):
    """Build ``BernoulliBandit(means)`` (``kind="bernoulli"``) or ``GaussianBandit(means, sigma)``.

    Parameters
    ----------
    kind : {"bernoulli", "gaussian"}
        The reward law.
    means : array_like
        The arms' means.
    sigma : float, default 0.1
        The Gaussian rewards' standard deviation.

    Returns
    -------
    BernoulliBandit or GaussianBandit
    """
    check_choice("kind", kind, ("bernoulli", "gaussian"))
    means = check_array("means", means)
    if kind == "bernoulli":
        return BernoulliBandit(means)
    return GaussianBandit(means, sigma)


class RewardStream:
    """Counter-based reward table shared by all algorithms for one seed.

    Parameters
    ----------
    env : BernoulliBandit or GaussianBandit
        The environment.
    n_runs, n_agents : int
        Batch shape ``(R, M)`` of independent runs and agents.
    rng : numpy.random.Generator
        Consumed once (one 128-bit key) at construction; the table is a pure function of
        that key (and of ``run_keys``).
    block : int, default 1024
        Number of slots drawn at once (memory ``block * R * M`` floats).
    n_slots : int, optional
        The last slot that will be read (the horizon): a block is drawn only up to it (the
        same values as the whole block's first slots; reading a later slot raises IndexError).
    run_keys : array of int (n_runs,), optional
        If given, run ``r``'s variates are drawn from its own stream keyed by
        ``run_keys[r]``, so that two batches built from equal keys give equal rewards to
        runs of equal ``run_keys`` even when the batches differ in size (the learners use
        the run's replicate number within its (epsilon, rho) cell).

    Notes
    -----
    ``rewards(t, arms)`` returns the rewards of slot ``t`` (1-based) for the arms
    ``arms[r, m]``; ``reward(t, r, m, a)`` is the scalar version used by the loop
    references in ``tests/``.  Both read the same table.
    """

    def __init__(self, env, n_runs: int, n_agents: int, rng, *, block: int = 1024, run_keys=None,
                 n_slots: int | None = None):
        if not isinstance(env, _KArmedBandit):
            raise TypeError(f"env must be a K-armed bandit (Bernoulli, Gaussian, categorical), got {type(env).__name__}")
        self.env = env
        self.n_runs = check_positive_int("n_runs", n_runs)
        self.n_agents = check_positive_int("n_agents", n_agents)
        self.block = check_positive_int("block", block)
        self.n_slots = None if n_slots is None else check_positive_int("n_slots", n_slots)
        if run_keys is not None:
            run_keys = np.asarray(run_keys)
            if run_keys.shape != (self.n_runs,) or not np.issubdtype(run_keys.dtype, np.integer) or run_keys.min() < 0:
                raise ValueError(f"run_keys must be {self.n_runs} non-negative integers (one per run), got {run_keys!r}")
            run_keys = run_keys.astype(np.int64)
        self.run_keys = run_keys
        rng = check_rng("rng", rng)
        self.key = tuple(int(w) for w in rng.integers(0, 2**32, size=4, dtype=np.uint64))
        self._cached_block = -1
        self._table = None
        # With run keys, the table holds each distinct key once, (block, n_keys, M), and a slot's
        # (R, M) variates are gathered from it (run_of_key; None when every run has its own key
        # in order): a sweep repeats the replicate numbers in every (epsilon, rho) cell, and
        # copying the block to all runs at once cost more than a gather per slot.
        self._keys = self._run_of_key = None
        if run_keys is not None:
            self._keys, run_of_key = np.unique(run_keys, return_inverse=True)
            if not np.array_equal(run_of_key, np.arange(self.n_runs)):
                self._run_of_key = run_of_key.reshape(-1)

    def _draw(self, g, shape):
        return g.random(shape) if self.env._variate == "uniform" else g.standard_normal(shape)

    def _load(self, c: int) -> np.ndarray:
        # Block c's table: (block, R, M), or (block, n_keys, M) with run keys (see __init__).  With
        # n_slots, only its slots up to n_slots: the first rows of the whole block's draw, the same
        # floats (the Generator fills an array in order, and the rows are the slowest axis); a slot
        # past n_slots is then not in the table (IndexError), never a different value.
        if c != self._cached_block:
            rows = self.block if self.n_slots is None else max(1, min(self.block, self.n_slots - c * self.block))
            if self.run_keys is None:
                g = np.random.default_rng(np.random.SeedSequence(entropy=self.key, spawn_key=(c,)))
                self._table = self._draw(g, (rows, self.n_runs, self.n_agents))
            else:
                # Run r's variates depend on (key, run_keys[r], block) only: runs with equal keys
                # see equal rewards whatever the rest of the batch (common random numbers across
                # configurations of different sizes).  Each distinct key is drawn once.
                by_key = np.empty((self._keys.size, rows, self.n_agents))
                for i, k in enumerate(self._keys):
                    g = np.random.default_rng(np.random.SeedSequence(entropy=self.key, spawn_key=(c, int(k))))
                    by_key[i] = self._draw(g, (rows, self.n_agents))
                self._table = np.ascontiguousarray(by_key.transpose(1, 0, 2))
            self._cached_block = c
        return self._table

    def _slot(self, t: int) -> np.ndarray:
        """The (R, M) variates of slot ``t >= 1`` (no checks)."""
        c, off = divmod(t - 1, self.block)
        table = self._load(c)[off]
        return table if self._run_of_key is None else table.take(self._run_of_key, axis=0)

    def variates(self, t: int) -> np.ndarray:
        """The (R, M) table entries ``U[t]`` of slot ``t >= 1``."""
        t = check_int_in_range("t", t, 1, None)
        return self._slot(t)

    def rewards(self, t: int, arms) -> np.ndarray:
        """Rewards of slot ``t`` for the arms ``arms`` of shape (R, M)."""
        return self.env._rewards(self.variates(t), np.asarray(arms))

    def rewards_unchecked(self, t: int, arms: np.ndarray) -> np.ndarray:
        """:meth:`rewards` without argument checks: the learners' per-slot path (``t >= 1`` an
        int, ``arms`` an integer array of shape (R, M))."""
        return self.env._rewards(self._slot(t), arms)

    def reward(self, t: int, r: int, m: int, a: int) -> float:
        """Scalar reward of agent ``m`` of run ``r`` pulling arm ``a`` at slot ``t``."""
        u = self.variates(t)[r, m]
        return float(self.env._rewards(np.asarray(u), np.asarray(a)))

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

__all__ = ["BernoulliBandit", "GaussianBandit", "RewardStream", "make_env"]


@dataclass(frozen=True)
class _KArmedBandit:
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

    def stream(self, n_runs: int, n_agents: int, rng, *, block: int = 1024) -> RewardStream:
        """A :class:`RewardStream` of this environment for ``n_runs x n_agents`` agents."""
        return RewardStream(self, n_runs, n_agents, rng, block=block)


@dataclass(frozen=True)
class BernoulliBandit(_KArmedBandit):
    """K arms with Bernoulli(``mu_j``) rewards, ``mu_j`` in [0, 1].

    Rewards lie in [0, 1] (sensitivity 1 for the hybrid mechanism) and are sub-Gaussian
    with variance proxy ``sigma^2 = 1/4``.
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

    def _rewards(self, u: np.ndarray, arms: np.ndarray) -> np.ndarray:
        return (u < self.means[arms]).astype(float)

    _variate = "uniform"


@dataclass(frozen=True)
class GaussianBandit(_KArmedBandit):
    """K arms with ``N(mu_j, sigma^2)`` rewards, ``sigma`` known and common to all arms."""

    sigma: float = 0.1
    kind = "gaussian"

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "sigma", check_positive_float("sigma", self.sigma))

    def _rewards(self, z: np.ndarray, arms: np.ndarray) -> np.ndarray:
        return self.means[arms] + self.sigma * z

    _variate = "normal"


def make_env(kind: str, means, *, sigma: float = 0.1):
    """Build ``BernoulliBandit(means)`` (``kind="bernoulli"``) or ``GaussianBandit(means, sigma)``."""
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
        that key.
    block : int, default 1024
        Number of slots drawn at once (memory ``block * R * M`` floats).

    Notes
    -----
    ``rewards(t, arms)`` returns the rewards of slot ``t`` (1-based) for the arms
    ``arms[r, m]``; ``reward(t, r, m, a)`` is the scalar version used by the loop
    references in ``tests/``.  Both read the same table.
    """

    def __init__(self, env, n_runs: int, n_agents: int, rng, *, block: int = 1024):
        if not isinstance(env, _KArmedBandit):
            raise TypeError(f"env must be a BernoulliBandit or GaussianBandit, got {type(env).__name__}")
        self.env = env
        self.n_runs = check_positive_int("n_runs", n_runs)
        self.n_agents = check_positive_int("n_agents", n_agents)
        self.block = check_positive_int("block", block)
        rng = check_rng("rng", rng)
        self.key = tuple(int(w) for w in rng.integers(0, 2**32, size=4, dtype=np.uint64))
        self._cached_block = -1
        self._table = None

    def _load(self, c: int) -> np.ndarray:
        if c != self._cached_block:
            g = np.random.default_rng(np.random.SeedSequence(entropy=self.key, spawn_key=(c,)))
            shape = (self.block, self.n_runs, self.n_agents)
            if self.env._variate == "uniform":
                self._table = g.random(shape)
            else:
                self._table = g.standard_normal(shape)
            self._cached_block = c
        return self._table

    def variates(self, t: int) -> np.ndarray:
        """The (R, M) table entries ``U[t]`` of slot ``t >= 1``."""
        t = check_int_in_range("t", t, 1, None)
        c, off = divmod(t - 1, self.block)
        return self._load(c)[off]

    def rewards(self, t: int, arms) -> np.ndarray:
        """Rewards of slot ``t`` for the arms ``arms`` of shape (R, M)."""
        return self.env._rewards(self.variates(t), np.asarray(arms))

    def reward(self, t: int, r: int, m: int, a: int) -> float:
        """Scalar reward of agent ``m`` of run ``r`` pulling arm ``a`` at slot ``t``."""
        u = self.variates(t)[r, m]
        return float(self.env._rewards(np.asarray(u), np.asarray(a)))

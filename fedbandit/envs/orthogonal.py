"""Fixed orthogonal arms with one best arm: the gap family on which regret bounds are worst-case.

The regret bounds of the private LinUCB learners (Shariff & Sheffet 2018; Chowdhury &
Zhou 2022; Tenenbaum, Kaplan, Mansour & Stemmer 2023) are worst-case statements: regret
Õ(sqrt(n ρ_max)) holds for every instance, and it is attained on instances whose gap
matches the learner's confidence width at the horizon.  On an instance with a fixed gap
Δ a learner with width β/sqrt(N) pulls a worse arm about β²/Δ² times, so its regret is
about min(nΔ, β²/Δ), largest, about β sqrt(n), at Δ ≈ β/sqrt(n) [derived, the classical
argument].  :class:`OrthogonalArmsEnv` is that family: K = d fixed arms e_1, ..., e_d
(unit vectors, so the arms do not share information), θ* = (μ, μ − Δ, ..., μ − Δ), and
every run r has its own gap Δ_r, so one vectorized run of a learner measures the regret
at a whole grid of gaps; the worst case over the grid is a lower estimate of the
worst-case regret the bounds speak of.

The arms are the same in every round: each block's features broadcast one context over
its rounds (stride 0), which :class:`fedbandit.learners.ConcurrentShuffleLinUCB` uses to
score one context per synchronization period.  Reward noise is drawn per (block, run)
from the environment's seed, as in :mod:`fedbandit.envs.linear` (common random numbers).
"""

from __future__ import annotations

import numpy as np

from fedbandit._validation import check_array, check_nonnegative_float, check_positive_float, check_positive_int
from fedbandit.envs.linear import RoundBlock, as_seed_sequence, reward_noise_rng

__all__ = [
    "OrthogonalArmsEnv",
]


#: Largest dimension (= number of arms): the d unit arms are stored as a d × d matrix.
MAX_DIM = 10_000


class OrthogonalArmsEnv:
    """K = d orthogonal unit arms; arm 1 has mean μ, the others μ − Δ_r in run r.

    Parameters
    ----------
    gaps : array (R,)
        Δ_r of every run, in (0, 2μ] (so every mean lies in [−μ, μ]).
    dim : int, default 2
        d = K ≥ 2.
    best_mean : float, default 0.5
        μ (means in [−μ, μ]: rewards rarely reach the learners' clipping bound 1).
    noise_std : float, default 0.1
        Standard deviation of the Gaussian reward noise.
    seed : int, SeedSequence or Generator
        Determines the reward noise (common random numbers across learners).
    block_size : int, default 4096
        Rounds per generated block.
    """

    n_agents = 1
    shared_contexts = False

    def __init__(self, gaps, dim=2, *, best_mean=0.5, noise_std=0.1, seed=0, block_size=4096):
        gaps = check_array("gaps", gaps, ndim=1)
        self.dim = check_positive_int("dim", dim, max_value=MAX_DIM,
                                      reason="the arms are the rows of a dim x dim identity matrix")
        if self.dim < 2:
            raise ValueError(f"dim must be >= 2 (a best arm and at least one other), got {dim!r}")
        self.best_mean = check_positive_float("best_mean", best_mean)
        if gaps.size == 0 or np.any(gaps <= 0) or np.any(gaps > 2 * self.best_mean):
            raise ValueError(
                f"gaps must be a non-empty array of values in (0, 2*best_mean={2 * self.best_mean}], got {gaps!r}"
            )
        self.gaps = gaps.astype(float)
        self.n_runs = gaps.size
        self.n_arms = self.dim
        self.noise_std = check_nonnegative_float("noise_std", noise_std)
        self.block_size = check_positive_int("block_size", block_size)
        self._root = as_seed_sequence(seed)
        R, d = self.n_runs, self.dim
        self.theta = np.full((R, d), self.best_mean)
        self.theta[:, 1:] -= self.gaps[:, None]
        self._features = np.broadcast_to(np.eye(d), (R, 1, d, d))
        self._means = self.theta[:, None, :].copy()  # (R, 1, K): arm a's mean is θ*_a
        self._best = np.full((R, 1), self.best_mean)

    @property
    def param_norm(self) -> float:
        """max_r ‖θ*_r‖ (the S of the confidence radius)."""
        return float(np.linalg.norm(self.theta, axis=1).max())

    def iter_blocks(self, horizon):
        """Blocks of rounds 1..``horizon`` (:class:`fedbandit.envs.linear.RoundBlock`, one context broadcast)."""
        horizon = check_positive_int("horizon", horizon)
        for b in range(-(-horizon // self.block_size)):
            n = min(self.block_size, horizon - b * self.block_size)
            if self.noise_std > 0:
                noise = np.stack(
                    [reward_noise_rng(self._root, b, r).standard_normal((n, 1)) for r in range(self.n_runs)], axis=1
                )
                noise *= self.noise_std
            else:
                noise = np.zeros((n, self.n_runs, 1))
            yield RoundBlock(
                b * self.block_size,
                np.broadcast_to(self._features, (n,) + self._features.shape),
                np.broadcast_to(self._means, (n,) + self._means.shape),
                np.broadcast_to(self._best, (n,) + self._best.shape),
                noise,
            )

    def describe(self) -> dict:
        return {
            "instance": "orthogonal arms, one best (gap family)",
            "K": self.n_arms,
            "d": self.dim,
            "runs": self.n_runs,
            "gaps": [float(g) for g in np.unique(self.gaps)],
            "noise_std": self.noise_std,
        }

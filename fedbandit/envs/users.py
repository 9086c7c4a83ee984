"""envs.users."""

from __future__ import annotations

import numpy as np

from fedbandit._validation import (
    check_array,
    check_int_in_range,
    check_positive_int,
)
from fedbandit.envs.linear import RoundBlock

__all__ = [
    "UsersEnv",
    "UserSequenceEnv",
]


class UsersEnv:
    """A linear contextual environment made of given users.

    Parameters
    ----------
    features : ndarray (T, M, K, d) or (T, Rc, M, K, d)
        Arm features of the user of every (round, agent) (Rc = 1 or ``n_runs``).
    means : ndarray (T, M, K) or (T, Rc, M, K)
        Mean reward of every arm.
    noise : ndarray (T, M) or (T, R, M)
        Reward noise of the user (added to whichever arm is played); part of the data.
    n_runs : int, default 1
        Number of runs simulated side by side (replays of the same users when Rc = 1).
    block_size : int, default 64
    """

    def __init__(self, features, means, noise, *, n_runs=1, block_size=64):
        features = check_array("features", features)
        if features.ndim == 4:
            features = features[:, None]
        if features.ndim != 5:
            raise ValueError(f"features must have shape (T, M, K, d) or (T, Rc, M, K, d), got {features.shape}")
        T, Rc, M, K, d = features.shape
        self.n_runs = check_positive_int("n_runs", n_runs)
        if Rc not in (1, self.n_runs):
            raise ValueError(f"features have {Rc} context runs; expected 1 or n_runs={self.n_runs}")
        means = check_array("means", means)
        if means.ndim == 3:
            means = means[:, None]
        if means.shape != (T, Rc, M, K):
            raise ValueError(f"means must have shape {(T, Rc, M, K)} (or without the run axis), got {means.shape}")
        noise = check_array("noise", noise)
        if noise.ndim == 2:
            noise = noise[:, None]
        if noise.ndim != 3 or noise.shape[0] != T or noise.shape[2] != M or noise.shape[1] not in (1, self.n_runs):
            raise ValueError(f"noise must have shape (T, M) or (T, R, M) with T={T}, M={M}, got {noise.shape}")
        self.features, self.means, self.noise = features, means, noise
        self.best = means.max(axis=-1)
        self.horizon, self.n_agents, self.n_arms, self.dim = T, M, K, d
        self.shared_contexts = Rc == 1
        self.block_size = check_positive_int("block_size", block_size)

    def iter_blocks(self, horizon):
        horizon = check_int_in_range("horizon", horizon, 1, self.horizon)
        for start in range(0, horizon, self.block_size):
            stop = min(horizon, start + self.block_size)
            noise = np.broadcast_to(self.noise[start:stop], (stop - start, self.n_runs, self.n_agents))
            yield RoundBlock(start, self.features[start:stop], self.means[start:stop], self.best[start:stop], noise)


class UserSequenceEnv:
    """The M·T users of a federated instance, served one at a time (an environment with one agent).

    User u = (t − 1)·M + i is agent i's user of round t: the flattening of the (rounds,
    agents) axes, round-major.  Every array of a block of the wrapped environment is
    reshaped, so contexts, mean rewards and reward noise are exactly the federated
    learners' (common random numbers).  Padded arms (``mask`` False) are replaced by
    copies of the first arm of the same user, because the sequential learner's LinUCB core
    takes no mask; a duplicated arm changes neither the best mean nor any regret.

    Parameters
    ----------
    env : SyntheticLinearEnv or RealDataLinearEnv (any environment with ``iter_blocks``)
        The federated instance, with ``n_agents`` = M.
    """

    def __init__(self, env):
        for attr in ("iter_blocks", "n_agents", "dim", "n_runs"):
            if not hasattr(env, attr):
                raise TypeError(f"env must be a linear environment with iter_blocks/n_agents/dim/n_runs, got {env!r}")
        self.env = env
        self.agents_per_round = check_positive_int("env.n_agents", env.n_agents)
        self.n_agents = 1
        self.dim = env.dim
        self.n_runs = env.n_runs
        self.n_arms = getattr(env, "n_arms", None)

    def iter_blocks(self, horizon):
        """Blocks covering users 1..``horizon`` (a multiple of M)."""
        horizon = check_positive_int("horizon", horizon)
        M = self.agents_per_round
        if horizon % M:
            raise ValueError(f"horizon must be a multiple of the number of agents M={M}, got {horizon}")
        for b in self.env.iter_blocks(horizon // M):
            r = b.n_rounds

            def flat(a):
                # (rounds, runs, M, ...) -> (rounds*M, runs, 1, ...), round-major
                a = np.moveaxis(a, 2, 1)
                return a.reshape((r * M, a.shape[2], 1) + a.shape[3:])

            means = b.means if b.mask is None else np.where(b.mask, b.means, b.means[..., :1])
            if b.features_from_table and (b.mask is None or b.mask[..., 0].all()):
                # Arms that are rows of a table (real data), the first arm of every user real: the
                # padded arms' rows replaced by the first arm's, the features formed once, from the
                # flattened rows, on first use (the same values as the branch below, one copy
                # instead of three)
                ids = b.arm_ids if b.mask is None else np.where(b.mask, b.arm_ids, b.arm_ids[..., :1])
                yield RoundBlock(b.start * M, None, flat(means), flat(b.best), flat(b.noise), None,
                                 arm_ids=flat(ids), table=b.table)
                continue
            feats = b.features
            if b.mask is not None:
                feats = np.where(b.mask[..., None], feats, feats[..., :1, :])
            yield RoundBlock(b.start * M, flat(feats), flat(means), flat(b.best), flat(b.noise), None)

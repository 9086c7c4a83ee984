"""A new environment in one file: registered by decorator, run through every check that reads one.

The recipe of ARCHITECTURE.md ("Add an environment"): a class with the linear environments'
interface (``n_runs``, ``n_agents``, ``n_arms``, ``dim`` and ``iter_blocks(horizon)`` yielding
:class:`fedbandit.envs.RoundBlock`), and a builder registered with
:func:`fedbandit.envs.register_environment` under an instance name with the configuration keys it
reads.  Nothing else in the package changes: :func:`fedbandit.experiments.run_config` builds it
from ``instance=...`` (and refuses a key nothing reads), every linear learner runs on it with every
statistics protocol, and its users go through

* the replay contract (:func:`fedbandit.audit.replay_check` with ``users=``
  :func:`fedbandit.audit.users_from_environment`), which must still catch Algorithm 1 as written;
* the end-to-end audit of the fixed-batch learner with silo-level LDP on its users (an
  :class:`fedbandit.audit.EndToEndSpec` whose setting names the ``environment``), with its power check.

The protocol contract (``tests/protocol_contract.py``) exercises protocols on their own data and
reads no environment; the environment's own contract is checked here (shapes, bounded features,
``best`` the largest mean, deterministic in ``env_seed``).

The new environment: every arm a vertex of the hypercube {−1, 1}^d / √d (a finite, non-Gaussian
feature law; the contexts of Abbasi-Yadkori et al.'s experiments are of this kind), θ uniform on
the sphere of radius 1/2, reward ⟨θ, x⟩ plus N(0, noise_std²).  The registration lives in a module
fixture (and is removed after).
"""

from __future__ import annotations

import numpy as np
import pytest

from fedbandit.envs import RoundBlock, register_environment, unregister_environment

NAME = "hypercube"


class HypercubeLinearEnv:
    """Linear contextual bandit whose K arms are uniform vertices of the hypercube {±1}^d/√d, every round.

    Parameters
    ----------
    n_agents, n_arms, dim : int
    n_runs : int
        Runs side by side (the contexts are shared; the reward noise is each run's own).
    noise_std : float
    seed : int
    """

    def __init__(self, n_agents, n_arms, dim, *, n_runs=1, noise_std=0.5, seed=0):
        self.n_agents, self.n_arms, self.dim, self.n_runs = n_agents, n_arms, dim, n_runs
        self.noise_std = noise_std
        self.seed = seed
        theta = np.random.default_rng([seed, 0]).standard_normal(dim)
        self.theta = 0.5 * theta / np.linalg.norm(theta)

    def iter_blocks(self, horizon, block_size=64):
        for index, start in enumerate(range(0, horizon, block_size)):
            n = min(block_size, horizon - start)
            rng = np.random.default_rng([self.seed, 1, index])  # block by block: deterministic in the seed
            signs = rng.choice([-1.0, 1.0], size=(n, 1, self.n_agents, self.n_arms, self.dim))
            features = signs / np.sqrt(self.dim)
            means = features @ self.theta
            noise = self.noise_std * np.random.default_rng([self.seed, 2, index]).standard_normal(
                (n, self.n_runs, self.n_agents))
            yield RoundBlock(start, features, means, means.max(axis=-1), noise)


@pytest.fixture(scope="module", autouse=True)
def registered():
    from fedbandit._validation import check_nonnegative_float, check_positive_int

    @register_environment(NAME, keys=("M", "K", "d", "noise_std"), summary="arms on the hypercube's vertices")
    def hypercube(config, runs, seed):
        return HypercubeLinearEnv(check_positive_int("M", config.get("M", 3)), check_positive_int("K", config.get("K", 8)),
                                  check_positive_int("d", config.get("d", 4)), n_runs=runs,
                                  noise_std=check_nonnegative_float("noise_std", config.get("noise_std", 0.5)),
                                  seed=int(seed))

    yield
    unregister_environment(NAME)


CONFIG = dict(instance=NAME, M=3, K=6, d=2, noise_std=0.5, env_seed=7)


def test_environment_contract():
    from fedbandit.envs import available_environments, environment_keys, make_environment

    assert NAME in available_environments() and {"M", "K", "d", "noise_std"} <= set(environment_keys())
    env = make_environment(dict(CONFIG, runs=2))
    blocks = list(env.iter_blocks(100))
    assert sum(b.n_rounds for b in blocks) == 100 and [b.start for b in blocks] == [0, 64]
    for b in blocks:
        assert b.features.shape == (b.n_rounds, 1, 3, 6, 2) and b.noise.shape == (b.n_rounds, 2, 3)
        assert np.allclose(np.linalg.norm(b.features, axis=-1), 1.0)
        np.testing.assert_array_equal(b.best, b.means.max(axis=-1))
    again = list(make_environment(dict(CONFIG, runs=2)).iter_blocks(100))
    other = list(make_environment(dict(CONFIG, runs=2, env_seed=8)).iter_blocks(100))
    assert all(np.array_equal(a.features, b.features) and np.array_equal(a.noise, b.noise)
               for a, b in zip(blocks, again))
    assert not np.array_equal(blocks[0].features, other[0].features)
    with pytest.raises(ValueError, match="K"):
        make_environment(dict(CONFIG, K=0))


@pytest.mark.parametrize("learner, protocol", [("fixed-batch", "silo-ldp"), ("fixed-batch", "ddg-secagg"),
                                               ("feducb", "central"), ("super-agent", "central"),
                                               ("concurrent-linucb", "concurrent-shuffle")])
def test_learners_run_on_it_by_name(learner, protocol):
    from fedbandit.experiments import run_config

    cfg = dict(CONFIG, learner=learner, protocol=protocol, epsilon=1.0, delta=1e-3, T=40, B=4, runs=2)
    if learner == "super-agent":
        cfg.pop("B")
    if learner == "feducb":  # the frozen variant, clipping rewards (DP20 as written is accounted invalid)
        cfg.update(schedule="fixed", reward_bound=1.0)
    res = run_config(cfg, np.random.default_rng(0))
    assert res.regret.shape[0] == 2 and np.all(np.isfinite(res.regret)) and res.accounting.status == "verified"
    with pytest.raises(ValueError, match="used by neither"):
        run_config(dict(cfg, noise_sd=0.5), np.random.default_rng(0))


def test_replay_contract_on_its_users():
    from fedbandit.audit import replay_check, users_from_environment
    from fedbandit.audit.replay import LINEAR
    from fedbandit.envs import make_environment

    users = users_from_environment(make_environment(dict(CONFIG, M=LINEAR["M"], d=LINEAR["d"])), LINEAR["T"])
    for learner, protocol in (("fixed-batch", "silo-ldp"), ("fixed-batch", "non-private"), ("feducb", "dp20")):
        replay_check(learner, protocol, users=users).raise_if_violated()
    # and it still sees a leak on these users: Algorithm 1 as written folds one user into its batch's records
    assert not replay_check("fixed-batch", "silo-ldp", dict(local_updates=True), users=users).holds


def test_end_to_end_audit_on_its_users():
    from fedbandit.audit import EndToEndSpec, audit_end_to_end

    spec = EndToEndSpec(f"fixed-batch/silo-ldp on {NAME}", "linear", "fixed-batch", "silo-ldp",
                        dict(epsilon=1.0, delta=1e-5), {}, dict(M=3, T=20, B=5, K=4, d=2, environment=dict(CONFIG, K=4)))
    rep = audit_end_to_end(spec, 6000, rng=np.random.default_rng(3), confidence=0.99)
    assert rep.status == "verified" and rep.consistent, (rep.epsilon_lower, rep.claimed_epsilon)
    assert rep.power_shown, (rep.broken_result.epsilon_lower, rep.claimed_epsilon)

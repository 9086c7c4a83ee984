"""A new learner in one file: registered by decorator, run through every check.

The recipe of ARCHITECTURE.md ("Add a learner"): a class with the constructor convention of its
family (``fedbandit.learners.registry.LEARNER_FAMILIES``; a linear learner takes ``protocol, horizon,
batch_size, n_agents, dim``), ``run(env, rng) -> RunResult`` and ``from_config(config, env)``,
registered with :func:`fedbandit.learners.register_learner` and its family.  Nothing else in the
package changes: :func:`fedbandit.experiments.run_config` runs it by name on any linear
environment and statistics protocol, and it goes through

* the replay contract (:func:`fedbandit.audit.replay_check`: the records it hands the protocol
  depend on a user only through that user's own record, whatever it does with the releases),
  for every protocol :func:`fedbandit.audit.replay_pairs` finds it accepts;
* the end-to-end audit of its family (:func:`fedbandit.audit.end_to_end_specs` adds one for a
  learner registered later: the learner with silo-level LDP on the linear audit instance),
  with its power check (the tree's Gaussian draws × 0.25 in the code) refuting the claim.

The new learner, federated linear Thompson sampling served from the synchronized statistics
(Agrawal & Goyal 2013's LinTS in the batched federated setting of Zhou & Chowdhury's Algorithm 1):
every agent plays argmax ⟨x, θ̃⟩ with θ̃ ~ N(θ̂, v² V⁻¹), θ̂ and V from the last release; local
data enter only at the next synchronization (the frozen variant), so the protocol's guarantee is
the run's.  The registration lives in a module fixture (and is removed after).
"""

from __future__ import annotations

import numpy as np
import pytest

from fedbandit._validation import check_positive_float, check_positive_int, check_rng
from fedbandit.learners import CommunicationRecord, RunResult, register_learner, unregister_learner
from fedbandit.learners.linucb import gather_played, regularized_inverse
from fedbandit.learners.registry import split_params
from fedbandit.protocols import StatisticsProtocol
from fedbandit.theory.linear import check_batch_schedule, regularizer_lambda

NAME = "federated-lints"


class FederatedLinTS:
    """Federated linear Thompson sampling from the synchronized statistics (a plug-in learner).

    Parameters
    ----------
    protocol : StatisticsProtocol
        How the agents' batch sums reach the server (:func:`fedbandit.protocols.create`).
    horizon, batch_size, n_agents, dim : int
        T rounds in batches of B, M agents, features of dimension d.
    v : float, default 0.5
        Scale of the posterior draw θ̃ ~ N(θ̂, v² V⁻¹).
    reward_bound : float, default 1
        Rewards are clipped to [−Y, Y] (the protocols' sensitivity).
    """

    name = "federated-lints"

    def __init__(self, protocol, *, horizon, batch_size, n_agents, dim, v=0.5, reward_bound=1.0):
        if not isinstance(protocol, StatisticsProtocol):
            raise TypeError(f"protocol must be a fedbandit.protocols.StatisticsProtocol, got {type(protocol).__name__}")
        self.horizon, self.batch_size = check_batch_schedule(horizon, batch_size)
        self.n_agents = check_positive_int("n_agents", n_agents)
        self.dim = check_positive_int("dim", dim)
        self.v = check_positive_float("v", v)
        self.reward_bound = check_positive_float("reward_bound", reward_bound)
        self.protocol = protocol.configure(n_agents=self.n_agents, dim=self.dim, n_batches=self.horizon // self.batch_size,
                                           batch_size=self.batch_size, reward_bound=self.reward_bound)
        self.lam = regularizer_lambda(self.protocol.server_noise_std(), self.dim, self.horizon // self.batch_size, 0.01,
                                      lam_min=np.sqrt(self.n_agents))

    def accounting(self, relation=None):
        """The protocol's guarantee: everything an agent sends is its batch sums (and records)."""
        return self.protocol.accounting(relation)

    def run(self, env, rng) -> RunResult:
        rng = check_rng("rng", rng)
        R, M, d, B, T = env.n_runs, self.n_agents, self.dim, self.batch_size, self.horizon
        protocol = self.protocol
        protocol.reset(n_runs=R, rng=rng)
        theta_hat, root = np.zeros((R, M, d)), np.broadcast_to(np.eye(d) / np.sqrt(self.lam), (R, M, d, d))
        xs, ys = np.zeros((B, R, M, d)), np.zeros((B, R, M))
        regret = np.zeros((R, T))
        t = 0
        for block in env.iter_blocks(T):
            for s in range(block.n_rounds):
                X = block.features[s]  # (Rc, M, K, d)
                theta = theta_hat + self.v * np.einsum("rmij,rmj->rmi", root, rng.standard_normal((R, M, d)))
                scores = np.einsum("rmkd,rmd->rmk", np.broadcast_to(X, (R,) + X.shape[1:]), theta)
                if block.mask is not None:
                    scores = np.where(block.mask[s], scores, -np.inf)
                arms = scores.argmax(axis=-1)
                x = gather_played(X, arms)
                mean = gather_played(block.means[s], arms)
                regret[:, t] = (np.broadcast_to(block.best[s], (R, M)) - mean).sum(axis=1)
                xs[t % B], ys[t % B] = x, np.clip(mean + block.noise[s], -self.reward_bound, self.reward_bound)
                t += 1
                if t % B == 0:  # synchronize: only the release is used afterwards
                    bias, gram = np.einsum("brmd,brm->rmd", xs, ys), np.einsum("brmi,brmj->rmij", xs, xs)
                    u_syn, w_syn = protocol.synchronize(bias, gram, users=(xs, ys) if protocol.needs_user_data else None)
                    v_inv = regularized_inverse(w_syn, self.lam)
                    w, U = np.linalg.eigh(0.5 * (v_inv + np.swapaxes(v_inv, -1, -2)))
                    sqrt_v = (U * np.sqrt(np.maximum(w, 0.0))[:, None, :]) @ np.swapaxes(U, -1, -2)
                    theta_hat = np.broadcast_to(np.einsum("rij,rj->ri", v_inv, u_syn)[:, None], (R, M, d))
                    root = np.broadcast_to(sqrt_v[:, None], (R, M, d, d))
        return RunResult(t=np.arange(1, T + 1), regret=np.cumsum(regret, axis=1),
                         communication=CommunicationRecord.of(protocol.communication), accounting=self.accounting(),
                         calibration={**protocol.calibration(), "lam": self.lam, "v": self.v},
                         noise_variance=float(protocol.server_noise_std() ** 2), learner=self.name, protocol=protocol.name)

    @classmethod
    def from_config(cls, config, env):
        """Build from a :func:`fedbandit.experiments.run_config` configuration (T, B, M and the protocol's keys)."""
        protocol, kw = split_params(config, cls)
        return cls(protocol, horizon=config["T"], batch_size=config["B"], n_agents=config["M"], dim=env.dim, **kw)


@pytest.fixture(scope="module", autouse=True)
def registered():
    register_learner(NAME, family="linear")(FederatedLinTS)
    yield
    unregister_learner(NAME)


CONFIG = dict(learner=NAME, protocol="silo-ldp", epsilon=1.0, delta=1e-5, instance="synthetic", M=3, T=40, B=4, K=5,
              d=2, runs=3)


def test_run_by_name_learns_and_is_accounted():
    from fedbandit.experiments import run_config

    res = run_config(dict(CONFIG, epsilon=1e3, T=200), np.random.default_rng(0))
    assert res.learner == NAME and res.accounting.status == "verified" and res.communication.rounds == 50
    # it learns (a check of the plumbing on fixed seeds; with ε = 1000 the noise is negligible): every run's
    # regret is below a third of uniform play's, and its second half below its first
    from fedbandit.experiments.synthesis import random_play_regret

    assert np.all(res.cum_regret < random_play_regret(dict(CONFIG, T=200)) / 3), res.cum_regret
    half = res.regret[:, np.searchsorted(res.t, 100)]
    assert np.all(res.cum_regret - half < half), (half, res.cum_regret)
    again = run_config(dict(CONFIG), np.random.default_rng(1))
    np.testing.assert_array_equal(again.regret, run_config(dict(CONFIG), np.random.default_rng(1)).regret)


def test_replay_contract_for_every_accepted_protocol():
    from fedbandit.audit import replay_check, replay_pairs

    protocols = [p for lrn, p in replay_pairs()[0] if lrn == NAME]
    assert {"silo-ldp", "central", "ddg-secagg", "sdp-vector-sum", "non-private"} <= set(protocols)
    for protocol in protocols:
        replay_check(NAME, protocol).raise_if_violated()


def test_end_to_end_audit_and_its_power():
    from fedbandit.audit import audit_end_to_end, end_to_end_specs

    (spec,) = [s for s in end_to_end_specs() if s.learner == NAME]
    assert spec.protocol == "silo-ldp" and spec.family == "linear" and spec.broken == "noise"
    rep = audit_end_to_end(spec, 6000, rng=np.random.default_rng(3), confidence=0.99)
    assert rep.status == "verified" and rep.consistent, (rep.epsilon_lower, rep.claimed_epsilon)
    assert rep.power_shown, (rep.broken_result.epsilon_lower, rep.claimed_epsilon)

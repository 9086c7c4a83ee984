"""A new protocol in one file: a randomizer part, registered by decorator, run through every check.

The recipe of ARCHITECTURE.md ("Add a protocol"): subclass the kind's abstract randomizer
(:class:`fedbandit.protocols.StatisticsRandomizer`), answer its abstract methods, compose it with
the parts that exist, and register a factory with :func:`fedbandit.protocols.register`.  Nothing
else in the package changes: the protocol is then built by name, accepted by the learners, and
goes through

* the protocol contract (``tests/protocol_contract.py``: lifecycle, shapes, determinism, the
  non-private limit, the measured noise against the stated variance, the accounting round trip),
* the replay contract (:func:`fedbandit.audit.replay_check` with the fixed-batch learner, and every
  pair :func:`fedbandit.audit.replay_pairs` finds),
* an end-to-end audit (:func:`fedbandit.audit.audit_end_to_end`) whose power check plants a noise
  bug in the code (the Gaussian draws × 0.02) and must see the claim broken.

The new protocol, "per-batch Gaussian" silo-level LDP: every party releases each batch's sums once,
with fresh Gaussian noise, and the server adds the releases up (no tree).  A user's record enters
one release, so σ is calibrated for a single Gaussian release (the tree's zCDP rule with κ = 1),
but the prefix after k batches carries k noises (variance k·M·σ²): the trade-off the tree of Zhou &
Chowdhury's Algorithm 2 avoids (κ releases per record, log k noises per prefix).  This is Chan,
Shi & Song's "simple counting mechanism I" applied to the linear-bandit statistics.

The registration lives in a module fixture (and is removed after), so the other test files see
the registry as the package defines it.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import pytest

from fedbandit.accounting.calibration import gaussian_tree_sigma0
from fedbandit.accounting.events import GaussianEvent
from fedbandit.mechanisms import gaussian as gaussian_module
from fedbandit.protocols import Identity, StatisticsProtocol, StatisticsRandomizer, register, unregister
from fedbandit.protocols.statistics import RunningTotal
from protocol_contract import CONTRACT

NAME = "silo-ldp-batches"


class GaussianBatches(StatisticsRandomizer):
    """R: every party releases each batch's sums γ_k once, with fresh N(0, σ²) noise per entry.

    Chan, Shi & Song's (2011) simple counting mechanism I on the packed statistics of Zhou &
    Chowdhury's Algorithm 1 (the sharing step without a tree): a record enters the one release
    of its batch, so σ is the zCDP calibration of one Gaussian release at the record's
    sensitivity (:func:`fedbandit.accounting.calibration.gaussian_tree_sigma0`, rule ``"zcdp"`` with one
    batch); the server's prefix after k batches carries k releases' noise.
    """

    name: ClassVar[str] = "gaussian-batches"
    message: ClassVar[str] = "float"
    releases: ClassVar[str] = "batch sums"
    supports_run_masks: ClassVar[bool] = True
    sigma0: float = math.nan  # σ, set by configure

    def describe(self) -> str:
        return "per batch k: the batch sums γ_k plus N(0, σ²) per entry (fresh noise, no tree)"

    def configure(self, setting):
        if not setting.private:
            raise ValueError(f"randomizer {self.name!r} needs a target (epsilon, delta)")
        self.sigma0 = float(gaussian_tree_sigma0("zcdp", setting.epsilon, setting.delta, n_batches=1,
                                                 horizon=setting.batch_size, n_agents=setting.n_agents,
                                                 sensitivity=setting.sensitivity, parties=setting.parties))

    def reset(self, setting, n_runs):
        pass

    def encode(self, leaf, users, runs, rng):
        # through the package's Gaussian mechanism (the audits' planted noise bug patches it)
        return None, gaussian_module.gaussian_mechanism(leaf, self.sigma0, rng)

    def payload(self, setting, level):
        return setting.n_agents, setting.n_agents * setting.coordinates

    def event(self, setting, relation):
        db, dg = setting.record_sensitivities(relation)
        return GaussianEvent(math.hypot(db, dg), math.sqrt(setting.parties) * self.sigma0)

    def theorem(self, setting) -> str:
        return ("one Gaussian release per record (each batch's sums with fresh noise: Chan, Shi & Song's simple "
                "counting mechanism I); verified: zCDP [BS16], converted by [CKS20]")

    def node_variance(self, setting):
        return setting.n_agents * self.sigma0**2

    def prefix_variance(self, setting, k):
        return k * setting.n_agents * self.sigma0**2

    def server_noise_std(self, setting):
        return math.sqrt(self.prefix_variance(setting, setting.n_batches))

    def calibration(self, setting):
        return {"sigma0": self.sigma0, "rule": "zcdp, one release per record"}

    def scale_noise(self, factor):
        self.sigma0 *= factor


def silo_ldp_batches(epsilon, delta, *, relation="add-remove"):
    """Silo-level LDP with per-batch Gaussian releases (no tree)."""
    return StatisticsProtocol(GaussianBatches(), Identity(), RunningTotal(), name=NAME, epsilon=epsilon, delta=delta,
                              relation=relation)


@pytest.fixture(scope="module", autouse=True)
def registered():
    register(NAME, kind="statistics", summary="silo-level LDP: per-batch Gaussian releases, no tree",
             reference="Chan, Shi & Song 2011, simple counting mechanism I")(silo_ldp_batches)
    yield
    unregister(NAME)


@pytest.mark.parametrize("check", CONTRACT, ids=lambda c: c.__name__[len("check_"):])
def test_protocol_contract(check):
    check(NAME)


def test_built_by_name_and_accounted():
    from fedbandit.experiments import run_config
    from fedbandit.protocols import available, create

    assert NAME in available("statistics")
    p = create(NAME, epsilon=1.0, delta=1e-5).configure(n_agents=3, dim=2, n_batches=8, batch_size=4)
    a = p.accounting()
    assert a.status == "verified" and a.epsilon <= 1.0 + 1e-6 and a.theorem.startswith("one Gaussian release")
    # the prefix noise grows like k (a tree's like popcount(k))
    assert p.prefix_noise_variance(8) == pytest.approx(8 * p.prefix_noise_variance(1))
    res = run_config(dict(learner="fixed-batch", protocol=NAME, epsilon=1.0, delta=1e-5, instance="synthetic", M=3,
                          T=32, B=4, K=4, d=2, runs=2), np.random.default_rng(0))
    assert res.accounting.status == "verified" and res.communication.rounds == 8


def test_replay_contract():
    from fedbandit.audit import replay_check, replay_pairs

    replay_check("fixed-batch", NAME).raise_if_violated()
    pairs = [pair for pair in replay_pairs()[0] if pair[1] == NAME]
    assert ("fixed-batch", NAME) in pairs and ("feducb", NAME) in pairs
    for learner, protocol in pairs:
        replay_check(learner, protocol).raise_if_violated()
    # the contract still has power on the new protocol: Algorithm 1 as written leaks within a batch
    assert not replay_check("fixed-batch", NAME, dict(local_updates=True)).holds


def test_end_to_end_audit_and_its_power():
    """The generic audit of a registered statistics protocol (:func:`fedbandit.audit.end_to_end_specs`),
    with a power check strong enough for this protocol's view: the attacked releases are the tree's
    nodes containing batch 1, of which only the first holds the target here, so the planted bug cuts
    the noise to 2 % (as for DP20's audit)."""
    import dataclasses

    from fedbandit.audit import audit_end_to_end, end_to_end_specs

    (spec,) = [s for s in end_to_end_specs() if s.protocol == NAME]
    spec = dataclasses.replace(spec, noise_factor=0.02)
    rep = audit_end_to_end(spec, 6000, rng=np.random.default_rng(3), confidence=0.99)
    assert rep.status == "verified" and rep.consistent, (rep.epsilon_lower, rep.claimed_epsilon)
    assert rep.power_shown, (rep.broken_result.epsilon_lower, rep.claimed_epsilon)

"""End-to-end audits of every protocol and learner: audited ≤ claimed, and power on a broken variant.

Each audit is a Clopper–Pearson lower bound at confidence 99 % (so, for a correct
mechanism, "audited ≤ claimed" would fail with probability ≤ 1 % per audit with a random
seed; the seeds are fixed).  A broken variant (noise scaled down, Algorithm 1 as written,
or a leak) must be refuted: its bound must exceed the claim.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from fedbandit.audit import EndToEndSpec, audit_end_to_end, end_to_end_specs
from fedbandit.audit.end_to_end import TargetRewardBandit, linear_users

CONF = 0.99
N_TRIALS = 6000

SPECS = end_to_end_specs()


def test_every_registered_protocol_and_learner_is_audited():
    from fedbandit.learners import available_learners
    from fedbandit.protocols import available

    assert {s.protocol for s in SPECS if s.protocol} >= set(available())
    assert {s.learner for s in SPECS if s.learner} >= set(available_learners())
    assert len({s.name for s in SPECS}) == len(SPECS)


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_end_to_end_audit(spec):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # amplification forced outside its validity region
        rep = audit_end_to_end(spec, N_TRIALS, rng=np.random.default_rng(3), confidence=CONF)
    assert rep.kind in ("end-to-end", "schedule") and rep.confidence == CONF and rep.n_trials == N_TRIALS
    if rep.status == "none":  # no privacy: the audit sees the data
        assert rep.claimed_epsilon == math.inf and rep.epsilon_lower > 5
    elif rep.status == "invalid":  # DP20: refuted
        assert rep.refutes, (rep.name, rep.epsilon_lower, rep.claimed_epsilon)
    else:
        assert rep.consistent, (rep.name, rep.epsilon_lower, rep.claimed_epsilon)
    if spec.broken:
        assert rep.power_shown, (rep.name, rep.broken, rep.broken_result.epsilon_lower, rep.claimed_epsilon)


def test_as_written_learner_is_the_broken_variant_of_the_private_one():
    """Algorithm 1 as written (local updates) at B > 1 is the power check of the private
    fixed-batch learner (its audit, above, exceeds the protocol's claim); its accounting is
    "invalid", the private variant's "verified"."""
    from fedbandit.audit.end_to_end import EndToEndMechanism

    spec = next(s for s in SPECS if s.broken == "as-written")
    assert spec.setting["B"] > 1
    proto = EndToEndMechanism(spec).protocol()
    broken = EndToEndMechanism(spec, "broken")._linear_learner(proto)
    correct = EndToEndMechanism(spec)._linear_learner(EndToEndMechanism(spec).protocol())
    assert broken.local_updates and broken.accounting().status == "invalid"
    assert not correct.local_updates and correct.accounting().status == "verified"


def test_neighbouring_inputs():
    f1, m1, n1 = linear_users(3, 4, 2, 5, world=1)
    f0, m0, n0 = linear_users(3, 4, 2, 5, world=0)
    same = np.ones(f1.shape[:2], dtype=bool)
    same[0, 0] = False
    assert np.array_equal(f1[same], f0[same]) and np.array_equal(n1[same], n0[same])
    assert np.all(f0[0, 0] == 0) and n0[0, 0] == 0 and np.allclose(np.linalg.norm(f1[0, 0], axis=-1), 1.0)
    fr, _, nr = linear_users(3, 4, 2, 5, world=0, relation="replace")
    assert np.allclose(np.linalg.norm(fr[0, 0], axis=-1), 1.0) and nr[0, 0] == -1.0
    env = TargetRewardBandit(np.array([0.7, 0.2]), agent=1, slot=2, value=0.0, horizon=3, n_agents=2, seed=0)
    arms = np.zeros((4, 2), dtype=int)
    r1, r2 = env._rewards(None, arms), env._rewards(None, arms)
    assert r1.shape == (4, 2) and np.all(r2[:, 1] == 0.0) and np.all(r1[0] == r1[1])  # fixed data in every run
    assert env.calls == 2
    with pytest.raises(ValueError, match="family"):
        EndToEndSpec("x", "nope", None, None)
    with pytest.raises(TypeError, match="spec"):
        audit_end_to_end("fixed-batch/silo-ldp", 100, rng=np.random.default_rng(0))


def test_feducb_fixed_schedule_at_B25_audits_at_or_below_its_claim():
    """Issue 21: DP20's FedUCB on the fixed schedule at B = 25 (the frozen variant, the default) audits
    at or below its claim (Clopper–Pearson at 99 %: a correct mechanism fails with probability ≤ 1 %; the
    seed is fixed), and its power check (noise × 0.02) is refuted; DP20 as written (local_updates=True)
    is accounted invalid, with the protocol's claim kept."""
    from fedbandit.audit.end_to_end import EndToEndMechanism
    from fedbandit.learners.fixed_batch import WITHIN_BATCH_LEAK

    spec = next(s for s in SPECS if s.learner == "feducb" and s.family == "linear")
    assert spec.setting["B"] == 25 and spec.setting["T"] > spec.setting["B"]
    rep = audit_end_to_end(spec, N_TRIALS, rng=np.random.default_rng(11), confidence=CONF)
    assert rep.status == "verified" and rep.consistent, (rep.epsilon_lower, rep.claimed_epsilon)
    assert rep.epsilon_lower <= rep.claimed_epsilon and rep.power_shown
    frozen = EndToEndMechanism(spec)._linear_learner(EndToEndMechanism(spec).protocol())
    as_written = EndToEndMechanism(spec, "broken")._linear_learner(EndToEndMechanism(spec).protocol())
    assert not frozen.local_updates and frozen.accounting().status == "verified"
    spec_written = EndToEndSpec(spec.name + " as written", "linear", "feducb", "dp20", spec.protocol_params,
                                spec.learner_params, spec.setting, broken="as-written")
    written = EndToEndMechanism(spec_written, "broken")._linear_learner(EndToEndMechanism(spec_written).protocol())
    assert written.local_updates and written.accounting().status == "invalid"
    assert WITHIN_BATCH_LEAK in written.accounting().notes
    assert not as_written.local_updates  # the spec's own broken variant is the noise cut, not local updates


def test_hybrid_counter_target_enters_a_binary_node_and_a_log_release():
    from fedbandit.audit.end_to_end import _counter_target

    # Chan–Shi–Song hybrid, b_log = 2s/ε and nodes of interval k at 2ks/ε (in units of s/ε): item 1
    # (a power of two) is only in the log release at 1, loss ε/2; item 3 = 2 + 1 is in the node of
    # interval 1 closing at 3 (b = 2) and the log release at 4 (b = 2): ε/2 + ε/2 = ε on two releases
    assert _counter_target("counter-hybrid", 16) == (3, [(3, 2.0), (4, 2.0)])
    assert _counter_target("counter-laplace", 16)[0] == 1 and _counter_target("counter-binary", 16)[0] == 1
    # the audit of the pair reaches most of the claim; item 1 could show at most ε/2 (ratio ≤ 0.5)
    spec = {s.name: s for s in end_to_end_specs(epsilon=1.0)}["stream/counter-hybrid"]
    rep = audit_end_to_end(spec, 4000, rng=np.random.default_rng(3), power=False)
    assert rep.consistent and 0.7 < rep.ratio <= 1.0, rep.ratio


def test_the_poisson_ddg_audit_catches_shares_that_are_not_dealt(monkeypatch):
    """A bug of the Poisson DDG's own kind -- each client adds one noise share instead of its part of the K -- leaves
    the sum with k shares (about half of K here): the audit's noise-law check rejects it (the correct code passes)."""
    from fedbandit.accounting.ddg import DDGParams

    spec = {s.name: s for s in SPECS}["mean estimation/sum-ddg-secagg (Poisson)"]
    good = audit_end_to_end(spec, 1000, rng=np.random.default_rng(3), power=False)
    assert not good.noise_law_rejected, good.attack
    monkeypatch.setattr(DDGParams, "noise_shares", lambda self, clients: np.ones(clients, dtype=np.int64))
    bad = audit_end_to_end(spec, 1000, rng=np.random.default_rng(3), power=False)
    assert bad.noise_law_rejected and bad.noise_ratio < 0.85, bad.attack

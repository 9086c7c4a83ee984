"""The counterfactual replay contract (fedbandit.audit.replay) for every learner × protocol pair.

For every pair of :func:`fedbandit.learners.available_learners` × :func:`fedbandit.protocols.available`
that the learner accepts: run on D, then on D′ (one target user changed as the protocol's
neighbouring relation says) with D's releases forced; every record any agent hands to the
protocol must be identical except the target's own (module docstring of
:mod:`fedbandit.audit.replay`).  A new learner or protocol is covered when it is registered
(a learner without a replay instance fails :func:`test_every_learner_is_replayed_or_excused`).

Power: the check is exact (forced releases, no statistics), so its power is shown on the
learners known to fold one user into other records -- fixed-batch and FedUCB with
``local_updates=True`` at B > 1 (within-batch adaptivity) and FedUCB's adaptive schedule.
"""

from __future__ import annotations

import numpy as np
import pytest

from fedbandit.audit import replay_check, replay_pairs
from fedbandit.audit.replay import NOT_REPLAYED, TARGETS, ReplayLog, ReplayViolation, compare_calls, replaying
from fedbandit.learners import available_learners
from fedbandit.protocols import available, create

PAIRS, REFUSED = replay_pairs()


def test_every_learner_is_replayed_or_excused():
    """Each learner is in some accepted pair or has a stated reason (no protocol); each protocol is used."""
    replayed = {lrn for lrn, _ in PAIRS}
    for lrn in available_learners():
        assert lrn in replayed or lrn in NOT_REPLAYED, f"learner {lrn!r} has no replay instance: add one"
    assert {p for _, p in PAIRS} == set(available()), "every protocol must be accepted by some learner"
    # the pairs a learner refuses are refused by its constructor (with its message), not by the contract
    assert REFUSED[("feducb", "sdp-vector-sum")].startswith("protocol 'sdp-vector-sum' acts on every user's record")
    for must in [("fixed-batch", "silo-ldp"), ("feducb", "dp20"), ("concurrent-linucb", "concurrent-shuffle"),
                 ("master-worker", "counter-hybrid"), ("decentralized", "counter-exact"),
                 ("federated-learning", "sum-ddg-secagg"), ("super-agent", "central")]:
        assert must in PAIRS


#: Other settings of the default variants: the concurrent-shuffle LinUCB's one-user-at-a-time path
#: (the replay instance batches 4 users per synchronization), the master-worker's pooled sums.
EXTRA = [("concurrent-linucb", "central", dict(min_period=1)),
         ("concurrent-linucb", "concurrent-shuffle", dict(min_period=1)),
         ("master-worker", "counter-hybrid", dict(aggregate="sums", period=3))]


@pytest.mark.parametrize("learner, protocol, overrides", [(a, b, {}) for a, b in PAIRS] + EXTRA,
                         ids=[f"{a}×{b}" for a, b in PAIRS] + [f"{a}×{b}-{o}" for a, b, o in EXTRA])
def test_default_variant_keeps_the_contract(learner, protocol, overrides):
    """FedUCB's replayed default is its fixed schedule (the adaptive one is reported, below)."""
    report = replay_check(learner, protocol, overrides)
    report.raise_if_violated()
    assert set(report.problems) <= {f"{p} user of agent {a}" for p, a in TARGETS}


@pytest.mark.parametrize(
    "learner, protocol, overrides",
    [
        ("fixed-batch", "silo-ldp", dict(local_updates=True)),
        ("fixed-batch", "non-private", dict(local_updates=True)),
        ("fixed-batch", "ddg-secagg", dict(local_updates=True)),  # per-user records (users=) as well
        ("feducb", "dp20", dict(local_updates=True)),
        ("feducb", "non-private", dict(local_updates=True)),
        ("feducb", "dp20", dict(schedule="adaptive", threshold=1.0)),  # DP20's log-det rule
        ("feducb", "non-private", dict(schedule="adaptive", threshold=0.5)),  # ... its schedule moves
    ],
)
def test_within_batch_adaptivity_breaks_the_contract(learner, protocol, overrides):
    report = replay_check(learner, protocol, overrides)
    assert not report.holds
    with pytest.raises(ReplayViolation, match="breaks the replay contract"):
        report.raise_if_violated()


def test_batch_size_one_as_written_keeps_the_contract():
    """At B = 1 there is no later user in a batch: the as-written variants keep the contract."""
    from fedbandit.audit import replay as rp

    saved = dict(rp.LINEAR)
    try:
        rp.LINEAR.update(B=1)
        for learner in ("fixed-batch", "feducb"):
            replay_check(learner, "silo-ldp", dict(local_updates=True)).raise_if_violated()
    finally:
        rp.LINEAR.clear()
        rp.LINEAR.update(saved)


def test_adaptive_schedule_changes_the_calls():
    """DP20's rule: with the target removed the synchronizations happen at other rounds, so the
    batch sums of several agents change at once (not only the target's record)."""
    report = replay_check("feducb", "non-private", dict(schedule="adaptive", threshold=0.5))
    text = " ".join(p for ps in report.problems.values() for p in ps)
    assert "cells [(0, 0), (0, 1), (0, 2)] changed" in text


def test_replayed_protocol_returns_the_recorded_releases():
    """The forcing really forces: on other inputs the replaying copy returns D's outputs, and it stops a
    run that calls another method or calls once too often."""
    log = ReplayLog()
    p = replaying(create("silo-ldp", epsilon=1.0, delta=0.1), log)
    p.configure(n_agents=2, dim=2, n_batches=2, batch_size=1)
    p.reset(n_runs=1, rng=np.random.default_rng(0))
    rng = np.random.default_rng(1)
    outs = [p.synchronize(rng.standard_normal((1, 2, 2)), np.zeros((1, 2, 2, 2))) for _ in range(2)]
    assert [c[0] for c in log.calls] == ["synchronize"] * 2 and len(log.outputs) == 2
    forced = ReplayLog(forced=[(c[0], o) for c, o in zip(log.calls, log.outputs)])
    q = replaying(create("silo-ldp", epsilon=1.0, delta=0.1), forced)
    q.configure(n_agents=2, dim=2, n_batches=3, batch_size=1)
    q.reset(n_runs=1, rng=np.random.default_rng(5))  # other noise, other inputs: the outputs are D's
    for k in range(2):
        got = q.synchronize(np.full((1, 2, 2), 7.0), np.zeros((1, 2, 2, 2)))
        np.testing.assert_array_equal(got[0], outs[k][0])
        np.testing.assert_array_equal(got[1], outs[k][1])
    with pytest.raises(RuntimeError, match="no such call on D"):
        q.synchronize(np.zeros((1, 2, 2)), np.zeros((1, 2, 2, 2)))
    # the inputs changed everywhere (7 instead of the recorded draws): more than one cell is reported
    from fedbandit.audit.replay import _Target

    tgt = _Target("linear", np.zeros(2), 0.0, np.zeros(2), 0.0)
    problems = compare_calls(log, forced, tgt, "statistics")
    assert compare_calls(log, log, tgt, "statistics") == [
        "the target's record never reached the protocol: the check is vacuous on this instance"]
    assert any("changed" in s for s in problems) and any("calls on D" in s or "diverge" in s for s in problems)


def test_compare_calls_accepts_exactly_the_targets_contribution():
    """One (run, agent) cell of a batch sum may differ by x′y′ − xy (and x′x′ᵀ − xxᵀ), nothing else."""
    from fedbandit.audit.replay import _Target

    x0, y0, x1, y1 = np.array([1.0, 0.0]), 1.0, np.array([0.5, 0.5]), -1.0
    tgt = _Target("linear", x0, y0, x1, y1)
    bias = np.arange(6.0).reshape(1, 3, 2)
    gram = np.zeros((1, 3, 2, 2))
    d = ReplayLog(calls=[("synchronize", (bias, gram), {})])

    def changed(db, dg):
        return ReplayLog(calls=[("synchronize", (bias + db, gram + dg), {})])

    db = np.zeros_like(bias)
    dg = np.zeros_like(gram)
    db[0, 1] = x1 * y1 - x0 * y0
    dg[0, 1] = np.outer(x1, x1) - np.outer(x0, x0)
    assert compare_calls(d, changed(db, dg), tgt, "statistics") == []
    leak = db.copy()
    leak[0, 1] += 0.01  # another user's record folded into the same batch sum
    assert any("more than the target" in s for s in compare_calls(d, changed(leak, dg), tgt, "statistics"))
    other = db.copy()
    other[0, 2] = 0.3  # another agent's batch sum moved
    assert any("another record" in s for s in compare_calls(d, changed(other, dg), tgt, "statistics"))

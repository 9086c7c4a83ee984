"""The contract every registered protocol keeps (as dp-accounting's PrivacyAccountantTest for accountants).

Parametrized over :func:`fedbandit.protocols.available`: a new protocol is tested as soon as
it is registered.  The checks are functions of a protocol name in ``tests/protocol_contract.py``
(a plug-in test runs them on the protocol it registers: ``tests/test_plugin_protocol.py``).  For each kind an *exerciser* builds a small setting, drives the
protocol's release method and reports the released values, the exact values and the
noise variance the protocol states for them.  Checked for every protocol:

* lifecycle errors (release before ``configure`` / ``reset``);
* output shapes and finiteness;
* identical output for generators in the same state (determinism), different output for
  another seed when the protocol is private;
* the non-private limit: ``epsilon → ∞`` (or the exact protocol) gives the exact values;
* the measured noise variance against the protocol's stated variance, a two-sided test of
  the sample variance with a stated false-alarm rate;
* the accounting round-trip: status and ε consistent with the target, both neighbouring
  relations reported, ``event()`` accounted to the same result as ``accounting()``;
* the intermediary really acts: a shuffler permutes the senders (the server cannot tell
  which party sent a message), secure aggregation shows the server only the sum.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from fedbandit.protocols import available
from protocol_contract import ALPHA, CONTRACT, B, D, K, M, create, describe

NAMES = available()
PRIVATE = [n for n in NAMES if "epsilon" in describe(n).parameters]


# ---------------------------------------------------------------------------------------
# The contract
# ---------------------------------------------------------------------------------------


def test_registry_names_are_unique_and_described():
    assert len(NAMES) == len(set(NAMES)) and len(NAMES) >= 9
    for n in NAMES:
        info = describe(n)
        assert info.summary and info.kind in ("statistics", "counter", "sum")
    with pytest.raises(ValueError, match="unknown protocol 'nope'; available:"):
        create("nope")
    with pytest.raises(TypeError, match="takes no parameter 'sigma'"):
        create("silo-ldp", epsilon=1.0, delta=0.1, sigma=3.0)


def test_shuffler_hides_the_sender():
    """Through the shuffler the server cannot tell which agent sent which message.

    Agent 0's data differ (all records e₁, y = 1) from the others' (zero records); with the
    shuffler, the message in position 0 is agent 0's in about 1/M of the runs (binomial test
    at level ALPHA); with the identity it always is.
    """
    from fedbandit.protocols import Identity, Shuffler, StatisticsProtocol
    from fedbandit.protocols.statistics import GaussianTree, TreePrefix

    R = 3000
    positions = {}
    for s in (Shuffler(), Identity()):
        p = StatisticsProtocol(GaussianTree(sigma0=0.01), s, TreePrefix(), name=s.name, epsilon=1.0, delta=0.1)
        p.configure(n_agents=M, dim=D, n_batches=K, batch_size=B)
        p.reset(n_runs=R, rng=np.random.default_rng(4))
        bias = np.zeros((R, M, D))
        bias[:, 0, 0] = 1.0
        j, msgs = p.randomizer.encode(np.concatenate([bias, np.zeros((R, M, 3))], axis=-1), None, None, p._noise_rng)
        delivered = p.intermediary.deliver(msgs, p._shuffle_rng)
        positions[s.name] = int(np.sum(delivered[:, 0, 0] > 0.5))
    assert positions["identity"] == R
    assert stats.binomtest(positions["shuffler"], R, 1 / M).pvalue > ALPHA


def test_secure_aggregation_shows_only_the_sum():
    from fedbandit.protocols import SecureAggregation

    msgs = np.arange(2 * 3 * 4).reshape(2, 3, 4)
    out = SecureAggregation("ideal").deliver(msgs, None, modulus=16)
    assert out.shape == (2, 4)  # no sender axis: the server sees one vector per run
    np.testing.assert_array_equal(out, msgs.sum(axis=1) % 16)


def test_invalid_combinations_are_refused_naming_both_parts():
    from fedbandit.protocols import Identity, SecureAggregation, Shuffler, StatisticsProtocol
    from fedbandit.protocols.statistics import CentralTree, ExactStatistics, GaussianTree, TreePrefix, VectorSum

    with pytest.raises(ValueError, match="randomizer 'vector-sum' with intermediary 'identity'"):
        StatisticsProtocol(VectorSum(), Identity(), TreePrefix(), name="x", epsilon=1.0, delta=0.1)
    with pytest.raises(ValueError, match="randomizer 'gaussian-tree' with intermediary 'secure-aggregation'"):
        StatisticsProtocol(GaussianTree(), SecureAggregation("real"), TreePrefix(), name="x", epsilon=1.0, delta=0.1)
    with pytest.raises(ValueError, match="analyzer 'central-tree' with intermediary 'shuffler'"):
        StatisticsProtocol(ExactStatistics(), Shuffler(), CentralTree(), name="x", epsilon=1.0, delta=0.1)
    p = StatisticsProtocol(GaussianTree("amplification-authors", force=True), Identity(), TreePrefix(), name="x",
                           epsilon=1.0, delta=0.1)
    with pytest.raises(ValueError, match="amplification by shuffling needs a shuffler"):
        p.configure(n_agents=M, dim=D, n_batches=K, batch_size=B)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("check", CONTRACT, ids=lambda c: c.__name__[len("check_"):])
def test_contract(check, name):
    check(name)

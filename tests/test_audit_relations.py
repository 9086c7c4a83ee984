"""One neighbouring relation per comparison: every protocol states its relation and reports both."""

from __future__ import annotations

import math
import warnings

import pytest

from fedbandit.accounting.events import record_sensitivities
from fedbandit.protocols import available, create, describe


def _configured(name):
    info = describe(name)
    kw = {k: v for k, v in dict(epsilon=2.0, delta=1e-5).items() if k in info.parameters}
    if name == "sdp-amplification":
        kw["force"] = True
    if name == "sdp-vector-sum":
        kw["delta"] = 1e-3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = create(name, **kw)
        if info.kind == "counter":
            return p.configure(n_agents=2, n_arms=2, horizon=16)
        if info.kind == "sum":
            return p.configure(n_parties=3, dim=2, n_rounds=2, clip=1.0)
        if name in ("concurrent-shuffle", "sequential-vector-sum"):  # users one at a time, one agent
            period = p.batch_sizes_for(64, 2)[-1]
            return p.configure(n_agents=1, dim=2, n_batches=64 // period, batch_size=period, n_users=64)
        return p.configure(n_agents=3, dim=2, n_batches=8, batch_size=2)


@pytest.mark.parametrize("name", available())
def test_every_protocol_states_its_relation_and_reports_both(name):
    p = _configured(name)
    assert p.relation in ("add-remove", "replace")
    own = p.accounting()
    assert own.relation == p.relation
    other_rel = "replace" if p.relation == "add-remove" else "add-remove"
    other = p.accounting(other_rel)
    assert other.relation == other_rel
    if p.private and own.status == "verified" and p.kind == "statistics" and p.relation == "add-remove" \
            and name != "concurrent-shuffle":
        # replacing a user moves a record by more than adding it: never a smaller ε
        assert other.epsilon >= own.epsilon * (1 - 1e-9)


def test_replacement_sensitivities():
    assert record_sensitivities(1.0, 1.0, "add-remove") == (1.0, 1.0)
    db, dg = record_sensitivities(1.0, 1.0, "replace")
    assert db == 2.0 and math.isclose(dg, math.sqrt(2.0))
    # the number: a claimed ε = 1 (zCDP calibration, δ = 1e-5) is about 1.8 under replacement
    p = create("silo-ldp", epsilon=1.0, delta=1e-5, calibration="zcdp").configure(n_agents=4, dim=5, n_batches=4,
                                                                                   batch_size=25)
    assert p.accounting().epsilon <= 1.0 + 1e-9
    assert 1.7 < p.accounting("replace").epsilon < 1.9


def test_protocols_calibrated_for_replacement_meet_their_target_under_it():
    p = create("central", epsilon=1.0, delta=1e-5, relation="replace").configure(n_agents=4, dim=5, n_batches=4,
                                                                                  batch_size=25)
    assert p.relation == "replace" and p.accounting().status == "verified"
    assert p.accounting("add-remove").epsilon < p.accounting().epsilon

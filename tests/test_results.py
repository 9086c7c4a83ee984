"""Typed results: a run's accounting and communication are frozen records, serialised only at the cache.

``RunResult.accounting`` is the :class:`fedbandit.accounting.Accounting` of the whole run and
``RunResult.communication`` a :class:`fedbandit.learners.CommunicationRecord` (both frozen);
:func:`fedbandit.experiments.run_grid` pickles the result as it is and reads it back equal.
Entries written by an older package are never read: the cache key holds the hash of the
package's source (:func:`fedbandit.experiments.grid.package_source_hash`), which this change alters.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fedbandit.accounting import Accounting
from fedbandit.experiments import run_config, run_grid
from fedbandit.learners import CommunicationRecord

CONFIG = dict(learner="fixed-batch", protocol="silo-ldp", epsilon=1.0, delta=1e-5, instance="synthetic", M=3, T=16,
              B=4, K=4, d=2, runs=2)


CALLS = []


def _run(config, rng):
    CALLS.append(1)
    return run_config(dict(config), rng)


def test_records_are_typed_and_frozen():
    res = run_config(dict(CONFIG), np.random.default_rng(0))
    assert isinstance(res.accounting, Accounting) and isinstance(res.communication, CommunicationRecord)
    assert res.accounting.status == "verified" and res.communication.rounds == 4 and res.communication.unit == "floats"
    assert res.communication.bits == 64 * res.communication.payload
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.accounting.status = "none"
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.communication.rounds = 0
    assert res.communication.as_dict() == {"rounds": 4, "messages": 12, "payload": 12 * 5, "unit": "floats",
                                           "bits": 64.0 * 12 * 5}


def test_typed_records_survive_the_cache(tmp_path):
    first = run_grid(_run, [CONFIG], seeds=[0], cache_dir=tmp_path, version=1)[0][0]
    again = run_grid(_run, [CONFIG], seeds=[0], cache_dir=tmp_path, version=1)[0][0]  # read from the cache
    assert again is not first
    assert again.accounting == first.accounting and again.communication == first.communication
    np.testing.assert_array_equal(again.regret, first.regret)


def test_the_cache_key_follows_the_package_source(tmp_path, monkeypatch):
    """A result cached by another package source is not read (the typed records could not be)."""
    # the runner lives in fedbandit._grid (fedbandit.experiments.grid re-exports it): patch it there
    import fedbandit._grid as grid

    run_grid(_run, [CONFIG], seeds=[0], cache_dir=tmp_path, version=1)
    n = len(CALLS)
    run_grid(_run, [CONFIG], seeds=[0], cache_dir=tmp_path, version=1)
    assert len(CALLS) == n  # read from the cache
    monkeypatch.setattr(grid, "package_source_hash", lambda: "another package source")
    run_grid(_run, [CONFIG], seeds=[0], cache_dir=tmp_path, version=1)
    assert len(CALLS) == n + 1  # recomputed

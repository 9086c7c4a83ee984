"""Every computed result is unchanged: the golden record (tests/golden.py) recomputed bit for bit
(on the record's pinned CPU code paths, :data:`golden.PINNED_ENV`, whatever the host).

``tests/golden_results.json`` pins a small fixed-seed run of every (learner, protocol) pair the
learners accept and of every environment, and what every protocol declares once configured
(events, accountings under both relations, calibration, noise statements).  A refactor must
leave every hash as it is; a change meant to alter results regenerates the record in its own
commit with ``make golden`` (see tests/golden.py).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import golden

WANT = golden.load()


@functools.lru_cache(maxsize=1)
def _computed() -> dict:
    """Every entry, computed once per test process on the pinned code paths."""
    return golden.compute_pinned()


def test_record_covers_every_pair_protocol_and_environment():
    from fedbandit.audit.replay import replay_pairs
    from fedbandit.envs.factory import available_environments
    from fedbandit.protocols import available

    assert {f"run {a}/{b}" for a, b in replay_pairs()[0]} <= set(WANT)
    assert {f"protocol {n}" for n in available()} <= set(WANT)
    instances = {cfg.get("instance", "synthetic") for cfg in golden.golden_configs().values()}
    assert set(available_environments()) <= instances


@pytest.mark.parametrize("label", sorted(WANT))
def test_golden_entry_unchanged(label):
    assert golden.compare({label: WANT[label]}, {label: _computed()[label]}) == []


def test_golden_sees_one_bit():
    """The check can fail: the noise draws times 1 + 2⁻⁴⁰ (a change in the last bits) move the released
    statistics' hash (not the regret's: no arm choice changes).  Both computed here, in this process,
    so the comparison holds on any host's kernels."""
    from fedbandit.audit.broken import planted_noise

    label = "run fixed-batch/silo-ldp"
    clean = golden.compute([label])
    with planted_noise(1.0 + 2.0**-40):
        got = golden.compute([label])
    changed = golden.compare(clean, got)
    assert changed == [f"{label}: released changed"]


def test_pinned_environment_caps_the_kernels():
    """The record's subprocess runs without numpy's AVX-512 paths and on OpenBLAS's Haswell kernels
    (on an AVX-512 host, without the pin, both would report the wider kernels).

    numpy's paths are its dispatch targets that are enabled: ``NPY_DISABLE_CPU_FEATURES`` turns
    off the AVX-512 targets (``X86_V4``, ``AVX512_ICL``, ...) and leaves the CPU's own feature
    flags (``AVX512F``) reported as the CPU has them, so the probe reads the targets."""
    import os
    import subprocess
    import sys

    probe = ("from numpy._core._multiarray_umath import __cpu_dispatch__ as targets, __cpu_features__ as f\n"
             "print(*[t for t in targets if f.get(t)] or ['none'], sep=',')\n"
             "try:\n"
             "    from threadpoolctl import threadpool_info\n"
             "    print(*sorted({i.get('architecture') for i in threadpool_info() if i['internal_api'] == 'openblas'}))\n"
             "except ImportError:\n"
             "    print('Haswell')\n")
    out = subprocess.run([sys.executable, "-c", probe], env={**os.environ, **golden.PINNED_ENV}, capture_output=True,
                         text=True, check=True).stdout.split()
    # at most the AVX2 target (X86_V3; none on a CPU without AVX2), never an AVX-512 one
    assert out[0] in ("X86_V3", "none") and out[1:] == ["Haswell"], out


def test_hash_is_canonical():
    """An int hashes as the float it equals (a count may become a float), a record as a dict of its
    set entries; a different bit or type is a different hash."""
    from fedbandit.accounting import Accounting

    assert golden.digest(3) == golden.digest(3.0) and golden.digest(np.arange(3)) == golden.digest(np.arange(3.0))
    assert golden.digest(0.1) != golden.digest(np.nextafter(0.1, 1.0))
    assert golden.digest("3") != golden.digest(3) and golden.digest([1.0]) != golden.digest((1.0, 1.0))
    a = Accounting("none", float("inf"), 0.0, float("inf"), 0.0, "none", "t")
    assert golden.record(a) == {k: v for k, v in a.as_dict().items() if k != "private"}

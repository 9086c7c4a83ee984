"""The speed-ups of the SecAgg simulation (issue #25) change no outcome.

* Shared signature verdicts (``protocol._SharedVerdicts``): one memo per session, keyed by
  the exact (public key, transcript parts, signature).  Tested: a broadcast message altered
  for one recipient only is still rejected by that recipient, whichever order the clients
  check in; a run gives the same result with and without the memo; the number of real
  verifications is the written-out count (about 5n with the memo, 2n^2 without).
* Shamir sharing limb by limb over F_p, p = 2^31 - 1, extended by exact float64 matrix
  products (``shamir._matmul_mod``): equal to modular arithmetic on Python integers written
  out here (a plain Lagrange interpolation of every limb), on dense and sparse, sorted and
  unsorted point sets, across the 2048-term blocks of the exact products.

Every assertion is exact: no statistical test.
"""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

import fedbandit.secagg.protocol as proto
import fedbandit.secagg.shamir as shamir_mod
from fedbandit.secagg.attacks import _Run
from fedbandit.secagg.errors import SecAggIntegrityError
from fedbandit.secagg.protocol import AdvertiseKeys, run_secagg
from fedbandit.secagg.shamir import LIMBS, PRIME, add_to_share, shamir_reconstruct, shamir_share, share_limbs


# ------------------------------------------------------------------ shared verdicts
def _tampered_roster(run, roster, how):
    bad = dict(roster)
    if how == "key":  # the server swaps client 3's encryption key, keeping its signature
        evil = proto.X25519PrivateKey.generate().public_key().public_bytes_raw()
        bad[3] = AdvertiseKeys(3, evil, roster[3].s_pk, roster[3].signature)
    else:  # one bit of client 3's signature flipped
        sig = bytearray(roster[3].signature)
        sig[5] ^= 1
        bad[3] = replace(roster[3], signature=bytes(sig))
    return bad


@pytest.mark.parametrize("how", ["key", "signature"])
@pytest.mark.parametrize("tampered_first", [False, True])
def test_roster_entry_tampered_for_one_recipient_is_rejected_by_it(how, tampered_first):
    run = _Run(6, 4, False, 4, 8, 0)
    roster = run.server.advertise([run.clients[i].advertise_keys() for i in run.ids])
    bad = _tampered_roster(run, roster, how)
    victim = 1 if tampered_first else 6
    honest = [i for i in run.ids if i != victim]
    if not tampered_first:
        for i in honest:  # every genuine verdict is in the memo before the victim checks
            run.clients[i].share_keys(roster)
        assert run.verdicts.hits > 0
    with pytest.raises(SecAggIntegrityError, match="not signed by client 3") as exc:
        run.clients[victim].share_keys(bad)
    assert (exc.value.party, exc.value.round) == (3, "AdvertiseKeys")
    if tampered_first:  # the rejected copy does not poison the genuine message's verdict
        for i in honest:
            run.clients[i].share_keys(roster)


@pytest.mark.parametrize("tampered_first", [False, True])
def test_consistency_signature_altered_for_one_recipient_is_rejected_by_it(tampered_first):
    run = _Run(6, 4, False, 4, 8, 0)
    u3 = run.to_masked()
    sigs = run.server.consistency_check([run.clients[i].consistency_check(u3) for i in u3])
    forged = dict(sigs)
    s = bytearray(sigs[2])
    s[40] ^= 1
    forged[2] = bytes(s)
    victim = u3[0] if tampered_first else u3[-1]
    honest = [i for i in u3 if i != victim]
    if not tampered_first:
        for i in honest:
            run.clients[i].unmask(sigs)
    with pytest.raises(SecAggIntegrityError, match="client 2's signature does not verify") as exc:
        run.clients[victim].unmask(forged)
    assert (exc.value.party, exc.value.round) == (2, "ConsistencyCheck")
    if tampered_first:
        for i in honest:
            run.clients[i].unmask(sigs)


def _counting_verify(monkeypatch):
    calls = []
    real = proto._verify

    def counted(pk, signature, message):
        calls.append(1)
        return real(pk, signature, message)

    monkeypatch.setattr(proto, "_verify", counted)
    return calls


def test_run_is_identical_with_and_without_shared_verdicts(monkeypatch):
    n, t, length, bits = 9, 6, 16, 12
    x = np.random.default_rng(3).integers(0, 2**bits, size=(n, length))
    dropouts = {1: [9], 2: [1], 4: [2]}
    # 9 clients advertise keys, 8 share them, 7 send masked inputs (clients 2..8), 7 sign the
    # survivor list, 6 answer the unmasking request
    adv, shared, masked, signed, answered = 9, 8, 7, 7, 6

    calls = _counting_verify(monkeypatch)
    with_memo = run_secagg(x, bits=bits, threshold=t, dropouts=dropouts)
    # written out: each distinct message verified once, by the server
    assert len(calls) == adv + shared + masked + signed + answered
    memo = with_memo.server._verdicts
    assert memo.checks == adv + signed  # the broadcast ones go through the memo ...
    # ... and the clients' checks of them are hits: the other roster entries, all signatures on U_3
    assert memo.hits == shared * (adv - 1) + answered * signed

    calls.clear()
    monkeypatch.setattr(proto, "_share_verdicts", lambda parties: None)  # the memo switched off
    without = run_secagg(x, bits=bits, threshold=t, dropouts=dropouts)
    assert without.server._verdicts is None
    assert len(calls) == adv + shared * (adv - 1) + shared + masked + signed + answered * signed + answered

    expected = x[1:8].sum(0) % 2**bits  # clients 2..8
    for r in (with_memo, without):
        assert r.survivors == [2, 3, 4, 5, 6, 7, 8]
        assert r.total.dtype == np.uint64
        assert np.array_equal(r.total, expected)
    assert with_memo.total.tobytes() == without.total.tobytes()
    assert with_memo.dropped == without.dropped


def test_each_run_has_its_own_memo_shared_by_all_its_parties():
    x = np.random.default_rng(0).integers(0, 2**8, size=(5, 3))
    a, b = run_secagg(x, bits=8, threshold=3), run_secagg(x, bits=8, threshold=3)
    for r in (a, b):
        assert {id(c._verdicts) for c in r.clients.values()} == {id(r.server._verdicts)}
    assert a.server._verdicts is not b.server._verdicts


# ------------------------------------------------------------------ Shamir, limb by limb over F_p
def _interp(points, z):
    """Lagrange interpolation over F_p with Python integers, written out: the polynomial through ``points`` at z."""
    total = 0
    for xi, yi in points.items():
        num, den = 1, 1
        for xj in points:
            if xj != xi:
                num, den = num * (z - xj) % PRIME, den * (xi - xj) % PRIME
        total += yi * num * pow(den, -1, PRIME)
    return total % PRIME


def _limb(secret, k):
    return (secret >> (30 * k)) & (2**30 - 1)


@pytest.mark.parametrize(
    "t, points",
    [
        (1, tuple(range(1, 6))),
        (4, (1, 2, 3, 4, 5, 6, 7)),
        (34, tuple(range(1, 51))),
        (67, tuple(range(1, 101))),
        (50, tuple(range(3, 151, 2)) + (1, 2)),  # unsorted
        (20, tuple(random.Random(5).sample(range(1, 3000), 40))),  # sparse
        (6, (PRIME - 1, 1, 77, 12345, 2**30, 2**31 - 3)),  # the largest points
    ],
)
def test_shares_lie_on_one_polynomial_per_limb_through_the_secret(t, points):
    rng = random.Random(t)
    for _ in range(2):
        secret = rng.randrange(1 << 256)
        shares = shamir_share(secret, t, points)
        assert list(shares) == list(points) and all(shamir_mod.is_share(v) for v in shares.values())
        for k in range(LIMBS):
            base = {0: _limb(secret, k), **{x: int(share_limbs(shares[x])[k]) for x in points[: t - 1]}}
            for x in points[t - 1 :]:
                assert int(share_limbs(shares[x])[k]) == _interp(base, x)
        for subset in (points[:t], points[-t:]):
            assert shamir_reconstruct({x: shares[x] for x in subset}, t) == secret


@pytest.mark.parametrize("inner", [1, 7, 2048, 2049, 5000])
def test_matmul_mod_is_exact(inner):
    rng = random.Random(inner)
    a = [[rng.choice([0, 1, PRIME - 1, rng.randrange(PRIME)]) for _ in range(inner)] for _ in range(3)]
    b = [[rng.choice([0, PRIME - 1, rng.randrange(PRIME)]) for _ in range(4)] for _ in range(inner)]
    got = shamir_mod._matmul_mod(np.array(a, dtype=np.int64), np.array(b, dtype=np.int64))
    want = [[sum(a[i][k] * b[k][j] for k in range(inner)) % PRIME for j in range(4)] for i in range(3)]
    assert got.tolist() == want


def test_the_first_t_minus_one_shares_are_the_uniform_draws(monkeypatch):
    stream = np.random.default_rng(7)
    draws = []

    def uniform(shape):
        draws.append(stream.integers(0, PRIME, size=shape))
        return draws[-1]

    secret, t, points = random.Random(8).randrange(1 << 256), 40, tuple(range(1, 61))
    with monkeypatch.context() as m:  # only the sharing's draws come from the seeded stream
        m.setattr(shamir_mod, "_uniform", uniform)
        shares = shamir_share(secret, t, points)
    (drawn,) = draws
    assert drawn.shape == (LIMBS, t - 1)
    for k in range(LIMBS):
        assert [int(share_limbs(shares[x])[k]) for x in points[: t - 1]] == drawn[k].tolist()
    assert shamir_reconstruct(shares, t) == secret  # all 60: the consistency check passes
    bad = dict(shares)
    bad[5] = add_to_share(bad[5], 1, limb=3)
    with pytest.raises(SecAggIntegrityError):
        shamir_reconstruct(bad, t)


def test_uniform_draws_reject_the_one_value_outside_the_field(monkeypatch):
    words = iter([b"\xff\xff\xff\xff" * 2 + b"\x05\x00\x00\x00", b"\xff\xff\xff\x7f" * 2, b"\x01\x00\x00\x00" * 2])
    monkeypatch.setattr(shamir_mod.os, "urandom", lambda n: next(words))
    # 0xffffffff & (2^31 - 1) = p: rejected and drawn again (twice here), 5 kept
    assert shamir_mod._uniform((3,)).tolist() == [1, 1, 5]


def test_reconstruct_many_batches_secrets_and_names_the_bad_ones():
    rng = random.Random(3)
    secrets_ = [rng.randrange(1 << 256) for _ in range(5)]
    maps = shamir_mod.shamir_share_many(secrets_, 4, range(1, 9))
    maps[1] = {x: maps[1][x] for x in (2, 3, 5, 7, 8)}  # another point set: its own batch
    maps[3] = dict(maps[3])
    maps[3][4] = add_to_share(maps[3][4], 9, limb=8)  # one wrong share of secret 3
    got = shamir_mod.shamir_reconstruct_many(maps, 4)
    assert got[:3] + got[4:] == secrets_[:3] + secrets_[4:] and got[3] == shamir_mod.INCONSISTENT
    # consistent shares of limbs that no 256-bit secret has: out of range
    high = {x: add_to_share(maps[0][x], PRIME - 1, limb=8) for x in maps[0]}  # the top limb moved by -1 everywhere
    if _limb(secrets_[0], 8) == 0:  # the top limb wraps to p - 1, far above 2^16
        assert shamir_mod.shamir_reconstruct_many([high], 4) == [shamir_mod.OUT_OF_RANGE]
    zero = {x: 0 for x in range(1, 5)}
    assert shamir_mod.shamir_reconstruct_many([zero], 4) == [0]
    wrapped = {x: add_to_share(0, PRIME - 1, limb=8) for x in range(1, 5)}  # a constant polynomial: limb 8 = p - 1
    assert shamir_mod.shamir_reconstruct_many([wrapped], 4) == [shamir_mod.OUT_OF_RANGE]
    with pytest.raises(SecAggIntegrityError, match="do not encode a secret"):
        shamir_reconstruct(wrapped, 4)

"""The two speed-ups of the SecAgg simulation (issue #25) change no outcome.

* Shared signature verdicts (``protocol._SharedVerdicts``): one memo per session, keyed by
  the exact (public key, transcript, signature) bytes.  Tested: a broadcast message altered
  for one recipient only is still rejected by that recipient, whichever order the clients
  check in; a run gives the same result with and without the memo; the number of real
  verifications is the written-out count (about 5n with the memo, 2n^2 without).
* Shamir shares from the Newton form (``shamir._newton_shares``): equal to a plain
  reference (the old Horner evaluation of the same polynomial in monomial form, written
  out here), on dense point sets that cross several reductions mod p and on sparse ones.

Every assertion is exact: no statistical test.
"""

from __future__ import annotations

import random
from dataclasses import replace
from math import comb, factorial

import numpy as np
import pytest

import fedbandit.secagg.protocol as proto
import fedbandit.secagg.shamir as shamir_mod
from fedbandit.secagg.attacks import _Run
from fedbandit.secagg.errors import SecAggIntegrityError
from fedbandit.secagg.protocol import AdvertiseKeys, run_secagg
from fedbandit.secagg.shamir import PRIME, shamir_reconstruct, shamir_share

P = (1 << 521) - 1


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


# ------------------------------------------------------------------ Shamir, Newton form
def _poly_mul_linear(poly, root):
    """poly(x) * (x - root), coefficients lowest first, over the integers."""
    out = [0] * (len(poly) + 1)
    for k, c in enumerate(poly):
        out[k + 1] += c
        out[k] -= root * c
    return out


def _monomial_from_newton(diffs):
    """a_k (mod p) with sum_k a_k x^k = sum_j D_j C(x, j), C(x, j) = x (x-1) ... (x-j+1) / j!."""
    t = len(diffs)
    a = [0] * t
    falling = [1]  # x (x-1) ... (x-j+1)
    for j in range(t):
        inv = pow(factorial(j), -1, P)
        for k, c in enumerate(falling):
            a[k] = (a[k] + diffs[j] * c * inv) % P
        falling = _poly_mul_linear(falling, j)
    return a


def _horner(coeffs, x):
    """The pre-Newton evaluation of shamir_share: Horner over the monomial coefficients."""
    acc = 0
    for a in reversed(coeffs):
        acc = acc * x + a
    return acc % P


@pytest.mark.parametrize(
    "t, points",
    [
        (1, tuple(range(1, 6))),
        (4, (1, 2, 3, 4, 5, 6, 7)),
        (34, tuple(range(1, 51))),
        (67, tuple(range(1, 101))),  # 100 steps: three reductions mod p
        (101, tuple(range(3, 151, 2)) + (1, 2)),  # dense, unsorted, 150 steps
        (20, tuple(random.Random(5).sample(range(1, 3000), 40))),  # sparse: term by term
        (6, (2**32 - 1, 1, 77, 12345)),
    ],
)
def test_newton_shares_equal_the_old_horner_on_the_same_polynomial(t, points):
    rng = random.Random(t)
    for _ in range(3):
        diffs = [rng.randrange(1 << 256)] + [rng.randrange(P) for _ in range(t - 1)]
        diffs[-1] = P - 1 if t > 1 else diffs[-1]  # the largest field element in the top lane
        coeffs = _monomial_from_newton(diffs)
        assert coeffs[0] == diffs[0]  # f(0) = D_0: the secret is the constant term
        got = shamir_mod._newton_shares(diffs, points)
        assert list(got) == list(points)
        assert got == {x: _horner(coeffs, x) for x in points}
        assert got == {x: sum(d * comb(x, j) for j, d in enumerate(diffs)) % P for x in points}


def test_newton_draw_is_a_bijection_of_the_monomial_coefficients():
    """D -> a is triangular with diagonal 1/j!: a_{t-1} = D_{t-1} / (t-1)!, and the differences
    of f at 0 give D back (so uniform D is uniform a, the textbook draw)."""
    rng = random.Random(11)
    t = 12
    diffs = [rng.randrange(P) for _ in range(t)]
    a = _monomial_from_newton(diffs)
    assert a[-1] == diffs[-1] * pow(factorial(t - 1), -1, P) % P
    values = [_horner(a, x) for x in range(t)]
    back = [sum((-1) ** (j - i) * comb(j, i) * values[i] for i in range(j + 1)) % P for j in range(t)]
    assert back == diffs


def test_shamir_share_uses_its_draws_as_newton_differences(monkeypatch):
    stream = random.Random(7)
    draws = []

    def randbelow(bound):
        assert bound == PRIME
        draws.append(stream.randrange(bound))
        return draws[-1]

    secret, t, points = random.Random(8).randrange(1 << 256), 40, tuple(range(1, 61))
    with monkeypatch.context() as m:  # only the sharing's draws come from the seeded stream
        m.setattr(shamir_mod.secrets, "randbelow", randbelow)
        shares = shamir_share(secret, t, points)
    assert len(draws) == t - 1
    coeffs = _monomial_from_newton([secret] + draws)
    assert shares == {x: _horner(coeffs, x) for x in points}
    for subset in (points[:t], points[-t:], points[10 : 10 + t]):
        assert shamir_reconstruct({x: shares[x] for x in subset}, t) == secret
    assert shamir_reconstruct(shares, t) == secret  # all 60: the consistency check passes
    bad = dict(shares)
    bad[5] = (bad[5] + 1) % P
    with pytest.raises(SecAggIntegrityError):
        shamir_reconstruct(bad, t)

"""Attacks on secure aggregation: every one aborts (naming the party and the round), never a wrong sum.

Each attack of :mod:`fedbandit.secagg.attacks` runs against the real protocol; the tests
also run deliberately broken variants of the checks (commitments switched off, the
Shamir consistency check switched off, a threshold below n/2) to show that the checks are
what stops the attacks.  No statistical test here: every assertion is exact.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fedbandit.secagg.protocol as proto
import fedbandit.secagg.shamir as shamir_mod
from fedbandit.secagg.attacks import ATTACKS, _Run, run_attack
from fedbandit.secagg.errors import SecAggAbort, SecAggError, SecAggIntegrityError
from fedbandit.secagg.protocol import (
    AdvertiseKeys,
    RevealedShare,
    SecAggClient,
    SecAggServer,
    UnmaskResponse,
    check_threshold,
    generate_identities,
    run_secagg,
)
from fedbandit.secagg.shamir import (
    LIMBS,
    PRIME,
    add_to_share,
    lagrange_at_zero,
    shamir_consistent,
    shamir_reconstruct,
    shamir_share,
    share_limbs,
)

# attack -> (error class, blamed party, round, message pattern)
EXPECTED = {
    "tampered-share": (SecAggIntegrityError, 2, "Unmasking", r"client 2's share of client 1's self-mask seed does not match"),
    "tampered-ciphertext": (SecAggIntegrityError, 1, "ShareKeys", r"ciphertext client 2 received from client 1 failed authentication"),
    "replayed-share": (SecAggIntegrityError, 3, "Unmasking", r"client 3's share of client 1's .* does not match .*commitment"),
    "outside-survivor": (SecAggIntegrityError, 7, "Unmasking", r"client 7, a client that dropped before the masked-input round"),
    "inconsistent-dealer": (SecAggIntegrityError, 1, "ShareKeys", r"do not lie on one polynomial of degree 3 \(7 shares\)"),
    "equivocation": (SecAggIntegrityError, 5, "ConsistencyCheck", r"client 5's signature does not verify on the survivor list"),
}


@pytest.mark.parametrize("attack", sorted(EXPECTED))
def test_attack_aborts_naming_party_and_round(attack):
    out = run_attack(attack)
    cls, party, round_, pattern = EXPECTED[attack]
    assert out.aborted and type(out.error) is cls, out.describe()
    assert (out.error.party, out.error.round) == (party, round_)
    assert f"client {party}" in str(out.error) and f"round {round_}" in str(out.error)
    assert out.error.__class__.__mro__[1:3] == (SecAggError, ValueError)
    assert re.search(pattern, str(out.error)), str(out.error)
    assert out.total is None and not out.wrong_sum and not out.input_recovered


def test_every_attack_is_tested():
    assert set(EXPECTED) | {"equivocation-selective"} == set(ATTACKS)


def test_equivocation_selective_needs_threshold_above_half():
    """Forwarding to each group only the signatures on its own list: with t > n/2 the minority aborts and
    nothing leaks; with t <= n/2 (explicit opt-in) the server recovers client 1's input exactly."""
    safe = run_attack("equivocation-selective", n_clients=7)  # t = 4
    assert isinstance(safe.error, SecAggAbort) and "only 3 clients signed the survivor list" in str(safe.error)
    assert safe.leaked is None and not safe.input_recovered
    assert safe.total is not None and not safe.wrong_sum  # the majority's list is consistent: the honest sum
    unsafe = run_attack("equivocation-selective", n_clients=7, threshold=3, allow_small_threshold=True)
    assert unsafe.error is None and unsafe.input_recovered  # the attack works: the threshold rule is what stops it
    # forwarding every signature is caught whatever t
    loud = run_attack("equivocation", n_clients=7, threshold=3, allow_small_threshold=True)
    assert isinstance(loud.error, SecAggIntegrityError) and not loud.input_recovered


def test_forwarded_signature_from_outside_the_list_blames_the_server():
    run = _Run(5, 3, False, 4, 8, 0)
    u3 = run.to_masked()
    short = u3[:-1]  # client 5 is told it is not a survivor... but it is forwarded to client 1 anyway
    sigs = {i: run.clients[i].consistency_check(short).signature for i in short}
    sigs[5] = b"\0" * 64
    with pytest.raises(SecAggIntegrityError, match="not in the survivor list") as exc:
        run.clients[1].unmask(sigs)
    assert exc.value.party == "server" and exc.value.round == "ConsistencyCheck"


def test_fewer_than_t_consistency_signatures_abort():
    run = _Run(5, 3, False, 4, 8, 0)
    u3 = run.to_masked()
    sigs = {i: run.clients[i].consistency_check(u3).signature for i in u3}
    with pytest.raises(SecAggAbort, match="only 2 clients signed"):
        run.clients[1].unmask({1: sigs[1], 2: sigs[2]})
    with pytest.raises(SecAggAbort, match="only 2 clients survived round ConsistencyCheck"):
        run.server.consistency_check([proto.ConsistencySignature(i, sigs[i]) for i in (1, 2)])


# ---------------------------------------------------------------- the checks are what stops the attacks
def _tampered_run_with_t_responses(monkeypatch=None, disable_commitments=False):
    """n = 7, t = 4, exactly t responders (3 drop in Unmasking); client 2 alters a seed share in range."""
    if disable_commitments:
        monkeypatch.setattr(proto, "_commit", lambda *a: b"\0" * 32)
    run = _Run(7, 4, False, 8, 16, 1)
    u3, resp = run.to_unmask()
    resp = {i: resp[i] for i in (1, 2, 3, 4)}
    r = resp[2]
    seeds = dict(r.seed_shares)
    # moved so that interpolating the t responders' shares gives client 5's seed + 1 (a valid seed)
    lam = lagrange_at_zero((1, 2, 3, 4))[1]
    seeds[5] = RevealedShare(add_to_share(seeds[5].value, pow(lam, -1, PRIME)), seeds[5].salt)
    bad = UnmaskResponse(2, r.mask_key_shares, seeds)
    resp[2] = replace(bad, signature=run.sign(2, "Unmasking", bad.payload()))
    return run, u3, list(resp.values())


def test_tampered_share_with_exactly_t_responders_aborts():
    """With exactly t shares no consistency check can see the tampering: the commitment does."""
    run, u3, responses = _tampered_run_with_t_responses()
    with pytest.raises(SecAggIntegrityError, match="client 2's share of client 5's self-mask seed") as exc:
        run.server.unmask(responses)
    assert (exc.value.party, exc.value.round) == (2, "Unmasking")


def test_without_commitments_the_tampered_share_gives_a_wrong_sum(monkeypatch):
    """The broken variant (commitments always match) returns a wrong sum silently: the old bug."""
    run, u3, responses = _tampered_run_with_t_responses(monkeypatch, disable_commitments=True)
    total = run.server.unmask(responses)
    assert not np.array_equal(total, run.expected(u3))


def test_without_the_shamir_check_an_inconsistent_dealer_gives_a_wrong_sum(monkeypatch):
    monkeypatch.setattr(shamir_mod, "_consistent", lambda *a: True)
    out = run_attack("inconsistent-dealer")
    assert out.error is None and out.wrong_sum  # the seed reconstructed from the first t shares is off by one


@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_any_tampered_share_aborts_hypothesis(data):
    """Random n, t, dropouts, responder, secret and offset: an altered revealed share always aborts."""
    n = data.draw(st.integers(4, 7))
    t = data.draw(st.integers(n // 2 + 1, n))
    n_drop = data.draw(st.integers(0, n - t))
    run = _Run(n, t, False, 3, 8, data.draw(st.integers(0, 100)))
    u3 = run.to_masked(masked_ids=list(range(1, n - n_drop + 1)))
    sigs = run.server.consistency_check([run.clients[i].consistency_check(u3) for i in u3])
    resp = {i: run.clients[i].unmask(sigs) for i in u3}
    who = data.draw(st.sampled_from(u3))
    r = resp[who]
    parts = [p for p in ("mask_key_shares", "seed_shares") if getattr(r, p)]
    part = data.draw(st.sampled_from(parts))
    shares = dict(getattr(r, part))
    v = data.draw(st.sampled_from(sorted(shares)))
    delta = data.draw(st.integers(1, PRIME - 1))
    limb = data.draw(st.integers(0, LIMBS - 1))
    shares[v] = RevealedShare(add_to_share(shares[v].value, delta, limb), shares[v].salt)
    bad = replace(r, **{part: shares})
    resp[who] = replace(bad, signature=run.sign(who, "Unmasking", bad.payload()))
    with pytest.raises(SecAggIntegrityError) as exc:
        run.server.unmask(list(resp.values()))
    assert (exc.value.party, exc.value.round) == (who, "Unmasking")


# ---------------------------------------------------------------- signatures
def test_altered_masked_input_in_transit_is_rejected():
    run = _Run(5, 3, False, 6, 8, 0)
    roster = run.server.advertise([run.clients[i].advertise_keys() for i in run.ids])
    inboxes = run.server.share_keys([run.clients[i].share_keys(roster) for i in run.ids])
    msgs = [run.clients[i].masked_input(run.x[i - 1], inboxes[i]) for i in run.ids]
    y = msgs[1].y.copy()
    y[0] ^= 1  # still in range
    msgs[1] = replace(msgs[1], y=y)
    with pytest.raises(SecAggIntegrityError, match="MaskedInputCollection message of client 2 is not signed") as exc:
        run.server.masked_inputs(msgs)
    assert (exc.value.party, exc.value.round) == (2, "MaskedInputCollection")


def test_substituted_public_key_is_rejected_by_clients():
    """A server that swaps client 3's encryption key for its own (man in the middle) is caught."""
    run = _Run(5, 3, False, 4, 8, 0)
    roster = run.server.advertise([run.clients[i].advertise_keys() for i in run.ids])
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    evil = X25519PrivateKey.generate().public_key().public_bytes_raw()
    roster[3] = AdvertiseKeys(3, evil, roster[3].s_pk, roster[3].signature)
    with pytest.raises(SecAggIntegrityError, match="not signed by client 3") as exc:
        run.clients[1].share_keys(roster)
    assert (exc.value.party, exc.value.round) == (3, "AdvertiseKeys")


def test_message_replayed_from_another_session_or_round_is_rejected():
    a, b = _Run(5, 3, False, 4, 8, 0), _Run(5, 3, False, 4, 8, 0)
    msgs = [b.clients[i].advertise_keys() for i in b.ids]
    foreign = a.clients[2].advertise_keys()  # client 2's keys from session a, signed with a's identity key
    with pytest.raises(SecAggIntegrityError, match="AdvertiseKeys message of client 2 is not signed"):
        b.server.advertise([msgs[0], foreign] + msgs[2:])
    # same session, same sender, another round: a ConsistencyCheck signature is no AdvertiseKeys signature
    u3 = b.to_masked()
    sig = b.clients[2].consistency_check(u3).signature
    fresh = _Run(5, 3, False, 4, 8, 0)
    msgs = [fresh.clients[i].advertise_keys() for i in fresh.ids]
    with pytest.raises(SecAggIntegrityError):
        fresh.server.advertise([msgs[0], replace(msgs[1], signature=sig)] + msgs[2:])


def test_duplicate_unmasking_response_is_rejected():
    run = _Run(5, 3, False, 4, 8, 0)
    u3, resp = run.to_unmask()
    with pytest.raises(SecAggError, match=r"duplicate client id\(s\) \[2\] in round Unmasking"):
        run.server.unmask(list(resp.values()) + [resp[2]])


# ---------------------------------------------------------------- threshold
@pytest.mark.parametrize("n, t", [(7, 3), (7, 2), (100, 50), (100, 35), (2, 1)])
def test_threshold_at_most_half_is_refused(n, t):
    with pytest.raises(ValueError, match=rf"threshold must be an integer in \[{n // 2 + 1}, {n}\].*got {t}"):
        check_threshold(t, n)
    if n <= 7:
        with pytest.raises(ValueError, match="allow_small_threshold=True"):
            run_secagg(np.zeros((n, 2), dtype=np.int64), bits=8, threshold=t)


def test_small_threshold_needs_the_explicit_opt_in():
    x = np.arange(14).reshape(7, 2)
    res = run_secagg(x, bits=8, threshold=3, allow_small_threshold=True)
    np.testing.assert_array_equal(res.total, x.sum(0) % 256)
    assert check_threshold(4, 7) == 4 and check_threshold(7, 7) == 7
    with pytest.raises(ValueError, match=r"threshold must be an integer in \[2, 7\].*got 1"):
        run_secagg(x, bits=8, threshold=1, allow_small_threshold=True)
    with pytest.raises(ValueError, match=r"\[4, 7\].*got 8"):
        check_threshold(8, 7)
    with pytest.raises(TypeError, match="threshold must be an integer"):
        check_threshold(True, 7)
    with pytest.raises(TypeError, match="threshold must be an integer"):
        check_threshold(4.0, 7)
    with pytest.raises(TypeError, match="allow_small_threshold must be a bool"):
        run_secagg(x, bits=8, threshold=3, allow_small_threshold="yes")
    keys, directory = generate_identities(range(1, 8))
    with pytest.raises(ValueError, match=r"\[4, 7\].*got 3"):
        SecAggClient(1, threshold=3, bits=8, length=2, session=b"", identity_key=keys[1], directory=directory)
    with pytest.raises(ValueError, match=r"\[4, 7\].*got 3"):
        SecAggServer(threshold=3, bits=8, length=2, session=b"", directory=directory)


# ---------------------------------------------------------------- Shamir error detection
def test_shamir_detects_up_to_m_minus_t_errors():
    """m = 7 shares, t = 3: every set of 1..4 altered shares is detected; the bound m - t is tight."""
    import itertools

    rng = np.random.default_rng(0)
    secret = 2**256 - 5
    shares = shamir_share(secret, 3, range(1, 8))
    assert shamir_consistent(shares, 3) and shamir_reconstruct(shares, 3) == secret
    for e in range(1, 5):
        for bad in itertools.combinations(shares, e):
            alt = dict(shares)
            for x in bad:  # any nonzero change of any limb
                alt[x] = add_to_share(alt[x], int(rng.integers(1, PRIME)), int(rng.integers(0, LIMBS)))
            with pytest.raises(SecAggIntegrityError, match="do not lie on one polynomial of degree 2"):
                shamir_reconstruct(alt, 3)
    # tight: an adversary who changes m - t + 1 = 5 shares onto other polynomials (one per limb) through
    # the other 2 shares is not detected, and the reconstruction returns its secret
    forged_secret = 42

    def interp(points, z):  # Lagrange over F_p, written out
        total = 0
        for xi, yi in points.items():
            num, den = 1, 1
            for xj in points:
                if xj != xi:
                    num, den = num * (z - xj) % PRIME, den * (xi - xj) % PRIME
            total += yi * num * pow(den, -1, PRIME)
        return total % PRIME

    forged = {}
    for x in range(1, 8):
        share = 0  # the packed share with every limb 0
        for k in range(LIMBS):
            limb_secret = (forged_secret >> (30 * k)) & (2**30 - 1)
            points = {0: limb_secret, **{z: int(share_limbs(shares[z])[k]) for z in (6, 7)}}
            share = add_to_share(share, interp(points, x), k)
        forged[x] = share
    assert forged[6] == shares[6] and forged[7] == shares[7]
    assert sum(forged[x] != shares[x] for x in forged) == 5
    assert shamir_reconstruct(forged, 3) == forged_secret
    # and with exactly t shares nothing can be detected: a share moved by 1/L_1(0) gives secret + 1
    alt = {x: shares[x] for x in (1, 2, 3)}
    alt[2] = add_to_share(alt[2], pow(lagrange_at_zero((1, 2, 3))[1], -1, PRIME))
    assert shamir_reconstruct(alt, 3) == secret + 1


def test_shamir_rejects_malformed_input():
    with pytest.raises(SecAggError, match="distinct"):
        shamir_share(5, 2, [1, 1, 2])
    with pytest.raises(SecAggError, match=r"secret must be an integer in \[0, 2\^256\)"):
        shamir_share(2**256, 2, [1, 2])
    with pytest.raises(SecAggError, match="not a packed share of field elements"):
        shamir_reconstruct({1: PRIME, 2: 3}, 2)  # a limb equal to p
    with pytest.raises(SecAggAbort, match="need 3 shares"):
        shamir_reconstruct({1: 1, 2: 3}, 3)


# ---------------------------------------------------------------- bad arguments name the parameter
@pytest.mark.parametrize(
    "call, exc, pattern",
    [
        (lambda: proto.prg_mask(b"short", 4, 8), TypeError, "seed must be 32 bytes"),
        (lambda: proto.prg_mask(bytes(32), 0, 8), ValueError, "length"),
        (lambda: proto.prg_mask(bytes(32), 4, 65), ValueError, "bits"),
        (lambda: generate_identities([1, 1]), ValueError, "ids must be distinct"),
        (lambda: generate_identities([0]), ValueError, "ids must be a positive integer"),
        (lambda: generate_identities(5), TypeError, "ids must be an iterable"),
        (lambda: shamir_share(5, 2, [0, 1]), ValueError, r"ids \(share points\) must be integers in \[1, p\)"),
        (lambda: shamir_share(5, 2, None), TypeError, "ids must be an iterable"),
        (lambda: shamir_share(5, 3, [1, 2]), ValueError, r"threshold must lie in \[1, 2\]"),
        (lambda: shamir_reconstruct([1, 2], 2), TypeError, "shares must be a mapping"),
        (lambda: run_secagg(np.zeros((3, 2)), bits=8, threshold=2), TypeError, "inputs must be integers"),
        (lambda: run_secagg(np.full((3, 2), 256), bits=8, threshold=2), ValueError, r"inputs must lie in \[0, 2\^8\)"),
        (lambda: run_secagg(np.zeros((1, 2), dtype=int), bits=8, threshold=2), ValueError, "n >= 2 clients"),
        (lambda: run_secagg(np.zeros((3, 2), dtype=int), bits=8, threshold=2, dropouts=[1]), TypeError, "dropouts must be a mapping"),
        (lambda: run_secagg(np.zeros((3, 2), dtype=int), bits=8, threshold=2, dropouts={5: [1]}), ValueError, "dropouts: round"),
        (lambda: run_secagg(np.zeros((3, 2), dtype=int), bits=8, threshold=2, session="abc"), TypeError, "session must be bytes"),
        (lambda: run_attack("nope"), ValueError, "attack must be one of"),
        (lambda: run_attack("tampered-share", n_clients=3), ValueError, "n_clients"),
    ],
)
def test_bad_arguments_name_the_parameter(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


def _short_inbox_attack(victim_checks: bool, n: int = 7, length: int = 8, bits: int = 16):
    """A malicious server hands client 1 the ciphertexts of ONE other client only (client 2, which
    colludes with the server: it gives the server its secret mask key), so that client 1's
    pairwise masks cancel in nothing but the pair (1, 2).  Every other client gets its full inbox.

    Returns (the error client 1 raised, or None; client 1's input as recovered by the server
    and the colluder, or None; client 1's true input).  ``victim_checks=False`` switches off
    client 1's own ``len(u2) < t`` check (by lowering the threshold it compares with to 1),
    to show what that check alone prevents.
    """
    run = _Run(n, n // 2 + 1, False, length, bits, 0)
    victim, colluder = 1, 2
    roster = run.server.advertise([run.clients[i].advertise_keys() for i in run.ids])
    inboxes = run.server.share_keys([run.clients[i].share_keys(roster) for i in run.ids])
    short = {colluder: inboxes[victim][colluder]}  # 1 other client, fewer than t - 1 = 3 others
    client = run.clients[victim]
    if not victim_checks:
        client.threshold = 1  # the check `len(u2) < threshold` can no longer fire
    try:
        masked = {victim: client.masked_input(run.x[victim - 1], short)}
    except SecAggError as exc:
        return exc, None, run.x[victim - 1].astype(np.uint64)
    masked |= {i: run.clients[i].masked_input(run.x[i - 1], inboxes[i]) for i in run.ids if i != victim}
    u3 = run.server.masked_inputs(masked.values())
    # the others see a consistent survivor list (client 1 included) and sign it; client 1's own
    # signature is not needed (t others suffice), so the server never asks client 1
    signers = [i for i in u3 if i != victim]
    sigs = run.server.consistency_check([run.clients[i].consistency_check(u3) for i in signers])
    responses = [run.clients[i].unmask(sigs) for i in signers]
    # honest clients reveal their shares of each survivor's self-mask seed b_i, client 1's included
    b_shares = {r.client_id: r.seed_shares[victim].value for r in responses}
    b1 = shamir_reconstruct(b_shares, run.t).to_bytes(32, "big")
    dt = proto._dtype_for(bits)
    y = run.server.masked[victim].astype(dt)
    y -= proto.prg_mask(b1, length, bits)
    # the colluder computes the one pairwise mask client 1 added: +PRG(s_12), since 1 < 2
    peer = proto.X25519PublicKey.from_public_bytes(run.server.roster[victim].s_pk)
    seed = proto._hkdf(run.clients[colluder]._s_sk.exchange(peer), b"fedbandit-secagg-mask", run.session)
    y -= proto.prg_mask(seed, length, bits)
    return None, (y & proto._mask_value(bits, dt)).astype(np.uint64), run.x[victim - 1].astype(np.uint64)


def test_client_refuses_a_short_inbox_that_would_expose_its_input():
    """Round MaskedInputCollection: a client masks with pairwise seeds of the clients it received
    shares from (U_2); the server alone decides that set, so the client itself must refuse a U_2
    smaller than t ([BIK+17] Fig. 4, round 2: "if |U_2| < t, abort").  The server's own check of
    U_2 does not help: the server is the adversary here."""
    error, leaked, _ = _short_inbox_attack(victim_checks=True)
    assert isinstance(error, SecAggAbort), error
    assert "client 1: only 2 clients shared keys, fewer than threshold 4" in str(error)
    assert leaked is None
    # the demonstration of why: without the client's check the server and one colluding client
    # recover client 1's input exactly, although every honest client followed the protocol
    error, leaked, true_input = _short_inbox_attack(victim_checks=False)
    assert error is None
    assert np.array_equal(leaked, true_input)

"""Tests of secure aggregation (fedbandit.secagg.protocol).

The statistical tests (uniformity of a masked vector) use a chi-square test at false-alarm
rate 1e-3. The protocol draws its keys, seeds and session from the operating system's CSPRNG,
so those tests replace that source with a seeded one (:func:`_seeded_crypto`): each run is
then the same, and a correct implementation fails it with probability 1e-3 over the choice of
seed, once, not on every CI run.
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import replace

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fedbandit.accounting.ddg import ddg_params
from fedbandit.mechanisms.ddg import DDGMechanism
from fedbandit.secagg import protocol
from fedbandit.secagg.errors import SecAggAbort, SecAggError
from fedbandit.secagg.protocol import (
    ROUND_NAMES,
    AdvertiseKeys,
    MaskedInput,
    SecAggClient,
    SecAggServer,
    generate_identities,
    prg_mask,
    run_secagg,
)
from fedbandit.secagg.shamir import is_share, shamir_reconstruct, shamir_share


class _SeededX25519:
    """Stands in for ``X25519PrivateKey`` in the protocol module: ``generate`` draws the key from a seeded stream."""

    def __init__(self, draw):
        self._draw = draw

    def generate(self):
        return X25519PrivateKey.from_private_bytes(self._draw(32))

    @staticmethod
    def from_private_bytes(data):
        return X25519PrivateKey.from_private_bytes(data)


def _seeded_crypto(monkeypatch, seed):
    """Make :func:`run_secagg` reproducible: ``os.urandom`` and the X25519 key generation draw from ``seed``.

    The Ed25519 identity keys stay random; they only sign, and no masked value depends on them.
    """
    rng = np.random.default_rng(seed)

    def draw(n):
        return rng.bytes(n)

    monkeypatch.setattr(os, "urandom", draw)
    monkeypatch.setattr(protocol, "X25519PrivateKey", _SeededX25519(draw))


def _expected(x, survivors, bits):
    return x[[i - 1 for i in survivors]].sum(axis=0) % (1 << bits)


def test_no_dropouts():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2**20, size=(6, 33))
    res = run_secagg(x, bits=20, threshold=4)
    assert res.survivors == [1, 2, 3, 4, 5, 6]
    np.testing.assert_array_equal(res.total, x.sum(0) % 2**20)


def test_every_dropout_pattern_small_n():
    """Exhaustive: n = 5, t = 3, every set of up to n - t = 2 dropouts, each at every one of the five rounds."""
    rng = np.random.default_rng(1)
    n, t, bits = 5, 3, 12
    x = rng.integers(0, 2**bits, size=(n, 7))
    runs = 0
    for k in range(0, n - t + 1):
        for ids in itertools.combinations(range(1, n + 1), k):
            for rounds in itertools.product(range(5), repeat=k):
                drops: dict[int, list[int]] = {}
                for i, r in zip(ids, rounds):
                    drops.setdefault(r, []).append(i)
                res = run_secagg(x, bits=bits, threshold=t, dropouts=drops)
                # inputs of clients dropping in the ConsistencyCheck or Unmasking round are still in the sum
                expected_surv = [i for i in range(1, n + 1) if not any(i == j and r < 3 for j, r in zip(ids, rounds))]
                assert res.survivors == expected_surv
                np.testing.assert_array_equal(res.total, _expected(x, res.survivors, bits))
                runs += 1
    assert runs == 1 + 5 * 5 + 10 * 25
    assert len(ROUND_NAMES) == 5


@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_random_dropouts_hypothesis(data):
    n = data.draw(st.integers(3, 9))
    t = data.draw(st.integers(n // 2 + 1, n))
    bits = data.draw(st.sampled_from([2, 8, 16, 17, 33, 64]))
    k = data.draw(st.integers(0, n - t))
    ids = data.draw(st.lists(st.integers(1, n), min_size=k, max_size=k, unique=True))
    rounds = data.draw(st.lists(st.integers(0, 4), min_size=k, max_size=k))
    drops: dict[int, list[int]] = {}
    for i, r in zip(ids, rounds):
        drops.setdefault(r, []).append(i)
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    x = rng.integers(0, 2**bits, size=(n, 5), dtype=np.uint64)
    res = run_secagg(x, bits=bits, threshold=t, dropouts=drops)
    exp = np.zeros(5, dtype=np.uint64)
    for i in res.survivors:
        exp += x[i - 1]  # uint64 wraps mod 2^64, consistent mod 2^bits
    exp &= np.uint64((1 << bits) - 1)
    np.testing.assert_array_equal(res.total, exp)


@pytest.mark.parametrize("round_", [0, 1, 2, 3, 4])
def test_fewer_than_t_survivors_is_an_error(round_):
    x = np.ones((5, 4), dtype=np.int64)
    with pytest.raises(SecAggAbort, match="fewer than"):
        run_secagg(x, bits=8, threshold=4, dropouts={round_: [1, 2]})


def _masked_input_pvalue(monkeypatch, seed):
    x = np.zeros((4, 2**14), dtype=np.int64)  # a very non-uniform input
    _seeded_crypto(monkeypatch, seed)
    res = run_secagg(x, bits=8, threshold=3)
    np.testing.assert_array_equal(res.total, 0)
    y = res.server.masked[2].astype(np.int64)
    return stats.chisquare(np.bincount(y, minlength=256)).pvalue, y


def test_single_masked_vector_is_uniform(monkeypatch):
    """Chi-square test that one client's masked input is uniform mod 2^8 (false alarm 1e-3, seeded)."""
    p, y = _masked_input_pvalue(monkeypatch, 20261207)
    assert p > 1e-3
    # seeded: the same seed gives the same masked vector
    assert np.array_equal(_masked_input_pvalue(monkeypatch, 20261207)[1], y)


def test_uniformity_test_catches_masks_one_bit_short(monkeypatch):
    """The test's power: masks from a PRG that loses its top bit leave the masked input non-uniform."""
    honest = protocol.prg_mask
    monkeypatch.setattr(protocol, "prg_mask", lambda seed, length, bits: honest(seed, length, bits) % (1 << (bits - 1)))
    p, _ = _masked_input_pvalue(monkeypatch, 20261207)
    assert p < 1e-3


def test_prg_is_deterministic_and_full_range():
    seed = bytes(range(32))
    a, b = prg_mask(seed, 1000, 20), prg_mask(seed, 1000, 20)
    np.testing.assert_array_equal(a, b)
    assert prg_mask(bytes(32), 10, 64).dtype == np.uint64


def test_late_input_of_dropped_client_stays_hidden(monkeypatch):
    """Client 3 is declared dropped in round 2; its masked input arriving late is never unmasked (seeded)."""
    _seeded_crypto(monkeypatch, 2)
    rng = np.random.default_rng(2)
    n, t, bits, L = 5, 3, 8, 4096
    x = rng.integers(0, 2**bits, size=(n, L))
    x[2] = 7  # client 3 holds a constant vector
    res = run_secagg(x, bits=bits, threshold=t, dropouts={2: [3]})
    server, clients = res.server, res.clients
    assert 3 not in res.survivors
    np.testing.assert_array_equal(res.total, _expected(x, res.survivors, bits))
    # the server holds mask-key shares of client 3, never seed shares of it
    assert 3 in server.received_mask_key_shares
    assert 3 not in server.received_seed_shares
    # the late input: compute it as client 3 would have, deliver it late
    y3 = _late_masked_input(clients[3], x[2], res.server.u2)
    from fedbandit.secagg.protocol import _masked_payload

    server.late_masked_input(MaskedInput(3, bits, y3, clients[3]._sign("MaskedInputCollection", _masked_payload(bits, y3))))
    # the server's best effort with everything it has: remove the pairwise masks with the
    # reconstructed key of client 3; the self-mask PRG(b_3) remains, so the result looks uniform
    from fedbandit.secagg.protocol import X25519PrivateKey, X25519PublicKey, _hkdf

    sk = shamir_reconstruct(server.received_mask_key_shares[3], t)
    s_sk = X25519PrivateKey.from_private_bytes(sk.to_bytes(32, "big"))
    guess = server.late_inputs[3].astype(np.int64)
    for v in server.u2:
        if v == 3:
            continue
        seed = _hkdf(s_sk.exchange(X25519PublicKey.from_public_bytes(server.roster[v].s_pk)), b"fedbandit-secagg-mask", server.session)
        m = prg_mask(seed, L, bits).astype(np.int64)
        guess = guess - m if 3 < v else guess + m
    guess %= 2**bits
    assert np.mean(guess == 7) < 0.02
    assert stats.chisquare(np.bincount(guess, minlength=256)).pvalue > 1e-3
    # and no client signs a second survivor list (e.g. one that names 3 a survivor) or answers twice
    with pytest.raises(SecAggError, match="twice"):
        clients[1].consistency_check(res.survivors + [3])
    with pytest.raises(SecAggError, match="twice"):
        clients[1].unmask({})


def _late_masked_input(client, x, u2):
    """What client 3 would have sent in round 2 had it not been late (its own masks, recomputed)."""
    from fedbandit.secagg.protocol import X25519PublicKey, _hkdf

    y = np.asarray(x).astype(np.uint16)
    y += prg_mask(client._b_seed, client.length, client.bits)
    for v in u2:
        if v == client.id:
            continue
        peer = X25519PublicKey.from_public_bytes(client._roster[v].s_pk)
        seed = _hkdf(client._s_sk.exchange(peer), b"fedbandit-secagg-mask", client.session)
        if client.id < v:
            y += prg_mask(seed, client.length, client.bits)
        else:
            y -= prg_mask(seed, client.length, client.bits)
    return (y & np.uint16(2**client.bits - 1)).astype(np.uint64)


# ---------------------------------------------------------------- malformed messages
def _setup(n=4, t=3, bits=8, L=6):
    session = b"s" * 16
    keys, directory = generate_identities(range(1, n + 1))
    common = dict(threshold=t, bits=bits, length=L, session=session, directory=directory)
    clients = {i: SecAggClient(i, identity_key=keys[i], **common) for i in range(1, n + 1)}
    server = SecAggServer(**common)
    return clients, server


def _to_round2(n=4, t=3, bits=8, L=6):
    clients, server = _setup(n, t, bits, L)
    roster = server.advertise([c.advertise_keys() for c in clients.values()])
    inboxes = server.share_keys([c.share_keys(roster) for c in clients.values()])
    return clients, server, inboxes


def test_duplicate_ids_rejected():
    clients, server = _setup()
    msgs = [c.advertise_keys() for c in clients.values()]
    with pytest.raises(SecAggError, match="duplicate client id"):
        server.advertise(msgs + [msgs[0]])
    clients, server, inboxes = _to_round2()
    m = clients[1].masked_input(np.zeros(6, dtype=np.int64), inboxes[1])
    with pytest.raises(SecAggError, match="duplicate client id"):
        server.masked_inputs([m, m, clients[2].masked_input(np.zeros(6, dtype=np.int64), inboxes[2])])


def test_bad_keys_rejected():
    clients, server = _setup()
    msgs = [c.advertise_keys() for c in clients.values()]
    with pytest.raises(SecAggError, match="32 bytes"):
        server.advertise(msgs[:-1] + [AdvertiseKeys(4, b"short", msgs[-1].s_pk)])
    roster = {m.client_id: m for m in msgs}
    roster[4] = AdvertiseKeys(4, msgs[0].c_pk, msgs[3].s_pk, msgs[3].signature)  # copies client 1's key
    with pytest.raises(SecAggError, match="duplicate public key"):
        clients[2].share_keys(roster)


def test_wrong_length_and_modulus_rejected():
    clients, server, inboxes = _to_round2()
    good = clients[1].masked_input(np.zeros(6, dtype=np.int64), inboxes[1])
    with pytest.raises(SecAggError, match="length 6"):
        server.masked_inputs([replace(good, y=good.y[:5])])
    with pytest.raises(SecAggError, match="wrong modulus"):
        server.masked_inputs([replace(good, bits=9)])
    with pytest.raises(SecAggError, match="values must lie"):
        server.masked_inputs([replace(good, y=np.full(6, 256, dtype=np.int64))])
    with pytest.raises(SecAggError, match="shape"):
        clients[2].masked_input(np.zeros(7, dtype=np.int64), inboxes[2])
    with pytest.raises(SecAggError, match="lie in"):
        clients[2].masked_input(np.full(6, 300), inboxes[2])


def test_tampered_ciphertext_rejected():
    clients, server, inboxes = _to_round2()
    box = dict(inboxes[2])
    ct = bytearray(box[1].ciphertext)
    ct[-1] ^= 1
    box[1] = replace(box[1], ciphertext=bytes(ct))
    with pytest.raises(SecAggError, match="authentication"):
        clients[2].masked_input(np.zeros(6, dtype=np.int64), box)
    box = dict(inboxes[2])
    box[1], box[3] = box[3], box[1]  # misrouted: header/AAD do not match
    with pytest.raises(SecAggError, match="authentication"):
        clients[2].masked_input(np.zeros(6, dtype=np.int64), box)


def test_unmasking_response_with_both_shares_rejected():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, size=(4, 6))
    clients, server, inboxes = _to_round2()
    msgs = [clients[i].masked_input(x[i - 1], inboxes[i]) for i in (1, 2, 3)]  # 4 drops
    survivors = server.masked_inputs(msgs)
    with pytest.raises(SecAggError, match="omits"):
        clients[1].consistency_check([2, 3])
    with pytest.raises(SecAggError, match="before MaskedInputCollection"):
        clients[4].consistency_check(survivors)
    with pytest.raises(SecAggError, match="before ConsistencyCheck"):
        clients[1].unmask({})
    sigs = server.consistency_check([clients[i].consistency_check(survivors) for i in survivors])
    responses = [clients[i].unmask(sigs) for i in survivors]
    bad = replace(responses[0], seed_shares={**responses[0].seed_shares, 4: responses[0].seed_shares[1]})
    with pytest.raises(SecAggError, match="exactly"):
        server.unmask([bad] + responses[1:])
    total = server.unmask(responses)
    np.testing.assert_array_equal(total, x[:3].sum(0) % 256)


def test_protocol_order_and_bad_arguments():
    clients, server = _setup()
    with pytest.raises(SecAggError, match="before"):
        server.masked_inputs([])
    with pytest.raises(ValueError, match="threshold"):
        run_secagg(np.zeros((3, 2), dtype=np.int64), bits=8, threshold=4)
    with pytest.raises(ValueError, match="bits"):
        run_secagg(np.zeros((3, 2), dtype=np.int64), bits=1, threshold=2)
    with pytest.raises(ValueError, match="dropouts: client id 7"):
        run_secagg(np.zeros((3, 2), dtype=np.int64), bits=8, threshold=2, dropouts={1: [7]})
    keys, directory = generate_identities([1, 2, 3])
    with pytest.raises(SecAggError, match="client id"):
        SecAggClient(0, threshold=2, bits=8, length=3, session=b"", identity_key=keys[1], directory=directory)
    with pytest.raises(SecAggError, match="identity key"):
        SecAggClient(2, threshold=2, bits=8, length=3, session=b"", identity_key=keys[1], directory=directory)
    with pytest.raises(SecAggError, match="not in the directory"):
        SecAggClient(4, threshold=2, bits=8, length=3, session=b"", identity_key=keys[1], directory=directory)


def test_shamir_any_t_subset_reconstructs():
    secret = 2**255 + 12345
    shares = shamir_share(secret, 3, range(1, 7))
    for subset in itertools.combinations(shares, 3):
        assert shamir_reconstruct({i: shares[i] for i in subset}, 3) == secret
    with pytest.raises(SecAggAbort):
        shamir_reconstruct({1: shares[1], 2: shares[2]}, 3)
    assert all(is_share(s) for s in shares.values())


def test_ddg_through_secagg_equals_ideal_aggregation():
    """The DDG residues summed by the real protocol decode to the same estimate as the ideal sum."""
    rng = np.random.default_rng(4)
    n, d = 8, 20
    p = ddg_params(16, 3, n, d, 1.0, 4.0, 1e-5)
    mech = DDGMechanism(p, 0)
    x = rng.normal(size=(n, d))
    res_vec = mech.encode(x, rng)
    out = run_secagg(res_vec, bits=16, threshold=5, dropouts={2: [2, 7]})
    keep = [i - 1 for i in out.survivors]
    np.testing.assert_array_equal(out.total, mech.aggregate(res_vec[keep]))
    np.testing.assert_allclose(mech.decode(out.total), mech.decode(mech.aggregate(res_vec[keep])))
    assert math.isfinite(p.epsilon_for(len(keep)))

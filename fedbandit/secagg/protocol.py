r"""Secure aggregation (Bonawitz et al., CCS 2017) with real cryptography, a consistency round and authenticated shares.

The server learns :math:`\sum_{u \in U_3} x_u \bmod m` for the clients :math:`U_3` whose
masked inputs arrived, and nothing else about the individual :math:`x_u`.  Fewer than
:math:`t` clients in any round abort the protocol with :class:`SecAggAbort`; a message that
fails verification (tampered share, ciphertext or signature, survivor lists that differ
between clients) aborts it with :class:`SecAggIntegrityError`, naming the party and the
round.  Never a wrong sum from a tampered share.  The modulus is :math:`m = 2^B` (``bits``
= B in [2, 64]), which is what the distributed discrete Gaussian of
:mod:`fedbandit.mechanisms.ddg` needs.

Setting
-------
Every client :math:`u` has a long-term Ed25519 identity key :math:`d_u`; the *directory*
``{u: public key}`` (a PKI) is known to every party before the session and is trusted.
Every message a client sends is signed with :math:`d_u` over the session id, the round
name, its id and the message's content (for ShareKeys: the commitments; its ciphertexts
are authenticated end to end by AES-GCM), so altered, impersonated or replayed (other
round or session) messages are rejected, whoever relays them.  Cost: each client verifies
about :math:`2n` Ed25519 signatures (the roster and the consistency round).  In the
single-process simulation of :func:`run_secagg` these are broadcast messages that every
client checks alike, so each distinct (key, transcript, signature) triple is verified once
per session and its verdict shared (``_SharedVerdicts``): about :math:`5n`
verifications instead of :math:`2n^2`, with the same verdict for every recipient.

Rounds ([BIK+17]_ Fig. 4 with the signatures and ConsistencyCheck of its
active-adversary version)
----------------------------------------------------------------------------

0. **AdvertiseKeys**: :math:`u` generates two X25519 key pairs, :math:`(c_u^{PK}, c_u^{SK})`
   (encryption) and :math:`(s_u^{PK}, s_u^{SK})` (masks), and sends both public keys,
   signed.  Survivors :math:`U_1`; every client checks every roster entry's signature
   against the directory, so the server cannot substitute keys.
1. **ShareKeys**: :math:`u` draws a self-mask seed :math:`b_u`, splits :math:`s_u^{SK}` and
   :math:`b_u` into :math:`t`-of-:math:`|U_1|` Shamir shares (:mod:`fedbandit.secagg.shamir`)
   and *commits* to every share: :math:`C^s_{u,v} = \mathrm{SHA256}(\text{session}, s, u,
   v, \text{share}, \rho)` with a fresh 32-byte salt :math:`\rho`, likewise :math:`C^b_{u,v}`.
   It sends the signed commitments to the server and, to each :math:`v`, the two shares
   and two salts encrypted with AES-GCM under
   :math:`\mathrm{HKDF}(\mathrm{X25519}(c_u^{SK}, c_v^{PK}))` (header :math:`(u, v)`
   authenticated).  Survivors :math:`U_2`.
2. **MaskedInputCollection**: :math:`v` decrypts its shares and checks them against
   :math:`u`'s commitments (relayed by the server), then sends
   :math:`y_v = x_v + \mathrm{PRG}(b_v) + \sum_{w \in U_2\setminus v} \pm\mathrm{PRG}(s_{v,w}) \bmod m`
   with :math:`s_{v,w} = \mathrm{HKDF}(\mathrm{X25519}(s_v^{SK}, s_w^{PK}))`, sign :math:`+`
   if :math:`v < w`, so pairwise masks cancel in the sum.  The PRG is the AES-256-CTR
   keystream.  Survivors :math:`U_3`.
3. **ConsistencyCheck**: the server announces :math:`U_3`; each client checks it
   (:math:`U_3 \subseteq U_2`, contains itself, :math:`|U_3| \ge t`) and signs it.  The
   clients whose signatures arrive are :math:`U_4`.
4. **Unmasking**: the server forwards the signatures of :math:`U_4`; each client verifies
   that :math:`|U_4| \ge t` and that *every* forwarded signature is a valid signature on
   the list :math:`U_3` *it* was given -- a signature on another list (the server told
   different clients different survivor sets) aborts -- and only then reveals, for every
   :math:`v \in U_2`, *either* its share of :math:`s_v^{SK}` (:math:`v \notin U_3`) *or*
   its share of :math:`b_v` (:math:`v \in U_3`), with the salt, never both, and answers
   once.  The server checks every revealed share against its dealer's commitment,
   checks that all shares of one secret lie on one polynomial, and unmasks.

What is detected (each a test in ``tests/test_secagg*.py``)
-----------------------------------------------------------
* A share altered by the client that reveals it (any value, in range or not), a share
  copied from another client or another session: it does not match the dealer's
  commitment (SHA-256 collision resistance) -- caught for any number of survivors.
* A dealer whose shares are inconsistent: caught when its shares disagree with its
  commitments (by the recipient, round 2) or, when more than :math:`t` shares arrive,
  when they do not lie on one polynomial (up to :math:`m - t` inconsistent shares out of
  :math:`m`; see :mod:`fedbandit.secagg.shamir`).
* A tampered or misrouted ciphertext (AES-GCM); altered, impersonated or replayed
  messages (Ed25519 signatures over session, round and sender); substituted public keys.
* A server that hands clients different survivor lists and forwards their signatures:
  the clients abort.  If it forwards only the signatures on each client's own list, each
  group of clients needs :math:`t` signers; with :math:`t > n/2` at most one group can
  reach :math:`t`, the others abort, and the server learns at most one of the two secrets
  of any client.

What is *not* detected or prevented: a client that chooses a wrong input, or deals
consistent shares of a seed other than the one it masked with (both only change the sum
by a value of that client's choosing -- the power any client has over its own input;
ruling it out needs zero-knowledge proofs); aborts (any party can stop the protocol);
a server that reports a wrong result (it computes the result).  Not covered either: the
full simulation-based proof of [BIK+17]_ -- this module implements the checks above, it
does not claim more.

Threshold [derived]
-------------------
Privacy of an honest client :math:`u` is lost only if someone obtains both
:math:`s_u^{SK}` and :math:`b_u`, or :math:`t` colluding clients pool their shares.

* A server that follows the protocol, colluding with a set :math:`C` of clients, learns
  only the sum of the honest survivors' inputs if :math:`|C| < t` (the package's reading of
  [BIK+17]_'s security theorem against an honest-but-curious server and clients, cited by
  content, its number not checked): any :math:`t \ge 2` protects against the server alone.
  The package checks one ingredient statistically: a client's masked input is uniform
  modulo :math:`2^B` (``tests/test_secagg.py::test_single_masked_vector_is_uniform``).
* A server that deviates can tell some clients that :math:`u` dropped (they reveal shares
  of :math:`s_u^{SK}`) and others that it survived (shares of :math:`b_u`).  Each honest
  client answers one list only, so both secrets need two disjoint groups of honest
  clients, each reaching :math:`t` together with the colluders:
  :math:`2(t - |C|) \le n - |C|`.  Hence :math:`t > (n + |C|)/2` rules the attack out;
  :math:`t > n/2` without colluders.

So ``threshold`` must lie in :math:`[\lfloor n/2 \rfloor + 1, n]` (n = the clients of the
directory).  Smaller values (down to 2) need ``allow_small_threshold=True`` and then give
privacy only against a server that follows the protocol and colludes with fewer than
:math:`t` clients; :func:`fedbandit.secagg.attacks.run_attack` (``"equivocation"``)
shows a server recovering an honest client's input at :math:`t \le n/2`.  The protocol
completes while at least :math:`t` clients survive every round: it tolerates
:math:`n - t` dropouts.

A client declared dropped whose masked input arrives late stays hidden: the server holds
shares of its mask key only, and its :math:`y_v` is still masked by :math:`\mathrm{PRG}(b_v)`.

Cryptographic randomness (keys, seeds, Shamir coefficients, salts, nonces) comes from the
operating system's CSPRNG, deliberately not from a seeded numpy Generator: a
reproducible mask would be no mask.  The protocol's *output* is deterministic.

References
----------
.. [BIK+17] K. Bonawitz, V. Ivanov, B. Kreuter, A. Marcedone, H. B. McMahan, S. Patel,
   D. Ramage, A. Segal and K. Seth, "Practical secure aggregation for
   privacy-preserving machine learning", ACM CCS 2017.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field
from typing import Iterable, Mapping, NamedTuple

import numpy as np
from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from fedbandit._validation import check_bool, check_int_in_range, check_positive_int
from fedbandit.secagg.errors import SecAggAbort, SecAggError, SecAggIntegrityError
from fedbandit.secagg.shamir import (
    INCONSISTENT,
    PRIME,
    SHARE_BYTES,
    is_share,
    shamir_reconstruct_many,
    shamir_share_many,
)

__all__ = [
    "AdvertiseKeys",
    "ShareKeys",
    "EncryptedShares",
    "MaskedInput",
    "ConsistencySignature",
    "RevealedShare",
    "UnmaskResponse",
    "SecAggClient",
    "SecAggServer",
    "SecAggResult",
    "check_threshold",
    "generate_identities",
    "prg_mask",
    "run_secagg",
    "ROUND_NAMES",
]

_SHARE_BYTES = SHARE_BYTES  # a packed share: 9 limbs of 32 bits (fedbandit.secagg.shamir)
_SALT_BYTES = 32
#: The protocol's five rounds, in order (Bonawitz et al. 2017); errors name the round.
ROUND_NAMES = ("AdvertiseKeys", "ShareKeys", "MaskedInputCollection", "ConsistencyCheck", "Unmasking")
_ADV, _SHARE, _MASKED, _CONSIST, _UNMASK = ROUND_NAMES


# ---------------------------------------------------------------------------
# Primitives
# ---------------------------------------------------------------------------
def _hkdf(secret: bytes, info: bytes, session: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=session, info=info).derive(secret)


def _dtype_for(bits: int):
    # The narrowest unsigned word holding B bits: wrap-around mod 2^w is consistent mod 2^B,
    # and fewer keystream bytes are needed.
    if bits <= 16:
        return np.dtype("<u2")
    return np.dtype("<u4") if bits <= 32 else np.dtype("<u8")


def prg_mask(seed: bytes, length: int, bits: int) -> np.ndarray:
    """``length`` uniform residues mod 2^bits from the AES-256-CTR keystream of ``seed`` (32 bytes)."""
    if not isinstance(seed, (bytes, bytearray)) or len(seed) != 32:
        raise TypeError(f"seed must be 32 bytes (an AES-256 key), got {seed!r:.60}")
    length = check_positive_int("length", length)
    bits = check_int_in_range("bits", bits, 2, 64)
    dt = _dtype_for(bits)
    ks = Cipher(algorithms.AES(seed), modes.CTR(bytes(16))).encryptor().update(bytes(length * dt.itemsize))
    return np.frombuffer(ks, dtype=dt)  # read-only view of the keystream


def _mask_value(bits: int, dt) -> np.generic:
    return dt.type((1 << bits) - 1)


def _pub_bytes(key) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _priv_bytes(key) -> bytes:
    return key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())


def _ids_bytes(ids) -> bytes:
    return b"".join(int(i).to_bytes(4, "big") for i in sorted(ids))


def _transcript(session: bytes, round_name: str, sender: int, payload: bytes) -> bytes:
    """What a signature covers: protocol tag, session, round, sender, content."""
    return (
        b"fedbandit-secagg/v2|" + len(session).to_bytes(2, "big") + session + round_name.encode() + b"|"
        + int(sender).to_bytes(4, "big") + payload
    )


def _commit(session: bytes, kind: bytes, dealer: int, holder: int, value: int, salt: bytes) -> bytes:
    """Hiding, binding commitment to one share (SHA-256 over a salted, unambiguous encoding)."""
    return hashlib.sha256(
        b"fedbandit-secagg-commit|" + len(session).to_bytes(2, "big") + session + kind
        + dealer.to_bytes(4, "big") + holder.to_bytes(4, "big") + value.to_bytes(_SHARE_BYTES, "big") + salt
    ).digest()


def _check_id(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < 1 or int(value) >= PRIME:
        # an id is also the client's Shamir point, a nonzero element of F_p
        raise SecAggError(f"{name} must be a positive integer client id below 2^31 - 1, got {value!r}")
    return int(value)


def _check_session(session) -> bytes:
    if not isinstance(session, (bytes, bytearray)) or len(session) > 0xFFFF:
        raise TypeError(f"session must be bytes of length at most 65535, got {session!r:.60}")
    return bytes(session)


def check_threshold(threshold, n_clients, *, allow_small_threshold: bool = False) -> int:
    """Validate the Shamir threshold ``t`` against the security requirement ``t > n/2``.

    Parameters
    ----------
    threshold : int
        Shamir threshold ``t``.
    n_clients : int
        Number of clients of the session (the directory), at least 2.
    allow_small_threshold : bool
        Accept ``2 <= t <= n/2`` (privacy only against a server that follows the protocol
        and colludes with fewer than ``t`` clients; see the module notes).

    Returns
    -------
    int
        ``t`` in ``[n//2 + 1, n]`` (or ``[2, n]`` with the opt-in).
    """
    allow = check_bool("allow_small_threshold", allow_small_threshold)
    n = check_int_in_range("n_clients", n_clients, 2, None)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, np.integer)):
        raise TypeError(f"threshold must be an integer, got {threshold!r} of type {type(threshold).__name__}")
    t = int(threshold)
    if allow:
        if not 2 <= t <= n:
            raise ValueError(f"threshold must be an integer in [2, {n}] (n = {n} clients), got {t}")
        return t
    low = n // 2 + 1
    if not low <= t <= n:
        raise ValueError(
            f"threshold must be an integer in [{low}, {n}] (t > n/2 with n = {n} clients: with t <= n/2 a server "
            f"that tells different clients different survivor lists can obtain both secrets of a client and "
            f"unmask its input), got {t}; pass allow_small_threshold=True to accept 2 <= t <= n/2, which protects "
            "only against a server that follows the protocol and colludes with fewer than t clients"
        )
    return t


def generate_identities(ids: Iterable[int]) -> tuple[dict[int, Ed25519PrivateKey], dict[int, bytes]]:
    """Fresh Ed25519 identity keys for the clients ``ids`` and the directory ``{id: public key bytes}``."""
    try:
        ids = list(ids)
    except TypeError:
        raise TypeError(f"ids must be an iterable of positive integer client ids, got {ids!r:.60}") from None
    keys = {_check_id("ids", i): Ed25519PrivateKey.generate() for i in ids}
    if len(keys) != len(ids):
        raise ValueError(f"ids must be distinct, got {sorted(ids)}")
    return keys, {i: k.public_key().public_bytes_raw() for i, k in keys.items()}


def _load_directory(directory, threshold, allow_small_threshold) -> tuple[dict[int, Ed25519PublicKey], int]:
    if not isinstance(directory, Mapping) or not directory:
        raise TypeError(f"directory must be a non-empty mapping {{client id: Ed25519 public key (32 bytes)}}, got {directory!r:.60}")
    out = {}
    for i, pk in directory.items():
        i = _check_id("directory id", i)
        if not isinstance(pk, (bytes, bytearray)) or len(pk) != 32:
            raise SecAggError(f"directory entry of client {i} must be a 32-byte Ed25519 public key")
        out[i] = Ed25519PublicKey.from_public_bytes(bytes(pk))
    return out, check_threshold(threshold, len(out), allow_small_threshold=allow_small_threshold)


def _verify(pk: Ed25519PublicKey, signature, message: bytes) -> bool:
    if not isinstance(signature, (bytes, bytearray)) or len(signature) != 64:
        return False
    try:
        pk.verify(bytes(signature), message)
    except InvalidSignature:
        return False
    return True


class _SharedVerdicts:
    """Verdicts of the Ed25519 checks of one simulated session, shared by its parties.

    In a simulation every party runs in one process, and a broadcast message (a roster
    entry, a consistency signature) is checked by every recipient: the same public key,
    the same transcript, the same signature, :math:`n` times.  Ed25519 verification is a
    deterministic function of those three byte strings, so the first check's verdict is
    every later check's verdict: this memo, keyed by the exact bytes (no hash, so no
    collision can alias two messages), returns it.  An altered or forged message -- even
    one delivered to a single recipient -- differs in at least one of the three and is
    checked afresh.  :func:`run_secagg` creates one per call, never shared between
    sessions; parties built directly (tests, attacks) check alone unless given one by
    :func:`_share_verdicts`.  ``checks`` counts the real verifications, ``hits`` the
    reused verdicts.

    The key holds the transcript's parts (session, round, sender, payload) rather than the
    transcript itself (:func:`_transcript` is an unambiguous encoding of them, so equal
    parts are an equal transcript), and one copy of each distinct payload: a client checking
    the n signatures on its survivor list hashes that O(n)-byte list once, not n times
    (which made the Unmasking round's checks grow as n^3).
    """

    __slots__ = ("_verdicts", "_payloads", "checks", "hits")

    def __init__(self):
        self._verdicts: dict[tuple, bool] = {}
        self._payloads: dict[bytes, bytes] = {}
        self.checks = 0
        self.hits = 0

    def verify(self, pk: Ed25519PublicKey, signature, session: bytes, round_name: str, sender: int,
               payload: bytes) -> bool:
        if not isinstance(signature, (bytes, bytearray)) or len(signature) != 64:
            return False
        payload = bytes(payload) if type(payload) is not bytes else payload
        payload = self._payloads.setdefault(payload, payload)
        key = (pk.public_bytes_raw(), session, round_name, int(sender), payload, bytes(signature))
        verdict = self._verdicts.get(key)
        if verdict is None:
            message = _transcript(session, round_name, sender, payload)
            verdict = self._verdicts[key] = _verify(pk, signature, message)
            self.checks += 1
        else:
            self.hits += 1
        return verdict


def _share_verdicts(parties) -> _SharedVerdicts:
    """Give the simulated ``parties`` (clients and server of one session) one fresh verdict memo."""
    memo = _SharedVerdicts()
    for party in parties:
        party._verdicts = memo
    return memo


def _verify_broadcast(party, pk: Ed25519PublicKey, signature, round_name: str, sender: int, payload: bytes) -> bool:
    """Check a signature on (party's session, round, sender, payload) that other parties of the
    session also check (through their shared memo, if any)."""
    memo = party._verdicts
    if memo is None:
        return _verify(pk, signature, _transcript(party.session, round_name, sender, payload))
    return memo.verify(pk, signature, party.session, round_name, sender, payload)


# ---------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class AdvertiseKeys:
    """Round 0: the two X25519 public keys of a client, signed with its identity key."""

    client_id: int
    c_pk: bytes
    s_pk: bytes
    signature: bytes = b""

    def payload(self) -> bytes:
        return bytes(self.c_pk) + bytes(self.s_pk)


@dataclass(frozen=True)
class ShareKeys:
    """Round 1: encrypted shares for every other client and the signed commitments to all shares."""

    client_id: int
    ciphertexts: Mapping[int, bytes]  # recipient id -> nonce || AES-GCM ciphertext
    commitments: Mapping[int, tuple[bytes, bytes]] = field(default_factory=dict)  # holder -> (C^s, C^b)
    signature: bytes = b""

    def payload(self) -> bytes:
        return b"".join(v.to_bytes(4, "big") + bytes(cs) + bytes(cb) for v, (cs, cb) in sorted(self.commitments.items()))


@dataclass(frozen=True)
class EncryptedShares:
    """What the server relays to a client from one dealer: the ciphertext and the dealer's commitments to it."""

    ciphertext: bytes
    s_commitment: bytes
    b_commitment: bytes


@dataclass(frozen=True)
class MaskedInput:
    """Round 2: the masked input, signed."""

    client_id: int
    bits: int
    y: np.ndarray
    signature: bytes = b""


@dataclass(frozen=True)
class ConsistencySignature:
    """Round 3: a client's signature on the survivor list U_3 the server announced to it."""

    client_id: int
    signature: bytes


class RevealedShare(NamedTuple):
    """A share revealed in round 4 and the salt that opens its dealer's commitment."""

    value: int
    salt: bytes


@dataclass(frozen=True)
class UnmaskResponse:
    """Round 4: shares of the dropped clients' mask keys and of the survivors' seeds, signed."""

    client_id: int
    mask_key_shares: Mapping[int, RevealedShare]  # dropped v -> share of s_v^SK
    seed_shares: Mapping[int, RevealedShare]  # surviving v -> share of b_v
    signature: bytes = b""

    def payload(self) -> bytes:
        out = []
        for tag, part in ((b"s", self.mask_key_shares), (b"b", self.seed_shares)):
            out.append(tag + len(part).to_bytes(4, "big"))
            for v, (value, salt) in sorted(part.items()):
                out.append(int(v).to_bytes(4, "big") + int(value).to_bytes(_SHARE_BYTES, "big") + bytes(salt))
        return b"".join(out)


def _masked_payload(bits: int, y: np.ndarray) -> bytes:
    return bytes([bits]) + np.ascontiguousarray(y, dtype=_dtype_for(bits)).tobytes()


# ---------------------------------------------------------------------------
# Client
# ---------------------------------------------------------------------------
class SecAggClient:
    """One client of the protocol: a small state machine that checks every message it gets.

    Parameters
    ----------
    client_id : int
        Positive id (also its Shamir evaluation point).
    threshold : int
        Shamir threshold :math:`t`, validated by :func:`check_threshold` against the number
        of clients in ``directory``.
    bits : int
        Modulus :math:`m = 2^{bits}`.
    length : int
        Vector length.
    session : bytes
        Session id, bound into every derived key, commitment and signature.
    identity_key : Ed25519PrivateKey
        This client's long-term signing key.
    directory : mapping
        ``{client id: Ed25519 public key bytes}`` of every client of the session (the PKI),
        including this one.
    allow_small_threshold : bool
        See :func:`check_threshold`.
    """

    def __init__(self, client_id: int, *, threshold: int, bits: int, length: int, session: bytes,
                 identity_key: Ed25519PrivateKey, directory: Mapping[int, bytes], allow_small_threshold: bool = False):
        self.id = _check_id("client_id", client_id)
        self.bits = check_int_in_range("bits", bits, 2, 64)
        self.length = check_positive_int("length", length)
        self.session = _check_session(session)
        if not isinstance(identity_key, Ed25519PrivateKey):
            raise TypeError(f"identity_key must be an Ed25519PrivateKey, got {type(identity_key).__name__}")
        self._directory, self.threshold = _load_directory(directory, threshold, allow_small_threshold)
        if self.id not in self._directory:
            raise SecAggError(f"client {self.id} is not in the directory")
        if self._directory[self.id].public_bytes_raw() != identity_key.public_key().public_bytes_raw():
            raise SecAggError(f"client {self.id}: the directory does not hold this client's identity key")
        self._id_sk = identity_key
        self._dt = _dtype_for(self.bits)
        self._c_sk = X25519PrivateKey.generate()
        self._s_sk = X25519PrivateKey.generate()
        self._adv: AdvertiseKeys | None = None
        self._roster: dict[int, AdvertiseKeys] | None = None
        self._u2: list[int] | None = None
        self._u3: list[int] | None = None
        self._held: dict[int, tuple[int, int, bytes, bytes]] = {}  # v -> (s share, b share, s salt, b salt)
        self._b_seed: bytes | None = None
        self._unmasked = False
        self._enc_keys: dict[int, bytes] = {}
        self._verdicts: _SharedVerdicts | None = None  # set by run_secagg: one memo per simulated session

    def _sign(self, round_name: str, payload: bytes) -> bytes:
        return self._id_sk.sign(_transcript(self.session, round_name, self.id, payload))

    # round 0
    def advertise_keys(self) -> AdvertiseKeys:
        if self._adv is None:
            msg = AdvertiseKeys(self.id, _pub_bytes(self._c_sk), _pub_bytes(self._s_sk))
            self._adv = AdvertiseKeys(msg.client_id, msg.c_pk, msg.s_pk, self._sign(_ADV, msg.payload()))
        return self._adv

    def _enc_key(self, v: int) -> bytes:
        key = self._enc_keys.get(v)
        if key is None:
            peer = X25519PublicKey.from_public_bytes(self._roster[v].c_pk)
            key = self._enc_keys[v] = _hkdf(self._c_sk.exchange(peer), b"fedbandit-secagg-enc", self.session)
        return key

    def _aad(self, sender: int, recipient: int) -> bytes:
        return self.session + sender.to_bytes(4, "big") + recipient.to_bytes(4, "big")

    # round 1
    def share_keys(self, roster: Mapping[int, AdvertiseKeys]) -> ShareKeys:
        if self._roster is not None:
            raise SecAggError(f"client {self.id}: ShareKeys requested twice")
        roster = dict(roster)
        if len(roster) < self.threshold:
            raise SecAggAbort(
                f"client {self.id}: only {len(roster)} clients advertised keys, fewer than threshold {self.threshold}"
            )
        seen = set()
        mine = self.advertise_keys()
        for v, msg in roster.items():
            if not isinstance(msg, AdvertiseKeys) or _check_id("roster id", v) != msg.client_id:
                raise SecAggError(f"roster entry {v} is not the AdvertiseKeys message of client {v}")
            for key in (msg.c_pk, msg.s_pk):
                if not isinstance(key, bytes) or len(key) != 32:
                    raise SecAggError(f"client {v}: public keys must be 32 bytes")
                if key in seen:
                    raise SecAggError(f"duplicate public key in the roster (client {v})")
                seen.add(key)
            pk = self._directory.get(v)
            if pk is None:
                raise SecAggError(f"client {self.id}: roster entry {v} is not a client of the directory")
            if msg == mine:
                continue  # this client's own message (compared below): no need to verify its own signature
            if not _verify_broadcast(self, pk, msg.signature, _ADV, v, msg.payload()):
                raise SecAggIntegrityError(
                    f"the public keys in the roster are not signed by client {v} (substituted or altered keys)",
                    party=v, round=_ADV,
                )
        if roster.get(self.id) != mine:
            raise SecAggError(f"client {self.id}: the roster does not contain this client's own keys")
        self._roster = roster
        ids = sorted(roster)
        self._b_seed = os.urandom(32)
        s_shares, b_shares = shamir_share_many(
            [int.from_bytes(_priv_bytes(self._s_sk), "big"), int.from_bytes(self._b_seed, "big")], self.threshold, ids)
        cts, commitments = {}, {}
        for v in ids:
            salt_s, salt_b = os.urandom(_SALT_BYTES), os.urandom(_SALT_BYTES)
            commitments[v] = (
                _commit(self.session, b"s", self.id, v, s_shares[v], salt_s),
                _commit(self.session, b"b", self.id, v, b_shares[v], salt_b),
            )
            if v == self.id:
                self._held[v] = (s_shares[v], b_shares[v], salt_s, salt_b)
                continue
            plaintext = (
                self.id.to_bytes(4, "big") + v.to_bytes(4, "big")
                + s_shares[v].to_bytes(_SHARE_BYTES, "big") + b_shares[v].to_bytes(_SHARE_BYTES, "big")
                + salt_s + salt_b
            )
            nonce = os.urandom(12)
            cts[v] = nonce + AESGCM(self._enc_key(v)).encrypt(nonce, plaintext, self._aad(self.id, v))
        msg = ShareKeys(self.id, cts, commitments)
        return ShareKeys(self.id, cts, commitments, self._sign(_SHARE, msg.payload()))

    # round 2
    def masked_input(self, x, inbox: Mapping[int, EncryptedShares]) -> MaskedInput:
        if self._roster is None:
            raise SecAggError(f"client {self.id}: MaskedInputCollection before ShareKeys")
        if self._u2 is not None:
            raise SecAggError(f"client {self.id}: MaskedInputCollection requested twice")
        x = np.asarray(x)
        if x.shape != (self.length,):
            raise SecAggError(f"client {self.id}: input must have shape ({self.length},), got {x.shape}")
        if not np.issubdtype(x.dtype, np.integer):
            raise SecAggError(f"client {self.id}: input must be integers mod 2^{self.bits}")
        if x.size and (x.min() < 0 or int(x.max()) >= (1 << self.bits)):
            raise SecAggError(f"client {self.id}: input values must lie in [0, 2^{self.bits})")
        for u, box in inbox.items():
            u = _check_id("sender id", u)
            if u not in self._roster or u == self.id:
                raise SecAggError(f"client {self.id}: ciphertext from unknown sender {u}")
            if not isinstance(box, EncryptedShares):
                raise SecAggError(f"client {self.id}: expected EncryptedShares from {u}, got {type(box).__name__}")
            ct = box.ciphertext
            if not isinstance(ct, bytes) or len(ct) < 12 + 16:
                raise SecAggError(f"client {self.id}: malformed ciphertext from {u}")
            try:
                pt = AESGCM(self._enc_key(u)).decrypt(ct[:12], ct[12:], self._aad(u, self.id))
            except InvalidTag as exc:
                raise SecAggIntegrityError(
                    f"the ciphertext client {self.id} received from client {u} failed authentication "
                    "(tampered or misrouted)", party=u, round=_SHARE,
                ) from exc
            if len(pt) != 8 + 2 * _SHARE_BYTES + 2 * _SALT_BYTES:
                raise SecAggError(f"client {self.id}: share message from {u} has the wrong length")
            if int.from_bytes(pt[:4], "big") != u or int.from_bytes(pt[4:8], "big") != self.id:
                raise SecAggError(f"client {self.id}: share message header mismatch (from {u})")
            o = 8 + 2 * _SHARE_BYTES
            s_share = int.from_bytes(pt[8 : 8 + _SHARE_BYTES], "big")
            b_share = int.from_bytes(pt[8 + _SHARE_BYTES : o], "big")
            salt_s, salt_b = pt[o : o + _SALT_BYTES], pt[o + _SALT_BYTES :]
            if not (is_share(s_share) and is_share(b_share)):
                raise SecAggError(f"client {self.id}: share from {u} outside the field")
            if (
                _commit(self.session, b"s", u, self.id, s_share, salt_s) != box.s_commitment
                or _commit(self.session, b"b", u, self.id, b_share, salt_b) != box.b_commitment
            ):
                raise SecAggIntegrityError(
                    f"the shares client {self.id} received from client {u} do not match client {u}'s commitments "
                    "(an inconsistent dealer, or commitments altered in relay)", party=u, round=_SHARE,
                )
            self._held[u] = (s_share, b_share, salt_s, salt_b)
        u2 = sorted(set(inbox) | {self.id})
        if len(u2) < self.threshold:
            raise SecAggAbort(f"client {self.id}: only {len(u2)} clients shared keys, fewer than threshold {self.threshold}")
        self._u2 = u2
        dt = self._dt
        y = x.astype(dt)
        y += prg_mask(self._b_seed, self.length, self.bits)
        for v in u2:
            if v == self.id:
                continue
            peer = X25519PublicKey.from_public_bytes(self._roster[v].s_pk)
            seed = _hkdf(self._s_sk.exchange(peer), b"fedbandit-secagg-mask", self.session)
            if self.id < v:
                y += prg_mask(seed, self.length, self.bits)
            else:
                y -= prg_mask(seed, self.length, self.bits)
        y &= _mask_value(self.bits, dt)
        return MaskedInput(self.id, self.bits, y, self._sign(_MASKED, _masked_payload(self.bits, y)))

    # round 3
    def consistency_check(self, survivors: Iterable[int]) -> ConsistencySignature:
        """Check the announced survivor list U_3 and sign it."""
        if self._u2 is None:
            raise SecAggError(f"client {self.id}: ConsistencyCheck before MaskedInputCollection")
        if self._u3 is not None:
            raise SecAggError(f"client {self.id}: ConsistencyCheck requested twice; refusing to sign a second list")
        survivors = [_check_id("survivor id", v) for v in survivors]
        u3 = set(survivors)
        if len(u3) != len(survivors):
            raise SecAggError(f"client {self.id}: duplicate ids in the survivor list")
        if not u3 <= set(self._u2):
            raise SecAggError(f"client {self.id}: survivor list contains clients that never shared keys")
        if self.id not in u3:
            raise SecAggError(f"client {self.id}: survivor list omits this (responding) client")
        if len(u3) < self.threshold:
            raise SecAggAbort(f"client {self.id}: only {len(u3)} survivors, fewer than threshold {self.threshold}")
        self._u3 = sorted(u3)
        return ConsistencySignature(self.id, self._sign(_CONSIST, _ids_bytes(self._u3)))

    # round 4
    def unmask(self, signatures: Mapping[int, bytes]) -> UnmaskResponse:
        """Verify the forwarded signatures of U_4 on this client's U_3, then reveal one share per client of U_2."""
        if self._u3 is None:
            raise SecAggError(f"client {self.id}: Unmasking before ConsistencyCheck")
        if self._unmasked:
            # answering twice could hand out both shares of one client
            raise SecAggError(f"client {self.id}: Unmasking requested twice; refusing")
        signatures = dict(signatures)
        u4 = {_check_id("signer id", v) for v in signatures}
        outside = sorted(u4 - set(self._u3))
        if outside:
            raise SecAggIntegrityError(
                f"client {self.id} was forwarded signatures of client(s) {outside}, which are not in the survivor "
                "list it was given: the server gave clients different survivor lists", party="server", round=_CONSIST,
            )
        if self.id not in u4:
            raise SecAggError(f"client {self.id}: the forwarded signatures omit this client's own")
        if len(u4) < self.threshold:
            raise SecAggAbort(
                f"client {self.id}: only {len(u4)} clients signed the survivor list in round {_CONSIST}, fewer than "
                f"threshold {self.threshold}; refusing to reveal shares"
            )
        msg_u3 = _ids_bytes(self._u3)
        for v in sorted(u4):
            if not _verify_broadcast(self, self._directory[v], signatures[v], _CONSIST, v, msg_u3):
                raise SecAggIntegrityError(
                    f"client {v}'s signature does not verify on the survivor list client {self.id} was given: the "
                    "server gave clients different survivor lists (or altered the signature); refusing to reveal "
                    "shares", party=v, round=_CONSIST,
                )
        self._unmasked = True
        u3 = set(self._u3)
        s_part = {v: RevealedShare(self._held[v][0], self._held[v][2]) for v in self._u2 if v not in u3}
        b_part = {v: RevealedShare(self._held[v][1], self._held[v][3]) for v in self._u2 if v in u3}
        msg = UnmaskResponse(self.id, s_part, b_part)
        return UnmaskResponse(self.id, s_part, b_part, self._sign(_UNMASK, msg.payload()))


# ---------------------------------------------------------------------------
# Server
# ---------------------------------------------------------------------------
class SecAggServer:
    """The server: routes messages, checks every one of them, and unmasks the sum.

    Parameters are those of :class:`SecAggClient` without the identity key.
    """

    def __init__(self, *, threshold: int, bits: int, length: int, session: bytes, directory: Mapping[int, bytes],
                 allow_small_threshold: bool = False):
        self.bits = check_int_in_range("bits", bits, 2, 64)
        self.length = check_positive_int("length", length)
        self.session = _check_session(session)
        self._directory, self.threshold = _load_directory(directory, threshold, allow_small_threshold)
        self._dt = _dtype_for(self.bits)
        self.roster: dict[int, AdvertiseKeys] | None = None
        self.u2: list[int] | None = None
        self.u3: list[int] | None = None
        self.u4: list[int] | None = None
        self.commitments: dict[int, Mapping[int, tuple[bytes, bytes]]] = {}
        self.masked: dict[int, np.ndarray] = {}
        self.late_inputs: dict[int, np.ndarray] = {}
        self.received_mask_key_shares: dict[int, dict[int, int]] = {}
        self.received_seed_shares: dict[int, dict[int, int]] = {}
        self._verdicts: _SharedVerdicts | None = None  # set by run_secagg: one memo per simulated session

    def _need(self, ids, round_name):
        if len(ids) < self.threshold:
            raise SecAggAbort(
                f"only {len(ids)} clients survived round {round_name}, fewer than the threshold "
                f"t={self.threshold}; aborting without output"
            )

    @staticmethod
    def _unique(msgs, round_name):
        ids = [_check_id("client_id", m.client_id) for m in msgs]
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})
            raise SecAggError(f"duplicate client id(s) {dup} in round {round_name}")
        return ids

    def _check_signature(self, client_id, signature, round_name, payload, *, broadcast=False):
        pk = self._directory.get(client_id)
        if pk is None:
            raise SecAggError(f"round {round_name}: message from client {client_id}, which is not in the directory")
        # a broadcast message (the roster, the consistency signatures) is checked by the clients too
        if not (_verify_broadcast(self, pk, signature, round_name, client_id, payload) if broadcast
                else _verify(pk, signature, _transcript(self.session, round_name, client_id, payload))):
            raise SecAggIntegrityError(
                f"the {round_name} message of client {client_id} is not signed by client {client_id} "
                "(altered, impersonated or replayed from another round or session)", party=client_id, round=round_name,
            )

    def _typed(self, msgs, cls, round_name):
        msgs = list(msgs)
        for m in msgs:
            if not isinstance(m, cls):
                raise SecAggError(f"round {round_name}: expected {cls.__name__}, got {type(m).__name__}")
        return msgs

    def advertise(self, msgs: Iterable[AdvertiseKeys]) -> dict[int, AdvertiseKeys]:
        msgs = self._typed(msgs, AdvertiseKeys, _ADV)
        for m in msgs:
            if not (isinstance(m.c_pk, bytes) and isinstance(m.s_pk, bytes) and len(m.c_pk) == 32 and len(m.s_pk) == 32):
                raise SecAggError(f"client {m.client_id}: public keys must be 32 bytes")
        ids = self._unique(msgs, _ADV)
        for m in msgs:
            self._check_signature(m.client_id, m.signature, _ADV, m.payload(), broadcast=True)
        self._need(ids, _ADV)
        self.roster = {m.client_id: m for m in msgs}
        return dict(self.roster)

    def share_keys(self, msgs: Iterable[ShareKeys]) -> dict[int, dict[int, EncryptedShares]]:
        if self.roster is None:
            raise SecAggError("ShareKeys before AdvertiseKeys")
        msgs = self._typed(msgs, ShareKeys, _SHARE)
        ids = self._unique(msgs, _SHARE)
        for m in msgs:
            if m.client_id not in self.roster:
                raise SecAggError(f"ShareKeys from unknown client {m.client_id}")
            expected = set(self.roster) - {m.client_id}
            if set(m.ciphertexts) != expected:
                raise SecAggError(f"client {m.client_id}: must send one ciphertext to each other client")
            if set(m.commitments) != set(self.roster):
                raise SecAggError(f"client {m.client_id}: must commit to one pair of shares for each client")
            for c in m.commitments.values():
                if not (isinstance(c, tuple) and len(c) == 2 and all(isinstance(h, bytes) and len(h) == 32 for h in c)):
                    raise SecAggError(f"client {m.client_id}: commitments must be pairs of 32-byte digests")
            self._check_signature(m.client_id, m.signature, _SHARE, m.payload())
        self._need(ids, _SHARE)
        self.u2 = sorted(ids)
        by_id = {m.client_id: m for m in msgs}
        self.commitments = {u: dict(by_id[u].commitments) for u in self.u2}
        return {
            v: {u: EncryptedShares(by_id[u].ciphertexts[v], *by_id[u].commitments[v]) for u in self.u2 if u != v}
            for v in self.u2
        }

    def _check_masked(self, m) -> np.ndarray:
        if not isinstance(m, MaskedInput):
            raise SecAggError(f"expected MaskedInput, got {type(m).__name__}")
        if m.bits != self.bits:
            raise SecAggError(f"client {m.client_id}: wrong modulus 2^{m.bits}, expected 2^{self.bits}")
        y = np.asarray(m.y)
        if y.shape != (self.length,):
            raise SecAggError(f"client {m.client_id}: masked input must have length {self.length}, got shape {y.shape}")
        if not np.issubdtype(y.dtype, np.integer):
            raise SecAggError(f"client {m.client_id}: masked input must be integers")
        if y.size and (int(y.min()) < 0 or int(y.max()) >= (1 << self.bits)):
            raise SecAggError(f"client {m.client_id}: masked input values must lie in [0, 2^{self.bits})")
        y = y.astype(self._dt)
        self._check_signature(_check_id("client_id", m.client_id), m.signature, _MASKED, _masked_payload(self.bits, y))
        return y

    def masked_inputs(self, msgs: Iterable[MaskedInput]) -> list[int]:
        if self.u2 is None:
            raise SecAggError("MaskedInputCollection before ShareKeys")
        if self.u3 is not None:
            raise SecAggError("MaskedInputCollection is closed")
        msgs = list(msgs)
        ids = self._unique(msgs, _MASKED)
        for i in ids:
            if i not in self.u2:
                raise SecAggError(f"masked input from client {i}, which did not share keys")
        ys = {m.client_id: self._check_masked(m) for m in msgs}
        self._need(ids, _MASKED)
        self.u3 = sorted(ids)
        self.masked = ys
        return list(self.u3)

    def late_masked_input(self, msg: MaskedInput) -> None:
        """A masked input arriving after the survivor list was fixed: kept aside, never unmasked."""
        if self.u3 is None:
            raise SecAggError("no survivor list yet; send the input in MaskedInputCollection")
        y = self._check_masked(msg)
        if msg.client_id in self.u3:
            raise SecAggError(f"duplicate masked input from client {msg.client_id}")
        self.late_inputs[msg.client_id] = y

    def consistency_check(self, msgs: Iterable[ConsistencySignature]) -> dict[int, bytes]:
        """Collect the signatures on U_3; returns ``{client id: signature}`` of U_4, to forward to U_4."""
        if self.u3 is None:
            raise SecAggError("ConsistencyCheck before MaskedInputCollection")
        if self.u4 is not None:
            raise SecAggError("ConsistencyCheck is closed")
        msgs = self._typed(msgs, ConsistencySignature, _CONSIST)
        ids = self._unique(msgs, _CONSIST)
        for m in msgs:
            if m.client_id not in self.u3:
                raise SecAggError(f"consistency signature from client {m.client_id}, not a survivor")
            self._check_signature(m.client_id, m.signature, _CONSIST, _ids_bytes(self.u3), broadcast=True)
        self._need(ids, _CONSIST)
        self.u4 = sorted(ids)
        return {m.client_id: m.signature for m in msgs}

    def unmask(self, responses: Iterable[UnmaskResponse]) -> np.ndarray:
        """Check every revealed share, reconstruct the dropped clients' mask keys and the survivors' seeds; return the sum."""
        if self.u4 is None:
            raise SecAggError("Unmasking before ConsistencyCheck")
        responses = self._typed(responses, UnmaskResponse, _UNMASK)
        ids = self._unique(responses, _UNMASK)
        u3, u4 = set(self.u3), set(self.u4)
        dropped = [v for v in self.u2 if v not in u3]
        for r in responses:
            if r.client_id not in u4:
                why = "a client that dropped before the masked-input round" if r.client_id not in u3 else (
                    "a survivor that did not sign the survivor list")
                raise SecAggIntegrityError(
                    f"unmasking response from client {r.client_id}, {why}: only the clients that signed the survivor "
                    "list (U_4) may answer", party=r.client_id, round=_UNMASK,
                )
            if set(r.mask_key_shares) != set(dropped) or set(r.seed_shares) != u3:
                raise SecAggError(
                    f"client {r.client_id}: an unmasking response must hold mask-key shares for exactly the "
                    "dropped clients and seed shares for exactly the survivors"
                )
            for sh in list(r.mask_key_shares.values()) + list(r.seed_shares.values()):
                if not (isinstance(sh, tuple) and len(sh) == 2 and isinstance(sh[0], int) and not isinstance(sh[0], bool)
                        and is_share(sh[0]) and isinstance(sh[1], bytes) and len(sh[1]) == _SALT_BYTES):
                    raise SecAggError(f"client {r.client_id}: a revealed share must be (field element, 32-byte salt)")
            self._check_signature(r.client_id, r.signature, _UNMASK, r.payload())
            for kind, part, k in ((b"s", r.mask_key_shares, 0), (b"b", r.seed_shares, 1)):
                for v, (value, salt) in part.items():
                    if _commit(self.session, kind, v, r.client_id, value, salt) != self.commitments[v][r.client_id][k]:
                        what = "mask key" if kind == b"s" else "self-mask seed"
                        raise SecAggIntegrityError(
                            f"client {r.client_id}'s share of client {v}'s {what} does not match client {v}'s "
                            "commitment (altered, copied or replayed share)", party=r.client_id, round=_UNMASK,
                        )
        self._need(ids, _UNMASK)
        for r in responses:
            for v, sh in r.mask_key_shares.items():
                self.received_mask_key_shares.setdefault(v, {})[r.client_id] = sh[0]
            for v, sh in r.seed_shares.items():
                self.received_seed_shares.setdefault(v, {})[r.client_id] = sh[0]

        # every secret at once (the survivors' seeds, the dropped clients' mask keys): one batch per point set
        owners = [(u, "self-mask seed") for u in self.u3] + [(v, "mask key") for v in dropped]
        maps = [self.received_seed_shares[u] for u in self.u3] + [self.received_mask_key_shares[v] for v in dropped]
        secrets = {}
        for (v, what), shares, secret in zip(owners, maps, shamir_reconstruct_many(maps, self.threshold)):
            if secret == INCONSISTENT:
                raise SecAggIntegrityError(
                    f"the shares of client {v}'s {what} do not lie on one polynomial of degree {self.threshold - 1} "
                    f"({len(shares)} shares): client {v} dealt inconsistent shares", party=v, round=_SHARE,
                )
            if not isinstance(secret, int):
                raise SecAggIntegrityError(
                    f"the reconstructed {what} of client {v} is out of range (inconsistent shares)", party=v, round=_SHARE
                )
            secrets[v, what] = secret.to_bytes(32, "big")

        dt = self._dt
        total = np.zeros(self.length, dtype=dt)
        for u in self.u3:
            total += self.masked[u]
        for u in self.u3:  # remove self masks
            total -= prg_mask(secrets[u, "self-mask seed"], self.length, self.bits)
        for v in dropped:  # cancel the pairwise masks that survivors added for dropped v
            s_sk = X25519PrivateKey.from_private_bytes(secrets[v, "mask key"])
            for u in self.u3:
                peer = X25519PublicKey.from_public_bytes(self.roster[u].s_pk)
                seed = _hkdf(s_sk.exchange(peer), b"fedbandit-secagg-mask", self.session)
                if u < v:  # u added +PRG(s_uv)
                    total -= prg_mask(seed, self.length, self.bits)
                else:
                    total += prg_mask(seed, self.length, self.bits)
        total &= _mask_value(self.bits, dt)
        return total.astype(np.uint64)


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------
@dataclass
class SecAggResult:
    """Output of :func:`run_secagg`."""

    total: np.ndarray  # sum mod 2^bits of the survivors' inputs (uint64)
    survivors: list[int]  # U3: the clients whose inputs are in the sum
    dropped: dict[int, list[int]]  # round -> ids that dropped in that round
    timings: dict[str, float] = field(default_factory=dict)  # seconds per round (all clients + server)
    server: SecAggServer | None = None
    clients: dict[int, SecAggClient] | None = None


def run_secagg(
    inputs,
    *,
    bits: int,
    threshold: int,
    dropouts: Mapping[int, Iterable[int]] | None = None,
    session: bytes | None = None,
    allow_small_threshold: bool = False,
) -> SecAggResult:
    """Run the five rounds for clients ``1..n`` holding the rows of ``inputs``.

    Parameters
    ----------
    inputs : array_like of int, shape (n, length)
        Client vectors with entries in ``[0, 2**bits)``.
    bits : int
        Modulus ``2**bits``, ``2 <= bits <= 64``.
    threshold : int
        Shamir threshold ``t`` in ``[n//2 + 1, n]`` (``t > n/2``, see the module notes).
    dropouts : dict, optional
        ``{round: ids}``: the clients (ids ``1..n``) that drop out *in* that round (0 =
        AdvertiseKeys, ..., 4 = Unmasking; :data:`ROUND_NAMES`), i.e. never send that
        round's message or any later one.  Inputs of clients dropping in round 3 or 4 are
        in the sum.
    session : bytes, optional
        Session id (random by default).
    allow_small_threshold : bool
        Accept ``2 <= t <= n/2`` (weaker guarantee; see :func:`check_threshold`).

    Returns
    -------
    SecAggResult
        ``total`` equals the sum of the survivors' inputs mod ``2**bits``.

    Raises
    ------
    SecAggAbort
        If fewer than ``threshold`` clients remain in any round.
    SecAggIntegrityError
        If any message fails verification (never raised by honest parties).
    """
    bits = check_int_in_range("bits", bits, 2, 64)
    x = np.asarray(inputs)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 1:
        raise ValueError(f"inputs must have shape (n, length) with n >= 2 clients and length >= 1, got {x.shape}")
    if not np.issubdtype(x.dtype, np.integer):
        raise TypeError(f"inputs must be integers mod 2^bits, got dtype {x.dtype}")
    if int(x.min()) < 0 or int(x.max()) >= 1 << bits:
        raise ValueError(f"inputs must lie in [0, 2^{bits}), got values in [{int(x.min())}, {int(x.max())}]")
    n, length = x.shape
    threshold = check_threshold(threshold, n, allow_small_threshold=allow_small_threshold)
    session = os.urandom(16) if session is None else _check_session(session)
    if dropouts is not None and not isinstance(dropouts, Mapping):
        raise TypeError(f"dropouts must be a mapping {{round: client ids}} or None, got {type(dropouts).__name__}")
    drop = {r: set() for r in range(len(ROUND_NAMES))}
    for r, ids in (dropouts or {}).items():
        r = check_int_in_range("dropouts: round", r, 0, len(ROUND_NAMES) - 1)
        for i in ids:
            i = _check_id("dropouts: client id", i)
            if i > n:
                raise ValueError(f"dropouts: client id {i} is not a client (ids are 1..{n})")
            drop[r].add(i)
    gone: set[int] = set()

    def alive(r):
        gone.update(drop[r])
        return [i for i in range(1, n + 1) if i not in gone]

    timings = {}
    t0 = time.perf_counter()
    keys, directory = generate_identities(range(1, n + 1))
    common = dict(threshold=threshold, bits=bits, length=length, session=session, directory=directory,
                  allow_small_threshold=allow_small_threshold)
    clients = {i: SecAggClient(i, identity_key=keys[i], **common) for i in range(1, n + 1)}
    server = SecAggServer(**common)
    _share_verdicts([*clients.values(), server])  # each broadcast signature is verified once in this session
    roster = server.advertise([clients[i].advertise_keys() for i in alive(0)])
    timings[_ADV] = time.perf_counter() - t0

    t0 = time.perf_counter()
    inboxes = server.share_keys([clients[i].share_keys(roster) for i in alive(1) if i in roster])
    timings[_SHARE] = time.perf_counter() - t0

    t0 = time.perf_counter()
    survivors = server.masked_inputs([clients[i].masked_input(x[i - 1], inboxes[i]) for i in alive(2) if i in inboxes])
    timings[_MASKED] = time.perf_counter() - t0

    t0 = time.perf_counter()
    signatures = server.consistency_check([clients[i].consistency_check(survivors) for i in alive(3) if i in survivors])
    timings[_CONSIST] = time.perf_counter() - t0

    t0 = time.perf_counter()
    total = server.unmask([clients[i].unmask(signatures) for i in alive(4) if i in signatures])
    timings[_UNMASK] = time.perf_counter() - t0
    return SecAggResult(
        total=total,
        survivors=survivors,
        dropped={r: sorted(drop[r]) for r in range(len(ROUND_NAMES))},
        timings=timings,
        server=server,
        clients=clients,
    )

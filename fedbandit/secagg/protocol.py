r"""Secure aggregation (Bonawitz et al., CCS 2017), semi-honest version, with real cryptography.

The server learns :math:`\sum_{u \in U_3} x_u \bmod m` for the clients :math:`U_3` whose
masked inputs arrived, and nothing else about the individual :math:`x_u`, as long as
at least :math:`t` clients stay until the end; fewer than :math:`t` survivors abort the
protocol with :class:`SecAggAbort` (never a wrong sum).  The modulus is :math:`m = 2^B`
(``bits`` = B in [2, 64]), which is what the distributed discrete Gaussian of
:mod:`fedbandit.mechanisms.ddg` needs.

Rounds ([BIK+17]_ Fig. 4, semi-honest variant without signatures):

0. **AdvertiseKeys**: client :math:`u` generates two X25519 key pairs,
   :math:`(c_u^{PK}, c_u^{SK})` for encryption and :math:`(s_u^{PK}, s_u^{SK})` for masks,
   and sends both public keys.  Survivors: :math:`U_1` (:math:`|U_1| \ge t`).
1. **ShareKeys**: :math:`u` draws a self-mask seed :math:`b_u`, splits :math:`s_u^{SK}`
   and :math:`b_u` into :math:`t`-of-:math:`|U_1|` Shamir shares over the prime field
   :math:`\mathbb F_p`, :math:`p = 2^{521} - 1`, and sends to each :math:`v` (through the
   server) the pair of shares encrypted with AES-GCM under
   :math:`\mathrm{HKDF}(\mathrm{X25519}(c_u^{SK}, c_v^{PK}))`, the header :math:`(u, v)`
   authenticated.  Survivors: :math:`U_2`.
2. **MaskedInputCollection**: :math:`u` sends
   :math:`y_u = x_u + \mathrm{PRG}(b_u) + \sum_{v \in U_2\setminus u} \pm\mathrm{PRG}(s_{u,v}) \bmod m`
   with :math:`s_{u,v} = \mathrm{HKDF}(\mathrm{X25519}(s_u^{SK}, s_v^{PK}))`, sign :math:`+`
   if :math:`u < v` and :math:`-` otherwise, so pairwise masks cancel in the sum.  The
   PRG is the AES-256-CTR keystream (a cryptographic PRG, never numpy's).  Survivors:
   :math:`U_3`.
3. **Unmasking**: the server announces :math:`U_3`; each responding client reveals, for
   every :math:`v \in U_2`, *either* its share of :math:`s_v^{SK}` (if :math:`v \notin U_3`,
   dropped) *or* its share of :math:`b_v` (if :math:`v \in U_3`), never both, and answers
   only once.  With :math:`t` responses the server reconstructs the dropped clients'
   mask keys (to cancel their pairwise masks) and the survivors' self-mask seeds.

A client declared dropped whose masked input arrives late stays hidden: the server
holds shares of its mask key only, and its :math:`y_v` is still masked by
:math:`\mathrm{PRG}(b_v)`.  Malformed messages (wrong length, wrong modulus, values out of
range, duplicate or unknown ids, bad key lengths, failed authentication, both shares
requested) raise :class:`SecAggError`.

Cryptographic randomness (keys, seeds, Shamir coefficients, nonces) comes from the
operating system's CSPRNG, deliberately not from a seeded numpy Generator: a
reproducible mask would be no mask.  The protocol's *output* is deterministic.

References
----------
.. [BIK+17] K. Bonawitz, V. Ivanov, B. Kreuter, A. Marcedone, H. B. McMahan, S. Patel,
   D. Ramage, A. Segal and K. Seth, "Practical secure aggregation for
   privacy-preserving machine learning", ACM CCS 2017.
"""

from __future__ import annotations

import operator
import os
import secrets
import time
from functools import lru_cache
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import numpy as np
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from fedbandit._validation import check_int_in_range, check_positive_int

__all__ = [
    "PRIME",
    "SecAggError",
    "SecAggAbort",
    "AdvertiseKeys",
    "ShareKeys",
    "MaskedInput",
    "UnmaskResponse",
    "SecAggClient",
    "SecAggServer",
    "SecAggResult",
    "shamir_share",
    "shamir_reconstruct",
    "prg_mask",
    "run_secagg",
    "ROUND_NAMES",
]

#: The Mersenne prime 2^521 - 1: Shamir shares live in F_p (secrets are 256-bit).
PRIME = (1 << 521) - 1
_SHARE_BYTES = 66  # ceil(521 / 8)
ROUND_NAMES = ("AdvertiseKeys", "ShareKeys", "MaskedInputCollection", "Unmasking")


class SecAggError(ValueError):
    """A malformed message or a protocol violation."""


class SecAggAbort(SecAggError):
    """Fewer than ``threshold`` clients survived a round: the protocol stops without output."""


# ---------------------------------------------------------------------------
# Primitives
# ---------------------------------------------------------------------------
def shamir_share(secret: int, threshold: int, ids: Iterable[int]) -> dict[int, int]:
    """Split ``secret`` (< p) into ``threshold``-of-n Shamir shares at the points ``ids`` (>= 1)."""
    ids = list(ids)
    if not 0 <= secret < PRIME:
        raise SecAggError("secret out of the field range")
    if threshold < 1 or threshold > len(ids):
        raise SecAggError(f"threshold must lie in [1, {len(ids)}], got {threshold}")
    coeffs = [secret] + [secrets.randbelow(PRIME) for _ in range(threshold - 1)]
    shares = {}
    for x in ids:
        if x <= 0:
            raise SecAggError("share points must be positive")
        # sum_j a_j x^j with the powers of the (small) point cached: C-level map/sum.
        shares[x] = sum(map(operator.mul, coeffs, _powers(x, threshold))) % PRIME
    return shares


@lru_cache(maxsize=4096)
def _powers(x: int, count: int) -> tuple[int, ...]:
    out = [1]
    for _ in range(count - 1):
        out.append(out[-1] * x)
    return tuple(out)


@lru_cache(maxsize=64)
def _lagrange_at_zero(xs: tuple[int, ...]) -> list[int]:
    coeffs = []
    for i, xi in enumerate(xs):
        num, den = 1, 1
        for j, xj in enumerate(xs):
            if i != j:
                num = num * (-xj) % PRIME
                den = den * (xi - xj) % PRIME
        coeffs.append(num * pow(den, -1, PRIME) % PRIME)
    return coeffs


def shamir_reconstruct(shares: Mapping[int, int], threshold: int) -> int:
    """Recover the secret from at least ``threshold`` shares (Lagrange interpolation at 0)."""
    if len(shares) < threshold:
        raise SecAggAbort(f"need {threshold} shares to reconstruct, got {len(shares)}")
    xs = tuple(sorted(shares)[:threshold])
    lam = _lagrange_at_zero(xs)
    return sum(l * shares[x] for l, x in zip(lam, xs)) % PRIME


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
    dt = _dtype_for(bits)
    ks = Cipher(algorithms.AES(seed), modes.CTR(bytes(16))).encryptor().update(bytes(length * dt.itemsize))
    return np.frombuffer(ks, dtype=dt)  # read-only view of the keystream


def _mask_value(bits: int, dt) -> np.generic:
    return dt.type((1 << bits) - 1)


def _pub_bytes(key) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _priv_bytes(key) -> bytes:
    return key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())


# ---------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class AdvertiseKeys:
    client_id: int
    c_pk: bytes
    s_pk: bytes


@dataclass(frozen=True)
class ShareKeys:
    client_id: int
    ciphertexts: Mapping[int, bytes]  # recipient id -> nonce || AES-GCM ciphertext


@dataclass(frozen=True)
class MaskedInput:
    client_id: int
    bits: int
    y: np.ndarray


@dataclass(frozen=True)
class UnmaskResponse:
    client_id: int
    mask_key_shares: Mapping[int, int]  # dropped v -> share of s_v^SK
    seed_shares: Mapping[int, int]  # surviving v -> share of b_v


def _check_id(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < 1:
        raise SecAggError(f"{name} must be a positive integer client id, got {value!r}")
    return int(value)


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
        Shamir threshold :math:`t`.
    bits : int
        Modulus :math:`m = 2^{bits}`.
    length : int
        Vector length.
    session : bytes
        Session id, bound into every derived key and authenticated header.
    """

    def __init__(self, client_id: int, *, threshold: int, bits: int, length: int, session: bytes):
        self.id = _check_id("client_id", client_id)
        self.threshold = check_positive_int("threshold", threshold)
        self.bits = check_int_in_range("bits", bits, 2, 64)
        self.length = check_positive_int("length", length)
        self.session = bytes(session)
        self._dt = _dtype_for(self.bits)
        self._c_sk = X25519PrivateKey.generate()
        self._s_sk = X25519PrivateKey.generate()
        self._roster: dict[int, AdvertiseKeys] | None = None
        self._u2: list[int] | None = None
        self._held: dict[int, tuple[int, int]] = {}  # v -> (share of s_v^SK, share of b_v)
        self._b_seed: bytes | None = None
        self._unmasked = False
        self._enc_keys: dict[int, bytes] = {}

    # round 0
    def advertise_keys(self) -> AdvertiseKeys:
        return AdvertiseKeys(self.id, _pub_bytes(self._c_sk), _pub_bytes(self._s_sk))

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
        for v, msg in roster.items():
            if _check_id("roster id", v) != msg.client_id:
                raise SecAggError(f"roster entry {v} carries the keys of client {msg.client_id}")
            for key in (msg.c_pk, msg.s_pk):
                if not isinstance(key, bytes) or len(key) != 32:
                    raise SecAggError(f"client {v}: public keys must be 32 bytes")
                if key in seen:
                    raise SecAggError(f"duplicate public key in the roster (client {v})")
                seen.add(key)
        mine = roster.get(self.id)
        if mine is None or mine != self.advertise_keys():
            raise SecAggError(f"client {self.id}: the roster does not contain this client's own keys")
        self._roster = roster
        ids = sorted(roster)
        self._b_seed = os.urandom(32)
        s_shares = shamir_share(int.from_bytes(_priv_bytes(self._s_sk), "big"), self.threshold, ids)
        b_shares = shamir_share(int.from_bytes(self._b_seed, "big"), self.threshold, ids)
        self._held[self.id] = (s_shares[self.id], b_shares[self.id])
        cts = {}
        for v in ids:
            if v == self.id:
                continue
            plaintext = (
                self.id.to_bytes(4, "big")
                + v.to_bytes(4, "big")
                + s_shares[v].to_bytes(_SHARE_BYTES, "big")
                + b_shares[v].to_bytes(_SHARE_BYTES, "big")
            )
            nonce = os.urandom(12)
            cts[v] = nonce + AESGCM(self._enc_key(v)).encrypt(nonce, plaintext, self._aad(self.id, v))
        return ShareKeys(self.id, cts)

    # round 2
    def masked_input(self, x, inbox: Mapping[int, bytes]) -> MaskedInput:
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
        for u, ct in inbox.items():
            u = _check_id("sender id", u)
            if u not in self._roster or u == self.id:
                raise SecAggError(f"client {self.id}: ciphertext from unknown sender {u}")
            if not isinstance(ct, bytes) or len(ct) < 12 + 16:
                raise SecAggError(f"client {self.id}: malformed ciphertext from {u}")
            try:
                pt = AESGCM(self._enc_key(u)).decrypt(ct[:12], ct[12:], self._aad(u, self.id))
            except InvalidTag as exc:
                raise SecAggError(f"client {self.id}: ciphertext from {u} failed authentication") from exc
            if len(pt) != 8 + 2 * _SHARE_BYTES:
                raise SecAggError(f"client {self.id}: share message from {u} has the wrong length")
            if int.from_bytes(pt[:4], "big") != u or int.from_bytes(pt[4:8], "big") != self.id:
                raise SecAggError(f"client {self.id}: share message header mismatch (from {u})")
            s_share = int.from_bytes(pt[8 : 8 + _SHARE_BYTES], "big")
            b_share = int.from_bytes(pt[8 + _SHARE_BYTES :], "big")
            if s_share >= PRIME or b_share >= PRIME:
                raise SecAggError(f"client {self.id}: share from {u} outside the field")
            self._held[u] = (s_share, b_share)
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
        return MaskedInput(self.id, self.bits, y)

    # round 3
    def unmask(self, survivors: Iterable[int]) -> UnmaskResponse:
        if self._u2 is None:
            raise SecAggError(f"client {self.id}: Unmasking before MaskedInputCollection")
        if self._unmasked:
            # answering twice could hand out both shares of one client
            raise SecAggError(f"client {self.id}: Unmasking requested twice; refusing")
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
        self._unmasked = True
        s_part = {v: self._held[v][0] for v in self._u2 if v not in u3}
        b_part = {v: self._held[v][1] for v in self._u2 if v in u3}
        return UnmaskResponse(self.id, s_part, b_part)


# ---------------------------------------------------------------------------
# Server
# ---------------------------------------------------------------------------
class SecAggServer:
    """The (honest-but-curious) server: routes messages, checks them, and unmasks the sum."""

    def __init__(self, *, threshold: int, bits: int, length: int, session: bytes):
        self.threshold = check_positive_int("threshold", threshold)
        self.bits = check_int_in_range("bits", bits, 2, 64)
        self.length = check_positive_int("length", length)
        self.session = bytes(session)
        self._dt = _dtype_for(self.bits)
        self.roster: dict[int, AdvertiseKeys] | None = None
        self.u2: list[int] | None = None
        self.u3: list[int] | None = None
        self.masked: dict[int, np.ndarray] = {}
        self.late_inputs: dict[int, np.ndarray] = {}
        self.received_mask_key_shares: dict[int, dict[int, int]] = {}
        self.received_seed_shares: dict[int, dict[int, int]] = {}

    def _need(self, ids, round_name):
        if len(ids) < self.threshold:
            raise SecAggAbort(
                f"only {len(ids)} clients survived round {round_name}, fewer than the threshold "
                f"t={self.threshold}; aborting without output"
            )

    @staticmethod
    def _unique(msgs, round_name):
        ids = []
        for m in msgs:
            ids.append(_check_id("client_id", m.client_id))
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})
            raise SecAggError(f"duplicate client id(s) {dup} in round {round_name}")
        return ids

    def advertise(self, msgs: Iterable[AdvertiseKeys]) -> dict[int, AdvertiseKeys]:
        msgs = list(msgs)
        for m in msgs:
            if not isinstance(m, AdvertiseKeys):
                raise SecAggError(f"expected AdvertiseKeys, got {type(m).__name__}")
            if not (isinstance(m.c_pk, bytes) and isinstance(m.s_pk, bytes) and len(m.c_pk) == 32 and len(m.s_pk) == 32):
                raise SecAggError(f"client {m.client_id}: public keys must be 32 bytes")
        ids = self._unique(msgs, ROUND_NAMES[0])
        self._need(ids, ROUND_NAMES[0])
        self.roster = {m.client_id: m for m in msgs}
        return dict(self.roster)

    def share_keys(self, msgs: Iterable[ShareKeys]) -> dict[int, dict[int, bytes]]:
        if self.roster is None:
            raise SecAggError("ShareKeys before AdvertiseKeys")
        msgs = list(msgs)
        for m in msgs:
            if not isinstance(m, ShareKeys):
                raise SecAggError(f"expected ShareKeys, got {type(m).__name__}")
        ids = self._unique(msgs, ROUND_NAMES[1])
        for m in msgs:
            if m.client_id not in self.roster:
                raise SecAggError(f"ShareKeys from unknown client {m.client_id}")
            expected = set(self.roster) - {m.client_id}
            if set(m.ciphertexts) != expected:
                raise SecAggError(f"client {m.client_id}: must send one ciphertext to each other client")
        self._need(ids, ROUND_NAMES[1])
        self.u2 = sorted(ids)
        by_id = {m.client_id: m for m in msgs}
        return {v: {u: by_id[u].ciphertexts[v] for u in self.u2 if u != v} for v in self.u2}

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
        return y.astype(self._dt)

    def masked_inputs(self, msgs: Iterable[MaskedInput]) -> list[int]:
        if self.u2 is None:
            raise SecAggError("MaskedInputCollection before ShareKeys")
        if self.u3 is not None:
            raise SecAggError("MaskedInputCollection is closed")
        msgs = list(msgs)
        ys = {}
        for m in msgs:
            ys[m.client_id] = self._check_masked(m)
        ids = self._unique(msgs, ROUND_NAMES[2])
        for i in ids:
            if i not in self.u2:
                raise SecAggError(f"masked input from client {i}, which did not share keys")
        self._need(ids, ROUND_NAMES[2])
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

    def unmask(self, responses: Iterable[UnmaskResponse]) -> np.ndarray:
        """Reconstruct the mask keys of dropped clients and the seeds of survivors; return the sum."""
        if self.u3 is None:
            raise SecAggError("Unmasking before MaskedInputCollection")
        responses = list(responses)
        for r in responses:
            if not isinstance(r, UnmaskResponse):
                raise SecAggError(f"expected UnmaskResponse, got {type(r).__name__}")
        ids = self._unique(responses, ROUND_NAMES[3])
        u3 = set(self.u3)
        dropped = [v for v in self.u2 if v not in u3]
        for r in responses:
            if r.client_id not in u3:
                raise SecAggError(f"unmasking response from client {r.client_id}, not a survivor")
            if set(r.mask_key_shares) != set(dropped) or set(r.seed_shares) != u3:
                raise SecAggError(
                    f"client {r.client_id}: an unmasking response must hold mask-key shares for exactly the "
                    "dropped clients and seed shares for exactly the survivors"
                )
            for sh in list(r.mask_key_shares.values()) + list(r.seed_shares.values()):
                if not isinstance(sh, int) or not 0 <= sh < PRIME:
                    raise SecAggError(f"client {r.client_id}: share outside the field")
        self._need(ids, ROUND_NAMES[3])
        for r in responses:
            for v, sh in r.mask_key_shares.items():
                self.received_mask_key_shares.setdefault(v, {})[r.client_id] = sh
            for v, sh in r.seed_shares.items():
                self.received_seed_shares.setdefault(v, {})[r.client_id] = sh
        dt = self._dt
        total = np.zeros(self.length, dtype=dt)
        for u in self.u3:
            total += self.masked[u]
        for u in self.u3:  # remove self masks
            b = shamir_reconstruct(self.received_seed_shares[u], self.threshold)
            if b >= 1 << 256:
                raise SecAggError(f"reconstructed seed of client {u} is out of range (inconsistent shares)")
            total -= prg_mask(b.to_bytes(32, "big"), self.length, self.bits)
        for v in dropped:  # cancel the pairwise masks that survivors added for dropped v
            sk = shamir_reconstruct(self.received_mask_key_shares[v], self.threshold)
            if sk >= 1 << 256:
                raise SecAggError(f"reconstructed key of client {v} is out of range (inconsistent shares)")
            s_sk = X25519PrivateKey.from_private_bytes(sk.to_bytes(32, "big"))
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
) -> SecAggResult:
    """Run the four rounds for clients ``1..n`` holding the rows of ``inputs``.

    Parameters
    ----------
    inputs : array_like of int, shape (n, length)
        Client vectors with entries in ``[0, 2**bits)``.
    bits : int
        Modulus ``2**bits``, ``2 <= bits <= 64``.
    threshold : int
        Shamir threshold ``t`` in ``[2, n]``; choose ``t > n/2``.
    dropouts : dict, optional
        ``{round: ids}``: the clients (ids ``1..n``) that drop out *in* that round (0 =
        AdvertiseKeys, ..., 3 = Unmasking), i.e. never send that round's message or any
        later one.
    session : bytes, optional
        Session id (random by default).

    Returns
    -------
    SecAggResult
        ``total`` equals the sum of the survivors' inputs mod ``2**bits``.

    Raises
    ------
    SecAggAbort
        If fewer than ``threshold`` clients remain in any round.
    """
    bits = check_int_in_range("bits", bits, 2, 64)
    x = np.asarray(inputs)
    if x.ndim != 2:
        raise ValueError(f"inputs must have shape (n, length), got {x.shape}")
    n, length = x.shape
    threshold = check_int_in_range("threshold", threshold, 2, n)
    session = os.urandom(16) if session is None else bytes(session)
    drop = {r: set() for r in range(4)}
    for r, ids in (dropouts or {}).items():
        r = check_int_in_range("dropout round", r, 0, 3)
        for i in ids:
            i = _check_id("dropout id", i)
            if i > n:
                raise ValueError(f"dropout id {i} is not a client (ids are 1..{n})")
            drop[r].add(i)
    gone: set[int] = set()

    def alive(r):
        gone.update(drop[r])
        return [i for i in range(1, n + 1) if i not in gone]

    timings = {}
    t0 = time.perf_counter()
    clients = {i: SecAggClient(i, threshold=threshold, bits=bits, length=length, session=session) for i in range(1, n + 1)}
    server = SecAggServer(threshold=threshold, bits=bits, length=length, session=session)
    roster = server.advertise([clients[i].advertise_keys() for i in alive(0)])
    timings[ROUND_NAMES[0]] = time.perf_counter() - t0

    t0 = time.perf_counter()
    inboxes = server.share_keys([clients[i].share_keys(roster) for i in alive(1) if i in roster])
    timings[ROUND_NAMES[1]] = time.perf_counter() - t0

    t0 = time.perf_counter()
    survivors = server.masked_inputs(
        [clients[i].masked_input(x[i - 1], inboxes[i]) for i in alive(2) if i in inboxes]
    )
    timings[ROUND_NAMES[2]] = time.perf_counter() - t0

    t0 = time.perf_counter()
    responders = [i for i in alive(3) if i in survivors]
    total = server.unmask([clients[i].unmask(survivors) for i in responders])
    timings[ROUND_NAMES[3]] = time.perf_counter() - t0
    return SecAggResult(
        total=total,
        survivors=survivors,
        dropped={r: sorted(drop[r]) for r in range(4)},
        timings=timings,
        server=server,
        clients=clients,
    )

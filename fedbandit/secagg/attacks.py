r"""Attacks on secure aggregation, each run end to end against the real protocol.

Every attack runs the rounds of :mod:`fedbandit.secagg.protocol` with honest clients and
one deviating party (a client, the network, or the server, whose routing the attack
replaces), and reports what happened: the protocol aborted (with which error, naming which
party and round), or it completed (with which sum), and whether the server recovered an
individual client's input.

Attacks (deviation, then the expected outcome):

* ``tampered-share``: client 2 adds 1 (mod p) to its share of client 1's seed and signs
  the altered response (a malicious client) -- abort, blaming client 2, round Unmasking;
* ``tampered-ciphertext``: one bit of client 1's ciphertext to client 2 flipped in relay
  -- abort, client 1, ShareKeys;
* ``replayed-share``: client 3 answers with client 2's revealed shares -- abort,
  client 3, Unmasking;
* ``outside-survivor``: client n, dropped before its masked input, answers the unmasking
  request with its genuine shares -- abort, client n, Unmasking;
* ``inconsistent-dealer``: client 1 deals one share off its polynomial, chosen so that
  the first t shares interpolate to another valid seed, and commits to it -- abort,
  client 1, ShareKeys (without the consistency check: a wrong sum);
* ``equivocation``: the server gives clients 1..t the survivor list U_3 and the next
  ones U_3 without client 1, and forwards all signatures -- abort (a signature on
  another list);
* ``equivocation-selective``: the same, forwarding to each group only the signatures on
  its own list -- with t > n/2 the smaller group aborts and nothing leaks; with
  t <= n/2 (explicit opt-in) the server recovers client 1's input.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from fedbandit._validation import check_bool, check_choice, check_int_in_range, check_positive_int
from fedbandit.secagg import protocol as _p
from fedbandit.secagg.errors import SecAggError
from fedbandit.secagg.shamir import PRIME, add_to_share, lagrange_at_zero, shamir_reconstruct

__all__ = ["ATTACKS", "AttackOutcome", "run_attack"]

#: The attacks :func:`run_attack` runs, by name (each described in the module docstring).
ATTACKS = (
    "tampered-share",
    "tampered-ciphertext",
    "replayed-share",
    "outside-survivor",
    "inconsistent-dealer",
    "equivocation",
    "equivocation-selective",
)


@dataclass
class AttackOutcome:
    """What one attack achieved.

    Attributes
    ----------
    attack : str
    threshold, n_clients : int
    error : SecAggError or None
        The error that stopped the protocol (at the first client or the server that
        detected the deviation); None if it completed.
    total : numpy.ndarray or None
        The sum the server computed, if any.
    expected_total : numpy.ndarray
        The sum of the honest survivors' inputs.
    leaked : numpy.ndarray or None
        An individual client's input recovered by the server (equivocation attacks), if any.
    victim_input : numpy.ndarray or None
        That client's true input, to compare.
    """

    attack: str
    threshold: int
    n_clients: int
    error: SecAggError | None
    total: np.ndarray | None
    expected_total: np.ndarray
    leaked: np.ndarray | None = None
    victim_input: np.ndarray | None = None

    @property
    def aborted(self) -> bool:
        return self.error is not None

    @property
    def wrong_sum(self) -> bool:
        """The protocol returned a sum that is not the honest survivors' sum (the failure to rule out)."""
        return self.total is not None and not np.array_equal(self.total, self.expected_total)

    @property
    def input_recovered(self) -> bool:
        return self.leaked is not None and np.array_equal(self.leaked, self.victim_input)

    def describe(self) -> str:
        if self.error is not None:
            what = f"aborted ({type(self.error).__name__}): {self.error}"
        else:
            what = "completed, " + ("WRONG sum" if self.wrong_sum else "correct sum")
        if self.leaked is not None:
            what += "; the server recovered client 1's input" if self.input_recovered else "; nothing recovered"
        return f"{self.attack} (n = {self.n_clients}, t = {self.threshold}): {what}"


class _Run:
    """Honest clients, routed step by step, so that one attack can replace a step."""

    def __init__(self, n, t, allow, length, bits, seed):
        self.n, self.t, self.bits, self.length = n, t, bits, length
        self.x = np.random.default_rng(seed).integers(0, 2**bits, size=(n, length))
        self.session = os.urandom(16)
        self.keys, directory = _p.generate_identities(range(1, n + 1))
        common = dict(threshold=t, bits=bits, length=length, session=self.session, directory=directory,
                      allow_small_threshold=allow)
        self.clients = {i: _p.SecAggClient(i, identity_key=self.keys[i], **common) for i in range(1, n + 1)}
        self.server = _p.SecAggServer(**common)
        # one verdict memo per session, as in run_secagg: the attacks run against the shared checks
        self.verdicts = _p._share_verdicts([*self.clients.values(), self.server])
        self.ids = list(range(1, n + 1))

    def sign(self, i, round_name, payload):
        return self.keys[i].sign(_p._transcript(self.session, round_name, i, payload))

    def expected(self, ids):
        return (self.x[[i - 1 for i in ids]].sum(0) % (1 << self.bits)).astype(np.uint64)

    def to_masked(self, masked_ids=None, share_msgs=None):
        roster = self.server.advertise([self.clients[i].advertise_keys() for i in self.ids])
        msgs = share_msgs(roster) if share_msgs else [self.clients[i].share_keys(roster) for i in self.ids]
        self.inboxes = self.server.share_keys(msgs)
        ids = self.ids if masked_ids is None else masked_ids
        return self.server.masked_inputs([self.clients[i].masked_input(self.x[i - 1], self.inboxes[i]) for i in ids])

    def to_unmask(self, masked_ids=None, share_msgs=None):
        u3 = self.to_masked(masked_ids, share_msgs)
        sigs = self.server.consistency_check([self.clients[i].consistency_check(u3) for i in u3])
        return u3, {i: self.clients[i].unmask(sigs) for i in u3}


def _tampered_share(run):
    u3, resp = run.to_unmask()
    r = resp[2]
    seeds = dict(r.seed_shares)
    seeds[1] = _p.RevealedShare(add_to_share(seeds[1].value, 1), seeds[1].salt)
    bad = _p.UnmaskResponse(2, r.mask_key_shares, seeds)
    resp[2] = replace(bad, signature=run.sign(2, "Unmasking", bad.payload()))
    return run.server.unmask(list(resp.values())), run.expected(u3)


def _tampered_ciphertext(run):
    roster = run.server.advertise([run.clients[i].advertise_keys() for i in run.ids])
    inboxes = run.server.share_keys([run.clients[i].share_keys(roster) for i in run.ids])
    box = inboxes[2][1]
    ct = bytearray(box.ciphertext)
    ct[20] ^= 1
    inboxes[2][1] = replace(box, ciphertext=bytes(ct))
    run.clients[2].masked_input(run.x[1], inboxes[2])
    raise AssertionError("unreachable: the tampered ciphertext was accepted")


def _replayed_share(run):
    u3, resp = run.to_unmask()
    r2 = resp[2]
    copy = _p.UnmaskResponse(3, r2.mask_key_shares, r2.seed_shares)
    resp[3] = replace(copy, signature=run.sign(3, "Unmasking", copy.payload()))
    return run.server.unmask(list(resp.values())), run.expected(u3)


def _outside_survivor(run):
    u3, resp = run.to_unmask(masked_ids=run.ids[:-1])  # client n drops before sending its masked input
    late = run.clients[run.n]
    late.masked_input(run.x[run.n - 1], run.inboxes[run.n])  # it was alive, only late: it holds its shares
    dropped = [v for v in run.server.u2 if v not in set(u3)]
    s = {v: _p.RevealedShare(late._held[v][0], late._held[v][2]) for v in dropped}
    b = {v: _p.RevealedShare(late._held[v][1], late._held[v][3]) for v in u3}
    msg = _p.UnmaskResponse(run.n, s, b)
    resp[run.n] = replace(msg, signature=run.sign(run.n, "Unmasking", msg.payload()))
    return run.server.unmask(list(resp.values())), run.expected(u3)


def _inconsistent_dealer(run):
    honest_share = _p.shamir_share_many

    def crooked(secrets, threshold, ids):
        # one share of each secret off its polynomial, chosen so that interpolating the first t points
        # gives secret + 1 (lowest limb + 1: still a valid 256-bit seed or key): without the consistency
        # check the sum would come out wrong
        maps = honest_share(secrets, threshold, ids)
        for shares in maps:
            base = tuple(sorted(shares)[:threshold])
            lam = lagrange_at_zero(base)[1]
            shares[base[1]] = add_to_share(shares[base[1]], pow(lam, -1, PRIME))
        return maps

    def share_msgs(roster):
        msgs = []
        for i in run.ids:
            if i == 1:
                _p.shamir_share_many = crooked
                try:
                    msgs.append(run.clients[i].share_keys(roster))
                finally:
                    _p.shamir_share_many = honest_share
            else:
                msgs.append(run.clients[i].share_keys(roster))
        return msgs

    u3 = run.to_masked(share_msgs=share_msgs)
    sigs = run.server.consistency_check([run.clients[i].consistency_check(u3) for i in u3])
    return run.server.unmask([run.clients[i].unmask(sigs) for i in u3]), run.expected(u3)


def _groups(run):
    a = run.ids[: run.t]  # told: everybody survived (client 1 included)
    b = run.ids[run.t : 2 * run.t]  # told: client 1 dropped
    rest = run.ids[2 * run.t :]
    return a + rest, b


def _equivocation(run, selective):
    u3 = run.to_masked()
    a, b = _groups(run)
    lists = {i: u3 for i in a} | {i: [v for v in u3 if v != 1] for i in b}
    sigs = {i: run.clients[i].consistency_check(lists[i]).signature for i in run.ids}
    responses, first_error = {}, None
    for i in run.ids:
        group = a if i in a else b
        forwarded = {v: sigs[v] for v in (group if selective else run.ids)}
        try:
            responses[i] = run.clients[i].unmask(forwarded)
        except SecAggError as exc:
            first_error = first_error or exc
    # the server's best effort: reconstruct client 1's seed from group a and its mask key from group b
    leaked = None
    seed_sh = {i: responses[i].seed_shares[1].value for i in a if i in responses}
    key_sh = {i: responses[i].mask_key_shares[1].value for i in b if i in responses}
    if len(seed_sh) >= run.t and len(key_sh) >= run.t:
        b1 = shamir_reconstruct(seed_sh, run.t).to_bytes(32, "big")
        s1 = X25519PrivateKey.from_private_bytes(shamir_reconstruct(key_sh, run.t).to_bytes(32, "big"))
        dt = _p._dtype_for(run.bits)
        y = run.server.masked[1].astype(dt)
        y -= _p.prg_mask(b1, run.length, run.bits)
        for v in run.server.u2:
            if v == 1:
                continue
            peer = X25519PublicKey.from_public_bytes(run.server.roster[v].s_pk)
            seed = _p._hkdf(s1.exchange(peer), b"fedbandit-secagg-mask", run.session)
            y -= _p.prg_mask(seed, run.length, run.bits)  # client 1 < v: it added +PRG(s_1v)
        leaked = (y & _p._mask_value(run.bits, dt)).astype(np.uint64)
    total = None
    if len([i for i in a if i in responses]) >= run.t:
        try:  # the honest server's unmasking with the responses on list a (a consistent list)
            run.server.u4 = sorted(a)
            total = run.server.unmask([responses[i] for i in a if i in responses])
        except SecAggError as exc:
            first_error = first_error or exc
    return total, run.expected(u3), leaked, first_error


def run_attack(attack: str, *, n_clients: int = 7, threshold: int | None = None, allow_small_threshold: bool = False,
               length: int = 8, bits: int = 16, seed: int = 0) -> AttackOutcome:
    """Run one attack of :data:`ATTACKS` against the real protocol and report what it achieved.

    Parameters
    ----------
    attack : str
        One of :data:`ATTACKS` (table in the module notes).
    n_clients : int
        Number of clients, at least 4.
    threshold : int, optional
        Shamir threshold (default ``n_clients // 2 + 1``); validated as by
        :func:`~fedbandit.secagg.protocol.check_threshold`.
    allow_small_threshold : bool
        Accept ``threshold <= n_clients / 2`` (to show what the equivocation attack then achieves).
    length, bits : int
        Input vectors: ``length`` entries mod ``2**bits``.
    seed : int
        Seed of the (public, simulated) inputs only; keys and masks come from the OS CSPRNG.
    """
    attack = check_choice("attack", attack, ATTACKS)
    n = check_int_in_range("n_clients", n_clients, 4, 1000)
    allow = check_bool("allow_small_threshold", allow_small_threshold)
    t = _p.check_threshold(n // 2 + 1 if threshold is None else threshold, n, allow_small_threshold=allow)
    length = check_positive_int("length", length)
    bits = check_int_in_range("bits", bits, 2, 64)
    seed = check_int_in_range("seed", seed, 0, None)
    run = _Run(n, t, allow, length, bits, seed)
    victim = run.x[0].astype(np.uint64)
    if attack.startswith("equivocation"):
        total, expected, leaked, error = _equivocation(run, attack == "equivocation-selective")
        return AttackOutcome(attack, t, n, error, total, expected, leaked, victim)
    fn = {"tampered-share": _tampered_share, "tampered-ciphertext": _tampered_ciphertext,
          "replayed-share": _replayed_share, "outside-survivor": _outside_survivor,
          "inconsistent-dealer": _inconsistent_dealer}[attack]
    try:
        total, expected = fn(run)
    except SecAggError as exc:
        return AttackOutcome(attack, t, n, exc, None, run.expected(run.ids))
    return AttackOutcome(attack, t, n, None, total, expected)

"""Intermediaries S of the privacy protocols: what stands between the parties and the server.

* :class:`Identity` -- every message reaches the server with its sender (silo-level LDP,
  the local model, and the central model where the server is trusted);
* :class:`Shuffler` -- a trusted shuffler: the server receives the messages in a
  uniformly random order, i.e. their multiset (Bittau et al. 2017; Cheu et al. 2019).
  The same class serves the vectorized protocols (:meth:`Shuffler.permute`, one
  permutation of the senders per run) and the message-level simulation of the concurrent
  shuffle model (:meth:`Shuffler.open` / :meth:`Shuffler.submit` / :meth:`Shuffler.release`);
* :class:`SecureAggregation` -- the server learns only the sum of the parties' messages
  (Bonawitz et al. 2017): modular for integer messages; ``mode="ideal"`` computes the sum,
  ``mode="real"`` runs the five-round cryptographic protocol of :mod:`fedbandit.secagg`;
* :class:`ConcurrentShufflers` -- k shufflers running concurrently over the stream of
  users, shuffler i on consecutive batches of b_i users (Tenenbaum, Kaplan, Mansour &
  Stemmer 2023); :class:`ConcurrentShuffleModel` simulates the model message by message
  (with :class:`MixedRadixServer`, the reconstructed server of the PSCO algorithm).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Protocol, Sequence

import numpy as np

from fedbandit._validation import (
    check_batch_sizes,
    check_choice,
    check_instance,
    check_nonnegative_int,
    check_positive_int,
    check_rng,
    check_shape,
)
from fedbandit.mechanisms.randomized_response import RRShuffleSummation
from fedbandit.protocols.base import Intermediary, Randomizer
from fedbandit.secagg.protocol import run_secagg

__all__ = [
    "Identity",
    "Shuffler",
    "SecureAggregation",
    "ConcurrentShufflers",
    "Allocation",
    "Release",
    "Transcript",
    "ConcurrentShuffleModel",
    "MixedRadixServer",
    "Server",
]


class Identity(Intermediary):
    """S = identity: the server receives every party's message with its sender."""

    name: ClassVar[str] = "identity"
    view: ClassVar[str] = "messages"
    trusted: ClassVar[str] = "no intermediary"
    delivers_as_sent: ClassVar[bool] = True

    def deliver(self, messages: np.ndarray, rng: np.random.Generator | None = None, *,
                modulus: int | None = None) -> np.ndarray:
        """The messages as sent (senders on axis 1)."""
        return messages

    def describe(self) -> str:
        return "identity: every message reaches the server with its sender"


class Shuffler(Intermediary):
    """A trusted shuffler: the server receives the messages in a uniformly random order.

    Vectorized use (the protocols): :meth:`permute` / :meth:`deliver` apply one uniformly
    random permutation of the senders per run.  Message-level use (the concurrent shuffle
    model): inactive until :meth:`open` allocates it a batch of ``batch_size`` users; while
    active it stores the messages it receives; when the batch is full :meth:`release`
    returns them in a uniformly random order and it becomes inactive again.

    Parameters
    ----------
    index : int, default 0
        Its number among several shufflers (message-level use).
    """

    name: ClassVar[str] = "shuffler"
    view: ClassVar[str] = "multiset"
    trusted: ClassVar[str] = "the shuffler (not to collude with the server)"

    def __init__(self, *, index: int = 0):
        self.index = check_nonnegative_int("index", index)
        self.active = False
        self.batch_size = 0
        self.start = 0
        self.tag: Any = None
        self._messages: list = []

    def describe(self) -> str:
        return "shuffler: a uniformly random permutation of the senders' messages"

    def __repr__(self) -> str:
        state = f"active, {len(self._messages)}/{self.batch_size}" if self.active else "inactive"
        return f"Shuffler(index={self.index}, {state})"

    # ---- vectorized: one permutation of the senders per run
    @staticmethod
    def permute(rng: np.random.Generator | None, *messages: np.ndarray, axis: int = 1) -> tuple[np.ndarray, ...]:
        """One uniformly random permutation of the senders per run, applied to every array.

        Every array in ``messages`` has the runs on axis 0 and the senders on ``axis``; the
        same permutation is applied to all of them (one message per sender may be split
        across arrays).  ``rng`` is required (``None`` is refused by name).
        """
        gen = check_rng("rng", rng)
        R, M = messages[0].shape[0], messages[0].shape[axis]
        perm = np.argsort(gen.random((R, M)), axis=1)
        out = []
        for m in messages:
            idx = perm.reshape((R, M) + (1,) * (m.ndim - 2))
            out.append(np.take_along_axis(m, idx, axis=axis))
        return tuple(out)

    def deliver(self, messages: np.ndarray, rng: np.random.Generator | None = None, *,
                modulus: int | None = None) -> np.ndarray:
        """The messages with their senders permuted (per run)."""
        if messages.shape[1] == 1:  # pooled messages: already a multiset
            return messages
        return self.permute(rng, messages)[0]

    # ---- message level: one batch at a time
    def open(self, batch_size: int, start: int, tag: Any = None) -> None:
        """Allocate a new batch of ``batch_size`` users, the first of which is user ``start``."""
        if self.active:
            raise RuntimeError(f"shuffler {self.index} is active; it can only be reused after its release")
        self.batch_size = check_positive_int("batch_size", batch_size)
        self.start = check_positive_int("start", start)
        self.tag = tag
        self.active = True
        self._messages = []

    def submit(self, message: Any) -> None:
        """Store one encoded message of the current batch."""
        if not self.active:
            raise RuntimeError(f"shuffler {self.index} is inactive and accepts no messages")
        if len(self._messages) >= self.batch_size:
            raise RuntimeError(f"shuffler {self.index} is full ({self.batch_size} messages)")
        self._messages.append(message)

    @property
    def full(self) -> bool:
        return self.active and len(self._messages) == self.batch_size

    def release(self, rng: np.random.Generator) -> np.ndarray:
        """Return the batch's messages in a uniformly random order and become inactive."""
        rng = check_rng("rng", rng)
        if not self.full:
            raise RuntimeError(f"shuffler {self.index} can only release a full batch")
        out = np.asarray(self._messages)[rng.permutation(self.batch_size)]
        self.active = False
        self._messages = []
        return out


class SecureAggregation(Intermediary):
    """Secure aggregation (Bonawitz et al. 2017): the server learns only the sum of the messages.

    Integer messages are summed modulo their modulus (2^bits); real-valued messages can
    only be summed ideally (``mode="ideal"``): the cryptographic protocol works in a
    finite group, so ``mode="real"`` refuses them (use a discretizing randomizer, such
    as the distributed discrete Gaussian).

    Parameters
    ----------
    mode : {"ideal", "real"}
        ``"ideal"`` computes the (modular) sum directly; ``"real"`` runs the five-round
        protocol of :func:`fedbandit.secagg.run_secagg` per run (the same output, slowly).
    threshold : int or None
        Shamir threshold t of the real protocol (default ⌊M/2⌋ + 1).
    """

    name: ClassVar[str] = "secure-aggregation"
    view: ClassVar[str] = "sum"
    trusted: ClassVar[str] = "the cryptography, and every party adding its noise (honest-but-curious server)"

    def __init__(self, mode: str = "ideal", *, threshold: int | None = None) -> None:
        self.mode = check_choice("mode", mode, ("ideal", "real"))
        self.threshold = None if threshold is None else check_positive_int("threshold", threshold)

    def supports(self, randomizer: Randomizer) -> str | None:
        reason = super().supports(randomizer)
        if reason is None and self.mode == "real" and randomizer.message != "integer":
            reason = (
                f"randomizer {randomizer.name!r} with intermediary 'secure-aggregation' (mode='real'): real secure "
                f"aggregation sums integers modulo 2^bits, but this randomizer sends {randomizer.message} messages; "
                "use mode='ideal' or a discretizing randomizer (the distributed discrete Gaussian)"
            )
        return reason

    def check_parties(self, n_parties: int, name: str = "n_parties") -> None:
        """The five-round protocol shares every key among the other parties: ``mode="real"`` needs two or more."""
        if self.mode == "real" and n_parties < 2:
            raise ValueError(f"secure aggregation mode='real' needs {name} >= 2, got {n_parties}")

    def describe(self) -> str:
        how = "the five-round protocol of Bonawitz et al." if self.mode == "real" else "ideal"
        return f"secure aggregation ({how}): the server learns only the sum of the messages"

    def deliver(self, messages: np.ndarray, rng: np.random.Generator | None = None, *,
                modulus: int | None = None) -> np.ndarray:
        """Σ over senders (axis 1); modulo ``modulus`` for integer messages."""
        if modulus is None:
            return messages.sum(axis=1)
        if self.mode == "ideal":
            return np.mod(messages.sum(axis=1), modulus)
        bits = int(modulus).bit_length() - 1
        M = messages.shape[1]
        t = self.threshold if self.threshold is not None else M // 2 + 1
        return np.stack([run_secagg(r, bits=bits, threshold=t).total for r in messages])


class ConcurrentShufflers(Intermediary):
    """k shufflers running concurrently (Tenenbaum, Kaplan, Mansour & Stemmer 2023).

    Shuffler i collects consecutive batches of b_i users (b_1 > ... > b_k, each dividing
    the previous), releasing each full batch's messages in a random order; every user
    sends its messages (g_i one-bit messages per coordinate) to each of the k active
    shufflers.  With one level of batch size 1 every "batch" is one user, whose messages
    reach the server as they are: the local model.

    The vectorized protocol (:mod:`fedbandit.protocols.concurrent`) never materializes the
    messages: a shuffle of one-bit messages reveals exactly their number of ones, so the
    randomizer emits, per released batch and coordinate, that count (drawn from its exact
    distribution) and :meth:`deliver` passes it on.  :class:`ConcurrentShuffleModel`
    simulates the same shufflers message by message (:class:`Shuffler`).

    Parameters
    ----------
    batch_sizes : sequence of int, optional
        (b_1, ..., b_k).  None when the schedule depends on the number of users, which
        the protocol learns when it is configured (:meth:`set_batch_sizes`).
    """

    name: ClassVar[str] = "concurrent-shufflers"
    view: ClassVar[str] = "multiset"
    trusted: ClassVar[str] = "each of the k shufflers (not to collude with the server)"

    def __init__(self, batch_sizes: Sequence[int] | None = None) -> None:
        self.batch_sizes: tuple[int, ...] | None = None
        self.k: int | None = None
        if batch_sizes is not None:
            # nested and positive here; checked against the number of users by set_batch_sizes
            self.batch_sizes = check_batch_sizes("batch_sizes", batch_sizes, sys.maxsize)
            self.k = len(self.batch_sizes)

    def set_batch_sizes(self, batch_sizes: Sequence[int], n: int) -> None:
        """Fix the schedule (b_1, ..., b_k), checked against n users (:func:`fedbandit._validation.check_batch_sizes`)."""
        self.batch_sizes = check_batch_sizes("batch_sizes", batch_sizes, check_positive_int("n", n))
        self.k = len(self.batch_sizes)

    def supports(self, randomizer: Randomizer) -> str | None:
        reason = super().supports(randomizer)
        if reason is None and randomizer.message != "count":
            reason = (
                f"randomizer {randomizer.name!r} with intermediary 'concurrent-shufflers': the k shufflers carry "
                f"one-bit messages (delivered as their counts of ones), but this randomizer sends {randomizer.message} "
                "messages; use the randomized-response randomizer"
            )
        return reason

    @property
    def local(self) -> bool:
        """True for one level of batches of one user (the local model)."""
        return self.batch_sizes == (1,)

    def describe(self) -> str:
        if self.batch_sizes is None:
            return "concurrent shufflers on nested batches of users (schedule fixed when configured)"
        if self.local:
            return "batches of one user: every user's messages reach the server as they are (the local model)"
        return f"k = {self.k} concurrent shufflers on batches of {list(self.batch_sizes)} users"

    def deliver(self, messages: Any, rng: np.random.Generator | None = None, *, modulus: int | None = None) -> Any:
        """Counts of ones are already the multiset of a batch's one-bit messages."""
        return messages


@dataclass(frozen=True)
class Allocation:
    """A server decision: run shuffle mechanism ``(randomizer, batch_size)`` on shuffler ``shuffler``.

    ``randomizer(value, u) -> message`` encodes one user's value with one uniform u;
    ``tag`` is free (the level, for the mixed-radix server).
    """

    shuffler: int
    batch_size: int
    randomizer: Callable[[Any, float], Any]
    tag: Any = None


@dataclass(frozen=True)
class Release:
    """One executed shuffle mechanism: users ``start..end`` (inclusive), released at ``end``."""

    shuffler: int
    start: int
    end: int
    tag: Any
    messages: np.ndarray


@dataclass
class Transcript:
    """Everything the server saw (the releases) and what it reported (estimates[t], t = 0..n)."""

    n: int
    k: int
    releases: list = field(default_factory=list)
    estimates: np.ndarray | None = None
    active_counts: np.ndarray | None = None


class Server(Protocol):
    """What :class:`ConcurrentShuffleModel` asks of its server: the shufflers' allocation and the estimates."""

    def allocate(self, t: int, inactive: Sequence[int], releases: Sequence[Release]) -> list[Allocation]: ...

    def estimate(self, t: int, releases: Sequence[Release]) -> float: ...


class ConcurrentShuffleModel:
    """k concurrent shufflers and a deterministic server (Tenenbaum et al., Algorithm 1, read from the prose).

    At time t = 1, ..., n: (1) the server allocates new batches on (some of) the inactive
    shufflers, deterministically from the releases so far; (2) user t encodes its value
    with each active shuffler's randomizer and submits the messages; (3) every shuffler
    whose batch is now full releases its messages in random order; (4) the server
    reports its estimate, a function of the releases.

    Randomness: the message of user t to shuffler i uses the uniform ``U[i, t − 1]`` of
    ``U = rng.random((k, n))`` drawn first; the shufflers' permutations use draws made
    after it.  For bit inputs the vectorized per-user path of
    :func:`fedbandit.mechanisms.psco.concurrent_psco` uses the same layout, so both give
    identical estimates from the same generator state.  This is the reference
    simulation: O(n k) Python steps, for small n (figures, tests).
    """

    def __init__(self, k: int, server: Server):
        self.k = check_positive_int("k", k)
        self.server = server

    def run(self, x: Any, rng: np.random.Generator) -> Transcript:
        """Run users with values ``x`` (1-D, in the randomizers' domain) through the model."""
        rng = check_rng("rng", rng)
        values = np.asarray(x)
        if values.ndim != 1:
            raise ValueError(f"x must be 1-D (one value per user), got shape {values.shape}")
        n = values.size
        u = rng.random((self.k, n))
        shufflers = [Shuffler(index=i) for i in range(self.k)]
        randomizers: list = [None] * self.k
        estimates, active_counts = np.zeros(n + 1), np.zeros(n + 1, dtype=int)
        tr = Transcript(n=n, k=self.k, estimates=estimates, active_counts=active_counts)
        for t in range(1, n + 1):
            inactive = [s.index for s in shufflers if not s.active]
            for alloc in self.server.allocate(t, inactive, tr.releases):
                if alloc.shuffler not in inactive:
                    raise RuntimeError(f"the server allocated the active shuffler {alloc.shuffler} at t={t}")
                shufflers[alloc.shuffler].open(alloc.batch_size, t, alloc.tag)
                randomizers[alloc.shuffler] = alloc.randomizer
            active_counts[t] = sum(s.active for s in shufflers)
            for s in shufflers:
                if s.active:
                    s.submit(randomizers[s.index](values[t - 1], u[s.index, t - 1]))
            for s in shufflers:
                if s.full:
                    start, tag = s.start, s.tag
                    tr.releases.append(Release(s.index, start, t, tag, s.release(rng)))
            estimates[t] = self.server.estimate(t, tr.releases)
        return tr


class MixedRadixServer:
    """Deterministic server of the book's reconstructed k-level PSCO algorithm.

    Shuffler i (level i) runs consecutive batches of size b_i over the whole stream with
    the randomized-response summation at the per-level budget; b_{i+1} divides b_i.  The
    estimate at t sums the released level-1 batches, then the level-2 batches released
    inside the current level-1 batch, and so on: the mixed-radix decomposition of t.
    Users of a partial level-k batch are not yet counted.  [derived]

    Parameters
    ----------
    batch_sizes : sequence of int
        (b_1, ..., b_k), nested.
    protocols : sequence of RRShuffleSummation
        The summation protocol of each level (``protocols[i].n_users == batch_sizes[i]``).
    """

    def __init__(self, batch_sizes: Sequence[int], protocols: Sequence[RRShuffleSummation]):
        self.batch_sizes = check_shape("batch_sizes", batch_sizes, allow_empty=False, max_size=2**62)
        if isinstance(protocols, (str, bytes, dict)) or not hasattr(protocols, "__iter__"):
            raise TypeError(f"protocols must be a sequence of RRShuffleSummation, got {protocols!r:.80}")
        self.protocols = [check_instance("protocols", p, RRShuffleSummation) for p in protocols]
        if len(self.protocols) != len(self.batch_sizes):
            raise ValueError("protocols must have one entry per level of batch_sizes")
        for b, proto in zip(self.batch_sizes, self.protocols):
            if proto.n_users != b:
                raise ValueError(f"protocols: the one for batch size {b} (batch_sizes={self.batch_sizes}) was calibrated for {proto.n_users} users")

    def allocate(self, t: int, inactive: Sequence[int], releases: Sequence[Release]) -> list[Allocation]:
        return [
            Allocation(i, self.batch_sizes[i], self.protocols[i].randomizer, tag=i)
            for i in inactive
        ]

    def estimate(self, t: int, releases: Sequence[Release]) -> float:
        # Walk the levels from the coarsest: keep the releases of level i that start after
        # the last level-(i-1) boundary covered so far.
        covered = 0
        total = 0.0
        for level, b in enumerate(self.batch_sizes):
            for rel in releases:
                if rel.tag == level and rel.start > covered and rel.end <= t:
                    total += self.protocols[level].analyzer(rel.messages)
            covered = (t // b) * b
        return total

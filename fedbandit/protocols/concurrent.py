"""The concurrent-shuffle protocol for the linear-bandit statistics (Tenenbaum, Kaplan, Mansour & Stemmer 2023).

LinUCB needs only the prefix sums of x xᵀ (Gram matrix) and x y (bias vector).  Users
t = 1, ..., n arrive one at a time and each sends its record
z_t = (x_t y_t, upper triangle of x_t x_tᵀ) of D = d + d(d+1)/2 coordinates through the
protocol; every coordinate is a private summation under continual observation (PSCO,
:mod:`fedbandit.mechanisms.psco`).  The protocol P = (R, S, A) is

* R = :class:`RandomizedResponseRecords` -- on every user's record: each coordinate
  v ∈ [−s, s] (s = L·Y for x y, L² for x xᵀ: :func:`record_half_range`) is mapped to
  (v/s + 1)/2 ∈ [0, 1]; for each level i the value is rounded to g_i = ⌈sqrt(b_i)⌉ unary
  bits (:func:`fedbandit.mechanisms.randomized_response.unary_round`, independently per
  level) and every bit goes through binary randomized response with the flip probability
  p_i = :func:`fedbandit.accounting.shuffle.rr_flip_probability` (b_i g_i, ε_b, δ_b);
* S = :class:`fedbandit.protocols.intermediaries.ConcurrentShufflers` (b_1, ..., b_k) --
  shuffler i releases the multiset of the messages of each consecutive batch of b_i users;
  one level of batches of one user is the local model;
* A = :class:`MixedRadixAnalyzer` -- debias every released batch count and report the
  mixed-radix estimate of the prefix sums (all released level-1 batches, then the level-2
  batches released inside the current level-1 batch, ...), mapped back as s(2S − t).

A learner serves the users one at a time as one agent (M = 1) and synchronizes every
``period`` = b_k users (:class:`fedbandit.learners.ConcurrentShuffleLinUCB`): the estimate
then covers every user so far, since b_k divides every b_i.  The values are not bits, so a
user sends ⌈sqrt(b)⌉ unary messages to a batch of b users
(:class:`fedbandit.mechanisms.randomized_response.RRShuffleSummation` with ``resolution``),
which keeps the rounding error O(1) per batch.  [derived]

Privacy.  The neighbouring relation of the concurrent shuffle model is the substitution
of one user's record ("replace").  A user's record enters D coordinates × k levels = kD
shuffle mechanisms; each runs at the per-mechanism budget (ε₀, δ₀) =
:func:`fedbandit.accounting.composition.level_budget` (ε, δ, kD) (the better of basic and
advanced composition) and, with g messages moved by one user's value, at the per-message
budget :func:`fedbandit.accounting.composition.group_budget` (ε₀, δ₀, g), certified by the
privacy-blanket bound (:func:`fedbandit.accounting.shuffle.rr_shuffle_delta`).  The event
(:meth:`ConcurrentShuffleProtocol.event`) is the composition of the kD mechanisms, each
"invalid" unless its level's certificate holds.  The adversary is the server, which sees
every shuffler's output (the counts of ones of every released batch) and nothing else;
every shuffler is trusted not to collude with it.

Registered (:func:`fedbandit.protocols.create`): ``"concurrent-shuffle"`` with ``k``
(shufflers, schedule from :func:`concurrent_schedule`; ``k="log"`` the dyadic tree
variant) or an explicit nested ``batch_sizes``: ``batch_sizes=(B,)`` with B ≈ n^{3/5}
(:func:`sequential_batch_sizes`) is the sequential shuffle model of Chowdhury & Zhou
(2022), ``batch_sizes=(1,)`` the local model.
"""

from __future__ import annotations

import functools
import math
from typing import ClassVar

import numpy as np

from fedbandit._validation import (
    check_batch_sizes,
    check_choice,
    check_positive_float,
    check_positive_int,
    check_rng,
)
from fedbandit.accounting.composition import level_budget
from fedbandit.accounting.events import ApproxDpEvent, ComposedEvent, ConditionalEvent, check_relation
from fedbandit.mechanisms.psco import dyadic_batch_sizes, optimal_batch_sizes
from fedbandit.mechanisms.randomized_response import (
    RRShuffleSummation,
    _sample_counts,
    _unary_round,
    unary_resolution,
)
from fedbandit.protocols.base import Analyzer, Communication, Protocol, Randomizer
from fedbandit.protocols.intermediaries import ConcurrentShufflers
from fedbandit.protocols.registry import register
from fedbandit.protocols.statistics import SCHEDULES, check_setting, n_coordinates

__all__ = [
    "record_half_range",
    "concurrent_schedule",
    "sequential_batch_sizes",
    "RandomizedResponseRecords",
    "MixedRadixAnalyzer",
    "ConcurrentShuffleProtocol",
]

_TKMS = "Tenenbaum, Kaplan, Mansour & Stemmer 2023"


@functools.lru_cache(maxsize=64)
def _triu(dim: int) -> tuple[np.ndarray, np.ndarray]:
    # the upper-triangle indices of fedbandit.protocols.statistics' packing, computed once
    # per d (this protocol synchronizes after every user in its period-1 variants)
    return np.triu_indices(dim)


def _is_int_like(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def record_half_range(dim: int, feature_bound: float = 1.0, reward_bound: float = 1.0) -> np.ndarray:
    """s of every coordinate of a record: L·Y for the d bias entries, L² for the Gram entries (packed order)."""
    dim = check_positive_int("dim", dim, max_value=40_000, reason="a record has d + d(d+1)/2 entries")
    feature_bound = check_positive_float("feature_bound", feature_bound)
    reward_bound = check_positive_float("reward_bound", reward_bound)
    return np.r_[np.full(dim, feature_bound * reward_bound), np.full(n_coordinates(dim) - dim, feature_bound**2)]


def concurrent_schedule(n: int, k, epsilon: float, delta: float, dim: int, *, finest: int | None = None) -> tuple[int, ...]:
    """Batch sizes of the k-shuffler PSCO on a user's D-coordinate record over n users.

    ``k="log"``: dyadic (2^{L−1}, ..., 1) with L = ⌊log₂ n⌋ + 1
    (:func:`fedbandit.mechanisms.psco.dyadic_batch_sizes`); otherwise
    :func:`fedbandit.mechanisms.psco.optimal_batch_sizes` with ``streams=D`` and real values
    (the budget split over kD mechanisms, ⌈sqrt(b)⌉ messages per user and batch).
    ``finest`` fixes b_k (a learner synchronizing every ``finest`` users): the dyadic
    schedule over blocks of ``finest`` users, or the optimal ratio for that b_k.
    """
    n = check_positive_int("n", n)
    dim = check_positive_int("dim", dim, max_value=40_000, reason="a record has d + d(d+1)/2 entries")
    if finest is not None:
        finest = check_positive_int("finest", finest)
        if finest > n:
            raise ValueError(f"finest={finest} exceeds the number of users n={n}")
    if isinstance(k, str):
        check_choice("k", k, ("log",))
        if finest is None:
            return dyadic_batch_sizes(n)
        return tuple(finest * b for b in dyadic_batch_sizes(n // finest))
    return optimal_batch_sizes(n, check_positive_int("k", k), epsilon, delta, streams=n_coordinates(dim), values="real",
                               finest=finest)


def sequential_batch_sizes(n: int) -> tuple[int]:
    """(B,) with B = min(n, ⌈n^{3/5}⌉): the sequential shuffle model's batch (Chowdhury & Zhou 2022)."""
    n = check_positive_int("n", n)
    return (min(n, math.ceil(n**0.6)),)


# ---------------------------------------------------------------------------------------
# R, A
# ---------------------------------------------------------------------------------------


class RandomizedResponseRecords(Randomizer):
    """R: randomized response on every coordinate of every user's record, at every level.

    User t's record z_t (D coordinates) is mapped to [0, 1] coordinate-wise,
    (v/s + 1)/2, clipped; at level i (batches of b_i users) each value is rounded to u of
    g_i = ⌈sqrt(b_i)⌉ unary bits, independently per level, and each bit is sent through
    binary randomized response with flip probability p_i (one
    :class:`fedbandit.mechanisms.randomized_response.RRShuffleSummation` per level, at the
    per-mechanism budget (ε₀, δ₀) = ``level_budget(ε, δ, kD)``).

    Vectorized (aggregate sampling): the users' unary ones are accumulated per level and
    coordinate; when a level-i batch closes, the number of ones among its b_i g_i
    randomized messages per coordinate -- all the shuffler's output reveals -- is drawn
    from its exact distribution
    (:func:`fedbandit.mechanisms.randomized_response.sample_rr_counts`).  The messages are
    therefore emitted as counts, one per released batch and coordinate.
    """

    name: ClassVar[str] = "randomized-response"
    message: ClassVar[str] = "count"
    needs_user_data: ClassVar[bool] = True
    private_alone: ClassVar[bool] = False

    def describe(self) -> str:
        return (
            "per user, coordinate and level i: (v/s + 1)/2 rounded to ⌈sqrt(b_i)⌉ unary bits, each sent by "
            "randomized response with flip probability p_i"
        )

    def configure(self, protocol: ConcurrentShuffleProtocol) -> None:
        p = protocol
        self.half_range = record_half_range(p.dim, p.feature_bound, p.reward_bound)
        self.n_coords = self.half_range.size
        sizes = p.batch_sizes
        self.eps0, self.delta0 = level_budget(p.target_epsilon, p.target_delta, len(sizes) * self.n_coords)
        self.levels = [RRShuffleSummation(b, self.eps0, self.delta0, resolution=unary_resolution(b)) for b in sizes]
        self.resolutions = tuple(lvl.resolution for lvl in self.levels)
        self.certified = tuple(lvl.certified_delta <= lvl.delta_message for lvl in self.levels)
        self._g = np.array(self.resolutions, dtype=float)[:, None, None, None]
        # privacy noise + rounding (≤ b/(4g²)) variance of one released batch sum, [0, 1] units
        self.batch_variance = tuple(lvl.variance + lvl.n_users / (4.0 * lvl.resolution**2) for lvl in self.levels)

    def reset(self, protocol: ConcurrentShuffleProtocol) -> None:
        self._ones = np.zeros((len(self.levels), protocol.n_runs, self.n_coords), dtype=np.int64)
        self._t = 0

    def encode(self, protocol: ConcurrentShuffleProtocol, users) -> dict:
        """The period's users' records in; the counts of every batch closing now out ({level: (R, D)}, finest first)."""
        x, y = users
        x, y = x[:, :, 0], y[:, :, 0]
        iu, ju = _triu(x.shape[-1])
        # every user's record, as fedbandit.protocols.statistics.user_records: (b_k, R, D)
        z = np.concatenate([x * y[..., None], x[..., iu] * x[..., ju]], axis=-1)
        rng = protocol._noise_rng
        z01 = np.clip((z / self.half_range + 1.0) / 2.0, 0.0, 1.0)
        # every level's randomizer rounds independently (unary_round with one g per level:
        # one draw for all levels at once)
        self._ones += _unary_round(z01, self._g, rng).sum(axis=1)
        self._t += z.shape[0]
        out = {}
        # Finest level first (the analyzer then lets a coarser release at the same time
        # clear the finer batches it contains).
        for i in reversed(range(len(self.levels))):
            lvl = self.levels[i]
            if self._t % lvl.n_users == 0:
                # sample_rr_counts without its argument checks (0 ≤ ones ≤ b g by construction)
                out[i] = _sample_counts(self._ones[i], lvl.n_messages, lvl.q0, lvl.q1, rng)
                self._ones[i] = 0
        return out


class MixedRadixAnalyzer(Analyzer):
    """A: debias every released batch count; the prefix is the mixed-radix decomposition of t.

    Level i's count Z of a batch of b users with g messages each gives the batch sum
    (Z − b g p/2)/((1 − p) g) in [0, 1] units; the estimate after t users is the sum of all
    released level-1 batches, the level-2 batches released inside the current level-1
    batch, ..., the level-k batches inside the current level-(k−1) batch
    (:class:`fedbandit.protocols.intermediaries.MixedRadixServer` is the same server, message
    by message), mapped back to the records' range as s(2S − t).  [derived]
    """

    name: ClassVar[str] = "mixed-radix"

    def describe(self) -> str:
        return (
            "debias every released batch count; prefix = released level-1 batches + level-2 batches inside the "
            "current level-1 batch + ..., mapped back as s(2S − t)"
        )

    def reset(self, protocol: ConcurrentShuffleProtocol) -> None:
        r = protocol.randomizer
        self._since_parent = np.zeros((len(r.levels), protocol.n_runs, r.n_coords))
        self._t = 0

    def analyze(self, protocol: ConcurrentShuffleProtocol, delivered: dict) -> np.ndarray:
        r = protocol.randomizer
        for i, count in delivered.items():
            lvl = r.levels[i]
            b, g, p = lvl.n_users, lvl.resolution, lvl.p
            self._since_parent[i] += (count - b * g * p / 2.0) / ((1.0 - p) * g)
            self._since_parent[i + 1 :] = 0.0
        self._t += protocol.period
        return r.half_range * (2.0 * self._since_parent.sum(axis=0) - self._t)


# ---------------------------------------------------------------------------------------
# The protocol
# ---------------------------------------------------------------------------------------


class ConcurrentShuffleProtocol(Protocol):
    """P = (R, S, A) of the concurrent shuffle model for the linear-bandit statistics of users served one at a time.

    The interface of :class:`fedbandit.protocols.StatisticsProtocol` (kind
    ``"statistics"``), with one agent (M = 1) and batches of ``period`` = b_k users:

    ``batch_sizes_for(n_users, dim, period=None)``
        The schedule (b_1, ..., b_k) for n users (no state): the learner reads b_k from it
        before configuring.
    ``configure(n_agents=1, dim=d, n_batches=⌊n/b_k⌋, batch_size=b_k, feature_bound=L, reward_bound=Y, n_users=n)``
        Fixes the schedule -- with the finest batch b_k = ``batch_size``, the period of the
        synchronizations (the automatic schedule is optimised for it) -- and calibrates
        every level (no random state).  ``n_users`` (default ``n_batches·batch_size``) is
        the number of users the noise bound covers; users after the last full period are
        served but never synchronized.
    ``reset(n_runs=R, rng=generator)``
    ``synchronize(bias, gram, users=(x, y), runs=None) -> (bias_prefix (R, d), gram_prefix (R, d, d))``
        ``bias`` (R, 1, d) and ``gram`` (R, 1, d, d) are the period's sums (checked, not
        used: the randomizer acts on the records), ``users`` x (b_k, R, 1, d) and
        y (b_k, R, 1) the period's users (y already clipped to [−Y, Y]).  All runs
        synchronize together (``runs`` must be None).
    ``event(relation=None)``, ``accounting(relation=None)``, ``server_noise_std()``,
    ``coordinate_noise_std()``, ``prefix_noise_variance(k)``, ``calibration()``,
    ``parts()``, ``communication`` (one-bit messages).

    Parameters
    ----------
    randomizer : RandomizedResponseRecords
    intermediary : ConcurrentShufflers
        With explicit batch sizes, or None-sized (the schedule then follows from ``k`` and n).
    analyzer : MixedRadixAnalyzer
    name : str
    epsilon, delta : float
        The target (ε, δ) per user over the whole run.
    relation : {"replace", "add-remove"}, default "replace"
        The concurrent shuffle model's relation is the substitution of one user's record.
        Under "add-remove" a removed user is taken to send the null record (z = 0, which
        enters every coordinate as 1/2), a substitution: the same event is reported.
    k : int or "log", optional
        Shufflers of the automatic schedule (:func:`concurrent_schedule`; default 1, the
        sequential shuffle model with the optimal batch); with explicit batch sizes it
        must be their number of levels, if given.
    """

    kind: ClassVar[str] = "statistics"
    supports_run_masks: ClassVar[bool] = False

    def __init__(self, randomizer, intermediary, analyzer, *, name, epsilon, delta, relation="replace", k=None):
        super().__init__(randomizer, intermediary, analyzer, name=name, epsilon=epsilon, delta=delta, relation=relation)
        for part, obj, cls in (
            ("randomizer", randomizer, RandomizedResponseRecords),
            ("intermediary", intermediary, ConcurrentShufflers),
            ("analyzer", analyzer, MixedRadixAnalyzer),
        ):
            if not isinstance(obj, cls):
                raise TypeError(f"{part} {obj.name!r} does not fit the concurrent-shuffle protocol (needs {cls.__name__})")
        if not self.private:
            raise ValueError(f"protocol {self.name!r} needs a target (epsilon, delta)")
        self._fixed_sizes = intermediary.batch_sizes
        if self._fixed_sizes is None:
            self.k_rule = 1 if k is None else k if (isinstance(k, str) and k == "log") else check_positive_int("k", k)
        else:
            if k is not None and not (_is_int_like(k) and k == len(self._fixed_sizes)):
                raise ValueError(
                    f"k={k!r} does not match batch_sizes={list(self._fixed_sizes)} ({len(self._fixed_sizes)} levels)"
                )
            self.k_rule = len(self._fixed_sizes)
        self.communication = Communication(payload_unit="bits")

    # ------------------------------------------------------------ configuration
    @property
    def model(self) -> str:
        sizes = self.intermediary.batch_sizes
        if sizes == (1,):
            return "LDP"
        levels = len(sizes) if sizes is not None else self.k_rule
        return "SDP" if levels == 1 else "CSDP"

    @property
    def trusted(self) -> str:
        if self.intermediary.batch_sizes == (1,):
            return "nobody (every user randomizes its own record)"
        return self.intermediary.trusted

    @property
    def needs_user_data(self) -> bool:
        return True

    def batch_sizes_for(self, n_users, dim, period=None) -> tuple[int, ...]:
        """The schedule (b_1, ..., b_k) for ``n_users`` users with d = ``dim`` (no state).

        ``period``: the learner synchronizes every ``period`` users, which must be the
        finest batch b_k (so that every released estimate covers all users so far): the
        automatic schedule is then optimised with b_k fixed to it.  Without ``period`` it
        is the unconstrained optimum, whose b_k a learner takes as its period.
        """
        n = check_positive_int("n_users", n_users)
        if self._fixed_sizes is not None:
            sizes = check_batch_sizes("batch_sizes", self._fixed_sizes, n)
            if period is not None and sizes[-1] != period:
                raise ValueError(
                    f"protocol {self.name!r} with batch_sizes={list(sizes)}: synchronizations come every "
                    f"b_k={sizes[-1]} users, so batch_size must be {sizes[-1]}, got {period}"
                )
            return sizes
        return concurrent_schedule(n, self.k_rule, self.target_epsilon, self.target_delta, dim, finest=period)

    def configure(self, *, n_agents, dim, n_batches, batch_size, feature_bound=1.0, reward_bound=1.0, schedule="fixed",
                  n_users=None):
        """Validate the setting, fix the schedule and calibrate every level; returns ``self``."""
        if check_positive_int("n_agents", n_agents) != 1:
            raise ValueError(
                f"protocol {self.name!r} serves users one at a time: n_agents must be 1, got {n_agents} (serve a "
                "federated instance's users in sequence with fedbandit.envs.UserSequenceEnv)"
            )
        self.n_agents = 1
        _, self.dim, self.n_batches, self.batch_size = check_setting(1, dim, n_batches, batch_size)
        if check_choice("schedule", schedule, SCHEDULES) != "fixed":
            raise ValueError(f"protocol {self.name!r} serves only a fixed schedule (its shufflers' batches are fixed)")
        self.n_users = self.n_batches * self.batch_size if n_users is None else check_positive_int("n_users", n_users)
        self.feature_bound = check_positive_float("feature_bound", feature_bound)
        if reward_bound is None:
            raise ValueError(
                f"protocol {self.name!r} maps every coordinate of a record into [0, 1] and needs reward_bound (the "
                "learner must clip rewards), got None"
            )
        self.reward_bound = check_positive_float("reward_bound", reward_bound)
        if self.n_batches != self.n_users // self.batch_size:
            raise ValueError(
                f"protocol {self.name!r}: n_users={self.n_users} users synchronized every batch_size={self.batch_size} "
                f"give n_batches={self.n_users // self.batch_size}, got {self.n_batches}"
            )
        sizes = self.batch_sizes_for(self.n_users, self.dim, period=self.batch_size)
        self.intermediary.set_batch_sizes(sizes, self.n_users)
        self.batch_sizes = sizes
        self.period = sizes[-1]
        self.horizon = self.n_users
        self.randomizer.configure(self)
        self._configured = True
        self._reset_done = False
        return self

    def reset(self, *, n_runs, rng):
        """Allocate ``n_runs`` runs.

        The randomizer's rounding and randomized responses -- all of the protocol's
        randomness: the shufflers' permutations need no draws, since the server sees only
        counts -- are drawn from ``rng`` itself, in the order of the book's first (stream)
        implementation, so that results stay reproducible across versions.
        """
        self._require()
        self.n_runs = check_positive_int("n_runs", n_runs)
        self._noise_rng = check_rng("rng", rng)
        self._shuffle_rng = None
        self.communication = Communication(payload_unit="bits")
        self.randomizer.reset(self)
        self.analyzer.reset(self)
        self._k = 0
        self._reset_done = True
        return self

    # ------------------------------------------------------------ the release
    def synchronize(self, bias, gram, *, users=None, runs=None):
        """One synchronization after ``period`` users; returns the noisy prefix sums (R, d) and (R, d, d)."""
        self._require(reset=True)
        R, d, b = self.n_runs, self.dim, self.period
        if runs is not None:
            raise ValueError(f"protocol {self.name!r} synchronizes all runs together: runs= is not supported")
        bias = np.asarray(bias, dtype=float)
        gram = np.asarray(gram, dtype=float)
        if bias.shape != (R, 1, d):
            raise ValueError(f"bias must have shape (runs, agents, d) = {(R, 1, d)}, got {bias.shape}")
        if gram.shape != (R, 1, d, d):
            raise ValueError(f"gram must have shape (runs, agents, d, d) = {(R, 1, d, d)}, got {gram.shape}")
        if users is None:
            raise ValueError(f"protocol {self.name!r} needs users=(x, y), the period's individual records")
        x, y = (np.asarray(a, dtype=float) for a in users)
        if x.shape != (b, R, 1, d) or y.shape != (b, R, 1):
            raise ValueError(f"users must be x {(b, R, 1, d)} and y {(b, R, 1)} (period, runs, agents, ...), got "
                             f"{x.shape} and {y.shape}")
        if self._k >= self.n_batches:
            raise ValueError(f"the protocol was configured for n_batches={self.n_batches} synchronizations")
        self._k += 1
        counts = self.randomizer.encode(self, (x, y))
        delivered = self.intermediary.deliver(counts)
        prefix = self.analyzer.analyze(self, delivered)
        c = self.communication
        c.rounds += 1
        bits = b * self.randomizer.n_coords * sum(self.randomizer.resolutions)
        c.messages += bits
        c.payload += float(bits)
        # fedbandit.protocols.statistics.unpack_statistics, with the cached indices
        iu, ju = _triu(d)
        gram_prefix = np.zeros((R, d, d))
        gram_prefix[:, iu, ju] = prefix[:, d:]
        gram_prefix[:, ju, iu] = prefix[:, d:]
        return prefix[:, :d], gram_prefix

    # ------------------------------------------------------------ privacy
    def event(self, relation=None):
        """The k·D shuffle mechanisms a user's record joins, each (ε₀, δ₀)-DP if its level's certificate holds."""
        self._require()
        check_relation(self.relation if relation is None else relation)
        r = self.randomizer
        per_level = []
        for i, (lvl, ok) in enumerate(zip(r.levels, r.certified)):
            what = (f"level {i + 1}: shuffled randomized response, {lvl.n_users} users × {lvl.resolution} messages, "
                    f"p={lvl.p:.4g} [BBGN19]")
            per_level.append(ConditionalEvent(
                ApproxDpEvent(r.eps0, r.delta0, what),
                f"level {i + 1}: the privacy-blanket bound does not certify the per-message δ",
                holds=ok,
                on_failure="invalid",
            ))
        return ComposedEvent(tuple(e for e in per_level for _ in range(r.n_coords)))

    def theorem(self) -> str:
        r = self.randomizer
        return (f"shuffled randomized response per batch, certified by the privacy-blanket bound [BBGN19]; composed "
                f"over k·D = {len(r.levels) * r.n_coords} mechanisms per user at (ε₀={r.eps0:.4g}, δ₀={r.delta0:.3g}) "
                f"[DRV10]; batches {list(self.batch_sizes)}")

    def bounds_note(self) -> str:
        note = f"for users with ‖x‖ ≤ {self.feature_bound:g} and |y| ≤ {self.reward_bound:g} (the learner clips y)"
        if self.relation == "add-remove":
            note += "; add/remove is accounted as substituting the null record (z = 0)"
        return note

    # ------------------------------------------------------------ reports
    def _variance_at(self, t: int) -> float:
        """Noise variance ([0, 1] units) of the estimate after t users: the mixed-radix digits of t."""
        sizes, var = self.batch_sizes, self.randomizer.batch_variance
        total = (t // sizes[0]) * var[0]
        for i in range(1, len(sizes)):
            total += ((t % sizes[i - 1]) // sizes[i]) * var[i]
        return total

    def max_variance(self) -> float:
        """Largest noise variance of a released estimate over the n users, in [0, 1] units."""
        self._require()
        sizes, var = self.batch_sizes, self.randomizer.batch_variance
        total = (self.n_users // sizes[0]) * var[0]
        for i in range(1, len(sizes)):
            total += (sizes[i - 1] // sizes[i] - 1) * var[i]
        return total

    def coordinate_noise_std(self) -> np.ndarray:
        """Per-coordinate noise std of a released prefix sum (largest over time), original units, packed order."""
        return 2.0 * self.randomizer.half_range * math.sqrt(self.max_variance())

    def server_noise_std(self) -> float:
        """Largest per-entry noise standard deviation of a released prefix (over entries and time)."""
        return float(self.coordinate_noise_std().max())

    def prefix_noise_variance(self, k) -> float:
        """Largest per-entry noise variance of the prefix released at synchronization k (after k·b_k users)."""
        self._require()
        k = check_positive_int("k", k)
        return float(4.0 * self.randomizer.half_range.max() ** 2 * self._variance_at(k * self.period))

    def calibration(self) -> dict:
        self._require()
        r = self.randomizer
        std = self.coordinate_noise_std()
        d = self.dim
        sigma = float(std.max())
        return {
            "protocol": self.name,
            "model": self.model,
            "batch_sizes": list(self.batch_sizes),
            "k": len(self.batch_sizes),
            "period": self.period,
            "resolution": list(r.resolutions),
            "p": [lvl.p for lvl in r.levels],
            "epsilon0": r.eps0,
            "delta0": r.delta0,
            "mechanisms_per_user": len(r.levels) * r.n_coords,
            "batches_certified": all(r.certified),
            "sigma_bias": float(std[:d].max()),
            "sigma_gram": float(std[d:].max()),
            "sigma": sigma,
            "total_variance": sigma**2,
        }


@register("concurrent-shuffle", kind="statistics",
          summary="k concurrent shufflers: randomized response on every user's record, mixed-radix prefix sums",
          reference=f"{_TKMS}; sequential (one level): Chowdhury & Zhou 2022")
def concurrent_shuffle(epsilon, delta, *, k=None, batch_sizes=None, relation="replace"):
    """The concurrent-shuffle protocol: ``k`` shufflers (int, or "log" for dyadic batches; default 1) or explicit ``batch_sizes``."""
    if isinstance(k, str):
        check_choice("k", k, ("log",))
        if batch_sizes is not None:
            raise ValueError("k='log' fixes the dyadic schedule: give k or batch_sizes, not both")
    elif k is not None:
        k = check_positive_int("k", k)
    shufflers = ConcurrentShufflers(batch_sizes)
    return ConcurrentShuffleProtocol(
        RandomizedResponseRecords(), shufflers, MixedRadixAnalyzer(), name="concurrent-shuffle", epsilon=epsilon,
        delta=delta, relation=relation, k=k,
    )

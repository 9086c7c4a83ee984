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

import abc
import functools
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from fedbandit._validation import (
    check_batch_sizes,
    check_choice,
    check_positive_float,
    check_positive_int,
    check_rng,
)
from fedbandit.accounting.allocation import COMPOSITIONS, mechanism_budget
from fedbandit.accounting.calibration import CJMP21_CONSTANT
from fedbandit.accounting.events import (
    ApproxDpEvent,
    ClaimedEvent,
    ComposedEvent,
    ConditionalEvent,
    DpEvent,
    check_relation,
)
from fedbandit.mechanisms.psco import dyadic_batch_sizes, optimal_batch_sizes
from fedbandit.mechanisms.randomized_response import (
    RRShuffleSummation,
    rr_message_probabilities,
    unary_resolution,
)
from fedbandit.mechanisms.randomized_response import sample_rr_counts_unchecked as _sample_counts
from fedbandit.mechanisms.vector_sum import VectorSumShuffle
from fedbandit.mechanisms.vector_sum import draw_binomial as _binomial
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
    "VectorSumRecords",
    "BatchSumAnalyzer",
    "SequentialVectorSumProtocol",
    "RecordSetting",
    "RecordRandomizer",
    "RecordAnalyzer",
]

_TKMS = "Tenenbaum, Kaplan, Mansour & Stemmer 2023"


@functools.lru_cache(maxsize=64)
def _triu(dim: int) -> tuple[np.ndarray, np.ndarray]:
    # the upper-triangle indices of fedbandit.protocols.statistics' packing, computed once
    # per d (this protocol synchronizes after every user in its period-1 variants)
    return np.triu_indices(dim)


@functools.lru_cache(maxsize=64)
def _symmetric_index(dim: int) -> np.ndarray:
    """For every entry (i, j) of a d × d matrix, row-major, the packed index of its upper-triangle entry
    (min(i, j), max(i, j)) among the Gram coordinates (np.triu_indices' order): unpacking is then one take."""
    square = np.empty((dim, dim), dtype=np.intp)
    iu, ju = _triu(dim)
    square[iu, ju] = np.arange(iu.size)
    square[ju, iu] = square[iu, ju]
    packed = square.ravel()
    packed.flags.writeable = False
    return packed


def _records01(x: np.ndarray, y: np.ndarray, half_range: np.ndarray) -> np.ndarray:
    """Every user's record z = (x y, upper triangle of x xᵀ), mapped to [0, 1] as (z/s + 1)/2, clipped: (c, R, D).

    ``x`` (c, R, d), ``y`` (c, R): the values of :func:`fedbandit.protocols.statistics.user_records`
    (each entry one product).  Computed coordinate-major, (D, c, R), so that every operation
    runs over c·R contiguous entries (the record's D entries as the innermost axis make numpy
    loop over runs of d or fewer), then laid out (c, R, D) in one copy: every entry is the same
    products and divisions as entry by entry, so the same floating-point values.
    """
    c, R, d = x.shape
    if c * R <= 64:
        # few users (one per period, the dyadic schedule's hot loop): in the (c, R, D) layout, the
        # upper-triangle products as one product of the gathered pairs (the same products and divisions)
        # (gathers by take, faster than fancy indexing; np.clip's values as maximum then minimum,
        # without its wrapper: the same floats, NaN included)
        x, y = np.ascontiguousarray(x), np.ascontiguousarray(y)
        iu, ju = _triu(d)
        z = np.empty((c, R, half_range.size))
        np.multiply(x, y[..., None], out=z[..., :d])
        np.multiply(x.take(iu, axis=-1), x.take(ju, axis=-1), out=z[..., d:])
        z /= half_range
        z += 1.0
        z /= 2.0
        np.maximum(z, 0.0, out=z)
        return np.minimum(z, 1.0, out=z)
    # (np.moveaxis's views, as transposes: they run every period, and moveaxis checks its axes in Python)
    xt = np.ascontiguousarray(x.transpose(2, 0, 1))  # (d, c, R) (the learner passes transposed views)
    zt = np.empty((half_range.size, c, R))
    np.multiply(xt, y, out=zt[:d])
    k = d
    for i in range(d):  # the products x_i x_j, j ≥ i (row-major upper triangle, np.triu_indices' order)
        np.multiply(xt[i], xt[i:], out=zt[k : k + d - i])
        k += d - i
    zt /= half_range[:, None, None]
    zt += 1.0
    zt /= 2.0
    np.clip(zt, 0.0, 1.0, out=zt)
    return np.ascontiguousarray(zt.transpose(1, 2, 0))


def _unary_round_parts(z01: np.ndarray, g: np.ndarray, rng: np.random.Generator,
                       out: tuple[np.ndarray, ...] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`fedbandit.mechanisms.randomized_response.unary_round_unchecked` (z01 (c, R, D), g (k, 1, 1, 1)) in two parts.

    Returns (⌊g z⌋ as floats, 1{U < g z − ⌊g z⌋} as bools), both (k, c, R, D), from the same
    single draw of uniforms: their sum is unary_round_unchecked's result, draw for draw.
    ``out`` = (scaled, low, u, up), work arrays of that shape (three float, one bool), kept by a
    caller that rounds one user at a time: the same values, computed in place.
    """
    if out is not None:
        scaled, low, u, up = out
        np.multiply(z01, g, out=scaled)  # z01[None] * g
        np.floor(scaled, out=low)
        np.subtract(scaled, low, out=scaled)
        rng.random(out=u)  # the uniforms of rng.random(shape), in the same order
        return low, np.less(u, scaled, out=up)
    scaled = z01[None] * g
    low = np.floor(scaled)
    frac = np.subtract(scaled, low, out=scaled)
    return low, rng.random(frac.shape) < frac


def _user_sum(low: np.ndarray, up: np.ndarray) -> np.ndarray:
    """Σ over users (axis 0) of the rounded ones ⌊g z⌋ + 1{U < frac}, as int64 (exact: integer-valued floats)."""
    return low.sum(axis=0).astype(np.int64) + np.count_nonzero(up, axis=0)


#: The most users whose increments :func:`_level_user_sums` counts in bytes (a count of at most c fits in uint8).
_BYTE_COUNT_USERS = 255
#: The fewest entries (k·c·R·D) for which :func:`_level_user_sums` takes its product and halves (below it, the
#: reductions' fixed costs are the smaller: 31 µs against 38 µs at 26 000 entries, 125 against 64 at 121 000).
_SUMS_BY_PRODUCT = 50_000


def _level_user_sums(low: np.ndarray, up: np.ndarray) -> np.ndarray:
    """Every level's Σ over the users (axis 1) of ⌊g z⌋ + 1{U < frac}: low (k, c, R, D) floats, up bools → (k, R, D) int64.

    The values of ``low.sum(axis=1).astype(np.int64) + np.count_nonzero(up, axis=1)``: the floors are
    integer-valued floats whose partial sums stay below 2**53, so one matrix product with a vector of ones
    adds them exactly (in any order); the increments, as bytes, are added in halves (a count of at most
    c ≤ 255 fits in a byte).  Both avoid numpy's reductions over a middle axis, which the hot loop (every
    period of the concurrent shuffle) paid ~3 times over.
    """
    k, c = low.shape[:2]
    if c > _BYTE_COUNT_USERS or low.size < _SUMS_BY_PRODUCT or not low.flags.c_contiguous or up.dtype != np.bool_:
        return low.sum(axis=1).astype(np.int64) + np.count_nonzero(up, axis=1)
    floors = np.matmul(np.ones(c), low.reshape(k, c, -1)).reshape((k,) + low.shape[2:])
    counts = up.view(np.uint8)
    while counts.shape[1] > 1:
        h = counts.shape[1] // 2
        halves = counts[:, :h] + counts[:, h : 2 * h]
        if counts.shape[1] % 2:
            halves[:, 0] += counts[:, 2 * h]
        counts = halves
    total = floors.astype(np.int64)
    total += counts[:, 0]
    return total


def _is_int_like(v: object) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def record_half_range(dim: int, feature_bound: float = 1.0, reward_bound: float = 1.0) -> np.ndarray:
    """s of every coordinate of a record: L·Y for the d bias entries, L² for the Gram entries (packed order)."""
    dim = check_positive_int("dim", dim, max_value=40_000, reason="a record has d + d(d+1)/2 entries")
    feature_bound = check_positive_float("feature_bound", feature_bound)
    reward_bound = check_positive_float("reward_bound", reward_bound)
    return np.r_[np.full(dim, feature_bound * reward_bound), np.full(n_coordinates(dim) - dim, feature_bound**2)]


def concurrent_schedule(
    n: int, k: int | str, epsilon: float, delta: float, dim: int, *, finest: int | None = None,
    composition: str = "best"
) -> tuple[int, ...]:
    """Batch sizes of the k-shuffler PSCO on a user's D-coordinate record over n users.

    ``k="log"``: dyadic (2^{L−1}, ..., 1) with L = ⌊log₂ n⌋ + 1
    (:func:`fedbandit.mechanisms.psco.dyadic_batch_sizes`); otherwise
    :func:`fedbandit.mechanisms.psco.optimal_batch_sizes` with ``streams=D`` and real values
    (the budget split over kD mechanisms by ``composition``, ⌈sqrt(b)⌉ messages per user
    and batch).  ``finest`` fixes b_k (a learner synchronizing every ``finest`` users): the
    dyadic schedule over blocks of ``finest`` users (L = ⌊log₂(n/finest)⌋ + 1 levels), or
    the optimal ratio for that b_k.
    """
    n = check_positive_int("n", n)
    composition = check_choice("composition", composition, COMPOSITIONS)
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
                               finest=finest, composition=composition)


def sequential_batch_sizes(n: int) -> tuple[int]:
    """(B,) with B = min(n, ⌈n^{3/5}⌉): the sequential shuffle model's batch (Chowdhury & Zhou 2022)."""
    n = check_positive_int("n", n)
    return (min(n, math.ceil(n**0.6)),)


# ---------------------------------------------------------------------------------------
# The setting and the abstract parts
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordSetting:
    """What the parts of a user-level statistics protocol are configured for (no random state).

    d, the bounds L and Y, the shufflers' schedule (b_1, ..., b_k), the synchronization period
    (a multiple of b_k), the n users the guarantee covers, the target (ε, δ), the relation and
    how (ε, δ) is split over a user's mechanisms (:func:`fedbandit.accounting.allocation.mechanism_budget`).
    """

    dim: int
    feature_bound: float
    reward_bound: float
    batch_sizes: tuple
    period: int
    n_users: int
    epsilon: float
    delta: float
    relation: str = "replace"
    composition: str = "best"

    @property
    def half_range(self) -> np.ndarray:
        """s of every packed coordinate (:func:`record_half_range`)."""
        return record_half_range(self.dim, self.feature_bound, self.reward_bound)


class RecordRandomizer(Randomizer):
    """R of a user-level statistics protocol: every user's record, one at a time, into one-bit messages
    of the shufflers' batches (counted per released batch and coordinate).

    After :meth:`configure` it holds ``half_range`` (s per coordinate), ``n_coords`` (D) and
    ``batch_variance`` (per level, the variance of one released batch sum in [0, 1] units: privacy
    noise and rounding), from which the protocol states its noise.
    """

    message: ClassVar[str] = "count"
    needs_user_data: ClassVar[bool] = True
    private_alone: ClassVar[bool] = False
    payload_unit: ClassVar[str] = "bits"

    @abc.abstractmethod
    def reset(self, setting: RecordSetting, n_runs: int) -> None:
        """Allocate the state of ``n_runs`` runs."""

    @abc.abstractmethod
    def encode(self, users: tuple[np.ndarray, np.ndarray], rng: np.random.Generator) -> dict:
        """The period's users' records in; {level: (closing times, counts (m, R, D))} of the batches closing in it."""

    @abc.abstractmethod
    def decode(self, delivered: dict) -> dict:
        """{level: (closing times, batch sums (m, R, D) in [0, 1] units)} from the released counts."""

    @abc.abstractmethod
    def bits_per_user(self) -> int:
        """One-bit messages a user sends."""

    @abc.abstractmethod
    def event(self, setting: RecordSetting, relation: str) -> DpEvent:
        """The mechanisms one user's record joins, under ``relation``."""


class RecordAnalyzer(Analyzer):
    """A of a user-level statistics protocol: the prefix sums from the decoded batch sums."""

    def configure(self, setting: RecordSetting) -> None:
        self.half_range = setting.half_range
        self.period = setting.period

    @abc.abstractmethod
    def reset(self, setting: RecordSetting, n_runs: int) -> None:
        """Allocate the state of ``n_runs`` runs."""

    @abc.abstractmethod
    def analyze(self, decoded: dict) -> np.ndarray:
        """The released prefix sums (R, D) after the period, from its decoded batch sums."""


# ---------------------------------------------------------------------------------------
# R, A
# ---------------------------------------------------------------------------------------


class RandomizedResponseRecords(RecordRandomizer):
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

    def describe(self) -> str:
        return (
            "per user, coordinate and level i: (v/s + 1)/2 rounded to ⌈sqrt(b_i)⌉ unary bits, each sent by "
            "randomized response with flip probability p_i"
        )

    def configure(self, setting: RecordSetting) -> None:
        p = setting
        self.half_range = p.half_range
        self.n_coords = self.half_range.size
        sizes = p.batch_sizes
        self.eps0, self.delta0 = mechanism_budget(
            p.epsilon, p.delta, len(sizes) * self.n_coords, composition=p.composition
        )
        self.levels = [RRShuffleSummation(b, self.eps0, self.delta0, resolution=unary_resolution(b)) for b in sizes]
        self._sizes = tuple(int(lvl.n_users) for lvl in self.levels)
        self.resolutions = tuple(lvl.resolution for lvl in self.levels)
        self.certified = tuple(lvl.certified_delta <= lvl.delta_message for lvl in self.levels)
        self._g = np.array(self.resolutions, dtype=float)[:, None, None, None]
        # privacy noise + rounding (≤ b/(4g²)) variance of one released batch sum, [0, 1] units
        self.batch_variance = tuple(lvl.variance + lvl.n_users / (4.0 * lvl.resolution**2) for lvl in self.levels)

    def reset(self, setting: RecordSetting, n_runs: int) -> None:
        self._ones = np.zeros((len(self.levels), n_runs, self.n_coords), dtype=np.int64)
        # one-user periods (:meth:`_encode_one`) count in floats: integer-valued, so exact, and
        # adding the rounded ones to them needs no cast; folded into the int64 counts at a release
        self._ones_f = np.zeros(self._ones.shape)
        self._pending_f = False
        self._one_buffers: tuple[np.ndarray, ...] | None = None  # :meth:`_encode_one`'s work arrays (first call)
        self._period_buffers: tuple[np.ndarray, ...] | None = None  # :meth:`encode`'s, for periods of c > 1 users
        self._t = 0

    def bits_per_user(self) -> int:
        """One-bit messages a user sends: g_i per coordinate and level."""
        return self.n_coords * sum(self.resolutions)

    def encode(self, users: tuple[np.ndarray, np.ndarray], rng: np.random.Generator) -> dict:
        """The period's users' records in; the counts of the batches closing in the period out.

        ``users`` = (x (c, R, d), y (c, R)), the c users of one synchronization period
        (a multiple of b_k).  Returns {level i: (times, counts)}, finest level first, with
        ``times`` the closing times (users so far) of the level's batches that close in the
        period and ``counts`` (len(times), R, D) their counts of ones.
        """
        x, y = users
        z01 = _records01(x, y, self.half_range)  # (c, R, D)
        c = z01.shape[0]
        if c > 1 and self._pending_f:  # counts of one-user periods, still in floats
            self._ones += self._ones_f.astype(np.int64)
            self._ones_f[:] = 0.0
            self._pending_f = False
        t0 = self._t
        self._t += c
        if c == 1:
            return self._encode_one(z01, rng)
        # every level's randomizer rounds independently (unary_round with one g per level:
        # one draw for all levels at once); only the levels' sums over users are formed,
        # never the (k, c, R, D) array of integer ones; the rounding's work arrays are kept
        # between periods (the same values and draws as new ones: the dyadic schedule's
        # (k, c, R, D) arrays are ~1 MB each, and new ones cost ~40 % of a period's rounding)
        buffers = self._period_buffers
        if buffers is None or buffers[0].shape[1:] != z01.shape:  # work arrays kept between periods
            shape = (len(self.levels),) + z01.shape
            buffers = (np.empty(shape), np.empty(shape), np.empty(shape), np.empty(shape, dtype=bool))
            self._period_buffers = buffers
        low, up = _unary_round_parts(z01, self._g, rng, out=buffers)
        if self.aligned(t0, self._t):
            return self._encode_aligned(low, up, rng)
        return self._encode_levels(t0, low, up, rng)

    def aligned(self, t0: int, t: int) -> bool:
        """Whether no level's batch closes inside the period (t0, t], only at its end t (or none at all)."""
        return all(t // b == t0 // b or t % b == 0 and t0 // b + 1 == t // b for b in self._sizes)

    def _encode_aligned(self, low: np.ndarray, up: np.ndarray, rng: np.random.Generator) -> dict:
        """:meth:`_encode_levels` for a period whose batches all close at its end, if at all (every period of a
        schedule whose finest batch divides the period: the gap family's hot loop).

        The same counts and draws: every level's running count takes the period's ones in one integer add
        (instead of one add per level), then each level whose batch closes at t (b_i divides t), finest
        first, releases its count and restarts from 0.
        """
        # integer-valued sums over the users (exact in any order): the int64 counts of _encode_levels
        self._ones += _level_user_sums(low, up)
        return self._release_closing(rng)

    def _release_closing(self, rng: np.random.Generator, pending: np.ndarray | None = None) -> dict:
        """Release every level whose batch closes at the current time t (b_i divides t), finest first: its
        running count (plus ``pending``'s, the one-user periods' counts kept in floats, which restart too) is
        randomized and restarts from 0.  {level i: (array([t]), counts (1, R, D))}."""
        t = self._t
        out = {}
        for i in reversed(range(len(self.levels))):
            lvl = self.levels[i]
            if t % lvl.n_users:
                continue
            if pending is None:
                batch = self._ones[i : i + 1].copy()
            else:
                batch = (self._ones[i] + pending[i].astype(np.int64))[None]
                pending[i] = 0.0
            self._ones[i] = 0
            out[i] = (np.array([t]), _sample_counts(batch, lvl.n_messages, lvl.q0, lvl.q1, rng))
        return out

    def _encode_levels(self, t0: int, low: np.ndarray, up: np.ndarray, rng: np.random.Generator) -> dict:
        """:meth:`encode`'s loop over the levels (any period: batches may close inside it, several per level)."""
        whole = None  # every level's sum over the period's users (k, R, D), formed once if needed
        out = {}
        # Finest level first (the analyzer then lets a coarser release at the same time
        # clear the finer batches it contains).
        for i in reversed(range(len(self.levels))):
            lvl = self.levels[i]
            b = lvl.n_users
            first = (t0 // b + 1) * b
            times = None if first > self._t else np.arange(first, self._t + 1, b)
            if times is None or (times.size == 1 and first == self._t):
                # no batch of this level closes in the period, or one closes at its end
                if whole is None:
                    whole = _level_user_sums(low, up)
                if times is None:
                    self._ones[i] += whole[i]
                    continue
                batch = (self._ones[i] + whole[i])[None]
                self._ones[i] = 0
            elif times.size == 1:
                split = first - t0
                batch = (self._ones[i] + _user_sum(low[i, :split], up[i, :split]))[None]
                self._ones[i] = _user_sum(low[i, split:], up[i, split:])
            else:
                ones = low[i].astype(np.int64) + up[i]
                cum = np.cumsum(ones, axis=0)
                at = cum[times - t0 - 1]
                batch = np.diff(at, axis=0, prepend=0)
                batch[0] += self._ones[i]
                self._ones[i] = cum[-1] - at[-1]
            # sample_rr_counts without its argument checks (0 ≤ ones ≤ b g by construction)
            out[i] = (times, _sample_counts(batch, lvl.n_messages, lvl.q0, lvl.q1, rng))
        return out

    def _encode_one(self, z01: np.ndarray, rng: np.random.Generator) -> dict:
        """:meth:`encode`'s rounding and loop over the levels for a period of one user (the dyadic
        schedule's hot loop).

        The same counts and draws: the user's record z01 (1, R, D) is rounded at every level as
        :func:`_unary_round_parts` does (the same products, floor, fractions and one draw of
        uniforms of the same shape), in work arrays kept between users instead of new ones;
        every level's running count takes the user's ones (integers, so in any order), and each
        level whose batch closes with this user (b_i divides t), finest first, releases its
        count and restarts from 0.
        """
        buffers = self._one_buffers
        if buffers is None or buffers[0].shape[1:] != z01.shape:
            shape = (len(self.levels),) + z01.shape
            buffers = (np.empty(shape), np.empty(shape), np.empty(shape), np.empty(shape, dtype=bool))
            self._one_buffers = buffers
        low, up = _unary_round_parts(z01, self._g, rng, out=buffers)
        ones = self._ones_f  # the running counts in floats (integers below 2**53: exact)
        ones += low[:, 0]
        ones += up[:, 0]
        self._pending_f = True
        return self._release_closing(rng, ones)

    def decode(self, delivered: dict) -> dict:
        """Debias every released count: level i's count Z of a batch of b users with g messages each
        gives the batch sum (Z − b g p/2)/((1 − p) g) in [0, 1] units."""
        out = {}
        for i, (times, count) in delivered.items():
            lvl = self.levels[i]
            b, g, p = lvl.n_users, lvl.resolution, lvl.p
            out[i] = (times, (count - b * g * p / 2.0) / ((1.0 - p) * g))
        return out

    def event(self, setting: RecordSetting, relation: str) -> DpEvent:
        """The k·D shuffle mechanisms a user's record joins, each (ε₀, δ₀)-DP if its level's certificate holds."""
        per_level = []
        for i, (lvl, ok) in enumerate(zip(self.levels, self.certified)):
            what = (f"level {i + 1}: shuffled randomized response, {lvl.n_users} users × {lvl.resolution} messages, "
                    f"p={lvl.p:.4g} [BBGN19]")
            per_level.append(ConditionalEvent(
                ApproxDpEvent(self.eps0, self.delta0, what),
                f"level {i + 1}: the privacy-blanket bound does not certify the per-message δ",
                holds=ok,
                on_failure="invalid",
            ))
        return ComposedEvent(tuple(e for e in per_level for _ in range(self.n_coords)))

    def theorem(self, setting: RecordSetting) -> str:
        return (f"shuffled randomized response per batch, certified by the privacy-blanket bound [BBGN19]; composed "
                f"over k·D = {len(self.levels) * self.n_coords} mechanisms per user at (ε₀={self.eps0:.4g}, "
                f"δ₀={self.delta0:.3g}) [DRV10]; batches {list(setting.batch_sizes)}")

    def calibration(self, setting: RecordSetting) -> dict:
        return {
            "composition": setting.composition,
            "resolution": list(self.resolutions),
            "p": [lvl.p for lvl in self.levels],
            "epsilon0": self.eps0,
            "delta0": self.delta0,
            "mechanisms_per_user": len(self.levels) * self.n_coords,
            "batches_certified": all(self.certified),
        }

    def scale_noise(self, factor: float) -> None:
        """Testing hook of the audits: every level's flip probability × factor² (its noise std ∝ sqrt(p))."""
        for level in self.levels:
            level.p = min(1.0, level.p * factor * factor)
            level.q0, level.q1 = rr_message_probabilities(level.p)


class MixedRadixAnalyzer(RecordAnalyzer):
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

    def reset(self, setting: RecordSetting, n_runs: int) -> None:
        self._since_parent = np.zeros((len(setting.batch_sizes), n_runs, self.half_range.size))
        self._t = 0

    def analyze(self, decoded: dict) -> np.ndarray:
        """The estimate after the period from its decoded releases ({level: (times, batch sums)}).

        A release of level j clears the finer levels' running sums (they restart inside the
        new level-j batch); releases at the same time are processed finest first, so a
        level-i batch closing with a coarser one is cleared with it.  So at the end of the
        period level i holds its releases after the last coarser release of the period
        (or adds all of them to its old sum when no coarser level released).
        """
        last_clear = -1
        for i in range(self._since_parent.shape[0]):  # coarse to fine
            if i not in decoded:
                # (nested schedules: a coarser release time is a multiple of b_i, so a level
                # without releases saw no coarser one either and keeps its sum)
                continue
            times, sums = decoded[i]
            if times.size == 1:  # one release (one-user periods: every release): no mask, no reduction
                # (0.0 + sums[0] is the sum over the one release, as the reduction forms it: a −0.0 becomes 0.0)
                t_i = int(times[0])
                if last_clear < 0:
                    self._since_parent[i] += sums[0] + 0.0
                elif t_i > last_clear:
                    np.add(sums[0], 0.0, out=self._since_parent[i])
                else:
                    self._since_parent[i] = 0.0
                last_clear = max(last_clear, t_i)
                continue
            if last_clear >= 0:
                self._since_parent[i] = sums[times > last_clear].sum(axis=0)
            else:
                self._since_parent[i] += sums.sum(axis=0)
            last_clear = max(last_clear, int(times[-1]))
        self._t += self.period
        return self.half_range * (2.0 * self._since_parent.sum(axis=0) - self._t)


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
    ``configure(n_agents=1, dim=d, n_batches=⌊n/P⌋, batch_size=P, feature_bound=L, reward_bound=Y, n_users=n)``
        Fixes the schedule -- ``batch_size`` P is the period of the synchronizations, a
        multiple of the finest batch b_k (the automatic schedule is optimised with
        b_k = P) -- and calibrates every level (no random state).  ``n_users`` (default
        ``n_batches·batch_size``) is the number of users the noise bound covers; users
        after the last full period are served but never synchronized.
    ``reset(n_runs=R, rng=generator)``
    ``synchronize(bias, gram, users=(x, y), runs=None) -> (bias_prefix (R, d), gram_prefix (R, d, d))``
        ``bias`` (R, 1, d) and ``gram`` (R, 1, d, d) are the period's sums (checked, not
        used: the randomizer acts on the records), ``users`` x (P, R, 1, d) and
        y (P, R, 1) the period's users (y already clipped to [−Y, Y]).  All runs
        synchronize together (``runs`` must be None).
    ``release(x, y)``
        The same release from x (P, R, d), y (P, R) without the checks (the learner's
        hot loop).
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
    composition : {"best", "basic", "advanced"}, default "best"
        How (ε, δ) is split over the k·D mechanisms of a user
        (:func:`fedbandit.accounting.allocation.mechanism_budget`).
    """

    kind: ClassVar[str] = "statistics"
    randomizer_type: ClassVar[type] = RandomizedResponseRecords
    intermediary_type: ClassVar[type] = ConcurrentShufflers
    analyzer_type: ClassVar[type] = MixedRadixAnalyzer
    supports_run_masks: ClassVar[bool] = False

    setting: RecordSetting

    def __init__(self, randomizer: RecordRandomizer, intermediary: ConcurrentShufflers, analyzer: RecordAnalyzer, *,
                 name: str, epsilon: float, delta: float, relation: str = "replace", k: int | str | None = None,
                 composition: str = "best") -> None:
        super().__init__(randomizer, intermediary, analyzer, name=name, epsilon=epsilon, delta=delta, relation=relation)
        self.composition = check_choice("composition", composition, COMPOSITIONS)
        if not self.private:
            raise ValueError(f"protocol {self.name!r} needs a target (epsilon, delta)")
        assert self.target_epsilon is not None and self.target_delta is not None  # private (checked above)
        self._target = (self.target_epsilon, self.target_delta)
        self._fixed_sizes = intermediary.batch_sizes
        self.k_rule: int | str
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

    def batch_sizes_for(self, n_users: int, dim: int, period: int | None = None) -> tuple[int, ...]:
        """The schedule (b_1, ..., b_k) for ``n_users`` users with d = ``dim`` (no state).

        ``period``: the learner synchronizes every ``period`` users, which must be a
        multiple of the finest batch b_k (so that every released estimate covers all users
        so far).  The automatic schedule is then optimised with b_k = ``period`` (a finer
        level would release estimates nobody reads); explicit batch sizes are kept, and
        the batches closing inside one period are released together.  Without
        ``period`` it is the unconstrained optimum, whose b_k a learner takes as its
        period.
        """
        n = check_positive_int("n_users", n_users)
        if self._fixed_sizes is not None:
            sizes = check_batch_sizes("batch_sizes", self._fixed_sizes, n)
            if period is not None and period % sizes[-1]:
                raise ValueError(
                    f"protocol {self.name!r} with batch_sizes={list(sizes)}: synchronizations must come every "
                    f"multiple of b_k={sizes[-1]} users, got batch_size={period}"
                )
            return sizes
        return concurrent_schedule(n, self.k_rule, *self._target, dim, finest=period,
                                   composition=self.composition)

    def configure(self, *, n_agents: int, dim: int, n_batches: int, batch_size: int, feature_bound: float = 1.0,
                  reward_bound: float | None = 1.0, schedule: str = "fixed",
                  n_users: int | None = None) -> ConcurrentShuffleProtocol:
        """Validate the setting, fix the schedule and calibrate every level; returns ``self``."""
        if check_positive_int("n_agents", n_agents) != 1:
            raise ValueError(
                f"protocol {self.name!r} serves users one at a time: n_agents must be 1, got {n_agents} (serve a "
                "federated instance's users in sequence with fedbandit.envs.users.UserSequenceEnv)"
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
        self.period = self.batch_size
        self.horizon = self.n_users
        setting = RecordSetting(self.dim, self.feature_bound, self.reward_bound, sizes, self.period, self.n_users,
                                *self._target, self.relation, self.composition)
        self._configure_parts(setting, f"dim={self.dim}, n_users={self.n_users}, batch_size={self.batch_size}")
        self._configured = True
        self._reset_done = False
        return self

    def reset(self, *, n_runs: int, rng: np.random.Generator) -> ConcurrentShuffleProtocol:
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
        self.communication = Communication(payload_unit=self.randomizer.payload_unit)
        self.randomizer.reset(self.setting, self.n_runs)
        self.analyzer.reset(self.setting, self.n_runs)
        self._k = 0
        self._reset_done = True
        return self

    # ------------------------------------------------------------ the release
    def synchronize(self, bias: np.ndarray, gram: np.ndarray, *, users: tuple[np.ndarray, np.ndarray] | None = None,
                    runs: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
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
        return self.release(x[:, :, 0], y[:, :, 0])

    def release(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`synchronize` from the period's users x (P, R, d), y (P, R), without argument checks."""
        if self._k >= self.n_batches:
            raise ValueError(f"the protocol was configured for n_batches={self.n_batches} synchronizations")
        self._k += 1
        R, d = self.n_runs, self.dim
        counts = self.randomizer.encode((x, y), self._noise_rng)
        delivered = self.intermediary.deliver(counts)
        prefix = self.analyzer.analyze(self.randomizer.decode(delivered))
        c = self.communication
        c.rounds += 1
        bits = self.period * self.randomizer.bits_per_user()
        c.messages += bits
        c.payload += float(bits)
        # fedbandit.protocols.statistics.unpack_statistics (entry (i, j) and (j, i) both the packed
        # upper-triangle entry), as one take with the cached indices: the same copied values
        gram_prefix = prefix[:, d:].take(_symmetric_index(d), axis=1).reshape(R, d, d)
        return prefix[:, :d], gram_prefix

    # ------------------------------------------------------------ privacy
    def event(self, relation: str | None = None) -> DpEvent:
        """The mechanisms one user's record joins (the randomizer's event; every level's, for randomized response)."""
        self._require()
        relation = check_relation(self.relation if relation is None else relation)
        return self.randomizer.event(self.setting, relation)

    def bounds_note(self) -> str:
        note = f"for users with ‖x‖ ≤ {self.feature_bound:g} and |y| ≤ {self.reward_bound:g} (the learner clips y)"
        if self.relation == "add-remove":
            note += "; add/remove is accounted as substituting the null record (z = 0)"
        return note

    # ------------------------------------------------------------ reports
    def _variance_at(self, t: int) -> float:
        """Noise variance ([0, 1] units) of the estimate after t users (t a multiple of b_k): its mixed-radix digits."""
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

    def prefix_noise_variance(self, k: int) -> float:
        """Largest per-entry noise variance of the prefix released at synchronization k (after k·P users)."""
        self._require()
        k = check_positive_int("k", k)
        return float(4.0 * self.randomizer.half_range.max() ** 2 * self._variance_at(k * self.period))

    def calibration(self) -> dict:
        self._require()
        std = self.coordinate_noise_std()
        d = self.dim
        sigma = float(std.max())
        out = {
            "protocol": self.name,
            "model": self.model,
            "batch_sizes": list(self.batch_sizes),
            "k": len(self.batch_sizes),
            "period": self.period,
        }
        out.update(self.randomizer.calibration(self.setting))
        out.update(sigma_bias=float(std[:d].max()), sigma_gram=float(std[d:].max()), sigma=sigma,
                   total_variance=sigma**2)
        return out


@register("concurrent-shuffle", kind="statistics",
          summary="k concurrent shufflers: randomized response on every user's record, mixed-radix prefix sums",
          reference=f"{_TKMS}; sequential (one level): Chowdhury & Zhou 2022")
def concurrent_shuffle(epsilon: float, delta: float, *, k: int | str | None = None, batch_sizes: Any = None,
                       relation: str = "replace", composition: str = "best") -> ConcurrentShuffleProtocol:
    """The concurrent-shuffle protocol: ``k`` shufflers (int, or "log" for dyadic batches; default 1) or explicit ``batch_sizes``.

    ``composition`` ("best", "basic", "advanced") splits (ε, δ) over the k·D mechanisms of
    a user (:func:`fedbandit.accounting.allocation.mechanism_budget`).
    """
    if isinstance(k, str):
        check_choice("k", k, ("log",))
        if batch_sizes is not None:
            raise ValueError("k='log' fixes the dyadic schedule: give k or batch_sizes, not both")
    elif k is not None:
        k = check_positive_int("k", k)
    shufflers = ConcurrentShufflers(batch_sizes)
    return ConcurrentShuffleProtocol(
        RandomizedResponseRecords(), shufflers, MixedRadixAnalyzer(), name="concurrent-shuffle", epsilon=epsilon,
        delta=delta, relation=relation, k=k, composition=composition,
    )


# ---------------------------------------------------------------------------------------
# The sequential shuffle model with the shuffled vector sum (Chowdhury & Zhou 2022)
# ---------------------------------------------------------------------------------------


class VectorSumRecords(RecordRandomizer):
    """R: the shuffle vector-sum randomizer (Cheu, Joseph, Mao & Peng 2021) on every user's record.

    Each coordinate v ∈ [−s, s] of a record (:func:`record_half_range`) is scaled to
    v/s ∈ [−1, 1] and encoded by :class:`fedbandit.mechanisms.VectorSumShuffle` for a
    batch of B users at the full (ε, δ): ⌊z g⌋ + η₁ unary bits plus b Ber(p) bits per
    coordinate, z = (v/s + 1)/2.  Every user joins one batch (one shuffler, consecutive
    batches), so nothing is composed across batches; the D coordinates are one vector of
    the protocol.  Aggregate sampling as in :class:`fedbandit.protocols.statistics.VectorSum`:
    each user's rounding is drawn, the noise bits of a whole batch are one binomial draw.

    Parameters
    ----------
    constant : float, default :data:`fedbandit.accounting.calibration.CJMP21_CONSTANT`
        c of b; the authors' experiments use a "scale" of 1, which the theorem does not cover.
    """

    name: ClassVar[str] = "vector-sum"

    def __init__(self, *, constant: float | None = None) -> None:
        self.constant = CJMP21_CONSTANT if constant is None else check_positive_float("constant", constant)

    def describe(self) -> str:
        return "per user and coordinate: ⌊zg⌋+η₁ unary bits plus b Ber(1/4) bits (vector-sum randomizer), one batch per user"

    def configure(self, setting: RecordSetting) -> None:
        p = setting
        self.half_range = p.half_range
        self.n_coords = self.half_range.size
        (batch,) = p.batch_sizes
        self.mech = VectorSumShuffle(p.epsilon, p.delta, batch, self.n_coords, constant=self.constant)
        self.levels = (self.mech,)
        self.g = self.mech.g
        # binomial noise + rounding (≤ B/(4g²)) variance of one released batch sum, [0, 1] units (z = (v+1)/2)
        self.batch_variance = ((self.mech.noise_std() / 2.0) ** 2 + batch / (4.0 * self.g**2),)

    def reset(self, setting: RecordSetting, n_runs: int) -> None:
        self._ones = np.zeros((n_runs, self.n_coords))
        self._t = 0

    def bits_per_user(self) -> int:
        return self.n_coords * (self.mech.g + self.mech.b)

    def encode(self, users: tuple[np.ndarray, np.ndarray], rng: np.random.Generator) -> dict:
        """The period's users in; {0: (times, counts (m, R, D))} for the m batches closing in it."""
        x, y = users
        c = x.shape[0]
        # the records in [0, 1], clip((z/s + 1)/2, 0, 1): the same products and divisions as formed here
        # entry by entry (z = (x y, x_i x_j)), computed coordinate-major (_records01) for a long period
        scaled = _records01(x, y, self.half_range)
        scaled *= self.g
        low = np.floor(scaled)
        frac = np.subtract(scaled, low, out=scaled)
        ones = np.add(low, rng.random(frac.shape) < frac, out=low)  # (c, R, D): every user's rounding
        b = self.mech.n_users
        t0 = self._t
        self._t += c
        first = (t0 // b + 1) * b
        if first > self._t:
            self._ones += ones.sum(axis=0)
            return {}
        times = np.arange(first, self._t + 1, b)
        if first == self._t:  # one batch, closing at the period's end (integer-valued sums: exact in any order)
            batch = (self._ones + ones.sum(axis=0))[None]
            self._ones = np.zeros_like(self._ones)
        else:
            cum = np.cumsum(ones, axis=0)
            at = cum[times - t0 - 1]
            batch = np.diff(at, axis=0, prepend=0.0)
            batch[0] += self._ones
            self._ones = cum[-1] - at[-1]
        noise = _binomial(rng, b * self.mech.b, self.mech.p, batch.shape)
        return {0: (times, batch + noise)}

    def decode(self, delivered: dict) -> dict:
        """Every released batch's vector sum (:meth:`fedbandit.mechanisms.VectorSumShuffle.analyze`), [0, 1] units."""
        return {i: (times, self.mech.analyze(ones)) for i, (times, ones) in delivered.items()}

    def event(self, setting: RecordSetting, relation: str) -> DpEvent:
        """One CJMP21 vector-sum mechanism per user at (ε, δ), conditional on the theorem's constant."""
        node = ClaimedEvent(setting.epsilon, setting.delta,
                            f"CJMP21 shuffled vector sum, one batch of {self.mech.n_users} users per user "
                            "(parameters as the package reads CJMP21's theorem)")
        return ConditionalEvent(
            node,
            f"b uses constant c={self.constant:g} < {CJMP21_CONSTANT:g} of the theorem: privacy not established",
            holds=self.constant >= CJMP21_CONSTANT,
            on_failure="invalid",
        )

    def theorem(self, setting: RecordSetting) -> str:
        return (f"shuffled vector sum [CJMP21] per batch of {self.mech.n_users} users at (ε, δ), g={self.mech.g}, "
                f"b={self.mech.b}, p={self.mech.p}; each user in one batch")

    def calibration(self, setting: RecordSetting) -> dict:
        return {"g": self.mech.g, "b": self.mech.b, "p": self.mech.p, "constant": self.constant,
                "batch_noise_std": self.mech.noise_std()}

    def scale_noise(self, factor: float) -> None:
        """Testing hook of the audits: the vector sum's noise is b Ber(p) bits, its std ∝ sqrt(b): b × factor²."""
        self.mech.b = max(1, int(round(self.mech.b * factor * factor)))


class BatchSumAnalyzer(RecordAnalyzer):
    """A: decode every released batch (:meth:`fedbandit.mechanisms.VectorSumShuffle.analyze`) and add it up."""

    name: ClassVar[str] = "batch-sums"

    def describe(self) -> str:
        return "decode every released batch's vector sum and add it to the running totals"

    def reset(self, setting: RecordSetting, n_runs: int) -> None:
        self._total = np.zeros((n_runs, self.half_range.size))

    def analyze(self, decoded: dict) -> np.ndarray:
        if 0 in decoded:
            _, sums = decoded[0]
            self._total += sums.sum(axis=0)
        return self.half_range * self._total


class SequentialVectorSumProtocol(ConcurrentShuffleProtocol):
    """The sequential shuffle model of Chowdhury & Zhou (2022) with the shuffled vector sum.

    One shuffler over consecutive batches of B users; each batch's records go through the
    vector-sum protocol (:class:`VectorSumRecords`) at the full (ε, δ), the server adds
    the decoded batch sums (no tree: every user is in one batch, and the prefix error grows
    like sqrt(n/B), which gives their regret Õ(B + n^{3/4}/B^{1/4}), best Õ(n^{3/5}) at
    B = n^{3/5}, :func:`sequential_batch_sizes`).  The interface and the learner are those
    of :class:`ConcurrentShuffleProtocol` with k = 1.

    Privacy: one vector-sum mechanism per user, (ε, δ)-DP by the theorem of Cheu, Joseph,
    Mao & Peng as the package reads it (accounted "claimed") when b uses at least its constant, not established
    otherwise ("invalid"); neighbouring datasets differ in one user's record.
    """

    randomizer_type: ClassVar[type] = VectorSumRecords
    analyzer_type: ClassVar[type] = BatchSumAnalyzer

    def __init__(self, randomizer: VectorSumRecords, intermediary: ConcurrentShufflers, analyzer: BatchSumAnalyzer, *,
                 name: str, epsilon: float, delta: float, relation: str = "replace",
                 batch_size: int | None = None) -> None:
        super().__init__(randomizer, intermediary, analyzer, name=name, epsilon=epsilon, delta=delta,
                         relation=relation, k=1)
        self._batch = None if batch_size is None else check_positive_int("batch_size", batch_size)

    @property
    def model(self) -> str:
        return "SDP"

    @property
    def trusted(self) -> str:
        return self.intermediary.trusted

    def batch_sizes_for(self, n_users: int, dim: int, period: int | None = None) -> tuple[int, ...]:
        """(B,): the given batch, or B = ⌈n^{3/5}⌉ (:func:`sequential_batch_sizes`); ``period`` a multiple of B."""
        n = check_positive_int("n_users", n_users)
        sizes = check_batch_sizes("batch_sizes", (self._batch,), n) if self._batch is not None else sequential_batch_sizes(n)
        if period is not None and period % sizes[0]:
            raise ValueError(f"protocol {self.name!r}: synchronizations must come every multiple of B={sizes[0]} "
                             f"users, got batch_size={period}")
        return sizes


@register("sequential-vector-sum", kind="statistics",
          summary="one shuffler over consecutive batches of B users, shuffled vector sum per batch",
          reference="Chowdhury & Zhou 2022 (sequential shuffle LinUCB); vector sum: Cheu, Joseph, Mao & Peng 2021")
def sequential_vector_sum(epsilon: float, delta: float, *, batch_size: int | None = None,
                          constant: float | None = None, relation: str = "replace") -> SequentialVectorSumProtocol:
    """Chowdhury & Zhou's shuffle LinUCB protocol: batches of ``batch_size`` users (default ⌈n^{3/5}⌉),
    the vector sum with constant ``constant`` (default the theorem's)."""
    sizes = None if batch_size is None else (check_positive_int("batch_size", batch_size),)
    return SequentialVectorSumProtocol(
        VectorSumRecords(constant=constant), ConcurrentShufflers(sizes), BatchSumAnalyzer(),
        name="sequential-vector-sum", epsilon=epsilon, delta=delta, relation=relation, batch_size=batch_size,
    )

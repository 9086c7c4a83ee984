"""Counter protocols: private running sums of many scalar streams, one per (run, agent, arm).

The consensus learners of Li, Song & Fragouli ({cite}`li2022federated`) protect every
**reward**: each agent feeds the rewards of each arm, one per pull, into its own continual
counter, and everything it sends or acts on is computed from the counter's released
running sums (and the pull counts, which the paper does not protect).  As a protocol
P = (R, S, A) (:class:`CounterProtocol`, ``kind = "counter"``):

* R, a counter randomizer run by every agent on each of its (arm) reward streams:
  :class:`HybridCounter` (the hybrid mechanism of Chan, Shi & Song 2011, the paper's
  choice), :class:`BinaryCounter` (the binary mechanism, needs the horizon),
  :class:`PerItemLaplaceCounter` (every item with its own ``Lap(s/ε)``, the running sum of
  the noisy items: the baseline the hybrid mechanism improves on) or :class:`ExactCounter`
  (exact sums, no privacy: coop-UCB and UCB);
* S = :class:`~fedbandit.protocols.intermediaries.Identity`: an agent's messages (indices
  computed from its private sums, or its consensus state) reach the master or its
  neighbours with their sender -- the learners address them by sender;
* A = :class:`RunningSums`: the released running sums themselves; every receiver
  post-processes them (indices, averages, consensus), so nothing downstream costs privacy.

=====================  ==============================  ===========  ===============
name                   randomizer R                    S            A
=====================  ==============================  ===========  ===============
``counter-hybrid``     hybrid mechanism, ε per stream   identity     running sums
``counter-binary``     binary mechanism over T items    identity     running sums
``counter-laplace``    Lap(s/ε) on every item           identity     running sums
``counter-exact``      exact running sums               identity     running sums
=====================  ==============================  ===========  ===============

Privacy unit and relation: one reward of one agent, **replaced** by any other value of the
clipping interval (width ``s``; the paper's unit).  A reward enters exactly one (agent,
arm) stream, so its guarantee is that stream's: pure ε-DP by basic composition of the
Laplace releases it enters (:mod:`fedbandit.accounting.counting`), accounted by
:func:`fedbandit.accounting.account`.  Later pulls depend on the released sums only
(post-processing), so the guarantee holds against an adversary who sees every action and
message.  [derived]  Under ``relation="add-remove"`` the neighbouring stream has the
reward's item zeroed (the stream keeps its slot, Chan et al.'s convention); the items
lie in ``[0, s]`` after the learner's shift, so the sensitivity is ``s`` as well.

Per-run privacy: ``epsilon`` is a number or an array of shape ``(n_runs,)`` (one ε per
run, so a sweep over ε is one vectorized simulation); :meth:`CounterProtocol.accounting`
reports the weakest run (the largest ε) unless asked for one run.

Streams and release: after ``configure(n_agents=M, n_arms=K, horizon=T, sensitivity=s)``
and ``reset(n_runs=R, rng=g)`` the protocol holds ``R M K`` streams, stream (r, i, j) at
flat index ``(r M + i) K + j``.  :meth:`CounterProtocol.release` feeds one item to each
stream of a set of distinct flat indices and returns their new private sums
(:meth:`~CounterProtocol.release_increment`: the changes of the sums);
:meth:`~CounterProtocol.value_at` reads sums.  Random draws: one standard Laplace variate
per advancing stream per release, in the order of the indices, from ``rng`` itself (see
:meth:`CounterProtocol.reset`).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, ClassVar
from typing import Protocol as TypingProtocol

import numpy as np
from numpy.typing import ArrayLike

from fedbandit._validation import (
    MAX_STEPS,
    check_choice,
    check_epsilon,
    check_float_in_range,
    check_int_in_range,
    check_positive_float,
    check_positive_int,
    check_rng,
)
from fedbandit.accounting.accountant import Accounting, account
from fedbandit.accounting.counting import (
    account_pure,
    binary_counter_scale,
    hybrid_counter_scales,
    per_item_counter_scale,
)
from fedbandit.accounting.events import (
    ComposedEvent,
    DpEvent,
    LaplaceEvent,
    NonPrivateEvent,
    SelfComposedEvent,
    check_relation,
)
from fedbandit.mechanisms.continual_counting import (
    BinaryMechanism,
    HybridMechanism,
    PerItemLaplaceMechanism,
    binary_noise_variance,
    hybrid_noise_variance,
    hybrid_sd_bound_by_level,
    per_item_noise_variance,
)
from fedbandit.mechanisms.continual_counting import floor_log2_unchecked as _floor_log2
from fedbandit.mechanisms.continual_counting import hybrid_sd_factor_unchecked as _hybrid_sd_factor
from fedbandit.protocols.base import Analyzer, Communication, Protocol, Randomizer
from fedbandit.protocols.intermediaries import Identity
from fedbandit.protocols.registry import register

__all__ = [
    "CounterRandomizer",
    "HybridCounter",
    "BinaryCounter",
    "PerItemLaplaceCounter",
    "ExactCounter",
    "RunningSums",
    "CounterProtocol",
    "PRIVACY_WIDTH_KINDS",
    "CounterSetting",
]

#: Privacy widths a counter randomizer can give a UCB index (see :meth:`CounterRandomizer.width_scale`).
PRIVACY_WIDTH_KINDS = ("fact1", "std", "none")

_G = hybrid_sd_bound_by_level()
_G_SHIFTED = np.r_[_G[0], _G]  # indexed by frexp's exponent (floor(log2 n) + 1); n < 1 -> level 0
# _G_SHIFTED indexed by the biased IEEE-754 exponent of a float64 n >= 1 (its bits >> 52, 1023 +
# floor(log2 n)), which is frexp's exponent + 1022: one shift of the bits instead of frexp, whose
# two outputs cost several times more per element (same table entries, so the same values).
_G_BY_BITS = np.r_[np.full(1022, _G[0]), _G_SHIFTED]


# ---------------------------------------------------------------------------------------
# Randomizers
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CounterSetting:
    """What a counter protocol's randomizer is configured for (no random state).

    Attributes
    ----------
    n_agents, n_arms : int
        M agents with K arms: the streams of a run.
    horizon : int or None
        T, the most items a stream receives (None: not bounded).
    sensitivity : float
        s, the width of the interval every item is clipped to.
    epsilon : float, array of shape (n_runs,), or None
        The privacy of every stream (one per run for sweeps); None without privacy.
    relation : {"replace", "add-remove"}
    """

    n_agents: int
    n_arms: int
    horizon: int | None
    sensitivity: float
    epsilon: float | np.ndarray | None = None
    relation: str = "replace"

    def target(self) -> float | np.ndarray:
        """ε (scalar or per run), for a part that calibrates for it (``ValueError`` without privacy)."""
        if self.epsilon is None:
            raise ValueError("the protocol has no epsilon")
        return self.epsilon


class CounterStreams(TypingProtocol):
    """The continual counters of a run's streams, with flat indices (what :meth:`CounterRandomizer.make_streams`
    returns: :class:`fedbandit.mechanisms.continual_counting.HybridMechanism` and its peers)."""

    def step_flat(self, idx: np.ndarray, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Feed ``x`` to the streams ``idx``; their new private sums."""

    def step_flat_increment(self, idx: np.ndarray, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """As :meth:`step_flat`, returning each stream's change."""

    def value_at(self, idx: np.ndarray) -> np.ndarray:
        """The private sums of the streams ``idx``."""


class CounterRandomizer(Randomizer):
    """R of a counter protocol: a continual counter on each of an agent's reward streams.

    A subclass names its mechanism (:meth:`make_streams`), the privacy event of one item
    (:meth:`event`), the theorem it rests on (:meth:`theorem`), its error variance
    (:meth:`noise_variance`) and the factors of the ``"std"`` privacy width: an upper bound
    ``scale · factor(n)`` on the standard deviation of a stream's noise after ``n`` items,
    ``scale`` from :mod:`fedbandit.accounting.counting` (:meth:`std_scale`) and ``factor`` from
    :meth:`sd_factor` (integer counts) or :meth:`sd_factor_float` (real-valued counts, the
    consensus estimates ``n̂ >= 1``).  Every one of them is abstract: a new counter that leaves
    one out cannot be built.  All take the configured :class:`CounterSetting`.
    """

    message: ClassVar[str] = "float"
    needs_horizon: ClassVar[bool] = False

    def configure(self, setting: CounterSetting) -> None:
        """Raise ``ValueError`` if the setting does not suit this randomizer (nothing to calibrate:
        the streams' Laplace scales follow from ε when they are made)."""

    @abc.abstractmethod
    def make_streams(self, setting: CounterSetting, epsilon: float | np.ndarray | None,
                     shape: tuple[int, ...]) -> CounterStreams:
        """The continual counters of ``shape`` (runs, agents, arms) streams at ``epsilon`` (scalar or per run;
        None for the exact counter, which adds no noise)."""

    @abc.abstractmethod
    def event(self, setting: CounterSetting, epsilon: float, relation: str) -> DpEvent:
        """The releases one reward enters (its stream's) at ``epsilon``, under ``relation``."""

    @abc.abstractmethod
    def noise_variance(self, setting: CounterSetting, n: ArrayLike, epsilon: float) -> np.ndarray:
        """Variance of a stream's error after ``n`` items at ``epsilon``."""

    def width_scale(self, kind: str, setting: CounterSetting) -> float | np.ndarray | None:
        """Count-free scale of the privacy width of a UCB index (scalar or per run); None for ``"none"``."""
        if kind == "none":
            return None
        if kind == "fact1":
            raise ValueError(
                f"privacy_width='fact1' with randomizer {self.name!r}: Fact 1 is the error bound of the hybrid "
                "mechanism; use 'std' (the noise-std bound of this mechanism) or 'none'"
            )
        return self.std_scale(setting)

    @abc.abstractmethod
    def std_scale(self, setting: CounterSetting) -> float | np.ndarray:
        """``scale`` of the ``"std"`` width (scalar or per run)."""

    @abc.abstractmethod
    def sd_factor(self, n: np.ndarray) -> np.ndarray:
        """``factor(n)`` of the ``"std"`` width at integer counts ``n``."""

    @abc.abstractmethod
    def sd_factor_float(self, n_hat: np.ndarray) -> np.ndarray:
        """``factor(n̂)`` of the ``"std"`` width at real-valued counts ``n̂ >= 1``."""

    def calibration(self, setting: CounterSetting) -> dict:
        return {}


class HybridCounter(CounterRandomizer):
    """The hybrid mechanism of Chan, Shi & Song on every stream (unbounded horizon).

    Logarithmic releases ``Lap(2s/ε)`` at the powers of two and, inside each interval
    ``(2^k, 2^{k+1})``, a binary tree with nodes ``Lap(2ks/ε)``
    (:class:`fedbandit.mechanisms.continual_counting.HybridMechanism`).  Every item enters
    one logarithmic release and at most ``k`` nodes of its interval: ε/2 + k · ε/(2k) = ε
    (Theorem 4.7 of Chan et al.).

    Parameters
    ----------
    width_sd : {"bound", "exact"}
        The noise standard deviation the ``"std"`` privacy width uses: ``"bound"`` (default)
        the level bound ``g(floor(log2 n))`` of
        :func:`~fedbandit.mechanisms.continual_counting.hybrid_sd_bound_by_level` (the
        maximum popcount), ``"exact"`` the exact standard deviation at the count,
        :func:`~fedbandit.mechanisms.continual_counting.hybrid_sd_factor` (for the
        consensus counts ``n̂``, which are not integers, at ``floor(n̂)``).  The noise itself
        is the same.
    """

    name: ClassVar[str] = "hybrid"

    def __init__(self, width_sd: str = "bound") -> None:
        self.width_sd = check_choice("width_sd", width_sd, ("bound", "exact"))

    def describe(self) -> str:
        return "hybrid mechanism per (agent, arm) stream: Lap(2s/ε) at 2^k, binary nodes Lap(2ks/ε) inside"

    def make_streams(self, setting: CounterSetting, epsilon: float | np.ndarray | None,
                     shape: tuple[int, ...]) -> CounterStreams:
        assert epsilon is not None  # a private counter (ε None: the exact counter only)
        return HybridMechanism(epsilon, shape, sensitivity=setting.sensitivity, track_true=False)

    def event(self, setting: CounterSetting, epsilon: float, relation: str) -> DpEvent:
        s = setting.sensitivity
        b_log, b_level = hybrid_counter_scales(epsilon, s)
        # The deepest interval a stream of at most T items reaches (every k gives the same ε).
        k = max(1, int(_floor_log2(max(setting.horizon or 2, 2))))
        return ComposedEvent((LaplaceEvent(s, float(b_log)), SelfComposedEvent(LaplaceEvent(s, float(b_level * k)), k)))

    def noise_variance(self, setting: CounterSetting, n: ArrayLike, epsilon: float) -> np.ndarray:
        return hybrid_noise_variance(n, epsilon, setting.sensitivity)

    def width_scale(self, kind: str, setting: CounterSetting) -> float | np.ndarray | None:
        if kind == "fact1":
            # Fact 1's bound (s/ε)(log2 t)^1.5 ln(1/δ_t): its count-free scale is s/ε.
            return per_item_counter_scale(setting.target(), setting.sensitivity)
        return super().width_scale(kind, setting)

    def std_scale(self, setting: CounterSetting) -> float | np.ndarray:
        return hybrid_counter_scales(setting.target(), setting.sensitivity)[0]

    def sd_factor(self, n: np.ndarray) -> np.ndarray:
        """``g(floor(log2 n))`` (level bound) or the exact factor at ``n`` (``width_sd="exact"``)."""
        if self.width_sd == "exact":
            return _hybrid_sd_factor(n.astype(np.int64))
        return _G[_floor_log2(n.astype(np.int64))]

    def sd_factor_float(self, n_hat: np.ndarray) -> np.ndarray:
        if self.width_sd == "exact":
            # floor(max(n̂, 1)): the conversion to int64 truncates, which is the floor of a number >= 1
            return _hybrid_sd_factor(np.maximum(n_hat, 1.0).astype(np.int64))
        # n̂ >= 1 after the round-robin slots, so frexp's exponent is floor(log2 n̂) + 1, and the
        # float's biased exponent (its bits >> 52) is that plus 1022.
        # (mode="wrap": no bounds pass; every exponent of a float64 indexes the table, negatives as before)
        return _G_BY_BITS.take(np.right_shift(np.asarray(n_hat, dtype=np.float64).view(np.int64), 52), mode="wrap")

    def theorem(self, setting: CounterSetting) -> str:
        return ("hybrid mechanism [CSS11, Thm. 4.7]: one reward enters one logarithmic release Lap(2s/ε) and at "
                "most k binary nodes Lap(2ks/ε) of one (agent, arm) stream; pure ε-DP by basic composition "
                "(the paper's Theorems 1 and 3 by post-processing)")

    def calibration(self, setting: CounterSetting) -> dict:
        b_log, b_level = hybrid_counter_scales(setting.target(), setting.sensitivity)
        return {"log_scale": _plain(b_log), "node_scale_per_level": _plain(b_level), "width_sd": self.width_sd}


class BinaryCounter(CounterRandomizer):
    """The binary mechanism of Chan, Shi & Song on every stream, for at most ``horizon`` items.

    Node noise ``Lap(L s/ε)`` with ``L = bit_length(T)``; each item enters at most ``L``
    nodes: ε-DP.  The error after ``n`` items has variance ``popcount(n) 2 (Ls/ε)^2``
    (:func:`~fedbandit.mechanisms.continual_counting.binary_noise_variance`), at most
    ``(floor(log2 n) + 1) 2 (Ls/ε)^2``: the ``"std"`` width's bound.

    Parameters
    ----------
    horizon : int, optional
        Most items per stream; default the learner's horizon (``configure(horizon=T)``),
        which bounds every stream (one item per slot at most).
    """

    name: ClassVar[str] = "binary"
    needs_horizon: ClassVar[bool] = True

    def __init__(self, horizon: int | None = None) -> None:
        self.horizon = None if horizon is None else check_positive_int("horizon", horizon)

    def describe(self) -> str:
        return "binary mechanism per (agent, arm) stream over at most T items: nodes Lap(L s/ε), L = bit_length(T)"

    def n_steps(self, setting: CounterSetting) -> int:
        n = self.horizon if self.horizon is not None else setting.horizon
        assert n is not None  # configure refuses a setting without a horizon
        return n

    def configure(self, setting: CounterSetting) -> None:
        if setting.horizon is None:
            raise ValueError("randomizer 'binary' needs a horizon: configure(horizon=T)")
        if self.horizon is not None and self.horizon < setting.horizon:
            raise ValueError(
                f"randomizer 'binary' was built for horizon={self.horizon} items per stream, but the learner's "
                f"horizon is {setting.horizon}: a stream may receive that many items"
            )

    def make_streams(self, setting: CounterSetting, epsilon: float | np.ndarray | None,
                     shape: tuple[int, ...]) -> CounterStreams:
        assert epsilon is not None  # a private counter (ε None: the exact counter only)
        return BinaryMechanism(self.n_steps(setting), epsilon, shape, sensitivity=setting.sensitivity)

    def event(self, setting: CounterSetting, epsilon: float, relation: str) -> DpEvent:
        s = setting.sensitivity
        L = self.n_steps(setting).bit_length()
        return SelfComposedEvent(LaplaceEvent(s, float(binary_counter_scale(epsilon, self.n_steps(setting), s))), L)

    def noise_variance(self, setting: CounterSetting, n: ArrayLike, epsilon: float) -> np.ndarray:
        return binary_noise_variance(n, self.n_steps(setting), epsilon, setting.sensitivity)

    def std_scale(self, setting: CounterSetting) -> float | np.ndarray:
        return binary_counter_scale(setting.target(), self.n_steps(setting), setting.sensitivity)

    def sd_factor(self, n: np.ndarray) -> np.ndarray:
        return np.sqrt(2.0 * (_floor_log2(n.astype(np.int64)) + 1))

    def sd_factor_float(self, n_hat: np.ndarray) -> np.ndarray:
        return np.sqrt(2.0 * np.frexp(n_hat)[1])

    def theorem(self, setting: CounterSetting) -> str:
        return ("binary mechanism [CSS11]: one reward enters at most L = bit_length(T) nodes Lap(Ls/ε) of one "
                "stream; pure ε-DP by basic composition")

    def calibration(self, setting: CounterSetting) -> dict:
        return {"node_scale": _plain(binary_counter_scale(setting.target(), self.n_steps(setting), setting.sensitivity)),
                "n_steps": self.n_steps(setting)}


class PerItemLaplaceCounter(CounterRandomizer):
    """Every item released with its own ``Lap(s/ε)``; the output is the running sum of the noisy items.

    The per-item baseline that Chan, Shi & Song's tree mechanisms improve on
    (:class:`~fedbandit.mechanisms.continual_counting.PerItemLaplaceMechanism`): ε-DP by the
    Laplace mechanism, since each item enters one ``Lap(s/ε)`` release, but the error after
    ``n`` items has variance ``2 n (s/ε)^2``, which the tree-based mechanisms reduce to
    polylogarithmic.
    """

    name: ClassVar[str] = "per-item-laplace"

    def describe(self) -> str:
        return "every reward released with its own Lap(s/ε); the running sum of the noisy rewards"

    def make_streams(self, setting: CounterSetting, epsilon: float | np.ndarray | None,
                     shape: tuple[int, ...]) -> CounterStreams:
        assert epsilon is not None  # a private counter (ε None: the exact counter only)
        return PerItemLaplaceMechanism(epsilon, shape, sensitivity=setting.sensitivity)

    def event(self, setting: CounterSetting, epsilon: float, relation: str) -> DpEvent:
        s = setting.sensitivity
        return LaplaceEvent(s, float(per_item_counter_scale(epsilon, s)))

    def noise_variance(self, setting: CounterSetting, n: ArrayLike, epsilon: float) -> np.ndarray:
        return per_item_noise_variance(n, epsilon, setting.sensitivity)

    def std_scale(self, setting: CounterSetting) -> float | np.ndarray:
        return per_item_counter_scale(setting.target(), setting.sensitivity)

    def sd_factor(self, n: np.ndarray) -> np.ndarray:
        return np.sqrt(2.0 * n)

    def sd_factor_float(self, n_hat: np.ndarray) -> np.ndarray:
        return np.sqrt(2.0 * n_hat)

    def theorem(self, setting: CounterSetting) -> str:
        return "per-item Laplace counter (baseline of [CSS11]): one release Lap(s/ε) per reward, the Laplace mechanism"

    def calibration(self, setting: CounterSetting) -> dict:
        return {"scale": _plain(per_item_counter_scale(setting.target(), setting.sensitivity))}


class ExactCounter(CounterRandomizer):
    """Exact running sums: no noise, no privacy (coop-UCB, UCB)."""

    name: ClassVar[str] = "exact"
    message: ClassVar[str] = "exact"

    def describe(self) -> str:
        return "exact running sums of the rewards (no privacy)"

    def make_streams(self, setting: CounterSetting, epsilon: float | np.ndarray | None,
                     shape: tuple[int, ...]) -> CounterStreams:
        return _ExactSums(int(np.prod(shape)))

    def event(self, setting: CounterSetting, epsilon: float, relation: str) -> DpEvent:
        return NonPrivateEvent("every agent's exact reward sums reach the others (or drive its actions)")

    def noise_variance(self, setting: CounterSetting, n: ArrayLike, epsilon: float) -> np.ndarray:
        return np.zeros(np.shape(n))

    def width_scale(self, kind: str, setting: CounterSetting) -> float | np.ndarray | None:
        return None

    def std_scale(self, setting: CounterSetting) -> float | np.ndarray:
        raise ValueError("randomizer 'exact' adds no noise: it has no privacy width")

    def sd_factor(self, n: np.ndarray) -> np.ndarray:
        raise ValueError("randomizer 'exact' adds no noise: it has no privacy width")

    def sd_factor_float(self, n_hat: np.ndarray) -> np.ndarray:
        raise ValueError("randomizer 'exact' adds no noise: it has no privacy width")

    def theorem(self, setting: CounterSetting) -> str:
        return ""  # no guarantee


class _ExactSums:
    """Exact running sums with the release interface of the mechanisms (flat indices)."""

    def __init__(self, size: int) -> None:
        self._sums = np.zeros(size)

    def step_flat(self, idx: Any, x: Any, rng: np.random.Generator | None = None) -> np.ndarray:
        self._sums[idx] += x
        return self._sums[idx]

    def step_flat_increment(self, idx: Any, x: Any, rng: np.random.Generator | None = None) -> np.ndarray:
        self._sums[idx] += x
        return x

    def value_at(self, idx: Any) -> np.ndarray:
        return self._sums[idx]


def _plain(v: ArrayLike) -> float | list[float]:
    """A scale for reports: a float, or a list of one float per run."""
    a = np.asarray(v, dtype=float)
    return float(a) if a.ndim == 0 else a.reshape(-1).tolist()


# ---------------------------------------------------------------------------------------
# Analyzer
# ---------------------------------------------------------------------------------------


class RunningSums(Analyzer):
    """A: the released running sums themselves; receivers post-process them (indices, consensus)."""

    name: ClassVar[str] = "running-sums"

    def describe(self) -> str:
        return "the released running sums; the master / neighbours post-process them (indices, averages, consensus)"


# ---------------------------------------------------------------------------------------
# The protocol
# ---------------------------------------------------------------------------------------


def _check_epsilon_runs(epsilon: Any) -> float | np.ndarray:
    """A number, or a 1-D array of positive finite epsilons (one per run)."""
    if np.ndim(epsilon) == 0:
        return check_epsilon("epsilon", epsilon)
    try:
        arr = np.array(epsilon, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"epsilon must be a number or an array of numbers (one per run), got {epsilon!r}") from exc
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"epsilon must be a number or a non-empty 1-D array (one per run), got shape {arr.shape}")
    bad = ~(np.isfinite(arr) & (arr > 0))
    if bad.any():
        raise ValueError(f"epsilon must lie in (0, inf) for every run, got {arr[bad][0]!r} at run {int(np.argmax(bad))}")
    arr.setflags(write=False)
    return arr


class CounterProtocol(Protocol):
    """P = (R, S, A) for the reward streams of M agents with K arms (see the module docstring).

    The interface a learner uses:

    ``configure(n_agents=M, n_arms=K, horizon=T, sensitivity=s, n_runs=None)``
        The setting (a stream receives at most T items, each in an interval of width s);
        calibrates the noise.  No random state.
    ``reset(n_runs=R, rng=generator)``
        Allocates the R M K streams; the noise is drawn from ``rng`` itself.
    ``release(idx, x)``, ``release_increment(idx, x)``, ``value_at(idx)``
        Feed items to streams (distinct flat indices) and read their private sums.
    ``communicate(messages, n_messages=, payload=)``
        One communication round: the messages through S (counted in :attr:`communication`).
    ``event(relation=None, run=None)``, ``accounting(relation=None, run=None)``
        The guarantee per reward (of one run, or of the weakest run).
    ``width_scale(kind)``, ``sd_factor(n)``, ``sd_factor_float(n_hat)``, ``noise_variance(n)``,
    ``calibration()``, ``parts()``.

    Parameters
    ----------
    randomizer : HybridCounter, BinaryCounter, PerItemLaplaceCounter or ExactCounter
    intermediary : Identity
    analyzer : RunningSums
    name : str
    epsilon : float, array of shape (n_runs,), or None
        Privacy of every reward stream (pure ε-DP); one value per run for sweeps; None
        (only) for :class:`ExactCounter`.
    delta : float in [0, 1), optional
        Target δ (default 0): the counters are pure ε-DP, so they meet any (ε, δ) target
        with δ >= 0; the accounting reports δ = 0.
    relation : {"replace", "add-remove"}, default "replace"
    """

    kind: ClassVar[str] = "counter"
    randomizer_type: ClassVar[type] = CounterRandomizer
    #: the consensus learners address every message by its sender (the master averages per agent,
    #: neighbours mix per edge): the identity
    intermediary_type: ClassVar[type] = Identity
    analyzer_type: ClassVar[type] = RunningSums

    setting: CounterSetting

    def __init__(self, randomizer: CounterRandomizer, intermediary: Identity, analyzer: RunningSums, *, name: str,
                 epsilon: Any = None, delta: float | None = None, relation: str = "replace") -> None:
        super().__init__(randomizer, intermediary, analyzer, name=name, epsilon=None, delta=None, relation=relation)
        exact = randomizer.message == "exact"
        if exact and epsilon is not None:
            raise ValueError(f"randomizer 'exact' is not private: omit epsilon (got {epsilon!r})")
        if not exact and epsilon is None:
            raise ValueError(f"randomizer {randomizer.name!r} needs epsilon (a number, or one per run)")
        if exact and delta is not None:
            raise ValueError(f"randomizer 'exact' is not private: omit delta (got {delta!r})")
        self.epsilon: float | np.ndarray | None = None if exact else _check_epsilon_runs(epsilon)
        if self.epsilon is not None:
            self.target_epsilon = float(np.max(self.epsilon))
            self.target_delta = 0.0 if delta is None else check_float_in_range("delta", delta, 0.0, 1.0,
                                                                                high_inclusive=False)

    # ------------------------------------------------------------ configuration
    @property
    def model(self) -> str:
        return "none" if not self.private else "silo-LDP"

    @property
    def trusted(self) -> str:
        return "everyone (no privacy)" if not self.private else "own agent only"

    @property
    def per_run(self) -> bool:
        """Whether every run has its own epsilon."""
        return self.epsilon is not None and np.ndim(self.epsilon) == 1

    def _check_runs(self, n_runs: int) -> None:
        if isinstance(self.epsilon, np.ndarray) and self.epsilon.shape != (n_runs,):  # one ε per run
            raise ValueError(
                f"protocol {self.name!r}: epsilon has one value per run for {self.epsilon.size} runs, but n_runs={n_runs}"
            )

    def configure(self, *, n_agents: int, n_arms: int, horizon: int | None = None, sensitivity: float = 1.0,
                  n_runs: int | None = None) -> CounterProtocol:
        """Validate the setting and calibrate the noise; returns ``self``.

        ``horizon`` bounds the items per stream (needed by the binary mechanism; the hybrid
        mechanism's accounting uses it only to name the deepest interval); ``n_runs``,
        when given, is checked against a per-run epsilon before any work.
        """
        self.n_agents = check_positive_int("n_agents", n_agents)
        self.n_arms = check_positive_int("n_arms", n_arms)
        self.horizon = None if horizon is None else check_positive_int("horizon", horizon)
        self.sensitivity = check_positive_float("sensitivity", sensitivity)
        if n_runs is not None:
            self._check_runs(check_positive_int("n_runs", n_runs))
        self._configure_parts(CounterSetting(self.n_agents, self.n_arms, self.horizon, self.sensitivity, self.epsilon,
                                             self.relation),
                              f"n_agents={self.n_agents}, n_arms={self.n_arms}, horizon={self.horizon}")
        self._configured = True
        self._reset_done = False
        return self

    def reset(self, *, n_runs: int, rng: np.random.Generator) -> CounterProtocol:
        """Allocate ``n_runs`` runs of ``M K`` streams; the Laplace noise is drawn from ``rng`` itself.

        Unlike the base class, the counter protocol does not spawn child streams: its only
        randomness is one standard Laplace variate per advancing stream per release, drawn
        from ``rng`` in the order of the indices (after whatever the learner drew from
        ``rng`` before), the order the loop references of ``tests/`` follow.
        """
        self._require()
        self.n_runs = check_positive_int("n_runs", n_runs, max_value=MAX_STEPS, reason="the state has one row per run")
        self._check_runs(self.n_runs)
        rng = check_rng("rng", rng)
        self._noise_rng = rng
        self._shuffle_rng = None
        self.communication = Communication(payload_unit="floats")
        shape = (self.n_runs, self.n_agents, self.n_arms)
        eps = self.epsilon.reshape(self.n_runs, 1, 1) if isinstance(self.epsilon, np.ndarray) else self.epsilon
        self._streams = self.randomizer.make_streams(self.setting, eps, shape)
        self._reset_done = True
        return self

    # ------------------------------------------------------------ the release
    def release(self, idx: Any, x: Any) -> np.ndarray:
        """Feed item ``x[e]`` to stream ``idx[e]`` (distinct flat indices); return their new private sums.

        The fast path of the learners: no argument checking beyond the lifecycle.
        """
        if not self._reset_done:
            self._require(reset=True)
        return self._streams.step_flat(idx, x, self._noise_rng)

    def release_increment(self, idx: Any, x: Any) -> np.ndarray:
        """As :meth:`release`, returning the change of each stream's private sum."""
        if not self._reset_done:
            self._require(reset=True)
        return self._streams.step_flat_increment(idx, x, self._noise_rng)

    def value_at(self, idx: Any) -> np.ndarray:
        """Current private sums of the streams at flat indices ``idx``."""
        if not self._reset_done:
            self._require(reset=True)
        return self._streams.value_at(idx)

    def communicate(self, messages: Any, *, n_messages: float, payload: float) -> Any:
        """One communication round: ``messages`` through the intermediary (delivered with their senders).

        ``n_messages`` and ``payload`` (floats) count everything sent in the round, the
        receivers' replies included.  The messages are post-processing of the released sums.
        """
        c = self.communication
        c.rounds += 1
        c.messages += n_messages
        c.payload += payload
        return self.intermediary.deliver(messages)

    # ------------------------------------------------------------ the indices' widths
    def width_scale(self, kind: str) -> float | np.ndarray | None:
        """Count-free scale of the privacy width ``kind`` (scalar or per run; None without privacy)."""
        self._require()
        kind = check_choice("privacy_width", kind, PRIVACY_WIDTH_KINDS)
        if not self.private:
            return None
        return self.randomizer.width_scale(kind, self.setting)

    def sd_factor(self, n: np.ndarray) -> np.ndarray:
        """Count factor of the ``"std"`` width at integer counts ``n`` (float array of counts >= 1)."""
        return self.randomizer.sd_factor(n)

    def sd_factor_float(self, n_hat: np.ndarray) -> np.ndarray:
        """Count factor of the ``"std"`` width at real-valued counts ``n_hat >= 1``."""
        return self.randomizer.sd_factor_float(n_hat)

    def noise_variance(self, n: ArrayLike, *, run: int | None = None) -> np.ndarray:
        """Variance of a stream's error after ``n`` items (of run ``run``; default the noisiest run)."""
        self._require()
        return self.randomizer.noise_variance(self.setting, n, self._epsilon_of(run, smallest=True))

    def max_noise_variance(self) -> float:
        """Largest error variance of any stream over ``1..horizon`` items (0 without privacy)."""
        self._require()
        if not self.private:
            return 0.0
        if self.horizon is None:
            raise ValueError(f"protocol {self.name!r}: max_noise_variance needs configure(horizon=T)")
        return float(np.max(self.noise_variance(np.arange(1, self.horizon + 1))))

    # ------------------------------------------------------------ privacy
    def _epsilon_of(self, run: int | None, *, smallest: bool = False) -> Any:
        if self.epsilon is None:
            return None
        if not isinstance(self.epsilon, np.ndarray):  # one ε for every run
            return float(self.epsilon)
        if run is None:
            return float(np.min(self.epsilon) if smallest else np.max(self.epsilon))
        run = check_int_in_range("run", run, 0, self.epsilon.size - 1)
        return float(self.epsilon[run])

    def event(self, relation: str | None = None, *, run: int | None = None) -> DpEvent:
        """The releases one reward enters (its stream's), for run ``run`` (default: the weakest run)."""
        self._require()
        relation = self.relation if relation is None else check_relation(relation)
        return self.randomizer.event(self.setting, self._epsilon_of(run), relation)

    def accounting(self, relation: str | None = None, *, run: int | None = None) -> Accounting:
        """Pure ε-DP per reward for run ``run`` (default: the weakest run, largest ε), or "none"."""
        self._require()
        relation = self.relation if relation is None else check_relation(relation)
        ev = self.event(relation, run=run)
        if not self.private:
            return account(ev, model=self.model, relation=relation, theorem=self.theorem())
        notes = self.bounds_note()
        if isinstance(self.epsilon, np.ndarray) and run is None:  # one ε per run
            notes += (f"; runs have ε from {float(np.min(self.epsilon)):g} to {float(np.max(self.epsilon)):g}, "
                      "this is the weakest (accounting(run=r) for run r)")
        kw = dict(target_epsilon=self._epsilon_of(run), model=self.model, relation=relation, theorem=self.theorem(),
                  notes=notes)
        if self.target_delta is not None and self.target_delta > 0.0:
            return account(ev, target_delta=self.target_delta, **kw)
        return account_pure(ev, **kw)

    def accounting_by_epsilon(self, relation: str | None = None) -> dict:
        """``{ε: Accounting}`` for every distinct ε of the runs."""
        self._require()
        if self.epsilon is None:  # not private
            return {}
        if not isinstance(self.epsilon, np.ndarray):  # one ε for every run
            return {float(self.epsilon): self.accounting(relation)}
        firsts = {float(e): int(i) for i, e in reversed(list(enumerate(self.epsilon)))}
        return {e: self.accounting(relation, run=i) for e, i in sorted(firsts.items())}

    def bounds_note(self) -> str:
        if not self.private:
            return ""
        return (f"for rewards clipped to an interval of width s = {self.sensitivity:g} (the learner clips); "
                "the pull counts are not protected (as in the paper)")

    # ------------------------------------------------------------ reports
    def calibration(self) -> dict:
        self._require()
        out = {"protocol": self.name, "model": self.model, "mechanism": self.randomizer.name,
               "epsilon": None if self.epsilon is None else _plain(self.epsilon), "sensitivity": self.sensitivity}
        if self.private:
            out.update(self.randomizer.calibration(self.setting))
        return out


def _counter(randomizer: CounterRandomizer, name: str, epsilon: Any, delta: float | None,
             relation: str) -> CounterProtocol:
    return CounterProtocol(randomizer, Identity(), RunningSums(), name=name, epsilon=epsilon, delta=delta,
                           relation=relation)


_LSF = "Li, Song & Fragouli 2022"


@register("counter-hybrid", kind="counter", summary="hybrid mechanism on every (agent, arm) reward stream",
          reference=f"Chan, Shi & Song 2011, Thm. 4.7; {_LSF}, Thms. 1 and 3")
def counter_hybrid(epsilon: Any, delta: float | None = None, *, relation: str = "replace",
                   width_sd: str = "bound") -> CounterProtocol:
    return _counter(HybridCounter(width_sd), "counter-hybrid", epsilon, delta, relation)


@register("counter-binary", kind="counter", summary="binary mechanism over the horizon on every reward stream",
          reference="Chan, Shi & Song 2011; Dwork, Naor, Pitassi & Rothblum 2010")
def counter_binary(epsilon: Any, delta: float | None = None, *, horizon: int | None = None,
                   relation: str = "replace") -> CounterProtocol:
    return _counter(BinaryCounter(horizon), "counter-binary", epsilon, delta, relation)


@register("counter-laplace", kind="counter", summary="every reward with its own Lap(s/ε): the per-sample baseline",
          reference="Chan, Shi & Song 2011 (per-item baseline); Laplace mechanism, one release per reward")
def counter_laplace(epsilon: Any, delta: float | None = None, *, relation: str = "replace") -> CounterProtocol:
    return _counter(PerItemLaplaceCounter(), "counter-laplace", epsilon, delta, relation)


@register("counter-exact", kind="counter", summary="exact running sums, no privacy (coop-UCB, UCB)",
          reference="Landgren, Srivastava & Leonard 2016; Auer et al. 2002")
def counter_exact() -> CounterProtocol:
    return CounterProtocol(ExactCounter(), Identity(), RunningSums(), name="counter-exact")


"""The abstract parts of a sum protocol: what its randomizer and analyzer must answer.

A :class:`~fedbandit.protocols.SumProtocol` (one private vector sum per round; Kairouz, Liu &
Steinke 2021, Sec. 6) asks its parts and never checks their types (that is
:meth:`~fedbandit.protocols.SumProtocol.supports`'s job, once, at construction).  The part that
adds the noise -- the randomizer (the distributed mechanisms), or a central analyzer (a trusted
server's Gaussian) -- answers for the privacy (:class:`SumNoise`).  Every method a new part
must answer is abstract: nothing falls back silently.
"""

from __future__ import annotations

import abc
import math
from typing import Any, ClassVar, Protocol

import numpy as np

from fedbandit.accounting.events import DpEvent, NonPrivateEvent
from fedbandit.protocols.base import Analyzer, Randomizer
from fedbandit.protocols.sums.setting import SumSetting

__all__ = ["SumNoise", "SumRandomizer", "SumAnalyzer", "ModularVectors"]


class SumNoise(abc.ABC):
    """The privacy statements of the part that adds a sum protocol's noise (all for the configured setting)."""

    @abc.abstractmethod
    def event(self, setting: SumSetting, relation: str) -> DpEvent:
        """What the server's view reveals about one party over the T rounds, under ``relation``
        (with client sampling, the amplified guarantee; the protocol marks a sampling scheme no
        theorem covers for the relation)."""

    @abc.abstractmethod
    def theorem(self, setting: SumSetting) -> str:
        """The result the guarantee rests on, with its citation ("" for exact sums)."""

    @abc.abstractmethod
    def noise_std(self, setting: SumSetting) -> float:
        """Standard deviation per coordinate of the privacy noise in the released sum (all parties)."""

    @abc.abstractmethod
    def calibration(self, setting: SumSetting) -> dict:
        """The noise parameters for tables (merged into the protocol's ``calibration()``)."""

    @abc.abstractmethod
    def scale_noise(self, factor: float) -> None:
        """Testing hook of the audits: the calibrated noise × ``factor`` (``TypeError`` if it adds none)."""


class SumRandomizer(Randomizer, SumNoise):
    """R of a sum protocol: each party's vector into its message, every round.

    Lifecycle (called by the protocol): :meth:`configure` (setting), :meth:`reset` (the runs
    and the generator: the public randomness of fresh rotations), then per round :meth:`encode`
    → the intermediary's ``deliver`` → :meth:`decode` → the analyzer.

    A randomizer whose noise shares are calibrated for a fixed number of them in the sum
    (``message = "integer"``) refuses Poisson client sampling, unless it deals a fixed number
    of shares over whichever clients join a round: then it answers the optional
    ``poisson_rounds(setting) -> bool`` (whether it was configured so) and
    ``encode_sample(x, mask, rng)`` (the messages of the clients in ``mask``), as
    :class:`~fedbandit.protocols.sums.DDGVectors` does, and its ``event`` covers both relations.

    ``row_wise_clear_sum`` (class attribute, default False) declares that :meth:`encode` maps each
    party's row to its message alone and without draws, and :meth:`decode` adds the delivered rows
    up: the sum of a masked round is then the sum of the joined rows' messages, and the protocol
    encodes only those.  A subclass that overrides ``encode`` or ``decode`` loses the declaration
    unless it makes it again in its own body.
    """

    row_wise_clear_sum: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "row_wise_clear_sum" not in cls.__dict__ and not {"encode", "decode"}.isdisjoint(cls.__dict__):
            cls.row_wise_clear_sum = False

    @abc.abstractmethod
    def reset(self, setting: SumSetting, n_runs: int, rng: np.random.Generator) -> None:
        """Start ``n_runs`` independent runs: draw whatever public randomness the encoding needs from ``rng``."""

    @abc.abstractmethod
    def encode(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The parties' messages (n_runs, n_parties, ...) from their vectors x (n_runs, n_parties, dim)."""

    def decode(self, delivered: np.ndarray) -> np.ndarray:
        """The sum (n_runs, dim) from what the intermediary delivered, with the public parameters:
        real messages are added up (unless secure aggregation summed them)."""
        return delivered if delivered.ndim == 2 else delivered.sum(axis=1)

    @abc.abstractmethod
    def payload(self, setting: SumSetting) -> int:
        """What one party sends per round, in :attr:`payload_unit` (floats, or bits)."""

    @property
    def bits_per_coordinate(self) -> int:
        """Bits one party sends per coordinate (64 for a float)."""
        return 64


class ModularParams(Protocol):
    """What a modular-integer randomizer's calibrated parameters give (the DDG's and the binomial's)."""

    @property
    def modulus(self) -> int:
        """m = 2^bits."""

    @property
    def d_pad(self) -> int:
        """The padded dimension (a power of two for the Hadamard rotation)."""

    @property
    def sigma(self) -> float:
        """One party's noise standard deviation per coordinate (output units)."""


class ModularVectors(SumRandomizer):
    """A sum randomizer whose parties send integers mod 2^bits with a noise share each (for secure
    aggregation): the distributed discrete Gaussian, the distributed binomial.

    After :meth:`configure` a subclass holds ``bits`` and ``params`` (with ``modulus``, ``d_pad``,
    the padded dimension, and ``sigma``, one party's noise std); the modulus, the payload (d_pad
    coordinates of ``bits`` bits) and the noise of the sum (n shares) follow.
    """

    message: ClassVar[str] = "integer"
    private_alone: ClassVar[bool] = False
    payload_unit: ClassVar[str] = "bits"
    #: Set by :meth:`configure`: the bits of a residue and the calibrated parameters.
    bits: int
    params: ModularParams

    @property
    def modulus(self) -> int:
        """m = 2^bits: the parties' residues are summed modulo it."""
        return self.params.modulus

    @property
    def bits_per_coordinate(self) -> int:
        return self.bits

    def payload(self, setting: SumSetting) -> int:
        return self.params.d_pad * self.bits

    def noise_std(self, setting: SumSetting) -> float:
        """sqrt(n)·σ: the n parties' noise shares (rounding and wrap-around come on top)."""
        return math.sqrt(setting.n_parties) * self.params.sigma


class SumAnalyzer(Analyzer):
    """A of a sum protocol: what the server releases from the decoded sum."""

    @abc.abstractmethod
    def analyze(self, total: np.ndarray, rng: np.random.Generator,
                return_noise: bool) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """The released sum (n_runs, dim) from the decoded ``total`` (and the noise the server
        added, with ``return_noise``)."""


def exact_sum_event(setting: SumSetting) -> NonPrivateEvent:
    """The event of a sum released without noise: the server sees the exact sum (secure
    aggregation) or every party's exact vector."""
    what = "the exact sum" if setting.view == "sum" else "every party's exact vector"
    return NonPrivateEvent(f"the server sees {what}")


def require_target_and_clip(name: str, setting: SumSetting) -> None:
    """A modular-integer randomizer calibrates its noise for a target and clips to c: both needed."""
    if not setting.private:
        raise ValueError(f"randomizer {name!r} needs a target (epsilon, delta)")
    if setting.clip is None:
        raise ValueError(f"randomizer {name!r} needs clip, the ℓ2 clipping norm c")


def check_aggregation_width(bits: int, n_parties: int) -> None:
    """The sum of n_parties residues of ``bits`` bits must fit the int64 aggregation."""
    if bits + math.log2(n_parties) > 62:
        raise ValueError(f"bits={bits} with n_parties={n_parties} overflows the 64-bit integer aggregation; use fewer bits")

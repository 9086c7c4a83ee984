"""The sum protocol P = (R, S, A): one private vector sum over n parties per round, composed over T rounds."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from fedbandit._validation import (
    MAX_STEPS,
    check_array,
    check_bool,
    check_choice,
    check_float_in_range,
    check_positive_float,
    check_positive_int,
    check_rng,
)
from fedbandit.accounting.events import ConditionalEvent, DpEvent, SelfComposedEvent, check_relation
from fedbandit.accounting.subsampling import SAMPLING_RELATIONS, SAMPLING_SCHEMES
from fedbandit.protocols.base import Communication, Intermediary, Protocol
from fedbandit.protocols.sums.binomial_decoder import BinomialDecoder
from fedbandit.protocols.sums.binomial_vectors import BinomialVectors
from fedbandit.protocols.sums.clipped_vectors import ClippedVectors
from fedbandit.protocols.sums.ddg_decoder import DDGDecoder
from fedbandit.protocols.sums.ddg_vectors import DDGVectors
from fedbandit.protocols.sums.gaussian_sum import GaussianSum
from fedbandit.protocols.sums.parts import SumAnalyzer, SumRandomizer
from fedbandit.protocols.sums.setting import SumSetting

__all__ = ["SumProtocol"]


class SumProtocol(Protocol):
    """A sum protocol P = (R, S, A): one private vector sum over n parties per round, T rounds.

    The pipeline of Kairouz, Liu & Steinke (2021, Alg. 1 and its baselines): every round the
    parties' vectors go through the randomizer (:class:`~fedbandit.protocols.SumRandomizer`:
    encode), the intermediary (the server's view), the randomizer's public decoding and the
    analyzer (:class:`~fedbandit.protocols.SumAnalyzer`).  The part that adds the noise (a
    central analyzer, else the randomizer) gives the event, the theorem and the noise.

    Parameters
    ----------
    randomizer : SumRandomizer
        :class:`~fedbandit.protocols.sums.ExactVectors`, :class:`~fedbandit.protocols.sums.ClippedVectors`,
        :class:`~fedbandit.protocols.sums.DDGVectors`, :class:`~fedbandit.protocols.sums.BinomialVectors` or
        a new one.
    intermediary : Intermediary
        One whose server sees the messages with their senders (identity) or their sum (secure
        aggregation).
    analyzer : SumAnalyzer
        :class:`~fedbandit.protocols.sums.PlainSum`, :class:`~fedbandit.protocols.sums.GaussianSum`,
        :class:`~fedbandit.protocols.sums.DDGDecoder`, :class:`~fedbandit.protocols.sums.BinomialDecoder`
        or a new one.
    name : str
    epsilon, delta : float or None
        Target of the whole run (all T rounds); None for the non-private protocol.
    relation : {"add-remove", "replace"}, default "add-remove"
        See the module documentation.

    Raises
    ------
    ValueError
        If the parts do not fit together (:meth:`supports` gives the reason), or the target does
        not fit them (exact sums with a target, noise without one).
    """

    kind: ClassVar[str] = "sum"
    randomizer_type: ClassVar[type] = SumRandomizer
    analyzer_type: ClassVar[type] = SumAnalyzer

    setting: SumSetting

    def __init__(self, randomizer: SumRandomizer, intermediary: Intermediary, analyzer: SumAnalyzer, *, name: str,
                 epsilon: float | None = None, delta: float | None = None, relation: str = "add-remove") -> None:
        super().__init__(randomizer, intermediary, analyzer, name=name, epsilon=epsilon, delta=delta, relation=relation)
        noisy = analyzer.central or randomizer.message != "exact"
        if not noisy and self.private:
            raise ValueError(f"randomizer {randomizer.name!r} with analyzer {analyzer.name!r} is not private: omit "
                             "epsilon and delta")
        if noisy and not self.private:
            raise ValueError(f"analyzer {analyzer.name!r} needs a target (epsilon, delta)")

    @classmethod
    def supports(cls, randomizer: Any, intermediary: Any, analyzer: Any) -> str | None:
        """Why (R, S, A) cannot form a sum protocol, or None.

        R must be a :class:`~fedbandit.protocols.SumRandomizer` and A a
        :class:`~fedbandit.protocols.SumAnalyzer`; the server sees the messages with their
        senders or their sum; residues of the distributed discrete Gaussian (or binomial) go to
        its decoder, and only they do, through secure aggregation only (each party's noise share
        is calibrated for the sum of all n); the central Gaussian needs clipped vectors.
        """
        reason = super().supports(randomizer, intermediary, analyzer)
        if reason is not None:
            return reason
        if intermediary.view not in ("messages", "sum"):
            return (f"randomizer {randomizer.name!r} with intermediary {intermediary.name!r}: a sum protocol's server "
                    "receives the messages with their senders (identity) or only their sum (secure aggregation)")
        for r_cls, a_cls, what in ((BinomialVectors, BinomialDecoder, "binomial"), (DDGVectors, DDGDecoder, "DDG")):
            if isinstance(randomizer, r_cls) != isinstance(analyzer, a_cls):
                return (f"randomizer {randomizer.name!r} with analyzer {analyzer.name!r}: {what} residues go to the "
                        f"{what} decoder, and only they do")
            if isinstance(randomizer, r_cls) and intermediary.view != "sum":
                return (f"randomizer {randomizer.name!r} with intermediary {intermediary.name!r}: each party's noise "
                        "share is calibrated for the sum of all n parties, so only secure aggregation may deliver its "
                        "messages")
        if isinstance(analyzer, GaussianSum) and not isinstance(randomizer, ClippedVectors):
            return (f"analyzer 'gaussian-sum' with randomizer {randomizer.name!r}: the server's noise is calibrated for "
                    "clipped vectors (sensitivity c); use 'clipped-vectors'")
        return None

    # ------------------------------------------------------------ configuration
    @property
    def model(self) -> str:
        if self.analyzer.central:
            return "central"
        if not self.private:
            return "none"
        return "distributed"

    @property
    def trusted(self) -> str:
        if self.analyzer.central:
            return "the server"
        if not self.private:
            return "everyone (no privacy)"
        return self.intermediary.trusted

    def configure(self, *, n_parties: int, dim: int, n_rounds: int = 1, clip: float | None = None,
                  sampling_rate: float = 1.0, sampling: str = "fixed") -> SumProtocol:
        """Validate the setting and calibrate the noise (no random state); returns ``self``.

        Parameters
        ----------
        n_parties : int
            n, the parties whose vectors are summed every round.
        dim : int
            d, the vectors' dimension.
        n_rounds : int, default 1
            T, the rounds (sums released) the guarantee covers.
        clip : float or None
            c, the ℓ2 clipping norm of one party's vector (required by the private
            protocols; the non-private sum is exact and does not clip).
        sampling_rate : float, default 1
            q in (0, 1]: every round sums a random sample of a population (module
            docstring); 1 for everyone in every round.
        sampling : {"fixed", "poisson"}, default "fixed"
            ``"fixed"``: ``n_parties`` = qN clients drawn without replacement each round;
            ``"poisson"``: each of the N = ``n_parties`` clients joins with probability q
            (the vectors of the absent ones are masked out, :meth:`aggregate`; a randomizer with
            a noise share per party refuses it unless it deals its shares over the clients that
            join, as DDG does: :class:`~fedbandit.protocols.SumRandomizer`).
        """
        self.n_parties = check_positive_int("n_parties", n_parties, max_value=MAX_STEPS, reason="one row per party")
        self.dim = check_positive_int("dim", dim, max_value=MAX_STEPS, reason="vectors of dim entries")
        self.n_rounds = check_positive_int("n_rounds", n_rounds, max_value=MAX_STEPS, reason="rounds are composed")
        self.clip = None if clip is None else check_positive_float("clip", clip)
        self.sampling_rate = check_float_in_range("sampling_rate", sampling_rate, 0.0, 1.0, low_inclusive=False)
        self.sampling = check_choice("sampling", sampling, SAMPLING_SCHEMES)
        if self.randomizer.message == "integer" and self.sampling == "poisson" and self.sampling_rate < 1.0:
            if getattr(self.randomizer, "encode_sample", None) is None:
                raise ValueError(
                    f"sampling='poisson' with randomizer {self.randomizer.name!r}: each party's noise share is "
                    "calibrated for exactly n_parties shares in the sum, and a Poisson sample has a random number of "
                    "parties; use sampling='fixed'"
                )
            if getattr(self.intermediary, "mode", "ideal") == "real":
                raise ValueError("sampling='poisson' with secure_aggregation='real': the simulated Poisson rounds use "
                                 "the ideal modular sum of the clients that joined; use secure_aggregation='ideal'")
        self.intermediary.check_parties(self.n_parties, "n_parties")
        setting = SumSetting(
            n_parties=self.n_parties, dim=self.dim, n_rounds=self.n_rounds, clip=self.clip,
            sampling_rate=self.sampling_rate, sampling=self.sampling, epsilon=self.target_epsilon,
            delta=self.target_delta, relation=self.relation, view=self.intermediary.view,
            intermediary=self.intermediary.name,
        )
        self._configure_parts(setting, f"n_parties={self.n_parties}, dim={self.dim}, n_rounds={self.n_rounds}, "
                                       f"clip={self.clip}")
        self._configured = True
        self._reset_done = False
        return self

    def reset(self, *, n_runs: int, rng: np.random.Generator) -> SumProtocol:
        """Allocate ``n_runs`` independent runs; the noise is drawn from ``rng`` itself (see the module docstring)."""
        self._require()
        self.n_runs = check_positive_int("n_runs", n_runs)
        rng = check_rng("rng", rng)
        self._noise_rng = rng
        self._shuffle_rng = None
        self.communication = Communication(payload_unit=self.randomizer.payload_unit)
        self._round = 0
        self.randomizer.reset(self.setting, self.n_runs, rng)
        self._reset_done = True
        return self

    def _poisson_rounds(self) -> bool:
        """Whether the randomizer deals its noise shares over each Poisson round's clients (``encode_sample``)."""
        deals = getattr(self.randomizer, "poisson_rounds", None)
        return deals is not None and bool(deals(self.setting))

    # ------------------------------------------------------------ the release
    def aggregate(self, vectors: Any, *, return_noise: bool = False,
                  mask: Any = None) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """One round: the server's noisy sum of the parties' vectors.

        Parameters
        ----------
        vectors : array_like, shape (n_parties, dim) or (n_runs, n_parties, dim)
        mask : array_like of bool, shape (n_parties,) or (n_runs, n_parties), optional
            The parties that take part in this round (a Poisson sample); the others send
            nothing (their vectors count as zero).  Not for the binomial mechanism (a fixed
            number of noise shares); DDG configured with ``sampling="poisson"`` needs it: the
            K noise shares are dealt over the k that take part
            (:meth:`~fedbandit.protocols.sums.DDGVectors.encode_sample`).
        return_noise : bool, default False
            Also return the noise the server added (central Gaussian; zeros for the exact
            sum; refused for DDG, whose error is not an additive server noise) -- for
            simulations that measure the error.

        Returns
        -------
        ndarray, shape (dim,) or (n_runs, dim)
            (and the noise of the same shape when ``return_noise``).
        """
        self._require(reset=True)
        return_noise = check_bool("return_noise", return_noise)
        x = check_array("vectors", vectors, finite=False)
        R, n, d = self.n_runs, self.n_parties, self.dim
        single = x.ndim == 2
        if single:
            if R != 1:
                raise ValueError(f"vectors of shape (n_parties, dim) need n_runs=1; this protocol was reset for {R} runs")
            x = x[None]
        if x.shape != (R, n, d):
            raise ValueError(
                f"vectors must have shape (n_parties, dim) = {(n, d)} or (n_runs, n_parties, dim) = {(R, n, d)}, "
                f"got {np.shape(vectors)}"
            )
        if not np.all(np.isfinite(x)):
            raise ValueError("vectors must contain only finite values")
        poisson_rounds = self._poisson_rounds()
        if mask is not None:
            if self.randomizer.message == "integer" and not poisson_rounds:
                raise ValueError(f"mask: protocol {self.name!r} adds a noise share per party calibrated for all of them; "
                                 "every party takes part (DDG: configure sampling='poisson')")
            mask = np.asarray(mask)
            if mask.dtype != bool:
                raise TypeError(f"mask must be a boolean array, got dtype {mask.dtype}")
            if mask.shape not in ((n,), (R, n)):
                raise ValueError(f"mask must have shape (n_parties,) = {(n,)} or (n_runs, n_parties) = {(R, n)}, "
                                 f"got {mask.shape}")
            mask = np.broadcast_to(mask[None] if mask.ndim == 1 else mask, (R, n))
            if not poisson_rounds and not self._sums_rows_in_the_clear():
                x = x * mask[..., None]
        elif poisson_rounds:
            raise ValueError(f"protocol {self.name!r} was configured for Poisson rounds: pass mask, the clients that "
                             "joined this round")
        if self._round >= self.n_rounds:
            raise ValueError(
                f"protocol {self.name!r} was configured for n_rounds={self.n_rounds} sums; its guarantee covers no more"
            )
        self._round += 1
        rng = self._noise_rng
        if mask is not None and not poisson_rounds and self._sums_rows_in_the_clear():
            out = self.analyzer.analyze(self._masked_sum(x, mask, rng), rng, return_noise)
        else:
            if poisson_rounds:  # the noise shares dealt over the clients that joined
                messages = self._capability(self.randomizer, "encode_sample",
                                            "deals no noise shares over Poisson rounds")(x, mask, rng)
            else:
                messages = self.randomizer.encode(x, rng)
            delivered = self.intermediary.deliver(messages, rng, modulus=self.randomizer.modulus)
            out = self.analyzer.analyze(self.randomizer.decode(delivered), rng, return_noise)
        c = self.communication
        c.rounds += 1
        senders: float = n if mask is None else float(mask.sum()) / R
        c.messages += senders
        c.payload += float(senders) * self.randomizer.payload(self.setting)
        if single:
            return (out[0][0], out[1][0]) if return_noise else out[0]
        return out

    def _sums_rows_in_the_clear(self) -> bool:
        """Whether a round is the plain sum of row-wise messages: each vector sent as it is or clipped (no draws),
        delivered with its sender and added up -- so a masked round need only encode the rows that joined.  The parts
        declare it: the randomizer's ``row_wise_clear_sum``, the intermediary's ``delivers_as_sent``."""
        return self.randomizer.row_wise_clear_sum and self.intermediary.delivers_as_sent

    def _masked_sum(self, x: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The decoded sum of a masked round, ``decode(encode(x * mask))``, from the rows that joined only.

        The same floats as the plain form (which encodes and adds up every row, R·n of them, most absent in a
        Poisson round): each row is encoded on its own (clipping is row-wise, an absent row x·0 = ±0 stays ±0), and
        NumPy's sum over the parties' axis starts from +0 and adds the rows one after the other in their order, so
        the absent rows' ±0 terms change no partial sum (a zero sum is +0 in both forms)
        (tests/test_sums.py::test_masked_clear_sum_is_the_plain_form_bit_for_bit).
        """
        R, n, d = x.shape
        total = np.zeros((R, d))
        for r in range(R):
            rows = np.flatnonzero(mask[r])
            if rows.size:
                total[r] = self.randomizer.decode(self.randomizer.encode(x[r, rows][None], rng))[0]
        return total

    def event(self, relation: str | None = None) -> DpEvent:
        """What the server learns about one party over the T rounds (see the module docstring).

        The central Gaussian's T releases (sensitivity Δ, noise σ each) are one Gaussian
        mechanism with μ = Δ√T/σ (rotation invariance), whose (ε, δ) curve is known exactly
        ([BW18]_ Thm. 8, :func:`fedbandit.accounting.accountant.exact_gaussian_epsilon`): the
        event is that exact (ε, δ) at the target δ -- the accountant's generic zCDP route for
        Gaussian compositions would overstate the ε of the analytic calibration.
        :meth:`gaussian_event` gives the composition itself.
        """
        self._require()
        relation = self.relation if relation is None else check_relation(relation)
        event = self._noise_part().event(self.setting, relation)
        q = self.sampling_rate
        if not self.private or q == 1.0 or SAMPLING_RELATIONS[self.sampling] == relation or self._poisson_rounds():
            # (Poisson rounds of dealt noise shares: add/remove is proven, replace is two such steps, group privacy)
            return event
        # the T rounds on q-samples, for an analyst who does not see the sample: the guarantee is proven
        # for Poisson sampling with add/remove and for fixed-size sampling with replace-one
        # (fedbandit.accounting.subsampling.SAMPLING_RELATIONS); another pairing is "unproven"
        bound = self.setting.sampling_bound(relation)
        return ConditionalEvent(
            event, holds=False, on_failure="unproven",
            assumption=(f"the bound for {bound} is applied to {self.sampling} sampling under the {relation} relation, "
                        "as [KLS21] do; no theorem covers that pairing"),
        )

    def gaussian_event(self, relation: str | None = None) -> SelfComposedEvent:
        """Central Gaussian only: the T Gaussian releases, ``SelfComposedEvent(GaussianEvent(Δ, σ), T)``.

        Δ = c for one party's vector added or removed, 2c for one replaced.
        """
        self._require()
        relation = self.relation if relation is None else check_relation(relation)
        return self._capability(self.analyzer, "gaussian_event", "adds no Gaussian noise at the server")(
            self.setting, relation)

    def bounds_note(self) -> str:
        if not self.private:
            return ""
        return f"for parties' vectors clipped to ℓ2 norm c = {self.clip:g}"

    # ------------------------------------------------------------ reports
    @property
    def bits_per_coordinate(self) -> int:
        """Bits one party sends per coordinate: B for DDG and the binomial mechanism, 64 for a float."""
        self._require()
        return self.randomizer.bits_per_coordinate

    def noise_std(self) -> float:
        """Standard deviation per coordinate of the privacy noise in the released sum (all parties).

        DDG: sqrt(n)·σ (the parties' discrete Gaussians, or the K shares dealt over a Poisson round's
        clients; rounding and wrap-around come on top).
        """
        self._require()
        return self._noise_part().noise_std(self.setting)

    def wrap_fraction(self) -> float:
        """DDG only: the measured fraction of aggregate coordinates that wrapped around since the reset."""
        self._require(reset=True)
        return self._capability(self.randomizer, "wrap_fraction", "does not reduce modulo 2^bits")()

    @property
    def params(self) -> Any:
        """The randomizer's calibrated parameters (:class:`fedbandit.accounting.ddg.DDGParams` for DDG,
        :class:`fedbandit.accounting.binomial.BinomialParams` for the binomial mechanism)."""
        self._require()
        return self._capability(self.randomizer, "params", "has no calibrated integer parameters")

    def calibration(self) -> dict:
        self._require()
        out = {
            "protocol": self.name,
            "model": self.model,
            "n_parties": self.n_parties,
            "dim": self.dim,
            "n_rounds": self.n_rounds,
            "clip": self.clip,
            "sigma0": 0.0,
            "sigma": self.noise_std(),
            "bits": self.bits_per_coordinate if self.randomizer.message == "integer" else "float",
            "sampling_rate": self.sampling_rate,
            "sampling": self.sampling,
        }
        out.update(self.analyzer.calibration(self.setting))
        out.update(self.randomizer.calibration(self.setting))
        return out


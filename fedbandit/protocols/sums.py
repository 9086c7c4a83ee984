r"""Sum protocols: one private vector sum over n parties per round, composed over the rounds.

Federated learning and distributed mean estimation (Kairouz, Liu & Steinke [KLS21]_,
Sec. 6) need from every round only the sum :math:`\sum_i x_i` of the n parties' vectors
:math:`x_i \in \mathbb R^d`.  A sum protocol P = (R, S, A) (:class:`SumProtocol`) releases
it, once per round, for T rounds:

=========================  ==================================  ====================  ==================
name                       randomizer R                        intermediary S        analyzer A
=========================  ==================================  ====================  ==================
``sum-non-private``        the vector as it is                 identity              exact sum
``sum-central-gaussian``   the vector clipped to norm c        identity              sum + N(0, σ²)
``sum-ddg-secagg``         DDG encoding (clip, flatten,        secure aggregation    modular clipping,
                           round, N_Z noise, mod 2^B)                                unflatten, rescale
``sum-binomial-secagg``    cpSGD encoding (clip, flatten,      secure aggregation    minus the noise mean,
                           round, Bin(N_i, p) noise, mod 2^B)                        modular clipping, ...
=========================  ==================================  ====================  ==================

* ``sum-central-gaussian``: a *trusted* server adds Gaussian noise to the sum of the clipped
  vectors; σ is the smallest for which the T releases are (ε, δ)-DP
  (:func:`fedbandit.accounting.composed_gaussian.composed_gaussian_sigma`: exact, by the
  analytic Gaussian of Balle & Wang at sensitivity c√T, or through zCDP);
* ``sum-ddg-secagg``: the distributed discrete Gaussian of [KLS21]_ Alg. 1
  (:class:`fedbandit.mechanisms.ddg.DDGMechanism`): every party adds its share of discrete
  Gaussian noise to its rounded vector and secure aggregation ([BIK+17]_, ideal or the real
  five rounds of :mod:`fedbandit.secagg`) reveals only the sum mod 2^B; γ and σ from
  :func:`fedbandit.accounting.ddg.ddg_params` with ``steps`` = T (Prop. 14 composed over
  the rounds).

* ``sum-binomial-secagg``: the distributed binomial mechanism of cpSGD (Agarwal et al.
  2018), [KLS21]_'s baseline, through the same modular pipeline
  (:class:`fedbandit.mechanisms.binomial.BinomialMechanism`); accounted in (ε, δ) only
  (:mod:`fedbandit.accounting.binomial`).

**Client sampling** (``configure(sampling_rate=q, sampling=...)``): when every round sums
a random sample of a population -- ``sampling="fixed"``: exactly ``n_parties`` of N = n/q
clients without replacement ([KLS21]_'s sampler), or ``"poisson"``: every client with
probability q -- the noise is calibrated, and the guarantee stated, with amplification by
subsampling (:mod:`fedbandit.accounting.subsampling`), for an adversary who sees the
released sums but not who was sampled (the analyst, not the server that contacts the
clients, [KLS21]_ Sec. 6.2.3).  ``relation="add-remove"`` uses the Poisson bounds
(sampled Gaussian RDP; [ZW19] Thm. 5 for DDG), the paper's accounting: proven for
``sampling="poisson"``, status "unproven" for ``"fixed"`` (no theorem covers the pairing;
the paper and TensorFlow Federated use it so).  ``relation="replace"`` uses the
without-replacement bound ([WBK19] Thm. 9), proven for ``"fixed"``.  DDG with
``sampling="poisson"``: K noise shares of variance σ²/γ² are dealt over the k clients that
join (a client with m of them adds N_Z(0, mσ²/γ²)), so that the sum's noise does not depend on
k (K an upper quantile of k); add/remove one
client, accounted through the sampled Gaussian that dominates it
(:mod:`fedbandit.accounting.sampled_ddg`, status "verified").  The binomial mechanism needs
a fixed number of noise shares, so it refuses Poisson sampling.

Lifecycle: ``configure(n_parties=, dim=, n_rounds=, clip=)`` → ``reset(n_runs=, rng=)`` →
``aggregate(vectors)`` at most ``n_rounds`` times (vectors ``(n_parties, dim)`` or, for
several runs side by side, ``(n_runs, n_parties, dim)``), returning the server's noisy sum.

**Neighbouring relation** (``relation="add-remove"``, the default): one party's vector is
added or removed -- in the neighbouring run that party's vector is zero while it still
takes part (it still adds its noise share, as [KLS21]_ analyse with n noise-adding
parties); the adversary is the server, which sees everything the intermediary delivers
over the T rounds (the messages with their senders for the identity, only the sum under
secure aggregation).  Sensitivity of one round: the clipping norm c (central), the
conditional-rounding bound Δ₂ (DDG).  ``relation="replace"`` (one party's vector replaced by
another): 2c, and 2Δ₂ for DDG.  A party that drops out removes its noise share: the
guarantee is then that of fewer parties (:meth:`fedbandit.accounting.ddg.DDGParams.epsilon_for`).

Randomness: a sum protocol draws from the generator given to :meth:`SumProtocol.reset`
*itself*, in the mechanism's order -- the DDG rotation when the flattening seed is not
fixed, then, per round, the rounding coins and the noise -- rather than from spawned
streams: it has a single stream (no shuffler), and so a trainer reproduces the draws of a
direct use of the mechanism from the same generator.

References
----------
.. [KLS21] P. Kairouz, Z. Liu and T. Steinke, "The distributed discrete Gaussian
   mechanism for federated learning with secure aggregation", ICML 2021.
.. [BIK+17] K. Bonawitz et al., "Practical secure aggregation for privacy-preserving
   machine learning", CCS 2017.
.. [BW18] B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for differential
   privacy: analytical calibration and optimal denoising", ICML 2018.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from fedbandit._validation import (
    MAX_STEPS,
    check_array,
    check_bool,
    check_choice,
    check_float_in_range,
    check_int_in_range,
    check_positive_float,
    check_positive_int,
    check_rng,
)
from fedbandit.accounting.accountant import exact_gaussian_epsilon
from fedbandit.accounting.composed_gaussian import (
    COMPOSED_GAUSSIAN_CALIBRATIONS,
    composed_gaussian_sigma,
)
from fedbandit.accounting.ddg import DEFAULT_BETA, ddg_delta2
from fedbandit.accounting.events import (
    ApproxDpEvent,
    ConditionalEvent,
    DiscreteGaussianSumEvent,
    GaussianEvent,
    NonPrivateEvent,
    SampledDiscreteGaussianSumEvent,
    SelfComposedEvent,
    check_relation,
)
from fedbandit.accounting.subsampling import SAMPLING_SCHEMES, amplification_for
from fedbandit.protocols.base import Analyzer, Communication, Protocol, Randomizer
from fedbandit.protocols.intermediaries import Identity, SecureAggregation
from fedbandit.protocols.registry import register

__all__ = [
    "ExactVectors",
    "ClippedVectors",
    "DDGVectors",
    "PlainSum",
    "GaussianSum",
    "DDGDecoder",
    "BinomialVectors",
    "BinomialDecoder",
    "SumProtocol",
    "AUTO_BITS_ROUNDING_SHARE_SUM",
]

#: ``bits="auto"`` of :class:`DDGVectors`: the rounding variance n·γ²/4 of the sum may be at
#: most this share of its privacy-noise variance n·σ² (the rule of the tree protocol's
#: ``bits="auto"``, applied to one sum).
AUTO_BITS_ROUNDING_SHARE_SUM = 0.01


# ---------------------------------------------------------------------------------------
# Randomizers
# ---------------------------------------------------------------------------------------


class _SumRandomizer(Randomizer):
    """Shared plumbing: the protocol calls configure(p), reset(p, rng), encode(p, x, rng), event(p, relation)."""

    def configure(self, protocol: SumProtocol) -> None:
        pass

    def reset(self, protocol: SumProtocol, rng) -> None:
        pass

    def encode(self, protocol: SumProtocol, x: np.ndarray, rng) -> np.ndarray:  # pragma: no cover - overridden
        raise NotImplementedError

    def calibration(self) -> dict:
        return {}


class ExactVectors(_SumRandomizer):
    """R that sends the party's vector as it is (no privacy, no clipping)."""

    name: ClassVar[str] = "exact-vectors"
    message: ClassVar[str] = "exact"

    def describe(self) -> str:
        return "send the vector as it is"

    def encode(self, protocol, x, rng):
        return x


class ClippedVectors(_SumRandomizer):
    """R of the central model: send the vector clipped to ℓ2 norm c (:func:`fedbandit.mechanisms.ddg.clip_l2`).

    The vector reaches a trusted server in the clear; clipping bounds one party's
    contribution to the sum (the sensitivity c), the server's noise does the rest.
    """

    name: ClassVar[str] = "clipped-vectors"
    message: ClassVar[str] = "exact"

    def describe(self) -> str:
        return "send the vector clipped to ℓ2 norm c (in the clear, to a trusted server)"

    def configure(self, protocol):
        if protocol.clip is None:
            raise ValueError("randomizer 'clipped-vectors' needs clip, the ℓ2 clipping norm c")

    def encode(self, protocol, x, rng):
        from fedbandit.mechanisms.ddg import clip_l2

        return clip_l2(x, protocol.clip)


def _require_target_and_clip(name: str, protocol) -> None:
    """A modular-integer randomizer calibrates its noise for a target and clips to c: both needed."""
    if not protocol.private:
        raise ValueError(f"randomizer {name!r} needs a target (epsilon, delta)")
    if protocol.clip is None:
        raise ValueError(f"randomizer {name!r} needs clip, the ℓ2 clipping norm c")


def _check_aggregation_width(bits: int, n_parties: int) -> None:
    """The sum of n_parties residues of ``bits`` bits must fit the int64 aggregation."""
    if bits + math.log2(n_parties) > 62:
        raise ValueError(f"bits={bits} with n_parties={n_parties} overflows the 64-bit integer aggregation; use fewer bits")


class DDGVectors(_SumRandomizer):
    r"""R of the distributed discrete Gaussian [KLS21]_ Alg. 1: each party's vector into integers mod 2^B.

    Clip to norm c, flatten by the shared random rotation, scale by 1/γ, round
    conditionally (norm ≤ Δ₂/γ), add :math:`\mathcal N_{\mathbb Z}(0, \sigma^2/\gamma^2)` and
    reduce mod m = 2^B (:meth:`fedbandit.mechanisms.ddg.DDGMechanism.encode`).  γ and the
    per-party σ: :func:`fedbandit.accounting.ddg.ddg_params` for n parties, the (padded)
    dimension, c, the target (ε, δ) and ``steps`` = the rounds.

    Parameters
    ----------
    bits : int or "auto", default 16
        Bits per coordinate B.  ``"auto"``: the smallest even width whose rounding variance
        n·γ²/4 is at most :data:`AUTO_BITS_ROUNDING_SHARE_SUM` of the privacy-noise
        variance n·σ² [reconstruction: the book's rule, as for the tree protocol; [KLS21]_
        pick B by experiment] (``method="rdp"`` only).
    k : float, default 3
        Standard deviations of an aggregate coordinate covered by the modular range.
    beta : float, default e^{−1/2}
        Conditional rounding parameter.
    flatten : {"hadamard", "dft"}
    norm_growth : {"conservative", "optimistic"}
        Signal term of the range condition: ‖Σ x_i‖ ≤ n c, or ≈ sqrt(n) c.
    method : {"rdp", "zcdp"}
        Accounting used to *calibrate* σ (Prop. 14 or Thm. 1 of [KLS21]_); the reported
        guarantee is always the Prop. 14 (RDP) one, which is at least as tight.
    flatten_seed : int or None, default None
        Public randomness of the rotation: a fixed seed (one rotation for every run), or
        None to draw fresh rotations from the generator at every :meth:`SumProtocol.reset`,
        one per run (the runs are independent executions).
    """

    name: ClassVar[str] = "ddg-vectors"
    message: ClassVar[str] = "integer"
    private_alone: ClassVar[bool] = False

    def __init__(self, *, bits=16, k=3.0, beta=DEFAULT_BETA, flatten="hadamard", norm_growth="conservative",
                 method="rdp", flatten_seed=None):
        self.bits_rule = "auto" if isinstance(bits, str) and bits == "auto" else check_int_in_range("bits", bits, 2, 62)
        self.k_std = check_positive_float("k", k)
        self.beta = check_float_in_range("beta", beta, 0.0, 1.0, high_inclusive=False)
        self.flatten = check_choice("flatten", flatten, ("hadamard", "dft"))
        self.norm_growth = check_choice("norm_growth", norm_growth, ("conservative", "optimistic"))
        self.method = check_choice("method", method, ("rdp", "zcdp"))
        if self.bits_rule == "auto" and self.method != "rdp":
            raise ValueError(f"bits='auto' calibrates with method='rdp', got method={method!r}")
        self.flatten_seed = None if flatten_seed is None else check_int_in_range("flatten_seed", flatten_seed, 0, None)
        self.mechanism = None

    def describe(self) -> str:
        return (
            "clip to c, flatten (shared rotation), scale by 1/γ, round conditionally (norm ≤ Δ₂/γ), add discrete "
            "Gaussian N_Z(0, σ²/γ²), reduce mod 2^bits"
        )

    def configure(self, protocol):
        from fedbandit.accounting.ddg import ddg_params, ddg_tree_params
        from fedbandit.mechanisms.ddg import DDGMechanism

        p = protocol
        _require_target_and_clip(self.name, p)
        if self.bits_rule == "auto" and p.sampling_rate < 1.0:
            raise ValueError(f"bits='auto' does not support client sampling (sampling_rate={p.sampling_rate}); "
                             "pass bits explicitly")
        if self.bits_rule == "auto":
            self.params = ddg_tree_params(
                "auto", k=self.k_std, n_parties=p.n_parties, n_agents=p.n_parties, dim=p.dim, clip=p.clip,
                epsilon=p.target_epsilon, delta=p.target_delta, beta=self.beta, norm_growth=self.norm_growth,
                flatten=self.flatten, steps=p.n_rounds, n_signal=p.n_parties,
                rounding_share=AUTO_BITS_ROUNDING_SHARE_SUM,
            )
        elif p.sampling == "poisson" and p.sampling_rate < 1.0:
            if p.relation != "add-remove":
                raise ValueError(f"randomizer {self.name!r} with sampling='poisson' is calibrated for one client added or "
                                 f"removed: configure relation='add-remove', got {p.relation!r}")
            from fedbandit.accounting.sampled_ddg import noise_shares_for

            # K noise shares dealt over each round's clients; the range condition counts the expected clients
            shares = noise_shares_for(p.sampling_rate, p.n_parties, p.n_rounds, p.target_delta)
            self.params = ddg_params(
                self.bits_rule, self.k_std, shares, p.dim, p.clip, p.target_epsilon, p.target_delta, self.beta,
                norm_growth=self.norm_growth, flatten=self.flatten, method=self.method, steps=p.n_rounds,
                n_signal=max(1, round(p.sampling_rate * p.n_parties)), sampling_rate=p.sampling_rate,
                amplification="poisson", sampling="poisson", population=p.n_parties,
            )
        else:
            self.params = ddg_params(
                self.bits_rule, self.k_std, p.n_parties, p.dim, p.clip, p.target_epsilon, p.target_delta, self.beta,
                norm_growth=self.norm_growth, flatten=self.flatten, method=self.method, steps=p.n_rounds,
                sampling_rate=p.sampling_rate, amplification=amplification_for(p.relation),
            )
        self.bits = self.params.bits
        _check_aggregation_width(self.bits, p.n_parties)
        if getattr(p.intermediary, "mode", "ideal") == "real" and p.n_parties < 2:
            raise ValueError(f"secure aggregation mode='real' needs n_parties >= 2, got {p.n_parties}")
        self.mechanism = None if self.flatten_seed is None else DDGMechanism(self.params, self.flatten_seed)

    def reset(self, protocol, rng):
        from fedbandit.mechanisms.ddg import DDGMechanism

        if self.flatten_seed is None:  # fresh public rotations, one per run, drawn from the protocol's generator
            self.mechanism = DDGMechanism(self.params, rng, runs=protocol.n_runs)
        self.wrapped = 0
        self.coordinates = 0

    def _count_wraps(self, noised: np.ndarray) -> None:
        # Simulation diagnostic (the server never sees it): aggregate coordinates that leave
        # [-m/2, m/2) before the modular reduction, i.e. wrap around.
        int_sum = noised.sum(axis=-2)
        half = self.params.modulus // 2
        self.wrapped += int(np.count_nonzero((int_sum < -half) | (int_sum >= half)))
        self.coordinates += int_sum.size

    def encode(self, protocol, x, rng):
        residues, stages = self.mechanism.encode(x, rng, stages=True)
        self._count_wraps(stages["noised"])
        return residues

    def encode_sample(self, protocol, x, mask, rng) -> np.ndarray:
        """A Poisson round: the residues of the clients in ``mask`` (R, n), the K noise shares dealt over each run's k.

        Returns (R, max k, d') residues, the rows past a run's k zero (no message): the sum
        over the rows is the run's modular sum of its k messages.
        """
        counts = mask.sum(axis=1)
        out = np.zeros((x.shape[0], max(1, int(counts.max())), self.params.d_pad), dtype=np.int64)
        per_run = self.flatten_seed is None
        for r in range(x.shape[0]):
            present = np.flatnonzero(mask[r])
            if present.size == 0:  # nobody joined: no message, the sum is 0
                continue
            residues, stages = self.mechanism.encode(x[r, present], rng, stages=True,
                                                     noise_shares=self.params.noise_shares(present.size),
                                                     run=r if per_run else None)
            self._count_wraps(stages["noised"])
            out[r, : present.size] = residues
        return out

    def sampled_epsilon(self, protocol, relation) -> float:
        """ε of the T rounds on q-samples under ``relation`` (:func:`fedbandit.accounting.ddg.ddg_epsilon`)."""
        from fedbandit.accounting.ddg import ddg_epsilon

        p, q = protocol, self.params
        return ddg_epsilon(q.sigma, c=p.clip, gamma=q.gamma, beta=q.beta, n=p.n_parties, d=q.d_pad,
                           delta=p.target_delta, steps=p.n_rounds, sampling_rate=p.sampling_rate,
                           amplification=amplification_for(relation))

    def sampled_event(self, protocol) -> SelfComposedEvent:
        """Poisson rounds, one client added or removed: the T rounds of a :class:`SampledDiscreteGaussianSumEvent`."""
        p, q = protocol, self.params
        e = SampledDiscreteGaussianSumEvent(clip=p.clip, gamma=q.gamma, beta=q.beta, dim=q.d_pad,
                                            noise_std=math.sqrt(q.n) * q.sigma, sampling_rate=p.sampling_rate,
                                            population=p.n_parties, shares=q.n)
        return SelfComposedEvent(e, p.n_rounds)

    def replace_event(self, protocol) -> ApproxDpEvent:
        """Poisson rounds, one client's data replaced: two add/remove steps (group privacy).

        (ε₁, δ₁) for adding or removing one client gives (2ε₁, (1 + e^{ε₁})δ₁) for replacing
        one (remove it, then add the other); δ₁ is chosen so that the total is the target δ.
        """
        from fedbandit.accounting.accountant import account

        p = protocol
        event = self.sampled_event(p)
        eps1 = 0.0
        for _ in range(3):  # δ₁ = δ/(1 + e^{ε₁}): a fixed point that settles in a few steps
            delta1 = p.target_delta / (1.0 + math.exp(min(eps1, 700.0)))
            eps1 = account(event, target_epsilon=p.target_epsilon, target_delta=delta1).epsilon
        delta1 = p.target_delta / (1.0 + math.exp(min(eps1, 700.0)))
        eps1 = account(event, target_epsilon=p.target_epsilon, target_delta=delta1).epsilon
        return ApproxDpEvent(2.0 * eps1, (1.0 + math.exp(min(eps1, 700.0))) * delta1,
                             what=f"one client replaced = removed and another added: twice ({eps1:.4g}, {delta1:.3g}) "
                                  f"of {event.describe()} (group privacy)")

    def event(self, protocol, relation):
        p, q = protocol, self.params
        # One party's rounded vector has norm ≤ Δ₂ (conditional rounding).  Replacing it by
        # another moves the sum by ≤ 2Δ₂; the event is stated with clip 2Δ₂, whose Δ₂ bound
        # is ≥ 2Δ₂ (conservative).
        clip = p.clip if relation == "add-remove" else 2.0 * ddg_delta2(p.clip, q.gamma, q.d_pad, q.beta)
        e = DiscreteGaussianSumEvent(clip=clip, gamma=q.gamma, beta=q.beta, dim=q.d_pad, sigma=q.sigma,
                                     n_parties=p.n_parties)
        return SelfComposedEvent(e, p.n_rounds)

    def calibration(self):
        q = self.params
        # the rounded vectors of a round: the n parties, or a Poisson round's expected number (q.n counts the shares)
        rounded = q.n if q.sampling != "poisson" else q.sampling_rate * q.population
        out = {"sigma0": q.sigma, "bits": q.bits, "gamma": q.gamma, "sigma_int": q.sigma_int, "delta2": q.delta2,
               "d_pad": q.d_pad, "k": q.k, "modulus": q.modulus, "rounding_variance": rounded * q.gamma**2 / 4.0}
        if q.sampling == "poisson":
            out["noise_shares"] = q.n
        return out


class BinomialVectors(_SumRandomizer):
    r"""R of the distributed binomial mechanism (cpSGD, Agarwal et al. 2018): each party's vector into integers mod 2^B.

    Clip to norm c, flatten by the shared rotation, scale by 1/s, round unconditionally, add
    :math:`\mathrm{Bin}(N_i, p)` per coordinate and reduce mod 2^B
    (:class:`fedbandit.mechanisms.binomial.BinomialMechanism`); s and :math:`N_i` from
    :func:`fedbandit.accounting.binomial.binomial_params` for the target (ε, δ) over the rounds.

    Parameters
    ----------
    bits : int, default 16
    k : float, default 3
        Standard deviations of an aggregate coordinate covered by the modular range.
    p : float, default 0.5
        The binomial's success probability.
    flatten : {"hadamard", "dft"}
    norm_growth : {"conservative", "optimistic"}
    flatten_seed : int or None
    """

    name: ClassVar[str] = "binomial-vectors"
    message: ClassVar[str] = "integer"
    private_alone: ClassVar[bool] = False

    def __init__(self, *, bits=16, k=3.0, p=0.5, flatten="hadamard", norm_growth="conservative", flatten_seed=None):
        self.bits = check_int_in_range("bits", bits, 2, 62)
        self.k_std = check_positive_float("k", k)
        self.p = check_float_in_range("p", p, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
        self.flatten = check_choice("flatten", flatten, ("hadamard", "dft"))
        self.norm_growth = check_choice("norm_growth", norm_growth, ("conservative", "optimistic"))
        self.flatten_seed = None if flatten_seed is None else check_int_in_range("flatten_seed", flatten_seed, 0, None)
        self.mechanism = None

    def describe(self) -> str:
        return "clip to c, flatten (shared rotation), scale by 1/s, round, add Bin(N_i, p), reduce mod 2^bits"

    def configure(self, protocol):
        from fedbandit.accounting.binomial import binomial_params
        from fedbandit.mechanisms.binomial import BinomialMechanism

        p = protocol
        _require_target_and_clip(self.name, p)
        _check_aggregation_width(self.bits, p.n_parties)  # the bits are fixed: refuse before the search
        self.params = binomial_params(self.bits, self.k_std, p.n_parties, p.dim, p.clip, p.target_epsilon,
                                      p.target_delta, p=self.p, steps=p.n_rounds, sampling_rate=p.sampling_rate,
                                      relation=p.relation, norm_growth=self.norm_growth, flatten=self.flatten)
        self.mechanism = None if self.flatten_seed is None else BinomialMechanism(self.params, self.flatten_seed,
                                                                                  self.flatten)

    def reset(self, protocol, rng):
        from fedbandit.mechanisms.binomial import BinomialMechanism

        if self.flatten_seed is None:
            self.mechanism = BinomialMechanism(self.params, rng, self.flatten)

    def encode(self, protocol, x, rng):
        return self.mechanism.encode(x, rng)

    def run_epsilon(self, protocol, relation) -> float:
        """ε of the whole run under ``relation`` (per-round [ASYKM18] Thm. 1, amplification, composition)."""
        from fedbandit.accounting.binomial import (
            binomial_run_epsilon,
            binomial_sensitivities,
            cpsgd_epsilon,
        )
        from fedbandit.accounting.binomial import split_delta as _split_delta

        p, q = protocol, self.params
        delta0, slack = _split_delta(p.target_delta, p.n_rounds, p.sampling_rate)
        sens = binomial_sensitivities(p.clip, q.scale, q.d_pad, relation)
        eps0 = cpsgd_epsilon(p.n_parties * q.trials_per_client, q.p, q.scale, q.d_pad, delta0, sens)
        return binomial_run_epsilon(eps0, delta0, p.n_rounds, p.sampling_rate, slack)

    def calibration(self):
        q = self.params
        return {"sigma0": q.sigma, "bits": q.bits, "scale": q.scale, "trials_per_client": q.trials_per_client,
                "binomial_p": q.p, "eps_round": q.eps_round, "delta_round": q.delta_round, "d_pad": q.d_pad,
                "k": q.k, "modulus": q.modulus, "rounding_variance": q.n * q.scale**2 / 4.0}


# ---------------------------------------------------------------------------------------
# Analyzers
# ---------------------------------------------------------------------------------------


class _SumAnalyzer(Analyzer):
    """Shared plumbing: ``analyze(p, delivered, rng, return_noise)`` gets what the intermediary delivered --
    the messages with the senders on axis 1 (identity), or their sum (secure aggregation)."""

    def configure(self, protocol: SumProtocol) -> None:
        pass

    @staticmethod
    def total(protocol: SumProtocol, delivered: np.ndarray) -> np.ndarray:
        """The sum over the parties of the delivered messages: (n_runs, dim)."""
        return delivered if protocol.intermediary.view == "sum" else delivered.sum(axis=1)

    def analyze(self, protocol: SumProtocol, delivered: np.ndarray, rng, return_noise: bool):  # pragma: no cover
        raise NotImplementedError


class PlainSum(_SumAnalyzer):
    """A: add up the delivered messages (senders on axis 1)."""

    name: ClassVar[str] = "plain-sum"

    def describe(self) -> str:
        return "the exact sum of the messages"

    def analyze(self, protocol, delivered, rng, return_noise):
        total = self.total(protocol, delivered)
        return (total, np.zeros_like(total)) if return_noise else total


class GaussianSum(_SumAnalyzer):
    """A of the central model: the trusted server adds N(0, σ²) per coordinate to the sum of the clipped vectors.

    Parameters
    ----------
    calibration : {"analytic", "zcdp"}, default "analytic"
        The σ rule (:func:`fedbandit.accounting.composed_gaussian.composed_gaussian_sigma`):
        exact (Balle & Wang's analytic Gaussian at sensitivity c√T, [KLS21]_'s baseline), or
        through zCDP.
    """

    name: ClassVar[str] = "gaussian-sum"

    def __init__(self, calibration: str = "analytic"):
        self.calibration_rule = check_choice("calibration", calibration, COMPOSED_GAUSSIAN_CALIBRATIONS)

    def describe(self) -> str:
        return f"sum of the clipped vectors plus N(0, σ²) per coordinate, σ by the {self.calibration_rule!r} rule"

    def configure(self, protocol):
        p = protocol
        if not p.private:
            raise ValueError("analyzer 'gaussian-sum' needs a target (epsilon, delta)")
        if p.sampling_rate < 1.0:  # the subsampled Gaussian, RDP [MTZ19] / [WBK19] (its own rule)
            from fedbandit.accounting.subsampling import sampled_gaussian_noise_multiplier

            sens = p.clip if p.relation == "add-remove" else 2.0 * p.clip
            self.sigma = sens * sampled_gaussian_noise_multiplier(
                p.target_epsilon, p.target_delta, p.sampling_rate, p.n_rounds, amplification_for(p.relation))
        else:
            self.sigma = composed_gaussian_sigma(p.target_epsilon, p.target_delta, p.clip, p.n_rounds,
                                                 calibration=self.calibration_rule)

    def analyze(self, protocol, delivered, rng, return_noise):
        from fedbandit.mechanisms.gaussian import gaussian_mechanism

        return gaussian_mechanism(self.total(protocol, delivered), self.sigma, rng, return_noise=return_noise)


class DDGDecoder(_SumAnalyzer):
    """A of the distributed discrete Gaussian: modular clipping to [−m/2, m/2), unflatten, rescale by γ."""

    name: ClassVar[str] = "ddg-decoder"

    def describe(self) -> str:
        return "map the modular sum to [−m/2, m/2), undo the rotation, multiply by γ"

    def analyze(self, protocol, delivered, rng, return_noise):
        if return_noise:
            raise ValueError(
                "return_noise=True: the error of the distributed discrete Gaussian is not an additive noise of the "
                "server (it mixes every party's rounding and noise, and modular wrap-around)"
            )
        return protocol.randomizer.mechanism.decode(delivered)


class BinomialDecoder(_SumAnalyzer):
    """A of the distributed binomial mechanism: minus the noise mean n·N_i·p, modular clipping, unflatten, rescale."""

    name: ClassVar[str] = "binomial-decoder"

    def describe(self) -> str:
        return "subtract the binomial mean, map the modular sum to [−m/2, m/2), undo the rotation, multiply by s"

    def analyze(self, protocol, delivered, rng, return_noise):
        if return_noise:
            raise ValueError("return_noise=True: the binomial mechanism's error is not an additive server noise")
        return protocol.randomizer.mechanism.decode(delivered, protocol.n_parties)


# ---------------------------------------------------------------------------------------
# The protocol
# ---------------------------------------------------------------------------------------


class SumProtocol(Protocol):
    """A sum protocol P = (R, S, A): one private vector sum over n parties per round, T rounds.

    Parameters
    ----------
    randomizer : ExactVectors, ClippedVectors or DDGVectors
    intermediary : Identity or SecureAggregation
    analyzer : PlainSum, GaussianSum or DDGDecoder
    name : str
    epsilon, delta : float or None
        Target of the whole run (all T rounds); None for the non-private protocol.
    relation : {"add-remove", "replace"}, default "add-remove"
        See the module documentation.
    """

    kind: ClassVar[str] = "sum"

    def __init__(self, randomizer, intermediary, analyzer, *, name, epsilon=None, delta=None, relation="add-remove"):
        super().__init__(randomizer, intermediary, analyzer, name=name, epsilon=epsilon, delta=delta, relation=relation)
        if not isinstance(randomizer, _SumRandomizer):
            raise TypeError(f"randomizer {randomizer.name!r} is not a sum randomizer")
        if not isinstance(analyzer, _SumAnalyzer):
            raise TypeError(f"analyzer {analyzer.name!r} is not a sum analyzer")
        if not isinstance(intermediary, (Identity, SecureAggregation)):
            raise ValueError(
                f"randomizer {randomizer.name!r} with intermediary {intermediary.name!r}: a sum protocol's server "
                "receives the messages with their senders (identity) or only their sum (secure aggregation)"
            )
        if isinstance(randomizer, BinomialVectors) != isinstance(analyzer, BinomialDecoder):
            raise ValueError(
                f"randomizer {randomizer.name!r} with analyzer {analyzer.name!r}: binomial residues go to the binomial "
                "decoder, and only they do"
            )
        if isinstance(randomizer, BinomialVectors) and intermediary.view != "sum":
            raise ValueError(
                f"randomizer 'binomial-vectors' with intermediary {intermediary.name!r}: each party's noise share is "
                "calibrated for the sum of all n parties, so only secure aggregation may deliver its messages"
            )
        ddg = isinstance(randomizer, DDGVectors)
        if ddg != isinstance(analyzer, DDGDecoder):
            raise ValueError(
                f"randomizer {randomizer.name!r} with analyzer {analyzer.name!r}: DDG residues go to the DDG decoder, "
                "and only they do"
            )
        if ddg and intermediary.view != "sum":
            raise ValueError(
                f"randomizer 'ddg-vectors' with intermediary {intermediary.name!r}: each party's noise share is "
                "calibrated for the sum of all n parties, so only secure aggregation may deliver its messages"
            )
        if isinstance(analyzer, GaussianSum) and not isinstance(randomizer, ClippedVectors):
            raise ValueError(
                f"analyzer 'gaussian-sum' with randomizer {randomizer.name!r}: the server's noise is calibrated for "
                "clipped vectors (sensitivity c); use 'clipped-vectors'"
            )
        if isinstance(randomizer, (ExactVectors, ClippedVectors)) and isinstance(analyzer, PlainSum) and self.private:
            raise ValueError(f"randomizer {randomizer.name!r} with analyzer 'plain-sum' is not private: omit epsilon and delta")
        if not self.private and not isinstance(analyzer, PlainSum):
            raise ValueError(f"analyzer {analyzer.name!r} needs a target (epsilon, delta)")

    # ------------------------------------------------------------ configuration
    @property
    def model(self) -> str:
        if isinstance(self.analyzer, GaussianSum):
            return "central"
        if isinstance(self.analyzer, PlainSum):
            return "none"
        return "distributed"

    @property
    def trusted(self) -> str:
        if isinstance(self.analyzer, GaussianSum):
            return "the server"
        if isinstance(self.analyzer, PlainSum):
            return "everyone (no privacy)"
        return self.intermediary.trusted

    def configure(self, *, n_parties, dim, n_rounds=1, clip=None, sampling_rate=1.0, sampling="fixed"):
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
            (the vectors of the absent ones are masked out, :meth:`aggregate`).
        """
        self.n_parties = check_positive_int("n_parties", n_parties, max_value=MAX_STEPS, reason="one row per party")
        self.dim = check_positive_int("dim", dim, max_value=MAX_STEPS, reason="vectors of dim entries")
        self.n_rounds = check_positive_int("n_rounds", n_rounds, max_value=MAX_STEPS, reason="rounds are composed")
        self.clip = None if clip is None else check_positive_float("clip", clip)
        self.sampling_rate = check_float_in_range("sampling_rate", sampling_rate, 0.0, 1.0, low_inclusive=False)
        self.sampling = check_choice("sampling", sampling, SAMPLING_SCHEMES)
        if isinstance(self.randomizer, BinomialVectors) and self.sampling == "poisson" and self.sampling_rate < 1.0:
            raise ValueError(
                f"sampling='poisson' with randomizer {self.randomizer.name!r}: each party's noise share is calibrated "
                "for exactly n_parties shares in the sum, and a Poisson sample has a random number of parties; "
                "use sampling='fixed'"
            )
        if (isinstance(self.randomizer, DDGVectors) and self.sampling == "poisson" and self.sampling_rate < 1.0
                and getattr(self.intermediary, "mode", "ideal") == "real"):
            raise ValueError("sampling='poisson' with secure_aggregation='real': the simulated Poisson rounds use the "
                             "ideal modular sum of the clients that joined; use secure_aggregation='ideal'")
        self._configure_parts(f"n_parties={self.n_parties}, dim={self.dim}, n_rounds={self.n_rounds}, clip={self.clip}")
        self._configured = True
        self._reset_done = False
        return self

    def reset(self, *, n_runs, rng):
        """Allocate ``n_runs`` independent runs; the noise is drawn from ``rng`` itself (see the module docstring)."""
        self._require()
        self.n_runs = check_positive_int("n_runs", n_runs)
        rng = check_rng("rng", rng)
        self._noise_rng = rng
        self._shuffle_rng = None
        unit = "bits" if isinstance(self.randomizer, (DDGVectors, BinomialVectors)) else "floats"
        self.communication = Communication(payload_unit=unit)
        self._round = 0
        self.randomizer.reset(self, rng)
        self._reset_done = True
        return self

    # ------------------------------------------------------------ the release
    def aggregate(self, vectors, *, return_noise: bool = False, mask=None):
        """One round: the server's noisy sum of the parties' vectors.

        Parameters
        ----------
        vectors : array_like, shape (n_parties, dim) or (n_runs, n_parties, dim)
        mask : array_like of bool, shape (n_parties,) or (n_runs, n_parties), optional
            The parties that take part in this round (a Poisson sample); the others send
            nothing (their vectors count as zero).  Not for the binomial mechanism (a fixed
            number of noise shares); DDG configured with ``sampling="poisson"`` needs it: the
            K noise shares are dealt over the k that take part (:meth:`DDGVectors.encode_sample`).
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
        sampled_ddg = isinstance(self.randomizer, DDGVectors) and self.randomizer.params.sampling == "poisson"
        if mask is not None:
            if self.randomizer.message == "integer" and not sampled_ddg:
                raise ValueError(f"mask: protocol {self.name!r} adds a noise share per party calibrated for all of them; "
                                 "every party takes part (DDG: configure sampling='poisson')")
            mask = np.asarray(mask)
            if mask.dtype != bool:
                raise TypeError(f"mask must be a boolean array, got dtype {mask.dtype}")
            if mask.shape not in ((n,), (R, n)):
                raise ValueError(f"mask must have shape (n_parties,) = {(n,)} or (n_runs, n_parties) = {(R, n)}, "
                                 f"got {mask.shape}")
            mask = np.broadcast_to(mask[None] if mask.ndim == 1 else mask, (R, n))
        elif sampled_ddg:
            raise ValueError(f"protocol {self.name!r} was configured for Poisson rounds: pass mask, the clients that "
                             "joined this round")
        if self._round >= self.n_rounds:
            raise ValueError(
                f"protocol {self.name!r} was configured for n_rounds={self.n_rounds} sums; its guarantee covers no more"
            )
        self._round += 1
        rng = self._noise_rng
        if sampled_ddg:
            messages = self.randomizer.encode_sample(self, x, mask, rng)
        elif mask is not None:  # the absent parties send nothing (a zero row); only those present are encoded
            messages = np.zeros_like(x)
            messages[mask] = self.randomizer.encode(self, x[mask], rng)
        else:
            messages = self.randomizer.encode(self, x, rng)
        modulus = self.randomizer.params.modulus if self.randomizer.message == "integer" else None
        delivered = self.intermediary.deliver(messages, rng, modulus=modulus)
        out = self.analyzer.analyze(self, delivered, rng, return_noise)
        c = self.communication
        c.rounds += 1
        senders = n if mask is None else float(mask.sum()) / R
        c.messages += senders
        c.payload += float(senders) * (self.randomizer.params.d_pad * self.randomizer.bits
                                       if self.randomizer.message == "integer" else d)
        if single:
            return (out[0][0], out[1][0]) if return_noise else out[0]
        return out

    # ------------------------------------------------------------ privacy
    def event(self, relation=None):
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
        if isinstance(self.analyzer, PlainSum):
            what = "the exact sum" if self.intermediary.view == "sum" else "every party's exact vector"
            return NonPrivateEvent(f"the server sees {what}")
        if self.sampling_rate < 1.0 or isinstance(self.randomizer, BinomialVectors):
            return self._sampled_event(relation)
        if isinstance(self.analyzer, GaussianSum):
            composed = self.gaussian_event(relation)
            eps = exact_gaussian_epsilon(composed, self.target_delta)
            return ApproxDpEvent(eps, self.target_delta,
                                 what=f"{composed.describe()}: one Gaussian mechanism, exact profile [BW18, Thm. 8]")
        return self.randomizer.event(self, relation)

    def _sampled_event(self, relation: str):
        """The T rounds on q-samples (or the binomial's (ε, δ) accounting), for an analyst who does not see the sample.

        The guarantee is proven for Poisson sampling with add/remove and for fixed-size
        sampling with replace-one (:data:`fedbandit.accounting.subsampling.SAMPLING_RELATIONS`);
        another pairing is reported with status "unproven".
        """
        from fedbandit.accounting.subsampling import SAMPLING_RELATIONS, sampled_gaussian_epsilon

        q, T, delta = self.sampling_rate, self.n_rounds, self.target_delta
        bound = {"poisson": "Poisson subsampling", "without-replacement": "sampling without replacement"}[
            amplification_for(relation)]
        if isinstance(self.analyzer, GaussianSum):
            sens = self.clip if relation == "add-remove" else 2.0 * self.clip
            eps = sampled_gaussian_epsilon(self.analyzer.sigma / sens, q, T, delta, amplification_for(relation))
            what = (f"{T} rounds of the sampled Gaussian (q={q:.4g}, z={self.analyzer.sigma / sens:.4g}), "
                    f"RDP by {bound} [MTZ19; WBK19]")
        elif isinstance(self.randomizer, DDGVectors) and self.sampling == "poisson":
            # add/remove: the sampled Gaussian that dominates the rounds; replace: two such steps
            return self.randomizer.sampled_event(self) if relation == "add-remove" else self.randomizer.replace_event(self)
        elif isinstance(self.randomizer, DDGVectors):
            eps = self.randomizer.sampled_epsilon(self, relation)
            what = (f"{T} rounds of the sum of {self.n_parties} discrete Gaussians on q={q:.4g} samples, "
                    f"[KLS21] Prop. 14 with the generic RDP bound of {bound} [ZW19 Thm. 5; WBK19 Thm. 9]")
        else:
            eps = self.randomizer.run_epsilon(self, relation)
            what = (f"{T} rounds of the binomial mechanism [ASYKM18 Thm. 1]"
                    + (f", amplified by {bound} (q={q:.4g}) in (ε, δ)" if q < 1.0 else "")
                    + ", basic/advanced composition [DRV10]")
        event = ApproxDpEvent(eps, delta, what=what)
        if q == 1.0 or SAMPLING_RELATIONS[self.sampling] == relation:
            return event
        return ConditionalEvent(
            event, holds=False, on_failure="unproven",
            assumption=(f"the bound for {bound} is applied to {self.sampling} sampling under the {relation} relation, "
                        "as [KLS21] do; no theorem covers that pairing"),
        )

    def gaussian_event(self, relation=None) -> SelfComposedEvent:
        """Central Gaussian only: the T Gaussian releases, ``SelfComposedEvent(GaussianEvent(Δ, σ), T)``.

        Δ = c for one party's vector added or removed, 2c for one replaced.
        """
        self._require()
        if not isinstance(self.analyzer, GaussianSum):
            raise TypeError(f"protocol {self.name!r} does not add Gaussian noise at the server")
        relation = self.relation if relation is None else check_relation(relation)
        sens = self.clip if relation == "add-remove" else 2.0 * self.clip
        return SelfComposedEvent(GaussianEvent(sens, self.analyzer.sigma), self.n_rounds)

    def theorem(self) -> str:
        if isinstance(self.analyzer, GaussianSum) and self.sampling_rate < 1.0:
            return (f"{self.n_rounds} rounds of the sampled Gaussian, RDP [MTZ19] (Poisson, add/remove) or [WBK19 Thm. 9] "
                    "(without replacement, replace-one), converted [CKS20]")
        if isinstance(self.analyzer, GaussianSum):
            return (f"central Gaussian, σ by the {self.analyzer.calibration_rule!r} rule; verified: {self.n_rounds} "
                    "Gaussian releases = one Gaussian mechanism at sensitivity c√T, exact profile [BW18, Thm. 8]")
        if isinstance(self.randomizer, DDGVectors) and self.sampling == "poisson" and self.sampling_rate < 1.0:
            return (f"Poisson-sampled sums of discrete Gaussian shares, dominated by the sampled Gaussian [KLS21 Thm. 11; "
                    f"MTZ19], RDP over {self.n_rounds} rounds, converted [CKS20]; SecAgg [BIK+17]")
        if isinstance(self.randomizer, DDGVectors):
            return (f"sum of {self.n_parties} discrete Gaussians [KLS21, Prop. 14], RDP over {self.n_rounds} rounds, "
                    "converted [CKS20]; SecAgg [BIK+17]")
        if isinstance(self.randomizer, BinomialVectors):
            return "distributed binomial mechanism [ASYKM18, Thm. 1], (ε, δ) composition; SecAgg [BIK+17]"
        return ""

    def bounds_note(self) -> str:
        if not self.private:
            return ""
        return f"for parties' vectors clipped to ℓ2 norm c = {self.clip:g}"

    # ------------------------------------------------------------ reports
    @property
    def bits_per_coordinate(self) -> int:
        """Bits one party sends per coordinate: B for DDG and the binomial mechanism, 64 for a float."""
        self._require()
        return self.randomizer.bits if self.randomizer.message == "integer" else 64

    def noise_std(self) -> float:
        """Standard deviation per coordinate of the privacy noise in the released sum (all parties).

        DDG: sqrt(n)·σ (the parties' discrete Gaussians; rounding and wrap-around come on top).
        """
        self._require()
        if isinstance(self.analyzer, GaussianSum):
            return self.analyzer.sigma
        if isinstance(self.randomizer, DDGVectors):  # n: the parties, or a Poisson round's expected number
            return math.sqrt(self.randomizer.params.n) * self.randomizer.params.sigma
        if isinstance(self.randomizer, BinomialVectors):
            return math.sqrt(self.n_parties) * self.randomizer.params.sigma
        return 0.0

    def wrap_fraction(self) -> float:
        """DDG only: the measured fraction of aggregate coordinates that wrapped around since the reset."""
        self._require(reset=True)
        r = self.randomizer
        if not isinstance(r, DDGVectors):
            raise TypeError(f"protocol {self.name!r} does not reduce modulo 2^bits")
        return r.wrapped / r.coordinates if r.coordinates else math.nan

    @property
    def params(self):
        """DDG only: the :class:`fedbandit.accounting.ddg.DDGParams` of the configured setting."""
        self._require()
        if not isinstance(self.randomizer, DDGVectors):
            raise TypeError(f"protocol {self.name!r} has no DDG parameters")
        return self.randomizer.params

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
        if isinstance(self.analyzer, GaussianSum):
            rule = self.analyzer.calibration_rule if self.sampling_rate == 1.0 else "subsampled-rdp"
            out.update(sigma0=self.analyzer.sigma, rule=rule)
        out.update(self.randomizer.calibration())
        return out


# ---------------------------------------------------------------------------------------
# Registered sum protocols
# ---------------------------------------------------------------------------------------

_KLS = "Kairouz, Liu & Steinke 2021"


@register("sum-non-private", kind="sum", summary="exact sum of the parties' vectors, no privacy", reference=_KLS)
def sum_non_private():
    return SumProtocol(ExactVectors(), Identity(), PlainSum(), name="sum-non-private")


@register("sum-central-gaussian", kind="sum", summary="trusted server: sum of clipped vectors + Gaussian noise",
          reference=f"{_KLS}, Sec. 6 baseline; Balle & Wang 2018")
def sum_central_gaussian(epsilon, delta, *, calibration="analytic", relation="add-remove"):
    return SumProtocol(ClippedVectors(), Identity(), GaussianSum(calibration), name="sum-central-gaussian",
                       epsilon=epsilon, delta=delta, relation=relation)


@register("sum-binomial-secagg", kind="sum", summary="distributed binomial mechanism (cpSGD) + secure aggregation",
          reference="Agarwal et al. 2018 (cpSGD), Thm. 1; Kairouz, Liu & Steinke 2021, Sec. 2 baseline")
def sum_binomial_secagg(epsilon, delta, *, bits=16, k=3.0, binomial_p=0.5, flatten="hadamard",
                        norm_growth="conservative", secure_aggregation="ideal", flatten_seed=None, relation="add-remove"):
    return SumProtocol(
        BinomialVectors(bits=bits, k=k, p=binomial_p, flatten=flatten, norm_growth=norm_growth,
                        flatten_seed=flatten_seed),
        SecureAggregation(secure_aggregation), BinomialDecoder(), name="sum-binomial-secagg", epsilon=epsilon,
        delta=delta, relation=relation,
    )


@register("sum-ddg-secagg", kind="sum", summary="distributed discrete Gaussian + secure aggregation",
          reference=f"{_KLS}, Alg. 1; Bonawitz et al. 2017")
def sum_ddg_secagg(epsilon, delta, *, bits=16, k=3.0, rounding_beta=DEFAULT_BETA, flatten="hadamard",
                   norm_growth="conservative", method="rdp", secure_aggregation="ideal", flatten_seed=None,
                   relation="add-remove"):
    return SumProtocol(
        DDGVectors(bits=bits, k=k, beta=rounding_beta, flatten=flatten, norm_growth=norm_growth, method=method,
                   flatten_seed=flatten_seed),
        SecureAggregation(secure_aggregation), DDGDecoder(), name="sum-ddg-secagg", epsilon=epsilon, delta=delta,
        relation=relation,
    )

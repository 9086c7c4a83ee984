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
(:mod:`fedbandit.accounting.sampled_ddg`, status "verified"); replace one: two such steps
(group privacy).  The binomial mechanism needs a fixed number of noise shares, so it refuses
Poisson sampling.

One file per part: :mod:`.exact_vectors`, :mod:`.clipped_vectors`, :mod:`.ddg_vectors`,
:mod:`.binomial_vectors`, :mod:`.plain_sum`, :mod:`.gaussian_sum`, :mod:`.ddg_decoder`,
:mod:`.binomial_decoder`; the abstract parts (:class:`SumRandomizer`, :class:`SumAnalyzer`) in
:mod:`.parts`, their frozen setting in :mod:`.setting`, the protocol in :mod:`.protocol` and the
registered compositions in :mod:`.catalog`.

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
fixed (one per run), then, per round, the rounding coins and the noise -- rather than from spawned
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

from fedbandit.protocols.sums import catalog as catalog  # registers the sum protocols
from fedbandit.protocols.sums.binomial_decoder import BinomialDecoder
from fedbandit.protocols.sums.binomial_vectors import BinomialVectors
from fedbandit.protocols.sums.clipped_vectors import ClippedVectors
from fedbandit.protocols.sums.ddg_decoder import DDGDecoder
from fedbandit.protocols.sums.ddg_vectors import AUTO_BITS_ROUNDING_SHARE_SUM, DDGVectors
from fedbandit.protocols.sums.exact_vectors import ExactVectors
from fedbandit.protocols.sums.gaussian_sum import GaussianSum
from fedbandit.protocols.sums.parts import ModularVectors, SumAnalyzer, SumNoise, SumRandomizer
from fedbandit.protocols.sums.plain_sum import PlainSum
from fedbandit.protocols.sums.protocol import SumProtocol
from fedbandit.protocols.sums.setting import SumSetting

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
    "SumSetting",
    "SumNoise",
    "SumRandomizer",
    "SumAnalyzer",
    "ModularVectors",
]

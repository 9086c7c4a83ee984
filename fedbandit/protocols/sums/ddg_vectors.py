"""R of the distributed discrete Gaussian (Kairouz, Liu & Steinke 2021, Alg. 1) for one vector sum per round."""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import numpy as np

from fedbandit._validation import check_choice, check_float_in_range, check_int_in_range, check_positive_float
from fedbandit.accounting.accountant import account
from fedbandit.accounting.ddg import DEFAULT_BETA, DDGParams, ddg_delta2, ddg_epsilon, ddg_params, ddg_tree_params
from fedbandit.accounting.events import (
    ApproxDpEvent,
    DiscreteGaussianSumEvent,
    DpEvent,
    SampledDiscreteGaussianSumEvent,
    SelfComposedEvent,
)
from fedbandit.accounting.sampled_ddg import noise_shares_for
from fedbandit.accounting.subsampling import amplification_for
from fedbandit.mechanisms.ddg import DDGMechanism
from fedbandit.protocols.sums.parts import ModularVectors, check_aggregation_width, require_target_and_clip
from fedbandit.protocols.sums.setting import SumSetting

__all__ = ["DDGVectors", "AUTO_BITS_ROUNDING_SHARE_SUM"]

#: ``bits="auto"`` of :class:`DDGVectors`: the rounding variance n·γ²/4 of the sum may be at
#: most this share of its privacy-noise variance n·σ² (the rule of the tree protocol's
#: ``bits="auto"``, applied to one sum).
AUTO_BITS_ROUNDING_SHARE_SUM = 0.01


class DDGVectors(ModularVectors):
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

    Notes
    -----
    Poisson rounds (``sampling="poisson"``, q < 1, one client added or removed): K noise
    shares of variance σ²/γ² (K = :func:`fedbandit.accounting.sampled_ddg.noise_shares_for`,
    an upper quantile of the number k that joins) are dealt over each round's k clients
    (:meth:`encode_sample`; a client with m of them adds N_Z(0, mσ²/γ²)), so that the sum's
    noise does not depend on k; accounted through the sampled Gaussian that dominates it
    (:class:`fedbandit.accounting.events.SampledDiscreteGaussianSumEvent`).
    """

    name: ClassVar[str] = "ddg-vectors"
    params: DDGParams

    def __init__(self, *, bits: int | str = 16, k: float = 3.0, beta: float = DEFAULT_BETA, flatten: str = "hadamard",
                 norm_growth: str = "conservative", method: str = "rdp", flatten_seed: int | None = None) -> None:
        self.bits_rule: int | str = "auto" if isinstance(bits, str) and bits == "auto" else check_int_in_range("bits", bits, 2, 62)
        self.k_std = check_positive_float("k", k)
        self.beta = check_float_in_range("beta", beta, 0.0, 1.0, high_inclusive=False)
        self.flatten = check_choice("flatten", flatten, ("hadamard", "dft"))
        self.norm_growth = check_choice("norm_growth", norm_growth, ("conservative", "optimistic"))
        self.method = check_choice("method", method, ("rdp", "zcdp"))
        if self.bits_rule == "auto" and self.method != "rdp":
            raise ValueError(f"bits='auto' calibrates with method='rdp', got method={method!r}")
        self.flatten_seed = None if flatten_seed is None else check_int_in_range("flatten_seed", flatten_seed, 0, None)
        self.mechanism: DDGMechanism | None = None

    def describe(self) -> str:
        return (
            "clip to c, flatten (shared rotation), scale by 1/γ, round conditionally (norm ≤ Δ₂/γ), add discrete "
            "Gaussian N_Z(0, σ²/γ²), reduce mod 2^bits"
        )

    def configure(self, setting: SumSetting) -> None:
        p = setting
        require_target_and_clip(self.name, p)
        epsilon, delta = p.target()
        clip = p.clip_norm()
        if self.bits_rule == "auto" and p.sampling_rate < 1.0:
            raise ValueError(f"bits='auto' does not support client sampling (sampling_rate={p.sampling_rate}); "
                             "pass bits explicitly")
        if self.bits_rule == "auto":
            self.params = ddg_tree_params(
                "auto", k=self.k_std, n_parties=p.n_parties, n_agents=p.n_parties, dim=p.dim, clip=clip,
                epsilon=epsilon, delta=delta, beta=self.beta, norm_growth=self.norm_growth,
                flatten=self.flatten, steps=p.n_rounds, n_signal=p.n_parties,
                rounding_share=AUTO_BITS_ROUNDING_SHARE_SUM,
            )
        elif p.sampling == "poisson" and p.sampling_rate < 1.0:
            assert isinstance(self.bits_rule, int)
            if p.relation != "add-remove":
                raise ValueError(f"randomizer {self.name!r} with sampling='poisson' is calibrated for one client added or "
                                 f"removed: configure relation='add-remove', got {p.relation!r}")
            # K noise shares dealt over each round's clients; the range condition counts the expected clients
            shares = noise_shares_for(p.sampling_rate, p.n_parties, p.n_rounds, delta)
            self.params = ddg_params(
                self.bits_rule, self.k_std, shares, p.dim, clip, epsilon, delta, self.beta,
                norm_growth=self.norm_growth, flatten=self.flatten, method=self.method, steps=p.n_rounds,
                n_signal=max(1, round(p.sampling_rate * p.n_parties)), sampling_rate=p.sampling_rate,
                amplification="poisson", sampling="poisson", population=p.n_parties,
            )
        else:
            assert isinstance(self.bits_rule, int)
            self.params = ddg_params(
                self.bits_rule, self.k_std, p.n_parties, p.dim, clip, epsilon, delta, self.beta,
                norm_growth=self.norm_growth, flatten=self.flatten, method=self.method, steps=p.n_rounds,
                sampling_rate=p.sampling_rate, amplification=amplification_for(p.relation),
            )
        self.bits = self.params.bits
        check_aggregation_width(self.bits, p.n_parties)
        self.mechanism = None if self.flatten_seed is None else DDGMechanism(self.params, self.flatten_seed)

    def reset(self, setting: SumSetting, n_runs: int, rng: np.random.Generator) -> None:
        if self.flatten_seed is None:  # fresh public rotations, one per run, drawn from the protocol's generator
            self.mechanism = DDGMechanism(self.params, rng, runs=n_runs)
        self.wrapped = 0
        self.coordinates = 0

    def _count_wraps(self, noised: np.ndarray) -> None:
        # Simulation diagnostic (the server never sees it): aggregate coordinates that leave
        # [-m/2, m/2) before the modular reduction, i.e. wrap around.
        int_sum = noised.sum(axis=-2)
        half = self.params.modulus // 2
        self.wrapped += int(np.count_nonzero((int_sum < -half) | (int_sum >= half)))
        self.coordinates += int_sum.size

    def encode(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        assert self.mechanism is not None  # drawn at reset
        residues, stages = self.mechanism.encode(x, rng, stages=True)
        self._count_wraps(stages["noised"])
        return residues

    def encode_sample(self, x: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A Poisson round: the residues of the clients in ``mask`` (R, n), the K noise shares dealt over each run's k.

        Returns (R, max k, d') residues, the rows past a run's k zero (no message): the sum
        over the rows is the run's modular sum of its k messages.  Every run's clients are
        encoded in one :meth:`~fedbandit.mechanisms.ddg.DDGMechanism.encode` call (each vector
        with its run's rotation and its dealt shares), so the draws are taken over all the
        runs' clients at once rather than a run at a time: the same law per run, another
        stream (``tests/test_sums.py::test_poisson_ddg_one_call_has_the_law_of_the_per_run_loop``).
        """
        assert self.mechanism is not None  # drawn at reset
        counts = mask.sum(axis=1)
        R = x.shape[0]
        out = np.zeros((R, max(1, int(counts.max())), self.params.d_pad), dtype=np.int64)
        runs, clients = np.nonzero(mask)  # run-major: each run's clients in order
        if runs.size == 0:  # nobody joined anywhere: no message, every sum is 0
            return out
        starts = np.cumsum(counts) - counts
        pos = np.arange(runs.size) - starts[runs]  # each client's place among its run's k
        k = counts[runs]
        shares = np.empty(runs.size, dtype=np.int64)
        for size in np.unique(k):  # each run's dealt shares (params.noise_shares), once per distinct number of clients
            rows = k == size
            shares[rows] = self.params.noise_shares(int(size))[pos[rows]]
        residues, stages = self.mechanism.encode(x[runs, clients], rng, stages=True, noise_shares=shares,
                                                 run=runs if self.flatten_seed is None else None)
        # wrap diagnostic per run that had messages (as _count_wraps on each run's (k, d') block)
        # (one integer sum per run's contiguous block: exact in any order, and ~20x faster than
        # np.add.reduceat along axis 0, which walks the (k, d') block column by column)
        noised = stages["noised"]
        int_sum = np.stack([noised[s:s + c].sum(axis=0) for s, c in zip(starts.tolist(), counts.tolist()) if c > 0])
        half = self.params.modulus // 2
        self.wrapped += int(np.count_nonzero((int_sum < -half) | (int_sum >= half)))
        self.coordinates += int_sum.size
        out[runs, pos] = residues
        return out

    def decode(self, delivered: np.ndarray) -> np.ndarray:
        """[KLS21] Alg. 1's decoder on the modular sum: modular clipping to [−m/2, m/2), inverse
        rotation, rescaling by γ."""
        assert self.mechanism is not None  # drawn at reset
        return self.mechanism.decode(delivered)

    def wrap_fraction(self) -> float:
        """The measured fraction of aggregate coordinates that wrapped around since the reset."""
        return self.wrapped / self.coordinates if self.coordinates else math.nan

    def sampled_epsilon(self, setting: SumSetting, relation: str) -> float:
        """ε of the T rounds on q-samples under ``relation`` (:func:`fedbandit.accounting.ddg.ddg_epsilon`)."""
        p, q = setting, self.params
        return ddg_epsilon(q.sigma, c=p.clip_norm(), gamma=q.gamma, beta=q.beta, n=p.n_parties, d=q.d_pad,
                           delta=p.target()[1], steps=p.n_rounds, sampling_rate=p.sampling_rate,
                           amplification=amplification_for(relation))

    def poisson_rounds(self, setting: SumSetting) -> bool:
        """Whether the noise shares are dealt over Poisson rounds' clients (:meth:`encode_sample`)."""
        return self.params.sampling == "poisson"

    def sampled_event(self, setting: SumSetting) -> SelfComposedEvent:
        """Poisson rounds, one client added or removed: the T rounds of a :class:`SampledDiscreteGaussianSumEvent`."""
        p, q = setting, self.params
        e = SampledDiscreteGaussianSumEvent(clip=p.clip_norm(), gamma=q.gamma, beta=q.beta, dim=q.d_pad,
                                            noise_std=math.sqrt(q.n) * q.sigma, sampling_rate=p.sampling_rate,
                                            population=p.n_parties, shares=q.n)
        return SelfComposedEvent(e, p.n_rounds)

    def replace_event(self, setting: SumSetting) -> ApproxDpEvent:
        """Poisson rounds, one client's data replaced: two add/remove steps (group privacy).

        (ε₁, δ₁) for adding or removing one client gives (2ε₁, (1 + e^{ε₁})δ₁) for replacing
        one (remove it, then add the other); δ₁ is chosen so that the total is the target δ.
        """
        epsilon, delta = setting.target()
        event = self.sampled_event(setting)
        eps1 = 0.0
        for _ in range(3):  # δ₁ = δ/(1 + e^{ε₁}): a fixed point that settles in a few steps
            delta1 = delta / (1.0 + math.exp(min(eps1, 700.0)))
            eps1 = account(event, target_epsilon=epsilon, target_delta=delta1).epsilon
        delta1 = delta / (1.0 + math.exp(min(eps1, 700.0)))
        eps1 = account(event, target_epsilon=epsilon, target_delta=delta1).epsilon
        return ApproxDpEvent(2.0 * eps1, (1.0 + math.exp(min(eps1, 700.0))) * delta1,
                             what=f"one client replaced = removed and another added: twice ({eps1:.4g}, {delta1:.3g}) "
                                  f"of {event.describe()} (group privacy)")

    def event(self, setting: SumSetting, relation: str) -> DpEvent:
        p, q = setting, self.params
        if self.poisson_rounds(p):
            # add/remove: the sampled Gaussian that dominates the rounds; replace: two such steps
            return self.sampled_event(p) if relation == "add-remove" else self.replace_event(p)
        if p.sampling_rate < 1.0:
            eps = self.sampled_epsilon(p, relation)
            return ApproxDpEvent(eps, p.target()[1], what=(
                f"{p.n_rounds} rounds of the sum of {p.n_parties} discrete Gaussians on q={p.sampling_rate:.4g} "
                f"samples, [KLS21] Prop. 14 with the generic RDP bound of {p.sampling_bound(relation)} [ZW19 Thm. 5; "
                "WBK19 Thm. 9]"))
        # One party's rounded vector has norm ≤ Δ₂ (conditional rounding).  Replacing it by
        # another moves the sum by ≤ 2Δ₂; the event is stated with clip 2Δ₂, whose Δ₂ bound
        # is ≥ 2Δ₂ (conservative).
        c = p.clip_norm()
        clip = c if relation == "add-remove" else 2.0 * ddg_delta2(c, q.gamma, q.d_pad, q.beta)
        e = DiscreteGaussianSumEvent(clip=clip, gamma=q.gamma, beta=q.beta, dim=q.d_pad, sigma=q.sigma,
                                     n_parties=p.n_parties)
        return SelfComposedEvent(e, p.n_rounds)

    def theorem(self, setting: SumSetting) -> str:
        if self.poisson_rounds(setting):
            return (f"Poisson-sampled sums of discrete Gaussian shares, dominated by the sampled Gaussian [KLS21 Thm. 11; "
                    f"MTZ19], RDP over {setting.n_rounds} rounds, converted [CKS20]; SecAgg [BIK+17]")
        return (f"sum of {setting.n_parties} discrete Gaussians [KLS21, Prop. 14], RDP over {setting.n_rounds} rounds, "
                "converted [CKS20]; SecAgg [BIK+17]")

    def noise_std(self, setting: SumSetting) -> float:
        """sqrt(n)·σ: the n noise shares -- the parties', or the K dealt over a Poisson round's clients
        (rounding and wrap-around come on top)."""
        return math.sqrt(self.params.n) * self.params.sigma

    def calibration(self, setting: SumSetting) -> dict:
        q = self.params
        # the rounded vectors of a round: the n parties, or a Poisson round's expected number (q.n counts the shares)
        rounded = q.n if q.sampling != "poisson" else q.sampling_rate * setting.n_parties
        out = {"sigma0": q.sigma, "bits": q.bits, "gamma": q.gamma, "sigma_int": q.sigma_int, "delta2": q.delta2,
               "d_pad": q.d_pad, "k": q.k, "modulus": q.modulus, "rounding_variance": rounded * q.gamma**2 / 4.0}
        if q.sampling == "poisson":
            out["noise_shares"] = q.n
        return out

    def scale_noise(self, factor: float) -> None:
        self.params = dataclasses.replace(self.params, sigma=self.params.sigma * factor)
        if self.flatten_seed is not None:
            self.mechanism = DDGMechanism(self.params, self.flatten_seed)

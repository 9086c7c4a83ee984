"""R of the distributed binomial mechanism (cpSGD, Agarwal et al. 2018) for one vector sum per round."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from fedbandit._validation import check_choice, check_float_in_range, check_int_in_range, check_positive_float
from fedbandit.accounting.binomial import (
    BinomialParams,
    binomial_params,
    binomial_run_epsilon,
    binomial_sensitivities,
    cpsgd_epsilon,
    split_delta,
)
from fedbandit.accounting.events import ApproxDpEvent, DpEvent
from fedbandit.mechanisms.binomial import BinomialMechanism
from fedbandit.protocols.sums.parts import ModularVectors, check_aggregation_width, require_target_and_clip
from fedbandit.protocols.sums.setting import SumSetting

__all__ = ["BinomialVectors"]


class BinomialVectors(ModularVectors):
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
    params: BinomialParams

    def __init__(self, *, bits: int = 16, k: float = 3.0, p: float = 0.5, flatten: str = "hadamard",
                 norm_growth: str = "conservative", flatten_seed: int | None = None) -> None:
        self.bits = check_int_in_range("bits", bits, 2, 62)
        self.k_std = check_positive_float("k", k)
        self.p = check_float_in_range("p", p, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
        self.flatten = check_choice("flatten", flatten, ("hadamard", "dft"))
        self.norm_growth = check_choice("norm_growth", norm_growth, ("conservative", "optimistic"))
        self.flatten_seed = None if flatten_seed is None else check_int_in_range("flatten_seed", flatten_seed, 0, None)
        self.mechanism: BinomialMechanism | None = None

    def describe(self) -> str:
        return "clip to c, flatten (shared rotation), scale by 1/s, round, add Bin(N_i, p), reduce mod 2^bits"

    def configure(self, setting: SumSetting) -> None:
        p = setting
        require_target_and_clip(self.name, p)
        check_aggregation_width(self.bits, p.n_parties)  # the bits are fixed: refuse before the search
        epsilon, delta = p.target()
        self.params = binomial_params(self.bits, self.k_std, p.n_parties, p.dim, p.clip_norm(), epsilon,
                                      delta, p=self.p, steps=p.n_rounds, sampling_rate=p.sampling_rate,
                                      relation=p.relation, norm_growth=self.norm_growth, flatten=self.flatten)
        self.n_parties = p.n_parties
        self.mechanism = None if self.flatten_seed is None else BinomialMechanism(self.params, self.flatten_seed,
                                                                                  self.flatten)

    def reset(self, setting: SumSetting, n_runs: int, rng: np.random.Generator) -> None:
        if self.flatten_seed is None:
            self.mechanism = BinomialMechanism(self.params, rng, self.flatten)

    def encode(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        assert self.mechanism is not None  # drawn at reset
        return self.mechanism.encode(x, rng)

    def decode(self, delivered: np.ndarray) -> np.ndarray:
        """The decoder of the distributed binomial mechanism: minus the noise mean n·N_i·p, modular
        clipping, inverse rotation, rescaling by s."""
        assert self.mechanism is not None  # drawn at reset
        return self.mechanism.decode(delivered, self.n_parties)

    def run_epsilon(self, setting: SumSetting, relation: str) -> float:
        """ε of the whole run under ``relation`` (per-round [ASYKM18] Thm. 1, amplification, composition)."""
        p, q = setting, self.params
        delta0, slack = split_delta(p.target()[1], p.n_rounds, p.sampling_rate)
        sens = binomial_sensitivities(p.clip_norm(), q.scale, q.d_pad, relation)
        eps0 = cpsgd_epsilon(p.n_parties * q.trials_per_client, q.p, q.scale, q.d_pad, delta0, sens)
        return binomial_run_epsilon(eps0, delta0, p.n_rounds, p.sampling_rate, slack)

    def event(self, setting: SumSetting, relation: str) -> DpEvent:
        p = setting
        q = p.sampling_rate
        eps = self.run_epsilon(p, relation)
        return ApproxDpEvent(eps, p.target()[1], what=(
            f"{p.n_rounds} rounds of the binomial mechanism [ASYKM18 Thm. 1]"
            + (f", amplified by {p.sampling_bound(relation)} (q={q:.4g}) in (ε, δ)" if q < 1.0 else "")
            + ", basic/advanced composition [DRV10]"))

    def theorem(self, setting: SumSetting) -> str:
        return "distributed binomial mechanism [ASYKM18, Thm. 1], (ε, δ) composition; SecAgg [BIK+17]"

    def calibration(self, setting: SumSetting) -> dict:
        q = self.params
        return {"sigma0": q.sigma, "bits": q.bits, "scale": q.scale, "trials_per_client": q.trials_per_client,
                "binomial_p": q.p, "eps_round": q.eps_round, "delta_round": q.delta_round, "d_pad": q.d_pad,
                "k": q.k, "modulus": q.modulus, "rounding_variance": q.n * q.scale**2 / 4.0}

    def scale_noise(self, factor: float) -> None:
        import dataclasses

        # the noise's standard deviation grows like sqrt(N): N f² trials (kept even, as calibrated)
        trials = max(2, 2 * round(self.params.trials_per_client * factor * factor / 2))
        self.params = dataclasses.replace(self.params, trials_per_client=trials)
        if self.flatten_seed is not None:
            self.mechanism = BinomialMechanism(self.params, self.flatten_seed, self.flatten)

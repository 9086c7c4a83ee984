"""The registered sum protocols, each a composition (R, S, A) (the table of :mod:`fedbandit.protocols.sums`)."""

from __future__ import annotations

from fedbandit.accounting.ddg import DEFAULT_BETA
from fedbandit.protocols.intermediaries import Identity, SecureAggregation
from fedbandit.protocols.registry import register
from fedbandit.protocols.sums.binomial_decoder import BinomialDecoder
from fedbandit.protocols.sums.binomial_vectors import BinomialVectors
from fedbandit.protocols.sums.clipped_vectors import ClippedVectors
from fedbandit.protocols.sums.ddg_decoder import DDGDecoder
from fedbandit.protocols.sums.ddg_vectors import DDGVectors
from fedbandit.protocols.sums.exact_vectors import ExactVectors
from fedbandit.protocols.sums.gaussian_sum import GaussianSum
from fedbandit.protocols.sums.plain_sum import PlainSum
from fedbandit.protocols.sums.protocol import SumProtocol

__all__: list[str] = []

_KLS = "Kairouz, Liu & Steinke 2021"


@register("sum-non-private", kind="sum", summary="exact sum of the parties' vectors, no privacy", reference=_KLS)
def sum_non_private() -> SumProtocol:
    return SumProtocol(ExactVectors(), Identity(), PlainSum(), name="sum-non-private")


@register("sum-central-gaussian", kind="sum", summary="trusted server: sum of clipped vectors + Gaussian noise",
          reference=f"{_KLS}, Sec. 6 baseline; Balle & Wang 2018")
def sum_central_gaussian(epsilon: float, delta: float, *, calibration: str = "analytic",
                         relation: str = "add-remove") -> SumProtocol:
    return SumProtocol(ClippedVectors(), Identity(), GaussianSum(calibration), name="sum-central-gaussian",
                       epsilon=epsilon, delta=delta, relation=relation)


@register("sum-binomial-secagg", kind="sum", summary="distributed binomial mechanism (cpSGD) + secure aggregation",
          reference="Agarwal et al. 2018 (cpSGD), Thm. 1; Kairouz, Liu & Steinke 2021, Sec. 2 baseline")
def sum_binomial_secagg(epsilon: float, delta: float, *, bits: int = 16, k: float = 3.0, binomial_p: float = 0.5,
                        flatten: str = "hadamard", norm_growth: str = "conservative", secure_aggregation: str = "ideal",
                        flatten_seed: int | None = None, relation: str = "add-remove") -> SumProtocol:
    return SumProtocol(
        BinomialVectors(bits=bits, k=k, p=binomial_p, flatten=flatten, norm_growth=norm_growth,
                        flatten_seed=flatten_seed),
        SecureAggregation(secure_aggregation), BinomialDecoder(), name="sum-binomial-secagg", epsilon=epsilon,
        delta=delta, relation=relation,
    )


@register("sum-ddg-secagg", kind="sum", summary="distributed discrete Gaussian + secure aggregation",
          reference=f"{_KLS}, Alg. 1; Bonawitz et al. 2017")
def sum_ddg_secagg(epsilon: float, delta: float, *, bits: int | str = 16, k: float = 3.0,
                   rounding_beta: float = DEFAULT_BETA, flatten: str = "hadamard", norm_growth: str = "conservative",
                   method: str = "rdp", secure_aggregation: str = "ideal", flatten_seed: int | None = None,
                   relation: str = "add-remove") -> SumProtocol:
    return SumProtocol(
        DDGVectors(bits=bits, k=k, beta=rounding_beta, flatten=flatten, norm_growth=norm_growth, method=method,
                   flatten_seed=flatten_seed),
        SecureAggregation(secure_aggregation), DDGDecoder(), name="sum-ddg-secagg", epsilon=epsilon, delta=delta,
        relation=relation,
    )

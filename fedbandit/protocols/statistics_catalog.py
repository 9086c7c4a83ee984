"""The registered statistics protocols, each a composition (R, S, A).

=======================  ==================================  ====================  ==============
name                     randomizer R                        intermediary S        analyzer A
=======================  ==================================  ====================  ==============
``non-private``          exact batch sums                    identity              running total
``central``              exact batch sums                    identity              central tree
``silo-ldp``             Gaussian tree                       identity              tree prefix
``sdp-amplification``    Gaussian tree, amplification σ₀     shuffler              tree prefix
``sdp-vector-sum``       vector sum in every node            shuffler              tree prefix
``ddg-secagg``           discrete Gaussian tree              secure aggregation    tree prefix
``gaussian-secagg``      Gaussian tree                       secure aggregation    tree prefix
``ddg-shuffle``          discrete Gaussian tree              shuffler              tree prefix
``dp20``                 Gaussian tree, DP20's σ             identity              tree prefix
``silo-ldp-mf``          Gaussian square-root factorization  identity              prefix total
``central-mf``           exact batch sums                    identity              central factorization
``silo-ldp-mf-banded``   Gaussian banded square root         identity              prefix total
``central-mf-banded``    exact batch sums                    identity              central banded sqrt
``silo-ldp-honaker``     Gaussian full tree (every node)     identity              Honaker prefix
``central-honaker``      exact batch sums                    identity              central Honaker tree
=======================  ==================================  ====================  ==============

The ``-mf`` protocols go beyond the papers: the same prefix sums released through the
square-root factorization of the prefix-sum matrix (Fichtenberger, Henzinger & Upadhyay
2023; Henzinger, Upadhyay & Upadhyay 2023) or its banded form (Kalinin & Lampert 2024),
at the zCDP calibration of the tree's ``"zcdp"`` rule (one release at the factor's column
norm instead of κ node releases).  The ``-honaker`` protocols release every node of the binary tree
and estimate each prefix by Honaker's bottom-up best linear estimator (Honaker 2015), at the tree's
own calibration (a record still enters one node per level).

``gaussian-secagg`` and ``ddg-shuffle`` are assembled from the same parts as the
papers' protocols: distributed Gaussian noise summed by (ideal) secure aggregation has the
central model's server noise; discrete Gaussian messages through a shuffler are accounted
one message at a time (no amplification theorem covers them), so they carry silo-level
LDP's noise.  Calibration defaults to ``"zcdp"`` (the book's tight rule) wherever the
papers give a choice.
"""

from __future__ import annotations

import math

from fedbandit._validation import check_bool, check_choice
from fedbandit.protocols.intermediaries import Identity, SecureAggregation, Shuffler
from fedbandit.protocols.registry import register
from fedbandit.protocols.statistics import (
    CentralFactorization,
    CentralHonakerTree,
    CentralTree,
    DiscreteGaussianTree,
    ExactStatistics,
    GaussianFactorization,
    GaussianFullTree,
    GaussianTree,
    HonakerPrefix,
    PrefixTotal,
    RunningTotal,
    StatisticsProtocol,
    TreePrefix,
    VectorSum,
)

__all__: list[str] = []

_ZC = "Zhou & Chowdhury 2023"


@register("non-private", kind="statistics", summary="exact sums, no privacy", reference=f"{_ZC}, Alg. 1 with P = identity")
def non_private() -> StatisticsProtocol:
    return StatisticsProtocol(ExactStatistics(), Identity(), RunningTotal(), name="non-private")


@register("central", kind="statistics", summary="trusted server with one Gaussian tree", reference="[DNPR10, CSS11]")
def central(epsilon: float, delta: float, *, calibration: str = "zcdp", relation: str = "add-remove",
            gram_noise: str = "mirror") -> StatisticsProtocol:
    return StatisticsProtocol(
        ExactStatistics(), Identity(), CentralTree(calibration, gram_noise=gram_noise), name="central", epsilon=epsilon,
        delta=delta,
        relation=relation,
    )


@register("silo-ldp", kind="statistics", summary="silo-level LDP: distributed Gaussian tree", reference=f"{_ZC}, Thm. 6.1")
def silo_ldp(epsilon: float, delta: float, *, calibration: str = "zcdp", relation: str = "add-remove",
             gram_noise: str = "mirror") -> StatisticsProtocol:
    return StatisticsProtocol(
        GaussianTree(calibration, gram_noise=gram_noise), Identity(), TreePrefix(), name="silo-ldp", epsilon=epsilon, delta=delta,
        relation=relation,
    )


@register("sdp-amplification", kind="statistics", summary="shuffle DP by amplification: Gaussian tree + shuffler",
          reference=f"{_ZC}, Thm. 6.3")
def sdp_amplification(epsilon: float, delta: float, *, variant: str = "authors", force: bool = False,
                      relation: str = "add-remove", gram_noise: str = "mirror") -> StatisticsProtocol:
    variant = check_choice("variant", variant, ("authors", "recalled", "ideal"))
    return StatisticsProtocol(
        GaussianTree(f"amplification-{variant}", force=check_bool("force", force), gram_noise=gram_noise), Shuffler(),
        TreePrefix(),
        name="sdp-amplification", epsilon=epsilon, delta=delta, relation=relation,
    )


@register("sdp-vector-sum", kind="statistics", summary="shuffle DP: vector-sum protocol in every tree node",
          reference=f"{_ZC}, Thm. 6.5; Cheu et al. 2021")
def sdp_vector_sum(epsilon: float, delta: float, *, split: str = "advanced", constant: float | None = None,
                   noise: str = "theorem", relation: str = "add-remove") -> StatisticsProtocol:
    if isinstance(delta, (int, float)) and not isinstance(delta, bool) and 0.5 <= delta < 1:
        raise ValueError(f"delta must lie in (0, 0.5) for the vector-sum protocol, got {delta!r}")
    return StatisticsProtocol(
        VectorSum(split=split, constant=constant, noise=noise), Shuffler(), TreePrefix(), name="sdp-vector-sum", epsilon=epsilon,
        delta=delta, relation=relation,
    )


@register("ddg-secagg", kind="statistics", summary="distributed discrete Gaussian tree + secure aggregation",
          reference="Kairouz, Liu & Steinke 2021; Bonawitz et al. 2017")
def ddg_secagg(epsilon: float, delta: float, *, bits: int | str = "auto", k: float = 3.0,
               rounding_beta: float = math.exp(-0.5), flatten: str = "hadamard", norm_growth: str = "conservative",
               secure_aggregation: str = "ideal", flatten_seed: int = 0,
               relation: str = "add-remove") -> StatisticsProtocol:
    return StatisticsProtocol(
        DiscreteGaussianTree(bits=bits, k=k, beta=rounding_beta, flatten=flatten, norm_growth=norm_growth,
                             flatten_seed=flatten_seed),
        SecureAggregation(check_choice("secure_aggregation", secure_aggregation, ("ideal", "real"))), TreePrefix(),
        name="ddg-secagg", epsilon=epsilon, delta=delta,
        relation=relation,
    )


@register("gaussian-secagg", kind="statistics", summary="distributed Gaussian tree + (ideal) secure aggregation",
          reference="Algorithm 2 of Zhou & Chowdhury with Bonawitz et al.'s aggregation")
def gaussian_secagg(epsilon: float, delta: float, *, calibration: str = "zcdp",
                    relation: str = "add-remove") -> StatisticsProtocol:
    return StatisticsProtocol(
        GaussianTree(calibration), SecureAggregation("ideal"), TreePrefix(), name="gaussian-secagg", epsilon=epsilon,
        delta=delta, relation=relation,
    )


@register("ddg-shuffle", kind="statistics", summary="discrete Gaussian tree messages through a shuffler",
          reference="Kairouz, Liu & Steinke 2021 (messages), shuffled")
def ddg_shuffle(epsilon: float, delta: float, *, bits: int | str = "auto", k: float = 3.0,
                relation: str = "add-remove") -> StatisticsProtocol:
    return StatisticsProtocol(
        DiscreteGaussianTree(bits=bits, k=k), Shuffler(), TreePrefix(), name="ddg-shuffle", epsilon=epsilon,
        delta=delta, relation=relation,
    )


@register("dp20", kind="statistics", summary="DP20's per-silo Gaussian tree over synchronizations",
          reference="Dubey & Pentland 2020; gaps: Zhou & Chowdhury 2023, Sec. 4")
def dp20(epsilon: float, delta: float, *, noise: str = "corrected") -> StatisticsProtocol:
    noise = check_choice("noise", noise, ("corrected", "claimed"))
    rule = "dp20" if noise == "corrected" else "dp20-claimed"
    return StatisticsProtocol(
        GaussianTree(rule), Identity(), TreePrefix(), name="dp20", epsilon=epsilon, delta=delta,
        model="silo-LDP (claimed)",
    )


_MF = "Fichtenberger, Henzinger & Upadhyay 2023; Henzinger, Upadhyay & Upadhyay 2023"

# The banded protocols' default number of diagonals.
_DEFAULT_BANDS = 4


@register("silo-ldp-mf", kind="statistics", summary="silo-level LDP: distributed square-root factorization",
          reference=f"{_MF} (beyond the papers)")
def silo_ldp_mf(epsilon: float, delta: float, *, relation: str = "add-remove") -> StatisticsProtocol:
    return StatisticsProtocol(GaussianFactorization("sqrt"), Identity(), PrefixTotal(), name="silo-ldp-mf",
                              epsilon=epsilon, delta=delta, relation=relation, model="silo-LDP")


@register("central-mf", kind="statistics", summary="trusted server with one square-root factorization",
          reference=f"{_MF} (beyond the papers)")
def central_mf(epsilon: float, delta: float, *, relation: str = "add-remove") -> StatisticsProtocol:
    return StatisticsProtocol(ExactStatistics(), Identity(), CentralFactorization("sqrt"), name="central-mf",
                              epsilon=epsilon, delta=delta, relation=relation)


@register("silo-ldp-mf-banded", kind="statistics", summary="silo-level LDP: distributed banded square root",
          reference="Kalinin & Lampert 2024 (beyond the papers)")
def silo_ldp_mf_banded(epsilon: float, delta: float, *, bands: int = _DEFAULT_BANDS,
                       relation: str = "add-remove") -> StatisticsProtocol:
    return StatisticsProtocol(GaussianFactorization("banded-sqrt", bands=bands), Identity(), PrefixTotal(),
                              name="silo-ldp-mf-banded", epsilon=epsilon, delta=delta, relation=relation, model="silo-LDP")


@register("central-mf-banded", kind="statistics", summary="trusted server with one banded square root",
          reference="Kalinin & Lampert 2024 (beyond the papers)")
def central_mf_banded(epsilon: float, delta: float, *, bands: int = _DEFAULT_BANDS,
                      relation: str = "add-remove") -> StatisticsProtocol:
    return StatisticsProtocol(ExactStatistics(), Identity(), CentralFactorization("banded-sqrt", bands=bands),
                              name="central-mf-banded", epsilon=epsilon, delta=delta, relation=relation)


_H15 = "Honaker 2015, Efficient use of differentially private binary trees (beyond the papers)"


@register("silo-ldp-honaker", kind="statistics", summary="silo-level LDP: full Gaussian tree, Honaker's estimator",
          reference=_H15)
def silo_ldp_honaker(epsilon: float, delta: float, *, calibration: str = "zcdp",
                     relation: str = "add-remove") -> StatisticsProtocol:
    return StatisticsProtocol(GaussianFullTree(calibration), Identity(), HonakerPrefix(), name="silo-ldp-honaker",
                              epsilon=epsilon, delta=delta, relation=relation, model="silo-LDP")


@register("central-honaker", kind="statistics", summary="trusted server with one full tree and Honaker's estimator",
          reference=_H15)
def central_honaker(epsilon: float, delta: float, *, calibration: str = "zcdp",
                    relation: str = "add-remove") -> StatisticsProtocol:
    return StatisticsProtocol(ExactStatistics(), Identity(), CentralHonakerTree(calibration), name="central-honaker",
                              epsilon=epsilon, delta=delta, relation=relation)

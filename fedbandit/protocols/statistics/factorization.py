"""R of the distributed factorized release: every party's noisy prefix sums through a matrix
factorization of the prefix-sum matrix [beyond the papers]."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from fedbandit._validation import MAX_STEPS, check_choice, check_positive_int
from fedbandit.accounting.calibration import ldp_sigma0
from fedbandit.accounting.events import DpEvent, GaussianEvent
from fedbandit.mechanisms.matrix_factorization import (
    MAX_DENSE_STEPS,
    BandedSqrtRandomizer,
    SqrtToeplitzRandomizer,
    max_column_norm,
    sqrt_toeplitz_coefficients,
)
from fedbandit.protocols.statistics.parts import Level, Runs, StatisticsRandomizer, Users, one_vector_per_party
from fedbandit.protocols.statistics.setting import StatisticsSetting

__all__ = ["GaussianFactorization", "FACTORIZATIONS", "factorization_sensitivity_factor"]

#: Factorizations of the prefix-sum matrix a factorization part may use.
FACTORIZATIONS = ("sqrt", "banded-sqrt")


def factorization_mechanism(factorization: str, bands: int | None, n_steps: int, item_shape: tuple[int, ...],
                            sigma: float, batch_shape: tuple[int, ...]) -> SqrtToeplitzRandomizer | BandedSqrtRandomizer:
    if factorization == "sqrt":
        return SqrtToeplitzRandomizer(n_steps, item_shape, sigma, batch_shape=batch_shape)
    assert bands is not None  # the banded square root's part checked its bands
    return BandedSqrtRandomizer(n_steps, item_shape, sigma, bands, batch_shape=batch_shape)


def factorization_sensitivity_factor(factorization: str, n_steps: int, bands: int | None = None) -> float:
    """max_t ‖C e_t‖ of the right factor C over ``n_steps`` releases (the square root's, or the
    banded square root's with ``bands`` diagonals): one record's Δ times it is the sensitivity
    of the factorized release (:mod:`fedbandit.mechanisms.matrix_factorization`)."""
    check_choice("factorization", factorization, FACTORIZATIONS)
    n = check_positive_int("n_steps", n_steps, max_value=MAX_STEPS)
    if factorization == "sqrt":
        n = check_positive_int("n_steps", n, max_value=MAX_DENSE_STEPS, reason="the dense square root's coefficients")
    b = n if factorization == "sqrt" else min(check_positive_int("bands", bands, max_value=10**5), n)
    return max_column_norm(sqrt_toeplitz_coefficients(b), n)


def check_factorization_steps(factorization: str, n_batches: int) -> None:
    if factorization == "sqrt":
        check_positive_int("n_batches", n_batches, max_value=MAX_DENSE_STEPS,
                           reason="the dense square root stores every draw (use factorization='banded-sqrt')")


def factorization_sigma(setting: StatisticsSetting, colnorm: float, parties: int = 1) -> float:
    # one Gaussian release (κ = 1) of sensitivity (record sensitivity × column norm), the tree's
    # "zcdp" rule with the κ node releases replaced by the factor's column norm
    s = setting
    epsilon, delta = s.target()
    return ldp_sigma0(epsilon, delta, 1, calibration="zcdp", sensitivity=s.sensitivity * colnorm) / math.sqrt(parties)


def factorization_theorem(factorization: str, column_norm: float, who: str) -> str:
    """The citation of a factorized release's guarantee for the view ``who`` (shared by the
    distributed and the central factorization)."""
    return (f"{factorization} factorization of the prefix-sum matrix [FHU23, HUU23] for {who}: one Gaussian "
            f"release at sensitivity Δ × column norm {column_norm:.4g} (adaptive streams [DMRST22]), zCDP "
            "[BS16] converted by [CKS20]")


class GaussianFactorization(StatisticsRandomizer):
    """R of the distributed factorized release: every party releases its own noisy prefix sums
    through a matrix factorization of the prefix-sum matrix [beyond the papers].

    At batch k the party sends s̃_k = Σ_{s≤k} γ_s + (B·z)_k, with z_s ~ N(0, σ²) i.i.d. entrywise
    on the packed statistics and A = B·C the square-root factorization (B = C, the coefficients
    of (1 − x)^{−1/2}; Fichtenberger, Henzinger & Upadhyay 2023; Henzinger, Upadhyay & Upadhyay
    2023) or its banded form (Kalinin & Lampert 2024);
    :mod:`fedbandit.mechanisms.matrix_factorization`.  The release is the Gaussian mechanism on
    C·γ post-processed by B, so one user's record (in one batch) has sensitivity
    Δ·max_t ‖C e_t‖ = Δ·:func:`factorization_sensitivity_factor`, for adaptively chosen
    batch sums too (Denisov et al. 2022).  σ is the zCDP calibration of
    :func:`fedbandit.accounting.calibration.ldp_sigma0` for one release at that sensitivity (the tree's
    ``"zcdp"`` rule with one release instead of κ).  The server adds the parties' prefixes
    (:class:`PrefixTotal`).

    Parameters
    ----------
    factorization : {"sqrt", "banded-sqrt"}
    bands : int, optional
        b, the diagonals of the banded square root (``"banded-sqrt"`` only).
    """

    name: ClassVar[str] = "gaussian-factorization"
    releases: ClassVar[str] = "prefix sums"
    message: ClassVar[str] = "float"
    supports_run_masks: ClassVar[bool] = True
    kind_of_noise: ClassVar[str] = "gaussian"
    sigma0: float = math.nan  # σ of one party's noise, set by configure

    def __init__(self, factorization: str = "sqrt", *, bands: int | None = None) -> None:
        self.factorization = check_choice("factorization", factorization, FACTORIZATIONS)
        self.bands: int | None
        if self.factorization == "banded-sqrt":
            self.bands = check_positive_int("bands", bands, max_value=10**5, reason="the state holds b − 1 draws")
        elif bands is not None:
            raise ValueError(f"bands is for factorization='banded-sqrt', got bands={bands!r} with {factorization!r}")
        else:
            self.bands = None

    def describe(self) -> str:
        what = "square root" if self.bands is None else f"banded square root (b = {self.bands})"
        return f"per batch k: the party's prefix sum plus the {what} factorization's correlated noise (B·z)_k"

    def configure(self, setting: StatisticsSetting) -> None:
        s = setting
        if s.view == "multiset":
            raise ValueError(f"randomizer {self.name!r} with intermediary {s.intermediary!r}: no shuffle "
                             "accounting covers factorized prefixes (use 'identity' or secure aggregation)")
        if not s.private:
            raise ValueError(f"randomizer {self.name!r} needs a target (epsilon, delta)")
        self.parties = s.parties
        check_factorization_steps(self.factorization, s.n_batches)
        self.column_norm = factorization_sensitivity_factor(self.factorization, s.n_batches, self.bands)
        self.sigma0 = float(factorization_sigma(s, self.column_norm, self.parties))

    def reset(self, setting: StatisticsSetting, n_runs: int) -> None:
        s = setting
        self._mech = factorization_mechanism(self.factorization, self.bands, s.n_batches, (s.coordinates,),
                                              self.sigma0, (n_runs, s.n_agents))

    def encode(self, leaf: np.ndarray, users: Users, runs: Runs, rng: np.random.Generator) -> tuple[Level, np.ndarray]:
        k, prefix = self._mech.release(leaf, rng, runs=runs)
        return k, prefix

    def payload(self, setting: StatisticsSetting, level: Level) -> tuple[float, float]:
        return one_vector_per_party(setting)

    def node_variance(self, setting: StatisticsSetting) -> float:
        return setting.n_agents * self.sigma0**2

    def prefix_variance(self, setting: StatisticsSetting, k: int) -> float:
        """Per-entry variance of the server's prefix noise at batch k: M σ² Σ_{j<k} b_j²."""
        return setting.n_agents * factorization_mechanism(self.factorization, self.bands, setting.n_batches, (1,),
                                                           self.sigma0, ()).prefix_noise_variance(k)

    def server_noise_std(self, setting: StatisticsSetting) -> float:
        return math.sqrt(self.prefix_variance(setting, setting.n_batches))  # Σ_{j<k} b_j² grows with k

    def event(self, setting: StatisticsSetting, relation: str) -> DpEvent:
        db, dg = setting.record_sensitivities(relation)
        return GaussianEvent(math.hypot(db, dg) * self.column_norm, math.sqrt(self.parties) * self.sigma0)

    def theorem(self, setting: StatisticsSetting) -> str:
        who = "the sum of the M agents' releases" if setting.view == "sum" else "one agent's releases"
        return factorization_theorem(self.factorization, self.column_norm, who)

    def calibration(self, setting: StatisticsSetting) -> dict:
        return {"sigma0": self.sigma0, "factorization": self.factorization, "bands": self.bands,
                "column_norm": self.column_norm}

    def scale_noise(self, factor: float) -> None:
        self.sigma0 *= factor

"""R of Zhou & Chowdhury's Algorithm 2: the distributed Gaussian tree."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from fedbandit._validation import check_bool, check_choice, check_positive_float, check_positive_int
from fedbandit.accounting.accountant import exact_gaussian_epsilon
from fedbandit.accounting.amplification import Condition, zc_amplification_validity
from fedbandit.accounting.calibration import TREE_SIGMA_RULES, gaussian_tree_sigma0
from fedbandit.accounting.deshuffle import DeshuffledGaussianEvent, deshuffle_scenarios
from fedbandit.accounting.events import ClaimedEvent, DpEvent, GaussianEvent, SelfComposedEvent
from fedbandit.mechanisms.tree import TreeRandomizer
from fedbandit.protocols.statistics.parts import Level, Runs, StatisticsRandomizer, Users, one_vector_per_party
from fedbandit.protocols.statistics.setting import StatisticsSetting

__all__ = ["GaussianTree", "GRAM_NOISES", "gram_noise_scale"]


#: Symmetrizations of the Gram noise (:class:`GaussianTree`, :class:`CentralTree`).
GRAM_NOISES = ("mirror", "average")


def gram_noise_scale(dim: int, gram_noise: str) -> np.ndarray | None:
    """Per packed coordinate, the noise multiplier of a Gram symmetrization (None for "mirror").

    ``"average"``, (N + Nᵀ)/2: 1 on the bias and the diagonal, 1/√2 off the diagonal.
    """
    dim = check_positive_int("dim", dim, max_value=10**4, reason="the packed Gram matrix has dim(dim+1)/2 entries")
    check_choice("gram_noise", gram_noise, GRAM_NOISES)
    if gram_noise == "mirror":
        return None
    iu, ju = np.triu_indices(dim)
    return np.concatenate([np.ones(dim), np.where(iu == ju, 1.0, math.sqrt(0.5))])


class GaussianTree(StatisticsRandomizer):
    """R of Algorithm 2 of Zhou & Chowdhury: the distributed Gaussian tree.

    Every party keeps the noise-free p-sums of its stream of batch sums γ_k; at batch k,
    with j = ν(k) the lowest set bit of k, it releases α̂_j = α_j + N(0, σ₀²) entrywise on
    the packed statistics (so the Gram noise is symmetric, the hypotheses of Lemma 6.7).

    Parameters
    ----------
    calibration : str, default "paper"
        The σ₀ rule, one of :data:`fedbandit.accounting.calibration.TREE_SIGMA_RULES`
        (:func:`fedbandit.accounting.calibration.gaussian_tree_sigma0`).
    sigma0 : float, optional
        An explicit σ₀ instead of a rule (the guarantee is then computed, not targeted).
    force : bool, default False
        Use an amplification rule outside its validity region (status "unproven").
    gram_noise : {"mirror", "average"}, default "mirror"
        How the Gram noise is made symmetric.  ``"mirror"`` [derived, the book's]: independent
        N(0, σ₀²) entries on and above the diagonal, mirrored below it (off-diagonal variance
        σ₀²).  ``"average"`` [authors' code]: (N + Nᵀ)/2 of a full N(0, σ₀²) matrix, so the
        off-diagonal entries have variance σ₀²/2.  Both meet Lemma 6.7's hypotheses, and both
        have the same privacy: one record's Gram change xxᵀ, measured in each noise's own
        metric, is at most ‖x‖² (mirror: Σ_{i≤j} x_i²x_j² ≤ ‖x‖⁴; average: Σ_i x_i⁴ +
        2Σ_{i<j} x_i²x_j² = ‖x‖⁴), so the same Gaussian event accounts for both.  The draws are
        the same (the off-diagonal noise of ``"average"`` is the mirrored noise times 1/√2), so
        the two options compare with common random numbers.
    """

    name: ClassVar[str] = "gaussian-tree"
    releases: ClassVar[str] = "tree nodes"
    message: ClassVar[str] = "float"
    supports_run_masks: ClassVar[bool] = True
    kind_of_noise: ClassVar[str] = "gaussian"
    sigma0: float = math.nan  # σ₀, set by configure

    def __init__(self, calibration: str = "paper", *, sigma0: float | None = None, force: bool = False, gram_noise: str = "mirror") -> None:
        self.calibration_rule = check_choice("calibration", calibration, TREE_SIGMA_RULES)
        self.sigma0_given = None if sigma0 is None else check_positive_float("sigma0", sigma0)
        self.force = check_bool("force", force)
        self.gram_noise = check_choice("gram_noise", gram_noise, GRAM_NOISES)
        self.amplification = self.calibration_rule.startswith("amplification-")

    def describe(self) -> str:
        rule = f"σ₀ = {self.sigma0_given:g}" if self.sigma0_given is not None else f"σ₀ by the {self.calibration_rule!r} rule"
        return f"per batch k: the tree p-sum α_j closing at k, plus N(0, σ₀²) per entry (symmetric Gram noise); {rule}"

    def configure(self, setting: StatisticsSetting) -> None:
        s = setting
        self.validity: tuple[Condition, ...] = ()
        if self.amplification:
            if s.view != "multiset":
                raise ValueError(
                    f"randomizer 'gaussian-tree' with calibration {self.calibration_rule!r} and intermediary "
                    f"{s.intermediary!r}: amplification by shuffling needs a shuffler"
                )
            epsilon, delta = s.target()
            self.validity = tuple(
                zc_amplification_validity(
                    epsilon, delta, s.n_agents, s.n_batches, s.horizon, self.calibration_rule.split("-", 1)[1]
                )
            )
        if self.sigma0_given is not None:
            self.sigma0 = self.sigma0_given
        elif not s.private:
            raise ValueError("randomizer 'gaussian-tree' needs a target (epsilon, delta) or an explicit sigma0")
        else:
            epsilon, delta = s.target()
            self.sigma0 = float(
                gaussian_tree_sigma0(
                    self.calibration_rule,
                    epsilon,
                    delta,
                    n_batches=s.n_batches,
                    horizon=s.horizon,
                    n_agents=s.n_agents,
                    sensitivity=s.sensitivity,
                    parties=s.parties,
                    feature_bound=s.feature_bound,
                    force=self.force,
                )
            )

    def reset(self, setting: StatisticsSetting, n_runs: int) -> None:
        s = setting
        D = s.coordinates
        self._tree = TreeRandomizer(
            s.n_batches, (D,), self.sigma0, batch_shape=(n_runs, s.n_agents), segments=(s.dim, D - s.dim)
        )
        # The server's aggregated node noise Σ_i Z_{j,i}, measured (sum of squares per run).
        self.noise_sumsq = np.zeros(n_runs)
        self.noise_count = np.zeros(n_runs)
        self._noise_scale = gram_noise_scale(s.dim, self.gram_noise)

    def encode(self, leaf: np.ndarray, users: Users, runs: Runs, rng: np.random.Generator) -> tuple[Level, np.ndarray]:
        j, msgs, noise = self._tree.release(leaf, rng, runs=runs, return_noise=True)
        if self._noise_scale is not None:  # (N + Nᵀ)/2: the off-diagonal noise scaled by 1/√2
            msgs += noise * (self._noise_scale - 1.0)
            noise = noise * self._noise_scale
        z = noise.sum(axis=1)  # the server's aggregated node noise Σ_i Z_{j,i}, measured
        sq = np.einsum("rd,rd->r", z, z)
        if runs is None:
            self.noise_sumsq += sq
            self.noise_count += z.shape[-1]
        else:
            self.noise_sumsq[runs] += sq
            self.noise_count[runs] += z.shape[-1]
        return j, msgs

    def payload(self, setting: StatisticsSetting, level: Level) -> tuple[float, float]:
        return one_vector_per_party(setting)

    def measured_noise_variance(self) -> np.ndarray:
        """Per run: the measured per-entry variance of the server's aggregated node noise Σ_i Z_{j,i}
        since the reset (NaN for runs that have not synchronized)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.noise_count > 0, self.noise_sumsq / np.maximum(self.noise_count, 1), np.nan)

    def node_variance(self, setting: StatisticsSetting) -> float:
        return setting.n_agents * self.sigma0**2

    def server_noise_std(self, setting: StatisticsSetting) -> float:
        return math.sqrt(setting.n_agents * setting.kappa) * self.sigma0

    def event(self, setting: StatisticsSetting, relation: str) -> DpEvent:
        s = setting
        db, dg = s.record_sensitivities(relation)
        per_party = SelfComposedEvent(GaussianEvent(math.hypot(db, dg), self.sigma0), s.kappa)
        summed = SelfComposedEvent(GaussianEvent(math.hypot(db, dg), math.sqrt(s.n_agents) * self.sigma0), s.kappa)
        if s.view == "sum":
            return summed
        if self.amplification:
            variant = self.calibration_rule.split("-", 1)[1]
            epsilon, delta = s.target()
            return ClaimedEvent(
                epsilon,
                delta,
                f"Zhou & Chowdhury Thm 6.3 via their Gaussian amplification lemma (App. E), σ₀ {variant}",
                conditions=self.validity,
                necessary=self.deshuffled_event(s, relation, summed),
                unproven="idealized σ₀ = σ₀(LDP)/sqrt(M), without the lemma's logarithmic factors: not a proven guarantee"
                if variant == "ideal"
                else "",
            )
        return per_party

    def theorem(self, setting: StatisticsSetting) -> str:
        if self.amplification:
            return ""  # the claimed event names Zhou & Chowdhury's Thm 6.3 and its conditions
        view = "the sum of the M agents' releases" if setting.view == "sum" else "one agent's releases"
        return (f"Gaussian tree (Zhou & Chowdhury Alg. 2), σ₀ rule {self.calibration_rule}; verified for {view}: zCDP "
                f"over κ={setting.kappa} nodes [BS16], converted by [CKS20]")

    def calibration(self, setting: StatisticsSetting) -> dict:
        out = {"sigma0": self.sigma0, "rule": self.calibration_rule, "gram_noise": self.gram_noise}
        if self.amplification:
            out["valid"] = all(c.holds for c in self.validity)
            out["sum_epsilon"] = self.sum_epsilon(setting)
        return out

    def sum_epsilon(self, setting: StatisticsSetting) -> float:
        """Exact ε of the server's sum of the parties' Gaussian releases: a lower bound on the protocol's ε.

        The server can always add up the messages it receives, and the sum is a Gaussian
        mechanism with noise sqrt(M)·σ₀ per node over the κ nodes a user enters.
        """
        db, dg = setting.record_sensitivities()
        ev = SelfComposedEvent(GaussianEvent(math.hypot(db, dg), math.sqrt(setting.n_agents) * self.sigma0),
                               setting.kappa)
        return exact_gaussian_epsilon(ev, setting.target()[1])

    def deshuffled_event(self, setting: StatisticsSetting, relation: str,
                         summed: DpEvent | None = None) -> DeshuffledGaussianEvent:
        """The server's view of the shuffled messages as a necessary condition (shuffler only).

        A :class:`~fedbandit.accounting.deshuffle.DeshuffledGaussianEvent`: the M messages of
        each of the κ nodes containing a user of batch 1, on the adversary's dominant data
        choices (:func:`~fedbandit.accounting.deshuffle.deshuffle_scenarios`: every user of
        the target silo holds the largest record, the other silos the record pointing away
        from it), with ``summed`` (the messages' sum) as the second attack.
        """
        s = setting
        y = 1.0 if s.reward_bound is None else s.reward_bound
        scenarios = deshuffle_scenarios(s.batch_size, s.kappa, s.feature_bound, y, relation, dominant=True)
        return DeshuffledGaussianEvent(self.sigma0, s.n_agents, scenarios, summed)

    def scale_noise(self, factor: float) -> None:
        self.sigma0 *= factor

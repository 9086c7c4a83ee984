"""R of the full-tree release: every party's noisy nodes of the full binary tree, for Honaker's
estimator [beyond the papers]."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from fedbandit._validation import check_choice
from fedbandit.accounting.calibration import gaussian_tree_sigma0
from fedbandit.accounting.events import DpEvent, GaussianEvent, SelfComposedEvent
from fedbandit.mechanisms.honaker_tree import FullTreeRandomizer, honaker_max_prefix_variance, honaker_prefix_variance
from fedbandit.protocols.statistics.parts import Level, Runs, StatisticsRandomizer, Users
from fedbandit.protocols.statistics.setting import StatisticsSetting

__all__ = ["GaussianFullTree", "FULL_TREE_RULES"]

#: The σ₀ rules of the full tree: the tree's silo-level rules (:func:`fedbandit.accounting.calibration.gaussian_tree_sigma0`).
FULL_TREE_RULES = ("paper", "authors", "zcdp")


def full_tree_sigma(setting: StatisticsSetting, rule: str, parties: int) -> float:
    """σ₀ of one party's full-tree node noise: the tree's rule, unchanged (a record enters one node per
    level, at most κ, as in the tree of Zhou & Chowdhury's Algorithm 2)."""
    s = setting
    epsilon, delta = s.target()
    return float(gaussian_tree_sigma0(rule, epsilon, delta, n_batches=s.n_batches, horizon=s.horizon,
                                      n_agents=s.n_agents, sensitivity=s.sensitivity, parties=parties,
                                      feature_bound=s.feature_bound))


def full_tree_theorem(rule: str, kappa: int, who: str) -> str:
    """The citation of a full-tree release's guarantee for the view ``who`` (distributed and central)."""
    return (f"full binary tree (every node released) with Honaker's estimator [H15], σ₀ rule {rule}; verified for "
            f"{who}: zCDP over κ={kappa} nodes, one per level [BS16], converted by [CKS20]")


class GaussianFullTree(StatisticsRandomizer):
    """R of the full-tree release: every party releases every node of the binary tree over its
    batch sums, each with N(0, σ₀²) noise per packed entry [beyond the papers].

    At batch k (j = ν(k)) the party sends the ν(k) + 1 nodes closing at k (the leaf γ_k, its
    parent, …, the node of level j): :class:`fedbandit.mechanisms.honaker_tree.FullTreeRandomizer`.  One
    user's record enters one node per level, at most κ = ⌊log₂ K⌋ + 1 nodes -- the tree's count
    --, so σ₀ is the tree's rule (:func:`fedbandit.accounting.calibration.gaussian_tree_sigma0`) and the event
    the tree's (κ Gaussian releases).  The server sums the parties' nodes and
    :class:`~fedbandit.protocols.statistics.HonakerPrefix` estimates the prefixes (Honaker 2015), with
    variance M σ₀² Σ_{bits j of k} 2^j/(2^{j+1} − 1) per entry, below the tree's M σ₀² popcount(k).

    Parameters
    ----------
    calibration : {"paper", "authors", "zcdp"}, default "zcdp"
        The σ₀ rule.
    """

    name: ClassVar[str] = "gaussian-full-tree"
    releases: ClassVar[str] = "full tree nodes"
    message: ClassVar[str] = "float"
    supports_run_masks: ClassVar[bool] = True
    kind_of_noise: ClassVar[str] = "gaussian"
    sigma0: float = math.nan  # σ₀, set by configure

    def __init__(self, calibration: str = "zcdp") -> None:
        self.calibration_rule = check_choice("calibration", calibration, FULL_TREE_RULES)

    def describe(self) -> str:
        return (f"per batch k: the ν(k) + 1 full-tree nodes closing at k, plus N(0, σ₀²) per entry; σ₀ by the "
                f"{self.calibration_rule!r} rule")

    def configure(self, setting: StatisticsSetting) -> None:
        s = setting
        if s.view == "multiset":
            raise ValueError(f"randomizer {self.name!r} with intermediary {s.intermediary!r}: no shuffle accounting "
                             "covers the full tree's nodes (use 'identity' or secure aggregation)")
        if not s.private:
            raise ValueError(f"randomizer {self.name!r} needs a target (epsilon, delta)")
        self.sigma0 = full_tree_sigma(s, self.calibration_rule, s.parties)

    def reset(self, setting: StatisticsSetting, n_runs: int) -> None:
        s = setting
        self._tree = FullTreeRandomizer(s.n_batches, (s.coordinates,), self.sigma0, batch_shape=(n_runs, s.n_agents))

    def encode(self, leaf: np.ndarray, users: Users, runs: Runs, rng: np.random.Generator) -> tuple[Level, np.ndarray]:
        j, nodes = self._tree.release(leaf, rng, runs=runs)
        return j, nodes  # (R', M, κ, D): levels above j are not released (zeros)

    def decode(self, delivered: np.ndarray) -> np.ndarray:
        """The server's node sums (R', κ, D): the parties' nodes summed (unless already summed)."""
        return delivered if delivered.ndim == 3 else delivered.sum(axis=1)

    def payload(self, setting: StatisticsSetting, level: Level) -> tuple[float, float]:
        """M messages, each of the ν(k) + 1 released nodes of D floats (the mean over the
        synchronizing runs' levels when they differ)."""
        M = setting.n_agents
        nodes = float(np.mean(np.asarray(level))) + 1.0
        return M, M * nodes * setting.coordinates

    def node_variance(self, setting: StatisticsSetting) -> float:
        return setting.n_agents * self.sigma0**2

    def prefix_variance(self, setting: StatisticsSetting, k: int) -> float:
        """Per-entry variance of the server's prefix estimate at batch k: M σ₀² Σ_{bits j of k} 2^j/(2^{j+1} − 1)."""
        return honaker_prefix_variance(k, math.sqrt(setting.n_agents) * self.sigma0)

    def server_noise_std(self, setting: StatisticsSetting) -> float:
        return math.sqrt(honaker_max_prefix_variance(setting.n_batches, math.sqrt(setting.n_agents) * self.sigma0))

    def event(self, setting: StatisticsSetting, relation: str) -> DpEvent:
        s = setting
        db, dg = s.record_sensitivities(relation)
        return SelfComposedEvent(GaussianEvent(math.hypot(db, dg), math.sqrt(s.parties) * self.sigma0), s.kappa)

    def theorem(self, setting: StatisticsSetting) -> str:
        who = "the sum of the M agents' releases" if setting.view == "sum" else "one agent's releases"
        return full_tree_theorem(self.calibration_rule, setting.kappa, who)

    def calibration(self, setting: StatisticsSetting) -> dict:
        return {"sigma0": self.sigma0, "rule": self.calibration_rule, "estimator": "honaker"}

    def scale_noise(self, factor: float) -> None:
        self.sigma0 *= factor

"""The frozen setting a statistics protocol's parts are configured for."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from fedbandit.accounting.events import record_sensitivities
from fedbandit.mechanisms.tree import tree_depth
from fedbandit.protocols.statistics.packing import n_coordinates

__all__ = ["StatisticsSetting"]


@dataclass(frozen=True)
class StatisticsSetting:
    """What a statistics protocol's randomizer and analyzer are configured for (no random state).

    Built by :meth:`fedbandit.protocols.StatisticsProtocol.configure` from the learner's
    setting, the protocol's target and relation and its intermediary's view; the parts read it
    instead of the protocol (no part holds its protocol).

    Attributes
    ----------
    n_agents, dim, n_batches, batch_size : int
        M, d, K and B of Zhou & Chowdhury's Algorithm 1 (checked by the protocol).
    feature_bound : float
        L, the bound on ‖x‖.
    reward_bound : float or None
        Y, the clipping bound on |y|; None when the learner does not clip (the protocols then
        calibrate as if Y = 1 and report status "invalid").
    schedule : {"fixed", "adaptive"}
    epsilon, delta : float or None
        The target (ε, δ) of the whole run; None for a non-private protocol.
    relation : {"add-remove", "replace"}
        The relation the noise is calibrated for.
    view : {"messages", "multiset", "sum"}
        What the server receives (the intermediary's :attr:`~fedbandit.protocols.Intermediary.view`).
    intermediary : str
        The intermediary's name (for messages).
    """

    n_agents: int
    dim: int
    n_batches: int
    batch_size: int
    feature_bound: float = 1.0
    reward_bound: float | None = 1.0
    schedule: str = "fixed"
    epsilon: float | None = None
    delta: float | None = None
    relation: str = "add-remove"
    view: str = "messages"
    intermediary: str = "identity"

    @property
    def private(self) -> bool:
        """Whether the protocol has a target (ε, δ)."""
        return self.epsilon is not None

    def target(self) -> tuple[float, float]:
        """The target (ε, δ), for a part that calibrates for it (``ValueError`` if the protocol has none)."""
        if self.epsilon is None or self.delta is None:
            raise ValueError("the protocol has no target (epsilon, delta)")
        return self.epsilon, self.delta

    @property
    def horizon(self) -> int:
        """T = K·B rounds."""
        return self.n_batches * self.batch_size

    @property
    def kappa(self) -> int:
        """κ = ⌊log₂ K⌋ + 1: the tree levels, which bound the nodes a record enters (:func:`fedbandit.mechanisms.tree.tree_depth`)."""
        return tree_depth(self.n_batches)

    @functools.cached_property
    def coordinates(self) -> int:
        """D = d + d(d+1)/2 packed coordinates of one record (computed once: the payload of every
        synchronization reads it)."""
        return n_coordinates(self.dim)

    @property
    def parties(self) -> int:
        """The parties whose noise the server's view sums: M under secure aggregation, else one."""
        return self.n_agents if self.view == "sum" else 1

    def record_sensitivities(self, relation: str | None = None) -> tuple[float, float]:
        """(Δ_bias, Δ_gram) of one user's record under ``relation`` (default the setting's; Y = 1 if
        rewards are not clipped)."""
        y = 1.0 if self.reward_bound is None else self.reward_bound
        return record_sensitivities(self.feature_bound, y, self.relation if relation is None else relation)

    @property
    def sensitivity(self) -> float:
        """max(Δ_bias, Δ_gram) under the setting's relation (the tree rules' sensitivity)."""
        return max(self.record_sensitivities())

"""The frozen setting a sum protocol's parts are configured for."""

from __future__ import annotations

from dataclasses import dataclass

from fedbandit.accounting.subsampling import amplification_for

__all__ = ["SumSetting"]


@dataclass(frozen=True)
class SumSetting:
    """What a sum protocol's randomizer and analyzer are configured for (no random state).

    Built by :meth:`fedbandit.protocols.SumProtocol.configure`; see it for the fields' meaning:
    n parties, dimension d, T rounds, clipping norm c (None: no clipping), client sampling
    (rate q, scheme), the target (ε, δ) (None: not private), the relation, and the
    intermediary's view and name.
    """

    n_parties: int
    dim: int
    n_rounds: int = 1
    clip: float | None = None
    sampling_rate: float = 1.0
    sampling: str = "fixed"
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

    def clip_norm(self) -> float:
        """c, for a part that clips (``ValueError`` if the protocol has none)."""
        if self.clip is None:
            raise ValueError("the protocol has no clip, the ℓ2 clipping norm c")
        return self.clip

    def clip_sensitivity(self, relation: str) -> float:
        """ℓ2 sensitivity of one round's sum of clipped vectors: c (add/remove one party), 2c (replace one)."""
        c = self.clip_norm()
        return c if relation == "add-remove" else 2.0 * c

    @staticmethod
    def sampling_bound(relation: str) -> str:
        """The amplification-by-sampling bound used under ``relation`` (Poisson for add/remove,
        without replacement for replace; :func:`fedbandit.accounting.subsampling.amplification_for`)."""
        return {"poisson": "Poisson subsampling", "without-replacement": "sampling without replacement"}[
            amplification_for(relation)]

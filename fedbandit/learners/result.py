"""The result types of the learners: :class:`Result` and its bandit form :class:`RunResult`.

Every learner's ``run(env, rng)`` returns a :class:`Result` for its R runs side by side,
and :func:`fedbandit.experiments.run_config` returns the same object, so a chapter reads
every learner's results in the same way: what was communicated, the privacy accounting,
the calibration, learner-specific ``extras`` and the timing.  Every bandit learner returns
a :class:`RunResult` (cumulative group regret at checkpoints); the federated trainer a
:class:`~fedbandit.learners.federated.FederatedResult` (test accuracy over rounds).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from fedbandit._validation import MAX_STEPS, check_array, check_positive_int
from fedbandit.accounting.accountant import Accounting

__all__ = ["Result", "RunResult", "CommunicationRecord", "checkpoint_indices", "time_average_regret"]


def checkpoint_indices(horizon: int, n_checkpoints: int | None) -> np.ndarray:
    """0-based rounds at which a curve is kept: ``n_checkpoints`` equally spaced ones ending at T.

    ``None`` keeps every round.
    """
    horizon = check_positive_int("horizon", horizon, max_value=MAX_STEPS, reason="an array of the rounds is built")
    if n_checkpoints is None:
        return np.arange(horizon)
    n_cp = min(check_positive_int("n_checkpoints", n_checkpoints), horizon)
    return np.unique(np.linspace(horizon / n_cp, horizon, n_cp).astype(int)) - 1


def time_average_regret(regret) -> np.ndarray:
    """Cumulative regret divided by t along the last axis (per-round regret in, the papers' plotted metric out)."""
    regret = check_array("regret", regret, finite=False)
    if regret.ndim < 1:
        raise ValueError(f"regret must have a round axis (the last), got shape {regret.shape}")
    t = np.arange(1, regret.shape[-1] + 1)
    return np.cumsum(regret, axis=-1) / t


@dataclass(frozen=True)
class CommunicationRecord:
    """What the parties sent over a whole run (uplink, all parties), as a learner reports it.

    Attributes
    ----------
    rounds : int or float
        Synchronizations (or consensus rounds); a mean over the runs when they differ (DP20's
        adaptive schedule, with ``rounds_min`` and ``rounds_max``).
    messages : int or float
        Messages sent.
    payload : float
        What they carried, in ``unit``.
    unit : {"floats", "bits"}
    bits : float
        The payload in bits (a float is 64 bits).
    rounds_min, rounds_max : int, optional
        The fewest and most rounds of a run (learners whose runs differ).
    bits_per_coordinate : int, optional
        Bits one party sends per coordinate (the federated learner's sum protocols).
    """

    rounds: int | float = 0
    messages: int | float = 0
    payload: float = 0.0
    unit: str = "floats"
    bits: float = 0.0
    rounds_min: int | None = None
    rounds_max: int | None = None
    bits_per_coordinate: int | None = None

    @classmethod
    def of(cls, communication, **extra) -> CommunicationRecord:
        """The record of a protocol's :class:`~fedbandit.protocols.base.Communication` counters (and ``extra`` fields)."""
        c = communication
        return cls(rounds=c.rounds, messages=c.messages, payload=c.payload, unit=c.payload_unit, bits=c.bits, **extra)

    def as_dict(self) -> dict:
        """The set fields as a dict (the optional ones only when given)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}


@dataclass(kw_only=True)
class Result:
    """What every learner's run reports, whatever it learns (R runs side by side).

    Attributes
    ----------
    communication : CommunicationRecord
        ``rounds`` (synchronizations or consensus rounds), ``messages``, ``payload`` and its
        ``unit``, ``bits`` (uplink, all parties, whole run).
    accounting : fedbandit.accounting.Accounting or None
        The guarantee of the whole run (``status``, ``epsilon``, ``theorem``, ...), the
        learner's own behaviour included (an adaptive schedule or within-batch adaptivity can
        make it "invalid").  Both are frozen records; a result is serialised only where it is
        cached (:func:`fedbandit.experiments.run_grid` pickles it).
    calibration : dict
        Noise parameters and the learner's own (λ, β, ...).
    extras : dict
        Learner-specific outputs (documented by each learner).
    learner, protocol : str
        Names (registry names of the learner family and of the protocol).
    seconds, cpu_seconds, peak_rss_mb : float
        Wall time, CPU time of this process and its peak resident memory (filled by
        :func:`fedbandit.experiments.run_config`).
    """

    communication: CommunicationRecord = field(default_factory=CommunicationRecord)
    accounting: Accounting | None = None
    calibration: dict = field(default_factory=dict)
    extras: dict = field(default_factory=dict)
    learner: str = ""
    protocol: str = ""
    seconds: float = float("nan")
    cpu_seconds: float = float("nan")
    peak_rss_mb: float = float("nan")

    def at_checkpoints(self, n_checkpoints: int | None) -> Result:
        """The result with its curves thinned to ``n_checkpoints`` rounds (a no-op here)."""
        return self


@dataclass(kw_only=True)
class RunResult(Result):
    """Outcome of one vectorized run of a bandit learner (R runs side by side).

    Attributes
    ----------
    t : ndarray (n_checkpoints,)
        Rounds (1-based) at which the curve is recorded; the last is the horizon.
    regret : ndarray (R, n_checkpoints)
        Cumulative pseudo-regret summed over the agents, at the rounds ``t``.
    noise_variance : float
        Per-entry variance of the noise in the server's released statistics (max over time).
    """

    t: np.ndarray
    regret: np.ndarray
    noise_variance: float = 0.0

    @property
    def cum_regret(self) -> np.ndarray:
        """Cumulative regret at the horizon, one value per run (R,)."""
        return self.regret[:, -1]

    @property
    def avg_regret(self) -> np.ndarray:
        """Time-average regret (cumulative regret / t) at the checkpoints, (R, n_checkpoints)."""
        return self.regret / self.t

    @property
    def n_runs(self) -> int:
        return self.regret.shape[0]

    def per_round(self) -> np.ndarray:
        """Per-round regret (R, T), when every round was recorded."""
        if not np.array_equal(self.t, np.arange(1, self.t.size + 1)):
            raise ValueError("per_round() needs a result recorded at every round (checkpoints=None)")
        return np.diff(self.regret, axis=1, prepend=0.0)

    def at_checkpoints(self, n_checkpoints: int | None) -> RunResult:
        """The same result with the curve thinned to ``n_checkpoints`` equally spaced rounds."""
        if n_checkpoints is None or not np.array_equal(self.t, np.arange(1, self.t.size + 1)):
            return self  # every round kept, or already recorded at the learner's own checkpoints
        idx = checkpoint_indices(self.t.size, n_checkpoints)
        out = RunResult(**{k: getattr(self, k) for k in self.__dataclass_fields__})
        out.t, out.regret = self.t[idx], self.regret[:, idx]
        return out

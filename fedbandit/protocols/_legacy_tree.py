"""Privacy protocols P = (R, S, A) through which federated agents reach the server.

Every privacy model of the book is one protocol object (Zhou & Chowdhury 2023, Section 5
and Algorithm 2): a local randomizer R at each agent, an intermediary S (identity,
shuffler, ...) and an analyzer A at the server.  A federated learner hands the protocol,
at every synchronization, the per-agent statistics accumulated since the last one and
gets back the server's (noisy) synchronized prefix sums; it never sees anything else.
So one bandit instance can be run under every privacy model.

The interface (subclass :class:`Protocol` to add a model)
------------------------------------------------------------
``configure(n_agents=M, dim=d, n_batches=K, batch_size=B, feature_bound=L, reward_bound=Y)``
    Called by the learner's constructor: validates the setting and calibrates the noise
    (raises on an inconsistent or invalid one).  No random state.
``reset(n_runs=R, rng=generator)``
    Called at the start of a run: allocates state for R independent runs.  The protocol
    derives its own streams from ``rng`` (``rng.spawn``), so its draws never depend on
    the environment's.
``synchronize(bias, gram, users=None) -> (bias_prefix, gram_prefix)``
    ``bias`` (R, M, d) and ``gram`` (R, M, d, d): agent i's sums Σ x y and Σ x xᵀ over the
    batch just ended (γ^bias_{k,i}, γ^cov_{k,i}).  Returns the server's synchronized
    prefix sums (R, d) and (R, d, d), noisy versions of Σ_i Σ_{s≤t} x y and x xᵀ
    (Ũ_syn, W̃_syn of Algorithm 1).  Protocols with ``needs_user_data = True`` (the
    vector-sum shuffle, whose randomizer acts on every user's record) also receive
    ``users = (x, y)`` with x (B, R, M, d) and y (B, R, M), the batch's individual
    records (y already clipped to the reward bound).  It may be called at most K times;
    nothing requires equally spaced calls (an adaptive learner such as DP20's FedUCB may
    call it whenever it synchronizes, with K an upper bound on the number of calls).
``accounting() -> Accounting``
    (ε, δ) achieved for the configured setting, how it is known ("verified" by the book's
    own accounting, "claimed" by a cited theorem the book does not re-prove, or
    "invalid"), and by which theorem.
``server_noise_std()``, ``prefix_noise_variance(k)``
    σ of Lemma 6.7 (per-entry standard deviation of the total noise in any released prefix
    sum, maximized over k) and the per-entry variance at batch k.
``calibration() -> dict``
    σ₀, σ and the protocol's own parameters, for tables.
``communication``
    A :class:`Communication` counter: synchronization rounds, uplink messages, payload.
``parts() -> dict``
    One-line descriptions of R, S and A.

Protocols here
--------------
:class:`NonPrivateProtocol`, :class:`CentralTreeProtocol` (trusted server, super agent),
:class:`SiloLDPProtocol` (Gaussian distributed tree, S = identity, Thm. 6.1),
:class:`ShuffleAmplificationProtocol` (same tree, S = shuffler, σ₀ from the paper's
amplification lemma, Thm. 6.3), :class:`VectorSumShuffleProtocol` (the shuffle vector-sum
protocol of Cheu et al. 2021 inside every tree node, Thm. 6.5; the overall (ε, δ) split over
the κ nodes, or, as the authors' code does, not split -- flagged as not private).
:class:`DDGSecAggProtocol` (distributed DP without a shuffler: the distributed discrete
Gaussian of Kairouz, Liu & Steinke inside every tree node, summed by secure aggregation).
:class:`DistributedTreeProtocol` is the base of the Gaussian tree protocols.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fedbandit.accounting.composition import advanced_composition, split_budget_advanced
from fedbandit.accounting.zcdp import zcdp_to_approx_dp
from fedbandit._validation import (
    check_choice,
    check_delta,
    check_epsilon,
    check_float_in_range,
    check_int_in_range,
    check_positive_float,
    check_positive_int,
    check_rng,
)
from fedbandit.accounting.amplification import (
    gaussian_epsilon_exact,
    zc_amplification_sigma0,
    zc_amplification_validity,
)
from fedbandit.mechanisms.ddg import DDGMechanism, clip_l2, conditional_randomized_round
from fedbandit.accounting.ddg import ddg_params
from fedbandit.mechanisms.discrete_gaussian import MAX_TABLE_SIGMA
from fedbandit.mechanisms.tree import TreeAnalyzer, TreeMechanism, TreeRandomizer, lowest_set_bit, tree_depth
from fedbandit.mechanisms.tree import prefix_noise_variance as tree_prefix_noise_variance
from fedbandit.accounting.calibration import CALIBRATIONS, ldp_sigma0
from fedbandit.mechanisms.vector_sum import VectorSumShuffle, _binomial
from fedbandit.accounting.calibration import CJMP21_CONSTANT
from fedbandit.protocols.intermediaries import Shuffler
shuffle_messages = Shuffler.permute
from fedbandit.accounting.accountant import Accounting

__all__ = [
    "Communication",
    "Protocol",
    "NonPrivateProtocol",
    "DistributedTreeProtocol",
    "SiloLDPProtocol",
    "ShuffleAmplificationProtocol",
    "CentralTreeProtocol",
    "VectorSumShuffleProtocol",
    "DDGSecAggProtocol",
    "pack_statistics",
    "unpack_statistics",
    "user_records",
]

@dataclass
class Communication:
    """Counters of what agents sent: synchronization rounds, messages, payload."""

    rounds: int = 0
    messages: int = 0
    payload: float = 0.0
    payload_unit: str = "floats"

    def as_dict(self) -> dict:
        return {"rounds": self.rounds, "messages": self.messages, "payload": self.payload, "unit": self.payload_unit}


def pack_statistics(bias: np.ndarray, gram: np.ndarray) -> np.ndarray:
    """Concatenate bias (..., d) and the upper triangle of gram (..., d, d): (..., d + d(d+1)/2)."""
    d = bias.shape[-1]
    iu, ju = np.triu_indices(d)
    return np.concatenate([bias, gram[..., iu, ju]], axis=-1)


def user_records(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Every user's own record (x y, upper triangle of x xᵀ): (..., d) and (...) -> (..., d + d(d+1)/2).

    The per-user form of :func:`pack_statistics`, for protocols whose randomizer acts on
    each record (the vector-sum shuffle, DDG's per-record rounding).
    """
    iu, ju = np.triu_indices(x.shape[-1])
    return np.concatenate([x * y[..., None], x[..., iu] * x[..., ju]], axis=-1)


def unpack_statistics(packed: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`pack_statistics` (the Gram matrix symmetrized)."""
    iu, ju = np.triu_indices(d)
    bias = packed[..., :d]
    gram = np.zeros(packed.shape[:-1] + (d, d))
    gram[..., iu, ju] = packed[..., d:]
    gram[..., ju, iu] = packed[..., d:]
    return bias, gram


class Protocol:
    """Base class of the privacy protocols P = (R, S, A); see the module docstring."""

    name = "protocol"
    model = "none"
    trusted = ""
    needs_user_data = False

    def __init__(self, epsilon=None, delta=None):
        # A private protocol's target (ε, δ), validated before anything else is set up.
        if epsilon is not None:
            self.target_epsilon = check_epsilon(epsilon)
            self.target_delta = check_delta(delta)
        self._configured = False
        self._reset_done = False
        self.communication = Communication()

    # -- configuration -----------------------------------------------------------
    def configure(self, *, n_agents, dim, n_batches, batch_size, feature_bound=1.0, reward_bound=1.0):
        """Validate the setting and calibrate the noise; returns ``self``.

        ``reward_bound=None`` means the learner does not clip rewards: the sensitivity is
        then unknown and private protocols report status "invalid" (they calibrate as if
        |y| ≤ 1, the papers' assumption, which Gaussian rewards violate).
        """
        self.n_agents = check_positive_int("n_agents", n_agents)
        self.dim = check_positive_int("dim", dim)
        self.n_batches = check_positive_int("n_batches", n_batches)
        self.batch_size = check_positive_int("batch_size", batch_size)
        self.horizon = self.n_batches * self.batch_size
        self.feature_bound = check_positive_float("feature_bound", feature_bound)
        self.reward_bound = None if reward_bound is None else check_positive_float("reward_bound", reward_bound)
        self.kappa = tree_depth(self.n_batches)
        y = 1.0 if self.reward_bound is None else self.reward_bound
        # ℓ2 sensitivities of one user's record (add/remove one user): ‖x y‖ ≤ L Y, ‖x xᵀ‖_F ≤ L².
        self.sensitivity_bias = self.feature_bound * y
        self.sensitivity_gram = self.feature_bound**2
        self.sensitivity = max(self.sensitivity_bias, self.sensitivity_gram)
        self._configure()
        self._configured = True
        self._reset_done = False
        return self

    def _configure(self) -> None:
        """Subclass hook: calibrate (no random state)."""

    def _require(self, reset: bool = False) -> None:
        if not self._configured:
            raise RuntimeError(f"{type(self).__name__}.configure(...) must be called first")
        if reset and not self._reset_done:
            raise RuntimeError(f"{type(self).__name__}.reset(n_runs=..., rng=...) must be called before synchronize")

    # -- run state -----------------------------------------------------------------
    def reset(self, *, n_runs, rng):
        """Allocate the state of ``n_runs`` runs and the protocol's random streams."""
        self._require()
        self.n_runs = check_positive_int("n_runs", n_runs)
        rng = check_rng(rng)
        self._noise_rng, self._shuffle_rng = rng.spawn(2)
        self.communication = Communication(payload_unit=self.communication.payload_unit)
        self._k = 0
        self._reset()
        self._reset_done = True
        return self

    def _reset(self) -> None:
        """Subclass hook: allocate state."""

    def synchronize(self, bias, gram, *, users=None):
        """One synchronization (end of batch k); returns (Ũ_syn (R, d), W̃_syn (R, d, d))."""
        self._require(reset=True)
        R, M, d = self.n_runs, self.n_agents, self.dim
        bias = np.asarray(bias, dtype=float)
        gram = np.asarray(gram, dtype=float)
        if bias.shape != (R, M, d):
            raise ValueError(f"bias must have shape (runs, agents, d) = {(R, M, d)}, got {bias.shape}")
        if gram.shape != (R, M, d, d):
            raise ValueError(f"gram must have shape (runs, agents, d, d) = {(R, M, d, d)}, got {gram.shape}")
        if self.needs_user_data:
            if users is None:
                raise ValueError(f"{type(self).__name__} needs users=(x, y), the batch's individual records")
            x, y = users
            x = np.asarray(x, dtype=float)
            y = np.asarray(y, dtype=float)
            if x.ndim != 4 or x.shape[1:] != (R, M, d) or y.shape != x.shape[:3]:
                raise ValueError(f"users must be x (B, {R}, {M}, {d}) and y (B, {R}, {M}), got {x.shape} and {y.shape}")
            users = (x, y)
        if self._k >= self.n_batches:
            raise ValueError(f"the protocol was configured for n_batches={self.n_batches} synchronizations")
        self._k += 1
        out = self._synchronize(bias, gram, users)
        self.communication.rounds += 1
        return out

    def _synchronize(self, bias, gram, users):  # pragma: no cover - abstract
        raise NotImplementedError

    # -- reports ---------------------------------------------------------------------
    def accounting(self) -> Accounting:  # pragma: no cover - abstract
        raise NotImplementedError

    def prefix_noise_variance(self, k) -> float:
        """Per-entry variance of the noise in the prefix sums released at batch k."""
        return 0.0

    def _verified_accounting(self, epsilon: float, theorem: str, notes: str) -> Accounting:
        """The accounting of a protocol whose ε the book computes itself: "verified" when it
        meets the target (up to root-finding tolerance) for clipped rewards, else "invalid"."""
        ok = epsilon <= self.target_epsilon * (1 + 1e-6) and self.reward_bound is not None
        return Accounting(
            self.model,
            self.target_epsilon,
            self.target_delta,
            epsilon,
            self.target_delta,
            "verified" if ok else "invalid",
            theorem,
            notes,
        )

    def server_noise_std(self) -> float:
        """σ of Lemma 6.7: max over k of the per-entry noise standard deviation."""
        self._require()
        return 0.0

    def calibration(self) -> dict:
        """σ₀ (per party and node), σ and the total per-entry variance σ² at the server; subclasses add their own."""
        self._require()
        sigma = self.server_noise_std()
        return {
            "protocol": self.name,
            "model": self.model,
            "kappa": self.kappa,
            "sigma0": getattr(self, "sigma0", 0.0),
            "sigma": sigma,
            "total_variance": sigma**2,
        }

    def parts(self) -> dict:
        return {"R": "", "S": "", "A": ""}

    def _bounds_note(self) -> str:
        if self.reward_bound is None:
            return (
                "rewards are not clipped: the calibration assumes |y| ≤ 1 and ‖x‖ ≤ 1, which unbounded "
                "(Gaussian) rewards violate, so no guarantee holds"
            )
        return f"for users with ‖x‖ ≤ {self.feature_bound:g} and |y| ≤ {self.reward_bound:g} (the learner clips y)"

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class NonPrivateProtocol(Protocol):
    """No privacy: R sends the batch sums, S = identity, A adds them up.

    The server sees every agent's exact statistics (the non-private federated LinUCB).
    """

    name = "non-private"
    model = "none"
    trusted = "everyone (no privacy)"

    def _reset(self):
        R, d = self.n_runs, self.dim
        self._bias = np.zeros((R, d))
        self._gram = np.zeros((R, d, d))
        self.communication.payload_unit = "floats"

    def _synchronize(self, bias, gram, users):
        self._bias += bias.sum(axis=1)
        self._gram += gram.sum(axis=1)
        M, d = self.n_agents, self.dim
        self.communication.messages += M
        self.communication.payload += M * (d + d * (d + 1) // 2)
        return self._bias.copy(), self._gram.copy()

    def accounting(self) -> Accounting:
        self._require()
        return Accounting("none", math.inf, 0.0, math.inf, 0.0, "none", "no privacy", "")

    def parts(self) -> dict:
        return {"R": "send the batch sums Σxy, Σxxᵀ", "S": "identity", "A": "add them to the running totals"}


class DistributedTreeProtocol(Protocol):
    """Algorithm 2 of Zhou & Chowdhury with Gaussian node noise: the base of LDP and SDP-amp.

    R (every agent, per statistic): at batch k with j = ν(k) the lowest set bit of k,
    α_j = Σ_{l<j} α_l + γ_k, release α̂_j = α_j + N(0, σ₀²) entrywise (symmetric for the Gram
    matrix) -- :class:`fedbandit.mechanisms.tree.TreeRandomizer`.  S: identity or a
    shuffler.  A: α̃_j = Σ_i α̂_{j,i}, prefix s̃_k = Σ_{bits l of k} α̃_l --
    :class:`fedbandit.mechanisms.tree.TreeAnalyzer`.

    The server's prefix noise at batch k has per-entry variance M·popcount(k)·σ₀², at most
    Mκσ₀² (Lemma 6.7's σ² with independent entries, symmetric for the Gram matrix).
    Subclasses set :meth:`_sigma0`; a different distributed noise (for example discrete
    Gaussian with secure aggregation) overrides :meth:`_aggregate`.
    """

    shuffle = False

    def _sigma0(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def _configure(self):
        self.sigma0 = float(self._sigma0())

    def _reset(self):
        R, M, d, K = self.n_runs, self.n_agents, self.dim, self.n_batches
        self._rand_bias = TreeRandomizer(K, (d,), self.sigma0, batch_shape=(R, M))
        self._rand_gram = TreeRandomizer(K, (d, d), self.sigma0, batch_shape=(R, M), symmetric=True)
        self._an_bias = TreeAnalyzer(K, (d,), batch_shape=(R,))
        self._an_gram = TreeAnalyzer(K, (d, d), batch_shape=(R,))
        self.communication.payload_unit = "floats"

    def _aggregate(self, j, alpha_bias, alpha_gram):
        """S then the first step of A: shuffle (if any) and sum the M noisy p-sums."""
        if self.shuffle:
            alpha_bias, alpha_gram = shuffle_messages(self._shuffle_rng, alpha_bias, alpha_gram)
        return alpha_bias.sum(axis=1), alpha_gram.sum(axis=1)

    def _synchronize(self, bias, gram, users):
        j, a_bias = self._rand_bias.release(bias, self._noise_rng)
        j2, a_gram = self._rand_gram.release(gram, self._noise_rng)
        assert j == j2
        s_bias, s_gram = self._aggregate(j, a_bias, a_gram)
        M, d = self.n_agents, self.dim
        self.communication.messages += M
        self.communication.payload += M * (d + d * (d + 1) // 2)
        return self._an_bias.update(j, s_bias), self._an_gram.update(j, s_gram)

    def prefix_noise_variance(self, k) -> float:
        self._require()
        return self.n_agents * tree_prefix_noise_variance(check_positive_int("k", k), self.sigma0)

    def server_noise_std(self) -> float:
        self._require()
        return math.sqrt(self.n_agents * self.kappa) * self.sigma0


class _GaussianTreeCalibration:
    """The (ε, δ, calibration) settings and σ₀ rule shared by the silo-LDP and central
    protocols (Zhou & Chowdhury, Thm. 6.1; :func:`fedbandit.accounting.calibration.ldp_sigma0`)."""

    def __init__(self, epsilon, delta, *, calibration="paper"):
        super().__init__(epsilon, delta)
        self.calibration_rule = check_choice("calibration", calibration, CALIBRATIONS)
        self.name = f"{self.model}(ε={self.target_epsilon:g})"

    def _verified_epsilon(self) -> tuple[float, float]:
        """(ρ, ε) of one party's κ node releases of both statistics (zCDP, [BS16] + [CKS20])."""
        rho = self.kappa * (self.sensitivity_bias**2 + self.sensitivity_gram**2) / (2.0 * self.sigma0**2)
        return rho, zcdp_to_approx_dp(rho, self.target_delta)

    def _calibrated_sigma0(self) -> float:
        return ldp_sigma0(
            self.target_epsilon,
            self.target_delta,
            self.n_batches,
            calibration=self.calibration_rule,
            sensitivity=self.sensitivity,
        )


class SiloLDPProtocol(_GaussianTreeCalibration, DistributedTreeProtocol):
    """Silo-level LDP (Zhou & Chowdhury, Thm. 6.1): Gaussian distributed tree, S = identity.

    σ₀² = 8κ(log(2/δ) + ε)/ε² per agent and node [paper] (``calibration="paper"``), or the
    authors' code's σ₀ = sqrt(κ(log(1/δ) + ε))/ε (``calibration="authors"``), times the
    sensitivity max(LY, L²).  The accounting is verified: one user changes one leaf of its
    agent's streams, hence at most κ p-sums of each statistic, each a Gaussian mechanism
    with ℓ2 sensitivity LY (bias) or L² (Gram): ρ = κ((LY)² + L⁴)/(2σ₀²)-zCDP
    ([BS16], Prop. 1.6 and Lemma 2.3), converted to (ε, δ) with [CKS20].  Holds against
    the server and every other agent, whatever they do (silo-level LDP).

    Parameters
    ----------
    epsilon : float > 0
    delta : float in (0, 1)
    calibration : {"paper", "authors"}
    """

    name = "silo-LDP"
    model = "silo-LDP"
    trusted = "own silo only"

    def _sigma0(self):
        return self._calibrated_sigma0()

    def accounting(self) -> Accounting:
        self._require()
        rho, eps = self._verified_epsilon()
        theorem = (
            f"Zhou & Chowdhury Thm 6.1 calibration ({self.calibration_rule}); verified: zCDP over κ={self.kappa} "
            f"nodes × 2 statistics, ρ={rho:.3g} [BS16], converted by [CKS20]"
        )
        return self._verified_accounting(eps, theorem, self._bounds_note())

    def parts(self) -> dict:
        return {
            "R": "per statistic: p-sum α_j of the tree node closing at batch k, plus N(0, σ₀²) (symmetric for Gram)",
            "S": "identity (silo-level LDP: no trusted party)",
            "A": "sum the M noisy p-sums; prefix = Σ over the set bits of k",
        }

    def __repr__(self):
        return f"SiloLDPProtocol(epsilon={self.target_epsilon!r}, delta={self.target_delta!r}, calibration={self.calibration_rule!r})"


class ShuffleAmplificationProtocol(DistributedTreeProtocol):
    """SDP by amplification (Zhou & Chowdhury, Thm. 6.3): the LDP tree plus a shuffler.

    Each agent adds N(0, σ₀²) with σ₀ from the paper's Gaussian amplification lemma
    (Appendix E; :func:`fedbandit.accounting.amplification.zc_amplification_sigma0`, ``variant``
    "authors" [authors' code], "recalled", or "ideal" = σ₀(LDP)/sqrt(M)), about 1/sqrt(M)
    of the LDP noise; S is a uniformly random permutation of the M agents' messages.

    Accounting.  The (ε, δ) is *claimed* by the lemma, which the book cannot re-derive (its
    statement is not in the available text), subject to two checks:

    * validity region (:func:`fedbandit.accounting.amplification.zc_amplification_validity`):
      :meth:`configure` raises :class:`~fedbandit.accounting.amplification.AmplificationValidityError`
      outside it unless ``force=True``, which warns and makes the status "unproven";
    * a necessary condition: the server can add up the shuffled messages, and that sum is
      a Gaussian mechanism with noise sqrt(M)·σ₀ per node over the κ nodes a user enters,
      whose exact ε (:func:`fedbandit.accounting.amplification.gaussian_epsilon_exact`) bounds the
      protocol's ε from below.  If it exceeds the target, the status is "invalid" and the
      reported ε is that lower bound.

    Parameters
    ----------
    epsilon, delta : float
    variant : {"authors", "recalled", "ideal"}
    force : bool, default False
    """

    name = "SDP-amp"
    model = "SDP"
    trusted = "the shuffler (not to collude with the server)"
    shuffle = True

    def __init__(self, epsilon, delta, *, variant="authors", force=False):
        super().__init__(epsilon, delta)
        self.variant = check_choice("variant", variant, ("authors", "recalled", "ideal"))
        self.force = bool(force)
        tag = "" if self.variant == "authors" else f"-{self.variant}"
        self.name = f"SDP-amp{tag}(ε={self.target_epsilon:g})"

    def _sigma0(self):
        self.validity = zc_amplification_validity(
            self.target_epsilon, self.target_delta, self.n_agents, self.n_batches, self.horizon, self.variant
        )
        return zc_amplification_sigma0(
            self.target_epsilon,
            self.target_delta,
            self.n_agents,
            self.n_batches,
            self.horizon,
            variant=self.variant,
            sensitivity=self.sensitivity,
            force=self.force,
        )

    def sum_epsilon(self) -> float:
        """Exact ε of the server's sum of the shuffled messages: a lower bound on the protocol's ε."""
        self._require()
        mu = math.sqrt(self.kappa * (self.sensitivity_bias**2 + self.sensitivity_gram**2)) / (
            math.sqrt(self.n_agents) * self.sigma0
        )
        return gaussian_epsilon_exact(mu, self.target_delta)

    def accounting(self) -> Accounting:
        self._require()
        valid = all(c.holds for c in self.validity)
        eps_sum = self.sum_epsilon()
        notes = [self._bounds_note()]
        theorem = f"Zhou & Chowdhury Thm 6.3 via their Gaussian amplification lemma (App. E) [recalled], σ₀ {self.variant}"
        if eps_sum > self.target_epsilon * (1 + 1e-9):
            status, eps = "invalid", eps_sum
            notes.insert(
                0,
                f"NOT private: the server's sum of the shuffled messages alone is only ({eps_sum:.3g}, δ)-DP "
                f"(exact Gaussian profile [BW18]) > ε={self.target_epsilon:g}",
            )
        elif not valid:
            status, eps = "unproven", math.nan
            failed = "; ".join(str(c) for c in self.validity if not c.holds)
            notes.insert(0, f"forced outside the lemma's validity region: {failed}")
        elif self.variant == "ideal":
            status, eps = "unproven", math.nan
            notes.insert(0, "idealized σ₀ = σ₀(LDP)/sqrt(M), without the lemma's logarithmic factors: not a proven guarantee")
        else:
            status, eps = ("claimed" if self.reward_bound is not None else "invalid"), self.target_epsilon
        return Accounting(self.model, self.target_epsilon, self.target_delta, eps, self.target_delta, status, theorem, "; ".join(notes))

    def calibration(self) -> dict:
        out = super().calibration()
        out["valid"] = all(c.holds for c in self.validity)
        out["sum_epsilon"] = self.sum_epsilon()
        return out

    def parts(self) -> dict:
        return {
            "R": "as silo-LDP but with σ₀ from the amplification lemma (≈ 1/sqrt(M) of it)",
            "S": "shuffler: uniformly random permutation of the M agents' messages",
            "A": "sum the M noisy p-sums; prefix = Σ over the set bits of k",
        }

    def __repr__(self):
        return (
            f"ShuffleAmplificationProtocol(epsilon={self.target_epsilon!r}, delta={self.target_delta!r}, "
            f"variant={self.variant!r}, force={self.force!r})"
        )


class CentralTreeProtocol(_GaussianTreeCalibration, Protocol):
    """Central DP with a trusted server: the super single agent's tree mechanism.

    Agents send their exact batch sums (S = identity); the trusted server adds them and
    runs one central tree mechanism (:class:`fedbandit.mechanisms.tree.TreeMechanism`) over
    the summed stream, with node noise σ of the same calibration as silo-level LDP's σ₀
    (:func:`fedbandit.accounting.calibration.central_sigma`) -- added once instead of M times, so
    the prefix noise variance is κσ² rather than Mκσ₀².  Verified like
    :class:`SiloLDPProtocol` (one user changes one leaf of the summed stream).  With batch
    size 1 in :class:`~fedbandit.learners.fixed_batch.FixedBatchFedLinUCB` this is the
    paper's benchmark: a super agent serving all MT users with per-round updates.
    """

    name = "central"
    model = "central"
    trusted = "the server"

    def _configure(self):
        self.sigma0 = self._calibrated_sigma0()

    def _reset(self):
        R, d, K = self.n_runs, self.dim, self.n_batches
        self._tree_bias = TreeMechanism(K, (d,), self.sigma0, batch_shape=(R,))
        self._tree_gram = TreeMechanism(K, (d, d), self.sigma0, batch_shape=(R,), symmetric=True)
        self.communication.payload_unit = "floats"

    def _synchronize(self, bias, gram, users):
        out = self._tree_bias.step(bias.sum(axis=1), self._noise_rng), self._tree_gram.step(gram.sum(axis=1), self._noise_rng)
        M, d = self.n_agents, self.dim
        self.communication.messages += M
        self.communication.payload += M * (d + d * (d + 1) // 2)
        return out

    def prefix_noise_variance(self, k) -> float:
        self._require()
        return tree_prefix_noise_variance(check_positive_int("k", k), self.sigma0)

    def server_noise_std(self) -> float:
        self._require()
        return math.sqrt(self.kappa) * self.sigma0

    def accounting(self) -> Accounting:
        self._require()
        rho, eps = self._verified_epsilon()
        return self._verified_accounting(
            eps,
            f"central tree [DNPR10, CSS11]; verified: zCDP over κ={self.kappa} nodes × 2 statistics, ρ={rho:.3g}, [CKS20]",
            "against everyone but the trusted server; " + self._bounds_note(),
        )

    def parts(self) -> dict:
        return {
            "R": "send the exact batch sums (the server is trusted)",
            "S": "identity",
            "A": "central tree mechanism over the summed stream: noise N(0, σ²) per node, once",
        }

    def __repr__(self):
        return f"CentralTreeProtocol(epsilon={self.target_epsilon!r}, delta={self.target_delta!r})"


# ---------------------------------------------------------------------------------
# Shuffle vector summation (Cheu, Joseph, Mao & Peng 2021) inside the tree
# ---------------------------------------------------------------------------------

#: ``bits="auto"`` of :class:`DDGSecAggProtocol`: the rounding variance of the largest node
#: may be at most this share of its privacy-noise variance.
AUTO_BITS_ROUNDING_SHARE = 0.01

class VectorSumShuffleProtocol(Protocol):
    """SDP via the shuffle vector-sum protocol inside every tree node (Zhou & Chowdhury, Thm. 6.5).

    Every user's record (x y, upper triangle of x xᵀ) -- D = d + d(d+1)/2 coordinates in
    [−1, 1] -- is encoded by the vector-sum randomizer (:class:`VectorSumShuffle`) for each
    tree node containing its round; the node at level j closing at batch k holds the
    n_j = 2^j·B·M users of batches k − 2^j + 1..k of all agents; the shuffler mixes all
    their messages and the analyzer estimates the node's p-sum; prefix sums add the nodes
    of the set bits of k, as in the Gaussian tree.

    Budget.  A user takes part in κ nodes.  ``split="advanced"``: each node runs at
    (ε₀, δ₀) = :func:`fedbandit.accounting.composition.split_budget_advanced` (ε, δ, κ), so the κ
    nodes compose to (ε, δ) [DRV10] -- private when the constant is the theorem's.
    ``split="none"`` (the authors' code): every node runs at the full (ε, δ); the
    composition then only gives (ε_κ, δ_κ) with ε_κ ≫ ε -- flagged "invalid".

    Implementation [derived].  One g for all levels, g = max(⌈2 sqrt(n_max)⌉, D, 4) with
    n_max the largest node (g ≥ the minimum at every level, which keeps every node's
    theorem conditions), b_j = ⌈c g² log²(4D²/δ₀)/(ε₀² n_j)⌉ per level; and each user's
    randomized rounding ⌊z g⌋ + η₁ is drawn once and reused by the κ nodes containing it
    (a per-record randomized pre-processing, after which the κ node mechanisms compose;
    every node's output alone has exactly the protocol's distribution).  The binomial
    noise bits of a node are drawn in aggregate (see :class:`VectorSumShuffle`).

    Parameters
    ----------
    epsilon, delta : float
        Overall target (δ < 1/2).
    split : {"advanced", "none"}
    constant : float, default :data:`CJMP21_CONSTANT`
        c in b; the authors' experiments use 1 ("scale"), not covered by the theorem.
    """

    name = "SDP-vecsum"
    model = "SDP"
    trusted = "the shuffler (not to collude with the server)"
    needs_user_data = True

    def __init__(self, epsilon, delta, *, split="advanced", constant=CJMP21_CONSTANT):
        super().__init__(epsilon, delta)
        if self.target_delta >= 0.5:
            raise ValueError(f"delta must lie in (0, 0.5) for the vector-sum protocol, got {delta!r}")
        self.split = check_choice("split", split, ("advanced", "none"))
        self.constant = check_positive_float("constant", constant)
        self.p = 0.25
        tag = "split" if self.split == "advanced" else "unsplit"
        self.name = f"SDP-vecsum-{tag}(ε={self.target_epsilon:g})"

    def _configure(self):
        if self.reward_bound is not None and self.feature_bound * self.reward_bound > 1.0 + 1e-12:
            raise ValueError(
                f"the vector-sum protocol encodes coordinates in [-1, 1]: needs feature_bound*reward_bound <= 1, "
                f"got {self.feature_bound}*{self.reward_bound}"
            )
        if self.feature_bound > 1.0 + 1e-12:
            raise ValueError(f"the vector-sum protocol needs feature_bound <= 1, got {self.feature_bound}")
        d = self.dim
        self.coord_dim = d + d * (d + 1) // 2
        if self.split == "advanced":
            self.eps_node, self.delta_node = split_budget_advanced(self.target_epsilon, self.target_delta, self.kappa)
        else:
            self.eps_node, self.delta_node = self.target_epsilon, self.target_delta
        if self.eps_node > 15:
            raise ValueError(f"the per-node epsilon {self.eps_node:g} exceeds the vector-sum protocol's range (0, 15]")
        users_per_batch = self.batch_size * self.n_agents
        self.level_users = [users_per_batch * 2**j for j in range(self.kappa)]
        g = max(math.ceil(2 * math.sqrt(self.level_users[-1])), self.coord_dim, 4)
        self.levels = [
            VectorSumShuffle(self.eps_node, self.delta_node, n, self.coord_dim, g=g, constant=self.constant)
            for n in self.level_users
        ]
        self.g = g

    def _reset(self):
        R = self.n_runs
        self._alpha = np.zeros((self.kappa, R, self.coord_dim))
        self._an = TreeAnalyzer(self.n_batches, (self.coord_dim,), batch_shape=(R,))
        self.communication.payload_unit = "bits"

    def _synchronize(self, bias, gram, users):
        x, y = users
        d = self.dim
        v = user_records(x, y)  # (B, R, M, D)
        B, R, M, D = v.shape
        # Users of this batch: rounding drawn once per user, summed over users (B and M axes).
        counts = self.levels[0].rounded_counts(v.transpose(0, 2, 1, 3).reshape(B * M, R, D), self._noise_rng)
        k = self._k
        j = lowest_set_bit(k)
        alpha_j = self._alpha[:j].sum(axis=0) + counts
        self._alpha[:j] = 0.0
        self._alpha[j] = alpha_j
        mech = self.levels[j]
        ones = alpha_j + _binomial(self._noise_rng, mech.n_users * mech.b, self.p, (R, D))
        est = mech.analyze(ones)
        prefix = self._an.update(j, est)
        self.communication.messages += mech.n_users * D
        self.communication.payload += float(mech.n_users) * D * (mech.g + mech.b)
        return unpack_statistics(prefix, d)

    def node_noise_std(self, level: int) -> float:
        """Per-coordinate noise std of a node at ``level`` (binomial part, output units)."""
        self._require()
        return self.levels[level].noise_std()

    def prefix_noise_variance(self, k) -> float:
        self._require()
        k = check_positive_int("k", k)
        return float(sum(self.levels[j].noise_std() ** 2 for j in range(k.bit_length()) if k >> j & 1))

    def server_noise_std(self) -> float:
        self._require()
        return math.sqrt(self.kappa) * max(m.noise_std() for m in self.levels)

    def calibration(self) -> dict:
        return {
            **super().calibration(),
            "sigma0": max(m.noise_std() for m in self.levels),
            "eps_node": self.eps_node,
            "delta_node": self.delta_node,
            "g": self.g,
            "b_levels": [m.b for m in self.levels],
            "constant": self.constant,
        }

    def accounting(self) -> Accounting:
        self._require()
        covered = self.constant >= CJMP21_CONSTANT
        notes = [self._bounds_note()]
        if self.split == "advanced":
            eps, delta = self.target_epsilon, self.target_delta
            status = "claimed" if covered and self.reward_bound is not None else "invalid"
            theorem = (
                f"CJMP21 vector sum per node at (ε₀={self.eps_node:.4g}, δ₀={self.delta_node:.3g}) [recalled], "
                f"composed over κ={self.kappa} nodes by advanced composition [DRV10]"
            )
        else:
            # Each user is in κ nodes, each (ε, δ): the best composition bound the book knows.
            basic = (self.kappa * self.target_epsilon, self.kappa * self.target_delta)
            adv = advanced_composition(self.target_epsilon, self.target_delta, self.kappa, self.target_delta)
            eps, delta = min([basic, adv], key=lambda p: p[0])
            status = "invalid"
            theorem = f"CJMP21 vector sum per node at the full (ε, δ), composed over κ={self.kappa} nodes"
            notes.append(f"the budget is not split across the κ={self.kappa} nodes (authors' code): NOT (ε, δ)-private")
        if not covered:
            status = "invalid"
            notes.append(f"b uses constant c={self.constant:g} < {CJMP21_CONSTANT:g} of the theorem: privacy not established")
        return Accounting(self.model, self.target_epsilon, self.target_delta, eps, delta, status, theorem, "; ".join(notes))

    def parts(self) -> dict:
        return {
            "R": "per user and coordinate: ⌊zg⌋+η₁ unary bits plus b Ber(1/4) bits (vector-sum randomizer), per tree node",
            "S": "shuffler: mixes all messages of the node's n_j users",
            "A": "count ones per coordinate, debias; prefix = Σ over the set bits of k",
        }

    def __repr__(self):
        return (
            f"VectorSumShuffleProtocol(epsilon={self.target_epsilon!r}, delta={self.target_delta!r}, "
            f"split={self.split!r}, constant={self.constant!r})"
        )


# ---------------------------------------------------------------------------------
# Distributed discrete Gaussian with secure aggregation (Kairouz, Liu & Steinke 2021)
# ---------------------------------------------------------------------------------


class DDGSecAggProtocol(Protocol):
    r"""Distributed DP with an untrusted server: the DDG mechanism inside every tree node.

    The distributed discrete Gaussian of Kairouz, Liu & Steinke [KLS21] (ICML 2021, Alg. 1
    and Thm. 1) run as the node mechanism of the distributed tree of Zhou & Chowdhury
    (Algorithm 2).  No shuffler and no trusted server: the agents' messages are summed
    by secure aggregation [BIK+17], so the server learns only Σ_i of the agents' noisy,
    modularly reduced node p-sums.

    R (agent i).  Every user record v = (x y, upper triangle of x xᵀ) ∈ ℝ^D, D = d + d(d+1)/2,
    is clipped to ℓ2 norm c = sqrt((LY)² + L⁴), flattened by the shared random rotation,
    scaled by 1/γ and conditionally rounded to the integer grid (norm ≤ Δ₂/γ, [KLS21]
    Sec. 4.1) -- once, when the record arrives.  The leaf γ_k is the integer sum of the
    batch's rounded records; the agent keeps integer p-sums as in Algorithm 2 and at batch
    k releases α̂_j = α_j + N_Z(0, σ²/γ²) (exact discrete Gaussian per coordinate) mod m = 2^bits.
    S: secure aggregation, Σ_i α̂_{j,i} mod m (``secure_aggregation="ideal"`` computes the
    modular sum directly; ``"real"`` runs the four-round protocol of
    :func:`fedbandit.secagg.protocol.run_secagg` per run -- the same output, slowly).
    A: modular clipping to [−m/2, m/2), unflattening, rescaling by γ, unpacking; prefix
    sums from the p-sums of the set bits of k (:class:`~fedbandit.mechanisms.tree.TreeAnalyzer`).

    Privacy (verified by the book's accounting).  One user changes its agent's integer
    leaf by its rounded record, norm ≤ Δ₂/γ (add/remove), hence κ node sums; each node
    release is the sum of M agents' discrete Gaussians -- [KLS21] Prop. 14 (RDP of sums of
    discrete Gaussians, with the τ term) with n = M, composed over κ releases and converted
    to (ε, δ) (:func:`fedbandit.accounting.ddg.ddg_epsilon`, ``steps=κ``).  σ is the smallest
    meeting the target; γ is chosen so that 2^bits·γ covers ±k standard deviations of the
    largest node sum (:func:`fedbandit.accounting.ddg.ddg_params` with ``n = M`` noise
    parties and ``n_signal`` = the largest node's number of user records).  The guarantee
    holds against the server and anyone who sees the aggregate, if all M agents add their
    noise (a dropped or colluding agent's noise is missing: ε then grows, see
    :meth:`DDGParams.epsilon_for`).

    Parameters
    ----------
    epsilon, delta : float
        Overall target for the whole run (all κ node releases).
    bits : int or "auto", default "auto"
        Bits per coordinate sent to secure aggregation (modulus 2^bits).  The node sums
        grow with the number of users they hold (up to B·M·2^{κ−1}), so the bandit needs
        more bits than one-shot mean estimation for the rounding to stay negligible.
        ``"auto"``: the smallest even width whose rounding variance (:meth:`rounding_variance`)
        is at most :data:`AUTO_BITS_ROUNDING_SHARE` of the node's privacy-noise variance Mσ²
        [reconstruction: the book's rule; [KLS21] pick bits for a one-shot sum].
    k : float, default 3
        Standard deviations of the aggregate covered by the modular range.
    beta : float, default e^{−1/2}
        Conditional rounding parameter.
    flatten : {"hadamard", "dft"}
    norm_growth : {"conservative", "optimistic"}
        Signal term of the range condition: the largest node's norm bound n_s·c or sqrt(n_s)·c.
    secure_aggregation : {"ideal", "real"}
    flatten_seed : int
        Public randomness of the shared rotation.
    """

    name = "DDG-SecAgg"
    model = "distributed"
    trusted = "no one (honest-but-curious server; all agents add their noise)"
    needs_user_data = True

    def __init__(
        self,
        epsilon,
        delta,
        *,
        bits="auto",
        k=3.0,
        beta=math.exp(-0.5),
        flatten="hadamard",
        norm_growth="conservative",
        secure_aggregation="ideal",
        flatten_seed=0,
    ):
        super().__init__(epsilon, delta)
        self.bits_rule = "auto" if isinstance(bits, str) and bits == "auto" else check_int_in_range("bits", bits, 2, 62)
        self.k_std = check_positive_float("k", k)
        self.beta = check_float_in_range("beta", beta, 0.0, 1.0, high_inclusive=False)
        self.flatten = check_choice("flatten", flatten, ("hadamard", "dft"))
        self.norm_growth = check_choice("norm_growth", norm_growth, ("conservative", "optimistic"))
        self.secure_aggregation = check_choice("secure_aggregation", secure_aggregation, ("ideal", "real"))
        self.flatten_seed = int(flatten_seed)
        self.name = f"DDG-SecAgg(ε={self.target_epsilon:g})"

    def _params_for(self, bits: int):
        return ddg_params(
            bits,
            self.k_std,
            self.n_agents,
            self.coord_dim,
            self.clip,
            self.target_epsilon,
            self.target_delta,
            self.beta,
            norm_growth=self.norm_growth,
            flatten=self.flatten,
            steps=self.kappa,
            n_signal=self.max_node_users,
        )

    def _configure(self):
        d = self.dim
        self.coord_dim = d + d * (d + 1) // 2
        self.clip = math.hypot(self.sensitivity_bias, self.sensitivity_gram)
        self.max_node_users = self.batch_size * self.n_agents * 2 ** (self.kappa - 1)
        if self.bits_rule == "auto":
            lowest = max(4, 2 * math.ceil(math.log2(self.max_node_users * self.k_std**2) / 4) + 2)
            for bits in range(lowest, 49, 2):
                try:
                    params = self._params_for(bits)
                except ValueError:  # this width cannot cover the aggregate at all: try a wider one
                    continue
                rounding = self.max_node_users * params.gamma**2 / 4.0
                if rounding <= AUTO_BITS_ROUNDING_SHARE * self.n_agents * params.sigma**2:
                    break
            else:  # pragma: no cover - 48 bits always suffice for the book's settings
                raise ValueError("bits='auto' found no width up to 48 bits; pass bits explicitly")
            self.params = params
        else:
            self.params = self._params_for(self.bits_rule)
        self.bits = self.params.bits
        # int64 modular sums and float64-exact integer p-sums must not overflow.
        if self.bits + math.log2(self.n_agents) > 62 or self.params.delta2_int * self.max_node_users > 2.0**52:
            raise ValueError(
                f"bits={self.bits} with n_agents={self.n_agents} overflows the 64-bit integer aggregation; use fewer bits"
            )
        if self.params.sigma_int > MAX_TABLE_SIGMA:
            raise ValueError(
                f"bits={self.bits} gives a discrete Gaussian scale sigma/gamma={self.params.sigma_int:.4g} above the "
                f"fast exact sampler's limit {MAX_TABLE_SIGMA:g}; use fewer bits"
            )
        self.mechanism = DDGMechanism(self.params, self.flatten_seed)
        self.sigma0 = self.params.sigma
        if self.secure_aggregation == "real" and self.n_agents < 2:
            raise ValueError(f"secure_aggregation='real' needs n_agents >= 2, got {self.n_agents}")

    def _reset(self):
        R, M = self.n_runs, self.n_agents
        self._rand = TreeRandomizer(
            self.n_batches, (self.params.d_pad,), self.params.sigma_int, batch_shape=(R, M), noise="discrete_gaussian"
        )
        self._an = TreeAnalyzer(self.n_batches, (self.coord_dim,), batch_shape=(R,))
        self.communication.payload_unit = "bits"

    def _encode_users(self, x, y) -> np.ndarray:
        """Clip, flatten, scale and conditionally round every user record; sum per agent (R, M, d')."""
        v = user_records(x, y)  # (B, R, M, D)
        flat = self.mechanism.flattener.flatten(clip_l2(v, self.clip)) / self.params.gamma
        rounded = conditional_randomized_round(flat, self.params.delta2_int, self._noise_rng)
        return rounded.sum(axis=0).astype(np.float64)

    def _secure_sum(self, residues: np.ndarray) -> np.ndarray:
        """S: Σ over agents mod m, ideal or by the real four-round secure aggregation."""
        if self.secure_aggregation == "ideal":
            return self.mechanism.aggregate(residues)
        from fedbandit.secagg.protocol import run_secagg

        M = self.n_agents
        threshold = M // 2 + 1
        return np.stack([run_secagg(r, bits=self.bits, threshold=threshold).total for r in residues])

    def _synchronize(self, bias, gram, users):
        x, y = users
        leaf = self._encode_users(x, y)
        j, alpha_hat = self._rand.release(leaf, self._noise_rng)
        residues = np.mod(alpha_hat, self.params.modulus).astype(np.int64)  # (R, M, d')
        node = self.mechanism.decode(self._secure_sum(residues))  # (R, D): Σ_i α̂_{j,i}, original units
        prefix = self._an.update(j, node)
        M = self.n_agents
        self.communication.messages += M
        self.communication.payload += float(M) * self.params.d_pad * self.bits
        return unpack_statistics(prefix, self.dim)

    def prefix_noise_variance(self, k) -> float:
        """Privacy-noise variance per entry at batch k, M·popcount(k)·σ² (rounding excluded)."""
        self._require()
        return self.n_agents * tree_prefix_noise_variance(check_positive_int("k", k), self.sigma0)

    def rounding_variance(self) -> float:
        """Upper bound on the rounding variance per entry of the largest node sum, n_s·γ²/4."""
        self._require()
        return self.max_node_users * self.params.gamma**2 / 4.0

    def server_noise_std(self) -> float:
        self._require()
        return math.sqrt(self.n_agents * self.kappa) * self.sigma0

    def calibration(self) -> dict:
        out = super().calibration()
        p = self.params
        return {
            **out,
            "bits": self.bits,
            "gamma": p.gamma,
            "sigma_int": p.sigma_int,
            "delta2": p.delta2,
            "d_pad": p.d_pad,
            "rounding_variance": self.rounding_variance(),
        }

    def accounting(self) -> Accounting:
        self._require()
        eps = self.params.epsilon_for(self.n_agents)
        return self._verified_accounting(
            eps,
            f"DDG sums of M={self.n_agents} discrete Gaussians [KLS21, Prop. 14], RDP over κ={self.kappa} nodes, "
            "converted [CKS20]; SecAgg [BIK+17]",
            "against the server and any observer of the aggregate, if all agents add noise; " + self._bounds_note(),
        )

    def parts(self) -> dict:
        return {
            "R": "round each user record to the γ-grid (clip, flatten, conditional rounding); per tree node add "
            "discrete Gaussian noise N_Z(0, σ²/γ²), reduce mod 2^bits",
            "S": "secure aggregation: the server learns only the modular sum over agents",
            "A": "modular clipping, unflatten, ×γ; prefix = Σ over the set bits of k",
        }

    def __repr__(self):
        return (
            f"DDGSecAggProtocol(epsilon={self.target_epsilon!r}, delta={self.target_delta!r}, bits={self.bits_rule!r}, "
            f"k={self.k_std!r}, secure_aggregation={self.secure_aggregation!r})"
        )

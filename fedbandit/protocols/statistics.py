"""Protocols for the linear-bandit statistics: continual release of Σ x y and Σ x xᵀ.

A federated linear learner hands the protocol, at every synchronization, each agent's
sums of x y (bias) and x xᵀ (Gram) over the batch just ended (and, for randomizers that
act on every user's record, the batch's individual records) and gets back the server's
noisy synchronized prefix sums -- Ũ_syn and W̃_syn of Zhou & Chowdhury's Algorithm 1.
Internally the statistics are packed into one vector of D = d + d(d+1)/2 coordinates per
party (:func:`pack_statistics`).

The protocol is composed (:class:`StatisticsProtocol`) of

* a randomizer (:class:`ExactStatistics`, :class:`GaussianTree` -- Algorithm 2 of Zhou &
  Chowdhury, :class:`DiscreteGaussianTree` -- the distributed discrete Gaussian of
  Kairouz, Liu & Steinke inside every tree node, :class:`VectorSum` -- the shuffle vector
  sum of Cheu, Joseph, Mao & Peng inside every tree node, :class:`GaussianFactorization` --
  every party's noisy prefixes through the square-root factorization of the prefix-sum
  matrix or its banded form, beyond the papers);
* an intermediary (:mod:`fedbandit.protocols.intermediaries`);
* an analyzer (:class:`RunningTotal`, :class:`TreePrefix` -- the prefix from the p-sums at
  the set bits of k, :class:`CentralTree` -- a trusted server's own tree mechanism,
  :class:`PrefixTotal` -- the sum of the parties' factorized prefixes,
  :class:`CentralFactorization` -- a trusted server's own factorized release).

Each randomizer describes its releases as a privacy event
(:mod:`fedbandit.accounting.events`) for what the intermediary lets the server see: one
party's messages (identity, shuffler) or only their sum (secure aggregation); the
accounting is :func:`fedbandit.accounting.account`.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from fedbandit._validation import (
    MAX_STEPS,
    check_array,
    check_bool,
    check_choice,
    check_float_in_range,
    check_int_array,
    check_int_in_range,
    check_positive_float,
    check_positive_int,
)
from fedbandit.accounting.calibration import CJMP21_CONSTANT, TREE_SIGMA_RULES, gaussian_tree_sigma0
from fedbandit.accounting.composition import split_budget_advanced
from fedbandit.accounting.events import (
    ClaimedEvent,
    ConditionalEvent,
    DiscreteGaussianSumEvent,
    GaussianEvent,
    NonPrivateEvent,
    SelfComposedEvent,
    record_sensitivities,
)
from fedbandit.mechanisms.tree import TreeAnalyzer, TreeRandomizer, prefix_noise_variance, tree_depth
from fedbandit.protocols.base import Analyzer, Protocol, Randomizer

__all__ = [
    "pack_statistics",
    "unpack_statistics",
    "user_records",
    "n_coordinates",
    "ExactStatistics",
    "GaussianTree",
    "DiscreteGaussianTree",
    "VectorSum",
    "RunningTotal",
    "TreePrefix",
    "CentralTree",
    "GaussianFactorization",
    "PrefixTotal",
    "CentralFactorization",
    "FACTORIZATIONS",
    "factorization_sensitivity_factor",
    "StatisticsProtocol",
    "AUTO_BITS_ROUNDING_SHARE",
    "GRAM_NOISES",
    "gram_noise_scale",
    "SCHEDULES",
]

#: Synchronization schedules a learner may declare to :meth:`StatisticsProtocol.configure`.
SCHEDULES = ("fixed", "adaptive")

#: ``bits="auto"`` of :class:`DiscreteGaussianTree`: the rounding variance of the largest
#: node may be at most this share of its privacy-noise variance.
AUTO_BITS_ROUNDING_SHARE = 0.01


# ---------------------------------------------------------------------------------------
# Packing the statistics
# ---------------------------------------------------------------------------------------


def check_setting(n_agents, dim, n_batches, batch_size) -> tuple[int, int, int, int]:
    """(M, d, K, B) of a statistics protocol's setting, checked: the trees hold κ·M·D floats per
    run (D = d + d(d+1)/2) and a run serves K·B rounds, each capped at 10^9."""
    M = check_positive_int("n_agents", n_agents, max_value=MAX_STEPS, reason="arrays hold one row per agent")
    d = check_positive_int("dim", dim, max_value=40_000, reason="the packed statistics have d + d(d+1)/2 entries")
    K = check_positive_int("n_batches", n_batches, max_value=MAX_STEPS, reason="the run serves n_batches·batch_size rounds")
    B = check_positive_int("batch_size", batch_size, max_value=MAX_STEPS, reason="the run serves n_batches·batch_size rounds")
    if K * B > MAX_STEPS:
        raise ValueError(f"n_batches·batch_size = {K * B} rounds exceed 10^9 (n_batches={K}, batch_size={B})")
    if M * (d + d * (d + 1) // 2) > MAX_STEPS:
        raise ValueError(f"n_agents={M} agents with dim={d} statistics hold more than 10^9 floats per run and tree level")
    return M, d, K, B


def n_coordinates(dim: int) -> int:
    """D = d + d(d+1)/2: coordinates of one packed record (bias x y and the Gram's upper triangle)."""
    dim = check_positive_int("dim", dim)
    return dim + dim * (dim + 1) // 2


def pack_statistics(bias: np.ndarray, gram: np.ndarray) -> np.ndarray:
    """Concatenate bias (..., d) and the upper triangle of gram (..., d, d): (..., d + d(d+1)/2)."""
    bias = check_array("bias", bias, finite=False)
    gram = check_array("gram", gram, finite=False)
    if bias.ndim < 1 or gram.shape != bias.shape + bias.shape[-1:]:
        raise ValueError(f"bias (..., d) and gram (..., d, d) must match, got shapes bias {bias.shape}, gram {gram.shape}")
    return _pack_statistics(bias, gram)


def _pack_statistics(bias, gram):
    # the protocols' per-synchronization path (shapes checked by synchronize)
    d = bias.shape[-1]
    iu, ju = np.triu_indices(d)
    return np.concatenate([bias, gram[..., iu, ju]], axis=-1)


def user_records(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Every user's own record (x y, upper triangle of x xᵀ): (..., d) and (...) -> (..., d + d(d+1)/2).

    The per-user form of :func:`pack_statistics`, for randomizers that act on each record
    (the vector sum, DDG's per-record rounding, randomized response).
    """
    x = check_array("x", x, finite=False)
    y = check_array("y", y, finite=False)
    if x.ndim < 1 or y.shape != x.shape[:-1]:
        raise ValueError(f"x (..., d) and y (...) must match, got shapes x {x.shape}, y {y.shape}")
    return _user_records(x, y)


def _user_records(x, y):
    # the randomizers' path (shapes checked by synchronize)
    iu, ju = np.triu_indices(x.shape[-1])
    return np.concatenate([x * y[..., None], x[..., iu] * x[..., ju]], axis=-1)


def unpack_statistics(packed: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`pack_statistics` (the Gram matrix symmetrized)."""
    d = check_positive_int("d", d)
    packed = check_array("packed", packed, finite=False)
    if packed.ndim < 1 or packed.shape[-1] != d + d * (d + 1) // 2:
        raise ValueError(f"packed must have a last axis of d + d(d+1)/2 = {d + d * (d + 1) // 2} entries (d={d}), "
                         f"got shape {packed.shape}")
    return _unpack_statistics(packed, d)


def _unpack_statistics(packed, d):
    iu, ju = np.triu_indices(d)
    bias = packed[..., :d]
    gram = np.zeros(packed.shape[:-1] + (d, d))
    gram[..., iu, ju] = packed[..., d:]
    gram[..., ju, iu] = packed[..., d:]
    return bias, gram


# ---------------------------------------------------------------------------------------
# Randomizers
# ---------------------------------------------------------------------------------------


class _TreeRandomizerBase(Randomizer):
    """Shared plumbing: the protocol calls configure(protocol), reset(protocol), encode(...), event(...)."""

    supports_run_masks: ClassVar[bool] = False
    kind_of_noise: ClassVar[str] = "none"

    def configure(self, protocol: StatisticsProtocol) -> None:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def reset(self, protocol: StatisticsProtocol) -> None:
        pass

    def node_variance(self, protocol: StatisticsProtocol) -> float:
        """Per-entry noise variance of one node summed over the parties (the server's view)."""
        return 0.0

    def calibration(self) -> dict:
        return {}


class ExactStatistics(_TreeRandomizerBase):
    """R that sends the batch sums as they are (no privacy; or a trusted server's input)."""

    name: ClassVar[str] = "exact"
    message: ClassVar[str] = "exact"
    supports_run_masks: ClassVar[bool] = True

    def describe(self) -> str:
        return "send the exact batch sums Σxy, Σxxᵀ"

    def configure(self, protocol):
        pass

    def encode(self, protocol, leaf, users, runs):
        return None, leaf

    def event(self, protocol, relation):
        return NonPrivateEvent("the server sees every agent's exact batch sums")


class GaussianTree(_TreeRandomizerBase):
    """R of Algorithm 2 of Zhou & Chowdhury: the distributed Gaussian tree.

    Every party keeps the noise-free p-sums of its stream of batch sums γ_k; at batch k,
    with j = ν(k) the lowest set bit of k, it releases α̂_j = α_j + N(0, σ₀²) entrywise on
    the packed statistics (so the Gram noise is symmetric, the hypotheses of Lemma 6.7).

    Parameters
    ----------
    calibration : str, default "paper"
        The σ₀ rule, one of :data:`fedbandit.accounting.TREE_SIGMA_RULES`
        (:func:`fedbandit.accounting.gaussian_tree_sigma0`).
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
    message: ClassVar[str] = "float"
    supports_run_masks: ClassVar[bool] = True
    kind_of_noise: ClassVar[str] = "gaussian"

    def __init__(self, calibration: str = "paper", *, sigma0=None, force: bool = False, gram_noise: str = "mirror"):
        self.calibration_rule = check_choice("calibration", calibration, TREE_SIGMA_RULES)
        self.sigma0_given = None if sigma0 is None else check_positive_float("sigma0", sigma0)
        self.force = check_bool("force", force)
        self.gram_noise = check_choice("gram_noise", gram_noise, GRAM_NOISES)
        self.amplification = self.calibration_rule.startswith("amplification-")

    def describe(self) -> str:
        rule = f"σ₀ = {self.sigma0_given:g}" if self.sigma0_given is not None else f"σ₀ by the {self.calibration_rule!r} rule"
        return f"per batch k: the tree p-sum α_j closing at k, plus N(0, σ₀²) per entry (symmetric Gram noise); {rule}"

    def configure(self, protocol):
        p = protocol
        self.validity = ()
        if self.amplification:
            from fedbandit.accounting.amplification import zc_amplification_validity

            if p.intermediary.view != "multiset":
                raise ValueError(
                    f"randomizer 'gaussian-tree' with calibration {self.calibration_rule!r} and intermediary "
                    f"{p.intermediary.name!r}: amplification by shuffling needs a shuffler"
                )
            self.validity = tuple(
                zc_amplification_validity(
                    p.target_epsilon, p.target_delta, p.n_agents, p.n_batches, p.horizon, self.calibration_rule.split("-", 1)[1]
                )
            )
        if self.sigma0_given is not None:
            self.sigma0 = self.sigma0_given
        elif not p.private:
            raise ValueError("randomizer 'gaussian-tree' needs a target (epsilon, delta) or an explicit sigma0")
        else:
            self.sigma0 = float(
                gaussian_tree_sigma0(
                    self.calibration_rule,
                    p.target_epsilon,
                    p.target_delta,
                    n_batches=p.n_batches,
                    horizon=p.horizon,
                    n_agents=p.n_agents,
                    sensitivity=p.sensitivity,
                    parties=p.n_agents if p.intermediary.view == "sum" else 1,
                    feature_bound=p.feature_bound,
                    force=self.force,
                )
            )

    def reset(self, protocol):
        p = protocol
        D = n_coordinates(p.dim)
        self._tree = TreeRandomizer(
            p.n_batches, (D,), self.sigma0, batch_shape=(p.n_runs, p.n_agents), segments=(p.dim, D - p.dim)
        )
        # The server's aggregated node noise Σ_i Z_{j,i}, measured (sum of squares per run).
        self.noise_sumsq = np.zeros(p.n_runs)
        self.noise_count = np.zeros(p.n_runs)
        self._noise_scale = gram_noise_scale(p.dim, self.gram_noise)

    def encode(self, protocol, leaf, users, runs):
        j, msgs, noise = self._tree.release(leaf, protocol._noise_rng, runs=runs, return_noise=True)
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

    def node_variance(self, protocol):
        return protocol.n_agents * self.sigma0**2

    def event(self, protocol, relation):
        p = protocol
        db, dg = p.record_sensitivities(relation)
        per_party = SelfComposedEvent(GaussianEvent(math.hypot(db, dg), self.sigma0), p.kappa)
        summed = SelfComposedEvent(GaussianEvent(math.hypot(db, dg), math.sqrt(p.n_agents) * self.sigma0), p.kappa)
        if p.intermediary.view == "sum":
            return summed
        if self.amplification:
            variant = self.calibration_rule.split("-", 1)[1]
            return ClaimedEvent(
                p.target_epsilon,
                p.target_delta,
                f"Zhou & Chowdhury Thm 6.3 via their Gaussian amplification lemma (App. E) [recalled], σ₀ {variant}",
                conditions=self.validity,
                necessary=self.deshuffled_event(p, relation, summed),
                unproven="idealized σ₀ = σ₀(LDP)/sqrt(M), without the lemma's logarithmic factors: not a proven guarantee"
                if variant == "ideal"
                else "",
            )
        return per_party

    def calibration(self):
        return {"sigma0": self.sigma0, "rule": self.calibration_rule, "gram_noise": self.gram_noise}

    def deshuffled_event(self, protocol, relation, summed=None):
        """The server's view of the shuffled messages as a necessary condition (shuffler only).

        A :class:`~fedbandit.accounting.deshuffle.DeshuffledGaussianEvent`: the M messages of
        each of the κ nodes containing a user of batch 1, on the adversary's dominant data
        choices (:func:`~fedbandit.accounting.deshuffle.deshuffle_scenarios`: every user of
        the target silo holds the largest record, the other silos the record pointing away
        from it), with ``summed`` (the messages' sum) as the second attack.
        """
        from fedbandit.accounting.deshuffle import DeshuffledGaussianEvent, deshuffle_scenarios

        p = protocol
        y = 1.0 if p.reward_bound is None else p.reward_bound
        scenarios = deshuffle_scenarios(p.batch_size, p.kappa, p.feature_bound, y, relation, dominant=True)
        return DeshuffledGaussianEvent(self.sigma0, p.n_agents, scenarios, summed)


#: Symmetrizations of the Gram noise (:class:`GaussianTree`, :class:`CentralTree`).
GRAM_NOISES = ("mirror", "average")


def gram_noise_scale(dim: int, gram_noise: str):
    """Per packed coordinate, the noise multiplier of a Gram symmetrization (None for "mirror").

    ``"average"``, (N + Nᵀ)/2: 1 on the bias and the diagonal, 1/√2 off the diagonal.
    """
    dim = check_positive_int("dim", dim, max_value=10**4, reason="the packed Gram matrix has dim(dim+1)/2 entries")
    check_choice("gram_noise", gram_noise, GRAM_NOISES)
    if gram_noise == "mirror":
        return None
    iu, ju = np.triu_indices(dim)
    return np.concatenate([np.ones(dim), np.where(iu == ju, 1.0, math.sqrt(0.5))])


class DiscreteGaussianTree(_TreeRandomizerBase):
    r"""R of the distributed discrete Gaussian (Kairouz, Liu & Steinke 2021) inside every tree node.

    Every user record v = (x y, upper triangle of x xᵀ) ∈ ℝ^D is clipped to ℓ2 norm
    c = sqrt((LY)² + L⁴), flattened by the shared random rotation, scaled by 1/γ and
    conditionally rounded to the integer grid (norm ≤ Δ₂/γ, [KLS21] Sec. 4.1) -- once,
    when the record arrives.  The leaf γ_k is the integer sum of the batch's rounded
    records; the party keeps integer p-sums as in Algorithm 2 and at batch k releases
    α̂_j = α_j + N_Z(0, σ²/γ²) (exact discrete Gaussian per coordinate) mod m = 2^bits.

    σ is the smallest meeting the target for the server's view: the sum of M parties'
    noise under secure aggregation ([KLS21] Prop. 14 with n = M, over κ releases), or one
    party's message otherwise (n = 1).  γ is chosen so that 2^bits·γ covers ±k standard
    deviations of the largest node sum (:func:`fedbandit.accounting.ddg_params` with
    ``n_signal`` = the largest node's number of user records).

    Parameters
    ----------
    bits : int or "auto", default "auto"
        Bits per coordinate (modulus 2^bits).  ``"auto"``: the smallest even width whose
        rounding variance is at most :data:`AUTO_BITS_ROUNDING_SHARE` of the node's
        privacy-noise variance [reconstruction: the book's rule; [KLS21] pick bits for a
        one-shot sum].
    k : float, default 3
        Standard deviations of the aggregate covered by the modular range.
    beta : float, default e^{−1/2}
        Conditional rounding parameter.
    flatten : {"hadamard", "dft"}
    norm_growth : {"conservative", "optimistic"}
        Signal term of the range condition: the largest node's norm bound n_s·c or sqrt(n_s)·c.
    flatten_seed : int
        Public randomness of the shared rotation.
    """

    name: ClassVar[str] = "discrete-gaussian-tree"
    message: ClassVar[str] = "integer"
    needs_user_data: ClassVar[bool] = True
    kind_of_noise: ClassVar[str] = "discrete_gaussian"

    def __init__(self, *, bits="auto", k=3.0, beta=math.exp(-0.5), flatten="hadamard", norm_growth="conservative",
                 flatten_seed=0):
        self.bits_rule = "auto" if isinstance(bits, str) and bits == "auto" else check_int_in_range("bits", bits, 2, 62)
        self.k_std = check_positive_float("k", k)
        self.beta = check_float_in_range("beta", beta, 0.0, 1.0, high_inclusive=False)
        self.flatten = check_choice("flatten", flatten, ("hadamard", "dft"))
        self.norm_growth = check_choice("norm_growth", norm_growth, ("conservative", "optimistic"))
        self.flatten_seed = check_int_in_range("flatten_seed", flatten_seed, 0, None)

    def describe(self) -> str:
        return (
            "round each user record to the γ-grid (clip, flatten, conditional rounding); per tree node add "
            "discrete Gaussian noise N_Z(0, σ²/γ²), reduce mod 2^bits"
        )

    def configure(self, protocol):
        from fedbandit.accounting.ddg import ddg_tree_params
        from fedbandit.mechanisms.ddg import DDGMechanism
        from fedbandit.mechanisms.discrete_gaussian import MAX_TABLE_SIGMA

        p = protocol
        if not p.private:
            raise ValueError("randomizer 'discrete-gaussian-tree' needs a target (epsilon, delta)")
        if p.relation != "add-remove":
            raise ValueError(
                "randomizer 'discrete-gaussian-tree' is calibrated for relation='add-remove' ([KLS21] Thm. 1); "
                "its accounting under 'replace' is reported by accounting(relation='replace')"
            )
        db, dg = p.record_sensitivities("add-remove")
        self.coord_dim = n_coordinates(p.dim)
        self.clip = math.hypot(db, dg)
        self.max_node_users = p.batch_size * p.n_agents * 2 ** (p.kappa - 1)
        self.parties = p.n_agents if p.intermediary.view == "sum" else 1
        self.params = ddg_tree_params(
            self.bits_rule, k=self.k_std, n_parties=self.parties, n_agents=p.n_agents, dim=self.coord_dim,
            clip=self.clip, epsilon=p.target_epsilon, delta=p.target_delta, beta=self.beta,
            norm_growth=self.norm_growth, flatten=self.flatten, steps=p.kappa, n_signal=self.max_node_users,
            rounding_share=AUTO_BITS_ROUNDING_SHARE,
        )
        self.bits = self.params.bits
        # int64 modular sums and float64-exact integer p-sums must not overflow.
        if self.bits + math.log2(p.n_agents) > 62 or self.params.delta2_int * self.max_node_users > 2.0**52:
            raise ValueError(
                f"bits={self.bits} with n_agents={p.n_agents} overflows the 64-bit integer aggregation; use fewer bits"
            )
        if self.params.sigma_int > MAX_TABLE_SIGMA:
            raise ValueError(
                f"bits={self.bits} gives a discrete Gaussian scale sigma/gamma={self.params.sigma_int:.4g} above the "
                f"fast exact sampler's limit {MAX_TABLE_SIGMA:g}; use fewer bits"
            )
        if getattr(p.intermediary, "mode", "ideal") == "real" and p.n_agents < 2:
            raise ValueError(f"secure aggregation mode='real' needs n_agents >= 2, got {p.n_agents}")
        self.mechanism = DDGMechanism(self.params, self.flatten_seed)
        self.sigma0 = self.params.sigma

    def reset(self, protocol):
        p = protocol
        self._tree = TreeRandomizer(
            p.n_batches, (self.params.d_pad,), self.params.sigma_int, batch_shape=(p.n_runs, p.n_agents),
            noise="discrete_gaussian",
        )
        p.communication.payload_unit = "bits"

    def encode(self, protocol, leaf, users, runs):
        from fedbandit.mechanisms.ddg import clip_l2, conditional_randomized_round

        x, y = users
        v = _user_records(x, y)  # (B, R, M, D)
        flat = self.mechanism.flattener.flatten(clip_l2(v, self.clip)) / self.params.gamma
        rounded = conditional_randomized_round(flat, self.params.delta2_int, protocol._noise_rng)
        j, alpha_hat = self._tree.release(rounded.sum(axis=0).astype(np.float64), protocol._noise_rng)
        return j, np.mod(alpha_hat, self.params.modulus).astype(np.int64)

    def decode(self, summed):
        """Modular clipping, unflattening and rescaling of the summed residues: (R, D)."""
        return self.mechanism.decode(summed)

    def rounding_variance(self) -> float:
        """Upper bound on the rounding variance per entry of the largest node sum, n_s·γ²/4."""
        return self.max_node_users * self.params.gamma**2 / 4.0

    def node_variance(self, protocol):
        return protocol.n_agents * self.sigma0**2

    def event(self, protocol, relation):
        # Records are clipped to c whatever the relation; replacing one rounded record by
        # another moves a node sum by up to twice the bound Δ₂ of one rounded record.
        e = DiscreteGaussianSumEvent(
            clip=self.clip, gamma=self.params.gamma, beta=self.beta, dim=self.params.d_pad, sigma=self.sigma0,
            n_parties=self.parties, sensitivity_factor=1.0 if relation == "add-remove" else 2.0,
        )
        return SelfComposedEvent(e, protocol.kappa)

    def calibration(self):
        q = self.params
        return {"sigma0": self.sigma0, "bits": self.bits, "gamma": q.gamma, "sigma_int": q.sigma_int, "delta2": q.delta2,
                "d_pad": q.d_pad, "rounding_variance": self.rounding_variance()}


class VectorSum(_TreeRandomizerBase):
    """R of the shuffle vector-sum protocol (Cheu, Joseph, Mao & Peng 2021) inside every tree node.

    Every user's record -- D = d + d(d+1)/2 coordinates in [−1, 1] -- is encoded by the
    vector-sum randomizer (:class:`fedbandit.mechanisms.VectorSumShuffle`) for each tree
    node containing its round; the node at level j closing at batch k holds the
    n_j = 2^j·B·M users of batches k − 2^j + 1..k of all agents.  A user takes part in κ
    nodes: ``split="advanced"`` runs each node at (ε₀, δ₀) =
    :func:`fedbandit.accounting.split_budget_advanced` (ε, δ, κ), which composes to (ε, δ);
    ``split="none"`` (the authors' code) runs every node at the full (ε, δ).

    Implementation [derived].  One g for all levels (g ≥ the minimum at every level, which
    keeps every node's theorem conditions), b_j per level; each user's randomized rounding
    ⌊z g⌋ + η₁ is drawn once and reused by the κ nodes containing it, and the binomial
    noise bits of a node are drawn in aggregate.  The messages are emitted already pooled
    (one count of ones per coordinate): a shuffle of one-bit messages reveals only that
    count, so the shuffler and secure aggregation deliver it unchanged; without either the
    combination is refused.

    Parameters
    ----------
    split : {"advanced", "none"}
    constant : float, optional
        c in b (``noise="theorem"``, default :data:`fedbandit.accounting.CJMP21_CONSTANT`), or
        the authors' "scale" (``noise="authors"``, default 1, their experiments' value); values
        below the theorem's are not covered by it.
    noise : {"theorem", "authors"}, default "theorem"
        ``"theorem"``: b = ⌈c g² log²(4D²/δ)/(ε² n)⌉ as recalled, with D the packed
        coordinates.  ``"authors"`` [authors' code]: the noise the authors' code adds, per
        coordinate and node :func:`fedbandit.accounting.authors_vector_sum_noise` (their
        log(d²/δ) with d the feature dimension, their [0, 2L] encoding), realized here by the
        equivalent c of :func:`fedbandit.accounting.authors_vector_sum_constant`.

    Below the theorem's constant the accounting is "unproven" (not proven private, which is
    not shown non-private): the notes give the direct accounting of the node noise under a
    Gaussian approximation of its binomial noise (:meth:`gaussian_approx_epsilon`).
    """

    name: ClassVar[str] = "vector-sum"
    message: ClassVar[str] = "count"
    needs_user_data: ClassVar[bool] = True
    private_alone: ClassVar[bool] = False
    kind_of_noise: ClassVar[str] = "binomial"

    def __init__(self, *, split="advanced", constant=None, noise="theorem"):
        self.split = check_choice("split", split, ("advanced", "none"))
        self.noise = check_choice("noise", noise, ("theorem", "authors"))
        if constant is None:
            constant = CJMP21_CONSTANT if self.noise == "theorem" else 1.0
        self.constant = check_positive_float("constant", constant)
        self.p = 0.25

    def describe(self) -> str:
        return (
            "per user and coordinate: ⌊zg⌋+η₁ unary bits plus b Ber(1/4) bits (vector-sum randomizer), per tree node"
        )

    def configure(self, protocol):
        from fedbandit.mechanisms.vector_sum import VectorSumShuffle

        p = protocol
        if not p.private:
            raise ValueError("randomizer 'vector-sum' needs a target (epsilon, delta)")
        if p.target_delta >= 0.5:
            raise ValueError(f"delta must lie in (0, 0.5) for the vector-sum protocol, got {p.target_delta!r}")
        if p.reward_bound is not None and p.feature_bound * p.reward_bound > 1.0 + 1e-12:
            raise ValueError(
                f"the vector-sum protocol encodes coordinates in [-1, 1]: needs feature_bound*reward_bound <= 1, "
                f"got {p.feature_bound}*{p.reward_bound}"
            )
        if p.feature_bound > 1.0 + 1e-12:
            raise ValueError(f"the vector-sum protocol needs feature_bound <= 1, got {p.feature_bound}")
        self.coord_dim = n_coordinates(p.dim)
        if self.split == "advanced":
            self.eps_node, self.delta_node = split_budget_advanced(p.target_epsilon, p.target_delta, p.kappa)
        else:
            self.eps_node, self.delta_node = p.target_epsilon, p.target_delta
        if self.eps_node > 15:
            raise ValueError(f"the per-node epsilon {self.eps_node:g} exceeds the vector-sum protocol's range (0, 15]")
        users_per_batch = p.batch_size * p.n_agents
        self.level_users = [users_per_batch * 2**j for j in range(p.kappa)]
        g = max(math.ceil(2 * math.sqrt(self.level_users[-1])), self.coord_dim, 4)
        if self.noise == "authors":
            from fedbandit.accounting.calibration import authors_vector_sum_constant

            self.book_constant = authors_vector_sum_constant(self.delta_node, p.dim, self.coord_dim, scale=self.constant)
        else:
            self.book_constant = self.constant
        self.levels = [
            VectorSumShuffle(self.eps_node, self.delta_node, n, self.coord_dim, g=g, constant=self.book_constant)
            for n in self.level_users
        ]
        self.g = g
        self._protocol = p

    def reset(self, protocol):
        p = protocol
        self._alpha = np.zeros((p.kappa, p.n_runs, self.coord_dim))
        self._k = 0
        p.communication.payload_unit = "bits"

    def encode(self, protocol, leaf, users, runs):
        from fedbandit.mechanisms.tree import lowest_set_bit
        from fedbandit.mechanisms.vector_sum import draw_binomial as _binomial

        x, y = users
        v = _user_records(x, y)  # (B, R, M, D)
        B, R, M, D = v.shape
        # Users of this batch: rounding drawn once per user, summed over users (B and M axes).
        counts = self.levels[0].rounded_counts(v.transpose(0, 2, 1, 3).reshape(B * M, R, D), protocol._noise_rng)
        self._k += 1
        j = lowest_set_bit(self._k)
        alpha_j = self._alpha[:j].sum(axis=0) + counts
        self._alpha[:j] = 0.0
        self._alpha[j] = alpha_j
        mech = self.levels[j]
        ones = alpha_j + _binomial(protocol._noise_rng, mech.n_users * mech.b, self.p, (R, D))
        self._last_level = j
        return j, ones[:, None, :]  # pooled: one "sender"

    def decode(self, summed):
        return self.levels[self._last_level].analyze(summed)

    def message_payload(self):
        mech = self.levels[self._last_level]
        return mech.n_users * self.coord_dim, float(mech.n_users) * self.coord_dim * (mech.g + mech.b)

    def node_noise_std(self, level: int) -> float:
        """Per-coordinate noise std of a node at ``level`` (binomial part, output units)."""
        return self.levels[level].noise_std()

    def node_variance(self, protocol):
        return max(m.noise_std() for m in self.levels) ** 2

    def gaussian_approx_epsilon(self, relation=None) -> float:
        """The direct accounting under a Gaussian approximation (not a proof): ε at the target δ.

        Each node's binomial noise is treated as Gaussian with its standard deviation
        (:meth:`node_noise_std`; the rounding's extra noise ignored); one user's record moves
        each of its κ nodes by at most Δ = sqrt(Δ_bias² + Δ_gram²) (``relation``, default the
        protocol's), so the κ releases compose exactly to one Gaussian with
        μ = Δ·sqrt(Σ_j 1/σ_j²) over the user's nodes (the smallest κ stds, the worst case), and
        ε is read off its exact privacy profile (Balle & Wang 2018).
        """
        from fedbandit.accounting.amplification import gaussian_epsilon_exact

        p = self._protocol
        db, dg = p.record_sensitivities(p.relation if relation is None else relation)
        stds = sorted(m.noise_std() for m in self.levels)[: p.kappa]
        mu = math.hypot(db, dg) * math.sqrt(sum(1.0 / s**2 for s in stds))
        return gaussian_epsilon_exact(mu, p.target_delta)

    def event(self, protocol, relation):
        p = protocol
        node = ClaimedEvent(self.eps_node, self.delta_node, "CJMP21 vector sum per node [recalled]")
        ev = SelfComposedEvent(node, p.kappa)
        covered = self.book_constant >= CJMP21_CONSTANT
        what = (f"the authors' noise (scale {self.constant:g}, equivalent to c={self.book_constant:.3g})"
                if self.noise == "authors" else f"b uses constant c={self.constant:g}")
        return ConditionalEvent(
            ev,
            f"{what} < {CJMP21_CONSTANT:g} of the theorem: not proven private (a Gaussian approximation of the node "
            f"noise gives ε ≈ {self.gaussian_approx_epsilon(relation):.3g} at δ={p.target_delta:g}; not a proof)",
            holds=covered,
            on_failure="unproven",
        )

    def calibration(self):
        return {"sigma0": max(m.noise_std() for m in self.levels), "eps_node": self.eps_node,
                "delta_node": self.delta_node, "g": self.g, "b_levels": [m.b for m in self.levels],
                "constant": self.constant, "noise": self.noise, "book_constant": self.book_constant,
                "gaussian_approx_epsilon": self.gaussian_approx_epsilon()}


# ---------------------------------------------------------------------------------------
# Analyzers
# ---------------------------------------------------------------------------------------


class RunningTotal(Analyzer):
    """A: add every synchronization's (exact) sums to the running totals."""

    name: ClassVar[str] = "running-total"

    def describe(self) -> str:
        return "add them to the running totals"

    def reset(self, protocol):
        p = protocol
        self._total = np.zeros((p.n_runs, n_coordinates(p.dim)))

    def analyze(self, protocol, j, delivered, runs):
        node = delivered if delivered.ndim == 2 else delivered.sum(axis=1)
        if runs is None:
            self._total += node
            return self._total.copy()
        self._total[runs] += node
        return self._total[runs].copy()


class TreePrefix(Analyzer):
    """A of Algorithm 2: α̃_j = Σ_i α̂_{j,i} (decoded), prefix s̃_k = Σ over the set bits of k."""

    name: ClassVar[str] = "tree-prefix"

    def describe(self) -> str:
        return "sum the parties' noisy p-sums; prefix = Σ over the set bits of k"

    def reset(self, protocol):
        p = protocol
        self._tree = TreeAnalyzer(p.n_batches, (n_coordinates(p.dim),), batch_shape=(p.n_runs,))

    def analyze(self, protocol, j, delivered, runs):
        r = protocol.randomizer
        if r.message == "integer":
            if delivered.ndim == 3:  # not summed by the intermediary: the server adds mod m
                delivered = np.mod(delivered.sum(axis=1), r.params.modulus)
            node = r.decode(delivered)
        elif r.message == "count":
            node = r.decode(delivered if delivered.ndim == 2 else delivered.sum(axis=1))
        else:
            node = delivered if delivered.ndim == 2 else delivered.sum(axis=1)
        return self._tree.update(j, node, runs=runs)


class CentralTree(Analyzer):
    """A of the central model: a trusted server adds the parties' exact sums and runs one
    Gaussian tree mechanism over the summed stream (Dwork et al. 2010; Chan, Shi & Song 2011).

    The node noise σ has the calibration of silo-level LDP's σ₀ (``calibration``), added
    once instead of M times, so the prefix noise variance is κσ² rather than Mκσ₀².

    Parameters
    ----------
    calibration : {"paper", "authors", "zcdp"}
    """

    name: ClassVar[str] = "central-tree"

    def __init__(self, calibration: str = "paper", *, gram_noise: str = "mirror"):
        self.calibration_rule = check_choice("calibration", calibration, ("paper", "authors", "zcdp"))
        self.gram_noise = check_choice("gram_noise", gram_noise, GRAM_NOISES)

    def describe(self) -> str:
        return "central tree mechanism over the summed stream: noise N(0, σ²) per node, once"

    def configure(self, protocol):
        p = protocol
        if not p.private:
            raise ValueError("analyzer 'central-tree' needs a target (epsilon, delta)")
        self.sigma = float(
            gaussian_tree_sigma0(
                self.calibration_rule, p.target_epsilon, p.target_delta, n_batches=p.n_batches, horizon=p.horizon,
                n_agents=p.n_agents, sensitivity=p.sensitivity,
            )
        )

    def reset(self, protocol):
        p = protocol
        D = n_coordinates(p.dim)
        self._rand = TreeRandomizer(p.n_batches, (D,), self.sigma, batch_shape=(p.n_runs,), segments=(p.dim, D - p.dim))
        self._tree = TreeAnalyzer(p.n_batches, (D,), batch_shape=(p.n_runs,))
        self._noise_scale = gram_noise_scale(p.dim, self.gram_noise)

    def analyze(self, protocol, j, delivered, runs):
        node = delivered if delivered.ndim == 2 else delivered.sum(axis=1)
        jj, noisy, z = self._rand.release(node, protocol._noise_rng, runs=runs, return_noise=True)
        if self._noise_scale is not None:
            noisy += z * (self._noise_scale - 1.0)
        return self._tree.update(jj, noisy, runs=runs)


# ---------------------------------------------------------------------------------------
# Matrix-factorization continual release (beyond the papers)
# ---------------------------------------------------------------------------------------

#: Factorizations of the prefix-sum matrix a factorization part may use.
FACTORIZATIONS = ("sqrt", "banded-sqrt")


def _factorization_mechanism(factorization, bands, n_steps, item_shape, sigma, batch_shape):
    from fedbandit.mechanisms.matrix_factorization import BandedSqrtRandomizer, SqrtToeplitzRandomizer

    if factorization == "sqrt":
        return SqrtToeplitzRandomizer(n_steps, item_shape, sigma, batch_shape=batch_shape)
    return BandedSqrtRandomizer(n_steps, item_shape, sigma, bands, batch_shape=batch_shape)


def factorization_sensitivity_factor(factorization: str, n_steps: int, bands=None) -> float:
    """max_t ‖C e_t‖ of the right factor C over ``n_steps`` releases (the square root's, or the
    banded square root's with ``bands`` diagonals): one record's Δ times it is the sensitivity
    of the factorized release (:mod:`fedbandit.mechanisms.matrix_factorization`)."""
    from fedbandit.mechanisms.matrix_factorization import max_column_norm, sqrt_toeplitz_coefficients

    check_choice("factorization", factorization, FACTORIZATIONS)
    n = check_positive_int("n_steps", n_steps, max_value=MAX_STEPS)
    if factorization == "sqrt":
        from fedbandit.mechanisms.matrix_factorization import MAX_DENSE_STEPS

        n = check_positive_int("n_steps", n, max_value=MAX_DENSE_STEPS, reason="the dense square root's coefficients")
    b = n if factorization == "sqrt" else min(check_positive_int("bands", bands, max_value=10**5), n)
    return max_column_norm(sqrt_toeplitz_coefficients(b), n)


def _check_factorization_steps(factorization, n_batches):
    from fedbandit.mechanisms.matrix_factorization import MAX_DENSE_STEPS

    if factorization == "sqrt":
        check_positive_int("n_batches", n_batches, max_value=MAX_DENSE_STEPS,
                           reason="the dense square root stores every draw (use factorization='banded-sqrt')")


def _factorization_sigma(protocol, colnorm, parties=1):
    from fedbandit.accounting.calibration import ldp_sigma0

    # one Gaussian release (κ = 1) of sensitivity (record sensitivity × column norm), the tree's
    # "zcdp" rule with the κ node releases replaced by the factor's column norm
    p = protocol
    return ldp_sigma0(p.target_epsilon, p.target_delta, 1, calibration="zcdp",
                      sensitivity=p.sensitivity * colnorm) / math.sqrt(parties)


class GaussianFactorization(_TreeRandomizerBase):
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
    :func:`fedbandit.accounting.ldp_sigma0` for one release at that sensitivity (the tree's
    ``"zcdp"`` rule with one release instead of κ).  The server adds the parties' prefixes
    (:class:`PrefixTotal`).

    Parameters
    ----------
    factorization : {"sqrt", "banded-sqrt"}
    bands : int, optional
        b, the diagonals of the banded square root (``"banded-sqrt"`` only).
    """

    name: ClassVar[str] = "gaussian-factorization"
    message: ClassVar[str] = "float"
    supports_run_masks: ClassVar[bool] = True
    kind_of_noise: ClassVar[str] = "gaussian"

    def __init__(self, factorization: str = "sqrt", *, bands=None):
        self.factorization = check_choice("factorization", factorization, FACTORIZATIONS)
        if self.factorization == "banded-sqrt":
            self.bands = check_positive_int("bands", bands, max_value=10**5, reason="the state holds b − 1 draws")
        elif bands is not None:
            raise ValueError(f"bands is for factorization='banded-sqrt', got bands={bands!r} with {factorization!r}")
        else:
            self.bands = None

    def describe(self) -> str:
        what = "square root" if self.bands is None else f"banded square root (b = {self.bands})"
        return f"per batch k: the party's prefix sum plus the {what} factorization's correlated noise (B·z)_k"

    def configure(self, protocol):
        p = protocol
        if p.intermediary.view == "multiset":
            raise ValueError(f"randomizer {self.name!r} with intermediary {p.intermediary.name!r}: no shuffle "
                             "accounting covers factorized prefixes (use 'identity' or secure aggregation)")
        if not p.private:
            raise ValueError(f"randomizer {self.name!r} needs a target (epsilon, delta)")
        self.parties = p.n_agents if p.intermediary.view == "sum" else 1
        _check_factorization_steps(self.factorization, p.n_batches)
        self.column_norm = factorization_sensitivity_factor(self.factorization, p.n_batches, self.bands)
        self.sigma0 = float(_factorization_sigma(p, self.column_norm, self.parties))

    def reset(self, protocol):
        p = protocol
        self._mech = _factorization_mechanism(self.factorization, self.bands, p.n_batches, (n_coordinates(p.dim),),
                                              self.sigma0, (p.n_runs, p.n_agents))

    def encode(self, protocol, leaf, users, runs):
        k, prefix = self._mech.release(leaf, protocol._noise_rng, runs=runs)
        return k, prefix

    def node_variance(self, protocol):
        return protocol.n_agents * self.sigma0**2

    def prefix_variance(self, protocol, k) -> float:
        """Per-entry variance of the server's prefix noise at batch k: M σ² Σ_{j<k} b_j²."""
        return protocol.n_agents * self._mechanism_for(protocol).prefix_noise_variance(k)

    def _mechanism_for(self, protocol):
        return _factorization_mechanism(self.factorization, self.bands, protocol.n_batches, (1,), self.sigma0, ())

    def event(self, protocol, relation):
        db, dg = protocol.record_sensitivities(relation)
        return GaussianEvent(math.hypot(db, dg) * self.column_norm, math.sqrt(self.parties) * self.sigma0)

    def calibration(self):
        return {"sigma0": self.sigma0, "factorization": self.factorization, "bands": self.bands,
                "column_norm": self.column_norm}


class PrefixTotal(Analyzer):
    """A of the factorized release: the server's prefix is the sum of the parties' noisy prefixes."""

    name: ClassVar[str] = "prefix-total"

    def describe(self) -> str:
        return "sum the parties' noisy prefix sums"

    def reset(self, protocol):
        pass

    def analyze(self, protocol, j, delivered, runs):
        return np.array(delivered if delivered.ndim == 2 else delivered.sum(axis=1))


class CentralFactorization(Analyzer):
    """A of the central model with a factorized release: a trusted server adds the parties' exact
    sums and releases their prefix sums through one factorization mechanism [beyond the papers].

    The noise σ is :class:`GaussianFactorization`'s calibration, added once instead of by
    every party, so the prefix noise variance at k is σ² Σ_{j<k} b_j².

    Parameters
    ----------
    factorization : {"sqrt", "banded-sqrt"}
    bands : int, optional
    """

    name: ClassVar[str] = "central-factorization"

    def __init__(self, factorization: str = "sqrt", *, bands=None):
        self._part = GaussianFactorization(factorization, bands=bands)
        self.factorization, self.bands = self._part.factorization, self._part.bands

    def describe(self) -> str:
        return "central factorized release of the summed stream: prefix plus correlated noise (B·z)_k, once"

    def configure(self, protocol):
        p = protocol
        if not p.private:
            raise ValueError(f"analyzer {self.name!r} needs a target (epsilon, delta)")
        _check_factorization_steps(self.factorization, p.n_batches)
        self.column_norm = factorization_sensitivity_factor(self.factorization, p.n_batches, self.bands)
        self.sigma = float(_factorization_sigma(p, self.column_norm))

    def reset(self, protocol):
        p = protocol
        self._mech = _factorization_mechanism(self.factorization, self.bands, p.n_batches, (n_coordinates(p.dim),),
                                              self.sigma, (p.n_runs,))

    def analyze(self, protocol, j, delivered, runs):
        node = delivered if delivered.ndim == 2 else delivered.sum(axis=1)
        _, prefix = self._mech.release(node, protocol._noise_rng, runs=runs)
        return prefix

    def prefix_variance(self, protocol, k) -> float:
        return _factorization_mechanism(self.factorization, self.bands, protocol.n_batches, (1,), self.sigma,
                                        ()).prefix_noise_variance(k)

    def event(self, protocol, relation):
        db, dg = protocol.record_sensitivities(relation)
        return GaussianEvent(math.hypot(db, dg) * self.column_norm, self.sigma)


# ---------------------------------------------------------------------------------------
# The protocol
# ---------------------------------------------------------------------------------------


class StatisticsProtocol(Protocol):
    """P = (R, S, A) for the linear-bandit statistics of M agents, synchronized in batches.

    The interface a learner uses:

    ``configure(n_agents=M, dim=d, n_batches=K, batch_size=B, feature_bound=L, reward_bound=Y, schedule="fixed")``
        Called by the learner's constructor: validates the setting and calibrates the
        noise (raises on an inconsistent or unsupported one, naming why).  No random state.
        ``schedule="adaptive"`` (runs synchronize at different times, as in DP20's
        FedUCB) needs a randomizer that serves per-run steps; K is then an upper bound on
        the synchronizations of a run.
    ``reset(n_runs=R, rng=generator)``
        Called at the start of a run.
    ``synchronize(bias, gram, users=None, runs=None) -> (bias_prefix, gram_prefix)``
        ``bias`` (R', M, d) and ``gram`` (R', M, d, d): agent i's sums Σ x y and Σ x xᵀ over
        the batch just ended; with ``runs`` (increasing run indices) only those R' runs
        synchronize.  Returns the server's synchronized prefix sums (R', d) and (R', d, d).
        Randomizers with ``needs_user_data`` also receive ``users = (x, y)``, x (B, R, M, d)
        and y (B, R, M), the batch's individual records (y already clipped).
    ``accounting(relation=None)``, ``event(relation=None)``
        The guarantee for the configured setting (add/remove or replace one user).
    ``server_noise_std()``, ``prefix_noise_variance(k)``, ``calibration()``, ``parts()``,
    ``communication``.

    Parameters
    ----------
    randomizer : ExactStatistics, GaussianTree, DiscreteGaussianTree, VectorSum or GaussianFactorization
    intermediary : Identity, Shuffler or SecureAggregation
    analyzer : RunningTotal, TreePrefix, CentralTree, PrefixTotal or CentralFactorization
    name : str
    epsilon, delta : float or None
    relation : {"add-remove", "replace"}, default "add-remove"
    model : str, optional
        The privacy model's name for tables (derived from the parts when omitted).
    """

    kind: ClassVar[str] = "statistics"

    def __init__(self, randomizer, intermediary, analyzer, *, name, epsilon=None, delta=None, relation="add-remove",
                 model=None):
        super().__init__(randomizer, intermediary, analyzer, name=name, epsilon=epsilon, delta=delta, relation=relation)
        if not isinstance(randomizer, _TreeRandomizerBase):
            raise TypeError(f"randomizer {randomizer.name!r} is not a statistics randomizer")
        if not isinstance(analyzer, (RunningTotal, TreePrefix, PrefixTotal) + _CENTRAL):
            raise TypeError(f"analyzer {analyzer.name!r} is not a statistics analyzer")
        if isinstance(randomizer, GaussianFactorization) != isinstance(analyzer, PrefixTotal):
            raise ValueError(
                f"randomizer {randomizer.name!r} with analyzer {analyzer.name!r}: factorized prefixes go to the "
                "prefix-total analyzer, and only they do"
            )
        exact = isinstance(randomizer, ExactStatistics)
        if exact != isinstance(analyzer, (RunningTotal,) + _CENTRAL) and not isinstance(analyzer, PrefixTotal):
            raise ValueError(
                f"randomizer {randomizer.name!r} with analyzer {analyzer.name!r}: exact sums go to a running total "
                "or a central tree; tree p-sums go to the tree-prefix analyzer"
            )
        if isinstance(analyzer, _CENTRAL) and intermediary.name != "identity":
            raise ValueError(
                f"analyzer {analyzer.name!r} with intermediary {intermediary.name!r}: the central model trusts the "
                "server with the exact sums, so no intermediary is needed (use 'identity')"
            )
        if exact and self.private and not isinstance(analyzer, _CENTRAL):
            raise ValueError(f"randomizer 'exact' with analyzer {analyzer.name!r} is not private: omit epsilon and delta")
        if isinstance(analyzer, _CENTRAL) and not self.private:
            raise ValueError(f"analyzer {analyzer.name!r} needs a target (epsilon, delta)")
        self._model = model

    # ------------------------------------------------------------ configuration
    @property
    def model(self) -> str:
        if self._model is not None:
            return self._model
        if isinstance(self.randomizer, ExactStatistics):
            return "central" if isinstance(self.analyzer, _CENTRAL) else "none"
        return {"messages": "silo-LDP", "multiset": "SDP", "sum": "distributed"}[self.intermediary.view]

    @property
    def trusted(self) -> str:
        if isinstance(self.analyzer, _CENTRAL):
            return "the server"
        if isinstance(self.randomizer, ExactStatistics):
            return "everyone (no privacy)"
        if self.intermediary.view == "messages":
            return "own silo only"
        return self.intermediary.trusted

    @property
    def needs_user_data(self) -> bool:
        return self.randomizer.needs_user_data

    @property
    def supports_run_masks(self) -> bool:
        return self.randomizer.supports_run_masks and not isinstance(self.randomizer, VectorSum)

    def configure(self, *, n_agents, dim, n_batches, batch_size, feature_bound=1.0, reward_bound=1.0, schedule="fixed"):
        """Validate the setting and calibrate the noise; returns ``self``.

        ``reward_bound=None`` means the learner does not clip rewards: the sensitivity is
        then unknown and private protocols report status "invalid" (they calibrate as if
        |y| ≤ 1, the papers' assumption, which Gaussian rewards violate).
        """
        self.n_agents, self.dim, self.n_batches, self.batch_size = check_setting(n_agents, dim, n_batches, batch_size)
        self.horizon = self.n_batches * self.batch_size
        self.feature_bound = check_positive_float("feature_bound", feature_bound)
        self.reward_bound = None if reward_bound is None else check_positive_float("reward_bound", reward_bound)
        self.schedule = check_choice("schedule", schedule, SCHEDULES)
        if self.schedule == "adaptive" and not self.supports_run_masks:
            raise ValueError(
                f"protocol {self.name!r} (randomizer {self.randomizer.name!r}) serves only a fixed schedule: its nodes "
                "are sized for batches of B·M users, so runs cannot synchronize at different times"
            )
        self.kappa = tree_depth(self.n_batches)
        db, dg = self.record_sensitivities(self.relation)
        self.sensitivity_bias, self.sensitivity_gram = db, dg
        self.sensitivity = max(db, dg)
        self._configure_parts(f"n_agents={self.n_agents}, dim={self.dim}, n_batches={self.n_batches}, "
                              f"batch_size={self.batch_size}")
        self._configured = True
        self._reset_done = False
        return self

    def record_sensitivities(self, relation) -> tuple[float, float]:
        """(Δ_bias, Δ_gram) of one user's record under ``relation`` (Y = 1 if rewards are not clipped)."""
        y = 1.0 if self.reward_bound is None else self.reward_bound
        return record_sensitivities(self.feature_bound, y, relation)

    def _reset(self):
        self.communication.payload_unit = "floats"
        self.randomizer.reset(self)
        self.analyzer.reset(self)
        self._k = 0

    # ------------------------------------------------------------ the release
    def synchronize(self, bias, gram, *, users=None, runs=None):
        """One synchronization; returns (Ũ_syn (R', d), W̃_syn (R', d, d)) for the synchronizing runs."""
        self._require(reset=True)
        R, M, d = self.n_runs, self.n_agents, self.dim
        if runs is not None:
            if not self.supports_run_masks:
                raise ValueError(f"protocol {self.name!r} synchronizes all runs together: runs= is not supported")
            runs = check_int_array("runs", runs, low=0)
            if runs.ndim != 1 or runs.size == 0 or np.any(np.diff(runs) <= 0) or runs[0] < 0 or runs[-1] >= R:
                raise ValueError(f"runs must be increasing run indices in [0, {R}), got {runs!r}")
            if runs.size == R:
                runs = None
        n_s = R if runs is None else runs.size
        bias = check_array("bias", bias, finite=False)
        gram = check_array("gram", gram, finite=False)
        if bias.shape != (n_s, M, d):
            raise ValueError(f"bias must have shape (runs, agents, d) = {(n_s, M, d)}, got {bias.shape}")
        if gram.shape != (n_s, M, d, d):
            raise ValueError(f"gram must have shape (runs, agents, d, d) = {(n_s, M, d, d)}, got {gram.shape}")
        if self.needs_user_data:
            if users is None:
                raise ValueError(f"protocol {self.name!r} needs users=(x, y), the batch's individual records")
            x, y = users
            x = np.asarray(x, dtype=float)
            y = np.asarray(y, dtype=float)
            if x.ndim != 4 or x.shape[1:] != (R, M, d) or y.shape != x.shape[:3]:
                raise ValueError(f"users must be x (B, {R}, {M}, {d}) and y (B, {R}, {M}), got {x.shape} and {y.shape}")
            users = (x, y)
        if runs is None and self._k >= self.n_batches:
            raise ValueError(f"the protocol was configured for n_batches={self.n_batches} synchronizations")
        self._k += 1
        leaf = _pack_statistics(bias, gram)
        j, messages = self.randomizer.encode(self, leaf, users, runs)
        modulus = self.randomizer.params.modulus if self.randomizer.message == "integer" else None
        delivered = self.intermediary.deliver(messages, self._shuffle_rng, modulus=modulus)
        prefix = self.analyzer.analyze(self, j, delivered, runs)
        self._count_messages(n_s)
        return _unpack_statistics(prefix, d)

    def _count_messages(self, n_runs_synced):
        M, D = self.n_agents, n_coordinates(self.dim)
        c = self.communication
        c.rounds += 1
        if isinstance(self.randomizer, VectorSum):
            msgs, payload = self.randomizer.message_payload()
            c.messages += msgs
            c.payload += payload
        elif isinstance(self.randomizer, DiscreteGaussianTree):
            c.messages += M
            c.payload += float(M) * self.randomizer.params.d_pad * self.randomizer.bits
        else:
            c.messages += M
            c.payload += M * D

    # ------------------------------------------------------------ privacy
    def event(self, relation=None):
        self._require()
        relation = self.relation if relation is None else relation
        if isinstance(self.analyzer, CentralFactorization):
            ev = self.analyzer.event(self, relation)
        elif isinstance(self.analyzer, CentralTree):
            db, dg = self.record_sensitivities(relation)
            ev = SelfComposedEvent(GaussianEvent(math.hypot(db, dg), self.analyzer.sigma), self.kappa)
        else:
            ev = self.randomizer.event(self, relation)
        if not self.private:
            return ev
        return ConditionalEvent(
            ev,
            "rewards are not clipped: the calibration assumes |y| ≤ 1 and ‖x‖ ≤ 1, which unbounded (Gaussian) rewards "
            "violate, so no guarantee holds",
            holds=self.reward_bound is not None,
            on_failure="invalid",
        )

    def theorem(self) -> str:
        r, s = self.randomizer, self.intermediary
        if isinstance(self.analyzer, CentralFactorization) or isinstance(r, GaussianFactorization):
            f = self.analyzer if isinstance(self.analyzer, CentralFactorization) else r
            who = "a trusted server" if f is self.analyzer else (
                "the sum of the M agents' releases" if s.view == "sum" else "one agent's releases")
            return (f"{f.factorization} factorization of the prefix-sum matrix [FHU23, HUU23] for {who}: one Gaussian "
                    f"release at sensitivity Δ × column norm {f.column_norm:.4g} (adaptive streams [DMRST22]), zCDP "
                    "[BS16] converted by [CKS20]")
        if isinstance(self.analyzer, CentralTree):
            return (f"central tree [DNPR10, CSS11], calibration {self.analyzer.calibration_rule}; verified: zCDP over "
                    f"κ={self.kappa} nodes, [CKS20]")
        if isinstance(r, GaussianTree) and not r.amplification:
            view = "the sum of the M agents' releases" if s.view == "sum" else "one agent's releases"
            return (f"Gaussian tree (Zhou & Chowdhury Alg. 2), σ₀ rule {r.calibration_rule}; verified for {view}: zCDP "
                    f"over κ={self.kappa} nodes [BS16], converted by [CKS20]")
        if isinstance(r, DiscreteGaussianTree):
            return (f"DDG sums of {r.parties} discrete Gaussian{'s' if r.parties > 1 else ''} [KLS21, Prop. 14], RDP "
                    f"over κ={self.kappa} nodes, converted [CKS20]" + ("; SecAgg [BIK+17]" if s.view == "sum" else ""))
        if isinstance(r, VectorSum):
            if r.split == "advanced":
                return (f"CJMP21 vector sum per node at (ε₀={r.eps_node:.4g}, δ₀={r.delta_node:.3g}) [recalled], "
                        f"composed over κ={self.kappa} nodes [DRV10]")
            return f"CJMP21 vector sum per node at the full (ε, δ), composed over κ={self.kappa} nodes (not split)"
        return ""

    def bounds_note(self) -> str:
        if not self.private:
            return ""
        if self.reward_bound is None:
            return ""
        return f"for users with ‖x‖ ≤ {self.feature_bound:g} and |y| ≤ {self.reward_bound:g} (the learner clips y)"

    # ------------------------------------------------------------ reports
    @property
    def sigma0(self) -> float:
        """σ₀: the noise standard deviation one party (or, central, the server) adds per node entry."""
        self._require()
        if isinstance(self.analyzer, _CENTRAL):
            return self.analyzer.sigma
        return float(getattr(self.randomizer, "sigma0", 0.0))

    def node_noise_std(self) -> float:
        """Per-entry standard deviation of the noise in one node the server sums (all parties)."""
        self._require()
        if isinstance(self.analyzer, _CENTRAL):
            return self.analyzer.sigma
        return math.sqrt(self.randomizer.node_variance(self))

    def prefix_noise_variance(self, k) -> float:
        """Per-entry variance of the noise in the prefix sums released at batch k."""
        self._require()
        k = check_positive_int("k", k)
        if isinstance(self.analyzer, CentralFactorization):
            return self.analyzer.prefix_variance(self, k)
        if isinstance(self.randomizer, GaussianFactorization):
            return self.randomizer.prefix_variance(self, k)
        if isinstance(self.randomizer, VectorSum):
            return float(sum(self.randomizer.levels[j].noise_std() ** 2 for j in range(k.bit_length()) if k >> j & 1))
        if isinstance(self.randomizer, ExactStatistics) and not isinstance(self.analyzer, CentralTree):
            return 0.0
        return prefix_noise_variance(k, self.node_noise_std())

    def server_noise_std(self) -> float:
        """σ of Lemma 6.7: max over k of the per-entry noise standard deviation of a prefix."""
        self._require()
        if isinstance(self.randomizer, ExactStatistics) and not isinstance(self.analyzer, _CENTRAL):
            return 0.0
        if isinstance(self.analyzer, CentralFactorization) or isinstance(self.randomizer, GaussianFactorization):
            return math.sqrt(self.prefix_noise_variance(self.n_batches))  # Σ_{j<k} b_j² grows with k
        if isinstance(self.randomizer, VectorSum):
            return math.sqrt(self.kappa) * max(m.noise_std() for m in self.randomizer.levels)
        if isinstance(self.analyzer, CentralTree):
            return math.sqrt(self.kappa) * self.analyzer.sigma
        return math.sqrt(self.n_agents * self.kappa) * self.randomizer.sigma0

    def measured_noise_variance(self) -> np.ndarray:
        """Per run: the measured per-entry variance of the server's aggregated node noise Σ_i Z_{j,i}.

        Gaussian-tree randomizers only (NaN for runs that have not synchronized).
        """
        self._require(reset=True)
        r = self.randomizer
        if not isinstance(r, GaussianTree):
            raise TypeError(f"protocol {self.name!r}: the noise is measured for the Gaussian tree only")
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(r.noise_count > 0, r.noise_sumsq / np.maximum(r.noise_count, 1), np.nan)

    def calibration(self) -> dict:
        self._require()
        sigma = self.server_noise_std()
        out = {
            "protocol": self.name,
            "model": self.model,
            "trusted": self.trusted,
            "kappa": self.kappa,
            "sigma0": 0.0,
            "sigma": sigma,
            "total_variance": sigma**2,
        }
        out.update(self.randomizer.calibration())
        if isinstance(self.analyzer, _CENTRAL):
            out["sigma0"] = self.analyzer.sigma
        if isinstance(self.analyzer, CentralFactorization):
            out.update(factorization=self.analyzer.factorization, bands=self.analyzer.bands,
                       column_norm=self.analyzer.column_norm)
        if isinstance(self.randomizer, GaussianTree) and self.randomizer.amplification:
            out["valid"] = all(c.holds for c in self.randomizer.validity)
            out["sum_epsilon"] = self.sum_epsilon()
        return out

    def sum_epsilon(self) -> float:
        """Exact ε of the server's sum of the parties' Gaussian releases: a lower bound on the protocol's ε.

        The server can always add up the messages it receives, and the sum is a Gaussian
        mechanism with noise sqrt(M)·σ₀ per node over the κ nodes a user enters.
        """
        from fedbandit.accounting.accountant import exact_gaussian_epsilon

        self._require()
        if not isinstance(self.randomizer, GaussianTree):
            raise TypeError(f"protocol {self.name!r}: sum_epsilon is defined for the Gaussian tree")
        db, dg = self.record_sensitivities(self.relation)
        ev = SelfComposedEvent(GaussianEvent(math.hypot(db, dg), math.sqrt(self.n_agents) * self.randomizer.sigma0), self.kappa)
        return exact_gaussian_epsilon(ev, self.target_delta)

    def rounding_variance(self) -> float:
        """DDG only: upper bound on the rounding variance per entry of the largest node sum."""
        self._require()
        if not isinstance(self.randomizer, DiscreteGaussianTree):
            raise TypeError(f"protocol {self.name!r} does not round")
        return self.randomizer.rounding_variance()


#: The analyzers of the central model (the server adds its own noise to the exact sums).
_CENTRAL = (CentralTree, CentralFactorization)

"""R of the distributed discrete Gaussian (Kairouz, Liu & Steinke 2021) inside every tree node."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from fedbandit._validation import check_choice, check_float_in_range, check_int_in_range, check_positive_float
from fedbandit.accounting.ddg import ddg_tree_params
from fedbandit.accounting.events import DiscreteGaussianSumEvent, DpEvent, SelfComposedEvent
from fedbandit.mechanisms.ddg import DDGMechanism, clip_l2, conditional_randomized_round
from fedbandit.mechanisms.discrete_gaussian import MAX_TABLE_SIGMA
from fedbandit.mechanisms.tree import TreeRandomizer
from fedbandit.protocols.statistics.packing import user_records_unchecked
from fedbandit.protocols.statistics.parts import Level, Runs, StatisticsRandomizer, Users
from fedbandit.protocols.statistics.setting import StatisticsSetting

__all__ = ["DiscreteGaussianTree", "AUTO_BITS_ROUNDING_SHARE"]

#: ``bits="auto"`` of :class:`DiscreteGaussianTree`: the rounding variance of the largest
#: node may be at most this share of its privacy-noise variance.
AUTO_BITS_ROUNDING_SHARE = 0.01


class DiscreteGaussianTree(StatisticsRandomizer):
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
    deviations of the largest node sum (:func:`fedbandit.accounting.ddg.ddg_params` with
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
    releases: ClassVar[str] = "tree nodes"
    message: ClassVar[str] = "integer"
    needs_user_data: ClassVar[bool] = True
    payload_unit: ClassVar[str] = "bits"
    kind_of_noise: ClassVar[str] = "discrete_gaussian"
    sigma0: float = math.nan  # σ of one party's noise, set by configure

    def __init__(self, *, bits: int | str = "auto", k: float = 3.0, beta: float = math.exp(-0.5), flatten: str = "hadamard",
                 norm_growth: str = "conservative", flatten_seed: int = 0) -> None:
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

    def configure(self, setting: StatisticsSetting) -> None:
        s = setting
        if not s.private:
            raise ValueError("randomizer 'discrete-gaussian-tree' needs a target (epsilon, delta)")
        if s.relation != "add-remove":
            raise ValueError(
                "randomizer 'discrete-gaussian-tree' is calibrated for relation='add-remove' ([KLS21] Thm. 1); "
                "its accounting under 'replace' is reported by accounting(relation='replace')"
            )
        epsilon, delta = s.target()
        db, dg = s.record_sensitivities("add-remove")
        self.coord_dim = s.coordinates
        self.clip = math.hypot(db, dg)
        self.max_node_users = s.batch_size * s.n_agents * 2 ** (s.kappa - 1)
        self.parties = s.parties
        self.params = ddg_tree_params(
            self.bits_rule, k=self.k_std, n_parties=self.parties, n_agents=s.n_agents, dim=self.coord_dim,
            clip=self.clip, epsilon=epsilon, delta=delta, beta=self.beta,
            norm_growth=self.norm_growth, flatten=self.flatten, steps=s.kappa, n_signal=self.max_node_users,
            rounding_share=AUTO_BITS_ROUNDING_SHARE,
        )
        self.bits = self.params.bits
        # int64 modular sums and float64-exact integer p-sums must not overflow.
        if self.bits + math.log2(s.n_agents) > 62 or self.params.delta2_int * self.max_node_users > 2.0**52:
            raise ValueError(
                f"bits={self.bits} with n_agents={s.n_agents} overflows the 64-bit integer aggregation; use fewer bits"
            )
        if self.params.sigma_int > MAX_TABLE_SIGMA:
            raise ValueError(
                f"bits={self.bits} gives a discrete Gaussian scale sigma/gamma={self.params.sigma_int:.4g} above the "
                f"fast exact sampler's limit {MAX_TABLE_SIGMA:g}; use fewer bits"
            )
        self.mechanism = DDGMechanism(self.params, self.flatten_seed)
        self.sigma0 = self.params.sigma

    @property
    def modulus(self) -> int:
        """m = 2^bits: the parties' residues are summed modulo it."""
        return self.params.modulus

    def reset(self, setting: StatisticsSetting, n_runs: int) -> None:
        s = setting
        self._tree = TreeRandomizer(
            s.n_batches, (self.params.d_pad,), self.params.sigma_int, batch_shape=(n_runs, s.n_agents),
            noise="discrete_gaussian",
        )

    def encode(self, leaf: np.ndarray, users: Users, runs: Runs, rng: np.random.Generator) -> tuple[Level, np.ndarray]:
        assert users is not None  # needs_user_data: the protocol hands it the batch's records
        x, y = users
        v = user_records_unchecked(x, y)  # (B, R, M, D)
        flat = self.mechanism.flattener.flatten(clip_l2(v, self.clip)) / self.params.gamma
        rounded = conditional_randomized_round(flat, self.params.delta2_int, rng)
        j, alpha_hat = self._tree.release(rounded.sum(axis=0).astype(np.float64), rng)
        return j, np.mod(alpha_hat, self.params.modulus).astype(np.int64)

    def decode(self, delivered: np.ndarray) -> np.ndarray:
        """The node sums (R, D): the residues summed mod m (unless secure aggregation summed them),
        then modular clipping, unflattening and rescaling ([KLS21] Alg. 1's decoder)."""
        if delivered.ndim == 3:  # not summed by the intermediary: the server adds mod m
            delivered = np.mod(delivered.sum(axis=1), self.params.modulus)
        return self.mechanism.decode(delivered)

    def payload(self, setting: StatisticsSetting, level: Level) -> tuple[float, float]:
        M = setting.n_agents
        return M, float(M) * self.params.d_pad * self.bits

    def rounding_variance(self) -> float:
        """Upper bound on the rounding variance per entry of the largest node sum, n_s·γ²/4."""
        return self.max_node_users * self.params.gamma**2 / 4.0

    def node_variance(self, setting: StatisticsSetting) -> float:
        return setting.n_agents * self.sigma0**2

    def server_noise_std(self, setting: StatisticsSetting) -> float:
        return math.sqrt(setting.n_agents * setting.kappa) * self.sigma0

    def event(self, setting: StatisticsSetting, relation: str) -> DpEvent:
        # Records are clipped to c whatever the relation; replacing one rounded record by
        # another moves a node sum by up to twice the bound Δ₂ of one rounded record.
        e = DiscreteGaussianSumEvent(
            clip=self.clip, gamma=self.params.gamma, beta=self.beta, dim=self.params.d_pad, sigma=self.sigma0,
            n_parties=self.parties, sensitivity_factor=1.0 if relation == "add-remove" else 2.0,
        )
        return SelfComposedEvent(e, setting.kappa)

    def theorem(self, setting: StatisticsSetting) -> str:
        return (f"DDG sums of {self.parties} discrete Gaussian{'s' if self.parties > 1 else ''} [KLS21, Prop. 14], "
                f"RDP over κ={setting.kappa} nodes, converted [CKS20]" + ("; SecAgg [BIK+17]" if setting.view == "sum"
                                                                           else ""))

    def calibration(self, setting: StatisticsSetting) -> dict:
        q = self.params
        return {"sigma0": self.sigma0, "bits": self.bits, "gamma": q.gamma, "sigma_int": q.sigma_int, "delta2": q.delta2,
                "d_pad": q.d_pad, "rounding_variance": self.rounding_variance()}

    def scale_noise(self, factor: float) -> None:
        import dataclasses

        self.params = dataclasses.replace(self.params, sigma=self.params.sigma * factor)
        self.sigma0 = self.params.sigma
        self.mechanism = DDGMechanism(self.params, self.flatten_seed)

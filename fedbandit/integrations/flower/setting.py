r"""The public setting of a DDG federation run in Flower, and its checks (no ``flwr`` needed).

Kairouz, Liu & Steinke's distributed discrete Gaussian [KLS21]_ needs every party --
server and clients -- to agree on the same public numbers: the target (ε, δ), the clients
per round n of a population N, the rounds T, the dimension d, the clip bound c and the bit
width B.  :class:`DDGSetting` holds them and derives everything else (γ, σ, Δ₂, the
rotation) from this package's own ``sum-ddg-secagg`` protocol
(:mod:`fedbandit.protocols.sums`, calibrated by :func:`fedbandit.accounting.ddg.ddg_params`
with amplification by subsampling at q = n/N).  The Flower client mod and server workflow
of :mod:`fedbandit.integrations.flower.apps` both build their pipeline from it, so there
is one calibration, computed the same way on each side, and nothing the server sends can
change the noise a client adds.

Flower's SecAgg+ (``secaggplus_mod``, ``SecAggPlusWorkflow``) quantises float updates
itself; :func:`flower_quantization` sets its parameters so that its quantiser is the
identity on the DDG residues in :math:`[0, 2^B)`:
clipping range :math:`c_F = (2^B - 1)/2`, quantisation range :math:`2^B - 1` (so the
quantiser's scale is exactly 1), modulus :math:`2^B` and weight 1.  A client sends
:math:`r - c_F`; Flower adds :math:`c_F` back (exact in binary64: half-integers below
:math:`2^{52}`) and the stochastic rounding of an integer is the integer.  The server
workflow then undoes Flower's de-quantisation of the unmasked sum exactly
(:func:`modular_sum_from_flower`).  The modulus must be exactly :math:`2^B`: a smaller
one wraps the clients' residues around, a larger one reveals the carries of the sum (how
many clients' noised coordinates were negative), which the DDG analysis does not cover.

References
----------
.. [KLS21] P. Kairouz, Z. Liu and T. Steinke, "The distributed discrete Gaussian
   mechanism for federated learning with secure aggregation", ICML 2021.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from fedbandit._validation import (
    check_choice,
    check_delta,
    check_epsilon,
    check_float_in_range,
    check_int_in_range,
    check_positive_float,
    check_positive_int,
)
from fedbandit.accounting.ddg import DEFAULT_BETA, ddg_epsilon
from fedbandit.accounting.subsampling import amplification_for
from fedbandit.protocols import create

__all__ = [
    "FLOWER_MAX_BITS",
    "DDGSetting",
    "flower_quantization",
    "residues_to_flower",
    "modular_sum_from_flower",
    "check_secagg_threshold",
    "check_flower_modulus",
    "check_expected_calibration",
    "check_round_config",
]

#: Largest bit width Flower's SecAgg+ carries: its quantiser casts to int32 and its
#: modulus must be below 2^32.
FLOWER_MAX_BITS = 31

#: Keys of the public DDG parameters the server sends with every round's fit instructions.
_CONFIG_KEYS = ("bits", "gamma", "sigma", "clip", "d_pad", "n", "flatten_seed")


@dataclass(frozen=True)
class DDGSetting:
    """The public parameters every party of a DDG federation agrees on.

    Parameters
    ----------
    epsilon, delta : float
        Target of the whole run (all ``rounds``), for an analyst who sees the released
        sums but not who was sampled (:mod:`fedbandit.protocols.sums`).
    n_clients : int
        N, the population (Flower's SuperNodes).
    clients_per_round : int
        n, the clients sampled without replacement every round; each adds 1/n of the
        noise variance, so exactly n must take part.
    rounds : int
        T, the releases the guarantee covers.
    dim : int
        d, the length of a client's (flattened) update.
    clip : float
        c, the ℓ2 clip bound of a client's update.
    bits : int, default 16
        B: residues mod 2^B (at most :data:`FLOWER_MAX_BITS`).
    k, rounding_beta, flatten, norm_growth, relation
        As in ``create("sum-ddg-secagg", ...)``.
    flatten_seed : int, default 0
        Public seed of the shared random rotation.
    """

    epsilon: float
    delta: float
    n_clients: int
    clients_per_round: int
    rounds: int
    dim: int
    clip: float
    bits: int = 16
    k: float = 3.0
    rounding_beta: float = DEFAULT_BETA
    flatten: str = "hadamard"
    norm_growth: str = "conservative"
    flatten_seed: int = 0
    relation: str = "add-remove"

    def __post_init__(self):
        check_epsilon("epsilon", self.epsilon)
        check_delta("delta", self.delta)
        n_all = check_int_in_range("n_clients", self.n_clients, 2, 10**9)
        check_int_in_range("clients_per_round", self.clients_per_round, 2, n_all,
                           reason="at least two clients (secure aggregation), at most n_clients")
        check_positive_int("rounds", self.rounds, max_value=10**9)
        check_positive_int("dim", self.dim, max_value=10**9)
        check_positive_float("clip", self.clip)
        check_int_in_range("bits", self.bits, 2, FLOWER_MAX_BITS,
                           reason="Flower's SecAgg+ quantises to int32 with a modulus below 2^32")
        check_positive_float("k", self.k)
        check_float_in_range("rounding_beta", self.rounding_beta, 0.0, 1.0, high_inclusive=False)
        check_choice("flatten", self.flatten, ("hadamard", "dft"))
        check_choice("norm_growth", self.norm_growth, ("conservative", "optimistic"))
        check_int_in_range("flatten_seed", self.flatten_seed, 0, None)
        check_choice("relation", self.relation, ("add-remove", "replace"))

    @property
    def sampling_rate(self) -> float:
        """q = n/N."""
        return self.clients_per_round / self.n_clients

    @functools.cached_property
    def protocol(self):
        """This package's ``sum-ddg-secagg`` protocol for the setting, configured (the one calibration)."""
        p = create("sum-ddg-secagg", epsilon=self.epsilon, delta=self.delta, bits=self.bits, k=self.k,
                   rounding_beta=self.rounding_beta, flatten=self.flatten, norm_growth=self.norm_growth,
                   flatten_seed=self.flatten_seed, relation=self.relation)
        return p.configure(n_parties=self.clients_per_round, dim=self.dim, n_rounds=self.rounds, clip=self.clip,
                           sampling_rate=self.sampling_rate, sampling="fixed")

    @property
    def params(self):
        """The protocol's :class:`fedbandit.accounting.ddg.DDGParams` (γ, σ, Δ₂, d', modulus)."""
        return self.protocol.params

    @property
    def mechanism(self):
        """The protocol's :class:`fedbandit.mechanisms.DDGMechanism` (encoder, decoder, fixed rotation)."""
        return self.protocol.randomizer.mechanism

    def round_config(self) -> dict:
        """The public parameters the server sends with every round (``ddg.*`` keys), checked by the clients."""
        q = self.params
        values = dict(bits=q.bits, gamma=float(q.gamma), sigma=float(q.sigma), clip=float(self.clip), d_pad=q.d_pad,
                      n=self.clients_per_round, flatten_seed=self.flatten_seed)
        return {f"ddg.{k}": values[k] for k in _CONFIG_KEYS}

    def epsilon_after(self, rounds_done: int, n_honest: int | None = None) -> float:
        """ε after ``rounds_done`` releases, each with at least ``n_honest`` clients' noise (default n).

        :func:`fedbandit.accounting.ddg.ddg_epsilon` ([KLS21]_ Prop. 14, subsampled at q as
        the protocol's own accounting); at ``rounds_done = rounds`` and n honest clients it
        is the protocol's ε.  With dropouts, the smallest number of noise shares of any
        round so far bounds every round (ε decreases in the number of shares).
        """
        t = check_positive_int("rounds_done", rounds_done, max_value=10**9)
        n = self.clients_per_round if n_honest is None else check_int_in_range("n_honest", n_honest, 1,
                                                                                   self.clients_per_round)
        q = self.params
        return ddg_epsilon(q.sigma, c=self.clip, gamma=q.gamma, beta=q.beta, n=n, d=q.d_pad, delta=self.delta,
                           steps=t, sampling_rate=self.sampling_rate, amplification=amplification_for(self.relation))


def flower_quantization(bits: int) -> dict:
    """``SecAggPlusWorkflow`` quantisation keywords that make Flower's quantiser the identity on [0, 2^bits)."""
    bits = check_int_in_range("bits", bits, 2, FLOWER_MAX_BITS)
    top = (1 << bits) - 1
    return dict(clipping_range=top / 2.0, quantization_range=top, modulus_range=1 << bits, max_weight=1.0)


def residues_to_flower(residues, bits: int) -> np.ndarray:
    """Residues in [0, 2^bits) as the floats Flower's identity quantiser maps back to them (r − c_F)."""
    r = np.asarray(residues, dtype=np.int64)
    if r.size and (r.min() < 0 or r.max() >= 1 << bits):
        raise ValueError(f"residues must lie in [0, 2^bits) = [0, {1 << bits}), got range [{r.min()}, {r.max()}]")
    return r.astype(np.float64) - flower_quantization(bits)["clipping_range"]


def modular_sum_from_flower(aggregate, n_survivors: int, bits: int) -> np.ndarray:
    r"""The survivors' sum mod 2^bits, recovered exactly from ``SecAggPlusWorkflow``'s de-quantised output.

    Flower maps the unmasked sum s (mod :math:`2^B`, with the weight :math:`n'(2^B-1)` mod
    :math:`2^B = 2^B - n'` in front) to :math:`y = (s - n' c_F)\,(2^B-1)/(2^B-n')`.  The
    inverse :math:`s = y (2^B - n')/(2^B - 1) + n' c_F` is computed in binary64 and rounded;
    a result farther than 10⁻⁶ from an integer, or outside :math:`[0, 2^B)`, means that
    the aggregate was not made by this pipeline and is refused.
    """
    bits = check_int_in_range("bits", bits, 2, FLOWER_MAX_BITS)
    n = check_int_in_range("n_survivors", n_survivors, 1, (1 << bits) - 1)
    top = (1 << bits) - 1
    y = np.asarray(aggregate, dtype=np.float64)
    s = y * ((top + 1 - n) / top) + n * (top / 2.0)
    out = np.rint(s)
    if s.size and (np.max(np.abs(s - out)) > 1e-6 or out.min() < 0 or out.max() > top):
        raise ValueError(
            f"aggregate is not the de-quantised modular sum of {n} clients' residues mod 2^{bits}: recovered values "
            f"off the integers by up to {np.max(np.abs(s - out)):.3g} or outside [0, 2^{bits})"
        )
    return out.astype(np.int64)


def check_secagg_threshold(setting: DDGSetting, num_shares, reconstruction_threshold) -> tuple[int, int]:
    """Refuse SecAgg+ shares or threshold that the sampled clients cannot meet; returns them as integers.

    ``num_shares`` (neighbours per client, including itself) at most n and at least 3;
    ``reconstruction_threshold`` t in [2, num_shares]: with fewer sampled clients than t no
    mask could be removed and the round would abort after the clients did their work.
    Fractions (Flower's float form) are resolved against n as Flower does.
    """
    if not isinstance(setting, DDGSetting):
        raise TypeError(f"setting must be a DDGSetting, got {type(setting).__name__}")
    n = setting.clients_per_round
    if isinstance(num_shares, float) and not isinstance(num_shares, bool):
        if not 0.0 < num_shares <= 1.0:
            raise ValueError(f"num_shares as a fraction must lie in (0, 1], got {num_shares!r}")
        shares = round(num_shares * n)
        if shares < n and shares % 2 == 0:
            shares += 1
        if shares <= 2:
            shares = n
    else:
        shares = check_int_in_range("num_shares", num_shares, 3, None)
        if shares > n:
            raise ValueError(f"num_shares={shares} exceeds clients_per_round={n}: a client has at most {n} neighbours "
                             "(itself included) in a round")
    if isinstance(reconstruction_threshold, float) and not isinstance(reconstruction_threshold, bool):
        if not 0.0 < reconstruction_threshold <= 1.0:
            raise ValueError(f"reconstruction_threshold as a fraction must lie in (0, 1], got {reconstruction_threshold!r}")
        t = max(round(reconstruction_threshold * shares), 2)
    else:
        t = check_int_in_range("reconstruction_threshold", reconstruction_threshold, 2, None)
    if t > n:
        raise ValueError(f"reconstruction_threshold={t} exceeds clients_per_round={n}: fewer sampled clients than the "
                         "SecAgg threshold, so no round could be unmasked")
    if t > shares:
        raise ValueError(f"reconstruction_threshold={t} exceeds num_shares={shares}: a secret shared into {shares} "
                         "shares cannot need more of them")
    return shares, t


def check_flower_modulus(setting: DDGSetting, modulus_range) -> int:
    """Refuse a SecAgg+ modulus other than 2^bits: smaller wraps residues around, larger reveals the carries."""
    m = 1 << setting.bits
    modulus_range = check_int_in_range("modulus_range", modulus_range, 2, None)
    if modulus_range < m:
        raise ValueError(
            f"modulus_range={modulus_range} is too small for the clients' residues in [0, 2^bits) = [0, {m}) "
            f"(bits={setting.bits}): they would wrap around; use modulus_range = 2^bits = {m}"
        )
    if modulus_range > m:
        raise ValueError(
            f"modulus_range={modulus_range} exceeds 2^bits = {m} (bits={setting.bits}): the server would learn the sum "
            "beyond its residue mod 2^bits (the carries, a function of single clients' noised values), which the DDG "
            f"guarantee does not cover; use modulus_range = {m}"
        )
    return m


def check_expected_calibration(setting: DDGSetting, *, clip=None, sigma=None) -> None:
    """Refuse a clip bound or noise scale that differs from the one the target (ε, δ) was accounted for.

    ``clip`` and ``sigma`` are what a deployment believes it runs (for instance the values
    of an earlier configuration); the accounted ones are the setting's c and the σ the
    protocol calibrated (relative tolerance 10⁻⁹).
    """
    q = setting.params
    for name, value, accounted in (("clip", clip, setting.clip), ("sigma", sigma, q.sigma)):
        if value is None:
            continue
        value = check_positive_float(name, value)
        if not math.isclose(value, accounted, rel_tol=1e-9):
            raise ValueError(
                f"{name}={value!r} does not match the {name} the target (epsilon={setting.epsilon}, "
                f"delta={setting.delta}) was accounted for: {accounted!r} (n={setting.clients_per_round}, "
                f"T={setting.rounds}, q={setting.sampling_rate:.4g})"
            )


def check_round_config(setting: DDGSetting, config) -> None:
    """A client's check of the server's per-round ``ddg.*`` parameters against its own calibration.

    A server asking for another clip bound, noise scale, bit width, grid or rotation (or a
    different number of clients per round) is refused: the client adds the noise its own
    setting calibrated, and the server's reported ε would not be the run's.
    """
    mine = setting.round_config()
    for key, value in mine.items():
        if key not in config:
            raise ValueError(f"the server's round config lacks {key!r} (the DDG parameters it accounted for)")
        got = config[key]
        same = math.isclose(float(got), float(value), rel_tol=1e-12) if isinstance(value, float) else got == value
        if not same:
            name = key.split(".", 1)[1]
            raise ValueError(f"{name}={got!r} sent by the server does not match this client's accounted {name}={value!r}")

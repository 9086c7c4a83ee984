r"""Accounting and calibration of the distributed binomial mechanism of cpSGD (Agarwal et al. [ASYKM18]_).

The baseline of Kairouz, Liu & Steinke [KLS21]_ (Sec. 2): every client quantizes its
(clipped, rotated) vector on a grid of step s and adds centred binomial noise
:math:`s(\mathrm{Bin}(N_i, p) - N_i p)` per coordinate; the sum of n clients carries
:math:`s(\mathrm{Bin}(N, p) - Np)` with :math:`N = nN_i`.  The package's reading of
[ASYKM18]_'s privacy theorem for the binomial mechanism (their Theorem 1 and the equation
numbers below are as the package reads them, not checked against the paper, and the
package has no first-principles check of the bound: ``tests/test_binomial.py`` recomputes
the formula by hand only):
if :math:`Np(1-p) \ge \max\{23\log(10d/\delta), 2\Delta_\infty/s\}` the release is
(ε, δ)-DP with

.. math:: \varepsilon = \frac{\Delta_2\sqrt{2\log(1.25/\delta)}}{s\sqrt{Np(1-p)}}
   + \frac{\Delta_2 c_p\sqrt{\log(10/\delta)} + \Delta_1 b_p}{s\,Np(1-p)(1-\delta/10)}
   + \frac{\tfrac23\Delta_\infty\log(1.25/\delta) + \Delta_\infty d_p\log(20d/\delta)\log(10/\delta)}{s\,Np(1-p)},

:math:`b_p = \tfrac23(p^2+(1-p)^2) + 1 - 2p`, :math:`c_p = \sqrt2(3p^3 + 3(1-p)^3 + 2p^2 + 2(1-p)^2)`,
:math:`d_p = \tfrac43(p^2+(1-p)^2)` ([ASYKM18]_ Eqs. 7, 12, 16, 17), where Δ₁, Δ₂, Δ∞ are the
sensitivities of the quantized vector in original units.  The mechanism is analysed in
approximate DP only -- the reason [KLS21]_ give for the discrete Gaussian: its privacy loss
is unbounded with positive probability, so neither Rényi DP composition nor RDP
amplification applies.  Over T rounds with sampling rate q the book therefore uses the
(ε, δ) tools (:func:`binomial_run_epsilon`):

* amplification by subsampling for (ε₀, δ₀)-DP: :math:`\log(1 + q(e^{\varepsilon_0}-1))`,
  :math:`q\delta_0` (Poisson sampling with add/remove, or sampling without replacement
  with replace-one; Balle, Barthe & Gaboardi 2018, Thm. 9/10);
* the better of basic and advanced composition (Dwork, Rothblum & Vadhan 2010) over T
  rounds (:func:`fedbandit.accounting.composition.advanced_composition`), spending half
  of the target δ on the per-round δ₀'s and half on the composition slack.

Worst-case sensitivities of a client's vector clipped to norm c, rotated and rounded
*unconditionally* on the grid s in dimension d [derived]: Δ₂ = c + s√d (every coordinate
moves by < s), Δ∞ = c + s (a rotated coordinate is at most the norm), Δ₁ = √d c + d s;
twice each for replacing a client's vector by another.

References
----------
.. [ASYKM18] N. Agarwal, A. T. Suresh, F. Yu, S. Kumar and H. B. McMahan, "cpSGD:
   communication-efficient and differentially-private distributed SGD", NeurIPS 2018.
.. [KLS21] P. Kairouz, Z. Liu and T. Steinke, "The distributed discrete Gaussian
   mechanism for federated learning with secure aggregation", ICML 2021.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from scipy import optimize

from fedbandit._combinatorics import flattened_dim
from fedbandit._validation import (
    MAX_COUNT,
    check_choice,
    check_delta,
    check_epsilon,
    check_float_in_range,
    check_int_in_range,
    check_nonnegative_float,
    check_positive_float,
    check_positive_int,
)
from fedbandit.accounting.composition import advanced_composition
from fedbandit.accounting.ddg import check_modular_k

__all__ = [
    "binomial_sensitivities",
    "cpsgd_epsilon",
    "cpsgd_condition",
    "binomial_run_epsilon",
    "BinomialParams",
    "binomial_params",
]


def _bp(p: float) -> float:
    return 2.0 / 3.0 * (p * p + (1 - p) ** 2) + 1.0 - 2.0 * p


def _cp(p: float) -> float:
    return math.sqrt(2.0) * (3 * p**3 + 3 * (1 - p) ** 3 + 2 * p * p + 2 * (1 - p) ** 2)


def _dp(p: float) -> float:
    return 4.0 / 3.0 * (p * p + (1 - p) ** 2)


def binomial_sensitivities(c: float, s: float, d: int, relation: str = "add-remove") -> tuple[float, float, float]:
    """(Δ₁, Δ₂, Δ∞) of one client's clipped, rotated vector rounded on the grid s (module docstring) [derived].

    Parameters
    ----------
    c : float
        The clipping norm.
    s : float
        The grid step.
    d : int
        The (padded) dimension.
    relation : {"add-remove", "replace"}, default "add-remove"
        The neighbouring relation (replace doubles every bound).

    Returns
    -------
    (float, float, float)
        (Δ₁, Δ₂, Δ∞).
    """
    c = check_positive_float("c", c)
    s = check_positive_float("s", s)
    d = check_positive_int("d", d)
    f = 1.0 if check_choice("relation", relation, ("add-remove", "replace")) == "add-remove" else 2.0
    return f * (math.sqrt(d) * c + d * s), f * (c + s * math.sqrt(d)), f * (c + s)


def _check_cpsgd(trials: float, p: float, s: float, d: int, delta: float) -> tuple[float, float, float, int, float]:
    return (check_positive_float("trials", trials),
            check_float_in_range("p", p, 0.0, 1.0, low_inclusive=False, high_inclusive=False),
            check_positive_float("s", s), check_positive_int("d", d, max_value=MAX_COUNT), check_delta("delta", delta))


def _check_sensitivities(sensitivities: Sequence[float]) -> tuple[float, float, float]:
    if isinstance(sensitivities, (str, bytes, dict, set)) or not hasattr(sensitivities, "__len__"):
        raise TypeError(f"sensitivities must be a sequence (Δ₁, Δ₂, Δ∞) of three reals, got {sensitivities!r:.80}")
    if len(sensitivities) != 3:
        raise ValueError(f"sensitivities must have three entries (Δ₁, Δ₂, Δ∞), got {sensitivities!r:.80}")
    d1, d2, dinf = (check_nonnegative_float(f"sensitivities[{i}]", v) for i, v in enumerate(sensitivities))
    return d1, d2, dinf


def _condition(trials: float, p: float, s: float, d: int, delta: float, delta_inf: float) -> bool:
    v = trials * p * (1 - p)
    return v >= max(23.0 * math.log(10.0 * d / delta), 2.0 * delta_inf / s)


def cpsgd_condition(trials: float, p: float, s: float, d: int, delta: float, delta_inf: float) -> bool:
    """[ASYKM18]_ Thm. 1's condition :math:`Np(1-p) \\ge \\max\\{23\\log(10d/\\delta), 2\\Delta_\\infty/s\\}`.

    Parameters
    ----------
    trials : float
        N, the binomial trials of the aggregate.
    p : float
        The binomial probability.
    s : float
        The grid step.
    d : int
        The dimension.
    delta : float
        δ.
    delta_inf : float
        Δ∞.

    Returns
    -------
    bool
        Whether the condition holds.
    """
    trials, p, s, d, delta = _check_cpsgd(trials, p, s, d, delta)
    delta_inf = check_nonnegative_float("delta_inf", delta_inf)
    return _condition(trials, p, s, d, delta, delta_inf)


def cpsgd_epsilon(trials: float, p: float, s: float, d: int, delta: float, sensitivities: Sequence[float]) -> float:
    """ε of one binomial release ([ASYKM18]_ Thm. 1, module docstring); inf where its condition fails.

    Parameters
    ----------
    trials : float
        N, the binomial trials summed over all clients.
    p : float
        Success probability in (0, 1).
    s : float
        Grid step (original units).
    d : int
        Dimension (padded).
    delta : float
    sensitivities : (Δ₁, Δ₂, Δ∞)

    Returns
    -------
    float
        ε (inf where the theorem's condition fails).
    """
    trials, p, s, d, delta = _check_cpsgd(trials, p, s, d, delta)
    d1, d2, dinf = _check_sensitivities(sensitivities)
    if not _condition(trials, p, s, d, delta, dinf):
        return math.inf
    v = trials * p * (1 - p)
    first = d2 * math.sqrt(2.0 * math.log(1.25 / delta)) / (s * math.sqrt(v))
    second = (d2 * _cp(p) * math.sqrt(math.log(10.0 / delta)) + d1 * _bp(p)) / (s * v * (1.0 - delta / 10.0))
    third = (2.0 / 3.0 * dinf * math.log(1.25 / delta) + dinf * _dp(p) * math.log(20.0 * d / delta)
             * math.log(10.0 / delta)) / (s * v)
    return first + second + third


def split_delta(delta: float, steps: int, q: float) -> tuple[float, float]:
    """(per-round δ₀, composition slack δ'): half of δ to the rounds' qδ₀'s, half to the slack."""
    if steps == 1:
        return delta / q, 0.0
    return delta / (2.0 * steps * q), delta / 2.0


def binomial_run_epsilon(eps0: float, delta0: float, steps: int, q: float, slack: float) -> float:
    """ε of ``steps`` (ε₀, δ₀)-DP rounds, each on a q-sample: amplification, then basic/advanced composition.

    Parameters
    ----------
    eps0, delta0 : float
        Each round's (ε₀, δ₀).
    steps : int
        The number of rounds.
    q : float
        The sampling rate of each round, in (0, 1].
    slack : float
        δ' of advanced composition (0: basic only).

    Returns
    -------
    float
        ε of the run.
    """
    eps0 = check_positive_float("eps0", eps0)
    delta0 = check_float_in_range("delta0", delta0, 0.0, 1.0, high_inclusive=False)
    steps = check_positive_int("steps", steps, max_value=MAX_COUNT)
    q = check_float_in_range("q", q, 0.0, 1.0, low_inclusive=False)
    slack = check_float_in_range("slack", slack, 0.0, 1.0, high_inclusive=False)
    try:
        e = math.log1p(q * math.expm1(eps0)) if q < 1.0 else eps0
    except OverflowError:  # e^ε₀ beyond float64: log(1 + q(e^ε₀ − 1)) = ε₀ + log q up to e^−ε₀
        e = eps0 + math.log(q)
    if steps == 1:
        return e
    basic = steps * e
    if slack > 0 and e < 700:
        return min(basic, advanced_composition(e, q * delta0, steps, slack)[0])
    return basic


@dataclass(frozen=True)
class BinomialParams:
    """One configuration of the distributed binomial mechanism (original units unless stated).

    ``scale`` is the grid step s, ``trials_per_client`` the :math:`N_i` of each client's
    Bin(N_i, p) (even, so that the server subtracts the integer :math:`nN_ip` at p = 1/2),
    ``eps_round``/``delta_round`` the per-round (ε₀, δ₀) of [ASYKM18]_ Thm. 1.

    Attributes
    ----------
    bits : int
        Bits per coordinate B.
    k : float
        Aggregate standard deviations the modular range covers.
    n : int
        Clients in one aggregate.
    d, d_pad : int
        Input and flattened dimensions.
    c : float
        Clipping norm.
    epsilon, delta : float
        Target of the whole run.
    p : float
        The binomial probability.
    scale : float
        The grid step s.
    trials_per_client : int
        N_i.
    eps_round, delta_round : float
        The per-round (ε₀, δ₀).
    steps : int, default 1
        Releases composed.
    sampling_rate : float, default 1.0
        q of each release.
    relation : {"add-remove", "replace"}, default "add-remove"
        The neighbouring relation.
    norm_growth : {"conservative", "optimistic"}, default "conservative"
        How the sum's norm grows with n.
    """

    bits: int
    k: float
    n: int
    d: int
    d_pad: int
    c: float
    epsilon: float
    delta: float
    p: float
    scale: float
    trials_per_client: int
    eps_round: float
    delta_round: float
    steps: int = 1
    sampling_rate: float = 1.0
    relation: str = "add-remove"
    norm_growth: str = "conservative"

    @property
    def modulus(self) -> int:
        return 1 << self.bits

    @property
    def noise_std_int(self) -> float:
        """Standard deviation of one client's binomial noise on the grid, :math:`\\sqrt{N_i p(1-p)}`."""
        return math.sqrt(self.trials_per_client * self.p * (1 - self.p))

    @property
    def sigma(self) -> float:
        """One client's noise standard deviation in original units."""
        return self.scale * self.noise_std_int

    def as_dict(self) -> dict:
        return asdict(self)


def binomial_params(bits: int, k: float, n: int, d: int, c: float, epsilon: float, delta: float, *, p: float = 0.5,
                    steps: int = 1, sampling_rate: float = 1.0, relation: str = "add-remove",
                    norm_growth: str = "conservative", flatten: str = "hadamard") -> BinomialParams:
    r"""Choose the grid step s and the trials from (bits, k, n, d, c, ε, δ), as :func:`fedbandit.accounting.ddg.ddg_params` does for DDG.

    The per-round target (ε₀, δ₀) is the largest that ``steps`` rounds on q-samples
    (:func:`binomial_run_epsilon`) keep within (ε, δ); for a grid step s the trials N are
    the fewest with :func:`cpsgd_epsilon` ≤ ε₀; s solves the range condition
    :math:`2^B s = 2k\sqrt{c^2 n_f/d' + n s^2/4 + N p(1-p) s^2}` [derived: the DDG rule with
    the binomial variance in place of σ², rounding variance at most s²/4].

    Parameters
    ----------
    bits : int
        Bits per coordinate B.
    k : float
        Aggregate standard deviations the modular range covers.
    n : int
        Clients in one aggregate.
    d : int
        The input dimension.
    c : float
        The clipping norm.
    epsilon, delta : float
        The target (ε, δ). of the whole run.
    p : float, default 0.5
        The binomial probability.
    steps : int, default 1
        Releases composed.
    sampling_rate : float, default 1.0
        q of each release.
    relation : {"add-remove", "replace"}, default "add-remove"
        The neighbouring relation.
    norm_growth : {"conservative", "optimistic"}, default "conservative"
        How the sum's norm grows with n.
    flatten : {"hadamard", "dft"}, default "hadamard"
        The flattener (sets d′).

    Returns
    -------
    BinomialParams

    Raises
    ------
    ValueError
        When no grid step lets 2^B cover k standard deviations of the aggregate.
    """
    bits = check_int_in_range("bits", bits, 2, 62)
    k = check_modular_k(k)
    n = check_positive_int("n", n)
    d = check_positive_int("d", d)
    c = check_positive_float("c", c)
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    p = check_float_in_range("p", p, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    steps = check_positive_int("steps", steps)
    q = check_float_in_range("sampling_rate", sampling_rate, 0.0, 1.0, low_inclusive=False)
    check_choice("relation", relation, ("add-remove", "replace"))
    check_choice("norm_growth", norm_growth, ("conservative", "optimistic"))
    check_choice("flatten", flatten, ("hadamard", "dft"))
    d_pad = flattened_dim(d, flatten)
    delta0, slack = split_delta(delta, steps, q)
    if delta0 >= 1.0:
        raise ValueError(f"delta={delta} is too large for sampling_rate={q}: the per-round delta would be {delta0}")
    if binomial_run_epsilon(1e-9, delta0, steps, q, slack) > epsilon:
        raise ValueError(f"epsilon={epsilon!r} is too small for steps={steps} rounds at sampling_rate={q}: "
                         "the per-round epsilon would be below 1e-9")
    eps0 = optimize.brentq(lambda e: binomial_run_epsilon(e, delta0, steps, q, slack) - epsilon, 1e-9, 50.0 + epsilon,
                           xtol=1e-13, rtol=1e-12)
    m = float(1 << bits)
    n_f = float(n) ** 2 if norm_growth == "conservative" else float(n)

    def trials_for(s: float) -> float:
        sens = binomial_sensitivities(c, s, d_pad, relation)

        def gap(log_t: float) -> float:
            return cpsgd_epsilon(math.exp(log_t), p, s, d_pad, delta0, sens) - eps0

        lo = math.log(max(23.0 * math.log(10.0 * d_pad / delta0), 2.0 * sens[2] / s) / (p * (1 - p)))
        if gap(lo) <= 0:
            return math.exp(lo)
        hi = lo + 2.0
        while gap(hi) > 0:
            hi += 2.0
        return math.exp(optimize.brentq(gap, lo, hi, xtol=1e-12, rtol=1e-12))

    def f(log_s: float) -> float:
        s = math.exp(log_s)
        var = trials_for(s) * p * (1 - p)
        return m * s - 2.0 * k * math.sqrt(c * c * n_f / d_pad + n * s * s / 4.0 + var * s * s)

    # a grid step so fine that noise dominates: the aggregate is ~ Gaussian with std ≈ Δ₂/ε₀-ish
    lo = math.log(c / m)
    tries = 0
    while f(lo) > 0:
        lo -= 1.0
        tries += 1
        if tries > 80:
            raise RuntimeError("could not bracket the grid step from below")
    hi = lo
    tries = 0
    while f(hi) < 0:
        hi += 1.0
        tries += 1
        if tries > 60:
            raise ValueError(f"no valid grid step for bits={bits}: 2^bits steps never cover k={k:g} standard deviations")
    s = math.exp(optimize.brentq(f, lo, hi, xtol=1e-10, rtol=1e-10))
    total = trials_for(s)
    per_client = 2 * math.ceil(total / n / 2.0)  # even, so n·N_i·p is an integer at p = 1/2
    return BinomialParams(bits=bits, k=k, n=n, d=d, d_pad=d_pad, c=c, epsilon=epsilon, delta=delta, p=p, scale=s,
                          trials_per_client=per_client, eps_round=eps0, delta_round=delta0, steps=steps,
                          sampling_rate=q, relation=relation, norm_growth=norm_growth)


# The private names these helpers had before they were made public (fedbandit.protocols imported
# them): kept only so that code written against them still imports; nothing here uses them.
_split_delta = split_delta

"""Testing hooks: deliberately broken variants of a protocol, to show that an audit has power.

An audit that finds "ε ≥ 0.1" against a claim of 4 says little unless the same attack
*does* refute a mechanism that is not private.  :func:`with_noise_scale` returns a copy of a
protocol whose privacy noise is multiplied by ``factor`` once the learner has configured
(calibrated) it -- the claim, the target (ε, δ), stays the original's, so an audit of the
copy that exceeds the target shows the attack can see a violation of that size.  The
copy's own accounting is computed from its (smaller) noise and says so.

Nothing here is part of the privacy API: these are hooks for audits and tests.

==================================  ======================================================
protocol part                       what ``factor`` scales
==================================  ======================================================
Gaussian tree (silo-LDP, SDP, DP20)  σ₀ of every party's node noise
central tree                         the server's σ
discrete Gaussian tree, DDG sums     σ (the discrete Gaussian's scale; γ and bits kept)
vector sum                           the binomial noise's standard deviation (b → b·factor²)
randomized response (concurrent)     the flip probability p → p·factor² (std ≈ ×factor)
counters (Laplace)                   every Laplace scale (the streams run at ε/factor)
central Gaussian sum                 the server's σ
==================================  ======================================================
"""

from __future__ import annotations

import copy
import dataclasses
import math

from fedbandit._validation import check_nonnegative_float
from fedbandit.protocols.base import Protocol

__all__ = ["with_noise_scale", "scale_noise_in_place", "noise_scale_of"]

_SCALED_CLASSES: dict = {}


def _scale_statistics(p, f):
    from fedbandit.protocols.statistics import CentralTree, DiscreteGaussianTree, GaussianTree, VectorSum

    r, a = p.randomizer, p.analyzer
    if isinstance(a, CentralTree):
        a.sigma *= f
    elif isinstance(r, GaussianTree):
        r.sigma0 *= f
    elif isinstance(r, DiscreteGaussianTree):
        from fedbandit.mechanisms.ddg import DDGMechanism

        r.params = dataclasses.replace(r.params, sigma=r.params.sigma * f)
        r.sigma0 = r.params.sigma
        r.mechanism = DDGMechanism(r.params, r.flatten_seed)
    elif isinstance(r, VectorSum):
        for level in r.levels:
            level.b = max(1, int(round(level.b * f * f)))
    else:
        raise TypeError(f"protocol {p.name!r} (randomizer {r.name!r}) adds no noise to scale")


def _scale_concurrent(p, f):
    from fedbandit.mechanisms.randomized_response import rr_message_probabilities
    from fedbandit.protocols.concurrent import VectorSumRecords

    if isinstance(p.randomizer, VectorSumRecords):  # the vector sum's noise: b Ber(p) bits, std ∝ sqrt(b)
        p.randomizer.mech.b = max(1, int(round(p.randomizer.mech.b * f * f)))
        return
    for level in p.randomizer.levels:
        level.p = min(1.0, level.p * f * f)
        level.q0, level.q1 = rr_message_probabilities(level.p)


def _scale_sum(p, f):
    from fedbandit.protocols.sums import BinomialVectors, DDGVectors, GaussianSum

    r, a = p.randomizer, p.analyzer
    if isinstance(a, GaussianSum):
        a.sigma *= f
    elif isinstance(r, DDGVectors):
        from fedbandit.mechanisms.ddg import DDGMechanism

        r.params = dataclasses.replace(r.params, sigma=r.params.sigma * f)
        if r.flatten_seed is not None:
            r.mechanism = DDGMechanism(r.params, r.flatten_seed)
    elif isinstance(r, BinomialVectors):
        from fedbandit.mechanisms.binomial import BinomialMechanism

        # the noise's standard deviation grows like sqrt(N): N f² trials (kept even, as calibrated)
        trials = max(2, 2 * round(r.params.trials_per_client * f * f / 2))
        r.params = dataclasses.replace(r.params, trials_per_client=trials)
        if r.flatten_seed is not None:
            r.mechanism = BinomialMechanism(r.params, r.flatten_seed, r.flatten)
    else:
        raise TypeError(f"protocol {p.name!r} (randomizer {r.name!r}) adds no noise to scale")


def _scale(p, f):
    from fedbandit.protocols.concurrent import ConcurrentShuffleProtocol
    from fedbandit.protocols.counting import CounterProtocol
    from fedbandit.protocols.statistics import StatisticsProtocol
    from fedbandit.protocols.sums import SumProtocol

    if isinstance(p, ConcurrentShuffleProtocol):
        _scale_concurrent(p, f)
    elif isinstance(p, StatisticsProtocol):
        _scale_statistics(p, f)
    elif isinstance(p, SumProtocol):
        _scale_sum(p, f)
    elif isinstance(p, CounterProtocol):
        if not p.private:
            raise TypeError(f"protocol {p.name!r} adds no noise to scale")
        # the Laplace scales are drawn at reset from the streams' epsilon: see _scaled_reset
    else:
        raise TypeError(f"no noise-scaling hook for protocol {p.name!r} ({type(p).__name__})")


def _scaled_class(cls):
    if cls not in _SCALED_CLASSES:
        from fedbandit.protocols.counting import CounterProtocol

        def configure(self, *args, **kwargs):
            out = cls.configure(self, *args, **kwargs)
            _scale(self, self._audit_noise_scale)
            return out

        def accounting(self, *args, **kwargs):
            # A (nearly) noise-free copy can overflow the accountant: it is then simply not private.
            try:
                return cls.accounting(self, *args, **kwargs)
            except (OverflowError, FloatingPointError, ValueError, ZeroDivisionError):
                from fedbandit.accounting.accountant import account
                from fedbandit.accounting.events import InvalidEvent

                return account(InvalidEvent(f"noise scaled by {self._audit_noise_scale:g}: not private"),
                               target_epsilon=self.target_epsilon, target_delta=self.target_delta,
                               model=self.model, relation=self.relation)

        def calibration(self):
            try:
                return cls.calibration(self)
            except (OverflowError, FloatingPointError, ValueError, ZeroDivisionError):
                return {"protocol": self.name, "model": self.model, "noise_scale": self._audit_noise_scale}

        body = {"configure": configure, "accounting": accounting, "calibration": calibration, "__module__": __name__}
        if issubclass(cls, CounterProtocol):
            def reset(self, *, n_runs, rng):
                out = cls.reset(self, n_runs=n_runs, rng=rng)
                f = self._audit_noise_scale
                eps = self.epsilon.reshape(self.n_runs, 1, 1) if self.per_run else self.epsilon
                shape = (self.n_runs, self.n_agents, self.n_arms)
                # Laplace scales are proportional to 1/ε: streams at ε/f have f times the noise.
                self._streams = self.randomizer.make_streams(self, eps / f, shape)
                return out

            body["reset"] = reset
        _SCALED_CLASSES[cls] = type(f"NoiseScaled{cls.__name__}", (cls,), body)
    return _SCALED_CLASSES[cls]


def with_noise_scale(protocol: Protocol, factor: float) -> Protocol:
    """A copy of ``protocol`` whose privacy noise is ``factor`` times the calibrated one (testing hook).

    The copy keeps the original's target (ε, δ) -- the claim an audit compares with -- and
    is scaled every time it is configured, after the calibration; a configured protocol is
    scaled at once.  ``factor=0.25`` is "noise scaled down 4×"; ``factor=1`` changes nothing;
    ``factor=0`` removes the Gaussian noise (the exact releases, for computing an audit's
    exact change; samplers that need a positive scale refuse it).

    Raises
    ------
    TypeError
        If the protocol adds no noise (the non-private protocols) or has no hook.
    """
    if not isinstance(protocol, Protocol):
        raise TypeError(f"protocol must be a fedbandit.protocols.Protocol, got {type(protocol).__name__}")
    factor = check_nonnegative_float("factor", factor)
    if not math.isfinite(factor):
        raise ValueError(f"factor must be a finite number >= 0, got {factor!r}")
    p = copy.deepcopy(protocol)
    base = type(p)
    while base.__name__.startswith("NoiseScaled") and base.__module__ == __name__:
        base = base.__mro__[1]
    p.__class__ = _scaled_class(base)
    p._audit_noise_scale = factor * getattr(protocol, "_audit_noise_scale", 1.0)
    if p._configured:
        _scale(p, factor)
    return p


def scale_noise_in_place(protocol: Protocol, factor: float) -> Protocol:
    """Scale the noise of a protocol *already configured by its learner* (testing hook).

    The learner keeps the regularizer and radius it derived from the calibrated noise: this
    is the same learner whose protocol adds ``factor`` times the noise it calibrated (an
    under-noised implementation).  Returns ``protocol``.  ``factor=0`` removes Gaussian
    noise (the noise-free twin of an audit).
    """
    if not isinstance(protocol, Protocol):
        raise TypeError(f"protocol must be a fedbandit.protocols.Protocol, got {type(protocol).__name__}")
    factor = check_nonnegative_float("factor", factor)
    protocol._require()
    base = type(protocol)
    protocol.__class__ = _scaled_class(base) if not base.__name__.startswith("NoiseScaled") else base
    protocol._audit_noise_scale = factor * getattr(protocol, "_audit_noise_scale", 1.0)
    _scale(protocol, factor)
    return protocol


def noise_scale_of(protocol: Protocol) -> float:
    """The factor a protocol's noise was scaled by with :func:`with_noise_scale` (1 for a real protocol)."""
    return float(getattr(protocol, "_audit_noise_scale", 1.0))

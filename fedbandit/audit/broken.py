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

These hooks change the *parameter* the code draws with (the copy's σ): an audit that then
draws its trials from that σ tests the declaration, not the code.  :func:`planted_noise`
instead mutates the **implementation**: inside the context, the noise draws of the
mechanisms' code (the Generator calls every randomizer goes through) return ``factor``
times their noise, while every protocol keeps its calibrated, declared σ -- a quarter-noise
bug, as a buggy implementation would have it.  The sites (:data:`PLANTED_SITES`):

=====================  =================================================================
site                   what is patched (``factor`` f)
=====================  =================================================================
tree                   the tree randomizers' node draws (``mechanisms.tree._draw``,
                       Gaussian and Laplace): f × every draw (silo-LDP, central,
                       SecAgg, SDP amplification, DP20 trees)
discrete-gaussian      ``mechanisms.discrete_gaussian.sample_discrete_gaussian`` and its
                       imports: draws at scale f·σ (DDG trees and sums)
laplace                ``mechanisms.continual_counting._draw_standard_laplace``: f × every
                       standard Laplace variate (every counter)
gaussian-mechanism     ``mechanisms.gaussian.gaussian_mechanism``: N(0, (fσ)²) (central
                       Gaussian sums)
binomial               the binomial noise of the binomial mechanism and the vector sum:
                       B ↦ round(np + f(B − np)) (centred noise × f)
randomized-response    the shuffled randomized-response counts drawn with the flip
                       probability p f² (std ≈ × f; the concurrent shuffle)
=====================  =================================================================

One more site is not in the default set (it is not a noise scale): ``"tree-node"``, the
tree randomizer's release (``mechanisms.tree.TreeRandomizer.release``) adds ``factor`` times
its noise to the node released at step 2 only (level 1) and the full noise elsewhere --
``planted_noise(0, sites="tree-node")`` is the "one node's noise dropped" bug, which leaves
the sum of the attacked releases' noise at (κ' − 1)/κ' of its variance but releases node 2
exactly; the tight audit's per-release law check catches it.

Every module of the package that imported a patched function by name is patched too,
except :mod:`fedbandit.audit` (the auditor's own samplers stay exact).  The power checks of
:func:`fedbandit.audit.tight_audit` and :func:`fedbandit.audit.audit_end_to_end` run under
it; :func:`with_noise_scale` and :func:`scale_noise_in_place` remain for the noise-free twins
(σ → 0) that give an audit its exact change.
"""

from __future__ import annotations

import contextlib
import copy
import math
import sys

import numpy as np

import fedbandit.mechanisms.binomial as binomial
import fedbandit.mechanisms.continual_counting as cc
import fedbandit.mechanisms.discrete_gaussian as dg
import fedbandit.mechanisms.gaussian as gm
import fedbandit.mechanisms.randomized_response as rr
import fedbandit.mechanisms.tree as tree
import fedbandit.mechanisms.vector_sum as vs
from fedbandit._validation import check_nonnegative_float
from fedbandit.accounting.accountant import account
from fedbandit.accounting.events import InvalidEvent
from fedbandit.protocols.base import Protocol
from fedbandit.protocols.counting import CounterProtocol

__all__ = ["with_noise_scale", "scale_noise_in_place", "noise_scale_of", "planted_noise", "PLANTED_SITES"]

#: The code sites :func:`planted_noise` patches (see the module docstring).
PLANTED_SITES = ("tree", "discrete-gaussian", "laplace", "gaussian-mechanism", "binomial", "randomized-response")

_SCALED_CLASSES: dict = {}


def _scale(p, f):
    """Scale the privacy noise of configured protocol ``p`` by ``f``: the part that adds it does
    (``scale_noise``, the parts' testing hook); a counter's streams are rebuilt at reset (below)."""
    if isinstance(p, CounterProtocol):
        if not p.private:
            raise TypeError(f"protocol {p.name!r} adds no noise to scale")
        return  # the Laplace scales are drawn at reset from the streams' epsilon: see _scaled_class's reset
    part = p.analyzer if p.analyzer.central else p.randomizer
    scale = getattr(part, "scale_noise", None)
    if scale is None:
        raise TypeError(f"no noise-scaling hook for protocol {p.name!r}: its part {part.name!r} has no scale_noise")
    try:
        scale(f)
    except TypeError as exc:
        raise TypeError(f"protocol {p.name!r}: {exc}") from None


def _scaled_class(cls):
    if cls not in _SCALED_CLASSES:
        def configure(self, *args, **kwargs):
            out = cls.configure(self, *args, **kwargs)
            _scale(self, self._audit_noise_scale)
            return out

        def accounting(self, *args, **kwargs):
            # A (nearly) noise-free copy can overflow the accountant: it is then simply not private.
            try:
                return cls.accounting(self, *args, **kwargs)
            except (OverflowError, FloatingPointError, ValueError, ZeroDivisionError):
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
                self._streams = self.randomizer.make_streams(self.setting, eps / f, shape)
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


def _centred(draw, mean, f, low=None, high=None):
    out = np.rint(mean + f * (np.asarray(draw, dtype=float) - mean))
    if low is not None or high is not None:
        out = np.clip(out, low, high)
    return out


class _ScaledBinomialGenerator(np.random.Generator):
    """A Generator on the same bit stream whose ``binomial`` draws are centred-scaled by f."""

    def __init__(self, rng, f):
        super().__init__(rng.bit_generator)
        self._f = f

    def binomial(self, n, p, size=None):
        b = super().binomial(n, p, size=size)
        mean = np.asarray(n, dtype=float) * p
        return _centred(b, mean, self._f, 0, n).astype(np.int64)


def _planted(site, f):
    """{(module name, attribute): replacement} of one site (the originals are looked up now)."""
    if site == "tree":
        orig = tree._draw
        return {orig: lambda rng, shape, noise: f * orig(rng, shape, noise)}
    if site == "discrete-gaussian":
        orig = dg.sample_discrete_gaussian

        def sample(sigma, size, rng, **kw):
            return orig(max(float(sigma) * f, 1e-12), size, rng, **kw)

        return {orig: sample}
    if site == "laplace":
        orig = cc._draw_standard_laplace
        return {orig: lambda rng, size: f * orig(rng, size)}
    if site == "gaussian-mechanism":
        orig = gm.gaussian_mechanism

        def mech(value, sigma, rng, **kw):
            return orig(value, max(float(sigma) * f, 1e-300), rng, **kw)

        return {orig: mech}
    if site == "binomial":
        enc, vbin = binomial.BinomialMechanism.encode, vs.draw_binomial

        def encode(self, x, rng):
            return enc(self, x, _ScaledBinomialGenerator(rng, f))

        def vector_binomial(rng, n, p, size):
            return _centred(vbin(rng, n, p, size), float(n) * p, f, 0, n)

        return {enc: encode, vbin: vector_binomial}
    if site == "tree-node":
        rel = tree.TreeRandomizer.release

        def release(self, gamma, rng, *, runs=None, return_noise=False):
            j, out, z = rel(self, gamma, rng, runs=runs, return_noise=True)
            if not self.batch_shape:
                hit = self.k == 2
            else:  # the runs' own steps (just advanced), broadcast over their items
                step = self.steps if runs is None else self.steps[np.asarray(runs)]
                hit = (step == 2).reshape((-1,) + (1,) * (np.ndim(z) - 1))
            cut = np.where(hit, (1.0 - f) * z, 0.0)
            out, z = out - cut, z - cut
            return (j, out, z) if return_noise else (j, out)

        return {rel: release}
    if site == "randomized-response":
        orig = rr.sample_rr_counts_unchecked

        def counts(ones, m, q0, q1, rng):
            # the flip probability p = 2 q0 drawn as p f² (a message's noise std ≈ × f; a
            # centred scaling would leave one-message counts unchanged)
            q = min(0.5, q0 * f * f)
            return orig(ones, m, q, 1.0 - q, rng)

        return {orig: counts}
    raise ValueError(f"site must be one of {PLANTED_SITES}, got {site!r}")


@contextlib.contextmanager
def planted_noise(factor: float, sites=None):
    """Context manager: plant a noise bug in the implementation (every randomizer's draw × ``factor``).

    Inside the context the mechanisms' noise draws (the sites of :data:`PLANTED_SITES`, all by
    default) return ``factor`` times their noise; no protocol's declared σ, calibration or
    accounting changes.  An audit of the code run inside the context must see the bug: this
    is how a power check mutates the implementation (testing hook).  The patches are undone
    on exit, also on an exception.  Not thread-safe (it patches module attributes).

    Parameters
    ----------
    factor : float
        In [0, 1] for less noise (0.25: a quarter of it; 0: none, the discrete Gaussian
        then at scale 1e-12); > 1 for more.
    sites : iterable of str, optional
        A subset of :data:`PLANTED_SITES` (default all of them), or ``"tree-node"`` (not in
        the default: only node 2's noise × ``factor``, see the module docstring).
    """
    factor = check_nonnegative_float("factor", factor)
    if not math.isfinite(factor):
        raise ValueError(f"factor must be a finite number >= 0, got {factor!r}")
    if sites is None:
        sites = PLANTED_SITES
    if isinstance(sites, str):
        sites = (sites,)
    sites = tuple(sites)
    for site in sites:
        if site not in PLANTED_SITES + ("tree-node",):
            raise ValueError(f"sites must be a subset of {PLANTED_SITES + ('tree-node',)}, got {site!r}")
    replacements = {}
    for site in sites:
        replacements.update(_planted(site, factor))
    saved = []

    def swap(owner):
        # every attribute of ``owner`` that is one of the patched functions (unhashable values skipped)
        for attr, value in list(vars(owner).items()):
            try:
                new = replacements.get(value)
            except TypeError:
                continue
            if new is not None:
                saved.append((owner, attr, value))
                setattr(owner, attr, new)

    for name, mod in list(sys.modules.items()):
        if mod is None or not (name == "fedbandit" or name.startswith("fedbandit.")) or name.startswith("fedbandit.audit"):
            continue
        swap(mod)  # functions imported by name
        for value in list(vars(mod).values()):
            if isinstance(value, type) and value.__module__ == name:
                swap(value)  # methods and function-valued class attributes of the module's own classes
    try:
        yield factor
    finally:
        for obj, attr, value in reversed(saved):
            setattr(obj, attr, value)

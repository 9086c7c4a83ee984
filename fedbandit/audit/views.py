"""What the adversary of each privacy model sees: taps on a protocol's data flow.

An audit must attack what the adversary of the model actually receives, over the whole run
(Zhou & Chowdhury 2023, Def. 3.1 and Remark 3.2; Cheu et al. 2019; Bonawitz et al. 2017):

==================  =======================  =================================================
model               adversary                its view (recorded here)
==================  =======================  =================================================
silo-level LDP      the server (and others)  every message agent i sends, with its sender
shuffle DP          the server               the shuffled multiset of the messages
secure aggregation  the server               only the (modular) sum of the messages
central DP          everyone but the server  the server's releases (the noisy prefix sums)
DP20                every other silo         *when* synchronizations happen, and the releases
==================  =======================  =================================================

Two recorders cover them, both installed on a *copy* of a protocol (:func:`tapped`), so a
real learner runs with them and adaptive effects are included:

* :class:`Tap` -- an intermediary that wraps the protocol's own one and records what it
  delivers to the server (messages with senders, the permuted multiset, the sum, the
  shufflers' counts), one entry per delivery;
* :class:`ReleaseRecorder` -- records what the protocol returns to the learners (the
  released prefix sums, aggregates, private running sums).

:func:`nodes_from_prefixes` turns the releases of a tree protocol back into its node
releases (post-processing, both ways), so an attack can use the releases that contain
the target user's record.
"""

from __future__ import annotations

import copy

import numpy as np

from fedbandit._validation import MAX_COUNT, check_array, check_nonnegative_int, check_positive_int
from fedbandit.protocols.base import Intermediary, Protocol

__all__ = [
    "Tap",
    "ReleaseRecorder",
    "tapped",
    "nodes_from_prefixes",
    "tree_nodes_containing",
]

#: The release method of every protocol kind.
_RELEASE_METHOD = {"statistics": "synchronize", "counter": "release", "sum": "aggregate"}


class Tap(Intermediary):
    """An intermediary that delivers what ``inner`` delivers and records it (the server's view).

    Everything else (``view``, ``mode``, ``batch_sizes``, ``check``, ...) is the wrapped
    intermediary's, so a protocol behaves exactly as with ``inner``.  ``records`` holds one
    copy of every delivery, in order.
    """

    def __init__(self, inner: Intermediary):
        if not isinstance(inner, Intermediary):
            raise TypeError(f"inner must be a fedbandit.protocols.Intermediary, got {type(inner).__name__}")
        self.inner = inner
        self.name = inner.name
        self.view = inner.view
        self.trusted = inner.trusted
        self.records: list = []

    def __getattr__(self, name):
        # only called for attributes not found on the Tap itself
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def supports(self, randomizer):
        return self.inner.supports(randomizer)

    def check(self, randomizer) -> None:
        self.inner.check(randomizer)

    def check_parties(self, n_parties, name="n_parties") -> None:
        self.inner.check_parties(n_parties, name)

    def describe(self) -> str:
        return self.inner.describe()

    def deliver(self, messages, rng=None, *, modulus=None):
        out = self.inner.deliver(messages, rng, modulus=modulus)
        self.records.append(copy.deepcopy(out) if isinstance(out, dict) else np.array(out, copy=True))
        return out

    def clear(self) -> None:
        self.records = []


class ReleaseRecorder:
    """Records every output of a protocol's release method (installed by :func:`tapped`)."""

    def __init__(self):
        self.records: list = []

    def clear(self) -> None:
        self.records = []


_RECORDING_CLASSES: dict = {}


def _snapshot(out):
    return tuple(np.array(o, copy=True) for o in out) if isinstance(out, tuple) else np.array(out, copy=True)


def _recording_class(cls, method_name):
    """A subclass of ``cls`` whose ``method_name`` records its outputs in ``self._audit_recorder``."""
    key = (cls, method_name)
    if key not in _RECORDING_CLASSES:
        def release(self, *args, **kwargs):
            out = getattr(super(sub, self), method_name)(*args, **kwargs)
            self._audit_recorder.records.append(_snapshot(out))
            return out

        sub = type(f"Recorded{cls.__name__}", (cls,), {method_name: release, "__module__": __name__})
        _RECORDING_CLASSES[key] = sub
    return _RECORDING_CLASSES[key]


def tapped(protocol: Protocol) -> tuple[Protocol, Tap, ReleaseRecorder]:
    """A deep copy of ``protocol`` whose deliveries and releases are recorded.

    Returns ``(copy, tap, recorder)``: the copy's intermediary is a :class:`Tap` of its
    own, and its release method (``synchronize``, ``release`` or ``aggregate`` by kind)
    records its outputs in ``recorder``.  Build the learner with the copy (it configures
    it); clear both recorders before every run.
    """
    if not isinstance(protocol, Protocol):
        raise TypeError(f"protocol must be a fedbandit.protocols.Protocol, got {type(protocol).__name__}")
    p = copy.deepcopy(protocol)
    tap = Tap(p.intermediary)
    p.intermediary = tap
    recorder = ReleaseRecorder()
    method = _RELEASE_METHOD.get(p.kind)
    if method is not None:
        p.__class__ = _recording_class(type(p), method)
        p._audit_recorder = recorder
    return p, tap, recorder


def tree_nodes_containing(batch: int, n_batches: int) -> list[int]:
    """The steps k at which the tree releases a node containing ``batch`` (1-based): the
    node of level j closing at ⌈batch/2^j⌉·2^j, for every level with that step ≤ K."""
    batch = check_positive_int("batch", batch, max_value=MAX_COUNT)
    n_batches = check_nonnegative_int("n_batches", n_batches, max_value=MAX_COUNT)
    out = []
    j = 0
    while 2**j <= n_batches:
        k = -(-batch // 2**j) * 2**j
        if k <= n_batches and (not out or k != out[-1]):
            out.append(k)
        j += 1
    return out


def nodes_from_prefixes(prefixes: np.ndarray) -> np.ndarray:
    """The node released at every step k from the prefix sums s̃_1..s̃_K of a tree protocol.

    ``prefixes`` (K, ...): s̃_k = Σ_{l: bit l of k} α̃_l, where α̃_{ν(k)} is released at k
    and the others at earlier steps; returns α̃_{ν(k)} for every k (same shape).  The map
    is invertible (the prefix sums are the node sums), so attacking the nodes is attacking
    the releases.
    """
    if isinstance(prefixes, (str, bytes, dict, set)) or prefixes is None:
        raise TypeError(f"prefixes must be an array (K, ...) of prefix sums, got {prefixes!r:.80}")
    s = check_array("prefixes", prefixes, dtype=float)
    if s.ndim == 0:
        raise ValueError(f"prefixes must be an array (K, ...) of prefix sums with at least one axis, got {prefixes!r:.80}")
    K = s.shape[0]
    kappa = max(1, K.bit_length())
    latest = np.zeros((kappa,) + s.shape[1:])
    nodes = np.zeros_like(s)
    for k in range(1, K + 1):
        j = (k & -k).bit_length() - 1
        older = sum((latest[level] for level in range(j + 1, kappa) if k >> level & 1), np.zeros(s.shape[1:]))
        nodes[k - 1] = s[k - 1] - older
        latest[j] = nodes[k - 1]
    return nodes

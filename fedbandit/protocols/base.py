"""The abstract privacy protocol P = (R, S, A) and its three parts.

Every paper of the book describes the sharing step of a federated learner as a protocol
(Zhou & Chowdhury 2023, Sec. 5; Cheu et al. 2019; Tenenbaum et al. 2023; Kairouz, Liu &
Steinke 2021): a local **randomizer** R that each party runs on its own data, an
**intermediary** S between the parties and the server (the identity, a shuffler, k
concurrent shufflers, secure aggregation) and an **analyzer** A at the server.  Here
each is an object:

* :class:`Randomizer` -- what leaves a party, and the noise it adds;
* :class:`Intermediary` -- what the server receives from the parties' messages (all of
  them with their senders, an anonymous multiset, or only their sum);
* :class:`Analyzer` -- what the server computes from what it received;

and a :class:`Protocol` composes them.  ``Protocol(randomizer, intermediary, analyzer)``
refuses a combination that makes no sense (for example vector-sum messages without a
shuffler, or floating-point messages into real secure aggregation) with a ``ValueError``
naming both parts and why.  A protocol *describes what it released* as a privacy event
(:meth:`Protocol.event`), and :func:`fedbandit.accounting.account` turns that into the
guarantee (:meth:`Protocol.accounting`): accounting apart from mechanisms, as in
``dp_accounting``.

Three kinds of protocol serve the book's learners (:attr:`Protocol.kind`):

* ``"statistics"`` -- continual release of the prefix sums of the linear-bandit
  statistics Σ x y and Σ x xᵀ of M agents, synchronized in batches
  (:class:`fedbandit.protocols.StatisticsProtocol`; fixed-batch FedLinUCB, DP20's FedUCB
  and, with one agent serving users one at a time, the concurrent-shuffle LinUCB);
* ``"counter"`` -- private running sums of many scalar streams, one per (agent, arm)
  (:class:`fedbandit.protocols.CounterProtocol`; the consensus UCB learners);
* ``"sum"`` -- one private vector sum over the parties per round
  (:class:`fedbandit.protocols.SumProtocol`; federated learning and mean estimation).

Lifecycle: ``configure(...)`` (the setting; calibrates the noise, no random state) →
``reset(n_runs=R, rng=generator)`` (allocates R independent runs; the protocol spawns its
own streams from ``rng``) → the kind's release method, repeatedly.  Protocols are built by
name with :func:`fedbandit.protocols.create`; :func:`fedbandit.protocols.available` lists
the names.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import ClassVar

from fedbandit._validation import MAX_STEPS, check_positive_int, check_rng
from fedbandit.accounting.accountant import Accounting, account
from fedbandit.accounting.events import DpEvent, check_relation

__all__ = [
    "Randomizer",
    "Intermediary",
    "Analyzer",
    "Protocol",
    "Communication",
    "ProtocolStateError",
    "KINDS",
]

#: The kinds of data flow a protocol serves (see the module docstring).
KINDS = ("statistics", "counter", "sum")


class ProtocolStateError(RuntimeError):
    """A protocol method was called out of order (configure → reset → release)."""


@dataclass
class Communication:
    """Counters of what the parties sent: synchronization rounds, messages, payload."""

    rounds: int = 0
    messages: int = 0
    payload: float = 0.0
    payload_unit: str = "floats"

    def as_dict(self) -> dict:
        return {"rounds": self.rounds, "messages": self.messages, "payload": self.payload, "unit": self.payload_unit}

    @property
    def bits(self) -> float:
        """Payload in bits (a float is 64 bits)."""
        return self.payload * (64.0 if self.payload_unit == "floats" else 1.0)


class Randomizer(abc.ABC):
    """R: the local randomizer every party runs before anything leaves it.

    Class attributes describe what the intermediary and the learner can rely on:

    ``name``
        Short identifier ("gaussian-tree", "discrete-gaussian-tree", ...).
    ``message``
        What it emits: ``"float"`` (real vectors), ``"integer"`` (integers mod 2^bits, for
        secure aggregation), ``"count"`` (per-coordinate counts of ones of many users'
        one-bit messages, already pooled: only their multiset carries information) or
        ``"exact"`` (the data itself, no privacy).
    ``needs_user_data``
        Whether it acts on every user's record (the vector sum, DDG's per-record
        rounding, randomized response) rather than on a party's batch sums.
    ``private_alone``
        Whether its messages are private without the intermediary's help (False for
        vector-sum bits: a server that sees one user's bits sees its value).
    """

    name: ClassVar[str] = "randomizer"
    message: ClassVar[str] = "float"
    needs_user_data: ClassVar[bool] = False
    private_alone: ClassVar[bool] = True

    @abc.abstractmethod
    def describe(self) -> str:
        """One line for tables: what a party sends and what noise it adds."""


class Intermediary(abc.ABC):
    """S: what stands between the parties and the server.

    ``view`` says what the server receives: ``"messages"`` (each party's message with its
    sender), ``"multiset"`` (the messages, anonymized), ``"sum"`` (only their sum).
    :meth:`check` refuses a randomizer whose messages this intermediary cannot carry or
    whose privacy the combination cannot establish.
    """

    name: ClassVar[str] = "intermediary"
    view: ClassVar[str] = "messages"
    trusted: ClassVar[str] = ""

    def check(self, randomizer: Randomizer) -> None:
        """Raise ``ValueError`` naming both parts if ``randomizer`` cannot go through this intermediary."""
        if not randomizer.private_alone and self.view == "messages":
            raise ValueError(
                f"randomizer {randomizer.name!r} with intermediary {self.name!r}: its messages are private only "
                "once anonymized or summed (a server seeing one user's messages learns its value); use a shuffler "
                "or secure aggregation"
            )

    @abc.abstractmethod
    def describe(self) -> str:
        """One line for tables."""


class Analyzer(abc.ABC):
    """A: what the server computes from what it received."""

    name: ClassVar[str] = "analyzer"

    @abc.abstractmethod
    def describe(self) -> str:
        """One line for tables."""


class Protocol(abc.ABC):
    """A privacy protocol P = (R, S, A): the only way a learner's data reaches the server.

    Parameters
    ----------
    randomizer, intermediary, analyzer
        The three parts; the constructor checks that they fit together.
    name : str
        The registry name (:func:`fedbandit.protocols.create`).
    epsilon, delta : float or None
        The target (ε, δ) of the whole run; None for a non-private protocol.
    relation : {"add-remove", "replace"}
        The neighbouring relation the protocol is calibrated and accounted for.
    """

    kind: ClassVar[str] = "statistics"

    def __init__(self, randomizer, intermediary, analyzer, *, name: str, epsilon=None, delta=None, relation="add-remove"):
        for part, cls in (("randomizer", Randomizer), ("intermediary", Intermediary), ("analyzer", Analyzer)):
            obj = {"randomizer": randomizer, "intermediary": intermediary, "analyzer": analyzer}[part]
            if not isinstance(obj, cls):
                raise TypeError(f"{part} must be a fedbandit.protocols.{cls.__name__}, got {type(obj).__name__}")
        intermediary.check(randomizer)
        self.randomizer = randomizer
        self.intermediary = intermediary
        self.analyzer = analyzer
        self.name = str(name)
        self.relation = check_relation(relation)
        from fedbandit._validation import check_delta, check_epsilon

        if epsilon is None:
            if delta is not None:
                raise ValueError(f"protocol {self.name!r}: delta={delta!r} given without epsilon")
            self.target_epsilon, self.target_delta = None, None
        else:
            self.target_epsilon = check_epsilon("epsilon", epsilon)
            self.target_delta = check_delta("delta", delta)
        self._configured = False
        self._reset_done = False
        self.communication = Communication()

    # ---------------------------------------------------------------- lifecycle
    def _require(self, reset: bool = False) -> None:
        if not self._configured:
            raise ProtocolStateError(f"protocol {self.name!r}: configure(...) must be called first")
        if reset and not self._reset_done:
            raise ProtocolStateError(f"protocol {self.name!r}: reset(n_runs=..., rng=...) must be called before releasing")

    def reset(self, *, n_runs, rng):
        """Allocate the state of ``n_runs`` independent runs; the protocol's streams come from ``rng``."""
        self._require()
        self.n_runs = check_positive_int("n_runs", n_runs, max_value=MAX_STEPS, reason="the state has one row per run")
        rng = check_rng("rng", rng)
        self._noise_rng, self._shuffle_rng = rng.spawn(2)
        self.communication = Communication(payload_unit=self.communication.payload_unit)
        self._reset()
        self._reset_done = True
        return self

    def _reset(self) -> None:
        """Subclass hook: allocate state."""

    # ---------------------------------------------------------------- privacy
    @property
    def private(self) -> bool:
        return self.target_epsilon is not None

    @property
    @abc.abstractmethod
    def model(self) -> str:
        """The privacy model: who must be trusted for the guarantee ("central", "silo-LDP", ...)."""

    @property
    def trusted(self) -> str:
        """Who must be trusted, in words."""
        return self.intermediary.trusted

    def _configure_parts(self, setting: str) -> None:
        """Configure R and A for the setting just stored; a calibration that cannot meet the
        target there is a ValueError that says which setting (``setting``, e.g. "n_agents=3, ...")."""
        try:
            self.randomizer.configure(self)
            configure = getattr(self.analyzer, "configure", None)
            if configure is not None:
                configure(self)
        except ValueError as exc:
            exc.args = (f"protocol {self.name!r} cannot be configured with {setting}: {exc}",)
            raise

    @abc.abstractmethod
    def event(self, relation: str | None = None) -> DpEvent:
        """What the protocol releases about one user over the whole configured run."""

    def accounting(self, relation: str | None = None) -> Accounting:
        """(ε, δ) for the configured setting under ``relation`` (default: the protocol's own)."""
        return self.account_event(self.event, relation)

    def account_event(self, event, relation: str | None = None) -> Accounting:
        """The accounting of ``event(relation)`` -- a function of the relation giving the
        :class:`DpEvent` of one user's influence -- with this protocol's target, model, theorem
        and notes (a learner whose behaviour changes the event, e.g. releasing more than the
        protocol assumes, accounts for its own event this way)."""
        self._require()
        relation = self.relation if relation is None else check_relation(relation)
        return account(
            event(relation),
            target_epsilon=self.target_epsilon,
            target_delta=self.target_delta,
            model=self.model,
            relation=relation,
            theorem=self.theorem(),
            notes=self.bounds_note(),
        )

    def theorem(self) -> str:
        """Which result the guarantee rests on (overridden by protocols that cite one)."""
        return ""

    def bounds_note(self) -> str:
        """The assumptions on the data that the sensitivities rely on."""
        return ""

    # ---------------------------------------------------------------- reports
    def parts(self) -> dict:
        """One-line descriptions of R, S and A."""
        return {"R": self.randomizer.describe(), "S": self.intermediary.describe(), "A": self.analyzer.describe()}

    def calibration(self) -> dict:
        """The protocol's noise parameters (for tables); subclasses add their own."""
        return {"protocol": self.name, "model": self.model}

    def __repr__(self) -> str:
        target = "" if not self.private else f", epsilon={self.target_epsilon!r}, delta={self.target_delta!r}"
        return (
            f"{type(self).__name__}(name={self.name!r}{target}, R={self.randomizer.name!r}, "
            f"S={self.intermediary.name!r}, A={self.analyzer.name!r})"
        )


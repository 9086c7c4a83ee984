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

and a :class:`Protocol` composes them.  The parts carry their behaviour: the protocol is a
pipeline that asks them (each kind has public abstract parts whose methods a new part must
answer, configured from a frozen setting, never from the protocol), and
:meth:`Protocol.supports` -- the one place that looks at the parts' types -- gives the
reason a combination makes no sense (for example vector-sum messages without a shuffler, or
floating-point messages into real secure aggregation), which the constructor raises as a
``ValueError``.  A protocol *describes what it released* as a privacy event (the part that
adds the noise gives it: :meth:`Protocol.event`), and :func:`fedbandit.accounting.account`
turns that into the guarantee (:meth:`Protocol.accounting`): accounting apart from
mechanisms, as in ``dp_accounting``.  ARCHITECTURE.md at the repository root lists the
parts' contracts and the recipe for a new protocol.

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
from typing import Any, Callable, ClassVar

import numpy as np

from fedbandit._validation import MAX_STEPS, check_delta, check_epsilon, check_positive_int, check_rng
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
    messages: float = 0  # a count; the mean number of senders per run with Poisson client sampling
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

    A randomizer carries its own behaviour: the protocol it serves asks it, and never checks
    its type.  Every kind has a public abstract base that says what that kind must answer
    (:class:`fedbandit.protocols.StatisticsRandomizer`,
    :class:`fedbandit.protocols.SumRandomizer`, :class:`fedbandit.protocols.CounterRandomizer`);
    common to all of them:

    * :meth:`configure` -- calibrate the noise for a frozen *setting* (the kind's setting
      object: sizes, bounds, target (ε, δ), relation and the intermediary's ``view``), with no
      random state;
    * :meth:`theorem` -- the citation of the guarantee its releases carry;
    * :meth:`calibration` -- its noise parameters, for tables;
    * :meth:`describe` -- one line for tables.

    A subclass that leaves one of the kind's abstract methods out cannot be instantiated
    (``TypeError`` naming the method): nothing falls back to a default payload, an empty
    theorem or a missing σ.

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
    ``payload_unit``
        The unit of :attr:`Communication.payload`: ``"floats"`` or ``"bits"``.
    """

    name: ClassVar[str] = "randomizer"
    message: ClassVar[str] = "float"
    needs_user_data: ClassVar[bool] = False
    private_alone: ClassVar[bool] = True
    payload_unit: ClassVar[str] = "floats"

    @abc.abstractmethod
    def describe(self) -> str:
        """One line for tables: what a party sends and what noise it adds."""

    @abc.abstractmethod
    def configure(self, setting: Any) -> None:
        """Calibrate for the frozen ``setting`` (no random state); ``ValueError`` if it cannot meet it."""

    @abc.abstractmethod
    def theorem(self, setting: Any) -> str:
        """Which result the guarantee of this randomizer's releases rests on, with its citation."""

    @abc.abstractmethod
    def calibration(self, setting: Any) -> dict:
        """The noise parameters of the configured randomizer (for tables)."""

    @property
    def modulus(self) -> int | None:
        """The modulus of integer messages (secure aggregation sums modulo it); None for other messages."""
        return None


class Intermediary(abc.ABC):
    """S: what stands between the parties and the server.

    ``view`` says what the server receives: ``"messages"`` (each party's message with its
    sender), ``"multiset"`` (the messages, anonymized), ``"sum"`` (only their sum).
    :meth:`supports` gives the reason a randomizer's messages cannot go through this
    intermediary (or None), :meth:`check` raises it, :meth:`check_parties` refuses a number
    of parties the intermediary cannot serve, :meth:`deliver` hands the server its view.
    """

    name: ClassVar[str] = "intermediary"
    view: ClassVar[str] = "messages"
    trusted: ClassVar[str] = ""
    #: Whether :meth:`deliver` hands the server the messages exactly as sent, each with its sender (no draws, no
    #: reordering, no arithmetic).  A subclass that overrides ``deliver`` loses it unless it declares it again.
    delivers_as_sent: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "delivers_as_sent" not in cls.__dict__ and "deliver" in cls.__dict__:
            cls.delivers_as_sent = False

    def supports(self, randomizer: Randomizer) -> str | None:
        """Why ``randomizer``'s messages cannot go through this intermediary, naming both parts; None if they can."""
        if not randomizer.private_alone and self.view == "messages":
            return (
                f"randomizer {randomizer.name!r} with intermediary {self.name!r}: its messages are private only "
                "once anonymized or summed (a server seeing one user's messages learns its value); use a shuffler "
                "or secure aggregation"
            )
        return None

    def check(self, randomizer: Randomizer) -> None:
        """Raise ``ValueError`` naming both parts if ``randomizer`` cannot go through this intermediary."""
        reason = self.supports(randomizer)
        if reason is not None:
            raise ValueError(reason)

    def check_parties(self, n_parties: int, name: str = "n_parties") -> None:
        """Raise ``ValueError`` (naming the setting's parameter ``name``) if ``n_parties`` cannot use it."""

    @abc.abstractmethod
    def deliver(self, messages: Any, rng: np.random.Generator | None = None, *, modulus: int | None = None) -> Any:
        """What the server receives of ``messages`` (senders on axis 1)."""

    @abc.abstractmethod
    def describe(self) -> str:
        """One line for tables."""


class Analyzer(abc.ABC):
    """A: what the server computes from what it received (decoded by the randomizer's public decoding).

    ``central`` marks the analyzers of the central model: a trusted server receives the exact
    inputs and adds the privacy noise itself, so the privacy event, the theorem and the noise
    statements of the protocol are the analyzer's (the randomizer's otherwise).
    """

    name: ClassVar[str] = "analyzer"
    central: ClassVar[bool] = False

    @abc.abstractmethod
    def describe(self) -> str:
        """One line for tables."""

    def configure(self, setting: Any) -> None:
        """Calibrate for the frozen ``setting`` (the central analyzers' noise); nothing by default."""

    def calibration(self, setting: Any) -> dict:
        """The analyzer's noise parameters (the central analyzers'); none by default."""
        return {}


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
    #: The part types a protocol of this class is built from (its kind's abstract parts, or narrower).
    randomizer_type: ClassVar[type | None] = None
    intermediary_type: ClassVar[type | None] = None
    analyzer_type: ClassVar[type | None] = None
    #: The frozen setting of the last :meth:`configure` (the kind's setting class); None before.
    setting: Any
    _noise_rng: np.random.Generator
    _shuffle_rng: np.random.Generator | None

    def __init__(self, randomizer: Any, intermediary: Any, analyzer: Any, *, name: str, epsilon: float | None = None,
                 delta: float | None = None, relation: str = "add-remove") -> None:
        reason = type(self).supports(randomizer, intermediary, analyzer)
        if reason is not None:
            raise ValueError(reason)
        self.randomizer = randomizer
        self.intermediary = intermediary
        self.analyzer = analyzer
        self.name = str(name)
        self.relation = check_relation(relation)
        self.target_epsilon: float | None
        self.target_delta: float | None
        if epsilon is None:
            if delta is not None:
                raise ValueError(f"protocol {self.name!r}: delta={delta!r} given without epsilon")
            self.target_epsilon, self.target_delta = None, None
        else:
            self.target_epsilon = check_epsilon("epsilon", epsilon)
            self.target_delta = check_delta("delta", delta)
        self._configured = False
        self._reset_done = False
        self.setting = None
        self.communication = Communication(payload_unit=randomizer.payload_unit)

    @classmethod
    def supports(cls, randomizer: Any, intermediary: Any, analyzer: Any) -> str | None:
        """Why the parts (R, S, A) cannot form a protocol of this class, naming the parts; None if they can.

        The constructor raises ``ValueError`` with this reason.  The base class checks that each
        part is one (a :class:`Randomizer`, an :class:`Intermediary`, an :class:`Analyzer`) of the
        class's part types (:attr:`randomizer_type`, :attr:`intermediary_type`,
        :attr:`analyzer_type`) and asks the intermediary whether it carries the randomizer's
        messages (:meth:`Intermediary.supports`); a protocol class adds its kind's pairings.  This
        is the one place where the protocols look at their parts' types.
        """
        for part, obj, base in (("randomizer", randomizer, Randomizer), ("intermediary", intermediary, Intermediary),
                                ("analyzer", analyzer, Analyzer)):
            if not isinstance(obj, base):
                return f"{part} must be a fedbandit.protocols.{base.__name__}, got {type(obj).__name__}"
        reason = intermediary.supports(randomizer)
        if reason is not None:
            return reason
        for part, obj, required in (("randomizer", randomizer, cls.randomizer_type),
                                    ("intermediary", intermediary, cls.intermediary_type),
                                    ("analyzer", analyzer, cls.analyzer_type)):
            if required is not None and not isinstance(obj, required):
                required_name = getattr(required, "name", part)
                named = f" ({required_name!r})" if required_name != part else ""
                return f"{part} {obj.name!r} is not a {cls.kind} {part} of {cls.__name__}: it needs a {required.__name__}{named}"
        return None

    # ---------------------------------------------------------------- lifecycle
    def _require(self, reset: bool = False) -> None:
        if not self._configured:
            raise ProtocolStateError(f"protocol {self.name!r}: configure(...) must be called first")
        if reset and not self._reset_done:
            raise ProtocolStateError(f"protocol {self.name!r}: reset(n_runs=..., rng=...) must be called before releasing")

    def reset(self, *, n_runs: int, rng: np.random.Generator) -> Protocol:
        """Allocate the state of ``n_runs`` independent runs; the protocol's streams come from ``rng``."""
        self._require()
        self.n_runs = check_positive_int("n_runs", n_runs, max_value=MAX_STEPS, reason="the state has one row per run")
        rng = check_rng("rng", rng)
        self._noise_rng, self._shuffle_rng = rng.spawn(2)
        self.communication = Communication(payload_unit=self.randomizer.payload_unit)
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

    def _configure_parts(self, setting: Any, text: str) -> None:
        """Store the frozen ``setting`` and configure R and A for it; a calibration that cannot meet
        the target there is a ValueError that says which setting (``text``, e.g. "n_agents=3, ...")."""
        self.setting = setting
        try:
            self.randomizer.configure(setting)
            self.analyzer.configure(setting)
        except ValueError as exc:
            exc.args = (f"protocol {self.name!r} cannot be configured with {text}: {exc}",)
            raise

    @abc.abstractmethod
    def event(self, relation: str | None = None) -> DpEvent:
        """What the protocol releases about one user over the whole configured run."""

    def accounting(self, relation: str | None = None) -> Accounting:
        """(ε, δ) for the configured setting under ``relation`` (default: the protocol's own)."""
        return self.account_event(self.event, relation)

    def account_event(self, event: Callable[[str], DpEvent], relation: str | None = None) -> Accounting:
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
        """Which result the guarantee rests on: the citation of the part that adds the noise."""
        self._require()
        return self._noise_part().theorem(self.setting)

    def _noise_part(self) -> Any:
        """The part whose noise the guarantee rests on: a central analyzer's, else the randomizer's."""
        return self.analyzer if self.analyzer.central else self.randomizer

    def _capability(self, part: Any, attribute: str, missing: str) -> Any:
        """``part``'s optional ``attribute`` (a statement only some parts make, such as the Gaussian
        tree's measured noise); ``TypeError`` naming the protocol and the part, saying ``missing``, without it."""
        found = getattr(part, attribute, None)
        if found is None:
            raise TypeError(f"protocol {self.name!r} ({part.name!r}): {missing}")
        return found

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


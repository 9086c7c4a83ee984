r"""The distributed discrete Gaussian in Flower: a client mod, a server workflow, a strategy and a runner.

Kairouz, Liu & Steinke's DDG [KLS21]_ on top of Flower's SecAgg+ (Bell et al. 2020, the
``secaggplus_mod`` / ``SecAggPlusWorkflow`` of ``flwr`` 1.42):

* :func:`ddg_mod` -- a client mod placed *inside* ``secaggplus_mod``
  (``ClientApp(mods=[secaggplus_mod, ddg_mod(setting)])``): on the way back from the
  client's training it clips the update, rotates it (randomised Hadamard), rounds it,
  adds discrete Gaussian noise and reduces it mod 2^B -- this package's
  :meth:`fedbandit.mechanisms.DDGMechanism.encode`, the randomizer of ``sum-ddg-secagg`` --
  so that SecAgg+ only ever masks residues;
* :class:`DDGSecAggPlusWorkflow` -- Flower's ``SecAggPlusWorkflow`` with its quantiser set
  to the identity on residues (:func:`fedbandit.integrations.flower.setting.flower_quantization`),
  which recovers the modular sum exactly, decodes it with
  :meth:`~fedbandit.mechanisms.DDGMechanism.decode` (modular clipping, inverse rotation,
  rescaling), and accounts ε after every round with
  :meth:`~fedbandit.integrations.flower.setting.DDGSetting.epsilon_after`;
* :class:`DDGFedAvgM` -- federated averaging with server momentum on the decoded sum, the
  update rule of :class:`fedbandit.learners.FederatedLearner`
  (:func:`fedbandit.learners.federated.server_momentum_step`), sampling exactly n clients per round;
* :func:`run_ddg_simulation` -- the three in Flower's simulation engine (Ray).

Randomness of a client: the package's ChaCha20 noise source
(:func:`fedbandit.secagg.secure_generator`), with a fresh key from the operating system
every round unless the client was given a key (simulation, tests); with a key, round t
draws from stream t of it and a client refuses to encode the same round twice (a server
replaying a round would otherwise get the same noise twice and cancel it).

References
----------
.. [KLS21] P. Kairouz, Z. Liu and T. Steinke, "The distributed discrete Gaussian
   mechanism for federated learning with secure aggregation", ICML 2021.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import random
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from fedbandit._validation import check_int_in_range, check_positive_float, check_positive_int, check_rng
from fedbandit.integrations.flower.digits import DigitsClients
from fedbandit.integrations.flower.setting import (
    DDGSetting,
    check_expected_calibration,
    check_flower_modulus,
    check_round_config,
    check_secagg_threshold,
    flower_quantization,
    modular_sum_from_flower,
    residues_to_flower,
)
from fedbandit.learners.federated import server_momentum_step
from fedbandit.secagg import secure_generator

# Flower reports usage events to its servers unless FLWR_TELEMETRY_ENABLED=0, read when flwr is
# first imported: off unless the user chose otherwise (the book's builds run offline).
os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

try:
    import flwr.compat.common.recorddict_compat as _compat
    from flwr.app import ConfigRecord
    from flwr.client import NumPyClient
    from flwr.clientapp import ClientApp
    from flwr.common import Code, FitIns, FitRes, Status, ndarrays_to_parameters, parameters_to_ndarrays
    from flwr.common.logger import log as _flwr_log
    from flwr.server.strategy import Strategy
    from flwr.server.workflow import SecAggPlusWorkflow
except ImportError as exc:  # pragma: no cover - exercised only without flwr
    raise ImportError(
        "fedbandit.integrations.flower needs flwr: pip install 'fedbandit[flower]' (flwr[simulation]==1.42.0)"
    ) from exc

__all__ = ["ddg_mod", "DDGSecAggPlusWorkflow", "DDGFedAvgM", "RoundRecord", "run_ddg_simulation", "flower_digits_trial"]

_USED_ROUNDS = "fedbandit.ddg.used_rounds"


def _client_generator(key, round_: int):
    return secure_generator(key, stream=round_)


def ddg_mod(setting: DDGSetting, *, key: bytes | None = None):
    """The client mod: DDG-encode the update the client returns, before ``secaggplus_mod`` masks it.

    Parameters
    ----------
    setting : DDGSetting
        The client's own copy of the public setting (its calibration; the server's round
        parameters are checked against it, :func:`check_round_config`).
    key : bytes of length 32 or None
        The client's secret noise key.  None (deployment): a fresh key from ``os.urandom``
        every round.  A fixed key makes the noise reproducible (simulation, tests): round t
        draws from stream t, and a round is encoded at most once.

    Returns
    -------
    callable
        A Flower mod ``(message, context, call_next) -> message``; place it after
        ``secaggplus_mod`` in ``ClientApp(mods=[secaggplus_mod, ddg_mod(setting)])`` so that
        it runs between the client's training and SecAgg+'s masking.
    """
    if not isinstance(setting, DDGSetting):
        raise TypeError(f"setting must be a DDGSetting, got {type(setting).__name__}")
    if key is not None and (not isinstance(key, (bytes, bytearray)) or len(key) != 32):
        raise TypeError("key must be 32 bytes or None")
    mech, bits, d = setting.mechanism, setting.bits, setting.dim

    def mod(msg, ctxt, call_next):
        fitins = _compat.recorddict_to_fitins(msg.content, keep_input=True)
        check_round_config(setting, fitins.config)
        round_ = check_positive_int("ddg.round", fitins.config.get("ddg.round"), max_value=2**62)
        if key is not None:
            used = ctxt.state.config_records.get(_USED_ROUNDS, ConfigRecord({"rounds": []}))
            rounds = list(used.get("rounds", []))
            if round_ in rounds:
                raise ValueError(f"ddg.round={round_} was already encoded by this client: its noise would repeat")
            ctxt.state.config_records[_USED_ROUNDS] = ConfigRecord({"rounds": rounds + [round_]})
        out = call_next(msg, ctxt)
        fitres = _compat.recorddict_to_fitres(out.content, keep_input=True)
        update = np.concatenate([np.ravel(a) for a in parameters_to_ndarrays(fitres.parameters)]).astype(np.float64)
        if update.shape != (d,):
            raise ValueError(f"the client's update has {update.size} entries, the setting's dim={d}")
        residues = mech.encode(update[None], _client_generator(key, round_))[0]
        fitres.parameters = ndarrays_to_parameters([residues_to_flower(residues, bits)])
        fitres.num_examples = 1  # Flower's weight channel: 1 of max_weight 1 (the identity quantiser)
        out.content = _compat.fitres_to_recorddict(fitres, keep_input=False)
        return out

    return mod


@dataclass
class RoundRecord:
    """What the server workflow learnt in one round.

    ``partitions``: the survivors' partition ids (sorted; simulation only); ``neighbours``: SecAgg+'s
    neighbourhoods of the round (node id -> sorted node ids of its neighbours, itself included).
    """

    round: int
    n_survivors: int
    modular_sum: np.ndarray
    total: np.ndarray
    epsilon: float
    delta: float
    partitions: list = field(default_factory=list)
    seconds: float = 0.0
    neighbours: dict = field(default_factory=dict)


class DDGSecAggPlusWorkflow(SecAggPlusWorkflow):
    """Flower's SecAgg+ workflow around DDG residues: decode the modular sum, account ε every round.

    Parameters
    ----------
    setting : DDGSetting
    num_shares, reconstruction_threshold : int or float
        SecAgg+'s neighbourhood size and Shamir threshold (Flower's meaning), checked
        against the n clients per round (:func:`check_secagg_threshold`).
    modulus_range : int or None
        If given, must be 2^bits (:func:`check_flower_modulus`).
    clip, sigma : float or None
        If given, must be the clip bound and noise scale the target was accounted for
        (:func:`check_expected_calibration`).
    timeout : float or None
        Flower's per-stage timeout.
    seed : int or None
        Seed of the shuffle that draws SecAgg+'s neighbourhoods every round (flwr 1.42.0:
        a ``random.Random(seed)`` of the workflow's own in place of Python's global ``random``,
        :func:`_seeded_neighbour_shuffle`).  None: Flower's global ``random``.  The
        neighbourhoods decide which masks are shared with whom, not the sum (the masks
        cancel), so a seed makes runs reproducible, not more or less private.

    Every check runs here, before any round.  After each round :attr:`records` gains a
    :class:`RoundRecord` (the modular sum, the decoded sum Σ_i Δ_i, ε so far), and the
    strategy's ``aggregate_fit`` receives the decoded *sum* (one result, ``num_examples``
    = the survivors), which :class:`DDGFedAvgM` turns into the model update.  The unmask
    stage is Flower's, its Shamir reconstructions computed with the Lagrange coefficients of
    each set of share indices computed once (:func:`_lagrange_combine_shares`: the same secrets).
    """

    def __init__(self, setting: DDGSetting, num_shares, reconstruction_threshold, *, modulus_range=None, clip=None,
                 sigma=None, timeout=None, seed=None):
        if not isinstance(setting, DDGSetting):
            raise TypeError(f"setting must be a DDGSetting, got {type(setting).__name__}")
        self.setting = setting
        check_secagg_threshold(setting, num_shares, reconstruction_threshold)
        if modulus_range is not None:
            check_flower_modulus(setting, modulus_range)
        check_expected_calibration(setting, clip=clip, sigma=sigma)
        self.records: list[RoundRecord] = []
        self._n_min = setting.clients_per_round
        self._shuffle_rng = None if seed is None else random.Random(check_int_in_range("seed", seed, 0, None))
        self._neighbours: dict = {}
        # Flower resolves fractional shares and threshold against the sampled clients as checked above.
        super().__init__(num_shares, reconstruction_threshold, timeout=timeout, **flower_quantization(setting.bits))

    def __call__(self, grid, context):
        inner = context.strategy
        context.strategy = _DecodingStrategy(inner, self)
        t0 = time.perf_counter()
        try:
            super().__call__(grid, context)
        finally:
            context.strategy = inner
        if self.records:
            self.records[-1].seconds = time.perf_counter() - t0

    def setup_stage(self, grid, context, state):
        """Flower's setup stage, its neighbourhoods drawn from the workflow's seeded shuffle (if ``seed`` was given)."""
        with _seeded_neighbour_shuffle(self._shuffle_rng):
            ok = super().setup_stage(grid, context, state)
        self._neighbours = {int(nid): tuple(sorted(int(m) for m in ms))
                            for nid, ms in getattr(state, "nid_to_neighbours", {}).items()}
        return ok

    def unmask_stage(self, grid, context, state):
        """Flower's unmask stage, its Shamir reconstructions with :func:`_lagrange_combine_shares` (the same secrets)."""
        with _cached_lagrange_reconstruction():
            return super().unmask_stage(grid, context, state)

    def decode(self, server_round: int, results):
        """Recover the survivors' modular sum from SecAgg+'s output, decode it and account the round."""
        s = self.setting
        n_alive = len(results)
        if n_alive < 2:
            raise ValueError(f"round {server_round}: {n_alive} client(s) survived; secure aggregation needs two")
        (y,) = parameters_to_ndarrays(results[0][1].parameters)
        modsum = modular_sum_from_flower(y, n_alive, s.bits)
        total = s.mechanism.decode(modsum)
        self._n_min = min(self._n_min, n_alive)
        eps = s.epsilon_after(len(self.records) + 1, self._n_min)
        parts = sorted(int(r.metrics["partition-id"]) for _, r in results if "partition-id" in r.metrics)
        self.records.append(RoundRecord(round=server_round, n_survivors=n_alive, modular_sum=modsum, total=total,
                                        epsilon=eps, delta=s.delta, partitions=parts, neighbours=self._neighbours))
        _flwr_log(logging.INFO, "[DDG] round %d: sum of %d clients decoded; epsilon so far %.4g (delta %g)",
                  server_round, n_alive, eps, s.delta)
        return total


#: pycryptodome's GF(2^128) (``Crypto.Protocol.SecretSharing._Element``, Flower's Shamir field): an element is a
#: 128-bit integer, bit k the coefficient of x^k, modulo x^128 + x^7 + x^2 + x + 1.
_GF128_MODULUS = (1 << 128) | 0x87


@functools.lru_cache(maxsize=8)  # ~2 MB a set of 11 indices; a round without dropouts has one set
def _lagrange_tables(xs: tuple) -> tuple:
    """For share indices ``xs`` (sorted): per index j, the map y -> l_j(0)·y of GF(2^128) as 16 byte-window tables.

    l_j(0) = Π_{m≠j} x_m / Π_{m≠j} (x_m + x_j) is computed with pycryptodome's own field arithmetic,
    as ``Shamir.combine`` does for every chunk of every secret; it depends only on the indices, which
    every secret of a round shares (the neighbours' positions), so it is computed once per set.  l_j(0) is
    symmetric in the other indices: the tables of a set serve its shares in any order.
    """
    from Crypto.Protocol.SecretSharing import _Element

    tables = []
    for j, xj in enumerate(xs):
        num, den = _Element(1), _Element(1)
        for m, xm in enumerate(xs):
            if m != j:
                num *= _Element(xm)
                den *= _Element(xm) + _Element(xj)
        v = int(num * den.inverse())
        powers = []  # l_j(0)·x^k, k = 0..127
        for _ in range(128):
            powers.append(v)
            v <<= 1
            if v >> 128:
                v ^= _GF128_MODULUS
        windows = []  # windows[w][b] = l_j(0)·(b x^{8w}), byte w counted from the least significant
        for w in range(16):
            t = [0] * 256
            for b in range(1, 256):
                low = b & -b
                t[b] = t[b ^ low] ^ powers[8 * w + low.bit_length() - 1]
            windows.append(t[:])
        tables.append(tuple(reversed(windows)))  # indexed by the position of the byte in the 16-byte big-endian chunk
    return tuple(tables)


def _lagrange_combine_shares(share_list: list) -> bytes:
    """``flwr.common.secure_aggregation.crypto.shamir.combine_shares`` (flwr 1.42.0), with the Lagrange
    coefficients of the share indices computed once per set of indices (:func:`_lagrange_tables`).

    A share is <4-byte little-endian index><16-byte share of chunk 1><...of chunk 2>...; every chunk is
    interpolated at 0 in pycryptodome's GF(2^128) as ``Shamir.combine(shares, ssss=False)`` does (exact
    field arithmetic: the same bytes), and the chunks, concatenated, are unpadded (PKCS#7, 16).
    """
    from Crypto.Util.Padding import unpad

    chunk_num = (len(share_list[0]) - 4) >> 4
    xs = tuple(int.from_bytes(share[:4], "little", signed=False) for share in share_list)
    if len(set(xs)) != len(xs):
        raise ValueError("Duplicate share")
    indices = tuple(sorted(xs))  # one set of indices, in whatever order the neighbours' shares arrived
    by_index = dict(zip(indices, _lagrange_tables(indices)))
    tables = [by_index[x] for x in xs]
    secret_padded = bytearray(0)
    for i in range(chunk_num):
        start = (i << 4) + 4
        acc = 0
        for windows, share in zip(tables, share_list):
            for table, byte in zip(windows, share[start:start + 16]):
                acc ^= table[byte]
        secret_padded += acc.to_bytes(16, "big")
    try:
        return unpad(bytes(secret_padded), 16)
    except ValueError:
        raise ValueError("Failed to combine shares") from None


#: The Flower version whose private functions :func:`_flower_swap` replaces (any other keeps its own).
_SWAPPED_FLWR_VERSION = "1.42.0"


@contextlib.contextmanager
def _flower_swap(module, name: str, make, *, when: bool = True):
    """``module.<name>`` is ``make(original)`` for the duration, then the original again.

    The swaps of this module replace private functions of Flower 1.42.0 for the duration of our own
    stages (no Flower file is edited); on any other version, where ``module`` lacks ``name``, or
    when ``when`` is false, nothing is swapped.
    """
    import flwr

    original = getattr(module, name, None)
    if not when or original is None or flwr.__version__ != _SWAPPED_FLWR_VERSION:
        yield
        return
    setattr(module, name, make(original))
    try:
        yield
    finally:
        setattr(module, name, original)


def _cached_lagrange_reconstruction():
    """Flower 1.42.0's SecAgg+ server unmask stage with :func:`_lagrange_combine_shares` for the duration (any
    other version keeps its own).  Flower's ``combine_shares`` interpolates every 16-byte chunk of every
    survivor's secret from scratch (an inversion per share, bit-serial multiplications in pure Python):
    at 100 clients a round, 11 shares each, ~2.5 s of the server's CPU per round."""
    from flwr.server.workflow.secure_aggregation import secaggplus_workflow

    return _flower_swap(secaggplus_workflow, "combine_shares", lambda _: _lagrange_combine_shares)


class _DecodingStrategy:
    """The strategy as the SecAgg+ workflow sees it: ``aggregate_fit`` gets the decoded sum."""

    def __init__(self, inner, workflow: DDGSecAggPlusWorkflow):
        self._inner, self._workflow = inner, workflow

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def aggregate_fit(self, server_round, results, failures):
        if not results:
            return self._inner.aggregate_fit(server_round, results, failures)
        total = self._workflow.decode(server_round, results)
        proxy = results[0][0]
        res = FitRes(Status(Code.OK, ""), ndarrays_to_parameters([total]), len(results), {})
        return self._inner.aggregate_fit(server_round, [(proxy, res)], failures)


class DDGFedAvgM(Strategy):
    """Federated averaging with server momentum on the DDG-decoded sum ([KLS21]_ Sec. 6.2.3).

    Every round samples exactly n of the N clients without replacement (the sampler of
    :class:`fedbandit.learners.FederatedLearner`: the n smallest of N uniform keys, from
    ``sampling_seed``, over the clients in the order of Flower's client ids, the node ids as
    strings), sends them the model with the setting's ``ddg.*`` parameters, and applies
    :func:`fedbandit.learners.federated.server_momentum_step` to the decoded sum.  The sample is
    a function of ``sampling_seed`` and the node ids (in :func:`run_ddg_simulation`, drawn from
    its ``seed``).  ``evaluate(parameters) -> float`` (optional) is called on the model after
    every round; its values are :attr:`accuracy`.
    """

    def __init__(self, setting: DDGSetting, initial, *, momentum=0.9, server_lr=1.0, sampling_seed=0, evaluate=None,
                 wait_seconds=600.0):
        if not isinstance(setting, DDGSetting):
            raise TypeError(f"setting must be a DDGSetting, got {type(setting).__name__}")
        self.setting = setting
        self.W = np.asarray(initial, dtype=np.float64).reshape(-1)
        if self.W.shape != (setting.dim,):
            raise ValueError(f"initial must have setting.dim={setting.dim} entries, got {self.W.size}")
        self.mom = np.zeros_like(self.W)
        self.momentum = float(momentum)
        self.server_lr = check_positive_float("server_lr", server_lr)
        self.sample_rng = np.random.default_rng(check_int_in_range("sampling_seed", sampling_seed, 0, None))
        self.evaluate_fn = evaluate
        self.wait_seconds = float(wait_seconds)
        self.accuracy: list[float] = []

    def initialize_parameters(self, client_manager):
        return ndarrays_to_parameters([self.W.copy()])

    def configure_fit(self, server_round, parameters, client_manager):
        s = self.setting
        if not client_manager.wait_for(s.n_clients, timeout=self.wait_seconds):
            raise RuntimeError(f"only {client_manager.num_available()} of n_clients={s.n_clients} clients connected")
        clients = [c for _, c in sorted(client_manager.all().items())]
        if len(clients) != s.n_clients:
            raise ValueError(f"{len(clients)} clients are connected, the setting's n_clients={s.n_clients}")
        idx = np.argsort(self.sample_rng.random(s.n_clients))[: s.clients_per_round]
        config = dict(s.round_config(), **{"ddg.round": int(server_round)})
        fitins = FitIns(ndarrays_to_parameters([self.W.copy()]), config)
        return [(clients[i], fitins) for i in idx]

    def aggregate_fit(self, server_round, results, failures):
        if not results:
            return None, {}
        (total,) = parameters_to_ndarrays(results[0][1].parameters)
        self.W, self.mom = _server_step(self.W, self.mom, total, self.setting.clients_per_round, self.momentum,
                                        self.server_lr)
        return ndarrays_to_parameters([self.W.copy()]), {}

    def configure_evaluate(self, server_round, parameters, client_manager):
        return []

    def aggregate_evaluate(self, server_round, results, failures):
        return None, {}

    def evaluate(self, server_round, parameters):
        if server_round == 0 or self.evaluate_fn is None:
            return None
        acc = float(self.evaluate_fn(self.W))
        self.accuracy.append(acc)
        return 0.0, {"accuracy": acc}


def _server_step(W, mom, total, n, momentum, server_lr):
    return server_momentum_step(W, mom, total, n_clients=n, momentum=momentum, server_lr=server_lr)


def _add_pending_messages_to_queue(state, queue, nodes_mapping, f_stop) -> None:
    """Flower 1.42's simulation loop that hands the server's messages to the client workers
    (``flwr.server.superlink.fleet.vce.vce_api.add_messages_to_queue``), asking only the nodes
    that have a message waiting.

    Flower's loop asks every node, every 0.1 s, for its next message, and each question scans
    every stored message: with one node per client (1,438 here) and a stage's 100 messages in
    store, a sweep costs ~1.4 s of the driver's CPU, holding the GIL against the workers and the
    server.  Here one scan finds the nodes with an undelivered message, then the same nodes are
    asked the same question (:meth:`get_message_ins`, limit 1) in the same order: the same
    messages are delivered, a node without one was answered nothing anyway.
    """
    while not f_stop.is_set():
        with state.lock:
            pending = {m.metadata.dst_node_id for m in state.message_ins_store.values()
                       if m.metadata.delivered_at == ""}
        if pending:
            for node_id in nodes_mapping.keys():
                if node_id in pending:
                    for msg in state.get_message_ins(node_id=node_id, limit=1):
                        queue.put(msg)
        f_stop.wait(0.1)


def _pending_message_pickup():
    """Use :func:`_add_pending_messages_to_queue` in Flower's simulation loop for the duration (flwr 1.42.0 only:
    it replaces a private function of that version; any other version keeps its own loop)."""
    from flwr.server.superlink.fleet.vce import vce_api

    return _flower_swap(vce_api, "add_messages_to_queue", lambda _: _add_pending_messages_to_queue)


def _seeded_neighbour_shuffle(rng: random.Random | None):
    """SecAgg+'s setup stage shuffles the sampled node ids with ``rng`` for the duration (flwr 1.42.0 only: the
    module ``flwr.server.workflow.secure_aggregation.secaggplus_workflow`` calls ``random.shuffle`` of the global
    ``random``; here its name ``random`` is ``rng``).  None, or any other version: Flower's own shuffle."""
    from flwr.server.workflow.secure_aggregation import secaggplus_workflow

    uses_global = getattr(secaggplus_workflow, "random", None) is random
    return _flower_swap(secaggplus_workflow, "random", lambda _: rng, when=rng is not None and uses_global)


#: The seeded stream of node ids of the thread that registers a simulation's SuperNodes (:func:`_seeded_node_ids`).
_NODE_ID_STREAM = threading.local()


def _node_id_from_stream(original):
    """Flower's ``generate_rand_int_from_bytes(num_bytes, exclude)``, drawing from :data:`_NODE_ID_STREAM` in a
    thread that has one (the same rule: ``num_bytes`` little-endian bytes, redrawn while in ``exclude``), else
    Flower's own (``os.urandom``)."""

    def generate_rand_int_from_bytes(num_bytes, exclude=None):
        rng = getattr(_NODE_ID_STREAM, "rng", None)
        if rng is None:
            return original(num_bytes, exclude)
        num = int.from_bytes(rng.bytes(num_bytes), "little", signed=False)
        while exclude and num in exclude:
            num = int.from_bytes(rng.bytes(num_bytes), "little", signed=False)
        return num

    return generate_rand_int_from_bytes


@contextlib.contextmanager
def _seeded_node_ids(seed: int | None):
    """The simulation engine's SuperNodes get node ids drawn from ``np.random.default_rng(seed)`` for the duration.

    Flower 1.42.0 draws a node id from ``os.urandom`` (``generate_rand_int_from_bytes``, imported by name into
    ``in_memory_linkstate``, called by ``InMemoryLinkState.create_node``) when ``vce_api._register_nodes``
    registers node i, i = 0..N-1, with partition id i.  The strategy orders the clients by node id, so random ids
    are a random relabelling of the clients before the seeded sample, which a rerun could not repeat.  Here
    ``_register_nodes`` draws its ids from the seeded stream: only in the thread that registers the nodes (the
    stream is thread-local; run and task ids, drawn by other threads meanwhile, stay Flower's), and only during the
    registration.  None, or any other version of Flower: Flower's own ids.
    """
    from flwr.server.superlink.fleet.vce import vce_api
    from flwr.server.superlink.linkstate import in_memory_linkstate

    if seed is not None:
        seed = check_int_in_range("seed", seed, 0, None)

    def seeded(register):
        def seeded_register_nodes(*args, **kwargs):
            _NODE_ID_STREAM.rng = np.random.default_rng(seed)
            try:
                return register(*args, **kwargs)
            finally:
                del _NODE_ID_STREAM.rng

        return seeded_register_nodes

    both = hasattr(vce_api, "_register_nodes") and hasattr(in_memory_linkstate, "generate_rand_int_from_bytes")
    when = seed is not None and both
    with _flower_swap(vce_api, "_register_nodes", seeded, when=when), \
            _flower_swap(in_memory_linkstate, "generate_rand_int_from_bytes", _node_id_from_stream, when=when):
        yield


class _SimulatedClientApp(ClientApp):
    """``ClientApp(client_fn=client_fn, mods=list(mods))`` that pickles as its arguments.

    Flower's Ray backend pickles the client app with every message it hands to a worker.  A
    ``ClientApp`` holds closures that cloudpickle rebuilds by value each time (a search of
    ``sys.modules`` per function, on the driver and again in the worker), as it would local
    functions or classes of ours; this one pickles as its class and arguments (module-level
    objects: by reference), and the worker builds the same app from them.
    """

    def __init__(self, client_fn, mods):
        super().__init__(client_fn=client_fn, mods=list(mods))
        self._arguments = (client_fn, tuple(mods))

    def __reduce__(self):
        return type(self), self._arguments


class _SimulatedClientFn:
    """``client_fn(context)`` of a simulated federation: client ``partition-id`` trains with ``train`` and fails in
    the ``(round, partition_id)`` pairs of ``drop`` (picklable by reference: see :func:`run_ddg_simulation`)."""

    def __init__(self, train, drop: frozenset):
        self.train, self.drop = train, drop

    def __call__(self, context):
        return _SimulatedClient(int(context.node_config["partition-id"]), self.train, self.drop).to_client()


class _SimulatedClient(NumPyClient):
    def __init__(self, pid: int, train, drop: frozenset):
        self.pid, self.train, self.drop = pid, train, drop

    def fit(self, parameters, config):
        if (int(config["ddg.round"]), self.pid) in self.drop:
            raise RuntimeError(f"simulated dropout of client {self.pid} in round {config['ddg.round']}")
        update = np.asarray(self.train(self.pid, parameters[0]), dtype=np.float64)
        return [update], 1, {"partition-id": self.pid}


class _KeyedDDGMod:
    """:func:`ddg_mod` with each simulated client's own key, ``keys(partition_id)`` (None: fresh OS keys)."""

    def __init__(self, setting: DDGSetting, keys):
        self.setting, self.keys = setting, keys

    def __call__(self, msg, ctxt, call_next):
        key = None if self.keys is None else self.keys(int(ctxt.node_config["partition-id"]))
        return ddg_mod(self.setting, key=key)(msg, ctxt, call_next)


def run_ddg_simulation(setting: DDGSetting, train, *, initial, rounds=None, num_shares=1.0, reconstruction_threshold=0.5,
                       momentum=0.9, server_lr=1.0, sampling_seed=0, evaluate=None, keys=None, dropouts=(),
                       seed=0, num_cpus=2, verbose=False) -> dict:
    """Run the DDG federation in Flower's simulation engine (Ray) and return what the server saw.

    Parameters
    ----------
    setting : DDGSetting
    train : callable
        ``train(partition_id, W) -> update`` (length ``setting.dim``): a client's local
        training from the model W (runs in the Ray workers; it must be picklable).
    initial : array_like
        The initial model (``setting.dim`` entries).
    rounds : int or None
        Rounds to run (default ``setting.rounds``; at most that many are accounted).
    num_shares, reconstruction_threshold : SecAgg+ (Flower's meaning; default: every
        sampled client is a neighbour, threshold half of them).
    keys : callable or None
        ``keys(partition_id) -> 32 bytes``: the clients' noise keys (None: fresh OS keys).
    dropouts : iterable of (round, partition_id)
        Simulated dropouts: that client, if sampled in that round, fails during its
        training, after SecAgg+'s key exchange and before it sends its masked update
        (SecAgg+ then removes its pairwise masks from the survivors' sum; ε is accounted
        with the survivors' noise shares).
    seed : int or None
        Seed of Flower's own draws that reach the run (flwr 1.42.0): the SuperNodes' node
        ids (:func:`_seeded_node_ids`), whose order the strategy samples from, and SecAgg+'s
        neighbourhoods (:func:`_seeded_neighbour_shuffle`).  With ``sampling_seed`` and
        ``keys`` it makes the run a function of its arguments: the same clients sampled, the
        same noise, the same decoded sums and models.  None: Flower's own (``os.urandom`` node
        ids, the global ``random``), so a rerun samples other clients.
    num_cpus : int
        CPUs Ray may use (one client per CPU at a time).

    The clients' results reach the server in the order Ray's workers finish them, but every
    sum the server computes from them is of integers (SecAgg+'s masked vectors mod 2^B), so the
    decoded sum does not depend on that order.

    Returns
    -------
    dict
        ``records`` (:class:`RoundRecord` per round), ``accuracy`` (per round, if
        ``evaluate``), ``W`` (the final model), ``seconds`` (wall clock of the run).
    """
    # flwr (the optional flower extra, with Ray) loads only when a federation runs
    from flwr.client.mod import secaggplus_mod
    from flwr.server import LegacyContext, ServerConfig
    from flwr.server.workflow import DefaultWorkflow
    from flwr.serverapp import ServerApp
    from flwr.simulation import run_simulation

    T = setting.rounds if rounds is None else check_int_in_range("rounds", rounds, 1, setting.rounds)
    drop = frozenset((int(r), int(p)) for r, p in dropouts)
    workflow = DDGSecAggPlusWorkflow(setting, num_shares, reconstruction_threshold, seed=seed)
    strategy = DDGFedAvgM(setting, initial, momentum=momentum, server_lr=server_lr, sampling_seed=sampling_seed,
                          evaluate=evaluate)

    client_app = _SimulatedClientApp(_SimulatedClientFn(train, drop), (secaggplus_mod, _KeyedDDGMod(setting, keys)))
    server_app = ServerApp()

    @server_app.main()
    def _main(grid, context):
        ctx = LegacyContext(context=context, config=ServerConfig(num_rounds=T), strategy=strategy)
        DefaultWorkflow(fit_workflow=workflow)(grid, ctx)

    # Ray's memory monitor kills a client actor when the *machine* is above 95% memory, whoever
    # uses it (on a shared build machine: other jobs); the operating system's OOM killer still
    # applies.  Off unless the user chose otherwise; read when Ray starts.
    os.environ.setdefault("RAY_memory_monitor_refresh_ms", "0")
    t0 = time.perf_counter()
    backend = {"client_resources": {"num_cpus": 1}, "init_args": {"num_cpus": int(num_cpus), "log_to_driver": False,
                                                                   "include_dashboard": False}}
    logging.getLogger("flwr").setLevel(logging.INFO if verbose else logging.WARNING)
    with _pending_message_pickup(), _seeded_node_ids(seed):
        run_simulation(server_app, client_app, num_supernodes=setting.n_clients, backend_config=backend,
                       verbose_logging=verbose)
    if len(workflow.records) != T:
        raise RuntimeError(f"the Flower run completed {len(workflow.records)} of {T} rounds (see Flower's log)")
    return {"records": workflow.records, "accuracy": np.array(strategy.accuracy), "W": strategy.W,
            "seconds": time.perf_counter() - t0}


def flower_digits_trial(config: dict, rng) -> dict:
    """Chapter 5's digits federation in Flower's simulation engine, as a grid point of :func:`fedbandit.experiments.run_grid`.

    ``config``: ``n_clients``, ``clients_per_round``, ``rounds`` (the accounted horizon),
    ``rounds_run`` (rounds to run, at most ``rounds``), ``epsilon``, ``delta``, ``clip``,
    ``bits``, ``k``, ``lr``, ``local_steps``, ``momentum``, ``split_seed``,
    ``num_shares``, ``reconstruction_threshold``.  From ``rng``: the clients' noise keys,
    the sampling seed and the seed of Flower's node ids and SecAgg+ neighbourhoods
    (:func:`run_ddg_simulation`'s ``seed``), so the result is a function of ``config`` and
    ``rng`` (``seconds`` aside): a rerun samples the same clients and prints the same accuracy.

    Returns a dict: ``accuracy`` (after every round), ``epsilon`` (reported after every
    round), ``n_survivors``, ``partitions`` (per round, the surviving sampled clients'
    partition ids, sorted), ``seconds``.
    """
    rng = check_rng("rng", rng)
    c = dict(config)
    clients = DigitsClients(c["n_clients"], split_seed=c.get("split_seed", 0), lr=c.get("lr", 0.5),
                            local_steps=c.get("local_steps", 5))
    setting = DDGSetting(epsilon=c["epsilon"], delta=c["delta"], n_clients=c["n_clients"],
                         clients_per_round=c["clients_per_round"], rounds=c["rounds"], dim=clients.dim, clip=c["clip"],
                         bits=c.get("bits", 16), k=c.get("k", 3.0))
    master = rng.bytes(32)
    sampling_seed = int(rng.integers(2**31))
    seed = int(rng.integers(2**31))
    out = run_ddg_simulation(
        setting, clients, initial=np.zeros(setting.dim), rounds=c.get("rounds_run", setting.rounds),
        num_shares=c.get("num_shares", 1.0), reconstruction_threshold=c.get("reconstruction_threshold", 0.5),
        momentum=c.get("momentum", 0.9), sampling_seed=sampling_seed, evaluate=clients.accuracy,
        keys=_KeyFamily(master), seed=seed,
    )
    recs = out["records"]
    return {"accuracy": out["accuracy"], "epsilon": np.array([r.epsilon for r in recs]),
            "n_survivors": np.array([r.n_survivors for r in recs]), "partitions": [np.array(r.partitions) for r in recs],
            "seconds": out["seconds"]}


class _KeyFamily:
    """Client keys SHA-256(master || partition id) (picklable, for the Ray workers)."""

    def __init__(self, master: bytes):
        self.master = bytes(master)

    def __call__(self, pid: int) -> bytes:
        return hashlib.sha256(self.master + int(pid).to_bytes(8, "big")).digest()

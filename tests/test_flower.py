"""The distributed discrete Gaussian in Flower (fedbandit.integrations.flower).

The federation test runs Flower's simulation engine (Ray) with 12 clients, 10 sampled per
round, through the DDG client mod and Flower's real SecAgg+ (key agreement, Shamir
sharing, masking with Flower's PRG, and in round 2 the removal of dropped clients' masks),
and checks that the server's decoded sum of every
round is, bit for bit, what this package's own ``sum-ddg-secagg`` pipeline -- its
randomizer, its (ideal) secure aggregation and its decoder -- computes from the same
clients' updates with the same clients' noise streams.  Any difference in clipping,
rotation, rounding, noise, the identity quantiser, the modular sum or the decoding breaks
the equality.  The misconfiguration tests need no flwr.
"""

from __future__ import annotations

import hashlib
import importlib.util
import time

import numpy as np
import pytest

from fedbandit.integrations.flower import (
    DDGSetting,
    check_expected_calibration,
    check_flower_modulus,
    check_round_config,
    check_secagg_threshold,
    flower_quantization,
    modular_sum_from_flower,
    residues_to_flower,
)

HAVE_FLWR = importlib.util.find_spec("flwr") is not None and importlib.util.find_spec("ray") is not None
SETTING = dict(epsilon=4.0, delta=1e-5, n_clients=12, clients_per_round=10, rounds=2, dim=650, clip=0.3)


def _key(pid: int) -> bytes:
    return hashlib.sha256(b"fedbandit-test-client-%d" % pid).digest()


# ------------------------------------------------------------------ misconfigurations (no flwr)
def test_modulus_other_than_2_to_the_bits_is_refused():
    s = DDGSetting(**SETTING)
    assert check_flower_modulus(s, 2**16) == 2**16
    with pytest.raises(ValueError, match="modulus_range=32768 is too small.*wrap around"):
        check_flower_modulus(s, 2**15)
    with pytest.raises(ValueError, match="modulus_range=4294967296 exceeds 2\\^bits.*carries"):
        check_flower_modulus(s, 2**32)  # Flower's default modulus


def test_bits_beyond_flower_range_refused():
    with pytest.raises(ValueError, match="bits"):
        DDGSetting(**dict(SETTING, bits=32))


def test_clip_or_sigma_off_the_accounted_target_refused():
    s = DDGSetting(**SETTING)
    check_expected_calibration(s, clip=0.3, sigma=s.params.sigma)  # the accounted ones pass
    with pytest.raises(ValueError, match="clip=0.5 does not match"):
        check_expected_calibration(s, clip=0.5)
    with pytest.raises(ValueError, match="sigma=.* does not match"):
        check_expected_calibration(s, sigma=s.params.sigma * 0.9)


def test_fewer_sampled_clients_than_threshold_refused():
    s = DDGSetting(**SETTING)
    assert check_secagg_threshold(s, 1.0, 0.5) == (10, 5)
    with pytest.raises(ValueError, match="reconstruction_threshold=11 exceeds clients_per_round=10"):
        check_secagg_threshold(s, 10, 11)
    with pytest.raises(ValueError, match="num_shares=11 exceeds clients_per_round=10"):
        check_secagg_threshold(s, 11, 5)


def test_client_refuses_server_parameters_it_did_not_account():
    s = DDGSetting(**SETTING)
    cfg = s.round_config()
    check_round_config(s, cfg)
    for key, bad in (("ddg.clip", 0.6), ("ddg.sigma", cfg["ddg.sigma"] / 2), ("ddg.bits", 12), ("ddg.n", 9)):
        with pytest.raises(ValueError, match=key.split(".")[1] + "="):
            check_round_config(s, dict(cfg, **{key: bad}))


def test_identity_quantiser_round_trip():
    # Flower's client quantiser and server de-quantiser, written out (flwr 1.42,
    # flwr/common/secure_aggregation/quantization.py and secaggplus_workflow.py), on residues.
    bits, n = 16, 10
    q = flower_quantization(bits)
    rng = np.random.default_rng(0)
    r = rng.integers(0, 2**bits, size=(n, 64))
    sent = residues_to_flower(r, bits)
    cf, R, m = q["clipping_range"], q["quantization_range"], q["modulus_range"]
    quant = np.ceil((np.clip(sent, -cf, cf) + cf) * (R / (2 * cf))).astype(np.int64)
    assert np.array_equal(quant, r)
    s = quant.sum(axis=0) % m
    weight = (n * R) % m
    y = ((s * (2 * cf / R) - cf) - (n - 1) * cf) * (R / weight)
    assert np.array_equal(modular_sum_from_flower(y, n, bits), s)
    with pytest.raises(ValueError, match="not the de-quantised modular sum"):
        modular_sum_from_flower(y + 0.3, n, bits)


# ------------------------------------------------------------------ the federation
def _package_pipeline(setting, xs, pids, round_, key=_key):
    """This package's sum-ddg-secagg R, S, A on the clients' updates with their noise streams."""
    from fedbandit.protocols import create
    from fedbandit.secagg import secure_generator

    p = create("sum-ddg-secagg", epsilon=setting.epsilon, delta=setting.delta, bits=setting.bits, k=setting.k,
               flatten_seed=setting.flatten_seed)
    p.configure(n_parties=setting.clients_per_round, dim=setting.dim, n_rounds=setting.rounds, clip=setting.clip,
                sampling_rate=setting.sampling_rate)
    p.reset(n_runs=1, rng=0)
    msgs = np.concatenate([p.randomizer.encode(x[None, None], secure_generator(key(pid), stream=round_))
                           for x, pid in zip(xs, pids)], axis=1)
    delivered = p.intermediary.deliver(msgs, None, modulus=p.params.modulus)
    return delivered[0], p.analyzer.analyze(p.randomizer.decode(delivered), None, False)[0], p


@pytest.mark.skipif(not HAVE_FLWR, reason="flwr[simulation] is not installed (pip install 'fedbandit[flower]')")
def test_flower_federation_decodes_bit_for_bit_the_package_pipeline():
    from fedbandit.integrations.flower import DigitsClients, run_ddg_simulation
    from fedbandit.learners.federated import server_momentum_step

    clients = DigitsClients(SETTING["n_clients"])
    s = DDGSetting(**dict(SETTING, dim=clients.dim))
    t0 = time.perf_counter()
    # round 2: clients 0, 1 and 2 fail after the key exchange if sampled (at least one of them is: 10 of 12)
    out = run_ddg_simulation(s, clients, initial=np.zeros(s.dim), keys=_key, evaluate=clients.accuracy,
                             dropouts=[(2, 0), (2, 1), (2, 2)])
    print(f"Flower simulation: {s.n_clients} clients, {s.rounds} rounds, {time.perf_counter() - t0:.1f} s")
    W, mom = np.zeros(s.dim), np.zeros(s.dim)
    for t, rec in enumerate(out["records"], start=1):
        assert rec.round == t and len(rec.partitions) == rec.n_survivors
        if t == 1:
            assert rec.n_survivors == s.clients_per_round
        else:  # the dropped clients' pairwise masks were removed by SecAgg+'s unmasking
            assert 7 <= rec.n_survivors <= 9 and not {0, 1, 2} & set(rec.partitions)
        xs = [clients(pid, W) for pid in rec.partitions]
        modsum, total, proto = _package_pipeline(s, xs, rec.partitions, t)
        assert np.array_equal(rec.modular_sum, modsum)
        if t == 1:  # the check can fail: other noise keys, or the next round's streams, give another sum
            assert not np.array_equal(_package_pipeline(s, xs, rec.partitions, t, key=lambda p: _key(p + 1))[0], modsum)
            assert not np.array_equal(_package_pipeline(s, xs, rec.partitions, t + 1)[0], modsum)
        assert rec.total.dtype == total.dtype and np.array_equal(rec.total, total)  # bit for bit
        W, mom = server_momentum_step(W, mom, total, n_clients=s.clients_per_round, momentum=0.9, server_lr=1.0)
    assert np.array_equal(out["W"], W)
    # epsilon reported each round: round 2 had fewer noise shares, so both rounds are accounted at that many
    eps = [r.epsilon for r in out["records"]]
    n2 = out["records"][1].n_survivors
    assert eps[0] == s.epsilon_after(1) and eps[1] == s.epsilon_after(2, n2) > proto.accounting().epsilon
    assert len(out["accuracy"]) == s.rounds


@pytest.mark.skipif(not HAVE_FLWR, reason="flwr[simulation] is not installed (pip install 'fedbandit[flower]')")
def test_client_mod_encodes_with_its_own_calibration_and_refuses_replays():
    import flwr.compat.common.recorddict_compat as compat
    from flwr.app import Context, Message, RecordDict
    from flwr.common import Code, FitIns, FitRes, Status, ndarrays_to_parameters, parameters_to_ndarrays
    from flwr.supercore.task_identity import TaskIdentity

    from fedbandit.integrations.flower import ddg_mod
    from fedbandit.secagg import secure_generator

    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 0, 1, 0
    s = DDGSetting(**SETTING)
    mod = ddg_mod(s, key=_key(3))
    update = np.random.default_rng(0).normal(size=s.dim) * 0.05

    def message(config):
        ins = FitIns(ndarrays_to_parameters([np.zeros(s.dim)]), config)
        return Message(compat.fitins_to_recorddict(ins, keep_input=True), dst_node_id=1, message_type="train")

    def call_next(msg, ctxt):  # the client's training: returns its update with 7 examples
        res = FitRes(Status(Code.OK, ""), ndarrays_to_parameters([update]), 7, {})
        return Message(compat.fitres_to_recorddict(res, keep_input=True), reply_to=msg)

    ctxt = Context(run_id=0, node_id=1, node_config={}, state=RecordDict(), run_config={})
    out = mod(message(dict(s.round_config(), **{"ddg.round": 1})), ctxt, call_next)
    res = compat.recorddict_to_fitres(out.content, keep_input=True)
    (sent,) = parameters_to_ndarrays(res.parameters)
    expected = s.mechanism.encode(update[None], secure_generator(_key(3), stream=1))[0]
    assert res.num_examples == 1 and np.array_equal(sent + (2**16 - 1) / 2, expected)
    with pytest.raises(ValueError, match="ddg.round=1 was already encoded"):
        mod(message(dict(s.round_config(), **{"ddg.round": 1})), ctxt, call_next)
    with pytest.raises(ValueError, match="sigma=.* does not match"):
        mod(message(dict(s.round_config(), **{"ddg.round": 2, "ddg.sigma": 0.0})), ctxt, call_next)


@pytest.mark.skipif(not HAVE_FLWR, reason="flwr[simulation] is not installed (pip install 'fedbandit[flower]')")
def test_workflow_refuses_bad_configuration_before_any_round():
    from fedbandit.integrations.flower import DDGSecAggPlusWorkflow

    s = DDGSetting(**SETTING)
    w = DDGSecAggPlusWorkflow(s, 1.0, 0.5, modulus_range=2**16, clip=0.3, sigma=s.params.sigma)
    assert (w.modulus_range, w.quantization_range, w.clipping_range) == (2**16, 2**16 - 1, (2**16 - 1) / 2)
    for kw, match in ((dict(modulus_range=2**32), "modulus_range"), (dict(clip=1.0), "clip=1.0"),
                      (dict(sigma=1.0), "sigma=1.0")):
        with pytest.raises(ValueError, match=match):
            DDGSecAggPlusWorkflow(s, 1.0, 0.5, **kw)
    with pytest.raises(ValueError, match="reconstruction_threshold=11"):
        DDGSecAggPlusWorkflow(s, 10, 11)


@pytest.mark.skipif(not HAVE_FLWR, reason="flwr[simulation] is not installed (pip install 'fedbandit[flower]')")
def test_pending_message_pickup_delivers_what_flowers_loop_delivers():
    """The simulation loop that asks only the nodes with a waiting message (apps._add_pending_messages_to_queue)
    puts the same messages in the same order into the workers' queue as Flower 1.42's own loop, on Flower's
    in-memory link state with 40 nodes and messages for some of them (two for one node: one per sweep); a loop
    that skipped the nodes past the first pending one would fail."""
    import threading
    from queue import Queue

    from flwr.app import Message, RecordDict
    from flwr.common.constant import SUPERLINK_NODE_ID
    from flwr.proto.task_pb2 import Task
    from flwr.server.superlink.fleet.vce import vce_api
    from flwr.server.superlink.linkstate import LinkStateFactory
    from flwr.server.superlink.linkstate.in_memory_linkstate import RunRecord
    from flwr.supercore.constant import FLWR_IN_MEMORY_DB_NAME, NOOP_FEDERATION_ID
    from flwr.supercore.object_store import ObjectStoreFactory
    from flwr.supercore.run import Run
    from flwr.supercore.task_identity import TaskIdentity
    from flwr.superlink.federation import NoOpFederationManager
    from flwr.superlink.grid.inmemory_grid import InMemoryGrid

    from fedbandit.integrations.flower import apps

    def sweeps(loop, n_sweeps, first_pending_only=False):
        factory = LinkStateFactory(FLWR_IN_MEMORY_DB_NAME, NoOpFederationManager(), ObjectStoreFactory())
        state = factory.state()
        run = Run.create_empty(run_id=7)
        run.federation_id, run.primary_task_id = NOOP_FEDERATION_ID, 8
        state.run_ids[run.run_id] = RunRecord(run=run)
        state.task_store[8] = Task(task_id=8, run_id=run.run_id)
        TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = run.run_id, SUPERLINK_NODE_ID, 8
        nodes = vce_api._register_nodes(40, factory)
        grid = InMemoryGrid(state_factory=factory)
        grid.set_run(run)
        ids = list(nodes)
        dst = [ids[i] for i in (3, 17, 17, 0, 39, 22)]
        grid.push_messages([Message(RecordDict(), dst_node_id=n, message_type="train", group_id=str(j))
                            for j, n in enumerate(dst)])
        queue, out = Queue(), []
        for _ in range(n_sweeps):  # one sweep per call: the stop event is set while the loop waits
            stop = threading.Event()
            threading.Timer(0.02, stop.set).start()
            loop(state, queue, nodes if not first_pending_only else dict([next(
                (i, nodes[i]) for i in nodes if any(m.metadata.dst_node_id == i and m.metadata.delivered_at == ""
                                                    for m in state.message_ins_store.values()))]), stop)
            sweep = []
            while not queue.empty():
                m = queue.get()
                sweep.append((nodes[m.metadata.dst_node_id], m.metadata.group_id))
            out.append(sweep)
        return out

    flower = sweeps(vce_api.add_messages_to_queue, 3)
    assert flower == [[(0, "3"), (3, "0"), (17, "1"), (22, "5"), (39, "4")], [(17, "2")], []]
    assert sweeps(apps._add_pending_messages_to_queue, 3) == flower
    assert sweeps(apps._add_pending_messages_to_queue, 3, first_pending_only=True) != flower


@pytest.mark.skipif(not HAVE_FLWR, reason="flwr[simulation] is not installed (pip install 'fedbandit[flower]')")
def test_the_simulated_client_app_pickles_without_closures_and_rebuilds_the_same_app(monkeypatch):
    """Flower's Ray backend pickles the client app with every message it hands to a worker: the app that
    run_ddg_simulation builds pickles with the standard pickle (no closure or local class, which cloudpickle would
    rebuild by value each time) and unpickles to an app with the same client function and mods, which trains and
    drops out as the original does.  An app built from closures (as before) fails the first check."""
    import pickle

    import flwr.simulation
    from flwr.client.mod import secaggplus_mod

    from fedbandit.integrations.flower import DigitsClients, apps

    captured = {}
    monkeypatch.setattr(flwr.simulation, "run_simulation", lambda server_app, client_app, **kw: captured.update(app=client_app))
    clients = DigitsClients(SETTING["n_clients"])
    s = DDGSetting(**dict(SETTING, dim=clients.dim))
    with pytest.raises(RuntimeError, match="completed 0 of 2 rounds"):
        apps.run_ddg_simulation(s, clients, initial=np.zeros(s.dim), keys=_key, dropouts=[(2, 5)])
    app = captured["app"]
    copy = pickle.loads(pickle.dumps(app))
    assert type(copy) is type(app) and len(copy._mods) == 2 and copy._mods[0] is secaggplus_mod
    mod, fn = copy._mods[1], copy._arguments[0]
    assert (mod.setting, mod.keys(4)) == (s, _key(4)) and fn.drop == frozenset({(2, 5)})
    W = np.random.default_rng(1).normal(size=s.dim) * 0.01
    from flwr.app import Context, RecordDict

    def fit(client_fn, pid, round_):
        ctxt = Context(run_id=0, node_id=1, node_config={"partition-id": pid}, state=RecordDict(), run_config={})
        return client_fn(ctxt).numpy_client.fit([W], {"ddg.round": round_})

    for pid, round_ in ((4, 1), (5, 1), (4, 2)):
        (got,), n, metrics = fit(fn, pid, round_)
        assert np.array_equal(got, clients(pid, W)) and n == 1 and metrics == {"partition-id": pid}
    with pytest.raises(RuntimeError, match="simulated dropout of client 5 in round 2"):
        fit(fn, 5, 2)


@pytest.mark.skipif(not HAVE_FLWR, reason="flwr[simulation] is not installed (pip install 'fedbandit[flower]')")
def test_cached_lagrange_reconstruction_recovers_what_flowers_combine_shares_recovers():
    """The server's unmask stage reconstructs every survivor's secret with apps._lagrange_combine_shares (Lagrange
    coefficients computed once per set of share indices): on secrets of 1-48 bytes shared by Flower's own
    create_shares, thresholds 2-8 of up to 12 shares, any subset of at least the threshold, it returns the bytes
    Flower's combine_shares returns (the secret); a duplicate index is refused; the swap lasts only while the
    stage runs.  Coefficients cached by the number of shares instead of their indices fail here, and so
    does a cache keyed by the indices in arrival order (a miss per secret: ~12 ms each)."""
    import random

    from flwr.common.secure_aggregation.crypto.shamir import combine_shares, create_shares
    from flwr.server.workflow.secure_aggregation import secaggplus_workflow

    from fedbandit.integrations.flower import apps

    rnd = random.Random(0)
    rng = np.random.default_rng(0)
    for _ in range(150):
        secret = rng.bytes(int(rnd.choice([1, 16, 31, 32, 48])))
        t = rnd.randint(2, 8)
        shares = create_shares(secret, t, rnd.randint(t, 12))
        some = rnd.sample(shares, rnd.randint(t, len(shares)))
        assert apps._lagrange_combine_shares(some) == combine_shares(some) == secret
    with pytest.raises(ValueError, match="Duplicate share"):
        apps._lagrange_combine_shares([shares[0], shares[1], shares[0]])
    # the coefficients of a set of indices are computed once, whatever the order of the shares (as they arrive)
    shares = create_shares(b"k" * 32, 6, 11)
    apps._lagrange_tables.cache_clear()
    for _ in range(5):
        rnd.shuffle(shares)
        assert apps._lagrange_combine_shares(shares) == b"k" * 32
    assert apps._lagrange_tables.cache_info().misses == 1
    flowers = secaggplus_workflow.combine_shares
    with apps._cached_lagrange_reconstruction():
        assert secaggplus_workflow.combine_shares is apps._lagrange_combine_shares
    assert secaggplus_workflow.combine_shares is flowers


@pytest.mark.skipif(not HAVE_FLWR, reason="flwr[simulation] is not installed (pip install 'fedbandit[flower]')")
def test_seeded_node_ids_repeat_with_the_seed_only_in_the_registering_thread():
    """Flower 1.42 draws a SuperNode's node id from os.urandom; under apps._seeded_node_ids(seed) the nodes that
    vce_api._register_nodes registers (node i: partition i) get ids from the seed: the same seed the same ids,
    another seed others.  Draws outside the registration (run and task ids, other threads) and everything after
    the context are Flower's own; seed None leaves Flower's ids.  The same for SecAgg+'s neighbourhood shuffle
    (apps._seeded_neighbour_shuffle).  A no-op context (Flower's random ids) fails the first check."""
    import random

    from flwr.server.superlink.fleet.vce import vce_api
    from flwr.server.superlink.linkstate import LinkStateFactory, in_memory_linkstate
    from flwr.server.workflow.secure_aggregation import secaggplus_workflow
    from flwr.supercore.constant import FLWR_IN_MEMORY_DB_NAME
    from flwr.supercore.object_store import ObjectStoreFactory
    from flwr.superlink.federation import NoOpFederationManager

    from fedbandit.integrations.flower import apps

    def node_ids(seed=None, context=True):
        factory = LinkStateFactory(FLWR_IN_MEMORY_DB_NAME, NoOpFederationManager(), ObjectStoreFactory())
        if not context:
            return vce_api._register_nodes(num_nodes=30, state_factory=factory)
        with apps._seeded_node_ids(seed):
            return vce_api._register_nodes(num_nodes=30, state_factory=factory)

    first = node_ids(5)
    assert list(first.values()) == list(range(30)) and len(set(first)) == 30 and not {0, 1} & set(first)
    assert node_ids(5) == first
    assert not set(node_ids(6)) & set(first)
    assert not set(node_ids(None)) & set(first) and not set(node_ids(context=False)) & set(first)
    flowers, register = in_memory_linkstate.generate_rand_int_from_bytes, vce_api._register_nodes
    with apps._seeded_node_ids(5):
        assert in_memory_linkstate.generate_rand_int_from_bytes(8) not in first  # not registering: os.urandom
    assert in_memory_linkstate.generate_rand_int_from_bytes is flowers and vce_api._register_nodes is register
    # SecAgg+'s shuffle of the sampled node ids
    ids = list(range(40))

    def shuffled(rng):
        out = list(ids)
        with apps._seeded_neighbour_shuffle(rng):
            secaggplus_workflow.random.shuffle(out)
        return out

    assert shuffled(random.Random(3)) == shuffled(random.Random(3)) != shuffled(random.Random(4))
    assert secaggplus_workflow.random is random


def _predicted_samples(setting, seed, sampling_seed, rounds):
    """The partition ids DDGFedAvgM samples each round when the SuperNodes were registered under
    apps._seeded_node_ids(seed): Flower's own registration and client proxies, the strategy's configure_fit,
    no simulation."""
    from flwr.server.client_manager import SimpleClientManager
    from flwr.server.compat.grid_client_proxy import GridClientProxy
    from flwr.server.superlink.fleet.vce import vce_api
    from flwr.server.superlink.linkstate import LinkStateFactory
    from flwr.supercore.constant import FLWR_IN_MEMORY_DB_NAME
    from flwr.supercore.object_store import ObjectStoreFactory
    from flwr.superlink.federation import NoOpFederationManager

    from fedbandit.integrations.flower import DDGFedAvgM, apps

    factory = LinkStateFactory(FLWR_IN_MEMORY_DB_NAME, NoOpFederationManager(), ObjectStoreFactory())
    with apps._seeded_node_ids(seed):
        nodes = vce_api._register_nodes(num_nodes=setting.n_clients, state_factory=factory)
    manager = SimpleClientManager()
    for nid in nodes:
        manager.register(GridClientProxy(node_id=nid, grid=None, run_id=0))
    strategy = DDGFedAvgM(setting, np.zeros(setting.dim), sampling_seed=sampling_seed)
    return [sorted(nodes[c.node_id] for c, _ in strategy.configure_fit(t, None, manager)) for t in range(1, rounds + 1)]


@pytest.mark.skipif(not HAVE_FLWR, reason="flwr[simulation] is not installed (pip install 'fedbandit[flower]')")
def test_flower_run_is_a_function_of_its_seeds():
    """Two Flower simulations with the same arguments sample the same clients, draw the same SecAgg+
    neighbourhoods, decode the same sums and print the same accuracy, bit for bit.  The clients they sample are
    those the seeds predict (node ids registered under the seed, the strategy's sampler; no simulation), and
    another seed (the same sampling seed) predicts others.  Flower's own node ids (os.urandom) or its global
    shuffle give the two runs other samples or other neighbourhoods: the check fails without
    apps._seeded_node_ids or apps._seeded_neighbour_shuffle."""
    from fedbandit.integrations.flower import DigitsClients, run_ddg_simulation

    clients = DigitsClients(SETTING["n_clients"])
    s = DDGSetting(**dict(SETTING, clients_per_round=6, dim=clients.dim))

    def run(seed):
        out = run_ddg_simulation(s, clients, initial=np.zeros(s.dim), keys=_key, evaluate=clients.accuracy,
                                 num_shares=3, reconstruction_threshold=2, sampling_seed=11, seed=seed)
        recs = out["records"]
        return ([r.partitions for r in recs], [r.neighbours for r in recs], out["accuracy"], out["W"],
                [r.modular_sum for r in recs], [r.epsilon for r in recs])

    a, b = run(3), run(3)
    assert a[0] == b[0] and a[1] == b[1] and all(len(n) == s.clients_per_round for n in a[1])
    assert np.array_equal(a[2], b[2]) and np.array_equal(a[3], b[3])  # accuracy after every round, final model
    assert all(np.array_equal(x, y) for x, y in zip(a[4], b[4])) and a[5] == b[5]  # decoded sums, epsilons
    assert a[0] == _predicted_samples(s, 3, 11, s.rounds) != _predicted_samples(s, 4, 11, s.rounds)


def test_flower_trial_draws_every_seed_from_its_rng(monkeypatch):
    """flower_digits_trial passes run_ddg_simulation seeds (noise keys, sampling seed, Flower's seed) drawn from
    its rng: the same rng the same arguments, another rng others."""
    if not HAVE_FLWR:
        pytest.skip("flwr[simulation] is not installed (pip install 'fedbandit[flower]')")
    from fedbandit.integrations.flower import apps

    calls = []

    def fake(setting, train, **kw):
        calls.append((kw["sampling_seed"], kw["seed"], kw["keys"](0), kw["keys"](1)))
        return {"records": [], "accuracy": np.zeros(0), "W": None, "seconds": 0.0}

    monkeypatch.setattr(apps, "run_ddg_simulation", fake)
    cfg = dict(n_clients=12, clients_per_round=6, rounds=2, epsilon=4.0, delta=1e-5, clip=0.3)
    for seed in (1, 1, 2):
        apps.flower_digits_trial(cfg, np.random.default_rng(seed))
    assert calls[0] == calls[1] and all(x != y for x, y in zip(calls[0], calls[2]))
    assert calls[0][1] is not None and calls[0][2] != calls[0][3]

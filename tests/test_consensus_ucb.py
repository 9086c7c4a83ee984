"""Tests of the consensus-chapter learners, counter protocols, environments and theory functions."""

from __future__ import annotations

import numpy as np
import pytest

from fedbandit.envs.graphs import (
    DisconnectedGraphError,
    Graph,
    complete_graph,
    make_graph,
    ring_graph,
    star_graph,
)
from fedbandit.envs.multi_armed import (
    BernoulliBandit,
    GaussianBandit,
    RewardStream,
    make_env,
)
from fedbandit.experiments.runner import run_config
from fedbandit.learners.consensus import (
    CentralizedUCB,
    DecentralizedUCB,
    IndependentUCB,
    MasterWorkerUCB,
    default_checkpoints,
    expand_grid,
    grid_view,
)
from fedbandit.learners.registry import available_learners
from fedbandit.mechanisms.continual_counting import (
    HybridMechanism,
    draw_standard_laplace,
)
from fedbandit.protocols.counting import CounterProtocol, HybridCounter, RunningSums
from fedbandit.protocols.intermediaries import Identity, Shuffler
from fedbandit.protocols.registry import available, create, describe
from fedbandit.theory.consensus import (
    decentralized_regret_bound,
    master_worker_communications,
    master_worker_regret_bound,
    paper_regret_order,
    ucb_regret_bound,
)
from reference_consensus_ucb import (
    ref_decentralized,
    ref_independent,
    ref_master_worker,
)

MEANS = np.array([0.7, 0.5, 0.45, 0.3])
K = MEANS.size
BERN = BernoulliBandit(MEANS)
GAUSS = GaussianBandit(MEANS, sigma=0.2)
PROTOCOL_OF = {"hybrid": "counter-hybrid", "binary": "counter-binary", "laplace": "counter-laplace"}


def counter(epsilon, mechanism="hybrid"):
    """The counter protocol of a reference case (exact sums for epsilon None)."""
    if epsilon is None:
        return create("counter-exact")
    return create(PROTOCOL_OF[mechanism], epsilon=epsilon)


# ---------------------------------------------------------------------------------------
# Reference equivalence: same decisions as the plain loops on the same draws
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "epsilon,privacy_width,period,mechanism",
    [
        (0.8, "std", None, "hybrid"),
        (np.array([0.5, 2.0, 8.0]), "std", 1, "hybrid"),
        (np.array([0.5, 2.0, 8.0]), "fact1", 1, "hybrid"),
        (2.0, "fact1", None, "hybrid"),
        (2.0, "none", 3, "hybrid"),
        (None, "std", 1, "hybrid"),
        (None, "std", None, "hybrid"),
        (1.0, "std", 1, "binary"),
    ],
)
def test_master_worker_pooled_sums_match_reference(epsilon, privacy_width, period, mechanism):
    """aggregate="sums" (the master pools the private sums, counts and noise-std factors) and the
    period schedule make the loop reference's decisions, communicating at the powers of two or at
    every slot (period 1: the pooled index of every agent from the sums it has just uploaded)."""
    T, R, M = 200, 3, 4
    rho = np.array([1.5, 2.0, 3.0])
    ref_actions, ref_regret, ref_comm = ref_master_worker(
        BERN, M, T, epsilon, rng=np.random.default_rng(7), n_runs=R, rho=rho, privacy_width=privacy_width,
        mechanism=mechanism, aggregate="sums", period=period)
    learner = MasterWorkerUCB(counter(epsilon, mechanism), n_agents=M, n_arms=K, horizon=T, n_runs=R, rho=rho,
                              privacy_width=privacy_width, aggregate="sums", period=period)
    res = learner.run(BERN, np.random.default_rng(7), record_actions=True)
    assert np.array_equal(res.extras["actions"], ref_actions)
    assert np.allclose(res.cum_regret, ref_regret)
    assert res.extras["communications"][-1] == ref_comm == res.communication.rounds
    if period == 1:
        assert ref_comm == T - K


@pytest.mark.parametrize("aggregate,period,privacy_width", [("indices", None, "std"), ("indices", 1, "fact1"),
                                                             ("sums", None, "fact1"), ("sums", 1, "std")])
def test_master_worker_with_a_shifting_clip_matches_reference(aggregate, period, privacy_width):
    """A clip with low != 0 (the private sums are of x - low, and every index adds low back): the
    loop reference's decisions, on the slots that index every entry (the round-robin's end and the
    communications) as on the blocks' ends."""
    T, R, M = 150, 2, 3
    clip = (-0.5, 1.5)
    ref_actions, ref_regret, ref_comm = ref_master_worker(
        BERN, M, T, 1.5, rng=np.random.default_rng(3), n_runs=R, privacy_width=privacy_width, clip=clip,
        aggregate=aggregate, period=period)
    learner = MasterWorkerUCB(counter(1.5), n_agents=M, n_arms=K, horizon=T, n_runs=R, privacy_width=privacy_width,
                              clip=clip, aggregate=aggregate, period=period)
    res = learner.run(BERN, np.random.default_rng(3), record_actions=True)
    assert np.array_equal(res.extras["actions"], ref_actions)
    assert np.allclose(res.cum_regret, ref_regret)
    assert res.communication.rounds == ref_comm


@pytest.mark.parametrize(
    "epsilon,privacy_width,doubling,communicate,mechanism",
    [
        (0.8, "std", True, True, "hybrid"),
        (np.array([0.5, 2.0, 8.0]), "fact1", True, True, "hybrid"),
        (2.0, "none", True, True, "hybrid"),
        (None, "std", True, True, "hybrid"),
        (1.0, "std", False, True, "hybrid"),
        (1.0, "std", True, False, "hybrid"),
        (np.array([0.5, 2.0, 8.0]), "std", True, True, "binary"),
        (1.0, "std", True, True, "laplace"),
    ],
)
def test_master_worker_matches_reference(epsilon, privacy_width, doubling, communicate, mechanism):
    T, R, M = 300, 3, 4
    rho = np.array([1.5, 2.0, 3.0])
    ref_actions, ref_regret, ref_comm = ref_master_worker(
        BERN, M, T, epsilon, rng=np.random.default_rng(7), n_runs=R, rho=rho, privacy_width=privacy_width,
        doubling=doubling, communicate=communicate, mechanism=mechanism)
    learner = MasterWorkerUCB(counter(epsilon, mechanism), n_agents=M, n_arms=K, horizon=T, n_runs=R, rho=rho,
                              privacy_width=privacy_width, doubling=doubling, communicate=communicate)
    res = learner.run(BERN, np.random.default_rng(7), record_actions=True)
    assert np.array_equal(res.extras["actions"], ref_actions)
    assert np.allclose(res.cum_regret, ref_regret)
    assert res.extras["communications"][-1] == ref_comm == res.communication.rounds
    assert res.communication.messages == 2 * M * ref_comm and res.communication.payload == 2 * M * K * ref_comm
    assert np.array_equal(res.extras["pulls"].sum(axis=(1, 2)), np.full(R, M * T))


@pytest.mark.parametrize("env", [BERN, GAUSS], ids=["bernoulli", "gaussian"])
@pytest.mark.parametrize("graph", [ring_graph(4), star_graph(4), complete_graph(4)], ids=["ring", "star", "complete"])
@pytest.mark.parametrize("epsilon,privacy_width", [(1.0, "std"), (np.array([0.5, 4.0]), "fact1"), (None, "std")])
def test_decentralized_matches_reference(env, graph, epsilon, privacy_width):
    """Same actions as the loop reference.  Non-private coop-UCB on Bernoulli rewards is
    skipped: its exact ties (equal 0/1 totals) are broken by last-bit round-off, which
    differs between a BLAS product and a Python sum."""
    if epsilon is None and env is BERN:
        pytest.skip("exact ties broken by round-off (see docstring)")
    T, R = 150, 2
    ref_actions, ref_regret = ref_decentralized(env, graph, T, epsilon, rng=np.random.default_rng(3), n_runs=R,
                                                privacy_width=privacy_width)
    learner = DecentralizedUCB(counter(epsilon), graph=graph, n_arms=K, horizon=T, n_runs=R,
                               privacy_width=privacy_width)
    res = learner.run(env, np.random.default_rng(3), record_actions=True)
    assert np.array_equal(res.extras["actions"], ref_actions)
    assert np.allclose(res.cum_regret, ref_regret)
    assert res.extras["communications"][-1] == T and res.extras["messages"][-1] == T * 2 * graph.n_edges
    assert res.communication.payload == T * 2 * graph.n_edges * 2 * K


@pytest.mark.parametrize("mechanism", ["binary", "laplace"])
@pytest.mark.parametrize("graph", [ring_graph(4), complete_graph(4)], ids=["ring", "complete"])
def test_decentralized_other_counters_match_reference(mechanism, graph):
    T, R = 150, 2
    eps = np.array([0.5, 4.0])
    ref_actions, _ = ref_decentralized(GAUSS, graph, T, eps, rng=np.random.default_rng(5), n_runs=R,
                                       mechanism=mechanism)
    res = DecentralizedUCB(counter(eps, mechanism), graph=graph, n_arms=K, horizon=T, n_runs=R).run(
        GAUSS, np.random.default_rng(5), record_actions=True)
    assert np.array_equal(res.extras["actions"], ref_actions)


def test_decentralized_reference_with_kappa_and_clip():
    g = make_graph("erdos_renyi", 5, p=0.6, rng=np.random.default_rng(0))
    kw = dict(n_runs=2, kappa=0.5, rho=1.2, clip=(-0.5, 1.5))
    ref_actions, _ = ref_decentralized(GAUSS, g, 120, 0.7, rng=np.random.default_rng(1), **kw)
    res = DecentralizedUCB(counter(0.7), graph=g, n_arms=K, horizon=120, **kw).run(
        GAUSS, np.random.default_rng(1), record_actions=True)
    assert np.array_equal(res.extras["actions"], ref_actions)


@pytest.mark.parametrize(
    "epsilon,privacy_width,mechanism,env",
    [(None, "std", "hybrid", BERN), (0.7, "std", "hybrid", BERN), (np.array([0.5, 3.0]), "fact1", "hybrid", GAUSS),
     (1.0, "std", "binary", BERN), (1.0, "std", "laplace", GAUSS)],
)
def test_independent_matches_reference(epsilon, privacy_width, mechanism, env):
    T, R, M = 200, 2, 3
    kw = dict(n_runs=R, rho=np.array([1.5, 2.5]), privacy_width=privacy_width,
              clip=(0.0, 1.0) if env is BERN else (-0.5, 1.5))
    ref_actions, ref_regret = ref_independent(env, M, T, epsilon, rng=np.random.default_rng(4), mechanism=mechanism,
                                              **kw)
    res = IndependentUCB(counter(epsilon, mechanism), n_agents=M, n_arms=K, horizon=T, **kw).run(
        env, np.random.default_rng(4), record_actions=True)
    assert np.array_equal(res.extras["actions"], ref_actions)
    assert np.allclose(res.cum_regret, ref_regret)
    assert res.communication.rounds == 0 and res.extras["messages"][-1] == 0


# ---------------------------------------------------------------------------------------
# The counter protocols
# ---------------------------------------------------------------------------------------


def test_counter_protocols_registered():
    assert set(available("counter")) == {"counter-hybrid", "counter-binary", "counter-laplace", "counter-exact"}
    assert {"master-worker", "decentralized", "independent-ucb", "centralized-ucb"} <= set(available_learners())
    for name in available("counter"):
        assert describe(name).kind == "counter"
        p = create(name) if name == "counter-exact" else create(name, epsilon=0.5)
        assert isinstance(p, CounterProtocol) and p.kind == "counter"
        assert set(p.parts()) == {"R", "S", "A"}


@pytest.mark.parametrize("name", ["counter-hybrid", "counter-binary", "counter-laplace"])
@pytest.mark.parametrize("relation", ["replace", "add-remove"])
def test_counter_accounting_pure_epsilon(name, relation):
    """Each reward's stream is pure eps-DP (verified), for a scalar and for per-run epsilons."""
    p = create(name, epsilon=0.7).configure(n_agents=3, n_arms=4, horizon=1000, sensitivity=2.0)
    acc = p.accounting(relation)
    assert acc.status == "verified" and acc.delta == 0.0 and acc.target_delta == 0.0
    assert acc.epsilon == pytest.approx(0.7, rel=1e-12) and acc.relation == relation
    eps = np.array([0.5, 2.0, 0.5])
    q = create(name, epsilon=eps).configure(n_agents=3, n_arms=4, horizon=1000, n_runs=3)
    assert q.accounting().epsilon == pytest.approx(2.0) and q.accounting().target_epsilon == 2.0
    assert [q.accounting(run=r).epsilon for r in range(3)] == pytest.approx(list(eps))
    assert sorted(q.accounting_by_epsilon()) == [0.5, 2.0]


def test_counter_accounting_can_fail():
    """The accounting is computed from the calibrated scales: an under-noised event is invalid."""
    from fedbandit.accounting.counting import account_pure
    from fedbandit.accounting.events import LaplaceEvent, SelfComposedEvent

    p = create("counter-binary", epsilon=1.0).configure(n_agents=2, n_arms=3, horizon=64)
    ev = p.event()
    assert isinstance(ev, SelfComposedEvent) and ev.count == 7  # bit_length(64) nodes per item
    assert account_pure(ev, target_epsilon=1.0).status == "verified"
    # the same nodes with the scale of a horizon of 8 (4 levels) give 7 * (1/4) > 1
    short = SelfComposedEvent(LaplaceEvent(1.0, 4.0), 7)
    acc = account_pure(short, target_epsilon=1.0)
    assert acc.status == "invalid" and acc.epsilon == pytest.approx(1.75)
    exact = create("counter-exact").configure(n_agents=2, n_arms=3, horizon=64)
    assert exact.accounting().status == "none"


def test_counter_release_equals_mechanism_draws():
    """The protocol draws from the rng it is reset with, as the bare mechanism does."""
    p = create("counter-hybrid", epsilon=np.array([0.5, 2.0])).configure(n_agents=3, n_arms=4, horizon=50)
    p.reset(n_runs=2, rng=np.random.default_rng(8))
    mech = HybridMechanism(np.array([0.5, 2.0]).reshape(2, 1, 1), (2, 3, 4))
    rng = np.random.default_rng(8)
    data = np.random.default_rng(0)
    for _ in range(40):
        idx = data.choice(24, size=6, replace=False)
        x = data.random(6)
        assert np.array_equal(p.release(idx, x), mech.step_flat(idx, x, rng))
    assert np.array_equal(p.value_at(np.arange(24)), mech.value.reshape(-1))


def test_counter_protocol_bad_inputs():
    with pytest.raises(ValueError, match="epsilon"):
        create("counter-hybrid", epsilon=0.0)
    with pytest.raises(ValueError, match="epsilon"):
        create("counter-hybrid", epsilon=[1.0, -1.0])
    with pytest.raises(ValueError, match="epsilon"):
        create("counter-laplace", epsilon=np.ones((2, 2)))
    with pytest.raises(TypeError, match="epsilon"):
        create("counter-exact", epsilon=1.0)
    with pytest.raises(ValueError, match="delta"):
        create("counter-hybrid", epsilon=1.0, delta=1.0)
    with pytest.raises(ValueError, match="identity"):
        CounterProtocol(HybridCounter(), Shuffler(), RunningSums(), name="x", epsilon=1.0)
    with pytest.raises(ValueError, match="not private"):
        from fedbandit.protocols.counting import ExactCounter

        CounterProtocol(ExactCounter(), Identity(), RunningSums(), name="x", epsilon=1.0)
    p = create("counter-hybrid", epsilon=[1.0, 2.0])
    with pytest.raises(ValueError, match="n_runs"):
        p.configure(n_agents=2, n_arms=3, horizon=10, n_runs=3)
    with pytest.raises(ValueError, match="horizon"):
        create("counter-binary", epsilon=1.0).configure(n_agents=2, n_arms=3)
    with pytest.raises(ValueError, match="horizon"):
        create("counter-binary", epsilon=1.0, horizon=16).configure(n_agents=2, n_arms=3, horizon=100)
    with pytest.raises(ValueError, match="fact1"):
        MasterWorkerUCB(create("counter-laplace", epsilon=1.0), n_agents=2, n_arms=K, horizon=50,
                        privacy_width="fact1")
    q = create("counter-hybrid", epsilon=1.0).configure(n_agents=2, n_arms=3, horizon=10)
    with pytest.raises(RuntimeError, match="reset"):
        q.release(np.array([0]), np.array([0.5]))


# ---------------------------------------------------------------------------------------
# Communication, determinism, statistical sanity
# ---------------------------------------------------------------------------------------


def test_master_worker_communications_logarithmic():
    T = 5000
    cps = default_checkpoints(T, 30)
    res = MasterWorkerUCB(counter(1.0), n_agents=3, n_arms=K, horizon=T, n_runs=2, checkpoints=cps).run(
        BERN, np.random.default_rng(0))
    comm = res.extras["communications"]
    assert np.array_equal(comm, master_worker_communications(cps, BERN.n_arms))
    assert comm[-1] == int(np.log2(T)) - int(np.log2(BERN.n_arms))
    assert np.array_equal(res.extras["messages"], 2 * 3 * comm)


def test_common_random_numbers():
    """Same seed, same rewards, whatever the algorithm and the access order."""
    s1 = RewardStream(BERN, 3, 4, np.random.default_rng(9), block=16)
    s2 = RewardStream(BERN, 3, 4, np.random.default_rng(9), block=16)
    arms = np.array([[0, 1, 2, 3]] * 3)
    late = s2.rewards(100, arms)
    early = s2.rewards(5, arms)
    assert np.array_equal(s1.rewards(5, arms), early) and np.array_equal(s1.rewards(100, arms), late)
    assert s1.reward(5, 2, 1, 1) == early[2, 1]
    # all algorithms share the table: ucb and centralized_ucb see identical first-K slots
    a = IndependentUCB(counter(None), n_agents=4, n_arms=K, horizon=20, n_runs=3).run(
        BERN, np.random.default_rng(1), record_actions=True)
    b = CentralizedUCB(n_agents=4, n_arms=K, horizon=20, n_runs=3).run(BERN, np.random.default_rng(1),
                                                                       record_actions=True)
    assert np.array_equal(a.extras["actions"][:4], b.extras["actions"][:4])


@pytest.mark.parametrize("env", [BERN, GAUSS], ids=["bernoulli", "gaussian"])
@pytest.mark.parametrize("keys", [None, "repeated"])
@pytest.mark.parametrize("n_slots", [1, 5, 16, 23, 40])
def test_reward_stream_drawn_up_to_n_slots_is_the_whole_blocks_prefix(env, keys, n_slots):
    # a stream told its last slot (the learners pass their horizon) draws each block only up to it:
    # every slot it serves is the float of the whole block's table, and a slot past it is refused
    R, M = 5, 3
    run_keys = None if keys is None else np.arange(R) % 2
    whole = RewardStream(env, R, M, np.random.default_rng(4), block=16, run_keys=run_keys)
    short = RewardStream(env, R, M, np.random.default_rng(4), block=16, run_keys=run_keys, n_slots=n_slots)
    arms = np.arange(R * M).reshape(R, M) % env.n_arms
    for t in range(1, n_slots + 1):
        assert np.array_equal(short.variates(t), whole.variates(t))
        assert np.array_equal(short.rewards_unchecked(t, arms), whole.rewards_unchecked(t, arms))
    if n_slots % 16:
        with pytest.raises(IndexError):
            short.variates(n_slots + 1)


def test_consensus_runs_with_the_short_table_are_the_runs_with_whole_blocks(monkeypatch):
    # the learners pass their horizon (n_slots); with whole 1024-slot blocks, as before, every float is the same
    import fedbandit.learners.consensus as consensus_module

    def run(env):
        return IndependentUCB(counter(None), n_agents=3, n_arms=K, horizon=37, n_runs=4).run(
            env, np.random.default_rng(5), record_actions=True)

    for env in (BERN, GAUSS):
        short = run(env)

        class Whole(RewardStream):
            def __init__(self, *args, n_slots=None, **kwargs):
                super().__init__(*args, **kwargs)

        with monkeypatch.context() as mp:
            mp.setattr(consensus_module, "RewardStream", Whole)
            whole = run(env)
        assert np.array_equal(short.regret, whole.regret)
        assert np.array_equal(short.extras["actions"], whole.extras["actions"])


def test_reward_stream_marginals():
    """Statistical: 4e5 draws per arm; means within 5 s.e. (false-alarm rate < 1e-5)."""
    for env in (BERN, GAUSS):
        s = RewardStream(env, 50, 40, np.random.default_rng(2), block=200)
        for a in range(env.n_arms):
            x = np.concatenate([s.rewards(t, np.full((50, 40), a)).ravel() for t in range(1, 201)])
            se = x.std() / np.sqrt(x.size)
            assert abs(x.mean() - env.means[a]) < 5 * se


def test_regret_orders_hold_on_average():
    """Statistical sanity on one seed (30 runs, T = 3000, M = 6):

    centralized <= coop-UCB (complete) < independent UCB, and private regret decreases in
    epsilon.  The gaps between these means are > 10 standard errors, so a reversal on a
    fixed seed has negligible probability.
    """
    env = BernoulliBandit(np.array([0.8, 0.6, 0.5, 0.4, 0.3]))
    M, T, R = 6, 3000, 30
    rng = np.random.default_rng
    kw = dict(n_arms=env.n_arms, horizon=T)
    cen = CentralizedUCB(n_agents=M, n_runs=R, **kw).run(env, rng(0)).cum_regret.mean()
    coop = DecentralizedUCB(counter(None), graph=complete_graph(M), n_runs=R, **kw).run(env, rng(0)).cum_regret.mean()
    ind = IndependentUCB(counter(None), n_agents=M, n_runs=R, **kw).run(env, rng(0)).cum_regret.mean()
    assert cen < coop * 1.5 and coop < ind / 2
    eps = np.repeat([0.5, 2.0, 8.0], R)
    dec = DecentralizedUCB(counter(eps), graph=complete_graph(M), n_runs=3 * R, **kw).run(env, rng(1)).cum_regret
    d = dec.reshape(3, R).mean(axis=1)
    assert d[0] > d[1] > d[2]
    mw = MasterWorkerUCB(counter(eps), n_agents=M, n_runs=3 * R, **kw).run(env, rng(1)).cum_regret
    mw = mw.reshape(3, R).mean(axis=1)
    assert mw[0] > mw[1] > mw[2]


def test_run_config_grid():
    base = dict(instance="bernoulli", means=MEANS.tolist(), M=4, T=200, runs=3, n_checkpoints=10)
    out = run_config(dict(base, learner="decentralized", protocol="counter-hybrid", epsilon=[1.0, 4.0],
                          rho=[1.5, 2.0, 3.0], topology="ring"), np.random.default_rng(0))
    assert out.extras["grid"]["shape"] == (2, 3, 3)
    assert grid_view(out).shape[:3] == (2, 3, 3) and grid_view(out, out.extras["pulls"]).shape == (2, 3, 3, 4, 4)
    assert out.t[-1] == 200 and out.learner == "decentralized" and out.protocol == "counter-hybrid"
    assert out.accounting.status == "verified" and out.accounting.epsilon == pytest.approx(4.0)
    assert sorted(out.extras["accounting_by_epsilon"]) == [1.0, 4.0]
    for learner, protocol in (("master-worker", "counter-hybrid"), ("decentralized", "counter-exact"),
                              ("independent-ucb", "counter-exact"), ("independent-ucb", "counter-laplace"),
                              ("master-worker", "counter-binary"), ("centralized-ucb", None)):
        cfg = dict(base, learner=learner)
        if protocol is not None:
            cfg["protocol"] = protocol
            if protocol != "counter-exact":
                cfg["epsilon"] = 1.0
        res = run_config(cfg, np.random.default_rng(0))
        assert grid_view(res).shape[:3] == (1, 1, 3)
        expected = "verified" if protocol not in (None, "counter-exact") else "none"
        assert res.accounting.status == expected, (learner, protocol)
    # a run of the sweep equals the same run simulated alone (per-run epsilon and rho)
    eps_runs, rho_runs, grid = expand_grid([1.0, 4.0], [1.5, 2.0, 3.0], 3)
    single = DecentralizedUCB(counter(eps_runs), graph=ring_graph(4), n_arms=K, horizon=200, n_runs=18,
                              rho=rho_runs, checkpoints=default_checkpoints(200, 10)).run(BERN, np.random.default_rng(0))
    assert np.array_equal(single.regret, out.regret)
    assert np.array_equal(eps_runs, np.repeat([1.0, 4.0], 9)) and np.array_equal(rho_runs[:9], np.repeat([1.5, 2, 3], 3))


def test_run_config_refuses_inconsistent_configs():
    base = dict(instance="bernoulli", means=MEANS.tolist(), M=3, T=50)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="not private"):
        run_config(dict(base, learner="decentralized", protocol="counter-exact", epsilon=1.0), rng)
    with pytest.raises(ValueError, match="no privacy protocol|no protocol"):
        run_config(dict(base, learner="centralized-ucb", epsilon=1.0), rng)
    res = run_config(dict(base, learner="master-worker", protocol="counter-hybrid", epsilon=1.0, delta=1e-5), rng)
    assert res.accounting.status == "verified" and res.accounting.target_delta == 1e-5
    assert res.accounting.delta == 0.0  # pure epsilon-DP meets any (epsilon, delta) target
    with pytest.raises(ValueError, match="epsilon"):
        run_config(dict(base, learner="master-worker", protocol="counter-hybrid", epsilon=[1.0, None]), rng)
    with pytest.raises(ValueError, match="topolgy"):
        run_config(dict(base, learner="decentralized", protocol="counter-exact", topolgy="ring"), rng)
    with pytest.raises(ValueError, match="learner"):
        run_config(dict(base, learner="thompson"), rng)


# ---------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------


def test_bad_inputs():
    A = np.zeros((4, 4))
    A[0, 1] = A[1, 0] = A[2, 3] = A[3, 2] = 1
    kw = dict(n_arms=K, horizon=50)
    with pytest.raises(DisconnectedGraphError, match="disconnected"):
        DecentralizedUCB(counter(1.0), graph=Graph(A), **kw)
    for kappa in (-0.2, 1.2, 0.0):
        with pytest.raises(ValueError, match="kappa"):
            DecentralizedUCB(counter(1.0), graph=ring_graph(4), kappa=kappa, **kw)
    for rho in (1.0, 0.5, -1.0):
        with pytest.raises(ValueError, match="rho"):
            DecentralizedUCB(counter(1.0), graph=ring_graph(4), rho=rho, **kw)
        with pytest.raises(ValueError, match="rho"):
            MasterWorkerUCB(counter(1.0), n_agents=3, rho=rho, **kw)
    with pytest.raises(ValueError, match="rho"):
        IndependentUCB(counter(1.0), n_agents=3, n_runs=2, rho=np.array([2.0, 2.0, 2.0]), **kw)
    with pytest.raises(ValueError, match="n_runs"):
        MasterWorkerUCB(counter(np.array([1.0, 2.0])), n_agents=3, n_runs=3, **kw)
    with pytest.raises(ValueError, match="horizon"):
        MasterWorkerUCB(counter(1.0), n_agents=3, n_arms=K, horizon=2)
    with pytest.raises(ValueError, match="privacy_width"):
        MasterWorkerUCB(counter(1.0), n_agents=3, privacy_width="huge", **kw)
    with pytest.raises(ValueError, match="clip"):
        MasterWorkerUCB(counter(1.0), n_agents=3, clip=(1.0, 0.0), **kw)
    with pytest.raises(TypeError, match="doubling"):
        MasterWorkerUCB(counter(1.0), n_agents=3, doubling=1, **kw)
    with pytest.raises(TypeError, match="protocol"):
        MasterWorkerUCB(create("non-private"), n_agents=3, **kw)
    with pytest.raises(TypeError, match="graph"):
        DecentralizedUCB(counter(1.0), graph="ring", **kw)
    learner = IndependentUCB(counter(None), n_agents=3, **kw)
    with pytest.raises(TypeError, match="env"):
        learner.run("bandit", np.random.default_rng(0))
    with pytest.raises(ValueError, match="n_arms"):
        learner.run(BernoulliBandit(np.array([0.5, 0.4])), np.random.default_rng(0))
    with pytest.raises(ValueError, match="means"):
        BernoulliBandit(np.array([0.5, 1.5]))
    with pytest.raises(ValueError, match="sigma"):
        GaussianBandit(MEANS, sigma=0.0)
    with pytest.raises(ValueError, match="kind"):
        make_env("poisson", MEANS)


# ---------------------------------------------------------------------------------------
# Theory functions
# ---------------------------------------------------------------------------------------


def test_theory_shapes():
    gaps = np.array([0.0, 0.1, 0.2, 0.4])
    T = np.array([1e3, 1e4, 1e5])
    for f in (lambda e: master_worker_regret_bound(T, gaps, 10, e),
              lambda e: decentralized_regret_bound(T, gaps, np.full(10, 3.0), e),
              lambda e: ucb_regret_bound(T, gaps, 10, epsilon=e)):
        lo, hi = f(10.0), f(1.0)
        assert np.all(np.diff(lo) > 0) and np.all(hi >= lo)  # grows with T, shrinks with epsilon
        assert np.all(f(None) <= lo)  # privacy only adds
    # more consensus lag, more regret (both saturate at M T Delta for the smallest T)
    lag = decentralized_regret_bound(T, gaps, np.full(10, 30.0), 1.0)
    nolag = decentralized_regret_bound(T, gaps, np.full(10, 1.0), 1.0)
    assert np.all(lag >= nolag) and lag[-1] > nolag[-1]
    o = paper_regret_order(T, 20, 10, 1.0)
    assert np.allclose(o / paper_regret_order(T, 20, 10, 2.0), 2.0)
    assert np.allclose(o, 200 * np.log(T) ** 2.25)
    assert list(master_worker_communications([1, 10, 16, 1000, 100_000], 10)) == [0, 0, 1, 6, 13]


def test_decentralized_regret_bound_matches_its_formula_solved_over_the_integers():
    # The derived curve of DP-Decentralized UCB written out (the module's reconstruction, c_0 = M):
    # agent i stops pulling arm j once
    #   sigma sqrt(2 rho v ln T / M) + sqrt(2 rho ln T) b g(n) v / sqrt(M) <= Delta_j / 2,
    #   v = (n + c_max) / n^2,  b = 2 s / eps (the hybrid counter's log scale),
    #   g(n) = sqrt(2 (k + 1) + 2 k^3), k = floor(log2 n) (the level bound on the counter's noise std),
    # and R(T) = sum_j Delta_j min(M (n*_j + c_max + 1), M T).  Solved here exactly over the integers n; the
    # package searches a log grid of step 10^(12/3999) - 1 = 0.7 %, so it may differ by that much, not by the
    # factor sqrt(2) on the privacy width that an earlier version had (regret off by 10-30 %).
    gaps = np.array([0.0, 0.05, 0.12, 0.3])
    c = np.array([0.0, 0.8, 2.5, 1.2, 0.3])  # five agents, c_max = 2.5
    M, c_max, rho, sigma, s = c.size, c.max(), 2.0, 0.5, 1.0
    n = np.arange(1, 4 * 10**6 + 1, dtype=float)
    k = np.floor(np.log2(n))
    g = np.sqrt(2 * (k + 1) + 2 * k**3)
    v = (n + c_max) / n**2
    for eps in (0.5, 1.0, 10.0, None):
        for T in (1e4, 5e4, 1e6):
            lt = np.log(T)
            width = sigma * np.sqrt(2 * rho * v * lt / M)
            if eps is not None:
                width = width + np.sqrt(2 * rho * lt) * (2 * s / eps) * g * v / np.sqrt(M)
            exact = 0.0
            for d in gaps[gaps > 0]:
                ok = np.flatnonzero(width <= d / 2)
                assert ok.size, (eps, T, d)  # the search range holds the threshold
                exact += d * min(M * (n[ok[0]] + c_max + 1), M * T)
            bound = decentralized_regret_bound(T, gaps, c, eps, rho=rho, sigma=sigma, sensitivity=s)[0]
            assert abs(bound / exact - 1) < 0.01, (eps, T, bound, exact)


def test_theory_bad_inputs():
    gaps = np.array([0.0, 0.1])
    with pytest.raises(ValueError, match="rho"):
        master_worker_regret_bound(1e4, gaps, 10, 1.0, rho=1.0)
    with pytest.raises(ValueError, match="epsilon"):
        decentralized_regret_bound(1e4, gaps, np.zeros(4), 0.0)
    with pytest.raises(ValueError, match="privacy_width"):
        ucb_regret_bound(1e4, gaps, 3, epsilon=1.0, privacy_width="wide")
    with pytest.raises(ValueError, match="gaps"):
        ucb_regret_bound(1e4, np.array([-0.1, 0.2]), 3)


def test_draws_are_one_laplace_per_agent_and_slot():
    """The protocol consumes exactly one standard Laplace per (run, agent) per slot after the reward key."""
    T, R, M = 40, 2, 3
    rng = np.random.default_rng(11)
    MasterWorkerUCB(counter(1.0), n_agents=M, n_arms=K, horizon=T, n_runs=R).run(BERN, rng)
    ref = np.random.default_rng(11)
    RewardStream(BERN, R, M, ref)
    for _ in range(T):
        draw_standard_laplace(ref, R * M)
    assert rng.random() == ref.random()


def test_clip_skipped_only_where_it_changes_no_reward(monkeypatch):
    """The learners skip the clip and shift of a private counter's items when every reward value of
    the environment lies in [0, high] with low = 0: bit for bit the plain clip's items and regret;
    any clip that moves a value or shifts is applied."""
    from fedbandit.envs import ranker_bandit
    from fedbandit.learners import consensus

    rankers = ranker_bandit(4)
    cases = [(rankers, (0.0, 1.0), True), (BERN, (0.0, 1.0), True), (rankers, (0.0, 2.0), True),
             (rankers, (0.0, 0.8), False), (rankers, (0.25, 1.0), False), (BERN, (-0.5, 1.0), False),
             (GAUSS, (0.0, 1.0), False)]
    for env, (lo, hi), noop in cases:
        assert consensus._clip_is_noop(env, lo, hi) is noop, (env.kind, lo, hi)
        if noop:
            vals = env.reward_values
            assert np.array_equal(np.minimum(np.maximum(vals, lo), hi) - lo, vals)
    kw = dict(n_agents=3, n_arms=4, horizon=300, n_runs=2, rho=2.0)
    runs = {}
    for plain in (False, True):
        if plain:
            monkeypatch.setattr(consensus, "_clip_is_noop", lambda env, lo, hi: False)
        learner = IndependentUCB(counter(0.8), **kw)
        runs[plain] = learner.run(rankers, np.random.default_rng(5), record_actions=True)
        assert learner._clip_noop is not plain
    assert np.array_equal(runs[False].extras["actions"], runs[True].extras["actions"])
    assert np.array_equal(runs[False].cum_regret, runs[True].cum_regret)
    monkeypatch.undo()
    moved = IndependentUCB(counter(0.8), **dict(kw, clip=(0.25, 1.0)))
    moved.run(rankers, np.random.default_rng(5))
    assert np.array_equal(moved.clip_shift(np.array([[0.0, 0.5, 1.0]])), [0.0, 0.25, 0.75])


@pytest.mark.parametrize("privacy_width,epsilon", [("std", np.array([0.5, 2.0, 8.0])), ("fact1", 0.7), ("std", 1.3),
                                                   ("none", 1.0)])
def test_decentralized_index_factors_are_the_per_slot_products(privacy_width, epsilon):
    """The decentralized index's per-run factors computed for a block of slots at once
    (consensus._index_factors) are, bit for bit, the per-slot form written out here: the
    exploration coefficient rho * (2 sigma^2 ln t / c_0) and the privacy-width numerator over
    sqrt(c_0), spread over the arms; over blocks that start at t = 1, at the round-robin's end and
    past it."""
    from fedbandit.learners import consensus

    R = 3
    rho = np.array([1.5, 2.0, 3.7])
    learner = DecentralizedUCB(counter(epsilon), graph=ring_graph(5), n_arms=K, horizon=5000, n_runs=R, rho=rho,
                               privacy_width=privacy_width)
    scale = learner._width_scale
    c_0 = learner.terms.c_0
    sqrt_c0 = np.sqrt(c_0)
    rho_rk = np.ascontiguousarray(np.broadcast_to(rho.reshape(1, R, 1), (1, R, K)))
    for sigma in (0.5, 0.173):
        for t0, n in ((1, 7), (K + 1, 40), (4093, 9)):
            coefs, widths = consensus._index_factors(learner, sigma, c_0, sqrt_c0, rho_rk, t0, n)
            assert coefs.shape == (n, 1, R, K)
            assert (widths is None) is (privacy_width == "none")
            for i in range(n):
                t = t0 + i
                plain = np.empty((1, R, K))
                np.multiply(rho_rk, 2.0 * sigma**2 * np.log(t) / c_0, out=plain)
                assert np.array_equal(coefs[i], plain), (t, sigma)
                if widths is None:
                    continue
                lt = np.log(max(t, 2))
                if privacy_width == "fact1":  # (np.power: numpy's ufunc, as a float's ** is not on every host)
                    num = scale * np.power(np.log2(max(t, 2)), 1.5) * rho * lt
                else:
                    num = np.sqrt(2.0 * rho * lt) * scale
                plain_w = np.empty((1, R, K))
                np.copyto(plain_w, (num / sqrt_c0).reshape(1, R, 1))
                assert np.array_equal(widths[i], plain_w), (t, sigma)


@pytest.mark.parametrize("shape,axis", [((3, 28, 20, 10), 2), ((28, 20, 10), 1), ((2, 5, 7, 4), 2), ((5, 3, 4), 1)])
def test_master_worker_sums_over_agents_are_numpys(shape, axis):
    """A communication's sum over the agents through an agents-first copy (consensus._sum_over_agents)
    equals, bit for bit, the plain ``sum(axis, keepdims=True)`` of the pooled totals and the plain
    ``mean(axis=1)`` of the averaged indices, on values whose sums depend on the order of the terms."""
    from fedbandit.learners import consensus

    rng = np.random.default_rng(3)
    buf = np.empty(np.moveaxis(np.empty(shape), axis, 0).shape)
    for _ in range(20):
        up = rng.standard_normal(shape) * 10.0 ** rng.uniform(-3, 6, size=shape)
        plain = up.sum(axis=axis, keepdims=True)
        out = np.empty(plain.shape)
        consensus._sum_over_agents(up, axis, buf, out=np.squeeze(out, axis=axis))
        assert np.array_equal(out, plain)
        assert np.array_equal(consensus._sum_over_agents(up, axis, buf), plain.squeeze(axis))
        if axis == 1 and len(shape) == 3:
            assert np.array_equal((consensus._sum_over_agents(up, 1, buf) / shape[1])[:, None, :],
                                  up.mean(axis=1, keepdims=True))


@pytest.mark.parametrize("privacy_width,epsilon", [("std", np.array([0.5, 2.0, 8.0])), ("fact1", 0.7),
                                                   ("fact1", np.array([0.5, 2.0, 8.0])), ("none", 1.0)])
def test_own_count_run_factors_are_the_per_slot_products(privacy_width, epsilon):
    """The master-worker and independent indices' per-run factors computed for a block of slots at once
    (consensus._run_factors, read through consensus._own_count_factors) are, bit for bit, the per-slot form
    written out here: 2 rho ln t (a Python int's np.log) and the privacy-width numerator, over blocks
    that start at t = 1, at the round-robin's end and past it, and across the blocks of _SlotFactors."""
    from fedbandit.learners import consensus

    R = 3
    rho = np.array([1.5, 2.0, 3.7])
    horizon = 5000
    learner = IndependentUCB(counter(epsilon), n_agents=2, n_arms=K, horizon=horizon, n_runs=R, rho=rho,
                             privacy_width=privacy_width)
    scale = learner._width_scale

    def plain(t):
        coef = 2.0 * rho * np.log(t)
        if privacy_width == "none":
            return coef, None
        lt = np.log(max(t, 2))
        if privacy_width == "fact1":  # (np.power: numpy's ufunc, as a float's ** is not on every host)
            return coef, scale * np.power(np.log2(max(t, 2)), 1.5) * rho * lt
        return coef, np.sqrt(2.0 * rho * lt) * scale

    for t0, n in ((1, 7), (K + 1, 40), (4093, 9)):
        coefs, nums = consensus._run_factors(learner, t0, n)
        assert coefs.shape == (n, R)
        assert (nums is None) is (privacy_width == "none")
        for i in range(n):
            coef, num = plain(t0 + i)
            assert np.array_equal(coefs[i], coef), t0 + i
            if num is not None:
                assert np.array_equal(nums[i], num), t0 + i
    factors = consensus._own_count_factors(learner)
    block = factors.block
    for t in [*range(K + 1, K + 2 * block + 3), horizon - 1, horizon]:  # ascending, across block ends
        coef, num = factors.at(t)
        want_coef, want_num = plain(t)
        assert np.array_equal(coef, want_coef), t
        assert (num is None) is (want_num is None)
        if num is not None:
            assert np.array_equal(num, want_num), t

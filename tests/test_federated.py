"""The federated softmax-regression learner (fedbandit.learners.federated), run by run_config."""

from __future__ import annotations

import numpy as np
import pytest

from fedbandit.envs.digits import load_digits_federated
from fedbandit.experiments import run_config
from fedbandit.learners.federated import FederatedLearner, FederatedResult
from fedbandit.protocols.registry import create
from reference_federated import reference_fl_run


def run_fl(config, rng):
    return run_config(dict(config, learner="federated-learning", instance="digits"), rng)

BASE = dict(n_clients=20, split_seed=0, rounds=3, local_steps=2, lr=0.5, momentum=0.9)
KINDS = {
    "none": dict(protocol="sum-non-private"),
    "gauss": dict(protocol="sum-central-gaussian", epsilon=4.0, delta=1e-5),
    "ddg": dict(protocol="sum-ddg-secagg", epsilon=4.0, delta=1e-5, bits=16, k=3),
}


def _old_config(kind):
    new = KINDS[kind]
    return dict(BASE, c=0.3, delta=1e-5, kind=kind, epsilon=new.get("epsilon", 0.0), bits=new.get("bits", 0), k=3)


@pytest.mark.parametrize("kind", list(KINDS))
def test_same_draws_same_model_as_the_inline_reference(kind):
    """One run: the learner with the matching sum protocol reproduces the old inline trainer exactly."""
    ref = reference_fl_run(_old_config(kind), np.random.default_rng(12))
    out = run_fl(dict(BASE, clip=0.3, **KINDS[kind]), np.random.default_rng(12))
    assert isinstance(out, FederatedResult)
    assert out.accuracy.tolist() == [ref["accuracy"]]
    assert out.extras["accuracy_curve"][0].tolist() == ref["curve"]
    assert out.t.tolist() == [1, 2, 3]


def test_runs_are_vectorized():
    """Without noise every run is the same model; with noise the runs differ."""
    exact = run_fl(dict(BASE, clip=0.3, runs=3, **KINDS["none"]), np.random.default_rng(0))
    one = run_fl(dict(BASE, clip=0.3, **KINDS["none"]), np.random.default_rng(0))
    np.testing.assert_allclose(exact.extras["accuracy_curve"], np.repeat(one.extras["accuracy_curve"], 3, axis=0))
    noisy = run_fl(dict(BASE, clip=0.3, runs=3, **dict(KINDS["gauss"], epsilon=0.5)), np.random.default_rng(0))
    assert noisy.accuracy.shape == (3,)
    assert np.unique(noisy.extras["accuracy_curve"], axis=0).shape[0] > 1


def test_result_reports_the_protocol():
    out = run_fl(dict(BASE, clip=0.3, **KINDS["ddg"]), np.random.default_rng(1))
    assert out.accounting.status == "verified"
    assert out.accounting.epsilon == pytest.approx(4.0, rel=1e-6)
    assert out.calibration["bits"] == 16 and out.calibration["n_rounds"] == 3 and out.calibration["clip"] == 0.3
    assert out.communication.rounds == 3 and out.communication.bits_per_coordinate == 16
    assert out.communication.bits == 3 * 20 * 1024 * 16  # d = 65 * 10 padded to 1024
    assert out.protocol == "sum-ddg-secagg" and out.learner == "federated-learning"
    g = run_fl(dict(BASE, clip=0.3, **KINDS["gauss"]), np.random.default_rng(1))
    assert g.accounting.status == "verified" and g.accounting.model == "central"
    assert run_fl(dict(BASE, clip=0.3, **KINDS["none"]), np.random.default_rng(1)).accounting.status == "none"


def test_non_private_training_learns():
    out = run_fl(dict(BASE, rounds=8, local_steps=5, **KINDS["none"]), np.random.default_rng(0))
    assert out.accuracy[0] > 0.85  # deterministic: no noise, fixed split
    assert out.extras["accuracy_curve"][0, -1] > out.extras["accuracy_curve"][0, 0]


def test_run_fl_refuses_bad_configurations():
    with pytest.raises(ValueError, match="clipp"):
        run_fl(dict(BASE, clipp=0.3, **KINDS["none"]), np.random.default_rng(0))
    with pytest.raises(ValueError, match="used by neither"):
        run_fl(dict(BASE, n_features=5, **KINDS["none"]), np.random.default_rng(0))
    with pytest.raises(TypeError, match="SumProtocol"):
        run_fl(dict(BASE, protocol="silo-ldp", epsilon=1.0, delta=0.1), np.random.default_rng(0))
    with pytest.raises(ValueError, match="protocol"):
        run_fl(dict(BASE), np.random.default_rng(0))
    with pytest.raises(ValueError, match="bits"):
        run_fl(dict(BASE, bits=16, **KINDS["gauss"]), np.random.default_rng(0))


def test_learner_checks_its_arguments():
    with pytest.raises(TypeError, match="SumProtocol"):
        FederatedLearner(create("silo-ldp", epsilon=1.0, delta=0.1), n_clients=5, n_features=4, rounds=2)
    with pytest.raises(ValueError, match="momentum"):
        FederatedLearner(create("sum-non-private"), n_clients=5, n_features=4, rounds=2, momentum=1.0)
    with pytest.raises(ValueError, match="rounds"):
        FederatedLearner(create("sum-non-private"), n_clients=5, n_features=4, rounds=0)
    learner = FederatedLearner(create("sum-non-private"), n_clients=5, n_features=64, rounds=2)
    with pytest.raises(ValueError, match="n_clients=5"):
        learner.run(load_digits_federated(6), np.random.default_rng(0))


# --- client sampling ------------------------------------------------------------------

SAMPLED = dict(BASE, n_clients=60, clients_per_round=10, rounds=4, local_steps=2, clip=0.3, sampling_seed=3)


def test_fixed_size_sampling_uses_n_clients_per_round_and_amplification():
    out = run_fl(dict(SAMPLED, runs=2, **KINDS["ddg"]), np.random.default_rng(0))
    assert out.communication.messages == 4 * 10
    assert out.calibration["sampling_rate"] == pytest.approx(10 / 60) and out.calibration["n_parties"] == 10
    assert out.accounting.status == "unproven"  # the paper's Poisson bound on fixed-size samples
    rep = run_fl(dict(SAMPLED, runs=2, relation="replace", **KINDS["ddg"]), np.random.default_rng(0))
    assert rep.accounting.status == "verified"


def test_sampling_matches_a_loop_reference():
    """Non-private, fixed samples: the vectorized trainer equals FedAvg written out over the sampled clients."""
    cfg = dict(SAMPLED, runs=2, **KINDS["none"])
    out = run_fl(cfg, np.random.default_rng(0))
    data = load_digits_federated(60, rng=0)
    X = np.concatenate([data["X"], np.ones(data["X"].shape[:-1] + (1,))], axis=-1)
    Y = np.eye(10)[data["y"]] * data["mask"][..., None]
    cnt = data["mask"].sum(1)
    Xt = np.concatenate([data["X_test"], np.ones((len(data["y_test"]), 1))], axis=-1)
    srng = np.random.default_rng(3)
    W, mom = np.zeros((2, 65, 10)), np.zeros((2, 65, 10))
    for t in range(4):
        order = np.argsort(srng.random((2, 60)), axis=1)[:, :10]
        for r in range(2):
            total = np.zeros((65, 10))
            for i in order[r]:
                w = W[r].copy()
                for _ in range(2):
                    z = X[i] @ w
                    z -= z.max(-1, keepdims=True)
                    pr = np.exp(z) / np.exp(z).sum(-1, keepdims=True)
                    w -= 0.5 * X[i].T @ ((pr - Y[i]) * data["mask"][i][:, None]) / cnt[i]
                total += w - W[r]
            mom[r] = 0.9 * mom[r] + total / 10
            W[r] = W[r] + mom[r]
        acc = [np.mean(np.argmax(Xt @ W[r], 1) == data["y_test"]) for r in range(2)]
        np.testing.assert_allclose(out.extras["accuracy_curve"][:, t], acc)


def test_common_random_numbers_across_protocols():
    """With sampling_seed the clients of each round are the same whatever the protocol: same samples, same model."""
    a = run_fl(dict(SAMPLED, **KINDS["none"]), np.random.default_rng(0))
    b = run_fl(dict(SAMPLED, **KINDS["none"]), np.random.default_rng(99))
    np.testing.assert_array_equal(a.extras["accuracy_curve"], b.extras["accuracy_curve"])
    c = run_fl(dict(SAMPLED, sampling_seed=4, **KINDS["none"]), np.random.default_rng(0))
    assert not np.array_equal(a.extras["accuracy_curve"], c.extras["accuracy_curve"])


def test_poisson_sampling_for_the_central_gaussian():
    out = run_fl(dict(SAMPLED, sampling="poisson", runs=3, **KINDS["gauss"]), np.random.default_rng(0))
    assert out.accounting.status == "verified" and out.calibration["n_parties"] == 60
    assert 0 < out.communication.messages < 4 * 60
    # DDG with Poisson rounds: 60 clients at q = 1/6 leave a round with nobody but the target too often for delta = 1e-5
    with pytest.raises(ValueError, match="no other client"):
        run_fl(dict(SAMPLED, sampling="poisson", **KINDS["ddg"]), np.random.default_rng(0))
    ddg = run_fl(dict(SAMPLED, sampling="poisson", runs=3, **dict(KINDS["ddg"], delta=1e-3)), np.random.default_rng(0))
    assert ddg.accounting.status == "verified" and ddg.calibration["n_parties"] == 60
    assert 0 < ddg.communication.messages < 4 * 60
    with pytest.raises(ValueError, match="clients_per_round"):
        run_fl(dict(SAMPLED, clients_per_round=61, **KINDS["none"]), np.random.default_rng(0))


@pytest.mark.parametrize("kind", ["gauss", "ddg"])
def test_rounds_run_is_the_prefix_of_the_calibrated_run(kind):
    """``rounds_run=r`` trains the first r rounds of the T-round run: the same draws, the same curve, T's accounting."""
    cfg = dict(BASE, rounds=6, runs=3, clip=0.3, clients_per_round=8, **KINDS[kind])
    full = run_fl(cfg, np.random.default_rng(5))
    short = run_fl(dict(cfg, rounds_run=2), np.random.default_rng(5))
    assert short.extras["accuracy_curve"].shape == (3, 2) and short.t.tolist() == [1, 2]
    assert np.array_equal(short.extras["accuracy_curve"], full.extras["accuracy_curve"][:, :2])
    assert short.accounting == full.accounting  # calibrated and accounted for the 6 rounds
    assert short.calibration["rounds"] == 6 and short.calibration["rounds_run"] == 2
    # the check can fail: a run calibrated for 2 rounds has less noise, hence another curve
    two = run_fl(dict(cfg, rounds=2), np.random.default_rng(5))
    assert not np.array_equal(two.extras["accuracy_curve"], short.extras["accuracy_curve"])


def test_rounds_run_outside_one_to_rounds_is_refused():
    for bad in (0, 3):
        with pytest.raises(ValueError, match=rf"rounds_run must be an integer in \[1, 2\], got {bad}"):
            FederatedLearner(create("sum-non-private"), n_clients=5, n_features=4, rounds=2, rounds_run=bad)
    with pytest.raises(TypeError, match="rounds_run"):
        FederatedLearner(create("sum-non-private"), n_clients=5, n_features=4, rounds=2, rounds_run=1.0)


def _plain_local_updates(W, X, Y, mask, count, *, lr, local_steps):
    """The plain expression of local training (fresh temporaries each step), as it was written before the in-place
    form: the reference of test_local_updates_in_place_matches_the_plain_expression."""
    Wc = W.copy()
    for _ in range(local_steps):
        z = np.einsum("nlf,nfk->nlk", X, Wc)
        z -= z.max(-1, keepdims=True)
        prob = np.exp(z)
        prob /= prob.sum(-1, keepdims=True)
        Wc -= lr * np.einsum("nlf,nlk->nfk", X, (prob - Y) * mask[..., None]) / count
    return (Wc - W).reshape(W.shape[0], -1)


def test_local_updates_in_place_matches_the_plain_expression():
    """local_updates (in place, one reused gradient buffer) returns the plain expression's floats bit for bit,
    signs of zeros included: clients with several examples, padding, an all-zero feature (zero gradients), and a
    learning rate that is not a power of two (so the order of the products and divisions shows)."""
    from fedbandit.learners.federated import local_updates

    rng = np.random.default_rng(11)
    n, L, f, C = 37, 6, 9, 5
    X = rng.normal(size=(n, L, f))
    X[..., 3] = 0.0  # a feature that is always zero: exactly zero gradients
    counts = rng.integers(1, L + 1, size=n)
    mask = np.arange(L)[None, :] < counts[:, None]
    X *= mask[..., None]
    Y = np.eye(C)[rng.integers(0, C, size=(n, L))] * mask[..., None]
    count = counts.astype(float)[:, None, None]
    W = rng.normal(size=(n, f, C)) * 0.3
    for lr, steps in ((0.3, 4), (0.5, 1), (1.7, 3)):
        got = local_updates(W, X, Y, mask, count, lr=lr, local_steps=steps)
        ref = _plain_local_updates(W, X, Y, mask, count, lr=lr, local_steps=steps)
        assert got.tobytes() == ref.tobytes()

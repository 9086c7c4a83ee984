"""Federated softmax regression with a pluggable sum protocol (Kairouz, Liu & Steinke 2021, Sec. 6.2).

Federated averaging with server momentum [paper: the method of [KLS21]'s federated
experiments, Sec. 6.2.3; model, learning rates and sizes are the book's choices]: at every
round t = 1..T the server samples n of the N clients, each sampled client starts from the
server's model W, takes ``local_steps`` full-batch gradient steps of the softmax
(cross-entropy) loss on its own examples, and sends its update Δ_i = W_i − W through the
sum protocol P (:mod:`fedbandit.protocols.sums`: exact, a trusted server's Gaussian, the
distributed discrete Gaussian or the distributed binomial mechanism with secure
aggregation); the server receives the noisy Σ_i Δ_i and updates (uniform client weights)

    m ← μ m + (Σ_i Δ_i)/n,   W ← W + η_s m.

**Client sampling** (``clients_per_round`` n < N): ``sampling="fixed"`` draws n of the N
clients uniformly without replacement every round, independently across rounds -- the
paper's sampler ("without replacement within each round, and with replacement across
rounds"); ``sampling="poisson"`` lets each client join with probability q = n/N (the sum
is still divided by n; the distributed discrete Gaussian then adds shares that keep the
sum's noise whatever the number that joined, :mod:`fedbandit.accounting.sampled_ddg`; the
binomial mechanism refuses it).  The protocol is configured with ``sampling_rate`` = n/N
and calibrates its noise with amplification by subsampling
(:mod:`fedbandit.accounting.subsampling`); the guarantee is for an adversary who sees the
models but not who was sampled.  With all clients in every round (the default) there is no
amplification.  Either way the guarantee is the protocol's over the T rounds
(``n_rounds = T``): the model after every round is a function of its releases only.

Vectorization: the R runs and their n sampled clients advance together (one array axis of
R·n clients; with Poisson sampling only the clients that joined train); the runs share the
data split and differ in the samples, the noise and the protocol's public randomness (the
DDG rotation is drawn per run), so they are independent executions.  The compute floor of
a round is about 4·R·n·local_steps·(examples × features × classes) flops (forward and
backward products), far below the protocol's cost per round of R·n·d' noise draws and a
rotation.

The learner is registered as ``"federated-learning"``: :func:`fedbandit.experiments.run_config`
runs it on ``instance="digits"`` (:func:`fedbandit.envs.make_environment`) and returns a
:class:`FederatedResult` (a :class:`~fedbandit.learners.result.Result` with test accuracy in place
of regret).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedbandit._validation import (
    MAX_STEPS,
    check_array,
    check_choice,
    check_float_in_range,
    check_int_in_range,
    check_positive_float,
    check_positive_int,
    check_rng,
)
from fedbandit.learners.registry import register_learner, split_params
from fedbandit.learners.result import CommunicationRecord, Result
from fedbandit.protocols.sums import SumProtocol

__all__ = ["FederatedLearner", "FederatedResult", "local_updates", "server_momentum_step"]


@dataclass(kw_only=True)
class FederatedResult(Result):
    """Outcome of R runs of :class:`FederatedLearner` side by side.

    Attributes
    ----------
    accuracy : ndarray (R,)
        Test accuracy of the final model of each run.
    t : ndarray (T,)
        Rounds 1..T.
    communication : dict
        The protocol's counters (``rounds``, ``messages``, ``payload`` with ``unit``, ``bits``)
        and ``bits_per_coordinate``.
    accounting : dict
        The guarantee of the whole run (:meth:`fedbandit.accounting.Accounting.as_dict`).
    calibration : dict
        The protocol's noise parameters and the learner's own (rounds, learning rate, ...).
    extras : dict
        ``accuracy_curve`` (R, T): test accuracy after every round.

    The other fields are :class:`~fedbandit.learners.result.Result`'s.
    """

    accuracy: np.ndarray
    t: np.ndarray

    @property
    def n_runs(self) -> int:
        return self.accuracy.shape[0]


def local_updates(W, X, Y, mask, count, *, lr: float, local_steps: int) -> np.ndarray:
    """Clients' updates Δ_i = W_i − W after ``local_steps`` full-batch softmax-regression steps from W.

    One row per client (any number of clients, of any runs, at once): ``W`` (n, f, C) the
    model each starts from, ``X`` (n, L, f) its examples with the bias feature, ``Y``
    (n, L, C) their one-hot labels (zero rows for padding), ``mask`` (n, L) which examples
    are real, ``count`` (n, 1, 1) how many.  Returns (n, f·C).  The single definition of a
    client's local training: :class:`FederatedLearner` and the Flower client of
    :mod:`fedbandit.integrations.flower` both call it.
    """
    W = check_array("W", W)
    X, Y, mask, count = (check_array(name, a) for name, a in (("X", X), ("Y", Y), ("mask", mask), ("count", count)))
    if W.ndim != 3 or X.ndim != 3 or Y.ndim != 3 or mask.ndim != 2 or count.shape != (W.shape[0], 1, 1):
        raise ValueError(f"W (n, f, C), X (n, L, f), Y (n, L, C), mask (n, L) and count (n, 1, 1) expected, got shapes "
                         f"{W.shape}, {X.shape}, {Y.shape}, {mask.shape}, {count.shape}")
    n, f, C = W.shape
    if X.shape[0] != n or X.shape[2] != f or Y.shape != (n, X.shape[1], C) or mask.shape != X.shape[:2]:
        raise ValueError(f"W {W.shape}, X {X.shape}, Y {Y.shape} and mask {mask.shape} disagree on n, L, f or C")
    if np.any(count <= 0):
        raise ValueError("count must be positive (every client has at least one example)")
    lr = check_positive_float("lr", lr)
    local_steps = check_positive_int("local_steps", local_steps, max_value=10**6, reason="steps are a loop")
    # Each step is  Wc -= lr·(Xᵀ((softmax(X Wc) − Y)·mask))/count,  evaluated with the same
    # elementwise operations in the same order as that expression, but in place: the
    # probabilities overwrite the logits and the gradient is written into one reused (n, f, C)
    # buffer, instead of three fresh (n, f, C) temporaries per step (the same floats,
    # tests/test_federated.py::test_local_updates_in_place_matches_the_plain_expression).
    Wc = W.copy()
    grad = np.empty_like(Wc)
    weight = mask[..., None]
    for _ in range(local_steps):  # local full-batch gradient steps, all clients at once
        prob = np.einsum("nlf,nfk->nlk", X, Wc)
        prob -= prob.max(-1, keepdims=True)
        np.exp(prob, out=prob)
        prob /= prob.sum(-1, keepdims=True)
        prob -= Y
        prob *= weight
        np.einsum("nlf,nlk->nfk", X, prob, out=grad)
        np.multiply(lr, grad, out=grad)
        grad /= count
        Wc -= grad
    Wc -= W
    return Wc.reshape(W.shape[0], -1)


def server_momentum_step(W, mom, total, *, n_clients: int, momentum: float, server_lr: float):
    """Federated averaging with server momentum: m ← μ m + total/n, W ← W + η_s m; returns (W, m)."""
    W, mom, total = check_array("W", W), check_array("mom", mom), check_array("total", total)
    if not (W.shape == mom.shape == total.shape):
        raise ValueError(f"W, mom and total must have one shape, got {W.shape}, {mom.shape}, {total.shape}")
    n_clients = check_positive_int("n_clients", n_clients, max_value=MAX_STEPS)
    momentum = check_float_in_range("momentum", momentum, 0.0, 1.0, high_inclusive=False)
    server_lr = check_positive_float("server_lr", server_lr)
    mom = momentum * mom + total / n_clients
    return W + server_lr * mom, mom


def _repeat_runs(a: np.ndarray, n_runs: int) -> np.ndarray:
    """Stack ``n_runs`` copies of ``a`` along its first (client) axis: (R·n, ...)."""
    return a if n_runs == 1 else np.concatenate([a] * n_runs, axis=0)


@register_learner("federated-learning", family="federated")
class FederatedLearner:
    """Federated averaging of a softmax-regression model through a sum protocol.

    Parameters
    ----------
    protocol : SumProtocol
        ``fedbandit.protocols.create("sum-...", ...)``; configured by this constructor for n
        parties, the model's dimension, ``rounds`` releases and clipping norm ``clip``.
    n_clients : int
        n, the clients (all take part in every round).
    n_features : int
        Input features per example (a bias feature is appended).
    n_classes : int, default 10
    rounds : int
        T, communication rounds.
    local_steps : int, default 5
        Full-batch gradient steps per client and round.
    lr : float, default 0.5
        Local learning rate.
    momentum : float, default 0.9
        Server momentum μ in [0, 1).
    clip : float, default 0.3
        ℓ2 clipping norm c of a client's update (used by the private protocols).
    clients_per_round : int or None, default None
        n, the clients sampled every round (None: all n_clients, no sampling).
    sampling : {"fixed", "poisson"}, default "fixed"
        How the round's clients are drawn (module docstring).
    server_lr : float, default 1
        Server learning rate η_s.
    sampling_seed : int or None, default None
        Seed of the client samples, for common random numbers across protocols (the same
        clients in round t of run r whatever the protocol); None draws them from a stream
        spawned from the run's generator.
    rounds_run : int or None, default None
        Train only the first ``rounds_run`` of the ``rounds`` rounds the protocol is
        calibrated and accounted for (None: all of them): the prefix of a T-round run, as a
        deployment that stops early (its accounting stays the T-round one, an upper bound).
    """

    name = "federated-learning"

    def __init__(self, protocol, *, n_clients, n_features, n_classes=10, rounds, local_steps=5, lr=0.5, momentum=0.9,
                 clip=0.3, clients_per_round=None, sampling="fixed", server_lr=1.0, sampling_seed=None,
                 rounds_run=None):
        if not isinstance(protocol, SumProtocol):
            raise TypeError(
                f"protocol must be a fedbandit.protocols.SumProtocol (fedbandit.protocols.create('sum-...', ...)), "
                f"got {type(protocol).__name__}"
            )
        self.n_clients = check_positive_int("n_clients", n_clients, max_value=MAX_STEPS)
        self.n_features = check_positive_int("n_features", n_features, max_value=10**6, reason="the model has n_features·n_classes weights")
        self.n_classes = check_int_in_range("n_classes", n_classes, 2, 10**6)
        if (self.n_features + 1) * self.n_classes > MAX_STEPS:
            raise ValueError(f"(n_features + 1)·n_classes = {(self.n_features + 1) * self.n_classes} model weights exceed 10^9")
        self.rounds = check_positive_int("rounds", rounds, max_value=MAX_STEPS)
        self.rounds_run = self.rounds if rounds_run is None else check_int_in_range("rounds_run", rounds_run, 1, self.rounds)
        self.local_steps = check_positive_int("local_steps", local_steps, max_value=10**6, reason="steps per round are a loop")
        self.lr = check_positive_float("lr", lr)
        self.momentum = check_float_in_range("momentum", momentum, 0.0, 1.0, high_inclusive=False)
        self.clip = check_positive_float("clip", clip)
        self.server_lr = check_positive_float("server_lr", server_lr)
        self.clients_per_round = (self.n_clients if clients_per_round is None
                                  else check_int_in_range("clients_per_round", clients_per_round, 1, self.n_clients))
        self.sampling = check_choice("sampling", sampling, ("fixed", "poisson"))
        self.sampling_rate = self.clients_per_round / self.n_clients
        self.sampling_seed = None if sampling_seed is None else check_int_in_range("sampling_seed", sampling_seed, 0, None)
        self.dim = (self.n_features + 1) * self.n_classes
        self.n_runs = 1
        poisson = self.sampling == "poisson" and self.sampling_rate < 1.0
        self.protocol = protocol.configure(
            n_parties=self.n_clients if poisson else self.clients_per_round, dim=self.dim, n_rounds=self.rounds,
            clip=self.clip, sampling_rate=self.sampling_rate, sampling=self.sampling,
        )

    def _check_data(self, data) -> None:
        if not isinstance(data, dict) or any(k not in data for k in ("X", "y", "mask", "X_test", "y_test")):
            raise TypeError("data must be a dict with X, y, mask, X_test, y_test (fedbandit.envs.load_digits_federated)")
        n, _, f = np.shape(data["X"])
        if (n, f) != (self.n_clients, self.n_features):
            raise ValueError(
                f"data has {n} clients with {f} features, but the learner was built for n_clients={self.n_clients}, "
                f"n_features={self.n_features}"
            )

    def run(self, data, rng, *, n_runs: int | None = None) -> FederatedResult:
        """Train ``n_runs`` models side by side on ``data`` (:func:`fedbandit.envs.load_digits_federated`).

        ``rng`` drives the protocol (noise, rounding, one rotation per run) and, with client
        sampling, the samples (a stream spawned from it); the data and the initial model
        (zero) are fixed.
        """
        self._check_data(data)
        rng = check_rng("rng", rng)
        R = check_positive_int("n_runs", self.n_runs if n_runs is None else n_runs)
        C, T = self.n_classes, self.rounds_run
        protocol = self.protocol
        sampled = self.sampling_rate < 1.0
        if sampled and self.sampling_seed is not None:  # common random numbers across protocols
            sample_rng = np.random.default_rng(self.sampling_seed)
        elif sampled:  # the samples from their own stream; without sampling the protocol owns rng (old draws)
            sample_rng, rng = rng.spawn(2)
        protocol.reset(n_runs=R, rng=rng)
        mask = data["mask"]
        X = np.concatenate([data["X"], np.ones(data["X"].shape[:-1] + (1,))], axis=-1)
        Y = np.eye(C)[data["y"]] * mask[..., None]
        count = mask.sum(axis=1)[:, None, None]
        N, _, f = X.shape
        d = f * C
        poisson = sampled and self.sampling == "poisson"
        n = N if (poisson or not sampled) else self.clients_per_round  # client vectors per run and round
        W_runs = np.repeat(np.arange(R), n)  # the run of each of the R·n client rows
        if not sampled:
            Xr, Yr, maskr, countr = (_repeat_runs(a, R) for a in (X, Y, mask, count))  # clients of all runs: (R·n, ...)
        Xt = np.concatenate([data["X_test"], np.ones((len(data["y_test"]), 1))], axis=-1)
        W, mom = np.zeros((R, d)), np.zeros((R, d))
        curve = np.zeros((R, T))
        if poisson:  # the round's client vectors (R·N rows, zero for the clients that did not join): reused
            update = np.zeros((R * n, d))
        for t in range(T):
            if sampled and not poisson:  # n of N without replacement, independently per run and round
                idx = np.argsort(sample_rng.random((R, N)), axis=1)[:, :n].reshape(-1)
                Xr, Yr, maskr, countr = X[idx], Y[idx], mask[idx], count[idx]
            elif poisson:  # each client joins with probability q; only those that joined train
                present = sample_rng.random((R, N)) < self.sampling_rate
                rows = np.flatnonzero(present.reshape(-1))
                idx = rows % N
                Wc = W.reshape(R, f, C)[W_runs[rows]]
                update[rows] = local_updates(Wc, X[idx], Y[idx], mask[idx], count[idx], lr=self.lr,
                                             local_steps=self.local_steps)
                total = protocol.aggregate(update.reshape(R, n, d), mask=present)
                update[rows] = 0.0  # back to all zeros for the next round
                W, mom = server_momentum_step(W, mom, total, n_clients=self.clients_per_round, momentum=self.momentum,
                                              server_lr=self.server_lr)
                curve[:, t] = self._accuracy(Xt, data["y_test"], W)
                continue
            Wc = np.broadcast_to(W.reshape(R, 1, f, C), (R, n, f, C)).reshape(R * n, f, C)
            update = local_updates(Wc, Xr, Yr, maskr, countr, lr=self.lr, local_steps=self.local_steps).reshape(R, n, d)
            total = protocol.aggregate(update)
            W, mom = server_momentum_step(W, mom, total, n_clients=self.clients_per_round, momentum=self.momentum,
                                          server_lr=self.server_lr)
            curve[:, t] = self._accuracy(Xt, data["y_test"], W)
        return FederatedResult(
            accuracy=curve[:, -1].copy(),
            t=np.arange(1, T + 1),
            communication=self.communication(),
            accounting=self.accounting(),
            calibration=self.calibration(),
            extras={"accuracy_curve": curve},
            learner=self.name,
            protocol=protocol.name,
        )

    def _accuracy(self, Xt, y_test, W) -> np.ndarray:
        R = W.shape[0]
        logits = np.matmul(Xt, W.reshape(R, -1, self.n_classes))  # (R, n_test, C)
        return np.mean(np.argmax(logits, axis=-1) == y_test, axis=-1)

    def communication(self) -> CommunicationRecord:
        """What the clients sent over the run (uplink, all clients)."""
        return CommunicationRecord.of(self.protocol.communication, bits_per_coordinate=self.protocol.bits_per_coordinate)

    def accounting(self):
        """The guarantee of the whole run: the protocol's over the T rounds (the model is a function of its releases)."""
        return self.protocol.accounting()

    def calibration(self) -> dict:
        out = dict(self.protocol.calibration())
        out.update({"rounds": self.rounds, "local_steps": self.local_steps, "lr": self.lr, "momentum": self.momentum,
                    "clip": self.clip, "clients_per_round": self.clients_per_round, "n_clients": self.n_clients,
                    "client_sampling": self.sampling, "server_lr": self.server_lr, "rounds_run": self.rounds_run})
        return out

    #: Configuration keys the learner reads itself (besides its constructor's).
    config_keys = ("runs",)

    @classmethod
    def from_config(cls, config: dict, data):
        """Build from a configuration (see :func:`fedbandit.experiments.run_config`) and its data."""
        protocol, kw = split_params(config, cls)
        kw.pop("n_clients", None)
        learner = cls(protocol, n_clients=np.shape(data["X"])[0], n_features=np.shape(data["X"])[-1],
                      n_classes=int(data.get("n_classes", 10)), **kw)
        learner.n_runs = check_positive_int("runs", config.get("runs", 1))
        return learner

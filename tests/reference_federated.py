"""Plain reference of the federated trainer: chapter 5's inline ``fl_run`` before the sum protocols.

One run, the privacy branch written out (``kind`` = "none", "gauss" or "ddg"), every
calibration inline.  ``tests/test_federated.py`` checks that
:class:`fedbandit.learners.federated.FederatedLearner` with the matching sum protocol makes
the same computations from the same random draws (identical accuracy).
"""

from __future__ import annotations

import math

import numpy as np

from fedbandit.accounting.ddg import ddg_params
from fedbandit.accounting.gaussian import analytic_gaussian_sigma
from fedbandit.envs.digits import load_digits_federated
from fedbandit.mechanisms.ddg import DDGMechanism, clip_l2

BETA = math.exp(-0.5)


def reference_fl_run(config, rng):
    data = load_digits_federated(config["n_clients"], rng=config["split_seed"])
    X = np.concatenate([data["X"], np.ones(data["X"].shape[:-1] + (1,))], axis=-1)
    Y = np.eye(10)[data["y"]] * data["mask"][..., None]
    count = data["mask"].sum(axis=1)[:, None, None]
    n, _, f = X.shape
    d = f * 10
    T, c, delta, kind = config["rounds"], config["c"], config["delta"], config["kind"]
    if kind == "ddg":
        mech = DDGMechanism(ddg_params(config["bits"], config["k"], n, d, c, config["epsilon"], delta,
                                       BETA, steps=T), rng)
    elif kind == "gauss":
        sigma_g = analytic_gaussian_sigma(config["epsilon"], delta, c * math.sqrt(T))
    W, mom = np.zeros(d), np.zeros(d)
    curve = []
    Xt = np.concatenate([data["X_test"], np.ones((len(data["y_test"]), 1))], axis=-1)
    for _ in range(T):
        Wc = np.broadcast_to(W.reshape(f, 10), (n, f, 10)).copy()
        for _ in range(config["local_steps"]):  # local full-batch gradient steps, all clients at once
            z = np.einsum("nlf,nfk->nlk", X, Wc)
            z -= z.max(-1, keepdims=True)
            prob = np.exp(z)
            prob /= prob.sum(-1, keepdims=True)
            Wc -= config["lr"] * np.einsum("nlf,nlk->nfk", X, (prob - Y) * data["mask"][..., None]) / count
        update = Wc.reshape(n, d) - W
        if kind == "none":
            avg = update.mean(0)
        elif kind == "gauss":
            avg = (clip_l2(update, c).sum(0) + rng.normal(0, sigma_g, d)) / n
        else:
            avg = mech.noisy_sum(update, rng) / n
        mom = config["momentum"] * mom + avg
        W = W + mom
        curve.append(float(np.mean(np.argmax(Xt @ W.reshape(f, 10), axis=1) == data["y_test"])))
    return {"accuracy": curve[-1], "curve": curve}

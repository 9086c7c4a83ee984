"""experiments.trials."""

from __future__ import annotations

from typing import Any

import numpy as np

from fedbandit._validation import (
    check_choice,
    check_delta,
    check_epsilon,
    check_positive_int,
    check_rng,
)
from fedbandit.accounting.ddg import DEFAULT_BETA, ddg_params
from fedbandit.mechanisms.ddg import DDGMechanism
from fedbandit.mechanisms.psco import run_psco, sample_bernoulli_input, sample_hard_input, sup_error

__all__ = [
    "dme_trial",
    "psco_trial",
]


# ---------------------------------------------------------------------------
# Distributed mean estimation trial ([KLS21] Sec. 6.1), shared by the chapter and benchmarks
# ---------------------------------------------------------------------------
def dme_trial(config: dict, rng) -> dict:
    r"""One distributed-mean-estimation configuration, ``reps`` repetitions vectorized ([KLS21]_ Sec. 6.1).

    Each of ``n`` clients holds a vector drawn from :math:`\mathcal N(0, I_d)` and normalized
    to norm ``c`` (the authors' setting); the server estimates the mean.  The metric is the
    mean squared error per coordinate of the mean.

    Parameters
    ----------
    config : dict
        Keys ``n, d, c, bits, k, epsilon, delta, beta, norm_growth, reps`` (and optionally
        ``method``).
    rng : numpy.random.Generator

    Returns
    -------
    dict
        ``mse_ddg`` (reps,), ``mse_gauss_sim`` (reps,) of the central analytic Gaussian,
        ``mse_gauss_analytic`` and ``mse_gauss_zcdp`` (expected values: analytic
        calibration, and the zCDP/[CKS20] calibration), ``mse_ddg_noise`` (expected error
        from DDG's privacy noise alone, :math:`\sigma^2/n`), ``wrap`` (fraction of wrapped
        coordinates), ``gamma``, ``sigma``, ``sigma_int``.
    """
    from fedbandit.accounting.gaussian import analytic_gaussian_sigma
    from fedbandit.accounting.zcdp import calibrate_gaussian_sigma

    rng = check_rng(rng)
    n, d, c = int(config["n"]), int(config["d"]), float(config["c"])
    reps = int(config.get("reps", 1))
    p = ddg_params(
        int(config["bits"]),
        float(config["k"]),
        n,
        d,
        c,
        float(config["epsilon"]),
        float(config["delta"]),
        float(config.get("beta", DEFAULT_BETA)),
        norm_growth=config.get("norm_growth", "conservative"),
        method=config.get("method", "rdp"),
    )
    x = rng.normal(size=(reps, n, d))
    x *= c / np.linalg.norm(x, axis=-1, keepdims=True)
    true_mean = x.mean(axis=-2)
    mech = DDGMechanism(p, rng)
    residues, st = mech.encode(x, rng, stages=True)
    est = mech.decode(mech.aggregate(residues)) / n
    int_sum = st["noised"].sum(axis=-2)
    half = p.modulus // 2
    wrap = float(np.mean((int_sum < -half) | (int_sum >= half)))
    sg = analytic_gaussian_sigma(p.epsilon, p.delta, c)
    gauss = true_mean + rng.normal(0.0, sg, size=true_mean.shape) / n
    return {
        "mse_ddg": np.mean((est - true_mean) ** 2, axis=-1),
        "mse_gauss_sim": np.mean((gauss - true_mean) ** 2, axis=-1),
        "mse_gauss_analytic": sg**2 / n**2,
        "mse_gauss_zcdp": calibrate_gaussian_sigma(p.epsilon, p.delta, c) ** 2 / n**2,
        "mse_ddg_noise": p.sigma**2 / n,
        "wrap": wrap,
        "gamma": p.gamma,
        "sigma": p.sigma,
        "sigma_int": p.sigma_int,
    }


def _label(name: str, k) -> str:
    return name if k is None else f"{name}-{k}"


def psco_trial(config: dict, rng) -> dict:
    """One seed of a PSCO error experiment, in the form ``fedbandit.experiments.grid.run_grid`` runs.

    Parameters
    ----------
    config : dict
        ``n`` (users), ``epsilon``, ``delta``, ``runs`` (sequences per seed, default 1),
        ``algorithms``: list of ``[name, k]`` pairs (k None unless the algorithm needs it),
        ``input``: ``"bernoulli"`` (i.i.d. Ber(``mean``), default 1/2) or ``"hard"`` (Δ_{n,k}
        with k = ``hard_k``); optional ``schedules``: label → batch sizes computed
        beforehand (so that worker processes need not rerun the schedule search).
    rng : numpy.random.Generator

    Returns
    -------
    dict
        ``"<name>"`` or ``"<name>-<k>"`` → sup errors of the runs (array of shape (runs,)),
        and ``"batch_sizes"`` → the schedules used.
    """
    n = check_positive_int("n", config["n"])
    epsilon = check_epsilon(config["epsilon"])
    delta = check_delta(config["delta"])
    runs = check_positive_int("runs", config.get("runs", 1))
    rng = check_rng(rng)
    kind = check_choice("input", config.get("input", "bernoulli"), ("bernoulli", "hard"))
    if kind == "hard":
        x = sample_hard_input(n, config["hard_k"], epsilon, rng, runs=runs)
    else:
        x = sample_bernoulli_input(n, rng, runs=runs, mean=config.get("mean", 0.5))
    schedules = config.get("schedules") or {}
    out: dict[str, Any] = {"batch_sizes": {}}
    for name, k in config["algorithms"]:
        label = _label(name, k)
        kwargs = {}
        if label in schedules and name in ("concurrent", "extrapolating"):
            kwargs["batch_sizes"] = tuple(schedules[label])
        elif label in schedules and name == "sequential":
            kwargs["batch_size"] = int(schedules[label][0])
        release = run_psco(name, x, epsilon, delta, rng, k=k, **kwargs)
        out[label] = sup_error(release, x)
        out["batch_sizes"][label] = release.info.get("batch_sizes")
    return out

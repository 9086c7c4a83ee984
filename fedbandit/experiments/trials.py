"""experiments.trials."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from fedbandit._validation import (
    MAX_STEPS,
    check_choice,
    check_delta,
    check_epsilon,
    check_float_in_range,
    check_int_in_range,
    check_nonnegative_float,
    check_positive_float,
    check_positive_int,
    check_rng,
)
from fedbandit.accounting.ddg import DEFAULT_BETA, ddg_zcdp_epsilon
from fedbandit.envs.linear import SyntheticLinearEnv
from fedbandit.learners.concurrent_linucb import ConcurrentShuffleLinUCB
from fedbandit.mechanisms.ddg import DDGMechanism
from fedbandit.mechanisms.psco import (
    bernoulli_concurrent_sup_error,
    optimal_batch_sizes,
    run_psco,
    sample_bernoulli_input,
    sample_hard_input,
    sup_error,
)
from fedbandit.protocols.registry import create, describe
from fedbandit.theory.ddg import ddg_mse_bound, theorem2_bits, theorem2_mse, theorem2_params

__all__ = [
    "dme_trial",
    "theorem2_trial",
    "psco_trial",
    "bandit_trial",
]


# ---------------------------------------------------------------------------
# Distributed mean estimation trial ([KLS21] Sec. 6.1), shared by the chapter and benchmarks
# ---------------------------------------------------------------------------
def check_config(config, required) -> None:
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    missing = [k for k in required if k not in config]
    if missing:
        raise ValueError(f"config lacks {missing} (it has {sorted(config)})")


def dme_trial(config: dict, rng) -> dict:
    r"""One distributed-mean-estimation configuration, ``reps`` repetitions vectorized ([KLS21]_ Sec. 6.1).

    Each of ``n`` clients holds a vector drawn from :math:`\mathcal N(0, I_d)` and normalized
    to norm ``c`` (the authors' setting); the server estimates the mean from one sum released
    by a sum protocol (:mod:`fedbandit.protocols.sums`, one round): ``"sum-ddg-secagg"`` and,
    as the continuous baseline, ``"sum-central-gaussian"`` (analytic calibration).  The
    metric is the mean squared error per coordinate of the mean.

    Parameters
    ----------
    config : dict
        Keys ``n, d, c, bits, k, epsilon, delta, beta, norm_growth, reps`` (and optionally
        ``method`` and ``flatten``: ``"hadamard"`` or ``"dft"``).
    rng : numpy.random.Generator

    Returns
    -------
    dict
        ``mse_ddg`` (reps,), ``mse_gauss_sim`` (reps,) of the central analytic Gaussian,
        ``mse_gauss_analytic`` and ``mse_gauss_zcdp`` (expected values: analytic
        calibration, and the zCDP/[CKS20] calibration), ``mse_ddg_noise`` (expected error
        from DDG's privacy noise alone, :math:`\sigma^2/n`), ``wrap`` (fraction of wrapped
        coordinates), ``gamma``, ``sigma``, ``sigma_int``, ``d_pad``, ``delta2``, ``eps_cdp`` (the
        configuration is ½ε²-zCDP with this ε, [KLS21]_ Thm. 1), ``sum_norm`` (the largest
        ‖Σ x_i‖ over the repetitions) and ``mse_bound`` (:func:`fedbandit.theory.ddg.ddg_mse_bound`
        at that norm, per coordinate of the mean: an upper bound on the expected ``mse_ddg``).
    """
    check_config(config, ("n", "d", "c", "bits", "k", "epsilon", "delta"))
    rng = check_rng("rng", rng)
    n = check_positive_int("n", config["n"], max_value=MAX_STEPS, reason="n vectors per repetition are drawn")
    d = check_positive_int("d", config["d"], max_value=MAX_STEPS, reason="vectors of d entries are drawn")
    c = check_positive_float("c", config["c"])
    reps = check_positive_int("reps", config.get("reps", 1), max_value=MAX_STEPS, reason="repetitions are vectorized")
    if reps * n * d > MAX_STEPS:
        raise ValueError(f"reps·n·d = {reps * n * d} entries exceed 10^9 (reps={reps}, n={n}, d={d})")
    epsilon, delta = check_epsilon("epsilon", config["epsilon"]), check_delta("delta", config["delta"])
    check_int_in_range("bits", config["bits"], 2, 62)
    check_positive_float("k", config["k"])
    check_float_in_range("beta", config.get("beta", DEFAULT_BETA), 0.0, 1.0, high_inclusive=False)
    setting = dict(n_parties=n, dim=d, n_rounds=1, clip=c)
    ddg = create(
        "sum-ddg-secagg", epsilon=epsilon, delta=delta, bits=int(config["bits"]), k=float(config["k"]),
        rounding_beta=float(config.get("beta", DEFAULT_BETA)), norm_growth=config.get("norm_growth", "conservative"),
        method=config.get("method", "rdp"), flatten=config.get("flatten", "hadamard"),
    ).configure(**setting)
    gauss = create("sum-central-gaussian", epsilon=epsilon, delta=delta).configure(**setting)
    gauss_zcdp = create("sum-central-gaussian", epsilon=epsilon, delta=delta, calibration="zcdp").configure(**setting)
    p = ddg.params
    x = rng.normal(size=(reps, n, d))
    x *= c / np.linalg.norm(x, axis=-1, keepdims=True)
    true_mean = x.mean(axis=-2)
    sum_norm = float(np.max(np.linalg.norm(x.sum(axis=-2), axis=-1)))
    ddg.reset(n_runs=reps, rng=rng)  # draws the shared rotation
    est = ddg.aggregate(x) / n
    # The central Gaussian's error is its noise / n (the vectors have norm c, so clipping
    # leaves them): its estimate is formed as the true mean plus that noise.
    gauss.reset(n_runs=reps, rng=rng)
    _, noise = gauss.aggregate(x, return_noise=True)
    gauss_est = true_mean + noise / n
    sg = gauss.noise_std()
    return {
        "mse_ddg": np.mean((est - true_mean) ** 2, axis=-1),
        "mse_gauss_sim": np.mean((gauss_est - true_mean) ** 2, axis=-1),
        "mse_gauss_analytic": sg**2 / n**2,
        "mse_gauss_zcdp": gauss_zcdp.noise_std() ** 2 / n**2,
        "mse_ddg_noise": p.sigma**2 / n,
        "wrap": ddg.wrap_fraction(),
        "gamma": p.gamma,
        "sigma": p.sigma,
        "sigma_int": p.sigma_int,
        "d_pad": p.d_pad,
        "delta2": p.delta2,
        "eps_cdp": ddg_zcdp_epsilon(p.delta2, p.sigma, p.gamma, n, p.d_pad),
        "sum_norm": sum_norm,
        "mse_bound": ddg_mse_bound(p, sum_norm=sum_norm) / (d * n**2),
    }


def theorem2_trial(config: dict, rng) -> dict:
    r"""The distributed discrete Gaussian at Theorem 2's own parameters ([KLS21]_ Thm. 2), ``reps`` repetitions.

    The clients' vectors are those of :func:`dme_trial` (:math:`\mathcal N(0, I_d)` normalized to
    ``c``); the configuration is :func:`fedbandit.theory.ddg.theorem2_params` -- the proof's σ, γ,
    β and bit width (or ``bits``, fewer to leave the theorem) -- not the book's calibration, and
    each repetition draws its own rotation.

    Parameters
    ----------
    config : dict
        ``n, d, c, epsilon, reps`` and optionally ``bits`` and ``aligned`` (every client the
        same vector, so that ‖Σ x_i‖ = nc, the case the proof's modular condition allows for).
    rng : numpy.random.Generator

    Returns
    -------
    dict
        ``mse`` (reps,): the squared error of the *sum*; ``theorem2_mse`` (the theorem's value,
        :func:`fedbandit.theory.ddg.theorem2_mse` at the padded dimension); ``bound``
        (:func:`fedbandit.theory.ddg.ddg_mse_bound` at the largest ‖Σ x_i‖); ``eps_zcdp``
        (Theorem 1's ε at these parameters: the privacy half of Theorem 2); ``bits``,
        ``bits_theorem``, ``wrap`` (fraction of wrapped coordinates), ``d_pad``.
    """
    check_config(config, ("n", "d", "c", "epsilon"))
    rng = check_rng("rng", rng)
    n = check_positive_int("n", config["n"], max_value=MAX_STEPS, reason="n vectors per repetition are drawn")
    d = check_positive_int("d", config["d"], max_value=MAX_STEPS, reason="vectors of d entries are drawn")
    c = check_positive_float("c", config["c"])
    epsilon = check_epsilon("epsilon", config["epsilon"])
    reps = check_positive_int("reps", config.get("reps", 1), max_value=MAX_STEPS, reason="repetitions are vectorized")
    if reps * n * d > MAX_STEPS:
        raise ValueError(f"reps·n·d = {reps * n * d} entries exceed 10^9 (reps={reps}, n={n}, d={d})")
    p = theorem2_params(c, n, d, epsilon, bits=config.get("bits"))
    x = rng.normal(size=(reps, 1 if config.get("aligned", False) else n, d))
    x *= c / np.linalg.norm(x, axis=-1, keepdims=True)
    x = np.broadcast_to(x, (reps, n, d))  # aligned: every client holds the same vector, ‖Σ x_i‖ = nc
    true_sum = x.sum(axis=-2)
    mech = DDGMechanism(p, rng, runs=reps)
    residues, stages = mech.encode(x, rng, stages=True)
    est = mech.decode(mech.aggregate(residues))
    int_sum = stages["noised"].sum(axis=-2)
    half = p.modulus // 2
    return {
        "mse": np.sum((est - true_sum) ** 2, axis=-1),
        "theorem2_mse": theorem2_mse(c, n, p.d_pad, epsilon),
        "bound": ddg_mse_bound(p, sum_norm=float(np.max(np.linalg.norm(true_sum, axis=-1)))),
        "eps_zcdp": ddg_zcdp_epsilon(p.delta2, p.sigma, p.gamma, n, p.d_pad),
        "bits": p.bits,
        "bits_theorem": theorem2_bits(c, n, p.d_pad, epsilon),
        "wrap": float(np.mean((int_sum < -half) | (int_sum >= half))),
        "d_pad": p.d_pad,
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
        ``input``: ``"bernoulli"`` (i.i.d. Ber(``mean``), default 1/2), ``"hard"`` (Δ_{n,k}
        with k = ``hard_k``) or ``"bernoulli-blocks"`` (i.i.d. Ber(``mean``) drawn block by
        block for each algorithm, :func:`fedbandit.mechanisms.psco.bernoulli_concurrent_sup_error`:
        the same law per algorithm in O(n/b_k), for "sequential" and "concurrent" only, and no
        input shared between the algorithms); optional ``schedules``: label → batch sizes computed
        beforehand (so that worker processes need not rerun the schedule search), and
        ``composition`` ("best", "basic", "advanced"; default "best"): the split of (ε, δ)
        over the levels of the shuffle algorithms (the schedules given must be computed
        for the same rule).
    rng : numpy.random.Generator

    Returns
    -------
    dict
        ``"<name>"`` or ``"<name>-<k>"`` → sup errors of the runs (array of shape (runs,)),
        and ``"batch_sizes"`` → the schedules used.
    """
    check_config(config, ("n", "epsilon", "delta", "algorithms"))
    n = check_positive_int("n", config["n"])
    epsilon = check_epsilon("epsilon", config["epsilon"])
    delta = check_delta("delta", config["delta"])
    runs = check_positive_int("runs", config.get("runs", 1))
    rng = check_rng("rng", rng)
    kind = check_choice("input", config.get("input", "bernoulli"), ("bernoulli", "hard", "bernoulli-blocks"))
    algorithms = config["algorithms"]
    if (isinstance(algorithms, (str, bytes, dict)) or not hasattr(algorithms, "__iter__")
            or not all(isinstance(a, (list, tuple)) and len(a) == 2 for a in algorithms)):
        raise TypeError(f"algorithms must be a list of [name, k] pairs, got {algorithms!r:.80}")
    if kind == "bernoulli-blocks":
        return _psco_blocks_trial(config, n, epsilon, delta, runs, rng)
    if kind == "hard":
        x = sample_hard_input(n, config["hard_k"], epsilon, rng, runs=runs)
    else:
        x = sample_bernoulli_input(n, rng, runs=runs, mean=config.get("mean", 0.5))
    schedules = config.get("schedules") or {}
    composition = config.get("composition", "best")
    out: dict[str, Any] = {"batch_sizes": {}}
    for name, k in config["algorithms"]:
        label = _label(name, k)
        kwargs = {} if name in ("local", "central") else {"composition": composition}
        if label in schedules and name in ("concurrent", "extrapolating"):
            kwargs["batch_sizes"] = tuple(schedules[label])
        elif label in schedules and name == "sequential":
            kwargs["batch_size"] = int(schedules[label][0])
        release = run_psco(name, x, epsilon, delta, rng, k=k, **kwargs)
        out[label] = sup_error(release, x)
        out["batch_sizes"][label] = release.info.get("batch_sizes")
    return out


def _psco_blocks_trial(config: dict, n: int, epsilon: float, delta: float, runs: int, rng) -> dict:
    """psco_trial with ``input="bernoulli-blocks"``: each k-shuffler algorithm on its own block-drawn Bernoulli input.

    Also returns ``"cpu_seconds"``, the CPU time of the trial in the process that ran it.
    """
    start = time.process_time()
    schedules = config.get("schedules") or {}
    composition = config.get("composition", "best")
    out: dict[str, Any] = {"batch_sizes": {}}
    for name, k in config["algorithms"]:
        check_choice("algorithms (with input='bernoulli-blocks')", name, ("sequential", "concurrent"))
        label = _label(name, k)
        kk = 1 if name == "sequential" else k
        sizes = (tuple(schedules[label]) if label in schedules
                 else optimal_batch_sizes(n, kk, epsilon, delta, composition=composition))
        out[label] = bernoulli_concurrent_sup_error(n, kk, epsilon, delta, rng, runs=runs, mean=config.get("mean", 0.5),
                                                    batch_sizes=sizes, composition=composition)
        out["batch_sizes"][label] = sizes
    out["cpu_seconds"] = time.process_time() - start
    return out


def bandit_trial(config: dict, rng) -> dict:
    """One seed of the concurrent-shuffle regret experiment, in the form ``run_grid`` runs.

    Every protocol serves the same users (common random numbers: one environment seed)
    through :class:`fedbandit.learners.ConcurrentShuffleLinUCB`, on a synthetic single-agent
    instance with independent contexts per run and mean rewards linear in the observed
    features.

    Parameters
    ----------
    config : dict
        ``n`` (users), ``epsilon``, ``delta``, ``runs``, ``dim``, ``n_arms``, ``noise_std``
        (reward noise, also the R of β), optional ``beta_scale`` (default 1), and
        ``protocols``: a list of dicts ``{"label": ..., "protocol": name, **params}``
        (``fedbandit.protocols.create(name, epsilon=, delta=, **params)``; the label
        defaults to the name), for example ``{"label": "concurrent-2", "protocol":
        "concurrent-shuffle", "k": 2}``, ``{"label": "tree", "protocol": "concurrent-shuffle",
        "k": "log"}``, ``{"label": "central", "protocol": "central", "relation": "replace"}``.
    rng : numpy.random.Generator
        Split into the environment's seed (shared by all protocols) and one stream per
        protocol, in list order.

    Returns
    -------
    dict
        label → cumulative regret at n of every run (array (runs,)); ``"curves"``: label →
        mean cumulative regret at ``"checkpoints"``; ``"lam"``: label → λ; ``"batch_sizes"``:
        label → the schedule (None for fixed-batch protocols); ``"accounting"``: label →
        the accounting dict; ``"uniform"``: the regret of playing uniformly at random (per run).
    """
    check_config(config, ("n", "epsilon", "delta", "protocols"))
    n = check_positive_int("n", config["n"], max_value=MAX_STEPS, reason="a run serves n users")
    epsilon = check_epsilon("epsilon", config["epsilon"])
    delta = check_delta("delta", config["delta"])
    runs = check_positive_int("runs", config.get("runs", 1), max_value=MAX_STEPS, reason="runs are simulated side by side")
    dim = check_positive_int("dim", config.get("dim", 3))
    noise_std = check_nonnegative_float("noise_std", config.get("noise_std", 0.1))
    check_positive_int("n_arms", config.get("n_arms", 20))
    check_nonnegative_float("beta_scale", config.get("beta_scale", 1.0))
    specs = config["protocols"]
    if not isinstance(specs, (list, tuple)) or not all(isinstance(sp, dict) and "protocol" in sp for sp in specs):
        raise ValueError(f"protocols must be a list of dicts with a 'protocol' name, got {specs!r}")
    rng = check_rng("rng", rng)
    env_seed, learner_rng = rng.spawn(2)
    checkpoints = np.unique(np.linspace(1, n, 40).astype(int))
    out: dict[str, Any] = {"curves": {}, "checkpoints": checkpoints, "lam": {}, "batch_sizes": {}, "accounting": {}}

    def make_env():
        return SyntheticLinearEnv(
            1, n_arms=int(config.get("n_arms", 20)), dim=dim, n_runs=runs, noise_std=noise_std,
            shared_contexts=False, means_from_raw=False, seed=env_seed,
        )

    # regret of playing uniformly at random, for scale
    out["uniform"] = sum(
        (b.best[:, :, 0] - np.mean(b.means[:, :, 0], axis=-1)).sum(axis=0) for b in make_env().iter_blocks(n)
    )
    for spec, proto_rng in zip(specs, learner_rng.spawn(len(specs))):
        params = {k: v for k, v in spec.items() if k not in ("label", "protocol")}
        name = spec["protocol"]
        label = spec.get("label", name)
        accepted = describe(name).parameters
        params.update({k: v for k, v in (("epsilon", epsilon), ("delta", delta)) if k in accepted})
        learner = ConcurrentShuffleLinUCB(
            create(name, **params), n_users=n, dim=dim, noise_bound=noise_std,
            beta_scale=float(config.get("beta_scale", 1.0)),
        )
        res = learner.run(make_env(), proto_rng)
        out[label] = res.regret[:, -1]
        out["curves"][label] = res.regret[:, checkpoints - 1].mean(axis=0)
        out["lam"][label] = learner.lam
        out["batch_sizes"][label] = res.calibration.get("batch_sizes")
        out["accounting"][label] = res.accounting
    return out

"""The contract every registered protocol keeps, as functions of a protocol name (as dp-accounting's
PrivacyAccountantTest for accountants): ``tests/test_protocol_contract.py`` runs them on every registered
protocol, a plug-in test (``tests/test_plugin_protocol.py``) on the protocol it registers
(ARCHITECTURE.md, "Add a protocol").

For each kind an *exerciser* builds a small setting, drives the protocol's release method and
reports the released values, the exact values and the noise variance the protocol states for
them.  :data:`CONTRACT` lists the checks; a check skips (``pytest.skip``) where it does not apply.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from scipy import stats

from fedbandit.accounting import account
from fedbandit.protocols import ProtocolStateError, available, create, describe  # noqa: F401

#: False-alarm rate of every statistical check in this file (per check).
ALPHA = 1e-4

# Small settings every statistics protocol accepts.
M, D, K, B = 3, 2, 4, 2

#: Protocol parameters for the contract (a generous target; amplification forced small M).
PARAMS = {
    "sdp-amplification": dict(epsilon=0.5, delta=0.1, force=True),
    "sdp-vector-sum": dict(epsilon=2.0, delta=0.1),
    "dp20": dict(epsilon=2.0, delta=0.1),
    "concurrent-shuffle": dict(epsilon=2.0, delta=1e-3, k=2),
    "sequential-vector-sum": dict(epsilon=2.0, delta=0.1, batch_size=2),
}
#: Protocols of users served one at a time (one agent, synchronizing every 4 users).
USER_LEVEL = ("concurrent-shuffle", "sequential-vector-sum")
DEFAULT_PRIVATE = dict(epsilon=2.0, delta=1e-3)


def _params(name):
    info = describe(name)
    if "epsilon" not in info.parameters:
        return {}
    return dict(PARAMS.get(name, DEFAULT_PRIVATE))


def _build(name, **over):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # forced amplification warns; the status says "unproven"
        return create(name, **{**_params(name), **over})


@dataclass
class Exercise:
    released: np.ndarray  # (n_runs, ...) what the server released, flattened per run
    exact: np.ndarray  # the same without privacy
    stated_variance: np.ndarray  # per entry of `released`, the protocol's stated noise variance (broadcastable)


# ---------------------------------------------------------------------------------------
# Exercisers, one per kind
# ---------------------------------------------------------------------------------------


def _statistics_setting(p):
    n_agents = 1 if p.name in USER_LEVEL else M
    batch = 4 if p.name in USER_LEVEL else B
    return dict(n_agents=n_agents, dim=D, n_batches=K, batch_size=batch)


def _statistics_data(setting, n_runs, seed):
    rng = np.random.default_rng(seed)
    Bq, Mq = setting["batch_size"], setting["n_agents"]
    out = []
    for _ in range(setting["n_batches"]):
        x = rng.standard_normal((Bq, n_runs, Mq, D))
        x /= np.linalg.norm(x, axis=-1, keepdims=True) * rng.uniform(1.0, 1.5, (Bq, n_runs, Mq, 1))
        y = rng.uniform(-1, 1, (Bq, n_runs, Mq))
        out.append((x, y))
    return out


def exercise_statistics(p, n_runs, rng_seed, data_seed=0, setting=None):
    setting = setting or _statistics_setting(p)
    p.configure(**setting)
    p.reset(n_runs=n_runs, rng=np.random.default_rng(rng_seed))
    rel, ex = [], []
    tb, tg = 0.0, 0.0
    for x, y in _statistics_data(setting, n_runs, data_seed):
        b = np.einsum("brmd,brm->rmd", x, y)
        g = np.einsum("brmi,brmj->rmij", x, x)
        tb, tg = tb + b.sum(1), tg + g.sum(1)
        ub, ug = p.synchronize(b, g, users=(x, y) if p.needs_user_data else None)
        iu = np.triu_indices(D)
        rel.append(np.concatenate([ub, ug[:, iu[0], iu[1]]], axis=1))
        ex.append(np.concatenate([tb, tg[:, iu[0], iu[1]]], axis=1))
    k = np.arange(1, setting["n_batches"] + 1)
    var = np.array([p.prefix_noise_variance(int(kk)) for kk in k])
    D_ = rel[0].shape[1]
    return Exercise(np.stack(rel, 1), np.stack(ex, 1), np.broadcast_to(var[None, :, None], (1, len(k), D_)))


COUNTER_SETTING = dict(n_agents=2, n_arms=3, horizon=16, sensitivity=1.0)


def exercise_counter(p, n_runs, rng_seed, data_seed=0):
    """Every stream gets one item per step: released running sums, exact sums, stated variance per step."""
    p.configure(**COUNTER_SETTING)
    p.reset(n_runs=n_runs, rng=np.random.default_rng(rng_seed))
    n_streams = n_runs * COUNTER_SETTING["n_agents"] * COUNTER_SETTING["n_arms"]
    idx = np.arange(n_streams)
    data = np.random.default_rng(data_seed).uniform(0, 1, (COUNTER_SETTING["horizon"], n_streams))
    rel = np.stack([p.release(idx, x) for x in data], axis=1)  # (streams, T)
    ex = np.cumsum(data, axis=0).T
    var = np.array([p.noise_variance(n) for n in range(1, COUNTER_SETTING["horizon"] + 1)], dtype=float)
    return Exercise(rel[:, :, None], ex[:, :, None], var[None, :, None])


SUM_SETTING = dict(n_parties=5, dim=4, n_rounds=3, clip=1.0)


def exercise_sum(p, n_runs, rng_seed, data_seed=0):
    """One private vector sum per round: released sums, exact (clipped) sums, stated variance."""
    from fedbandit.mechanisms.ddg import clip_l2

    p.configure(**SUM_SETTING)
    p.reset(n_runs=n_runs, rng=np.random.default_rng(rng_seed))
    rng = np.random.default_rng(data_seed)
    rel, ex = [], []
    for _ in range(SUM_SETTING["n_rounds"]):
        v = rng.normal(0, 0.6, (n_runs, SUM_SETTING["n_parties"], SUM_SETTING["dim"]))
        rel.append(p.aggregate(v))
        ex.append((v if p.name == "sum-non-private" else clip_l2(v, SUM_SETTING["clip"])).sum(axis=1))
    var = np.full((1, SUM_SETTING["n_rounds"], 1), p.noise_std() ** 2)
    return Exercise(np.stack(rel, 1), np.stack(ex, 1), var)


EXERCISERS = {"statistics": exercise_statistics, "counter": exercise_counter, "sum": exercise_sum}


def _configured(name):
    p = _build(name)
    kind = _kind(name)
    if kind == "statistics":
        return p.configure(**_statistics_setting(p))
    if kind == "counter":
        return p.configure(**COUNTER_SETTING)
    return p.configure(**SUM_SETTING)


def _kind(name):
    return describe(name).kind


def private(name) -> bool:
    """Whether protocol ``name`` takes a target (its factory has ``epsilon``)."""
    return "epsilon" in describe(name).parameters


def _exercise(name, n_runs=4, rng_seed=1, **over):
    kind = _kind(name)
    if kind not in EXERCISERS:
        pytest.skip(f"no exerciser for kind {kind!r} yet")
    return EXERCISERS[kind](_build(name, **over), n_runs, rng_seed)


# ---------------------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------------------


def check_parts_are_objects_and_described(name):
    from fedbandit.protocols import Analyzer, Intermediary, Randomizer

    p = _build(name)
    assert isinstance(p.randomizer, Randomizer)
    assert isinstance(p.intermediary, Intermediary)
    assert isinstance(p.analyzer, Analyzer)
    parts = p.parts()
    assert set(parts) == {"R", "S", "A"} and all(isinstance(v, str) and v for v in parts.values())
    assert p.name == name


def check_lifecycle_errors(name):
    p = _build(name)
    with pytest.raises(ProtocolStateError, match="configure"):
        p.reset(n_runs=1, rng=np.random.default_rng(0))
    with pytest.raises(ProtocolStateError, match="configure"):
        p.accounting()
    p = _configured(name)
    release = {
        "statistics": lambda: p.synchronize(np.zeros((1, p.n_agents, D)), np.zeros((1, p.n_agents, D, D))),
        "counter": lambda: p.release(np.arange(2), np.zeros(2)),
        "sum": lambda: p.aggregate(np.zeros((SUM_SETTING["n_parties"], SUM_SETTING["dim"]))),
    }[_kind(name)]
    with pytest.raises(ProtocolStateError, match="reset"):
        release()
    with pytest.raises(TypeError, match="rng"):
        p.reset(n_runs=1, rng=None)


def check_shapes_and_finite(name):
    e = _exercise(name)
    assert e.released.shape == e.exact.shape and np.all(np.isfinite(e.released))


def check_same_generator_same_output(name):
    a = _exercise(name, rng_seed=5).released
    b = _exercise(name, rng_seed=5).released
    np.testing.assert_array_equal(a, b)
    if private(name):
        c = _exercise(name, rng_seed=6).released
        assert not np.array_equal(a, c), "a private protocol's output did not depend on its generator"


def check_non_private_limit(name):
    """With ε huge the noise vanishes (up to the rounding of discrete protocols)."""
    if not private(name):
        pytest.skip(f"{name}: not private (no noise to vanish)")
    over = dict(epsilon=1e6, delta=0.4) if name not in ("sdp-vector-sum",) else dict(epsilon=15.0, delta=0.4)
    if _kind(name) == "counter":
        over = dict(epsilon=1e9)
    if name == "sdp-amplification":
        over["variant"] = "ideal"
    if name == "dp20":
        over = dict(epsilon=1e6, delta=0.4)
    if name in ("sdp-vector-sum",) + USER_LEVEL:
        pytest.skip(f"{name}: its noise does not vanish within its parameter range (ε ≤ 15 per node)")
    if name == "sum-binomial-secagg":
        pytest.skip(f"{name}: cpSGD's Thm. 1 needs Np(1-p) >= 23 log(10d/δ), a floor on the noise whatever ε")
    e = _exercise(name, **over)
    scale = np.abs(e.exact).max()
    np.testing.assert_allclose(e.released, e.exact, atol=2e-3 * max(scale, 1.0))


def check_measured_noise_variance_matches_stated(name):
    """Statistical: sample variance of (released − exact) against the stated variance, per batch k.

    R = 2000 runs × D' coordinates pooled per k; under the null the sample variance times
    its degrees of freedom over σ² is χ²-distributed; the test fails outside the two-sided
    χ² interval of level ALPHA (Bonferroni over the K batches).  Rounding adds variance the
    discrete protocols bound separately, so for them only the upper side counts the stated
    privacy variance plus their rounding bound.
    """
    e = _exercise(name, n_runs=2000, rng_seed=2)
    err = e.released - e.exact  # (R, K, D')
    stated = np.broadcast_to(e.stated_variance, (1,) + err.shape[1:])[0, :, 0]  # per k
    if np.all(stated == 0):
        assert np.all(err == 0) or np.abs(err).max() < 1e-9
        return
    discrete = name in ("ddg-secagg", "ddg-shuffle", "sdp-vector-sum", "sum-ddg-secagg") + USER_LEVEL
    for k in range(err.shape[1]):
        x = err[:, k].ravel()
        dof = x.size
        v = np.mean(x**2)  # the mean is 0 for unbiased protocols
        lo = stats.chi2.ppf(ALPHA / (2 * err.shape[1]), dof) / dof
        hi = stats.chi2.ppf(1 - ALPHA / (2 * err.shape[1]), dof) / dof
        if discrete:
            # stated = privacy noise; rounding may add at most its bound (checked loosely here)
            assert v <= stated[k] * hi * 1.5 + 1e-9, (k, v, stated[k])
            assert v >= stated[k] * lo * 0.5, (k, v, stated[k])
        else:
            assert stated[k] * lo <= v <= stated[k] * hi, (name, k, v / stated[k])


def check_accounting_round_trip(name):
    p = _configured(name)
    a = p.accounting()
    assert a.status in ("verified", "claimed", "unproven", "invalid", "none")
    assert a.relation == p.relation
    if p.private:
        assert a.target_epsilon == p.target_epsilon and a.target_delta == p.target_delta
        if a.status in ("verified", "claimed"):
            assert a.epsilon <= a.target_epsilon * (1 + 1e-6)
    else:
        assert a.status == "none" and a.epsilon == math.inf
    other = "replace" if p.relation == "add-remove" else "add-remove"
    b = p.accounting(relation=other)
    assert b.relation == other
    if a.status == "verified" and b.status in ("verified", "invalid") and math.isfinite(b.epsilon):
        assert b.epsilon >= a.epsilon * (1 - 1e-9) if other == "replace" else b.epsilon <= a.epsilon * (1 + 1e-9)
    # the event accounts to the same result
    c = account(p.event(), target_epsilon=p.target_epsilon, target_delta=p.target_delta, model=p.model,
                relation=p.relation)
    assert c.status == a.status and (c.epsilon == a.epsilon or (math.isnan(c.epsilon) and math.isnan(a.epsilon)))


#: Every per-protocol check of the contract.
CONTRACT = (check_parts_are_objects_and_described, check_lifecycle_errors, check_shapes_and_finite,
            check_same_generator_same_output, check_non_private_limit, check_measured_noise_variance_matches_stated,
            check_accounting_round_trip)

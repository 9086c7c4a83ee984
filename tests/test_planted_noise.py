"""A quarter-noise bug planted in each protocol family's code is caught by the audits.

The bug is planted in the implementation (:func:`fedbandit.audit.planted_noise`: the
randomizers' own noise draws return a quarter of their noise; no declared σ, calibration or
claim changes).  Each audit must catch it: its noise-law check rejects (tight audits: KS at
α = 1e-3) or its audited lower bound exceeds the claim.  The unpatched code must pass (the
false-alarm side): each tight audit's law check has false-alarm rate 1e-3, and each audit's
bound exceeds a true claim with probability at most 1 − confidence; all seeded.
"""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

import fedbandit.experiments.synthesis as S
import fedbandit.mechanisms.tree as tree
from fedbandit.audit import audit_end_to_end, end_to_end_specs, planted_noise, tight_audit
from fedbandit.audit.tight import LAW_ALPHA
from fedbandit.protocols import create

QUARTER = 0.25
CHECK_RUNS = 300  # tight audits raise it to MIN_CHECK_RUNS = 1000; the power below is computed at 300
TIGHT_TRIALS = 50_000
E2E_TRIALS = 1500


def test_the_law_check_has_power_against_a_quarter_noise_bug():
    # KS distance between N(0, 1) (declared) and N(0, 1/16) (a quarter of the noise), written out
    x = np.linspace(0.0, 3.0, 30001)
    gap = np.abs(stats.norm.cdf(x) - stats.norm.cdf(x / QUARTER))
    i = int(np.argmax(gap))
    assert 0.28 < gap[i] < 0.30
    # power lower bound at CHECK_RUNS runs: the empirical cdf at the sup point alone, Bin(n, Φ(x*/f))/n,
    # already leaves the acceptance band |F_n − Φ| ≤ critical value with probability > 0.999
    n = CHECK_RUNS
    crit = stats.kstwo.isf(LAW_ALPHA, n)
    p_true, p_declared = stats.norm.cdf(x[i] / QUARTER), stats.norm.cdf(x[i])
    lo, hi = math.ceil(n * (p_declared - crit)), math.floor(n * (p_declared + crit))
    power = 1.0 - (stats.binom.cdf(hi, n, p_true) - stats.binom.cdf(lo - 1, n, p_true))
    assert LAW_ALPHA == 1e-3 and power > 0.999


def _tight_protocol(name):
    p = create(name, epsilon=2.0, delta=1e-5)
    return p.configure(n_agents=3, dim=2, n_batches=8, batch_size=5)


@pytest.mark.parametrize("name", ["central", "silo-ldp", "gaussian-secagg", "sdp-amplification", "ddg-secagg",
                                  "ddg-shuffle"])
def test_tight_audit_catches_a_planted_quarter_noise_bug(name):
    if name == "sdp-amplification":
        p = create(name, epsilon=2.0, delta=1e-5, force=True, variant="ideal")
        p.configure(n_agents=3, dim=2, n_batches=8, batch_size=5)
    else:
        p = _tight_protocol(name)
    kw = dict(rng=np.random.default_rng(11), check_runs=CHECK_RUNS, broken_factor=None)
    good = tight_audit(p, TIGHT_TRIALS, **kw)
    assert not good.noise_law_rejected and good.consistent, good.attack
    assert 0.8 < good.noise_ratio < 1.2
    with planted_noise(QUARTER):
        bad = tight_audit(p, TIGHT_TRIALS, **kw)
    assert bad.noise_law_rejected and not bad.consistent, bad.attack
    assert 0.2 < bad.noise_ratio < 0.3  # measured from what the code released
    assert bad.epsilon_lower > good.epsilon_lower  # the trials are drawn at the code's own noise


def test_tight_audit_catches_a_bug_inside_the_tree_randomizer_release():
    # the auditor's patch: TreeRandomizer's own noise draw (not the shared sampler) at a quarter
    p = _tight_protocol("central")
    orig = tree.TreeRandomizer._noise
    tree.TreeRandomizer._noise = lambda self, rng, shape: QUARTER * orig(self, rng, shape)
    try:
        bad = tight_audit(p, 200_000, rng=np.random.default_rng(1), check_runs=1000)
    finally:
        tree.TreeRandomizer._noise = orig
    assert bad.noise_law_rejected and bad.epsilon_lower > bad.claimed_epsilon
    good = tight_audit(p, 200_000, rng=np.random.default_rng(1), check_runs=1000)
    assert good.consistent and good.power_shown and good.broken_result.epsilon_lower > good.claimed_epsilon
    assert "planted" in good.broken


_E2E = ["fixed-batch/silo-ldp", "fixed-batch/central", "fixed-batch/gaussian-secagg", "fixed-batch/ddg-secagg",
        "mean estimation/sum-central-gaussian", "mean estimation/sum-ddg-secagg", "stream/counter-hybrid",
        "stream/counter-binary", "stream/counter-laplace", "master-worker/counter-hybrid",
        "stream/concurrent-shuffle (k = 1)", "concurrent-linucb/concurrent-shuffle (k = 1)"]


@pytest.mark.parametrize("name", _E2E)
def test_end_to_end_audit_catches_a_planted_quarter_noise_bug(name):
    spec = {s.name: s for s in end_to_end_specs(epsilon=1.0)}[name]
    good = audit_end_to_end(spec, E2E_TRIALS, rng=np.random.default_rng(3), power=False)
    assert good.consistent
    with planted_noise(QUARTER):
        bad = audit_end_to_end(spec, E2E_TRIALS, rng=np.random.default_rng(3), power=False)
    assert bad.epsilon_lower > bad.claimed_epsilon, (bad.epsilon_lower, bad.claimed_epsilon)


TINY = dict(instance="synthetic", M=3, T=40, B=10, K=6, d=3, runs=2, env_seed=0, epsilon=4.0, delta=1e-5,
            param_bound=1.0, n_checkpoints=5)


@pytest.mark.parametrize("key,epsilon", [("fixed-batch/central", 4.0), ("fixed-batch/silo-ldp", 4.0),
                                         ("fixed-batch/ddg-secagg", 4.0), ("fixed-batch/sdp-amplification", 4.0),
                                         ("concurrent-linucb/concurrent-shuffle-k1", 1.0)])
def test_chapter_6_audit_catches_a_planted_quarter_noise_bug(key, epsilon):
    cfg = dict(S.model_config(TINY, S.model(key)), epsilon=epsilon, n_trials=20_000, e2e_trials=E2E_TRIALS,
               check_runs=CHECK_RUNS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        good = S.audit_side_by_side(cfg, np.random.default_rng(2))
        with planted_noise(QUARTER):
            bad = S.audit_side_by_side(cfg, np.random.default_rng(2))
    assert good["consistent"] and not good["noise_law_rejected"]
    assert bad["noise_law_rejected"] or bad["epsilon_lower"] > bad["claimed_epsilon"], bad


def test_planted_noise_patches_the_code_and_restores_it():
    p = _tight_protocol("central")
    sigma = p.analyzer.sigma
    rng = np.random.default_rng(0)
    with planted_noise(QUARTER, sites=("tree",)):
        z = tree.draw_noise(rng, (20000,), 1.0)
        assert p.analyzer.sigma == sigma  # the declaration is untouched
    assert 0.24 < z.std() < 0.26
    assert 0.98 < tree.draw_noise(rng, (20000,), 1.0).std() < 1.02  # restored
    with pytest.raises(ValueError, match="sites"):
        with planted_noise(0.5, sites=("nope",)):
            pass
    with pytest.raises(ValueError, match="factor"):
        with planted_noise(math.inf):
            pass

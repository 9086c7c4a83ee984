"""A quarter-noise bug planted in each protocol's code is caught by every audit path that applies.

The bug is planted in the implementation (:func:`fedbandit.audit.planted_noise`: the
randomizers' own noise draws return a quarter of their noise; no declared σ, calibration or
claim changes).  For EVERY protocol of :func:`fedbandit.protocols.available` that adds noise
(:data:`E2E_OF` and :data:`NO_NOISE` cover the registry, checked), each audit path must
catch it -- its noise-law check rejects or its audited lower bound exceeds the claim:

* the tight audit (the Gaussian and discrete-Gaussian trees: :data:`TIGHT`), KS law check;
* the end-to-end audit (:data:`E2E_OF`: one spec per protocol), whose noise-law check
  (released − exact against the declared variance) catches the mechanisms calibrated far
  above their claims (binomial sum, vector sums, DP20), where no attack could;
* chapter 6's ``audit_side_by_side`` for the models chapter 6 audits (:data:`CHAPTER_6`).

The unpatched code must pass.  False-alarm rate of the whole file (union bound over its
unpatched checks, all seeded): the unpatched audits run at confidence 0.999, so each bound
exceeds a true claim with probability ≤ 1e-3 (tight: ≤ 2e-3, the scale bound included) and
each law check rejects with probability ≤ α = 1e-3 (the end-to-end check's mean part is
Welch's t at 1000 runs: approximate): 8 tight audits (3e-3 each), 23 end-to-end audits
(2e-3 each), 9 chapter-6 audits (at most 3e-3 each) and the tree-release check (3e-3): at
most 0.024 + 0.046 + 0.027 + 0.003 = 0.100.
"""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

import fedbandit.experiments.synthesis as S
import fedbandit.mechanisms.tree as tree
from fedbandit.audit import audit_end_to_end, end_to_end_specs, planted_noise, tight_audit
from fedbandit.audit.end_to_end import LAW_CHECK_RUNS
from fedbandit.audit.tight import LAW_ALPHA
from fedbandit.protocols import available, create

QUARTER = 0.25
CHECK_RUNS = 300  # tight audits raise it to MIN_CHECK_RUNS = 1000; the power below is computed at 300
TIGHT_TRIALS = 50_000
E2E_TRIALS = 1500
SURE = 0.999  # confidence of the unpatched audits (false-alarm side)


def test_the_law_check_has_power_against_a_quarter_noise_bug():
    # KS distance between N(0, 1) (declared) and N(0, 1/16) (a quarter of the noise), written out
    x = np.linspace(0.0, 3.0, 30001)
    gap = np.abs(stats.norm.cdf(x) - stats.norm.cdf(x / QUARTER))
    i = int(np.argmax(gap))
    assert 0.28 < gap[i] < 0.30
    # power lower bound at CHECK_RUNS runs: the empirical cdf at the sup point alone, Bin(n, Φ(x*/f))/n,
    # already leaves the acceptance band |F_n − Φ| ≤ critical value with probability > 0.999; the
    # level is Bonferroni's α/(κ' + 1): the sum and each of the κ' = 4 releases of 8 batches tested
    n = CHECK_RUNS
    crit = stats.kstwo.isf(LAW_ALPHA / 5, n)
    p_true, p_declared = stats.norm.cdf(x[i] / QUARTER), stats.norm.cdf(x[i])
    lo, hi = math.ceil(n * (p_declared - crit)), math.floor(n * (p_declared + crit))
    power = 1.0 - (stats.binom.cdf(hi, n, p_true) - stats.binom.cdf(lo - 1, n, p_true))
    assert LAW_ALPHA == 1e-3 and power > 0.999


def test_the_end_to_end_law_check_has_power_against_a_quarter_noise_bug():
    # per run X = Σ_j r_j²/v_j over F columns, E[X] = F under the declared law, E[X²] ≤ κF²;
    # Maurer: P(mean X ≤ F(1 − u)) ≤ exp(−n u²/(2κ)), so the test rejects at α when
    # mean X < F(1 − sqrt(2κ ln(1/α)/n)).  At n = 1000, κ = 6: below 0.712 F.
    n, kappa = LAW_CHECK_RUNS, 6.0
    u = math.sqrt(2 * kappa * math.log(1 / LAW_ALPHA) / n)
    assert n == 1000 and 0.70 < 1 - u < 0.72
    # a quarter of the noise: E[X] = F/16; Chebyshev with Var(mean X) ≤ κF²/(16² n) bounds the miss
    gap = (1 - u) - 1 / 16
    miss = (kappa / 16**2 / n) / gap**2
    assert miss < 1e-4


def _tight_protocol(name):
    p = create(name, epsilon=2.0, delta=1e-5)
    return p.configure(n_agents=3, dim=2, n_batches=8, batch_size=5)


#: The protocols the tight audit applies to (Gaussian and discrete-Gaussian trees, central tree).
TIGHT = ["central", "silo-ldp", "gaussian-secagg", "sdp-amplification", "ddg-secagg", "ddg-shuffle", "dp20"]


@pytest.mark.parametrize("name", TIGHT)
def test_tight_audit_catches_a_planted_quarter_noise_bug(name):
    if name == "sdp-amplification":
        p = create(name, epsilon=2.0, delta=1e-5, force=True, variant="ideal")
        p.configure(n_agents=3, dim=2, n_batches=8, batch_size=5)
    else:
        p = _tight_protocol(name)
    kw = dict(rng=np.random.default_rng(11), check_runs=CHECK_RUNS, broken_factor=None)
    good = tight_audit(p, TIGHT_TRIALS, confidence=SURE, **kw)
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
    good = tight_audit(p, 200_000, rng=np.random.default_rng(1), check_runs=1000, confidence=SURE)
    assert good.consistent and good.power_shown and good.broken_result.epsilon_lower > good.claimed_epsilon
    assert "planted" in good.broken


#: One end-to-end audit per noisy protocol (the protocol alone where it has a stream or sum of its own).
E2E_OF = {
    "central": "fixed-batch/central", "silo-ldp": "fixed-batch/silo-ldp", "sdp-amplification":
    "fixed-batch/sdp-amplification", "sdp-vector-sum": "fixed-batch/sdp-vector-sum", "ddg-secagg":
    "fixed-batch/ddg-secagg", "gaussian-secagg": "fixed-batch/gaussian-secagg", "ddg-shuffle": "fixed-batch/ddg-shuffle",
    "dp20": "feducb/dp20 (fixed, B = 25)", "concurrent-shuffle": "stream/concurrent-shuffle (k = 1)",
    "sequential-vector-sum": "stream/sequential-vector-sum", "counter-hybrid": "stream/counter-hybrid",
    "counter-binary": "stream/counter-binary", "counter-laplace": "stream/counter-laplace",
    "sum-central-gaussian": "mean estimation/sum-central-gaussian", "sum-binomial-secagg":
    "mean estimation/sum-binomial-secagg", "sum-ddg-secagg": "mean estimation/sum-ddg-secagg",
    "silo-ldp-mf": "fixed-batch/silo-ldp-mf", "central-mf": "fixed-batch/central-mf",
    "silo-ldp-mf-banded": "fixed-batch/silo-ldp-mf-banded", "central-mf-banded": "fixed-batch/central-mf-banded",
    "silo-ldp-honaker": "fixed-batch/silo-ldp-honaker", "central-honaker": "fixed-batch/central-honaker",
}
#: More specs of the same protocols through other learners (the law check sees their first release).
E2E_MORE = ["fixed-batch/dp20", "concurrent-linucb/concurrent-shuffle (k = 1)", "federated-learning/sum-ddg-secagg"]
#: Protocols without noise: nothing to plant.
NO_NOISE = {"non-private", "counter-exact", "sum-non-private"}
#: Randomized response: a quarter-noise bug (flip probability p/16) shows in the counts' mean, their
#: variance then includes the rounding (the measured ratio is not a quarter).
RR = {"stream/concurrent-shuffle (k = 1)", "concurrent-linucb/concurrent-shuffle (k = 1)"}


def test_every_protocol_is_covered():
    assert set(E2E_OF) | NO_NOISE == set(available())
    assert not set(E2E_OF) & NO_NOISE
    for name in NO_NOISE:
        assert not create(name).private


@pytest.mark.parametrize("name", list(E2E_OF.values()) + E2E_MORE)
def test_end_to_end_audit_catches_a_planted_quarter_noise_bug(name):
    spec = {s.name: s for s in end_to_end_specs(epsilon=1.0)}[name]
    trials = 300  # the law check catches the bug: few attack trials
    good = audit_end_to_end(spec, trials, rng=np.random.default_rng(3), power=False, confidence=SURE)
    assert good.consistent, (good.epsilon_lower, good.claimed_epsilon, good.attack)
    assert good.check_runs == LAW_CHECK_RUNS and 0.9 < good.noise_ratio < 1.1, good.attack
    with planted_noise(QUARTER):
        bad = audit_end_to_end(spec, trials, rng=np.random.default_rng(3), power=False)
    assert bad.noise_law_rejected and not bad.consistent, bad.attack
    if name not in RR:
        assert 0.2 < bad.noise_ratio < 0.3, bad.attack


TINY = dict(instance="synthetic", M=3, T=40, B=10, K=6, d=3, runs=2, env_seed=0, epsilon=4.0, delta=1e-5,
            param_bound=1.0, n_checkpoints=5)


#: Chapter 6's audited models with noise (its DP20 row is the schedule attack, which refutes the
#: unpatched code too: DP20 is not private, so a planted bug has nothing to add there).
CHAPTER_6 = [("fixed-batch/central", 4.0), ("super-agent/central", 4.0), ("concurrent-linucb/central", 4.0),
             ("fixed-batch/silo-ldp", 4.0), ("fixed-batch/ddg-secagg", 4.0), ("fixed-batch/sdp-amplification", 4.0),
             ("fixed-batch/sdp-vector-sum", 4.0), ("concurrent-linucb/concurrent-shuffle-k1", 1.0),
             ("concurrent-linucb/concurrent-shuffle-klog", 1.0)]


def test_chapter_6_list_is_every_noisy_model():
    keys = {k for k, _ in CHAPTER_6}
    noisy = {m.key for m in S.MODELS if m.private and m.learner != "independent" and m.protocol != "dp20"}
    assert keys == noisy


@pytest.mark.parametrize("key,epsilon", CHAPTER_6)
def test_chapter_6_audit_catches_a_planted_quarter_noise_bug(key, epsilon):
    cfg = dict(S.model_config(TINY, S.model(key)), epsilon=epsilon, n_trials=20_000, e2e_trials=E2E_TRIALS,
               check_runs=CHECK_RUNS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        good = S.audit_side_by_side(dict(cfg, confidence=SURE), np.random.default_rng(2))
        with planted_noise(QUARTER):
            bad = S.audit_side_by_side(cfg, np.random.default_rng(2))
    assert good["consistent"] and not good["noise_law_rejected"]
    assert bad["noise_law_rejected"] or bad["epsilon_lower"] > bad["claimed_epsilon"], bad


def test_tight_audit_catches_a_dropped_tree_node():
    # the bug: the tree randomizer releases node 2 (level 1) without its noise, every other node
    # with it; the noise of the sum of the κ' = 4 attacked releases only drops to 3/4 of its variance
    # (KS distance 0.03 < the critical value), the per-release check sees node 2 exact
    p = _tight_protocol("silo-ldp")
    good = tight_audit(p, TIGHT_TRIALS, rng=np.random.default_rng(4), check_runs=CHECK_RUNS, broken_factor=None,
                       confidence=SURE)
    assert good.consistent, good.attack
    with planted_noise(0.0, sites="tree-node"):
        bad = tight_audit(p, TIGHT_TRIALS, rng=np.random.default_rng(4), check_runs=CHECK_RUNS, broken_factor=None)
    assert bad.noise_law_rejected and not bad.consistent, bad.attack
    assert 0.8 < bad.noise_ratio < 0.95  # sqrt(3/4) = 0.866: the sum alone hides it


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


@pytest.mark.parametrize("name", TIGHT)
def test_tight_audit_power_check_reusing_the_noise_free_views_is_the_audit_recomputing_them(name, monkeypatch):
    # the power check's TightAudit takes the correct variant's noise-free views where their feed drew nothing
    # (a Gaussian or central tree at σ = 0, no shuffle) and takes from rng what the feed would (two spawned
    # streams): every field of the report but its timing is the one of recomputing them, bit for bit
    import fedbandit.audit.tight as tight_module

    if name == "sdp-amplification":
        p = create(name, epsilon=2.0, delta=1e-5, force=True, variant="ideal")
        p.configure(n_agents=3, dim=2, n_batches=8, batch_size=5)
    else:
        p = _tight_protocol(name)

    def report():
        d = tight_audit(p, 20_000, rng=np.random.default_rng(5), check_runs=CHECK_RUNS).as_dict()
        return {k: v for k, v in d.items() if k not in ("seconds", "cpu_seconds")}

    got = report()
    monkeypatch.setattr(tight_module, "_REUSE_QUIET", False)
    want = report()
    assert got.keys() == want.keys()
    for k in want:
        same = got[k] == want[k] or (isinstance(want[k], float) and math.isnan(want[k]) and math.isnan(got[k]))
        assert same, (k, got[k], want[k])


def test_the_noise_free_views_are_reused_only_where_their_feed_drew_nothing():
    import fedbandit.audit.tight as tight_module

    for name, reused in (("central", True), ("silo-ldp", True), ("ddg-secagg", False)):
        ta = tight_module.TightAudit(_tight_protocol(name), np.random.default_rng(0), check_runs=1000)
        assert (ta.quiet_views is not None) == reused, name
    p = create("sdp-amplification", epsilon=2.0, delta=1e-5, force=True, variant="ideal")
    p.configure(n_agents=3, dim=2, n_batches=8, batch_size=5)
    assert tight_module.TightAudit(p, np.random.default_rng(0), check_runs=1000).quiet_views is None  # shuffled


@pytest.mark.parametrize("slack", [50.0, 1.0, 0.3])
def test_ddg_trials_rounding_of_copies_is_the_conditional_rounding_of_the_broadcast(slack):
    # the DDG trials round c copies of one scaled record, a broadcast view: conditional_randomized_round takes its
    # floor and fraction once; the coins and the re-roundings (a bound just above ‖u‖ forces many) are the same
    # draws in the same order as for the copies written out
    from fedbandit.mechanisms.ddg import conditional_randomized_round

    u = np.random.default_rng(3).normal(0.0, 4.0, 37)
    bound = float(np.linalg.norm(u)) + slack
    for c in (1, 5, 2_000):
        got_rng, want_rng = np.random.default_rng(8), np.random.default_rng(8)
        view = np.broadcast_to(u, (c, u.size))
        assert c == 1 or view.strides[0] == 0
        got = conditional_randomized_round(view, bound, got_rng)
        want = conditional_randomized_round(np.ascontiguousarray(view), bound, want_rng)  # the copies, materialized
        assert got.dtype == want.dtype and np.array_equal(got, want)
        assert got_rng.bit_generator.state == want_rng.bit_generator.state  # the same draws, no more
        # and the rounding written out: floor plus a coin below the fraction, redrawn for a vector over the bound
        plain_rng = np.random.default_rng(8)
        plain = np.floor(u).astype(np.int64) + (plain_rng.random((c, u.size)) < u - np.floor(u))
        over = np.flatnonzero((plain**2).sum(axis=1) > math.floor(bound * bound * (1 - 1e-12)))
        while over.size:
            plain[over] = np.floor(u).astype(np.int64) + (plain_rng.random((over.size, u.size)) < u - np.floor(u))
            over = over[(plain[over] ** 2).sum(axis=1) > math.floor(bound * bound * (1 - 1e-12))]
        assert np.array_equal(got, plain)

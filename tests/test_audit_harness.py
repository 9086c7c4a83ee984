"""Tests of the audit harness: taps, noise-scaling hooks, fitted attacks, tight audits.

Statistical tests use fixed seeds; each Clopper–Pearson bound holds with the stated
confidence, so an "audited ≤ claimed" assertion on a correct mechanism fails with
probability at most 1 − confidence (here 1 %) per audit were the seed random.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedbandit.audit import audit_epsilon_split, planted_noise, tight_audit
from fedbandit.audit.broken import noise_scale_of, scale_noise_in_place, with_noise_scale
from fedbandit.audit.epsilon import select_threshold
from fedbandit.audit.harness import KnownProjection, LearnedProjection, claim_of
from fedbandit.audit.tight import TightAudit, target_records
from fedbandit.audit.views import nodes_from_prefixes, tapped, tree_nodes_containing
from fedbandit.protocols import create

CONF = 0.99


def _configured(name, M=4, d=2, K=8, B=3, **kw):
    p = create(name, **kw)
    return p.configure(n_agents=M, dim=d, n_batches=K, batch_size=B)


# -- views ---------------------------------------------------------------------------------


def test_tree_nodes_and_prefix_inversion():
    assert tree_nodes_containing(1, 8) == [1, 2, 4, 8]
    assert tree_nodes_containing(1, 100) == [1, 2, 4, 8, 16, 32, 64]
    assert tree_nodes_containing(3, 8) == [3, 4, 8]
    assert tree_nodes_containing(5, 6) == [5, 6]
    rng = np.random.default_rng(0)
    nodes = rng.standard_normal((13, 2, 3))
    # prefix k = sum of the latest node at every set bit of k
    latest, pref = {}, []
    for k in range(1, 14):
        latest[(k & -k).bit_length() - 1] = nodes[k - 1]
        pref.append(sum(latest[j] for j in range(k.bit_length()) if k >> j & 1))
    np.testing.assert_allclose(nodes_from_prefixes(np.stack(pref)), nodes, atol=1e-12)


@pytest.mark.parametrize("name,view", [("silo-ldp", "messages"), ("sdp-amplification", "multiset"),
                                       ("gaussian-secagg", "sum")])
def test_tap_records_what_the_server_receives(name, view):
    kw = dict(epsilon=1.0, delta=1e-5) | ({"force": True} if name == "sdp-amplification" else {})
    with pytest.warns() if name == "sdp-amplification" else _nullcontext():
        p = _configured(name, **kw)
    t, tap, rec = tapped(p)
    assert t is not p and tap.view == view and t.intermediary is tap
    t.reset(n_runs=5, rng=np.random.default_rng(1))
    bias, gram = np.zeros((5, 4, 2)), np.zeros((5, 4, 2, 2))
    out = t.synchronize(bias, gram)
    assert len(tap.records) == 1 and len(rec.records) == 1
    np.testing.assert_array_equal(rec.records[0][0], out[0])
    shape = (5, 4, 5) if view != "sum" else (5, 5)
    assert tap.records[0].shape == shape
    # the original protocol is untouched
    assert not hasattr(p, "_audit_recorder") and type(p).__name__ == "StatisticsProtocol"


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


# -- broken variants ------------------------------------------------------------------------


@pytest.mark.parametrize("name,attr", [("silo-ldp", "sigma0"), ("central", "sigma"), ("gaussian-secagg", "sigma0"),
                                       ("ddg-secagg", "sigma0")])
def test_noise_scale_hook_scales_after_calibration(name, attr):
    p = _configured(name, epsilon=1.0, delta=1e-5)
    q = with_noise_scale(create(name, epsilon=1.0, delta=1e-5), 0.25)
    q.configure(n_agents=4, dim=2, n_batches=8, batch_size=3)
    part = p.analyzer if name == "central" else p.randomizer
    qpart = q.analyzer if name == "central" else q.randomizer
    assert math.isclose(getattr(qpart, attr), 0.25 * getattr(part, attr), rel_tol=1e-12)
    assert q.target_epsilon == p.target_epsilon and noise_scale_of(q) == 0.25 and noise_scale_of(p) == 1.0
    assert isinstance(q, type(p))
    # the copy's own accounting is honest: four times less noise is not (1, 1e-5)-private
    assert q.accounting().status == "invalid" and p.accounting().status == "verified"
    # in place, on a configured protocol (the learner keeps its λ and β)
    r = scale_noise_in_place(_configured(name, epsilon=1.0, delta=1e-5), 0.5)
    rpart = r.analyzer if name == "central" else r.randomizer
    assert math.isclose(getattr(rpart, attr), 0.5 * getattr(part, attr), rel_tol=1e-12)


def test_noise_scale_hook_on_counters_and_sums_changes_the_noise():
    rng = np.random.default_rng(0)
    c = create("counter-laplace", epsilon=1.0).configure(n_agents=1, n_arms=1, horizon=10)
    q = with_noise_scale(create("counter-laplace", epsilon=1.0), 0.25).configure(n_agents=1, n_arms=1, horizon=10)
    c.reset(n_runs=20_000, rng=np.random.default_rng(1))
    q.reset(n_runs=20_000, rng=np.random.default_rng(1))
    idx = np.arange(20_000)
    a, b = c.release(idx, np.zeros(20_000)), q.release(idx, np.zeros(20_000))
    assert abs(np.std(b) / np.std(a) - 0.25) < 0.02
    s = create("sum-central-gaussian", epsilon=1.0, delta=1e-5).configure(n_parties=3, dim=2, n_rounds=1, clip=1.0)
    t = with_noise_scale(create("sum-central-gaussian", epsilon=1.0, delta=1e-5), 0.1).configure(
        n_parties=3, dim=2, n_rounds=1, clip=1.0)
    assert math.isclose(t.analyzer.sigma, 0.1 * s.analyzer.sigma)
    with pytest.raises(TypeError, match="no noise"):
        with_noise_scale(create("non-private"), 0.5).configure(n_agents=2, dim=2, n_batches=2, batch_size=1)
    with pytest.raises(ValueError, match="factor"):
        with_noise_scale(create("silo-ldp", epsilon=1.0, delta=0.1), math.inf)
    with pytest.raises(TypeError, match="protocol"):
        with_noise_scale("silo-ldp", 0.5)
    del rng


# -- attacks -------------------------------------------------------------------------------


def test_learned_projection_finds_the_direction_and_is_fitted_on_selection_trials():
    rng = np.random.default_rng(0)
    shift = np.array([0.0, 1.0, 0.0, -1.0])

    def mech(world, rng, n):
        return rng.standard_normal((n, 4)) + (shift if world[1] == 1 else 0.0)

    lp = LearnedProjection()
    res = audit_epsilon_split(mech, ("w", 0), ("w", 1), lp, 40_000, rng=rng, vectorized=True, confidence=CONF,
                              neighbouring=lambda a, b: True)
    w = lp.w / np.linalg.norm(lp.w)
    assert np.dot(w, shift / np.linalg.norm(shift)) > 0.99
    # μ = √2: exact ε(δ=0) is unbounded but the bound must stay below the δ-free Gaussian's
    # value at the chosen threshold; check it is positive and below ε at δ=1e-3 (ln ratio bound)
    assert 0.5 < res.epsilon_lower
    with pytest.raises(RuntimeError, match="fitted"):
        LearnedProjection()(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="vectorized"):
        audit_epsilon_split(lambda d, r: 0.0, ("w", 0), ("w", 1), LearnedProjection(), 100, rng=rng,
                            neighbouring=lambda a, b: True)


def test_learned_projection_catches_a_deterministic_leak():
    def exact(world, rng, n):
        out = rng.standard_normal((n, 3))
        out[:, 1] = float(world[1])  # an exact release
        return out

    res = audit_epsilon_split(exact, ("w", 0), ("w", 1), LearnedProjection(), 2000, rng=np.random.default_rng(1),
                              vectorized=True, confidence=CONF, neighbouring=lambda a, b: True)
    assert res.tpr == 1.0 and res.fpr == 0.0


def test_known_projection_and_tail_thresholds():
    kp = KnownProjection([1.0, 1.0], offset=[1.0, 0.0])
    np.testing.assert_allclose(kp(np.array([[1.0, 0.0], [2.0, 3.0]])), [0.0, 4.0])
    with pytest.raises(ValueError, match="direction"):
        KnownProjection([])
    # the tail candidates reach thresholds with a few false positives in 10⁶ trials
    rng = np.random.default_rng(2)
    s0, s1 = rng.standard_normal(10**6), rng.standard_normal(10**6) + 1.0
    t = select_threshold(s0, s1, delta=1e-5)
    assert abs(t) > 2.5  # either tail, far beyond the 0.5 % quantile grid of the plain candidates


def test_claim_of():
    assert claim_of({"status": "verified", "epsilon": 0.7, "target_epsilon": 1.0}) == (0.7, "verified")
    assert claim_of({"status": "unproven", "epsilon": math.nan, "target_epsilon": 1.0}) == (1.0, "unproven")
    assert claim_of({"status": "none", "epsilon": math.inf, "target_epsilon": math.inf}) == (math.inf, "none")


# -- tight audits --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["silo-ldp", "central", "gaussian-secagg", "ddg-secagg"])
def test_tight_audit_is_below_the_claim_and_catches_noise_scaled_down(name):
    """Claimed ε = 2 at δ = 1e-5; the audit (99 % confidence) of the κ releases of one user stays
    below it and below their exact ε; with the noise scaled down 4× it exceeds the claim."""
    p = _configured(name, epsilon=2.0, delta=1e-5, M=4, d=2, K=8, B=3)
    rep = tight_audit(p, 200_000, rng=np.random.default_rng(3), confidence=CONF,
                      check_runs=600 if name != "ddg-secagg" else 150)
    assert rep.kind == "tight" and rep.claimed_epsilon == pytest.approx(2.0, rel=1e-6)
    assert rep.consistent and rep.epsilon_lower <= rep.exact_epsilon <= 2.0 * (1 + 1e-6)
    assert rep.ratio > 0.3  # the optimal test on a known law: far from vacuous
    assert rep.power_shown and rep.broken_result.epsilon_lower > 2.0
    assert "releases containing user 1" in rep.view


def test_tight_audit_checks_the_implementation():
    p = _configured("silo-ldp", epsilon=2.0, delta=1e-5)
    ta = TightAudit(p, np.random.default_rng(4), check_runs=3000)
    assert ta.steps == [1, 2, 4, 8]
    np.testing.assert_allclose(ta.change, np.tile([1.0, 0.0, 1.0, 0.0, 0.0], (4, 1)), atol=1e-12)
    assert ta.noise_check_p > 1e-4  # the real protocol's noise has the stated law (false alarm 1e-4)
    # the first release alone: 1/√κ of μ, far less than the claim (why the audit takes all κ releases)
    assert ta.first_release_epsilon(1e-5) < 0.5 * 2.0 < ta.exact_epsilon(1e-5)
    # a protocol whose code adds 2/3 of the noise it states (σ₀ as calibrated) fails the check, and
    # its trials are drawn at the measured noise (KS false alarm 1e-3; the ratio within its bound)
    with planted_noise(1 / 1.5):
        tb = TightAudit(p, np.random.default_rng(5), check_runs=3000)
    assert tb.noise_law_rejected and tb.noise_check_p < 1e-3
    assert tb.s == ta.s  # the declared σ is untouched
    assert 0.6 < tb.noise_ratio < tb.noise_ratio_upper < 0.72
    assert tb.trials.s == pytest.approx(tb.s * tb.noise_ratio_upper)
    with pytest.raises(ValueError, match="not private"):
        TightAudit(_configured("non-private"), np.random.default_rng(0))


def test_tight_audit_replace_relation_uses_a_replaced_record():
    p = _configured("central", epsilon=2.0, delta=1e-5, relation="replace")
    ta = TightAudit(p, np.random.default_rng(7), check_runs=500)
    norm = float(np.linalg.norm(ta.change[0]))
    assert 1.414 < norm <= math.sqrt(6) and p.relation == "replace"


def test_tight_audit_replace_pair_realizes_the_largest_record_change():
    # record change of x₀ = (cos θ, sin θ), y₀ = −1 against x₁ = e₁, y₁ = 1 (L = Y = 1), written out:
    # ‖x₁y₁ − x₀y₀‖² = 2 + 2cos θ, ‖x₁x₁ᵀ − x₀x₀ᵀ‖_F² = 2 − 2cos²θ: 4 + 2c − 2c², largest 4.5 at c = 1/2
    c = np.cos(np.linspace(0.0, np.pi, 100_001))
    assert np.max(4 + 2 * c - 2 * c**2) == pytest.approx(4.5, abs=1e-9)
    (x0, y0), (x1, y1) = target_records(2, "replace")
    change2 = np.sum((x1 * y1 - x0 * y0) ** 2) + np.sum((np.outer(x1, x1) - np.outer(x0, x0)) ** 2)
    assert change2 == pytest.approx(4.5) and 4.5 <= 2.0**2 + math.sqrt(2.0) ** 2  # within (2LY, √2 L²)
    # the implementation's first-node change is that record's packed (bias, upper-triangle Gram)
    # change: (3/2, √3/2 | 3/4, −√3/4, −3/4); a parallel pair would give (2, 0 | 0, 0, 0), norm 2
    p = _configured("central", epsilon=2.0, delta=1e-5, relation="replace")
    ta = TightAudit(p, np.random.default_rng(7), check_runs=200)
    s3 = math.sqrt(3.0)
    np.testing.assert_allclose(ta.change[0], [1.5, s3 / 2, 0.75, -s3 / 4, -0.75], atol=1e-12)

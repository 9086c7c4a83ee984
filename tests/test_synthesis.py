"""Tests of fedbandit.experiments.synthesis: the registry, the runner, the audits and the table."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedbandit.experiments import synthesis as S
from fedbandit.envs.linear import RealDataLinearEnv, SyntheticLinearEnv
from fedbandit.envs.mslr import load_mslr_instance
from fedbandit.experiments.grid import run_grid
from fedbandit.learners.fixed_batch import run_experiment

TINY = dict(instance="synthetic", M=3, T=40, B=10, K=6, d=3, runs=2, env_seed=0, epsilon=4.0, delta=1e-5,
            param_bound=1.0, n_checkpoints=5)


def tiny(learner, protocol, **kw):
    c = dict(TINY, learner=learner, protocol=protocol, **kw)
    if protocol == "non-private":
        c["epsilon"] = c["delta"] = None
    return c


# --- registry -------------------------------------------------------------------------


def test_registry_is_consistent():
    assert set(S.PROTOCOL_INFO) == set(S.PROTOCOLS)
    assert set(S.LEARNER_INFO) == set(S.LEARNERS)
    assert set(S.APPLICABLE) == set(S.LEARNERS)
    covered = {p for ps in S.APPLICABLE.values() for p in ps}
    expected = set(S.PROTOCOLS) if S.DDG_AVAILABLE else set(S.PROTOCOLS) - {"ddg-secagg"}
    assert covered == expected, "every protocol must apply to some learner"
    for learner, protocols in S.APPLICABLE.items():
        assert all(p in S.PROTOCOLS for p in protocols)
    pairs = S.applicable_pairs()
    assert len(pairs) == sum(len(v) for v in S.APPLICABLE.values())
    assert len(set(pairs)) == len(pairs)


@pytest.mark.parametrize("learner,protocol", S.applicable_pairs())
def test_every_listed_pair_is_constructible(learner, protocol):
    runner = S.build_learner(tiny(learner, protocol))
    assert runner.family in ("fixed-batch", "concurrent", "feducb")
    assert S.pair_label(learner, protocol)


def test_applicability_table_marks_every_pair():
    table = S.applicability_table()
    assert table.count("✓") == len(S.applicable_pairs())
    for learner in S.LEARNERS:
        assert f"| {learner} |" in table


# --- bad input --------------------------------------------------------------------------


NOT_APPLICABLE = [(lr, p) for lr in S.LEARNERS for p in S.PROTOCOLS if p not in S.APPLICABLE[lr]
                  and (p != "ddg-secagg" or S.DDG_AVAILABLE)]


@pytest.mark.parametrize("learner,protocol", NOT_APPLICABLE)
def test_inapplicable_pairs_are_refused_by_name(learner, protocol):
    with pytest.raises(ValueError) as info:
        S.check_applicable(learner, protocol)
    msg = str(info.value)
    assert repr(learner) in msg and repr(protocol) in msg
    assert "Protocols that apply to" in msg
    for p in S.APPLICABLE[learner]:
        assert p in msg
    # ... and the runner refuses it before any work, with the same message
    with pytest.raises(ValueError, match="cannot run protocol"):
        S.run_side_by_side(tiny(learner, protocol), np.random.default_rng(0))


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="learner"):
        S.check_applicable("ucb", "central")
    with pytest.raises(ValueError, match="protocol"):
        S.check_applicable("fixed-batch", "laplace")
    with pytest.raises(ValueError, match="protocol"):
        S.applicable_pairs(protocols=["nope"])


@pytest.mark.parametrize(
    "change,match",
    [
        (dict(B=7), "B must divide T"),
        (dict(M=0), "M"),
        (dict(T=None), "T"),
        (dict(epsilon=None), "epsilon"),
        (dict(delta=2.0), "delta"),
        (dict(instance="mnist"), "instance"),
        (dict(reward_bound=-1.0), "reward_bound"),
    ],
)
def test_bad_settings_name_the_parameter(change, match):
    with pytest.raises((ValueError, TypeError), match=match):
        S.run_side_by_side(dict(tiny("fixed-batch", "silo-ldp"), **change), np.random.default_rng(0))


def test_config_must_be_a_dict():
    with pytest.raises(TypeError, match="config"):
        S.run_side_by_side([("fixed-batch", "central")], np.random.default_rng(0))
    with pytest.raises(TypeError, match="config"):
        S.audit_side_by_side("central", np.random.default_rng(0))


# --- the same instance for every learner ------------------------------------------------


def test_user_sequence_env_is_the_round_major_flattening():
    env = SyntheticLinearEnv(3, 5, 3, n_runs=2, seed=4, block_size=7)
    flat = S.UserSequenceEnv(SyntheticLinearEnv(3, 5, 3, n_runs=2, seed=4, block_size=7))
    assert flat.n_agents == 1 and flat.dim == 3 and flat.n_runs == 2
    orig = list(env.iter_blocks(20))
    got = list(flat.iter_blocks(60))
    assert sum(b.n_rounds for b in got) == 60
    feats = np.concatenate([b.features for b in got])[:, :, 0]
    noise = np.concatenate([b.noise for b in got])[:, :, 0]
    best = np.concatenate([b.best for b in got])[:, :, 0]
    o_feats = np.concatenate([b.features for b in orig])
    o_noise = np.concatenate([b.noise for b in orig])
    o_best = np.concatenate([b.best for b in orig])
    for t in range(20):
        for i in range(3):
            u = t * 3 + i  # user u is agent i's user of round t + 1
            np.testing.assert_array_equal(feats[u], o_feats[t, :, i])
            np.testing.assert_array_equal(noise[u], o_noise[t, :, i])
            np.testing.assert_array_equal(best[u], o_best[t, :, i])
    assert [b.start for b in got] == [b.start * 3 for b in orig]
    with pytest.raises(ValueError, match="multiple"):
        next(flat.iter_blocks(31))


def test_user_sequence_env_fills_padded_arms_with_a_real_one():
    env = RealDataLinearEnv(load_mslr_instance(), 4, n_runs=1, seed=0, max_arms=None)
    b = next(env.iter_blocks(3))
    assert b.mask is not None and not b.mask.all()
    got = next(S.UserSequenceEnv(RealDataLinearEnv(load_mslr_instance(), 4, n_runs=1, seed=0)).iter_blocks(12))
    assert got.mask is None and np.isfinite(got.means).all()
    # best arm unchanged; padded arms are copies of arm 0
    np.testing.assert_array_equal(got.best[:, 0, 0], np.moveaxis(b.best, 2, 1).reshape(-1, 1)[:, 0])
    f = np.moveaxis(b.features, 2, 1).reshape((12,) + b.features.shape[1:2] + b.features.shape[3:])
    m = np.moveaxis(b.mask, 2, 1).reshape((12,) + b.mask.shape[1:2] + b.mask.shape[3:])
    np.testing.assert_array_equal(got.features[:, :, 0][m], f[m])
    pad = ~m
    np.testing.assert_array_equal(got.features[:, :, 0][pad], np.broadcast_to(f[..., :1, :], f.shape)[pad])


def test_fixed_batch_point_equals_the_fixed_batch_chapter_runner():
    # No re-implementation: the same setting through fedbandit.learners.fixed_batch.run_experiment.
    c = tiny("fixed-batch", "silo-ldp", calibration="zcdp")
    c.pop("param_bound")  # run_experiment uses the learner's default S
    ours = S.run_side_by_side(c, np.random.default_rng(7))
    theirs = run_experiment(dict(c, protocol="ldp", calibration="zcdp"), np.random.default_rng(7))
    # same decisions; the totals differ only by the order of summation (cumsum vs sum)
    np.testing.assert_allclose(ours["cum_regret"], theirs["cum_regret"], rtol=1e-12)
    assert ours["accounting"]["status"] == "verified"
    assert math.isclose(ours["accounting"]["epsilon"], 4.0, rel_tol=1e-6)


def test_all_learners_face_the_same_instance():
    # Random play is a property of the instance alone; and learners differ only by their decisions.
    r1 = S.random_play_regret(TINY)
    r2 = S.random_play_regret(dict(TINY, learner="feducb"))
    np.testing.assert_array_equal(r1, r2)
    assert np.all(r1 > 0)
    for lr, p in S.applicable_pairs():
        res = S.run_side_by_side(tiny(lr, p), np.random.default_rng(1))
        assert np.all(res["cum_regret"] >= -1e-9)
        assert np.all(res["cum_regret"] <= r1.max() * 10)


# --- end to end ---------------------------------------------------------------------------


def test_tiny_end_to_end_through_run_grid():
    pairs = [("fixed-batch", "non-private"), ("fixed-batch", "central"), ("independent", "non-private"),
             ("concurrent-linucb", "concurrent-shuffle-klog"), ("feducb", "dp20")]
    configs = S.side_by_side_configs(TINY, pairs)
    assert len(configs) == len(pairs)
    results = run_grid(S.run_side_by_side, configs, seeds=1, cache_dir=False, progress=False, version="test")
    for c, [r] in zip(configs, results):
        assert r["curve"].shape == (TINY["runs"], TINY["n_checkpoints"])
        assert r["t"][-1] == TINY["T"]
        np.testing.assert_allclose(r["curve"][:, -1], r["cum_regret"])
        assert np.all(np.diff(r["curve"], axis=1) >= -1e-9)
        acc = r["accounting"]
        assert acc["status"] in ("verified", "claimed", "unproven", "invalid", "none")
        assert r["noise_variance"] >= 0 and r["uplink_bits"] >= 0
    by = {(c["learner"], c["protocol"]): r[0] for c, r in zip(configs, results)}
    assert by[("fixed-batch", "non-private")]["accounting"]["status"] == "none"
    assert by[("fixed-batch", "central")]["accounting"]["status"] == "verified"
    assert by[("independent", "non-private")]["accounting"]["epsilon"] == 0.0
    assert by[("independent", "non-private")]["uplink_bits"] == 0.0
    assert by[("feducb", "dp20")]["accounting"]["status"] == "invalid"
    assert by[("fixed-batch", "central")]["rounds"] == TINY["T"] // TINY["B"]
    klog = by[("concurrent-linucb", "concurrent-shuffle-klog")]
    assert klog["accounting"]["status"] == "verified" and klog["rounds"] == TINY["M"] * TINY["T"]


def test_epsilon_and_m_grid():
    configs = S.side_by_side_configs(dict(TINY), [("fixed-batch", "non-private"), ("fixed-batch", "silo-ldp")],
                                     epsilons=[1.0, 2.0], Ms=[2, 3])
    # non-private does not depend on ε: one configuration per M
    assert len(configs) == 2 * (1 + 2)
    assert {c["M"] for c in configs} == {2, 3}
    assert all(c["epsilon"] is None for c in configs if c["protocol"] == "non-private")


def test_deterministic_under_a_fixed_seed():
    c = tiny("fixed-batch", "sdp-vector-sum")
    a = S.run_side_by_side(c, np.random.default_rng(3))
    b = S.run_side_by_side(c, np.random.default_rng(3))
    np.testing.assert_array_equal(a["curve"], b["curve"])
    c2 = tiny("concurrent-linucb", "concurrent-shuffle-k1")
    np.testing.assert_array_equal(S.run_side_by_side(c2, np.random.default_rng(3))["curve"],
                                  S.run_side_by_side(c2, np.random.default_rng(3))["curve"])
    # run_grid: the same result whatever the backend
    configs = S.side_by_side_configs(TINY, [("fixed-batch", "silo-ldp"), ("feducb", "dp20")])
    r1 = run_grid(S.run_side_by_side, configs, seeds=2, cache_dir=False, progress=False, version="t")
    r2 = run_grid(S.run_side_by_side, configs[::-1], seeds=2, cache_dir=False, progress=False, version="t")[::-1]
    for x, y in zip(r1, r2):
        for u, v in zip(x, y):
            np.testing.assert_array_equal(u["curve"], v["curve"])


@pytest.mark.skipif(not S.DDG_AVAILABLE, reason="DDGSecAggProtocol not in this version")
def test_ddg_runs_and_spends_exactly_the_target():
    r = S.run_side_by_side(tiny("fixed-batch", "ddg-secagg"), np.random.default_rng(0))
    assert r["accounting"]["status"] == "verified"
    assert r["accounting"]["epsilon"] <= 4.0 * (1 + 1e-6)


# --- audits ----------------------------------------------------------------------------------


def test_audit_of_the_non_private_release_is_the_perfect_attack_bound():
    from fedbandit.audit.epsilon import epsilon_lower_bound

    a = S.audit_side_by_side(dict(tiny("fixed-batch", "non-private"), n_trials=200), np.random.default_rng(0))
    assert a["tpr"] == 1.0 and a["fpr"] == 0.0
    assert math.isclose(a["epsilon_lower"], epsilon_lower_bound(200, 200, 0, 200)[0])


def test_audit_of_dp20_beats_its_claim():
    """DP20's schedule leak is deterministic: a perfect attack, so 1000 trials beat ε = 1."""
    a = S.audit_side_by_side(dict(tiny("feducb", "dp20"), epsilon=1.0, n_trials=1000), np.random.default_rng(0))
    assert a["tpr"] == 1.0 and a["fpr"] == 0.0 and a["epsilon_lower"] > 1.0


@pytest.mark.parametrize("learner,protocol", [("fixed-batch", "silo-ldp"), ("fixed-batch", "central"),
                                              ("super-agent", "central"),
                                              ("concurrent-linucb", "concurrent-shuffle-k1")])
def test_audits_of_private_protocols_stay_below_the_target(learner, protocol):
    """A valid audit's bound exceeds the true ε with probability ≤ 5 % (its confidence);
    fixed seeds make the test deterministic (false-alarm rate ≤ 5 % per case before fixing them)."""
    a = S.audit_side_by_side(dict(tiny(learner, protocol), epsilon=1.0, n_trials=400), np.random.default_rng(5))
    assert 0.0 <= a["epsilon_lower"] <= 1.0


def test_independent_agents_have_no_audit():
    a = S.audit_side_by_side(dict(tiny("independent", "non-private"), n_trials=100), np.random.default_rng(0))
    assert math.isnan(a["epsilon_lower"]) and a["note"].startswith("n/a")


# --- the table --------------------------------------------------------------------------------


def test_table_rows_have_every_column():
    pairs = [("fixed-batch", "non-private"), ("fixed-batch", "silo-ldp"), ("independent", "non-private"),
             ("feducb", "dp20")]
    configs = S.side_by_side_configs(TINY, pairs)
    results = run_grid(S.run_side_by_side, configs, seeds=1, cache_dir=False, progress=False, version="t")
    audits = {("fixed-batch", "silo-ldp"): {"epsilon_lower": 0.25}}
    rows = S.table_rows(configs, results, audits)
    assert len(rows) == len(configs)
    for row in rows:
        for key, _ in S.TABLE_COLUMNS:
            assert key in row and isinstance(row[key], str) and row[key] != ""
        assert row["regret_low"] <= row["regret_mean"] <= row["regret_high"]
    assert rows[1]["audit"] == "0.25" and rows[0]["audit"] == "n/a"
    md = S.markdown_table(rows)
    lines = md.splitlines()
    assert len(lines) == 2 + len(rows)
    assert all(line.count("|") >= len(S.TABLE_COLUMNS) + 1 for line in lines)
    with pytest.raises(ValueError, match="length"):
        S.table_rows(configs, results[:-1])


def test_regret_interval_is_the_student_t_interval():
    from scipy import stats

    v = np.array([1.0, 2.0, 4.0, 7.0])
    m, lo, hi = S.regret_interval(v)
    ref = stats.t.interval(0.95, 3, loc=v.mean(), scale=stats.sem(v))
    assert m == v.mean() and math.isclose(lo, ref[0]) and math.isclose(hi, ref[1])
    assert math.isnan(S.regret_interval([3.0])[1])
    with pytest.raises(ValueError, match="empty"):
        S.regret_interval([])


def test_sweep_configs_cover_both_sweeps_once():
    cc = ("concurrent-linucb", "central")
    configs = S.sweep_configs(dict(TINY), [1.0, 4.0], [2, 3], 4.0, main_only=[cc])
    keys = [(c["learner"], c["protocol"], c["epsilon"], c["M"]) for c in configs]
    assert len(keys) == len(set(keys))
    n_private = sum(p != "non-private" for p in S.PROTOCOLS for lr in S.LEARNERS if p in S.APPLICABLE[lr]) - 1
    n_public = sum("non-private" in S.APPLICABLE[lr] for lr in S.LEARNERS)
    # ε sweep at M = 3 (private pairs × 2 ε + public pairs) + the main-only pair + the other M (= 2), all pairs at ε = 4
    assert len(configs) == n_private * 2 + n_public + 1 + (n_private + n_public)
    assert sum(k[:2] == cc for k in keys) == 1 and ("concurrent-linucb", "central", 4.0, 3) in keys

"""Tests of fedbandit.experiments.synthesis: the models, derived applicability, the audits and the table."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedbandit.envs.linear import SyntheticLinearEnv
from fedbandit.envs.users import UserSequenceEnv
from fedbandit.experiments import run_config, run_grid
from fedbandit.experiments import synthesis as S

TINY = dict(instance="synthetic", M=3, T=40, B=10, K=6, d=3, runs=2, env_seed=0, epsilon=4.0, delta=1e-5,
            param_bound=1.0, n_checkpoints=5)

KEYS = [m.key for m in S.MODELS]


def tiny(key, **kw):
    return dict(S.model_config(TINY, S.model(key)), **kw)


# --- models and applicability -------------------------------------------------------------


def test_models_are_unique_and_use_registry_names():
    from fedbandit.learners import available_learners
    from fedbandit.protocols import available

    assert len(set(KEYS)) == len(KEYS)
    for m in S.MODELS:
        assert m.learner in available_learners()
        assert m.protocol is None or m.protocol in available()


@pytest.mark.parametrize("key", KEYS)
def test_every_model_runs_through_the_one_runner(key):
    r = run_config(tiny(key), np.random.default_rng(1))
    assert r.regret.shape == (TINY["runs"], TINY["n_checkpoints"]) and r.t[-1] == TINY["T"]
    assert np.all(np.diff(r.regret, axis=1) >= -1e-9) and np.all(r.cum_regret >= -1e-9)
    assert r.accounting.status in ("verified", "claimed", "unproven", "invalid", "none")
    assert r.noise_variance >= 0 and r.communication.bits >= 0


def test_applicability_is_derived_by_construction():
    table = S.applicability(TINY)
    # what the models use applies
    for m in S.MODELS:
        if m.protocol is not None and m.learner != "independent":
            assert table[(m.learner, m.protocol)] == "", (m.key, table[(m.learner, m.protocol)])
    # a refusal carries the refusing part's own reason
    assert "sdp-vector-sum" in table[("feducb", "sdp-vector-sum")] and "FedUCB" in table[("feducb", "sdp-vector-sum")]
    md = S.applicability_table(TINY)
    assert md.count("✓") == sum(v == "" for v in table.values())


def test_unknown_model_and_bad_config_are_refused():
    with pytest.raises(ValueError, match="unknown model"):
        S.model("fixed-batch/nope")
    with pytest.raises(TypeError, match="config"):
        S.audit_side_by_side("central", np.random.default_rng(0))
    with pytest.raises(TypeError, match="base"):
        S.model_config(["M"], S.MODELS[0])


# --- the same instance for every learner ----------------------------------------------------


def test_user_sequence_env_is_the_round_major_flattening():
    env = SyntheticLinearEnv(3, 5, 3, n_runs=2, seed=4, block_size=7)
    flat = UserSequenceEnv(SyntheticLinearEnv(3, 5, 3, n_runs=2, seed=4, block_size=7))
    assert flat.n_agents == 1 and flat.dim == 3 and flat.n_runs == 2
    orig = list(env.iter_blocks(20))
    got = list(flat.iter_blocks(60))
    feats = np.concatenate([b.features for b in got])[:, :, 0]
    noise = np.concatenate([b.noise for b in got])[:, :, 0]
    o_feats = np.concatenate([b.features for b in orig])
    o_noise = np.concatenate([b.noise for b in orig])
    for t in range(20):
        for i in range(3):
            u = t * 3 + i  # user u is agent i's user of round t + 1
            np.testing.assert_array_equal(feats[u], o_feats[t, :, i])
            np.testing.assert_array_equal(noise[u], o_noise[t, :, i])
    with pytest.raises(ValueError, match="multiple"):
        next(flat.iter_blocks(31))


def test_all_learners_face_the_same_instance():
    r1 = S.random_play_regret(TINY)
    r2 = S.random_play_regret(tiny("feducb/dp20"))
    np.testing.assert_array_equal(r1, r2)
    assert np.all(r1 > 0)


# --- configurations ----------------------------------------------------------------------------


def test_epsilon_and_m_grid():
    configs = S.side_by_side_configs(TINY, ["fixed-batch/non-private", "fixed-batch/silo-ldp"],
                                     epsilons=[1.0, 2.0], Ms=[2, 3])
    assert len(configs) == 2 * (1 + 2)  # non-private does not depend on ε: one configuration per M
    assert {c["M"] for c in configs} == {2, 3}
    assert all("epsilon" not in c for c in configs if c["protocol"] == "non-private")


def test_sweep_configs_cover_both_sweeps_once():
    cc = "concurrent-linucb/central"
    configs = S.sweep_configs(dict(TINY), [1.0, 4.0], [2, 3], 4.0, main_only=[cc])
    keys = [(c["tag"], c.get("epsilon"), c["M"]) for c in configs]
    assert len(keys) == len(set(keys))
    private = [m for m in S.MODELS if m.private and m.key != cc]
    public = [m for m in S.MODELS if not m.private]
    assert len(configs) == len(private) * 2 + len(public) + 1 + len(private) + len(public)
    assert sum(k[0] == cc for k in keys) == 1


def test_deterministic_under_a_fixed_seed_whatever_the_order():
    configs = S.side_by_side_configs(TINY, ["fixed-batch/silo-ldp", "feducb/dp20", "fixed-batch/sdp-vector-sum"])
    r1 = run_grid(run_config, configs, seeds=2, cache_dir=False, progress=False, version="t")
    r2 = run_grid(run_config, configs[::-1], seeds=2, cache_dir=False, progress=False, version="t")[::-1]
    for x, y in zip(r1, r2):
        for u, v in zip(x, y):
            np.testing.assert_array_equal(u.regret, v.regret)


def test_accounting_of_the_reference_rows():
    by = {k: run_config(tiny(k), np.random.default_rng(0)) for k in
          ("fixed-batch/non-private", "fixed-batch/central", "independent", "feducb/dp20", "fixed-batch/ddg-secagg")}
    assert by["fixed-batch/non-private"].accounting.status == "none"
    assert by["fixed-batch/central"].accounting.status == "verified"
    assert by["independent"].accounting.epsilon == 0.0 and by["independent"].communication.bits == 0.0
    assert by["feducb/dp20"].accounting.status == "invalid"
    assert by["fixed-batch/central"].communication.rounds == TINY["T"] // TINY["B"]
    ddg = by["fixed-batch/ddg-secagg"].accounting
    assert ddg.status == "verified" and ddg.epsilon <= 4.0 * (1 + 1e-6)


# --- audits ----------------------------------------------------------------------------------


def test_audit_of_the_non_private_release_is_the_perfect_attack_bound():
    from fedbandit.audit import epsilon_lower_bound

    a = S.audit_side_by_side(dict(tiny("fixed-batch/non-private"), n_trials=200), np.random.default_rng(0))
    assert a["tpr"] == 1.0 and a["fpr"] == 0.0
    assert math.isclose(a["epsilon_lower"], epsilon_lower_bound(200, 200, 0, 200)[0])


def test_audit_of_dp20_beats_its_claim():
    """DP20's schedule leak is deterministic: a perfect attack, so 1000 trials beat ε = 1."""
    a = S.audit_side_by_side(dict(tiny("feducb/dp20"), epsilon=1.0, n_trials=1000), np.random.default_rng(0))
    assert a["tpr"] == 1.0 and a["fpr"] == 0.0 and a["epsilon_lower"] > 1.0


@pytest.mark.parametrize("key", ["fixed-batch/silo-ldp", "fixed-batch/central", "super-agent/central",
                                 "concurrent-linucb/concurrent-shuffle-k1"])
def test_audits_of_private_protocols_stay_below_the_target(key):
    """A valid audit's bound exceeds the true ε with probability ≤ 5 % (its confidence);
    fixed seeds make the test deterministic."""
    a = S.audit_side_by_side(dict(tiny(key), epsilon=1.0, n_trials=400), np.random.default_rng(5))
    assert 0.0 <= a["epsilon_lower"] <= 1.0


def test_independent_agents_have_no_audit():
    a = S.audit_side_by_side(dict(tiny("independent"), n_trials=100), np.random.default_rng(0))
    assert math.isnan(a["epsilon_lower"]) and a["note"].startswith("n/a")


# --- the table --------------------------------------------------------------------------------


def test_table_rows_have_every_column():
    keys = ["fixed-batch/non-private", "fixed-batch/silo-ldp", "independent", "feducb/dp20"]
    configs = S.side_by_side_configs(TINY, keys)
    results = run_grid(run_config, configs, seeds=1, cache_dir=False, progress=False, version="t")
    rows = S.table_rows(configs, results, {"fixed-batch/silo-ldp": {"epsilon_lower": 0.25}})
    assert len(rows) == len(configs)
    for row in rows:
        for key, _ in S.TABLE_COLUMNS:
            assert key in row and isinstance(row[key], str) and row[key] != ""
        assert row["regret_low"] <= row["regret_mean"] <= row["regret_high"]
    assert rows[1]["audit"] == "0.25" and rows[0]["audit"] == "n/a"
    lines = S.markdown_table(rows).splitlines()
    assert len(lines) == 2 + len(rows)
    with pytest.raises(ValueError, match="length"):
        S.table_rows(configs, results[:-1])


# --- one neighbouring relation; audits with power ---------------------------------------------


@pytest.mark.parametrize("key", [m.key for m in S.MODELS if m.private])
def test_every_model_is_accounted_under_the_comparison_relation(key):
    r = run_config(tiny(key), np.random.default_rng(0))
    assert r.accounting.relation == S.COMPARISON_RELATION
    other = S.accounting_under(tiny(key), "replace")
    assert other["relation"] == "replace" or S.model(key).learner == "feducb"


def test_replacement_costs_the_fixed_batch_protocols_more_epsilon():
    """Replacing a user doubles the bias sensitivity (2LY) and takes √2·L² for the Gram: the
    central tree calibrated for (4, 1e-5) under add/remove spends more under replacement."""
    ar = S.accounting_under(tiny("fixed-batch/central"), "add-remove")
    rp = S.accounting_under(tiny("fixed-batch/central"), "replace")
    assert ar["epsilon"] <= 4.0 * (1 + 1e-6) < rp["epsilon"] < math.inf
    cs = S.accounting_under(tiny("concurrent-linucb/concurrent-shuffle-k1"), "replace")
    assert cs["epsilon"] <= 4.0 * (1 + 1e-6)  # the concurrent shuffle: the same under both relations
    with pytest.raises(ValueError, match="relation"):
        S.accounting_under(tiny("fixed-batch/central"), "swap")


def test_audit_of_a_gaussian_protocol_is_tight_and_shows_power():
    a = S.audit_side_by_side(dict(tiny("fixed-batch/central"), epsilon=2.0, n_trials=100_000, check_runs=300),
                             np.random.default_rng(7))
    assert a["kind"] == "tight" and a["epsilon_lower"] <= a["exact_epsilon"] <= 2.0 * (1 + 1e-6)
    assert 0.3 < a["ratio"] <= 1.0 and a["power_shown"] and a["broken_epsilon_lower"] > 2.0


def test_end_to_end_audit_by_name():
    a = S.end_to_end_audit({"spec": "stream/counter-laplace", "n_trials": 3000}, np.random.default_rng(0))
    assert a["name"] == "stream/counter-laplace" and a["consistent"] and a["power_shown"]
    with pytest.raises(ValueError, match="unknown end-to-end audit"):
        S.end_to_end_audit({"spec": "nope"}, np.random.default_rng(0))


def test_every_accepted_pair_has_an_end_to_end_audit():
    """Issue 21: every (learner, protocol) pair the learners accept is attacked end to end, by
    end_to_end_specs or by the assembled pair_end_to_end_specs (no pair twice, none missing)."""
    from fedbandit.audit.end_to_end import end_to_end_specs, pair_end_to_end_specs
    from fedbandit.audit.replay import replay_pairs

    base, extra = end_to_end_specs(), pair_end_to_end_specs()
    pairs = set(replay_pairs()[0])
    covered = {(s.learner, s.protocol) for s in base}
    assert {(s.learner, s.protocol) for s in extra} == pairs - covered
    assert len({s.name for s in (*base, *extra)}) == len(base) + len(extra)
    for s in extra:  # the learner's own instance, the protocol's own claim
        assert any(b.learner == s.learner and b.setting == s.setting for b in base), s.name
        assert any(b.protocol == s.protocol and {k: v for k, v in b.protocol_params.items() if k != "relation"}
                   == {k: v for k, v in s.protocol_params.items() if k != "relation"} for b in base), s.name


def test_pair_audit_rows_pick_the_strongest_audit_and_say_when_there_is_none():
    from fedbandit.experiments.synthesis import format_value, pair_audit_rows

    weak = dict(learner="a", protocol="p", source="x", kind="tight", status="verified", claimed_epsilon=4.0,
                epsilon_lower=1.0, ratio=0.25, broken="noise × 0.25", broken_epsilon_lower=9.0, power_shown=True)
    strong = dict(weak, source="y", claimed_epsilon=1.0, epsilon_lower=0.9, ratio=0.9, power_shown=False)
    refuted = dict(weak, learner="b", status="invalid", epsilon_lower=7.0, ratio=1.75, broken="")
    rows = pair_audit_rows([("a", "p"), ("b", "p"), ("c", None)], [weak, strong, refuted],
                           {("a", "p"): True, ("b", "p"): False})
    a, b, c = rows
    assert a["best"] is strong and a["n_audits"] == 2 and a["ratio"] == format_value(0.9, 2) and "not shown" in a["power"]
    assert a["replay"] == "holds" and b["replay"] == "**violated**" and c["replay"] == "—"
    assert b["best"] is refuted and b["ratio"] == format_value(7.0 / 4.0, 2) and b["power"].startswith("—")
    assert c["best"] is None and c["audit"] == "none of its own"
    with pytest.raises(TypeError, match="learner"):
        pair_audit_rows([("a", "p")], [{"epsilon_lower": 1.0}])


def test_claim_lower_bound_is_the_deshuffling_bound_and_decides_the_status():
    """The amplification claim's necessary bound (the de-shuffling attack's exact ε) is what the
    accountant compares with the target: above it, the run's status is "invalid"."""
    from fedbandit.experiments import run_config
    from fedbandit.experiments.synthesis import claim_lower_bound

    # chapter 6's main setting (M = 32, T/B = 100 batches), on a small instance: the bound is
    # 0.85 at ε = 1 (below: "unproven", the lemma being forced) and 4.11 at ε = 4 (above: "invalid")
    base = dict(learner="fixed-batch", instance="synthetic", env_seed=0, delta=1e-5, M=32, T=2000, B=20, K=4, d=2,
                runs=1, param_bound=1.0)
    seen = set()
    for eps in (1.0, 4.0):
        cfg = dict(base, protocol="sdp-amplification", epsilon=eps, force=True)
        lb = claim_lower_bound(cfg)
        assert math.isfinite(lb["epsilon"]) and lb["epsilon"] > 0 and "de-shuffling" in lb["why"]
        status = run_config(cfg, np.random.default_rng(0)).accounting.status
        assert (status == "invalid") == (lb["epsilon"] > eps), (eps, lb["epsilon"], status)
        seen.add(status == "invalid")
    assert seen == {True, False}, "the two targets should fall on both sides of the bound"
    assert math.isnan(claim_lower_bound(dict(base, protocol="silo-ldp", epsilon=1.0))["epsilon"])

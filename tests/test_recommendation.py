"""The recommendation instance (MSLR rankers as arms), categorical rewards, common random
numbers across configurations, and the master-worker aggregation variants."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from fedbandit.envs.factory import make_environment
from fedbandit.envs.graphs import complete_graph
from fedbandit.envs.multi_armed import BernoulliBandit, CategoricalBandit, RewardStream
from fedbandit.envs.recommendation import (
    DEFAULT_RANKER_PATH,
    RELEVANCE_VALUES,
    build_ranker_table,
    load_ranker_table,
    ranker_bandit,
    ranker_distributions,
)
from fedbandit.experiments import run_config
from fedbandit.learners.consensus import DecentralizedUCB, MasterWorkerUCB
from fedbandit.protocols.registry import create

ROOT = Path(__file__).resolve().parent.parent


def test_ranker_table_shipped_and_consistent():
    assert DEFAULT_RANKER_PATH.exists()
    table = load_ranker_table()
    counts = table["top_label_counts"]
    assert counts.shape == (136, 86, 5)
    assert table["docs_per_query"].sum() == 10_000
    # every (ranker, query) has at least one top document, never more than the query has
    per = counts.sum(axis=2)
    assert np.all(per >= 1) and np.all(per <= table["docs_per_query"][None, :])
    assert len(table["source_sha256"]) == 64


def test_ranker_bandit_is_the_best_distinct_rankers():
    env = ranker_bandit(10)
    feats, probs, means = ranker_distributions()
    assert env.n_arms == 10 and env.best_arm == 0
    assert np.all(np.diff(env.means) <= 0)
    # the best arm is the best ranker overall, and no left-out distinct ranker beats the worst arm
    assert env.features[0] == feats[np.argmax(means)]
    rows = {tuple(np.round(p, 12)) for p in env.probs}
    assert len(rows) == 10
    left_out = [m for p, m in zip(probs, means) if tuple(np.round(p, 12)) not in rows]
    assert max(left_out) <= env.means[-1] + 1e-12
    np.testing.assert_allclose(env.means, env.probs @ RELEVANCE_VALUES)
    assert env.sigma == 0.5
    with pytest.raises(ValueError, match="n_arms"):
        ranker_bandit(1000)


def test_factory_builds_the_ranker_instance():
    env = make_environment({"instance": "rankers", "K": 5})
    assert isinstance(env, CategoricalBandit) and env.n_arms == 5
    np.testing.assert_allclose(env.means, ranker_bandit(5).means)


def test_build_ranker_table_ties_and_labels(tmp_path):
    # query 0: feature 1 ties docs 0 and 1 at the top (labels 4 and 0); query 1: doc 2 alone
    lines = [
        "4 qid:7 " + " ".join(f"{k}:{1.0 if k == 1 else 0.0}" for k in range(1, 137)),
        "0 qid:7 " + " ".join(f"{k}:{1.0 if k == 1 else 0.5}" for k in range(1, 137)),
        "2 qid:9 " + " ".join(f"{k}:{0.3}" for k in range(1, 137)),
        "1 qid:9 " + " ".join(f"{k}:{0.1}" for k in range(1, 137)),
    ]
    (tmp_path / "msn1.fold1.train.5k.txt").write_text("\n".join(lines[:2]) + "\n")
    (tmp_path / "msn1.fold1.test.5k.txt").write_text("\n".join(lines[2:]) + "\n")
    table = build_ranker_table(tmp_path)
    c = table["top_label_counts"]
    np.testing.assert_array_equal(c[0, 0], [1, 0, 0, 0, 1])  # feature 1, query 0: the tie
    np.testing.assert_array_equal(c[1, 0], [1, 0, 0, 0, 0])  # feature 2 prefers doc 1 (label 0)
    np.testing.assert_array_equal(c[0, 1], [0, 0, 1, 0, 0])
    feats, probs, means = ranker_distributions(table)
    np.testing.assert_allclose(probs[0], [0.25, 0, 0.5, 0, 0.25])  # (tie: half each) + query 1 (label 2)
    bad = tmp_path / "x.tar.gz"
    bad.write_bytes(b"not the tarball")
    with pytest.raises(ValueError, match="SHA-256"):
        build_ranker_table(bad)


def test_categorical_rewards_follow_their_distribution():
    env = CategoricalBandit.from_distributions([0.0, 0.5, 1.0], [[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])
    np.testing.assert_allclose(env.means, [0.65, 0.0])
    stream = RewardStream(env, 400, 50, np.random.default_rng(0))
    r = np.concatenate([stream.rewards(t, np.zeros((400, 50), dtype=int)).ravel() for t in range(1, 11)])
    freq = np.array([np.mean(r == v) for v in (0.0, 0.5, 1.0)])
    # 200,000 draws: a multinomial frequency has s.e. < 0.0012; 5 s.e. margin
    np.testing.assert_allclose(freq, [0.2, 0.3, 0.5], atol=0.006)
    assert np.all(stream.rewards(1, np.ones((400, 50), dtype=int)) == 0.0)
    np.testing.assert_allclose(env.reward_std, [np.sqrt(0.2 * 0.65**2 + 0.3 * 0.15**2 + 0.5 * 0.35**2), 0.0])
    with pytest.raises(ValueError, match="probability"):
        CategoricalBandit.from_distributions([0.0, 1.0], [[0.5, 0.6], [1.0, 0.0]])
    with pytest.raises(ValueError, match="shape"):
        CategoricalBandit(np.array([0.5, 0.5]), values=np.array([0.0, 1.0]), probs=np.ones((3, 2)) / 2)


def test_categorical_rewards_equal_the_plain_inverse_cdf():
    # Reference: the inverse CDF written out, the first value whose cumulative probability exceeds U,
    # on uniform draws and on draws exactly at the thresholds (U equal to a threshold moves past it).
    probs = np.array([[0.2, 0.3, 0.5, 0.0], [0.25, 0.25, 0.25, 0.25], [0.0, 0.0, 0.0, 1.0]])
    values = np.array([0.0, 0.25, 0.5, 1.0])
    env = CategoricalBandit.from_distributions(values, probs)
    rng = np.random.default_rng(3)
    cum = np.cumsum(probs, axis=1)
    u = np.concatenate([rng.random(2999), cum[:, :-1].ravel(), [0.0, np.nextafter(1.0, 0.0)]])
    arms = rng.integers(0, 3, u.size)

    def plain(ui, a):
        for v in range(values.size - 1):
            if ui < cum[a, v]:
                return values[v]
        return values[-1]

    expected = np.array([plain(ui, a) for ui, a in zip(u, arms)])
    np.testing.assert_array_equal(env._rewards(u, arms), expected)
    np.testing.assert_array_equal(env._rewards(u.reshape(-1, 2), arms.reshape(-1, 2)), expected.reshape(-1, 2))


def test_run_keys_give_common_rewards_across_batch_sizes():
    env = BernoulliBandit(np.array([0.7, 0.3]))
    a = RewardStream(env, 3, 4, np.random.default_rng(5), run_keys=[0, 1, 2])
    b = RewardStream(env, 5, 4, np.random.default_rng(5), run_keys=[0, 1, 2, 0, 1])
    for t in (1, 700, 2000):
        va, vb = a.variates(t), b.variates(t)
        np.testing.assert_array_equal(va, vb[:3])
        np.testing.assert_array_equal(va[:2], vb[3:])
    c = RewardStream(env, 3, 4, np.random.default_rng(6), run_keys=[0, 1, 2])
    assert not np.array_equal(a.variates(1), c.variates(1))  # another seed, other rewards
    with pytest.raises(ValueError, match="run_keys"):
        RewardStream(env, 3, 4, np.random.default_rng(5), run_keys=[0, 1])


def test_run_keys_variates_equal_the_plain_table():
    """A slot's variates gathered from the per-key table equal the plain construction: every distinct key's
    block drawn from SeedSequence(key, spawn_key=(block, key)), copied to the runs of that key, indexed by slot."""
    env = BernoulliBandit(np.array([0.7, 0.3]))
    for run_keys in ([0, 1, 2, 0, 1, 2, 0], [2, 0, 1], [0, 1, 2], [4, 4]):
        R, M, B = len(run_keys), 3, 16
        s = RewardStream(env, R, M, np.random.default_rng(5), run_keys=run_keys, block=B)
        for t in (1, 2, 16, 17, 40, 33, 5):  # several blocks, and back to an earlier one
            c, off = divmod(t - 1, B)
            plain = np.empty((R, M))
            for r, k in enumerate(run_keys):
                g = np.random.default_rng(np.random.SeedSequence(entropy=s.key, spawn_key=(c, k)))
                plain[r] = g.random((B, M))[off]
            np.testing.assert_array_equal(s.variates(t), plain)
            arms = np.arange(R * M).reshape(R, M) % 2
            np.testing.assert_array_equal(s.rewards_unchecked(t, arms), env._rewards(plain, arms))


def test_reward_seed_pairs_configurations():
    base = dict(instance="rankers", K=5, M=3, T=300, runs=3, n_checkpoints=5, reward_seed=11)
    one = run_config({**base, "learner": "independent-ucb", "protocol": "counter-exact"}, np.random.default_rng(0))
    two = run_config({**base, "learner": "independent-ucb", "protocol": "counter-exact", "runs": 5},
                     np.random.default_rng(99))
    np.testing.assert_array_equal(one.regret, two.regret[:3])  # exact counter: rewards decide everything
    other = run_config({**base, "learner": "independent-ucb", "protocol": "counter-exact", "reward_seed": 12},
                       np.random.default_rng(0))
    assert not np.array_equal(one.regret, other.regret)
    with pytest.raises(ValueError, match="reward_seed"):
        run_config({**base, "learner": "independent-ucb", "protocol": "counter-exact", "reward_seed": -1},
                   np.random.default_rng(0))


def test_master_worker_pooled_every_slot_is_the_complete_graph_consensus():
    env = ranker_bandit(6)
    T, M, R = 600, 4, 3
    mw = MasterWorkerUCB(create("counter-exact"), n_agents=M, n_arms=6, horizon=T, n_runs=R, aggregate="sums",
                         period=1).run(env, np.random.default_rng(3))
    dec = DecentralizedUCB(create("counter-exact"), graph=complete_graph(M), n_arms=6, horizon=T,
                           n_runs=R).run(env, np.random.default_rng(3))
    np.testing.assert_allclose(mw.regret, dec.regret)
    # the check can fail: averaging indices instead of pooling sums is another algorithm
    avg = MasterWorkerUCB(create("counter-exact"), n_agents=M, n_arms=6, horizon=T, n_runs=R,
                          period=1).run(env, np.random.default_rng(3))
    assert not np.allclose(avg.regret, dec.regret)
    assert mw.calibration["aggregate"] == "sums" and mw.calibration["period"] == 1
    assert mw.extras["communications"][-1] == T - 6  # every slot after the round robin


def test_master_worker_pooled_sums_private_runs_and_pools():
    env = ranker_bandit(4)
    kw = dict(n_agents=6, n_arms=4, horizon=2000, n_runs=6)
    pooled = MasterWorkerUCB(create("counter-hybrid", epsilon=10.0), aggregate="sums", **kw).run(
        env, np.random.default_rng(1))
    avg = MasterWorkerUCB(create("counter-hybrid", epsilon=10.0), **kw).run(env, np.random.default_rng(1))
    assert pooled.regret[:, -1].mean() < avg.regret[:, -1].mean()
    for width in ("fact1", "none"):
        res = MasterWorkerUCB(create("counter-hybrid", epsilon=1.0), aggregate="sums", privacy_width=width,
                              **kw).run(env, np.random.default_rng(1))
        assert np.all(np.isfinite(res.regret))


def test_master_worker_new_options_validated():
    kw = dict(n_agents=2, n_arms=3, horizon=10)
    with pytest.raises(ValueError, match="aggregate"):
        MasterWorkerUCB(create("counter-exact"), aggregate="median", **kw)
    with pytest.raises(ValueError, match="period"):
        MasterWorkerUCB(create("counter-exact"), period=0, **kw)


def test_ranker_table_ships_with_a_wheel_install(tmp_path):
    """A wheel (what `pip install git+...` builds) carries the table, and a non-editable
    install under another prefix finds it under <prefix>/share/fedbandit/data."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "fedbandit", src / "fedbandit", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "data", src / "data")
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(wheels), str(src)], check=True, capture_output=True)
    (wheel,) = wheels.glob("fedbandit-*.whl")
    assert any(n.endswith(".data/data/share/fedbandit/data/mslr_rankers.npz") for n in zipfile.ZipFile(wheel).namelist())
    prefix = tmp_path / "prefix"
    # --ignore-installed: without it pip "upgrades" the environment's own (editable) fedbandit,
    # uninstalling it from the running venv, which every later notebook kernel then lacks
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed", "-q",
                    "--prefix", str(prefix), str(wheel)], check=True, capture_output=True)
    (site,) = prefix.glob("lib/python*/site-packages")
    code = ("import fedbandit.envs.recommendation as r; p = r.ranker_table_path(); "
            "print(p); print(r.ranker_bandit(10).features[0]); print(r.__file__)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=tmp_path,
                         env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}).stdout.split()
    assert out[0].startswith(str(prefix)), out  # the installed copy, not the repository's data/
    assert out[2].startswith(str(site)), out
    assert out[1] == "134"

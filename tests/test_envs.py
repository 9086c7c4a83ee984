"""Tests of the linear contextual environments (fedbandit.envs.linear)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbandit.envs.linear import RealDataLinearEnv, SyntheticLinearEnv
from fedbandit.envs.mslr import DEFAULT_MSLR_PATH, MSLR_ANCHOR_URL_COLUMNS, build_mslr_instance, load_mslr_instance


def test_synthetic_shapes_and_normalization():
    env = SyntheticLinearEnv(4, 12, 5, n_runs=3, seed=0, shared_contexts=False, block_size=6)
    blocks = list(env.iter_blocks(15))
    assert [b.n_rounds for b in blocks] == [6, 6, 3]
    b = blocks[0]
    assert b.features.shape == (6, 3, 4, 12, 5)
    assert b.means.shape == (6, 3, 4, 12) and b.best.shape == (6, 3, 4) and b.noise.shape == (6, 3, 4)
    np.testing.assert_allclose(np.linalg.norm(b.features, axis=-1), 1.0)
    np.testing.assert_allclose(b.best, b.means.max(axis=-1))
    assert b.mask is None


def test_synthetic_instance_as_in_authors_code():
    env = SyntheticLinearEnv(2, 10, 4, seed=7, block_size=3)
    theta = env.theta
    assert theta[-1] == 0.5
    np.testing.assert_allclose(np.linalg.norm(theta[:-1]), 0.5)
    b = env.block(0)
    # First d arms: basis rows e_j + e_d (normalized), and e_d.
    basis = np.eye(4)
    basis[:, -1] = 1.0
    obs = basis / np.linalg.norm(basis, axis=1, keepdims=True)
    np.testing.assert_allclose(b.features[0, 0, 0, :4], obs)
    # Means from the raw features (u, 1): ⟨u, v⟩ + 0.5 = sqrt(2)·⟨x, θ⟩ for non-basis arms.
    x = b.features[0, 0, 0, 4:]
    np.testing.assert_allclose(b.means[0, 0, 0, 4:], np.sqrt(2) * x @ theta)
    np.testing.assert_allclose(b.means[0, 0, 0, :4], basis @ theta)
    # Random arms have the bias coordinate 1/sqrt(2).
    np.testing.assert_allclose(x[:, -1], 1 / np.sqrt(2))


def test_means_from_observed_option():
    env = SyntheticLinearEnv(2, 10, 4, seed=7, means_from_raw=False)
    b = env.block(0)
    np.testing.assert_allclose(b.means, b.features @ env.theta)


def test_common_random_numbers_and_run_independence():
    a = SyntheticLinearEnv(3, 8, 4, n_runs=2, seed=11, shared_contexts=False, block_size=5)
    b = SyntheticLinearEnv(3, 8, 4, n_runs=5, seed=11, shared_contexts=False, block_size=5)
    ba, bb = a.block(2), b.block(2)
    np.testing.assert_array_equal(ba.features, bb.features[:, :2])
    np.testing.assert_array_equal(ba.noise, bb.noise[:, :2])
    np.testing.assert_array_equal(a.theta, b.theta)
    # Deterministic: the same block twice.
    np.testing.assert_array_equal(a.block(2).features, ba.features)
    # Different seeds differ.
    c = SyntheticLinearEnv(3, 8, 4, n_runs=2, seed=12, shared_contexts=False, block_size=5)
    assert not np.allclose(c.block(2).features, ba.features)


def test_shared_contexts_have_one_run_axis_but_per_run_noise():
    env = SyntheticLinearEnv(3, 8, 4, n_runs=4, seed=1, block_size=5)
    b = env.block(0)
    assert b.features.shape[1] == 1 and env.context_runs == 1
    assert b.noise.shape[1] == 4
    assert not np.allclose(b.noise[:, 0], b.noise[:, 1])
    np.testing.assert_allclose(b.noise.std(), 0.5, rtol=0.3)


def test_generator_seed_is_accepted():
    env = SyntheticLinearEnv(2, 5, 3, seed=np.random.default_rng(3))
    env2 = SyntheticLinearEnv(2, 5, 3, seed=np.random.default_rng(3))
    np.testing.assert_array_equal(env.block(0).features, env2.block(0).features)


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(1, 4),
    k=st.integers(3, 9),
    d=st.integers(2, 5),
    runs=st.integers(1, 3),
    shared=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_property_features_unit_best_dominates(m, k, d, runs, shared, seed):
    env = SyntheticLinearEnv(m, max(k, d), d, n_runs=runs, shared_contexts=shared, seed=seed, block_size=2)
    b = env.block(0)
    np.testing.assert_allclose(np.linalg.norm(b.features, axis=-1), 1.0)
    assert np.all(b.best[..., None] >= b.means - 1e-12)
    assert np.all(np.abs(b.means) <= 1.0 + 1e-9)  # |⟨θ, raw⟩| ≤ ‖θ‖·sqrt(2) = 1


def test_synthetic_bad_input():
    with pytest.raises(ValueError, match="n_agents"):
        SyntheticLinearEnv(0, 5, 3)
    with pytest.raises(ValueError, match="dim"):
        SyntheticLinearEnv(2, 5, 1)
    with pytest.raises(ValueError, match="n_arms"):
        SyntheticLinearEnv(2, 3, 5)
    with pytest.raises(ValueError, match="noise_std"):
        SyntheticLinearEnv(2, 5, 3, noise_std=-1)
    with pytest.raises(TypeError, match="seed"):
        SyntheticLinearEnv(2, 5, 3, seed="x")
    with pytest.raises(ValueError, match="horizon"):
        list(SyntheticLinearEnv(2, 5, 3).iter_blocks(0))


# -- real data ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mslr():
    return load_mslr_instance()


def test_stored_mslr_instance(mslr):
    assert DEFAULT_MSLR_PATH.exists()
    assert mslr["features"].shape == (10000, 57)
    assert len(MSLR_ANCHOR_URL_COLUMNS) == 57
    assert int(mslr["query"].max()) + 1 == 86
    assert set(np.unique(mslr["labels"])) <= {0, 1, 2, 3, 4}
    assert np.count_nonzero(mslr["theta"]) >= 1
    np.testing.assert_allclose(mslr["features"][:, 0], 0.01)  # the authors' intercept column


def test_real_env_agents_own_disjoint_query_blocks(mslr):
    env = RealDataLinearEnv(mslr, n_agents=10, n_runs=2, seed=0, block_size=20)
    assert env.queries_per_agent == 8 and env.dim == 57
    b = env.block(0)
    assert b.mask is not None and b.features.shape[:4] == (20, 2, 10, env.n_arms)
    # Means are -inf exactly on padding, best is the max over real documents.
    assert np.all(np.isneginf(b.means) == ~b.mask)
    np.testing.assert_allclose(b.best, np.where(b.mask, b.means, -np.inf).max(axis=-1))
    # Every agent's arms come from a query of its own block: identify queries by their
    # (count, first feature row).
    counts = b.mask.sum(axis=-1)
    for i in range(10):
        own = env.docs_per_query[8 * i : 8 * i + 8]
        assert np.all(np.isin(counts[:, :, i], own))
    np.testing.assert_allclose(np.linalg.norm(b.features[b.mask], axis=-1), 1.0)
    assert np.all(b.noise == 0)


def test_real_env_draws_every_run_from_one_index_of_the_query_tables(mslr):
    """The real environment's blocks (the runs' queries stacked, one index of the query tables, the
    best mean a query's) equal the base class's: every run's contexts drawn and stacked, the best the
    maximum over the arms; bit for bit, and the fallback (a random subset of the documents) is that."""
    from fedbandit.envs.linear import _LinearEnvBase

    for max_arms in (None, 20):
        env = RealDataLinearEnv(mslr, n_agents=10, n_runs=3, seed=2, max_arms=max_arms, block_size=7)
        gens = [env.block_generators(1)[0] for _ in range(2)]
        got = env._run_contexts(gens[0], 7)
        want = _LinearEnvBase._run_contexts(env, gens[1], 7)
        assert got[0] is None and want[0] is None
        for g, w in zip(got[1:], want[1:]):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)


def test_real_env_max_arms(mslr):
    env = RealDataLinearEnv(mslr, n_agents=10, max_arms=20, seed=1, block_size=10)
    b = env.block(0)
    assert b.features.shape[3] == 20
    big = env.docs_per_query[:80] >= 20
    assert big.any()
    assert np.all(b.mask.sum(axis=-1) <= 20)


def test_build_mslr_instance_from_directory(tmp_path):
    rng = np.random.default_rng(0)
    lines = []
    for q in range(3):
        for _ in range(4):
            feats = " ".join(f"{k}:{rng.random():.4f}" for k in range(1, 137))
            lines.append(f"{rng.integers(0, 5)} qid:{100 + q} {feats}")
    (tmp_path / "msn1.fold1.train.5k.txt").write_text("\n".join(lines[:8]) + "\n")
    (tmp_path / "msn1.fold1.test.5k.txt").write_text("\n".join(lines[8:]) + "\n")
    inst = build_mslr_instance(tmp_path, lasso_alpha=0.01)
    assert inst["features"].shape == (12, 57)
    np.testing.assert_array_equal(inst["query"], [0] * 4 + [1] * 4 + [2] * 4)
    assert inst["theta"].shape == (57,)


def test_build_mslr_bad_source(tmp_path):
    with pytest.raises(FileNotFoundError):
        build_mslr_instance(tmp_path / "missing.tar.gz")
    bad = tmp_path / "x.tar.gz"
    bad.write_bytes(b"not a tarball")
    with pytest.raises(ValueError, match="SHA-256"):
        build_mslr_instance(bad)
    with pytest.raises(FileNotFoundError, match="lacks"):
        build_mslr_instance(tmp_path)


def test_real_env_bad_input(mslr):
    with pytest.raises(TypeError, match="instance"):
        RealDataLinearEnv({"features": mslr["features"]})
    bad = dict(mslr, theta=np.zeros(3))
    with pytest.raises(ValueError, match="theta"):
        RealDataLinearEnv(bad)
    with pytest.raises(ValueError, match="n_agents"):
        RealDataLinearEnv(mslr, n_agents=100)


def test_mslr_instance_ships_with_a_non_editable_install(tmp_path):
    """A wheel (what `pip install git+...` on Colab builds) carries the stored instance, and
    mslr_path finds it under <prefix>/share/fedbandit/data when data/ is absent."""
    import shutil
    import subprocess
    import sys
    import zipfile
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    src = tmp_path / "src"  # build from a copy: setuptools writes build/ next to pyproject.toml
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(root / name, src / name)
    shutil.copytree(root / "fedbandit", src / "fedbandit", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(root / "data", src / "data")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(src)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("fedbandit-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith(".data/data/share/fedbandit/data/mslr_rankeval_sample.npz") for n in names), names


def test_reward_values_hold_every_reward_drawn():
    """A K-armed bandit's reward_values (what the consensus learners read to skip a clip that moves nothing) hold
    every reward its stream pays, and each of them is paid; None for Gaussian rewards."""
    from fedbandit.envs import ranker_bandit
    from fedbandit.envs.multi_armed import BernoulliBandit, GaussianBandit

    for env in (BernoulliBandit(np.array([0.2, 0.5, 0.9])), ranker_bandit(6)):
        stream = env.stream(4, 3, np.random.default_rng(0))
        arms = np.random.default_rng(1).integers(0, env.n_arms, size=(4, 3))
        paid = np.unique(np.concatenate([stream.rewards(t, arms).reshape(-1) for t in range(1, 3001)]))
        assert set(paid.tolist()) == set(env.reward_values.tolist()), env.kind
    assert GaussianBandit(np.array([0.0, 1.0])).reward_values is None


@pytest.mark.parametrize("n_values", [2, 3, 5, 9, 300])
def test_categorical_rewards_are_the_inverse_cdf_written_out(n_values):
    """CategoricalBandit._rewards (one gather of every threshold, the rows' 0/1 bytes added; the
    per-threshold loop past 255 thresholds) pays, entry by entry, values[#{thresholds <= U}] of the
    pulled arm, counted here one threshold at a time, with U often exactly on a threshold."""
    from fedbandit.envs.multi_armed import CategoricalBandit

    rng = np.random.default_rng(n_values)
    env = CategoricalBandit.from_distributions(np.sort(rng.random(n_values)), rng.dirichlet(np.ones(n_values), size=6))
    cum = np.cumsum(env.probs, axis=1)
    for shape in ((7, 5), (1, 3), (40,)):
        arms = rng.integers(0, env.n_arms, shape)
        u = rng.random(shape)
        on = rng.random(shape) < 0.3  # U exactly a threshold of the pulled arm
        u[on] = cum[arms[on], rng.integers(0, n_values - 1, shape)[on]]
        plain = np.empty(shape)
        for e in np.ndindex(*shape):
            plain[e] = env.values[sum(u[e] >= cum[arms[e], j] for j in range(n_values - 1))]
        assert np.array_equal(env._rewards(u, arms), plain)

"""Environments generated once and shared by every learner that runs on them (fedbandit.envs.sharing).

What must hold: a block yielded in pieces is the block drawn whole; a configuration run in
lockstep with others returns exactly what it returns alone (same regret, same cache entry);
the environment of a lockstep group is generated once, not once per configuration.
"""

import numpy as np
import pytest

from fedbandit._grid import _Task, _units
from fedbandit.envs import linear as linear_env
from fedbandit.envs import make_environment
from fedbandit.envs.linear import SyntheticLinearEnv
from fedbandit.envs.sharing import SharedEnvironment, run_in_lockstep, share, task_clock
from fedbandit.experiments import run_config, run_grid
from fedbandit.experiments.grid import environment_key

BASE = dict(instance="synthetic", M=6, K=12, d=4, runs=3, env_seed=2, T=90, B=10)


def _concat(blocks, name):
    return np.concatenate([getattr(b, name) for b in blocks])


@pytest.mark.parametrize("shared", [True, False])
def test_pieces_are_the_whole_block(monkeypatch, shared):
    # pieces of 4 rounds (as if PIECE_BYTES were tiny) against blocks drawn whole
    env = SyntheticLinearEnv(3, 7, 4, n_runs=2, seed=9, shared_contexts=shared, block_size=10)
    monkeypatch.setattr(linear_env, "PIECE_BYTES", 4 * env.context_runs * 3 * 7 * 4 * 8)
    pieces = list(env.iter_blocks(27))
    assert [p.n_rounds for p in pieces] == [4, 4, 2, 4, 4, 2, 4, 3]
    assert [p.start for p in pieces] == [0, 4, 8, 10, 14, 18, 20, 24]
    whole = [env.block(0), env.block(1), env.block(2, 7)]
    for name in ("features", "means", "best", "noise"):
        np.testing.assert_array_equal(_concat(pieces, name), _concat(whole, name))


def test_head_is_the_shorter_block():
    env = SyntheticLinearEnv(3, 7, 4, n_runs=2, seed=9, block_size=10)
    head, short = env.block(1).head(3), env.block(1, 3)
    for name in ("features", "means", "best", "noise"):
        np.testing.assert_array_equal(getattr(head, name), getattr(short, name))


def test_share_outside_a_group_returns_the_environment():
    env = SyntheticLinearEnv(3, 7, 4, seed=1)
    assert share(env) is env
    assert make_environment(dict(BASE)).__class__ is SyntheticLinearEnv


def _solo_and_lockstep(configs):
    solo = [run_config(dict(c), np.random.default_rng(i)) for i, c in enumerate(configs)]
    outcomes = run_in_lockstep([lambda c=c, i=i: run_config(dict(c), np.random.default_rng(i))
                                for i, c in enumerate(configs)])
    assert all(ok for ok, *_ in outcomes), [v for ok, v, *_ in outcomes if not ok]
    return solo, [v for _, v, _, _ in outcomes]


def test_lockstep_results_equal_solo_results(monkeypatch):
    configs = [
        dict(BASE, learner="fixed-batch", protocol="non-private"),
        dict(BASE, learner="fixed-batch", protocol="silo-ldp", epsilon=1.0, delta=0.1),
        dict(BASE, learner="fixed-batch", protocol="silo-ldp", epsilon=1.0, delta=0.1, local_updates=True),
        dict(BASE, learner="super-agent", protocol="central", epsilon=1.0, delta=0.1, T=40),  # a shorter horizon
        dict(BASE, learner="independent", T=45),  # ends inside a piece
        dict(BASE, learner="feducb", protocol="dp20", epsilon=1.0, delta=0.1),
        dict(BASE, learner="concurrent-linucb", protocol="central", epsilon=4.0, delta=1e-5),
    ]
    for c in configs:
        if c["learner"] != "fixed-batch":
            c.pop("B")
    monkeypatch.setattr(linear_env, "PIECE_BYTES", 8 * 6 * 12 * 4 * 8)  # pieces of 8 rounds
    solo, together = _solo_and_lockstep(configs)
    for c, a, b in zip(configs, solo, together):
        np.testing.assert_array_equal(a.regret, b.regret, err_msg=c["learner"])
        assert a.accounting == b.accounting and a.communication == b.communication


def test_lockstep_draws_the_environment_once(monkeypatch):
    configs = [dict(BASE, learner="fixed-batch", protocol=p) for p in ("non-private", "central", "silo-ldp")]
    for c in configs[1:]:
        c.update(epsilon=1.0, delta=0.1)
    calls = []
    original = SyntheticLinearEnv._contexts
    monkeypatch.setattr(SyntheticLinearEnv, "_contexts", lambda self, rng, n: calls.append(n) or original(self, rng, n))
    outcomes = run_in_lockstep([lambda c=c: run_config(dict(c), np.random.default_rng(0)) for c in configs])
    assert all(ok for ok, *_ in outcomes)
    assert sum(calls) == BASE["T"], "the group drew its environment more than once"


def test_real_data_environment_shared(mslr_available):
    base = dict(instance="real", M=4, T=30, B=10, runs=2, env_seed=0, beta_scale=0.1, noise_bound=1.0, reward_bound=1.5)
    configs = [dict(base, learner="fixed-batch", protocol="non-private"),
               dict(base, learner="fixed-batch", protocol="silo-ldp", epsilon=1.0, delta=0.1),
               dict(base, learner="fixed-batch", protocol="silo-ldp", epsilon=1.0, delta=0.1, T=20)]
    solo, together = _solo_and_lockstep(configs)
    for a, b in zip(solo, together):
        np.testing.assert_array_equal(a.regret, b.regret)


@pytest.fixture
def mslr_available():
    from fedbandit.envs.mslr import DEFAULT_MSLR_PATH

    if not DEFAULT_MSLR_PATH.exists():
        pytest.skip("the shipped MSLR sample is absent")


def test_shared_blocks_are_read_only():
    def consumer():
        env = make_environment(dict(BASE))
        assert isinstance(env, SharedEnvironment)
        block = next(iter(env.iter_blocks(5)))
        block.noise[0, 0, 0] = 1.0  # a learner must not write into a block others read

    ((ok, err, _, _),) = run_in_lockstep([consumer])
    assert not ok and isinstance(err, ValueError) and "read-only" in str(err)


def test_a_failing_task_does_not_stop_the_others():
    def fails():
        make_environment(dict(BASE)).iter_blocks(5)
        raise RuntimeError("boom")

    outcomes = run_in_lockstep([fails, lambda: run_config(dict(BASE, learner="fixed-batch", protocol="non-private"),
                                                          np.random.default_rng(0))])
    assert not outcomes[0][0] and str(outcomes[0][1]) == "boom"
    assert outcomes[1][0] and outcomes[1][1].regret.shape[0] == BASE["runs"]


def test_task_clock_counts_each_task_its_own_time():
    def busy(n):
        t0 = task_clock()[0]
        x = 0.0
        for i in range(n):
            x += i
        return task_clock()[0] - t0

    outcomes = run_in_lockstep([lambda: busy(2_000_000), lambda: busy(200_000)])
    (_, long_own, long_cpu, _), (_, short_own, short_cpu, _) = outcomes
    assert long_cpu > short_cpu > 0 and long_own <= long_cpu + 1e-3 and short_own <= short_cpu + 1e-3


def test_nested_lockstep_is_refused():
    ((ok, err, _, _),) = run_in_lockstep([lambda: run_in_lockstep([lambda: None])])
    assert not ok and isinstance(err, RuntimeError)


def test_units_group_configurations_of_one_environment():
    configs = [dict(BASE, learner="fixed-batch", protocol="non-private", tag=str(i)) for i in range(5)]
    configs += [dict(BASE, env_seed=3, learner="fixed-batch", protocol="non-private")]
    configs += [{"spec": "something else"}]
    tasks = [_Task(str(i), i, 0, c, np.random.SeedSequence(i)) for i, c in enumerate(configs)]
    assert environment_key(configs[0]) == environment_key(configs[4]) != environment_key(configs[5])
    assert environment_key(configs[6]) is None
    units = _units(tasks, 1, environment_key)
    assert sorted(len(u) for u in units) == [1, 1, 5]
    units = _units(tasks, 2, environment_key)  # two workers: the group of five is split so that both have work
    assert sorted(len(u) for u in units) == [1, 1, 2, 3]


def test_run_grid_shared_and_unshared_give_the_same_results_and_cache_entries(tmp_path):
    configs = [dict(BASE, learner="fixed-batch", protocol="non-private"),
               dict(BASE, learner="fixed-batch", protocol="silo-ldp", epsilon=1.0, delta=0.1),
               dict(BASE, learner="independent")]
    configs[2].pop("B")
    kw = dict(seeds=2, progress=False, backend="serial")
    shared = run_grid(run_config, configs, cache_dir=tmp_path / "a", **kw)
    alone = run_grid(run_config, configs, cache_dir=tmp_path / "b", share_environments=False, **kw)
    for row_a, row_b in zip(shared, alone):
        for a, b in zip(row_a, row_b):
            np.testing.assert_array_equal(a.regret, b.regret)
    names = sorted(p.name for p in (tmp_path / "a").rglob("*.pkl"))
    assert names == sorted(p.name for p in (tmp_path / "b").rglob("*.pkl")) and len(names) == 6
    # the entries written in lockstep are the unshared call's cache hits
    again = run_grid(run_config, configs, cache_dir=tmp_path / "a", share_environments=False, **kw)
    assert all(x.cpu_seconds == y.cpu_seconds for ra, rb in zip(shared, again) for x, y in zip(ra, rb))


def test_run_grid_failure_in_a_unit_keeps_the_others(tmp_path):
    configs = [dict(BASE, learner="fixed-batch", protocol="non-private"),
               dict(BASE, learner="fixed-batch", protocol="silo-ldp", epsilon=-1.0, delta=0.1)]
    with pytest.raises(ValueError, match="epsilon") as info:
        run_grid(run_config, configs, cache_dir=tmp_path, progress=False, backend="serial")
    assert any("raised by func at configs[1]" in note for note in info.value.__notes__)
    assert len(list(tmp_path.rglob("*.pkl"))) == 1  # the other configuration's result was stored


def test_run_grid_share_environments_must_be_a_bool():
    with pytest.raises(TypeError, match="share_environments"):
        run_grid(run_config, [dict(BASE, learner="fixed-batch", protocol="non-private")], cache_dir=False,
                 progress=False, share_environments="yes")


def test_a_grid_inside_a_lockstep_task_runs_its_points_one_by_one(tmp_path):
    configs = [dict(BASE, learner="fixed-batch", protocol="non-private", tag=str(i)) for i in range(3)]

    def task():
        return run_grid(run_config, configs, cache_dir=False, progress=False, backend="serial")

    ((ok, value, _, _),) = run_in_lockstep([task])
    assert ok, value
    alone = run_grid(run_config, configs, cache_dir=False, progress=False, backend="serial")
    for a, b in zip(value, alone):
        np.testing.assert_array_equal(a[0].regret, b[0].regret)

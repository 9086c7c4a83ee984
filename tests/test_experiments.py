"""Tests of the experiment runner (fedbandit.experiments.grid, issue 2).

Reproducibility across backends (serial, joblib processes, a real Dask LocalCluster on
loopback), invariance to grid order and sub-grids, the on-disk cache (hits, invalidation,
corrupt entries, KeyboardInterrupt, a subprocess killed with SIGKILL mid-grid) and
argument validation.  No test is statistical: every comparison is exact.
"""

from __future__ import annotations

import ast
import importlib
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbandit._grid import _MAGIC
from fedbandit.experiments.grid import config_hash, default_cache_dir, make_rng, run_grid, stack_results

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:  # worker processes inherit sys.path and import the helpers by name
    sys.path.insert(0, str(TESTS_DIR))
import _helpers_experiments as hx  # noqa: E402

CONFIGS = hx.GRID_CONFIGS
N_SEEDS = 3


def assert_results_equal(a, b):
    """Bit-identical grids of logged_draw results (same values, dtypes and shapes)."""
    assert len(a) == len(b)
    for row_a, row_b in zip(a, b):
        assert len(row_a) == len(row_b)
        for ra, rb in zip(row_a, row_b):
            assert ra.keys() == rb.keys()
            for k in ra.keys() - {"pid"}:
                if isinstance(ra[k], np.ndarray):
                    assert ra[k].dtype == rb[k].dtype and ra[k].shape == rb[k].shape
                    assert ra[k].tobytes() == rb[k].tobytes(), k
                else:
                    assert ra[k] == rb[k], k


@pytest.fixture
def call_log(tmp_path, monkeypatch):
    """Path of the call log written by hx.logged_draw (from any process)."""
    path = tmp_path / "calls.log"
    monkeypatch.setenv(hx.CALL_LOG_ENV, str(path))
    monkeypatch.delenv(hx.SLEEP_ENV, raising=False)
    return path


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ("FEDBANDIT_BACKEND", "FEDBANDIT_N_JOBS", "FEDBANDIT_MAX_WORKERS", "FEDBANDIT_DASK_SCHEDULER",
                 "FEDBANDIT_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def reference():
    """The grid evaluated serially without cache: the reference every other run must equal."""
    return run_grid(hx.logged_draw, CONFIGS, N_SEEDS, cache_dir=False, progress=False)


@pytest.fixture(scope="module")
def dask_cluster():
    distributed = pytest.importorskip("distributed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
            silence_logs=50,
        )
    yield cluster
    cluster.close()


# ---------------------------------------------------------------------------------------
# Reproducibility
# ---------------------------------------------------------------------------------------


def test_result_is_func_at_make_rng(reference):
    for i, config in enumerate(CONFIGS):
        for s in range(N_SEEDS):
            assert_results_equal([[reference[i][s]]], [[hx.logged_draw(config, make_rng(config, s))]])


def test_streams_are_distinct_across_configs_and_seeds(reference):
    draws = [r["integers"].tobytes() for row in reference for r in row]
    assert len(set(draws)) == len(draws)


def test_joblib_processes_bit_identical(reference):
    out = run_grid(hx.logged_draw, CONFIGS, N_SEEDS, backend="joblib", n_jobs=2, cache_dir=False, progress=False)
    assert_results_equal(out, reference)
    assert os.getpid() not in {r["pid"] for row in out for r in row}  # really in worker processes


def test_dask_local_cluster_bit_identical(reference, dask_cluster):
    """A real LocalCluster (2 worker processes on 127.0.0.1), addressed by its address."""
    out = run_grid(
        hx.logged_draw, CONFIGS, N_SEEDS, scheduler=dask_cluster.scheduler_address, cache_dir=False, progress=False
    )
    assert_results_equal(out, reference)
    assert os.getpid() not in {r["pid"] for row in out for r in row}


def test_dask_client_object_and_env_address(reference, dask_cluster, monkeypatch, tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.Client(dask_cluster, set_as_default=False) as client:
        out = run_grid(hx.logged_draw, CONFIGS[:2], N_SEEDS, backend="dask", scheduler=client, cache_dir=False, progress=False)
        assert_results_equal(out, reference[:2])
        assert client.status == "running"  # a caller's client is left open
    monkeypatch.setenv("FEDBANDIT_BACKEND", "dask")
    monkeypatch.setenv("FEDBANDIT_DASK_SCHEDULER", dask_cluster.scheduler_address)
    out = run_grid(hx.logged_draw, CONFIGS[2:], N_SEEDS, cache_dir=tmp_path, progress=False)
    assert_results_equal(out, reference[2:])


def test_dask_without_scheduler_starts_a_local_cluster(reference):
    out = run_grid(hx.logged_draw, CONFIGS[:1], 2, backend="dask", n_jobs=1, cache_dir=False, progress=False)
    assert_results_equal(out, [reference[0][:2]])
    assert os.getpid() not in {r["pid"] for r in out[0]}


def test_grid_order_and_subgrid_invariance(reference):
    order = [2, 0, 3, 1]
    out = run_grid(hx.logged_draw, [CONFIGS[i] for i in order], N_SEEDS, cache_dir=False, progress=False)
    assert_results_equal(out, [reference[i] for i in order])
    # A single config and a subset of seeds reproduce the corresponding entries.
    out = run_grid(hx.logged_draw, [CONFIGS[3]], [2, 0], cache_dir=False, progress=False)
    assert_results_equal(out, [[reference[3][2], reference[3][0]]])
    # seeds=n is seeds=range(n); numpy ints are accepted.
    out = run_grid(hx.logged_draw, CONFIGS, np.arange(N_SEEDS), cache_dir=False, progress=False)
    assert_results_equal(out, reference)


def test_config_content_not_form_defines_stream(reference):
    """Key order and numpy scalars do not change the stream; the value type does."""
    c = CONFIGS[1]
    variant = {"n": np.int64(c["n"]), "label": np.str_(c["label"]), "mu": np.float64(c["mu"])}
    out = run_grid(hx.logged_draw, [variant], N_SEEDS, cache_dir=False, progress=False)
    assert_results_equal(out, [reference[1]])
    assert config_hash(variant) == config_hash(c)
    assert config_hash({"a": 1}) != config_hash({"a": 1.0}) != config_hash({"a": True})


def test_base_seed_changes_every_stream(reference):
    out = run_grid(hx.logged_draw, CONFIGS, N_SEEDS, cache_dir=False, progress=False, base_seed=1)
    for row_a, row_b in zip(out, reference):
        for a, b in zip(row_a, row_b):
            assert not np.array_equal(a["integers"], b["integers"])


json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=False), st.text(max_size=5)
)
json_value = st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=3), max_leaves=6)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.text(max_size=4), json_value, min_size=1, max_size=5), st.integers(0, 2**31))
def test_hash_and_stream_ignore_key_order(config, seed):
    reordered = dict(reversed(list(config.items())))
    assert config_hash(reordered) == config_hash(config)
    assert make_rng(reordered, seed).integers(2**63) == make_rng(config, seed).integers(2**63)


def test_duplicates_run_once_and_func_gets_a_copy(call_log):
    def mutating(config, rng):
        config["x"].append(1)  # must not leak to the caller or to the next grid point
        hx.logged_draw({"mu": 0.0, "n": 2, "label": ""}, rng)
        return len(config["x"])

    config = {"x": []}
    out = run_grid(mutating, [config, {"x": []}], [0, 0, 1], cache_dir=False, progress=False)
    assert out == [[1, 1, 1], [1, 1, 1]]
    assert config == {"x": []}
    assert len(hx.read_calls(call_log)) == 2  # two distinct grid points


def test_func_errors_name_the_grid_point():
    def fails_on_two(config, rng):
        if config["k"] == 2:
            raise ArithmeticError("bad point")
        return config["k"]

    with pytest.raises(ArithmeticError, match="bad point") as info:
        run_grid(fails_on_two, [{"k": 1}, {"k": 2}], 2, cache_dir=False, progress=False)
    assert any("configs[1]" in note and "seed=0" in note for note in info.value.__notes__)


def test_stack_results(reference):
    arr = stack_results(reference, "normal")
    assert arr.shape == (len(CONFIGS), N_SEEDS, CONFIGS[0]["n"])
    assert np.array_equal(arr[2, 1], reference[2][1]["normal"])
    assert stack_results([[1.0, 2.0], [3.0, 4.0]]).shape == (2, 2)
    with pytest.raises(ValueError, match="same non-zero number of seeds"):
        stack_results([[1.0], [1.0, 2.0]])
    with pytest.raises(ValueError, match="different shapes"):
        stack_results([[np.zeros(2), np.zeros(3)]])


def test_progress_bar(tmp_path, capsys):
    run_grid(hx.logged_draw, CONFIGS[:2], 2, cache_dir=False, progress=True)
    assert "4/4" in capsys.readouterr().err
    run_grid(hx.logged_draw, CONFIGS[:2], 2, cache_dir=False, progress=False)
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------------------------------
# Cache
# ---------------------------------------------------------------------------------------


def _entries(cache_dir: Path) -> list[Path]:
    return sorted(cache_dir.rglob("*.pkl"))


def test_cache_second_run_calls_nothing(tmp_path, call_log, reference):
    first = run_grid(hx.logged_draw, CONFIGS, N_SEEDS, cache_dir=tmp_path / "c", progress=False)
    n_points = len(CONFIGS) * N_SEEDS
    assert len(hx.read_calls(call_log)) == n_points
    assert len(_entries(tmp_path / "c")) == n_points
    second = run_grid(hx.logged_draw, CONFIGS, N_SEEDS, cache_dir=tmp_path / "c", progress=False)
    assert len(hx.read_calls(call_log)) == n_points  # zero new calls
    assert_results_equal(first, reference)
    assert_results_equal(second, reference)
    # A reordered grid on the joblib backend is also pure cache hits (computed here, not
    # in a worker).
    third = run_grid(hx.logged_draw, CONFIGS[::-1], N_SEEDS, cache_dir=tmp_path / "c", backend="joblib", progress=False)
    assert {r["pid"] for row in third for r in row} == {os.getpid()}
    assert_results_equal(third, reference[::-1])
    # A new configuration or seed computes only the new points.
    extra = {"mu": 9.0, "n": 5, "label": "new"}
    run_grid(hx.logged_draw, [*CONFIGS, extra], N_SEEDS + 1, cache_dir=tmp_path / "c", progress=False)
    assert len(hx.read_calls(call_log)) == (len(CONFIGS) + 1) * (N_SEEDS + 1)


def test_cache_key_includes_version_and_base_seed(tmp_path, call_log):
    kw = dict(cache_dir=tmp_path, progress=False)
    run_grid(hx.logged_draw, CONFIGS[:2], 2, version="1", **kw)
    run_grid(hx.logged_draw, CONFIGS[:2], 2, version="1", **kw)
    assert len(hx.read_calls(call_log)) == 4
    run_grid(hx.logged_draw, CONFIGS[:2], 2, version="2", **kw)
    assert len(hx.read_calls(call_log)) == 8
    run_grid(hx.logged_draw, CONFIGS[:2], 2, version="2", base_seed=5, **kw)
    assert len(hx.read_calls(call_log)) == 12


def test_default_version_follows_the_source(tmp_path, monkeypatch):
    """version=None: editing the function's source invalidates its entries."""
    module = tmp_path / "mods" / "exp_source_mod.py"
    module.parent.mkdir()
    monkeypatch.syspath_prepend(str(module.parent))
    counter = tmp_path / "count"

    def write(body):
        module.write_text(
            textwrap.dedent(
                f"""
                def experiment(config, rng):
                    with open({str(counter)!r}, "a") as fh:
                        fh.write("x")
                    return {body}
                """
            )
        )

    def n_calls():
        return len(counter.read_text()) if counter.exists() else 0

    write("rng.normal()")
    mod = importlib.import_module("exp_source_mod")
    first = run_grid(mod.experiment, [{"a": 1}], 2, cache_dir=tmp_path / "c", progress=False)
    run_grid(mod.experiment, [{"a": 1}], 2, cache_dir=tmp_path / "c", progress=False)
    assert n_calls() == 2
    write("rng.normal() + 1000.0")
    mod = importlib.reload(mod)
    second = run_grid(mod.experiment, [{"a": 1}], 2, cache_dir=tmp_path / "c", progress=False)
    assert n_calls() == 4
    assert second[0][0] == pytest.approx(first[0][0] + 1000.0)


def test_function_without_source_warns(tmp_path):
    namespace = {}
    exec("def nosource(config, rng):\n    return rng.random()\n", namespace)
    with pytest.warns(UserWarning, match="cannot read the source"):
        run_grid(namespace["nosource"], [{"a": 1}], 1, cache_dir=tmp_path, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no cache, no warning
        run_grid(namespace["nosource"], [{"a": 1}], 1, cache_dir=False, progress=False)


def test_corrupt_entries_are_recomputed_never_loaded(tmp_path, call_log, reference):
    cache = tmp_path / "c"
    run_grid(hx.logged_draw, CONFIGS, N_SEEDS, cache_dir=cache, progress=False)
    entries = _entries(cache)
    garbage, truncated, wrong_key, header_only, donor = entries[:5]
    garbage.write_bytes(os.urandom(200))
    truncated.write_bytes(truncated.read_bytes()[: truncated.stat().st_size // 2])
    wrong_key.write_bytes(donor.read_bytes())  # valid checksum, but another grid point
    header_only.write_bytes(_MAGIC)
    # A leftover temporary file of a killed writer (a truncated pickle) is never read.
    (garbage.parent / f".{donor.name}.abc123.tmp").write_bytes(pickle.dumps(("x", 1))[:5])
    n_before = len(hx.read_calls(call_log))
    with pytest.warns(UserWarning, match="ignoring cache entry") as record:
        out = run_grid(hx.logged_draw, CONFIGS, N_SEEDS, cache_dir=cache, progress=False)
    assert len([w for w in record if "ignoring cache entry" in str(w.message)]) == 4
    assert len(hx.read_calls(call_log)) - n_before == 4
    assert_results_equal(out, reference)
    # The entries were rewritten: a third run is clean and calls nothing.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = run_grid(hx.logged_draw, CONFIGS, N_SEEDS, cache_dir=cache, progress=False)
    assert len(hx.read_calls(call_log)) - n_before == 4
    assert_results_equal(out, reference)


def test_keyboard_interrupt_keeps_finished_entries(tmp_path):
    calls = []
    stop_at = {"call": 3}

    def interruptible(config, rng):
        calls.append(config["k"])
        if len(calls) == stop_at["call"]:
            raise KeyboardInterrupt
        return rng.random()

    configs = [{"k": k} for k in range(5)]
    with pytest.raises(KeyboardInterrupt):
        run_grid(interruptible, configs, 1, cache_dir=tmp_path, progress=False)
    assert calls == [0, 1, 2] and len(_entries(tmp_path)) == 2
    stop_at["call"] = -1
    out = run_grid(interruptible, configs, 1, cache_dir=tmp_path, progress=False)
    assert calls == [0, 1, 2, 2, 3, 4]  # only the unfinished points ran again
    assert out == run_grid(interruptible, configs, 1, cache_dir=False, progress=False)


def test_unpicklable_result(tmp_path):
    def returns_lambda(config, rng):
        return lambda: None

    with pytest.raises(TypeError, match="cannot be pickled"):
        run_grid(returns_lambda, [{"a": 1}], 1, cache_dir=tmp_path, progress=False)
    assert callable(run_grid(returns_lambda, [{"a": 1}], 1, cache_dir=False, progress=False)[0][0])


def test_default_cache_dir(tmp_path, monkeypatch, call_log):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "chapters").mkdir()
    monkeypatch.chdir(tmp_path / "chapters")  # notebooks execute in their own folder
    assert default_cache_dir() == tmp_path / "_cache" / "experiments"
    run_grid(hx.logged_draw, CONFIGS[:1], 2, progress=False)
    assert len(_entries(tmp_path / "_cache" / "experiments")) == 2
    monkeypatch.setenv("FEDBANDIT_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert default_cache_dir() == tmp_path / "elsewhere"
    run_grid(hx.logged_draw, CONFIGS[:1], 2, progress=False)
    assert len(_entries(tmp_path / "elsewhere")) == 2


def test_env_backend_and_n_jobs(monkeypatch, reference):
    monkeypatch.setenv("FEDBANDIT_BACKEND", "joblib")
    monkeypatch.setenv("FEDBANDIT_N_JOBS", "2")
    out = run_grid(hx.logged_draw, CONFIGS, N_SEEDS, cache_dir=False, progress=False)
    assert_results_equal(out, reference)
    assert os.getpid() not in {r["pid"] for row in out for r in row}


def test_max_workers_caps_the_workers_a_grid_asks_for(monkeypatch, reference):
    """FEDBANDIT_MAX_WORKERS caps an explicit n_jobs: with one, a joblib grid runs in this process (the book's
    build sets it so that two pages side by side start no more processes than cores); the results do not change."""
    monkeypatch.setenv("FEDBANDIT_MAX_WORKERS", "1")
    out = run_grid(hx.logged_draw, CONFIGS, N_SEEDS, backend="joblib", n_jobs=2, cache_dir=False, progress=False)
    assert_results_equal(out, reference)
    assert {r["pid"] for row in out for r in row} == {os.getpid()}
    monkeypatch.setenv("FEDBANDIT_MAX_WORKERS", "2")
    out = run_grid(hx.logged_draw, CONFIGS, N_SEEDS, backend="joblib", n_jobs=-1, cache_dir=False, progress=False)
    assert_results_equal(out, reference)
    assert os.getpid() not in {r["pid"] for row in out for r in row}


def test_each_notebook_gets_its_share_of_the_cores_for_its_grids(tmp_path, monkeypatch):
    """execute_missing runs `jobs` notebooks at a time and gives each notebook's grids cores // jobs workers (at
    least one), through the kernel's FEDBANDIT_MAX_WORKERS; a value the user set is kept."""
    import nbformat

    from fedbandit.book import execution_cache

    assert [execution_cache._grid_workers(jobs, cores=2) for jobs in (1, 2, 3)] == [2, 1, 1]
    assert [execution_cache._grid_workers(jobs, cores=8) for jobs in (1, 2, 3)] == [8, 4, 2]
    monkeypatch.setattr(os, "environ", dict(os.environ))  # _execute sets the book's variables in its worker
    os.environ.pop("FEDBANDIT_MAX_WORKERS", None)
    code = "import os, pathlib\npathlib.Path('seen.txt').write_text(os.environ.get('FEDBANDIT_MAX_WORKERS', 'unset'))\n"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "env.ipynb")
    seen = []
    for user_value in (None, "3"):
        if user_value is not None:
            os.environ["FEDBANDIT_MAX_WORKERS"] = user_value
        done = execution_cache._execute(str(tmp_path / "env.ipynb"), 120, 1)
        assert done.traceback is None, done.traceback
        seen.append((tmp_path / "seen.txt").read_text())
    assert seen == ["1", "3"]  # the kernel's value: the build's share, or the one the user set


# ---------------------------------------------------------------------------------------
# Kill and resume
# ---------------------------------------------------------------------------------------

_CHILD = """
import sys
sys.path.insert(0, {tests_dir!r})
import _helpers_experiments as hx
from fedbandit.experiments.grid import run_grid
run_grid(hx.logged_draw, hx.GRID_CONFIGS, {n_seeds}, cache_dir={cache!r}, progress=False)
print("finished")
"""


def test_sigkill_mid_grid_then_resume(tmp_path, monkeypatch, reference):
    cache = tmp_path / "cache"
    child_log = tmp_path / "child.log"
    n_points = len(CONFIGS) * N_SEEDS
    env = dict(os.environ, OMP_NUM_THREADS="1", **{hx.CALL_LOG_ENV: str(child_log), hx.SLEEP_ENV: "0.25"})
    code = _CHILD.format(tests_dir=str(TESTS_DIR), n_seeds=N_SEEDS, cache=str(cache))
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while len(_entries(cache)) < 3:
            assert proc.poll() is None, f"child exited early: {proc.communicate()}"
            assert time.monotonic() < deadline, "child made no progress"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    finished = {p: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in _entries(cache)}
    assert 3 <= len(finished) < n_points, "the kill must land mid-grid"

    # Resume in this process, fast, logging calls to a fresh file.
    parent_log = tmp_path / "parent.log"
    monkeypatch.setenv(hx.CALL_LOG_ENV, str(parent_log))
    monkeypatch.setenv(hx.SLEEP_ENV, "0")
    out = run_grid(hx.logged_draw, CONFIGS, N_SEEDS, cache_dir=cache, progress=False)

    # (a) complete and equal to a clean run
    assert_results_equal(out, reference)
    assert len(_entries(cache)) == n_points
    # (b) finished entries were neither recomputed nor rewritten
    recomputed = hx.read_calls(parent_log)
    assert len(recomputed) == n_points - len(finished)
    child_calls = hx.read_calls(child_log)  # serial: grid order, so the first ones finished
    assert not set(recomputed) & set(child_calls[: len(finished)])
    for path, (ino, mtime, data) in finished.items():
        assert (path.stat().st_ino, path.stat().st_mtime_ns, path.read_bytes()) == (ino, mtime, data)


# ---------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------


def _never_called(config, rng):
    raise AssertionError("func must not run on invalid input")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"func": 3}, TypeError, "func must be callable"),
        ({"configs": {"a": 1}}, TypeError, r"configs must be a non-empty sequence.*wrap a single"),
        ({"configs": []}, ValueError, "configs must be a non-empty"),
        ({"configs": "abc"}, TypeError, "configs must be"),
        ({"configs": [{"a": 1}, 2]}, TypeError, r"configs\[1\] must be a dict"),
        ({"configs": [{"a": object()}]}, TypeError, r"configs\[0\]\['a'\] must be JSON-able"),
        ({"configs": [{"a": [1, 2j]}]}, TypeError, r"configs\[0\]\['a'\]\[1\] must be JSON-able"),
        ({"configs": [{1: 2}]}, TypeError, r"configs\[0\] must have str keys"),
        ({"seeds": 0}, ValueError, r"seeds must be an integer in \[1, inf\]"),
        ({"seeds": -3}, ValueError, "seeds must be"),
        ({"seeds": 2.5}, TypeError, "seeds must be"),
        ({"seeds": True}, TypeError, "seeds must be"),
        ({"seeds": []}, ValueError, "seeds must be"),
        ({"seeds": "12"}, TypeError, "seeds must be"),
        ({"seeds": [0, -1]}, ValueError, r"seeds\[1\] must be an integer in \[0, inf\]"),
        ({"seeds": [0, 1.5]}, TypeError, r"seeds\[1\] must be an integer"),
        ({"seeds": np.zeros((2, 2), int)}, ValueError, "seeds must be a 1-d"),
        ({"backend": "threads"}, ValueError, "backend must be one of"),
        ({"backend": 1}, TypeError, "backend must be one of"),
        ({"n_jobs": 0}, ValueError, "n_jobs must be a positive integer or -1"),
        ({"n_jobs": -2}, ValueError, "n_jobs must be an integer in"),
        ({"n_jobs": 1.5}, TypeError, "n_jobs must be an integer"),
        ({"n_jobs": "2"}, TypeError, "n_jobs must be an integer"),
        ({"backend": "serial", "scheduler": "tcp://127.0.0.1:1"}, ValueError, "scheduler is only used with"),
        ({"backend": "dask", "scheduler": 3}, TypeError, "scheduler must be"),
        ({"backend": "dask", "scheduler": " "}, ValueError, "scheduler must be a non-empty"),
        ({"cache_dir": 3}, TypeError, "cache_dir must be"),
        ({"cache_dir": ""}, ValueError, "cache_dir must be a non-empty"),
        ({"version": 1.5}, TypeError, "version must be"),
        ({"version": True}, TypeError, "version must be"),
        ({"progress": "yes"}, TypeError, "progress must be a bool"),
        ({"base_seed": -1}, ValueError, r"base_seed must be an integer in \[0, inf\]"),
        ({"base_seed": 0.5}, TypeError, "base_seed must be an integer"),
    ],
)
def test_bad_input(kwargs, error, match, tmp_path):
    args = {"func": _never_called, "configs": [{"a": 1}], "seeds": 2, "cache_dir": tmp_path / "c", "progress": False}
    args.update(kwargs)
    with pytest.raises(error, match=match):
        run_grid(args.pop("func"), args.pop("configs"), args.pop("seeds"), **args)
    assert not (tmp_path / "c").exists()  # no work, nothing written


@pytest.mark.parametrize(
    ("name", "value", "match"),
    [
        ("FEDBANDIT_BACKEND", "gpu", "FEDBANDIT_BACKEND must be one of"),
        ("FEDBANDIT_N_JOBS", "many", "FEDBANDIT_N_JOBS must be a positive integer or -1"),
        ("FEDBANDIT_N_JOBS", "0", "FEDBANDIT_N_JOBS must be a positive integer or -1"),
        ("FEDBANDIT_MAX_WORKERS", "many", "FEDBANDIT_MAX_WORKERS must be a positive integer, got 'many'"),
        ("FEDBANDIT_MAX_WORKERS", "0", "FEDBANDIT_MAX_WORKERS"),
    ],
)
def test_bad_environment(name, value, match, monkeypatch, tmp_path):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=match):
        run_grid(_never_called, [{"a": 1}], 1, cache_dir=tmp_path / "c", progress=False)
    assert not (tmp_path / "c").exists()


def test_missing_dask_extra_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "distributed", None)  # makes `import distributed` fail
    with pytest.raises(ImportError, match=r"pip install 'fedbandit\[dask\]'"):
        run_grid(_never_called, [{"a": 1}], 1, backend="dask", cache_dir=tmp_path / "c", progress=False)
    assert not (tmp_path / "c").exists()


def test_make_rng_bad_input():
    with pytest.raises(TypeError, match="config must be a dict"):
        make_rng([1], 0)
    with pytest.raises(ValueError, match="seed must be an integer"):
        make_rng({"a": 1}, -1)
    with pytest.raises(ValueError, match="base_seed must be an integer"):
        make_rng({"a": 1}, 0, base_seed=-1)


# ---------------------------------------------------------------------------------------
# The package's source is part of every key
# ---------------------------------------------------------------------------------------

_PKG_CHILD = """
import json, sys
sys.path.insert(0, {copy_root!r})
import fedbandit
assert fedbandit.__file__.startswith({copy_root!r}), fedbandit.__file__
from fedbandit.experiments.grid import run_grid, package_source_hash

def experiment(config, rng):
    # Calls into the package: the calibration rule is code the experiment depends on.
    from fedbandit.accounting.calibration import ldp_sigma0
    with open({log!r}, "a") as fh:
        fh.write("x")
    return ldp_sigma0(config["epsilon"], 1e-5, 8) + 0.0 * rng.random()

out = run_grid(experiment, [{{"epsilon": 1.0}}], 1, cache_dir={cache!r}, progress=False, version="fixed")
print(json.dumps({{"value": out[0][0], "hash": package_source_hash()}}))
"""


def test_editing_a_called_package_function_invalidates_the_cache(tmp_path):
    """The experiment's own source (and explicit version) stays the same; only a function it
    calls inside fedbandit changes: the cached entry must not be served again."""
    import json
    import shutil

    import fedbandit

    copy_root = tmp_path / "copy"
    shutil.copytree(Path(fedbandit.__file__).parent, copy_root / "fedbandit",
                    ignore=shutil.ignore_patterns("__pycache__"))
    log, cache = tmp_path / "calls.log", tmp_path / "cache"
    code = _PKG_CHILD.format(copy_root=str(copy_root), log=str(log), cache=str(cache))

    def run():
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env=dict(os.environ, PYTHONPATH=""))
        return json.loads(done.stdout.strip().splitlines()[-1])

    def n_calls():
        return len(log.read_text()) if log.exists() else 0

    first = run()
    assert run() == first and n_calls() == 1, "an unchanged package must reuse the entry"
    calibration = copy_root / "fedbandit" / "accounting" / "calibration.py"
    text = calibration.read_text()
    marker = "def ldp_sigma0("
    assert marker in text
    # Edit the called function: its result doubles.
    text = text.replace(marker, "def _ldp_sigma0_original(", 1)
    text += "\n\ndef ldp_sigma0(*args, **kwargs):\n    return 2.0 * _ldp_sigma0_original(*args, **kwargs)\n"
    calibration.write_text(text)
    second = run()
    assert n_calls() == 2, "editing a called function must invalidate the cached entry"
    assert second["hash"] != first["hash"]
    assert second["value"] == pytest.approx(2.0 * first["value"])
    # A data-free, comment-only edit elsewhere in the package invalidates too (any change).
    (copy_root / "fedbandit" / "theory" / "linear.py").write_text(
        (copy_root / "fedbandit" / "theory" / "linear.py").read_text() + "\n# edited\n")
    run()
    assert n_calls() == 3


def test_prune_cache_removes_only_other_package_versions(tmp_path):
    from fedbandit.experiments.grid import package_source_hash, prune_cache

    run_grid(hx.logged_draw, CONFIGS[:1], 1, cache_dir=tmp_path, progress=False)
    stale = tmp_path / "pkg-0123456789abcdef" / "x"
    stale.mkdir(parents=True)
    (stale / "entry.pkl").write_bytes(b"old")
    current = tmp_path / f"pkg-{package_source_hash()[:16]}"
    assert current.is_dir()
    removed = prune_cache(tmp_path)
    assert removed == [tmp_path / "pkg-0123456789abcdef"]
    assert current.is_dir() and not (tmp_path / "pkg-0123456789abcdef").exists()


def test_a_kernel_that_does_not_start_is_started_again(tmp_path, monkeypatch):
    # make book starts two kernels at once; one can lose a TCP port race and never answer. Its notebook is
    # executed again (no cell has run), up to KERNEL_START_ATTEMPTS times; any other error is not retried.
    import jupyter_cache.executors.utils as jc_utils
    import nbformat

    from fedbandit.book import execution_cache

    monkeypatch.setattr(os, "environ", dict(os.environ))  # _execute sets the book's variables in its worker
    nb_path = tmp_path / "page.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]), nb_path)
    calls = []

    def flaky(failures, message="Kernel didn't respond in 60 seconds"):
        def run(nb, **kwargs):
            calls.append(1)
            if len(calls) <= failures:
                raise RuntimeError(message)
            return jc_utils.ExecutionResult(nb, kwargs.get("cwd"), 1.5, None, None)
        return run

    monkeypatch.setattr(jc_utils, "single_nb_execution", flaky(execution_cache.KERNEL_START_ATTEMPTS - 1))
    done = execution_cache._execute(str(nb_path), 30)
    assert (done.path, done.seconds, done.traceback) == (str(nb_path), 1.5, None)
    assert len(done.load_average) == 2 and all(v >= 0 for v in done.load_average), done.load_average
    assert len(calls) == execution_cache.KERNEL_START_ATTEMPTS
    calls.clear()
    monkeypatch.setattr(jc_utils, "single_nb_execution", flaky(execution_cache.KERNEL_START_ATTEMPTS))
    with pytest.raises(RuntimeError, match="respond"):
        execution_cache._execute(str(nb_path), 30)
    assert len(calls) == execution_cache.KERNEL_START_ATTEMPTS
    calls.clear()
    monkeypatch.setattr(jc_utils, "single_nb_execution", flaky(1, "some other failure"))
    with pytest.raises(RuntimeError, match="other"):
        execution_cache._execute(str(nb_path), 30)
    assert len(calls) == 1


def test_execution_cache_is_reset_when_the_package_changes(tmp_path, monkeypatch):
    from fedbandit.book import execution_cache

    cache = tmp_path / "_build" / ".jupyter_cache"
    cache.mkdir(parents=True)
    (cache / "entry").write_text("executed by an older package")
    assert execution_cache.sync_execution_cache(cache) is True  # no stamp yet: reset
    assert not cache.exists()
    cache.mkdir()
    (cache / "entry").write_text("executed by this package")
    assert execution_cache.sync_execution_cache(cache) is False  # same source: kept
    assert (cache / "entry").exists()
    monkeypatch.setattr(execution_cache, "package_source_hash", lambda: "f" * 64)
    assert execution_cache.sync_execution_cache(cache) is True  # edited source: reset
    assert not cache.exists()


def test_book_notebooks_are_the_toc_notebooks_in_order():
    from fedbandit.book.execution_cache import book_notebooks

    root = Path(__file__).resolve().parents[1]
    names = [p.relative_to(root).as_posix() for p in book_notebooks(root)]
    assert names[0] == "chapters/intro.ipynb" and "chapters/02_fixed_batch.ipynb" in names
    assert names.index("chapters/01_dp20_gaps.ipynb") < names.index("chapters/06_side_by_side.ipynb")
    assert all(n.endswith(".ipynb") for n in names)  # the markdown pages are not executed


def test_execute_missing_fills_the_cache_that_jupyter_book_reads(tmp_path):
    """Two notebooks executed into jupyter-cache; the cache then matches them (as myst-nb's cache
    mode does before executing), a failing one is not stored, and a second call executes nothing."""
    import nbformat
    from jupyter_cache import get_cache

    from fedbandit.book.execution_cache import execute_missing

    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: a\nchapters:\n- file: b\n- file: c\n")
    (tmp_path / "_config.yml").write_text("execute:\n  timeout: 120\n")
    for name, code in (("a", "print(1 + 1)"), ("b", "import os\nprint(os.getcwd())"), ("c", "raise ValueError('no')")):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, tmp_path / f"{name}.ipynb")
    cache_dir = tmp_path / "_build" / ".jupyter_cache"
    cpuinfo = Path("/proc/cpuinfo")
    models = [ln.split(":", 1)[1].strip() for ln in cpuinfo.read_text().splitlines() if ln.startswith("model name")] \
        if cpuinfo.is_file() else []
    cpu_model = models[0] if models else None  # elsewhere the name comes from the platform module
    failed = execute_missing(cache_dir, tmp_path, jobs=2)
    assert failed == ["c.ipynb"]
    cache = get_cache(str(cache_dir))
    for name, text in (("a", "2"), ("b", str(tmp_path))):
        record = cache.match_cache_notebook(nbformat.read(tmp_path / f"{name}.ipynb", as_version=4))
        outputs = cache.get_cache_bundle(record.pk).nb.cells[0].outputs
        assert outputs[0]["text"].strip() == text  # executed in the notebook's own folder
        assert record.data["execution_seconds"] > 0
        # the machine, as /proc/cpuinfo's first "model name" and the CPU count describe it, and the two loads
        if cpu_model is not None:
            assert record.data["machine"] == f"{cpu_model}, {os.cpu_count()} logical CPUs", record.data
        loads = record.data["load_average"]
        assert len(loads) == 2 and all(isinstance(v, float) and v >= 0 for v in loads), loads
        assert record.data["cpu_seconds"] > 0, record.data  # at least the kernel's start
    with pytest.raises(KeyError):
        cache.match_cache_notebook(nbformat.read(tmp_path / "c.ipynb", as_version=4))
    assert execute_missing(cache_dir, tmp_path, jobs=2) == ["c.ipynb"]  # a and b are not executed again


def test_a_notebooks_cpu_time_counts_its_kernel_and_the_kernels_worker_processes(tmp_path, monkeypatch):
    """The CPU time stored with an executed page is that of its kernel and of the worker processes the kernel
    started (a joblib grid's loky workers): a notebook whose two workers each burn 2 x 0.6 s of CPU and whose kernel
    burns 0.6 s reports at least 3.0 s, whatever its wall time. Measured on this process instead (RUSAGE_SELF), or
    on the kernel without its workers, it reports under 1.5 s."""
    import nbformat

    from fedbandit.book import execution_cache

    monkeypatch.setattr(os, "environ", dict(os.environ))  # _execute sets the book's variables in its worker
    code = ("import time\nfrom joblib import Parallel, delayed\n\n"
            "def burn(s):\n    t = time.process_time()\n    while time.process_time() - t < s:\n        pass\n\n"
            "Parallel(n_jobs=2, backend='loky')(delayed(burn)(0.6) for _ in range(4))\nburn(0.6)\n")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "burn.ipynb")
    done = execution_cache._execute(str(tmp_path / "burn.ipynb"), 120)
    assert done.traceback is None, done.traceback
    assert done.cpu_seconds >= 4 * 0.6 + 0.6, done.cpu_seconds


def test_status_page_words_for_the_machines_and_loads():
    from fedbandit.book import sphinx_ext

    def rows(*machines):
        return [{"machine": m} for m in machines]

    one = sphinx_ext._machines_text(rows("CPU A, 2 logical CPUs", "CPU A, 2 logical CPUs"))
    assert one.startswith("Every notebook was executed on one machine: CPU A, 2 logical CPUs.")
    mixed = sphinx_ext._machines_text(rows("CPU A, 2 logical CPUs", "CPU B, 8 logical CPUs", "CPU A, 2 logical CPUs", None))
    assert mixed.startswith("The notebooks were executed on: CPU A, 2 logical CPUs (2); CPU B, 8 logical CPUs (1); "
                            "not recorded for 1."), mixed
    assert sphinx_ext._machines_text(rows(None, None)) == "The machine that executed the notebooks was not recorded."
    assert sphinx_ext._load_text([0.5, 2.25]) == "0.50 → 2.25"
    assert sphinx_ext._load_text([float("nan"), 1.0]) == "unknown → 1.00"
    assert sphinx_ext._load_text(None) == "not recorded"
    assert sphinx_ext._cpu_text(12.345) == "12.3"
    assert sphinx_ext._cpu_text(float("nan")) == "unknown"
    assert sphinx_ext._cpu_text(None) == "not recorded"


def test_a_page_is_over_its_budgets_only_when_this_build_measured_it_at_paper_scale():
    """The run time and the CPU time are each compared with their own budget, strictly, and only for a
    paper-scale execution of this build; each overrun gets its own sentence in the log."""
    from fedbandit.book import sphinx_ext
    from fedbandit.book.scale import CHAPTER_BUDGETS, CHAPTER_CPU_BUDGETS

    page = "chapters/06_2_regret"
    wall, cpu = CHAPTER_BUDGETS[page], CHAPTER_CPU_BUDGETS[page]

    def check(**kw):
        args = dict(scale="paper", this_build=True, runtime=wall, cpu_seconds=cpu) | kw
        return sphinx_ext._against_budgets(page, **args)

    assert check() == {"budget": wall, "over_budget": False, "cpu_budget": cpu, "over_cpu_budget": False}
    assert check(runtime=wall + 0.5)["over_budget"] and not check(runtime=wall + 0.5)["over_cpu_budget"]
    assert check(cpu_seconds=cpu + 0.5)["over_cpu_budget"] and not check(cpu_seconds=cpu + 0.5)["over_budget"]
    for not_measured in (dict(scale="quick"), dict(scale=None), dict(this_build=False)):
        both_over = check(runtime=10 * wall, cpu_seconds=10 * cpu, **not_measured)
        assert not both_over["over_budget"] and not both_over["over_cpu_budget"], not_measured
    unknown = check(runtime=None, cpu_seconds=None)
    assert not unknown["over_budget"] and not unknown["over_cpu_budget"]
    assert sphinx_ext._against_budgets("chapters/not_a_page", scale="paper", this_build=True, runtime=1e9,
                                       cpu_seconds=1e9) == {"budget": None, "over_budget": False,
                                                            "cpu_budget": None, "over_cpu_budget": False}

    rows = [{"docname": page, "runtime": wall + 40.2, "cpu_seconds": cpu + 99.7, **check(runtime=wall + 40.2,
                                                                                       cpu_seconds=cpu + 99.7)},
            {"docname": "chapters/intro", "runtime": 1.0, "cpu_seconds": 1.0, "budget": 15, "over_budget": False,
             "cpu_budget": 15, "over_cpu_budget": False}]
    assert sphinx_ext._budget_overruns(rows) == [
        f"{page} took {wall + 40:.0f} s at paper scale, over its budget of {wall} s "
        "(fedbandit.book.scale.CHAPTER_BUDGETS)",
        f"{page} used {cpu + 100:.0f} CPU-s at paper scale, over its budget of {cpu} CPU-s "
        "(fedbandit.book.scale.CHAPTER_CPU_BUDGETS)"]


def test_joblib_grid_hides_only_lokys_idle_worker_exit(reference, monkeypatch):
    """loky's "A worker stopped while some jobs were given to the executor" (a worker that left after idling, replaced:
    a clean exit) comes from the executor's management thread of the calling process and used to reach the pages'
    output.  A joblib grid ignores that message, issued from another thread as loky does, and only it: another
    warning still reaches the caller, and outside the grid the message is shown again.  The message must be the one
    the installed loky issues (a rewording would silently re-open the leak)."""
    import threading

    import joblib.externals.loky.process_executor as loky_executor

    import fedbandit._grid as grid

    loky_strings = [node.value for node in ast.walk(ast.parse(Path(loky_executor.__file__).read_text()))
                    if isinstance(node, ast.Constant) and isinstance(node.value, str)]  # adjacent literals joined
    assert any(s.startswith(grid._LOKY_IDLE_EXIT) for s in loky_strings)
    plain = grid._run_joblib

    def run_and_warn(*args):
        def warn(message):
            warnings.warn_explicit(message, UserWarning, loky_executor.__file__, 787, module=loky_executor.__name__)

        for message in (f"{grid._LOKY_IDLE_EXIT}. This can be caused by a too short worker timeout", "another"):
            thread = threading.Thread(target=warn, args=(message,))
            thread.start()
            thread.join()
        yield from plain(*args)

    monkeypatch.setattr(grid, "_run_joblib", run_and_warn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = run_grid(hx.logged_draw, CONFIGS[:2], N_SEEDS, backend="joblib", n_jobs=2, cache_dir=False, progress=False)
        assert [str(w.message) for w in caught] == ["another"]
        warnings.warn(grid._LOKY_IDLE_EXIT, UserWarning)
    assert len(caught) == 2
    assert_results_equal(out, reference[:2])

"""Run a function over a grid of configurations × seeds, in parallel, with an on-disk cache.

Every experiment of the book is a function ``func(config, rng) -> result``: ``config`` is a
dict of JSON-able settings and ``rng`` a :class:`numpy.random.Generator`.
:func:`run_grid` evaluates it at every (configuration, seed) point of a grid and returns
``results[i][s]``, the result for ``configs[i]`` and ``seeds[s]``.

.. rubric:: Reproducibility

The random stream of a grid point is derived by :class:`numpy.random.SeedSequence`
spawning from three things only: ``base_seed``, a stable hash of the configuration's
*content* (canonical JSON, so key order and numpy-versus-Python scalars do not matter) and
the seed number.  It does not depend on the position of the configuration in the grid,
on the other configurations, on the number of workers or on the backend, so the serial,
joblib and Dask backends return bit-identical results, and a sub-grid reproduces the
corresponding entries of a larger grid.  :func:`make_rng` rebuilds the generator of one
grid point, to rerun it interactively.

.. rubric:: Backends

``"serial"``
    In-process, in grid order.
``"joblib"``
    Worker processes (joblib's ``loky`` backend); ``n_jobs`` of them.
``"dask"``
    A :class:`distributed.Client`: the ``scheduler`` argument (an address such as
    ``"tcp://10.0.0.5:8786"``, a ``Client`` or a cluster object), else the
    ``FEDBANDIT_DASK_SCHEDULER`` environment variable, else a temporary
    :class:`distributed.LocalCluster` of ``n_jobs`` single-threaded worker processes on
    loopback.  Needs the ``dask`` extra (``pip install 'fedbandit[dask]'``); workers must be
    able to import :mod:`fedbandit` and the module defining ``func``.

.. rubric:: Grouped points

A caller may pass a :class:`Grouping`: grid points whose configurations have equal
(non-None) group keys are then evaluated together, by the grouping's ``run_together``, in
units (at most :data:`MAX_UNIT` points each, split so that every worker has work).
:func:`fedbandit.experiments.grid.run_grid` uses it to run the learners of one linear
environment in lockstep, generating each block of contexts and reward noise once for all of
them (:mod:`fedbandit.envs.sharing`).  A point's result, random stream and cache entry are
exactly those of the point run alone.

.. rubric:: Cache

Each result is stored in its own file under ``cache_dir``, keyed by a SHA-256 hash of the
function's identity (module and qualified name) and version, the configuration's
canonical JSON, ``base_seed`` and the seed.  Results are written by the calling process as
soon as they arrive, to a temporary file in the same directory which is flushed, fsync'ed
and renamed over the final name (:func:`os.replace` is atomic), so a run that is
interrupted or killed at any moment resumes where it stopped.  Each entry carries a
SHA-256 checksum of its payload and its own key; an entry that fails either check (a
truncated or garbage file) is ignored with a warning and recomputed, never loaded.
Leftover temporary files (``.*.tmp``, from a killed writer) are never read, and may be
deleted whenever no run is active.

Keys also carry :func:`package_source_hash`, a SHA-256 of every source file of the
installed :mod:`fedbandit` package and of the data files it reads, and entries are filed
under a folder named after it: editing *any* code of the package (a function the experiment
calls, a calibration rule, a data file) invalidates every entry, so a cache can never serve a
result computed by an older ``fedbandit``.  The version of ``func`` itself defaults to a
hash of its source code (it may live outside the package, e.g. in a notebook); pass
``version=`` explicitly (and bump it) when code it calls outside the package changes.
Everything else the result depends on must be in the configuration.  Folders of other
package hashes are never read; delete them (:func:`prune_cache`) to reclaim space.

.. rubric:: Environment variables

``FEDBANDIT_BACKEND``
    Backend used when ``backend`` is not given (default ``serial``).
``FEDBANDIT_N_JOBS``
    Number of workers used when ``n_jobs`` is not given (default: all cores).
``FEDBANDIT_MAX_WORKERS``
    At most this many worker processes, whatever ``n_jobs`` asks (unset: no cap).  With one,
    a ``joblib`` grid runs in the calling process.  ``make book`` sets it to the cores per
    notebook it executes at a time (one on two cores, two notebooks at a time): two pages that
    each started two workers on two cores made four busy processes, and the pages then took
    10 to 28 % more CPU time than alone.
``FEDBANDIT_DASK_SCHEDULER``
    Dask scheduler address used by the ``dask`` backend when ``scheduler`` is not given.
``FEDBANDIT_CACHE_DIR``
    Cache directory used when ``cache_dir`` is not given (see :func:`default_cache_dir`).
``TQDM_DISABLE=1``
    Silences the progress bars (tqdm's own switch).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import inspect
import json
import logging
import numbers
import os
import pickle
import re
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedbandit._validation import (
    check_choice,
    check_int_in_range,
    check_nonnegative_int,
    check_positive_int,
)

__all__ = [
    "BACKENDS",
    "Grouping",
    "MAX_UNIT",
    "run_grid",
    "make_rng",
    "config_hash",
    "default_cache_dir",
    "package_source_hash",
    "prune_cache",
    "stack_results",
]

#: The backends accepted by :func:`run_grid`.
BACKENDS = ("serial", "joblib", "dask")

# Bump when the key derivation or the entry layout changes: old entries then simply miss.
_CACHE_FORMAT = 2
_MAGIC = b"FEDBANDIT-EXPERIMENT-CACHE-1\n"
_DIGEST_SIZE = hashlib.sha256().digest_size
# Number of 32-bit words of the configuration hash that enter the SeedSequence spawn key
# (128 bits: collisions between configurations are out of the question).
_CONFIG_WORDS = 4

_ENV_BACKEND = "FEDBANDIT_BACKEND"
_ENV_N_JOBS = "FEDBANDIT_N_JOBS"
_ENV_MAX_WORKERS = "FEDBANDIT_MAX_WORKERS"
_ENV_SCHEDULER = "FEDBANDIT_DASK_SCHEDULER"
_ENV_CACHE_DIR = "FEDBANDIT_CACHE_DIR"


# ---------------------------------------------------------------------------------------
# Canonical configurations and seeds
# ---------------------------------------------------------------------------------------


def _to_json_native(value: Any, name: str) -> Any:
    """Return a JSON-native copy of ``value``; numpy scalars and arrays become Python ones."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, np.ndarray) and value.dtype.kind in "biufU":
        return _to_json_native(value.tolist(), name)
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{name} must have str keys, got key {key!r} of type {type(key).__name__}")
            out[str(key)] = _to_json_native(item, f"{name}[{key!r}]")
        return out
    if isinstance(value, (list, tuple)):
        return [_to_json_native(item, f"{name}[{j}]") for j, item in enumerate(value)]
    raise TypeError(
        f"{name} must be JSON-able (None, bool, int, float, str, numpy scalars or arrays, and "
        f"lists/tuples/dicts of them), got {value!r} of type {type(value).__name__}"
    )


def _canonical_json(config: Any, name: str = "config") -> str:
    """Canonical JSON of a configuration: sorted keys, no whitespace, numpy scalars unboxed."""
    if not isinstance(config, Mapping):
        raise TypeError(f"{name} must be a dict, got {config!r} of type {type(config).__name__}")
    return json.dumps(
        _to_json_native(config, name), sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True
    )


def _sha256(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def config_hash(config: Mapping[str, Any]) -> str:
    """Stable hash of a configuration's content.

    Parameters
    ----------
    config : dict
        A dict with ``str`` keys and JSON-able values (numpy scalars and arrays allowed).

    Returns
    -------
    str
        Hex SHA-256 of the configuration's canonical JSON (sorted keys, numpy scalars
        converted to Python ones).  Equal for ``{"a": 1, "b": 0.5}`` and
        ``{"b": np.float64(0.5), "a": np.int64(1)}``; different for ``1`` and ``1.0``.

    Raises
    ------
    TypeError
        If ``config`` is not a dict or holds a value that is not JSON-able.
    """
    return _sha256(_canonical_json(config)).hex()


def _seed_sequence(config_digest: bytes, seed: int, base_seed: int) -> np.random.SeedSequence:
    # SeedSequence(base_seed).spawn(n)[i] is SeedSequence(base_seed, spawn_key=(i,)); we
    # spawn along a deeper path (config hash words..., seed) so the stream of a grid point
    # is a pure function of (base_seed, config content, seed).
    words = tuple(int.from_bytes(config_digest[4 * k : 4 * k + 4], "little") for k in range(_CONFIG_WORDS))
    return np.random.SeedSequence(entropy=base_seed, spawn_key=(*words, seed))


def make_rng(config: Mapping[str, Any], seed: int, *, base_seed: int = 0) -> np.random.Generator:
    """Generator that :func:`run_grid` hands to ``func`` at one grid point.

    ``func(config, make_rng(config, seed, base_seed=b))`` reproduces the result that
    ``run_grid(func, [..., config, ...], seeds=[..., seed, ...], base_seed=b)`` returns
    for that point, whatever the rest of the grid and the backend.

    Parameters
    ----------
    config : dict
        The configuration (``str`` keys, JSON-able values).
    seed : int
        The seed number, >= 0 (with ``seeds=n`` in :func:`run_grid`, the seeds are
        ``0, ..., n - 1``).
    base_seed : int, default 0
        Root entropy of the whole grid, >= 0.

    Returns
    -------
    numpy.random.Generator
        A PCG64 generator seeded with ``SeedSequence(base_seed, spawn_key=(h1, h2, h3, h4,
        seed))`` where ``h1..h4`` are the first 128 bits of :func:`config_hash`.
    """
    seed = check_nonnegative_int("seed", seed)
    base_seed = check_nonnegative_int("base_seed", base_seed)
    digest = _sha256(_canonical_json(config))
    return np.random.default_rng(_seed_sequence(digest, seed, base_seed))


# ---------------------------------------------------------------------------------------
# Function identity and version
# ---------------------------------------------------------------------------------------


def _function_identity(func: Callable) -> tuple[str, Any]:
    """Return ``("module.qualname", object whose source defines the version)``."""
    if isinstance(func, functools.partial):
        inner, target = _function_identity(func.func)
        try:
            bound = json.dumps(
                _to_json_native({"args": list(func.args), "kwargs": dict(func.keywords)}, "func"), sort_keys=True
            )
        except TypeError:
            bound = repr((func.args, sorted(func.keywords.items())))
        return f"{inner}[partial {bound}]", target
    if inspect.isfunction(func) or inspect.ismethod(func) or inspect.isbuiltin(func) or isinstance(func, type):
        target = func
    else:  # a callable instance: its class defines the behaviour
        target = type(func)
    module = getattr(target, "__module__", None) or "<unknown>"
    qualname = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)
    return f"{module}.{qualname}", target


def _function_version(identity: str, target: Any, version: Any, *, warn: bool) -> str:
    if version is not None:
        return f"explicit:{version}"
    try:
        source = inspect.getsource(target)
    except (OSError, TypeError):
        if warn:
            warnings.warn(
                f"fedbandit.experiments.grid: cannot read the source of {identity}, so its cache entries "
                "are keyed by name only and will not be invalidated when it changes; pass version=",
                UserWarning,
                stacklevel=3,
            )
        return f"name:{identity}"
    return "source:" + hashlib.sha256(source.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------------------
# The package's own source: part of every key
# ---------------------------------------------------------------------------------------

_PACKAGE_ROOT = Path(__file__).resolve().parent  # fedbandit/ (this module sits at its top level)
_HASH_MEMO: dict[tuple, str] = {}


def _package_files() -> list[Path]:
    files = sorted(p for p in _PACKAGE_ROOT.rglob("*") if p.is_file() and p.suffix in (".py", ".json", ".npz", ".csv"))
    # Data the package reads from the repository's data/ folder (a development checkout).
    data = _PACKAGE_ROOT.parent / "data"
    if (_PACKAGE_ROOT.parent / "pyproject.toml").is_file() and data.is_dir():
        files += sorted(p for p in data.rglob("*") if p.is_file() and p.name != "README.md")
    return files


def package_source_hash() -> str:
    """SHA-256 of the installed :mod:`fedbandit` package's source and data files.

    Every :func:`run_grid` cache key includes it, so editing any module of the package (or
    a data file it reads) invalidates every cached result.  The hash covers the relative
    path and the bytes of each ``.py``/``.json``/``.npz``/``.csv`` file under the package
    directory and, in a development checkout, every file of the repository's ``data/``
    folder except its README.  Files are re-read only when their size or modification
    time changes, so calling it for every grid is cheap.

    Returns
    -------
    str
        64 hexadecimal digits.
    """
    files = _package_files()
    signature = tuple((str(p), st.st_size, st.st_mtime_ns) for p in files for st in (p.stat(),))
    cached = _HASH_MEMO.get(signature)
    if cached is not None:
        return cached
    h = hashlib.sha256()
    base = _PACKAGE_ROOT.parent
    for path in files:
        rel = path.relative_to(base).as_posix().encode("utf-8")
        data = path.read_bytes()
        h.update(len(rel).to_bytes(8, "little") + rel + len(data).to_bytes(8, "little") + data)
    digest = h.hexdigest()
    _HASH_MEMO.clear()
    _HASH_MEMO[signature] = digest
    return digest


def prune_cache(cache_dir: str | os.PathLike | None = None) -> list[Path]:
    """Delete the cache folders written by other versions of the package's source.

    Parameters
    ----------
    cache_dir : path, optional
        The cache directory (default :func:`default_cache_dir`).

    Returns
    -------
    list of pathlib.Path
        The folders removed (entries keyed by another :func:`package_source_hash`, which
        :func:`run_grid` can never read).
    """
    import shutil

    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if not root.is_dir():
        return []
    current = _package_dirname(package_source_hash())
    removed = []
    for child in sorted(root.iterdir()):
        if child.is_dir() and re.fullmatch(r"pkg-[0-9a-f]{16}", child.name) and child.name != current:
            shutil.rmtree(child)
            removed.append(child)
    return removed


def _package_dirname(digest: str) -> str:
    return f"pkg-{digest[:16]}"


# ---------------------------------------------------------------------------------------
# Cache entries
# ---------------------------------------------------------------------------------------


def default_cache_dir() -> Path:
    """Directory where :func:`run_grid` caches results when ``cache_dir`` is not given.

    Returns
    -------
    pathlib.Path
        ``$FEDBANDIT_CACHE_DIR`` if that variable is set and non-empty; otherwise
        ``<root>/_cache/experiments`` where ``<root>`` is the nearest ancestor of the current
        directory (itself included) holding a ``pyproject.toml`` or ``.git``, i.e. the
        repository root when run from a chapter notebook, and the current directory
        when there is none.  The directory is created only when something is written.
    """
    env = os.environ.get(_ENV_CACHE_DIR, "").strip()
    if env:
        return Path(env).expanduser()
    cwd = Path.cwd()
    for folder in (cwd, *cwd.parents):
        if (folder / "pyproject.toml").is_file() or (folder / ".git").exists():
            return folder / "_cache" / "experiments"
    return cwd / "_cache" / "experiments"


def _entry_dirname(identity: str) -> str:
    # Human-readable folder per function (so one can delete a function's entries);
    # uniqueness comes from the file name, which is the full key.
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", identity)[:100]


def _encode_entry(key: str, result: Any) -> bytes:
    payload = pickle.dumps((key, result), protocol=pickle.HIGHEST_PROTOCOL)
    return _MAGIC + hashlib.sha256(payload).digest() + payload


def _decode_entry(data: bytes, key: str) -> tuple[bool, Any, str]:
    """Return ``(ok, result, reason)``; a corrupt entry is never unpickled."""
    header = len(_MAGIC) + _DIGEST_SIZE
    if len(data) < header or not data.startswith(_MAGIC):
        return False, None, "bad header (truncated or not a cache entry)"
    digest, payload = data[len(_MAGIC) : header], data[header:]
    if hashlib.sha256(payload).digest() != digest:
        return False, None, "checksum mismatch (truncated or corrupt)"
    try:
        stored_key, result = pickle.loads(payload)
    except Exception as exc:  # e.g. a class that no longer exists
        return False, None, f"cannot unpickle ({type(exc).__name__}: {exc})"
    if stored_key != key:
        return False, None, "entry belongs to another key"
    return True, result, ""


def _read_entry(path: Path, key: str) -> tuple[bool, Any]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return False, None
    except OSError as exc:
        warnings.warn(f"fedbandit.experiments.grid: cannot read cache entry {path} ({exc}); recomputing", stacklevel=3)
        return False, None
    ok, result, reason = _decode_entry(data, key)
    if not ok:
        warnings.warn(f"fedbandit.experiments.grid: ignoring cache entry {path}: {reason}; recomputing", stacklevel=3)
    return ok, result


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that ``path`` is either absent/old or complete."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    # Make the rename itself durable (a power loss after return keeps the entry).
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


# ---------------------------------------------------------------------------------------
# Argument resolution (all before any work)
# ---------------------------------------------------------------------------------------


def _check_configs(configs: Any) -> tuple[list[Mapping], list[str]]:
    if isinstance(configs, (str, bytes, Mapping)) or not isinstance(configs, Sequence):
        hint = " (wrap a single configuration in a list)" if isinstance(configs, Mapping) else ""
        raise TypeError(
            f"configs must be a non-empty sequence (list or tuple) of dicts{hint}, "
            f"got {type(configs).__name__}"
        )
    if len(configs) == 0:
        raise ValueError("configs must be a non-empty sequence of dicts, got an empty sequence")
    configs = list(configs)
    canon = [_canonical_json(config, f"configs[{i}]") for i, config in enumerate(configs)]
    return configs, canon


def _check_seeds(seeds: Any) -> list[int]:
    if isinstance(seeds, numbers.Integral) and not isinstance(seeds, (bool, np.bool_)):
        return list(range(check_positive_int("seeds", seeds)))
    if isinstance(seeds, np.ndarray):
        if seeds.ndim != 1:
            raise ValueError(f"seeds must be a 1-d sequence of ints, got an array of shape {seeds.shape}")
        seeds = seeds.tolist()
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence):
        raise TypeError(
            "seeds must be a positive int (the number of seeds) or a sequence of non-negative ints, "
            f"got {seeds!r} of type {type(seeds).__name__}"
        )
    if len(seeds) == 0:
        raise ValueError("seeds must be a positive int or a non-empty sequence of non-negative ints, got []")
    return [check_nonnegative_int(f"seeds[{j}]", s) for j, s in enumerate(seeds)]


def _resolve_backend(backend: Any, scheduler: Any) -> str:
    if backend is not None:
        if not isinstance(backend, str):
            raise TypeError(f"backend must be one of {BACKENDS!r}, got {backend!r} of type {type(backend).__name__}")
        return check_choice("backend", backend.strip().lower(), BACKENDS)
    if scheduler is not None:
        return "dask"
    env = os.environ.get(_ENV_BACKEND, "").strip().lower()
    if env:
        return check_choice(_ENV_BACKEND, env, BACKENDS)
    return "serial"


def _check_n_jobs_value(name: str, n_jobs: Any) -> int:
    n_jobs = check_int_in_range(name, n_jobs, -1, None)
    if n_jobs == 0:
        raise ValueError(f"{name} must be a positive integer or -1 (all cores), got 0")
    return n_jobs


def _resolve_n_jobs(n_jobs: Any) -> int:
    """Return a positive worker count, or -1 for all cores."""
    if n_jobs is not None:
        return _check_n_jobs_value("n_jobs", n_jobs)
    env = os.environ.get(_ENV_N_JOBS, "").strip()
    if env:
        try:
            value = int(env)
        except ValueError:
            raise ValueError(f"{_ENV_N_JOBS} must be a positive integer or -1 (all cores), got {env!r}") from None
        return _check_n_jobs_value(_ENV_N_JOBS, value)
    return -1


def _max_workers() -> int | None:
    """``$FEDBANDIT_MAX_WORKERS`` (a positive integer), or None when it is unset or empty."""
    env = os.environ.get(_ENV_MAX_WORKERS, "").strip()
    if not env:
        return None
    try:
        value = int(env)
    except ValueError:
        raise ValueError(f"{_ENV_MAX_WORKERS} must be a positive integer, got {env!r}") from None
    return check_int_in_range(_ENV_MAX_WORKERS, value, 1, None)


def _cpu_count(n_jobs: int) -> int:
    """Worker processes for ``n_jobs`` (-1: every core), at most ``$FEDBANDIT_MAX_WORKERS``."""
    wanted = max(1, os.cpu_count() or 1) if n_jobs == -1 else n_jobs
    cap = _max_workers()
    return wanted if cap is None else min(wanted, cap)


def _import_distributed():
    try:
        import distributed
    except ImportError as exc:
        raise ImportError(
            "backend='dask' needs the optional dependency dask[distributed]; install it with "
            "pip install 'fedbandit[dask]'"
        ) from exc
    return distributed


def _resolve_scheduler(backend: str, scheduler: Any) -> Any:
    if backend != "dask":
        if scheduler is not None:
            raise ValueError(f"scheduler is only used with backend='dask', got backend={backend!r}")
        return None
    distributed = _import_distributed()
    if scheduler is None:
        scheduler = os.environ.get(_ENV_SCHEDULER, "").strip() or None
    if scheduler is None or isinstance(scheduler, distributed.Client):
        return scheduler
    if isinstance(scheduler, str):
        if not scheduler.strip():
            raise ValueError("scheduler must be a non-empty Dask scheduler address such as 'tcp://host:8786'")
        return scheduler.strip()
    if hasattr(scheduler, "scheduler_address"):  # a cluster object (LocalCluster, ...)
        return scheduler
    raise TypeError(
        "scheduler must be a Dask scheduler address (str), a distributed.Client or a cluster object, "
        f"got {scheduler!r} of type {type(scheduler).__name__}"
    )


def _resolve_cache_dir(cache_dir: Any) -> Path | None:
    if cache_dir is False:
        return None
    if cache_dir is None or cache_dir is True:
        return default_cache_dir()
    if isinstance(cache_dir, (str, os.PathLike)):
        if not str(cache_dir).strip():
            raise ValueError("cache_dir must be a non-empty path, None (default directory) or False (no cache)")
        return Path(cache_dir).expanduser()
    raise TypeError(
        "cache_dir must be a path, None (default directory) or False (no cache), "
        f"got {cache_dir!r} of type {type(cache_dir).__name__}"
    )


# ---------------------------------------------------------------------------------------
# Execution
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Task:
    key: str
    config_index: int
    seed: int
    config: Mapping[str, Any]
    seed_seq: np.random.SeedSequence

    @property
    def label(self) -> str:
        text = repr(dict(self.config))
        if len(text) > 200:  # configurations may hold arrays: keep error notes readable
            text = text[:197] + "..."
        return f"configs[{self.config_index}]={text}, seed={self.seed}"


def _evaluate(func: Callable, config: Mapping, seed_seq: np.random.SeedSequence, label: str) -> Any:
    """Evaluate one grid point (runs in the worker)."""
    rng = np.random.default_rng(seed_seq)
    # A deep copy, so a function that mutates its configuration cannot leak state between
    # grid points in the serial backend (process backends copy anyway).
    try:
        return func(copy.deepcopy(config), rng)
    except Exception as exc:
        exc.add_note(f"fedbandit.experiments.grid.run_grid: raised by func at {label}")
        raise


@dataclass(frozen=True)
class Grouping:
    """How :func:`run_grid` may evaluate several grid points together (a caller's hook).

    Attributes
    ----------
    key : callable
        ``key(config) -> str | None``: points whose configurations have equal keys may run
        together; None runs the point alone.
    run_together : callable
        ``run_together(calls) -> [(ok, value, ...), ...]``: evaluates the zero-argument
        ``calls`` together (in the worker; module-level, so that it pickles), one outcome per
        call in order, ``ok`` False with the exception as ``value`` for a call that raised.
    nested : callable
        ``nested() -> bool``: True inside a call that ``run_together`` is evaluating (a grid run
        there evaluates its points one by one: groups do not nest).
    """

    key: Callable[[Mapping[str, Any]], str | None]
    run_together: Callable[[Sequence[Callable[[], Any]]], Sequence[tuple[Any, ...]]]
    nested: Callable[[], bool]


#: At most this many grid points run in one unit of a :class:`Grouping` (their states are all alive).
MAX_UNIT = 16

_Outcome = tuple[str, bool, Any]


def _evaluate_unit(func: Callable, unit: Sequence[_Task],
                   run_together: Callable[[Sequence[Callable[[], Any]]], Sequence[tuple[Any, ...]]] | None,
                   ) -> list[_Outcome]:
    """Evaluate the grid points of one unit (runs in the worker): ``[(key, ok, result or exception)]``."""
    if len(unit) == 1 or run_together is None:
        return [(t.key, True, _evaluate(func, t.config, t.seed_seq, t.label)) for t in unit]
    outcomes = run_together([functools.partial(_evaluate, func, t.config, t.seed_seq, t.label) for t in unit])
    return [(t.key, bool(out[0]), out[1]) for t, out in zip(unit, outcomes)]


def _units(tasks: list[_Task], n_workers: int, key: Callable[[Mapping[str, Any]], str | None]) -> list[list[_Task]]:
    """Group the points with equal keys into units, largest first.

    Points of one group are split into as many units as it takes to give every worker work,
    and into units of at most :data:`MAX_UNIT`.
    """
    groups: dict[Any, list[_Task]] = {}
    for t in tasks:
        k = key(t.config)
        groups.setdefault(("alone", t.key) if k is None else ("group", k), []).append(t)
    cap = max(1, min(MAX_UNIT, -(-len(tasks) // max(1, n_workers))))
    units = []
    for group in groups.values():
        parts = -(-len(group) // cap)
        units += [group[i::parts] for i in range(parts)]
    return sorted(units, key=len, reverse=True)


def _store_each(stream: Iterator[list[_Outcome]]) -> Iterator[tuple[str, Any]]:
    """The points of each finished unit, one by one; a point's exception is raised once the
    unit's other points have been handed on (and cached)."""
    for outcomes in stream:
        failed = None
        for key, ok, result in outcomes:
            if ok:
                yield key, result
            elif failed is None:
                failed = result
        if failed is not None:
            raise failed


_RunTogether = Callable[[Sequence[Callable[[], Any]]], Sequence[tuple[Any, ...]]] | None


def _run_serial(func: Callable, units: list[list[_Task]], run_together: _RunTogether) -> Iterator[list[_Outcome]]:
    for unit in units:
        yield _evaluate_unit(func, unit, run_together)


# loky's warning when a worker that left after idling (its idle_worker_timeout) is replaced while jobs wait: a clean
# exit, not a failure (a worker that dies raises TerminatedWorkerError instead).  It is issued by the executor's
# management thread of the calling process, so it reached the pages' output with the build's paths.
_LOKY_IDLE_EXIT = "A worker stopped while some jobs were given to the executor"


@contextlib.contextmanager
def _quiet_loky_idle_exits() -> Iterator[None]:
    """Ignore loky's warning about a replaced idle worker (only that message) while a joblib grid runs."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=re.escape(_LOKY_IDLE_EXIT), category=UserWarning)
        yield


def _run_joblib(func: Callable, units: list[list[_Task]], n_jobs: int,
                run_together: _RunTogether) -> Iterator[list[_Outcome]]:
    from joblib import Parallel, delayed

    n_workers = min(_cpu_count(n_jobs), len(units))
    parallel = Parallel(n_jobs=n_workers, backend="loky", return_as="generator_unordered")
    gen = parallel(delayed(_evaluate_unit)(func, unit, run_together) for unit in units)
    try:
        yield from gen
    finally:
        # Closing the generator makes joblib cancel the tasks not yet run.
        gen.close()


@contextlib.contextmanager
def _dask_client(scheduler: Any, n_jobs: int, n_tasks: int):
    distributed = _import_distributed()
    if isinstance(scheduler, distributed.Client):
        yield scheduler  # the caller's client: not ours to close
        return
    cluster = None
    if scheduler is None:
        cluster = distributed.LocalCluster(
            n_workers=min(_cpu_count(n_jobs), n_tasks),
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",  # loopback, free port: never clash on 8787
            silence_logs=logging.ERROR,
        )
        scheduler = cluster
    try:
        client = distributed.Client(scheduler, set_as_default=False)
    except Exception as exc:
        if cluster is not None:
            cluster.close()
        exc.add_note(f"fedbandit.experiments.grid.run_grid: could not connect to the Dask scheduler {scheduler!r}")
        raise
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _run_dask(func: Callable, units: list[list[_Task]], client: Any,
              run_together: _RunTogether) -> Iterator[list[_Outcome]]:
    from distributed import as_completed

    pending = {}
    for unit in units:
        future = client.submit(_evaluate_unit, func, unit, run_together, pure=False)
        pending[future.key] = future
    try:
        for future, result in as_completed(list(pending.values()), loop=client.loop, with_results=True):
            pending.pop(future.key)
            yield result
    finally:
        if pending:  # interrupted: do not leave work running on a shared cluster
            client.cancel(list(pending.values()))


# ---------------------------------------------------------------------------------------
# Public entry point
# ---------------------------------------------------------------------------------------


def run_grid(
    func: Callable[[dict, np.random.Generator], Any],
    configs: Sequence[Mapping[str, Any]],
    seeds: int | Sequence[int] = 1,
    *,
    cache_dir: str | os.PathLike | bool | None = None,
    backend: str | None = None,
    n_jobs: int | None = None,
    scheduler: Any = None,
    version: str | int | None = None,
    progress: bool = True,
    base_seed: int = 0,
    grouping: Grouping | None = None,
) -> list[list[Any]]:
    """Evaluate ``func`` at every point of a grid of configurations × seeds.

    Parameters
    ----------
    func : callable
        ``func(config: dict, rng: numpy.random.Generator) -> result``, where ``result`` is
        picklable (typically a dict of numpy arrays).  All its randomness must come from
        ``rng``, and everything its result depends on must be in ``config``.  It receives a
        deep copy of the configuration.  For the process backends it must be picklable
        (module-level functions are; joblib and Dask also pickle notebook functions).
    configs : sequence of dict
        Non-empty list of configurations: dicts with ``str`` keys and JSON-able values
        (None, bool, int, float, str, numpy scalars or arrays, nested lists/tuples/dicts).
    seeds : int or sequence of int, default 1
        Number of seeds ``n`` (the seeds are ``0, ..., n - 1``) or an explicit sequence of
        non-negative seed numbers.  ``seeds=4`` and ``seeds=[0, 1, 2, 3]`` are the same.
    cache_dir : path, None or False, default None
        Directory of the on-disk cache; ``None`` uses :func:`default_cache_dir`
        (``$FEDBANDIT_CACHE_DIR``, else ``<repository root>/_cache/experiments``);
        ``False`` disables caching.
    backend : {"serial", "joblib", "dask"}, optional
        Where the grid points run (see the module documentation).  Default: ``"dask"`` if
        ``scheduler`` is given, else ``$FEDBANDIT_BACKEND``, else ``"serial"``.
    n_jobs : int, optional
        Number of worker processes for ``"joblib"`` and for the temporary local Dask
        cluster: a positive integer or -1 for all cores.  Default ``$FEDBANDIT_N_JOBS``,
        else -1.  At most ``$FEDBANDIT_MAX_WORKERS`` when that is set (with one,
        ``"joblib"`` runs the grid in this process).  Ignored by ``"serial"`` and by an
        existing Dask cluster.
    scheduler : str, distributed.Client or cluster, optional
        Dask scheduler for ``backend="dask"``: an address such as ``"tcp://host:8786"``, a
        ``distributed.Client`` (used and left open) or a cluster object.  Default
        ``$FEDBANDIT_DASK_SCHEDULER``, else a temporary ``LocalCluster`` on 127.0.0.1.
    version : str or int, optional
        Version of ``func`` in the cache key; change it to invalidate cached results.
        Default: a hash of ``func``'s source code (its qualified name if the source is
        unavailable, with a warning).  The key also holds :func:`package_source_hash`
        whatever ``version`` is, so any edit of the package invalidates the entries.
    progress : bool, default True
        Show a tqdm progress bar (``tqdm.auto``: a widget in notebooks) over the grid
        points; ``TQDM_DISABLE=1`` in the environment also silences it.
    base_seed : int, default 0
        Root entropy of the random streams, >= 0.
    grouping : Grouping, optional
        Evaluate the points whose configurations have equal group keys together (see the
        module notes); the results are the same either way.

    Returns
    -------
    list of list
        ``results[i][s]`` is ``func(configs[i], rng)`` for the ``s``-th seed, with ``rng =
        make_rng(configs[i], seeds[s], base_seed=base_seed)``.  Grid points with equal
        content (duplicate configurations or seeds) are evaluated once and share the
        result object.

    Raises
    ------
    TypeError, ValueError
        On invalid arguments, naming the parameter (or environment variable), before any
        work is done.
    ImportError
        If ``backend="dask"`` and the ``dask`` extra is not installed.

    Notes
    -----
    Results are written to the cache as they complete, so after an interruption
    (``KeyboardInterrupt``, a killed process, a crash of ``func``) rerunning the same call
    only computes the missing points.  The stream of a grid point depends only on
    ``base_seed``, the configuration's content and the seed number (see
    :func:`make_rng`), so the result does not depend on the backend, the number of workers,
    the order of ``configs`` or which other configurations are in the grid.

    Two functions with the same module and qualified name (e.g. ``simulate`` defined in
    two notebooks, both in ``__main__``) and the same explicit ``version`` share cache
    entries; give them distinct names or leave ``version`` to its default.

    Examples
    --------
    >>> def mean_of_normals(config, rng):
    ...     return {"mean": rng.normal(config["mu"], 1.0, size=config["n"]).mean()}
    >>> results = run_grid(mean_of_normals, [{"mu": 0.0, "n": 10}, {"mu": 1.0, "n": 10}],
    ...                    seeds=3, cache_dir=False, progress=False)
    >>> len(results), len(results[0])
    (2, 3)
    """
    # ---- validation: everything before any work -------------------------------------
    if not callable(func):
        raise TypeError(f"func must be callable as func(config, rng), got {func!r} of type {type(func).__name__}")
    configs, canon = _check_configs(configs)
    seed_list = _check_seeds(seeds)
    backend = _resolve_backend(backend, scheduler)
    n_jobs = _resolve_n_jobs(n_jobs)
    _max_workers()  # a bad $FEDBANDIT_MAX_WORKERS fails before any work
    scheduler = _resolve_scheduler(backend, scheduler)
    cache_root = _resolve_cache_dir(cache_dir)
    if version is not None and (isinstance(version, bool) or not isinstance(version, (str, numbers.Integral))):
        raise TypeError(f"version must be a str, an int or None, got {version!r} of type {type(version).__name__}")
    if not isinstance(progress, (bool, np.bool_)):
        raise TypeError(f"progress must be a bool, got {progress!r} of type {type(progress).__name__}")
    base_seed = check_nonnegative_int("base_seed", base_seed)
    if grouping is not None and not isinstance(grouping, Grouping):
        raise TypeError(f"grouping must be a Grouping or None, got {grouping!r:.80} of type {type(grouping).__name__}")

    # ---- tasks -------------------------------------------------------------------------
    identity, target = _function_identity(func)
    version_tag = _function_version(identity, target, version, warn=cache_root is not None)
    package_hash = package_source_hash()
    tasks: dict[str, _Task] = {}
    grid_keys: list[list[str]] = []
    for i, (config, config_json) in enumerate(zip(configs, canon)):
        digest = _sha256(config_json)
        row = []
        for seed in seed_list:
            key_doc = {
                "format": _CACHE_FORMAT,
                "function": identity,
                "version": version_tag,
                "package": package_hash,
                "config": config_json,
                "base_seed": base_seed,
                "seed": seed,
            }
            key = hashlib.sha256(json.dumps(key_doc, sort_keys=True).encode("utf-8")).hexdigest()
            if key not in tasks:
                tasks[key] = _Task(key, i, seed, config, _seed_sequence(digest, seed, base_seed))
            row.append(key)
        grid_keys.append(row)

    # ---- cache lookup --------------------------------------------------------------------
    done: dict[str, Any] = {}
    entry_dir = (
        cache_root / _package_dirname(package_hash) / _entry_dirname(identity) if cache_root is not None else None
    )
    if entry_dir is not None:
        for key in tasks:
            hit, result = _read_entry(entry_dir / f"{key}.pkl", key)
            if hit:
                done[key] = result
    pending = [t for key, t in tasks.items() if key not in done]

    # ---- run the missing points, storing each as it completes ------------------------
    if pending:
        from tqdm.auto import tqdm

        bar_kwargs: dict[str, Any] = {
            "total": len(tasks),
            "initial": len(done),
            "desc": getattr(target, "__qualname__", "run_grid"),
            "unit": "run",
        }
        # tqdm.auto's notebook bar passes disable=False to tqdm itself, which overrides the
        # TQDM_DISABLE default: honour the variable here, or a cold book build saves the bars
        # (widgets) into the pages
        if not progress or os.environ.get("TQDM_DISABLE", "").strip().lower() in {"1", "true", "yes", "on"}:
            bar_kwargs["disable"] = True
        n_workers = 1 if backend == "serial" else _cpu_count(n_jobs)
        grouped = grouping is not None and not grouping.nested()
        units = _units(pending, n_workers, grouping.key) if grouping is not None and grouped else [[t] for t in pending]
        run_together = grouping.run_together if grouping is not None and grouped else None
        with contextlib.ExitStack() as stack:
            bar = stack.enter_context(tqdm(**bar_kwargs))
            if backend == "serial" or (backend == "joblib" and n_workers == 1):
                stream = _run_serial(func, units, run_together)
            elif backend == "joblib":
                stack.enter_context(_quiet_loky_idle_exits())
                stream = _run_joblib(func, units, n_jobs, run_together)
            else:
                client = stack.enter_context(_dask_client(scheduler, n_jobs, len(units)))
                stream = _run_dask(func, units, client, run_together)
            stream = stack.enter_context(contextlib.closing(stream))
            for key, result in _store_each(stream):
                if entry_dir is not None:
                    try:
                        data = _encode_entry(key, result)
                    except Exception as exc:
                        raise TypeError(
                            f"func returned a result that cannot be pickled for the cache at {tasks[key].label}: "
                            f"{type(exc).__name__}: {exc} (return plain data, or pass cache_dir=False)"
                        ) from exc
                    _atomic_write(entry_dir / f"{key}.pkl", data)
                done[key] = result
                bar.update(1)

    return [[done[key] for key in row] for row in grid_keys]


def stack_results(results: Sequence[Sequence[Any]], key: str | None = None) -> np.ndarray:
    """Stack the output of :func:`run_grid` into one array of shape ``(n_configs, n_seeds, ...)``.

    Parameters
    ----------
    results : list of list
        ``results[i][s]`` as returned by :func:`run_grid`.
    key : str, optional
        If the results are dicts, the entry to stack (``results[i][s][key]``); if None the
        results themselves are stacked.

    Returns
    -------
    numpy.ndarray
        ``out[i, s, ...] = results[i][s][key]``.

    Raises
    ------
    ValueError
        If ``results`` is empty or ragged, or the entries have different shapes.
    KeyError
        If ``key`` is missing from a result.
    """
    if not isinstance(results, Sequence) or len(results) == 0:
        raise ValueError("results must be a non-empty list of lists, as returned by run_grid")
    n_seeds = {len(row) for row in results}
    if len(n_seeds) != 1 or 0 in n_seeds:
        raise ValueError(f"results must have the same non-zero number of seeds for every configuration, got {n_seeds}")
    items = [[r if key is None else r[key] for r in row] for row in results]
    try:
        return np.asarray(np.stack([np.stack([np.asarray(x) for x in row]) for row in items]))
    except ValueError as exc:
        raise ValueError(f"results{'' if key is None else f'[...][{key!r}]'} have different shapes: {exc}") from exc

"""Keep jupyter-book's notebook execution cache in step with the package, and fill it on both cores.

jupyter-book (``execute_notebooks: cache``) re-executes a notebook only when its code cells
change, so after an edit of :mod:`fedbandit` it would keep serving pages, figures and asserts
computed by the older package.  ``make book`` therefore calls
``python -m fedbandit.book.execution_cache <path to .jupyter_cache>`` before building: when
the :func:`~fedbandit.experiments.grid.package_source_hash` recorded next to the cache differs
from the current one, the execution cache and Sphinx's saved doctrees are deleted (every
notebook re-executes, every page is rebuilt; the
experiment cache of :func:`~fedbandit.experiments.run_grid` is keyed by the same hash, so
results of the older package are recomputed too, never reused).

With ``--execute N`` it then executes the book's notebooks that the cache does not hold, N
at a time, longest first (by :data:`fedbandit.book.scale.CHAPTER_BUDGETS`), exactly as
jupyter-book would (the same executor, in the notebook's folder, the ``_config.yml``
timeout, errors not allowed), and stores each executed notebook in the cache, where
jupyter-book then finds it: the build itself executes nothing, and the machine's cores are
busy with two chapters instead of one.  A notebook that fails is not stored: the tracebacks
are printed and the command exits non-zero (``make book`` stops there).  Each notebook's
kernel runs BLAS on one thread (``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``,
``MKL_NUM_THREADS`` = 1 unless set), so N chapters do not oversubscribe N cores.  With each
notebook the cache keeps the machine that executed it (:func:`machine_description`) and the
1-minute load average when its execution started and ended (:func:`load_average`) and its CPU
time (its kernel's and the worker processes'), which the book's execution-status page shows beside
its run time.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import platform
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import NamedTuple

from fedbandit.book.scale import CHAPTER_BUDGETS
from fedbandit.experiments.grid import package_source_hash

__all__ = ["sync_execution_cache", "book_notebooks", "execute_missing", "cpu_model", "machine_description",
           "load_average"]

STAMP = ".fedbandit-package-hash"
#: What a notebook executed for the book sees in its environment (a value already set wins):
#: ``FEDBANDIT_EXPLORER=static`` makes :func:`fedbandit.book.explorer.make_explorer` precompute its
#: outputs (no kernel runs behind the pages), ``TQDM_DISABLE=1`` keeps progress bars (widgets in a
#: notebook, frozen mid-way in a page) out of the pages.  Set by the Sphinx extension before the build
#: executes anything, and by :func:`execute_missing`'s workers.
BOOK_BUILD_ENVIRONMENT = {"FEDBANDIT_EXPLORER": "static", "TQDM_DISABLE": "1"}

_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def cpu_model() -> str:
    """The processor's name as the operating system reports it (``model name`` in ``/proc/cpuinfo``).

    Falls back to :func:`platform.processor`, then :func:`platform.machine`, where there is no
    ``/proc/cpuinfo``.
    """
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_description() -> str:
    """The machine in a few words: its processor (:func:`cpu_model`) and its logical CPUs.

    Returns
    -------
    str
        For example ``"Intel(R) Xeon(R) Processor, 2 logical CPUs"``.
    """
    return f"{cpu_model()}, {os.cpu_count() or 1} logical CPUs"


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (runnable processes of every user), to 2 decimals.

    NaN each where the system does not report them.
    """
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return [math.nan] * 3


def sync_execution_cache(cache_dir: str | Path) -> bool:
    """Delete ``cache_dir`` if it was filled by another version of the package's source.

    Parameters
    ----------
    cache_dir : path
        jupyter-book's execution cache folder (``_build/.jupyter_cache``).

    Returns
    -------
    bool
        True if the cache was deleted (or absent), False if it was kept.
    """
    cache = Path(cache_dir)
    stamp = cache.parent / STAMP
    current = package_source_hash()
    recorded = stamp.read_text().strip() if stamp.is_file() else None
    stale = recorded != current
    if stale and cache.exists():
        shutil.rmtree(cache)
    if stale:
        # Sphinx re-reads (and so re-executes) only the pages whose source changed: without its
        # saved doctrees it reads every page again, so no page keeps the older package's outputs
        shutil.rmtree(cache.parent / ".doctrees", ignore_errors=True)
    # Written before the build: from now on every entry in the cache comes from this source.
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(current + "\n")
    return stale or not cache.exists()


def book_notebooks(root: str | Path = ".") -> list[Path]:
    """The notebooks (``.ipynb``) of the book's table of contents ``_toc.yml``, in its order."""
    import yaml

    root = Path(root)
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    files = []

    def walk(node):
        if isinstance(node, dict):
            for key in ("root", "file"):
                if isinstance(node.get(key), str):
                    files.append(node[key])
            for value in node.values():
                if isinstance(value, (list, dict)):
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc)
    return [root / f"{f}.ipynb" for f in files if (root / f"{f}.ipynb").is_file()]


def _execution_timeout(root: Path) -> int | None:
    import yaml

    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8")) or {}
    return (config.get("execute") or {}).get("timeout", 30)


#: Times a notebook's kernel is started before its execution fails.  Two kernels started at the
#: same moment (``make book`` starts two) can draw the same free TCP port: jupyter_client picks
#: ports by binding and releasing them, and the kernel that loses the race dies before it answers
#: ("Address already in use"), which the client reports after its 60-second wait.
KERNEL_START_ATTEMPTS = 3
#: The start of the client's errors for a kernel that never answered (jupyter_client's
#: ``wait_for_ready``).
_KERNEL_START_FAILURES = ("Kernel didn't respond", "Kernel died before replying")


class _Execution(NamedTuple):
    """What :func:`_execute` returns for one notebook."""

    path: str
    nb: object
    seconds: float  # wall time, as the executor measured it
    traceback: str | None
    load_average: list[float]  # the 1-minute load at the start and at the end
    cpu_seconds: float  # the kernel's and its worker processes' user + system CPU time


def _grid_workers(jobs: int, cores: int | None = None) -> int:
    """Worker processes a notebook's grids may start when ``jobs`` notebooks run at a time.

    The cores divided among the notebooks, at least one (then a ``joblib`` grid runs in the
    kernel itself): more busy processes than cores made every page slower.  In cold
    paper-scale builds on two cores (2026-12-08), two notebooks at a time whose grids each
    started two workers took 10 to 28 % more CPU time per page (chapter 3's experiments 229
    against 179 CPU-s, chapter 4's linear bandits 204 against 171) than the same pages executed
    one at a time.  ``cores`` defaults to :func:`os.cpu_count`.
    """
    return max(1, (cores if cores is not None else (os.cpu_count() or 1)) // max(1, jobs))


def _children_cpu_seconds() -> float:
    """User + system CPU time of this process's waited-for descendants (NaN where unsupported)."""
    try:
        import resource  # Unix only: imported where used (absent on Windows)
    except ImportError:  # pragma: no cover - the book is built on Linux and macOS
        return math.nan
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _execute(path: str, timeout: int | None, grid_workers: int | None = None) -> _Execution:
    """Execute one notebook in its folder (runs in a worker process).

    ``grid_workers``, when given, caps the worker processes of the notebook's grids
    (``FEDBANDIT_MAX_WORKERS``, unless already set): :func:`execute_missing` gives each of the
    notebooks it runs at a time its share of the cores.

    The CPU time is that of the processes this worker waited for while executing it: the
    kernel (every attempt), and the processes the kernel waited for, such as the worker
    processes of a joblib grid.  It does not depend on what else runs on the machine, which
    the wall time does.
    """
    import nbformat
    from jupyter_cache.executors.utils import single_nb_execution

    for name in _THREAD_VARIABLES:
        os.environ.setdefault(name, "1")
    for name, value in BOOK_BUILD_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    if grid_workers is not None:
        os.environ.setdefault("FEDBANDIT_MAX_WORKERS", str(grid_workers))
    load_at_start, cpu_at_start = load_average()[0], _children_cpu_seconds()
    for attempt in range(1, KERNEL_START_ATTEMPTS + 1):
        nb = nbformat.read(path, as_version=4)
        try:
            result = single_nb_execution(nb, cwd=str(Path(path).parent), timeout=timeout, allow_errors=False)
        except RuntimeError as err:  # raised only while the kernel starts: no cell has run
            if not str(err).startswith(_KERNEL_START_FAILURES) or attempt == KERNEL_START_ATTEMPTS:
                raise
            print(f"{path}: the kernel did not start ({err}); starting another (attempt {attempt + 1} of "
                  f"{KERNEL_START_ATTEMPTS})", file=sys.stderr, flush=True)
            continue
        traceback = result.exc_string if result.err is not None else None
        return _Execution(path, result.nb, result.time, traceback, [load_at_start, load_average()[0]],
                          _children_cpu_seconds() - cpu_at_start)
    raise AssertionError("unreachable")  # pragma: no cover


def execute_missing(cache_dir: str | Path, root: str | Path = ".", *, jobs: int = 2) -> list[str]:
    """Execute the book's notebooks missing from jupyter-book's cache, ``jobs`` at a time, and store them.

    Parameters
    ----------
    cache_dir : path
        jupyter-book's execution cache folder.
    root : path
        The book's folder (``_toc.yml``, ``_config.yml``).
    jobs : int
        Notebooks executed at the same time.

    Returns
    -------
    list of str
        The notebooks that failed (not stored), each with its traceback printed.

    Notes
    -----
    Each stored record's data holds ``execution_seconds`` (which myst-nb reports as the run
    time), ``cpu_seconds`` (the user and system CPU time of the notebook's kernel and of the
    processes it started and waited for, such as a joblib grid's workers: unlike the wall
    time, it does not depend on the notebook executed beside it), ``machine``
    (:func:`machine_description`) and ``load_average``: the 1-minute load average when the
    notebook's execution started and when it ended.
    """
    import nbformat
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    root = Path(root).resolve()
    cache = get_cache(str(cache_dir))
    missing = []
    for path in book_notebooks(root):
        try:
            cache.match_cache_notebook(nbformat.read(path, as_version=4))
        except KeyError:
            missing.append(path)
    if not missing:
        print("every notebook of the book is in the execution cache")
        return []

    def budget(path):
        return CHAPTER_BUDGETS.get(path.relative_to(root).with_suffix("").as_posix(), 0)

    missing.sort(key=budget, reverse=True)  # longest first: the last to start are the short ones
    timeout = _execution_timeout(root)
    failed = []
    start = time.perf_counter()
    print(f"executing {len(missing)} notebooks, {jobs} at a time: " + ", ".join(p.stem for p in missing), flush=True)
    machine = machine_description()
    grid_workers = _grid_workers(jobs)
    print(f"each notebook's grids start at most {grid_workers} worker process{'es' if grid_workers > 1 else ''} "
          f"(FEDBANDIT_MAX_WORKERS, unless set)", flush=True)
    with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_execute, str(p), timeout, grid_workers) for p in missing]
        for future in as_completed(futures):
            path, nb, seconds, traceback, loads, cpu = future.result()
            name = Path(path).relative_to(root).as_posix()
            if traceback is not None:
                failed.append(name)
                print(f"FAILED {name} after {seconds:.0f} s:\n{traceback}", file=sys.stderr, flush=True)
                continue
            data = {"execution_seconds": seconds, "cpu_seconds": cpu, "machine": machine, "load_average": loads}
            cache.cache_notebook_bundle(CacheBundleIn(nb, path, data=data), check_validity=False, overwrite=True)
            print(f"executed {name} in {seconds:.0f} s, {cpu:.0f} CPU-s ({time.perf_counter() - start:.0f} s since "
                  "the start)", flush=True)
    return failed


#: The MIME prefix of myst-nb's glue outputs.
_GLUE_PREFIX = "application/papermill.record/"


def export_executed(cache_dir: str | Path, out_dir: str | Path, root: str | Path = ".") -> list[Path]:
    """Write the book's notebooks with their cached outputs into ``out_dir`` (one ``.ipynb`` per page).

    myst-nb writes its ``jupyter_execute`` copies from the source notebook object, not from the
    one it merged the cache's outputs into, so after :func:`execute_missing` filled the cache
    those copies have no outputs.  This merges them the way myst-nb renders them
    (``merge_match_into_notebook``, without the glued outputs, which pages show where they are
    referenced), for checks that read executed notebooks.

    Parameters
    ----------
    cache_dir : path
        jupyter-book's execution cache folder.
    out_dir : path
        Where to write the notebooks (created; files named as the sources).
    root : path
        The book's folder (``_toc.yml``).

    Returns
    -------
    list of Path
        The notebooks written; a page missing from the cache is not written.
    """
    import nbformat
    from jupyter_cache import get_cache

    cache = get_cache(str(cache_dir))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in book_notebooks(root):
        try:
            _, merged = cache.merge_match_into_notebook(nbformat.read(path, as_version=4))
        except KeyError:
            continue
        for cell in merged.cells:  # glued outputs are not shown where they are made (myst-nb removes them)
            if cell.cell_type == "code":
                cell.outputs = [o for o in cell.outputs
                                if not any(k.startswith(_GLUE_PREFIX) for k in o.get("data", {}))]
        target = out / path.name
        nbformat.write(merged, target)
        written.append(target)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cache_dir", help="jupyter-book's execution cache (_build/.jupyter_cache)")
    parser.add_argument("--execute", type=int, metavar="N", default=0,
                        help="then execute the notebooks it lacks, N at a time (0: do not)")
    parser.add_argument("--export", metavar="DIR", default=None,
                        help="only write the book's notebooks with their cached outputs into DIR")
    args = parser.parse_args(argv)
    if args.export is not None:
        written = export_executed(args.cache_dir, args.export)
        print(f"{len(written)} executed notebooks written to {args.export}")
        return 0
    deleted = sync_execution_cache(args.cache_dir)
    print(f"notebook execution cache {'reset for this package source' if deleted else 'kept (same package source)'}")
    if args.execute > 0:
        failed = execute_missing(args.cache_dir, jobs=args.execute)
        if failed:
            print(f"{len(failed)} notebook(s) failed: {', '.join(failed)}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through make book
    raise SystemExit(main())

"""Keep jupyter-book's notebook execution cache in step with the package's source.

jupyter-book (``execute_notebooks: cache``) re-executes a notebook only when its code cells
change, so after an edit of :mod:`fedbandit` it would keep serving pages, figures and asserts
computed by the older package.  ``make book`` therefore calls
``python -m fedbandit.book.execution_cache <path to .jupyter_cache>`` before building: when
the :func:`~fedbandit.experiments.grid.package_source_hash` recorded next to the cache differs
from the current one, the execution cache and Sphinx's saved doctrees are deleted (every
notebook re-executes, every page is rebuilt; the
experiment cache of :func:`~fedbandit.experiments.run_grid` is keyed by the same hash, so
results of the older package are recomputed too, never reused).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from fedbandit.experiments.grid import package_source_hash

__all__ = ["sync_execution_cache"]

STAMP = ".fedbandit-package-hash"


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


if __name__ == "__main__":  # pragma: no cover - exercised through make book
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m fedbandit.book.execution_cache <path to .jupyter_cache>")
    deleted = sync_execution_cache(sys.argv[1])
    print(f"notebook execution cache {'reset for this package source' if deleted else 'kept (same package source)'}")

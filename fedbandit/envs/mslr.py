"""envs.mslr."""

from __future__ import annotations

import hashlib
import io
import os
import site
import sys
import tarfile
from pathlib import Path

import numpy as np

from fedbandit._validation import (
    check_positive_float,
    check_str,
)

__all__ = [
    "MSLR_ANCHOR_URL_COLUMNS",
    "RANKEVAL_VERSION",
    "RANKEVAL_SHA256",
    "DEFAULT_MSLR_PATH",
    "mslr_path",
    "shipped_data_path",
    "read_rankeval_sample",
    "build_mslr_instance",
    "save_mslr_instance",
    "load_mslr_instance",
    "MSLR_FILE",
]


#: The pinned PyPI package whose source distribution ships the data.
RANKEVAL_VERSION = "0.8.2"
#: SHA-256 of ``rankeval-0.8.2.tar.gz`` as served by PyPI (checked by the builder).
RANKEVAL_SHA256 = "c7d71602ab7fe0a0281976c1f0e883cb16431f72e4e946e5fd83790449bb21a9"
_RANKEVAL_MEMBERS = (
    "rankeval-0.8.2/rankeval/test/data/msn1.fold1.train.5k.txt",
    "rankeval-0.8.2/rankeval/test/data/msn1.fold1.test.5k.txt",
)

#: Columns of the authors' "anchor + URL" feature set [authors' code]: column 0 is the
#: constant 0.01 intercept of their loader, column k ≥ 1 is MSLR feature k.  57 columns.
MSLR_ANCHOR_URL_COLUMNS = tuple([0] + [c for i in range(25) for c in (5 * i + 2, 5 * i + 4)] + list(range(126, 132)))

#: The file name of the shipped MSLR instance (in ``data/``).
MSLR_FILE = "mslr_rankeval_sample.npz"
#: Where the shipped MSLR instance is read from by default.
DEFAULT_MSLR_PATH = Path(__file__).resolve().parents[2] / "data" / MSLR_FILE


def shipped_data_path(name: str, default: Path) -> Path:
    """Where a file of the repository's ``data/`` folder is: ``default`` (the repository's
    copy) if it exists, else the copy that ``pyproject.toml``'s data-files install under
    ``<prefix>/share/fedbandit/data`` for a non-editable install (``pip install git+...``,
    as on Colab; the prefix is the interpreter's, the one the package was installed under, or
    the user base), else ``default`` (so that the caller's error names the repository path).

    Parameters
    ----------
    name : str
        The file's name in ``data/``.
    default : path
        The repository's copy.

    Returns
    -------
    pathlib.Path
    """
    name = check_str("name", name)
    if not isinstance(default, (str, os.PathLike)):
        raise TypeError(f"default must be a path (str or os.PathLike), got {default!r:.80} of type {type(default).__name__}")
    default = Path(default)
    if default.exists():
        return default
    here = Path(__file__).resolve()
    # <prefix>/lib/pythonX.Y/site-packages/fedbandit/envs/<module>.py -> <prefix>
    prefixes = [Path(sys.prefix), here.parents[5] if len(here.parents) > 5 else None, Path(site.USER_BASE or "")]
    for prefix in prefixes:
        if prefix is None:
            continue
        candidate = prefix / "share" / "fedbandit" / "data" / name
        if candidate.exists():
            return candidate
    return default


def mslr_path() -> Path:
    """Where the stored real-data instance is (:func:`shipped_data_path` of :data:`MSLR_FILE`).

    Returns
    -------
    pathlib.Path
    """
    return shipped_data_path(MSLR_FILE, DEFAULT_MSLR_PATH)


def _parse_svmlight_rank(lines, n_features: int = 136):
    labels, qids, rows = [], [], []
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        tok = line.split()
        labels.append(int(float(tok[0])))
        if not tok[1].startswith("qid:"):
            raise ValueError(f"expected 'qid:<n>' as second token, got {tok[1]!r}")
        qids.append(int(tok[1][4:]))
        row = np.zeros(n_features + 1)
        row[0] = 0.01  # the authors' loader's intercept column
        for kv in tok[2:]:
            k, v = kv.split(":", 1)
            row[int(k)] = float(v)
        rows.append(row)
    return np.asarray(labels), np.asarray(qids), np.asarray(rows)


def read_rankeval_sample(source, *, check_hash: bool = True):
    """Read the MSLR-WEB10K sample of ``rankeval-0.8.2.tar.gz`` (or a directory with its two files).

    Parameters
    ----------
    source : path
        The ``rankeval-0.8.2.tar.gz`` file, or a directory holding
        ``msn1.fold1.train.5k.txt`` and ``msn1.fold1.test.5k.txt``.
    check_hash : bool, default True
        Refuse a tarball whose SHA-256 differs from :data:`RANKEVAL_SHA256`.

    Returns
    -------
    labels : ndarray (n_docs,) of int
        Relevance labels 0-4.
    query : ndarray (n_docs,) of int
        Query number of every document, 0.. in order of first appearance (train file first,
        then the test file).
    features : ndarray (n_docs, 137)
        Column 0 the authors' loader's intercept (0.01), column ``k`` MSLR feature ``k``.
    sha256 : str
        The tarball's SHA-256 ("" for a directory).
    """
    source = Path(source)
    texts = []
    digest = ""
    if source.is_dir():
        for member in _RANKEVAL_MEMBERS:
            path = source / Path(member).name
            if not path.exists():
                raise FileNotFoundError(f"source directory {source} lacks {path.name}")
            texts.append(path.read_text(encoding="ascii").splitlines())
    elif source.is_file():
        data = source.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if check_hash and digest != RANKEVAL_SHA256:
            raise ValueError(
                f"source {source} has SHA-256 {digest}, expected {RANKEVAL_SHA256} "
                f"(rankeval=={RANKEVAL_VERSION} from PyPI); pass check_hash=False to override"
            )
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tf:
            for member in _RANKEVAL_MEMBERS:
                fh = tf.extractfile(member)
                if fh is None:
                    raise FileNotFoundError(f"{member} not found in {source}")
                texts.append(io.TextIOWrapper(fh, encoding="ascii").read().splitlines())
    else:
        raise FileNotFoundError(f"source {source} does not exist")

    labels, queries, feats = [], [], []
    offset = 0
    for lines in texts:
        lab, qid, rows = _parse_svmlight_rank(lines)
        # Renumber queries 0.. in order of first appearance, continuing across files.
        _, first, inv = np.unique(qid, return_index=True, return_inverse=True)
        order = np.argsort(np.argsort(first))
        queries.append(order[inv] + offset)
        offset += len(first)
        labels.append(lab)
        feats.append(rows)
    return np.concatenate(labels), np.concatenate(queries), np.concatenate(feats), digest


def build_mslr_instance(source, *, lasso_alpha: float = 1.0, columns=MSLR_ANCHOR_URL_COLUMNS, check_hash=True) -> dict:
    """Build the real-data instance from the MSLR-WEB10K sample shipped by ``rankeval``.

    The source distribution ``rankeval-0.8.2.tar.gz`` (PyPI; MPL-2.0) contains
    ``msn1.fold1.train.5k.txt`` and ``msn1.fold1.test.5k.txt``: the first 5 000 rows of
    the training and test files of MSLR-WEB10K Fold 1 (86 queries, 10 000
    query–document pairs, 136 features, labels 0–4).  Following the authors' code
    [authors' code]: prepend the intercept column 0.01, keep the 57 "anchor + URL"
    columns :data:`MSLR_ANCHOR_URL_COLUMNS`, fit θ by
    ``sklearn.linear_model.Lasso(alpha=1, fit_intercept=False)`` on all documents'
    relevance labels (``selection="cyclic"`` so the fit is deterministic; the authors
    used ``"random"`` with no seed).  Queries are numbered in file order (train file
    first, then test file).

    Parameters
    ----------
    source : path
        The ``rankeval-0.8.2.tar.gz`` file, or a directory holding the two text files.
    lasso_alpha : float, default 1.0
        Lasso penalty (scikit-learn's default, as in the authors' code).
    columns : sequence of int
        Columns kept (0 = intercept, k = MSLR feature k).
    check_hash : bool, default True
        Refuse a tarball whose SHA-256 differs from :data:`RANKEVAL_SHA256`.

    Returns
    -------
    dict
        ``features`` (n_docs, d) raw features, ``labels``, ``query`` (query number
        0..n_queries−1 of every document), ``theta`` (d,), ``columns``, ``source_sha256``.
    """
    from sklearn.linear_model import Lasso  # scikit-learn (the book extra) is needed only to rebuild the data

    lasso_alpha = check_positive_float("lasso_alpha", lasso_alpha)
    labels, query, X_all, digest = read_rankeval_sample(source, check_hash=check_hash)
    X = X_all[:, list(columns)]
    lasso = Lasso(
        alpha=lasso_alpha, fit_intercept=False, max_iter=10000, tol=1e-4, selection="cyclic", precompute=False
    )
    lasso.fit(X, labels)
    return {
        "features": X,
        "labels": labels,
        "query": query,
        "theta": np.asarray(lasso.coef_, dtype=float),
        "columns": np.asarray(columns),
        "lasso_alpha": lasso_alpha,
        "source_sha256": digest,
    }


def save_mslr_instance(instance: dict, path=DEFAULT_MSLR_PATH) -> Path:
    """Write an instance from :func:`build_mslr_instance` to a compressed ``.npz``.

    Parameters
    ----------
    instance : dict
        From :func:`build_mslr_instance`.
    path : path, default the repository's ``data/mslr_rankeval_sample.npz``
        Where to write it.

    Returns
    -------
    pathlib.Path
        The path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **{k: np.asarray(v) for k, v in instance.items()})
    return path


def load_mslr_instance(path=None) -> dict:
    """Load the stored real-data instance (default :func:`mslr_path`; see ``data/README.md`` to regenerate it).

    Parameters
    ----------
    path : path, optional
        Default :func:`mslr_path`.

    Returns
    -------
    dict
        The instance's arrays, ``lasso_alpha`` a float and ``source_sha256`` a str.
    """
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike (or None), got {path!r:.80} of type {type(path).__name__}")
    path = mslr_path() if path is None else Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found; regenerate it with `python -m fedbandit.envs.linear build-mslr <rankeval-0.8.2.tar.gz>` "
            "(see data/README.md)"
        )
    with np.load(path, allow_pickle=False) as f:
        out = {k: f[k] for k in f.files}
    out["lasso_alpha"] = float(out["lasso_alpha"])
    out["source_sha256"] = str(out["source_sha256"])
    return out


def main(argv=None) -> int:
    """``python -m fedbandit.envs.linear build-mslr SOURCE [OUT]``: regenerate the stored instance."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or argv[0] != "build-mslr":
        print("usage: python -m fedbandit.envs.linear build-mslr <rankeval-0.8.2.tar.gz | dir> [out.npz]", file=sys.stderr)
        return 2
    out = Path(argv[2]) if len(argv) > 2 else DEFAULT_MSLR_PATH
    inst = build_mslr_instance(argv[1])
    path = save_mslr_instance(inst, out)
    nz = int(np.count_nonzero(inst["theta"]))
    print(
        f"wrote {path}: {inst['features'].shape[0]} documents, {int(inst['query'].max()) + 1} queries, "
        f"d={inst['features'].shape[1]}, {nz} non-zero Lasso coefficients"
    )
    return 0

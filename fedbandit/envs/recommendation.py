"""A federated recommendation instance from real relevance judgements: rankers as arms.

The K-armed setting of Li, Song & Fragouli ({cite}`li2022federated`) needs arms that every
agent can play, whose reward distributions are the same for every agent.  The book builds
it from the MSLR-WEB10K sample that ``rankeval==0.8.2`` ships (the data of
:mod:`fedbandit.envs.mslr`), the way online learning-to-rank turns a judged collection into
a K-armed bandit [derived]:

* **users** are the queries (86): a user arrives with a query, drawn uniformly at random;
* **items** are the query's documents, each with a human relevance label 0-4;
* an **arm** is a ranker, one of MSLR's 136 features used as a scoring rule: the system
  recommends the document of largest feature value (ties broken uniformly at random);
* the **reward** is that document's relevance label divided by 4, in [0, 1].

Arm ``f``'s reward distribution is therefore the mixture over queries of the label
distribution among the documents tied at the top of feature ``f``; every agent serves the
same population of users, so all agents share the means (the paper's model).  The stored
file holds, for every (feature, query), the label counts of those top-tied documents
(:func:`build_ranker_table`), from which :func:`ranker_bandit` builds a
:class:`~fedbandit.envs.multi_armed.CategoricalBandit` of the ``K`` best rankers.

Regenerate the stored table (see ``data/README.md``)::

    python -m fedbandit.envs.recommendation build-rankers rankeval-0.8.2.tar.gz data/mslr_rankers.npz
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from fedbandit._validation import check_int_in_range
from fedbandit.envs.mslr import RANKEVAL_SHA256, RANKEVAL_VERSION, read_rankeval_sample, shipped_data_path
from fedbandit.envs.multi_armed import CategoricalBandit

__all__ = [
    "RANKER_FILE",
    "DEFAULT_RANKER_PATH",
    "RELEVANCE_VALUES",
    "ranker_table_path",
    "build_ranker_table",
    "save_ranker_table",
    "load_ranker_table",
    "ranker_distributions",
    "ranker_bandit",
]

#: The file name of the shipped ranker table (in ``data/``).
RANKER_FILE = "mslr_rankers.npz"
#: Where the shipped ranker table is read from by default.
DEFAULT_RANKER_PATH = Path(__file__).resolve().parents[2] / "data" / RANKER_FILE
#: Reward of a document of relevance label 0, 1, 2, 3, 4.
RELEVANCE_VALUES = np.arange(5) / 4.0


def ranker_table_path() -> Path:
    """Where the stored ranker table is: ``data/`` or, for a non-editable install, the copy
    under ``<prefix>/share/fedbandit/data`` (:func:`fedbandit.envs.mslr.shipped_data_path`).

    Returns
    -------
    pathlib.Path
    """
    return shipped_data_path(RANKER_FILE, DEFAULT_RANKER_PATH)


def build_ranker_table(source, *, check_hash: bool = True) -> dict:
    """Label counts of every ranker's top-tied documents, per query, from the rankeval sample.

    Parameters
    ----------
    source : path
        ``rankeval-0.8.2.tar.gz`` (PyPI; SHA-256 checked) or a directory with its two files
        (:func:`fedbandit.envs.mslr.read_rankeval_sample`).
    check_hash : bool, default True
        Refuse a tarball whose SHA-256 differs from the pinned one.

    Returns
    -------
    dict
        ``top_label_counts`` (136, n_queries, 5) int: for feature ``f = 1..136`` (row
        ``f - 1``) and query ``q``, how many of the documents of largest feature-``f`` value
        (all tied at the top) have label 0, 1, 2, 3, 4; ``features`` (136,) the MSLR feature
        numbers; ``docs_per_query`` (n_queries,); ``label_counts`` (5,) over all documents;
        ``source_sha256``.
    """
    labels, query, X, digest = read_rankeval_sample(source, check_hash=check_hash)
    n_q = int(query.max()) + 1
    feats = np.arange(1, X.shape[1])
    table = np.zeros((feats.size, n_q, 5), dtype=np.int32)
    for q in range(n_q):
        idx = np.flatnonzero(query == q)
        block = X[idx][:, feats]  # (docs, 136)
        top = block == block.max(axis=0, keepdims=True)  # (docs, 136) tied at the top
        onehot = np.eye(5, dtype=np.int32)[labels[idx]]  # (docs, 5)
        table[:, q, :] = top.T.astype(np.int32) @ onehot
    return {
        "top_label_counts": table,
        "features": feats,
        "docs_per_query": np.bincount(query, minlength=n_q),
        "label_counts": np.bincount(labels, minlength=5),
        "source_sha256": digest,
    }


def save_ranker_table(table: dict, path=DEFAULT_RANKER_PATH) -> Path:
    """Write a table from :func:`build_ranker_table` to a compressed ``.npz``.

    Parameters
    ----------
    table : dict
        From :func:`build_ranker_table`.
    path : path, default the repository's ``data/mslr_rankers.npz``
        Where to write it.

    Returns
    -------
    pathlib.Path
        The path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **{k: np.asarray(v) for k, v in table.items()})
    return path


def load_ranker_table(path=None) -> dict:
    """Load the stored ranker table (default :func:`ranker_table_path`).

    Parameters
    ----------
    path : path, optional
        Default :func:`ranker_table_path`.

    Returns
    -------
    dict
        The table's arrays, ``source_sha256`` a str.
    """
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be None or a path (str or os.PathLike), got {path!r:.80} of type {type(path).__name__}")
    path = ranker_table_path() if path is None else Path(path)
    if path.is_dir():
        raise ValueError(f"path must be a .npz file, got the directory {str(path)!r}")
    if not path.exists():
        raise FileNotFoundError(
            f"{path} not found; regenerate it with `python -m fedbandit.envs.recommendation build-rankers "
            f"<rankeval-{RANKEVAL_VERSION}.tar.gz>` (see data/README.md)"
        )
    with np.load(path, allow_pickle=False) as f:
        out = {k: f[k] for k in f.files}
    out["source_sha256"] = str(out["source_sha256"])
    return out


def _check_table(table) -> dict:
    """A table of :func:`build_ranker_table`: a dict with ``features`` (F,) and ``top_label_counts`` (F, Q, 5)."""
    if not isinstance(table, dict):
        raise TypeError(f"table must be None or a dict from build_ranker_table, got {table!r:.80} of type "
                        f"{type(table).__name__}")
    missing = {"features", "top_label_counts"} - set(table)
    if missing:
        raise ValueError(f"table lacks the entries {sorted(missing)} of a build_ranker_table result")
    try:
        counts = np.asarray(table["top_label_counts"], dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError("table['top_label_counts'] must be an array of label counts") from exc
    if counts.ndim != 3 or counts.shape[2] != RELEVANCE_VALUES.size or np.shape(table["features"]) != counts.shape[:1]:
        raise ValueError(f"table['top_label_counts'] must have shape (F, Q, {RELEVANCE_VALUES.size}) and "
                         f"table['features'] shape (F,), got {counts.shape} and {np.shape(table['features'])}")
    if not np.all(np.isfinite(counts)) or np.any(counts < 0) or np.any(counts.sum(axis=2) <= 0):
        raise ValueError("table['top_label_counts'] must hold non-negative counts, with a positive total per query")
    return table


def ranker_distributions(table: dict | None = None):
    """Every ranker's reward distribution over :data:`RELEVANCE_VALUES`.

    A user's query is uniform over the queries; among the ranker's top-tied documents one
    is shown uniformly at random.  Returns ``(features (F,), probs (F, 5), means (F,))``.

    Parameters
    ----------
    table : dict, optional
        From :func:`build_ranker_table` (default :func:`load_ranker_table`).

    Returns
    -------
    (ndarray, ndarray, ndarray)
        ``features`` (F,), ``probs`` (F, 5), ``means`` (F,).
    """
    table = load_ranker_table() if table is None else _check_table(table)
    counts = np.asarray(table["top_label_counts"], dtype=float)  # (F, Q, 5)
    per_query = counts / counts.sum(axis=2, keepdims=True)
    probs = per_query.mean(axis=1)
    return np.asarray(table["features"]), probs, probs @ RELEVANCE_VALUES


def ranker_bandit(n_arms: int = 10, table: dict | None = None) -> CategoricalBandit:
    """The ``n_arms`` best rankers (largest mean reward; one of each set of rankers with
    identical reward distributions) as a :class:`CategoricalBandit`, best arm first.

    The returned environment also carries ``features``: the MSLR feature numbers of its arms.

    Parameters
    ----------
    n_arms : int, default 10
        K ≥ 2.
    table : dict, optional
        From :func:`build_ranker_table` (default :func:`load_ranker_table`).

    Returns
    -------
    CategoricalBandit
        Best arm first, with ``features``.
    """
    n_arms = check_int_in_range("n_arms", n_arms, 2, None)
    feats, probs, means = ranker_distributions(table)
    _, first = np.unique(np.round(probs, 12), axis=0, return_index=True)
    distinct = np.sort(first)
    order = distinct[np.argsort(-means[distinct], kind="stable")]
    if n_arms > order.size:
        raise ValueError(f"n_arms must be at most the {order.size} distinct rankers, got {n_arms}")
    pick = order[:n_arms]
    env = CategoricalBandit.from_distributions(RELEVANCE_VALUES, probs[pick])
    object.__setattr__(env, "features", feats[pick].copy())
    return env


def _main(argv=None) -> int:
    """``python -m fedbandit.envs.recommendation build-rankers SOURCE [OUT]``."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or argv[0] != "build-rankers":
        print("usage: python -m fedbandit.envs.recommendation build-rankers <rankeval-0.8.2.tar.gz | dir> [out.npz]",
              file=sys.stderr)
        return 2
    out = Path(argv[2]) if len(argv) > 2 else DEFAULT_RANKER_PATH
    table = build_ranker_table(argv[1])
    path = save_ranker_table(table, out)
    feats, _, means = ranker_distributions(table)
    best = np.argsort(-means)[:3]
    print(f"wrote {path}: {feats.size} rankers x {table['docs_per_query'].size} queries "
          f"(source SHA-256 {table['source_sha256'] or 'n/a (directory)'}; pinned {RANKEVAL_SHA256}); "
          f"best rankers: " + ", ".join(f"feature {feats[i]} ({means[i]:.3f})" for i in best))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(_main())

"""Real datasets shipped by pinned PyPI packages (no download at run time)."""

from __future__ import annotations

import numpy as np

from fedbandit._validation import check_int_in_range, check_positive_int, check_probability, check_rng

__all__ = ["load_digits_federated"]


def load_digits_federated(n_clients: int = 100, *, test_fraction: float = 0.2, rng=0) -> dict:
    """The UCI handwritten digits (scikit-learn's bundled ``load_digits``) split over clients.

    Stand-in for Federated EMNIST in the distributed discrete Gaussian chapter ([KLS21]
    Sec. 6.2 trains on EMNIST, which needs a download): 1797 8x8 grey-scale images of the
    digits 0-9, pixel values scaled to [0, 1], a random ``test_fraction`` held out, the rest
    dealt at random into ``n_clients`` clients of (almost) equal size.  The data of
    :class:`fedbandit.learners.federated.FederatedLearner` (:func:`fedbandit.experiments.run_config` with ``instance="digits"``
    builds it from a configuration's ``n_clients``, ``split_seed`` and ``test_fraction``).

    Parameters
    ----------
    n_clients : int
        Number of clients, in [2, number of training images].
    test_fraction : float
        Fraction of images held out for testing, in (0, 1).
    rng : numpy.random.Generator or int
        Randomness of the split.

    Returns
    -------
    dict
        ``X`` (n_clients, n_local, 64) float, ``y`` (n_clients, n_local) int,
        ``mask`` (n_clients, n_local) bool (False marks padding when sizes differ),
        ``X_test`` (n_test, 64), ``y_test`` (n_test,), ``n_classes`` = 10.
    """
    from sklearn.datasets import load_digits  # shipped with scikit-learn, no network

    test_fraction = check_probability("test_fraction", test_fraction)
    rng = check_rng("rng", rng)
    data = load_digits()
    X = data.data.astype(np.float64) / 16.0
    y = data.target.astype(np.int64)
    perm = rng.permutation(len(y))
    n_test = int(round(test_fraction * len(y)))
    test, train = perm[:n_test], perm[n_test:]
    n_clients = check_positive_int("n_clients", n_clients)
    n_clients = check_int_in_range("n_clients", n_clients, 2, len(train))
    n_local = -(-len(train) // n_clients)
    Xc = np.zeros((n_clients, n_local, X.shape[1]))
    yc = np.zeros((n_clients, n_local), dtype=np.int64)
    mask = np.zeros((n_clients, n_local), dtype=bool)
    for i, part in enumerate(np.array_split(train, n_clients)):
        Xc[i, : len(part)] = X[part]
        yc[i, : len(part)] = y[part]
        mask[i, : len(part)] = True
    return {"X": Xc, "y": yc, "mask": mask, "X_test": X[test], "y_test": y[test], "n_classes": 10}

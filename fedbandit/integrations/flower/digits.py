"""Chapter 5's digits clients for a Flower federation (no ``flwr`` needed; picklable for Ray workers)."""

from __future__ import annotations

import functools

import numpy as np

from fedbandit._validation import check_int_in_range, check_positive_float, check_positive_int
from fedbandit.envs import load_digits_federated
from fedbandit.learners.federated import local_updates

__all__ = ["DigitsClients"]


@functools.lru_cache(maxsize=4)
def _federated_digits(n_clients: int, split_seed: int) -> dict:
    """The federation's data, loaded once per process (read-only: every client of a worker shares it).

    Flower's Ray backend ships the client app -- and with it a :class:`DigitsClients`, whose
    pickled state leaves the data out -- to a worker with every message: without this cache
    each fit message would load and split the digits again (~50 ms).
    """
    data = load_digits_federated(n_clients, rng=split_seed)
    for v in data.values():
        if isinstance(v, np.ndarray):
            v.setflags(write=False)
    return data


class DigitsClients:
    """The clients of chapter 5's digits federation: local training and test accuracy (picklable for Ray).

    ``DigitsClients(n_clients, split_seed=0)(pid, W)`` is client ``pid``'s update Δ after
    ``local_steps`` steps of :func:`fedbandit.learners.federated.local_updates` from the model W, on its
    part of :func:`fedbandit.envs.load_digits_federated` (the data of
    ``run_config(instance="digits", n_clients=..., split_seed=...)``); :meth:`accuracy` is
    the test accuracy of a model.
    """

    def __init__(self, n_clients: int, *, split_seed: int = 0, lr: float = 0.5, local_steps: int = 5,
                 n_classes: int = 10):
        self.n_clients = check_positive_int("n_clients", n_clients, max_value=10**6)
        self.split_seed = check_int_in_range("split_seed", split_seed, 0, None)
        self.lr = check_positive_float("lr", lr)
        self.local_steps = check_positive_int("local_steps", local_steps, max_value=10**6)
        self.n_classes = check_int_in_range("n_classes", n_classes, 2, 10**6)
        self._data = None

    def __getstate__(self):
        return {k: (None if k == "_data" else v) for k, v in self.__dict__.items()}

    @property
    def data(self):
        if self._data is None:
            self._data = _federated_digits(self.n_clients, self.split_seed)
        return self._data

    @property
    def dim(self) -> int:
        return (self.data["X"].shape[-1] + 1) * self.n_classes

    def inputs(self, pids):
        """(X with the bias feature, one-hot Y masked, mask, count) of clients ``pids``."""
        d = self.data
        pids = np.atleast_1d(np.asarray(pids, dtype=np.int64))
        X = np.concatenate([d["X"][pids], np.ones(d["X"][pids].shape[:-1] + (1,))], axis=-1)
        mask = d["mask"][pids]
        Y = np.eye(self.n_classes)[d["y"][pids]] * mask[..., None]
        return X, Y, mask, mask.sum(axis=1)[:, None, None]

    def __call__(self, pid, W) -> np.ndarray:
        X, Y, mask, count = self.inputs([pid])
        f = X.shape[-1]
        W0 = np.asarray(W, dtype=np.float64).reshape(1, f, self.n_classes)

        return local_updates(W0, X, Y, mask, count, lr=self.lr, local_steps=self.local_steps)[0]

    def accuracy(self, W) -> float:
        d = self.data
        Xt = np.concatenate([d["X_test"], np.ones((len(d["y_test"]), 1))], axis=-1)
        logits = Xt @ np.asarray(W, dtype=np.float64).reshape(Xt.shape[1], self.n_classes)
        return float(np.mean(np.argmax(logits, axis=-1) == d["y_test"]))

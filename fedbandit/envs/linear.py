"""Linear contextual bandit environments for the federated chapters.

Two instances, both built the way Zhou & Chowdhury (2023, Section 7) build theirs:

* :class:`SyntheticLinearEnv` -- the synthetic instance of their Fig. 2a/2b
  [authors' code]: every arm's raw feature is a random unit vector in d − 1
  dimensions with a bias coordinate 1 appended (the first d arms are replaced by the
  basis rows e_j + e_d); θ is a random (d − 1)-vector of norm 0.5 with 0.5 appended;
  agents observe the L2-normalized features; the mean reward of an arm is the inner
  product of θ with its *raw* feature; rewards carry N(0, 0.5²) noise.
* :class:`RealDataLinearEnv` -- the real-data instance of their Fig. 2c, rebuilt
  from the MSLR-WEB10K sample that the ``rankeval`` package ships
  (:func:`build_mslr_instance`, stored in ``data/`` and loaded with
  :func:`load_mslr_instance`): θ fitted by Lasso on the relevance labels, agents own
  disjoint blocks of queries, each round every agent draws a query of its own block
  and the arms are that query's documents, rewards are noiseless.

Generation
----------
Contexts are generated on the fly in blocks of rounds (:meth:`iter_blocks`), never
for the whole horizon at once (the authors' code preallocates an 8 GB array).  Every
array of a block carries the leading axes ``(rounds_in_block, runs, agents, ...)``.  The
synthetic instance draws its normals round after round, so :meth:`iter_blocks` hands a
block out in pieces of about :data:`PIECE_BYTES` drawn one after the other from the
block's generators: the same numbers as the whole block, in arrays small enough for the
allocator to reuse.  Several learners on one environment can share its blocks
(:mod:`fedbandit.envs.sharing`; :meth:`stream_key` says which environments are equal).

Common random numbers
---------------------
An environment is a deterministic function of its ``seed``: the stream of block ``b``
is derived with :class:`numpy.random.SeedSequence` from ``(seed, role, b[, run])``
(role 0: instance, 1: contexts, 2: reward noise), independently of any learner's own
randomness.  So every algorithm run on the same environment sees exactly the same
contexts and reward noise, and the data of run ``r`` do not depend on how many runs
are simulated side by side.

Contexts shared across runs
---------------------------
With ``shared_contexts=True`` (the authors' code: its context array is drawn once with
a fixed seed) all runs see the same contexts and differ only in reward noise and in
the learner's (privacy) randomness; the context arrays then have a run axis of length
1, which the LinUCB core exploits (:mod:`fedbandit.learners.linucb`).  With
``shared_contexts=False`` every run draws its own contexts.

Reward noise is one draw per (run, round, agent), added to the mean of whichever arm
is played: each learner observes exactly the distribution of the model
y = ⟨θ, x⟩ + η, while two learners that play different arms see the same η, which
keeps comparisons paired.  Regret is pseudo-regret (difference of means).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from fedbandit._validation import (
    MAX_STEPS,
    check_array,
    check_bool,
    check_nonnegative_float,
    check_positive_int,
)

__all__ = [
    "RoundBlock",
    "SyntheticLinearEnv",
    "RealDataLinearEnv",
    "as_seed_sequence",
]

#: Target size of one block of context features, in bytes (keeps peak memory small).
BLOCK_BYTES = 48 * 2**20
#: Target size of the features of one piece of a block that :meth:`_LinearEnvBase.iter_blocks`
#: yields when draws are sequential: small enough for the allocator to reuse its memory
#: (arrays above its 32 MB mmap threshold are mapped afresh, page by page, every block).
PIECE_BYTES = 4 * 2**20

_ROLE_INSTANCE, _ROLE_CONTEXTS, _ROLE_NOISE = 0, 1, 2


def as_seed_sequence(seed, name: str = "seed") -> np.random.SeedSequence:
    """Turn ``seed`` into the root :class:`~numpy.random.SeedSequence` of an environment.

    Accepts a non-negative int, a SeedSequence, or a :class:`numpy.random.Generator`
    (from which 128 bits of entropy are drawn once, so a Generator handed out by
    :func:`fedbandit.experiments.grid.run_grid` determines the environment).

    Parameters
    ----------
    seed : int, numpy.random.SeedSequence or numpy.random.Generator
        The seed.
    name : str, default "seed"
        The parameter's name in the error message.

    Returns
    -------
    numpy.random.SeedSequence
    """
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, np.random.Generator):
        return np.random.SeedSequence(int(seed.integers(0, 2**63)) << 64 | int(seed.integers(0, 2**63)))
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0:
        return np.random.SeedSequence(int(seed))
    raise TypeError(f"{name} must be a non-negative int, a SeedSequence or a numpy Generator, got {seed!r}")


def _child(root: np.random.SeedSequence, *key: int) -> np.random.Generator:
    """Generator keyed by ``key`` below ``root`` (independent of every other key)."""
    ss = np.random.SeedSequence(root.entropy, spawn_key=tuple(root.spawn_key) + tuple(int(k) for k in key))
    return np.random.default_rng(ss)


def reward_noise_rng(root: np.random.SeedSequence, block: int, run: int) -> np.random.Generator:
    """The generator of the reward noise of block ``block`` in run ``run`` below ``root``.

    Environments that draw their noise as this module does (common random numbers, e.g.
    :class:`fedbandit.envs.orthogonal.OrthogonalArmsEnv`) call it.

    Parameters
    ----------
    root : numpy.random.SeedSequence
        The environment's root (:func:`as_seed_sequence`).
    block, run : int
        The block's index and the run.

    Returns
    -------
    numpy.random.Generator
    """
    return _child(root, _ROLE_NOISE, block, run)


@dataclass
class RoundBlock:
    """Contexts and reward noise of ``n_rounds`` consecutive rounds.

    Attributes
    ----------
    start : int
        0-based index of the block's first round (round t = start + s + 1 for row s).
    features : ndarray, shape (n_rounds, Rc, M, K, d)
        Features the agents observe (L2-normalized); ``Rc`` is 1 when contexts are
        shared across runs, else the number of runs.
    means : ndarray, shape (n_rounds, Rc, M, K)
        Mean reward of every arm (−inf for padded arms).
    best : ndarray, shape (n_rounds, Rc, M)
        Largest mean reward among the arms.
    noise : ndarray, shape (n_rounds, R, M)
        Reward noise added to the played arm's mean.
    mask : ndarray of bool, shape (n_rounds, Rc, M, K), or None
        True for real arms when the number of arms varies (padding is False).
    arm_ids : ndarray of int, shape (n_rounds, Rc, M, K), or None
        When every arm is a row of the environment's fixed table ``env.arm_features``
        (N, d): the row of each arm (0 for padded arms), so that a learner can score the
        table once per synchronization instead of every arm of every round
        (:func:`fedbandit.learners.linucb.table_scores`).  ``features`` is then
        ``env.arm_features[arm_ids]``.
    table : ndarray of shape (N, d), or None
        The table ``arm_ids`` index (``env.arm_features``), given with ``_features=None``:
        ``features`` is then formed from it on first use.
    """

    start: int
    _features: np.ndarray | None
    means: np.ndarray
    best: np.ndarray
    noise: np.ndarray
    mask: np.ndarray | None = None
    arm_ids: np.ndarray | None = None
    #: The table ``arm_ids`` index (``env.arm_features``); given with ``_features=None``,
    #: ``features`` is formed from it on first use (a learner that scores the table never
    #: needs the per-round copies).
    table: np.ndarray | None = None

    @property
    def features(self) -> np.ndarray:
        if self._features is None:
            self._features = self._rows(self.arm_ids, self.mask)
        return self._features

    @property
    def features_from_table(self) -> bool:
        """Whether ``features`` is still to be formed from ``table``: a learner that serves one round at
        a time can then form each round's alone (:meth:`round_features`), never the whole block's."""
        return self._features is None and self.table is not None

    def round_features(self, s: int) -> np.ndarray:
        """``features[s]``, formed from the table alone when the block's features are not formed yet."""
        if self._features is not None:
            return self._features[s]
        return self._rows(self.arm_ids[s], None if self.mask is None else self.mask[s])

    def _rows(self, arm_ids: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
        feats = self.table[arm_ids]
        if mask is not None:
            feats *= mask[..., None]  # padded arms are zero vectors
        return feats

    @property
    def n_rounds(self) -> int:
        return self.means.shape[0]

    def head(self, n_rounds: int) -> "RoundBlock":
        """The block of its first ``n_rounds`` rounds (views)."""
        def cut(a):
            return None if a is None else a[:n_rounds]

        return RoundBlock(self.start, cut(self._features), cut(self.means), cut(self.best), cut(self.noise),
                          cut(self.mask), cut(self.arm_ids), self.table)


class _LinearEnvBase:
    """Shared block iteration; subclasses implement :meth:`_contexts` and set sizes."""

    n_agents: int
    n_arms: int
    dim: int
    n_runs: int
    noise_std: float
    shared_contexts: bool
    block_size: int
    _root: np.random.SeedSequence

    def _default_block_size(self, block_size) -> int:
        if block_size is not None:
            return check_positive_int("block_size", block_size)
        rc = 1 if self.shared_contexts else self.n_runs
        # Bytes per arm of a block: the features (d floats), or, for an environment whose
        # arms are rows of a table (features formed only on request), its row index, mean
        # and mask (17 bytes).
        per_arm = 17 if self.arm_features is not None else self.dim * 8
        per_round = max(1, rc * self.n_agents * self.n_arms * per_arm)
        return int(max(1, min(256, BLOCK_BYTES // per_round)))

    @property
    def context_runs(self) -> int:
        """Length ``Rc`` of the run axis of the context arrays (1 if shared)."""
        return 1 if self.shared_contexts else self.n_runs

    #: Whether a block's draws come round after round (the first k rounds of a block are the
    #: block of k rounds), so that :meth:`iter_blocks` can draw a block piece by piece.
    sequential_draws = False

    def _piece_rounds(self) -> int:
        """Rounds per piece of a block that :meth:`iter_blocks` yields (:data:`PIECE_BYTES` of features)."""
        per_round = max(1, self.context_runs * self.n_agents * self.n_arms * self.dim * 8)
        return int(max(1, PIECE_BYTES // per_round))

    def block_generators(self, index: int) -> tuple:
        """The random generators of block ``index``: (contexts, noise), each a list with one
        generator per run (one for the contexts when they are shared across runs)."""
        index = int(index)
        if index < 0:
            raise ValueError(f"index must be >= 0, got {index}")
        if self.shared_contexts:
            contexts = [_child(self._root, _ROLE_CONTEXTS, index)]
        else:
            contexts = [_child(self._root, _ROLE_CONTEXTS, index, r) for r in range(self.n_runs)]
        noise = [_child(self._root, _ROLE_NOISE, index, r) for r in range(self.n_runs)] if self.noise_std > 0 else []
        return contexts, noise

    def draw_rounds(self, index: int, offset: int, n: int, generators: tuple) -> RoundBlock:
        """The next ``n`` rounds of block ``index`` (its rounds ``offset``, ``offset + 1``, …)
        from its :meth:`block_generators`, which this advances."""
        contexts, noise_rngs = generators
        if self.shared_contexts:
            feats, means, mask, ids = self._contexts(contexts[0], n)
            feats = None if feats is None else feats[:, None]
            means = means[:, None]
            mask = None if mask is None else mask[:, None]
            ids = None if ids is None else ids[:, None]
            best = means.max(axis=-1)
        else:
            feats, means, mask, ids, best = self._run_contexts(contexts, n)
        if noise_rngs:
            noise = np.stack([g.standard_normal((n, self.n_agents)) for g in noise_rngs], axis=1)
            noise *= self.noise_std
        else:
            noise = np.zeros((n, self.n_runs, self.n_agents))
        return RoundBlock(index * self.block_size + offset, feats, means, best, noise, mask, ids,
                          None if feats is not None else self.arm_features)

    def _run_contexts(self, generators, n):
        """The contexts of ``n`` rounds of every run, one generator per run: (features, means,
        mask, ids, best), each stacked on axis 1 (the runs) as :meth:`_contexts` returns them,
        and the best mean of every (round, run, agent)."""
        parts = [self._contexts(g, n) for g in generators]
        feats = None if parts[0][0] is None else np.stack([p[0] for p in parts], axis=1)
        means = np.stack([p[1] for p in parts], axis=1)
        mask = None if parts[0][2] is None else np.stack([p[2] for p in parts], axis=1)
        ids = None if parts[0][3] is None else np.stack([p[3] for p in parts], axis=1)
        return feats, means, mask, ids, means.max(axis=-1)

    def block(self, index: int, n_rounds: int | None = None) -> RoundBlock:
        """Block number ``index`` (rounds index·block_size + 1, …), deterministic in the seed."""
        n = self.block_size if n_rounds is None else check_positive_int("n_rounds", n_rounds)
        return self.draw_rounds(index, 0, n, self.block_generators(index))

    def iter_blocks(self, horizon: int) -> Iterator[RoundBlock]:
        """Yield the blocks covering rounds 1..``horizon`` (the last one possibly shorter).

        When the draws are sequential (:attr:`sequential_draws`) a block is yielded in
        pieces of a few MB, drawn one after the other from the block's generators: the same
        numbers as :meth:`block`, without allocating (and page-faulting) the whole block.
        """
        horizon = check_positive_int("horizon", horizon)
        n_blocks = -(-horizon // self.block_size)
        piece = self._piece_rounds() if self.sequential_draws else self.block_size
        for b in range(n_blocks):
            n = min(self.block_size, horizon - b * self.block_size)
            if n <= piece:
                yield self.block(b, n)
                continue
            generators = self.block_generators(b)
            for offset in range(0, n, piece):
                yield self.draw_rounds(b, offset, min(piece, n - offset), generators)

    #: The fixed table (N, d) whose rows are the arms (``RoundBlock.arm_ids``), or None.
    arm_features: np.ndarray | None = None

    def stream_key(self) -> tuple:
        """Everything the blocks depend on: two environments with equal keys generate identical
        blocks (:mod:`fedbandit.envs.sharing` shares them between learners)."""
        return (type(self).__name__, self._root.entropy, tuple(self._root.spawn_key), self.n_agents, self.n_arms,
                self.dim, self.n_runs, self.noise_std, self.shared_contexts, self.block_size) + self._instance_key()

    def _instance_key(self) -> tuple:  # pragma: no cover - abstract
        """The subclass's own parameters that the blocks depend on."""
        raise NotImplementedError

    def _contexts(self, rng, n):  # pragma: no cover - abstract
        """(features, means, mask or None, arm_ids or None) of ``n`` rounds."""
        raise NotImplementedError


class SyntheticLinearEnv(_LinearEnvBase):
    """Synthetic linear contextual bandit of Zhou & Chowdhury (2023), Fig. 2a/2b.

    Built as in the authors' experiment code [authors' code], itself following
    Vaswani et al. (2020): for every (round, agent), K raw features
    x̃_a = (u_a, 1) with u_a uniform on the unit sphere of R^{d−1}, except that the first
    d arms are the basis rows e_j + e_d (j < d) and e_d; the agent observes
    x_a = x̃_a / ‖x̃_a‖₂.  θ = (v, 0.5) with v uniform of norm 0.5.  The mean reward is
    ⟨θ, x̃_a⟩ (``means_from_raw=True``, the authors' choice: linear in the raw,
    not in the observed, features) or ⟨θ, x_a⟩.

    Parameters
    ----------
    n_agents : int
        M.
    n_arms : int, default 100
        K (at least ``dim`` when ``basis_arms``).
    dim : int, default 10
        d ≥ 2.
    n_runs : int, default 1
        Independent runs simulated side by side (R).
    noise_std : float, default 0.5
        Standard deviation of the Gaussian reward noise.
    shared_contexts : bool, default True
        Same contexts in every run (the authors' code); see the module notes.
    basis_arms : bool, default True
        Replace the first d arms by the basis rows (the authors' code).
    means_from_raw : bool, default True
        Mean reward from the raw features (authors' code) or from the observed ones.
    seed : int, SeedSequence or Generator
        Determines θ, all contexts and all reward noise (common random numbers).
    block_size : int, optional
        Rounds per generated block (default: ~48 MB of features per block).
    """

    def __init__(
        self,
        n_agents,
        n_arms=100,
        dim=10,
        *,
        n_runs=1,
        noise_std=0.5,
        shared_contexts=True,
        basis_arms=True,
        means_from_raw=True,
        seed=0,
        block_size=None,
    ):
        self.n_agents = check_positive_int("n_agents", n_agents, max_value=MAX_STEPS)
        self.n_arms = check_positive_int("n_arms", n_arms, max_value=MAX_STEPS)
        self.dim = check_positive_int("dim", dim, max_value=MAX_STEPS)
        if self.n_agents * self.n_arms * self.dim > MAX_STEPS:
            raise ValueError(f"n_agents·n_arms·dim = {self.n_agents * self.n_arms * self.dim} features per round exceed "
                             f"10^9 (n_agents={self.n_agents}, n_arms={self.n_arms}, dim={self.dim})")
        if self.dim < 2:
            raise ValueError(f"dim must be >= 2 (a direction plus the bias coordinate), got {dim!r}")
        self.n_runs = check_positive_int("n_runs", n_runs, max_value=MAX_STEPS)
        self.noise_std = check_nonnegative_float("noise_std", noise_std)
        self.shared_contexts = check_bool("shared_contexts", shared_contexts)
        self.basis_arms = check_bool("basis_arms", basis_arms)
        if self.basis_arms and self.n_arms < self.dim:
            raise ValueError(f"n_arms must be >= dim={self.dim} when basis_arms=True, got {n_arms!r}")
        self.means_from_raw = check_bool("means_from_raw", means_from_raw)
        self._root = as_seed_sequence(seed)
        rng = _child(self._root, _ROLE_INSTANCE)
        v = rng.standard_normal(self.dim - 1)
        v *= 0.5 / np.linalg.norm(v)
        self.theta = np.append(v, 0.5)
        basis = np.eye(self.dim)
        basis[:, -1] = 1.0
        self._basis = basis
        self._basis_obs = basis / np.linalg.norm(basis, axis=1, keepdims=True)
        self._basis_means = (basis if self.means_from_raw else self._basis_obs) @ self.theta
        self.block_size = self._default_block_size(block_size)

    def _contexts(self, rng, n):
        M, K, d = self.n_agents, self.n_arms, self.dim
        u = rng.standard_normal((n, M, K, d - 1))
        u /= np.sqrt(np.einsum("...i,...i->...", u, u))[..., None]
        # Raw feature (u, 1) has norm sqrt(2): observed = raw / sqrt(2), mean = ⟨u, v⟩ + θ_d.
        feats = np.empty((n, M, K, d))
        np.multiply(u, 1.0 / math.sqrt(2.0), out=feats[..., : d - 1])  # = u, then scaled: one pass
        feats[..., d - 1] = 1.0 / math.sqrt(2.0)
        means = u @ self.theta[:-1] + self.theta[-1]
        if not self.means_from_raw:
            means *= 1.0 / math.sqrt(2.0)
        if self.basis_arms:
            feats[:, :, :d, :] = self._basis_obs
            means[:, :, :d] = self._basis_means
        return feats, means, None, None

    #: A block's normals are drawn round after round (C order, rounds first).
    sequential_draws = True

    def _instance_key(self) -> tuple:
        return (self.basis_arms, self.means_from_raw)

    def describe(self) -> dict:
        return {
            "instance": "synthetic (Zhou & Chowdhury Fig. 2a/2b)",
            "M": self.n_agents,
            "K": self.n_arms,
            "d": self.dim,
            "runs": self.n_runs,
            "noise_std": self.noise_std,
            "shared_contexts": self.shared_contexts,
        }


# ---------------------------------------------------------------------------------
# Real data: the MSLR-WEB10K sample shipped by rankeval
# ---------------------------------------------------------------------------------

class RealDataLinearEnv(_LinearEnvBase):
    """Real-data linear contextual bandit built like Zhou & Chowdhury's MSLR instance.

    [authors' code] The queries are split into M consecutive blocks of
    ⌊n_queries / M⌋ queries (the remainder is unused); each round every agent draws a
    query of its own block uniformly at random; its arms are the query's documents,
    observed as L2-normalized raw features; the mean reward of a document is
    ⟨θ, raw feature⟩ (``means_from_raw=True``), with no noise (``noise_std=0``).
    Queries have different numbers of documents: arrays are padded to the largest and
    ``mask`` marks real arms.

    Parameters
    ----------
    instance : dict
        From :func:`load_mslr_instance` (or :func:`build_mslr_instance`).
    n_agents : int, default 10
        M (the paper's real-data experiment uses 10).
    n_runs : int, default 1
    noise_std : float, default 0.0
    shared_contexts : bool, default False
        Draw the same queries in every run (default: per run, as the authors' code does).
    max_arms : int, optional
        If given, a query with more documents offers a uniformly random subset of
        ``max_arms`` of them each round (a compute-budget device, not in the paper).
    means_from_raw : bool, default True
    seed : int, SeedSequence or Generator
    block_size : int, optional
    """

    def __init__(
        self,
        instance: dict,
        n_agents=10,
        *,
        n_runs=1,
        noise_std=0.0,
        shared_contexts=False,
        max_arms=None,
        means_from_raw=True,
        seed=0,
        block_size=None,
    ):
        self.n_agents = check_positive_int("n_agents", n_agents, max_value=MAX_STEPS)
        self.n_runs = check_positive_int("n_runs", n_runs, max_value=MAX_STEPS)
        self.noise_std = check_nonnegative_float("noise_std", noise_std)
        self.shared_contexts = check_bool("shared_contexts", shared_contexts)
        self.means_from_raw = check_bool("means_from_raw", means_from_raw)
        if not isinstance(instance, dict):
            raise TypeError(f"instance must be a dict with 'features', 'query' and 'theta' (see load_mslr_instance), "
                            f"got {type(instance).__name__}")
        try:
            raw = instance["features"]
            query = instance["query"]
            theta = instance["theta"]
        except (KeyError, TypeError) as exc:
            raise TypeError("instance must be a dict with 'features', 'query' and 'theta' (see load_mslr_instance)") from exc
        raw = check_array("instance['features']", raw, ndim=2)
        theta = check_array("instance['theta']", theta, ndim=1)
        query = np.asarray(query)
        if raw.shape[1] != theta.shape[0]:
            raise ValueError(f"instance['theta'] has {theta.shape[0]} entries but features have {raw.shape[1]} columns")
        if query.shape != (raw.shape[0],):
            raise ValueError(f"instance['query'] must have shape ({raw.shape[0]},), got {query.shape}")
        n_queries = int(query.max()) + 1
        per_agent = n_queries // self.n_agents
        if per_agent < 1:
            raise ValueError(f"n_agents={self.n_agents} exceeds the number of queries {n_queries}")
        self.n_queries, self.queries_per_agent = n_queries, per_agent
        self.dim = raw.shape[1]
        self.theta = theta
        norms = np.linalg.norm(raw, axis=1, keepdims=True)
        if np.any(norms == 0):
            raise ValueError("instance['features'] has an all-zero row; it cannot be normalized")
        obs = raw / norms
        mean_all = (raw if self.means_from_raw else obs) @ theta
        order = np.argsort(query, kind="stable")
        counts = np.bincount(query, minlength=n_queries)
        self.docs_per_query = counts
        kmax = int(counts[: per_agent * self.n_agents].max())
        if max_arms is not None:
            max_arms = check_positive_int("max_arms", max_arms)
            kmax = min(kmax, max_arms)
        self.max_arms = max_arms
        self.n_arms = kmax
        # Per-query padded tables: features (Q, Kq_max, d), means (Q, Kq_max), valid (Q, Kq_max).
        qmax = int(counts.max())
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        self._qfeat = np.zeros((n_queries, qmax, self.dim))
        self._qmean = np.full((n_queries, qmax), -np.inf)
        self._qvalid = np.zeros((n_queries, qmax), dtype=bool)
        # The arms of the used queries (the agents' blocks) as one table, in query order:
        # arm_features[_qids[q, k]] is document k of query q (row 0 for padding).
        used = per_agent * self.n_agents
        self._qids = np.zeros((n_queries, qmax), dtype=np.int64)
        first = np.concatenate([[0], np.cumsum(counts[:used])])
        for q in range(n_queries):
            idx = order[starts[q] : starts[q] + counts[q]]
            self._qfeat[q, : counts[q]] = obs[idx]
            self._qmean[q, : counts[q]] = mean_all[idx]
            self._qvalid[q, : counts[q]] = True
            if q < used:
                self._qids[q, : counts[q]] = first[q] + np.arange(counts[q])
        self.arm_features = np.concatenate([self._qfeat[q, : counts[q]] for q in range(used)], axis=0)
        self._qbest = self._qmean.max(axis=1)  # the best mean of every query (all its documents)
        self._root = as_seed_sequence(seed)
        self.block_size = self._default_block_size(block_size)
        self._digest = None  # of the tables the blocks are drawn from (stream_key), computed on request

    def _contexts(self, rng, n):
        q = self._query_draws(rng, n)
        # The features are rows of the table arm_features (RoundBlock.features forms them
        # from arm_ids when a learner asks for them).
        means = self._qmean[q]
        valid = self._qvalid[q]
        ids = self._qids[q]
        K = self.n_arms
        if means.shape[2] > K:
            # Keep a uniformly random subset of at most K real documents: sort random keys
            # with padding last, take the first K.
            keys = rng.random(valid.shape)
            keys[~valid] = 2.0
            sel = np.argsort(keys, axis=-1)[..., :K]
            means = np.take_along_axis(means, sel, axis=2)
            valid = np.take_along_axis(valid, sel, axis=2)
            ids = np.take_along_axis(ids, sel, axis=2)
        else:
            means, valid, ids = means[:, :, :K], valid[:, :, :K], ids[:, :, :K]
        return None, means, valid, ids

    def _query_draws(self, rng, n):
        """The query of every (round, agent) of ``n`` rounds: (n, M) indices into the query tables."""
        M, P = self.n_agents, self.queries_per_agent
        return rng.integers(0, P, size=(n, M)) + P * np.arange(M)

    def _run_contexts(self, generators, n):
        """As the base class's (every run's :meth:`_contexts`, stacked), from one index of the
        query tables by the runs' queries when every query offers all its documents: the same
        numbers without forming and stacking one copy per run; the best mean of a round is
        its query's (:attr:`_qbest`)."""
        if self._qmean.shape[1] > self.n_arms:  # a random subset of the documents, drawn run by run
            return super()._run_contexts(generators, n)
        q = np.stack([self._query_draws(g, n) for g in generators], axis=1)  # (n, R, M)
        return None, self._qmean[q], self._qvalid[q], self._qids[q], self._qbest[q]

    def _instance_key(self) -> tuple:
        if self._digest is None:
            import hashlib

            h = hashlib.sha256()
            for a in (self.arm_features, self._qmean, self._qvalid, self._qids):
                h.update(repr((a.dtype.str, a.shape)).encode())
                h.update(np.ascontiguousarray(a).tobytes())
            self._digest = h.hexdigest()
        return (self.max_arms, self.means_from_raw, self.queries_per_agent, self._digest)

    def describe(self) -> dict:
        return {
            "instance": "MSLR-WEB10K sample (rankeval 0.8.2), Zhou & Chowdhury Fig. 2c construction",
            "M": self.n_agents,
            "K_max": self.n_arms,
            "d": self.dim,
            "queries": self.n_queries,
            "queries_per_agent": self.queries_per_agent,
            "runs": self.n_runs,
        }


if __name__ == "__main__":  # pragma: no cover
    from fedbandit.envs.mslr import main

    raise SystemExit(main())

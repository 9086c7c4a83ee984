"""Bandit learners of the book.

* :mod:`fedbandit.learners.linucb` -- the LinUCB core (Abbasi-Yadkori, Pál & Szepesvári
  2011), vectorized over (runs, agents): regularized inverse Gram matrices kept by
  Sherman–Morrison updates, optimistic scores and the arg-max over arms.  Shared by every
  federated linear learner.
* :mod:`fedbandit.learners.fixed_batch` -- Algorithm 1 of Zhou & Chowdhury (2023):
  fixed-batch federated LinUCB with a pluggable privacy protocol
  (:mod:`fedbandit.protocols.tree`), and its baselines (central-DP super agent, independent
  agents).
* :mod:`fedbandit.learners.dp20` -- DP20's FedUCB (Dubey & Pentland 2020).
* :mod:`fedbandit.learners.consensus` -- federated private UCB with consensus
  (Li, Song & Fragouli 2022).
* :mod:`fedbandit.learners.concurrent_linucb` -- LinUCB in the concurrent shuffle model
  (Tenenbaum, Kaplan, Mansour & Stemmer 2023).
"""

"""Plain reference implementation of fixed-batch federated LinUCB (Zhou & Chowdhury, Alg. 1 + 2).

One run, one agent, one arm at a time, straight from the algorithm boxes, with no
vectorization and no incremental inverses: V is rebuilt and inverted every round.  Used by
``tests/test_fixed_batch.py`` to check that the vectorized learner makes the same decisions
on the same draws.

The randomness matches the vectorized code: the environment's blocks are read from the
same environment object, and the protocol noise is drawn from the protocol's own stream
(``rng.spawn(2)[0]``) in the same order, with the tree module's noise primitive
(:func:`fedbandit.mechanisms.tree.draw_noise`) -- per batch, all runs and agents' bias
noise (R, M, d), then their symmetric Gram noise (R, M, d, d) -- and then read entry by
entry in the loops.  A shuffler permutes messages, which does not change
their sum, so its draws are not needed.
"""

from __future__ import annotations

import numpy as np

from fedbandit.learners.linucb import TIE_TOL
from fedbandit.mechanisms.tree import draw_noise


def _noise_tables(rng, n_batches, shape_bias, shape_gram, sigma0):
    """Pre-draw every batch's Gaussian node noise in the vectorized protocol's order."""
    noise_rng = rng.spawn(2)[0]
    nb, ng = [], []
    for _ in range(n_batches):
        nb.append(draw_noise(noise_rng, shape_bias, sigma0))
        ng.append(draw_noise(noise_rng, shape_gram, sigma0, symmetric=True))
    return nb, ng


def lowest_set_bit(k):
    j = 0
    while k % 2 == 0:
        k //= 2
        j += 1
    return j


def reference_run(env, rng, *, horizon, batch_size, lam, beta, kind, sigma0=0.0, reward_bound=1.0, communicate=True,
                  local_updates=True):
    """Run Algorithm 1 with a plain-loop protocol.

    Parameters
    ----------
    env : environment (its blocks are read, never modified)
    rng : numpy Generator, in the same state as the one given to the vectorized learner
    horizon, batch_size : int
    lam : float
    beta : callable t -> β_t
    kind : {"nonprivate", "gaussian_tree", "central_tree"}
        The protocol: exact sums; Algorithm 2 with per-agent Gaussian noise σ₀ (silo-LDP
        and SDP-amp); one central tree at the server with noise σ₀.
    sigma0 : float
    reward_bound : float or None
    communicate : bool
    local_updates : bool
        True: line 5 as written (V = λI + W̃_syn + W_i, θ̂ = V⁻¹(Ũ_syn + U_i)); False: the
        private variant (V = λI + W̃_syn, θ̂ = V⁻¹ Ũ_syn for every user of the batch).

    Returns
    -------
    regret : ndarray (R, T), arms : ndarray (R, T, M)
    """
    T, B = horizon, batch_size
    R, M, d = env.n_runs, env.n_agents, env.dim
    K = T // B
    kappa = K.bit_length()
    # Read all the environment's rounds (small instances only).
    feats, means, best, noise, masks = [], [], [], [], []
    for block in env.iter_blocks(T):
        for s in range(block.n_rounds):
            feats.append(block.features[s])
            means.append(block.means[s])
            best.append(block.best[s])
            noise.append(block.noise[s])
            masks.append(None if block.mask is None else block.mask[s])
    if kind == "gaussian_tree":
        nb, ng = _noise_tables(rng, K, (R, M, d), (R, M, d, d), sigma0)
    elif kind == "central_tree":
        nb, ng = _noise_tables(rng, K, (R, d), (R, d, d), sigma0)
    regret = np.zeros((R, T))
    arms = np.zeros((R, T, M), dtype=int)
    for r in range(R):
        rc = r if feats[0].shape[0] > 1 else 0
        W = [np.zeros((d, d)) for _ in range(M)]
        U = [np.zeros(d) for _ in range(M)]
        W_syn = np.zeros((d, d))
        U_syn = np.zeros(d)
        # Tree state: per agent noise-free p-sums (bias, gram); server noisy synchronized p-sums.
        alpha_b = [[np.zeros(d) for _ in range(kappa)] for _ in range(M)]
        alpha_g = [[np.zeros((d, d)) for _ in range(kappa)] for _ in range(M)]
        tilde_b = [np.zeros(d) for _ in range(kappa)]
        tilde_g = [np.zeros((d, d)) for _ in range(kappa)]
        tot_b = np.zeros(d)
        tot_g = np.zeros((d, d))
        for t in range(1, T + 1):
            for i in range(M):
                if local_updates or not communicate:
                    V = lam * np.eye(d) + W_syn + W[i]
                    V_inv = np.linalg.inv(V)
                    theta = V_inv @ (U_syn + U[i])
                else:  # served from the synchronized (released) statistics only
                    V = lam * np.eye(d) + W_syn
                    V_inv = np.linalg.inv(V)
                    theta = V_inv @ U_syn
                n_arms = feats[t - 1].shape[2]
                scores = []
                for a in range(n_arms):
                    if masks[t - 1] is not None and not masks[t - 1][rc, i, a]:
                        scores.append(-np.inf)
                        continue
                    x = feats[t - 1][rc, i, a]
                    width = max(float(x @ V_inv @ x), 0.0)
                    scores.append(float(x @ theta) + beta(t) * np.sqrt(width))
                # Ties up to a relative 1e-9 go to the lowest index (as in the learner).
                top = max(scores)
                a = next(a for a in range(n_arms) if scores[a] >= top - TIE_TOL * max(1.0, abs(top)))
                arms[r, t - 1, i] = a
                x = feats[t - 1][rc, i, a]
                mu = means[t - 1][rc, i, a]
                regret[r, t - 1] += best[t - 1][rc, i] - mu
                y = mu + noise[t - 1][r, i]
                if reward_bound is not None:
                    y = min(max(y, -reward_bound), reward_bound)
                U[i] = U[i] + x * y
                W[i] = W[i] + np.outer(x, x)
            if communicate and t % B == 0:
                k = t // B
                if kind == "nonprivate":
                    for i in range(M):
                        tot_b = tot_b + U[i]
                        tot_g = tot_g + W[i]
                    U_syn, W_syn = tot_b.copy(), tot_g.copy()
                elif kind == "gaussian_tree":
                    j = lowest_set_bit(k)
                    sum_b = np.zeros(d)
                    sum_g = np.zeros((d, d))
                    for i in range(M):
                        # Randomizer R at agent i (Algorithm 2, lines 4-7).
                        a_b = U[i].copy()
                        a_g = W[i].copy()
                        for ell in range(j):
                            a_b = a_b + alpha_b[i][ell]
                            a_g = a_g + alpha_g[i][ell]
                            alpha_b[i][ell] = np.zeros(d)
                            alpha_g[i][ell] = np.zeros((d, d))
                        alpha_b[i][j] = a_b
                        alpha_g[i][j] = a_g
                        sum_b = sum_b + a_b + nb[k - 1][r, i]
                        sum_g = sum_g + a_g + ng[k - 1][r, i]
                    # Analyzer A (lines 13-14).
                    tilde_b[j] = sum_b
                    tilde_g[j] = sum_g
                    U_syn = sum(tilde_b[ell] for ell in range(kappa) if (k >> ell) & 1)
                    W_syn = sum(tilde_g[ell] for ell in range(kappa) if (k >> ell) & 1)
                elif kind == "central_tree":
                    j = lowest_set_bit(k)
                    g_b = sum(U[i] for i in range(M))
                    g_g = sum(W[i] for i in range(M))
                    for ell in range(j):
                        g_b = g_b + alpha_b[0][ell]
                        g_g = g_g + alpha_g[0][ell]
                        alpha_b[0][ell] = np.zeros(d)
                        alpha_g[0][ell] = np.zeros((d, d))
                    alpha_b[0][j] = g_b
                    alpha_g[0][j] = g_g
                    tilde_b[j] = g_b + nb[k - 1][r]
                    tilde_g[j] = g_g + ng[k - 1][r]
                    U_syn = sum(tilde_b[ell] for ell in range(kappa) if (k >> ell) & 1)
                    W_syn = sum(tilde_g[ell] for ell in range(kappa) if (k >> ell) & 1)
                else:
                    raise ValueError(kind)
                for i in range(M):
                    U[i] = np.zeros(d)
                    W[i] = np.zeros((d, d))
    return regret, arms

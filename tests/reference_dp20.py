"""Plain reference implementation of DP20's FedUCB (one run, one agent at a time, loops).

Straight from the description in :mod:`fedbandit.learners.dp20`: every agent keeps its
own local statistics and its own tree (noise-free p-sums of its stream of local batches);
V is rebuilt and inverted, and log det computed with ``slogdet``, every round.  With
``learner.local_updates`` False (the fixed schedule's frozen variant) every user is served
from V = λ₀I + S̃_sync and θ = V⁻¹ũ_sync only.  It consumes
the privacy noise in the same order as the vectorized learner's protocol (a per-silo
Gaussian tree, or none): from the protocol's noise stream ``rng.spawn(2)[0]``, at the end of
a round, for the runs that synchronize (in increasing order), one ``draw_noise`` call of
shape (n_sync, M, d) (the bias noise) and one of shape (n_sync, M, d(d+1)/2) (the Gram
matrix's upper triangle, row by row, mirrored below the diagonal) -- the packed
statistics' order.
"""

from __future__ import annotations

import math

import numpy as np

from fedbandit.mechanisms.tree import draw_noise, tree_depth


def reference_feducb(learner, env, rng):
    """Run the loop version of ``learner`` (a :class:`FedUCB`, used for its settings only).

    The learner's protocol must be non-private or a per-silo Gaussian tree (σ₀ from its
    calibration).  Returns ``(actions (R, T, M), sync (R, T) bool, regret (R, T),
    S_final (R, d, d))``.
    """
    M, d, T = learner.n_agents, learner.dim, learner.horizon
    cal = learner.protocol.calibration()
    assert cal["model"] in ("none", "silo-LDP", "silo-LDP (claimed)"), cal["model"]
    sigma0 = cal["sigma0"]
    noise_rng = rng.spawn(2)[0]  # the protocol's noise stream (Protocol.reset)
    R = env.n_runs
    lam0 = learner.lam0
    n_lev = tree_depth(T)
    blocks = list(env.iter_blocks(T))

    def round_data(t):
        for b in blocks:
            if b.start < t <= b.start + b.n_rounds:
                return b, t - b.start - 1
        raise AssertionError(t)

    # state per run
    S = [np.zeros((d, d)) for _ in range(R)]
    u = [np.zeros(d) for _ in range(R)]
    W = [[np.zeros((d, d)) for _ in range(M)] for _ in range(R)]
    U = [[np.zeros(d) for _ in range(M)] for _ in range(R)]
    last = [0] * R
    k = [0] * R
    alpha_G = [[[np.zeros((d, d)) for _ in range(n_lev)] for _ in range(M)] for _ in range(R)]
    alpha_u = [[[np.zeros(d) for _ in range(n_lev)] for _ in range(M)] for _ in range(R)]
    tilde_G = [[np.zeros((d, d)) for _ in range(n_lev)] for _ in range(R)]
    tilde_u = [[np.zeros(d) for _ in range(n_lev)] for _ in range(R)]
    actions = np.zeros((R, T, M), dtype=int)
    sync = np.zeros((R, T), dtype=bool)
    regret = np.zeros((R, T))

    for t in range(1, T + 1):
        block, s = round_data(t)
        beta = learner.beta(t)
        triggered = []
        for r in range(R):
            rc = 0 if block.features.shape[1] == 1 else r
            V_sync = lam0 * np.eye(d) + S[r]
            logdet_sync = np.linalg.slogdet(V_sync)[1]
            trig = False
            for i in range(M):
                if learner.local_updates:  # DP20 as written: the agent's own new data too
                    V = V_sync + W[r][i]
                    V_inv = np.linalg.inv(V)
                    theta = V_inv @ (u[r] + U[r][i])
                else:  # the frozen variant: the synchronized (released) statistics only
                    V_inv = np.linalg.inv(V_sync)
                    theta = V_inv @ u[r]
                K = block.features.shape[3]
                best_a, best_score = None, -math.inf
                for a in range(K):
                    if block.mask is not None and not block.mask[s, rc, i, a]:
                        continue
                    x = block.features[s, rc, i, a]
                    score = x @ theta + beta * math.sqrt(max(x @ V_inv @ x, 0.0))
                    if score > best_score:
                        best_a, best_score = a, score
                a = best_a
                actions[r, t - 1, i] = a
                x = block.features[s, rc, i, a]
                mean = block.means[s, rc, i, a]
                regret[r, t - 1] += block.best[s, rc, i] - mean
                noise = block.noise[s, r if block.noise.shape[1] > 1 else 0, i]
                y = mean + noise
                if learner.reward_bound is not None:
                    y = min(max(y, -learner.reward_bound), learner.reward_bound)
                W[r][i] = W[r][i] + np.outer(x, x)
                U[r][i] = U[r][i] + x * y
                if learner.schedule == "adaptive":
                    logdet_loc = np.linalg.slogdet(V_sync + W[r][i])[1]
                    if logdet_loc - logdet_sync >= learner.threshold / (t - last[r]):
                        trig = True
                else:
                    trig = t % learner.batch_size == 0
            if trig:
                triggered.append(r)

        if not triggered:
            continue
        n_s = len(triggered)
        ZG = np.zeros((n_s, M, d, d))
        Zu = np.zeros((n_s, M, d))
        if sigma0 > 0:
            Zu = draw_noise(noise_rng, (n_s, M, d), sigma0)
            upper = draw_noise(noise_rng, (n_s, M, d * (d + 1) // 2), sigma0)
            for pos in range(n_s):
                for i in range(M):
                    entries = iter(upper[pos, i])
                    for a in range(d):
                        for b in range(a, d):
                            ZG[pos, i, a, b] = ZG[pos, i, b, a] = next(entries)
        for pos, r in enumerate(triggered):
            sync[r, t - 1] = True
            last[r] = t
            k[r] += 1
            j = (k[r] & -k[r]).bit_length() - 1
            sum_G = np.zeros((d, d))
            sum_u = np.zeros(d)
            for i in range(M):
                # Randomizer of agent i (Algorithm 2 style): p-sum closing at level j.
                aG = sum(alpha_G[r][i][ell] for ell in range(j)) + W[r][i]
                au = sum(alpha_u[r][i][ell] for ell in range(j)) + U[r][i]
                for ell in range(j):
                    alpha_G[r][i][ell] = np.zeros((d, d))
                    alpha_u[r][i][ell] = np.zeros(d)
                alpha_G[r][i][j] = aG
                alpha_u[r][i][j] = au
                sum_G = sum_G + aG + ZG[pos, i]
                sum_u = sum_u + au + Zu[pos, i]
                W[r][i] = np.zeros((d, d))
                U[r][i] = np.zeros(d)
            tilde_G[r][j] = sum_G
            tilde_u[r][j] = sum_u
            S[r] = sum(tilde_G[r][ell] for ell in range(n_lev) if k[r] >> ell & 1)
            u[r] = sum(tilde_u[r][ell] for ell in range(n_lev) if k[r] >> ell & 1)
    return actions, sync, regret, np.array(S)

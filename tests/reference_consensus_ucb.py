"""Plain-loop references for the consensus chapter (tests only).

Line-by-line versions of the algorithms of ``fedbandit.learners.consensus`` and of the
counters of Chan, Shi & Song (the hybrid mechanism, the binary mechanism and the per-item
Laplace counter of ``fedbandit.protocols.counting``), written as the algorithm boxes would
be: one run, one agent, one arm at a time, Python floats, and the textbook binary tree
(noisy p-sums ``alpha_hat`` summed over the set bits of ``tau``).  They follow the same
randomness protocol as the vectorized code (a ``RewardStream`` key first, then one batched
``draw_standard_laplace(rng, R*M)`` per slot, consumed in (run, agent) order), so on the
same seed they must make the same decisions.  The noise scales are written out here
(2s/eps, L s/eps, s/eps) on purpose: the references check the library's rules.
"""

from __future__ import annotations

import math

import numpy as np

from fedbandit.envs.graphs import consensus_matrix, network_terms
from fedbandit.envs.multi_armed import RewardStream
from fedbandit.mechanisms.continual_counting import draw_standard_laplace


class TextbookHybrid:
    """One stream of the hybrid mechanism, as in Chan, Shi & Song (Algorithm "Hybrid")."""

    def __init__(self, epsilon, sensitivity=1.0):
        self.c = 2.0 * sensitivity / epsilon  # both halves run with epsilon/2
        self.n = 0
        self.L = 0.0  # logarithmic mechanism's last release L(2^k)
        self.since = 0.0  # exact sum of the items after 2^k
        self.alpha = {}  # exact p-sums of the current binary tree, by level
        self.alpha_hat = {}  # noisy p-sums
        self.out = 0.0

    def step(self, x, z):
        """Insert item ``x`` using the standard Laplace variate ``z``; return the new output."""
        self.n += 1
        n = self.n
        k = n.bit_length() - 1
        tau = n - (1 << k)
        since = self.since + x
        if tau == 0:
            # Logarithmic mechanism release; a new binary tree starts for (2^k, 2^{k+1}).
            self.L = self.L + (since + z * self.c)
            self.since = 0.0
            self.alpha, self.alpha_hat = {}, {}
            self.out = self.L
            return self.out
        self.since = since
        i = (tau & -tau).bit_length() - 1
        a = sum(self.alpha.get(j, 0.0) for j in range(i)) + x
        for j in range(i):
            self.alpha.pop(j, None)
            self.alpha_hat.pop(j, None)
        self.alpha[i] = a
        self.alpha_hat[i] = a + z * self.c * k  # node noise Lap(2k s/eps)
        self.out = self.L + sum(self.alpha_hat[j] for j in range(k) if (tau >> j) & 1)
        return self.out


class TextbookBinary:
    """One stream of the binary mechanism over ``n_steps`` items: node noise Lap(L s/eps), L = bit_length."""

    def __init__(self, n_steps, epsilon, sensitivity=1.0):
        self.L = int(n_steps).bit_length()
        self.b = self.L * sensitivity / epsilon
        self.items = []
        self.alpha_hat = {}
        self.out = 0.0

    def step(self, x, z):
        self.items.append(x)
        n = len(self.items)
        i = (n & -n).bit_length() - 1
        self.alpha_hat[i] = sum(self.items[n - (1 << i):n]) + z * self.b
        self.out = sum(self.alpha_hat[j] for j in range(self.L) if (n >> j) & 1)
        return self.out


class TextbookPerItemLaplace:
    """One stream of the per-item Laplace counter: the running sum of x + Lap(s/eps)."""

    def __init__(self, epsilon, sensitivity=1.0):
        self.b = sensitivity / epsilon
        self.out = 0.0

    def step(self, x, z):
        self.out += x + z * self.b
        return self.out


def _make_counter(mechanism, eps, sens, horizon):
    if mechanism == "hybrid":
        return TextbookHybrid(eps, sens)
    if mechanism == "binary":
        return TextbookBinary(horizon, eps, sens)
    return TextbookPerItemLaplace(eps, sens)


def _std_scale(mechanism, eps, sens, horizon):
    """Scale b of the std width: the counter's noise sd at count n is at most b * _sd_factor(n)."""
    if mechanism == "hybrid":
        return 2.0 * sens / eps
    if mechanism == "binary":
        return int(horizon).bit_length() * sens / eps
    return sens / eps


def _floor_log2(n):
    k = int(math.floor(math.log2(max(n, 1.0))))
    while 2.0 ** (k + 1) <= max(n, 1.0):
        k += 1
    while 2.0**k > max(n, 1.0):
        k -= 1
    return k


def _sd_factor(mechanism, n):
    if mechanism == "hybrid":
        return _sd_level(n)
    if mechanism == "binary":  # popcount(n) <= floor(log2 n) + 1 nodes of variance 2 b^2
        return math.sqrt(2.0 * (_floor_log2(n) + 1))
    return math.sqrt(2.0 * n)  # n releases of variance 2 b^2


def _sd_level(n):
    k = int(math.floor(math.log2(max(n, 1.0))))
    # guard against log2 rounding at exact powers of two
    while 2.0 ** (k + 1) <= max(n, 1.0):
        k += 1
    while 2.0**k > max(n, 1.0):
        k -= 1
    return math.sqrt(2.0 * (k + 1) + 2.0 * k**3)


def _width_num(kind, t, eps, rho, sens, mechanism="hybrid", horizon=None):
    if kind == "none" or eps is None:
        return 0.0
    lt = math.log(max(t, 2))
    if kind == "fact1":
        return sens / eps * math.log2(max(t, 2)) ** 1.5 * rho * lt
    return math.sqrt(2.0 * rho * lt) * _std_scale(mechanism, eps, sens, horizon)


def _argmax(values):
    best, bi = values[0], 0
    for j, v in enumerate(values):
        if v > best:
            best, bi = v, j
    return bi


def _per_run(v, R):
    if v is None:
        return [None] * R
    a = np.asarray(v, dtype=float)
    return [float(a)] * R if a.ndim == 0 else [float(x) for x in a]


def ref_master_worker(env, M, T, epsilon, *, rng, n_runs=1, rho=2.0, privacy_width="std", sigma=None,
                      doubling=True, communicate=True, clip=(0.0, 1.0), mechanism="hybrid", aggregate="indices",
                      period=None):
    """DP-Master-worker UCB, loops.  Returns (actions (T, R, M), regret per run, n_comm).

    ``mechanism``: "hybrid", "binary" (over T items) or "laplace" (per item); epsilon None: exact sums.
    ``aggregate="sums"``: the master pools the private sums, counts and squared noise-std factors;
    an agent indexes arm j by ``S/N + sigma sqrt(2 rho ln t / N) + nu`` with the totals of the last
    communication in which its own entries are replaced by its current ones (``nu``: the width
    numerator times sqrt(M) / N for "fact1" after a communication, times sqrt(V) / N for "std",
    ``V`` the pooled squared factors).  ``period``: communicate at every multiple of it instead of at
    the powers of two.
    """
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    R, K = n_runs, env.n_arms
    sigma = env.sigma if sigma is None else sigma
    lo, hi = clip
    sens = hi - lo
    eps = _per_run(epsilon, R)
    rhos = _per_run(rho, R)
    private = epsilon is not None
    stream = RewardStream(env, R, M, rng)
    mech = ([[[_make_counter(mechanism, eps[r], sens, T) for _ in range(K)] for _ in range(M)] for r in range(R)]
            if private else None)
    exact = [[[0.0] * K for _ in range(M)] for _ in range(R)]
    counts = [[[0] * K for _ in range(M)] for _ in range(R)]
    ucb = [[[0.0] * K for _ in range(M)] for _ in range(R)]
    arm = [[0] * M for _ in range(R)]
    streak = [[0] * M for _ in range(R)]
    remaining = [[0] * M for _ in range(R)]
    actions = np.zeros((T, R, M), dtype=int)
    regret = [0.0] * R
    n_comm = 0

    def own(r, m, j, t):
        n = counts[r][m][j]
        mean = (mech[r][m][j].out / n + lo) if private else exact[r][m][j] / n
        idx = mean + sigma * math.sqrt(2.0 * rhos[r] * math.log(t) / n)
        num = _width_num(privacy_width, t, eps[r], rhos[r], sens, mechanism, T) if private else 0.0
        if private and privacy_width == "fact1":
            idx = idx + num / n
        elif private and privacy_width == "std":
            idx = idx + num * _sd_factor(mechanism, n) / n
        return idx

    # "sums": an agent's (sum, count, squared std factor) of every arm at the last communication, and
    # their totals over the agents (zero before the first communication: an agent's own data only)
    pooled = aggregate == "sums"
    mine = [[[(0.0, 0.0, 0.0)] * K for _ in range(M)] for _ in range(R)]
    tot = [[(0.0, 0.0, 0.0)] * K for _ in range(R)]
    g2 = [[[0.0] * K for _ in range(M)] for _ in range(R)]
    root_m = [1.0]

    def own_entries(r, m, j):
        s_ = (mech[r][m][j].out if private else exact[r][m][j])
        return s_, float(counts[r][m][j]), g2[r][m][j]

    def pooled_idx(r, m, j, t):
        s_, n_, v_ = own_entries(r, m, j)
        S = tot[r][j][0] - mine[r][m][j][0] + s_
        N = tot[r][j][1] - mine[r][m][j][1] + n_
        idx = S / N + (lo if private else 0.0) + sigma * math.sqrt(2.0 * rhos[r] * math.log(t) / N)
        if private and privacy_width != "none":
            num = _width_num(privacy_width, t, eps[r], rhos[r], sens, mechanism, T)
            if privacy_width == "fact1":
                idx = idx + num * root_m[0] / N
            else:
                V = tot[r][j][2] - mine[r][m][j][2] + v_
                idx = idx + num * math.sqrt(max(V, 0.0)) / N
        return idx

    index = pooled_idx if pooled else own
    for t in range(1, T + 1):
        if t <= K:
            for r in range(R):
                for m in range(M):
                    arm[r][m] = t - 1
        else:
            comm = communicate and ((t & (t - 1)) == 0 if period is None else t % period == 0)
            deciders = []
            if comm and pooled:
                n_comm += 1
                root_m[0] = math.sqrt(M)
                for r in range(R):
                    for m in range(M):
                        mine[r][m] = [own_entries(r, m, j) for j in range(K)]
                    tot[r] = [tuple(sum(mine[r][m][j][c] for m in range(M)) for c in range(3)) for j in range(K)]
                    for m in range(M):
                        ucb[r][m] = [pooled_idx(r, m, j, t) for j in range(K)]
                        deciders.append((r, m))
            elif comm:
                n_comm += 1
                for r in range(R):
                    own_all = [[own(r, m, j, t) for j in range(K)] for m in range(M)]
                    avg = [sum(own_all[m][j] for m in range(M)) / M for j in range(K)]
                    for m in range(M):
                        ucb[r][m] = list(avg)
                        deciders.append((r, m))
            else:
                for r in range(R):
                    for m in range(M):
                        if t == K + 1:
                            ucb[r][m] = [index(r, m, j, t) for j in range(K)]
                        if remaining[r][m] == 0:
                            ucb[r][m][arm[r][m]] = index(r, m, arm[r][m], t)
                            deciders.append((r, m))
            for r, m in deciders:
                new = _argmax(ucb[r][m])
                streak[r][m] = streak[r][m] + 1 if new == arm[r][m] else 1
                arm[r][m] = new
                remaining[r][m] = 2 ** (streak[r][m] - 1) if doubling else 1
        z = draw_standard_laplace(rng, R * M) if private else None
        for r in range(R):
            for m in range(M):
                a = arm[r][m]
                x = stream.reward(t, r, m, a)
                actions[t - 1, r, m] = a
                counts[r][m][a] += 1
                if private:
                    mech[r][m][a].step(min(max(x, lo), hi) - lo, z[r * M + m])
                    if privacy_width == "std":
                        g2[r][m][a] = _sd_factor(mechanism, counts[r][m][a]) ** 2
                else:
                    exact[r][m][a] += x
                if t > K:
                    remaining[r][m] -= 1
                regret[r] += env.gaps[a]
    return actions, regret, n_comm


def ref_decentralized(env, graph, T, epsilon, *, rng, n_runs=1, kappa=None, rho=2.0, privacy_width="std", sigma=None,
                      clip=(0.0, 1.0), mechanism="hybrid"):
    """DP-Decentralized UCB (or coop-UCB when epsilon is None), loops.  Returns (actions, regret)."""
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    P = consensus_matrix(graph, kappa)
    terms = network_terms(P)
    M = graph.n_agents
    R, K = n_runs, env.n_arms
    sigma = env.sigma if sigma is None else sigma
    lo, hi = clip
    sens = hi - lo
    eps = _per_run(epsilon, R)
    rhos = _per_run(rho, R)
    private = epsilon is not None
    c_i, c_0 = [float(x) for x in terms.c_i], float(terms.c_0)
    stream = RewardStream(env, R, M, rng)
    mech = ([[[_make_counter(mechanism, eps[r], sens, T) for _ in range(K)] for _ in range(M)] for r in range(R)]
            if private else None)
    n_hat = [[[0.0] * K for _ in range(M)] for _ in range(R)]
    s_hat = [[[0.0] * K for _ in range(M)] for _ in range(R)]
    actions = np.zeros((T, R, M), dtype=int)
    regret = [0.0] * R
    for t in range(1, T + 1):
        z = None
        chosen = [[0] * M for _ in range(R)]
        for r in range(R):
            for m in range(M):
                if t <= K:
                    chosen[r][m] = t - 1
                    continue
                q = []
                for j in range(K):
                    n = n_hat[r][m][j]
                    v = (n + c_i[m]) / n / n
                    val = s_hat[r][m][j] / n
                    if private and lo != 0.0:
                        val += lo
                    val += math.sqrt(v * (rhos[r] * (2.0 * sigma**2 * math.log(t) / c_0)))
                    if private and privacy_width != "none":
                        num = _width_num(privacy_width, t, eps[r], rhos[r], sens, mechanism, T) / math.sqrt(c_0)
                        w = v * num
                        if privacy_width == "std":
                            w *= _sd_factor(mechanism, n)
                        val += w
                    q.append(val)
                chosen[r][m] = _argmax(q)
        if private:
            z = draw_standard_laplace(rng, R * M)
        for r in range(R):
            inc_n = [[0.0] * K for _ in range(M)]
            inc_s = [[0.0] * K for _ in range(M)]
            for m in range(M):
                a = chosen[r][m]
                actions[t - 1, r, m] = a
                x = stream.reward(t, r, m, a)
                if private:
                    old = mech[r][m][a].out
                    new = mech[r][m][a].step(min(max(x, lo), hi) - lo, z[r * M + m])
                    inc_s[m][a] = new - old
                else:
                    inc_s[m][a] = x
                inc_n[m][a] = 1.0
                regret[r] += env.gaps[a]
            # running consensus: x(t+1) = P (x(t) + increment)
            new_n = [[0.0] * K for _ in range(M)]
            new_s = [[0.0] * K for _ in range(M)]
            for i in range(M):
                for j in range(K):
                    new_n[i][j] = sum(P[i, k] * (n_hat[r][k][j] + inc_n[k][j]) for k in range(M))
                    new_s[i][j] = sum(P[i, k] * (s_hat[r][k][j] + inc_s[k][j]) for k in range(M))
            n_hat[r], s_hat[r] = new_n, new_s
    return actions, regret


def ref_independent(env, M, T, epsilon, *, rng, n_runs=1, rho=2.0, privacy_width="std", sigma=None, clip=(0.0, 1.0),
                    mechanism="hybrid"):
    """M independent (private) UCB agents, loops: every slot every agent recomputes all K indices.

    Returns (actions (T, R, M), regret per run).
    """
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    R, K = n_runs, env.n_arms
    sigma = env.sigma if sigma is None else sigma
    lo, hi = clip
    sens = hi - lo
    eps = _per_run(epsilon, R)
    rhos = _per_run(rho, R)
    private = epsilon is not None
    stream = RewardStream(env, R, M, rng)
    mech = ([[[_make_counter(mechanism, eps[r], sens, T) for _ in range(K)] for _ in range(M)] for r in range(R)]
            if private else None)
    sums = [[[0.0] * K for _ in range(M)] for _ in range(R)]
    counts = [[[0] * K for _ in range(M)] for _ in range(R)]
    actions = np.zeros((T, R, M), dtype=int)
    regret = [0.0] * R
    for t in range(1, T + 1):
        chosen = [[0] * M for _ in range(R)]
        for r in range(R):
            for m in range(M):
                if t <= K:
                    chosen[r][m] = t - 1
                    continue
                q = []
                for j in range(K):
                    n = counts[r][m][j]
                    val = sums[r][m][j] / n
                    if private and lo != 0.0:
                        val += lo
                    val += sigma * math.sqrt(2.0 * rhos[r] * math.log(t) / n)
                    if private and privacy_width != "none":
                        num = _width_num(privacy_width, t, eps[r], rhos[r], sens, mechanism, T)
                        val += num / n if privacy_width == "fact1" else num * _sd_factor(mechanism, n) / n
                    q.append(val)
                chosen[r][m] = _argmax(q)
        z = draw_standard_laplace(rng, R * M) if private else None
        for r in range(R):
            for m in range(M):
                a = chosen[r][m]
                actions[t - 1, r, m] = a
                x = stream.reward(t, r, m, a)
                counts[r][m][a] += 1
                if private:
                    sums[r][m][a] = mech[r][m][a].step(min(max(x, lo), hi) - lo, z[r * M + m])
                else:
                    sums[r][m][a] += x
                regret[r] += env.gaps[a]
    return actions, regret

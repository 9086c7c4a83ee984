"""Plain, one-user-at-a-time reference versions of the PSCO algorithms of fedbandit.mechanisms.psco.

Written line by line from the algorithms' descriptions (no vectorization, no aggregate
sampling) so that the fast versions can be checked against them draw for draw.  The
randomness comes in as arrays of uniforms laid out as the fast versions draw them:

* rounding: ``v[i, t]`` for user t + 1 at level i + 1 (only for values that are not bits);
* messages: ``w[i][t, j]`` for message j of user t + 1 to shuffler i + 1.
"""

from __future__ import annotations

import numpy as np


def reference_round(x, v):
    """Randomized rounding to one bit: bit = 1 iff v < x (bits pass through unchanged)."""
    bits = []
    for value, uniform in zip(x, v):
        if value in (0.0, 1.0):
            bits.append(int(value))
        else:
            bits.append(1 if uniform < value else 0)
    return bits


def reference_unary(x, g, v):
    """Unary rounding: u = ⌊g x⌋ + [v < g x − ⌊g x⌋] ones out of g."""
    out = []
    for value, uniform in zip(x, v):
        low = int(np.floor(value * g))
        out.append(low + (1 if uniform < value * g - low else 0))
    return out


def reference_concurrent(x, batch_sizes, ps, w, resolutions=None, v=None):
    """The k-level shuffle PSCO algorithm, simulated user by user and message by message.

    Parameters
    ----------
    x : sequence
        One value per user: bits, or values in [0, 1] (then ``v`` is needed).
    batch_sizes : sequence of int
        (b_1, ..., b_k), nested.
    ps : sequence of float
        Blanket probability of each level.
    w : sequence of arrays
        w[i][t, j]: the uniform of message j of user t + 1 to shuffler i (shape (n, g_i));
        a 2-D array (k, n) is read as g_i = 1.
    resolutions : sequence of int, optional
        g_i, messages per user at level i (default all 1).
    v : array (k, n), optional
        v[i, t]: the rounding uniform of user t + 1 at level i (values that are not bits).

    Returns
    -------
    list of float
        The estimate after each user, index 0..n (estimate 0 before any user).
    """
    k = len(batch_sizes)
    n = len(x)
    gs = [1] * k if resolutions is None else list(resolutions)
    ones_per_level = []
    for i in range(k):
        if all(value in (0, 1) for value in x):
            ones_per_level.append([int(value) * gs[i] for value in x])
        else:
            ones_per_level.append(reference_unary(x, gs[i], v[i]))
    shuffler_messages = [[] for _ in range(k)]  # messages of the current batch of each level
    since_parent = [0.0] * k  # released sums of level i since the last level-(i−1) release
    estimates = [0.0]
    for t in range(1, n + 1):
        completed = []
        for i in range(k):
            p, g = ps[i], gs[i]
            uniforms = np.asarray(w[i])[t - 1]
            uniforms = np.atleast_1d(uniforms)
            for j in range(g):
                bit = 1 if j < ones_per_level[i][t - 1] else 0
                q = 1.0 - p / 2.0 if bit == 1 else p / 2.0
                shuffler_messages[i].append(1 if uniforms[j] < q else 0)
            if len(shuffler_messages[i]) == batch_sizes[i] * g:
                ones = sum(shuffler_messages[i])  # the analyzer only needs the count
                m = batch_sizes[i] * g
                estimate = (ones - m * p / 2.0) / (1.0 - p) / g
                since_parent[i] += estimate
                shuffler_messages[i] = []
                completed.append(i)
        # A release at level i starts a new parent for the finer levels.
        for i in completed:
            for j in range(i + 1, k):
                since_parent[j] = 0.0
        estimates.append(sum(since_parent))
    return estimates


def reference_local(bits, p, u):
    """Local randomized response: running sum of (message − p/2)/(1 − p); u[t] per user."""
    estimates = [0.0]
    running = 0.0
    for t, bit in enumerate(bits):
        q = 1.0 - p / 2.0 if bit == 1 else p / 2.0
        message = 1 if u[t] < q else 0
        running += (message - p / 2.0) / (1.0 - p)
        estimates.append(running)
    return estimates


def reference_extrapolating(bits, batch_sizes, ps, u):
    """:func:`reference_concurrent` plus the unfinished level-k batch counted at the last
    level-k batch's rate (rate 1/2 before the first release)."""
    base = reference_concurrent(bits, batch_sizes, ps, u)
    k = len(batch_sizes)
    a = batch_sizes[-1]
    p = ps[-1]
    rate = 0.5
    out = [0.0]
    messages = []
    for t in range(1, len(bits) + 1):
        bit = bits[t - 1]
        q = 1.0 - p / 2.0 if bit == 1 else p / 2.0
        messages.append(1 if u[k - 1, t - 1] < q else 0)
        if len(messages) == a:
            rate = (sum(messages) - a * p / 2.0) / (1.0 - p) / a
            messages = []
        out.append(base[t] + rate * (t % a))
    return out


def reference_concurrent_records(z, batch_sizes, levels, half_range, rng):
    """The concurrent-shuffle protocol of fedbandit.protocols.concurrent, one user and one coordinate at a time.

    ``z`` (n, runs, D) are the users' records, ``levels`` one RRShuffleSummation per level
    (its ``resolution`` g and flip probability p), ``half_range`` (D,) the s of every
    coordinate.  Draws as the protocol does: per period of b_k users one array of
    uniforms (k, b_k, runs, D) for the rounding, then each closing batch's counts from
    ``sample_rr_counts`` (finest level first).  The estimate after every period is
    computed as the message-level server does (MixedRadixServer.estimate: walk the levels
    from the coarsest, keep the releases that start after the last covered boundary), not
    with the protocol's running sums.  Returns (n // b_k, runs, D).
    """
    import math

    from fedbandit.mechanisms.randomized_response import sample_rr_counts

    n, runs, D = z.shape
    k, a = len(batch_sizes), batch_sizes[-1]
    ones = [np.zeros((runs, D), dtype=np.int64) for _ in range(k)]
    releases = []  # (level, first user, last user, debiased sum (runs, D) in [0, 1] units)
    out = []
    for s in range(n // a):
        u = rng.random((k, a, runs, D))
        for i in range(k):
            g = levels[i].resolution
            for j in range(a):
                for r in range(runs):
                    for c in range(D):
                        value = min(max((z[s * a + j, r, c] / half_range[c] + 1.0) / 2.0, 0.0), 1.0)
                        low = math.floor(value * g)
                        ones[i][r, c] += low + (1 if u[i, j, r, c] < value * g - low else 0)
        t = (s + 1) * a
        for i in reversed(range(k)):
            b = batch_sizes[i]
            if t % b == 0:
                g, p = levels[i].resolution, levels[i].p
                count = sample_rr_counts(ones[i], b * g, p, rng)
                releases.append((i, t - b + 1, t, (count - b * g * p / 2.0) / ((1.0 - p) * g)))
                ones[i][:] = 0
        covered, total = 0, np.zeros((runs, D))
        for level, b in enumerate(batch_sizes):
            for lv, start, end, value in releases:
                if lv == level and start > covered and end <= t:
                    total = total + value
            covered = (t // b) * b
        out.append(half_range * (2.0 * total - t))
    return np.array(out)

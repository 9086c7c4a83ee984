"""Hot paths against their compute floors and against the peers a user would pick instead,
measured side by side in one process on the same inputs.

* exact discrete Gaussian sampling (``fedbandit.mechanisms.discrete_gaussian``) vs OpenDP's
  ``make_gaussian`` on an integer vector domain (exact, [CKS20]);
* secure aggregation (``fedbandit.secagg.run_secagg``) vs Flower's SecAgg+ (``flwr``, driven
  in-process by ``_flower_secagg.py``, complete graph = SecAgg), with Flower's Shamir step
  stubbed at n = 100 and in full at n = 30;
* SecAgg's growth in n (60 to 500 clients, d = 2^16): the exponent of its CPU time, with a
  Student-t interval over repeated runs (``fit_exponent_t``) and the claim it supports;
* zCDP -> (ε, δ) and RDP -> (ε, δ) conversions (``fedbandit.accounting.zcdp``) vs
  dp-accounting's RDP accountant;
* the fast Walsh-Hadamard transform (``fedbandit.mechanisms.flattening.fwht``) vs the SIMD
  libraries fht-cpu and FFHT, at the shapes the book transforms, and the share of the
  transform in chapter 5's workloads (where it would matter).

Each side-by-side row states ``peers``: the package, its version, its time and the ratio
peer time / fedbandit time (wall and CPU); a peer that is not installed is reported as not
available, with the reason.  Each peer row checks that the peer computed the same thing
(equal sums, equal or dominated ε, equal transforms, matching sample variance), so a ratio
never compares different work.
"""

from __future__ import annotations

import inspect
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import Timing, floor, measure, peer_version  # noqa: E402
from fedbandit.accounting.zcdp import rdp_to_approx_dp, zcdp_to_approx_dp  # noqa: E402
from fedbandit.mechanisms.discrete_gaussian import sample_discrete_gaussian  # noqa: E402
from fedbandit.mechanisms.flattening import fwht  # noqa: E402
from fedbandit.secagg.protocol import run_secagg  # noqa: E402

DG_SAMPLES = 100_000
SECAGG_CASES = (  # (id, n, d, bits, threshold, dropped, stub Flower's Shamir)
    ("secagg_n100_d65536", 100, 2**16, 16, 67, 10, True),
    ("secagg_n30_d65536", 30, 2**16, 16, 20, 3, False),
)
#: Clients of the growth fit (d = 2^16, B = 16, threshold 2n/3 + 1, n/10 dropped in round 2) and repeats per n.
SECAGG_SCALING_NS, SECAGG_SCALING_REPEATS = (60, 120, 250, 500), 2
RHOS, DELTAS = (0.01, 0.1, 0.5, 1.0, 5.0), (1e-5, 1e-8)
WHT_SHAPES = (  # (id, shape, where the book transforms it)
    ("wht_d1048576", (2**20,), "one vector, d = 2^20"),
    ("wht_d65536", (2**16,), "one vector, d = 2^16"),
    ("wht_bandit_ddg", (10_000, 128), "chapter 5's DDG bandit: 10 runs x 20 tree levels x 50 agents, d = 65 -> 128"),
    ("wht_dme", (4_000, 256), "chapter 5's DME: 4 reps x 1000 clients, d = 250 -> 256"),
    ("wht_federated", (400, 1_024), "chapter 5's federated trainer: 4 runs x 100 clients, d = 650 -> 1024"),
)


def _peer(package: str, dist: str, timing: Timing | None, fed: Timing, what: str, reason: str | None = None) -> dict:
    version = peer_version(dist)
    if timing is None:
        return {"package": package, "version": version, "status": "not available", "reason": reason, "what": what}
    return {"package": package, "version": version, "status": "measured", "what": what,
            "wall_s": timing.wall, "cpu_s": timing.cpu,
            "ratio_wall": timing.wall / fed.wall, "ratio_cpu": timing.cpu / fed.cpu}


def _row(id_, name, fed: Timing, value, unit, notes, *, floor_=None, peers=(), floor_note=None) -> dict:
    row = {"id": id_, "name": name, "value": value, "unit": unit, **fed.as_dict(), "notes": notes,
           "peers": list(peers)}
    if floor_ is not None:
        row["floor"] = floor_
    if floor_note is not None:
        row["floor_note"] = floor_note
    return row


def _check_variance(samples, sigma, who):
    v = np.var(np.asarray(samples, dtype=np.float64))
    tol = 6 * math.sqrt(2 / len(samples))  # 6 standard errors of a sample variance
    if abs(v / sigma**2 - 1) > tol:
        raise AssertionError(f"{who}: sample variance {v:.4g} is not sigma^2 = {sigma**2:.4g}")


# ------------------------------------------------------------------- discrete Gaussian


def _discrete_gaussian_rows() -> list[dict]:
    rows = []
    rng = np.random.default_rng(0)
    try:
        import opendp.prelude as dp

        dp.enable_features("contrib")
        space = dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T="i64")
        zeros = np.zeros(DG_SAMPLES, dtype=np.int64)
        reason = None
    except ImportError as exc:
        dp, reason = None, f"opendp is not installed ({exc})"
    for sigma in (10.0, 1000.0):
        sample_discrete_gaussian(sigma, 1000, rng)  # build the exact tables once (cached)
        fed = measure(lambda: sample_discrete_gaussian(sigma, DG_SAMPLES, rng), repeat=5)
        _check_variance(sample_discrete_gaussian(sigma, DG_SAMPLES, rng), sigma, "fedbandit")
        peer = None
        if dp is not None:
            meas = dp.m.make_gaussian(*space, scale=sigma)
            peer = measure(lambda: meas(zeros), repeat=1, trace_memory=False)
            _check_variance(meas(zeros), sigma, "OpenDP")
        entropy_bits = math.log2(sigma * math.sqrt(2 * math.pi * math.e))  # of N_Z(0, sigma^2), sigma >= 1
        fl = floor(f"{DG_SAMPLES} samples: {entropy_bits:.1f} random bits each (the entropy of one sample), "
                   "8 bytes written each", {"random_bits_per_s": DG_SAMPLES * entropy_bits,
                                            "copy_bytes_per_s": 8 * DG_SAMPLES}, fed.cpu)
        rows.append(_row(
            f"dgauss_sigma{sigma:g}", f"exact discrete Gaussian sampler, sigma = {sigma:g}", fed,
            DG_SAMPLES / fed.wall / 1e6, "M samples/s",
            f"{DG_SAMPLES} samples per call, best of 5; both exact (CKS20); OpenDP through its Python API on an "
            "int64 vector of zeros",
            floor_=fl,
            peers=[_peer("OpenDP", "opendp", peer, fed, "make_gaussian(vector_domain(atom_domain(T='i64')), "
                         "l2_distance(T='i64'), scale=sigma) applied to zeros", reason)],
        ))
    return rows


# ------------------------------------------------------------------ secure aggregation


def _run_fedbandit_secagg(x, bits, threshold, dropped):
    """``fedbandit.secagg.run_secagg`` with ``dropped`` clients gone before their masked input
    (round 2); tolerant of the driver's keyword for dropouts (``dropouts={round: ids}``)."""
    params = inspect.signature(run_secagg).parameters
    kw = {"bits": bits, "threshold": threshold}
    if "dropouts" in params:
        kw["dropouts"] = {2: dropped}
    elif "dropped" in params:  # pragma: no cover - a possible future signature
        kw["dropped"] = dropped
    else:  # pragma: no cover
        raise TypeError(f"run_secagg{inspect.signature(run_secagg)} takes no dropouts: update bench_hotpaths")
    return run_secagg(x, **kw)


def _total(result):
    return result["total"] if isinstance(result, dict) else result.total


def _secagg_floor(n, d, bits, dropped, seconds) -> dict:
    survivors = n - dropped
    word = 2 if bits <= 16 else 4 if bits <= 32 else 8
    masks = survivors * n + survivors + dropped * survivors  # clients: n-1 pairwise + 1 self; server: cancel
    # X25519: every client agrees an encryption key with every other (to send or read its
    # shares), every survivor a mask seed with every other, the server the dropped ones' seeds
    key_agreements = n * (n - 1) + survivors * (n - 1) + dropped * survivors
    return floor(
        f"{masks} mask vectors of d = {d} words expanded by AES-256-CTR ({masks * d * word / 1e9:.2f} GB keystream) "
        f"and added mod 2^{bits}, {key_agreements} X25519 agreements",
        {"aes_ctr_bytes_per_s": masks * d * word, "x25519_per_s": key_agreements,
         "copy_bytes_per_s": 3 * masks * d * word},
        seconds, serial=("aes_ctr_bytes_per_s", "x25519_per_s"),
    )


def _secagg_rows() -> list[dict]:
    rows = []
    try:
        from _flower_secagg import run_flower_secaggplus

        reason = None
    except ImportError as exc:  # pragma: no cover - depends on the bench extra
        run_flower_secaggplus, reason = None, f"flwr is not installed ({exc})"
    for id_, n, d, bits, threshold, n_drop, stub in SECAGG_CASES:
        x = np.random.default_rng(2).integers(0, 2**bits, size=(n, d))
        dropped = list(range(1, n_drop + 1))
        expected = x[n_drop:].sum(0) % 2**bits
        holder = {}

        def ours():
            holder["fed"] = _run_fedbandit_secagg(x, bits, threshold, dropped)

        fed = measure(ours, repeat=1, trace_memory=False)
        if not np.array_equal(np.asarray(_total(holder["fed"])), expected):
            raise AssertionError(f"{id_}: fedbandit's SecAgg sum is wrong")
        peer = None
        if run_flower_secaggplus is not None:
            def theirs():
                holder["flwr"] = run_flower_secaggplus(x, bits=bits, threshold=threshold, dropped=dropped,
                                                       stub_shamir=stub)

            peer = measure(theirs, repeat=1, trace_memory=False)
            if not np.array_equal(holder["flwr"]["total"], expected):
                raise AssertionError(f"{id_}: Flower's SecAgg+ sum is wrong")
        timings = getattr(holder["fed"], "timings", None) or {}
        per_round = ", ".join(f"{k} {v:.2f} s" for k, v in timings.items()) or "not reported"
        what = ("SecAgg+ on the complete graph (= SecAgg), four stages in-process"
                + (", its Shamir sharing stubbed out (a lower bound on its time)" if stub else ", in full"))
        rows.append(_row(
            id_, f"SecAgg, {n} clients, d = {d}, B = {bits}, {n_drop} dropped in round 2", fed, fed.wall, "s",
            f"single process, threshold {threshold}; fedbandit per round: {per_round}",
            floor_=_secagg_floor(n, d, bits, n_drop, fed.cpu),
            peers=[_peer("Flower", "flwr", peer, fed, what, reason)],
        ))
    return rows


def _secagg_scaling_row() -> dict:
    """SecAgg's CPU time against n (d = 2^16): the exponent of its growth with a Student-t interval."""
    from fedbandit.experiments.statistics import claim_exponent, fit_exponent_t

    d, bits = 2**16, 16
    ns = np.array(SECAGG_SCALING_NS)
    cpu = np.empty((ns.size, SECAGG_SCALING_REPEATS))
    walls = np.empty_like(cpu)
    for i, n in enumerate(ns):
        x = np.random.default_rng(n).integers(0, 2**bits, size=(n, d))
        dropped = list(range(1, n // 10 + 1))
        for r in range(SECAGG_SCALING_REPEATS):
            w0, c0 = time.perf_counter(), time.process_time()
            out = _run_fedbandit_secagg(x, bits, (2 * n) // 3 + 1, dropped)
            cpu[i, r], walls[i, r] = time.process_time() - c0, time.perf_counter() - w0
            if not np.array_equal(np.asarray(_total(out)), x[len(dropped):].sum(0) % 2**bits):
                raise AssertionError(f"SecAgg with n = {n}: wrong sum")
    fit = fit_exponent_t(ns, cpu)
    c = claim_exponent(f"growth exponent of SecAgg's CPU time in n = {ns[0]}..{ns[-1]}", fit,
                       alternatives=(("2 (pairwise masks and key agreements)", 2.0),
                                     ("2.1 (with the 521-bit Shamir's n^3 term)", 2.1), ("3", 3.0)))
    local = np.diff(np.log(cpu.mean(axis=1))) / np.diff(np.log(ns))
    verdict = ("the whole interval lies below 2: no faster than n^2 over the range" if c.below("2 (pairwise masks and key "
               "agreements)") else "the interval admits 2" if c.admits("2 (pairwise masks and key agreements)") else
               "the interval lies above 2: faster than n^2")
    text = (f"{c.text()}; {verdict} (local exponents between successive n: "
            + ", ".join(f"{v:.2f}" for v in local) + ")")
    return {
        "id": "secagg_scaling",
        "name": "SecAgg CPU time vs n (d = 2^16, B = 16, threshold 2n/3 + 1, n/10 dropped), exponent",
        "value": fit.slope,
        "unit": "exponent",
        "wall_s": float(walls.sum()),
        "cpu_s": float(cpu.sum()),
        "low": fit.low,
        "high": fit.high,
        "confidence": fit.confidence,
        "claim": text,
        "times": {int(n): [float(v) for v in row] for n, row in zip(ns, cpu)},
        "notes": f"{text}; CPU s per run: " + ", ".join(
            f"n = {n}: {row.mean():.2f}" for n, row in zip(ns, cpu)),
    }


# --------------------------------------------------------------------------- accounting


def _accounting_rows() -> list[dict]:
    try:
        from dp_accounting import dp_event
        from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

        reason = None
    except ImportError as exc:  # pragma: no cover
        rdp_lib, reason = None, f"dp-accounting is not installed ({exc})"
    pairs = [(r, d) for r in RHOS for d in DELTAS]
    rows = []

    fed = measure(lambda: [zcdp_to_approx_dp(r, d) for r, d in pairs], repeat=5, trace_memory=False)
    peer = None
    if rdp_lib is not None:
        def theirs():
            out = []
            for r, d in pairs:
                acc = rdp_lib.RdpAccountant()  # its default orders
                acc.compose(dp_event.ZCDpEvent(r))
                out.append(acc.get_epsilon(d))
            return out

        peer = measure(theirs, repeat=5, trace_memory=False)
        ours_eps, their_eps = [zcdp_to_approx_dp(r, d) for r, d in pairs], theirs()
        if any(a > b * (1 + 1e-9) for a, b in zip(ours_eps, their_eps)):
            raise AssertionError("fedbandit's optimal zCDP conversion gave a larger epsilon than dp-accounting's")
        gain = max(1 - a / b for a, b in zip(ours_eps, their_eps))
    note = "scalar conversions, bound by Python call overhead: no flop or byte floor applies"
    rows.append(_row(
        "zcdp_to_dp", "zCDP -> (epsilon, delta) conversion", fed, fed.wall / len(pairs) * 1e6, "us per conversion",
        f"{len(pairs)} conversions (rho in {RHOS}, delta in {DELTAS}); fedbandit minimises over continuous alpha "
        "(CKS20 Prop. 12)" + (f", its epsilon up to {100 * gain:.3f} % smaller than dp-accounting's on its default "
                              "orders" if peer is not None else ""),
        floor_note=note,
        peers=[_peer("dp-accounting", "dp-accounting", peer, fed,
                     "RdpAccountant() with its default orders, compose(ZCDpEvent(rho)), get_epsilon(delta)", reason)],
    ))

    peer = None
    if rdp_lib is not None:
        orders = np.asarray(rdp_lib.RdpAccountant()._orders, dtype=np.float64)
        curves = [(orders * k / (2 * s**2), d) for s in (0.8, 2.0, 5.0) for k in (1, 100) for d in DELTAS]
        fed = measure(lambda: [rdp_to_approx_dp(orders, c, d) for c, d in curves], repeat=5, trace_memory=False)
        peer = measure(lambda: [rdp_lib.compute_epsilon(orders, c, d)[0] for c, d in curves], repeat=5,
                       trace_memory=False)
        for c, d in curves:
            a, b = rdp_to_approx_dp(orders, c, d), rdp_lib.compute_epsilon(orders, c, d)[0]
            if not math.isclose(a, b, rel_tol=1e-9):
                raise AssertionError(f"RDP conversion differs: {a} vs {b}")
        rows.append(_row(
            "rdp_to_dp", "RDP curve -> (epsilon, delta) conversion", fed, fed.wall / len(curves) * 1e6,
            "us per conversion",
            f"{len(curves)} Gaussian RDP curves on dp-accounting's {orders.size} default orders; equal results",
            floor_note=note,
            peers=[_peer("dp-accounting", "dp-accounting", peer, fed, "rdp_privacy_accountant.compute_epsilon", None)],
        ))
    else:  # pragma: no cover
        rows.append(_row("rdp_to_dp", "RDP curve -> (epsilon, delta) conversion", Timing(math.nan, math.nan, math.nan),
                         math.nan, "us per conversion", "dp-accounting missing", floor_note=note,
                         peers=[_peer("dp-accounting", "dp-accounting", None, None, "compute_epsilon", reason)]))
    return rows


# -------------------------------------------------------------------------------- WHT


def _wht_rows() -> list[dict]:
    try:
        import fht_cpu
    except ImportError as exc:
        fht_cpu, fht_reason = None, f"fht-cpu is not installed ({exc})"
    try:
        import ffht
    except ImportError as exc:
        ffht, ffht_reason = None, (f"FFHT is not installed ({exc}); its sdist does not declare its build "
                                   "dependencies (numpy, pybind11), so pip builds it only with "
                                   "--no-build-isolation, which `make bench` tries")
    rows = []
    rng = np.random.default_rng(1)
    for id_, shape, where in WHT_SHAPES:
        x = rng.normal(size=shape)
        n, d = int(np.prod(shape[:-1], dtype=np.int64)), shape[-1]
        ref = fwht(x, normalize=False)
        repeat = 7
        fed = measure(lambda: fwht(x, normalize=False), repeat=repeat)
        peers = []
        if fht_cpu is not None:
            if not np.allclose(fht_cpu.fht(x, inplace=False, num_threads=1), ref):
                raise AssertionError("fht-cpu computed another transform")
            t = measure(lambda: fht_cpu.fht(x, inplace=False, num_threads=1), repeat=repeat, trace_memory=False)
            peers.append(_peer("fht-cpu", "fht-cpu", t, fed, "fht(x, inplace=False, num_threads=1)"))
        else:
            peers.append(_peer("fht-cpu", "fht-cpu", None, fed, "fht", fht_reason))
        if ffht is not None:
            def theirs():
                y = np.empty((n, d))
                for i, row in enumerate(x.reshape(n, d)):
                    y[i] = ffht.fht(row)
                return y.reshape(shape)

            if not np.allclose(theirs(), ref):
                raise AssertionError("FFHT computed another transform")
            t = measure(theirs, repeat=repeat, trace_memory=False)
            peers.append(_peer("FFHT", "FFHT-unofficial", t, fed, "fht(row) for each row (one vector per call)"))
        else:
            peers.append(_peer("FFHT", "FFHT-unofficial", None, fed, "fht", ffht_reason))
        fl = floor(f"{n} x {d}: {n * d * int(math.log2(d)):.3g} additions (d log2 d per vector), "
                   f"{16 * n * d / 1e6:.3g} MB read + written once",
                   {"flops_per_s": n * d * math.log2(d), "copy_bytes_per_s": 16 * n * d}, fed.cpu)
        rows.append(_row(id_, f"fast Walsh-Hadamard transform, {n} x {d}", fed, fed.wall * 1e3, "ms",
                         f"{where}; unnormalised, out of place, best of {repeat}", floor_=fl, peers=peers))
    return rows


def _wht_share_rows() -> list[dict]:
    """CPU share of the transform in slices of chapter 5's paper-scale workloads."""
    import fedbandit.mechanisms.flattening as flattening
    from fedbandit.experiments.runner import run_config
    from fedbandit.experiments.trials import dme_trial

    spent = {"cpu": 0.0}
    original = flattening.fwht

    def timed_fwht(x, **kw):
        c0 = time.process_time()
        try:
            return original(x, **kw)
        finally:
            spent["cpu"] += time.process_time() - c0

    beta = math.exp(-0.5)
    dme = dict(d=250, c=10.0, delta=1e-5, beta=beta, reps=4, k=2, norm_growth="conservative")
    workloads = {
        "wht_share_dme": ("chapter 5's DME trials (n in {100, 1000}, B in {10, 14, 18}, eps in {0.75, 4}, d = 250, "
                          "4 reps)",
                          lambda: [dme_trial(dict(dme, n=n, bits=b, epsilon=e), np.random.default_rng(0))
                                   for n in (100, 1000) for b in (10, 14, 18) for e in (0.75, 4.0)]),
        "wht_share_federated": ("chapter 5's federated trainer under sum-ddg-secagg (100 clients, 4 runs, 5 of its "
                                "30 rounds)",
                                lambda: run_config(dict(learner="federated-learning", instance="digits", n_clients=100,
                                                        split_seed=0, rounds=5, clip=0.3, local_steps=5, lr=0.5,
                                                        momentum=0.9, runs=4, protocol="sum-ddg-secagg", epsilon=4.0,
                                                        delta=1e-5, bits=16, k=3), np.random.default_rng(0))),
        "wht_share_bandit_ddg": ("chapter 5's fixed-batch bandit under ddg-secagg (M = 50, d = 10, 10 runs, "
                                 "T = 800 of its 4000)",
                                 lambda: run_config(dict(learner="fixed-batch", instance="synthetic", M=50, T=800,
                                                         B=20, K=100, d=10, runs=10, env_seed=0, protocol="ddg-secagg",
                                                         epsilon=1.0, delta=0.1), np.random.default_rng(0))),
    }
    rows = []
    flattening.fwht = timed_fwht
    try:
        for id_, (what, work) in workloads.items():
            spent["cpu"] = 0.0
            w0, c0 = time.perf_counter(), time.process_time()
            work()
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            share = spent["cpu"] / cpu
            rows.append({"id": id_, "name": f"share of the Walsh-Hadamard transform in {what}", "value": 100 * share,
                         "unit": "% of CPU time", "wall_s": wall, "cpu_s": cpu, "peak_mem_mb": math.nan,
                         "notes": f"{spent['cpu']:.3f} s of {cpu:.2f} s CPU inside fwht", "peers": []})
    finally:
        flattening.fwht = original
    return rows


def benchmarks() -> list[dict]:
    return (_discrete_gaussian_rows() + _secagg_rows() + [_secagg_scaling_row()] + _accounting_rows() + _wht_rows()
            + _wht_share_rows())


if __name__ == "__main__":
    for row in benchmarks():
        peers = "; ".join(f"{p['package']} {p.get('ratio_cpu', float('nan')):.3g}x" for p in row["peers"])
        print(f"{row['id']:24s} {row['value']:10.4g} {row['unit']:18s} cpu {row['cpu_s']:.4g}s  {peers}")

"""What ``benchmarks/results/results.json`` must hold: the schema version, the rows the
book's performance page (``chapters/performance.ipynb``) shows, and :func:`problems`, the
check that ``tests/test_benchmark_results.py`` runs on the committed file (so a stale or
broken results file fails the tests, not the book build).  The page and the test import
this module; ``benchmarks/run.py`` writes the file.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

SCHEMA = 2
RESULTS = Path(__file__).resolve().parent / "results" / "results.json"

# Rows the page compares with a peer (side by side, peer time / fedbandit time).
PEER_ROWS = (
    "dgauss_sigma10", "dgauss_sigma1000",
    "secagg_n100_d65536", "secagg_n30_d65536",
    "zcdp_to_dp", "rdp_to_dp",
    "wht_d1048576", "wht_d65536", "wht_bandit_ddg", "wht_dme", "wht_federated",
)
# Rows the page states against a compute floor.
FLOOR_ROWS = (
    "dgauss_sigma10", "dgauss_sigma1000",
    "secagg_n100_d65536", "secagg_n30_d65536",
    "wht_d1048576", "wht_d65536", "wht_bandit_ddg", "wht_dme", "wht_federated",
    "tree_silo_ldp_d10", "tree_silo_ldp_d57",
    "fixed_batch_vectorized", "fixed_batch_ch2_main",
)
# Chapter 2's instance run one configuration at a time and in lockstep (shared environment).
SHARING_ROWS = ("fixed_batch_shared_environment",)
# SecAgg's growth in n: a fitted exponent with its interval.
SCALING_ROWS = ("secagg_scaling",)
# The transform's share of chapter 5's workloads (where it would matter).
SHARE_ROWS = ("wht_share_dme", "wht_share_federated", "wht_share_bandit_ddg")
# Vectorized learner over its plain-loop reference, on the same workload.
SAME_WORKLOAD_ROWS = (
    "fixed_batch_same_workload_speedup",
    "dp20_same_workload_speedup",
    "consensus_master_worker_same_workload_speedup",
    "consensus_decentralized_same_workload_speedup",
)
PAGE_ROWS = tuple(dict.fromkeys(PEER_ROWS + FLOOR_ROWS + SHARE_ROWS + SAME_WORKLOAD_ROWS + SHARING_ROWS
                                 + SCALING_ROWS))
PEAKS = ("flops_per_s", "copy_bytes_per_s", "random_bits_per_s", "normals_per_s", "sqrt_per_s", "aes_ctr_bytes_per_s",
         "x25519_per_s")
PEER_PACKAGES = ("opendp", "flwr", "dp-accounting", "fht-cpu", "FFHT-unofficial")
# A floor is a lower bound: floor / measured time above this is a broken peak or work count
# (the slack covers timing noise between the peak's and the kernel's best runs).
FLOOR_SLACK = 1.1
ROW_FIELDS = ("module", "id", "name", "value", "unit", "wall_s", "cpu_s", "notes")


def load(path=RESULTS) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def rows_by_id(results: dict) -> dict:
    return {row["id"]: row for row in results["results"]}


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def problems(results: dict) -> list[str]:
    """Everything that keeps ``results`` from backing the performance page (empty: fine)."""
    out = []
    if results.get("schema") != SCHEMA:
        return [f"schema is {results.get('schema')!r}, the page reads schema {SCHEMA}: rerun `make bench`"]
    for key in ("generated", "machine", "load", "peaks", "peers", "results"):
        if key not in results:
            out.append(f"missing top-level key {key!r}")
    if out:
        return out
    machine = results["machine"]
    for key in ("cpu", "logical_cpus", "python", "numpy"):
        if key not in machine:
            out.append(f"machine lacks {key!r}")
    load = results["load"]
    if not (len(load.get("start", [])) == 3 and len(load.get("end", [])) == 3):
        out.append("load must state the 1/5/15-minute load averages at the start and end of the run")
    for key in PEAKS:
        if not (_finite(results["peaks"].get(key)) and results["peaks"][key] > 0):
            out.append(f"peak {key!r} missing or not a positive number")
    for pkg in PEER_PACKAGES:
        if pkg not in results["peers"]:
            out.append(f"peers lacks {pkg!r} (its version, or null when not installed)")
    ids = [row.get("id") for row in results["results"]]
    if len(ids) != len(set(ids)):
        out.append("row ids are not unique")
    rows = rows_by_id(results)
    for rid in PAGE_ROWS:
        row = rows.get(rid)
        if row is None:
            out.append(f"row {rid!r} (shown on the page) is missing")
            continue
        missing = [f for f in ROW_FIELDS if f not in row]
        if missing:
            out.append(f"row {rid!r} lacks {missing}")
            continue
        for f in ("value", "wall_s", "cpu_s"):
            if not _finite(row[f]) or row[f] < 0:
                out.append(f"row {rid!r}: {f} = {row[f]!r} is not a non-negative number")
        if rid in FLOOR_ROWS:
            fl = row.get("floor") or {}
            if not (fl.get("work") and _finite(fl.get("floor_s")) and _finite(fl.get("fraction"))
                    and fl.get("binding") and fl["floor_s"] > 0):
                out.append(f"row {rid!r} has no complete compute floor (work, floor_s, fraction, binding)")
            elif fl["fraction"] > FLOOR_SLACK:
                out.append(f"row {rid!r}: the floor is {fl['fraction']:.3g} times the measured time, so it is not a "
                           "lower bound (a peak measured too low, or the work overcounted)")
        if rid in SCALING_ROWS and not (all(_finite(row.get(k)) for k in ("low", "high", "confidence"))
                                        and row["low"] <= row["value"] <= row["high"] and row.get("claim")):
            out.append(f"row {rid!r} lacks its interval (low <= value <= high, confidence) or its claim")
        if rid in SAME_WORKLOAD_ROWS + SHARING_ROWS and not (_finite(row.get("ratio_cpu")) and row["ratio_cpu"] > 0):
            out.append(f"row {rid!r} lacks its CPU-time ratio")
        if rid in PEER_ROWS:
            peers = row.get("peers") or []
            if not peers:
                out.append(f"row {rid!r} names no peer")
            for p in peers:
                if p.get("status") == "measured":
                    if not all(_finite(p.get(k)) and p[k] > 0 for k in ("wall_s", "cpu_s", "ratio_wall", "ratio_cpu")):
                        out.append(f"row {rid!r}: measured peer {p.get('package')!r} lacks its times or ratios")
                    if not p.get("version"):
                        out.append(f"row {rid!r}: measured peer {p.get('package')!r} lacks its version")
                elif p.get("status") == "not available":
                    if not p.get("reason"):
                        out.append(f"row {rid!r}: unavailable peer {p.get('package')!r} gives no reason")
                else:
                    out.append(f"row {rid!r}: peer status {p.get('status')!r} is neither 'measured' nor 'not available'")
    return out

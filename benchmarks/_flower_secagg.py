"""Flower's SecAgg+ (``flwr``), driven in one process for a side-by-side benchmark.

Flower runs SecAgg+ as a client mod (``flwr.client.mod.secure_aggregation.secaggplus_mod``)
and a server workflow (``flwr.server.workflow.secure_aggregation.SecAggPlusWorkflow``) that
talk through its messaging layer.  This driver calls the mod's four stage functions
(``_setup``, ``_share_keys``, ``_collect_masked_vectors``, ``_unmask``) for every client
directly and does the server's routing, summing and unmasking with the same Flower
primitives the workflow uses (``combine_shares``, ``pseudo_rand_gen``,
``generate_shared_key``, ``parameters_*``), in the workflow's order.  No network, no
message serialisation beyond what the stage functions do themselves (the masked vectors
travel as Flower's ``ndarray_to_bytes``).  Neighbourhoods are the complete graph
(``num_shares = n``), which makes SecAgg+ the original SecAgg of Bonawitz et al., the
protocol ``fedbandit.secagg`` implements.

Integer inputs in ``[0, 2^B)`` go through Flower's quantizer unchanged: with clipping range
``c = 2^(B-1)``, target range ``2c`` and ``max_weight = num_examples = 1`` the quantizer is
the identity on ``x - c`` (stochastic rounding of an integer is exact), so the unmasked
result (before Flower's de-quantization, which is skipped) is the survivors' sum mod 2^B.

``stub_shamir=True`` replaces Flower's Shamir sharing (pycryptodome's GF(2^128) Shamir, in
pure Python, the step that dominates at n = 100) by handing every client the secret itself:
the protocol's result is unchanged, its cost is a lower bound on Flower's real cost.
"""

from __future__ import annotations

import contextlib
import logging
import time

import numpy as np


@contextlib.contextmanager
def _no_shamir(mod):
    def create_shares(secret: bytes, threshold: int, num: int) -> list[bytes]:
        return [secret] * num

    def combine_shares(share_list: list[bytes]) -> bytes:
        return share_list[0]

    saved = mod.create_shares
    mod.create_shares = create_shares
    try:
        yield combine_shares
    finally:
        mod.create_shares = saved


def run_flower_secaggplus(x, *, bits: int, threshold: int, dropped=(), stub_shamir: bool = False) -> dict:
    """SecAgg+ over the rows of integer array ``x`` (n, d); clients ``dropped`` (ids 1..n)
    drop out before sending their masked input.  Returns ``{"total": survivors' sum mod
    2^bits, "timings": seconds per stage}``."""
    import importlib

    mod = importlib.import_module("flwr.client.mod.secure_aggregation.secaggplus_mod")
    from flwr.common import bytes_to_ndarray, ndarrays_to_parameters
    from flwr.common.secure_aggregation.crypto.shamir import combine_shares as real_combine
    from flwr.common.secure_aggregation.crypto.symmetric_encryption import generate_shared_key
    from flwr.common.secure_aggregation.ndarrays_arithmetic import (
        factor_extract,
        get_parameters_shape,
        parameters_addition,
        parameters_mod,
        parameters_subtraction,
    )
    from flwr.common.secure_aggregation.secaggplus_constants import Key
    from flwr.common.secure_aggregation.secaggplus_utils import pseudo_rand_gen
    from flwr.supercore.primitives.asymmetric import bytes_to_private_key, bytes_to_public_key

    logging.getLogger("flwr").setLevel(logging.WARNING)
    x = np.asarray(x)
    n, _ = x.shape
    mod_range = 1 << bits
    c = float(1 << (bits - 1))
    dropped = set(dropped)
    nids = list(range(1, n + 1))
    timings = {}
    ctx = _no_shamir(mod) if stub_shamir else contextlib.nullcontext(real_combine)
    with ctx as combine_shares:
        t0 = time.perf_counter()
        states = {}
        for nid in nids:
            st = mod.SecAggPlusState()
            st.nid = nid
            states[nid] = st
        cfg = {Key.SAMPLE_NUMBER: n, Key.SHARE_NUMBER: n, Key.THRESHOLD: threshold, Key.CLIPPING_RANGE: c,
               Key.TARGET_RANGE: int(2 * c), Key.MOD_RANGE: mod_range, Key.MAX_WEIGHT: 1.0}
        pks = {}
        for nid in nids:
            res = mod._setup(states[nid], dict(cfg))
            pks[nid] = [res[Key.PUBLIC_KEY_1], res[Key.PUBLIC_KEY_2]]
        timings["setup"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        fwd_ct = {nid: [] for nid in nids}
        fwd_src = {nid: [] for nid in nids}
        for nid in nids:
            res = mod._share_keys(states[nid], {str(k): v for k, v in pks.items()})
            for dst, ct in zip(res[Key.DESTINATION_LIST], res[Key.CIPHERTEXT_LIST]):
                fwd_ct[dst].append(ct)
                fwd_src[dst].append(nid)
        timings["share keys"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        active = [nid for nid in nids if nid not in dropped]
        masked = None
        for nid in active:
            params = ndarrays_to_parameters([x[nid - 1].astype(np.float64) - c])
            res = mod._collect_masked_vectors(
                states[nid], {Key.CIPHERTEXT_LIST: fwd_ct[nid], Key.SOURCE_LIST: fwd_src[nid]}, 1, params)
            vec = [bytes_to_ndarray(b) for b in res[Key.MASKED_PARAMETERS]]
            masked = vec if masked is None else parameters_addition(masked, vec)
        masked = parameters_mod(masked, mod_range)
        timings["collect masked vectors"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        dead = [nid for nid in nids if nid in dropped]
        shares = {nid: [] for nid in nids}
        for nid in active:
            res = mod._unmask(states[nid], {Key.ACTIVE_NODE_ID_LIST: list(active), Key.DEAD_NODE_ID_LIST: dead})
            for owner, share in zip(res[Key.NODE_ID_LIST], res[Key.SHARE_LIST]):
                shares[owner].append(share)
        shape = get_parameters_shape(masked)
        for nid, share_list in shares.items():
            if len(share_list) < threshold:
                raise RuntimeError(f"not enough shares to unmask client {nid}")
            secret = combine_shares(share_list)
            if nid not in dropped:
                masked = parameters_subtraction(masked, pseudo_rand_gen(secret, mod_range, shape))
            else:
                for other in nids:
                    if other == nid:
                        continue
                    key = generate_shared_key(bytes_to_private_key(secret), bytes_to_public_key(pks[other][0]))
                    mask = pseudo_rand_gen(key, mod_range, shape)
                    masked = parameters_addition(masked, mask) if nid > other else parameters_subtraction(masked, mask)
        recon = parameters_mod(masked, mod_range)
        _, (total,) = factor_extract(recon)
        timings["unmask"] = time.perf_counter() - t0
    return {"total": np.asarray(total, dtype=np.int64), "timings": timings}

"""The golden record: today's computed results, hashed, so a refactor can prove it changed none.

For every (learner, protocol) pair the learners accept (:func:`fedbandit.audit.replay.replay_pairs`)
and every environment :func:`fedbandit.envs.make_environment` builds, one small fixed-seed run of
:func:`fedbandit.experiments.run_config` is hashed: the regret curve, every release the protocol
made (inputs and outputs of its release methods, recorded by
:func:`fedbandit.audit.replay.replaying`), the accounting, the communication record, the
calibration and the learner's extras.  Numbers are hashed bit for bit (the IEEE-754 bytes of
every float; an int hashes as the float it equals, so a record that turns a count from int to
float keeps its hash); wall times and memory are left out.

``tests/golden_results.json`` holds the hashes; ``tests/test_golden.py`` recomputes them and
compares.  A change that *means* to change results (a new draw order of the environments, a fixed
bug) regenerates them in the same commit, with one command::

    make golden          # = FEDBANDIT_SCALE=quick .venv/bin/python tests/golden.py --write

and says why in the commit message.  ``python tests/golden.py`` (no ``--write``) prints the
entries whose hash differs.

The record is computed on pinned CPU code paths (:data:`PINNED_ENV`): OpenBLAS's Haswell kernels
and numpy without its AVX-512 dispatch targets, in a subprocess when the calling process was not
started with them (:func:`compute_pinned`).  Left to choose for themselves, both pick the fastest
kernels of the host, and an AVX-512 host rounds a matrix product, an ``exp`` or a sort's ties
differently from an AVX2 host: 31 of the 119 entries differed between two such hosts.  Any x86-64
host with AVX2 computes the pinned record bit for bit.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import math
import os
import struct
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np

GOLDEN_PATH = Path(__file__).with_name("golden_results.json")

#: Small instances, one per learner family (fixed here: the record must not move with package defaults).
LINEAR = dict(instance="synthetic", M=3, K=4, d=2, T=16, B=4, runs=2, env_seed=3)
COUNTER = dict(instance="bernoulli", M=3, means=[0.8, 0.5, 0.2], T=24, runs=2)
FEDERATED = dict(instance="digits", n_clients=6, rounds=2, runs=2, clip=0.5, local_steps=1)

#: Protocol parameters (a generous target; amplification forced at small M).
PRIVATE = dict(epsilon=2.0, delta=1e-3)
PROTOCOL_PARAMS = {
    "sdp-amplification": dict(epsilon=0.5, delta=0.1, force=True),
    "sdp-vector-sum": dict(epsilon=2.0, delta=0.1),
    "dp20": dict(epsilon=2.0, delta=0.1),
    "concurrent-shuffle": dict(epsilon=2.0, delta=1e-3, k=2),
    "sequential-vector-sum": dict(epsilon=2.0, delta=0.1, batch_size=4),
}
#: Counter protocols take ε only.
COUNTER_PRIVATE = dict(epsilon=2.0)

#: One run per environment that the pairs do not already cover (the pairs run on synthetic,
#: bernoulli and digits instances).
ENVIRONMENT_RUNS = {
    "real": dict(learner="fixed-batch", protocol="silo-ldp", instance="real", M=3, T=16, B=4, runs=2, max_arms=5,
                 **PRIVATE),
    "gaussian": dict(learner="master-worker", protocol="counter-hybrid", instance="gaussian", M=3,
                     means=[0.8, 0.5, 0.2], env_sigma=0.3, T=24, runs=2, **COUNTER_PRIVATE),
    "rankers": dict(learner="independent-ucb", protocol="counter-laplace", instance="rankers", K=4, M=2, T=24, runs=2,
                    **COUNTER_PRIVATE),
}

#: Learners without a protocol, run once each.
NO_PROTOCOL_RUNS = {
    "independent": dict(learner="independent", **LINEAR),
    "centralized-ucb": dict(learner="centralized-ucb", **COUNTER),
}


def _family(learner: str) -> str:
    from fedbandit.learners.registry import learner_family

    return learner_family(learner)


def pair_config(learner: str, protocol: str) -> dict:
    """The golden run's configuration of one (learner, protocol) pair."""
    from fedbandit.protocols.registry import describe

    info = describe(protocol)
    family = _family(learner)
    base = {"linear": LINEAR, "counter": COUNTER, "federated": FEDERATED}[family]
    params = {}
    if "epsilon" in info.parameters:
        params = dict(COUNTER_PRIVATE if info.kind == "counter" else PROTOCOL_PARAMS.get(protocol, PRIVATE))
    cfg = dict(learner=learner, protocol=protocol, **base, **params)
    if learner == "concurrent-linucb":
        cfg["min_period"] = 4
    return cfg


@functools.lru_cache(maxsize=1)
def golden_configs() -> dict:
    """{label: configuration} of every golden run."""
    from fedbandit.audit.replay import replay_pairs

    out = {f"{lrn}/{proto}": pair_config(lrn, proto) for lrn, proto in replay_pairs()[0]}
    # FedUCB's default is DP20's adaptive schedule (D = "wang"); its fixed schedule and a low threshold
    # (which synchronizes within the small horizon) are runs of their own
    for lrn, proto in replay_pairs()[0]:
        if lrn == "feducb":
            out[f"{lrn}/{proto} (fixed)"] = dict(pair_config(lrn, proto), schedule="fixed")
            out[f"{lrn}/{proto} (D = 0.05)"] = dict(pair_config(lrn, proto), D=0.05)
    out.update({f"env:{k}": v for k, v in ENVIRONMENT_RUNS.items()})
    out.update({f"{k}": v for k, v in NO_PROTOCOL_RUNS.items()})
    return out


# ---------------------------------------------------------------------------------------
# Canonical hashing
# ---------------------------------------------------------------------------------------


def _feed(h, obj) -> None:
    """Feed ``obj`` to hash ``h`` canonically (types tagged; floats by their IEEE-754 bytes)."""
    if obj is None:
        h.update(b"N")
    elif isinstance(obj, (bool, np.bool_)):
        h.update(b"b1" if obj else b"b0")
    elif isinstance(obj, (int, np.integer)):
        v = int(obj)
        if abs(v) < 2**53:
            h.update(b"f" + struct.pack("<d", float(v)))
        else:
            h.update(b"i" + str(v).encode())
    elif isinstance(obj, (float, np.floating)):
        v = float(obj)
        h.update(b"f" + struct.pack("<d", 0.0 if v == 0.0 and math.copysign(1.0, v) > 0 else v))
    elif isinstance(obj, str):
        b = obj.encode("utf-8")
        h.update(b"s" + struct.pack("<q", len(b)) + b)
    elif isinstance(obj, np.ndarray):
        if obj.dtype == object:
            _feed(h, obj.tolist())
            return
        a = np.ascontiguousarray(obj)
        if a.dtype.kind in "iu" and (a.size == 0 or np.all(np.abs(a) < 2**53)):
            a = a.astype(np.float64)  # as the scalars: an int hashes as the float it equals
        elif a.dtype.kind == "f":
            a = a.astype(np.float64)
        h.update(b"a" + a.dtype.str.encode() + str(a.shape).encode() + a.tobytes())
    elif isinstance(obj, dict):
        h.update(b"d" + struct.pack("<q", len(obj)))
        for k in sorted(obj, key=str):
            _feed(h, str(k))
            _feed(h, obj[k])
    elif isinstance(obj, (list, tuple)):
        h.update(b"l" + struct.pack("<q", len(obj)))
        for v in obj:
            _feed(h, v)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):  # an event: its type and fields
        _feed(h, type(obj).__name__)
        _feed(h, {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)})
    else:
        raise TypeError(f"no canonical hash for {type(obj).__name__}")


def record(obj) -> dict:
    """A result record (a dict, or a typed record) as a dict of its set entries (None entries dropped).

    The accounting's ``private`` is left out: it follows from its status.
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        d = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    else:
        d = dict(obj)
    d.pop("private", None)
    return {k: v for k, v in d.items() if v is not None}


def digest(obj) -> str:
    h = hashlib.sha256()
    _feed(h, obj)
    return h.hexdigest()


# ---------------------------------------------------------------------------------------
# One run
# ---------------------------------------------------------------------------------------


def run_golden(config: dict, seed: int = 0) -> dict:
    """{part: hash} of one golden run: the result's parts and every release the protocol made."""
    import fedbandit.protocols.registry as registry
    from fedbandit.audit.replay import ReplayLog, replaying
    from fedbandit.experiments.runner import run_config

    logs = []
    create = registry.create

    def recording_create(name, **params):
        log = ReplayLog()
        logs.append(log)
        return replaying(create(name, **params), log)

    # every module that imported create by name (the learner registry's split_params does) is patched too
    patched = [(mod, attr) for name, mod in list(sys.modules.items())
               if mod is not None and (name == "fedbandit" or name.startswith("fedbandit."))
               for attr, value in list(vars(mod).items()) if value is create]
    for mod, attr in patched:
        setattr(mod, attr, recording_create)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = run_config(dict(config), np.random.default_rng(seed))
    finally:
        for mod, attr in patched:
            setattr(mod, attr, create)
    out = {
        "regret": digest([res.t, res.regret] if hasattr(res, "regret") else []),
        "noise_variance": digest(getattr(res, "noise_variance", None)),
        "accounting": digest(record(res.accounting)),
        "communication": digest(record(res.communication)),
        "calibration": digest(res.calibration),
        "extras": digest(res.extras),
        "names": digest([res.learner, res.protocol]),
    }
    calls = [(c[0], c[1], c[2]) for log in logs for c in log.calls]
    outputs = [o for log in logs for o in log.outputs]
    out["released"] = digest(outputs)
    out["handed_over"] = digest(calls)
    out["n_releases"] = len(outputs)
    return out


# ---------------------------------------------------------------------------------------
# One protocol, configured: what it declares
# ---------------------------------------------------------------------------------------

#: The settings every protocol of a kind is configured with (the contract suite's).
STATISTICS_SETTING = dict(n_agents=3, dim=2, n_batches=4, batch_size=2)
USER_LEVEL_SETTING = dict(n_agents=1, dim=2, n_batches=4, batch_size=4)
COUNTER_SETTING = dict(n_agents=2, n_arms=3, horizon=16, sensitivity=1.0)
SUM_SETTING = dict(n_parties=5, dim=4, n_rounds=3, clip=1.0)


def _try(f, *args):
    """f(*args), or the refusal's type and message (a refusal is part of the declaration)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return f(*args)
    except (ValueError, TypeError) as exc:
        return f"{type(exc).__name__}: {exc}"


def protocol_golden(name: str) -> dict:
    """{part: hash} of what protocol ``name`` declares once configured: its events and accountings
    under both relations, its calibration, noise statements, theorem, model and parts."""
    from fedbandit.protocols.registry import create, describe

    info = describe(name)
    params = {}
    if "epsilon" in info.parameters:
        params = dict(COUNTER_PRIVATE if info.kind == "counter" else PROTOCOL_PARAMS.get(name, PRIVATE))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = create(name, **params)
        if info.kind == "statistics":
            p.configure(**(USER_LEVEL_SETTING if name in ("concurrent-shuffle", "sequential-vector-sum")
                           else STATISTICS_SETTING))
        elif info.kind == "counter":
            p.configure(**COUNTER_SETTING)
        else:
            p.configure(**SUM_SETTING)
    out = {}
    for rel in ("add-remove", "replace"):
        out[f"event {rel}"] = digest(_try(p.event, rel))
        out[f"accounting {rel}"] = digest(_try(lambda r: record(p.accounting(r)), rel))
    out["calibration"] = digest(_try(p.calibration))
    out["declared"] = digest([p.model, p.trusted, p.theorem(), p.bounds_note(), p.parts(), p.private])
    if info.kind == "statistics":
        noise = {"server_noise_std": lambda: p.server_noise_std(), "node_noise_std": lambda: p.node_noise_std(),
                 "sigma0": lambda: p.sigma0, "needs_user_data": lambda: p.needs_user_data,
                 "supports_run_masks": lambda: p.supports_run_masks}
        noise.update({f"prefix_noise_variance({k})": (lambda k=k: p.prefix_noise_variance(k)) for k in range(1, 5)})
    elif info.kind == "counter":
        noise = {"noise_variance": lambda: p.noise_variance(np.arange(1, 17)),
                 "max_noise_variance": lambda: p.max_noise_variance(),
                 "sd_factor": lambda: p.sd_factor(np.arange(1.0, 17.0)),
                 "sd_factor_float": lambda: p.sd_factor_float(np.linspace(1.0, 16.0, 7))}
        noise.update({f"width_scale({k})": (lambda k=k: p.width_scale(k)) for k in ("fact1", "std", "none")})
    else:
        noise = {"noise_std": lambda: p.noise_std(), "bits_per_coordinate": lambda: p.bits_per_coordinate}
    for key, f in noise.items():
        try:
            value = _try(f)
        except (AttributeError, NotImplementedError):  # a statement this protocol does not make (yet)
            continue
        out[key] = digest(value)
    return out


def compute(labels=None) -> dict:
    from fedbandit.protocols.registry import available

    configs = {f"run {k}": dict(v) for k, v in golden_configs().items()}
    names = {f"protocol {n}": n for n in available()}
    if labels is not None:
        configs = {k: v for k, v in configs.items() if k in labels}
        names = {k: v for k, v in names.items() if k in labels}
    out = {label: run_golden(cfg) for label, cfg in configs.items()}
    out.update({label: protocol_golden(n) for label, n in names.items()})
    return out


#: The environment the record is computed in: the same kernels on every x86-64 host with AVX2
#: (OpenBLAS's Haswell kernels, one thread; numpy's dispatch capped at AVX2).
PINNED_ENV = {
    "OPENBLAS_CORETYPE": "Haswell",
    "OPENBLAS_NUM_THREADS": "1",
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
    "FEDBANDIT_SCALE": "quick",
}


def is_pinned(environ=None) -> bool:
    """Whether ``environ`` (default: this process's, as it was started) holds :data:`PINNED_ENV`."""
    environ = os.environ if environ is None else environ
    return all(environ.get(k) == v for k, v in PINNED_ENV.items())


def compute_pinned(labels=None) -> dict:
    """:func:`compute` on the pinned code paths: in this process if it was started with
    :data:`PINNED_ENV` (the kernels are chosen when numpy and OpenBLAS load), else in a subprocess."""
    if is_pinned():
        return compute(labels)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--json"] + (list(labels) if labels is not None else [])
    done = subprocess.run(cmd, env={**os.environ, **PINNED_ENV}, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the pinned golden computation failed (rc {done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # the last line: anything printed before is not ours


def compare(want: dict, got: dict) -> list[str]:
    """The differences of ``got`` from the golden ``want``: every golden entry and part must be
    recomputed with the same hash (entries or parts the golden record lacks -- a pair a new learner
    accepts, a statement a protocol newly makes -- are new, not changed)."""
    bad = []
    for label in sorted(want):
        if label not in got:
            bad.append(f"{label}: no longer computed")
            continue
        parts = sorted(k for k in want[label] if got[label].get(k) != want[label][k])
        if parts:
            bad.append(f"{label}: {', '.join(parts)} changed")
    return bad


def load() -> dict:
    return json.loads(GOLDEN_PATH.read_text())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite {GOLDEN_PATH.name}")
    parser.add_argument("--json", action="store_true", help="print the computed hashes as JSON (this process's kernels)")
    parser.add_argument("labels", nargs="*", help="entries to compute (default: all)")
    args = parser.parse_args(argv)
    labels = args.labels or None
    if args.write and labels is not None:
        parser.error("--write rewrites the whole record: give no labels")
    if args.json:
        print(json.dumps(compute(labels)))
        return 0
    got = compute_pinned(labels)
    if args.write:
        GOLDEN_PATH.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(got)} golden runs to {GOLDEN_PATH}")
        return 0
    bad = compare(load(), got)
    for line in bad:
        print(line)
    print(f"{len(got)} golden entries computed, {len(bad)} differ from {GOLDEN_PATH.name}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

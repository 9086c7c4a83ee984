"""Every privacy model side by side on one linear contextual bandit (the synthesis chapter).

The source papers each compare a few privacy models on their own instance with their own
accounting.  Every federated learner of the book reaches the server only through a
privacy protocol, so here one instance and one target (ε, δ) are run under every model:

========================  ==============================================================
protocol                  what it is
========================  ==============================================================
``non-private``           exact sums (:class:`~fedbandit.protocols._legacy_tree.NonPrivateProtocol`)
``central``               trusted server, Gaussian tree (:class:`~fedbandit.protocols._legacy_tree.CentralTreeProtocol`)
``silo-ldp``              silo-level LDP, distributed Gaussian tree (:class:`~fedbandit.protocols._legacy_tree.SiloLDPProtocol`)
``sdp-amplification``     the same tree plus a shuffler (:class:`~fedbandit.protocols._legacy_tree.ShuffleAmplificationProtocol`)
``sdp-vector-sum``        shuffle vector sum in every tree node (:class:`~fedbandit.protocols._legacy_tree.VectorSumShuffleProtocol`)
``concurrent-shuffle-k1`` one shuffler per user batch: the sequential shuffle model
                          (:func:`fedbandit.learners.concurrent_linucb.make_stream`, k = 1)
``concurrent-shuffle-klog`` ⌊log₂ n⌋ + 1 concurrent shufflers on dyadic batches (k = log n)
``ddg-secagg``            distributed discrete Gaussian + secure aggregation
                          (:class:`~fedbandit.protocols._legacy_tree.DDGSecAggProtocol`)
``dp20``                  DP20's per-silo tree with its adaptive schedule (not private)
========================  ==============================================================

and learners (:data:`LEARNERS`): ``fixed-batch`` (Algorithm 1 of Zhou & Chowdhury 2023,
:class:`~fedbandit.learners.fixed_batch.FixedBatchFedLinUCB`), ``super-agent`` (the same
learner with batch size 1: one model serving all M·T users, the central-DP benchmark),
``independent`` (M agents that never communicate), ``concurrent-linucb`` (private LinUCB on
the users' records in the concurrent shuffle model of Tenenbaum et al. 2023,
:func:`~fedbandit.learners.concurrent_linucb.run_private_linucb`) and ``feducb`` (DP20's
FedUCB, :class:`~fedbandit.learners.dp20.FedUCB`).  :data:`APPLICABLE` says which
protocols each learner can take; :func:`check_applicable` refuses the others.

Nothing here re-implements a learner or a mechanism.  Two adapters make every learner face
the *same* bandit (same θ, contexts, reward noise, M agents, T rounds, K arms):

* :class:`UserSequenceEnv` -- the concurrent-shuffle learner serves users one at a time
  (an environment with one agent); it sees the M·T users of the federated instance in
  the order (round 1: agents 1..M, round 2: ...), so its cumulative regret summed per
  round is the same metric as the federated learners' [derived];
* padded arms (real-data instance, queries with fewer documents) are replaced by copies of
  the query's first document for that learner, whose LinUCB core takes no arm mask
  (duplicated arms leave the bandit unchanged).

One (learner, protocol, ε, M, seed) point is :func:`run_side_by_side`, a function of the
form :func:`fedbandit.experiments.grid.run_grid` runs; :func:`audit_side_by_side` audits the
protocol's first release (or DP20's schedule) with :mod:`fedbandit.audit.epsilon`;
:func:`table_rows` and :func:`markdown_table` build the side-by-side table.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np

from fedbandit.protocols._legacy_tree import CentralTreeProtocol, DDGSecAggProtocol, NonPrivateProtocol, ShuffleAmplificationProtocol, SiloLDPProtocol, VectorSumShuffleProtocol
from fedbandit.accounting.calibration import CJMP21_CONSTANT
from fedbandit._validation import (
    check_choice,
    check_delta,
    check_epsilon,
    check_int_in_range,
    check_nonnegative_float,
    check_positive_float,
    check_positive_int,
    check_probability,
    check_rng,
)
from fedbandit.mechanisms.tree import tree_depth
from fedbandit.envs.users import UserSequenceEnv
from fedbandit.experiments.statistics import regret_interval

__all__ = [
    "PROTOCOLS",
    "LEARNERS",
    "APPLICABLE",
    "PROTOCOL_INFO",
    "PAIR_INFO",
    "pair_info",
    "LEARNER_INFO",
    "DDG_AVAILABLE",
    "check_applicable",
    "applicable_pairs",
    "applicability_table",
    "pair_label",
    "make_fixed_batch_protocol",
    "build_learner",
    "side_by_side_configs",
    "sweep_configs",
    "run_side_by_side",
    "random_play_regret",
    "audit_side_by_side",
    "table_rows",
    "markdown_table",
    "format_value",
    "TABLE_COLUMNS",
]

#: Protocol (privacy model) names, in the order of the table.
PROTOCOLS = (
    "non-private",
    "central",
    "silo-ldp",
    "sdp-amplification",
    "sdp-vector-sum",
    "concurrent-shuffle-k1",
    "concurrent-shuffle-klog",
    "ddg-secagg",
    "dp20",
)

#: Learner names.
LEARNERS = ("fixed-batch", "super-agent", "independent", "concurrent-linucb", "feducb")

#: Whether :class:`fedbandit.protocols._legacy_tree.DDGSecAggProtocol` exists in this version.
DDG_AVAILABLE = True

#: Which protocols each learner can run.
APPLICABLE = {
    "fixed-batch": ("non-private", "central", "silo-ldp", "sdp-amplification", "sdp-vector-sum")
    + (("ddg-secagg",) if DDG_AVAILABLE else ()),
    "super-agent": ("non-private", "central"),
    "independent": ("non-private",),
    "concurrent-linucb": ("central", "concurrent-shuffle-k1", "concurrent-shuffle-klog"),
    "feducb": ("non-private", "dp20"),
}

#: Why a (learner, protocol) pair does not apply, where the reason is specific.
_NOT_APPLICABLE_WHY = {
    "fixed-batch": "the fixed-batch learner takes fedbandit.protocols._legacy_tree.Protocol objects; the concurrent shuffle "
    "PSCO runs on single users' records, and DP20's privatizer is tied to FedUCB's adaptive schedule",
    "super-agent": "the super agent is the trusted-server benchmark: only no privacy or central DP apply",
    "independent": "independent agents never communicate, so no protocol is ever invoked",
    "concurrent-linucb": "this learner serves users one at a time through a per-user stream "
    "(fedbandit.learners.concurrent_linucb.make_stream); the federated tree protocols act on agents' batch sums",
    "feducb": "FedUCB has its own tree privatizer over its adaptive synchronizations and takes no protocol object",
}

#: Human-readable facts about every protocol: the table's descriptive columns.
PROTOCOL_INFO = {
    "non-private": {
        "label": "non-private",
        "model": "none",
        "trusted": "everyone",
        "adversary": "server: every agent's exact batch sums Σxy, Σxxᵀ",
        "reference": "Zhou & Chowdhury 2023, Alg. 1 with P = identity",
    },
    "central": {
        "label": "central DP (trusted server)",
        "model": "central",
        "trusted": "the server",
        "adversary": "server: exact batch sums (trusted); others: the server's noisy tree prefix sums",
        "reference": "tree mechanism [DNPR10, CSS11]",
    },
    "silo-ldp": {
        "label": "silo-level LDP",
        "model": "silo-LDP",
        "trusted": "own silo only",
        "adversary": "server: each agent's noisy tree p-sums, with sender",
        "reference": "Zhou & Chowdhury 2023, Thm. 6.1",
    },
    "sdp-amplification": {
        "label": "shuffle DP, amplification",
        "model": "SDP",
        "trusted": "the shuffler (no collusion with the server)",
        "adversary": "server: the M agents' noisy p-sums, anonymized by the shuffler",
        "reference": "Zhou & Chowdhury 2023, Thm. 6.3",
    },
    "sdp-vector-sum": {
        "label": "shuffle DP, vector sum",
        "model": "SDP",
        "trusted": "the shuffler (no collusion with the server)",
        "adversary": "server: the shuffled multiset of all users' randomized bits, per tree node",
        "reference": "Zhou & Chowdhury 2023, Thm. 6.5; Cheu et al. 2021",
    },
    "concurrent-shuffle-k1": {
        "label": "concurrent shuffle, k = 1",
        "model": "SDP",
        "trusted": "the shuffler (no collusion with the server)",
        "adversary": "server: the shuffled randomized-response bits of every batch of b₁ users",
        "reference": "Tenenbaum et al. 2023 (k = 1: sequential shuffle)",
    },
    "concurrent-shuffle-klog": {
        "label": "concurrent shuffle, k = log n",
        "model": "CSDP",
        "trusted": "each of the k shufflers (no collusion with the server)",
        "adversary": "server: per shuffler, the shuffled randomized-response bits of its dyadic batches",
        "reference": "Tenenbaum et al. 2023, tree variant",
    },
    "ddg-secagg": {
        "label": "distributed discrete Gaussian + SecAgg",
        "model": "distributed",
        "trusted": "no one (honest-but-curious server; all agents add noise)",
        "adversary": "server: only the modular sum of the agents' noisy, rounded p-sums; network: masked vectors",
        "reference": "Kairouz, Liu & Steinke 2021; Bonawitz et al. 2017",
    },
    "dp20": {
        "label": "DP20 (not private)",
        "model": "silo-LDP (claimed)",
        "trusted": "claimed: own silo only",
        "adversary": "every silo: *when* synchronizations happen (data-dependent); server: each silo's noisy p-sums",
        "reference": "Dubey & Pentland 2020; gaps: Zhou & Chowdhury 2023, Sec. 4",
    },
}

#: Facts that depend on the learner as well as the protocol (override :data:`PROTOCOL_INFO`).
PAIR_INFO = {
    ("super-agent", "non-private"): {
        "adversary": "server: every user's exact record, after every round",
        "reference": "Zhou & Chowdhury 2023, benchmark (B = 1)",
    },
    ("super-agent", "central"): {
        "adversary": "server: every user's exact record (trusted); others: the central tree's noisy prefix sums",
        "reference": "tree mechanism [DNPR10, CSS11], B = 1",
    },
    ("independent", "non-private"): {
        "model": "none needed (no communication)",
        "trusted": "own silo only",
        "adversary": "nothing (no messages)",
        "reference": "no release",
    },
    ("concurrent-linucb", "central"): {
        "adversary": "server: every user's exact record (trusted); others: the noisy prefix sums",
        "reference": "tree mechanism [DNPR10, CSS11] per user; Shariff & Sheffet 2018",
    },
    ("feducb", "non-private"): {
        "adversary": "server: every agent's exact sums, at data-dependent synchronizations",
        "reference": "DisLinUCB, Wang et al. 2020",
    },
}


def pair_info(learner: str, protocol: str) -> dict:
    """The table's descriptive facts of a (learner, protocol) pair: label, model, trusted, adversary, reference."""
    learner, protocol = check_applicable(learner, protocol)
    info = dict(PROTOCOL_INFO[protocol])
    info.update(PAIR_INFO.get((learner, protocol), {}))
    return info


#: Human-readable facts about every learner.
LEARNER_INFO = {
    "fixed-batch": {"label": "fixed-batch FedLinUCB", "reference": "Zhou & Chowdhury 2023, Alg. 1"},
    "super-agent": {"label": "super agent (B = 1)", "reference": "Zhou & Chowdhury 2023, benchmark"},
    "independent": {"label": "independent agents", "reference": "no communication"},
    "concurrent-linucb": {"label": "user-level private LinUCB", "reference": "Tenenbaum et al. 2023, Sec. 5"},
    "feducb": {"label": "FedUCB (DP20)", "reference": "Dubey & Pentland 2020"},
}


# ---------------------------------------------------------------------------------------
# Applicability
# ---------------------------------------------------------------------------------------


def check_applicable(learner, protocol) -> tuple[str, str]:
    """Refuse a (learner, protocol) pair that does not apply, naming both and what applies.

    Raises
    ------
    ValueError
        If ``learner`` or ``protocol`` is unknown, or the learner cannot run the protocol
        (the message lists the protocols the learner takes and the learners that take the
        protocol).
    """
    learner = check_choice("learner", learner, LEARNERS)
    if protocol == "ddg-secagg" and not DDG_AVAILABLE:
        raise ValueError(
            "protocol 'ddg-secagg' needs fedbandit.protocols._legacy_tree.DDGSecAggProtocol, which this version of fedbandit lacks"
        )
    protocol = check_choice("protocol", protocol, PROTOCOLS)
    if protocol not in APPLICABLE[learner]:
        takers = [name for name in LEARNERS if protocol in APPLICABLE[name]]
        raise ValueError(
            f"learner {learner!r} cannot run protocol {protocol!r}: {_NOT_APPLICABLE_WHY[learner]}. "
            f"Protocols that apply to {learner!r}: {', '.join(APPLICABLE[learner])}. "
            f"Learners that run {protocol!r}: {', '.join(takers) if takers else 'none'}."
        )
    return learner, protocol


def applicable_pairs(protocols=None, learners=None) -> list[tuple[str, str]]:
    """All applicable (learner, protocol) pairs, in table order (protocol-major).

    ``protocols`` / ``learners`` restrict the list (names are validated).
    """
    protocols = PROTOCOLS if protocols is None else [check_choice("protocol", p, PROTOCOLS) for p in protocols]
    learners = LEARNERS if learners is None else [check_choice("learner", lr, LEARNERS) for lr in learners]
    pairs = []
    for p in PROTOCOLS:
        if p not in protocols:
            continue
        for lr in LEARNERS:
            if lr in learners and p in APPLICABLE[lr]:
                pairs.append((lr, p))
    return pairs


def applicability_table() -> str:
    """Markdown table: learners × protocols, ✓ where the pair applies."""
    head = "| learner | " + " | ".join(PROTOCOLS) + " |"
    sep = "|---|" + "---|" * len(PROTOCOLS)
    rows = [head, sep]
    for lr in LEARNERS:
        rows.append(f"| {lr} | " + " | ".join("✓" if p in APPLICABLE[lr] else "" for p in PROTOCOLS) + " |")
    return "\n".join(rows)


def pair_label(learner: str, protocol: str) -> str:
    """Short legend label of a (learner, protocol) pair."""
    learner, protocol = check_applicable(learner, protocol)
    if learner == "fixed-batch":
        return PROTOCOL_INFO[protocol]["label"]
    if learner == "super-agent":
        return "super agent, " + ("central DP" if protocol == "central" else "non-private")
    if learner == "independent":
        return "independent agents"
    if learner == "concurrent-linucb":
        return {"central": "user-level LinUCB, central DP"}.get(protocol, PROTOCOL_INFO[protocol]["label"])
    return "DP20 FedUCB (not private)" if protocol == "dp20" else "FedUCB, non-private (DisLinUCB)"


# ---------------------------------------------------------------------------------------
# The same instance for every learner
# ---------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------
# Building the learners
# ---------------------------------------------------------------------------------------


def make_fixed_batch_protocol(protocol: str, epsilon=None, delta=None, *, options=None):
    """The :class:`fedbandit.protocols._legacy_tree.Protocol` object of a fixed-batch-family protocol name.

    ``options`` (dict, optional): ``calibration`` ("paper" | "authors" | "zcdp", central and
    silo-LDP; default "zcdp": the tight zCDP calibration that spends exactly the target),
    ``variant`` and ``force`` (amplification; default "authors", True), ``split`` and
    ``constant`` (vector sum; default "advanced" and the theorem's), ``bits`` and ``k``
    (DDG; default "auto" and 3).
    """
    protocol = check_choice("protocol", protocol, ("non-private", "central", "silo-ldp", "sdp-amplification",
                                                   "sdp-vector-sum", "ddg-secagg"))
    opts = dict(options or {})
    if protocol == "non-private":
        return NonPrivateProtocol()
    eps, dlt = check_epsilon(epsilon), check_delta(delta)
    if protocol == "central":
        return CentralTreeProtocol(eps, dlt, calibration=opts.get("calibration", "zcdp"))
    if protocol == "silo-ldp":
        return SiloLDPProtocol(eps, dlt, calibration=opts.get("calibration", "zcdp"))
    if protocol == "sdp-amplification":
        return ShuffleAmplificationProtocol(
            eps, dlt, variant=opts.get("variant", "authors"), force=bool(opts.get("force", True))
        )
    if protocol == "sdp-vector-sum":
        return VectorSumShuffleProtocol(
            eps, dlt, split=opts.get("split", "advanced"), constant=float(opts.get("constant", CJMP21_CONSTANT))
        )
    if not DDG_AVAILABLE:  # pragma: no cover - depends on the installed version
        raise ValueError("protocol 'ddg-secagg' needs fedbandit.protocols._legacy_tree.DDGSecAggProtocol, which this version lacks")
    return DDGSecAggProtocol(eps, dlt, bits=opts.get("bits", "auto"), k=float(opts.get("k", 3.0)))


_OPTION_KEYS = ("calibration", "variant", "force", "split", "constant", "bits", "k")


def _setting(config: dict) -> dict:
    """Validate a configuration and fill in defaults (no work)."""
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    learner, protocol = check_applicable(config.get("learner"), config.get("protocol"))
    s = dict(config)
    s["learner"], s["protocol"] = learner, protocol
    s["instance"] = check_choice("instance", config.get("instance", "synthetic"), ("synthetic", "real"))
    s["M"] = check_positive_int("M", config.get("M"))
    s["T"] = check_positive_int("T", config.get("T"))
    s["runs"] = check_positive_int("runs", config.get("runs", 1))
    if learner == "fixed-batch":
        B = check_positive_int("B", config.get("B"))
        if s["T"] % B:
            raise ValueError(f"B must divide T: T={s['T']}, B={B}")
        s["B"] = B
    if s["instance"] == "synthetic":
        s["d"] = check_positive_int("d", config.get("d", 10))
        s["K"] = check_positive_int("K", config.get("K", 100))
    private = not (protocol == "non-private")
    if private:
        s["epsilon"] = check_epsilon(config.get("epsilon"))
        s["delta"] = check_delta(config.get("delta"))
    s["alpha"] = check_probability("alpha", config.get("alpha", 0.01))
    s["beta_scale"] = check_nonnegative_float("beta_scale", config.get("beta_scale", 1.0))
    default_r = 0.5 if s["instance"] == "synthetic" else 1.0
    s["noise_bound"] = check_nonnegative_float("noise_bound", config.get("noise_bound", default_r))
    pb = config.get("param_bound")
    s["param_bound"] = None if pb is None else check_nonnegative_float("param_bound", pb)
    # Y = 1 on both instances: the vector-sum protocol encodes every coordinate in [-1, 1].
    s["reward_bound"] = check_positive_float("reward_bound", config.get("reward_bound", 1.0))
    s["n_checkpoints"] = check_int_in_range("n_checkpoints", config.get("n_checkpoints", 20), 1, None)
    return s


class _FixedBatchRunner:
    """fixed-batch, super-agent and independent: :class:`FixedBatchFedLinUCB` with a protocol."""

    family = "fixed-batch"

    def __init__(self, s: dict, dim: int):
        from fedbandit.accounting.amplification import AmplificationValidityWarning
        from fedbandit.learners.fixed_batch import FixedBatchFedLinUCB, IndependentLinUCB

        self.s = s
        kw = dict(alpha=s["alpha"], beta_scale=s["beta_scale"], noise_bound=s["noise_bound"],
                  param_bound=s["param_bound"], reward_bound=s["reward_bound"])
        T, M = s["T"], s["M"]
        opts = {key: s[key] for key in _OPTION_KEYS if key in s}
        with warnings.catch_warnings():
            # A forced amplification setting is reported through its accounting ("unproven").
            warnings.simplefilter("ignore", AmplificationValidityWarning)
            if s["learner"] == "independent":
                self.learner = IndependentLinUCB(horizon=T, n_agents=M, dim=dim, **kw)
            elif s["learner"] == "super-agent":
                # fedbandit.learners.fixed_batch.super_agent with the protocol's calibration option:
                # batch size 1 and λ_min = 1 (one agent serving all M·T users).
                protocol = make_fixed_batch_protocol(s["protocol"], s.get("epsilon"), s.get("delta"), options=opts)
                self.learner = FixedBatchFedLinUCB(protocol, horizon=T, batch_size=1, n_agents=M, dim=dim,
                                                   lam_min=1.0, **kw)
            else:
                protocol = make_fixed_batch_protocol(s["protocol"], s.get("epsilon"), s.get("delta"), options=opts)
                self.learner = FixedBatchFedLinUCB(protocol, horizon=T, batch_size=s["B"], n_agents=M, dim=dim, **kw)

    def run(self, env, rng) -> dict:
        res = self.learner.run(env, rng)
        lr, p = self.learner, self.learner.protocol
        comm = res.communication
        if not lr.communicate:
            acc = {
                "model": "none (no communication)", "target_epsilon": math.inf, "target_delta": 0.0,
                "epsilon": 0.0, "delta": 0.0, "status": "verified", "private": True,
                "theorem": "nothing leaves a silo: every silo's users are private against everyone else (ε = 0)",
                "notes": "",
            }
            rounds, bits, noise_var = 0, 0.0, 0.0
        else:
            acc = dict(res.accounting)
            rounds = int(comm["rounds"])
            bits = float(comm["payload"]) * (64.0 if comm["unit"] == "floats" else 1.0)
            noise_var = float(p.server_noise_std() ** 2)
        return {
            "regret": res.regret,
            "accounting": acc,
            "noise_variance": noise_var,
            "rounds": rounds,
            "uplink_bits": bits,
            "messages": int(comm["messages"]) if lr.communicate else 0,
            "calibration": {k: v for k, v in res.calibration.items() if np.isscalar(v)},
        }


class _ConcurrentRunner:
    """concurrent-linucb: :func:`run_private_linucb` on a per-user stream, users in federated order."""

    family = "concurrent"

    def __init__(self, s: dict, dim: int):
        from fedbandit.learners import concurrent_linucb as CL

        self.s = s
        self.n = s["M"] * s["T"]
        name, k = {"central": ("central", None), "concurrent-shuffle-k1": ("concurrent", 1),
                   "concurrent-shuffle-klog": ("tree", None)}[s["protocol"]]
        self.stream = CL.make_stream(name, s["epsilon"], s["delta"], n=self.n, dim=dim, k=k,
                                     feature_bound=1.0, reward_bound=s["reward_bound"])
        self.dim = dim

    def run(self, env, rng) -> dict:
        from fedbandit.learners import concurrent_linucb as CL

        s, stream = self.s, self.stream
        kw = {} if s["param_bound"] is None else {"param_bound": s["param_bound"]}
        res = CL.run_private_linucb(stream, UserSequenceEnv(env), self.n, rng, alpha=s["alpha"],
                                    noise_bound=s["noise_bound"], beta_scale=s["beta_scale"],
                                    reward_bound=s["reward_bound"], **kw)
        R, M, T = env.n_runs, s["M"], s["T"]
        regret = res["regret"].reshape(R, T, M).sum(axis=2)
        a = res["accounting"]
        D = CL.n_coordinates(self.dim)
        if isinstance(stream, CL.CentralTreeStream):
            ok = a["epsilon"] <= s["epsilon"] * (1 + 1e-9)
            acc_theorem = (f"central Gaussian tree over n={self.n} users [DNPR10, CSS11], σ calibrated over "
                           f"{stream.levels} levels (book's accounting); substitution of one user")
            bits = float(self.n) * D * 64.0
            releases = self.n
        else:
            ok = bool(a["batches_certified"]) and a["epsilon"] <= s["epsilon"] * (1 + 1e-9) and a["delta"] <= s["delta"] * (1 + 1e-9)
            acc_theorem = (f"shuffled randomized response per batch, certified by the privacy-blanket bound; "
                           f"composed over k·D = {a['mechanisms_per_user']} mechanisms per user [DRV10]; "
                           f"batches {list(stream.sizes)}")
            # each user sends, per level i and coordinate, g_i one-bit messages
            bits = float(self.n) * D * float(sum(stream.resolutions))
            releases = self.n // stream.period
        acc = {
            "model": a["model"], "target_epsilon": s["epsilon"], "target_delta": s["delta"],
            "epsilon": float(a["epsilon"]), "delta": float(a["delta"]),
            "status": "verified" if ok else "invalid", "private": ok, "theorem": acc_theorem,
            "notes": "neighbouring: one user's record substituted (the fixed-batch protocols: added/removed)",
        }
        return {
            "regret": regret,
            "accounting": acc,
            "noise_variance": float(np.max(stream.noise_std()) ** 2),
            "rounds": int(releases),
            "uplink_bits": bits,
            "messages": int(self.n),
            "calibration": {"lam": float(res["lam"]), "beta_T": float(res["beta_n"]), "period": int(res["period"])},
        }


class _FedUCBRunner:
    """feducb: DP20's FedUCB with its adaptive (log-det) schedule, D = T log T/(dM)."""

    family = "feducb"

    def __init__(self, s: dict, dim: int):
        from fedbandit.learners.dp20 import FedUCB, wang_threshold

        self.s = s
        private = s["protocol"] == "dp20"
        kw = {} if s["param_bound"] is None else {"param_bound": s["param_bound"]}
        self.learner = FedUCB(
            s["M"], dim, s["T"], threshold=wang_threshold(s["T"], dim, s["M"]), schedule="adaptive",
            noise="corrected" if private else "none",
            epsilon=s["epsilon"] if private else None, delta=s["delta"] if private else None,
            alpha=s["alpha"], noise_std=s["noise_bound"], beta_scale=s["beta_scale"], **kw,
        )
        self.dim = dim

    def run(self, env, rng) -> dict:
        s, lr = self.s, self.learner
        res = lr.run(env, rng)
        d, M = self.dim, s["M"]
        syncs = res.n_syncs.astype(float)
        if s["protocol"] == "dp20":
            acc = {
                "model": "silo-LDP (claimed)", "target_epsilon": s["epsilon"], "target_delta": s["delta"],
                "epsilon": math.inf, "delta": s["delta"], "status": "invalid", "private": False,
                "theorem": "DP20 claim: Gaussian tree over synchronizations, σ² = 16 m log²(1/δ)/ε² [recalled]; "
                "NOT private: the synchronization schedule is a deterministic function of non-private "
                "local data (Zhou & Chowdhury 2023, Sec. 4, Example 4.1)",
                "notes": "ε unbounded (the schedule reveals a user with certainty); per-silo noise σ², so the "
                "server's total is Mσ²; rewards are not clipped",
            }
            k_max = int(max(1, res.n_syncs.max()))
            noise_var = float(tree_depth(k_max) * M * lr.sigma0**2)
        else:
            acc = {"model": "none", "target_epsilon": math.inf, "target_delta": 0.0, "epsilon": math.inf,
                   "delta": 0.0, "status": "none", "private": False, "theorem": "no privacy (DisLinUCB)", "notes": ""}
            noise_var = 0.0
        return {
            "regret": res.regret,
            "accounting": acc,
            "noise_variance": noise_var,
            "rounds": float(syncs.mean()),
            "uplink_bits": float(syncs.mean()) * M * (d + d * (d + 1) // 2) * 64.0,
            "messages": float(syncs.mean()) * M,
            "calibration": {"lam0": float(lr.lam0), "sigma0": float(lr.sigma0), "D": float(lr.threshold),
                            "syncs_min": int(res.n_syncs.min()), "syncs_max": int(res.n_syncs.max())},
        }


def _instance_dim(s: dict) -> int:
    if s["instance"] == "synthetic":
        return s["d"]
    from fedbandit.envs.mslr import load_mslr_instance

    return int(load_mslr_instance()["features"].shape[1])


def build_learner(config: dict):
    """Validate ``config`` and construct its learner (calibrating the privacy noise), without running.

    Returns an object with ``run(env, rng) -> dict`` and ``family`` ("fixed-batch",
    "concurrent" or "feducb").  Raises ``ValueError`` on an inapplicable pair (see
    :func:`check_applicable`) or an invalid setting.
    """
    s = _setting(config)
    dim = _instance_dim(s)
    if s["learner"] in ("fixed-batch", "super-agent", "independent"):
        return _FixedBatchRunner(s, dim)
    if s["learner"] == "concurrent-linucb":
        return _ConcurrentRunner(s, dim)
    return _FedUCBRunner(s, dim)


def side_by_side_configs(base: dict, pairs=None, *, epsilons=None, Ms=None) -> list[dict]:
    """Configurations for every (learner, protocol) pair at every ε and M.

    ``base`` holds the instance and the shared settings; ``pairs`` defaults to
    :func:`applicable_pairs`.  Non-private pairs (and independent agents) do not depend
    on ε: they get one configuration per M with ``epsilon = delta = None``.
    """
    if not isinstance(base, dict):
        raise TypeError(f"base must be a dict, got {type(base).__name__}")
    pairs = applicable_pairs() if pairs is None else [check_applicable(lr, p) for lr, p in pairs]
    epsilons = [base.get("epsilon")] if epsilons is None else list(epsilons)
    Ms = [base.get("M")] if Ms is None else list(Ms)
    out, seen = [], set()
    for M in Ms:
        for lr, p in pairs:
            for eps in epsilons:
                private = p != "non-private"
                c = dict(base, learner=lr, protocol=p, M=M)
                if private:
                    c["epsilon"] = eps
                else:
                    c["epsilon"], c["delta"] = None, None
                key = (M, lr, p, c["epsilon"])
                if key not in seen:
                    seen.add(key)
                    out.append(c)
    return out


def sweep_configs(base: dict, epsilons, Ms, epsilon, *, pairs=None, main_only=(("concurrent-linucb", "central"),)) -> list[dict]:
    """The chapter's grid: every pair at every ε (at ``base["M"]``) and at every M (at ``epsilon``).

    Pairs in ``main_only`` run only at the main point (``epsilon``, ``base["M"]``): the
    user-level central LinUCB serves the M·T users one at a time, the most expensive run.
    Configurations are not repeated (the main point belongs to both sweeps).
    """
    if not isinstance(base, dict):
        raise TypeError(f"base must be a dict, got {type(base).__name__}")
    pairs = applicable_pairs() if pairs is None else [check_applicable(lr, p) for lr, p in pairs]
    main_only = [tuple(p) for p in main_only]
    sweep = [p for p in pairs if p not in main_only]
    extra = [p for p in pairs if p in main_only]
    M0 = check_positive_int("base['M']", base.get("M"))
    out = side_by_side_configs(base, sweep, epsilons=epsilons)
    if extra:
        out += side_by_side_configs(dict(base, epsilon=epsilon), extra)
    out += [c for c in side_by_side_configs(dict(base, epsilon=epsilon), sweep, Ms=Ms) if c["M"] != M0]
    return out


def run_side_by_side(config: dict, rng) -> dict:
    """One (learner, protocol, ε, M) point on the shared instance, ``runs`` runs side by side.

    For :func:`fedbandit.experiments.grid.run_grid`.  The environment is built from the
    configuration alone (:func:`fedbandit.learners.fixed_batch.make_environment`: keys
    ``instance``, ``env_seed``, ``M``, ``K``, ``d``, ``noise_std``, ``shared_contexts``,
    ``max_arms``), so every learner and protocol with the same ``env_seed`` faces the same
    θ, contexts and reward noise; ``rng`` drives only the learner's privacy randomness.

    Parameters
    ----------
    config : dict
        ``learner`` (:data:`LEARNERS`), ``protocol`` (:data:`PROTOCOLS`), ``M``, ``T``,
        ``runs``, ``B`` (fixed-batch), ``epsilon``, ``delta`` (private protocols), the
        instance keys above, and optionally ``alpha``, ``beta_scale``, ``noise_bound`` (R),
        ``param_bound`` (S; default: each learner's own), ``reward_bound`` (Y, default 1),
        ``n_checkpoints`` and the protocol options of :func:`make_fixed_batch_protocol`.
    rng : numpy.random.Generator

    Returns
    -------
    dict
        ``t`` checkpoints, ``curve`` (runs, checkpoints) cumulative regret summed over
        agents, ``cum_regret`` (runs,), ``accounting`` (dict as
        :meth:`fedbandit.accounting.accountant.Accounting.as_dict`), ``noise_variance`` (per entry of the
        server's released sums, max over time), ``rounds`` (server releases / synchronization
        rounds), ``uplink_bits`` (total over the run and all agents), ``messages``,
        ``calibration``, ``seconds``, ``cpu_seconds``, ``peak_rss_mb``.

    Raises
    ------
    ValueError
        If the learner cannot run the protocol (naming both and listing what applies), or
        on an invalid setting.
    """
    from fedbandit.learners.fixed_batch import _max_rss_mb, make_environment

    start, cpu_start = time.perf_counter(), time.process_time()
    runner = build_learner(config)
    rng = check_rng(rng)
    s = runner.s
    env = make_environment(s, s["runs"])
    out = runner.run(env, rng)
    regret = out.pop("regret")
    T = regret.shape[1]
    cum = np.cumsum(regret, axis=1)
    n_cp = min(s["n_checkpoints"], T)
    idx = np.unique(np.linspace(T / n_cp, T, n_cp).astype(int)) - 1
    out.update(
        t=idx + 1,
        curve=cum[:, idx],
        cum_regret=cum[:, -1],
        seconds=time.perf_counter() - start,
        cpu_seconds=time.process_time() - cpu_start,
        peak_rss_mb=_max_rss_mb(),
    )
    return out


def random_play_regret(config: dict) -> np.ndarray:
    """Cumulative regret at T of playing uniformly at random on ``config``'s instance, per run.

    The same environment as :func:`run_side_by_side` (same ``env_seed``): the scale on
    which "no learning" is judged.
    """
    from fedbandit.learners.fixed_batch import make_environment

    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    instance = check_choice("instance", config.get("instance", "synthetic"), ("synthetic", "real"))
    T = check_positive_int("T", config.get("T"))
    runs = check_positive_int("runs", config.get("runs", 1))
    check_positive_int("M", config.get("M"))
    env = make_environment(dict(config, instance=instance), runs)
    total = np.zeros(env.n_runs)
    for b in env.iter_blocks(T):
        means = b.means if b.mask is None else np.where(b.mask, b.means, np.nan)
        gap = (b.best - np.nanmean(means, axis=-1)).sum(axis=(0, 2))  # (Rc,)
        total += np.broadcast_to(gap, total.shape)
    return total


# ---------------------------------------------------------------------------------------
# Audits: an empirical lower bound on ε per protocol
# ---------------------------------------------------------------------------------------


class _ProtocolFirstRelease:
    """The protocol's first release (batch k = 1: one tree leaf summed over agents), vectorized.

    A dataset is the batch's B·M user records, rows (x, y) of length d + 1; row j is agent
    j mod M's user of round j // M + 1.  ``mechanism(dataset, rng, n)`` returns the
    released (bias, Gram) prefix of n independent runs, in chunks of ``chunk`` runs.
    """

    def __init__(self, runner: _FixedBatchRunner, chunk: int):
        self.protocol = runner.learner.protocol
        self.M, self.d = runner.learner.n_agents, runner.learner.dim
        self.B = runner.learner.batch_size
        self.chunk = chunk

    def __call__(self, dataset, rng, n):
        d, M, B, p = self.d, self.M, self.B, self.protocol
        data = np.asarray(dataset, dtype=float).reshape(B, M, d + 1)
        out = []
        for start in range(0, n, self.chunk):
            c = min(self.chunk, n - start)
            x = np.broadcast_to(data[:, None, :, :d], (B, c, M, d))
            y = np.broadcast_to(data[:, None, :, d], (B, c, M))
            bias = np.einsum("brmd,brm->rmd", x, y)
            gram = np.einsum("brmi,brmj->rmij", x, x)
            p.reset(n_runs=c, rng=rng)
            users = (np.ascontiguousarray(x), np.ascontiguousarray(y)) if p.needs_user_data else None
            u, w = p.synchronize(bias, gram, users=users)
            out.append(np.concatenate([u, w.reshape(c, d * d)], axis=1))
        return np.concatenate(out, axis=0)


class _StreamFirstRelease:
    """The concurrent learner's stream: its first release (after the first ``period`` users)."""

    def __init__(self, runner: _ConcurrentRunner, chunk: int):
        self.stream = runner.stream
        self.chunk = chunk

    def __call__(self, dataset, rng, n):
        data = np.asarray(dataset, dtype=float)
        out = []
        for start in range(0, n, self.chunk):
            c = min(self.chunk, n - start)
            self.stream.reset(c, rng)
            out.append(self.stream.push(np.broadcast_to(data[:, None, :], (data.shape[0], c, data.shape[1]))))
        return np.concatenate(out, axis=0)


class _Projection:
    """Attack statistic: the release projected on the neighbours' difference (the likelihood-ratio
    direction for Gaussian noise of equal variance per entry)."""

    def __init__(self, direction):
        self.direction = np.asarray(direction, dtype=float)

    def __call__(self, batch):
        return np.asarray(batch) @ self.direction


def audit_side_by_side(config: dict, rng) -> dict:
    """Audited lower bound on ε for one (learner, protocol) pair (for ``run_grid``).

    * Fixed-batch protocols (and the super agent): the first release of the protocol as
      configured for the run (batch k = 1, a tree leaf summed over the agents), on two
      neighbouring batches of B·M users: all records zero, or user 1 of agent 1 with
      x = e₁ and y = Y (add/remove that user; a zero record contributes nothing).  Attack:
      the released bias and Gram entries projected on the difference, thresholded
      (:func:`fedbandit.audit.epsilon.audit_epsilon_split`: threshold chosen on separate trials).
      Any attack on one release is an attack on the run, so the bound is valid for the run.
    * concurrent-linucb: the same attack on the stream's first release (the first
      ``period`` users), substituting user 1's record.
    * feducb: DP20's schedule attack (:mod:`fedbandit.audit.schedule`: Alice or Tracy as a
      silo's first user decides whether all silos synchronize at t = 1) on its own small
      instance (M = 3, K = 20, d = 3, T = 32), with DP20's noise for the target (ε, δ).
    * independent: nothing is released; no audit.

    Configuration: the keys of :func:`run_side_by_side` plus ``n_trials`` (trials per
    dataset), ``n_select`` (threshold-selection trials, default n_trials // 4),
    ``confidence`` (default 0.95) and ``chunk`` (runs per vectorized call, default 250).

    Returns
    -------
    dict
        ``epsilon_lower`` (NaN when no audit applies), ``tpr``, ``fpr``, ``n_trials``,
        ``attack`` and ``note``.
    """
    from fedbandit.audit.epsilon import audit_epsilon, audit_epsilon_split

    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    n_trials = check_positive_int("n_trials", config.get("n_trials", 1000))
    confidence = check_probability("confidence", config.get("confidence", 0.95))
    chunk = check_positive_int("chunk", config.get("chunk", 250))
    rng = check_rng(rng)
    learner = check_choice("learner", config.get("learner"), LEARNERS)
    delta = 0.0 if config.get("protocol") == "non-private" else check_delta(config.get("delta"))
    if learner == "independent":
        runner = build_learner(config)  # validates
        return {"epsilon_lower": math.nan, "tpr": math.nan, "fpr": math.nan, "n_trials": 0,
                "attack": "none", "note": "n/a: nothing leaves a silo, there is no release to attack"}
    if learner == "feducb":
        from fedbandit.audit.schedule import DP20ScheduleMechanism, SyncAt, alice_threshold, alice_tracy_instance
        from fedbandit.learners.dp20 import FedUCB

        build_learner(config)  # validates
        M, K, d, T = 3, 20, 3, 32
        inst = alice_tracy_instance(M, K, d, T, seed=2023)
        private = config["protocol"] == "dp20"
        base = dict(noise="corrected", epsilon=config["epsilon"], delta=config["delta"]) if private else dict(noise="none")
        lam0 = FedUCB(M, d, T, threshold=1.0, **base).lam0
        mech = DP20ScheduleMechanism(inst, dict(base, threshold=alice_threshold(lam0)))
        res = audit_epsilon(mech, inst.dataset("tracy"), inst.dataset("alice"), SyncAt(1), 0.5, n_trials,
                            delta=delta, confidence=confidence, rng=rng, vectorized=True)
        return {"epsilon_lower": res.epsilon_lower, "tpr": res.tpr, "fpr": res.fpr, "n_trials": n_trials,
                "attack": "synchronization at t = 1 (Alice or Tracy first; DP20 chapter's instance)",
                "note": "schedule attack of Zhou & Chowdhury's Example 4.1"}
    runner = build_learner(config)
    s = runner.s
    n_select = check_positive_int("n_select", config.get("n_select", max(1, n_trials // 4)))
    Y = s["reward_bound"]
    if runner.family == "fixed-batch":
        lr = runner.learner
        d, M, B = lr.dim, lr.n_agents, lr.batch_size
        mech = _ProtocolFirstRelease(runner, chunk)
        d0 = np.zeros((B * M, d + 1))
        d1 = d0.copy()
        d1[0, 0], d1[0, d] = 1.0, Y
        direction = np.zeros(d + d * d)
        direction[0], direction[d] = Y, 1.0  # bias e₁·Y and Gram entry (0, 0)
        attack = "first tree leaf (batch 1), projection on the added user's record"
    else:
        from fedbandit.learners.concurrent_linucb import n_coordinates

        d = runner.dim
        D = n_coordinates(d)
        period = runner.stream.period
        levels = len(getattr(runner.stream, "sizes", (1,)))
        # keep one vectorized push under ~4 million numbers
        mech = _StreamFirstRelease(runner, max(1, min(chunk, 4_000_000 // (period * D * levels))))
        d0 = np.zeros((period, D))
        d1 = d0.copy()
        d1[0, 0], d1[0, d] = Y, 1.0  # x = e₁, y = Y: bias entry 0 and Gram entry (0, 0)
        direction = np.zeros(D)
        direction[0], direction[d] = Y, 1.0
        attack = f"first release (after {period} user{'s' if period > 1 else ''}), projection on the substituted record"
    res = audit_epsilon_split(mech, list(d0), list(d1), _Projection(direction), n_trials, n_select=n_select,
                              delta=delta, confidence=confidence, rng=rng, vectorized=True)
    return {"epsilon_lower": res.epsilon_lower, "tpr": res.tpr, "fpr": res.fpr, "n_trials": n_trials,
            "attack": attack, "note": f"threshold chosen on {n_select} separate trials"}


# ---------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------

#: Columns of :func:`table_rows` (keys) with their headers.
TABLE_COLUMNS = (
    ("model", "protocol / model"),
    ("learner", "learner"),
    ("trusted", "who must be trusted"),
    ("adversary", "what an adversary sees"),
    ("target", "target (ε, δ)"),
    ("achieved", "ε achieved"),
    ("status", "status"),
    ("theorem", "by"),
    ("noise_variance", "server noise var. (per entry, max over t)"),
    ("rounds", "sync rounds"),
    ("uplink_bits", "uplink bits"),
    ("regret", "regret at T (mean ± 95 % CI)"),
    ("audit", "audited ε ≥"),
)


def format_value(v, digits=3) -> str:
    """A number for the table: ``digits`` significant digits, ∞, 0 or n/a (None, NaN)."""
    if isinstance(v, str):
        return v
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if v == math.inf:
        return "∞"
    if v == 0:
        return "0"
    return f"{v:.{digits}g}"


def table_rows(configs, results, audits=None) -> list[dict]:
    """One row per configuration: the side-by-side table's columns (:data:`TABLE_COLUMNS`).

    Parameters
    ----------
    configs : list of dict
        The configurations given to :func:`run_side_by_side`.
    results : list
        Their results (one dict each, or ``run_grid``'s ``[result]`` lists; several seeds of
        the same configuration are pooled).
    audits : dict, optional
        (learner, protocol) -> result of :func:`audit_side_by_side`.

    Returns
    -------
    list of dict
        Raw values (``regret_mean``, ``regret_low``, ``regret_high``, ``epsilon_achieved``,
        ``audit_epsilon``, ...) and the formatted columns of :data:`TABLE_COLUMNS`.
    """
    if len(configs) != len(results):
        raise ValueError(f"configs and results differ in length: {len(configs)} and {len(results)}")
    audits = audits or {}
    rows = []
    for c, r in zip(configs, results):
        rs = r if isinstance(r, list) else [r]
        lr, p = check_applicable(c.get("learner"), c.get("protocol"))
        cum = np.concatenate([np.asarray(x["cum_regret"], dtype=float) for x in rs])
        mean, low, high = regret_interval(cum)
        acc = rs[0]["accounting"]
        info = pair_info(lr, p)
        au = audits.get((lr, p))
        au_eps = math.nan if au is None else float(au["epsilon_lower"])
        private = p != "non-private"
        row = {
            "learner_name": lr,
            "protocol_name": p,
            "label": pair_label(lr, p),
            "epsilon": c.get("epsilon"),
            "delta": c.get("delta"),
            "M": c.get("M"),
            "epsilon_achieved": float(acc["epsilon"]),
            "status_raw": acc["status"],
            "noise_variance_raw": float(rs[0]["noise_variance"]),
            "rounds_raw": float(rs[0]["rounds"]),
            "uplink_bits_raw": float(rs[0]["uplink_bits"]),
            "regret_mean": mean,
            "regret_low": low,
            "regret_high": high,
            "audit_epsilon": au_eps,
            "model": info["model"] if lr == "independent" else info["label"],
            "learner": LEARNER_INFO[lr]["label"],
            "trusted": info["trusted"],
            "adversary": info["adversary"],
            "target": f"({format_value(c['epsilon'])}, {format_value(c['delta'])})" if private else "—",
            "achieved": format_value(float(acc["epsilon"])),
            "status": acc["status"],
            "theorem": info["reference"],
            "noise_variance": format_value(float(rs[0]["noise_variance"])),
            "rounds": format_value(float(rs[0]["rounds"])),
            "uplink_bits": format_value(float(rs[0]["uplink_bits"])),
            "regret": f"{mean:.4g} [{low:.4g}, {high:.4g}]" if not math.isnan(low) else f"{mean:.4g}",
            "audit": "n/a" if au is None or math.isnan(au_eps) else f"{au_eps:.2f}",
        }
        rows.append(row)
    return rows


def markdown_table(rows, columns=TABLE_COLUMNS) -> str:
    """Render :func:`table_rows` as a Markdown table (``columns``: (key, header) pairs)."""
    head = "| " + " | ".join(h for _, h in columns) + " |"
    sep = "|" + "---|" * len(columns)
    body = ["| " + " | ".join(str(r[k]).replace("|", "\\|") for k, _ in columns) + " |" for r in rows]
    return "\n".join([head, sep] + body)

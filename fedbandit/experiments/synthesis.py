"""Every privacy model side by side on one linear contextual bandit (the synthesis chapter).

The source papers each compare a few privacy models on their own instance with their own
accounting.  Every federated learner of the book reaches the server only through a
privacy protocol (:mod:`fedbandit.protocols`), so one instance and one target (ε, δ) are
run here under every model: a *model* is a (learner, protocol, options) triple of
:data:`MODELS`, every configuration is run by :func:`fedbandit.experiments.run_config`,
and nothing here re-implements a learner or a mechanism.

Which protocol a learner can take is not written down by hand: :func:`applicability`
tries to build every (learner, protocol) pair on the chapter's instance and records the
refusal of the learner or the protocol, with its reason (:func:`applicability_table`).

:func:`audit_side_by_side` audits each model with :mod:`fedbandit.audit`: the known-optimal
test on the releases of one user where the noise law is known (the Gaussian and discrete
Gaussian tree protocols, :func:`fedbandit.audit.tight_audit`), an end-to-end audit of the
learner on a small instance otherwise, DP20's schedule attack for DP20; each with the power
check of a broken variant.  :func:`end_to_end_audit` runs one audit of
:func:`fedbandit.audit.end_to_end_specs` (for ``run_grid``).  :func:`table_rows` and
:func:`markdown_table` build the table.

One neighbouring relation for the whole comparison (:data:`COMPARISON_RELATION`): every
model is calibrated and accounted under add/remove one user (the concurrent shuffle
protocols, natively "replace", account add/remove as substituting the null record, with the
same noise); :func:`accounting_under` reports the other relation for the table's note.
"""

from __future__ import annotations

import inspect
import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from fedbandit._validation import check_delta, check_positive_int, check_probability, check_rng
from fedbandit.accounting.accountant import necessary_lower_bound
from fedbandit.accounting.events import ClaimedEvent, check_relation
from fedbandit.audit.end_to_end import EndToEndSpec, audit_end_to_end, end_to_end_specs, pair_end_to_end_specs
from fedbandit.audit.epsilon import audit_epsilon, epsilon_lower_bound, min_trials
from fedbandit.audit.schedule import SyncAt, alice_tracy_instance, dp20_schedule_mechanism
from fedbandit.audit.tight import tight_audit
from fedbandit.envs.factory import make_environment
from fedbandit.experiments.runner import config_names
from fedbandit.experiments.statistics import regret_interval
from fedbandit.learners.registry import available_learners, learner_class
from fedbandit.protocols.registry import available, describe
from fedbandit.protocols.statistics import CentralTree, DiscreteGaussianTree, GaussianTree, StatisticsProtocol

__all__ = [
    "COMPARISON_RELATION",
    "accounting_under",
    "end_to_end_audit",
    "Model",
    "MODELS",
    "BEYOND_MODELS",
    "model",
    "model_of",
    "applicability",
    "applicability_table",
    "model_config",
    "side_by_side_configs",
    "sweep_configs",
    "random_play_regret",
    "audit_side_by_side",
    "table_rows",
    "markdown_table",
    "format_value",
    "TABLE_COLUMNS",
    "pair_audit_rows",
    "PAIR_AUDIT_COLUMNS",
    "claim_lower_bound",
]


@dataclass(frozen=True)
class Model:
    """One row of the side-by-side comparison: a learner with a protocol and its options.

    ``key`` names the row; ``options`` are protocol (or learner) parameters fixed for the
    row (for example ``k=1`` of the concurrent shuffle); ``adversary`` says what an
    adversary of this model sees.
    """

    key: str
    learner: str
    protocol: str | None
    label: str
    adversary: str
    options: tuple = field(default_factory=tuple)

    @property
    def private(self) -> bool:
        return self.protocol not in (None, "non-private")

    def config_entries(self) -> dict:
        out = {"learner": self.learner, "tag": self.key}
        if self.protocol is not None:
            out["protocol"] = self.protocol
        out.update(dict(self.options))
        return out


#: The rows of the chapter, in table order.
MODELS = (
    Model("fixed-batch/non-private", "fixed-batch", "non-private", "non-private",
          "server: every agent's exact batch sums Σxy, Σxxᵀ"),
    Model("independent", "independent", None, "independent agents", "nothing (no messages)"),
    Model("super-agent/non-private", "super-agent", "non-private", "super agent, non-private",
          "server: every user's exact record, after every round"),
    Model("feducb/non-private", "feducb", "non-private", "FedUCB, non-private (DisLinUCB)",
          "server: every agent's exact sums, at data-dependent synchronizations"),
    Model("fixed-batch/central", "fixed-batch", "central", "central DP (trusted server)",
          "server: exact batch sums (trusted); others: the server's noisy tree prefix sums"),
    Model("super-agent/central", "super-agent", "central", "super agent, central DP",
          "server: every user's exact record (trusted); others: the central tree's noisy prefix sums"),
    Model("concurrent-linucb/central", "concurrent-linucb", "central", "user-level LinUCB, central DP",
          "server: every user's exact record (trusted); others: the noisy prefix sums"),
    Model("fixed-batch/silo-ldp", "fixed-batch", "silo-ldp", "silo-level LDP",
          "server: each agent's noisy tree p-sums, with sender"),
    Model("fixed-batch/sdp-amplification", "fixed-batch", "sdp-amplification", "shuffle DP, amplification",
          "server: the M agents' noisy p-sums, anonymized by the shuffler", (("force", True),)),
    Model("fixed-batch/sdp-vector-sum", "fixed-batch", "sdp-vector-sum", "shuffle DP, vector sum",
          "server: the shuffled multiset of all users' randomized bits, per tree node"),
    Model("concurrent-linucb/concurrent-shuffle-k1", "concurrent-linucb", "concurrent-shuffle",
          "concurrent shuffle, k = 1", "server: the shuffled randomized-response bits of every batch of b₁ users",
          (("k", 1), ("relation", "add-remove"))),
    Model("concurrent-linucb/concurrent-shuffle-klog", "concurrent-linucb", "concurrent-shuffle",
          "concurrent shuffle, k = log n",
          "server: per shuffler, the shuffled randomized-response bits of its dyadic batches",
          (("k", "log"), ("relation", "add-remove"))),
    Model("fixed-batch/ddg-secagg", "fixed-batch", "ddg-secagg", "distributed discrete Gaussian + SecAgg",
          "server: only the modular sum of the agents' noisy, rounded p-sums; network: masked vectors"),
    Model("feducb/dp20", "feducb", "dp20", "DP20 (not private)",
          "every silo: *when* synchronizations happen (data-dependent); server: each silo's noisy p-sums"),
)

#: Rows beyond the papers (issue 24): the fixed-batch learner with the factorized releases of the
#: prefix-sum matrix and with the full tree and Honaker's estimator, at the tree's (ε, δ).  Rows of the
#: side-by-side table at its main point; not in :data:`MODELS` (the chapter's sweeps and audits of the
#: papers' models).
BEYOND_MODELS = (
    Model("fixed-batch/central-honaker", "fixed-batch", "central-honaker", "central DP, full tree + Honaker",
          "server: exact batch sums (trusted); others: the server's Honaker estimates of the prefix sums"),
    Model("fixed-batch/central-mf", "fixed-batch", "central-mf", "central DP, square-root factorization",
          "server: exact batch sums (trusted); others: the server's factorized noisy prefix sums"),
    Model("fixed-batch/central-mf-banded", "fixed-batch", "central-mf-banded", "central DP, banded square root",
          "server: exact batch sums (trusted); others: the server's factorized noisy prefix sums"),
    Model("fixed-batch/silo-ldp-honaker", "fixed-batch", "silo-ldp-honaker", "silo-level LDP, full tree + Honaker",
          "server: each agent's noisy nodes of the full tree, with sender"),
    Model("fixed-batch/silo-ldp-mf", "fixed-batch", "silo-ldp-mf", "silo-level LDP, square-root factorization",
          "server: each agent's noisy factorized prefix sums, with sender"),
    Model("fixed-batch/silo-ldp-mf-banded", "fixed-batch", "silo-ldp-mf-banded", "silo-level LDP, banded square root",
          "server: each agent's noisy factorized prefix sums, with sender"),
)

_BY_KEY = {m.key: m for m in MODELS + BEYOND_MODELS}

#: The neighbouring relation every model of the comparison is calibrated and accounted under.
COMPARISON_RELATION = "add-remove"


def model(key: str) -> Model:
    """The :class:`Model` of a row key."""
    if not isinstance(key, str) or key not in _BY_KEY:
        raise ValueError(f"unknown model key {key!r:.80}; models: {', '.join(_BY_KEY)}")
    return _BY_KEY[key]


def model_of(config: dict) -> Model:
    """The model a configuration of :func:`model_config` belongs to (by its ``tag``)."""
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    if "tag" not in config:
        raise ValueError(f"config has no 'tag' (the model key model_config writes); it has {sorted(config)}")
    return model(config["tag"])


# ---------------------------------------------------------------------------------------
# Applicability: derived from what each learner and protocol accept
# ---------------------------------------------------------------------------------------


def _try_build(config: dict) -> str:
    """"" if the configuration's learner and protocol can be constructed, else the refusal's message."""
    try:
        env = make_environment(dict(config, runs=1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            learner_class(config["learner"]).from_config(config, env)
    except (ValueError, TypeError) as exc:
        return str(exc)
    return ""


def applicability(base: dict, learners=None, protocols=None) -> dict:
    """{(learner, protocol): reason} for every pair on ``base``'s instance ("" if it applies).

    Each pair is *constructed* (learner and protocol, noise calibrated, no run): a pair
    applies exactly when neither refuses it, and the reason is the refusal's own message.
    """
    learners = [lr for lr in (learners or available_learners()) if lr in {m.learner for m in MODELS}]
    protocols = protocols or available(kind="statistics")
    out = {}
    for lr in learners:
        for p in protocols:
            c = dict(base, learner=lr, protocol=p)
            params = describe(p).parameters
            for key in ("epsilon", "delta"):
                if key not in params:
                    c.pop(key, None)
            if p == "sdp-amplification":
                c["force"] = True
            out[(lr, p)] = _try_build(c)
    return out


def applicability_table(base: dict) -> str:
    """Markdown: learners × statistics protocols, ✓ where the pair can be built on ``base``."""
    table = applicability(base)
    learners = list(dict.fromkeys(lr for lr, _ in table))
    protocols = list(dict.fromkeys(p for _, p in table))
    rows = ["| learner | " + " | ".join(protocols) + " |", "|---|" + "---|" * len(protocols)]
    for lr in learners:
        rows.append(f"| {lr} | " + " | ".join("✓" if not table[(lr, p)] else "" for p in protocols) + " |")
    return "\n".join(rows)


# ---------------------------------------------------------------------------------------
# Configurations
# ---------------------------------------------------------------------------------------


def model_config(base: dict, m: Model, *, epsilon=None, M=None) -> dict:
    """The configuration of model ``m`` on ``base``'s instance (ε and M overriding base's)."""
    if not isinstance(base, dict):
        raise TypeError(f"base must be a dict, got {type(base).__name__}")
    c = dict(base)
    c.update(m.config_entries())
    if M is not None:
        c["M"] = M
    # The same learning problem for every learner: the reward-noise level R in the radius
    # (0.5 on the synthetic instance, whose noise is N(0, 0.5²); 1 on the real one) and,
    # but for DP20 as written (which does not clip), rewards clipped to [−1, 1] (the vector
    # sum needs |y| ≤ 1).
    c.setdefault("noise_bound", 0.5 if c.get("instance", "synthetic") == "synthetic" else 1.0)
    if m.learner == "feducb":
        c.pop("reward_bound", None)
    else:
        c.setdefault("reward_bound", 1.0)
    if m.private:
        c["epsilon"] = base.get("epsilon") if epsilon is None else epsilon
    else:
        c.pop("epsilon", None)
        c.pop("delta", None)
    return c


def side_by_side_configs(base: dict, models=None, *, epsilons=None, Ms=None) -> list[dict]:
    """Configurations for every model at every ε and M (non-private models: one per M)."""
    models = MODELS if models is None else [model(k) if isinstance(k, str) else k for k in models]
    epsilons = [base.get("epsilon")] if epsilons is None else list(epsilons)
    Ms = [base.get("M")] if Ms is None else list(Ms)
    out, seen = [], set()
    for M in Ms:
        for m in models:
            for eps in (epsilons if m.private else [None]):
                key = (M, m.key, eps)
                if key not in seen:
                    seen.add(key)
                    out.append(model_config(base, m, epsilon=eps, M=M))
    return out


def sweep_configs(base: dict, epsilons, Ms, epsilon, *, models=None, main_only=("concurrent-linucb/central",)) -> list[dict]:
    """The chapter's grid: every model at every ε (at ``base["M"]``) and at every M (at ``epsilon``).

    Models in ``main_only`` run only at the main point (``epsilon``, ``base["M"]``): the
    user-level central LinUCB serves the M·T users one at a time, the most expensive run.
    """
    models = MODELS if models is None else [model(k) if isinstance(k, str) else k for k in models]
    main_only = set(main_only)
    sweep = [m for m in models if m.key not in main_only]
    extra = [m for m in models if m.key in main_only]
    M0 = check_positive_int("base['M']", base.get("M"))
    out = side_by_side_configs(base, sweep, epsilons=epsilons)
    if extra:
        out += side_by_side_configs(dict(base, epsilon=epsilon), extra)
    out += [c for c in side_by_side_configs(dict(base, epsilon=epsilon), sweep, Ms=Ms) if c["M"] != M0]
    return out


def random_play_regret(config: dict) -> np.ndarray:
    """Cumulative regret at T of playing uniformly at random on ``config``'s instance, per run.

    The same environment as every model's run (same ``env_seed``): the scale on which "no
    learning" is judged.
    """
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    T = check_positive_int("T", config.get("T"))
    env = make_environment(config)
    total = np.zeros(env.n_runs)
    for b in env.iter_blocks(T):
        means = b.means if b.mask is None else np.where(b.mask, b.means, np.nan)
        gap = (b.best - np.nanmean(means, axis=-1)).sum(axis=(0, 2))  # (Rc,)
        total += np.broadcast_to(gap, total.shape)
    return total


# ---------------------------------------------------------------------------------------
# Accounting under the other relation
# ---------------------------------------------------------------------------------------


def _learner_of(config: dict):
    cfg = {k: v for k, v in config.items() if k not in ("n_trials", "n_select", "confidence", "chunk")}
    if "learner" not in cfg:
        raise ValueError(f"config must give 'learner'; it has {sorted(cfg)}")
    cls = learner_class(cfg["learner"])
    with config_names(cfg):  # a refusal of horizon, n_agents, ... also names T, M, ...
        env = make_environment(dict(cfg, runs=1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return cls.from_config(cfg, env)


def claim_lower_bound(config: dict) -> dict:
    """The exact lower bound on ε that a cited theorem's claim must survive, for one configuration.

    A claimed guarantee (:class:`~fedbandit.accounting.events.ClaimedEvent`) carries a necessary
    condition: releases whose exact ε no valid proof can beat.  For shuffle amplification it is
    the de-shuffling attack on the adversary's worst data
    (:func:`fedbandit.accounting.deshuffle.deshuffled_event_epsilon`, attacked on the code by
    :func:`fedbandit.audit.deshuffle_audit`); the accountant reports "invalid" wherever this bound
    exceeds the target.

    Returns
    -------
    dict
        ``epsilon`` (NaN where the run's guarantee is not a claim with a necessary condition),
        ``delta``, ``why`` (the accountant's sentence), ``target_epsilon``.
    """
    learner = _learner_of(config)
    p = getattr(learner, "protocol", None)
    event = p.event() if p is not None and getattr(p, "private", False) else None
    while event is not None and not isinstance(event, ClaimedEvent) and hasattr(event, "event"):
        event = event.event  # a claim under conditions (ConditionalEvent) or repeated (SelfComposedEvent)
    delta = float(config.get("delta", math.nan))
    if not isinstance(event, ClaimedEvent) or event.necessary is None:
        return {"epsilon": math.nan, "delta": delta, "why": "", "target_epsilon": float(config.get("epsilon", math.inf))}
    eps, why = necessary_lower_bound(event.necessary, check_delta("delta", config["delta"]))
    return {"epsilon": float(eps), "delta": delta, "why": why, "target_epsilon": float(config["epsilon"])}


def accounting_under(config: dict, relation: str) -> dict:
    """The accounting of ``config``'s run under ``relation`` ("add-remove" or "replace"), as a dict.

    The learner is built as :func:`fedbandit.experiments.run_config` builds it (no run); its
    ``accounting(relation)`` where it takes one, else its protocol's.  Under a relation other
    than the calibrated one the target is usually missed: the status is then "invalid" and
    ``epsilon`` is the ε the book's accounting establishes under that relation.
    """
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    relation = check_relation(relation)
    learner = _learner_of(config)
    acc = getattr(learner, "accounting", None)
    if acc is not None and "relation" in inspect.signature(acc).parameters:
        return acc(relation).as_dict()
    proto = getattr(learner, "protocol", None)
    if proto is None or not getattr(learner, "communicate", True) or model_of(config).learner == "feducb":
        return (acc() if acc is not None else proto.accounting()).as_dict()
    return proto.accounting(relation).as_dict()


# ---------------------------------------------------------------------------------------
# Audits: an empirical lower bound on ε per model
# ---------------------------------------------------------------------------------------

#: Small instances of the end-to-end audits of the models without a known noise law.
_E2E_SETTING = {"fixed-batch": dict(M=3, T=20, B=5, K=4, d=2, seed=0),
                "concurrent-linucb": dict(M=3, T=16, K=4, d=1, seed=0),
                # the vector sum's power check removes the binomial noise; its users' randomized rounding
                # is all that is left, so the instance is small enough for one user to stand out
                "sdp-vector-sum": dict(M=2, T=8, B=2, K=4, d=2, seed=0)}


#: The power check's noise cut of the end-to-end audits of :data:`BEYOND_MODELS` (a twentieth, as the
#: assembled pair audits' weakest cut, :func:`fedbandit.audit.end_to_end.pair_end_to_end_specs`).
_BEYOND_NOISE_FACTOR = 0.05


def _deterministic_leak(n_trials, delta, confidence, what):
    eps, _, _ = epsilon_lower_bound(n_trials, n_trials, 0, n_trials, delta=delta, confidence=confidence)
    return {"epsilon_lower": eps, "tpr": 1.0, "fpr": 0.0, "n_trials": n_trials, "kind": "exact release",
            "claimed_epsilon": math.inf, "ratio": 0.0, "exact_epsilon": math.inf, "broken": "",
            "broken_epsilon_lower": math.nan, "power_shown": False, "status": "none",
            "attack": f"the exact release ({what}): every trial tells the inputs apart",
            "note": "no noise: the bound is limited only by the number of trials"}


def audit_side_by_side(config: dict, rng) -> dict:
    """Audited lower bound on ε for one model (for ``run_grid``), with its power check.

    * Gaussian and discrete-Gaussian tree protocols (central, silo-level LDP, amplification's
      shuffled messages -- attacked through their sum --, DDG with secure aggregation), for
      the fixed-batch learner, the super agent and the user-level central LinUCB: the
      known-optimal test on the releases that contain one user, on the protocol *as
      configured for the run* (:func:`fedbandit.audit.tight_audit`), with millions of trials
      (``n_trials``) and the noise scaled down 4× as the power check (4·sqrt(M)× for shuffled
      messages, whose sum carries sqrt(M) times one message's noise);
    * the vector sum and the concurrent shuffle (no known law): an end-to-end audit of the
      learner on a small instance at the same (ε, δ) (:func:`fedbandit.audit.audit_end_to_end`,
      ``e2e_trials`` trials; so are the rows of :data:`BEYOND_MODELS`, whose power check cuts the noise
      to a twentieth);
    * DP20's FedUCB: the schedule attack of Zhou & Chowdhury's Example 4.1
      (:mod:`fedbandit.audit.schedule`) on its own small instance;
    * no privacy: the exact release; independent agents: nothing is released.

    Configuration: a configuration of :func:`model_config` plus ``n_trials``,
    ``e2e_trials`` (default 6000), ``confidence`` (default 0.95) and ``check_runs`` (runs
    of the tight audits' noise-law check, default 1000).  Returns
    :meth:`fedbandit.audit.AuditReport.as_dict` plus ``note``.
    """
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    cfg = dict(config)
    n_trials = check_positive_int("n_trials", cfg.pop("n_trials", 1000))
    e2e_trials = check_positive_int("e2e_trials", cfg.pop("e2e_trials", 6000))
    confidence = check_probability("confidence", cfg.pop("confidence", 0.95))
    check_runs = check_positive_int("check_runs", cfg.pop("check_runs", 1000))
    for k in ("chunk", "n_select"):
        cfg.pop(k, None)
    rng = check_rng("rng", rng)
    m = model_of(cfg)
    delta = check_delta("delta", cfg["delta"]) if m.private else 0.0
    if m.learner == "independent":
        return {"epsilon_lower": math.nan, "tpr": math.nan, "fpr": math.nan, "n_trials": 0, "kind": "none",
                "claimed_epsilon": 0.0, "ratio": math.nan, "exact_epsilon": 0.0, "broken": "",
                "broken_epsilon_lower": math.nan, "power_shown": False, "status": "verified",
                "attack": "none", "note": "n/a: nothing leaves a silo, there is no release to attack"}
    if m.learner == "feducb":
        inst = alice_tracy_instance(3, 20, 3, 32, seed=2023)
        mech = dp20_schedule_mechanism(inst, epsilon=cfg.get("epsilon"), delta=cfg.get("delta"),
                                       private=m.protocol == "dp20")
        res = audit_epsilon(mech, inst.dataset("tracy"), inst.dataset("alice"), SyncAt(1), 0.5, n_trials,
                            delta=delta, confidence=confidence, rng=rng, vectorized=True)
        claim = float(cfg["epsilon"]) if m.private else math.inf
        return {"epsilon_lower": res.epsilon_lower, "tpr": res.tpr, "fpr": res.fpr, "n_trials": n_trials,
                "kind": "schedule", "claimed_epsilon": claim, "ratio": res.epsilon_lower / claim if m.private else 0.0,
                "exact_epsilon": math.inf, "broken": "", "broken_epsilon_lower": math.nan, "power_shown": False,
                "status": "invalid" if m.private else "none",
                "attack": "synchronization at t = 1 (Alice or Tracy first; DP20 chapter's instance)",
                "note": "schedule attack of Zhou & Chowdhury's Example 4.1"}
    if not m.private:
        return _deterministic_leak(n_trials, delta, confidence, "exact sums")
    learner = _learner_of(cfg)
    p = learner.protocol

    known = isinstance(p, StatisticsProtocol) and (
        isinstance(p.analyzer, CentralTree) or isinstance(p.randomizer, (GaussianTree, DiscreteGaussianTree)))
    if known:
        ddg = isinstance(p.randomizer, DiscreteGaussianTree)
        # the shuffled messages are attacked through their sum, whose noise is sqrt(M) times one
        # message's: the power check cuts the noise to a quarter of one message's
        factor = 0.25 / math.sqrt(p.n_agents) if p.intermediary.view == "multiset" else 0.25
        rep = tight_audit(p, n_trials if not ddg else max(min_trials_for(confidence), n_trials // 5), rng=rng,
                          confidence=confidence, check_runs=max(50, check_runs // (10 if ddg else 1)),
                          broken_factor=factor, name=m.key)
        note = ("the known-optimal test on the releases of one user, the protocol as configured for the run"
                + ("; the shuffled messages attacked through their sum" if p.intermediary.view == "multiset" else ""))
    else:
        pp = {k: cfg[k] for k in ("epsilon", "delta", "k", "relation", "split", "constant", "force", "variant",
                                  "calibration") if k in cfg}
        fam_setting = _E2E_SETTING.get(m.protocol, _E2E_SETTING[m.learner])
        # the power check: the vector sum without its binomial noise; randomized response at a
        # hundredth of its flip probability (a tenth of its noise); the rows beyond the papers at a
        # twentieth of their noise (at ε = 4 on this small instance a tenth of the central tree's or
        # the central full tree's noise audits just below the claim with 3000 trials: 3.8)
        factor = 0.0 if m.protocol == "sdp-vector-sum" else (_BEYOND_NOISE_FACTOR if m in BEYOND_MODELS else 0.1)
        spec = EndToEndSpec(m.key, "linear", m.learner, m.protocol, pp, {}, fam_setting, noise_factor=factor)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rep = audit_end_to_end(spec, e2e_trials, rng=rng, confidence=confidence)
        note = f"end to end on a small instance ({', '.join(f'{k}={v}' for k, v in fam_setting.items() if k != 'seed')})"
    out = rep.as_dict()
    out["note"] = note
    return out


def min_trials_for(confidence):
    return min_trials(confidence)


def end_to_end_audit(config: dict, rng) -> dict:
    """One audit of :func:`fedbandit.audit.end_to_end_specs` or :func:`~fedbandit.audit.end_to_end.pair_end_to_end_specs` by name (for ``run_grid``).

    Configuration: ``spec`` (the audit's name), ``n_trials``, ``confidence`` (default 0.95),
    and the specs' claim ``epsilon``, ``delta`` (defaults 1, 1e-5).  Returns
    :meth:`fedbandit.audit.AuditReport.as_dict`.
    """
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    claim = dict(epsilon=config.get("epsilon", 1.0), delta=config.get("delta", 1e-5))
    name = config.get("spec")
    specs = {s.name: s for s in end_to_end_specs(**claim)}
    if isinstance(name, str) and name not in specs:  # the assembled pairs' audits (building them replays every pair: only when needed)
        specs.update({s.name: s for s in pair_end_to_end_specs(**claim)})
    if not isinstance(name, str) or name not in specs:
        raise ValueError(f"unknown end-to-end audit config['spec']={name!r:.80}; audits: {', '.join(specs)}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = audit_end_to_end(specs[name], check_positive_int("n_trials", config.get("n_trials", 6000)), rng=rng,
                               confidence=check_probability("confidence", config.get("confidence", 0.95)))
    return rep.as_dict()


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
    ("achieved", "ε achieved (add/remove)"),
    ("achieved_other", "ε under replacement"),
    ("status", "status"),
    ("theorem", "by"),
    ("noise_variance", "server noise var. (per entry, max over t)"),
    ("rounds", "sync rounds"),
    ("uplink_bits", "uplink bits"),
    ("regret", "regret at T (mean ± 95 % CI)"),
    ("audit", "audited ε ≥"),
    ("ratio", "audited / claimed"),
)


def format_value(v, digits=3) -> str:
    """A number for the table: ``digits`` significant digits, ∞, 0 or n/a (None, NaN)."""
    digits = check_positive_int("digits", digits, max_value=17, reason="float64 has 17 significant digits")
    if not (v is None or isinstance(v, (str, int, float, np.integer, np.floating))) or isinstance(v, (bool, np.bool_)):
        raise TypeError(f"v must be a number, a str or None, got {v!r:.80} of type {type(v).__name__}")
    if isinstance(v, str):
        return v
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if v == math.inf:
        return "∞"
    if v == 0:
        return "0"
    return f"{v:.{digits}g}"


def table_rows(configs, results, audits=None, other=None) -> list[dict]:
    """One row per configuration: the side-by-side table's columns (:data:`TABLE_COLUMNS`).

    ``results`` are the :class:`~fedbandit.learners.RunResult` of the configurations (or
    ``run_grid``'s ``[result]`` lists; several seeds are pooled); ``audits`` maps a model
    key to the result of :func:`audit_side_by_side`; ``other`` maps a model key to its
    accounting under the other relation (:func:`accounting_under`).
    """
    if len(configs) != len(results):
        raise ValueError(f"configs and results differ in length: {len(configs)} and {len(results)}")
    audits = audits or {}
    other = other or {}
    rows = []
    for c, r in zip(configs, results):
        rs = r if isinstance(r, list) else [r]
        m = model_of(c)
        cum = np.concatenate([np.asarray(x.cum_regret, dtype=float) for x in rs])
        mean, low, high = regret_interval(cum)
        first = rs[0]
        acc = first.accounting
        au = audits.get(m.key)
        au_eps = math.nan if au is None else float(au["epsilon_lower"])
        ratio = math.nan if au is None else float(au.get("ratio", math.nan))
        oth = other.get(m.key)
        oth_eps = math.nan if oth is None else float(oth["epsilon"])
        rounds = float(np.mean(first.communication.rounds))
        bits = float(first.communication.bits)
        rows.append({
            "key": m.key,
            "label": m.label,
            "epsilon": c.get("epsilon"),
            "delta": c.get("delta"),
            "M": c.get("M"),
            "epsilon_achieved": float(acc.epsilon),
            "status_raw": acc.status,
            "noise_variance_raw": float(first.noise_variance),
            "rounds_raw": rounds,
            "uplink_bits_raw": bits,
            "regret_mean": mean,
            "regret_low": low,
            "regret_high": high,
            "audit_epsilon": au_eps,
            "audit_ratio": ratio,
            "epsilon_other": oth_eps,
            "model": m.label,
            "learner": m.learner,
            "trusted": first.calibration.get("trusted", acc.model) or "—",
            "adversary": m.adversary,
            "target": f"({format_value(c.get('epsilon'))}, {format_value(c.get('delta'))})" if m.private else "—",
            "achieved": format_value(float(acc.epsilon)),
            "achieved_other": "n/a" if oth is None else format_value(oth_eps),
            "status": acc.status,
            "theorem": describe(m.protocol).reference if m.protocol else "no release",
            "noise_variance": format_value(float(first.noise_variance)),
            "rounds": format_value(rounds),
            "uplink_bits": format_value(bits),
            "regret": f"{mean:.4g} [{low:.4g}, {high:.4g}]" if not math.isnan(low) else f"{mean:.4g}",
            "audit": "n/a" if au is None or math.isnan(au_eps) else f"{au_eps:.2f}",
            "ratio": "n/a" if math.isnan(ratio) else f"{ratio:.2f}",
        })
    return rows


def markdown_table(rows, columns=TABLE_COLUMNS) -> str:
    """Render :func:`table_rows` as a Markdown table (``columns``: (key, header) pairs)."""
    head = "| " + " | ".join(h for _, h in columns) + " |"
    sep = "|" + "---|" * len(columns)
    body = ["| " + " | ".join(str(r[k]).replace("|", "\\|") for k, _ in columns) + " |" for r in rows]
    return "\n".join([head, sep] + body)


#: Columns of :func:`pair_audit_rows` (keys) with their headers.
PAIR_AUDIT_COLUMNS = (
    ("pair", "learner / protocol"),
    ("audit", "strongest audit (where)"),
    ("claim", "ε claimed there (status)"),
    ("lower", "audited ε ≥"),
    ("ratio", "audited / claimed"),
    ("power", "power check: broken variant's bound"),
    ("replay", "replay contract"),
)


def _audit_strength(a: dict) -> float:
    """How strongly an audit bites: audited/claimed, or the bound itself where nothing is claimed."""
    lower = a.get("epsilon_lower", math.nan)
    if not math.isfinite(lower):
        return -math.inf
    claim = a.get("claimed_epsilon", math.nan)
    if math.isfinite(claim) and claim > 0:
        return lower / claim
    return lower  # nothing claimed (no privacy): the larger bound shows the more


def pair_audit_rows(pairs, audits, replay=None) -> list[dict]:
    """One row per (learner, protocol) pair: the strongest attack of the book on it, next to the claim.

    Parameters
    ----------
    pairs : sequence of (learner, protocol or None)
        The pairs to report (e.g. :func:`fedbandit.audit.replay.replay_pairs` plus the learners
        that take no protocol).
    audits : iterable of dict
        Audit reports (:meth:`fedbandit.audit.AuditReport.as_dict`, or
        :func:`audit_side_by_side`'s dicts) with ``learner``, ``protocol`` and ``source`` (where
        in the book the audit ran) added.  A pair's strongest audit is the one with the largest
        audited/claimed ratio (the largest bound where nothing is claimed).
    replay : dict, optional
        ``(learner, protocol) -> bool``: whether the pair keeps the counterfactual replay
        contract (:func:`fedbandit.audit.replay.replay_check`).

    Returns
    -------
    list of dict
        Keys of :data:`PAIR_AUDIT_COLUMNS` (text) plus ``learner``, ``protocol``, ``n_audits``,
        ``best`` (the strongest audit's dict, or None).
    """
    by_pair: dict = {}
    for a in audits:
        if not isinstance(a, dict) or "learner" not in a or "protocol" not in a:
            raise TypeError("audits must be dicts with 'learner' and 'protocol' keys (and the audit report's fields)")
        by_pair.setdefault((a["learner"], a["protocol"]), []).append(a)
    replay = {} if replay is None else dict(replay)
    rows = []
    for pair in pairs:
        learner, protocol = pair
        found = by_pair.get((learner, protocol), [])
        best = max(found, key=_audit_strength) if found else None
        row = {"learner": learner, "protocol": protocol, "n_audits": len(found), "best": best,
               "pair": learner if protocol is None else f"{learner} / {protocol}"}
        if best is None:
            row.update(audit="none of its own", claim="—", lower="—", ratio="—", power="—")
        else:
            row["audit"] = f"{best.get('kind', '')}: {best.get('source', '')}".strip(": ")
            row["claim"] = f"{format_value(best.get('claimed_epsilon', math.nan))} ({best.get('status', '')})"
            row["lower"] = format_value(best.get("epsilon_lower", math.nan), 3)
            claim = best.get("claimed_epsilon", math.nan)
            finite = math.isfinite(claim) and claim > 0 and math.isfinite(best.get("epsilon_lower", math.nan))
            row["ratio"] = format_value(best["epsilon_lower"] / claim, 2) if finite else "—"
            if best.get("broken"):
                shown = "shown" if best.get("power_shown") else "**not shown**"
                row["power"] = f"{best['broken']}: {format_value(best.get('broken_epsilon_lower', math.nan), 3)} ({shown})"
            else:
                row["power"] = "— (nothing to break)"
        row["replay"] = ("holds" if replay[pair] else "**violated**") if pair in replay else "—"
        rows.append(row)
    return rows

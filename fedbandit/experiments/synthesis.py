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

:func:`audit_side_by_side` attacks each model's first release (or DP20's schedule) with
:mod:`fedbandit.audit`; :func:`table_rows` and :func:`markdown_table` build the table.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from fedbandit._validation import check_delta, check_positive_int, check_probability, check_rng
from fedbandit.experiments.statistics import regret_interval

__all__ = [
    "Model",
    "MODELS",
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
          (("k", 1),)),
    Model("concurrent-linucb/concurrent-shuffle-klog", "concurrent-linucb", "concurrent-shuffle",
          "concurrent shuffle, k = log n",
          "server: per shuffler, the shuffled randomized-response bits of its dyadic batches", (("k", "log"),)),
    Model("fixed-batch/ddg-secagg", "fixed-batch", "ddg-secagg", "distributed discrete Gaussian + SecAgg",
          "server: only the modular sum of the agents' noisy, rounded p-sums; network: masked vectors"),
    Model("feducb/dp20", "feducb", "dp20", "DP20 (not private)",
          "every silo: *when* synchronizations happen (data-dependent); server: each silo's noisy p-sums"),
)

_BY_KEY = {m.key: m for m in MODELS}


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
    from fedbandit.envs.factory import make_environment
    from fedbandit.learners.registry import learner_class

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
    from fedbandit.learners.registry import available_learners
    from fedbandit.protocols.registry import available, describe

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
    from fedbandit.envs.factory import make_environment

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
# Audits: an empirical lower bound on ε per model
# ---------------------------------------------------------------------------------------


class _FirstRelease:
    """A statistics protocol's first release (one batch: B·M user records), vectorized over trials.

    A dataset is the batch's records, rows (x, y) of length d + 1; row j is agent j mod M's
    user of round j // M + 1.  ``mechanism(dataset, rng, n)`` returns the released (bias,
    Gram) prefix of n independent runs, in chunks of ``chunk`` runs.
    """

    def __init__(self, protocol, n_agents, dim, batch_size, chunk):
        self.protocol, self.M, self.d, self.B, self.chunk = protocol, n_agents, dim, batch_size, chunk

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


class _Projection:
    """Attack statistic: the release projected on the neighbours' difference (the likelihood-ratio
    direction for Gaussian noise of equal variance per entry)."""

    def __init__(self, direction):
        self.direction = np.asarray(direction, dtype=float)

    def __call__(self, batch):
        return np.asarray(batch) @ self.direction


def audit_side_by_side(config: dict, rng) -> dict:
    """Audited lower bound on ε for one model (for ``run_grid``).

    * Learners that share through a statistics protocol: the protocol's first release
      (batch 1, as configured for the run), on two neighbouring batches: all records zero,
      or user 1 of agent 1 with x = e₁ and y = Y (add/remove that user; a zero record
      contributes nothing; for the user-level learner, a substitution).  Attack: the
      released bias and Gram entries projected on the difference, thresholded on separate
      trials (:func:`fedbandit.audit.audit_epsilon_split`).  Any attack on one release is
      an attack on the run, so the bound is valid for the run.
    * feducb: DP20's schedule attack (:mod:`fedbandit.audit.schedule`) on its own small
      instance (M = 3, K = 20, d = 3, T = 32), with DP20's noise for the target (ε, δ).
    * independent: nothing is released; no audit.

    Configuration: a configuration of :func:`model_config` plus ``n_trials`` (trials per
    dataset), ``n_select`` (threshold-selection trials, default n_trials // 4),
    ``confidence`` (default 0.95) and ``chunk`` (runs per vectorized call, default 250).
    """
    from fedbandit.audit.epsilon import audit_epsilon, audit_epsilon_split
    from fedbandit.envs.factory import make_environment
    from fedbandit.learners.registry import learner_class

    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    cfg = dict(config)
    n_trials = check_positive_int("n_trials", cfg.pop("n_trials", 1000))
    confidence = check_probability("confidence", cfg.pop("confidence", 0.95))
    chunk = check_positive_int("chunk", cfg.pop("chunk", 250))
    n_select = check_positive_int("n_select", cfg.pop("n_select", max(1, n_trials // 4)))
    rng = check_rng("rng", rng)
    m = model_of(cfg)
    delta = check_delta("delta", cfg["delta"]) if m.private else 0.0
    if m.learner == "independent":
        return {"epsilon_lower": math.nan, "tpr": math.nan, "fpr": math.nan, "n_trials": 0,
                "attack": "none", "note": "n/a: nothing leaves a silo, there is no release to attack"}
    if m.learner == "feducb":
        from fedbandit.audit.schedule import SyncAt, alice_tracy_instance, dp20_schedule_mechanism

        inst = alice_tracy_instance(3, 20, 3, 32, seed=2023)
        mech = dp20_schedule_mechanism(inst, epsilon=cfg.get("epsilon"), delta=cfg.get("delta"),
                                       private=m.protocol == "dp20")
        res = audit_epsilon(mech, inst.dataset("tracy"), inst.dataset("alice"), SyncAt(1), 0.5, n_trials,
                            delta=delta, confidence=confidence, rng=rng, vectorized=True)
        return {"epsilon_lower": res.epsilon_lower, "tpr": res.tpr, "fpr": res.fpr, "n_trials": n_trials,
                "attack": "synchronization at t = 1 (Alice or Tracy first; DP20 chapter's instance)",
                "note": "schedule attack of Zhou & Chowdhury's Example 4.1"}
    env = make_environment(dict(cfg, runs=1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        learner = learner_class(m.learner).from_config(cfg, env)
    p = learner.protocol
    d, Mq, Bq = p.dim, p.n_agents, p.batch_size
    Y = cfg.get("reward_bound", 1.0)
    n_values = Bq * Mq
    mech = _FirstRelease(p, Mq, d, Bq, max(1, min(chunk, 4_000_000 // max(1, n_values * (d + d * d)))))
    d0 = np.zeros((n_values, d + 1))
    d1 = d0.copy()
    d1[0, 0], d1[0, d] = 1.0, Y
    direction = np.zeros(d + d * d)
    direction[0], direction[d] = Y, 1.0  # bias e₁·Y and Gram entry (0, 0)
    what = "user" if Mq == 1 else "agent 1's first user"
    res = audit_epsilon_split(mech, list(d0), list(d1), _Projection(direction), n_trials, n_select=n_select,
                              delta=delta, confidence=confidence, rng=rng, vectorized=True)
    return {"epsilon_lower": res.epsilon_lower, "tpr": res.tpr, "fpr": res.fpr, "n_trials": n_trials,
            "attack": f"first release ({n_values} user{'s' if n_values > 1 else ''}), projection on {what}'s record",
            "note": f"threshold chosen on {n_select} separate trials"}


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


def table_rows(configs, results, audits=None) -> list[dict]:
    """One row per configuration: the side-by-side table's columns (:data:`TABLE_COLUMNS`).

    ``results`` are the :class:`~fedbandit.learners.RunResult` of the configurations (or
    ``run_grid``'s ``[result]`` lists; several seeds are pooled); ``audits`` maps a model
    key to the result of :func:`audit_side_by_side`.
    """
    from fedbandit.protocols.registry import describe

    if len(configs) != len(results):
        raise ValueError(f"configs and results differ in length: {len(configs)} and {len(results)}")
    audits = audits or {}
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
        rounds = float(np.mean(first.communication.get("rounds", 0)))
        bits = float(first.communication.get("bits", 0.0))
        rows.append({
            "key": m.key,
            "label": m.label,
            "epsilon": c.get("epsilon"),
            "delta": c.get("delta"),
            "M": c.get("M"),
            "epsilon_achieved": float(acc["epsilon"]),
            "status_raw": acc["status"],
            "noise_variance_raw": float(first.noise_variance),
            "rounds_raw": rounds,
            "uplink_bits_raw": bits,
            "regret_mean": mean,
            "regret_low": low,
            "regret_high": high,
            "audit_epsilon": au_eps,
            "model": m.label,
            "learner": m.learner,
            "trusted": first.calibration.get("trusted", acc.get("model", "")) or "—",
            "adversary": m.adversary,
            "target": f"({format_value(c.get('epsilon'))}, {format_value(c.get('delta'))})" if m.private else "—",
            "achieved": format_value(float(acc["epsilon"])),
            "status": acc["status"],
            "theorem": describe(m.protocol).reference if m.protocol else "no release",
            "noise_variance": format_value(float(first.noise_variance)),
            "rounds": format_value(rounds),
            "uplink_bits": format_value(bits),
            "regret": f"{mean:.4g} [{low:.4g}, {high:.4g}]" if not math.isnan(low) else f"{mean:.4g}",
            "audit": "n/a" if au is None or math.isnan(au_eps) else f"{au_eps:.2f}",
        })
    return rows


def markdown_table(rows, columns=TABLE_COLUMNS) -> str:
    """Render :func:`table_rows` as a Markdown table (``columns``: (key, header) pairs)."""
    head = "| " + " | ".join(h for _, h in columns) + " |"
    sep = "|" + "---|" * len(columns)
    body = ["| " + " | ".join(str(r[k]).replace("|", "\\|") for k, _ in columns) + " |" for r in rows]
    return "\n".join([head, sep] + body)

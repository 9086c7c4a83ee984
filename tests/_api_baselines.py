"""Valid baseline arguments for every public callable of fedbandit (for ``tests/test_api_fuzz.py``).

``BASELINES[qualified name]`` is a function returning ``(args, kwargs)`` of one small, valid,
fast call (fresh objects at every call, since some callables mutate their arguments).
``UNFUZZED[qualified name]`` says why a callable is not fuzzed.  ``test_api_fuzz.py``
checks that every public callable is in exactly one of the two: every name in the ``__all__`` of a
public module of a subpackage (``tests/_public_api.py``; the top levels export only a few of them).
Qualified names are ``"<subpackage>.<name>"`` (the name resolved in the module that lists it); entries ``"<subpackage>.<Class>.<method>"``
fuzz a method of an object built by a baseline (``METHODS``), and ``"protocols.create:<name>"``
fuzz the parameters of one registered protocol through :func:`fedbandit.protocols.create`.
"""

from __future__ import annotations

import functools

import numpy as np

A = ((), {})


def kw(**kwargs):
    return lambda: ((), kwargs)


def rng(seed=0):
    return np.random.default_rng(seed)


# ---------------------------------------------------------------------------------------
# shared small objects
# ---------------------------------------------------------------------------------------


def _ddg_params():
    from fedbandit.accounting.ddg import ddg_params

    return ddg_params(bits=16, k=3.0, n=8, d=4, c=1.0, epsilon=2.0, delta=1e-5)


_DDG = _ddg_params()  # frozen: shared by every call


def _event():
    from fedbandit.accounting import GaussianEvent

    return GaussianEvent(sensitivity=1.0, sigma=3.0)


def _protocol(name="central", **params):
    from fedbandit.protocols import create

    if name in ("non-private", "counter-exact", "sum-non-private"):
        return create(name)
    params = {"epsilon": 1.0, "delta": 1e-3, **params}
    if name.startswith("counter-"):
        params.pop("delta")
    return create(name, **params)


def _replay_log():
    from fedbandit.audit.replay import ReplayLog

    return ReplayLog()


def _configured(name="central", **params):
    p = _protocol(name, **params)
    p.configure(n_agents=1, dim=2, n_batches=16, batch_size=1)
    return p


def _amplification():
    import warnings

    from fedbandit.protocols import create

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # forced outside the lemma's validity region (M small)
        p = create("sdp-amplification", epsilon=1.0, delta=1e-3, force=True)
        return p.configure(n_agents=4, dim=1, n_batches=2, batch_size=2)


def _scenarios():
    from fedbandit.accounting.deshuffle import deshuffle_scenarios

    return deshuffle_scenarios(2, 2)


def _graph():
    from fedbandit.envs.graphs import ring_graph

    return ring_graph(4)


def _instance():
    from fedbandit.audit.schedule import alice_tracy_instance

    return alice_tracy_instance(2, 3, 2, 6, seed=0)


_INSTANCE = _instance()


def _users_env():
    from fedbandit.envs import UsersEnv

    g = rng(1)
    return UsersEnv(g.uniform(-0.5, 0.5, (6, 2, 3, 2)), g.uniform(0, 1, (6, 2, 3)), np.zeros((6, 2)))


def _release():
    from fedbandit.mechanisms.psco import local_psco

    return local_psco(np.array([0, 1, 1, 0, 1, 0, 0, 1]), 1.0, rng(0))


def _run_result():
    from fedbandit.learners import RunResult

    return RunResult(t=np.arange(1, 5), regret=np.cumsum(np.ones((2, 4)), axis=1))


def _synthetic_config(**extra):
    return dict(learner="fixed-batch", protocol="central", instance="synthetic", M=2, T=8, B=2, K=4, d=2, runs=2,
                epsilon=1.0, delta=1e-3, n_checkpoints=4, **extra)


def _mechanism(dataset, rng, n):  # a tiny audit mechanism: the dataset's sum plus Gaussian noise
    from fedbandit._validation import check_array

    return np.sum(check_array("dataset", dataset)) + rng.standard_normal(n)


def _statistic(x):
    return np.asarray(x, dtype=float)


def _binomial_params():
    from fedbandit.accounting.binomial import binomial_params

    return binomial_params(bits=16, k=3.0, n=8, d=4, c=1.0, epsilon=2.0, delta=1e-5)


_BINOMIAL = _binomial_params()  # frozen: shared by every call


def _gaussian_rdp(alpha):  # RDP of the Gaussian mechanism with noise multiplier 1
    return np.asarray(alpha, dtype=float) / 2.0


def _audit_result():
    from fedbandit.audit import AuditResult

    return AuditResult(epsilon_lower=0.1, tpr=0.5, fpr=0.4, tpr_ci=(0.4, 0.6), fpr_ci=(0.3, 0.5), epsilon_point=0.2,
                       n_trials=100, threshold=0.0, delta=0.0, confidence=0.95)


def _spec(name):
    from fedbandit.audit import end_to_end_specs

    return next(s for s in end_to_end_specs() if s.name == name)


def _ranker_path():
    from fedbandit.envs.recommendation import ranker_table_path

    return ranker_table_path()


def _explorer_figure(a):
    """A tiny figure of one control (an explorer's function)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1.0, 1.0))
    ax.bar([0], [a])
    return fig


@functools.lru_cache(maxsize=1)
def _explorer_state_json():
    """Saved widget state of a tiny static explorer (what a page embeds), as JSON."""
    import json

    from ipywidgets.embed import dependency_state

    from fedbandit.book import make_explorer

    w = make_explorer(_explorer_figure, {"a": [1, 2]}, name="fuzz", mode="static", dpi=10)
    state = dependency_state(w, drop_defaults=False)
    for link in getattr(w, "explorer_links", []):
        state.update(dependency_state(link, drop_defaults=False))
    return json.dumps({"version_major": 2, "version_minor": 0, "state": state})


def _explorer_state():
    import json

    return json.loads(_explorer_state_json())


def _model_config(key):
    from fedbandit.experiments.synthesis import model, model_config

    tiny = dict(instance="synthetic", M=2, T=8, B=2, K=4, d=2, runs=2, env_seed=0, epsilon=4.0, delta=1e-5,
                param_bound=1.0, n_checkpoints=4)
    return model_config(tiny, model(key))


_BITS = np.array([0, 1, 1, 0, 1, 0, 0, 1])

BASELINES = {
    # ---- accounting
    "accounting.Accounting": kw(model="m", target_epsilon=1.0, target_delta=1e-5, epsilon=1.0, delta=1e-5,
                                status="verified", theorem="t"),
    "accounting.account": lambda: ((_event(),), dict(target_epsilon=2.0, target_delta=1e-5)),
    "accounting.Condition": kw(statement="s", holds=True, detail="d"),
    "accounting.fmt22_closed_form_validity": kw(epsilon0=0.5, n=10_000, delta=1e-6),
    "accounting.fmt22_closed_form_epsilon": kw(epsilon0=0.5, n=10_000, delta=1e-6),
    "accounting.fmt22_numerical_delta": kw(epsilon=0.2, epsilon0=0.5, n=1000),
    "accounting.fmt22_numerical_epsilon": kw(epsilon0=0.5, n=1000, delta=1e-6),
    "accounting.fmt22_approx_dp": kw(epsilon0=0.5, delta0=1e-8, n=1000, delta=1e-6),
    "accounting.zc_amplification_validity": kw(epsilon=1.0, delta=1e-3, n_agents=100, n_batches=4, horizon=100),
    "accounting.zc_amplification_sigma0": kw(epsilon=1.0, delta=1e-3, n_agents=10_000, n_batches=4, horizon=100),
    "accounting.gaussian_delta_exact": kw(epsilon=1.0, mu=0.5),
    "accounting.gaussian_epsilon_exact": kw(mu=0.5, delta=1e-5),
    "accounting.ldp_sigma0": kw(epsilon=1.0, delta=1e-5, n_batches_=8),
    "accounting.ldp_total_variance": kw(epsilon=1.0, delta=1e-5, n_batches_=8, n_agents=3),
    "accounting.central_sigma": kw(epsilon=1.0, delta=1e-5, n_batches_=8),
    "accounting.dp20_m": kw(horizon=100),
    "accounting.dp20_sigma": kw(epsilon=1.0, delta=1e-5, horizon=100),
    "accounting.gaussian_tree_sigma0": kw(rule="zcdp", epsilon=1.0, delta=1e-5, n_batches=8, horizon=100, n_agents=3),
    "accounting.vector_sum_parameters": kw(epsilon=1.0, delta=1e-3, n_users=100, dim=5),
    "accounting.laplace_counter_scale": kw(epsilon=1.0),
    "accounting.composed_gaussian_sigma": kw(epsilon=1.0, delta=1e-5, sensitivity=1.0),
    "accounting.advanced_composition": kw(epsilon=0.1, delta=1e-6, k=10, delta_prime=1e-6),
    "accounting.split_budget_advanced": kw(epsilon=1.0, delta=1e-5, k=10),
    "accounting.optimal_composition_delta": kw(epsilon=1.0, eps0=0.1, delta0=1e-7, n_mechanisms=20),
    "accounting.optimal_composition_epsilon": kw(eps0=0.1, delta0=1e-7, n_mechanisms=20, delta=1e-5),
    "accounting.split_budget_optimal": kw(epsilon=1.0, delta=1e-5, n_mechanisms=20),
    "accounting.group_budget": kw(epsilon=0.5, delta=1e-6, group_size=3),
    "accounting.level_budget": kw(epsilon=1.0, delta=1e-5, k=10),
    "accounting.gaussian_noise_scale": kw(epsilon0=[0.1, 1.0], delta0=[1e-6, 1e-5]),
    "accounting.hybrid_counter_scales": kw(epsilon=1.0),
    "accounting.binary_counter_scale": kw(epsilon=1.0, n_steps=16),
    "accounting.per_item_counter_scale": kw(epsilon=1.0),
    "accounting.account_pure": lambda: ((__import__("fedbandit.accounting", fromlist=["x"]).LaplaceEvent(1.0, 2.0),),
                                        dict(target_epsilon=1.0)),
    "accounting.ddg_tau": kw(sigma_over_gamma=10.0, n=8),
    "accounting.ddg_delta2": kw(c=1.0, gamma=0.01, d=4, beta=0.6),
    "accounting.ddg_zcdp_epsilon": kw(delta2=1.1, sigma=2.0, gamma=0.01, n=8, d=4),
    "accounting.ddg_rdp": kw(orders=[2.0, 4.0], delta2=1.1, sigma=2.0, gamma=0.01, n=8, d=4),
    "accounting.ddg_epsilon": kw(sigma=2.0, c=1.0, gamma=0.01, beta=0.6, n=8, d=4, delta=1e-5),
    "accounting.ddg_sigma_for_epsilon": kw(epsilon=1.0, c=1.0, gamma=0.01, beta=0.6, n=8, d=4, delta=1e-5),
    "accounting.sum_closeness_bound": kw(sigma2=4.0, tau2=1.0),
    "accounting.single_dg_sum_epsilon": kw(sensitivity=1.0, sigma=2.0, n=8),
    "accounting.DDGParams": lambda: ((), {f: getattr(_DDG, f) for f in (
        "bits", "k", "n", "d", "d_pad", "c", "epsilon", "delta", "beta", "gamma", "sigma", "delta2")}),
    "accounting.ddg_params": kw(bits=16, k=3.0, n=8, d=4, c=1.0, epsilon=2.0, delta=1e-5),
    "accounting.ddg_params_from_gamma": kw(bits=16, gamma=0.01, sigma=2.0, n=8, d=4, c=1.0, delta=1e-5),
    "accounting.ddg_tree_params": kw(bits=16, k=3.0, n_parties=3, n_agents=3, dim=2, clip=1.0, epsilon=2.0,
                                     delta=1e-5, beta=0.6, norm_growth="conservative", flatten="hadamard", steps=4,
                                     n_signal=3, rounding_share=0.5),
    "accounting.check_relation": kw(relation="replace"),
    "accounting.record_sensitivities": kw(feature_bound=1.0, reward_bound=1.0, relation="replace"),
    "accounting.DpEvent": kw(),
    "accounting.NoReleaseEvent": kw(),
    "accounting.NonPrivateEvent": kw(),
    "accounting.GaussianEvent": kw(sensitivity=1.0, sigma=2.0),
    "accounting.LaplaceEvent": kw(sensitivity=1.0, scale=2.0),
    "accounting.DiscreteGaussianSumEvent": kw(clip=1.0, gamma=0.01, beta=0.6, dim=4, sigma=2.0, n_parties=8),
    "accounting.ShuffledRandomizedResponseEvent": kw(n_messages=100, p=0.2, epsilon_message=1.0, delta_message=1e-5),
    "accounting.ApproxDpEvent": kw(epsilon=1.0, delta=1e-5),
    "accounting.ClaimedEvent": kw(epsilon=1.0, delta=1e-5, theorem="t"),
    "accounting.ConditionalEvent": lambda: ((), dict(event=_event(), assumption="a", holds=True)),
    "accounting.InvalidEvent": kw(reason="r"),
    "accounting.SelfComposedEvent": lambda: ((), dict(event=_event(), count=3)),
    "accounting.ComposedEvent": lambda: ((), dict(events=(_event(), _event()))),
    "accounting.analytic_gaussian_delta": kw(epsilon=1.0, sigma=2.0),
    "accounting.analytic_gaussian_sigma": kw(epsilon=1.0, delta=1e-5),
    "accounting.analytic_gaussian_epsilon": kw(sigma=2.0, delta=1e-5),
    "accounting.rr_shuffle_delta": kw(epsilon=1.0, n_users=1000, p=0.1),
    "accounting.rr_shuffle_delta_exact": kw(epsilon=1.0, bits_others=np.tile(_BITS, 4), p=0.1),
    "accounting.rr_flip_probability": kw(n_users=1000, epsilon=1.0, delta=1e-5),
    "accounting.local_rr_flip_probability": kw(epsilon=1.0),
    "accounting.psco_accounting": kw(n=64, epsilon=1.0, delta=1e-5, batch_sizes=(16, 4)),
    "accounting.rr_message_probabilities": kw(p=0.1),
    "accounting.rr_estimator_variance": kw(n_users=100, p=0.1),
    "accounting.gaussian_zcdp": kw(sensitivity=1.0, sigma=2.0),
    "accounting.compose_zcdp": lambda: ((0.1, 0.2), {}),
    "accounting.gaussian_sigma_for_zcdp": kw(rho=0.1),
    "accounting.zcdp_to_approx_dp": kw(rho=0.1, delta=1e-5),
    "accounting.approx_dp_to_zcdp": kw(epsilon=1.0, delta=1e-5),
    "accounting.rdp_to_approx_dp": kw(orders=[2.0, 8.0], rdp=[0.1, 0.4], delta=1e-5),
    "accounting.calibrate_gaussian_sigma": kw(epsilon=1.0, delta=1e-5),
    "accounting.tree_zcdp": kw(n_steps=8, sensitivity=1.0, sigma0=2.0),
    # ---- audit
    "audit.AuditResult": kw(epsilon_lower=0.1, tpr=0.5, fpr=0.4, tpr_ci=(0.4, 0.6), fpr_ci=(0.3, 0.5),
                            epsilon_point=0.2, n_trials=100, threshold=0.0, delta=0.0, confidence=0.95),
    "audit.audit_epsilon": lambda: ((), dict(mechanism=_mechanism, dataset0=[0.0, 0.0], dataset1=[0.0, 1.0],
                                             statistic=_statistic, threshold=0.5, n_trials=200, rng=rng(),
                                             vectorized=True, cache_dir=False)),
    "audit.audit_epsilon_split": lambda: ((), dict(mechanism=_mechanism, dataset0=[0.0, 0.0], dataset1=[0.0, 1.0],
                                                   statistic=_statistic, n_trials=200, rng=rng(), vectorized=True,
                                                   cache_dir=False)),
    "audit.epsilon_lower_bound": kw(k1=60, n1=100, k0=40, n0=100),
    "audit.clopper_pearson": kw(k=40, n=100, alpha=0.05),
    "audit.min_trials": kw(),
    "audit.select_threshold": lambda: ((), dict(stats0=rng(0).standard_normal(50), stats1=rng(1).standard_normal(50) + 1)),
    "audit.sample_statistics": lambda: ((), dict(mechanism=_mechanism, dataset=[0.0, 1.0], statistic=_statistic, n=10,
                                                 rng=rng(), vectorized=True)),
    "audit.is_neighbouring": kw(dataset0=[0, 0, 1], dataset1=[0, 1, 1]),
    "audit.AliceTracyInstance": lambda: ((), {f: getattr(_INSTANCE, f) for f in (
        "features", "means", "noise", "theta", "alice", "tracy", "silo", "observer", "r_typical", "r_alice")}),
    "audit.alice_tracy_instance": kw(n_agents=2, n_arms=3, dim=2, horizon=6),
    "audit.alice_threshold": kw(lam0=1.0),
    "audit.DP20ScheduleMechanism": lambda: ((), dict(instance=_instance(), protocol=_protocol("non-private"))),
    "audit.dp20_schedule_mechanism": lambda: ((), dict(instance=_instance(), epsilon=1.0, delta=1e-3)),
    "audit.FixedBatchScheduleMechanism": lambda: ((), dict(instance=_instance(), epsilon=1.0, delta=1e-3, batch_size=2)),
    "audit.RecordingProtocol": lambda: ((), dict(base=_protocol("central"), tracker=_users_env())),
    "audit.SyncAt": kw(t=2),
    "audit.FirstSync": kw(),
    "audit.ActionIs": kw(t=2, arm=1),
    "audit.select_action_attack": lambda: ((), dict(
        mechanism=__import__("fedbandit.audit.schedule", fromlist=["x"]).dp20_schedule_mechanism(_instance(), private=False),
        dataset0=_instance().dataset("alice"), dataset1=_instance().dataset("tracy"), t=2, n_select=4, rng=rng())),
    # ---- book
    "book.use_book_style": kw(),
    "book.cpu_model": kw(),
    "book.machine_description": kw(),
    "book.load_average": kw(),
    "book.glue_text": kw(name="k", text="v"),
    "book.pdf_outline_titles": kw(pdf=b"%PDF-1.4\n1 0 obj <</Title (A chapter)>> endobj\n"),
    "book.typed_results": kw(markdown="The regret is 3.5."),
    "book.get_scale": kw(),
    "book.by_scale": kw(quick=1, paper=2),
    "envs.run_in_lockstep": kw(calls=[lambda: 1, lambda: 2]),
    "envs.share": lambda: ((), dict(env=__import__("fedbandit.envs", fromlist=["x"]).SyntheticLinearEnv(2, 3, 2))),
    "envs.handover": kw(),
    "envs.task_clock": kw(),
    "envs.in_lockstep": kw(),
    # ---- envs
    "envs.load_digits_federated": kw(n_clients=5),
    "envs.make_environment": kw(config=dict(instance="synthetic", M=2, K=4, d=2, runs=2)),
    "envs.available_environments": kw(),
    "learners.learner_family": kw(name="fixed-batch"),
    "envs.environment_keys": kw(),
    "envs.Graph": kw(adjacency=np.array([[0, 1], [1, 0]])),
    "envs.complete_graph": kw(n_agents=4),
    "envs.ring_graph": kw(n_agents=4),
    "envs.star_graph": kw(n_agents=4),
    "envs.grid_graph": kw(n_rows=2, n_cols=3),
    "envs.erdos_renyi_graph": lambda: ((), dict(n_agents=5, p=0.6, rng=rng())),
    "envs.make_graph": kw(topology="ring", n_agents=4),
    "envs.laplacian": lambda: ((), dict(graph=_graph())),
    "envs.default_kappa": lambda: ((), dict(graph=_graph())),
    "envs.consensus_matrix": lambda: ((), dict(graph=_graph())),
    "envs.NetworkTerms": kw(eigenvalues=np.array([1.0, 0.5]), lambda_2=0.5, spectral_gap=0.5, epsilon_n=0.1,
                            c_i=np.array([1.0, 1.0]), c_0=1.0),
    "envs.network_terms": lambda: ((), dict(P=__import__("fedbandit.envs.graphs", fromlist=["x"]).consensus_matrix(_graph()))),
    "envs.RoundBlock": kw(start=0, _features=np.zeros((2, 1, 3, 2)), means=np.zeros((2, 1, 3)), best=np.zeros((2, 1)),
                          noise=np.zeros((2, 1))),
    "envs.SyntheticLinearEnv": kw(n_agents=2, n_arms=4, dim=2, n_runs=2),
    "envs.RealDataLinearEnv": lambda: ((), dict(instance=__import__("fedbandit.envs", fromlist=["x"]).load_mslr_instance(),
                                                n_agents=2, n_runs=2, max_arms=5)),
    "envs.as_seed_sequence": kw(seed=3),
    "envs.mslr_path": kw(),
    "envs.load_mslr_instance": kw(),
    "envs.BernoulliBandit": kw(means=np.array([0.2, 0.8])),
    "envs.GaussianBandit": kw(means=np.array([0.2, 0.8])),
    "envs.RewardStream": lambda: ((), dict(env=__import__("fedbandit.envs.multi_armed", fromlist=["x"]).BernoulliBandit(
        np.array([0.2, 0.8])), n_runs=2, n_agents=2, rng=rng(), block=8)),
    "envs.make_env": kw(kind="bernoulli", means=[0.2, 0.8]),
    "envs.UsersEnv": lambda: ((), dict(features=rng(1).uniform(-0.5, 0.5, (6, 2, 3, 2)),
                                       means=rng(2).uniform(0, 1, (6, 2, 3)), noise=np.zeros((6, 2)))),
    "envs.UserSequenceEnv": lambda: ((), dict(env=__import__("fedbandit.envs", fromlist=["x"]).SyntheticLinearEnv(
        1, n_arms=3, dim=2, n_runs=2))),
    # ---- experiments
    "experiments.make_rng": kw(config={"a": 1}, seed=0),
    "experiments.config_hash": kw(config={"a": 1}),
    "experiments.default_cache_dir": kw(),
    "experiments.run_config": lambda: ((), dict(config=_synthetic_config(), rng=rng())),
    "experiments.mean_and_se": kw(values=np.arange(12.0).reshape(3, 4)),
    "experiments.fit_power_law": kw(n=[10, 100, 1000], values=[1.0, 3.2, 10.1]),
    "experiments.regret_interval": kw(values=[1.0, 2.0, 3.0, 2.5]),
    "experiments.ExponentFit": kw(slope=0.5, se=0.1, low=0.3, high=0.7, confidence=0.95, n_boot=100),
    "experiments.fit_exponent": kw(x=[10, 100, 1000, 10_000], values=[[1.0, 1.1], [3.2, 3.0], [10.1, 9.9], [31.0, 32.0]],
                                   n_boot=50),
    "experiments.MeanGap": kw(diff=1.0, se=0.5, t=2.0, dof=6.0),
    "experiments.welch_dof": kw(se_a=0.5, n_a=4, se_b=0.3, n_b=5),
    "experiments.mean_gap": kw(a=[1.0, 2.0, 3.0], b=[2.0, 3.5, 4.0, 5.0]),
    "experiments.gap_false_alarm": kw(k=3.0, dof=6.0),
    "experiments.gap_threshold": kw(alpha=1e-3, dof=6.0),
    "experiments.t_interval": kw(estimate=0.5, se=0.1, dof=3.0, confidence=0.95),
    "experiments.fit_exponent_t": kw(x=[10, 100, 1000, 10_000], values=[[1.0, 1.1], [3.2, 3.0], [10.1, 9.9], [31.0, 32.0]]),
    "experiments.Claim": kw(quantity="q", estimate=0.5, low=0.4, high=0.6, confidence=0.95, method="m"),
    "experiments.claim": kw(quantity="q", estimate=0.5, low=0.4, high=0.6, confidence=0.95, method="m",
                            prediction=("1/2", 0.5), alternatives={"1/3": 1 / 3}),
    "experiments.claim_slope": kw(quantity="q", slope=0.5, se=0.05, dof=2.0, prediction=("1/2", 0.5)),
    "experiments.claim_exponent": kw(quantity="q", fit=__import__("fedbandit.experiments.statistics", fromlist=["x"])
                                     .ExponentFit(0.5, 0.1, 0.3, 0.7, 0.95, 0, 3.0), alternatives={"1/3": 1 / 3}),
    "experiments.claim_difference": kw(quantity="q", a=[1.0, 2.0, 3.0], b=[2.0, 3.5, 4.0], paired=True),
    "experiments.claim_mean": kw(quantity="q", values=[1.0, 2.0, 3.5]),
    "experiments.claim_ratio_of_means": kw(quantity="r", numerator=[2.0, 2.5, 3.0], denominator=[1.0, 1.2, 0.9]),
    "experiments.variance_ratio_band": kw(dof=9, alpha=0.01),
    "experiments.claim_slope_gap": kw(quantity="q", a=(0.7, 0.05), b=(0.5, 0.05), dof=2.0,
                                      alternatives={"no difference": 0.0}),
    "experiments.claim_order": kw(quantity="q", low=[1.0, 2.0, 3.0], high=[2.0, 3.5, 4.0], alpha=0.01, paired=True),
    "experiments.mean_below": kw(low=[1.0, 2.0, 3.0], high=[2.0, 3.5, 4.0, 5.0], alpha=0.01),
    "experiments.means_not_distinguished": kw(a=[1.0, 2.0, 3.0], b=[2.0, 3.5, 4.0, 5.0], alpha=0.01),
    "experiments.mean_within": kw(a=[1.0, 2.0, 3.0], b=[1.1, 2.1, 2.9], rel=0.2, alpha=0.01, paired=True),
    "experiments.mean_above_level": kw(x=[1.0, 2.0, 3.0], level=0.5, alpha=0.01),
    "experiments.ordering_summary": lambda: ((), dict(
        claims={1.0: __import__("fedbandit.experiments", fromlist=["claim"]).claim(
            "q", 0.5, 0.4, 0.6, confidence=0.95, method="m", alternatives={"no difference": 0.0})},
        when_above="a lower", when_below="b lower")),
    "experiments.mean_and_half_width": kw(values=[1.0, 2.0, 3.0, 2.5]),
    "experiments.ratio_and_se": kw(numerator=(2.0, 0.1), denominator=(4.0, 0.2)),
    "experiments.claim_estimate_gap": kw(quantity="q", a=(0.7, 0.05), b=(0.5, 0.05), runs_a=4, runs_b=5,
                                         estimator="delta method"),
    "experiments.fit_polylog": kw(x=[10.0, 100.0, 1000.0], values=[1.0, 3.2, 10.1]),
    "experiments.spearman_rho": kw(a=[1.0, 2.0, 3.0, 4.0], b=[1.0, 3.0, 2.0, 4.0]),
    "experiments.worst_case_runs": kw(values=np.arange(12.0).reshape(3, 4)),
    "experiments.held_out_worst_case": kw(values=np.arange(12.0).reshape(3, 4)),
    "experiments.model": kw(key="fixed-batch/silo-ldp"),
    "experiments.Model": kw(key="k", learner="fixed-batch", protocol="central", label="l", adversary="a"),
    "experiments.model_of": kw(config=dict(learner="fixed-batch", protocol="silo-ldp", tag="fixed-batch/silo-ldp")),
    "experiments.format_value": kw(v=1.2345),
    "experiments.psco_trial": lambda: ((), dict(config=dict(n=16, epsilon=1.0, delta=1e-3, runs=2,
                                                            algorithms=[["local", None], ["tree", None]]), rng=rng())),
    "experiments.bandit_trial": lambda: ((), dict(config=dict(n=16, epsilon=1.0, delta=1e-3, runs=2, dim=2, n_arms=3,
                                                              protocols=[{"protocol": "central"}]), rng=rng())),
    "experiments.dme_trial": lambda: ((), dict(config=dict(n=8, d=4, c=1.0, bits=16, k=3.0, epsilon=2.0, delta=1e-5,
                                                           beta=0.6, norm_growth="conservative", reps=2), rng=rng())),
    # ---- learners
    "learners.linucb_parameters": lambda: ((), dict(protocol=_configured("central"), n=16, dim=2)),
    "learners.default_checkpoints": kw(horizon=100),
    "learners.privacy_width_numerator": kw(kind="std", t=10, scale=1.0, rho=2.0),
    "learners.expand_grid": kw(epsilon=[0.5, 1.0], rho=[2.0], runs=2),
    "learners.wang_threshold": kw(horizon=100, dim=2, n_agents=3),
    "learners.noise_norm_bound": kw(total_sigma=2.0, dim=2, horizon=100),
    "learners.paper_synthetic_configs": kw(runs=1, T=100, M=4),
    "learners.regularized_inverse": kw(gram=np.eye(2), lam=1.0),
    "learners.sherman_morrison_update": kw(v_inv=np.eye(2), x=np.array([0.5, 0.5])),
    "learners.feature_products": kw(features=np.ones((2, 3, 2))),
    "learners.ucb_scores": kw(features=np.ones((1, 2, 3, 2)), theta_hat=np.zeros((1, 2, 2)), v_inv=np.tile(np.eye(2), (1, 2, 1, 1)), beta=1.0),
    "learners.select_arms": kw(features=np.ones((1, 2, 3, 2)), theta_hat=np.zeros((1, 2, 2)), v_inv=np.tile(np.eye(2), (1, 2, 1, 1)), beta=1.0),
    "learners.gather_played": kw(arrays_by_arm=np.arange(12.0).reshape(2, 2, 3), arms=np.array([[0, 2], [1, 1]])),
    "learners.learner_class": kw(name="fixed-batch"),
    "learners.available_learners": kw(),
    "learners.checkpoint_indices": kw(horizon=100, n_checkpoints=10),
    "learners.time_average_regret": kw(regret=np.cumsum(np.ones((2, 5)), axis=1)),
    "learners.Result": kw(),
    "learners.RunResult": kw(t=np.arange(1, 5), regret=np.cumsum(np.ones((2, 4)), axis=1)),
    "learners.CommunicationRecord": kw(rounds=4, messages=12, payload=60.0, unit="floats", bits=3840.0),
    "learners.FederatedResult": kw(accuracy=np.array([[0.5, 0.6]]), t=np.array([1, 2])),
    "learners.FixedBatchFedLinUCB": lambda: ((), dict(protocol=_protocol("central"), horizon=8, batch_size=2,
                                                      n_agents=2, dim=2)),
    "learners.IndependentLinUCB": kw(horizon=8, n_agents=2, dim=2),
    "learners.SuperAgent": lambda: ((), dict(protocol=_protocol("central"), horizon=8, n_agents=2, dim=2)),
    "learners.FedUCB": lambda: ((), dict(protocol=_protocol("dp20"), n_agents=2, dim=2, horizon=8, threshold=1.0)),
    "learners.ConcurrentShuffleLinUCB": lambda: ((), dict(protocol=_protocol("central"), n_users=16, dim=2)),
    "learners.MasterWorkerUCB": lambda: ((), dict(protocol=_protocol("counter-hybrid"), n_agents=2, n_arms=3,
                                                  horizon=20)),
    "learners.DecentralizedUCB": lambda: ((), dict(protocol=_protocol("counter-hybrid"), graph=_graph(), n_arms=3,
                                                   horizon=20)),
    "learners.IndependentUCB": lambda: ((), dict(protocol=_protocol("counter-hybrid"), n_agents=2, n_arms=3,
                                                 horizon=20)),
    "learners.CentralizedUCB": kw(n_agents=2, n_arms=3, horizon=20),
    "learners.FederatedLearner": lambda: ((), dict(protocol=_protocol("sum-non-private"), n_clients=5, n_features=4,
                                                   rounds=2)),
    "learners.local_updates": lambda: ((), dict(W=np.zeros((2, 3, 2)), X=np.ones((2, 4, 3)), Y=np.ones((2, 4, 2)) / 2,
                                                mask=np.ones((2, 4)), count=np.full((2, 1, 1), 4.0), lr=0.5,
                                                local_steps=2)),
    "learners.server_momentum_step": lambda: ((), dict(W=np.zeros(3), mom=np.zeros(3), total=np.ones(3), n_clients=2,
                                                       momentum=0.9, server_lr=1.0)),
    "learners.grid_view": lambda: ((), dict(result=_run_result())),
    "learners.split_params": lambda: ((), dict(config=_synthetic_config(), cls=__import__(
        "fedbandit.learners", fromlist=["x"]).FixedBatchFedLinUCB)),
    # ---- mechanisms
    "mechanisms.BinaryMechanism": kw(n_steps=16, epsilon=1.0),
    "mechanisms.LogarithmicMechanism": kw(epsilon=1.0),
    "mechanisms.HybridMechanism": kw(epsilon=1.0),
    "mechanisms.PerItemLaplaceMechanism": kw(epsilon=1.0),
    "mechanisms.hybrid_noise_variance": kw(n=10, epsilon=1.0),
    "mechanisms.hybrid_sd_factor": kw(n=[1, 10, 300]),
    "mechanisms.binary_noise_variance": kw(n=10, n_steps=16, epsilon=1.0),
    "mechanisms.per_item_noise_variance": kw(n=10, epsilon=1.0),
    "mechanisms.hybrid_sd_bound_by_level": kw(),
    "mechanisms.lowest_set_bit_index": kw(n=12),
    "mechanisms.floor_log2": kw(n=12),
    "mechanisms.draw_standard_laplace": lambda: ((), dict(rng=rng(), size=5)),
    "mechanisms.DDGMechanism": lambda: ((), dict(params=_ddg_params())),
    "mechanisms.clip_l2": kw(x=np.ones((3, 4)), c=1.0),
    "mechanisms.conditional_randomized_round": lambda: ((), dict(z=np.full((2, 4), 0.3), bound=10.0, rng=rng())),
    "mechanisms.modular_clip": kw(s=np.arange(-5, 5), modulus=8),
    "mechanisms.ddg_noisy_sum": lambda: ((), dict(x=np.full((8, 4), 0.1), params=_ddg_params(), rng=rng())),
    "mechanisms.sample_discrete_gaussian": lambda: ((), dict(sigma=2.0, size=5, rng=rng())),
    "mechanisms.sample_discrete_gaussian_reference": lambda: ((), dict(sigma=2.0, size=5, rng=rng())),
    "mechanisms.discrete_gaussian_pmf": kw(y=np.arange(-3, 4), sigma=2.0),
    "mechanisms.discrete_gaussian_variance": kw(sigma=2.0),
    "mechanisms.bernoulli_exp_reference": lambda: ((), dict(gamma=0.5, rng=rng())),
    "mechanisms.discrete_laplace_reference": lambda: ((), dict(t=2, rng=rng())),
    "mechanisms.fwht": kw(x=np.ones(8)),
    "mechanisms.next_power_of_two": kw(d=5),
    "mechanisms.flattened_dim": kw(d=5, kind="dft"),
    "mechanisms.HadamardFlattener": lambda: ((), dict(d=5, rng=rng())),
    "mechanisms.DFTFlattener": lambda: ((), dict(d=5, rng=rng())),
    "mechanisms.make_flattener": lambda: ((), dict(d=5, rng=rng())),
    "mechanisms.gaussian_mechanism": lambda: ((), dict(value=np.zeros(3), sigma=1.0, rng=rng())),
    "mechanisms.ContinualRelease": kw(n=4, block=1, values=np.zeros((1, 4))),
    "mechanisms.local_psco": lambda: ((), dict(x=_BITS, epsilon=1.0, rng=rng())),
    "mechanisms.central_tree_psco": lambda: ((), dict(x=_BITS, epsilon=1.0, delta=1e-3, rng=rng())),
    "mechanisms.concurrent_psco": lambda: ((), dict(x=_BITS, k=2, epsilon=1.0, delta=1e-3, rng=rng())),
    "mechanisms.sequential_psco": lambda: ((), dict(x=_BITS, epsilon=1.0, delta=1e-3, rng=rng())),
    "mechanisms.tree_psco": lambda: ((), dict(x=_BITS, epsilon=1.0, delta=1e-3, rng=rng())),
    "mechanisms.extrapolating_psco": lambda: ((), dict(x=_BITS, k=2, epsilon=1.0, delta=1e-3, rng=rng())),
    "mechanisms.run_psco": lambda: ((), dict(name="local", x=_BITS, epsilon=1.0, delta=1e-3, rng=rng())),
    "mechanisms.optimal_batch_sizes": kw(n=64, k=2, epsilon=1.0, delta=1e-3),
    "mechanisms.dyadic_batch_sizes": kw(n=64),
    "mechanisms.error_proxy": kw(name="concurrent", n=64, epsilon=1.0, delta=1e-3, k=2),
    "mechanisms.sup_error": lambda: ((), dict(release=_release(), x=_BITS)),
    "mechanisms.prefix_sums": kw(x=_BITS),
    "mechanisms.sample_hard_input": lambda: ((), dict(n=64, k=2, epsilon=1.0, rng=rng())),
    "mechanisms.hard_input_single_positions": kw(n=64, k=2, epsilon=1.0, prefix_length=1),
    "mechanisms.sample_bernoulli_input": lambda: ((), dict(n=16, rng=rng())),
    "mechanisms.bernoulli_concurrent_sup_error": lambda: ((), dict(n=64, k=2, epsilon=1.0, delta=1e-3, rng=rng())),
    "mechanisms.sample_runs_input": lambda: ((), dict(n=16, run_length=4, rng=rng())),
    "mechanisms.rep_nk": kw(n=64, k=2, epsilon=1.0),
    "mechanisms.big_nk": kw(n=64, k=2, epsilon=1.0),
    "mechanisms.c_epsilon": kw(epsilon=1.0),
    "mechanisms.RRShuffleSummation": kw(n_users=100, epsilon=1.0, delta=1e-3),
    "mechanisms.randomized_round": lambda: ((), dict(x=np.full(4, 0.3), rng=rng())),
    "mechanisms.unary_round": lambda: ((), dict(x=np.full(4, 0.3), resolution=4, rng=rng())),
    "mechanisms.unary_resolution": kw(n_users=100),
    "mechanisms.rr_randomize": lambda: ((), dict(bits=_BITS, p=0.1, rng=rng())),
    "mechanisms.rr_debias": kw(count=30, n_users=100, p=0.1),
    "mechanisms.sample_rr_counts": lambda: ((), dict(ones=30, n_users=100, p=0.1, rng=rng())),
    "mechanisms.lowest_set_bit": kw(k=12),
    "mechanisms.prefix_nodes": kw(k=12),
    "mechanisms.tree_depth": kw(n_steps=12),
    "mechanisms.prefix_noise_variance": kw(k=12, sigma0=1.0),
    "mechanisms.draw_noise": lambda: ((), dict(rng=rng(), shape=(2, 3), scale=1.0)),
    "mechanisms.TreeRandomizer": kw(n_steps=8, item_shape=(2,), sigma0=1.0),
    "mechanisms.TreeAnalyzer": kw(n_steps=8, item_shape=(2,)),
    "mechanisms.TreeMechanism": kw(n_steps=8, item_shape=(2,), sigma=1.0),
    "mechanisms.VectorSumShuffle": kw(epsilon=1.0, delta=0.1, n_users=100, dim=5),
    "mechanisms.sqrt_toeplitz_coefficients": kw(n=12),
    "mechanisms.inverse_series": kw(coefficients=np.array([1.0, 0.5, 0.375]), n=8),
    "mechanisms.lower_toeplitz": kw(coefficients=np.array([1.0, 0.5]), n=4),
    "mechanisms.max_column_norm": kw(coefficients=np.array([1.0, 0.5]), n=4),
    "mechanisms.factorization_noise_coefficients": kw(coefficients=np.array([1.0, 0.5]), n=6),
    "mechanisms.SqrtToeplitzRandomizer": kw(n_steps=8, item_shape=(2,), sigma=1.0),
    "mechanisms.BandedSqrtRandomizer": kw(n_steps=8, item_shape=(2,), sigma=1.0, bands=3),
    "mechanisms.honaker_level_variance": kw(level=3, sigma0=1.0),
    "mechanisms.honaker_prefix_variance": kw(k=12, sigma0=1.0),
    "mechanisms.honaker_max_prefix_variance": kw(n_steps=12, sigma0=1.0),
    "mechanisms.FullTreeRandomizer": kw(n_steps=8, item_shape=(2,), sigma0=1.0),
    "mechanisms.HonakerAnalyzer": kw(n_steps=8, item_shape=(2,)),
    "mechanisms.HonakerTreeMechanism": kw(n_steps=8, item_shape=(2,), sigma=1.0),
    # ---- protocols
    "protocols.Communication": kw(),
    "protocols.record_half_range": kw(dim=3),
    "protocols.concurrent_schedule": kw(n=64, k=2, epsilon=1.0, delta=1e-3, dim=2),
    "protocols.sequential_batch_sizes": kw(n=64),
    "protocols.RandomizedResponseRecords": kw(),
    "protocols.MixedRadixAnalyzer": kw(),
    "protocols.ConcurrentShuffleProtocol": lambda: ((), dict(
        randomizer=_protocol("concurrent-shuffle", k=2).randomizer, intermediary=_protocol("concurrent-shuffle", k=2).intermediary,
        analyzer=_protocol("concurrent-shuffle", k=2).analyzer, name="x", epsilon=1.0, delta=1e-3)),
    "protocols.HybridCounter": kw(),
    "protocols.BinaryCounter": kw(),
    "protocols.PerItemLaplaceCounter": kw(),
    "protocols.ExactCounter": kw(),
    "protocols.RunningSums": kw(),
    "protocols.CounterProtocol": lambda: ((), dict(
        randomizer=_protocol("counter-hybrid").randomizer, intermediary=_protocol("counter-hybrid").intermediary,
        analyzer=_protocol("counter-hybrid").analyzer, name="x", epsilon=1.0)),
    "protocols.Identity": kw(),
    "protocols.Shuffler": kw(),
    "protocols.SecureAggregation": kw(),
    "protocols.ConcurrentShufflers": kw(batch_sizes=(4, 2)),
    "protocols.Allocation": kw(shuffler=0, batch_size=4, randomizer=lambda x, eps: x),
    "protocols.Release": kw(shuffler=0, start=0, end=4, tag=None, messages=np.zeros(4)),
    "protocols.Transcript": kw(n=8, k=2),
    "protocols.ConcurrentShuffleModel": lambda: ((), dict(k=2, server=__import__("fedbandit.protocols.intermediaries", fromlist=["x"])
                                                         .MixedRadixServer((4, 2), [__import__(
                                                             "fedbandit.mechanisms", fromlist=["x"]).RRShuffleSummation(
                                                             b, 1.0, 1e-3) for b in (4, 2)]))),
    "protocols.MixedRadixServer": lambda: ((), dict(batch_sizes=(4, 2), protocols=[__import__(
        "fedbandit.mechanisms", fromlist=["x"]).RRShuffleSummation(b, 1.0, 1e-3) for b in (4, 2)])),
    "protocols.available": kw(),
    "protocols.describe": kw(name="central"),
    "protocols.create": kw(name="central", epsilon=1.0, delta=1e-3),
    "protocols.ProtocolInfo": kw(name="x", kind="statistics", summary="s", reference="r", factory=lambda: None),
    "protocols.pack_statistics": kw(bias=np.zeros((2, 3)), gram=np.zeros((2, 3, 3))),
    "protocols.unpack_statistics": kw(packed=np.zeros((2, 9)), d=3),
    "protocols.user_records": kw(x=np.ones((2, 3)), y=np.ones(2)),
    "protocols.n_coordinates": kw(dim=3),
    "protocols.ExactStatistics": kw(),
    "protocols.GaussianTree": kw(),
    "protocols.DiscreteGaussianTree": kw(),
    "protocols.VectorSum": kw(),
    "protocols.RunningTotal": kw(),
    "protocols.TreePrefix": kw(),
    "protocols.CentralTree": kw(),
    "protocols.GaussianFactorization": kw(),
    "protocols.PrefixTotal": kw(),
    "protocols.CentralFactorization": kw(),
    "protocols.factorization_sensitivity_factor": kw(factorization="banded-sqrt", n_steps=8, bands=3),
    "protocols.GaussianFullTree": kw(),
    "protocols.HonakerPrefix": kw(),
    "protocols.CentralHonakerTree": kw(),
    "protocols.StatisticsProtocol": lambda: ((), dict(randomizer=_protocol().randomizer,
                                                      intermediary=_protocol().intermediary,
                                                      analyzer=_protocol().analyzer, name="x", epsilon=1.0,
                                                      delta=1e-3)),
    "protocols.ExactVectors": kw(),
    "protocols.ClippedVectors": kw(),
    "protocols.DDGVectors": kw(),
    "protocols.PlainSum": kw(),
    "protocols.GaussianSum": kw(),
    "protocols.DDGDecoder": kw(),
    "protocols.SumProtocol": lambda: ((), dict(randomizer=_protocol("sum-central-gaussian").randomizer,
                                               intermediary=_protocol("sum-central-gaussian").intermediary,
                                               analyzer=_protocol("sum-central-gaussian").analyzer, name="x",
                                               epsilon=1.0, delta=1e-3)),
    # ---- theory
    "theory.fact1_error_bound": kw(t=100, epsilon=1.0, delta=1e-5),
    "theory.hybrid_error_bound": kw(t=100, epsilon=1.0, delta=1e-5),
    "theory.paper_regret_order": kw(T=1000, n_agents=4, n_arms=5, epsilon=1.0),
    "theory.master_worker_regret_bound": kw(T=1000, gaps=[0.1, 0.2], n_agents=4, epsilon=1.0),
    "theory.decentralized_regret_bound": kw(T=1000, gaps=[0.1, 0.2], c_i=[1.0, 1.5, 1.2], epsilon=1.0),
    "theory.ucb_regret_bound": kw(T=1000, gaps=[0.1, 0.2]),
    "theory.centralized_regret_bound": kw(T=1000, gaps=[0.1, 0.2], n_agents=4),
    "theory.master_worker_communications": kw(T=1000, n_arms=5),
    "theory.width_pulls": kw(width=lambda n: 1.0 / np.sqrt(n), target=0.1),
    "theory.check_batch_schedule": kw(horizon=100, batch_size=10),
    "theory.n_batches": kw(horizon=100, batch_size=10),
    "theory.kappa": kw(n_batches_=10),
    "theory.regularizer_lambda": kw(sigma=1.0, dim=3, n_batches_=10, alpha=0.01),
    "theory.confidence_radius": kw(t=100, lam=10.0, dim=3, n_agents=4, alpha=0.01),
    "theory.lemma67_regret_bound": kw(horizon=1000, n_agents=4, batch_size=10, dim=3, sigma=1.0),
    "theory.regret_bound_ldp": kw(horizon=1000, n_agents=4, dim=3, epsilon=1.0, delta=1e-3),
    "theory.regret_bound_sdp": kw(horizon=1000, n_agents=4, dim=3, epsilon=1.0, delta=1e-3),
    "theory.regret_bound_super_agent": kw(horizon=1000, n_agents=4, dim=3, epsilon=1.0, delta=1e-3),
    "theory.regret_bound_nonprivate": kw(horizon=1000, n_agents=4, dim=3),
    "theory.communication_rounds": kw(horizon=100, batch_size=10),
    "theory.optimal_batch_size": kw(horizon=1000, n_agents=4),
    "theory.nearest_divisor": kw(horizon=1000, batch_size=30.0),
    "theory.fixed_batch_noise_levels": kw(n_agents=20, epsilon=0.5, delta=0.1, horizon=1000, batch_size=10),
    "theory.error_proxy_local_slope": kw(name="concurrent", n=10_000, epsilon=1.0, delta=1e-6, k=2),
    "theory.supremum_factor_slope": kw(n_lo=1e4, finest_lo=10, n_hi=1e6, finest_hi=40),
    "theory.c_epsilon": kw(epsilon=1.0),
    "theory.rep_nk": kw(n=64, k=2, epsilon=1.0),
    "theory.big_nk": kw(n=64, k=2, epsilon=1.0),
    "theory.tree_levels": kw(n=64),
    "theory.local_error_rate": kw(n=64, epsilon=1.0),
    "theory.sequential_error_rate": kw(n=64),
    "theory.concurrent_error_rate": kw(n=64, k=2, epsilon=1.0),
    "theory.tree_error_rate": kw(n=64, epsilon=1.0),
    "theory.central_error_rate": kw(n=64, epsilon=1.0),
    "theory.lower_bound_rate": kw(n=64, k=2, epsilon=1.0),
    "theory.predicted_error_exponent": kw(algorithm="concurrent", k=2),
    "theory.bandit_regret_rate": kw(n=64, k=2, epsilon=1.0),
    "theory.sequential_bandit_regret": kw(n=64, batch_size=8),
    "theory.predicted_regret_exponent": kw(algorithm="concurrent", k=2),
    # ---- accounting (allocation, binomial, subsampling, amplification, calibration)
    "accounting.BinomialParams": lambda: ((), {f: getattr(_BINOMIAL, f) for f in (
        "bits", "k", "n", "d", "d_pad", "c", "epsilon", "delta", "p", "scale", "trials_per_client", "eps_round",
        "delta_round", "steps", "sampling_rate", "relation", "norm_growth")}),
    "accounting.binomial_params": kw(bits=16, k=3.0, n=8, d=4, c=1.0, epsilon=2.0, delta=1e-5),
    "accounting.binomial_run_epsilon": kw(eps0=0.5, delta0=1e-6, steps=4, q=0.5, slack=1e-6),
    "accounting.binomial_sensitivities": kw(c=1.0, s=0.01, d=4),
    "accounting.cpsgd_condition": kw(trials=1e6, p=0.5, s=0.01, d=4, delta=1e-5, delta_inf=100.0),
    "accounting.cpsgd_epsilon": kw(trials=1e6, p=0.5, s=0.01, d=4, delta=1e-5, sensitivities=(200.0, 100.0, 100.0)),
    "accounting.advanced_wins_from": kw(epsilon=1.0, delta=1e-5),
    "accounting.composed_guarantee": kw(eps0=0.1, delta0=1e-7, n_mechanisms=10, delta=1e-5),
    "accounting.mechanism_budget": kw(epsilon=1.0, delta=1e-5, n_mechanisms=10),
    "accounting.amplification_for": kw(relation="replace"),
    "accounting.poisson_subsampled_rdp": kw(orders=[2.0, 4.0], q=0.1, base_rdp=_gaussian_rdp),
    "accounting.without_replacement_rdp": kw(orders=[2.0, 4.0], q=0.1, base_rdp=_gaussian_rdp),
    "accounting.subsampled_rdp": kw(orders=[2.0, 4.0], q=0.1, base_rdp=_gaussian_rdp),
    "accounting.subsampled_epsilon": kw(base_rdp=_gaussian_rdp, q=0.1, steps=10, delta=1e-5),
    "accounting.sampled_gaussian_rdp": kw(orders=[2, 4], q=0.1, noise_multiplier=1.0),
    "accounting.sampled_gaussian_epsilon": kw(noise_multiplier=1.0, q=0.1, steps=10, delta=1e-5),
    "accounting.sampled_gaussian_noise_multiplier": kw(epsilon=1.0, delta=1e-5, q=0.1, steps=10),
    "accounting.smoothing_closeness": kw(scale=10.0, smoothing=2.0),
    "experiments.theorem2_trial": lambda: ((), dict(config=dict(n=8, d=4, c=1.0, epsilon=1.0, reps=3), rng=rng())),
    "accounting.share_closeness": kw(scale=10.0, shares=8),
    "accounting.sampling_tail": kw(q=0.1, population=1000, shares=150, steps=10),
    "accounting.noise_shares_for": kw(q=0.1, population=1000, steps=10, delta=1e-5),
    "accounting.client_shares": kw(shares=10, clients=4),
    "accounting.SampledDDGBound": kw(epsilon=1.0, delta=1e-5, noise_multiplier=2.0, gaussian_epsilon=1.0,
                                     gaussian_delta=1e-5, closeness=0.0, tail=1e-9, shares=150),
    "accounting.sampled_ddg_bound": kw(noise_std=1.0, delta2=0.3, gamma=1e-3, dim=8, sampling_rate=0.1, steps=10,
                                       population=1000, delta=1e-5),
    "accounting.sampled_ddg_epsilon": kw(noise_std=1.0, delta2=0.3, gamma=1e-3, dim=8, sampling_rate=0.1, steps=10,
                                         population=1000, delta=1e-5),
    "accounting.sampled_ddg_noise_std": kw(epsilon=1.0, delta2=0.3, gamma=1e-3, dim=8, sampling_rate=0.1, steps=10,
                                           population=1000, delta=1e-5),
    "accounting.SampledDiscreteGaussianSumEvent": kw(clip=1.0, gamma=0.01, beta=0.6, dim=4, noise_std=2.0,
                                                     sampling_rate=0.1, population=1000, shares=150),
    "accounting.group_privacy_route_epsilon": kw(sigma0=5.0, n_records=4, n_agents=10, delta=1e-5),
    "accounting.shuffled_gaussian_epsilon_far": kw(sigma0=2.0, delta=1e-5),
    "accounting.shuffled_gaussian_epsilon_mc": lambda: ((), dict(sigma0=2.0, n_agents=3, others=1.0, delta=1e-3,
                                                                 n_samples=500, rng=rng())),
    "accounting.shuffled_gaussian_privacy_loss": lambda: ((), dict(sigma0=2.0, n_agents=3, others=1.0, n_samples=500,
                                                                   rng=rng())),
    "accounting.zc_lemma_sigma0": kw(epsilon=1.0, delta=1e-5, n_agents=100, n_records=4),
    "accounting.DeshuffleScenario": lambda: ((), {f: getattr(_scenarios()[0], f) for f in (
        "label", "direction", "target", "neighbour", "others", "fill", "means0", "means1", "others_means")}),
    "accounting.deshuffle_scenarios": kw(batch_size=2, n_nodes=2, feature_bound=1.0, reward_bound=1.0,
                                         relation="replace", dominant=True),
    "accounting.deshuffled_max_logpdf": kw(t=np.array([0.0, 1.0]), mean=1.0, others=0.0, n_messages=3, sigma0=1.0),
    "accounting.deshuffled_gaussian_delta": kw(epsilon=0.5, sigma0=1.0, n_messages=3, means0=[0.0], means1=[1.0],
                                               others=[0.0], t_step=0.01, loss_step=0.01, max_loss=30.0),
    "accounting.deshuffled_gaussian_epsilon": kw(delta=1e-3, sigma0=1.0, n_messages=3, means0=[0.0], means1=[1.0],
                                                 others=[0.0], t_step=0.01, loss_step=0.01, max_loss=30.0),
    "accounting.DeshuffledGaussianEvent": lambda: ((), dict(sigma0=1.0, n_messages=3, scenarios=_scenarios(),
                                                            summed=_event())),
    "accounting.deshuffled_event_epsilon": lambda: ((), dict(
        event=__import__("fedbandit.accounting.deshuffle", fromlist=["x"]).DeshuffledGaussianEvent(1.0, 3, _scenarios()),
        delta=1e-3)),
    "accounting.authors_vector_sum_constant": kw(delta=1e-5, dim=3, n_coordinates=9),
    "accounting.authors_vector_sum_lambda_sigma": kw(epsilon=1.0, delta=1e-5, n_batches=8, dim=3),
    "accounting.authors_vector_sum_noise": kw(epsilon=1.0, delta=1e-5, dim=3),
    # ---- audit (end to end, tight, views, broken variants)
    "audit.AuditReport": lambda: ((), dict(name="x", kind="tight", view="v", attack="a", relation="replace",
                                           claimed_epsilon=1.0, delta=1e-5, status="verified",
                                           result=_audit_result())),
    "audit.EndToEndSpec": kw(name="x", family="stream", learner=None, protocol="counter-laplace",
                             protocol_params={"epsilon": 1.0}),
    "audit.EndToEndMechanism": lambda: ((), dict(spec=_spec("stream/counter-laplace"))),
    "audit.audit_end_to_end": lambda: ((), dict(spec=_spec("stream/counter-laplace"), n_trials=200, rng=rng(),
                                                power=False)),
    "audit.first_release_audit": lambda: ((), dict(spec=_spec("fixed-batch/central"), n_trials=200, rng=rng(),
                                                   check_runs=50)),
    "audit.end_to_end_specs": kw(),
    "audit.pair_end_to_end_specs": kw(),
    "audit.linear_users": kw(M=2, K=3, d=2, T=4),
    "audit.users_from_environment": lambda: ((), dict(
        env=__import__("fedbandit.envs", fromlist=["x"]).SyntheticLinearEnv(2, 3, 2, seed=0), T=4)),
    "audit.TargetRewardBandit": kw(means=np.array([0.7, 0.2]), agent=1, slot=2, value=0.0, horizon=3, n_agents=2),
    "audit.KnownProjection": kw(direction=np.array([1.0, 0.0])),
    "audit.LearnedProjection": kw(),
    "audit.ReleaseRecorder": kw(),
    "audit.Tap": lambda: ((), dict(inner=_protocol("central").intermediary)),
    "audit.tapped": lambda: ((), dict(protocol=_configured("central"))),
    "audit.replay_check": kw(learner="fixed-batch", protocol="non-private", overrides={}, targets=(("first", 0),)),
    "audit.replaying": lambda: ((), dict(protocol=_protocol("central"), log=_replay_log())),
    "audit.TightAudit": lambda: ((), dict(protocol=_configured("central"), rng=rng(), check_runs=50)),
    "audit.tight_audit": lambda: ((), dict(protocol=_configured("central"), n_trials=200, rng=rng(), check_runs=50)),
    "audit.target_records": kw(dim=2, relation="replace"),
    "audit.DeshuffleAudit": lambda: ((), dict(protocol=_amplification(), delta=1e-3, chunk=100)),
    "audit.deshuffle_audit": lambda: ((), dict(protocol=_amplification(), n_trials=200, rng=rng(), n_select=100,
                                               confidence=0.9, delta=1e-3, chunk=100, name="x")),
    "audit.claim_of": lambda: ((), dict(accounting=_configured("central").accounting())),
    "audit.nodes_from_prefixes": kw(prefixes=np.arange(8.0).reshape(1, 4, 2)),
    "audit.tree_nodes_containing": kw(batch=2, n_batches=8),
    "audit.noise_scale_of": lambda: ((), dict(protocol=_protocol("central"))),
    "audit.with_noise_scale": lambda: ((), dict(protocol=_protocol("central"), factor=0.5)),
    "audit.scale_noise_in_place": lambda: ((), dict(protocol=_configured("central"), factor=0.5)),
    # ---- book
    "book.Control": kw(values=[1, 2, 3]),
    "book.explorer_mode": kw(),
    "book.decode_explorer": lambda: ((), dict(state=_explorer_state(), name="fuzz")),
    "book.make_explorer": lambda: ((), dict(func=_explorer_figure, controls={"a": [1, 2]}, name="fuzz", mode="static",
                                            dpi=10)),
    # ---- envs
    "envs.CategoricalBandit": kw(means=np.array([0.5, 0.25]), values=np.array([0.0, 1.0]),
                                 probs=np.array([[0.5, 0.5], [0.75, 0.25]])),
    "envs.OrthogonalArmsEnv": kw(gaps=[0.1, 0.4], dim=2, block_size=16),
    "envs.ranker_bandit": kw(n_arms=3),
    "envs.ranker_distributions": kw(),
    "envs.ranker_table_path": kw(),
    "envs.load_ranker_table": kw(),
    "envs.shipped_data_path": lambda: ((), dict(name="mslr_rankers.npz", default=_ranker_path())),
    # ---- experiments
    "experiments.accounting_under": lambda: ((), dict(config=_model_config("fixed-batch/central"),
                                                      relation="replace")),
    "experiments.end_to_end_audit": lambda: ((), dict(config={"spec": "stream/counter-laplace", "n_trials": 200},
                                                      rng=rng())),
    "experiments.regret_trial": lambda: ((), dict(config=dict(
        n=40, epsilon=4.0, delta=1e-6, dim=2, instance="gaps", gaps=[0.1, 0.4], runs_per_gap=1, min_period=8,
        protocols=[{"label": "np", "protocol": "non-private"}]), rng=rng())),
    "experiments.package_source_hash": kw(),
    # ---- learners
    "learners.weighted_upper": kw(matrices=np.tile(np.eye(2), (2, 1, 1))),
    "learners.table_products": kw(table=np.ones((3, 2))),
    "learners.table_scores": kw(table=np.ones((3, 2)), theta_hat=np.zeros((2, 2)), v_inv=np.tile(np.eye(2), (2, 1, 1))),
    "learners.select_from_table": kw(lin=np.zeros((2, 3)), width=np.ones((2, 3)),
                                     arm_ids=np.zeros((1, 2, 1, 3), dtype=int) + np.arange(3), betas=np.ones(1)),
    "learners.serve_from_statistics": kw(features=np.ones((1, 2, 1, 3, 2)), theta_hat=np.zeros((2, 2)),
                                         v_inv=np.tile(np.eye(2), (2, 1, 1)), betas=np.ones(1)),
    # ---- mechanisms
    "mechanisms.BinomialMechanism": lambda: ((), dict(params=_BINOMIAL)),
    "mechanisms.paper_batch_sizes": kw(n=64, k=2),
    # ---- protocols
    "protocols.BatchSumAnalyzer": kw(),
    "protocols.BinomialDecoder": kw(),
    "protocols.BinomialVectors": kw(),
    "protocols.VectorSumRecords": kw(),
    "protocols.gram_noise_scale": kw(dim=3, gram_noise="mirror"),
    "protocols.SequentialVectorSumProtocol": lambda: ((), dict(
        randomizer=_protocol("sequential-vector-sum").randomizer,
        intermediary=_protocol("sequential-vector-sum").intermediary,
        analyzer=_protocol("sequential-vector-sum").analyzer, name="x", epsilon=1.0, delta=1e-3)),
    # ---- theory
    "theory.big_ladder": kw(n=64, k=2, epsilon=1.0),
    "theory.rep_threshold": kw(k=2, epsilon=1.0, run_length=4.0),
    "theory.window_variance_inflation": kw(run_length=4),
    "theory.ddg_mse_bound": lambda: ((), dict(params=_DDG)),
    "theory.ddg_mse_terms": lambda: ((), dict(params=_DDG)),
    "theory.theorem2_gamma": kw(c=1.0, n=8, d=4, epsilon=1.0),
    "theory.theorem2_mse": kw(c=1.0, n=8, d=4, epsilon=1.0),
    "theory.theorem2_beta": kw(n=8),
    "theory.theorem2_bits": kw(c=1.0, n=8, d=4, epsilon=1.0),
    "theory.theorem2_params": kw(c=1.0, n=8, d=4, epsilon=1.0),
    "theory.ddg_mean_mse_by_bits": kw(epsilon=2.0, k=2.0, n=16, dim=8, clip=1.0, max_bits=12),
    "theory.theorem2_sigma": kw(c=1.0, n=8, epsilon=1.0),
}

#: Callables not fuzzed, with the reason (keep this list short).
UNFUZZED = {
    "audit.ReplayViolation": "an exception class",
    "audit.ReplayLog": "a record of one run's protocol calls (filled by fedbandit.audit.replay.replaying)",
    "audit.ReplayReport": "the result record of replay_check (tested in tests/test_replay_contract.py)",
    "audit.compare_calls": "compares two ReplayLogs of replay_check's runs against a target record built there "
                           "(tested in tests/test_replay_contract.py)",
    "audit.replay_pairs": "no arguments; builds every learner × protocol pair (tested in tests/test_replay_contract.py)",
    "accounting.AmplificationValidityError": "an exception class",
    "accounting.AmplificationValidityWarning": "a warning class",
    "envs.DisconnectedGraphError": "an exception class",
    "protocols.ProtocolStateError": "an exception class",
    "protocols.Protocol": "abstract base class (tested through every registered protocol)",
    "protocols.Randomizer": "abstract base class (tested through every registered protocol)",
    "protocols.Intermediary": "abstract base class (tested through every registered protocol)",
    "protocols.Analyzer": "abstract base class (tested through every registered protocol)",
    "protocols.CounterRandomizer": "abstract base class (tested through the counter protocols)",
    "protocols.Server": "a typing Protocol (interface), not callable code",
    "protocols.StatisticsNoise": "abstract base class (tested through every registered statistics protocol)",
    "protocols.StatisticsRandomizer": "abstract base class (tested through every registered statistics protocol)",
    "protocols.StatisticsAnalyzer": "abstract base class (tested through every registered statistics protocol)",
    "protocols.CentralStatisticsAnalyzer": "abstract base class (tested through 'central' and 'central-mf')",
    "protocols.SumNoise": "abstract base class (tested through every registered sum protocol)",
    "protocols.SumRandomizer": "abstract base class (tested through every registered sum protocol)",
    "protocols.SumAnalyzer": "abstract base class (tested through every registered sum protocol)",
    "protocols.ModularVectors": "abstract base class (tested through 'sum-ddg-secagg' and 'sum-binomial-secagg')",
    "protocols.RecordRandomizer": "abstract base class (tested through the concurrent-shuffle protocols)",
    "protocols.RecordAnalyzer": "abstract base class (tested through the concurrent-shuffle protocols)",
    "protocols.StatisticsSetting": "a frozen record built by StatisticsProtocol.configure, which checks every field "
                                   "(fuzzed through the protocols' configure)",
    "protocols.SumSetting": "a frozen record built by SumProtocol.configure, which checks every field",
    "protocols.CounterSetting": "a frozen record built by CounterProtocol.configure, which checks every field",
    "protocols.RecordSetting": "a frozen record built by ConcurrentShuffleProtocol.configure, which checks every field",
    "protocols.register": "decorator for new protocol factories; takes the factory to register",
    "learners.register_learner": "decorator for new learner classes; takes the class to register",
    "envs.register_environment": "decorator for new environment builders; takes the function to register "
                                 "(tested in tests/test_plugin_environment.py)",
    "envs.EnvironmentInfo": "the registry's record of an environment (built by register_environment)",
    "envs.unregister_environment": "removes a registered environment (tested in tests/test_plugin_environment.py)",
    "protocols.unregister": "removes a registered protocol (tested in tests/test_plugin_protocol.py)",
    "learners.unregister_learner": "removes a registered learner (tested in tests/test_plugin_learner.py)",
    "book.setup": "the Sphinx extension's entry point; takes a live Sphinx application",
    "book.glue_number": "writes into the executing notebook's glue store (tested in tests/test_prose.py)",
    "book.band": "draws on a live matplotlib axis (tested through the chapters)",
    "book.log_ticks": "sets the ticks of a live matplotlib axis (tested in tests/test_plotting.py)",
    "book.log_ticks_within": "sets the ticks of a live matplotlib axis (tested in tests/test_plotting.py)",
    "book.to_book_width": "resizes a live matplotlib figure (tested in tests/test_plotting.py)",
    "book.finish": "checks, saves and displays a live matplotlib figure (tested in tests/test_plotting.py)",
    "book.check_figure": "draws a live matplotlib figure (tested in tests/test_plotting.py)",
    "book.figure_problems": "draws a live matplotlib figure (tested in tests/test_plotting.py)",
    "book.figure_png": "saves a live matplotlib figure (tested in tests/test_plotting.py)",
    "book.FigureTextError": "an exception class",
    "book.print_pdf": "launches Chromium on a built book (make pdf; tested in tests/test_browser.py)",
    "envs.build_mslr_instance": "reads the MSLR-WEB10K source files (not shipped; tested with a synthetic file)",
    "envs.save_mslr_instance": "writes a data file into the package's data directory",
    "experiments.stack_results": "in experiments/grid.py, which the lead is changing in parallel (results='abc' "
                                 "and key=nan still raise TypeError/KeyError naming nothing: to fix there)",
    "experiments.run_grid": "takes a user function and a cache directory (tested in tests/test_experiments.py)",
    "experiments.run_regret_grid": "run_grid of regret_trial with a cache directory (its configurations are "
                                   "regret_trial's, fuzzed; lockstep equality in tests/test_concurrent_linucb.py)",
    "experiments.applicability": "builds every learner-protocol pair (seconds per call; tested in tests/test_synthesis.py)",
    "experiments.applicability_table": "builds every learner-protocol pair (seconds per call)",
    "experiments.model_config": "takes a Model; its entries are checked by run_config (fuzzed)",
    "experiments.side_by_side_configs": "builds configs for run_config (fuzzed)",
    "experiments.sweep_configs": "builds configs for run_config (fuzzed)",
    "experiments.random_play_regret": "a config of run_config (fuzzed)",
    "audit.planted_noise": "a context manager that patches module attributes (its arguments are checked on entry; "
                           "tested in tests/test_planted_noise.py)",
    "experiments.audit_side_by_side": "runs an end-to-end audit (seconds per call; tested in tests/test_synthesis.py)",
    "experiments.table_rows": "formats results of run_config",
    "experiments.markdown_table": "formats rows of table_rows",
    "experiments.claim_lower_bound": "builds a learner from a run_config configuration (its keys are fuzzed through run_config)",
    "experiments.pair_audit_rows": "formats audit reports (dicts of audit_end_to_end / audit_side_by_side) into rows",
    "envs.KArmedBandit": "the (abstract) base class of the K-armed bandits (fuzzed through Bernoulli-, Gaussian- and CategoricalBandit)",
    "book.DecodedExplorer": "a record built by decode_explorer from saved widget state (its fields are not user input)",
    "book.sync_execution_cache": "deletes a directory and writes a stamp file next to it (tested in tests/test_experiments.py)",
    "book.book_notebooks": "reads the book's _toc.yml from disk (tested in tests/test_experiments.py)",
    "book.execute_missing": "executes the book's notebooks (minutes; exercised by make book and make test)",
    "envs.SharedEnvironment": "built by share() inside run_in_lockstep from the group's block store, not by users "
                              "(tested in tests/test_sharing.py)",
    "experiments.prune_cache": "deletes cache folders on disk (tested in tests/test_experiments.py)",
    "envs.build_ranker_table": "reads the rankeval source archive (not shipped; tested with a synthetic file)",
    "envs.read_rankeval_sample": "reads the rankeval source archive (not shipped; tested with a synthetic file)",
    "envs.save_ranker_table": "writes a data file into the repository's data directory",
    "secagg.*": "the secure-aggregation helper validates and tests fedbandit.secagg (tests/test_secagg*.py)",
}


# ---------------------------------------------------------------------------------------
# protocol factories, lifecycle methods and configuration dicts
# ---------------------------------------------------------------------------------------

#: Parameters of the protocol factories where the defaults need a change to be valid and quick.
_PROTOCOL_PARAMS = {
    "sdp-amplification": dict(epsilon=1.0, delta=1e-3, force=True),
    "sdp-vector-sum": dict(epsilon=1.0, delta=0.1),
    "concurrent-shuffle": dict(epsilon=1.0, delta=1e-3, k=2),
}


def protocol_baselines() -> dict:
    """name → keyword arguments of a valid ``create(name, ...)`` for every registered protocol."""
    from fedbandit.protocols import available, describe

    out = {}
    for name in available():
        accepted = describe(name).parameters
        params = {k: v for k, v in (("epsilon", 1.0), ("delta", 1e-3)) if k in accepted}
        out[name] = {**params, **_PROTOCOL_PARAMS.get(name, {})}
    return out


def _method(make_object, method, **kwargs):
    def make():
        return getattr(make_object(), method), (), dict(kwargs)

    return make


def _configure_statistics(name):
    return _method(lambda: _protocol(name, **{k: v for k, v in _PROTOCOL_PARAMS.get(name, {}).items()}),
                   "configure", n_agents=1 if name == "concurrent-shuffle" else 2, dim=2, n_batches=4,
                   batch_size=4 if name == "concurrent-shuffle" else 2)


def _configured_sum(name):
    from fedbandit.protocols import create

    p = create(name) if name == "sum-non-private" else create(name, epsilon=2.0, delta=1e-5)
    return p.configure(n_parties=4, dim=3, n_rounds=1, clip=None if name == "sum-non-private" else 1.0)


def _reset_sum(name):
    p = _configured_sum(name)
    p.reset(n_runs=2, rng=rng())
    return p


def _configured_statistics(name="central"):
    p = _protocol(name)
    p.configure(n_agents=2, dim=2, n_batches=4, batch_size=2)
    p.reset(n_runs=2, rng=rng())
    return p


def _runner(learner, **extra):
    """run_config on a tiny instance for one learner; its config's entries are fuzzed one by one."""
    from fedbandit.experiments import run_config

    configs = {
        "fixed-batch": _synthetic_config(),
        "independent": dict(learner="independent", instance="synthetic", M=2, T=8, B=2, K=4, d=2, runs=2),
        "super-agent": _synthetic_config(learner="super-agent") if False else dict(
            _synthetic_config(), learner="super-agent"),
        "feducb": dict(learner="feducb", protocol="dp20", instance="synthetic", M=2, T=8, K=4, d=2, runs=2,
                       epsilon=1.0, delta=1e-3, noise="corrected", schedule="fixed", B=2),
        "concurrent-linucb": dict(learner="concurrent-linucb", protocol="central", instance="synthetic", M=1, T=16,
                                  K=4, d=2, runs=2, epsilon=1.0, delta=1e-3),
        "master-worker": dict(learner="master-worker", protocol="counter-hybrid", instance="bernoulli",
                              means=[0.2, 0.5, 0.8], M=2, T=20, runs=2, epsilon=1.0),
        "decentralized": dict(learner="decentralized", protocol="counter-hybrid", instance="bernoulli",
                              means=[0.2, 0.5, 0.8], M=3, T=20, runs=2, epsilon=1.0),
        "independent-ucb": dict(learner="independent-ucb", protocol="counter-hybrid", instance="bernoulli",
                                means=[0.2, 0.5, 0.8], M=2, T=20, runs=2, epsilon=1.0),
        "centralized-ucb": dict(learner="centralized-ucb", instance="bernoulli", means=[0.2, 0.5, 0.8], M=2, T=20,
                                runs=2),
        "federated-learning": dict(learner="federated-learning", protocol="sum-central-gaussian", instance="digits",
                                   n_clients=5, rounds=2, local_steps=1, epsilon=2.0, delta=1e-5),
    }
    config = {**configs[learner], **extra}

    def make():
        return run_config, (), dict(config=dict(config), rng=rng())

    return make


METHODS = {
    **{f"protocols.StatisticsProtocol.configure[{n}]": _configure_statistics(n)
       for n in ("non-private", "central", "silo-ldp", "sdp-amplification", "sdp-vector-sum", "ddg-secagg",
                 "gaussian-secagg", "ddg-shuffle", "dp20", "concurrent-shuffle")},
    "protocols.StatisticsProtocol.reset": _method(
        lambda: _protocol("central").configure(n_agents=2, dim=2, n_batches=4, batch_size=2) or _configured_statistics(),
        "reset", n_runs=2, rng=rng()),
    "protocols.StatisticsProtocol.synchronize": lambda: (
        _configured_statistics().synchronize, (), dict(bias=np.zeros((2, 2, 2)), gram=np.zeros((2, 2, 2, 2)))),
    **{f"protocols.CounterProtocol.configure[{n}]": _method(
        lambda n=n: _protocol(n), "configure", n_agents=2, n_arms=3, horizon=16)
       for n in ("counter-hybrid", "counter-binary", "counter-laplace", "counter-exact")},
    **{f"protocols.SumProtocol.configure[{n}]": _method(
        lambda n=n: __import__("fedbandit.protocols", fromlist=["x"]).create(n) if n == "sum-non-private" else
        __import__("fedbandit.protocols", fromlist=["x"]).create(n, epsilon=2.0, delta=1e-5),
        "configure", n_parties=4, dim=3, n_rounds=1, **({} if n == "sum-non-private" else {"clip": 1.0}))
       for n in ("sum-non-private", "sum-central-gaussian", "sum-ddg-secagg")},
    **{f"protocols.SumProtocol.aggregate[{n}]": (lambda n=n: (
        _reset_sum(n).aggregate, (), dict(vectors=np.full((2, 4, 3), 0.1))))
       for n in ("sum-non-private", "sum-central-gaussian", "sum-ddg-secagg")},
    "mechanisms.VectorSumShuffle.run": lambda: (
        __import__("fedbandit.mechanisms", fromlist=["x"]).VectorSumShuffle(1.0, 0.1, 10, 3).run, (),
        dict(v=np.zeros((10, 3)), rng=rng())),
    **{f"experiments.run_config[{name}]": _runner(name)
       for name in ("fixed-batch", "independent", "super-agent", "feducb", "concurrent-linucb", "master-worker",
                    "decentralized", "independent-ucb", "centralized-ucb", "federated-learning")},
}

#: Targets whose dict parameters are also fuzzed entry by entry: label → parameter names.
CONFIG_PARAMS = {
    "envs.make_environment": ("config",),
    "experiments.psco_trial": ("config",),
    "experiments.bandit_trial": ("config",),
    "experiments.dme_trial": ("config",),
    "experiments.regret_trial": ("config",),
    "experiments.end_to_end_audit": ("config",),
    "experiments.accounting_under": ("config",),
    **{label: ("config",) for label in METHODS if label.startswith("experiments.run_config[")},
}

#: Parameters passed through, unread, to a user-supplied callable, which names them by its
#: own parameter names: label -> {parameter: names a refusal may use instead}.
ALIASES = {
    label: {"dataset0": ("dataset",), "dataset1": ("dataset",)}
    for label in ("audit.audit_epsilon", "audit.audit_epsilon_split", "audit.select_action_attack")
}

#: Parameters that are paths: a path that does not exist is a FileNotFoundError naming it.
PATH_PARAMETERS = {"path"}

"""Every bad-input case named in issue 14, as a test (the property-based sweep is test_api_fuzz.py).

Each case is refused before any work with a ValueError/TypeError whose message names the
parameter; the hangs finish within a time bound.  Also: the argument-order convention of
the ``check_*`` helpers, enforced on the source.
"""

from __future__ import annotations

import ast
import math
import signal
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

PKG = Path(__file__).resolve().parents[1] / "fedbandit"


@contextmanager
def finishes_within(seconds):
    """Fail (instead of hanging) if the block runs longer than ``seconds``."""

    def alarm(signum, frame):
        raise TimeoutError(f"no result after {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# ---------------------------------------------------------------------------------------
# The vector sum's blanket probability (silent loss of privacy at p = 0)
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [0.0, -1.0, 2.0, 0.75, math.inf])
def test_vector_sum_refuses_p_outside_its_range(p):
    from fedbandit.mechanisms import VectorSumShuffle

    with pytest.raises(ValueError, match=r"p must lie in \(0.0, 0.5\]"):  # p = 0 was accepted, -1 and 2 "math domain"
        VectorSumShuffle(1.0, 0.1, 100, 5, p=p)
    with pytest.raises(ValueError, match="p must not be NaN"):
        VectorSumShuffle(1.0, 0.1, 100, 5, p=math.nan)


def test_vector_sum_p_0_no_longer_returns_the_exact_sum():
    from fedbandit.mechanisms import VectorSumShuffle

    with pytest.raises(ValueError, match="p"):
        VectorSumShuffle(1.0, 0.1, 100, 5, p=0.0).run(np.zeros((100, 5)), np.random.default_rng(0))
    m = VectorSumShuffle(1.0, 0.1, 100, 5)
    assert m.covered_by_theorem and m.noise_std() > 0
    other = VectorSumShuffle(1.0, 0.1, 100, 5, p=0.5)  # allowed, but not the theorem's p = 1/4
    assert not other.covered_by_theorem


def test_vector_sum_per_user_sampler_refuses_huge_draws():
    from fedbandit.mechanisms import VectorSumShuffle

    m = VectorSumShuffle(1.0, 0.1, 100, 5)  # b ~ 4.6e7 noise bits per user and coordinate
    with pytest.raises(ValueError, match="method='per_user'"):
        m.run(np.zeros((100, 5)), np.random.default_rng(0), method="per_user")


# ---------------------------------------------------------------------------------------
# epsilon = None for private protocols and learners (AttributeError: target_epsilon before)
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["silo-ldp", "central", "dp20", "sdp-amplification", "sdp-vector-sum", "ddg-secagg",
                                  "gaussian-secagg", "ddg-shuffle", "concurrent-shuffle", "counter-hybrid",
                                  "counter-binary", "counter-laplace", "sum-central-gaussian", "sum-ddg-secagg"])
@pytest.mark.parametrize("delta", [None, 0.1])
def test_private_protocols_refuse_epsilon_none_at_create(name, delta):
    from fedbandit.protocols import create

    kwargs = {"epsilon": None} if name.startswith("counter-") and delta is None else {"epsilon": None, "delta": delta}
    with pytest.raises(ValueError, match="epsilon"):
        create(name, **kwargs)


def test_super_agent_with_epsilon_none_is_refused_by_name():
    from fedbandit.experiments import run_config

    cfg = dict(learner="super-agent", protocol="central", instance="synthetic", M=2, T=8, K=4, d=2, runs=1,
               epsilon=None, delta=None)
    with pytest.raises((ValueError, TypeError), match="epsilon"):
        run_config(cfg, np.random.default_rng(0))


# ---------------------------------------------------------------------------------------
# Divisions by zero, negative widths and variances, NaN accepted
# ---------------------------------------------------------------------------------------

DDG = dict(c=1.0, gamma=0.01, beta=0.6, n=8, d=4, delta=1e-5)


@pytest.mark.parametrize("param, value", [("n", 0), ("delta", 0.0), ("n", -1), ("delta", 1.0), ("c", -1.0),
                                          ("gamma", math.nan), ("beta", 1.0), ("steps", 0), ("method", "x")])
def test_ddg_sigma_for_epsilon_refuses_bad_input_by_name(param, value):
    from fedbandit.accounting.ddg import ddg_sigma_for_epsilon

    with pytest.raises((ValueError, TypeError), match=param):
        ddg_sigma_for_epsilon(1.0, **{**DDG, param: value})


@pytest.mark.parametrize("value", [-1, 0, math.nan, math.inf, -math.inf, "abc", None])
@pytest.mark.parametrize("param", ["scale", "rho"])
def test_privacy_width_numerator_refuses_nonpositive_and_nan(param, value):
    from fedbandit.learners.consensus import privacy_width_numerator

    args = dict(kind="std", t=10, scale=1.0, rho=2.0)
    with pytest.raises((ValueError, TypeError), match=param):
        privacy_width_numerator(**{**args, param: value})


def test_privacy_width_numerator_is_positive_where_it_is_defined():
    from fedbandit.learners.consensus import privacy_width_numerator

    for kind in ("std", "fact1"):
        assert privacy_width_numerator(kind, 10, 0.5, 2.0) > 0
    with pytest.raises(ValueError, match="rho"):
        privacy_width_numerator("std", 10, 1.0, 1.0)  # rho must exceed 1


@pytest.mark.parametrize("func", ["hybrid_noise_variance", "per_item_noise_variance", "binary_noise_variance"])
@pytest.mark.parametrize("param, value", [("epsilon", -1.0), ("epsilon", 0.0), ("epsilon", math.nan),
                                          ("epsilon", math.inf), ("n", -3), ("n", -1), ("n", 2.5), ("n", math.inf)])
def test_counter_variances_refuse_bad_epsilon_and_counts(func, param, value):
    import fedbandit.mechanisms.continual_counting as mech

    args = dict(n=10, epsilon=1.0) if func != "binary_noise_variance" else dict(n=10, n_steps=16, epsilon=1.0)
    with finishes_within(5), pytest.raises((ValueError, TypeError), match=param):
        getattr(mech, func)(**{**args, param: value})


def test_counter_variances_old_wrong_values_are_gone():
    from fedbandit.mechanisms.continual_counting import binary_noise_variance, hybrid_noise_variance

    # eps = -1 gave variance 104 and n = -3 gave 0: both refused now; the valid values stand
    assert hybrid_noise_variance(10, 1.0) > 0 and binary_noise_variance(10, 16, 1.0) > 0
    assert float(hybrid_noise_variance(0, 1.0)) == 0.0


@pytest.mark.parametrize("param, value", [("n_users", -1), ("n_users", 0), ("count", -1), ("count", 101),
                                          ("n_users", "abc"), ("p", 1.0), ("p", math.nan)])
def test_rr_debias_refuses_impossible_counts(param, value):
    from fedbandit.mechanisms.randomized_response import rr_debias

    args = dict(count=30, n_users=100, p=0.1)
    with pytest.raises((ValueError, TypeError), match=param):
        rr_debias(**{**args, param: value})


# ---------------------------------------------------------------------------------------
# Hangs
# ---------------------------------------------------------------------------------------


def test_binary_noise_variance_negative_count_does_not_hang():
    from fedbandit.mechanisms.continual_counting import binary_noise_variance

    with finishes_within(5), pytest.raises(ValueError, match="n must hold integers in"):
        binary_noise_variance(-1, 16, 1.0)  # a right shift of a negative int64 never reached 0


@pytest.mark.parametrize("tol", [0.0, -1e-3, 1e-300, math.nan, 1.0])
def test_fmt22_numerical_epsilon_tol_is_checked(tol):
    from fedbandit.accounting.amplification import fmt22_numerical_epsilon

    with finishes_within(5), pytest.raises(ValueError, match="tol"):
        fmt22_numerical_epsilon(0.5, 1000, 1e-6, tol=tol)


@pytest.mark.parametrize("horizon", [1e300, 10**30, 10**13, 3.0, True])
@pytest.mark.parametrize("func", ["optimal_batch_size", "regret_bound_ldp", "regret_bound_sdp", "regret_bound_nonprivate"])
def test_horizon_functions_refuse_absurd_horizons_quickly(func, horizon):
    import fedbandit.theory.linear as th

    args = {"optimal_batch_size": (4,), "regret_bound_nonprivate": (4, 3)}.get(func, (4, 3, 1.0, 1e-3))
    with finishes_within(5), pytest.raises((ValueError, TypeError), match="horizon"):
        getattr(th, func)(horizon, *args)


def test_largest_horizon_is_fast():
    from fedbandit.theory.linear import MAX_HORIZON, optimal_batch_size

    start = time.perf_counter()
    optimal_batch_size(MAX_HORIZON, 10)
    assert time.perf_counter() - start < 5.0


def test_check_batch_schedule_message_does_not_loop_over_b():
    from fedbandit.theory.linear import check_batch_schedule

    with finishes_within(5), pytest.raises(ValueError, match="nearest valid B"):
        check_batch_schedule(10**12, 10**11 + 1)


# ---------------------------------------------------------------------------------------
# Solver failures and huge allocations
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("func", ["split_budget_advanced", "level_budget"])
def test_budget_splits_do_not_fail_in_the_solver(func):
    import fedbandit.accounting.composition as acc

    with pytest.raises(ValueError, match="epsilon must be at most 1e\\+100"):
        getattr(acc, func)(1e300, 0.1, 10)  # RuntimeError from brentq before
    for eps in (1e99, 1e6, 50.0):  # large budgets: basic composition, no solver failure
        eps0, delta0 = getattr(acc, func)(eps, 0.1, 10)
        assert eps0 == pytest.approx(eps / 10) and delta0 == pytest.approx(0.01)


def test_budget_split_unchanged_where_advanced_composition_wins():
    from fedbandit.accounting.composition import advanced_composition, split_budget_advanced

    eps0, delta0 = split_budget_advanced(0.1, 1e-5, 50)
    assert eps0 > 0.1 / 50
    assert advanced_composition(eps0, delta0, 50, 0.5e-5)[0] == pytest.approx(0.1, rel=1e-9)


@pytest.mark.parametrize("n_users", [10**30, 2**62 + 1])
def test_rr_flip_probability_refuses_huge_batches_without_allocating(n_users):
    from fedbandit.accounting.shuffle import rr_flip_probability

    with finishes_within(5), pytest.raises(ValueError, match="n_users"):
        rr_flip_probability(n_users, 1.0, 1e-6)  # tried to allocate 105 GiB


def test_rr_shuffle_delta_wide_window_is_not_allocated():
    from fedbandit.accounting.shuffle import rr_flip_probability, rr_shuffle_delta

    with finishes_within(10):
        p = rr_flip_probability(10**15, 1.0, 1e-6)
        assert 0 < rr_shuffle_delta(1.0, 10**15, p) <= 1e-6


# ---------------------------------------------------------------------------------------
# Booleans and integers
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["abc", "no", 1, 0, None, np.array([True])])
def test_force_and_exact_must_be_bools(value):
    from fedbandit.accounting.amplification import fmt22_closed_form_epsilon, zc_amplification_sigma0
    from fedbandit.mechanisms import sample_discrete_gaussian
    from fedbandit.protocols import create

    with pytest.raises(TypeError, match="force"):
        fmt22_closed_form_epsilon(5.0, 10, 1e-6, force=value)  # force="no" forced a run outside validity
    with pytest.raises(TypeError, match="force"):
        zc_amplification_sigma0(1.0, 1e-3, 10, 4, 100, force=value)
    with pytest.raises(TypeError, match="force"):
        create("sdp-amplification", epsilon=1.0, delta=1e-3, force=value)
    with pytest.raises(TypeError, match="exact"):
        sample_discrete_gaussian(2.0, 3, np.random.default_rng(0), exact=value)


@pytest.mark.parametrize("value", [3.0, 1e300, True, np.float64(4.0), "3"])
def test_check_positive_int_takes_ints_only(value):
    from fedbandit._validation import check_positive_int

    with pytest.raises(TypeError, match="n must be an integer"):
        check_positive_int("n", value)


def test_check_positive_int_accepts_numpy_ints_and_states_its_cap():
    from fedbandit._validation import check_positive_int

    assert check_positive_int("n", np.int64(3)) == 3 and check_positive_int("n", np.uint8(3)) == 3
    with pytest.raises(ValueError, match=r"n must be an integer in \[1, 10\^9\] \(why\), got 1000000001"):
        check_positive_int("n", 10**9 + 1, max_value=10**9, reason="why")


# ---------------------------------------------------------------------------------------
# The convention: check_x(name, value, ...)
# ---------------------------------------------------------------------------------------


def _bad_check_calls(source: str, helpers) -> list[str]:
    """Calls of the ``check_*`` helpers in ``source`` whose first argument is not a name (str or f-string)."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if name not in helpers:
            continue
        first = node.args[0] if node.args else None
        ok = isinstance(first, ast.JoinedStr) or (isinstance(first, ast.Constant) and isinstance(first.value, str))
        # helpers forwarding their own ``name``, and names held in module constants (``_ENV_BACKEND``)
        ok = ok or (isinstance(first, ast.Name) and (first.id == "name" or first.id.lstrip("_").isupper()))
        if not ok:
            bad.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
    return bad


def _helpers():
    import fedbandit._validation as v

    return {n for n in v.__all__ if n.startswith("check_")}


def test_every_check_helper_takes_the_name_first():
    """``check_x(name, value)`` everywhere in the package: the first argument is the parameter's name."""
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        bad += [f"{path.relative_to(PKG.parent)}:{b}" for b in _bad_check_calls(path.read_text(), _helpers())]
    assert not bad, "check_* calls whose first argument is not the parameter's name:\n" + "\n".join(bad)


def test_the_convention_check_catches_value_first_calls():
    """The source check can fail: the old orders are reported, the convention is not."""
    helpers = _helpers()
    assert _bad_check_calls('check_epsilon(epsilon, "epsilon")', helpers)
    assert _bad_check_calls("rng = check_rng(rng)", helpers)
    assert _bad_check_calls("check_batch_sizes(batch_sizes, n)", helpers)
    assert not _bad_check_calls('check_epsilon("epsilon", epsilon); check_int_in_range(f"b[{i}]", b, 1, None)', helpers)

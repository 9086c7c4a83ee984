"""Property-based test of the whole public API: bad input is refused, by name, quickly.

For every public callable (every name in the ``__all__`` of every public module of a subpackage, the
parameters of every registered protocol through :func:`fedbandit.protocols.create`, the entries of
the configuration dicts, and a few lifecycle methods) ``tests/_api_baselines.py`` gives a
small valid call.  Each test perturbs ONE argument of that call at a time -- NaN, ±inf,
negative, zero, huge, fractional, wrong types, None, lists, strings, arrays; a fixed
grid of such values, then values drawn by hypothesis -- and requires that the call

* either returns normally (the value was acceptable),
* or raises ``ValueError`` / ``TypeError`` (or a subclass) whose message names the
  perturbed parameter (or configuration key);

and that it finishes within :data:`TIME_LIMIT` seconds of CPU time (a hang is a failure; a
wall-clock backstop of :data:`WALL_LIMIT` catches a call that blocks without computing) and within
:data:`MEMORY_LIMIT_GB` of additional address space (a huge allocation raises
``MemoryError``, which is a failure).  Any other exception -- ``ZeroDivisionError``,
``OverflowError``, ``RuntimeError``, ``AttributeError``, ``KeyError``, "math domain
error", ... -- is a failure.  Callables that are not fuzzed are listed with the reason in
``_api_baselines.UNFUZZED``; the first test checks that the two tables cover every export.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import signal
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _api_baselines import (  # noqa: E402
    ALIASES,
    BASELINES,
    CONFIG_PARAMS,
    METHODS,
    PATH_PARAMETERS,
    UNFUZZED,
    protocol_baselines,
)
from _public_api import SUBPACKAGES, public_names, resolve  # noqa: E402

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

#: CPU seconds (user + sys, this process) one call may take; the baselines take < 0.5 s.  CPU time,
#: not wall time, so that other processes on a loaded machine cannot fail the test.
TIME_LIMIT = 5.0
#: Wall-clock seconds after which a call that is not computing (blocked) counts as a hang.
WALL_LIMIT = 60.0
#: Extra address space one call may reserve, in GiB (beyond it numpy raises MemoryError).
MEMORY_LIMIT_GB = 4.0


class Hang(BaseException):
    """Raised by the timer in the middle of a call that exceeds TIME_LIMIT (a BaseException,
    so that no ``except Exception`` in the code under test swallows it)."""


#: The fixed grid of bad values (every one of them, for every parameter of every callable).
BAD_VALUES = (
    math.nan,
    math.inf,
    -math.inf,
    -1,
    0,
    -0.5,
    2.5,
    1e300,
    10**30,
    2**62,
    "abc",
    None,
    True,
    [1, 2],
    {"a": 1},
    np.array([math.nan, 1.0]),
    np.float64(math.nan),
    np.int64(-3),
)


def _label(value) -> str:
    text = repr(value)
    return text if len(text) < 40 else text[:37] + "..."


def _exported():
    """(qualified name, object) of every public callable: ``"<subpackage>.<name>"`` for every name in
    the ``__all__`` of a public module of the subpackage (its top level exports only a few of them)."""
    out = []
    for sub in SUBPACKAGES:
        for name in public_names(sub):
            obj = resolve(sub, name)
            if callable(obj):
                out.append((f"{sub}.{name}", obj))
    return out


def _resolve(qualified):
    sub, name = qualified.split(".", 1)
    return resolve(sub, name)


# ---------------------------------------------------------------------------------------
# targets: (label, make) where make() -> (callable, args, kwargs, parameter names, config params)
# ---------------------------------------------------------------------------------------


def _parameters(func, args, kwargs):
    """Names of the parameters one may perturb: every named parameter of the signature."""
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):  # pragma: no cover - builtins
        return list(kwargs)
    names = []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_KEYWORD,):
            continue
        if p.kind is p.VAR_POSITIONAL:
            names.extend(f"*{i}" for i in range(len(args)))
            continue
        if p.kind is p.POSITIONAL_ONLY:  # pragma: no cover - none in fedbandit
            continue
        names.append(p.name)
    return names


def _targets():
    targets = {}
    for qualified, make in BASELINES.items():
        targets[qualified] = functools.partial(_function_target, qualified, make)
    for qualified, make in METHODS.items():
        targets[qualified] = make
    for name, params in protocol_baselines().items():
        targets[f"protocols.create:{name}"] = functools.partial(_create_target, name, params)
    return targets


def _function_target(qualified, make):
    func = _resolve(qualified)
    args, kwargs = make()
    return func, args, kwargs


def _create_target(name, params):
    from fedbandit.protocols import create

    return functools.partial(create, name), (), dict(params)


TARGETS = _targets()


def _perturbed(target, parameter, value):
    """The call of ``target`` with ``parameter`` set to ``value`` (a config entry if 'config[key]')."""
    func, args, kwargs = target()
    args = list(args)
    if parameter.startswith("*"):
        args[int(parameter[1:])] = value
    elif "[" in parameter:
        outer, key = parameter[:-1].split("[", 1)
        config = dict(kwargs[outer])
        config[key] = value
        kwargs = {**kwargs, outer: config}
    else:
        kwargs = {**kwargs, parameter: value}
    return func, tuple(args), kwargs


def _perturbable(label):
    func, args, kwargs = TARGETS[label]()
    base = getattr(func, "func", func)
    names = _parameters(func, args, kwargs) if not isinstance(func, functools.partial) else list(kwargs)
    if isinstance(func, functools.partial) and base.__name__ == "create":
        names = list(kwargs)
    for outer in CONFIG_PARAMS.get(label, ()):
        names.extend(f"{outer}[{key}]" for key in kwargs[outer])
    return names


@contextlib.contextmanager
def _limits():
    """A per-call CPU-time alarm, a wall-clock backstop and an address-space limit."""

    def on_alarm(signum, frame):
        raise Hang()

    old_handler = signal.signal(signal.SIGALRM, on_alarm)
    old_prof_handler = signal.signal(signal.SIGPROF, on_alarm)
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        with open("/proc/self/statm") as f:
            current = int(f.read().split()[0]) * resource.getpagesize()
        limit = current + int(MEMORY_LIMIT_GB * 2**30)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ImportError, OSError, ValueError):  # pragma: no cover - not Linux
        soft = hard = None
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGALRM, old_handler)
        signal.signal(signal.SIGPROF, old_prof_handler)
        if soft is not None:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _name_in(label, parameter, message):
    key = parameter.split("[", 1)[1][:-1] if "[" in parameter else parameter
    if key.startswith("*"):
        return True  # an unnamed positional (compose_zcdp(*rhos)) is named by its position
    names = (key, key.rstrip("_")) + ALIASES.get(label, {}).get(key, ())
    return any(n in message for n in names)


def _outcome(label, parameter, value):
    """None if the call behaves; otherwise a description of the failure."""
    func, args, kwargs = _perturbed(TARGETS[label], parameter, value)
    start = time.process_time()
    signal.setitimer(signal.ITIMER_PROF, TIME_LIMIT)
    signal.setitimer(signal.ITIMER_REAL, WALL_LIMIT)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            func(*args, **kwargs)
    except Hang:
        return f"{label}({parameter}={_label(value)}): no result after {TIME_LIMIT} CPU s or {WALL_LIMIT} s wall (hang)"
    except FileNotFoundError as exc:
        if parameter not in PATH_PARAMETERS or str(value) not in str(exc):
            return f"{label}({parameter}={_label(value)}): FileNotFoundError: {exc}"
        return None
    except (ValueError, TypeError) as exc:
        if not _name_in(label, parameter, str(exc)):
            return f"{label}({parameter}={_label(value)}): {type(exc).__name__} does not name {parameter!r}: {exc}"
        return None
    except Exception as exc:  # noqa: BLE001 - every other exception is the failure we look for
        return f"{label}({parameter}={_label(value)}): {type(exc).__name__}: {str(exc)[:200]}"
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
    elapsed = time.process_time() - start
    if elapsed > TIME_LIMIT:
        return f"{label}({parameter}={_label(value)}): took {elapsed:.1f} CPU s (limit {TIME_LIMIT} s)"
    return None


# ---------------------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------------------


def test_every_public_callable_is_fuzzed_or_listed():
    names = {q for q, _ in _exported()}
    covered = set(BASELINES) | set(UNFUZZED)
    wildcard = {q.split(".")[0] for q in UNFUZZED if q.endswith(".*")}
    missing = sorted(q for q in names - covered if q.split(".")[0] not in wildcard)
    assert not missing, f"public callables with neither a baseline nor a reason: {missing}"
    stale = sorted(q for q in covered if not q.endswith(".*") and q not in names)
    assert not stale, f"table entries that are not public callables: {stale}"
    assert not set(BASELINES) & set(UNFUZZED)
    from fedbandit.protocols import available

    assert {label.split(":", 1)[1] for label in TARGETS if label.startswith("protocols.create:")} == set(available())


@pytest.mark.parametrize("label", sorted(TARGETS))
def test_baseline_call_is_valid(label):
    """The unperturbed call succeeds (so a refusal in the fuzz tests is due to the perturbation)."""
    func, args, kwargs = TARGETS[label]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        func(*args, **kwargs)


@pytest.mark.parametrize("label", sorted(TARGETS))
def test_bad_values_grid(label):
    """Every value of BAD_VALUES in every parameter: refused by name, or accepted; never a crash or hang."""
    failures = []
    with _limits():
        for parameter in _perturbable(label):
            for value in BAD_VALUES:
                failure = _outcome(label, parameter, value)
                if failure:
                    failures.append(failure)
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures)


_values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0.0, -0.0, 1e-320, 5e-324, 1 - 1e-16, 1 + 1e-15, 0.5, 1.0, 2.0]),
    st.text(max_size=4),
    st.none(),
    st.booleans(),
    st.lists(st.floats(allow_nan=True), max_size=3),
    st.tuples(st.integers(-3, 3), st.integers(-3, 3)),
)


@pytest.mark.parametrize("label", sorted(TARGETS))
@settings(max_examples=15, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_values(label, data):
    """Hypothesis-drawn values (floats, integers up to 2^70, text, None, lists, ...) in one parameter."""
    names = _perturbable(label)
    if not names:
        return
    parameter = data.draw(st.sampled_from(names), label="parameter")
    value = data.draw(_values, label="value")
    with _limits():
        failure = _outcome(label, parameter, value)
    assert failure is None, failure


def _spin(n):
    """Computes without end (a CPU hang)."""
    x = 0
    while True:
        x = (x + n) % 7


def _block(n):
    """Waits without computing (a blocked call)."""
    time.sleep(n)


@pytest.mark.parametrize("func, limit_name", [(_spin, "TIME_LIMIT"), (_block, "WALL_LIMIT")])
def test_the_limits_catch_a_spinning_and_a_blocked_call(monkeypatch, func, limit_name):
    """The hang check can fail: a call that spins past the CPU limit, or sleeps past the wall backstop,
    is reported as a hang (limits shortened so the test is quick)."""
    module = sys.modules[__name__]
    monkeypatch.setattr(module, "TIME_LIMIT", 0.3)
    monkeypatch.setattr(module, "WALL_LIMIT", 0.6)
    monkeypatch.setitem(TARGETS, "planted", lambda: (func, (), {"n": 1}))
    with _limits():
        failure = _outcome("planted", "n", 5)
    assert failure is not None and "hang" in failure, failure
